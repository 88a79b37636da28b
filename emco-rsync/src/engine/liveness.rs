//! Cluster leases: whether each cluster that has deployed resources still answers.
//!
//! A readiness watch says what an object is while its cluster answers, and nothing once it stops:
//! a refused connection fails the watch, but one that stalls keeps it open for minutes, and in
//! either case the watches' memory still holds the last state seen. So each cluster followed by a
//! readiness follower holds one lease, renewed by a probe ([`Connector::health`], bounded by the
//! connector's request timeout) every `interval`. The lease records the last contact and, while
//! probes fail, why. Once `grace` has passed since the last contact, the followers report their
//! resources' readiness as unknown (with the last state seen and since when), as Kubernetes' node
//! lifecycle controller does for a node whose lease is not renewed.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use tokio::sync::{Semaphore, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::PROBES_AT_ONCE;
use crate::connector::Connector;
use crate::metrics::RsyncMetrics;

/// How clusters are probed and how long one may be silent before its readiness is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// Time between two probes of a cluster (each drawn within a quarter of it, so that a fleet
    /// is not probed in lockstep).
    pub interval: Duration,
    /// How long after its last contact a cluster's resources turn unknown.
    pub grace: Duration,
}

impl Default for Liveness {
    /// A probe every 10 s, unknown after 40 s of silence (Kubernetes' node lease renewal and
    /// `node-monitor-grace-period`).
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            grace: Duration::from_secs(40),
        }
    }
}

/// What the lease of a cluster knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Contact {
    /// The last probe was answered.
    Answering,
    /// Probes fail since the contact at `last`: `why` is the first failure's reason.
    Silent { last: SystemTime, why: String },
}

impl Contact {
    /// When the cluster's readiness is unknown: `grace` after the last contact while silent.
    pub(crate) fn unknown_from(&self, grace: Duration) -> Option<SystemTime> {
        match self {
            Self::Answering => None,
            Self::Silent { last, .. } => Some(*last + grace),
        }
    }
}

/// One cluster's lease; its probe runs while a follower holds it.
#[derive(Debug)]
pub(crate) struct Lease {
    contact: watch::Receiver<Contact>,
    _probe: DropGuard,
}

impl Lease {
    /// Changes whenever the contact does.
    pub(crate) fn subscribe(&self) -> watch::Receiver<Contact> {
        self.contact.clone()
    }
}

/// The leases of the clusters followed, by cluster.
#[derive(Debug)]
pub(crate) struct Leases {
    config: Liveness,
    held: Mutex<HashMap<String, Weak<Lease>>>,
    metrics: Arc<RsyncMetrics>,
    /// Probes in flight, at most [`PROBES_AT_ONCE`]: a server short of CPU answers slowly, and
    /// unbounded probes would then pile up as connections (a fleet's worth) that time out and
    /// are opened again.
    in_flight: Arc<Semaphore>,
}

impl Leases {
    pub(crate) fn new(config: Liveness, metrics: Arc<RsyncMetrics>) -> Self {
        Self {
            config,
            held: Mutex::default(),
            metrics,
            in_flight: Arc::new(Semaphore::new(PROBES_AT_ONCE)),
        }
    }

    pub(crate) const fn config(&self) -> Liveness {
        self.config
    }

    /// The lease of `conn`'s cluster, shared by its followers: the first one starts its probe,
    /// the last one to drop it stops the probe. A new lease counts as in contact: its follower
    /// starts after an apply or a restart, and the grace runs from there.
    pub(crate) fn lease(&self, conn: &Arc<dyn Connector>) -> Arc<Lease> {
        let mut held = lock(&self.held);
        if let Some(lease) = held.get(conn.cluster()).and_then(Weak::upgrade) {
            return lease;
        }
        let (tx, rx) = watch::channel(Contact::Answering);
        let stop = CancellationToken::new();
        tokio::spawn(probe(
            Arc::clone(conn),
            tx,
            self.config.interval,
            Arc::clone(&self.in_flight),
            Arc::clone(&self.metrics),
            stop.clone(),
        ));
        let lease = Arc::new(Lease {
            contact: rx,
            _probe: stop.drop_guard(),
        });
        // Dead entries go as their clusters get a lease again; prune the rest now and then so
        // that the map follows the clusters followed, at a cost spread over the insertions.
        if held.len() >= 64 && held.len().is_power_of_two() {
            held.retain(|_, l| l.strong_count() > 0);
        }
        held.insert(conn.cluster().to_owned(), Arc::downgrade(&lease));
        lease
    }
}

/// How long a probe may wait for its answer, at least.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A delay within a quarter of `interval` around it.
fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.75 + rand::random::<f64>() / 2.0)
}

/// Probes `conn`'s cluster every `interval` until `stop`, recording each change of contact; a
/// cluster that answered another request within the interval is not asked again.
async fn probe(
    conn: Arc<dyn Connector>,
    tx: watch::Sender<Contact>,
    interval: Duration,
    in_flight: Arc<Semaphore>,
    metrics: Arc<RsyncMetrics>,
    stop: CancellationToken,
) {
    let mut last = SystemTime::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep(jittered(interval)) => {}
            () = stop.cancelled() => return,
        }
        let answered = if conn.last_answer().is_some_and(|t| t.elapsed() < interval) {
            Ok(())
        } else {
            // Waiting for a turn is not silence: the bound counts from the request.
            let Ok(_turn) = in_flight.acquire().await else {
                return;
            };
            // Connectors bound their requests (30 s by default); a probe needs an answer sooner.
            let bound = interval.max(PROBE_TIMEOUT);
            match tokio::time::timeout(bound, conn.health()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {bound:?}")),
            }
        };
        match answered {
            Ok(()) => {
                last = SystemTime::now();
                if tx.send_if_modified(|c| {
                    std::mem::replace(c, Contact::Answering) != Contact::Answering
                }) {
                    tracing::info!(cluster = conn.cluster(), "cluster answers again");
                    metrics.reachable.set(&[conn.cluster()], 1.0);
                }
            }
            Err(why) => {
                let silent = tx.send_if_modified(|c| match c {
                    Contact::Answering => {
                        *c = Contact::Silent {
                            last,
                            why: why.clone(),
                        };
                        true
                    }
                    Contact::Silent { .. } => false,
                });
                if silent {
                    tracing::warn!(cluster = conn.cluster(), reason = %why, "cluster does not answer");
                    metrics.reachable.set(&[conn.cluster()], 0.0);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use async_trait::async_trait;
    use emco_core::{Error, Result};
    use serde_json::Value;

    use super::*;
    use crate::connector::{Batch, BatchError, Propagation, ResourceId, Scope, Warnings};

    /// A cluster whose probes answer while `up`, counting them.
    #[derive(Debug, Default)]
    struct Probed {
        /// `p+c1` when empty.
        name: String,
        up: AtomicBool,
        probes: AtomicUsize,
        answered: std::sync::Mutex<Option<tokio::time::Instant>>,
        /// Probes that take 5 s, counted while in flight (now, peak) across clusters.
        slow: Option<Arc<(AtomicUsize, AtomicUsize)>>,
    }

    #[async_trait]
    impl Connector for Probed {
        fn cluster(&self) -> &str {
            if self.name.is_empty() {
                "p+c1"
            } else {
                &self.name
            }
        }
        fn observes_live_state(&self) -> bool {
            true
        }
        async fn apply(&self, _: &Batch) -> std::result::Result<Warnings, BatchError> {
            Ok(Warnings::default())
        }
        async fn delete(&self, _: &Batch, _: Propagation) -> std::result::Result<(), BatchError> {
            Ok(())
        }
        async fn get(&self, _: &Scope, _: &ResourceId) -> Result<Option<Value>> {
            Ok(None)
        }
        fn last_answer(&self) -> Option<tokio::time::Instant> {
            *self.answered.lock().unwrap()
        }
        async fn health(&self) -> Result<()> {
            self.probes.fetch_add(1, Ordering::SeqCst);
            if let Some(flight) = &self.slow {
                let now = flight.0.fetch_add(1, Ordering::SeqCst) + 1;
                flight.1.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(5)).await;
                flight.0.fetch_sub(1, Ordering::SeqCst);
            }
            if self.up.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(Error::unavailable("connection refused"))
            }
        }
    }

    /// One lease per cluster, shared by its followers; silent from the first failed probe with
    /// the last contact kept, answering again at the first answered one; probing stops when
    /// the last follower lets go.
    #[tokio::test(start_paused = true)]
    async fn a_lease_follows_the_probes_and_ends_with_its_last_holder() {
        let config = Liveness {
            interval: Duration::from_secs(10),
            grace: Duration::from_secs(40),
        };
        let leases = Leases::new(config, Arc::new(RsyncMetrics::default()));
        let probed = Arc::new(Probed::default());
        probed.up.store(true, Ordering::SeqCst);
        let conn: Arc<dyn Connector> = probed.clone();
        let a = leases.lease(&conn);
        let b = leases.lease(&conn);
        assert!(Arc::ptr_eq(&a, &b));
        let mut contact = a.subscribe();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(*contact.borrow(), Contact::Answering);
        let answered = probed.probes.load(Ordering::SeqCst);
        assert!((2..=4).contains(&answered), "{answered} probes in 30 s");

        let before = SystemTime::now();
        probed.up.store(false, Ordering::SeqCst);
        contact.changed().await.unwrap();
        let silent = contact.borrow().clone();
        let Contact::Silent { last, why } = &silent else {
            panic!("{silent:?}");
        };
        assert!(
            *last <= before && why.contains("connection refused"),
            "{silent:?}"
        );
        assert_eq!(
            silent.unknown_from(config.grace),
            Some(*last + config.grace)
        );
        assert_eq!(leases.metrics.reachable.get(&["p+c1"]), Some(0.0));

        probed.up.store(true, Ordering::SeqCst);
        contact.changed().await.unwrap();
        assert_eq!(*contact.borrow(), Contact::Answering);
        assert_eq!(Contact::Answering.unknown_from(config.grace), None);
        assert_eq!(leases.metrics.reachable.get(&["p+c1"]), Some(1.0));

        drop((a, b, contact));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let stopped = probed.probes.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(probed.probes.load(Ordering::SeqCst), stopped);
        // A new follower gets a new lease, probing again.
        let _c = leases.lease(&conn);
        tokio::time::sleep(Duration::from_secs(20)).await;
        assert!(probed.probes.load(Ordering::SeqCst) > stopped);
    }

    /// A cluster that answered other requests within the interval is not probed; once it
    /// stops answering them, probes resume.
    #[tokio::test(start_paused = true)]
    async fn a_cluster_answering_other_requests_is_not_probed() {
        let leases = Leases::new(Liveness::default(), Arc::new(RsyncMetrics::default()));
        let probed = Arc::new(Probed::default());
        probed.up.store(true, Ordering::SeqCst);
        let conn: Arc<dyn Connector> = probed.clone();
        let lease = leases.lease(&conn);
        for _ in 0..6 {
            *probed.answered.lock().unwrap() = Some(tokio::time::Instant::now());
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        assert_eq!(probed.probes.load(Ordering::SeqCst), 0);
        assert_eq!(*lease.subscribe().borrow(), Contact::Answering);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(probed.probes.load(Ordering::SeqCst) >= 2);
    }

    /// However many clusters are followed, at most [`PROBES_AT_ONCE`] probes are in flight,
    /// and one waiting for its turn does not count as silence.
    #[tokio::test(start_paused = true)]
    async fn probes_in_flight_are_bounded() {
        let leases = Leases::new(Liveness::default(), Arc::new(RsyncMetrics::default()));
        let flight = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let clusters: Vec<Arc<Probed>> = (0..PROBES_AT_ONCE * 4)
            .map(|i| {
                let p = Probed {
                    name: format!("p+c{i}"),
                    slow: Some(Arc::clone(&flight)),
                    ..Probed::default()
                };
                p.up.store(true, Ordering::SeqCst);
                Arc::new(p)
            })
            .collect();
        let held: Vec<Arc<Lease>> = clusters
            .iter()
            .map(|p| {
                let conn: Arc<dyn Connector> = p.clone();
                leases.lease(&conn)
            })
            .collect();
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(flight.1.load(Ordering::SeqCst), PROBES_AT_ONCE);
        assert!(
            clusters
                .iter()
                .all(|p| p.probes.load(Ordering::SeqCst) >= 2)
        );
        assert!(
            held.iter()
                .all(|l| *l.subscribe().borrow() == Contact::Answering)
        );
    }
}
