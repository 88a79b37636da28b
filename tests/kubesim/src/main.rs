//! `kubesim`: serve simulated clusters, or switch the faults of a running fleet.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kubesim::{AdminClient, Fault, Fleet, FleetConfig, Unreachable};

/// The admin URL file `serve` writes next to the kubeconfigs.
const ADMIN_FILE: &str = "kubesim-admin.url";

#[derive(Parser, Debug)]
#[command(
    name = "kubesim",
    version,
    about = "Kubernetes API server simulating many clusters"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve clusters c1..cN and write one kubeconfig per cluster.
    Serve(ServeArgs),
    /// Switch the fault of one cluster of a running kubesim.
    Fault(FaultArgs),
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Number of clusters.
    #[arg(long, default_value_t = 1)]
    clusters: usize,
    /// Directory for DIR/c1.kubeconfig ... DIR/cN.kubeconfig.
    #[arg(long)]
    kubeconfig_dir: PathBuf,
    /// Address of c1; ci listens on PORT+i-1 (port 0: ephemeral ports).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Serve plain HTTP instead of TLS.
    #[arg(long)]
    plain_http: bool,
    /// Milliseconds until workloads become ready.
    #[arg(long, default_value_t = 500)]
    ready_delay_ms: u64,
    /// Persist the clusters' objects in this directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address of the admin endpoint (faults).
    #[arg(long, default_value = "127.0.0.1:0")]
    admin_listen: SocketAddr,
    /// Run the workload controllers (Deployments get ReplicaSets and Pods, ...).
    #[arg(long)]
    controllers: bool,
    /// Serve every cluster on the one port of --listen, each under /clusters/<name> (one
    /// descriptor for the fleet instead of one per cluster; one CA for all).
    #[arg(long)]
    shared_port: bool,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["down", "black_hole", "latency_ms", "error_rate", "flap_period_ms", "clear"])))]
struct FaultArgs {
    /// Cluster name (c1, c2, ...).
    cluster: String,
    /// Refuse connections.
    #[arg(long)]
    down: bool,
    /// Accept connections and never answer.
    #[arg(long)]
    black_hole: bool,
    /// Delay every answer.
    #[arg(long)]
    latency_ms: Option<u64>,
    /// Fail this fraction (0..1) of requests.
    #[arg(long)]
    error_rate: Option<f64>,
    /// Status of injected errors: 500, 429 or 503.
    #[arg(long, default_value_t = 500, requires = "error_rate")]
    error_code: u16,
    /// Alternate between reachable and refusing every this many milliseconds.
    #[arg(long)]
    flap_period_ms: Option<u64>,
    /// Make the cluster healthy again.
    #[arg(long)]
    clear: bool,
    /// Admin endpoint URL; defaults to the one recorded in the kubeconfig directory.
    #[arg(long, env = "KUBESIM_ADMIN")]
    admin: Option<String>,
    /// The kubeconfig directory of the running kubesim (holds kubesim-admin.url).
    #[arg(long, env = "KUBESIM_KUBECONFIG_DIR")]
    kubeconfig_dir: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Serve(a) => serve(a).await,
        Command::Fault(a) => fault(a).await,
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kubesim: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(a: ServeArgs) -> emco_core::Result<()> {
    // Caught from here on: a signal while the fleet starts ends it cleanly.
    let stop = emco_runtime::signal::shutdown().map_err(|e| {
        emco_core::Error::internal("cannot listen for SIGTERM and SIGINT").with_source(e)
    })?;
    // A connection per cluster, and a listener each unless they share one: use all the
    // descriptors the system allows.
    let per_cluster = if a.shared_port { 1 } else { 2 };
    let needed = per_cluster * a.clusters as u64 + 64;
    let (_, (soft, _)) = emco_runtime::os::raise_open_files_limit();
    if let Some(limit) = soft
        && limit < needed
    {
        eprintln!(
            "kubesim: {} clusters may need {needed} open files, the limit is {limit}",
            a.clusters
        );
    }
    let fleet = Fleet::start(FleetConfig {
        clusters: a.clusters,
        listen: a.listen,
        plain_http: a.plain_http,
        ready_delay: Duration::from_millis(a.ready_delay_ms),
        data_dir: a.data_dir,
        controllers: a.controllers,
        shared_port: a.shared_port,
        ..FleetConfig::default()
    })
    .await?;
    fleet.write_kubeconfigs(&a.kubeconfig_dir).await?;
    let admin = kubesim::serve_admin(&fleet, a.admin_listen).await?;
    let admin_url = format!("http://{admin}");
    let admin_file = a.kubeconfig_dir.join(ADMIN_FILE);
    tokio::fs::write(&admin_file, format!("{admin_url}\n"))
        .await
        .map_err(|e| {
            emco_core::Error::unavailable(format!("cannot write {}", admin_file.display()))
                .with_source(e)
        })?;
    println!(
        "kubesim ready: {} clusters, kubeconfigs in {}, first server {}, admin {admin_url}",
        a.clusters,
        a.kubeconfig_dir.display(),
        fleet.server_url("c1")?
    );
    stop.await;
    eprintln!("kubesim: shutting down");
    fleet.shutdown(Duration::from_secs(5)).await
}

async fn fault(a: FaultArgs) -> emco_core::Result<()> {
    let url = match (a.admin, a.kubeconfig_dir) {
        (Some(u), _) => u,
        (None, Some(dir)) => {
            let path = dir.join(ADMIN_FILE);
            tokio::fs::read_to_string(&path)
                .await
                .map_err(|e| {
                    emco_core::Error::not_found(format!("cannot read {}", path.display()))
                        .with_source(e)
                })?
                .trim()
                .to_owned()
        }
        (None, None) => {
            return Err(emco_core::Error::invalid(
                "where is kubesim? pass --admin URL or --kubeconfig-dir DIR (or set KUBESIM_ADMIN)",
            ));
        }
    };
    let f = if a.clear {
        Fault::none()
    } else if a.down {
        Fault::down()
    } else if a.black_hole {
        Fault::black_hole()
    } else if let Some(ms) = a.latency_ms {
        Fault::latency(ms)
    } else if let Some(rate) = a.error_rate {
        Fault::errors(rate, a.error_code)
    } else if let Some(ms) = a.flap_period_ms {
        Fault {
            unreachable: Some(Unreachable::Refused),
            flap_period_ms: Some(ms),
            ..Fault::none()
        }
    } else {
        Fault::none()
    };
    f.validate()?;
    AdminClient::new(&url).set_fault(&a.cluster, &f).await?;
    println!(
        "{}: {}",
        a.cluster,
        serde_json::to_string(&f).unwrap_or_default()
    );
    Ok(())
}
