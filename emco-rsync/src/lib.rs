//! # emco-rsync
//!
//! The resource synchronizer: takes an AppContext and makes the clusters match it. One task per
//! active context processes its event queue (instantiate, terminate, update), applies resources
//! in app and resource order through a cluster connector (the Kubernetes API, or GitOps),
//! retries unreachable clusters with backoff, records per-resource and per-cluster status in the
//! AppContext, and resumes unfinished work after a restart. EMCO's `installapp`, `updateapp` and
//! `readyNotify` gRPC services are served from here.
//!
//! ## Connectors
//!
//! [`connector::Connector`] is how rsync reaches one cluster: apply a [`connector::Batch`] of
//! resources, delete one with a [`connector::Propagation`] policy, read back one object, check
//! reachability. Errors carry an [`emco_core::ErrorKind`]: `Unavailable` means "retry later",
//! anything else means the cluster rejected the request. Two implementations:
//!
//! - [`connector::kube::KubeConnector`]: the Kubernetes API through `kube`, built from the
//!   kubeconfig stored with the cluster, with server-side apply (field manager `emco`) and
//!   dynamic types from a per-cluster discovery cache. [`connector::kube::KubePool`] keeps one
//!   connector (one client, one connection pool) per cluster.
//! - [`connector::gitops::GitOpsConnector`]: commits the manifests into a git repository under
//!   `clusters/<cluster>/context/<ctx>/app/<app>/`, one commit per batch, and pushes them.
//!
//! Both put the label `emco/deployment-id=<ctx>-<app>` on every object and on pod templates:
//!
//! ```
//! use emco_rsync::connector::{label_for_deployment, Resource};
//!
//! let job = Resource::from_yaml(
//!     "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n\
//!      spec:\n  template:\n    spec:\n      restartPolicy: Never\n",
//! )?;
//! let mut manifest = job.manifest().clone();
//! label_for_deployment(&mut manifest, "4242", "db")?;
//! assert_eq!(manifest["metadata"]["labels"]["emco/deployment-id"], "4242-db");
//! assert_eq!(manifest["spec"]["template"]["metadata"]["labels"]["emco/deployment-id"], "4242-db");
//! # Ok::<(), emco_core::Error>(())
//! ```
//!
//! ## Engine
//!
//! [`engine::Rsync`] runs one task per active AppContext over its persisted event queue
//! (Instantiate, Terminate, Update, UpdateDelete, Read) with EMCO's allowed-states table, the
//! stop flag, app order and dependencies, Helm hook phases, per-resource and per-cluster status,
//! retries with backoff and jitter, and restart recovery from `/activecontext/`:
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn emco_store::AppContextStore>) -> emco_core::Result<()> {
//! use std::sync::Arc;
//! use emco_rsync::engine::{Backoff, MapResolver, Rsync};
//!
//! let clusters = Arc::new(MapResolver::new()); // or the orchestrator's resolver
//! let rsync = Rsync::builder()
//!     .store(store)
//!     .connectors(clusters)
//!     .concurrency(256, 4)
//!     .backoff(Backoff::default())
//!     .build()?;
//! rsync.start(tokio_util::sync::CancellationToken::new()).await?; // resumes active contexts
//! let ctx: emco_core::ContextId = "4242".parse()?; // as an InstallApp request names it
//! rsync.instantiate(ctx).await?;
//! rsync.wait_idle(ctx).await;
//! # Ok(())
//! # }
//! ```
//!
//! [`grpc`] serves EMCO's `installapp`, `updateapp` and `readyNotify` from the same engine
//! ([`engine::Rsync::grpc_services`]).
//!
//! ## Readiness
//!
//! [`readiness::readiness`] judges a live object the way `kubectl rollout status` and
//! `helm --wait` do (Deployment available, Job complete, PVC bound, ...).
//! [`connector::kube::ClusterWatcher`] keeps one watch per cluster and resource type, selecting the
//! labelled objects (per namespace when the credentials cannot list a type across namespaces),
//! and publishes their readiness changes to subscribers.
//!
//! The engine learns readiness through the connector: from its readiness source
//! ([`connector::Connector::readiness_source`], a backend-neutral
//! [`connector::ReadinessSource`]; the Kubernetes connector's is its watcher), so that a fleet costs one
//! watch per cluster and type and no request per object; else by polling
//! [`connector::Connector::observe`] (GitOps: the status the cluster's agent writes back into
//! the repository; nothing is claimed ready because it was committed). After an app is deployed
//! on a cluster, an observer follows its resources until the context is terminated or updated
//! away: it records each change in the cluster's collected status (`status/`:
//! `{"readyStatus", "resources": {"<name+Kind>": {"present", "ready", "reason"?}}}`, with
//! `readyStatus` `Unknown` while nothing is known yet), updates the cluster's `readystatus/`
//! when the watches fail or recover, and notifies `readyNotify` subscribers at every transition
//! of the app to ready on the cluster (a Deployment that loses its replicas and recovers
//! notifies again).

pub mod connector;
pub mod drift;
pub mod engine;
pub mod grpc;
pub mod metrics;
pub mod readiness;
