//! `pap serve`: settings from pap.yaml and the command line, then the daemon.

use super::{Outcome, context};
use crate::cli::{Cli, ServeArgs};
use crate::composition;
use crate::serve::{self, Overrides, Settings};

pub(super) fn run(cli: &Cli, args: &ServeArgs) -> anyhow::Result<Outcome> {
    let project = context::load_project(cli)?;
    let state_dir = context::state_dir(cli, &project);
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
    let overrides = Overrides {
        max_concurrent: args.max_concurrent.map(|n| n as usize),
        grace: args.grace,
        listen: args.listen.clone(),
        state_dir: cli.state.is_some(),
    };
    let settings = Settings::new(
        &project.config,
        overrides,
        args.once,
        args.log_format.into(),
    );
    serve::run(project, &state_dir, settings, |project| {
        let place = context::place(cli, project)?;
        let store = composition::open(&place)?;
        Ok(serve::Opened {
            clock: composition::clock_for(&*store)?,
            store,
            url_from_env: place.database_from_env,
        })
    })?;
    Ok(Outcome::Success)
}
