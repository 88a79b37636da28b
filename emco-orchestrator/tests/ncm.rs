//! ncm against a kubesim cluster with the network CRDs installed, through the REST routes:
//! EMCO's vfw example networks and a VLAN provider network are applied, reach the cluster as
//! ncm writes them (with multus attachment definitions when the cluster's kv-pairs name
//! multus), report their status, refuse changes while applied, and go with terminate.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::future::Future;
use std::time::Duration;

use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{Connector, ResourceId, Scope};
use http::StatusCode;
use serde_json::{Value, json};

use emco_testkit::PROVIDER;
const DEADLINE: Duration = Duration::from_secs(60);
/// The CRDs a cluster admin installs for ncm's resources (written for these tests).
const CRDS: &str = include_str!("../../tests/crds/ncm.yaml");

/// The shared test world with this file's helpers.
struct World(emco_testkit::World);

impl std::ops::Deref for World {
    type Target = emco_testkit::World;
    fn deref(&self) -> &emco_testkit::World {
        &self.0
    }
}

impl World {
    async fn start() -> Self {
        Self(emco_testkit::World::builder().clusters(1).start().await)
    }

    fn cluster(&self) -> String {
        self.fleet.cluster_names().remove(0)
    }

    fn url(&self, tail: &str) -> String {
        format!(
            "/v2/cluster-providers/{PROVIDER}/clusters/{}{tail}",
            self.cluster()
        )
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, String) {
        common::call(&self.orch, method, path, body).await
    }

    async fn admin(&self) -> KubeConnector {
        let c = self.cluster();
        KubeConnector::from_kubeconfig(&c, &self.fleet.kubeconfig(&c).unwrap())
            .await
            .unwrap()
    }

    async fn install_crds(&self) {
        common::apply_yaml(&self.admin().await, CRDS).await;
    }

    /// The object on the cluster, as the admin reads it.
    async fn object(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        let id = ResourceId {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: name.into(),
        };
        self.admin()
            .await
            .get(&Scope::new("test", "test"), &id)
            .await
            .unwrap()
    }

    async fn status(&self) -> Value {
        let (code, body) = self.call("GET", &self.url("/status"), None).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        serde_json::from_str(&body).unwrap()
    }
}

async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// EMCO's vfw example networks (examples/single-cluster/test-vfw.yaml).
fn vfw_networks() -> Vec<Value> {
    [
        ("emco-private-net", "10.10.20.0/24", "10.10.20.1/24"),
        (
            "unprotected-private-net",
            "192.168.10.0/24",
            "192.168.10.1/24",
        ),
        (
            "protected-private-net",
            "192.168.20.0/24",
            "192.168.20.1/24",
        ),
    ]
    .into_iter()
    .map(|(name, subnet, gateway)| {
        json!({"metadata": {"name": name}, "spec": {"cniType": "ovn4nfv",
            "ipv4Subnets": [{"subnet": subnet, "name": "subnet1", "gateway": gateway}]}})
    })
    .collect()
}

fn provider_network() -> Value {
    json!({"metadata": {"name": "pnet"}, "spec": {"cniType": "ovn4nfv", "providerNetType": "VLAN",
        "ipv4Subnets": [{"subnet": "172.16.30.0/24", "name": "subnet2",
            "excludeIps": "172.16.30.2 172.16.30.5..172.16.30.9"}],
        "vlan": {"vlanId": "102", "providerInterfaceName": "eth1",
            "logicalInterfaceName": "eth1.102", "vlanNodeSelector": "specific",
            "nodeLabelList": ["kubernetes.io/hostname=localhost"]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn networks_apply_to_the_cluster_and_go_with_terminate() {
    let w = World::start().await;
    w.install_crds().await;
    // The cluster names multus as its CNI wrapper: each network gets an attachment definition.
    let (code, body) = w
        .call(
            "POST",
            &w.url("/kv-pairs"),
            Some(json!({"metadata": {"name": "cni"},
                "spec": {"kv": [{"CNI-Networking-Multi-VM-CNI-Wrapper": "multus"}]}})),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    for n in vfw_networks() {
        let (code, body) = w.call("POST", &w.url("/networks"), Some(n)).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }
    let (code, body) = w
        .call(
            "POST",
            &w.url("/provider-networks"),
            Some(provider_network()),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    // Go's case-insensitive keys: `vlanId` is read as `vlanID` and written back so.
    let stored: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["spec"]["vlan"]["vlanID"], "102");

    // Before apply: the lifecycle record only, an empty cluster.
    let s = w.status().await;
    assert_eq!(s["states"]["actions"][0]["state"], "Created");
    assert_eq!(s["cluster"], json!({}));
    let (code, body) = w.call("POST", &w.url("/terminate"), None).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body,
        format!(
            "Cluster network intents have not been applied: {}\n",
            w.cluster()
        )
    );

    let (code, body) = w.call("POST", &w.url("/apply"), None).await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{body}");
    until("every network resource applied", || async {
        let s = w.status().await;
        s["status"] == "Instantiated" && s["rsyncStatus"] == json!({"Applied": 8})
    })
    .await;
    let s = w.status().await;
    assert_eq!(s["name"], format!("{PROVIDER}+{}", w.cluster()));
    assert_eq!(s["cluster"]["clusterProvider"], PROVIDER);
    assert_eq!(s["cluster"]["resources"].as_array().unwrap().len(), 8);
    // Applying again is a no-op, as ncm.
    let (code, _) = w.call("POST", &w.url("/apply"), None).await;
    assert_eq!(code, StatusCode::NO_CONTENT);

    // On the cluster, exactly what ncm generates.
    let api = "k8s.plugin.opnfv.org/v1alpha1";
    let net = w.object(api, "Network", "emco-private-net").await.unwrap();
    assert_eq!(net["metadata"]["labels"]["net"], "emco-private-net");
    assert_eq!(
        net["spec"],
        json!({"cniType": "ovn4nfv", "ipv4Subnets": [{"subnet": "10.10.20.0/24",
            "name": "subnet1", "gateway": "10.10.20.1/24"}]})
    );
    let pnet = w.object(api, "ProviderNetwork", "pnet").await.unwrap();
    assert_eq!(
        pnet["spec"],
        json!({"cniType": "ovn4nfv", "providerNetType": "VLAN",
            "ipv4Subnets": [{"subnet": "172.16.30.0/24", "name": "subnet2",
                "excludeIps": "172.16.30.2 172.16.30.5..172.16.30.9"}],
            "vlan": {"vlanId": "102", "providerInterfaceName": "eth1",
                "logicalInterfaceName": "eth1.102", "vlanNodeSelector": "specific",
                "nodeLabelList": ["kubernetes.io/hostname=localhost"]}})
    );
    let nad = w
        .object(
            "k8s.cni.cncf.io/v1",
            "NetworkAttachmentDefinition",
            "protected-private-net",
        )
        .await
        .unwrap();
    assert!(
        nad["spec"]["config"]
            .as_str()
            .unwrap()
            .contains("\"nfn-network\": \"protected-private-net\"")
    );

    // While applied, networks and the cluster stay as they are.
    let mut extra = vfw_networks().remove(0);
    extra["metadata"]["name"] = json!("extra-net");
    let (code, body) = w.call("POST", &w.url("/networks"), Some(extra)).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        format!(
            "Existing cluster network intents must be terminated before creating: {}\n",
            w.cluster()
        )
    );
    let (code, body) = w
        .call("DELETE", &w.url("/provider-networks/pnet"), None)
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        body,
        format!(
            "Cluster provider network intents must be terminated before deleting: {}\n",
            w.cluster()
        )
    );
    let (code, body) = w.call("DELETE", &w.url(""), None).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        body,
        format!(
            "Cluster network intents must be terminated before it can be deleted {}\n",
            w.cluster()
        )
    );

    let (code, body) = w.call("POST", &w.url("/terminate"), None).await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{body}");
    until("the network resources removed", || async {
        w.status().await["status"] == "Terminated"
    })
    .await;
    for (api_version, kind, name) in [
        (api, "Network", "emco-private-net"),
        (api, "ProviderNetwork", "pnet"),
        (
            "k8s.cni.cncf.io/v1",
            "NetworkAttachmentDefinition",
            "emco-private-net",
        ),
    ] {
        assert!(w.object(api_version, kind, name).await.is_none(), "{kind}");
    }
    let (code, _) = w.call("POST", &w.url("/terminate"), None).await;
    assert_eq!(code, StatusCode::NO_CONTENT, "terminating twice is a no-op");
    let (code, body) = w.call("POST", &w.url("/stop"), None).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");

    // Terminated: networks change and go again, then the cluster.
    for name in [
        "emco-private-net",
        "unprotected-private-net",
        "protected-private-net",
    ] {
        let (code, body) = w
            .call("DELETE", &w.url(&format!("/networks/{name}")), None)
            .await;
        assert_eq!(code, StatusCode::NO_CONTENT, "{body}");
    }
    let (code, body) = w.call("GET", &w.url("/networks"), None).await;
    assert_eq!((code, body.as_str()), (StatusCode::OK, "null"));
    for tail in ["/provider-networks/pnet", "/kv-pairs/cni", ""] {
        let (code, body) = w.call("DELETE", &w.url(tail), None).await;
        assert_eq!(code, StatusCode::NO_CONTENT, "{tail}: {body}");
    }
}
