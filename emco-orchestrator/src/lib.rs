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
#[cfg(feature = "rest")]
pub mod rest;
pub mod runtime;
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

pub use dcm::LogicalClouds;
pub use emco_appcontext::keys;
pub use lifecycle::{
    Deployments, MigrateIntent, Preview, PreviewOptions, RollbackIntent, RolloutControl,
    RolloutMetrics,
};
pub use ncm::ClusterNetworks;
pub use onboarding::Onboarding;
pub use runtime::{CLUSTER_SYNC_OBJECT, OrchestratorBuilder, StoreClusterResolver};
pub use state::{load_state, save_state};
pub use status::Status;
pub use upload::Limits;
pub use watch::{StatusWatch, WatchTarget};

/// The facade: builds each service once over the same stores and rsync engine, and starts
/// them. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Orchestrator {
    core: runtime::Core,
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

    pub(crate) fn from_core(core: runtime::Core, helm: emco_helm::HelmCompat) -> Self {
        let deployments = Deployments::new(core.clone(), helm);
        let clouds = LogicalClouds::new(core.clone());
        let networks = ClusterNetworks::new(core.clone());
        let ca_certs = cacerts::CaCerts::new(core.clone());
        let status = Status::new(
            core.clone(),
            deployments.clone(),
            clouds.clone(),
            networks.clone(),
        );
        let groups = Arc::new(groups::DigGroups {
            status: status.clone(),
        });
        let linked: Arc<dyn emco_controller_sdk::Groups> = groups.clone();
        core.controller_registry().groups().bind(&linked);
        Self {
            core,
            deployments,
            clouds,
            networks,
            ca_certs,
            status,
            groups,
        }
    }

    /// Onboarding: every object of the resource store.
    #[must_use]
    pub fn onboarding(&self) -> &Onboarding {
        &self.core.objects
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
        self.core.objects.store()
    }

    /// The AppContext store.
    #[must_use]
    pub fn contexts(&self) -> &Arc<dyn AppContextStore> {
        self.core.contexts()
    }

    /// The rsync engine.
    #[must_use]
    pub fn rsync(&self) -> &Rsync {
        self.core.rsync()
    }

    /// The controller registry.
    #[must_use]
    pub fn controller_registry(&self) -> &Arc<ControllerRegistry> {
        self.core.controller_registry()
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
