//! `pap store check` and `pap store backup`.

use serde_json::json;

use super::{Outcome, context};
use crate::cli::{Cli, StoreCommand};
use crate::store::Store;

pub fn run(cli: &Cli, command: &StoreCommand) -> anyhow::Result<Outcome> {
    let dir = context::state_dir_to_read(cli)?;
    let Some(store) = Store::open_existing(&dir)? else {
        anyhow::bail!("there is no state store in {} yet", dir.display());
    };
    match command {
        StoreCommand::Check(args) => {
            let report = store.check()?;
            if args.json {
                let mut v = serde_json::to_value(&report)?;
                v["ok"] = json!(report.ok());
                v["path"] = json!(store.path());
                crate::out!("{v}")?;
            } else {
                let pages = if report.pages_ok {
                    "page checksums ok"
                } else {
                    "DAMAGED: the file failed redb's integrity check and was repaired as far as possible"
                };
                crate::out!("{}: {pages}", store.path().display())?;
                crate::out!(
                    "  {} invocations, {} ledger rows, {} audit entries, {} notifications read",
                    report.invocations,
                    report.ledger_rows,
                    report.audit_entries,
                    report.notifications
                )?;
                for bad in &report.bad_records {
                    crate::out!("  bad record: {bad}")?;
                }
                crate::out!("{}", if report.ok() { "ok" } else { "damaged" })?;
            }
            Ok(if report.ok() {
                Outcome::Success
            } else {
                Outcome::Failure
            })
        }
        StoreCommand::Backup(args) => {
            if args.file.exists() && !args.force {
                anyhow::bail!("{} exists; --force replaces it", args.file.display());
            }
            let bytes = store.backup(&args.file)?;
            crate::say!(
                "copied {} to {} ({bytes} bytes, verified)",
                store.path().display(),
                args.file.display()
            );
            Ok(Outcome::Success)
        }
    }
}
