//! Authentication and roles over REST, the dashboard and gRPC: what an unauthenticated caller,
//! a project viewer, a project owner, the owner of another project, a cluster admin and a
//! platform admin can and cannot do; static tokens and OIDC JWTs (RS256, ES256, from a key set
//! file, a key set URL and an issuer's discovery document); the dashboard's login cookie; the
//! audit's record of who. The keys under `tests/data` are test-only keys made for these tests.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use emco_core::Metadata;
use emco_core::model::Cluster;
use emco_orchestrator::Orchestrator;
use emco_service::{Authenticator, Config, Metrics};
use emco_store::{AppContextStore, InMemoryAppContextStore, InMemoryResourceStore};
use http::{Request, StatusCode, header};
use http_body_util::BodyExt;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tower::ServiceExt;

mod common;

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster: {server: 'https://127.0.0.1:1'}\n\
     users:\n- name: u\n  user: {token: cluster-secret}\ncontexts:\n- name: c1\n  context: {cluster: c1, user: u}\n\
     current-context: c1\n";

const ADMIN: &str = "admin-token-0123456789";
const OPS: &str = "ops-token-0123456789";
const ALICE: &str = "alice-token-0123456789";
const VIEWER: &str = "viewer-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const NOBODY: &str = "nobody-token-0123456789";

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The auth file of these tests: six static tokens, and `oidc` appended when given.
fn auth_file(dir: &Path, oidc: &str) -> std::path::PathBuf {
    let text = format!(
        "tokens:
  - {{token: {ADMIN}, subject: admin, roles: [platform-admin]}}
  - {{token: {OPS}, subject: ops, roles: [cluster-admin]}}
  - {{token: {ALICE}, subject: alice, roles: [project-owner:p1]}}
  - {{token: {VIEWER}, subject: vera, roles: [project-viewer:p1]}}
  - {{token: {BOB}, subject: bob, roles: [project-owner:p2]}}
  - {{token: {NOBODY}, subject: nobody}}
bindings:
  - {{group: shop-team, roles: [project-owner:p1]}}
  - {{subject: carol, roles: [cluster-admin]}}
{oidc}"
    );
    let path = dir.join("auth.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

struct Server {
    app: axum::Router,
    orch: Orchestrator,
    dir: tempfile::TempDir,
}

impl Server {
    fn new(oidc: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            auth_config: Some(auth_file(dir.path(), oidc)),
            audit_log: Some(dir.path().join("audit.log")),
            ..Config::default()
        };
        let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
        let app = emco_service::app(orch.clone(), &config, Metrics::new());
        Self { app, orch, dir }
    }

    async fn call(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, http::HeaderMap, String) {
        common::call(&self.app, token, method, path, body).await
    }

    async fn status(
        &self,
        token: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> StatusCode {
        self.call(token, method, path, body).await.0
    }

    /// Projects p1 and p2 with a composite app each, a logical cloud in p1, provider cp with
    /// cluster c1: made by the platform admin.
    async fn seed(&self) {
        for (path, body) in [
            ("/v2/projects", json!({"metadata": {"name": "p1"}})),
            ("/v2/projects", json!({"metadata": {"name": "p2"}})),
            (
                "/v2/projects/p1/composite-apps",
                json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
            ),
            (
                "/v2/projects/p2/composite-apps",
                json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
            ),
            ("/v2/cluster-providers", json!({"metadata": {"name": "cp"}})),
        ] {
            let (status, _, text) = self.call(Some(ADMIN), "POST", path, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{path}: {text}");
        }
        let kubeconfig = self.dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, KUBECONFIG).unwrap();
        let cluster = Cluster {
            metadata: Metadata::named("c1"),
            ..Cluster::default()
        };
        self.orch
            .onboarding()
            .create_cluster("cp", &cluster, Some(&kubeconfig))
            .await
            .unwrap();
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("audit.log"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn names(body: &str) -> Vec<String> {
    let items: Vec<Value> = serde_json::from_str(body).unwrap();
    items
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

const CA1: &str = "/v2/projects/p1/composite-apps";

/// One call of the table: whose token, method, path, body, the status expected.
type Row<'a> = (Option<&'a str>, &'a str, String, Option<Value>, StatusCode);
const CLUSTER: &str = "/v2/cluster-providers/cp/clusters/c1";

/// The table of the issue: each caller against each kind of call. Mirrors no EMCO file: EMCO
/// leaves authentication to Istio and its auth service in front of every service.
#[tokio::test]
async fn each_caller_can_do_what_its_roles_allow_and_nothing_else() {
    let s = Server::new("");
    s.seed().await;
    let new_ca =
        |name: &str| json!({"metadata": {"name": name}, "spec": {"compositeAppVersion": "v1"}});
    let label = json!({"clusterLabel": "edge"});
    let lc = "/v2/projects/p1/logical-clouds/lc/cluster-references/r/kubeconfig";
    let rows: Vec<Row> = vec![
        // No credentials: only health, the API description and the dashboard's page.
        (None, "GET", "/healthz".into(), None, StatusCode::OK),
        (None, "GET", "/v2/openapi.yaml".into(), None, StatusCode::OK),
        (None, "GET", "/ui/".into(), None, StatusCode::OK),
        (
            None,
            "GET",
            "/v2/projects".into(),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (None, "GET", CLUSTER.into(), None, StatusCode::UNAUTHORIZED),
        (
            None,
            "POST",
            CA1.into(),
            Some(new_ca("x")),
            StatusCode::UNAUTHORIZED,
        ),
        (
            None,
            "GET",
            "/metrics".into(),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        (
            Some("not-a-known-token-at-all"),
            "GET",
            CA1.into(),
            None,
            StatusCode::UNAUTHORIZED,
        ),
        // A token without roles: shared reads only.
        (
            Some(NOBODY),
            "GET",
            "/v2/controllers".into(),
            None,
            StatusCode::OK,
        ),
        (Some(NOBODY), "GET", CA1.into(), None, StatusCode::FORBIDDEN),
        // The viewer of p1 reads p1 and nothing else, and no credentials of it.
        (Some(VIEWER), "GET", CA1.into(), None, StatusCode::OK),
        (
            Some(VIEWER),
            "GET",
            "/v2/projects/p1".into(),
            None,
            StatusCode::OK,
        ),
        (
            Some(VIEWER),
            "POST",
            CA1.into(),
            Some(new_ca("v")),
            StatusCode::FORBIDDEN,
        ),
        (
            Some(VIEWER),
            "DELETE",
            "/v2/projects/p1/composite-apps/ca/v1".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (Some(VIEWER), "GET", lc.into(), None, StatusCode::FORBIDDEN),
        (
            Some(VIEWER),
            "GET",
            "/v2/projects/p2".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(VIEWER),
            "GET",
            CLUSTER.into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        // The owner of p2: p1 is closed, whether the object asked for exists or not.
        (
            Some(BOB),
            "GET",
            "/v2/projects/p1".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "GET",
            "/v2/projects/p1/composite-apps/ca/v1".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "GET",
            "/v2/projects/p1/composite-apps/nope/v1".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "GET",
            "/v2/projects/p9".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "POST",
            CA1.into(),
            Some(new_ca("b")),
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "DELETE",
            "/v2/projects/p1".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "POST",
            "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/d/instantiate".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "GET",
            "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/d/status".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(BOB),
            "GET",
            "/v2/projects/p2/composite-apps/ca/v1".into(),
            None,
            StatusCode::OK,
        ),
        // The owner of p1: all of p1; no projects made, no clusters, no controllers registered.
        (
            Some(ALICE),
            "POST",
            CA1.into(),
            Some(new_ca("a")),
            StatusCode::CREATED,
        ),
        (
            Some(ALICE),
            "DELETE",
            "/v2/projects/p1/composite-apps/a/v1".into(),
            None,
            StatusCode::NO_CONTENT,
        ),
        (
            Some(ALICE),
            "GET",
            "/v2/projects/p1/composite-apps/nope/v1".into(),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            Some(ALICE),
            "POST",
            "/v2/projects".into(),
            Some(json!({"metadata": {"name": "p3"}})),
            StatusCode::FORBIDDEN,
        ),
        (
            Some(ALICE),
            "GET",
            CLUSTER.into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(ALICE),
            "POST",
            format!("{CLUSTER}/labels"),
            Some(label.clone()),
            StatusCode::FORBIDDEN,
        ),
        (
            Some(ALICE),
            "GET",
            "/v2/controllers".into(),
            None,
            StatusCode::OK,
        ),
        (
            Some(ALICE),
            "POST",
            "/v2/controllers".into(),
            Some(json!({"metadata": {"name": "x"}, "spec": {"host": "h", "port": 1}})),
            StatusCode::FORBIDDEN,
        ),
        (Some(ALICE), "GET", "/metrics".into(), None, StatusCode::OK),
        // The cluster admin: clusters and their kubeconfigs, no project.
        (Some(OPS), "GET", CLUSTER.into(), None, StatusCode::OK),
        (
            Some(OPS),
            "POST",
            format!("{CLUSTER}/labels"),
            Some(label),
            StatusCode::CREATED,
        ),
        (
            Some(OPS),
            "GET",
            "/v2/projects/p1".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            Some(OPS),
            "GET",
            "/ui/api/fleet".into(),
            None,
            StatusCode::OK,
        ),
        (
            Some(ALICE),
            "GET",
            "/ui/api/fleet".into(),
            None,
            StatusCode::FORBIDDEN,
        ),
        // The platform admin: anything.
        (
            Some(ADMIN),
            "POST",
            "/v2/projects".into(),
            Some(json!({"metadata": {"name": "p3"}})),
            StatusCode::CREATED,
        ),
        (
            Some(ADMIN),
            "GET",
            "/v2/projects/p2/composite-apps/ca/v1".into(),
            None,
            StatusCode::OK,
        ),
        (Some(ADMIN), "GET", CLUSTER.into(), None, StatusCode::OK),
    ];
    let mut wrong = Vec::new();
    for (token, method, path, body, expected) in rows {
        let (status, headers, text) = s.call(token, method, &path, body).await;
        if status != expected {
            wrong.push(format!(
                "{token:?} {method} {path}: {status} (expected {expected}): {text}"
            ));
        }
        if status == StatusCode::UNAUTHORIZED {
            assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer realm=\"emco\"");
        }
        if status == StatusCode::FORBIDDEN {
            assert_eq!(headers["x-emco-error-kind"], "PermissionDenied", "{path}");
            assert!(
                !text.contains("not found") && !text.contains("exist"),
                "{text}"
            );
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The list of projects shows each caller its own.
    for (token, expected) in [
        (ADMIN, vec!["p1", "p2", "p3"]),
        (ALICE, vec!["p1"]),
        (VIEWER, vec!["p1"]),
        (BOB, vec!["p2"]),
        (OPS, vec![]),
    ] {
        let (status, _, body) = s.call(Some(token), "GET", "/v2/projects", None).await;
        assert_eq!(status, StatusCode::OK);
        let mut got = names(&body);
        got.sort();
        assert_eq!(got, expected, "{token}");
    }

    // The kubeconfig a cluster admin downloads is the cluster's; refused to others above.
    let req = Request::get(CLUSTER)
        .header(header::AUTHORIZATION, format!("Bearer {OPS}"))
        .header(header::ACCEPT, "application/octet-stream")
        .body(Body::empty())
        .unwrap();
    let resp = s.app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&bytes).contains("cluster-secret"));

    // The audit names who was let in and who was refused.
    let audit = s.audit();
    let find = |who: &str, method: &str, path: &str| {
        audit
            .iter()
            .find(|r| r["who"] == who && r["method"] == method && r["path"] == path)
            .map(|r| r["status"].as_u64().unwrap())
    };
    assert_eq!(find("alice", "POST", CA1), Some(201));
    assert_eq!(find("bob", "POST", CA1), Some(403));
    assert_eq!(find("unauthenticated", "POST", CA1), Some(401));
    // Nothing the audit records carries a token.
    let text = std::fs::read_to_string(s.dir.path().join("audit.log")).unwrap();
    for token in [ADMIN, OPS, ALICE, VIEWER, BOB] {
        assert!(!text.contains(token));
    }
}

#[tokio::test]
async fn the_dashboard_logs_in_with_a_cookie_and_shows_each_caller_its_projects() {
    let s = Server::new("");
    s.seed().await;
    let dig = json!({"metadata": {"name": "d"}, "spec": {"compositeProfile": "cp",
        "version": "r1", "logicalCloud": "lc"}});
    for p in ["p1", "p2"] {
        let path = format!("/v2/projects/{p}/composite-apps/ca/v1/deployment-intent-groups");
        assert_eq!(
            s.status(Some(ADMIN), "POST", &path, Some(dig.clone()))
                .await,
            StatusCode::CREATED
        );
    }
    // Without a session the page's data is refused; the page itself is served.
    assert_eq!(
        s.status(None, "GET", "/ui/api/me", None).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        s.status(None, "GET", "/ui/app.js", None).await,
        StatusCode::OK
    );
    // A bad token: no cookie.
    let (status, headers, _) = s
        .call(
            None,
            "POST",
            "/ui/login",
            Some(json!({"token": "wrong-token-0123456789"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.get(header::SET_COOKIE).is_none());
    let (status, _, _) = s
        .call(None, "POST", "/ui/login", Some(json!({"token": "a b"})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // Alice logs in: an HTTP-only, same-site cookie.
    let (status, headers, body) = s
        .call(None, "POST", "/ui/login", Some(json!({"token": ALICE})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let me: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        me,
        json!({"subject": "alice", "roles": ["project-owner:p1"], "open": false})
    );
    let cookie = headers[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let with_cookie = |path: &str| {
        Request::get(path)
            .header(header::COOKIE, format!("theme=dark; {session}"))
            .body(Body::empty())
            .unwrap()
    };
    let resp = s
        .app
        .clone()
        .oneshot(with_cookie("/ui/api/deployments"))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let groups: Vec<Value> =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    let projects: Vec<&str> = groups
        .iter()
        .map(|g| g["project"].as_str().unwrap())
        .collect();
    assert_eq!(projects, ["p1"]);
    let resp = s
        .app
        .clone()
        .oneshot(with_cookie("/v2/projects/p2"))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    // The admin sees both groups.
    let (_, _, body) = s
        .call(Some(ADMIN), "GET", "/ui/api/deployments", None)
        .await;
    assert_eq!(serde_json::from_str::<Vec<Value>>(&body).unwrap().len(), 2);
    // Logout clears the cookie.
    let (status, headers, _) = s.call(None, "POST", "/ui/logout", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(
        headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

#[tokio::test]
async fn without_an_auth_file_the_server_is_open() {
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    let app = emco_service::app(orch, &Config::default(), Metrics::new());
    let resp = app
        .oneshot(Request::get("/ui/api/me").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let me: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(
        me,
        json!({"subject": "anonymous", "roles": ["platform-admin"], "open": true})
    );
}

/// Writes `text` to `path` with a modification time `secs` seconds ahead, so a rewrite within
/// the file system's timestamp granularity is still seen as a change.
fn rewrite(path: &Path, text: &str, secs: u64) {
    std::fs::write(path, text).unwrap();
    let ahead = SystemTime::now() + std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(ahead)
        .unwrap();
}

#[tokio::test]
async fn a_changed_auth_file_is_taken_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = auth_file(dir.path(), "");
    let auth = Authenticator::from_file(&path).unwrap();
    assert_eq!(principal(&auth, ALICE).await.unwrap().0, "alice");
    assert!(!auth.reload().unwrap(), "nothing changed");
    // Alice's token revoked, a new one for dave.
    let dave = "dave-token-0123456789";
    rewrite(
        &path,
        &format!("tokens:\n  - {{token: {dave}, subject: dave, roles: [project-viewer:p1]}}\n"),
        10,
    );
    assert!(auth.reload().unwrap());
    let e = principal(&auth, ALICE).await.unwrap_err();
    assert_eq!(e.kind(), emco_core::ErrorKind::Unauthenticated);
    assert_eq!(
        principal(&auth, dave).await.unwrap(),
        ("dave".to_owned(), vec!["project-viewer:p1".to_owned()])
    );
    // A half-written file is refused once and the configuration in use kept.
    rewrite(&path, "tokens:\n  - {token: ", 20);
    let e = auth.reload().unwrap_err();
    assert!(e.to_string().contains("is not valid"), "{e}");
    assert!(!auth.reload().unwrap(), "said once per change");
    assert_eq!(principal(&auth, dave).await.unwrap().0, "dave");

    // A key set file is read again when it changes (an issuer's rotated keys).
    let keys = dir.path().join("jwks.json");
    std::fs::write(&keys, r#"{"keys": []}"#).unwrap();
    rewrite(
        &path,
        &format!(
            "oidc: {{issuer: {ISSUER}, audience: emco, jwksFile: {}}}\n",
            keys.display()
        ),
        30,
    );
    assert!(auth.reload().unwrap());
    let token = jwt(
        Algorithm::RS256,
        Some("rsa-1"),
        &claims("erin", &json!({"roles": ["cluster-admin"]})),
    );
    let e = principal(&auth, &token).await.unwrap_err();
    assert!(e.to_string().contains("no signing key"), "{e}");
    rewrite(
        &keys,
        &std::fs::read_to_string(data("jwks.json")).unwrap(),
        40,
    );
    assert!(auth.reload().unwrap());
    assert_eq!(
        principal(&auth, &token).await.unwrap(),
        ("erin".to_owned(), vec!["cluster-admin".to_owned()])
    );
}

#[tokio::test]
async fn an_embedder_acting_for_a_principal_gets_that_principals_rights() {
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    let admin = emco_service::app(orch.clone(), &Config::default(), Metrics::new());
    for p in ["p1", "p2"] {
        let body = json!({"metadata": {"name": p}});
        let (status, _, text) =
            common::call(&admin, None, "POST", "/v2/projects", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{text}");
    }
    let alice =
        emco_service::Principal::new("alice", [emco_service::Role::ProjectOwner("p1".to_owned())]);
    let auth = Authenticator::acting_as(alice);
    assert!(!auth.is_open());
    let app = emco_service::app_with(orch, &Config::default(), Metrics::new(), auth);
    let new_ca = json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}});
    // No token needed, and any token is ignored: the embedder said who calls.
    for token in [None, Some(ADMIN)] {
        let (status, _, body) = common::call(&app, token, "GET", "/v2/projects", None).await;
        assert_eq!(
            (status, names(&body)),
            (StatusCode::OK, vec!["p1".to_owned()])
        );
        let (status, _, body) = common::call(
            &app,
            token,
            "POST",
            "/v2/projects/p2/composite-apps",
            Some(new_ca.clone()),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(
            body.contains("\"alice\" may not change project \"p2\""),
            "{body}"
        );
    }
    let (status, _, body) = common::call(
        &app,
        None,
        "POST",
        "/v2/projects/p1/composite-apps",
        Some(new_ca),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[test]
fn a_bad_auth_file_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    for (text, says) in [
        ("tokens: []\n", "neither tokens nor oidc"),
        (
            "tokens:\n  - {token: short, subject: a}\n",
            "shorter than 16",
        ),
        (
            "tokens:\n  - {token: 0123456789abcdef, subject: a, roles: [root]}\n",
            "unknown role \"root\"",
        ),
        (
            "tokens:\n  - {token: 0123456789abcdef, subject: a}\n  - {token: 0123456789abcdef, subject: b}\n",
            "repeats",
        ),
        (
            "tokens:\n  - {token: 0123456789abcdef, subject: a, colour: red}\n",
            "colour",
        ),
        (
            "oidc: {issuer: i, audience: a, jwksFile: /nonexistent/jwks.json}\n",
            "cannot read the key set",
        ),
        (
            "oidc: {issuer: i, audience: a}\nbindings:\n  - {roles: [cluster-admin]}\n",
            "one subject or one group",
        ),
    ] {
        let path = dir.path().join("auth.yaml");
        std::fs::write(&path, text).unwrap();
        let e = Config::from_args([
            "emco-server".to_owned(),
            "--auth-config".to_owned(),
            path.display().to_string(),
        ])
        .unwrap_err();
        assert!(e.to_string().contains(says), "{text}: {e}");
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A JWT signed with the test key of `alg` under `kid`.
fn jwt(alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let key = match alg {
        Algorithm::RS256 => {
            EncodingKey::from_rsa_pem(&std::fs::read(data("jwt-rs256.pem")).unwrap()).unwrap()
        }
        Algorithm::ES256 => {
            EncodingKey::from_ec_pem(&std::fs::read(data("jwt-es256.pem")).unwrap()).unwrap()
        }
        Algorithm::HS256 => EncodingKey::from_secret(b"a shared secret"),
        _ => unreachable!(),
    };
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, &key).unwrap()
}

const ISSUER: &str = "https://login.example.com/realms/emco";

fn claims(sub: &str, extra: &Value) -> Value {
    let mut c = json!({"iss": ISSUER, "aud": "emco", "sub": sub, "exp": now() + 300, "iat": now()});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

async fn principal(
    auth: &Authenticator,
    token: &str,
) -> Result<(String, Vec<String>), emco_core::Error> {
    auth.authenticate(Some(token)).await.map(|p| {
        (
            p.subject().to_owned(),
            p.roles().iter().map(ToString::to_string).collect(),
        )
    })
}

#[tokio::test]
async fn oidc_tokens_are_checked_against_the_issuers_keys() {
    let jwks = data("jwks.json").display().to_string();
    let auth = Authenticator::parse(&format!(
        "oidc: {{issuer: {ISSUER}, audience: emco, jwksFile: {jwks}}}
bindings:
  - {{group: shop-team, roles: [project-owner:p1]}}
  - {{subject: carol, roles: [cluster-admin]}}
"
    ))
    .unwrap();
    let ok = |alg, kid: &str, sub: &str, extra: Value| jwt(alg, Some(kid), &claims(sub, &extra));
    // Roles from the token, from bindings by subject and by group; names not ours ignored.
    let t = ok(
        Algorithm::RS256,
        "rsa-1",
        "dave",
        json!({"roles": ["project-viewer:p2", "offline_access"]}),
    );
    assert_eq!(
        principal(&auth, &t).await.unwrap(),
        ("dave".to_owned(), vec!["project-viewer:p2".to_owned()])
    );
    let t = ok(
        Algorithm::ES256,
        "ec-1",
        "carol",
        json!({"groups": ["shop-team", "other"]}),
    );
    assert_eq!(
        principal(&auth, &t).await.unwrap(),
        (
            "carol".to_owned(),
            vec!["cluster-admin".to_owned(), "project-owner:p1".to_owned()]
        )
    );
    // A token without kid is taken when one key of its kind is there.
    let t = jwt(Algorithm::ES256, None, &claims("erin", &json!({})));
    assert_eq!(principal(&auth, &t).await.unwrap().0, "erin");
    // Refused: each with why.
    let expired = claims("x", &json!({"exp": now() - 3600}));
    let early = claims("x", &json!({"nbf": now() + 3600}));
    let other_aud = claims("x", &json!({"aud": "someone-else"}));
    let other_iss = claims("x", &json!({"iss": "https://evil.example.com"}));
    let mut no_exp = claims("x", &json!({}));
    no_exp.as_object_mut().unwrap().remove("exp");
    let mut no_sub = claims("x", &json!({}));
    no_sub.as_object_mut().unwrap().remove("sub");
    let rs = jwt(Algorithm::RS256, Some("rsa-1"), &claims("x", &json!({})));
    let mut parts: Vec<&str> = rs.split('.').collect();
    let forged_payload = {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(claims("x", &json!({"roles": ["platform-admin"]})).to_string())
    };
    parts[1] = &forged_payload;
    let forged = parts.join(".");
    let none_alg = {
        use base64::Engine as _;
        let e = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            e(json!({"alg": "none", "typ": "JWT"})),
            e(claims("x", &json!({})))
        )
    };
    for (token, says) in [
        (
            jwt(Algorithm::RS256, Some("rsa-1"), &expired),
            "ExpiredSignature",
        ),
        (
            jwt(Algorithm::RS256, Some("rsa-1"), &early),
            "ImmatureSignature",
        ),
        (
            jwt(Algorithm::RS256, Some("rsa-1"), &other_aud),
            "InvalidAudience",
        ),
        (
            jwt(Algorithm::RS256, Some("rsa-1"), &other_iss),
            "InvalidIssuer",
        ),
        (jwt(Algorithm::RS256, Some("rsa-1"), &no_exp), "exp"),
        (
            jwt(Algorithm::RS256, Some("rsa-1"), &no_sub),
            "no \"sub\" claim",
        ),
        (
            jwt(Algorithm::HS256, Some("rsa-1"), &claims("x", &json!({}))),
            "not accepted",
        ),
        // The EC key's id on an RSA signature: no RSA key of that id.
        (
            jwt(Algorithm::RS256, Some("ec-1"), &claims("x", &json!({}))),
            "no signing key \"ec-1\"",
        ),
        (
            jwt(Algorithm::RS256, Some("rsa-9"), &claims("x", &json!({}))),
            "no signing key \"rsa-9\"",
        ),
        (forged, "InvalidSignature"),
        (none_alg, "not valid"),
        ("a.b.c".to_owned(), "not valid"),
    ] {
        let e = principal(&auth, &token).await.unwrap_err();
        assert_eq!(
            e.kind(),
            emco_core::ErrorKind::Unauthenticated,
            "{says}: {e}"
        );
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
}

/// Serves `routes` on a loopback port; its base URL.
async fn serve(routes: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, routes).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
async fn an_issuers_keys_come_from_its_url_or_its_discovery_document() {
    use axum::routing::get;
    let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&fetches);
    let keys: Value = serde_json::from_slice(&std::fs::read(data("jwks.json")).unwrap()).unwrap();
    let keys_route = get(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let keys = keys.clone();
        async move { axum::Json(keys) }
    });
    let base = serve(axum::Router::new().route("/keys", keys_route)).await;
    let discovery_doc = json!({"issuer": "x", "jwks_uri": format!("{base}/keys")});
    let issuer = serve(axum::Router::new().route(
        "/.well-known/openid-configuration",
        get(move || async move { axum::Json(discovery_doc) }),
    ))
    .await;

    // By URL: fetched once, then served from the cache.
    let by_url = Authenticator::parse(&format!(
        "oidc: {{issuer: {ISSUER}, audience: emco, jwksUrl: '{base}/keys'}}\n"
    ))
    .unwrap();
    for _ in 0..3 {
        let t = jwt(Algorithm::RS256, Some("rsa-1"), &claims("u", &json!({})));
        assert_eq!(principal(&by_url, &t).await.unwrap().0, "u");
    }
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1);
    // An unknown key right after a fetch does not fetch again (at most every 30 s).
    let t = jwt(Algorithm::RS256, Some("rsa-9"), &claims("u", &json!({})));
    assert!(principal(&by_url, &t).await.is_err());
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1);

    // By discovery: the issuer's document names the key set.
    let mut c = claims("w", &json!({}));
    c["iss"] = json!(issuer);
    let by_discovery =
        Authenticator::parse(&format!("oidc: {{issuer: '{issuer}', audience: emco}}\n")).unwrap();
    let t = jwt(Algorithm::ES256, Some("ec-1"), &c);
    assert_eq!(principal(&by_discovery, &t).await.unwrap().0, "w");
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 2);

    // An issuer that cannot be reached: 503 rather than a wrong 401.
    let down = Authenticator::parse(&format!(
        "oidc: {{issuer: {ISSUER}, audience: emco, jwksUrl: 'http://127.0.0.1:1/keys'}}\n"
    ))
    .unwrap();
    let e = principal(&down, &t).await.unwrap_err();
    assert_eq!(e.kind(), emco_core::ErrorKind::Unavailable, "{e}");
}

#[tokio::test]
async fn grpc_services_need_a_platform_admins_token() {
    use emco_controller_sdk::remote::{BearerToken, RemoteAppContextStore};
    let dir = tempfile::tempdir().unwrap();
    let auth = Authenticator::from_file(&auth_file(dir.path(), "")).unwrap();
    let orch = Orchestrator::builder(Arc::new(InMemoryResourceStore::new()))
        .contexts(Arc::new(InMemoryAppContextStore::new()))
        .build()
        .unwrap();
    let (_health, router) = emco_service::grpc_router(&orch, auth).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(router.serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)));
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    let store = |token: Option<&str>| {
        let t = token.map_or_else(BearerToken::none, |t| BearerToken::new(t).unwrap());
        RemoteAppContextStore::with_token(channel.clone(), t)
    };
    let e = store(None).get("/context/1/").await.unwrap_err();
    assert_eq!(e.kind(), emco_core::ErrorKind::Unauthenticated, "{e}");
    let e = store(Some(ALICE)).get("/context/1/").await.unwrap_err();
    assert_eq!(e.kind(), emco_core::ErrorKind::PermissionDenied, "{e}");
    assert!(
        e.message()
            .ends_with("\"alice\" may not change the platform's settings and services"),
        "{e}"
    );
    assert!(
        store(Some(ADMIN))
            .get("/context/1/")
            .await
            .unwrap()
            .is_none()
    );
    // Health answers anyone.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(serving.into_inner().status, 1);
}

#[tokio::test]
async fn each_caller_has_its_own_request_rate() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        auth_config: Some(auth_file(dir.path(), "")),
        rate_limit: Some(5),
        ..Config::default()
    };
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    let app = emco_service::app(orch, &config, Metrics::new());
    let get = |token: &'static str| {
        let app = app.clone();
        async move {
            let req = Request::get("/v2/controllers")
                .header(header::AUTHORIZATION, format!("Bearer {token}"))
                .body(Body::empty())
                .unwrap();
            app.oneshot(req).await.unwrap()
        }
    };
    // A burst of twice the rate, then 429 with when to come back.
    for _ in 0..10 {
        assert_eq!(get(ALICE).await.status(), StatusCode::OK);
    }
    let refused = get(ALICE).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
    // Bob is not slowed by Alice; health is never limited.
    assert_eq!(get(BOB).await.status(), StatusCode::OK);
    let health = app
        .clone()
        .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}
