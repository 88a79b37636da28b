//! kube-rs against kubesim: CRUD, selectors, conflicts, server-side apply, watch, CRDs,
//! readiness, pagination, deletion.

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Sim;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)], data: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>()},
        "data": {"k": data},
    }))
    .unwrap()
}

fn code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn crud_selectors_and_conflicts() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = sim.client("c1").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let a = api
        .create(&PostParams::default(), &cm("a", &[("app", "web")], "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("b", &[("app", "db")], "2"))
        .await
        .unwrap();
    let meta = &a.metadata;
    assert!(
        meta.uid.is_some() && meta.creation_timestamp.is_some() && meta.resource_version.is_some()
    );
    assert!(meta.managed_fields.as_ref().is_some_and(|m| !m.is_empty()));
    // Duplicate create: 409 AlreadyExists.
    let err = api
        .create(&PostParams::default(), &cm("a", &[], "x"))
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);
    // Selectors.
    let web = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    let not_web = api
        .list(&ListParams::default().labels("app notin (web)"))
        .await
        .unwrap();
    assert_eq!(not_web.items[0].metadata.name.as_deref(), Some("b"));
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let all: Api<ConfigMap> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default().fields("metadata.namespace=default"))
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    // Update with the current version succeeds; the stale one is a 409 Conflict.
    let mut fresh = a.clone();
    fresh.data = Some(BTreeMap::from([("k".to_owned(), "updated".to_owned())]));
    let updated = api
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        a.metadata.resource_version
    );
    let err = api
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert!(
                s.message.contains("the object has been modified"),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
    // Merge and JSON patches.
    let p = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"m": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.data.unwrap()["m"], "1");
    let p = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "remove", "path": "/data/m"}])).unwrap(),
            ),
        )
        .await
        .unwrap();
    assert!(!p.data.unwrap().contains_key("m"));
    // Namespaced objects need their namespace.
    let missing: Api<ConfigMap> = Api::namespaced(client.clone(), "nope");
    let err = missing
        .create(&PostParams::default(), &cm("x", &[], "1"))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!(
            (s.code, s.message.as_str()),
            (404, "namespaces \"nope\" not found")
        ),
        other => panic!("{other:?}"),
    }
    // Dry run stores nothing.
    api.create(
        &PostParams {
            dry_run: true,
            ..PostParams::default()
        },
        &cm("dry", &[], "1"),
    )
    .await
    .unwrap();
    assert_eq!(code(api.get("dry").await.unwrap_err()), 404);
    // Delete, then 404.
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(api.get("a").await.unwrap_err()), 404);
    assert_eq!(
        code(api.delete("a", &DeleteParams::default()).await.unwrap_err()),
        404
    );
    // Invalid names are rejected like the real server does.
    assert_eq!(
        code(
            api.create(&PostParams::default(), &cm("Bad_Name", &[], "1"))
                .await
                .unwrap_err()
        ),
        422
    );
}

#[tokio::test]
async fn server_side_apply_conflict_and_force() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client("c1").await);
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "a"}});
    api.patch("cfg", &PatchParams::apply("alice"), &Patch::Apply(&applied))
        .await
        .unwrap();
    let theirs = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "b"}});
    let err = api
        .patch("cfg", &PatchParams::apply("bob"), &Patch::Apply(&theirs))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
            assert_eq!(
                s.message,
                "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.k"
            );
        }
        other => panic!("{other:?}"),
    }
    let forced = api
        .patch(
            "cfg",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&theirs),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.unwrap()["k"], "b");
    let managers: Vec<String> = forced
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, vec!["bob".to_owned()]);
    // Alice stops applying a field she alone owned: it goes away.
    let alice2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "labels": {"x": "1"}}});
    api.patch("cfg", &PatchParams::apply("alice"), &Patch::Apply(&alice2))
        .await
        .unwrap();
    let alice3 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}});
    let now = api
        .patch("cfg", &PatchParams::apply("alice"), &Patch::Apply(&alice3))
        .await
        .unwrap();
    assert!(now.metadata.labels.unwrap_or_default().is_empty());
    assert_eq!(now.data.unwrap()["k"], "b");
}

#[tokio::test]
async fn watch_sees_changes_and_old_versions_are_gone() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = sim.client("c1").await;
    let api: Api<ConfigMap> = Api::default_namespaced(client);
    let start = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default().labels("w=1")
            },
            &start,
        )
        .await
        .unwrap()
        .boxed();
    api.create(&PostParams::default(), &cm("ignored", &[], "1"))
        .await
        .unwrap();
    api.create(&PostParams::default(), &cm("seen", &[("w", "1")], "1"))
        .await
        .unwrap();
    // Leaving the selection reads as DELETED, entering it as ADDED.
    api.patch(
        "ignored",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"w": "1"}}})),
    )
    .await
    .unwrap();
    api.patch(
        "ignored",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"w": null}}})),
    )
    .await
    .unwrap();
    api.delete("seen", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    while kinds.iter().filter(|k| *k != "bookmark").count() < 4 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => kinds.push(format!("added {}", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => kinds.push(format!("deleted {}", o.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => kinds.push("bookmark".to_owned()),
            other => panic!("{other:?}"),
        }
    }
    kinds.retain(|k| k != "bookmark");
    assert_eq!(
        kinds,
        [
            "added seen",
            "added ignored",
            "deleted ignored",
            "deleted seen"
        ]
    );
    // Bookmarks come when asked for.
    let mut bookmarked = api
        .watch(
            &WatchParams {
                bookmarks: true,
                ..WatchParams::default()
            },
            &start,
        )
        .await
        .unwrap()
        .boxed();
    let mut got_bookmark = false;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), bookmarked.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        if let WatchEvent::Bookmark(b) = ev {
            assert!(!b.metadata.resource_version.is_empty());
            got_bookmark = true;
            break;
        }
    }
    assert!(got_bookmark);
    // Fill the event log past its capacity: the first version is no longer watchable.
    for i in 0..600 {
        api.patch(
            "ignored",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let err = api.watch(&WatchParams::default(), &start).await.err();
    let gone = match err {
        Some(e) => code(e) == 410,
        // Some client versions turn the answer into an ERROR event of the stream.
        None => false,
    };
    assert!(
        gone,
        "a watch from a compacted version must answer 410 Gone"
    );
    // kube-runtime's watcher copes (it re-lists).
    let seen = watcher(api.clone(), watcher::Config::default())
        .applied_objects()
        .take(1)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    assert_eq!(seen[0].metadata.name.as_deref(), Some("ignored"));
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client("c1").await);
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("p{i}"), &[], "1"))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(3);
    loop {
        let page = api.list(&lp).await.unwrap();
        assert!(page.items.len() <= 3);
        names.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(names, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());

    // Later pages show the snapshot of the first: changes in between do not appear.
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    api.delete("p4", &DeleteParams::default()).await.unwrap();
    api.patch(
        "p5",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .unwrap();
    api.create(&PostParams::default(), &cm("p9", &[], "1"))
        .await
        .unwrap();
    let rest = api
        .list(&ListParams::default().continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        rest.metadata.resource_version,
        first.metadata.resource_version
    );
    let rest_names: Vec<String> = rest
        .items
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    assert_eq!(rest_names, ["p2", "p3", "p4", "p5", "p6"]);
    assert_eq!(rest.items[3].data.as_ref().unwrap()["k"], "1");
    // A snapshot older than the event log answers 410 Expired.
    for i in 0..600 {
        api.patch(
            "p6",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let err = api
        .list(&ListParams::default().continue_token(&token))
        .await
        .unwrap_err();
    assert_eq!(code(err), 410);
}

#[tokio::test]
async fn workloads_become_ready_after_the_delay() {
    let sim = Sim::start(1, Duration::from_millis(300)).await;
    let api: Api<Deployment> = Api::default_namespaced(sim.client("c1").await);
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &d).await.unwrap();
    assert_eq!(
        created.status.as_ref().and_then(|s| s.available_replicas),
        None
    );
    let ready = tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(api.clone(), "web", conditions::is_deployment_completed()),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    assert_eq!(ready.status.as_ref().unwrap().available_replicas, Some(2));
    // Status is only written through the status subresource.
    let mut with_status = ready.clone();
    with_status.status.as_mut().unwrap().replicas = Some(99);
    with_status.metadata.managed_fields = None;
    let after = api
        .replace("web", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after.status.unwrap().replicas, Some(2));
    assert_eq!(after.metadata.generation, Some(1));
}

#[tokio::test]
async fn finalizers_and_owner_references() {
    let sim = Sim::start(1, Duration::from_millis(50)).await;
    let client = sim.client("c1").await;
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let owner = api
        .create(&PostParams::default(), &cm("owner", &[], "1"))
        .await
        .unwrap();
    let mut child = cm("child", &[], "1");
    child.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.clone().unwrap(),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &child).await.unwrap();
    let mut held = cm("held", &[], "1");
    held.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    // Background propagation removes the dependent.
    api.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    assert_eq!(code(api.get("child").await.unwrap_err()), 404);
    // A finalizer keeps the object, marked for deletion, until it is removed.
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let marked = api.get("held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(code(api.get("held").await.unwrap_err()), 404);
    // Namespaces terminate, then disappear with their content.
    let ns: Api<Namespace> = Api::all(client.clone());
    let tmp = ns
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "tmp"}})).unwrap(),
        )
        .await
        .unwrap();
    let uid = tmp.metadata.uid.unwrap();
    let in_tmp: Api<ConfigMap> = Api::namespaced(client.clone(), "tmp");
    in_tmp
        .create(&PostParams::default(), &cm("x", &[], "1"))
        .await
        .unwrap();
    ns.delete("tmp", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        ns.get("tmp")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Terminating")
    );
    assert_eq!(
        code(
            in_tmp
                .create(&PostParams::default(), &cm("y", &[], "1"))
                .await
                .unwrap_err()
        ),
        403
    );
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(ns.clone(), "tmp", conditions::is_deleted(&uid)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(code(ns.get("tmp").await.unwrap_err()), 404);
}

#[tokio::test]
async fn crd_serves_its_resources_until_deleted() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = sim.client("c1").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let est = tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(
            crds.clone(),
            "widgets.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(est.is_some());
    // Discovery lists the new type.
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let (ar, caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget is discovered");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
    let w: DynamicObject =
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1"}, "spec": {"size": 3}}))
        .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let applied = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 1}});
    widgets
        .patch("w2", &PatchParams::apply("me"), &Patch::Apply(&applied))
        .await
        .unwrap();
    assert_eq!(
        widgets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let got = widgets.get("w1").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 3);
    assert_eq!(got.metadata.generation, Some(1));
    // Deleting the CRD stops serving the type.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let gone: Api<DynamicObject> = Api::namespaced_with(
        client,
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    assert_eq!(
        code(gone.list(&ListParams::default()).await.unwrap_err()),
        404
    );
}

#[tokio::test]
async fn approved_csrs_get_a_certificate_from_the_cluster_ca() {
    use base64::Engine;
    let sim = Sim::start(2, Duration::ZERO).await;
    let api: Api<CertificateSigningRequest> = Api::all(sim.client("c1").await);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "alice"},
        "spec": {"request": b64(&pem), "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &csr).await.unwrap();
    assert!(
        api.get("alice")
            .await
            .unwrap()
            .status
            .and_then(|s| s.certificate)
            .is_none()
    );
    let approval = json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]}});
    api.patch_approval("alice", &PatchParams::default(), &Patch::Merge(&approval))
        .await
        .unwrap();
    let status = api.get("alice").await.unwrap().status.unwrap();
    let cert = status
        .certificate
        .clone()
        .unwrap_or_else(|| panic!("no certificate: {status:?}"));
    let cert = String::from_utf8(cert.0).unwrap();
    assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
    // The certificate authenticates as its CN: swap the admin token for it.
    let admin = sim.fleet.kubeconfig("c1").unwrap();
    let token_line = admin.lines().find(|l| l.contains("token:")).unwrap();
    let alice = admin.replace(
        token_line,
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}",
            b64(&cert),
            b64(&key.serialize_pem())
        ),
    );
    let client = common::client_for(&alice, None).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Authenticated (403, not 401), and allowed what a binding grants.
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()),
        403
    );
    let admin_client = sim.client("c1").await;
    let roles: Api<DynamicObject> = Api::namespaced_with(
        admin_client.clone(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
        )),
    );
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]});
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(role).unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<DynamicObject> = Api::namespaced_with(
        admin_client,
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
        )),
    );
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-reads"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]});
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    let review = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .body(b"{}".to_vec())
        .unwrap();
    let who: serde_json::Value = client.request(review).await.unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    // Another cluster's CA did not sign it: that cluster refuses the handshake.
    let c2 = sim.fleet.kubeconfig("c2").unwrap();
    let c2_line = c2.lines().find(|l| l.contains("token:")).unwrap();
    let stranger = c2.replace(
        c2_line,
        &format!(
            "    client-certificate-data: {}\n    client-key-data: {}",
            b64(&cert),
            b64(&key.serialize_pem())
        ),
    );
    let refused: Api<ConfigMap> =
        Api::namespaced(common::client_for(&stranger, None).await, "default");
    assert!(!matches!(
        refused.list(&ListParams::default()).await,
        Ok(_) | Err(kube::Error::Api(_))
    ));
    // A garbage request is marked Failed instead of signed.
    let bad: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": "bad"},
        "spec": {"request": b64("not a csr"), "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]},
    }))
    .unwrap();
    api.create(&PostParams::default(), &bad).await.unwrap();
    let st = api
        .patch_approval("bad", &PatchParams::default(), &Patch::Merge(&approval))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(st.certificate.is_none());
    assert!(st.conditions.unwrap().iter().any(|c| c.type_ == "Failed"));
}

/// Foreground deletion keeps the owner, with the `foregroundDeletion` finalizer, until its
/// blocking dependents are gone; orphaning leaves the dependents without the reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_and_orphan_propagation() {
    let sim = Sim::start(1, Duration::from_millis(50)).await;
    let api: Api<ConfigMap> = Api::default_namespaced(sim.client("c1").await);
    let owned_by = |owner: &ConfigMap| {
        Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner.metadata.name.clone().unwrap(),
                uid: owner.metadata.uid.clone().unwrap(),
                block_owner_deletion: Some(true),
                ..Default::default()
            },
        ])
    };
    let owner = api
        .create(&PostParams::default(), &cm("fg-owner", &[], "1"))
        .await
        .unwrap();
    let mut plain = cm("fg-plain", &[], "1");
    plain.metadata.owner_references = owned_by(&owner);
    let plain = api.create(&PostParams::default(), &plain).await.unwrap();
    let mut grandchild = cm("fg-grandchild", &[], "1");
    grandchild.metadata.owner_references = owned_by(&plain);
    api.create(&PostParams::default(), &grandchild)
        .await
        .unwrap();
    let mut held = cm("fg-held", &[], "1");
    held.metadata.owner_references = owned_by(&owner);
    held.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();

    let answer = api
        .delete("fg-owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let shown = answer.left().unwrap();
    assert!(shown.metadata.deletion_timestamp.is_some());
    assert_eq!(
        shown.metadata.finalizers.as_deref(),
        Some(&["foregroundDeletion".to_owned()][..])
    );
    // Dependents without finalizers went, grandchildren with them; the held one is marked.
    assert_eq!(code(api.get("fg-plain").await.unwrap_err()), 404);
    assert_eq!(code(api.get("fg-grandchild").await.unwrap_err()), 404);
    let marked = api.get("fg-held").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    let waiting = api.get("fg-owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    // Once the blocking dependent's own finalizer goes, it goes, and so does the owner.
    api.patch(
        "fg-held",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]))
            .unwrap(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(code(api.get("fg-held").await.unwrap_err()), 404);
    assert_eq!(code(api.get("fg-owner").await.unwrap_err()), 404);

    // Orphan: the dependent stays, without its owner reference.
    let owner = api
        .create(&PostParams::default(), &cm("or-owner", &[], "1"))
        .await
        .unwrap();
    let mut child = cm("or-child", &[], "1");
    child.metadata.owner_references = owned_by(&owner);
    api.create(&PostParams::default(), &child).await.unwrap();
    api.delete("or-owner", &DeleteParams::orphan())
        .await
        .unwrap();
    assert_eq!(code(api.get("or-owner").await.unwrap_err()), 404);
    let child = api.get("or-child").await.unwrap();
    assert!(
        child
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// Polls `f` until it gives `Some`, for at most 60 s.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn controller_uid(o: &DynamicObject) -> Option<String> {
    o.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// With controllers on, workloads own ReplicaSets and Pods that garbage collection removes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_create_replica_sets_and_pods() {
    let sim = Sim::start_with(kubesim::FleetConfig {
        ready_delay: Duration::from_millis(100),
        controllers: true,
        ..kubesim::FleetConfig::default()
    })
    .await;
    let client = sim.client("c1").await;
    let gvk = |g: &str, v: &str, k: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural)
    };
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let rs_api: Api<DynamicObject> = Api::default_namespaced_with(
        client.clone(),
        &gvk("apps", "v1", "ReplicaSet", "replicasets"),
    );
    let pods: Api<DynamicObject> =
        Api::default_namespaced_with(client.clone(), &gvk("", "v1", "Pod", "pods"));
    let workload = |kind: &str, image: &str, replicas: i64| {
        json!({
            "apiVersion": if kind == "Job" { "batch/v1" } else { "apps/v1" },
            "kind": kind,
            "metadata": {"name": kind.to_lowercase()},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": kind.to_lowercase()}},
                "template": {
                    "metadata": {"labels": {"app": kind.to_lowercase()}},
                    "spec": {"containers": [{"name": "c", "image": image}]},
                },
            },
        })
    };
    let ssa = PatchParams::apply("test");
    deployments
        .patch(
            "deployment",
            &ssa,
            &Patch::Apply(workload("Deployment", "nginx:1", 2)),
        )
        .await
        .unwrap();
    let d = deployments.get("deployment").await.unwrap();
    let sets = rs_api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(sets.len(), 1);
    let rs = &sets[0];
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        rs.metadata.name.as_deref(),
        Some(&*format!("deployment-{hash}"))
    );
    assert_eq!(controller_uid(rs), d.metadata.uid);
    assert_eq!(rs.data["spec"]["replicas"], 2);
    assert_eq!(
        rs.data["spec"]["selector"]["matchLabels"]["pod-template-hash"],
        json!(hash)
    );
    let selector = ListParams::default().labels("app=deployment");
    let first = pods.list(&selector).await.unwrap().items;
    assert_eq!(first.len(), 2);
    assert!(first.iter().all(|p| controller_uid(p) == rs.metadata.uid
        && p.metadata.labels.as_ref().unwrap()["pod-template-hash"] == hash));
    // After the ready delay the Pods run and the Deployment is available.
    eventually("pods running", || async {
        let items = pods.list(&selector).await.unwrap().items;
        items
            .iter()
            .all(|p| p.data["status"]["phase"] == "Running")
            .then_some(())
    })
    .await;
    // Scaling up is capped at a few Pods; a new template gets a new ReplicaSet.
    deployments
        .patch(
            "deployment",
            &ssa,
            &Patch::Apply(workload("Deployment", "nginx:2", 5)),
        )
        .await
        .unwrap();
    let sets = rs_api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(sets.len(), 2);
    let new = sets
        .iter()
        .find(|s| s.data["spec"]["replicas"] == 5)
        .unwrap();
    assert!(sets.iter().any(|s| s.data["spec"]["replicas"] == 0));
    assert_eq!(
        new.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );
    let now = pods.list(&selector).await.unwrap().items;
    assert_eq!(now.len(), 3);
    assert!(now.iter().all(|p| controller_uid(p) == new.metadata.uid
        && p.data["spec"]["containers"][0]["image"] == "nginx:2"));

    // StatefulSets name their Pods by ordinal, DaemonSets get one, Job Pods complete.
    let dynamic =
        |ar: &ApiResource| Api::<DynamicObject>::default_namespaced_with(client.clone(), ar);
    let sts = dynamic(&gvk("apps", "v1", "StatefulSet", "statefulsets"));
    sts.patch(
        "statefulset",
        &ssa,
        &Patch::Apply(workload("StatefulSet", "db", 2)),
    )
    .await
    .unwrap();
    pods.get("statefulset-0").await.unwrap();
    pods.get("statefulset-1").await.unwrap();
    let ds = dynamic(&gvk("apps", "v1", "DaemonSet", "daemonsets"));
    // A DaemonSet has no `spec.replicas`: server-side apply refuses it as the real server does.
    let mut daemon = workload("DaemonSet", "agent", 1);
    let refused = ds
        .patch("daemonset", &ssa, &Patch::Apply(daemon.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 500
            && s.message.ends_with(".spec.replicas: field not declared in schema")),
        "{refused}"
    );
    daemon["spec"].as_object_mut().unwrap().remove("replicas");
    ds.patch("daemonset", &ssa, &Patch::Apply(daemon))
        .await
        .unwrap();
    let mut job = workload("Job", "task", 1);
    job["spec"].as_object_mut().unwrap().remove("replicas");
    job["spec"].as_object_mut().unwrap().remove("selector");
    job["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let jobs = dynamic(&gvk("batch", "v1", "Job", "jobs"));
    jobs.patch("job", &ssa, &Patch::Apply(job)).await.unwrap();
    eventually("job pod succeeded", || async {
        let items = pods
            .list(&ListParams::default().labels("job-name=job"))
            .await
            .unwrap()
            .items;
        (items.len() == 1 && items[0].data["status"]["phase"] == "Succeeded").then_some(())
    })
    .await;

    // Background deletion collects the ReplicaSets and their Pods; foreground waits for them;
    // orphaning keeps the DaemonSet's Pod.
    deployments
        .delete("deployment", &DeleteParams::background())
        .await
        .unwrap();
    assert!(
        rs_api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(pods.list(&selector).await.unwrap().items.is_empty());
    sts.delete("statefulset", &DeleteParams::foreground())
        .await
        .unwrap();
    assert_eq!(code(pods.get("statefulset-0").await.unwrap_err()), 404);
    assert_eq!(code(sts.get("statefulset").await.unwrap_err()), 404);
    ds.delete("daemonset", &DeleteParams::orphan())
        .await
        .unwrap();
    let left = pods
        .list(&ListParams::default().labels("app=daemonset"))
        .await
        .unwrap()
        .items;
    assert_eq!(left.len(), 1);
    assert_eq!(controller_uid(&left[0]), None);
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

fn dyn_api(
    client: &kube::Client,
    gvk: (&str, &str, &str),
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(gvk.0, gvk.1, gvk.2), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

async fn raw_get(client: &kube::Client, path: &str) -> serde_json::Value {
    client
        .request(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_versions_share_storage_with_v1() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = sim.client("c1").await;
    let rbac = "rbac.authorization.k8s.io";
    // Created through v1beta1, read through v1 and v1beta1.
    let roles_beta = dyn_api(&client, (rbac, "v1beta1", "Role"), "roles", Some("default"));
    let role: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "Role", "metadata": {"name": "r1"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}))
    .unwrap();
    let created = roles_beta
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    assert_eq!(
        created.types.as_ref().unwrap().api_version,
        "rbac.authorization.k8s.io/v1beta1"
    );
    let v1: Api<Role> = Api::namespaced(client.clone(), "default");
    let got = v1.get("r1").await.unwrap();
    assert_eq!(got.rules.unwrap()[0].verbs, ["get"]);
    let raw = raw_get(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles/r1",
    )
    .await;
    assert_eq!(raw["apiVersion"], "rbac.authorization.k8s.io/v1");
    let listed = roles_beta.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "rbac.authorization.k8s.io/v1beta1"
    );
    // Created through v1, server-side applied and watched through v1beta1.
    let cr: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": "cr1"}, "rules": []})).unwrap();
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &cr)
        .await
        .unwrap();
    let crs_beta = dyn_api(
        &client,
        (rbac, "v1beta1", "ClusterRole"),
        "clusterroles",
        None,
    );
    let applied = json!({"apiVersion": "rbac.authorization.k8s.io/v1beta1", "kind": "ClusterRole",
        "metadata": {"name": "cr1", "labels": {"via": "beta"}}, "rules": []});
    let patched = crs_beta
        .patch(
            "cr1",
            &PatchParams::apply("legacy").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.types.as_ref().unwrap().api_version,
        "rbac.authorization.k8s.io/v1beta1"
    );
    let wp = WatchParams::default().fields("metadata.name=cr1");
    let mut events = crs_beta.watch(&wp, "0").await.unwrap().boxed();
    let Some(Ok(WatchEvent::Added(o))) = events.next().await else {
        panic!("no ADDED event")
    };
    assert_eq!(
        o.types.unwrap().api_version,
        "rbac.authorization.k8s.io/v1beta1"
    );
    assert_eq!(o.metadata.labels.unwrap()["via"], "beta");
    // PodSecurityPolicy exists only as policy/v1beta1.
    let psps = dyn_api(
        &client,
        ("policy", "v1beta1", "PodSecurityPolicy"),
        "podsecuritypolicies",
        None,
    );
    let psp: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "policy/v1beta1", "kind": "PodSecurityPolicy", "metadata": {"name": "restricted"},
        "spec": {"privileged": false, "seLinux": {"rule": "RunAsAny"}, "runAsUser": {"rule": "RunAsAny"},
                 "supplementalGroups": {"rule": "RunAsAny"}, "fsGroup": {"rule": "RunAsAny"}}}))
    .unwrap();
    psps.create(&PostParams::default(), &psp).await.unwrap();
    assert_eq!(
        psps.get("restricted").await.unwrap().data["spec"]["privileged"],
        false
    );
    // Discovery: the beta versions are served, v1 is preferred.
    let group = raw_get(&client, "/apis/rbac.authorization.k8s.io").await;
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1", "v1beta1"]);
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let policy = discovery.get("policy").unwrap();
    assert_eq!(policy.preferred_version_or_latest(), "v1");
    assert!(
        policy
            .resources_by_stability()
            .iter()
            .any(|(ar, _)| ar.kind == "PodSecurityPolicy")
    );
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1beta1_crd_serves_its_resources() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let client = sim.client("c1").await;
    let beta = dyn_api(
        &client,
        (
            "apiextensions.k8s.io",
            "v1beta1",
            "CustomResourceDefinition",
        ),
        "customresourcedefinitions",
        None,
    );
    let schema =
        json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}});
    let crd: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "version": "v1alpha1", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "validation": schema, "subresources": {"status": {}},
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "JSONPath": ".spec.size"}]}}))
    .unwrap();
    beta.create(&PostParams::default(), &crd).await.unwrap();
    // Read through v1: the storage shape, established.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let est = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(
            crds.clone(),
            "gadgets.example.com",
            conditions::is_crd_established(),
        ),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    let v = &est.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert!(v.served && v.storage);
    assert!(v.schema.is_some() && v.subresources.as_ref().unwrap().status.is_some());
    assert_eq!(
        v.additional_printer_columns.as_ref().unwrap()[0].json_path,
        ".spec.size"
    );
    // Read back through v1beta1: the v1beta1 shape.
    let back = beta.get("gadgets.example.com").await.unwrap();
    assert_eq!(back.data["spec"]["version"], "v1alpha1");
    assert_eq!(back.data["spec"]["validation"], schema);
    assert_eq!(
        back.data["spec"]["additionalPrinterColumns"][0]["JSONPath"],
        ".spec.size"
    );
    // The custom resources are served, with their status subresource.
    let gadgets = dyn_api(
        &client,
        ("example.com", "v1alpha1", "Gadget"),
        "gadgets",
        Some("default"),
    );
    let g: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1alpha1", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"size": 2}}),
    )
    .unwrap();
    gadgets.create(&PostParams::default(), &g).await.unwrap();
    let status = json!({"status": {"phase": "Ready"}});
    gadgets
        .patch_status("g1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let got = gadgets.get("g1").await.unwrap();
    assert_eq!(got.data["spec"]["size"], 2);
    assert_eq!(got.data["status"]["phase"], "Ready");
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// The scale subresource through kube-rs: get, update with a stale resourceVersion (409),
/// server-side apply owning the workload's `spec.replicas` (conflict, then force), and a 422
/// for an invalid Deployment and a negative replica count.
#[tokio::test]
async fn scale_subresource_and_validation() {
    let sim = Sim::start(1, Duration::ZERO).await;
    let api: Api<Deployment> = Api::default_namespaced(sim.client("c1").await);
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    api.patch("web", &PatchParams::apply("alice"), &Patch::Apply(&d))
        .await
        .unwrap();
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.as_ref().unwrap().replicas, Some(2));
    let status = scale.status.clone().unwrap();
    assert_eq!(
        (status.replicas, status.selector.as_deref()),
        (2, Some("app=web"))
    );

    let mut stale = scale.clone();
    stale.spec.as_mut().unwrap().replicas = Some(5);
    api.replace_scale("web", &PostParams::default(), &stale)
        .await
        .unwrap();
    let err = api
        .replace_scale("web", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert_eq!(code(err), 409);
    assert_eq!(api.get("web").await.unwrap().spec.replicas, Some(5));

    // Alice applied spec.replicas, and the update above took it over for its manager; Bob's
    // apply through the Scale conflicts with that owner until forced.
    let applied = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
        "spec": {"replicas": 4}});
    let err = api
        .patch_scale("web", &PatchParams::apply("bob"), &Patch::Apply(&applied))
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409, "{}", s.message);
            assert!(s.message.contains(".spec.replicas"), "{}", s.message);
        }
        other => panic!("{other:?}"),
    }
    let forced = api
        .patch_scale(
            "web",
            &PatchParams::apply("bob").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.unwrap().replicas, Some(4));
    let stored = api.get("web").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(4));
    assert!(
        stored
            .metadata
            .managed_fields
            .unwrap()
            .iter()
            .any(|m| m.manager.as_deref() == Some("bob")
                && m.operation.as_deref() == Some("Apply"))
    );
    let negative = api
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await
        .unwrap_err();
    match negative {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            assert_eq!(
                s.message,
                "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(api.get_scale("missing").await.is_err());

    // An invalid Deployment: 422 with one cause per field, as the real server.
    let mut bad = d.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    bad["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    let bad: Deployment = serde_json::from_value(bad).unwrap();
    match api.create(&PostParams::default(), &bad).await.unwrap_err() {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
            assert_eq!(
                s.message,
                "Deployment.apps \"bad\" is invalid: [spec.template.metadata.labels: Invalid value: \
                 map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`, \
                 spec.template.spec.containers[0].image: Required value]"
            );
        }
        other => panic!("{other:?}"),
    }
    // kubectl prints the causes (one a line): see the kubectl tests.
    sim.fleet.shutdown(Duration::from_secs(1)).await.unwrap();
}

/// As kube-apiserver (checked against `../shared/kube`): a Node is created with the status it is
/// given, by POST and by server-side apply (an admin registering a node, a test giving a
/// cluster without kubelets its addresses), and a later write of the main resource keeps it.
#[tokio::test]
async fn a_node_keeps_the_status_it_is_created_with() {
    use k8s_openapi::api::core::v1::Node;
    let sim = Sim::start(1, Duration::from_millis(50)).await;
    let api: Api<Node> = Api::all(sim.client("c1").await);
    let node = |name: &str, ip: &str| -> Node {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name},
            "status": {"addresses": [{"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name}]}}))
        .unwrap()
    };
    let addresses = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.addresses.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.address)
            .collect::<Vec<_>>()
    };
    let created = api
        .create(&PostParams::default(), &node("n1", "10.0.0.12"))
        .await
        .unwrap();
    assert_eq!(addresses(&created), ["10.0.0.12", "n1"]);
    let applied = api
        .patch(
            "n2",
            &PatchParams::apply("t"),
            &Patch::Apply(node("n2", "10.0.0.13")),
        )
        .await
        .unwrap();
    assert_eq!(addresses(&applied), ["10.0.0.13", "n2"]);
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 2);
    // A merge patch of the main resource does not reach the status.
    let patched = api
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "9.9.9.9"}]}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(addresses(&patched), ["10.0.0.12", "n1"]);
}
