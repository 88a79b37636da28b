//! Previews (what-if): what an instantiate or update of a deployment intent group would deploy,
//! computed by the same build as the real operation (rendering, placement, every controller) on
//! a scratch AppContext store, and compared with what is deployed now. Nothing is written to the
//! AppContext store or any cluster, except that a controller called over gRPC reads contexts from
//! the shared store: then the scratch context is written there for the call and deleted after
//! (the answer says so).
//!
//! The answer is sized for fleets: clusters that get the same change are one entry with a count
//! and their names, placement reasons likewise; the per-cluster detail is paged.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use emco_appcontext::context::ContextKey;
use emco_appcontext::keys::Keyed;
use emco_appcontext::{AppContext, Deployer, ObjectRef, ScratchStore, Stores};
use emco_core::lifecycle::{DigOperation, transition_named};
use emco_core::placement::{ClusterRef, Inventory, Reason, explain};
use emco_core::preview::{
    AppPlacement, Change, ChangeGroup, ClusterApp, ClusterPage, ClusterPreview, Detail, DryRun,
    ObjectChange, PickedBy, Preview, PreviewOptions, Refusal, Summary, Unchecked,
};
use emco_core::{ContextId, DigRef, Error, Result};
use emco_store::{AppContextStore, KeyValue};
use serde_json::Value;

use super::build::{self, Site};
use super::{Deployments, dig_name};
use crate::state::Record;

/// A resource synchronizer for controllers run by a preview: reads clusters live as the real
/// one, deploys nothing.
#[derive(Debug)]
struct ReadOnly(Arc<dyn Deployer>);

#[async_trait]
impl Deployer for ReadOnly {
    async fn install(&self, id: ContextId) -> Result<()> {
        tracing::debug!(
            ctx = %id,
            "a preview deploys nothing: a controller's install is skipped"
        );
        Ok(())
    }

    async fn get(&self, cluster: &str, what: &ObjectRef) -> Result<Option<Value>> {
        self.0.get(cluster, what).await
    }

    async fn list(&self, cluster: &str, what: &ObjectRef) -> Result<Vec<Value>> {
        self.0.list(cluster, what).await
    }

    fn read_only(&self) -> bool {
        true
    }
}

impl Deployments {
    /// Previews what instantiating (or, once deployed, updating) the group at `dig` would do,
    /// writing nothing; see the module documentation.
    ///
    /// # Errors
    /// What the real operation would answer, with the same kind and text: NotFound, the state
    /// refusals, a bad chart or placement, a controller's failure.
    pub async fn preview(&self, dig: &DigRef, options: &PreviewOptions) -> Result<Preview> {
        let key = dig.key();
        let group = self.load_dig(&key).await?;
        let record = Record::load(self.records.store().as_ref(), &key).await?;
        let state = record.info.current_state();
        let name = dig_name(&key);
        let deployed = if transition_named(name, state, DigOperation::Update).is_ok() {
            Some(Self::current_context(&key, &record.info)?)
        } else {
            transition_named(name, state, DigOperation::Instantiate)?;
            self.check_terminated(&key, &record.info).await?;
            None
        };
        let intents = build::dig_intents(self, &key).await?;
        let controllers = self.registered_controllers().await?;
        let registry = &self.controllers;
        let written_for = registry.remote_participants(&controllers, &intents.intents);
        let real = Arc::clone(self.records.contexts());
        let contexts: Arc<dyn AppContextStore> = if written_for.is_empty() {
            Arc::new(ScratchStore::new(Arc::clone(&real)))
        } else {
            Arc::clone(&real)
        };
        let base = registry.stores();
        let stores = Stores {
            appcontext: Arc::clone(&contexts),
            resources: base.resources.clone(),
            deployer: base
                .deployer
                .clone()
                .map(|d| Arc::new(ReadOnly(d)) as Arc<dyn Deployer>),
        };
        let scratch = registry.on_stores(stores);
        let site = Site {
            contexts,
            registry: &scratch,
        };
        let started = std::time::Instant::now();
        let built = build::build_in(self, &key, &group, deployed, &site).await?;
        let build_took = started.elapsed();
        let compared = async {
            let mut texts = Texts::default();
            let after = Manifests::read(built.ctx.store(), built.ctx.id(), &mut texts).await?;
            let before = match deployed {
                Some(id) => Manifests::read(&real, id, &mut texts).await?,
                None => Manifests::default(),
            };
            let read_took = started.elapsed() - build_took;
            let why = Why {
                intents: &built.intents,
                inventory: &built.inventory,
            };
            let mut preview = compare(&before, &after, &mut texts, &why, options);
            // Where a preview's time goes, for operators of large fleets (the 10 s goal).
            tracing::info!(
                dig = %key,
                build_ms = build_took.as_millis(),
                read_ms = read_took.as_millis(),
                compare_ms = (started.elapsed() - build_took - read_took).as_millis(),
                texts = texts.texts.len(),
                "preview computed"
            );
            if options.dry_run {
                let meta = built.ctx.meta().await?;
                preview.dry_run = Some(self.dry_run(&meta, &before, &after, &texts).await);
            }
            Ok::<_, Error>(preview)
        }
        .await;
        if !written_for.is_empty() {
            // Written to the real store for remote controllers: deleted. A scratch context
            // goes with its store.
            built.ctx.discard().await;
        }
        let mut preview = compared?;
        preview.operation = if deployed.is_some() {
            "update"
        } else {
            "instantiate"
        }
        .to_owned();
        preview.deployed_revision = deployed.and(record.info.actions.last()).map(|a| a.revision);
        preview.written_for = written_for;
        Ok(preview)
    }
}

/// How many clusters a dry run asks at once.
const DRY_RUNS_AT_ONCE: usize = 16;

impl Deployments {
    /// Asks each cluster to check, changing nothing, the objects it would get created or
    /// changed (those [`compare`] found different).
    async fn dry_run(
        &self,
        meta: &emco_appcontext::CompositeAppMeta,
        before: &Manifests,
        after: &Manifests,
        texts: &Texts,
    ) -> DryRun {
        use futures::StreamExt;
        // (cluster, app) -> the objects to check.
        let mut asks: BTreeMap<(&str, &str), Vec<(String, String)>> = BTreeMap::new();
        for (app, clusters) in &after.apps {
            for (cluster, resources) in clusters {
                let old = before.apps.get(app).and_then(|c| c.get(cluster));
                for (name, &id) in resources {
                    let was = old.and_then(|o| o.get(name)).copied();
                    if texts
                        .diffs
                        .get(&(was, Some(id)))
                        .is_some_and(Option::is_some)
                    {
                        asks.entry((cluster.as_str(), app.as_str()))
                            .or_default()
                            .push((name.clone(), texts.texts[id].clone()));
                    }
                }
            }
        }
        let clusters: BTreeSet<&str> = asks.keys().map(|(c, _)| *c).collect();
        // Each future owns what it uses: futures made by a closure over borrowed data are not
        // `Send` for every lifetime, as the compiler sees them in a stream today.
        let meta = Arc::new(meta.clone());
        let mut calls = Vec::with_capacity(asks.len());
        for ((cluster, app), objects) in asks {
            let (rsync, meta) = (self.records.rsync().clone(), Arc::clone(&meta));
            let (cluster, app) = (cluster.to_owned(), app.to_owned());
            calls.push(async move {
                let answer = rsync.dry_run(&meta, &cluster, &app, &objects).await;
                (cluster, app, objects, answer)
            });
        }
        let answers: Vec<_> = futures::stream::iter(calls)
            .buffer_unordered(DRY_RUNS_AT_ONCE)
            .collect()
            .await;
        let mut refused: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
        let mut unchecked: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (cluster, app, objects, answer) in answers {
            match answer {
                Ok(each) => {
                    for ((name, _), why) in objects.into_iter().zip(each) {
                        if let Some(why) = why {
                            refused
                                .entry((app.clone(), name, why))
                                .or_default()
                                .push(cluster.clone());
                        }
                    }
                }
                Err(e) => {
                    unchecked
                        .entry(e.message().to_owned())
                        .or_default()
                        .insert(cluster);
                }
            }
        }
        DryRun {
            clusters: clusters.len(),
            refusals: refused
                .into_iter()
                .map(|((app, resource, reason), mut clusters)| {
                    clusters.sort();
                    Refusal {
                        app,
                        resource,
                        reason,
                        count: clusters.len(),
                        clusters,
                    }
                })
                .collect(),
            unchecked: unchecked
                .into_iter()
                .map(|(reason, clusters)| Unchecked {
                    reason,
                    count: clusters.len(),
                    clusters: clusters.into_iter().collect(),
                })
                .collect(),
        }
    }
}

/// The manifests' texts, each kept once: identical manifests on many clusters are compared,
/// parsed and diffed once.
#[derive(Default)]
struct Texts {
    /// By the value as stored (a JSON string): identical ones are decoded once.
    ids: HashMap<bytes::Bytes, usize>,
    texts: Vec<String>,
    /// The canonical YAML of each text (keys sorted), made when first needed.
    canonical: Vec<Option<String>>,
    /// Diffs made, by (before, after) ids (`None`: absent).
    diffs: HashMap<(Option<usize>, Option<usize>), Option<String>>,
}

impl Texts {
    /// The id of the text stored as `value` (a JSON string).
    fn intern(&mut self, value: bytes::Bytes) -> std::result::Result<usize, serde_json::Error> {
        if let Some(&id) = self.ids.get(&value) {
            return Ok(id);
        }
        let text: String = serde_json::from_slice(&value)?;
        let id = self.texts.len();
        self.ids.insert(value, id);
        self.texts.push(text);
        self.canonical.push(None);
        Ok(id)
    }

    /// The canonical YAML of text `id`: parsed and printed again with sorted keys, so that two
    /// spellings of the same object compare equal; the text itself when it does not parse.
    fn canonical(&mut self, id: usize) -> &str {
        if self.canonical[id].is_none() {
            let text = &self.texts[id];
            let made = emco_controller_sdk::handle::parse_resource(text)
                .ok()
                .and_then(|v| emco_go::yaml::to_string(&v).ok())
                .unwrap_or_else(|| text.clone());
            self.canonical[id] = Some(made);
        }
        self.canonical[id].as_deref().unwrap_or_default()
    }

    /// Whether `before` and `after` differ (not the same object), making their unified diff
    /// (in [`Texts::diffs`]) the first time; `app` and `name` head it.
    fn differ(
        &mut self,
        app: &str,
        name: &str,
        before: Option<usize>,
        after: Option<usize>,
    ) -> bool {
        if before == after {
            return false;
        }
        if let Some(known) = self.diffs.get(&(before, after)) {
            return known.is_some();
        }
        let old = before
            .map(|id| self.canonical(id).to_owned())
            .unwrap_or_default();
        let new = after
            .map(|id| self.canonical(id).to_owned())
            .unwrap_or_default();
        let made = (old != new).then(|| {
            let diff = similar::TextDiff::from_lines(&old, &new);
            let mut unified = diff.unified_diff();
            unified.context_radius(3).header(
                &format!("deployed/{app}/{name}"),
                &format!("preview/{app}/{name}"),
            );
            unified.to_string()
        });
        let differ = made.is_some();
        self.diffs.insert((before, after), made);
        differ
    }
}

/// The resources of a context: app -> cluster -> `name+Kind` -> text id.
#[derive(Default)]
struct Manifests {
    apps: BTreeMap<String, BTreeMap<String, BTreeMap<String, usize>>>,
}

impl Manifests {
    /// Reads context `id` of `store` in one listing, a page at a time.
    async fn read(
        store: &Arc<dyn AppContextStore>,
        id: ContextId,
        texts: &mut Texts,
    ) -> Result<Self> {
        let root = AppContext::prefix(id);
        let mut out = Self::default();
        store
            .for_each_page(&root, false, &mut |kvs| {
                for kv in kvs {
                    out.take(&root, id, kv, texts)?;
                }
                Ok(())
            })
            .await?;
        Ok(out)
    }

    /// Takes in one key of context `id` (whose root key is `root`). Keys come in order, an
    /// app's before its clusters' and a cluster's before its resources', so most find their
    /// maps made and allocate nothing but a resource's name.
    fn take(&mut self, root: &str, id: ContextId, kv: KeyValue, texts: &mut Texts) -> Result<()> {
        let (app, cluster) = match ContextKey::parse(root, &kv.key) {
            Some(ContextKey::App(app)) => (app, None),
            Some(ContextKey::Cluster(app, cluster)) => (app, Some((cluster, None))),
            Some(ContextKey::Resource(app, cluster, name)) => (app, Some((cluster, Some(name)))),
            _ => return Ok(()),
        };
        if !self.apps.contains_key(app) {
            self.apps.insert(app.to_owned(), BTreeMap::new());
        }
        let Some(clusters) = self.apps.get_mut(app) else {
            return Ok(());
        };
        let Some((cluster, name)) = cluster else {
            return Ok(());
        };
        if !clusters.contains_key(cluster) {
            clusters.insert(cluster.to_owned(), BTreeMap::new());
        }
        let (Some(resources), Some(name)) = (clusters.get_mut(cluster), name) else {
            return Ok(());
        };
        let text = texts.intern(kv.value).map_err(|e| {
            Error::internal(format!(
                "resource {name} of app {app} on cluster {cluster} of context {id} is not a string"
            ))
            .with_source(e)
        })?;
        resources.insert(name.to_owned(), text);
        Ok(())
    }

    /// Every cluster of any app.
    fn clusters(&self) -> BTreeSet<&str> {
        self.apps
            .values()
            .flat_map(|c| c.keys().map(String::as_str))
            .collect()
    }
}

/// What placement was resolved from, to say why a cluster gets an app.
struct Why<'a> {
    intents: &'a [emco_core::placement::AppPlacementIntent],
    inventory: &'a Inventory,
}

impl Why<'_> {
    fn reasons(&self, app: &str, cluster: &str) -> Vec<Reason> {
        let Some((provider, name)) = cluster.split_once(emco_core::placement::SEPARATOR) else {
            return Vec::new();
        };
        explain(
            self.intents,
            self.inventory,
            app,
            &ClusterRef::new(provider, name),
        )
    }
}

type Empty = BTreeMap<String, usize>;

/// One object that changes on a cluster, by text ids: clusters with equal deltas are grouped
/// without copying diffs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Delta {
    app: String,
    resource: String,
    change: Change,
    before: Option<usize>,
    after: Option<usize>,
}

impl Delta {
    fn object(&self, texts: &Texts) -> ObjectChange {
        ObjectChange {
            app: self.app.clone(),
            resource: self.resource.clone(),
            change: self.change,
            diff: texts
                .diffs
                .get(&(self.before, self.after))
                .cloned()
                .flatten()
                .unwrap_or_default(),
        }
    }
}

/// The changes on `cluster` from `before` to `after`, by app then resource.
fn cluster_changes(
    before: &Manifests,
    after: &Manifests,
    cluster: &str,
    texts: &mut Texts,
    summary: &mut Summary,
) -> Vec<Delta> {
    let empty = Empty::new();
    let apps: BTreeSet<&String> = before.apps.keys().chain(after.apps.keys()).collect();
    let mut out = Vec::new();
    for app in apps {
        let old = before
            .apps
            .get(app)
            .and_then(|c| c.get(cluster))
            .unwrap_or(&empty);
        let new = after
            .apps
            .get(app)
            .and_then(|c| c.get(cluster))
            .unwrap_or(&empty);
        let names: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        for name in names {
            let (b, a) = (old.get(name).copied(), new.get(name).copied());
            if !texts.differ(app, name, b, a) {
                summary.unchanged += 1;
                continue;
            }
            let change = match (b, a) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Removed,
                _ => Change::Changed,
            };
            match change {
                Change::Added => summary.added += 1,
                Change::Changed => summary.changed += 1,
                Change::Removed => summary.removed += 1,
            }
            out.push(Delta {
                app: app.clone(),
                resource: name.clone(),
                change,
                before: b,
                after: a,
            });
        }
    }
    out
}

/// The preview of going from `before` to `after` (operation fields left for the caller).
fn compare(
    before: &Manifests,
    after: &Manifests,
    texts: &mut Texts,
    why: &Why<'_>,
    options: &PreviewOptions,
) -> Preview {
    let mut clusters: BTreeSet<&str> = before.clusters();
    clusters.extend(after.clusters());
    let mut summary = Summary {
        clusters: clusters.len(),
        ..Summary::default()
    };
    let mut groups: BTreeMap<Vec<Delta>, Vec<String>> = BTreeMap::new();
    let mut page = Vec::new();
    let wanted = options.offset..options.offset.saturating_add(options.limit);
    for (i, cluster) in clusters.iter().enumerate() {
        let deltas = cluster_changes(before, after, cluster, texts, &mut summary);
        if !deltas.is_empty() {
            summary.clusters_changed += 1;
        }
        if options.detail == Detail::Clusters && wanted.contains(&i) {
            let apps = after
                .apps
                .iter()
                .filter(|(_, c)| c.contains_key(*cluster))
                .map(|(app, _)| ClusterApp {
                    app: app.clone(),
                    reasons: why.reasons(app, cluster),
                })
                .collect();
            page.push(ClusterPreview {
                cluster: (*cluster).to_owned(),
                apps,
                objects: deltas.iter().map(|d| d.object(texts)).collect(),
            });
        }
        if options.detail == Detail::Summary && !deltas.is_empty() {
            groups
                .entry(deltas)
                .or_default()
                .push((*cluster).to_owned());
        }
    }
    let placement = after
        .apps
        .keys()
        .chain(before.apps.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|app| app_placement(before, after, app, why))
        .collect();
    let (changes, page) = match options.detail {
        Detail::Summary => {
            let mut changes: Vec<ChangeGroup> = groups
                .into_iter()
                .map(|(deltas, clusters)| ChangeGroup {
                    count: clusters.len(),
                    clusters,
                    objects: deltas.iter().map(|d| d.object(texts)).collect(),
                })
                .collect();
            // The most common change first.
            changes.sort_by(|a, b| b.count.cmp(&a.count).then(a.clusters.cmp(&b.clusters)));
            (Some(changes), None)
        }
        Detail::Clusters => (
            None,
            Some(ClusterPage {
                offset: options.offset,
                limit: options.limit,
                total: clusters.len(),
                items: page,
            }),
        ),
    };
    Preview {
        operation: String::new(),
        deployed_revision: None,
        written_for: Vec::new(),
        summary,
        placement,
        changes,
        clusters: page,
        dry_run: None,
    }
}

/// Where `app` would go, what it gains and loses, and why.
fn app_placement(before: &Manifests, after: &Manifests, app: &str, why: &Why<'_>) -> AppPlacement {
    let none = BTreeMap::new();
    let old = before.apps.get(app).unwrap_or(&none);
    let new = after.apps.get(app).unwrap_or(&none);
    let mut picked: BTreeMap<Vec<Reason>, Vec<String>> = BTreeMap::new();
    for cluster in new.keys() {
        picked
            .entry(why.reasons(app, cluster))
            .or_default()
            .push(cluster.clone());
    }
    let mut picked_by: Vec<PickedBy> = picked
        .into_iter()
        .map(|(reasons, clusters)| PickedBy {
            reasons,
            count: clusters.len(),
            clusters,
        })
        .collect();
    picked_by.sort_by(|a, b| b.count.cmp(&a.count).then(a.clusters.cmp(&b.clusters)));
    AppPlacement {
        app: app.to_owned(),
        clusters: new.len(),
        gains: new
            .keys()
            .filter(|c| !old.contains_key(*c))
            .cloned()
            .collect(),
        loses: old
            .keys()
            .filter(|c| !new.contains_key(*c))
            .cloned()
            .collect(),
        picked_by,
    }
}
