//! The lifecycle of logical clouds against two kubesim clusters, through the REST routes and the
//! typed API: admin clouds, a standard cloud whose namespace, roles, quotas and certificate
//! requests are deployed and whose generated kubeconfigs authenticate as its user, update,
//! terminate, and the 400/404/409 answers.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::future::Future;
use std::time::Duration;

use emco_core::lifecycle::{DigOperation, DigState, StateAction, StateInfo};
use emco_core::model::{
    ClusterQuota, ClusterReference, ClusterReferenceSpec, CompositeApp, CompositeProfile,
    DeploymentIntentGroup, LogicalCloud, UserPermission,
};
use emco_core::{ErrorKind, LogicalCloudRef, Metadata};
use emco_orchestrator::dcm::cloud_for_deployment;
use emco_orchestrator::{keys, save_state};
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{Connector, ResourceId, Scope};
use http::{Request, StatusCode};
use kubesim::Fault;
use serde_json::{Value, json};

const PROJECT: &str = "p1";
use emco_testkit::PROVIDER;
/// Bounds every wait; a healthy run takes a fraction of it.
const DEADLINE: Duration = Duration::from_secs(120);

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
        Self(
            emco_testkit::World::builder()
                .clusters(2)
                .ready_delay(Duration::from_millis(50))
                .project(PROJECT)
                .start()
                .await,
        )
    }

    /// Sends a request to the REST router; answers the status and the body text.
    async fn call(&self, method: &str, path: &str) -> (StatusCode, String) {
        common::call(&self.orch, method, path, None).await
    }

    /// Waits until the cloud at `url` serves the kubeconfig of cluster reference `reference`.
    async fn until_kubeconfig(&self, url: &str, reference: &str) {
        let path = format!("{url}/cluster-references/{reference}/kubeconfig");
        until(&format!("the kubeconfig of {reference}"), || async {
            self.call("GET", &path).await.0 == StatusCode::OK
        })
        .await;
    }

    /// Standard cloud `name` of user `user` in namespace `<name>-ns`, on c1.
    async fn standard_cloud(&self, name: &str, user: &str) {
        self.create_cloud(
            json!({"metadata": {"name": name},
                   "spec": {"namespace": format!("{name}-ns"), "user": {"userName": user}}}),
            &["c1"],
        )
        .await;
    }

    async fn create_cloud(&self, lc: Value, references: &[&str]) {
        let lc: LogicalCloud = serde_json::from_value(lc).unwrap();
        self.orch
            .onboarding()
            .logical_clouds()
            .create(&keys::project(PROJECT), &lc)
            .await
            .unwrap();
        let key = keys::logical_cloud(PROJECT, &lc.metadata.name);
        for cluster in references {
            let r = ClusterReference {
                metadata: Metadata::named(format!("ref-{cluster}")),
                spec: ClusterReferenceSpec {
                    cluster_provider: PROVIDER.into(),
                    cluster: (*cluster).into(),
                    ..ClusterReferenceSpec::default()
                },
            };
            self.orch
                .onboarding()
                .cluster_references()
                .create(&key, &r)
                .await
                .unwrap();
        }
    }

    async fn state(&self, cloud: &str) -> DigState {
        self.orch
            .clouds()
            .state(&LogicalCloudRef::new(PROJECT, cloud))
            .await
            .unwrap()
            .current_state()
    }

    /// The admin view of `cluster`.
    async fn admin(&self, cluster: &str) -> KubeConnector {
        KubeConnector::from_kubeconfig(cluster, &self.fleet.kubeconfig(cluster).unwrap())
            .await
            .unwrap()
    }
}

fn id(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ResourceId {
    ResourceId {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

/// Polls `check` until it holds.
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

fn lc_url(cloud: &str) -> String {
    format!("/v2/projects/{PROJECT}/logical-clouds/{cloud}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_cloud_lifecycle_and_refusals() {
    let w = World::start().await;
    w.create_cloud(
        json!({"metadata": {"name": "bare"}, "spec": {"level": "0"}}),
        &[],
    )
    .await;
    let (code, body) = w
        .call("POST", &format!("{}/instantiate", lc_url("bare")))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body, "No Cluster References associated\n");

    w.create_cloud(
        json!({"metadata": {"name": "admin"}, "spec": {"level": "0"}}),
        &["c1", "c2"],
    )
    .await;
    let url = lc_url("admin");
    let err = cloud_for_deployment(w.orch.onboarding(), PROJECT, "admin")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    // Nothing to stop yet; terminating what was never instantiated is dcm's no-op
    // (src/dcm/pkg/module/apply.go `Terminate`).
    let (code, body) = w.call("POST", &format!("{url}/stop")).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(body, "LogicalCloud has not been asked to instantiate: \n");
    assert_eq!(
        w.call("POST", &format!("{url}/terminate")).await.0,
        StatusCode::ACCEPTED
    );
    // Updating a cloud that is not instantiated succeeds and does nothing
    // (src/dcm/pkg/module/logicalcloud.go `UpdateInstantiation`).
    let (code, body) = w.call("POST", &format!("{url}/update")).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    assert_eq!(w.state("admin").await, DigState::Created);

    assert_eq!(
        w.call("POST", &format!("{url}/instantiate")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(w.state("admin").await, DigState::Instantiated);
    let (code, body) = w.call("POST", &format!("{url}/instantiate")).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(body.contains("already instantiated"), "{body}");
    let cloud = cloud_for_deployment(w.orch.onboarding(), PROJECT, "admin")
        .await
        .unwrap();
    assert_eq!(cloud.level, "0");
    assert_eq!(cloud.namespace, "default");
    assert_eq!(
        cloud.clusters,
        [
            (PROVIDER.to_owned(), "c1".to_owned()),
            (PROVIDER.to_owned(), "c2".to_owned())
        ]
    );
    // An admin cloud has no kubeconfig of its own.
    let (code, body) = w
        .call(
            "GET",
            &format!("{url}/cluster-references/ref-c1/kubeconfig"),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(body.contains("admin"), "{body}");
    let (code, body) = w.call("GET", &format!("{url}/status")).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["name"], "admin");
    assert_eq!(status["states"]["actions"][0]["state"], "Instantiated");
    // EMCO's example scripts poll `.deployedStatus` of logical clouds too; an admin cloud's
    // empty-shell context reads Instantiated and Ready (src/dcm/pkg/module/apply.go).
    assert_eq!(status["deployedStatus"], "Instantiated");
    assert_eq!(status["readyStatus"], "Ready");
    // dcm stores the clusters' namespace, `default`, as the admin cloud's.
    let (code, body) = w.call("GET", &url).await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let stored: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["spec"]["namespace"], "default");

    // Terminate is refused while a deployment intent group of the cloud is deployed.
    let ca: CompositeApp = serde_json::from_value(
        json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
    )
    .unwrap();
    w.orch
        .onboarding()
        .create_composite_app(PROJECT, &ca)
        .await
        .unwrap();
    let ca_key = keys::composite_app(PROJECT, "ca", "v1");
    w.orch
        .onboarding()
        .composite_profiles()
        .create(
            &ca_key,
            &CompositeProfile {
                metadata: Metadata::named("cp"),
            },
        )
        .await
        .unwrap();
    let dig: DeploymentIntentGroup = serde_json::from_value(json!({
        "metadata": {"name": "d1"},
        "spec": {"compositeProfile": "cp", "version": "r1", "logicalCloud": "admin"},
    }))
    .unwrap();
    w.orch
        .onboarding()
        .deployment_intent_groups()
        .create(&ca_key, &dig)
        .await
        .unwrap();
    let dig_key = keys::dig(PROJECT, "ca", "v1", "d1");
    let mut record = StateInfo::created("t0");
    record.apply(DigOperation::Approve, "", "t1").unwrap();
    record.apply(DigOperation::Instantiate, "7", "t2").unwrap();
    save_state(w.orch.store().as_ref(), &dig_key, &record)
        .await
        .unwrap();
    let (code, body) = w.call("POST", &format!("{url}/terminate")).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(body.contains("d1"), "{body}");
    record.apply(DigOperation::Terminate, "7", "t3").unwrap();
    save_state(w.orch.store().as_ref(), &dig_key, &record)
        .await
        .unwrap();

    assert_eq!(
        w.call("POST", &format!("{url}/terminate")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(w.state("admin").await, DigState::Terminated);
    let (code, body) = w.call("POST", &format!("{url}/terminate")).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(body, "The Logical Cloud has already been terminated\n");
    assert_eq!(
        cloud_for_deployment(w.orch.onboarding(), PROJECT, "admin")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::FailedPrecondition
    );
    // Stop after terminate (200, as dcm), then instantiate again.
    assert_eq!(
        w.call("POST", &format!("{url}/stop")).await.0,
        StatusCode::OK
    );
    assert_eq!(w.state("admin").await, DigState::TerminateStopped);
    assert_eq!(
        w.call("POST", &format!("{url}/instantiate")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        w.call("POST", &format!("{url}/update")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(w.state("admin").await, DigState::Updated);

    // Unknown objects: 404.
    for (method, path) in [
        ("POST", format!("{}/instantiate", lc_url("nope"))),
        ("POST", format!("{}/terminate", lc_url("nope"))),
        ("POST", format!("{}/stop", lc_url("nope"))),
        ("POST", format!("{}/update", lc_url("nope"))),
        ("GET", format!("{}/status", lc_url("nope"))),
        (
            "GET",
            format!("{}/cluster-references/ref-c1/kubeconfig", lc_url("nope")),
        ),
        ("GET", format!("{url}/cluster-references/nope/kubeconfig")),
        (
            "POST",
            "/v2/projects/nope/logical-clouds/admin/instantiate".to_owned(),
        ),
    ] {
        let (code, body) = w.call(method, &path).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{method} {path}: {body}");
    }
    let (code, _) = w
        .call("GET", &format!("{url}/status?output=everything"))
        .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);

    // A deployed cloud cannot be deleted; a terminated one can once its children are gone.
    let (code, body) = w.call("DELETE", &url).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body,
        "The Logical Cloud is instantiated, please terminate first\n"
    );
    assert_eq!(
        w.call("POST", &format!("{url}/terminate")).await.0,
        StatusCode::ACCEPTED
    );
    w.orch
        .onboarding()
        .deployment_intent_groups()
        .delete(&ca_key, "d1")
        .await
        .unwrap();
    for r in ["ref-c1", "ref-c2"] {
        let (code, body) = w
            .call("DELETE", &format!("{url}/cluster-references/{r}"))
            .await;
        assert_eq!(code, StatusCode::NO_CONTENT, "{body}");
    }
    let (code, body) = w.call("DELETE", &url).await;
    assert_eq!(code, StatusCode::NO_CONTENT, "{body}");
}

/// The objects of cloud `lc1` on `cluster`, as the admin sees them: whether each exists.
async fn objects_present(w: &World, cluster: &str, csr: &str, quotas: &[&str]) -> Vec<bool> {
    let admin = w.admin(cluster).await;
    let scope = Scope::new("test", "test");
    let mut ids = vec![
        id("v1", "Namespace", None, "lc1-ns"),
        id(
            "rbac.authorization.k8s.io/v1",
            "Role",
            Some("lc1-ns"),
            "lc1-pods",
        ),
        id(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            Some("lc1-ns"),
            "lc1-pods",
        ),
        id(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            None,
            "p1-lc1-nodes",
        ),
        id(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            None,
            "p1-lc1-nodes",
        ),
        id(
            "certificates.k8s.io/v1",
            "CertificateSigningRequest",
            None,
            csr,
        ),
    ];
    for q in quotas {
        ids.push(id(
            "v1",
            "ResourceQuota",
            Some("lc1-ns"),
            &format!("lc1-{q}"),
        ));
    }
    let mut out = Vec::new();
    for i in &ids {
        out.push(admin.get(&scope, i).await.unwrap().is_some());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_cloud_deploys_and_its_kubeconfigs_authenticate() {
    let w = World::start().await;
    w.create_cloud(
        json!({"metadata": {"name": "lc1"},
               "spec": {"namespace": "lc1-ns", "user": {"userName": "alice"}}}),
        &["c1", "c2"],
    )
    .await;
    let key = keys::logical_cloud(PROJECT, "lc1");
    let pods: UserPermission = serde_json::from_value(json!({
        "metadata": {"name": "pods"},
        "spec": {"namespace": "lc1-ns", "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    }))
    .unwrap();
    let nodes: UserPermission = serde_json::from_value(json!({
        "metadata": {"name": "nodes"},
        "spec": {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
    }))
    .unwrap();
    w.orch
        .onboarding()
        .user_permissions()
        .create(&key, &pods)
        .await
        .unwrap();
    w.orch
        .onboarding()
        .user_permissions()
        .create(&key, &nodes)
        .await
        .unwrap();
    let quota: ClusterQuota =
        serde_json::from_value(json!({"metadata": {"name": "q1"}, "spec": {"pods": "10"}}))
            .unwrap();
    w.orch
        .onboarding()
        .cluster_quotas()
        .create(&key, &quota)
        .await
        .unwrap();

    let url = lc_url("lc1");
    assert_eq!(
        cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc1")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::FailedPrecondition
    );
    let (code, _) = w
        .call(
            "GET",
            &format!("{url}/cluster-references/ref-c1/kubeconfig"),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    // c2 is down while the cloud is instantiated: c1 gets its kubeconfig, the cloud is not
    // ready until c2 comes back.
    w.fleet.set_fault("c2", Fault::down()).unwrap();
    let (code, body) = w.call("POST", &format!("{url}/instantiate")).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    assert_eq!(w.state("lc1").await, DigState::Instantiated);
    w.until_kubeconfig(&url, "ref-c1").await;
    let err = cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc1")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert!(
        err.to_string().contains("still being instantiated"),
        "{err}"
    );
    let (code, _) = w
        .call(
            "GET",
            &format!("{url}/cluster-references/ref-c2/kubeconfig"),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    let (_, body) = w.call("GET", &format!("{url}/status?output=summary")).await;
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["readyStatus"], "NotReady", "{status}");
    // What a restarted process does; beside the running work it changes nothing.
    assert_eq!(w.orch.clouds().resume().await.unwrap(), 1);
    w.fleet.set_fault("c2", Fault::none()).unwrap();
    until("the cloud to be ready", || async {
        cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc1")
            .await
            .is_ok()
    })
    .await;
    // The certificate requests are named after the context that made them.
    let state = w
        .orch
        .clouds()
        .state(&LogicalCloudRef::new(PROJECT, "lc1"))
        .await
        .unwrap();
    let csr = format!("emco-p1-lc1-{}", state.current_context().unwrap());
    let cloud = cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc1")
        .await
        .unwrap();
    assert_eq!(
        (cloud.level.as_str(), cloud.namespace.as_str()),
        ("1", "lc1-ns")
    );
    for cluster in ["c1", "c2"] {
        assert_eq!(
            objects_present(&w, cluster, &csr, &["q1"]).await,
            [true; 7],
            "objects on {cluster}"
        );
    }

    // The kubeconfig authenticates as the cloud's user, in its namespace.
    for cluster in ["c1", "c2"] {
        let (code, kubeconfig) = w
            .call(
                "GET",
                &format!("{url}/cluster-references/ref-{cluster}/kubeconfig"),
            )
            .await;
        assert_eq!(code, StatusCode::OK, "{kubeconfig}");
        assert!(kubeconfig.contains("namespace: lc1-ns"), "{kubeconfig}");
        assert!(!kubeconfig.contains("token"), "{kubeconfig}");
        let user = KubeConnector::from_kubeconfig(cluster, &kubeconfig)
            .await
            .unwrap();
        let list = Request::get("/api/v1/namespaces/lc1-ns/pods")
            .body(Vec::new())
            .unwrap();
        let pods: Value = user.client().request(list).await.unwrap();
        assert_eq!(pods["kind"], "PodList");
        let review = Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
            .body(b"{}".to_vec())
            .unwrap();
        let who: Value = user.client().request(review).await.unwrap();
        assert_eq!(who["status"]["userInfo"]["username"], "alice");
    }

    // References carry the certificate but never the key.
    let (code, body) = w.call("GET", &format!("{url}/cluster-references")).await;
    assert_eq!(code, StatusCode::OK);
    assert!(
        !body.contains("PRIVATE KEY") && !body.contains("client-key"),
        "{body}"
    );
    let references: Vec<ClusterReference> = serde_json::from_str(&body).unwrap();
    assert_eq!(references.len(), 2);
    assert!(references.iter().all(|r| !r.spec.certificate.is_empty()));

    // Status: every resource deployed, then ready.
    let (code, body) = w
        .call("GET", &format!("{url}/status?status=deployed"))
        .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["deployedStatus"], "Instantiated", "{status}");
    assert_eq!(status["deployedCounts"]["Applied"], 14, "{status}");
    assert_eq!(status["apps"][0]["clusters"].as_array().unwrap().len(), 2);
    until("the cloud's resources to be ready", || async {
        let (_, body) = w.call("GET", &format!("{url}/status?output=summary")).await;
        let status: Value = serde_json::from_str(&body).unwrap();
        status["readyStatus"] == "Ready" && status["readyCounts"]["Ready"] == 14
    })
    .await;
    let (_, body) = w
        .call(
            "GET",
            &format!("{url}/status?resources&cluster={PROVIDER}%2Bc1"),
        )
        .await;
    let listed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        listed["resourcesByApp"].as_array().unwrap().len(),
        1,
        "{listed}"
    );

    // Update: a new quota is deployed, the credentials stay.
    let before = w
        .orch
        .clouds()
        .kubeconfig(&LogicalCloudRef::new(PROJECT, "lc1"), "ref-c1")
        .await
        .unwrap();
    let q2: ClusterQuota =
        serde_json::from_value(json!({"metadata": {"name": "q2"}, "spec": {"services": "5"}}))
            .unwrap();
    w.orch
        .onboarding()
        .cluster_quotas()
        .create(&key, &q2)
        .await
        .unwrap();
    let (code, body) = w.call("POST", &format!("{url}/update")).await;
    assert_eq!((code, body.as_str()), (StatusCode::ACCEPTED, "2"));
    assert_eq!(w.state("lc1").await, DigState::Updated);
    for cluster in ["c1", "c2"] {
        until("the new quota", || async {
            objects_present(&w, cluster, &csr, &["q1", "q2"]).await == [true; 8]
        })
        .await;
    }
    assert_eq!(
        w.orch
            .clouds()
            .kubeconfig(&LogicalCloudRef::new(PROJECT, "lc1"), "ref-c1")
            .await
            .unwrap(),
        before
    );
    cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc1")
        .await
        .unwrap();

    // Terminate: everything leaves the clusters and the kubeconfigs are forgotten.
    let (code, body) = w.call("POST", &format!("{url}/terminate")).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    for cluster in ["c1", "c2"] {
        until("the cloud's objects to go", || async {
            objects_present(&w, cluster, &csr, &["q1", "q2"]).await == [false; 8]
        })
        .await;
    }
    let (code, _) = w
        .call(
            "GET",
            &format!("{url}/cluster-references/ref-c1/kubeconfig"),
        )
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc1")
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::FailedPrecondition
    );
    let references = w
        .orch
        .onboarding()
        .cluster_references()
        .list(&key, &[])
        .await
        .unwrap();
    assert!(references.iter().all(|r| r.spec.certificate.is_empty()));
}

/// Eight instantiates of one admin cloud at once: the record's compare-and-set lets one write,
/// and each loser decides again on the winner's record, so it answers what dcm answers a second
/// instantiate (src/dcm/pkg/module/logicalcloud.go `Instantiate`: `The Logical Cloud is already
/// instantiated`), not a bare "changed by a concurrent operation".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_instantiates_of_a_cloud_get_dcm_s_answer() {
    let w = World::start().await;
    w.create_cloud(
        json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}}),
        &["c1", "c2"],
    )
    .await;
    let racers = (0..8).map(|_| {
        let orch = w.orch.clone();
        tokio::spawn(async move {
            orch.clouds()
                .instantiate(&LogicalCloudRef::new(PROJECT, "lc0"))
                .await
        })
    });
    let mut won = 0;
    for done in futures::future::join_all(racers).await {
        match done.unwrap() {
            Ok(()) => won += 1,
            Err(e) => assert_eq!(
                (e.kind(), e.message()),
                (
                    ErrorKind::Conflict,
                    "The Logical Cloud is already instantiated"
                )
            ),
        }
    }
    assert_eq!(won, 1);
    let info = w
        .orch
        .clouds()
        .state(&LogicalCloudRef::new(PROJECT, "lc0"))
        .await
        .unwrap();
    let instantiated = info
        .actions
        .iter()
        .filter(|a| a.state == DigState::Instantiated)
        .count();
    assert_eq!(instantiated, 1, "{info:?}");
}

/// A process killed after claiming a standard cloud's instantiate (recorded before its
/// credentials and context are made) and before naming the context leaves the cloud claimed:
/// an instantiate is a no-op and an update is refused. The next start drops the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_cut_short_by_a_crash_is_dropped_at_start() {
    let w = World::start().await;
    w.standard_cloud("lc1", "alice").await;
    let key = keys::logical_cloud(PROJECT, "lc1");
    let mut info = w
        .orch
        .clouds()
        .state(&LogicalCloudRef::new(PROJECT, "lc1"))
        .await
        .unwrap();
    info.actions.push(StateAction {
        state: DigState::Instantiated,
        instance: String::new(),
        time: "2026-11-26T12:00:00Z".into(),
        revision: 1,
    });
    save_state(w.orch.store().as_ref(), &key, &info)
        .await
        .unwrap();
    let url = lc_url("lc1");
    let (code, body) = w.call("POST", &format!("{url}/update")).await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");

    let restarted = w.restarted();
    assert_eq!(restarted.reconcile(Duration::ZERO).await.unwrap(), 1);
    assert_eq!(w.state("lc1").await, DigState::Created);
    let (code, body) = w.call("POST", &format!("{url}/instantiate")).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    w.until_kubeconfig(&url, "ref-c1").await;
    // An admin cloud's claim never gets a context and stays.
    w.create_cloud(
        json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}}),
        &["c1"],
    )
    .await;
    let (code, body) = w
        .call("POST", &format!("{}/instantiate", lc_url("lc0")))
        .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    assert_eq!(restarted.reconcile(Duration::ZERO).await.unwrap(), 0);
    assert_eq!(w.state("lc0").await, DigState::Instantiated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_follows_the_cluster_references() {
    let w = World::start().await;
    w.standard_cloud("lc2", "bob").await;
    let key = keys::logical_cloud(PROJECT, "lc2");
    let url = lc_url("lc2");
    let namespace = id("v1", "Namespace", None, "lc2-ns");
    let scope = Scope::new("test", "test");
    assert_eq!(
        w.call("POST", &format!("{url}/instantiate")).await.0,
        StatusCode::ACCEPTED
    );
    until("the cloud to be ready", || async {
        cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc2")
            .await
            .is_ok()
    })
    .await;
    let c1_config = w
        .orch
        .clouds()
        .kubeconfig(&LogicalCloudRef::new(PROJECT, "lc2"), "ref-c1")
        .await
        .unwrap();

    // A cluster referenced since is not part of the cloud until an update.
    let r = ClusterReference {
        metadata: Metadata::named("ref-c2"),
        spec: ClusterReferenceSpec {
            cluster_provider: PROVIDER.into(),
            cluster: "c2".into(),
            ..ClusterReferenceSpec::default()
        },
    };
    w.orch
        .onboarding()
        .cluster_references()
        .create(&key, &r)
        .await
        .unwrap();
    let err = cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc2")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("update"), "{err}");
    let (code, body) = w.call("POST", &format!("{url}/update")).await;
    assert_eq!((code, body.as_str()), (StatusCode::ACCEPTED, "2"));
    until("the cloud to be ready on c2", || async {
        cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc2")
            .await
            .is_ok()
    })
    .await;
    assert!(
        w.admin("c2")
            .await
            .get(&scope, &namespace)
            .await
            .unwrap()
            .is_some()
    );
    // c1 keeps its credentials.
    assert_eq!(
        w.orch
            .clouds()
            .kubeconfig(&LogicalCloudRef::new(PROJECT, "lc2"), "ref-c1")
            .await
            .unwrap(),
        c1_config
    );

    // A cluster no longer referenced is cleaned up by the next update.
    w.orch
        .onboarding()
        .cluster_references()
        .delete(&key, "ref-c1")
        .await
        .unwrap();
    let (code, body) = w.call("POST", &format!("{url}/update")).await;
    assert_eq!((code, body.as_str()), (StatusCode::ACCEPTED, "3"));
    let c1 = w.admin("c1").await;
    until("the cloud to leave c1", || async {
        c1.get(&scope, &namespace).await.unwrap().is_none()
    })
    .await;
    let cloud = cloud_for_deployment(w.orch.onboarding(), PROJECT, "lc2")
        .await
        .unwrap();
    assert_eq!(cloud.clusters, [(PROVIDER.to_owned(), "c2".to_owned())]);
    assert_eq!(
        w.call("POST", &format!("{url}/terminate")).await.0,
        StatusCode::ACCEPTED
    );
    let c2 = w.admin("c2").await;
    until("the cloud to leave c2", || async {
        c2.get(&scope, &namespace).await.unwrap().is_none()
    })
    .await;
}
