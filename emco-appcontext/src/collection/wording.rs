//! How an EMCO Go service answers for one object type: its error texts, the status of a PUT and
//! the JSON of an empty list.
//!
//! EMCO's handlers do not word errors per request: a module error is matched by substring
//! against the service's error table (`src/orchestrator/pkg/infra/apierror/apierror.go`, then
//! the service's `api/apierrors.go`) and the table's message is sent. So the texts are fixed per
//! type (and sometimes another type's, where a shorter entry matches first: a composite app that
//! is not found reads `App not found`), and the database layer's messages are the same for every
//! type. EMCO's clients compare these texts, so a [`Collection`](super::Collection) carries its
//! type's wording.

use std::borrow::Cow;

use emco_core::{Error, ErrorKind};

/// 409 for a create or PUT under a parent that does not exist (EMCO's `db Insert parent
/// resource not found`).
pub const PARENT_MISSING: &str = "Cannot perform requested operation. Parent resource not found";
/// 404 for a DELETE of an object that does not exist (EMCO's `db Remove resource not found`).
pub const REMOVE_MISSING: &str = "The requested resource not found";
/// 409 for a DELETE of an object that still has children (EMCO's `db Remove parent child
/// constraint`).
pub const HAS_CHILDREN: &str = "Cannot delete parent without deleting child references first";

/// 400 for a PUT whose body names another object than its URL (the orchestrator's and clm's).
pub const NAME_MISMATCH: &str = "Mismatched name in PUT request";

/// The status of a PUT, which differs between EMCO's handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PutStatus {
    /// 201 when the PUT created the object, 200 when it replaced one.
    #[default]
    CreatedOrOk,
    /// 201 either way.
    Created,
    /// 200 either way.
    Ok,
}

/// What a list answers when it is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmptyList {
    /// `null`: a Go nil slice (`var list []T`), as most EMCO handlers build their lists.
    #[default]
    Null,
    /// `[]`: a slice made with `make` (clm's lists, app dependencies).
    Array,
    /// A 400 with this text (dcm's cluster references: `No Cluster References associated`).
    Refused(&'static str),
}

/// The wording of one object type. [`Wording::new`] gives EMCO's database-layer defaults around
/// the type's own not-found and already-exists texts; the `with_*` methods set what differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wording {
    /// 404 for a GET of an object that does not exist.
    pub not_found: Cow<'static, str>,
    /// 409 for a create of an object that exists.
    pub exists: Cow<'static, str>,
    /// 404 for a DELETE of an object that does not exist.
    pub delete_missing: Cow<'static, str>,
    /// For a create under a missing parent: `None` is EMCO's database answer (409,
    /// [`PARENT_MISSING`]); `Some(text)` a 404 with `text`, where the handler looks the parent
    /// up first.
    pub create_parent_missing: Option<Cow<'static, str>>,
    /// The ancestors a list checks, in order: each a number of levels above the list's parent
    /// (0 is the parent itself) and the 404 text when it is missing. `None` checks the parent
    /// with a generic text; an empty list checks nothing (the list is empty).
    pub list_checks: Option<Vec<(usize, Cow<'static, str>)>>,
    /// The status of a PUT.
    pub put: PutStatus,
    /// The JSON of an empty list.
    pub empty_list: EmptyList,
    /// A PUT whose body names another object than its URL: `(conflict, text)`, a 409 when
    /// `conflict` (dcm), else a 400.
    pub name_mismatch: (bool, Cow<'static, str>),
    /// Before a create or PUT reads its body, the ancestor this many levels above the parent
    /// (0 is the parent) must exist, else a 404 with the text (dtc looks its deployment intent
    /// group up first).
    pub ancestor_first: Option<(usize, Cow<'static, str>)>,
    /// A PUT only replaces: a PUT of a missing object is a 404 with this text (dcm's logical
    /// cloud `putHandler` looks the cloud up first).
    pub put_missing: Option<Cow<'static, str>>,
}

impl Wording {
    /// A type whose GET of a missing object answers `not_found` and whose duplicate create
    /// answers `exists`; the rest as EMCO's database layer answers.
    pub fn new(
        not_found: impl Into<Cow<'static, str>>,
        exists: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            not_found: not_found.into(),
            exists: exists.into(),
            delete_missing: Cow::Borrowed(REMOVE_MISSING),
            create_parent_missing: None,
            list_checks: None,
            put: PutStatus::default(),
            empty_list: EmptyList::default(),
            name_mismatch: (false, Cow::Borrowed(NAME_MISMATCH)),
            ancestor_first: None,
            put_missing: None,
        }
    }

    /// EMCO's convention for a type named `kind` in messages (`genericK8sIntent not found`).
    #[must_use]
    pub fn named(kind: &str) -> Self {
        Self::new(
            format!("{kind} not found"),
            format!("{kind} already exists"),
        )
    }

    /// A DELETE of a missing object answers `text` (handlers that look the object up first).
    #[must_use]
    pub fn with_delete_missing(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.delete_missing = text.into();
        self
    }

    /// A create under a missing parent is a 404 with `text`.
    #[must_use]
    pub fn with_create_parent_missing(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.create_parent_missing = Some(text.into());
        self
    }

    /// The ancestors a list checks (see [`Wording::list_checks`]).
    #[must_use]
    pub fn with_list_checks(mut self, checks: &[(usize, &'static str)]) -> Self {
        self.list_checks = Some(
            checks
                .iter()
                .map(|(up, text)| (*up, Cow::Borrowed(*text)))
                .collect(),
        );
        self
    }

    /// The status of a PUT.
    #[must_use]
    pub fn with_put(mut self, put: PutStatus) -> Self {
        self.put = put;
        self
    }

    /// The JSON of an empty list.
    #[must_use]
    pub fn with_empty_list(mut self, empty: EmptyList) -> Self {
        self.empty_list = empty;
        self
    }

    /// A PUT naming another object than its URL is a 400 with `text`.
    #[must_use]
    pub fn with_name_mismatch(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.name_mismatch = (false, text.into());
        self
    }

    /// Creates and PUTs look the ancestor `up` levels above the parent up before reading the
    /// body; a missing one is a 404 with `text`.
    #[must_use]
    pub fn with_ancestor_first(mut self, up: usize, text: impl Into<Cow<'static, str>>) -> Self {
        self.ancestor_first = Some((up, text.into()));
        self
    }

    /// A PUT of a missing object is a 404 with `text` instead of a create.
    #[must_use]
    pub fn with_put_missing(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.put_missing = Some(text.into());
        self
    }

    /// A PUT naming another object than its URL is a 409 with `text` (dcm's way).
    #[must_use]
    pub fn with_name_conflict(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.name_mismatch = (true, text.into());
        self
    }
}

impl Wording {
    /// Refuses a PUT whose body names `name` while its URL names `url_name`.
    ///
    /// # Errors
    /// The type's mismatch error when the names differ.
    pub fn check_put_name(&self, name: &str, url_name: &str) -> Result<(), Error> {
        if name == url_name {
            return Ok(());
        }
        let (conflict, text) = &self.name_mismatch;
        Err(if *conflict {
            Error::conflict(text.clone())
        } else {
            Error::invalid(text.clone())
        })
    }

    /// The error of a GET of a missing object.
    #[must_use]
    pub fn missing(&self) -> Error {
        Error::not_found(self.not_found.clone())
    }

    /// A store's error of a create or replace, worded as EMCO's database layer words it: a
    /// duplicate, or a missing parent.
    #[must_use]
    pub fn write_error(&self, e: Error) -> Error {
        match e.kind() {
            ErrorKind::AlreadyExists => Error::already_exists(self.exists.clone()),
            ErrorKind::NotFound => match &self.create_parent_missing {
                Some(text) => Error::not_found(text.clone()),
                None => Error::conflict(PARENT_MISSING),
            },
            _ => e,
        }
    }

    /// A store's error of a delete: a missing object, or one with children.
    #[must_use]
    pub fn delete_error(&self, e: Error) -> Error {
        match e.kind() {
            ErrorKind::NotFound => Error::not_found(self.delete_missing.clone()),
            ErrorKind::Conflict => Error::conflict(HAS_CHILDREN).with_source(e),
            _ => e,
        }
    }

    /// Whether a PUT that `created` the object or replaced it answers 201 Created (else 200).
    #[must_use]
    pub fn put_answers_created(&self, created: bool) -> bool {
        match self.put {
            PutStatus::Created => true,
            PutStatus::Ok => false,
            PutStatus::CreatedOrOk => created,
        }
    }
}
