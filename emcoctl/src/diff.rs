//! `diff`: what the files' lifecycle documents (instantiate, update) would change on the
//! clusters, from emco-rs's preview route (`GET .../preview`, which writes nothing): the
//! placement per app and a unified diff per object, clusters with the same changes together.
//! As `kubectl diff`, the exit code says whether anything would change.

use emco_core::preview::{Change, Preview};

use emco_client::client::Client;
use emco_client::error::Result;
use emco_client::status::Target;

/// Exit code when nothing would change.
pub const EXIT_SAME: i32 = 0;
/// Exit code when something would change.
pub const EXIT_CHANGES: i32 = 1;
/// Exit code when a preview could not be had (the server refused, or cannot be reached) or, in
/// a dry run, a cluster refused an object; bad input files exit with 2 as every command.
pub const EXIT_FAILED: i32 = 3;

/// At most this many cluster names are printed per group of clusters.
const NAMES_SHOWN: usize = 10;

/// The preview of `target`; with `dry_run`, the clusters check the objects too.
///
/// # Errors
/// The server's answer when it is not 200: what the operation itself would answer.
pub async fn get(client: &Client, target: &Target, dry_run: bool) -> Result<Preview> {
    let route = if dry_run {
        "preview?dryRun=true"
    } else {
        "preview"
    };
    target.get(client, route, "preview").await
}

/// `names` joined, the first [`NAMES_SHOWN`] of them and how many more.
fn some(names: &[String]) -> String {
    let shown = names
        .iter()
        .take(NAMES_SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match names.len().saturating_sub(NAMES_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The preview as text: a heading, the placement, then each group of clusters with its diffs.
#[must_use]
pub fn text(target: &Target, p: &Preview) -> String {
    let s = &p.summary;
    let from = p
        .deployed_revision
        .map(|r| format!(" from revision {r}"))
        .unwrap_or_default();
    let mut out = format!(
        "{} ({}): {}{from}: {} of {} clusters change ({} added, {} changed, {} removed, {} unchanged objects)\n",
        target.label(),
        target.position,
        p.operation,
        s.clusters_changed,
        s.clusters,
        s.added,
        s.changed,
        s.removed,
        s.unchanged,
    );
    if !p.written_for.is_empty() {
        out.push_str(&format!(
            "  note: the preview's context was written to the AppContext store, and deleted, for \
             controllers called over gRPC: {}\n",
            p.written_for.join(", ")
        ));
    }
    for app in &p.placement {
        let mut line = format!("  {}: {} clusters", app.app, app.clusters);
        if !app.gains.is_empty() {
            line.push_str(&format!("; gains {}", some(&app.gains)));
        }
        if !app.loses.is_empty() {
            line.push_str(&format!("; loses {}", some(&app.loses)));
        }
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(dry) = &p.dry_run {
        out.push_str(&format!(
            "  dry run on {} cluster{}: {}\n",
            dry.clusters,
            if dry.clusters == 1 { "" } else { "s" },
            if dry.passed() {
                "every object accepted"
            } else {
                "not every object accepted"
            }
        ));
        for r in &dry.refusals {
            out.push_str(&format!(
                "    refused: {} {} on {}: {}\n",
                r.app,
                r.resource,
                some(&r.clusters),
                r.reason
            ));
        }
        for u in &dry.unchecked {
            out.push_str(&format!(
                "    not checked on {}: {}\n",
                some(&u.clusters),
                u.reason
            ));
        }
    }
    for group in p.changes.iter().flatten() {
        out.push_str(&format!(
            "\n# {} cluster{}: {}\n",
            group.count,
            if group.count == 1 { "" } else { "s" },
            some(&group.clusters)
        ));
        for o in &group.objects {
            let what = match o.change {
                Change::Added => "added",
                Change::Changed => "changed",
                Change::Removed => "removed",
            };
            out.push_str(&format!("# {} {} ({what})\n", o.app, o.resource));
            out.push_str(&o.diff);
            if !o.diff.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}
