//! Runs the real `emco-server` binary: create over HTTP, stop with SIGTERM, restart on the same
//! data dir, read back; plus the server-level endpoints.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running server, killed on drop if the test did not stop it.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn start(data_dir: &std::path::Path, addr: SocketAddr) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_emco-server"))
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--data-dir")
            .arg(data_dir)
            .env("EMCO_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self { child, addr };
        let deadline = Instant::now() + Duration::from_secs(30);
        while request(server.addr, "GET", "/healthz", "").is_err() {
            assert!(Instant::now() < deadline, "emco-server did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
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
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// One HTTP/1.1 request; returns the status and the body.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
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

#[test]
fn server_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let addr = free_addr();
    let _server = Server::start(dir.path(), addr);
    assert_eq!(request(addr, "GET", "/readyz", "").unwrap().0, 200);
    let (status, doc) = request(addr, "GET", "/v2/openapi.yaml", "").unwrap();
    assert_eq!(status, 200);
    assert!(doc.contains("openapi: 3.0.3") && doc.contains("/v2/projects/{project}"));
    let (status, body) = request(addr, "GET", "/v2/nothing-here", "").unwrap();
    assert_eq!((status, body.trim()), (404, "no such route"));
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
}
