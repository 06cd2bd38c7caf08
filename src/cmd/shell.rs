//! `pap completions SHELL` and `pap man`: pap's CLI described for shells and for `man`, from
//! the same definitions clap parses with, so they never drift from it.

use std::io::Write;

use clap::CommandFactory;

use super::Outcome;
use crate::cli::{Cli, CompletionsArgs};

pub(super) fn completions(args: &CompletionsArgs) -> anyhow::Result<Outcome> {
    let mut command = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut command, "pap", &mut out);
    std::io::stdout().write_all(&out)?;
    Ok(Outcome::Success)
}

pub(super) fn man() -> anyhow::Result<Outcome> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut out)?;
    std::io::stdout().write_all(&out)?;
    Ok(Outcome::Success)
}
