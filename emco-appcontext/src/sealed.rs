//! Secrets at rest: the blobs that hold credentials are sealed with AES-256-GCM before any
//! backend stores them, so neither the embedded file, nor MongoDB, nor a backup of either holds a
//! kubeconfig, a logical-cloud user's key or a CA's private key in the clear.
//!
//! [`SealedStore`] wraps a [`ResourceStore`] and seals exactly the secret blobs
//! ([`is_secret`]): a cluster's kubeconfig, a logical cloud's per-cluster kubeconfig and pending
//! user key, a CA certificate's enrollment keys. Documents, charts and profiles pass through.
//!
//! - A sealed blob is `MAGIC`, the key id, a NUL, a fresh 96-bit nonce, then the ciphertext and
//!   tag. The blob's place (object key and blob name) is the associated data, so a sealed blob
//!   copied under another object does not open.
//! - A [`Keyring`] holds the current key (what everything is sealed with) and older ones (what
//!   may still be opened). A blob read under an older key, or written before sealing was on, is
//!   sealed again with the current key as it is read (compare-and-set on the version read, so a
//!   concurrent write wins): rotating is adding a key in front and letting reads, or
//!   [`SealedStore::reseal`], move every secret over.
//! - A blob sealed with a key the keyring lacks is refused with the key's id, never answered as
//!   garbage.
//! - GitOps credentials live in documents, not blobs: the kv-pairs of a cluster sync object that
//!   hold a token, password or secret (and a URL with user info) are sealed one by one, each
//!   value replaced by [`FIELD_PREFIX`] and its sealed form in base64, and opened as they are
//!   read ([`is_secret_field`]).

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use bytes::Bytes;
use emco_core::lifecycle::dig::StateInfo;
use emco_core::{Error, ErrorKind, Found, Result};
use futures::TryStreamExt as _;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use serde_json::Value;

use crate::keys;
use emco_store::resource::{
    BlobStream, BlobVersion, Expect, Family, Filter, PutMode, ResourceKey, ResourceStore,
};

/// What every sealed blob starts with.
const MAGIC: &[u8] = b"\0emco-sealed-v1\0";

/// The largest secret blob sealed (a kubeconfig or a few keys are kilobytes).
const MAX_SECRET: usize = 16 * 1024 * 1024;

/// Whether blob `name` of `key` holds credentials and is sealed.
#[must_use]
pub fn is_secret(key: &ResourceKey, name: &str) -> bool {
    match key.kind() {
        Some(keys::CLUSTER) => name == keys::FILE_BLOB,
        Some(keys::CLUSTER_REFERENCE) => {
            name == keys::LOGICAL_CLOUD_KUBECONFIG_BLOB || name == keys::PENDING_KEY_BLOB
        }
        Some(keys::CA_CERT_ENROLLMENT) => name.starts_with(keys::CA_KEYS_BLOB_PREFIX),
        _ => false,
    }
}

/// What a sealed kv-pair value starts with; base64 of a sealed blob follows.
pub const FIELD_PREFIX: &str = "emco-sealed-v1:";

/// Whether kv-pair `name` with `value` of a cluster sync object holds credentials: a token,
/// password or secret by its name, or a URL with user info (`https://user:token@host/...`).
#[must_use]
pub fn is_secret_field(name: &str, value: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["token", "password", "secret"]
        .iter()
        .any(|w| name.contains(w))
        || (name == "url" && value.contains('@'))
}

/// `value` (a cluster sync object) with its secret kv-pairs masked, for answers that list
/// objects.
pub fn mask_secret_fields(value: &mut Value) {
    let masked = kv_strings(value, |name, s| {
        if is_secret_field(name, s) {
            "********".clone_into(s);
        }
        Ok(())
    });
    debug_assert!(masked.is_ok(), "masking cannot fail");
}

/// Calls `f` with the name and string value of every kv-pair of `value`'s `spec.kv`.
fn kv_strings(value: &mut Value, mut f: impl FnMut(&str, &mut String) -> Result<()>) -> Result<()> {
    let Some(kv) = value.pointer_mut("/spec/kv").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    for entry in kv.iter_mut().filter_map(Value::as_object_mut) {
        for (name, v) in entry.iter_mut() {
            if let Value::String(s) = v {
                f(name, s)?;
            }
        }
    }
    Ok(())
}

/// Whether `data` is a sealed blob.
#[must_use]
pub fn is_sealed(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

/// The id of the key `data` is sealed with; `None` when it is not sealed.
fn sealed_with(data: &[u8]) -> Option<String> {
    split(data).map(|(id, _)| id)
}

/// A sealed blob's key id and what follows it (nonce, ciphertext, tag); `None` when `data` is
/// not sealed. A blob cut before the id's end has an empty rest.
fn split(data: &[u8]) -> Option<(String, &[u8])> {
    let rest = data.strip_prefix(MAGIC)?;
    let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
    let id = String::from_utf8_lossy(&rest[..end]).into_owned();
    Some((id, rest.get(end + 1..).unwrap_or_default()))
}

/// The keys secrets are sealed with: the current one first, then older ones still opened.
pub struct Keyring {
    keys: Vec<(String, LessSafeKey)>,
    rng: SystemRandom,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("Keyring").field("ids", &ids).finish()
    }
}

/// A secret read back: its text and whether it should be sealed again (older key, or never
/// sealed).
struct Opened {
    plain: Vec<u8>,
    stale: bool,
}

impl Keyring {
    /// Parses a keyring: one key per line, `ID:BASE64` of 32 random bytes (`openssl rand
    /// -base64 32`), the current key first; blank lines and `#` comments are skipped. Commas
    /// separate keys too, for an environment variable.
    ///
    /// # Errors
    /// `InvalidArgument` for no key, a malformed line, a key that is not 32 bytes or an id used
    /// twice; the message never holds key material.
    pub fn parse(text: &str) -> Result<Self> {
        let mut keys: Vec<(String, LessSafeKey)> = Vec::new();
        for (n, entry) in text
            .split(['\n', ','])
            .map(str::trim)
            .enumerate()
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        {
            let bad = |why: &str| Error::invalid(format!("secrets key {}: {why}", n + 1));
            let (id, b64) = entry
                .split_once(':')
                .ok_or_else(|| bad("expected ID:BASE64"))?;
            let id = id.trim();
            if id.is_empty() || id.contains('\0') {
                return Err(bad("the id must not be empty"));
            }
            if keys.iter().any(|(k, _)| k == id) {
                return Err(bad(&format!("the id {id:?} is used twice")));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|_| bad("the key is not base64"))?;
            if bytes.len() != 32 {
                return Err(bad(&format!(
                    "the key must be 32 bytes (AES-256), not {}",
                    bytes.len()
                )));
            }
            let key = UnboundKey::new(&AES_256_GCM, &bytes).map_err(|_| bad("unusable key"))?;
            keys.push((id.to_owned(), LessSafeKey::new(key)));
        }
        if keys.is_empty() {
            return Err(Error::invalid("the secrets keyring has no key"));
        }
        Ok(Self {
            keys,
            rng: SystemRandom::new(),
        })
    }

    /// Reads a keyring file (see [`Self::parse`]).
    ///
    /// # Errors
    /// `InvalidArgument` when the file cannot be read or parsed.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::invalid(format!(
                "cannot read the secrets keyring {}",
                path.display()
            ))
            .with_source(e)
        })?;
        Self::parse(&text)
    }

    /// The id of the key secrets are sealed with.
    #[must_use]
    pub fn current(&self) -> &str {
        &self.keys[0].0
    }

    /// Seals `plain` for the place `aad` with the current key.
    ///
    /// # Errors
    /// `Internal` when no nonce can be drawn or sealing fails.
    pub fn seal(&self, aad: &[u8], plain: &[u8]) -> Result<Vec<u8>> {
        let (id, key) = &self.keys[0];
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| Error::internal("no randomness for a nonce"))?;
        let mut body = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut body,
        )
        .map_err(|_| Error::internal("sealing a secret failed"))?;
        let mut out = Vec::with_capacity(MAGIC.len() + id.len() + 1 + NONCE_LEN + body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(id.as_bytes());
        out.push(0);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Opens a sealed blob of place `aad`; data that is not sealed is answered as is, marked
    /// stale like one sealed with an older key.
    ///
    /// # Errors
    /// `FailedPrecondition` for a key the keyring lacks, or a blob that does not open (damaged,
    /// or moved from another place).
    fn open(&self, aad: &[u8], data: Vec<u8>) -> Result<Opened> {
        let Some((id, rest)) = split(&data) else {
            return Ok(Opened {
                plain: data,
                stale: true,
            });
        };
        let damaged =
            || Error::failed_precondition("a sealed secret is damaged or not in its place");
        let (position, key) = self
            .keys
            .iter()
            .enumerate()
            .find(|(_, (k, _))| *k == id)
            .map(|(i, (_, key))| (i, key))
            .ok_or_else(|| {
                Error::failed_precondition(format!(
                    "a secret is sealed with key {id:?}, which the secrets keyring lacks"
                ))
            })?;
        if rest.len() < NONCE_LEN {
            return Err(damaged());
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| damaged())?;
        let mut body = sealed.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(aad), &mut body)
            .map_err(|_| damaged())?;
        Ok(Opened {
            plain: plain.to_vec(),
            stale: position != 0,
        })
    }
}

/// A [`ResourceStore`] that seals the secret blobs of the store it wraps (see the module doc).
#[derive(Debug, Clone)]
pub struct SealedStore {
    inner: Arc<dyn ResourceStore>,
    keyring: Option<Arc<Keyring>>,
}

impl SealedStore {
    /// Seals the secrets of `inner` with `keyring`; without one they are written in the
    /// clear, and a sealed one is refused (naming its key) instead of being answered as its
    /// ciphertext.
    #[must_use]
    pub fn new(inner: Arc<dyn ResourceStore>, keyring: Option<Arc<Keyring>>) -> Self {
        Self { inner, keyring }
    }

    /// Reads every secret blob under the cluster providers and projects, sealing again what an
    /// older key (or none) sealed; answers how many were sealed again. What a rotation runs
    /// once the new key is in front.
    ///
    /// # Errors
    /// The first secret that cannot be read or written.
    pub async fn reseal(&self) -> Result<usize> {
        if self.keyring.is_none() {
            return Ok(0);
        }
        let mut places: Vec<(ResourceKey, String)> = Vec::new();
        let root = ResourceKey::root();
        for (provider, _) in self.inner.list(&root, keys::CLUSTER_PROVIDER, &[]).await? {
            for (cluster, _) in self.inner.list(&provider, keys::CLUSTER, &[]).await? {
                places.push((cluster, keys::FILE_BLOB.to_owned()));
            }
            places.extend(self.ca_key_places(&provider).await?);
        }
        for (project, _) in self.inner.list(&root, keys::PROJECT, &[]).await? {
            for (lc, _) in self.inner.list(&project, keys::LOGICAL_CLOUD, &[]).await? {
                for (reference, _) in self.inner.list(&lc, keys::CLUSTER_REFERENCE, &[]).await? {
                    for blob in [keys::LOGICAL_CLOUD_KUBECONFIG_BLOB, keys::PENDING_KEY_BLOB] {
                        places.push((reference.clone(), blob.to_owned()));
                    }
                }
            }
            places.extend(self.ca_key_places(&project).await?);
        }
        let mut resealed = self.reseal_fields().await?;
        for (key, name) in places {
            if let Some((_, _, true)) = self.read_secret(&key, &name).await.found()? {
                resealed += 1;
            }
        }
        Ok(resealed)
    }

    /// The key blobs of the CA certificates' enrollment records under `owner`: one per context
    /// the record's history names.
    async fn ca_key_places(&self, owner: &ResourceKey) -> Result<Vec<(ResourceKey, String)>> {
        let mut out = Vec::new();
        for (cert, _) in self.inner.list(owner, keys::CA_CERT, &[]).await? {
            for (record, _) in self
                .inner
                .list(&cert, keys::CA_CERT_ENROLLMENT, &[])
                .await?
            {
                let Some(state) =
                    emco_store::resource::read_blob(self.inner.as_ref(), &record, keys::STATE_BLOB)
                        .await?
                else {
                    continue;
                };
                let state: StateInfo = serde_json::from_slice(&state).map_err(|e| {
                    Error::internal("an unreadable lifecycle record").with_source(e)
                })?;
                let mut contexts: Vec<String> = state
                    .actions
                    .into_iter()
                    .map(|a| a.instance)
                    .filter(|i| !i.is_empty())
                    .collect();
                contexts.sort();
                contexts.dedup();
                for ctx in contexts {
                    out.push((
                        record.clone(),
                        format!("{}{ctx}", keys::CA_KEYS_BLOB_PREFIX),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// `value` of `key` with its secret kv-pairs sealed (a cluster sync object's; other
    /// documents pass through).
    fn seal_fields<'v>(
        &self,
        key: &ResourceKey,
        value: &'v Value,
    ) -> Result<std::borrow::Cow<'v, Value>> {
        let Some(keyring) = &self.keyring else {
            return Ok(std::borrow::Cow::Borrowed(value));
        };
        if key.kind() != Some(keys::CLUSTER_SYNC_OBJECT) {
            return Ok(std::borrow::Cow::Borrowed(value));
        }
        let mut sealed = value.clone();
        kv_strings(&mut sealed, |name, s| {
            if is_secret_field(name, s) {
                let data = keyring.seal(&Self::place(key, &format!("kv:{name}"))?, s.as_bytes())?;
                *s = format!(
                    "{FIELD_PREFIX}{}",
                    base64::engine::general_purpose::STANDARD.encode(data)
                );
            }
            Ok(())
        })?;
        Ok(std::borrow::Cow::Owned(sealed))
    }

    /// `value` of `key` with its sealed kv-pairs opened.
    ///
    /// # Errors
    /// `FailedPrecondition` for a value sealed with a key the keyring lacks (or with no
    /// keyring), or damaged.
    fn open_fields(&self, key: &ResourceKey, mut value: Value) -> Result<Value> {
        if key.kind() != Some(keys::CLUSTER_SYNC_OBJECT) {
            return Ok(value);
        }
        kv_strings(&mut value, |name, s| {
            let Some(b64) = s.strip_prefix(FIELD_PREFIX) else {
                return Ok(());
            };
            let data = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|_| Error::failed_precondition("a sealed secret is damaged"))?;
            let Some(keyring) = &self.keyring else {
                return Err(Error::failed_precondition(format!(
                    "a secret is sealed with key {:?}, and no secrets keys are configured",
                    sealed_with(&data).unwrap_or_default()
                )));
            };
            let opened = keyring.open(&Self::place(key, &format!("kv:{name}"))?, data)?;
            *s = String::from_utf8(opened.plain)
                .map_err(|_| Error::failed_precondition("a sealed secret is damaged"))?;
            Ok(())
        })?;
        Ok(value)
    }

    /// Every cluster sync object written again, so its secret kv-pairs are sealed with the
    /// current key; how many were.
    async fn reseal_fields(&self) -> Result<usize> {
        let mut n = 0;
        let root = ResourceKey::root();
        for (provider, _) in self.inner.list(&root, keys::CLUSTER_PROVIDER, &[]).await? {
            for (key, raw) in self
                .inner
                .list(&provider, keys::CLUSTER_SYNC_OBJECT, &[])
                .await?
            {
                let mut stale = false;
                let mut probe = raw.clone();
                kv_strings(&mut probe, |name, s| {
                    stale |= match s.strip_prefix(FIELD_PREFIX) {
                        None => is_secret_field(name, s),
                        Some(b64) => base64::engine::general_purpose::STANDARD
                            .decode(b64)
                            .ok()
                            .and_then(|d| sealed_with(&d))
                            .is_some_and(|id| {
                                self.keyring.as_ref().is_some_and(|k| id != k.current())
                            }),
                    };
                    Ok(())
                })?;
                if stale {
                    let plain = self.open_fields(&key, raw)?;
                    self.inner
                        .put(
                            &key,
                            self.seal_fields(&key, &plain)?.as_ref(),
                            PutMode::Update,
                        )
                        .await?;
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    /// The place of blob `name` of `key`, the associated data of its seal.
    fn place(key: &ResourceKey, name: &str) -> Result<Vec<u8>> {
        Ok(format!("{}#{name}", key.encode()?).into_bytes())
    }

    /// A secret blob opened, with its version and whether it was sealed again.
    ///
    /// # Errors
    /// The backend's (`NotFound` for no blob), or the keyring's.
    async fn read_secret(
        &self,
        key: &ResourceKey,
        name: &str,
    ) -> Result<(BlobVersion, Vec<u8>, bool)> {
        // Read again when replaced mid-read; the size cap is the writes'.
        let (data, version) =
            emco_store::resource::read_whole_blob(self.inner.as_ref(), key, name).await?;
        let place = Self::place(key, name)?;
        let Some(keyring) = &self.keyring else {
            if let Some(id) = sealed_with(&data) {
                return Err(Error::failed_precondition(format!(
                    "a secret is sealed with key {id:?}, and no secrets keys are configured"
                )));
            }
            return Ok((version, data, false));
        };
        let opened = keyring.open(&place, data)?;
        if !opened.stale {
            return Ok((version, opened.plain, false));
        }
        let sealed = keyring.seal(&place, &opened.plain)?;
        // A write since the read wins; it was sealed with the current key as it was written.
        match self
            .inner
            .put_blob_if(key, name, once(sealed), Expect::Version(version))
            .await
        {
            Ok((_, now)) => Ok((now, opened.plain, true)),
            Err(e) if e.kind() == ErrorKind::Conflict => Ok((version, opened.plain, false)),
            Err(e) => Err(e),
        }
    }
}

fn once(data: Vec<u8>) -> BlobStream {
    Box::pin(futures::stream::iter([Ok(Bytes::from(data))]))
}

/// A secret blob whole, refusing one past [`MAX_SECRET`].
async fn collect(mut stream: BlobStream) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = stream.try_next().await? {
        if out.len() + chunk.len() > MAX_SECRET {
            return Err(Error::invalid(format!(
                "a credential file is larger than {MAX_SECRET} bytes"
            )));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[async_trait]
impl ResourceStore for SealedStore {
    async fn put(&self, key: &ResourceKey, value: &Value, mode: PutMode) -> Result<()> {
        self.inner
            .put(key, self.seal_fields(key, value)?.as_ref(), mode)
            .await
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Value>> {
        match self.inner.get(key).await? {
            Some(v) => self.open_fields(key, v).map(Some),
            None => Ok(None),
        }
    }

    async fn list(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        filters: &[Filter],
    ) -> Result<Vec<(ResourceKey, Value)>> {
        self.inner
            .list(parent, child_type, filters)
            .await?
            .into_iter()
            .map(|(k, v)| {
                let v = self.open_fields(&k, v)?;
                Ok((k, v))
            })
            .collect()
    }

    async fn list_with_children(
        &self,
        parent: &ResourceKey,
        child_type: &str,
        grandchild_type: &str,
    ) -> Result<Vec<Family>> {
        let open = |(k, v): (ResourceKey, Value)| -> Result<(ResourceKey, Value)> {
            let v = self.open_fields(&k, v)?;
            Ok((k, v))
        };
        self.inner
            .list_with_children(parent, child_type, grandchild_type)
            .await?
            .into_iter()
            .map(|(child, grandchildren)| {
                Ok((
                    open(child)?,
                    grandchildren.into_iter().map(open).collect::<Result<_>>()?,
                ))
            })
            .collect()
    }

    async fn delete(&self, key: &ResourceKey) -> Result<()> {
        self.inner.delete(key).await
    }

    async fn put_blob_if(
        &self,
        key: &ResourceKey,
        name: &str,
        data: BlobStream,
        expect: Expect,
    ) -> Result<(u64, BlobVersion)> {
        if !is_secret(key, name) {
            return self.inner.put_blob_if(key, name, data, expect).await;
        }
        let Some(keyring) = &self.keyring else {
            return self.inner.put_blob_if(key, name, data, expect).await;
        };
        let plain = collect(data).await?;
        let sealed = keyring.seal(&Self::place(key, name)?, &plain)?;
        let (_, version) = self
            .inner
            .put_blob_if(key, name, once(sealed), expect)
            .await?;
        Ok((plain.len() as u64, version))
    }

    async fn get_blob_versioned(
        &self,
        key: &ResourceKey,
        name: &str,
    ) -> Result<(BlobVersion, BlobStream)> {
        if !is_secret(key, name) {
            return self.inner.get_blob_versioned(key, name).await;
        }
        let (version, plain, _) = self.read_secret(key, name).await?;
        Ok((version, once(plain)))
    }

    async fn delete_blob(&self, key: &ResourceKey, name: &str) -> Result<bool> {
        self.inner.delete_blob(key, name).await
    }

    async fn health(&self) -> Result<()> {
        self.inner.health().await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use emco_store::InMemoryResourceStore;
    use emco_store::resource::read_blob;

    const KUBECONFIG: &[u8] = b"apiVersion: v1\nusers:\n- user: {token: s3cr3t-token}\n";

    fn keyring(ids: &[(&str, u8)]) -> Arc<Keyring> {
        let text: Vec<String> = ids
            .iter()
            .map(|(id, byte)| {
                format!(
                    "{id}:{}",
                    base64::engine::general_purpose::STANDARD.encode([*byte; 32])
                )
            })
            .collect();
        Arc::new(Keyring::parse(&text.join("\n")).unwrap())
    }

    /// A memory store with clusters p/c1 and p/c2 and an app.
    async fn store() -> Arc<dyn ResourceStore> {
        let store: Arc<dyn ResourceStore> = Arc::new(InMemoryResourceStore::new());
        store
            .create(&keys::cluster_provider("p"), &json!({}))
            .await
            .unwrap();
        for c in ["c1", "c2"] {
            store
                .create(&keys::cluster("p", c), &json!({}))
                .await
                .unwrap();
        }
        let ca = keys::composite_app("proj", "ca", "v1");
        store
            .create(&keys::project("proj"), &json!({}))
            .await
            .unwrap();
        store.create(&ca, &json!({})).await.unwrap();
        store
            .create(&ca.child(keys::APP, "web"), &json!({}))
            .await
            .unwrap();
        store
    }

    async fn raw(store: &Arc<dyn ResourceStore>, key: &ResourceKey, name: &str) -> Vec<u8> {
        read_blob(store.as_ref(), key, name).await.unwrap().unwrap()
    }

    #[tokio::test]
    async fn credentials_are_sealed_and_other_blobs_pass_through() {
        let inner = store().await;
        let sealed = SealedStore::new(Arc::clone(&inner), Some(keyring(&[("k1", 1)])));
        let c1 = keys::cluster("p", "c1");
        sealed
            .put_blob(&c1, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        let stored = raw(&inner, &c1, keys::FILE_BLOB).await;
        assert!(is_sealed(&stored));
        assert!(!stored.windows(12).any(|w| w == b"s3cr3t-token"));
        let read = read_blob(&sealed, &c1, keys::FILE_BLOB)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(read, KUBECONFIG);
        // A chart is no secret: stored as given.
        let app = keys::composite_app("proj", "ca", "v1").child(keys::APP, "web");
        sealed
            .put_blob(&app, keys::FILE_BLOB, once(b"chart".to_vec()))
            .await
            .unwrap();
        assert_eq!(raw(&inner, &app, keys::FILE_BLOB).await, b"chart");
        // The compare-and-set of the backend still holds.
        let absent = sealed
            .put_blob_if(&c1, keys::FILE_BLOB, once(b"x".to_vec()), Expect::Absent)
            .await;
        assert_eq!(absent.unwrap_err().kind(), ErrorKind::Conflict);
        assert!(matches!(
            sealed
                .get_blob(&c1, "other")
                .await
                .map(drop)
                .unwrap_err()
                .kind(),
            ErrorKind::NotFound
        ));
    }

    #[tokio::test]
    async fn a_sealed_blob_opens_only_in_its_place() {
        let inner = store().await;
        let sealed = SealedStore::new(Arc::clone(&inner), Some(keyring(&[("k1", 1)])));
        let (c1, c2) = (keys::cluster("p", "c1"), keys::cluster("p", "c2"));
        sealed
            .put_blob(&c1, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        let copied = raw(&inner, &c1, keys::FILE_BLOB).await;
        inner
            .put_blob(&c2, keys::FILE_BLOB, once(copied))
            .await
            .unwrap();
        let e = read_blob(&sealed, &c2, keys::FILE_BLOB).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
        assert!(e.to_string().contains("not in its place"), "{e}");
    }

    #[tokio::test]
    async fn rotation_and_first_sealing_reseal_with_the_current_key() {
        let inner = store().await;
        let (c1, c2) = (keys::cluster("p", "c1"), keys::cluster("p", "c2"));
        SealedStore::new(Arc::clone(&inner), Some(keyring(&[("old", 1)])))
            .put_blob(&c1, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        // Written before sealing was on.
        inner
            .put_blob(&c2, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        let rotated =
            SealedStore::new(Arc::clone(&inner), Some(keyring(&[("new", 2), ("old", 1)])));
        assert_eq!(rotated.reseal().await.unwrap(), 2);
        for c in [&c1, &c2] {
            let stored = raw(&inner, c, keys::FILE_BLOB).await;
            assert!(stored.starts_with(&[MAGIC, b"new\0"].concat()));
            assert_eq!(
                read_blob(&rotated, c, keys::FILE_BLOB)
                    .await
                    .unwrap()
                    .unwrap(),
                KUBECONFIG
            );
        }
        assert_eq!(rotated.reseal().await.unwrap(), 0);
        // Without the old key, what only it sealed is refused by name; the new opens.
        SealedStore::new(Arc::clone(&inner), Some(keyring(&[("old", 1)])))
            .put_blob(&c1, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        let new_only = SealedStore::new(Arc::clone(&inner), Some(keyring(&[("new", 2)])));
        let e = read_blob(&new_only, &c1, keys::FILE_BLOB)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
        assert!(e.to_string().contains("\"old\""), "{e}");
        assert!(read_blob(&new_only, &c2, keys::FILE_BLOB).await.is_ok());
    }

    #[tokio::test]
    async fn without_keys_secrets_stay_clear_and_sealed_ones_are_refused_by_key() {
        let inner = store().await;
        let (c1, c2) = (keys::cluster("p", "c1"), keys::cluster("p", "c2"));
        SealedStore::new(Arc::clone(&inner), Some(keyring(&[("k1", 1)])))
            .put_blob(&c1, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        let clear = SealedStore::new(Arc::clone(&inner), None);
        clear
            .put_blob(&c2, keys::FILE_BLOB, once(KUBECONFIG.to_vec()))
            .await
            .unwrap();
        assert_eq!(raw(&inner, &c2, keys::FILE_BLOB).await, KUBECONFIG);
        assert_eq!(
            read_blob(&clear, &c2, keys::FILE_BLOB)
                .await
                .unwrap()
                .unwrap(),
            KUBECONFIG
        );
        let e = read_blob(&clear, &c1, keys::FILE_BLOB).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition);
        assert!(e.to_string().contains("\"k1\""), "{e}");
        assert_eq!(clear.reseal().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn gitops_tokens_in_cluster_sync_objects_are_sealed_field_by_field() {
        let backend = store().await;
        let sealed = SealedStore::new(Arc::clone(&backend), Some(keyring(&[("k1", 1)])));
        let key = keys::cluster_provider("p").child(keys::CLUSTER_SYNC_OBJECT, "gitrepo");
        let doc = json!({"metadata": {"name": "gitrepo"}, "spec": {"kv": [
            {"gitType": "github"}, {"userName": "octo"}, {"gitToken": "ghp_s3cr3t"},
            {"repoName": "fleet"}, {"branch": "main"},
            {"url": "https://octo:ghp_s3cr3t@example.com/fleet.git"}]}});
        sealed.create(&key, &doc).await.unwrap();
        // Sealed in the backend: the token nowhere, the rest as written.
        let raw = backend.get(&key).await.unwrap().unwrap();
        assert!(!raw.to_string().contains("s3cr3t"), "{raw}");
        assert_eq!(raw["spec"]["kv"][1]["userName"], "octo");
        let token = raw["spec"]["kv"][2]["gitToken"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(token.starts_with(FIELD_PREFIX), "{token}");
        // Read back whole, one by one and in lists.
        assert_eq!(sealed.get(&key).await.unwrap().unwrap(), doc);
        let listed = sealed
            .list(&keys::cluster_provider("p"), keys::CLUSTER_SYNC_OBJECT, &[])
            .await
            .unwrap();
        assert_eq!(listed[0].1, doc);
        // Bound to its place: the sealed token under another name does not open.
        let mut moved = raw.clone();
        moved["spec"]["kv"][3] = json!({"password": token});
        backend.put(&key, &moved, PutMode::Update).await.unwrap();
        let e = sealed.get(&key).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::FailedPrecondition, "{e}");
        backend.put(&key, &raw, PutMode::Update).await.unwrap();
        // Without keys: refused by key id; other documents unaffected.
        let clear = SealedStore::new(Arc::clone(&backend), None);
        let e = clear.get(&key).await.unwrap_err();
        assert!(e.to_string().contains("\"k1\""), "{e}");
        assert!(
            clear
                .get(&keys::cluster("p", "c1"))
                .await
                .unwrap()
                .is_some()
        );
        // Rotation: a new key in front seals the fields again at reseal.
        let rotated =
            SealedStore::new(Arc::clone(&backend), Some(keyring(&[("k2", 2), ("k1", 1)])));
        assert!(rotated.reseal().await.unwrap() >= 1);
        let after = backend.get(&key).await.unwrap().unwrap();
        let b64 = after["spec"]["kv"][2]["gitToken"].as_str().unwrap();
        let data = base64::engine::general_purpose::STANDARD
            .decode(b64.strip_prefix(FIELD_PREFIX).unwrap())
            .unwrap();
        assert_eq!(sealed_with(&data).as_deref(), Some("k2"));
        let only_new = SealedStore::new(Arc::clone(&backend), Some(keyring(&[("k2", 2)])));
        assert_eq!(only_new.get(&key).await.unwrap().unwrap(), doc);
        assert_eq!(rotated.reseal().await.unwrap(), 0);
    }

    #[test]
    fn keyrings_refuse_bad_keys_without_showing_them() {
        let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![7u8; n]);
        for (text, says) in [
            (String::new(), "no key"),
            ("# only a comment\n".to_owned(), "no key"),
            (b64(32), "ID:BASE64"),
            (format!(":{}", b64(32)), "id must not be empty"),
            ("k1:not base64!".to_owned(), "not base64"),
            (format!("k1:{}", b64(16)), "32 bytes"),
            (format!("k1:{}\nk1:{}", b64(32), b64(32)), "used twice"),
        ] {
            let e = Keyring::parse(&text).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.to_string().contains(says), "{text:?}: {e}");
            assert!(!e.to_string().contains(&b64(32)), "{e}");
        }
        let ring = Keyring::parse(&format!("# keys\nnew:{}, old:{}\n", b64(32), b64(32))).unwrap();
        assert_eq!(ring.current(), "new");
        assert!(!format!("{ring:?}").contains(&b64(32)));
    }
}
