//! Reads every emcoctl document of EMCO's own examples (`shared/testdata/emco-examples`) whose
//! anchor maps to a model type, and checks that it decodes, validates, keeps its name, survives a
//! round trip, that nothing it says is dropped on the way back out, and that the same document
//! with a bad name is refused at the name's path. Also reads every app profile `manifest.yaml`.
//!
//! The example files are emcoctl templates: control lines (`{{- range ...}}`, `{{- end }}`) are
//! dropped, so each loop body appears once, and each `{{ .X }}` is replaced by the value of `X` in
//! the examples' values file, or by a dummy name (a port number for `...Port`).

// The helpers below are test code too: a panic is how they report a failing example.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use emco_core::model::{
    App, AppDependency, AppProfile, ClmController, Cluster, ClusterLabel, ClusterProvider,
    ClusterQuota, ClusterReference, CompositeApp, CompositeProfile, Controller,
    DeploymentIntentGroup, DigIntent, GenericPlacementIntent, KvPair, LogicalCloud, Named,
    ProfileManifest, Project, UserPermission,
};
use emco_core::{ErrorKind, Validate};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn testdata() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/testdata/emco-examples"
    ));
    assert!(
        dir.is_dir(),
        "test data folder {} is missing: these tests read EMCO's examples from shared/testdata beside the repository",
        dir.display()
    );
    dir
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") {
            out.push(path);
        }
    }
}

/// The examples' values file, for the template substitution.
fn values(root: &Path) -> BTreeMap<String, String> {
    let text =
        std::fs::read_to_string(root.join("single-cluster/templates/values-novars.yaml")).unwrap();
    let map: BTreeMap<String, serde_json::Value> = emco_go::yaml::from_str(&text).unwrap();
    map.into_iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k, s)),
            _ => None,
        })
        .collect()
}

/// What one `{{ expr }}` stands for.
fn substitute(expr: &str, values: &BTreeMap<String, String>) -> String {
    let ident = expr
        .rsplit(['.', '$', ' '])
        .find(|s| !s.is_empty())
        .unwrap_or("x");
    if let Some(v) = values.get(ident) {
        return v.clone();
    }
    if ident.ends_with("Port") {
        return "9000".to_owned();
    }
    let dummy: String = ident
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect::<String>()
        .to_ascii_lowercase();
    if dummy.is_empty() {
        "x".to_owned()
    } else {
        dummy
    }
}

/// Expands an emcoctl template enough for YAML parsing.
fn expand(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("{{") && t.ends_with("}}") {
            let inner = t
                .trim_start_matches("{{")
                .trim_end_matches("}}")
                .trim_matches(['-', ' ']);
            let word = inner.split_whitespace().next().unwrap_or("");
            if matches!(word, "range" | "end" | "if" | "else" | "with") {
                continue;
            }
        }
        let mut rest = line;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").expect("unclosed template action");
            out.push_str(&substitute(after[..end].trim_matches(['-', ' ']), values));
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        out.push('\n');
    }
    out
}

/// Keys that the model writes under another name, and keys it drops on purpose.
const RENAMED: [(&str, &str); 1] = [("loadbalancerIp", "loadBalancerIP")];

/// Checks that every key of `input` comes back in `output` with the same value.
fn assert_kept(input: &Value, output: &Value, ignored: &[&str], ctx: &str) {
    let Some(map) = input.as_object() else {
        assert_eq!(input, output, "{ctx}");
        return;
    };
    for (key, value) in map {
        if ignored.contains(&key.as_str()) {
            continue;
        }
        let out_key = RENAMED
            .iter()
            .find(|(from, _)| from == key)
            .map_or(key.as_str(), |(_, to)| to);
        let out = output
            .get(out_key)
            .unwrap_or_else(|| panic!("{ctx}: {key} was dropped; output {output}"));
        if value.is_object() {
            assert_kept(value, out, &[], &format!("{ctx}.{key}"));
        } else {
            assert_eq!(value, out, "{ctx}: {key}");
        }
    }
}

/// Decodes, validates and round-trips one document body as `T`.
fn check<T>(body: &Value, name: &str, ignored_spec: &[&str], ctx: &str)
where
    T: DeserializeOwned + Serialize + Validate + Named + PartialEq + Debug,
{
    let obj: T = serde_json::from_value(body.clone())
        .unwrap_or_else(|e| panic!("{ctx}: does not decode: {e}"));
    if let Err(e) = obj.validate() {
        panic!("{ctx}: does not validate: {e}");
    }
    assert_eq!(obj.name(), name, "{ctx}");
    let out = serde_json::to_value(&obj).unwrap();
    let back: T = serde_json::from_value(out.clone()).unwrap();
    assert_eq!(back, obj, "{ctx}: round trip");
    for part in ["metadata", "spec"] {
        if let Some(input) = body.get(part).filter(|v| !v.is_null()) {
            let ignored = if part == "spec" { ignored_spec } else { &[] };
            let empty = json!({});
            let output = out.get(part).unwrap_or(&empty);
            assert_kept(input, output, ignored, &format!("{ctx}: {part}"));
        }
    }
    // The same document with a bad name is refused, at the name's path.
    let mut bad = body.clone();
    let pointer = format!("/{}", obj.name_field().replace('.', "/"));
    *bad.pointer_mut(&pointer)
        .unwrap_or_else(|| panic!("{ctx}: no {pointer}")) = json!("bad name");
    let bad: T = serde_json::from_value(bad).unwrap();
    let err = bad.validate().expect_err("a bad name must not validate");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{ctx}");
    assert_eq!(err.field(), Some(obj.name_field()), "{ctx}");
}

/// Checks one emcoctl document; returns the model type it mapped to, if any.
fn check_document(doc: &Value, ctx: &str) -> Option<&'static str> {
    let anchor = doc.get("resourceContext")?.get("anchor")?.as_str()?;
    let segs: Vec<&str> = anchor.trim_matches('/').split('/').collect();
    let mut body = serde_json::Map::new();
    for part in ["metadata", "spec", "clusterLabel"] {
        if let Some(v) = doc.get(part).filter(|v| !v.is_null()) {
            body.insert(part.to_owned(), v.clone());
        }
    }
    let body = Value::Object(body);
    let name = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let ctx = format!("{ctx} [{anchor}]");
    let kind = match segs.as_slice() {
        ["projects"] => {
            check::<Project>(&body, &name, &[], &ctx);
            "Project"
        }
        ["projects", _, "composite-apps"] => {
            check::<CompositeApp>(&body, &name, &[], &ctx);
            "CompositeApp"
        }
        ["projects", _, "composite-apps", _, _, "apps"] => {
            check::<App>(&body, &name, &[], &ctx);
            "App"
        }
        [
            "projects",
            _,
            "composite-apps",
            _,
            _,
            "apps",
            _,
            "dependency",
        ] => {
            check::<AppDependency>(&body, &name, &[], &ctx);
            "AppDependency"
        }
        ["projects", _, "composite-apps", _, _, "composite-profiles"] => {
            check::<CompositeProfile>(&body, &name, &[], &ctx);
            "CompositeProfile"
        }
        [
            "projects",
            _,
            "composite-apps",
            _,
            _,
            "composite-profiles",
            _,
            "profiles",
        ] => {
            check::<AppProfile>(&body, &name, &[], &ctx);
            "AppProfile"
        }
        [
            "projects",
            _,
            "composite-apps",
            _,
            _,
            "deployment-intent-groups",
        ] => {
            check::<DeploymentIntentGroup>(&body, &name, &[], &ctx);
            "DeploymentIntentGroup"
        }
        [
            "projects",
            _,
            "composite-apps",
            _,
            _,
            "deployment-intent-groups",
            _,
            "intents",
        ] => {
            check::<DigIntent>(&body, &name, &[], &ctx);
            "DigIntent"
        }
        [
            "projects",
            _,
            "composite-apps",
            _,
            _,
            "deployment-intent-groups",
            _,
            "generic-placement-intents",
        ] => {
            // The logical cloud of old clients is accepted and ignored.
            check::<GenericPlacementIntent>(&body, &name, &["logicalCloud"], &ctx);
            "GenericPlacementIntent"
        }
        ["controllers" | "dtc-controllers"] => {
            check::<Controller>(&body, &name, &[], &ctx);
            "Controller"
        }
        ["clm-controllers"] => {
            check::<ClmController>(&body, &name, &[], &ctx);
            "ClmController"
        }
        ["cluster-providers"] => {
            check::<ClusterProvider>(&body, &name, &[], &ctx);
            "ClusterProvider"
        }
        ["cluster-providers", _, "clusters"] => {
            check::<Cluster>(&body, &name, &[], &ctx);
            "Cluster"
        }
        ["cluster-providers", _, "clusters", _, "labels"] => {
            let label = body
                .get("clusterLabel")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            check::<ClusterLabel>(&body, &label, &[], &ctx);
            let out =
                serde_json::to_value(serde_json::from_value::<ClusterLabel>(body.clone()).unwrap())
                    .unwrap();
            assert_eq!(out, body, "{ctx}");
            "ClusterLabel"
        }
        ["cluster-providers", _, "clusters", _, "kv-pairs"]
        | ["projects", _, "logical-clouds", _, "kv-pairs"] => {
            check::<KvPair>(&body, &name, &[], &ctx);
            "KvPair"
        }
        ["projects", _, "logical-clouds"] => {
            check::<LogicalCloud>(&body, &name, &[], &ctx);
            "LogicalCloud"
        }
        ["projects", _, "logical-clouds", _, "cluster-references"] => {
            check::<ClusterReference>(&body, &name, &[], &ctx);
            "ClusterReference"
        }
        ["projects", _, "logical-clouds", _, "user-permissions"] => {
            check::<UserPermission>(&body, &name, &[], &ctx);
            "UserPermission"
        }
        ["projects", _, "logical-clouds", _, "cluster-quotas"] => {
            check::<ClusterQuota>(&body, &name, &[], &ctx);
            "ClusterQuota"
        }
        _ => return None,
    };
    Some(kind)
}

#[test]
fn every_emcoctl_document_of_the_examples() {
    let root = testdata();
    let values = values(&root);
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut skipped = 0;
    for file in files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "helm_charts"))
    {
        let text = std::fs::read_to_string(file).unwrap();
        if !text.contains("resourceContext") {
            continue;
        }
        let expanded = expand(&text, &values);
        let rel = file.strip_prefix(&root).unwrap().display().to_string();
        let docs = emco_go::yaml::parse_all(&expanded).unwrap_or_else(|e| panic!("{rel}: {e}"));
        for (i, doc) in docs.into_iter().map(|d| d.value).enumerate() {
            if doc.is_null() {
                continue;
            }
            match check_document(&doc, &format!("{rel} document {i}")) {
                Some(kind) => *counts.entry(kind).or_default() += 1,
                None => skipped += 1,
            }
        }
    }
    let total: usize = counts.values().sum();
    eprintln!("checked {total} documents, skipped {skipped} of other kinds: {counts:?}");
    for kind in [
        "Project",
        "CompositeApp",
        "App",
        "AppDependency",
        "CompositeProfile",
        "AppProfile",
        "DeploymentIntentGroup",
        "DigIntent",
        "GenericPlacementIntent",
        "Controller",
        "ClmController",
        "ClusterProvider",
        "Cluster",
        "ClusterLabel",
        "LogicalCloud",
        "ClusterReference",
        "UserPermission",
    ] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} document found in the examples"
        );
    }
    assert!(total >= 100, "only {total} documents checked");
}

#[test]
fn every_profile_manifest() {
    let root = testdata();
    let mut files = Vec::new();
    yaml_files(&root, &mut files);
    let manifests: Vec<&PathBuf> = files
        .iter()
        .filter(|f| f.ends_with("profile/manifest.yaml"))
        .collect();
    assert!(
        manifests.len() >= 3,
        "found only {} profile manifests",
        manifests.len()
    );
    for path in manifests {
        let text = std::fs::read_to_string(path).unwrap();
        let m: ProfileManifest =
            emco_go::yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(e) = m.validate() {
            panic!("{}: {e}", path.display());
        }
        assert!(!m.kind.values.is_empty(), "{}", path.display());
        let dir = path.parent().unwrap();
        assert!(
            dir.join(&m.kind.values).is_file(),
            "{}: values file {} is missing",
            path.display(),
            m.kind.values
        );
        let again: ProfileManifest =
            serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(again, m);
    }
}

#[test]
fn template_expansion() {
    let values = BTreeMap::from([("ProjectName".to_owned(), "proj1".to_owned())]);
    let text = "a: {{ .ProjectName }}\n{{- range $i, $c := .Clusters }}\nb: {{ $c.Name }}/{{.RsyncPort}}\n{{- end }}\n";
    assert_eq!(expand(text, &values), "a: proj1\nb: name/9000\n");
}
