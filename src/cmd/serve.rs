//! `pap serve`: settings from pap.yaml and the command line, then the daemon.

use super::{Outcome, context};
use crate::cli::{Cli, ServeArgs};
use crate::serve::{self, Settings};

pub fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<Outcome> {
    let project = context::load_project(cli)?;
    let state_dir = context::state_dir(cli, &project);
    let config = &project.config.serve;
    let grace = context::grace(args.grace, config.grace_period)?;
    let listen = args
        .listen
        .clone()
        .or_else(|| project.config.listen.address.clone());
    if args.once && listen.is_some() {
        crate::say!(
            "error: --once does not listen for HTTP (it exits when nothing is due); drop --listen{}",
            if args.listen.is_none() {
                " (here from listen.address in pap.yaml: run without --once to listen)"
            } else {
                ""
            }
        );
        return Ok(Outcome::Usage);
    }
    if let Some(address) = &args.listen
        && let Err(why) = crate::manifest::compile_listen::check_address(address)
    {
        crate::say!("error: --listen `{address}`: {why} (write HOST:PORT, e.g. 127.0.0.1:8080)");
        return Ok(Outcome::Usage);
    }
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
        listen,
    };
    serve::run(project, &state_dir, settings)?;
    Ok(Outcome::Success)
}
