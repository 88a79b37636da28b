//! Any text as a values document (Helm's YAML) and as a document of EMCO's files (go-yaml):
//! parsed or refused, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    drop(emco_helm::yaml::parse_values_document(&text));
    drop(emco_go::yaml::from_str::<serde_json::Value>(&text));
});
