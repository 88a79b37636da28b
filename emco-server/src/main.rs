//! `emco-server`: parse the configuration, serve REST and gRPC, drain on SIGTERM or SIGINT.

use std::io::IsTerminal;
use std::process::ExitCode;

use emco_server::{Config, LogFormat};
use tracing_subscriber::EnvFilter;

/// mimalloc, not glibc's allocator: at 10,000 clusters glibc's spent about a third of the
/// server's CPU in its own bookkeeping (free-list searches and merges over a fragmented heap);
/// with mimalloc a deploy, update or terminate of the fleet takes 29 to 56 % less time at about
/// the same peak memory (bench-results/fleet-10000x10-allocator-ab.txt).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_env("EMCO_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colours only for a person at a terminal: files, pipes and log collectors get plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stdout().is_terminal());
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// Resolves on SIGTERM or SIGINT. The signals are caught from this call on, not from the
/// future's first poll (which comes once the server is up): a signal during the start ends the
/// process cleanly instead of killing it. Called within the runtime.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let caught = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for {name}");
                None
            }
        };
        let term = caught(SignalKind::terminate(), "SIGTERM");
        let int = caught(SignalKind::interrupt(), "SIGINT");
        async move {
            tokio::select! {
                () = received(term) => {},
                () = received(int) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves when `signal` is received; never without one.
#[cfg(unix)]
async fn received(signal: Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(mut s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

fn main() -> ExitCode {
    let config = match Config::from_args(std::env::args_os()) {
        Ok(Some(c)) => c,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    init_logs(config.log_format);
    // Each cluster holds descriptors (connections, watches): use all the system allows.
    let ((soft, hard), (now, _)) = emco_runtime::os::raise_open_files_limit();
    let text = emco_runtime::os::limit_text;
    if now == soft {
        tracing::info!(limit = %text(now), hard = %text(hard), "open files");
    } else {
        tracing::info!(from = %text(soft), to = %text(now), "open files limit raised");
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(async { emco_server::serve(config, shutdown_signal()).await }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "emco-server failed");
            ExitCode::FAILURE
        }
    }
}
