//! Any bytes as the body of a create or replace call of the REST API, as JSON or as a
//! multipart upload, through the whole router of emco-server on a memory store: the answer is
//! never a 5xx. The first byte picks the route and the kind of body.
#![no_main]

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use http_body_util::BodyExt as _;
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt as _;

const CA: &str = "/v2/projects/p/composite-apps/ca/v1";
const ROUTES: [(&str, &str); 10] = [
    ("POST", "/v2/projects"),
    ("PUT", "/v2/projects/p"),
    ("POST", "/v2/projects/p/composite-apps"),
    ("POST", "/v2/cluster-providers"),
    ("POST", "/v2/cluster-providers/cp/clusters"),
    ("POST", "/v2/controllers"),
    ("POST", "/v2/projects/p/logical-clouds"),
    ("POST", "/v2/projects/p/composite-apps/ca/v1/apps"),
    ("POST", "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups"),
    ("POST", "/v2/cluster-providers/cp/cluster-sync-objects"),
];

struct Server {
    rt: tokio::runtime::Runtime,
    app: axum::Router,
}

/// One server for the run, with project p, composite app ca v1 and provider cp.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let store = Arc::new(emco_store::InMemoryResourceStore::new());
        let orch = emco_orchestrator::Orchestrator::new(store);
        let app = emco_service::app(orch, &emco_service::Config::default(), emco_service::Metrics::new());
        let server = Server { rt, app };
        for (path, body) in [
            ("/v2/projects", r#"{"metadata":{"name":"p"}}"#),
            (
                "/v2/projects/p/composite-apps",
                r#"{"metadata":{"name":"ca"},"spec":{"compositeAppVersion":"v1"}}"#,
            ),
            ("/v2/cluster-providers", r#"{"metadata":{"name":"cp"}}"#),
        ] {
            let status = server.call("POST", path, "application/json", body.as_bytes().to_vec());
            assert_eq!(status, 201, "{path}");
        }
        assert!(CA.starts_with("/v2/projects/p"));
        server
    })
}

impl Server {
    fn call(&self, method: &str, path: &str, content_type: &str, body: Vec<u8>) -> u16 {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .expect("a request");
        self.rt.block_on(async {
            let resp = self.app.clone().oneshot(req).await.expect("an answer");
            let status = resp.status().as_u16();
            drop(resp.into_body().collect().await);
            status
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let (method, path) = ROUTES[usize::from(pick) % ROUTES.len()];
    let (content_type, body) = if pick & 0x80 == 0 {
        ("application/json", body.to_vec())
    } else {
        // A multipart form around the bytes: the parts' framing is the fuzzer's to break too.
        let mut form = b"--b\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n".to_vec();
        form.extend_from_slice(body);
        form.extend_from_slice(b"\r\n--b--\r\n");
        ("multipart/form-data; boundary=b", form)
    };
    let status = server().call(method, path, content_type, body);
    assert!(status < 500, "{method} {path}: {status}");
});
