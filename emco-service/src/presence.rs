//! One server per shared store, unless every server has its own replica id.
//!
//! Two servers on one etcd without `--replica-id` would both run every deployment, and one
//! without it beside replicas would run what they share out. So a server without a replica id
//! beats a heartbeat ([`SOLO`]) as replicas do theirs (rsync's [`REPLICA_HEARTBEATS`]), and at
//! start each server looks at the heartbeats that exclude it: one that changes within a beat
//! period is a live server, and this one refuses to start, saying which. A heartbeat that does
//! not change is a server that died without removing it; a clean shutdown removes it, so only a
//! restart after a crash waits for that look.

use std::time::Duration;

use bytes::Bytes;
use emco_core::{Error, Result};
use emco_rsync::engine::REPLICA_HEARTBEATS;
use emco_store::AppContextStore;
use emco_store::kv::{Compare, Op, Txn};
use tokio_util::sync::CancellationToken;

/// The heartbeat of the server without a replica id.
pub const SOLO: &str = "/emcoserver/solo/";

/// What this server's heartbeat says, for the message of a server refused beside it.
fn identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!(
        "pid {} on {}, beating at {}",
        std::process::id(),
        host.trim(),
        emco_core::time::rfc3339(std::time::SystemTime::now())
    )
}

/// The heartbeats under `prefixes` with their revisions.
async fn heartbeats(
    store: &dyn AppContextStore,
    prefixes: &[&str],
) -> Result<Vec<(String, u64, String)>> {
    let mut out = Vec::new();
    for prefix in prefixes {
        for kv in store.list_all(prefix, false).await? {
            let said = String::from_utf8_lossy(&kv.value).into_owned();
            out.push((kv.key, kv.mod_revision, said));
        }
    }
    Ok(out)
}

/// Who a live heartbeat `key` belongs to, in words.
fn who(key: &str, said: &str) -> String {
    match key.strip_prefix(REPLICA_HEARTBEATS) {
        Some(id) => format!("replica {:?}", id.trim_end_matches('/')),
        None => format!("an emco-server without --replica-id ({said})"),
    }
}

/// Looks for a live server this one must not run beside (see the module): refuses when one
/// beats within `period` (and a half second), else, for a server without a replica id, takes
/// the [`SOLO`] heartbeat and keeps it beating every `period` until `stop`, removing it then:
/// the task answered ends once it is removed.
///
/// # Errors
/// `FailedPrecondition` naming the live server; the store's error.
pub async fn claim(
    store: std::sync::Arc<dyn AppContextStore>,
    replica: Option<&str>,
    period: Duration,
    stop: CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>> {
    let excluding: &[&str] = match replica {
        None => &[SOLO, REPLICA_HEARTBEATS],
        Some(_) => &[SOLO],
    };
    let first = heartbeats(store.as_ref(), excluding).await?;
    if !first.is_empty() {
        tracing::info!(
            heartbeats = first.len(),
            wait = ?period,
            "another server's heartbeat is in the store: looking whether it is alive"
        );
        tokio::time::sleep(period + Duration::from_millis(500)).await;
        let second = heartbeats(store.as_ref(), excluding).await?;
        if let Some((key, _, said)) = second
            .iter()
            .find(|(key, revision, _)| !first.iter().any(|(k, r, _)| k == key && r == revision))
        {
            let me = match replica {
                None => "without --replica-id".to_owned(),
                Some(id) => format!("as replica {id:?}"),
            };
            return Err(Error::failed_precondition(format!(
                "{} runs on these stores: a server {me} beside it would run the same \
                 deployments twice; stop it, or give every server its own --replica-id",
                who(key, said)
            )));
        }
    }
    if replica.is_some() {
        return Ok(None);
    }
    // Taken only if no one beat it since the look: of two servers starting at once, one wins.
    let seen = first
        .iter()
        .find(|(key, _, _)| key == SOLO)
        .map_or(0, |(_, revision, _)| *revision);
    let taken = store
        .txn(
            Txn::new()
                .when(Compare::ModRevision {
                    key: SOLO.to_owned(),
                    mod_revision: seen,
                })
                .op(Op::Put {
                    key: SOLO.to_owned(),
                    value: Bytes::from(identity()),
                }),
        )
        .await?;
    if !taken.succeeded {
        return Err(Error::failed_precondition(
            "another emco-server without --replica-id started on these stores at the same \
             time; give every server its own --replica-id to run several",
        ));
    }
    Ok(Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(period) => {}
                () = stop.cancelled() => break,
            }
            if let Err(e) = store.put(SOLO, Bytes::from(identity())).await {
                tracing::warn!(error = %e, "cannot renew the server's heartbeat");
            }
        }
        if let Err(e) = store.delete(SOLO).await {
            tracing::warn!(error = %e, "cannot remove the server's heartbeat");
        }
    })))
}
