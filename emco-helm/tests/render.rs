//! Helm semantics of rendering, on small charts written for each case.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use emco_helm::{Chart, HelmCompat, RenderOptions, Value, render, yaml};

fn chart(files: &[(&str, &str)]) -> Chart {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    Chart::load_dir(dir.path()).unwrap()
}

fn output(c: &Chart, opts: &RenderOptions) -> String {
    render(c, opts)
        .and_then(|r| r.to_helm_output(opts))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn error(c: &Chart, opts: &RenderOptions) -> String {
    render(c, opts)
        .and_then(|r| r.to_helm_output(opts))
        .unwrap_err()
        .to_string()
}

const CHART_YAML: &str = "apiVersion: v2\nname: app\nversion: 1.0.0\nappVersion: \"2.1\"\n";

fn cm(name: &str, body: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{body}")
}

#[test]
fn values_precedence_subcharts_and_globals() {
    let c = chart(&[
        (
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.x\n- name: sub\n  alias: other\n  version: '*'\n  condition: other.enabled\n",
        ),
        (
            "values.yaml",
            "a: chart\nb: chart\nc: chart\ngone: x\nglobal:\n  g: parent\nsub:\n  s: from-parent\nother:\n  enabled: false\n",
        ),
        (
            "templates/cm.yaml",
            &cm(
                "top",
                "  v: {{ .Values.a }}-{{ .Values.b }}-{{ .Values.c }}-{{ .Values.gone | default \"deleted\" }}\n  n: {{ .Values.n }}\n",
            ),
        ),
        (
            "charts/sub/Chart.yaml",
            "apiVersion: v2\nname: sub\nversion: 0.1.5\n",
        ),
        (
            "charts/sub/values.yaml",
            "s: sub-default\nt: sub-default\nglobal:\n  g: sub\n  h: sub\n",
        ),
        (
            "charts/sub/templates/cm.yaml",
            &cm(
                "{{ .Chart.Name }}",
                "  v: {{ .Values.s }}-{{ .Values.t }}-{{ .Values.global.g }}-{{ .Values.global.h }}-{{ .Values.a | default \"scoped\" }}\n",
            ),
        ),
    ]);
    let values = yaml::parse_values_document("b: file\ngone: null\n").unwrap();
    let opts = RenderOptions {
        values: vec![values],
        set: vec!["c=set,n=5".to_owned()],
        ..RenderOptions::default()
    };
    let out = output(&c, &opts);
    assert!(
        out.contains("  v: chart-file-set-deleted\n  n: 5\n"),
        "{out}"
    );
    assert!(
        out.contains("  v: from-parent-sub-default-parent-sub-scoped\n"),
        "{out}"
    );
    assert!(
        !out.contains("name: other"),
        "the aliased copy is disabled by its condition:\n{out}"
    );
    let on = RenderOptions {
        set: vec!["other.enabled=true".to_owned()],
        ..RenderOptions::default()
    };
    let out = output(&c, &on);
    assert!(out.contains("name: other\n"), "{out}");
    assert!(
        out.contains("# Source: app/charts/other/templates/cm.yaml"),
        "{out}"
    );
}

#[test]
fn tags_enable_and_disable_subcharts() {
    let c = chart(&[
        (
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n  tags: [extra]\n",
        ),
        ("values.yaml", "tags:\n  extra: false\n"),
        (
            "charts/sub/Chart.yaml",
            "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
        ),
        ("charts/sub/templates/cm.yaml", &cm("sub", "  a: b\n")),
    ]);
    assert!(!output(&c, &RenderOptions::default()).contains("name: sub"));
    let on = RenderOptions {
        set: vec!["tags.extra=true".to_owned()],
        ..RenderOptions::default()
    };
    assert!(output(&c, &on).contains("name: sub"));
}

#[test]
fn output_is_sorted_split_and_hooks_come_last() {
    let c = chart(&[
        ("Chart.yaml", CHART_YAML),
        (
            "templates/a.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n# just a comment\n---\n\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\n",
        ),
        (
            "templates/b.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\napiVersion: x/v1\nkind: Zebra\nmetadata:\n  name: z\n",
        ),
        (
            "templates/hooks.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: h2\n  annotations:\n    helm.sh/hook: pre-install,post-install\n    helm.sh/hook-weight: \"5\"\n---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: h1\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"-1\"\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test-success\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: old\n  annotations:\n    helm.sh/hook: crd-install\n",
        ),
        (
            "templates/_helpers.tpl",
            "{{ define \"x\" }}X{{ end }}not rendered",
        ),
        (
            "templates/NOTES.txt",
            "Thanks for installing {{ .Chart.Name }} {{ .Chart.AppVersion }}.",
        ),
        ("templates/empty.yaml", "{{ if false }}x{{ end }}\n"),
        ("crds/crd.yaml", "kind: CustomResourceDefinition\n"),
    ]);
    // Helm 3's separator; Helm 4.2.4's is checked at the end.
    let opts = RenderOptions {
        include_crds: true,
        helm: HelmCompat::V3,
        ..RenderOptions::default()
    };
    let r = render(&c, &opts).unwrap();
    assert_eq!(r.notes, "Thanks for installing app 2.1.");
    let kinds: Vec<&str> = r.manifests.iter().map(|m| m.kind.as_str()).collect();
    assert_eq!(kinds, ["Namespace", "Service", "Deployment", "", "Zebra"]);
    let pre: Vec<&str> = r
        .hooks_for("pre-install")
        .iter()
        .map(|h| h.manifest.name.as_str())
        .collect();
    assert_eq!(pre, ["h1", "h2"]);
    assert_eq!(
        r.hooks.len(),
        3,
        "the crd-install hook of Helm 2 is dropped"
    );
    let out = r.to_helm_output(&opts).unwrap();
    // As Helm's separator pattern does, the `---` right after an empty document stays in the
    // next document.
    let expected_start = "---\n# Source: app/crds/crd.yaml\nkind: CustomResourceDefinition\n\n---\n# Source: app/templates/b.yaml\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\n# Source: app/templates/a.yaml\n---\napiVersion: v1\nkind: Service\n";
    assert!(out.starts_with(expected_start), "{out}");
    assert!(
        out.contains("---\n# Source: app/templates/a.yaml\n# just a comment\n---\n"),
        "{out}"
    );
    assert!(out.ends_with("name: h1\n  annotations:\n    helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"-1\"\n"), "{out}");
    assert!(out.contains("helm.sh/hook: test-success\n"), "{out}");
    assert!(!out.contains("not rendered") && !out.contains("Thanks"));
    let skip = RenderOptions {
        skip_tests: true,
        helm: HelmCompat::V3,
        ..RenderOptions::default()
    };
    let out = render(&c, &skip).unwrap().to_helm_output(&skip).unwrap();
    assert!(
        !out.contains("name: t\n") && !out.contains("CustomResourceDefinition"),
        "{out}"
    );
    let only = RenderOptions {
        show_only: vec!["templates/b.yaml".to_owned()],
        helm: HelmCompat::V3,
        ..RenderOptions::default()
    };
    let out = render(&c, &only).unwrap().to_helm_output(&only).unwrap();
    assert!(
        out.starts_with("---\n# Source: app/templates/b.yaml\n")
            && out.matches("# Source").count() == 2,
        "{out}"
    );
    let missing = RenderOptions {
        show_only: vec!["templates/zz.yaml".to_owned()],
        ..RenderOptions::default()
    };
    assert!(error(&c, &missing).contains("could not find template templates/zz.yaml in chart"));
    // Helm 4.2.4 cuts before every line that starts with `---` and keeps each manifest's
    // trailing newline: the comment is a manifest of its own and the Service stands alone.
    let current = RenderOptions {
        include_crds: true,
        ..RenderOptions::default()
    };
    let out = render(&c, &current)
        .unwrap()
        .to_helm_output(&current)
        .unwrap();
    assert!(
        out.contains(
            "name: ns\n\n---\n# Source: app/templates/a.yaml\napiVersion: v1\nkind: Service\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("---\n# Source: app/templates/a.yaml\n# just a comment\n\n---\n"),
        "{out}"
    );
}

#[test]
fn built_in_object_errors_and_kube_version() {
    let c = chart(&[
        ("Chart.yaml", CHART_YAML),
        ("templates/bad.yaml", "{{ .Chart.Nope }}"),
    ]);
    let err = error(&c, &RenderOptions::default());
    assert!(
        err.contains("can't evaluate field Nope in type *chart.Metadata"),
        "{err}"
    );
    let c = chart(&[
        ("Chart.yaml", CHART_YAML),
        (
            "templates/cm.yaml",
            &cm("x", "  k: {{ .Capabilities.KubeVersion }}\n"),
        ),
    ]);
    let out = output(
        &c,
        &RenderOptions {
            kube_version: Some("1.25.3".to_owned()),
            ..RenderOptions::default()
        },
    );
    assert!(out.contains("  k: v1.25.3\n"), "{out}");
}

#[test]
fn built_in_object_fields() {
    let c = chart(&[
        ("Chart.yaml", CHART_YAML),
        ("files/conf.txt", "hello\n"),
        (
            "templates/cm.yaml",
            &cm(
                "{{ .Release.Name }}",
                "  t: {{ .Template.Name }} {{ .Template.BasePath }}\n  c: {{ .Chart.Name }}-{{ .Chart.Version }}\n  r: {{ .Release.Namespace }} {{ .Release.IsInstall }} {{ .Release.IsUpgrade }} {{ .Release.Revision }} {{ .Release.Service }}\n  k: {{ .Capabilities.KubeVersion }} {{ .Capabilities.KubeVersion.Major }} {{ .Capabilities.KubeVersion.Minor }} {{ .Capabilities.KubeVersion.GitVersion }}\n  a: {{ .Capabilities.APIVersions.Has \"apps/v1\" }} {{ .Capabilities.APIVersions.Has \"monitoring.coreos.com/v1\" }}\n  f: {{ .Files.Get \"files/conf.txt\" | trim }} {{ (.Files.Glob \"files/*\").AsConfig | b64enc }}\n  s: {{ semverCompare \">=1.19-0\" .Capabilities.KubeVersion.GitVersion }}\n",
            ),
        ),
    ]);
    let opts = RenderOptions {
        release_name: "rel".to_owned(),
        namespace: "ns1".to_owned(),
        api_versions: vec!["monitoring.coreos.com/v1".to_owned()],
        ..RenderOptions::default()
    };
    let out = output(&c, &opts);
    let want = "  t: app/templates/cm.yaml app/templates\n  c: app-1.0.0\n  r: ns1 true false 1 Helm\n  k: v1.20.0 1 20 v1.20.0\n  a: true true\n  f: hello Y29uZi50eHQ6IHwKICBoZWxsbw==\n  s: true\n";
    assert!(out.contains(want), "{out}");
}

#[test]
fn errors_name_the_template_file() {
    let base = [("Chart.yaml", CHART_YAML)];
    let with = |name: &'static str, body: &'static str| {
        let mut files = base.to_vec();
        files.push((name, body));
        chart(&files)
    };
    let opts = RenderOptions::default();
    let err = error(
        &with(
            "templates/r.yaml",
            "a: {{ required \"port is required\" .Values.port }}",
        ),
        &opts,
    );
    assert_eq!(
        err,
        "execution error at (app/templates/r.yaml:1:6): port is required"
    );
    let err = error(&with("templates/p.yaml", "a\n{{ if }}"), &opts);
    assert_eq!(
        err,
        "parse error at (app/templates/p.yaml:2): missing value for if"
    );
    let err = error(&with("templates/n.yaml", "{{ .Values.a.b }}"), &opts);
    assert!(err.starts_with("template: app/templates/n.yaml:1:10: executing \"app/templates/n.yaml\" at <.Values.a.b>: nil pointer evaluating interface {}.b"), "{err}");
    let err = error(&with("templates/y.yaml", "a: [\n"), &opts);
    assert!(
        err.starts_with("YAML parse error on app/templates/y.yaml"),
        "{err}"
    );
    let err = error(&with("templates/f.yaml", "{{ fail \"custom\" }}"), &opts);
    // Helm wraps `fail` like `required`.
    assert_eq!(err, "execution error at (app/templates/f.yaml:1:3): custom");
}

#[test]
fn chart_level_checks() {
    let lib = chart(&[(
        "Chart.yaml",
        "apiVersion: v2\nname: lib\nversion: 1.0.0\ntype: library\n",
    )]);
    assert!(error(&lib, &RenderOptions::default()).contains("library charts are not installable"));
    let kube = chart(&[(
        "Chart.yaml",
        "apiVersion: v2\nname: k\nversion: 1.0.0\nkubeVersion: \">=1.22.0\"\n",
    )]);
    assert!(error(&kube, &RenderOptions::default()).contains(
        "chart requires kubeVersion: >=1.22.0 which is incompatible with Kubernetes v1.20.0"
    ));
    assert!(
        render(
            &kube,
            &RenderOptions {
                kube_version: Some("v1.23.0".to_owned()),
                ..RenderOptions::default()
            }
        )
        .is_ok()
    );
    let dep = chart(&[(
        "Chart.yaml",
        "apiVersion: v2\nname: d\nversion: 1.0.0\ndependencies:\n- name: missing\n  version: 1.0.0\n",
    )]);
    assert!(
        error(&dep, &RenderOptions::default()).contains("missing in charts/ directory: missing")
    );
    let ok = chart(&[("Chart.yaml", CHART_YAML)]);
    let bad_name = RenderOptions {
        release_name: "Bad_Name".to_owned(),
        ..RenderOptions::default()
    };
    assert!(error(&ok, &bad_name).contains("release name is invalid"));
    assert_eq!(output(&ok, &RenderOptions::default()), "\n");
}

#[test]
fn library_subcharts_provide_definitions() {
    let c = chart(&[
        (
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: common\n  version: 1.0.0\n",
        ),
        (
            "templates/cm.yaml",
            &cm("x", "  v: {{ include \"common.hello\" . }}\n"),
        ),
        (
            "charts/common/Chart.yaml",
            "apiVersion: v2\nname: common\nversion: 1.0.0\ntype: library\n",
        ),
        (
            "charts/common/templates/_h.tpl",
            "{{ define \"common.hello\" }}hi {{ .Chart.Name }}{{ end }}",
        ),
        ("charts/common/templates/cm.yaml", &cm("never", "  a: b\n")),
    ]);
    let out = output(&c, &RenderOptions::default());
    assert!(
        out.contains("  v: hi app\n") && !out.contains("never"),
        "{out}"
    );
}

#[test]
fn values_files_may_repeat_keys_and_use_yaml_1_1() {
    let v = yaml::parse_values_document("replicas: 1\nreplicas: 3\nflag: on\n").unwrap();
    let c = chart(&[
        ("Chart.yaml", CHART_YAML),
        (
            "templates/cm.yaml",
            &cm(
                "x",
                "  r: {{ .Values.replicas }}\n  f: {{ .Values.flag }}\n  k: {{ kindOf .Values.replicas }}\n",
            ),
        ),
    ]);
    let out = output(
        &c,
        &RenderOptions {
            values: vec![v],
            ..RenderOptions::default()
        },
    );
    assert!(out.contains("  r: 3\n  f: true\n  k: float64\n"), "{out}");
    assert!(matches!(
        yaml::parse_values_document("a: 1").unwrap(),
        Value::Map(_)
    ));
}

#[test]
fn import_values_from_subcharts() {
    let c = chart(&[
        (
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n  import-values:\n  - data\n  - child: default.z\n    parent: myimports\n",
        ),
        ("values.yaml", "myimports:\n  keep: parent\n"),
        (
            "templates/cm.yaml",
            &cm(
                "x",
                "  v: {{ .Values.x }} {{ .Values.myimports.a }} {{ .Values.myimports.keep }}\n",
            ),
        ),
        (
            "charts/sub/Chart.yaml",
            "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
        ),
        (
            "charts/sub/values.yaml",
            "default:\n  z:\n    a: 1\n    keep: child\nexports:\n  data:\n    x: 1\n",
        ),
    ]);
    let out = output(&c, &RenderOptions::default());
    assert!(out.contains("  v: 1 1 parent\n"), "{out}");
}

#[test]
fn renders_packaged_charts() {
    let dir = tempfile::tempdir().unwrap();
    let tgz = dir.path().join("app-1.0.0.tgz");
    let file = std::fs::File::create(&tgz).unwrap();
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::fast(),
    ));
    for (path, body) in [
        ("app/Chart.yaml", CHART_YAML.to_owned()),
        ("app/values.yaml", "name: packaged\n".to_owned()),
        (
            "app/templates/cm.yaml",
            cm("{{ .Values.name }}", "  a: b\n"),
        ),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path, body.as_bytes()).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
    let c = Chart::load_tgz(&std::fs::read(&tgz).unwrap()).unwrap();
    assert!(output(&c, &RenderOptions::default()).contains("name: packaged\n"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emco-helm"))
        .args(["template", tgz.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("name: packaged\n"));
}

/// Renders again give the same sorted manifests and hooks (their heads come from what the first
/// render parsed), and a document that is not YAML is refused at every render, under its own
/// file's name, even when the same text was a valid part of another file.
#[test]
fn repeated_renders_sort_alike_and_refuse_alike() {
    let docs = "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n---\n\
                apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n---\n\
                apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: job\n  annotations:\n    \
                helm.sh/hook: pre-install\n    helm.sh/hook-weight: \"2\"\n";
    let ok = chart(&[("Chart.yaml", CHART_YAML), ("templates/all.yaml", docs)]);
    let opts = RenderOptions::default();
    let first = render(&ok, &opts).unwrap();
    let kinds = |r: &emco_helm::Rendered| -> Vec<String> {
        r.manifests
            .iter()
            .map(|m| format!("{}/{}", m.kind, m.name))
            .collect()
    };
    assert_eq!(kinds(&first), ["Namespace/ns", "Service/svc"]);
    for _ in 0..3 {
        let again = render(&ok, &opts).unwrap();
        assert_eq!(kinds(&again), kinds(&first));
        assert_eq!(again.hooks.len(), 1);
        assert_eq!(again.hooks[0].weight, 2);
        assert_eq!(
            again.to_helm_output(&opts).unwrap(),
            first.to_helm_output(&opts).unwrap()
        );
    }
    let broken = "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\n---\nkind: [\n";
    for name in ["templates/a.yaml", "templates/b.yaml", "templates/a.yaml"] {
        let bad = chart(&[("Chart.yaml", CHART_YAML), (name, broken)]);
        let err = error(&bad, &opts);
        assert!(
            err.starts_with(&format!("YAML parse error on app/{name}")),
            "{err}"
        );
    }
}
