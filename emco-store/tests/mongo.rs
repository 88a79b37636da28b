//! The resource store conformance suite against the MongoDB wire-protocol server the test
//! command starts (`EMCO_TEST_MONGO=mongodb://127.0.0.1:PORT`). In CI that server is nx-27017, a
//! wire-compatible server, not a real mongod.

use emco_store::conformance;
use emco_store::mongo::MongoBuilder;

#[tokio::test]
async fn mongo_resource_store_conforms() {
    let Ok(uri) = std::env::var("EMCO_TEST_MONGO") else {
        eprintln!("SKIPPED: EMCO_TEST_MONGO not set; the MongoDB conformance suite did not run");
        return;
    };
    // A fresh database per run so re-runs and parallel runs do not collide.
    let db = conformance::unique_prefix("emco_rs_test_").replace(['/', '-'], "_");
    let store = MongoBuilder::new()
        .with_uri(uri)
        .with_database(db.trim_end_matches('_'))
        .build()
        .await
        .unwrap();
    conformance::resource_store(&store, "run").await.unwrap();
    conformance::families(&store, "run").await.unwrap();
}
