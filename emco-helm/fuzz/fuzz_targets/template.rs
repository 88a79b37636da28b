//! Parses and executes arbitrary template text against a fixed data set: no input may panic,
//! hang or exhaust memory.
#![no_main]

use libfuzzer_sys::fuzz_target;

use std::sync::Arc;

use emco_helm::value::Bytes;
use emco_helm::{yaml, TemplateLimits, Templates, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let values = yaml::parse_values_document(
        "s: str\nn: 3\nf: 1.5\nl: [a, 1, null, {k: v}]\nm: {a: 1, b: [x]}\nt: true\n",
    )
    .unwrap_or_default();
    // A Go `[]byte` (`.Files.GetBytes`), not valid UTF-8.
    if let Value::Map(m) = &values {
        m.insert(
            "b",
            Value::Object(Arc::new(Bytes(Arc::new(b"hi\xff".to_vec())))),
        );
    }
    let mut set = Templates::new();
    if set.add("fuzz", text).is_err() {
        return;
    }
    let limits = TemplateLimits {
        max_depth: 40,
        max_output: 1 << 20,
        max_steps: 200_000,
    };
    for name in set.names() {
        let _ = set.execute(&name, &values, &limits);
    }
});
