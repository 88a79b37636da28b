//! Placement benchmark: 50 apps with label intents (allOf label, a nested and a top-level anyOf
//! group) resolved and finalized over 10,000 clusters in 5 providers, inside a logical cloud.
//!
//! Run with `cargo bench -p emco-core --bench placement`. Prints a table and writes it to
//! `bench-results/placement.txt` at the workspace root.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use emco_core::placement::{
    AllOf, AnyOf, AppPlacementIntent, AppPlacementSpec, ClusterRef, FirstLexicographic, Inventory,
    PlacementIntent, finalize, resolve,
};
use emco_core::{Metadata, Result};

const PROVIDERS: usize = 5;
const CLUSTERS: usize = 10_000;
const APPS: usize = 50;
const WARMUP: usize = 20;
const ITERATIONS: usize = 300;

fn provider(i: usize) -> String {
    format!("provider-{}", i % PROVIDERS)
}

/// Every cluster carries a region (1 in 10), a tier (1 in 4) and maybe `gpu` (1 in 7).
fn build_inventory() -> Inventory {
    let mut b = Inventory::builder();
    let mut members = Vec::with_capacity(CLUSTERS);
    for i in 0..CLUSTERS {
        let c = ClusterRef::new(provider(i), format!("cluster-{i:05}"));
        let mut labels = vec![
            format!("region-{}", (i / PROVIDERS) % 10),
            format!("tier-{}", i % 4),
        ];
        if i % 7 == 0 {
            labels.push("gpu".to_owned());
        }
        members.push(c.clone());
        b.add_cluster(c, labels);
    }
    b.logical_cloud(members).build()
}

fn entry(p: usize, label: String) -> AnyOf {
    AnyOf {
        cluster_provider: provider(p),
        cluster: String::new(),
        cluster_label: label,
    }
}

fn intents() -> Vec<AppPlacementIntent> {
    (0..APPS)
        .map(|k| AppPlacementIntent {
            metadata: Metadata::named(format!("app-{k}-placement")),
            spec: AppPlacementSpec {
                app: format!("app-{k}"),
                intent: PlacementIntent {
                    all_of: vec![AllOf {
                        cluster_provider: provider(k),
                        cluster: String::new(),
                        cluster_label: format!("region-{}", k % 10),
                        any_of: vec![entry(k + 2, "gpu".to_owned())],
                    }],
                    any_of: vec![
                        entry(k + 1, format!("tier-{}", k % 4)),
                        entry(k + 3, format!("region-{}", (k + 5) % 10)),
                    ],
                },
            },
        })
        .collect()
}

/// Resolve and finalize every app; placement controllers reject clusters ending in 7.
fn run(intents: &[AppPlacementIntent], inv: &Inventory) -> Result<usize> {
    let mut placed = 0;
    for p in resolve(intents, inv)? {
        placed += finalize(&p, |c| !c.cluster().ends_with('7'), &FirstLexicographic)?
            .clusters
            .len();
    }
    Ok(placed)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let inv = build_inventory();
    let build = t.elapsed();
    let intents = intents();

    let placed = run(&intents, &inv)?;
    let candidates: usize = resolve(&intents, &inv)?
        .iter()
        .map(|p| p.candidates().len())
        .sum();
    for _ in 0..WARMUP {
        black_box(run(black_box(&intents), black_box(&inv))?);
    }
    let mut samples = Vec::with_capacity(ITERATIONS);
    for _ in 0..ITERATIONS {
        let t = Instant::now();
        black_box(run(black_box(&intents), black_box(&inv))?);
        samples.push(t.elapsed());
    }
    samples.sort_unstable();
    let pick = |q: f64| {
        let i = ((samples.len() - 1) as f64 * q).round() as usize;
        samples[i.min(samples.len() - 1)]
    };

    let mut out = String::new();
    writeln!(
        out,
        "placement: {APPS} apps (allOf label + 2 anyOf groups each) over {CLUSTERS} clusters, {PROVIDERS} providers, logical cloud = all"
    )?;
    writeln!(
        out,
        "candidates per run: {candidates}; clusters placed per run: {placed}; iterations: {ITERATIONS}"
    )?;
    writeln!(out)?;
    writeln!(out, "| step | min ms | median ms | p99 ms | max ms |")?;
    writeln!(out, "|---|---|---|---|---|")?;
    writeln!(
        out,
        "| resolve + finalize, 50 apps | {:.3} | {:.3} | {:.3} | {:.3} |",
        ms(pick(0.0)),
        ms(pick(0.5)),
        ms(pick(0.99)),
        ms(pick(1.0))
    )?;
    writeln!(out, "| inventory build (once) | {:.3} | | | |", ms(build))?;
    writeln!(out)?;
    writeln!(
        out,
        "target: median < 10 ms -> {}",
        if pick(0.5) < Duration::from_millis(10) {
            "met"
        } else {
            "NOT met"
        }
    )?;
    print!("{out}");

    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench-results");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("placement.txt"), out)?;
    Ok(())
}
