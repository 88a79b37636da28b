//! Sprig's key and certificate functions: the PEMs they produce are read back with x509-parser
//! and the `rsa` crate and checked field by field (subject, SANs, CA flag, validity, usages,
//! signature chain).

#![allow(clippy::unwrap_used)] // Test helpers fail the test on bad fixtures.

use emco_helm::{TemplateLimits, Templates, yaml};
use rsa::pkcs1::DecodeRsaPrivateKey as _;
use rsa::traits::PublicKeyParts as _;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer as _, X509Certificate};

fn run(src: &str) -> Result<String, String> {
    let mut set = Templates::new();
    set.add("t", src).map_err(|e| e.to_string())?;
    let data = yaml::parse_values_document("x: 1").unwrap();
    set.execute("t", &data, &TemplateLimits::default())
        .map_err(|e| e.to_string())
}

/// The blocks of a PEM text: (type, DER).
fn pem_blocks(text: &str) -> Vec<(String, Vec<u8>)> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let mut kind = None;
    let mut body = String::new();
    for line in text.lines() {
        if let Some(k) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            kind = Some(k.to_owned());
            body.clear();
        } else if line.starts_with("-----END ") {
            let der = base64::engine::general_purpose::STANDARD
                .decode(body.as_bytes())
                .unwrap();
            out.push((kind.take().unwrap(), der));
        } else {
            assert!(line.len() <= 64, "Go writes 64-column PEM lines");
            body.push_str(line);
        }
    }
    out
}

fn one_block(text: &str, kind: &str) -> Vec<u8> {
    let blocks = pem_blocks(text);
    assert_eq!(blocks.len(), 1, "{text}");
    assert_eq!(blocks[0].0, kind);
    blocks[0].1.clone()
}

fn parse_cert(der: &[u8]) -> X509Certificate<'_> {
    X509Certificate::from_der(der).unwrap().1
}

fn cn(cert: &X509Certificate<'_>) -> String {
    cert.subject()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

fn sans(cert: &X509Certificate<'_>) -> (Vec<String>, Vec<String>) {
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    if let Some(ext) = cert.subject_alternative_name().unwrap() {
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => dns.push((*d).to_owned()),
                GeneralName::IPAddress(b) => ips.push(match b.len() {
                    4 => std::net::IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()).to_string(),
                    _ => std::net::IpAddr::from(<[u8; 16]>::try_from(*b).unwrap()).to_string(),
                }),
                other => panic!("unexpected SAN {other:?}"),
            }
        }
    }
    (dns, ips)
}

fn is_ca(cert: &X509Certificate<'_>) -> bool {
    cert.basic_constraints().unwrap().unwrap().value.ca
}

fn validity_days(cert: &X509Certificate<'_>) -> i64 {
    let v = cert.validity();
    (v.not_after.timestamp() - v.not_before.timestamp() + 60) / 86_400
}

fn rsa_bits(key_pem: &str) -> usize {
    let der = one_block(key_pem, "RSA PRIVATE KEY");
    rsa::RsaPrivateKey::from_pkcs1_der(&der).unwrap().size() * 8
}

#[test]
fn gen_ca_and_signed_cert_chain_verifies() {
    let out = run(concat!(
        r#"{{- $ca := genCA "my-ca" 365 -}}"#,
        r#"{{- $c := genSignedCert "svc.ns.svc" (list "10.0.0.1" "::1") (list "svc" "svc.ns") 30 $ca -}}"#,
        r#"{{ $ca.Cert }}@@{{ $ca.Key }}@@{{ $c.Cert }}@@{{ $c.Key }}@@{{ typeOf $ca }}@@{{ kindOf $c }}"#,
    ))
    .unwrap();
    let parts: Vec<&str> = out.split("@@").collect();
    assert_eq!(parts[4], "sprig.certificate");
    assert_eq!(parts[5], "struct");
    let ca_der = one_block(parts[0], "CERTIFICATE");
    let ca = parse_cert(&ca_der);
    assert_eq!(cn(&ca), "my-ca");
    assert!(is_ca(&ca));
    assert_eq!(validity_days(&ca), 365);
    assert!(ca.key_usage().unwrap().unwrap().value.key_cert_sign());
    assert_eq!(rsa_bits(parts[1]), 2048);
    // Self-signed: the CA verifies itself.
    ca.verify_signature(None).unwrap();

    let leaf_der = one_block(parts[2], "CERTIFICATE");
    let leaf = parse_cert(&leaf_der);
    assert_eq!(cn(&leaf), "svc.ns.svc");
    assert!(!is_ca(&leaf));
    assert_eq!(validity_days(&leaf), 30);
    assert_eq!(leaf.issuer(), ca.subject());
    assert_eq!(
        sans(&leaf),
        (
            vec!["svc".to_owned(), "svc.ns".to_owned()],
            vec!["10.0.0.1".to_owned(), "::1".to_owned()]
        )
    );
    let ku = leaf.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && eku.client_auth);
    leaf.verify_signature(Some(ca.public_key())).unwrap();
    assert!(leaf.verify_signature(Some(leaf.public_key())).is_err());
    assert_eq!(rsa_bits(parts[3]), 2048);
    // Serial numbers are random 128-bit values.
    assert!(leaf.tbs_certificate.raw_serial().len() <= 17);
    assert_ne!(leaf.raw_serial(), ca.raw_serial());
}

#[test]
fn self_signed_cert_and_nil_lists() {
    let out = run(
        r#"{{ $c := genSelfSignedCert "example.com" nil (list "example.com" "www.example.com") 10 }}{{ $c.Cert }}"#,
    )
    .unwrap();
    let der = one_block(&out, "CERTIFICATE");
    let cert = parse_cert(&der);
    assert_eq!(cn(&cert), "example.com");
    assert!(!is_ca(&cert));
    assert_eq!(validity_days(&cert), 10);
    assert_eq!(
        sans(&cert),
        (
            vec!["example.com".to_owned(), "www.example.com".to_owned()],
            vec![]
        )
    );
    cert.verify_signature(None).unwrap();
}

#[test]
fn with_key_variants_reuse_the_given_keys() {
    // One ecdsa key signs as CA; an ed25519 key is certified by it; Sprig re-encodes the keys.
    let out = run(concat!(
        r#"{{- $cakey := genPrivateKey "ecdsa" -}}{{- $leafkey := genPrivateKey "ed25519" -}}"#,
        r#"{{- $ca := genCAWithKey "ec-ca" 5 $cakey -}}"#,
        r#"{{- $c := genSignedCertWithKey "leaf" nil nil 5 $ca $leafkey -}}"#,
        r#"{{- $s := genSelfSignedCertWithKey "self" (list "127.0.0.1") nil 5 $cakey -}}"#,
        r#"{{ $cakey }}@@{{ $ca.Key }}@@{{ $ca.Cert }}@@{{ $leafkey }}@@{{ $c.Key }}@@{{ $c.Cert }}@@{{ $s.Cert }}"#,
    ))
    .unwrap();
    let p: Vec<&str> = out.split("@@").collect();
    assert_eq!(p[0], p[1], "the CA key is the given key");
    assert_eq!(p[3], p[4], "the leaf key is the given key");
    one_block(p[0], "EC PRIVATE KEY");
    one_block(p[3], "PRIVATE KEY");
    let ca_der = one_block(p[2], "CERTIFICATE");
    let ca = parse_cert(&ca_der);
    assert!(is_ca(&ca));
    assert_eq!(cn(&ca), "ec-ca");
    let leaf_der = one_block(p[5], "CERTIFICATE");
    let leaf = parse_cert(&leaf_der);
    leaf.verify_signature(Some(ca.public_key())).unwrap();
    assert_eq!(cn(&leaf), "leaf");
    let self_der = one_block(p[6], "CERTIFICATE");
    let own = parse_cert(&self_der);
    assert_eq!(sans(&own).1, vec!["127.0.0.1".to_owned()]);
    // Same key as the CA: the public keys match.
    assert_eq!(own.public_key().raw, ca.public_key().raw);
    own.verify_signature(None).unwrap();
}

#[test]
fn gen_private_key_kinds() {
    let rsa = run(r#"{{ genPrivateKey "rsa" }}"#).unwrap();
    assert_eq!(rsa_bits(&rsa), 4096);
    let ec = run(r#"{{ genPrivateKey "ecdsa" }}"#).unwrap();
    let der = one_block(&ec, "EC PRIVATE KEY");
    // SEC1 with the P-256 OID, as Go's MarshalECPrivateKey writes it.
    let p256_oid = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    assert!(der.windows(p256_oid.len()).any(|w| w == p256_oid));
    let ed = run(r#"{{ genPrivateKey "ed25519" }}"#).unwrap();
    // PKCS#8 v1 (version 0) with a 32-byte seed: 48 bytes, like Go's MarshalPKCS8PrivateKey.
    assert_eq!(one_block(&ed, "PRIVATE KEY").len(), 48);
    assert_eq!(
        run(r#"{{ genPrivateKey "foo" }}"#).unwrap(),
        "Unknown type foo"
    );
    let dsa = run(r#"{{ genPrivateKey "dsa" }}"#).unwrap_err();
    assert!(dsa.contains("dsa keys are not supported"), "{dsa}");
}

#[test]
fn build_custom_cert_and_errors() {
    let out = run(concat!(
        r#"{{- $ca := genCA "c" 1 -}}"#,
        r#"{{- $b := buildCustomCert ($ca.Cert | b64enc) ($ca.Key | b64enc) -}}"#,
        r#"{{ eq $b.Cert $ca.Cert }} {{ eq $b.Key $ca.Key }}"#,
    ))
    .unwrap();
    assert_eq!(out, "true true");
    let cases = [
        (
            r#"{{ buildCustomCert "%%" "" }}"#,
            "error calling buildCustomCert: unable to decode base64 certificate",
        ),
        (
            r#"{{ buildCustomCert ("x" | b64enc) ("y" | b64enc) }}"#,
            "error calling buildCustomCert: unable to decode certificate",
        ),
        (
            r#"{{ genSignedCert "a" nil nil 1 (dict "Cert" "x") }}"#,
            "wrong type for value; expected sprig.certificate; got map[string]interface {}",
        ),
        (
            r#"{{ genSelfSignedCert "a" (list 1) nil 1 }}"#,
            "error calling genSelfSignedCert: error parsing ip: 1 is not a string",
        ),
        (
            r#"{{ genSelfSignedCert "a" (list "300.1.1.1") nil 1 }}"#,
            "error calling genSelfSignedCert: error parsing ip: 300.1.1.1",
        ),
        (
            r#"{{ genSelfSignedCert "a" nil (list true) 1 }}"#,
            "error processing alternate dns name: true is not a string",
        ),
        (
            r#"{{ genSelfSignedCert "a" "x" nil 1 }}"#,
            "can't handle \"x\" for arg of type []interface {}",
        ),
        (
            r#"{{ genCAWithKey "a" 1 "junk" }}"#,
            "error calling genCAWithKey: parsing private key: no PEM data in input",
        ),
    ];
    for (src, want) in cases {
        let err = run(src).unwrap_err();
        assert!(err.contains(want), "{src}: {err}");
    }
}

#[test]
fn cert_objects_serialize_like_go_structs() {
    let out =
        run(r#"{{ $c := genCA "x" 1 }}{{ $c | toJson | fromJson | keys | sortAlpha | join "," }}"#)
            .unwrap();
    assert_eq!(out, "Cert,Key");
    let y = run(r#"{{ genCA "x" 1 | toYaml }}"#).unwrap();
    assert!(
        y.starts_with("Cert: |\n  -----BEGIN CERTIFICATE-----\n"),
        "{y}"
    );
    assert!(
        y.contains("\nKey: |\n  -----BEGIN RSA PRIVATE KEY-----\n"),
        "{y}"
    );
}
