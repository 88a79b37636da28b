//! `rollout`: the rollouts in waves of the deployment intent groups that lifecycle documents
//! name (emco-rs's own routes `GET .../rollout` and `POST .../rollout/{approve, pause, resume,
//! abort}`): their waves as a table, the controls, and a live view that follows a rollout until
//! it ends.

use std::io::Write;
use std::time::Duration;

use emco_core::rollout::{RolloutRun, RolloutState};
use http::Method;
use tokio::time::Instant;

use emco_client::client::{Body, Client};
use emco_client::error::{CtlError, Result};
use emco_client::output::{Output, format_table, render};
use emco_client::status::Target;

/// What `rollout` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Action {
    /// Print each rollout: its state and its waves.
    Status,
    /// Follow each rollout, a line per change, until it ends (exit 1 unless it succeeded).
    Watch,
    /// Let the wave that waits for approval go.
    Approve,
    /// Hold the rollout where it is.
    Pause,
    /// Go on from a pause (a failed wave is tried again).
    Resume,
    /// Roll every changed cluster back and end the rollout.
    Abort,
}

impl Action {
    /// The control route's last segment, for the actions that change a rollout.
    #[must_use]
    pub const fn control(self) -> Option<&'static str> {
        match self {
            Self::Approve => Some("approve"),
            Self::Pause => Some("pause"),
            Self::Resume => Some("resume"),
            Self::Abort => Some("abort"),
            Self::Status | Self::Watch => None,
        }
    }
}

/// The deployment intent groups among `targets` (logical clouds have no rollouts).
#[must_use]
pub fn groups(targets: &[Target]) -> Vec<&Target> {
    targets
        .iter()
        .filter(|t| t.object.contains("/deployment-intent-groups/"))
        .collect()
}

/// The rollout of `target`.
///
/// # Errors
/// The server's answer when it is not 200 (404 for a group without a rollout).
pub async fn get(client: &Client, target: &Target) -> Result<RolloutRun> {
    target.get(client, "rollout", "rollout").await
}

/// Sends the control `action` to the rollout of `target`; the line to print.
///
/// # Errors
/// The server's refusal (409 when the rollout is not in a state the control applies to).
pub async fn control(client: &Client, target: &Target, action: &str) -> Result<String> {
    let r = client
        .send(
            Method::POST,
            &format!("/v2/{}/rollout/{action}", target.object),
            Body::Empty,
        )
        .await?;
    if r.status == 202 {
        Ok(format!("{}: {action} accepted", target.label()))
    } else {
        Err(CtlError::Request(format!(
            "{}: {action}: {} {}",
            target.label(),
            r.status,
            String::from_utf8_lossy(&r.body).trim()
        )))
    }
}

/// The rollout as a heading and a table of its waves, with the failures under it.
#[must_use]
pub fn table(target: &Target, run: &RolloutRun) -> String {
    let mut s = format!("{} ({})\n", target.label(), target.position);
    s.push_str(&format!("  {}\n", summary(run)));
    let mut rows = vec![vec![
        "WAVE".to_owned(),
        "STATE".to_owned(),
        "CLUSTERS".to_owned(),
        "STARTED".to_owned(),
        "FINISHED".to_owned(),
    ]];
    let mut notes = Vec::new();
    for (i, w) in run.waves.iter().enumerate() {
        let mark = if i == run.current && !run.state.is_final() {
            "> "
        } else {
            "  "
        };
        rows.push(vec![
            format!("{mark}{}", w.name),
            w.state.to_string(),
            w.clusters.len().to_string(),
            or_dash(&w.started),
            or_dash(&w.finished),
        ]);
        notes.extend(
            w.failures
                .iter()
                .map(|f| format!("  {} {}: {}", w.name, f.cluster, f.reason)),
        );
        if !w.skipped.is_empty() {
            notes.push(format!(
                "  {} left out (not answering): {}",
                w.name,
                w.skipped.join(", ")
            ));
        }
        if !w.left.is_empty() {
            notes.push(format!(
                "  {} left out (deregistered): {}",
                w.name,
                w.left.join(", ")
            ));
        }
    }
    for line in format_table(&rows).lines() {
        s.push_str(&format!("  {line}\n"));
    }
    if !notes.is_empty() {
        s.push_str("  failed or left out:\n");
        for n in notes {
            s.push_str(&format!("  {n}\n"));
        }
    }
    s
}

fn or_dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_owned()
    } else {
        s.to_owned()
    }
}

/// One line: the rollout's state, its wave at hand and why.
#[must_use]
pub fn summary(run: &RolloutRun) -> String {
    let changed: usize = run
        .waves
        .iter()
        .filter(|w| matches!(w.state, RolloutState::Succeeded))
        .map(|w| w.clusters.len())
        .sum();
    let total: usize = run.waves.iter().map(|w| w.clusters.len()).sum();
    let mut line = format!("rollout {}", run.state);
    if let Some(w) = run.waves.get(run.current).filter(|_| !run.state.is_final()) {
        line.push_str(&format!(
            ", wave {} of {} ({}) {}",
            run.current + 1,
            run.waves.len(),
            w.name,
            w.state
        ));
    }
    line.push_str(&format!(", {changed}/{total} clusters through"));
    if !run.reason.is_empty() {
        line.push_str(&format!(": {}", run.reason));
    }
    line
}

/// Follows the rollouts of `targets` every `interval`, a line per change, until each ends or
/// `timeout` passes; whether every one succeeded.
///
/// # Errors
/// When a rollout cannot be read, or writing fails.
pub async fn watch(
    client: &Client,
    targets: &[&Target],
    interval: Duration,
    timeout: Duration,
    output: Output,
    out: &mut dyn Write,
) -> Result<bool> {
    let deadline = Instant::now() + timeout;
    let mut last: Vec<Option<String>> = vec![None; targets.len()];
    let mut ended: Vec<Option<RolloutState>> = vec![None; targets.len()];
    loop {
        for (i, t) in targets.iter().enumerate() {
            if ended[i].is_some() {
                continue;
            }
            let run = get(client, t).await?;
            let line = summary(&run);
            if last[i].as_deref() != Some(line.as_str()) {
                let text = match output {
                    Output::Table => format!("{}: {line}\n", t.label()),
                    Output::Json | Output::Yaml => {
                        let value = serde_json::to_value(&run)
                            .map_err(|e| CtlError::Request(e.to_string()))?;
                        render(&value, output)?
                    }
                };
                write_out(out, &text)?;
                last[i] = Some(line);
            }
            if run.state.is_final() {
                ended[i] = Some(run.state);
            }
        }
        if ended.iter().all(Option::is_some) {
            return Ok(ended.iter().all(|e| *e == Some(RolloutState::Succeeded)));
        }
        if Instant::now() >= deadline {
            write_out(out, "timed out before every rollout ended\n")?;
            return Ok(false);
        }
        tokio::time::sleep(interval).await;
    }
}

fn write_out(out: &mut dyn Write, text: &str) -> Result<()> {
    out.write_all(text.as_bytes()).map_err(CtlError::write)
}

#[cfg(test)]
mod tests {
    use emco_core::rollout::{WaveFailure, WaveRun};

    use super::*;

    fn run() -> RolloutRun {
        serde_json::from_value(serde_json::json!({
            "dig": {"project": "p", "compositeApp": "ca", "compositeAppVersion": "v1",
                "deploymentIntentGroup": "dig"},
            "to": 7, "policy": {"waves": [{"count": 1}, {}]}, "state": "RolledBack",
            "waves": [], "current": 0, "started": "2026-12-05T10:00:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn a_rollout_reads_as_a_table_with_its_failures() {
        let mut r = run();
        r.reason = "wave canary failed".into();
        r.waves = vec![
            WaveRun {
                name: "canary".into(),
                clusters: vec!["p+c1".into()],
                state: RolloutState::RolledBack,
                started: "2026-12-05T10:00:00Z".into(),
                failures: vec![WaveFailure {
                    cluster: "p+c1".into(),
                    reason: "not ready by the deadline".into(),
                }],
                ..WaveRun::default()
            },
            WaveRun {
                name: "rest".into(),
                clusters: vec!["p+c2".into(), "p+c3".into()],
                skipped: vec!["p+c2".into()],
                left: vec!["p+c3".into()],
                ..WaveRun::default()
            },
        ];
        let target = Target {
            position: "f.yaml:1".into(),
            object: "projects/p/composite-apps/ca/v1/deployment-intent-groups/dig".into(),
        };
        let text = table(&target, &r);
        assert!(
            text.contains("rollout RolledBack, 0/3 clusters through: wave canary failed"),
            "{text}"
        );
        assert!(text.contains("canary  RolledBack  1"), "{text}");
        assert!(text.contains("rest    Pending     2"), "{text}");
        assert!(
            text.contains("canary p+c1: not ready by the deadline"),
            "{text}"
        );
        assert!(
            text.contains("rest left out (not answering): p+c2"),
            "{text}"
        );
        assert!(
            text.contains("rest left out (deregistered): p+c3"),
            "{text}"
        );
        r.state = RolloutState::WaitingForApproval;
        r.current = 1;
        r.waves[0].state = RolloutState::Succeeded;
        r.waves[1].state = RolloutState::WaitingForApproval;
        assert_eq!(
            summary(&r),
            "rollout WaitingForApproval, wave 2 of 2 (rest) WaitingForApproval, 1/3 clusters through: wave canary failed"
        );
    }
}
