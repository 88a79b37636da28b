//! The `emcoctl` binary: see the `emcoctl` library.

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let code = emcoctl::cli::run(
        std::env::args_os(),
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
    .await;
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
