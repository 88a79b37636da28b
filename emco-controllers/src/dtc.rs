//! dtc, the distributed traffic controller: its intents and its registry of sub-controllers,
//! served at EMCO's URLs with dtc's checks, codes and texts (src/dtc/api, src/dtc/pkg/module).
//!
//! Under a DIG, a `traffic-group-intents/{trafficGroupIntent}` groups the
//! `inbound-intents/{inboundServerIntent}` of server apps (the service and port clients reach),
//! each with the `clients/{inboundClientsIntent}` allowed to reach it, and each client's
//! `access-points/{inboundClientsAccessIntent}` (which URLs and methods). `/v2/dtc-controllers`
//! registers the sub-controllers (nps, its, sds, swc) dtc calls in priority order.
//!
//! [`Dtc`] is the action controller a DIG names with `dtc: <trafficGroupIntent>` in its
//! `/intents`: it calls the registered sub-controllers, higher priority first; [`Nps`] is the
//! network policy one.
//!
//! As dtc: a create or PUT of an intent first looks up the deployment intent group (404
//! `deploymentIntentGroup not found`), a POST checks the body against dtc's JSON schema (PUT
//! does not), then the metadata as Kubernetes label values; PUT answers 201; lists are `null`
//! when empty and check no parent.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use emco_controller_sdk::intent::{Dig, IntentType};
use emco_controller_sdk::{ActionController, ControllerContext, ControllerRegistry, resource_name};
use emco_core::model::Controller;
use emco_core::validate::go_name_errors;
use emco_core::{Error, Metadata, Object, Result};
use emco_rest::{Collection, PutStatus, Routes, Wording};
use emco_store::{ResourceKey, ResourceStore};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `DIG/traffic-group-intents/{trafficGroupIntent}`: `{metadata}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
// dtc's PUT handlers check no schema.
#[object(check = |i: &Self| check_metadata("traffic group intent", &i.metadata), schema = emco_core::schemas::METADATA, schema_on_put = false)]
#[intent(parent = Dig, segment = "traffic-group-intents", param = "trafficGroupIntent",
    wording = intent_wording("Traffic group intent not found", "TrafficGroupIntent already exists", 0))]
pub struct TrafficGroupIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../inbound-intents/{inboundServerIntent}`: a server app's service clients may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(check = |i: &Self| check_metadata("inbound server intent", &i.metadata), schema = INBOUND_SERVER, schema_on_put = false)]
#[intent(parent = TrafficGroupIntent, segment = "inbound-intents", param = "inboundServerIntent",
    wording = intent_wording("Inbound server intent not found", "ServerInboundIntent already exists", 1))]
pub struct InboundServerIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The server.
    #[serde(default)]
    pub spec: InboundServerIntentSpec,
}

/// The `spec` of an [`InboundServerIntent`] (every field written, as dtc's Go struct).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundServerIntentSpec {
    /// The server app.
    #[serde(default)]
    pub app: String,
    /// The label selecting its pods (`app=web`).
    #[serde(default)]
    pub app_label: String,
    /// Its Service.
    #[serde(default)]
    pub service_name: String,
    /// An external DNS name for it.
    #[serde(default)]
    pub external_name: String,
    /// The port clients reach.
    #[serde(default)]
    pub port: i64,
    /// `TCP`, `UDP`, ...
    #[serde(default)]
    pub protocol: String,
    /// Reachable from outside the clusters.
    #[serde(default)]
    pub external_support: bool,
    /// `istio` or none.
    #[serde(default)]
    pub service_mesh: String,
    /// The service mesh's settings.
    #[serde(default)]
    pub management: ServiceMeshManagement,
    /// Certificates for external access.
    #[serde(default)]
    pub external: ExternalInfo,
    /// `sdewan` or none.
    #[serde(default, rename = "edgeCNF")]
    pub edge_cnf: String,
}

/// A server's service mesh settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMeshManagement {
    /// Whether the pods get a sidecar proxy (`yes`).
    #[serde(default)]
    pub sidecar_proxy: String,
    /// `MUTUAL`, `SIMPLE`, ...
    #[serde(default)]
    pub tls_type: String,
}

/// A server's certificates for external access.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalInfo {
    /// The certificates.
    #[serde(default)]
    pub external_certs: ExternalCerts,
}

/// PEM texts, base64 encoded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalCerts {
    /// The service's certificate.
    #[serde(default)]
    pub service_certificate: String,
    /// Its private key.
    #[serde(default)]
    pub service_private_key: String,
    /// The CA's certificate.
    #[serde(default)]
    pub ca_certificate: String,
}

/// `.../clients/{inboundClientsIntent}`: an app allowed to reach the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(check = |i: &Self| check_metadata("inbound clients intent", &i.metadata), schema = INBOUND_CLIENTS, schema_on_put = false)]
#[intent(parent = InboundServerIntent, segment = "clients", param = "inboundClientsIntent",
    wording = intent_wording("Inbound clients intent not found", "InboundClientsIntent already exists", 2))]
pub struct InboundClientsIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The client.
    #[serde(default)]
    pub spec: InboundClientsIntentSpec,
}

/// The `spec` of an [`InboundClientsIntent`]. The lists are `null` when absent, as Go's nil
/// slices, which the schema refuses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundClientsIntentSpec {
    /// The client app (`*` for any).
    #[serde(default)]
    pub app: String,
    /// The label selecting its pods.
    #[serde(default)]
    pub app_label: String,
    /// Its Service.
    #[serde(default)]
    pub service_name: String,
    /// Namespaces whose pods may reach the server.
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
    /// Networks that may reach the server.
    #[serde(default)]
    pub cidrs: Option<Vec<String>>,
}

/// `.../access-points/{inboundClientsAccessIntent}`: what a client may do on the server.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
// dtc's own texts; EMCO's dtc answers these two with a 500 (its error table lacks them) and
// refuses every access point (its referential schema lacks the type).
#[object(check = |i: &Self| check_metadata("inbound clients access intent", &i.metadata), schema = INBOUND_CLIENTS_ACCESS, schema_on_put = false)]
#[intent(parent = InboundClientsIntent, segment = "access-points", param = "inboundClientsAccessIntent",
    wording = intent_wording("Inbound clients access intent not found", "InboundClientsAccessIntent already exists", 3))]
pub struct InboundClientsAccessIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The access.
    #[serde(default)]
    pub spec: InboundClientsAccessIntentSpec,
}

/// The `spec` of an [`InboundClientsAccessIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundClientsAccessIntentSpec {
    /// `ALLOW`.
    #[serde(default)]
    pub action: String,
    /// URL paths (`/status/*`).
    #[serde(default)]
    pub url: Option<Vec<String>>,
    /// Methods (`GET`, `PUT`, `POST`, `DELETE`).
    #[serde(default)]
    pub access: Option<Vec<String>>,
}

/// `/v2/dtc-controllers/{dtcController}`: a sub-controller dtc calls, higher priority first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
// Only dtc's controller.json checks a sub-controller (type `action`, priority 1 to 100, port
// 1 to 65535), on POST and PUT.
#[object(schema = CONTROLLER)]
pub struct DtcController {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// Where it listens.
    #[serde(default)]
    pub spec: DtcControllerSpec,
}

/// The `spec` of a [`DtcController`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DtcControllerSpec {
    /// Its host.
    #[serde(default)]
    pub host: String,
    /// Its gRPC port.
    #[serde(default)]
    pub port: i64,
    /// `action`.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// 1 to 100; higher runs first.
    #[serde(default)]
    pub priority: i64,
}

emco_go::schemas! {
    INBOUND_SERVER = "../schemas/dtc/inbound-server.json";
    INBOUND_CLIENTS = "../schemas/dtc/inbound-clients.json";
    INBOUND_CLIENTS_ACCESS = "../schemas/dtc/inbound-clients-access.json";
    CONTROLLER = "../schemas/dtc/controller.json";
}

/// The 404 of a create or PUT under a missing deployment intent group (EMCO's shared apierror
/// entry for the orchestrator's `DeploymentIntentGroup not found`).
pub const DIG_MISSING: &str = "deploymentIntentGroup not found";

/// dtc's checks of an intent's metadata (module_definitions.go `IsValidMetadata`, wrapped by
/// the handler as `Invalid <what> metadata: ...`). An empty name is the PUT handler's
/// `Missing name in PUT request` (on POST the schema refuses it first).
fn check_metadata(what: &str, m: &Metadata) -> Result<()> {
    if m.name.is_empty() {
        return Err(Error::invalid("Missing name in PUT request"));
    }
    let errs = go_name_errors(&m.name);
    if !errs.is_empty() {
        return Err(Error::invalid(format!(
            "Invalid {what} metadata: Invalid Metadata name=[{}], errors: [{}]",
            m.name,
            errs.join(" ")
        )));
    }
    // Each of description, userData1 and userData2 at most 1024 characters; dtc's messages
    // all say `description`.
    for text in [&m.description, &m.user_data1, &m.user_data2] {
        if text.len() > 1024 {
            return Err(Error::invalid(format!(
                "Invalid {what} metadata: Invalid Metadata description=[{text}], errors: \
                 [string length is greater than the maximum constraint]"
            )));
        }
    }
    Ok(())
}

/// dtc's wording of an intent type `levels` below the DIG (src/dtc/api/apierrors.go).
fn intent_wording(not_found: &'static str, exists: &'static str, levels: usize) -> Wording {
    Wording::new(not_found, exists)
        .with_put(PutStatus::Created)
        .with_ancestor_first(levels, DIG_MISSING)
        .with_list_checks(&[])
}

/// The child type of dtc's sub-controller registry.
pub const DTC_CONTROLLER: &str = "dtcController";

/// dtc's REST routes over `store`: the four intent levels under a DIG and
/// `/v2/dtc-controllers`.
pub fn routes<S: Clone + Send + Sync + 'static>(store: Arc<dyn ResourceStore>) -> axum::Router<S> {
    let controllers = Routes::<DtcController>::new("/v2/dtc-controllers", DTC_CONTROLLER)
        .wording(
            Wording::new("Controller not found", "Controller already exists")
                .with_put(PutStatus::Created),
        )
        .router(Arc::clone(&store));
    TrafficGroupIntent::routes(Arc::clone(&store))
        .merge(InboundServerIntent::routes(Arc::clone(&store)))
        .merge(InboundClientsIntent::routes(Arc::clone(&store)))
        .merge(InboundClientsAccessIntent::routes(store))
        .merge(controllers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(external: bool) -> InboundServerIntent {
        let mut s = InboundServerIntent::default();
        s.metadata.name = "isi".into();
        s.spec.app = "server".into();
        s.spec.app_label = "app=server".into();
        s.spec.port = 53;
        s.spec.protocol = "UDP".into();
        s.spec.external_support = external;
        s
    }

    fn client(label: &str, cidrs: &[&str]) -> InboundClientsIntent {
        let mut c = InboundClientsIntent::default();
        c.spec.app_label = label.into();
        c.spec.cidrs = Some(cidrs.iter().map(|s| (*s).to_owned()).collect());
        c
    }

    /// nps's policies, as its structs marshal them (research notes of src/nps, checked
    /// against its action_test.go with gopkg.in/yaml.v2).
    #[test]
    fn network_policies_as_nps_writes_them() {
        let clients = [
            client("app=client", &["10.0.0.0/8", "192.168.1.0/24"]),
            client("", &["1.2.3.0/24"]),
        ];
        let p = network_policy("tgi", &server(true), &clients).unwrap();
        assert_eq!(
            p,
            json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "tgi-isi"},
                "spec": {"podSelector": {"matchLabels": {"app": "server"}},
                    "policyTypes": ["Ingress"],
                    "ingress": [{"from": [
                        {"podSelector": {"matchLabels": {"app": "client"}}},
                        {"ipBlock": {"cidr": "10.0.0.0/8"}},
                        {"ipBlock": {"cidr": "192.168.1.0/24"}},
                        {"ipBlock": {"cidr": "1.2.3.0/24"}}],
                        "ports": [{"protocol": "UDP"}, {"port": 53}]}]}})
        );
        // Without externalSupport the CIDRs are ignored and any source is admitted.
        let p = network_policy("tgi", &server(false), &clients[..1]).unwrap();
        assert_eq!(
            p["spec"]["ingress"][0]["from"],
            json!([{"podSelector": {"matchLabels": {"app": "client"}}},
                   {"ipBlock": {"cidr": "0.0.0.0/0"}}])
        );
        // Nothing to admit: the rule has ports only (any source).
        let p = network_policy("tgi", &server(true), &[client("", &[])]).unwrap();
        assert_eq!(
            p["spec"]["ingress"],
            json!([{"ports": [{"protocol": "UDP"}, {"port": 53}]}])
        );
        let mut bad = server(true);
        bad.spec.app_label = "a=b=c".into();
        let e = network_policy("tgi", &bad, &clients).unwrap_err();
        assert_eq!(e.message(), "Not a valid app label");
    }

    #[test]
    fn names_as_kubernetes_label_values() {
        assert!(go_name_errors("web-1_a.b").is_empty());
        assert_eq!(
            go_name_errors(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert_eq!(go_name_errors(""), ["name must have non-zero length"]);
        assert_eq!(go_name_errors("-a").len(), 1);
    }
}

/// What a sub-controller adds: `(app, cluster, object)`.
pub(crate) type Placed = Vec<(String, String, Value)>;

/// The key of the traffic group intent a sub-controller is called with, and the deployment's
/// namespace (`default` when it has none).
pub(crate) async fn traffic_group(cx: &ControllerContext) -> Result<(ResourceKey, String)> {
    let (key, _) = cx.intent::<TrafficGroupIntent>().await?;
    let meta = cx.meta().await?;
    let namespace = if meta.namespace.is_empty() {
        "default".to_owned()
    } else {
        meta.namespace
    };
    Ok((key, namespace))
}

/// The value of the cluster kv-pair `key` as text; its absence is the sub-controllers'
/// `Error getting <what>: Cluster kvpair not found`.
pub(crate) fn required_kv(kv: &BTreeMap<String, Value>, key: &str, what: &str) -> Result<String> {
    kv.get(key)
        .map(emco_core::model::kv_value_text)
        .ok_or_else(|| Error::not_found(format!("Error getting {what}: Cluster kvpair not found")))
}

/// Adds the objects `placed`, each as `name+Kind` under its app and cluster (everything is
/// built before anything is written, as the sub-controllers do).
pub(crate) async fn put_placed(cx: &mut ControllerContext, placed: Placed) -> Result<()> {
    for (app, cluster, object) in placed {
        let name = resource_name(&object)?;
        cx.put_resource(&app, &cluster, &name, object).await?;
    }
    Ok(())
}

/// The cluster label that lets nps add NetworkPolicies on a cluster (nps's action.go).
pub const NETWORK_POLICY_LABEL: &str = "networkpolicy-supported";

/// dtc as an action controller: calls the sub-controllers registered in `/v2/dtc-controllers`,
/// highest `priority` first, each with the DIG's traffic group intent. As dtc, a sub-controller
/// that fails is logged and the rest still run: dtc itself never fails the deployment. The
/// sub-controllers given to [`Dtc::with_sub`] run in-process; the others are called over
/// EMCO's gRPC `contextupdate` protocol at their registered host and port.
#[derive(Clone, Default)]
pub struct Dtc {
    subs: Vec<(String, Arc<dyn ActionController>)>,
}

impl std::fmt::Debug for Dtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let subs: Vec<&str> = self.subs.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Dtc").field("in_process", &subs).finish()
    }
}

impl Dtc {
    /// dtc with no in-process sub-controller; it works on the stores of each call (the
    /// resource store holds the registry and the intents).
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs the sub-controller registered as `name` in-process.
    #[must_use]
    pub fn with_sub(mut self, name: impl Into<String>, sub: Arc<dyn ActionController>) -> Self {
        self.subs.push((name.into(), sub));
        self
    }
}

#[async_trait]
impl ActionController for Dtc {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let Some(intent) = cx.intent_name().map(str::to_owned) else {
            return Err(Error::failed_precondition("the request names no intent"));
        };
        let store = Arc::clone(cx.resource_store()?);
        let mut subs = Collection::<DtcController>::new(store, DTC_CONTROLLER)
            .list(&ResourceKey::root(), &[])
            .await?;
        // Stable, so equal priorities keep the order they were registered in.
        subs.sort_by_key(|c| std::cmp::Reverse(c.spec.priority));
        let mut registry = ControllerRegistry::new(cx.stores());
        for (name, sub) in &self.subs {
            registry = registry.with_action(name.clone(), Arc::clone(sub));
        }
        for sub in subs {
            let name = sub.metadata.name.clone();
            let controller: Controller = serde_json::to_value(&sub)
                .and_then(serde_json::from_value)
                .map_err(|e| Error::internal("a dtc controller record").with_source(e))?;
            let intents = BTreeMap::from([(name.clone(), intent.clone())]);
            if let Err(e) = registry
                .act(&[controller], &intents, cx.id(), cx.update_from())
                .await
            {
                tracing::error!(sub_controller = %name, error = %e, "dtc: sub-controller failed");
            }
        }
        Ok(())
    }
}

/// nps, dtc's network policy sub-controller: for every inbound intent of the traffic group
/// that has clients, a NetworkPolicy `<trafficGroupIntent>-<inboundServerIntent>` admitting
/// the clients' pods (their `appLabel`) to the server's pods (its `appLabel`) on its port, on
/// each of the server app's clusters labelled `networkpolicy-supported` (src/nps/internal/
/// networkpolicy). As nps: client CIDRs are admitted only when the server has
/// `externalSupport`, otherwise any source (`0.0.0.0/0`) is; the protocol and the port are two
/// entries of `ports`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nps;

#[async_trait]
impl ActionController for Nps {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let (tgi_key, tgi) = cx.intent::<TrafficGroupIntent>().await?;
        let servers = cx.children::<InboundServerIntent>(&tgi_key).await?;
        if servers.is_empty() {
            let m = cx.meta().await?;
            return Err(Error::not_found(format!(
                "ServerInboundIntents not found for {}/{}/{}/{}/{}.",
                tgi.metadata.name, m.project, m.composite_app, m.version, m.deployment_intent_group
            )));
        }
        for (key, server) in servers {
            let clients = cx.children::<InboundClientsIntent>(&key).await?;
            if clients.is_empty() {
                continue;
            }
            let clients: Vec<InboundClientsIntent> = clients.into_iter().map(|(_, c)| c).collect();
            let policy = network_policy(&tgi.metadata.name, &server, &clients)?;
            let app = server.spec.app.clone();
            for cluster in cx.clusters(&app).await? {
                // A cluster nps cannot read the labels of is skipped, as one without the label.
                let supported = cx
                    .cluster_labels(&cluster)
                    .await
                    .is_ok_and(|l| l.contains(NETWORK_POLICY_LABEL));
                if supported {
                    cx.put_resource(&app, &cluster, &resource_name(&policy)?, policy.clone())
                        .await?;
                }
            }
        }
        Ok(())
    }
}

/// `k=v` as a one-label selector.
fn label_selector(label: &str) -> Result<Value> {
    match label.split('=').collect::<Vec<_>>().as_slice() {
        [k, v] => Ok(json!({"matchLabels": {(*k): v}})),
        _ => Err(Error::invalid("Not a valid app label")),
    }
}

/// nps's NetworkPolicy for `server` and its `clients` in traffic group `tgi`.
fn network_policy(
    tgi: &str,
    server: &InboundServerIntent,
    clients: &[InboundClientsIntent],
) -> Result<Value> {
    let spec = &server.spec;
    let pods = label_selector(&spec.app_label)?;
    let mut from = Vec::new();
    for c in clients {
        if !c.spec.app_label.is_empty() {
            from.push(json!({"podSelector": label_selector(&c.spec.app_label)?}));
        }
        if spec.external_support {
            for cidr in c.spec.cidrs.iter().flatten() {
                from.push(json!({"ipBlock": {"cidr": cidr}}));
            }
        }
    }
    if !spec.external_support {
        from.push(json!({"ipBlock": {"cidr": "0.0.0.0/0"}}));
    }
    let protocol = if spec.protocol.is_empty() {
        json!({})
    } else {
        json!({"protocol": spec.protocol})
    };
    let mut rule = serde_json::Map::new();
    if !from.is_empty() {
        rule.insert("from".to_owned(), Value::Array(from));
    }
    rule.insert("ports".to_owned(), json!([protocol, {"port": spec.port}]));
    Ok(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": format!("{tgi}-{}", server.metadata.name)},
        "spec": {
            "podSelector": pods,
            "policyTypes": ["Ingress"],
            "ingress": [Value::Object(rule)],
        },
    }))
}
