//! EMCO's `StatusNotify` gRPC service (EMCO.md section 8): a client registers for a deployment
//! intent group or a logical cloud and receives a [`StatusNotification`] at once and then
//! whenever its status changes, until it deregisters or disconnects.
//!
//! ```no_run
//! # async fn demo(orch: emco_orchestrator::Orchestrator) -> Result<(), Box<dyn std::error::Error>> {
//! tonic::transport::Server::builder()
//!     .add_service(orch.status().notify_service())
//!     .serve("127.0.0.1:9016".parse()?)
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! A registration names a group with a `DigKey` or a logical cloud with an `LcKey`; a
//! `ClusterKey` (served by EMCO's ncm) is refused with INVALID_ARGUMENT. `statusType` READY (or
//! NOT_READY) reports readiness, DEPLOYED (or NOT_DEPLOYED) what rsync applied; the unset value
//! (STATUS_ERROR) means READY, the default of the REST status query. `apps`, `clusters`
//! (`provider+cluster`) and `resources` filter as the REST query's `app=`, `cluster=` and
//! `resource=` do ([`crate::Status::deployment`], [`crate::Status::logical_cloud`]). Each
//! notification carries the overall value: DEPLOYED when the context is `Instantiated` or
//! `Updated` and every resource kept by the filters is applied, READY when every such resource
//! is ready (neither when there is none). With output ALL it also carries one `AppStatus` detail
//! per app with its clusters and their resources, each with its own value (a cluster or app is
//! DEPLOYED / READY when all of its resources are). A notification is sent only when it differs
//! from the last one sent on that stream.
//!
//! Changes come from [`crate::Status::watch`] (see [`crate::watch`]); this module turns each
//! status into a notification. `StatusDeregister` ends every stream of the client id; a stream
//! whose group or cloud is deleted ends with NOT_FOUND.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use emco_controller_sdk::remote::status_of;
use emco_core::model::status::{DigStatus, StatusMode, StatusOutput, StatusQuery, StatusType};
use emco_core::rollout::RolloutRun;
use emco_core::{DigRef, Error, LogicalCloudRef, Result};
use emco_proto::status_notify_server::{StatusNotify, StatusNotifyServer};
use emco_proto::status_registration::Key;
use emco_proto::{
    AppStatus, ClusterStatus, DigKey, DriftedField, Gvk, LcKey, ResourceStatus, RolloutStatus,
    StatusDeregistration, StatusDeregistrationResponse, StatusDetail, StatusNotification,
    StatusRegistration, StatusValue, WaveFailure, WaveStatus, status_detail,
};
use futures::{Stream, StreamExt as _};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::status::READY;
use crate::watch::{StatusWatch, WatchTarget};

impl crate::Status {
    /// The `StatusNotify` gRPC service over this status service, ready to mount on a
    /// `tonic::transport::Server` (EMCO serves it on port 9016). Every call returns an
    /// independent service: clients registered on one are deregistered on that one only.
    #[must_use]
    pub fn notify_service(&self) -> StatusNotifyServer<StatusNotifyService> {
        StatusNotifyServer::new(StatusNotifyService {
            status: self.clone(),
            clients: Arc::default(),
        })
    }
}

/// The implementation of `StatusNotify`; see the module documentation.
#[derive(Debug, Clone)]
pub struct StatusNotifyService {
    status: crate::Status,
    clients: Arc<Mutex<Clients>>,
}

/// The registered clients: their streams end when their token is cancelled.
#[derive(Debug, Default)]
struct Clients {
    by_id: HashMap<String, Client>,
    next_generation: u64,
}

#[derive(Debug)]
struct Client {
    token: CancellationToken,
    streams: usize,
    generation: u64,
}

/// Held by one stream: forgets the client when its last stream ends.
#[derive(Debug)]
struct StreamGuard {
    clients: Arc<Mutex<Clients>>,
    id: String,
    generation: u64,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut clients = lock(&self.clients);
        if let Some(c) = clients.by_id.get_mut(&self.id)
            && c.generation == self.generation
        {
            c.streams = c.streams.saturating_sub(1);
            if c.streams == 0 {
                clients.by_id.remove(&self.id);
            }
        }
    }
}

impl StatusNotifyService {
    fn attach(&self, id: &str) -> (CancellationToken, StreamGuard) {
        let mut clients = lock(&self.clients);
        let generation = clients.next_generation;
        let client = clients
            .by_id
            .entry(id.to_owned())
            .or_insert_with(|| Client {
                // Streams end at shutdown too, so they do not hold up a graceful stop.
                token: self.status.records.shutdown_token().child_token(),
                streams: 0,
                generation,
            });
        client.streams += 1;
        let (token, generation) = (client.token.clone(), client.generation);
        clients.next_generation += 1;
        let guard = StreamGuard {
            clients: Arc::clone(&self.clients),
            id: id.to_owned(),
            generation,
        };
        (token, guard)
    }
}

fn dig_key(key: &DigKey) -> Result<WatchTarget> {
    DigRef::new(
        &key.project,
        &key.composite_app,
        &key.composite_app_version,
        &key.deployment_intent_group,
    )
    .checked()
    .map(WatchTarget::Dig)
    .map_err(|e| e.within("digKey"))
}

fn lc_key(key: &LcKey) -> Result<WatchTarget> {
    LogicalCloudRef::new(&key.project, &key.logical_cloud)
        .checked()
        .map(WatchTarget::LogicalCloud)
        .map_err(|e| e.within("lcKey"))
}

/// The status query a registration amounts to.
fn query_of(reg: &StatusRegistration) -> Result<StatusQuery> {
    let status = match StatusValue::try_from(reg.status_type) {
        Ok(StatusValue::Deployed | StatusValue::NotDeployed) => "deployed",
        Ok(StatusValue::Ready | StatusValue::NotReady | StatusValue::StatusError) => "ready",
        Err(_) => {
            return Err(
                Error::invalid(format!("unknown status type {}", reg.status_type))
                    .with_field("statusType"),
            );
        }
    };
    let mut pairs = vec![("status", status)];
    pairs.extend(reg.apps.iter().map(|a| ("app", a.as_str())));
    pairs.extend(reg.clusters.iter().map(|c| ("cluster", c.as_str())));
    pairs.extend(reg.resources.iter().map(|r| ("resource", r.as_str())));
    let mut query = StatusQuery::from_pairs(pairs)?;
    query.mode = StatusMode::Full;
    query.output = StatusOutput::All;
    Ok(query)
}

fn value(v: StatusValue) -> i32 {
    v as i32
}

/// The notification of `status` (its resources judged by `deployed` or ready status); without
/// details for a `summary` registration.
fn notification(status: DigStatus, deployed: bool, summary: bool) -> StatusNotification {
    {
        let (good, bad) = if deployed {
            (StatusValue::Deployed, StatusValue::NotDeployed)
        } else {
            (StatusValue::Ready, StatusValue::NotReady)
        };
        let judge = |r: &emco_core::model::status::ResourceStatus| {
            let ok = if deployed {
                r.deployed_status == "Applied"
            } else {
                r.ready_status == READY
            };
            if ok { good } else { bad }
        };
        let rollout = status.rollout.map(|run| rollout_status(&run, summary));
        let mut details = Vec::new();
        let (mut total, mut fine) = (0usize, 0usize);
        for app in status.apps {
            let mut app_ok = true;
            let mut clusters = Vec::new();
            for c in app.clusters {
                let mut cluster_ok = true;
                let resources: Vec<ResourceStatus> = c
                    .resources
                    .into_iter()
                    .map(|r| {
                        let v = judge(&r);
                        total += 1;
                        fine += usize::from(v == good);
                        cluster_ok &= v == good;
                        ResourceStatus {
                            name: r.name,
                            gvk: Some(Gvk {
                                group: r.gvk.group,
                                version: r.gvk.version,
                                kind: r.gvk.kind,
                            }),
                            status_value: value(v),
                            drift: r
                                .drift
                                .into_iter()
                                .map(|d| DriftedField {
                                    path: d.path,
                                    manager: d.manager,
                                    time: d.time.unwrap_or_default(),
                                    removed: d.removed,
                                })
                                .collect(),
                        }
                    })
                    .collect();
                app_ok &= cluster_ok;
                clusters.push(ClusterStatus {
                    cluster_provider: c.cluster_provider,
                    cluster: c.cluster,
                    status_value: value(if cluster_ok { good } else { bad }),
                    resources,
                });
            }
            details.push(StatusDetail {
                status_detail: Some(status_detail::StatusDetail::App(AppStatus {
                    app: app.name,
                    status_value: value(if app_ok { good } else { bad }),
                    clusters,
                })),
            });
        }
        let settled = !deployed
            || matches!(
                status.totals.deployed_status.as_str(),
                "Instantiated" | "Updated"
            );
        let overall = if total > 0 && fine == total && settled {
            good
        } else {
            bad
        };
        if summary {
            details.clear();
        }
        StatusNotification {
            status_value: value(overall),
            details,
            rollout,
        }
    }
}

/// The notification's view of a rollout; wave cluster names only when not a `summary`
/// (a fleet's waves name thousands).
fn rollout_status(run: &RolloutRun, summary: bool) -> RolloutStatus {
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    RolloutStatus {
        state: run.state.as_str().to_owned(),
        current_wave: count(run.current),
        waves: run
            .waves
            .iter()
            .map(|w| WaveStatus {
                name: w.name.clone(),
                state: w.state.as_str().to_owned(),
                cluster_count: count(w.clusters.len()),
                clusters: if summary {
                    Vec::new()
                } else {
                    w.clusters.clone()
                },
                started: w.started.clone(),
                finished: w.finished.clone(),
                skipped: w.skipped.clone(),
                left: w.left.clone(),
                failures: w
                    .failures
                    .iter()
                    .map(|f| WaveFailure {
                        cluster: f.cluster.clone(),
                        reason: f.reason.clone(),
                    })
                    .collect(),
            })
            .collect(),
        reason: run.reason.clone(),
        started: run.started.clone(),
        finished: run.finished.clone(),
    }
}

/// The state of one notification stream between items.
struct StreamState {
    watch: StatusWatch,
    deployed: bool,
    summary: bool,
    token: CancellationToken,
    _guard: StreamGuard,
    last: Option<StatusNotification>,
    done: bool,
}

impl StreamState {
    /// The next notification that differs from the last one sent; `None` when the client
    /// deregistered; an error ends the stream.
    async fn next(&mut self) -> Option<std::result::Result<StatusNotification, Status>> {
        if self.done {
            return None;
        }
        loop {
            let token = self.token.clone();
            let status = tokio::select! {
                () = token.cancelled() => return None,
                status = self.watch.next() => status,
            };
            match status {
                Ok(status) => {
                    let n = notification(status, self.deployed, self.summary);
                    if self.last.as_ref() != Some(&n) {
                        self.last = Some(n.clone());
                        return Some(Ok(n));
                    }
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(status_of(&e)));
                }
            }
        }
    }
}

type NotificationStream =
    Pin<Box<dyn Stream<Item = std::result::Result<StatusNotification, Status>> + Send>>;

#[tonic::async_trait]
impl StatusNotify for StatusNotifyService {
    type StatusRegisterStream = NotificationStream;

    async fn status_register(
        &self,
        request: Request<StatusRegistration>,
    ) -> std::result::Result<Response<Self::StatusRegisterStream>, Status> {
        let reg = request.into_inner();
        if reg.client_id.is_empty() {
            return Err(status_of(
                &Error::invalid("must not be empty").with_field("clientId"),
            ));
        }
        let target = match &reg.key {
            Some(Key::DigKey(k)) => dig_key(k),
            Some(Key::LcKey(k)) => lc_key(k),
            Some(Key::ClusterKey(_)) => Err(Error::invalid(
                "cluster keys are served by the network controller (ncm); this server takes a digKey or an lcKey",
            )
            .with_field("clusterKey")),
            None => Err(Error::invalid("give a digKey or an lcKey").with_field("key")),
        }
        .map_err(|e| status_of(&e))?;
        let query = query_of(&reg).map_err(|e| status_of(&e))?;
        let deployed = query.status == StatusType::Deployed;
        let summary = reg.output == emco_proto::StatusOutput::Summary as i32;
        // Errors of the registration itself (no such group, a bad filter) answer the call.
        let mut watch = self
            .status
            .watch(target, query)
            .await
            .map_err(|e| status_of(&e))?;
        let first = notification(
            watch.next().await.map_err(|e| status_of(&e))?,
            deployed,
            summary,
        );
        let (token, guard) = self.attach(&reg.client_id);
        let state = StreamState {
            watch,
            deployed,
            summary,
            token,
            _guard: guard,
            last: Some(first.clone()),
            done: false,
        };
        let rest = futures::stream::unfold(state, |mut s| async move {
            let item = s.next().await?;
            Some((item, s))
        });
        let stream = futures::stream::once(async move { Ok(first) }).chain(rest);
        Ok(Response::new(Box::pin(stream)))
    }

    async fn status_deregister(
        &self,
        request: Request<StatusDeregistration>,
    ) -> std::result::Result<Response<StatusDeregistrationResponse>, Status> {
        let id = request.into_inner().client_id;
        let client = lock(&self.clients).by_id.remove(&id);
        if let Some(c) = client {
            c.token.cancel();
        }
        Ok(Response::new(StatusDeregistrationResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_to_query() {
        let reg = StatusRegistration {
            client_id: "c".into(),
            status_type: StatusValue::Deployed as i32,
            apps: vec!["a1".into()],
            clusters: vec!["p+c1".into()],
            resources: vec!["r".into()],
            ..StatusRegistration::default()
        };
        let q = query_of(&reg).unwrap();
        assert_eq!(q.status, StatusType::Deployed);
        assert!(q.matches_app("a1") && !q.matches_app("a2"));
        assert!(q.matches_cluster("p", "c1") && q.matches_resource("r"));
        let unset = query_of(&StatusRegistration::default()).unwrap();
        assert_eq!(unset.status, StatusType::Ready);
        let bad = StatusRegistration {
            status_type: 42,
            ..StatusRegistration::default()
        };
        assert_eq!(query_of(&bad).unwrap_err().field(), Some("statusType"));
        let bad = StatusRegistration {
            clusters: vec!["nocluster".into()],
            ..StatusRegistration::default()
        };
        assert!(query_of(&bad).is_err());
    }

    /// A change of the rollout alone is a new notification: the stream sends what differs from
    /// the last one sent.
    #[test]
    fn notifications_carry_the_rollout() {
        use emco_core::rollout::{RolloutState, WaveFailure as Failed, WaveRun};
        let wave = |name: &str, clusters: &[&str], state| WaveRun {
            name: name.into(),
            clusters: clusters.iter().map(|c| (*c).to_owned()).collect(),
            state,
            ..WaveRun::default()
        };
        let mut run: RolloutRun = serde_json::from_value(serde_json::json!({
            "dig": {"project": "p", "compositeApp": "ca", "compositeAppVersion": "v1",
                "deploymentIntentGroup": "dig"},
            "to": 7, "policy": {"waves": [{"count": 1}, {}]}, "state": "Progressing",
            "waves": [], "current": 1, "started": "2026-12-05T10:00:00Z"
        }))
        .unwrap();
        run.waves = vec![
            wave("canary", &["p+c1"], RolloutState::Succeeded),
            wave("rest", &["p+c2", "p+c3"], RolloutState::Progressing),
        ];
        let status = |run: &RolloutRun| DigStatus {
            rollout: Some(Box::new(run.clone())),
            ..DigStatus::default()
        };
        let full = notification(status(&run), false, false);
        let r = full.rollout.as_ref().unwrap();
        assert_eq!((r.state.as_str(), r.current_wave), ("Progressing", 1));
        assert_eq!(r.waves[1].clusters, ["p+c2", "p+c3"]);
        assert_eq!(r.waves[1].cluster_count, 2);
        let summary = notification(status(&run), false, true);
        let r = summary.rollout.unwrap();
        assert!(r.waves[1].clusters.is_empty() && r.waves[1].cluster_count == 2);

        run.state = RolloutState::RolledBack;
        run.reason = "wave rest failed".into();
        run.waves[1].state = RolloutState::Failed;
        run.waves[1].failures = vec![Failed {
            cluster: "p+c3".into(),
            reason: "web+Deployment: not ready".into(),
        }];
        let later = notification(status(&run), false, false);
        assert_ne!(later, full, "a rollout change alone is a new notification");
        let r = later.rollout.unwrap();
        assert_eq!(
            (r.state.as_str(), r.reason.as_str()),
            ("RolledBack", "wave rest failed")
        );
        assert_eq!(r.waves[1].failures[0].cluster, "p+c3");
        assert!(
            notification(DigStatus::default(), false, false)
                .rollout
                .is_none()
        );
    }

    #[test]
    fn notifications_carry_drift() {
        let status: DigStatus = serde_json::from_value(serde_json::json!({
            "apps": [{"name": "web", "clusters": [{"clusterProvider": "p", "cluster": "c1",
                "resources": [{"GVK": {"Group": "", "Version": "v1", "Kind": "ConfigMap"},
                    "name": "page", "readyStatus": "Ready",
                    "drift": [{"path": "data.x", "manager": "kubectl-edit",
                               "time": "2026-12-06T10:00:00Z"}]}]}]}]
        }))
        .unwrap();
        let n = notification(status.clone(), false, false);
        let Some(status_detail::StatusDetail::App(app)) = &n.details[0].status_detail else {
            panic!("an app detail: {n:?}");
        };
        let drift = &app.clusters[0].resources[0].drift;
        assert_eq!(
            drift,
            &[DriftedField {
                path: "data.x".into(),
                manager: "kubectl-edit".into(),
                time: "2026-12-06T10:00:00Z".into(),
                removed: false,
            }]
        );
        let mut clean = status;
        clean.apps[0].clusters[0].resources[0].drift.clear();
        assert_ne!(
            notification(clean, false, false),
            n,
            "a change of drift alone is a new notification"
        );
    }

    #[test]
    fn dig_keys_need_every_part() {
        let mut k = DigKey {
            project: "p".into(),
            composite_app: "ca".into(),
            composite_app_version: "v1".into(),
            deployment_intent_group: "d".into(),
        };
        assert!(
            matches!(dig_key(&k).unwrap(), WatchTarget::Dig(key) if key == DigRef::new("p", "ca", "v1", "d"))
        );
        k.composite_app.clear();
        assert_eq!(
            dig_key(&k).unwrap_err().field(),
            Some("digKey.compositeApp")
        );
        let lc = LcKey {
            project: "p".into(),
            logical_cloud: String::new(),
        };
        assert_eq!(lc_key(&lc).unwrap_err().field(), Some("lcKey.logicalCloud"));
    }
}
