//! A real Temporal server (`../shared/temporal`, 1.19.1) with a real workflow client and worker
//! beside it (examples/workflows/workflowclient.py serving `workflows/worker.py`'s workflows on
//! Temporal's Python SDK), for the workflow tests.
//!
//! The worker's workflows, by client name: `sleep` sleeps `activityParams.sleep.seconds` (query
//! `state`), `fail` fails with `activityParams.fail.message`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The task queue the worker polls.
pub const TASK_QUEUE: &str = "EMCO_TEST_Q";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Temporal server and the workflow client with its worker, stopped when dropped.
#[derive(Debug)]
pub struct TemporalKit {
    dir: tempfile::TempDir,
    /// The frontend's `host:port`.
    pub temporal: String,
    /// The workflow client's port on 127.0.0.1.
    pub client_port: u16,
    worker: Child,
}

impl TemporalKit {
    /// Starts both; `None` (after saying why) when the kit or the Python SDK is missing outside
    /// CI.
    ///
    /// # Panics
    /// When one is missing in CI, or either does not start.
    #[must_use]
    pub fn start() -> Option<Self> {
        let kit = workspace().join("../shared/temporal");
        if !kit.join("start.sh").is_file() {
            return missing(&format!("{} is missing", kit.display()));
        }
        let python = workspace().join(".venv/bin/python");
        let has_sdk = Command::new(&python)
            .args(["-c", "import temporalio"])
            .status()
            .is_ok_and(|s| s.success());
        if !has_sdk {
            return missing("the venv has no temporalio (scripts/test.sh installs it)");
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let out = Command::new("bash")
            .arg(kit.join("start.sh"))
            .arg(dir.path().join("temporal"))
            .stdin(Stdio::null())
            .output()
            .expect("start.sh runs");
        assert!(
            out.status.success(),
            "start.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let temporal = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut worker = Command::new(&python)
            .arg(workspace().join("tests/testkit/workflows/worker.py"))
            .args([
                "--temporal",
                &temporal,
                "--port",
                "0",
                "--task-queue",
                TASK_QUEUE,
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("the worker starts");
        let mut line = String::new();
        BufReader::new(worker.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("the worker says where it listens");
        let client_port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("the worker said {line:?}"));
        Some(Self {
            dir,
            temporal,
            client_port,
            worker,
        })
    }
}

/// Says why the workflow tests cannot run: a failure in CI, a skip elsewhere.
fn missing(what: &str) -> Option<TemporalKit> {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what}: the workflow tests cannot run"
    );
    eprintln!("SKIPPED: {what}; the workflow tests did not run");
    None
}

impl Drop for TemporalKit {
    fn drop(&mut self) {
        let _ = self.worker.kill();
        let _ = self.worker.wait();
        let _ = Command::new("bash")
            .arg(workspace().join("../shared/temporal/stop.sh"))
            .arg(self.dir.path().join("temporal"))
            .output();
    }
}
