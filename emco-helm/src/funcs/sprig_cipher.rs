//! Sprig's password and cipher functions: `bcrypt`, `htpasswd`, `derivePassword`,
//! `encryptAES`/`decryptAES` and `randBytes`.

use base64::Engine as _;
use cbc::cipher::block_padding::NoPadding;
use cbc::cipher::{BlockModeDecrypt as _, BlockModeEncrypt as _, KeyIvInit as _};
use hmac::{KeyInit as _, Mac as _};

use super::sprig_strings::{MAX_BUILD, go_base64_error};
use super::{FResult, Param, Registry, func, i, s};
use crate::value::Value;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;
const BLOCK: usize = 16;

/// x/crypto/bcrypt's `DefaultCost`.
const BCRYPT_COST: u32 = 10;

/// Sprig's `bcrypt`: a `$2a$` hash (x/crypto's version), or Sprig's message on failure.
fn bcrypt_hash(password: &str) -> String {
    if password.len() > 72 {
        return "failed to encrypt string with bcrypt: bcrypt: password length exceeds 72 bytes"
            .to_owned();
    }
    match bcrypt::hash_with_result(password, BCRYPT_COST) {
        Ok(parts) => parts.format_for_version(bcrypt::Version::TwoA),
        Err(e) => format!("failed to encrypt string with bcrypt: {e}"),
    }
}

/// The 32-byte AES-256 key Sprig derives from a password: its bytes, zero padded or cut.
fn aes_key(password: &str) -> [u8; 32] {
    let mut key = [0u8; 32];
    let n = password.len().min(32);
    key[..n].copy_from_slice(&password.as_bytes()[..n]);
    key
}

fn encrypt_aes(password: &str, plaintext: &str) -> Result<String, String> {
    if plaintext.is_empty() {
        return Ok(String::new());
    }
    let mut content = plaintext.as_bytes().to_vec();
    let padding = BLOCK - content.len() % BLOCK;
    content.extend(std::iter::repeat_n(padding as u8, padding));
    let mut iv = [0u8; BLOCK];
    getrandom::fill(&mut iv).map_err(|e| e.to_string())?;
    let len = content.len();
    cbc::Encryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into())
        .encrypt_padded::<NoPadding>(&mut content, len)
        .map_err(|e| e.to_string())?;
    let mut out = iv.to_vec();
    out.extend_from_slice(&content);
    Ok(B64.encode(out))
}

/// Sprig's `decryptAES`; where Go would panic (short or ragged input, a padding byte larger
/// than the text) the message is the panic's.
fn decrypt_aes(password: &str, crypt64: &str) -> Result<String, String> {
    if crypt64.is_empty() {
        return Ok(String::new());
    }
    let crypt = B64.decode(crypt64).map_err(|e| go_base64_error(&e))?;
    if crypt.len() < BLOCK {
        return Err(format!(
            "runtime error: slice bounds out of range [:{BLOCK}] with capacity {}",
            crypt.len()
        ));
    }
    let (iv, body) = crypt.split_at(BLOCK);
    if !body.len().is_multiple_of(BLOCK) {
        return Err("crypto/cipher: input not full blocks".to_owned());
    }
    let mut buf = body.to_vec();
    let iv: [u8; BLOCK] = iv.try_into().map_err(|_| "bad IV".to_owned())?;
    cbc::Decryptor::<aes::Aes256>::new(&aes_key(password).into(), &iv.into())
        .decrypt_padded::<NoPadding>(&mut buf)
        .map_err(|e| e.to_string())?;
    let Some(&last) = buf.last() else {
        return Err("runtime error: index out of range [-1]".to_owned());
    };
    let keep = buf.len().checked_sub(usize::from(last)).ok_or_else(|| {
        format!(
            "runtime error: slice bounds out of range [:{}]",
            buf.len() as i64 - i64::from(last)
        )
    })?;
    Ok(String::from_utf8_lossy(&buf[..keep]).into_owned())
}

/// The character classes of the Master Password algorithm's templates.
fn template_chars(c: u8) -> &'static [u8] {
    match c {
        b'V' => b"AEIOU",
        b'C' => b"BCDFGHJKLMNPQRSTVWXYZ",
        b'v' => b"aeiou",
        b'c' => b"bcdfghjklmnpqrstvwxyz",
        b'A' => b"AEIOUBCDFGHJKLMNPQRSTVWXYZ",
        b'a' => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz",
        b'n' => b"0123456789",
        b'o' => b"@&%?,=[]_:-+*$#!'^~;()/.",
        _ => b"AEIOUaeiouBCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789!@#$%^&*()",
    }
}

fn password_templates(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "maximum" => &["anoxxxxxxxxxxxxxxxxx", "axxxxxxxxxxxxxxxxxno"],
        "long" => &[
            "CvcvnoCvcvCvcv",
            "CvcvCvcvnoCvcv",
            "CvcvCvcvCvcvno",
            "CvccnoCvcvCvcv",
            "CvccCvcvnoCvcv",
            "CvccCvcvCvcvno",
            "CvcvnoCvccCvcv",
            "CvcvCvccnoCvcv",
            "CvcvCvccCvcvno",
            "CvcvnoCvcvCvcc",
            "CvcvCvcvnoCvcc",
            "CvcvCvcvCvccno",
            "CvccnoCvccCvcv",
            "CvccCvccnoCvcv",
            "CvccCvccCvcvno",
            "CvcvnoCvccCvcc",
            "CvcvCvccnoCvcc",
            "CvcvCvccCvccno",
            "CvccnoCvcvCvcc",
            "CvccCvcvnoCvcc",
            "CvccCvcvCvccno",
        ],
        "medium" => &["CvcnoCvc", "CvcCvcno"],
        "short" => &["Cvcn"],
        "basic" => &["aaanaaan", "aannaaan", "aaannaaa"],
        "pin" => &["nnnn"],
        _ => return None,
    })
}

const MASTER_PASSWORD_SEED: &[u8] = b"com.lyndir.masterpassword";

/// Sprig's `derivePassword` (the Master Password algorithm: scrypt, then HMAC-SHA256).
fn derive_password(counter: u32, kind: &str, password: &str, user: &str, site: &str) -> String {
    let Some(templates) = password_templates(kind) else {
        return format!("cannot find password template {kind}");
    };
    let mut salt = MASTER_PASSWORD_SEED.to_vec();
    salt.extend_from_slice(&(user.len() as u32).to_be_bytes());
    salt.extend_from_slice(user.as_bytes());
    let mut key = [0u8; 64];
    let derived = scrypt::Params::new(15, 8, 2)
        .map_err(|e| e.to_string())
        .and_then(|p| {
            scrypt::scrypt(password.as_bytes(), &salt, &p, &mut key).map_err(|e| e.to_string())
        });
    if let Err(e) = derived {
        return format!("failed to derive password: {e}");
    }
    let mut message = MASTER_PASSWORD_SEED.to_vec();
    message.extend_from_slice(&(site.len() as u32).to_be_bytes());
    message.extend_from_slice(site.as_bytes());
    message.extend_from_slice(&counter.to_be_bytes());
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key) else {
        return "failed to derive password: bad key".to_owned();
    };
    mac.update(&message);
    let seed = mac.finalize().into_bytes();
    let template = templates[usize::from(seed[0]) % templates.len()];
    template
        .bytes()
        .enumerate()
        .map(|(i, c)| {
            let chars = template_chars(c);
            char::from(chars[usize::from(seed[i + 1]) % chars.len()])
        })
        .collect()
}

fn text(v: String) -> FResult {
    Ok(Value::String(v))
}

pub(super) fn register(m: &mut Registry) {
    m.insert(
        "bcrypt",
        func(&[Param::Str], None, |_, a| text(bcrypt_hash(s(&a[0])))),
    );
    m.insert(
        "htpasswd",
        func(&[Param::Str, Param::Str], None, |_, a| {
            let user = s(&a[0]);
            if user.contains(':') {
                return text(format!("invalid username: {user}"));
            }
            text(format!("{user}:{}", bcrypt_hash(s(&a[1]))))
        }),
    );
    m.insert(
        "derivePassword",
        func(
            &[Param::Int, Param::Str, Param::Str, Param::Str, Param::Str],
            None,
            |_, a| {
                let counter = u32::try_from(i(&a[0]))
                    .map_err(|_| format!("{} overflows uint32", i(&a[0])))?;
                text(derive_password(
                    counter,
                    s(&a[1]),
                    s(&a[2]),
                    s(&a[3]),
                    s(&a[4]),
                ))
            },
        ),
    );
    m.insert(
        "encryptAES",
        func(&[Param::Str, Param::Str], None, |_, a| {
            text(encrypt_aes(s(&a[0]), s(&a[1]))?)
        }),
    );
    m.insert(
        "decryptAES",
        func(&[Param::Str, Param::Str], None, |_, a| {
            text(decrypt_aes(s(&a[0]), s(&a[1]))?)
        }),
    );
    m.insert(
        "randBytes",
        func(&[Param::Int], None, |_, a| {
            let n = usize::try_from(i(&a[0]))
                .map_err(|_| "runtime error: makeslice: len out of range".to_owned())?;
            if n > MAX_BUILD {
                return Err(format!(
                    "randBytes: {n} bytes is over the limit of {MAX_BUILD}"
                ));
            }
            let mut buf = vec![0u8; n];
            getrandom::fill(&mut buf).map_err(|e| e.to_string())?;
            text(B64.encode(buf))
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aes_round_trips_and_matches_sprig_layout() {
        let enc = encrypt_aes("secretkey", "plaintext").expect("encrypt");
        let raw = B64.decode(&enc).expect("base64");
        // IV + one padded block.
        assert_eq!(raw.len(), 32);
        assert_eq!(
            decrypt_aes("secretkey", &enc).expect("decrypt"),
            "plaintext"
        );
        // A 16-byte text gets a whole block of padding, like Sprig's PKCS#7 loop.
        let enc = encrypt_aes("k", "0123456789abcdef").expect("encrypt");
        assert_eq!(B64.decode(&enc).expect("base64").len(), 48);
        assert_eq!(decrypt_aes("k", &enc).expect("decrypt"), "0123456789abcdef");
        assert_eq!(encrypt_aes("k", "").expect("empty"), "");
        assert_eq!(decrypt_aes("k", "").expect("empty"), "");
        assert_eq!(
            decrypt_aes("k", &B64.encode([0u8; 20])).err().as_deref(),
            Some("crypto/cipher: input not full blocks")
        );
        assert_eq!(
            decrypt_aes("k", "%%").err().as_deref(),
            Some("illegal base64 data at input byte 0")
        );
    }

    #[test]
    fn bcrypt_hashes_verify_and_use_go_version_tag() {
        let h = bcrypt_hash("password");
        assert!(h.starts_with("$2a$10$"), "{h}");
        assert!(bcrypt::verify("password", &h).expect("verify"));
        assert!(bcrypt_hash(&"x".repeat(73)).contains("exceeds 72 bytes"));
    }

    #[test]
    fn derive_password_matches_master_password_vectors() {
        // Values from Sprig's own tests (crypto_test.go, TestDerivePassword).
        assert_eq!(
            derive_password(1, "long", "password", "user", "example.com"),
            "ZedaFaxcZaso9*"
        );
        assert_eq!(
            derive_password(2, "long", "password", "user", "example.com"),
            "Fovi2@JifpTupx"
        );
        assert_eq!(
            derive_password(1, "maximum", "password", "user", "example.com"),
            "pf4zS1LjCg&LjhsZ7T2~"
        );
        assert_eq!(
            derive_password(1, "medium", "password", "user", "example.com"),
            "ZedJuz8$"
        );
        assert_eq!(
            derive_password(1, "basic", "password", "user", "example.com"),
            "pIS54PLs"
        );
        assert_eq!(
            derive_password(1, "short", "password", "user", "example.com"),
            "Zed5"
        );
        assert_eq!(
            derive_password(1, "pin", "password", "user", "example.com"),
            "6685"
        );
        assert_eq!(
            derive_password(1, "nope", "p", "u", "s"),
            "cannot find password template nope"
        );
    }
}
