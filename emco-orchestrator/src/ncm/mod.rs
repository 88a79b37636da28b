//! ncm: the networks and provider networks of a cluster and their lifecycle (apply, terminate,
//! stop, status), as EMCO's ncm service (src/ncm).
//!
//! A cluster's network lifecycle record is kept beside the cluster like a deployment intent
//! group's (the blob `state`, no record reading as Created), with ncm's states:
//!
//! | operation | allowed from | to |
//! |---|---|---|
//! | apply | Created, Terminated, TerminateStopped (Applied, InstantiateStopped: a no-op) | Applied |
//! | terminate | Applied, InstantiateStopped (Terminated, TerminateStopped: a no-op) | Terminated |
//! | stop | Applied / Terminated, while rsync still works on it | InstantiateStopped / TerminateStopped |
//! | create or replace a network | Created, Terminated | |
//! | delete a network | Created, Terminated, TerminateStopped | |
//!
//! Apply writes one AppContext with one app ([`NETWORK_APP`]) on the one cluster
//! `provider+cluster`, holding a `k8s.plugin.opnfv.org/v1alpha1` `Network` (labelled
//! `net: <name>`) per network and a `ProviderNetwork` per provider network, each followed by a
//! `k8s.cni.cncf.io/v1` `NetworkAttachmentDefinition` when the cluster's kv-pairs name multus
//! as its CNI wrapper (src/ncm/internal/ovncontroller `Apply`); rsync deploys it with the
//! cluster's own credentials. Refusals are ncm's texts; where ncm answers a 500 for a missing
//! cluster or a wrong-state stop we answer 404 and 409.

use std::sync::Arc;

use async_trait::async_trait;
use emco_appcontext::AppContext;
use emco_appcontext::collection::Hook;
use emco_appcontext::context::{AppContextStatus, CompositeAppMeta};
use emco_core::lifecycle::{DigState, StateInfo};
use emco_core::model::status::{ClusterNetworkStatus, StatusQuery};
use emco_core::model::{Cluster, KvPair, Network, ProviderNetwork, kv_value_text};
use emco_core::placement::ClusterRef;
use emco_core::{Error, Result};
use emco_store::{AppContextStore, ResourceKey, ResourceStore};
use serde_json::{Value, json};

use crate::dcm::manifests::Manifest;
use crate::dcm::write_only_app;
use crate::keys;
use crate::records::Records;
use crate::state::{OnCurrent, Record, decide_again, deploy_fresh, state_or_new};
use crate::status::record_answer;

/// The one app of a cluster's network AppContext (ncm's `CONTEXT_CLUSTER_APP`).
pub const NETWORK_APP: &str = "network-intents";
/// The API group and version of ovn4nfv's (Nodus) network resources.
pub const NETWORK_API_VERSION: &str = "k8s.plugin.opnfv.org/v1alpha1";
/// The cluster kv-pair key naming the CNI wrapper; `multus` adds attachment definitions.
pub const MULTUS_KEY: &str = "CNI-Networking-Multi-VM-CNI-Wrapper";

/// ncm's answer when the cluster (or its provider) does not exist (apierror's generic
/// `not found` entry; ncm's own table has none for it).
const CLUSTER_MISSING: &str = "Requested resource not found.";

/// The lifecycle record of the cluster at `cluster`; NotFound when the cluster does not exist.
async fn cluster_record(store: &dyn ResourceStore, cluster: &ResourceKey) -> Result<Record> {
    if store.get(cluster).await?.is_none() {
        return Err(Error::not_found(CLUSTER_MISSING));
    }
    Record::load_or_new(store, cluster).await
}

/// ncm's `Cluster is in an invalid state` (409).
fn invalid_state(cluster: &str, state: DigState) -> Error {
    Error::conflict(format!("Cluster is in an invalid state: {cluster} {state}"))
}

/// Refuses writes of a cluster's networks while they are applied (ncm's `CreateNetwork`);
/// `which` is `"provider "` for provider networks, as ncm's texts say.
async fn check_write(store: &dyn ResourceStore, key: &ResourceKey, which: &str) -> Result<()> {
    match network_state(store, key).await? {
        (_, DigState::Created | DigState::Terminated) => Ok(()),
        (c, DigState::Applied) => Err(Error::invalid(format!(
            "Existing cluster {which}network intents must be terminated before creating: {c}"
        ))),
        (c, s) => Err(invalid_state(&c, s)),
    }
}

/// Refuses deletes of a cluster's networks while they are applied (ncm's `DeleteNetwork`).
async fn check_delete(store: &dyn ResourceStore, key: &ResourceKey, which: &str) -> Result<()> {
    match network_state(store, key).await? {
        (_, DigState::Created | DigState::Terminated | DigState::TerminateStopped) => Ok(()),
        (c, DigState::Applied | DigState::InstantiateStopped) => Err(Error::conflict(format!(
            "Cluster {which}network intents must be terminated before deleting: {c}"
        ))),
        (c, s) => Err(invalid_state(&c, s)),
    }
}

/// The name and network state of the cluster of the network at `key`.
async fn network_state(store: &dyn ResourceStore, key: &ResourceKey) -> Result<(String, DigState)> {
    let cluster = key.parent().unwrap_or_default();
    let name = cluster.name().unwrap_or_default().to_owned();
    Ok((
        name,
        cluster_record(store, &cluster).await?.info.current_state(),
    ))
}

macro_rules! network_hooks {
    ($($hook:ident, $ty:ty, $which:literal;)+) => {$(
        /// The state checks of ncm for this type's writes and deletes.
        #[derive(Debug, Clone, Copy, Default)]
        pub(crate) struct $hook;

        #[async_trait]
        impl Hook<$ty> for $hook {
            async fn before_write(
                &self,
                store: &dyn ResourceStore,
                key: &ResourceKey,
                _: &$ty,
            ) -> Result<()> {
                check_write(store, key, $which).await
            }

            async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
                check_delete(store, key, $which).await
            }
        }
    )+};
}
network_hooks! {
    NetworkHook, Network, "";
    ProviderNetworkHook, ProviderNetwork, "provider ";
}
crate::hooks::stateless_hooks!(NetworkHook, ProviderNetworkHook);

/// Clusters: clm refuses to delete one whose network intents are applied or still terminating
/// (src/clm/pkg/cluster `DeleteCluster`).
#[derive(Debug, Clone)]
pub(crate) struct ClusterHook {
    contexts: Arc<dyn AppContextStore>,
}

impl crate::hooks::NewHook for ClusterHook {
    fn new_hook(contexts: &Arc<dyn AppContextStore>) -> Self {
        Self {
            contexts: Arc::clone(contexts),
        }
    }
}

#[async_trait]
impl Hook<Cluster> for ClusterHook {
    async fn before_delete(&self, store: &dyn ResourceStore, cluster: &ResourceKey) -> Result<()> {
        let name = cluster.name().unwrap_or_default();
        let info = state_or_new(store, cluster).await?;
        match info.current_state() {
            DigState::Applied | DigState::InstantiateStopped => Err(Error::conflict(format!(
                "Cluster network intents must be terminated before it can be deleted {name}"
            ))),
            DigState::Terminated | DigState::TerminateStopped => {
                let running = crate::hooks::current_status(&self.contexts, &info)
                    .await?
                    .is_some_and(AppContextStatus::is_running);
                if running {
                    return Err(Error::conflict(format!(
                        "Network intents for cluster have not completed terminating {name}"
                    )));
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// The Kubernetes resources of a cluster's networks, in ncm's order: every network (each
/// followed by its attachment definition under multus), then every provider network.
fn network_manifests(
    networks: &[Network],
    providers: &[ProviderNetwork],
    multus: bool,
) -> Result<Vec<Manifest>> {
    let mut out = Vec::new();
    let mut push = |object: Value, name: &str| -> Result<()> {
        out.push(Manifest::new(&object)?);
        if multus {
            out.push(Manifest::new(&attachment_definition(name))?);
        }
        Ok(())
    };
    for n in networks {
        let name = n.metadata.name.as_str();
        let spec = serde_json::to_value(&n.spec)
            .map_err(|e| Error::internal("cannot serialize a network").with_source(e))?;
        push(
            json!({"apiVersion": NETWORK_API_VERSION, "kind": "Network",
                   "metadata": {"name": name, "labels": {"net": name}}, "spec": spec}),
            name,
        )?;
    }
    for p in providers {
        let name = p.metadata.name.as_str();
        let mut spec = serde_json::to_value(&p.spec)
            .map_err(|e| Error::internal("cannot serialize a provider network").with_source(e))?;
        // The resource's YAML tags: `vlanId`, and an empty list for no node labels.
        if let Some(vlan) = spec.get_mut("vlan").and_then(Value::as_object_mut) {
            if let Some(id) = vlan.remove("vlanID") {
                vlan.insert("vlanId".to_owned(), id);
            }
            if vlan.get("nodeLabelList").is_some_and(Value::is_null) {
                vlan.insert("nodeLabelList".to_owned(), json!([]));
            }
        }
        push(
            json!({"apiVersion": NETWORK_API_VERSION, "kind": "ProviderNetwork",
                   "metadata": {"name": name}, "spec": spec}),
            name,
        )?;
    }
    Ok(out)
}

/// The multus attachment definition ncm adds for network `name` (its config text kept as ncm
/// writes it).
fn attachment_definition(name: &str) -> Value {
    let pad = " ".repeat(18);
    let config = format!(
        "{{\n{pad}\"cniVersion\": \"0.3.1\",\n{pad}\"type\": \"ovn4nfvk8s-cni\",\n{pad}\"nfn-network\": \"{name}\"\n{}}}",
        " ".repeat(16)
    );
    json!({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
           "metadata": {"name": name}, "spec": {"config": config}})
}

/// Whether the cluster's kv-pairs name multus as the CNI wrapper (the last kv-pair object
/// that names one wins, as ncm reads them).
fn names_multus(kv_pairs: &[KvPair]) -> bool {
    let mut wrapper = String::new();
    for kv in kv_pairs {
        if let Some(v) = kv.spec.kv.iter().find_map(|m| m.get(MULTUS_KEY)) {
            wrapper = kv_value_text(v);
        }
    }
    wrapper.eq_ignore_ascii_case("multus")
}

/// The cluster network service: ncm's lifecycle of a cluster's networks. Cheap to clone;
/// clones share everything.
#[derive(Debug, Clone)]
pub struct ClusterNetworks {
    records: Records,
}

impl ClusterNetworks {
    pub(crate) fn new(records: Records) -> Self {
        Self { records }
    }

    /// The lifecycle record of the networks of cluster `cluster` of `provider` (Created when
    /// never applied).
    ///
    /// # Errors
    /// NotFound when the cluster does not exist.
    pub async fn state(&self, cluster: &ClusterRef) -> Result<StateInfo> {
        let (provider, cluster) = (cluster.provider(), cluster.cluster());
        let info = cluster_record(
            self.records.store().as_ref(),
            &keys::cluster(provider, cluster),
        )
        .await?
        .info;
        if info.actions.is_empty() {
            return Ok(StateInfo::created(""));
        }
        Ok(info)
    }

    /// Applies the networks and provider networks of cluster `cluster`: their resources are
    /// deployed to it through rsync. Applying applied networks is a no-op, as ncm.
    ///
    /// # Errors
    /// NotFound for an unknown cluster; Conflict in a wrong state; the stores' and rsync's
    /// errors.
    pub async fn apply(&self, cluster: &ClusterRef) -> Result<()> {
        let (provider, cluster) = (cluster.provider(), cluster.cluster());
        decide_again(|| self.apply_once(provider, cluster)).await
    }

    async fn apply_once(&self, provider: &str, cluster: &str) -> Result<()> {
        let key = keys::cluster(provider, cluster);
        let record = cluster_record(self.records.store().as_ref(), &key).await?;
        match record.info.current_state() {
            DigState::Created | DigState::Terminated | DigState::TerminateStopped => {}
            DigState::Applied | DigState::InstantiateStopped => return Ok(()),
            s => return Err(invalid_state(cluster, s)),
        }
        let networks = self.records.objects.networks().list(&key, &[]).await?;
        let providers = self
            .records
            .objects
            .provider_networks()
            .list(&key, &[])
            .await?;
        let multus = names_multus(&self.records.objects.kv_pairs().list(&key, &[]).await?);
        let manifests = network_manifests(&networks, &providers, multus)?;
        let meta = CompositeAppMeta {
            composite_app: NETWORK_APP.to_owned(),
            // rsync deploys with the cluster's own credentials.
            level: emco_core::model::logical_cloud::LEVEL_ADMIN.to_owned(),
            ..CompositeAppMeta::default()
        };
        let ctx = AppContext::create(Arc::clone(self.records.contexts()), &meta).await?;
        let resources = manifests.into_iter().map(|m| (m.key, m.yaml)).collect();
        write_only_app(
            &ctx,
            NETWORK_APP,
            &[(ClusterRef::new(provider, cluster).to_string(), resources)],
        )
        .await?;
        let store = self.records.store().as_ref();
        let id = ctx.id().to_string();
        let _held = self.records.handover.lock(&key).await;
        let written = record.append(store, &key, DigState::Applied, id, 0).await;
        let queued = self.records.rsync().instantiate(ctx.id());
        deploy_fresh(store, &key, written, &record, &ctx, queued)
            .await
            .map(drop)
    }

    /// Terminates the applied networks of cluster `cluster`: rsync removes their resources.
    /// Terminating terminated networks is a no-op, as ncm.
    ///
    /// # Errors
    /// NotFound for an unknown cluster; Conflict when never applied or in a wrong state.
    pub async fn terminate(&self, cluster: &ClusterRef) -> Result<()> {
        let (provider, cluster) = (cluster.provider(), cluster.cluster());
        decide_again(|| self.terminate_once(provider, cluster)).await
    }

    async fn terminate_once(&self, provider: &str, cluster: &str) -> Result<()> {
        let key = keys::cluster(provider, cluster);
        let store = self.records.store().as_ref();
        let record = cluster_record(store, &key).await?;
        match record.info.current_state() {
            DigState::Applied | DigState::InstantiateStopped => {}
            DigState::Terminated | DigState::TerminateStopped => return Ok(()),
            DigState::Created => return Err(not_applied(cluster)),
            s => return Err(invalid_state(cluster, s)),
        }
        let context = self.records.load_context(&record.info).await?;
        let to = (DigState::Terminated, 0);
        self.records
            .append_on_current(&key, &record, to, context, OnCurrent::Terminate)
            .await
    }

    /// Stops the running apply or terminate of cluster `cluster`'s networks: rsync stops
    /// waiting and retrying.
    ///
    /// # Errors
    /// NotFound for an unknown cluster; Conflict when there is nothing to stop.
    pub async fn stop(&self, cluster: &ClusterRef) -> Result<()> {
        let (provider, cluster) = (cluster.provider(), cluster.cluster());
        decide_again(|| self.stop_once(provider, cluster)).await
    }

    async fn stop_once(&self, provider: &str, cluster: &str) -> Result<()> {
        let key = keys::cluster(provider, cluster);
        let store = self.records.store().as_ref();
        let record = cluster_record(store, &key).await?;
        let to = match record.info.current_state() {
            DigState::Applied => DigState::InstantiateStopped,
            DigState::Terminated => DigState::TerminateStopped,
            DigState::TerminateStopped => {
                return Err(Error::conflict(format!(
                    "Cluster network intents termination already stopped: {cluster}"
                )));
            }
            DigState::InstantiateStopped => {
                return Err(Error::conflict(format!(
                    "Cluster network intents instantiation already stopped: {cluster}"
                )));
            }
            DigState::Created => return Err(not_applied(cluster)),
            s => return Err(invalid_state(cluster, s)),
        };
        let ctx = self.records.load_context(&record.info).await?;
        let running = match &ctx {
            Some(ctx) => ctx
                .status()
                .await?
                .is_some_and(AppContextStatus::is_running),
            None => false,
        };
        if !running {
            return Err(Error::conflict(format!(
                "Cluster network intents are not instantiating or terminating:{cluster}"
            )));
        }
        self.records
            .append_on_current(&key, &record, (to, 0), ctx, OnCurrent::Stop)
            .await
    }
}

impl crate::Status {
    /// The status of cluster `cluster`'s networks as `query` asks (ncm's `status` route: the
    /// status of a deployment intent group's shape, its one cluster as `cluster`).
    ///
    /// # Errors
    /// NotFound for an unknown cluster or `instance`; InvalidArgument for an `app` filter
    /// other than [`NETWORK_APP`].
    pub async fn cluster_networks(
        &self,
        cluster: &ClusterRef,
        query: &StatusQuery,
    ) -> Result<ClusterNetworkStatus> {
        let states = self.networks.state(cluster).await?;
        let (provider, cluster) = (cluster.provider(), cluster.cluster());
        if let Some(app) = query.apps.iter().find(|a| *a != NETWORK_APP) {
            return Err(Error::invalid(format!(
                "Filter app {app} not in list of apps for composite app {NETWORK_APP}"
            )));
        }
        // ncm has only the full status, whatever list mode the query names.
        let full = record_answer(
            self.records.contexts(),
            ClusterRef::new(provider, cluster).to_string(),
            states,
            query,
        )
        .await?;
        Ok(ClusterNetworkStatus::from(full))
    }
}

fn not_applied(cluster: &str) -> Error {
    Error::conflict(format!(
        "Cluster network intents have not been applied: {cluster}"
    ))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use emco_core::Metadata;
    use emco_core::model::{NetworkSpec, Subnet};

    #[test]
    fn resources_as_ncm_writes_them() {
        let net = Network {
            metadata: Metadata::named("emco-private-net"),
            spec: NetworkSpec {
                cni_type: "ovn4nfv".into(),
                ipv4_subnets: vec![Subnet {
                    subnet: "10.10.20.0/24".into(),
                    name: "subnet1".into(),
                    gateway: "10.10.20.1/24".into(),
                    exclude_ips: String::new(),
                }],
                ipv6_subnets: Vec::new(),
            },
        };
        let mut pn = ProviderNetwork {
            metadata: Metadata::named("pnet"),
            ..ProviderNetwork::default()
        };
        pn.spec.cni_type = "ovn4nfv".into();
        pn.spec.provider_net_type = "VLAN".into();
        pn.spec.vlan.vlan_id = "102".into();
        pn.spec.vlan.vlan_node_selector = "any".into();
        let m = network_manifests(&[net], &[pn], false).unwrap();
        assert_eq!(
            m.iter().map(|m| m.key.as_str()).collect::<Vec<_>>(),
            ["emco-private-net+Network", "pnet+ProviderNetwork"]
        );
        let net: Value = emco_go::yaml::from_str(&m[0].yaml).unwrap();
        assert_eq!(
            net,
            json!({"apiVersion": "k8s.plugin.opnfv.org/v1alpha1", "kind": "Network",
                "metadata": {"name": "emco-private-net", "labels": {"net": "emco-private-net"}},
                "spec": {"cniType": "ovn4nfv", "ipv4Subnets": [{"subnet": "10.10.20.0/24",
                    "name": "subnet1", "gateway": "10.10.20.1/24"}]}})
        );
        let pn: Value = emco_go::yaml::from_str(&m[1].yaml).unwrap();
        assert_eq!(
            pn["spec"]["vlan"],
            json!({"vlanId": "102", "providerInterfaceName": "", "logicalInterfaceName": "",
                   "vlanNodeSelector": "any", "nodeLabelList": []})
        );
        assert_eq!(pn["metadata"], json!({"name": "pnet"}));
        let with_multus = network_manifests(&[], &[], true).unwrap();
        assert!(with_multus.is_empty());
    }

    #[test]
    fn multus_from_the_last_kv_pair_naming_a_wrapper() {
        let kv = |v: Value| KvPair {
            metadata: Metadata::named("k"),
            spec: emco_core::model::KvPairSpec {
                kv: vec![BTreeMap::from([(MULTUS_KEY.to_owned(), v)])],
            },
        };
        assert!(names_multus(&[kv(json!("Multus"))]));
        assert!(!names_multus(&[kv(json!("multus")), kv(json!("none"))]));
        assert!(!names_multus(&[]));
        let def = attachment_definition("n1");
        assert_eq!(
            def["spec"]["config"],
            format!(
                "{{\n{0}\"cniVersion\": \"0.3.1\",\n{0}\"type\": \"ovn4nfvk8s-cni\",\n{0}\"nfn-network\": \"n1\"\n{1}}}",
                " ".repeat(18),
                " ".repeat(16)
            )
        );
    }
}
