//! Table tests of the Sprig and Helm functions.

use std::collections::BTreeMap;

use crate::template::{Limits, Templates};
use crate::value::Value;

fn data() -> Value {
    let mut m = BTreeMap::new();
    m.insert("port".to_owned(), Value::Float(8080.0));
    m.insert("name".to_owned(), Value::str("my-release-name"));
    m.insert(
        "list".to_owned(),
        Value::list(vec![Value::str("b"), Value::str("a"), Value::str("b")]),
    );
    let mut d = BTreeMap::new();
    d.insert("x".to_owned(), Value::Float(1.0));
    d.insert("enabled".to_owned(), Value::Bool(false));
    let mut deep = BTreeMap::new();
    deep.insert("k".to_owned(), Value::str("v"));
    d.insert("sub".to_owned(), Value::map(deep));
    m.insert("d".to_owned(), Value::map(d));
    Value::map(m)
}

fn check(cases: &[(&str, Result<&str, &str>)]) {
    let mut failures = Vec::new();
    for (src, want) in cases {
        let mut set = Templates::new();
        let got = set
            .add("t", src)
            .and_then(|()| set.execute("t", &data(), &Limits::default()))
            .map_err(|e| e.to_string());
        let ok = match (want, &got) {
            (Ok(w), Ok(g)) => w == g,
            (Err(w), Err(g)) => g.contains(w),
            _ => false,
        };
        if !ok {
            failures.push(format!("{src:?}: want {want:?}, got {got:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn strings() {
    check(&[
        (
            "{{ upper \"abc\" }} {{ lower \"ABC\" }} {{ title \"hello wor-ld\" }} {{ untitle \"Hello World\" }}",
            Ok("ABC abc Hello Wor-Ld hello world"),
        ),
        (
            "{{ trim \"  a b \\n\" }}|{{ trimAll \"$\" \"$5.00$\" }}|{{ trimPrefix \"-\" \"-a-\" }}|{{ trimSuffix \"-\" \"-a-\" }}",
            Ok("a b|5.00|a-|-a"),
        ),
        (
            "{{ trunc 5 .name }} {{ trunc -4 .name }} {{ trunc 63 .name }}",
            Ok("my-re name my-release-name"),
        ),
        (
            "{{ .name | trunc 63 | trimSuffix \"-\" }}",
            Ok("my-release-name"),
        ),
        (
            "{{ substr 0 5 \"hello world\" }} {{ substr 6 -1 \"hello world\" }}",
            Ok("hello world"),
        ),
        (
            "{{ repeat 3 \"ab\" }} {{ nospace \"a b\\tc\" }}",
            Ok("ababab abc"),
        ),
        ("{{ replace \"-\" \"_\" \"a-b-c\" }}", Ok("a_b_c")),
        (
            "{{ contains \"ell\" \"hello\" }} {{ hasPrefix \"he\" \"hello\" }} {{ hasSuffix \"lo\" \"hello\" }}",
            Ok("true true true"),
        ),
        (
            "{{ quote \"a\" 1 .missing }} {{ squote \"b\" }} {{ .port | quote }}",
            Ok("\"a\" \"1\" 'b' \"8080\""),
        ),
        ("{{ cat \"a\" 1 .missing \"b\" }}", Ok("a 1 b")),
        (
            "{{ indent 2 \"a\\nb\" }}|{{ nindent 2 \"a\" }}",
            Ok("  a\n  b|\n  a"),
        ),
        (
            "{{ join \",\" .list }} {{ join \"-\" (list 1 2) }}",
            Ok("b,a,b 1-2"),
        ),
        (
            "{{ (split \".\" \"a.b.c\")._1 }} {{ splitList \",\" \"x,y\" }}",
            Ok("b [x y]"),
        ),
        (
            "{{ toString 1.5 }} {{ toStrings (list 1 \"a\") }}",
            Ok("1.5 [1 a]"),
        ),
        (
            "{{ b64enc \"hello\" }} {{ b64dec \"aGVsbG8=\" }} {{ b64dec \"!!\" }}",
            Ok("aGVsbG8= hello illegal base64 data at input byte 0"),
        ),
        (
            "{{ sha256sum \"abc\" }}",
            Ok("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ),
        (
            "{{ randAlphaNum 12 | len }} {{ randNumeric 4 | regexMatch \"^[0-9]{4}$\" }}",
            Ok("12 true"),
        ),
        (
            "{{ regexMatch \"^a.c$\" \"abc\" }} {{ regexReplaceAll \"a(x*)b\" \"-ab-axxb-\" \"${1}W\" }} {{ regexFindAll \"[0-9]\" \"a1b2c3\" 2 }}",
            Ok("true -W-xxW- [1 2]"),
        ),
        (
            "{{ regexReplaceAll \"(\" \"a\" \"b\" }}",
            Err("error calling regexReplaceAll: regexp: Compile"),
        ),
        ("{{ printf \"%s-%d\" .name 3 }}", Ok("my-release-name-3")),
    ]);
}

#[test]
fn lists() {
    check(&[
        ("{{ list 1 \"a\" nil }}", Ok("[1 a <nil>]")),
        (
            "{{ append .list \"c\" }} {{ prepend .list \"z\" }} {{ .list }}",
            Ok("[b a b c] [z b a b] [b a b]"),
        ),
        (
            "{{ first .list }} {{ last .list }} {{ rest .list }} {{ initial .list }}",
            Ok("b b [a b] [b a]"),
        ),
        ("{{ first (list) }}", Ok("<no value>")),
        (
            "{{ uniq .list }} {{ has \"a\" .list }} {{ has \"z\" .list }} {{ without .list \"b\" }}",
            Ok("[b a] true false [a]"),
        ),
        (
            "{{ compact (list 1 0 \"\" \"x\") }} {{ reverse (list 1 2 3) }} {{ concat (list 1) (list 2 3) }}",
            Ok("[1 x] [3 2 1] [1 2 3]"),
        ),
        (
            "{{ sortAlpha .list }} {{ until 3 }} {{ untilStep 1 10 3 }}",
            Ok("[a b b] [0 1 2] [1 4 7]"),
        ),
        (
            "{{ slice (list 1 2 3) 1 }} {{ slice (list 1 2 3) 0 2 }}",
            Ok("[2 3] [1 2]"),
        ),
        (
            "{{ slice \"abc\" 1 }}",
            Err("list should be type of slice or array but string"),
        ),
        ("{{ append \"x\" 1 }}", Err("Cannot push on type string")),
        ("{{ chunk 2 (list 1 2 3) }}", Ok("[[1 2] [3]]")),
        ("{{ until 10000000 }}", Err("exceeds the limit")),
    ]);
}

#[test]
fn dicts() {
    check(&[
        ("{{ dict \"a\" 1 \"b\" }}", Ok("map[a:1 b:]")),
        ("{{ get .d \"x\" }} {{ get .d \"nope\" }}|", Ok("1 |")),
        (
            "{{ $d := dict }}{{ $_ := set $d \"k\" \"v\" }}{{ $d.k }}",
            Ok("v"),
        ),
        (
            "{{ $_ := unset .d \"x\" }}{{ hasKey .d \"x\" }} {{ hasKey .d \"sub\" }}",
            Ok("false true"),
        ),
        (
            "{{ keys .d }} {{ keys .d (dict \"a\" 1) | sortAlpha }}",
            Ok("[enabled sub x] [a enabled sub x]"),
        ),
        ("{{ pluck \"x\" .d (dict \"x\" 2) (dict) }}", Ok("[1 2]")),
        (
            "{{ pick .d \"x\" \"nope\" }} {{ omit .d \"sub\" \"enabled\" }}",
            Ok("map[x:1] map[x:1]"),
        ),
        ("{{ values (dict \"a\" 1 \"b\" 2) }}", Ok("[1 2]")),
        (
            "{{ merge (dict \"a\" 1 \"e\" false \"s\" (dict \"p\" 1)) (dict \"a\" 2 \"b\" 3 \"e\" true \"s\" (dict \"p\" 2 \"q\" 3)) }}",
            Ok("map[a:1 b:3 e:true s:map[p:1 q:3]]"),
        ),
        (
            "{{ mergeOverwrite (dict \"a\" 1 \"s\" (dict \"p\" 1 \"r\" 0)) (dict \"a\" 2 \"s\" (dict \"p\" 2)) }}",
            Ok("map[a:2 s:map[p:2 r:0]]"),
        ),
        (
            "{{ $c := deepCopy .d }}{{ $_ := set $c.sub \"k\" \"changed\" }}{{ .d.sub.k }} {{ $c.sub.k }}",
            Ok("v changed"),
        ),
        (
            "{{ dig \"sub\" \"k\" \"def\" .d }} {{ dig \"sub\" \"zz\" \"def\" .d }}",
            Ok("v def"),
        ),
        (
            "{{ set .missing \"a\" 1 }}",
            Err("assignment to entry in nil map"),
        ),
        (
            "{{ get \"x\" \"y\" }}",
            Err("can't handle \"x\" for arg of type map[string]interface {}"),
        ),
    ]);
}

#[test]
fn defaults_types_math() {
    check(&[
        (
            "{{ default \"d\" .missing }} {{ default \"d\" \"\" }} {{ default \"d\" \"v\" }} {{ .missing | default 5 }}",
            Ok("d d v 5"),
        ),
        ("{{ default 1 .d.enabled }}", Ok("1")),
        (
            "{{ empty .missing }} {{ empty 0 }} {{ empty (list) }} {{ empty .d }}",
            Ok("true true true false"),
        ),
        (
            "{{ coalesce .missing \"\" \"x\" }} {{ ternary \"y\" \"n\" true }} {{ ternary \"y\" \"n\" false }}",
            Ok("x y n"),
        ),
        ("{{ all 1 \"a\" }} {{ any 0 \"\" }}", Ok("true false")),
        (
            "{{ kindOf .port }} {{ kindOf .list }} {{ kindOf .d }} {{ kindIs \"string\" .name }} {{ typeOf 1 }} {{ typeOf .missing }}",
            Ok("float64 slice map true int <nil>"),
        ),
        (
            "{{ int .port }} {{ int \"42\" }} {{ int \"0x10\" }} {{ int \"x\" }} {{ int64 3.9 }} {{ float64 \"1.5\" }}",
            Ok("8080 42 16 0 3 1.5"),
        ),
        (
            "{{ add 1 2 .port }} {{ add1 1 }} {{ sub 5 2 }} {{ mul 2 3 4 }} {{ div 7 2 }} {{ mod 7 2 }} {{ max 1 5 3 }} {{ min 4 2 }}",
            Ok("8083 2 3 24 3 1 5 2"),
        ),
        ("{{ div 1 0 }}", Err("integer divide by zero")),
        (
            "{{ floor 1.5 }} {{ ceil 1.2 }} {{ round 2.555 2 }}",
            Ok("1 2 2.56"),
        ),
        ("{{ eq (add 1 2) 3 }}", Ok("true")),
        (
            "{{ semverCompare \">=1.14-0\" \"v1.20.0\" }} {{ semverCompare \"<1.14-0\" \"v1.20.0\" }}",
            Ok("true false"),
        ),
        (
            "{{ (semver \"1.2.3-rc1\").Minor }} {{ (semver \"v2.0\").Major }} {{ semver \"1.2.3\" }}",
            Ok("2 2 1.2.3"),
        ),
        (
            "{{ semverCompare \"bad\" \"1.0.0\" }}",
            Err("improper constraint"),
        ),
        (
            "{{ fail \"stop here\" }}",
            Err("error calling fail: stop here"),
        ),
        ("{{ uuidv4 | len }}", Ok("36")),
        (
            "{{ date \"2006-01-02 15:04\" 0 }} {{ htmlDate 86400 }} {{ unixEpoch 5 }} {{ dateInZone \"Jan 2\" 0 \"UTC\" }}",
            Ok("1970-01-01 00:00 1970-01-02 5 Jan 1"),
        ),
        (
            "{{ now | date \"2006\" | len }} {{ now | unixEpoch | len }} {{ kindOf now }} {{ (now).Year | printf \"%T\" }}",
            Ok("4 10 ptr int"),
        ),
    ]);
}

#[test]
fn helm_functions() {
    check(&[
        (
            "{{ required \"need x\" .missing }}",
            Err("error calling required: HELM_ERR_STARTneed xHELM_ERR_END"),
        ),
        ("{{ required \"need x\" \"\" }}", Err("need x")),
        ("{{ required \"need x\" .port }}", Ok("8080")),
        (
            "{{ lookup \"v1\" \"Secret\" \"ns\" \"name\" }}",
            Ok("map[]"),
        ),
        ("{{ toYaml .d }}", Ok("enabled: false\nsub:\n  k: v\nx: 1")),
        (
            "{{ toYaml .d | nindent 2 }}",
            Ok("\n  enabled: false\n  sub:\n    k: v\n  x: 1"),
        ),
        (
            "{{ toJson .d }} {{ toJson .list }} {{ toJson \"<\" }}",
            Ok("{\"enabled\":false,\"sub\":{\"k\":\"v\"},\"x\":1} [\"b\",\"a\",\"b\"] \"\\u003c\""),
        ),
        (
            "{{ toRawJson \"<\" }} {{ toPrettyJson (dict \"a\" 1) }}",
            Ok("\"<\" {\n  \"a\": 1\n}"),
        ),
        (
            "{{ (fromYaml \"a: 1\\nb: [x]\").b }} {{ (fromYaml \"a: [\").Error | hasPrefix \"error converting YAML to JSON: yaml: line \" }}",
            Ok("[x] true"),
        ),
        ("{{ fromYamlArray \"- 1\\n- a\" }}", Ok("[1 a]")),
        (
            "{{ (fromJson \"{\\\"a\\\": 2}\").a }} {{ fromJsonArray \"[1, 2]\" }}",
            Ok("2 [1 2]"),
        ),
        (
            "{{ toYaml (fromYaml \"s: 'yes'\\nnum: 1\") }}",
            Ok("num: 1\ns: \"yes\""),
        ),
    ]);
}
