//! Table tests of Go `text/template` semantics, in the manner of Go's own `exec_test.go`.

use std::collections::BTreeMap;

use super::{TemplateLimits, Templates};
use crate::cases::{Case, check_on};
use crate::value::Value;

fn data() -> Value {
    let mut inner = BTreeMap::new();
    inner.insert("name".to_owned(), Value::str("inner"));
    inner.insert("nilval".to_owned(), Value::Nil);
    let mut m = BTreeMap::new();
    m.insert("s".to_owned(), Value::str("str"));
    m.insert("empty".to_owned(), Value::str(""));
    m.insert("i".to_owned(), Value::Int(7));
    m.insert("f".to_owned(), Value::Float(1.5));
    m.insert("whole".to_owned(), Value::Float(3.0));
    m.insert("big".to_owned(), Value::Float(1_000_000.0));
    m.insert("t".to_owned(), Value::Bool(true));
    m.insert("no".to_owned(), Value::Bool(false));
    m.insert("nilval".to_owned(), Value::Nil);
    m.insert(
        "list".to_owned(),
        Value::list(vec![Value::str("a"), Value::str("b"), Value::str("c")]),
    );
    m.insert(
        "nums".to_owned(),
        Value::list(vec![Value::Int(1), Value::Int(2), Value::Int(3)]),
    );
    m.insert("elist".to_owned(), Value::list(vec![]));
    m.insert("inner".to_owned(), Value::map(inner));
    m.insert("emap".to_owned(), Value::empty_map());
    let mut mixed = BTreeMap::new();
    mixed.insert("b".to_owned(), Value::Int(2));
    mixed.insert("a".to_owned(), Value::Int(1));
    mixed.insert("c".to_owned(), Value::Int(3));
    m.insert("m".to_owned(), Value::map(mixed));
    Value::map(m)
}

fn check(cases: &[Case<'_>]) {
    check_on(data, cases);
}

#[test]
fn text_and_trimming() {
    check(&[
        ("hello", Ok("hello")),
        ("a {{- \"b\" -}} c", Ok("abc")),
        ("a  \n\t{{- 1}}", Ok("a1")),
        ("{{1 -}}  \n x", Ok("1x")),
        ("{{-3}}", Ok("-3")),
        ("x {{/* comment */}} y", Ok("x  y")),
        ("x {{- /* comment */ -}} y", Ok("xy")),
        ("{{/* a\nmultiline\ncomment */}}z", Ok("z")),
        (
            "{{/* bad */ 1}}",
            Err("comment ends before closing delimiter"),
        ),
        ("{{/* unclosed", Err("unclosed comment")),
        ("{{ 1 ", Err("unclosed action")),
        ("{{\n.s\n}}", Ok("str")),
        ("{{. end }}", Err("unexpected <end> in operand")),
        ("{{ .s if }}", Err("unexpected <if> in operand")),
    ]);
}

#[test]
fn constants_and_printing() {
    check(&[
        ("{{ 1 }}", Ok("1")),
        ("{{ 1.5 }}", Ok("1.5")),
        ("{{ 1e3 }}", Ok("1000")),
        ("{{ 1e6 }}", Ok("1e+06")),
        ("{{ 0x1F }}", Ok("31")),
        ("{{ 0o17 }}", Ok("15")),
        ("{{ 017 }}", Ok("15")),
        ("{{ 1_000 }}", Ok("1000")),
        ("{{ 'a' }}", Ok("97")),
        ("{{ '\\n' }}", Ok("10")),
        ("{{ \"a\\tb\" }}", Ok("a\tb")),
        ("{{ \"\\u00e9\\x41\" }}", Ok("éA")),
        ("{{ `raw\\n` }}", Ok("raw\\n")),
        ("{{ true }} {{ false }}", Ok("true false")),
        ("{{ nil }}", Err("nil is not a command")),
        ("{{ .whole }} {{ .f }} {{ .big }}", Ok("3 1.5 1e+06")),
        ("{{ .list }}", Ok("[a b c]")),
        ("{{ .m }}", Ok("map[a:1 b:2 c:3]")),
        ("{{ .emap }} {{ .elist }}", Ok("map[] []")),
        ("{{ .missing }}", Ok("<no value>")),
        ("{{ .nilval }}", Ok("<no value>")),
        ("{{ 1abc }}", Err("bad number syntax")),
        (
            "{{ 3 | 4 }}",
            Err("non executable command in pipeline stage 2"),
        ),
        ("{{ # }}", Err("unrecognized character in action")),
    ]);
}

#[test]
fn fields_and_missing_keys() {
    check(&[
        ("{{ .inner.name }}", Ok("inner")),
        ("{{ .inner.missing }}", Ok("<no value>")),
        (
            "{{ .missing.x }}",
            Err("nil pointer evaluating interface {}.x"),
        ),
        (
            "{{ .inner.nilval.x }}",
            Err("nil pointer evaluating interface {}.x"),
        ),
        (
            "{{ .s.x }}",
            Err("can't evaluate field x in type interface {}"),
        ),
        ("{{ $x := .missing }}{{ $x.y }}", Ok("<no value>")),
        ("{{ (.inner).name }}", Ok("inner")),
        ("{{ (index .inner \"name\") }}", Ok("inner")),
        (
            "{{ .inner.name 1 }}",
            Err("name is not a method but has arguments"),
        ),
        ("{{ . | len }}", Ok("15")),
        ("{{ \"x\".y }}", Err("unexpected . after term")),
        ("{{ .s 1 }}", Err("is not a method but has arguments")),
        ("{{ 1 2 }}", Err("can't give argument to non-function 1")),
        ("{{ .t }}", Ok("true")),
    ]);
}

#[test]
fn variables() {
    check(&[
        ("{{ $x := 1 }}{{ $x }}", Ok("1")),
        ("{{ $x := 1 }}{{ $x = 2 }}{{ $x }}", Ok("2")),
        (
            "{{ $ }}",
            Ok(
                "map[big:1e+06 elist:[] emap:map[] empty: f:1.5 i:7 inner:map[name:inner nilval:<nil>] list:[a b c] m:map[a:1 b:2 c:3] nilval:<nil> no:false nums:[1 2 3] s:str t:true whole:3]",
            ),
        ),
        ("{{ $.s }}", Ok("str")),
        (
            "{{ with .inner }}{{ $.s }}-{{ .name }}{{ end }}",
            Ok("str-inner"),
        ),
        ("{{ $y }}", Err("undefined variable \"$y\"")),
        (
            "{{ if true }}{{ $x := 1 }}{{ end }}{{ $x }}",
            Err("undefined variable \"$x\""),
        ),
        (
            "{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}",
            Ok("2"),
        ),
        (
            "{{ $x := 0 }}{{ range .nums }}{{ $x = . }}{{ end }}{{ $x }}",
            Ok("3"),
        ),
        ("{{ $a, $b := 1 }}", Err("too many declarations in command")),
        (
            "{{ $x := \"a\" | printf \"%s-%s\" \"b\" }}{{ $x }}",
            Ok("b-a"),
        ),
    ]);
}

#[test]
fn conditionals() {
    check(&[
        ("{{ if .t }}yes{{ end }}", Ok("yes")),
        ("{{ if .no }}yes{{ else }}no{{ end }}", Ok("no")),
        (
            "{{ if .empty }}a{{ else if .s }}b{{ else }}c{{ end }}",
            Ok("b"),
        ),
        (
            "{{ if .empty }}a{{ else if .no }}b{{ else }}c{{ end }}",
            Ok("c"),
        ),
        ("{{ if .elist }}a{{ else }}b{{ end }}", Ok("b")),
        ("{{ if .emap }}a{{ else }}b{{ end }}", Ok("b")),
        ("{{ if .missing }}a{{ else }}b{{ end }}", Ok("b")),
        ("{{ if 0 }}a{{ else }}b{{ end }}", Ok("b")),
        ("{{ if 0.0 }}a{{ else }}b{{ end }}", Ok("b")),
        ("{{ with .inner }}{{ .name }}{{ end }}", Ok("inner")),
        ("{{ with .missing }}x{{ else }}none{{ end }}", Ok("none")),
        (
            "{{ with .missing }}x{{ else with .s }}{{ . }}{{ end }}",
            Ok("str"),
        ),
        ("{{ if $x := .s }}{{ $x }}{{ end }}", Ok("str")),
        ("{{ if }}x{{ end }}", Err("missing value for if")),
        ("{{ if true }}x", Err("unexpected EOF")),
        ("{{ end }}", Err("unexpected {{end}}")),
        ("{{ else }}", Err("unexpected {{else}}")),
        (
            "{{ if true }}a{{ else }}b{{ else }}c{{ end }}",
            Err("expected end; found {{else}}"),
        ),
    ]);
}

#[test]
fn ranges() {
    check(&[
        ("{{ range .list }}{{ . }}{{ end }}", Ok("abc")),
        (
            "{{ range $i, $e := .list }}{{ $i }}={{ $e }};{{ end }}",
            Ok("0=a;1=b;2=c;"),
        ),
        ("{{ range $e := .list }}{{ $e }}{{ end }}", Ok("abc")),
        (
            "{{ range $k, $v := .m }}{{ $k }}{{ $v }}{{ end }}",
            Ok("a1b2c3"),
        ),
        ("{{ range .m }}{{ . }}{{ end }}", Ok("123")),
        ("{{ range .elist }}x{{ else }}empty{{ end }}", Ok("empty")),
        ("{{ range .missing }}x{{ else }}none{{ end }}", Ok("none")),
        (
            "{{ range .nums }}{{ if eq . 2 }}{{ break }}{{ end }}{{ . }}{{ end }}",
            Ok("1"),
        ),
        (
            "{{ range .nums }}{{ if eq . 2 }}{{ continue }}{{ end }}{{ . }}{{ end }}",
            Ok("13"),
        ),
        ("{{ range 3 }}{{ . }}{{ end }}", Ok("012")),
        ("{{ range $i := 2 }}{{ $i }}{{ end }}", Ok("01")),
        (
            "{{ range $i, $e := 2 }}{{ end }}",
            Err("can't use 2 to iterate over more than one variable"),
        ),
        (
            "{{ range .f }}{{ end }}",
            Err("range can't iterate over 1.5"),
        ),
        (
            "{{ range .s }}{{ end }}",
            Err("range can't iterate over str"),
        ),
        ("{{ break }}", Err("{{break}} outside {{range}}")),
        (
            "{{ range .list }}{{ . }}{{ else }}{{ break }}{{ end }}",
            Err("{{break}} outside {{range}}"),
        ),
        (
            "{{ range .list }}{{ $x := . }}{{ end }}{{ $x }}",
            Err("undefined variable"),
        ),
        (
            "{{ range $i, $e := .list }}{{ $ | len }}{{ end }}",
            Ok("151515"),
        ),
        (
            "{{ range .list }}{{ range $.nums }}{{ . }}{{ end }}{{ end }}",
            Ok("123123123"),
        ),
    ]);
}

#[test]
fn templates_and_blocks() {
    check(&[
        (
            "{{ define \"x\" }}X{{ . }}{{ end }}{{ template \"x\" .s }}",
            Ok("Xstr"),
        ),
        (
            "{{ define \"x\" }}{{ . }}{{ end }}{{ template \"x\" }}",
            Ok("<no value>"),
        ),
        (
            "{{ define \"x\" }}{{ .s }}{{ end }}{{ template \"x\" }}",
            Ok("<no value>"),
        ),
        (
            "{{ template \"nope\" }}",
            Err("template \"nope\" not defined"),
        ),
        ("{{ block \"b\" .s }}[{{ . }}]{{ end }}", Ok("[str]")),
        (
            "{{ define \"x\" }}{{ $ }}{{ end }}{{ $y := 1 }}{{ template \"x\" 5 }}",
            Ok("5"),
        ),
        (
            "{{ define \"x\" }}{{ include \"y\" . }}{{ end }}{{ define \"y\" }}Y{{ . }}{{ end }}{{ include \"x\" 1 }}",
            Ok("Y1"),
        ),
        (
            "{{ define \"loop\" }}{{ include \"loop\" . }}{{ end }}{{ include \"loop\" . }}",
            Err("rendering template has a nested reference name: loop: unable to execute template"),
        ),
        (
            "{{ include \"missing\" . }}",
            Err("no template \"missing\" associated with template \"gotpl\""),
        ),
        ("{{ tpl \"{{ .s }}-{{ .missing }}\" . }}", Ok("str-")),
        (
            "{{ tpl \"{{ define \\\"q\\\" }}Q{{ end }}{{ include \\\"q\\\" . }}\" . }}",
            Ok("Q"),
        ),
        (
            "{{ tpl \"{{ .x.y }}\" . }}",
            Err("error during tpl function execution"),
        ),
        (
            "{{ define \"x\" }}a{{ end }}{{ define \"x\" }}b{{ end }}{{ template \"x\" }}",
            Ok("b"),
        ),
        (
            "{{ define \"x\" }}a{{ end }}{{ define \"x\" }}  {{ end }}{{ template \"x\" }}",
            Ok("a"),
        ),
    ]);
}

#[test]
fn comparisons_and_logic() {
    check(&[
        (
            "{{ eq 1 1 }} {{ eq 1 2 }} {{ eq 1 3 2 1 }}",
            Ok("true false true"),
        ),
        ("{{ eq .s \"str\" }}", Ok("true")),
        (
            "{{ eq .whole 3 }}",
            Err("incompatible types for comparison"),
        ),
        ("{{ eq .whole 3.0 }}", Ok("true")),
        ("{{ eq .missing \"x\" }}", Ok("false")),
        ("{{ eq .list .list }}", Err("non-comparable type")),
        ("{{ ne 1 2 }}", Ok("true")),
        (
            "{{ lt 1 2 }} {{ le 2 2 }} {{ gt 1 2 }} {{ ge 2 2 }}",
            Ok("true true false true"),
        ),
        ("{{ lt \"a\" \"b\" }}", Ok("true")),
        ("{{ lt 1 \"b\" }}", Err("incompatible types for comparison")),
        ("{{ lt .list 1 }}", Err("invalid type for comparison")),
        (
            "{{ and 1 0 2 }} {{ and 1 2 }} {{ or 0 \"\" 3 }} {{ or 0 \"\" }}",
            Ok("0 2 3 "),
        ),
        ("{{ and .missing .missing.x }}", Ok("<no value>")),
        ("{{ or .s .missing.x }}", Ok("str")),
        ("{{ not 0 }} {{ not .s }}", Ok("true false")),
        (
            "{{ and }}",
            Err("wrong number of args for and: want at least 1 got 0"),
        ),
        ("{{ eq 1 }}", Err("missing argument for comparison")),
    ]);
}

#[test]
fn builtin_functions() {
    check(&[
        ("{{ len .list }} {{ len .s }} {{ len .m }}", Ok("3 3 3")),
        ("{{ len .missing }}", Err("len of nil pointer")),
        ("{{ len 3 }}", Err("len of type int")),
        (
            "{{ index .list 1 }} {{ index .m \"b\" }} {{ index .inner \"zz\" }}",
            Ok("b 2 <no value>"),
        ),
        ("{{ index .list 5 }}", Err("index out of range: 5")),
        ("{{ index .missing 1 }}", Err("index of untyped nil")),
        ("{{ index .s 0 }}", Ok("115")),
        ("{{ slice .list 1 }}", Ok("[b c]")),
        ("{{ print 1 2 \"a\" 3 }}", Ok("1 2a3")),
        ("{{ println 1 \"a\" }}", Ok("1 a\n")),
        (
            "{{ printf \"%05.1f|%x|%q\" 3.24159 255 \"hi\" }}",
            Ok("003.2|ff|\"hi\""),
        ),
        ("{{ printf \"%d\" .whole }}", Ok("%!d(float64=3)")),
        (
            "{{ printf \"%s %v\" .list .inner }}",
            Ok("[a b c] map[name:inner nilval:<nil>]"),
        ),
        (
            "{{ html \"<a href='x'>&</a>\" }}",
            Ok("&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;"),
        ),
        ("{{ js \"a'b<c\" }}", Ok("a\\'b\\u003Cc")),
        ("{{ urlquery \"a b&c\" }}", Ok("a+b%26c")),
        ("{{ nofunc 1 }}", Err("function \"nofunc\" not defined")),
        ("{{ upper 1 }}", Err("expected string; found 1")),
        (
            "{{ upper .i }}",
            Err("wrong type for value; expected string; got int"),
        ),
        (
            "{{ upper .missing }}",
            Err("wrong type for value; expected string; got interface {}"),
        ),
        (
            "{{ .missing | upper }}",
            Err("invalid value; expected string"),
        ),
        (
            "{{ trunc .whole \"abc\" }}",
            Err("wrong type for value; expected int; got float64"),
        ),
        ("{{ trunc 2.0 \"abc\" }}", Ok("ab")),
        (
            "{{ trunc 2.5 \"abc\" }}",
            Err("expected integer; found 2.5"),
        ),
        (
            "{{ upper \"a\" \"b\" }}",
            Err("wrong number of args for upper: want 1 got 2"),
        ),
        ("{{ \"a\" | upper }}", Ok("A")),
        ("{{ \"x\" | printf \"%s-%s\" \"y\" }}", Ok("y-x")),
    ]);
}

#[test]
fn errors_name_file_line_and_column() {
    let mut set = Templates::new();
    set.add("chart/templates/a.yaml", "line1\n  {{ .missing.x }}")
        .unwrap();
    let err = set
        .execute(
            "chart/templates/a.yaml",
            &data(),
            &TemplateLimits::default(),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "template: chart/templates/a.yaml:2:13: executing \"chart/templates/a.yaml\" at <.missing.x>: nil pointer evaluating interface {}.x"
    );
    let mut set = Templates::new();
    set.add("f", "{{ define \"d\" }}\n{{ fail \"boom\" }}{{ end }}")
        .unwrap();
    set.add("g", "{{ include \"d\" . }}").unwrap();
    let err = set
        .execute("g", &data(), &TemplateLimits::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "template: f:2:3: executing \"d\" at <fail \"boom\">: error calling fail: HELM_ERR_STARTboomHELM_ERR_END"
        ),
        "{err}"
    );
    let err = Templates::new()
        .add("p", "a\n{{ if }}")
        .unwrap_err()
        .to_string();
    assert_eq!(err, "template: p:2: missing value for if");
}

#[test]
fn limits_stop_runaway_templates() {
    let limits = TemplateLimits {
        max_depth: 10,
        max_output: 1000,
        max_steps: 10_000,
    };
    let mut set = Templates::new();
    set.add("big", "{{ range 100000 }}x{{ end }}").unwrap();
    let err = set
        .execute("big", &data(), &limits)
        .unwrap_err()
        .to_string();
    assert!(err.contains("exceeds") || err.contains("limit"), "{err}");
    set.add(
        "deep",
        "{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}",
    )
    .unwrap();
    let err = set
        .execute("deep", &data(), &limits)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("exceeded maximum template depth (10)"),
        "{err}"
    );
    assert!(Templates::new().add("n", "{{ ((1)) }}").is_ok());
    let cyclic = "{{ $d := dict }}{{ $_ := set $d \"self\" $d }}{{ $d | toJson }}|{{ $d | toYaml }}|{{ $e := deepCopy $d }}{{ eq (len $e) 1 }}";
    set.add("cyclic", cyclic).unwrap();
    assert_eq!(
        set.execute("cyclic", &data(), &TemplateLimits::default())
            .unwrap(),
        "||true"
    );
    let deep = format!("{{{{ {}1{} }}}}", "(".repeat(1000), ")".repeat(1000));
    assert!(
        Templates::new()
            .add("n", &deep)
            .unwrap_err()
            .to_string()
            .contains("nesting deeper")
    );
}
