//! hpa, hardware-platform-aware placement and action: intent types, the cluster filter and the
//! pod template update.
//!
//! Under a DIG, `hpa-intents/{hpaIntent}` names an app; its `hpa-resource-consumers/{consumer}`
//! name a workload and container of the app; their `resource-requirements/{requirement}` say what
//! the container needs:
//! - non-allocatable `{key, value}`: the cluster has the kv-pair `key: value`, or, for a feature
//!   that is on (`value` `true` or empty), a label equal to the last `/` segment of the key
//!   (`intel_qat` for `feature.node.kubernetes.io/intel_qat`; labels cannot hold `/`);
//! - allocatable `{name, requests, limits}`: the cluster's kv-pair `name` holds a capacity (a
//!   number, or a numeric string) of at least the requests (the limits when no requests).
//!
//! The placement part removes every cluster of the app that misses a mandatory requirement (an
//! app left with no cluster is an error); optional requirements rank the clusters of each anyOf
//! group by the sum of the weights they satisfy, and only the best of each group stay.
//! The action part writes the allocatable requirements as `resources.requests` / `limits` of the
//! consumer's container in its pod template, on every cluster of the app.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use emco_controller_sdk::intent::Dig;
use emco_controller_sdk::{
    ActionController, ContextHandle, ControllerContext, PlacementController, set_field,
};
use emco_core::ResourceName;
use emco_core::model::kv_value_text;
use emco_core::{Error, Metadata, Object, Result};
use emco_rest::{Hook, PutStatus, Wording};
use emco_store::{ResourceKey, ResourceStore};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `DIG/hpa-intents/{hpaIntent}`: `spec{app}` (every field omitempty, as hpa's model.go).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// hpa-intent-handler.go: json-schemas/placement-hpa-intent.json on POST and PUT; PUT answers
// 200 and a DELETE looks the intent up first (src/hpa-plc/api/apierrors.go).
#[object(schema = INTENT_SCHEMA)]
#[intent(parent = Dig, segment = "hpa-intents", param = "hpaIntent",
    wording = hpa_wording("Intent", "putHpaIntentHandler .. Mismatched name in PUT request"))]
pub struct HpaIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The app.
    #[serde(default)]
    pub spec: HpaIntentSpec,
}

/// The `spec` of an [`HpaIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HpaIntentSpec {
    /// The app whose clusters are filtered.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
}

/// `.../hpa-resource-consumers/{hpaResourceConsumer}`: `spec{apiVersion, kind, replicas, name,
/// container}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// hpa-consumer-handler.go: json-schemas/placement-hpa-consumer.json on POST and PUT;
// `putHpaConsumerHandler` (sic, one space).
#[object(schema = CONSUMER_SCHEMA)]
#[intent(parent = HpaIntent, segment = "hpa-resource-consumers", param = "hpaResourceConsumer",
    wording = hpa_wording("Consumer", "putHpaConsumerHandler ..Mismatched name in PUT request"))]
pub struct HpaConsumer {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The workload.
    #[serde(default)]
    pub spec: HpaConsumerSpec,
}

/// The `spec` of an [`HpaConsumer`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaConsumerSpec {
    /// The workload's API version.
    #[serde(
        default,
        alias = "api-version",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    /// The workload's kind (`Deployment`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The workload's replicas.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i64,
    /// The workload's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The container in its pod template (needed by allocatable requirements).
    #[serde(
        default,
        alias = "container-name",
        skip_serializing_if = "String::is_empty"
    )]
    pub container: String,
}

/// `.../resource-requirements/{resourceRequirement}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// hpa-resource-handler.go: json-schemas/placement-hpa-resource.json on POST and PUT; the
// checks against the consumer are [`RequirementHook`]'s.
#[object(schema = REQUIREMENT_SCHEMA)]
#[intent(parent = HpaConsumer, segment = "resource-requirements", param = "resourceRequirement",
    wording = hpa_wording("Resource", "putHpaResourceHandler .. Mismatched name in PUT request"),
    hook = RequirementHook)]
pub struct HpaRequirement {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The requirement.
    #[serde(default)]
    pub spec: HpaRequirementSpec,
}

/// The `spec` of an [`HpaRequirement`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HpaRequirementSpec {
    /// A countable resource (`cpu`) rather than a feature (required: hpa's Go pointer, absent
    /// is `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<bool>,
    /// Clusters that miss it are removed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mandatory: bool,
    /// The preference of an optional requirement.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i64,
    /// `{name, requests, limits, units}` or `{key, value}`.
    #[serde(default)]
    pub resource: HpaResource,
}

impl HpaRequirementSpec {
    /// Whether this is an allocatable requirement.
    #[must_use]
    pub fn is_allocatable(&self) -> bool {
        self.allocatable == Some(true)
    }
}

/// The resource of a requirement: the allocatable or the non-allocatable fields are used (hpa's
/// Go struct embeds both, every field omitempty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HpaResource {
    /// Allocatable: the resource name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Allocatable: the requested amount (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: i64,
    /// Allocatable: the limit (0: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub limits: i64,
    /// Allocatable: the unit suffix of both amounts (`Mi`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub units: String,
    /// Non-allocatable: the feature key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// Non-allocatable: the feature value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &i64) -> bool {
    *n == 0
}

emco_go::schemas! {
    INTENT_SCHEMA = "../schemas/hpa/intent.json";
    CONSUMER_SCHEMA = "../schemas/hpa/consumer.json";
    REQUIREMENT_SCHEMA = "../schemas/hpa/resource.json";
}

/// hpa-resource-handler.go `validateDependents`: a requirement must fit its consumer and its
/// own `allocatable` flag, in hpa's texts (hpa prints Go's `%v` of the spec after them, with a
/// pointer's address; we print the name only).
struct RequirementHook;

#[async_trait]
impl Hook<HpaRequirement> for RequirementHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        value: &HpaRequirement,
    ) -> Result<()> {
        let consumer_key = key
            .parent()
            .ok_or_else(|| Error::internal(format!("{key} has no consumer above it")))?;
        let Some(doc) = store.get(&consumer_key).await? else {
            return Err(Error::not_found("Consumer not found"));
        };
        let consumer: HpaConsumer = emco_go::json::from_value(&doc)
            .map_err(|e| Error::internal("a stored hpa consumer does not read").with_source(e))?;
        let spec = &value.spec;
        let r = &spec.resource;
        let empty_param = || Error::invalid("param[] is empty");
        let mismatch = || {
            Error::invalid(format!(
                "JsonSchemaValidation: Document Validation failed .. resource-spec allocatable \
                 and resource field value mismatch. hpa-resource-name[{}]",
                value.metadata.name
            ))
        };
        if consumer.spec.name.is_empty() {
            return Err(empty_param());
        }
        if spec.is_allocatable() {
            if consumer.spec.container.is_empty() {
                return Err(empty_param());
            }
            if r.name.is_empty() && r.requests == 0 && r.limits == 0 && r.units.is_empty() {
                return Err(mismatch());
            }
            if r.limits > 0 && r.requests > r.limits {
                return Err(Error::invalid(format!(
                    "JsonSchemaValidation: Document Validation failed .. resource-spec requests \
                     must be less or equal to limits. hpa-resource-name[{}]",
                    value.metadata.name
                )));
            }
        } else if r.key.is_empty() && r.value.is_empty() {
            return Err(mismatch());
        }
        Ok(())
    }
}

/// hpa's wording of `noun` (src/hpa-plc/api/apierrors.go): `Intent not found`, `Intent already
/// exists`; PUT answers 200 and a DELETE of a missing object the not-found text; a PUT naming
/// another object answers `mismatch` (each put handler words it its own way).
fn hpa_wording(noun: &str, mismatch: &'static str) -> Wording {
    let missing = format!("{noun} not found");
    Wording::new(missing.clone(), format!("{noun} already exists"))
        .with_delete_missing(missing)
        .with_put(PutStatus::Ok)
        .with_name_mismatch(mismatch)
}

/// What is known of a cluster's hardware: its labels and kv-pairs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterFacts {
    /// The cluster's labels.
    pub labels: BTreeSet<String>,
    /// The cluster's kv-pairs.
    pub kv: BTreeMap<String, Value>,
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Whether a cluster with `facts` satisfies `req`.
#[must_use]
pub fn satisfies(req: &HpaRequirementSpec, facts: &ClusterFacts) -> bool {
    let r = &req.resource;
    if req.is_allocatable() {
        let need = if r.requests > 0 { r.requests } else { r.limits };
        facts
            .kv
            .get(&r.name)
            .and_then(number)
            .is_some_and(|have| have >= need as f64)
    } else {
        let on = r.value.is_empty() || r.value == "true";
        let label = r.key.rsplit('/').next().unwrap_or(&r.key);
        facts
            .kv
            .get(&r.key)
            .is_some_and(|v| kv_value_text(v) == r.value)
            || (on && facts.labels.contains(label))
    }
}

/// One hpa intent with its consumers and their requirements.
#[derive(Debug, Clone, Default)]
pub struct HpaInput {
    /// The intent.
    pub intent: HpaIntent,
    /// Its consumers, each with its requirements.
    pub consumers: Vec<(HpaConsumer, Vec<HpaRequirement>)>,
}

/// Removes the clusters of each intent's app that miss a mandatory requirement, then, in each
/// anyOf group of the app, the clusters that score below the group's best: a cluster scores the
/// weights of the optional requirements it satisfies (EMCO's hpa ranking; the anyOf choice then
/// picks among the best). `facts` holds the facts of the clusters (`provider+cluster`); a
/// cluster without facts has none.
///
/// # Errors
/// `FailedPrecondition` when an app is left with no cluster; the store's errors.
pub async fn filter(
    handle: &mut ContextHandle,
    inputs: &[HpaInput],
    facts: &BTreeMap<String, ClusterFacts>,
) -> Result<()> {
    let none = ClusterFacts::default();
    for input in inputs {
        let app = &input.intent.spec.app;
        let (mandatory, optional): (Vec<&HpaRequirement>, Vec<&HpaRequirement>) = input
            .consumers
            .iter()
            .flat_map(|(_, reqs)| reqs.iter())
            .partition(|r| r.spec.mandatory);
        let clusters = handle.clusters(app).await?;
        if clusters.is_empty() {
            continue;
        }
        if !mandatory.is_empty() {
            let mut kept = 0;
            for cluster in clusters {
                let f = facts.get(&cluster).unwrap_or(&none);
                if mandatory.iter().all(|r| satisfies(&r.spec, f)) {
                    kept += 1;
                } else {
                    handle.remove_cluster(app, &cluster).await?;
                }
            }
            if kept == 0 {
                return Err(Error::failed_precondition(format!(
                    "no cluster satisfies the hardware requirements of app {app} (hpa intent {})",
                    input.intent.metadata.name
                )));
            }
        }
        if optional.is_empty() {
            continue;
        }
        let score = |cluster: &str| -> i64 {
            let f = facts.get(cluster).unwrap_or(&none);
            optional
                .iter()
                .filter(|r| satisfies(&r.spec, f))
                .map(|r| r.spec.weight)
                .sum()
        };
        // A mandatory cluster is alone in its group, so only anyOf choices are narrowed.
        for (_, members) in handle.cluster_groups(app).await? {
            let best = members.iter().map(|c| score(c)).max().unwrap_or(0);
            for c in members.iter().filter(|c| score(c) < best) {
                handle.remove_cluster(app, c).await?;
            }
        }
    }
    Ok(())
}

/// Writes the allocatable requirements into the consumers' pod templates on every cluster of
/// each intent's app.
///
/// # Errors
/// `NotFound` when a consumer's workload is on no cluster of the app; `InvalidArgument` when
/// its pod template has no such container; the store's errors.
pub async fn set_resources(handle: &mut ContextHandle, inputs: &[HpaInput]) -> Result<()> {
    for input in inputs {
        let app = &input.intent.spec.app;
        for (consumer, reqs) in &input.consumers {
            let c = &consumer.spec;
            let name = ResourceName::new(&c.name, &c.kind).to_string();
            let mut found = false;
            for cluster in handle.clusters(app).await? {
                let Some(mut obj) = handle.resource(app, &cluster, &name).await? else {
                    continue;
                };
                found = true;
                let containers = obj
                    .pointer_mut("/spec/template/spec/containers")
                    .and_then(Value::as_array_mut)
                    .ok_or_else(|| Error::invalid(format!("{name} has no pod template")))?;
                let container = containers
                    .iter_mut()
                    .find(|k| k.get("name").and_then(Value::as_str) == Some(c.container.as_str()))
                    .ok_or_else(|| {
                        Error::invalid(format!("{name} has no container {}", c.container))
                    })?;
                for r in reqs.iter().filter(|r| r.spec.is_allocatable()) {
                    let res = &r.spec.resource;
                    for (field, amount) in [("requests", res.requests), ("limits", res.limits)] {
                        if amount > 0 {
                            let q = Value::String(format!("{amount}{}", res.units));
                            set_field(container, &["resources", field, &res.name], q)?;
                        }
                    }
                }
                handle.put_resource(app, &cluster, &name, obj).await?;
            }
            if !found {
                return Err(Error::not_found(format!(
                    "hpa consumer {}: app {app} has no {name} on any cluster",
                    consumer.metadata.name
                )));
            }
        }
    }
    Ok(())
}

/// Reads the hpa intents `names` of the context's DIG with their consumers and requirements.
async fn load(cx: &ControllerContext, names: &[String]) -> Result<Vec<HpaInput>> {
    let mut out = Vec::new();
    for name in names {
        let (key, intent) = cx.intent_named::<HpaIntent>(name).await?;
        let mut consumers = Vec::new();
        for (ckey, consumer) in cx.children::<HpaConsumer>(&key).await? {
            let reqs = cx.children::<HpaRequirement>(&ckey).await?;
            consumers.push((consumer, reqs.into_iter().map(|(_, r)| r).collect()));
        }
        out.push(HpaInput { intent, consumers });
    }
    Ok(out)
}

/// The hpa placement controller; `name` is its registration name, which the DIG's intents use.
#[derive(Debug, Clone)]
pub struct HpaPlacement {
    /// The name it is registered under.
    pub name: String,
}

#[async_trait]
impl PlacementController for HpaPlacement {
    async fn filter_clusters(&self, cx: &mut ControllerContext) -> Result<()> {
        let names = cx.intent_names_for(&self.name).await?;
        let inputs = load(cx, &names).await?;
        let mut facts = BTreeMap::new();
        for input in &inputs {
            for cluster in cx.clusters(&input.intent.spec.app).await? {
                if let Entry::Vacant(slot) = facts.entry(cluster.clone()) {
                    slot.insert(ClusterFacts {
                        labels: cx.cluster_labels(&cluster).await?,
                        kv: cx.cluster_kv(&cluster).await?,
                    });
                }
            }
        }
        filter(cx.handle_mut(), &inputs, &facts).await
    }
}

/// The hpa action controller: the intent the DIG names for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct HpaAction;

#[async_trait]
impl ActionController for HpaAction {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let name = cx
            .intent_name()
            .ok_or_else(|| Error::failed_precondition("the request names no hpa intent"))?
            .to_owned();
        let inputs = load(cx, &[name]).await?;
        set_resources(cx.handle_mut(), &inputs).await
    }
}
