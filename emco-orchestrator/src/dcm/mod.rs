//! dcm: the lifecycle of logical clouds (instantiate, terminate, stop, update, status) and the
//! kubeconfigs generated for standard and privileged logical clouds.
//!
//! A logical cloud's lifecycle record is kept beside it like a deployment intent group's: the
//! blob `state` holding a [`StateInfo`], with EMCO's states
//! (no record yet reads as Created):
//!
//! | operation | allowed from | to |
//! |---|---|---|
//! | instantiate | Created, Terminated, TerminateStopped | Instantiated |
//! | terminate | Instantiated, Updated, InstantiateStopped, TerminateStopped (Created: a no-op, as dcm) | Terminated |
//! | stop | Instantiated, Updated / Terminated | InstantiateStopped / TerminateStopped |
//! | update | Instantiated, Updated | Updated |
//!
//! A refusal is Conflict (409) with dcm's text. Terminate is also refused while a deployment
//! intent group of the cloud is deployed.
//!
//! An admin cloud (level 0) deploys nothing: its deployments use the clusters' own credentials.
//! A standard or privileged cloud (level 1) is one AppContext with one app
//! ([`LC_APP`]) whose resources on each referenced cluster are listed in `dcm/manifests.rs`; rsync
//! applies it with the clusters' admin credentials (meta `Level` "0"). The user's certificates
//! are then requested, approved and turned into per-cluster kubeconfigs in the background (see
//! `dcm/credentials.rs`); the cloud is ready for deployments once every cluster has its kubeconfig.
//! Update deploys a new context (permissions and quotas as they are now, new clusters with new
//! requests, the other clusters keeping theirs) and rsync removes what it no longer has.

pub(crate) mod credentials;
pub(crate) mod manifests;
mod status;

use std::collections::BTreeMap;
use std::sync::Arc;

use emco_appcontext::AppContext;
use emco_appcontext::context::{AppContextStatus, CompositeAppMeta, ContextWriter};
use emco_core::ClusterRef;
use emco_core::lifecycle::{DigState, StateInfo};
use emco_core::model::{ClusterReference, LogicalCloud};
use emco_core::{Error, Found, LogicalCloudRef, Result};
use emco_store::{Filter, ResourceKey};

pub use status::{LogicalCloudStatus, LogicalCloudStatusQuery};

use crate::builder::{LOGICAL_CLOUD_KUBECONFIG_BLOB, read_text_blob};
use crate::records::Records;
use crate::state::{OnCurrent, Record, decide_again, deploy_fresh, state_or_new};
use crate::{Onboarding, from_value, keys};

/// The one app of a logical cloud's AppContext.
pub const LC_APP: &str = "logical-cloud";

/// Where the deployment intent groups of one logical cloud deploy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployCloud {
    /// The logical cloud's name.
    pub name: String,
    /// The namespace its apps go into (`default` for an admin cloud without one).
    pub namespace: String,
    /// `"0"` (admin: the clusters' own credentials) or `"1"` (standard or privileged: the
    /// credentials dcm generated for the cloud).
    pub level: String,
    /// Its clusters as `(provider, cluster)`, in the order of their references' names.
    pub clusters: Vec<(String, String)>,
}

/// The logical cloud `cloud` of `project`, which deployments may use only once it is
/// instantiated (or updated since).
///
/// # Errors
/// NotFound when it does not exist; FailedPrecondition when it is not instantiated, or (level
/// 1) while a cluster still lacks the cloud's kubeconfig.
pub async fn cloud_for_deployment(
    orch: &Onboarding,
    project: &str,
    cloud: &str,
) -> Result<DeployCloud> {
    let key = keys::logical_cloud(project, cloud);
    let lc: LogicalCloud = match orch.store().get(&key).await? {
        Some(v) => from_value(&key, v)?,
        None => {
            return Err(Error::not_found(format!(
                "logical cloud {cloud:?} does not exist"
            )));
        }
    };
    let state = crate::state::load_state(orch.store().as_ref(), &key)
        .await
        .found()?
        .map_or(DigState::Created, |s| s.current_state());
    // An updated cloud is as instantiated as before, with its latest permissions and quotas.
    if !matches!(state, DigState::Instantiated | DigState::Updated) {
        return Err(Error::failed_precondition(format!(
            "logical cloud {cloud:?} is {state}, not instantiated; instantiate it first"
        )));
    }
    let mut clusters = Vec::new();
    for (k, v) in orch
        .store()
        .list(&key, keys::CLUSTER_REFERENCE, &[])
        .await?
    {
        let r: ClusterReference = from_value(&k, v)?;
        if !lc.is_admin() && !credentials::has_kubeconfig(orch.store().as_ref(), &k).await? {
            return Err(Error::failed_precondition(format!(
                "logical cloud {cloud:?} is still being instantiated: cluster {}+{} has no \
                 kubeconfig for it yet (a cluster referenced since needs an update of the cloud)",
                r.spec.cluster_provider, r.spec.cluster
            )));
        }
        clusters.push((r.spec.cluster_provider, r.spec.cluster));
    }
    let namespace = if lc.spec.namespace.is_empty() {
        ADMIN_NAMESPACE.to_owned()
    } else {
        lc.spec.namespace.clone()
    };
    Ok(DeployCloud {
        name: cloud.to_owned(),
        namespace,
        level: lc.spec.level,
        clusters,
    })
}

/// A lifecycle operation on a logical cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Instantiate,
    Terminate,
    Stop,
    Update,
}

/// The state `op` leads to from `state` (see the module table); `None` when there is nothing to
/// do. Refusals are worded as dcm's (src/dcm/api/apierrors.go, src/dcm/pkg/module/apply.go).
fn next_state(state: DigState, op: Op) -> Result<Option<DigState>> {
    use DigState as S;
    let refuse = |text: &str| Err(Error::conflict(text.to_owned()));
    match (op, state) {
        // Approved and Applied are not states of logical clouds; a record carrying one reads
        // as Created.
        (Op::Instantiate, S::Created | S::Approved | S::Terminated | S::TerminateStopped) => {
            Ok(Some(S::Instantiated))
        }
        (Op::Instantiate, _) => refuse("The Logical Cloud is already instantiated"),
        (
            Op::Terminate,
            S::Instantiated | S::Updated | S::InstantiateStopped | S::TerminateStopped,
        ) => Ok(Some(S::Terminated)),
        (Op::Terminate, S::Terminated) => refuse("The Logical Cloud has already been terminated"),
        // dcm terminates a cloud it never instantiated as a no-op.
        (Op::Terminate, S::Created | S::Approved | S::Applied) => Ok(None),
        (Op::Stop, S::Instantiated | S::Updated) => Ok(Some(S::InstantiateStopped)),
        (Op::Stop, S::Terminated) => Ok(Some(S::TerminateStopped)),
        // dcm's texts end in a space where its callers meant to add the name.
        (Op::Stop, S::InstantiateStopped) => refuse("LogicalCloud instantiation already stopped: "),
        (Op::Stop, S::TerminateStopped) => refuse("LogicalCloud termination already stopped: "),
        (Op::Stop, S::Created | S::Approved | S::Applied) => {
            refuse("LogicalCloud has not been asked to instantiate: ")
        }
        (Op::Update, S::Instantiated | S::Updated) => Ok(Some(S::Updated)),
        // dcm updates only an instantiated cloud and answers any other state with a success
        // that does nothing (src/dcm/pkg/module/logicalcloud.go UpdateInstantiation).
        (Op::Update, _) => Ok(None),
    }
}

/// A lifecycle operation on a logical cloud without cluster references (dcm's
/// `GetAllClusters`, src/dcm/api/apierrors.go: a 400).
fn no_references() -> Error {
    Error::invalid("No Cluster References associated")
}

/// Adds `app` to a context as its only app, deployed at once (order and dependency `go`).
pub(crate) fn add_only_app(w: &mut ContextWriter, app: &str) -> Result<()> {
    w.add_app(app)?;
    w.set_app_order(&[app])?;
    w.set_app_dependency_instruction(&BTreeMap::from([(app.to_owned(), "go".to_owned())]))
}

/// The resources of one cluster of a one-app context: the cluster and its `(name, manifest)`
/// in deploy order.
pub(crate) type ClusterResources = (String, Vec<(String, String)>);

/// Writes `ctx` as one app `app` (see [`add_only_app`]) on each cluster with its resources in
/// order, status Created; a context that cannot be written is deleted.
///
/// # Errors
/// The store's errors.
pub(crate) async fn write_only_app(
    ctx: &AppContext,
    app: &str,
    clusters: &[ClusterResources],
) -> Result<()> {
    let written = async {
        let mut w = ctx.writer();
        add_only_app(&mut w, app)?;
        for (cluster, resources) in clusters {
            w.add_cluster(app, cluster, None)?;
            for (name, manifest) in resources {
                w.add_resource(app, cluster, name, manifest)?;
            }
            let order: Vec<&str> = resources.iter().map(|(n, _)| n.as_str()).collect();
            w.set_resource_order(app, cluster, &order)?;
        }
        w.set_status(AppContextStatus::Created)?;
        w.flush().await.map(drop)
    };
    if let Err(e) = written.await {
        ctx.discard().await;
        return Err(e);
    }
    Ok(())
}

/// The namespace an admin cloud reads after instantiate: the one clm gives every cluster.
pub const ADMIN_NAMESPACE: &str = "default";

/// The logical cloud service: dcm's lifecycle of logical clouds. Cheap to clone; clones share
/// everything.
#[derive(Debug, Clone)]
pub struct LogicalClouds {
    records: Records,
}

impl LogicalClouds {
    pub(crate) fn new(records: Records) -> Self {
        Self { records }
    }

    async fn logical_cloud(&self, project: &str, name: &str) -> Result<LogicalCloud> {
        self.records
            .objects
            .logical_clouds()
            .get(&keys::project(project), name)
            .await
    }

    /// The cluster references of a logical cloud, with their keys.
    async fn references(&self, lc: &ResourceKey) -> Result<Vec<(ResourceKey, ClusterReference)>> {
        self.records
            .store()
            .list(lc, keys::CLUSTER_REFERENCE, &[])
            .await?
            .into_iter()
            .map(|(k, v)| from_value(&k, v).map(|r| (k, r)))
            .collect()
    }

    /// The lifecycle record of logical cloud `name` (Created when it was never instantiated).
    ///
    /// # Errors
    /// NotFound when it does not exist.
    pub async fn state(&self, cloud: &LogicalCloudRef) -> Result<StateInfo> {
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        self.logical_cloud(project, name).await?;
        let info = state_or_new(
            self.records.store().as_ref(),
            &keys::logical_cloud(project, name),
        )
        .await?;
        if info.actions.is_empty() {
            return Ok(StateInfo::created(""));
        }
        Ok(info)
    }

    /// Instantiates logical cloud `name`: an admin cloud is marked Instantiated; a standard or
    /// privileged one has its namespace, roles, quotas and certificate requests deployed on
    /// every referenced cluster, and its kubeconfigs are completed in the background.
    ///
    /// # Errors
    /// NotFound; InvalidArgument without cluster references; Conflict in a wrong state or
    /// while the previous terminate still runs.
    pub async fn instantiate(&self, cloud: &LogicalCloudRef) -> Result<()> {
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        decide_again(|| self.instantiate_once(project, name)).await
    }

    async fn instantiate_once(&self, project: &str, name: &str) -> Result<()> {
        let key = keys::logical_cloud(project, name);
        let store = self.records.store().as_ref();
        let lc = self.logical_cloud(project, name).await?;
        // dcm's instantiateHandler reads the cluster references before the state.
        let references = self.references(&key).await?;
        if references.is_empty() {
            return Err(no_references());
        }
        let record = Record::load_or_new(store, &key).await?;
        let Some(to) = next_state(record.info.current_state(), Op::Instantiate)? else {
            return Ok(());
        };
        self.check_settled(name, &record.info).await?;
        // Claimed before its side effects (credentials, keys on the references): a concurrent
        // instantiate, here or in another replica, is refused by the record from now on.
        let claimed = record.append(store, &key, to, String::new(), 1).await?;
        let ctx = match self.instantiate_claimed(project, lc, &references).await {
            Ok(Some(ctx)) => ctx,
            Ok(None) => return Ok(()),
            Err(e) => {
                claimed.revert(store, &key, &record).await;
                return Err(e);
            }
        };
        // A terminate that took the claim meanwhile makes the fill fail: never deployed.
        let held = self.records.handover.lock(&key).await;
        // Again, now that no other operation of this process can queue work meanwhile.
        if let Err(e) = self.check_settled(name, &record.info).await {
            claimed.revert(store, &key, &record).await;
            ctx.discard().await;
            return Err(e);
        }
        let written = claimed.fill(store, &key, ctx.id().to_string()).await;
        let queued = self.records.rsync().instantiate(ctx.id());
        deploy_fresh(store, &key, written, &record, &ctx, queued).await?;
        drop(held);
        credentials::spawn_finisher(&self.records, project, name, ctx.id());
        Ok(())
    }

    /// Refuses to deploy cloud `name` again while rsync still works on (or has work queued for)
    /// the context its record names: the terminate of the previous deployment.
    async fn check_settled(&self, name: &str, state: &StateInfo) -> Result<()> {
        match self.records.load_context(state).await? {
            Some(previous) if previous.is_busy().await? => Err(Error::conflict(format!(
                "logical cloud {name:?} is still terminating; try again when it is done"
            ))),
            _ => Ok(()),
        }
    }

    /// The side effects of a claimed instantiate: the cloud's credentials are cleared, then an
    /// admin cloud gets the clusters' namespace (and no context), any other cloud the context
    /// to deploy.
    async fn instantiate_claimed(
        &self,
        project: &str,
        mut lc: LogicalCloud,
        references: &[(ResourceKey, ClusterReference)],
    ) -> Result<Option<AppContext>> {
        let key = keys::logical_cloud(project, &lc.metadata.name);
        credentials::clear(self.records.store().as_ref(), &key).await?;
        if !lc.is_admin() {
            return self
                .cloud_context(project, &lc, references, None)
                .await
                .map(Some);
        }
        // dcm stores the clusters' own namespace as the admin cloud's, and clm registers
        // every cluster with `default` (src/dcm/pkg/module/apply.go `Instantiate`,
        // src/clm/pkg/cluster/cluster.go `CreateCluster`).
        if lc.spec.namespace != ADMIN_NAMESPACE {
            ADMIN_NAMESPACE.clone_into(&mut lc.spec.namespace);
            let doc = serde_json::to_value(&lc)
                .map_err(|e| Error::internal("cannot serialize a logical cloud").with_source(e))?;
            self.records.store().update(&key, &doc).await?;
        }
        Ok(None)
    }

    /// Writes the AppContext of a level-1 cloud over `references`. A cluster whose request is
    /// in `carry` (the context being updated) keeps it; every other cluster gets a new key,
    /// kept pending on its reference, and a request named after the new context (so that it
    /// never meets an older request of the cloud still on the cluster).
    async fn cloud_context(
        &self,
        project: &str,
        lc: &LogicalCloud,
        references: &[(ResourceKey, ClusterReference)],
        carry: Option<&AppContext>,
    ) -> Result<AppContext> {
        let key = keys::logical_cloud(project, &lc.metadata.name);
        let permissions = self
            .records
            .objects
            .user_permissions()
            .list(&key, &[])
            .await?;
        let quotas = self
            .records
            .objects
            .cluster_quotas()
            .list(&key, &[])
            .await?;
        let objects = manifests::cloud_objects(project, lc, &permissions, &quotas)?;
        let meta = CompositeAppMeta {
            project: project.to_owned(),
            namespace: lc.spec.namespace.clone(),
            // rsync deploys the cloud itself with the clusters' admin credentials.
            level: emco_core::model::logical_cloud::LEVEL_ADMIN.to_owned(),
            logical_cloud: lc.metadata.name.clone(),
            logical_cloud_namespace: lc.spec.namespace.clone(),
            ..CompositeAppMeta::default()
        };
        let ctx = AppContext::create(Arc::clone(self.records.contexts()), &meta).await?;
        let csr_name = manifests::csr_name(project, &lc.metadata.name, ctx.id());
        let written = async {
            let mut pending = Vec::new();
            let mut w = ctx.writer();
            add_only_app(&mut w, LC_APP)?;
            for (ref_key, r) in references {
                let cluster =
                    ClusterRef::new(&r.spec.cluster_provider, &r.spec.cluster).to_string();
                w.add_cluster(LC_APP, &cluster, None)?;
                let mut order = Vec::with_capacity(objects.len() + 1);
                for m in &objects {
                    w.add_resource(LC_APP, &cluster, &m.key, &m.yaml)?;
                    order.push(m.key.clone());
                }
                let kept = match carry {
                    Some(old) => credentials::request_in(old, &cluster).await?,
                    None => None,
                };
                let (csr_key, csr_yaml) = match kept {
                    Some(kept) => kept,
                    None => {
                        let request = credentials::user_request(lc.user_name())?;
                        pending.push((ref_key.clone(), request.key_pem));
                        let m = manifests::csr(&csr_name, &request.csr_pem)?;
                        (m.key, m.yaml)
                    }
                };
                w.add_resource(LC_APP, &cluster, &csr_key, &csr_yaml)?;
                order.push(csr_key);
                let order: Vec<&str> = order.iter().map(String::as_str).collect();
                w.set_resource_order(LC_APP, &cluster, &order)?;
            }
            w.set_status(AppContextStatus::Created)?;
            w.flush().await?;
            for (ref_key, key_pem) in pending {
                credentials::put_text_blob(
                    self.records.store().as_ref(),
                    &ref_key,
                    credentials::PENDING_KEY_BLOB,
                    key_pem,
                )
                .await?;
            }
            Ok::<(), Error>(())
        };
        match written.await {
            Ok(()) => Ok(ctx),
            Err(e) => {
                ctx.discard().await;
                Err(e)
            }
        }
    }

    /// Terminates logical cloud `name`: its resources are removed from the clusters and its
    /// kubeconfigs and certificates are forgotten.
    ///
    /// # Errors
    /// NotFound; InvalidArgument without cluster references; Conflict in a wrong state or while
    /// a deployment intent group of the cloud is deployed.
    pub async fn terminate(&self, cloud: &LogicalCloudRef) -> Result<()> {
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        decide_again(|| self.terminate_once(project, name)).await
    }

    async fn terminate_once(&self, project: &str, name: &str) -> Result<()> {
        let key = keys::logical_cloud(project, name);
        let store = self.records.store().as_ref();
        self.logical_cloud(project, name).await?;
        // dcm's terminateHandler reads the cluster references before the state.
        if self.references(&key).await?.is_empty() {
            return Err(no_references());
        }
        let record = Record::load_or_new(store, &key).await?;
        let Some(to) = next_state(record.info.current_state(), Op::Terminate)? else {
            return Ok(());
        };
        self.check_no_deployments(project, name).await?;
        let context = self.records.load_context(&record.info).await?;
        let to = (to, record.info.latest_revision());
        self.records
            .append_on_current(&key, &record, to, context, OnCurrent::Terminate)
            .await?;
        credentials::clear(store, &key).await
    }

    /// Fails with Conflict while a deployment intent group of cloud `name` is deployed.
    async fn check_no_deployments(&self, project: &str, name: &str) -> Result<()> {
        for ca in self.records.objects.list_composite_apps(project).await? {
            let ca_key =
                keys::composite_app(project, &ca.metadata.name, &ca.spec.composite_app_version);
            let filter = Filter::eq("spec.logicalCloud", name);
            for dig in self
                .records
                .objects
                .deployment_intent_groups()
                .list(&ca_key, &[filter])
                .await?
            {
                let dig_key = ca_key.child(keys::DIG, dig.metadata.name.as_str());
                let state =
                    crate::state::load_state(self.records.store().as_ref(), &dig_key).await?;
                if state.current_state().is_deployed() {
                    return Err(Error::conflict(format!(
                        "deployment intent group {:?} of composite app {:?} uses logical cloud \
                         {name:?} and is {}; terminate it first",
                        dig.metadata.name,
                        ca.metadata.name,
                        state.current_state()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Stops the running instantiate, update or terminate of logical cloud `name`: rsync stops
    /// waiting and retrying.
    ///
    /// # Errors
    /// NotFound; Conflict when there is nothing to stop.
    pub async fn stop(&self, cloud: &LogicalCloudRef) -> Result<()> {
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        decide_again(|| self.stop_once(project, name)).await
    }

    async fn stop_once(&self, project: &str, name: &str) -> Result<()> {
        let key = keys::logical_cloud(project, name);
        let store = self.records.store().as_ref();
        self.logical_cloud(project, name).await?;
        let record = Record::load_or_new(store, &key).await?;
        let Some(to) = next_state(record.info.current_state(), Op::Stop)? else {
            return Ok(());
        };
        let context = self.records.load_context(&record.info).await?;
        let to = (to, record.info.latest_revision());
        self.records
            .append_on_current(&key, &record, to, context, OnCurrent::Stop)
            .await
    }

    /// Updates instantiated logical cloud `name` to its current user permissions, quotas and
    /// cluster references: a new AppContext replaces the running one through an rsync update.
    /// Returns the new revision.
    ///
    /// # Errors
    /// NotFound; InvalidArgument without cluster references; Conflict in a wrong state.
    pub async fn update(&self, cloud: &LogicalCloudRef) -> Result<i64> {
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        decide_again(|| self.update_once(project, name)).await
    }

    async fn update_once(&self, project: &str, name: &str) -> Result<i64> {
        let key = keys::logical_cloud(project, name);
        let store = self.records.store().as_ref();
        let lc = self.logical_cloud(project, name).await?;
        let record = Record::load_or_new(store, &key).await?;
        let Some(to) = next_state(record.info.current_state(), Op::Update)? else {
            return Ok(record.info.latest_revision());
        };
        let references = self.references(&key).await?;
        if references.is_empty() {
            return Err(no_references());
        }
        if !lc.is_admin() && record.claimed() {
            return Err(Error::conflict(format!(
                "an operation on logical cloud {name:?} is in progress; try again when it is done"
            )));
        }
        let revision = record.info.latest_revision() + 1;
        let old = self.records.load_context(&record.info).await?;
        // Claimed before its side effects, as an instantiate.
        let claimed = record
            .append(store, &key, to, String::new(), revision)
            .await?;
        if lc.is_admin() {
            return Ok(revision);
        }
        let built = async {
            if old.is_none() {
                // Every cluster gets a new request, hence a new kubeconfig.
                credentials::clear(store, &key).await?;
            }
            self.cloud_context(project, &lc, &references, old.as_ref())
                .await
        };
        let ctx = match built.await {
            Ok(ctx) => ctx,
            Err(e) => {
                claimed.revert(store, &key, &record).await;
                return Err(e);
            }
        };
        let held = self.records.handover.lock(&key).await;
        let written = claimed.fill(store, &key, ctx.id().to_string()).await;
        // Without the running context (lost with an in-memory AppContext store) the new one is
        // simply instantiated; server-side apply takes over what is already there.
        let handed = async {
            match &old {
                Some(old) => self.records.rsync().update(old.id(), ctx.id()).await,
                None => self.records.rsync().instantiate(ctx.id()).await,
            }
        };
        deploy_fresh(store, &key, written, &record, &ctx, handed).await?;
        drop(held);
        credentials::spawn_finisher(&self.records, project, name, ctx.id());
        Ok(revision)
    }

    /// Resumes completing the kubeconfigs of every instantiated standard or privileged logical
    /// cloud that still lacks some (after a restart, the background work of the previous process
    /// is gone); returns how many clouds it resumed. Running it while that work still runs is
    /// harmless: every step is idempotent.
    ///
    /// # Errors
    /// The stores' errors.
    pub async fn resume(&self) -> Result<usize> {
        let mut resumed = 0;
        for project in self
            .records
            .objects
            .projects()
            .list(&ResourceKey::root(), &[])
            .await?
        {
            let project = project.metadata.name;
            for lc in self
                .records
                .objects
                .logical_clouds()
                .list(&keys::project(&project), &[])
                .await?
            {
                let key = keys::logical_cloud(&project, &lc.metadata.name);
                let info = state_or_new(self.records.store().as_ref(), &key).await?;
                if lc.is_admin()
                    || !matches!(
                        info.current_state(),
                        DigState::Instantiated | DigState::Updated
                    )
                {
                    continue;
                }
                let Some(ctx) = self.records.load_context(&info).await? else {
                    continue;
                };
                let references =
                    credentials::references_by_cluster(self.records.store().as_ref(), &key).await?;
                let mut missing = false;
                for cluster in ctx.clusters(LC_APP).await? {
                    if let Some((ref_key, _)) = references.get(&cluster) {
                        missing |=
                            !credentials::has_kubeconfig(self.records.store().as_ref(), ref_key)
                                .await?;
                    }
                }
                if missing {
                    credentials::spawn_finisher(
                        &self.records,
                        &project,
                        &lc.metadata.name,
                        ctx.id(),
                    );
                    resumed += 1;
                }
            }
        }
        Ok(resumed)
    }

    /// The kubeconfig generated for logical cloud `name` on the cluster of its reference
    /// `cluster_reference`.
    ///
    /// # Errors
    /// NotFound for an unknown cloud or reference; Conflict (`Logical Cloud hasn't been
    /// instantiated`) before it is instantiated; FailedPrecondition for an admin cloud (its users
    /// use the cluster's own kubeconfig) and while the kubeconfig is not generated yet.
    pub async fn kubeconfig(
        &self,
        cloud: &LogicalCloudRef,
        cluster_reference: &str,
    ) -> Result<String> {
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        let lc = self.logical_cloud(project, name).await?;
        let key = keys::logical_cloud(project, name);
        self.records
            .objects
            .cluster_references()
            .get(&key, cluster_reference)
            .await?;
        // dcm's cluster.go GetClusterConfig: the status context first, then the private key an
        // admin cloud has none of.
        let state = state_or_new(self.records.store().as_ref(), &key)
            .await?
            .current_state();
        if !state.is_deployed() {
            return Err(Error::conflict("Logical Cloud hasn't been instantiated"));
        }
        if lc.is_admin() {
            return Err(Error::failed_precondition(format!(
                "logical cloud {name:?} is an admin cloud: it uses the clusters' own kubeconfigs"
            )));
        }
        let ref_key = key.child(keys::CLUSTER_REFERENCE, cluster_reference);
        read_text_blob(
            self.records.store().as_ref(),
            &ref_key,
            LOGICAL_CLOUD_KUBECONFIG_BLOB,
        )
        .await?
        .ok_or_else(|| {
            Error::failed_precondition(format!(
                "logical cloud {name:?} has no kubeconfig for {cluster_reference:?}: it is \
                     not instantiated or still being instantiated"
            ))
        })
    }
}
