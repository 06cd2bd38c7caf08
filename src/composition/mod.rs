//! The composition root: the one place that knows every store, picks the one a process
//! uses and opens it, and gives it the clock it decides on.
//!
//! Everything below works on `Arc<dyn Storage>` and a [`Clock`] handed to it: the storage
//! interface (`storage`) names no implementation, the implementations (`store` for the redb
//! file, `pgstore` for PostgreSQL) name nothing above the interface, and the commands (`cmd`)
//! come here for a store. A new store is added here and nowhere else above it. The storage
//! contract suite runs against every store from here too (`contract_wiring`).

mod clock;
#[cfg(test)]
mod contract_wiring;
mod place;

use std::sync::Arc;

use crate::pgstore::PgStore;
use crate::storage::{self, Result, Storage};
use crate::store::Store;

pub use clock::clock_for;
pub use place::{DATABASE_URL_ENV, Place};

/// The store of `place`, created if missing (a database must have been migrated).
pub fn open(place: &Place) -> Result<Arc<dyn Storage>> {
    match &place.database {
        Some(db) => Ok(Arc::new(PgStore::open(db, &place.state_dir)?)),
        None => Ok(Arc::new(Store::open_with_cache(
            &place.state_dir,
            place.cache_bytes,
        )?)),
    }
}

/// The store of `place` for a long-lived process that writes seldom: it keeps no handle
/// between transactions (see `store::Store::open_transient`; a database's pooled
/// connections hold no lock between transactions anyway).
pub fn open_transient(place: &Place) -> Result<Arc<dyn Storage>> {
    match &place.database {
        Some(_) => open(place),
        None => Ok(Arc::new(Store::open_transient(
            &place.state_dir,
            place.cache_bytes,
        )?)),
    }
}

/// The existing store of `place`, or `None` when there is none yet (listing commands never
/// create a state). A database always exists once it is migrated.
pub fn open_existing(place: &Place) -> Result<Option<Arc<dyn Storage>>> {
    match &place.database {
        Some(_) => open(place).map(Some),
        None => Ok(Store::open_existing(&place.state_dir, place.cache_bytes)?
            .map(|s| Arc::new(s) as Arc<dyn Storage>)),
    }
}

/// The store for `--dry-run`: a private copy of the real one (or an empty one), which the dry
/// run changes without touching the original.
pub fn open_for_dry_run(place: &Place) -> Result<Arc<dyn Storage>> {
    match &place.database {
        Some(_) => {
            // A database's state is copied into memory: the dry run sees every claim and
            // window as they are, and changes nothing (a large state takes a while).
            let real = open(place)?;
            let copy: Arc<dyn Storage> = in_memory()?;
            storage::transfer::copy(real.as_ref(), copy.as_ref(), &mut |_| {})?;
            Ok(copy)
        }
        None => Ok(Arc::new(Store::open_for_dry_run(
            &place.state_dir,
            place.cache_bytes,
        )?)),
    }
}

/// An empty store in memory (tests).
pub fn in_memory() -> Result<Arc<dyn Storage>> {
    Ok(Arc::new(Store::in_memory()?))
}
