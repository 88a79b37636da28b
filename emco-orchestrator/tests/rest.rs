//! Every route of the orchestrator, clm and dcm over REST: happy paths and their 400/404/409/422
//! answers, referential integrity, PUT name mismatch, Accept negotiation, upload checks; run
//! against the memory and redb stores (and MongoDB when `EMCO_TEST_MONGO` is set).

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use emco_helm::archive::pack_dir;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use emco_core::DigRef;
use emco_core::lifecycle::DigState;
use emco_orchestrator::{Limits, Orchestrator, keys};
use emco_store::{InMemoryResourceStore, ResourceStore};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/testdata");

fn collectd() -> std::path::PathBuf {
    Path::new(TESTDATA).join("emco-examples/helm_charts/collectd")
}

/// A gzip'd tar of the files of `dir` at the archive's root.
fn flat_tgz(dir: &Path) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        b.append_path_with_name(entry.path(), entry.file_name())
            .unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// A gzip'd tar with one entry of `kind` at the raw path `path` (bypassing the tar crate's own
/// path checks, as a hostile client would).
fn hostile_tgz(path: &str, kind: tar::EntryType) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let mut h = tar::Header::new_old();
    let name = &mut h.as_old_mut().name;
    name[..path.len()].copy_from_slice(path.as_bytes());
    h.set_entry_type(kind);
    h.set_size(4);
    if kind.is_symlink() {
        h.set_size(0);
        h.set_link_name("/etc/passwd").unwrap();
        h.set_cksum();
        b.append(&h, &[][..]).unwrap();
    } else {
        h.set_cksum();
        b.append(&h, &b"data"[..]).unwrap();
    }
    b.into_inner().unwrap().finish().unwrap()
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:6443'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";

struct Client {
    app: Router,
}

struct Answer {
    status: StatusCode,
    content_type: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

const BOUNDARY: &str = "XtestBoundaryX";

fn form(metadata: Option<&Value>, file: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    if let Some(m) = metadata {
        out.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{m}\r\n"
            )
            .as_bytes(),
        );
    }
    if let Some(f) = file {
        out.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.tgz\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
        );
        out.extend_from_slice(f);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

impl Client {
    async fn send(
        &self,
        method: &str,
        uri: &str,
        content_type: Option<&str>,
        accept: Option<&str>,
        body: Vec<u8>,
    ) -> Answer {
        let mut req = Request::builder().method(method).uri(uri);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        let resp = self
            .app
            .clone()
            .oneshot(req.body(Body::from(body)).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        if status.is_server_error() {
            panic!(
                "{method} {uri}: {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Answer {
            status,
            content_type,
            body,
        }
    }
    async fn post(&self, uri: &str, body: &Value) -> Answer {
        self.send(
            "POST",
            uri,
            Some("application/json"),
            None,
            body.to_string().into_bytes(),
        )
        .await
    }
    async fn post_raw(&self, uri: &str, body: &str) -> Answer {
        self.send(
            "POST",
            uri,
            Some("application/json"),
            None,
            body.as_bytes().to_vec(),
        )
        .await
    }
    async fn put(&self, uri: &str, body: &Value) -> Answer {
        self.send(
            "PUT",
            uri,
            Some("application/json"),
            None,
            body.to_string().into_bytes(),
        )
        .await
    }
    async fn get(&self, uri: &str) -> Answer {
        self.send("GET", uri, None, None, Vec::new()).await
    }
    async fn get_as(&self, uri: &str, accept: &str) -> Answer {
        self.send("GET", uri, None, Some(accept), Vec::new()).await
    }
    async fn delete(&self, uri: &str) -> Answer {
        self.send("DELETE", uri, None, None, Vec::new()).await
    }
    async fn upload(
        &self,
        method: &str,
        uri: &str,
        metadata: Option<&Value>,
        file: Option<&[u8]>,
    ) -> Answer {
        let ct = format!("multipart/form-data; boundary={BOUNDARY}");
        self.send(method, uri, Some(&ct), None, form(metadata, file))
            .await
    }
}

fn named(name: &str) -> Value {
    json!({"metadata": {"name": name}})
}

/// Asserts `answer` has `status`, printing the body otherwise.
#[track_caller]
fn expect(answer: &Answer, status: u16) {
    assert_eq!(answer.status.as_u16(), status, "body: {}", answer.text());
    if status >= 400 {
        assert!(
            answer.content_type.starts_with("text/plain"),
            "{}",
            answer.content_type
        );
        assert!(!answer.body.is_empty());
    }
}

const CA: &str = "/v2/projects/p1/composite-apps/ca/v1";
const DIG: &str = "/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/dig1";

async fn crud_flow(store: Arc<dyn ResourceStore>) {
    let orch = Orchestrator::new(store);
    let c = Client {
        app: emco_orchestrator::rest::router(orch.clone()),
    };

    // ---- projects: body errors, duplicates, PUT rules ----
    let r = c.post("/v2/projects", &named("p1")).await;
    expect(&r, 201);
    assert_eq!(r.json()["metadata"]["name"], "p1");
    expect(&c.post("/v2/projects", &named("p1")).await, 409);
    expect(&c.post_raw("/v2/projects", "").await, 400);
    expect(&c.post_raw("/v2/projects", "{").await, 422);
    expect(
        &c.post_raw("/v2/projects", r#"{"metadata":{"name":7}}"#)
            .await,
        422,
    );
    // EMCO checks the body against json-schemas/metadata.json first (projecthandler.go).
    let r = c.post("/v2/projects", &named("-bad")).await;
    expect(&r, 400);
    assert!(
        r.text()
            .starts_with("Invalid Input:\nDoes not match pattern"),
        "{}",
        r.text()
    );
    expect(&c.get("/v2/projects/p1").await, 200);
    expect(&c.get("/v2/projects/nope").await, 404);
    expect(&c.put("/v2/projects/p2", &named("p3")).await, 400);
    // EMCO's project PUT answers 200 whether it created or replaced (projecthandler.go).
    expect(&c.put("/v2/projects/p2", &named("p2")).await, 200);
    let r = c
        .put(
            "/v2/projects/p2",
            &json!({"metadata": {"name": "p2", "description": "d"}}),
        )
        .await;
    expect(&r, 200);
    assert_eq!(
        c.get("/v2/projects/p2").await.json()["metadata"]["description"],
        "d"
    );
    assert_eq!(
        c.get("/v2/projects").await.json().as_array().unwrap().len(),
        2
    );
    expect(&c.delete("/v2/projects/p2").await, 204);
    expect(&c.delete("/v2/projects/p2").await, 404);

    // ---- composite apps ----
    let ca = json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}});
    // A missing parent is EMCO's database 409 (pkg/infra/apierror/apierror.go).
    expect(&c.post("/v2/projects/nope/composite-apps", &ca).await, 409);
    expect(
        &c.post(
            "/v2/projects/p1/composite-apps",
            &json!({"metadata": {"name": "ca"}}),
        )
        .await,
        400,
    );
    expect(&c.post("/v2/projects/p1/composite-apps", &ca).await, 201);
    expect(&c.post("/v2/projects/p1/composite-apps", &ca).await, 409);
    expect(&c.get(CA).await, 200);
    expect(&c.get("/v2/projects/p1/composite-apps/ca/v2").await, 404);
    expect(
        &c.put("/v2/projects/p1/composite-apps/ca/v2", &ca).await,
        400,
    );
    // composite_app_handler.go answers a PUT with 201 either way.
    expect(&c.put(CA, &ca).await, 201);
    expect(&c.get("/v2/projects/nope/composite-apps").await, 404);
    assert_eq!(
        c.get("/v2/projects/p1/composite-apps")
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // ---- apps: multipart uploads and their checks ----
    let chart = pack_dir(&collectd().join("helm/collectd"), "collectd").unwrap();
    let apps = format!("{CA}/apps");
    expect(
        &c.upload("POST", &apps, Some(&named("collectd")), Some(&chart))
            .await,
        201,
    );
    expect(
        &c.upload("POST", &apps, Some(&named("collectd")), Some(&chart))
            .await,
        409,
    );
    // apphandler.go: a form without its file is a 422 `Unable to process file`.
    expect(
        &c.upload("POST", &apps, Some(&named("other")), None).await,
        422,
    );
    expect(&c.upload("POST", &apps, None, Some(&chart)).await, 400);
    expect(
        &c.upload("POST", &apps, Some(&named("-x")), Some(&chart))
            .await,
        400,
    );
    expect(
        &c.send(
            "POST",
            &apps,
            Some("application/json"),
            None,
            b"{}".to_vec(),
        )
        .await,
        400,
    );
    let r = c
        .upload("POST", &apps, Some(&named("other")), Some(b"not a tarball"))
        .await;
    expect(&r, 400);
    let no_chart_yaml = pack_dir(&collectd().join("profile"), "collectd").unwrap();
    expect(
        &c.upload("POST", &apps, Some(&named("other")), Some(&no_chart_yaml))
            .await,
        400,
    );
    let two_tops = flat_tgz(&collectd().join("helm/collectd"));
    expect(
        &c.upload("POST", &apps, Some(&named("other")), Some(&two_tops))
            .await,
        400,
    );
    let escape = hostile_tgz("../../etc/evil", tar::EntryType::Regular);
    let r = c
        .upload("POST", &apps, Some(&named("other")), Some(&escape))
        .await;
    expect(&r, 400);
    assert!(r.text().contains("escapes"), "{}", r.text());
    let link = hostile_tgz("collectd/Chart.yaml", tar::EntryType::Symlink);
    expect(
        &c.upload("POST", &apps, Some(&named("other")), Some(&link))
            .await,
        400,
    );
    expect(
        &c.upload(
            "POST",
            "/v2/projects/p1/composite-apps/ca/v9/apps",
            Some(&named("x")),
            Some(&chart),
        )
        .await,
        409,
    );
    // A failed upload leaves nothing behind.
    expect(&c.get(&format!("{apps}/other")).await, 404);
    // A second app, for dependencies and placement.
    expect(
        &c.upload(
            "PUT",
            &format!("{apps}/web"),
            Some(&named("web")),
            Some(&chart),
        )
        .await,
        201,
    );
    expect(
        &c.upload(
            "PUT",
            &format!("{apps}/web"),
            Some(&named("web")),
            Some(&chart),
        )
        .await,
        201,
    );
    expect(
        &c.upload(
            "PUT",
            &format!("{apps}/web"),
            Some(&named("nope")),
            Some(&chart),
        )
        .await,
        400,
    );

    // Accept negotiation.
    let item = format!("{apps}/collectd");
    let r = c.get(&item).await;
    expect(&r, 200);
    assert_eq!(
        r.json(),
        json!({"metadata": {"name": "collectd", "description": "", "userData1": "", "userData2": ""}})
    );
    let r = c.get_as(&item, "application/octet-stream").await;
    expect(&r, 200);
    assert_eq!(r.body, chart);
    let r = c.get_as(&item, "multipart/form-data").await;
    expect(&r, 200);
    assert!(r.content_type.starts_with("multipart/form-data; boundary="));
    let boundary = r.content_type.split("boundary=").nth(1).unwrap().to_owned();
    let text = r.body.clone();
    let needle = b"filename=\"collectd.tgz\"\r\nContent-Type: application/octet-stream\r\n\r\n";
    let start = text
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
        + needle.len();
    let tail = format!("\r\n--{boundary}--\r\n");
    assert_eq!(&text[start..text.len() - tail.len()], &chart[..]);
    assert!(String::from_utf8_lossy(&text).contains("\"name\":\"collectd\""));
    expect(&c.get_as(&item, "text/html").await, 406);
    assert_eq!(c.get(&apps).await.json().as_array().unwrap().len(), 2);

    // ---- app dependencies ----
    let deps = format!("{CA}/apps/collectd/dependency");
    let dep = |app: &str| json!({"metadata": {"name": "d1"}, "spec": {"app": app, "opStatus": "Ready", "wait": 10}});
    expect(&c.post(&deps, &dep("missing")).await, 404);
    expect(&c.post(&deps, &dep("collectd")).await, 400);
    expect(
        &c.post(
            &deps,
            &json!({"metadata": {"name": "d1"}, "spec": {"app": "web", "opStatus": "Up"}}),
        )
        .await,
        400,
    );
    expect(&c.post(&deps, &json!({"metadata": {"name": "d1"}, "spec": {"app": "web", "opStatus": "Ready", "wait": 5000}})).await, 400);
    expect(&c.post(&deps, &dep("web")).await, 201);
    expect(&c.get(&format!("{deps}/d1")).await, 200);
    expect(&c.put(&format!("{deps}/d2"), &dep("web")).await, 400);
    // An app with dependencies cannot be deleted.
    expect(&c.delete(&item).await, 409);

    // ---- composite profiles and app profiles ----
    let cps = format!("{CA}/composite-profiles");
    expect(&c.post(&cps, &named("cp")).await, 201);
    let profiles = format!("{cps}/cp/profiles");
    let profile_tgz = flat_tgz(&collectd().join("profile"));
    let prof = |app: &str| json!({"metadata": {"name": "pr"}, "spec": {"app": app}});
    expect(
        &c.upload(
            "POST",
            &profiles,
            Some(&prof("missing")),
            Some(&profile_tgz),
        )
        .await,
        404,
    );
    expect(
        &c.upload("POST", &profiles, Some(&prof("collectd")), Some(&chart))
            .await,
        400,
    );
    expect(
        &c.upload(
            "POST",
            &format!("{cps}/nope/profiles"),
            Some(&prof("collectd")),
            Some(&profile_tgz),
        )
        .await,
        404,
    );
    expect(
        &c.upload(
            "POST",
            &profiles,
            Some(&prof("collectd")),
            Some(&profile_tgz),
        )
        .await,
        201,
    );
    let r = c.get(&format!("{profiles}?app=collectd")).await;
    expect(&r, 200);
    assert_eq!(r.json()["spec"]["app"], "collectd");
    let r = c
        .get_as(
            &format!("{profiles}?app=collectd"),
            "application/octet-stream",
        )
        .await;
    assert_eq!(r.body, profile_tgz);
    expect(&c.get(&format!("{profiles}?app=web")).await, 404);
    let r = c
        .get_as(&format!("{profiles}/pr"), "application/octet-stream")
        .await;
    expect(&r, 200);
    assert_eq!(r.body, profile_tgz);
    expect(
        &c.get_as(&format!("{profiles}/pr"), "multipart/form-data")
            .await,
        200,
    );
    expect(
        &c.upload(
            "PUT",
            &format!("{profiles}/pr"),
            Some(&prof("collectd")),
            Some(&profile_tgz),
        )
        .await,
        201,
    );
    expect(
        &c.delete(
            &cps.clone()
                .replace("composite-profiles", "composite-profiles/cp"),
        )
        .await,
        409,
    );

    // ---- logical clouds (dcm) and clusters (clm) ----
    let lcs = "/v2/projects/p1/logical-clouds";
    expect(
        &c.post(
            lcs,
            &json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}}),
        )
        .await,
        201,
    );
    expect(
        &c.post(
            lcs,
            &json!({"metadata": {"name": "lc1"}, "spec": {"level": "1"}}),
        )
        .await,
        400,
    );
    let r = c.post(lcs, &json!({"metadata": {"name": "lc1"}, "spec": {"namespace": "ns1", "user": {"userName": "u1"}}})).await;
    expect(&r, 201);
    // EMCO's defaults are stored and echoed.
    assert_eq!(r.json()["spec"]["level"], "1");
    // Only the level is defaulted (src/dcm/pkg/module/logicalcloud.go `Create`).
    assert_eq!(r.json()["spec"]["user"]["type"], "");
    assert_eq!(
        c.get("/v2/projects/p1/logical-clouds/lc1").await.json()["spec"]["level"],
        "1"
    );
    expect(&c.post("/v2/cluster-providers", &named("edge")).await, 201);
    let clusters = "/v2/cluster-providers/edge/clusters";
    let kc = KUBECONFIG.as_bytes();
    // clusterhandler.go: a cluster without GitOps needs its kubeconfig (422).
    expect(
        &c.upload("POST", clusters, Some(&named("c1")), None).await,
        422,
    );
    expect(
        &c.upload("POST", clusters, Some(&named("c1")), Some(b"clusters: 5\n"))
            .await,
        400,
    );
    expect(
        &c.upload("POST", clusters, Some(&named("c1")), Some(b": : :\n\t"))
            .await,
        400,
    );
    expect(
        &c.upload(
            "POST",
            "/v2/cluster-providers/nope/clusters",
            Some(&named("c1")),
            Some(kc),
        )
        .await,
        409,
    );
    expect(
        &c.upload("POST", clusters, Some(&named("c1")), Some(kc))
            .await,
        201,
    );
    expect(
        &c.upload("POST", clusters, Some(&named("c1")), Some(kc))
            .await,
        409,
    );
    let gitops = json!({"metadata": {"name": "c2"}, "spec": {"gitOps": {"gitOpsType": "github", "gitOpsReferenceObject": "cred", "gitOpsResourceObject": "repo"}}});
    expect(&c.upload("POST", clusters, Some(&gitops), None).await, 201);
    let list = c.get(clusters).await;
    expect(&list, 200);
    assert_eq!(list.json().as_array().unwrap().len(), 2);
    assert!(
        !list.text().contains("127.0.0.1:6443"),
        "kubeconfig leaked: {}",
        list.text()
    );
    let r = c.get("/v2/cluster-providers/edge/clusters/c1").await;
    assert!(!r.text().contains("6443"));
    let r = c
        .get_as(
            "/v2/cluster-providers/edge/clusters/c1",
            "application/octet-stream",
        )
        .await;
    assert_eq!(r.body, kc);
    expect(
        &c.get_as(
            "/v2/cluster-providers/edge/clusters/c2",
            "application/octet-stream",
        )
        .await,
        404,
    );
    let labels = "/v2/cluster-providers/edge/clusters/c1/labels";
    expect(&c.post(labels, &json!({"clusterLabel": "east"})).await, 201);
    expect(&c.post(labels, &json!({"clusterLabel": "east"})).await, 409);
    expect(&c.post(labels, &json!({"clusterLabel": ""})).await, 400);
    expect(
        &c.put(&format!("{labels}/west"), &json!({"clusterLabel": "east"}))
            .await,
        400,
    );
    expect(
        &c.post(
            "/v2/cluster-providers/edge/clusters/c9/labels",
            &json!({"clusterLabel": "east"}),
        )
        .await,
        409,
    );
    assert_eq!(
        c.get(&format!("{clusters}?label=east")).await.json(),
        json!(["c1"])
    );
    assert_eq!(
        c.get(&format!("{clusters}?label=north")).await.json(),
        json!([])
    );
    let with = c.get(&format!("{clusters}?withLabels=true")).await.json();
    assert_eq!(with[0]["labels"], json!([{"clusterLabel": "east"}]));
    assert_eq!(with[1]["labels"], json!([]));
    let kvs = "/v2/cluster-providers/edge/clusters/c1/kv-pairs";
    expect(
        &c.post(
            kvs,
            &json!({"metadata": {"name": "kv1"}, "spec": {"kv": [{"a": "1"}, {"b": {"x": 2}}]}}),
        )
        .await,
        201,
    );
    expect(
        &c.post(
            kvs,
            &json!({"metadata": {"name": "kv2"}, "spec": {"kv": []}}),
        )
        .await,
        400,
    );
    assert_eq!(
        c.get(&format!("{kvs}/kv1?key=b")).await.json(),
        json!({"value": {"x": 2}})
    );
    expect(&c.get(&format!("{kvs}/kv1?key=zz")).await, 404);
    expect(
        &c.delete("/v2/cluster-providers/edge/clusters/c1").await,
        409,
    );
    expect(&c.delete("/v2/cluster-providers/edge").await, 409);

    let lc = "/v2/projects/p1/logical-clouds/lc1";
    let cref = |cluster: &str| json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": cluster, "loadBalancerIP": "10.0.0.1"}});
    // dcm does not look the cluster up (src/dcm/pkg/module/cluster.go): instantiate does.
    expect(
        &c.post(&format!("{lc}/cluster-references"), &cref("c9"))
            .await,
        201,
    );
    expect(&c.delete(&format!("{lc}/cluster-references/r1")).await, 204);
    expect(&c.post(&format!("{lc}/cluster-references"), &json!({"metadata": {"name": "r1"}, "spec": {"clusterProvider": "edge", "cluster": "c1", "loadBalancerIP": "nope"}})).await, 400);
    expect(
        &c.post(&format!("{lc}/cluster-references"), &cref("c1"))
            .await,
        201,
    );
    expect(
        &c.post(
            "/v2/projects/p1/logical-clouds/lc9/cluster-references",
            &cref("c1"),
        )
        .await,
        404,
    );
    expect(&c.post(&format!("{lc}/user-permissions"), &json!({"metadata": {"name": "up"}, "spec": {"namespace": "ns1", "apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}})).await, 201);
    expect(
        &c.post(
            &format!("{lc}/cluster-quotas"),
            &json!({"metadata": {"name": "q"}, "spec": {"pods": "10"}}),
        )
        .await,
        201,
    );
    expect(
        &c.post(
            &format!("{lc}/cluster-quotas"),
            &json!({"metadata": {"name": "q2"}, "spec": {"pods": ""}}),
        )
        .await,
        400,
    );
    expect(
        &c.post(
            &format!("{lc}/kv-pairs"),
            &json!({"metadata": {"name": "k"}, "spec": {"kv": [{"a": "b"}]}}),
        )
        .await,
        201,
    );
    assert_eq!(
        c.get(&format!("{lc}/kv-pairs/k?key=a")).await.json(),
        json!({"value": "b"})
    );
    for sub in [
        "cluster-references",
        "user-permissions",
        "cluster-quotas",
        "kv-pairs",
    ] {
        assert_eq!(
            c.get(&format!("{lc}/{sub}"))
                .await
                .json()
                .as_array()
                .unwrap()
                .len(),
            1,
            "{sub}"
        );
    }
    expect(&c.delete(lc).await, 409);

    // ---- deployment intent groups, intents, approve ----
    let digs = format!("{CA}/deployment-intent-groups");
    let dig = |cp: &str, lc: &str| json!({"metadata": {"name": "dig1"}, "spec": {"compositeProfile": cp, "version": "r1", "logicalCloud": lc, "overrideValues": [{"app": "collectd", "values": {"a.b": "1"}}]}});
    // A group may name a composite profile and logical cloud that come later: EMCO's database
    // only logs such references (src/orchestrator/pkg/infra/db/mongo.go `verifyReferences`).
    let early = json!({"metadata": {"name": "early"}, "spec": {"compositeProfile": "nope",
        "version": "r1", "logicalCloud": "nope", "overrideValues": []}});
    expect(&c.post(&digs, &early).await, 201);
    expect(&c.delete(&format!("{digs}/early")).await, 204);
    expect(
        &c.post(
            &digs,
            &json!({"metadata": {"name": "dig1"}, "spec": {"compositeProfile": "cp"}}),
        )
        .await,
        400,
    );
    expect(&c.post(&digs, &dig("cp", "lc0")).await, 201);
    let dig_key = DigRef::new("p1", "ca", "v1", "dig1");
    assert_eq!(
        orch.deployments()
            .state(&dig_key)
            .await
            .unwrap()
            .current_state(),
        DigState::Created
    );
    expect(&c.put(DIG, &dig("cp", "lc0")).await, 200);

    let gpis = format!("{DIG}/generic-placement-intents");
    expect(&c.post(&gpis, &named("gpi")).await, 201);
    expect(
        &c.post(
            &gpis,
            &json!({"metadata": {"name": "gpi2"}, "spec": {"logicalCloud": "old"}}),
        )
        .await,
        201,
    );
    let app_intents = format!("{gpis}/gpi/app-intents");
    let ai = |app: &str| json!({"metadata": {"name": "ai"}, "spec": {"app": app, "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1"}]}}});
    // As for groups, the app named may come later (app_intent.go does not look it up).
    expect(&c.post(&app_intents, &ai("missing")).await, 201);
    expect(&c.delete(&format!("{app_intents}/ai")).await, 204);
    expect(
        &c.post(
            &app_intents,
            &json!({"metadata": {"name": "ai"}, "spec": {"app": "collectd", "intent": {}}}),
        )
        .await,
        400,
    );
    expect(&c.post(&app_intents, &json!({"metadata": {"name": "ai"}, "spec": {"app": "collectd", "intent": {"allOf": [{"clusterProvider": "edge", "cluster": "c1", "clusterLabel": "east"}]}}})).await, 400);
    expect(&c.post(&app_intents, &ai("collectd")).await, 201);
    // EMCO's query route is `app-intents/` with `app`, whose handler reads `app-name`
    // (src/orchestrator/api/api.go, app_intent_handler.go `getAllIntentsByAppHandler`); without
    // the slash the query is ignored and the list answers.
    let r = c
        .get(&format!("{app_intents}/?app=x&app-name=collectd"))
        .await;
    expect(&r, 200);
    assert_eq!(r.json()["app"], "collectd");
    let r = c.get(&format!("{app_intents}/?app=collectd")).await;
    expect(&r, 400);
    assert_eq!(r.text(), "Missing appName in GET request\n");
    assert_eq!(
        c.get(&format!("{app_intents}/?app=&app-name=web"))
            .await
            .json(),
        json!({"intent": {}})
    );
    assert_eq!(
        c.get(&format!("{app_intents}?app=collectd"))
            .await
            .json()
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    expect(&c.get(&format!("{app_intents}/")).await, 404);
    let intents = format!("{DIG}/intents");
    expect(
        &c.post(
            &intents,
            &json!({"metadata": {"name": "i1"}, "spec": {"intent": {}}}),
        )
        .await,
        400,
    );
    expect(&c.post(&intents, &json!({"metadata": {"name": "i1"}, "spec": {"intent": {"genericPlacementIntent": "gpi"}}})).await, 201);
    // `intents/?intent=` answers the spec (add_intents_handler.go `getIntentByNameHandler`);
    // the list holds only the intents' maps (add_intents.go `GetAllIntents`).
    assert_eq!(
        c.get(&format!("{intents}/?intent=i1")).await.json(),
        json!({"intent": {"genericPlacementIntent": "gpi"}})
    );
    let r = c.get(&format!("{intents}/?intent=i9")).await;
    expect(&r, 404);
    assert_eq!(r.text(), "Intent not found\n");
    assert_eq!(
        c.get(&intents).await.json(),
        json!({"intent": [{"genericPlacementIntent": "gpi"}]})
    );

    // Approve; PUT is refused once approved; a change to an intent leaves it Approved, as in
    // EMCO (src/orchestrator/pkg/module/generic_placement_intent.go never writes the state).
    expect(
        &c.send("POST", &format!("{DIG}/approve"), None, None, Vec::new())
            .await,
        202,
    );
    expect(
        &c.send(
            "POST",
            &format!("{digs}/nope/approve"),
            None,
            None,
            Vec::new(),
        )
        .await,
        404,
    );
    assert_eq!(
        orch.deployments()
            .state(&dig_key)
            .await
            .unwrap()
            .current_state(),
        DigState::Approved
    );
    expect(&c.put(DIG, &dig("cp", "lc0")).await, 409);
    expect(&c.put(&format!("{gpis}/gpi2"), &named("gpi2")).await, 200);
    assert_eq!(
        orch.deployments()
            .state(&dig_key)
            .await
            .unwrap()
            .current_state(),
        DigState::Approved
    );

    // ---- controllers ----
    let ctl = json!({"metadata": {"name": "rsync"}, "spec": {"host": "localhost", "port": 9031}});
    expect(&c.post("/v2/controllers", &ctl).await, 201);
    expect(
        &c.post(
            "/v2/controllers",
            &json!({"metadata": {"name": "x"}, "spec": {"host": "h", "port": 70000}}),
        )
        .await,
        400,
    );
    expect(
        &c.post(
            "/v2/controllers",
            &json!({"metadata": {"name": "x"}, "spec": {"host": "h", "port": 1, "type": "other"}}),
        )
        .await,
        400,
    );
    expect(
        &c.post(
            "/v2/clm-controllers",
            &json!({"metadata": {"name": "x"}, "spec": {"host": "h", "port": "9000"}}),
        )
        .await,
        201,
    );
    expect(&c.get("/v2/controllers/rsync").await, 200);
    expect(&c.delete("/v2/controllers/rsync").await, 204);

    // ---- referential integrity on the way down ----
    expect(&c.delete("/v2/projects/p1").await, 409);
    expect(&c.delete(CA).await, 409);
    expect(&c.delete(DIG).await, 409);
    for uri in [
        format!("{app_intents}/ai"),
        format!("{gpis}/gpi"),
        format!("{gpis}/gpi2"),
        format!("{intents}/i1"),
        DIG.to_owned(),
        format!("{profiles}/pr"),
        format!("{cps}/cp"),
        format!("{deps}/d1"),
        item.clone(),
        format!("{apps}/web"),
        CA.to_owned(),
        format!("{lc}/cluster-references/r1"),
        format!("{lc}/user-permissions/up"),
        format!("{lc}/cluster-quotas/q"),
        format!("{lc}/kv-pairs/k"),
        lc.to_owned(),
        "/v2/projects/p1/logical-clouds/lc0".to_owned(),
        "/v2/projects/p1".to_owned(),
        format!("{kvs}/kv1"),
        format!("{labels}/east"),
        "/v2/cluster-providers/edge/clusters/c1".to_owned(),
        "/v2/cluster-providers/edge/clusters/c2".to_owned(),
        "/v2/cluster-providers/edge".to_owned(),
    ] {
        expect(&c.delete(&uri).await, 204);
        expect(&c.get(&uri).await, 404);
    }
    // An empty list is Go's nil slice in the orchestrator, `make`'s empty one in clm
    // (projecthandler.go, clusterhandler.go).
    assert_eq!(c.get("/v2/projects").await.json(), Value::Null);
    assert_eq!(c.get("/v2/cluster-providers").await.json(), json!([]));
}

#[tokio::test]
async fn crud_flow_in_memory() {
    crud_flow(Arc::new(InMemoryResourceStore::new())).await;
}

#[tokio::test]
async fn crud_flow_redb() {
    let dir = tempfile::tempdir().unwrap();
    let db = emco_store::embedded::RedbBuilder::new()
        .with_path(dir.path().join("emco.redb"))
        .build()
        .unwrap();
    crud_flow(db.resource_store()).await;
}

#[tokio::test]
async fn crud_flow_mongo() {
    let Ok(uri) = std::env::var("EMCO_TEST_MONGO") else {
        eprintln!("SKIPPED: crud_flow_mongo needs EMCO_TEST_MONGO (a MongoDB URI)");
        return;
    };
    let database = format!("emco_rest_{}", std::process::id());
    let store = emco_store::mongo::MongoBuilder::new()
        .with_uri(uri)
        .with_database(database)
        .build()
        .await
        .unwrap();
    crud_flow(Arc::new(store)).await;
}

#[tokio::test]
async fn uploads_over_the_limit_are_refused() {
    let limits = Limits {
        max_archive: 4096,
        max_unpacked: 1 << 20,
        max_kubeconfig: 64,
    };
    let orch = Orchestrator::builder(Arc::new(InMemoryResourceStore::new()))
        .limits(limits)
        .build()
        .unwrap();
    let c = Client {
        app: emco_orchestrator::rest::router(orch),
    };
    expect(&c.post("/v2/projects", &named("p1")).await, 201);
    expect(
        &c.post(
            "/v2/projects/p1/composite-apps",
            &json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
        )
        .await,
        201,
    );
    let big = vec![7u8; 64 * 1024];
    let r = c
        .upload("POST", &format!("{CA}/apps"), Some(&named("a")), Some(&big))
        .await;
    expect(&r, 413);
    expect(&c.post("/v2/cluster-providers", &named("edge")).await, 201);
    let r = c
        .upload(
            "POST",
            "/v2/cluster-providers/edge/clusters",
            Some(&named("c1")),
            Some(KUBECONFIG.as_bytes()),
        )
        .await;
    expect(&r, 400);
    assert!(r.text().contains("larger"), "{}", r.text());
}

#[tokio::test]
async fn concurrent_writes_on_different_digs() {
    let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
    let c = Arc::new(Client {
        app: emco_orchestrator::rest::router(orch.clone()),
    });
    expect(&c.post("/v2/projects", &named("p1")).await, 201);
    expect(
        &c.post(
            "/v2/projects/p1/composite-apps",
            &json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
        )
        .await,
        201,
    );
    expect(
        &c.post(&format!("{CA}/composite-profiles"), &named("cp"))
            .await,
        201,
    );
    expect(
        &c.post(
            "/v2/projects/p1/logical-clouds",
            &json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}}),
        )
        .await,
        201,
    );
    let mut tasks = Vec::new();
    for i in 0..16 {
        let c = Arc::clone(&c);
        tasks.push(tokio::spawn(async move {
            let name = format!("dig{i}");
            let body = json!({"metadata": {"name": name}, "spec": {"compositeProfile": "cp", "version": "r", "logicalCloud": "lc0"}});
            expect(&c.post(&format!("{CA}/deployment-intent-groups"), &body).await, 201);
            let gpis = format!("{CA}/deployment-intent-groups/{name}/generic-placement-intents");
            expect(&c.post(&gpis, &named("g")).await, 201);
            expect(&c.send("POST", &format!("{CA}/deployment-intent-groups/{name}/approve"), None, None, Vec::new()).await, 202);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..16 {
        let state = orch
            .deployments()
            .state(&DigRef::new("p1", "ca", "v1", format!("dig{i}")))
            .await
            .unwrap();
        assert_eq!(state.current_state(), DigState::Approved);
    }
}

/// A store that counts the writes of lifecycle records and yields between reading a blob and
/// handing it over, so that unserialized read-modify-writes interleave.
#[derive(Debug)]
struct CountingStore {
    inner: Arc<dyn ResourceStore>,
    state_writes: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl ResourceStore for CountingStore {
    async fn put(
        &self,
        key: &emco_store::ResourceKey,
        value: &Value,
        mode: emco_store::PutMode,
    ) -> emco_core::Result<()> {
        self.inner.put(key, value, mode).await
    }
    async fn get(&self, key: &emco_store::ResourceKey) -> emco_core::Result<Option<Value>> {
        self.inner.get(key).await
    }
    async fn list(
        &self,
        parent: &emco_store::ResourceKey,
        child_type: &str,
        filters: &[emco_store::Filter],
    ) -> emco_core::Result<Vec<(emco_store::ResourceKey, Value)>> {
        self.inner.list(parent, child_type, filters).await
    }
    async fn delete(&self, key: &emco_store::ResourceKey) -> emco_core::Result<()> {
        self.inner.delete(key).await
    }
    async fn put_blob_if(
        &self,
        key: &emco_store::ResourceKey,
        name: &str,
        data: emco_store::BlobStream,
        expect: emco_store::Expect,
    ) -> emco_core::Result<(u64, emco_store::BlobVersion)> {
        let written = self.inner.put_blob_if(key, name, data, expect).await?;
        if name == keys::STATE_BLOB {
            self.state_writes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(written)
    }
    async fn get_blob_versioned(
        &self,
        key: &emco_store::ResourceKey,
        name: &str,
    ) -> emco_core::Result<(emco_store::BlobVersion, emco_store::BlobStream)> {
        let blob = self.inner.get_blob_versioned(key, name).await;
        tokio::task::yield_now().await;
        blob
    }
    async fn delete_blob(
        &self,
        key: &emco_store::ResourceKey,
        name: &str,
    ) -> emco_core::Result<bool> {
        self.inner.delete_blob(key, name).await
    }
    async fn health(&self) -> emco_core::Result<()> {
        self.inner.health().await
    }
}

/// 50 intent creates interleaved with 50 approves on one approved group: intents leave the state
/// alone and approving an approved group records nothing, as in EMCO
/// (src/orchestrator/pkg/module/instantiation.go `Approve`), so the record is written twice
/// (Created, Approved) and its history is exactly that.
async fn concurrent_operations_on_one_dig(inner: Arc<dyn ResourceStore>) {
    let store = Arc::new(CountingStore {
        inner,
        state_writes: std::sync::atomic::AtomicUsize::new(0),
    });
    let orch = Orchestrator::new(Arc::clone(&store) as Arc<dyn ResourceStore>);
    let c = Arc::new(Client {
        app: emco_orchestrator::rest::router(orch.clone()),
    });
    expect(&c.post("/v2/projects", &named("p1")).await, 201);
    expect(
        &c.post(
            "/v2/projects/p1/composite-apps",
            &json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
        )
        .await,
        201,
    );
    expect(
        &c.post(&format!("{CA}/composite-profiles"), &named("cp"))
            .await,
        201,
    );
    expect(
        &c.post(
            "/v2/projects/p1/logical-clouds",
            &json!({"metadata": {"name": "lc0"}, "spec": {"level": "0"}}),
        )
        .await,
        201,
    );
    let body = json!({"metadata": {"name": "dig1"}, "spec": {"compositeProfile": "cp", "version": "r", "logicalCloud": "lc0"}});
    expect(
        &c.post(&format!("{CA}/deployment-intent-groups"), &body)
            .await,
        201,
    );
    let approve = format!("{DIG}/approve");
    expect(&c.send("POST", &approve, None, None, Vec::new()).await, 202);

    let mut tasks = Vec::new();
    for i in 0..50 {
        let creator = Arc::clone(&c);
        tasks.push(tokio::spawn(async move {
            let gpis = format!("{DIG}/generic-placement-intents");
            expect(&creator.post(&gpis, &named(&format!("g{i}"))).await, 201);
        }));
        let c = Arc::clone(&c);
        let approve = approve.clone();
        tasks.push(tokio::spawn(async move {
            expect(&c.send("POST", &approve, None, None, Vec::new()).await, 202);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }

    let key = DigRef::new("p1", "ca", "v1", "dig1");
    let state = orch.deployments().state(&key).await.unwrap();
    let writes = store.state_writes.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(writes, 2, "the record was written {writes} times");
    let history: Vec<DigState> = state.actions.iter().map(|a| a.state).collect();
    assert_eq!(history, [DigState::Created, DigState::Approved]);
    assert_eq!(
        c.get(&format!("{DIG}/generic-placement-intents"))
            .await
            .json()
            .as_array()
            .unwrap()
            .len(),
        50
    );

    // An intent written after approve is read at instantiate; the group stays Approved.
    expect(
        &c.post(&format!("{DIG}/generic-placement-intents"), &named("last"))
            .await,
        201,
    );
    assert_eq!(
        orch.deployments()
            .state(&key)
            .await
            .unwrap()
            .current_state(),
        DigState::Approved
    );
    assert_eq!(
        store.state_writes.load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_operations_on_one_dig_in_memory() {
    concurrent_operations_on_one_dig(Arc::new(InMemoryResourceStore::new())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_operations_on_one_dig_redb() {
    let dir = tempfile::tempdir().unwrap();
    let db = emco_store::embedded::RedbBuilder::new()
        .with_path(dir.path().join("emco.redb"))
        .build()
        .unwrap();
    concurrent_operations_on_one_dig(db.resource_store()).await;
}

/// A gzip'd tar of `dir` as `tar -C parent -czf x.tgz .` makes it: a `./` entry, then members
/// `./top/...`.
fn dot_tgz(dir: &Path, top: &str) -> Vec<u8> {
    let mut b = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let mut raw = |path: String, kind: tar::EntryType, data: &[u8]| {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data).unwrap();
    };
    raw("./".to_owned(), tar::EntryType::Directory, b"");
    let mut stack = vec![(dir.to_path_buf(), format!("./{top}"))];
    while let Some((at, name)) = stack.pop() {
        raw(format!("{name}/"), tar::EntryType::Directory, b"");
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let child = format!("{name}/{}", entry.file_name().to_string_lossy());
            if entry.file_type().unwrap().is_dir() {
                stack.push((entry.path(), child));
            } else {
                raw(
                    child,
                    tar::EntryType::Regular,
                    &std::fs::read(entry.path()).unwrap(),
                );
            }
        }
    }
    b.into_inner().unwrap().finish().unwrap()
}

/// Bodies as EMCO's Go clients send them: Go's encoding/json writes `null` for empty maps and
/// lists and accepts any letter case in field names (src/dcm/pkg/module/logicalcloud.go's
/// `LogicalCloud` decoded by src/dcm/api/logicalcloudhandler.go `createHandler`), and charts packed
/// with `tar -C dir .` (src/orchestrator/api/apphandler.go accepts any gzip'd tar).
#[tokio::test]
async fn go_clients_bodies_and_archives() {
    if !collectd().exists() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "shared testdata missing in CI"
        );
        eprintln!("skipped: {} is missing", collectd().display());
        return;
    }
    let c = Client {
        app: emco_orchestrator::rest::router(Orchestrator::new(Arc::new(
            InMemoryResourceStore::new(),
        ))),
    };
    expect(&c.post("/v2/projects", &named("p1")).await, 201);
    let lc = json!({"metadata": {"name": "lc1", "description": null, "userData1": null},
        "spec": {"namespace": "ns1", "level": "1", "labels": null,
                 "user": {"userName": "u", "type": null}}});
    expect(&c.post("/v2/projects/p1/logical-clouds", &lc).await, 201);
    let got = c.get("/v2/projects/p1/logical-clouds/lc1").await.json();
    assert_eq!(got["spec"]["namespace"], "ns1");
    assert_eq!(got["spec"]["user"]["userName"], "u");
    let upper = json!({"Metadata": {"Name": "lc2"},
        "Spec": {"Namespace": "ns2", "User": {"UserName": "u2"}}});
    expect(&c.post("/v2/projects/p1/logical-clouds", &upper).await, 201);
    assert_eq!(
        c.get("/v2/projects/p1/logical-clouds/lc2").await.json()["spec"]["namespace"],
        "ns2"
    );

    let ca = json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}});
    expect(&c.post("/v2/projects/p1/composite-apps", &ca).await, 201);
    let chart = dot_tgz(&collectd().join("helm/collectd"), "collectd");
    let apps = "/v2/projects/p1/composite-apps/ca/v1/apps";
    expect(
        &c.upload("POST", apps, Some(&named("collectd")), Some(&chart))
            .await,
        201,
    );
    let stored = c
        .get_as(&format!("{apps}/collectd"), "application/octet-stream")
        .await;
    let loaded = emco_helm::Chart::load_tgz(&stored.body).unwrap();
    assert_eq!(loaded.name(), "collectd");
    assert!(!loaded.templates.is_empty());
}
