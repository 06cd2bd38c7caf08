//! Versioned schema migrations, expand then contract, so that nodes of two neighbouring
//! releases share a database during a rolling upgrade:
//!
//! - an *expand* migration only adds (tables, nullable columns, indexes): the previous
//!   release keeps working beside it, and the new release writes both shapes;
//! - a *contract* migration removes what no supported release reads any more, and raises
//!   `pap_schema.compat_min`, the oldest schema a node may have to run on this database.
//!
//! `pap store migrate` applies what is missing, one migration per transaction, under an
//! advisory lock (two nodes migrating at once take turns), and verifies the checksum of
//! every migration already applied. Every open checks: a database that lacks one of this
//! binary's migrations is refused ("run `pap store migrate`"); one with migrations this binary
//! does not know is fine as long as this binary's schema is at least `compat_min`.

use sha2::{Digest, Sha256};

use super::PgError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Expand,
    /// Removes an old shape; nodes older than `compat_min` must be gone first.
    Contract {
        compat_min: i32,
    },
}

pub struct Migration {
    pub version: i32,
    pub name: &'static str,
    pub sql: &'static str,
    pub phase: Phase,
    /// What the SQL cannot do alone, run after it in the same transaction with the engine's
    /// own code (so that what it derives is derived as every write derives it).
    then: Option<fn(&super::write::PgWrite) -> pap_storage::Result<()>>,
}

pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("migrations/0001_initial.sql"),
        phase: Phase::Expand,
        then: None,
    },
    Migration {
        version: 2,
        name: "nodes",
        sql: include_str!("migrations/0002_nodes.sql"),
        phase: Phase::Expand,
        then: None,
    },
    Migration {
        version: 3,
        name: "concurrency admission",
        sql: include_str!("migrations/0003_concurrency_admission.sql"),
        phase: Phase::Contract { compat_min: 3 },
        then: Some(|w| w.admit_all()),
    },
    Migration {
        version: 4,
        name: "read indexes",
        sql: include_str!("migrations/0004_read_indexes.sql"),
        phase: Phase::Expand,
        then: None,
    },
    Migration {
        version: 5,
        name: "cancel keys",
        sql: include_str!("migrations/0005_cancel_keys.sql"),
        phase: Phase::Expand,
        then: None,
    },
];

/// The schema this binary reads and writes: its newest migration.
pub fn current() -> i32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Held while migrating ("pap_migr" in ASCII), so concurrent migrations take turns.
const MIGRATION_LOCK: i64 = 0x7061_705f_6d69_6772;

const BOOTSTRAP: &str = "
CREATE TABLE IF NOT EXISTS pap_schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    sha256     text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    applied_by text NOT NULL
);
CREATE TABLE IF NOT EXISTS pap_schema (
    only_row   boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    compat_min integer NOT NULL
);
INSERT INTO pap_schema (only_row, compat_min) VALUES (true, 0) ON CONFLICT DO NOTHING;
";

/// What a migration run did.
#[derive(Debug, Default)]
pub struct Migrated {
    /// Migrations applied now, in order.
    pub applied: Vec<(i32, &'static str)>,
    /// How many were applied already.
    pub already: usize,
    /// Migrations the database has that this binary does not know (a newer release's).
    pub newer: Vec<i32>,
}

fn checksum(sql: &str) -> String {
    Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Applies every missing migration; `applied_by` names who did (for the record).
pub fn migrate(client: &mut postgres::Client, applied_by: &str) -> Result<Migrated, PgError> {
    migrate_up_to(client, applied_by, i32::MAX)
}

/// As [`migrate`], applying the migrations up to version `last` only (a test makes a
/// database as an older release left it).
pub(super) fn migrate_up_to(
    client: &mut postgres::Client,
    applied_by: &str,
    last: i32,
) -> Result<Migrated, PgError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    let result = migrate_locked(client, applied_by, last);
    // The lock is also released when the session ends, so an error here loses nothing.
    let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
    result
}

fn migrate_locked(
    client: &mut postgres::Client,
    applied_by: &str,
    last: i32,
) -> Result<Migrated, PgError> {
    client.batch_execute(BOOTSTRAP)?;
    let applied = applied(client)?;
    verify_checksums(&applied)?;
    let mut report = Migrated {
        newer: newer_than_known(&applied),
        ..Migrated::default()
    };
    for m in MIGRATIONS.iter().filter(|m| m.version <= last) {
        if applied.iter().any(|(v, _)| *v == m.version) {
            report.already += 1;
            continue;
        }
        let mut statements = std::collections::HashMap::new();
        let location = format!("migration {} ({})", m.version, m.name);
        let mut tx = client.transaction()?;
        tx.batch_execute(m.sql).map_err(|e| {
            PgError::Schema(format!(
                "migration {} ({}) failed: {}",
                m.version,
                m.name,
                super::describe(&e)
            ))
        })?;
        if let Some(step) = m.then {
            let w = super::write::PgWrite::new(super::session::Session::new(
                tx,
                &mut statements,
                &location,
            ));
            step(&w).map_err(|e| PgError::Schema(format!("{location} failed: {e}")))?;
            tx = w.s.into_transaction();
        }
        tx.execute(
            "INSERT INTO pap_schema_migrations (version, name, sha256, applied_by) \
             VALUES ($1, $2, $3, $4)",
            &[&m.version, &m.name, &checksum(m.sql), &applied_by],
        )?;
        if let Phase::Contract { compat_min } = m.phase {
            tx.execute(
                "UPDATE pap_schema SET compat_min = GREATEST(compat_min, $1)",
                &[&compat_min],
            )?;
        }
        tx.commit()?;
        report.applied.push((m.version, m.name));
    }
    Ok(report)
}

/// (version, checksum) of every applied migration.
fn applied(client: &mut postgres::Client) -> Result<Vec<(i32, String)>, PgError> {
    Ok(client
        .query(
            "SELECT version, sha256 FROM pap_schema_migrations ORDER BY version",
            &[],
        )?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

fn verify_checksums(applied: &[(i32, String)]) -> Result<(), PgError> {
    for (version, sum) in applied {
        if let Some(m) = MIGRATIONS.iter().find(|m| m.version == *version)
            && checksum(m.sql) != *sum
        {
            return Err(PgError::Schema(format!(
                "migration {version} ({}) applied to the database differs from this pap's \
                 (checksum {sum}, expected {}): the database was migrated by a different \
                 build; use a released pap",
                m.name,
                checksum(m.sql)
            )));
        }
    }
    Ok(())
}

fn newer_than_known(applied: &[(i32, String)]) -> Vec<i32> {
    applied
        .iter()
        .map(|(v, _)| *v)
        .filter(|v| !MIGRATIONS.iter().any(|m| m.version == *v))
        .collect()
}

/// Where the database's schema stands for this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaState {
    /// The newest migration applied (0: none).
    pub version: i32,
    pub compat_min: i32,
}

/// Checks at open that this binary may run on the database.
pub fn check(client: &mut postgres::Client) -> Result<SchemaState, PgError> {
    let exists: Option<String> = client
        .query_one("SELECT to_regclass('pap_schema_migrations')::text", &[])?
        .get(0);
    if exists.is_none() {
        return Err(PgError::Schema(
            "the database has no pap schema yet: run `pap store migrate` (with the same \
             PAP_DATABASE_URL) once, before any node starts"
                .into(),
        ));
    }
    let applied = applied(client)?;
    verify_checksums(&applied)?;
    let missing: Vec<String> = MIGRATIONS
        .iter()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .map(|m| format!("{} ({})", m.version, m.name))
        .collect();
    if !missing.is_empty() {
        return Err(PgError::Schema(format!(
            "the database lacks this pap's schema migrations {}: run `pap store migrate`",
            missing.join(", ")
        )));
    }
    let compat_min: i32 = client
        .query_one("SELECT compat_min FROM pap_schema", &[])?
        .get(0);
    if current() < compat_min {
        return Err(PgError::Schema(format!(
            "this pap reads schema {}, but the database was contracted to schema {compat_min} \
             or later: upgrade this node",
            current()
        )));
    }
    Ok(SchemaState {
        version: applied.iter().map(|(v, _)| *v).max().unwrap_or(0),
        compat_min,
    })
}
