//! The `kubesim` binary: serve, kubeconfig files, the ready line, `kubesim fault`, SIGTERM,
//! and persistence across a restart.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::client_for;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_kubesim");

async fn serve(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(line.starts_with("kubesim ready: "), "{line}");
    (child, line)
}

async fn sigterm(mut child: Child) {
    let pid = child.id().unwrap().to_string();
    let st = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap();
    assert!(st.success());
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

async fn fault(dir: &Path, args: &[&str]) -> bool {
    Command::new(BIN)
        .arg("fault")
        .args(args)
        .arg("--kubeconfig-dir")
        .arg(dir)
        .status()
        .await
        .unwrap()
        .success()
}

async fn api(dir: &Path, cluster: &str) -> Api<ConfigMap> {
    let text = std::fs::read_to_string(dir.join(format!("{cluster}.kubeconfig"))).unwrap();
    Api::default_namespaced(client_for(&text, Some(Duration::from_secs(2))).await)
}

#[tokio::test]
async fn serve_fault_and_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (child, line) = serve(&[
        "--clusters",
        "3",
        "--kubeconfig-dir",
        d,
        "--plain-http",
        "--ready-delay-ms",
        "0",
    ])
    .await;
    assert!(line.contains("3 clusters"), "{line}");
    for c in ["c1", "c2", "c3"] {
        let text = std::fs::read_to_string(dir.path().join(format!("{c}.kubeconfig"))).unwrap();
        assert!(
            text.contains("server: http://127.0.0.1:") && text.contains("token: "),
            "{text}"
        );
    }
    let c3 = api(dir.path(), "c3").await;
    c3.list(&ListParams::default()).await.unwrap();
    assert!(fault(dir.path(), &["c3", "--down"]).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(c3.list(&ListParams::default()).await.is_err());
    assert!(
        fault(
            dir.path(),
            &["c3", "--error-rate", "1", "--error-code", "503"]
        )
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    match c3.list(&ListParams::default()).await.unwrap_err() {
        kube::Error::Api(s) => assert_eq!(s.code, 503),
        other => panic!("{other:?}"),
    }
    assert!(fault(dir.path(), &["c3", "--clear"]).await);
    c3.list(&ListParams::default()).await.unwrap();
    assert!(
        !fault(dir.path(), &["c9", "--down"]).await,
        "unknown clusters are an error"
    );
    sigterm(child).await;
}

#[tokio::test]
async fn tls_and_data_dir_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let args = [
        "--clusters",
        "2",
        "--kubeconfig-dir",
        d,
        "--data-dir",
        data.path().to_str().unwrap(),
    ];
    let (child, _) = serve(&args).await;
    let text = std::fs::read_to_string(dir.path().join("c2.kubeconfig")).unwrap();
    assert!(
        text.contains("server: https://127.0.0.1:")
            && text.contains("certificate-authority-data: ")
    );
    let c2 = api(dir.path(), "c2").await;
    let cm: ConfigMap = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "keep"}, "data": {"a": "b"}}),
    )
    .unwrap();
    c2.create(&PostParams::default(), &cm).await.unwrap();
    sigterm(child).await;
    let (child, _) = serve(&args).await;
    let c2 = api(dir.path(), "c2").await;
    let kept = c2.get("keep").await.unwrap();
    assert_eq!(kept.data.as_ref().unwrap()["a"], "b");
    // Versions continue after the restored ones.
    let again: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "new"}})).unwrap();
    let created = c2.create(&PostParams::default(), &again).await.unwrap();
    let rv = |c: &ConfigMap| {
        c.metadata
            .resource_version
            .clone()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv(&created) > rv(&kept));
    sigterm(child).await;
}
