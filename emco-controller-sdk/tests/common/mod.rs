//! Fixtures shared by the SDK's integration tests: a seeded AppContext, test controllers and a
//! server on port 0 that stops on drop.

#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use emco_core::ContextId;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_controller_sdk::{
    ActionController, ControllerContext, Event, PlacementController, Server,
};
use emco_core::model::{Controller, ControllerSpec};
use emco_core::{Error, Metadata, Result};
use emco_store::{AppContextStore, InMemoryAppContextStore};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub const DEPLOYMENT: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n";

/// A store with one context: app `web` on `p+c1`, `p+c2` (anyOf group 1) and `p+c3`, each
/// holding the `web+Deployment`.
pub async fn seeded() -> (Arc<dyn AppContextStore>, ContextId) {
    let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
    let meta = CompositeAppMeta {
        project: "p".into(),
        composite_app: "ca".into(),
        ..Default::default()
    };
    let ctx = AppContext::create(Arc::clone(&store), &meta).await.unwrap();
    let mut w = ctx.writer();
    w.add_app("web").unwrap();
    for (c, g) in [("p+c1", Some("1")), ("p+c2", Some("1")), ("p+c3", None)] {
        w.add_cluster("web", c, g).unwrap();
        w.add_resource("web", c, "web+Deployment", DEPLOYMENT)
            .unwrap();
        w.set_resource_order("web", c, &["web+Deployment"]).unwrap();
    }
    w.set_app_order(&["web"]).unwrap();
    w.flush().await.unwrap();
    (store, ctx.id())
}

/// Labels every Deployment with `<label>=<intent name>`; refuses the intent `bad`; records its
/// calls in `log`; sleeps `delay` first.
#[derive(Clone, Default)]
pub struct Labeler {
    pub label: String,
    pub log: Arc<Mutex<Vec<String>>>,
    pub delay: Duration,
}

impl Labeler {
    pub fn new(label: &str, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Self {
            label: label.to_owned(),
            log: Arc::clone(log),
            delay: Duration::ZERO,
        }
    }
}

#[async_trait]
impl ActionController for Labeler {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        tokio::time::sleep(self.delay).await;
        let intent = cx.intent_name().unwrap_or("").to_owned();
        self.log.lock().unwrap().push(format!(
            "{}:update:{intent}:{:?}",
            self.label,
            cx.update_from()
        ));
        for app in cx.apps().await? {
            for cluster in cx.clusters(&app).await? {
                for (name, mut obj) in cx.resources(&app, &cluster).await? {
                    if obj["kind"] == "Deployment" {
                        obj["metadata"]["labels"][&self.label] = Value::from(intent.clone());
                        cx.put_resource(&app, &cluster, &name, obj).await?;
                    }
                }
            }
        }
        if intent == "bad" {
            return Err(Error::invalid("intent bad is not acceptable"));
        }
        Ok(())
    }

    async fn terminate(&self, _cx: &mut ControllerContext) -> Result<()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:terminate", self.label));
        Ok(())
    }

    async fn post_event(&self, _cx: &mut ControllerContext, event: Event) -> Result<()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:event:{event:?}", self.label));
        Ok(())
    }
}

/// Removes cluster `p+c1` from every app.
#[derive(Clone, Default)]
pub struct DropC1 {
    pub log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl PlacementController for DropC1 {
    async fn filter_clusters(&self, cx: &mut ControllerContext) -> Result<()> {
        self.log.lock().unwrap().push("drop-c1:filter".to_owned());
        for app in cx.apps().await? {
            if cx.clusters(&app).await?.iter().any(|c| c == "p+c1") {
                cx.remove_cluster(&app, "p+c1").await?;
            }
        }
        Ok(())
    }
}

/// A running controller server; stops when dropped.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serves what `build` configures on a loopback port 0.
pub async fn serve(
    store: &Arc<dyn AppContextStore>,
    build: impl FnOnce(
        emco_controller_sdk::server::ServerBuilder,
    ) -> emco_controller_sdk::server::ServerBuilder,
) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let builder = build(Server::builder(Arc::clone(store)));
    tokio::spawn(async move {
        builder
            .serve_with_listener(listener, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
    });
    Running {
        addr,
        stop: Some(tx),
    }
}

/// A registration as `/controllers` holds it.
pub fn registration(name: &str, kind: &str, addr: SocketAddr, priority: i64) -> Controller {
    Controller {
        metadata: Metadata::named(name),
        spec: ControllerSpec {
            host: addr.ip().to_string(),
            port: i64::from(addr.port()),
            kind: kind.to_owned(),
            priority,
        },
    }
}

/// The labels of the Deployment of `web` on `cluster`.
pub async fn labels(store: &Arc<dyn AppContextStore>, id: ContextId, cluster: &str) -> Value {
    let ctx = AppContext::load(Arc::clone(store), id).await.unwrap();
    let yaml = ctx
        .resource("web", cluster, "web+Deployment")
        .await
        .unwrap()
        .unwrap();
    let v: Value = emco_controller_sdk::handle::parse_resource(&yaml).unwrap();
    v["metadata"]["labels"].clone()
}
