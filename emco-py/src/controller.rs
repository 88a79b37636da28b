//! Action and placement controllers written in Python, run in-process by an embedded
//! orchestrator.
//!
//! An action controller's `update(ctx)` (and `terminate(ctx)` when it has one), a placement
//! controller's `filter_clusters(ctx)`, is called on a
//! blocking thread with the GIL; `ctx` is a [`Context`] whose methods read and stage changes of
//! the AppContext through the SDK's [`ContextHandle`], each a short trip to the runtime without
//! the GIL. The staged changes are committed when `update` returns; an exception aborts the
//! orchestrator's operation with its message (and its `kind`, for an `emco.EmcoError`).

use emco_core::poison::lock;
use std::sync::Arc;

use async_trait::async_trait;
use emco_controller_sdk::{
    ActionController, ContextHandle, ControllerContext, PlacementController,
};
use emco_core::{ContextId, Error, ErrorKind, Result};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::Value;
use tokio::sync::Mutex;

/// A Python object as an action controller (`update`) or a placement one (`filter_clusters`).
pub(crate) struct PyController {
    name: String,
    /// Shared with the blocking threads that call it, so a runtime worker never takes the GIL.
    object: Arc<Py<PyAny>>,
}

impl PyController {
    pub(crate) fn new(name: String, object: Py<PyAny>) -> Self {
        Self {
            name,
            object: Arc::new(object),
        }
    }

    /// Calls `method(ctx)` of the object on a blocking thread, then commits what it staged.
    /// Python gets a handle of its own on the same context (a `'static` one it may keep): `cx`
    /// is borrowed for this call only.
    async fn call(&self, method: &'static str, cx: &ControllerContext) -> Result<()> {
        let handle = Arc::new(Mutex::new(ContextHandle::new(cx.app_context().clone())));
        let ctx = Context {
            handle: Arc::clone(&handle),
            runtime: tokio::runtime::Handle::current(),
            intent_name: cx.intent_name().map(str::to_owned),
            update_from: cx.update_from(),
            id: cx.id(),
        };
        let object = Arc::clone(&self.object);
        let name = self.name.clone();
        tokio::task::spawn_blocking(move || {
            Python::with_gil(|py| {
                let object = object.bind(py);
                if method == "terminate" && !object.hasattr(method).unwrap_or(false) {
                    return Ok(());
                }
                object
                    .call_method1(method, (ctx,))
                    .map(drop)
                    .map_err(|e| python_error(py, &name, &e))
            })
        })
        .await
        .map_err(|e| Error::internal(format!("controller {}: {e}", self.name)))??;
        handle.lock().await.commit().await
    }
}

#[async_trait]
impl PlacementController for PyController {
    async fn filter_clusters(&self, cx: &mut ControllerContext) -> Result<()> {
        self.call("filter_clusters", cx).await
    }
}

#[async_trait]
impl ActionController for PyController {
    async fn update(&self, cx: &mut ControllerContext) -> Result<()> {
        self.call("update", cx).await
    }

    async fn terminate(&self, cx: &mut ControllerContext) -> Result<()> {
        self.call("terminate", cx).await
    }
}

/// An exception of a controller as an error of the kind it names (`emco.EmcoError.kind`), else
/// FailedPrecondition: the operation cannot go on as the controller is.
fn python_error(py: Python<'_>, controller: &str, e: &PyErr) -> Error {
    let kind = e
        .value(py)
        .getattr("kind")
        .ok()
        .and_then(|k| k.extract::<String>().ok())
        .and_then(|k| ErrorKind::from_name(&k))
        .unwrap_or(ErrorKind::FailedPrecondition);
    Error::new(kind, format!("Python controller {controller}: {e}"))
}

/// What a Python controller sees of the AppContext it changes.
#[pyclass(module = "emco._emco", name = "Context")]
pub(crate) struct Context {
    handle: Arc<Mutex<ContextHandle>>,
    runtime: tokio::runtime::Handle,
    intent_name: Option<String>,
    update_from: Option<ContextId>,
    id: ContextId,
}

impl Context {
    /// Runs `f` on the handle without the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl AsyncFnOnce(&mut ContextHandle) -> Result<T> + Send,
    ) -> PyResult<T> {
        let handle = Arc::clone(&self.handle);
        py.allow_threads(|| {
            self.runtime.block_on(async move {
                let mut handle = handle.lock().await;
                f(&mut handle).await
            })
        })
        .map_err(to_py)
    }
}

fn to_py(e: Error) -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(format!("{}: {}", e.kind(), e.message()))
}

fn to_json(py: Python<'_>, value: &Value) -> PyResult<PyObject> {
    let text = serde_json::to_string(value).map_err(|e| to_py(Error::internal(e.to_string())))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.unbind())
}

fn from_json(py: Python<'_>, object: &Bound<'_, PyAny>) -> PyResult<Value> {
    let text: String = py
        .import("json")?
        .call_method1("dumps", (object,))?
        .extract()?;
    serde_json::from_str(&text)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not a JSON object: {e}")))
}

#[pymethods]
impl Context {
    /// The AppContext's id.
    #[getter]
    fn id(&self) -> u64 {
        self.id.get()
    }

    /// The name of this controller's intent in the deployment intent group.
    #[getter]
    fn intent_name(&self) -> Option<String> {
        self.intent_name.clone()
    }

    /// The id of the context an update replaces.
    #[getter]
    fn update_from(&self) -> Option<u64> {
        self.update_from.map(ContextId::get)
    }

    /// The apps of the context.
    fn apps(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, async |h| h.apps().await)
    }

    /// The clusters (`provider+cluster`) of `app`.
    fn clusters(&self, py: Python<'_>, app: String) -> PyResult<Vec<String>> {
        self.with(py, async move |h| h.clusters(&app).await)
    }

    /// The clusters of `app` by anyOf group number (clusters outside any group are left out).
    fn cluster_groups(
        &self,
        py: Python<'_>,
        app: String,
    ) -> PyResult<std::collections::BTreeMap<String, Vec<String>>> {
        self.with(py, async move |h| h.cluster_groups(&app).await)
    }

    /// Removes `cluster` (with its resources) from `app`: what a placement controller does.
    fn remove_cluster(&self, py: Python<'_>, app: String, cluster: String) -> PyResult<()> {
        self.with(py, async move |h| h.remove_cluster(&app, &cluster).await)
    }

    /// The names (`name+Kind`) of the resources of `app` on `cluster`.
    fn resource_names(
        &self,
        py: Python<'_>,
        app: String,
        cluster: String,
    ) -> PyResult<Vec<String>> {
        self.with(py, async move |h| h.resource_names(&app, &cluster).await)
    }

    /// The resource `name` of `app` on `cluster` as a dict, or None.
    fn resource(
        &self,
        py: Python<'_>,
        app: String,
        cluster: String,
        name: String,
    ) -> PyResult<Option<PyObject>> {
        let got = self.with(py, async move |h| h.resource(&app, &cluster, &name).await)?;
        got.map(|v| to_json(py, &v)).transpose()
    }

    /// Every resource of `app` on `cluster` as `(name, dict)`.
    fn resources(&self, py: Python<'_>, app: String, cluster: String) -> PyResult<Py<PyList>> {
        let got = self.with(py, async move |h| h.resources(&app, &cluster).await)?;
        let list = PyList::empty(py);
        for (name, value) in got {
            list.append((name, to_json(py, &value)?))?;
        }
        Ok(list.unbind())
    }

    /// Stages `object` (a dict) as resource `name`, replacing it if it exists.
    fn put_resource(
        &self,
        py: Python<'_>,
        app: String,
        cluster: String,
        name: String,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let value = from_json(py, object)?;
        self.with(py, async move |h| {
            h.put_resource(&app, &cluster, &name, value).await
        })
    }

    /// Stages a new Kubernetes object (a dict) under its `name+Kind`; returns that name.
    fn add_resource(
        &self,
        py: Python<'_>,
        app: String,
        cluster: String,
        object: &Bound<'_, PyAny>,
    ) -> PyResult<String> {
        let value = from_json(py, object)?;
        self.with(py, async move |h| {
            h.add_resource(&app, &cluster, value).await
        })
    }

    /// Stages the removal of resource `name` of `app` on `cluster`.
    fn remove_resource(
        &self,
        py: Python<'_>,
        app: String,
        cluster: String,
        name: String,
    ) -> PyResult<()> {
        self.with(py, async move |h| {
            h.remove_resource(&app, &cluster, &name).await
        })
    }
}

/// A Python controller served over EMCO's controller gRPC protocol (`contextupdate` for an
/// action controller, `PlacementController` for a placement one) by the SDK's server, so any
/// emco-server (or EMCO) calls it like a controller written in Go or Rust. It works on the
/// AppContexts of the orchestrator: its AppContext gRPC service, or etcd.
#[pyclass(module = "emco._emco", frozen)]
pub(crate) struct ControllerServer {
    port: u16,
    cancel: tokio_util::sync::CancellationToken,
    served: std::sync::Mutex<Option<tokio::task::JoinHandle<Result<()>>>>,
}

#[pymethods]
impl ControllerServer {
    /// Serves `object` (with `update`, or `filter_clusters`, or both) as controller `name` on
    /// `host:port` (0: any free port), working on the AppContexts at `appcontext` (an
    /// emco-server's gRPC URL) or in the etcd at `etcd` (its endpoints); exactly one of them.
    #[staticmethod]
    #[pyo3(signature = (name, object, appcontext=None, etcd=None, host="127.0.0.1", port=0))]
    fn start(
        py: Python<'_>,
        name: String,
        object: Py<PyAny>,
        appcontext: Option<String>,
        etcd: Option<Vec<String>>,
        host: &str,
        port: u16,
    ) -> PyResult<Self> {
        let bound = object.bind(py);
        let (placement, action) = (bound.hasattr("filter_clusters")?, bound.hasattr("update")?);
        if !placement && !action {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "a controller has an update(ctx) or a filter_clusters(ctx) method",
            ));
        }
        let addr = format!("{host}:{port}");
        let controller = Arc::new(PyController::new(name.clone(), object));
        crate::block_on(py, move || async move {
            let store: Arc<dyn emco_store::AppContextStore> = match (appcontext, etcd) {
                (Some(url), None) => Arc::new(
                    emco_controller_sdk::remote::RemoteAppContextStore::connect_lazy(&url)
                        .map_err(crate::value_error)?,
                ),
                (None, Some(endpoints)) => Arc::new(
                    emco_store::etcd::EtcdBuilder::new()
                        .with_endpoints(endpoints)
                        .build()
                        .await
                        .map_err(|e| pyo3::exceptions::PyConnectionError::new_err(e.to_string()))?,
                ),
                _ => {
                    return Err(pyo3::exceptions::PyValueError::new_err(
                        "give the orchestrator's AppContexts: appcontext (its gRPC URL) or etcd \
                         (endpoints), not both",
                    ));
                }
            };
            let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!("cannot listen on {addr}: {e}"))
            })?;
            let port = listener.local_addr().map_err(crate::value_error)?.port();
            let mut builder = emco_controller_sdk::Server::builder(store).name(name);
            if action {
                builder = builder.action_arc(Arc::clone(&controller) as Arc<dyn ActionController>);
            }
            if placement {
                builder = builder.placement_arc(controller as Arc<dyn PlacementController>);
            }
            let cancel = tokio_util::sync::CancellationToken::new();
            let stop = cancel.clone();
            let served = tokio::spawn(async move {
                builder
                    .serve_with_listener(listener, stop.cancelled_owned())
                    .await
            });
            Ok(Self {
                port,
                cancel,
                served: std::sync::Mutex::new(Some(served)),
            })
        })
    }

    /// The port it listens on.
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }

    /// Serves until `close` is called (from another thread) or a signal (Ctrl-C) arrives.
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        let cancel = self.cancel.clone();
        let waited = crate::block_on(py, move || async move {
            cancel.cancelled().await;
            Ok(())
        });
        self.close(py)?;
        waited
    }

    /// Stops serving; calls in flight are finished first. Raises the server's failure, if it
    /// failed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.cancel.cancel();
        let served = lock(&self.served).take();
        let Some(served) = served else {
            return Ok(());
        };
        crate::block_on(py, move || async move {
            match served.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(to_py(e)),
                Err(e) => Err(pyo3::exceptions::PyRuntimeError::new_err(e.to_string())),
            }
        })
    }
}
