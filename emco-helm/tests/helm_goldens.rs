//! Comparisons with Helm's own expectations: `helm template` golden files of Helm's test charts
//! (stored under `tests/helm-goldens/`, see its README for the source of each file) and the
//! template/engine cases of Helm's `pkg/engine` unit tests, rebuilt here as charts.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::collections::BTreeMap;
use std::path::Path;

use emco_helm::{
    Chart, HelmCompat, RenderOptions, TemplateLimits, Templates, Value, render, render_templates,
    yaml,
};

fn golden_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helm-goldens")
}

/// Renders a stored Helm test chart like `helm template CHART` and compares byte for byte with
/// the golden `file`.
fn check_golden(name: &str, file: &str, opts: &RenderOptions) {
    let dir = golden_dir().join(name);
    let chart = Chart::load_dir(dir.join("chart")).unwrap();
    let want = std::fs::read_to_string(dir.join(file)).unwrap();
    let got = render(&chart, opts)
        .and_then(|r| r.to_helm_output(opts))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(got, want, "{name}/{file} ({:?}): output differs", opts.helm);
}

fn helm(helm: HelmCompat) -> RenderOptions {
    RenderOptions {
        helm,
        ..RenderOptions::default()
    }
}

#[test]
fn helm_template_goldens() {
    // Helm's test harness renders with the default release name and namespace.
    check_golden("object-order", "expected.txt", &helm(HelmCompat::V3));
    // Nulls a parent's values.yaml sets for a subchart (and in globals) stay in the
    // subchart's `.Values`.
    check_golden("issue-9027", "expected.txt", &helm(HelmCompat::V3));
    // Helm 4.2.0 to 4.2.3: the last manifest of 02-b.yml keeps its newline.
    check_golden(
        "object-order",
        "expected-helm-4.2.0.txt",
        &helm(HelmCompat::V4_2_0),
    );
    // Every Helm 4.2 release (real Helm 4.2.3 prints it; helm#32327 changes nothing in
    // single-document templates): chart-default nulls are gone, the subchart's defaults show.
    for line in [HelmCompat::V4_2_0, HelmCompat::V4_2_4] {
        check_golden("issue-9027", "expected-helm-4.2.txt", &helm(line));
    }
}

/// The 21 cases of Helm's `TestSplitManifests` after helm#32327 (Helm 4.2.4), and what the
/// earlier lines make of the same inputs.
#[test]
fn split_manifests_as_each_helm_line() {
    let text = std::fs::read_to_string(golden_dir().join("split-manifests-4.2.4.json")).unwrap();
    let cases: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    assert_eq!(cases.len(), 21);
    for c in &cases {
        let (name, input) = (c["name"].as_str().unwrap(), c["input"].as_str().unwrap());
        let expected: Vec<String> = serde_json::from_value(c["expected"].clone()).unwrap();
        assert_eq!(
            HelmCompat::V4_2_4.split_manifests(input),
            expected,
            "{name}"
        );
        // Helm 3 trims every document.
        let trimmed: Vec<String> = expected.iter().map(|d| d.trim().to_owned()).collect();
        assert_eq!(HelmCompat::V3.split_manifests(input), trimmed, "{name}");
    }
    // Before helm#32327 the separator took the newlines before it: only the last keeps them.
    let two = "a: 1\n\n---\nb: 2\n";
    assert_eq!(HelmCompat::V4_2_0.split_manifests(two), ["a: 1", "b: 2\n"]);
    assert_eq!(
        HelmCompat::V4_2_4.split_manifests(two),
        ["a: 1\n\n", "b: 2\n"]
    );
    assert_eq!(HelmCompat::V3.split_manifests(two), ["a: 1", "b: 2"]);
}

#[test]
fn helm_versions_name_their_line() {
    for (v, line) in [
        ("3.14.2", HelmCompat::V3),
        ("v4.1.4", HelmCompat::V3),
        ("4.2.0", HelmCompat::V4_2_0),
        ("4.2.3", HelmCompat::V4_2_0),
        ("4.2.4", HelmCompat::V4_2_4),
        ("4.2", HelmCompat::V4_2_4),
        ("4", HelmCompat::V4_2_4),
        ("4.3.0", HelmCompat::V4_2_4),
    ] {
        assert_eq!(HelmCompat::from_version(v).unwrap(), line, "{v}");
    }
    for bad in ["", "2.17.0", "four", "4.x"] {
        let e = HelmCompat::from_version(bad).unwrap_err();
        assert!(
            e.to_string().contains("expected 3.x.y or 4.x.y"),
            "{bad}: {e}"
        );
    }
}

/// The null rules of each line on issue-9027's chart (a parent setting `key1`/`key2` to null
/// for its subchart and in `global`), with user values: Helm 3's as this crate reads its
/// golden, Helm 4.2's as the real Helm 4.2.3 library rendered the same chart and values.
#[test]
fn user_nulls_delete_subchart_keys() {
    let dir = golden_dir().join("issue-9027/chart");
    let chart = Chart::load_dir(&dir).unwrap();
    let opts = RenderOptions {
        set: vec!["subchart.hash.key4=null,global.hash.key3=null".to_owned()],
        ..helm(HelmCompat::V3)
    };
    let out = render_templates(&chart, &opts).unwrap();
    let sub = &out["issue-9027/charts/subchart/templates/values.yaml"];
    let (_, hash) = sub.split_once("\nhash:").unwrap();
    assert!(!hash.contains("key4"), "{sub}");
    assert!(hash.contains("key1: null"), "{sub}");
    let parent = &out["issue-9027/templates/values.yaml"];
    assert!(
        parent.starts_with("global:\n  hash:\n    key1: null\n    key2: null\nsubchart:"),
        "{parent}"
    );
}

#[test]
fn helm_4_2_null_rules_match_real_helm_4_2_3() {
    let dir = golden_dir().join("issue-9027/chart");
    let issue = Chart::load_dir(&dir).unwrap();
    // (user values, the parent's .Values.global.hash, the subchart's .Values.hash and
    // .Values.global.hash), as Helm 4.2.3 answered.
    let all = "{key1: 1, key2: 2, key3: 13, key4: 4, key5: 5, key6: 6}";
    let cases = [
        ("{}", "{key3: 13}", all, all),
        (
            "{subchart: {hash: {key4: null}}}",
            "{key3: 13}",
            "{key3: 13, key5: 5, key6: 6}",
            "{key3: 13, key4: 4, key5: 5, key6: 6}",
        ),
        (
            "{global: {hash: {key5: null}}}",
            "{key3: 13, key5: null}",
            all,
            "{key1: 1, key2: 2, key3: 13, key4: 4, key6: 6}",
        ),
        ("{global: {hash: {key3: null}}}", "{}", all, all),
        (
            "{subchart: {hash: {key3: null, key9: null}}}",
            "{key3: 13}",
            "{key4: 4, key5: 5, key6: 6, key9: null}",
            "{key3: 13, key4: 4, key5: 5, key6: 6}",
        ),
    ];
    let table = |text: &str| yaml::parse_values_document(text).unwrap();
    for (user, parent_global, sub_hash, sub_global) in cases {
        let opts = RenderOptions {
            values: vec![table(user)],
            ..helm(HelmCompat::V4_2_4)
        };
        let out = render_templates(&issue, &opts).unwrap();
        let parent = table(&out["issue-9027/templates/values.yaml"]);
        let sub = table(&out["issue-9027/charts/subchart/templates/values.yaml"]);
        let at = |v: &Value, path: &[&str]| {
            path.iter().fold(v.clone(), |v, k| match v {
                Value::Map(m) => m.get(k).unwrap_or(Value::Nil),
                _ => Value::Nil,
            })
        };
        let same = |got: Value, want: &str| {
            assert_eq!(got.to_go_string(), table(want).to_go_string(), "{user}");
        };
        same(at(&parent, &["global", "hash"]), parent_global);
        same(at(&sub, &["hash"]), sub_hash);
        same(at(&sub, &["global", "hash"]), sub_global);
    }
    // A chart's own nulls are dropped; a user's null deletes what the chart defines and
    // stays where it defines nothing.
    let own = chart(&[
        ("Chart.yaml", chart_yaml("own").as_str()),
        (
            "values.yaml",
            "foobar: null\nkeep: 1\nstuff:\n  baz: null\n  foo: bar\n",
        ),
        ("templates/v.yaml", "{{ .Values | toYaml }}\n"),
    ]);
    for (user, want) in [
        ("{}", "{keep: 1, stuff: {foo: bar}}"),
        (
            "{stuff: {foo: null}, keep: null, newkey: null, stuff2: {x: null}}",
            "{newkey: null, stuff: {}, stuff2: {x: null}}",
        ),
    ] {
        let opts = RenderOptions {
            values: vec![table(user)],
            ..helm(HelmCompat::V4_2_4)
        };
        let out = render_templates(&own, &opts).unwrap();
        assert_eq!(
            table(&out["own/templates/v.yaml"]).to_go_string(),
            table(want).to_go_string(),
            "{user}"
        );
    }
}

/// A chart written to a temporary directory from `(path, content)` pairs.
fn chart(files: &[(&str, &str)]) -> Chart {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    Chart::load_dir(dir.path()).unwrap()
}

fn chart_yaml(name: &str) -> String {
    format!("apiVersion: v2\nname: {name}\nversion: 1.2.3\n")
}

fn opts(release: &str, values: &str) -> RenderOptions {
    RenderOptions {
        release_name: release.to_owned(),
        values: vec![yaml::parse_values_document(values).unwrap()],
        ..RenderOptions::default()
    }
}

fn rendered(c: &Chart, o: &RenderOptions) -> BTreeMap<String, String> {
    render_templates(c, o).unwrap_or_else(|e| panic!("{e}"))
}

fn expect(out: &BTreeMap<String, String>, cases: &[(&str, &str)]) {
    for (name, want) in cases {
        assert_eq!(
            out.get(*name).map(String::as_str),
            Some(*want),
            "{name} in {out:?}"
        );
    }
}

/// `TestRender` and `TestRenderWithDNS`'s default: DNS lookups are off, so `getHostByName`
/// answers "".
#[test]
fn engine_render_values_and_functions() {
    let c = chart(&[
        ("Chart.yaml", &chart_yaml("moby")),
        ("values.yaml", "outer: DEFAULT\ninner: DEFAULT\n"),
        (
            "templates/test1",
            "{{.Values.outer | title }} {{.Values.inner | title}}",
        ),
        ("templates/test2", "{{.Values.global.callme | lower }}"),
        ("templates/test3", "{{.noValue}}"),
        ("templates/test4", "{{toJson .Values}}"),
        ("templates/test5", "{{getHostByName \"helm.sh\"}}"),
    ]);
    let out = rendered(
        &c,
        &opts(
            "release-name",
            "outer: spouter\ninner: inn\nglobal:\n  callme: Ishmael\n",
        ),
    );
    expect(
        &out,
        &[
            ("moby/templates/test1", "Spouter Inn"),
            ("moby/templates/test2", "ishmael"),
            ("moby/templates/test3", ""),
            (
                "moby/templates/test4",
                r#"{"global":{"callme":"Ishmael"},"inner":"inn","outer":"spouter"}"#,
            ),
            ("moby/templates/test5", ""),
        ],
    );
}

/// `TestRenderRefsOrdering`, `TestRenderDependency`, `TestRenderNestedValues`,
/// `TestRenderBuiltinValues`.
#[test]
fn engine_subcharts_defines_and_builtins() {
    let c = chart(&[
        ("Chart.yaml", &chart_yaml("parent")),
        (
            "templates/_helpers.tpl",
            r#"{{- define "test" -}}parent value{{- end -}}"#,
        ),
        (
            "templates/test.yaml",
            r#"{{ tpl "{{ include \"test\" . }}" . }}"#,
        ),
        ("templates/outer", r#"Hello {{template "myblock"}}"#),
        ("charts/child/Chart.yaml", &chart_yaml("child")),
        (
            "charts/child/templates/_helpers.tpl",
            r#"{{- define "test" -}}child value{{- end -}}"#,
        ),
        (
            "charts/child/templates/inner",
            r#"{{define "myblock"}}World{{end}}"#,
        ),
    ]);
    let out = rendered(&c, &RenderOptions::default());
    expect(
        &out,
        &[
            ("parent/templates/test.yaml", "parent value"),
            ("parent/templates/outer", "Hello World"),
            ("parent/charts/child/templates/inner", ""),
        ],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("top")),
        (
            "values.yaml",
            "what: stinkweed\nwho: me\nherrick:\n  who: time\n  what: Sun\n",
        ),
        (
            "templates/outer.tpl",
            "Gather ye {{.Values.what}} while ye may",
        ),
        (
            "templates/subcharts.tpl",
            "The glorious Lamp of {{.Subcharts.herrick.Subcharts.deepest.Values.where}}, the {{.Subcharts.herrick.Values.what}}",
        ),
        ("charts/herrick/Chart.yaml", &chart_yaml("herrick")),
        ("charts/herrick/values.yaml", "who: Robert\nwhat: glasses\n"),
        (
            "charts/herrick/templates/inner.tpl",
            "Old {{.Values.who}} is still a-flyin'",
        ),
        (
            "charts/herrick/charts/deepest/Chart.yaml",
            &chart_yaml("deepest"),
        ),
        (
            "charts/herrick/charts/deepest/values.yaml",
            "what: milkshake\nwhere: here\n",
        ),
        (
            "charts/herrick/charts/deepest/templates/inner.tpl",
            "And this same {{.Values.what}} that smiles {{.Values.global.when}}",
        ),
        (
            "charts/herrick/charts/deepest/templates/release.tpl",
            r#"Tomorrow will be {{default "happy" .Release.Name }}"#,
        ),
    ]);
    let out = rendered(
        &c,
        &opts(
            "dyin",
            "what: rosebuds\nherrick:\n  deepest:\n    what: flower\n    where: Heaven\nglobal:\n  when: to-day\n",
        ),
    );
    expect(
        &out,
        &[
            ("top/templates/outer.tpl", "Gather ye rosebuds while ye may"),
            (
                "top/charts/herrick/templates/inner.tpl",
                "Old time is still a-flyin'",
            ),
            (
                "top/charts/herrick/charts/deepest/templates/inner.tpl",
                "And this same flower that smiles to-day",
            ),
            (
                "top/charts/herrick/charts/deepest/templates/release.tpl",
                "Tomorrow will be dyin",
            ),
            (
                "top/templates/subcharts.tpl",
                "The glorious Lamp of Heaven, the Sun",
            ),
        ],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("Troy")),
        (
            "templates/Aeneas",
            "{{.Template.Name}}{{.Chart.Name}}{{.Release.Name}}",
        ),
        (
            "templates/Amata",
            r#"{{.Subcharts.Latium.Chart.Name}} {{.Subcharts.Latium.Files.author | printf "%s"}}"#,
        ),
        ("charts/Latium/Chart.yaml", &chart_yaml("Latium")),
        (
            "charts/Latium/templates/Lavinia",
            "{{.Template.Name}}{{.Chart.Name}}{{.Release.Name}}",
        ),
        (
            "charts/Latium/templates/From",
            r#"{{.Files.author | printf "%s"}} {{.Files.Get "book/title.txt"}}"#,
        ),
        ("charts/Latium/author", "Virgil"),
        ("charts/Latium/book/title.txt", "Aeneid"),
    ]);
    let out = rendered(&c, &opts("Aeneid", "{}"));
    expect(
        &out,
        &[
            (
                "Troy/charts/Latium/templates/Lavinia",
                "Troy/charts/Latium/templates/LaviniaLatiumAeneid",
            ),
            ("Troy/templates/Aeneas", "Troy/templates/AeneasTroyAeneid"),
            ("Troy/templates/Amata", "Latium Virgil"),
            ("Troy/charts/Latium/templates/From", "Virgil Aeneid"),
        ],
    );
}

/// `TestAlterFuncMap_include`, `_require`, `_tpl`, `_tplfunc`, `_tplinclude`,
/// `TestRenderLoadTemplateForTplFromFile`, `TestRenderTplEmpty`, `TestRenderTplTemplateNames`,
/// `TestRenderTplRedefines`, `TestRenderTplMissingKey`.
#[test]
fn engine_include_required_and_tpl() {
    let c = chart(&[
        ("Chart.yaml", &chart_yaml("conrad")),
        (
            "templates/quote",
            r#"{{include "conrad/templates/_partial" . | indent 2}} dead."#,
        ),
        ("templates/_partial", "{{.Release.Name}} - he"),
    ]);
    expect(
        &rendered(&c, &opts("Mistah Kurtz", "{}")),
        &[("conrad/templates/quote", "  Mistah Kurtz - he dead.")],
    );
    let nested = chart(&[
        ("Chart.yaml", &chart_yaml("nested")),
        (
            "templates/quote",
            r#"{{include "nested/templates/quote" . | indent 2}} dead."#,
        ),
    ]);
    assert!(render_templates(&nested, &RenderOptions::default()).is_err());

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("conan")),
        (
            "templates/quote",
            r#"All your base are belong to {{ required "A valid 'who' is required" .Values.who }}"#,
        ),
        (
            "templates/bases",
            r#"All {{ required "A valid 'bases' is required" .Values.bases }} of them!"#,
        ),
    ]);
    expect(
        &rendered(&c, &opts("That 90s meme", "who: us\nbases: 2\n")),
        &[
            ("conan/templates/quote", "All your base are belong to us"),
            ("conan/templates/bases", "All 2 of them!"),
        ],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("TplFunction")),
        (
            "templates/base",
            r#"Evaluate tpl {{tpl "Value: {{ .Values.value}}" .}}"#,
        ),
        (
            "templates/quoted",
            r#"Evaluate tpl {{tpl "Value: {{ .Values.value | quote}}" .}}"#,
        ),
        (
            "templates/include",
            "{{ tpl \"{{include `TplFunction/templates/_partial` .  | quote }}\" .}}",
        ),
        ("templates/_partial", "{{.Template.Name}}"),
    ]);
    expect(
        &rendered(&c, &opts("TestRelease", "value: myvalue\n")),
        &[
            ("TplFunction/templates/base", "Evaluate tpl Value: myvalue"),
            (
                "TplFunction/templates/quoted",
                "Evaluate tpl Value: \"myvalue\"",
            ),
            (
                "TplFunction/templates/include",
                "\"TplFunction/templates/include\"",
            ),
        ],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("TplLoadFromFile")),
        (
            "templates/base",
            "{{ tpl (.Files.Get .Values.filename) . }}",
        ),
        (
            "templates/_function",
            r#"{{define "test-function"}}test-function{{end}}"#,
        ),
        ("test", "{{ tpl (.Files.Get .Values.filename2) .}}"),
        (
            "test2",
            r#"{{include "test-function" .}}{{define "nested-define"}}nested-define-content{{end}} {{include "nested-define" .}}"#,
        ),
    ]);
    expect(
        &rendered(
            &c,
            &opts("TestRelease", "filename: test\nfilename2: test2\n"),
        ),
        &[(
            "TplLoadFromFile/templates/base",
            "test-function nested-define-content",
        )],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("TplEmpty")),
        ("templates/empty-string", r#"{{tpl "" .}}"#),
        ("templates/empty-action", r#"{{tpl "{{ \"\"}}" .}}"#),
        (
            "templates/only-defines",
            r#"{{tpl "{{define \"not-invoked\"}}not-rendered{{end}}" .}}"#,
        ),
        (
            "templates/missing",
            r#"missingValue: {{tpl "{{.Values.noSuchKey}}" .}}"#,
        ),
    ]);
    expect(
        &rendered(&c, &RenderOptions::default()),
        &[
            ("TplEmpty/templates/empty-string", ""),
            ("TplEmpty/templates/empty-action", ""),
            ("TplEmpty/templates/only-defines", ""),
            ("TplEmpty/templates/missing", "missingValue: "),
        ],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("TplTemplateNames")),
        (
            "templates/default-basepath",
            r#"{{tpl "{{ .Template.BasePath }}" .}}"#,
        ),
        (
            "templates/default-name",
            r#"{{tpl "{{ .Template.Name }}" .}}"#,
        ),
        (
            "templates/modified-basepath",
            r#"{{tpl "{{ .Template.BasePath }}" .Values.dot}}"#,
        ),
        (
            "templates/modified-name",
            r#"{{tpl "{{ .Template.Name }}" .Values.dot}}"#,
        ),
        (
            "templates/modified-field",
            r#"{{tpl "{{ .Template.Field }}" .Values.dot}}"#,
        ),
    ]);
    let vals = "dot:\n  Template:\n    BasePath: path/to/template\n    Name: name-of-template\n    Field: extra-field\n";
    expect(
        &rendered(&c, &opts("TestRelease", vals)),
        &[
            (
                "TplTemplateNames/templates/default-basepath",
                "TplTemplateNames/templates",
            ),
            (
                "TplTemplateNames/templates/default-name",
                "TplTemplateNames/templates/default-name",
            ),
            (
                "TplTemplateNames/templates/modified-basepath",
                "path/to/template",
            ),
            (
                "TplTemplateNames/templates/modified-name",
                "name-of-template",
            ),
            ("TplTemplateNames/templates/modified-field", "extra-field"),
        ],
    );

    let c = chart(&[
        ("Chart.yaml", &chart_yaml("TplRedefines")),
        (
            "templates/_partials",
            r#"{{define "partial"}}original-in-partial{{end}}"#,
        ),
        (
            "templates/partial",
            "before: {{include \"partial\" .}}\n{{tpl .Values.partialText .}}\nafter: {{include \"partial\" .}}",
        ),
        (
            "templates/manifest",
            "{{define \"manifest\"}}original-in-manifest{{end}}before: {{include \"manifest\" .}}\n{{tpl .Values.manifestText .}}\nafter: {{include \"manifest\" .}}",
        ),
        (
            "templates/manifest-only",
            "{{define \"manifest-only\"}}only-in-manifest{{end}}before: {{include \"manifest-only\" .}}\n{{tpl .Values.manifestOnlyText .}}\nafter: {{include \"manifest-only\" .}}",
        ),
        (
            "templates/nested",
            "{{define \"nested\"}}original-in-manifest{{end}}{{define \"nested-outer\"}}original-outer-in-manifest{{end}}before: {{include \"nested\" .}} {{include \"nested-outer\" .}}\n{{tpl .Values.nestedText .}}\nafter: {{include \"nested\" .}} {{include \"nested-outer\" .}}",
        ),
    ]);
    let vals = r#"
partialText: '{{define "partial"}}redefined-in-tpl{{end}}tpl: {{include "partial" .}}'
manifestText: '{{define "manifest"}}redefined-in-tpl{{end}}tpl: {{include "manifest" .}}'
manifestOnlyText: 'tpl: {{include "manifest-only" .}}'
nestedText: "{{define \"nested\"}}redefined-in-tpl{{end}}{{define \"nested-outer\"}}redefined-outer-in-tpl{{end}}before-inner-tpl: {{include \"nested\" .}} {{include \"nested-outer\" . }}\n{{tpl .Values.innerText .}}\nafter-inner-tpl: {{include \"nested\" .}} {{include \"nested-outer\" . }}"
innerText: '{{define "nested"}}redefined-in-inner-tpl{{end}}inner-tpl: {{include "nested" .}} {{include "nested-outer" . }}'
"#;
    expect(
        &rendered(&c, &opts("TestRelease", vals)),
        &[
            (
                "TplRedefines/templates/partial",
                "before: original-in-partial\ntpl: redefined-in-tpl\nafter: original-in-partial",
            ),
            (
                "TplRedefines/templates/manifest",
                "before: original-in-manifest\ntpl: redefined-in-tpl\nafter: original-in-manifest",
            ),
            (
                "TplRedefines/templates/manifest-only",
                "before: only-in-manifest\ntpl: only-in-manifest\nafter: only-in-manifest",
            ),
            (
                "TplRedefines/templates/nested",
                "before: original-in-manifest original-outer-in-manifest\nbefore-inner-tpl: redefined-in-tpl redefined-outer-in-tpl\ninner-tpl: redefined-in-inner-tpl redefined-outer-in-tpl\nafter-inner-tpl: redefined-in-tpl redefined-outer-in-tpl\nafter: original-in-manifest original-outer-in-manifest",
            ),
        ],
    );
}

/// `TestRenderRecursionLimit`, `TestExecErrors`, `TestFailErrors`, `TestParseErrors`: the
/// error texts (Helm's engine tests name templates without a chart; here they sit in one).
#[test]
fn engine_errors() {
    let c = chart(&[
        ("Chart.yaml", &chart_yaml("bad")),
        ("templates/base", r#"{{include "recursion" . }}"#),
        (
            "templates/recursion",
            r#"{{define "recursion"}}{{include "recursion" . }}{{end}}"#,
        ),
    ]);
    let err = render_templates(&c, &RenderOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.ends_with(
            "rendering template has a nested reference name: recursion: unable to execute template"
        ),
        "{err}"
    );

    let phrase = "All work and no play makes Jack a dull boy";
    let c = chart(&[
        ("Chart.yaml", &chart_yaml("overlook")),
        (
            "templates/quote",
            &r#"{{include "overlook" . }}"#.repeat(4000),
        ),
        (
            "templates/_function",
            &format!(r#"{{{{define "overlook"}}}}{{{{printf "{phrase}\n"}}}}{{{{end}}}}"#),
        ),
    ]);
    expect(
        &rendered(&c, &RenderOptions::default()),
        &[(
            "overlook/templates/quote",
            &format!("{phrase}\n").repeat(4000),
        )],
    );

    let cases = [
        (
            "{{foo}}",
            r#"parse error at (moby/templates/t:1): function "foo" not defined"#,
        ),
        (
            r#"{{required "foo is required" .Values.foo}}"#,
            "execution error at (moby/templates/t:1:2): foo is required",
        ),
        (
            r#"{{required ":this: message: has many: colons:" .Values.foo}}"#,
            "execution error at (moby/templates/t:1:2): :this: message: has many: colons:",
        ),
        (
            "{{ $someEmptyValue := \"\" }}\n{{ $myvar := \"abc\" }}\n{{- required (printf \"%s: something is missing\" $myvar) $someEmptyValue | repeat 0 }}",
            "execution error at (moby/templates/t:3:4): abc: something is missing",
        ),
        (
            r#"{{required "foo is required\nmore info after the break" .Values.foo}}"#,
            "execution error at (moby/templates/t:1:2): foo is required\nmore info after the break",
        ),
        (
            r#"{{fail "something is wrong\nlinebreak"}}"#,
            "execution error at (moby/templates/t:1:2): something is wrong\nlinebreak",
        ),
        (
            r#"All your base are belong to us{{ fail "This is an error" }}"#,
            "execution error at (moby/templates/t:1:33): This is an error",
        ),
    ];
    for (src, want) in cases {
        let c = chart(&[("Chart.yaml", &chart_yaml("moby")), ("templates/t", src)]);
        let err = render_templates(&c, &RenderOptions::default())
            .unwrap_err()
            .to_string();
        assert_eq!(err, want, "{src}");
    }
}

fn run(src: &str, data: &Value) -> String {
    let mut set = Templates::new();
    set.add("test", src).unwrap();
    set.execute("test", data, &TemplateLimits::default())
        .unwrap_or_else(|e| panic!("{src}: {e}"))
}

/// `pkg/engine/funcs_test.go` `TestFuncs` (Helm 3 functions) and `TestMerge`.
#[test]
fn helm_functions() {
    let map = |y: &str| yaml::parse_values_document(y).unwrap();
    let string = |s: &str| Value::String(s.to_owned());
    let cases: Vec<(&str, &str, Value)> = vec![
        ("{{ toYaml . }}", "foo: bar", map("foo: bar")),
        ("{{ toToml . }}", "foo = \"bar\"\n", map("foo: bar")),
        ("{{ toJson . }}", r#"{"foo":"bar"}"#, map("foo: bar")),
        (
            "{{ fromYaml . }}",
            "map[hello:world]",
            string("hello: world"),
        ),
        (
            "{{ fromYamlArray . }}",
            "[one 2 map[name:helm]]",
            string("- one\n- 2\n- name: helm\n"),
        ),
        (
            "{{ fromYamlArray . }}",
            "[one 2 map[name:helm]]",
            string(r#"["one", 2, { "name": "helm" }]"#),
        ),
        (
            "{{ toToml . }}",
            "[mast]\n  sail = \"white\"\n",
            map("mast:\n  sail: white\n"),
        ),
        (
            "{{ fromYaml . }}",
            "map[Error:error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}]",
            string("- one\n- two\n"),
        ),
        (
            "{{ fromJson .}}",
            "map[hello:world]",
            string(r#"{"hello":"world"}"#),
        ),
        (
            "{{ fromJson . }}",
            "map[Error:json: cannot unmarshal array into Go value of type map[string]interface {}]",
            string(r#"["one", "two"]"#),
        ),
        (
            "{{ fromJsonArray . }}",
            "[one 2 map[name:helm]]",
            string(r#"["one", 2, { "name": "helm" }]"#),
        ),
        (
            "{{ fromJsonArray . }}",
            "[json: cannot unmarshal object into Go value of type []interface {}]",
            string(r#"{"hello": "world"}"#),
        ),
        (
            "{{ merge .dict (fromYaml .yaml) }}",
            "map[a:map[b:c]]",
            map("dict:\n  a:\n    b: c\nyaml: '{\"a\":{\"b\":\"d\"}}'\n"),
        ),
        (
            "{{ merge (fromYaml .yaml) .dict }}",
            "map[a:map[b:d]]",
            map("dict:\n  a:\n    b: c\nyaml: '{\"a\":{\"b\":\"d\"}}'\n"),
        ),
        (
            "{{ fromYaml . }}",
            "map[Error:error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}]",
            string(r#"["one", "two"]"#),
        ),
        (
            "{{ fromYamlArray . }}",
            "[error unmarshaling JSON: while decoding JSON: json: cannot unmarshal object into Go value of type []interface {}]",
            string("hello: world"),
        ),
        (
            r#"{{ lookup "v1" "Namespace" "" "unlikelynamespace99999999" }}"#,
            "map[]",
            string(r#"["one", "two"]"#),
        ),
    ];
    let mut failures = Vec::new();
    for (src, want, data) in &cases {
        let got = run(src, data);
        if got != *want {
            failures.push(format!("{src}: want {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    let data = map(
        "src2: {h: 10, i: i, j: j}\nsrc1: {a: 1, b: 2, d: {e: four}, g: [6, 7], i: aye, j: jay, k: {l: false}}\ndst: {a: one, c: 3, d: {f: 5}, g: [8, 9], i: eye, k: {l: true}}\n",
    );
    assert_eq!(
        run("{{ merge .dst .src1 .src2 }}{{ .dst }}", &data),
        "map[a:one b:2 c:3 d:map[e:four f:5] g:[8 9] h:10 i:eye j:jay k:map[l:true]]".repeat(2)
    );
}
