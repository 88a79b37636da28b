//! cert-manager's CA issuer, for clusters that have cert-manager's CRDs installed: a
//! `CertificateRequest` (`cert-manager.io/v1`) is approved and signed as it is created, with the
//! CA of its issuer (a `ClusterIssuer`, or an `Issuer` of its namespace, whose `spec.ca.secretName`
//! names a Secret with `tls.crt` and `tls.key`; a ClusterIssuer's Secret is in `cert-manager`,
//! cert-manager's cluster resource namespace). Its status then holds the certificate, the CA
//! (`ca.crt` of the Secret when it has one, else its `tls.crt`) and the `Approved` and `Ready`
//! conditions, as cert-manager's CA issuer leaves it; a request whose issuer or Secret is
//! missing stays not ready with cert-manager's reason. The certificate is a CA when the
//! request says `isCA`. (The validity is rcgen's default, not the request's `duration`.)

use base64::Engine;
use rcgen::{BasicConstraints, CertificateSigningRequestParams, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

use crate::resources::ResourceType;
use crate::store::{Key, Store};
use crate::util::now_rfc3339;

/// cert-manager's cluster resource namespace.
const CLUSTER_RESOURCE_NAMESPACE: &str = "cert-manager";

/// Whether objects of `rt` are cert-manager's certificate requests.
pub(crate) fn is_request(rt: &ResourceType) -> bool {
    rt.group == "cert-manager.io" && rt.kind == "CertificateRequest"
}

/// The status cert-manager gives the new `request`.
pub(crate) fn issue(store: &Store, request: &Value) -> Value {
    let now = now_rfc3339();
    let approved = json!({"type": "Approved", "status": "True", "reason": "cert-manager.io",
        "message": "Certificate request has been approved by cert-manager.io",
        "lastTransitionTime": now});
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    match sign(store, request) {
        Ok((certificate, ca)) => json!({
            "certificate": b64(&certificate),
            "ca": b64(&ca),
            "conditions": [approved, {"type": "Ready", "status": "True", "reason": "Issued",
                "message": "Certificate fetched from issuer successfully",
                "lastTransitionTime": now}],
        }),
        Err((reason, message)) => json!({
            "conditions": [approved, {"type": "Ready", "status": "False", "reason": reason,
                "message": message, "lastTransitionTime": now}],
        }),
    }
}

fn text<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or_default()
}

fn decoded(v: &Value, ptr: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text(v, ptr))
        .ok()?;
    String::from_utf8(bytes).ok().filter(|s| !s.is_empty())
}

/// The certificate and the CA, or cert-manager's (reason, message).
fn sign(store: &Store, request: &Value) -> Result<(String, String), (&'static str, String)> {
    let kind = match text(request, "/spec/issuerRef/kind") {
        "" => "Issuer",
        k => k,
    };
    let name = text(request, "/spec/issuerRef/name");
    let namespace = match text(request, "/metadata/namespace") {
        "" => "default",
        ns => ns,
    };
    let (issuer_key, secret_namespace): (Key, &str) = if kind == "ClusterIssuer" {
        (
            (
                "cert-manager.io/clusterissuers".to_owned(),
                String::new(),
                name.to_owned(),
            ),
            CLUSTER_RESOURCE_NAMESPACE,
        )
    } else {
        (
            (
                "cert-manager.io/issuers".to_owned(),
                namespace.to_owned(),
                name.to_owned(),
            ),
            namespace,
        )
    };
    let pending = |m: String| ("Pending", m);
    let issuer = store.get(&issuer_key).ok_or_else(|| {
        pending(format!(
            "Referenced \"{kind}\" not found: {}.cert-manager.io \"{name}\" not found",
            kind.to_lowercase()
        ))
    })?;
    let secret_name = text(&issuer, "/spec/ca/secretName");
    if secret_name.is_empty() {
        return Err(pending(format!("{kind} {name} is not a CA issuer")));
    }
    let secret = store
        .get(&(
            "/secrets".to_owned(),
            secret_namespace.to_owned(),
            secret_name.to_owned(),
        ))
        .ok_or_else(|| pending(format!("secret \"{secret_name}\" not found")))?;
    let failed = |m: String| ("Failed", m);
    let (Some(ca_cert), Some(ca_key)) = (
        decoded(&secret, "/data/tls.crt"),
        decoded(&secret, "/data/tls.key"),
    ) else {
        return Err(failed(format!(
            "secret \"{secret_name}\" has no tls.crt and tls.key"
        )));
    };
    let csr = decoded(request, "/spec/request")
        .ok_or_else(|| failed("spec.request is not a base64 PEM request".to_owned()))?;
    let key = KeyPair::from_pem(&ca_key)
        .map_err(|e| failed(format!("the CA key of {secret_name} is invalid: {e}")))?;
    let ca = Issuer::from_ca_cert_pem(&ca_cert, key).map_err(|e| {
        failed(format!(
            "the CA certificate of {secret_name} is invalid: {e}"
        ))
    })?;
    let mut params = CertificateSigningRequestParams::from_pem(&csr)
        .map_err(|e| failed(format!("invalid certificate request: {e}")))?;
    if request.pointer("/spec/isCA") == Some(&Value::Bool(true)) {
        params.params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    }
    let certificate = params
        .signed_by(&ca)
        .map_err(|e| failed(format!("cannot sign: {e}")))?;
    let chain_ca = decoded(&secret, "/data/ca.crt").unwrap_or(ca_cert);
    Ok((certificate.pem(), chain_ca))
}
