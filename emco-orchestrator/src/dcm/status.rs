//! `GET .../logical-clouds/{logicalCloud}/status`: the status of a logical cloud, read from its
//! AppContext with the same query options and answer shapes as a deployment intent group's
//! (EMCO.md section 7; see [`crate::status`]), with one difference: a cluster's certificate
//! request counts as ready only once the cloud's kubeconfig for that cluster is built, so
//! `readyStatus` is `Ready` exactly when the cloud can take deployments.
//!
//! A cloud never instantiated answers with its lifecycle record only; an admin cloud, which
//! has no AppContext here, answers with the deployed (and ready) status its lifecycle implies,
//! as EMCO's empty-shell context does.

use emco_core::ClusterRef;
use emco_core::lifecycle::DigState;
use emco_core::model::status::{DigStatus, StatusResponse, StatusType};
use emco_core::{Error, LogicalCloudRef, Result};

use super::{LC_APP, credentials};
use crate::keys;
use crate::status::{NOT_READY, READY, Snapshot, context_of, respond};

/// The query of a logical cloud's status: the parameters of a deployment intent group's.
pub type LogicalCloudStatusQuery = emco_core::model::status::StatusQuery;

/// The answer of a logical cloud's status: the shapes of a deployment intent group's, with the
/// cloud's name as `name` and no composite app fields.
pub type LogicalCloudStatus = StatusResponse;

impl crate::Status {
    /// The status of logical cloud `cloud` as `query` asks (see the module documentation).
    ///
    /// # Errors
    /// NotFound for an unknown cloud or an `instance` that is not one of its contexts;
    /// InvalidArgument for a bad `instance` or an `app` filter other than the cloud's app.
    pub async fn logical_cloud(
        &self,
        cloud: &LogicalCloudRef,
        query: &LogicalCloudStatusQuery,
    ) -> Result<LogicalCloudStatus> {
        let states = self.clouds.state(cloud).await?;
        let (project, name) = (cloud.project.as_str(), cloud.logical_cloud.as_str());
        let lc_key = keys::logical_cloud(project, name);
        if let Some(app) = query.apps.iter().find(|a| *a != LC_APP) {
            return Err(Error::invalid(format!(
                "app {app:?} is not part of a logical cloud; its only app is {LC_APP:?}"
            ))
            .with_field("app"));
        }
        let snapshot = match context_of(&states, query.instance.as_deref())? {
            Some(id) => Some(Snapshot::read(self.records.contexts(), id).await?),
            None => None,
        };
        let mut views = snapshot
            .as_ref()
            .map(|s| s.views(query))
            .unwrap_or_default();
        let references =
            credentials::references_by_cluster(self.records.store().as_ref(), &lc_key).await?;
        for cluster in views.iter_mut().flat_map(|a| a.clusters.iter_mut()) {
            let id = ClusterRef::new(&cluster.provider, &cluster.cluster).to_string();
            let has = match references.get(&id) {
                Some((key, _)) => {
                    credentials::has_kubeconfig(self.records.store().as_ref(), key).await?
                }
                None => false,
            };
            for r in &mut cluster.resources {
                if r.gvk.kind == "CertificateSigningRequest" && r.ready == READY && !has {
                    r.ready = NOT_READY;
                }
            }
        }
        let mut full = DigStatus {
            project: project.to_owned(),
            name: name.to_owned(),
            ..DigStatus::default()
        };
        // An admin cloud's AppContext in EMCO is an empty shell that rsync instantiates and
        // terminates; its status reads as the lifecycle says (src/dcm/pkg/module/apply.go).
        if snapshot.is_none()
            && let Some(deployed) = shell_status(states.current_state())
        {
            deployed.clone_into(&mut full.totals.deployed_status);
            if query.status == StatusType::Ready {
                READY.clone_into(&mut full.totals.ready_status);
            }
        }
        full.states = states;
        Ok(respond(query, full, snapshot.as_ref(), Some(views)))
    }
}

/// The AppContext status of a cloud without a context of its own (an admin cloud), by its
/// lifecycle state; `None` before the first instantiate.
fn shell_status(state: DigState) -> Option<&'static str> {
    match state {
        DigState::Instantiated | DigState::Updated | DigState::InstantiateStopped => {
            Some("Instantiated")
        }
        DigState::Terminated | DigState::TerminateStopped => Some("Terminated"),
        DigState::Created | DigState::Approved | DigState::Applied => None,
    }
}
