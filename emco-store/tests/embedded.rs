//! The conformance suites on the embedded (redb) backends, and the crash test: a writer killed
//! with SIGKILL mid-stream loses no acknowledged write.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use bytes::Bytes;
use emco_store::embedded::RedbBuilder;
use emco_store::{AppContextStore, Op, Txn, conformance};

#[tokio::test]
async fn redb_app_context_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let db = RedbBuilder::new()
        .with_path(dir.path().join("s.redb"))
        .build()
        .unwrap();
    conformance::app_context_store(db.app_context_store().as_ref(), "/conformance/")
        .await
        .unwrap();
}

#[tokio::test]
async fn redb_watch_from_before_the_log_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let db = RedbBuilder::new()
        .with_path(dir.path().join("s.redb"))
        .with_log_capacity(8)
        .build()
        .unwrap();
    conformance::compaction(db.app_context_store().as_ref(), "/compaction/", 8)
        .await
        .unwrap();
}

#[tokio::test]
async fn redb_resource_store_conforms() {
    let dir = tempfile::tempdir().unwrap();
    let db = RedbBuilder::new()
        .with_path(dir.path().join("s.redb"))
        .build()
        .unwrap();
    conformance::resource_store(db.resource_store().as_ref(), "run")
        .await
        .unwrap();
    conformance::families(db.resource_store().as_ref(), "run")
        .await
        .unwrap();
}

#[tokio::test]
async fn redb_keeps_data_and_revisions_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let rev = {
        let db = RedbBuilder::new().with_path(&path).build().unwrap();
        let s = db.app_context_store();
        s.put("/a/", Bytes::from_static(b"1")).await.unwrap();
        s.put("/b/", Bytes::from_static(b"2")).await.unwrap()
    };
    let db = RedbBuilder::new().with_path(&path).build().unwrap();
    let s = db.app_context_store();
    assert_eq!(s.get("/b/").await.unwrap().unwrap().mod_revision, rev);
    let next = s.put("/c/", Bytes::from_static(b"3")).await.unwrap();
    assert_eq!(next, rev + 1, "revisions continue after a reopen");
    // History before the open is gone: a watch from before it is compacted.
    assert!(s.watch("/", rev - 1).await.is_err());
    assert!(s.watch("/", rev).await.is_ok());
}

/// The file hold says released only once the file can be opened again: not while a store or
/// a read it started keeps the database, and at once after the last one let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_hold_tells_when_the_file_can_be_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let db = RedbBuilder::new().with_path(&path).build().unwrap();
    let hold = db.hold();
    let (contexts, resources) = (db.app_context_store(), db.resource_store());
    drop(db);
    contexts.put("/a/", Bytes::from_static(b"1")).await.unwrap();
    drop(contexts);
    assert!(
        !hold.is_released(),
        "the resource store still holds the file"
    );
    assert!(RedbBuilder::new().with_path(&path).build().is_err());
    drop(resources);
    assert!(hold.is_released());
    let again = RedbBuilder::new().with_path(&path).build().unwrap();
    let s = again.app_context_store();
    assert_eq!(
        s.get("/a/").await.unwrap().unwrap().value,
        Bytes::from_static(b"1")
    );
}

/// Writes of concurrent callers share commits (one fsync for a group): each still gets its
/// own answer (one create of a name wins, the others AlreadyExists; a write refused in a group
/// takes nothing from the others), and every acknowledged write is there after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_commit_together_and_answer_alone() {
    use emco_core::ErrorKind;
    use emco_store::{PutMode, ResourceKey, ResourceStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let project = |n: usize| ResourceKey::root().child("project", format!("p{n}"));
    {
        let db = RedbBuilder::new().with_path(&path).build().unwrap();
        let store = db.resource_store();
        let writes = (0..400).map(|i| {
            let store = std::sync::Arc::clone(&store);
            // Two callers create each of 200 names; a third of the names also get an update
            // of a project that does not exist.
            async move {
                let key = project(i % 200);
                let created = store
                    .put(&key, &serde_json::json!({"by": i}), PutMode::Create)
                    .await;
                let missing = store
                    .put(&project(1000 + i), &serde_json::json!({}), PutMode::Update)
                    .await;
                (
                    i % 200,
                    created.map_err(|e| e.kind()),
                    missing.map_err(|e| e.kind()),
                )
            }
        });
        let answers = futures::future::join_all(writes.map(tokio::spawn)).await;
        let mut wins = vec![0; 200];
        for a in answers {
            let (name, created, missing) = a.unwrap();
            match created {
                Ok(()) => wins[name] += 1,
                Err(kind) => assert_eq!(kind, ErrorKind::AlreadyExists),
            }
            assert_eq!(missing, Err(ErrorKind::NotFound));
        }
        assert!(
            wins.iter().all(|&w| w == 1),
            "one create of each name wins: {wins:?}"
        );
        for i in 0..200 {
            store.delete(&project(i)).await.unwrap();
            store
                .put(
                    &project(i),
                    &serde_json::json!({"again": i}),
                    PutMode::Create,
                )
                .await
                .unwrap();
        }
    }
    let db = RedbBuilder::new().with_path(&path).build().unwrap();
    let store = db.resource_store();
    for i in 0..200 {
        let doc = store.get(&project(i)).await.unwrap();
        assert_eq!(doc, Some(serde_json::json!({"again": i})));
    }
    assert_eq!(store.get(&project(1000)).await.unwrap(), None);
}

/// AppContext transactions of concurrent callers share commits too, yet each is its own
/// revision: compare-and-swap increments of one counter all land (a compare sees the writes
/// committed before it in its group), every answered revision is distinct, a watch sees each
/// change once in revision order at the revision its writer was given, and all of it is there
/// after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_transactions_commit_together_each_at_its_own_revision() {
    use emco_store::Compare;
    use emco_store::kv::EventKind;
    use futures::StreamExt;
    const CALLERS: usize = 64;
    const ROUNDS: usize = 5;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let start = {
        let db = RedbBuilder::new().with_path(&path).build().unwrap();
        let store = db.app_context_store();
        let start = store
            .put("/counter", Bytes::from_static(b"0"))
            .await
            .unwrap();
        let mut watch = store.watch("/", start).await.unwrap();
        let callers = (0..CALLERS).map(|c| {
            let store = std::sync::Arc::clone(&store);
            tokio::spawn(async move {
                let mut revisions = Vec::new();
                for round in 0..ROUNDS {
                    // A write of its own key, then an increment retried until its compare holds.
                    let own = Txn::new().op(Op::put(format!("/own/{c}/{round}"), "x"));
                    revisions.push(store.txn(own).await.unwrap().revision);
                    loop {
                        let kv = store.get("/counter").await.unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&kv.value).unwrap().parse().unwrap();
                        let inc = Txn::new()
                            .when(Compare::mod_revision("/counter", kv.mod_revision))
                            .op(Op::put("/counter", (n + 1).to_string()));
                        let done = store.txn(inc).await.unwrap();
                        if done.succeeded {
                            revisions.push(done.revision);
                            break;
                        }
                    }
                }
                revisions
            })
        });
        let mut answered: Vec<u64> = futures::future::join_all(callers)
            .await
            .into_iter()
            .flat_map(Result::unwrap)
            .collect();
        answered.sort_unstable();
        let total = CALLERS * ROUNDS * 2;
        assert_eq!(answered.len(), total);
        assert!(
            answered.windows(2).all(|w| w[0] < w[1]),
            "every answered revision is distinct"
        );
        assert_eq!(
            answered,
            (start + 1..=start + total as u64).collect::<Vec<_>>()
        );
        let mut seen = Vec::new();
        while seen.len() < total {
            let e = watch.next().await.unwrap().unwrap();
            assert_eq!(e.kind, EventKind::Put);
            seen.push(e.mod_revision);
        }
        assert_eq!(seen, answered, "the watch sees each change once, in order");
        let counter = store.get("/counter").await.unwrap().unwrap();
        assert_eq!(counter.value, (CALLERS * ROUNDS).to_string().as_bytes());
        start
    };
    let db = RedbBuilder::new().with_path(&path).build().unwrap();
    let store = db.app_context_store();
    let counter = store.get("/counter").await.unwrap().unwrap();
    assert_eq!(counter.value, (CALLERS * ROUNDS).to_string().as_bytes());
    let next = store.put("/after", Bytes::from_static(b"1")).await.unwrap();
    assert_eq!(next, start + (CALLERS * ROUNDS * 2) as u64 + 1);
}

const CHILD_ENV: &str = "EMCO_CRASH_WRITER_DB";

/// Not a test on its own: the child process of `sigkill_loses_no_acknowledged_write`. It writes
/// transactions of two keys forever and prints `ack <n>` after each commit.
#[tokio::test]
#[ignore = "run by sigkill_loses_no_acknowledged_write as a child process"]
async fn crash_writer_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let round = std::env::var("EMCO_CRASH_WRITER_ROUND").unwrap();
    let db = RedbBuilder::new().with_path(path).build().unwrap();
    let s = db.app_context_store();
    for i in 0u64.. {
        let txn = Txn::new()
            .op(Op::put(
                format!("/r{round}/{i:08}/a"),
                Bytes::from(vec![b'a'; 512]),
            ))
            .op(Op::put(
                format!("/r{round}/{i:08}/b"),
                Bytes::from(i.to_string()),
            ));
        s.txn(txn).await.unwrap();
        println!("ack {i}");
    }
}

#[tokio::test]
async fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    for (round, kill_after) in [(0, 1usize), (1, 37), (2, 250), (3, 700)] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "crash_writer_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &path)
            .env("EMCO_CRASH_WRITER_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("ack ") {
                acked.push(n.parse::<u64>().unwrap());
                if acked.len() == kill_after {
                    break;
                }
            }
        }
        assert_eq!(
            acked.len(),
            kill_after,
            "the writer stopped early in round {round}"
        );
        child.kill().unwrap(); // SIGKILL on Unix
        child.wait().unwrap();

        let db = RedbBuilder::new().with_path(&path).build().unwrap();
        let s = db.app_context_store();
        for n in &acked {
            let b = s.get(&format!("/r{round}/{n:08}/b")).await.unwrap();
            assert_eq!(
                b.map(|kv| kv.value),
                Some(Bytes::from(n.to_string())),
                "round {round}: ack {n} lost"
            );
        }
        // Every transaction is whole: keys come in pairs.
        let keys = s.list_all(&format!("/r{round}/"), true).await.unwrap();
        assert_eq!(keys.len() % 2, 0, "round {round}: a transaction was torn");
        assert!(keys.len() / 2 >= acked.len());
        drop(s);
        drop(db);
    }
}
