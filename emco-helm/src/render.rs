//! Rendering a chart like `helm template`: values, built-in objects, every template of the
//! chart and its subcharts in one template set, then Helm's split into manifests and hooks,
//! sorted in install order.

use emco_core::poison::lock;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock, Mutex};

use emco_core::Error;

use crate::chart::{Chart, ChartObject};
pub use crate::compat::HelmCompat;
use crate::files::Files;
use crate::semver::{Constraints, Version};
use crate::template::{TemplateLimits, Templates};
use crate::value::{Map, Object, Value};
use crate::values;

/// The Kubernetes version `helm template` assumes without `--kube-version`.
pub const DEFAULT_KUBE_VERSION: &str = "v1.20.0";

/// The API group versions a Kubernetes 1.20 client knows, Helm's default `APIVersions`.
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
    "apiextensions.k8s.io/v1beta1",
    "apiregistration.k8s.io/v1",
    "apiregistration.k8s.io/v1beta1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2beta1",
    "autoscaling/v2beta2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "coordination.k8s.io/v1beta1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1beta1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "scheduling.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1beta1",
];

/// Helm's `InstallOrder` of kinds.
const INSTALL_ORDER: &[&str] = &[
    "PriorityClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodSecurityPolicy",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "SecretList",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleList",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    "Role",
    "RoleList",
    "RoleBinding",
    "RoleBindingList",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// What to render and how (the flags of `helm template`).
#[derive(Debug, Clone)]
pub struct RenderOptions {
    /// `.Release.Name`.
    pub release_name: String,
    /// `.Release.Namespace`.
    pub namespace: String,
    /// Parsed values files (`-f`), in order; later ones win.
    pub values: Vec<Value>,
    /// `--set` expressions, applied after the values files.
    pub set: Vec<String>,
    /// `--set-string` expressions, applied last.
    pub set_string: Vec<String>,
    /// `--kube-version` (default [`DEFAULT_KUBE_VERSION`]).
    pub kube_version: Option<String>,
    /// `--api-versions`, added to [`DEFAULT_API_VERSIONS`].
    pub api_versions: Vec<String>,
    /// `--include-crds`: print the files of `crds/` first.
    pub include_crds: bool,
    /// `--skip-tests`: drop test hooks from the output.
    pub skip_tests: bool,
    /// `--show-only`: print only the manifests of these template paths (globs).
    pub show_only: Vec<String>,
    /// `.Release.IsUpgrade` (and not `IsInstall`).
    pub is_upgrade: bool,
    /// `.Release.Revision`.
    pub revision: i64,
    /// Limits on template execution.
    pub limits: TemplateLimits,
    /// Which Helm release's output to match (default: the current one).
    pub helm: HelmCompat,
}

impl Default for RenderOptions {
    fn default() -> Self {
        Self {
            release_name: "release-name".to_owned(),
            namespace: "default".to_owned(),
            values: Vec::new(),
            set: Vec::new(),
            set_string: Vec::new(),
            kube_version: None,
            api_versions: Vec::new(),
            include_crds: false,
            skip_tests: false,
            show_only: Vec::new(),
            is_upgrade: false,
            revision: 1,
            limits: TemplateLimits::default(),
            helm: HelmCompat::default(),
        }
    }
}

/// One object of the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The template path it came from (`chart/templates/service.yaml`), Helm's `# Source:`.
    pub source: String,
    /// Its `kind` (empty when the document has none).
    pub kind: String,
    /// Its `metadata.name`.
    pub name: String,
    /// The document text, as [`HelmCompat::split_manifests`] cut it.
    pub content: String,
}

/// A hook: a manifest with `helm.sh/hook` events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The manifest.
    pub manifest: Manifest,
    /// Its events (`pre-install`, `test`, ...), lower-cased.
    pub events: Vec<String>,
    /// `helm.sh/hook-weight` (0 when absent or not a number).
    pub weight: i64,
    /// `helm.sh/hook-delete-policy` values.
    pub delete_policies: Vec<String>,
}

impl Hook {
    /// Whether this is a test hook (`--skip-tests` drops those).
    #[must_use]
    pub fn is_test(&self) -> bool {
        self.events.iter().any(|e| e == "test")
    }
}

/// A CRD file from a `crds/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdFile {
    /// `chart/crds/file.yaml`.
    pub source: String,
    /// The file content as is.
    pub content: String,
}

/// The result of rendering.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// Files of `crds/` directories (the chart's, then its subcharts').
    pub crds: Vec<CrdFile>,
    /// Manifests in Helm's install order.
    pub manifests: Vec<Manifest>,
    /// Hooks, sorted by kind like Helm; group them with [`Rendered::hooks_for`].
    pub hooks: Vec<Hook>,
    /// The top chart's rendered `NOTES.txt`.
    pub notes: String,
}

impl Rendered {
    /// The hooks of `event`, sorted by weight then name, the order Helm runs them in.
    #[must_use]
    pub fn hooks_for(&self, event: &str) -> Vec<&Hook> {
        let mut v: Vec<&Hook> = self
            .hooks
            .iter()
            .filter(|h| h.events.iter().any(|e| e == event))
            .collect();
        v.sort_by(|a, b| {
            a.weight
                .cmp(&b.weight)
                .then_with(|| a.manifest.name.cmp(&b.manifest.name))
        });
        v
    }

    /// Exactly what `helm template` prints for these options.
    ///
    /// # Errors
    /// `NotFound` when a `--show-only` path matches no manifest (Helm's
    /// `could not find template`).
    pub fn to_helm_output(&self, opts: &RenderOptions) -> Result<String, Error> {
        // Written in place: the output of a large chart is megabytes.
        let document = |out: &mut String, source: &str, content: &str| {
            for part in ["---\n# Source: ", source, "\n", content, "\n"] {
                out.push_str(part);
            }
        };
        let mut out = String::new();
        if opts.include_crds {
            for crd in &self.crds {
                document(&mut out, &crd.source, &crd.content);
            }
        }
        for m in &self.manifests {
            document(&mut out, &m.source, &m.content);
        }
        // As `strings.TrimSpace` of the CRDs and manifests, then a newline.
        let end = out.trim_end().len();
        out.truncate(end);
        let start = out.len() - out.trim_start().len();
        out.drain(..start);
        out.push('\n');
        for h in &self.hooks {
            if opts.skip_tests && h.is_test() {
                continue;
            }
            document(&mut out, &h.manifest.source, &h.manifest.content);
        }
        if opts.show_only.is_empty() {
            return Ok(out);
        }
        let docs = opts.helm.split_manifests(&out);
        let mut selected = String::new();
        for f in &opts.show_only {
            let mut missing = true;
            for doc in &docs {
                let Some(path) = doc
                    .lines()
                    .find_map(|l| l.strip_prefix("# Source: "))
                    .and_then(|s| s.split_once('/'))
                    .map(|(_, rest)| rest)
                else {
                    continue;
                };
                if go_path_match(f, path) {
                    selected.push_str(&format!("---\n{doc}\n"));
                    missing = false;
                }
            }
            if missing {
                return Err(Error::not_found(format!(
                    "could not find template {f} in chart"
                )));
            }
        }
        Ok(selected)
    }
}

/// Go's `filepath.Match` on `/`-separated paths.
fn go_path_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len())
                .take_while(|&i| i == 0 || n[i - 1] != '/')
                .any(|i| go(&p[1..], &n[i..])),
            Some('?') => n.first().is_some_and(|c| *c != '/') && go(&p[1..], &n[1..]),
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(
        &pattern.chars().collect::<Vec<_>>(),
        &name.chars().collect::<Vec<_>>(),
    )
}

/// Helm's `SplitManifests` as the current Helm release does it ([`HelmCompat::default`]).
#[must_use]
pub fn split_manifests(text: &str) -> Vec<String> {
    HelmCompat::default().split_manifests(text)
}

/// `.Capabilities.KubeVersion`.
#[derive(Debug)]
struct KubeVersion {
    version: String,
    major: String,
    minor: String,
}

impl Object for KubeVersion {
    fn kind(&self) -> &'static str {
        "struct"
    }

    fn type_name(&self) -> &str {
        "chartutil.KubeVersion"
    }

    fn member(&self, name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        Some(Ok(Value::String(match name {
            "Version" | "GitVersion" | "String" => self.version.clone(),
            "Major" => self.major.clone(),
            "Minor" => self.minor.clone(),
            _ => return None,
        })))
    }

    fn is_method(&self, name: &str) -> bool {
        matches!(name, "GitVersion" | "String")
    }

    fn display(&self) -> String {
        self.version.clone()
    }
}

/// `.Capabilities.APIVersions`.
#[derive(Debug)]
struct ApiVersions(Vec<String>);

impl Object for ApiVersions {
    fn kind(&self) -> &'static str {
        "slice"
    }

    fn type_name(&self) -> &str {
        "chartutil.VersionSet"
    }

    fn member(&self, name: &str, args: &[Value]) -> Option<Result<Value, String>> {
        if name != "Has" {
            return None;
        }
        Some(match args {
            [Value::String(s)] => Ok(Value::Bool(self.0.iter().any(|v| v == s))),
            [other] => Err(format!(
                "wrong type for value; expected string; got {}",
                other.type_name()
            )),
            _ => Err(format!(
                "wrong number of args for Has: want 1 got {}",
                args.len()
            )),
        })
    }

    fn is_method(&self, name: &str) -> bool {
        name == "Has"
    }

    fn display(&self) -> String {
        format!("[{}]", self.0.join(" "))
    }

    fn len(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// `.Capabilities`.
#[derive(Debug)]
struct Capabilities {
    kube: Arc<KubeVersion>,
    apis: Arc<ApiVersions>,
    helm: Value,
}

impl Object for Capabilities {
    fn type_name(&self) -> &str {
        "*chartutil.Capabilities"
    }

    fn member(&self, name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        Some(Ok(match name {
            "KubeVersion" => Value::Object(self.kube.clone()),
            "APIVersions" => Value::Object(self.apis.clone()),
            "HelmVersion" => self.helm.clone(),
            _ => return None,
        }))
    }

    fn is_method(&self, _name: &str) -> bool {
        false
    }

    fn display(&self) -> String {
        format!(
            "&{{{} {} {}}}",
            self.apis.display(),
            self.kube.display(),
            self.helm.to_go_string()
        )
    }
}

fn capabilities(opts: &RenderOptions) -> Result<(Capabilities, Version), Error> {
    let text = opts.kube_version.as_deref().unwrap_or(DEFAULT_KUBE_VERSION);
    let v = Version::parse(text)
        .map_err(|e| Error::invalid(format!("invalid kube version {text:?}: {e}")))?;
    let (major, minor) = {
        let s = v.to_string();
        let mut it = s.split(['.', '-', '+']);
        (
            it.next().unwrap_or("0").to_owned(),
            it.next().unwrap_or("0").to_owned(),
        )
    };
    let kube = KubeVersion {
        version: format!("v{v}"),
        major,
        minor,
    };
    let mut apis: Vec<String> = DEFAULT_API_VERSIONS
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    apis.extend(opts.api_versions.iter().cloned());
    let mut helm = BTreeMap::new();
    helm.insert("Version".to_owned(), Value::str("v3.15.0"));
    helm.insert("GitCommit".to_owned(), Value::str(""));
    helm.insert("GitTreeState".to_owned(), Value::str(""));
    helm.insert("GoVersion".to_owned(), Value::str("go1.22.0"));
    Ok((
        Capabilities {
            kube: Arc::new(kube),
            apis: Arc::new(ApiVersions(apis)),
            helm: Value::map(helm),
        },
        v,
    ))
}

/// Helm's release name rule.
fn validate_release_name(name: &str) -> Result<(), Error> {
    static RE: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$").ok()
    });
    let ok =
        !name.is_empty() && name.len() <= 53 && RE.as_ref().is_some_and(|re| re.is_match(name));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "release name is invalid: it must match the regex ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$ and the length must not be longer than 53",
        ))
    }
}

/// A template file with the data it renders with.
struct Renderable {
    name: String,
    src: Arc<Vec<u8>>,
    vals: Map,
    base_path: String,
}

fn collect(
    chart: &Chart,
    parent: Option<(&str, &Map)>,
    top: &Map,
    out: &mut Vec<Renderable>,
    crds: &mut Vec<CrdFile>,
) -> Value {
    let full = match parent {
        None => chart.name().to_owned(),
        Some((p, _)) => format!("{p}/charts/{}", chart.name()),
    };
    let values = match parent {
        None => top.get("Values").unwrap_or_else(Value::empty_map),
        Some((_, parent_values)) => match parent_values.get(chart.name()) {
            Some(v @ Value::Map(_)) => v,
            _ => Value::empty_map(),
        },
    };
    let files = Files::new(
        chart
            .files
            .iter()
            .map(|f| (f.name.clone(), f.data.clone()))
            .collect(),
    );
    for f in &chart.files {
        let lower = f.name.to_ascii_lowercase();
        if f.name.starts_with("crds/")
            && (lower.ends_with(".yaml") || lower.ends_with(".yml") || lower.ends_with(".json"))
        {
            crds.push(CrdFile {
                source: format!("{full}/{}", f.name),
                content: String::from_utf8_lossy(&f.data).into_owned(),
            });
        }
    }
    let subcharts = Map::default();
    let next = Map::default();
    next.insert(
        "Chart",
        Value::Object(Arc::new(ChartObject(chart.metadata.clone()))),
    );
    next.insert("Files", Value::Object(Arc::new(files)));
    next.insert("Release", top.get("Release").unwrap_or_default());
    next.insert("Capabilities", top.get("Capabilities").unwrap_or_default());
    next.insert("Values", values.clone());
    next.insert("Subcharts", Value::Map(subcharts.clone()));
    let values_map = match &values {
        Value::Map(m) => m.clone(),
        _ => Map::default(),
    };
    for child in &chart.dependencies {
        let child_next = collect(child, Some((&full, &values_map)), top, out, crds);
        subcharts.insert(child.name(), child_next);
    }
    let library = chart.metadata.chart_type == "library";
    for t in &chart.templates {
        let base = t.name.rsplit('/').next().unwrap_or(&t.name);
        if library && !base.starts_with('_') {
            continue;
        }
        out.push(Renderable {
            name: format!("{full}/{}", t.name),
            src: t.data.clone(),
            vals: next.clone(),
            base_path: format!("{full}/templates"),
        });
    }
    Value::Map(next)
}

/// Parsed template sets by chart digest and template list, so repeated renders skip parsing.
static CACHE: LazyLock<Mutex<HashMap<String, Arc<Templates>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
const CACHE_ENTRIES: usize = 64;

/// Marks the message of `required` so that the error can be reported Helm's way.
pub(crate) const WARN_START: &str = "HELM_ERR_START";
pub(crate) const WARN_END: &str = "HELM_ERR_END";

fn template_set(digest: &str, order: &[&Renderable]) -> Result<Arc<Templates>, Error> {
    let mut key = String::from(digest);
    for r in order {
        key.push('\n');
        key.push_str(&r.name);
    }
    let cached = lock(&CACHE).get(&key).cloned();
    if let Some(set) = cached {
        return Ok(set);
    }
    let mut set = Templates::new();
    for r in order {
        set.add(&r.name, &String::from_utf8_lossy(&r.src))
            .map_err(|e| Error::invalid(cleanup_parse_error(&r.name, e.message())))?;
    }
    let set = Arc::new(set);
    let mut cache = lock(&CACHE);
    if cache.len() >= CACHE_ENTRIES {
        cache.clear();
    }
    cache.insert(key, set.clone());
    Ok(set)
}

/// Helm's `cleanupParseError`: `parse error at (FILE:LINE): MESSAGE`.
fn cleanup_parse_error(name: &str, msg: &str) -> String {
    let tokens: Vec<&str> = msg.split(": ").collect();
    if tokens.len() == 1 {
        return format!("parse error in ({name}): {msg}");
    }
    format!(
        "parse error at ({}): {}",
        tokens[1],
        tokens[tokens.len() - 1]
    )
}

/// Helm's `cleanupExecError`: `required` failures become `execution error at (LOCATION): MESSAGE`.
fn cleanup_exec_error(name: &str, msg: &str) -> String {
    let tokens: Vec<&str> = msg.splitn(3, ": ").collect();
    if tokens.len() != 3 {
        return format!("execution error in ({name}): {msg}");
    }
    if let Some(start) = tokens[2].find(WARN_START) {
        let rest = &tokens[2][start + WARN_START.len()..];
        let inner = rest.split(WARN_END).next().unwrap_or(rest);
        return format!("execution error at ({}): {inner}", tokens[1]);
    }
    msg.to_owned()
}

/// Renders `chart` like `helm template`.
///
/// # Errors
/// `InvalidArgument` for bad options, values, templates (the message names the file and
/// line) or manifests that are not YAML; `FailedPrecondition` for missing dependencies, a
/// library chart, or an incompatible `kubeVersion`.
pub fn render(chart: &Chart, opts: &RenderOptions) -> Result<Rendered, Error> {
    validate_release_name(&opts.release_name)?;
    let (mut rendered, crds) = render_files(chart, opts)?;
    let notes_name = format!("{}/templates/NOTES.txt", chart.name());
    let notes = rendered.get(&notes_name).cloned().unwrap_or_default();
    rendered.retain(|k, _| !k.ends_with("NOTES.txt"));
    let (manifests, hooks) = sort_manifests(&rendered, opts.helm)?;
    Ok(Rendered {
        crds,
        manifests,
        hooks,
        notes,
    })
}

/// Helm's `engine.Render`: the text of every template of `chart` and its subcharts (partials
/// `_*` excepted, `NOTES.txt` included), keyed by template name (`mychart/templates/x.yaml`),
/// before manifests are split, sorted or checked.
///
/// Like Helm's engine (and unlike `helm template`) it does not check the release name.
///
/// # Errors
/// As [`render`], except that the output need not be YAML.
pub fn render_templates(
    chart: &Chart,
    opts: &RenderOptions,
) -> Result<BTreeMap<String, String>, Error> {
    render_files(chart, opts).map(|(files, _)| files)
}

/// The rendered templates and the CRD files of the chart and its enabled subcharts.
fn render_files(
    chart: &Chart,
    opts: &RenderOptions,
) -> Result<(BTreeMap<String, String>, Vec<CrdFile>), Error> {
    if chart.metadata.chart_type == "library" {
        return Err(Error::failed_precondition(
            "library charts are not installable",
        ));
    }
    chart.check_dependencies()?;
    let user = Map::default();
    for (i, v) in opts.values.iter().enumerate() {
        match v {
            Value::Map(m) => values::merge_maps(
                &user,
                &match Value::Map(m.clone()).deep_copy() {
                    Value::Map(c) => c,
                    _ => Map::default(),
                },
            ),
            Value::Nil => {}
            _ => {
                return Err(Error::invalid(format!(
                    "values file {} is not a map",
                    i + 1
                )));
            }
        }
    }
    for s in &opts.set {
        values::apply_set(&user, s, false)?;
    }
    for s in &opts.set_string {
        values::apply_set(&user, s, true)?;
    }
    let mut chart = chart.clone();
    values::process_dependencies(&mut chart, &user, opts.helm)?;
    let (caps, kube) = capabilities(opts)?;
    if !chart.metadata.kube_version.is_empty() {
        let ok = Constraints::parse(&chart.metadata.kube_version).is_ok_and(|c| c.check(&kube));
        if !ok {
            return Err(Error::failed_precondition(format!(
                "chart requires kubeVersion: {} which is incompatible with Kubernetes v{kube}",
                chart.metadata.kube_version
            )));
        }
    }
    let coalesced = values::coalesce_values(&chart, &user, opts.helm)?;
    let top = Map::default();
    let mut release = BTreeMap::new();
    release.insert("Name".to_owned(), Value::String(opts.release_name.clone()));
    release.insert(
        "Namespace".to_owned(),
        Value::String(opts.namespace.clone()),
    );
    release.insert("IsUpgrade".to_owned(), Value::Bool(opts.is_upgrade));
    release.insert("IsInstall".to_owned(), Value::Bool(!opts.is_upgrade));
    release.insert("Revision".to_owned(), Value::Int(opts.revision));
    release.insert("Service".to_owned(), Value::str("Helm"));
    top.insert("Release", Value::map(release));
    top.insert("Capabilities", Value::Object(Arc::new(caps)));
    top.insert("Values", Value::Map(coalesced));
    let mut renderables = Vec::new();
    let mut crds = Vec::new();
    collect(&chart, None, &top, &mut renderables, &mut crds);
    // Helm parses and runs templates deepest path first, then in reverse name order, so
    // that a parent chart's `define` replaces a subchart's.
    let mut order: Vec<&Renderable> = renderables.iter().collect();
    order.sort_by(|a, b| {
        let (ca, cb) = (a.name.matches('/').count(), b.name.matches('/').count());
        cb.cmp(&ca).then_with(|| b.name.cmp(&a.name))
    });
    let set = template_set(chart.digest(), &order)?;
    // One executor thread (with a stack sized for the depth limit) runs every template.
    let rendered = crate::template::with_exec_stack(&opts.limits, || {
        let mut rendered: BTreeMap<String, String> = BTreeMap::new();
        for r in &order {
            let base = r.name.rsplit('/').next().unwrap_or(&r.name);
            if base.starts_with('_') {
                continue;
            }
            let data = Map::from_btree(r.vals.snapshot());
            let mut template = BTreeMap::new();
            template.insert("Name".to_owned(), Value::String(r.name.clone()));
            template.insert("BasePath".to_owned(), Value::String(r.base_path.clone()));
            data.insert("Template", Value::map(template));
            let out = set
                .execute_here(&r.name, &Value::Map(data), &opts.limits)
                .map_err(|e| Error::invalid(cleanup_exec_error(&r.name, e.message())))?;
            rendered.insert(r.name.clone(), out.replace("<no value>", ""));
        }
        Ok::<_, Error>(rendered)
    })
    .map_err(|e| Error::internal(e.message()))??;
    Ok((rendered, crds))
}

fn kind_rank(kind: &str) -> Option<usize> {
    INSTALL_ORDER.iter().position(|k| *k == kind)
}

/// Helm's `lessByKind`: known kinds in install order, unknown kinds after them by name.
fn less_by_kind(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (kind_rank(a), kind_rank(b)) {
        (None, None) => a.cmp(b),
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => x.cmp(&y),
    }
}

const HOOK_EVENTS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
];

/// Helm's `SortManifests`: split each file into documents, tell hooks from manifests, and sort
/// both by kind (stable, so file and document order is kept within a kind).
fn sort_manifests(
    files: &BTreeMap<String, String>,
    helm: HelmCompat,
) -> Result<(Vec<Manifest>, Vec<Hook>), Error> {
    let mut manifests = Vec::new();
    let mut hooks = Vec::new();
    for (path, content) in files {
        let base = path.rsplit('/').next().unwrap_or(path);
        if base.starts_with('_') || content.trim().is_empty() {
            continue;
        }
        for doc in helm.split_manifests(content) {
            let head = cached_head(path, &doc)?;
            let manifest = Manifest {
                source: path.clone(),
                kind: head.kind,
                name: head.name,
                content: doc,
            };
            let Some(hook_types) = head.annotations.get("helm.sh/hook") else {
                manifests.push(manifest);
                continue;
            };
            let mut events = Vec::new();
            let mut unknown = false;
            for t in hook_types.split(',') {
                let t = t.trim().to_ascii_lowercase();
                let t = if t == "test-success" {
                    "test".to_owned()
                } else {
                    t
                };
                if !HOOK_EVENTS.contains(&t.as_str()) {
                    unknown = true;
                    break;
                }
                events.push(t);
            }
            if unknown {
                // Helm skips a document with an unknown hook event altogether.
                continue;
            }
            let weight = head
                .annotations
                .get("helm.sh/hook-weight")
                .and_then(|w| w.trim().parse().ok())
                .unwrap_or(0);
            let delete_policies = head
                .annotations
                .get("helm.sh/hook-delete-policy")
                .map(|p| {
                    p.split(',')
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            hooks.push(Hook {
                manifest,
                events,
                weight,
                delete_policies,
            });
        }
    }
    manifests.sort_by(|a, b| less_by_kind(&a.kind, &b.kind));
    hooks.sort_by(|a, b| less_by_kind(&a.manifest.kind, &b.manifest.kind));
    Ok((manifests, hooks))
}

/// The heads of documents seen before, by path and content: a chart rendered again with the
/// same values (another instantiate, an update of another app) yields the same documents, and
/// parsing each whole (Helm's check that it is YAML) was half of a cached render. Bounded by
/// the bytes of the documents it keeps; emptied when full.
static HEADS: LazyLock<Mutex<HeadCache>> = LazyLock::new(|| Mutex::new(HeadCache::default()));
const HEADS_BYTES: usize = 32 << 20;

#[derive(Default)]
struct HeadCache {
    bytes: usize,
    by_hash: HashMap<u64, Vec<(String, String, SimpleHead)>>,
}

/// [`simple_head`] of `doc`, from [`HEADS`] when it was read before.
fn cached_head(path: &str, doc: &str) -> Result<SimpleHead, Error> {
    use std::hash::{Hash, Hasher};
    let hash = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        path.hash(&mut h);
        doc.hash(&mut h);
        h.finish()
    };
    let lock = || lock(&HEADS);
    let seen = lock().by_hash.get(&hash).and_then(|docs| {
        docs.iter()
            .find(|(p, d, _)| p == path && d == doc)
            .map(|(_, _, head)| head.clone())
    });
    if let Some(head) = seen {
        return Ok(head);
    }
    let head = simple_head(path, doc)?;
    let size = path.len() + doc.len();
    let mut cache = lock();
    if cache.bytes + size > HEADS_BYTES {
        *cache = HeadCache::default();
    }
    cache.bytes += size;
    cache
        .by_hash
        .entry(hash)
        .or_default()
        .push((path.to_owned(), doc.to_owned(), head.clone()));
    Ok(head)
}

/// The fields of a document Helm reads to sort it (`releaseutil.SimpleHead`).
#[derive(Clone)]
struct SimpleHead {
    kind: String,
    name: String,
    annotations: BTreeMap<String, String>,
}

fn simple_head(path: &str, doc: &str) -> Result<SimpleHead, Error> {
    let err = |m: String| Error::invalid(format!("YAML parse error on {path}: {m}"));
    let parsed = crate::yaml::parse_values_document(doc).map_err(err)?;
    let mut head = SimpleHead {
        kind: String::new(),
        name: String::new(),
        annotations: BTreeMap::new(),
    };
    let m = match parsed {
        Value::Nil => return Ok(head),
        Value::Map(m) => m,
        other => {
            return Err(err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type releaseutil.SimpleHead",
                if matches!(other, Value::List(_)) {
                    "array"
                } else {
                    "string"
                }
            )));
        }
    };
    let string = |v: Option<Value>, field: &str| -> Result<String, Error> {
        match v {
            None | Some(Value::Nil) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(err(format!(
                "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal non-string into Go struct field {field} of type string"
            ))),
        }
    };
    string(m.get("apiVersion"), "SimpleHead.apiVersion")?;
    head.kind = string(m.get("kind"), "SimpleHead.kind")?;
    if let Some(Value::Map(md)) = m.get("metadata") {
        head.name = string(md.get("name"), "SimpleHead.metadata.name")?;
        if let Some(Value::Map(ann)) = md.get("annotations") {
            for (k, v) in ann.snapshot() {
                head.annotations
                    .insert(k, string(Some(v), "SimpleHead.metadata.annotations")?);
            }
        }
    }
    Ok(head)
}
