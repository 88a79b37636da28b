//! The server's configuration: flags, then `EMCO_*` environment variables, then a YAML file,
//! then defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use emco_core::Error;
use emco_helm::HelmCompat;
use serde::Deserialize;

/// Where the onboarded objects are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The embedded redb file under the data dir (default).
    Embedded,
    /// In memory; lost on exit.
    Memory,
    /// MongoDB at `mongo_uri`.
    Mongo,
}

/// Where AppContexts (the deployments in progress and their status) are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ContextBackend {
    /// The embedded redb file under the data dir, shared with the embedded resource store.
    Embedded,
    /// In memory; running deployments are forgotten on exit.
    Memory,
    /// etcd at `etcd_endpoints` (EMCO's layout, so EMCO's own services can share it).
    Etcd,
}

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The command line (every flag also reads an `EMCO_*` variable).
#[derive(Debug, Default, Parser)]
#[command(name = "emco-server", version, about = "The EMCO reference server")]
struct Cli {
    /// A YAML configuration file (keys as the long flags, with `_`: `listen`, `data_dir`, ...).
    #[arg(long, env = "EMCO_CONFIG")]
    config: Option<PathBuf>,
    /// The address of the REST listener [default: 127.0.0.1:9015].
    #[arg(long, env = "EMCO_LISTEN")]
    listen: Option<SocketAddr>,
    /// The address of the gRPC listener (AppContext, rsync, StatusNotify, health)
    /// [default: 127.0.0.1:9016].
    #[arg(long, env = "EMCO_GRPC_LISTEN")]
    grpc_listen: Option<SocketAddr>,
    /// The data directory of the embedded store [default: ./emco-data].
    #[arg(long, env = "EMCO_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The resource store backend [default: embedded].
    #[arg(long, env = "EMCO_BACKEND", value_enum)]
    backend: Option<Backend>,
    /// The AppContext store backend [default: memory with `--backend memory`, else embedded].
    #[arg(long, env = "EMCO_CONTEXT_BACKEND", value_enum)]
    context_backend: Option<ContextBackend>,
    /// The etcd endpoints, comma-separated (context backend etcd); `EMCO_ETCD_USERNAME` and
    /// `EMCO_ETCD_PASSWORD` authenticate.
    #[arg(long, env = "EMCO_ETCD_ENDPOINTS", value_delimiter = ',')]
    etcd_endpoints: Option<Vec<String>>,
    /// A prefix put before every etcd key, for installations sharing one etcd [default: none,
    /// EMCO's layout at the root].
    #[arg(long, env = "EMCO_ETCD_PREFIX")]
    etcd_prefix: Option<String>,
    /// The MongoDB URI (backend mongo).
    #[arg(long, env = "EMCO_MONGO_URI")]
    mongo_uri: Option<String>,
    /// The MongoDB database [default: emco].
    #[arg(long, env = "EMCO_MONGO_DATABASE")]
    mongo_database: Option<String>,
    /// The log format [default: text].
    #[arg(long, env = "EMCO_LOG_FORMAT", value_enum)]
    log_format: Option<LogFormat>,
    /// The largest JSON request body, bytes [default: 4194304].
    #[arg(long, env = "EMCO_MAX_BODY")]
    max_body: Option<usize>,
    /// The largest chart or profile upload, bytes [default: 104857600].
    #[arg(long, env = "EMCO_MAX_UPLOAD")]
    max_upload: Option<u64>,
    /// How long to let requests finish on shutdown, seconds [default: 10].
    #[arg(long, env = "EMCO_DRAIN_SECONDS")]
    drain_seconds: Option<u64>,
    /// Run gac and hpa inside the server under their EMCO names, whatever address they are
    /// registered with; `false` calls every registered controller over gRPC [default: true].
    #[arg(long, env = "EMCO_BUILTIN_CONTROLLERS", action = clap::ArgAction::Set)]
    builtin_controllers: Option<bool>,
    /// How long one controller call may take, seconds [default: 60]; it bounds how long a tac
    /// pre-hook may hold its operation.
    #[arg(long, env = "EMCO_CONTROLLER_TIMEOUT_SECONDS")]
    controller_timeout_seconds: Option<u64>,
    /// The Temporal frontend (`host:port`) workflow status and cancel requests ask when they
    /// name none, and tac hooks are followed on when they name none (then every pre-hook holds
    /// its operation until its workflow completes) [default: none].
    #[arg(long, env = "EMCO_TEMPORAL_SERVER")]
    temporal_server: Option<String>,
    /// At most this many cluster requests of rsync in flight in all [default: 256].
    #[arg(long, env = "EMCO_RSYNC_CONCURRENCY")]
    rsync_concurrency: Option<usize>,
    /// At most this many rsync requests in flight per cluster [default: 4].
    #[arg(long, env = "EMCO_RSYNC_CLUSTER_CONCURRENCY")]
    rsync_cluster_concurrency: Option<usize>,
    /// Retries of an unreachable cluster before its resources fail [default: retry forever].
    #[arg(long, env = "EMCO_RSYNC_MAX_RETRIES")]
    rsync_max_retries: Option<u32>,
    /// The cap on one rsync retry delay, seconds [default: 30].
    #[arg(long, env = "EMCO_RSYNC_MAX_BACKOFF_SECONDS")]
    rsync_max_backoff_seconds: Option<u64>,
    /// How long a Helm hook may run (and CRDs take to be established) before it fails, seconds,
    /// as `helm --timeout` [default: 300].
    #[arg(long, env = "EMCO_RSYNC_HOOK_TIMEOUT_SECONDS")]
    rsync_hook_timeout_seconds: Option<u64>,
    /// How often each cluster with deployed resources is probed, seconds [default: 10].
    #[arg(long, env = "EMCO_CLUSTER_PROBE_SECONDS")]
    cluster_probe_seconds: Option<u64>,
    /// How long after its last answer a cluster's resources are reported with readiness
    /// `Unknown`, seconds [default: 40].
    #[arg(long, env = "EMCO_CLUSTER_GRACE_SECONDS")]
    cluster_grace_seconds: Option<u64>,
    /// Render apps as this Helm release does (`3.14.0` as EMCO's Go services, `4.2.3`); the
    /// lines differ in blank lines and in nulls of chart values [default: the current 4.2.4
    /// line].
    #[arg(long, env = "EMCO_HELM_VERSION")]
    helm_version: Option<String>,
    /// Run as one of several replicas sharing etcd and MongoDB, under this name (unique among
    /// them, for example the pod name); each deployment is run by one replica and taken over
    /// by another when that one dies [default: the only server].
    #[arg(long, env = "EMCO_REPLICA_ID")]
    replica_id: Option<String>,
    /// How long a replica may be silent before the others take its work over, seconds
    /// [default: 10].
    #[arg(long, env = "EMCO_REPLICA_TTL_SECONDS")]
    replica_ttl_seconds: Option<u64>,
    /// Replicas share an operation (instantiate, update, terminate) on at least this many
    /// clusters, each taking a part of its clusters; 0: each is run by one replica
    /// [default: 1000].
    #[arg(long, env = "EMCO_REPLICA_SHARE_CLUSTERS")]
    replica_share_clusters: Option<usize>,
    /// Keep the AppContexts of each deployment intent group's last N revisions (at least 2)
    /// for rollback and delete older ones as updates come [default: all, as EMCO].
    #[arg(long, env = "EMCO_REVISION_HISTORY_LIMIT")]
    revision_history_limit: Option<usize>,
    /// Serve only this built-in controller (gac, dtc, nps, its, swc, ovnaction, sfc, sfcclient,
    /// hpa-placement-controller-1, hpa-action-controller-1, tac) over EMCO's controller gRPC protocol
    /// on the gRPC listener, as EMCO runs each controller in its own process; it shares the
    /// orchestrator's stores (--backend mongo, --context-backend etcd) [default: the whole
    /// server].
    #[arg(long, env = "EMCO_SERVE_CONTROLLER")]
    serve_controller: Option<String>,
    /// Seal the stored credentials (cluster kubeconfigs, logical-cloud user keys, CA keys) with
    /// AES-256-GCM under the keys of this file: one `ID:BASE64` line per 32-byte key, the
    /// current key first, older ones after it until everything is sealed again (at start). The
    /// environment variable EMCO_SECRETS_KEY may hold the same lines instead [default: stored
    /// in the clear, with a warning].
    #[arg(long, env = "EMCO_SECRETS_KEY_FILE")]
    secrets_key_file: Option<PathBuf>,
    /// Append a JSON line per mutating REST call (time, who, from where, method and path,
    /// status, duration) to this file; the records go to the log (target `audit`) either way
    /// [default: the log only].
    #[arg(long, env = "EMCO_AUDIT_LOG")]
    audit_log: Option<PathBuf>,
    /// Require credentials as this YAML file says: static bearer tokens, an OIDC issuer's JWTs,
    /// role bindings (see the README's "Authentication and roles") [default: open, every caller
    /// a platform admin, with a warning].
    #[arg(long, env = "EMCO_AUTH_CONFIG")]
    auth_config: Option<PathBuf>,
    /// Serve REST and gRPC over TLS with this certificate chain (PEM), read again when it
    /// changes [default: plain TCP].
    #[arg(long, env = "EMCO_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The TLS certificate's private key (PEM).
    #[arg(long, env = "EMCO_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Let clients authenticate with certificates these CAs (PEM) signed: the subject's CN is
    /// the user and its O entries the groups that the auth config's bindings give roles
    /// [default: no client certificates].
    #[arg(long, env = "EMCO_TLS_CLIENT_CA")]
    tls_client_ca: Option<PathBuf>,
    /// At most this many REST requests a second per caller (token subject; peer address on an
    /// open server), bursts of twice that; more get 429 with Retry-After [default: no limit].
    #[arg(long, env = "EMCO_RATE_LIMIT")]
    rate_limit: Option<u32>,
    /// The embedded store's page cache and write buffer, MiB [default: 128].
    #[arg(long, env = "EMCO_STORE_CACHE_MIB")]
    store_cache_mib: Option<usize>,
}

/// The configuration file: the same keys as the flags, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    grpc_listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    backend: Option<Backend>,
    context_backend: Option<ContextBackend>,
    etcd_endpoints: Option<Vec<String>>,
    etcd_prefix: Option<String>,
    mongo_uri: Option<String>,
    mongo_database: Option<String>,
    log_format: Option<LogFormat>,
    max_body: Option<usize>,
    max_upload: Option<u64>,
    drain_seconds: Option<u64>,
    builtin_controllers: Option<bool>,
    controller_timeout_seconds: Option<u64>,
    temporal_server: Option<String>,
    rsync_concurrency: Option<usize>,
    rsync_cluster_concurrency: Option<usize>,
    rsync_max_retries: Option<u32>,
    rsync_max_backoff_seconds: Option<u64>,
    rsync_hook_timeout_seconds: Option<u64>,
    cluster_probe_seconds: Option<u64>,
    cluster_grace_seconds: Option<u64>,
    helm_version: Option<String>,
    replica_id: Option<String>,
    replica_ttl_seconds: Option<u64>,
    replica_share_clusters: Option<usize>,
    revision_history_limit: Option<usize>,
    serve_controller: Option<String>,
    secrets_key_file: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    auth_config: Option<PathBuf>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_client_ca: Option<PathBuf>,
    rate_limit: Option<u32>,
    store_cache_mib: Option<usize>,
}

/// Where the keys that seal stored credentials come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretsKeys {
    /// A keyring file (`--secrets-key-file`).
    File(PathBuf),
    /// The environment variable `EMCO_SECRETS_KEY`, read when the stores open.
    Env,
}

/// The environment variable that may hold the secrets keyring itself.
pub const SECRETS_KEY_ENV: &str = "EMCO_SECRETS_KEY";

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The REST listener.
    pub listen: SocketAddr,
    /// The gRPC listener.
    pub grpc_listen: SocketAddr,
    /// The data directory (embedded backends).
    pub data_dir: PathBuf,
    /// The resource store backend.
    pub backend: Backend,
    /// The AppContext store backend.
    pub context_backend: ContextBackend,
    /// The etcd endpoints (context backend etcd).
    pub etcd_endpoints: Vec<String>,
    /// The prefix of every etcd key (empty: none).
    pub etcd_prefix: String,
    /// The MongoDB URI.
    pub mongo_uri: Option<String>,
    /// The MongoDB database.
    pub mongo_database: String,
    /// The log format.
    pub log_format: LogFormat,
    /// The largest JSON body.
    pub max_body: usize,
    /// The largest upload.
    pub max_upload: u64,
    /// The shutdown drain timeout.
    pub drain: Duration,
    /// Whether gac and hpa run in-process.
    pub builtin_controllers: bool,
    /// The timeout of one controller call.
    pub controller_timeout: Duration,
    /// rsync's global concurrency.
    pub rsync_concurrency: usize,
    /// rsync's per-cluster concurrency.
    pub rsync_cluster_concurrency: usize,
    /// rsync's retries of an unreachable cluster; `None` retries forever.
    pub rsync_max_retries: Option<u32>,
    /// rsync's cap on one retry delay.
    pub rsync_max_backoff: Duration,
    /// How long a Helm hook may run before it fails.
    pub rsync_hook_timeout: Duration,
    /// How clusters are probed and when a silent one's readiness turns unknown.
    pub cluster_liveness: emco_rsync::engine::Liveness,
    /// Which Helm release's rendering the apps get.
    pub helm: HelmCompat,
    /// This server's name among several replicas; `None` for the only server.
    pub replica_id: Option<String>,
    /// How long a replica may be silent before the others take its work over.
    pub replica_ttl: Duration,
    /// From how many clusters an operation is shared among the replicas; `None`: never.
    pub replica_share_from: Option<usize>,
    /// How many revisions' contexts each group keeps; `None`: all.
    pub revision_history_limit: Option<usize>,
    /// Serve only this built-in controller over gRPC instead of the whole server.
    pub serve_controller: Option<String>,
    /// The keys that seal stored credentials; `None` stores them in the clear.
    pub secrets: Option<SecretsKeys>,
    /// The file audit records are appended to; `None`: the log only.
    pub audit_log: Option<PathBuf>,
    /// The authentication file; `None`: open.
    pub auth_config: Option<PathBuf>,
    /// TLS for both listeners; `None`: plain TCP.
    pub tls: Option<crate::tls::TlsFiles>,
    /// REST requests a second per caller; `None`: no limit.
    pub rate_limit: Option<u32>,
    /// The embedded store's cache, bytes.
    pub store_cache: usize,
    /// How long workflowmgr's calls to workflow clients and Temporal servers may take.
    pub workflows: emco_workflows::Config,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9015)),
            grpc_listen: SocketAddr::from(([127, 0, 0, 1], 9016)),
            data_dir: PathBuf::from("./emco-data"),
            backend: Backend::Embedded,
            context_backend: ContextBackend::Embedded,
            etcd_endpoints: Vec::new(),
            etcd_prefix: String::new(),
            mongo_uri: None,
            mongo_database: "emco".to_owned(),
            log_format: LogFormat::Text,
            max_body: 4 * 1024 * 1024,
            max_upload: 100 * 1024 * 1024,
            drain: Duration::from_secs(10),
            builtin_controllers: true,
            controller_timeout: Duration::from_secs(60),
            rsync_concurrency: 256,
            rsync_cluster_concurrency: 4,
            rsync_max_retries: None,
            rsync_max_backoff: Duration::from_secs(30),
            rsync_hook_timeout: emco_rsync::engine::DEFAULT_HOOK_TIMEOUT,
            cluster_liveness: emco_rsync::engine::Liveness::default(),
            helm: HelmCompat::default(),
            replica_id: None,
            serve_controller: None,
            replica_ttl: Duration::from_secs(10),
            replica_share_from: Some(1000),
            revision_history_limit: None,
            secrets: None,
            audit_log: None,
            auth_config: None,
            tls: None,
            rate_limit: None,
            store_cache: emco_store::embedded::DEFAULT_CACHE_SIZE,
            workflows: emco_workflows::Config::default(),
        }
    }
}

impl Config {
    /// Reads the command line `args` (the program name first), the environment and the file.
    /// `None` when the command line asked for `--help` or `--version`, which are printed.
    ///
    /// # Errors
    /// InvalidArgument for bad flags (the message is clap's help or error text) or a bad file.
    pub fn from_args<I, T>(args: I) -> Result<Option<Self>, Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(e) if !e.use_stderr() => {
                // --help and --version: not an error.
                print!("{e}");
                return Ok(None);
            }
            Err(e) => return Err(Error::invalid(e.to_string())),
        };
        let file = match &cli.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    Error::invalid(format!("cannot read the config file {path:?}")).with_source(e)
                })?;
                emco_go::yaml::from_str::<FileConfig>(&text).map_err(|e| {
                    Error::invalid(format!("the config file {path:?} is not valid: {e}"))
                })?
            }
            None => FileConfig::default(),
        };
        let d = Self::default();
        let backend = cli.backend.or(file.backend).unwrap_or(d.backend);
        // A memory resource store with durable AppContexts would resume deployments of clusters
        // the new process no longer knows.
        let context_default = if backend == Backend::Memory {
            ContextBackend::Memory
        } else {
            d.context_backend
        };
        let context_backend = cli
            .context_backend
            .or(file.context_backend)
            .unwrap_or(context_default);
        let etcd_endpoints: Vec<String> = cli
            .etcd_endpoints
            .or(file.etcd_endpoints)
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.trim().to_owned())
            .filter(|e| !e.is_empty())
            .collect();
        if context_backend == ContextBackend::Etcd && etcd_endpoints.is_empty() {
            return Err(Error::invalid(
                "the etcd context backend needs --etcd-endpoints",
            ));
        }
        let replica_id = cli.replica_id.or(file.replica_id);
        if replica_id.is_some()
            && (context_backend != ContextBackend::Etcd || backend != Backend::Mongo)
        {
            return Err(Error::invalid(
                "replicas share their stores: --replica-id needs --context-backend etcd and \
                 --backend mongo",
            ));
        }
        let replica_ttl = cli
            .replica_ttl_seconds
            .or(file.replica_ttl_seconds)
            .map_or(d.replica_ttl, Duration::from_secs);
        if replica_ttl.is_zero() {
            return Err(Error::invalid("--replica-ttl-seconds must be at least 1"));
        }
        let revision_history_limit = cli.revision_history_limit.or(file.revision_history_limit);
        if revision_history_limit.is_some_and(|n| n < 2) {
            return Err(Error::invalid(
                "--revision-history-limit must be at least 2: the current revision and the one \
                 an update goes back from",
            ));
        }
        let serve_controller = cli.serve_controller.or(file.serve_controller);
        if serve_controller.is_some()
            && (context_backend != ContextBackend::Etcd || backend != Backend::Mongo)
        {
            return Err(Error::invalid(
                "a controller process shares the orchestrator's stores: --serve-controller needs \
                 --context-backend etcd and --backend mongo",
            ));
        }
        let helm = match cli.helm_version.or(file.helm_version) {
            Some(v) => HelmCompat::from_version(&v)?,
            None => d.helm,
        };
        let secrets = match cli.secrets_key_file.or(file.secrets_key_file) {
            Some(path) => Some(SecretsKeys::File(path)),
            None => std::env::var_os(SECRETS_KEY_ENV).map(|_| SecretsKeys::Env),
        };
        let audit_log = cli.audit_log.or(file.audit_log);
        if let Some(path) = &audit_log {
            // Refused at start, not at the first call it should have recorded.
            crate::audit::Audit::to_file(path)?;
        }
        let auth_config = cli.auth_config.or(file.auth_config);
        if let Some(path) = &auth_config {
            crate::auth::Authenticator::from_file(path)?;
        }
        let tls = match (
            cli.tls_cert.or(file.tls_cert),
            cli.tls_key.or(file.tls_key),
            cli.tls_client_ca.or(file.tls_client_ca),
        ) {
            (Some(cert), Some(key), client_ca) => Some(crate::tls::TlsFiles {
                cert,
                key,
                client_ca,
            }),
            (None, None, None) => None,
            _ => {
                return Err(Error::invalid(
                    "TLS needs both --tls-cert and --tls-key (--tls-client-ca only with them)",
                ));
            }
        };
        if let Some(files) = &tls {
            crate::tls::check(files)?;
        }
        Ok(Some(Self {
            helm,
            serve_controller,
            secrets,
            audit_log,
            auth_config,
            tls,
            rate_limit: match cli.rate_limit.or(file.rate_limit) {
                Some(0) => return Err(Error::invalid("--rate-limit must be at least 1")),
                n => n,
            },
            replica_id,
            replica_ttl,
            replica_share_from: match cli.replica_share_clusters.or(file.replica_share_clusters) {
                Some(0) => None,
                Some(n) => Some(n),
                None => d.replica_share_from,
            },
            revision_history_limit,
            store_cache: match cli.store_cache_mib.or(file.store_cache_mib) {
                Some(0) => return Err(Error::invalid("--store-cache-mib must be at least 1")),
                Some(mib) => mib.saturating_mul(1024 * 1024),
                None => d.store_cache,
            },
            workflows: emco_workflows::Config {
                temporal_server: cli
                    .temporal_server
                    .or(file.temporal_server)
                    .filter(|s| !s.is_empty()),
                ..d.workflows
            },
            listen: cli.listen.or(file.listen).unwrap_or(d.listen),
            grpc_listen: cli
                .grpc_listen
                .or(file.grpc_listen)
                .unwrap_or(d.grpc_listen),
            data_dir: cli.data_dir.or(file.data_dir).unwrap_or(d.data_dir),
            backend,
            context_backend,
            etcd_endpoints,
            etcd_prefix: cli
                .etcd_prefix
                .or(file.etcd_prefix)
                .unwrap_or(d.etcd_prefix),
            mongo_uri: cli.mongo_uri.or(file.mongo_uri),
            mongo_database: cli
                .mongo_database
                .or(file.mongo_database)
                .unwrap_or(d.mongo_database),
            log_format: cli.log_format.or(file.log_format).unwrap_or(d.log_format),
            max_body: cli.max_body.or(file.max_body).unwrap_or(d.max_body),
            max_upload: cli.max_upload.or(file.max_upload).unwrap_or(d.max_upload),
            drain: cli
                .drain_seconds
                .or(file.drain_seconds)
                .map_or(d.drain, Duration::from_secs),
            builtin_controllers: cli
                .builtin_controllers
                .or(file.builtin_controllers)
                .unwrap_or(d.builtin_controllers),
            controller_timeout: cli
                .controller_timeout_seconds
                .or(file.controller_timeout_seconds)
                .map_or(d.controller_timeout, Duration::from_secs),
            rsync_concurrency: cli
                .rsync_concurrency
                .or(file.rsync_concurrency)
                .unwrap_or(d.rsync_concurrency),
            rsync_cluster_concurrency: cli
                .rsync_cluster_concurrency
                .or(file.rsync_cluster_concurrency)
                .unwrap_or(d.rsync_cluster_concurrency),
            rsync_max_retries: cli.rsync_max_retries.or(file.rsync_max_retries),
            rsync_max_backoff: cli
                .rsync_max_backoff_seconds
                .or(file.rsync_max_backoff_seconds)
                .map_or(d.rsync_max_backoff, Duration::from_secs),
            rsync_hook_timeout: cli
                .rsync_hook_timeout_seconds
                .or(file.rsync_hook_timeout_seconds)
                .map_or(d.rsync_hook_timeout, Duration::from_secs),
            // Zero would probe without pause and report every cluster unknown at once.
            cluster_liveness: emco_rsync::engine::Liveness {
                interval: cli
                    .cluster_probe_seconds
                    .or(file.cluster_probe_seconds)
                    .map_or(d.cluster_liveness.interval, |s| {
                        Duration::from_secs(s.max(1))
                    }),
                grace: cli
                    .cluster_grace_seconds
                    .or(file.cluster_grace_seconds)
                    .map_or(d.cluster_liveness.grace, |s| Duration::from_secs(s.max(1))),
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("emco.yaml");
        std::fs::write(
            &file,
            "listen: 127.0.0.1:9999\nbackend: memory\nlog_format: json\n",
        )
        .unwrap();
        let c = Config::from_args([
            "emco-server",
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:7000",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.listen, "127.0.0.1:7000".parse().unwrap());
        assert_eq!(c.backend, Backend::Memory);
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.data_dir, PathBuf::from("./emco-data"));
        // The AppContexts follow a memory resource store unless told otherwise.
        assert_eq!(c.context_backend, ContextBackend::Memory);
        assert_eq!(c.grpc_listen, "127.0.0.1:9016".parse().unwrap());
        assert!(c.builtin_controllers);
        assert_eq!(c.rsync_max_retries, None);
        assert_eq!(c.rsync_hook_timeout, Duration::from_secs(300));
        assert_eq!(c.helm, HelmCompat::V4_2_4);
        std::fs::write(
            &file,
            "context_backend: etcd\netcd_endpoints: [http://a:2379]\netcd_prefix: /emco-a\nrsync_max_retries: 3\nrsync_hook_timeout_seconds: 20\ncluster_probe_seconds: 2\ncluster_grace_seconds: 5\nhelm_version: 3.14.0\n",
        )
        .unwrap();
        let c = Config::from_args([
            "emco-server",
            "--config",
            file.to_str().unwrap(),
            "--etcd-endpoints",
            "http://b:2379, http://c:2379",
            "--builtin-controllers",
            "false",
            "--grpc-listen",
            "127.0.0.1:7001",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.context_backend, ContextBackend::Etcd);
        assert_eq!(c.etcd_endpoints, ["http://b:2379", "http://c:2379"]);
        assert_eq!(c.etcd_prefix, "/emco-a");
        assert_eq!(c.rsync_max_retries, Some(3));
        assert_eq!(c.rsync_hook_timeout, Duration::from_secs(20));
        assert_eq!(c.cluster_liveness.interval, Duration::from_secs(2));
        assert_eq!(c.cluster_liveness.grace, Duration::from_secs(5));
        assert_eq!(c.helm, HelmCompat::V3);
        assert!(!c.builtin_controllers);
        assert_eq!(c.backend, Backend::Embedded);
        assert!(
            Config::from_args(["emco-server", "--context-backend", "etcd"]).is_err(),
            "etcd without endpoints"
        );
        std::fs::write(&file, "nonsense: 1\n").unwrap();
        assert!(Config::from_args(["emco-server", "--config", file.to_str().unwrap()]).is_err());
        assert!(Config::from_args(["emco-server", "--listen", "nope"]).is_err());
        // The store's cache: MiB from a flag or the file, never none at all.
        assert_eq!(
            Config::from_args(["emco-server"])
                .unwrap()
                .unwrap()
                .store_cache,
            emco_store::embedded::DEFAULT_CACHE_SIZE
        );
        let c = Config::from_args(["emco-server", "--store-cache-mib", "512"]);
        assert_eq!(c.unwrap().unwrap().store_cache, 512 * 1024 * 1024);
        let e = Config::from_args(["emco-server", "--store-cache-mib", "0"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("--store-cache-mib must be at least 1"),
            "{e}"
        );
        std::fs::write(&file, "store_cache_mib: 0\n").unwrap();
        assert!(Config::from_args(["emco-server", "--config", file.to_str().unwrap()]).is_err());
        let e = Config::from_args(["emco-server", "--helm-version", "2.17"]).unwrap_err();
        assert!(e.to_string().contains("expected 3.x.y or 4.x.y"), "{e}");
        assert!(
            Config::from_args(["emco-server", "--help"])
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn replicas_need_shared_stores_and_a_ttl() {
        let args = |backend: &'static str, contexts: &'static str, ttl: &'static str| {
            [
                "emco-server",
                "--context-backend",
                contexts,
                "--etcd-endpoints",
                "http://a:2379",
                "--backend",
                backend,
                "--mongo-uri",
                "mongodb://a:27017",
                "--replica-id",
                "r1",
                "--replica-ttl-seconds",
                ttl,
            ]
        };
        let c = Config::from_args(args("mongo", "etcd", "3"))
            .unwrap()
            .unwrap();
        assert_eq!(c.replica_id.as_deref(), Some("r1"));
        assert_eq!(c.replica_ttl, Duration::from_secs(3));
        assert_eq!(c.replica_share_from, Some(1000));
        let mut shared = args("mongo", "etcd", "3").to_vec();
        shared.extend(["--replica-share-clusters", "0"]);
        let c = Config::from_args(shared).unwrap().unwrap();
        assert_eq!(c.replica_share_from, None, "0: never shared");
        for (backend, contexts) in [("embedded", "etcd"), ("mongo", "memory")] {
            let e = Config::from_args(args(backend, contexts, "3")).unwrap_err();
            assert_eq!(e.kind(), emco_core::ErrorKind::InvalidArgument);
            assert!(
                e.to_string().contains("--replica-id needs"),
                "{backend} {contexts}: {e}"
            );
        }
        let e = Config::from_args(args("mongo", "etcd", "0")).unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
    }

    #[test]
    fn a_revision_history_keeps_at_least_two() {
        let limit = |n: &str| Config::from_args(["emco-server", "--revision-history-limit", n]);
        let c = limit("5").unwrap().unwrap();
        assert_eq!(c.revision_history_limit, Some(5));
        let e = limit("1").unwrap_err();
        assert_eq!(e.kind(), emco_core::ErrorKind::InvalidArgument);
        assert!(e.to_string().contains("at least 2"), "{e}");
        let c = Config::from_args(["emco-server"]).unwrap().unwrap();
        assert_eq!(c.revision_history_limit, None, "all, as EMCO");
    }
}
