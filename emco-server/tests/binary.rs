//! Runs the real `emco-server` binary: create over HTTP, stop with SIGTERM, restart on the same
//! data dir, read back; the server-level endpoints; the gRPC listener (health, the AppContext
//! service, rsync's installapp over the same store); the built-in controllers' registration and
//! intent routes; the etcd AppContext backend when `EMCO_TEST_ETCD` is set.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use emco_appcontext::context::AppContextStatus;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::remote::{AppContextService, RemoteAppContextStore};
use emco_store::{AppContextStore, InMemoryAppContextStore};
use emco_testkit::free_addr;

/// A running server, killed on drop if the test did not stop it.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(data_dir: &std::path::Path, addr: SocketAddr) -> Self {
        Self::start_with(data_dir, addr, free_addr(), &[])
    }

    /// Starts with the gRPC listener on `grpc` and `extra` flags.
    fn start_with(
        data_dir: &std::path::Path,
        addr: SocketAddr,
        grpc: SocketAddr,
        extra: &[&str],
    ) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_emco-server"))
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--grpc-listen")
            .arg(grpc.to_string())
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .env("EMCO_LOG_FORMAT", "json")
            .stdout(server_log())
            .stderr(server_log())
            .spawn()
            .unwrap();
        let mut server = Self { child, addr };
        let deadline = Instant::now() + Duration::from_secs(60);
        while request(server.addr, "GET", "/healthz", "").is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "emco-server exited at its start ({status}): EMCO_TEST_SERVER_LOG=FILE keeps its log"
                );
            }
            assert!(Instant::now() < deadline, "emco-server did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// Sends SIGTERM without waiting.
    fn signal_term(&self) {
        sigterm(&self.child);
    }

    /// Waits for the process to exit.
    fn wait_exit(mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "emco-server did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn terminate(self) -> std::process::ExitStatus {
        self.signal_term();
        self.wait_exit()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a server's log goes: appended to `$EMCO_TEST_SERVER_LOG` when set (to read what
/// the servers of a failed test did), else nowhere.
fn server_log() -> Stdio {
    let Some(path) = std::env::var_os("EMCO_TEST_SERVER_LOG") else {
        return Stdio::null();
    };
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

/// Sends SIGTERM to `child` without waiting.
fn sigterm(child: &Child) {
    let pid = child.id().to_string();
    let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(sent.success());
}

/// One HTTP/1.1 request with a JSON body; returns the status and the body.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    request_bytes(addr, method, path, "application/json", body.as_bytes())
}

/// One HTTP/1.1 request; returns the status and the body.
fn request_bytes(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let headers = format!("Content-Type: {content_type}\r\n");
    request_with(addr, method, path, &headers, body)
}

/// One HTTP/1.1 request with `headers` (each line ending in CRLF); returns the status and the
/// body.
fn request_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad answer {out:?}")))?;
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// A multipart POST of a `metadata` JSON part and file parts `(field, file name, content)`.
fn post_form(
    addr: SocketAddr,
    path: &str,
    metadata: &str,
    files: &[(&str, &str, &[u8])],
) -> (u16, String) {
    send_form(addr, "POST", path, metadata, files)
}

/// [`post_form`] with `method`.
fn send_form(
    addr: SocketAddr,
    method: &str,
    path: &str,
    metadata: &str,
    files: &[(&str, &str, &[u8])],
) -> (u16, String) {
    let boundary = "emco-server-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n{metadata}\r\n"
    )
    .into_bytes();
    for (field, name, content) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(content);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    request_bytes(
        addr,
        method,
        path,
        &format!("multipart/form-data; boundary={boundary}"),
        &body,
    )
    .unwrap()
}

#[test]
fn data_survives_a_sigterm_restart() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let server = Server::start(dir.path(), addr);
    let (status, body) = request(
        addr,
        "POST",
        "/v2/projects",
        r#"{"metadata":{"name":"p1","description":"kept"}}"#,
    )
    .unwrap();
    assert_eq!(status, 201, "{body}");
    assert!(server.terminate().success());

    let server = Server::start(dir.path(), addr);
    let (status, body) = request(addr, "GET", "/v2/projects/p1", "").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"description\":\"kept\""), "{body}");
    assert!(server.terminate().success());
}

/// The server allocates with mimalloc (src/main.rs: glibc's allocator cost it a third of its CPU
/// at 10,000 clusters): asked to, mimalloc itself says so when the process starts.
#[test]
fn the_server_allocates_with_mimalloc() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let err = dir.path().join("stderr");
    let mut command = Command::new(env!("CARGO_BIN_EXE_emco-server"));
    command
        .args(["--listen", &addr.to_string()])
        .args(["--grpc-listen", &free_addr().to_string()])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("MIMALLOC_VERBOSE", "1")
        .stdout(server_log())
        .stderr(std::fs::File::create(&err).unwrap());
    let server = Server {
        child: command.spawn().unwrap(),
        addr,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while request(addr, "GET", "/healthz", "").is_err() {
        assert!(Instant::now() < deadline, "emco-server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(server.terminate().success());
    let said = std::fs::read_to_string(&err).unwrap();
    assert!(said.contains("mimalloc: "), "{said}");
}

/// `--audit-log`: one JSON line per mutating call, answered well or not, none for reads; a
/// file that cannot be opened stops the start with a clear error.
#[test]
fn mutating_calls_are_audited() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let addr = free_addr();
    let flags = ["--audit-log", log.to_str().unwrap()];
    let server = Server::start_with(&dir.path().join("data"), addr, free_addr(), &flags);
    let calls = [
        ("POST", "/v2/projects", r#"{"metadata":{"name":"p1"}}"#, 201),
        ("POST", "/v2/projects", r#"{"metadata":{"name":"p1"}}"#, 409),
        ("GET", "/v2/projects/p1", "", 200),
        (
            "PUT",
            "/v2/projects/p1?x=1",
            r#"{"metadata":{"name":"p1"}}"#,
            200,
        ),
        ("DELETE", "/v2/projects/p1", "", 204),
    ];
    for (method, path, body, want) in calls {
        let (status, answer) = request(addr, method, path, body).unwrap();
        assert_eq!(status, want, "{method} {path}: {answer}");
    }
    assert!(server.terminate().success());
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(&str, &str, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["method"].as_str().unwrap(),
                l["path"].as_str().unwrap(),
                l["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("POST", "/v2/projects", 201),
            ("POST", "/v2/projects", 409),
            ("PUT", "/v2/projects/p1?x=1", 200),
            ("DELETE", "/v2/projects/p1", 204),
        ]
    );
    for l in &lines {
        assert_eq!(l["who"], "anonymous", "{l}");
        assert!(
            l["remote"].as_str().unwrap().starts_with("127.0.0.1:"),
            "{l}"
        );
        assert!(l["time"].as_str().unwrap().ends_with('Z'), "{l}");
        assert!(l["ms"].is_u64(), "{l}");
    }
    let refused = Command::new(env!("CARGO_BIN_EXE_emco-server"))
        .args(["--audit-log", dir.path().to_str().unwrap(), "--data-dir"])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("cannot open the audit log"), "{stderr}");
}

/// `--secrets-key-file`: a cluster's kubeconfig is sealed in the embedded file and answered
/// whole; a server without the key refuses to answer it, naming the key it needs.
#[test]
fn credentials_are_sealed_in_the_embedded_store() {
    use base64::Engine as _;
    const KUBECONFIG: &[u8] =
        b"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: s3cr3t-marker}\n";
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let key = base64::engine::general_purpose::STANDARD.encode([9u8; 32]);
    std::fs::write(&keys, format!("k1:{key}\n")).unwrap();
    let data = dir.path().join("data");
    let addr = free_addr();
    let flags = ["--secrets-key-file", keys.to_str().unwrap()];
    let server = Server::start_with(&data, addr, free_addr(), &flags);
    let (status, body) = request(
        addr,
        "POST",
        "/v2/cluster-providers",
        r#"{"metadata":{"name":"p"}}"#,
    )
    .unwrap();
    assert_eq!(status, 201, "{body}");
    let (status, body) = post_form(
        addr,
        "/v2/cluster-providers/p/clusters",
        r#"{"metadata":{"name":"c1"}}"#,
        &[("file", "kubeconfig", KUBECONFIG)],
    );
    assert_eq!(status, 201, "{body}");
    let file = "/v2/cluster-providers/p/clusters/c1";
    let octets = "Accept: application/octet-stream\r\n";
    let (status, body) = request_with(addr, "GET", file, octets, b"").unwrap();
    // (The body is chunked: the file is in it whole.)
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(std::str::from_utf8(KUBECONFIG).unwrap()),
        "{body}"
    );
    assert!(server.terminate().success());
    let stored = std::fs::read(data.join("emco.redb")).unwrap();
    assert!(
        !stored.windows(13).any(|w| w == b"s3cr3t-marker"),
        "the kubeconfig is in the clear in the store"
    );
    let server = Server::start(&data, addr);
    let (status, body) = request_with(addr, "GET", file, octets, b"").unwrap();
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(body.contains("\"k1\""), "{body}");
    assert!(server.terminate().success());
}

/// A request in flight when SIGTERM arrives is finished (and durable) while new connections are
/// refused.
/// Logs written to a pipe (a file, a collector) are plain text: no terminal colour codes.
#[test]
fn logs_to_a_pipe_have_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let child = Command::new(env!("CARGO_BIN_EXE_emco-server"))
        .args([
            "--listen",
            &addr.to_string(),
            "--grpc-listen",
            &free_addr().to_string(),
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env("EMCO_LOG_FORMAT", "text")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while request(addr, "GET", "/v2/projects", "").is_err() {
        assert!(Instant::now() < deadline, "emco-server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // An admin logical cloud on a cluster nobody serves: rsync starts, and retries.
    let kubeconfig = b"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n";
    for (path, body) in [
        ("/v2/cluster-providers", r#"{"metadata":{"name":"p"}}"#),
        ("/v2/projects", r#"{"metadata":{"name":"pr"}}"#),
        (
            "/v2/projects/pr/logical-clouds",
            r#"{"metadata":{"name":"lc"},"spec":{"namespace":"ns","user":{"userName":"u"}}}"#,
        ),
    ] {
        assert_eq!(post(addr, path, body).0, 201, "{path}");
    }
    let (code, body) = post_form(
        addr,
        "/v2/cluster-providers/p/clusters",
        r#"{"metadata":{"name":"c"}}"#,
        &[("file", "kubeconfig", kubeconfig)],
    );
    assert_eq!(code, 201, "{body}");
    let reference = r#"{"metadata":{"name":"r"},"spec":{"clusterProvider":"p","cluster":"c","loadBalancerIP":"0.0.0.0"}}"#;
    let lc = "/v2/projects/pr/logical-clouds/lc";
    assert_eq!(
        post(addr, &format!("{lc}/cluster-references"), reference).0,
        201
    );
    assert_eq!(post(addr, &format!("{lc}/instantiate"), "").0, 202);
    std::thread::sleep(Duration::from_millis(500));
    sigterm(&child);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("INFO"), "no log lines: {text}");
    // The start says how many files it may open; rsync's lines name their context.
    assert!(text.contains("open files"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("context{ctx=") && l.contains("rsync operation")),
        "{text}"
    );
    assert!(
        text.contains("request"),
        "the request is not logged: {text}"
    );
    assert!(
        !text.contains('\u{1b}'),
        "colour codes in piped logs: {text:?}"
    );
}

#[test]
fn sigterm_lets_a_request_in_flight_finish() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let server = Server::start(dir.path(), addr);
    let body = r#"{"metadata":{"name":"drained","description":"sent across the signal"}}"#;
    let (first, rest) = body.split_at(20);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /v2/projects HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{first}",
        body.len()
    )
    .unwrap();
    s.flush().unwrap();
    // Connections are accepted in order: once a later one is answered, ours is accepted too.
    assert_eq!(request(addr, "GET", "/healthz", "").unwrap().0, 200);
    server.signal_term();
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_ok() {
        assert!(Instant::now() < deadline, "the listener stayed open");
        std::thread::sleep(Duration::from_millis(50));
    }
    s.write_all(rest.as_bytes()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert!(server.wait_exit().success());

    let server = Server::start(dir.path(), addr);
    let (status, body) = request(addr, "GET", "/v2/projects/drained", "").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(server.terminate().success());
}

#[test]
fn server_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let _server = Server::start(dir.path(), addr);
    assert_eq!(request(addr, "GET", "/readyz", "").unwrap().0, 200);
    let (status, doc) = request(addr, "GET", "/v2/openapi.yaml", "").unwrap();
    assert_eq!(status, 200);
    assert!(doc.contains("openapi: 3.0.3") && doc.contains("/v2/projects/{project}"));
    for path in [
        "/{deploymentIntentGroup}/instantiate:",
        "/{deploymentIntentGroup}/status:",
        "/{logicalCloud}/instantiate:",
        "/generic-k8s-intents/{genericK8sIntent}/resources:",
        "/hpa-intents/{hpaIntent}/hpa-resource-consumers:",
    ] {
        assert!(doc.contains(path), "{path}");
    }
    // A path no route serves answers as gorilla/mux's default (EMCO's routers set no
    // NotFoundHandler: src/orchestrator/api/api.go), outside /v2 too.
    for path in ["/v2/nothing-here", "/nothing", "/v2/projects/p/nothing"] {
        let (status, body) = request(addr, "GET", path, "").unwrap();
        assert_eq!(
            (status, body.as_str()),
            (404, "404 page not found\n"),
            "{path}"
        );
    }
    // Bad input is a 4xx, never a 500; an oversized JSON body is a 413.
    assert_eq!(request(addr, "POST", "/v2/projects", "").unwrap().0, 400);
    assert_eq!(request(addr, "POST", "/v2/projects", "[1,").unwrap().0, 422);
    // The server refuses on the announced length, before the body is sent.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "POST /v2/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5242880\r\n\r\n{{").unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    assert_eq!(request(addr, "GET", "/v2/projects/p1", "").unwrap().0, 404);
    let (status, metrics) = request(addr, "GET", "/metrics", "").unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains(r#"emco_http_requests_total{method="GET",route="/v2/projects/{project}",status="404"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains("emco_http_request_duration_seconds_bucket"));
    // rsync's and the controllers' families are there before anything ran.
    for family in [
        "# TYPE emco_rsync_resources_applied_total counter",
        "# TYPE emco_rsync_cluster_reachable gauge",
        "# TYPE emco_rsync_batch_duration_seconds histogram",
        "# TYPE emco_rsync_queue_depth gauge",
        "# TYPE emco_rsync_contexts gauge",
        "# TYPE emco_controller_call_duration_seconds histogram",
        "# TYPE emco_controller_call_errors_total counter",
    ] {
        assert!(metrics.contains(family), "{family}\n{metrics}");
    }
    // The process's own figures, what a soak watches for leaks.
    let process = |name: &str| figure(&metrics, name).unwrap_or_default();
    assert!(process("process_open_fds") >= 3, "{metrics}");
    assert!(
        process("process_resident_memory_bytes") > 1_000_000,
        "{metrics}"
    );
    assert!(process("emco_runtime_alive_tasks") >= 1, "{metrics}");
}

/// A connected gRPC channel to `addr`.
async fn channel(addr: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

fn grpc_name<S: tonic::server::NamedService>(_: &S) -> &'static str {
    S::NAME
}

async fn health(addr: SocketAddr, service: &str) -> i32 {
    let mut client = tonic_health::pb::health_client::HealthClient::new(channel(addr).await);
    client
        .check(tonic_health::pb::HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

/// Stops `server` with SIGTERM while this runtime keeps running, so that the test's gRPC client
/// connections see the server's GOAWAY and close (an unpolled client would hold the server's
/// drain until its timeout).
async fn terminate(server: Server) -> std::process::ExitStatus {
    tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap()
}

/// Creates a context with one app over the server's AppContext gRPC service.
async fn remote_context(grpc: SocketAddr) -> AppContext {
    let store: Arc<dyn AppContextStore> =
        Arc::new(RemoteAppContextStore::connect_lazy(&format!("http://{grpc}")).unwrap());
    let ctx = AppContext::create(store, &CompositeAppMeta::default())
        .await
        .unwrap();
    let mut w = ctx.writer();
    w.add_app("web").unwrap();
    w.set_app_order(&["web"]).unwrap();
    w.flush().await.unwrap();
    ctx
}

/// Health, the AppContext service and rsync's installapp share the server's one AppContext store,
/// which is the embedded file: the context is still there after a SIGTERM restart.
#[tokio::test]
async fn grpc_services_share_the_embedded_context_store() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, grpc) = (free_addr(), free_addr());
    let server = Server::start_with(dir.path(), addr, grpc, &[]);
    let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    assert_eq!(health(grpc, "").await, serving);
    let probe: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let appcontext_service = grpc_name(&AppContextService::server(probe));
    assert_eq!(health(grpc, appcontext_service).await, serving);
    assert_eq!(health(grpc, "installapp").await, serving);
    assert_eq!(health(grpc, "StatusNotify").await, serving);
    // StatusNotify answers from the resource store: no such group.
    let mut notify = emco_proto::status_notify_client::StatusNotifyClient::new(channel(grpc).await);
    let registration = emco_proto::StatusRegistration {
        client_id: "test".to_owned(),
        key: Some(emco_proto::status_registration::Key::DigKey(
            emco_proto::DigKey {
                project: "nope".to_owned(),
                composite_app: "ca".to_owned(),
                composite_app_version: "v1".to_owned(),
                deployment_intent_group: "dig".to_owned(),
            },
        )),
        ..Default::default()
    };
    let code = match notify.status_register(registration).await {
        Err(status) => status.code(),
        Ok(stream) => stream.into_inner().message().await.unwrap_err().code(),
    };
    assert_eq!(code, tonic::Code::NotFound);
    drop(notify);

    let ctx = remote_context(grpc).await;
    let id = ctx.id();
    let mut rsync = emco_proto::installapp_client::InstallappClient::new(channel(grpc).await);
    let answer = rsync
        .install_app(emco_proto::InstallAppRequest {
            app_context: id.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(answer.app_context_installed, "{answer:?}");
    // rsync works on the context the AppContext service wrote: an app with no cluster is done at
    // once.
    let deadline = Instant::now() + Duration::from_secs(60);
    while ctx.status().await.unwrap() != Some(AppContextStatus::Instantiated) {
        assert!(Instant::now() < deadline, "{:?}", ctx.status().await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop((rsync, ctx));
    assert!(terminate(server).await.success());

    let server = Server::start_with(dir.path(), addr, grpc, &[]);
    let store: Arc<dyn AppContextStore> =
        Arc::new(RemoteAppContextStore::connect_lazy(&format!("http://{grpc}")).unwrap());
    let again = AppContext::load(store, id).await.unwrap();
    assert_eq!(again.apps().await.unwrap(), ["web"]);
    assert_eq!(
        again.status().await.unwrap(),
        Some(AppContextStatus::Instantiated)
    );
    // SIGTERM closes both listeners.
    drop(again);
    assert!(terminate(server).await.success());
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err());
    assert!(TcpStream::connect_timeout(&grpc, Duration::from_secs(2)).is_err());
}

fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    request(addr, "POST", path, body).unwrap()
}

/// EMCO's controller registrations (any host and port, rsync without a type) are accepted and
/// the built-in controllers' intent routes answer at EMCO's paths.
#[test]
fn builtin_controllers_register_by_emco_names() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let _server = Server::start(dir.path(), addr);
    for body in [
        r#"{"metadata":{"name":"rsync"},"spec":{"host":"rsync","port":9031}}"#,
        r#"{"metadata":{"name":"gac"},"spec":{"host":"gac.invalid","port":9033,"type":"action","priority":1}}"#,
        r#"{"metadata":{"name":"hpa-placement-controller-1"},"spec":{"host":"hpaplc","port":9099,"type":"placement"}}"#,
        r#"{"metadata":{"name":"hpa-action-controller-1"},"spec":{"host":"hpaac","port":9042,"type":"action","priority":1}}"#,
        r#"{"metadata":{"name":"dtc"},"spec":{"host":"dtc","port":9048,"type":"action","priority":1}}"#,
        r#"{"metadata":{"name":"ovnaction"},"spec":{"host":"ovnaction","port":9032,"type":"action","priority":1}}"#,
        // examples/sfc/prerequisites.yaml
        r#"{"metadata":{"name":"sfc"},"spec":{"host":"sfc","port":9056,"type":"action","priority":2}}"#,
        r#"{"metadata":{"name":"sfcclient"},"spec":{"host":"sfcclient","port":9058,"type":"action","priority":2}}"#,
        // tac's gRPC port (src/tac/config.json)
        r#"{"metadata":{"name":"tac"},"spec":{"host":"tac","port":9065,"type":"action","priority":1}}"#,
    ] {
        let (status, out) = post(addr, "/v2/controllers", body);
        assert_eq!(status, 201, "{out}");
    }
    let (status, list) = request(addr, "GET", "/v2/controllers", "").unwrap();
    assert_eq!(status, 200);
    for name in emco_service::BUILTIN_CONTROLLERS.iter().chain(&["rsync"]) {
        assert!(list.contains(&format!("\"name\":\"{name}\"")), "{list}");
    }

    assert_eq!(
        post(addr, "/v2/projects", r#"{"metadata":{"name":"p"}}"#).0,
        201
    );
    assert_eq!(
        post(
            addr,
            "/v2/projects/p/composite-apps",
            r#"{"metadata":{"name":"ca"},"spec":{"compositeAppVersion":"v1"}}"#
        )
        .0,
        201
    );
    let (status, out) = post(
        addr,
        "/v2/projects/p/composite-apps/ca/v1/composite-profiles",
        r#"{"metadata":{"name":"cp"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    let (status, out) = post(
        addr,
        "/v2/projects/p/logical-clouds",
        r#"{"metadata":{"name":"lc"},"spec":{"level":"0"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    let (status, out) = post(
        addr,
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups",
        r#"{"metadata":{"name":"dig"},"spec":{"compositeProfile":"cp","version":"r1","logicalCloud":"lc"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    let dig = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig";
    let (status, out) = post(
        addr,
        &format!("{dig}/generic-k8s-intents"),
        r#"{"metadata":{"name":"gi"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    let (status, out) = request(addr, "GET", &format!("{dig}/generic-k8s-intents/gi"), "").unwrap();
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("\"name\":\"gi\""), "{out}");
    let (status, out) = post(
        addr,
        &format!("{dig}/hpa-intents"),
        r#"{"metadata":{"name":"hi"},"spec":{"app":"web"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    let (status, out) = post(
        addr,
        &format!("{dig}/hpa-intents/hi/hpa-resource-consumers"),
        r#"{"metadata":{"name":"c"},"spec":{"apiVersion":"apps/v1","kind":"Deployment","name":"web","container":"web"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    let (status, out) = post(
        addr,
        &format!("{dig}/network-controller-intent"),
        r#"{"metadata":{"name":"vfw_ovnaction_intent"}}"#,
    );
    assert_eq!(status, 201, "{out}");
    // EMCO's codes on the controllers' routes too.
    assert_eq!(
        post(
            addr,
            &format!("{dig}/hpa-intents"),
            r#"{"metadata":{"name":"hi"},"spec":{"app":"web"}}"#
        )
        .0,
        409
    );
    assert_eq!(
        post(
            addr,
            "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/nope/generic-k8s-intents",
            r#"{"metadata":{"name":"gi"}}"#
        )
        .0,
        409
    );
}

/// The AppContexts in etcd (`EMCO_TEST_ETCD`): written over the server's gRPC service, read back
/// from etcd directly.
#[tokio::test]
async fn etcd_context_backend() {
    let Ok(endpoint) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!("SKIPPED etcd_context_backend: EMCO_TEST_ETCD is not set");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (addr, grpc) = (free_addr(), free_addr());
    // Its own key space: other tests' engines on the same etcd must not resume its contexts.
    let prefix = emco_store::conformance::unique_prefix("/emco-rs-test/server-");
    let server = Server::start_with(
        dir.path(),
        addr,
        grpc,
        &[
            "--context-backend",
            "etcd",
            "--etcd-endpoints",
            &endpoint,
            "--etcd-prefix",
            &prefix,
        ],
    );
    let ctx = remote_context(grpc).await;
    let etcd: Arc<dyn AppContextStore> = Arc::new(
        emco_store::etcd::EtcdBuilder::new()
            .with_endpoints([endpoint])
            .with_prefix(prefix)
            .build()
            .await
            .unwrap(),
    );
    let direct = AppContext::load(Arc::clone(&etcd), ctx.id()).await.unwrap();
    assert_eq!(direct.apps().await.unwrap(), ["web"]);
    direct.delete().await.unwrap();
    drop(ctx);
    assert!(terminate(server).await.success());
}

/// The shared testdata of EMCO's examples.
fn examples() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/emco-examples")
}

/// A gzipped tar of `entry` under `dir`, made with the tar CLI.
fn tgz(dir: &std::path::Path, entry: &str, out: &std::path::Path) -> Vec<u8> {
    let status = Command::new("tar")
        .arg("-czf")
        .arg(out)
        .arg("-C")
        .arg(dir)
        .arg(entry)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(out).unwrap()
}

const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n";

/// Onboards http-server on clusters `kp+c1` and `kp+c2` through an admin logical cloud, with the
/// DIG naming hpa's intent `hi` (a mandatory feature only c1 has) and gac's intent `gi` (a new
/// ConfigMap `from-gac`), both controllers registered at `builtins` (gac's and hpa's addresses;
/// by default one where nothing listens); returns the DIG's URL.
fn onboard_with_controllers(
    addr: SocketAddr,
    work: &std::path::Path,
    remote: Option<SocketAddr>,
    builtins: Option<(SocketAddr, SocketAddr)>,
) -> String {
    let nowhere = SocketAddr::from(([127, 0, 0, 1], 1));
    let (gac, hpa) = builtins.unwrap_or((nowhere, nowhere));
    let created = |(status, body): (u16, String)| assert!(status == 201, "{status} {body}");
    created(post(
        addr,
        "/v2/cluster-providers",
        r#"{"metadata":{"name":"kp"}}"#,
    ));
    created(post(addr, "/v2/projects", r#"{"metadata":{"name":"p"}}"#));
    created(post(
        addr,
        "/v2/projects/p/logical-clouds",
        r#"{"metadata":{"name":"lc"},"spec":{"level":"0"}}"#,
    ));
    for cluster in ["c1", "c2"] {
        created(post_form(
            addr,
            "/v2/cluster-providers/kp/clusters",
            &format!(r#"{{"metadata":{{"name":"{cluster}"}}}}"#),
            &[("file", "kubeconfig", KUBECONFIG.as_bytes())],
        ));
        created(post(
            addr,
            "/v2/projects/p/logical-clouds/lc/cluster-references",
            &format!(
                r#"{{"metadata":{{"name":"{cluster}"}},"spec":{{"clusterProvider":"kp","cluster":"{cluster}"}}}}"#
            ),
        ));
    }
    // Only c1 has the hardware hpa's intent asks for.
    created(post(
        addr,
        "/v2/cluster-providers/kp/clusters/c1/labels",
        r#"{"clusterLabel":"intel_qat"}"#,
    ));
    let (status, body) = post(addr, "/v2/projects/p/logical-clouds/lc/instantiate", "");
    assert_eq!(status, 202, "{body}");
    created(post(
        addr,
        "/v2/controllers",
        &format!(
            r#"{{"metadata":{{"name":"gac"}},"spec":{{"host":"{}","port":{},"type":"action","priority":1}}}}"#,
            gac.ip(),
            gac.port()
        ),
    ));
    created(post(
        addr,
        "/v2/controllers",
        &format!(
            r#"{{"metadata":{{"name":"hpa-placement-controller-1"}},"spec":{{"host":"{}","port":{},"type":"placement"}}}}"#,
            hpa.ip(),
            hpa.port()
        ),
    ));
    if let Some(remote) = remote {
        // After gac (priority 1), so it sees gac's ConfigMap.
        created(post(
            addr,
            "/v2/controllers",
            &format!(
                r#"{{"metadata":{{"name":"team"}},"spec":{{"host":"{}","port":{},"type":"action","priority":2}}}}"#,
                remote.ip(),
                remote.port()
            ),
        ));
    }
    created(post(
        addr,
        "/v2/projects/p/composite-apps",
        r#"{"metadata":{"name":"ca"},"spec":{"compositeAppVersion":"v1"}}"#,
    ));
    let chart = tgz(
        &examples().join("helm_charts/http-server/helm"),
        "http-server",
        &work.join("http-server.tgz"),
    );
    created(post_form(
        addr,
        "/v2/projects/p/composite-apps/ca/v1/apps",
        r#"{"metadata":{"name":"http-server"}}"#,
        &[("file", "http-server.tgz", &chart)],
    ));
    created(post(
        addr,
        "/v2/projects/p/composite-apps/ca/v1/composite-profiles",
        r#"{"metadata":{"name":"cp"}}"#,
    ));
    let profile = tgz(
        &examples().join("profiles/default/profile"),
        ".",
        &work.join("profile.tgz"),
    );
    created(post_form(
        addr,
        "/v2/projects/p/composite-apps/ca/v1/composite-profiles/cp/profiles",
        r#"{"metadata":{"name":"pr"},"spec":{"app":"http-server"}}"#,
        &[("file", "profile.tgz", &profile)],
    ));
    let dig = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig".to_owned();
    created(post(
        addr,
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups",
        r#"{"metadata":{"name":"dig"},"spec":{"compositeProfile":"cp","version":"r1","logicalCloud":"lc"}}"#,
    ));
    created(post(
        addr,
        &format!("{dig}/intents"),
        &format!(
            r#"{{"metadata":{{"name":"i"}},"spec":{{"intent":{{"genericPlacementIntent":"gpi","gac":"gi","hpa-placement-controller-1":"hi"{}}}}}}}"#,
            if remote.is_some() {
                r#","team":"blue""#
            } else {
                ""
            }
        ),
    ));
    created(post(
        addr,
        &format!("{dig}/generic-placement-intents"),
        r#"{"metadata":{"name":"gpi"},"spec":{"logicalCloud":"lc"}}"#,
    ));
    created(post(
        addr,
        &format!("{dig}/generic-placement-intents/gpi/app-intents"),
        r#"{"metadata":{"name":"ai"},"spec":{"app":"http-server","intent":{"allOf":[{"clusterProvider":"kp","cluster":"c1"},{"clusterProvider":"kp","cluster":"c2"}]}}}"#,
    ));
    created(post(
        addr,
        &format!("{dig}/generic-k8s-intents"),
        r#"{"metadata":{"name":"gi"}}"#,
    ));
    created(post_form(
        addr,
        &format!("{dig}/generic-k8s-intents/gi/resources"),
        r#"{"metadata":{"name":"cm"},"spec":{"app":"http-server","newObject":"true","resourceGVK":{"apiVersion":"v1","kind":"ConfigMap","name":"from-gac"}}}"#,
        &[(
            "file",
            "cm.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-gac\ndata:\n  k: v\n",
        )],
    ));
    created(post(
        addr,
        &format!("{dig}/hpa-intents"),
        r#"{"metadata":{"name":"hi"},"spec":{"app":"http-server"}}"#,
    ));
    created(post(
        addr,
        &format!("{dig}/hpa-intents/hi/hpa-resource-consumers"),
        r#"{"metadata":{"name":"c"},"spec":{"apiVersion":"apps/v1","kind":"Deployment","name":"r1-http-server","container":"http-server"}}"#,
    ));
    created(post(
        addr,
        &format!("{dig}/hpa-intents/hi/hpa-resource-consumers/c/resource-requirements"),
        r#"{"metadata":{"name":"qat"},"spec":{"allocatable":false,"mandatory":true,"resource":{"key":"feature.node.kubernetes.io/intel_qat","value":"true"}}}"#,
    ));
    let (status, body) = post(addr, &format!("{dig}/approve"), "");
    assert_eq!(status, 202, "{body}");
    dig
}

/// An action controller in another process: labels every resource with the DIG's intent name,
/// reaching the server's embedded AppContexts through its AppContext gRPC service.
struct Team;

#[async_trait::async_trait]
impl emco_controller_sdk::ActionController for Team {
    async fn update(
        &self,
        cx: &mut emco_controller_sdk::ControllerContext,
    ) -> emco_core::Result<()> {
        let team = cx.intent_name().unwrap_or("none").to_owned();
        for app in cx.apps().await? {
            for cluster in cx.clusters(&app).await? {
                for (name, mut obj) in cx.resources(&app, &cluster).await? {
                    emco_controller_sdk::set_field(
                        &mut obj,
                        &["metadata", "labels", "team"],
                        team.clone().into(),
                    )?;
                    cx.put_resource(&app, &cluster, &name, obj).await?;
                }
            }
        }
        Ok(())
    }
}

/// hpa and gac registered by their EMCO names at an address where nothing listens run
/// in-process during an instantiate (c2 is filtered out, gac's ConfigMap is in the AppContext),
/// and a controller served over gRPC by the SDK, working on the server's embedded AppContexts
/// through its AppContext service, runs after them; with `--builtin-controllers false` the same
/// instantiate calls the registered address of gac and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_builtin_controllers_run_in_process() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, grpc) = (free_addr(), free_addr());
    let data = dir.path().join("in-process");
    let server = Server::start_with(&data, addr, grpc, &[]);
    let store: Arc<dyn AppContextStore> =
        Arc::new(RemoteAppContextStore::connect_lazy(&format!("http://{grpc}")).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let team_addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let team = tokio::spawn(
        emco_controller_sdk::Server::builder(Arc::clone(&store))
            .name("team")
            .action(Team)
            .serve_with_listener(listener, stop.clone().cancelled_owned()),
    );
    // The preview runs every controller too: the remote one reads its scratch context from
    // the server's store (written there and deleted, as the answer says).
    let dig = tokio::task::block_in_place(|| {
        onboard_with_controllers(addr, dir.path(), Some(team_addr), None)
    });
    let contexts = async || {
        let keys = store.list_all("/context/", true).await.unwrap();
        keys.into_iter()
            .map(|kv| kv.key)
            .filter(|k| k.matches('/').count() == 3)
            .collect::<Vec<_>>()
    };
    let before = contexts().await;
    let preview = tokio::task::block_in_place(|| {
        let (status, body) = request(addr, "GET", &format!("{dig}/preview"), "").unwrap();
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    });
    assert_eq!(
        preview["writtenFor"],
        serde_json::json!(["team"]),
        "{preview}"
    );
    let added = &preview["changes"][0]["objects"];
    let gac = added
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["resource"] == "from-gac+ConfigMap")
        .expect("gac's ConfigMap in the preview");
    assert!(
        gac["diff"].as_str().unwrap().contains("+    team: blue"),
        "{gac}"
    );
    assert_eq!(contexts().await, before, "the preview's context is deleted");
    let id = tokio::task::block_in_place(|| instantiate_dig(addr, &dig));
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    // hpa's placement removed c2, gac added its ConfigMap, the remote controller labelled it.
    assert_eq!(ctx.clusters("http-server").await.unwrap(), ["kp+c1"]);
    let cm = ctx
        .resource("http-server", "kp+c1", "from-gac+ConfigMap")
        .await
        .unwrap()
        .expect("gac's ConfigMap");
    assert!(cm.contains("team: blue"), "{cm}");
    // Each call is timed by controller and type: the preview's, the instantiate's and, for the
    // action controller, the instantiate's PostEvent (posted in the background once handed over).
    let series = [
        r#"emco_controller_call_duration_seconds_count{controller="team",type="action"} 3"#,
        r#"emco_controller_call_duration_seconds_count{controller="hpa-placement-controller-1",type="placement"} 2"#,
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, metrics) = request(addr, "GET", "/metrics", "").unwrap();
        if series.iter().all(|s| metrics.contains(s)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{series:?}\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    team.await.unwrap().unwrap();
    drop((ctx, store));
    assert!(terminate(server).await.success());

    let data = dir.path().join("remote");
    let server = Server::start_with(&data, addr, grpc, &["--builtin-controllers", "false"]);
    let (status, body) = tokio::task::block_in_place(|| {
        let dig = onboard_with_controllers(addr, dir.path(), None, None);
        post(addr, &format!("{dig}/instantiate"), "")
    });
    // Unreachable is Unavailable: a 503, whose body the REST layer keeps generic.
    assert_eq!(status, 503, "{body}");
    let (_, metrics) = request(addr, "GET", "/metrics", "").unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("emco_controller_call_errors_total{")
                && l.ends_with(r#"kind="Unavailable"} 1"#)),
        "{metrics}"
    );
    assert!(terminate(server).await.success());
}

/// The etcd and MongoDB the test command started (`EMCO_TEST_ETCD`, `EMCO_TEST_MONGO`), with a
/// key prefix and a database of the test's own.
struct SharedStores {
    etcd: String,
    mongo: String,
    prefix: String,
    database: String,
}

impl SharedStores {
    /// `None` (the test skips) outside CI when they are not there.
    fn new(test: &str) -> Option<Self> {
        let (Ok(etcd), Ok(mongo)) = (
            std::env::var("EMCO_TEST_ETCD"),
            std::env::var("EMCO_TEST_MONGO"),
        ) else {
            assert!(
                std::env::var("CI").is_err(),
                "EMCO_TEST_ETCD and EMCO_TEST_MONGO must be set in CI"
            );
            eprintln!("SKIPPED {test}: no etcd and MongoDB");
            return None;
        };
        let prefix = emco_store::conformance::unique_prefix("/emco-rs-test/shared-");
        let database = prefix.trim_matches('/').replace(['/', '-'], "_");
        Some(Self {
            etcd,
            mongo,
            prefix,
            database,
        })
    }

    /// The AppContext store in the etcd, under the test's prefix.
    async fn etcd(&self) -> emco_store::etcd::EtcdAppContextStore {
        emco_store::etcd::EtcdBuilder::new()
            .with_endpoints([self.etcd.clone()])
            .with_prefix(self.prefix.clone())
            .build()
            .await
            .unwrap()
    }

    /// emco-server's flags for them.
    fn flags(&self) -> Vec<&str> {
        vec![
            "--backend",
            "mongo",
            "--mongo-uri",
            &self.mongo,
            "--mongo-database",
            &self.database,
            "--context-backend",
            "etcd",
            "--etcd-endpoints",
            &self.etcd,
            "--etcd-prefix",
            &self.prefix,
        ]
    }
}

/// EMCO runs each controller in its own process: gac and hpa's placement controller served by
/// `emco-server --serve-controller` on the stores of a server without built-in controllers
/// (etcd and MongoDB) take part in its instantiate as the in-process ones do.
#[tokio::test(flavor = "multi_thread")]
async fn builtin_controllers_serve_from_their_own_processes() {
    let Some(shared) = SharedStores::new("builtin_controllers_serve_from_their_own_processes")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let stores = shared.flags();
    let (addr, grpc) = (free_addr(), free_addr());
    let mut flags = stores.clone();
    flags.extend(["--builtin-controllers", "false"]);
    let server = Server::start_with(&dir.path().join("server"), addr, grpc, &flags);
    let (gac, hpa) = (free_addr(), free_addr());
    let controllers: Vec<Child> = [("gac", gac), ("hpa-placement-controller-1", hpa)]
        .iter()
        .map(|(name, at)| {
            Command::new(env!("CARGO_BIN_EXE_emco-server"))
                .args(["--serve-controller", name, "--grpc-listen", &at.to_string()])
                .args(&stores)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for at in [gac, hpa] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect(at).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the controller at {at} did not come up"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(health(at, "").await, 1, "SERVING");
    }
    let id = tokio::task::block_in_place(|| {
        instantiate_with_controllers(addr, dir.path(), None, Some((gac, hpa)))
    });
    let ctx = AppContext::load(Arc::new(shared.etcd().await), id)
        .await
        .unwrap();
    // hpa's placement (its own process) removed c2, gac (its own process) added its ConfigMap.
    assert_eq!(ctx.clusters("http-server").await.unwrap(), ["kp+c1"]);
    assert!(
        ctx.resource("http-server", "kp+c1", "from-gac+ConfigMap")
            .await
            .unwrap()
            .is_some()
    );
    for mut c in controllers {
        sigterm(&c);
        assert!(c.wait().unwrap().success());
    }
    assert!(terminate(server).await.success());
}

/// A controller process needs the orchestrator's shared stores, and a known name.
#[test]
fn a_controller_process_refuses_what_it_cannot_serve() {
    let out = Command::new(env!("CARGO_BIN_EXE_emco-server"))
        .args(["--serve-controller", "gac"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("--serve-controller needs"), "{text}");
    // The name is checked before the stores are dialled.
    let out = Command::new(env!("CARGO_BIN_EXE_emco-server"))
        .args(["--serve-controller", "nope", "--backend", "mongo"])
        .args([
            "--mongo-uri",
            "mongodb://127.0.0.1:9",
            "--context-backend",
            "etcd",
        ])
        .args(["--etcd-endpoints", "http://127.0.0.1:9"])
        .env("EMCO_LOG_FORMAT", "text")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("is no built-in controller; one of: gac, hpa-placement-controller-1"),
        "{text}"
    );
}

/// [`onboard_with_controllers`], then an instantiate (202); the id of its AppContext.
fn instantiate_with_controllers(
    addr: SocketAddr,
    work: &std::path::Path,
    remote: Option<SocketAddr>,
    builtins: Option<(SocketAddr, SocketAddr)>,
) -> emco_core::ContextId {
    let dig = onboard_with_controllers(addr, work, remote, builtins);
    instantiate_dig(addr, &dig)
}

/// Instantiates `dig` through the server at `addr`; the context deployed.
fn instantiate_dig(addr: SocketAddr, dig: &str) -> emco_core::ContextId {
    let (status, body) = post(addr, &format!("{dig}/instantiate"), "");
    assert_eq!(status, 202, "{body}");
    let (status, body) = request(addr, "GET", &format!("{dig}/status"), "").unwrap();
    assert_eq!(status, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    status["states"]["statusctxid"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// The deployed status of `dig` through the server at `addr`.
fn deployed_status(addr: SocketAddr, dig: &str) -> serde_json::Value {
    let (code, body) = request(addr, "GET", &format!("{dig}/status?status=deployed"), "").unwrap();
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// How many resources the deployed status counts as Applied.
fn applied(status: &serde_json::Value) -> u64 {
    status["deployedCounts"]["Applied"].as_u64().unwrap_or(0)
}

/// The names of the objects rsync deployed of kind `kind` (`api/v1/services`,
/// `apis/apps/v1/deployments`) in namespace default of kubesim cluster `name` (plain HTTP).
fn cluster_objects(fleet: &kubesim::Fleet, name: &str, kind: &str) -> Vec<String> {
    try_cluster_objects(fleet, name, kind).unwrap()
}

/// [`cluster_objects`], or the reason the cluster did not answer (a fault it was given).
fn try_cluster_objects(
    fleet: &kubesim::Fleet,
    name: &str,
    kind: &str,
) -> Result<Vec<String>, String> {
    let server = fleet.server_url(name).unwrap();
    let addr: SocketAddr = server.trim_start_matches("http://").parse().unwrap();
    let kubeconfig = fleet.kubeconfig(name).unwrap();
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    let (base, plural) = kind.rsplit_once('/').unwrap();
    let path = format!(
        "/{base}/namespaces/default/{plural}?labelSelector={}",
        emco_rsync::connector::DEPLOYMENT_ID_LABEL
    );
    let auth = format!("Authorization: Bearer {token}\r\n");
    let (code, body) = request_with(addr, "GET", &path, &auth, b"").map_err(|e| e.to_string())?;
    if code != 200 {
        return Err(format!("{path}: {code} {body}"));
    }
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut names: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    Ok(names)
}

/// A kubesim fleet of `clusters` on plain HTTP, run by `rt`.
fn plain_fleet(rt: &tokio::runtime::Runtime, clusters: usize) -> kubesim::Fleet {
    rt.block_on(kubesim::Fleet::start(kubesim::FleetConfig {
        clusters,
        plain_http: true,
        ..kubesim::FleetConfig::default()
    }))
    .unwrap()
}

/// Onboards the project's http-server example through `a` to every cluster of `fleet`: each
/// labelled `edge` (every second one also `half`) and in the admin cloud `lc`; placed by label
/// `edge`, approved. Returns the DIG's URL.
fn onboard_edge_fleet(
    a: SocketAddr,
    fleet: &kubesim::Fleet,
    work: &std::path::Path,
) -> &'static str {
    let created = |(status, body): (u16, String)| assert!(status == 201, "{status} {body}");
    created(post(
        a,
        "/v2/cluster-providers",
        r#"{"metadata":{"name":"kp"}}"#,
    ));
    created(post(a, "/v2/projects", r#"{"metadata":{"name":"p"}}"#));
    created(post(
        a,
        "/v2/projects/p/logical-clouds",
        r#"{"metadata":{"name":"lc"},"spec":{"level":"0"}}"#,
    ));
    for (i, name) in fleet.cluster_names().into_iter().enumerate() {
        let kubeconfig = fleet.kubeconfig(&name).unwrap();
        created(post_form(
            a,
            "/v2/cluster-providers/kp/clusters",
            &format!(r#"{{"metadata":{{"name":"{name}"}}}}"#),
            &[("file", "kubeconfig", kubeconfig.as_bytes())],
        ));
        created(post(
            a,
            &format!("/v2/cluster-providers/kp/clusters/{name}/labels"),
            r#"{"clusterLabel":"edge"}"#,
        ));
        if i % 2 == 1 {
            created(post(
                a,
                &format!("/v2/cluster-providers/kp/clusters/{name}/labels"),
                r#"{"clusterLabel":"half"}"#,
            ));
        }
        created(post(
            a,
            "/v2/projects/p/logical-clouds/lc/cluster-references",
            &format!(
                r#"{{"metadata":{{"name":"{name}"}},"spec":{{"clusterProvider":"kp","cluster":"{name}"}}}}"#
            ),
        ));
    }
    let (status, body) = post(a, "/v2/projects/p/logical-clouds/lc/instantiate", "");
    assert_eq!(status, 202, "{body}");
    created(post(
        a,
        "/v2/projects/p/composite-apps",
        r#"{"metadata":{"name":"ca"},"spec":{"compositeAppVersion":"v1"}}"#,
    ));
    // The project's own example chart and profile, each packed and uploaded with its metadata.
    let own = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let upload = |path: &str, metadata: &str, (dir, entry): (&str, &str), file: &str| {
        let packed = tgz(&own.join(dir), entry, &work.join(file));
        created(post_form(a, path, metadata, &[("file", file, &packed)]));
    };
    upload(
        "/v2/projects/p/composite-apps/ca/v1/apps",
        r#"{"metadata":{"name":"http-server"}}"#,
        ("charts", "http-server"),
        "http-server.tgz",
    );
    created(post(
        a,
        "/v2/projects/p/composite-apps/ca/v1/composite-profiles",
        r#"{"metadata":{"name":"cp"}}"#,
    ));
    upload(
        "/v2/projects/p/composite-apps/ca/v1/composite-profiles/cp/profiles",
        r#"{"metadata":{"name":"pr"},"spec":{"app":"http-server"}}"#,
        ("profiles/default", "."),
        "profile.tgz",
    );
    add_group(a, "dig", "edge");
    "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig"
}

/// A deployment intent group `name` of [`onboard_edge_fleet`]'s composite app placing its app
/// on the clusters labelled `label`, approved; its path.
fn add_group(a: SocketAddr, name: &str, label: &str) -> String {
    let created = |(status, body): (u16, String)| assert!(status == 201, "{status} {body}");
    let dig = format!("/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/{name}");
    created(post(
        a,
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups",
        &format!(
            r#"{{"metadata":{{"name":"{name}"}},"spec":{{"compositeProfile":"cp","version":"r1","logicalCloud":"lc"}}}}"#
        ),
    ));
    created(post(
        a,
        &format!("{dig}/intents"),
        r#"{"metadata":{"name":"i"},"spec":{"intent":{"genericPlacementIntent":"gpi"}}}"#,
    ));
    created(post(
        a,
        &format!("{dig}/generic-placement-intents"),
        r#"{"metadata":{"name":"gpi"},"spec":{"logicalCloud":"lc"}}"#,
    ));
    created(post(
        a,
        &format!("{dig}/generic-placement-intents/gpi/app-intents"),
        &format!(
            r#"{{"metadata":{{"name":"ai"}},"spec":{{"app":"http-server","intent":{{"allOf":[{{"clusterProvider":"kp","clusterLabel":"{label}"}}]}}}}}}"#
        ),
    ));
    assert_eq!(post(a, &format!("{dig}/approve"), "").0, 202);
    dig
}

/// Three replicas on one etcd and one MongoDB wire server: an instantiate to 100 kubesim clusters
/// through replica a, SIGKILL of a mid-way; another replica finishes it with every object once,
/// the status is the same through b and c, and a terminate through b removes it all. Prints the
/// takeover time.
#[test]
fn three_replicas_finish_the_work_of_a_killed_one() {
    killed_replica("three_replicas_finish_the_work_of_a_killed_one", None);
}

/// As [`three_replicas_finish_the_work_of_a_killed_one`], with the replicas sharing operations
/// on at least 10 clusters (`--replica-share-clusters`): the instantiate is split among the
/// three, and the part of the killed one (which also owned the deployment) is finished by the
/// others, as is the terminate's.
#[test]
fn three_replicas_share_a_deployment_and_finish_a_killed_ones_part() {
    killed_replica(
        "three_replicas_share_a_deployment_and_finish_a_killed_ones_part",
        Some("10"),
    );
}

/// The killed-replica test, sharing operations from `share` clusters when given.
fn killed_replica(test: &str, share: Option<&str>) {
    const CLUSTERS: usize = 100;
    const TTL_SECONDS: u64 = 2;
    let Some(shared) = SharedStores::new(test) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let work = tempfile::tempdir().unwrap();
    let ttl = TTL_SECONDS.to_string();
    let replicas: Vec<Server> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            let mut flags = shared.flags();
            flags.extend(["--replica-id", id, "--replica-ttl-seconds", &ttl]);
            flags.extend(["--rsync-max-backoff-seconds", "1"]);
            flags.extend(["--replica-share-clusters", share.unwrap_or("0")]);
            Server::start_with(&work.path().join(id), free_addr(), free_addr(), &flags)
        })
        .collect();
    let (a, b, c) = (replicas[0].addr, replicas[1].addr, replicas[2].addr);
    let etcd = rt.block_on(shared.etcd());
    let shards = || {
        rt.block_on(etcd.list_all("/rsyncshard/", true))
            .unwrap()
            .len()
    };

    let dig = onboard_edge_fleet(a, &fleet, work.path());
    // Every replica has seen the others beat (a look every third of the time to live).
    std::thread::sleep(Duration::from_secs(TTL_SECONDS));

    // Slow clusters, so that the kill lands in the middle of the instantiate.
    for name in fleet.cluster_names() {
        fleet
            .set_fault(&name, kubesim::Fault::latency(150))
            .unwrap();
    }
    let (status, body) = post(a, &format!("{dig}/instantiate"), "");
    assert_eq!(status, 202, "{body}");
    let objects = 3 * CLUSTERS as u64; // a ConfigMap, a Deployment and a Service each
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut parts = 0;
    while applied(&deployed_status(b, dig)) < objects / 5 {
        assert!(Instant::now() < deadline, "replica a applied nothing");
        parts = parts.max(shards());
        std::thread::sleep(Duration::from_millis(50));
    }
    parts = parts.max(shards());
    assert_eq!(
        parts,
        if share.is_some() { 3 } else { 0 },
        "parts of the instantiate"
    );
    let mut replicas = replicas.into_iter();
    let mut killed = replicas.next().unwrap();
    killed.child.kill().unwrap(); // SIGKILL
    killed.child.wait().unwrap();
    let at_kill = Instant::now();
    let before = applied(&deployed_status(b, dig));
    assert!(before < objects, "the kill came too late to test anything");
    for name in fleet.cluster_names() {
        fleet.set_fault(&name, kubesim::Fault::none()).unwrap();
    }

    // Progress again (a survivor took over), then done.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut takeover = None;
    let done = loop {
        let status = deployed_status(c, dig);
        let now = applied(&status);
        if takeover.is_none() && now > before {
            takeover = Some(at_kill.elapsed());
        }
        if now == objects && status["deployedStatus"] == "Instantiated" {
            break status;
        }
        assert!(Instant::now() < deadline, "not finished: {status}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let finished = at_kill.elapsed();
    eprintln!(
        "replicas (parts: {parts}): {CLUSTERS} clusters, {objects} objects, {before} applied \
         before replica a's SIGKILL; progress again {takeover:?} after the kill (ttl \
         {TTL_SECONDS} s), all applied {finished:?} after it"
    );
    // The same answer through both survivors.
    let through_b = deployed_status(b, dig);
    assert_eq!(through_b["deployedCounts"], done["deployedCounts"]);
    assert_eq!(through_b["deployedStatus"], done["deployedStatus"]);
    // Every object exactly once on every cluster.
    let each_kind = |want: usize| {
        for name in fleet.cluster_names() {
            for kind in [
                "api/v1/configmaps",
                "apis/apps/v1/deployments",
                "api/v1/services",
            ] {
                let names = cluster_objects(&fleet, &name, kind);
                assert_eq!(names.len(), want, "{name} {kind}: {names:?}");
            }
        }
    };
    each_kind(1);

    // A terminate through b: shared by the two survivors.
    assert_eq!(post(b, &format!("{dig}/terminate"), "").0, 202);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut parts = 0;
    while deployed_status(c, dig)["deployedStatus"] != "Terminated" {
        assert!(Instant::now() < deadline, "the terminate did not complete");
        parts = parts.max(shards());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        parts,
        if share.is_some() { 2 } else { 0 },
        "parts of the terminate"
    );
    each_kind(0);
    // Nothing of the parts is left: records, outcomes, owner keys.
    let left: Vec<String> = ["/rsyncshard/", "/rsyncsharddone/", "/rsyncowner/"]
        .iter()
        .flat_map(|p| rt.block_on(etcd.list_all(p, true)).unwrap())
        .map(|kv| kv.key)
        .filter(|k| !k.starts_with("/rsyncowner/") || k.contains('.'))
        .collect();
    assert!(left.is_empty(), "left of the parts: {left:?}");
    drop(replicas);
    drop(killed);
    let contexts = rt.block_on(etcd.delete_prefix("/")).unwrap();
    assert!(contexts > 0);
}

/// One request of [`many_clients_leave_a_history_of_one_order`] and its answer.
#[derive(Debug, Clone)]
struct Call {
    client: usize,
    group: usize,
    /// A lifecycle operation (`approve`, `instantiate`, ...), or `create NAME` / `delete NAME`
    /// of a gac intent.
    op: String,
    start: Instant,
    end: Instant,
    code: u16,
    body: String,
}

/// The lifecycle operation a path segment names.
fn dig_operation(op: &str) -> Option<emco_core::lifecycle::DigOperation> {
    use emco_core::lifecycle::DigOperation as O;
    Some(match op {
        "approve" => O::Approve,
        "instantiate" => O::Instantiate,
        "update" => O::Update,
        "rollback" => O::Rollback,
        "stop" => O::Stop,
        "terminate" => O::Terminate,
        _ => return None,
    })
}

/// Checks one group's recorded history (`actions` after the setup's entries, from state
/// `from`) against its acknowledged lifecycle calls: an assignment of calls to entries in which
/// each entry is the state its call leads to from the one before (emco_core's transitions) and
/// a call that ended before another began comes first (real time); every call that changes
/// something has its entry (an approve of an approved group or a stop of a stopped one changes
/// nothing and is not recorded, as in EMCO). Greedy: each entry takes, of the fitting calls
/// that did not end before a call already placed began, the one that ended first.
fn check_history(
    group: usize,
    actions: &[serde_json::Value],
    from: emco_core::lifecycle::DigState,
    acknowledged: &[&Call],
) {
    use emco_core::lifecycle::{DigState, Outcome, transition};
    let mut taken = vec![false; acknowledged.len()];
    let mut state = from;
    let mut states = vec![from];
    // The latest start of a call placed so far: a call that ended before it cannot come later.
    let mut latest_start = None;
    for (i, action) in actions.iter().enumerate() {
        let recorded: DigState = serde_json::from_value(action["state"].clone()).unwrap();
        let fitting = acknowledged
            .iter()
            .enumerate()
            .filter(|(k, c)| {
                !taken[*k]
                    && latest_start.is_none_or(|at| c.end >= at)
                    && dig_operation(&c.op).is_some_and(|op| {
                        matches!(transition(state, op), Ok(Outcome::State(s)) if s == recorded)
                    })
            })
            .min_by_key(|(_, c)| c.end)
            .map(|(k, _)| k);
        let Some(k) = fitting else {
            panic!(
                "group {group}: entry {i} ({recorded} after {state}) matches no acknowledged call \
                 in real-time order (invented or reordered): {actions:?}"
            );
        };
        taken[k] = true;
        latest_start = latest_start.max(Some(acknowledged[k].start));
        state = recorded;
        states.push(state);
    }
    for call in acknowledged
        .iter()
        .enumerate()
        .filter(|(k, _)| !taken[*k])
        .map(|(_, c)| c)
    {
        let unchanged: &[DigState] = match call.op.as_str() {
            "approve" => &[DigState::Approved],
            "stop" => &[DigState::InstantiateStopped, DigState::TerminateStopped],
            _ => &[],
        };
        assert!(
            states.iter().any(|s| unchanged.contains(s)),
            "group {group}: {} of client {} is not in the history (lost): {call:?}, {actions:?}",
            call.op,
            call.client
        );
    }
}

/// Many clients at once (#44): 8 clients against 3 replicas on shared etcd and MongoDB, each
/// doing random approve, instantiate, update, rollback, stop and terminate on 3 shared groups
/// (each placed on clusters of its own) and creating and deleting gac intents, every request and
/// answer recorded. No answer is a 5xx; each group's recorded history is one order of exactly
/// the acknowledged transitions (none lost, none invented, real-time order kept); the intents
/// are those the acknowledged creates and deletes leave; and once each group is brought to a
/// deployed or terminated state, its clusters hold exactly what that state says.
/// `EMCO_CLIENTS_SECONDS` sets how long the clients run (60 in the test command; 600 is the
/// issue's 10 minutes), `EMCO_CLIENTS_SEED` replays a run.
#[test]
fn many_clients_leave_a_history_of_one_order() {
    const CLUSTERS: usize = 6;
    const GROUPS: usize = 3;
    const CLIENTS: usize = 8;
    let test = "many_clients_leave_a_history_of_one_order";
    let Some(shared) = SharedStores::new(test) else {
        return;
    };
    let seconds: u64 = std::env::var("EMCO_CLIENTS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("EMCO_CLIENTS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("{test}: EMCO_CLIENTS_SEED={seed} EMCO_CLIENTS_SECONDS={seconds}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let work = tempfile::tempdir().unwrap();
    let replicas: Vec<Server> = ["a", "b", "c"]
        .iter()
        .map(|id| {
            let mut flags = shared.flags();
            flags.extend(["--replica-id", id, "--replica-ttl-seconds", "2"]);
            flags.extend(["--rsync-max-backoff-seconds", "1"]);
            Server::start_with(&work.path().join(id), free_addr(), free_addr(), &flags)
        })
        .collect();
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
    onboard_edge_fleet(addrs[0], &fleet, work.path());
    let names = fleet.cluster_names();
    for (i, name) in names.iter().enumerate() {
        let (code, body) = post(
            addrs[0],
            &format!("/v2/cluster-providers/kp/clusters/{name}/labels"),
            &format!(r#"{{"clusterLabel":"g{}"}}"#, i % GROUPS),
        );
        assert_eq!(code, 201, "{body}");
    }
    let groups: Vec<String> = (0..GROUPS)
        .map(|g| add_group(addrs[0], &format!("g{g}"), &format!("g{g}")))
        .collect();
    // Slow clusters, so that operations overlap their rsync work.
    for name in &names {
        fleet.set_fault(name, kubesim::Fault::latency(40)).unwrap();
    }

    let until = Instant::now() + Duration::from_secs(seconds);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (addrs, groups) = (addrs.clone(), groups.clone());
            std::thread::spawn(move || {
                let mut random = Moments(seed.wrapping_add(client as u64 * 0x9E37_79B9) | 1);
                let addr = addrs[client % addrs.len()];
                let (mut calls, mut mine, mut next) =
                    (Vec::new(), Vec::<(usize, String)>::new(), 0);
                while Instant::now() < until {
                    let group = random.below(GROUPS as u64) as usize;
                    let dig = &groups[group];
                    let (op, method, path, body) = match random.below(8) {
                        0 => (
                            "approve".to_owned(),
                            "POST",
                            format!("{dig}/approve"),
                            String::new(),
                        ),
                        1 => (
                            "instantiate".to_owned(),
                            "POST",
                            format!("{dig}/instantiate"),
                            String::new(),
                        ),
                        2 => (
                            "update".to_owned(),
                            "POST",
                            format!("{dig}/update"),
                            String::new(),
                        ),
                        3 => {
                            let revision = 1 + random.below(3);
                            let body = format!(
                                r#"{{"metadata":{{"name":"rb"}},"spec":{{"revision":{revision}}}}}"#
                            );
                            (
                                "rollback".to_owned(),
                                "POST",
                                format!("{dig}/rollback"),
                                body,
                            )
                        }
                        4 => (
                            "stop".to_owned(),
                            "POST",
                            format!("{dig}/stop"),
                            String::new(),
                        ),
                        5 => (
                            "terminate".to_owned(),
                            "POST",
                            format!("{dig}/terminate"),
                            String::new(),
                        ),
                        _ => match mine.iter().position(|(g, _)| *g == group) {
                            Some(i) if random.below(2) == 0 => {
                                let (_, name) = mine.remove(i);
                                let path = format!("{}/generic-k8s-intents/{name}", groups[group]);
                                (format!("delete {name}"), "DELETE", path, String::new())
                            }
                            _ => {
                                let name = format!("c{client}-{next}");
                                next += 1;
                                mine.push((group, name.clone()));
                                let body = format!(r#"{{"metadata":{{"name":"{name}"}}}}"#);
                                (
                                    format!("create {name}"),
                                    "POST",
                                    format!("{dig}/generic-k8s-intents"),
                                    body,
                                )
                            }
                        },
                    };
                    let start = Instant::now();
                    let (code, answer) = request(addr, method, &path, &body)
                        .unwrap_or_else(|e| panic!("client {client}: {op} on group {group}: {e}"));
                    calls.push(Call {
                        client,
                        group,
                        op,
                        start,
                        end: Instant::now(),
                        code,
                        body: answer,
                    });
                    std::thread::sleep(Duration::from_millis(random.below(40)));
                }
                calls
            })
        })
        .collect();
    let calls: Vec<Call> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();

    // Every answer is one the server meant.
    for c in &calls {
        assert!(c.code < 500, "{c:?}");
        assert!(
            c.code < 300 || !c.body.trim().is_empty(),
            "a refusal says why: {c:?}"
        );
    }
    let lifecycle = |c: &&Call| dig_operation(&c.op).is_some();
    let acknowledged = calls
        .iter()
        .filter(lifecycle)
        .filter(|c| c.code < 300)
        .count();
    eprintln!(
        "{test}: {} calls, {acknowledged} lifecycle transitions acknowledged, {} refused",
        calls.len(),
        calls
            .iter()
            .filter(lifecycle)
            .filter(|c| c.code >= 300)
            .count()
    );
    assert!(acknowledged > 0, "no transition was acknowledged");

    for (g, dig) in groups.iter().enumerate() {
        // Created and the setup's Approved come first.
        let status = deployed_status(addrs[g % addrs.len()], dig);
        let actions = status["states"]["actions"].as_array().unwrap().clone();
        let mine: Vec<&Call> = calls
            .iter()
            .filter(|c| c.group == g && c.code < 300 && dig_operation(&c.op).is_some())
            .collect();
        check_history(
            g,
            &actions[2..],
            emco_core::lifecycle::DigState::Approved,
            &mine,
        );
        // The intents the acknowledged creates and deletes leave (each name is one client's).
        let mut want = std::collections::BTreeSet::new();
        for c in calls.iter().filter(|c| c.group == g && c.code < 300) {
            if let Some(name) = c.op.strip_prefix("create ") {
                want.insert(name.to_owned());
            } else if let Some(name) = c.op.strip_prefix("delete ") {
                want.remove(name);
            }
        }
        let (code, body) =
            request(addrs[0], "GET", &format!("{dig}/generic-k8s-intents"), "").unwrap();
        assert_eq!(code, 200, "{body}");
        let listed: std::collections::BTreeSet<String> =
            serde_json::from_str::<serde_json::Value>(&body)
                .unwrap()
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
                .collect();
        assert_eq!(listed, want, "group {g}: the intents");
    }

    // The clusters: each group brought to a deployed or terminated state, then exactly that.
    for name in &names {
        fleet.set_fault(name, kubesim::Fault::none()).unwrap();
    }
    for (g, dig) in groups.iter().enumerate() {
        let status = deployed_status(addrs[0], dig);
        let last = status["states"]["actions"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["state"]
            .as_str()
            .unwrap()
            .to_owned();
        let finish = match last.as_str() {
            "Instantiated" | "Updated" | "Terminated" => None,
            "Approved" => Some("instantiate"),
            _ => Some("terminate"),
        };
        if let Some(op) = finish {
            // A 409 while the terminate of an earlier deployment still runs: again.
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let (code, body) = post(addrs[0], &format!("{dig}/{op}"), "");
                if code == 202 {
                    break;
                }
                assert!(
                    code == 409 && Instant::now() < deadline,
                    "group {g} {last}, {op}: {code} {body}"
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        let deployed = !matches!(
            (last.as_str(), finish),
            ("Terminated", None) | (_, Some("terminate"))
        );
        let mine: Vec<&String> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| i % GROUPS == g)
            .map(|(_, n)| n)
            .collect();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let status = deployed_status(addrs[1], dig);
            let state = status["deployedStatus"].as_str().unwrap_or_default();
            let settled = if deployed {
                matches!(state, "Instantiated" | "Updated")
                    && status["deployedCounts"]
                        .as_object()
                        .is_some_and(|c| c.keys().all(|k| k == "Applied"))
            } else {
                state == "Terminated"
            };
            let want = usize::from(deployed);
            let exact = mine.iter().all(|c| {
                KINDS
                    .iter()
                    .all(|k| cluster_objects(&fleet, c, k).len() == want)
            });
            if settled && exact {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "group {g} ({last}, then {finish:?}) did not settle: {status}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    drop(replicas);
    rt.block_on(async { shared.etcd().await.delete_prefix("/").await.unwrap() });
}

/// The clusters of `fleet` labelled `edge` (all) and `half` (every second one), as
/// [`onboard_edge_fleet`] labels them.
fn edge_and_half(
    fleet: &kubesim::Fleet,
) -> (
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
) {
    let names = fleet.cluster_names();
    let half = names.iter().skip(1).step_by(2).cloned().collect();
    (names.into_iter().collect(), half)
}

/// Places the app of [`onboard_edge_fleet`]'s `dig` on the clusters labelled `label`.
fn place_by_label(addr: SocketAddr, dig: &str, label: &str) {
    let (code, body) = request(
        addr,
        "PUT",
        &format!("{dig}/generic-placement-intents/gpi/app-intents/ai"),
        &format!(
            r#"{{"metadata":{{"name":"ai"}},"spec":{{"app":"http-server","intent":{{"allOf":[{{"clusterProvider":"kp","clusterLabel":"{label}"}}]}}}}}}"#
        ),
    )
    .unwrap();
    assert_eq!(code, 200, "{body}");
}

/// Starts `op` (instantiate, update, terminate) on `dig`, placing by `label` first if given.
fn begin_step(addr: SocketAddr, dig: &str, op: &str, label: Option<&str>) {
    if let Some(label) = label {
        place_by_label(addr, dig, label);
    }
    let (code, body) = post(addr, &format!("{dig}/{op}"), "");
    assert_eq!(code, 202, "{op}: {body}");
}

/// The kinds of the http-server example's objects, as kubesim's paths name them.
const KINDS: [&str; 3] = [
    "api/v1/configmaps",
    "apis/apps/v1/deployments",
    "api/v1/services",
];

/// Waits until the status of `dig` says a step is done (one of `done`) and lists exactly the
/// objects the clusters hold, each once, on exactly the clusters of `want` and none elsewhere.
fn wait_converged(
    addr: SocketAddr,
    dig: &str,
    fleet: &kubesim::Fleet,
    want: &std::collections::BTreeSet<String>,
    done: &[&str],
) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let status = deployed_status(addr, dig);
        let state = status["deployedStatus"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let (listed, resources) = status_clusters(&status);
        let on_clusters: Vec<(String, usize)> = fleet
            .cluster_names()
            .into_iter()
            .flat_map(|c| {
                KINDS
                    .iter()
                    .map(|k| (c.clone(), cluster_objects(fleet, &c, k).len()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let exact = on_clusters
            .iter()
            .all(|(c, n)| *n == usize::from(want.contains(c)));
        let settled = done.contains(&state.as_str())
            && status["deployedCounts"]
                .as_object()
                .is_none_or(|c| c.keys().all(|k| k == "Applied" || k == "Deleted"));
        if exact && settled && &listed == want && resources == KINDS.len() * want.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not converged: {state}, listed {listed:?}, want {want:?}, clusters {on_clusters:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The clusters the status lists with Applied resources, and how many those are (a terminate
/// leaves its resources listed as Deleted).
fn status_clusters(status: &serde_json::Value) -> (std::collections::BTreeSet<String>, usize) {
    let mut clusters = std::collections::BTreeSet::new();
    let mut resources = 0;
    for app in status["apps"].as_array().into_iter().flatten() {
        for c in app["clusters"].as_array().into_iter().flatten() {
            let n = c["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["deployedStatus"] == "Applied")
                .count();
            if n > 0 {
                clusters.insert(c["cluster"].as_str().unwrap_or_default().to_owned());
                resources += n;
            }
        }
    }
    (clusters, resources)
}

/// One step of the crash-safety cycle: the DIG operation, the label to place by first, the
/// clusters that must hold the app after it, and the states that say it is done.
type Step<'a> = (
    &'a str,
    Option<&'a str>,
    &'a std::collections::BTreeSet<String>,
    &'a [&'a str],
);

/// A small deterministic generator: the run's seed reproduces its kill moments.
struct Moments(u64);

impl Moments {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

/// Crash safety: the server is killed with SIGKILL at random moments while it instantiates,
/// updates (to half the clusters and back) and terminates an app on kubesim clusters, and
/// started again each time on the same data dir. After every step has converged, each cluster
/// holds each object exactly once where the placement puts it and nothing elsewhere, the status
/// lists exactly those clusters and objects, and a terminate leaves nothing. `EMCO_CRASH_KILLS`
/// sets the number of kills (the short default runs in the test command; scripts/crash-safety.sh
/// runs the long one), `EMCO_CRASH_SEED` replays a run.
#[test]
fn sigkill_at_random_moments_loses_nothing() {
    const CLUSTERS: usize = 12;
    let kills: usize = std::env::var("EMCO_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(6);
    let seed: u64 = std::env::var("EMCO_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("crash safety: EMCO_CRASH_SEED={seed} EMCO_CRASH_KILLS={kills}");
    let mut moments = Moments(seed);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let work = tempfile::tempdir().unwrap();
    let (addr, grpc) = (free_addr(), free_addr());
    let data = work.path().join("data");
    let flags = ["--rsync-max-backoff-seconds", "1"];
    let mut server = Server::start_with(&data, addr, grpc, &flags);
    let dig = onboard_edge_fleet(addr, &fleet, work.path());
    // Slow clusters, so that kills land in the middle of the work.
    for name in fleet.cluster_names() {
        fleet.set_fault(&name, kubesim::Fault::latency(40)).unwrap();
    }
    let (all, half) = edge_and_half(&fleet);
    let none = std::collections::BTreeSet::new();
    let (mut killed, mut cycles, mut restart_time) = (0, 0, Duration::ZERO);
    let started = Instant::now();
    while killed < kills {
        let steps: [Step; 4] = [
            ("instantiate", None, &all, &["Instantiated"]),
            ("update", Some("half"), &half, &["Instantiated", "Updated"]),
            ("update", Some("edge"), &all, &["Instantiated", "Updated"]),
            ("terminate", None, &none, &["Terminated"]),
        ];
        for (op, label, want, done) in steps {
            begin_step(addr, dig, op, label);
            for _ in 0..moments.below(3) {
                std::thread::sleep(Duration::from_millis(moments.below(1500)));
                server.child.kill().unwrap(); // SIGKILL
                server.child.wait().unwrap();
                let at = Instant::now();
                server = Server::start_with(&data, addr, grpc, &flags);
                restart_time += at.elapsed();
                killed += 1;
            }
            wait_converged(addr, dig, &fleet, want, done);
        }
        cycles += 1;
    }
    let elapsed = started.elapsed();
    let restart_ms = restart_time.as_millis() / killed.max(1) as u128;
    eprintln!(
        "crash safety: {killed} SIGKILLs over {cycles} cycles (instantiate, update to half, \
         update back, terminate) on {CLUSTERS} clusters in {elapsed:?}; mean restart to \
         /healthz {restart_ms} ms; every step converged exactly; seed {seed}"
    );
    if let Ok(out) = std::env::var("EMCO_CRASH_REPORT") {
        std::fs::write(
            out,
            format!(
                "kills {killed}\ncycles {cycles}\nclusters {CLUSTERS}\nobjects_per_cluster {}\n\
                 elapsed_s {:.1}\nmean_restart_ms {restart_ms}\nseed {seed}\n",
                KINDS.len(),
                elapsed.as_secs_f64()
            ),
        )
        .unwrap();
    }
    assert!(server.terminate().success());
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Faulty clusters: a third of some clusters' requests failing, some clusters flapping, some
/// black-holed. An instantiate completes where the clusters answer at all, keeps retrying the
/// black holes without piling anything up (the server's memory stays flat), a stop ends the
/// retries, and once the clusters heal a terminate leaves nothing and a new instantiate converges
/// with every object once.
#[test]
fn deployments_converge_once_faulty_clusters_heal() {
    const CLUSTERS: usize = 12;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let work = tempfile::tempdir().unwrap();
    let (addr, grpc) = (free_addr(), free_addr());
    let flags = ["--rsync-max-backoff-seconds", "1"];
    let server = Server::start_with(&work.path().join("data"), addr, grpc, &flags);
    let dig = onboard_edge_fleet(addr, &fleet, work.path());
    let names = fleet.cluster_names();
    let kind_of = |i: usize| i % 4;
    for (i, name) in names.iter().enumerate() {
        let fault = match kind_of(i) {
            0 => kubesim::Fault::errors(0.3, 503),
            1 => kubesim::Fault::flapping(Duration::from_millis(700)),
            2 => kubesim::Fault::black_hole(),
            _ => kubesim::Fault::none(),
        };
        fleet.set_fault(name, fault).unwrap();
    }
    assert_eq!(post(addr, &format!("{dig}/instantiate"), "").0, 202);
    // Everything on the clusters that answer at least sometimes.
    let deadline = Instant::now() + Duration::from_secs(120);
    let answering: Vec<&String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| kind_of(*i) != 2)
        .map(|(_, n)| n)
        .collect();
    // Read through the same faults: a failed read is a read to do again.
    while !answering.iter().all(|c| {
        KINDS
            .iter()
            .all(|k| try_cluster_objects(&fleet, c, k).is_ok_and(|n| n.len() == 1))
    }) {
        assert!(
            Instant::now() < deadline,
            "the answering clusters did not get the app"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // Retrying the black holes: memory stays flat.
    let pid = server.child.id();
    let first = rss_kib(pid);
    let mut peak = first;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_secs(1));
        peak = peak.max(rss_kib(pid));
    }
    eprintln!(
        "faulty clusters: server RSS {first} KiB when the answering clusters were done, peak \
         {peak} KiB over the next 10 s of retries to {} black-holed clusters",
        CLUSTERS / 4
    );
    assert!(
        peak < first + 64 * 1024,
        "memory grew while retrying: {first} -> {peak} KiB"
    );
    assert_ne!(deployed_status(addr, dig)["deployedStatus"], "Instantiated");

    // Stop ends the retries: the context fails instead of waiting for the black holes.
    assert_eq!(post(addr, &format!("{dig}/stop"), "").0, 202);
    let deadline = Instant::now() + Duration::from_secs(60);
    while deployed_status(addr, dig)["deployedStatus"] != "InstantiateFailed" {
        assert!(
            Instant::now() < deadline,
            "stop did not end the instantiate"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Healed: terminate leaves nothing, a new instantiate converges everywhere.
    for name in &names {
        fleet.set_fault(name, kubesim::Fault::none()).unwrap();
    }
    let all: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    let none = std::collections::BTreeSet::new();
    for (op, want, done) in [
        ("terminate", &none, "Terminated"),
        ("instantiate", &all, "Instantiated"),
        ("terminate", &none, "Terminated"),
    ] {
        let (code, body) = post(addr, &format!("{dig}/{op}"), "");
        assert_eq!(code, 202, "{op}: {body}");
        wait_converged(addr, dig, &fleet, want, &[done]);
    }
    assert!(server.terminate().success());
}

/// An etcd of the test's own (Debian's `etcd`): one member or a cluster of several on loopback,
/// each of which the test kills and starts again on the same ports and data.
struct OwnEtcd {
    members: Vec<EtcdMember>,
    /// `--initial-cluster`: every member's name and peer URL.
    cluster: String,
}

struct EtcdMember {
    name: String,
    child: Child,
    dir: std::path::PathBuf,
    client: SocketAddr,
    peer: SocketAddr,
}

impl OwnEtcd {
    /// One member; `None` (the test skips) outside CI when `etcd` is not installed.
    fn start(dir: &std::path::Path, test: &str) -> Option<Self> {
        Self::cluster(dir, test, 1)
    }

    /// A cluster of `n` members under `dir`, each started and taking connections, the cluster
    /// with a leader; `None` as [`Self::start`].
    fn cluster(dir: &std::path::Path, test: &str, n: usize) -> Option<Self> {
        if Command::new("etcd").arg("--version").output().is_err() {
            assert!(std::env::var("CI").is_err(), "etcd must be installed in CI");
            eprintln!("SKIPPED {test}: no etcd binary");
            return None;
        }
        let members: Vec<EtcdMember> = (0..n)
            .map(|i| EtcdMember {
                name: format!("emco-test-{i}"),
                child: Command::new("true").spawn().unwrap(),
                dir: dir.join(format!("member-{i}")),
                client: free_addr(),
                peer: free_addr(),
            })
            .collect();
        let cluster = members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let mut etcd = Self { members, cluster };
        for i in 0..n {
            etcd.spawn(i);
        }
        for i in 0..n {
            etcd.wait_listening(i);
        }
        etcd.leader();
        Some(etcd)
    }

    /// Every member's client URL, comma-separated (`--etcd-endpoints`).
    fn url(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("http://{}", m.client))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize) {
        let cluster = self.cluster.clone();
        let m = &mut self.members[i];
        let _ = m.child.wait();
        let (client, peer) = (format!("http://{}", m.client), format!("http://{}", m.peer));
        std::fs::create_dir_all(&m.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(m.dir.join("etcd.log"))
            .unwrap();
        m.child = Command::new("etcd")
            .args(["--name", &m.name, "--data-dir"])
            .arg(m.dir.join("data"))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &cluster])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
    }

    fn wait_listening(&self, i: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(self.members[i].client).is_err() {
            assert!(Instant::now() < deadline, "etcd member {i} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts member `i` (again) and waits until it takes connections.
    fn restart(&mut self, i: usize) {
        self.spawn(i);
        self.wait_listening(i);
    }

    /// SIGKILLs member `i`.
    fn kill(&mut self, i: usize) {
        let m = &mut self.members[i];
        m.child.kill().unwrap();
        m.child.wait().unwrap();
    }

    /// The member that leads, as the live members report it (`etcdctl endpoint status`);
    /// waits up to 30 s for an election.
    fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut ids = Vec::new();
            let mut leader = None;
            for m in &self.members {
                let out = Command::new("etcdctl")
                    .env("ETCDCTL_API", "3")
                    .args(["--endpoints", &format!("http://{}", m.client)])
                    .args([
                        "--command-timeout",
                        "2s",
                        "endpoint",
                        "status",
                        "-w",
                        "json",
                    ])
                    .output();
                let status: Option<serde_json::Value> = out
                    .ok()
                    .filter(|o| o.status.success())
                    .and_then(|o| serde_json::from_slice(&o.stdout).ok());
                let status = status.as_ref().map(|s| &s[0]["Status"]);
                ids.push(status.and_then(|s| s["header"]["member_id"].as_u64()));
                if let Some(l) = status
                    .and_then(|s| s["leader"].as_u64())
                    .filter(|l| *l != 0)
                {
                    leader = Some(l);
                }
            }
            if let Some(i) = leader.and_then(|l| ids.iter().position(|id| *id == Some(l))) {
                return i;
            }
            assert!(Instant::now() < deadline, "no etcd leader: {ids:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for OwnEtcd {
    fn drop(&mut self) {
        for m in &mut self.members {
            let _ = m.child.kill();
            let _ = m.child.wait();
        }
    }
}

/// A server whose AppContexts are in `etcd` (rsync backing off 1 s at most), the edge fleet
/// onboarded and every cluster 60 ms slow, so that a fault lands in the middle of an operation;
/// the group's path.
fn on_etcd(
    work: &std::path::Path,
    etcd: &OwnEtcd,
    fleet: &kubesim::Fleet,
) -> (Server, &'static str) {
    let url = etcd.url();
    let flags = [
        "--context-backend",
        "etcd",
        "--etcd-endpoints",
        &url,
        "--rsync-max-backoff-seconds",
        "1",
    ];
    let server = Server::start_with(&work.join("data"), free_addr(), free_addr(), &flags);
    let dig = onboard_edge_fleet(server.addr, fleet, work);
    for name in fleet.cluster_names() {
        fleet.set_fault(&name, kubesim::Fault::latency(60)).unwrap();
    }
    (server, dig)
}

/// Store faults: the AppContext store's etcd killed in the middle of an instantiate, an update
/// and a terminate, and started again a few seconds later. Meanwhile the server answers status
/// queries with 503 (never 500) and stays up; once etcd is back every step converges exactly.
#[test]
fn an_etcd_restart_mid_operation_loses_nothing() {
    const CLUSTERS: usize = 8;
    let work = tempfile::tempdir().unwrap();
    let Some(mut etcd) = OwnEtcd::start(
        &work.path().join("etcd"),
        "an_etcd_restart_mid_operation_loses_nothing",
    ) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let (mut server, dig) = on_etcd(work.path(), &etcd, &fleet);
    let addr = server.addr;
    let (all, half) = edge_and_half(&fleet);
    let none = std::collections::BTreeSet::new();
    let steps: [Step; 3] = [
        ("instantiate", None, &all, &["Instantiated"]),
        ("update", Some("half"), &half, &["Instantiated", "Updated"]),
        ("terminate", None, &none, &["Terminated"]),
    ];
    for (op, label, want, done) in steps {
        begin_step(addr, dig, op, label);
        std::thread::sleep(Duration::from_millis(300));
        etcd.kill(0);
        // While etcd is away: 503 with a message, the process up.
        let (code, body) = request(addr, "GET", &format!("{dig}/status"), "").unwrap();
        assert_eq!(code, 503, "{op} without etcd: {body}");
        std::thread::sleep(Duration::from_secs(3));
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "the server exited"
        );
        etcd.restart(0);
        wait_converged(addr, dig, &fleet, want, done);
    }
    assert!(server.child.try_wait().unwrap().is_none());
    server.signal_term();
    assert!(server.wait_exit().success());
}

/// A three-member etcd cluster on loopback as the AppContext store: a follower killed in the
/// middle of an instantiate and the leader killed in the middle of an update change nothing the
/// API shows (status answers 200, every step converges exactly); two members killed in the
/// middle of a terminate leave no quorum: 503s with a message (never 500, the process up) until
/// one is back, then the terminate converges exactly.
#[test]
fn a_three_member_etcd_rides_out_losing_members() {
    const CLUSTERS: usize = 8;
    let test = "a_three_member_etcd_rides_out_losing_members";
    let work = tempfile::tempdir().unwrap();
    let Some(mut etcd) = OwnEtcd::cluster(&work.path().join("etcd"), test, 3) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let (mut server, dig) = on_etcd(work.path(), &etcd, &fleet);
    let addr = server.addr;
    let (all, half) = edge_and_half(&fleet);
    let status = || request(addr, "GET", &format!("{dig}/status"), "").unwrap();

    // One member of three: a follower, then the leader.
    let steps: [(Step, bool); 2] = [
        (("instantiate", None, &all, &["Instantiated"]), false),
        (
            ("update", Some("half"), &half, &["Instantiated", "Updated"]),
            true,
        ),
    ];
    for ((op, label, want, done), the_leader) in steps {
        begin_step(addr, dig, op, label);
        std::thread::sleep(Duration::from_millis(300));
        let leader = etcd.leader();
        let killed = if the_leader { leader } else { (leader + 1) % 3 };
        etcd.kill(killed);
        let (code, body) = status();
        assert_eq!(
            code, 200,
            "{op}, member {killed} killed (leader {leader}): {body}"
        );
        wait_converged(addr, dig, &fleet, want, done);
        etcd.restart(killed);
        etcd.leader();
    }

    // Two of three: no quorum until one is back.
    begin_step(addr, dig, "terminate", None);
    std::thread::sleep(Duration::from_millis(300));
    let leader = etcd.leader();
    let other = (leader + 1) % 3;
    etcd.kill(leader);
    etcd.kill(other);
    let (code, body) = status();
    assert_eq!(code, 503, "terminate without quorum: {body}");
    assert!(!body.trim().is_empty(), "a 503 says why");
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
    etcd.restart(other);
    let none = std::collections::BTreeSet::new();
    wait_converged(addr, dig, &fleet, &none, &["Terminated"]);
    etcd.restart(leader);
    server.signal_term();
    assert!(server.wait_exit().success());
}

/// nx-27017 of the test's own (the MongoDB wire server the test command installs in `.venv`),
/// which the test kills and starts again on the same port and data.
struct OwnMongo {
    child: Child,
    bin: std::path::PathBuf,
    dir: std::path::PathBuf,
    addr: SocketAddr,
}

impl OwnMongo {
    /// `None` (the test skips) outside CI when `.venv` has no nx-27017.
    fn start(dir: &std::path::Path, test: &str) -> Option<Self> {
        let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/nx-27017");
        if !bin.exists() {
            assert!(
                std::env::var("CI").is_err(),
                "nx-27017 must be installed in CI"
            );
            eprintln!("SKIPPED {test}: no {}", bin.display());
            return None;
        }
        let mut mongo = Self {
            child: Command::new("true").spawn().unwrap(),
            bin,
            dir: dir.to_owned(),
            addr: free_addr(),
        };
        mongo.restart();
        Some(mongo)
    }

    fn uri(&self) -> String {
        format!("mongodb://{}", self.addr)
    }

    /// Starts it (again) and waits until it takes connections.
    fn restart(&mut self) {
        let _ = self.child.wait();
        std::fs::create_dir_all(&self.dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("stdout.log"))
            .unwrap();
        self.child = Command::new(&self.bin)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &self.addr.port().to_string(),
            ])
            .arg("--data-dir")
            .arg(self.dir.join("data"))
            .arg("--log-file")
            .arg(self.dir.join("nx.log"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(self.addr).is_err() {
            assert!(Instant::now() < deadline, "nx-27017 did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILLs it.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for OwnMongo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Store faults: the resource store's MongoDB wire server killed while projects are being
/// created one after another (started again 8 s later), and in the middle of an instantiate (3 s).
/// Every request is answered: 201, or 503 with a message within the store's bounded wait (never
/// a 500, never a hang), the process stays up; afterwards every acknowledged project is there
/// and the instantiate converges exactly.
#[test]
fn a_mongo_restart_mid_onboarding_and_deployment_loses_nothing() {
    const CLUSTERS: usize = 6;
    let test = "a_mongo_restart_mid_onboarding_and_deployment_loses_nothing";
    let work = tempfile::tempdir().unwrap();
    let Some(mongo) = OwnMongo::start(&work.path().join("mongo"), test) else {
        return;
    };
    let mongo = Arc::new(Mutex::new(mongo));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let (addr, grpc) = (free_addr(), free_addr());
    let uri = mongo.lock().unwrap().uri();
    let flags = [
        "--backend",
        "mongo",
        "--mongo-uri",
        &uri,
        "--rsync-max-backoff-seconds",
        "1",
    ];
    let mut server = Server::start_with(&work.path().join("data"), addr, grpc, &flags);

    // Onboarding: MongoDB goes away 1 s into a stream of creates and is back 8 s later.
    let outage = {
        let mongo = Arc::clone(&mongo);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            mongo.lock().unwrap().kill();
            // Longer than the store's 5 s wait for a server: requests meanwhile are refused.
            std::thread::sleep(Duration::from_secs(8));
            mongo.lock().unwrap().restart();
        })
    };
    let (mut acknowledged, mut refused, mut after) = (Vec::new(), 0, 0);
    let began = Instant::now();
    for i in 0.. {
        let name = format!("p-{i}");
        let body = format!(r#"{{"metadata":{{"name":"{name}"}}}}"#);
        let asked = Instant::now();
        let (code, answer) = post(addr, "/v2/projects", &body);
        assert!(
            asked.elapsed() < Duration::from_secs(15),
            "{name} took {:?}",
            asked.elapsed()
        );
        match code {
            201 if refused > 0 => after += 1,
            201 | 503 => {}
            _ => panic!("{name}: {code} {answer}"),
        }
        if code == 201 {
            acknowledged.push(name);
        } else {
            assert!(!answer.trim().is_empty(), "a 503 says why");
            refused += 1;
        }
        if after >= 10 || began.elapsed() > Duration::from_secs(90) {
            break;
        }
    }
    outage.join().unwrap();
    eprintln!(
        "{test}: {} creates acknowledged, {refused} refused with 503 while MongoDB was away",
        acknowledged.len()
    );
    assert!(refused > 0, "MongoDB's outage refused nothing");
    assert!(after >= 10, "nothing created once MongoDB was back");
    for name in &acknowledged {
        let (code, body) = request(addr, "GET", &format!("/v2/projects/{name}"), "").unwrap();
        assert_eq!(code, 200, "acknowledged {name} is lost: {body}");
    }

    // Deployment: MongoDB goes away in the middle of an instantiate.
    let dig = onboard_edge_fleet(addr, &fleet, work.path());
    for name in fleet.cluster_names() {
        fleet.set_fault(&name, kubesim::Fault::latency(60)).unwrap();
    }
    let (all, _) = edge_and_half(&fleet);
    begin_step(addr, dig, "instantiate", None);
    std::thread::sleep(Duration::from_millis(300));
    mongo.lock().unwrap().kill();
    let (code, body) = request(addr, "GET", &format!("{dig}/status"), "").unwrap();
    assert_eq!(code, 503, "status without MongoDB: {body}");
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
    mongo.lock().unwrap().restart();
    wait_converged(addr, dig, &fleet, &all, &["Instantiated"]);
    server.signal_term();
    assert!(server.wait_exit().success());
}

/// The body of a GET of `path` as a file (`Accept: application/octet-stream`); panics unless
/// 200.
fn download(addr: SocketAddr, path: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/octet-stream\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&out[..split]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    let mut body = &out[split + 4..];
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_vec();
    }
    // Chunked: hex size, CRLF, data, CRLF; a zero size ends it.
    let mut whole = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line_end]).unwrap(), 16).unwrap();
        if size == 0 {
            return whole;
        }
        let start = line_end + 2;
        whole.extend_from_slice(&body[start..start + size]);
        body = &body[start + size + 2..];
    }
}

/// A chart archive `name` with an incompressible file of `size` bytes beside its Chart.yaml.
fn bulky_chart(name: &str, size: usize, moments: &mut Moments) -> Vec<u8> {
    let mut archive = tar::Builder::new(flate2::write::GzEncoder::new(
        Vec::new(),
        flate2::Compression::fast(),
    ));
    let chart = format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n");
    let filler: Vec<u8> = (0..size).map(|_| moments.below(256) as u8).collect();
    for (path, data) in [
        (format!("{name}/Chart.yaml"), chart.as_bytes()),
        (format!("{name}/files/filler.bin"), filler.as_slice()),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        archive.append_data(&mut header, path, data).unwrap();
    }
    archive.into_inner().unwrap().finish().unwrap()
}

/// Store faults: the embedded store's disk fills up (the server runs under a file size limit).
/// Writes are refused with 503 and a message naming the store, never a 500 or a crash; after a
/// restart with room again every acknowledged object is there, intact, and writes work.
#[test]
fn a_full_disk_refuses_writes_and_loses_nothing() {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let addr = free_addr();
    let grpc = free_addr();
    // A first start makes the store; its size plus a little is the room the second start gets.
    let server = Server::start_with(&data, addr, grpc, &[]);
    let created = |(status, body): (u16, String)| assert!(status == 201, "{status} {body}");
    created(post(addr, "/v2/projects", r#"{"metadata":{"name":"p"}}"#));
    created(post(
        addr,
        "/v2/projects/p/composite-apps",
        r#"{"metadata":{"name":"ca"},"spec":{"compositeAppVersion":"v1"}}"#,
    ));
    assert!(server.terminate().success());
    let size = std::fs::metadata(data.join("emco.redb")).unwrap().len();
    let blocks = (size + 2 * 1024 * 1024) / 512;
    // Writes past the limit fail with EFBIG (SIGXFSZ ignored, as a full disk fails them).
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_emco-server"))
        .args([
            "--listen",
            &addr.to_string(),
            "--grpc-listen",
            &grpc.to_string(),
        ])
        .arg("--data-dir")
        .arg(&data)
        .stdout(server_log())
        .stderr(server_log())
        .spawn()
        .unwrap();
    let mut server = Server { child, addr };
    let deadline = Instant::now() + Duration::from_secs(60);
    while request(addr, "GET", "/healthz", "").is_err() {
        assert!(Instant::now() < deadline, "emco-server did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut moments = Moments(7);
    let (mut stored, mut refused) = (Vec::new(), None);
    for i in 0..200 {
        let name = format!("app{i}");
        let chart = bulky_chart(&name, 64 * 1024, &mut moments);
        let (status, body) = post_form(
            addr,
            "/v2/projects/p/composite-apps/ca/v1/apps",
            &format!(r#"{{"metadata":{{"name":"{name}"}}}}"#),
            &[("file", "chart.tgz", &chart)],
        );
        match status {
            201 => stored.push((name, chart)),
            503 => {
                refused = Some(body);
                break;
            }
            _ => panic!("{name}: {status} {body}"),
        }
    }
    let refused = refused.expect("the store never filled up");
    assert!(
        refused.contains("embedded store") && refused.contains("free disk space"),
        "{refused}"
    );
    assert!(!stored.is_empty(), "nothing fit before the disk was full");
    // Reads still work, and later writes are refused the same way.
    let (status, _) = request(addr, "GET", "/v2/projects/p", "").unwrap();
    assert!(status == 200 || status == 503, "{status}");
    let (status, body) = post(addr, "/v2/projects", r#"{"metadata":{"name":"q"}}"#);
    assert!(status == 201 || status == 503, "{status} {body}");
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server exited"
    );
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    // Room again: every acknowledged app is there, byte for byte, and writes work.
    let server = Server::start_with(&data, addr, grpc, &[]);
    for (name, chart) in &stored {
        let path = format!("/v2/projects/p/composite-apps/ca/v1/apps/{name}");
        assert_eq!(&download(addr, &path), chart, "{name}");
    }
    created(post(
        addr,
        "/v2/projects",
        r#"{"metadata":{"name":"after"}}"#,
    ));
    eprintln!(
        "full disk: {} apps of 64 KiB stored before the store refused a write with 503 ({}); all \
         intact after the restart",
        stored.len(),
        refused.trim()
    );
    assert!(server.terminate().success());
}

/// The rollout of `dig` as `GET {dig}/rollout` answers it once `pred` holds (a server being
/// restarted is waited for).
fn wait_rollout(
    addr: SocketAddr,
    dig: &str,
    what: &str,
    pred: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok((200, body)) = request(addr, "GET", &format!("{dig}/rollout"), "") {
            let run: serde_json::Value = serde_json::from_str(&body).unwrap();
            if pred(&run) {
                return run;
            }
            assert!(Instant::now() < deadline, "rollout never {what}: {run}");
        }
        assert!(Instant::now() < deadline, "rollout never {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The state of the rollout's wave `i`.
fn wave_state(run: &serde_json::Value, i: usize) -> &str {
    run["waves"][i]["state"].as_str().unwrap_or_default()
}

/// The http-server chart of the examples with its image set to `image`, packed.
fn server_chart(work: &std::path::Path, image: &str) -> Vec<u8> {
    let own = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/charts");
    let dir = work.join(format!("chart-{}", image.replace([':', '.'], "-")));
    std::fs::create_dir_all(&dir).unwrap();
    let copied = Command::new("cp")
        .arg("-r")
        .arg(own.join("http-server"))
        .arg(dir.join("http-server"))
        .status()
        .unwrap();
    assert!(copied.success());
    let values = dir.join("http-server/values.yaml");
    let text = std::fs::read_to_string(&values).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("image:") {
                format!("image: {image}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&values, text).unwrap();
    tgz(
        &dir,
        "http-server",
        &work.join(format!("{}.tgz", image.replace([':', '.'], "-"))),
    )
}

/// A rollout in waves survives SIGKILL of the server in each of its states: while a wave is
/// progressing, while it bakes (the bake still takes its whole time), while a wave waits for
/// approval (it still waits), while paused, and right after an abort started the rollback. No
/// wave is started twice (its start time is kept), every cluster ends as the rollout decided:
/// on the new image after a good rollout, on the old one after the abort.
#[test]
fn a_rollout_resumes_after_sigkill_in_every_state() {
    const CLUSTERS: usize = 6;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let work = tempfile::tempdir().unwrap();
    let (addr, grpc) = (free_addr(), free_addr());
    let data = work.path().join("data");
    let flags = ["--rsync-max-backoff-seconds", "1"];
    let mut server = Server::start_with(&data, addr, grpc, &flags);
    let dig = onboard_edge_fleet(addr, &fleet, work.path());
    let kill_and_restart = |server: &mut Server| {
        server.child.kill().unwrap(); // SIGKILL
        server.child.wait().unwrap();
        *server = Server::start_with(&data, addr, grpc, &flags);
    };
    // Waves: the first cluster, the `half` ones left, the rest.
    let policy = r#"{"metadata":{"name":"w"},"spec":{"waves":[{"count":1},{"labels":["half"]},{}],
        "gates":{"progressDeadline":"60s","bakeTime":"3s","approval":true},"onFailure":"pause"}}"#;
    assert_eq!(
        post(addr, &format!("{dig}/rollout-policies"), policy).0,
        201
    );
    assert_eq!(post(addr, &format!("{dig}/instantiate"), "").0, 202);
    // Killed while the first wave progresses (or has just started).
    kill_and_restart(&mut server);
    let run = wait_rollout(addr, dig, "baking", |r| wave_state(r, 0) == "Baking");
    let first_start = run["waves"][0]["started"].clone();
    kill_and_restart(&mut server);
    let run = wait_rollout(addr, dig, "waiting for approval", |r| {
        r["state"] == "WaitingForApproval"
    });
    assert_eq!(
        run["waves"][0]["started"], first_start,
        "the wave started again: {run}"
    );
    let (started, finished) = (
        emco_core::time::parse_rfc3339(run["waves"][0]["started"].as_str().unwrap()).unwrap(),
        emco_core::time::parse_rfc3339(run["waves"][0]["finished"].as_str().unwrap()).unwrap(),
    );
    assert!(finished - started >= 3, "the bake was cut short: {run}");
    // Killed while it waits for approval: it still waits.
    kill_and_restart(&mut server);
    std::thread::sleep(Duration::from_secs(2));
    let run = wait_rollout(addr, dig, "waiting", |_| true);
    assert_eq!(run["state"], "WaitingForApproval", "{run}");
    assert_eq!(run["current"], 1, "{run}");
    assert_eq!(post(addr, &format!("{dig}/rollout/approve"), "").0, 202);
    // Killed right after the approval.
    kill_and_restart(&mut server);
    let run = wait_rollout(addr, dig, "at the last approval", |r| {
        r["state"] == "WaitingForApproval" && r["current"] == 2
    });
    assert_eq!(wave_state(&run, 1), "Succeeded", "{run}");
    // Paused, killed, resumed.
    assert_eq!(post(addr, &format!("{dig}/rollout/pause"), "").0, 202);
    kill_and_restart(&mut server);
    let run = wait_rollout(addr, dig, "paused", |_| true);
    assert_eq!(run["state"], "Paused", "{run}");
    assert_eq!(post(addr, &format!("{dig}/rollout/resume"), "").0, 202);
    assert_eq!(post(addr, &format!("{dig}/rollout/approve"), "").0, 202);
    let run = wait_rollout(addr, dig, "succeeded", |r| r["state"] == "Succeeded");
    let states: Vec<&str> = (0..3).map(|i| wave_state(&run, i)).collect();
    assert_eq!(states, ["Succeeded"; 3], "{run}");
    let all: Vec<String> = fleet.cluster_names();
    let images = || -> Vec<String> { all.iter().map(|c| deployment_image(&fleet, c)).collect() };
    assert_eq!(images(), vec!["nginx:1.27-alpine"; CLUSTERS]);

    // An update to a version that never gets ready: the canary wave fails and pauses; the
    // server killed while paused; an abort rolls back, and the server killed right after it.
    let policy = r#"{"metadata":{"name":"w"},"spec":{"waves":[{"count":1},{"labels":["half"]},{}],
        "gates":{"progressDeadline":"4s"},"onFailure":"pause"}}"#;
    update_to_a_bad_version(addr, work.path(), dig, policy);
    let run = wait_rollout(addr, dig, "paused by the failed wave", |r| {
        r["state"] == "Paused" && wave_state(r, 0) == "Failed"
    });
    let canary = run["waves"][0]["clusters"][0].as_str().unwrap().to_owned();
    assert_eq!(
        run["waves"][0]["failures"][0]["cluster"],
        canary.as_str(),
        "{run}"
    );
    kill_and_restart(&mut server);
    let run = wait_rollout(addr, dig, "still paused", |_| true);
    assert_eq!(run["state"], "Paused", "{run}");
    assert_eq!(post(addr, &format!("{dig}/rollout/abort"), "").0, 202);
    kill_and_restart(&mut server);
    let run = wait_rollout(addr, dig, "rolled back", |r| r["state"] == "RolledBack");
    assert!(run["reason"].as_str().unwrap().contains("aborted"), "{run}");
    // Every cluster runs the old image again.
    let deadline = Instant::now() + Duration::from_secs(60);
    while images() != vec!["nginx:1.27-alpine"; CLUSTERS] {
        assert!(
            Instant::now() < deadline,
            "not all back on the old image: {:?}",
            images()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(server.terminate().success());
}

/// Through `addr`: the http-server app's chart replaced by one deploying `image`.
fn replace_chart(addr: SocketAddr, work: &std::path::Path, image: &str) {
    let chart = server_chart(work, image);
    let (code, body) = send_form(
        addr,
        "PUT",
        "/v2/projects/p/composite-apps/ca/v1/apps/http-server",
        r#"{"metadata":{"name":"http-server"}}"#,
        &[("file", "http-server.tgz", &chart)],
    );
    assert!(code == 200 || code == 201, "{code} {body}");
}

/// Through `addr`: the http-server app's chart replaced by one whose image never gets ready,
/// the rollout policy `w` of `dig` set to `policy`, and an update of `dig` asked for.
fn update_to_a_bad_version(addr: SocketAddr, work: &std::path::Path, dig: &str, policy: &str) {
    replace_chart(addr, work, "nginx:1.28-never-ready");
    let (code, body) = request(addr, "PUT", &format!("{dig}/rollout-policies/w"), policy).unwrap();
    assert!(code == 200 || code == 201, "{code} {body}");
    let (code, body) = post(addr, &format!("{dig}/update"), "");
    assert_eq!(code, 202, "{body}");
}

/// The image of the http-server Deployment on cluster `name` (empty when it is absent).
fn deployment_image(fleet: &kubesim::Fleet, name: &str) -> String {
    let server = fleet.server_url(name).unwrap();
    let addr: SocketAddr = server.trim_start_matches("http://").parse().unwrap();
    let kubeconfig = fleet.kubeconfig(name).unwrap();
    let token = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap();
    let path = "/apis/apps/v1/namespaces/default/deployments/http-server";
    let auth = format!("Authorization: Bearer {token}\r\n");
    let (code, body) = request_with(addr, "GET", path, &auth, b"").unwrap();
    if code != 200 {
        return String::new();
    }
    let d: serde_json::Value = serde_json::from_str(&body).unwrap();
    d.pointer("/spec/template/spec/containers/0/image")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Three replicas on one etcd and one MongoDB wire server drive one group's rollouts. The
/// instantiate rolls out through replica a, which is killed (SIGKILL) while its second wave
/// bakes: another replica goes on from there (the wave keeps its start, the bake its whole
/// time) and the rollout succeeds. A bad update then rolls out through b, killed while its
/// canary wave waits for readiness that never comes: c fails the wave at the deadline and
/// rolls every changed cluster back by itself. A StatusNotify client of c sees both rollouts
/// go by, whichever replica drove them.
#[test]
fn replicas_take_a_killed_ones_rollout_over() {
    const CLUSTERS: usize = 6;
    const GOOD: &str = "nginx:1.27-alpine";
    let Some(shared) = SharedStores::new("replicas_take_a_killed_ones_rollout_over") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, CLUSTERS);
    let work = tempfile::tempdir().unwrap();
    let grpc = [free_addr(), free_addr(), free_addr()];
    let mut replicas: Vec<Server> = ["a", "b", "c"]
        .iter()
        .zip(grpc)
        .map(|(id, grpc)| {
            let mut flags = shared.flags();
            flags.extend(["--replica-id", id, "--replica-ttl-seconds", "2"]);
            flags.extend(["--rsync-max-backoff-seconds", "1"]);
            Server::start_with(&work.path().join(id), free_addr(), grpc, &flags)
        })
        .collect();
    let (a, b, c) = (replicas[0].addr, replicas[1].addr, replicas[2].addr);
    let dig = onboard_edge_fleet(a, &fleet, work.path());
    let notified = rt.block_on(rollout_notifications(grpc[2]));
    let kill = |server: &mut Server| {
        server.child.kill().unwrap(); // SIGKILL
        server.child.wait().unwrap();
    };

    let policy = r#"{"metadata":{"name":"w"},"spec":{"waves":[{"count":1},{"labels":["half"]},{}],
        "gates":{"progressDeadline":"60s","bakeTime":"4s"},"onFailure":"rollback"}}"#;
    assert_eq!(post(a, &format!("{dig}/rollout-policies"), policy).0, 201);
    assert_eq!(post(a, &format!("{dig}/instantiate"), "").0, 202);
    let run = wait_rollout(b, dig, "baking its second wave", |r| {
        wave_state(r, 1) == "Baking"
    });
    let second_start = run["waves"][1]["started"].clone();
    kill(&mut replicas[0]);
    let run = wait_rollout(c, dig, "succeeded after the takeover", |r| {
        r["state"] == "Succeeded"
    });
    let states: Vec<&str> = (0..3).map(|i| wave_state(&run, i)).collect();
    assert_eq!(states, ["Succeeded"; 3], "{run}");
    assert_eq!(
        run["waves"][1]["started"], second_start,
        "the wave started again: {run}"
    );
    let wave = &run["waves"][1];
    let (started, finished) = (
        emco_core::time::parse_rfc3339(wave["started"].as_str().unwrap()).unwrap(),
        emco_core::time::parse_rfc3339(wave["finished"].as_str().unwrap()).unwrap(),
    );
    assert!(finished - started >= 4, "the bake was cut short: {run}");
    let all = fleet.cluster_names();
    let images = || -> Vec<String> { all.iter().map(|n| deployment_image(&fleet, n)).collect() };
    assert_eq!(images(), vec![GOOD; CLUSTERS]);
    // Changes are let settle before they are sent: the end comes a moment later.
    let saw = |state: &str, waves: &[&str]| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let seen = notified.lock().unwrap().clone();
            if seen.iter().any(|(s, w)| s == state && w == waves) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "never notified {state} {waves:?}: {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    saw("Succeeded", &["Succeeded"; 3]);

    // A version that never gets ready, rolled out through b; b killed in the canary wave.
    let policy = policy.replace(r#""60s","bakeTime":"4s""#, r#""6s""#);
    update_to_a_bad_version(b, work.path(), dig, &policy);
    let run = wait_rollout(b, dig, "progressing in the canary wave", |r| {
        r["state"] == "Progressing" && wave_state(r, 0) == "Progressing"
    });
    let canary = run["waves"][0]["clusters"][0].as_str().unwrap().to_owned();
    kill(&mut replicas[1]);
    let run = wait_rollout(c, dig, "rolled back by c", |r| r["state"] == "RolledBack");
    let states: Vec<&str> = (0..3).map(|i| wave_state(&run, i)).collect();
    assert_eq!(states, ["RolledBack", "Pending", "Pending"], "{run}");
    assert_eq!(
        run["waves"][0]["failures"][0]["cluster"],
        canary.as_str(),
        "{run}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while images() != vec![GOOD; CLUSTERS] {
        assert!(
            Instant::now() < deadline,
            "not all back on the old image: {:?}",
            images()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // What c's StatusNotify client saw: the waves of both rollouts as they went.
    saw("Progressing", &["Succeeded", "Baking", "Pending"]);
    saw("Progressing", &["Progressing", "Pending", "Pending"]);
    saw("RolledBack", &["RolledBack", "Pending", "Pending"]);
    drop(replicas);
    let contexts = rt.block_on(async { shared.etcd().await.delete_prefix("/").await.unwrap() });
    assert!(contexts > 0);
}

/// The rollout states (the rollout's and its waves') a StatusNotify client of the server at
/// `grpc` is sent for the group `p/ca/v1/dig`, gathered in the background.
async fn rollout_notifications(
    grpc: SocketAddr,
) -> Arc<std::sync::Mutex<Vec<(String, Vec<String>)>>> {
    use emco_proto::status_notify_client::StatusNotifyClient;
    use emco_proto::status_registration::Key;
    use emco_proto::{DigKey, StatusOutput, StatusRegistration, StatusValue};
    let mut client = StatusNotifyClient::new(channel(grpc).await);
    let registration = StatusRegistration {
        client_id: "rollouts".into(),
        key: Some(Key::DigKey(DigKey {
            project: "p".into(),
            composite_app: "ca".into(),
            composite_app_version: "v1".into(),
            deployment_intent_group: "dig".into(),
        })),
        status_type: StatusValue::Ready as i32,
        output: StatusOutput::Summary as i32,
        ..StatusRegistration::default()
    };
    let mut stream = client
        .status_register(registration)
        .await
        .unwrap()
        .into_inner();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok(Some(n)) = stream.message().await {
            if let Some(r) = n.rollout {
                let waves = r.waves.into_iter().map(|w| w.state).collect();
                into.lock().unwrap().push((r.state, waves));
            }
        }
    });
    seen
}

/// Starts an emco-server expected to refuse to start; answers its exit status and what it
/// logged.
fn refused_start(work: &std::path::Path, flags: &[&str]) -> (std::process::ExitStatus, String) {
    std::fs::create_dir_all(work).unwrap();
    let log = work.join("refused.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_emco-server"))
        .arg("--listen")
        .arg(free_addr().to_string())
        .arg("--grpc-listen")
        .arg(free_addr().to_string())
        .arg("--data-dir")
        .arg(work)
        .args(flags)
        .env("EMCO_LOG_FORMAT", "text")
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file))
        .spawn()
        .unwrap();
    // A server that starts instead runs until killed: that is the failure.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the server started: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

/// Two servers without `--replica-id` on one etcd would both run every deployment, as would
/// one without it beside replicas: a second is refused at start, naming the live one; one
/// stopped cleanly or killed does not hold the next start (#44).
#[test]
fn a_second_server_on_shared_stores_needs_a_replica_id() {
    let Some(shared) = SharedStores::new("a_second_server_on_shared_stores_needs_a_replica_id")
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let mut flags = shared.flags();
    // Heartbeats every second.
    flags.extend(["--replica-ttl-seconds", "3"]);
    let first = Server::start_with(&work.path().join("a"), free_addr(), free_addr(), &flags);

    let (status, logged) = refused_start(&work.path().join("b"), &flags);
    assert!(!status.success(), "{logged}");
    assert!(
        logged.contains("an emco-server without --replica-id (pid ")
            && logged.contains(
                "a server without --replica-id beside it would run the same deployments twice"
            ),
        "{logged}"
    );
    let mut replica = flags.clone();
    replica.extend(["--replica-id", "r1"]);
    let (status, logged) = refused_start(&work.path().join("r1"), &replica);
    assert!(!status.success(), "{logged}");
    assert!(logged.contains("as replica"), "{logged}");

    // Stopped cleanly, it leaves no heartbeat: the next one starts at once.
    assert!(first.terminate().success());
    let second = Server::start_with(&work.path().join("b"), free_addr(), free_addr(), &flags);
    // Killed, it leaves one that no longer changes: the next one starts after a look.
    drop(second);
    let third = Server::start_with(&work.path().join("c"), free_addr(), free_addr(), &flags);
    assert!(third.terminate().success());

    // Replicas run side by side, and a server without a replica id is refused beside them.
    let r1 = Server::start_with(&work.path().join("r1"), free_addr(), free_addr(), &replica);
    let mut other = flags.clone();
    other.extend(["--replica-id", "r2"]);
    let r2 = Server::start_with(&work.path().join("r2"), free_addr(), free_addr(), &other);
    let (status, logged) = refused_start(&work.path().join("d"), &flags);
    assert!(!status.success(), "{logged}");
    assert!(logged.contains("replica"), "{logged}");
    drop((r1, r2));
}

/// A number from the environment, or `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What a soak samples of one moment: per replica resident memory (KiB), open descriptors and
/// live async tasks, summed over the replicas; and the keys of the AppContext store.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at: Duration,
    rss_kib: u64,
    fds: u64,
    tasks: u64,
    keys: u64,
}

/// A figure of a soak's report: its name, how a sample gives it, and how much it may grow
/// beside half again.
type Figure = (&'static str, fn(&Sample) -> u64, u64);

/// A soak's samples, one every `every` from `began`.
struct Sampler {
    began: Instant,
    every: Duration,
    next: Instant,
    samples: Vec<Sample>,
}

impl Sampler {
    /// A sample of `replicas` and the store's `keys` now.
    fn take(&mut self, replicas: &[Server], keys: u64) {
        let mut s = Sample {
            at: self.began.elapsed(),
            keys,
            ..Sample::default()
        };
        for r in replicas {
            let pid = r.child.id();
            s.rss_kib += rss_kib(pid);
            s.fds += std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
            let metrics = request(r.addr, "GET", "/metrics", "").map(|(_, m)| m);
            s.tasks += metrics
                .ok()
                .and_then(|m| figure(&m, "emco_runtime_alive_tasks"))
                .unwrap_or(0);
        }
        self.samples.push(s);
        self.next += self.every;
    }
}

/// One `name value` line of a Prometheus text.
fn figure(metrics: &str, name: &str) -> Option<u64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// The soak: replicas a, b and c on shared etcd and MongoDB deploy the http-server example to
/// `EMCO_SOAK_CLUSTERS` kubesim clusters; then for `EMCO_SOAK_SECONDS` an update (a new image)
/// every `EMCO_SOAK_UPDATE_SECONDS` through the replicas in turn, a tenth of the clusters
/// flapping (others each period), and every `EMCO_SOAK_KILL_SECONDS` a replica killed with
/// SIGKILL and started again; three revisions kept. Every `EMCO_SOAK_SAMPLE_SECONDS` the
/// replicas' resident memory, descriptors and async tasks and the store's keys are sampled. Checked: every update
/// converges (each object on each cluster once, the new image everywhere at the end), and after
/// the first third the figures stay flat (the last third's mean within half again the middle
/// third's, plus a little). The defaults are the short version of the test command (90 s, 24
/// clusters); `scripts/soak.sh` runs the hour at 1,000 clusters and writes the figures to
/// `EMCO_SOAK_RESULTS`.
#[test]
fn a_soak_of_updates_flaps_and_killed_replicas_leaves_nothing_growing() {
    use std::fmt::Write as _;
    let seconds = env_or("EMCO_SOAK_SECONDS", 90);
    let clusters = usize::try_from(env_or("EMCO_SOAK_CLUSTERS", 24)).unwrap();
    let update_every = Duration::from_secs(env_or("EMCO_SOAK_UPDATE_SECONDS", 15));
    let kill_every = Duration::from_secs(env_or("EMCO_SOAK_KILL_SECONDS", 40));
    let sample_every = Duration::from_secs(env_or("EMCO_SOAK_SAMPLE_SECONDS", 2));
    let Some(shared) =
        SharedStores::new("a_soak_of_updates_flaps_and_killed_replicas_leaves_nothing_growing")
    else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fleet = plain_fleet(&rt, clusters);
    let work = tempfile::tempdir().unwrap();
    let store = rt.block_on(shared.etcd());
    let start = |id: &str| {
        let mut flags = shared.flags();
        flags.extend(["--replica-id", id, "--replica-ttl-seconds", "3"]);
        flags.extend(["--rsync-max-backoff-seconds", "2"]);
        // Each update keeps a whole copy of the deployment: three revisions are kept.
        flags.extend(["--revision-history-limit", "3"]);
        Server::start_with(&work.path().join(id), free_addr(), free_addr(), &flags)
    };
    let ids = ["a", "b", "c"];
    let mut replicas: Vec<Server> = ids.iter().map(|id| start(id)).collect();
    let dig = onboard_edge_fleet(replicas[0].addr, &fleet, work.path());
    let objects = (KINDS.len() * clusters) as u64;
    let names = fleet.cluster_names();

    let began = Instant::now();
    let mut sampler = Sampler {
        began,
        every: sample_every,
        next: began,
        samples: Vec::new(),
    };
    let mut tick = |replicas: &[Server], sampler: &mut Sampler| {
        if Instant::now() >= sampler.next {
            let keys = rt.block_on(store.list_all("/", true)).unwrap().len() as u64;
            sampler.take(replicas, keys);
        }
    };
    // Waits until the group is deployed with every object Applied, sampling meanwhile.
    let converge = |replicas: &[Server],
                    sampler: &mut Sampler,
                    tick: &mut dyn FnMut(&[Server], &mut Sampler),
                    what: &str| {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            tick(replicas, sampler);
            let status = deployed_status(replicas[0].addr, dig);
            let state = status["deployedStatus"].as_str().unwrap_or_default();
            if matches!(state, "Instantiated" | "Updated") && applied(&status) == objects {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what} did not converge: {status}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    };

    assert_eq!(
        post(replicas[0].addr, &format!("{dig}/instantiate"), "").0,
        202
    );
    converge(&replicas, &mut sampler, &mut tick, "the instantiate");
    let mut updates: Vec<Duration> = Vec::new();
    let (mut kills, mut image) = (0, String::from("nginx:1.27"));
    let mut flapping: Vec<String> = Vec::new();
    let mut next_kill = began + kill_every;
    while began.elapsed() < Duration::from_secs(seconds) {
        let round = updates.len();
        // Other clusters flap each period.
        for name in flapping.drain(..) {
            fleet.set_fault(&name, kubesim::Fault::none()).unwrap();
        }
        for (i, name) in names.iter().enumerate() {
            if (i + round).is_multiple_of(10) {
                let flap = kubesim::Fault::flapping(update_every / 6);
                fleet.set_fault(name, flap).unwrap();
                flapping.push(name.clone());
            }
        }
        let period = Instant::now();
        image = format!("nginx:1.27-soak{round}");
        let via = replicas[round % replicas.len()].addr;
        replace_chart(via, work.path(), &image);
        let (code, body) = post(via, &format!("{dig}/update"), "");
        assert_eq!(code, 202, "update {round}: {body}");
        // A replica killed in the middle of the update, and started again.
        if Instant::now() >= next_kill {
            let i = kills % replicas.len();
            let mut killed = replicas.remove(i);
            killed.child.kill().unwrap(); // SIGKILL
            killed.child.wait().unwrap();
            drop(killed);
            replicas.insert(i, start(ids[i]));
            kills += 1;
            next_kill += kill_every;
        }
        converge(
            &replicas,
            &mut sampler,
            &mut tick,
            &format!("update {round}"),
        );
        updates.push(period.elapsed());
        while period.elapsed() < update_every {
            tick(&replicas, &mut sampler);
            std::thread::sleep(Duration::from_millis(250));
        }
    }
    for name in flapping.drain(..) {
        fleet.set_fault(&name, kubesim::Fault::none()).unwrap();
    }
    // Every cluster holds each object once, with the last image.
    for name in &names {
        for kind in KINDS {
            assert_eq!(
                cluster_objects(&fleet, name, kind).len(),
                1,
                "{name} {kind}"
            );
        }
        assert_eq!(deployment_image(&fleet, name), image, "{name}");
    }

    // Flat after the first third: the last third's mean against the middle third's.
    let samples = sampler.samples;
    let third = |k: usize| -> Vec<Sample> {
        let span = began.elapsed() / 3;
        samples
            .iter()
            .filter(|s| {
                s.at >= span * u32::try_from(k).unwrap()
                    && s.at < span * u32::try_from(k + 1).unwrap()
            })
            .copied()
            .collect()
    };
    let mean = |part: &[Sample], f: fn(&Sample) -> u64| -> u64 {
        part.iter().map(f).sum::<u64>() / part.len().max(1) as u64
    };
    let (middle, last) = (third(1), third(2));
    let mut report = format!(
        "# Soak: {clusters} clusters, 3 replicas, {seconds} s\n\n\
         {} updates (one every {update_every:?}), {kills} replicas killed (SIGKILL, every \
         {kill_every:?}), a tenth of the clusters flapping each period; {} samples.\n\n\
         Update to converged: median {:?}, worst {:?}.\n\n\
         | figure (sum of the replicas) | first third | middle third | last third |\n|---|---|---|---|\n",
        updates.len(),
        samples.len(),
        {
            let mut u = updates.clone();
            u.sort();
            u.get(u.len() / 2).copied().unwrap_or_default()
        },
        updates.iter().max().copied().unwrap_or_default(),
    );
    let figures: [Figure; 4] = [
        ("resident memory (KiB)", |s| s.rss_kib, 64 * 1024),
        ("open descriptors", |s| s.fds, 32),
        ("async tasks", |s| s.tasks, 256),
        ("store keys", |s| s.keys, 0),
    ];
    for (name, f, _) in &figures {
        let _ = writeln!(
            report,
            "| {name} | {} | {} | {} |",
            mean(&third(0), *f),
            mean(&middle, *f),
            mean(&last, *f)
        );
    }
    eprintln!("{report}");
    if let Ok(path) = std::env::var("EMCO_SOAK_RESULTS") {
        std::fs::write(&path, &report).unwrap();
    }
    for (name, f, slack) in &figures {
        let (m, l) = (mean(&middle, *f), mean(&last, *f));
        assert!(
            l <= m * 3 / 2 + slack,
            "{name} grew: {m} in the middle third, {l} in the last\n{report}"
        );
    }
    drop(replicas);
    rt.block_on(store.delete_prefix("/")).unwrap();
}
