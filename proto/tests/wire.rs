//! Wire facts of EMCO's services: service names (the HTTP/2 path prefix) and field numbers. A
//! change to a .proto that breaks compatibility with EMCO's Go components fails here.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns

use emco_proto as pb;
use prost::Message;
use tonic::server::NamedService;

/// The first byte of a length-delimited field is `(number << 3) | 2`.
fn tag(field: u32) -> u8 {
    u8::try_from((field << 3) | 2).unwrap()
}

/// Encodes `msg` and returns the field numbers of its top-level fields in order.
fn fields<M: Message>(msg: &M) -> Vec<u32> {
    let buf = msg.encode_to_vec();
    let mut out = Vec::new();
    let mut rest = &buf[..];
    while !rest.is_empty() {
        let key = prost::encoding::decode_varint(&mut rest).unwrap();
        let (number, wire) = (u32::try_from(key >> 3).unwrap(), key & 7);
        out.push(number);
        match wire {
            0 => {
                prost::encoding::decode_varint(&mut rest).unwrap();
            }
            2 => {
                let len =
                    usize::try_from(prost::encoding::decode_varint(&mut rest).unwrap()).unwrap();
                rest = &rest[len..];
            }
            other => panic!("unexpected wire type {other}"),
        }
    }
    out
}

struct Nop;

#[test]
fn service_names_have_no_package() {
    assert_eq!(
        <pb::installapp_server::InstallappServer<Nop> as NamedService>::NAME,
        "installapp"
    );
    assert_eq!(
        <pb::updateapp_server::UpdateappServer<Nop> as NamedService>::NAME,
        "updateapp"
    );
    assert_eq!(
        <pb::ready_notify_server::ReadyNotifyServer<Nop> as NamedService>::NAME,
        "readyNotify"
    );
    assert_eq!(
        <pb::contextupdate_server::ContextupdateServer<Nop> as NamedService>::NAME,
        "contextupdate"
    );
    assert_eq!(
        <pb::placement_controller_server::PlacementControllerServer<Nop> as NamedService>::NAME,
        "PlacementController"
    );
    assert_eq!(
        <pb::status_notify_server::StatusNotifyServer<Nop> as NamedService>::NAME,
        "StatusNotify"
    );
    assert_eq!(
        <pb::clm_controller_event_channel_server::ClmControllerEventChannelServer<Nop> as NamedService>::NAME,
        "ClmControllerEventChannel"
    );
}

#[test]
fn rsync_field_numbers() {
    let req = pb::InstallAppRequest {
        app_context: "42".into(),
    };
    assert_eq!(req.encode_to_vec(), vec![tag(1), 2, b'4', b'2']);
    let resp = pb::InstallAppResponse {
        app_context_installed: true,
        app_context_install_message: "m".into(),
    };
    assert_eq!(fields(&resp), vec![1, 2]);
    let up = pb::UpdateAppRequest {
        update_from_app_context: "1".into(),
        update_to_app_context: "2".into(),
    };
    assert_eq!(fields(&up), vec![1, 2]);
    let rb = pb::RollbackAppResponse {
        app_context_rolledback: true,
        app_context_rollback_message: "m".into(),
    };
    assert_eq!(fields(&rb), vec![1, 2]);
    let n = pb::Notification {
        client_name: "a".into(),
        server_name: "b".into(),
        app_context: "c".into(),
        app: "d".into(),
        cluster: "e".into(),
    };
    assert_eq!(fields(&n), vec![1, 2, 3, 4, 5]);
}

#[test]
fn controller_field_numbers() {
    let req = pb::ContextUpdateRequest {
        app_context: "1".into(),
        intent_name: "i".into(),
        update_from_app_context: "0".into(),
    };
    assert_eq!(fields(&req), vec![1, 2, 3]);
    let ev = pb::PostEventRequest {
        app_context: "1".into(),
        event_type: pb::EventType::Update.into(),
    };
    assert_eq!(ev.encode_to_vec(), vec![tag(1), 1, b'1', 2 << 3, 2]);
    let resp = pb::ResourceResponse {
        app_context: "1".into(),
        status: true,
        message: "m".into(),
    };
    assert_eq!(fields(&resp), vec![1, 2, 3]);
}

#[test]
fn status_notify_field_numbers() {
    let reg = pb::StatusRegistration {
        client_id: "c".into(),
        key: Some(pb::status_registration::Key::LcKey(pb::LcKey {
            project: "p".into(),
            logical_cloud: "l".into(),
        })),
        status_type: pb::StatusValue::Deployed.into(),
        apps: vec!["a".into()],
        clusters: vec!["x".into()],
        resources: vec!["r".into()],
        output: pb::StatusOutput::All.into(),
    };
    assert_eq!(fields(&reg), vec![1, 3, 5, 6, 7, 8, 9]);
    assert_eq!(pb::StatusValue::Deployed as i32, 4);
    assert_eq!(pb::StatusValue::NotReady as i32, 1);
    let detail = pb::StatusDetail {
        status_detail: Some(pb::status_detail::StatusDetail::Cluster(
            pb::ClusterStatus::default(),
        )),
    };
    assert_eq!(fields(&detail), vec![2]);
    // Ours beside EMCO's: the rollout is field 3, which EMCO's clients skip.
    let n = pb::StatusNotification {
        status_value: pb::StatusValue::Ready.into(),
        details: Vec::new(),
        rollout: Some(pb::RolloutStatus {
            state: "Progressing".into(),
            ..pb::RolloutStatus::default()
        }),
    };
    assert_eq!(fields(&n), vec![1, 3]);
}
