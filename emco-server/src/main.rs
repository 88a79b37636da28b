//! `emco-server`: parse the configuration, serve REST and gRPC, drain on SIGTERM or SIGINT.

use std::io::IsTerminal;
use std::process::ExitCode;

use emco_service::{Config, LogFormat};
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

/// Resolves on SIGTERM or SIGINT, caught from the call on (see [`emco_runtime::signal`]).
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    let caught = emco_runtime::signal::shutdown();
    async move {
        match caught {
            Ok(signal) => signal.await,
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM and SIGINT");
                std::future::pending::<()>().await;
            }
        }
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
    match runtime.block_on(async { emco_service::serve(config, shutdown_signal()).await }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "emco-server failed");
            ExitCode::FAILURE
        }
    }
}
