//! Progressive delivery: the rollout policy of a deployment intent group, the waves it makes of
//! the placed clusters, and the verdict of a wave's gate. Pure: the orchestrator runs the waves.
//!
//! A policy (`.../deployment-intent-groups/{dig}/rollout-policies`, at most one per group) lists
//! waves, each chosen among the placed clusters that no earlier wave took: by name, by labels
//! (clusters with every label given), by count or by percentage of all placed clusters (rounded
//! up), or the rest. Clusters left over after the last wave form a final wave. Between waves
//! the gates must pass: every resource of the wave's clusters ready within `progressDeadline`
//! and still ready after `bakeTime` (at most `maxFailures` clusters may fail), custom health for
//! kinds the readiness judge cannot tell, and a person's approval when asked for.
//!
//! ```
//! use emco_core::rollout::{RolloutPolicy, PlacedCluster, plan_waves};
//!
//! let policy: RolloutPolicy = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "canary"},
//!     "spec": {"waves": [{"count": 1}, {"percent": 25}, {}]}
//! })).unwrap();
//! let placed: Vec<PlacedCluster> = (1..=8)
//!     .map(|i| PlacedCluster::new(format!("p+c{i}"), Vec::<String>::new()))
//!     .collect();
//! let waves = plan_waves(&policy.spec, &placed).unwrap();
//! let sizes: Vec<usize> = waves.iter().map(|w| w.clusters.len()).collect();
//! assert_eq!(sizes, [1, 2, 5]);
//! ```

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::validate::check_name;
use crate::{ContextId, Error, Metadata, Result, Validate};

/// A rollout policy: `{metadata, spec}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(metadata, check = |p: &Self| p.spec.validate())]
pub struct RolloutPolicy {
    /// Its name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What it says.
    #[serde(default)]
    pub spec: RolloutSpec,
}

/// The `spec` of a [`RolloutPolicy`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// The waves, in order.
    #[serde(default)]
    pub waves: Vec<WaveSpec>,
    /// What must hold before the next wave.
    #[serde(default)]
    pub gates: Gates,
    /// What a failed wave leads to.
    #[serde(default)]
    pub on_failure: OnFailure,
    /// What becomes of a wave's clusters that do not answer.
    #[serde(default)]
    pub unreachable: UnreachablePolicy,
}

/// One wave: at most one of `clusters`, `labels`, `count` and `percent`; none takes the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveSpec {
    /// A name to show (default `wave-N`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// These clusters, `provider+cluster` (or `cluster` when the name is unique).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<String>,
    /// The clusters with every one of these labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// This many clusters (in name order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// This share of all placed clusters, rounded up (1 to 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<u32>,
}

impl WaveSpec {
    fn is_rest(&self) -> bool {
        self.clusters.is_empty()
            && self.labels.is_empty()
            && self.count.is_none()
            && self.percent.is_none()
    }
}

/// The gates between waves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gates {
    /// How long a wave's resources may take to be ready (a Go duration, default `10m`).
    #[serde(default = "default_deadline")]
    pub progress_deadline: String,
    /// How long they must then stay ready (a Go duration, default `0s`).
    #[serde(default = "zero")]
    pub bake_time: String,
    /// How many of a wave's clusters may fail without failing it: a count or `N%` of the wave.
    #[serde(default, with = "count_or_percent")]
    pub max_failures: CountOrPercent,
    /// Whether each wave after the first waits for a person's approval.
    #[serde(default)]
    pub approval: bool,
    /// Health of kinds the readiness judge cannot tell (custom resources).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_health: Vec<CustomHealth>,
}

impl Default for Gates {
    fn default() -> Self {
        Self {
            progress_deadline: default_deadline(),
            bake_time: zero(),
            max_failures: CountOrPercent::Count(0),
            approval: false,
            custom_health: Vec::new(),
        }
    }
}

fn default_deadline() -> String {
    "10m".to_owned()
}

fn zero() -> String {
    "0s".to_owned()
}

impl Gates {
    /// `progressDeadline` as a duration.
    ///
    /// # Errors
    /// InvalidArgument naming the field when it is not a positive Go duration.
    pub fn progress_deadline(&self) -> Result<Duration> {
        duration(
            "spec.gates.progressDeadline",
            &self.progress_deadline,
            false,
        )
    }

    /// `bakeTime` as a duration.
    ///
    /// # Errors
    /// InvalidArgument naming the field when it is not a Go duration of zero or more.
    pub fn bake_time(&self) -> Result<Duration> {
        duration("spec.gates.bakeTime", &self.bake_time, true)
    }
}

/// A Go duration `text` of field `field`, positive (or zero when `zero_ok`).
pub(crate) fn duration(field: &str, text: &str, zero_ok: bool) -> Result<Duration> {
    let nanos = emco_go::time::parse_duration(text)
        .map_err(|e| Error::invalid(e.to_string()).with_field(field))?;
    match u64::try_from(nanos) {
        Ok(0) if !zero_ok => Err(Error::invalid("must be more than zero").with_field(field)),
        Ok(n) => Ok(Duration::from_nanos(n)),
        Err(_) => {
            Err(Error::invalid(format!("must not be negative, not {text}")).with_field(field))
        }
    }
}

/// A count, or a percentage (`"10%"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountOrPercent {
    /// So many.
    Count(u32),
    /// This share, rounded down.
    Percent(u32),
}

impl Default for CountOrPercent {
    fn default() -> Self {
        Self::Count(0)
    }
}

impl CountOrPercent {
    /// How many of `total`.
    #[must_use]
    pub fn of(self, total: usize) -> usize {
        match self {
            Self::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            Self::Percent(p) => total * usize::try_from(p).unwrap_or(100) / 100,
        }
    }
}

/// `maxFailures` as a number or a `"N%"` string, written back as given.
mod count_or_percent {
    use serde::{Deserialize, Deserializer, Serializer};

    use super::CountOrPercent;

    pub(super) fn serialize<S: Serializer>(v: &CountOrPercent, s: S) -> Result<S::Ok, S::Error> {
        match v {
            CountOrPercent::Count(n) => s.serialize_u32(*n),
            CountOrPercent::Percent(p) => s.serialize_str(&format!("{p}%")),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<CountOrPercent, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        let bad = |what: &str| {
            serde::de::Error::custom(format!(
                "maxFailures must be a count or a percentage such as \"10%\", not {what}"
            ))
        };
        match Raw::deserialize(d)? {
            Raw::Number(n) => u32::try_from(n)
                .map(CountOrPercent::Count)
                .map_err(|_| bad(&n.to_string())),
            Raw::Text(t) => {
                let trimmed = t.trim();
                match trimmed.strip_suffix('%') {
                    Some(p) => p
                        .trim()
                        .parse()
                        .map(CountOrPercent::Percent)
                        .map_err(|_| bad(&format!("{t:?}"))),
                    None => trimmed
                        .parse()
                        .map(CountOrPercent::Count)
                        .map_err(|_| bad(&format!("{t:?}"))),
                }
            }
        }
    }
}

/// Health of one kind the readiness judge cannot tell: a condition or a field's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomHealth {
    /// The kind (`Certificate`).
    #[serde(default)]
    pub kind: String,
    /// Its `apiVersion` when the kind alone is ambiguous.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Healthy when `status.conditions` has this type with this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<ConditionCheck>,
    /// Healthy when the field at this dotted path has this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<FieldCheck>,
}

/// `{type, status}` of a condition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionCheck {
    /// The condition type (`Ready`).
    #[serde(default, rename = "type")]
    pub kind: String,
    /// Its status (`True`).
    #[serde(default)]
    pub status: String,
}

/// `{path, value}` of a field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldCheck {
    /// A dotted path from the object's root (`status.phase`).
    #[serde(default)]
    pub path: String,
    /// The value it must have, compared as text.
    #[serde(default)]
    pub value: String,
}

impl CustomHealth {
    /// Whether this check is about `kind` of `api_version`.
    #[must_use]
    pub fn applies_to(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && (self.api_version.is_empty() || self.api_version == api_version)
    }

    /// Whether the live object `obj` passes the check; the reason when it does not.
    ///
    /// # Errors
    /// Why it does not pass.
    pub fn judge(&self, obj: &serde_json::Value) -> std::result::Result<(), String> {
        if let Some(c) = &self.condition {
            let found = obj
                .pointer("/status/conditions")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .find(|x| x.get("type").and_then(serde_json::Value::as_str) == Some(&c.kind));
            let status = found
                .and_then(|x| x.get("status"))
                .and_then(serde_json::Value::as_str);
            if status != Some(c.status.as_str()) {
                return Err(format!(
                    "condition {} is {}, not {}",
                    c.kind,
                    status.unwrap_or("absent"),
                    c.status
                ));
            }
        }
        if let Some(f) = &self.field {
            let pointer: String = f.path.split('.').map(|p| format!("/{p}")).collect();
            let value = obj.pointer(&pointer).map(|v| match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            if value.as_deref() != Some(f.value.as_str()) {
                return Err(format!(
                    "{} is {}, not {}",
                    f.path,
                    value.as_deref().unwrap_or("absent"),
                    f.value
                ));
            }
        }
        Ok(())
    }
}

/// What a failed wave leads to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OnFailure {
    /// The rollout waits for a person (resume retries the wave, abort rolls back).
    #[default]
    Pause,
    /// Every cluster already changed goes back to the revision it had (or loses the app, for a
    /// first instantiate), without a person.
    Rollback,
}

/// What becomes of a wave's clusters that do not answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UnreachablePolicy {
    /// The wave waits for them, until its progress deadline.
    #[default]
    Wait,
    /// Left out of the wave: they get the revision the rollout ends on once they answer.
    Skip,
    /// They count as failed clusters of the wave.
    Fail,
}

impl Validate for RolloutSpec {
    fn validate(&self) -> Result<()> {
        if self.waves.is_empty() {
            return Err(
                Error::invalid("a rollout needs at least one wave").with_field("spec.waves")
            );
        }
        let mut names = HashSet::new();
        let mut taken: HashSet<&str> = HashSet::new();
        for (i, w) in self.waves.iter().enumerate() {
            let field = |f: &str| format!("spec.waves[{i}]{f}");
            let given = [
                !w.clusters.is_empty(),
                !w.labels.is_empty(),
                w.count.is_some(),
                w.percent.is_some(),
            ];
            if given.iter().filter(|g| **g).count() > 1 {
                return Err(Error::invalid(
                    "a wave chooses its clusters one way: clusters, labels, count or percent",
                )
                .with_field(field("")));
            }
            if w.is_rest() && i + 1 < self.waves.len() {
                return Err(Error::invalid(
                    "a wave without clusters, labels, count or percent takes the rest: only the last may",
                )
                .with_field(field("")));
            }
            if !w.name.is_empty() {
                check_name(&field(".name"), &w.name)?;
                if !names.insert(w.name.as_str()) {
                    return Err(Error::invalid(format!("wave {} is named twice", w.name))
                        .with_field(field(".name")));
                }
            }
            for c in &w.clusters {
                let (provider, cluster) = crate::ClusterRef::split(c).unwrap_or(("", c));
                if !provider.is_empty() {
                    check_name(&field(".clusters"), provider)?;
                }
                check_name(&field(".clusters"), cluster)?;
                if !taken.insert(c) {
                    return Err(Error::invalid(format!("cluster {c} is in two waves"))
                        .with_field(field(".clusters")));
                }
            }
            for l in &w.labels {
                check_name(&field(".labels"), l)?;
            }
            if w.count == Some(0) {
                return Err(Error::invalid("must be at least 1").with_field(field(".count")));
            }
            if let Some(p) = w.percent
                && !(1..=100).contains(&p)
            {
                return Err(Error::invalid(format!("must be from 1 to 100, not {p}"))
                    .with_field(field(".percent")));
            }
        }
        self.gates.progress_deadline()?;
        self.gates.bake_time()?;
        if let CountOrPercent::Percent(p) = self.gates.max_failures
            && p > 100
        {
            return Err(Error::invalid(format!("must be from 0% to 100%, not {p}%"))
                .with_field("spec.gates.maxFailures"));
        }
        for (i, h) in self.gates.custom_health.iter().enumerate() {
            let field = |f: &str| format!("spec.gates.customHealth[{i}]{f}");
            if h.kind.is_empty() {
                return Err(Error::invalid("is required").with_field(field(".kind")));
            }
            match (&h.condition, &h.field) {
                (None, None) => {
                    return Err(Error::invalid("give a condition or a field to check")
                        .with_field(field("")));
                }
                (Some(c), _) if c.kind.is_empty() || c.status.is_empty() => {
                    return Err(
                        Error::invalid("needs a type and a status").with_field(field(".condition"))
                    );
                }
                (_, Some(f)) if f.path.is_empty() || f.path.split('.').any(str::is_empty) => {
                    return Err(Error::invalid("needs a dotted path such as status.phase")
                        .with_field(field(".field.path")));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A placed cluster as the waves see it: `provider+cluster` and its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedCluster {
    /// `provider+cluster`.
    pub id: String,
    /// Its labels.
    pub labels: BTreeSet<String>,
}

impl PlacedCluster {
    /// Cluster `id` (`provider+cluster`) with `labels`.
    pub fn new(id: impl Into<String>, labels: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            id: id.into(),
            labels: labels.into_iter().map(Into::into).collect(),
        }
    }

    fn name(&self) -> &str {
        crate::ClusterRef::split(&self.id).map_or(self.id.as_str(), |(_, c)| c)
    }
}

/// One planned wave: its name and clusters (`provider+cluster`, in name order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedWave {
    /// The wave's name.
    pub name: String,
    /// Its clusters.
    pub clusters: Vec<String>,
}

/// The waves of `spec` over the clusters `placed`: each takes from the clusters no earlier wave
/// took; what is left after the last one is a final wave (`rest`). Waves left empty because
/// earlier ones took everything are dropped.
///
/// # Errors
/// InvalidArgument naming the wave when it names a cluster that is not placed, or when its
/// labels or clusters match no placed cluster left to it.
pub fn plan_waves(spec: &RolloutSpec, placed: &[PlacedCluster]) -> Result<Vec<PlannedWave>> {
    let mut left: Vec<&PlacedCluster> = placed.iter().collect();
    left.sort_by(|a, b| a.id.cmp(&b.id));
    left.dedup_by(|a, b| a.id == b.id);
    let total = left.len();
    let mut waves = Vec::new();
    for (i, w) in spec.waves.iter().enumerate() {
        let field = format!("spec.waves[{i}]");
        let name = if w.name.is_empty() {
            format!("wave-{}", i + 1)
        } else {
            w.name.clone()
        };
        let chosen: Vec<usize> = if !w.clusters.is_empty() {
            let mut chosen = Vec::new();
            for c in &w.clusters {
                let matches: Vec<usize> = left
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| {
                        if c.contains('+') {
                            p.id == *c
                        } else {
                            p.name() == c
                        }
                    })
                    .map(|(i, _)| i)
                    .collect();
                match matches.as_slice() {
                    [] => {
                        return Err(Error::invalid(format!(
                            "cluster {c} of wave {name} is not placed (or an earlier wave took it)"
                        ))
                        .with_field(format!("{field}.clusters")));
                    }
                    [one] => chosen.push(*one),
                    _ => {
                        return Err(Error::invalid(format!(
                            "cluster {c} of wave {name} is placed from several providers: name it provider+cluster"
                        ))
                        .with_field(format!("{field}.clusters")));
                    }
                }
            }
            chosen
        } else if !w.labels.is_empty() {
            let chosen: Vec<usize> = left
                .iter()
                .enumerate()
                .filter(|(_, p)| w.labels.iter().all(|l| p.labels.contains(l)))
                .map(|(i, _)| i)
                .collect();
            if chosen.is_empty() {
                return Err(Error::invalid(format!(
                    "no placed cluster left to wave {name} has the labels {}",
                    w.labels.join(", ")
                ))
                .with_field(format!("{field}.labels")));
            }
            chosen
        } else if let Some(n) = w.count {
            (0..usize::try_from(n).unwrap_or(usize::MAX).min(left.len())).collect()
        } else if let Some(p) = w.percent {
            let n = (total * usize::try_from(p).unwrap_or(100)).div_ceil(100);
            (0..n.min(left.len())).collect()
        } else {
            (0..left.len()).collect()
        };
        let chosen: HashSet<usize> = chosen.into_iter().collect();
        let mut clusters = Vec::with_capacity(chosen.len());
        let mut rest = Vec::with_capacity(left.len() - chosen.len());
        for (i, p) in left.into_iter().enumerate() {
            if chosen.contains(&i) {
                clusters.push(p.id.clone());
            } else {
                rest.push(p);
            }
        }
        left = rest;
        if !clusters.is_empty() {
            waves.push(PlannedWave { name, clusters });
        }
    }
    if !left.is_empty() {
        waves.push(PlannedWave {
            name: "rest".to_owned(),
            clusters: left.into_iter().map(|p| p.id.clone()).collect(),
        });
    }
    Ok(waves)
}

/// How one cluster of a wave stands at a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterHealth {
    /// Every resource is applied and ready (and passes custom health).
    Healthy,
    /// Not there yet: why.
    Progressing(String),
    /// Failed for good (a resource failed, or a ready one stopped being ready): why.
    Failed(String),
    /// The cluster does not answer: why.
    Unreachable(String),
    /// Its resources are not known to this server yet (its watches still list them, as after a
    /// replica took a dead one's work over): neither ready nor failed, whatever the policies,
    /// until the deadline.
    Unseen(String),
}

/// What a wave's gate says at a look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every cluster counted is healthy, with at most the allowed failures.
    Pass,
    /// Not decided yet.
    Wait,
    /// More clusters failed than allowed: `(cluster, why)`.
    Fail(Vec<(String, String)>),
}

/// The verdict of a wave's gate over its clusters' `health`, once `deadline_passed` or not.
/// Unreachable clusters count as `unreachable` says (skipped ones are not in `health`); at the
/// deadline, clusters still progressing (or unreachable, under `Wait`) count as failed.
#[must_use]
pub fn judge(
    health: &[(String, ClusterHealth)],
    max_failures: CountOrPercent,
    unreachable: UnreachablePolicy,
    deadline_passed: bool,
) -> Verdict {
    let allowed = max_failures.of(health.len());
    let mut failed = Vec::new();
    let mut pending = false;
    for (cluster, h) in health {
        match h {
            ClusterHealth::Healthy => {}
            ClusterHealth::Failed(why) => failed.push((cluster.clone(), why.clone())),
            ClusterHealth::Unreachable(why) if unreachable == UnreachablePolicy::Fail => {
                failed.push((cluster.clone(), format!("unreachable: {why}")));
            }
            ClusterHealth::Progressing(why)
            | ClusterHealth::Unreachable(why)
            | ClusterHealth::Unseen(why) => {
                if deadline_passed {
                    failed.push((cluster.clone(), format!("not ready by the deadline: {why}")));
                } else {
                    pending = true;
                }
            }
        }
    }
    if failed.len() > allowed {
        Verdict::Fail(failed)
    } else if pending {
        Verdict::Wait
    } else {
        Verdict::Pass
    }
}

/// Where a rollout, or one of its waves, is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RolloutState {
    /// Not started.
    #[default]
    Pending,
    /// Its clusters are being changed, and their resources waited for.
    Progressing,
    /// Its resources are ready and must stay so for the bake time.
    Baking,
    /// Waiting for a person to approve the next wave.
    WaitingForApproval,
    /// Stopped by a person, or by a failed wave under `onFailure: pause`: waits for resume or
    /// abort.
    Paused,
    /// Done: every wave passed.
    Succeeded,
    /// A wave failed and nothing was rolled back (the group was terminated, or rolled back by
    /// hand).
    Failed,
    /// A wave failed and every changed cluster went back.
    RolledBack,
}

impl RolloutState {
    /// Whether nothing more happens in this state.
    #[must_use]
    pub const fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::RolledBack)
    }
}

impl RolloutState {
    /// Its name, as serialized.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Progressing => "Progressing",
            Self::Baking => "Baking",
            Self::WaitingForApproval => "WaitingForApproval",
            Self::Paused => "Paused",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::RolledBack => "RolledBack",
        }
    }
}

impl std::fmt::Display for RolloutState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cluster that failed a wave's gate, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaveFailure {
    /// `provider+cluster`.
    pub cluster: String,
    /// Why: the resources that failed and their reasons.
    pub reason: String,
}

/// One wave of a running or finished rollout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaveRun {
    /// Its name.
    pub name: String,
    /// Its clusters (`provider+cluster`).
    pub clusters: Vec<String>,
    /// Where it is.
    pub state: RolloutState,
    /// When its clusters were first changed (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub started: String,
    /// When its gate passed, or it failed (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub finished: String,
    /// When its bake time ends (RFC 3339), while baking.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bake_until: String,
    /// Whether a person approved it (when the gates ask for approval).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// Its clusters left out because they did not answer (`unreachable: skip`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// Its clusters deregistered while the rollout ran: left out for good, nobody's to change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<String>,
    /// The clusters that failed its gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<WaveFailure>,
    /// What asked rsync to change its clusters when it started: rsync queues one ask per
    /// origin, so a driver that cannot know whether the one before it asked asks again with
    /// it. A resume keeps it; a wave tried again gets another.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
}

/// A rollout of one revision of a deployment intent group, as recorded beside the AppContext it
/// deploys: enough to resume it after a restart, in another replica as well.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutRun {
    /// The group.
    pub dig: crate::DigRef,
    /// The context it replaces (an update), or none (a first instantiate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<ContextId>,
    /// The context it deploys.
    pub to: ContextId,
    /// The policy as it was when the rollout began.
    pub policy: RolloutSpec,
    /// Where it is.
    pub state: RolloutState,
    /// The waves.
    pub waves: Vec<WaveRun>,
    /// The wave at hand (the number of waves once all passed).
    pub current: usize,
    /// Clusters of the replaced context that no wave has (they leave the placement): their
    /// objects go with the last wave.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaving: Vec<String>,
    /// Clusters left out of their wave because they did not answer (`unreachable: skip`),
    /// changed once they answer again, after the rollout succeeded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub catch_up: Vec<String>,
    /// Why it failed, paused or was rolled back.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// When it began (RFC 3339).
    pub started: String,
    /// When it ended (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub finished: String,
}

impl WaveRun {
    /// The clusters it changes: its own less those left out (skipped or left).
    pub fn changing(&self) -> impl Iterator<Item = &String> {
        let out: HashSet<&str> = self
            .skipped
            .iter()
            .chain(&self.left)
            .map(String::as_str)
            .collect();
        self.clusters
            .iter()
            .filter(move |c| !out.contains(c.as_str()))
    }
}

impl RolloutRun {
    /// The clusters its waves have changed so far: those of every wave up to the current one
    /// (its clusters may be part-changed), less those left out.
    #[must_use]
    pub fn changed(&self) -> Vec<String> {
        let upto = self.current.min(self.waves.len().saturating_sub(1));
        let mut out = Vec::new();
        for w in self.waves.iter().take(upto + 1) {
            if w.state == RolloutState::Pending {
                continue;
            }
            out.extend(w.changing().cloned());
        }
        if self.current + 1 >= self.waves.len()
            && self
                .waves
                .last()
                .is_some_and(|w| w.state != RolloutState::Pending)
        {
            out.extend(self.leaving.iter().cloned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn spec(v: serde_json::Value) -> RolloutSpec {
        serde_json::from_value(v).unwrap()
    }

    fn fleet(n: usize) -> Vec<PlacedCluster> {
        (1..=n)
            .map(|i| {
                let region = if i % 2 == 0 { "even" } else { "odd" };
                PlacedCluster::new(format!("p+c{i:02}"), [region])
            })
            .collect()
    }

    #[test]
    fn waves_take_from_what_is_left_and_the_rest_follows() {
        let s = spec(json!({"waves": [
            {"name": "canary", "clusters": ["c07"]},
            {"count": 2},
            {"labels": ["even"]},
            {"percent": 10}
        ]}));
        s.validate().unwrap();
        let w = plan_waves(&s, &fleet(20)).unwrap();
        let names: Vec<&str> = w.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["canary", "wave-2", "wave-3", "wave-4", "rest"]);
        assert_eq!(w[0].clusters, ["p+c07"]);
        assert_eq!(w[1].clusters, ["p+c01", "p+c02"]);
        // Even ones the second wave did not take.
        assert_eq!(w[2].clusters.len(), 9);
        assert!(w[2].clusters.iter().all(|c| !c.ends_with("02")));
        // 10 % of all 20, from what is left: the first two odd ones left.
        assert_eq!(w[3].clusters, ["p+c03", "p+c05"]);
        assert_eq!(w[4].clusters.len(), 20 - 1 - 2 - 9 - 2);
    }

    #[test]
    fn waves_that_cannot_work_are_refused_naming_the_field() {
        let field =
            |v: serde_json::Value| spec(v).validate().unwrap_err().field().map(str::to_owned);
        assert_eq!(field(json!({"waves": []})).as_deref(), Some("spec.waves"));
        assert_eq!(
            field(json!({"waves": [{"percent": 101}]})).as_deref(),
            Some("spec.waves[0].percent")
        );
        assert_eq!(
            field(json!({"waves": [{"percent": 0}]})).as_deref(),
            Some("spec.waves[0].percent")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 0}]})).as_deref(),
            Some("spec.waves[0].count")
        );
        assert_eq!(
            field(json!({"waves": [{}, {"count": 1}]})).as_deref(),
            Some("spec.waves[0]")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 1, "percent": 5}]})).as_deref(),
            Some("spec.waves[0]")
        );
        assert_eq!(
            field(json!({"waves": [{"clusters": ["c1"]}, {"clusters": ["c1"]}]})).as_deref(),
            Some("spec.waves[1].clusters")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 1}], "gates": {"progressDeadline": "-5m"}}))
                .as_deref(),
            Some("spec.gates.progressDeadline")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 1}], "gates": {"progressDeadline": "0s"}})).as_deref(),
            Some("spec.gates.progressDeadline")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 1}], "gates": {"bakeTime": "soon"}})).as_deref(),
            Some("spec.gates.bakeTime")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 1}], "gates": {"maxFailures": "150%"}})).as_deref(),
            Some("spec.gates.maxFailures")
        );
        assert_eq!(
            field(json!({"waves": [{"count": 1}], "gates": {"customHealth": [{"kind": "X"}]}}))
                .as_deref(),
            Some("spec.gates.customHealth[0]")
        );
        // A negative count of failures is no count.
        assert!(
            serde_json::from_value::<RolloutSpec>(json!({"gates": {"maxFailures": -1}})).is_err()
        );
        let placed = fleet(4);
        let err = plan_waves(&spec(json!({"waves": [{"clusters": ["c9"]}]})), &placed).unwrap_err();
        assert_eq!(err.field(), Some("spec.waves[0].clusters"));
        let err =
            plan_waves(&spec(json!({"waves": [{"labels": ["nowhere"]}]})), &placed).unwrap_err();
        assert_eq!(err.field(), Some("spec.waves[0].labels"));
    }

    #[test]
    fn max_failures_reads_counts_and_percentages_and_writes_them_back() {
        let g: Gates = serde_json::from_value(json!({"maxFailures": "10%"})).unwrap();
        assert_eq!(g.max_failures, CountOrPercent::Percent(10));
        assert_eq!(serde_json::to_value(&g).unwrap()["maxFailures"], "10%");
        assert_eq!(g.max_failures.of(25), 2);
        let g: Gates = serde_json::from_value(json!({"maxFailures": 3})).unwrap();
        assert_eq!(serde_json::to_value(&g).unwrap()["maxFailures"], 3);
        let g: Gates = serde_json::from_value(json!({"maxFailures": "2"})).unwrap();
        assert_eq!(g.max_failures, CountOrPercent::Count(2));
        assert_eq!(
            Gates::default().progress_deadline().unwrap(),
            Duration::from_secs(600)
        );
        assert_eq!(Gates::default().bake_time().unwrap(), Duration::ZERO);
    }

    #[test]
    fn custom_health_by_condition_and_by_field() {
        let by_condition = CustomHealth {
            kind: "Certificate".into(),
            condition: Some(ConditionCheck {
                kind: "Ready".into(),
                status: "True".into(),
            }),
            ..CustomHealth::default()
        };
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let not = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert!(by_condition.judge(&ready).is_ok());
        assert_eq!(
            by_condition.judge(&not).unwrap_err(),
            "condition Ready is False, not True"
        );
        assert!(
            by_condition
                .judge(&json!({}))
                .unwrap_err()
                .contains("absent")
        );
        assert!(by_condition.applies_to("cert-manager.io/v1", "Certificate"));
        assert!(!by_condition.applies_to("v1", "ConfigMap"));
        let by_field = CustomHealth {
            kind: "Foo".into(),
            field: Some(FieldCheck {
                path: "status.phase".into(),
                value: "Running".into(),
            }),
            ..CustomHealth::default()
        };
        assert!(
            by_field
                .judge(&json!({"status": {"phase": "Running"}}))
                .is_ok()
        );
        assert_eq!(
            by_field
                .judge(&json!({"status": {"phase": "Pending"}}))
                .unwrap_err(),
            "status.phase is Pending, not Running"
        );
        let counted = CustomHealth {
            kind: "Foo".into(),
            field: Some(FieldCheck {
                path: "status.replicas".into(),
                value: "3".into(),
            }),
            ..CustomHealth::default()
        };
        assert!(counted.judge(&json!({"status": {"replicas": 3}})).is_ok());
    }

    #[test]
    fn a_gate_passes_waits_or_fails() {
        use ClusterHealth::{Failed, Healthy, Progressing, Unreachable};
        let h = |states: Vec<ClusterHealth>| -> Vec<(String, ClusterHealth)> {
            states
                .into_iter()
                .enumerate()
                .map(|(i, s)| (format!("p+c{i}"), s))
                .collect()
        };
        let none = CountOrPercent::Count(0);
        let wait = UnreachablePolicy::Wait;
        assert_eq!(
            judge(&h(vec![Healthy, Healthy]), none, wait, false),
            Verdict::Pass
        );
        assert_eq!(
            judge(
                &h(vec![Healthy, Progressing("0/1".into())]),
                none,
                wait,
                false
            ),
            Verdict::Wait
        );
        let late = judge(
            &h(vec![Healthy, Progressing("0/1".into())]),
            none,
            wait,
            true,
        );
        assert!(
            matches!(&late, Verdict::Fail(f) if f[0].1.contains("deadline")),
            "{late:?}"
        );
        assert!(matches!(
            judge(
                &h(vec![Failed("x".into()), Progressing("y".into())]),
                none,
                wait,
                false
            ),
            Verdict::Fail(_)
        ));
        // One failure allowed: the wave waits for the other and then passes.
        let one = CountOrPercent::Count(1);
        assert_eq!(
            judge(
                &h(vec![Failed("x".into()), Progressing("y".into())]),
                one,
                wait,
                false
            ),
            Verdict::Wait
        );
        assert_eq!(
            judge(&h(vec![Failed("x".into()), Healthy]), one, wait, false),
            Verdict::Pass
        );
        let silent = h(vec![Healthy, Unreachable("refused".into())]);
        assert_eq!(judge(&silent, none, wait, false), Verdict::Wait);
        assert!(matches!(
            judge(&silent, none, UnreachablePolicy::Fail, false),
            Verdict::Fail(_)
        ));
        assert_eq!(judge(&h(vec![]), none, wait, true), Verdict::Pass);
        // What a replica that took over has not listed yet is waited for, even when silent
        // clusters fail the wave; it fails only at the deadline.
        let unseen = h(vec![
            Healthy,
            ClusterHealth::Unseen("not listed yet".into()),
        ]);
        assert_eq!(
            judge(&unseen, none, UnreachablePolicy::Fail, false),
            Verdict::Wait
        );
        assert!(matches!(
            judge(&unseen, none, UnreachablePolicy::Fail, true),
            Verdict::Fail(f) if f[0].1.contains("deadline")
        ));
    }

    proptest! {
        /// Whatever the waves, every placed cluster is in exactly one planned wave, none is
        /// empty, and a count or percent wave takes no more than asked.
        #[test]
        fn every_placed_cluster_is_in_exactly_one_wave(
            n in 0usize..60,
            waves in proptest::collection::vec((0u8..4, 1u32..30, 1u32..=100), 1..6),
        ) {
            let placed = fleet(n);
            let mut ws: Vec<WaveSpec> = waves
                .iter()
                .map(|(how, count, percent)| match how {
                    0 => WaveSpec { count: Some(*count), ..WaveSpec::default() },
                    1 => WaveSpec { percent: Some(*percent), ..WaveSpec::default() },
                    2 => WaveSpec { labels: vec!["even".into()], ..WaveSpec::default() },
                    _ => WaveSpec { count: Some(1), ..WaveSpec::default() },
                })
                .collect();
            ws.push(WaveSpec::default());
            let s = RolloutSpec { waves: ws, ..RolloutSpec::default() };
            prop_assert!(s.validate().is_ok());
            // A label wave may find nothing left; that is refused, not planned wrong.
            let Ok(planned) = plan_waves(&s, &placed) else { return Ok(()); };
            let mut seen = HashSet::new();
            for w in &planned {
                prop_assert!(!w.clusters.is_empty());
                for c in &w.clusters {
                    prop_assert!(seen.insert(c.clone()), "{} twice", c);
                }
            }
            prop_assert_eq!(seen.len(), n);
        }
    }
}
