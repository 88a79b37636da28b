//! sds, dtc's service discovery sub-controller (EMCO's `src/sds`): makes an inbound intent's
//! server reachable by name from the clusters of its clients.
//!
//! For each inbound intent of the DIG's traffic group intent that has clients, once the server
//! app is deployed and ready, sds reads the server's Service live on each of the server's
//! clusters and the address it is reached at there: the first address of the cluster's first
//! Node for a `NodePort` Service, the load balancer's ingress IP for a `LoadBalancer` one. For
//! each client app and server cluster it then builds a child AppContext (app
//! `service-discovery`) that puts, on every cluster of the client app but the server's, a
//! headless Service of the server's name (ports named after their numbers) and Endpoints
//! pointing at that address (resources `<service>+Endpoint` then `<service>+Service`), records
//! it in the parent's `ChildContextIDs` and has rsync deploy it. The orchestrator terminates the
//! children with the group.
//!
//! As in EMCO, the call itself only reads the intents and returns: the waiting happens in the
//! background and its failures are logged, never reported to the orchestrator. Where EMCO would
//! deploy nonsense, sds skips and logs instead: a server Service that is not on its cluster
//! (EMCO deploys objects with an empty name), a cluster listing no Node (EMCO writes an
//! Endpoints with an empty address), and a client on the server's own cluster only (EMCO
//! records and deploys an empty child context). EMCO waits for the Deployment
//! `<release>-<app>` to report progress; sds waits until every resource of the server app on
//! the cluster is ready, which includes that Deployment. The child keeps the parent's logical
//! cloud, which EMCO drops, so a child of a standard logical cloud's group is deployed with
//! that cloud's credentials like its parent.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::{
    ActionController, ContextHandle, ControllerContext, Deployer, ObjectRef,
};
use emco_core::lifecycle::AppContextStatus;
use emco_core::{ContextId, Error, ErrorKind, Result};
use serde_json::{Value, json};

use crate::dtc::{InboundClientsIntent, InboundServerIntent, TrafficGroupIntent};

/// The app (and composite app) name of the child contexts, as EMCO names it.
pub const SERVICE_DISCOVERY_APP: &str = "service-discovery";

/// How often sds looks again by default while it waits for the server.
const POLL: Duration = Duration::from_secs(1);

/// dtc's service discovery sub-controller. See the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct Sds {
    poll: Duration,
}

impl Default for Sds {
    fn default() -> Self {
        Self { poll: POLL }
    }
}

impl Sds {
    /// Looks every `poll` while waiting for the server to be deployed (default one second).
    #[must_use]
    pub const fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }
}

/// One server and the client apps that should find it.
#[derive(Debug, Clone)]
struct Discovery {
    server: String,
    service: String,
    clients: BTreeSet<String>,
}

#[async_trait]
impl ActionController for Sds {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let (tgi_key, _) = cx.intent::<TrafficGroupIntent>().await?;
        let mut wanted = Vec::new();
        for (key, server) in cx.children::<InboundServerIntent>(&tgi_key).await? {
            let spec = &server.spec;
            if spec.app.is_empty() || spec.service_name.is_empty() {
                continue;
            }
            let clients: BTreeSet<String> = cx
                .children::<InboundClientsIntent>(&key)
                .await?
                .into_iter()
                .map(|(_, c)| c.spec.app)
                .filter(|app| !app.is_empty())
                .collect();
            if !clients.is_empty() {
                wanted.push(Discovery {
                    server: spec.app.clone(),
                    service: spec.service_name.clone(),
                    clients,
                });
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let deployer = Arc::clone(cx.deployer()?);
        let parent = cx.app_context().clone();
        for d in wanted {
            let (parent, deployer, poll) = (parent.clone(), Arc::clone(&deployer), self.poll);
            tokio::spawn(async move {
                if let Err(e) = discover(&parent, deployer.as_ref(), &d, poll).await {
                    tracing::warn!(ctx = %parent.id(), server = %d.server, service = %d.service,
                        error = %e, "sds: no service discovery for the server");
                }
            });
        }
        Ok(())
    }
}

/// Waits for `d.server`, then deploys its discovery objects for each client app and server
/// cluster.
async fn discover(
    parent: &AppContext,
    deployer: &dyn Deployer,
    d: &Discovery,
    poll: Duration,
) -> Result<()> {
    let meta = parent.meta().await?;
    let namespace = Some(meta.namespace.as_str()).filter(|n| !n.is_empty());
    let servers = parent.clusters(&d.server).await?;
    let mut found = Vec::new();
    for cluster in &servers {
        let (service, ip) = loop {
            if server_ready(parent, &d.server, cluster).await? {
                match reach(deployer, cluster, &d.service, namespace).await {
                    Ok(Some(found)) => break found,
                    Ok(None) => {}
                    // Looked at again: a cluster out of reach for a while is no reason to stop.
                    Err(e) if e.kind() == ErrorKind::Unavailable => {
                        tracing::debug!(%cluster, error = %e, "sds: the server's cluster does not answer");
                    }
                    Err(e) => return Err(e),
                }
            }
            tokio::time::sleep(poll).await;
        };
        found.push((cluster.clone(), service, ip));
    }
    let mut clients = Vec::new();
    for client in &d.clients {
        clients.push(parent.clusters(client).await?);
    }
    for (cluster, service, ip) in found {
        let (svc, endpoints) = match discovery_objects(&service, &ip) {
            Ok(objects) => objects,
            Err(e) => {
                tracing::warn!(ctx = %parent.id(), %cluster, error = %e, "sds: skipping a server cluster");
                continue;
            }
        };
        for client_clusters in &clients {
            let targets: Vec<String> = client_clusters
                .iter()
                .filter(|c| **c != cluster)
                .cloned()
                .collect();
            if targets.is_empty() {
                continue;
            }
            let child =
                child_context(parent, &meta, &d.service, &targets, &svc, &endpoints).await?;
            parent.add_child_context(child).await?;
            // Checked again: a terminate that came meanwhile already read the children.
            deployed(parent).await?;
            deployer.install(child).await?;
            tracing::info!(ctx = %parent.id(), %child, service = %d.service, server_cluster = %cluster,
                clusters = ?targets, "sds: service discovery deployed");
        }
    }
    Ok(())
}

/// Whether the parent is (still) deployed or on its way; an error once it is gone or failed.
async fn deployed(parent: &AppContext) -> Result<bool> {
    match parent.status().await? {
        Some(AppContextStatus::Instantiated | AppContextStatus::Updated) => Ok(true),
        None
        | Some(
            AppContextStatus::Created
            | AppContextStatus::Instantiating
            | AppContextStatus::Updating,
        ) => Ok(false),
        Some(s) => Err(Error::failed_precondition(format!(
            "Parent's app context is not in 'Instantiated' state: it is {s}"
        ))),
    }
}

/// Whether the parent is deployed and every resource of `app` on `cluster` was seen ready
/// (rsync's collected status of the cluster).
async fn server_ready(parent: &AppContext, app: &str, cluster: &str) -> Result<bool> {
    if !deployed(parent).await? {
        return Ok(false);
    }
    let Some(status) = parent.cluster_status(app, cluster).await? else {
        return Ok(false);
    };
    Ok(status
        .get("resources")
        .and_then(Value::as_object)
        .is_some_and(|r| {
            !r.is_empty()
                && r.values()
                    .all(|e| e.get("ready") == Some(&Value::Bool(true)))
        }))
}

/// The server's Service `name` on `cluster` and the address it is reached at from other
/// clusters; `None` while a load balancer has no ingress yet.
///
/// # Errors
/// `NotFound` when the Service is not there; `InvalidArgument` when it is neither NodePort nor
/// LoadBalancer or the cluster lists no Node address; the cluster's errors.
async fn reach(
    deployer: &dyn Deployer,
    cluster: &str,
    name: &str,
    namespace: Option<&str>,
) -> Result<Option<(Value, String)>> {
    let service = deployer
        .get(
            cluster,
            &ObjectRef::new("v1", "Service", namespace.or(Some("default")), name),
        )
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "the server's service {name} is not on cluster {cluster}"
            ))
        })?;
    let ip = match service.pointer("/spec/type").and_then(Value::as_str) {
        Some("NodePort") => {
            let nodes = deployer
                .list(cluster, &ObjectRef::new("v1", "Node", None, ""))
                .await?;
            Some(node_address(&nodes).ok_or_else(|| {
                Error::invalid(format!(
                    "cluster {cluster} lists no Node address for NodePort service {name}"
                ))
            })?)
        }
        Some("LoadBalancer") => ingress_ip(&service),
        other => {
            return Err(Error::invalid(format!(
                "service {name} on cluster {cluster} is of type {}: service discovery needs a \
                 NodePort or LoadBalancer service",
                other.unwrap_or("ClusterIP")
            )));
        }
    };
    Ok(ip.map(|ip| (service, ip)))
}

/// The first address of the first Node, whatever its type (as EMCO's rsync client takes it).
#[must_use]
pub fn node_address(nodes: &[Value]) -> Option<String> {
    nodes
        .first()?
        .pointer("/status/addresses/0/address")
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
}

/// The first non-empty ingress IP of a LoadBalancer Service.
#[must_use]
pub fn ingress_ip(service: &Value) -> Option<String> {
    service
        .pointer("/status/loadBalancer/ingress")?
        .as_array()?
        .iter()
        .filter_map(|i| i.get("ip").and_then(Value::as_str))
        .find(|ip| !ip.is_empty())
        .map(str::to_owned)
}

/// The headless Service and the Endpoints sds puts on the clients' clusters for `service`, the
/// server's Service as its cluster reports it, reached at `ip` (src/sds resources.go): each port
/// named after its number, the target port the port itself. A NodePort server's objects carry
/// the server's namespace; a LoadBalancer server's carry none (EMCO leaves it empty there), so
/// they go to the child context's namespace, which is the same.
///
/// # Errors
/// `InvalidArgument` when the Service has no name or a port without a number.
pub fn discovery_objects(service: &Value, ip: &str) -> Result<(Value, Value)> {
    let name = service
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::invalid("the server's service has no name"))?;
    let mut metadata = json!({"name": name});
    if service.pointer("/spec/type").and_then(Value::as_str) == Some("NodePort")
        && let Some(ns) = service
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    {
        metadata["namespace"] = json!(ns);
    }
    let mut ports = Vec::new();
    let mut endpoint_ports = Vec::new();
    for p in service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let port = p
            .get("port")
            .and_then(Value::as_i64)
            .ok_or_else(|| Error::invalid(format!("service {name} has a port without a number")))?;
        let mut sp = json!({"name": port.to_string(), "port": port, "targetPort": port});
        if let Some(protocol) = p.get("protocol").and_then(Value::as_str) {
            sp["protocol"] = json!(protocol);
        }
        ports.push(sp);
        endpoint_ports.push(json!({"name": port.to_string(), "port": port}));
    }
    let svc = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata.clone(),
        "spec": {"clusterIP": "None", "ports": ports, "sessionAffinity": "None", "type": "ClusterIP"},
    });
    let endpoints = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": metadata,
        "subsets": [{"addresses": [{"ip": ip}], "ports": endpoint_ports}],
    });
    Ok((svc, endpoints))
}

/// Writes the child context deploying `svc` and `endpoints` (resources `<service>+Endpoint`
/// then `<service>+Service`) to `targets`; its id.
async fn child_context(
    parent: &AppContext,
    meta: &CompositeAppMeta,
    service: &str,
    targets: &[String],
    svc: &Value,
    endpoints: &Value,
) -> Result<ContextId> {
    let child_meta = CompositeAppMeta {
        composite_app: SERVICE_DISCOVERY_APP.to_owned(),
        child_context_ids: None,
        ..meta.clone()
    };
    let ctx = AppContext::create(Arc::clone(parent.store()), &child_meta).await?;
    let id = ctx.id();
    let mut child = ContextHandle::new(ctx);
    let built = async {
        child.add_app(SERVICE_DISCOVERY_APP).await?;
        for cluster in targets {
            child.add_cluster(SERVICE_DISCOVERY_APP, cluster).await?;
            let endpoint = format!("{service}+Endpoint");
            child
                .put_resource(SERVICE_DISCOVERY_APP, cluster, &endpoint, endpoints.clone())
                .await?;
            let name = format!("{service}+Service");
            child
                .put_resource(SERVICE_DISCOVERY_APP, cluster, &name, svc.clone())
                .await?;
        }
        child.commit().await
    }
    .await;
    if let Err(e) = built {
        // Half a context must not stay behind.
        if let Err(undo) = child.app_context().delete().await {
            tracing::warn!(child = %id, error = %undo, "sds: cannot delete a half-written child context");
        }
        return Err(e);
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// EMCO's own case (src/sds/internal/servicediscovery/action_test.go, "successful Creation
    /// of Child Appcontext"): a LoadBalancer `server-svc` on port 30080 (target 3333, node port
    /// 30080) at ingress 20.62.186.71.
    #[test]
    fn objects_for_a_load_balancer_as_emco_writes_them() {
        let service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "server-svc", "namespace": "n1"},
            "spec": {"type": "LoadBalancer", "ports": [{"name": "http-service-tcp",
                "protocol": "TCP", "port": 30080, "targetPort": 3333, "nodePort": 30080}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "20.62.186.71"}]}}});
        let ip = ingress_ip(&service).unwrap();
        assert_eq!(ip, "20.62.186.71");
        let (svc, ep) = discovery_objects(&service, &ip).unwrap();
        assert_eq!(
            svc,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "server-svc"},
                "spec": {"clusterIP": "None", "ports": [{"name": "30080", "protocol": "TCP",
                    "port": 30080, "targetPort": 30080}],
                    "sessionAffinity": "None", "type": "ClusterIP"}})
        );
        assert_eq!(
            ep,
            json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "server-svc"},
                "subsets": [{"addresses": [{"ip": "20.62.186.71"}],
                    "ports": [{"name": "30080", "port": 30080}]}]})
        );
    }

    /// EMCO's service discovery example on private clusters (examples/dtc/service_discovery):
    /// http-server's NodePort `http-service` on 30083, reached at the node's address, in the
    /// server's namespace.
    #[test]
    fn objects_for_a_node_port_carry_the_namespace_and_the_node_address() {
        let service = json!({"metadata": {"name": "http-service", "namespace": "ns1"},
            "spec": {"type": "NodePort", "ports": [{"protocol": "UDP", "port": 30083},
                {"port": 30084}]}});
        let nodes = [
            json!({"status": {"addresses": [{"type": "Hostname", "address": "n1"},
                {"type": "InternalIP", "address": "10.0.0.12"}]}}),
            json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.13"}]}}),
        ];
        // The first address of the first node, whatever its type, as EMCO takes it.
        let ip = node_address(&nodes).unwrap();
        assert_eq!(ip, "n1");
        let (svc, ep) = discovery_objects(&service, "10.0.0.12").unwrap();
        assert_eq!(
            svc["metadata"],
            json!({"name": "http-service", "namespace": "ns1"})
        );
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"name": "30083", "protocol": "UDP", "port": 30083, "targetPort": 30083},
                {"name": "30084", "port": 30084, "targetPort": 30084}])
        );
        assert_eq!(ep["metadata"], svc["metadata"]);
        assert_eq!(
            ep["subsets"],
            json!([{"addresses": [{"ip": "10.0.0.12"}],
                "ports": [{"name": "30083", "port": 30083}, {"name": "30084", "port": 30084}]}])
        );
        assert_eq!(node_address(&[]), None);
        assert_eq!(node_address(&[json!({"status": {}})]), None);
    }

    #[test]
    fn a_load_balancer_without_ingress_has_no_address_yet_and_bad_services_are_refused() {
        let pending = json!({"spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example", "ip": ""}]}}});
        assert_eq!(ingress_ip(&pending), None);
        let unnamed = json!({"metadata": {}, "spec": {"ports": [{"port": 1}]}});
        assert!(discovery_objects(&unnamed, "1.2.3.4").is_err());
        let portless = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"name": "x"}]}});
        let e = discovery_objects(&portless, "1.2.3.4").unwrap_err();
        assert!(e.message().contains("without a number"), "{e}");
    }
}
