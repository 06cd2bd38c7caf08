//! `pap serve`: settings from pap.yaml and the command line, then the daemon.

use super::{Outcome, context};
use crate::cli::{Cli, ServeArgs};
use crate::serve::{self, Settings};

pub fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<Outcome> {
    let project = context::load_project(cli)?;
    let state_dir = context::state_dir(cli, &project);
    let config = &project.config.serve;
    let grace = context::grace(args.grace, config.grace_period)?;
    let settings = Settings {
        max_concurrent: args
            .max_concurrent
            .map_or(config.max_concurrent, |n| n as usize),
        grace,
        rescan: config.rescan_interval,
        done_retention: config.done_retention,
        spool_settle: config.spool_settle,
        // A live claim's reason reads its ledger row, so rows last at least as long.
        // Twice the TTL: a claim kept longer for a colliding pair (see `Tx::extend_claim`)
        // still finds the row that names its pair.
        ledger_retention: config
            .ledger_retention
            .max(project.config.idempotency_ttl * 2),
        once: args.once,
        log_format: args.log_format,
    };
    serve::run(project, &state_dir, settings)?;
    Ok(Outcome::Success)
}
