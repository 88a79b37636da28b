//! The server's configuration: flags, then `EMCO_*` environment variables, then a YAML file,
//! then defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use emco_core::Error;
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
    /// The data directory of the embedded store [default: ./emco-data].
    #[arg(long, env = "EMCO_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The resource store backend [default: embedded].
    #[arg(long, env = "EMCO_BACKEND", value_enum)]
    backend: Option<Backend>,
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
}

/// The configuration file: the same keys as the flags, all optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    data_dir: Option<PathBuf>,
    backend: Option<Backend>,
    mongo_uri: Option<String>,
    mongo_database: Option<String>,
    log_format: Option<LogFormat>,
    max_body: Option<usize>,
    max_upload: Option<u64>,
    drain_seconds: Option<u64>,
}

/// The resolved configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The REST listener.
    pub listen: SocketAddr,
    /// The data directory (embedded backend).
    pub data_dir: PathBuf,
    /// The resource store backend.
    pub backend: Backend,
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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9015)),
            data_dir: PathBuf::from("./emco-data"),
            backend: Backend::Embedded,
            mongo_uri: None,
            mongo_database: "emco".to_owned(),
            log_format: LogFormat::Text,
            max_body: 4 * 1024 * 1024,
            max_upload: 100 * 1024 * 1024,
            drain: Duration::from_secs(10),
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
                serde_yaml_ng::from_str::<FileConfig>(&text).map_err(|e| {
                    Error::invalid(format!("the config file {path:?} is not valid: {e}"))
                })?
            }
            None => FileConfig::default(),
        };
        let d = Self::default();
        Ok(Some(Self {
            listen: cli.listen.or(file.listen).unwrap_or(d.listen),
            data_dir: cli.data_dir.or(file.data_dir).unwrap_or(d.data_dir),
            backend: cli.backend.or(file.backend).unwrap_or(d.backend),
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
        std::fs::write(&file, "nonsense: 1\n").unwrap();
        assert!(Config::from_args(["emco-server", "--config", file.to_str().unwrap()]).is_err());
        assert!(Config::from_args(["emco-server", "--listen", "nope"]).is_err());
        assert!(
            Config::from_args(["emco-server", "--help"])
                .unwrap()
                .is_none()
        );
    }
}
