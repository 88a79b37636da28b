//! ca-certs: CA certificate intents and the clusters they are issued for, as EMCO's ca-certs
//! service (src/ca-certs) keeps them, at the cluster-provider level
//! (`/cluster-providers/{clusterProvider}/ca-certs/{caCert}`, with cluster groups under
//! `clusters`) and the project level (`/projects/{project}/ca-certs/{caCert}`, with logical
//! clouds under `logical-clouds` and their cluster groups under `clusters`).
//!
//! A certificate has two lifecycles, enrollment (its intermediate CAs issued on the issuing
//! cluster) and distribution (pushed to the clusters), each with its own record, kept as EMCO
//! keeps its two stateInfo documents: the `state` blob of a child object of the certificate
//! ([`keys::CA_CERT_ENROLLMENT`] `cert-enrollment`, [`keys::CA_CERT_DISTRIBUTION`]
//! `cert-distribution`), Created when the certificate is. A certificate is replaced only while
//! both are Created, and deleted only when both are Created or terminated for good; its
//! contexts go with it.
//!
//! Where ca-certs is looser we answer as its texts say rather than as its database happens to:
//! a certificate in state Updated is as deployed as an Instantiated one, so its delete is
//! refused too (ca-certs lets it through); a certificate with cluster groups or logical clouds
//! is refused before anything is removed (ca-certs deletes the records, then fails on the
//! children); a group or logical cloud under a missing certificate is a 404 (ca-certs stores it
//! under nothing).

use std::sync::Arc;

use async_trait::async_trait;
use emco_appcontext::collection::{Hook, Wording};
use emco_core::ClusterRef;
use emco_core::lifecycle::{AppContextStatus, DigState, StateInfo};
use emco_core::model::cacert::CaCert;
use emco_core::{ContextId, Error, ErrorKind, Result};
use emco_store::{AppContextStore, PutMode, ResourceKey, ResourceStore};
use serde_json::json;

use crate::hooks::{NewHook, OwnedContexts};
use crate::keys;
use crate::records::Records;
use crate::state::{now_rfc3339, save_state, state_or_new};

mod distribution;
mod enrollment;

pub use distribution::{CERT_MANAGER_NAMESPACE, DISTRIBUTION_APP, ISTIO_NAMESPACE};
pub use enrollment::{ENROLLMENT_APP, common_name, request_name, resource_name};

/// Whose certificate: a cluster provider's or a project's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertOwner {
    /// `/cluster-providers/{clusterProvider}/ca-certs`.
    Provider(String),
    /// `/projects/{project}/ca-certs`.
    Project(String),
}

impl CertOwner {
    /// The key of the owner.
    #[must_use]
    pub fn key(&self) -> ResourceKey {
        match self {
            Self::Provider(p) => keys::cluster_provider(p),
            Self::Project(p) => keys::project(p),
        }
    }

    /// The key of its certificate `name`.
    #[must_use]
    pub fn cert(&self, name: &str) -> ResourceKey {
        self.key().child(keys::CA_CERT, name)
    }

    /// The project, for a project's certificate.
    #[must_use]
    pub fn project(&self) -> &str {
        match self {
            Self::Provider(_) => "",
            Self::Project(p) => p,
        }
    }
}

/// A cluster a certificate is for, with the namespace of the logical cloud it is for there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The cluster's provider.
    pub provider: String,
    /// The cluster.
    pub cluster: String,
    /// The logical cloud's namespace (project certificates).
    pub namespace: Option<String>,
}

impl Target {
    /// `provider`'s `cluster`, for `namespace`.
    #[must_use]
    pub fn new(provider: &str, cluster: &str, namespace: Option<String>) -> Self {
        Self {
            provider: provider.to_owned(),
            cluster: cluster.to_owned(),
            namespace,
        }
    }

    /// `provider+cluster`.
    #[must_use]
    pub fn name(&self) -> String {
        ClusterRef::new(&self.provider, &self.cluster).to_string()
    }
}

/// The lifecycles of CA certificates: enrollment and distribution, instantiate, update,
/// terminate, status. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CaCerts {
    records: Records,
}

impl CaCerts {
    pub(crate) fn new(records: Records) -> Self {
        Self { records }
    }

    /// The status of `lifecycle` of certificate `name` as `query` asks: a deployment intent
    /// group's status of its one app (ca-certs' `PrepareCaCertStatusResult`).
    ///
    /// # Errors
    /// NotFound for a missing certificate or `instance`.
    pub async fn status(
        &self,
        owner: &CertOwner,
        name: &str,
        lifecycle: Lifecycle,
        query: &emco_core::model::StatusQuery,
    ) -> Result<emco_core::model::status::CaCertStatus> {
        let (cert_key, _) = self.cert(owner, name).await?;
        let key = lifecycle.record(&cert_key);
        let mut states = state_or_new(self.records.store().as_ref(), &key).await?;
        if states.actions.is_empty() {
            states = StateInfo::created("");
        }
        let full =
            crate::status::record_answer(self.records.contexts(), name.to_owned(), states, query)
                .await?;
        let mut answer = emco_core::model::status::CaCertStatus::from(full);
        match owner {
            CertOwner::Provider(p) => answer.cluster_provider.clone_from(p),
            CertOwner::Project(p) => answer.project.clone_from(p),
        }
        Ok(answer)
    }
}

/// Whether an instantiate (`update` false) or an update of a lifecycle whose current context
/// is `status` goes on: `Some` with the context an update replaces (`None` for an
/// instantiate), `None` for an update of a lifecycle that is not deployed, which ca-certs
/// leaves as it is.
///
/// # Errors
/// Conflict with EMCO's words when an instantiate is refused.
fn begin(
    update: bool,
    status: Option<AppContextStatus>,
    info: &StateInfo,
) -> Result<Option<Option<ContextId>>> {
    if !update {
        return match enrollment::refusal("Instantiate", status) {
            Some(e) => Err(e),
            None => Ok(Some(None)),
        };
    }
    Ok(match (status, info.current_context_id()?) {
        (Some(AppContextStatus::Instantiated | AppContextStatus::Updated), Some(id)) => {
            Some(Some(id))
        }
        _ => None,
    })
}

/// The name of a certificate's enrollment record, and of the lifecycle in ca-certs' texts.
pub const ENROLLMENT: &str = "cert-enrollment";
/// The name of a certificate's distribution record, and of the lifecycle in ca-certs' texts.
pub const DISTRIBUTION: &str = "cert-distribution";

/// A certificate's two lifecycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Its intermediate CAs issued.
    Enrollment,
    /// Its intermediate CAs pushed to the clusters.
    Distribution,
}

impl Lifecycle {
    /// The lifecycle's name in ca-certs' texts and its record's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Enrollment => ENROLLMENT,
            Self::Distribution => DISTRIBUTION,
        }
    }

    /// The key of its record for the certificate at `cert`.
    #[must_use]
    pub fn record(self, cert: &ResourceKey) -> ResourceKey {
        let kind = match self {
            Self::Enrollment => keys::CA_CERT_ENROLLMENT,
            Self::Distribution => keys::CA_CERT_DISTRIBUTION,
        };
        cert.child(kind, self.name())
    }
}

/// The keys of the records of the certificate at `cert`: (lifecycle, key).
#[must_use]
pub fn record_keys(cert: &ResourceKey) -> [(&'static str, ResourceKey); 2] {
    [Lifecycle::Enrollment, Lifecycle::Distribution].map(|l| (l.name(), l.record(cert)))
}

/// ca-certs' texts for certificates (pkg/module/errorstring.go, api/cp_cert.go).
pub(crate) fn ca_cert() -> Wording {
    Wording::new("caCert not found", "caCert already exists")
        .with_name_mismatch("caCert name is not matching with the name in the request")
        .with_list_checks(&[])
}

/// ca-certs' texts for cluster groups (api/cp_cluster.go, lc_cluster.go).
pub(crate) fn cluster_group() -> Wording {
    Wording::new(
        "caCert cluster group not found",
        "caCert cluster group already exists",
    )
    .with_name_mismatch("clusterGroup name is not matching with the name in the request")
    .with_create_parent_missing("caCert not found")
    .with_list_checks(&[])
}

/// ca-certs' texts for a certificate's logical clouds (api/logicalcloud.go).
pub(crate) fn logical_cloud() -> Wording {
    Wording::new(
        "caCert logical cloud not found",
        "caCert logical cloud already exists",
    )
    .with_name_mismatch("caCert logicalCloud name is not matching with the name in the request")
    .with_create_parent_missing("caCert not found")
    .with_list_checks(&[])
}

/// Certificates: the records come with a new certificate, a replace needs both Created, a
/// delete needs both done with, and takes the records and their contexts along.
#[derive(Debug, Clone)]
pub(crate) struct CaCertHook {
    /// The records' contexts: their status, and those of certificates being deleted.
    owned: OwnedContexts,
}

impl NewHook for CaCertHook {
    fn new_hook(contexts: &Arc<dyn AppContextStore>) -> Self {
        Self {
            owned: OwnedContexts::new(contexts),
        }
    }
}

/// The lifecycle records of the certificate at `cert`: (lifecycle, record key, record).
async fn records(
    store: &dyn ResourceStore,
    cert: &ResourceKey,
) -> Result<Vec<(&'static str, ResourceKey, StateInfo)>> {
    let mut out = Vec::new();
    for (lifecycle, key) in record_keys(cert) {
        let info = state_or_new(store, &key).await?;
        out.push((lifecycle, key, info));
    }
    Ok(out)
}

#[async_trait]
impl Hook<CaCert> for CaCertHook {
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &CaCert,
    ) -> Result<()> {
        if store.get(key).await?.is_none() {
            return Ok(());
        }
        let cert = key.name().unwrap_or_default();
        for (lifecycle, _, info) in records(store, key).await? {
            let state = info.current_state();
            if state != DigState::Created {
                return Err(Error::conflict(format!(
                    "Failed to update the CaCert. {lifecycle} for the CaCert {cert} is in {state} state"
                )));
            }
        }
        Ok(())
    }

    async fn after_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        _: &CaCert,
        created: bool,
    ) -> Result<()> {
        if created {
            for (_, record) in record_keys(key) {
                store.put(&record, &json!({}), PutMode::Upsert).await?;
                save_state(store, &record, &StateInfo::created(now_rfc3339())).await?;
            }
        }
        Ok(())
    }

    async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let cert = key.name().unwrap_or_default();
        let records = records(store, key).await?;
        for (lifecycle, _, info) in &records {
            match info.current_state() {
                DigState::Instantiated | DigState::InstantiateStopped | DigState::Updated => {
                    return Err(Error::conflict(format!(
                        "{lifecycle} must be terminated for CaCert {cert} before it can be deleted"
                    )));
                }
                DigState::Terminated | DigState::TerminateStopped => {
                    let done = matches!(
                        self.owned.current_status(info).await?,
                        None | Some(
                            AppContextStatus::Terminated | AppContextStatus::TerminateFailed
                        )
                    );
                    if !done {
                        return Err(Error::conflict(format!(
                            "{lifecycle} termination has not completed for CaCert {cert}"
                        )));
                    }
                }
                _ => {}
            }
        }
        // Checked before the records go: the store would refuse the certificate afterwards.
        for child in [keys::CA_CERT_CLUSTER_GROUP, keys::CA_CERT_LOGICAL_CLOUD] {
            if !store.list(key, child, &[]).await?.is_empty() {
                return Err(Error::conflict(emco_appcontext::collection::HAS_CHILDREN));
            }
        }
        for (_, record, info) in &records {
            self.owned.doom(record, info)?;
            match store.delete(record).await {
                Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    async fn after_delete(&self, _: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        for (_, record) in record_keys(key) {
            self.owned.delete_doomed(&record).await?;
        }
        Ok(())
    }
}
