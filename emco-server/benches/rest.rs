//! REST create/get requests per second on the embedded (redb) store, over real HTTP/1.1
//! keep-alive connections to the in-process server.
//!
//! `cargo bench -p emco-server --bench rest`; the table is printed and written to
//! `bench-results/rest.txt` at the workspace root.

#![allow(clippy::unwrap_used)] // A benchmark fails loudly on a broken setup.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use emco_orchestrator::Orchestrator;
use emco_service::{Config, Metrics};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

const CONNECTIONS: usize = 8;
const PER_CONNECTION: usize = 500;

async fn connection(addr: SocketAddr) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

/// Runs `PER_CONNECTION` requests on each of `CONNECTIONS` connections; returns the elapsed time.
async fn phase(addr: SocketAddr, create: bool) -> Duration {
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CONNECTIONS {
        tasks.push(tokio::spawn(async move {
            let mut sender = connection(addr).await;
            for i in 0..PER_CONNECTION {
                let name = format!("p-{c}-{i}");
                let req = if create {
                    let body =
                        format!(r#"{{"metadata":{{"name":"{name}","description":"bench"}}}}"#);
                    Request::post(format!("http://{addr}/v2/projects"))
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(body)))
                } else {
                    Request::get(format!("http://{addr}/v2/projects/{name}"))
                        .body(Full::new(Bytes::new()))
                }
                .unwrap();
                let resp = sender.send_request(req).await.unwrap();
                let expected = if create { 201 } else { 200 };
                assert_eq!(resp.status().as_u16(), expected);
                resp.into_body().collect().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = runtime.block_on(async {
        let config = Config { data_dir: dir.path().to_owned(), ..Config::default() };
        let store = emco_service::open_store(&config).await.unwrap();
        let app = emco_service::app(Orchestrator::new(store), &config, Metrics::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });

        let total = CONNECTIONS * PER_CONNECTION;
        let create = phase(addr, true).await;
        let get = phase(addr, false).await;
        let mut table = String::new();
        writeln!(table, "REST on the embedded (redb) store, {CONNECTIONS} keep-alive connections, {total} requests per row").unwrap();
        writeln!(table, "{:<28} {:>10} {:>12} {:>14}", "operation", "requests", "seconds", "requests/s").unwrap();
        for (op, d) in [("POST /v2/projects (create)", create), ("GET /v2/projects/{p}", get)] {
            #[allow(clippy::cast_precision_loss)]
            let rate = total as f64 / d.as_secs_f64();
            writeln!(table, "{op:<28} {total:>10} {:>12.3} {rate:>14.0}", d.as_secs_f64()).unwrap();
        }
        table
    });
    print!("{table}");
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench-results");
    std::fs::create_dir_all(out).unwrap();
    std::fs::write(format!("{out}/rest.txt"), &table).unwrap();
}
