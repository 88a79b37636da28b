//! Rendering one app of a deployment (EMCO.md section 10): the chart with the app profile's
//! values file and config resources, then the deployment intent group's override values as
//! `--set` expressions; the output split into AppContext resources, their order and the Helm
//! hook groups.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use emco_appcontext::context::HookGroups;
use emco_core::ResourceName;
use emco_core::model::ProfileManifest;
use emco_core::{Error, Result};
use emco_helm::archive::ArchiveLimits;
use emco_helm::chart::ChartFile;
use emco_helm::{Chart, HelmCompat, RenderOptions, Value};

/// Picks one hook group out of [`HookGroups`].
type HookGroup = fn(&mut HookGroups) -> &mut Vec<String>;

/// What the rendering of one app puts into the AppContext for each of its clusters.
#[derive(Debug, Clone, Default)]
pub(crate) struct RenderedApp {
    /// `(name+Kind, YAML)` of every resource, hooks and CRDs included.
    pub(crate) resources: Vec<(String, String)>,
    /// The non-hook resources in Helm's install order.
    pub(crate) order: Vec<String>,
    /// The hooks and CRDs by phase.
    pub(crate) hooks: HookGroups,
}

/// How one app is rendered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenderInput<'a> {
    /// The app's name, for messages.
    pub(crate) app: &'a str,
    /// The chart archive.
    pub(crate) chart: &'a [u8],
    /// The app profile archive, if the app has one.
    pub(crate) profile: Option<&'a [u8]>,
    /// `.Release.Name`: the deployment intent group's `spec.version`.
    pub(crate) release: &'a str,
    /// `.Release.Namespace`: the logical cloud's namespace.
    pub(crate) namespace: &'a str,
    /// The largest unpacked size of the profile archive.
    pub(crate) max_unpacked: u64,
    /// Which Helm release's rendering to match.
    pub(crate) helm: HelmCompat,
}

/// Renders `input` with the `--set` expressions `set`.
///
/// # Errors
/// InvalidArgument for a bad chart, profile or template, a document without kind or name, or two
/// documents with the same `name+Kind` (EMCO's resource key could not tell them apart).
pub(crate) fn render_app(input: &RenderInput<'_>, set: Vec<String>) -> Result<RenderedApp> {
    let app = input.app;
    let within = |e: Error| Error::new(e.kind(), format!("app {app:?}: {}", e.message()));
    let mut chart = Chart::load_tgz(input.chart).map_err(within)?;
    let mut values = Vec::new();
    if let Some(profile) = input.profile {
        let profile = Profile::read(profile, input.max_unpacked).map_err(within)?;
        values.extend(profile.values()?);
        profile.copy_into(&mut chart).map_err(within)?;
    }
    let opts = RenderOptions {
        release_name: input.release.to_owned(),
        namespace: input.namespace.to_owned(),
        values,
        set,
        skip_tests: true,
        include_crds: true,
        helm: input.helm,
        ..RenderOptions::default()
    };
    let rendered = emco_helm::render(&chart, &opts).map_err(within)?;

    let mut out = RenderedApp::default();
    let mut sources: HashMap<String, String> = HashMap::new();
    for crd in &rendered.crds {
        for doc in input.helm.split_manifests(&crd.content) {
            let (kind, name) = kind_and_name(&doc).map_err(|e| {
                Error::invalid(format!(
                    "app {app:?}: YAML parse error on {}: {e}",
                    crd.source
                ))
            })?;
            let key = add(&mut out, &mut sources, app, &crd.source, &kind, &name, &doc)?;
            out.hooks.crd_install.push(key);
        }
    }
    for m in &rendered.manifests {
        let key = add(
            &mut out,
            &mut sources,
            app,
            &m.source,
            &m.kind,
            &m.name,
            &m.content,
        )?;
        if m.kind == "CustomResourceDefinition" {
            out.hooks.crd_install.push(key);
        } else {
            out.order.push(key);
        }
    }
    let groups: [(&str, HookGroup); 5] = [
        ("crd-install", |h| &mut h.crd_install),
        ("pre-install", |h| &mut h.pre_install),
        ("post-install", |h| &mut h.post_install),
        ("pre-delete", |h| &mut h.pre_delete),
        ("post-delete", |h| &mut h.post_delete),
    ];
    let mut hook_keys: HashSet<String> = HashSet::new();
    for (event, group) in groups {
        for hook in rendered.hooks_for(event) {
            let m = &hook.manifest;
            let key = ResourceName::new(&m.name, &m.kind).to_string();
            // A hook of several events is one resource listed in each of its groups.
            let seen = hook_keys.contains(&key) && sources.get(&key) == Some(&m.source);
            if !seen {
                add(
                    &mut out,
                    &mut sources,
                    app,
                    &m.source,
                    &m.kind,
                    &m.name,
                    &m.content,
                )?;
                hook_keys.insert(key.clone());
            }
            group(&mut out.hooks).push(key);
        }
    }
    Ok(out)
}

/// Adds one rendered document as the resource `name+Kind`, which must be new to the app
/// (`sources` holds the template each key came from); returns the key.
fn add(
    out: &mut RenderedApp,
    sources: &mut HashMap<String, String>,
    app: &str,
    source: &str,
    kind: &str,
    name: &str,
    text: &str,
) -> Result<String> {
    if kind.is_empty() || name.is_empty() {
        return Err(Error::invalid(format!(
            "app {app:?}: {source} renders a document without kind or metadata.name"
        )));
    }
    let key = ResourceName::new(name, kind).to_string();
    if let Some(first) = sources.insert(key.clone(), source.to_owned()) {
        return Err(Error::invalid(format!(
            "app {app:?}: {first} and {source} both render {kind} {name:?}; resources are \
             identified by name and kind, so one of them must be renamed"
        )));
    }
    out.resources.push((key.clone(), text.to_owned()));
    Ok(key)
}

/// The `kind` and `metadata.name` of a YAML document (empty when absent).
fn kind_and_name(doc: &str) -> std::result::Result<(String, String), emco_go::yaml::Error> {
    let v = emco_go::yaml::parse(doc)?;
    let text = |v: Option<&serde_json::Value>| {
        v.and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok((
        text(v.get("kind")),
        text(v.get("metadata").and_then(|m| m.get("name"))),
    ))
}

/// An app profile archive read into memory: `manifest.yaml` at the root or in the single top
/// directory, and the files beside it.
struct Profile {
    manifest: ProfileManifest,
    /// Files by path relative to the directory of `manifest.yaml`.
    files: BTreeMap<String, Vec<u8>>,
}

impl Profile {
    fn read(archive: &[u8], max_unpacked: u64) -> Result<Self> {
        let bad = |why: String| Error::invalid(format!("the app profile {why}"));
        let limits = ArchiveLimits {
            max_file: max_unpacked,
            max_total: max_unpacked,
        };
        let files: BTreeMap<Vec<String>, Vec<u8>> = emco_helm::archive::read_all(archive, limits)
            .map_err(|e| bad(format!("is refused: {e}")))?
            .into_iter()
            .collect();
        // The manifest at the root wins over one in a top directory, as at upload.
        let base: Vec<String> = if files.contains_key(&vec!["manifest.yaml".to_owned()]) {
            Vec::new()
        } else {
            files
                .keys()
                .find(|p| p.len() == 2 && p[1] == "manifest.yaml")
                .map(|p| vec![p[0].clone()])
                .ok_or_else(|| bad("archive has no manifest.yaml".to_owned()))?
        };
        let files: BTreeMap<String, Vec<u8>> = files
            .into_iter()
            .filter_map(|(p, d)| p.strip_prefix(base.as_slice()).map(|r| (r.join("/"), d)))
            .collect();
        let text = files
            .get("manifest.yaml")
            .map(|d| String::from_utf8_lossy(d).into_owned())
            .unwrap_or_default();
        let manifest: ProfileManifest = emco_go::yaml::from_str(&text)
            .map_err(|e| bad(format!("manifest.yaml is malformed: {e}")))?;
        Ok(Self { manifest, files })
    }

    fn file(&self, path: &str) -> Result<&[u8]> {
        let path = path.trim_start_matches("./");
        self.files.get(path).map(Vec::as_slice).ok_or_else(|| {
            Error::invalid(format!(
                "the app profile's manifest names {path:?}, which the archive does not hold"
            ))
        })
    }

    /// The values file, parsed.
    fn values(&self) -> Result<Option<Value>> {
        let name = &self.manifest.kind.values;
        if name.is_empty() {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(self.file(name)?).into_owned();
        emco_helm::yaml::parse_values_document(&text)
            .map(Some)
            .map_err(|e| Error::invalid(format!("the app profile's {name} is not YAML: {e}")))
    }

    /// Copies the config resources into the chart: `chartpath` is relative to the directory
    /// the chart archive unpacks to (`<chart>/templates/x.yaml`), or to the chart itself.
    fn copy_into(&self, chart: &mut Chart) -> Result<()> {
        for cr in &self.manifest.kind.configresource {
            let data = Arc::new(self.file(&cr.filepath)?.to_vec());
            let prefix = format!("{}/", chart.metadata.name);
            let path = cr.chartpath.trim_start_matches("./");
            let path = path.strip_prefix(&prefix).unwrap_or(path).to_owned();
            let list = if path.starts_with("templates/") {
                &mut chart.templates
            } else {
                &mut chart.files
            };
            list.retain(|f| f.name != path);
            list.push(ChartFile { name: path, data });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tgz(files: &[(&str, &str)]) -> Vec<u8> {
        emco_helm::archive::pack_files(files).unwrap()
    }

    const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
";

    fn chart(extra: &[(&str, &str)]) -> Vec<u8> {
        let mut files = vec![
            (
                "demo/Chart.yaml",
                "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
            ),
            ("demo/values.yaml", "color: red\n"),
            ("demo/crds/widgets.yaml", CRD),
            (
                "demo/templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  color: {{ .Values.color }}\n  ns: {{ .Release.Namespace }}\n",
            ),
            (
                "demo/templates/svc.yaml",
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  ports: [{port: 80}]\n",
            ),
            (
                "demo/templates/hook.yaml",
                "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-migrate\n  annotations:\n    helm.sh/hook: pre-install,post-delete\nspec:\n  template:\n    spec:\n      containers: [{name: m, image: busybox}]\n      restartPolicy: Never\n",
            ),
            (
                "demo/templates/test.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  annotations:\n    helm.sh/hook: test\nspec:\n  containers: [{name: t, image: busybox}]\n",
            ),
            (
                "demo/templates/upgrade.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: upgrade-only\n  annotations:\n    helm.sh/hook: pre-upgrade\n",
            ),
        ];
        files.extend_from_slice(extra);
        tgz(&files)
    }

    fn profile() -> Vec<u8> {
        tgz(&[
            (
                "profile/manifest.yaml",
                "version: v1\ntype:\n  values: override_values.yaml\n  configresource:\n  - filepath: extra.yaml\n    chartpath: demo/templates/extra.yaml\n",
            ),
            ("profile/override_values.yaml", "color: blue\n"),
            (
                "profile/extra.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n",
            ),
        ])
    }

    fn input<'a>(chart: &'a [u8], profile: Option<&'a [u8]>) -> RenderInput<'a> {
        RenderInput {
            app: "demo",
            chart,
            profile,
            release: "r1",
            namespace: "team",
            max_unpacked: 1 << 20,
            helm: HelmCompat::default(),
        }
    }

    fn yaml<'a>(r: &'a RenderedApp, key: &str) -> &'a str {
        &r.resources.iter().find(|(k, _)| k == key).unwrap().1
    }

    #[test]
    fn profile_values_then_overrides_hooks_and_crds_by_phase() {
        let (chart, profile) = (chart(&[]), profile());
        let r = render_app(&input(&chart, Some(&profile)), vec!["color=green".into()]).unwrap();
        let mut keys: Vec<&str> = r.resources.iter().map(|(k, _)| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "extra+ConfigMap",
                "r1+Service",
                "r1-cm+ConfigMap",
                "r1-migrate+Job",
                "widgets.example.com+CustomResourceDefinition"
            ]
        );
        assert_eq!(
            r.order,
            ["r1-cm+ConfigMap", "extra+ConfigMap", "r1+Service"]
        );
        assert_eq!(
            r.hooks.crd_install,
            ["widgets.example.com+CustomResourceDefinition"]
        );
        assert_eq!(r.hooks.pre_install, ["r1-migrate+Job"]);
        assert_eq!(r.hooks.post_delete, ["r1-migrate+Job"]);
        assert!(r.hooks.post_install.is_empty() && r.hooks.pre_delete.is_empty());
        let cm = yaml(&r, "r1-cm+ConfigMap");
        assert!(
            cm.contains("color: green") && cm.contains("ns: team"),
            "{cm}"
        );

        let r = render_app(&input(&chart, Some(&profile)), Vec::new()).unwrap();
        assert!(yaml(&r, "r1-cm+ConfigMap").contains("color: blue"));
        let r = render_app(&input(&chart, None), Vec::new()).unwrap();
        assert!(yaml(&r, "r1-cm+ConfigMap").contains("color: red"));
        assert!(!r.order.iter().any(|k| k == "extra+ConfigMap"));
    }

    #[test]
    fn same_name_and_kind_twice_is_refused_naming_both_templates() {
        let chart = chart(&[(
            "demo/templates/dup.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n  namespace: other\n",
        )]);
        let e = render_app(&input(&chart, None), Vec::new()).unwrap_err();
        assert_eq!(e.kind(), emco_core::ErrorKind::InvalidArgument);
        assert!(
            e.message().contains("demo/templates/cm.yaml")
                && e.message().contains("demo/templates/dup.yaml"),
            "{e}"
        );
    }

    #[test]
    fn bad_archives_are_invalid_arguments() {
        let chart = chart(&[]);
        for (c, p) in [
            (&b"not a chart"[..], None),
            (&chart[..], Some(&b"junk"[..])),
            (&chart[..], Some(&tgz(&[("x/readme", "hi")])[..])),
        ] {
            let e = render_app(&input(c, p), Vec::new()).unwrap_err();
            assert_eq!(e.kind(), emco_core::ErrorKind::InvalidArgument, "{e}");
        }
        let missing = tgz(&[(
            "manifest.yaml",
            "version: v1\ntype:\n  values: nowhere.yaml\n",
        )]);
        let e = render_app(&input(&chart, Some(&missing)), Vec::new()).unwrap_err();
        assert!(e.message().contains("nowhere.yaml"), "{e}");
    }
}
