//! Building the AppContext of one deployment (EMCO.md section 4): load the group and what it
//! names, render every app, resolve placement, write one context, run the placement
//! controllers, keep one cluster per anyOf group, run the action controllers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use emco_appcontext::AppContext;
use emco_appcontext::context::{AppDependency as CtxDependency, CompositeAppMeta};
use emco_controller_sdk::{ContextHandle, ControllerRegistry};
use emco_core::lifecycle::AppContextStatus;
use emco_core::model::DeploymentIntentGroup;
use emco_core::placement::{
    AppPlacementIntent, ClusterRef, Inventory, Placement, finalize, resolve,
};
use emco_core::{ContextId, DigRef, Error, ErrorKind, Found, Result};
use emco_store::{AppContextStore, ResourceKey};

use super::Deployments;
use super::render::{RenderInput, RenderedApp, render_app};
use crate::builder::read_blob;
use crate::dcm::{DeployCloud, cloud_for_deployment};
use crate::keys;

/// The intents of a group: controller (or `genericPlacementIntent`) -> intent name, merged over
/// its DIG intents in name order.
pub(crate) async fn dig_intents(orch: &Deployments, dig: &ResourceKey) -> Result<DigIntentMap> {
    let mut merged = BTreeMap::new();
    let mut placement = None;
    for di in orch.records.objects.dig_intents().list(dig, &[]).await? {
        if placement.is_none() {
            placement = di.generic_placement_intent().map(str::to_owned);
        }
        merged.extend(di.spec.intent);
    }
    Ok(DigIntentMap {
        intents: merged,
        placement,
    })
}

/// The merged intents of a group.
#[derive(Debug, Clone, Default)]
pub(crate) struct DigIntentMap {
    /// Controller name -> intent name (the generic placement intent key included; no controller
    /// has that name).
    pub(crate) intents: BTreeMap<String, String>,
    /// The generic placement intent named.
    pub(crate) placement: Option<String>,
}

/// One app with everything its rendering needs.
struct AppInput {
    name: String,
    chart: Vec<u8>,
    profile: Option<Vec<u8>>,
    set: Vec<String>,
    dependencies: Vec<CtxDependency>,
}

/// Builds the AppContext deploying the group `dig` at `key` and runs its controllers;
/// `update_from` is the context it replaces (update, migrate). On failure nothing is left
/// behind.
///
/// # Errors
/// NotFound for a missing piece; InvalidArgument for a bad chart, profile or placement;
/// FailedPrecondition when the logical cloud is not instantiated or nothing can be placed; a
/// controller's failure, naming it.
pub(crate) async fn build_context(
    orch: &Deployments,
    key: &ResourceKey,
    dig: &DeploymentIntentGroup,
    update_from: Option<ContextId>,
) -> Result<AppContext> {
    let site = Site {
        contexts: Arc::clone(orch.records.contexts()),
        registry: &orch.controllers,
    };
    build_in(orch, key, dig, update_from, &site)
        .await
        .map(|b| b.ctx)
}

/// Where a context is built: the AppContext store it is written to and the controllers that
/// run on it (a preview's scratch store and controllers working on it).
pub(crate) struct Site<'a> {
    pub(crate) contexts: Arc<dyn AppContextStore>,
    pub(crate) registry: &'a ControllerRegistry,
}

/// A built context with what placement was resolved from, for a preview to explain it.
pub(crate) struct Built {
    pub(crate) ctx: AppContext,
    pub(crate) intents: Vec<AppPlacementIntent>,
    pub(crate) inventory: Inventory,
}

/// [`build_context`] at `site`.
pub(crate) async fn build_in(
    orch: &Deployments,
    key: &ResourceKey,
    dig: &DeploymentIntentGroup,
    update_from: Option<ContextId>,
    site: &Site<'_>,
) -> Result<Built> {
    let started = std::time::Instant::now();
    let path = keys::dig_ref(key)?;
    let cloud = cloud_for_deployment(
        &orch.records.objects,
        &path.project,
        &dig.spec.logical_cloud,
    )
    .await?;
    let intents = dig_intents(orch, key).await?;
    let gpi = intents.placement.clone().ok_or_else(|| {
        Error::failed_precondition(format!(
            "deployment intent group {:?} has no DIG intent naming a genericPlacementIntent",
            path.dig
        ))
    })?;
    let gpi_key = key.child(keys::GENERIC_PLACEMENT_INTENT, gpi.as_str());
    if orch.records.store().get(&gpi_key).await?.is_none() {
        return Err(Error::not_found(format!(
            "generic placement intent {gpi:?} named by the DIG intents does not exist"
        )));
    }
    let app_intents: Vec<AppPlacementIntent> = orch
        .records
        .objects
        .app_placement_intents()
        .list(&gpi_key, &[])
        .await?;
    let apps = load_apps(orch, &path, dig, &app_intents, &gpi).await?;
    let inventory = inventory(orch, &cloud, &app_intents).await?;
    let placements = resolve(&app_intents, &inventory).map_err(|e| match e.kind() {
        // "No compatible clusters": the intents select nothing in the logical cloud, which is
        // the caller's to fix (400), like a mandatory cluster outside it.
        ErrorKind::FailedPrecondition => {
            let invalid = Error::invalid(e.message().to_owned());
            match e.field() {
                Some(f) => invalid.with_field(f),
                None => invalid,
            }
        }
        _ => e,
    })?;
    let rendered = render_all(orch, &apps, dig, &cloud).await?;
    let drift = orch
        .records
        .objects
        .drift_policies()
        .list(key, &[])
        .await?
        .pop();

    let meta = CompositeAppMeta {
        project: path.project.clone(),
        composite_app: path.composite_app.clone(),
        version: path.version.clone(),
        release: dig.spec.version.clone(),
        deployment_intent_group: path.dig.clone(),
        namespace: cloud.namespace.clone(),
        level: cloud.level.clone(),
        child_context_ids: None,
        logical_cloud: cloud.name.clone(),
        logical_cloud_namespace: cloud.namespace.clone(),
    };
    let ctx = AppContext::create(Arc::clone(&site.contexts), &meta).await?;
    let built = async {
        let drift = drift.as_ref().map(|p| &p.spec);
        let rendered_at = started.elapsed();
        write_context(&ctx, &apps, &placements, &rendered, drift).await?;
        let written_at = started.elapsed();
        let run = Run {
            intents: &intents.intents,
            placements: &placements,
            update_from,
        };
        run_controllers(orch, site.registry, &ctx, &run).await?;
        // Where a build's time goes at scale: placement and rendering, the context's writes,
        // the controllers.
        tracing::debug!(
            ctx = %ctx.id(),
            render_ms = rendered_at.as_millis(),
            write_ms = (written_at - rendered_at).as_millis(),
            controllers_ms = (started.elapsed() - written_at).as_millis(),
            "context built"
        );
        Ok(())
    };
    match built.await {
        Ok(()) => Ok(Built {
            ctx,
            intents: app_intents,
            inventory,
        }),
        Err(e) => {
            if let Err(undo) = ctx.delete().await {
                tracing::warn!(ctx = %ctx.id(), error = %undo, "cannot delete a half-built context");
            }
            Err(e)
        }
    }
}

/// The apps of the composite app with their charts, profiles, override values and
/// dependencies, sorted by name. Every app needs a chart, a profile in the group's composite
/// profile and a placement intent.
async fn load_apps(
    orch: &Deployments,
    path: &DigRef,
    dig: &DeploymentIntentGroup,
    app_intents: &[AppPlacementIntent],
    gpi: &str,
) -> Result<Vec<AppInput>> {
    let ca = keys::composite_app(&path.project, &path.composite_app, &path.version);
    let mut apps = orch.records.objects.apps().list(&ca, &[]).await?;
    if apps.is_empty() {
        return Err(Error::failed_precondition(format!(
            "composite app {:?} version {:?} has no apps",
            path.composite_app, path.version
        )));
    }
    apps.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let cp_name = dig.spec.composite_profile.as_str();
    let cp = ca.child(keys::COMPOSITE_PROFILE, cp_name);
    if orch.records.store().get(&cp).await?.is_none() {
        return Err(Error::not_found(format!(
            "composite profile {cp_name:?} does not exist"
        )));
    }
    let profiles = orch.records.objects.app_profiles().list(&cp, &[]).await?;
    let mut out = Vec::with_capacity(apps.len());
    for app in apps {
        let name = app.metadata.name;
        if !app_intents.iter().any(|i| i.spec.app == name) {
            return Err(Error::not_found(format!(
                "app {name:?} has no app placement intent in generic placement intent {gpi:?}"
            )));
        }
        let app_key = ca.child(keys::APP, name.as_str());
        let chart = read_blob(orch.records.store().as_ref(), &app_key, keys::FILE_BLOB)
            .await?
            .ok_or_else(|| Error::not_found(format!("app {name:?} has no chart")))?;
        let profile = profiles
            .iter()
            .find(|p| p.spec.app == name)
            .ok_or_else(|| {
                Error::not_found(format!(
                    "app {name:?} has no profile in composite profile {cp_name:?}"
                ))
            })?;
        let profile_key = cp.child(keys::APP_PROFILE, profile.metadata.name.as_str());
        let profile =
            read_blob(orch.records.store().as_ref(), &profile_key, keys::FILE_BLOB).await?;
        let set = dig
            .override_values_for(&name)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let dependencies = orch
            .records
            .objects
            .app_dependencies()
            .list(&app_key, &[])
            .await?
            .into_iter()
            .map(|d| CtxDependency {
                app: d.spec.app,
                op_status: d.spec.op_status,
                wait: u64::try_from(d.spec.wait).unwrap_or(0),
            })
            .collect();
        out.push(AppInput {
            name,
            chart,
            profile,
            set,
            dependencies,
        });
    }
    Ok(out)
}

/// The clusters placement may choose from: every cluster of the providers the intents and the
/// logical cloud name, with their labels, restricted to the logical cloud's members.
async fn inventory(
    orch: &Deployments,
    cloud: &DeployCloud,
    intents: &[AppPlacementIntent],
) -> Result<Inventory> {
    let mut providers: BTreeSet<&str> = cloud.clusters.iter().map(|(p, _)| p.as_str()).collect();
    for i in intents {
        for all in &i.spec.intent.all_of {
            providers.insert(&all.cluster_provider);
            providers.extend(all.any_of.iter().map(|a| a.cluster_provider.as_str()));
        }
        providers.extend(
            i.spec
                .intent
                .any_of
                .iter()
                .map(|a| a.cluster_provider.as_str()),
        );
    }
    let mut builder = Inventory::builder();
    for provider in providers {
        // Placement reports a missing provider with the entry that names it.
        let Some(clusters) = orch
            .records
            .objects
            .clusters_with_labels(provider)
            .await
            .found()?
        else {
            continue;
        };
        for c in clusters {
            builder.add_cluster(
                ClusterRef::new(provider, &c.metadata.name),
                c.labels.into_iter().map(|l| l.cluster_label),
            );
        }
    }
    Ok(builder
        .logical_cloud(cloud.clusters.iter().map(|(p, c)| ClusterRef::new(p, c)))
        .build())
}

/// Renders every app, each on a blocking thread, all at once.
async fn render_all(
    orch: &Deployments,
    apps: &[AppInput],
    dig: &DeploymentIntentGroup,
    cloud: &DeployCloud,
) -> Result<BTreeMap<String, RenderedApp>> {
    let (max_unpacked, helm) = (orch.records.objects.limits().max_unpacked, orch.helm);
    let tasks = apps.iter().map(|a| {
        let (name, chart, profile, set) = (
            a.name.clone(),
            a.chart.clone(),
            a.profile.clone(),
            a.set.clone(),
        );
        let release = dig.spec.version.clone();
        let namespace = cloud.namespace.clone();
        tokio::task::spawn_blocking(move || {
            let input = RenderInput {
                app: &name,
                chart: &chart,
                profile: profile.as_deref(),
                release: &release,
                namespace: &namespace,
                max_unpacked,
                helm,
            };
            render_app(&input, set).map(|r| (name.clone(), r))
        })
    });
    let mut out = BTreeMap::new();
    for joined in futures::future::join_all(tasks).await {
        let (name, rendered) = joined
            .map_err(|e| Error::internal("a chart rendering task failed").with_source(e))??;
        out.insert(name, rendered);
    }
    Ok(out)
}

/// Writes the apps, their candidate clusters (with group numbers), resources, orders, hooks and
/// dependencies, and the group's drift policy, into `ctx` in batched transactions.
async fn write_context(
    ctx: &AppContext,
    apps: &[AppInput],
    placements: &[Placement],
    rendered: &BTreeMap<String, RenderedApp>,
    drift: Option<&emco_core::drift::DriftSpec>,
) -> Result<()> {
    let mut w = ctx.writer();
    w.set_status(AppContextStatus::Created)?;
    if let Some(policy) = drift {
        w.set_drift_policy(policy)?;
    }
    let order: Vec<&str> = apps.iter().map(|a| a.name.as_str()).collect();
    w.set_app_order(&order)?;
    w.set_app_dependency_instruction(
        &order
            .iter()
            .map(|a| ((*a).to_owned(), "go".to_owned()))
            .collect(),
    )?;
    for app in apps {
        let name = app.name.as_str();
        let (Some(placement), Some(r)) = (
            placements.iter().find(|p| p.app == name),
            rendered.get(name),
        ) else {
            return Err(Error::internal(format!(
                "app {name:?} was not placed or rendered"
            )));
        };
        w.add_app(name)?;
        if !app.dependencies.is_empty() {
            w.set_app_dependencies(name, &app.dependencies)?;
        }
        // Every candidate with its group: a mandatory cluster's own group wins, then the
        // first anyOf group listing it.
        let mut groups: BTreeMap<&str, u32> = BTreeMap::new();
        for (i, c) in placement.mandatory.iter().enumerate() {
            groups.insert(c.as_str(), Placement::mandatory_group(i));
        }
        for g in &placement.any_of {
            for c in &g.clusters {
                groups.entry(c.as_str()).or_insert(g.number);
            }
        }
        let res_order: Vec<&str> = r.order.iter().map(String::as_str).collect();
        for (cluster, group) in groups {
            w.add_cluster(name, cluster, Some(&group.to_string()))?;
            for (res, yaml) in &r.resources {
                w.add_resource(name, cluster, res, yaml)?;
            }
            w.set_resource_order(name, cluster, &res_order)?;
            w.set_hook_groups(name, cluster, &r.hooks)?;
        }
    }
    w.flush().await?;
    Ok(())
}

/// What the controllers of one build are run with.
#[derive(Clone, Copy)]
struct Run<'a> {
    intents: &'a BTreeMap<String, String>,
    placements: &'a [Placement],
    update_from: Option<ContextId>,
}

/// Runs the placement controllers, keeps one cluster per anyOf group of what they left, then
/// runs the action controllers.
async fn run_controllers(
    orch: &Deployments,
    registry: &ControllerRegistry,
    ctx: &AppContext,
    run: &Run<'_>,
) -> Result<()> {
    let Run {
        intents,
        placements,
        update_from,
    } = *run;
    let controllers = orch.registered_controllers().await?;
    registry.place(&controllers, intents, ctx.id()).await?;
    let mut handle = ContextHandle::new(ctx.clone());
    for p in placements {
        let present: BTreeSet<String> = handle.clusters(&p.app).await?.into_iter().collect();
        let kept =
            finalize(p, |c| present.contains(c.as_str()), orch.any_of.as_ref()).map_err(|e| {
                Error::new(
                    e.kind(),
                    format!("after the placement controllers: {}", e.message()),
                )
            })?;
        let kept: BTreeSet<&str> = kept.clusters.iter().map(|c| c.cluster.as_str()).collect();
        for c in &present {
            if !kept.contains(c.as_str()) {
                handle.remove_cluster(&p.app, c).await?;
            }
        }
    }
    handle.commit().await?;
    registry
        .act(&controllers, intents, ctx.id(), update_from)
        .await
}
