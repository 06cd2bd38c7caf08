//! `pap store check` and `pap store backup`: verifying a store and copying it consistently.

use std::path::Path;

use super::ledger_block::Block;
use super::tx::Reader;
use super::{Error, Result, Store, redb_err};
use pap_storage::ReadTx;

/// What a check found.
#[derive(Debug, Default, serde::Serialize)]
pub struct CheckReport {
    /// redb's own check: every page checksum and the allocator state. `false` when the file
    /// needed a repair (it was damaged, and redb rebuilt what it could).
    pub pages_ok: bool,
    pub invocations: u64,
    pub ledger_rows: u64,
    pub audit_entries: u64,
    pub notifications: u64,
    /// Records that do not decode, at most 20, as `table key: what`.
    pub bad_records: Vec<String>,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.pages_ok && self.bad_records.is_empty()
    }
}

const MAX_REPORTED: usize = 20;

impl Store {
    /// Verifies the store: redb's integrity check (which holds the file, so it runs between
    /// other processes' transactions), then every record decoded.
    pub fn check(&self) -> Result<CheckReport> {
        let path = self.path();
        let pages_ok =
            self.with_writer(|db| db.check_integrity().map_err(|e| redb_err(&path, e)))?;
        let mut report = CheckReport {
            pages_ok,
            ..CheckReport::default()
        };
        self.read(|r| {
            r.check_records(&mut report);
            Ok(())
        })?;
        Ok(report)
    }

    /// Copies the store to `to` while holding it (no transaction in between), then opens the
    /// copy to make sure it reads. The copy is written beside `to` and renamed into place, so
    /// `to` is never half written.
    pub fn backup(&self, to: &Path) -> Result<u64> {
        let from = self.path();
        let dir = to
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let io = |source: std::io::Error| Error::Dir {
            path: to.to_path_buf(),
            source,
        };
        let partial = tempfile::Builder::new()
            .prefix(".pap-backup-")
            .tempfile_in(dir)
            .map_err(io)?;
        let bytes = self.with_reader(|_| {
            let bytes = std::fs::copy(&from, partial.path()).map_err(io)?;
            partial.as_file().sync_all().map_err(io)?;
            Ok(bytes)
        })?;
        Store::new(super::Backing::File(partial.path().to_path_buf()), None).read(|_| Ok(()))?;
        partial.persist(to).map_err(|e| io(e.error))?;
        Ok(bytes)
    }
}

impl Reader {
    fn check_records(&self, report: &mut CheckReport) {
        let mut bad = |what: String| {
            if report.bad_records.len() < MAX_REPORTED {
                report.bad_records.push(what);
            }
        };
        match self.invocation_ids(&|_| true, usize::MAX) {
            Ok(ids) => {
                for id in ids {
                    match self.invocation(&id) {
                        Ok(Some(_)) => report.invocations += 1,
                        Ok(None) => bad(format!("invocations {id}: listed but not readable")),
                        Err(e) => bad(format!("invocations {id}: {e}")),
                    }
                }
            }
            Err(e) => bad(format!("invocations: {e}")),
        }
        match self.ledger_blocks() {
            Ok(blocks) => {
                for (first, bytes) in blocks {
                    match Block::new(&bytes) {
                        Ok(block) => {
                            for (n, row) in block.rows().enumerate() {
                                match row {
                                    Ok(_) => report.ledger_rows += 1,
                                    Err(_) => bad(format!(
                                        "ledger_blocks {first}: row {} does not decode",
                                        first + n as u64
                                    )),
                                }
                            }
                        }
                        Err(_) => bad(format!("ledger_blocks {first}: the block does not decode")),
                    }
                }
            }
            Err(e) => bad(format!("ledger_blocks: {e}")),
        }
        match self.audit(None) {
            Ok((entries, _)) => report.audit_entries = entries.len() as u64,
            Err(e) => bad(format!("audit: {e}")),
        }
        match self.notify().and_then(|n| n.notifications(|_| true, None)) {
            Ok((list, _)) => report.notifications = list.len() as u64,
            Err(e) => bad(format!("notifications: {e}")),
        }
    }
}
