//! The sealing wrapper against the store conformance suite (emco-store's).

use emco_store::{InMemoryResourceStore, conformance};

/// The sealing wrapper answers as the store it wraps: blobs, lists, their order and integrity.
#[tokio::test]
async fn sealed_resource_store_conforms() {
    use emco_appcontext::sealed::{Keyring, SealedStore};
    use std::sync::Arc;
    let key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let keyring = Keyring::parse(&format!("k1:{key}")).unwrap();
    let store = SealedStore::new(
        Arc::new(InMemoryResourceStore::new()),
        Some(Arc::new(keyring)),
    );
    conformance::resource_store(&store, "run").await.unwrap();
    conformance::families(&store, "run").await.unwrap();
}
