//! Validation of uploaded files: Helm chart and profile archives, kubeconfigs.
//!
//! Archives are checked entry by entry while decompressing (nothing is unpacked to disk): a
//! gzip'd tar whose paths stay inside the archive, with no links or devices, and with a bound on
//! the unpacked size so a small archive cannot expand without limit.

use std::io::Read;
use std::path::Path;

use emco_core::model::ProfileManifest;
use emco_core::{Error, Result, Validate};
use emco_helm::archive::{ArchiveError, ArchiveLimits, Entry, walk};

/// Limits on uploads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest chart or profile archive accepted, compressed (bytes).
    pub max_archive: u64,
    /// The largest unpacked size of an archive (bytes).
    pub max_unpacked: u64,
    /// The largest kubeconfig accepted (bytes).
    pub max_kubeconfig: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_archive: 100 * 1024 * 1024,
            max_unpacked: 512 * 1024 * 1024,
            max_kubeconfig: 1024 * 1024,
        }
    }
}

/// The regular files of an archive that a check wants to read, by path inside the archive.
type Wanted<'a> = &'a mut dyn FnMut(&[String], &mut dyn Read) -> Result<()>;

/// Walks the gzip'd tar at `path` ([`emco_helm::archive::walk`]: no links, no escaping paths,
/// unpacked size bounded) and hands each regular file's path components and content to `visit`.
fn walk_archive(path: &Path, limits: &Limits, visit: Wanted<'_>) -> Result<()> {
    let file = std::fs::File::open(path)
        .map_err(|e| Error::internal("cannot open an uploaded archive").with_source(e))?;
    let bounds = ArchiveLimits {
        max_file: limits.max_unpacked,
        max_total: limits.max_unpacked,
    };
    let count = walk(file, bounds, &mut |entry: Entry<'_>| {
        visit(entry.parts, entry.content).map_err(Refused)
    })
    .map_err(|e: Refused| e.0)?;
    if count == 0 {
        return Err(Error::invalid("the archive is empty").with_field("file"));
    }
    Ok(())
}

/// An upload check's error, an archive's refusal among them (field `file`).
struct Refused(Error);

impl From<ArchiveError> for Refused {
    fn from(e: ArchiveError) -> Self {
        let why = match e {
            ArchiveError::TooLarge(limit) | ArchiveError::FileTooLarge { limit, .. } => {
                format!("the archive unpacks to more than {limit} bytes")
            }
            other => other.to_string(),
        };
        Self(Error::invalid(why).with_field("file"))
    }
}

impl From<Error> for Refused {
    fn from(e: Error) -> Self {
        Self(e)
    }
}

fn read_small(r: &mut dyn Read, what: &str) -> Result<String> {
    let mut s = String::new();
    r.take(4 * 1024 * 1024)
        .read_to_string(&mut s)
        .map_err(|e| Error::invalid(format!("{what} is not UTF-8 text: {e}")).with_field("file"))?;
    Ok(s)
}

/// Checks a Helm chart archive: a gzip'd tar whose single top directory holds `Chart.yaml`
/// with a `name`.
///
/// # Errors
/// InvalidArgument (field `file`) saying what is wrong.
pub fn check_chart(path: &Path, limits: &Limits) -> Result<()> {
    let mut tops: Vec<String> = Vec::new();
    let mut chart_yaml: Option<String> = None;
    walk_archive(path, limits, &mut |parts, content| {
        if !tops.contains(&parts[0]) {
            tops.push(parts[0].clone());
        }
        if parts.len() == 2 && parts[1] == "Chart.yaml" {
            chart_yaml = Some(read_small(content, "Chart.yaml")?);
        }
        Ok(())
    })?;
    let bad = |why: &str| Err(Error::invalid(why.to_owned()).with_field("file"));
    if tops.len() != 1 {
        return bad("a chart archive must hold exactly one top directory, the chart");
    }
    let Some(text) = chart_yaml else {
        return bad("the chart has no Chart.yaml in its top directory");
    };
    let doc: serde_json::Value = emco_go::yaml::from_str(&text)
        .map_err(|e| Error::invalid(format!("Chart.yaml is not YAML: {e}")).with_field("file"))?;
    match doc.get("name").and_then(serde_json::Value::as_str) {
        Some(n) if !n.is_empty() => Ok(()),
        _ => bad("Chart.yaml has no name"),
    }
}

/// Checks a profile archive: a gzip'd tar holding `manifest.yaml` (at its root or in its single
/// top directory) that parses as a valid [`ProfileManifest`].
///
/// # Errors
/// InvalidArgument (field `file`) saying what is wrong.
pub fn check_profile(path: &Path, limits: &Limits) -> Result<ProfileManifest> {
    let mut manifest: Option<String> = None;
    walk_archive(path, limits, &mut |parts, content| {
        let is_manifest = parts.last().is_some_and(|n| n == "manifest.yaml") && parts.len() <= 2;
        if is_manifest && (manifest.is_none() || parts.len() == 1) {
            manifest = Some(read_small(content, "manifest.yaml")?);
        }
        Ok(())
    })?;
    let text = manifest.ok_or_else(|| {
        Error::invalid("the profile archive has no manifest.yaml").with_field("file")
    })?;
    let parsed: ProfileManifest = emco_go::yaml::from_str(&text).map_err(|e| {
        Error::invalid(format!("manifest.yaml is not a profile manifest: {e}")).with_field("file")
    })?;
    parsed
        .validate()
        .map_err(|e| e.within("file:manifest.yaml"))?;
    Ok(parsed)
}

/// Checks a kubeconfig: YAML with `clusters`, `users` and `contexts` lists, at least one cluster.
///
/// # Errors
/// InvalidArgument (field `file`) saying what is wrong.
pub fn check_kubeconfig(path: &Path, limits: &Limits) -> Result<()> {
    let size = std::fs::metadata(path)
        .map_err(|e| Error::internal("cannot read an uploaded kubeconfig").with_source(e))?
        .len();
    if size > limits.max_kubeconfig {
        return Err(Error::invalid(format!(
            "the kubeconfig is larger than {} bytes",
            limits.max_kubeconfig
        ))
        .with_field("file"));
    }
    let text = std::fs::read(path)
        .map_err(|e| Error::internal("cannot read an uploaded kubeconfig").with_source(e))?;
    let text = String::from_utf8(text)
        .map_err(|_| Error::invalid("the kubeconfig is not UTF-8 text").with_field("file"))?;
    let doc = emco_go::yaml::parse(&text).map_err(|e| {
        Error::invalid(format!("the kubeconfig is not YAML: {e}")).with_field("file")
    })?;
    for list in ["clusters", "users", "contexts"] {
        if !doc.get(list).is_some_and(serde_json::Value::is_array) {
            return Err(
                Error::invalid(format!("the kubeconfig has no {list} list")).with_field("file")
            );
        }
    }
    let clusters = doc
        .get("clusters")
        .and_then(serde_json::Value::as_array)
        .map_or(0, Vec::len);
    if clusters == 0 {
        return Err(Error::invalid("the kubeconfig names no cluster").with_field("file"));
    }
    Ok(())
}
