//! `pap store copy`, and the PostgreSQL side of `pap store check` and `pap store backup`:
//! each moves or reads a whole state through `storage::transfer`.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::{Outcome, context};
use crate::cli::{Cli, StoreCopyArgs};
use crate::composition;
use crate::pgstore::{Origin, PgStore};
use crate::storage::{Storage, transfer};

/// Where a copy goes.
enum Target {
    Database(Box<crate::pgstore::DatabaseUrl>),
    File(std::path::PathBuf),
}

fn target(to: &str) -> anyhow::Result<Target> {
    if to.starts_with("postgres://") || to.starts_with("postgresql://") {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let url = crate::database_url::parse(to, Origin::CommandLine, &env)
            .map_err(|e| anyhow::anyhow!("--to {}: {e}", crate::database_url::redact(to)))?;
        Ok(Target::Database(Box::new(url)))
    } else {
        Ok(Target::File(to.into()))
    }
}

/// Reports progress on stderr while a long copy runs (every 100,000 records).
fn progress() -> impl FnMut(u64) {
    let mut said = 0u64;
    move |total| {
        if total / 100_000 > said / 100_000 {
            crate::say!("copied {total} records…");
            said = total;
        }
    }
}

pub(super) fn copy(cli: &Cli, args: &StoreCopyArgs) -> anyhow::Result<Outcome> {
    let place = context::place_to_read(cli)?;
    let Some(from) = composition::open_existing(&place)? else {
        anyhow::bail!("there is no state at {} to copy", place.shown());
    };
    let (to, shown): (Arc<dyn Storage>, String) = match target(&args.to)? {
        Target::Database(url) => {
            let by = format!("pap {} (store copy)", env!("CARGO_PKG_VERSION"));
            let migrated = PgStore::migrate(&url, &by)?;
            if !migrated.applied.is_empty() {
                crate::say!(
                    "{}: applied {} schema migration(s) first",
                    url.shown,
                    migrated.applied.len()
                );
            }
            (
                Arc::new(PgStore::open(&url, &place.state_dir)?),
                url.shown.clone(),
            )
        }
        Target::File(path) => (
            Arc::new(crate::store::Store::create_file(&path)?),
            path.display().to_string(),
        ),
    };
    if from.location() == to.location() {
        anyhow::bail!("--to names the state being copied");
    }
    let copied = transfer::copy(from.as_ref(), to.as_ref(), &mut progress())?;
    report(args.json, &place.shown(), &shown, &copied)?;
    Ok(Outcome::Success)
}

fn report(json_out: bool, from: &str, to: &str, copied: &transfer::Copied) -> anyhow::Result<()> {
    if json_out {
        crate::out!(
            "{}",
            json!({"from": from, "to": to, "copied": by_kind(copied)})
        )?;
    } else {
        let what: Vec<String> = copied
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        crate::say!(
            "copied {from} to {to}: {}",
            if what.is_empty() {
                "an empty state".to_owned()
            } else {
                what.join(", ")
            }
        );
    }
    Ok(())
}

/// Counts by kind as a JSON object (`idempotency_claims: 3`, …).
fn by_kind(counts: &transfer::Copied) -> serde_json::Value {
    counts
        .iter()
        .map(|(kind, n)| (kind.replace(' ', "_"), json!(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// `pap store backup` of a database: a consistent copy into a new redb file, written beside
/// `file` and renamed into place.
pub(super) fn backup_database(
    store: &dyn Storage,
    file: &Path,
    force: bool,
) -> anyhow::Result<u64> {
    if file.exists() && !force {
        anyhow::bail!("{} exists; --force replaces it", file.display());
    }
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let partial = tempfile::Builder::new()
        .prefix(".pap-backup-")
        .tempdir_in(dir)?;
    let path = partial.path().join("state.redb");
    let copy = crate::store::Store::create_file(&path)?;
    transfer::copy(store, &copy, &mut progress())?;
    drop(copy);
    std::fs::rename(&path, file)?;
    Ok(std::fs::metadata(file)?.len())
}

/// `pap store check` of a database: every record read and decoded from one snapshot.
pub(super) fn check_database(store: &dyn Storage, json_out: bool) -> anyhow::Result<Outcome> {
    let mut counts = transfer::Copied::new();
    let result = store.export(&mut |item| {
        transfer::tally(&mut counts, &item);
        Ok(())
    });
    counts.retain(|(kind, _)| *kind != "counters");
    let location = store.location().display().to_string();
    let bad = result.err().map(|e| e.to_string());
    if json_out {
        crate::out!(
            "{}",
            json!({"ok": bad.is_none(), "path": location, "kind": store.kind(), "records": by_kind(&counts),
                   "bad_records": bad.iter().collect::<Vec<_>>()})
        )?;
    } else {
        crate::out!("{location}: every record read from one snapshot")?;
        let what: Vec<String> = counts
            .iter()
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        crate::out!("  {}", what.join(", "))?;
        if let Some(bad) = &bad {
            crate::out!("  bad record: {bad}")?;
        }
        crate::out!("{}", if bad.is_none() { "ok" } else { "damaged" })?;
    }
    Ok(if bad.is_none() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}
