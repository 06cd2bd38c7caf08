//! The `pap` binary: parse arguments, run, and choose the exit code (the only place it is chosen).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    pap::allocator::tune();
    // A command agent's supervisor: hidden from the CLI, and nothing else of pap starts.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| a == pap::agent::supervise::SUBCOMMAND)
    {
        pap::agent::supervise::main(args.collect());
    }
    pap::agent::supervise::enable();
    pap::panic_report::install();
    let cli = pap::cli::Cli::parse();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pap::run(cli)));
    // A store still referenced by a task that outlived the command is closed cleanly here.
    pap::store::release_all();
    pap::agent::scratch::remove();
    match result {
        Ok(Ok(outcome)) => ExitCode::from(outcome.exit_code()),
        // A reader that went away (`pap … | head -1`) is not a failure of pap's: what was
        // decided stays committed, and there is nobody left to tell.
        Ok(Err(err)) if pap::panic_report::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Ok(Err(err)) => {
            // An error can quote untrusted text (a provider's reply, an event's field). A
            // closed stderr is no reason to fail differently.
            let text = format!("error: {}", pap::error_text::describe(&err));
            let _ = writeln!(std::io::stderr(), "{}", pap::term::for_humans(&text));
            ExitCode::from(1)
        }
        // The panic hook has said what happened.
        Err(_) => ExitCode::from(1),
    }
}

#[global_allocator]
static GLOBAL: pap::allocator::Allocator = pap::allocator::Allocator;
