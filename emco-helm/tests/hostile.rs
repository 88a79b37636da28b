//! Hostile input (#20): whatever text or bytes arrive as a template, a values file or a chart
//! archive, the engine answers with a result or an error within its limits, never a panic, an
//! endless loop or unbounded output. Generated inputs: arbitrary ones, and mutations (bytes
//! inserted, removed, replaced) of a corpus of valid templates, values and a chart, which reach
//! far deeper into the parsers than random text does. `PROPTEST_CASES` sets how many (the CI
//! run uses the default); longer runs are the same tests with more cases.

#![allow(clippy::unwrap_used)]

use emco_helm::archive::{ArchiveLimits, read_all};
use emco_helm::yaml::parse_values_document;
use emco_helm::{Chart, RenderOptions, TemplateLimits, Templates, Value, render};
use proptest::prelude::*;

/// Valid templates exercising actions, pipelines, control flow, definitions and functions.
const TEMPLATES: &[&str] = &[
    "{{ .Values.name | default \"x\" | upper | quote }}",
    "{{- range $i, $v := .Values.list }}{{ $i }}={{ $v }}\n{{- end }}",
    "{{ define \"t\" }}{{ . }}{{ template \"t\" . }}{{ end }}{{ template \"t\" 1 }}",
    "{{ if and .a (or .b (not .c)) }}y{{ else if eq .d 1 }}z{{ else }}n{{ end }}",
    "{{ with $x := dict \"a\" (list 1 2 3) }}{{ toYaml $x | indent 2 }}{{ end }}",
    "{{ printf \"%s-%d-%v\" \"a\" 3 (list) | trunc 63 | trimSuffix \"-\" }}",
    "{{ include \"t\" . | nindent 4 }}{{ tpl \"{{ .x }}\" . }}",
    "{{ range until 5 }}{{ . }}{{ break }}{{ end }}{{ 1e3 }} {{ 0x1F }} {{ 'c' }}",
    "{{/* comment */}}{{ $ := . }}{{ $.Values }}{{ len \"abc\" }}{{ index .m \"k\" 0 }}",
];

/// Valid values documents with anchors, flow and block collections and scalars of every kind.
const VALUES: &[&str] = &[
    "a: 1\nb: [x, {y: z}]\nc: &r {k: v}\nd: *r\ne: |\n  text\n  more\n",
    "list:\n- 1\n- 2.5\n- true\n- null\n- '0x10'\nnested:\n  deeper:\n    - {a: [b, c]}\n",
    "? complex\n: key\n\"quoted\": 'single'\n!!str tagged: ~\nmerge:\n  <<: {x: 1}\n",
];

/// Applies `edits` (position, byte, kind) to `base`: insert, remove or replace one byte each.
fn mutate(base: &[u8], edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut out = base.to_vec();
    for (at, byte, kind) in edits {
        let at = if out.is_empty() {
            0
        } else {
            at % (out.len() + 1)
        };
        match kind % 3 {
            0 => out.insert(at, *byte),
            1 if at < out.len() => {
                out.remove(at);
            }
            _ if at < out.len() => out[at] = *byte,
            _ => out.push(*byte),
        }
    }
    out
}

fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    // Bytes biased to the template and YAML syntax, where the parsers branch.
    let byte = prop_oneof![
        any::<u8>(),
        prop::sample::select(b"{}[]()|-$.:,'\"\\\n #&*!?%<>=/".to_vec()),
    ];
    prop::collection::vec((any::<usize>(), byte, any::<u8>()), 1..8)
}

/// Small limits: a hostile template hits them fast instead of running the full budget.
fn limits() -> TemplateLimits {
    TemplateLimits {
        max_depth: 50,
        max_output: 1 << 20,
        max_steps: 200_000,
    }
}

fn values() -> Value {
    parse_values_document(
        "name: n\nlist: [1, 2]\na: true\nb: 0\nc: ''\nd: 1\nm: {k: [v]}\nx: y\nValues: {}\n",
    )
    .unwrap()
}

/// Parses and runs `text`; an error is a fine answer, a panic fails the test. The output stays
/// within the limit.
fn run_template(text: &str) {
    let mut set = Templates::new();
    if set.add("t.yaml", text).is_ok()
        && let Ok(out) = set.execute("t.yaml", &values(), &limits())
    {
        assert!(out.len() <= limits().max_output, "{} bytes", out.len());
    }
}

/// A chart with one template `text`, packaged.
fn chart_tgz(text: &[u8]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, data) in [
        (
            "c/Chart.yaml",
            &b"apiVersion: v2\nname: c\nversion: 0.1.0\n"[..],
        ),
        ("c/values.yaml", b"name: n\nlist: [1, 2]\n"),
        ("c/templates/t.yaml", text),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, path, data).unwrap();
    }
    let raw = tar.into_inner().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    gz.finish().unwrap()
}

proptest! {
    #[test]
    fn arbitrary_text_as_a_template(text in "\\PC{0,200}") {
        run_template(&text);
    }

    #[test]
    fn mutated_templates(i in 0..TEMPLATES.len(), edits in edits()) {
        let text = mutate(TEMPLATES[i].as_bytes(), &edits);
        run_template(&String::from_utf8_lossy(&text));
    }

    #[test]
    fn arbitrary_and_mutated_values(i in 0..VALUES.len(), edits in edits(), text in "\\PC{0,120}") {
        drop(parse_values_document(&text));
        let mutated = mutate(VALUES[i].as_bytes(), &edits);
        drop(parse_values_document(&String::from_utf8_lossy(&mutated)));
    }

    #[test]
    fn arbitrary_and_damaged_archives(bytes in prop::collection::vec(any::<u8>(), 0..512), edits in edits()) {
        let limits = ArchiveLimits { max_file: 1 << 16, max_total: 1 << 18 };
        drop(read_all(&bytes, limits));
        let damaged = mutate(&chart_tgz(TEMPLATES[0].as_bytes()), &edits);
        drop(read_all(&damaged, limits));
        drop(Chart::load_tgz(&damaged));
    }

    #[test]
    fn charts_with_mutated_templates_render_or_refuse(i in 0..TEMPLATES.len(), edits in edits()) {
        let text = mutate(TEMPLATES[i].as_bytes(), &edits);
        if let Ok(chart) = Chart::load_tgz(&chart_tgz(&text)) {
            let opts = RenderOptions { release_name: "r".into(), limits: limits(), ..RenderOptions::default() };
            drop(render(&chart, &opts));
        }
    }
}

/// Templates that would run forever or produce without end stop at the limits with an error.
#[test]
fn runaway_templates_stop_at_their_limits() {
    for text in [
        "{{ define \"t\" }}{{ template \"t\" . }}{{ end }}{{ template \"t\" . }}",
        "{{ range until 1000000 }}{{ range until 1000000 }}x{{ end }}{{ end }}",
        "{{ range until 100000 }}{{ repeat 100000 \"x\" }}{{ end }}",
    ] {
        let mut set = Templates::new();
        set.add("t", text).unwrap();
        let e = set.execute("t", &values(), &limits()).unwrap_err();
        assert!(!e.to_string().is_empty());
    }
}
