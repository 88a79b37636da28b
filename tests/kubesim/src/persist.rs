//! Optional persistence: each cluster's objects are written to `DIR/<cluster>.json` when they
//! changed (checked every second and at shutdown) and loaded at start, so a demo survives a
//! restart.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::cluster::FleetInner;
use crate::store::{Key, Store};

fn file(dir: &Path, cluster: &str) -> std::path::PathBuf {
    dir.join(format!("{cluster}.json"))
}

/// Loads a cluster's saved objects, if a file exists (its custom types are the caller's to
/// register again: [`crate::api::restore_custom_types`]).
pub(crate) fn load(dir: &Path, cluster: &str, store: &mut Store) -> emco_core::Result<()> {
    let path = file(dir, cluster);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(
                emco_core::Error::unavailable(format!("cannot read {}", path.display()))
                    .with_source(e),
            );
        }
    };
    let doc: Value = serde_json::from_str(&text).map_err(|e| {
        emco_core::Error::invalid(format!("{} is not a kubesim data file", path.display()))
            .with_source(e)
    })?;
    let rv = doc
        .get("resourceVersion")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let mut objects = Vec::new();
    for item in doc
        .get("objects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key: Option<Key> = item
            .get("key")
            .and_then(|k| serde_json::from_value(k.clone()).ok());
        if let (Some(key), Some(obj)) = (key, item.get("object")) {
            objects.push((key, obj.clone()));
        }
    }
    store.load(rv, objects);
    Ok(())
}

fn save(dir: &Path, cluster: &str, store: &Store) -> emco_core::Result<()> {
    let objects: Vec<Value> = store
        .all()
        .map(|(k, v)| json!({"key": [k.0, k.1, k.2], "object": **v}))
        .collect();
    let doc = json!({"resourceVersion": store.rv(), "objects": objects});
    let path = file(dir, cluster);
    let tmp = path.with_extension("json.tmp");
    let write = || -> std::io::Result<()> {
        std::fs::write(&tmp, doc.to_string())?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        emco_core::Error::unavailable(format!("cannot write {}", path.display())).with_source(e)
    })
}

/// Writes every cluster whose store changed since the last write (all of them with `force`).
pub(crate) fn flush_all(inner: &FleetInner, dir: &Path, force: bool) -> emco_core::Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        emco_core::Error::unavailable(format!("cannot create {}", dir.display())).with_source(e)
    })?;
    for c in &inner.clusters {
        let mut store = c.store();
        if store.dirty || force {
            save(dir, &c.name, &store)?;
            store.dirty = false;
        }
    }
    Ok(())
}

/// Flushes changed clusters every second until cancelled.
pub(crate) async fn flush_loop(
    inner: Arc<FleetInner>,
    dir: std::path::PathBuf,
    cancel: CancellationToken,
) {
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if let Err(e) = flush_all(&inner, &dir, false) {
            tracing::warn!(error = %e, "persisting clusters failed");
        }
    }
}
