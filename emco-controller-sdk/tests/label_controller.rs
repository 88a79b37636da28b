//! The example controller's test: its intent is posted through its REST routes, then the
//! orchestrator's client calls it over gRPC and the Deployments of the named app are labelled.

#![allow(clippy::unwrap_used, missing_docs)]

#[allow(dead_code)]
#[path = "../../emco/examples/label_controller.rs"]
mod example;

mod common;

use emco_core::ContextId;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Body;
use common::{labels, registration, seeded, serve};
use emco_appcontext::keys::Keyed;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::client::ControllerRegistry;
use emco_controller_sdk::{IntentType, Stores};
use emco_core::DigRef;
use emco_core::ErrorKind;
use emco_store::{AppContextStore, InMemoryResourceStore, PutMode, ResourceStore};
use http::{Request, StatusCode};
use serde_json::json;
use tower::ServiceExt;

const DIG_URL: &str = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig";

/// A resource store holding the DIG `p/ca/v1/dig`, and a context made for it.
async fn fixture() -> (Arc<dyn ResourceStore>, Arc<dyn AppContextStore>, ContextId) {
    let resources: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
    let dig = DigRef::new("p", "ca", "v1", "dig").key();
    let mut keys = vec![dig.clone()];
    while let Some(parent) = keys.last().unwrap().parent().filter(|k| !k.is_root()) {
        keys.push(parent);
    }
    for key in keys.iter().rev() {
        resources
            .put(
                key,
                &json!({"metadata": {"name": key.name()}}),
                PutMode::Create,
            )
            .await
            .unwrap();
    }
    let (store, id) = seeded().await;
    // Point the seeded context at the DIG.
    let meta = CompositeAppMeta {
        project: "p".into(),
        composite_app: "ca".into(),
        version: "v1".into(),
        deployment_intent_group: "dig".into(),
        ..Default::default()
    };
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    store
        .put(
            &format!("{}meta/", ctx.root_key()),
            serde_json::to_vec(&meta).unwrap().into(),
        )
        .await
        .unwrap();
    (resources, store, id)
}

async fn post(router: &axum::Router, path: &str, body: serde_json::Value) -> StatusCode {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    router.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn label_controller_labels_the_named_apps() {
    let (resources, store, id) = fixture().await;
    let router: axum::Router = example::LabelIntent::routes(Arc::clone(&resources));
    let url = format!("{DIG_URL}/label-intents");
    let intent = json!({"metadata": {"name": "team"},
        "spec": {"apps": ["web"], "labels": {"team": "blue"}, "annotations": {"owner": "ops"}}});
    assert_eq!(
        post(&router, &url, intent.clone()).await,
        StatusCode::CREATED
    );
    assert_eq!(post(&router, &url, intent).await, StatusCode::CONFLICT);
    let invalid = json!({"metadata": {"name": "x"}, "spec": {"apps": ["web"]}});
    assert_eq!(post(&router, &url, invalid).await, StatusCode::BAD_REQUEST);
    let missing_dig =
        "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/nope/label-intents";
    let other = json!({"metadata": {"name": "y"}, "spec": {"apps": ["web"], "labels": {"a": "b"}}});
    // EMCO's database refuses a child of a missing parent with a 409
    // (src/orchestrator/pkg/infra/apierror/apierror.go, `db Insert parent resource not found`).
    assert_eq!(
        post(&router, missing_dig, other).await,
        StatusCode::CONFLICT
    );

    let running = serve(&store, |b| {
        b.resources(Arc::clone(&resources)).action(example::Labeler)
    })
    .await;
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)));
    let controllers = vec![registration("label", "action", running.addr, 1)];
    let dig = BTreeMap::from([("label".to_owned(), "team".to_owned())]);
    registry.invoke(&controllers, &dig, id, None).await.unwrap();
    for c in ["p+c1", "p+c2", "p+c3"] {
        assert_eq!(labels(&store, id, c).await, json!({"team": "blue"}));
    }
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    let yaml = ctx
        .resource("web", "p+c1", "web+Deployment")
        .await
        .unwrap()
        .unwrap();
    assert!(yaml.contains("owner: ops"), "{yaml}");

    // An intent the DIG names but nobody created: the instantiate stops with the reason.
    let dig = BTreeMap::from([("label".to_owned(), "missing".to_owned())]);
    let err = registry
        .invoke(&controllers, &dig, id, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert!(
        err.to_string()
            .contains("labelIntent \"missing\" not found"),
        "{err}"
    );
}
