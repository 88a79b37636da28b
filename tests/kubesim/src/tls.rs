//! Per-cluster certificates: each cluster has its own CA and a serving certificate it signs.
//! Both are made on first use (the CA for a kubeconfig, a CSR or the first connection, the
//! serving certificate for the first connection), so that idle clusters cost no key generation.
//!
//! Clients authenticate with the cluster's bearer token or with a client certificate signed by
//! the cluster's CA (as the real API server's x509 authenticator: user = subject CN, groups =
//! subject O), such as the certificate of an approved CertificateSigningRequest.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

/// The CA of one cluster: it signs the serving certificate and approved
/// CertificateSigningRequests, and verifies client certificates.
pub(crate) struct ClusterCa {
    /// The CA certificate (PEM) clients trust.
    pub(crate) ca_pem: String,
    ca_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterCa")
    }
}

impl ClusterCa {
    /// A new CA named after the cluster.
    pub(crate) fn new(cluster: &str) -> emco_core::Result<Self> {
        let ca_key = KeyPair::generate().map_err(tls_err)?;
        let mut ca_params = CertificateParams::default();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("kubesim-{cluster}-ca"));
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
        Ok(Self {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            issuer: Issuer::new(ca_params, ca_key),
        })
    }

    /// Signs a PEM certificate signing request; the answer is the certificate in PEM.
    pub(crate) fn sign_csr(&self, csr_pem: &str) -> Result<String, String> {
        let csr = CertificateSigningRequestParams::from_pem(csr_pem)
            .map_err(|e| format!("invalid certificate request: {e}"))?;
        let cert = csr
            .signed_by(&self.issuer)
            .map_err(|e| format!("cannot sign: {e}"))?;
        Ok(cert.pem())
    }

    /// A serving certificate for `hosts` (IP addresses or DNS names) signed by this CA, in a
    /// server configuration that also accepts client certificates the CA signed.
    pub(crate) fn server_config(
        &self,
        cluster: &str,
        hosts: &[String],
    ) -> emco_core::Result<Arc<ServerConfig>> {
        let key = KeyPair::generate().map_err(tls_err)?;
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(tls_err)?;
        params
            .distinguished_name
            .push(DnType::CommonName, format!("kubesim-{cluster}"));
        let cert = params.signed_by(&key, &self.issuer).map_err(tls_err)?;

        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // Client certificates are optional (token clients send none) but, when sent, must chain
        // to the cluster's CA: the handshake fails otherwise, as with the real API server.
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).map_err(tls_err)?;
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(tls_err)?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert.der().clone()], key_der)
            .map_err(tls_err)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // Resumption caches would cost memory in every idle cluster; clients reconnect rarely.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        Ok(Arc::new(config))
    }
}

fn tls_err(e: impl std::error::Error + Send + Sync + 'static) -> emco_core::Error {
    emco_core::Error::internal("cannot create cluster certificates").with_source(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_distinct_cas() {
        let hosts = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let a = ClusterCa::new("c1").unwrap();
        let b = ClusterCa::new("c2").unwrap();
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(a.ca_pem, b.ca_pem);
        let config = a.server_config("c1", &hosts).unwrap();
        assert_eq!(config.alpn_protocols.len(), 2);
    }

    #[test]
    fn signs_csrs() {
        let signer = ClusterCa::new("c1").unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["user.example".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "alice");
        let csr = params.serialize_request(&key).unwrap().pem().unwrap();
        let cert = signer.sign_csr(&csr).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(signer.sign_csr("garbage").is_err());
    }

    #[test]
    fn reads_the_user_of_a_certificate() {
        let signer = ClusterCa::new("c1").unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, "bob");
        params
            .distinguished_name
            .push(DnType::OrganizationName, "devs");
        let cert = params.signed_by(&key, &signer.issuer).unwrap();
        let user = emco_core::x509::cert_subject(cert.der()).unwrap();
        assert_eq!(user.user, "bob");
        assert_eq!(user.groups, vec!["devs".to_owned()]);
        let mut anonymous = CertificateParams::new(Vec::<String>::new()).unwrap();
        anonymous.distinguished_name = rcgen::DistinguishedName::new();
        let cert = anonymous.signed_by(&key, &signer.issuer).unwrap();
        assert_eq!(emco_core::x509::cert_subject(cert.der()), None);
    }
}
