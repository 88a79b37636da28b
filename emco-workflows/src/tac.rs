//! tac, EMCO's Temporal action controller (src/tac): workflow hooks of a deployment intent
//! group's lifecycle, and the workers they need.
//!
//! Under a DIG, `temporal-action-controller/{tacIntent}` names a workflow (its client and start
//! request, as a workflowmgr intent) and when it runs: `pre-install`, `post-install`,
//! `pre-update`, `post-update`, `pre-termination`, `post-termination`. As tac's action
//! controller, [`Tac`] starts the group's hooks of a point through their workflow clients:
//! pre-install (or pre-update) when the group's context is built, pre-termination before the
//! group's resources are removed, the post hooks when the operation has been handed to rsync.
//!
//! Beyond EMCO, a hook that names its Temporal server (`spec.temporalServer`, not in EMCO's
//! schema) is followed there: a pre-hook holds its operation until the workflow closes and fails
//! it with the workflow's error when it does not complete (EMCO's tac only starts workflows).
//!
//! `{tacIntent}/workers/{workers}` names the DIG of a Temporal worker a hook needs (tac's
//! worker intents); `{tacIntent}/status` and `{tacIntent}/cancel` follow and stop a hook's
//! workflow as workflowmgr's routes do.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, Query};
use axum::routing::{get, post};
use emco_appcontext::collection::Collection;
use emco_controller_sdk::controller::Event;
use emco_controller_sdk::intent::Dig;
use emco_controller_sdk::{ActionController, ControllerContext, IntentType};
use emco_core::lifecycle::DigState;
use emco_core::lifecycle::hold::Hold;
use emco_core::{DigRef, Error, ErrorKind, Metadata, Object, Result};
use emco_rest::{
    ApiError, EmcoJson, KeyPattern, PutStatus, RawBody, Routes, Wording, item_key, json_response,
};
use emco_runtime::metrics::{Counter, Family, Histogram};
use emco_store::{ResourceKey, ResourceStore};
use http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::model::{CancelSpec, ClientEndpoint, StatusQuery, TemporalSpec};
use crate::rest::{Config, Invoker, follow_defaulted, stop};
use crate::temporal::Temporal;

/// The hook points, as tac's `hookType` names them.
pub const HOOK_TYPES: [&str; 6] = [
    "pre-install",
    "post-install",
    "pre-update",
    "post-update",
    "pre-termination",
    "post-termination",
];

/// The name the DIG's intents and the controller registration give tac.
pub const TAC: &str = "tac";

/// `DIG/temporal-action-controller/{tacIntent}`: a workflow hook (tac's `WorkflowHookIntent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// api/intent_handler.go createOrUpdate: json-schemas/tac_intent.json; tac's apierrors.go texts.
#[object(schema = HOOK_SCHEMA, empty_body = "empty post body",
    undecodable = undecodable)]
#[intent(parent = Dig, segment = "temporal-action-controller", param = "tacIntent",
    wording = hook_wording("Workflow Hook not found", "workflow hook intent already exists"))]
pub struct WorkflowHook {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// When and what.
    #[serde(default)]
    pub spec: HookSpec,
}

/// The `spec` of a [`WorkflowHook`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookSpec {
    /// One of [`HOOK_TYPES`].
    #[serde(default)]
    pub hook_type: String,
    /// The workflow client.
    #[serde(default)]
    pub workflow_client: ClientEndpoint,
    /// What the client starts.
    #[serde(default)]
    pub temporal: TemporalSpec,
    /// Ours: the Temporal frontend (`host:port`) the workflow runs on (else the server's
    /// `--temporal-server`); a pre-hook followed on one holds its operation until the workflow
    /// closes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub temporal_server: String,
}

/// `.../{tacIntent}/workers/{workers}`: a Temporal worker's DIG (tac's `WorkerIntent`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// api/workers_intent_handler.go: json-schemas/deploy_worker.json; POST and PUT answer 201.
#[object(schema = WORKER_SCHEMA, empty_body = "empty post body",
    undecodable = undecodable)]
#[intent(parent = WorkflowHook, segment = "workers", param = "workers",
    wording = hook_wording("Worker not found", "Worker already exists"))]
pub struct WorkerIntent {
    /// Name and descriptions.
    #[serde(default)]
    pub metadata: Metadata,
    /// The worker's DIG.
    #[serde(default)]
    pub spec: WorkerSpec,
}

/// The `spec` of a [`WorkerIntent`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// How long the worker may take to come up.
    #[serde(default, rename = "startToCloseTimeout")]
    pub start_to_close_timeout: i64,
    /// The worker's deployment intent group (in the hook's project).
    #[serde(default, rename = "deploymentIntentGroup")]
    pub dig: String,
    /// Its composite app.
    #[serde(default, rename = "compositeApp")]
    pub composite_app: String,
    /// Its version.
    #[serde(default, rename = "compositeAppVersion")]
    pub composite_app_version: String,
}

impl WorkerSpec {
    /// The worker's deployment intent group, in `project`.
    #[must_use]
    pub fn group(&self, project: &str) -> DigRef {
        DigRef::new(
            project,
            &self.composite_app,
            &self.composite_app_version,
            &self.dig,
        )
    }
}

/// tac's note on a context: the worker groups it instantiated, by the pre point whose hooks
/// needed them, to terminate after the operation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Workers {
    started: BTreeMap<String, Vec<DigRef>>,
}

/// How often a worker group's readiness is checked.
const WORKER_POLL: Duration = Duration::from_millis(500);

/// The body of `POST .../{tacIntent}/cancel` (`WfhTemporalCancelRequest`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, Object)]
// api/intent_handler.go handleTemporalWorkflowHookCancel: io.EOF a 400 `EOF`, then
// json-schemas/cancel_request.json (tac's own, unlike workflowmgr's).
#[object(schema = CANCEL_SCHEMA, empty_body = "EOF", undecodable = str::to_owned)]
pub struct HookCancelRequest {
    /// Informational.
    #[serde(default)]
    pub metadata: Metadata,
    /// What to cancel and how.
    #[serde(default)]
    pub spec: CancelSpec,
}

/// The body of `GET .../{tacIntent}/status` (`WfTemporalStatusQuery` as JSON; tac's schema
/// checks nothing).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody {
    #[serde(default)]
    temporal_server: String,
    #[serde(default, rename = "workflowID")]
    workflow_id: String,
    #[serde(default, rename = "runID")]
    run_id: String,
    #[serde(default)]
    wait_for_result: bool,
    #[serde(default)]
    run_describe_wf_exec: bool,
    #[serde(default)]
    get_wf_history: bool,
    #[serde(default)]
    query_type: String,
}

fn undecodable(_: &str) -> String {
    "error decoding json body".to_owned()
}

fn hook_wording(not_found: &'static str, exists: &'static str) -> Wording {
    let mut w = Wording::new(not_found, exists).with_put(PutStatus::Created);
    w.empty_list = emco_rest::EmptyList::Null;
    w
}

emco_go::schemas! {
    HOOK_SCHEMA = "../schemas/tac_intent.json";
    WORKER_SCHEMA = "../schemas/deploy_worker.json";
    CANCEL_SCHEMA = "../schemas/tac_cancel_request.json";
}

/// What tac's hooks did in this process, as Prometheus metrics (process-wide: every tac of
/// the process counts here, as the server's `/metrics` shows them).
#[derive(Debug)]
pub struct HookMetrics {
    /// `emco_workflow_hooks_total{point,result}`: hooks run, by point and result (`started`,
    /// `start_failed`, `completed`, `failed`).
    pub hooks: Counter,
    /// `emco_workflow_hook_wait_seconds{point,result}`: how long operations waited for their
    /// pre-hooks' workflows, by how the wait ended.
    pub waits: Histogram,
}

/// Hook workflows take seconds to hours.
const WAIT_BUCKETS: &[f64] = &[1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0];

static METRICS: std::sync::LazyLock<HookMetrics> = std::sync::LazyLock::new(|| HookMetrics {
    hooks: Counter::new(
        "emco_workflow_hooks_total",
        "Workflow hooks of tac, by point and result (started, start_failed, completed, failed).",
        &["point", "result"],
    ),
    waits: Histogram::new(
        "emco_workflow_hook_wait_seconds",
        "How long operations waited for their pre-hooks' workflows, by point and result.",
        &["point", "result"],
        WAIT_BUCKETS,
    ),
});

impl HookMetrics {
    /// This process's.
    #[must_use]
    pub fn get() -> &'static Self {
        &METRICS
    }

    /// The families, to render.
    #[must_use]
    pub fn families(&self) -> Vec<&dyn Family> {
        vec![&self.hooks, &self.waits]
    }
}

/// What a held operation waits for: a pre-hook's workflow to complete (a hold's `what`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Awaited {
    point: String,
    hook: String,
    #[serde(rename = "workflowID")]
    workflow_id: String,
    temporal_server: String,
}

impl Awaited {
    fn describe(&self) -> String {
        format!(
            "{} hook {}: workflow {} on {}",
            self.point, self.hook, self.workflow_id, self.temporal_server
        )
    }
}

/// tac: the action controller, calling workflow clients and Temporal servers within its
/// [`Config`].
#[derive(Debug, Clone)]
pub struct Tac {
    name: String,
    in_process: bool,
    config: Arc<Config>,
    invoker: Invoker,
}

impl Tac {
    /// tac, registered as [`TAC`], calling workflow clients and Temporal servers within
    /// `config`.
    #[must_use]
    pub fn new(config: Config) -> Self {
        Self {
            name: TAC.to_owned(),
            in_process: true,
            invoker: Invoker::new(config.invoke),
            config: Arc::new(config),
        }
    }

    /// tac served alone over EMCO's controller protocol (`emco-server --serve-controller
    /// tac`): the orchestrator cannot wait for a hold through it, so a pre-hook holds the
    /// UpdateAppContext call itself (bounded by the caller's controller timeout).
    #[must_use]
    pub fn remote(mut self) -> Self {
        self.in_process = false;
        self
    }

    /// Runs the hooks of `point` of the DIG `cx` was built for, in creation order: each workflow
    /// is started through its client and, for a pre-hook followed on a Temporal server (its own
    /// or the default), held for: pre-install and pre-update by a hold on the new context (the
    /// operation is recorded and the context handed over once the workflow completed, also by
    /// the next process), pre-termination here, before anything is recorded. A preview starts
    /// nothing.
    ///
    /// # Errors
    /// tac's `Failed to run workflow in HOOK hook: NAME: ...` when a start fails; a pre-hook
    /// whose workflow fails, is cancelled, terminated or times out fails with its error.
    pub async fn run(&self, cx: &ControllerContext, point: &str) -> Result<()> {
        if cx.previewing() {
            tracing::debug!(point, "a preview starts no workflow hook");
            return Ok(());
        }
        let dig = cx.dig_key().await?;
        let mut hooks = cx.children::<WorkflowHook>(&dig).await?;
        hooks.retain(|(_, h)| h.spec.hook_type == point);
        match point.strip_prefix("post-") {
            Some(event) => self.clean_up_workers(cx, &format!("pre-{event}")).await?,
            None => self.deploy_workers(cx, point, &hooks).await?,
        }
        for (_, hook) in &hooks {
            let name = &hook.metadata.name;
            tracing::info!(%dig, hook = %name, point, "starting a workflow hook");
            let started = self
                .invoker
                .start(&hook.spec.workflow_client, &hook.spec.temporal)
                .await;
            let result = if started.is_ok() {
                "started"
            } else {
                "start_failed"
            };
            METRICS.hooks.inc(&[point, result]);
            started.map_err(|e| {
                wrapped(
                    e,
                    format_args!("Failed to run workflow in {point} hook: {name}"),
                )
            })?;
            let server = self.config.server(&hook.spec.temporal_server);
            if !point.starts_with("pre-") || server.is_empty() {
                continue;
            }
            let awaited = Awaited {
                point: point.to_owned(),
                hook: name.clone(),
                workflow_id: hook.spec.temporal.workflow_start_options.id.clone(),
                temporal_server: server.to_owned(),
            };
            if point == "pre-termination" || !self.in_process {
                // Nothing is recorded before a terminate, and an orchestrator calling tac over
                // gRPC cannot wait for a hold: it waits here, within the call.
                self.wait(&awaited).await?;
            } else {
                let what = serde_json::to_value(&awaited)
                    .map_err(|e| Error::internal("cannot encode a hold").with_source(e))?;
                cx.hold(&self.name, what, awaited.describe()).await?;
            }
        }
        Ok(())
    }

    /// Deploys the worker groups the `point` hooks name before they start (tac's
    /// getWorkers, verifyWorkers and deployWorkers): an Approved or Terminated group is
    /// instantiated, noted on the context (for [`Self::clean_up_workers`], also by the next
    /// process) and waited for until Ready within its `startToCloseTimeout` (milliseconds, at
    /// least one check); a deployed one (Instantiated, Updated) is left as it is, whoever runs
    /// it; any other state fails the operation.
    async fn deploy_workers(
        &self,
        cx: &ControllerContext,
        point: &str,
        hooks: &[(ResourceKey, WorkflowHook)],
    ) -> Result<()> {
        let mut workers = Vec::new();
        for (key, _) in hooks {
            workers.extend(cx.children::<WorkerIntent>(key).await?);
        }
        if workers.is_empty() {
            return Ok(());
        }
        let meta = cx.meta().await?;
        let (project, group) = (meta.project, meta.deployment_intent_group);
        let groups = cx.groups()?;
        let mut started = Vec::new();
        for (_, worker) in &workers {
            let target = worker.spec.group(&project);
            let unverified = |e: Error| {
                wrapped(
                    e,
                    format_args!(
                        "Failed to verify all workers were approved or already started: {group}: worker {}",
                        worker.metadata.name
                    ),
                )
            };
            let state = groups.state(&target).await.map_err(|e| {
                // A worker naming no group is the hook's fault, not the instantiated group's.
                unverified(match e.kind() {
                    ErrorKind::NotFound => Error::failed_precondition(e.message()),
                    _ => e,
                })
            })?;
            match state {
                DigState::Approved | DigState::Terminated => started.push((target, worker)),
                DigState::Instantiated | DigState::Updated => {
                    tracing::info!(worker = %worker.metadata.name, %target, "the worker group is deployed already: tac leaves it");
                }
                other => {
                    let why = Error::failed_precondition(format!("{target} is {other}"));
                    return Err(unverified(why));
                }
            }
        }
        if started.is_empty() {
            return Ok(());
        }
        let ctx = cx.handle().app_context();
        let (mut note, revision) = ctx.note::<Workers>(&self.name).await?.unwrap_or_default();
        let noted = note.started.entry(point.to_owned()).or_default();
        noted.extend(started.iter().map(|(t, _)| t.clone()));
        ctx.put_note(&self.name, &note, revision).await?;
        let not_started = |name: &str, e: Error| {
            wrapped(
                e,
                format_args!("Failed to start all workers before timeout: {group}: worker {name}"),
            )
        };
        for (target, worker) in &started {
            tracing::info!(worker = %worker.metadata.name, %target, point, "instantiating a worker group");
            groups
                .instantiate(target)
                .await
                .map_err(|e| not_started(&worker.metadata.name, e))?;
        }
        let began = tokio::time::Instant::now();
        for (target, worker) in &started {
            let limit =
                Duration::from_millis(worker.spec.start_to_close_timeout.max(0).unsigned_abs());
            while !groups.ready(target).await? {
                if began.elapsed() >= limit {
                    let late = Error::unavailable(format!("{target} is not Ready after {limit:?}"));
                    return Err(not_started(&worker.metadata.name, late));
                }
                tokio::time::sleep(WORKER_POLL.min(limit)).await;
            }
        }
        Ok(())
    }

    /// Terminates the worker groups deployed for the hooks of `pre` (tac's cleanUpWorkers, only
    /// of the groups it instantiated) once the operation was handed over.
    async fn clean_up_workers(&self, cx: &ControllerContext, pre: &str) -> Result<()> {
        let ctx = cx.handle().app_context();
        let Some((mut note, revision)) = ctx.note::<Workers>(&self.name).await? else {
            return Ok(());
        };
        let Some(started) = note.started.remove(pre) else {
            return Ok(());
        };
        let groups = cx.groups()?;
        for target in &started {
            if matches!(
                groups.state(target).await?,
                DigState::Instantiated | DigState::Updated
            ) {
                tracing::info!(%target, "terminating a worker group");
                groups.terminate(target).await.map_err(|e| {
                    wrapped(
                        e,
                        format_args!("Failed to delete the workers after use: {target}"),
                    )
                })?;
            }
        }
        ctx.put_note(&self.name, &note, revision).await.map(drop)
    }

    /// Waits until the workflow of `awaited` closes; an error unless it completed. Counted and
    /// timed in [`HookMetrics`].
    async fn wait(&self, awaited: &Awaited) -> Result<()> {
        let began = std::time::Instant::now();
        let outcome = self.wait_closed(awaited).await;
        let result = if outcome.is_ok() {
            "completed"
        } else {
            "failed"
        };
        METRICS.hooks.inc(&[&awaited.point, result]);
        METRICS
            .waits
            .observe(&[&awaited.point, result], began.elapsed().as_secs_f64());
        outcome
    }

    async fn wait_closed(&self, awaited: &Awaited) -> Result<()> {
        let Awaited {
            point,
            hook,
            workflow_id: id,
            temporal_server,
        } = awaited;
        let temporal = Temporal::connect(temporal_server, self.config.temporal).await?;
        let closed = temporal
            .wait_closed(id, "", self.config.temporal.wait)
            .await?;
        tracing::info!(%hook, %point, workflow = %id, status = closed.status, "a workflow hook closed");
        if closed.completed() {
            return Ok(());
        }
        Err(Error::failed_precondition(format!(
            "{point} hook {hook}: workflow {id} {}: {}",
            closed.status.to_lowercase(),
            closed.message.as_deref().unwrap_or("no reason given")
        )))
    }

    /// The routes over `store`: hooks (`POST`, `GET`, `PUT`, `DELETE`), their workers, `status`
    /// and `cancel`.
    pub fn routes<S: Clone + Send + Sync + 'static>(
        &self,
        store: Arc<dyn ResourceStore>,
    ) -> Router<S> {
        let collection = format!("/v2{}", WorkflowHook::collection_path());
        let hooks = Routes::<WorkflowHook>::new(&collection, WorkflowHook::PARAM)
            .serve(WorkflowHook::collection(Arc::clone(&store)));
        let workers = Routes::<WorkerIntent>::new(
            format!("/v2{}", WorkerIntent::collection_path()),
            WorkerIntent::PARAM,
        )
        .serve(WorkerIntent::collection(Arc::clone(&store)));
        let item = format!("{collection}/{{{}}}", WorkflowHook::PARAM);
        let found = Found {
            hooks: Arc::new(WorkflowHook::collection(store)),
            parent: Arc::new(KeyPattern::parse(&WorkflowHook::collection_path())),
        };

        let (t, f) = (self.clone(), found.clone());
        let status = move |Path(params): Path<HashMap<String, String>>,
                           Query(pairs): Query<Vec<(String, String)>>,
                           RawBody(body): RawBody| async move {
            let query = if body.iter().all(u8::is_ascii_whitespace) {
                // Ours: a GET with a query (a browser's fetch sends no body) reads as
                // workflowmgr's; without either it is tac's io.EOF.
                if pairs.is_empty() {
                    return Err(Error::invalid("EOF").into());
                }
                StatusQuery::parse(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))?
            } else {
                let b: StatusBody = emco_go::json::from_slice(&body).map_err(|e| {
                    ApiError::with_status(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
                })?;
                StatusQuery {
                    temporal_server: b.temporal_server,
                    workflow_id: b.workflow_id,
                    run_id: b.run_id,
                    wait_for_result: b.wait_for_result,
                    describe: b.run_describe_wf_exec,
                    history: b.get_wf_history,
                    query_type: b.query_type,
                }
            };
            let id = async {
                let hook = f.hook(&params).await?;
                Ok(hook.spec.temporal.workflow_start_options.id)
            };
            let answer = follow_defaulted(&t.config, query, id)
                .await
                .map_err(tac_text)?;
            Ok::<_, ApiError>(json_response(StatusCode::OK, &answer))
        };
        let (t, f) = (self.clone(), found);
        let cancel = move |Path(params): Path<HashMap<String, String>>, RawBody(body): RawBody| async move {
            let mut request = EmcoJson::<HookCancelRequest>::parse(&body)?;
            let server = t.config.server(&request.spec.temporal_server).to_owned();
            if server.is_empty() {
                return Err(Error::invalid(":: Temporal Server endpoint is required.").into());
            }
            request.spec.temporal_server = server;
            let hook = f.hook(&params).await?;
            let id = &hook.spec.temporal.workflow_start_options.id;
            stop(t.config.temporal, id, &request.spec).await?;
            Ok::<_, ApiError>(StatusCode::NO_CONTENT)
        };
        hooks
            .merge(workers)
            .route(&format!("{item}/status"), get(status))
            .route(&format!("{item}/cancel"), post(cancel))
    }
}

/// The hook a route names.
#[derive(Debug, Clone)]
struct Found {
    hooks: Arc<Collection<WorkflowHook>>,
    parent: Arc<KeyPattern>,
}

impl Found {
    async fn hook(&self, params: &HashMap<String, String>) -> Result<WorkflowHook> {
        let (parent, name) = item_key(&self.parent, WorkflowHook::PARAM, params)?;
        self.hooks.get(&parent, &name).await
    }
}

/// `e` under tac's words for the step that failed, as Go's `errors.Wrapf` puts them.
fn wrapped(e: Error, step: std::fmt::Arguments<'_>) -> Error {
    Error::new(e.kind(), format!("{step}: {}", e.message()))
}

/// tac's module words workflowmgr's status errors in lower case, and its "got no result" without
/// the period (src/tac/pkg/module/intent.go); other errors keep their texts.
fn tac_text(e: Error) -> Error {
    const WORKFLOWMGR: [&str; 4] = [
        "Failed to connect to Temporal server",
        "Query failed",
        "Got no result",
        "Failed to get result",
    ];
    let message = e.message();
    if !WORKFLOWMGR.iter().any(|p| message.starts_with(p)) {
        return e;
    }
    let mut chars = message.chars();
    let Some(first) = chars.next() else { return e };
    let mut text: String = first.to_lowercase().chain(chars).collect();
    if text.starts_with("got no result") {
        text = text.trim_end_matches('.').to_owned();
    }
    Error::new(e.kind(), text)
}

#[async_trait]
impl ActionController for Tac {
    /// tac's `UpdateAppContext`: the pre-update hooks of an update, else the pre-install hooks.
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        let point = if cx.update_from().is_some() {
            "pre-update"
        } else {
            "pre-install"
        };
        self.run(cx, point).await
    }

    /// A pre-hook's hold: done when its workflow completed.
    async fn await_hold(&self, _cx: &mut ControllerContext, hold: &Hold) -> Result<()> {
        let awaited: Awaited = serde_json::from_value(hold.what.clone())
            .map_err(|e| Error::invalid(format!("not a hold of tac: {e}")))?;
        self.wait(&awaited).await
    }

    /// The pre-termination hooks run before the group's resources are removed.
    async fn before_terminate(&self, cx: &mut ControllerContext) -> Result<()> {
        self.run(cx, "pre-termination").await
    }

    /// tac's `PostEvent`: the post hooks of the operation.
    async fn post_event(&self, cx: &mut ControllerContext, event: Event) -> Result<()> {
        let point = match event {
            Event::Instantiate => "post-install",
            Event::Terminate => "post-termination",
            Event::Update => "post-update",
        };
        self.run(cx, point).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// src/tac/pkg/module/intent.go words workflowmgr's texts in lower case.
    #[test]
    fn tac_words_status_errors_as_its_module() {
        let cases = [
            (
                "Failed to connect to Temporal server (h:1). Error: refused",
                "failed to connect to Temporal server (h:1). Error: refused",
            ),
            (
                "Got no result for query (state).",
                "got no result for query (state)",
            ),
            (
                "Query failed (state). Error: x",
                "query failed (state). Error: x",
            ),
            ("Workflow Hook not found", "Workflow Hook not found"),
        ];
        for (from, to) in cases {
            assert_eq!(tac_text(Error::unavailable(from)).message(), to);
        }
    }
}
