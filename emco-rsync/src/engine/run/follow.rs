//! The readiness followers of each cluster share one task: it holds the cluster's lease and
//! watch health, and looks only at the followers whose objects changed, whose contact or
//! watches changed, or whose time came. A task per follower cost ~2 KiB of future per (app,
//! cluster) for as long as the deployment lives (200 MiB at 10,000 clusters x 10 apps).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use emco_core::poison::lock;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::Instrument as _;

use crate::connector::{Connector, Door, Doorbell};
use crate::engine::Inner;
use crate::engine::liveness::Contact;

use super::observe::{COALESCE, Follower, Woken, changed};

/// The cluster tasks, by the contexts' name of the cluster: one per connector of the cluster
/// (the contexts of logical clouds with their own credentials reach a cluster through their
/// own).
#[derive(Debug, Default)]
pub(in crate::engine) struct Flocks {
    by_cluster: Mutex<HashMap<String, Vec<Arc<Flock>>>>,
    /// Numbers the followers' bells.
    numbers: AtomicU64,
}

/// What the task of one cluster's connector is handed.
#[derive(Debug)]
struct Flock {
    /// The contexts' name of its cluster (its connector's may be a logical cloud's).
    cluster: String,
    conn: Arc<dyn Connector>,
    door: Arc<Door>,
    /// Followers handed over and not taken in yet; `None` once the task ended.
    arrivals: Mutex<Option<Vec<(u64, Follower)>>>,
    /// Set when followers may have been cancelled: the task drops them.
    sweep: AtomicBool,
    /// Wakes the task for arrivals and sweeps.
    call: Notify,
}

impl Flocks {
    /// Hands the follower `make` builds (with the bell its objects' changes ring) to the task
    /// of `cluster` reached through `conn`, starting the task when there is none.
    pub(super) fn add(
        &self,
        inner: &Arc<Inner>,
        cluster: &str,
        conn: &Arc<dyn Connector>,
        make: impl FnOnce(Arc<Doorbell>) -> Follower,
    ) {
        let number = self.numbers.fetch_add(1, Ordering::Relaxed);
        let mut by_cluster = lock(&self.by_cluster);
        let flocks = by_cluster.entry(cluster.to_owned()).or_default();
        let open = flocks
            .iter()
            .find(|f| Arc::ptr_eq(&f.conn, conn))
            .filter(|f| lock(&f.arrivals).is_some())
            .cloned();
        let flock = open.unwrap_or_else(|| {
            let flock = Arc::new(Flock {
                cluster: cluster.to_owned(),
                conn: Arc::clone(conn),
                door: Door::new(),
                arrivals: Mutex::new(Some(Vec::new())),
                sweep: AtomicBool::new(false),
                call: Notify::new(),
            });
            flocks.push(Arc::clone(&flock));
            let span = tracing::info_span!(parent: None, "readiness", cluster);
            tokio::spawn(tend(Arc::clone(inner), Arc::clone(&flock)).instrument(span));
            flock
        });
        let follower = make(flock.door.bell(number));
        if let Some(arrivals) = lock(&flock.arrivals).as_mut() {
            arrivals.push((number, follower));
        }
        flock.call.notify_one();
    }

    /// Has the tasks of `cluster` (all when `None`) drop their cancelled followers.
    pub(in crate::engine) fn sweep(&self, cluster: Option<&str>) {
        let by_cluster = lock(&self.by_cluster);
        let flocks: Box<dyn Iterator<Item = &Vec<Arc<Flock>>>> = match cluster {
            Some(c) => Box::new(by_cluster.get(c).into_iter()),
            None => Box::new(by_cluster.values()),
        };
        for flock in flocks.flatten() {
            flock.sweep.store(true, Ordering::Release);
            flock.call.notify_one();
        }
    }

    /// Forgets `flock`, unless it has arrivals and is not `ending` (under the map's lock, so
    /// that none comes in between); false when it goes on.
    fn close(&self, flock: &Arc<Flock>, ending: bool) -> bool {
        let mut by_cluster = lock(&self.by_cluster);
        let mut arrivals = lock(&flock.arrivals);
        if !ending && arrivals.as_ref().is_some_and(|a| !a.is_empty()) {
            return false;
        }
        *arrivals = None;
        if let Some(flocks) = by_cluster.get_mut(&flock.cluster) {
            flocks.retain(|f| !Arc::ptr_eq(f, flock));
            if flocks.is_empty() {
                by_cluster.remove(&flock.cluster);
            }
        }
        true
    }
}

/// The task of one flock: looks at its followers when woken, until none is left or the engine
/// shuts down.
async fn tend(inner: Arc<Inner>, flock: Arc<Flock>) {
    let conn = Arc::clone(&flock.conn);
    // Its probe runs while the task holds it.
    let lease = inner.leases.lease(&conn);
    let mut contact = Some(lease.subscribe());
    let grace = inner.leases.config().grace;
    let mut health = conn.readiness_source().map(|w| w.health_changes());
    let shutdown = inner.root();
    let metrics = Arc::clone(&inner.metrics);
    metrics.readiness_clusters.add(&[], 1.0);
    let mut followers: HashMap<u64, Follower> = HashMap::new();
    // How many of them the gauge counts.
    let mut counted = 0.0;
    // When each follower looks again; stale entries (a follower looked at earlier) are skipped.
    let mut dues: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    // Whom to look at, and what woke them (`None`: just arrived).
    let mut look: HashMap<u64, Option<Woken>> = HashMap::new();
    let mut all: Option<Woken> = None;
    loop {
        if let Some(arrived) = lock(&flock.arrivals).as_mut().map(std::mem::take) {
            for (number, f) in arrived {
                look.insert(number, None);
                followers.insert(number, f);
            }
        }
        if flock.sweep.swap(false, Ordering::AcqRel) {
            followers.retain(|_, f| !f.token.is_cancelled());
        }
        for number in flock.door.take_rung() {
            look.entry(number).or_insert(Some(Woken::Change));
        }
        let now = Instant::now();
        while let Some(&Reverse((due, number))) = dues.peek() {
            if due > now {
                break;
            }
            dues.pop();
            if followers.get(&number).is_some_and(|f| f.due == due) {
                look.entry(number).or_insert(Some(Woken::Tick));
            }
        }
        if let Some(why) = all.take() {
            for &number in followers.keys() {
                look.entry(number).or_insert(Some(why));
            }
        }
        if !look.is_empty() {
            let seen = contact
                .as_ref()
                .map_or(Contact::Answering, |c| c.borrow().clone());
            let steps = followers
                .iter_mut()
                .filter_map(|(number, f)| look.get(number).map(|why| (*number, *why, f)))
                .map(|(number, why, f)| {
                    if let Some(why) = why {
                        metrics.readiness_wakeups.inc(&[why.as_str()]);
                    }
                    let (conn, seen) = (&conn, &seen);
                    let span = f.span();
                    async move { (number, f.step(conn, seen, grace).await, f.due) }.instrument(span)
                });
            for (number, live, due) in futures::future::join_all(steps).await {
                if live {
                    dues.push(Reverse((due, number)));
                } else {
                    followers.remove(&number);
                }
            }
            look.clear();
        }
        let now_counted = followers.len() as f64;
        metrics.readiness_followers.add(&[], now_counted - counted);
        counted = now_counted;
        if followers.is_empty() && inner.flocks.close(&flock, false) {
            break;
        }
        let next = dues.peek().map(|Reverse((due, _))| *due);
        let health_changed = changed(health.as_mut());
        let contact_changed = changed(contact.as_mut());
        tokio::select! {
            () = flock.door.rung() => {
                // Objects change in bursts (a rollout, a relist): one look after the burst.
                tokio::select! {
                    () = tokio::time::sleep(COALESCE) => {}
                    () = shutdown.cancelled() => break,
                }
            }
            () = flock.call.notified() => {}
            alive = contact_changed => {
                if alive {
                    all = Some(Woken::Contact);
                } else {
                    contact = None;
                }
            }
            alive = health_changed => {
                if alive {
                    all = Some(Woken::Health);
                } else {
                    // The watcher is gone: only the ticks are left.
                    health = None;
                }
            }
            () = sleep_until(next) => {}
            () = shutdown.cancelled() => break,
        }
    }
    inner.flocks.close(&flock, true);
    metrics.readiness_followers.add(&[], -counted);
    metrics.readiness_clusters.add(&[], -1.0);
    drop(lease);
}

/// Sleeps until `due`, or for ever.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
