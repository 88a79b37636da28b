//! Any bytes as a chart archive: unpacked within the size limits or refused; a chart that loads
//! renders within the template limits or is refused.
#![no_main]

use emco_helm::archive::{ArchiveLimits, read_all};
use emco_helm::{Chart, RenderOptions, TemplateLimits, render};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = ArchiveLimits {
        max_file: 1 << 16,
        max_total: 1 << 18,
    };
    drop(read_all(data, limits));
    if let Ok(chart) = Chart::load_tgz(data) {
        let opts = RenderOptions {
            release_name: "r".into(),
            limits: TemplateLimits {
                max_depth: 50,
                max_output: 1 << 20,
                max_steps: 100_000,
            },
            ..RenderOptions::default()
        };
        drop(render(&chart, &opts));
    }
});
