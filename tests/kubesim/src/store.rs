//! The object store of one simulated cluster: objects keyed by (group/resource, namespace, name),
//! one resourceVersion counter, and a bounded log of watch events.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast;

use crate::resources::ResourceType;

/// (`group/plural`, namespace or "", name).
pub(crate) type Key = (String, String, String);

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watchers see it.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) key: Key,
    pub(crate) kind: EventType,
    pub(crate) object: Arc<Value>,
    /// The state before a MODIFIED or DELETED event (for DELETED with its version before the
    /// deletion), so that watches with selectors can tell objects
    /// entering and leaving the selection.
    pub(crate) old: Option<Arc<Value>>,
}

/// The store key's first part for a resource type.
pub(crate) fn type_key(rt: &ResourceType) -> String {
    format!("{}/{}", rt.group, rt.plural)
}

/// Logged events after a version, and the receiver of the events that follow.
pub(crate) type Subscription = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// How many events the watch log keeps; older versions answer 410 Gone.
pub(crate) const LOG_CAPACITY: usize = 512;

/// Objects, versions and the event log of one cluster.
#[derive(Debug, Default)]
pub(crate) struct Store {
    rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    log: VecDeque<Arc<Event>>,
    /// The highest version no longer in the log (watches from below it are too old).
    compacted: u64,
    /// Created on the first watch so that idle clusters carry no channel.
    tx: Option<broadcast::Sender<Arc<Event>>>,
    /// The types the cluster's CustomResourceDefinitions serve.
    pub(crate) custom_types: Vec<Arc<ResourceType>>,
    /// Next service address to hand out (10.96.0.0/12).
    next_ip: u32,
    /// Set by every write; cleared by persistence.
    pub(crate) dirty: bool,
    /// Service account tokens handed out by `serviceaccounts/NAME/token`, by token. Not
    /// persisted: a restart invalidates them, as a rotated signing key would.
    pub(crate) tokens: std::collections::HashMap<String, ServiceAccountToken>,
}

/// Who an issued service account token authenticates, and until when.
#[derive(Debug, Clone)]
pub(crate) struct ServiceAccountToken {
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// The account's uid: a token of a deleted and re-created account is no longer valid.
    pub(crate) uid: String,
    pub(crate) expires: std::time::SystemTime,
}

impl Store {
    /// The current resourceVersion of the cluster.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Value>> {
        self.objects.get(key).cloned()
    }

    /// All objects of a type, in one namespace or in all of them (`ns == None`).
    pub(crate) fn list<'a>(
        &'a self,
        tk: &'a str,
        ns: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a {
        let start = (
            tk.to_owned(),
            ns.unwrap_or_default().to_owned(),
            String::new(),
        );
        self.objects
            .range(start..)
            .take_while(move |(k, _)| k.0 == tk && ns.is_none_or(|n| k.1 == n))
    }

    /// Every object of the cluster.
    pub(crate) fn all(&self) -> impl Iterator<Item = (&Key, &Arc<Value>)> {
        self.objects.iter()
    }

    /// Stores `obj` under `key` with a new resourceVersion and logs the event. Returns the stored
    /// object.
    pub(crate) fn put(&mut self, key: Key, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".to_owned(),
                Value::String(self.rv.to_string()),
            );
        }
        let obj = Arc::new(obj);
        let old = self.objects.insert(key.clone(), obj.clone());
        let kind = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(key, kind, obj.clone(), old);
        obj
    }

    /// Removes an object, logging a DELETED event that carries a new resourceVersion.
    pub(crate) fn remove(&mut self, key: &Key) -> Option<Arc<Value>> {
        let old = self.objects.remove(key)?;
        self.rv += 1;
        let mut gone = (*old).clone();
        if let Some(meta) = gone.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".to_owned(),
                Value::String(self.rv.to_string()),
            );
        }
        let gone = Arc::new(gone);
        self.emit(key.clone(), EventType::Deleted, gone.clone(), Some(old));
        Some(gone)
    }

    /// The objects of a type (in one namespace or in all) as they were at version `rv`: the
    /// current ones with the logged changes after `rv` undone. `None` when the log no longer
    /// reaches back to `rv`.
    pub(crate) fn list_at(
        &self,
        tk: &str,
        ns: Option<&str>,
        rv: u64,
    ) -> Option<Vec<(Key, Arc<Value>)>> {
        if rv < self.compacted || rv > self.rv {
            return None;
        }
        let mut objects: BTreeMap<Key, Arc<Value>> = self
            .list(tk, ns)
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for ev in self.log.iter().rev().take_while(|e| e.rv > rv) {
            if ev.key.0 != tk || ns.is_some_and(|n| ev.key.1 != n) {
                continue;
            }
            match (&ev.kind, &ev.old) {
                (EventType::Added, _) => {
                    objects.remove(&ev.key);
                }
                (EventType::Modified | EventType::Deleted, Some(old)) => {
                    objects.insert(ev.key.clone(), old.clone());
                }
                (_, None) => {}
            }
        }
        Some(objects.into_iter().collect())
    }

    fn emit(&mut self, key: Key, kind: EventType, object: Arc<Value>, old: Option<Arc<Value>>) {
        self.dirty = true;
        let ev = Arc::new(Event {
            rv: self.rv,
            key,
            kind,
            object,
            old,
        });
        if self.log.len() == LOG_CAPACITY
            && let Some(old) = self.log.pop_front()
        {
            self.compacted = old.rv;
        }
        self.log.push_back(ev.clone());
        if let Some(tx) = &self.tx {
            // No receivers is fine: watchers come and go.
            let _ = tx.send(ev);
        }
    }

    /// Subscribes to future events and returns the logged events after `rv`, or `Err(oldest)`
    /// when events after `rv` were already compacted away.
    pub(crate) fn watch_from(&mut self, rv: u64) -> Result<Subscription, u64> {
        if rv < self.compacted {
            return Err(self.compacted + 1);
        }
        let rx = self
            .tx
            .get_or_insert_with(|| broadcast::channel(LOG_CAPACITY).0)
            .subscribe();
        let past = self.log.iter().filter(|e| e.rv > rv).cloned().collect();
        Ok((past, rx))
    }

    /// Hands out the next free cluster IP.
    pub(crate) fn allocate_ip(&mut self) -> String {
        self.next_ip += 1;
        let n = self.next_ip;
        format!("10.96.{}.{}", (n >> 8) & 0xff, n & 0xff)
    }

    /// Replaces the content with objects loaded from disk, keeping the version counter ahead.
    pub(crate) fn load(&mut self, rv: u64, objects: Vec<(Key, Value)>) {
        self.rv = self.rv.max(rv);
        self.compacted = self.rv;
        for (k, v) in objects {
            self.objects.insert(k, Arc::new(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(name: &str) -> Key {
        ("/configmaps".into(), "default".into(), name.into())
    }

    #[test]
    fn versions_and_events() {
        let mut s = Store::default();
        let a = s.put(key("a"), json!({"metadata": {"name": "a"}}));
        assert_eq!(a["metadata"]["resourceVersion"], "1");
        s.put(key("b"), json!({"metadata": {"name": "b"}}));
        s.put(
            ("/configmaps".into(), "other".into(), "c".into()),
            json!({}),
        );
        assert_eq!(s.list("/configmaps", Some("default")).count(), 2);
        assert_eq!(s.list("/configmaps", None).count(), 3);
        let (past, _rx) = s.watch_from(1).unwrap();
        assert_eq!(past.len(), 2);
        assert_eq!(past[0].kind, EventType::Added);
        let gone = s.remove(&key("a")).unwrap();
        assert_eq!(gone["metadata"]["resourceVersion"], "4");
        assert!(s.remove(&key("a")).is_none());
    }

    #[test]
    fn old_versions_are_gone() {
        let mut s = Store::default();
        for i in 0..(LOG_CAPACITY + 10) {
            s.put(key(&format!("o{i}")), json!({}));
        }
        assert!(s.watch_from(3).is_err());
        assert!(s.watch_from(s.rv() - 5).is_ok());
    }
}
