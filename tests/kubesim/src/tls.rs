//! Per-cluster certificates: each cluster has its own CA and a serving certificate it signs.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

/// The TLS material of one cluster.
#[derive(Debug)]
pub(crate) struct ClusterTls {
    /// The CA certificate (PEM) clients trust.
    pub(crate) ca_pem: String,
    /// The server configuration presenting the serving certificate.
    pub(crate) config: Arc<ServerConfig>,
    /// The CA, which also signs approved CertificateSigningRequests.
    pub(crate) signer: Arc<Signer>,
}

/// A cluster CA that signs certificates.
pub(crate) struct Signer {
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer")
    }
}

impl Signer {
    /// A new CA named after the cluster, with its certificate.
    pub(crate) fn new(cluster: &str) -> emco_core::Result<(Self, rcgen::Certificate)> {
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
        Ok((
            Self {
                issuer: Issuer::new(ca_params, ca_key),
            },
            ca_cert,
        ))
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
}

fn tls_err(e: impl std::error::Error + Send + Sync + 'static) -> emco_core::Error {
    emco_core::Error::internal("cannot create cluster certificates").with_source(e)
}

/// Creates a CA named after the cluster and a serving certificate for `hosts` (IP addresses or
/// DNS names) signed by it.
pub(crate) fn cluster_tls(cluster: &str, hosts: &[String]) -> emco_core::Result<ClusterTls> {
    let (signer, ca_cert) = Signer::new(cluster)?;

    let key = KeyPair::generate().map_err(tls_err)?;
    let mut params = CertificateParams::new(hosts.to_vec()).map_err(tls_err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("kubesim-{cluster}"));
    let cert = params.signed_by(&key, &signer.issuer).map_err(tls_err)?;

    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key_der)
            .map_err(tls_err)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // Resumption caches would cost memory in every idle cluster; clients reconnect rarely.
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    Ok(ClusterTls {
        ca_pem: ca_cert.pem(),
        config: Arc::new(config),
        signer: Arc::new(signer),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_distinct_cas() {
        let hosts = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let a = cluster_tls("c1", &hosts).unwrap();
        let b = cluster_tls("c2", &hosts).unwrap();
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(a.ca_pem, b.ca_pem);
    }

    #[test]
    fn signs_csrs() {
        let (signer, _) = Signer::new("c1").unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["user.example".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "alice");
        let csr = params.serialize_request(&key).unwrap().pem().unwrap();
        let cert = signer.sign_csr(&csr).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(signer.sign_csr("garbage").is_err());
    }
}
