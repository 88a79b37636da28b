//! The worlds the integration tests deploy in, written once: a kubesim [`Fleet`], an
//! [`Orchestrator`] over in-memory (or given) stores whose rsync retries fast, and the
//! onboarding a deployment starts from (a project, a cluster provider with the fleet's clusters
//! registered from their kubeconfigs, labels).
//!
//! ```no_run
//! # async fn demo() {
//! let world = emco_testkit::World::builder().clusters(3).project("p1").start().await;
//! assert_eq!(world.cluster_names().len(), 3);
//! world.stop().await;
//! # }
//! ```

pub mod temporal;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use emco_controller_sdk::{ControllerRegistry, Stores};
use emco_core::Metadata;
use emco_core::model::{Cluster, ClusterLabel, ClusterProvider, Project};
use emco_orchestrator::{Orchestrator, OrchestratorBuilder, keys};
use emco_rsync::engine::{Backoff, RsyncBuilder};
use emco_store::{
    AppContextStore, InMemoryAppContextStore, InMemoryResourceStore, ResourceKey, ResourceStore,
};
use kubesim::{Fleet, FleetConfig};
use tokio_util::sync::CancellationToken;

/// A loopback address free for a process a test starts to listen on. Picked below the
/// kernel's ephemeral range (32768-60999 by default), which `bind(0)` and every outgoing
/// connection draw from: a port from there can be taken by one of the run's own connections
/// between the pick and the process's bind. Each test process starts at its own place.
#[must_use]
pub fn free_addr() -> std::net::SocketAddr {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 20_000;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7_919)
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    loop {
        let n = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed));
        let port = u16::try_from(LOW + n % SPAN).unwrap_or(u16::MAX);
        if let Ok(l) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return l
                .local_addr()
                .unwrap_or_else(|_| ([127, 0, 0, 1], port).into());
        }
    }
}

/// The cluster provider a world registers its clusters under.
pub const PROVIDER: &str = "edge";

/// The registry `registry` makes of the tests' base one (gRPC connections time out after 10 s)
/// over the orchestrator's stores.
fn on_stores(
    registry: impl FnOnce(ControllerRegistry) -> ControllerRegistry + Send + 'static,
) -> impl FnOnce(Stores) -> ControllerRegistry + Send + 'static {
    move |stores| {
        registry(ControllerRegistry::new(stores).with_connect_timeout(Duration::from_secs(10)))
    }
}

/// rsync tuned for tests: retries from 50 ms up to 500 ms, without end, polling every 100 ms.
#[must_use]
pub fn fast_rsync(builder: RsyncBuilder) -> RsyncBuilder {
    builder
        .backoff(Backoff {
            initial: Duration::from_millis(50),
            max_delay: Duration::from_millis(500),
            max_retries: None,
        })
        .poll_interval(Duration::from_millis(100))
}

type Registry = Box<dyn FnOnce(Stores) -> ControllerRegistry + Send>;
type Tune = Box<dyn FnOnce(OrchestratorBuilder) -> OrchestratorBuilder + Send>;

/// How a [`World`] is made; see [`World::builder`].
pub struct WorldBuilder {
    clusters: usize,
    ready_delay: Duration,
    resources: Option<Arc<dyn ResourceStore>>,
    contexts: Option<Arc<dyn AppContextStore>>,
    controllers: Option<Registry>,
    tune: Option<Tune>,
    start_engine: bool,
    project: Option<String>,
    provider: String,
    labels: fn(&str) -> Vec<String>,
}

impl std::fmt::Debug for WorldBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorldBuilder")
            .field("clusters", &self.clusters)
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl WorldBuilder {
    /// `n` kubesim clusters, `c1` .. `cN` (default 3).
    #[must_use]
    pub fn clusters(mut self, n: usize) -> Self {
        self.clusters = n;
        self
    }

    /// How long a workload takes to become ready on the fleet (default 100 ms).
    #[must_use]
    pub fn ready_delay(mut self, delay: Duration) -> Self {
        self.ready_delay = delay;
        self
    }

    /// Runs over these stores instead of fresh in-memory ones (a replica of another world, or
    /// etcd and MongoDB).
    #[must_use]
    pub fn stores(
        mut self,
        resources: Arc<dyn ResourceStore>,
        contexts: Arc<dyn AppContextStore>,
    ) -> Self {
        self.resources = Some(resources);
        self.contexts = Some(contexts);
        self
    }

    /// The controllers the orchestrator calls (default: those registered over gRPC).
    #[must_use]
    pub fn controllers(
        mut self,
        registry: impl FnOnce(ControllerRegistry) -> ControllerRegistry + Send + 'static,
    ) -> Self {
        self.controllers = Some(Box::new(on_stores(registry)));
        self
    }

    /// More settings of the orchestrator (a revision history limit, ...).
    #[must_use]
    pub fn orchestrator(
        mut self,
        tune: impl FnOnce(OrchestratorBuilder) -> OrchestratorBuilder + Send + 'static,
    ) -> Self {
        self.tune = Some(Box::new(tune));
        self
    }

    /// Whether [`Orchestrator::start`] resumes what the stores left active (default true; off for
    /// a store shared with other tests).
    #[must_use]
    pub fn start_engine(mut self, start: bool) -> Self {
        self.start_engine = start;
        self
    }

    /// Creates project `name` too.
    #[must_use]
    pub fn project(mut self, name: &str) -> Self {
        self.project = Some(name.to_owned());
        self
    }

    /// Registers the clusters under provider `name` (default [`PROVIDER`]).
    #[must_use]
    pub fn provider(mut self, name: &str) -> Self {
        self.provider = name.to_owned();
        self
    }

    /// The labels each cluster gets, by name (default none).
    #[must_use]
    pub fn labels(mut self, labels: fn(&str) -> Vec<String>) -> Self {
        self.labels = labels;
        self
    }

    /// The fleet, the orchestrator over it and the onboarding.
    ///
    /// # Panics
    /// When any of it fails: this is for tests.
    pub async fn start(self) -> World {
        let fleet = Fleet::start(FleetConfig {
            clusters: self.clusters,
            ready_delay: self.ready_delay,
            ..FleetConfig::default()
        })
        .await
        .expect("the kubesim fleet starts");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let resources = self
            .resources
            .unwrap_or_else(|| Arc::new(InMemoryResourceStore::new()));
        let contexts = self
            .contexts
            .unwrap_or_else(|| Arc::new(InMemoryAppContextStore::new()));
        let mut builder = Orchestrator::builder(resources)
            .contexts(contexts)
            .gitops_dir(dir.path().join("clones"))
            .rsync(fast_rsync);
        if let Some(registry) = self.controllers {
            builder = builder.controllers(registry);
        }
        if let Some(tune) = self.tune {
            builder = tune(builder);
        }
        let orch = builder.build().expect("the orchestrator builds");
        let cancel = CancellationToken::new();
        if self.start_engine {
            orch.start(cancel.clone())
                .await
                .expect("the orchestrator starts");
        }
        let world = World {
            fleet,
            orch,
            cancel,
            dir,
        };
        let root = ResourceKey::root();
        if let Some(project) = &self.project {
            world
                .orch
                .onboarding()
                .projects()
                .create(
                    &root,
                    &Project {
                        metadata: Metadata::named(project),
                    },
                )
                .await
                .expect("the project is created");
        }
        world
            .orch
            .onboarding()
            .cluster_providers()
            .create(
                &root,
                &ClusterProvider {
                    metadata: Metadata::named(&self.provider),
                },
            )
            .await
            .expect("the cluster provider is created");
        for name in world.cluster_names() {
            let kubeconfig = world.fleet.kubeconfig(&name).expect("a kubeconfig");
            let path = world.file(&format!("{name}.kubeconfig"), kubeconfig.as_bytes());
            let cluster = Cluster {
                metadata: Metadata::named(&name),
                ..Cluster::default()
            };
            world
                .orch
                .onboarding()
                .create_cluster(&self.provider, &cluster, Some(&path))
                .await
                .expect("the cluster is registered");
            for label in (self.labels)(&name) {
                world
                    .orch
                    .onboarding()
                    .cluster_labels()
                    .create(
                        &keys::cluster(&self.provider, &name),
                        &ClusterLabel::new(&label),
                    )
                    .await
                    .expect("the label is created");
            }
        }
        world
    }
}

/// A kubesim fleet registered with an orchestrator; see the crate documentation.
#[derive(Debug)]
pub struct World {
    /// The clusters.
    pub fleet: Fleet,
    /// The orchestrator over them.
    pub orch: Orchestrator,
    /// Stops the orchestrator's engine.
    pub cancel: CancellationToken,
    /// A directory for files the test writes (kubeconfigs, charts, GitOps clones).
    pub dir: tempfile::TempDir,
}

impl World {
    /// A world of 3 clusters with no project, no labels and gRPC-registered controllers.
    #[must_use]
    pub fn builder() -> WorldBuilder {
        WorldBuilder {
            clusters: 3,
            ready_delay: Duration::from_millis(100),
            resources: None,
            contexts: None,
            controllers: None,
            tune: None,
            start_engine: true,
            project: None,
            provider: PROVIDER.to_owned(),
            labels: |_| Vec::new(),
        }
    }

    /// The fleet's cluster names, `c1` .. `cN`.
    #[must_use]
    pub fn cluster_names(&self) -> Vec<String> {
        self.fleet.cluster_names()
    }

    /// Writes `data` to the file `name` in the world's directory and returns its path.
    ///
    /// # Panics
    /// When the file cannot be written.
    #[must_use]
    pub fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, data).expect("the file is written");
        path
    }

    /// Another orchestrator on the world's stores, as the next process after a crash (or another
    /// replica) has: same stores and fast rsync, repairing cut-short hand-overs without a grace
    /// period. Not started.
    ///
    /// # Panics
    /// When it cannot be built.
    #[must_use]
    pub fn restarted(&self) -> Orchestrator {
        self.restarted_with(|r| r)
    }

    /// [`Self::restarted`] with the in-process controllers `registry` adds.
    ///
    /// # Panics
    /// When it cannot be built.
    #[must_use]
    pub fn restarted_with(
        &self,
        registry: impl FnOnce(ControllerRegistry) -> ControllerRegistry + Send + 'static,
    ) -> Orchestrator {
        Orchestrator::builder(Arc::clone(self.orch.store()))
            .contexts(Arc::clone(self.orch.contexts()))
            .rsync(fast_rsync)
            .reconcile_grace(Duration::ZERO)
            .controllers(on_stores(registry))
            .build()
            .expect("the orchestrator builds")
    }

    /// Stops the engine and the fleet.
    ///
    /// # Panics
    /// When the fleet does not stop.
    pub async fn stop(self) {
        self.cancel.cancel();
        self.fleet
            .stop(Duration::from_secs(1))
            .await
            .expect("the fleet stops");
    }
}

impl Drop for World {
    /// The engine stops with the world, also when a test fails half-way.
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
