//! Onboarding: the objects a deployment is made of, and the fleet it goes to. Projects,
//! composite apps with their apps (each with its Helm chart), profiles, deployment intent groups
//! and their intents, controllers, cluster providers and clusters (each with its kubeconfig),
//! labels, kv-pairs, logical clouds and their references, ncm's networks.
//!
//! Plain objects are typed [`Collection`]s whose hooks add EMCO's checks beyond parent/child
//! integrity; objects with a file and composite apps (keyed by name and version) have their own
//! methods. Nothing here deploys: see [`crate::Deployments`] and [`crate::LogicalClouds`].

use std::path::Path;
use std::sync::Arc;

use emco_appcontext::collection::{Collection, NoHook, Wording};
use emco_core::drift::DriftPolicy;
use emco_core::model::{
    App, AppDependency, AppProfile, ClmController, Cluster, ClusterLabel, ClusterProvider,
    ClusterQuota, ClusterReference, ClusterWithLabels, CompositeApp, CompositeProfile, Controller,
    DeploymentIntentGroup, DigIntent, GenericPlacementIntent, KvPair, LogicalCloud, Network,
    Project, ProviderNetwork, UserPermission,
};
use emco_core::placement::AppPlacementIntent;
use emco_core::rollout::RolloutPolicy;
use emco_core::{Error, ErrorKind, Result, Validate};
use emco_store::{AppContextStore, ResourceKey, ResourceStore, file_blob_stream};
use serde::Serialize;

use crate::upload::{self, Limits};
use crate::{builder, cacerts, from_value, hooks, keys, ncm, to_value, wording};
use emco_core::model::cacert::{CaCert, CaCertClusterGroup, CaCertLogicalCloud};

/// The onboarding service: every object of the resource store, checked as EMCO checks it.
/// Cheap to clone; clones share the stores.
#[derive(Debug, Clone)]
pub struct Onboarding {
    store: Arc<dyn ResourceStore>,
    /// The collections' hooks refuse deleting what a live AppContext still uses.
    contexts: Arc<dyn AppContextStore>,
    limits: Limits,
}

macro_rules! collections {
    ($($(#[$doc:meta])* $fn:ident: $ty:ty = $kind:expr, $hook:ty, $wording:path;)+) => {
        $($(#[$doc])* #[must_use]
        pub fn $fn(&self) -> Collection<$ty> {
            Collection::new(Arc::clone(&self.store), $kind)
                .with_hook(<$hook as hooks::NewHook>::new_hook(&self.contexts))
                .with_wording($wording())
        })+
    };
}

/// What a file-carrying object was stored with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileCheck {
    Chart,
    Profile,
    Kubeconfig,
}

impl Onboarding {
    pub(crate) fn new(
        store: Arc<dyn ResourceStore>,
        contexts: Arc<dyn AppContextStore>,
        limits: Limits,
    ) -> Self {
        Self {
            store,
            contexts,
            limits,
        }
    }

    /// The resource store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn ResourceStore> {
        &self.store
    }

    /// The upload limits.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    collections! {
        /// Projects (parent: the root).
        projects: Project = keys::PROJECT, NoHook, wording::project;
        /// App dependencies (parent: an app); `spec.app` must be another app of the composite app.
        app_dependencies: AppDependency = keys::DEPENDENCY, hooks::DependencyHook, wording::app_dependency;
        /// Composite profiles (parent: a composite app).
        composite_profiles: CompositeProfile = keys::COMPOSITE_PROFILE, NoHook, wording::composite_profile;
        /// Deployment intent groups (parent: a composite app), with their lifecycle record.
        deployment_intent_groups: DeploymentIntentGroup = keys::DIG, hooks::DigHook, wording::deployment_intent_group;
        /// DIG intents (parent: a deployment intent group).
        dig_intents: DigIntent = keys::GROUP_INTENT, NoHook, wording::dig_intent;
        /// Generic placement intents (parent: a deployment intent group).
        generic_placement_intents: GenericPlacementIntent = keys::GENERIC_PLACEMENT_INTENT, NoHook, wording::generic_placement_intent;
        /// App placement intents (parent: a generic placement intent).
        app_placement_intents: AppPlacementIntent = keys::APP_INTENT, NoHook, wording::app_intent;
        /// Rollout policies (parent: a deployment intent group; at most one each).
        rollout_policies: RolloutPolicy = keys::ROLLOUT_POLICY, hooks::RolloutPolicyHook, wording::rollout_policy;
        /// Drift policies (parent: a deployment intent group; at most one each).
        drift_policies: DriftPolicy = keys::DRIFT_POLICY, hooks::DriftPolicyHook, wording::drift_policy;
        /// Registered controllers (parent: the root).
        controllers: Controller = keys::CONTROLLER, NoHook, wording::controller;
        /// Registered clm controllers (parent: the root).
        clm_controllers: ClmController = keys::CLM_CONTROLLER, NoHook, wording::clm_controller;
        /// Cluster providers (parent: the root).
        cluster_providers: ClusterProvider = keys::CLUSTER_PROVIDER, NoHook, wording::cluster_provider;
        /// Cluster labels (parent: a cluster); keyed by the label itself.
        cluster_labels: ClusterLabel = keys::CLUSTER_LABEL, NoHook, wording::cluster_label;
        /// GitOps cluster sync objects (parent: a cluster provider): the repository settings
        /// of GitOps clusters, as kv-pairs (see [`crate::StoreClusterResolver`]).
        cluster_sync_objects: KvPair = builder::CLUSTER_SYNC_OBJECT, NoHook, wording::cluster_sync_object;
        /// Kv-pairs of a cluster (parent: a cluster).
        kv_pairs: KvPair = keys::KV_PAIR, NoHook, wording::cluster_kv_pair;
        /// Logical clouds (parent: a project), with EMCO's defaults filled in.
        logical_clouds: LogicalCloud = keys::LOGICAL_CLOUD, hooks::LogicalCloudHook, wording::logical_cloud;
        /// Logical cloud cluster references (parent: a logical cloud).
        cluster_references: ClusterReference = keys::CLUSTER_REFERENCE, NoHook, wording::cluster_reference;
        /// Logical cloud user permissions (parent: a logical cloud).
        user_permissions: UserPermission = keys::USER_PERMISSION, NoHook, wording::user_permission;
        /// Logical cloud cluster quotas (parent: a logical cloud), none on an admin cloud.
        cluster_quotas: ClusterQuota = keys::CLUSTER_QUOTA, hooks::QuotaHook, wording::cluster_quota;
        /// Kv-pairs of a logical cloud (parent: a logical cloud).
        logical_cloud_kv_pairs: KvPair = keys::KV_PAIR, NoHook, wording::logical_cloud_kv_pair;
        /// ncm's networks of a cluster (parent: a cluster), fixed while they are applied.
        networks: Network = keys::NETWORK, ncm::NetworkHook, wording::network;
        /// ncm's provider networks of a cluster (parent: a cluster), fixed while applied.
        provider_networks: ProviderNetwork = keys::PROVIDER_NETWORK, ncm::ProviderNetworkHook, wording::provider_network;
        /// ca-certs' CA certificate intents (parent: a cluster provider or a project), with
        /// their enrollment and distribution records.
        ca_certs: CaCert = keys::CA_CERT, cacerts::CaCertHook, cacerts::ca_cert;
        /// ca-certs' cluster groups (parent: a certificate, or a certificate's logical cloud).
        ca_cert_cluster_groups: CaCertClusterGroup = keys::CA_CERT_CLUSTER_GROUP, NoHook, cacerts::cluster_group;
        /// ca-certs' logical clouds of a project's certificate (parent: the certificate).
        ca_cert_logical_clouds: CaCertLogicalCloud = keys::CA_CERT_LOGICAL_CLOUD, NoHook, cacerts::logical_cloud;
    }

    /// Apps, for get, list and delete (create and replace go through [`Self::create_app`] and
    /// [`Self::put_app`], which take the chart).
    #[must_use]
    pub fn apps(&self) -> Collection<App> {
        Collection::new(Arc::clone(&self.store), keys::APP).with_wording(wording::app())
    }

    /// App profiles, for get, list and delete (see [`Self::create_app_profile`]).
    #[must_use]
    pub fn app_profiles(&self) -> Collection<AppProfile> {
        Collection::new(Arc::clone(&self.store), keys::APP_PROFILE)
            .with_wording(wording::app_profile())
    }

    /// Clusters, for get, list and delete (see [`Self::create_cluster`]); a delete is refused
    /// while the cluster's networks are applied.
    #[must_use]
    pub fn clusters(&self) -> Collection<Cluster> {
        Collection::new(Arc::clone(&self.store), keys::CLUSTER)
            .with_hook(<ncm::ClusterHook as hooks::NewHook>::new_hook(
                &self.contexts,
            ))
            .with_wording(wording::cluster())
    }

    // ---- composite apps: keyed by name and version ----

    /// Creates a composite app in `project`.
    ///
    /// # Errors
    /// InvalidArgument, NotFound (project), AlreadyExists.
    pub async fn create_composite_app(&self, project: &str, ca: &CompositeApp) -> Result<()> {
        ca.validate()?;
        let key = keys::composite_app(project, &ca.metadata.name, &ca.spec.composite_app_version);
        self.store
            .create(&key, &to_value(ca)?)
            .await
            .map_err(|e| wording::composite_app().write_error(e))
    }

    /// The composite app `name` at `version`.
    ///
    /// # Errors
    /// NotFound.
    pub async fn get_composite_app(
        &self,
        project: &str,
        name: &str,
        version: &str,
    ) -> Result<CompositeApp> {
        let key = keys::composite_app(project, name, version);
        match self.store.get(&key).await? {
            Some(v) => from_value(&key, v),
            None => Err(wording::composite_app().missing()),
        }
    }

    /// Every composite app (all versions) of `project`.
    ///
    /// # Errors
    /// NotFound when the project does not exist.
    pub async fn list_composite_apps(&self, project: &str) -> Result<Vec<CompositeApp>> {
        let key = keys::project(project);
        if self.store.get(&key).await?.is_none() {
            return Err(self.projects().wording().missing());
        }
        self.store
            .list(&key, keys::COMPOSITE_APP, &[])
            .await?
            .into_iter()
            .map(|(k, v)| from_value(&k, v))
            .collect()
    }

    /// Creates or replaces the composite app `name` at `version`; returns whether it was created.
    ///
    /// # Errors
    /// InvalidArgument (also when the body's name or version differ from the URL's), NotFound.
    pub async fn put_composite_app(
        &self,
        project: &str,
        name: &str,
        version: &str,
        ca: &CompositeApp,
    ) -> Result<bool> {
        ca.validate()?;
        wording::composite_app().check_put_name(&ca.metadata.name, name)?;
        if ca.spec.composite_app_version != version {
            return Err(Error::invalid(format!(
                "version {:?} does not match the URL's {version:?}",
                ca.spec.composite_app_version
            ))
            .with_field("spec.compositeAppVersion"));
        }
        let key = keys::composite_app(project, name, version);
        let doc = to_value(ca)?;
        if self.store.get(&key).await?.is_some() {
            self.store.update(&key, &doc).await?;
            return Ok(false);
        }
        match self.store.create(&key, &doc).await {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                self.store.update(&key, &doc).await.map(|()| false)
            }
            Err(e) => Err(wording::composite_app().write_error(e)),
        }
    }

    /// Deletes the composite app `name` at `version`.
    ///
    /// # Errors
    /// NotFound; Conflict while it has apps, profiles or deployment intent groups.
    pub async fn delete_composite_app(
        &self,
        project: &str,
        name: &str,
        version: &str,
    ) -> Result<()> {
        let key = keys::composite_app(project, name, version);
        self.store
            .delete(&key)
            .await
            .map_err(|e| wording::composite_app().delete_error(e))
    }

    // ---- objects with a file ----

    async fn check_file(&self, check: FileCheck, file: &Path) -> Result<()> {
        let limits = self.limits;
        let file = file.to_owned();
        tokio::task::spawn_blocking(move || match check {
            FileCheck::Chart => upload::check_chart(&file, &limits),
            FileCheck::Profile => upload::check_profile(&file, &limits).map(|_| ()),
            FileCheck::Kubeconfig => upload::check_kubeconfig(&file, &limits),
        })
        .await
        .map_err(|e| Error::internal("an upload check failed").with_source(e))?
    }

    /// Writes `object` at `key` (created or replaced) and then its file, streamed; a create
    /// whose file cannot be stored is undone. Returns whether the object was created.
    async fn write_with_file<T: Serialize>(
        &self,
        key: &ResourceKey,
        object: &T,
        file: Option<&Path>,
        replace: bool,
        wording: &Wording,
    ) -> Result<bool> {
        let doc = to_value(object)?;
        let created = if replace && self.store.get(key).await?.is_some() {
            self.store.update(key, &doc).await?;
            false
        } else {
            self.store
                .create(key, &doc)
                .await
                .map_err(|e| wording.write_error(e))?;
            true
        };
        if let Some(file) = file {
            let stored = async {
                self.store
                    .put_blob(key, keys::FILE_BLOB, file_blob_stream(file).await?)
                    .await
            };
            if let Err(e) = stored.await {
                if created && let Err(undo) = self.store.delete(key).await {
                    tracing::warn!(%key, error = %undo, "cannot undo a failed upload");
                }
                return Err(e);
            }
        } else if !created {
            self.store.delete_blob(key, keys::FILE_BLOB).await?;
        }
        Ok(created)
    }

    /// Creates `app` in the composite app `ca` with its Helm chart, a `.tgz` at `chart`
    /// (checked, then streamed to the store).
    ///
    /// # Errors
    /// InvalidArgument for a bad app or chart; NotFound; AlreadyExists.
    pub async fn create_app(&self, ca: &ResourceKey, app: &App, chart: &Path) -> Result<()> {
        app.validate()?;
        self.check_file(FileCheck::Chart, chart).await?;
        let key = ca.child(keys::APP, app.metadata.name.as_str());
        self.write_with_file(&key, app, Some(chart), false, &wording::app())
            .await
            .map(|_| ())
    }

    /// Creates or replaces the app `name` of `ca` and its chart; returns whether it was created.
    ///
    /// # Errors
    /// As [`Self::create_app`]; InvalidArgument when the names differ.
    pub async fn put_app(
        &self,
        ca: &ResourceKey,
        name: &str,
        app: &App,
        chart: &Path,
    ) -> Result<bool> {
        app.validate()?;
        wording::app().check_put_name(&app.metadata.name, name)?;
        self.check_file(FileCheck::Chart, chart).await?;
        self.write_with_file(
            &ca.child(keys::APP, name),
            app,
            Some(chart),
            true,
            &wording::app(),
        )
        .await
    }

    /// Creates `profile` in the composite profile `cp` with its archive at `file`; `spec.app`
    /// must be an app of the composite app without a profile in `cp` yet.
    ///
    /// # Errors
    /// InvalidArgument for a bad profile or archive; NotFound; AlreadyExists (the name, or the
    /// app's profile).
    pub async fn create_app_profile(
        &self,
        cp: &ResourceKey,
        profile: &AppProfile,
        file: &Path,
    ) -> Result<()> {
        self.check_profile(cp, profile, file).await?;
        // One profile per app (src/orchestrator/pkg/module/app_profile.go CreateAppProfile);
        // a profile of the same name is the duplicate the write reports.
        let filter = emco_store::Filter::eq("spec.app", profile.spec.app.as_str());
        if self
            .app_profiles()
            .list(cp, &[filter])
            .await?
            .iter()
            .any(|other| other.metadata.name != profile.metadata.name)
        {
            return Err(Error::already_exists("App already has an AppProfile"));
        }
        let key = cp.child(keys::APP_PROFILE, profile.metadata.name.as_str());
        self.write_with_file(&key, profile, Some(file), false, &wording::app_profile())
            .await
            .map(|_| ())
    }

    /// Creates or replaces the app profile `name` of `cp`; returns whether it was created.
    ///
    /// # Errors
    /// As [`Self::create_app_profile`]; InvalidArgument when the names differ.
    pub async fn put_app_profile(
        &self,
        cp: &ResourceKey,
        name: &str,
        profile: &AppProfile,
        file: &Path,
    ) -> Result<bool> {
        wording::app_profile().check_put_name(&profile.metadata.name, name)?;
        self.check_profile(cp, profile, file).await?;
        self.write_with_file(
            &cp.child(keys::APP_PROFILE, name),
            profile,
            Some(file),
            true,
            &wording::app_profile(),
        )
        .await
    }

    async fn check_profile(
        &self,
        cp: &ResourceKey,
        profile: &AppProfile,
        file: &Path,
    ) -> Result<()> {
        profile.validate()?;
        if self.store.get(cp).await?.is_none() {
            return Err(wording::composite_profile().missing());
        }
        let ca = cp.parent().unwrap_or_default();
        hooks::must_exist(
            self.store.as_ref(),
            &ca.child(keys::APP, profile.spec.app.as_str()),
            "app",
        )
        .await?;
        self.check_file(FileCheck::Profile, file).await
    }

    /// The profile of `app` in the composite profile `cp`.
    ///
    /// # Errors
    /// NotFound when there is none.
    pub async fn profile_for_app(&self, cp: &ResourceKey, app: &str) -> Result<AppProfile> {
        let filter = emco_store::Filter::eq("spec.app", app);
        self.app_profiles()
            .list(cp, &[filter])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| wording::app_profile().missing())
    }

    async fn check_cluster(&self, cluster: &Cluster, kubeconfig: Option<&Path>) -> Result<()> {
        cluster.validate()?;
        match kubeconfig {
            Some(k) => self.check_file(FileCheck::Kubeconfig, k).await,
            None if cluster.needs_kubeconfig() => Err(Error::invalid(
                "a kubeconfig file is required unless spec.gitOps is set",
            )
            .with_field("file")),
            None => Ok(()),
        }
    }

    /// Registers `cluster` with `provider`, with its kubeconfig (required unless the cluster is
    /// reached through GitOps). The kubeconfig is checked and kept as a blob, never in the
    /// cluster's JSON.
    ///
    /// # Errors
    /// InvalidArgument for a bad cluster or kubeconfig; NotFound; AlreadyExists.
    pub async fn create_cluster(
        &self,
        provider: &str,
        cluster: &Cluster,
        kubeconfig: Option<&Path>,
    ) -> Result<()> {
        self.check_cluster(cluster, kubeconfig).await?;
        let key = keys::cluster(provider, &cluster.metadata.name);
        self.write_with_file(&key, cluster, kubeconfig, false, &wording::cluster())
            .await
            .map(|_| ())
    }

    /// Creates or replaces the cluster `name` of `provider`; returns whether it was created.
    ///
    /// # Errors
    /// As [`Self::create_cluster`]; InvalidArgument when the names differ.
    pub async fn put_cluster(
        &self,
        provider: &str,
        name: &str,
        cluster: &Cluster,
        kubeconfig: Option<&Path>,
    ) -> Result<bool> {
        wording::cluster().check_put_name(&cluster.metadata.name, name)?;
        self.check_cluster(cluster, kubeconfig).await?;
        self.write_with_file(
            &keys::cluster(provider, name),
            cluster,
            kubeconfig,
            true,
            &wording::cluster(),
        )
        .await
    }

    /// The names of the clusters of `provider` that carry `label`.
    ///
    /// # Errors
    /// NotFound when the provider does not exist.
    pub async fn clusters_with_label(&self, provider: &str, label: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for cluster in self
            .clusters()
            .list(&keys::cluster_provider(provider), &[])
            .await?
        {
            let key = keys::cluster(provider, &cluster.metadata.name);
            if self
                .store
                .get(&key.child(keys::CLUSTER_LABEL, label))
                .await?
                .is_some()
            {
                out.push(cluster.metadata.name);
            }
        }
        Ok(out)
    }

    /// The clusters of `provider` with their labels.
    ///
    /// # Errors
    /// NotFound when the provider does not exist.
    pub async fn clusters_with_labels(&self, provider: &str) -> Result<Vec<ClusterWithLabels>> {
        // One read for every cluster and label of the provider (a list per cluster otherwise).
        Ok(self
            .clusters()
            .list_with_children(&keys::cluster_provider(provider), &self.cluster_labels())
            .await?
            .into_iter()
            .map(|(cluster, labels)| ClusterWithLabels {
                metadata: cluster.metadata,
                labels,
            })
            .collect())
    }
}
