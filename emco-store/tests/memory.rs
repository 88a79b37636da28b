//! The conformance suites on the in-memory backends.

use emco_store::conformance;
use emco_store::{InMemoryAppContextStore, InMemoryResourceStore};

#[tokio::test]
async fn memory_app_context_store_conforms() {
    let store = InMemoryAppContextStore::new();
    conformance::app_context_store(&store, "/conformance/")
        .await
        .unwrap();
}

#[tokio::test]
async fn memory_watch_from_before_the_log_is_compacted() {
    let store = InMemoryAppContextStore::with_log_capacity(8);
    conformance::compaction(&store, "/compaction/", 8)
        .await
        .unwrap();
}

#[tokio::test]
async fn memory_resource_store_conforms() {
    let store = InMemoryResourceStore::new();
    conformance::resource_store(&store, "run").await.unwrap();
    conformance::families(&store, "run").await.unwrap();
}

/// The wrapper that fences a replica's writes is a store like any other while its fence holds.
#[tokio::test]
async fn a_fenced_store_whose_fence_holds_conforms() {
    use emco_store::{AppContextStore, FencedStore};
    use std::sync::Arc;
    let inner: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let token = inner.put("/fence/", "me".into()).await.unwrap();
    conformance::app_context_store(&FencedStore::new(inner, "/fence/", token), "/conformance/")
        .await
        .unwrap();
}
