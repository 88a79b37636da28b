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
        let back = yaml::parse_values_document(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
        assert!(back.deep_equal(&value), "{out}");
    }
});
