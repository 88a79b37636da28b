//! Shared fixtures: an in-process fleet on loopback and clients for it.

#![allow(dead_code)] // Each test crate uses a different part of the fixtures.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kubesim::{Fleet, FleetConfig};

/// A fleet with its kubeconfigs written to a temporary directory (removed on drop).
pub struct Sim {
    pub fleet: Fleet,
    pub dir: tempfile::TempDir,
}

impl Sim {
    pub async fn start(clusters: usize, ready_delay: Duration) -> Self {
        Self::start_with(FleetConfig {
            clusters,
            ready_delay,
            bookmark_interval: Duration::from_millis(200),
            ..FleetConfig::default()
        })
        .await
    }

    pub async fn start_with(config: FleetConfig) -> Self {
        let fleet = Fleet::start(config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        fleet.write_kubeconfigs(dir.path()).await.unwrap();
        Self { fleet, dir }
    }

    pub fn kubeconfig_path(&self, cluster: &str) -> PathBuf {
        self.dir.path().join(format!("{cluster}.kubeconfig"))
    }

    pub async fn client(&self, cluster: &str) -> kube::Client {
        client_for(&self.fleet.kubeconfig(cluster).unwrap(), None).await
    }
}

/// A kube-rs client from kubeconfig text, optionally with a read timeout. kube-rs's retries of
/// 429 and 503 are off, so that tests see every answer.
pub async fn client_for(kubeconfig: &str, timeout: Option<Duration>) -> kube::Client {
    let kc = Kubeconfig::from_yaml(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    if let Some(t) = timeout {
        config.connect_timeout = Some(t);
        config.read_timeout = Some(t);
    }
    kube::Client::try_from(config).unwrap()
}
