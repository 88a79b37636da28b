//! The credentials of a standard or privileged logical cloud's user on each of its clusters.
//!
//! Instantiate makes a fresh key pair per cluster and puts a CertificateSigningRequest for it
//! (CN = the cloud's user) into the cloud's AppContext. Until the certificate is issued, the
//! private key waits in the blob [`PENDING_KEY_BLOB`] of the cloud's cluster reference, so that a
//! restarted process can still finish. A background task ([`spawn_finisher`]) then, cluster by
//! cluster and retrying with backoff for as long as the cloud stays instantiated, approves the
//! CSR with the cluster's admin credentials, reads the issued certificate and stores the
//! kubeconfig (server and CA of the admin kubeconfig, the client certificate and key, the cloud's
//! namespace) as the reference's blob [`LOGICAL_CLOUD_KUBECONFIG_BLOB`]; the certificate also
//! goes into the reference's `spec.certificate`, and the pending key is dropped. Every step is
//! idempotent, so two finishers of one cloud (an update while the first still runs) agree.
//!
//! Blobs are never part of a reference's JSON, so list and GET never show the key.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use emco_appcontext::AppContext;
use emco_core::ClusterRef;
use emco_core::lifecycle::DigState;
use emco_core::model::{ClusterReference, LogicalCloud};
use emco_core::{ContextId, Error, Found, Result};
use emco_rsync::connector::kube::KubeConnector;
use emco_rsync::connector::{Connector, ResourceId, Scope};
use emco_rsync::engine::Backoff;
use emco_store::{ResourceKey, ResourceStore};
use futures::StreamExt;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use serde_json::{Value, json};

use super::LC_APP;
use crate::builder::{LOGICAL_CLOUD_KUBECONFIG_BLOB, read_text_blob};
use crate::records::Records;
use crate::{from_value, keys};

/// The blob of a cluster reference holding the private key of a certificate request until its
/// kubeconfig is built.
pub(crate) const PENDING_KEY_BLOB: &str = keys::PENDING_KEY_BLOB;

/// How long one request to a cluster may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The end of the `name+Kind` of a certificate request.
const CSR_SUFFIX: &str = "+CertificateSigningRequest";

/// How many clusters one round works on at once.
const CONCURRENCY: usize = 16;

/// A fresh key pair and the PEM certificate request for it.
pub(crate) struct UserRequest {
    /// The private key (PKCS#8 PEM).
    pub(crate) key_pem: String,
    /// The certificate request (PEM).
    pub(crate) csr_pem: String,
}

/// A new ECDSA P-256 key and a certificate request for `user` (the subject's CN, which the API
/// server takes as the user name).
pub(crate) fn user_request(user: &str) -> Result<UserRequest> {
    let internal = |e: rcgen::Error| Error::internal("cannot make a user key").with_source(e);
    let key = KeyPair::generate().map_err(internal)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(internal)?;
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, user);
    params.distinguished_name = subject;
    let csr_pem = params
        .serialize_request(&key)
        .and_then(|csr| csr.pem())
        .map_err(internal)?;
    Ok(UserRequest {
        key_pem: key.serialize_pem(),
        csr_pem,
    })
}

/// The kubeconfig of `user` on `cluster`: the server and CA of the current context of the
/// cluster's `admin` kubeconfig, the client certificate and key, and `namespace` as the default.
///
/// # Errors
/// FailedPrecondition when the admin kubeconfig names no usable cluster.
pub(crate) fn user_kubeconfig(
    admin: &str,
    cluster: &str,
    user: &str,
    namespace: &str,
    cert_pem: &str,
    key_pem: &str,
) -> Result<String> {
    let bad = |why: &str| {
        Error::failed_precondition(format!("the kubeconfig of cluster {cluster} {why}"))
    };
    let doc: Value =
        emco_go::yaml::from_str(admin).map_err(|e| bad("is not YAML").with_source(e))?;
    let named = |list: &str, name: &str| {
        doc.get(list)
            .and_then(Value::as_array)
            .and_then(|items| items.iter().find(|i| i["name"] == name))
            .cloned()
    };
    let context = match doc.get("current-context").and_then(Value::as_str) {
        Some(current) if !current.is_empty() => named("contexts", current),
        _ => doc
            .get("contexts")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
            .cloned(),
    }
    .ok_or_else(|| bad("has no current context"))?;
    let cluster_name = context
        .pointer("/context/cluster")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("has a context without a cluster"))?;
    let server = named("clusters", cluster_name)
        .and_then(|c| c.get("cluster").cloned())
        .ok_or_else(|| bad(&format!("does not define cluster {cluster_name:?}")))?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let context_name = format!("{user}@{cluster}");
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": server}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(cert_pem),
            "client-key-data": b64(key_pem),
        }}],
        "contexts": [{"name": context_name, "context": {
            "cluster": cluster, "user": user, "namespace": namespace,
        }}],
        "current-context": context_name,
        "preferences": {},
    });
    emco_go::yaml::to_string(&config)
        .map_err(|e| Error::internal("cannot write a kubeconfig").with_source(e))
}

/// Stores `text` as the blob `name` of `key`.
pub(crate) async fn put_text_blob(
    store: &dyn ResourceStore,
    key: &ResourceKey,
    name: &str,
    text: String,
) -> Result<()> {
    let data = futures::stream::iter([Ok(Bytes::from(text))]);
    store.put_blob(key, name, Box::pin(data)).await.map(drop)
}

/// Forgets the credentials of every cluster reference of the logical cloud at `lc`: the
/// kubeconfigs, pending keys and certificates.
pub(crate) async fn clear(store: &dyn ResourceStore, lc: &ResourceKey) -> Result<()> {
    for (key, value) in store.list(lc, keys::CLUSTER_REFERENCE, &[]).await? {
        clear_reference(store, &key, value).await?;
    }
    Ok(())
}

/// Forgets the credentials of the cluster reference at `key` (its document `value`).
async fn clear_reference(store: &dyn ResourceStore, key: &ResourceKey, value: Value) -> Result<()> {
    store
        .delete_blob(key, LOGICAL_CLOUD_KUBECONFIG_BLOB)
        .await?;
    store.delete_blob(key, PENDING_KEY_BLOB).await?;
    let mut reference: ClusterReference = from_value(key, value)?;
    if !reference.spec.certificate.is_empty() {
        reference.spec.certificate.clear();
        store.update(key, &crate::to_value(&reference)?).await?;
    }
    Ok(())
}

/// The cluster references of the logical cloud at `lc` by cluster id (`provider+cluster`).
pub(crate) async fn references_by_cluster(
    store: &dyn ResourceStore,
    lc: &ResourceKey,
) -> Result<HashMap<String, (ResourceKey, ClusterReference)>> {
    let mut out = HashMap::new();
    for (key, value) in store.list(lc, keys::CLUSTER_REFERENCE, &[]).await? {
        let r: ClusterReference = from_value(&key, value)?;
        let id = ClusterRef::new(&r.spec.cluster_provider, &r.spec.cluster).to_string();
        out.insert(id, (key, r));
    }
    Ok(out)
}

/// Whether the reference at `key` has its kubeconfig.
pub(crate) async fn has_kubeconfig(store: &dyn ResourceStore, key: &ResourceKey) -> Result<bool> {
    Ok(read_text_blob(store, key, LOGICAL_CLOUD_KUBECONFIG_BLOB)
        .await?
        .is_some())
}

/// The certificate request of `cluster` in `ctx`: its `name+Kind` and YAML.
pub(crate) async fn request_in(
    ctx: &AppContext,
    cluster: &str,
) -> Result<Option<(String, String)>> {
    for key in ctx.resources(LC_APP, cluster).await? {
        if key.ends_with(CSR_SUFFIX) {
            let yaml = ctx.resource(LC_APP, cluster, &key).await?;
            return Ok(yaml.map(|y| (key, y)));
        }
    }
    Ok(None)
}

/// Starts completing the credentials of context `ctx_id` of logical cloud `cloud` in the
/// background; the task ends when every cluster of the context has its kubeconfig, or when the
/// cloud no longer runs that context (terminated, stopped, updated, deleted).
pub(crate) fn spawn_finisher(orch: &Records, project: &str, cloud: &str, ctx_id: ContextId) {
    let orch = orch.clone();
    let project = project.to_owned();
    let cloud = cloud.to_owned();
    let shutdown = orch.shutdown_token();
    tokio::spawn(async move {
        // Slow or unreachable clusters are retried for as long as the context is current.
        let backoff = Backoff {
            initial: Duration::from_millis(200),
            max_delay: Duration::from_secs(15),
            max_retries: None,
        };
        let mut attempt: u32 = 0;
        loop {
            // Finished, or the cloud or its context is gone.
            match finish_round(&orch, &project, &cloud, ctx_id).await.found() {
                Ok(Some(true) | None) => return,
                Ok(Some(false)) => {}
                Err(e) => {
                    tracing::warn!(%project, %cloud, error = %e, "logical cloud credentials");
                }
            }
            attempt = attempt.saturating_add(1);
            // At shutdown the next start resumes the work (`resume_logical_clouds`).
            tokio::select! {
                () = tokio::time::sleep(backoff.delay(attempt)) => {}
                () = shutdown.cancelled() => return,
            }
        }
    });
}

/// Whether the logical cloud at `lc` is instantiated (or updated) with context `ctx_id`.
async fn runs(orch: &Records, lc: &ResourceKey, ctx_id: ContextId) -> Result<bool> {
    let state = crate::state::load_state(orch.store().as_ref(), lc).await?;
    let current = state.current_context_id()?;
    Ok(current == Some(ctx_id)
        && matches!(
            state.current_state(),
            DigState::Instantiated | DigState::Updated
        ))
}

/// One pass over the clusters of the context; `true` when nothing is left to do.
async fn finish_round(
    orch: &Records,
    project: &str,
    cloud: &str,
    ctx_id: ContextId,
) -> Result<bool> {
    let store = orch.store().as_ref();
    let lc_key = keys::logical_cloud(project, cloud);
    if !runs(orch, &lc_key, ctx_id).await? {
        return Ok(true);
    }
    let lc: LogicalCloud = match store.get(&lc_key).await? {
        Some(v) => from_value(&lc_key, v)?,
        None => return Ok(true),
    };
    let ctx = AppContext::load(Arc::clone(orch.contexts()), ctx_id).await?;
    let references = references_by_cluster(store, &lc_key).await?;
    let lc = &lc;
    let ctx = &ctx;
    let references = &references;
    let results: Vec<(String, Result<bool>)> = futures::stream::iter(ctx.clusters(LC_APP).await?)
        .map(|cluster| async move {
            let done = match references.get(&cluster) {
                // A reference deleted since: nothing to finish there.
                None => Ok(true),
                Some((key, _)) => finish_cluster(orch, project, lc, ctx, &cluster, key).await,
            };
            (cluster, done)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut all_done = true;
    for (cluster, result) in results {
        match result {
            Ok(done) => all_done &= done,
            Err(e) => {
                all_done = false;
                tracing::debug!(%cluster, cloud = %lc.metadata.name, error = %e, "certificate not ready yet");
            }
        }
    }
    Ok(all_done)
}

/// Completes the kubeconfig of one cluster; `false` while the certificate is not issued yet.
async fn finish_cluster(
    orch: &Records,
    project: &str,
    lc: &LogicalCloud,
    ctx: &AppContext,
    cluster: &str,
    reference: &ResourceKey,
) -> Result<bool> {
    let store = orch.store().as_ref();
    if has_kubeconfig(store, reference).await? {
        return Ok(true);
    }
    let Some(key_pem) = read_text_blob(store, reference, PENDING_KEY_BLOB).await? else {
        // Without its key the request can never be used; an update makes a new one.
        tracing::warn!(%cluster, cloud = %lc.metadata.name,
            "the key of the certificate request is gone; update the logical cloud");
        return Ok(true);
    };
    let (provider, name) = crate::builder::split_cluster_id(cluster)?;
    let admin = read_text_blob(store, &keys::cluster(provider, name), keys::FILE_BLOB)
        .await?
        .ok_or_else(|| {
            Error::failed_precondition(format!("cluster {cluster} has no kubeconfig"))
        })?;
    let conn = KubeConnector::from_kubeconfig(cluster, &admin)
        .await?
        .with_request_timeout(REQUEST_TIMEOUT);
    let Some((csr_key, _)) = request_in(ctx, cluster).await? else {
        // A context of ours always has one; nothing to approve without it.
        return Ok(true);
    };
    let csr_name = csr_key.trim_end_matches(CSR_SUFFIX).to_owned();
    let id = ResourceId {
        api_version: "certificates.k8s.io/v1".to_owned(),
        kind: "CertificateSigningRequest".to_owned(),
        namespace: None,
        name: csr_name.clone(),
    };
    let scope = Scope::new(ctx.id().to_string(), LC_APP);
    // Not there yet: rsync has not applied it.
    let Some(mut csr) = conn.get(&scope, &id).await? else {
        return Ok(false);
    };
    if certificate(&csr).is_none() && !has_condition(&csr, "Approved") {
        if has_condition(&csr, "Denied") || has_condition(&csr, "Failed") {
            return Err(Error::failed_precondition(format!(
                "the certificate request {csr_name} on cluster {cluster} was denied or failed"
            )));
        }
        csr = approve(&conn, &csr_name, csr, &lc.metadata.name).await?;
    }
    let Some(cert_b64) = certificate(&csr) else {
        return Ok(false);
    };
    let cert_pem = base64::engine::general_purpose::STANDARD
        .decode(&cert_b64)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            Error::failed_precondition(format!(
                "cluster {cluster} issued a certificate that is not base64 PEM"
            ))
        })?;
    let kubeconfig = user_kubeconfig(
        &admin,
        name,
        lc.user_name(),
        &lc.spec.namespace,
        &cert_pem,
        &key_pem,
    )?;
    // Only while the context is still the cloud's, and checked again after the write: a
    // terminate (here or in another replica) that cleared the credentials meanwhile must not see
    // them come back, so what this wrote goes again if the cloud was terminated under it.
    let lc_key = keys::logical_cloud(project, &lc.metadata.name);
    if !runs(orch, &lc_key, ctx.id()).await? {
        return Ok(true);
    }
    put_text_blob(store, reference, LOGICAL_CLOUD_KUBECONFIG_BLOB, kubeconfig).await?;
    if let Some(value) = store.get(reference).await? {
        let mut r: ClusterReference = from_value(reference, value)?;
        if r.spec.certificate != cert_b64 {
            r.spec.certificate = cert_b64;
            store.update(reference, &crate::to_value(&r)?).await?;
        }
    }
    if !runs(orch, &lc_key, ctx.id()).await? {
        // Terminated (or replaced) under this write: what it wrote goes; the pending key
        // stays for whichever context now owns it.
        store
            .delete_blob(reference, LOGICAL_CLOUD_KUBECONFIG_BLOB)
            .await?;
        return Ok(true);
    }
    store.delete_blob(reference, PENDING_KEY_BLOB).await?;
    Ok(true)
}

/// The issued certificate (base64 of the PEM), if any.
fn certificate(csr: &Value) -> Option<String> {
    csr.pointer("/status/certificate")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned)
}

fn has_condition(csr: &Value, kind: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Approves the CSR through its `approval` subresource; returns the updated object.
async fn approve(conn: &KubeConnector, name: &str, mut csr: Value, cloud: &str) -> Result<Value> {
    let condition = json!({
        "type": "Approved",
        "status": "True",
        "reason": "EMCOApproved",
        "message": format!("approved by EMCO for logical cloud {cloud}"),
        "lastUpdateTime": crate::state::now_rfc3339(),
    });
    match csr
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        Some(conditions) => conditions.push(condition),
        None => csr["status"] = json!({"conditions": [condition]}),
    }
    let body = serde_json::to_vec(&csr)
        .map_err(|e| Error::internal("cannot encode a CSR").with_source(e))?;
    let request = http::Request::put(format!(
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval"
    ))
    .header(http::header::CONTENT_TYPE, "application/json")
    .body(body)
    .map_err(|e| Error::internal("cannot build an approval request").with_source(e))?;
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, conn.client().request::<Value>(request))
        .await
        .map_err(|_| Error::unavailable(format!("approving {name}: the cluster did not answer")))?;
    answer.map_err(|e| Error::unavailable(format!("cannot approve {name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: c1\n  context:\n    cluster: c1\n    user: admin\ncurrent-context: c1\nusers:\n- name: admin\n  user:\n    token: secret\n";

    #[test]
    fn kubeconfig_keeps_the_server_and_ca_but_not_the_admin_credentials() {
        let req = user_request("alice").unwrap();
        assert!(req.csr_pem.contains("CERTIFICATE REQUEST"));
        let kc = user_kubeconfig(ADMIN, "edge1", "alice", "ns1", "CERT", &req.key_pem).unwrap();
        let doc: Value = emco_go::yaml::from_str(&kc).unwrap();
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(
            doc["clusters"][0]["cluster"]["certificate-authority-data"],
            "Q0E="
        );
        assert_eq!(doc["contexts"][0]["context"]["namespace"], "ns1");
        assert_eq!(doc["current-context"], "alice@edge1");
        assert!(!kc.contains("secret"));
        let err = user_kubeconfig("clusters: []", "edge1", "a", "n", "C", "K").unwrap_err();
        assert_eq!(err.kind(), emco_core::ErrorKind::FailedPrecondition);
    }
}
