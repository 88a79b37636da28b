//! The signals that end a long-running process.

use std::future::Future;

/// A future that resolves on SIGTERM or SIGINT (Ctrl-C where there are no Unix signals).
///
/// Both are caught from this call on, not from the future's first poll: a process that polls it
/// only once it is up would otherwise be killed by a signal sent while it starts (the default
/// action) instead of ending cleanly. Call it within a tokio runtime, before serving.
///
/// # Errors
/// When a signal cannot be listened for.
pub fn shutdown() -> std::io::Result<impl Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    })
}

#[cfg(all(test, unix))]
mod tests {
    /// A signal sent after the call and before the first poll is not lost (and does not kill
    /// the test process).
    #[tokio::test]
    async fn a_signal_before_the_first_poll_is_caught() {
        let stop = super::shutdown().unwrap();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &std::process::id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        tokio::time::timeout(std::time::Duration::from_secs(10), stop)
            .await
            .expect("the signal sent before the first poll ends the wait");
    }
}
