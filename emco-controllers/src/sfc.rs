//! sfc, the service function chaining controller, and sfcclient, which attaches client apps to
//! a deployed chain (src/sfc: api/, pkg/model, internal/action; src/sfcclient likewise).
//!
//! Under a DIG, `network-chains/{sfcIntent}` ([`SfcIntent`]: the chain's type and namespace)
//! holds `links` ([`SfcLinkIntent`]: one network function between two networks, its app and
//! workload), `client-selectors` ([`SfcClientSelectorIntent`]: the pods and namespaces
//! admitted at each end) and `provider-networks` ([`SfcProviderNetworkIntent`]: the provider
//! network at each end). Another DIG's `sfc-clients` ([`SfcClientIntent`]) names a chain end
//! and a workload of its own to attach there.
//!
//! [`Sfc`] (registered as `sfc`) adds, for each chain, a Nodus `NetworkChaining` resource in a
//! new app `network-chain-intents` on every cluster that runs all the chain's apps, and labels
//! each function's pods with its link label. [`SfcClient`] (registered as `sfcclient`) labels
//! a client workload's pods with the `podSelector` of the first client selector of its chain
//! end whose `namespaceSelector` the group's logical cloud labels match.
//!
//! Where EMCO answers a 500 for a client's mistake (a link that is not found or exists, a list
//! under a DIG that does not exist) these answer the 404 or 409 the text says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;
use emco_appcontext::collection::{Collection, EmptyList, PutStatus, Wording};
use emco_appcontext::keys;
use emco_controller_sdk::intent::{Dig, IntentType};
use emco_controller_sdk::{ActionController, ControllerContext};
use emco_core::ResourceName;
use emco_core::model::{DeploymentIntentGroup, LogicalCloud};
use emco_core::{Error, Metadata, Object, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::workload::label_pods;

/// The app sfc adds to a context for its chains (`model.ChainingApp`).
pub const CHAINING_APP: &str = "network-chain-intents";
/// The chain resource's `apiVersion` (Nodus).
pub const CHAINING_API_VERSION: &str = "k8s.plugin.opnfv.org/v1alpha1";
/// The chain resource's `kind`.
pub const CHAINING_KIND: &str = "NetworkChaining";

/// `DIG/network-chains/{sfcIntent}`: one network chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(schema = SFC_SCHEMA)]
#[intent(parent = Dig, segment = "network-chains", param = "sfcIntent",
    wording = sfc_wording("SFC Intent", DIG_MISSING))]
pub struct SfcIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The chain.
    #[serde(default)]
    pub spec: SfcIntentSpec,
}

/// The `spec` of an [`SfcIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SfcIntentSpec {
    /// `Routing`, the only type.
    #[serde(default)]
    pub chain_type: String,
    /// The namespace of the chain's functions.
    #[serde(default)]
    pub namespace: String,
}

/// `.../links/{sfcLink}`: one function of the chain, between two networks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(schema = LINK_SCHEMA)]
#[intent(parent = SfcIntent, segment = "links", param = "sfcLink",
    wording = sfc_wording("SFC Link Intent", SFC_MISSING))]
pub struct SfcLinkIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The link.
    #[serde(default)]
    pub spec: SfcLinkSpec,
}

/// The `spec` of an [`SfcLinkIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SfcLinkSpec {
    /// The network on the function's left.
    #[serde(default)]
    pub left_net: String,
    /// The network on its right.
    #[serde(default)]
    pub right_net: String,
    /// The label (`key=value`) of the function's pods, which names it in the chain.
    #[serde(default)]
    pub link_label: String,
    /// The function's app.
    #[serde(default)]
    pub app: String,
    /// The workload's rendered name.
    #[serde(default)]
    pub workload_resource: String,
    /// The workload's kind (`Deployment`).
    #[serde(default)]
    pub resource_type: String,
}

/// A Kubernetes label selector as client-go writes it (empty parts left out).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must all match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements, kept as sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Value>,
}

/// `.../client-selectors/{sfcClientSelector}`: the clients admitted at one end of the chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(schema = SELECTOR_SCHEMA)]
#[intent(parent = SfcIntent, segment = "client-selectors", param = "sfcClientSelector",
    wording = sfc_wording("SFC Client Selector Intent", SFC_MISSING))]
pub struct SfcClientSelectorIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The selectors.
    #[serde(default)]
    pub spec: ClientSelectorSpec,
}

/// The `spec` of an [`SfcClientSelectorIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientSelectorSpec {
    /// `left` or `right`.
    #[serde(default)]
    pub chain_end: String,
    /// The client pods.
    #[serde(default)]
    pub pod_selector: LabelSelector,
    /// Their namespaces.
    #[serde(default)]
    pub namespace_selector: LabelSelector,
}

/// `.../provider-networks/{sfcProviderNetwork}`: the provider network at one end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(schema = PROVIDER_NETWORK_SCHEMA)]
#[intent(parent = SfcIntent, segment = "provider-networks", param = "sfcProviderNetwork",
    wording = sfc_wording("SFC Provider Network Intent", SFC_MISSING))]
pub struct SfcProviderNetworkIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The network.
    #[serde(default)]
    pub spec: ProviderNetworkSpec,
}

/// The `spec` of an [`SfcProviderNetworkIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderNetworkSpec {
    /// `left` or `right`.
    #[serde(default)]
    pub chain_end: String,
    /// The ncm provider network.
    #[serde(default)]
    pub provider_network: String,
    /// Its gateway.
    #[serde(default)]
    pub gateway_ip: String,
    /// Its subnet (CIDR).
    #[serde(default)]
    pub subnet: String,
}

/// `DIG/sfc-clients/{sfcClientIntent}`: a workload of this group to attach to a chain end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(schema = CLIENT_SCHEMA)]
#[intent(parent = Dig, segment = "sfc-clients", param = "sfcClientIntent",
    wording = sfc_wording("SFC Client Intent", DIG_MISSING))]
pub struct SfcClientIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The chain end and the workload.
    #[serde(default)]
    pub spec: SfcClientSpec,
}

/// The `spec` of an [`SfcClientIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SfcClientSpec {
    /// `left` or `right`.
    #[serde(default)]
    pub chain_end: String,
    /// The chain (a network chain of the DIG named next, in the same project).
    #[serde(default)]
    pub sfc_intent: String,
    /// The chain's composite app.
    #[serde(default)]
    pub composite_app: String,
    /// Its version.
    #[serde(default)]
    pub composite_app_version: String,
    /// The chain's DIG.
    #[serde(default)]
    pub deployment_intent_group: String,
    /// The client app, in this group.
    #[serde(default)]
    pub app: String,
    /// The workload's rendered name.
    #[serde(default)]
    pub workload_resource: String,
    /// Its kind.
    #[serde(default)]
    pub resource_type: String,
}

emco_go::schemas! {
    SFC_SCHEMA = "../schemas/sfc/sfc.json";
    LINK_SCHEMA = "../schemas/sfc/sfc-link.json";
    SELECTOR_SCHEMA = "../schemas/sfc/sfc-client-selector.json";
    PROVIDER_NETWORK_SCHEMA = "../schemas/sfc/sfc-provider-network.json";
    CLIENT_SCHEMA = "../schemas/sfcclient/sfc-client.json";
}

/// The chain's DIG is missing (sfc's GetAll looks it up first).
const DIG_MISSING: &str = "DeploymentIntentGroup not found";
/// The chain is missing (the lists under it look it up first).
const SFC_MISSING: &str = "SFC Intent not found";

/// sfc's wording of `what` (api/apierrors.go): PUT answers 201 and creates; an empty list is
/// `[]`, after looking its parent up (`list_missing` when it is missing). Every sfc type is
/// checked by its JSON schema only, on POST and PUT, as the Go struct writes it back.
fn sfc_wording(what: &str, list_missing: &'static str) -> Wording {
    Wording::new(
        format!("{what} not found"),
        format!("{what} already exists"),
    )
    .with_put(PutStatus::Created)
    .with_empty_list(EmptyList::Array)
    .with_list_checks(&[(0, list_missing)])
}

/// sfc's and sfcclient's REST routes over `store`.
pub fn routes<S: Clone + Send + Sync + 'static>(
    store: Arc<dyn emco_store::ResourceStore>,
) -> axum::Router<S> {
    SfcIntent::routes(Arc::clone(&store))
        .merge(SfcLinkIntent::routes(Arc::clone(&store)))
        .merge(SfcClientSelectorIntent::routes(Arc::clone(&store)))
        .merge(SfcProviderNetworkIntent::routes(Arc::clone(&store)))
        .merge(SfcClientIntent::routes(store))
}

/// `e` under the Go controllers' wrapping text (`errors.Wrap`: `what: cause`).
fn wrap(what: String) -> impl FnOnce(Error) -> Error {
    move |e| Error::new(e.kind(), format!("{what}: {e}"))
}

/// The chain string of a chain's links (`handleSfcLinkIntents`): from the leftmost network,
/// `net=<n>` and each function's label in turn, `net=a,app=f,net=b,...`; the apps of the links.
///
/// # Errors
/// Two links sharing a left network, a right network or a label; no or several leftmost
/// networks; links that do not form one path.
pub fn chain_of(links: &[SfcLinkSpec]) -> Result<(String, BTreeSet<String>)> {
    let mut apps = BTreeSet::new();
    let mut label_of = BTreeMap::new();
    let mut right_of_label = BTreeMap::new();
    let mut rights = BTreeSet::new();
    let mut labels = BTreeSet::new();
    for l in links {
        apps.insert(l.app.clone());
        let shown = || format!("{l:?}");
        if label_of
            .insert(l.left_net.as_str(), l.link_label.as_str())
            .is_some()
        {
            return Err(Error::invalid(format!(
                "Duplicate Left Network in SFC Link Intent: {}",
                shown()
            )));
        }
        if !rights.insert(l.right_net.as_str()) {
            return Err(Error::invalid(format!(
                "Duplicate Right Network in SFC Link Intent: {}",
                shown()
            )));
        }
        // sic: sfc's text has no space after "Label".
        if !labels.insert(l.link_label.as_str()) {
            return Err(Error::invalid(format!(
                "Duplicate Link Labelin SFC Link Intent: {}",
                shown()
            )));
        }
        right_of_label.insert(l.link_label.as_str(), l.right_net.as_str());
    }
    let leftmost: Vec<&str> = links
        .iter()
        .map(|l| l.left_net.as_str())
        .filter(|n| !rights.contains(n))
        .collect();
    let start = match leftmost.as_slice() {
        [] => return Err(Error::invalid("No SFC Link Intents")),
        [one] => *one,
        _ => {
            return Err(Error::invalid(
                "Multiple leftmost Networks in SFC Link Intents",
            ));
        }
    };
    let mut parts = vec![format!("net={start}")];
    let mut net = start;
    // A cycle stops once it has gone round more times than there are links.
    while let Some(label) = label_of.get(net) {
        if parts.len() > 2 * links.len() + 1 {
            break;
        }
        let right = right_of_label[label];
        parts.push((*label).to_owned());
        parts.push(format!("net={right}"));
        net = right;
    }
    if parts.len() != 2 * links.len() + 1 {
        return Err(Error::invalid("Invalid set of SFC link intents"));
    }
    Ok((parts.join(","), apps))
}

/// One end's entries of the chain resource's `routingSpec`: each client selector in turn, the
/// k-th provider network filled into the k-th entry (appended past the selectors).
fn routing_networks(
    selectors: &[&ClientSelectorSpec],
    networks: &[&ProviderNetworkSpec],
) -> Vec<Value> {
    let selector = |s: &LabelSelector| serde_json::to_value(s).unwrap_or_else(|_| json!({}));
    let mut out: Vec<Value> = selectors
        .iter()
        .map(|s| {
            json!({"gatewayIp": "", "namespaceSelector": selector(&s.namespace_selector),
                "networkName": "", "podSelector": selector(&s.pod_selector), "subnet": ""})
        })
        .collect();
    for (k, n) in networks.iter().enumerate() {
        if out.len() <= k {
            out.push(
                json!({"gatewayIp": "", "namespaceSelector": {}, "networkName": "",
                "podSelector": {}, "subnet": ""}),
            );
        }
        out[k]["networkName"] = json!(n.provider_network);
        out[k]["gatewayIp"] = json!(n.gateway_ip);
        out[k]["subnet"] = json!(n.subnet);
    }
    out
}

/// The `NetworkChaining` resource of chain `intent` (resources.go). EMCO's YAML also carries
/// the Go zero values `metadata.creationTimestamp: null` and `status: {state: ""}`, which the
/// API server drops; they are left out.
///
/// Also answers the apps of the links ([`chain_of`]), whose clusters the resource goes to.
///
/// # Errors
/// A chain without an end (no selector or provider network there); invalid links.
pub fn network_chaining(
    intent: &SfcIntent,
    selectors: &[ClientSelectorSpec],
    networks: &[ProviderNetworkSpec],
    links: &[SfcLinkSpec],
) -> Result<(Value, BTreeSet<String>)> {
    let name = &intent.metadata.name;
    let side = |end: &str| {
        let s: Vec<&ClientSelectorSpec> = selectors.iter().filter(|s| s.chain_end == end).collect();
        let n: Vec<&ProviderNetworkSpec> = networks.iter().filter(|n| n.chain_end == end).collect();
        routing_networks(&s, &n)
    };
    let (left, right) = (side("left"), side("right"));
    let missing = match (left.is_empty(), right.is_empty()) {
        (true, true) => Some("SFC"),
        (true, false) => Some("left end of SFC"),
        (false, true) => Some("right end of SFC"),
        (false, false) => None,
    };
    if let Some(what) = missing {
        return Err(Error::failed_precondition(format!(
            "provider network or client selector intents were not provided for {what}: {name}"
        )));
    }
    let (chain, apps) = chain_of(links)?;
    let resource = json!({
        "apiVersion": CHAINING_API_VERSION,
        "kind": CHAINING_KIND,
        "metadata": {"name": name},
        "spec": {
            "chainType": intent.spec.chain_type,
            "routingSpec": {
                "left": left,
                "namespace": intent.spec.namespace,
                "networkChain": chain,
                "right": right,
            },
        },
    });
    Ok((resource, apps))
}

/// The clusters of the context that run every one of `apps` (none when one is missing).
async fn clusters_with_all(cx: &ControllerContext, apps: &BTreeSet<String>) -> Result<Vec<String>> {
    let present = cx.handle().apps().await?;
    let mut out: Option<BTreeSet<String>> = None;
    for app in apps {
        if !present.contains(app) {
            return Ok(Vec::new());
        }
        let clusters: BTreeSet<String> = cx.clusters(app).await?.into_iter().collect();
        out = Some(match out {
            None => clusters,
            Some(o) => o.intersection(&clusters).cloned().collect(),
        });
    }
    Ok(out.unwrap_or_default().into_iter().collect())
}

/// Sets `labels` on the pods of resource `workload+kind` of `app` on `cluster`; `who` names
/// the intent in errors. A kind without pods is left as it is; a custom resource is refused
/// (EMCO cannot decode it).
async fn label_workload(
    cx: &mut ControllerContext,
    (app, cluster): (&str, &str),
    (workload, kind): (&str, &str),
    labels: &BTreeMap<String, String>,
    who: &str,
) -> Result<()> {
    let resource = ResourceName::new(workload, kind).to_string();
    let Some(mut object) = cx.handle().resource(app, cluster, &resource).await? else {
        return Err(Error::not_found(format!(
            "Error getting resource handle [{resource}] for SFC client [{who}] from cluster [{cluster}]"
        )));
    };
    match label_pods(
        &mut object,
        labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ) {
        Err(()) => Err(Error::invalid(format!(
            "Error decoding resource: {workload}"
        ))),
        Ok(false) => {
            tracing::warn!(%app, %cluster, %resource, "Resource type does not have pod template");
            Ok(())
        }
        Ok(true) => {
            cx.handle_mut()
                .put_resource(app, cluster, &resource, object)
                .await
        }
    }
}

/// The intents of type `C` under chain `chain`, their read errors worded as sfc's
/// (`Error getting SFC Client Selector intents for SFC Intent: <chain>`).
async fn parts<C: IntentType>(
    cx: &ControllerContext,
    chain: &emco_store::ResourceKey,
) -> Result<Vec<(String, C)>> {
    let what = C::wording().not_found;
    let what = what.trim_end_matches(" Intent not found");
    let name = chain.name().unwrap_or_default().to_owned();
    Ok(cx
        .children::<C>(chain)
        .await
        .map_err(wrap(format!(
            "Error getting {what} intents for SFC Intent: {name}"
        )))?
        .into_iter()
        .map(|(_, c)| (c.name().to_owned(), c))
        .collect())
}

/// The sfc action controller: adds each network chain of the DIG to the context.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sfc;

#[async_trait]
impl ActionController for Sfc {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let dig = cx.dig_key().await?;
        let chains = cx.children::<SfcIntent>(&dig).await?;
        if chains.is_empty() {
            let m = cx.meta().await?;
            return Err(Error::not_found(format!(
                "No SFC Intents are defined for the Deployment Intent Group: {}",
                m.deployment_intent_group
            )));
        }
        for (key, chain) in chains {
            let name = chain.metadata.name.clone();
            let selectors: Vec<ClientSelectorSpec> = parts::<SfcClientSelectorIntent>(cx, &key)
                .await?
                .into_iter()
                .map(|(_, s)| s.spec)
                .collect();
            let networks: Vec<ProviderNetworkSpec> = parts::<SfcProviderNetworkIntent>(cx, &key)
                .await?
                .into_iter()
                .map(|(_, n)| n.spec)
                .collect();
            let links: Vec<(String, SfcLinkSpec)> = parts::<SfcLinkIntent>(cx, &key)
                .await?
                .into_iter()
                .map(|(_, l)| (l.metadata.name, l.spec))
                .collect();
            let specs: Vec<SfcLinkSpec> = links.iter().map(|(_, l)| l.clone()).collect();
            let (resource, apps) = network_chaining(&chain, &selectors, &networks, &specs)?;
            let clusters = clusters_with_all(cx, &apps).await?;
            if clusters.is_empty() {
                return Err(Error::failed_precondition(format!(
                    "There are no clusters with all the apps for the Network Chain: {name}"
                )));
            }
            // sfc adds nothing for a link label that is not one `key=value`.
            let mut labelled = Vec::new();
            for (link, spec) in &links {
                match spec
                    .link_label
                    .split_once('=')
                    .filter(|(_, v)| !v.contains('='))
                {
                    Some((k, v)) => {
                        labelled.push((link, spec, BTreeMap::from([(k.to_owned(), v.to_owned())])))
                    }
                    None => {
                        tracing::warn!(%link, label = %spec.link_label, "SFC link label has invalid format");
                    }
                }
            }
            cx.handle_mut().add_app(CHAINING_APP).await?;
            for cluster in &clusters {
                cx.handle_mut().add_cluster(CHAINING_APP, cluster).await?;
                cx.handle_mut()
                    .put_resource(
                        CHAINING_APP,
                        cluster,
                        &ResourceName::new(&name, CHAINING_KIND).to_string(),
                        resource.clone(),
                    )
                    .await?;
                for (link, spec, labels) in &labelled {
                    label_workload(
                        cx,
                        (&spec.app, cluster),
                        (&spec.workload_resource, &spec.resource_type),
                        labels,
                        link,
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }
}

/// The sfcclient action controller: attaches the DIG's client workloads to their chain ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct SfcClient;

#[async_trait]
impl ActionController for SfcClient {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let m = cx.meta().await?;
        let dig_name = m.deployment_intent_group.clone();
        let dig = cx.dig_key().await?;
        let store = Arc::clone(cx.resource_store()?);
        let labels_missing = format!(
            "Error getting logical namespace labels for SFC Client Deployment Intent Group: {dig_name}"
        );
        let group = Collection::<DeploymentIntentGroup>::new(Arc::clone(&store), keys::DIG)
            .get(
                &keys::composite_app(&m.project, &m.composite_app, &m.version),
                &dig_name,
            )
            .await
            .map_err(wrap(labels_missing.clone()))?;
        let cloud = Collection::<LogicalCloud>::new(Arc::clone(&store), keys::LOGICAL_CLOUD)
            .get(&keys::project(&m.project), &group.spec.logical_cloud)
            .await
            .map_err(wrap(labels_missing))?;
        let namespace_labels = cloud.spec.labels.unwrap_or_default();
        let clients = cx
            .children::<SfcClientIntent>(&dig)
            .await
            .map_err(wrap(format!(
                "Error getting SFC Client Intents for Deployment Intent Group: {dig_name}"
            )))?;
        if clients.is_empty() {
            return Err(Error::not_found(format!(
                "No SFC Client Intents are defined for the Deployment Intent Group: {dig_name}"
            )));
        }
        for (_, client) in clients {
            let s = &client.spec;
            let (chain, end) = (&s.sfc_intent, &s.chain_end);
            let chain_key = keys::dig(
                &m.project,
                &s.composite_app,
                &s.composite_app_version,
                &s.deployment_intent_group,
            )
            .child(SfcIntent::PARAM, chain);
            let selectors = cx
                .children::<SfcClientSelectorIntent>(&chain_key)
                .await
                .map_err(wrap(format!(
                    "Error finding SFC Client Selector Intents for {chain} by end: {end}"
                )))?;
            let at_end: Vec<&ClientSelectorSpec> = selectors
                .iter()
                .map(|(_, sel)| &sel.spec)
                .filter(|sel| sel.chain_end == *end)
                .collect();
            if at_end.is_empty() {
                return Err(Error::not_found(format!(
                    "No SFC Client Selector Intents found for {chain} by end: {end}"
                )));
            }
            let matched = at_end.iter().find(|sel| {
                let wanted = &sel.namespace_selector.match_labels;
                !wanted.is_empty()
                    && wanted
                        .iter()
                        .all(|(k, v)| namespace_labels.get(k) == Some(v))
            });
            let Some(labels) = matched
                .map(|sel| &sel.pod_selector.match_labels)
                .filter(|l| !l.is_empty())
            else {
                return Err(Error::not_found(format!(
                    "No matching SFC Client Selector Intents found for {chain} by end: {end}"
                )));
            };
            let clusters = cx
                .clusters(&s.app)
                .await
                .map_err(wrap(format!("Error getting clusters for app: {}", s.app)))?;
            for cluster in clusters {
                label_workload(
                    cx,
                    (&s.app, &cluster),
                    (&s.workload_resource, &s.resource_type),
                    labels,
                    &client.metadata.name,
                )
                .await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn link(left: &str, right: &str, label: &str) -> SfcLinkSpec {
        SfcLinkSpec {
            left_net: left.into(),
            right_net: right.into(),
            link_label: label.into(),
            app: label.trim_start_matches("app=").into(),
            workload_resource: label.trim_start_matches("app=").into(),
            resource_type: "Deployment".into(),
        }
    }

    /// EMCO's examples/sfc chain: three functions between four networks, links in any order.
    #[test]
    fn the_chain_string_follows_the_links_from_the_leftmost_network() {
        let links = [
            link("dync-net2", "virtual-net2", "app=sdewan"),
            link("virtual-net1", "dync-net1", "app=slb"),
            link("dync-net1", "dync-net2", "app=ngfw"),
        ];
        let (chain, apps) = chain_of(&links).unwrap();
        assert_eq!(
            chain,
            "net=virtual-net1,app=slb,net=dync-net1,app=ngfw,net=dync-net2,app=sdewan,net=virtual-net2"
        );
        assert_eq!(
            apps.into_iter().collect::<Vec<_>>(),
            ["ngfw", "sdewan", "slb"]
        );
    }

    #[test]
    fn links_that_are_not_one_path_are_refused() {
        let msg = |links: &[SfcLinkSpec]| chain_of(links).unwrap_err().to_string();
        assert_eq!(msg(&[]), "No SFC Link Intents");
        assert!(
            msg(&[link("a", "b", "app=x"), link("a", "c", "app=y")])
                .starts_with("Duplicate Left Network in SFC Link Intent: ")
        );
        assert!(
            msg(&[link("a", "c", "app=x"), link("b", "c", "app=y")])
                .starts_with("Duplicate Right Network in SFC Link Intent: ")
        );
        assert!(
            msg(&[link("a", "b", "app=x"), link("b", "c", "app=x")])
                .starts_with("Duplicate Link Labelin SFC Link Intent: ")
        );
        assert_eq!(
            msg(&[link("a", "b", "app=x"), link("c", "d", "app=y")]),
            "Multiple leftmost Networks in SFC Link Intents"
        );
        // A path plus a separate cycle: one leftmost network, too few elements.
        assert_eq!(
            msg(&[
                link("a", "b", "app=x"),
                link("c", "d", "app=y"),
                link("d", "c", "app=z")
            ]),
            "Invalid set of SFC link intents"
        );
        // Only a cycle: no leftmost network.
        assert_eq!(
            msg(&[link("a", "b", "app=x"), link("b", "a", "app=y")]),
            "No SFC Link Intents"
        );
    }

    fn selector(end: &str, pods: &str, namespaces: &str) -> ClientSelectorSpec {
        let labels = |v: &str| LabelSelector {
            match_labels: BTreeMap::from([("sfc".to_owned(), v.to_owned())]),
            match_expressions: Vec::new(),
        };
        ClientSelectorSpec {
            chain_end: end.into(),
            pod_selector: labels(pods),
            namespace_selector: labels(namespaces),
        }
    }

    fn network(end: &str, name: &str, gw: &str, subnet: &str) -> ProviderNetworkSpec {
        ProviderNetworkSpec {
            chain_end: end.into(),
            provider_network: name.into(),
            gateway_ip: gw.into(),
            subnet: subnet.into(),
        }
    }

    /// resources.go: selectors per end, then provider networks merged into them by position
    /// and appended past them.
    #[test]
    fn the_network_chaining_resource_as_sfc_builds_it() {
        let intent = SfcIntent {
            metadata: Metadata::named("sfc-intent"),
            spec: SfcIntentSpec {
                chain_type: "Routing".into(),
                namespace: "default".into(),
            },
        };
        let selectors = [
            selector("left", "head", "head"),
            selector("right", "tail", "tail"),
        ];
        let networks = [
            network("left", "left-pnetwork", "172.30.10.2", "172.30.10.0/24"),
            network("right", "right-pnetwork", "172.30.20.2", "172.30.20.0/24"),
            network("right", "right-2", "172.30.30.2", "172.30.30.0/24"),
        ];
        let links = [
            link("virtual-net1", "dync-net1", "app=slb"),
            link("dync-net1", "virtual-net2", "app=ngfw"),
        ];
        let (cr, apps) = network_chaining(&intent, &selectors, &networks, &links).unwrap();
        assert_eq!(apps.into_iter().collect::<Vec<_>>(), ["ngfw", "slb"]);
        assert_eq!(
            cr,
            json!({
                "apiVersion": "k8s.plugin.opnfv.org/v1alpha1",
                "kind": "NetworkChaining",
                "metadata": {"name": "sfc-intent"},
                "spec": {"chainType": "Routing", "routingSpec": {
                    "namespace": "default",
                    "networkChain": "net=virtual-net1,app=slb,net=dync-net1,app=ngfw,net=virtual-net2",
                    "left": [{"gatewayIp": "172.30.10.2", "networkName": "left-pnetwork",
                        "subnet": "172.30.10.0/24",
                        "podSelector": {"matchLabels": {"sfc": "head"}},
                        "namespaceSelector": {"matchLabels": {"sfc": "head"}}}],
                    "right": [
                        {"gatewayIp": "172.30.20.2", "networkName": "right-pnetwork",
                         "subnet": "172.30.20.0/24",
                         "podSelector": {"matchLabels": {"sfc": "tail"}},
                         "namespaceSelector": {"matchLabels": {"sfc": "tail"}}},
                        {"gatewayIp": "172.30.30.2", "networkName": "right-2",
                         "subnet": "172.30.30.0/24", "podSelector": {}, "namespaceSelector": {}}
                    ]}}
            })
        );
        let err = |s: &[ClientSelectorSpec], n: &[ProviderNetworkSpec]| {
            network_chaining(&intent, s, n, &links)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(&[], &[]),
            "provider network or client selector intents were not provided for SFC: sfc-intent"
        );
        assert_eq!(
            err(&selectors[1..], &[]),
            "provider network or client selector intents were not provided for left end of SFC: sfc-intent"
        );
        assert_eq!(
            err(&[], &networks[..1]),
            "provider network or client selector intents were not provided for right end of SFC: sfc-intent"
        );
    }
}
