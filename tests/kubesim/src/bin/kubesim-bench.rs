//! `kubesim-bench`: the baseline figures of kubesim, measured from a separate process.
//!
//! It starts `kubesim serve` (plain HTTP, workloads ready at once) as a child process, generates
//! server-side apply load from this process (one cluster, then spread over many), and reads the
//! server's RSS with idle clusters. It prints a table and writes it to
//! `bench-results/kubesim.txt` at the workspace root (or `--out`).
//!
//! ```text
//! cargo build --release -p kubesim && ./target/release/kubesim-bench
//! ```

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

#[derive(Parser, Debug)]
#[command(
    name = "kubesim-bench",
    about = "Server-side apply throughput and idle memory of kubesim"
)]
struct Args {
    /// Seconds of load per throughput scenario.
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Concurrent requests in flight.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Clusters of the spread scenario.
    #[arg(long, default_value_t = 1000)]
    spread_clusters: usize,
    /// Idle cluster counts whose RSS is measured (TLS, as real clusters serve).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    idle: Vec<usize>,
    /// The kubesim binary (default: next to this one).
    #[arg(long)]
    kubesim: Option<PathBuf>,
    /// Where the results go.
    #[arg(long)]
    out: Option<PathBuf>,
}

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Server {
    child: Child,
    dir: tempfile::TempDir,
    startup: Duration,
}

async fn start(bin: &Path, clusters: usize, plain: bool, controllers: bool) -> Res<Server> {
    let dir = tempfile::tempdir()?;
    let mut cmd = Command::new(bin);
    cmd.args([
        "serve",
        "--clusters",
        &clusters.to_string(),
        "--ready-delay-ms",
        "0",
        "--kubeconfig-dir",
    ])
    .arg(dir.path())
    .stdout(Stdio::piped())
    .kill_on_drop(true);
    if plain {
        cmd.arg("--plain-http");
    }
    if controllers {
        cmd.arg("--controllers");
    }
    let t = Instant::now();
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let line = BufReader::new(stdout)
        .lines()
        .next_line()
        .await?
        .unwrap_or_default();
    if !line.starts_with("kubesim ready") {
        return Err(format!("kubesim did not get ready: {line:?}").into());
    }
    Ok(Server {
        child,
        dir,
        startup: t.elapsed(),
    })
}

async fn stop(mut s: Server) -> Res<()> {
    if let Some(pid) = s.child.id() {
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await?;
    }
    tokio::time::timeout(Duration::from_secs(20), s.child.wait()).await??;
    Ok(())
}

/// (server URL, token) of a cluster, from its kubeconfig.
fn endpoint(dir: &Path, cluster: usize) -> Res<(String, String)> {
    let text = std::fs::read_to_string(dir.join(format!("c{cluster}.kubeconfig")))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(name).map(str::to_owned))
            .ok_or_else(|| format!("kubeconfig without {name}"))
    };
    Ok((field("server: ")?, field("token: ")?))
}

fn rss_kib(pid: u32) -> Res<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).ok_or("bad VmRSS")?.parse()?)
}

struct Load {
    requests: u64,
    errors: u64,
    secs: f64,
    p50_us: u64,
    p99_us: u64,
}

/// What the load applies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// The same 50 ConfigMaps per cluster again and again: updates once warm.
    Updates,
    /// A new object every request, one in ten a Deployment (as the rsync fleet bench deploys).
    Creates,
}

async fn ssa_load(
    endpoints: Vec<(String, String)>,
    concurrency: usize,
    duration: Duration,
    mix: Mix,
) -> Res<Load> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(http);
    let endpoints = Arc::new(endpoints);
    let start = Instant::now();
    let deadline = start + duration;
    let mut workers = Vec::new();
    for w in 0..concurrency {
        let client = client.clone();
        let endpoints = endpoints.clone();
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0u64;
            let mut i = w;
            while Instant::now() < deadline {
                let (server, token) = &endpoints[i % endpoints.len()];
                let round = i / endpoints.len();
                let (path, body) = if mix == Mix::Creates && round.is_multiple_of(10) {
                    let name = format!("deploy-{round}");
                    (
                        format!("apis/apps/v1/namespaces/default/deployments/{name}"),
                        format!(
                            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}"}},"spec":{{"replicas":1,"selector":{{"matchLabels":{{"app":"{name}"}}}},"template":{{"metadata":{{"labels":{{"app":"{name}"}}}},"spec":{{"containers":[{{"name":"c","image":"nginx:1.27"}}]}}}}}}}}"#
                        ),
                    )
                } else {
                    let name = match mix {
                        Mix::Updates => format!("bench-{}", round % 50),
                        Mix::Creates => format!("bench-{round}"),
                    };
                    (
                        format!("api/v1/namespaces/default/configmaps/{name}"),
                        format!(
                            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","labels":{{"bench":"1"}}}},"data":{{"worker":"{w}","seq":"{i}"}}}}"#
                        ),
                    )
                };
                let req = http::Request::patch(format!(
                    "{server}/{path}?fieldManager=bench&force=true"
                ))
                .header("authorization", format!("Bearer {token}"))
                .header("content-type", "application/apply-patch+yaml")
                .body(Full::new(Bytes::from(body)));
                let t = Instant::now();
                let ok = match req {
                    Ok(req) => match client.request(req).await {
                        Ok(resp) => {
                            let good = resp.status().is_success();
                            good && resp.into_body().collect().await.is_ok()
                        }
                        Err(_) => false,
                    },
                    Err(_) => false,
                };
                if ok {
                    lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                } else {
                    errors += 1;
                }
                i += concurrency;
            }
            (lat, errors)
        }));
    }
    let mut lat = Vec::new();
    let mut errors = 0;
    for w in workers {
        let (l, e) = w.await?;
        lat.extend(l);
        errors += e;
    }
    let secs = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: usize| {
        lat.get((lat.len() * p / 100).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    Ok(Load {
        requests: lat.len() as u64,
        errors,
        secs,
        p50_us: pct(50),
        p99_us: pct(99),
    })
}

async fn throughput(bin: &Path, clusters: usize, a: &Args) -> Res<(String, Load)> {
    let server = start(bin, clusters, true, false).await?;
    let endpoints = (1..=clusters)
        .map(|c| endpoint(server.dir.path(), c))
        .collect::<Res<Vec<_>>>()?;
    // Warm-up creates the objects, so the measured run is mostly updates.
    ssa_load(
        endpoints.clone(),
        a.concurrency,
        Duration::from_secs(1),
        Mix::Updates,
    )
    .await?;
    let load = ssa_load(
        endpoints,
        a.concurrency,
        Duration::from_secs(a.duration_secs),
        Mix::Updates,
    )
    .await?;
    stop(server).await?;
    Ok((
        format!(
            "SSA, {clusters} cluster(s), plain HTTP, {} in flight",
            a.concurrency
        ),
        load,
    ))
}

/// Creates over many clusters with the workload controllers off or on: what the controllers
/// cost a fleet deployment. Also gives the server's RSS after the run.
async fn creates(
    bin: &Path,
    clusters: usize,
    controllers: bool,
    a: &Args,
) -> Res<(String, Load, u64)> {
    let server = start(bin, clusters, true, controllers).await?;
    let endpoints = (1..=clusters)
        .map(|c| endpoint(server.dir.path(), c))
        .collect::<Res<Vec<_>>>()?;
    let load = ssa_load(
        endpoints,
        a.concurrency,
        Duration::from_secs(a.duration_secs),
        Mix::Creates,
    )
    .await?;
    let kib = rss_kib(server.child.id().ok_or("kubesim exited")?)?;
    stop(server).await?;
    let on = if controllers { "on" } else { "off" };
    Ok((
        format!(
            "SSA creates (1 in 10 a Deployment), {clusters} clusters, controllers {on}, {} in flight",
            a.concurrency
        ),
        load,
        kib,
    ))
}

#[tokio::main]
async fn main() -> Res<()> {
    let a = Args::parse();
    let bin = match &a.kubesim {
        Some(p) => p.clone(),
        None => std::env::current_exe()?.with_file_name("kubesim"),
    };
    let mut rows = Vec::new();
    for clusters in [1, a.spread_clusters] {
        let (name, l) = throughput(&bin, clusters, &a).await?;
        let rps = l.requests as f64 / l.secs;
        eprintln!("{name}: {rps:.0} req/s");
        rows.push(format!(
            "| {name} | {rps:.0} req/s | p50 {:.2} ms, p99 {:.2} ms | {} ok, {} errors |",
            l.p50_us as f64 / 1000.0,
            l.p99_us as f64 / 1000.0,
            l.requests,
            l.errors
        ));
    }
    for controllers in [false, true] {
        let (name, l, kib) = creates(&bin, a.spread_clusters, controllers, &a).await?;
        let rps = l.requests as f64 / l.secs;
        eprintln!("{name}: {rps:.0} req/s");
        rows.push(format!(
            "| {name} | {rps:.0} req/s | p50 {:.2} ms, p99 {:.2} ms | {} ok, {} errors, RSS after {:.1} MiB |",
            l.p50_us as f64 / 1000.0,
            l.p99_us as f64 / 1000.0,
            l.requests,
            l.errors,
            kib as f64 / 1024.0
        ));
    }
    for &n in &a.idle {
        let server = start(&bin, n, false, false).await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pid = server.child.id().ok_or("kubesim exited")?;
        let kib = rss_kib(pid)?;
        let startup = server.startup;
        stop(server).await?;
        eprintln!("{n} idle clusters: {} MiB", kib / 1024);
        rows.push(format!(
            "| RSS, {n} idle clusters (TLS) | {:.1} MiB | startup {:.1} s | {:.1} KiB per cluster |",
            kib as f64 / 1024.0,
            startup.as_secs_f64(),
            kib as f64 / n as f64
        ));
    }
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let mut table = format!(
        "# kubesim baseline\n\nLoad from a separate process (kubesim-bench) against `kubesim serve`; {cpus} CPUs shared by both; {} s per throughput run.\n\n| scenario | result | latency / startup | detail |\n|---|---|---|---|\n",
        a.duration_secs
    );
    for r in &rows {
        table.push_str(r);
        table.push('\n');
    }
    println!("{table}");
    let out = a.out.clone().unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench-results/kubesim.txt")
    });
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, table)?;
    eprintln!("written to {}", out.display());
    Ok(())
}
