//! Go's data formats, as EMCO's Go services, kubectl, client-go and Helm read and write them.
//!
//! EMCO's users send bodies and files that Go programs accepted; reading them with Go's rules
//! (not serde's or YAML 1.2's) is what keeps those files working unchanged:
//! - [`yaml`]: the one YAML reader and writer of the workspace (go-yaml v2 through
//!   `sigs.k8s.io/yaml`), for manifests, values, profiles, emcoctl files and configuration.
//! - [`json`]: `encoding/json`'s decoding rules for typed bodies (`null` is the zero value,
//!   case-insensitive field names).
//! - [`jsonschema`]: gojsonschema's validation of request bodies, as EMCO's handlers answer
//!   invalid ones (`Invalid Input:` and gojsonschema's texts).
//! - [`strconv`]: Go's float formats and integer parsing.
//! - [`time`]: Go's duration text (`time.ParseDuration`, `Duration.String`).
//!
//! ```
//! let manifest = emco_go::yaml::parse("spec:\n  defaultMode: 0744\n").unwrap();
//! assert_eq!(manifest["spec"]["defaultMode"], 484);
//! ```

pub mod json;
pub mod jsonschema;
pub mod strconv;
pub mod time;
pub mod yaml;
