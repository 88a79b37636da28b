//! The server address: `--server`, else `EMCO_SERVER`, else the config file, else the default.
//!
//! The config file has EMCO's `~/.emco.yaml` shape: one `{host, port}` entry per service
//! (`orchestrator`, `clm`, `dcm`, `ncm`, ...). All services are served by one emco-rs server, so
//! the `orchestrator` entry is used (else the first entry found); a top-level `server: URL` is
//! accepted too.

use std::path::{Path, PathBuf};

use emco_helm::Value;

use emco_client::error::{CtlError, Result};

/// The address used when nothing else names one.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:9015";

/// The services of EMCO's config file, in the order they are looked at.
const SERVICES: &[&str] = &[
    "orchestrator",
    "clm",
    "dcm",
    "ncm",
    "ovnaction",
    "dtc",
    "gac",
    "hpaPlacement",
    "hpaAction",
    "sfc",
    "sfcclient",
    "cacert",
    "workflowmgr",
];

/// The default config file, `~/.emco.yaml`.
#[must_use]
pub fn default_config_path() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".emco.yaml"))
}

/// The server address from the flag, the environment value and the config file, in that order.
/// A config file given explicitly must exist; the default one may be missing.
///
/// # Errors
/// An input error for an unreadable or malformed config file.
pub fn server(
    flag: Option<&str>,
    env: Option<&str>,
    file: Option<&Path>,
    explicit: bool,
) -> Result<String> {
    if let Some(s) = flag.or(env).filter(|s| !s.is_empty()) {
        return Ok(s.trim_end_matches('/').to_owned());
    }
    let Some(file) = file else {
        return Ok(DEFAULT_SERVER.to_owned());
    };
    if !explicit && !file.exists() {
        return Ok(DEFAULT_SERVER.to_owned());
    }
    let config = emco_client::document::load_values(file)?;
    Ok(from_config(&config)
        .map_err(|m| CtlError::input(file, None, None, m))?
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned()))
}

/// The address a parsed config file names, if any.
///
/// # Errors
/// A message when an entry has a bad port.
pub fn from_config(config: &Value) -> std::result::Result<Option<String>, String> {
    let Value::Map(map) = config else {
        return Ok(None);
    };
    if let Some(s) = map.get("server").as_ref().and_then(Value::as_str) {
        return Ok(Some(s.trim_end_matches('/').to_owned()));
    }
    for service in SERVICES {
        let Some(Value::Map(entry)) = map.get(service) else {
            continue;
        };
        let host = entry
            .get("host")
            .map(|h| h.to_go_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "127.0.0.1".to_owned());
        let port = match entry.get("port") {
            None => 9015,
            Some(p) => {
                let text = p.to_go_string();
                text.parse::<u16>()
                    .map_err(|_| format!("{service}.port: {text:?} is not a port"))?
            }
        };
        return Ok(Some(format!("http://{host}:{port}")));
    }
    Ok(None)
}
