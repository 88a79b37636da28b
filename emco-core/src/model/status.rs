//! The status query of a deployment intent group (`GET DIG/status`): its query parameters and
//! its response bodies, with EMCO's exact JSON field names.
//!
//! ```
//! use emco_core::model::status::{StatusMode, StatusOutput, StatusQuery, StatusType};
//!
//! let q = StatusQuery::from_pairs([("status", "deployed"), ("app", "collectd"), ("cluster", "p1+c1")]).unwrap();
//! assert_eq!(q.status, StatusType::Deployed);
//! assert_eq!(q.output, StatusOutput::All);
//! assert_eq!(q.mode, StatusMode::Full);
//! assert!(q.matches_app("collectd") && !q.matches_app("other"));
//! assert!(q.matches_cluster("p1", "c1"));
//!
//! let err = StatusQuery::from_pairs([("output", "everything")]).unwrap_err();
//! assert_eq!(err.to_string(), "Invalid query output"); // EMCO's words
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::lifecycle::StateInfo;
use crate::placement::ClusterRef;
use crate::validate::check_name;

/// Which status the query reports (`status=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StatusType {
    /// What the clusters report: resources ready or not (`status=ready`; the default of a
    /// logical cloud's query).
    #[default]
    Ready,
    /// What rsync did: resources applied, failed, ... (`status=deployed`).
    Deployed,
}

/// The deprecated `type=` answers, whose field names predate `status=`: a DIG's status query
/// gives `type=rsync` when neither parameter is given (EMCO's default until `type` goes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LegacyType {
    /// `type=rsync`: what rsync did, as `status`, `rsyncStatus` counts, per-resource
    /// `rsyncStatus` and the cluster's connectivity as `readyStatus`.
    Rsync,
    /// `type=cluster`: what the clusters report, as `status`, `readyStatus`, `clusterStatus`
    /// counts and per-resource `clusterStatus`.
    Cluster,
}

/// How much the query returns (`output=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StatusOutput {
    /// Only the counts and overall status; no `apps`.
    Summary,
    /// The counts and every resource's status (the default).
    #[default]
    All,
    /// Like `All`, plus each resource's `detail` as the cluster reports it.
    Detail,
}

/// Which kind of answer the query asks for. The list modes are given as bare parameters (`?apps`)
/// and take precedence in the order apps > clusters > resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StatusMode {
    /// The full status ([`DigStatus`]).
    #[default]
    Full,
    /// The names of the apps ([`AppsList`]).
    Apps,
    /// The clusters of each app ([`ClustersByApp`]), filtered by `app`.
    Clusters,
    /// The resources of each app and cluster ([`ResourcesByApp`]), filtered by `app` and `cluster`.
    Resources,
}

/// The parsed query parameters of `GET DIG/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusQuery {
    /// `instance=`: the AppContext id to report on; `None` means the current one.
    pub instance: Option<String>,
    /// `status=`: ready or deployed (see [`StatusQuery::for_dig`] for the defaults).
    pub status: StatusType,
    /// `output=`: summary, all (default) or detail.
    pub output: StatusOutput,
    /// Which answer to give.
    pub mode: StatusMode,
    /// `app=` filters (repeatable); empty means every app.
    pub apps: Vec<String>,
    /// `cluster=` filters (repeatable); empty means every cluster.
    pub clusters: Vec<ClusterRef>,
    /// `resource=` filters (repeatable); empty means every resource.
    pub resources: Vec<String>,
    /// The deprecated answer shape `type=` asked for (or a DIG query's default), if any.
    pub legacy: Option<LegacyType>,
}

impl StatusQuery {
    /// Parses the query parameters, given as decoded `(key, value)` pairs in URL order.
    ///
    /// As EMCO does: only the first `instance`, `status` and `output` count; `apps`, `clusters`
    /// and `resources` count by presence, whatever their value; unknown parameters are ignored.
    /// The legacy `type=rsync|cluster` is read as `status=deployed|ready` when `status` is absent.
    ///
    /// # Errors
    /// InvalidArgument worded as EMCO's (`Invalid query status`, `Invalid cluster query`, ...):
    /// an empty `instance`, a `status`, `type` or `output` outside its values, an `app` or
    /// `resource` that is not a valid name, a `cluster` that is not `provider+cluster`.
    pub fn from_pairs<I, K, V>(pairs: I) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::parse(pairs, None)
    }

    /// [`from_pairs`](Self::from_pairs) with a DIG status query's default: without `status`
    /// and `type`, EMCO's orchestrator answers as `type=rsync` (src/orchestrator/api/
    /// instantiation_handler.go `statusHandler`; the API document's "default value will be
    /// ready after type query is removed").
    ///
    /// # Errors
    /// As [`from_pairs`](Self::from_pairs).
    pub fn for_dig<I, K, V>(pairs: I) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        Self::parse(pairs, Some("rsync"))
    }

    fn parse<I, K, V>(pairs: I, default_type: Option<&str>) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut q = Self::default();
        let mut instance: Option<String> = None;
        let mut status: Option<String> = None;
        let mut legacy_type: Option<String> = None;
        let mut output: Option<String> = None;
        let (mut apps_mode, mut clusters_mode, mut resources_mode) = (false, false, false);
        for (key, value) in pairs {
            let value = value.as_ref();
            match key.as_ref() {
                "instance" => {
                    instance.get_or_insert_with(|| value.to_owned());
                }
                "status" => {
                    status.get_or_insert_with(|| value.to_owned());
                }
                "type" => {
                    legacy_type.get_or_insert_with(|| value.to_owned());
                }
                "output" => {
                    output.get_or_insert_with(|| value.to_owned());
                }
                "apps" => apps_mode = true,
                "clusters" => clusters_mode = true,
                "resources" => resources_mode = true,
                "app" => {
                    check_name("app", value).map_err(|_| query_error("Invalid app query"))?;
                    q.apps.push(value.to_owned());
                }
                "resource" => {
                    check_name("resource", value)
                        .map_err(|_| query_error("Invalid resources query"))?;
                    q.resources.push(value.to_owned());
                }
                "cluster" => q
                    .clusters
                    .push(parse_cluster(value).map_err(|_| query_error("Invalid cluster query"))?),
                _ => {}
            }
        }
        if let Some(instance) = instance {
            if instance.is_empty() {
                return Err(query_error("Invalid query instance"));
            }
            q.instance = Some(instance);
        }
        if legacy_type
            .as_deref()
            .is_some_and(|t| t != "rsync" && t != "cluster")
        {
            return Err(query_error("Invalid query type"));
        }
        (q.status, q.legacy) = match (status.as_deref(), legacy_type.as_deref().or(default_type)) {
            (Some("ready"), _) => (StatusType::Ready, None),
            (Some("deployed"), _) => (StatusType::Deployed, None),
            (Some(_), _) => return Err(query_error("Invalid query status")),
            (None, Some("cluster")) => (StatusType::Ready, Some(LegacyType::Cluster)),
            (None, Some(_)) => (StatusType::Deployed, Some(LegacyType::Rsync)),
            (None, None) => (StatusType::Ready, None),
        };
        q.output = match output.as_deref() {
            None | Some("all") => StatusOutput::All,
            Some("summary") => StatusOutput::Summary,
            Some("detail") => StatusOutput::Detail,
            Some(_) => return Err(query_error("Invalid query output")),
        };
        q.mode = if apps_mode {
            StatusMode::Apps
        } else if clusters_mode {
            StatusMode::Clusters
        } else if resources_mode {
            StatusMode::Resources
        } else {
            StatusMode::Full
        };
        Ok(q)
    }

    /// Whether the `app` filters let `app` through.
    #[must_use]
    pub fn matches_app(&self, app: &str) -> bool {
        self.apps.is_empty() || self.apps.iter().any(|a| a == app)
    }

    /// Whether the `cluster` filters let `provider+cluster` through.
    #[must_use]
    pub fn matches_cluster(&self, provider: &str, cluster: &str) -> bool {
        self.clusters.is_empty()
            || self
                .clusters
                .iter()
                .any(|c| c.provider() == provider && c.cluster() == cluster)
    }

    /// Whether the `resource` filters let the resource named `name` through.
    #[must_use]
    pub fn matches_resource(&self, name: &str) -> bool {
        self.resources.is_empty() || self.resources.iter().any(|r| r == name)
    }
}

/// A bad query parameter, worded as EMCO's status handler words it
/// (src/orchestrator/api/instantiation_handler.go `statusHandler`).
fn query_error(text: &'static str) -> Error {
    Error::invalid(text)
}

/// Parses `provider+cluster`, both valid names.
fn parse_cluster(value: &str) -> Result<ClusterRef> {
    let cluster: ClusterRef = value.parse().map_err(|e: Error| e.with_field("cluster"))?;
    check_name("cluster", cluster.provider())?;
    check_name("cluster", cluster.cluster())?;
    Ok(cluster)
}

/// Kubernetes group, version and kind, written `{"Group", "Version", "Kind"}` as EMCO does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Gvk {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// The overall statuses and resource counts every status answer carries (of a deployment
/// intent group, a cluster's networks, a CA certificate), flattened into it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusTotals {
    /// The AppContext status, in the deprecated `type=` answers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Overall deployed status (the AppContext status: `Instantiated`, ...), with `status=deployed`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deployed_status: String,
    /// Overall ready status (`Ready`, `NotReady`), with `status=ready`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready_status: String,
    /// Resources per rsync status, in the deprecated `type=rsync` answer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rsync_status: BTreeMap<String, i64>,
    /// Resources per cluster-reported status, in the deprecated `type=cluster` answer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cluster_status: BTreeMap<String, i64>,
    /// Resources per deployed status (`Applied`, `Failed`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deployed_counts: BTreeMap<String, i64>,
    /// Resources per ready status (`Ready`, `NotReady`, `NotPresent`, `Unknown`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ready_counts: BTreeMap<String, i64>,
}

/// The full answer of `GET DIG/status` ([`StatusMode::Full`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DigStatus {
    /// The project.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub project: String,
    /// The composite app.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub composite_app: String,
    /// The composite app version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub composite_app_version: String,
    /// The DIG's composite profile.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub composite_profile: String,
    /// The DIG's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The DIG's lifecycle record.
    #[serde(default)]
    pub states: StateInfo,
    /// The overall statuses and counts.
    #[serde(flatten)]
    pub totals: StatusTotals,
    /// The rollout of the context reported on, when it is rolled out in waves (ours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Box<crate::rollout::RolloutRun>>,
    /// What holds the context reported on from the clusters (ours: tac's pre-hooks): each hold
    /// with its state, and why it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<crate::lifecycle::hold::Hold>,
    /// Per app, cluster and resource; absent with `output=summary`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppStatus>,
}

/// The status of a cluster's networks (ncm's `ClusterStatusResult`): a deployment intent
/// group's status fields, with the one cluster of the network AppContext as `cluster` (`{}`
/// before anything is deployed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNetworkStatus {
    /// `provider+cluster`.
    #[serde(default)]
    pub name: String,
    /// The cluster's network lifecycle record.
    #[serde(default)]
    pub states: StateInfo,
    /// The overall statuses and counts.
    #[serde(flatten)]
    pub totals: StatusTotals,
    /// The cluster and its resources.
    #[serde(default)]
    pub cluster: ClusterStatus,
}

impl From<DigStatus> for ClusterNetworkStatus {
    fn from(d: DigStatus) -> Self {
        let cluster = d
            .apps
            .into_iter()
            .next()
            .and_then(|a| a.clusters.into_iter().next())
            .unwrap_or_default();
        Self {
            name: d.name,
            states: d.states,
            totals: d.totals,
            cluster,
        }
    }
}

/// The status of a CA certificate's enrollment or distribution (ca-certs' `CaCertStatus`): a
/// deployment intent group's status fields for its one app, its clusters as `clusters`, and
/// whose certificate it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaCertStatus {
    /// The cluster provider, for a provider's certificate.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_provider: String,
    /// The project, for a project's certificate.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub project: String,
    /// The certificate.
    #[serde(default)]
    pub name: String,
    /// The lifecycle record.
    #[serde(default)]
    pub states: StateInfo,
    /// The overall statuses and counts (never the legacy `type=` ones).
    #[serde(flatten)]
    pub totals: StatusTotals,
    /// The clusters and their resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterStatus>,
}

impl From<DigStatus> for CaCertStatus {
    fn from(d: DigStatus) -> Self {
        Self {
            name: d.name,
            states: d.states,
            totals: StatusTotals {
                status: String::new(),
                rsync_status: BTreeMap::new(),
                cluster_status: BTreeMap::new(),
                ..d.totals
            },
            clusters: d.apps.into_iter().flat_map(|a| a.clusters).collect(),
            ..Self::default()
        }
    }
}

impl DigStatus {
    /// Renames the fields of a `status=deployed` (for [`LegacyType::Rsync`]) or `status=ready`
    /// (for [`LegacyType::Cluster`]) answer to the deprecated `type=` answer's names.
    #[must_use]
    pub fn into_legacy(mut self, legacy: LegacyType) -> Self {
        let t = &mut self.totals;
        t.status = std::mem::take(&mut t.deployed_status);
        match legacy {
            LegacyType::Rsync => t.rsync_status = std::mem::take(&mut t.deployed_counts),
            LegacyType::Cluster => t.cluster_status = std::mem::take(&mut t.ready_counts),
        }
        for c in self.apps.iter_mut().flat_map(|a| a.clusters.iter_mut()) {
            c.ready_status = std::mem::take(&mut c.connectivity);
            for r in &mut c.resources {
                match legacy {
                    LegacyType::Rsync => r.rsync_status = std::mem::take(&mut r.deployed_status),
                    LegacyType::Cluster => r.cluster_status = std::mem::take(&mut r.ready_status),
                }
            }
        }
        self
    }
}

/// One app of [`DigStatus::apps`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppStatus {
    /// The app.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its clusters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterStatus>,
}

/// One cluster of [`AppStatus::clusters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// The cluster provider.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_provider: String,
    /// The cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The connectivity, under its name in the deprecated `type=` answers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready_status: String,
    /// Whether rsync reaches the cluster (`Available`, `Retrying`, `Unknown`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub connectivity: String,
    /// While rsync retries the cluster: why, as the resource retried most says (see
    /// [`ClusterStatus::explain_retry`]).
    #[serde(flatten)]
    pub why: Why,
    /// Its resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
}

impl ClusterStatus {
    /// While the cluster's connectivity is `Retrying`, gives it the reason, message, attempts
    /// and next retry of its resource retried most, so a reader sees why at the cluster's level.
    pub fn explain_retry(&mut self) {
        if self.connectivity != "Retrying" {
            return;
        }
        let worst = self
            .resources
            .iter()
            .filter(|r| r.why.reason.is_some())
            .max_by_key(|r| r.why.attempts.unwrap_or(0));
        if let Some(r) = worst {
            self.why.clone_from(&r.why);
        }
    }
}

/// Why a resource, or a cluster, is not done: the fields `reason`, `message`, `attempts` and
/// `nextRetry` beside the others of [`ResourceStatus`] and [`ClusterStatus`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Why {
    /// Why it failed or is retrying, as one CamelCase word (`Unreachable`, `NotReady`,
    /// `DependencyFailed`, `Stopped`, or the kind of error the cluster answered); absent once it
    /// is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The last error's text, beside `reason`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// While it retries: the tries so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// While it retries: when the next try is due (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_retry: Option<String>,
}

/// One resource of [`ClusterStatus::resources`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    /// Group, version and kind.
    #[serde(default, rename = "GVK")]
    pub gvk: Gvk,
    /// The resource's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's status as the cluster reports it, with `output=detail`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
    /// The deployed status, under its name in the deprecated `type=rsync` answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rsync_status: String,
    /// The ready status, under its name in the deprecated `type=cluster` answer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_status: String,
    /// Deployed status (`Pending`, `Applied`, `Failed`, `Retrying`, `Deleted`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub deployed_status: String,
    /// Ready status (`Ready`, `NotReady`, `NotPresent`, or `Unknown` while its cluster does not
    /// answer).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ready_status: String,
    /// While the ready status is `Unknown`: the one seen last.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_ready_status: String,
    /// While the ready status is `Unknown`: when the cluster answered last (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_seen: String,
    /// What the cluster warned about when it was applied (a field its schema lacks, dropped as
    /// `kubectl apply` drops it); absent when there was nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Fields emco-rs applied that another client changed since (`status=ready` answers);
    /// absent when there is no drift.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<DriftedField>,
    /// How many times in a row a `correct` drift policy applied it again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drift_corrections: u32,
    /// Why emco-rs stopped correcting its drift (another controller keeps changing it back).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub drift_gave_up: String,
    /// Why it failed or is retrying, while it does.
    #[serde(flatten)]
    pub why: Why,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference.
fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One field emco-rs applied to an object that another client changed or removed since: drift,
/// read from the object's field ownership (`metadata.managedFields`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedField {
    /// The field's path: `spec.replicas`, `data.index.html`,
    /// `spec.template.spec.containers[name=server].image`.
    pub path: String,
    /// The field manager that changed it (`kubectl-edit`, `kube-controller-manager`, ...);
    /// `unknown` when no client owns it and none wrote after emco-rs.
    pub manager: String,
    /// When that manager last wrote the object (RFC 3339), when the cluster says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Whether the field is gone (removed) rather than changed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

/// The answer of `?apps` ([`StatusMode::Apps`]): `{name, apps:[...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppsList {
    /// The DIG's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The app names.
    #[serde(default)]
    pub apps: Vec<String>,
}

/// The answer of `?clusters` ([`StatusMode::Clusters`]): `{name, clustersByApp:[...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClustersByApp {
    /// The DIG's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Per app.
    #[serde(default)]
    pub clusters_by_app: Vec<ClustersOfApp>,
}

/// One app of [`ClustersByApp`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClustersOfApp {
    /// The app.
    #[serde(default)]
    pub app: String,
    /// Its clusters.
    #[serde(default)]
    pub clusters: Vec<ClusterEntry>,
}

/// `{clusterProvider, cluster}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEntry {
    /// The cluster provider.
    #[serde(default)]
    pub cluster_provider: String,
    /// The cluster.
    #[serde(default)]
    pub cluster: String,
}

/// The answer of `?resources` ([`StatusMode::Resources`]): `{name, resourcesByApp:[...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesByApp {
    /// The DIG's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Per app and cluster.
    #[serde(default)]
    pub resources_by_app: Vec<ResourcesOfApp>,
}

/// One app and cluster of [`ResourcesByApp`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesOfApp {
    /// The app.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
    /// The cluster provider.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_provider: String,
    /// The cluster.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The resources.
    #[serde(default)]
    pub resources: Vec<ResourceEntry>,
}

/// `{name, GVK}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceEntry {
    /// The resource's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Group, version and kind.
    #[serde(default, rename = "GVK")]
    pub gvk: Gvk,
}

/// Any answer of `GET DIG/status`, as selected by [`StatusQuery::mode`]; serializes as the inner
/// body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum StatusResponse {
    /// [`StatusMode::Full`] (boxed: it is much larger than the list answers).
    Full(Box<DigStatus>),
    /// [`StatusMode::Apps`].
    Apps(AppsList),
    /// [`StatusMode::Clusters`].
    Clusters(ClustersByApp),
    /// [`StatusMode::Resources`].
    Resources(ResourcesByApp),
}

impl StatusResponse {
    /// The full status, from the answer of a [`StatusMode::Full`] query.
    ///
    /// # Errors
    /// Internal for a list answer: the query asked for one.
    pub fn into_full(self) -> Result<DigStatus> {
        match self {
            Self::Full(status) => Ok(*status),
            _ => Err(Error::internal("a full status query gave a list answer")),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ErrorKind;

    #[test]
    fn defaults() {
        let q = StatusQuery::from_pairs(Vec::<(String, String)>::new()).unwrap();
        assert_eq!(q, StatusQuery::default());
        assert_eq!(
            (q.status, q.output, q.mode),
            (StatusType::Ready, StatusOutput::All, StatusMode::Full)
        );
        assert!(q.instance.is_none());
        assert!(q.matches_app("x") && q.matches_cluster("p", "c") && q.matches_resource("r"));
    }

    #[test]
    fn values_and_filters() {
        let q = StatusQuery::from_pairs([
            ("instance", "2541224287352718787"),
            ("instance", "ignored"),
            ("status", "deployed"),
            ("output", "detail"),
            ("app", "a1"),
            ("app", "a2"),
            ("cluster", "provider1+cluster1"),
            ("resource", "collectd-config"),
            ("unknown", "x"),
        ])
        .unwrap();
        assert_eq!(q.instance.as_deref(), Some("2541224287352718787"));
        assert_eq!(q.status, StatusType::Deployed);
        assert_eq!(q.output, StatusOutput::Detail);
        assert_eq!(q.apps, vec!["a1", "a2"]);
        assert_eq!(q.clusters, vec![ClusterRef::new("provider1", "cluster1")]);
        assert!(q.matches_app("a2") && !q.matches_app("a3"));
        assert!(
            q.matches_cluster("provider1", "cluster1")
                && !q.matches_cluster("provider1", "cluster2")
        );
        assert!(q.matches_resource("collectd-config") && !q.matches_resource("other"));
        let s = StatusQuery::from_pairs([("output", "summary"), ("status", "ready")]).unwrap();
        assert_eq!(
            (s.output, s.status),
            (StatusOutput::Summary, StatusType::Ready)
        );
    }

    #[test]
    fn list_mode_precedence() {
        let mode =
            |pairs: &[(&str, &str)]| StatusQuery::from_pairs(pairs.iter().copied()).unwrap().mode;
        assert_eq!(
            mode(&[("resources", ""), ("clusters", ""), ("apps", "")]),
            StatusMode::Apps
        );
        assert_eq!(
            mode(&[("resources", ""), ("clusters", "yes")]),
            StatusMode::Clusters
        );
        assert_eq!(mode(&[("resources", "")]), StatusMode::Resources);
        assert_eq!(mode(&[("app", "a")]), StatusMode::Full);
    }

    #[test]
    fn legacy_type_parameter() {
        let q = StatusQuery::from_pairs([("type", "rsync")]).unwrap();
        assert_eq!(
            (q.status, q.legacy),
            (StatusType::Deployed, Some(LegacyType::Rsync))
        );
        let q = StatusQuery::from_pairs([("type", "cluster")]).unwrap();
        assert_eq!(
            (q.status, q.legacy),
            (StatusType::Ready, Some(LegacyType::Cluster))
        );
        let q = StatusQuery::from_pairs([("type", "rsync"), ("status", "ready")]).unwrap();
        assert_eq!((q.status, q.legacy), (StatusType::Ready, None));
        // A DIG's query defaults to type=rsync (instantiation_handler.go statusHandler).
        let q = StatusQuery::for_dig(Vec::<(String, String)>::new()).unwrap();
        assert_eq!(
            (q.status, q.legacy),
            (StatusType::Deployed, Some(LegacyType::Rsync))
        );
        let q = StatusQuery::for_dig([("status", "ready")]).unwrap();
        assert_eq!((q.status, q.legacy), (StatusType::Ready, None));
    }

    /// The deprecated answers as EMCO's status helper names them
    /// (src/orchestrator/pkg/status/status_helper.go `prepareStatusResult`).
    #[test]
    fn legacy_answers_rename_the_fields() {
        let deployed = DigStatus {
            name: "dig".into(),
            totals: StatusTotals {
                deployed_status: "Instantiated".into(),
                deployed_counts: BTreeMap::from([("Applied".to_owned(), 1)]),
                ..StatusTotals::default()
            },
            apps: vec![AppStatus {
                name: "a".into(),
                clusters: vec![ClusterStatus {
                    cluster_provider: "p".into(),
                    cluster: "c".into(),
                    connectivity: "Available".into(),
                    resources: vec![ResourceStatus {
                        name: "r".into(),
                        deployed_status: "Applied".into(),
                        ..ResourceStatus::default()
                    }],
                    ..ClusterStatus::default()
                }],
            }],
            ..DigStatus::default()
        };
        let body = serde_json::to_value(deployed.into_legacy(LegacyType::Rsync)).unwrap();
        assert_eq!(
            body,
            json!({"name": "dig", "states": {"statusctxid": "", "actions": []},
                "status": "Instantiated", "rsyncStatus": {"Applied": 1},
                "apps": [{"name": "a", "clusters": [{"clusterProvider": "p", "cluster": "c",
                    "readyStatus": "Available", "resources": [{"GVK": {"Group": "", "Version": "", "Kind": ""},
                        "name": "r", "rsyncStatus": "Applied"}]}]}]})
        );
        let ready = DigStatus {
            totals: StatusTotals {
                deployed_status: "Instantiated".into(),
                ready_status: "Ready".into(),
                ready_counts: BTreeMap::from([("Ready".to_owned(), 2)]),
                ..StatusTotals::default()
            },
            ..DigStatus::default()
        };
        let body = serde_json::to_value(ready.into_legacy(LegacyType::Cluster)).unwrap();
        assert_eq!(body["status"], "Instantiated");
        assert_eq!(body["readyStatus"], "Ready");
        assert_eq!(body["clusterStatus"], json!({"Ready": 2}));
        assert!(body.get("readyCounts").is_none() && body.get("deployedStatus").is_none());
    }

    /// EMCO's texts for bad parameters (src/orchestrator/api/instantiation_handler.go).
    #[test]
    fn errors_are_worded_as_emco() {
        for (pairs, text) in [
            (vec![("instance", "")], "Invalid query instance"),
            (vec![("status", "up")], "Invalid query status"),
            (vec![("type", "x")], "Invalid query type"),
            (vec![("output", "full")], "Invalid query output"),
            (vec![("app", "bad app")], "Invalid app query"),
            (vec![("resource", "-r")], "Invalid resources query"),
            (vec![("cluster", "nocluster")], "Invalid cluster query"),
            (vec![("cluster", "a+b+c")], "Invalid cluster query"),
            (vec![("cluster", "a+")], "Invalid cluster query"),
            (vec![("cluster", "a b+c")], "Invalid cluster query"),
        ] {
            let err = StatusQuery::from_pairs(pairs.clone()).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{pairs:?}");
            assert_eq!(err.to_string(), text, "{pairs:?}");
        }
    }

    #[test]
    fn full_status_field_names() {
        let body = json!({
            "project": "proj1",
            "compositeApp": "ca",
            "compositeAppVersion": "v1",
            "compositeProfile": "cp",
            "name": "dig",
            "states": {"statusctxid": "123", "actions": [
                {"state": "Created", "instance": "", "time": "2026-11-21T10:00:00Z", "revision": 0},
                {"state": "Instantiated", "instance": "123", "time": "2026-11-21T10:01:00Z", "revision": 1}
            ]},
            "deployedStatus": "Instantiated",
            "deployedCounts": {"Applied": 3},
            "apps": [{"name": "collectd", "clusters": [{
                "clusterProvider": "provider1", "cluster": "cluster1", "connectivity": "Available",
                "resources": [{"GVK": {"Group": "apps", "Version": "v1", "Kind": "DaemonSet"},
                               "name": "collectd", "deployedStatus": "Applied"},
                              {"GVK": {"Group": "", "Version": "v1", "Kind": "ConfigMap"},
                               "name": "collectd-config", "deployedStatus": "Applied", "detail": {"data": 1}}]
            }]}]
        });
        let s: DigStatus = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(s.apps[0].clusters[0].resources[0].gvk.kind, "DaemonSet");
        assert_eq!(s.states.actions[1].revision, 1);
        assert_eq!(serde_json::to_value(&s).unwrap(), body);
        let summary = DigStatus {
            apps: Vec::new(),
            ..s
        };
        let json = serde_json::to_value(StatusResponse::Full(Box::new(summary))).unwrap();
        assert!(json.get("apps").is_none());
        assert!(json.get("readyStatus").is_none());
        assert_eq!(json["states"]["statusctxid"], "123");
    }

    #[test]
    fn list_answers_field_names() {
        let apps = StatusResponse::Apps(AppsList {
            name: "dig".into(),
            apps: vec!["a1".into()],
        });
        assert_eq!(
            serde_json::to_value(apps).unwrap(),
            json!({"name": "dig", "apps": ["a1"]})
        );
        let clusters = ClustersByApp {
            name: "dig".into(),
            clusters_by_app: vec![ClustersOfApp {
                app: "a1".into(),
                clusters: vec![ClusterEntry {
                    cluster_provider: "p".into(),
                    cluster: "c".into(),
                }],
            }],
        };
        let json = serde_json::to_value(StatusResponse::Clusters(clusters.clone())).unwrap();
        assert_eq!(
            json,
            json!({"name": "dig", "clustersByApp": [{"app": "a1", "clusters": [{"clusterProvider": "p", "cluster": "c"}]}]})
        );
        assert_eq!(
            serde_json::from_value::<ClustersByApp>(json).unwrap(),
            clusters
        );
        let res = ResourcesByApp {
            name: "dig".into(),
            resources_by_app: vec![ResourcesOfApp {
                app: "a1".into(),
                cluster_provider: "p".into(),
                cluster: "c".into(),
                resources: vec![ResourceEntry {
                    name: "r".into(),
                    gvk: Gvk {
                        group: "apps".into(),
                        version: "v1".into(),
                        kind: "Deployment".into(),
                    },
                }],
            }],
        };
        assert_eq!(
            serde_json::to_value(StatusResponse::Resources(res)).unwrap(),
            json!({"name": "dig", "resourcesByApp": [{"app": "a1", "clusterProvider": "p", "cluster": "c",
                   "resources": [{"name": "r", "GVK": {"Group": "apps", "Version": "v1", "Kind": "Deployment"}}]}]})
        );
    }

    #[test]
    fn a_retrying_cluster_says_why_as_its_most_retried_resource() {
        let retrying = |name: &str, attempts: u32| ResourceStatus {
            name: name.into(),
            deployed_status: "Retrying".into(),
            why: Why {
                reason: Some("Unreachable".into()),
                message: Some(format!("refused ({name})")),
                attempts: Some(attempts),
                next_retry: Some("2026-11-26T18:00:00Z".into()),
            },
            ..ResourceStatus::default()
        };
        let mut c = ClusterStatus {
            connectivity: "Retrying".into(),
            resources: vec![
                retrying("a", 2),
                retrying("b", 5),
                ResourceStatus::default(),
            ],
            ..ClusterStatus::default()
        };
        c.explain_retry();
        assert_eq!(
            (
                c.why.reason.as_deref(),
                c.why.message.as_deref(),
                c.why.attempts
            ),
            (Some("Unreachable"), Some("refused (b)"), Some(5))
        );
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["nextRetry"], "2026-11-26T18:00:00Z");
        // A reachable cluster has nothing to explain, whatever its resources say.
        let mut fine = ClusterStatus {
            connectivity: "Available".into(),
            resources: vec![retrying("a", 1)],
            ..ClusterStatus::default()
        };
        fine.explain_retry();
        assert!(fine.why.reason.is_none());
        assert!(serde_json::to_value(&fine).unwrap().get("reason").is_none());
    }
}
