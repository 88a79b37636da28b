//! Parsing, templating, request planning and every kind of bad input file.

#![allow(clippy::unwrap_used)] // Tests fail on bad fixtures.

use std::path::{Path, PathBuf};

use emcoctl::cli::load_documents;
use emcoctl::document::{self, Document};
use emcoctl::error::{CtlError, EXIT_BAD_INPUT};
use emcoctl::ops::{Command, Payload, plan};
use http::Method;

// The shared testdata beside the workspace (`../shared` of the repository root).
const EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../shared/testdata/emco-examples"
);

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
    for op in ["rollback", "migrate"] {
        assert_eq!(
            p(Command::Apply, &format!("{dig}/{op}")),
            Some((Method::POST, format!("/v2/{dig}/{op}"), Payload::Document)),
            "{op} carries its target"
        );
    }
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
    assert_eq!(
        Client::new("https://h", None).unwrap().url("/v2"),
        "https://h:443/v2"
    );
    for bad in ["ftp://h", "h:1", "http://h:x", "http://:1", "http://[::1"] {
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

#[test]
fn values_files_merge_in_order_later_wins() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(
        dir.path(),
        "a.yaml",
        "Project: p1\nSite:\n  Name: edge\n  Port: 1\nList: [1, 2]\n",
    );
    let b = write(
        dir.path(),
        "b.yaml",
        "Site:\n  Port: 2\n  Zone: z\nList: [3]\n",
    );
    let empty = write(dir.path(), "empty.yaml", "# nothing\n");
    let input = write(
        dir.path(),
        "in.yaml",
        "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: {{ .Project }}\n  description: {{ .Site.Name }}-{{ .Site.Port }}-{{ .Site.Zone }}-{{ .List }}\n",
    );
    let docs = emcoctl::cli::load_inputs(
        std::slice::from_ref(&input),
        &[a.clone(), empty.clone(), b.clone()],
        &mut std::io::empty(),
    )
    .unwrap();
    assert_eq!(docs[0].name(), Some("p1"));
    assert_eq!(docs[0].body["metadata"]["description"], "edge-2-z-[3]");
    // The other order: a's port wins.
    let docs = emcoctl::cli::load_inputs(
        std::slice::from_ref(&input),
        &[b, a.clone()],
        &mut std::io::empty(),
    )
    .unwrap();
    assert_eq!(docs[0].body["metadata"]["description"], "edge-1-z-[1 2]");
    // A values file whose top level is a list cannot be merged: named in the error.
    let list = write(dir.path(), "list.yaml", "- 1\n");
    let err =
        emcoctl::cli::load_inputs(&[input], &[a, list.clone()], &mut std::io::empty()).unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT);
    assert_eq!(err.position().unwrap().file, list, "{err}");
}

#[test]
fn standard_input_is_read_for_dash() {
    let dir = tempfile::tempdir().unwrap();
    let values = write(dir.path(), "v.yaml", "P: from-values\n");
    let text = format!(
        "{GOOD}---\nversion: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: {{{{ .P }}}}\n"
    );
    let file = write(dir.path(), "f.yaml", GOOD);
    let docs = emcoctl::cli::load_inputs(
        &[file.clone(), PathBuf::from("-")],
        &[values],
        &mut std::io::Cursor::new(text.clone()),
    )
    .unwrap();
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[2].name(), Some("from-values"));
    assert_eq!(docs[2].position(), "<stdin>:7 (document 2)");
    // Errors name standard input, with the line.
    let err = emcoctl::cli::load_inputs(
        &[PathBuf::from("-")],
        &[],
        &mut std::io::Cursor::new("version: emco/v2\nresourceContext: {}\n"),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("<stdin>:2 (document 1): "),
        "{err}"
    );
    // Standard input can be read once.
    let err = emcoctl::cli::load_inputs(
        &[PathBuf::from("-"), PathBuf::from("-")],
        &[],
        &mut std::io::Cursor::new(text),
    )
    .unwrap_err();
    assert_eq!(err.exit_code(), EXIT_BAD_INPUT, "{err}");
}

#[tokio::test]
async fn stdin_through_the_command_line() {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = emcoctl::cli::run_with_stdin(
        [
            "emcoctl",
            "--server",
            "http://127.0.0.1:1",
            "get",
            "-f",
            "-",
        ],
        &mut std::io::Cursor::new("version: emco/v1\n"),
        &mut out,
        &mut err,
    )
    .await;
    let err = String::from_utf8(err).unwrap();
    assert_eq!(code, EXIT_BAD_INPUT, "{err}");
    assert!(
        err.contains("<stdin>:1 (document 1): unsupported version"),
        "{err}"
    );
}

#[test]
fn status_targets_and_query_strings() {
    use emco_core::model::status::StatusQuery;
    use emcoctl::status::{query_string, targets};
    let docs = parse(
        "version: emco/v2\nresourceContext:\n  anchor: projects/p/logical-clouds/lc/instantiate\n---\n\
         version: emco/v2\nresourceContext:\n  anchor: projects/p/composite-apps/ca/v1/deployment-intent-groups\nmetadata:\n  name: dig\n---\n\
         version: emco/v2\nresourceContext:\n  anchor: projects/p/composite-apps/ca/v1/deployment-intent-groups/dig/approve\n---\n\
         version: emco/v2\nresourceContext:\n  anchor: projects/p/composite-apps/ca/v1/deployment-intent-groups/dig/instantiate\n",
    );
    let t = targets(&docs);
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(
        t[0].status_path(),
        "/v2/projects/p/logical-clouds/lc/status"
    );
    assert_eq!(t[0].label(), "logical-clouds/lc");
    assert_eq!(
        t[1].status_path(),
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig/status"
    );
    assert!(
        t[1].position.ends_with(":11 (document 3)"),
        "{}",
        t[1].position
    );
    assert_eq!(t[1].label(), "deployment-intent-groups/dig");
    let q = StatusQuery::from_pairs([
        ("status", "deployed"),
        ("output", "summary"),
        ("app", "a1"),
        ("cluster", "p1+c1"),
        ("instance", "123"),
        ("clusters", ""),
    ])
    .unwrap();
    let qs = query_string(&q);
    assert_eq!(
        qs,
        "instance=123&status=deployed&output=summary&app=a1&cluster=p1%2Bc1&clusters"
    );
    // What the server reads back is what was asked.
    let pairs: Vec<(String, String)> = qs
        .split('&')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_owned(), v.replace("%2B", "+"))
        })
        .collect();
    assert_eq!(StatusQuery::from_pairs(pairs).unwrap(), q);
}

#[test]
fn snapshot_verdicts() {
    use emco_core::model::status::DigStatus;
    use emcoctl::status::{Snapshot, Verdict};
    let status = |state: &str, deployed: &str, ready: &str| -> DigStatus {
        serde_json::from_value(serde_json::json!({
            "name": "dig",
            "states": {"statusctxid": "1", "actions": [{"state": state, "instance": "1", "time": "t", "revision": 1}]},
            "deployedStatus": deployed,
            "readyStatus": ready,
            "apps": [{"name": "a", "clusters": [{"clusterProvider": "p", "cluster": "c", "connectivity": "Available",
                "resources": [{"GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"}, "name": "d",
                               "deployedStatus": "Applied", "readyStatus": ready}]}]}]
        }))
        .unwrap()
    };
    let verdict = |state, deployed, ready, require_ready| {
        let d = status(state, deployed, "");
        let r = status(state, "", ready);
        Snapshot::new(&d, Some(&r)).verdict(require_ready)
    };
    assert_eq!(
        verdict("Instantiated", "Instantiating", "NotReady", true),
        Verdict::Pending
    );
    assert_eq!(
        verdict("Instantiated", "Instantiated", "NotReady", true),
        Verdict::Pending
    );
    assert_eq!(
        verdict("Instantiated", "Instantiated", "NotReady", false),
        Verdict::Succeeded
    );
    assert_eq!(
        verdict("Instantiated", "Instantiated", "Ready", true),
        Verdict::Succeeded
    );
    assert_eq!(
        verdict("Updated", "Updated", "Ready", true),
        Verdict::Succeeded
    );
    assert_eq!(
        verdict("Instantiated", "InstantiateFailed", "NotReady", true),
        Verdict::Failed("InstantiateFailed".into())
    );
    assert_eq!(verdict("Approved", "", "", true), Verdict::Pending);
    assert_eq!(
        verdict("Terminated", "Terminating", "", true),
        Verdict::Pending
    );
    assert_eq!(
        verdict("Terminated", "Terminated", "", true),
        Verdict::Succeeded
    );
    assert_eq!(
        verdict("Terminated", "TerminateFailed", "", true),
        Verdict::Failed("TerminateFailed".into())
    );
    assert_eq!(
        verdict("InstantiateStopped", "InstantiateFailed", "", true),
        Verdict::Failed("InstantiateStopped".into())
    );
    // An admin logical cloud has no AppContext: its state is the outcome.
    let admin = |state: &str| -> DigStatus {
        serde_json::from_value(
            serde_json::json!({"name": "lc", "states": {"statusctxid": "",
            "actions": [{"state": state, "instance": "", "time": "t", "revision": 0}]}}),
        )
        .unwrap()
    };
    for (state, want) in [
        ("Instantiated", Verdict::Succeeded),
        ("Terminated", Verdict::Succeeded),
        ("Created", Verdict::Pending),
    ] {
        let snap = Snapshot::new(&admin(state), Some(&admin(state)));
        assert_eq!(snap.verdict(true), want, "{state}");
    }
    let d = status("Instantiated", "Instantiated", "");
    let r = status("Instantiated", "", "Ready");
    let snap = Snapshot::new(&d, Some(&r));
    assert_eq!(snap.totals(), (1, 1));
    let cell = &snap.cells[&("a".to_owned(), "p+c".to_owned())];
    assert_eq!((cell.resources, cell.applied, cell.ready), (1, 1, 1));
    assert!(
        snap.summary().contains("[####################] 1/1 ready"),
        "{}",
        snap.summary()
    );
}

/// EMCO's emcoctl reads its files and values files with go-yaml v3 (src/tools/emcoctl/cmd/
/// utils.go, `readResources`): only `true`/`false` are booleans, so `yes` and `on` travel as
/// strings, from the file and through a values file alike; numbers read as v2 reads them.
#[test]
fn files_and_values_read_as_go_yaml_v3() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "in.yaml",
        "version: emco/v2\nresourceContext:\n  anchor: projects\nmetadata:\n  name: p1\nspec:\n  \
         flag: on\n  answer: yes\n  real: true\n  mode: 0744\n  from_values: {{ .Enabled }}\n",
    );
    let values = write(dir.path(), "values.yaml", "Enabled: yes\n");
    let docs = load_documents(std::slice::from_ref(&file), Some(&values)).unwrap();
    assert_eq!(
        serde_json::Value::Object(docs[0].body["spec"].as_object().unwrap().clone()),
        serde_json::json!({"flag": "on", "answer": "yes", "real": true, "mode": 484,
                           "from_values": "yes"})
    );
}
