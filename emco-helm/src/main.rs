//! `emco-helm template CHART ...`: prints what `helm template` prints for a chart directory or
//! archive, without a helm binary.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use emco_helm::{Chart, HelmCompat, RenderOptions, Value, render, yaml};

#[derive(Parser, Debug)]
#[command(
    name = "emco-helm",
    version,
    about = "Render Helm charts like `helm template`"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Render a chart's templates and print the manifests.
    Template(TemplateArgs),
}

#[derive(clap::Args, Debug)]
struct TemplateArgs {
    /// A chart directory or a packaged chart (.tgz).
    chart: PathBuf,
    /// The release name.
    #[arg(long, default_value = "release-name")]
    release: String,
    /// The release namespace.
    #[arg(long, short = 'n', default_value = "default")]
    namespace: String,
    /// Values files, later ones winning.
    #[arg(long = "values", short = 'f')]
    values: Vec<PathBuf>,
    /// Values on the command line (`a.b=c,d=e`).
    #[arg(long)]
    set: Vec<String>,
    /// Values on the command line, always strings.
    #[arg(long = "set-string")]
    set_string: Vec<String>,
    /// The Kubernetes version for `.Capabilities.KubeVersion`.
    #[arg(long = "kube-version")]
    kube_version: Option<String>,
    /// Extra API versions for `.Capabilities.APIVersions`.
    #[arg(long = "api-versions", short = 'a')]
    api_versions: Vec<String>,
    /// Print only the manifests of these templates.
    #[arg(long = "show-only", short = 's')]
    show_only: Vec<String>,
    /// Print the files of crds/ directories too.
    #[arg(long = "include-crds")]
    include_crds: bool,
    /// Leave test hooks out.
    #[arg(long = "skip-tests")]
    skip_tests: bool,
    /// Print what this Helm release prints (`3.14.0`, `4.2.3`); the lines differ in blank
    /// lines and in how nulls in chart values are treated [default: the current 4.2.4 line].
    #[arg(long = "helm-version")]
    helm_version: Option<String>,
}

fn load_chart(path: &Path) -> Result<Chart, emco_core::Error> {
    if path.is_dir() {
        return Chart::load_dir(path);
    }
    let bytes = std::fs::read(path).map_err(|e| {
        emco_core::Error::not_found(format!(
            "path {:?} not found: {e}",
            path.display().to_string()
        ))
    })?;
    Chart::load_tgz(&bytes)
}

fn template(args: TemplateArgs) -> Result<String, emco_core::Error> {
    let chart = load_chart(&args.chart)?;
    let mut values = Vec::new();
    for f in &args.values {
        let text = std::fs::read_to_string(f)
            .map_err(|e| emco_core::Error::not_found(format!("open {}: {e}", f.display())))?;
        let v: Value = yaml::parse_values_document(&text).map_err(|e| {
            emco_core::Error::invalid(format!("failed to parse {}: {e}", f.display()))
        })?;
        values.push(v);
    }
    let helm = match &args.helm_version {
        Some(v) => HelmCompat::from_version(v)?,
        None => HelmCompat::default(),
    };
    let opts = RenderOptions {
        helm,
        release_name: args.release,
        namespace: args.namespace,
        values,
        set: args.set,
        set_string: args.set_string,
        kube_version: args.kube_version,
        api_versions: args.api_versions,
        include_crds: args.include_crds,
        skip_tests: args.skip_tests,
        show_only: args.show_only,
        ..RenderOptions::default()
    };
    render(&chart, &opts)?.to_helm_output(&opts)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Template(args) => template(args),
    };
    match result {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("Error: {e}");
            ExitCode::FAILURE
        }
    }
}
