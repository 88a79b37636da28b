//! Cluster connectors: how rsync reaches one cluster.
//!
//! A [`Connector`] applies and deletes batches of resources on one cluster, reads back the live
//! state of a resource for readiness, and says whether the cluster is reachable. Two
//! implementations exist: [`kube::KubeConnector`] talks to the Kubernetes API, and
//! [`gitops::GitOpsConnector`] commits the manifests into a git repository that an agent in the
//! cluster (Flux, Argo CD) syncs from.
//!
//! Both label every object with [`DEPLOYMENT_ID_LABEL`] (see [`label_for_deployment`]) so that the
//! objects of one app of one AppContext can be found and watched with one label selector.

pub mod gitops;
pub mod kube;
mod source;

pub use source::{Door, Doorbell, ReadinessChange, ReadinessSource, WatchHealth, Watched};

use std::fmt;

use async_trait::async_trait;
use emco_core::ResourceName;
use emco_core::{Error, ErrorKind, HasKind, Result};
use serde_json::{Map, Value};

/// The label every object applied by rsync carries: `emco/deployment-id=<ctx>-<app>`.
pub const DEPLOYMENT_ID_LABEL: &str = "emco/deployment-id";

/// Where a resource lives on a cluster: `apiVersion`, `kind`, optional namespace and name, as
/// written in its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    /// `apps/v1`, `v1`, `example.com/v1alpha1`.
    pub api_version: String,
    /// `Deployment`, `ConfigMap`, ...
    pub kind: String,
    /// The namespace from the manifest; `None` for cluster-scoped objects and for namespaced
    /// objects that take the context's namespace.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
}

impl ResourceId {
    /// Reads the identity of `manifest`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] if `apiVersion`, `kind` or `metadata.name` is missing or not a
    /// non-empty string, or `metadata.namespace` is present but not a string.
    pub fn from_manifest(manifest: &Value) -> Result<Self> {
        let text = |v: Option<&Value>, field: &str| -> Result<String> {
            match v {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
                _ => Err(Error::invalid("must be a non-empty string").with_field(field)),
            }
        };
        let metadata = manifest.get("metadata");
        let namespace = match metadata.and_then(|m| m.get("namespace")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.is_empty() => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(Error::invalid("must be a string").with_field("metadata.namespace"));
            }
        };
        Ok(Self {
            api_version: text(manifest.get("apiVersion"), "apiVersion")?,
            kind: text(manifest.get("kind"), "kind")?,
            namespace,
            name: text(metadata.and_then(|m| m.get("name")), "metadata.name")?,
        })
    }

    /// The API group: `""` for the core group (`v1`), `apps` for `apps/v1`.
    #[must_use]
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(g, _)| g)
    }

    /// The API version without the group: `v1` for `apps/v1`.
    #[must_use]
    pub fn version(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or(self.api_version.as_str(), |(_, v)| v)
    }

    /// The key EMCO uses for a resource in the AppContext: `<name>+<Kind>`.
    #[must_use]
    pub fn emco_name(&self) -> String {
        ResourceName::new(&self.name, &self.kind).to_string()
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ", self.api_version, self.kind)?;
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        f.write_str(&self.name)
    }
}

/// One manifest with its parsed identity.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    id: ResourceId,
    manifest: Value,
}

impl Resource {
    /// Wraps a manifest that is already parsed.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] if it is not an object with an identity
    /// (see [`ResourceId::from_manifest`]).
    pub fn from_value(manifest: Value) -> Result<Self> {
        if !manifest.is_object() {
            return Err(Error::invalid("a manifest must be a mapping"));
        }
        let id = ResourceId::from_manifest(&manifest)?;
        Ok(Self { id, manifest })
    }

    /// Parses one YAML (or JSON, which is YAML) document.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`] if the text is not one YAML document holding a manifest.
    pub fn from_yaml(text: &str) -> Result<Self> {
        let manifest: Value = emco_go::yaml::from_str(text).map_err(|e| {
            Error::invalid(format!("manifest is not valid YAML: {e}")).with_source(e)
        })?;
        Self::from_value(manifest)
    }

    /// The identity read from the manifest.
    #[must_use]
    pub const fn id(&self) -> &ResourceId {
        &self.id
    }

    /// The manifest as given.
    #[must_use]
    pub const fn manifest(&self) -> &Value {
        &self.manifest
    }
}

/// Warnings of an apply: the index in the batch of the resource and the text.
pub type Warnings = Vec<(usize, String)>;

/// The value of [`DEPLOYMENT_ID_LABEL`] for `app` of context `ctx_id`: `<ctx>-<app>`.
#[must_use]
pub fn deployment_id(ctx_id: &str, app: &str) -> String {
    format!("{ctx_id}-{app}")
}

/// Kinds whose `spec.template` is a pod template; it gets the label even when it has no
/// `metadata` yet.
const POD_TEMPLATE_KINDS: &[&str] = &[
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Job",
    "ReplicationController",
];

/// Sets `metadata.labels["emco/deployment-id"] = "<ctx>-<app>"` on `manifest` and on its pod
/// templates, so that the pods a workload creates can be selected too: `spec.template` of
/// Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and ReplicationController,
/// `spec.jobTemplate` and `spec.jobTemplate.spec.template` of CronJob, and `spec.template` of any
/// other kind whose template already has `metadata` (custom workloads).
///
/// Selectors are left alone: adding a label to a workload's selector would orphan its pods.
///
/// ```
/// use emco_rsync::connector::label_for_deployment;
/// use serde_json::json;
///
/// let mut deployment = json!({
///     "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
///     "spec": {"template": {"spec": {"containers": []}}}
/// });
/// label_for_deployment(&mut deployment, "7242", "frontend").unwrap();
/// assert_eq!(deployment["metadata"]["labels"]["emco/deployment-id"], "7242-frontend");
/// assert_eq!(
///     deployment["spec"]["template"]["metadata"]["labels"]["emco/deployment-id"],
///     "7242-frontend"
/// );
/// ```
///
/// # Errors
///
/// [`ErrorKind::InvalidArgument`] if `<ctx>-<app>` is not a valid label value (at most 63
/// characters of `[A-Za-z0-9._-]`, alphanumeric at both ends), if `manifest` is not an object, or
/// if a `metadata` or `labels` it must extend is not an object.
pub fn label_for_deployment(manifest: &mut Value, ctx_id: &str, app: &str) -> Result<()> {
    let value = deployment_id(ctx_id, app);
    check_label_value(&value)?;
    let kind = manifest
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let object = manifest
        .as_object_mut()
        .ok_or_else(|| Error::invalid("a manifest must be a mapping"))?;
    set_label(object, &value).map_err(|e| e.within("metadata"))?;

    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    if kind == "CronJob" {
        if let Some(job) = spec.get_mut("jobTemplate").and_then(Value::as_object_mut) {
            set_label(job, &value).map_err(|e| e.within("spec.jobTemplate.metadata"))?;
            if let Some(template) = job
                .get_mut("spec")
                .and_then(|s| s.get_mut("template"))
                .and_then(Value::as_object_mut)
            {
                set_label(template, &value)
                    .map_err(|e| e.within("spec.jobTemplate.spec.template.metadata"))?;
            }
        }
        return Ok(());
    }
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
        let has_metadata = template.get("metadata").is_some_and(Value::is_object);
        if POD_TEMPLATE_KINDS.contains(&kind.as_str()) || has_metadata {
            set_label(template, &value).map_err(|e| e.within("spec.template.metadata"))?;
        }
    }
    Ok(())
}

/// Sets the label in `object.metadata.labels`, creating both maps when absent. Field paths in
/// errors are relative to `metadata`.
fn set_label(object: &mut Map<String, Value>, value: &str) -> Result<()> {
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if metadata.is_null() {
        *metadata = Value::Object(Map::new());
    }
    let metadata = metadata
        .as_object_mut()
        .ok_or_else(|| Error::invalid("must be a mapping"))?;
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if labels.is_null() {
        *labels = Value::Object(Map::new());
    }
    let labels = labels
        .as_object_mut()
        .ok_or_else(|| Error::invalid("must be a mapping").with_field("labels"))?;
    labels.insert(
        DEPLOYMENT_ID_LABEL.to_owned(),
        Value::String(value.to_owned()),
    );
    Ok(())
}

/// Kubernetes label value syntax, checked here so a bad app name fails before any cluster call.
fn check_label_value(value: &str) -> Result<()> {
    let bytes = value.as_bytes();
    let inner_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends_ok = bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric);
    if value.len() <= 63 && inner_ok && ends_ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "deployment id {value:?} is not a valid label value (at most 63 characters of \
             [A-Za-z0-9._-], alphanumeric at both ends)"
        )))
    }
}

/// What happens to the dependents of a deleted object (pods of a Deployment, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// The object goes at once; the garbage collector removes dependents afterwards.
    #[default]
    Background,
    /// The object stays (with a `deletionTimestamp`) until its dependents are gone.
    Foreground,
    /// Dependents are kept and lose their owner reference.
    Orphan,
}

/// Which app of which AppContext an operation is for, and the namespace its namespaced resources
/// go to when their manifest names none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The AppContext id.
    pub ctx_id: String,
    /// The app name.
    pub app: String,
    /// The namespace given to namespaced resources whose manifest names none (the logical
    /// cloud's namespace); `default` when `None`.
    pub namespace: Option<String>,
}

impl Scope {
    /// The scope of `app` of context `ctx_id`, with no namespace of its own.
    pub fn new(ctx_id: impl Into<String>, app: impl Into<String>) -> Self {
        Self {
            ctx_id: ctx_id.into(),
            app: app.into(),
            namespace: None,
        }
    }

    /// Sets the default namespace.
    #[must_use]
    pub fn with_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// The value of the deployment-id label for this scope (`<ctx>-<app>`).
    #[must_use]
    pub fn deployment_id(&self) -> String {
        deployment_id(&self.ctx_id, &self.app)
    }

    /// The namespace a namespaced resource goes to: its own, else this scope's, else `default`.
    #[must_use]
    pub fn namespace_for<'a>(&'a self, id: &'a ResourceId) -> &'a str {
        id.namespace
            .as_deref()
            .or(self.namespace.as_deref())
            .unwrap_or("default")
    }
}

/// A batch of resources of one scope on one cluster, applied or deleted in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// The app and context the resources belong to.
    pub scope: Scope,
    /// The resources, in the order they are handled (callers pass the reverse order to delete).
    pub resources: Vec<Resource>,
}

impl Batch {
    /// An empty batch for `scope`.
    #[must_use]
    pub const fn new(scope: Scope) -> Self {
        Self {
            scope,
            resources: Vec::new(),
        }
    }

    /// Appends a resource.
    #[must_use]
    pub fn with_resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }

    /// The manifests with the deployment-id label set, in order.
    ///
    /// # Errors
    ///
    /// See [`label_for_deployment`]; the field path names the resource (`resources[2].metadata`).
    pub fn labelled_manifests(&self) -> Result<Vec<Value>> {
        self.resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let mut manifest = r.manifest.clone();
                label_for_deployment(&mut manifest, &self.scope.ctx_id, &self.scope.app)
                    .map_err(|e| e.within(&format!("resources[{i}]")))?;
                Ok(manifest)
            })
            .collect()
    }
}

/// The failure of a batch: the first `done` resources were handled, the one at index `done`
/// failed with `error`, and the rest were not tried. Connectors that work all-or-nothing (GitOps)
/// report `done = 0`.
#[derive(Debug, thiserror::Error)]
#[error("resource {done} of the batch: {error}")]
pub struct BatchError {
    /// How many resources, from the start of the batch, were handled before the failure.
    pub done: usize,
    /// Why the resource at index `done` (or the whole batch) failed.
    #[source]
    pub error: Error,
}

impl BatchError {
    /// A failure at resource `done`.
    #[must_use]
    pub const fn at(done: usize, error: Error) -> Self {
        Self { done, error }
    }
}

impl HasKind for BatchError {
    fn kind(&self) -> ErrorKind {
        self.error.kind()
    }
}

/// How rsync reaches one cluster. Implementations are cheap to share (`Arc<dyn Connector>`) and
/// safe to call concurrently.
///
/// Errors say what the engine should do: [`ErrorKind::Unavailable`] means the cluster (or git
/// remote) could not be reached or was overloaded and the operation may be retried as is; any
/// other kind means the cluster rejected the request ([`ErrorKind::InvalidArgument`],
/// [`ErrorKind::Conflict`], [`ErrorKind::NotFound`] for a kind the cluster does not serve,
/// [`ErrorKind::FailedPrecondition`] for missing permissions) and retrying will not help.
#[async_trait]
pub trait Connector: fmt::Debug + Send + Sync + 'static {
    /// The cluster this connector reaches (`provider+cluster`).
    fn cluster(&self) -> &str;

    /// Whether [`Connector::get`] returns the state observed on the cluster (with `status`), so
    /// that readiness can be derived from it. GitOps returns what was committed instead.
    fn observes_live_state(&self) -> bool;

    /// Creates or updates the resources of `batch`, in order, each labelled with its deployment
    /// id. Applying the same batch twice is harmless. Returns the warnings of the cluster, each
    /// with the index in the batch of the resource it is about (a field the cluster's schema
    /// does not have and that was dropped, as `kubectl apply` drops it).
    ///
    /// # Errors
    ///
    /// A [`BatchError`] saying how far the batch got and why it stopped.
    async fn apply(&self, batch: &Batch) -> Result<Warnings, BatchError>;

    /// Checks each resource of `batch` as the cluster would apply it, changing nothing (a
    /// server-side dry run, `dryRun=All`): per resource, in order, `None` when the cluster
    /// would take it and the cluster's refusal otherwise. The default cannot check (a connector
    /// that only records desired state).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] if the cluster cannot be reached;
    /// [`ErrorKind::FailedPrecondition`] when the connector cannot dry-run.
    async fn dry_run(&self, batch: &Batch) -> Result<Vec<Option<String>>> {
        let _ = batch;
        Err(Error::failed_precondition(format!(
            "cluster {} cannot check objects: its connector only records what is deployed",
            self.cluster()
        )))
    }

    /// Deletes the resources of `batch`, in order. Resources that do not exist count as deleted.
    ///
    /// # Errors
    ///
    /// A [`BatchError`] saying how far the batch got and why it stopped.
    async fn delete(&self, batch: &Batch, propagation: Propagation) -> Result<(), BatchError>;

    /// The current object for `id` of `scope`, or `None` if it does not exist. A namespaced
    /// resource whose id has no namespace is looked up in the scope's namespace.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] if the cluster cannot be reached; other kinds if the request is
    /// rejected.
    async fn get(&self, scope: &Scope, id: &ResourceId) -> Result<Option<Value>>;

    /// Every object of `id`'s kind (its name is ignored) in the scope's namespace, or on the
    /// cluster for a cluster-scoped kind, as the cluster reports them. The default refuses:
    /// a connector that only records desired state has nothing live to list.
    ///
    /// # Errors
    ///
    /// As [`Connector::get`]; [`ErrorKind::FailedPrecondition`] when the connector cannot list.
    async fn list(&self, scope: &Scope, id: &ResourceId) -> Result<Vec<Value>> {
        let _ = (scope, id);
        Err(Error::failed_precondition(format!(
            "cluster {} cannot be read live: its connector only records what is deployed",
            self.cluster()
        )))
    }

    /// Checks that the cluster can be reached with the stored credentials.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] if it cannot be reached; other kinds if it refuses the
    /// credentials.
    async fn health(&self) -> Result<()>;

    /// When the cluster last answered one of this connector's requests successfully, for
    /// connectors that keep track (the default: `None`). Such an answer is as good as a
    /// [`Connector::health`] check, so the engine's liveness probes skip a cluster that
    /// answered within their interval: a fleet being deployed is probed by its own traffic.
    fn last_answer(&self) -> Option<tokio::time::Instant> {
        None
    }

    /// The readiness watches of this cluster, when the connector can watch: the engine then
    /// learns readiness from one watch per resource type (and namespace, for credentials limited
    /// to namespaces) instead of reading each object. `None` (the default) makes the engine poll
    /// [`Connector::observe`].
    fn readiness_source(&self) -> Option<std::sync::Arc<dyn ReadinessSource>> {
        None
    }

    /// What the cluster reports of the resources `ids` of `scope`, one [`Observation`] per id in
    /// order: the basis of readiness for connectors without a [`Connector::readiness_source`]. The default
    /// reads each object with [`Connector::get`] when [`Connector::observes_live_state`], and
    /// otherwise answers [`Observation::Unknown`] for all: a connector that only records desired
    /// state never claims an object is there, let alone ready.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Unavailable`] if the cluster (or the place its status is read from) cannot be
    /// reached; other kinds if the request is rejected.
    async fn observe(&self, scope: &Scope, ids: &[ResourceId]) -> Result<Vec<Observation>> {
        if !self.observes_live_state() {
            let why = "the connector does not observe the cluster";
            return Ok(ids
                .iter()
                .map(|_| Observation::Unknown(why.to_owned()))
                .collect());
        }
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(match self.get(scope, id).await? {
                Some(object) => Observation::Present(object),
                None => Observation::Absent,
            });
        }
        Ok(out)
    }
}

/// What a connector knows of one deployed object on its cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// The object as the cluster reports it (with `status`), to judge with
    /// [`crate::readiness::readiness`].
    Present(Value),
    /// The cluster reports that the object does not exist.
    Absent,
    /// Nothing is known yet (no report from the cluster), with the reason.
    Unknown(String),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn label_of(v: &Value, path: &[&str]) -> Option<String> {
        let mut cur = v;
        for p in path {
            cur = cur.get(p)?;
        }
        cur.get("metadata")?
            .get("labels")?
            .get(DEPLOYMENT_ID_LABEL)?
            .as_str()
            .map(str::to_owned)
    }

    #[test]
    fn identity_is_parsed_from_yaml() {
        let r = Resource::from_yaml(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: shop\n",
        )
        .unwrap();
        assert_eq!(r.id().group(), "apps");
        assert_eq!(r.id().version(), "v1");
        assert_eq!(r.id().namespace.as_deref(), Some("shop"));
        assert_eq!(r.id().emco_name(), "web+Deployment");
        assert_eq!(r.id().to_string(), "apps/v1 Deployment shop/web");

        let r = Resource::from_yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
            .unwrap();
        assert_eq!(r.id().group(), "");
        assert_eq!(r.id().version(), "v1");
        assert_eq!(r.id().namespace, None);
        assert_eq!(r.id().to_string(), "v1 Namespace shop");
    }

    #[test]
    fn identity_errors_name_the_field() {
        let e = Resource::from_yaml("kind: Deployment\nmetadata: {name: web}\n").unwrap_err();
        assert_eq!(
            (e.kind(), e.field()),
            (ErrorKind::InvalidArgument, Some("apiVersion"))
        );
        let e = Resource::from_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n").unwrap_err();
        assert_eq!(e.field(), Some("metadata.name"));
        let e = Resource::from_yaml("apiVersion: v1\nkind: ''\nmetadata: {name: a}\n").unwrap_err();
        assert_eq!(e.field(), Some("kind"));
        let e = Resource::from_yaml("apiVersion: v1\nkind: A\nmetadata: {name: a, namespace: 3}\n")
            .unwrap_err();
        assert_eq!(e.field(), Some("metadata.namespace"));
        assert_eq!(
            Resource::from_yaml("- a\n- b\n").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            Resource::from_yaml("a: [").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            Resource::from_yaml("").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }

    #[test]
    fn workloads_get_the_label_on_object_and_pod_template() {
        for kind in POD_TEMPLATE_KINDS {
            let mut m = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "w"},
                "spec": {"selector": {"matchLabels": {"app": "w"}},
                         "template": {"spec": {"containers": []}}}});
            label_for_deployment(&mut m, "42", "web").unwrap();
            assert_eq!(label_of(&m, &[]).as_deref(), Some("42-web"), "{kind}");
            assert_eq!(
                label_of(&m, &["spec", "template"]).as_deref(),
                Some("42-web"),
                "{kind}"
            );
            assert_eq!(
                m["spec"]["selector"],
                json!({"matchLabels": {"app": "w"}}),
                "selector kept"
            );
        }
    }

    #[test]
    fn existing_labels_are_kept() {
        let mut m = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "w", "labels": {"app": "w", DEPLOYMENT_ID_LABEL: "stale"}},
            "spec": {"template": {"metadata": {"labels": {"app": "w"}, "annotations": {"a": "b"}}}}});
        label_for_deployment(&mut m, "1", "a").unwrap();
        assert_eq!(
            m["metadata"]["labels"],
            json!({"app": "w", DEPLOYMENT_ID_LABEL: "1-a"})
        );
        assert_eq!(
            m["spec"]["template"]["metadata"]["labels"],
            json!({"app": "w", DEPLOYMENT_ID_LABEL: "1-a"})
        );
        assert_eq!(
            m["spec"]["template"]["metadata"]["annotations"],
            json!({"a": "b"})
        );
    }

    #[test]
    fn cronjob_labels_job_and_pod_templates() {
        let mut m = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "* * * * *",
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}});
        label_for_deployment(&mut m, "9", "cron").unwrap();
        assert_eq!(label_of(&m, &[]).as_deref(), Some("9-cron"));
        assert_eq!(
            label_of(&m, &["spec", "jobTemplate"]).as_deref(),
            Some("9-cron")
        );
        assert_eq!(
            label_of(&m, &["spec", "jobTemplate", "spec", "template"]).as_deref(),
            Some("9-cron")
        );
    }

    #[test]
    fn other_kinds_label_templates_only_with_metadata() {
        let mut custom = json!({"apiVersion": "x.io/v1", "kind": "Rollout", "metadata": {"name": "r"},
            "spec": {"template": {"metadata": {}, "spec": {}}}});
        label_for_deployment(&mut custom, "1", "a").unwrap();
        assert_eq!(
            label_of(&custom, &["spec", "template"]).as_deref(),
            Some("1-a")
        );

        // An OpenShift Template's `spec.template` is not a pod template; without metadata it is
        // left alone.
        let mut cm = json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"},
            "spec": {"template": "a string"}});
        label_for_deployment(&mut cm, "1", "a").unwrap();
        assert_eq!(cm["spec"]["template"], "a string");
        let mut svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
            "spec": {"template": {"spec": {}}}});
        label_for_deployment(&mut svc, "1", "a").unwrap();
        assert_eq!(svc["spec"]["template"], json!({"spec": {}}));
        assert_eq!(label_of(&svc, &[]).as_deref(), Some("1-a"));
    }

    /// Manifests travel as kubectl reads them (sigs.k8s.io/yaml over go-yaml v2): a chart's
    /// `defaultMode: 0744` is the integer 484 a real API server accepts, not a string.
    #[test]
    fn manifests_read_yaml_as_kubectl_does() {
        let m = Resource::from_yaml(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\nspec:\n  template:\n    \
             spec:\n      volumes:\n      - name: v\n        configMap:\n          name: c\n          \
             defaultMode: 0744\n      hostNetwork: yes\n",
        )
        .unwrap();
        let spec = &m.manifest()["spec"]["template"]["spec"];
        assert_eq!(spec["volumes"][0]["configMap"]["defaultMode"], json!(484));
        assert_eq!(spec["hostNetwork"], json!(true));
        let e = Resource::from_yaml("kind: [\n").unwrap_err();
        assert!(e.message().contains("yaml: line"), "{e}");
    }

    #[test]
    fn metadata_is_created_when_absent_or_null() {
        let mut m = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": null});
        label_for_deployment(&mut m, "1", "a").unwrap();
        assert_eq!(label_of(&m, &[]).as_deref(), Some("1-a"));
        let mut m = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"labels": null}});
        label_for_deployment(&mut m, "1", "a").unwrap();
        assert_eq!(label_of(&m, &[]).as_deref(), Some("1-a"));
    }

    #[test]
    fn bad_shapes_and_values_are_rejected() {
        let mut m = json!(["not", "an", "object"]);
        assert_eq!(
            label_for_deployment(&mut m, "1", "a").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        let mut m = json!({"kind": "ConfigMap", "metadata": {"labels": ["x"]}});
        let e = label_for_deployment(&mut m, "1", "a").unwrap_err();
        assert_eq!(e.field(), Some("metadata.labels"));
        let mut m =
            json!({"kind": "Deployment", "metadata": {}, "spec": {"template": {"metadata": 5}}});
        let e = label_for_deployment(&mut m, "1", "a").unwrap_err();
        assert_eq!(e.field(), Some("spec.template.metadata"));
        let mut m = json!({"kind": "ConfigMap"});
        for app in ["", "a b", "a-", &"x".repeat(62), "ü"] {
            let e = label_for_deployment(&mut m, "1", app).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{app:?}");
        }
        label_for_deployment(&mut m, "1", &"x".repeat(61)).unwrap();
    }

    #[test]
    fn batch_labels_every_manifest_and_names_the_failing_one() {
        let ok =
            Resource::from_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n").unwrap();
        let bad = Resource::from_value(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "labels": 1}}),
        )
        .unwrap();
        let batch = Batch::new(Scope::new("5", "app"))
            .with_resource(ok.clone())
            .with_resource(ok.clone());
        let labelled = batch.labelled_manifests().unwrap();
        assert!(
            labelled
                .iter()
                .all(|m| label_of(m, &[]).as_deref() == Some("5-app"))
        );
        assert_eq!(batch.resources[0], ok, "the batch itself is not modified");
        let e = batch.with_resource(bad).labelled_manifests().unwrap_err();
        assert_eq!(e.field(), Some("resources[2].metadata.labels"));
    }

    #[test]
    fn namespace_defaults() {
        let mut id = Resource::from_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
            .unwrap()
            .id()
            .clone();
        let scope = Scope::new("1", "a");
        assert_eq!(scope.namespace_for(&id), "default");
        let scope = scope.with_namespace("lc1");
        assert_eq!(scope.namespace_for(&id), "lc1");
        id.namespace = Some("own".to_owned());
        assert_eq!(scope.namespace_for(&id), "own");
        assert_eq!(scope.deployment_id(), "1-a");
    }

    #[test]
    fn connector_is_object_safe() {
        fn takes(_: Option<std::sync::Arc<dyn Connector>>) {}
        takes(None);
        let e = BatchError::at(2, Error::unavailable("down"));
        assert_eq!(HasKind::kind(&e), ErrorKind::Unavailable);
        assert_eq!(e.to_string(), "resource 2 of the batch: down");
    }
}
