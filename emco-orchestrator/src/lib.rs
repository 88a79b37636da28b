//! # emco-orchestrator
//!
//! EMCO's service layer as a library, as narrow services that a thin [`Orchestrator`] facade
//! builds over one resource store, one AppContext store and one rsync engine:
//!
//! - [`Onboarding`]: projects, composite apps, apps, profiles, deployment intent groups and
//!   their intents, cluster providers and clusters, logical clouds and the controller registry;
//! - [`Deployments`]: the lifecycle of a deployment intent group: approve, instantiate, update,
//!   rollback, migrate, stop and terminate ([`lifecycle`]);
//! - [`LogicalClouds`]: dcm's logical cloud lifecycle ([`dcm`]);
//! - [`ClusterNetworks`]: ncm's network lifecycle of a cluster ([`ncm`]);
//! - [`Status`]: the status of each, once or as a watch ([`status`], [`watch`]).
//!
//! The REST server ([`rest::router`], feature `rest`), the gRPC services and the Python bindings
//! all call them. Every object lives in a [`ResourceStore`] under the key its REST URL names
//! (see [`keys`]).
//!
//! ```
//! use std::sync::Arc;
//! use emco_store::{InMemoryResourceStore, ResourceKey};
//! use emco_core::{Metadata, model::Project};
//! use emco_orchestrator::Orchestrator;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let orch = Orchestrator::new(Arc::new(InMemoryResourceStore::new()));
//! let projects = orch.onboarding().projects();
//! projects.create(&ResourceKey::root(), &Project { metadata: Metadata::named("p1") }).await?;
//! assert_eq!(projects.get(&ResourceKey::root(), "p1").await?.metadata.name, "p1");
//! assert!(projects.get(&ResourceKey::root(), "p2").await.is_err());
//! # Ok::<(), emco_core::Error>(())
//! # }).unwrap();
//! ```

pub mod auth;
pub mod builder;
pub mod cacerts;
pub mod dcm;
mod groups;
mod handover;
mod hooks;
pub mod lifecycle;
pub mod ncm;
pub mod notify;
mod onboarding;
mod reconcile;
mod records;
#[cfg(feature = "rest")]
pub mod rest;
mod state;
pub mod status;
pub mod upload;
pub mod watch;
mod wording;

use std::sync::Arc;

use emco_controller_sdk::client::ControllerRegistry;
use emco_core::{Error, Result};
use emco_rsync::engine::Rsync;
use emco_store::{AppContextStore, ResourceKey, ResourceStore};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use builder::{CLUSTER_SYNC_OBJECT, OrchestratorBuilder, StoreClusterResolver};
pub use dcm::LogicalClouds;
pub use emco_appcontext::keys;
pub use lifecycle::{
    Deployments, MigrateIntent, Preview, PreviewOptions, RollbackIntent, RolloutControl,
    RolloutMetrics,
};
pub use ncm::ClusterNetworks;
pub use onboarding::Onboarding;
pub use state::{load_state, save_state};
pub use status::Status;
pub use upload::Limits;
pub use watch::{StatusWatch, WatchTarget};

/// The facade: builds each service once over the same stores and rsync engine, and starts
/// them. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Orchestrator {
    records: records::Records,
    controllers: Arc<ControllerRegistry>,
    /// How long [`Orchestrator::start`] lets live hand-overs finish before it queues the ones a
    /// crash cut short (see [`Orchestrator::reconcile`]).
    reconcile_grace: std::time::Duration,
    deployments: Deployments,
    clouds: LogicalClouds,
    networks: ClusterNetworks,
    ca_certs: cacerts::CaCerts,
    status: Status,
    /// What the in-process action controllers reach through their weak [`GroupsLink`]: kept
    /// alive as long as the orchestrator.
    ///
    /// [`GroupsLink`]: emco_controller_sdk::GroupsLink
    groups: Arc<groups::DigGroups>,
}

impl Orchestrator {
    /// An orchestrator over `store` with the default [`Limits`], an in-memory AppContext store
    /// and controllers called over gRPC; see [`Orchestrator::builder`] for the rest.
    #[must_use]
    pub fn new(store: Arc<dyn ResourceStore>) -> Self {
        Self::builder(store)
            .build()
            .expect("the default rsync engine has its store and resolver")
    }

    /// A builder for an orchestrator over `store`.
    #[must_use]
    pub fn builder(store: Arc<dyn ResourceStore>) -> OrchestratorBuilder {
        OrchestratorBuilder::new(store)
    }

    /// Gives each service what it uses.
    pub(crate) fn assemble(
        records: records::Records,
        controllers: Arc<ControllerRegistry>,
        any_of: Arc<dyn emco_core::placement::AnyOfStrategy>,
        history: Option<usize>,
        reconcile_grace: std::time::Duration,
        helm: emco_helm::HelmCompat,
    ) -> Self {
        let deployments = Deployments::new(
            records.clone(),
            Arc::clone(&controllers),
            any_of,
            history,
            helm,
        );
        let clouds = LogicalClouds::new(records.clone());
        let networks = ClusterNetworks::new(records.clone());
        let ca_certs = cacerts::CaCerts::new(records.clone());
        let status = Status::new(
            records.clone(),
            deployments.clone(),
            clouds.clone(),
            networks.clone(),
        );
        let groups = Arc::new(groups::DigGroups {
            status: status.clone(),
        });
        let linked: Arc<dyn emco_controller_sdk::Groups> = groups.clone();
        controllers.groups().bind(&linked);
        Self {
            records,
            controllers,
            reconcile_grace,
            deployments,
            clouds,
            networks,
            ca_certs,
            status,
            groups,
        }
    }

    /// Resumes every deployment an earlier process left running, and in the background queues
    /// the hand-overs a crash cut short ([`Self::reconcile`]); `cancel` shuts the engine down.
    ///
    /// # Errors
    /// The AppContext store's errors.
    pub async fn start(&self, cancel: CancellationToken) -> Result<()> {
        self.records.set_shutdown(cancel.clone());
        self.rsync().start(cancel.clone()).await?;
        // Credentials of standard logical clouds whose issuing an earlier process left unfinished.
        let resumed = self.clouds().resume().await?;
        if resumed > 0 {
            tracing::info!(resumed, "resumed issuing logical cloud credentials");
        }
        // Rollouts an earlier process (or a replica that died) left running, and those started
        // elsewhere from now on.
        let deployments = self.deployments().clone();
        let supervised = cancel.clone();
        tokio::spawn(async move { deployments.supervise_rollouts(supervised).await });
        // Likewise the held contexts' waits.
        let deployments = self.deployments().clone();
        let supervised = cancel.clone();
        tokio::spawn(async move { deployments.supervise_holds(supervised).await });
        let orch = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                done = orch.reconcile(orch.reconcile_grace) => match done {
                    Ok(0) => {}
                    Ok(queued) => tracing::info!(queued, "queued hand-overs a crash cut short"),
                    Err(e) => tracing::warn!(error = %e, "cannot look for cut-short hand-overs"),
                },
            }
        });
        Ok(())
    }

    /// Onboarding: every object of the resource store.
    #[must_use]
    pub fn onboarding(&self) -> &Onboarding {
        &self.records.objects
    }

    /// The lifecycle of deployment intent groups.
    #[must_use]
    pub fn deployments(&self) -> &Deployments {
        &self.deployments
    }

    /// The lifecycle of logical clouds (dcm).
    #[must_use]
    pub fn clouds(&self) -> &LogicalClouds {
        &self.clouds
    }

    /// The network lifecycle of clusters (ncm).
    #[must_use]
    pub fn cluster_networks(&self) -> &ClusterNetworks {
        &self.networks
    }

    /// The lifecycles of CA certificates (ca-certs).
    #[must_use]
    pub fn ca_certs(&self) -> &cacerts::CaCerts {
        &self.ca_certs
    }

    /// The lifecycle of deployment intent groups as controllers drive it (the one their
    /// [`ControllerContext::groups`] reaches).
    ///
    /// [`ControllerContext::groups`]: emco_controller_sdk::ControllerContext::groups
    #[must_use]
    pub fn groups(&self) -> Arc<dyn emco_controller_sdk::Groups> {
        self.groups.clone()
    }

    /// The status of deployments, logical clouds and cluster networks.
    #[must_use]
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The resource store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn ResourceStore> {
        self.records.objects.store()
    }

    /// The AppContext store.
    #[must_use]
    pub fn contexts(&self) -> &Arc<dyn AppContextStore> {
        self.records.contexts()
    }

    /// The rsync engine.
    #[must_use]
    pub fn rsync(&self) -> &Rsync {
        self.records.rsync()
    }

    /// The controller registry.
    #[must_use]
    pub fn controller_registry(&self) -> &Arc<ControllerRegistry> {
        &self.controllers
    }
}

pub(crate) fn to_value<T: Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::internal("cannot serialize an object").with_source(e))
}

pub(crate) fn from_value<T: DeserializeOwned>(
    key: &ResourceKey,
    value: serde_json::Value,
) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| Error::internal(format!("stored object {key} is malformed")).with_source(e))
}
