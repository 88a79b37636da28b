//! its, dtc's Istio traffic sub-controller (src/its/internal/istiosubc): for each inbound intent
//! of the traffic group whose server is in the `istio` mesh, the Istio resources that let its
//! clients in other clusters reach it through the server clusters' ingress gateways.
//!
//! With `svc` the server's service, `ns` the deployment's namespace and `host` the server's
//! name in another cluster (`svc.ns.<provider>.<cluster>`):
//! - on each server cluster that a client cluster differs from: a Gateway `svc-gateway`
//!   (`AUTO_PASSTHROUGH` on the gateway's internal port), a ServiceEntry `svc-se-server` and a
//!   DestinationRule `svc-se-server-dr` (`ISTIO_MUTUAL`), all in `istio-system`;
//! - on each client cluster that is not a server cluster (once, however many clients are
//!   there): ServiceEntries `svc-se-client0` (every server host, a `240.0.0.x` address, the
//!   gateways as endpoints) and `svc-se-client1` (the bare service name), and ISTIO_MUTUAL
//!   DestinationRules `svc-dr-client<i>` (one per server cluster) and `svc-dr-client-svcname`;
//! - the clients' access points as AuthorizationPolicies named after the server app, on every
//!   server cluster;
//! - for a server with `externalSupport` and a sidecar: a Gateway and VirtualService for its
//!   external name and, for `MUTUAL` or `SIMPLE` TLS, the Secret `svc-credential`.
//!
//! The gateways' addresses and ports are the server clusters' kv-pairs
//! `istioIngressGatewayAddress`, `istioIngressGatewayPort`, `istioIngressGatewayInternalPort`
//! (and `istioIngressGatewayHttpsPort` / `istioIngressGatewayHttpPort` for external access).
//!
//! Where its stops at the first server that is not in the mesh, we go on with the next; where
//! it takes a client's gateway endpoint from the server cluster at the client's index (and
//! fails past the last), a client reaches every server cluster's gateway.

use std::collections::BTreeMap;

use async_trait::async_trait;
use emco_controller_sdk::{ActionController, ControllerContext};
use emco_core::{Error, Result};
use serde_json::{Value, json};

use crate::dtc::{
    InboundClientsAccessIntent, InboundClientsIntent, InboundServerIntent, Placed, put_placed,
    required_kv, traffic_group,
};

const NETWORKING: &str = "networking.istio.io/v1beta1";
const SECURITY: &str = "security.istio.io/v1beta1";
const ISTIO_SYSTEM: &str = "istio-system";

/// The ingress gateway of a server cluster, from its kv-pairs.
#[derive(Debug, Clone)]
struct Gateway {
    cluster: String,
    address: String,
    external_port: u32,
    internal_port: u32,
    /// For external access: the HTTPS or HTTP port.
    access_port: Option<u32>,
}

/// its' allocator of client ServiceEntry addresses: 240.0.0.2 upwards.
struct Addresses(u8);

impl Addresses {
    fn next(&mut self) -> Result<String> {
        self.0 = self
            .0
            .checked_add(1)
            .ok_or_else(|| Error::failed_precondition("Out of ip address"))?;
        Ok(format!("240.0.0.{}", self.0))
    }
}

fn kv_text(kv: &BTreeMap<String, Value>, key: &str, what: &str) -> Result<String> {
    required_kv(kv, key, &format!("istio ingress gateway {what}"))
}

fn kv_port(kv: &BTreeMap<String, Value>, key: &str, what: &str) -> Result<u32> {
    kv_text(kv, key, what)?.trim().parse().map_err(|_| {
        Error::invalid(format!(
            "Error getting istio ingress gateway {what}: Error converting port from string to uint32"
        ))
    })
}

/// How clients outside the mesh reach a server (its `tlsType`).
struct External {
    /// The Gateway's TLS mode (none for plain HTTP).
    mode: Option<&'static str>,
    /// The part of the Gateway's name (`svc-ext-<part>-gateway`).
    part: &'static str,
    protocol: &'static str,
    /// The cluster kv-pair holding the gateway's port, and what it is called in errors.
    port_key: &'static str,
    port_what: &'static str,
}

/// The external access of a server that has `externalSupport` and a sidecar; `None` otherwise.
fn external_of(server: &InboundServerIntent) -> Result<Option<External>> {
    let spec = &server.spec;
    if !(spec.external_support && spec.management.sidecar_proxy == "yes") {
        return Ok(None);
    }
    let https = |mode, part| External {
        mode: Some(mode),
        part,
        protocol: "HTTPS",
        port_key: "istioIngressGatewayHttpsPort",
        port_what: "https port",
    };
    match spec.management.tls_type.as_str() {
        "MUTUAL" => Ok(Some(https("MUTUAL", "mutual"))),
        "SIMPLE" => Ok(Some(https("SIMPLE", "simple"))),
        "NONE" => Ok(Some(External {
            mode: None,
            part: "http",
            protocol: "HTTP",
            port_key: "istioIngressGatewayHttpPort",
            port_what: "http port",
        })),
        _ => Err(Error::invalid("Invalid tls type")),
    }
}

fn mutual_rule(name: &str, namespace: &str, host: &str) -> Value {
    json!({"apiVersion": NETWORKING, "kind": "DestinationRule",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"host": host, "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}}}})
}

fn tcp_port(server: &InboundServerIntent) -> Value {
    let mut port = json!({"name": "tcp", "number": server.spec.port});
    if !server.spec.protocol.is_empty() {
        port["protocol"] = json!(server.spec.protocol);
    }
    port
}

/// `svc.ns.<provider>.<cluster>` for a cluster `provider+cluster`.
fn server_host(svc: &str, ns: &str, cluster: &str) -> String {
    format!("{svc}.{ns}.{}", cluster.replace('+', "."))
}

/// its' resources for one server inbound intent and its clients (with their access points).
fn server_resources(
    server: &InboundServerIntent,
    namespace: &str,
    gateways: &[Gateway],
    clients: &[(
        InboundClientsIntent,
        Vec<String>,
        Vec<InboundClientsAccessIntent>,
    )],
    addresses: &mut Addresses,
) -> Result<Placed> {
    let spec = &server.spec;
    let svc = spec.service_name.as_str();
    let app = spec.app.as_str();
    let server_clusters: Vec<&str> = gateways.iter().map(|g| g.cluster.as_str()).collect();
    let hosts: Vec<String> = server_clusters
        .iter()
        .map(|c| server_host(svc, namespace, c))
        .collect();
    let mut out: Placed = Vec::new();

    // Clients in clusters the server is not in, each cluster once.
    let mut covered: Vec<&str> = Vec::new();
    for (client, clusters, _) in clients {
        for cluster in clusters {
            if server_clusters.contains(&cluster.as_str()) || covered.contains(&cluster.as_str()) {
                continue;
            }
            covered.push(cluster);
            let address = addresses.next()?;
            let endpoints: Vec<Value> = gateways
                .iter()
                .map(|g| json!({"address": g.address, "ports": {"tcp": g.external_port}}))
                .collect();
            let entry = |name: String, hosts: Value| {
                json!({"apiVersion": NETWORKING, "kind": "ServiceEntry",
                    "metadata": {"name": name, "namespace": namespace},
                    "spec": {"hosts": hosts, "addresses": [address], "location": "MESH_INTERNAL",
                        "resolution": "DNS", "ports": [tcp_port(server)], "endpoints": endpoints}})
            };
            let capp = client.spec.app.clone();
            out.push((
                capp.clone(),
                cluster.clone(),
                entry(format!("{svc}-se-client0"), json!(hosts)),
            ));
            out.push((
                capp.clone(),
                cluster.clone(),
                entry(format!("{svc}-se-client1"), json!([svc])),
            ));
            for (i, host) in hosts.iter().enumerate() {
                let rule = mutual_rule(&format!("{svc}-dr-client{i}"), namespace, host);
                out.push((capp.clone(), cluster.clone(), rule));
            }
            let rule = mutual_rule(&format!("{svc}-dr-client-svcname"), namespace, svc);
            out.push((capp, cluster.clone(), rule));
        }
    }

    // The server side, where some client is elsewhere.
    let elsewhere = |c: &str| clients.iter().any(|(_, cs, _)| cs.iter().any(|x| x != c));
    for (g, host) in gateways.iter().zip(&hosts) {
        if !elsewhere(&g.cluster) {
            continue;
        }
        let gateway = json!({"apiVersion": NETWORKING, "kind": "Gateway",
            "metadata": {"name": format!("{svc}-gateway"), "namespace": ISTIO_SYSTEM},
            "spec": {"servers": [{"port": {"name": "tls", "number": g.internal_port, "protocol": "TLS"},
                    "hosts": [host], "tls": {"mode": "AUTO_PASSTHROUGH"}, "name": "tls"}],
                "selector": {"istio": "ingressgateway"}}});
        let entry = json!({"apiVersion": NETWORKING, "kind": "ServiceEntry",
            "metadata": {"name": format!("{svc}-se-server"), "namespace": ISTIO_SYSTEM},
            "spec": {"hosts": [host], "exportTo": ["."], "location": "MESH_INTERNAL",
                "resolution": "DNS", "ports": [tcp_port(server)],
                "endpoints": [{"address": format!("{svc}.{namespace}")}]}});
        let rule = mutual_rule(&format!("{svc}-se-server-dr"), ISTIO_SYSTEM, host);
        for object in [gateway, entry, rule] {
            out.push((app.to_owned(), g.cluster.clone(), object));
        }
    }

    // External access to the server.
    let external = external_of(server)?;
    if let Some(&External {
        mode,
        part,
        protocol,
        ..
    }) = external.as_ref()
    {
        let gw_name = format!("{svc}-ext-{part}-gateway");
        for g in gateways {
            let port = g.access_port.unwrap_or_default();
            let mut server_port = json!({"port": {"name": "extsvc", "number": port, "protocol": protocol},
                "hosts": [spec.external_name], "name": "tls"});
            if let Some(mode) = mode {
                server_port["tls"] =
                    json!({"mode": mode, "credentialName": format!("{svc}-credential")});
            }
            let gateway = json!({"apiVersion": NETWORKING, "kind": "Gateway",
                "metadata": {"name": gw_name, "namespace": namespace},
                "spec": {"servers": [server_port], "selector": {"istio": "ingressgateway"}}});
            let route = json!({"apiVersion": NETWORKING, "kind": "VirtualService",
                "metadata": {"name": format!("{svc}-vs-{gw_name}"), "namespace": namespace},
                "spec": {"hosts": [spec.external_name], "gateways": [gw_name],
                    "http": [{"name": format!("{svc}-http-route"), "match": [{"port": port}],
                        "route": [{"destination": {"host": svc, "port": {"number": spec.port}}}]}]}});
            out.push((app.to_owned(), g.cluster.clone(), gateway));
            out.push((app.to_owned(), g.cluster.clone(), route));
            if mode.is_some() {
                let certs = &spec.external.external_certs;
                let ca = if mode == Some("MUTUAL") {
                    certs.ca_certificate.as_str()
                } else {
                    ""
                };
                let secret = json!({"apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": format!("{svc}-credential"), "namespace": ISTIO_SYSTEM},
                    "type": "Opaque",
                    "data": {"ca.crt": ca, "tls.crt": certs.service_certificate,
                        "tls.key": certs.service_private_key}});
                out.push((app.to_owned(), g.cluster.clone(), secret));
            }
        }
    }

    // Access points: the hosts of a client's access intents accumulate, one policy each.
    for (_, _, access) in clients {
        let mut policy_hosts: Vec<String> = Vec::new();
        for a in access {
            policy_hosts.extend([
                format!("{svc}.{namespace}"),
                format!("{svc}.{namespace}.svc.cluster.local"),
                svc.to_owned(),
            ]);
            if external.is_some() {
                policy_hosts.push(spec.external_name.clone());
            }
            let policy = json!({"apiVersion": SECURITY, "kind": "AuthorizationPolicy",
                "metadata": {"name": app, "namespace": namespace},
                "spec": {"action": a.spec.action, "rules": [{"to": [{"operation": {
                    "hosts": policy_hosts,
                    "methods": a.spec.access.clone().unwrap_or_default(),
                    "paths": a.spec.url.clone().unwrap_or_default()}}]}]}});
            for g in gateways {
                out.push((app.to_owned(), g.cluster.clone(), policy.clone()));
            }
        }
    }
    Ok(out)
}

/// its as an action controller (dtc calls it with the DIG's traffic group intent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Its;

#[async_trait]
impl ActionController for Its {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let (tgi_key, namespace) = traffic_group(cx).await?;
        let mut addresses = Addresses(1);
        let mut placed: Placed = Vec::new();
        for (key, server) in cx.children::<InboundServerIntent>(&tgi_key).await? {
            if server.spec.service_mesh != "istio" {
                continue;
            }
            let external = external_of(&server)?;
            let mut gateways = Vec::new();
            for cluster in cx.clusters(&server.spec.app).await? {
                let kv = cx.cluster_kv(&cluster).await?;
                let access_port = external
                    .as_ref()
                    .map(|e| kv_port(&kv, e.port_key, e.port_what))
                    .transpose()?;
                gateways.push(Gateway {
                    address: kv_text(&kv, "istioIngressGatewayAddress", "address")?,
                    external_port: kv_port(&kv, "istioIngressGatewayPort", "port")?,
                    internal_port: kv_port(
                        &kv,
                        "istioIngressGatewayInternalPort",
                        "internal port",
                    )?,
                    access_port,
                    cluster,
                });
            }
            let mut clients = Vec::new();
            for (ckey, client) in cx.children::<InboundClientsIntent>(&key).await? {
                let clusters = cx.clusters(&client.spec.app).await?;
                let access = cx
                    .children::<InboundClientsAccessIntent>(&ckey)
                    .await?
                    .into_iter()
                    .map(|(_, a)| a)
                    .collect();
                clients.push((client, clusters, access));
            }
            placed.extend(server_resources(
                &server,
                &namespace,
                &gateways,
                &clients,
                &mut addresses,
            )?);
        }
        put_placed(cx, placed).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn server(external: Option<&str>) -> InboundServerIntent {
        let mut s = InboundServerIntent::default();
        s.metadata.name = "isi".into();
        s.spec.app = "httpbin".into();
        s.spec.service_name = "httpbin".into();
        s.spec.port = 8000;
        s.spec.protocol = "TCP".into();
        s.spec.service_mesh = "istio".into();
        if let Some(tls) = external {
            s.spec.external_support = true;
            s.spec.external_name = "httpbin.example.com".into();
            s.spec.management.sidecar_proxy = "yes".into();
            s.spec.management.tls_type = tls.into();
            s.spec.external.external_certs.service_certificate = "Y2VydA==".into();
            s.spec.external.external_certs.service_private_key = "a2V5".into();
            s.spec.external.external_certs.ca_certificate = "Y2E=".into();
        }
        s
    }

    fn gateway(cluster: &str) -> Gateway {
        Gateway {
            cluster: cluster.into(),
            address: "10.0.0.5".into(),
            external_port: 32001,
            internal_port: 15443,
            access_port: Some(31390),
        }
    }

    fn client(
        clusters: &[&str],
        access: &[(&str, &[&str])],
    ) -> (
        InboundClientsIntent,
        Vec<String>,
        Vec<InboundClientsAccessIntent>,
    ) {
        let mut c = InboundClientsIntent::default();
        c.spec.app = "sleep".into();
        let access = access
            .iter()
            .map(|(method, paths)| {
                let mut a = InboundClientsAccessIntent::default();
                a.spec.action = "ALLOW".into();
                a.spec.access = Some(vec![(*method).to_owned()]);
                a.spec.url = Some(paths.iter().map(|p| (*p).to_owned()).collect());
                a
            })
            .collect();
        (
            c,
            clusters.iter().map(|c| (*c).to_owned()).collect(),
            access,
        )
    }

    fn find<'a>(placed: &'a Placed, cluster: &str, kind: &str, name: &str) -> &'a Value {
        placed
            .iter()
            .find(|(_, c, o)| c == cluster && o["kind"] == kind && o["metadata"]["name"] == name)
            .map(|(_, _, o)| o)
            .unwrap_or_else(|| panic!("no {kind} {name} on {cluster}: {placed:?}"))
    }

    /// its' objects for a server on prov1+c1 and a client on prov1+c2 (research notes of
    /// src/its/internal/istiosubc, as its' structs marshal them).
    #[test]
    fn a_client_in_another_cluster_reaches_the_server_through_its_gateway() {
        let mut addresses = Addresses(1);
        let placed = server_resources(
            &server(None),
            "ns1",
            &[gateway("prov1+c1")],
            &[client(&["prov1+c2"], &[("GET", &["/status"])])],
            &mut addresses,
        )
        .unwrap();
        assert_eq!(
            find(&placed, "prov1+c1", "Gateway", "httpbin-gateway")["spec"],
            json!({"servers": [{"port": {"name": "tls", "number": 15443, "protocol": "TLS"},
                "hosts": ["httpbin.ns1.prov1.c1"], "tls": {"mode": "AUTO_PASSTHROUGH"}, "name": "tls"}],
                "selector": {"istio": "ingressgateway"}})
        );
        let se = find(&placed, "prov1+c2", "ServiceEntry", "httpbin-se-client0");
        assert_eq!(
            se["spec"],
            json!({"hosts": ["httpbin.ns1.prov1.c1"], "addresses": ["240.0.0.2"],
                "location": "MESH_INTERNAL", "resolution": "DNS",
                "ports": [{"name": "tcp", "number": 8000, "protocol": "TCP"}],
                "endpoints": [{"address": "10.0.0.5", "ports": {"tcp": 32001}}]})
        );
        assert_eq!(se["metadata"]["namespace"], "ns1");
        assert_eq!(
            find(&placed, "prov1+c2", "ServiceEntry", "httpbin-se-client1")["spec"]["hosts"],
            json!(["httpbin"])
        );
        assert_eq!(
            find(&placed, "prov1+c2", "DestinationRule", "httpbin-dr-client0")["spec"]["host"],
            "httpbin.ns1.prov1.c1"
        );
        assert_eq!(
            find(&placed, "prov1+c1", "ServiceEntry", "httpbin-se-server")["metadata"]["namespace"],
            "istio-system"
        );
        let ap = find(&placed, "prov1+c1", "AuthorizationPolicy", "httpbin");
        assert_eq!(
            ap["spec"],
            json!({"action": "ALLOW", "rules": [{"to": [{"operation": {
                "hosts": ["httpbin.ns1", "httpbin.ns1.svc.cluster.local", "httpbin"],
                "methods": ["GET"], "paths": ["/status"]}}]}]})
        );
        // Apps: server resources under the server app, client ones under the client app.
        assert!(
            placed
                .iter()
                .all(|(app, c, _)| (c == "prov1+c1") == (app == "httpbin"))
        );
    }

    #[test]
    fn same_cluster_clients_need_nothing_and_external_access_gets_a_gateway() {
        let mut addresses = Addresses(1);
        let placed = server_resources(
            &server(Some("MUTUAL")),
            "ns1",
            &[gateway("prov1+c1")],
            &[client(&["prov1+c1"], &[])],
            &mut addresses,
        )
        .unwrap();
        let kinds: Vec<(&str, &str)> = placed
            .iter()
            .map(|(_, _, o)| {
                (
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                ("Gateway", "httpbin-ext-mutual-gateway"),
                ("VirtualService", "httpbin-vs-httpbin-ext-mutual-gateway"),
                ("Secret", "httpbin-credential")
            ]
        );
        assert_eq!(
            placed[0].2["spec"]["servers"][0]["tls"],
            json!({"mode": "MUTUAL", "credentialName": "httpbin-credential"})
        );
        assert_eq!(placed[2].2["data"]["ca.crt"], "Y2E=");
        let e = server_resources(
            &server(Some("BOGUS")),
            "ns1",
            &[gateway("prov1+c1")],
            &[],
            &mut addresses,
        )
        .unwrap_err();
        assert_eq!(e.message(), "Invalid tls type");
    }

    #[test]
    fn addresses_run_out_past_240_0_0_255() {
        let mut a = Addresses(254);
        assert_eq!(a.next().unwrap(), "240.0.0.255");
        assert_eq!(a.next().unwrap_err().message(), "Out of ip address");
    }
}
