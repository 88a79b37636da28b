//! Golden tests: the example charts of `shared/testdata` rendered with their profiles' values.
//!
//! Set `EMCO_HELM_UPDATE_GOLDEN=1` to rewrite the golden files after a reviewed change.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::path::{Path, PathBuf};

use emco_helm::{Chart, RenderOptions, Value, render, render::split_manifests, yaml};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/emco-examples/helm_charts")
}

/// (golden name, chart directory, profile values file, --set expressions)
fn cases() -> Vec<(
    &'static str,
    &'static str,
    Option<&'static str>,
    Vec<String>,
)> {
    vec![
        (
            "collectd",
            "collectd/helm/collectd",
            Some("collectd/profile/override_values.yaml"),
            vec![],
        ),
        ("http-client", "http-client/helm/http-client", None, vec![]),
        ("http-server", "http-server/helm/http-server", None, vec![]),
        (
            "m3db",
            "m3db/helm/m3db",
            Some("m3db/profile/override_values.yaml"),
            vec![],
        ),
        (
            "operators-latest",
            "operators-latest/helm/operator",
            Some("operators-latest/profile/override_values.yaml"),
            vec![],
        ),
        (
            "prometheus-operator",
            "prometheus-operator/helm/prometheus-operator",
            Some("prometheus-operator/profile/override_values.yaml"),
            vec![],
        ),
    ]
}

fn options(values: Option<&str>, set: Vec<String>) -> RenderOptions {
    let values = values
        .map(|f| {
            yaml::parse_values_document(&std::fs::read_to_string(testdata().join(f)).unwrap())
                .unwrap()
        })
        .into_iter()
        .collect();
    RenderOptions {
        release_name: "r1".to_owned(),
        namespace: "emco".to_owned(),
        values,
        set,
        include_crds: true,
        ..RenderOptions::default()
    }
}

/// Every document is a YAML map with `apiVersion`, `kind` and `metadata.name`.
fn assert_valid_objects(name: &str, out: &str) {
    for doc in split_manifests(out) {
        let body: String = doc
            .lines()
            .filter(|l| !l.starts_with("# Source:"))
            .collect::<Vec<_>>()
            .join("\n");
        let v = yaml::parse_values_document(&body).unwrap_or_else(|e| panic!("{name}: {e}\n{doc}"));
        if v.is_nil() {
            continue;
        }
        let Value::Map(m) = &v else {
            panic!("{name}: not a map:\n{doc}")
        };
        for key in ["apiVersion", "kind"] {
            assert!(
                matches!(m.get(key), Some(Value::String(s)) if !s.is_empty()),
                "{name}: no {key}:\n{doc}"
            );
        }
        let Some(Value::Map(md)) = m.get("metadata") else {
            panic!("{name}: no metadata:\n{doc}")
        };
        assert!(
            matches!(md.get("name"), Some(Value::String(s)) if !s.is_empty()),
            "{name}: no name:\n{doc}"
        );
    }
}

#[test]
fn example_charts_match_their_golden_output() {
    let update = std::env::var_os("EMCO_HELM_UPDATE_GOLDEN").is_some();
    for (name, dir, values, set) in cases() {
        let chart = Chart::load_dir(testdata().join(dir)).unwrap();
        let mut opts = options(values, set);
        // The CRD files of prometheus-operator would add a megabyte of verbatim text to the golden.
        opts.include_crds = name != "prometheus-operator";
        let out = render(&chart, &opts)
            .and_then(|r| r.to_helm_output(&opts))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_valid_objects(name, &out);
        let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(format!("{name}.yaml"));
        if update {
            std::fs::write(&golden, &out).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(&golden)
            .unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
        if out != want {
            let line = out
                .lines()
                .zip(want.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            panic!(
                "{name} differs from {} at line {}:\n got: {:?}\nwant: {:?}",
                golden.display(),
                line + 1,
                out.lines().nth(line),
                want.lines().nth(line)
            );
        }
    }
}

#[test]
fn prometheus_operator_has_its_subcharts_and_profile_values() {
    let chart =
        Chart::load_dir(testdata().join("prometheus-operator/helm/prometheus-operator")).unwrap();
    let opts = options(
        Some("prometheus-operator/profile/override_values.yaml"),
        vec![],
    );
    let r = render(&chart, &opts).unwrap();
    let has = |r: &emco_helm::Rendered, prefix: &str| {
        r.manifests.iter().any(|m| m.source.starts_with(prefix))
    };
    assert!(has(&r, "prometheus-operator/charts/grafana/"));
    // kube-state-metrics is disabled by its condition in the chart's values, until enabled.
    assert!(!has(&r, "prometheus-operator/charts/kube-state-metrics/"));
    let mut on = opts.clone();
    on.set.push("kubeStateMetrics.enabled=true".to_owned());
    assert!(has(
        &render(&chart, &on).unwrap(),
        "prometheus-operator/charts/kube-state-metrics/"
    ));
    assert!(
        r.manifests
            .iter()
            .all(|m| m.content.contains("r1") || !m.content.contains("release-name"))
    );
    // Install order: every kind appears no earlier than the kinds before it.
    let rank = |k: &str| {
        [
            "ServiceAccount",
            "Secret",
            "ConfigMap",
            "ClusterRole",
            "Service",
            "Deployment",
        ]
        .iter()
        .position(|x| *x == k)
    };
    let ranks: Vec<usize> = r.manifests.iter().filter_map(|m| rank(&m.kind)).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    // The parent chart's values reach the subchart: grafana's password comes from them.
    let secret = r
        .manifests
        .iter()
        .find(|m| m.source.ends_with("grafana/templates/secret.yaml"))
        .unwrap();
    assert!(
        secret
            .content
            .contains("admin-password: \"cHJvbS1vcGVyYXRvcg==\""),
        "{}",
        secret.content
    );
}

#[test]
fn cli_prints_helm_template_output_and_fails_with_an_error() {
    let exe = env!("CARGO_BIN_EXE_emco-helm");
    let dir = testdata().join("collectd");
    let out = std::process::Command::new(exe)
        .args([
            "template",
            dir.join("helm/collectd").to_str().unwrap(),
            "--release",
            "r1",
            "-n",
            "emco",
            "--include-crds",
        ])
        .args([
            "-f",
            dir.join("profile/override_values.yaml").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let golden = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/collectd.yaml"),
    )
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), golden);

    let out = std::process::Command::new(exe)
        .args([
            "template",
            dir.join("helm/collectd").to_str().unwrap(),
            "--show-only",
            "templates/service.yaml",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("---\n# Source: collectd/templates/service.yaml\n"),
        "{text}"
    );
    assert_eq!(text.matches("# Source:").count(), 1);

    let out = std::process::Command::new(exe)
        .args(["template", "/nonexistent/chart"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("Error: "));
    let out = std::process::Command::new(exe)
        .args([
            "template",
            dir.join("helm/collectd").to_str().unwrap(),
            "--set",
            "novalue",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no value"));
}
