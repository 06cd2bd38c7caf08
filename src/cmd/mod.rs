//! One module per subcommand: glue between the CLI and the library.

mod adapt;
mod approve;
mod approver_view;
mod audit;
mod context;
mod dispatch;
mod doctor;
mod hash_password;
mod inbox;
mod invocation_control;
mod invocation_list;
pub(crate) mod invocations;
mod lint;
mod mcp;
mod notifications;
mod respond;
mod schedule;
mod schema;
mod serve;
mod shell;
mod status;
mod store;
mod store_copy;
mod test;
mod typed_ids;
mod webhook_body;

use crate::cli::{Cli, Command};

/// How a command ended; `main` turns this into the process exit code (contract section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The command ran and found a failure (lint errors, an unreadable input file).
    Failure,
    /// Bad arguments (clap's own usage errors exit 2 too).
    Usage,
    /// Some event was invalid (wins over `AgentFailed`).
    InvalidEvent,
    /// Some agent run failed after its retries.
    AgentFailed,
    /// `pap status`: something needs a person.
    NeedsAttention,
    /// Stopped by a signal (`pap dispatch`): 128 + its number, 130 for SIGINT, 143 for
    /// SIGTERM (wins over the others).
    Signalled(u8),
}

impl Outcome {
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            Outcome::Usage => 2,
            Outcome::InvalidEvent => 3,
            Outcome::AgentFailed => 4,
            Outcome::NeedsAttention => 5,
            Outcome::Signalled(code) => code,
        }
    }
}

/// Runs a parsed command. An `Err` is an unexpected failure (exit 1 with the message).
pub fn run(mut cli: Cli) -> anyhow::Result<Outcome> {
    crate::term::set_color(cli.color);
    // Like cargo: without --root (or PAP_ROOT), the project is the nearest one upward.
    let needs_project = !matches!(
        cli.command,
        Command::Schema(_) | Command::Completions(_) | Command::Man | Command::HashPassword
    );
    if cli.root.is_none() && needs_project {
        let here = std::env::current_dir()?;
        match context::find_root(&here) {
            Some(root) => cli.root = Some(root),
            // A command given its state dir can work on the state alone.
            None if cli.state.is_some() => {}
            None => {
                crate::say!(
                    "error: no pap project in {} or any directory above it that you own (a project has a pap.yaml, or triggers/ and agents/); run pap inside one, or pass --root DIR",
                    here.display()
                );
                return Ok(Outcome::Usage);
            }
        }
    }
    // Serve and `pap mcp` set up their own logging; any other command logs only when asked
    // (`PAP_LOG=info pap dispatch …` shows, for one, transactions run again after a lock
    // conflict on a shared database).
    if std::env::var_os("PAP_LOG").is_some()
        && !matches!(cli.command, Command::Serve(_) | Command::Mcp(_))
    {
        crate::serve::log::init_at(crate::serve::log::LogFormat::Human, "warn");
    }
    match &cli.command {
        Command::Lint(args) => lint::run(&cli, args),
        Command::Test(args) => test::run(&cli, args),
        Command::Schema(args) => schema::run(args),
        Command::Dispatch(args) => dispatch::run(&cli, args),
        Command::Adapt(args) => adapt::run(&cli, args),
        Command::Invocations(args) => invocations::run(&cli, args),
        Command::Approve(args) => approve::approve(&cli, args),
        Command::Reject(args) => approve::reject(&cli, args),
        Command::Audit(args) => audit::run(&cli, args),
        Command::Serve(args) => serve::run(&cli, args),
        Command::Schedule(command) => schedule::run(&cli, command),
        Command::Store(command) => store::run(&cli, command),
        Command::Inbox(args) => inbox::run(&cli, args),
        Command::Mcp(args) => mcp::run(&cli, args),
        Command::Respond(args) => respond::run(&cli, args),
        Command::Notifications(args) => notifications::run(&cli, args),
        Command::Status(args) => status::run(&cli, args),
        Command::Doctor(args) => doctor::run(&cli, args),
        Command::Completions(args) => shell::completions(args),
        Command::Man => shell::man(),
        Command::HashPassword => hash_password::run(),
    }
}
