//! dtc, the distributed traffic controller: its intents and its registry of sub-controllers,
//! served at EMCO's URLs with dtc's checks, codes and texts (src/dtc/api, src/dtc/pkg/module).
//!
//! Under a DIG, a `traffic-group-intents/{trafficGroupIntent}` groups the
//! `inbound-intents/{inboundServerIntent}` of server apps (the service and port clients reach),
//! each with the `clients/{inboundClientsIntent}` allowed to reach it, and each client's
//! `access-points/{inboundClientsAccessIntent}` (which URLs and methods). `/v2/dtc-controllers`
//! registers the sub-controllers (nps, its, sds, swc) dtc calls in priority order.
//!
//! As dtc: a create or PUT of an intent first looks up the deployment intent group (404
//! `deploymentIntentGroup not found`), a POST checks the body against dtc's JSON schema (PUT
//! does not), then the metadata as Kubernetes label values; PUT answers 201; lists are `null`
//! when empty and check no parent.

use std::sync::{Arc, LazyLock};

use emco_appcontext::ResourceStore;
use emco_controller_sdk::intent::{Dig, IntentType};
use emco_controller_sdk::rest::{PutStatus, Routes, Wording};
use emco_core::model::Named;
use emco_core::{Error, Metadata, Result, Validate};
use emco_go::jsonschema::Schema;
use serde::{Deserialize, Serialize};

/// `DIG/traffic-group-intents/{trafficGroupIntent}`: `{metadata}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficGroupIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
}

/// `.../inbound-intents/{inboundServerIntent}`: a server app's service clients may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

macro_rules! schema {
    ($name:ident, $file:literal) => {
        static $name: LazyLock<Schema> = LazyLock::new(|| {
            Schema::parse(include_str!(concat!("../schemas/dtc/", $file))).expect(concat!(
                "schemas/dtc/",
                $file,
                " compiles"
            ))
        });
    };
}
schema!(INBOUND_SERVER, "inbound-server.json");
schema!(INBOUND_CLIENTS, "inbound-clients.json");
schema!(INBOUND_CLIENTS_ACCESS, "inbound-clients-access.json");
schema!(CONTROLLER, "controller.json");

/// The 404 of a create or PUT under a missing deployment intent group (EMCO's shared apierror
/// entry for the orchestrator's `DeploymentIntentGroup not found`).
pub const DIG_MISSING: &str = "deploymentIntentGroup not found";

/// k8s `IsValidLabelValue` and EMCO's `IsValidName`: the problems of `name`.
fn name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    let bytes = name.as_bytes();
    let edge = |b: u8| b.is_ascii_alphanumeric();
    let inner = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let valid = bytes.is_empty()
        || (edge(bytes[0]) && edge(bytes[bytes.len() - 1]) && bytes.iter().all(|&b| inner(b)));
    if !valid {
        errs.push(
            "a valid label must be an empty string or consist of alphanumeric characters, \
             '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
             'MyValue',  or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_owned(),
        );
    }
    if name.is_empty() {
        errs.push("name must have non-zero length".to_owned());
    }
    errs
}

/// dtc's checks of an intent's metadata (module_definitions.go `IsValidMetadata`, wrapped by
/// the handler as `Invalid <what> metadata: ...`). An empty name is the PUT handler's
/// `Missing name in PUT request` (on POST the schema refuses it first).
fn check_metadata(what: &str, m: &Metadata) -> Result<()> {
    if m.name.is_empty() {
        return Err(Error::invalid("Missing name in PUT request"));
    }
    let errs = name_errors(&m.name);
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

macro_rules! intent {
    ($ty:ty, $what:literal, $schema:expr) => {
        impl Named for $ty {
            fn name(&self) -> &str {
                &self.metadata.name
            }
        }

        impl Validate for $ty {
            fn validate(&self) -> Result<()> {
                check_metadata($what, &self.metadata)
            }

            fn schema() -> Option<&'static Schema> {
                Some($schema)
            }

            /// dtc's PUT handlers check no schema.
            fn schema_on_put() -> bool {
                false
            }
        }
    };
}
intent!(
    TrafficGroupIntent,
    "traffic group intent",
    &emco_core::schemas::METADATA
);
intent!(
    InboundServerIntent,
    "inbound server intent",
    &INBOUND_SERVER
);
intent!(
    InboundClientsIntent,
    "inbound clients intent",
    &INBOUND_CLIENTS
);
intent!(
    InboundClientsAccessIntent,
    "inbound clients access intent",
    &INBOUND_CLIENTS_ACCESS
);

/// dtc's wording of an intent type `levels` below the DIG (src/dtc/api/apierrors.go).
fn intent_wording(not_found: &'static str, exists: &'static str, levels: usize) -> Wording {
    Wording::new(not_found, exists)
        .with_put(PutStatus::Created)
        .with_ancestor_first(levels, DIG_MISSING)
        .with_list_checks(&[])
}

impl IntentType for TrafficGroupIntent {
    type Parent = Dig;
    const SEGMENT: &'static str = "traffic-group-intents";
    const PARAM: &'static str = "trafficGroupIntent";

    fn wording() -> Wording {
        intent_wording(
            "Traffic group intent not found",
            "TrafficGroupIntent already exists",
            0,
        )
    }
}

impl IntentType for InboundServerIntent {
    type Parent = TrafficGroupIntent;
    const SEGMENT: &'static str = "inbound-intents";
    const PARAM: &'static str = "inboundServerIntent";

    fn wording() -> Wording {
        intent_wording(
            "Inbound server intent not found",
            "ServerInboundIntent already exists",
            1,
        )
    }
}

impl IntentType for InboundClientsIntent {
    type Parent = InboundServerIntent;
    const SEGMENT: &'static str = "clients";
    const PARAM: &'static str = "inboundClientsIntent";

    fn wording() -> Wording {
        intent_wording(
            "Inbound clients intent not found",
            "InboundClientsIntent already exists",
            2,
        )
    }
}

impl IntentType for InboundClientsAccessIntent {
    type Parent = InboundClientsIntent;
    const SEGMENT: &'static str = "access-points";
    const PARAM: &'static str = "inboundClientsAccessIntent";

    /// dtc's own texts; EMCO's dtc answers these two with a 500 (its error table lacks them)
    /// and refuses every access point (its referential schema lacks the type).
    fn wording() -> Wording {
        intent_wording(
            "Inbound clients access intent not found",
            "InboundClientsAccessIntent already exists",
            3,
        )
    }
}

impl Named for DtcController {
    fn name(&self) -> &str {
        &self.metadata.name
    }
}

/// Only dtc's controller.json checks a sub-controller (type `action`, priority 1 to 100, port
/// 1 to 65535), on POST and PUT.
impl Validate for DtcController {
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    fn schema() -> Option<&'static Schema> {
        Some(&CONTROLLER)
    }
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

    #[test]
    fn names_as_kubernetes_label_values() {
        assert!(name_errors("web-1_a.b").is_empty());
        assert_eq!(
            name_errors(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert_eq!(name_errors(""), ["name must have non-zero length"]);
        assert_eq!(name_errors("-a").len(), 1);
    }
}
