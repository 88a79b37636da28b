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
