//! The AppContext conformance suite against the real etcd the test command starts
//! (`EMCO_TEST_ETCD=http://127.0.0.1:PORT`).

// Test helpers outside #[test] functions unwrap too: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use emco_appcontext::conformance;
use emco_appcontext::etcd::{EtcdAppContextStore, EtcdBuilder};

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
    use emco_appcontext::{AppContextStore, Op, Txn};
    let Some(s) = store().await else { return };
    let prefix = conformance::unique_prefix("/emco-rs-test/limit-");
    let mut txn = Txn::new();
    for i in 0..=emco_appcontext::context::MAX_TXN_OPS {
        txn = txn.op(Op::put(format!("{prefix}{i}"), "v"));
    }
    let err = s.txn(txn).await.unwrap_err();
    assert_eq!(err.kind(), emco_core::ErrorKind::InvalidArgument, "{err}");
    assert!(s.list_all(&prefix, true).await.unwrap().is_empty());
}
