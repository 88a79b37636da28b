//! The command line: parsing, and running a command to an exit code.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use emco_core::model::status::StatusQuery;

use emco_client::client::{Client, TlsOptions};
use emco_client::document::{
    Document, STDIN, expand_paths, load, load_text, load_values, load_values_files,
};
use emco_client::error::{CtlError, EXIT_BAD_INPUT, EXIT_OK, EXIT_REQUEST_FAILED, Result};
use emco_client::ops::{self, Command, Options, Output};
use emco_client::status::{self, Ending, WatchOptions};

const EXAMPLES: &str = "\
Examples:
  emcoctl apply -f prerequisites.yaml -v values.yaml
  emcoctl apply -f dir/ -f app.yaml -v values.yaml -v site.yaml -s -w 5
  generate-docs | emcoctl apply -f -
  emcoctl get -f prerequisites.yaml -v values.yaml -o json
  emcoctl status -f instantiate.yaml -v values.yaml --status deployed --output summary
  emcoctl watch -f instantiate.yaml -v values.yaml --timeout 300
  emcoctl delete -f prerequisites.yaml -f app.yaml -f instantiate.yaml -v values.yaml
  emcoctl --server https://emco:9015 --ca-cert ca.pem -t $TOKEN update -f app.yaml
  emcoctl template ./chart -f chart-values.yaml
  emcoctl completion bash > /etc/bash_completion.d/emcoctl

Server address: --server, else $EMCO_SERVER, else the config file (--config, default
~/.emco.yaml, EMCO's shape: `orchestrator: {host, port}`), else http://127.0.0.1:9015.
https:// servers are verified against the system's CA certificates, or --ca-cert's.

Values: each -v file is merged into the ones before it (maps key by key, later files win), and
every input file is rendered as one Go template with the result as dot.

Waiting: delete walks the documents in reverse, so an instantiate document (sent as
terminate) comes before the deletion of its deployment intent group or logical cloud. EMCO
refuses that deletion while the terminate runs, so delete waits for the terminate to finish
(its status route says Terminated) before going on: at most -w seconds when -w is given, else
at most 120 s. With -w, apply also waits after an accepted instantiate, update, rollback or
migrate until its AppContext settles (at most -w seconds; readiness is watch's job); other
accepted requests sleep -w seconds as EMCO's emcoctl does.

Exit codes: 0 every request succeeded (watch: every target settled successfully); 1 a request
failed (error status, unreachable server, failed or timed-out operation); 2 bad input file,
values file, config or usage (nothing was sent).";

/// emcoctl's command line.
#[derive(Parser, Debug)]
#[command(
    name = "emcoctl",
    version,
    about = "The EMCO command-line client: apply, get, update, delete and watch emcoctl YAML files",
    after_help = EXAMPLES
)]
pub struct Cli {
    /// The server URL (http:// or https://host:port); else $EMCO_SERVER, else the config file.
    #[arg(long, global = true)]
    pub server: Option<String>,
    /// The config file (EMCO's `~/.emco.yaml` shape).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// A PEM file of CA certificates to verify an https server with (instead of the system's).
    #[arg(long, global = true)]
    pub ca_cert: Option<PathBuf>,
    /// Do not verify the https server's certificate (the connection is still encrypted).
    #[arg(long, global = true)]
    pub insecure: bool,
    /// The command.
    #[command(subcommand)]
    pub command: Sub,
}

/// A subcommand.
#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Create every resource of the files, in order (POST).
    Apply(DocArgs),
    /// Delete every resource of the files, in reverse order (instantiate becomes terminate,
    /// waited for before the deletes that follow it).
    Delete(DocArgs),
    /// Read every resource of the files (GET).
    Get(DocArgs),
    /// Replace every resource of the files (PUT).
    Update(DocArgs),
    /// Print the status of the deployment intent groups and logical clouds that the files'
    /// lifecycle documents (instantiate, ...) operate on.
    Status(StatusArgs),
    /// Follow the operations of the files' lifecycle documents until each settles:
    /// instantiated (or updated) and ready, terminated, or failed.
    Watch(WatchArgs),
    /// The rollouts in waves of the deployment intent groups the files' lifecycle documents
    /// name: status (the waves), watch (a line per change until it ends), approve, pause,
    /// resume, abort.
    Rollout(RolloutArgs),
    /// Preview what the files' instantiate and update documents would change on the clusters,
    /// writing nothing: the placement per app and a unified diff per object, clusters with the
    /// same changes together. Exit 0 when nothing would change, 1 when something would, 2 for
    /// bad input and 3 when a preview failed (the server's answer is printed) or, with
    /// --dry-run, a cluster refused an object.
    Diff(DiffArgs),
    /// Render a Helm chart like `helm template`.
    Template(TemplateArgs),
    /// Print a shell completion script.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// The input files of every command that reads emcoctl files.
#[derive(clap::Args, Debug)]
pub struct InputArgs {
    /// An emcoctl YAML file, a directory of them, or `-` for standard input (repeatable).
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// A values file (repeatable, later files win): each input file is rendered as a Go
    /// template with the merged values as dot.
    #[arg(short = 'v', long = "values")]
    pub values: Vec<PathBuf>,
    /// A bearer token for the Authorization header.
    #[arg(short = 't', long = "token")]
    pub token: Option<String>,
}

/// The options of the document commands.
#[derive(clap::Args, Debug)]
pub struct DocArgs {
    /// The input files.
    #[command(flatten)]
    pub input: InputArgs,
    /// Stop at the first failed request.
    #[arg(short = 's', long = "stop-on-failure")]
    pub stop: bool,
    /// Seconds to wait after a 202 Accepted: until the operation settles when it has a status
    /// route, else this long (see "Waiting" below).
    #[arg(short = 'w', long = "wait", default_value_t = 0)]
    pub wait: u64,
    /// The output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputArg::Table)]
    pub output: OutputArg,
}

/// `--output`.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum OutputArg {
    /// Result lines, or a table for get.
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `status --status`.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum StatusTypeArg {
    /// Whether the resources are ready on the clusters (the default).
    Ready,
    /// What rsync did: applied, failed, retrying.
    Deployed,
}

/// `status --output`: a format and, separately, how much the server returns.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutputArg {
    /// A heading and one row per app and cluster (the default format).
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// Only the overall status and counts.
    Summary,
    /// Every resource's status (the default).
    All,
    /// Every resource's status with its detail from the cluster.
    Detail,
}

/// The options of `status`.
#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The input files.
    #[command(flatten)]
    pub input: InputArgs,
    /// The output: a format (table, json, yaml) and/or EMCO's `output` query (summary, all,
    /// detail); give both as `-o summary -o json`.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Vec<StatusOutputArg>,
    /// EMCO's `status` query: ready (default) or deployed.
    #[arg(long, value_enum)]
    pub status: Option<StatusTypeArg>,
    /// The AppContext to report on (default: the current one).
    #[arg(long)]
    pub instance: Option<String>,
    /// Only this app (repeatable).
    #[arg(long)]
    pub app: Vec<String>,
    /// Only this cluster, `provider+cluster` (repeatable).
    #[arg(long)]
    pub cluster: Vec<String>,
    /// Only this resource (repeatable).
    #[arg(long)]
    pub resource: Vec<String>,
    /// List the apps only.
    #[arg(long)]
    pub apps: bool,
    /// List the clusters of each app only.
    #[arg(long)]
    pub clusters: bool,
    /// List the resources of each app and cluster only.
    #[arg(long)]
    pub resources: bool,
}

/// The options of `watch`.
#[derive(clap::Args, Debug)]
pub struct WatchArgs {
    /// The input files.
    #[command(flatten)]
    pub input: InputArgs,
    /// Give up (exit 1) after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Seconds between two polls.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// Progress lines (table), or one JSON line / YAML document per change and per ending.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputArg::Table)]
    pub output: OutputArg,
}

/// The options of `diff`.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The input files.
    #[command(flatten)]
    pub input: InputArgs,
    /// Have each cluster check the objects it would get created or changed, changing nothing
    /// (a server-side dry run, as `kubectl diff` does).
    #[arg(long)]
    pub dry_run: bool,
    /// The diffs as text (table), or the previews as JSON / YAML.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputArg::Table)]
    pub output: OutputArg,
}

/// The options of `rollout`.
#[derive(clap::Args, Debug)]
pub struct RolloutArgs {
    /// What to do.
    #[arg(value_enum)]
    pub action: crate::rollout::Action,
    /// The input files.
    #[command(flatten)]
    pub input: InputArgs,
    /// watch: give up (exit 1) after this many seconds.
    #[arg(long, default_value_t = 3600.0)]
    pub timeout: f64,
    /// watch: seconds between two polls.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// A table (status), progress lines (watch), or JSON / YAML.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = OutputArg::Table)]
    pub output: OutputArg,
}

/// The options of `template`.
#[derive(clap::Args, Debug)]
pub struct TemplateArgs {
    /// A chart directory or a packaged chart (.tgz).
    pub chart: PathBuf,
    /// The release name.
    #[arg(long, default_value = "release-name")]
    pub release: String,
    /// The release namespace.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Values files, later ones winning.
    #[arg(long = "values", short = 'f')]
    pub values: Vec<PathBuf>,
    /// Values on the command line (`a.b=c,d=e`).
    #[arg(long)]
    pub set: Vec<String>,
}

/// Loads every document of `files` (expanded), rendered with the values file when given.
///
/// # Errors
/// The first input error, naming the file, document and line.
pub fn load_documents(files: &[PathBuf], values: Option<&Path>) -> Result<Vec<Document>> {
    let values: Vec<PathBuf> = values.into_iter().map(Path::to_owned).collect();
    load_inputs(files, &values, &mut std::io::empty())
}

/// Loads every document of `files` (expanded; `-` reads `stdin`, once), rendered with the
/// merged values files when any are given.
///
/// # Errors
/// The first input error, naming the file, document and line; a usage error for `-` given
/// twice.
pub fn load_inputs(
    files: &[PathBuf],
    values: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<Vec<Document>> {
    let values = load_values_files(values)?;
    let mut docs = Vec::new();
    let mut stdin_read = false;
    for file in files {
        if file.as_os_str() == "-" {
            if std::mem::replace(&mut stdin_read, true) {
                return Err(CtlError::Usage("-f - can be given once".to_owned()));
            }
            let mut text = String::new();
            stdin
                .read_to_string(&mut text)
                .map_err(|e| CtlError::input(STDIN, None, None, format!("cannot read: {e}")))?;
            docs.extend(load_text(Path::new(STDIN), text, values.as_ref())?);
            continue;
        }
        for path in expand_paths(std::slice::from_ref(file))? {
            docs.extend(load(&path, values.as_ref())?);
        }
    }
    Ok(docs)
}

/// Runs emcoctl with `args` (the program name first), reading `-f -` from the process's
/// standard input and printing to `out` and `err`; returns the exit code.
pub async fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    run_with_stdin(args, &mut std::io::stdin(), out, err).await
}

/// [`run`] with `stdin` as standard input.
pub async fn run_with_stdin<I, T>(
    args: I,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                EXIT_BAD_INPUT
            } else {
                EXIT_OK
            };
            let text = e.render().to_string();
            let _ = if e.use_stderr() {
                err.write_all(text.as_bytes())
            } else {
                out.write_all(text.as_bytes())
            };
            return code;
        }
    };
    match execute(cli, stdin, out, err).await {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            e.exit_code()
        }
    }
}

async fn execute(
    cli: Cli,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    let cmd = match &cli.command {
        Sub::Apply(a) => (Command::Apply, a),
        Sub::Delete(a) => (Command::Delete, a),
        Sub::Get(a) => (Command::Get, a),
        Sub::Update(a) => (Command::Update, a),
        Sub::Status(a) => return status_command(&cli, a, stdin, out).await,
        Sub::Watch(a) => return watch_command(&cli, a, stdin, out).await,
        Sub::Rollout(a) => return rollout_command(&cli, a, stdin, out).await,
        Sub::Diff(a) => return diff_command(&cli, a, stdin, out, err).await,
        Sub::Template(a) => {
            let text = template(a)?;
            out.write_all(text.as_bytes()).map_err(CtlError::write)?;
            return Ok(EXIT_OK);
        }
        Sub::Completion { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "emcoctl", out);
            return Ok(EXIT_OK);
        }
    };
    let (cmd, args) = cmd;
    let (client, docs) = connect(&cli, &args.input, stdin)?;
    let opts = Options {
        stop_on_failure: args.stop,
        wait: Duration::from_secs(args.wait),
        output: output_of(args.output),
    };
    // With --output json|yaml, stdout holds only the data; failures go to stderr.
    let outcomes = if opts.output == Output::Table && cmd != Command::Get {
        ops::run(&client, cmd, &docs, &opts, out).await?
    } else {
        ops::run(&client, cmd, &docs, &opts, err).await?
    };
    ops::print(cmd, &outcomes, opts.output, out)?;
    Ok(if outcomes.iter().all(ops::Outcome::ok) {
        EXIT_OK
    } else {
        EXIT_REQUEST_FAILED
    })
}

/// The client for the server the command line names, and the loaded input documents.
fn connect(cli: &Cli, input: &InputArgs, stdin: &mut dyn Read) -> Result<(Client, Vec<Document>)> {
    let config = cli
        .config
        .clone()
        .or_else(crate::config::default_config_path);
    let env = std::env::var("EMCO_SERVER").ok();
    let server = crate::config::server(
        cli.server.as_deref(),
        env.as_deref(),
        config.as_deref(),
        cli.config.is_some(),
    )?;
    let tls = TlsOptions {
        ca_cert: cli.ca_cert.clone(),
        insecure: cli.insecure,
    };
    let client = Client::with_tls(&server, input.token.clone(), &tls)?;
    let docs = load_inputs(&input.files, &input.values, stdin)?;
    Ok((client, docs))
}

/// The status targets of `docs`; a usage error when there is none.
fn targets_of(docs: &[Document]) -> Result<Vec<status::Target>> {
    let targets = status::targets(docs);
    if targets.is_empty() {
        return Err(CtlError::Usage(
            "no lifecycle document (an anchor ending in instantiate, terminate, ...) in the files"
                .to_owned(),
        ));
    }
    Ok(targets)
}

async fn status_command(
    cli: &Cli,
    args: &StatusArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<i32> {
    let mut format = None;
    let mut level = None;
    for o in &args.output {
        let (slot, value) = match o {
            StatusOutputArg::Table => (&mut format, "table"),
            StatusOutputArg::Json => (&mut format, "json"),
            StatusOutputArg::Yaml => (&mut format, "yaml"),
            StatusOutputArg::Summary => (&mut level, "summary"),
            StatusOutputArg::All => (&mut level, "all"),
            StatusOutputArg::Detail => (&mut level, "detail"),
        };
        if slot.replace(value).is_some() {
            return Err(CtlError::Usage(
                "--output: give at most one format (table, json, yaml) and one level (summary, all, detail)"
                    .to_owned(),
            ));
        }
    }
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(i) = &args.instance {
        pairs.push(("instance", i.clone()));
    }
    if let Some(s) = args.status {
        let s = match s {
            StatusTypeArg::Ready => "ready",
            StatusTypeArg::Deployed => "deployed",
        };
        pairs.push(("status", s.to_owned()));
    }
    if let Some(level) = level {
        pairs.push(("output", level.to_owned()));
    }
    pairs.extend(args.app.iter().map(|a| ("app", a.clone())));
    pairs.extend(args.cluster.iter().map(|c| ("cluster", c.clone())));
    pairs.extend(args.resource.iter().map(|r| ("resource", r.clone())));
    for (on, mode) in [
        (args.apps, "apps"),
        (args.clusters, "clusters"),
        (args.resources, "resources"),
    ] {
        if on {
            pairs.push((mode, String::new()));
        }
    }
    // The server's own parser: what it would refuse is refused here, before anything is sent.
    let query = StatusQuery::from_pairs(pairs).map_err(|e| CtlError::Usage(e.to_string()))?;
    let (client, docs) = connect(cli, &args.input, stdin)?;
    let targets = targets_of(&docs)?;
    let mut answers = Vec::with_capacity(targets.len());
    for target in &targets {
        answers.push(status::query(&client, target, &query).await);
    }
    let output = match format {
        Some("json") => Output::Json,
        Some("yaml") => Output::Yaml,
        _ => Output::Table,
    };
    status::print(&answers, output, out)?;
    Ok(if answers.iter().all(|a| a.status.is_ok()) {
        EXIT_OK
    } else {
        EXIT_REQUEST_FAILED
    })
}

async fn watch_command(
    cli: &Cli,
    args: &WatchArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<i32> {
    let opts = WatchOptions {
        timeout: seconds("timeout", args.timeout)?,
        interval: seconds("interval", args.interval)?,
        output: output_of(args.output),
    };
    let (client, docs) = connect(cli, &args.input, stdin)?;
    let targets = targets_of(&docs)?;
    let endings = status::watch(&client, &targets, &opts, out).await?;
    Ok(if endings.iter().all(|e| *e == Ending::Succeeded) {
        EXIT_OK
    } else {
        EXIT_REQUEST_FAILED
    })
}

/// A positive number of seconds, for option `--name`.
fn seconds(name: &str, v: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| {
            CtlError::Usage(format!("--{name}: {v} is not a positive number of seconds"))
        })
}

/// The deployment intent groups among `targets`.
///
/// # Errors
/// A usage error when there is none.
fn groups_of(targets: &[status::Target]) -> Result<Vec<&status::Target>> {
    let groups = crate::rollout::groups(targets);
    if groups.is_empty() {
        return Err(CtlError::Usage(
            "no deployment intent group among the files' lifecycle documents".to_owned(),
        ));
    }
    Ok(groups)
}

/// Writes `text` to `out`.
///
/// # Errors
/// A request error when it cannot be written.
fn write(out: &mut dyn Write, text: &str) -> Result<()> {
    out.write_all(text.as_bytes()).map_err(CtlError::write)
}

async fn rollout_command(
    cli: &Cli,
    args: &RolloutArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<i32> {
    use crate::rollout::{self, Action};
    let (timeout, interval) = (
        seconds("timeout", args.timeout)?,
        seconds("interval", args.interval)?,
    );
    let (client, docs) = connect(cli, &args.input, stdin)?;
    let targets = targets_of(&docs)?;
    let groups = groups_of(&targets)?;
    let output = output_of(args.output);
    let mut ok = true;
    match args.action {
        Action::Watch => {
            ok = rollout::watch(&client, &groups, interval, timeout, output, out).await?;
        }
        Action::Status => {
            let mut runs = Vec::new();
            for t in &groups {
                match rollout::get(&client, t).await {
                    Ok(run) => runs.push((*t, run)),
                    Err(e) => {
                        ok = false;
                        write(out, &format!("{e}\n"))?;
                    }
                }
            }
            match output {
                Output::Table => {
                    for (t, run) in &runs {
                        write(out, &rollout::table(t, run))?;
                    }
                }
                Output::Json | Output::Yaml => {
                    let all = serde_json::to_value(runs.iter().map(|(_, r)| r).collect::<Vec<_>>())
                        .map_err(|e| CtlError::Request(e.to_string()))?;
                    write(out, &ops::render(&all, output)?)?;
                }
            }
        }
        action => {
            let name = action.control().unwrap_or_default();
            for t in &groups {
                match rollout::control(&client, t, name).await {
                    Ok(line) => write(out, &format!("{line}\n"))?,
                    Err(e) => {
                        ok = false;
                        write(out, &format!("{e}\n"))?;
                    }
                }
            }
        }
    }
    Ok(if ok { EXIT_OK } else { EXIT_REQUEST_FAILED })
}

async fn diff_command(
    cli: &Cli,
    args: &DiffArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<i32> {
    use crate::diff;
    let (client, docs) = connect(cli, &args.input, stdin)?;
    let targets = targets_of(&docs)?;
    let groups = groups_of(&targets)?;
    let output = output_of(args.output);
    let (mut failed, mut changes) = (false, false);
    let mut previews = Vec::new();
    for t in &groups {
        match diff::get(&client, t, args.dry_run).await {
            Ok(p) => {
                changes |= p.changes_anything();
                failed |= p.dry_run.as_ref().is_some_and(|d| !d.refusals.is_empty());
                if output == Output::Table {
                    write(out, &diff::text(t, &p))?;
                }
                previews.push(p);
            }
            Err(e) => {
                failed = true;
                write(err, &format!("{e}\n"))?;
            }
        }
    }
    if output != Output::Table {
        let all = serde_json::to_value(&previews).map_err(|e| CtlError::Request(e.to_string()))?;
        write(out, &ops::render(&all, output)?)?;
    }
    Ok(if failed {
        diff::EXIT_FAILED
    } else if changes {
        diff::EXIT_CHANGES
    } else {
        diff::EXIT_SAME
    })
}

fn output_of(o: OutputArg) -> Output {
    match o {
        OutputArg::Table => Output::Table,
        OutputArg::Json => Output::Json,
        OutputArg::Yaml => Output::Yaml,
    }
}

/// Renders a chart as `helm template` does.
///
/// # Errors
/// An input error for an unreadable chart or values file, or a failed render.
pub fn template(args: &TemplateArgs) -> Result<String> {
    let chart_error =
        |e: &dyn std::fmt::Display| CtlError::input(&args.chart, None, None, e.to_string());
    let chart = if args.chart.is_dir() {
        emco_helm::Chart::load_dir(&args.chart).map_err(|e| chart_error(&e))?
    } else {
        let bytes = std::fs::read(&args.chart).map_err(|e| chart_error(&e))?;
        emco_helm::Chart::load_tgz(&bytes).map_err(|e| chart_error(&e))?
    };
    let values = args
        .values
        .iter()
        .map(|v| load_values(v))
        .collect::<Result<Vec<_>>>()?;
    let opts = emco_helm::RenderOptions {
        release_name: args.release.clone(),
        namespace: args.namespace.clone(),
        values,
        set: args.set.clone(),
        ..emco_helm::RenderOptions::default()
    };
    emco_helm::render(&chart, &opts)
        .and_then(|r| r.to_helm_output(&opts))
        .map_err(|e| chart_error(&e))
}
