//! Loading charts from a directory or a `.tgz` archive, like Helm's `loader` package.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use emco_core::Error;
use sha2::Digest as _;

use crate::archive::{ArchiveError, ArchiveLimits};
use crate::semver::{Constraints, Version};
use crate::value::{Object, Value};

/// Largest archive content Helm accepts (`MaxDecompressedChartSize`).
const MAX_CHART_SIZE: u64 = 100 << 20;
/// Largest single file Helm accepts in an archive (`MaxDecompressedFileSize`).
const MAX_FILE_SIZE: u64 = 5 << 20;
/// Deepest nesting of subcharts (archives inside archives included).
const MAX_CHART_DEPTH: usize = 16;

/// A file of a chart, by its path relative to the chart root (`templates/service.yaml`).
#[derive(Debug, Clone)]
pub struct ChartFile {
    /// The path relative to the chart root, with `/` separators.
    pub name: String,
    /// The content.
    pub data: Arc<Vec<u8>>,
}

/// A dependency declared in `Chart.yaml` (v2) or `requirements.yaml` (v1).
#[derive(Debug, Clone, Default)]
pub struct Dependency {
    /// The chart name.
    pub name: String,
    /// A semver constraint on the chart's version.
    pub version: String,
    /// Where the chart comes from (informational here).
    pub repository: String,
    /// Comma-separated values paths; the first boolean found enables or disables the chart.
    pub condition: String,
    /// Tags under `tags:` in the values that enable or disable the chart.
    pub tags: Vec<String>,
    /// The name the chart is used under.
    pub alias: String,
    /// Values to import from the subchart (`exports.x` names or `{child, parent}` maps).
    pub import_values: Vec<Value>,
}

/// The parsed `Chart.yaml`.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// `apiVersion`: `v1` or `v2`.
    pub api_version: String,
    /// The chart name (an alias replaces it when the chart is used under one).
    pub name: String,
    /// The chart version.
    pub version: String,
    /// The version of the app.
    pub app_version: String,
    /// A constraint on the Kubernetes version.
    pub kube_version: String,
    /// `application` (or empty) or `library`.
    pub chart_type: String,
    /// The declared dependencies.
    pub dependencies: Vec<Dependency>,
    /// Every field as written, for `.Chart`.
    raw: BTreeMap<String, Value>,
}

/// A loaded chart and its subcharts.
#[derive(Debug, Clone)]
pub struct Chart {
    /// `Chart.yaml`.
    pub metadata: Metadata,
    /// `values.yaml` (a map).
    pub values: Value,
    /// Files under `templates/`.
    pub templates: Vec<ChartFile>,
    /// Every other file (`crds/` included), for `.Files`.
    pub files: Vec<ChartFile>,
    /// Subcharts from `charts/`.
    pub dependencies: Vec<Chart>,
    digest: String,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::invalid(msg)
}

impl Chart {
    /// Loads the chart in directory `path`, honouring its `.helmignore`.
    ///
    /// # Errors
    /// `NotFound` when the directory cannot be read, `InvalidArgument` for a malformed chart.
    pub fn load_dir(path: impl AsRef<Path>) -> Result<Chart, Error> {
        let root = path.as_ref();
        let ignore = match std::fs::read_to_string(root.join(".helmignore")) {
            Ok(text) => Ignore::parse(&text)?,
            Err(_) => Ignore::parse("")?,
        };
        let mut files = Vec::new();
        walk(root, "", &ignore, &mut files, 0)?;
        Self::from_files(files, 0)
    }

    /// Loads a chart archive (`helm package` output), including archived subcharts.
    ///
    /// # Errors
    /// `InvalidArgument` for a malformed archive or chart, entries outside the chart directory,
    /// links, or content over Helm's size limits.
    pub fn load_tgz(bytes: &[u8]) -> Result<Chart, Error> {
        Self::load_tgz_at(bytes, 0)
    }

    fn load_tgz_at(bytes: &[u8], depth: usize) -> Result<Chart, Error> {
        let files = untar(bytes)?;
        Self::from_files(files, depth)
    }

    /// Builds a chart from `(path, content)` pairs relative to the chart root.
    fn from_files(files: Vec<(String, Vec<u8>)>, depth: usize) -> Result<Chart, Error> {
        if depth > MAX_CHART_DEPTH {
            return Err(invalid(format!(
                "subcharts nested deeper than {MAX_CHART_DEPTH}"
            )));
        }
        let mut hasher = sha2::Sha256::new();
        let mut chart_yaml = None;
        let mut values = None;
        let mut requirements = None;
        let mut templates = Vec::new();
        let mut other = Vec::new();
        let mut sub_dirs: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
        let mut sub_archives = Vec::new();
        let mut sorted = files;
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, data) in sorted {
            hasher.update(name.as_bytes());
            hasher.update((data.len() as u64).to_le_bytes());
            hasher.update(&data);
            match name.as_str() {
                "Chart.yaml" => chart_yaml = Some(data),
                "values.yaml" => values = Some(data),
                "requirements.yaml" => requirements = Some(data),
                "Chart.lock" | "requirements.lock" | "values.schema.json" => {}
                n if n.starts_with("templates/") => {
                    templates.push(ChartFile {
                        name,
                        data: Arc::new(data),
                    });
                }
                n if n.starts_with("charts/") => {
                    let rest = &n["charts/".len()..];
                    match rest.split_once('/') {
                        Some((dir, inner)) => {
                            sub_dirs
                                .entry(dir.to_owned())
                                .or_default()
                                .push((inner.to_owned(), data));
                        }
                        None if rest.ends_with(".tgz") || rest.ends_with(".tar.gz") => {
                            sub_archives.push((name, data))
                        }
                        None => {}
                    }
                }
                _ => other.push(ChartFile {
                    name,
                    data: Arc::new(data),
                }),
            }
        }
        let chart_yaml = chart_yaml.ok_or_else(|| invalid("Chart.yaml file is missing"))?;
        let mut metadata = Metadata::parse(&String::from_utf8_lossy(&chart_yaml))?;
        if let Some(req) = requirements.filter(|_| metadata.api_version == "v1") {
            metadata.dependencies =
                parse_dependencies(&parse_yaml_map(&req, "requirements.yaml")?)?;
        }
        let values = match values {
            Some(v) => {
                let parsed = crate::yaml::parse_values_document(&String::from_utf8_lossy(&v))
                    .map_err(|e| invalid(format!("cannot load values.yaml: {e}")))?;
                match parsed {
                    Value::Nil => Value::empty_map(),
                    m @ Value::Map(_) => m,
                    _ => return Err(invalid("cannot load values.yaml: not a map")),
                }
            }
            None => Value::empty_map(),
        };
        let mut dependencies = Vec::new();
        for (dir, files) in sub_dirs {
            let sub = Self::from_files(files, depth + 1).map_err(|e| {
                invalid(format!(
                    "error unpacking subchart {dir} in {}: {e}",
                    metadata.name
                ))
            })?;
            dependencies.push(sub);
        }
        for (name, data) in sub_archives {
            let sub = Self::load_tgz_at(&data, depth + 1).map_err(|e| {
                invalid(format!(
                    "error unpacking subchart {name} in {}: {e}",
                    metadata.name
                ))
            })?;
            dependencies.push(sub);
        }
        let digest = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Ok(Chart {
            metadata,
            values,
            templates,
            files: other,
            dependencies,
            digest,
        })
    }

    /// The chart name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// A SHA-256 over every file of the chart and its subcharts: the cache key of its templates.
    #[must_use]
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Helm's `CheckDependencies`: every dependency named in the metadata must be in `charts/`.
    ///
    /// # Errors
    /// `FailedPrecondition` naming the missing charts.
    pub fn check_dependencies(&self) -> Result<(), Error> {
        let missing: Vec<&str> = self
            .metadata
            .dependencies
            .iter()
            .filter(|d| !self.dependencies.iter().any(|c| c.name() == d.name))
            .map(|d| d.name.as_str())
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(Error::failed_precondition(format!(
            "found in Chart.yaml, but missing in charts/ directory: {}",
            missing.join(", ")
        )))
    }

    /// Whether `version` satisfies the dependency's version constraint (Helm's
    /// `IsCompatibleRange`; an empty constraint accepts anything).
    pub(crate) fn satisfies(&self, constraint: &str) -> bool {
        if constraint.is_empty() {
            return true;
        }
        match (
            Constraints::parse(constraint),
            Version::parse(&self.metadata.version),
        ) {
            (Ok(c), Ok(v)) => c.check(&v),
            _ => false,
        }
    }

    /// The chart used under another name (a dependency alias).
    pub(crate) fn aliased(&self, alias: &str) -> Chart {
        let mut c = self.clone();
        c.metadata.name = alias.to_owned();
        c
    }
}

fn parse_yaml_map(data: &[u8], what: &str) -> Result<BTreeMap<String, Value>, Error> {
    match crate::yaml::parse_values_document(&String::from_utf8_lossy(data)) {
        Ok(Value::Map(m)) => Ok(m.snapshot()),
        Ok(Value::Nil) => Ok(BTreeMap::new()),
        Ok(_) => Err(invalid(format!("cannot load {what}: not a map"))),
        Err(e) => Err(invalid(format!("cannot load {what}: {e}"))),
    }
}

fn string_field(m: &BTreeMap<String, Value>, key: &str, what: &str) -> Result<String, Error> {
    match m.get(key) {
        None | Some(Value::Nil) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(invalid(format!(
            "cannot load {what}: json: cannot unmarshal {} into Go struct field .{key} of type string",
            if matches!(other, Value::Float(_)) {
                "number"
            } else {
                other.kind_name()
            }
        ))),
    }
}

fn parse_dependencies(m: &BTreeMap<String, Value>) -> Result<Vec<Dependency>, Error> {
    let Some(Value::List(list)) = m.get("dependencies") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for item in list.iter() {
        let Value::Map(d) = item else { continue };
        let d = d.snapshot();
        let what = "dependencies";
        let tags = match d.get("tags") {
            Some(Value::List(t)) => t.iter().map(Value::to_go_string).collect(),
            _ => Vec::new(),
        };
        let import_values = match d.get("import-values") {
            Some(Value::List(l)) => l.to_vec(),
            _ => Vec::new(),
        };
        out.push(Dependency {
            name: string_field(&d, "name", what)?,
            version: string_field(&d, "version", what)?,
            repository: string_field(&d, "repository", what)?,
            condition: string_field(&d, "condition", what)?,
            tags,
            alias: string_field(&d, "alias", what)?,
            import_values,
        });
    }
    Ok(out)
}

impl Metadata {
    fn parse(text: &str) -> Result<Metadata, Error> {
        let raw = parse_yaml_map(text.as_bytes(), "Chart.yaml")?;
        let what = "Chart.yaml";
        let md = Metadata {
            api_version: string_field(&raw, "apiVersion", what)?,
            name: string_field(&raw, "name", what)?,
            version: string_field(&raw, "version", what)?,
            app_version: string_field(&raw, "appVersion", what)?,
            kube_version: string_field(&raw, "kubeVersion", what)?,
            chart_type: string_field(&raw, "type", what)?,
            dependencies: parse_dependencies(&raw)?,
            raw,
        };
        if md.api_version.is_empty() {
            return Err(invalid("validation: chart.metadata.apiVersion is required"));
        }
        if md.name.is_empty() {
            return Err(invalid("validation: chart.metadata.name is required"));
        }
        if md.version.is_empty() {
            return Err(invalid("validation: chart.metadata.version is required"));
        }
        if Version::parse(&md.version).is_err() {
            return Err(invalid(format!(
                "validation: chart.metadata.version {:?} is invalid",
                md.version
            )));
        }
        if !matches!(md.chart_type.as_str(), "" | "application" | "library") {
            return Err(invalid(
                "validation: chart.metadata.type must be application or library",
            ));
        }
        Ok(md)
    }

    /// The Go field names of `chart.Metadata` and the YAML keys they come from.
    const FIELDS: [(&'static str, &'static str); 17] = [
        ("Name", "name"),
        ("Home", "home"),
        ("Sources", "sources"),
        ("Version", "version"),
        ("Description", "description"),
        ("Keywords", "keywords"),
        ("Maintainers", "maintainers"),
        ("Icon", "icon"),
        ("APIVersion", "apiVersion"),
        ("Condition", "condition"),
        ("Tags", "tags"),
        ("AppVersion", "appVersion"),
        ("Deprecated", "deprecated"),
        ("Annotations", "annotations"),
        ("KubeVersion", "kubeVersion"),
        ("Dependencies", "dependencies"),
        ("Type", "type"),
    ];
}

/// `.Chart`: the metadata as Go's `*chart.Metadata` struct, with its field names.
#[derive(Debug)]
pub(crate) struct ChartObject(pub Metadata);

impl Object for ChartObject {
    fn type_name(&self) -> &str {
        "*chart.Metadata"
    }

    fn member(&self, name: &str, _args: &[Value]) -> Option<Result<Value, String>> {
        let (_, key) = Metadata::FIELDS.iter().find(|(f, _)| *f == name)?;
        let value = match name {
            "Name" => Value::String(self.0.name.clone()),
            "Deprecated" => Value::Bool(matches!(self.0.raw.get(*key), Some(Value::Bool(true)))),
            "Sources" | "Keywords" | "Maintainers" | "Tags" | "Dependencies" => {
                match self.0.raw.get(*key) {
                    Some(v @ Value::List(_)) => v.clone(),
                    _ => Value::list(Vec::new()),
                }
            }
            "Annotations" => match self.0.raw.get(*key) {
                Some(v @ Value::Map(_)) => v.clone(),
                _ => Value::empty_map(),
            },
            _ => match self.0.raw.get(*key) {
                Some(Value::String(s)) => Value::String(s.clone()),
                _ => Value::str(""),
            },
        };
        Some(Ok(value))
    }

    fn is_method(&self, _name: &str) -> bool {
        false
    }

    fn display(&self) -> String {
        let parts: Vec<String> = Metadata::FIELDS
            .iter()
            .filter_map(|(f, _)| self.member(f, &[]).and_then(Result::ok))
            .map(|v| v.to_go_string())
            .collect();
        format!("&{{{}}}", parts.join(" "))
    }
}

/// `.helmignore` rules (Helm's `ignore` package) plus its default of hidden files in templates.
struct Ignore {
    rules: Vec<Rule>,
}

struct Rule {
    pattern: String,
    negate: bool,
    must_dir: bool,
}

impl Ignore {
    fn parse(text: &str) -> Result<Ignore, Error> {
        let mut rules = Vec::new();
        for line in text
            .lines()
            .map(str::trim)
            .chain(std::iter::once("templates/.?*"))
        {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.contains("**") {
                return Err(invalid(
                    "double-star (**) syntax is not supported in .helmignore",
                ));
            }
            let (negate, rest) = match line.strip_prefix('!') {
                Some(r) => (true, r),
                None => (false, line),
            };
            let (must_dir, rest) = match rest.strip_suffix('/') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            rules.push(Rule {
                pattern: rest.trim_start_matches('/').to_owned(),
                negate,
                must_dir,
            });
        }
        Ok(Ignore { rules })
    }

    fn ignored(&self, path: &str, is_dir: bool) -> bool {
        for r in &self.rules {
            let matched = if r.pattern.contains('/') {
                path_match(&r.pattern, path)
            } else {
                path_match(&r.pattern, path.rsplit('/').next().unwrap_or(path))
            };
            if r.negate {
                if (r.must_dir && !is_dir) || !matched {
                    return true;
                }
                continue;
            }
            if r.must_dir && !is_dir {
                continue;
            }
            if matched {
                return true;
            }
        }
        false
    }
}

/// Go's `filepath.Match`: `*` and `?` do not cross `/`, `[...]` classes, `\` escapes.
fn path_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len())
                .take_while(|&i| i == 0 || n[i - 1] != '/')
                .any(|i| go(&p[1..], &n[i..])),
            Some('?') => n.first().is_some_and(|c| *c != '/') && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(c) = n.first() else { return false };
                let mut i = 1;
                let negated = p.get(1) == Some(&'^');
                if negated {
                    i += 1;
                }
                let mut found = false;
                while let Some(&lo) = p.get(i) {
                    if lo == ']' && i > 1 + usize::from(negated) {
                        return found != negated && *c != '/' && go(&p[i + 1..], &n[1..]);
                    }
                    if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|h| *h != ']') {
                        found |= lo <= *c && *c <= p[i + 2];
                        i += 3;
                    } else {
                        found |= lo == *c;
                        i += 1;
                    }
                }
                false
            }
            Some('\\') => p.get(1).is_some_and(|e| n.first() == Some(e)) && go(&p[2..], &n[1..]),
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(
        &pattern.chars().collect::<Vec<_>>(),
        &name.chars().collect::<Vec<_>>(),
    )
}

fn walk(
    dir: &Path,
    rel: &str,
    ignore: &Ignore,
    out: &mut Vec<(String, Vec<u8>)>,
    depth: usize,
) -> Result<(), Error> {
    if depth > 64 {
        return Err(invalid(format!("directory nesting too deep at {rel}")));
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| {
            Error::not_found(format!(
                "cannot read chart directory {}: {e}",
                dir.display()
            ))
        })?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let meta = std::fs::metadata(entry.path())
            .map_err(|e| invalid(format!("cannot read {}: {e}", entry.path().display())))?;
        if ignore.ignored(&path, meta.is_dir()) {
            continue;
        }
        if meta.is_dir() {
            walk(&entry.path(), &path, ignore, out, depth + 1)?;
        } else if meta.is_file() {
            if meta.len() > MAX_FILE_SIZE {
                return Err(invalid(format!(
                    "chart file {name:?} is larger than the maximum file size {MAX_FILE_SIZE}"
                )));
            }
            let data = std::fs::read(entry.path())
                .map_err(|e| invalid(format!("cannot read {path}: {e}")))?;
            out.push((path, trim_bom(data)));
        }
    }
    Ok(())
}

/// Helm drops a UTF-8 byte order mark at the start of every file.
fn trim_bom(mut data: Vec<u8>) -> Vec<u8> {
    if data.starts_with(&[0xef, 0xbb, 0xbf]) {
        data.drain(..3);
    }
    data
}

/// Reads a gzipped tar in memory; entries lose their first path component (the chart directory).
fn untar(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let limits = ArchiveLimits {
        max_file: MAX_FILE_SIZE,
        max_total: MAX_CHART_SIZE,
    };
    // Helm's words (pkg/chart/loader/archive.go).
    let files = crate::archive::read_all(bytes, limits).map_err(|e| {
        invalid(match e {
            ArchiveError::Unreadable(why) => format!("cannot read chart archive: {why}"),
            ArchiveError::Escapes {
                path,
                absolute: true,
            } => format!("chart illegally contains absolute path {path}"),
            ArchiveError::Escapes {
                path,
                absolute: false,
            } => format!("chart illegally references parent directory: {path}"),
            ArchiveError::Link(path) | ArchiveError::NotRegular(path) => {
                format!("chart archive entry {path} is not a regular file (links are not allowed)")
            }
            ArchiveError::FileTooLarge { path, .. } => format!(
                "decompressed chart file {} is larger than the maximum file size {MAX_FILE_SIZE}",
                path.split_once('/').map_or(path.as_str(), |(_, rel)| rel)
            ),
            ArchiveError::TooLarge(_) => {
                format!("decompressed chart is larger than the maximum size {MAX_CHART_SIZE}")
            }
        })
    })?;
    let out: Vec<(String, Vec<u8>)> = files
        .into_iter()
        .filter(|(parts, _)| parts.len() > 1)
        .map(|(parts, data)| (parts[1..].join("/"), trim_bom(data)))
        .collect();
    if out.is_empty() {
        return Err(invalid("no files in chart archive"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::archive::tests::tgz;

    const CHART: &[u8] = b"apiVersion: v2\nname: demo\nversion: 1.2.3\n";

    /// `tar -C dir -czf x.tgz .` (how EMCO's setup scripts pack charts): a `./` entry and
    /// members `./demo/...`, which EMCO's orchestrator accepts.
    #[test]
    fn loads_archives_made_with_tar_c_dot() {
        let top = tgz(&[
            ("./", b"", tar::EntryType::Directory),
            ("./demo/", b"", tar::EntryType::Directory),
            ("./demo/Chart.yaml", CHART, tar::EntryType::Regular),
            (
                "./demo/templates/x.yaml",
                b"kind: X\n",
                tar::EntryType::Regular,
            ),
            ("././demo/values.yaml", b"a: 1\n", tar::EntryType::Regular),
        ]);
        let c = Chart::load_tgz(&top).unwrap();
        assert_eq!(c.name(), "demo");
        assert_eq!(c.templates[0].name, "templates/x.yaml");
        assert_eq!(c.values.to_go_string(), "map[a:1]");
    }

    #[test]
    fn loads_archives_with_nested_subcharts() {
        let sub = tgz(&[(
            "sub/Chart.yaml",
            b"apiVersion: v2\nname: sub\nversion: 0.1.0\n",
            tar::EntryType::Regular,
        )]);
        let top = tgz(&[
            ("demo/Chart.yaml", CHART, tar::EntryType::Regular),
            ("demo/values.yaml", b"a: 1\n", tar::EntryType::Regular),
            (
                "demo/templates/x.yaml",
                b"kind: X\n",
                tar::EntryType::Regular,
            ),
            ("demo/files/f.txt", b"f", tar::EntryType::Regular),
            ("demo/charts/sub-0.1.0.tgz", &sub, tar::EntryType::Regular),
        ]);
        let c = Chart::load_tgz(&top).unwrap();
        assert_eq!(c.name(), "demo");
        assert_eq!(c.templates[0].name, "templates/x.yaml");
        assert_eq!(c.files[0].name, "files/f.txt");
        assert_eq!(c.dependencies[0].name(), "sub");
        assert_eq!(c.values.to_go_string(), "map[a:1]");
        assert_eq!(c.digest().len(), 64);
    }

    #[test]
    fn rejects_hostile_archives() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                tgz(&[("demo/../../etc/x", b"x", tar::EntryType::Regular)]),
                "parent directory",
            ),
            (
                tgz(&[("/demo/Chart.yaml", CHART, tar::EntryType::Regular)]),
                "absolute path",
            ),
            (
                tgz(&[("demo/link", b"", tar::EntryType::Symlink)]),
                "links are not allowed",
            ),
            (
                tgz(&[("demo/hard", b"", tar::EntryType::Link)]),
                "links are not allowed",
            ),
            (
                tgz(&[("demo/values.yaml", b"a: 1", tar::EntryType::Regular)]),
                "Chart.yaml file is missing",
            ),
            (b"not a gzip".to_vec(), "cannot read chart archive"),
        ];
        for (bytes, want) in cases {
            let err = Chart::load_tgz(&bytes).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        let big = vec![b'x'; (MAX_FILE_SIZE + 1) as usize];
        let err = Chart::load_tgz(&tgz(&[("demo/big", &big, tar::EntryType::Regular)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("larger than the maximum file size"), "{err}");
    }

    #[test]
    fn validates_metadata() {
        let load =
            |y: &str| Chart::from_files(vec![("Chart.yaml".to_owned(), y.as_bytes().to_vec())], 0);
        assert!(load("apiVersion: v2\nname: a\nversion: 1.0.0\n").is_ok());
        assert!(
            load("apiVersion: v2\nversion: 1.0.0\n")
                .unwrap_err()
                .to_string()
                .contains("name is required")
        );
        assert!(
            load("apiVersion: v2\nname: a\nversion: x\n")
                .unwrap_err()
                .to_string()
                .contains("is invalid")
        );
        assert!(
            load("apiVersion: v2\nname: a\nversion: 1.0\n")
                .unwrap_err()
                .to_string()
                .contains("cannot unmarshal number")
        );
        assert!(load("apiVersion: v2\nname: a\nversion: 1.0.0\ntype: other\n").is_err());
    }

    #[test]
    fn helmignore_rules() {
        let ig = Ignore::parse("# comment\n*.bak\nsecret/\n/top.txt\n").unwrap();
        assert!(ig.ignored("a/b.bak", false));
        assert!(ig.ignored("secret", true));
        assert!(!ig.ignored("secret", false));
        assert!(ig.ignored("top.txt", false));
        assert!(ig.ignored("templates/.hidden", false));
        assert!(!ig.ignored("templates/x.yaml", false));
        assert!(Ignore::parse("a/**/b").is_err());
        // Helm stops at a negated rule: what it matches is kept, and, as Helm's own code does,
        // everything it does not match is ignored.
        let neg = Ignore::parse("!keep.txt\n").unwrap();
        assert!(!neg.ignored("keep.txt", false));
        assert!(neg.ignored("other.txt", false));
        assert!(path_match("[a-c]?.txt", "b1.txt"));
        assert!(!path_match("*.txt", "a/b.txt"));
    }
}
