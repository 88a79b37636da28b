//! Who may do what: the roles of EMCO's API and the one rule set every way in applies (REST,
//! gRPC, the dashboard's routes, Python over REST). An edge proves who a caller is (a token, a
//! certificate), says what the call touches as a [`Target`], and asks [`Principal::authorize`].
//!
//! - platform admin: everything;
//! - cluster admin: cluster providers and everything below them (clusters, their kubeconfigs,
//!   labels, kv-pairs, networks, CA certificates at the provider level, sync objects);
//! - project owner of P: everything below `/projects/P` (apps, intents, logical clouds, the
//!   lifecycle of its deployments), the project itself but not its creation;
//! - project viewer of P: reads below `/projects/P`, except credentials (a logical cloud's
//!   kubeconfig needs the owner).
//!
//! Shared reads (the list of projects, narrowed to those the caller sees, and the controller
//! registries) need any role; what no rule names needs the platform admin.

use std::fmt;
use std::str::FromStr;

use emco_core::Error;

/// One role of a [`Principal`], written `platform-admin`, `cluster-admin`,
/// `project-owner:NAME` or `project-viewer:NAME` in token claims and binding files.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Everything.
    PlatformAdmin,
    /// Cluster providers and their clusters.
    ClusterAdmin,
    /// Everything below one project.
    ProjectOwner(String),
    /// Reads below one project.
    ProjectViewer(String),
}

impl FromStr for Role {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let project = |name: &str| {
            if name.is_empty() {
                Err(Error::invalid(format!("role {s:?} names no project")))
            } else {
                Ok(name.to_owned())
            }
        };
        match s.split_once(':') {
            None if s == "platform-admin" => Ok(Self::PlatformAdmin),
            None if s == "cluster-admin" => Ok(Self::ClusterAdmin),
            Some(("project-owner", p)) => project(p).map(Self::ProjectOwner),
            Some(("project-viewer", p)) => project(p).map(Self::ProjectViewer),
            _ => Err(Error::invalid(format!(
                "unknown role {s:?}: one of platform-admin, cluster-admin, project-owner:NAME, \
                 project-viewer:NAME"
            ))),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PlatformAdmin => f.write_str("platform-admin"),
            Self::ClusterAdmin => f.write_str("cluster-admin"),
            Self::ProjectOwner(p) => write!(f, "project-owner:{p}"),
            Self::ProjectViewer(p) => write!(f, "project-viewer:{p}"),
        }
    }
}

/// Reading or changing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads that disclose no credentials.
    Read,
    /// Creates, replacements, deletions, lifecycle operations, and reads of credentials.
    Write,
}

/// The part of the API a call touches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Open to anyone, without credentials (health, the API description, the dashboard's page).
    Public,
    /// Read by any principal, changed by the platform admin (the list of projects, the
    /// controller registries).
    Shared,
    /// Cluster providers and everything below them.
    Clusters,
    /// Everything below one project.
    Project(String),
    /// What only the platform admin may touch.
    Platform,
}

/// What a call touches and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Where.
    pub scope: Scope,
    /// How.
    pub access: Access,
}

impl Target {
    /// A target.
    #[must_use]
    pub const fn new(scope: Scope, access: Access) -> Self {
        Self { scope, access }
    }
}

/// Who makes a call: a subject and its roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    subject: String,
    roles: Vec<Role>,
}

impl Principal {
    /// `subject` with `roles`.
    #[must_use]
    pub fn new(subject: impl Into<String>, roles: impl IntoIterator<Item = Role>) -> Self {
        let mut roles: Vec<Role> = roles.into_iter().collect();
        roles.sort();
        roles.dedup();
        Self {
            subject: subject.into(),
            roles,
        }
    }

    /// The caller of a server without credentials configured: anonymous, allowed everything.
    #[must_use]
    pub fn open() -> Self {
        Self::new("anonymous", [Role::PlatformAdmin])
    }

    /// Who.
    #[must_use]
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The roles, sorted.
    #[must_use]
    pub fn roles(&self) -> &[Role] {
        &self.roles
    }

    fn has(&self, role: &Role) -> bool {
        self.roles.contains(role)
    }

    /// Whether this principal sees every project (a platform admin).
    #[must_use]
    pub fn sees_all_projects(&self) -> bool {
        self.has(&Role::PlatformAdmin)
    }

    /// Whether this principal may read below project `name`.
    #[must_use]
    pub fn sees_project(&self, name: &str) -> bool {
        self.allows(&Target::new(Scope::Project(name.to_owned()), Access::Read))
    }

    /// Whether this principal sees the clusters (platform or cluster admin).
    #[must_use]
    pub fn sees_clusters(&self) -> bool {
        self.allows(&Target::new(Scope::Clusters, Access::Read))
    }

    /// Whether the roles allow `target`.
    #[must_use]
    pub fn allows(&self, target: &Target) -> bool {
        if self.has(&Role::PlatformAdmin) {
            return true;
        }
        match (&target.scope, target.access) {
            (Scope::Public, _) => true,
            (Scope::Shared, Access::Read) => true,
            (Scope::Shared | Scope::Platform, _) => false,
            (Scope::Clusters, _) => self.has(&Role::ClusterAdmin),
            (Scope::Project(p), access) => self.roles.iter().any(|r| match r {
                Role::ProjectOwner(q) => q == p,
                Role::ProjectViewer(q) => q == p && access == Access::Read,
                _ => false,
            }),
        }
    }

    /// [`Principal::allows`] as a result. The refusal names the caller and the part of the
    /// API, never whether the object asked for exists: the check comes before any lookup.
    ///
    /// # Errors
    /// PermissionDenied when the roles do not allow `target`.
    pub fn authorize(&self, target: &Target) -> Result<(), Error> {
        if self.allows(target) {
            return Ok(());
        }
        let verb = match target.access {
            Access::Read => "read",
            Access::Write => "change",
        };
        let what = match &target.scope {
            Scope::Public | Scope::Shared | Scope::Platform => {
                "the platform's settings and services".to_owned()
            }
            Scope::Clusters => "cluster providers and clusters".to_owned(),
            Scope::Project(p) => format!("project {p:?}"),
        };
        Err(Error::permission_denied(format!(
            "{:?} may not {verb} {what}",
            self.subject
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(scope: Scope, access: Access) -> Target {
        Target::new(scope, access)
    }

    #[test]
    fn roles_parse_and_print_the_same() {
        for text in [
            "platform-admin",
            "cluster-admin",
            "project-owner:p1",
            "project-viewer:a-b.c",
        ] {
            let role: Role = text.parse().unwrap();
            assert_eq!(role.to_string(), text);
        }
        for bad in [
            "admin",
            "project-owner:",
            "project-owner",
            "cluster-admin:x",
            "",
        ] {
            assert!(bad.parse::<Role>().is_err(), "{bad}");
        }
    }

    #[test]
    fn each_role_reaches_its_scope_only() {
        let p1 = || Scope::Project("p1".to_owned());
        let p2 = || Scope::Project("p2".to_owned());
        let owner = Principal::new("o", [Role::ProjectOwner("p1".to_owned())]);
        let viewer = Principal::new("v", [Role::ProjectViewer("p1".to_owned())]);
        let clusters = Principal::new("c", [Role::ClusterAdmin]);
        let nobody = Principal::new("n", []);
        let admin = Principal::new("a", [Role::PlatformAdmin]);
        let cases = [
            (&owner, p1(), Access::Write, true),
            (&owner, p2(), Access::Read, false),
            (&owner, Scope::Clusters, Access::Read, false),
            (&owner, Scope::Shared, Access::Read, true),
            (&owner, Scope::Shared, Access::Write, false),
            (&viewer, p1(), Access::Read, true),
            (&viewer, p1(), Access::Write, false),
            (&clusters, Scope::Clusters, Access::Write, true),
            (&clusters, p1(), Access::Read, false),
            (&clusters, Scope::Platform, Access::Read, false),
            (&nobody, Scope::Public, Access::Read, true),
            (&nobody, Scope::Shared, Access::Read, true),
            (&nobody, p1(), Access::Read, false),
            (&admin, Scope::Platform, Access::Write, true),
            (&admin, p2(), Access::Write, true),
        ];
        for (who, scope, access, allowed) in cases {
            let t = target(scope, access);
            assert_eq!(who.allows(&t), allowed, "{who:?} {t:?}");
            assert_eq!(who.authorize(&t).is_ok(), allowed);
        }
        let e = owner.authorize(&target(p2(), Access::Read)).unwrap_err();
        assert_eq!(e.kind(), emco_core::ErrorKind::PermissionDenied);
        assert_eq!(e.message(), "\"o\" may not read project \"p2\"");
        assert!(Principal::open().sees_all_projects());
        assert!(owner.sees_project("p1") && !owner.sees_project("p2"));
    }
}
