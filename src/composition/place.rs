//! Where a process's state is: always a state dir (serve's lock and socket, agents' process
//! groups, the inbox mark, the redb file by default), and a PostgreSQL database when one is
//! configured: `PAP_DATABASE_URL`, else `store:` in pap.yaml.

use std::path::PathBuf;

use crate::database_url::{self, DatabaseUrl, Origin};
use crate::storage::{DEFAULT_STORE_CACHE, Error, Result};

/// The environment variable that puts the state in PostgreSQL (it wins over pap.yaml).
pub const DATABASE_URL_ENV: &str = "PAP_DATABASE_URL";

#[derive(Debug, Clone)]
pub struct Place {
    pub state_dir: PathBuf,
    /// `None`: the redb file in the state dir.
    pub database: Option<DatabaseUrl>,
    /// `PAP_DATABASE_URL` named the database (pap.yaml's `store:` then does not count).
    pub database_from_env: bool,
    /// The redb file's page cache in bytes, for a process that writes it (`store_cache`; a
    /// database has its own).
    pub cache_bytes: u64,
}

impl Place {
    /// The redb file in `state_dir`.
    pub fn file(state_dir: PathBuf) -> Place {
        Place {
            state_dir,
            database: None,
            database_from_env: false,
            cache_bytes: DEFAULT_STORE_CACHE,
        }
    }

    /// The same place with a page cache of `bytes` (pap.yaml's `store_cache`).
    pub fn with_cache(self, bytes: u64) -> Place {
        Place {
            cache_bytes: bytes,
            ..self
        }
    }

    /// The state for a project whose pap.yaml says `configured` (its `store:`), with
    /// `PAP_DATABASE_URL` winning over it.
    pub fn resolve(state_dir: PathBuf, configured: Option<&str>) -> Result<Place> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let (url, origin, named) = match (env(DATABASE_URL_ENV), configured) {
            (Some(url), _) => (url, Origin::Environment, DATABASE_URL_ENV),
            (None, Some(url)) => (url.to_owned(), Origin::ProjectFile, "store: in pap.yaml"),
            (None, None) => return Ok(Place::file(state_dir)),
        };
        let database = database_url::parse(&url, origin, &env).map_err(|e| Error::Setup {
            location: named.to_owned(),
            message: format!("{} is not usable: {e}", database_url::redact(&url)),
        })?;
        Ok(Place {
            database: Some(database),
            database_from_env: origin == Origin::Environment,
            ..Place::file(state_dir)
        })
    }

    /// Where the state is, for messages: the redb file or the database URL (no password).
    pub fn shown(&self) -> String {
        match &self.database {
            Some(db) => db.shown.clone(),
            None => self.state_dir.join("state.redb").display().to_string(),
        }
    }
}
