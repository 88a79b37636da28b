//! Tests of the Go YAML reader and writer on the JSON side (Helm's float view is tested in
//! emco-helm).

use serde_json::{Value, json};

use super::emit::{key_order, merge_sort_by};
use super::*;

/// kubectl reads manifests through `sigs.k8s.io/yaml` over go-yaml v2: YAML 1.1 integers
/// (octal with a leading 0, `0x`, `0o`, `0b`, underscores) stay integers, so a
/// `defaultMode: 0744` reaches the API server as 484.
#[test]
fn reads_manifest_scalars_as_kubectl_does() {
    let doc = parse(
        "spec:\n  volumes:\n  - configMap:\n      defaultMode: 0744\n  replicas: 3\n  hex: 0x1F\n  \
         under: 1_000\n  big: 18446744073709551615\n  ratio: 0.5\n  exp: 1e3\n  enabled: yes\n  \
         disabled: Off\n  on: 1\n  nothing: ~\n  date: 2024-01-02\n  ver: \"0744\"\n  time: 1:30\n",
    )
    .unwrap();
    let spec = &doc["spec"];
    assert_eq!(spec["volumes"][0]["configMap"]["defaultMode"], json!(484));
    assert!(spec["volumes"][0]["configMap"]["defaultMode"].is_i64());
    assert_eq!(spec["replicas"], json!(3));
    assert_eq!(spec["hex"], json!(31));
    assert_eq!(spec["under"], json!(1000));
    assert_eq!(spec["big"], json!(u64::MAX));
    assert_eq!(spec["ratio"], json!(0.5));
    assert_eq!(spec["exp"], json!(1000.0));
    assert_eq!(spec["enabled"], json!(true));
    assert_eq!(spec["disabled"], json!(false));
    // go-yaml v2 reads the key `on` as a boolean too, and JSON keys it "true".
    assert_eq!(spec["true"], json!(1));
    assert_eq!(spec["nothing"], Value::Null);
    assert_eq!(spec["date"], json!("2024-01-02"));
    assert_eq!(spec["ver"], json!("0744"));
    assert_eq!(spec["time"], json!("1:30"));
}

#[test]
fn keys_become_json_keys() {
    let doc = parse("1: a\ntrue: b\n~: c\n1.5: d\n").unwrap();
    assert_eq!(doc, json!({"1": "a", "true": "b", "null": "c", "1.5": "d"}));
    assert!(parse("[a]: b\n").is_err());
}

#[test]
fn reads_every_document_with_its_line() {
    let docs = parse_all("a: 1\n---\n---\n# c\nb: 2\n...\n").unwrap();
    let values: Vec<&Value> = docs.iter().map(|d| &d.value).collect();
    assert_eq!(values, [&json!({"a": 1}), &Value::Null, &json!({"b": 2})]);
    assert_eq!(docs[0].line, 1);
    assert_eq!(docs[2].line, 5);
    assert_eq!(parse("").unwrap(), Value::Null);
    assert!(parse_all("").unwrap().is_empty());
}

#[test]
fn anchors_merges_and_duplicates() {
    let doc = parse("base: &b {x: 1, z: 2}\nd:\n  <<: *b\n  z: 3\nk: 1\nk: 2\n").unwrap();
    assert_eq!(doc["d"], json!({"x": 1, "z": 3}));
    assert_eq!(doc["k"], json!(2));
}

#[test]
fn errors_name_the_line_as_go_yaml_does() {
    let e = parse("a: 1\nb: [\n").unwrap_err();
    assert!(e.to_string().starts_with("yaml: line "), "{e}");
    assert!(e.line().is_some());
    assert!(
        parse("a: .nan\n")
            .unwrap_err()
            .to_string()
            .contains("unsupported value: NaN")
    );
}

#[test]
fn typed_reads_follow_go() {
    #[derive(serde::Deserialize, Debug, Default, PartialEq)]
    #[serde(default)]
    struct Config {
        name: String,
        labels: std::collections::BTreeMap<String, String>,
        port: u16,
    }
    let c: Config = from_str("Name: x\nlabels:\nport: 0x50\n").unwrap();
    assert_eq!(
        c,
        Config {
            name: "x".to_owned(),
            labels: Default::default(),
            port: 80
        }
    );
    let e = from_str::<Config>("port: [1]\n").unwrap_err();
    assert!(e.to_string().starts_with("error unmarshaling JSON:"), "{e}");
}

#[test]
fn writes_as_sigs_k8s_yaml() {
    let v =
        json!({"b": [1, 2.5, "0744", "yes", "x"], "a": {"k": null, "e": {}, "l": []}, "m": "a\nb"});
    assert_eq!(
        to_string(&v).unwrap(),
        "a:\n  e: {}\n  k: null\n  l: []\nb:\n- 1\n- 2.5\n- \"0744\"\n- \"yes\"\n- x\nm: |-\n  a\n  b\n"
    );
    assert_eq!(parse(&to_string(&v).unwrap()).unwrap(), v);
}

/// go-yaml's key order is not a total order for digit runs that overflow (a fuzz finding:
/// `slice::sort_by` panicked on it); sorting must still finish and keep every key.
#[test]
fn key_sort_tolerates_an_inconsistent_order() {
    let always_less = merge_sort_by((0..100).collect(), &|_: &i32, _: &i32| {
        std::cmp::Ordering::Less
    });
    assert_eq!(always_less.len(), 100);
    let keys: Vec<String> = (0..300)
        .map(|i| {
            format!(
                "{}{}={}~{}",
                "9".repeat(18 + i % 7),
                i % 5,
                "0".repeat(i % 3),
                i
            )
        })
        .collect();
    let sorted = merge_sort_by(keys.clone(), &|a: &String, b: &String| key_order(a, b));
    assert_eq!(sorted.len(), keys.len());
    let v = Value::Object(keys.into_iter().map(|k| (k, Value::from(0))).collect());
    assert_eq!(to_string(&v).unwrap().lines().count(), 300);
    // Consistent inputs keep go-yaml's order.
    let ordered = merge_sort_by(vec!["a10", "a2", "b", "a1"], &|a: &&str, b: &&str| {
        key_order(a, b)
    });
    assert_eq!(ordered, ["a1", "a2", "a10", "b"]);
}

/// go-yaml accepts tabs as separators inside flow collections, as EMCO's example files use them.
#[test]
fn tabs_inside_flow_collections() {
    for text in [
        "a: [x,\ty]\n",
        "a: {k: x,\tl: y}\n",
        "a: [\tx, y]\n",
        "a: [x,\n\ty]\n",
        "a:\t[x, y]\n",
    ] {
        let got = parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(
            got["a"].is_array() || got["a"].is_object(),
            "{text:?}: {got}"
        );
    }
}

/// The shape of EMCO's gac example files: `key :` with a space, a JSON patch written as a flow
/// sequence over several lines indented with tabs, with comments inside.
#[test]
fn flow_sequences_over_tab_indented_lines_with_comments() {
    let text = "metadata :\n  name: c1\nspec:\n  patchJson: [\n\t  {\n\t    \"op\": \"replace\",\n\
                \t    \"path\": \"/spec/replicas\",\n\t    \"value\": 2 # was 3\n\t  },\n    {\n\
                \t    \"op\": \"add\", \"path\": \"/data/k\", \"value\": \"v\"\n\t  }\n\t]\nfiles:\n  - a.yaml\n";
    let doc = parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(doc["metadata"]["name"], json!("c1"));
    assert_eq!(
        doc["spec"]["patchJson"],
        json!([{"op": "replace", "path": "/spec/replicas", "value": 2},
               {"op": "add", "path": "/data/k", "value": "v"}])
    );
}
