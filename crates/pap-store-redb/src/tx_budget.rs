//! Agents' token spending over the last 24 hours (a pap extension; see `domain::budget`),
//! one JSON list per agent, pruned as it is written. Opened on use: agents without a token
//! budget never touch it.

use redb::ReadableTable;

use super::tables::BUDGET_TOKENS;
use super::tx::{Tx, decode, encode};
use super::{Result, redb_err};
use pap_domain::budget::TokenUse;

impl Tx<'_> {
    pub fn token_uses(&self, agent: &str) -> Result<Vec<TokenUse>> {
        let table = self
            .txn
            .open_table(BUDGET_TOKENS)
            .map_err(|e| redb_err(&self.path, e))?;
        let found = table.get(agent).map_err(|e| redb_err(&self.path, e))?;
        Ok(match found {
            Some(v) => decode(&self.path, v.value())?,
            None => Vec::new(),
        })
    }

    pub fn set_token_uses(&mut self, agent: &str, uses: &[TokenUse]) -> Result<()> {
        let mut table = self
            .txn
            .open_table(BUDGET_TOKENS)
            .map_err(|e| redb_err(&self.path, e))?;
        table
            .insert(agent, encode(&uses).as_slice())
            .map_err(|e| redb_err(&self.path, e))?;
        Ok(())
    }
}
