//! The AppContext conformance suite against the real etcd the test command starts
//! (`EMCO_TEST_ETCD=http://127.0.0.1:PORT`).

// Test helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use emco_store::conformance;
use emco_store::etcd::{EtcdAppContextStore, EtcdBuilder};

async fn store() -> Option<EtcdAppContextStore> {
    let Ok(url) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!("SKIPPED: EMCO_TEST_ETCD not set; the etcd conformance suite did not run");
        return None;
    };
    // Set but unreachable is a failure, not a skip.
    Some(
        EtcdBuilder::new()
            .with_endpoints([url])
            .build()
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn etcd_app_context_store_conforms() {
    let Some(s) = store().await else { return };
    let prefix = conformance::unique_prefix("/emco-rs-test/conformance-");
    conformance::app_context_store(&s, &prefix).await.unwrap();
}

#[tokio::test]
async fn etcd_rejects_a_transaction_over_its_operation_limit() {
    use emco_store::{AppContextStore, Op, Txn};
    let Some(s) = store().await else { return };
    let prefix = conformance::unique_prefix("/emco-rs-test/limit-");
    let mut txn = Txn::new();
    for i in 0..=emco_store::kv::MAX_TXN_OPS {
        txn = txn.op(Op::put(format!("{prefix}{i}"), "v"));
    }
    let err = s.txn(txn).await.unwrap_err();
    assert_eq!(err.kind(), emco_core::ErrorKind::InvalidArgument, "{err}");
    assert!(s.list_all(&prefix, true).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_prefixed_store_conforms_and_is_isolated() {
    use emco_store::AppContextStore;
    use futures::StreamExt;
    let Some(plain) = store().await else { return };
    let root = conformance::unique_prefix("/emco-rs-test/ns-");
    let url = std::env::var("EMCO_TEST_ETCD").unwrap();
    let scoped = EtcdBuilder::new()
        .with_endpoints([url])
        .with_prefix(root.clone())
        .build()
        .await
        .unwrap();
    conformance::app_context_store(&scoped, "/conformance/")
        .await
        .unwrap();

    // The same key names on both sides are different keys; the prefix never shows.
    let mut events = scoped.watch("/activecontext/", 0).await.unwrap();
    scoped.put("/activecontext/7/", "7".into()).await.unwrap();
    let seen = events.next().await.unwrap().unwrap();
    assert_eq!(seen.key, "/activecontext/7/");
    let listed = scoped.list_all("/activecontext/", true).await.unwrap();
    assert_eq!(
        listed.iter().map(|kv| kv.key.as_str()).collect::<Vec<_>>(),
        ["/activecontext/7/"],
        "only the scoped registry"
    );
    assert_eq!(
        scoped.get("/activecontext/7/").await.unwrap().unwrap().key,
        "/activecontext/7/"
    );
    let raw = plain
        .get(&format!("{root}/activecontext/7/"))
        .await
        .unwrap();
    assert_eq!(raw.unwrap().value.as_ref(), b"7");
    assert!(
        plain.get("/activecontext/7/").await.unwrap().is_none(),
        "the unprefixed registry does not see the scoped entry"
    );
    assert_eq!(plain.delete_prefix(&root).await.unwrap(), 1);
}

/// Members given first that are down (nothing listens there) cost a failed try each, once: the
/// store moves on to a live member and stays there, so every request of a stream is answered.
#[tokio::test]
async fn members_that_are_down_are_passed_over() {
    use emco_store::AppContextStore;
    let Ok(url) = std::env::var("EMCO_TEST_ETCD") else {
        eprintln!("SKIPPED: EMCO_TEST_ETCD not set");
        return;
    };
    let down = |_| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let mut endpoints: Vec<String> = (0..2).map(down).collect();
    endpoints.push(url);
    let s = EtcdBuilder::new()
        .with_endpoints(endpoints)
        .with_prefix(conformance::unique_prefix("/emco-rs-test/members-"))
        .build()
        .await
        .unwrap();
    for i in 0..50 {
        let key = format!("/k{i}");
        s.put(&key, "v".into()).await.unwrap();
        assert!(s.get(&key).await.unwrap().is_some());
    }
    s.delete_prefix("/").await.unwrap();
}
