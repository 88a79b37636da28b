//! # emco-py
//!
//! The native half of the Python package `emco` (built with maturin; the Python half is in
//! `python/emco`). It holds no business logic: every call is a request of EMCO's REST API,
//! sent either over the network to an emco-server (or EMCO), or, for an orchestrator embedded
//! in the Python process, straight to emco-service's app (the router emco-server serves)
//! without a socket. Both ways give the same answers, so the Python API is one API.
//!
//! One tokio runtime serves every transport of the process. Blocking calls release the GIL and
//! look for signals every [`SIGNAL_POLL`], so Ctrl-C interrupts them.

mod controller;

use emco_core::poison::{read, write};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::Duration;

use axum::body::Body as AxumBody;
use emco_client::client::{Body, Client, FilePart, LocalServer, RequestBody, Response, TlsOptions};
use emco_client::ops::{Command, Options};
use http::Method;
use http_body_util::BodyExt;
use pyo3::exceptions::{PyConnectionError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How often a blocking call looks for a pending signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(100);

/// The process's runtime, started on first use.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("emco")
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the tokio runtime: {e}")))
}

/// Runs the future `make` makes to completion without the GIL, interrupted by a signal
/// (KeyboardInterrupt).
fn block_on<T, F>(py: Python<'_>, make: impl FnOnce() -> F + Send) -> PyResult<T>
where
    T: Send,
    F: std::future::Future<Output = PyResult<T>>,
{
    let rt = runtime()?;
    py.allow_threads(|| {
        rt.block_on(async {
            let fut = make();
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    done = &mut fut => return done,
                    () = tokio::time::sleep(SIGNAL_POLL) => {
                        Python::with_gil(|py| py.check_signals())?;
                    }
                }
            }
        })
    })
}

/// How long `close` waits for an embedded orchestrator's tasks to let go of its stores.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// An embedded orchestrator's engine: stopped when the transport is closed or dropped.
struct Engine {
    cancel: CancellationToken,
    /// The stores, to know when the last task let go of them (the data directory's file lock
    /// goes with them).
    resources: Weak<dyn emco_store::ResourceStore>,
    contexts: Weak<dyn emco_store::AppContextStore>,
    /// The data directory's file, which reads and commits already started keep open a little
    /// longer than the stores.
    file: Option<emco_store::embedded::FileHold>,
}

impl Engine {
    fn released(&self) -> bool {
        self.resources.strong_count() == 0
            && self.contexts.strong_count() == 0
            && self
                .file
                .as_ref()
                .is_none_or(emco_store::embedded::FileHold::is_released)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Where the requests of one `emco.Client` or `emco.Orchestrator` go.
#[pyclass(module = "emco._emco", frozen)]
struct Transport {
    /// `None` once closed.
    client: RwLock<Option<Client>>,
    engine: Option<Engine>,
}

impl Transport {
    /// Sends one request and answers it for Python.
    fn send(&self, py: Python<'_>, method: &str, path: &str, body: Body) -> PyResult<Answer> {
        let (method, client) = (self::method(method)?, self.client()?);
        let path = path.to_owned();
        let r = block_on(py, move || async move {
            client
                .send(method, &path, body)
                .await
                .map_err(transport_error)
        })?;
        Ok(answer(py, r))
    }

    fn client(&self) -> PyResult<Client> {
        read(&self.client)
            .clone()
            .ok_or_else(|| PyRuntimeError::new_err("the orchestrator is closed"))
    }
}

/// A request's answer for Python: status, error kind, body.
type Answer = (u16, Option<String>, Py<PyBytes>);

fn answer(py: Python<'_>, r: Response) -> Answer {
    (r.status, r.error_kind, PyBytes::new(py, &r.body).unbind())
}

fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn transport_error(e: impl std::fmt::Display) -> PyErr {
    PyConnectionError::new_err(e.to_string())
}

fn method(name: &str) -> PyResult<Method> {
    Method::from_bytes(name.to_ascii_uppercase().as_bytes())
        .map_err(|_| PyValueError::new_err(format!("not an HTTP method: {name:?}")))
}

/// emco-service's app as a server in this process.
fn local_server(app: axum::Router) -> LocalServer {
    Arc::new(move |req: http::Request<RequestBody>| {
        let app = app.clone();
        Box::pin(async move {
            let answer = app
                .oneshot(req.map(AxumBody::new))
                .await
                .map_err(|e| e.to_string())?;
            let (parts, body) = answer.into_parts();
            let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
            Ok(Response {
                status: parts.status.as_u16(),
                body: body.to_vec(),
                error_kind: emco_client::client::error_kind(&parts.headers),
            })
        })
    })
}

#[pymethods]
impl Transport {
    /// A transport to the server at `url`, sending `token` as bearer token.
    #[staticmethod]
    #[pyo3(signature = (url, token=None, ca_cert=None, insecure=false))]
    fn remote(
        url: &str,
        token: Option<String>,
        ca_cert: Option<PathBuf>,
        insecure: bool,
    ) -> PyResult<Self> {
        let tls = TlsOptions { ca_cert, insecure };
        let client = Client::with_tls(url, token, &tls).map_err(value_error)?;
        Ok(Self {
            client: RwLock::new(Some(client)),
            engine: None,
        })
    }

    /// An orchestrator in this process, its stores in `data_dir` (kept across restarts) or in
    /// memory (`None`), with the built-in controllers and `controllers`, Python action or
    /// placement controllers as `(name, object)` registered with `priority`; resumes what an
    /// earlier process left running in `data_dir`. Its calls are a platform admin's, or those
    /// of `principal` (subject, role names) under the server's rules.
    #[staticmethod]
    #[pyo3(signature = (data_dir=None, controllers=Vec::new(), priority=1, principal=None))]
    fn embedded(
        py: Python<'_>,
        data_dir: Option<PathBuf>,
        controllers: Vec<(String, Py<PyAny>)>,
        priority: u32,
        principal: Option<(String, Vec<String>)>,
    ) -> PyResult<Self> {
        use emco_service::{Authenticator, Backend, Config, ContextBackend, Principal, Role};
        let auth = match principal {
            None => Authenticator::open(),
            Some((subject, roles)) => {
                let roles = roles
                    .iter()
                    .map(|r| r.parse::<Role>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(value_error)?;
                Authenticator::acting_as(Principal::new(subject, roles))
            }
        };
        // A placement controller filters clusters; any other is an action controller.
        let controllers: Vec<(String, Py<PyAny>, bool)> = controllers
            .into_iter()
            .map(|(name, object)| {
                let placement = object.bind(py).hasattr("filter_clusters")?;
                Ok((name, object, placement))
            })
            .collect::<PyResult<_>>()?;
        // Registered like any controller, so deployment intent groups can name them; the
        // address is never dialled: the orchestrator calls them in this process.
        let registrations: Vec<serde_json::Value> = controllers
            .iter()
            .map(|(name, _, placement)| {
                let kind = if *placement { "placement" } else { "action" };
                serde_json::json!({
                    "metadata": {"name": name},
                    "spec": {"host": "localhost", "port": 9, "type": kind, "priority": priority},
                })
            })
            .collect();
        let config = match data_dir {
            Some(dir) => Config {
                data_dir: dir,
                ..Config::default()
            },
            None => Config {
                backend: Backend::Memory,
                context_backend: ContextBackend::Memory,
                ..Config::default()
            },
        };
        block_on(py, move || async move {
            let runtime_error = |e: emco_core::Error| PyRuntimeError::new_err(e.to_string());
            let (stores, file) = emco_service::open_stores_held(&config)
                .await
                .map_err(runtime_error)?;
            let resources = Arc::downgrade(stores.resources().map_err(runtime_error)?);
            let contexts = Arc::downgrade(&stores.appcontext);
            let more = move |registry: emco_controller_sdk::ControllerRegistry| {
                controllers
                    .into_iter()
                    .fold(registry, |registry, (name, object, placement)| {
                        let c = Arc::new(controller::PyController::new(name.clone(), object));
                        if placement {
                            registry.with_placement(name, c)
                        } else {
                            registry.with_action(name, c)
                        }
                    })
            };
            let orch =
                emco_service::orchestrator_with(&config, stores, more).map_err(runtime_error)?;
            let cancel = CancellationToken::new();
            orch.start(cancel.clone()).await.map_err(runtime_error)?;
            // The process registers its own controllers, whoever it then acts for.
            if !registrations.is_empty() {
                let admin = Client::local(local_server(emco_service::app_with(
                    orch.clone(),
                    &config,
                    emco_service::Metrics::new(),
                    Authenticator::open(),
                )));
                for body in registrations {
                    let r = admin
                        .send(
                            Method::POST,
                            "/v2/controllers",
                            Body::Json(body.to_string().into_bytes()),
                        )
                        .await
                        .map_err(transport_error)?;
                    // 409: registered by an earlier process over the same data directory.
                    if !(200..300).contains(&r.status) && r.status != 409 {
                        return Err(PyRuntimeError::new_err(format!(
                            "cannot register the Python controller {body}: {} {}",
                            r.status,
                            String::from_utf8_lossy(&r.body)
                        )));
                    }
                }
            }
            let app = emco_service::app_with(orch, &config, emco_service::Metrics::new(), auth);
            Ok(Self {
                client: RwLock::new(Some(Client::local(local_server(app)))),
                engine: Some(Engine {
                    cancel,
                    resources,
                    contexts,
                    file,
                }),
            })
        })
    }

    /// Stops an embedded orchestrator's engine (deployments in progress resume at the next
    /// start over the same data directory); nothing for a remote server.
    /// Waits (at most [`CLOSE_WAIT`]) until its tasks let go of the stores, so the same data
    /// directory can be opened again at once.
    fn close(&self, py: Python<'_>) {
        let client = write(&self.client).take();
        drop(client);
        if let Some(engine) = &self.engine {
            engine.cancel.cancel();
            py.allow_threads(|| {
                let deadline = std::time::Instant::now() + CLOSE_WAIT;
                while !engine.released() && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
            });
        }
    }

    /// Whether the orchestrator runs in this process.
    #[getter]
    fn is_embedded(&self) -> bool {
        self.engine.is_some()
    }

    /// The URL of `path`, for messages.
    fn url(&self, path: &str) -> String {
        self.client()
            .map_or_else(|_| format!("closed:{path}"), |c| c.url(path))
    }

    /// Sends `method path` with `body` (JSON bytes) or none.
    #[pyo3(signature = (method, path, body=None))]
    fn request(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> PyResult<Answer> {
        self.send(py, method, path, body.map_or(Body::Empty, Body::Json))
    }

    /// Sends a multipart form: `metadata` (JSON bytes) and `files` as (field, file name, path),
    /// streamed from disk.
    fn upload(
        &self,
        py: Python<'_>,
        method: &str,
        path: &str,
        metadata: Vec<u8>,
        files: Vec<(String, String, PathBuf)>,
    ) -> PyResult<Answer> {
        let files = files
            .into_iter()
            .map(|(field, name, path)| FilePart { field, name, path })
            .collect();
        self.send(py, method, path, Body::Multipart { metadata, files })
    }

    /// Runs the emcoctl file at `path` (with `values`, JSON bytes, as its template values):
    /// `apply`, `delete`, `get` or `update`, as `emcoctl <command> -f path` does. Returns the
    /// outcomes as JSON bytes (a list of `{url, status, body}`, emcoctl's `-o json`).
    #[pyo3(signature = (path, command="apply", values=None, wait_seconds=0.0))]
    fn run_file(
        &self,
        py: Python<'_>,
        path: PathBuf,
        command: &str,
        values: Option<Vec<u8>>,
        wait_seconds: f64,
    ) -> PyResult<Py<PyBytes>> {
        let command = match command {
            "apply" => Command::Apply,
            "delete" => Command::Delete,
            "get" => Command::Get,
            "update" => Command::Update,
            other => {
                return Err(PyValueError::new_err(format!(
                    "command {other:?} is not apply, delete, get or update"
                )));
            }
        };
        let values = values
            .map(|v| serde_json::from_slice::<serde_json::Value>(&v))
            .transpose()
            .map_err(|e| PyValueError::new_err(format!("values: {e}")))?
            .map(|v| emco_helm::Value::from_json(&v));
        let docs = emco_client::document::load(&path, values.as_ref()).map_err(value_error)?;
        let opts = Options {
            wait: Duration::try_from_secs_f64(wait_seconds)
                .map_err(|e| PyValueError::new_err(format!("wait_seconds: {e}")))?,
            ..Options::default()
        };
        let client = self.client()?;
        let outcomes = block_on(py, move || async move {
            let mut quiet = std::io::sink();
            emco_client::ops::run(&client, command, &docs, &opts, &mut quiet)
                .await
                .map_err(value_error)
        })?;
        let json: Vec<serde_json::Value> = outcomes.iter().map(|o| o.to_json()).collect();
        let bytes =
            serde_json::to_vec(&json).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(PyBytes::new(py, &bytes).unbind())
    }
}

/// Packs directory `dir` as a gzip'd tar, its entries under `prefix` (`"."`: at the top), as
/// the orchestrator reads charts and profiles.
#[pyfunction]
fn pack_dir(py: Python<'_>, dir: PathBuf, prefix: &str) -> PyResult<Py<PyBytes>> {
    let bytes = py
        .allow_threads(|| emco_helm::archive::pack_dir(&dir, prefix))
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", dir.display())))?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

/// The extension module.
#[pymodule]
fn _emco(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Transport>()?;
    m.add_class::<controller::Context>()?;
    m.add_class::<controller::ControllerServer>()?;
    m.add_function(wrap_pyfunction!(pack_dir, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
