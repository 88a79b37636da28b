//! The generic typed CRUD of EMCO objects over a [`ResourceStore`]: one object type's
//! create/get/list/put/delete under parents, with EMCO's database-layer checks and texts
//! ([`Wording`]) and hooks for the rules beyond parent/child integrity. Services build on it; the
//! controller SDK's REST kit serves a collection as EMCO's five routes.

mod wording;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use emco_core::model::Named;
use emco_core::{Error, ErrorKind, Result, Validate};
use serde::Serialize;
use serde::de::DeserializeOwned;

use emco_store::{Filter, ResourceKey, ResourceStore};

pub use wording::{
    EmptyList, HAS_CHILDREN, NAME_MISMATCH, PARENT_MISSING, PutStatus, REMOVE_MISSING, Wording,
};

/// What a body type needs to be stored by a [`Collection`] (and served by the SDK's routes).
pub trait Object: Serialize + DeserializeOwned + Validate + Named + Send + Sync + 'static {}
impl<T: Serialize + DeserializeOwned + Validate + Named + Send + Sync + 'static> Object for T {}

/// Checks and side effects around the writes of a [`Collection`], for rules beyond parent/child
/// integrity (a referenced object must exist, a deployment intent group must be in a state
/// that allows the change, ...). Every method defaults to doing nothing.
#[async_trait]
pub trait Hook<T: Send + Sync>: Send + Sync + 'static {
    /// Normalizes a valid object before it is checked and stored (fills defaults); what it
    /// leaves is what is stored and echoed.
    fn prepare(&self, value: &mut T) {
        let _ = value;
    }

    /// Before `value` is created or replaced at `key`; an error aborts the write.
    async fn before_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        value: &T,
    ) -> Result<()> {
        let _ = (store, key, value);
        Ok(())
    }

    /// After `value` was written at `key` (`created` tells a create from a replace).
    async fn after_write(
        &self,
        store: &dyn ResourceStore,
        key: &ResourceKey,
        value: &T,
        created: bool,
    ) -> Result<()> {
        let _ = (store, key, value, created);
        Ok(())
    }

    /// Before the object at `key` is deleted; an error aborts the delete.
    async fn before_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let _ = (store, key);
        Ok(())
    }

    /// After the object at `key` was deleted.
    async fn after_delete(&self, store: &dyn ResourceStore, key: &ResourceKey) -> Result<()> {
        let _ = (store, key);
        Ok(())
    }
}

/// The hook that does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHook;

impl<T: Send + Sync + 'static> Hook<T> for NoHook {}

/// The objects of type `T` that live under parents as children of type `kind`: the typed API
/// that services, the REST routes and the Python bindings all use.
pub struct Collection<T> {
    store: Arc<dyn ResourceStore>,
    kind: String,
    hook: Arc<dyn Hook<T>>,
    wording: Arc<Wording>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Collection<T> {
    fn clone(&self) -> Self {
        Self {
            store: Arc::clone(&self.store),
            kind: self.kind.clone(),
            hook: Arc::clone(&self.hook),
            wording: Arc::clone(&self.wording),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Collection<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collection")
            .field("kind", &self.kind)
            .field("type", &std::any::type_name::<T>())
            .finish_non_exhaustive()
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<serde_json::Value> {
    serde_json::to_value(value)
        .map_err(|e| Error::internal("cannot serialize an object").with_source(e))
}

/// A copy of `value` through its JSON form, so body types need not be `Clone`.
fn copy_of<T: Serialize + DeserializeOwned>(value: &T) -> Result<T> {
    serde_json::from_value(to_value(value)?)
        .map_err(|e| Error::internal("an object does not survive its own JSON form").with_source(e))
}

/// A stored object read with Go's rules, so objects EMCO's Go services stored (with `null` for
/// empty maps and lists) read too.
fn from_value<T: DeserializeOwned>(key: &ResourceKey, value: serde_json::Value) -> Result<T> {
    emco_go::json::from_value(&value)
        .map_err(|e| Error::internal(format!("stored object {key} is malformed")).with_source(e))
}

impl<T: Object> Collection<T> {
    /// The objects of type `kind` in `store`, with no extra checks.
    pub fn new(store: Arc<dyn ResourceStore>, kind: impl Into<String>) -> Self {
        let kind = kind.into();
        Self {
            store,
            wording: Arc::new(Wording::named(&kind)),
            kind,
            hook: Arc::new(NoHook),
            _t: PhantomData,
        }
    }

    /// Answers with `wording` (EMCO's texts and codes for this type); the default is
    /// [`Wording::named`] with the kind.
    #[must_use]
    pub fn with_wording(mut self, wording: Wording) -> Self {
        self.wording = Arc::new(wording);
        self
    }

    /// How this type's answers are worded.
    #[must_use]
    pub fn wording(&self) -> &Wording {
        &self.wording
    }

    /// Runs `hook` around every write.
    #[must_use]
    pub fn with_hook(mut self, hook: impl Hook<T>) -> Self {
        self.hook = Arc::new(hook);
        self
    }

    /// Like [`Self::with_hook`] for a shared hook.
    #[must_use]
    pub fn with_shared_hook(mut self, hook: Arc<dyn Hook<T>>) -> Self {
        self.hook = hook;
        self
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<dyn ResourceStore> {
        &self.store
    }

    /// The child type of the objects.
    #[must_use]
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The key of the object `name` under `parent`.
    #[must_use]
    pub fn key(&self, parent: &ResourceKey, name: &str) -> ResourceKey {
        parent.child(self.kind.as_str(), name)
    }

    /// Creates `value` under `parent`; returns the stored object.
    ///
    /// # Errors
    /// InvalidArgument when `value` is invalid; NotFound when `parent` is missing;
    /// AlreadyExists for a duplicate; the hook's errors.
    pub async fn create(&self, parent: &ResourceKey, value: &T) -> Result<T> {
        value.validate()?;
        let mut value = copy_of(value)?;
        self.hook.prepare(&mut value);
        let value = &value;
        let key = self.key(parent, value.name());
        self.hook
            .before_write(self.store.as_ref(), &key, value)
            .await?;
        self.store
            .create(&key, &to_value(value)?)
            .await
            .map_err(|e| self.wording.write_error(e))?;
        self.hook
            .after_write(self.store.as_ref(), &key, value, true)
            .await?;
        copy_of(value)
    }

    /// The object `name` under `parent`.
    ///
    /// # Errors
    /// NotFound when it does not exist.
    pub async fn get(&self, parent: &ResourceKey, name: &str) -> Result<T> {
        let key = self.key(parent, name);
        match self.store.get(&key).await? {
            Some(v) => from_value(&key, v),
            None => Err(self.wording.missing()),
        }
    }

    /// The check of [`Wording::ancestor_first`], if the wording has one.
    ///
    /// # Errors
    /// NotFound with the wording's text when the ancestor is missing.
    pub async fn check_ancestor(&self, parent: &ResourceKey) -> Result<()> {
        let Some((up, text)) = &self.wording.ancestor_first else {
            return Ok(());
        };
        match ancestor(parent, *up) {
            Some(k) if self.store.get(&k).await?.is_none() => Err(Error::not_found(text.clone())),
            _ => Ok(()),
        }
    }

    /// The objects under `parent` that pass `filters`, in creation order.
    ///
    /// # Errors
    /// NotFound when `parent` (or an ancestor the wording names) does not exist.
    pub async fn list(&self, parent: &ResourceKey, filters: &[Filter]) -> Result<Vec<T>> {
        if !self.list_parent_exists(parent).await? {
            return Ok(Vec::new());
        }
        self.store
            .list(parent, &self.kind, filters)
            .await?
            .into_iter()
            .map(|(k, v)| from_value(&k, v))
            .collect()
    }

    /// The objects under `parent`, each with its children in `below` (read in one go:
    /// [`ResourceStore::list_with_children`]); the parent checks are [`Self::list`]'s.
    ///
    /// # Errors
    /// As [`Self::list`].
    pub async fn list_with_children<C: Object>(
        &self,
        parent: &ResourceKey,
        below: &Collection<C>,
    ) -> Result<Vec<(T, Vec<C>)>> {
        if !self.list_parent_exists(parent).await? {
            return Ok(Vec::new());
        }
        self.store
            .list_with_children(parent, &self.kind, &below.kind)
            .await?
            .into_iter()
            .map(|((k, v), children)| {
                let children = children
                    .into_iter()
                    .map(|(k, v)| from_value(&k, v))
                    .collect::<Result<Vec<C>>>()?;
                Ok((from_value(&k, v)?, children))
            })
            .collect()
    }

    /// The checks of a list under `parent` ([`Wording::list_checks`]): whether the parent
    /// exists (a missing one is an empty list where the wording checks ancestors only).
    async fn list_parent_exists(&self, parent: &ResourceKey) -> Result<bool> {
        match &self.wording.list_checks {
            None => {
                if !parent.is_root() && self.store.get(parent).await?.is_none() {
                    return Err(Error::not_found(format!("{parent} not found")));
                }
            }
            Some(checks) => {
                for (up, text) in checks {
                    let Some(at) = ancestor(parent, *up) else {
                        continue;
                    };
                    if self.store.get(&at).await?.is_none() {
                        return Err(Error::not_found(text.clone()));
                    }
                }
                if !parent.is_root() && self.store.get(parent).await?.is_none() {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Creates or replaces the object `name` under `parent`; returns whether it was created.
    ///
    /// # Errors
    /// As [`Self::put_stored`].
    pub async fn put(&self, parent: &ResourceKey, name: &str, value: &T) -> Result<bool> {
        self.put_stored(parent, name, value)
            .await
            .map(|(_, created)| created)
    }

    /// Creates or replaces the object `name` under `parent`; returns the stored object (after
    /// [`Hook::prepare`]) and whether it was created.
    ///
    /// # Errors
    /// InvalidArgument when `value` is invalid or its name is not `name`; NotFound when
    /// `parent` is missing (or the object, when the wording has [`Wording::put_missing`]); the
    /// hook's errors.
    pub async fn put_stored(
        &self,
        parent: &ResourceKey,
        name: &str,
        value: &T,
    ) -> Result<(T, bool)> {
        if let Some(text) = &self.wording.put_missing
            && self.store.get(&self.key(parent, name)).await?.is_none()
        {
            return Err(Error::not_found(text.clone()));
        }
        // EMCO's PUT handlers refuse a body naming another object before checking the rest.
        if !value.name().is_empty() {
            self.wording.check_put_name(value.name(), name)?;
        }
        value.validate()?;
        let mut value = copy_of(value)?;
        self.hook.prepare(&mut value);
        let value = &value;
        self.wording.check_put_name(value.name(), name)?;
        let key = self.key(parent, name);
        self.hook
            .before_write(self.store.as_ref(), &key, value)
            .await?;
        let doc = to_value(value)?;
        let created = if self.store.get(&key).await?.is_some() {
            self.store.update(&key, &doc).await?;
            false
        } else {
            match self.store.create(&key, &doc).await {
                Ok(()) => true,
                // Created concurrently since we looked: replace it.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    self.store.update(&key, &doc).await?;
                    false
                }
                Err(e) => return Err(self.wording.write_error(e)),
            }
        };
        self.hook
            .after_write(self.store.as_ref(), &key, value, created)
            .await?;
        Ok((copy_of(value)?, created))
    }

    /// Deletes the object `name` under `parent`.
    ///
    /// # Errors
    /// NotFound when it does not exist; Conflict while it has children; the hook's errors.
    pub async fn delete(&self, parent: &ResourceKey, name: &str) -> Result<()> {
        let key = self.key(parent, name);
        if self.store.get(&key).await?.is_none() {
            return Err(Error::not_found(self.wording.delete_missing.clone()));
        }
        self.hook.before_delete(self.store.as_ref(), &key).await?;
        self.store
            .delete(&key)
            .await
            .map_err(|e| self.wording.delete_error(e))?;
        self.hook.after_delete(self.store.as_ref(), &key).await
    }
}

/// The key `up` levels above `key` (0 is `key` itself); `None` past the root or at it.
fn ancestor(key: &ResourceKey, up: usize) -> Option<ResourceKey> {
    let mut at = Some(key.clone());
    for _ in 0..up {
        at = at.and_then(|k| k.parent());
    }
    at.filter(|k| !k.is_root())
}
