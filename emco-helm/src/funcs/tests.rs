//! Table tests of the Sprig and Helm functions.

use std::collections::BTreeMap;

use std::sync::Arc;

use crate::cases::{Case, check_on};
use crate::template::{TemplateLimits, Templates};
use crate::value::{Bytes, Value};

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

fn check(cases: &[Case<'_>]) {
    check_on(data, cases);
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
            Err("error calling fail: HELM_ERR_STARTstop hereHELM_ERR_END"),
        ),
        ("{{ uuidv4 | len }}", Ok("36")),
        (
            "{{ date \"2006-01-02 15:04\" 0 }} {{ htmlDate 86400 }} {{ unixEpoch 5 }} {{ dateInZone \"Jan 2\" 0 \"UTC\" }}",
            Ok("1970-01-01 00:00 1970-01-02 5 Jan 1"),
        ),
        (
            "{{ now | date \"2006\" | len }} {{ now | unixEpoch | len }} {{ kindOf now }} {{ (now).Year | printf \"%T\" }}",
            Ok("4 10 struct int"),
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

#[test]
fn text_helpers() {
    check(&[
        (
            "{{ abbrev 5 \"hello world\" }}|{{ abbrev 3 \"abcdef\" }}|{{ abbrev 20 \"hello\" }}|{{ abbrev 4 \"\" }}",
            Ok("he...|abcdef|hello|"),
        ),
        (
            "{{ abbrevboth 5 10 \"1234 5678 9123\" }}|{{ abbrevboth 0 6 \"abcdefghij\" }}|{{ abbrevboth 1 6 \"abcdefghij\" }}",
            Ok("...5678...|abc...|abcdefghij"),
        ),
        (
            "{{ wrap 5 \"Hello World\" }}|{{ wrap 3 \"abcdef gh\" }}|{{ wrap 3 \"abcdef\" }}",
            Ok("Hello\nWorld|abcdef\ngh|abcdef"),
        ),
        (
            "{{ wrapWith 5 \"\\t\" \"Hello World\" }}|{{ wrapWith 3 \"|\" \"abcdef gh\" }}|{{ wrapWith 10 \"|\" \"\" }}",
            Ok("Hello\tWorld|abc|def|gh|"),
        ),
        (
            "{{ plural \"one\" \"many\" 1 }} {{ plural \"one\" \"many\" 2 }} {{ plural \"one\" \"many\" 0 }}",
            Ok("one many many"),
        ),
        (
            "{{ initials \"First Try\" }}|{{ initials \"  a\\tb  c \" }}|{{ swapcase \"This Is A.Test\" }}",
            Ok("FT|abc|tHIS iS a.tEST"),
        ),
        ("{{ swapcase \"ßa\" }}|{{ camelcase \"a_ß\" }}", Ok("ßA|Aß")),
        (
            "{{ swapcase \"swapCase\" }}|{{ swapcase \"Θ~λa云Ξπ\" }}|{{ swapcase \"\" }}",
            Ok("SWAPcASE|θ~ΛA云ξΠ|"),
        ),
        (
            "{{ camelcase \"http_server\" }}|{{ camelcase \"_camel_case\" }}|{{ camelcase \"no_https\" }}|{{ camelcase \"_complex__case_\" }}",
            Ok("HttpServer|_CamelCase|NoHttps|_Complex_Case_"),
        ),
        (
            "{{ camelcase \"all\" }}|{{ camelcase \"GOLANG_IS_GREAT\" }}|{{ camelcase \"GOLANG\" }}|{{ camelcase \"a\" }}|{{ camelcase \"好\" }}|{{ camelcase \"\" }}|{{ camelcase \"__\" }}",
            Ok("All|GolangIsGreat|Golang|A|好||__"),
        ),
        (
            "{{ sha1sum \"abc\" }} {{ sha1sum \"\" }}",
            Ok("a9993e364706816aba3e25717850c26c9cd0d89d da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ),
        (
            "{{ adler32sum \"abc\" }} {{ adler32sum \"\" }} {{ adler32sum \"Wikipedia\" }}",
            Ok("38600999 1 300286872"),
        ),
        (
            "{{ plural \"a\" \"b\" 1.5 }}",
            Err("expected integer; found 1.5"),
        ),
    ]);
}

#[test]
fn float_math() {
    check(&[
        (
            "{{ addf 1.5 2 2 }} {{ addf 0.1 0.2 }} {{ addf }} {{ add1f 1.5 }} {{ add1f \"2.25\" }}",
            Ok("5.5 0.3 0 2.5 3.25"),
        ),
        (
            "{{ subf 7.5 2 3 }} {{ subf 0.3 0.1 }} {{ mulf 1.5 2 2 }} {{ mulf 0.1 3 }} {{ mulf 2 }}",
            Ok("2.5 0.2 6 0.3 2"),
        ),
        (
            "{{ divf 10 4 }} {{ divf 1 3 }} {{ divf 2 3 }} {{ divf -2 3 }} {{ divf 1e300 1e-300 }}",
            Ok("2.5 0.3333333333333333 0.6666666666666667 -0.6666666666666667 +Inf"),
        ),
        (
            "{{ maxf 1 2.5 3 }} {{ maxf -1 }} {{ minf 1 2.5 -3 }} {{ minf 5 \"2\" }}",
            Ok("3 -1 -3 2"),
        ),
        ("{{ divf 1 0 }}", Err("decimal division by zero")),
        (
            "{{ addf 1 \"NaN\" }}",
            Err("Cannot create a Decimal from NaN"),
        ),
    ]);
}

#[test]
fn must_variants() {
    check(&[
        (
            "{{ mustFirst .list }} {{ mustLast .list }} {{ mustRest .list }} {{ mustInitial .list }} {{ mustReverse .list }}",
            Ok("b b [a b] [b a] [b a b]"),
        ),
        (
            "{{ mustUniq .list }} {{ mustWithout .list \"a\" }} {{ mustHas \"a\" .list }} {{ mustAppend .list \"c\" }} {{ mustPush .list \"c\" }} {{ mustPrepend .list \"c\" }}",
            Ok("[b a] [b b] true [b a b c] [b a b c] [c b a b]"),
        ),
        (
            "{{ mustSlice .list 1 }} {{ mustCompact (list 1 \"\" 2) }} {{ mustChunk 2 .list }}",
            Ok("[a b] [1 2] [[b a] [b]]"),
        ),
        (
            "{{ mustFirst \"abc\" }}",
            Err("Cannot find first on type string"),
        ),
        ("{{ mustAppend 1 2 }}", Err("Cannot push on type int")),
        (
            "{{ mustMerge (dict \"a\" 1) (dict \"a\" 2 \"b\" 3) }} {{ mustMergeOverwrite (dict \"a\" 1) (dict \"a\" 2) }} {{ (mustDeepCopy .d).sub.k }}",
            Ok("map[a:1 b:3] map[a:2] v"),
        ),
        (
            "{{ mustRegexReplaceAll \"a(x*)b\" \"-ab-axxb-\" \"${1}W\" }} {{ mustRegexReplaceAllLiteral \"a(x*)b\" \"-ab-\" \"${1}\" }} {{ mustRegexFind \"a+\" \"baaa\" }} {{ mustRegexFindAll \"a.\" \"abacad\" -1 }} {{ mustRegexSplit \"z+\" \"pizza\" -1 }}",
            Ok("-W-xxW- -${1}- aaa [ab ac ad] [pi a]"),
        ),
        (
            "{{ mustRegexFind \"(\" \"x\" }}",
            Err("error calling mustRegexFind"),
        ),
        (
            "{{ mustToRawJson \"<\" }} {{ mustToPrettyJson (dict \"a\" 1) }} [{{ toPrettyJson (float64 \"NaN\") }}]",
            Ok("\"<\" {\n  \"a\": 1\n} []"),
        ),
        (
            "{{ mustToPrettyJson (float64 \"NaN\") }}",
            Err("json: unsupported value: NaN"),
        ),
        (
            "{{ mustToRawJson (float64 \"NaN\") }}",
            Err("json: unsupported value: NaN"),
        ),
    ]);
}

#[test]
fn must_aliases_resolve() {
    for (must, base) in super::MUST_ALIASES {
        assert!(
            super::names().contains(base),
            "{must}: no base function {base}"
        );
        assert!(super::names().contains(must), "{must} not registered");
    }
}

#[test]
fn durations() {
    check(&[
        (
            "{{ duration \"95\" }} {{ duration 95 }} {{ duration (int64 3661) }} {{ duration \"-90\" }} {{ duration \"86400\" }} {{ duration \"x\" }} {{ duration .port }}",
            Ok("1m35s 0s 1h1m1s -1m30s 24h0m0s 0s 0s"),
        ),
        (
            "{{ durationRound \"2h10m5s\" }} {{ durationRound \"400h\" }} {{ durationRound \"-3h5m\" }} {{ durationRound \"\" }} {{ durationRound (int64 1500000000) }} {{ durationRound 5 }}",
            Ok("2h 16d 3h 0s 1s 0s"),
        ),
        (
            "{{ now | dateModify \"-90m\" | ago }} {{ now | dateModify \"bogus\" | ago }} {{ now | dateModify \"1h\" | ago }} {{ ago \"x\" }}",
            Ok("1h30m0s 0s -1h0m0s 0s"),
        ),
        (
            "{{ now | mustDateModify \"-1.5h\" | ago }} {{ now | dateModify \"-25h\" | durationRound }}",
            Ok("1h30m0s 1d"),
        ),
        (
            "{{ now | mustDateModify \"1x\" }}",
            Err("time: unknown unit \"x\" in duration \"1x\""),
        ),
        (
            "{{ dateModify \"1h\" \"2024-01-01\" }}",
            Err("wrong type for value; expected time.Time; got string"),
        ),
    ]);
}

#[test]
fn to_toml() {
    check(&[
        ("{{ toToml (dict \"foo\" \"bar\") }}", Ok("foo = \"bar\"\n")),
        (
            "{{ toToml (dict \"mast\" (dict \"sail\" \"white\")) }}",
            Ok("[mast]\n  sail = \"white\"\n"),
        ),
        (
            "{{ toToml . }}",
            Ok(
                "list = [\"b\", \"a\", \"b\"]\nname = \"my-release-name\"\nport = 8080.0\n\n[d]\n  enabled = false\n  x = 1.0\n  [d.sub]\n    k = \"v\"\n",
            ),
        ),
        (
            "{{ toToml (dict \"a b\" 1 \"q\" \"x\\\"\\\\\\n\\u0001\" \"n\" nil \"f\" 0.5 \"e\" list) }}",
            Ok("\"a b\" = 1\ne = []\nf = 0.5\nq = \"x\\\"\\\\\\n\\u0001\"\n"),
        ),
        (
            "{{ toToml (dict \"srv\" (list (dict \"p\" 1) (dict \"p\" 2 \"t\" (dict \"x\" true)))) }}",
            Ok("[[srv]]\n  p = 1\n\n[[srv]]\n  p = 2\n  [srv.t]\n    x = true\n"),
        ),
        (
            "{{ toToml (dict \"l\" (list (list 1 2) (dict \"k\" \"v\" \"m\" (dict \"z\" 1)))) }}",
            Ok("l = [[1, 2], {k = \"v\", m = {z = 1}}]\n"),
        ),
        (
            "{{ toToml (dict \"l\" (list 1 nil)) }}",
            Ok("toml: cannot encode array with nil element"),
        ),
        (
            "{{ toToml \"x\" }}|{{ toToml (list 1) }}|{{ toToml nil }}",
            Ok(
                "toml: top-level values must be Go maps or structs|toml: top-level values must be Go maps or structs|",
            ),
        ),
    ]);
}

#[test]
fn shuffle_permutes_characters() {
    let src = "{{ shuffle \"facgbheidjk尝试\" }}|{{ shuffle \"\" }}";
    let mut set = Templates::new();
    set.add("t", src).unwrap();
    let out = set
        .execute("t", &data(), &TemplateLimits::default())
        .unwrap();
    let (shuffled, empty) = out.split_once('|').unwrap();
    let mut got: Vec<char> = shuffled.chars().collect();
    got.sort_unstable();
    let mut want: Vec<char> = "facgbheidjk尝试".chars().collect();
    want.sort_unstable();
    assert_eq!(got, want);
    assert_eq!(empty, "");
}

#[test]
fn snake_and_kebab_case() {
    let cases = [
        ("HTTPServer", "http_server"),
        ("_camelCase", "_camel_case"),
        ("NoHTTPS", "no_https"),
        ("Wi_thF", "wi_th_f"),
        ("_AnotherTES_TCaseP", "_another_tes_t_case_p"),
        ("ALL", "all"),
        ("_HELLO_WORLD_", "_hello_world_"),
        ("HELLO_WORLD", "hello_world"),
        ("HELLO____WORLD", "hello____world"),
        ("TW", "tw"),
        ("_C", "_c"),
        ("http2xx", "http_2xx"),
        ("HTTP20xOK", "http_20x_ok"),
        ("HTTP-20xStatus", "http_20x_status"),
        ("a", "a"),
        ("  sentence case  ", "__sentence_case__"),
        (
            " Mixed-hyphen case _and SENTENCE_case and UPPER-case",
            "_mixed_hyphen_case__and_sentence_case_and_upper_case",
        ),
        ("", ""),
        // Numbers join the word before them unless lower-case letters follow (xstrings 1.4+).
        ("HTTP2XX", "http2_xx"),
        ("Abc\u{FFFD}E", "abc_\u{FFFD}e"),
        ("FirstName", "first_name"),
        ("GO PATH", "go_path"),
        ("Duration2m3s", "duration_2m3s"),
        ("Bld4Floor3rd", "bld4_floor_3rd"),
    ];
    for (input, want) in cases {
        assert_eq!(super::case::lower_case_words(input, '_'), want, "{input:?}");
        assert_eq!(
            super::case::lower_case_words(input, '-'),
            want.replace('_', "-"),
            "{input:?}"
        );
    }
    check(&[(
        "{{ snakecase \"FirstName\" }} {{ kebabcase \"FirstName\" }} {{ snakecase .name }}",
        Ok("first_name first-name my_release_name"),
    )]);
}

#[test]
fn dates_parse_and_zones() {
    check(&[
        (
            r#"{{ toDate "2006-01-02" "2017-12-31" | date "02/01/2006" }}"#,
            Ok("31/12/2017"),
        ),
        (
            r#"{{ toDate "2006-01-02T15:04:05Z07:00" "2024-03-05T10:11:12+02:00" }}"#,
            Ok("2024-03-05 10:11:12 +0200 +0200"),
        ),
        // `date` shows the instant in the local zone (UTC).
        (
            r#"{{ toDate "2006-01-02T15:04:05Z07:00" "2024-03-05T10:11:12+02:00" | date "15:04 MST" }}"#,
            Ok("08:11 UTC"),
        ),
        (
            r#"{{ (toDate "2006-01-02" "2024-03-05").Unix }} {{ toDate "2006-01-02" "2024-03-05" | unixEpoch }}"#,
            Ok("1709596800 1709596800"),
        ),
        (
            r#"{{ toDate "2006-01-02" "bogus" }}"#,
            Ok("0001-01-01 00:00:00 +0000 UTC"),
        ),
        (
            r#"{{ mustToDate "2006-01-02" "2024-13-01" }}"#,
            Err(r#"error calling mustToDate: parsing time "2024-13-01": month out of range"#),
        ),
        (
            r#"{{ toDate "2006-01-02" "2024-01-31" | dateModify "24h" | date "2006-01-02" }}"#,
            Ok("2024-02-01"),
        ),
        (
            r#"{{ date_in_zone "2006" 0 "UTC" }} {{ date_modify "1h" (toDate "15" "10") | date "15" }}"#,
            Ok("1970 11"),
        ),
        (
            r#"{{ (toDate "2006-01-02 15:04:05.000" "2024-03-05 10:11:12.345").Format "Jan _2 05.999" }}"#,
            Ok("Mar  5 12.345"),
        ),
        (
            r#"{{ kindOf now }} {{ kindOf (genCA "x" 1) }} {{ kindOf (semver "1.0.0") }}"#,
            Ok("struct struct ptr"),
        ),
        // encoding/json writes times as RFC 3339 with nanoseconds, and so toYaml too.
        (
            r#"{{ toDate "2006-01-02T15:04:05Z07:00" "2024-03-05T10:11:12+02:00" | toJson }} {{ dict "t" (toDate "2006-01-02" "2024-03-05") | toYaml }}"#,
            Ok(r#""2024-03-05T10:11:12+02:00" t: "2024-03-05T00:00:00Z""#),
        ),
    ]);
}

#[test]
fn call_builtin_has_no_functions_to_call() {
    check(&[
        (
            "{{ call .name }}",
            Err("error calling call: non-function .name of type string"),
        ),
        (
            "{{ call .d 1 2 }}",
            Err("error calling call: non-function .d of type map[string]interface {}"),
        ),
        (
            "{{ call .missing }}",
            Err("error calling call: call of nil"),
        ),
        (
            "{{ .port | call }}",
            Err("error calling call: non-function <float64 Value> of type float64"),
        ),
        (
            "{{ call }}",
            Err("wrong number of args for call: want at least 1 got 0"),
        ),
    ]);
}

#[test]
fn remaining_sprig_functions() {
    check(&[
        ("{{ hello }}", Ok("Hello!")),
        (
            r#"{{ tuple 1 "a" }} {{ biggest 1 5 3 }} {{ trimall "$" "$x$" }}"#,
            Ok("[1 a] 5 x"),
        ),
        (
            r#"{{ base "a/b.txt" }} {{ dir "a/b.txt" }} {{ clean "a//b/../c" }} {{ ext "x.tgz" }} {{ isAbs "/a" }} {{ osBase "/x/y" }}"#,
            Ok("b.txt a a/c .tgz true y"),
        ),
        (
            r#"{{ b32enc "hello" }} {{ "NBSWY3DP" | b32dec }}"#,
            Ok("NBSWY3DP hello"),
        ),
        (
            "{{ seq 5 }}|{{ seq -3 }}|{{ seq 0 2 }}|{{ seq 2 -2 }}|{{ seq 0 2 10 }}|{{ seq 10 -3 2 }}|{{ seq 0 2 -10 }}|{{ seq }}",
            Ok("1 2 3 4 5|1 0 -1 -2 -3|0 1 2|2 1 0 -1 -2|0 2 4 6 8 10|10 7 4||"),
        ),
        (r#"{{ $r := randInt 3 4 }}{{ $r }}"#, Ok("3")),
        ("{{ randInt 4 4 }}", Err("invalid argument to Intn")),
        ("{{ randAscii 12 | len }}", Ok("12")),
        (
            r#"{{ typeIsLike "string" "x" }} {{ typeIsLike "map[string]interface {}" .d }} {{ typeIsLike "int" "x" }}"#,
            Ok("true true false"),
        ),
        (
            r#"{{ mustFromJson "[1, \"a\"]" }} {{ (mustFromJson "{\"a\": {\"b\": 2}}").a.b }}"#,
            Ok("[1 a] 2"),
        ),
        (r#"{{ regexQuoteMeta "1.5-2.0?" }}"#, Ok(r"1\.5-2\.0\?")),
        (
            r#"{{ $u := urlParse "https://u@host:80/p?q=1#f" }}{{ $u.scheme }} {{ $u.host }} {{ $u.hostname }} {{ $u.path }} {{ $u.query }} {{ $u.fragment }} {{ $u.userinfo }}"#,
            Ok("https host:80 host /p q=1 f u"),
        ),
        (
            r#"{{ urlJoin (dict "scheme" "http" "host" "h:1" "path" "/a b" "query" "x=1") }}"#,
            Ok("http://h:1/a%20b?x=1"),
        ),
        (
            r#"{{ derivePassword 1 "pin" "password" "user" "example.com" }} {{ htpasswd "a:b" "x" }}"#,
            Ok("6685 invalid username: a:b"),
        ),
        (
            r#"{{ $e := encryptAES "k" "secret" }}{{ decryptAES "k" $e }} {{ randBytes 6 | len }}"#,
            Ok("secret 8"),
        ),
    ]);
}

/// Go's `[]byte` (`.Files.GetBytes`): text/template prints it with `fmt.Fprint` (byte
/// numbers), Sprig's `strval` (`toString`, `quote`) reads the text, `squote`/`cat` use `%v`,
/// `encoding/json` writes base64, and `string` parameters (`b64enc`, `sha256sum`) reject it
/// through `reflect`'s assignability check.
#[test]
fn byte_slices() {
    // Go `[]byte` values, as `.Files.GetBytes` returns them.
    fn data() -> Value {
        let bytes = |b: &[u8]| Value::Object(Arc::new(Bytes(Arc::new(b.to_vec()))));
        let mut m = BTreeMap::new();
        m.insert("raw".to_owned(), bytes(b"hi"));
        m.insert("none".to_owned(), bytes(b""));
        Value::map(m)
    }
    check_on(
        data,
        &[
            ("{{ join \",\" .raw }}", Ok("104,105")),
            ("{{ .raw }}", Ok("[104 105]")),
            ("{{ len .raw }} {{ len .none }}", Ok("2 0")),
            ("{{ index .raw 0 }} {{ index .raw 1 }}", Ok("104 105")),
            ("{{ index .raw 2 }}", Err("index out of range: 2")),
            ("{{ toString .raw }}", Ok("hi")),
            (
                "{{ .raw | quote }} {{ .raw | squote }}",
                Ok("\"hi\" '[104 105]'"),
            ),
            ("{{ cat .raw \"x\" }}", Ok("[104 105] x")),
            (
                "{{ printf \"%s|%v|%d|%x|%X|%q|% x\" .raw .raw .raw .raw .raw .raw .raw }}",
                Ok("hi|[104 105]|[104 105]|6869|6869|\"hi\"|68 69"),
            ),
            ("{{ printf \"%5s|%o\" .raw .raw }}", Ok("   hi|[150 151]")),
            (
                "{{ toJson .raw }} {{ dict \"b\" .raw | toJson }}",
                Ok("\"aGk=\" {\"b\":\"aGk=\"}"),
            ),
            (
                "{{ toYaml .raw }}|{{ dict \"b\" .raw | toYaml }}",
                Ok("aGk=|b: aGk="),
            ),
            ("{{ b64enc (toString .raw) }}", Ok("aGk=")),
            (
                "{{ b64enc .raw }}",
                Err("wrong type for value; expected string; got []uint8"),
            ),
            (
                "{{ sha256sum .raw }}",
                Err("wrong type for value; expected string; got []uint8"),
            ),
            ("{{ upper .raw }}", Err("expected string; got []uint8")),
            ("{{ typeOf .raw }} {{ kindOf .raw }}", Ok("[]uint8 slice")),
            (
                "{{ if .raw }}y{{ end }}{{ if .none }}y{{ else }}n{{ end }} {{ empty .none }}",
                Ok("yn true"),
            ),
            (
                "{{ range $i, $b := .raw }}{{ $i }}={{ $b }} {{ end }}",
                Ok("0=104 1=105 "),
            ),
        ],
    );
}
