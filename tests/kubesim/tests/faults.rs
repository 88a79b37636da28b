//! Every fault mode, as a kube-rs client sees it.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::time::{Duration, Instant};

use common::{Sim, client_for};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kubesim::Fault;

async fn list(api: &Api<ConfigMap>) -> Result<usize, kube::Error> {
    api.list(&ListParams::default())
        .await
        .map(|l| l.items.len())
}

fn is_transport_error(e: &kube::Error) -> bool {
    !matches!(e, kube::Error::Api(_))
}

#[tokio::test]
async fn down_refuses_connections_and_recovers() {
    let sim = Sim::start(2, Duration::ZERO).await;
    let c1: Api<ConfigMap> = Api::default_namespaced(sim.client("c1").await);
    let c2: Api<ConfigMap> = Api::default_namespaced(sim.client("c2").await);
    list(&c1).await.unwrap();
    sim.fleet.set_fault("c1", Fault::down()).unwrap();
    assert_eq!(sim.fleet.fault("c1").unwrap(), Fault::down());
    // Give the accept loop a moment to close the port.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let err = list(&c1).await.unwrap_err();
    assert!(is_transport_error(&err), "{err:?}");
    let refused = std::net::TcpStream::connect(
        sim.fleet
            .server_url("c1")
            .unwrap()
            .trim_start_matches("https://"),
    );
    assert_eq!(
        refused.unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    // The neighbour is unaffected.
    list(&c2).await.unwrap();
    sim.fleet.set_fault("c1", Fault::none()).unwrap();
    let mut recovered = false;
    for _ in 0..50 {
        if list(&c1).await.is_ok() {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(recovered);
}

#[tokio::test]
async fn black_hole_times_out() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = client_for(
        &sim.fleet.kubeconfig("c1").unwrap(),
        Some(Duration::from_millis(500)),
    )
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    sim.fleet.set_fault("c1", Fault::black_hole()).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = list(&api).await.unwrap_err();
    assert!(is_transport_error(&err), "{err:?}");
    sim.fleet.set_fault("c1", Fault::none()).unwrap();
    list(&api).await.unwrap();
}

#[tokio::test]
async fn latency_delays_answers() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client("c1").await);
    list(&api).await.unwrap();
    sim.fleet.set_fault("c1", Fault::latency(300)).unwrap();
    let t = Instant::now();
    list(&api).await.unwrap();
    // A lower bound only: the injected delay must be there, however slow the machine.
    assert!(t.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn error_rates_answer_500_429_503() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = sim.client("c1").await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    for (code, reason) in [
        (500, "InternalError"),
        (429, "TooManyRequests"),
        (503, "ServiceUnavailable"),
    ] {
        sim.fleet.set_fault("c1", Fault::errors(1.0, code)).unwrap();
        match list(&api).await.unwrap_err() {
            kube::Error::Api(s) => assert_eq!((s.code, s.reason.as_str()), (code, reason)),
            other => panic!("{other:?}"),
        }
    }
    // 429 carries Retry-After.
    sim.fleet.set_fault("c1", Fault::errors(1.0, 429)).unwrap();
    let req = http::Request::get("/api/v1/namespaces/default/configmaps")
        .body(Vec::new())
        .unwrap();
    let resp = client
        .send(req.map(kube::client::Body::from))
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    // A partial rate fails some requests and serves others.
    sim.fleet.set_fault("c1", Fault::errors(0.5, 503)).unwrap();
    let mut outcomes = (0, 0);
    for _ in 0..60 {
        match list(&api).await {
            Ok(_) => outcomes.0 += 1,
            Err(_) => outcomes.1 += 1,
        }
    }
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
    // kube-rs's default retry policy rides over a partial 503 rate.
    let kc = kube::config::Kubeconfig::from_yaml(&sim.fleet.kubeconfig("c1").unwrap()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let retrying: Api<ConfigMap> = Api::default_namespaced(kube::Client::try_from(config).unwrap());
    for _ in 0..10 {
        list(&retrying).await.unwrap();
    }
    assert!(sim.fleet.set_fault("c1", Fault::errors(2.0, 500)).is_err());
    assert!(sim.fleet.set_fault("c9", Fault::none()).is_err());
}

#[tokio::test]
async fn flapping_alternates_between_up_and_down() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = client_for(
        &sim.fleet.kubeconfig("c1").unwrap(),
        Some(Duration::from_millis(300)),
    )
    .await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    sim.fleet
        .set_fault("c1", Fault::flapping(Duration::from_millis(200)))
        .unwrap();
    let (mut up, mut down) = (0, 0);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) && (up < 3 || down < 3) {
        match list(&api).await {
            Ok(_) => up += 1,
            Err(_) => down += 1,
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(up >= 3 && down >= 3, "up {up}, down {down}");
}
