//! Parsing, templating, request planning and every kind of bad input file.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::path::{Path, PathBuf};

use emcoctl::cli::load_documents;
use emcoctl::document::{self, Document};
use emcoctl::error::{CtlError, EXIT_BAD_INPUT};
use emcoctl::ops::{Command, Payload, plan};
use http::Method;

const EXAMPLES: &str = "/work/shared/testdata/emco-examples";

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Loads `text` (with `values` when given) and returns the input error's (document, line, message).
fn bad(text: &str, values: Option<&str>) -> (Option<usize>, Option<usize>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "in.yaml", text);
    let values = values.map(|v| write(dir.path(), "values.yaml", v));
    let err = load_documents(std::slice::from_ref(&file), values.as_deref()).unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    let CtlError::Input { at, message } = &err else {
        panic!("not an input error: {err}");
    };
    let expected = values
        .filter(|_| message.contains("converting"))
        .unwrap_or(file);
    assert_eq!(at.file, expected, "{err}");
    assert!(
        err.to_string().starts_with(&expected.display().to_string()),
        "{err}"
    );
    (at.document, at.line, message.clone())
}

const GOOD: &str =
    "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: p1\n";

#[test]
fn not_yaml_names_document_and_line() {
    let text = format!("{GOOD}---\nversion: emco/v2\nresourceContext:\n  anchor: [projects\n");
    let (doc, line, msg) = bad(&text, None);
    assert_eq!(doc, Some(2), "{msg}");
    assert_eq!(line, Some(10), "{msg}");
    assert!(msg.contains("yaml: line 10:"), "{msg}");
}

#[test]
fn missing_version() {
    let text = format!("{GOOD}---\n# a comment\nresourceContext:\n  anchor: projects\n");
    assert_eq!(bad(&text, None).0, Some(2));
    assert_eq!(bad(&text, None).1, Some(8));
    assert!(bad(&text, None).2.contains("missing version"));
}

#[test]
fn wrong_version() {
    let text = format!("{GOOD}---\nresourceContext:\n  anchor: projects\nversion: emco/v1\n");
    let (doc, line, msg) = bad(&text, None);
    assert_eq!((doc, line), (Some(2), Some(9)));
    assert!(msg.contains("unsupported version"), "{msg}");
}

#[test]
fn missing_anchor() {
    let text = format!("{GOOD}---\nversion: emco/v2\nmetadata:\n  name: x\n");
    let (doc, line, msg) = bad(&text, None);
    assert_eq!((doc, line), (Some(2), Some(7)));
    assert!(msg.contains("resourceContext.anchor"), "{msg}");
    let text = "version: emco/v2\nresourceContext:\n  anchor: ''\n";
    assert_eq!(bad(text, None).1, Some(2));
}

#[test]
fn not_a_mapping() {
    let (doc, line, msg) = bad("---\n- a\n- b\n", None);
    assert_eq!((doc, line), (Some(1), Some(2)));
    assert!(msg.contains("not a mapping"), "{msg}");
}

#[test]
fn template_error_names_line_and_document() {
    let text = format!(
        "{GOOD}---\nversion: emco/v2\nresourceContext:\n  anchor: {{{{ .X | nosuchfunc }}}}\n"
    );
    let (doc, line, msg) = bad(&text, Some("X: 1\n"));
    assert_eq!((doc, line), (Some(2), Some(9)), "{msg}");
    let text = format!("{GOOD}---\n{GOOD}metadata: {{{{ index .A 5 }}}}\n");
    let (doc, line, msg) = bad(&text, Some("A: [1]\n"));
    assert_eq!((doc, line), (Some(2), Some(12)), "{msg}");
}

#[test]
fn missing_referenced_file() {
    let text = format!(
        "{GOOD}---\nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/p/clusters\nmetadata:\n  name: c\nfile:\n  /nonexistent/kubeconfig\n"
    );
    let (doc, line, msg) = bad(&text, None);
    assert_eq!((doc, line), (Some(2), Some(12)), "{msg}");
    assert!(msg.contains("no such file"), "{msg}");
    let text = "version: emco/v2\nresourceContext:\n  anchor: x\nfiles: {a: b}\n";
    assert!(bad(text, None).2.contains("is not a path"));
}

#[test]
fn bad_values_file() {
    let (doc, line, msg) = bad(GOOD, Some("a: 1\nb: [2\nc: 3\n"));
    assert_eq!(doc, None);
    assert_eq!(line, Some(3), "{msg}");
    assert!(msg.contains("yaml"), "{msg}");
}

#[test]
fn unreadable_input_file() {
    let err = load_documents(&[PathBuf::from("/nonexistent/in.yaml")], None).unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    assert!(err.to_string().starts_with("/nonexistent/in.yaml"), "{err}");
}

#[test]
fn real_file_with_values_names_its_missing_kubeconfig() {
    // values-novars.yaml defines no KubeConfig, so the cluster document names "<no value>".
    let dir = format!("{EXAMPLES}/single-cluster/templates");
    let file = PathBuf::from(format!("{dir}/prerequisites-common.yaml"));
    let err = load_documents(
        std::slice::from_ref(&file),
        Some(Path::new(&format!("{dir}/values-novars.yaml"))),
    )
    .unwrap_err();
    let at = err.position().unwrap();
    let source = std::fs::read_to_string(&file).unwrap();
    let file_line = source.lines().position(|l| l.starts_with("file:")).unwrap() + 1;
    assert_eq!((at.document, at.line), (Some(6), Some(file_line)), "{err}");
    assert!(err.to_string().contains("<no value>"), "{err}");
}

fn parse(text: &str) -> Vec<Document> {
    document::parse(Path::new("t.yaml"), text).unwrap()
}

#[test]
fn parses_documents_with_positions_and_bodies() {
    let text = "# header\n---\n---\n# c\nversion: emco/v2\nresourceContext:\n  anchor: /projects/\nmetadata :\n   name: p1\nspec:\n  port: 9015\n--- \nversion: emco/v2\nresourceContext:\n  anchor: cluster-providers/p/clusters/c/labels\nclusterLabel: edge\n";
    let docs = parse(text);
    assert_eq!(docs.len(), 2);
    assert_eq!((docs[0].number, docs[0].line), (1, 5));
    assert_eq!(docs[0].anchor, "projects");
    assert_eq!(docs[0].name(), Some("p1"));
    assert_eq!(
        serde_json::Value::Object(docs[0].body.clone()),
        serde_json::json!({"metadata": {"name": "p1"}, "spec": {"port": 9015}})
    );
    assert_eq!((docs[1].number, docs[1].line), (2, 13));
    assert_eq!(docs[1].name(), Some("edge"));
    assert_eq!(
        docs[1].object_path(),
        "cluster-providers/p/clusters/c/labels/edge"
    );
    assert_eq!(docs[1].position(), "t.yaml:13 (document 2)");
}

#[test]
fn values_are_the_templates_dot() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "in.yaml",
        "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: {{ .Name | upper }}\n  description: {{ .Missing }}\n",
    );
    write(dir.path(), "second.yml", GOOD);
    write(dir.path(), "ignored.txt", "not YAML");
    let other = tempfile::tempdir().unwrap();
    let values = write(other.path(), "v.yaml", "Name: proj1\n");
    let docs = load_documents(&[dir.path().to_owned()], Some(&values)).unwrap();
    assert_eq!(docs.len(), 2, "the directory holds two YAML files");
    let d = docs.iter().find(|d| d.file == file).unwrap();
    assert_eq!(d.name(), Some("PROJ1"));
    assert_eq!(d.body["metadata"]["description"], "<no value>");
}

#[test]
fn referenced_files_resolve_beside_the_yaml_file() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "kube.conf", "x");
    let file = write(
        dir.path(),
        "in.yaml",
        "version: emco/v2\nresourceContext:\n  anchor: a\nfile: kube.conf\n---\nversion: emco/v2\nresourceContext:\n  anchor: b\nfiles:\n- kube.conf\n- kube.conf\n",
    );
    let docs = document::load(&file, None).unwrap();
    assert_eq!(
        docs[0].uploads,
        vec![("file", dir.path().join("kube.conf"))]
    );
    assert_eq!(docs[1].uploads.len(), 2);
    assert_eq!(docs[1].uploads[0].0, "files");
}

fn one(anchor: &str) -> Document {
    parse(&format!(
        "version: emco/v2\nresourceContext:\n  anchor: {anchor}\nmetadata:\n  name: n1\n"
    ))
    .remove(0)
}

#[test]
fn plans_requests_like_emcoctl() {
    let p = |cmd, anchor: &str| plan(cmd, &one(anchor)).map(|p| (p.method, p.path, p.payload));
    let dig = "projects/p/composite-apps/c/v1/deployment-intent-groups/d";
    assert_eq!(
        p(Command::Apply, "projects"),
        Some((Method::POST, "/v2/projects".to_owned(), Payload::Document))
    );
    assert_eq!(
        p(Command::Get, "projects"),
        Some((Method::GET, "/v2/projects/n1".to_owned(), Payload::Empty))
    );
    assert_eq!(
        p(Command::Update, "projects"),
        Some((Method::PUT, "/v2/projects/n1".to_owned(), Payload::Document))
    );
    assert_eq!(
        p(Command::Delete, "projects"),
        Some((Method::DELETE, "/v2/projects/n1".to_owned(), Payload::Empty))
    );
    assert_eq!(
        p(Command::Apply, &format!("{dig}/approve")),
        Some((Method::POST, format!("/v2/{dig}/approve"), Payload::Empty))
    );
    assert_eq!(
        p(Command::Delete, &format!("{dig}/instantiate")),
        Some((Method::POST, format!("/v2/{dig}/terminate"), Payload::Empty))
    );
    for op in ["approve", "status", "update", "rollback"] {
        assert_eq!(p(Command::Delete, &format!("{dig}/{op}")), None, "{op}");
    }
    assert_eq!(p(Command::Update, &format!("{dig}/approve")), None);
    assert_eq!(
        p(Command::Get, &format!("{dig}/status")),
        Some((Method::GET, format!("/v2/{dig}/status"), Payload::Empty))
    );
}

#[test]
fn config_file_shapes() {
    use emcoctl::config::{DEFAULT_SERVER, from_config, server};
    let v = |t: &str| emco_helm::yaml::parse_values_document(t).unwrap();
    assert_eq!(
        from_config(&v(
            "orchestrator:\n  host: emco\n  port: 30415\nclm:\n  host: x\n  port: 1\n"
        ))
        .unwrap(),
        Some("http://emco:30415".to_owned())
    );
    assert_eq!(
        from_config(&v("clm:\n  host: c\n  port: 30461\n")).unwrap(),
        Some("http://c:30461".to_owned())
    );
    assert_eq!(
        from_config(&v("server: http://s:1/\n")).unwrap(),
        Some("http://s:1".to_owned())
    );
    assert!(from_config(&v("orchestrator:\n  port: abc\n")).is_err());
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "emco.yaml",
        "orchestrator:\n  host: h\n  port: 2\n",
    );
    assert_eq!(
        server(Some("http://a:1"), Some("http://b:1"), Some(&cfg), true).unwrap(),
        "http://a:1"
    );
    assert_eq!(
        server(None, Some("http://b:1"), Some(&cfg), true).unwrap(),
        "http://b:1"
    );
    assert_eq!(server(None, None, Some(&cfg), true).unwrap(), "http://h:2");
    let missing = dir.path().join("none.yaml");
    assert_eq!(
        server(None, None, Some(&missing), false).unwrap(),
        DEFAULT_SERVER
    );
    assert_eq!(
        server(None, None, Some(&missing), true)
            .unwrap_err()
            .exit_code(),
        EXIT_BAD_INPUT
    );
}

#[test]
fn server_addresses() {
    use emcoctl::client::Client;
    assert_eq!(
        Client::new("http://h:1", None).unwrap().url("/v2/x"),
        "http://h:1/v2/x"
    );
    assert_eq!(
        Client::new("http://h/api/", None).unwrap().url("/v2"),
        "http://h:80/api/v2"
    );
    assert_eq!(
        Client::new("http://[::1]:9", None).unwrap().url("/v2"),
        "http://[::1]:9/v2"
    );
    for bad in ["https://h", "h:1", "http://h:x", "http://:1", "http://[::1"] {
        assert_eq!(
            Client::new(bad, None).unwrap_err().exit_code(),
            EXIT_BAD_INPUT,
            "{bad}"
        );
    }
}

#[tokio::test]
async fn usage_help_completion_and_exit_codes() {
    let run = |args: &'static [&'static str]| async move {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = emcoctl::cli::run(args.iter().copied(), &mut out, &mut err).await;
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    };
    let (code, out, _) = run(&["emcoctl", "--help"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("Examples:") && out.contains("Exit codes"),
        "{out}"
    );
    let (code, _, err) = run(&["emcoctl", "apply"]).await;
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = run(&["emcoctl", "completion", "bash"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("emcoctl"), "{out}");
    let (code, _, err) = run(&["emcoctl", "get", "-f", "/nonexistent.yaml"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent.yaml"), "{err}");
}

#[test]
fn composite_apps_are_addressed_with_their_version() {
    let d = parse(
        "version: emco/v2\nresourceContext:\n  anchor: projects/p/composite-apps\nmetadata:\n  name: ca\nspec:\n  compositeAppVersion: v1\n",
    )
    .remove(0);
    assert_eq!(d.object_path(), "projects/p/composite-apps/ca/v1");
    let p = plan(Command::Delete, &d).unwrap();
    assert_eq!(p.path, "/v2/projects/p/composite-apps/ca/v1");
}

#[tokio::test]
async fn template_renders_a_chart_like_helm_template() {
    let chart = format!("{EXAMPLES}/helm_charts/collectd/helm/collectd");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let args = ["emcoctl", "template", &chart, "--release", "r1"];
    let code = emcoctl::cli::run(args, &mut out, &mut err).await;
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert!(out.contains("# Source: collectd/templates/"), "{out}");
    let expected = {
        let chart = emco_helm::Chart::load_dir(&chart).unwrap();
        let opts = emco_helm::RenderOptions {
            release_name: "r1".to_owned(),
            ..emco_helm::RenderOptions::default()
        };
        emco_helm::render(&chart, &opts)
            .unwrap()
            .to_helm_output(&opts)
            .unwrap()
    };
    assert_eq!(out, expected);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = emcoctl::cli::run(["emcoctl", "template", "/nonexistent"], &mut out, &mut err).await;
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(String::from_utf8_lossy(&err).contains("/nonexistent"));
}

#[test]
fn the_binary_runs() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emcoctl"))
        .args(["get", "-f", "/nonexistent.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(EXIT_BAD_INPUT));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent.yaml"));
}

#[test]
fn the_token_stays_out_of_debug_prints() {
    let client = emcoctl::client::Client::new("http://h:1", Some("s3cret".to_owned())).unwrap();
    let debug = format!("{client:?}");
    assert!(
        !debug.contains("s3cret") && debug.contains("http://h:1"),
        "{debug}"
    );
}
