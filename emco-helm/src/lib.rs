//! # emco-helm
//!
//! Renders Helm charts in-process, byte for byte like `helm template` of the current Helm
//! release (4.2.4 and later; Helm 3 and 4.2.0 to 4.2.3 with [`HelmCompat`]), so that no helm
//! binary is needed: a Go `text/template` engine, the Sprig and Helm function libraries, values
//! merging, subcharts, hooks and Helm's install order. Every app of an EMCO composite application
//! is a Helm chart rendered here before placement.
//!
//! This crate does no I/O of its own beyond reading a chart that the caller names.
//!
//! - [`Chart::load_dir`] / [`Chart::load_tgz`] load a chart and its subcharts (archives are
//!   read in memory; traversal, links and oversized entries are rejected).
//! - [`render()`] renders it with [`RenderOptions`] (values files, `--set`, capabilities) into
//!   [`Rendered`] manifests, hooks, CRDs and notes; [`Rendered::to_helm_output`] gives the exact
//!   text `helm template` prints. The `emco-helm template` binary is a thin CLI over it.
//! - [`render_templates`] is Helm's engine step alone: the text of every template, unsplit.
//! - [`Templates`] is the Go `text/template` engine on its own, with the Sprig and Helm
//!   functions (all of Sprig's, incl. keys and certificates: RSA by the `rsa` crate, ECDSA,
//!   ed25519 and signing by ring through rcgen; dates with zones from the system's zoneinfo);
//!   [`yaml`] and [`json`] read and write like go-yaml v2 and `encoding/json`.
//! - `tests/helm_goldens.rs` checks the output against Helm's own goldens and engine tests.
//!
//! YAML is read with `saphyr-parser` (maintained, event based, accepts duplicate keys); scalar
//! typing follows go-yaml v2 (YAML 1.1) in [`yaml`] itself, since Helm reads values that way.
//!
//! ```
//! use emco_helm::{TemplateLimits, Templates};
//!
//! let mut set = Templates::new();
//! set.add("t", r#"{{ define "greet" }}Hello {{ . | upper }}{{ end }}{{ include "greet" .name | quote }}"#)?;
//! let data = emco_helm::yaml::parse_values_document("name: world")?;
//! assert_eq!(set.execute("t", &data, &TemplateLimits::default())?, r#""Hello WORLD""#);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod archive;
#[cfg(test)]
mod cases;
pub mod chart;
mod compat;
pub mod error;
pub mod files;
mod funcs;
pub mod gofmt;
pub mod json;
pub mod render;
pub mod semver;
pub mod template;
pub mod value;
pub mod values;
pub mod yaml;

pub use chart::Chart;
pub use error::TemplateError;
pub use funcs::names as function_names;
pub use render::{HelmCompat, Hook, Manifest, RenderOptions, Rendered, render, render_templates};
pub use template::{TemplateLimits, Templates};
pub use value::{Map, Object, Value};
