//! Command-line definitions (clap derive). No logic lives here.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "pap",
    version,
    about = "Dispatcher for the Provoke the Agent Protocol (PAP 0.2): events in, agents provoked",
    long_about = "Dispatcher for the Provoke the Agent Protocol (PAP 0.2).\n\n\
        Monitoring systems emit PAP events; trigger manifests (triggers/*.yaml) decide which \
        agent (agents/*.yaml) is provoked, under filters, idempotency, cascade control, \
        throttling and risk rules.",
    after_help = "Exit codes: 0 success, 1 failure (lint errors, an unreadable file), 2 usage error.\n\n\
        Examples:\n  pap lint\n  pap lint --format github --strict\n  pap schema trigger > trigger.schema.json"
)]
pub struct Cli {
    /// Project root holding pap.yaml, triggers/ and agents/.
    #[arg(
        long,
        global = true,
        env = "PAP_ROOT",
        value_name = "DIR",
        default_value = "."
    )]
    pub root: PathBuf,

    /// State directory (store, spool). Default: <root>/.pap, or `state_dir` from pap.yaml.
    #[arg(long, global = true, env = "PAP_STATE", value_name = "DIR")]
    pub state: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every manifest (triggers, agents, pap.yaml) without touching the state store.
    #[command(
        after_help = "Exit status: 0 no errors (warnings allowed unless --strict), 1 errors, 2 usage error.\n\n\
        Examples:\n  pap lint                              # the whole project under --root\n  \
        pap lint triggers/energy.yaml         # one file, checked against the rest of the project\n  \
        pap lint --format json | jq .errors\n  \
        pap lint --format github --strict     # annotations in a GitHub Actions job"
    )]
    Lint(LintArgs),

    /// Print the JSON Schema of a manifest kind, for editors (yaml-language-server).
    #[command(
        after_help = "Examples:\n  pap schema trigger > schemas/trigger.schema.json\n  \
        pap schema --out schemas            # writes trigger, agent and config schemas\n\n\
        Then start a manifest with:\n  # yaml-language-server: $schema=../schemas/trigger.schema.json"
    )]
    Schema(SchemaArgs),
}

#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Files or directories to check (default: the whole project under --root).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Output format; every format writes to stdout.
    #[arg(long, value_enum, default_value_t = LintFormat::Human)]
    pub format: LintFormat,

    /// Treat warnings as errors (exit 1 when there is any).
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LintFormat {
    /// rustc-style messages with a source snippet.
    Human,
    /// One JSON document with counts and diagnostics.
    Json,
    /// GitHub Actions workflow annotations.
    Github,
}

#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// Which manifest kind (omit with --out to write all three).
    #[arg(value_enum, required_unless_present = "out")]
    pub kind: Option<SchemaKind>,

    /// Write `<kind>.schema.json` files into this directory instead of printing.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    Trigger,
    Agent,
    Config,
}

impl SchemaKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaKind::Trigger => "trigger",
            SchemaKind::Agent => "agent",
            SchemaKind::Config => "config",
        }
    }
}
