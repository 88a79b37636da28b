//! The fleet benchmark as production runs it: emco-server (release build, embedded store) and
//! kubesim (TLS, every cluster on one shared port) as separate processes, driven over REST as a
//! user drives it. Registers N clusters (kubeconfig, label, logical-cloud reference), onboards a
//! composite app of A generated charts of K objects each (the first a Deployment, the others
//! ConfigMaps, or five kinds with `EMCO_FLEET_MIX`), instantiates it to every cluster and follows it to Applied and Ready, times the
//! status summary, restarts the server (SIGKILL) with the fleet deployed, updates every object
//! (a new profile value) and terminates. Before the server starts, a plain client loop applies
//! the same number of objects of the same kinds to the same kubesim (server-side apply, one
//! kube client per cluster, as many clusters at once as rsync's concurrency): rsync's
//! throughput is reported against it. RSS and open descriptors of both processes are sampled
//! throughout.
//!
//! ```text
//! cargo build --release -p emco-server -p kubesim
//! EMCO_FLEET_CLUSTERS=1000 EMCO_FLEET_APPS=10 EMCO_FLEET_OBJECTS=10 cargo bench -p emco-e2e --bench fleet
//! ```
//!
//! `scripts/bench-fleet.sh` does both. Environment: `EMCO_FLEET_CLUSTERS` (1000),
//! `EMCO_FLEET_APPS` (10), `EMCO_FLEET_OBJECTS` per app (10), `EMCO_FLEET_READY_DELAY_MS`
//! (kubesim's, 500), `EMCO_FLEET_BIN_DIR` (the binaries; `target/release`),
//! `EMCO_FLEET_MIX=1` (a realistic app: after each app's Deployment a Service, a ConfigMap, a
//! Secret and a ServiceAccount in turn; the table goes to `...-mix.txt`),
//! `EMCO_FLEET_SERVER_LOG` (a file the server's log is appended to, `EMCO_LOG` choosing what),
//! `EMCO_FLEET_SERVER_WRAPPER` and `EMCO_FLEET_KUBESIM_WRAPPER` (a command to run the process
//! under: `heaptrack`, on a server built with `--no-default-features` (the system's allocator);
//! such a run ends at Ready with SIGTERM, its table beside the
//! benchmark's). The table is printed and written to
//! `bench-results/fleet-<clusters>x<objects per cluster>.txt`.
//!
//! With `EMCO_FLEET_CONTEXTS=N` it runs the many-contexts scenario instead (`contexts`): N
//! deployment intent groups of one object each, the server killed and started again with all
//! of them deployed, then with `EMCO_FLEET_ACTIVE` (1000) more of them still deploying; written
//! to `bench-results/fleet-contexts-<N>x<active>.txt`.

#![allow(clippy::unwrap_used)] // A bench that cannot set up has nothing to report.
#![allow(clippy::cast_precision_loss)] // Counts and durations as f64 for rates.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// rsync's default global concurrency: the raw loop keeps as many clusters busy.
const RAW_CONCURRENCY: usize = 256;
/// Concurrent REST calls while registering clusters (keep-alive connections).
const REST_CONCURRENCY: usize = 16;
const DEADLINE: Duration = Duration::from_secs(1800);
/// The composite app of both runs, and the fleet run's deployment intent group.
const CA: &str = "/v2/projects/p/composite-apps/ca/v1";
const DIG: &str = "/v2/projects/p/composite-apps/ca/v1/deployment-intent-groups/dig";

struct Params {
    clusters: usize,
    apps: usize,
    objects: usize,
    ready_delay_ms: u64,
    bin_dir: PathBuf,
    wrapper: Option<String>,
    /// The same for kubesim: EMCO_FLEET_KUBESIM_WRAPPER.
    kubesim_wrapper: Option<String>,
    /// EMCO_FLEET_CONTEXTS: when set, the many-contexts run (`contexts`) with this many
    /// deployment intent groups instead of the fleet run.
    contexts: usize,
    /// EMCO_FLEET_ACTIVE (1000): of the many-contexts run, the groups still deploying when the
    /// server is killed.
    active: usize,
    /// EMCO_FLEET_MIX=1: each app's objects after its Deployment are a Service, a ConfigMap, a
    /// Secret and a ServiceAccount in turn (a realistic app: five kinds, five watches a
    /// cluster), instead of ConfigMaps only.
    mix: bool,
}

impl Params {
    fn from_env() -> Self {
        let num = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .map_or(default, |v| v.parse().unwrap())
        };
        Self {
            clusters: num("EMCO_FLEET_CLUSTERS", 1000),
            apps: num("EMCO_FLEET_APPS", 10),
            objects: num("EMCO_FLEET_OBJECTS", 10).max(1),
            ready_delay_ms: num("EMCO_FLEET_READY_DELAY_MS", 500) as u64,
            bin_dir: std::env::var_os("EMCO_FLEET_BIN_DIR").map_or_else(
                || emco_e2e::workspace().join("target/release"),
                PathBuf::from,
            ),
            wrapper: std::env::var("EMCO_FLEET_SERVER_WRAPPER").ok(),
            kubesim_wrapper: std::env::var("EMCO_FLEET_KUBESIM_WRAPPER").ok(),
            contexts: num("EMCO_FLEET_CONTEXTS", 0),
            active: num("EMCO_FLEET_ACTIVE", 1000),
            mix: num("EMCO_FLEET_MIX", 0) != 0,
        }
    }

    /// The kind of an app's object `k` (0 is its Deployment).
    fn kind(&self, k: usize) -> Kind {
        const MIX: [Kind; 4] = [
            Kind::Service,
            Kind::ConfigMap,
            Kind::Secret,
            Kind::ServiceAccount,
        ];
        match k {
            0 => Kind::Deployment,
            _ if self.mix => MIX[(k - 1) % MIX.len()],
            _ => Kind::ConfigMap,
        }
    }

    fn total(&self) -> usize {
        self.clusters * self.apps * self.objects
    }

    fn app(i: usize) -> String {
        format!("app{:02}", i + 1)
    }
}

/// A child process killed when dropped, with the profiled process under it when a wrapper runs
/// one (killed first: the wrapper's end would not end it, on a panic as on success).
struct Proc(Child, Option<u32>);

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(pid) = self.1.take() {
            drop(
                Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status(),
            );
        }
        drop(self.0.kill());
        drop(self.0.wait());
    }
}

/// `(VmRSS, VmHWM)` of `pid` in KiB.
fn memory(pid: u32) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// A process's own pid: the child itself, or under a wrapper (heaptrack's script) its
/// descendant named `name`, once the wrapper started it.
fn own_pid(wrapper: Option<&String>, child: &Child, name: &str) -> u32 {
    if wrapper.is_none() {
        return child.id();
    }
    let parent_of = |pid: &str| -> Option<(String, u32)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // "pid (comm) state ppid ...": comm may hold spaces, so split at the last ')'.
        let (head, tail) = stat.rsplit_once(')')?;
        let comm = head.split_once('(')?.1.to_owned();
        let ppid = tail.split_whitespace().nth(1)?.parse().ok()?;
        Some((comm, ppid))
    };
    for _ in 0..600 {
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let pid = entry.file_name().to_string_lossy().into_owned();
            if let Some((comm, ppid)) = parent_of(&pid)
                && comm == name
                && ppid == child.id()
            {
                return pid.parse().unwrap();
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no {name} under the wrapper {wrapper:?}");
}

/// `program`, or `wrapper program` when a profiler is to run it.
fn wrapped(wrapper: Option<&String>, program: &Path) -> Command {
    match wrapper {
        Some(w) => {
            let mut c = Command::new(w);
            c.arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// Sends `signal` (TERM, STOP, CONT) to `pid`.
fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Ends a process normally (SIGTERM), so a profiler in front of it writes its data, and waits
/// for its wrapper.
fn stop(pid: u32, proc: &mut Proc) {
    signal(pid, "TERM");
    proc.1 = None;
    drop(proc.0.wait());
}

/// CPU seconds (user and system) `pid` has used so far.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After "pid (comm)": field 3 is the state, utime and stime are fields 14 and 15, in ticks.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, tail)| tail.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(14) + ticks(15)) as f64 / CLOCK_TICKS
}

/// The kernel's `USER_HZ` on Linux.
const CLOCK_TICKS: f64 = 100.0;

/// The machine's count of TCP connections opened so far (`ActiveOpens` of /proc/net/snmp).
fn tcp_opened() -> u64 {
    let snmp = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    let mut rows = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (Some(names), Some(values)) = (rows.next(), rows.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "ActiveOpens")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// The machine's TCP sockets in TIME_WAIT (/proc/net/sockstat): each holds a local port, and
/// connecting gets dearer as the ports toward one address fill up.
fn tcp_time_wait() -> u64 {
    let stat = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    stat.lines()
        .find_map(|l| l.strip_prefix("TCP:"))
        .and_then(|l| {
            let mut words = l.split_whitespace();
            while let Some(w) = words.next() {
                if w == "tw" {
                    return words.next()?.parse().ok();
                }
            }
            None
        })
        .unwrap_or(0)
}

/// The peak of [`tcp_time_wait`] since the last [`Cpu::start`], kept by the sampler.
static TIME_WAIT_PEAK: AtomicU64 = AtomicU64::new(0);

/// CPU seconds of two processes, and the TCP connections opened, over a span of the run.
struct Cpu {
    pids: (u32, u32),
    start: (f64, f64),
    opened: u64,
}

impl Cpu {
    fn start(server: u32, kubesim: u32) -> Self {
        TIME_WAIT_PEAK.store(0, Ordering::Relaxed);
        Self {
            pids: (server, kubesim),
            start: (cpu_secs(server), cpu_secs(kubesim)),
            opened: tcp_opened(),
        }
    }

    /// "server / kubesim" CPU seconds since the start, with the connections opened meanwhile
    /// (machine-wide: nearly all of them are the server's to kubesim) and the TIME_WAIT peak.
    fn spent(&self) -> String {
        format!(
            "{:.1} / {:.1} ({} TCP connections opened, TIME_WAIT peak {})",
            cpu_secs(self.pids.0) - self.start.0,
            cpu_secs(self.pids.1) - self.start.1,
            tcp_opened() - self.opened,
            TIME_WAIT_PEAK.load(Ordering::Relaxed)
        )
    }
}

impl Cpu {
    /// The server's CPU since the start per object and per (app, cluster) worker: figures that,
    /// unlike the wall times, do not depend on kubesim sharing the cores.
    fn per_unit(&self, p: &Params) -> String {
        let secs = cpu_secs(self.pids.0) - self.start.0;
        format!(
            "{:.0} us / {:.2} ms",
            secs * 1e6 / p.total() as f64,
            secs * 1e3 / (p.apps * p.clusters) as f64
        )
    }
}

fn descriptors(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// Peak RSS and descriptors of a process, sampled every 250 ms while the sampler runs.
#[derive(Default)]
struct Peaks {
    pid: AtomicU64,
    rss_kib: AtomicU64,
    fds: AtomicU64,
}

impl Peaks {
    fn sample(&self) {
        let pid = self.pid.load(Ordering::Relaxed) as u32;
        if pid == 0 {
            return;
        }
        self.rss_kib.fetch_max(memory(pid).0, Ordering::Relaxed);
        self.fds.fetch_max(descriptors(pid), Ordering::Relaxed);
    }

    fn take(&self) -> (f64, u64) {
        (
            self.rss_kib.swap(0, Ordering::Relaxed) as f64 / 1024.0,
            self.fds.swap(0, Ordering::Relaxed),
        )
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The REST API of the server at `base` over pooled keep-alive connections.
#[derive(Clone)]
struct Rest {
    client: Client<HttpConnector, Full<Bytes>>,
    base: String,
}

impl Rest {
    fn to(listen: &str) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            base: format!("http://{listen}"),
        }
    }

    async fn call(&self, method: &str, path: &str, body: Option<(&str, Vec<u8>)>) -> (u16, String) {
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        let body = match body {
            Some((content_type, bytes)) => {
                req = req.header("content-type", content_type);
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        let resp = self.client.request(req.body(body).unwrap()).await.unwrap();
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A call whose answer must have status `want`.
    async fn expect(&self, want: u16, method: &str, path: &str, body: Option<(&str, Vec<u8>)>) {
        let (status, text) = self.call(method, path, body).await;
        assert_eq!(status, want, "{method} {path}: {text}");
    }

    async fn create(&self, path: &str, body: &Value) {
        let json = ("application/json", body.to_string().into_bytes());
        self.expect(201, "POST", path, Some(json)).await;
    }

    /// A multipart upload of `metadata` and one file, as emcoctl sends it.
    async fn upload(&self, method: &str, want: u16, path: &str, metadata: &Value, file: &[u8]) {
        let mut form = Vec::new();
        form.extend_from_slice(
            format!(
                "--b\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{metadata}\r\n\
                 --b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.tgz\"\r\n\
                 Content-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        form.extend_from_slice(file);
        form.extend_from_slice(b"\r\n--b--\r\n");
        let body = Some(("multipart/form-data; boundary=b", form));
        self.expect(want, method, path, body).await;
    }

    /// Replaces the profile of each of the first `apps` apps with `profile`: what an update of
    /// every object changes.
    async fn replace_profiles(&self, apps: usize, profile: &[u8]) {
        for a in 0..apps {
            let app = Params::app(a);
            self.upload(
                "PUT",
                201,
                &format!("{CA}/composite-profiles/cp/profiles/pr-{app}"),
                &json!({"metadata": {"name": format!("pr-{app}")}, "spec": {"app": app}}),
                profile,
            )
            .await;
        }
    }

    async fn status(&self, query: &str) -> (Value, Duration) {
        self.status_of(DIG, query).await
    }

    /// The status of the deployment intent group at `dig`, and how long it took.
    async fn status_of(&self, dig: &str, query: &str) -> (Value, Duration) {
        let t = Instant::now();
        let (code, text) = self
            .call("GET", &format!("{dig}/status?{query}"), None)
            .await;
        let took = t.elapsed();
        assert_eq!(code, 200, "status: {text}");
        (serde_json::from_str(&text).unwrap(), took)
    }

    /// Polls the status summary until `done`; the summaries' latencies go to `latencies`.
    async fn until(
        &self,
        query: &str,
        latencies: &mut Vec<Duration>,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let (status, took) = self.status(query).await;
            latencies.push(took);
            if done(&status) {
                return status;
            }
            let state = status["deployedStatus"].as_str().unwrap_or_default();
            assert!(!state.ends_with("Failed"), "{status}");
            assert!(Instant::now() < deadline, "not done: {status}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

fn count(status: &Value, counts: &str, state: &str) -> usize {
    status[counts][state].as_u64().unwrap_or(0) as usize
}

/// The kinds of the benchmark's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Deployment,
    Service,
    ConfigMap,
    Secret,
    ServiceAccount,
}

impl Kind {
    /// The object named `name` of app `app` carrying `value`: its YAML, with Go template
    /// actions when `value` is one.
    fn yaml(self, app: &str, name: &str, value: &str) -> String {
        match self {
            Self::Deployment => format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n\
                 spec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {app}}}\n\
                 \x20 template:\n    metadata:\n      labels: {{app: {app}}}\n\
                 \x20     annotations: {{value: {value}}}\n    spec:\n\
                 \x20     containers:\n      - name: c\n        image: busybox\n"
            ),
            Self::Service => format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n\
                 \x20 annotations: {{value: {value}}}\nspec:\n  selector: {{app: {app}}}\n\
                 \x20 ports:\n  - port: 80\n"
            ),
            Self::ConfigMap => format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: {value}\n"
            ),
            Self::Secret => format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n  value: {value}\n"
            ),
            Self::ServiceAccount => format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n\
                 \x20 annotations: {{value: {value}}}\n"
            ),
        }
    }

    /// The API resource of the kind, for the raw loop's dynamic client.
    fn resource(self) -> kube::discovery::ApiResource {
        use kube::discovery::ApiResource;
        match self {
            Self::Deployment => ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
            Self::Service => ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
            Self::ConfigMap => ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            Self::Secret => ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
            Self::ServiceAccount => {
                ApiResource::erase::<k8s_openapi::api::core::v1::ServiceAccount>(&())
            }
        }
    }
}

/// Chart `name` with `p.objects` objects of the kinds [`Params::kind`] says; every object
/// carries the value `value` of the values (the update changes it through the profile).
fn chart(dir: &Path, name: &str, p: &Params, objects: usize) -> Vec<u8> {
    let root = dir.join(name);
    std::fs::create_dir_all(root.join("templates")).unwrap();
    std::fs::write(
        root.join("Chart.yaml"),
        format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n"),
    )
    .unwrap();
    std::fs::write(root.join("values.yaml"), "value: v1\n").unwrap();
    let docs: Vec<String> = (0..objects)
        .map(|k| {
            p.kind(k).yaml(
                "{{ .Chart.Name }}",
                // A group's own value `group` (the many-contexts run's override) keeps the
                // objects of groups sharing a cluster apart, as distinct releases are.
                &format!(
                    "{{{{ .Chart.Name }}}}-{k}{{{{ with .Values.group }}}}-{{{{ . }}}}{{{{ end }}}}"
                ),
                "{{ .Values.value | quote }}",
            )
        })
        .collect();
    std::fs::write(root.join("templates/objects.yaml"), docs.join("---\n")).unwrap();
    emco_helm::archive::pack_dir(&root, name).unwrap()
}

/// A profile whose override sets `value`.
fn profile(dir: &Path, value: &str) -> Vec<u8> {
    let root = dir.join(format!("profile-{value}"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("manifest.yaml"),
        "---\nversion: v1\ntype:\n  values: \"override_values.yaml\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join("override_values.yaml"),
        format!("value: {value}\n"),
    )
    .unwrap();
    emco_helm::archive::pack_dir(&root, ".").unwrap()
}

/// The objects the raw loop applies to one cluster: as the charts render them.
fn raw_objects(p: &Params) -> Vec<(Kind, String, Value)> {
    let mut out = Vec::new();
    for a in 0..p.apps {
        let app = format!("raw-{}", Params::app(a));
        for k in 0..p.objects {
            let kind = p.kind(k);
            let name = format!("{app}-{k}");
            let yaml = kind.yaml(&app, &name, "v1");
            out.push((kind, name, emco_go::yaml::from_str(&yaml).unwrap()));
        }
    }
    out
}

async fn kube_client(kubeconfigs: &Path, cluster: usize) -> kube::Client {
    let text = std::fs::read_to_string(kubeconfigs.join(format!("c{cluster}.kubeconfig"))).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The plain client loop: every cluster's objects applied with its own client, as many
/// clusters at once as rsync's default concurrency; the elapsed time.
async fn raw_loop(p: &Params, kubeconfigs: &Path) -> Duration {
    use kube::api::DynamicObject;
    let objects = Arc::new(raw_objects(p));
    let start = Instant::now();
    futures::stream::iter(1..=p.clusters)
        .for_each_concurrent(RAW_CONCURRENCY, |c| {
            let objects = Arc::clone(&objects);
            async move {
                let client = kube_client(kubeconfigs, c).await;
                let params = PatchParams::apply("raw-loop").force();
                for (kind, name, body) in objects.iter() {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(client.clone(), "default", &kind.resource());
                    api.patch(name, &params, &Patch::Apply(body)).await.unwrap();
                }
            }
        })
        .await;
    start.elapsed()
}

fn spawn_kubesim(p: &Params, kubeconfigs: &Path) -> Proc {
    let mut child = wrapped(p.kubesim_wrapper.as_ref(), &p.bin_dir.join("kubesim"))
        .args(["serve", "--shared-port", "--clusters"])
        .arg(p.clusters.to_string())
        .arg("--ready-delay-ms")
        .arg(p.ready_delay_ms.to_string())
        .arg("--kubeconfig-dir")
        .arg(kubeconfigs)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    // A wrapper may print lines of its own first.
    while !line.starts_with("kubesim ready") {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "kubesim ended before it was ready");
    }
    Proc(child, None)
}

/// Where the server's log goes: appended to the file EMCO_FLEET_SERVER_LOG names (with EMCO_LOG
/// choosing what is logged, `warn` by default), else nowhere.
fn server_log() -> Stdio {
    std::env::var_os("EMCO_FLEET_SERVER_LOG").map_or_else(Stdio::null, |path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_or_else(|e| panic!("cannot open {path:?}: {e}"), Stdio::from)
    })
}

fn spawn_server(p: &Params, data: &Path, listen: &str, grpc: &str) -> Proc {
    // A profiler in front of the server (`heaptrack`): EMCO_FLEET_SERVER_WRAPPER.
    let mut command = wrapped(p.wrapper.as_ref(), &p.bin_dir.join("emco-server"));
    command
        .args(["--listen", listen, "--grpc-listen", grpc, "--data-dir"])
        .arg(data)
        .env(
            "EMCO_LOG",
            std::env::var("EMCO_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(server_log())
        .stderr(Stdio::inherit());
    Proc(command.spawn().unwrap(), None)
}

/// Waits until `/readyz` answers 200; the time it took.
async fn ready(rest: &Rest) -> Duration {
    let start = Instant::now();
    loop {
        let req = hyper::Request::get(format!("{}/readyz", rest.base))
            .body(Full::new(Bytes::new()))
            .unwrap();
        if let Ok(resp) = rest.client.request(req).await
            && resp.status() == 200
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "server not ready"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

struct Table(String);

impl Table {
    fn row(&mut self, what: &str, value: impl std::fmt::Display) {
        writeln!(self.0, "| {what} | {value} |").unwrap();
        eprintln!("{what}: {value}");
    }
}

/// Registration: provider, project, admin cloud; each cluster with its kubeconfig, a label and a
/// reference in the cloud. The time it took.
async fn register(rest: &Rest, p: &Params, kubeconfigs: &Path) -> Duration {
    let start = Instant::now();
    rest.create(
        "/v2/cluster-providers",
        &json!({"metadata": {"name": "kp"}}),
    )
    .await;
    rest.create("/v2/projects", &json!({"metadata": {"name": "p"}}))
        .await;
    rest.create(
        "/v2/projects/p/logical-clouds",
        &json!({"metadata": {"name": "lc"}, "spec": {"level": "0"}}),
    )
    .await;
    futures::stream::iter(1..=p.clusters)
        .for_each_concurrent(REST_CONCURRENCY, |c| {
            let (rest, dir) = (rest.clone(), kubeconfigs.to_path_buf());
            async move {
                let name = format!("c{c}");
                let kubeconfig = std::fs::read(dir.join(format!("{name}.kubeconfig"))).unwrap();
                rest.upload(
                    "POST",
                    201,
                    "/v2/cluster-providers/kp/clusters",
                    &json!({"metadata": {"name": name}}),
                    &kubeconfig,
                )
                .await;
                rest.create(
                    &format!("/v2/cluster-providers/kp/clusters/{name}/labels"),
                    &json!({"clusterLabel": "edge"}),
                )
                .await;
                rest.create(
                    "/v2/projects/p/logical-clouds/lc/cluster-references",
                    &json!({"metadata": {"name": name},
                        "spec": {"clusterProvider": "kp", "cluster": name}}),
                )
                .await;
            }
        })
        .await;
    start.elapsed()
}

#[allow(clippy::too_many_lines)] // One run, step by step, reads best in one place.
async fn bench(p: &Params) -> String {
    let work = tempfile::tempdir().unwrap();
    let kubeconfigs = work.path().join("kubeconfigs");
    std::fs::create_dir_all(&kubeconfigs).unwrap();
    let total = p.total();
    let mut t = Table(String::new());
    writeln!(
        t.0,
        "# Fleet: {} clusters x {} objects ({} apps x {}; {total} objects{}), separate processes\n\n\
         emco-server (release, embedded store, defaults: rsync concurrency 256, 4 per cluster, \
         readiness from watches) and kubesim (release, TLS, one shared port, ready delay {} ms) \
         as separate processes with this driver on the same 2-core machine; all calls over REST. \
         Command: `EMCO_FLEET_CLUSTERS={} EMCO_FLEET_APPS={} EMCO_FLEET_OBJECTS={}{} bash scripts/bench-fleet.sh`.\n\n\
         | measure | value |\n|---|---|",
        p.clusters,
        p.apps * p.objects,
        p.apps,
        p.objects,
        if p.mix {
            "; after each Deployment a Service, a ConfigMap, a Secret and a ServiceAccount in turn"
        } else {
            "; a Deployment, then ConfigMaps"
        },
        p.ready_delay_ms,
        p.clusters,
        p.apps,
        p.objects,
        if p.mix { " EMCO_FLEET_MIX=1" } else { "" },
    )
    .unwrap();

    let mut kubesim = spawn_kubesim(p, &kubeconfigs);
    let kubesim_pid = own_pid(p.kubesim_wrapper.as_ref(), &kubesim.0, "kubesim");
    kubesim.1 = p.kubesim_wrapper.as_ref().map(|_| kubesim_pid);
    let server_peaks = Arc::new(Peaks::default());
    let kubesim_peaks = Arc::new(Peaks::default());
    kubesim_peaks
        .pid
        .store(u64::from(kubesim_pid), Ordering::Relaxed);
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (s, k, on) = (
            Arc::clone(&server_peaks),
            Arc::clone(&kubesim_peaks),
            Arc::clone(&sampling),
        );
        tokio::spawn(async move {
            while on.load(Ordering::Relaxed) {
                s.sample();
                k.sample();
                TIME_WAIT_PEAK.fetch_max(tcp_time_wait(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
    };

    // The raw loop first, on its own objects, so rsync's run finds the clusters as users do.
    let kubesim_cpu = cpu_secs(kubesim_pid);
    let raw = raw_loop(p, &kubeconfigs).await;
    let raw_rate = total as f64 / raw.as_secs_f64();
    t.row(
        "raw SSA client loop (same objects, same kubesim)",
        format!("{:.2} s, {raw_rate:.0} objects/s", raw.as_secs_f64()),
    );
    t.row(
        "kubesim CPU seconds during the raw loop",
        format!("{:.1}", cpu_secs(kubesim_pid) - kubesim_cpu),
    );
    let (k_rss, _) = kubesim_peaks.take();
    t.row(
        "kubesim peak RSS during the raw loop",
        format!("{k_rss:.0} MiB"),
    );

    let data = work.path().join("data");
    let (listen, grpc) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let started = Instant::now();
    let mut server = spawn_server(p, &data, &listen, &grpc);
    let pid = own_pid(p.wrapper.as_ref(), &server.0, "emco-server");
    server.1 = p.wrapper.as_ref().map(|_| pid);
    server_peaks.pid.store(u64::from(pid), Ordering::Relaxed);
    let rest = Rest::to(&listen);
    ready(&rest).await;
    t.row(
        "server start to ready",
        format!("{:.2} s", started.elapsed().as_secs_f64()),
    );

    let registration = register(&rest, p, &kubeconfigs).await;
    t.row(
        "registration (kubeconfig, label, cloud reference per cluster; 16 concurrent calls)",
        format!(
            "{:.2} s, {:.0} clusters/s",
            registration.as_secs_f64(),
            p.clusters as f64 / registration.as_secs_f64()
        ),
    );

    // Onboarding: the admin cloud, the composite app, its charts and profiles, the intents.
    let start = Instant::now();
    create_app(&rest).await;
    let ca = CA;
    create_group(&rest, "dig", json!({})).await;
    let charts = work.path().join("charts");
    let v1 = profile(work.path(), "v1");
    for a in 0..p.apps {
        let app = Params::app(a);
        let packed = chart(&charts, &app, p, p.objects);
        rest.upload(
            "POST",
            201,
            &format!("{ca}/apps"),
            &json!({"metadata": {"name": app}}),
            &packed,
        )
        .await;
        rest.upload(
            "POST",
            201,
            &format!("{ca}/composite-profiles/cp/profiles"),
            &json!({"metadata": {"name": format!("pr-{app}")}, "spec": {"app": app}}),
            &v1,
        )
        .await;
        rest.create(
            &format!("{DIG}/generic-placement-intents/gpi/app-intents"),
            &json!({"metadata": {"name": format!("ai-{app}")}, "spec": {"app": app,
                "intent": {"allOf": [{"clusterProvider": "kp", "clusterLabel": "edge"}]}}}),
        )
        .await;
    }
    rest.expect(202, "POST", &format!("{DIG}/approve"), None)
        .await;
    t.row(
        "onboarding (cloud, composite app, charts, profiles, intents, approve)",
        format!("{:.2} s", start.elapsed().as_secs_f64()),
    );

    // Instantiate, followed to every object Applied, then Ready.
    let mut latencies = Vec::new();
    let deployed = "status=deployed&output=summary";
    let readiness = "status=ready&output=summary";
    let cpu = Cpu::start(pid, kubesim_pid);
    let start = Instant::now();
    rest.expect(202, "POST", &format!("{DIG}/instantiate"), None)
        .await;
    let answered = start.elapsed();
    rest.until(deployed, &mut latencies, |s| {
        s["deployedStatus"] == "Instantiated" && count(s, "deployedCounts", "Applied") == total
    })
    .await;
    let applied = start.elapsed();
    let applied_cpu = cpu.spent();
    let applied_unit = cpu.per_unit(p);
    rest.until(readiness, &mut latencies, |s| {
        count(s, "readyCounts", "Ready") == total
    })
    .await;
    let ready_in = start.elapsed();
    let (s_rss, s_fds) = server_peaks.take();
    let (k_rss, k_fds) = kubesim_peaks.take();
    let rate = total as f64 / applied.as_secs_f64();
    t.row(
        "instantiate answered",
        format!("{:.2} s", answered.as_secs_f64()),
    );
    t.row(
        "instantiate to all Applied (Instantiated)",
        format!("{:.2} s, {rate:.0} objects/s", applied.as_secs_f64()),
    );
    t.row(
        "instantiate to all Ready",
        format!("{:.2} s", ready_in.as_secs_f64()),
    );
    t.row(
        "rsync apply throughput / raw client loop",
        format!("{:.2}", rate / raw_rate),
    );
    t.row("CPU seconds to all Applied, server / kubesim", applied_cpu);
    t.row(
        "server CPU to all Applied, per object / per (app, cluster) worker",
        applied_unit,
    );
    t.row(
        "server peak RSS, peak descriptors (registration to Ready)",
        format!("{s_rss:.0} MiB, {s_fds}"),
    );
    t.row(
        "kubesim peak RSS, peak descriptors (registration to Ready)",
        format!("{k_rss:.0} MiB, {k_fds}"),
    );
    let mut polled = latencies.clone();
    t.row(
        "status summary while deploying (median, max)",
        format!(
            "{:.1} ms, {:.1} ms",
            median(&mut polled).as_secs_f64() * 1e3,
            polled.last().copied().unwrap_or_default().as_secs_f64() * 1e3
        ),
    );
    let mut settled = Vec::new();
    for _ in 0..10 {
        settled.push(rest.status(readiness).await.1);
    }
    let mut deployed_q = Vec::new();
    for _ in 0..10 {
        deployed_q.push(rest.status(deployed).await.1);
    }
    t.row(
        "status summary once Ready, ready / deployed (median of 10)",
        format!(
            "{:.1} ms / {:.1} ms",
            median(&mut settled).as_secs_f64() * 1e3,
            median(&mut deployed_q).as_secs_f64() * 1e3
        ),
    );

    let (_, hwm) = memory(pid);
    t.row(
        "server VmHWM, start to Ready",
        format!("{:.0} MiB", mib(hwm)),
    );
    if p.wrapper.is_some() || p.kubesim_wrapper.is_some() {
        // A profiler writes its data when its process ends normally; no restart after it.
        stop(pid, &mut server);
        stop(kubesim_pid, &mut kubesim);
        t.row(
            "profile",
            format!(
                "server under {:?}, kubesim under {:?}: ended at Ready with SIGTERM",
                p.wrapper, p.kubesim_wrapper
            ),
        );
        sampling.store(false, Ordering::Relaxed);
        sampler.await.unwrap();
        return t.0;
    }

    // A crash with the fleet deployed: the time until the server answers again.
    drop(server.0.kill());
    drop(server.0.wait());
    let restarted = Instant::now();
    server = spawn_server(p, &data, &listen, &grpc);
    server_peaks
        .pid
        .store(u64::from(server.0.id()), Ordering::Relaxed);
    let up = ready(&rest).await;
    let (s, _) = rest.status(deployed).await;
    assert_eq!(count(&s, "deployedCounts", "Applied"), total, "{s}");
    t.row(
        "restart after SIGKILL, fleet deployed: ready / first status answer",
        format!(
            "{:.2} s / {:.2} s",
            up.as_secs_f64(),
            restarted.elapsed().as_secs_f64()
        ),
    );

    // Update: a new profile value for every app changes every object.
    let v2 = profile(work.path(), "v2");
    rest.replace_profiles(p.apps, &v2).await;
    let cpu = Cpu::start(server.0.id(), kubesim_pid);
    let start = Instant::now();
    rest.expect(202, "POST", &format!("{DIG}/update"), None)
        .await;
    rest.until(deployed, &mut latencies, |s| {
        matches!(
            s["deployedStatus"].as_str(),
            Some("Instantiated" | "Updated")
        ) && count(s, "deployedCounts", "Applied") == total
    })
    .await;
    let updated = start.elapsed();
    let updated_cpu = cpu.spent();
    let updated_unit = cpu.per_unit(p);
    let sample = kube_client(&kubeconfigs, p.clusters).await;
    let cm: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(sample, "default");
    let d = cm
        .get(&format!("{}-0", Params::app(p.apps - 1)))
        .await
        .unwrap();
    let d = serde_json::to_value(d).unwrap();
    let value = &d["spec"]["template"]["metadata"]["annotations"]["value"];
    assert_eq!(value, "v2", "the update reached the last cluster");
    t.row(
        "update (every object changed) to all Applied",
        format!(
            "{:.2} s, {:.0} objects/s",
            updated.as_secs_f64(),
            total as f64 / updated.as_secs_f64()
        ),
    );
    t.row("CPU seconds of the update, server / kubesim", updated_cpu);
    t.row(
        "server CPU of the update, per object / per (app, cluster) worker",
        updated_unit,
    );
    rest.until(readiness, &mut latencies, |s| {
        count(s, "readyCounts", "Ready") == total
    })
    .await;
    let flat_ready = start.elapsed();
    t.row(
        "update (every object changed) to all Ready",
        format!("{:.2} s", flat_ready.as_secs_f64()),
    );

    // The same change rolled out in 5 waves (1 cluster, 1 %, 10 %, 50 %, the rest; no bake):
    // each wave's clusters updated, then waited for until every resource is Ready, before the
    // next. Its time beside the flat update's to all Ready is the cost of the waves.
    rest.create(
        &format!("{DIG}/rollout-policies"),
        &json!({"metadata": {"name": "waves"}, "spec": {
            "waves": [{"count": 1}, {"percent": 1}, {"percent": 10}, {"percent": 50}, {}],
            "gates": {"progressDeadline": "30m"}}}),
    )
    .await;
    let v3 = profile(work.path(), "v3");
    let cpu = Cpu::start(server.0.id(), kubesim_pid);
    let start = Instant::now();
    rest.replace_profiles(p.apps, &v3).await;
    rest.expect(202, "POST", &format!("{DIG}/update"), None)
        .await;
    let deadline = Instant::now() + DEADLINE;
    let run = loop {
        let (code, text) = rest.call("GET", &format!("{DIG}/rollout"), None).await;
        assert_eq!(code, 200, "rollout: {text}");
        let run: Value = serde_json::from_str(&text).unwrap();
        match run["state"].as_str() {
            Some("Succeeded") => break run,
            Some("RolledBack" | "Failed" | "Paused") => {
                panic!("the rollout did not succeed: {run}")
            }
            _ => {}
        }
        assert!(Instant::now() < deadline, "rollout not done: {run}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let rolled = start.elapsed();
    let rolled_cpu = cpu.spent();
    let sizes: Vec<usize> = run["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["clusters"].as_array().map_or(0, Vec::len))
        .collect();
    t.row(
        &format!("update in 5 waves {sizes:?} (no bake) to rollout Succeeded (all Ready)"),
        format!(
            "{:.2} s, {:+.1} % beside the flat update to all Ready",
            rolled.as_secs_f64(),
            (rolled.as_secs_f64() / flat_ready.as_secs_f64() - 1.0) * 100.0
        ),
    );
    t.row("CPU seconds of the rollout, server / kubesim", rolled_cpu);
    // Each wave from its start to its gate passing (whole seconds, as the rollout records
    // them): beside the wave's size, the fixed cost of a wave.
    let secs = |w: &Value, at: &str| {
        w[at]
            .as_str()
            .and_then(emco_core::time::parse_rfc3339)
            .unwrap_or(0)
    };
    let spans: Vec<String> = run["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| format!("{} s", secs(w, "finished") - secs(w, "started")))
        .collect();
    t.row("each wave, started to passed", spans.join(", "));

    // What a next update would do, before it is done: new profiles for every app (every object
    // would change), then the whole fleet's preview and one page of its per-cluster detail.
    // Measured after the rollout, so that the flat update and the rollout compare with earlier
    // runs.
    let v4 = profile(work.path(), "v4");
    rest.replace_profiles(p.apps, &v4).await;
    for (what, query) in [
        ("preview of the update (summary)", ""),
        (
            "preview of the update (a page of 100 clusters)",
            "?detail=clusters&limit=100",
        ),
    ] {
        let cpu = Cpu::start(server.0.id(), kubesim_pid);
        let start = Instant::now();
        let (code, text) = rest
            .call("GET", &format!("{DIG}/preview{query}"), None)
            .await;
        let took = start.elapsed();
        assert_eq!(code, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["summary"]["changed"], total, "{}", answer["summary"]);
        assert_eq!(answer["summary"]["clustersChanged"], p.clusters);
        t.row(
            what,
            format!(
                "{:.2} s, {} KiB answered, CPU s {}",
                took.as_secs_f64(),
                text.len() / 1024,
                cpu.spent()
            ),
        );
    }

    // Terminate, followed to Terminated.
    let cpu = Cpu::start(server.0.id(), kubesim_pid);
    let start = Instant::now();
    rest.expect(202, "POST", &format!("{DIG}/terminate"), None)
        .await;
    rest.until(deployed, &mut latencies, |s| {
        s["deployedStatus"] == "Terminated"
    })
    .await;
    let terminated = start.elapsed();
    let terminated_cpu = cpu.spent();
    let terminated_unit = cpu.per_unit(p);
    let sample = kube_client(&kubeconfigs, p.clusters).await;
    let left: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(sample, "default");
    let names: Vec<String> = left
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .filter(|n| !n.starts_with("raw-"))
        .collect();
    assert!(names.is_empty(), "left on the last cluster: {names:?}");
    t.row(
        "terminate to Terminated",
        format!("{:.2} s", terminated.as_secs_f64()),
    );
    t.row(
        "CPU seconds of the terminate, server / kubesim",
        terminated_cpu,
    );
    t.row(
        "server CPU of the terminate, per object / per (app, cluster) worker",
        terminated_unit,
    );
    let (s_rss, s_fds) = server_peaks.take();
    t.row(
        "server peak RSS, peak descriptors (restart to Terminated)",
        format!("{s_rss:.0} MiB, {s_fds}"),
    );
    let (_, hwm) = memory(server.0.id());
    t.row(
        "server VmHWM of the restarted process",
        format!("{:.0} MiB", mib(hwm)),
    );
    let (_, hwm) = memory(kubesim_pid);
    t.row("kubesim VmHWM (whole run)", format!("{:.0} MiB", mib(hwm)));
    sampling.store(false, Ordering::Relaxed);
    sampler.await.unwrap();
    drop(server);
    drop(kubesim);
    t.0
}

/// Instantiates the admin cloud `lc` and creates the composite app `ca` with its composite
/// profile `cp`.
async fn create_app(rest: &Rest) {
    rest.expect(
        202,
        "POST",
        "/v2/projects/p/logical-clouds/lc/instantiate",
        None,
    )
    .await;
    rest.create(
        "/v2/projects/p/composite-apps",
        &json!({"metadata": {"name": "ca"}, "spec": {"compositeAppVersion": "v1"}}),
    )
    .await;
    rest.create(
        &format!("{CA}/composite-profiles"),
        &json!({"metadata": {"name": "cp"}}),
    )
    .await;
}

/// Creates deployment intent group `name` of the composite app `ca` (profile `cp`, cloud
/// `lc`) with its intents and its generic placement intent `gpi`; the group's path.
async fn create_group(rest: &Rest, name: &str, spec: Value) -> String {
    let dig = format!("{CA}/deployment-intent-groups/{name}");
    let mut body = json!({"metadata": {"name": name},
        "spec": {"compositeProfile": "cp", "version": "r1", "logicalCloud": "lc"}});
    if let (Some(into), Value::Object(more)) = (body["spec"].as_object_mut(), spec) {
        into.extend(more);
    }
    rest.create(&format!("{CA}/deployment-intent-groups"), &body)
        .await;
    rest.create(
        &format!("{dig}/intents"),
        &json!({"metadata": {"name": "i"}, "spec": {"intent": {"genericPlacementIntent": "gpi"}}}),
    )
    .await;
    rest.create(
        &format!("{dig}/generic-placement-intents"),
        &json!({"metadata": {"name": "gpi"}, "spec": {"logicalCloud": "lc"}}),
    )
    .await;
    dig
}

/// Onboards deployment intent group `name` of the composite app `ca` (one app, `app01`) placed
/// on cluster `cluster` alone, and approves it.
async fn onboard_group(rest: &Rest, name: &str, cluster: usize) {
    // Its own object names: groups sharing a cluster do not overwrite each other's objects.
    let own = json!({"overrideValues": [{"app": "app01", "values": {"group": name}}]});
    let dig = create_group(rest, name, own).await;
    rest.create(
        &format!("{dig}/generic-placement-intents/gpi/app-intents"),
        &json!({"metadata": {"name": "ai"}, "spec": {"app": "app01",
            "intent": {"allOf": [{"clusterProvider": "kp", "cluster": format!("c{cluster}")}]}}}),
    )
    .await;
    rest.expect(202, "POST", &format!("{dig}/approve"), None)
        .await;
}

/// Asks every group of `names` for its status until each is Instantiated with its object
/// Applied, 16 at a time; the groups asked on the first sweep that had not got there.
async fn until_all_applied(rest: &Rest, names: &[String]) -> usize {
    let mut pending: Vec<String> = names.to_vec();
    let mut first = None;
    let deadline = Instant::now() + DEADLINE;
    while !pending.is_empty() {
        let done: Vec<bool> = futures::stream::iter(&pending)
            .map(|name| async move {
                let dig = format!("{CA}/deployment-intent-groups/{name}");
                let (s, _) = rest.status_of(&dig, "status=deployed&output=summary").await;
                s["deployedStatus"] == "Instantiated" && count(&s, "deployedCounts", "Applied") == 1
            })
            .buffered(REST_CONCURRENCY)
            .collect()
            .await;
        let mut done = done.into_iter();
        pending.retain(|_| !done.next().unwrap_or(false));
        first.get_or_insert(pending.len());
        assert!(Instant::now() < deadline, "not applied: {pending:?}");
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    first.unwrap_or(0)
}

/// One group's onboarding in the many-contexts run: its five onboarding calls, its instantiate
/// call, and when the last answered.
struct GroupTiming {
    onboard: Duration,
    instantiate: Duration,
    done: Instant,
}

/// Rows for whether onboarding slows as groups accumulate: for the first 100 groups to finish,
/// those up to the 1,000th and the last 1,000, the rate they finished at and the mean time of
/// their onboarding calls and of their instantiate.
fn onboarding_windows(t: &mut Table, start: Instant, timings: &[GroupTiming]) {
    let n = timings.len();
    let mut windows = vec![(0, n.min(100))];
    if n > 100 {
        windows.push((100, n.min(1000)));
    }
    if n > 1000 {
        windows.push((n.saturating_sub(1000).max(1000), n));
    }
    for (from, to) in windows {
        let since = if from == 0 {
            start
        } else {
            timings[from - 1].done
        };
        let wall = (timings[to - 1].done - since).as_secs_f64();
        let mean = |f: fn(&GroupTiming) -> Duration| {
            timings[from..to]
                .iter()
                .map(f)
                .sum::<Duration>()
                .as_secs_f64()
                * 1e3
                / (to - from) as f64
        };
        t.row(
            &format!(
                "groups {}-{to} finished: rate; mean onboarding (5 calls) / instantiate call",
                from + 1
            ),
            format!(
                "{:.0} groups/s; {:.1} ms / {:.1} ms",
                (to - from) as f64 / wall,
                mean(|g| g.onboard),
                mean(|g| g.instantiate)
            ),
        );
    }
}

/// What the readiness followers did, per group, from the server's `/metrics` text
/// (`emco_rsync_readiness_wakeups_total{reason}`, `emco_rsync_readiness_records_total`).
fn follower_work(metrics: &str, groups: usize) -> String {
    let per = |v: f64| v / groups as f64;
    let mut looks = Vec::new();
    let mut records = 0.0;
    for line in metrics.lines() {
        let Some((name, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(0.0);
        if let Some(reason) = name
            .strip_prefix("emco_rsync_readiness_wakeups_total{reason=\"")
            .and_then(|r| r.strip_suffix("\"}"))
        {
            looks.push(format!("{reason} {:.2}", per(value)));
        } else if name == "emco_rsync_readiness_records_total" {
            records = value;
        }
    }
    format!("{}; {:.2}", looks.join(", "), per(records))
}

/// The many-contexts run: `p.contexts` deployment intent groups, each one single-object app on
/// one of `p.clusters` clusters, instantiated and followed to Applied; the server killed
/// (SIGKILL) and started again with all of them deployed (the time to ready, to the first
/// status answer, to an answer from every group); then `p.active` more instantiated while
/// kubesim is stopped (SIGSTOP: every apply waits), the server killed with all of them active,
/// kubesim continued and the server started again: the time until every one of them is Applied.
#[allow(clippy::too_many_lines)] // One run, step by step, reads best in one place.
async fn contexts(p: &Params) -> String {
    let work = tempfile::tempdir().unwrap();
    let kubeconfigs = work.path().join("kubeconfigs");
    std::fs::create_dir_all(&kubeconfigs).unwrap();
    let (n, m) = (p.contexts, p.active);
    let mut t = Table(String::new());
    writeln!(
        t.0,
        "# Many contexts: {n} deployed, {m} active, over {} clusters\n\n\
         emco-server (release, embedded store, defaults) and kubesim (release, TLS, one shared \
         port) as separate processes with this driver on the same 2-core machine; all calls over \
         REST, 16 at a time. Each deployment intent group places one app of one Deployment (named for the group) on one \
         cluster, so each has its own AppContext. Command: `EMCO_FLEET_CONTEXTS={n} \
         EMCO_FLEET_ACTIVE={m} EMCO_FLEET_CLUSTERS={} bash scripts/bench-fleet.sh`.\n\n\
         | measure | value |\n|---|---|",
        p.clusters, p.clusters,
    )
    .unwrap();
    let kubesim = spawn_kubesim(p, &kubeconfigs);
    let kubesim_pid = kubesim.0.id();
    let data = work.path().join("data");
    let (listen, grpc) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let mut server = spawn_server(p, &data, &listen, &grpc);
    let rest = Rest::to(&listen);
    ready(&rest).await;
    register(&rest, p, &kubeconfigs).await;
    create_app(&rest).await;
    let packed = chart(&work.path().join("charts"), "app01", p, 1);
    rest.upload(
        "POST",
        201,
        &format!("{CA}/apps"),
        &json!({"metadata": {"name": "app01"}}),
        &packed,
    )
    .await;
    rest.upload(
        "POST",
        201,
        &format!("{CA}/composite-profiles/cp/profiles"),
        &json!({"metadata": {"name": "pr"}, "spec": {"app": "app01"}}),
        &profile(work.path(), "v1"),
    )
    .await;

    // The deployed ones: onboarded and instantiated, then followed to Applied.
    let names: Vec<String> = (1..=n).map(|i| format!("d{i}")).collect();
    let start = Instant::now();
    let timings = std::sync::Mutex::new(Vec::with_capacity(n));
    futures::stream::iter(names.iter().enumerate())
        .for_each_concurrent(REST_CONCURRENCY, |(i, name)| {
            let (rest, timings) = (&rest, &timings);
            async move {
                let began = Instant::now();
                onboard_group(rest, name, i % p.clusters + 1).await;
                let onboarded = began.elapsed();
                let dig = format!("{CA}/deployment-intent-groups/{name}");
                rest.expect(202, "POST", &format!("{dig}/instantiate"), None)
                    .await;
                let done = Instant::now();
                timings.lock().unwrap().push(GroupTiming {
                    onboard: onboarded,
                    instantiate: done - began - onboarded,
                    done,
                });
            }
        })
        .await;
    let onboarded = start.elapsed();
    let mut timings = timings.into_inner().unwrap();
    timings.sort_by_key(|g| g.done);
    onboarding_windows(&mut t, start, &timings);
    until_all_applied(&rest, &names).await;
    let applied = start.elapsed();
    t.row(
        &format!("{n} groups onboarded and instantiated (6 calls each)"),
        format!(
            "{:.1} s, {:.0} groups/s",
            onboarded.as_secs_f64(),
            n as f64 / onboarded.as_secs_f64()
        ),
    );
    t.row(
        &format!("all {n} Applied, from the first call"),
        format!("{:.1} s", applied.as_secs_f64()),
    );
    let (_, metrics) = rest.call("GET", "/metrics", None).await;
    t.row(
        "readiness followers, per group: looks by what woke them; statuses they wrote",
        follower_work(&metrics, n),
    );
    let (rss, hwm) = memory(server.0.id());
    t.row(
        "server RSS / VmHWM with all deployed",
        format!("{:.0} MiB / {:.0} MiB", mib(rss), mib(hwm)),
    );

    // Killed with every context deployed: how soon the server answers again.
    drop(server.0.kill());
    drop(server.0.wait());
    let restarted = Instant::now();
    server = spawn_server(p, &data, &listen, &grpc);
    let up = ready(&rest).await;
    let last = format!("{CA}/deployment-intent-groups/{}", names[n - 1]);
    rest.status_of(&last, "status=deployed&output=summary")
        .await;
    let first = restarted.elapsed();
    let behind = until_all_applied(&rest, &names).await;
    assert_eq!(behind, 0, "deployed groups lost their state");
    t.row(
        &format!(
            "restart after SIGKILL with {n} deployed: ready / first status / every group answered"
        ),
        format!(
            "{:.2} s / {:.2} s / {:.2} s",
            up.as_secs_f64(),
            first.as_secs_f64(),
            restarted.elapsed().as_secs_f64()
        ),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss, _) = memory(server.0.id());
    t.row(
        "server RSS 5 s after every group answered (readiness followed again)",
        format!("{:.0} MiB", mib(rss)),
    );

    // Active ones: instantiated while no cluster answers, the server killed meanwhile.
    let active: Vec<String> = (1..=m).map(|i| format!("a{i}")).collect();
    futures::stream::iter(active.iter().enumerate())
        .for_each_concurrent(REST_CONCURRENCY, |(i, name)| {
            let rest = &rest;
            async move { onboard_group(rest, name, i % p.clusters + 1).await }
        })
        .await;
    signal(kubesim_pid, "STOP");
    futures::stream::iter(&active)
        .for_each_concurrent(REST_CONCURRENCY, |name| {
            let rest = &rest;
            async move {
                let dig = format!("{CA}/deployment-intent-groups/{name}");
                rest.expect(202, "POST", &format!("{dig}/instantiate"), None)
                    .await;
            }
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(server.0.kill());
    drop(server.0.wait());
    signal(kubesim_pid, "CONT");
    let restarted = Instant::now();
    server = spawn_server(p, &data, &listen, &grpc);
    let up = ready(&rest).await;
    let behind = until_all_applied(&rest, &active).await;
    let resumed = restarted.elapsed();
    t.row(
        &format!("restart after SIGKILL with {m} active (none applied): ready / all {m} Applied"),
        format!("{:.2} s / {:.2} s", up.as_secs_f64(), resumed.as_secs_f64()),
    );
    t.row(
        "of them not yet Applied at the first sweep after the restart",
        behind,
    );
    let (_, hwm) = memory(server.0.id());
    t.row(
        "server VmHWM of the last process",
        format!("{:.0} MiB", mib(hwm)),
    );
    drop(server);
    drop(kubesim);
    t.0
}

fn main() {
    let p = Params::from_env();
    for bin in ["kubesim", "emco-server"] {
        assert!(
            p.bin_dir.join(bin).exists(),
            "{} missing: cargo build --release -p emco-server -p kubesim",
            p.bin_dir.join(bin).display()
        );
    }
    let (_, (soft, _)) = emco_runtime::os::raise_open_files_limit();
    eprintln!("open files limit: {soft:?}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (report, name) = if p.contexts > 0 {
        let name = format!("fleet-contexts-{}x{}", p.contexts, p.active);
        (runtime.block_on(contexts(&p)), name)
    } else {
        let mix = if p.mix { "-mix" } else { "" };
        let name = format!("fleet-{}x{}{mix}", p.clusters, p.apps * p.objects);
        (runtime.block_on(bench(&p)), name)
    };
    print!("{report}");
    let out = emco_e2e::workspace().join("bench-results");
    std::fs::create_dir_all(&out).unwrap();
    // A profiled run's figures are not the benchmark's: they go beside them.
    let profiled = p
        .wrapper
        .as_ref()
        .or(p.kubesim_wrapper.as_ref())
        .map_or_else(String::new, |w| {
            let tool = Path::new(w)
                .file_name()
                .map_or_else(|| w.clone(), |n| n.to_string_lossy().into_owned());
            format!("-{tool}")
        });
    std::fs::write(out.join(format!("{name}{profiled}.txt")), report).unwrap();
}
