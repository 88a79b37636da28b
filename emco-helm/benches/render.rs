//! Renders the prometheus-operator chart of `shared/testdata` 1,000 times (templates parsed once
//! and cached by chart digest) and prints the time per render; the table is also written to
//! `bench-results/emco-helm-render.txt`.
//!
//! Run with `cargo bench -p emco-helm --bench render`.

use std::path::Path;
use std::time::{Duration, Instant};

use emco_helm::{Chart, RenderOptions, render, yaml};

const RENDERS: u32 = 1000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let charts = root.join("../../shared/testdata/emco-examples/helm_charts/prometheus-operator");
    let load_start = Instant::now();
    let chart = Chart::load_dir(charts.join("helm/prometheus-operator"))?;
    let load = load_start.elapsed();
    let values = yaml::parse_values_document(&std::fs::read_to_string(
        charts.join("profile/override_values.yaml"),
    )?)?;
    let opts = RenderOptions {
        values: vec![values],
        ..RenderOptions::default()
    };

    let first_start = Instant::now();
    let first = render(&chart, &opts)?.to_helm_output(&opts)?;
    let first_render = first_start.elapsed();

    let mut times: Vec<Duration> = Vec::with_capacity(RENDERS as usize);
    let total_start = Instant::now();
    for _ in 0..RENDERS {
        let t = Instant::now();
        let out = render(&chart, &opts)?.to_helm_output(&opts)?;
        times.push(t.elapsed());
        if out.len() != first.len() {
            return Err("renders differ".into());
        }
    }
    let total = total_start.elapsed();
    times.sort();
    let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let table = format!(
        "emco-helm render bench: prometheus-operator ({} templates incl. subcharts, {} bytes of output)\n\
         | what | ms |\n|---|---|\n\
         | load chart from directory | {:.2} |\n\
         | first render (parses templates) | {:.2} |\n\
         | mean of {RENDERS} cached renders | {:.3} |\n\
         | p50 | {:.3} |\n| p99 | {:.3} |\n| total for {RENDERS} | {:.0} |\n",
        count_templates(&chart),
        first.len(),
        ms(load),
        ms(first_render),
        ms(total) / f64::from(RENDERS),
        ms(pct(0.5)),
        ms(pct(0.99)),
        ms(total),
    );
    print!("{table}");
    let dir = root.join("../bench-results");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("emco-helm-render.txt"), &table)?;
    Ok(())
}

fn count_templates(c: &Chart) -> usize {
    c.templates.len() + c.dependencies.iter().map(count_templates).sum::<usize>()
}
