//! One transaction on one pooled connection, with the connection's prepared statements: what
//! the write and read sides share.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;

use postgres::types::ToSql;
use postgres::{Row, Statement, Transaction};
use serde::de::DeserializeOwned;

use pap_storage::{Error, Result};

pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

pub(super) struct Session<'c> {
    // The engine's reads take `&self`, the driver's `&mut self`: one transaction, used by
    // one thread, so a RefCell is enough.
    tx: RefCell<Transaction<'c>>,
    statements: RefCell<&'c mut HashMap<&'static str, Statement>>,
    location: &'c str,
    /// The lock conflict the server rolled this transaction back for, if a statement
    /// failed with one: the unit of work may then run again (`retry`), whatever error the
    /// code above made of it (after the rollback every later statement fails too).
    conflict: Cell<Option<super::retry::Conflict>>,
}

impl<'c> Session<'c> {
    pub(super) fn new(
        tx: Transaction<'c>,
        statements: &'c mut HashMap<&'static str, Statement>,
        location: &'c str,
    ) -> Session<'c> {
        Session {
            tx: RefCell::new(tx),
            statements: RefCell::new(statements),
            location,
            conflict: Cell::new(None),
        }
    }

    pub(super) fn into_transaction(self) -> Transaction<'c> {
        self.tx.into_inner()
    }

    fn statement(&self, sql: &'static str) -> Result<Statement> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let prepared = self
            .tx
            .borrow_mut()
            .prepare(sql)
            .map_err(|e| self.error(e))?;
        self.statements.borrow_mut().insert(sql, prepared.clone());
        Ok(prepared)
    }

    pub(super) fn query(&self, sql: &'static str, params: Params) -> Result<Vec<Row>> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query(&statement, params)
            .map_err(|e| self.error(e))
    }

    pub(super) fn query_opt(&self, sql: &'static str, params: Params) -> Result<Option<Row>> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query_opt(&statement, params)
            .map_err(|e| self.error(e))
    }

    pub(super) fn query_one(&self, sql: &'static str, params: Params) -> Result<Row> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .query_one(&statement, params)
            .map_err(|e| self.error(e))
    }

    pub(super) fn execute(&self, sql: &'static str, params: Params) -> Result<u64> {
        let statement = self.statement(sql)?;
        self.tx
            .borrow_mut()
            .execute(&statement, params)
            .map_err(|e| self.error(e))
    }

    /// Runs `each` on the rows of `sql` as they arrive (a whole table need not fit in
    /// memory). No other statement may run meanwhile.
    pub(super) fn for_each(
        &self,
        sql: &'static str,
        mut each: impl FnMut(&Row) -> Result<()>,
    ) -> Result<()> {
        use postgres::fallible_iterator::FallibleIterator;
        let statement = self.statement(sql)?;
        let mut tx = self.tx.borrow_mut();
        let mut rows = tx
            .query_raw(&statement, std::iter::empty::<i64>())
            .map_err(|e| self.error(e))?;
        while let Some(row) = rows.next().map_err(|e| self.error(e))? {
            each(&row)?;
        }
        Ok(())
    }

    /// The store's location, for messages.
    pub(super) fn location(&self) -> &str {
        self.location
    }

    pub(super) fn error(&self, e: postgres::Error) -> Error {
        if let Some(c) = super::retry::Conflict::of(&e) {
            self.conflict.set(Some(c));
        }
        super::storage_error(self.location, e)
    }

    /// See [`Session::conflict`](Self#structfield.conflict).
    pub(super) fn conflict(&self) -> Option<super::retry::Conflict> {
        self.conflict.get()
    }

    /// A record stored as JSON text.
    pub(super) fn decode<T: DeserializeOwned>(&self, what: &str, text: &str) -> Result<T> {
        serde_json::from_str(text).map_err(|e| Error::Corrupt {
            path: PathBuf::from(self.location),
            message: format!("{what}: {e}"),
        })
    }
}

/// A record as JSON text, for a `$n::text::json` parameter.
pub(super) fn encode(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("records serialise")
}

/// A stored `bigint` that holds a count or number the engine keeps as `u64`.
pub(super) fn unsigned(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// A `u64` for a `bigint` column (the engine's numbers stay far below 2^63).
pub(super) fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
