//! [`ContextHandle`]: a typed view of one AppContext for a controller, with the resources as
//! parsed Kubernetes objects and every change staged until [`ContextHandle::commit`].
//!
//! Staging is what makes a failing controller harmless: the runner commits only when the
//! controller returned `Ok`, so an error leaves the context exactly as the orchestrator wrote it.
//! Reads see the staged changes, so a controller can add a resource and patch it afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use emco_appcontext::context::{AppDependency, MAX_TXN_OPS};
use emco_appcontext::{AppContext, CompositeAppMeta};
use emco_core::ResourceName;
use emco_core::{ContextId, Error, Result};
use emco_store::{AppContextStore, Op, Txn};
use serde_json::Value;

/// `(app, cluster)`.
type ClusterRef = (String, String);
/// `(app, cluster, resource)`.
type ResourceRef = (String, String, String);

/// The AppContext key name of a Kubernetes object: `<metadata.name>+<kind>`, as EMCO names them.
///
/// # Errors
/// `InvalidArgument` when the object has no `kind` or no `metadata.name`.
pub fn resource_name(object: &Value) -> Result<String> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind.is_empty() || name.is_empty() {
        return Err(Error::invalid(
            "a Kubernetes object needs a kind and a metadata.name to be put in an AppContext",
        ));
    }
    Ok(ResourceName::new(name, kind).to_string())
}

/// Parses the YAML text of a resource into a JSON value.
///
/// # Errors
/// `InvalidArgument` when the text is not one YAML document.
pub fn parse_resource(yaml: &str) -> Result<Value> {
    emco_go::yaml::from_str(yaml)
        .map_err(|e| Error::invalid("a resource is not valid YAML").with_source(e))
}

/// Sets the field at `path` of a Kubernetes object (`["metadata", "labels", "team"]`), making
/// the missing objects on the way.
///
/// # Errors
/// `InvalidArgument` when a value on the way is neither an object nor null.
pub fn set_field(object: &mut Value, path: &[&str], value: Value) -> Result<()> {
    let Some((last, parents)) = path.split_last() else {
        *object = value;
        return Ok(());
    };
    let mut at = object;
    for (i, segment) in parents.iter().enumerate() {
        if at.is_null() {
            *at = Value::Object(serde_json::Map::new());
        }
        let map = at
            .as_object_mut()
            .ok_or_else(|| not_an_object(&path[..i]))?;
        at = map.entry((*segment).to_owned()).or_insert(Value::Null);
    }
    if at.is_null() {
        *at = Value::Object(serde_json::Map::new());
    }
    let map = at.as_object_mut().ok_or_else(|| not_an_object(parents))?;
    map.insert((*last).to_owned(), value);
    Ok(())
}

fn not_an_object(path: &[&str]) -> Error {
    if path.is_empty() {
        Error::invalid("the resource is not an object")
    } else {
        Error::invalid(format!("{} is not an object", path.join(".")))
    }
}

fn render_resource(object: &Value) -> Result<String> {
    emco_go::yaml::to_string(object)
        .map_err(|e| Error::internal("cannot render a resource as YAML").with_source(e))
}

/// A typed handle on one AppContext. Reads go to the store (through the staged changes); writes
/// are staged and written in few transactions by [`commit`](Self::commit).
#[derive(Debug, Clone)]
pub struct ContextHandle {
    ctx: AppContext,
    /// Staged resources: `Some` written, `None` removed.
    resources: BTreeMap<ResourceRef, Option<Value>>,
    /// Staged resource orders.
    orders: BTreeMap<ClusterRef, Vec<String>>,
    /// Clusters removed from their app.
    removed_clusters: BTreeSet<ClusterRef>,
    /// Apps added, in order.
    added_apps: Vec<String>,
    /// Clusters added to an app.
    added_clusters: BTreeSet<ClusterRef>,
}

impl ContextHandle {
    /// A handle on an opened context.
    #[must_use]
    pub fn new(ctx: AppContext) -> Self {
        Self {
            ctx,
            resources: BTreeMap::new(),
            orders: BTreeMap::new(),
            removed_clusters: BTreeSet::new(),
            added_apps: Vec::new(),
            added_clusters: BTreeSet::new(),
        }
    }

    /// Opens context `id` in `store`.
    ///
    /// # Errors
    /// `NotFound` when there is no such context; the store's errors.
    pub async fn load(store: Arc<dyn AppContextStore>, id: ContextId) -> Result<Self> {
        Ok(Self::new(AppContext::load(store, id).await?))
    }

    /// The context id.
    #[must_use]
    pub fn id(&self) -> ContextId {
        self.ctx.id()
    }

    /// The untyped context, for the parts of EMCO's layout this handle does not cover (status,
    /// rsync state). Writes made through it are not staged.
    #[must_use]
    pub fn app_context(&self) -> &AppContext {
        &self.ctx
    }

    /// The context's metadata (project, composite app, DIG, namespace, ...).
    ///
    /// # Errors
    /// `NotFound` when the context has none; the store's errors.
    pub async fn meta(&self) -> Result<CompositeAppMeta> {
        self.ctx.meta().await
    }

    /// The apps.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn apps(&self) -> Result<Vec<String>> {
        let mut apps = self.ctx.apps().await?;
        apps.extend(self.added_apps.iter().cloned());
        Ok(apps)
    }

    /// The app order instruction, if any, with the apps added through this handle last.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn app_order(&self) -> Result<Option<Vec<String>>> {
        let order = self.ctx.app_order().await?;
        if self.added_apps.is_empty() {
            return Ok(order);
        }
        let mut order = order.unwrap_or_default();
        order.extend(self.added_apps.iter().cloned());
        Ok(Some(order))
    }

    /// Adds `app` (last in the app order), for the resources a controller deploys beside the
    /// composite app's own (sfc's chains). An app that exists already is left as it is.
    ///
    /// # Errors
    /// `InvalidArgument` for an empty name or one with `/`; the store's errors.
    pub async fn add_app(&mut self, app: &str) -> Result<()> {
        if app.is_empty() || app.contains('/') || app == "instruction" {
            return Err(Error::invalid(format!("{app:?} cannot name an app")).with_field("app"));
        }
        if !self.apps().await?.iter().any(|a| a == app) {
            self.added_apps.push(app.to_owned());
        }
        Ok(())
    }

    /// Adds `cluster` (`provider+cluster`) to `app`. A cluster the app has already is left as
    /// it is.
    ///
    /// # Errors
    /// `NotFound` when there is no such app; `InvalidArgument` for a bad cluster name.
    pub async fn add_cluster(&mut self, app: &str, cluster: &str) -> Result<()> {
        if !self.apps().await?.iter().any(|a| a == app) {
            return Err(Error::not_found(format!(
                "AppContext {} has no app {app}",
                self.id()
            )));
        }
        if cluster.parse::<emco_core::ClusterRef>().is_err() || cluster.contains('/') {
            return Err(
                Error::invalid(format!("{cluster:?} is not a cluster (provider+cluster)"))
                    .with_field("cluster"),
            );
        }
        let key = (app.to_owned(), cluster.to_owned());
        self.removed_clusters.remove(&key);
        if !self.ctx.clusters(app).await?.iter().any(|c| c == cluster) {
            self.added_clusters.insert(key);
        }
        Ok(())
    }

    /// What `app` depends on.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn app_dependencies(&self, app: &str) -> Result<Option<Vec<AppDependency>>> {
        self.ctx.app_dependencies(app).await
    }

    fn is_removed(&self, app: &str, cluster: &str) -> bool {
        self.removed_clusters
            .contains(&(app.to_owned(), cluster.to_owned()))
    }

    /// The clusters (`provider+cluster`) of `app`, without those removed through this handle.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn clusters(&self, app: &str) -> Result<Vec<String>> {
        let mut clusters = self.ctx.clusters(app).await?;
        clusters.retain(|c| !self.is_removed(app, c));
        clusters.extend(
            self.added_clusters
                .iter()
                .filter(|(a, _)| a == app)
                .map(|(_, c)| c.clone()),
        );
        Ok(clusters)
    }

    /// The clusters of `app` by anyOf group number (clusters outside any group are left out).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn cluster_groups(&self, app: &str) -> Result<BTreeMap<String, Vec<String>>> {
        let mut groups = self.ctx.cluster_groups(app).await?;
        for clusters in groups.values_mut() {
            clusters.retain(|c| !self.is_removed(app, c));
        }
        groups.retain(|_, clusters| !clusters.is_empty());
        Ok(groups)
    }

    /// The anyOf group of a cluster of `app`, if it is in one.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn cluster_group(&self, app: &str, cluster: &str) -> Result<Option<String>> {
        if self.is_removed(app, cluster) {
            return Ok(None);
        }
        self.ctx.cluster_group(app, cluster).await
    }

    /// Removes a cluster (with its resources) from `app`: what a placement controller does.
    ///
    /// # Errors
    /// `NotFound` when `app` has no such cluster.
    pub async fn remove_cluster(&mut self, app: &str, cluster: &str) -> Result<()> {
        self.check_cluster(app, cluster).await?;
        self.resources
            .retain(|(a, c, _), _| !(a == app && c == cluster));
        self.orders.remove(&(app.to_owned(), cluster.to_owned()));
        self.added_clusters
            .remove(&(app.to_owned(), cluster.to_owned()));
        self.removed_clusters
            .insert((app.to_owned(), cluster.to_owned()));
        Ok(())
    }

    async fn check_cluster(&self, app: &str, cluster: &str) -> Result<()> {
        if self.clusters(app).await?.iter().any(|c| c == cluster) {
            Ok(())
        } else {
            Err(Error::not_found(format!(
                "app {app} has no cluster {cluster} in AppContext {}",
                self.id()
            )))
        }
    }

    /// The resource names (`name+Kind`) of `app` on `cluster`, staged changes included.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn resource_names(&self, app: &str, cluster: &str) -> Result<Vec<String>> {
        if self.is_removed(app, cluster) {
            return Ok(Vec::new());
        }
        let mut names = self.ctx.resources(app, cluster).await?;
        for ((a, c, n), staged) in &self.resources {
            if a != app || c != cluster {
                continue;
            }
            let present = names.iter().position(|x| x == n);
            match (staged, present) {
                (Some(_), None) => names.push(n.clone()),
                (None, Some(i)) => {
                    names.remove(i);
                }
                _ => {}
            }
        }
        Ok(names)
    }

    /// One resource of `app` on `cluster`, parsed, staged changes included.
    ///
    /// # Errors
    /// `InvalidArgument` when the stored text is not YAML; the store's errors.
    pub async fn resource(&self, app: &str, cluster: &str, name: &str) -> Result<Option<Value>> {
        if self.is_removed(app, cluster) {
            return Ok(None);
        }
        let key = (app.to_owned(), cluster.to_owned(), name.to_owned());
        if let Some(staged) = self.resources.get(&key) {
            return Ok(staged.clone());
        }
        self.ctx
            .resource(app, cluster, name)
            .await?
            .map(|yaml| {
                parse_resource(&yaml).map_err(|e| {
                    e.within(&format!(
                        "resource {name} of app {app} on cluster {cluster}"
                    ))
                })
            })
            .transpose()
    }

    /// Every resource of `app` on `cluster`, parsed, as `(name+Kind, object)`.
    ///
    /// # Errors
    /// As [`resource`](Self::resource).
    pub async fn resources(&self, app: &str, cluster: &str) -> Result<Vec<(String, Value)>> {
        let mut out = Vec::new();
        for name in self.resource_names(app, cluster).await? {
            if let Some(object) = self.resource(app, cluster, &name).await? {
                out.push((name, object));
            }
        }
        Ok(out)
    }

    /// The resource order of `app` on `cluster`, staged changes included.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn resource_order(&self, app: &str, cluster: &str) -> Result<Option<Vec<String>>> {
        if let Some(order) = self.orders.get(&(app.to_owned(), cluster.to_owned())) {
            return Ok(Some(order.clone()));
        }
        self.ctx.resource_order(app, cluster).await
    }

    /// Stages `object` as resource `name` of `app` on `cluster`, replacing it if it exists, and
    /// appends a new name to the resource order.
    ///
    /// # Errors
    /// `NotFound` when `app` has no such cluster; the store's errors.
    pub async fn put_resource(
        &mut self,
        app: &str,
        cluster: &str,
        name: &str,
        object: Value,
    ) -> Result<()> {
        self.check_cluster(app, cluster).await?;
        let exists = self
            .resource_names(app, cluster)
            .await?
            .iter()
            .any(|n| n == name);
        if !exists {
            let mut order = self
                .resource_order(app, cluster)
                .await?
                .unwrap_or_else(Vec::new);
            if !order.iter().any(|n| n == name) {
                order.push(name.to_owned());
            }
            self.orders
                .insert((app.to_owned(), cluster.to_owned()), order);
        }
        self.resources.insert(
            (app.to_owned(), cluster.to_owned(), name.to_owned()),
            Some(object),
        );
        Ok(())
    }

    /// Stages a new Kubernetes object for `app` on `cluster` under its `name+Kind`; returns that
    /// name.
    ///
    /// # Errors
    /// `InvalidArgument` when the object has no kind or name; `AlreadyExists` when the cluster
    /// already has a resource of that name; `NotFound` when `app` has no such cluster.
    pub async fn add_resource(
        &mut self,
        app: &str,
        cluster: &str,
        object: Value,
    ) -> Result<String> {
        let name = resource_name(&object)?;
        if self.resource(app, cluster, &name).await?.is_some() {
            return Err(Error::already_exists(format!(
                "app {app} already has resource {name} on cluster {cluster}"
            )));
        }
        self.put_resource(app, cluster, &name, object).await?;
        Ok(name)
    }

    /// Stages the removal of resource `name` of `app` on `cluster` (and from its order).
    ///
    /// # Errors
    /// `NotFound` when there is no such resource; the store's errors.
    pub async fn remove_resource(&mut self, app: &str, cluster: &str, name: &str) -> Result<()> {
        if self.resource(app, cluster, name).await?.is_none() {
            return Err(Error::not_found(format!(
                "app {app} has no resource {name} on cluster {cluster}"
            )));
        }
        if let Some(mut order) = self.resource_order(app, cluster).await? {
            order.retain(|n| n != name);
            self.orders
                .insert((app.to_owned(), cluster.to_owned()), order);
        }
        self.resources
            .insert((app.to_owned(), cluster.to_owned(), name.to_owned()), None);
        Ok(())
    }

    /// How many changes are staged.
    #[must_use]
    pub fn staged(&self) -> usize {
        self.resources.len()
            + self.orders.len()
            + self.removed_clusters.len()
            + self.added_apps.len()
            + self.added_clusters.len()
    }

    /// Writes the staged changes: removals first, then resources and orders batched into as few
    /// transactions as the store's limits allow. The staging area is empty afterwards.
    ///
    /// # Errors
    /// The store's errors (batches before the failing one are written).
    pub async fn commit(&mut self) -> Result<()> {
        let root = self.ctx.root_key().to_owned();
        let cluster_key = |app: &str, cluster: &str| format!("{root}app/{app}/cluster/{cluster}/");
        let mut deletes = Vec::new();
        for (app, cluster) in &self.removed_clusters {
            deletes.push(Op::delete_prefix(cluster_key(app, cluster)));
        }
        for ((app, cluster, name), staged) in &self.resources {
            if staged.is_none() {
                // The prefix takes the resource's status key with it.
                deletes.push(Op::delete_prefix(format!(
                    "{}resource/{name}/",
                    cluster_key(app, cluster)
                )));
            }
        }
        for chunk in deletes.chunks(MAX_TXN_OPS) {
            self.ctx
                .store()
                .txn(Txn {
                    compares: Vec::new(),
                    ops: chunk.to_vec(),
                })
                .await?;
        }
        let mut writer = self.ctx.writer();
        if !self.added_apps.is_empty() {
            let order = self.app_order().await?.unwrap_or_default();
            let order: Vec<&str> = order.iter().map(String::as_str).collect();
            writer.set_app_order(&order)?;
        }
        for app in &self.added_apps {
            writer.add_app(app)?;
        }
        for (app, cluster) in &self.added_clusters {
            writer.add_cluster(app, cluster, None)?;
        }
        for ((app, cluster, name), staged) in &self.resources {
            if let Some(object) = staged {
                writer.add_resource(app, cluster, name, &render_resource(object)?)?;
            }
        }
        for ((app, cluster), order) in &self.orders {
            let order: Vec<&str> = order.iter().map(String::as_str).collect();
            writer.set_resource_order(app, cluster, &order)?;
        }
        writer.flush().await?;
        self.resources.clear();
        self.orders.clear();
        self.removed_clusters.clear();
        self.added_apps.clear();
        self.added_clusters.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use emco_core::ErrorKind;
    use emco_store::InMemoryAppContextStore;
    use serde_json::json;

    use super::*;

    async fn context() -> (Arc<dyn AppContextStore>, ContextId) {
        let store: Arc<dyn AppContextStore> = Arc::new(InMemoryAppContextStore::new());
        let ctx = AppContext::create(Arc::clone(&store), &CompositeAppMeta::default())
            .await
            .unwrap();
        let mut w = ctx.writer();
        w.add_app("a").unwrap();
        w.add_cluster("a", "p+c1", Some("0")).unwrap();
        w.add_cluster("a", "p+c2", Some("0")).unwrap();
        w.add_resource(
            "a",
            "p+c1",
            "cm+ConfigMap",
            "kind: ConfigMap\nmetadata:\n  name: cm\n",
        )
        .unwrap();
        w.set_resource_order("a", "p+c1", &["cm+ConfigMap"])
            .unwrap();
        w.flush().await.unwrap();
        (store, ctx.id())
    }

    #[tokio::test]
    async fn reads_see_staged_changes_and_commit_writes_them() {
        let (store, id) = context().await;
        let mut h = ContextHandle::load(Arc::clone(&store), id).await.unwrap();
        let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}});
        assert_eq!(
            h.add_resource("a", "p+c1", svc.clone()).await.unwrap(),
            "s+Service"
        );
        let dup = h.add_resource("a", "p+c1", svc.clone()).await.unwrap_err();
        assert_eq!(dup.kind(), ErrorKind::AlreadyExists);
        h.remove_resource("a", "p+c1", "cm+ConfigMap")
            .await
            .unwrap();
        assert_eq!(
            h.resource_names("a", "p+c1").await.unwrap(),
            vec!["s+Service"]
        );
        assert_eq!(
            h.resource_order("a", "p+c1").await.unwrap().unwrap(),
            vec!["s+Service"]
        );
        // Nothing reached the store yet.
        let fresh = ContextHandle::load(Arc::clone(&store), id).await.unwrap();
        assert_eq!(
            fresh.resource_names("a", "p+c1").await.unwrap(),
            vec!["cm+ConfigMap"]
        );

        h.commit().await.unwrap();
        assert_eq!(h.staged(), 0);
        let fresh = ContextHandle::load(Arc::clone(&store), id).await.unwrap();
        assert_eq!(
            fresh.resource_names("a", "p+c1").await.unwrap(),
            vec!["s+Service"]
        );
        assert_eq!(
            fresh.resource("a", "p+c1", "s+Service").await.unwrap(),
            Some(svc)
        );
        assert_eq!(
            fresh.resource_order("a", "p+c1").await.unwrap().unwrap(),
            vec!["s+Service"]
        );
    }

    #[tokio::test]
    async fn an_added_app_comes_last_with_its_clusters_and_resources() {
        let (store, id) = context().await;
        let mut w = AppContext::load(Arc::clone(&store), id)
            .await
            .unwrap()
            .writer();
        w.set_app_order(&["a"]).unwrap();
        w.flush().await.unwrap();
        let mut h = ContextHandle::load(Arc::clone(&store), id).await.unwrap();
        let cr = json!({"apiVersion": "x/v1", "kind": "Chain", "metadata": {"name": "c"}});
        let missing = h.add_cluster("extra", "p+c1").await.unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        h.add_app("extra").await.unwrap();
        h.add_app("extra").await.unwrap();
        h.add_app("a").await.unwrap();
        let bad = h.add_cluster("extra", "c1").await.unwrap_err();
        assert_eq!(bad.kind(), ErrorKind::InvalidArgument);
        for c in ["p+c1", "p+c2", "p+c1"] {
            h.add_cluster("extra", c).await.unwrap();
        }
        h.remove_cluster("extra", "p+c2").await.unwrap();
        h.put_resource("extra", "p+c1", "c+Chain", cr.clone())
            .await
            .unwrap();
        assert_eq!(h.clusters("extra").await.unwrap(), vec!["p+c1"]);
        h.commit().await.unwrap();
        assert_eq!(h.staged(), 0);

        let fresh = ContextHandle::load(Arc::clone(&store), id).await.unwrap();
        assert_eq!(fresh.apps().await.unwrap(), vec!["a", "extra"]);
        assert_eq!(
            fresh.app_order().await.unwrap().unwrap(),
            vec!["a", "extra"]
        );
        assert_eq!(fresh.clusters("extra").await.unwrap(), vec!["p+c1"]);
        assert_eq!(
            fresh.resource("extra", "p+c1", "c+Chain").await.unwrap(),
            Some(cr)
        );
        assert_eq!(
            fresh
                .resource_order("extra", "p+c1")
                .await
                .unwrap()
                .unwrap(),
            vec!["c+Chain"]
        );
    }

    #[tokio::test]
    async fn removing_a_cluster_drops_it_from_groups_and_the_store() {
        let (store, id) = context().await;
        let mut h = ContextHandle::load(Arc::clone(&store), id).await.unwrap();
        h.remove_cluster("a", "p+c1").await.unwrap();
        assert_eq!(h.clusters("a").await.unwrap(), vec!["p+c2"]);
        assert_eq!(h.cluster_groups("a").await.unwrap()["0"], vec!["p+c2"]);
        assert!(
            h.resource("a", "p+c1", "cm+ConfigMap")
                .await
                .unwrap()
                .is_none()
        );
        let obj = json!({"kind": "Service", "metadata": {"name": "s"}});
        let err = h.add_resource("a", "p+c1", obj).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        let err = h.remove_cluster("a", "p+c9").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        h.commit().await.unwrap();
        let ctx = AppContext::load(store, id).await.unwrap();
        assert_eq!(ctx.clusters("a").await.unwrap(), vec!["p+c2"]);
        assert!(
            ctx.resource("a", "p+c1", "cm+ConfigMap")
                .await
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn set_field_makes_objects_and_refuses_scalars() {
        let mut obj = json!({"kind": "Deployment", "metadata": {"name": "web"}});
        set_field(&mut obj, &["metadata", "labels", "team"], json!("blue")).unwrap();
        assert_eq!(obj["metadata"]["labels"], json!({"team": "blue"}));
        let mut bad = json!({"metadata": "text"});
        let err = set_field(&mut bad, &["metadata", "labels", "a"], json!("b")).unwrap_err();
        assert_eq!(err.to_string(), "metadata is not an object");
        let mut top = json!(3);
        assert!(set_field(&mut top, &["a"], json!(1)).is_err());
    }

    #[test]
    fn resource_names_need_kind_and_name() {
        let ok = json!({"kind": "Deployment", "metadata": {"name": "web"}});
        assert_eq!(resource_name(&ok).unwrap(), "web+Deployment");
        let err = resource_name(&json!({"kind": "Deployment"})).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            parse_resource("a: [").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}
