//! Tests of go-yaml v2 compatible reading and writing.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::{parse_values_document, to_yaml};
use crate::value::Value;

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

fn y(v: &Value) -> String {
    to_yaml(v).unwrap()
}

#[test]
fn writes_collections_like_go_yaml_v2() {
    let v = map(vec![
        ("b", Value::Int(1)),
        ("a", Value::str("x")),
        (
            "nested",
            map(vec![
                ("list", Value::list(vec![Value::Int(1), Value::Float(2.0)])),
                ("e", Value::empty_map()),
            ]),
        ),
        ("el", Value::list(vec![])),
        (
            "maps",
            Value::list(vec![map(vec![("k", Value::Bool(true)), ("j", Value::Nil)])]),
        ),
        (
            "lists",
            Value::list(vec![Value::list(vec![Value::str("p"), Value::str("q")])]),
        ),
    ]);
    assert_eq!(
        y(&v),
        "a: x\nb: 1\nel: []\nlists:\n- - p\n  - q\nmaps:\n- j: null\n  k: true\nnested:\n  e: {}\n  list:\n  - 1\n  - 2\n"
    );
    assert_eq!(y(&Value::list(vec![Value::str("a")])), "- a\n");
    assert_eq!(y(&Value::str("top")), "top\n");
    assert_eq!(y(&Value::empty_map()), "{}\n");
}

#[test]
fn quotes_strings_that_would_read_back_differently() {
    let cases = [
        ("true", "\"true\""),
        ("yes", "\"yes\""),
        ("Off", "\"Off\""),
        ("", "\"\""),
        ("123", "\"123\""),
        ("1.5", "\"1.5\""),
        ("1e3", "\"1e3\""),
        ("0x1F", "\"0x1F\""),
        ("0777", "\"0777\""),
        ("null", "\"null\""),
        ("~", "\"~\""),
        ("2020-01-01", "\"2020-01-01\""),
        ("1:20", "\"1:20\""),
        ("a: b", "'a: b'"),
        ("a:b", "a:b"),
        ("- x", "'- x'"),
        ("-x", "-x"),
        ("#x", "'#x'"),
        ("a #b", "'a #b'"),
        ("a#b", "a#b"),
        (" lead", "' lead'"),
        ("trail ", "'trail '"),
        ("*", "'*'"),
        ("@foo", "'@foo'"),
        ("it's: x", "'it''s: x'"),
        ("foo'bar", "foo'bar"),
        ("tab\there", "\"tab\\there\""),
        ("{x}", "'{x}'"),
        ("a,b", "a,b"),
        ("---", "'---'"),
        ("é ünïcode", "é ünïcode"),
        ("1.2.3", "1.2.3"),
        ("v1", "v1"),
        ("+", "+"),
        (".", "."),
        ("x\ny", "|-\n  x\n  y"),
        ("x\n", "|\n  x"),
        ("x\n\n", "|+\n  x\n"),
        ("  indented\nx", "|2-\n    indented\n  x"),
        ("x \ny", "\"x \\ny\""),
    ];
    for (s, want) in cases {
        assert_eq!(y(&Value::str(s)), format!("{want}\n"), "{s:?}");
    }
}

#[test]
fn numbers_go_through_json() {
    assert_eq!(y(&Value::Float(3.0)), "3\n");
    assert_eq!(y(&Value::Float(1.5)), "1.5\n");
    assert_eq!(y(&Value::Float(1_000_000.0)), "1000000\n");
    assert_eq!(y(&Value::Float(1e21)), "1e+21\n");
    assert_eq!(y(&Value::Float(0.000001)), "1e-06\n");
    assert_eq!(y(&Value::Int64(-4)), "-4\n");
    assert!(to_yaml(&Value::Float(f64::NAN)).is_err());
}

#[test]
fn sorts_keys_like_go_yaml_v2() {
    let v = Value::map(
        ["a10", "a2", "a1", "b", "A", "_x", "1"]
            .iter()
            .map(|k| ((*k).to_owned(), Value::Int(0)))
            .collect::<BTreeMap<_, _>>(),
    );
    assert_eq!(y(&v), "_x: 0\n\"1\": 0\nA: 0\na1: 0\na2: 0\na10: 0\nb: 0\n");
}

/// go-yaml's `write_break`: inside quotes and literal blocks a break other than `\n` is
/// written as itself, not as a newline (a fuzz finding: PS came back as a folded space).
#[test]
fn writes_other_break_characters_as_themselves() {
    let v = map(vec![("k", Value::str("a\u{2029}: b"))]);
    assert_eq!(y(&v), "k: 'a\u{2029}  : b'\n");
}

/// go-yaml writes a key over 128 bytes or spanning lines as a complex key (a fuzz finding:
/// a long key written as a simple key does not read back).
#[test]
fn writes_long_and_multiline_keys_as_complex_keys() {
    let long = "k".repeat(129);
    let v = map(vec![
        (long.as_str(), Value::Float(1.0)),
        ("a\nb", Value::Float(2.0)),
        (
            &long[..128],
            Value::map(BTreeMap::from([("x".to_owned(), Value::Float(3.0))])),
        ),
    ]);
    let out = y(&v);
    assert_eq!(
        out,
        format!(
            "? |-\n  a\n  b\n: 2\n{}:\n  x: 3\n? {long}\n: 1\n",
            &long[..128]
        )
    );
    let back = parse_values_document(&out);
    assert!(
        back.as_ref().is_ok_and(|b| b.deep_equal(&v)),
        "{out}\n{:?}",
        back.map(|b| b.to_go_string())
    );
}

#[test]
fn folds_long_plain_strings_at_80_columns() {
    let words = ["abcd"; 20].join(" ");
    let want = format!(
        "k: {}\n  {}\n",
        ["abcd"; 16].join(" "),
        ["abcd"; 4].join(" ")
    );
    assert_eq!(y(&map(vec![("k", Value::str(words.as_str()))])), want);
    // Keys are never folded.
    let long_key = ["abcd"; 20].join(" ");
    assert_eq!(
        y(&map(vec![(long_key.as_str(), Value::Int(1))])),
        format!("{long_key}: 1\n")
    );
}

#[test]
fn reads_values_like_helm() {
    let v = parse_values_document(
        "a: 1\nb: yes\nc: '1'\nd: 0777\ne: 0x1F\nf: 1.5\ng: ~\nh: on\ni: 2020-01-01\nj: 1e3\nk: +1\nl: .5\nm: \"x\"\nnn: 1_000\no:\n",
    )
    .unwrap();
    assert_eq!(
        v.to_go_string(),
        "map[a:1 b:true c:1 d:511 e:31 f:1.5 g:<nil> h:true i:2020-01-01 j:1000 k:1 l:0.5 m:x nn:1000 o:<nil>]"
    );
    let Value::Map(m) = &v else {
        panic!("not a map")
    };
    assert!(
        matches!(m.get("a"), Some(Value::Float(_))),
        "numbers are float64 after the JSON round trip"
    );
    assert!(matches!(m.get("c"), Some(Value::String(_))));
}

#[test]
fn accepts_duplicates_anchors_and_merge_keys() {
    let v = parse_values_document("a: 1\na: 2\n").unwrap();
    assert_eq!(v.to_go_string(), "map[a:2]");
    let v =
        parse_values_document("base: &b\n  x: 1\n  z: 2\nderived:\n  <<: *b\n  z: 3\nlist: [*b]\n")
            .unwrap();
    assert_eq!(
        v.to_go_string(),
        "map[base:map[x:1 z:2] derived:map[x:1 z:3] list:[map[x:1 z:2]]]"
    );
    let v = parse_values_document("1: a\ntrue: b\n~: c\n").unwrap();
    assert_eq!(v.to_go_string(), "map[1:a null:c true:b]");
    // go-yaml v2 reads the keys `y` and `n` as booleans, so Helm sees them as "true"/"false".
    let v = parse_values_document("y: 1\nn: 2\n").unwrap();
    assert_eq!(v.to_go_string(), "map[false:2 true:1]");
    let v = parse_values_document("s: !!str 1\nb: !!binary aGVsbG8=\n").unwrap();
    assert_eq!(v.to_go_string(), "map[b:hello s:1]");
}

#[test]
fn reports_errors() {
    assert!(parse_values_document("").unwrap().is_nil());
    assert!(
        parse_values_document("# only a comment\n")
            .unwrap()
            .is_nil()
    );
    let err = parse_values_document("a: [1, 2\n").unwrap_err();
    assert!(
        err.starts_with("error converting YAML to JSON: yaml: line"),
        "{err}"
    );
    assert!(parse_values_document("a: .inf\n").is_err());
    assert!(parse_values_document("a: !!int x\n").is_err());
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n";
    assert!(
        parse_values_document(bomb)
            .unwrap_err()
            .contains("too many nodes")
    );
}

/// Turns every integer into the float64 the values reader produces.
fn as_read(v: &Value) -> Value {
    match v {
        Value::Int(i) | Value::Int64(i) => Value::Float(*i as f64),
        Value::List(l) => Value::list(l.iter().map(as_read).collect()),
        Value::Map(m) => Value::map(
            m.snapshot()
                .iter()
                .map(|(k, v)| (k.clone(), as_read(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Nil),
        any::<bool>().prop_map(Value::Bool),
        (-1_000_000i64..1_000_000).prop_map(Value::Int),
        "[ -~\u{e9}\n\t]{0,30}".prop_map(Value::String),
        prop::sample::select(vec![
            "true",
            "no",
            "1.0",
            "0x10",
            "- a",
            "a: b",
            "#c",
            " x",
            "x ",
            "",
            "~",
            "1:2",
            "2021-03-04"
        ])
        .prop_map(Value::str),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::list),
            prop::collection::btree_map("[a-z0-9 :#_-]{0,8}", inner, 0..4).prop_map(Value::map),
        ]
    })
}

proptest! {
    #[test]
    fn written_yaml_reads_back_the_same(v in arb_value()) {
        let text = to_yaml(&v).unwrap();
        let back = parse_values_document(&text).unwrap();
        prop_assert!(back.deep_equal(&as_read(&v)), "{:?}\n---\n{}\n---\n{:?}", v, text, back);
    }
}
