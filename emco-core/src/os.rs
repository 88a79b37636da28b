//! What a process serving many clusters needs from the operating system.

/// An open-files limit: `(soft, hard)`, `None` for unlimited.
pub type FilesLimit = (Option<u64>, Option<u64>);

/// The open-files limit of the process.
#[must_use]
pub fn open_files_limit() -> FilesLimit {
    let r = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    (r.current, r.maximum)
}

/// Raises the soft open-files limit to the hard one and returns the limit before and after.
///
/// Every cluster connection, watch and listening socket holds a descriptor, and the usual soft
/// default (1,024) is far below what thousands of clusters need, while the hard limit an
/// unprivileged process may raise it to is usually much higher. A limit that cannot be raised
/// is left as it is (the caller logs the outcome).
#[must_use]
pub fn raise_open_files_limit() -> (FilesLimit, FilesLimit) {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let before = open_files_limit();
    let (soft, hard) = before;
    let raise = match (soft, hard) {
        (_, None) => soft.is_some(),
        (Some(s), Some(h)) => s < h,
        (None, Some(_)) => false,
    };
    if raise {
        let wanted = Rlimit {
            current: hard,
            maximum: hard,
        };
        // An unlimited hard limit may still refuse an unlimited soft one (Linux caps it at
        // nr_open): keep what there is then.
        let _ = setrlimit(Resource::Nofile, wanted);
    }
    (before, open_files_limit())
}

/// The variable glibc's allocator reads for how many arenas it may make.
pub const MALLOC_ARENA_MAX: &str = "MALLOC_ARENA_MAX";

/// The arenas a server runs with unless [`MALLOC_ARENA_MAX`] says otherwise.
pub const SERVER_MALLOC_ARENAS: &str = "2";

/// Runs this program again in the same process (same pid, arguments and descriptors) with
/// [`MALLOC_ARENA_MAX`] set to [`SERVER_MALLOC_ARENAS`], unless the variable is set already.
///
/// glibc's allocator gives threads that allocate at once arenas of their own, up to eight per
/// core, and keeps what each one freed for itself: a server whose threads take turns with tens
/// of thousands of small tasks ends up holding the freed memory of every arena (at 1,000
/// clusters x 100 objects, 1,133 MiB at Ready with the default, 905 MiB with two arenas; the
/// deploy was not slower). The variable is read when the process starts, before any code of
/// ours runs, hence the exec. Returns the exec's error if it failed (the caller goes on as it
/// is); `None` when the variable was set, or on a system other than Linux with glibc.
#[must_use]
pub fn reexec_with_few_malloc_arenas() -> Option<std::io::Error> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os(MALLOC_ARENA_MAX).is_some() {
            return None;
        }
        let program = match std::env::current_exe() {
            Ok(p) => p,
            Err(e) => return Some(e),
        };
        let mut args = std::env::args_os();
        let mut command = std::process::Command::new(program);
        if let Some(arg0) = args.next() {
            command.arg0(arg0);
        }
        // Returns only when the exec failed.
        Some(
            command
                .args(args)
                .env(MALLOC_ARENA_MAX, SERVER_MALLOC_ARENAS)
                .exec(),
        )
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// A limit as text: its number, or `unlimited`.
#[must_use]
pub fn limit_text(limit: Option<u64>) -> String {
    limit.map_or_else(|| "unlimited".to_owned(), |n| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_soft_open_files_limit_is_raised_to_the_hard_one() {
        let (before, after) = raise_open_files_limit();
        // The hard limit stays; the soft one reaches it (or was there already).
        assert_eq!(after.1, before.1);
        if before.1.is_some() {
            assert_eq!(after.0, after.1);
        }
        assert_eq!(open_files_limit(), after);
        assert_eq!(limit_text(None), "unlimited");
    }
}
