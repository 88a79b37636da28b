//! Small helpers with no better home: timestamps, uids, query strings.

use std::time::SystemTime;

/// The current time as an RFC 3339 timestamp with second precision, as Kubernetes writes them.
pub(crate) fn now_rfc3339() -> String {
    emco_core::time::rfc3339(SystemTime::now())
}

/// A random version-4 UUID in its canonical text form.
pub(crate) fn new_uid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A random lowercase alphanumeric suffix, as used for `generateName`.
pub(crate) fn random_suffix(len: usize) -> String {
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..len)
        .map(|_| char::from(CHARS[rand::random_range(0..CHARS.len())]))
        .collect()
}

/// Decodes `%XX` escapes and `+` (as space) of a query-string component.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Splits a query string into decoded `(key, value)` pairs.
pub(crate) fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(p), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_queries() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+(a)&limit=5&watch"));
        assert_eq!(q[0], ("labelSelector".into(), "app=web,tier in (a)".into()));
        assert_eq!(q[1], ("limit".into(), "5".into()));
        assert_eq!(q[2], ("watch".into(), String::new()));
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[test]
    fn uids_are_v4() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uid());
    }
}
