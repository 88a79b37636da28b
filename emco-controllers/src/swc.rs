//! swc, dtc's SD-EWAN sub-controller (src/swc/internal/sdewancc): for each inbound intent of the
//! traffic group whose server sits behind an SD-EWAN CNF (`edgeCNF: sdewan`),
//! - on every server cluster, a `CNFService` exposing the server's service through the CNF
//!   (`<svc>.<ns>.svc.cluster.local`, the CNF port, the service port and the allowed CIDR from
//!   the cluster's kv-pairs `SdewanCnfPort`, `SdewanServicePort`, `SdewanServiceAllowedCidr`);
//! - on every cluster of each client, a `SdewanApplication` named after the service, selecting
//!   the server's pods (its `appLabel`) with the ports of the server cluster.
//!
//! Both are `batch.sdewan.akraino.org/v1alpha1`, labelled `sdewanPurpose: base`, ports as
//! strings (as swc's structs hold them). Where swc stops at the first server that is not behind
//! a CNF we go on with the next; where it takes a client's ports from the server cluster at the
//! client's index (and fails past the last) we take the first server cluster's; an `appLabel`
//! without `=` is refused instead of crashing.

use async_trait::async_trait;
use emco_controller_sdk::{ActionController, ControllerContext};
use emco_core::{Error, Result};
use serde_json::{Value, json};

use crate::dtc::{
    InboundClientsIntent, InboundServerIntent, Placed, put_placed, required_kv, traffic_group,
};

const SDEWAN: &str = "batch.sdewan.akraino.org/v1alpha1";

/// A server cluster's CNF settings, from its kv-pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cnf {
    cluster: String,
    cnf_port: String,
    service_port: String,
    allowed_cidr: String,
}

fn metadata(name: &str, namespace: &str) -> Value {
    json!({"name": name, "namespace": namespace, "labels": {"sdewanPurpose": "base"}})
}

/// swc's objects for `server` on its clusters `cnfs` and for its clients (each with its
/// clusters), as `(app, cluster, object)`.
fn sdewan_resources(
    server: &InboundServerIntent,
    namespace: &str,
    cnfs: &[Cnf],
    clients: &[(InboundClientsIntent, Vec<String>)],
) -> Result<Placed> {
    let spec = &server.spec;
    let svc = spec.service_name.as_str();
    let fullname = format!("{svc}.{namespace}.svc.cluster.local");
    let mut out = Vec::new();
    for c in cnfs {
        let service = json!({"apiVersion": SDEWAN, "kind": "CNFService",
            "metadata": metadata(&fullname, namespace),
            "spec": {"fullname": fullname, "port": c.cnf_port, "dport": c.service_port,
                "cidr": c.allowed_cidr}});
        out.push((spec.app.clone(), c.cluster.clone(), service));
    }
    let Some(first) = cnfs.first() else {
        return Ok(out);
    };
    let (key, value) = spec
        .app_label
        .split_once('=')
        .ok_or_else(|| Error::invalid(format!("Not a valid app label: {:?}", spec.app_label)))?;
    for (client, clusters) in clients {
        for cluster in clusters {
            let app = json!({"apiVersion": SDEWAN, "kind": "SdewanApplication",
                "metadata": metadata(svc, namespace),
                "spec": {"appNamespace": namespace,
                    "podSelector": {"matchLabels": {(key): value}},
                    "servicePort": first.service_port, "cnfPort": first.cnf_port}});
            out.push((client.spec.app.clone(), cluster.clone(), app));
        }
    }
    Ok(out)
}

/// swc as an action controller (dtc calls it with the DIG's traffic group intent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Swc;

#[async_trait]
impl ActionController for Swc {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let (tgi_key, namespace) = traffic_group(cx).await?;
        let mut placed = Vec::new();
        for (key, server) in cx.children::<InboundServerIntent>(&tgi_key).await? {
            if server.spec.edge_cnf != "sdewan" {
                continue;
            }
            let mut cnfs = Vec::new();
            for cluster in cx.clusters(&server.spec.app).await? {
                let kv = cx.cluster_kv(&cluster).await?;
                cnfs.push(Cnf {
                    cnf_port: required_kv(&kv, "SdewanCnfPort", "sdewan cnf port")?,
                    service_port: required_kv(&kv, "SdewanServicePort", "sdewan service port")?,
                    allowed_cidr: required_kv(
                        &kv,
                        "SdewanServiceAllowedCidr",
                        "sdewan service allowed CIDR",
                    )?,
                    cluster,
                });
            }
            let mut clients = Vec::new();
            for (_, client) in cx.children::<InboundClientsIntent>(&key).await? {
                let clusters = cx.clusters(&client.spec.app).await?;
                clients.push((client, clusters));
            }
            placed.extend(sdewan_resources(&server, &namespace, &cnfs, &clients)?);
        }
        put_placed(cx, placed).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The worked example of the research notes of src/swc (checked there with yaml.v2 2.4.0).
    #[test]
    fn a_cnf_service_for_the_server_and_an_application_for_each_client_cluster() {
        let mut s = InboundServerIntent::default();
        s.spec.app = "http-server".into();
        s.spec.service_name = "http-service".into();
        s.spec.app_label = "app=http-server".into();
        s.spec.port = 3333;
        s.spec.edge_cnf = "sdewan".into();
        let mut c = InboundClientsIntent::default();
        c.spec.app = "http-client".into();
        c.spec.app_label = "app=http-client".into();
        let cnf = Cnf {
            cluster: "prov1+c1".into(),
            cnf_port: "1234".into(),
            service_port: "30001".into(),
            allowed_cidr: "10.0.0.0/8".into(),
        };
        let placed =
            sdewan_resources(&s, "default", &[cnf], &[(c, vec!["prov1+c2".into()])]).unwrap();
        assert_eq!(
            placed,
            [
                (
                    "http-server".to_owned(),
                    "prov1+c1".to_owned(),
                    json!({"apiVersion": "batch.sdewan.akraino.org/v1alpha1", "kind": "CNFService",
                        "metadata": {"name": "http-service.default.svc.cluster.local",
                            "namespace": "default", "labels": {"sdewanPurpose": "base"}},
                        "spec": {"fullname": "http-service.default.svc.cluster.local",
                            "port": "1234", "dport": "30001", "cidr": "10.0.0.0/8"}})
                ),
                (
                    "http-client".to_owned(),
                    "prov1+c2".to_owned(),
                    json!({"apiVersion": "batch.sdewan.akraino.org/v1alpha1",
                        "kind": "SdewanApplication",
                        "metadata": {"name": "http-service", "namespace": "default",
                            "labels": {"sdewanPurpose": "base"}},
                        "spec": {"appNamespace": "default",
                            "podSelector": {"matchLabels": {"app": "http-server"}},
                            "servicePort": "30001", "cnfPort": "1234"}})
                )
            ]
        );
        s.spec.app_label = "http-server".into();
        let mut c = InboundClientsIntent::default();
        c.spec.app = "x".into();
        let bad = Cnf {
            cluster: "p+c".into(),
            cnf_port: "1".into(),
            service_port: "2".into(),
            allowed_cidr: "3".into(),
        };
        let e = sdewan_resources(&s, "default", &[bad], &[(c, vec!["p+d".into()])]).unwrap_err();
        assert_eq!(e.message(), "Not a valid app label: \"http-server\"");
    }
}
