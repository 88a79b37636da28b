//! Enrollment: the intermediate CA of every cluster a certificate names, requested from the
//! issuing cluster's cert-manager (src/ca-certs/pkg/certificate/enrollment, pkg/certissuer).
//!
//! For each cluster of the certificate's groups (for a project's certificate, of its logical
//! clouds' groups, kept to the clusters each logical cloud references) enrollment makes an RSA
//! key of `csrInfo.keySize` bits and a certificate signing request for the common name
//! `<cert>-<provider>-<cluster>-ca` (`-<commonNamePrefix>` appended; the cluster's kv-pair
//! `csrData` `commonName` replaces it), and puts a cert-manager `CertificateRequest`
//! `<ctx>-<cert>-<provider>-<cluster>-cr` for it on the issuing cluster, in one AppContext (app
//! `cert-enrollment`) that rsync deploys there. The key is kept beside the enrollment record
//! (ca-certs keeps it in its database) for distribution, which reads the signed requests back.

use std::collections::BTreeSet;
use std::sync::Arc;

use base64::Engine;
use emco_appcontext::AppContext;
use emco_appcontext::context::CompositeAppMeta;
use emco_core::ResourceName;
use emco_core::lifecycle::{AppContextStatus, DigState, StateInfo};
use emco_core::model::cacert::{CERT_MANAGER_GROUP, CaCert, CaCertClusterGroup};
use emco_core::model::kv_value_text;
use emco_core::{ContextId, Error, ErrorKind, Result};
use emco_store::ResourceKey;
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::EncodePrivateKey;
use serde_json::{Value, json};

use super::{CaCerts, CertOwner, Target};
use crate::dcm::write_only_app;
use crate::hooks::current_status;
use crate::keys;
use crate::state::{OnCurrent, Record};

/// The one app of an enrollment context.
pub const ENROLLMENT_APP: &str = "cert-enrollment";

/// One cluster's request: the resource's name in the context, the object, and the key.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// `<ctx>-<cert>-<provider>-<cluster>-cr`.
    pub name: String,
    /// The `CertificateRequest`.
    pub object: Value,
    /// The private key, PKCS#1 PEM (`RSA PRIVATE KEY`) as ca-certs encodes it.
    pub key_pem: String,
}

/// The name of the request for `target` in enrollment context `ctx`.
#[must_use]
pub fn request_name(ctx: ContextId, cert: &str, target: &Target) -> String {
    format!("{ctx}-{cert}-{}-{}-cr", target.provider, target.cluster)
}

/// The resource name ca-certs gives an object in its contexts: `<name>+<Kind>` in lower case.
#[must_use]
pub fn resource_name(name: &str, kind: &str) -> String {
    ResourceName::new(name, kind).to_string().to_lowercase()
}

/// The blob holding the keys of enrollment context `ctx`: `{"<provider>+<cluster>": {"Name":
/// <request>, "Val": <base64 of the PEM>}}`, ca-certs' key records.
pub(crate) fn keys_blob(ctx: ContextId) -> String {
    format!("{}{ctx}", keys::CA_KEYS_BLOB_PREFIX)
}

/// What Go's x509 signs an RSA request with for `csrInfo.algorithm.signatureAlgorithm` (an
/// empty or unknown name is Go's default for RSA keys, SHA-256).
fn signature(name: &str) -> Result<&'static rcgen::SignatureAlgorithm> {
    match name {
        "" | "SHA256WithRSA" => Ok(&rcgen::PKCS_RSA_SHA256),
        "SHA384WithRSA" => Ok(&rcgen::PKCS_RSA_SHA384),
        "SHA512WithRSA" => Ok(&rcgen::PKCS_RSA_SHA512),
        other => Err(Error::invalid(format!(
            "spec.csrInfo.algorithm.signatureAlgorithm {other} cannot sign with the RSA key \
             ca-certs makes: use SHA256WithRSA, SHA384WithRSA or SHA512WithRSA"
        ))),
    }
}

/// The common name of `target`'s intermediate CA (`override` is its `csrData` kv-pair).
#[must_use]
pub fn common_name(cert: &CaCert, target: &Target, override_: Option<&str>) -> String {
    if let Some(cn) = override_.filter(|c| !c.is_empty()) {
        return cn.to_owned();
    }
    let mut cn = format!(
        "{}-{}-{}-ca",
        cert.metadata.name, target.provider, target.cluster
    );
    let prefix = &cert.spec.csr_info.subject.names.common_name_prefix;
    if !prefix.is_empty() {
        cn.push('-');
        cn.push_str(prefix);
    }
    cn
}

/// A new key and the `CertificateRequest` for `target` in enrollment context `ctx`.
///
/// # Errors
/// InvalidArgument for a certificate enrollment cannot make a request of (no key size, a bad
/// duration, a signature algorithm an RSA key cannot use, an issuer outside cert-manager).
pub(crate) fn request(
    ctx: ContextId,
    cert: &CaCert,
    target: &Target,
    cn_override: Option<&str>,
) -> Result<Request> {
    let spec = &cert.spec;
    if spec.issuer_ref.group != CERT_MANAGER_GROUP {
        return Err(Error::invalid("unsupported Issuer"));
    }
    let duration = emco_go::time::parse_duration(&spec.duration)
        .map_err(|e| Error::invalid(format!("spec.duration: {e}")))?;
    let csr = &spec.csr_info;
    let bits = usize::try_from(csr.key_size)
        .ok()
        .filter(|b| *b >= 1024)
        .ok_or_else(|| {
            Error::invalid(format!(
                "failed to generate the certificate signing key: spec.csrInfo.keySize {} is not \
                 a key size (1024 bits or more)",
                csr.key_size
            ))
        })?;
    let algorithm = signature(&csr.algorithm.signature_algorithm)?;
    let internal = |what: &str| {
        let what = what.to_owned();
        move |e: &dyn std::fmt::Display| Error::internal(format!("{what}: {e}"))
    };
    let key = rsa::RsaPrivateKey::new(&mut os_rng(), bits)
        .map_err(|e| internal("cannot make the key")(&e))?;
    let pkcs8 = key
        .to_pkcs8_der()
        .map_err(|e| internal("cannot encode the key")(&e))?;
    let signer =
        rcgen::KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8.as_bytes().to_vec().into(), algorithm)
            .map_err(|e| internal("cannot sign with the key")(&e))?;
    let mut params = rcgen::CertificateParams::new(csr.dns_names.clone())
        .map_err(|e| Error::invalid(format!("spec.csrInfo.dnsNames: {e}")))?;
    let subject = &csr.subject;
    let mut dn = rcgen::DistinguishedName::new();
    for (kind, values) in [
        (rcgen::DnType::CountryName, &subject.locale.country),
        (rcgen::DnType::LocalityName, &subject.locale.locality),
        (rcgen::DnType::StateOrProvinceName, &subject.locale.province),
        (rcgen::DnType::OrganizationName, &subject.organization.names),
        (
            rcgen::DnType::OrganizationalUnitName,
            &subject.organization.units,
        ),
    ] {
        for v in values {
            dn.push(kind.clone(), v.as_str());
        }
    }
    for v in &subject.locale.street_address {
        dn.push(rcgen::DnType::CustomDnType(vec![2, 5, 4, 9]), v.as_str());
    }
    for v in &subject.locale.postal_code {
        dn.push(rcgen::DnType::CustomDnType(vec![2, 5, 4, 17]), v.as_str());
    }
    dn.push(
        rcgen::DnType::CommonName,
        common_name(cert, target, cn_override),
    );
    params.distinguished_name = dn;
    for email in &csr.email_addresses {
        let email = rcgen::string::Ia5String::try_from(email.as_str())
            .map_err(|e| Error::invalid(format!("spec.csrInfo.emailAddresses: {e}")))?;
        params
            .subject_alt_names
            .push(rcgen::SanType::Rfc822Name(email));
    }
    let csr_pem = params
        .serialize_request(&signer)
        .and_then(|r| r.pem())
        .map_err(|e| internal("cannot make the certificate signing request")(&e))?;
    let key_der = key
        .to_pkcs1_der()
        .map_err(|e| internal("cannot encode the key")(&e))?;
    let key_pem = pem::encode(&pem::Pem::new("RSA PRIVATE KEY", key_der.as_bytes()));
    let name = request_name(ctx, &cert.metadata.name, target);
    let object = json!({
        "apiVersion": "cert-manager.io/v1",
        "kind": "CertificateRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(csr_pem.as_bytes()),
            "isCA": spec.is_ca,
            "duration": emco_go::time::format_duration(duration),
            "issuerRef": {
                "name": spec.issuer_ref.name,
                "kind": spec.issuer_ref.kind,
                "group": spec.issuer_ref.group,
            },
        },
    });
    Ok(Request {
        name,
        object,
        key_pem,
    })
}

fn os_rng() -> getrandom::rand_core::UnwrapErr<getrandom::SysRng> {
    getrandom::rand_core::UnwrapErr(getrandom::SysRng)
}

/// EMCO's refusal of `event` on a certificate lifecycle whose current context is `status`
/// (orchestrator/common/emcoerror/stateerror.go); `None` when the event may go.
pub(crate) fn refusal(event: &str, status: Option<AppContextStatus>) -> Option<Error> {
    let text = |what: &str| format!("Failed to {event}. The CaCert {what}");
    let instantiate = event == "Instantiate";
    let message = match status {
        None if instantiate => return None,
        None => "The CaCert isn't in an expected status so not taking any action".to_owned(),
        Some(AppContextStatus::Terminating) => text("is being terminated"),
        Some(AppContextStatus::Instantiating) => text("is in instantiating status"),
        Some(AppContextStatus::TerminateFailed) => {
            text("has failed terminating, please delete the CaCert")
        }
        Some(AppContextStatus::Terminated) if instantiate => return None,
        Some(AppContextStatus::Terminated) => text("is already terminated"),
        Some(AppContextStatus::Instantiated) if instantiate => text("is already instantiated"),
        Some(AppContextStatus::InstantiateFailed) if instantiate => {
            text("has failed instantiating before, please terminate and try again")
        }
        // An updated lifecycle is deployed: it terminates (ca-certs refuses, leaving no way
        // back but a delete it also refuses).
        Some(
            AppContextStatus::Instantiated
            | AppContextStatus::InstantiateFailed
            | AppContextStatus::Updated
            | AppContextStatus::UpdateFailed,
        ) if !instantiate => return None,
        Some(_) => "The CaCert isn't in an expected status so not taking any action".to_owned(),
    };
    Some(Error::conflict(message))
}

impl CaCerts {
    /// The certificate at `key` (404 `caCert not found`).
    pub(crate) async fn cert(
        &self,
        owner: &CertOwner,
        name: &str,
    ) -> Result<(ResourceKey, CaCert)> {
        let key = owner.cert(name);
        let cert = self
            .records
            .objects
            .ca_certs()
            .get(&owner.key(), name)
            .await?;
        Ok((key, cert))
    }

    /// The clusters of `group`, by name (the cluster must exist) or label (src/ca-certs
    /// pkg/module/cluster.go `getClusters`).
    async fn group_clusters(&self, group: &CaCertClusterGroup) -> Result<Vec<String>> {
        let s = &group.spec;
        let objects = &self.records.objects;
        match s.scope.to_lowercase().as_str() {
            "name" => {
                objects
                    .clusters()
                    .get(&keys::cluster_provider(&s.cluster_provider), &s.cluster)
                    .await?;
                Ok(vec![s.cluster.clone()])
            }
            "label" => {
                objects
                    .clusters_with_label(&s.cluster_provider, &s.label)
                    .await
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The clusters a certificate is for, each once per logical cloud namespace, in the order
    /// of its groups (and logical clouds).
    pub(crate) async fn targets(
        &self,
        owner: &CertOwner,
        cert: &ResourceKey,
    ) -> Result<Vec<Target>> {
        let objects = &self.records.objects;
        let mut out: Vec<Target> = Vec::new();
        let mut push = |t: Target| {
            if !out.contains(&t) {
                out.push(t);
            }
        };
        match owner {
            CertOwner::Provider(_) => {
                for group in objects.ca_cert_cluster_groups().list(cert, &[]).await? {
                    for cluster in self.group_clusters(&group).await? {
                        push(Target::new(&group.spec.cluster_provider, &cluster, None));
                    }
                }
            }
            CertOwner::Project(project) => {
                for record in objects.ca_cert_logical_clouds().list(cert, &[]).await? {
                    let cloud = objects
                        .logical_clouds()
                        .get(&keys::project(project), &record.spec.logical_cloud)
                        .await?;
                    let lc = keys::logical_cloud(project, &cloud.metadata.name);
                    let referenced: BTreeSet<String> = objects
                        .cluster_references()
                        .list(&lc, &[])
                        .await?
                        .into_iter()
                        .map(|r| r.spec.cluster)
                        .collect();
                    let namespace = Some(cloud.spec.namespace.clone()).filter(|n| !n.is_empty());
                    let record_key =
                        cert.child(keys::CA_CERT_LOGICAL_CLOUD, record.metadata.name.as_str());
                    for group in objects
                        .ca_cert_cluster_groups()
                        .list(&record_key, &[])
                        .await?
                    {
                        for cluster in self.group_clusters(&group).await? {
                            // As ca-certs: the reference's cluster name, whatever its provider.
                            if referenced.contains(&cluster) {
                                push(Target::new(
                                    &group.spec.cluster_provider,
                                    &cluster,
                                    namespace.clone(),
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The `csrData` `commonName` kv-pair of the cluster, if any.
    async fn common_name_override(&self, target: &Target) -> Result<Option<String>> {
        let pairs = self
            .records
            .objects
            .kv_pairs()
            .list(&keys::cluster(&target.provider, &target.cluster), &[])
            .await?;
        Ok(pairs
            .iter()
            .filter(|kv| kv.metadata.name == "csrData")
            .flat_map(|kv| kv.spec.kv.iter())
            .find_map(|m| m.get("commonName").map(kv_value_text)))
    }

    /// Instantiates the enrollment of certificate `name`: its requests go to the issuing
    /// cluster.
    ///
    /// # Errors
    /// NotFound for a missing certificate, cluster or logical cloud; Conflict in a state that
    /// refuses it; InvalidArgument for a certificate no request can be made of.
    pub async fn instantiate_enrollment(&self, owner: &CertOwner, name: &str) -> Result<()> {
        self.enroll(owner, name, false).await
    }

    /// Enrolls again (new keys, new requests) while enrolled: rsync replaces the requests. A
    /// certificate that is not enrolled is left as it is, as ca-certs does.
    ///
    /// # Errors
    /// As [`Self::instantiate_enrollment`].
    pub async fn update_enrollment(&self, owner: &CertOwner, name: &str) -> Result<()> {
        self.enroll(owner, name, true).await
    }

    async fn enroll(&self, owner: &CertOwner, name: &str, update: bool) -> Result<()> {
        let (cert_key, cert) = self.cert(owner, name).await?;
        let record_key = super::Lifecycle::Enrollment.record(&cert_key);
        let store = self.records.store().as_ref();
        let record = Record::load_or_new(store, &record_key).await?;
        let current = current_status(self.records.contexts(), &record.info).await?;
        let Some(previous) = super::begin(update, current, &record.info)? else {
            return Ok(());
        };
        let targets = self.targets(owner, &cert_key).await?;
        let issuing = &cert.spec.issuing_cluster;
        self.records
            .objects
            .clusters()
            .get(
                &keys::cluster_provider(&issuing.cluster_provider),
                &issuing.cluster,
            )
            .await
            .map_err(|e| match e.kind() {
                ErrorKind::NotFound => Error::not_found(format!(
                    "the issuing cluster {} is not registered",
                    issuing.name()
                )),
                _ => e,
            })?;
        let meta = CompositeAppMeta {
            project: owner.project().to_owned(),
            composite_app: ENROLLMENT_APP.to_owned(),
            level: emco_core::model::logical_cloud::LEVEL_ADMIN.to_owned(),
            ..CompositeAppMeta::default()
        };
        let ctx = AppContext::create(Arc::clone(self.records.contexts()), &meta).await?;
        let issuer = issuing.name();
        let written = async {
            let mut requests = Vec::new();
            let mut seen = BTreeSet::new();
            for t in &targets {
                if !seen.insert((t.provider.clone(), t.cluster.clone())) {
                    continue;
                }
                let cn = self.common_name_override(t).await?;
                requests.push((t.clone(), request(ctx.id(), &cert, t, cn.as_deref())?));
            }
            let mut keys = serde_json::Map::new();
            for (t, r) in &requests {
                let val = base64::engine::general_purpose::STANDARD.encode(&r.key_pem);
                keys.insert(t.name(), json!({"Name": r.name, "Val": val}));
            }
            let keys = Value::Object(keys).to_string();
            crate::dcm::credentials::put_text_blob(store, &record_key, &keys_blob(ctx.id()), keys)
                .await?;
            Ok::<_, Error>(requests)
        };
        let requests = match written.await {
            Ok(r) => r,
            Err(e) => {
                ctx.discard().await;
                return Err(e);
            }
        };
        let resources = requests
            .iter()
            .map(|(_, r)| {
                let name = resource_name(&r.name, "CertificateRequest");
                (name, r.object.to_string())
            })
            .collect();
        write_only_app(&ctx, ENROLLMENT_APP, &[(issuer, resources)]).await?;
        self.record_and_deploy(&record_key, &record, &ctx, previous)
            .await
    }

    /// Terminates the enrollment of certificate `name`: rsync removes its requests from the
    /// issuing cluster and the keys of that enrollment are forgotten.
    ///
    /// # Errors
    /// NotFound for a missing certificate; Conflict in a state that refuses it.
    pub async fn terminate_enrollment(&self, owner: &CertOwner, name: &str) -> Result<()> {
        let (cert_key, _) = self.cert(owner, name).await?;
        let record_key = super::Lifecycle::Enrollment.record(&cert_key);
        if let Some(id) = self.terminate(&record_key).await? {
            let store = self.records.store().as_ref();
            store.delete_blob(&record_key, &keys_blob(id)).await?;
        }
        Ok(())
    }

    /// Terminates the lifecycle whose record is at `record_key`; the context terminated.
    pub(crate) async fn terminate(&self, record_key: &ResourceKey) -> Result<Option<ContextId>> {
        let store = self.records.store().as_ref();
        let record = Record::load_or_new(store, record_key).await?;
        let mut current = current_status(self.records.contexts(), &record.info).await?;
        // A terminate is recorded before rsync takes it up, and the context reads as deployed
        // until then: the record says it is being terminated (EMCO reads the context alone, and
        // accepts a second terminate in that window).
        if record.info.current_state() == DigState::Terminated
            && current.is_some_and(|s| {
                !matches!(
                    s,
                    AppContextStatus::Terminated | AppContextStatus::TerminateFailed
                )
            })
        {
            current = Some(AppContextStatus::Terminating);
        }
        if let Some(e) = refusal("Terminate", current) {
            return Err(e);
        }
        let context = self.records.load_context(&record.info).await?;
        let id = context.as_ref().map(AppContext::id);
        self.records
            .append_on_current(
                record_key,
                &record,
                (DigState::Terminated, 0),
                context,
                OnCurrent::Terminate,
            )
            .await?;
        Ok(id)
    }

    /// The enrollment record of certificate `name`.
    ///
    /// # Errors
    /// NotFound for a missing certificate.
    pub async fn enrollment_state(&self, owner: &CertOwner, name: &str) -> Result<StateInfo> {
        let (cert_key, _) = self.cert(owner, name).await?;
        let key = super::Lifecycle::Enrollment.record(&cert_key);
        Ok(Record::load_or_new(self.records.store().as_ref(), &key)
            .await?
            .info)
    }
}
