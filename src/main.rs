//! The `pap` binary: parse arguments, run, and choose the exit code (the only place it is chosen).

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = pap::cli::Cli::parse();
    match pap::run(cli) {
        Ok(outcome) => ExitCode::from(outcome.exit_code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(1)
        }
    }
}

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
