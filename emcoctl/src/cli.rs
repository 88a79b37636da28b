//! The command line: parsing, and running a command to an exit code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use crate::client::Client;
use crate::document::{Document, expand_paths, load, load_values};
use crate::error::{CtlError, EXIT_BAD_INPUT, EXIT_OK, EXIT_REQUEST_FAILED, Result};
use crate::ops::{self, Command, Options, Output};

const EXAMPLES: &str = "\
Examples:
  emcoctl apply -f prerequisites.yaml -v values.yaml
  emcoctl apply -f dir/ -f app.yaml -v values.yaml -s -w 5
  emcoctl get -f prerequisites.yaml -v values.yaml -o json
  emcoctl delete -f prerequisites.yaml -v values.yaml
  emcoctl --server http://emco:9015 -t $TOKEN update -f app.yaml
  emcoctl template ./chart -f chart-values.yaml
  emcoctl completion bash > /etc/bash_completion.d/emcoctl

Server address: --server, else $EMCO_SERVER, else the config file (--config, default
~/.emco.yaml, EMCO's shape: `orchestrator: {host, port}`), else http://127.0.0.1:9015.

Exit codes: 0 every request succeeded; 1 a request failed (error status or unreachable
server); 2 bad input file, values file, config or usage (nothing was sent).";

/// emcoctl's command line.
#[derive(Parser, Debug)]
#[command(
    name = "emcoctl",
    version,
    about = "The EMCO command-line client: apply, get, update and delete emcoctl YAML files",
    after_help = EXAMPLES
)]
pub struct Cli {
    /// The server URL (http://host:port); else $EMCO_SERVER, else the config file.
    #[arg(long, global = true)]
    pub server: Option<String>,
    /// The config file (EMCO's `~/.emco.yaml` shape).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// The command.
    #[command(subcommand)]
    pub command: Sub,
}

/// A subcommand.
#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Create every resource of the files, in order (POST).
    Apply(DocArgs),
    /// Delete every resource of the files, in reverse order (instantiate becomes terminate).
    Delete(DocArgs),
    /// Read every resource of the files (GET).
    Get(DocArgs),
    /// Replace every resource of the files (PUT).
    Update(DocArgs),
    /// Render a Helm chart like `helm template`.
    Template(TemplateArgs),
    /// Print a shell completion script.
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// The options of the document commands.
#[derive(clap::Args, Debug)]
pub struct DocArgs {
    /// An emcoctl YAML file or a directory of them (repeatable).
    #[arg(short = 'f', long = "file", required = true)]
    pub files: Vec<PathBuf>,
    /// A values file: each file is rendered as a Go template with these values as dot.
    #[arg(short = 'v', long = "values")]
    pub values: Option<PathBuf>,
    /// A bearer token for the Authorization header.
    #[arg(short = 't', long = "token")]
    pub token: Option<String>,
    /// Stop at the first failed request.
    #[arg(short = 's', long = "stop-on-failure")]
    pub stop: bool,
    /// Seconds to wait after a 202 Accepted.
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
    let values = values.map(load_values).transpose()?;
    let mut docs = Vec::new();
    for file in expand_paths(files)? {
        docs.extend(load(&file, values.as_ref())?);
    }
    Ok(docs)
}

/// Runs emcoctl with `args` (the program name first), printing to `out` and `err`; returns the
/// exit code.
pub async fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
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
    match execute(cli, out, err).await {
        Ok(code) => code,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            e.exit_code()
        }
    }
}

async fn execute(cli: Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32> {
    let cmd = match cli.command {
        Sub::Apply(a) => (Command::Apply, a),
        Sub::Delete(a) => (Command::Delete, a),
        Sub::Get(a) => (Command::Get, a),
        Sub::Update(a) => (Command::Update, a),
        Sub::Template(a) => {
            let text = template(&a)?;
            out.write_all(text.as_bytes())
                .map_err(|e| CtlError::Request(format!("cannot write the output: {e}")))?;
            return Ok(EXIT_OK);
        }
        Sub::Completion { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "emcoctl", out);
            return Ok(EXIT_OK);
        }
    };
    let (cmd, args) = cmd;
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
    let client = Client::new(&server, args.token.clone())?;
    let docs = load_documents(&args.files, args.values.as_deref())?;
    let opts = Options {
        stop_on_failure: args.stop,
        wait: Duration::from_secs(args.wait),
        output: match args.output {
            OutputArg::Table => Output::Table,
            OutputArg::Json => Output::Json,
            OutputArg::Yaml => Output::Yaml,
        },
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
