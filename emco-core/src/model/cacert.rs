//! ca-certs' objects: CA certificate intents and the clusters they are distributed to, at the
//! cluster-provider level (`/cluster-providers/{clusterProvider}/ca-certs`) and the project
//! level (`/projects/{project}/ca-certs`, through logical clouds), with the Go structs' JSON
//! (src/ca-certs/pkg/module/types.go, pkg/certissuer, pkg/client/logicalcloud/types.go) and the
//! handlers' checks and texts (src/ca-certs/api/helper.go `validateData`), which run before the
//! schema and report every missing field at once, one per line.

use serde::{Deserialize, Serialize};

use crate::Object;
use crate::error::{Error, Result};
use crate::metadata::Metadata;
use crate::placement::ClusterRef;

/// The only issuer group ca-certs supports.
pub const CERT_MANAGER_GROUP: &str = "cert-manager.io";

// Every ca-certs body is checked by the handler's own checks (all reported at once) before its
// JSON schema, with ca-certs' answers to an empty or undecodable body (api/helper.go
// `validateRequestBody`).

/// ca-certs' answer to a body that does not decode (api/helper.go `validateRequestBody`).
fn undecodable(_: &str) -> String {
    "error decoding the request body".to_owned()
}

/// `ca-certs/{caCert}`: an intermediate CA to issue for clusters and distribute to them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    check = check_ca_cert,
    schema = crate::schemas::CA_CERT,
    checks_before_schema,
    empty_body = "empty request body",
    undecodable = undecodable
)]
pub struct CaCert {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// What to issue and by whom.
    #[serde(default)]
    pub spec: CaCertSpec,
}

/// The `spec` of a [`CaCert`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaCertSpec {
    /// The certificate signing request's template.
    #[serde(default)]
    pub csr_info: CsrInfo,
    /// How long the certificate is valid, a Go duration (`8760h`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub duration: String,
    /// Whether the certificate is a CA.
    #[serde(default, rename = "isCA", skip_serializing_if = "std::ops::Not::not")]
    pub is_ca: bool,
    /// The cert-manager issuer that signs, on the issuing cluster.
    #[serde(default)]
    pub issuer_ref: IssuerRef,
    /// The cluster whose cert-manager signs the requests.
    #[serde(default)]
    pub issuing_cluster: IssuingCluster,
}

/// The template of the certificate signing requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsrInfo {
    /// The RSA key's size in bits.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub key_size: i64,
    /// The request's version (unused by Go's x509).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub version: i64,
    /// DNS names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// Email addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub email_addresses: Vec<String>,
    /// Key usages (stored, unused, as in ca-certs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_usages: Vec<String>,
    /// Key and signature algorithms.
    #[serde(default)]
    pub algorithm: Algorithm,
    /// The subject.
    #[serde(default)]
    pub subject: Subject,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference.
const fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// Key and signature algorithms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Algorithm {
    /// `RSA`, `DSA`, `ECDSA`, `Ed25519` (keys are RSA whatever it says, as in ca-certs).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub public_key_algorithm: String,
    /// `SHA256WithRSA`, `SHA512WithRSA`, ...
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature_algorithm: String,
}

/// The subject of the requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    /// Where.
    #[serde(default)]
    pub locale: Locale,
    /// The common name.
    #[serde(default)]
    pub names: Names,
    /// Who.
    #[serde(default)]
    pub organization: Organization,
}

/// Location parts of the subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Locale {
    /// Countries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub country: Vec<String>,
    /// Localities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locality: Vec<String>,
    /// Postal codes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub postal_code: Vec<String>,
    /// Provinces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub province: Vec<String>,
    /// Street addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub street_address: Vec<String>,
}

/// The common name parts. The Go struct's `CommonName` has no JSON tag, so it is written as
/// `CommonName` (and read case-insensitively, `commonName` too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Names {
    /// Appended (despite its name) to the generated common name.
    #[serde(default, rename = "commonNamePrefix")]
    pub common_name_prefix: String,
    /// A common name (unused by enrollment, which names each cluster's CA itself).
    #[serde(default, rename = "CommonName")]
    pub common_name: String,
}

/// Organization parts of the subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Organization {
    /// Organizations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// Organizational units.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<String>,
}

/// A cert-manager issuer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssuerRef {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// `ClusterIssuer` or `Issuer`.
    #[serde(default)]
    pub kind: String,
    /// `cert-manager.io`.
    #[serde(default)]
    pub group: String,
    /// Its version (unused).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
}

/// The cluster that signs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuingCluster {
    /// The cluster.
    #[serde(default)]
    pub cluster: String,
    /// Its provider.
    #[serde(default)]
    pub cluster_provider: String,
}

impl IssuingCluster {
    /// `provider+cluster`, the cluster's name in AppContexts.
    #[must_use]
    pub fn name(&self) -> String {
        ClusterRef::new(&self.cluster_provider, &self.cluster).to_string()
    }
}

/// The texts of the failed `checks` (failed, text), one per line, as the handlers join them.
fn failures(checks: &[(bool, &str)]) -> Result<()> {
    let failed: Vec<&str> = checks
        .iter()
        .filter(|(failed, _)| *failed)
        .map(|(_, text)| *text)
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Error::invalid(failed.join("\n")))
    }
}

/// The handler's checks of a [`CaCert`] body.
fn check_ca_cert(this: &CaCert) -> Result<()> {
    let s = &this.spec;
    failures(&[
        (
            this.metadata.name.is_empty(),
            "caCert name may not be empty",
        ),
        (s.issuer_ref.name.is_empty(), "issuer name may not be empty"),
        (s.issuer_ref.kind.is_empty(), "issuer kind may not be empty"),
        (
            s.issuer_ref.group.is_empty() && s.issuer_ref.version.is_empty(),
            "issuer group/version may not be empty",
        ),
        (
            s.issuing_cluster.cluster.is_empty(),
            "issuing cluster may not be empty",
        ),
        (
            s.issuing_cluster.cluster_provider.is_empty(),
            "issuing clusterProvider may not be empty",
        ),
    ])
}

/// `clusters/{cluster}` of a [`CaCert`]: clusters the CA is issued for, by name or by label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    check = check_ca_cert_cluster_group,
    schema = crate::schemas::CA_CERT_CLUSTER_GROUP,
    checks_before_schema,
    empty_body = "empty request body",
    undecodable = undecodable
)]
pub struct CaCertClusterGroup {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// Which clusters.
    #[serde(default)]
    pub spec: ClusterGroupSpec,
}

/// The `spec` of a [`CaCertClusterGroup`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterGroupSpec {
    /// The clusters with this label (scope `label`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// The cluster of this name (scope `name`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// Their provider.
    #[serde(default)]
    pub cluster_provider: String,
    /// `label` or `name`.
    #[serde(default)]
    pub scope: String,
}

/// The handler's checks of a [`CaCertClusterGroup`] body.
fn check_ca_cert_cluster_group(this: &CaCertClusterGroup) -> Result<()> {
    let s = &this.spec;
    failures(&[
        (
            this.metadata.name.is_empty(),
            "clusterGroup name may not be empty",
        ),
        (s.scope.is_empty(), "scope may not be empty"),
        (
            s.cluster_provider.is_empty(),
            "clusterProvider may not be empty",
        ),
        (
            s.scope == "name" && s.cluster.is_empty(),
            "cluster name may not be empty when the scope is the name",
        ),
        (
            s.scope == "label" && s.label.is_empty(),
            "cluster label may not be empty when the scope is the label",
        ),
    ])
}

/// `logical-clouds/{logicalCloud}` of a project's [`CaCert`]: a logical cloud the CA is
/// distributed in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Object)]
#[object(
    check = check_ca_cert_logical_cloud,
    schema = crate::schemas::CA_CERT_LOGICAL_CLOUD,
    checks_before_schema,
    empty_body = "empty request body",
    undecodable = undecodable
)]
pub struct CaCertLogicalCloud {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// Which logical cloud.
    #[serde(default)]
    pub spec: CaCertLogicalCloudSpec,
}

/// The `spec` of a [`CaCertLogicalCloud`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaCertLogicalCloudSpec {
    /// The logical cloud of the project.
    #[serde(default)]
    pub logical_cloud: String,
}

/// The handler's checks of a [`CaCertLogicalCloud`] body.
fn check_ca_cert_logical_cloud(this: &CaCertLogicalCloud) -> Result<()> {
    failures(&[
        (
            this.metadata.name.is_empty(),
            "caCert logicalCloud name may not be empty",
        ),
        (
            this.spec.logical_cloud.is_empty(),
            "logicalCloud may not be empty",
        ),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::validate::Validate;

    /// The body of ca-certs' API tests (api/test/helper_test.go): `commonName` read into the
    /// untagged `CommonName`, written back under Go's field name; empty lists and a false
    /// `isCA` left out, the objects always there.
    #[test]
    fn a_certificate_reads_and_writes_as_the_go_struct() {
        let body = json!({"metadata": {"name": "cert1"}, "spec": {"isCA": true,
            "issuerRef": {"name": "foo", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "duration": "8760h", "issuingCluster": {"cluster": "issuer1", "clusterProvider": "p1"},
            "csrInfo": {"keySize": 4096, "version": 1, "dnsNames": [], "keyUsages": [],
                "algorithm": {"publicKeyAlgorithm": "RSA", "signatureAlgorithm": "SHA512WithRSA"},
                "subject": {"locale": {"country": ["US"]}, "names": {"commonName": "foo"},
                    "organization": {"names": []}}}}});
        let cert: CaCert = emco_go::json::from_slice(body.to_string().as_bytes()).unwrap();
        assert_eq!(cert.spec.csr_info.subject.names.common_name, "foo");
        assert!(cert.validate().is_ok());
        let back = serde_json::to_value(&cert).unwrap();
        assert_eq!(
            back["spec"]["csrInfo"],
            json!({"keySize": 4096, "version": 1,
                "algorithm": {"publicKeyAlgorithm": "RSA", "signatureAlgorithm": "SHA512WithRSA"},
                "subject": {"locale": {"country": ["US"]},
                    "names": {"commonNamePrefix": "", "CommonName": "foo"}, "organization": {}}})
        );
        assert_eq!(back["spec"]["isCA"], true);
        let mut not_ca = cert;
        not_ca.spec.is_ca = false;
        assert!(
            serde_json::to_value(&not_ca).unwrap()["spec"]
                .get("isCA")
                .is_none()
        );
    }

    #[test]
    fn every_missing_field_is_reported_one_per_line() {
        let e = CaCert::default().validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "caCert name may not be empty\nissuer name may not be empty\nissuer kind may not be \
             empty\nissuer group/version may not be empty\nissuing cluster may not be empty\n\
             issuing clusterProvider may not be empty"
        );
        let mut group = CaCertClusterGroup::default();
        group.spec.scope = "name".into();
        assert_eq!(
            group.validate().unwrap_err().to_string(),
            "clusterGroup name may not be empty\nclusterProvider may not be empty\ncluster name \
             may not be empty when the scope is the name"
        );
        group.metadata.name = "g".into();
        group.spec.cluster_provider = "p".into();
        group.spec.scope = "label".into();
        assert_eq!(
            group.validate().unwrap_err().to_string(),
            "cluster label may not be empty when the scope is the label"
        );
        group.spec.label = "edge".into();
        assert!(group.validate().is_ok());
        assert_eq!(
            CaCertLogicalCloud::default()
                .validate()
                .unwrap_err()
                .to_string(),
            "caCert logicalCloud name may not be empty\nlogicalCloud may not be empty"
        );
    }
}
