//! Reads arbitrary YAML and writes it back: neither may panic, and what is written reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;

use emco_helm::yaml;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(value) = yaml::parse_values_document(text) else {
        return;
    };
    if let Ok(out) = yaml::to_yaml(&value) {
        // The writer follows Go's yaml.v2, which treats NEL, LS and PS as line breaks (and
        // indents after them inside quotes); the reader is YAML 1.2 and keeps them as text, so
        // such strings do not read back unchanged. A known divergence, not a crash.
        if out.contains(['\u{85}', '\u{2028}', '\u{2029}']) {
            return;
        }
        let back = yaml::parse_values_document(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert!(back.deep_equal(&value), "{out}");
    }
});
