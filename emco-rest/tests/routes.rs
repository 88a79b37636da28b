//! The generic routes as a controller uses them: its own intent type under a deployment intent
//! group, with a hook and a query filter.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use emco_core::{Error, Metadata, Object, Result};
use emco_rest::{Hook, KeyPattern, Routes};
use emco_store::{InMemoryResourceStore, ResourceKey, ResourceStore};
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tower::ServiceExt;

#[derive(Debug, Clone, Serialize, Deserialize, Object)]
#[object(metadata, check = ScaleIntent::check)]
struct ScaleIntent {
    metadata: Metadata,
    #[serde(default)]
    spec: ScaleSpec,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct ScaleSpec {
    app: String,
    replicas: u32,
}

impl ScaleIntent {
    fn check(&self) -> Result<()> {
        if self.spec.replicas == 0 {
            return Err(Error::invalid("must be at least 1").with_field("spec.replicas"));
        }
        Ok(())
    }
}

/// Refuses the app named "forbidden", as a controller's own rule would.
struct NoForbidden;

#[async_trait]
impl Hook<ScaleIntent> for NoForbidden {
    async fn before_write(
        &self,
        _: &dyn ResourceStore,
        _: &ResourceKey,
        v: &ScaleIntent,
    ) -> Result<()> {
        if v.spec.app == "forbidden" {
            return Err(Error::failed_precondition("that app cannot be scaled"));
        }
        Ok(())
    }
}

const COLLECTION: &str = "/v2/projects/{project}/composite-apps/{compositeApp}/{compositeAppVersion}/deployment-intent-groups/{deploymentIntentGroup}/scale-intents";
const BASE: &str = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/d/scale-intents";

async fn call(
    app: &axum::Router,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Vec<u8>) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.map(|b| b.to_string()).unwrap_or_default()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    (
        status,
        resp.into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
}

fn intent(name: &str, app: &str, replicas: u32) -> Value {
    json!({"metadata": {"name": name}, "spec": {"app": app, "replicas": replicas}})
}

#[tokio::test]
async fn a_controller_intent_gets_emco_routes() {
    let store: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
    let app = Routes::<ScaleIntent>::new(COLLECTION, "scaleIntent")
        .hook(NoForbidden)
        .filter("app", "spec.app")
        .router(Arc::clone(&store));

    // Missing parent: EMCO's database answers 409 `Cannot perform requested operation. Parent
    // resource not found` (src/orchestrator/pkg/infra/apierror/apierror.go).
    let (status, body) = call(&app, "POST", BASE, Some(intent("s1", "web", 2))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        b"Cannot perform requested operation. Parent resource not found\n"
    );
    assert_eq!(call(&app, "GET", BASE, None).await.0, StatusCode::NOT_FOUND);

    // Create the parents the way the orchestrator keys them.
    let params: HashMap<String, String> = [
        ("project", "p"),
        ("compositeApp", "ca"),
        ("compositeAppVersion", "v1"),
        ("deploymentIntentGroup", "d"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let dig = KeyPattern::parse(COLLECTION).key(&params).unwrap();
    let mut key = ResourceKey::root();
    for (kind, name) in dig.segments() {
        key = key.child(kind.as_str(), name.as_str());
        store.create(&key, &json!({})).await.unwrap();
    }

    let (status, body) = call(&app, "POST", BASE, Some(intent("s1", "web", 2))).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        serde_json::from_slice::<Value>(&body).unwrap()["spec"]["replicas"],
        2
    );
    assert_eq!(
        call(&app, "POST", BASE, Some(intent("s1", "web", 2)))
            .await
            .0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        call(&app, "POST", BASE, Some(intent("s2", "web", 0)))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        call(
            &app,
            "POST",
            BASE,
            Some(json!({"metadata": {"name": "s2"}, "spec": {"replicas": "x"}}))
        )
        .await
        .0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    let (status, body) = call(&app, "POST", BASE, Some(intent("s2", "forbidden", 1))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(body, b"that app cannot be scaled\n");

    // PUT: name mismatch 400, create 201, replace 200.
    let item = format!("{BASE}/s2");
    assert_eq!(
        call(&app, "PUT", &item, Some(intent("s3", "db", 1)))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        call(&app, "PUT", &item, Some(intent("s2", "db", 1)))
            .await
            .0,
        StatusCode::CREATED
    );
    assert_eq!(
        call(&app, "PUT", &item, Some(intent("s2", "db", 3)))
            .await
            .0,
        StatusCode::OK
    );

    // List, filtered by the declared query parameter.
    let (_, body) = call(&app, "GET", BASE, None).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&body)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (_, body) = call(&app, "GET", &format!("{BASE}?app=db"), None).await;
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["spec"]["replicas"], 3);

    // GET and DELETE; a child blocks the delete.
    assert_eq!(
        call(&app, "GET", &format!("{BASE}/nope"), None).await.0,
        StatusCode::NOT_FOUND
    );
    store
        .create(&dig.child("scaleIntent", "s2").child("x", "y"), &json!({}))
        .await
        .unwrap();
    assert_eq!(
        call(&app, "DELETE", &item, None).await.0,
        StatusCode::CONFLICT
    );
    store
        .delete(&dig.child("scaleIntent", "s2").child("x", "y"))
        .await
        .unwrap();
    assert_eq!(
        call(&app, "DELETE", &item, None).await.0,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        call(&app, "DELETE", &item, None).await.0,
        StatusCode::NOT_FOUND
    );
}
