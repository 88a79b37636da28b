//! Request bodies in `application/vnd.kubernetes.protobuf`, turned into the JSON the rest of
//! the server works on.
//!
//! kubectl's typed client (`kubectl create namespace|configmap|secret|serviceaccount|
//! rolebinding|...`) sends protobuf whatever discovery says, and does not retry in JSON after a
//! 415. The body is the `k8s\0` magic followed by a `runtime.Unknown` envelope: field 1 the type
//! meta (apiVersion 1, kind 2), field 2 the object's own encoding. Decoding an object needs its
//! schema; the kinds kubectl's imperative commands create with plain fields are described
//! below, and any other kind is answered 415 as before. Fields not described are skipped.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// How one field of a message is encoded and shown in JSON.
#[derive(Clone, Copy)]
enum Kind {
    /// A string; empty means unset (Go's `omitempty`).
    Str,
    /// A varint integer; zero means unset.
    Int,
    /// A boolean (pointer fields in Go: sent only when set).
    Bool,
    /// A `metav1.Time` message (seconds 1, nanos 2), shown as RFC 3339.
    Time,
    /// A nested message.
    Msg(&'static [Field]),
    /// A repeated nested message.
    MsgList(&'static [Field]),
    /// A repeated string.
    StrList,
    /// A `map<string, string>`.
    StrMap,
    /// A `map<string, bytes>`, shown base64-encoded as in JSON.
    BytesMap,
}

/// Field number, JSON name, encoding.
type Field = (u64, &'static str, Kind);

const TYPE_META: &[Field] = &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)];

const OWNER_REFERENCE: &[Field] = &[
    (1, "kind", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "controller", Kind::Bool),
    (7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[Field] = &[
    (1, "name", Kind::Str),
    (2, "generateName", Kind::Str),
    (3, "namespace", Kind::Str),
    (5, "uid", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "generation", Kind::Int),
    (8, "creationTimestamp", Kind::Time),
    (9, "deletionTimestamp", Kind::Time),
    (10, "deletionGracePeriodSeconds", Kind::Int),
    (11, "labels", Kind::StrMap),
    (12, "annotations", Kind::StrMap),
    (13, "ownerReferences", Kind::MsgList(OWNER_REFERENCE)),
    (14, "finalizers", Kind::StrList),
];

const OBJECT_REFERENCE: &[Field] = &[
    (1, "kind", Kind::Str),
    (2, "namespace", Kind::Str),
    (3, "name", Kind::Str),
    (4, "uid", Kind::Str),
    (5, "apiVersion", Kind::Str),
    (6, "resourceVersion", Kind::Str),
    (7, "fieldPath", Kind::Str),
];

const NAMESPACE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "spec", Kind::Msg(&[(1, "finalizers", Kind::StrList)])),
];

const CONFIG_MAP: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::StrMap),
    (3, "binaryData", Kind::BytesMap),
    (4, "immutable", Kind::Bool),
];

const SECRET: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "data", Kind::BytesMap),
    (3, "type", Kind::Str),
    (4, "stringData", Kind::StrMap),
    (5, "immutable", Kind::Bool),
];

const SERVICE_ACCOUNT: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "secrets", Kind::MsgList(OBJECT_REFERENCE)),
    (
        3,
        "imagePullSecrets",
        Kind::MsgList(&[(1, "name", Kind::Str)]),
    ),
    (4, "automountServiceAccountToken", Kind::Bool),
];

const POLICY_RULE: &[Field] = &[
    (1, "verbs", Kind::StrList),
    (2, "apiGroups", Kind::StrList),
    (3, "resources", Kind::StrList),
    (4, "resourceNames", Kind::StrList),
    (5, "nonResourceURLs", Kind::StrList),
];

const ROLE: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (2, "rules", Kind::MsgList(POLICY_RULE)),
];

const ROLE_BINDING: &[Field] = &[
    (1, "metadata", Kind::Msg(OBJECT_META)),
    (
        2,
        "subjects",
        Kind::MsgList(&[
            (1, "kind", Kind::Str),
            (2, "apiGroup", Kind::Str),
            (3, "name", Kind::Str),
            (4, "namespace", Kind::Str),
        ]),
    ),
    (
        3,
        "roleRef",
        Kind::Msg(&[
            (1, "apiGroup", Kind::Str),
            (2, "kind", Kind::Str),
            (3, "name", Kind::Str),
        ]),
    ),
];

/// The schema of a kind this module decodes.
fn schema(api_version: &str, kind: &str) -> Option<&'static [Field]> {
    Some(match (api_version, kind) {
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        _ => return None,
    })
}

/// Why a body could not be decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DecodeError {
    /// Well-formed, but of a kind this server has no protobuf schema for.
    UnknownKind(String),
    /// Not a valid Kubernetes protobuf body.
    Malformed(String),
}

/// Decodes a Kubernetes protobuf body into the object's JSON form.
pub(crate) fn decode(body: &[u8]) -> Result<Value, DecodeError> {
    let envelope = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| DecodeError::Malformed("missing the k8s protobuf prefix".to_owned()))?;
    let mut type_meta = Value::Null;
    let mut raw: &[u8] = &[];
    for item in Fields::new(envelope) {
        match item.map_err(DecodeError::Malformed)? {
            (1, Wire::Bytes(b)) => type_meta = message(b, TYPE_META)?,
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let api_version = type_meta["apiVersion"].as_str().unwrap_or_default();
    let kind = type_meta["kind"].as_str().unwrap_or_default();
    let fields = schema(api_version, kind)
        .ok_or_else(|| DecodeError::UnknownKind(format!("{api_version}, Kind={kind}")))?;
    let mut obj = message(raw, fields)?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

/// One field's value on the wire.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The (number, value) pairs of a message.
struct Fields<'a> {
    buf: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or_else(|| "truncated varint".to_owned())?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".to_owned())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err("truncated field".to_owned());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn next_field(&mut self) -> Result<(u64, Wire<'a>), String> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| "field too long")?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            t => return Err(format!("unsupported wire type {t}")),
        };
        Ok((key >> 3, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let item = self.next_field();
        if item.is_err() {
            // Nothing after a malformed field can be trusted.
            self.buf = &[];
        }
        Some(item)
    }
}

fn malformed(field: &str) -> DecodeError {
    DecodeError::Malformed(format!("field {field} has the wrong wire type"))
}

fn text(b: &[u8], field: &str) -> Result<String, DecodeError> {
    String::from_utf8(b.to_vec())
        .map_err(|_| DecodeError::Malformed(format!("field {field} is not UTF-8")))
}

/// A map entry: key 1, value 2.
fn entry<'a>(b: &'a [u8], field: &str) -> Result<(String, &'a [u8]), DecodeError> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for item in Fields::new(b) {
        match item.map_err(DecodeError::Malformed)? {
            (1, Wire::Bytes(k)) => key = text(k, field)?,
            (2, Wire::Bytes(v)) => value = v,
            _ => {}
        }
    }
    Ok((key, value))
}

/// Decodes a message by its schema; unset fields are left out, as Go's JSON encoding does.
fn message(buf: &[u8], schema: &[Field]) -> Result<Value, DecodeError> {
    let mut out = Map::new();
    for item in Fields::new(buf) {
        let (number, wire) = item.map_err(DecodeError::Malformed)?;
        let Some(&(_, name, kind)) = schema.iter().find(|f| f.0 == number) else {
            continue;
        };
        let value = match (kind, wire) {
            (Kind::Str, Wire::Bytes([])) => continue,
            (Kind::Str, Wire::Bytes(b)) => json!(text(b, name)?),
            (Kind::Int, Wire::Varint(0)) => continue,
            // int64 fields travel as the two's complement bits.
            (Kind::Int, Wire::Varint(v)) => json!(i64::from_ne_bytes(v.to_ne_bytes())),
            (Kind::Bool, Wire::Varint(v)) => json!(v != 0),
            (Kind::Time, Wire::Bytes(b)) => {
                let t = message(b, &[(1, "seconds", Kind::Int)])?;
                match t["seconds"].as_i64().and_then(|s| u64::try_from(s).ok()) {
                    Some(s) => json!(emco_core::time::rfc3339(
                        std::time::UNIX_EPOCH + std::time::Duration::from_secs(s)
                    )),
                    None => continue,
                }
            }
            (Kind::Msg(fields), Wire::Bytes(b)) => message(b, fields)?,
            (Kind::MsgList(fields), Wire::Bytes(b)) => {
                push(&mut out, name, message(b, fields)?);
                continue;
            }
            (Kind::StrList, Wire::Bytes(b)) => {
                push(&mut out, name, json!(text(b, name)?));
                continue;
            }
            (Kind::StrMap, Wire::Bytes(b)) => {
                let (k, v) = entry(b, name)?;
                insert(&mut out, name, k, json!(text(v, name)?));
                continue;
            }
            (Kind::BytesMap, Wire::Bytes(b)) => {
                let (k, v) = entry(b, name)?;
                let v = base64::engine::general_purpose::STANDARD.encode(v);
                insert(&mut out, name, k, json!(v));
                continue;
            }
            _ => return Err(malformed(name)),
        };
        out.insert(name.to_owned(), value);
    }
    Ok(Value::Object(out))
}

fn push(out: &mut Map<String, Value>, name: &str, v: Value) {
    if let Value::Array(a) = out.entry(name).or_insert_with(|| json!([])) {
        a.push(v);
    }
}

fn insert(out: &mut Map<String, Value>, name: &str, key: String, v: Value) {
    if let Value::Object(m) = out.entry(name).or_insert_with(|| json!({})) {
        m.insert(key, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn bytes_field(n: u64, b: &[u8], out: &mut Vec<u8>) {
        varint(n << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn entry_bytes(k: &str, v: &[u8]) -> Vec<u8> {
        let mut e = Vec::new();
        bytes_field(1, k.as_bytes(), &mut e);
        bytes_field(2, v, &mut e);
        e
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes_field(1, api_version.as_bytes(), &mut tm);
        bytes_field(2, kind.as_bytes(), &mut tm);
        let mut out = MAGIC.to_vec();
        bytes_field(1, &tm, &mut out);
        bytes_field(2, raw, &mut out);
        bytes_field(3, b"", &mut out);
        out
    }

    #[test]
    fn decodes_a_secret() {
        let mut meta = Vec::new();
        bytes_field(1, b"s", &mut meta);
        bytes_field(2, b"", &mut meta);
        varint(7 << 3, &mut meta);
        varint(0, &mut meta);
        bytes_field(8, b"", &mut meta);
        bytes_field(11, &entry_bytes("app", b"web"), &mut meta);
        bytes_field(14, b"f1", &mut meta);
        bytes_field(14, b"f2", &mut meta);
        let mut raw = Vec::new();
        bytes_field(1, &meta, &mut raw);
        bytes_field(2, &entry_bytes("k", b"\x00\xff"), &mut raw);
        bytes_field(3, b"Opaque", &mut raw);
        varint(5 << 3, &mut raw);
        varint(1, &mut raw);
        bytes_field(99, b"ignored", &mut raw);
        let obj = decode(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(
            obj,
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "immutable": true,
                "metadata": {"name": "s", "labels": {"app": "web"}, "finalizers": ["f1", "f2"]},
                "data": {"k": "AP8="}})
        );
    }

    #[test]
    fn rejects_unknown_kinds_and_garbage() {
        assert_eq!(
            decode(&envelope("apps/v1", "Deployment", b"")),
            Err(DecodeError::UnknownKind(
                "apps/v1, Kind=Deployment".to_owned()
            ))
        );
        assert!(matches!(decode(b"{}"), Err(DecodeError::Malformed(_))));
        let mut truncated = envelope("v1", "Secret", b"");
        truncated.extend_from_slice(&[0x12, 0x05, 0x0a]);
        assert!(matches!(decode(&truncated), Err(DecodeError::Malformed(_))));
        let wrong_wire = envelope("v1", "Secret", &[0x18, 0x01]);
        assert!(matches!(
            decode(&wrong_wire),
            Err(DecodeError::Malformed(_))
        ));
    }
}
