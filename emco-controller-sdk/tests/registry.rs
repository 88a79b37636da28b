//! The orchestrator's client: placement then action controllers in ascending priority, over
//! gRPC or in-process, stopping at the first failure with the controller named.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{DropC1, Labeler, labels, registration, seeded, serve};
use emco_appcontext::AppContext;
use emco_controller_sdk::client::ControllerRegistry;
use emco_controller_sdk::{Event, Stores};
use emco_core::{ContextId, ErrorKind};
use serde_json::json;

fn intents(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn placement_then_actions_in_priority_order_over_grpc() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let a = serve(&store, |b| b.action(Labeler::new("a", &log))).await;
    let b = serve(&store, |b| b.action(Labeler::new("b", &log))).await;
    let c = serve(&store, |b| b.action(Labeler::new("c", &log))).await;
    let p = serve(&store, |b| {
        b.placement(DropC1 {
            log: Arc::clone(&log),
        })
    })
    .await;
    let controllers = vec![
        registration("ctl-a", "action", a.addr, 30),
        registration("ctl-b", "action", b.addr, 10),
        // Not named in the DIG's intents: not called.
        registration("ctl-c", "action", c.addr, 1),
        registration("plc", "placement", p.addr, 50),
        // rsync is registered untyped and is never called as a controller.
        registration("rsync", "", p.addr, 0),
    ];
    let dig = intents(&[
        ("genericPlacementIntent", "gpi"),
        ("ctl-a", "intent-a"),
        ("ctl-b", "intent-b"),
        ("plc", "p-intent"),
        ("rsync", "x"),
    ]);
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)));
    registry
        .invoke(&controllers, &dig, id, Some(ContextId::new(5)))
        .await
        .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "drop-c1:filter".to_owned(),
            "b:update:intent-b:Some(5)".to_owned(),
            "a:update:intent-a:Some(5)".to_owned(),
        ]
    );
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    assert_eq!(ctx.clusters("web").await.unwrap(), vec!["p+c2", "p+c3"]);
    assert_eq!(
        labels(&store, id, "p+c2").await,
        json!({"a": "intent-a", "b": "intent-b"})
    );

    // The same channels serve the later calls.
    log.lock().unwrap().clear();
    registry.terminate(&controllers, &dig, id).await.unwrap();
    registry
        .post_event(&controllers, &dig, id, Event::Terminate)
        .await
        .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "b:terminate".to_owned(),
            "a:terminate".to_owned(),
            "b:event:Terminate".to_owned(),
            "a:event:Terminate".to_owned(),
        ]
    );
}

#[tokio::test]
async fn a_refusing_controller_stops_the_chain_and_is_named() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let a = serve(&store, |b| b.action(Labeler::new("a", &log))).await;
    let b = serve(&store, |b| b.action(Labeler::new("b", &log))).await;
    let controllers = vec![
        registration("first", "action", a.addr, 1),
        registration("second", "action", b.addr, 2),
    ];
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)));
    let err = registry
        .invoke(
            &controllers,
            &intents(&[("first", "bad"), ("second", "ok")]),
            id,
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::FailedPrecondition);
    assert_eq!(
        err.to_string(),
        format!(
            "action controller first ({}) failed: intent bad is not acceptable",
            a.addr
        )
    );
    assert_eq!(*log.lock().unwrap(), vec!["a:update:bad:None".to_owned()]);
}

#[tokio::test]
async fn an_unreachable_controller_is_named() {
    let (store, id) = seeded().await;
    // A port nothing listens on any more.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let controllers = vec![registration("gone", "placement", addr, 1)];
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)));
    let err = registry
        .invoke(&controllers, &intents(&[("gone", "i")]), id, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "placement controller gone ({addr}) is unreachable"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_slow_controller_times_out() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut slow = Labeler::new("slow", &log);
    slow.delay = Duration::from_secs(30);
    let s = serve(&store, |b| b.action(slow)).await;
    let controllers = vec![registration("slow", "action", s.addr, 1)];
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)))
        .with_timeout(Duration::from_millis(300));
    let err = registry
        .invoke(&controllers, &intents(&[("slow", "i")]), id, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    assert_eq!(
        err.to_string(),
        format!("action controller slow ({}) timed out after 300ms", s.addr)
    );
}

#[tokio::test]
async fn in_process_controllers_are_called_by_registered_name() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    // The registration's address is never dialled: the name is registered in-process.
    let nowhere: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    let controllers = vec![
        registration("gac", "action", nowhere, 2),
        registration("hpa", "placement", nowhere, 1),
        registration("other", "action", nowhere, 1),
    ];
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)))
        .with_action("gac", Arc::new(Labeler::new("gac", &log)))
        .with_action("other", Arc::new(Labeler::new("other", &log)))
        .with_placement(
            "hpa",
            Arc::new(DropC1 {
                log: Arc::clone(&log),
            }),
        );
    let dig = intents(&[("gac", "g"), ("hpa", "h"), ("other", "o")]);
    registry.invoke(&controllers, &dig, id, None).await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "drop-c1:filter".to_owned(),
            "other:update:o:None".to_owned(),
            "gac:update:g:None".to_owned(),
        ]
    );
    assert_eq!(
        labels(&store, id, "p+c3").await,
        json!({"gac": "g", "other": "o"})
    );

    let err = registry
        .invoke(&controllers, &intents(&[("gac", "bad")]), id, None)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "action controller gac (in-process) failed: intent bad is not acceptable"
    );

    // A registration whose type does not match the in-process controller is refused.
    let wrong = vec![registration("gac", "placement", nowhere, 1)];
    let err = registry
        .invoke(&wrong, &intents(&[("gac", "g")]), id, None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("registered in-process as an action controller")
    );
}

/// EMCO's orchestrator (src/orchestrator/pkg/module/instantiation_scheduler_helper.go,
/// callTerminateScheduler) takes a controller answering `TerminateAppContext not implemented` as
/// done and tells the next one; other failures stop the chain.
#[tokio::test]
async fn terminate_goes_on_past_a_controller_that_does_not_serve_it() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    // A placement-only server registered as an action controller: contextupdate is Unimplemented.
    let old = serve(&store, |b| b.placement(DropC1::default())).await;
    let b = serve(&store, |b| b.action(Labeler::new("b", &log))).await;
    let controllers = vec![
        registration("old", "action", old.addr, 1),
        registration("second", "action", b.addr, 2),
    ];
    let dig = intents(&[("old", "i"), ("second", "j")]);
    let registry = ControllerRegistry::new(Stores::new(Arc::clone(&store)));
    registry.terminate(&controllers, &dig, id).await.unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["b:terminate".to_owned()]);
    // An update is still refused by it: only terminate may be missing.
    let err = registry
        .act(&controllers, &dig, id, None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("does not serve this service"),
        "{err}"
    );
}
