//! Any text as a Go template, parsed and run against a small values tree within limits: an
//! error is a fine answer; a panic, a hang past the step limit or output past its limit is not.
#![no_main]

use emco_helm::yaml::parse_values_document;
use emco_helm::{TemplateLimits, Templates};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = TemplateLimits {
        max_depth: 50,
        max_output: 1 << 20,
        max_steps: 100_000,
    };
    let values = parse_values_document("name: n\nlist: [1, 2]\nm: {k: [v]}\nb: true\n")
        .expect("the fixed values parse");
    let mut set = Templates::new();
    if set.add("t.yaml", &String::from_utf8_lossy(data)).is_ok()
        && let Ok(out) = set.execute("t.yaml", &values, &limits)
    {
        assert!(out.len() <= limits.max_output);
    }
});
