//! `emco-server`: parse the configuration, open the store, serve, drain on a signal.

use std::process::ExitCode;

use emco_orchestrator::{Limits, Orchestrator};
use emco_server::{Config, LogFormat, Metrics};
use tracing_subscriber::EnvFilter;

fn init_logs(format: LogFormat) {
    let filter = EnvFilter::try_from_env("EMCO_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

async fn run(config: Config) -> Result<(), Box<dyn std::error::Error>> {
    let store = emco_server::open_store(&config).await?;
    let limits = Limits {
        max_archive: config.max_upload,
        ..Limits::default()
    };
    let orch = Orchestrator::new(store).with_limits(limits);
    let app = emco_server::app(orch, &config, Metrics::new());
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    tracing::info!(listen = %listener.local_addr()?, backend = ?config.backend, "emco-server ready");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stop_rx.await;
            })
            .await
    });
    shutdown_signal().await;
    tracing::info!(drain = ?config.drain, "shutting down");
    let _ = stop_tx.send(());
    match tokio::time::timeout(config.drain, server).await {
        Ok(joined) => joined??,
        Err(_) => tracing::warn!("requests still running after the drain timeout; exiting"),
    }
    tracing::info!("stopped");
    Ok(())
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
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "emco-server failed");
            ExitCode::FAILURE
        }
    }
}
