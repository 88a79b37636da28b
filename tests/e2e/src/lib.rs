//! # emco-e2e
//!
//! The shared harness of the end-to-end tests and the instantiate benchmark: EMCO's example
//! scenarios (`../shared/testdata/emco-examples`), applied unchanged with emcoctl (emco-client's
//! documents and requests) over HTTP to an in-process server whose clusters are an in-process
//! kubesim fleet.
//!
//! [`Env::start`] brings up one such world in a temporary directory: `N` kubesim clusters
//! (`c1` .. `cN`, kubeconfigs written beside the other files) and emco-service's composition, as
//! emco-server serves it (`open_stores`, `orchestrator` with the built-in controllers, `app`) on
//! a loopback port, on the stores [`Backends`] names: the embedded redb file, or etcd + MongoDB
//! from `EMCO_TEST_ETCD` and `EMCO_TEST_MONGO` (skipped loudly when they are unset).
//!
//! A scenario loads its emcoctl files with a generated values file ([`load`], [`set_values`],
//! [`Env::write_values`]), leaves out what needs a controller we do not run ([`without`]),
//! packages charts and profiles at test time ([`tgz`], [`package_renamed_chart`]), splits the
//! documents into onboarding, logical cloud and DIG operations ([`Phases`]) and runs them:
//! [`Env::deploy`] (apply, wait for the clouds, approve and instantiate, wait until Instantiated
//! and Ready through `GET DIG/status`), checks where the apps landed ([`Env::wait_placement`])
//! and [`Env::remove`]s it all again (terminate, nothing labelled `emco/deployment-id` left on
//! any cluster, delete in reverse order, nothing readable back).
//!
//! ```no_run
//! # async fn demo() -> emco_core::Result<()> {
//! use emco_e2e::{Env, EnvConfig, Backends};
//! let Some(env) = Env::start(EnvConfig::new(Backends::Embedded, 2)).await? else {
//!     return Ok(()); // etcd + MongoDB were asked for and are not configured
//! };
//! let kubeconfig = env.kubeconfig_path("c1"); // what the scenario's values file names
//! assert!(env.labelled_objects("c1").await?.is_empty());
//! # let _ = kubeconfig;
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use emco_core::{Error, Result};
use emco_orchestrator::Orchestrator;
use emco_rsync::connector::DEPLOYMENT_ID_LABEL;
use emcoctl::client::{Body, Client};
use emcoctl::document::Document;
use emcoctl::ops::{self, Command, Options, Outcome};
use kube::api::{Api, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, verbs};
use kubesim::{Fleet, FleetConfig};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The example scenarios: `../shared/testdata/emco-examples` beside the workspace.
#[must_use]
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/emco-examples")
}

/// The workspace root.
#[must_use]
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The stores the orchestrator runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backends {
    /// One embedded redb file in the temporary directory for both stores.
    Embedded,
    /// The AppContext store on etcd (`EMCO_TEST_ETCD`), the resource store on MongoDB
    /// (`EMCO_TEST_MONGO`, a fresh database per environment).
    EtcdMongo,
}

impl fmt::Display for Backends {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Embedded => "embedded",
            Self::EtcdMongo => "etcd+mongo",
        })
    }
}

/// How an [`Env`] is set up.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// The stores.
    pub stores: Backends,
    /// The number of clusters, `c1` .. `cN`.
    pub clusters: usize,
    /// Real Kubernetes control planes (`../shared/kube`, no nodes, see [`RealClusters`])
    /// instead of kubesim: workloads never become ready there, so deployments are followed to
    /// Instantiated with every resource Applied.
    pub real: Option<std::sync::Arc<RealClusters>>,
    /// How long kubesim workloads take to become ready.
    pub ready_delay: Duration,
    /// Plain HTTP clusters instead of TLS (cheaper for big fleets).
    pub plain_http: bool,
}

impl EnvConfig {
    /// `clusters` TLS clusters whose workloads are ready after 300 ms, on `stores`.
    #[must_use]
    pub fn new(stores: Backends, clusters: usize) -> Self {
        Self {
            stores,
            clusters,
            ready_delay: Duration::from_millis(300),
            plain_http: false,
            real: None,
        }
    }
}

/// The clusters of an [`Env`].
#[derive(Debug)]
pub enum Clusters {
    /// An in-process kubesim fleet.
    Sim(Fleet),
    /// Real control planes started with `../shared/kube/start.sh` (shared by environments,
    /// stopped when the last one is dropped).
    Real(std::sync::Arc<RealClusters>),
}

impl Clusters {
    /// The cluster names, `c1` .. `cN`.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        match self {
            Self::Sim(fleet) => fleet.cluster_names(),
            Self::Real(real) => real.names.clone(),
        }
    }

    /// The kubesim fleet, for fault injection; `None` on real clusters.
    #[must_use]
    pub fn fleet(&self) -> Option<&Fleet> {
        match self {
            Self::Sim(fleet) => Some(fleet),
            Self::Real(_) => None,
        }
    }
}

/// Real control planes (kube-apiserver and kube-controller-manager, no nodes) in a directory.
#[derive(Debug)]
pub struct RealClusters {
    dir: tempfile::TempDir,
    kit: PathBuf,
    names: Vec<String>,
}

impl RealClusters {
    /// The kit's start script beside the workspace.
    #[must_use]
    pub fn kit() -> PathBuf {
        workspace().join("../shared/kube")
    }

    /// Starts `n` clusters; `None` (after saying why) when the kit is not beside the workspace
    /// outside CI.
    ///
    /// # Errors
    /// When the kit is missing in CI, or `start.sh` fails.
    pub fn start(n: usize) -> Result<Option<Self>> {
        let kit = Self::kit();
        if !kit.join("start.sh").is_file() {
            if std::env::var("CI").as_deref() == Ok("true") {
                return Err(Error::unavailable(format!(
                    "{} is missing: the real-cluster tier cannot run",
                    kit.display()
                )));
            }
            eprintln!(
                "SKIPPED: {} is missing; the real-cluster tier did not run",
                kit.display()
            );
            return Ok(None);
        }
        let dir = tempfile::tempdir().map_err(io("cannot make a temporary directory"))?;
        let out = std::process::Command::new("bash")
            .arg(kit.join("start.sh"))
            .arg(dir.path())
            .arg(n.to_string())
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(io("cannot run the kit's start.sh"))?;
        let me = Self {
            dir,
            kit,
            names: (1..=n).map(|i| format!("c{i}")).collect(),
        };
        if !out.status.success() {
            return Err(Error::unavailable(format!(
                "start.sh failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(Some(me))
    }

    /// The admin kubeconfig of cluster `name`.
    #[must_use]
    pub fn kubeconfig_path(&self, name: &str) -> PathBuf {
        self.dir
            .path()
            .join(format!("kubeconfigs/{name}.kubeconfig"))
    }
}

impl Drop for RealClusters {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .arg(self.kit.join("stop.sh"))
            .arg(self.dir.path())
            .stdin(std::process::Stdio::null())
            .output();
    }
}

/// One world: kubesim clusters, an orchestrator and its HTTP server, in a temporary directory.
/// Dropping it stops the server and the clusters.
pub struct Env {
    /// The clusters.
    pub clusters: Clusters,
    /// The orchestrator the server serves.
    pub orch: Orchestrator,
    /// The server's base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// An emcoctl client for the server.
    pub client: Client,
    /// The stores in use.
    pub stores: Backends,
    dir: tempfile::TempDir,
    cancel: CancellationToken,
}

impl fmt::Debug for Env {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("url", &self.url)
            .field("stores", &self.stores)
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |e| Error::unavailable(what).with_source(e)
}

/// The server configuration for `stores` with its data in `dir`, or `None` (after printing
/// why) when etcd + MongoDB are not configured.
fn server_config(stores: Backends, dir: &Path) -> Option<emco_service::Config> {
    let mut config = emco_service::Config {
        data_dir: dir.join("data"),
        // Nothing is unreachable in these scenarios unless a test makes it so: retry soon.
        rsync_max_backoff: Duration::from_secs(1),
        // Hooks complete at once on kubesim; on real clusters without nodes a hook Job never
        // does, and Helm's five minutes would only slow the scenarios down.
        rsync_hook_timeout: Duration::from_secs(15),
        // A cluster a scenario silences turns unknown soon.
        cluster_liveness: emco_rsync::engine::Liveness {
            interval: Duration::from_millis(500),
            grace: Duration::from_secs(2),
        },
        ..emco_service::Config::default()
    };
    if stores == Backends::EtcdMongo {
        let (Ok(etcd), Ok(mongo)) = (
            std::env::var("EMCO_TEST_ETCD"),
            std::env::var("EMCO_TEST_MONGO"),
        ) else {
            eprintln!(
                "SKIPPED: EMCO_TEST_ETCD and EMCO_TEST_MONGO must both be set; \
                 this etcd + MongoDB scenario did not run"
            );
            return None;
        };
        config.backend = emco_service::Backend::Mongo;
        config.mongo_uri = Some(mongo);
        // A fresh database per environment: runs and parallel tests do not collide.
        config.mongo_database = emco_store::conformance::unique_prefix("emco_e2e_")
            .replace(['/', '-'], "_")
            .trim_end_matches('_')
            .to_owned();
        config.context_backend = emco_service::ContextBackend::Etcd;
        config.etcd_endpoints = vec![etcd];
        // Its own key space: other tests' engines on the same etcd must not resume (and so
        // race on) this environment's contexts, nor this one theirs.
        config.etcd_prefix = emco_store::conformance::unique_prefix("/emco-rs-test/e2e-");
        // The credentials sealed in MongoDB, as a production setup keeps them: every scenario's
        // kubeconfigs, logical-cloud and CA keys go through the sealed store on this setup.
        let keys = dir.join("secrets.keys");
        let key = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [42u8; 32]);
        if std::fs::write(&keys, format!("e2e:{key}\n")).is_err() {
            eprintln!("cannot write {}", keys.display());
            return None;
        }
        config.secrets = Some(emco_service::SecretsKeys::File(keys));
    }
    Some(config)
}

impl Env {
    /// Starts the clusters, the orchestrator and the server; `None` when `config.stores` is
    /// etcd + MongoDB and they are not configured (a `SKIPPED` line says so).
    ///
    /// # Errors
    /// When a store, the fleet or the listener cannot be set up.
    pub async fn start(config: EnvConfig) -> Result<Option<Self>> {
        let dir = tempfile::tempdir().map_err(io("cannot make a temporary directory"))?;
        let Some(server_config) = server_config(config.stores, dir.path()) else {
            return Ok(None);
        };
        let clusters = if let Some(real) = config.real {
            for name in &real.names {
                let to = dir.path().join(format!("{name}.kubeconfig"));
                std::fs::copy(real.kubeconfig_path(name), &to)
                    .map_err(io(format!("cannot copy the kubeconfig of {name}")))?;
            }
            Clusters::Real(real)
        } else {
            let fleet = Fleet::start(FleetConfig {
                clusters: config.clusters,
                ready_delay: config.ready_delay,
                plain_http: config.plain_http,
                bookmark_interval: Duration::from_millis(500),
                ..FleetConfig::default()
            })
            .await?;
            fleet.write_kubeconfigs(dir.path()).await?;
            Clusters::Sim(fleet)
        };
        // The server's own composition: its stores, and its orchestrator with the built-in
        // controllers in-process under their EMCO names.
        let stores = emco_service::open_stores(&server_config).await?;
        let orch = emco_service::orchestrator(&server_config, stores)?;
        let app = emco_service::app(orch.clone(), &server_config, emco_service::Metrics::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(io("cannot listen on loopback"))?;
        let addr = listener
            .local_addr()
            .map_err(io("the listener has no address"))?;
        let cancel = CancellationToken::new();
        let stop = cancel.clone().cancelled_owned();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await;
        });
        let url = format!("http://{addr}");
        let client = Client::new(&url, None).map_err(|e| Error::internal(e.to_string()))?;
        Ok(Some(Self {
            clusters,
            orch,
            url,
            client,
            stores: config.stores,
            dir,
            cancel,
        }))
    }

    /// Registers cluster provider `provider` and the clusters `names` of this environment under
    /// it with their kubeconfigs, each labelled `label` (the main job's setup).
    ///
    /// # Errors
    /// The orchestrator's refusals.
    pub async fn register_clusters(
        &self,
        provider: &str,
        names: &[&str],
        label: &str,
    ) -> Result<()> {
        use emco_core::Metadata;
        use emco_core::model::{Cluster, ClusterLabel, ClusterProvider};
        let o = self.orch.onboarding();
        o.cluster_providers()
            .create(
                &emco_store::ResourceKey::root(),
                &ClusterProvider {
                    metadata: Metadata::named(provider),
                },
            )
            .await?;
        for c in names {
            let cluster = Cluster {
                metadata: Metadata::named(*c),
                ..Cluster::default()
            };
            o.create_cluster(provider, &cluster, Some(&self.kubeconfig_path(c)))
                .await?;
            o.cluster_labels()
                .create(
                    &emco_orchestrator::keys::cluster(provider, c),
                    &ClusterLabel::new(label),
                )
                .await?;
        }
        Ok(())
    }

    /// The main job's example (`examples/emcoctl` project.yaml and instantiate.yaml) on the
    /// clusters `names` of this environment, registered under provider `kubesim` with label
    /// `edge`, its apps' charts already packed in `packages` (`http-server.tgz`,
    /// `http-client.tgz`) and the example's profile packed beside them: the documents split by
    /// phase, and the values file they were rendered with.
    ///
    /// # Errors
    /// The orchestrator's refusals; files that cannot be written or read.
    pub async fn example(&self, packages: &Path, names: &[&str]) -> Result<(Phases, PathBuf)> {
        let root = workspace().join("examples");
        tgz(
            &root.join("profiles/default"),
            ".",
            &packages.join("profile.tgz"),
        )?;
        self.register_clusters("kubesim", names, "edge").await?;
        let values = self.write_values(
            "example-values.yaml",
            &serde_json::json!({"PackagesPath": packages, "ClusterProvider": "kubesim",
                "ClusterLabel": "edge", "Clusters": names}),
        )?;
        let docs = load(
            &[
                root.join("emcoctl/project.yaml"),
                root.join("emcoctl/instantiate.yaml"),
            ],
            &values,
        )?;
        Ok((Phases::split(docs), values))
    }

    /// The temporary directory (kubeconfigs, values files, packages).
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The kubeconfig file of kubesim cluster `cluster` (`c1` ..).
    #[must_use]
    pub fn kubeconfig_path(&self, cluster: &str) -> PathBuf {
        self.dir.path().join(format!("{cluster}.kubeconfig"))
    }

    /// Writes `values` (JSON, which is YAML too) as `name` in the temporary directory.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_values(&self, name: &str, values: &Value) -> Result<PathBuf> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, values.to_string())
            .map_err(io(format!("cannot write {}", path.display())))?;
        Ok(path)
    }

    /// Runs emcoctl's `cmd` over `docs` against the server.
    ///
    /// # Errors
    /// When a referenced file cannot be read.
    pub async fn run(&self, cmd: Command, docs: &[Document]) -> Result<Vec<Outcome>> {
        let mut sink = Vec::new();
        ops::run(&self.client, cmd, docs, &Options::default(), &mut sink)
            .await
            .map_err(|e| Error::internal(format!("emcoctl: {e}")))
    }

    /// `emcoctl apply`; every document must succeed.
    ///
    /// # Errors
    /// The result lines of the failed documents.
    pub async fn apply(&self, docs: &[Document]) -> Result<Vec<Outcome>> {
        all_ok("apply", self.run(Command::Apply, docs).await?)
    }

    /// `emcoctl update`; every document must succeed.
    ///
    /// # Errors
    /// The result lines of the failed documents.
    pub async fn update(&self, docs: &[Document]) -> Result<Vec<Outcome>> {
        all_ok("update", self.run(Command::Update, docs).await?)
    }

    /// `emcoctl delete` (reverse order; an `instantiate` document terminates); every document
    /// must succeed.
    ///
    /// # Errors
    /// The result lines of the failed documents.
    pub async fn delete(&self, docs: &[Document]) -> Result<Vec<Outcome>> {
        all_ok("delete", self.run(Command::Delete, docs).await?)
    }

    /// One request; the status code and the body as JSON (a string when it is not JSON).
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn request(&self, method: http::Method, path: &str) -> Result<(u16, Value)> {
        self.send(method, path, None).await
    }

    /// One request with an optional JSON `body`; the status code and the body as JSON (a string
    /// when it is not JSON).
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let body = match body {
            Some(b) => Body::Json(b.to_string().into_bytes()),
            None => Body::Empty,
        };
        let r = self
            .client
            .send(method, path, body)
            .await
            .map_err(|e| Error::unavailable(e.to_string()))?;
        let body = serde_json::from_slice(&r.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&r.body).into_owned()));
        Ok((r.status, body))
    }

    /// `GET {dig}/status?{query}` (`dig` as [`dig_path`] gives it).
    ///
    /// # Errors
    /// When the server cannot be reached or answers other than 200.
    pub async fn status(&self, dig: &str, query: &str) -> Result<Value> {
        let (code, body) = self
            .request(http::Method::GET, &format!("{dig}/status?{query}"))
            .await?;
        if code != 200 {
            return Err(Error::internal(format!(
                "GET {dig}/status?{query} -> {code} {body}"
            )));
        }
        Ok(body)
    }

    /// Polls `GET {dig}/status?{query}` until `done` holds, for at most `timeout`.
    ///
    /// # Errors
    /// On timeout, with the last answer; when the server cannot be reached.
    pub async fn wait_status(
        &self,
        dig: &str,
        query: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.status(dig, query).await {
                Ok(s) if done(&s) => return Ok(s),
                Ok(s)
                    if s["deployedStatus"]
                        .as_str()
                        .is_some_and(|d| d.ends_with("Failed")) =>
                {
                    return Err(Error::internal(format!(
                        "{dig}: {}; failed resources: {}",
                        s["deployedStatus"],
                        self.failed_resources(dig).await
                    )));
                }
                Ok(s) => s.to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(Error::internal(format!(
                    "{dig}: status not reached within {timeout:?}; last answer: {}",
                    cut(&last, 3000)
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The first resources of `dig` whose deployed status is not `Applied`, as text for an
    /// error message.
    async fn failed_resources(&self, dig: &str) -> String {
        let detail = match self.status(dig, "status=deployed&output=detail").await {
            Ok(d) => d,
            Err(e) => return e.to_string(),
        };
        let mut out = Vec::new();
        for app in detail["apps"].as_array().into_iter().flatten() {
            for cluster in app["clusters"].as_array().into_iter().flatten() {
                for r in cluster["resources"].as_array().into_iter().flatten() {
                    if r["deployedStatus"] != "Applied" {
                        out.push(format!(
                            "{}/{} {} {} of {} on {}: {}",
                            r["GVK"]["Group"].as_str().unwrap_or_default(),
                            r["GVK"]["Version"].as_str().unwrap_or_default(),
                            r["GVK"]["Kind"].as_str().unwrap_or_default(),
                            r["name"].as_str().unwrap_or_default(),
                            app["name"].as_str().unwrap_or_default(),
                            cluster["cluster"].as_str().unwrap_or_default(),
                            r["deployedStatus"].as_str().unwrap_or_default(),
                        ));
                    }
                }
            }
        }
        let shown = out.len().min(5);
        format!("{} of {}: {}", shown, out.len(), out[..shown].join("; "))
    }

    /// Waits until the DIG is Instantiated (or Updated) and all its resources are Ready, following
    /// it with `emcoctl watch` as an operator would.
    ///
    /// # Errors
    /// As [`Self::wait_status`].
    pub async fn wait_ready(&self, dig: &str, timeout: Duration) -> Result<Value> {
        // Followed the way an operator does, with `emcoctl watch`; then checked precisely.
        let target = emcoctl::status::Target {
            position: format!("{dig} (e2e)"),
            object: dig.trim_start_matches("/v2/").to_owned(),
        };
        let opts = emcoctl::status::WatchOptions {
            timeout,
            interval: Duration::from_millis(500),
            output: ops::Output::Table,
        };
        let mut progress = Vec::new();
        let endings = emcoctl::status::watch(
            &self.client,
            std::slice::from_ref(&target),
            &opts,
            &mut progress,
        )
        .await
        .map_err(|e| Error::internal(format!("emcoctl watch: {e}")))?;
        if endings.first() != Some(&emcoctl::status::Ending::Succeeded) {
            return Err(Error::internal(format!(
                "emcoctl watch {dig}: {endings:?}; failed resources: {}; progress:\n{}",
                self.failed_resources(dig).await,
                cut(&String::from_utf8_lossy(&progress), 3000)
            )));
        }
        self.wait_status(dig, "status=ready", timeout, |s| {
            matches!(state(s), Some("Instantiated" | "Updated"))
                && matches!(
                    s["deployedStatus"].as_str(),
                    Some("Instantiated" | "Updated")
                )
                && s["readyStatus"] == "Ready"
        })
        .await
    }

    /// Waits until the DIG is Terminated and its context finished terminating.
    ///
    /// # Errors
    /// As [`Self::wait_status`].
    pub async fn wait_terminated(&self, dig: &str, timeout: Duration) -> Result<Value> {
        self.wait_terminated_as(dig, "Terminated", timeout).await
    }

    /// Waits until the DIG is Terminated and its context's terminate ended `deployed`.
    ///
    /// # Errors
    /// As [`Self::wait_status`].
    pub async fn wait_terminated_as(
        &self,
        dig: &str,
        deployed: &str,
        timeout: Duration,
    ) -> Result<Value> {
        self.wait_status(dig, "status=deployed", timeout, |s| {
            state(s) == Some("Terminated") && s["deployedStatus"] == deployed
        })
        .await
    }

    /// A kube-rs client for kubesim cluster `cluster`.
    ///
    /// # Errors
    /// When the cluster is unknown.
    pub async fn kube(&self, cluster: &str) -> Result<kube::Client> {
        let text = std::fs::read_to_string(self.kubeconfig_path(cluster))
            .map_err(io(format!("no kubeconfig of {cluster}")))?;
        let invalid =
            |e: &dyn fmt::Display| Error::internal(format!("kubeconfig of {cluster}: {e}"));
        let kc = Kubeconfig::from_yaml(&text).map_err(|e| invalid(&e))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| invalid(&e))?;
        kube::Client::try_from(config).map_err(|e| invalid(&e))
    }

    /// Creates the CustomResourceDefinitions of the YAML `text` (documents separated by
    /// `---`) on `cluster`, as its admin would (one that exists is kept), and waits until each
    /// is established.
    ///
    /// # Errors
    /// When a definition does not parse, is refused, or is not established in time.
    pub async fn install_crds(&self, cluster: &str, text: &str) -> Result<()> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(self.kube(cluster).await?);
        for doc in text.split("\n---\n") {
            let crd: CustomResourceDefinition = emco_go::yaml::from_str(doc)
                .map_err(|e| Error::invalid(format!("a CRD does not parse: {e}")))?;
            let name = crd.metadata.name.clone().unwrap_or_default();
            match api.create(&kube::api::PostParams::default(), &crd).await {
                // Installed by an earlier scenario on the same clusters.
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(
                        Error::unavailable(format!("CRD {name} on {cluster}")).with_source(e)
                    );
                }
                Ok(_) => {}
            }
            let deadline = tokio::time::Instant::now() + DEADLINE;
            loop {
                let got = api.get(&name).await.map_err(|e| {
                    Error::unavailable(format!("CRD {name} on {cluster}")).with_source(e)
                })?;
                let established = got
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    break;
                }
                if tokio::time::Instant::now() > deadline {
                    return Err(Error::unavailable(format!(
                        "CRD {name} on {cluster} is not established"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// Every object on kubesim cluster `cluster` that carries EMCO's deployment label, of every
    /// listable resource type the cluster serves (CRDs included).
    ///
    /// # Errors
    /// When discovery or a list fails.
    pub async fn labelled_objects(&self, cluster: &str) -> Result<Vec<Labelled>> {
        let client = self.kube(cluster).await?;
        let failed = |what: String| move |e: kube::Error| Error::unavailable(what).with_source(e);
        let discovery = Discovery::new(client.clone())
            .run()
            .await
            .map_err(failed(format!("discovery on {cluster}")))?;
        let params = ListParams::default().labels(DEPLOYMENT_ID_LABEL);
        let mut out = Vec::new();
        for group in discovery.groups() {
            for (ar, caps) in group.recommended_resources() {
                if !caps.supports_operation(verbs::LIST) {
                    continue;
                }
                let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
                let list = api
                    .list(&params)
                    .await
                    .map_err(failed(format!("listing {} on {cluster}", ar.plural)))?;
                for obj in list.items {
                    let id = obj
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(DEPLOYMENT_ID_LABEL))
                        .cloned()
                        .unwrap_or_default();
                    out.push(Labelled {
                        kind: ar.kind.clone(),
                        namespace: obj.metadata.namespace.clone().unwrap_or_default(),
                        name: obj.metadata.name.clone().unwrap_or_default(),
                        deployment_id: id,
                        resource_version: obj.metadata.resource_version.clone().unwrap_or_default(),
                        created: obj
                            .metadata
                            .creation_timestamp
                            .as_ref()
                            .map_or(0, |t| t.0.as_second()),
                    });
                }
            }
        }
        out.sort_by_key(ToString::to_string);
        Ok(out)
    }

    /// Polls the labelled objects of `clusters` until `done` holds for them, for at most
    /// `timeout`; returns them per cluster.
    ///
    /// # Errors
    /// On timeout, with the last listing.
    pub async fn wait_objects(
        &self,
        clusters: &[&str],
        timeout: Duration,
        done: impl Fn(&[Vec<Labelled>]) -> bool,
    ) -> Result<Vec<Vec<Labelled>>> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut all = Vec::with_capacity(clusters.len());
            for c in clusters {
                all.push(self.labelled_objects(c).await?);
            }
            if done(&all) {
                return Ok(all);
            }
            if Instant::now() > deadline {
                let listing: Vec<String> = clusters
                    .iter()
                    .zip(&all)
                    .map(|(c, objs)| {
                        let names: Vec<String> = objs.iter().map(ToString::to_string).collect();
                        format!("{c}: [{}]", names.join(", "))
                    })
                    .collect();
                return Err(Error::internal(format!(
                    "the clusters did not reach the expected objects within {timeout:?}: {}",
                    listing.join("; ")
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// The apps each cluster must hold: `(app, [kubesim cluster, ...])`.
pub type Placement<'a> = &'a [(&'a str, &'a [&'a str])];

impl Env {
    /// Waits until every cluster of the fleet holds objects of exactly those apps of `expected`
    /// that it places there, for at most `timeout` (objects of other apps, such as a logical
    /// cloud's, are not looked at).
    ///
    /// # Errors
    /// On timeout, with the last listing.
    pub async fn wait_placement(&self, expected: Placement<'_>, timeout: Duration) -> Result<()> {
        let names = self.clusters.names();
        let clusters: Vec<&str> = names.iter().map(String::as_str).collect();
        let apps: BTreeSet<&str> = expected.iter().map(|(app, _)| *app).collect();
        let want: Vec<BTreeSet<&str>> = clusters
            .iter()
            .map(|c| {
                expected
                    .iter()
                    .filter(|(_, on)| on.contains(c))
                    .map(|(app, _)| *app)
                    .collect()
            })
            .collect();
        self.wait_objects(&clusters, timeout, |all| {
            all.iter().zip(&want).all(|(objs, want)| {
                let have: BTreeSet<&str> = objs
                    .iter()
                    .map(Labelled::app)
                    .filter(|app| apps.contains(app))
                    .collect();
                have == *want
            })
        })
        .await
        .map(drop)
    }
}

/// A scenario's documents split by when they run: onboarding (in file order), logical cloud
/// operations (`.../logical-clouds/{lc}/instantiate`) and DIG operations (`approve`,
/// `instantiate`).
#[derive(Debug, Clone)]
pub struct Phases {
    /// Everything that creates an object.
    pub onboard: Vec<Document>,
    /// Logical cloud instantiates.
    pub clouds: Vec<Document>,
    /// DIG approves and instantiates.
    pub digs: Vec<Document>,
}

impl Phases {
    /// Splits `docs`.
    #[must_use]
    pub fn split(docs: Vec<Document>) -> Self {
        let (ops, onboard): (Vec<Document>, Vec<Document>) =
            docs.into_iter().partition(|d| d.lifecycle().is_some());
        let (clouds, digs) = ops
            .into_iter()
            .partition(|d| d.anchor.contains("/logical-clouds/"));
        Self {
            onboard,
            clouds,
            digs,
        }
    }

    /// The REST paths of the DIGs this scenario instantiates.
    #[must_use]
    pub fn dig_paths(&self) -> Vec<String> {
        self.digs
            .iter()
            .filter_map(|d| d.anchor.strip_suffix("/instantiate"))
            .map(|a| format!("/v2/{a}"))
            .collect()
    }

    /// The REST paths of the logical clouds this scenario instantiates.
    #[must_use]
    pub fn cloud_paths(&self) -> Vec<String> {
        self.clouds
            .iter()
            .filter_map(|d| d.anchor.strip_suffix("/instantiate"))
            .map(|a| format!("/v2/{a}"))
            .collect()
    }
}

/// How long a deployment may take to become ready or to go away on this loaded machine.
pub const DEADLINE: Duration = Duration::from_secs(120);

impl Env {
    /// Onboards, instantiates the logical clouds, approves and instantiates the DIGs of
    /// `phases`, and waits until every DIG is Instantiated and Ready.
    ///
    /// # Errors
    /// The first failed request or the first status that is not reached.
    pub async fn deploy(&self, phases: &Phases) -> Result<()> {
        self.begin(phases).await?;
        for dig in phases.dig_paths() {
            self.wait_deployed(&dig, DEADLINE).await?;
        }
        Ok(())
    }

    /// Onboards, instantiates the logical clouds, approves and instantiates the DIGs of
    /// `phases`, without waiting for the DIGs.
    ///
    /// # Errors
    /// The first failed request, or a logical cloud not instantiated.
    pub async fn begin(&self, phases: &Phases) -> Result<()> {
        self.apply(&phases.onboard).await?;
        self.apply(&phases.clouds).await?;
        for lc in phases.cloud_paths() {
            self.wait_cloud(&lc, "Instantiated").await?;
        }
        self.apply(&phases.digs).await.map(drop)
    }

    /// Waits until the DIG is deployed as far as the clusters allow: Ready on kubesim, every
    /// resource Applied on real clusters (see [`Self::wait_applied`]).
    ///
    /// # Errors
    /// As [`Self::wait_status`].
    pub async fn wait_deployed(&self, dig: &str, timeout: Duration) -> Result<Value> {
        if self.is_real() {
            self.wait_applied(dig, timeout).await
        } else {
            self.wait_ready(dig, timeout).await
        }
    }

    /// Whether the clusters are real control planes.
    #[must_use]
    pub fn is_real(&self) -> bool {
        matches!(self.clusters, Clusters::Real(_))
    }

    /// Waits until the DIG is Instantiated (or Updated) with every resource Applied, which is
    /// as far as a cluster without nodes goes.
    ///
    /// # Errors
    /// As [`Self::wait_status`].
    pub async fn wait_applied(&self, dig: &str, timeout: Duration) -> Result<Value> {
        self.wait_status(dig, "status=deployed", timeout, |s| {
            matches!(state(s), Some("Instantiated" | "Updated"))
                && matches!(
                    s["deployedStatus"].as_str(),
                    Some("Instantiated" | "Updated")
                )
                && s["deployedCounts"]
                    .as_object()
                    .is_some_and(|c| !c.is_empty() && c.keys().all(|k| k == "Applied"))
        })
        .await
    }

    /// Terminates the DIGs of `phases` (as `emcoctl delete` on the instantiate documents),
    /// waits until they are Terminated, checks that no labelled object is left on any cluster,
    /// terminates the logical clouds and checks again, deletes everything onboarded in reverse
    /// order and checks that none of it can be read back.
    ///
    /// # Errors
    /// The first failed request, status not reached, or the objects left behind.
    pub async fn remove(&self, phases: &Phases) -> Result<()> {
        self.remove_as(phases, "Terminated").await
    }

    /// [`Self::remove`] where the DIGs' terminate ends `deployed` (`TerminateFailed` when a
    /// delete hook cannot run), which must leave nothing behind all the same.
    ///
    /// # Errors
    /// As [`Self::remove`].
    pub async fn remove_as(&self, phases: &Phases, deployed: &str) -> Result<()> {
        let ended_as_expected = |o: &Outcome| matches!(&o.waited, Some(emcoctl::status::Waited::Failed(s)) if s == deployed);
        let outcomes = self.run(Command::Delete, &phases.digs).await?;
        all_ok(
            "delete",
            outcomes
                .into_iter()
                .filter(|o| !ended_as_expected(o))
                .collect(),
        )?;
        for dig in phases.dig_paths() {
            self.wait_terminated_as(&dig, deployed, DEADLINE).await?;
        }
        // The logical clouds' own objects stay until the clouds are terminated.
        self.expect_no_leftovers(&[emco_orchestrator::dcm::LC_APP])
            .await?;
        self.delete(&phases.clouds).await?;
        for lc in phases.cloud_paths() {
            self.wait_cloud(&lc, "Terminated").await?;
        }
        // What the clouds made (namespaces, roles, quotas of standard clouds) is gone too.
        self.expect_no_leftovers(&[]).await?;
        self.delete(&phases.onboard).await?;
        let still: Vec<String> = self
            .run(Command::Get, &phases.onboard)
            .await?
            .iter()
            .filter(|o| matches!(&o.response, Some(Ok(r)) if r.status != 404))
            .map(Outcome::line)
            .collect();
        if !still.is_empty() {
            return Err(Error::internal(format!(
                "still readable after delete:\n{}",
                still.join("\n")
            )));
        }
        Ok(())
    }

    /// Waits until no cluster has a labelled object of an app other than those in `except`
    /// (deletions may take a moment, e.g. a namespace terminating); fails with those left
    /// after [`DEADLINE`].
    ///
    /// # Errors
    /// The objects left, or a failed listing.
    pub async fn expect_no_leftovers(&self, except: &[&str]) -> Result<()> {
        let names = self.clusters.names();
        let clusters: Vec<&str> = names.iter().map(String::as_str).collect();
        self.wait_objects(&clusters, DEADLINE, |all| {
            all.iter().flatten().all(|o| except.contains(&o.app()))
        })
        .await
        .map(drop)
        .map_err(|e| Error::internal(format!("objects left behind: {e}")))
    }

    /// Whether namespace `namespace` exists on kubesim cluster `cluster` (and is not
    /// terminating).
    ///
    /// # Errors
    /// When the cluster cannot be asked.
    pub async fn namespace_exists(&self, cluster: &str, namespace: &str) -> Result<bool> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.kube(cluster).await?);
        let found = api.get_opt(namespace).await.map_err(|e| {
            Error::unavailable(format!("namespace {namespace} on {cluster}")).with_source(e)
        })?;
        Ok(found.is_some_and(|ns| ns.metadata.deletion_timestamp.is_none()))
    }

    /// Polls `GET {lc}/status` until the logical cloud's last state is `want` (and, for
    /// `Instantiated`, until it is ready to take deployments).
    ///
    /// # Errors
    /// On timeout, with the last answer.
    pub async fn wait_cloud(&self, lc: &str, want: &str) -> Result<Value> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let (code, body) = self
                .request(http::Method::GET, &format!("{lc}/status?status=ready"))
                .await?;
            // A standard cloud takes deployments once its kubeconfigs are built: Ready. An
            // admin cloud answers with its lifecycle record only.
            let usable = want != "Instantiated"
                || body
                    .get("readyStatus")
                    .and_then(Value::as_str)
                    .is_none_or(|r| r.is_empty() || r == "Ready");
            if code == 200 && state(&body) == Some(want) && usable {
                return Ok(body);
            }
            if Instant::now() > deadline {
                return Err(Error::internal(format!(
                    "{lc}: not {want} within {DEADLINE:?}; last answer: {code} {}",
                    cut(&body.to_string(), 3000)
                )));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// An object on a cluster with EMCO's deployment label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    /// Its kind.
    pub kind: String,
    /// Its namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The label's value, `<context id>-<app>`.
    pub deployment_id: String,
    /// Its `resourceVersion`: it moves with every write.
    pub resource_version: String,
    /// Its creation time in seconds since the Unix epoch (0 when the cluster gave none).
    pub created: i64,
}

impl Labelled {
    /// The app the object belongs to: the label's value after `<context id>-`.
    #[must_use]
    pub fn app(&self) -> &str {
        self.deployment_id
            .split_once('-')
            .map_or("", |(_, app)| app)
    }
}

impl fmt::Display for Labelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{} ({})",
            self.kind, self.namespace, self.name, self.deployment_id
        )
    }
}

fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

fn all_ok(what: &str, outcomes: Vec<Outcome>) -> Result<Vec<Outcome>> {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.ok())
        .map(Outcome::line)
        .collect();
    if failed.is_empty() {
        Ok(outcomes)
    } else {
        Err(Error::internal(format!(
            "emcoctl {what}: {} document(s) failed:\n{}",
            failed.len(),
            failed.join("\n")
        )))
    }
}

/// The last lifecycle state in a status answer (`states.actions[-1].state`).
#[must_use]
pub fn state(status: &Value) -> Option<&str> {
    status["states"]["actions"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|a| a["state"].as_str())
}

/// The REST path of a deployment intent group (composite app version `v1`, as in every
/// example).
#[must_use]
pub fn dig_path(project: &str, composite_app: &str, dig: &str) -> String {
    format!(
        "/v2/projects/{project}/composite-apps/{composite_app}/v1/deployment-intent-groups/{dig}"
    )
}

/// Loads emcoctl files rendered with `values`, as `emcoctl -f ... -v values` does.
///
/// # Errors
/// The input error emcoctl reports.
pub fn load(files: &[PathBuf], values: &Path) -> Result<Vec<Document>> {
    emcoctl::cli::load_documents(files, Some(values)).map_err(|e| Error::invalid(e.to_string()))
}

/// `docs` without those whose anchor ends in one of `anchors` or whose name is one of `names`
/// (the documents that need a controller we do not ship).
#[must_use]
pub fn without(docs: Vec<Document>, anchors: &[&str], names: &[&str]) -> Vec<Document> {
    docs.into_iter()
        .filter(|d| {
            !anchors.iter().any(|a| d.anchor.ends_with(a))
                && !d.name().is_some_and(|n| names.contains(&n))
        })
        .collect()
}

/// Writes a gzipped tar of directory `dir` to `out`, its entries under `prefix` (`"."` for the
/// directory's contents at the top, as EMCO's setup scripts tar profiles).
///
/// # Errors
/// When `dir` cannot be read or `out` written.
pub fn tgz(dir: &Path, prefix: &str, out: &Path) -> Result<()> {
    let bytes = emco_helm::archive::pack_dir(dir, prefix)
        .map_err(io(format!("cannot tar {}", dir.display())))?;
    std::fs::write(out, bytes).map_err(io(format!("cannot write {}", out.display())))
}

/// Copies directory `from` to `to` (created), files and subdirectories.
///
/// # Errors
/// When a file cannot be read or written.
pub fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(io(format!("cannot create {}", to.display())))?;
    for entry in std::fs::read_dir(from).map_err(io(format!("cannot read {}", from.display())))? {
        let entry = entry.map_err(io(format!("cannot read {}", from.display())))?;
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(io(format!("cannot stat {}", entry.path().display())))?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(io(format!("cannot copy {}", entry.path().display())))?;
        }
    }
    Ok(())
}

/// Packages chart directory `chart` as `out` (a `.tgz` whose top directory is `name`) with the
/// chart renamed to `name` in its `Chart.yaml`, so that copies of one chart deploy side by side
/// under different app names.
///
/// # Errors
/// When the chart cannot be read, has no `name:` line, or `out` cannot be written.
pub fn package_renamed_chart(chart: &Path, name: &str, out: &Path) -> Result<()> {
    let staging = tempfile::tempdir().map_err(io("cannot make a temporary directory"))?;
    let copy = staging.path().join(name);
    copy_dir(chart, &copy)?;
    let meta = copy.join("Chart.yaml");
    let text =
        std::fs::read_to_string(&meta).map_err(io(format!("cannot read {}", meta.display())))?;
    let mut renamed = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if !renamed && l.starts_with("name:") {
                renamed = true;
                format!("name: {name}")
            } else {
                l.to_owned()
            }
        })
        .collect();
    if !renamed {
        return Err(Error::invalid(format!(
            "{} has no name: line",
            meta.display()
        )));
    }
    std::fs::write(&meta, lines.join("\n") + "\n")
        .map_err(io(format!("cannot write {}", meta.display())))?;
    tgz(&copy, name, out)
}

/// `values` (an emcoctl values file of `key: value` lines, as EMCO's `values-novars.yaml`) with
/// the keys of `set` replaced, and those it lacks appended with the same indentation.
#[must_use]
pub fn set_values(values: &str, set: &[(&str, String)]) -> String {
    let indent: String = values
        .lines()
        .find(|l| l.contains(':'))
        .map(|l| l.chars().take_while(|c| *c == ' ').collect())
        .unwrap_or_default();
    let mut done = vec![false; set.len()];
    let mut out: Vec<String> = values
        .lines()
        .map(|l| {
            let key = l.trim_start().split(':').next().unwrap_or_default();
            match set.iter().position(|(k, _)| *k == key) {
                Some(i) => {
                    done[i] = true;
                    format!("{indent}{key}: {}", set[i].1)
                }
                None => l.to_owned(),
            }
        })
        .collect();
    for ((key, value), seen) in set.iter().zip(done) {
        if !seen {
            out.push(format!("{indent}{key}: {value}"));
        }
    }
    out.join("\n") + "\n"
}
