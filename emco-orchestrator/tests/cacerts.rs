//! ca-certs against kubesim clusters through the REST routes, as EMCO's test-cert example runs
//! it (examples/test-cert: a root CA and a cert-manager ClusterIssuer `foo` on the issuing
//! cluster, Istio, cert-manager and KNCC on the edge clusters): a cluster provider's
//! certificate for the clusters labelled `edge` is enrolled (one CertificateRequest per
//! cluster on the issuing cluster, signed there by cert-manager's CA issuer), distributed
//! (Secret, ClusterIssuer and KNCC ConfigCtrl per cluster, as src/ca-certs writes them),
//! refused deletion while deployed, then terminated with nothing left. A project's
//! certificate for a logical cloud adds a ProxyConfig in the cloud's namespace and no default
//! signer.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::time::Duration;

use base64::Engine;
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{Connector, ResourceId, Scope};
use http::StatusCode;
use serde_json::{Value, json};

use emco_testkit::PROVIDER;
const DEADLINE: Duration = Duration::from_secs(60);
/// The CRDs of cert-manager, Istio's ProxyConfig and KNCC (written for these tests).
const CRDS: &str = include_str!("../../tests/crds/ca-certs.yaml");

struct World(emco_testkit::World);

impl std::ops::Deref for World {
    type Target = emco_testkit::World;
    fn deref(&self) -> &emco_testkit::World {
        &self.0
    }
}

/// An object on a cluster: apiVersion, kind, namespace (empty: cluster-scoped) and name.
type Obj = (&'static str, &'static str, &'static str, String);

/// cert-manager's request `name` on the issuing cluster.
fn request(name: String) -> Obj {
    ("cert-manager.io/v1", "CertificateRequest", "default", name)
}

/// The Secret of the distributed CA `base` (`<ctx>-<cert>-<provider>-<cluster>`).
fn secret(base: &str) -> Obj {
    ("v1", "Secret", "cert-manager", format!("{base}-ca"))
}

/// The ClusterIssuer of the distributed CA `base`.
fn issuer(base: &str) -> Obj {
    (
        "cert-manager.io/v1",
        "ClusterIssuer",
        "",
        format!("{base}-issuer"),
    )
}

/// The KNCC ConfigCtrl of the distributed CA `base`.
fn kncc(base: &str) -> Obj {
    (
        "kncc.k8sappconfig.com.gitlab.com/v1alpha1",
        "ConfigCtrl",
        "istio-system",
        format!("{base}-kncc"),
    )
}

/// The ProxyConfig of the distributed CA `base` in namespace `ns`.
fn proxy(base: &str, ns: &'static str) -> Obj {
    (
        "networking.istio.io/v1beta1",
        "ProxyConfig",
        ns,
        format!("{base}-{ns}-pc"),
    )
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

fn unb64(v: &Value) -> String {
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap())
            .unwrap(),
    )
    .unwrap()
}

impl World {
    /// c1 issues; c2 and c3 are the edge clusters.
    async fn start() -> Self {
        let w = Self(
            emco_testkit::World::builder()
                .project("proj1")
                .labels(|c| {
                    if c == "c1" {
                        vec![]
                    } else {
                        vec!["edge".to_owned()]
                    }
                })
                .start()
                .await,
        );
        for c in ["c1", "c2", "c3"] {
            w.apply(c, CRDS).await;
            w.apply(
                c,
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cert-manager\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: istio-system\n",
            )
            .await;
        }
        // The root CA and the ClusterIssuer `foo` of the example's setup-ca-issuers.sh.
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "root-ca");
        let root = params.self_signed(&key).unwrap();
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "foo-root-ca", "namespace": "cert-manager"},
            "data": {"tls.crt": b64(&root.pem()), "tls.key": b64(&key.serialize_pem())}});
        w.apply("c1", &secret.to_string()).await;
        w.apply(
            "c1",
            "apiVersion: cert-manager.io/v1\nkind: ClusterIssuer\nmetadata:\n  name: foo\nspec:\n  ca:\n    secretName: foo-root-ca\n",
        )
        .await;
        w
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let (status, text) = common::call(&self.orch, method, path, body).await;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn ok(&self, method: &str, path: &str, body: Option<Value>, want: StatusCode) -> Value {
        let (status, answer) = self.call(method, path, body).await;
        assert_eq!(status, want, "{method} {path}: {answer}");
        answer
    }

    /// `POST <cert>/<what>` (`enrollment/instantiate`, ...), accepted.
    async fn act(&self, cert: &str, what: &str) {
        self.ok(
            "POST",
            &format!("{cert}/{what}"),
            None,
            StatusCode::ACCEPTED,
        )
        .await;
    }

    async fn conn(&self, cluster: &str) -> KubeConnector {
        KubeConnector::from_kubeconfig(cluster, &self.fleet.kubeconfig(cluster).unwrap())
            .await
            .unwrap()
    }

    async fn apply(&self, cluster: &str, docs: &str) {
        common::apply_yaml(&self.conn(cluster).await, docs).await;
    }

    async fn get(&self, cluster: &str, id: &Obj) -> Option<Value> {
        let (api_version, kind, namespace, name) = id;
        let id = ResourceId {
            api_version: (*api_version).to_owned(),
            kind: (*kind).to_owned(),
            namespace: Some((*namespace).to_owned()).filter(|n| !n.is_empty()),
            name: name.clone(),
        };
        self.conn(cluster)
            .await
            .get(&Scope::new("0", "test"), &id)
            .await
            .unwrap()
    }

    /// Waits until `id` on `cluster` is there (`present`) or gone.
    async fn wait(&self, cluster: &str, id: &Obj, present: bool) -> Value {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let got = self.get(cluster, id).await;
            if got.is_some() == present {
                return got.unwrap_or(Value::Null);
            }
            assert!(
                tokio::time::Instant::now() < end,
                "{id:?} on {cluster}: wanted present={present}, got {got:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the status of `lifecycle` at `base` is Instantiated and ready.
    async fn wait_ready(&self, base: &str, lifecycle: &str) -> Value {
        self.wait_deployed(base, lifecycle, "Instantiated").await
    }

    /// Waits until the status of `lifecycle` at `base` is `deployed` and ready.
    async fn wait_deployed(&self, base: &str, lifecycle: &str, deployed: &str) -> Value {
        let end = tokio::time::Instant::now() + DEADLINE;
        loop {
            let s = self
                .ok(
                    "GET",
                    &format!("{base}/{lifecycle}/status"),
                    None,
                    StatusCode::OK,
                )
                .await;
            if s["deployedStatus"] == deployed && s["readyStatus"] == "Ready" {
                return s;
            }
            assert!(tokio::time::Instant::now() < end, "{lifecycle}: {s}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn cert_body(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"isCA": true,
        "issuerRef": {"name": "foo", "kind": "ClusterIssuer", "group": "cert-manager.io"},
        "duration": "8760h", "issuingCluster": {"cluster": "c1", "clusterProvider": PROVIDER},
        "csrInfo": {"keySize": 2048, "version": 1,
            "algorithm": {"publicKeyAlgorithm": "RSA", "signatureAlgorithm": "SHA256WithRSA"},
            "subject": {"locale": {"country": ["US"]}, "names": {"commonNamePrefix": "foo"},
                "organization": {"names": ["EMCO"]}}}}})
}

/// The context id a lifecycle's status names.
fn context_of(status: &Value) -> String {
    status["states"]["statusctxid"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_certificate_is_enrolled_distributed_and_terminated() {
    let w = World::start().await;
    let base = format!("/v2/cluster-providers/{PROVIDER}/ca-certs");
    w.ok("POST", &base, Some(cert_body("cert0")), StatusCode::CREATED)
        .await;
    let cert = format!("{base}/cert0");
    w.ok(
        "POST",
        &format!("{cert}/clusters"),
        Some(json!({"metadata": {"name": "edges"},
            "spec": {"scope": "label", "label": "edge", "clusterProvider": PROVIDER}})),
        StatusCode::CREATED,
    )
    .await;
    // Distribution needs an enrollment first.
    let (status, text) = w
        .call("POST", &format!("{cert}/distribution/instantiate"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert_eq!(text, "enrollment is not completed\n");

    w.act(&cert, "enrollment/instantiate").await;
    let (status, text) = w
        .call("POST", &format!("{cert}/enrollment/instantiate"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    let enrolled = w.wait_ready(&cert, "enrollment").await;
    let mut ectx = context_of(&enrolled);
    assert_eq!(enrolled["clusterProvider"], PROVIDER);
    assert_eq!(enrolled["name"], "cert0");
    // One request per edge cluster, on the issuing cluster, signed by cert-manager there.
    for edge in ["c2", "c3"] {
        let name = format!("{ectx}-cert0-{PROVIDER}-{edge}-cr");
        let cr = w.wait("c1", &request(name.clone()), true).await;
        assert_eq!(cr["spec"]["isCA"], true);
        assert_eq!(cr["spec"]["duration"], "8760h0m0s");
        assert_eq!(
            cr["spec"]["issuerRef"],
            json!({"name": "foo", "kind": "ClusterIssuer", "group": "cert-manager.io"})
        );
        let csr = unb64(&cr["spec"]["request"]);
        assert!(
            csr.starts_with("-----BEGIN CERTIFICATE REQUEST-----"),
            "{csr}"
        );
        assert!(unb64(&cr["status"]["certificate"]).starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(
            cr["metadata"]["labels"]["emco/deployment-id"],
            format!("{ectx}-cert-enrollment").as_str()
        );
    }

    w.act(&cert, "distribution/instantiate").await;
    let distributed = w.wait_ready(&cert, "distribution").await;
    let mut dctx = context_of(&distributed);
    assert_eq!(
        distributed["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["cluster"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["c2", "c3"]
    );
    for edge in ["c2", "c3"] {
        let base = format!("{dctx}-cert0-{PROVIDER}-{edge}");
        let secret = w.wait(edge, &secret(&base), true).await;
        let chain = unb64(&secret["data"]["tls.crt"]);
        assert_eq!(
            chain.matches("-----BEGIN CERTIFICATE-----").count(),
            2,
            "{chain}"
        );
        assert!(unb64(&secret["data"]["tls.key"]).starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let issuer = w.wait(edge, &issuer(&base), true).await;
        assert_eq!(
            issuer["spec"],
            json!({"ca": {"secretName": format!("{base}-ca")}})
        );
        let kncc = w.wait(edge, &kncc(&base), true).await;
        let patch = kncc["spec"]["patch"].as_array().unwrap();
        assert_eq!(patch.len(), 2, "the CA and the default signer");
        assert_eq!(patch[0]["key"], "mesh:\n  caCertificates\n");
        let value = patch[0]["value"].as_str().unwrap();
        assert!(
            value.starts_with(&format!(
                "- certSigners:\n  - clusterissuers.cert-manager.io/{base}-issuer\n  pem: |\n    -----BEGIN CERTIFICATE-----\n    "
            )),
            "{value}"
        );
        assert_eq!(patch[1]["value"], format!("{base}-issuer").as_str());
    }

    // Enrolling again makes new keys and requests in place of the old; distributing again
    // pushes the new CAs in place of the old (ca-certs' update cannot distribute).
    w.act(&cert, "enrollment/update").await;
    let reenrolled = w.wait_deployed(&cert, "enrollment", "Updated").await;
    let old_ectx = std::mem::replace(&mut ectx, context_of(&reenrolled));
    assert_ne!(old_ectx, ectx);
    assert_eq!(reenrolled["states"]["actions"].as_array().unwrap().len(), 3);
    for edge in ["c2", "c3"] {
        w.wait(
            "c1",
            &request(format!("{ectx}-cert0-{PROVIDER}-{edge}-cr")),
            true,
        )
        .await;
        w.wait(
            "c1",
            &request(format!("{old_ectx}-cert0-{PROVIDER}-{edge}-cr")),
            false,
        )
        .await;
    }
    w.act(&cert, "distribution/update").await;
    let redistributed = w.wait_deployed(&cert, "distribution", "Updated").await;
    let old_dctx = std::mem::replace(&mut dctx, context_of(&redistributed));
    for edge in ["c2", "c3"] {
        let base = format!("{dctx}-cert0-{PROVIDER}-{edge}");
        let secret = w.wait(edge, &secret(&base), true).await;
        // The new enrollment's key.
        assert!(unb64(&secret["data"]["tls.key"]).starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let old = format!("{old_dctx}-cert0-{PROVIDER}-{edge}");
        w.wait(edge, &issuer(&old), false).await;
    }

    // Deployed lifecycles keep the certificate.
    let (status, text) = w.call("DELETE", &cert, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert_eq!(
        text,
        "cert-enrollment must be terminated for CaCert cert0 before it can be deleted\n"
    );
    let (status, text) = w.call("PUT", &cert, Some(cert_body("cert0"))).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert_eq!(
        text,
        "Failed to update the CaCert. cert-enrollment for the CaCert cert0 is in Updated state\n"
    );

    w.act(&cert, "distribution/terminate").await;
    w.act(&cert, "enrollment/terminate").await;
    let (status, text) = w
        .call("POST", &format!("{cert}/enrollment/terminate"), None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    for edge in ["c2", "c3"] {
        let base = format!("{dctx}-cert0-{PROVIDER}-{edge}");
        w.wait(edge, &secret(&base), false).await;
        w.wait(edge, &issuer(&base), false).await;
        let name = format!("{ectx}-cert0-{PROVIDER}-{edge}-cr");
        w.wait("c1", &request(name.clone()), false).await;
    }
    // Once both are terminated for good, the certificate goes (its group first).
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        w.call("DELETE", &format!("{cert}/clusters/edges"), None)
            .await;
        let (status, text) = w.call("DELETE", &cert, None).await;
        if status == StatusCode::NO_CONTENT {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "{status} {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    w.ok("GET", &base, None, StatusCode::OK).await;
    w.0.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_certificate_sets_the_signer_of_a_logical_clouds_namespace() {
    let w = World::start().await;
    // Logical cloud foo (namespace foo-ns) over c2; c3 is labelled edge but not in it.
    w.ok(
        "POST",
        "/v2/projects/proj1/logical-clouds",
        Some(
            json!({"metadata": {"name": "foo"}, "spec": {"namespace": "foo-ns", "level": "1",
            "user": {"userName": "user-1", "type": "certificate"}}}),
        ),
        StatusCode::CREATED,
    )
    .await;
    w.ok(
        "POST",
        "/v2/projects/proj1/logical-clouds/foo/cluster-references",
        Some(json!({"metadata": {"name": "c2"}, "spec": {"clusterProvider": PROVIDER, "cluster": "c2"}})),
        StatusCode::CREATED,
    )
    .await;
    w.apply(
        "c2",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: foo-ns\n",
    )
    .await;
    let base = "/v2/projects/proj1/ca-certs";
    w.ok("POST", base, Some(cert_body("cert1")), StatusCode::CREATED)
        .await;
    let cert = format!("{base}/cert1");
    w.ok(
        "POST",
        &format!("{cert}/logical-clouds"),
        Some(json!({"metadata": {"name": "foo"}, "spec": {"logicalCloud": "foo"}})),
        StatusCode::CREATED,
    )
    .await;
    w.ok(
        "POST",
        &format!("{cert}/logical-clouds/foo/clusters"),
        Some(json!({"metadata": {"name": "edges"},
            "spec": {"scope": "label", "label": "edge", "clusterProvider": PROVIDER}})),
        StatusCode::CREATED,
    )
    .await;
    w.act(&cert, "enrollment/instantiate").await;
    let enrolled = w.wait_ready(&cert, "enrollment").await;
    assert_eq!(enrolled["project"], "proj1");
    let ectx = context_of(&enrolled);
    // Only c2 is in the logical cloud.
    w.wait(
        "c1",
        &request(format!("{ectx}-cert1-{PROVIDER}-c2-cr")),
        true,
    )
    .await;
    assert!(
        w.get("c1", &request(format!("{ectx}-cert1-{PROVIDER}-c3-cr")),)
            .await
            .is_none()
    );
    w.act(&cert, "distribution/instantiate").await;
    let distributed = w.wait_ready(&cert, "distribution").await;
    let dctx = context_of(&distributed);
    let name = format!("{dctx}-cert1-{PROVIDER}-c2");
    let pc = w.wait("c2", &proxy(&name, "foo-ns"), true).await;
    assert_eq!(
        pc["spec"],
        json!({"environmentVariables": {"ISTIO_META_CERT_SIGNER": format!("{name}-issuer")}})
    );
    let kncc = w.wait("c2", &kncc(&name), true).await;
    assert_eq!(
        kncc["spec"]["patch"].as_array().unwrap().len(),
        1,
        "no default signer"
    );
    w.act(&cert, "distribution/terminate").await;
    w.wait("c2", &proxy(&name, "foo-ns"), false).await;
    w.0.stop().await;
}
