//! The conformance suites every backend must pass: [`app_context_store`] and
//! [`resource_store`]. Each returns `Ok(())` or an `Internal` error naming the first failed
//! check, so a backend's test is one line: `conformance::app_context_store(&store, "p/").await.unwrap()`.
//!
//! Every key a suite writes starts with the caller's `prefix` (resource store: under a root
//! segment named after it), so runs against a shared server do not collide when the prefix is
//! unique per run.

use std::time::Duration;

use bytes::Bytes;
use emco_core::{Error, ErrorKind, Result};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::kv::{
    AppContextStore, Compare, EventKind, ListOptions, Op, Txn, WatchStream, compacted_revision,
};
use crate::resource::{BlobStream, Expect, Filter, ResourceKey, ResourceStore};

macro_rules! check {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(Error::internal(format!("conformance: {}", format!($($msg)+))));
        }
    };
}

fn kind_of<T>(r: &Result<T>) -> Option<ErrorKind> {
    r.as_ref().err().map(Error::kind)
}

/// A unique prefix for one run: `base` plus the time and a random number.
#[must_use]
pub fn unique_prefix(base: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{base}{nanos}-{}/", rand::random::<u32>())
}

async fn next_event(w: &mut WatchStream) -> Result<crate::kv::WatchEvent> {
    match tokio::time::timeout(Duration::from_secs(10), w.next()).await {
        Ok(Some(e)) => e,
        Ok(None) => Err(Error::internal("conformance: watch ended early")),
        Err(_) => Err(Error::internal("conformance: no watch event within 10 s")),
    }
}

/// Runs the AppContext store suite under `prefix` (which should end with `/` and be unique).
///
/// # Errors
/// `Internal` naming the failed check, or the store's own error.
pub async fn app_context_store(store: &dyn AppContextStore, prefix: &str) -> Result<()> {
    let k = |s: &str| format!("{prefix}{s}");
    store.health().await?;

    // get / put / create / compare-and-set / delete
    check!(
        store.get(&k("a")).await?.is_none(),
        "a missing key reads as None"
    );
    let r1 = store.put(&k("a"), Bytes::from_static(b"1")).await?;
    let kv = store.get(&k("a")).await?;
    check!(
        kv.as_ref()
            .is_some_and(|kv| kv.value == "1" && kv.mod_revision == r1 && kv.version == 1),
        "put then get returns the value at the put revision: {kv:?}"
    );
    let r2 = store.put(&k("a"), Bytes::from_static(b"2")).await?;
    check!(r2 > r1, "revisions grow: {r1} then {r2}");
    let kv = store.get(&k("a")).await?;
    check!(
        kv.as_ref()
            .is_some_and(|kv| kv.create_revision == r1 && kv.version == 2),
        "an update keeps create_revision and bumps version: {kv:?}"
    );
    let dup = store.create(&k("a"), Bytes::from_static(b"x")).await;
    check!(
        kind_of(&dup) == Some(ErrorKind::AlreadyExists),
        "create of an existing key: {dup:?}"
    );
    store.create(&k("b"), Bytes::from_static(b"b")).await?;
    let stale = store
        .compare_and_set(&k("a"), Bytes::from_static(b"3"), r1)
        .await;
    check!(
        kind_of(&stale) == Some(ErrorKind::Conflict),
        "CAS on a stale revision: {stale:?}"
    );
    let r3 = store
        .compare_and_set(&k("a"), Bytes::from_static(b"3"), r2)
        .await?;
    check!(r3 > r2, "CAS on the current revision succeeds");
    let absent = store
        .compare_and_set(&k("c"), Bytes::from_static(b"c"), 0)
        .await?;
    check!(absent > r3, "CAS with 0 creates an absent key");
    check!(
        store.delete(&k("c")).await?,
        "delete of an existing key reports it existed"
    );
    check!(
        !store.delete(&k("c")).await?,
        "delete of a missing key reports it did not exist"
    );

    // transactions
    let txn = Txn::new()
        .when(Compare::exists(k("a")))
        .when(Compare::absent(k("t/none")))
        .op(Op::put(k("t/1"), "one"))
        .op(Op::put(k("t/2"), "two"))
        .op(Op::delete(k("b")));
    let res = store.txn(txn).await?;
    check!(
        res.succeeded && res.deleted == 1,
        "a transaction whose compares hold runs: {res:?}"
    );
    let (t1, t2) = (store.get(&k("t/1")).await?, store.get(&k("t/2")).await?);
    check!(
        t1.as_ref()
            .zip(t2.as_ref())
            .is_some_and(|(a, b)| a.mod_revision == res.revision && b.mod_revision == res.revision),
        "all operations of a transaction share one revision"
    );
    check!(
        store.get(&k("b")).await?.is_none(),
        "a transaction's delete took effect"
    );
    let failed = store
        .txn(
            Txn::new()
                .when(Compare::absent(k("a")))
                .op(Op::put(k("t/3"), "three")),
        )
        .await?;
    check!(
        !failed.succeeded,
        "a transaction whose compare fails reports it"
    );
    check!(
        store.get(&k("t/3")).await?.is_none(),
        "a failed transaction changes nothing"
    );
    let bad = store
        .txn(Txn::new().op(Op::put(k("d"), "1")).op(Op::put(k("d"), "2")))
        .await;
    check!(
        kind_of(&bad) == Some(ErrorKind::InvalidArgument),
        "a key written twice: {bad:?}"
    );

    // listing and pagination
    for i in 0..25 {
        store
            .put(&k(&format!("l/{i:03}")), Bytes::from(format!("v{i}")))
            .await?;
    }
    store.put(&k("l0"), Bytes::from_static(b"outside")).await?;
    let all = store.list_all(&k("l/"), false).await?;
    check!(
        all.len() == 25,
        "list_all under a prefix: {} keys",
        all.len()
    );
    check!(
        all.windows(2).all(|w| w[0].key < w[1].key),
        "listing is in key order"
    );
    check!(all[7].value == "v7", "listing returns values");
    let mut seen = Vec::new();
    let mut start_after = None;
    loop {
        let page = store
            .list(
                &k("l/"),
                ListOptions {
                    limit: Some(10),
                    start_after,
                    keys_only: true,
                },
            )
            .await?;
        check!(page.kvs.len() <= 10, "a page respects the limit");
        check!(
            page.kvs.iter().all(|kv| kv.value.is_empty()),
            "keys_only leaves values empty"
        );
        seen.extend(page.kvs.iter().map(|kv| kv.key.clone()));
        if !page.more {
            break;
        }
        start_after = seen.last().cloned();
    }
    check!(
        seen.len() == 25 && seen == all.iter().map(|kv| kv.key.clone()).collect::<Vec<_>>(),
        "pages cover the listing exactly once: {}",
        seen.len()
    );
    let n = store.delete_prefix(&k("l/")).await?;
    check!(
        n == 25,
        "delete_prefix removes the keys under the prefix: {n}"
    );
    check!(
        store.get(&k("l0")).await?.is_some(),
        "delete_prefix leaves other keys"
    );

    // child names: one level below a base, whatever lies below each child or beside it
    let base = k("c/");
    let mut keys = vec![
        "a/".to_owned(),
        "a-b/".to_owned(),
        "b".to_owned(),
        "d/e/".to_owned(),
        "f/".to_owned(),
        "g/".to_owned(),
    ];
    // Subtrees long enough to be skipped rather than read, with names that sort around them.
    keys.extend((0..30).map(|i| format!("a/x{i:02}/")));
    keys.extend((0..12).map(|i| format!("f/{i:02}/deep/")));
    keys.extend(["a0/".to_owned(), "a/0/".to_owned(), "/x/".to_owned()]);
    for key in &keys {
        store
            .put(&format!("{base}{key}"), Bytes::from_static(b"c"))
            .await?;
    }
    store.put(&k("c"), Bytes::from_static(b"beside")).await?;
    store.put(&k("c0/"), Bytes::from_static(b"after")).await?;
    let names = store.child_names(&base).await?;
    check!(
        names == ["a-b", "a", "a0", "f", "g"],
        "child names are the keys one level below, in key order: {names:?}"
    );
    check!(
        store.child_names(&k("none/")).await?.is_empty(),
        "no child names under an empty base"
    );
    store.delete_prefix(&base).await?;

    // watch: nothing lost between a listing and a watch from its revision
    let page = store.list(&k("w/"), ListOptions::default()).await?;
    store.put(&k("w/1"), Bytes::from_static(b"1")).await?;
    store.put(&k("x/ignored"), Bytes::from_static(b"-")).await?;
    let mut w = store.watch(&k("w/"), page.revision).await?;
    store.put(&k("w/2"), Bytes::from_static(b"2")).await?;
    store.delete(&k("w/1")).await?;
    let e1 = next_event(&mut w).await?;
    check!(
        e1.kind == EventKind::Put && e1.key == k("w/1") && e1.value == "1",
        "the watch replays a change made before it started: {e1:?}"
    );
    let e2 = next_event(&mut w).await?;
    check!(
        e2.kind == EventKind::Put && e2.key == k("w/2") && e2.mod_revision > e1.mod_revision,
        "the watch then delivers live changes in order: {e2:?}"
    );
    let e3 = next_event(&mut w).await?;
    check!(
        e3.kind == EventKind::Delete && e3.key == k("w/1"),
        "deletes are delivered: {e3:?}"
    );
    let r = store
        .txn(
            Txn::new()
                .op(Op::put(k("w/3"), "3"))
                .op(Op::put(k("w/4"), "4")),
        )
        .await?;
    let (e4, e5) = (next_event(&mut w).await?, next_event(&mut w).await?);
    check!(
        e4.mod_revision == r.revision && e5.mod_revision == r.revision,
        "a transaction's changes arrive with its revision"
    );
    drop(w);

    // A watcher that does not read while many changes happen still gets every one, in order
    // (the local stores' live channel holds 1024 batches; this overflows it).
    let start = store
        .list(&k("slow/"), ListOptions::default())
        .await?
        .revision;
    let mut slow = store.watch(&k("slow/"), start).await?;
    let total = 1100;
    for i in 0..total {
        store
            .put(&k(&format!("slow/{}", i % 7)), Bytes::from(i.to_string()))
            .await?;
    }
    for i in 0..total {
        let e = next_event(&mut slow).await?;
        check!(
            e.value == i.to_string(),
            "a slow watcher sees change {i} in order: {e:?}"
        );
    }
    drop(slow);

    store.delete_prefix(prefix).await?;
    check!(
        store.list_all(prefix, true).await?.is_empty(),
        "cleanup removed everything"
    );
    Ok(())
}

/// Checks that a watch starting before the store's retained history fails with a
/// [`Compacted`](crate::kv::Compacted) cause. `store` must keep at most `capacity` events in its
/// change log (memory and redb backends built with a small log).
///
/// # Errors
/// `Internal` naming the failed check.
pub async fn compaction(store: &dyn AppContextStore, prefix: &str, capacity: usize) -> Result<()> {
    let first = store
        .put(&format!("{prefix}c"), Bytes::from_static(b"0"))
        .await?;
    for i in 0..capacity + 2 {
        store
            .put(&format!("{prefix}c"), Bytes::from(i.to_string()))
            .await?;
    }
    let res = store.watch(prefix, first - 1).await;
    check!(
        res.as_ref().err().and_then(compacted_revision).is_some(),
        "a watch from before the log is reported as compacted"
    );
    Ok(())
}

fn blob_of(parts: &[&'static [u8]]) -> BlobStream {
    let items: Vec<Result<Bytes>> = parts.iter().map(|p| Ok(Bytes::from_static(p))).collect();
    Box::pin(futures::stream::iter(items))
}

async fn read_blob(s: BlobStream) -> Result<Vec<u8>> {
    let parts: Vec<Result<Bytes>> = s.collect().await;
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&p?);
    }
    Ok(out)
}

/// Runs the resource store suite under a root segment `("conformance", run)`; `run` should be
/// unique per run.
///
/// # Errors
/// `Internal` naming the failed check, or the store's own error.
pub async fn resource_store(store: &dyn ResourceStore, run: &str) -> Result<()> {
    store.health().await?;
    let root = ResourceKey::root().child("conformance", run);
    let p1 = root.child("project", "p1");
    let ca = p1.child("compositeApp", "ca");
    let orphan = root.child("project", "nope").child("compositeApp", "x");

    store.create(&root, &json!({"run": run})).await?;
    let r = store.create(&orphan, &json!({})).await;
    check!(
        kind_of(&r) == Some(ErrorKind::NotFound),
        "create without parent: {r:?}"
    );
    store
        .create(&p1, &json!({"metadata": {"name": "p1"}}))
        .await?;
    let r = store.create(&p1, &json!({})).await;
    check!(
        kind_of(&r) == Some(ErrorKind::AlreadyExists),
        "create of an existing key: {r:?}"
    );
    let got = store.get(&p1).await?;
    check!(
        got == Some(json!({"metadata": {"name": "p1"}})),
        "get returns the document: {got:?}"
    );
    store
        .update(
            &p1,
            &json!({"metadata": {"name": "p1", "description": "d"}}),
        )
        .await?;
    let got = store.get(&p1).await?;
    check!(
        got.as_ref()
            .and_then(|v| v.pointer("/metadata/description"))
            == Some(&json!("d")),
        "update replaces the document: {got:?}"
    );
    let r = store
        .update(&root.child("project", "none"), &json!({}))
        .await;
    check!(
        kind_of(&r) == Some(ErrorKind::NotFound),
        "update of a missing key: {r:?}"
    );
    let r = store
        .put(
            &root.child("project", "p0"),
            &json!({"n": 0}),
            crate::PutMode::Upsert,
        )
        .await;
    check!(r.is_ok(), "upsert creates: {r:?}");
    store
        .put(
            &root.child("project", "p0"),
            &json!({"n": 1}),
            crate::PutMode::Upsert,
        )
        .await?;
    check!(
        store.get(&root.child("project", "p0")).await? == Some(json!({"n": 1})),
        "upsert replaces"
    );

    // children and filters
    store
        .create(&ca, &json!({"spec": {"labels": ["edge"], "tier": "a"}}))
        .await?;
    store
        .create(
            &p1.child("compositeApp", "cb"),
            &json!({"spec": {"labels": ["core"], "tier": "a"}}),
        )
        .await?;
    store
        .create(
            &p1.child("compositeApp", "c/slash"),
            &json!({"spec": {"tier": "b"}}),
        )
        .await?;
    store.create(&ca.child("version", "v1"), &json!({})).await?;
    store.create(&p1.child("other", "o1"), &json!({})).await?;
    let all = store.list(&p1, "compositeApp", &[]).await?;
    let names: Vec<_> = all
        .iter()
        .filter_map(|(k, _)| k.name().map(str::to_owned))
        .collect();
    check!(
        names == ["ca", "cb", "c/slash"],
        "list returns direct children of one type in creation order: {names:?}"
    );
    check!(
        all.iter().all(|(k, _)| k.parent().as_ref() == Some(&p1)),
        "listed keys decode"
    );
    let edge = store
        .list(&p1, "compositeApp", &[Filter::eq("spec.labels", "edge")])
        .await?;
    check!(
        edge.len() == 1 && edge[0].0 == ca,
        "filter on an array value: {edge:?}"
    );
    let tier = store
        .list(&p1, "compositeApp", &[Filter::eq("spec.tier", "a")])
        .await?;
    check!(tier.len() == 2, "filter on a string value: {}", tier.len());
    let both = store
        .list(
            &p1,
            "compositeApp",
            &[
                Filter::eq("spec.tier", "a"),
                Filter::eq("spec.labels", "core"),
            ],
        )
        .await?;
    check!(both.len() == 1, "filters combine with and: {}", both.len());
    let tops = store.list(&root, "project", &[]).await?;
    check!(tops.len() == 2, "list under a parent: {}", tops.len());
    creation_order(store, &p1).await?;

    // delete integrity
    let r = store.delete(&ca).await;
    check!(
        kind_of(&r) == Some(ErrorKind::Conflict),
        "delete of a parent with children: {r:?}"
    );
    store.delete(&ca.child("version", "v1")).await?;
    let r = store.delete(&ca.child("version", "v1")).await;
    check!(
        kind_of(&r) == Some(ErrorKind::NotFound),
        "delete of a missing key: {r:?}"
    );

    // blobs
    let r = store
        .put_blob(&root.child("project", "none"), "chart", blob_of(&[b"x"]))
        .await;
    check!(
        kind_of(&r) == Some(ErrorKind::NotFound),
        "blob of a missing object: {r:?}"
    );
    let size = store
        .put_blob(&ca, "chart", blob_of(&[b"hello ", b"world"]))
        .await?;
    check!(size == 11, "put_blob returns the size: {size}");
    let data = read_blob(store.get_blob(&ca, "chart").await?).await?;
    check!(data == b"hello world", "get_blob returns the bytes");
    store.put_blob(&ca, "chart", blob_of(&[b"v2"])).await?;
    let data = read_blob(store.get_blob(&ca, "chart").await?).await?;
    check!(data == b"v2", "put_blob replaces a blob");
    let big: Vec<u8> = (0..(crate::resource::BLOB_CHUNK * 2 + 12345))
        .map(|i| (i % 251) as u8)
        .collect();
    let pieces: Vec<Result<Bytes>> = big
        .chunks(100_000)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let size = store
        .put_blob(&ca, "big", Box::pin(futures::stream::iter(pieces)))
        .await?;
    check!(
        size == big.len() as u64,
        "a multi-chunk blob's size: {size}"
    );
    check!(
        read_blob(store.get_blob(&ca, "big").await?).await? == big,
        "a multi-chunk blob round trips"
    );
    let failing: BlobStream = Box::pin(futures::stream::iter(vec![
        Ok(Bytes::from_static(b"partial")),
        Err(Error::unavailable("upload broke")),
    ]));
    let r = store.put_blob(&ca, "chart", failing).await;
    check!(r.is_err(), "a failing upload fails");
    check!(
        read_blob(store.get_blob(&ca, "chart").await?).await? == b"v2",
        "a failed upload leaves the previous blob"
    );

    // compare-and-set of blobs
    let r = store
        .put_blob_if(&ca, "chart", blob_of(&[b"x"]), Expect::Absent)
        .await;
    check!(
        kind_of(&r) == Some(ErrorKind::Conflict),
        "an expected-absent put over a blob: {r:?}"
    );
    let (v2, _) = store.get_blob_versioned(&ca, "chart").await?;
    let (_, v3) = store
        .put_blob_if(&ca, "chart", blob_of(&[b"v3"]), Expect::Version(v2))
        .await?;
    check!(v3 != v2, "a put makes a new version");
    let r = store
        .put_blob_if(&ca, "chart", blob_of(&[b"stale"]), Expect::Version(v2))
        .await;
    check!(
        kind_of(&r) == Some(ErrorKind::Conflict),
        "a put expecting a replaced version: {r:?}"
    );
    let (now, data) = store.get_blob_versioned(&ca, "chart").await?;
    check!(
        now == v3 && read_blob(data).await? == b"v3",
        "a refused put leaves the winner's blob and version"
    );
    let (_, first) = store
        .put_blob_if(&ca, "state", blob_of(&[b"s1"]), Expect::Absent)
        .await?;
    let r = store
        .put_blob_if(&ca, "state", blob_of(&[b"s2"]), Expect::Absent)
        .await;
    check!(
        kind_of(&r) == Some(ErrorKind::Conflict),
        "a second first write: {r:?}"
    );
    // Many writers expecting one version: exactly one wins.
    let writers = (0..8).map(|i| {
        store.put_blob_if(
            &ca,
            "state",
            blob_of(&[if i % 2 == 0 {
                &b"even"[..]
            } else {
                &b"odd!"[..]
            }]),
            Expect::Version(first),
        )
    });
    let won = futures::future::join_all(writers)
        .await
        .into_iter()
        .filter(Result::is_ok)
        .count();
    check!(won == 1, "{won} of 8 racing writers won one version");
    store.delete_blob(&ca, "state").await?;

    check!(
        store.delete_blob(&ca, "big").await?,
        "delete_blob reports an existing blob"
    );
    let r = store.get_blob(&ca, "big").await;
    check!(
        kind_of(&r) == Some(ErrorKind::NotFound),
        "a deleted blob is gone"
    );
    store.delete(&ca).await?;
    let r = store.get_blob(&ca, "chart").await;
    check!(
        kind_of(&r) == Some(ErrorKind::NotFound),
        "deleting an object deletes its blobs"
    );

    // cleanup, children first
    for (k, _) in store.list(&p1, "compositeApp", &[]).await? {
        store.delete(&k).await?;
    }
    store.delete(&p1.child("other", "o1")).await?;
    store.delete(&p1).await?;
    store.delete(&root.child("project", "p0")).await?;
    store.delete(&root).await?;
    check!(
        store.get(&root).await?.is_none(),
        "cleanup removed the root"
    );
    Ok(())
}

/// Lists answer in creation order, as EMCO's MongoDB does (EMCO: src/orchestrator/pkg/infra/db/
/// mongo.go, `Find` reads without a sort, `Insert` updates in place with `$set`): an update
/// keeps an object's place, one deleted and created again comes last, and filters keep the order.
async fn creation_order(store: &dyn ResourceStore, parent: &ResourceKey) -> Result<()> {
    let names = |listed: Vec<(ResourceKey, Value)>| -> Vec<String> {
        listed
            .iter()
            .filter_map(|(k, _)| k.name().map(str::to_owned))
            .collect()
    };
    for name in ["rsync", "gac", "dtc", "a-last"] {
        store
            .create(&parent.child("controller", name), &json!({"n": name}))
            .await?;
    }
    let listed = names(store.list(parent, "controller", &[]).await?);
    check!(
        listed == ["rsync", "gac", "dtc", "a-last"],
        "a list in creation order, not name order: {listed:?}"
    );
    store
        .update(
            &parent.child("controller", "rsync"),
            &json!({"n": "changed"}),
        )
        .await?;
    store
        .put(
            &parent.child("controller", "gac"),
            &json!({"n": "upserted"}),
            crate::PutMode::Upsert,
        )
        .await?;
    store.delete(&parent.child("controller", "dtc")).await?;
    store
        .create(&parent.child("controller", "dtc"), &json!({"n": "again"}))
        .await?;
    let listed = names(store.list(parent, "controller", &[]).await?);
    check!(
        listed == ["rsync", "gac", "a-last", "dtc"],
        "updates keep their place, a re-created object comes last: {listed:?}"
    );
    let filtered = names(
        store
            .list(parent, "controller", &[Filter::eq("n", "again")])
            .await?,
    );
    check!(filtered == ["dtc"], "a filtered list: {filtered:?}");
    for (k, _) in store.list(parent, "controller", &[]).await? {
        store.delete(&k).await?;
    }
    Ok(())
}

/// [`ResourceStore::list_with_children`]: each child of one type with its own children of
/// another, whatever sorts between them (`ca-x` between `ca` and `ca`'s children, escaped
/// names), and nothing else below a child.
///
/// # Errors
/// The first check that fails, or the store's error.
pub async fn families(store: &dyn ResourceStore, run: &str) -> Result<()> {
    let root = ResourceKey::root().child("families", run);
    let p = root.child("provider", "p");
    store.create(&root, &json!({})).await?;
    store.create(&p, &json!({})).await?;
    for c in ["ca", "c/slash", "ca-x", "cb"] {
        store
            .create(&p.child("cluster", c), &json!({"name": c}))
            .await?;
    }
    let ca = p.child("cluster", "ca");
    for (parent, kind, name) in [
        (&ca, "label", "l2"),
        (&ca, "label", "l1"),
        (&ca, "kv", "k1"),
        (&p.child("cluster", "ca-x"), "label", "x/1"),
        (&p.child("cluster", "c/slash"), "label", "s"),
    ] {
        store
            .create(&parent.child(kind, name), &json!({"label": name}))
            .await?;
    }
    store
        .create(&ca.child("label", "l1").child("label", "deep"), &json!({}))
        .await?;
    store
        .create(&root.child("provider", "q").clone(), &json!({}))
        .await?;
    store
        .create(
            &root.child("provider", "q").child("cluster", "other"),
            &json!({}),
        )
        .await?;

    let got = store.list_with_children(&p, "cluster", "label").await?;
    let shape: Vec<(String, Vec<String>)> = got
        .iter()
        .map(|((k, _), below)| {
            (
                k.name().unwrap_or_default().to_owned(),
                below
                    .iter()
                    .map(|(k, v)| format!("{}={}", k.name().unwrap_or_default(), v["label"]))
                    .collect(),
            )
        })
        .collect();
    // Both levels in creation order.
    let want: Vec<(String, Vec<String>)> = [
        ("ca", vec![r#"l2="l2""#, r#"l1="l1""#]),
        ("c/slash", vec![r#"s="s""#]),
        ("ca-x", vec![r#"x/1="x/1""#]),
        ("cb", vec![]),
    ]
    .into_iter()
    .map(|(c, l)| (c.to_owned(), l.into_iter().map(str::to_owned).collect()))
    .collect();
    check!(shape == want, "children with their children: {shape:?}");
    check!(
        got.iter()
            .all(|((k, v), below)| k.parent().as_ref() == Some(&p)
                && v["name"] == k.name().unwrap_or_default()
                && below.iter().all(|(b, _)| b.parent().as_ref() == Some(k))),
        "the keys and documents belong together"
    );
    let none = store.list_with_children(&p, "nothing", "label").await?;
    check!(none.is_empty(), "no children of a type: {none:?}");
    Ok(())
}
