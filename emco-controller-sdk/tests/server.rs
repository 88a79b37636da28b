//! A controller served by the SDK answers EMCO's gRPC messages, including a hand-encoded request
//! (field numbers), reports refusals in the response, serves health, and behaves the same
//! in-process.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut};
use common::{DropC1, Labeler, labels, seeded, serve};
use emco_appcontext::AppContext;
use emco_controller_sdk::{ActionRunner, PlacementRunner, Stores};
use emco_proto::contextupdate_client::ContextupdateClient;
use emco_proto::placement_controller_client::PlacementControllerClient;
use emco_proto::{
    ContextUpdateRequest, EventType, PostEventRequest, ResourceRequest, TerminateRequest,
};
use serde_json::json;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Request, Status};

async fn channel(addr: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn served_action_controller_answers_emco_messages() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let running = serve(&store, |b| {
        b.name("labeler").action(Labeler::new("team", &log))
    })
    .await;
    let mut client = ContextupdateClient::new(channel(running.addr).await);

    let resp = client
        .update_app_context(ContextUpdateRequest {
            app_context: id.to_string(),
            intent_name: "blue".into(),
            update_from_app_context: "42".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        resp.app_context_updated,
        "{}",
        resp.app_context_update_message
    );
    assert_eq!(resp.app_context_update_message, "");
    for c in ["p+c1", "p+c2", "p+c3"] {
        assert_eq!(labels(&store, id, c).await, json!({"team": "blue"}));
    }

    let t = client
        .terminate_app_context(TerminateRequest {
            app_context: id.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(t.app_context_terminated);
    let e = client
        .post_event(PostEventRequest {
            app_context: id.to_string(),
            event_type: EventType::Update.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(e.success, "{}", e.post_event_message);
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "team:update:blue:Some(42)".to_owned(),
            "team:terminate".to_owned(),
            "team:event:Update".to_owned()
        ]
    );
}

#[tokio::test]
async fn refusal_comes_back_in_the_response_and_writes_nothing() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let running = serve(&store, |b| b.action(Labeler::new("team", &log))).await;
    let mut client = ContextupdateClient::new(channel(running.addr).await);

    let resp = client
        .update_app_context(ContextUpdateRequest {
            app_context: id.to_string(),
            intent_name: "bad".into(),
            update_from_app_context: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!resp.app_context_updated);
    assert_eq!(
        resp.app_context_update_message,
        "intent bad is not acceptable"
    );
    // The controller staged labels before refusing; none may reach the store.
    assert_eq!(labels(&store, id, "p+c1").await, serde_json::Value::Null);

    for bad_id in ["not-a-number", "", "777"] {
        let resp = client
            .update_app_context(ContextUpdateRequest {
                app_context: bad_id.into(),
                intent_name: "x".into(),
                update_from_app_context: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!resp.app_context_updated, "{bad_id}");
        assert!(!resp.app_context_update_message.is_empty(), "{bad_id}");
    }
    let e = client
        .post_event(PostEventRequest {
            app_context: id.to_string(),
            event_type: 9,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!e.success);
    assert_eq!(e.post_event_message, "unknown event type 9");
}

/// Sends and receives raw protobuf bytes, so the test controls every byte on the wire.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

#[derive(Debug, Clone, Copy, Default)]
struct RawCoder;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCoder;
    type Decoder = RawCoder;

    fn encoder(&mut self) -> RawCoder {
        RawCoder
    }

    fn decoder(&mut self) -> RawCoder {
        RawCoder
    }
}

impl Encoder for RawCoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCoder {
    type Item = Vec<u8>;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

/// A length-delimited protobuf field (wire type 2).
fn string_field(number: u8, value: &str) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2, u8::try_from(value.len()).unwrap()];
    out.extend_from_slice(value.as_bytes());
    out
}

async fn raw_call(addr: std::net::SocketAddr, path: &'static str, body: Vec<u8>) -> Vec<u8> {
    let mut grpc = tonic::client::Grpc::new(channel(addr).await);
    grpc.ready().await.unwrap();
    grpc.unary(
        Request::new(body),
        http::uri::PathAndQuery::from_static(path),
        RawCodec,
    )
    .await
    .unwrap()
    .into_inner()
}

#[tokio::test]
async fn hand_encoded_requests_use_emco_paths_and_field_numbers() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let running = serve(&store, |b| {
        b.action(Labeler::new("team", &log))
            .placement(DropC1::default())
    })
    .await;

    // ContextUpdateRequest{1 app_context, 2 intent_name, 3 update_from_appContext}
    let mut body = string_field(1, &id.to_string());
    body.extend(string_field(2, "green"));
    body.extend(string_field(3, "7"));
    let resp = raw_call(running.addr, "/contextupdate/UpdateAppContext", body).await;
    // ContextUpdateResponse{1 app_context_updated = true}; the empty message is not sent.
    assert_eq!(resp, vec![0x08, 0x01]);
    assert_eq!(
        *log.lock().unwrap(),
        vec!["team:update:green:Some(7)".to_owned()]
    );

    // A refusal: field 2 carries the message.
    let mut body = string_field(1, &id.to_string());
    body.extend(string_field(2, "bad"));
    let resp = raw_call(running.addr, "/contextupdate/UpdateAppContext", body).await;
    let mut expected = Vec::new();
    expected.extend(string_field(2, "intent bad is not acceptable"));
    assert_eq!(resp, expected);

    // ResourceRequest{1 appContext} -> ResourceResponse{1 appContext, 2 status}
    let resp = raw_call(
        running.addr,
        "/PlacementController/FilterClusters",
        string_field(1, &id.to_string()),
    )
    .await;
    let mut expected = string_field(1, &id.to_string());
    expected.extend([0x10, 0x01]);
    assert_eq!(resp, expected);
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    assert_eq!(ctx.clusters("web").await.unwrap(), vec!["p+c2", "p+c3"]);
}

#[tokio::test]
async fn served_placement_controller_filters_clusters() {
    let (store, id) = seeded().await;
    let running = serve(&store, |b| b.placement(DropC1::default())).await;
    let mut client = PlacementControllerClient::new(channel(running.addr).await);
    let resp = client
        .filter_clusters(ResourceRequest {
            app_context: id.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(resp.status, "{}", resp.message);
    assert_eq!(resp.app_context, id.to_string());
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    assert_eq!(ctx.clusters("web").await.unwrap(), vec!["p+c2", "p+c3"]);
    // The anyOf group keeps its surviving member.
    let groups = ctx.cluster_groups("web").await.unwrap();
    assert_eq!(groups["1"], vec!["p+c2"]);
    // The placement server does not serve contextupdate.
    let mut action = ContextupdateClient::new(channel(running.addr).await);
    let err = action
        .update_app_context(ContextUpdateRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
}

#[tokio::test]
async fn health_reports_the_served_services() {
    let (store, _) = seeded().await;
    let running = serve(&store, |b| b.placement(DropC1::default())).await;
    let mut health =
        tonic_health::pb::health_client::HealthClient::new(channel(running.addr).await);
    let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    let resp = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "PlacementController".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, serving);
    let missing = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "contextupdate".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn the_same_controller_runs_in_process() {
    let (store, id) = seeded().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let stores = Stores::new(Arc::clone(&store));
    let runner = ActionRunner::new(Arc::new(Labeler::new("team", &log)), stores.clone());
    runner.update(&id.to_string(), "red", "").await.unwrap();
    assert_eq!(labels(&store, id, "p+c3").await, json!({"team": "red"}));
    let err = runner.update(&id.to_string(), "bad", "").await.unwrap_err();
    assert_eq!(err.to_string(), "intent bad is not acceptable");
    assert_eq!(labels(&store, id, "p+c3").await, json!({"team": "red"}));
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "team:update:red:None".to_owned(),
            "team:update:bad:None".to_owned()
        ]
    );

    let placement = PlacementRunner::new(Arc::new(DropC1::default()), stores);
    placement.filter_clusters(&id.to_string()).await.unwrap();
    let ctx = AppContext::load(Arc::clone(&store), id).await.unwrap();
    assert_eq!(ctx.clusters("web").await.unwrap(), vec!["p+c2", "p+c3"]);
}

#[tokio::test]
async fn a_server_without_a_controller_is_refused() {
    let (store, _) = seeded().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let err = emco_controller_sdk::Server::builder(store)
        .serve_with_listener(listener, async {})
        .await
        .unwrap_err();
    assert_eq!(err.kind(), emco_core::ErrorKind::FailedPrecondition);
}
