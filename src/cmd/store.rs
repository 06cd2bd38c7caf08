//! `pap store check`, `pap store backup`, `pap store compact` and `pap store migrate`.

use serde_json::json;

use super::{Outcome, context};
use crate::cli::{Cli, StoreCommand};
use crate::store::Store;

pub(super) fn run(cli: &Cli, command: &StoreCommand) -> anyhow::Result<Outcome> {
    match command {
        StoreCommand::Migrate(args) => return migrate(cli, args),
        StoreCommand::Copy(args) => return super::store_copy::copy(cli, args),
        _ => {}
    }
    let place = context::place_to_read(cli)?;
    if place.database.is_some() {
        let store = crate::composition::open(&place)?;
        return match command {
            StoreCommand::Check(args) => {
                super::store_copy::check_database(store.as_ref(), args.json)
            }
            StoreCommand::Backup(args) => {
                let bytes =
                    super::store_copy::backup_database(store.as_ref(), &args.file, args.force)?;
                crate::say!(
                    "copied {} to {} (a redb file, {bytes} bytes; `pap store copy --to` moves it back)",
                    place.shown(),
                    args.file.display()
                );
                Ok(Outcome::Success)
            }
            StoreCommand::Compact(_) => anyhow::bail!(
                "the state is in PostgreSQL ({}): there is no file to compact. Autovacuum makes \
                 the room of purged rows reusable; `VACUUM FULL` gives it back to the file \
                 system but locks the table meanwhile (see the book's Retention and purge page)",
                place.shown()
            ),
            _ => unreachable!("handled above"),
        };
    }
    if let StoreCommand::Compact(args) = command {
        return compact(&place, args.json);
    }
    let dir = place.state_dir.clone();
    let Some(store) = Store::open_existing(&dir, place.cache_bytes)? else {
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
        StoreCommand::Migrate(_) | StoreCommand::Copy(_) | StoreCommand::Compact(_) => {
            unreachable!("handled above")
        }
    }
}

/// `pap store compact` of a redb state: holds serve's lock meanwhile, so that it never runs
/// beside a serve (which would wait for the file for as long as compaction takes).
fn compact(place: &crate::composition::Place, json: bool) -> anyhow::Result<Outcome> {
    let dir = place.state_dir.as_path();
    if !dir.join("state.redb").exists() {
        anyhow::bail!("there is no state store in {} yet", dir.display());
    }
    let holder = crate::serve::lock::Holder {
        pid: std::process::id(),
        started_at: format!("{:.0}", crate::clock::Clock::from_env()?.now()),
        root: dir.to_path_buf(),
        command: Some("pap store compact".into()),
    };
    let _lock = crate::serve::lock::acquire(dir, &holder)
        .map_err(|e| anyhow::anyhow!("pap store compact needs the store to itself: {e:#}"))?;
    let store = Store::open_with_cache(dir, place.cache_bytes)?;
    crate::say!("compacting {} …", store.path().display());
    let done = store.compact()?;
    if json {
        let mut v = serde_json::to_value(done)?;
        v["path"] = json!(store.path());
        crate::out!("{v}")?;
    } else {
        crate::out!(
            "{}: {} → {} (the tables take {})",
            store.path().display(),
            bytes(done.before),
            bytes(done.after),
            bytes(done.live)
        )?;
    }
    Ok(Outcome::Success)
}

/// A size for people: `63.2 MB`.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.1} GB", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} kB", n as f64 / 1e3),
        n => format!("{n} bytes"),
    }
}

fn migrate(cli: &Cli, args: &crate::cli::StoreMigrateArgs) -> anyhow::Result<Outcome> {
    let place = context::place_to_read(cli)?;
    let Some(db) = &place.database else {
        if args.json {
            crate::out!("{}", json!({"kind": "redb", "applied": [], "schema": null}))?;
        } else {
            crate::say!(
                "the state is the redb file {}: it needs no migration (set PAP_DATABASE_URL or \
                 `store:` in pap.yaml for PostgreSQL)",
                place.shown()
            );
        }
        return Ok(Outcome::Success);
    };
    let by = format!(
        "pap {} ({}@{})",
        env!("CARGO_PKG_VERSION"),
        std::env::var("USER").unwrap_or_default(),
        crate::liveness::this_node()
    );
    let done = crate::pgstore::PgStore::migrate(db, &by)?;
    if args.json {
        crate::out!(
            "{}",
            json!({
                "kind": "postgresql",
                "database": db.shown,
                "applied": done.applied.iter().map(|(v, name)| json!({"version": v, "name": name})).collect::<Vec<_>>(),
                "already": done.already,
                "newer": done.newer,
                "schema": crate::pgstore::schema::current(),
            })
        )?;
    } else {
        for (version, name) in &done.applied {
            crate::say!("applied migration {version} ({name})");
        }
        crate::say!(
            "{}: schema {} is current ({} applied now, {} before{})",
            db.shown,
            crate::pgstore::schema::current(),
            done.applied.len(),
            done.already,
            if done.newer.is_empty() {
                String::new()
            } else {
                format!(", and {} from a newer pap", done.newer.len())
            }
        );
    }
    Ok(Outcome::Success)
}
