//! Reading gzip'd tar archives (charts, app profiles) safely, in memory, and packing them
//! ([`pack_dir`], [`pack_files`]) as users and tests hand them to the API.
//!
//! Entries are checked one by one while decompressing, nothing is unpacked to disk: paths must
//! stay inside the archive, links and devices refuse it, and the unpacked size is bounded per
//! file and in all, so a small archive cannot expand without limit. Directories and the pax and
//! GNU metadata entries are skipped. Callers word the refusals for their users
//! ([`ArchiveError`]).

use std::io::Read;
use std::path::Path;

/// Bounds on what an archive may unpack to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveLimits {
    /// The largest file, bytes.
    pub max_file: u64,
    /// The largest sum of all files, bytes.
    pub max_total: u64,
}

/// Why an archive was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchiveError {
    /// Not a gzip'd tar, or an entry cannot be read.
    #[error("not a gzip'd tar archive: {0}")]
    Unreadable(String),
    /// An absolute path, or one through `..`.
    #[error("entry {path:?} escapes the archive")]
    Escapes {
        /// The entry's path.
        path: String,
        /// Whether it is absolute (else it goes through `..`).
        absolute: bool,
    },
    /// A symbolic or hard link.
    #[error("entry {0:?} is a link; links are not accepted")]
    Link(String),
    /// A device, FIFO or other special file.
    #[error("entry {0:?} is not a regular file")]
    NotRegular(String),
    /// One file over [`ArchiveLimits::max_file`].
    #[error("file {path} is larger than {limit} bytes")]
    FileTooLarge {
        /// The file's path.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// All files together over [`ArchiveLimits::max_total`].
    #[error("the archive unpacks to more than {0} bytes")]
    TooLarge(u64),
}

/// A regular file of an archive.
pub struct Entry<'a> {
    /// Its path, `/`-separated, without `./` steps.
    pub path: &'a str,
    /// The path's components.
    pub parts: &'a [String],
    /// Its content.
    pub content: &'a mut dyn Read,
}

impl std::fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Walks the gzip'd tar read from `reader`, handing every regular file to `visit` (which may
/// read its content or not); returns how many entries the archive has, of any kind.
///
/// # Errors
/// [`ArchiveError`] (converted) for a refused archive; `visit`'s errors.
pub fn walk<E: From<ArchiveError>>(
    reader: impl Read,
    limits: ArchiveLimits,
    visit: &mut dyn FnMut(Entry<'_>) -> Result<(), E>,
) -> Result<usize, E> {
    let unreadable = |e: std::io::Error| ArchiveError::Unreadable(e.to_string());
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(reader));
    let mut total: u64 = 0;
    let mut count = 0;
    for entry in archive.entries().map_err(unreadable)? {
        let mut entry = entry.map_err(unreadable)?;
        count += 1;
        let kind = entry.header().entry_type();
        if kind.is_dir()
            || kind.is_pax_global_extensions()
            || kind.is_pax_local_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink()
        {
            continue;
        }
        let (path, parts) = normalize(&String::from_utf8_lossy(&entry.path_bytes()))?;
        if kind.is_symlink() || kind.is_hard_link() {
            return Err(ArchiveError::Link(path).into());
        }
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            return Err(ArchiveError::NotRegular(path).into());
        }
        let size = entry.size();
        if size > limits.max_file {
            return Err(ArchiveError::FileTooLarge {
                path,
                limit: limits.max_file,
            }
            .into());
        }
        // The entry's reader yields exactly its declared size.
        total = total.saturating_add(size);
        if total > limits.max_total {
            return Err(ArchiveError::TooLarge(limits.max_total).into());
        }
        if parts.is_empty() {
            continue;
        }
        visit(Entry {
            path: &path,
            parts: &parts,
            content: &mut entry,
        })?;
    }
    Ok(count)
}

/// A file read whole: its path components and content.
pub type File = (Vec<String>, Vec<u8>);

/// Reads every regular file of the gzip'd tar in `bytes` as (path components, content).
///
/// # Errors
/// As [`walk`]; [`ArchiveError::Unreadable`] when a file cannot be read.
pub fn read_all(bytes: &[u8], limits: ArchiveLimits) -> Result<Vec<File>, ArchiveError> {
    let mut out = Vec::new();
    walk(bytes, limits, &mut |entry: Entry<'_>| {
        let mut data = Vec::new();
        entry
            .content
            .read_to_end(&mut data)
            .map_err(|e| ArchiveError::Unreadable(format!("cannot read {}: {e}", entry.path)))?;
        out.push((entry.parts.to_vec(), data));
        Ok::<(), ArchiveError>(())
    })?;
    Ok(out)
}

/// Packs directory `dir` as a gzip'd tar, its entries under `prefix` (`"."` puts the
/// directory's contents at the top, as EMCO's setup scripts tar profiles). Links are archived as
/// links, not followed.
///
/// # Errors
/// When `dir` cannot be read.
pub fn pack_dir(dir: &Path, prefix: &str) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(encoder());
    b.follow_symlinks(false);
    b.append_dir_all(prefix, dir)?;
    b.into_inner()?.finish()
}

/// Packs `files` (path inside the archive, content) as a gzip'd tar of regular files.
///
/// # Errors
/// When a path cannot be written into a tar header (empty, `..`, absolute).
pub fn pack_files<P: AsRef<str>, D: AsRef<[u8]>>(files: &[(P, D)]) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(encoder());
    for (path, data) in files {
        let data = data.as_ref();
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, path.as_ref(), data)?;
    }
    b.into_inner()?.finish()
}

fn encoder() -> flate2::write::GzEncoder<Vec<u8>> {
    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast())
}

/// An entry's path `/`-separated without `./` steps, and its components; refuses absolute paths
/// and `..` (Windows separators count as `/`).
fn normalize(raw: &str) -> Result<(String, Vec<String>), ArchiveError> {
    let raw = raw.replace('\\', "/");
    let mut rest = raw.as_str();
    // `tar -C dir .` puts `./` before every member.
    while let Some(r) = rest.strip_prefix("./") {
        rest = r.trim_start_matches('/');
    }
    if rest.starts_with('/') {
        return Err(ArchiveError::Escapes {
            path: rest.to_owned(),
            absolute: true,
        });
    }
    let parts: Vec<String> = rest
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_owned)
        .collect();
    if parts.iter().any(|p| p == "..") {
        return Err(ArchiveError::Escapes {
            path: rest.to_owned(),
            absolute: false,
        });
    }
    Ok((parts.join("/"), parts))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn packed_archives_read_back() {
        let packed =
            pack_files(&[("web/Chart.yaml", "name: web\n"), ("web/values.yaml", "")]).unwrap();
        let limits = ArchiveLimits {
            max_file: 1024,
            max_total: 4096,
        };
        let files = read_all(&packed, limits).unwrap();
        let names: Vec<String> = files.iter().map(|(path, _)| path.join("/")).collect();
        assert_eq!(names, ["web/Chart.yaml", "web/values.yaml"]);
        assert!(pack_files(&[("../x", "")]).is_err());

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        std::fs::write(dir.path().join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
        let packed = pack_dir(dir.path(), "chart").unwrap();
        let files = read_all(&packed, limits).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0.join("/"), "chart/templates/cm.yaml");
        assert_eq!(files[0].1, b"kind: ConfigMap\n");
    }

    /// A gzip'd tar of `entries` (path, content, kind), paths written as given, however hostile.
    pub(crate) fn tgz(entries: &[(&str, &[u8], tar::EntryType)]) -> Vec<u8> {
        let enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut b = tar::Builder::new(enc);
        for (path, data, kind) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if kind.is_symlink() {
                h.set_link_name("/etc/passwd").unwrap();
            }
            // Raw bytes: the builder would refuse `..` and absolute paths.
            let name = &mut h.as_old_mut().name;
            name[..path.len()].copy_from_slice(path.as_bytes());
            h.set_cksum();
            b.append(&h, *data).unwrap();
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    const LIMITS: ArchiveLimits = ArchiveLimits {
        max_file: 10,
        max_total: 15,
    };

    #[test]
    fn files_come_with_clean_paths_and_the_rest_is_refused() {
        let good = tgz(&[
            ("./", b"", tar::EntryType::Directory),
            ("././demo/a.txt", b"a", tar::EntryType::Regular),
            ("demo\\b.txt", b"bb", tar::EntryType::Regular),
        ]);
        let files = read_all(&good, LIMITS).unwrap();
        let paths: Vec<String> = files.iter().map(|(p, _)| p.join("/")).collect();
        assert_eq!(paths, ["demo/a.txt", "demo/b.txt"]);
        assert_eq!(files[1].1, b"bb");

        let refused = |entries: &[(&str, &[u8], tar::EntryType)]| {
            read_all(&tgz(entries), LIMITS).unwrap_err()
        };
        assert_eq!(
            refused(&[("demo/../../x", b"x", tar::EntryType::Regular)]),
            ArchiveError::Escapes {
                path: "demo/../../x".into(),
                absolute: false
            }
        );
        assert!(matches!(
            refused(&[("/etc/x", b"x", tar::EntryType::Regular)]),
            ArchiveError::Escapes { absolute: true, .. }
        ));
        assert!(matches!(
            refused(&[("demo/l", b"", tar::EntryType::Symlink)]),
            ArchiveError::Link(_)
        ));
        assert!(matches!(
            refused(&[("demo/h", b"", tar::EntryType::Link)]),
            ArchiveError::Link(_)
        ));
        assert!(matches!(
            refused(&[("demo/f", b"", tar::EntryType::Fifo)]),
            ArchiveError::NotRegular(_)
        ));
        assert!(matches!(
            refused(&[("demo/big", &[0; 11], tar::EntryType::Regular)]),
            ArchiveError::FileTooLarge { limit: 10, .. }
        ));
        assert_eq!(
            refused(&[
                ("demo/a", &[0; 8], tar::EntryType::Regular),
                ("demo/b", &[0; 8], tar::EntryType::Regular)
            ]),
            ArchiveError::TooLarge(15)
        );
        assert!(matches!(
            read_all(b"not gzip", LIMITS).unwrap_err(),
            ArchiveError::Unreadable(_)
        ));
    }
}
