//! Who a client certificate names, read as Kubernetes' x509 authenticator reads it: the
//! subject's CN is the user, its O entries are the groups. The certificate must already be
//! verified (by the TLS layer); this only reads it.

/// The user and groups of a client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSubject {
    /// The subject's common name.
    pub user: String,
    /// The subject's organizations.
    pub groups: Vec<String>,
}

/// The subject of the DER certificate `der`; `None` when it cannot be parsed or names no CN
/// (the API server refuses such certificates too).
#[must_use]
pub fn cert_subject(der: &[u8]) -> Option<CertSubject> {
    let (_, parsed) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = parsed.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|cn| !cn.is_empty())?
        .to_owned();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some(CertSubject { user, groups })
}
