//! The GitOps connector: commits manifests into a git repository that an agent running in the
//! cluster (Flux, Argo CD) applies.
//!
//! Each resource is one file, laid out as EMCO's GitOps plugins do:
//! `clusters/<cluster>/context/<ctx>/app/<app>/<name>+<Kind>.yaml`. Every [`Connector::apply`] or
//! [`Connector::delete`] of a batch makes one commit (none if nothing changed) and pushes it.
//!
//! The connector keeps a local clone in its work directory and drives the `git` command line
//! through `tokio::process`, so every transport and credential helper git supports works. Before
//! each batch the clone is reset to the remote branch; when a push is rejected because another
//! writer pushed first, the connector fetches, replays the batch on the new head (a rebase of
//! its one commit, done by rewriting the files, which cannot conflict) and pushes again.
//!
//! Git only records desired state: [`Connector::get`] returns the manifest as committed, and
//! [`Connector::observes_live_state`] is `false`.
//!
//! ## Readiness
//!
//! A committed resource is not deployed yet, let alone ready: the agent in the cluster applies
//! it some time later, or never. As in EMCO, what the cluster reports comes back through git:
//! EMCO's monitor in the cluster writes a `ResourceBundleState` per app under
//! `clusters/<cluster>/status/<ctx>/app/<app>/` (any `.yaml` file there), whose
//! `status.resourceStatuses[]` entries name each deployed object (`group`, `version`, `kind`,
//! `name`, `namespace`) and carry it as observed in `res` (its JSON, base64-encoded as Go does
//! with bytes; a plain object is accepted too). [`Connector::observe`] fetches the repository
//! and answers from there, so readiness is judged on the live object exactly as for the
//! Kubernetes connector:
//!
//! - no status written back for the app: [`Observation::Unknown`] for every resource (the
//!   engine then reports the resource not present and the cluster's readiness `Unknown`);
//! - a status without the resource: [`Observation::Absent`];
//! - the resource listed: [`Observation::Present`] with the object reported.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use emco_core::{Error, Result};
use serde_json::Value;
use tokio::process::Command;
use tokio::sync::Mutex;

use super::{Batch, BatchError, Connector, Observation, Propagation, ResourceId, Scope, Warnings};

/// How to reach the repository of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOpsConfig {
    /// The cluster (`provider+cluster`), the directory under `clusters/`.
    pub cluster: String,
    /// The remote URL or path, as `git clone` takes it.
    pub remote: String,
    /// The branch the cluster's agent syncs from.
    pub branch: String,
    /// Where the local clone lives. One connector per work directory.
    pub work_dir: PathBuf,
    /// The commit author name.
    pub author_name: String,
    /// The commit author email.
    pub author_email: String,
    /// How often a rejected push is retried on top of the new remote head before giving up.
    pub push_attempts: u32,
    /// How long one network operation (fetch, push, ls-remote) may take.
    pub network_timeout: Duration,
}

impl GitOpsConfig {
    /// A configuration with branch `main`, author `emco <emco@localhost>`, 10 push attempts and a
    /// 60 s network timeout.
    pub fn new(
        cluster: impl Into<String>,
        remote: impl Into<String>,
        work_dir: impl Into<PathBuf>,
    ) -> Self {
        Self {
            cluster: cluster.into(),
            remote: remote.into(),
            branch: "main".to_owned(),
            work_dir: work_dir.into(),
            author_name: "emco".to_owned(),
            author_email: "emco@localhost".to_owned(),
            push_attempts: 10,
            network_timeout: Duration::from_secs(60),
        }
    }

    /// Sets the branch.
    #[must_use]
    pub fn with_branch(mut self, branch: impl Into<String>) -> Self {
        self.branch = branch.into();
        self
    }

    /// Sets the commit author.
    #[must_use]
    pub fn with_author(mut self, name: impl Into<String>, email: impl Into<String>) -> Self {
        self.author_name = name.into();
        self.author_email = email.into();
        self
    }
}

/// A [`Connector`] that writes to a git repository. See the module documentation.
#[derive(Debug)]
pub struct GitOpsConnector {
    config: GitOpsConfig,
    /// Serialises batches: they share the working tree of the clone.
    clone: Mutex<()>,
}

/// A git command that ran and failed.
#[derive(Debug)]
struct GitFailure {
    args: String,
    stderr: String,
}

impl std::fmt::Display for GitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "git {} failed: {}", self.args, self.stderr.trim())
    }
}

impl std::error::Error for GitFailure {}

/// A file change of a batch.
enum Change {
    Write(PathBuf, String),
    Remove(PathBuf),
}

impl GitOpsConnector {
    /// Prepares the local clone in `config.work_dir` (created if missing; reused if it is
    /// already a clone) without contacting the remote.
    ///
    /// # Errors
    ///
    /// [`emco_core::ErrorKind::InvalidArgument`] if the cluster or branch name cannot be used in a
    /// path or ref; [`emco_core::ErrorKind::FailedPrecondition`] if the work directory cannot be
    /// prepared or `git` cannot be run.
    pub async fn open(config: GitOpsConfig) -> Result<Self> {
        path_component(&config.cluster).map_err(|e| e.with_field("cluster"))?;
        if config.branch.is_empty()
            || config.branch.starts_with('-')
            || config.branch.contains("..")
        {
            return Err(Error::invalid("not a usable branch name").with_field("branch"));
        }
        tokio::fs::create_dir_all(&config.work_dir)
            .await
            .map_err(|e| {
                Error::failed_precondition(format!(
                    "cannot create {}: {e}",
                    config.work_dir.display()
                ))
                .with_source(e)
            })?;
        let this = Self {
            config,
            clone: Mutex::new(()),
        };
        let local = |e: GitFailure| Error::failed_precondition(e.to_string()).with_source(e);
        if tokio::fs::metadata(this.config.work_dir.join(".git"))
            .await
            .is_ok()
        {
            this.git(&["remote", "set-url", "origin", &this.config.remote])
                .await
                .map_err(local)?;
        } else {
            this.git(&["init", "-q", "-b", &this.config.branch])
                .await
                .map_err(local)?;
            this.git(&["remote", "add", "origin", &this.config.remote])
                .await
                .map_err(local)?;
        }
        Ok(this)
    }

    /// The configuration this connector was opened with.
    #[must_use]
    pub const fn config(&self) -> &GitOpsConfig {
        &self.config
    }

    /// The directory of `scope`'s files, relative to the repository root.
    ///
    /// # Errors
    ///
    /// [`emco_core::ErrorKind::InvalidArgument`] if the context id or app cannot be a path
    /// component.
    pub fn app_dir(&self, scope: &Scope) -> Result<PathBuf> {
        path_component(&scope.ctx_id).map_err(|e| e.with_field("ctx_id"))?;
        path_component(&scope.app).map_err(|e| e.with_field("app"))?;
        Ok(Path::new("clusters")
            .join(&self.config.cluster)
            .join("context")
            .join(&scope.ctx_id)
            .join("app")
            .join(&scope.app))
    }

    /// The file of resource `id` of `scope`, relative to the repository root.
    ///
    /// # Errors
    ///
    /// [`emco_core::ErrorKind::InvalidArgument`] if a part cannot be a path component.
    pub fn resource_path(&self, scope: &Scope, id: &ResourceId) -> Result<PathBuf> {
        let file = format!("{}.yaml", id.emco_name());
        path_component(&file).map_err(|e| e.with_field("metadata.name"))?;
        Ok(self.app_dir(scope)?.join(file))
    }

    /// The directory where the cluster's agent writes back the status of `scope`'s app,
    /// relative to the repository root (`clusters/<cluster>/status/<ctx>/app/<app>`).
    ///
    /// # Errors
    ///
    /// [`emco_core::ErrorKind::InvalidArgument`] if the context id or app cannot be a path
    /// component.
    pub fn status_dir(&self, scope: &Scope) -> Result<PathBuf> {
        path_component(&scope.ctx_id).map_err(|e| e.with_field("ctx_id"))?;
        path_component(&scope.app).map_err(|e| e.with_field("app"))?;
        Ok(Path::new("clusters")
            .join(&self.config.cluster)
            .join("status")
            .join(&scope.ctx_id)
            .join("app")
            .join(&scope.app))
    }

    /// The `status.resourceStatuses` entries of every status file in `dir` of the clone, or
    /// `None` when nothing was written back there.
    async fn reported(&self, dir: &Path) -> Result<Option<Vec<Value>>> {
        let path = self.config.work_dir.join(dir);
        let read_err = |e: std::io::Error| {
            Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e)
        };
        let mut files = match tokio::fs::read_dir(&path).await {
            Ok(files) => files,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_err(e)),
        };
        let mut entries = Vec::new();
        let mut any = false;
        while let Some(file) = files.next_entry().await.map_err(read_err)? {
            let name = file.file_name();
            let name = name.to_string_lossy();
            if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
                continue;
            }
            let text = tokio::fs::read_to_string(file.path())
                .await
                .map_err(read_err)?;
            // A file that is not a status document is skipped, not fatal.
            let Ok(doc) = emco_go::yaml::from_str::<Value>(&text) else {
                tracing::debug!(file = %file.path().display(), "unreadable status file");
                continue;
            };
            any = true;
            if let Some(list) = doc
                .get("status")
                .and_then(|s| s.get("resourceStatuses"))
                .and_then(Value::as_array)
            {
                entries.extend(list.iter().cloned());
            }
        }
        Ok(any.then_some(entries))
    }

    /// Runs git in the clone with a fixed environment: no prompts (a missing credential must
    /// fail, not hang), C locale (stderr is matched), no signing (no key in services).
    async fn git(&self, args: &[&str]) -> Result<String, GitFailure> {
        let failure = |stderr: String| GitFailure {
            args: args.join(" "),
            stderr,
        };
        let output = Command::new("git")
            .args(["-c", "commit.gpgsign=false", "-c", "core.quotepath=false"])
            .args(args)
            .current_dir(&self.config.work_dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| failure(format!("cannot run git: {e}")))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(failure(
                String::from_utf8_lossy(&output.stderr).into_owned(),
            ))
        }
    }

    /// Runs a git command that talks to the remote; failures and timeouts mean the remote is
    /// unreachable.
    async fn git_remote(&self, args: &[&str]) -> Result<String> {
        match tokio::time::timeout(self.config.network_timeout, self.git(args)).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(Error::unavailable(e.to_string()).with_source(e)),
            Err(_) => Err(Error::unavailable(format!(
                "git {} timed out after {:?}",
                args.join(" "),
                self.config.network_timeout
            ))),
        }
    }

    /// Makes the clone equal to the remote branch (or empty when the branch does not exist yet),
    /// discarding anything left from a failed batch.
    async fn sync(&self) -> Result<()> {
        self.git_remote(&["fetch", "-q", "--prune", "origin"])
            .await?;
        let remote_ref = format!("refs/remotes/origin/{}", self.config.branch);
        let local = |e: GitFailure| Error::internal(e.to_string()).with_source(e);
        if self
            .git(&["rev-parse", "-q", "--verify", &remote_ref])
            .await
            .is_ok()
        {
            // `checkout -B` rather than `reset`: it also recovers a clone left on another branch.
            self.git(&[
                "checkout",
                "-q",
                "-f",
                "-B",
                &self.config.branch,
                &remote_ref,
            ])
            .await
            .map_err(local)?;
        } else {
            // The branch is unborn on the remote: drop local commits that never got pushed.
            let local_ref = format!("refs/heads/{}", self.config.branch);
            self.git(&["symbolic-ref", "HEAD", &local_ref])
                .await
                .map_err(local)?;
            if self
                .git(&["rev-parse", "-q", "--verify", &local_ref])
                .await
                .is_ok()
            {
                self.git(&["update-ref", "-d", &local_ref])
                    .await
                    .map_err(local)?;
            }
            self.git(&["read-tree", "--empty"]).await.map_err(local)?;
        }
        self.git(&["clean", "-q", "-fdx"]).await.map_err(local)?;
        Ok(())
    }

    /// Commits `changes` under `scope`'s directory as one commit and pushes it, replaying the
    /// changes on the new remote head when the push is rejected.
    async fn commit_and_push(&self, scope: &Scope, changes: &[Change], action: &str) -> Result<()> {
        let dir = self.app_dir(scope)?;
        let dir_arg = dir.to_string_lossy().into_owned();
        let message = format!(
            "Commit for {dir_arg}/\n\n{action} {} resource(s) of app {} of context {} on cluster {}",
            changes.len(),
            scope.app,
            scope.ctx_id,
            self.config.cluster
        );
        let author_name = format!("user.name={}", self.config.author_name);
        let author_email = format!("user.email={}", self.config.author_email);
        let push_ref = format!("HEAD:refs/heads/{}", self.config.branch);
        let local = |e: GitFailure| Error::internal(e.to_string()).with_source(e);
        let _clone = self.clone.lock().await;
        let mut last_rejection = None;
        for attempt in 0..self.config.push_attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(backoff(attempt)).await;
            }
            self.sync().await?;
            self.write_changes(changes).await?;
            self.git(&["add", "-A", "--", &dir_arg])
                .await
                .map_err(local)?;
            if self.git(&["diff", "--cached", "--quiet"]).await.is_ok() {
                return Ok(()); // Already as wanted: no empty commit.
            }
            self.git(&[
                "-c",
                &author_name,
                "-c",
                &author_email,
                "commit",
                "-q",
                "-m",
                &message,
            ])
            .await
            .map_err(local)?;
            match self.git_remote(&["push", "-q", "origin", &push_ref]).await {
                Ok(_) => return Ok(()),
                Err(e) => {
                    // A rejection and an unreachable remote both fail the push; only a remote we
                    // can still read is worth another attempt on its new head.
                    self.git_remote(&["ls-remote", "-q", "origin"]).await?;
                    tracing::debug!(cluster = %self.config.cluster, attempt, error = %e, "push rejected, retrying");
                    last_rejection = Some(e);
                }
            }
        }
        let mut err = Error::unavailable(format!(
            "push to {} kept being rejected after {} attempts",
            self.config.remote, self.config.push_attempts
        ));
        if let Some(e) = last_rejection {
            err = err.with_source(e);
        }
        Err(err)
    }

    async fn write_changes(&self, changes: &[Change]) -> Result<()> {
        let io = |path: &Path, e: std::io::Error| {
            Error::internal(format!("cannot write {}: {e}", path.display())).with_source(e)
        };
        for change in changes {
            match change {
                Change::Write(rel, text) => {
                    let path = self.config.work_dir.join(rel);
                    if let Some(parent) = path.parent() {
                        tokio::fs::create_dir_all(parent)
                            .await
                            .map_err(|e| io(parent, e))?;
                    }
                    tokio::fs::write(&path, text)
                        .await
                        .map_err(|e| io(&path, e))?;
                }
                Change::Remove(rel) => {
                    let path = self.config.work_dir.join(rel);
                    match tokio::fs::remove_file(&path).await {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(io(&path, e)),
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether the status entry `e` (`{group, version, kind, name, namespace}`) is about `id` of
/// `scope`.
fn reports(e: &Value, scope: &Scope, id: &ResourceId) -> bool {
    let field = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or_default();
    let namespace = field("namespace");
    field("kind") == id.kind
        && field("name") == id.name
        && field("group") == id.group()
        && (field("version").is_empty() || field("version") == id.version())
        // Cluster-scoped objects have no namespace; namespaced ones are in the scope's.
        && (namespace.is_empty() || namespace == scope.namespace_for(id))
}

/// The object a status entry carries in `res`: base64 of its JSON (Go `[]byte`), or inline.
fn reported_object(e: &Value) -> Option<Value> {
    use base64::Engine as _;
    match e.get("res")? {
        Value::String(encoded) => {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .ok()?;
            serde_json::from_slice(&raw).ok()
        }
        object @ Value::Object(_) => Some(object.clone()),
        _ => None,
    }
}

/// Backoff before push attempt `attempt` (from 1): grows to about a second, with jitter so that
/// writers racing for the same branch spread out.
fn backoff(attempt: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << attempt.min(4));
    Duration::from_millis(base + rand::random_range(0..base))
}

/// Checks that `part` is one path component, so no name can escape its directory.
fn path_component(part: &str) -> Result<()> {
    let bad = part.is_empty()
        || part == "."
        || part == ".."
        || part.chars().any(|c| matches!(c, '/' | '\\' | '\0'))
        || part.starts_with('-');
    if bad {
        Err(Error::invalid(format!(
            "{part:?} cannot be used as a path component"
        )))
    } else {
        Ok(())
    }
}

#[async_trait]
impl Connector for GitOpsConnector {
    fn cluster(&self) -> &str {
        &self.config.cluster
    }

    fn observes_live_state(&self) -> bool {
        false
    }

    async fn apply(&self, batch: &Batch) -> Result<Warnings, BatchError> {
        let fail = |e| BatchError::at(0, e);
        self.app_dir(&batch.scope).map_err(fail)?;
        let manifests = batch.labelled_manifests().map_err(fail)?;
        let mut changes = Vec::with_capacity(manifests.len());
        let mut paths = std::collections::HashSet::new();
        for (i, (resource, manifest)) in batch.resources.iter().zip(&manifests).enumerate() {
            let path = self
                .resource_path(&batch.scope, resource.id())
                .map_err(|e| fail(e.within(&format!("resources[{i}]"))))?;
            // EMCO keys resources by `name+Kind`: two namespaces' objects would share one file.
            if !paths.insert(path.clone()) {
                return Err(fail(
                    Error::invalid(format!(
                        "{} collides with an earlier resource of the batch (same name and kind)",
                        resource.id()
                    ))
                    .with_field(format!("resources[{i}]")),
                ));
            }
            let text = emco_go::yaml::to_string(manifest).map_err(|e| {
                fail(Error::internal(format!("cannot write YAML: {e}")).with_source(e))
            })?;
            changes.push(Change::Write(path, text));
        }
        self.commit_and_push(&batch.scope, &changes, "apply")
            .await
            .map_err(fail)?;
        Ok(Warnings::new())
    }

    async fn delete(&self, batch: &Batch, _propagation: Propagation) -> Result<(), BatchError> {
        // Propagation is the cluster agent's business: removing the file prunes the object.
        let fail = |e| BatchError::at(0, e);
        self.app_dir(&batch.scope).map_err(fail)?;
        let changes = batch
            .resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                self.resource_path(&batch.scope, r.id())
                    .map(Change::Remove)
                    .map_err(|e| fail(e.within(&format!("resources[{i}]"))))
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.commit_and_push(&batch.scope, &changes, "delete")
            .await
            .map_err(fail)
    }

    async fn get(&self, scope: &Scope, id: &ResourceId) -> Result<Option<Value>> {
        let rel = self.resource_path(scope, id)?;
        let _clone = self.clone.lock().await;
        self.sync().await?;
        let path = self.config.work_dir.join(rel);
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(
                    Error::internal(format!("cannot read {}: {e}", path.display())).with_source(e),
                );
            }
        };
        let value = emco_go::yaml::from_str(&text).map_err(|e| {
            Error::invalid(format!(
                "{} in the repository is not valid YAML: {e}",
                path.display()
            ))
            .with_source(e)
        })?;
        Ok(Some(value))
    }

    async fn observe(&self, scope: &Scope, ids: &[ResourceId]) -> Result<Vec<Observation>> {
        let dir = self.status_dir(scope)?;
        let reported = {
            let _clone = self.clone.lock().await;
            self.sync().await?;
            self.reported(&dir).await?
        };
        let Some(reported) = reported else {
            let why = "no status written back by the cluster's agent yet";
            return Ok(ids
                .iter()
                .map(|_| Observation::Unknown(why.to_owned()))
                .collect());
        };
        Ok(ids
            .iter()
            .map(|id| {
                reported
                    .iter()
                    .find(|e| reports(e, scope, id))
                    .map_or(Observation::Absent, |e| match reported_object(e) {
                        Some(object) => Observation::Present(object),
                        None => Observation::Unknown(format!(
                            "the status written back for {id} carries no readable object"
                        )),
                    })
            })
            .collect())
    }

    async fn health(&self) -> Result<()> {
        self.git_remote(&["ls-remote", "-q", "origin"])
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use emco_core::ErrorKind;

    use super::*;
    use crate::connector::Resource;

    /// A bare repository in a temp dir, standing in for the remote.
    struct Remote {
        dir: tempfile::TempDir,
    }

    impl Remote {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let out = std::process::Command::new("git")
                .args(["init", "-q", "--bare", "-b", "main"])
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success());
            Self { dir }
        }

        fn url(&self) -> String {
            self.dir.path().to_string_lossy().into_owned()
        }

        fn git(&self, args: &[&str]) -> String {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(self.dir.path())
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }

        fn commits(&self) -> usize {
            match std::process::Command::new("git")
                .args(["rev-list", "--count", "main"])
                .current_dir(self.dir.path())
                .output()
                .unwrap()
            {
                out if out.status.success() => {
                    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
                }
                _ => 0,
            }
        }

        fn files(&self) -> Vec<String> {
            if self.commits() == 0 {
                return Vec::new();
            }
            self.git(&["ls-tree", "-r", "--name-only", "main"])
                .lines()
                .map(str::to_owned)
                .collect()
        }

        fn show(&self, path: &str) -> String {
            self.git(&["show", &format!("main:{path}")])
        }
    }

    async fn connector(remote: &Remote, cluster: &str) -> (GitOpsConnector, tempfile::TempDir) {
        let work = tempfile::tempdir().unwrap();
        let c = GitOpsConnector::open(GitOpsConfig::new(cluster, remote.url(), work.path()))
            .await
            .unwrap();
        (c, work)
    }

    fn config_map(name: &str) -> Resource {
        Resource::from_yaml(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n"
        ))
        .unwrap()
    }

    fn batch(ctx: &str, names: &[&str]) -> Batch {
        names
            .iter()
            .fold(Batch::new(Scope::new(ctx, "web")), |b, n| {
                b.with_resource(config_map(n))
            })
    }

    #[tokio::test]
    async fn apply_makes_one_commit_with_labelled_files() {
        let remote = Remote::new();
        let (c, _work) = connector(&remote, "edge+c1").await;
        c.health().await.unwrap();
        c.apply(&batch("100", &["a", "b"])).await.unwrap();
        assert_eq!(remote.commits(), 1);
        assert_eq!(
            remote.files(),
            [
                "clusters/edge+c1/context/100/app/web/a+ConfigMap.yaml",
                "clusters/edge+c1/context/100/app/web/b+ConfigMap.yaml"
            ]
        );
        let a: Value = emco_go::yaml::from_str(
            &remote.show("clusters/edge+c1/context/100/app/web/a+ConfigMap.yaml"),
        )
        .unwrap();
        assert_eq!(a["metadata"]["labels"]["emco/deployment-id"], "100-web");
        assert_eq!(a["data"]["k"], "v");
        let message = remote.git(&["log", "-1", "--format=%B", "main"]);
        assert!(
            message.starts_with("Commit for clusters/edge+c1/context/100/app/web/"),
            "{message}"
        );
        assert!(
            message.contains("app web of context 100 on cluster edge+c1"),
            "{message}"
        );

        // Same batch again: nothing changed, no empty commit.
        c.apply(&batch("100", &["a", "b"])).await.unwrap();
        assert_eq!(remote.commits(), 1);

        let got = c
            .get(&Scope::new("100", "web"), config_map("a").id())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, a);
        assert_eq!(
            c.get(&Scope::new("100", "web"), config_map("zz").id())
                .await
                .unwrap(),
            None
        );
        assert!(!c.observes_live_state());
    }

    #[tokio::test]
    async fn delete_removes_files_in_one_commit() {
        let remote = Remote::new();
        let (c, _work) = connector(&remote, "edge+c1").await;
        c.apply(&batch("7", &["a", "b", "c"])).await.unwrap();
        c.delete(
            &batch("7", &["a", "c", "never-applied"]),
            Propagation::Background,
        )
        .await
        .unwrap();
        assert_eq!(remote.commits(), 2);
        assert_eq!(
            remote.files(),
            ["clusters/edge+c1/context/7/app/web/b+ConfigMap.yaml"]
        );
        c.delete(&batch("7", &["a"]), Propagation::Foreground)
            .await
            .unwrap();
        assert_eq!(remote.commits(), 2, "deleting what is gone changes nothing");
    }

    #[tokio::test]
    async fn concurrent_writers_both_land() {
        let remote = Remote::new();
        let (c1, _w1) = connector(&remote, "p+c1").await;
        let (c2, _w2) = connector(&remote, "p+c2").await;
        let (c1, c2) = (Arc::new(c1), Arc::new(c2));
        let mut tasks = Vec::new();
        for round in 0..3 {
            for c in [&c1, &c2] {
                let c = Arc::clone(c);
                let b = batch(&format!("{round}"), &["x"]);
                tasks.push(tokio::spawn(async move { c.apply(&b).await }));
            }
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(remote.commits(), 6);
        let files = remote.files();
        assert_eq!(files.len(), 6);
        for round in 0..3 {
            for cluster in ["p+c1", "p+c2"] {
                let want = format!("clusters/{cluster}/context/{round}/app/web/x+ConfigMap.yaml");
                assert!(files.contains(&want), "{want} missing from {files:?}");
            }
        }
    }

    #[tokio::test]
    async fn work_dir_is_reused_and_recovers_from_foreign_changes() {
        let remote = Remote::new();
        let work = tempfile::tempdir().unwrap();
        let open = || GitOpsConnector::open(GitOpsConfig::new("p+c1", remote.url(), work.path()));
        open()
            .await
            .unwrap()
            .apply(&batch("1", &["a"]))
            .await
            .unwrap();
        // Junk left in the clone (a crash mid-batch) must not reach the remote.
        std::fs::write(work.path().join("junk.txt"), "x").unwrap();
        open()
            .await
            .unwrap()
            .apply(&batch("1", &["b"]))
            .await
            .unwrap();
        assert_eq!(remote.commits(), 2);
        assert_eq!(
            remote.files(),
            [
                "clusters/p+c1/context/1/app/web/a+ConfigMap.yaml",
                "clusters/p+c1/context/1/app/web/b+ConfigMap.yaml"
            ]
        );
    }

    #[tokio::test]
    async fn unreachable_remote_is_unavailable() {
        let work = tempfile::tempdir().unwrap();
        let gone = work.path().join("no-such-remote");
        let c = GitOpsConnector::open(GitOpsConfig::new(
            "p+c1",
            gone.to_string_lossy(),
            work.path().join("w"),
        ))
        .await
        .unwrap();
        assert_eq!(c.health().await.unwrap_err().kind(), ErrorKind::Unavailable);
        let e = c.apply(&batch("1", &["a"])).await.unwrap_err();
        assert_eq!((e.done, e.error.kind()), (0, ErrorKind::Unavailable));
        assert_eq!(
            c.get(&Scope::new("1", "web"), config_map("a").id())
                .await
                .unwrap_err()
                .kind(),
            ErrorKind::Unavailable
        );
    }

    #[tokio::test]
    async fn names_that_escape_their_directory_are_rejected() {
        let remote = Remote::new();
        let work = tempfile::tempdir().unwrap();
        for cluster in ["", "..", "a/b"] {
            let e = GitOpsConnector::open(GitOpsConfig::new(cluster, remote.url(), work.path()))
                .await
                .unwrap_err();
            assert_eq!(
                (e.kind(), e.field()),
                (ErrorKind::InvalidArgument, Some("cluster"))
            );
        }
        let (c, _work) = connector(&remote, "p+c1").await;
        let e = c.apply(&batch("../x", &["a"])).await.unwrap_err();
        assert_eq!(
            (e.error.kind(), e.error.field()),
            (ErrorKind::InvalidArgument, Some("ctx_id"))
        );
        let twice = batch("1", &["a"]).with_resource(
            Resource::from_yaml(
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: other}\n",
            )
            .unwrap(),
        );
        let e = c.apply(&twice).await.unwrap_err();
        assert_eq!(
            (e.error.kind(), e.error.field()),
            (ErrorKind::InvalidArgument, Some("resources[1]"))
        );
        let e = c.apply(&batch("1", &["ok", "a/b"])).await.unwrap_err();
        assert_eq!(e.error.field(), Some("resources[1].metadata.name"));
        assert_eq!(
            remote.commits(),
            0,
            "nothing is committed for a rejected batch"
        );
    }
}
