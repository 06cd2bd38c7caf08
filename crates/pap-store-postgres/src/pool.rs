//! A small pool of connections. Each unit of work checks one out for its whole transaction
//! and gives it back after, so a transaction is one connection by construction. A
//! connection that broke is dropped instead of being given back, and the next checkout
//! opens a fresh one.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::PgError;
use pap_database_url::{DatabaseUrl, Tls};

/// A connection and the statements prepared on it (a statement is prepared once per
/// connection, so a hot transaction pays one round trip per statement, not two).
pub(super) struct Conn {
    pub client: Client,
    pub(crate) statements: HashMap<&'static str, Statement>,
}

#[derive(Clone)]
enum Connector {
    Plain,
    Rustls(MakeRustlsConnect),
}

/// How to open a connection: the settings and the TLS connector. A copy opens connections
/// of its own, outside the pool (the `LISTEN` thread's, say).
#[derive(Clone)]
pub(super) struct Dialer {
    config: postgres::Config,
    connector: Connector,
}

impl Dialer {
    pub(super) fn connect(&self) -> Result<Client, PgError> {
        Ok(match &self.connector {
            Connector::Plain => self.config.connect(NoTls)?,
            Connector::Rustls(tls) => self.config.connect(tls.clone())?,
        })
    }
}

pub(super) struct Pool {
    dialer: Dialer,
    max: usize,
    state: Mutex<State>,
    returned: Condvar,
}

struct State {
    idle: Vec<Conn>,
    /// Connections checked out or idle.
    open: usize,
}

/// How long a checkout waits for a connection when all `max` are in use.
const CHECKOUT_WAIT: Duration = Duration::from_secs(30);

impl Pool {
    pub(super) fn new(url: &DatabaseUrl, max: usize) -> Result<Pool, PgError> {
        let ca = |ca: &Option<std::path::PathBuf>| {
            super::tls::connector(ca.as_deref()).map_err(PgError::Setup)
        };
        let connector = match &url.tls {
            Tls::Off => Connector::Plain,
            Tls::Verified { ca_file } | Tls::Preferred { ca_file } => {
                Connector::Rustls(ca(ca_file)?)
            }
        };
        let mut config = url.config.clone();
        // A node paused (SIGSTOP) or cut off inside a transaction must not hold its row and
        // advisory locks for ever: the server ends such a session, and a waiter gives up
        // rather than hang (then the unit of work fails as "unavailable" and is retried).
        let ours = "-c idle_in_transaction_session_timeout=15000 -c lock_timeout=20000";
        let options = match config.get_options() {
            Some(theirs) if !theirs.is_empty() => format!("{theirs} {ours}"),
            _ => ours.to_owned(),
        };
        config.options(&options);
        Ok(Pool {
            dialer: Dialer { config, connector },
            max: max.max(1),
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
        })
    }

    /// A new connection, outside the pool (for one-off work).
    pub(super) fn connect(&self) -> Result<Client, PgError> {
        self.dialer.connect()
    }

    /// How this pool opens connections, for connections of one's own.
    pub(super) fn dialer(&self) -> Dialer {
        self.dialer.clone()
    }

    /// Closes the idle connections: after an outage began they predate it, and one whose
    /// reset the driver has not noticed yet would pass for the database being back.
    pub(super) fn drop_idle(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let idle = std::mem::take(&mut state.idle);
        state.open -= idle.len();
    }

    /// A connection for one unit of work.
    pub(super) fn get(&self) -> Result<Pooled<'_>, PgError> {
        let deadline = Instant::now() + CHECKOUT_WAIT;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            while let Some(conn) = state.idle.pop() {
                if !conn.client.is_closed() {
                    return Ok(Pooled {
                        pool: self,
                        conn: Some(conn),
                    });
                }
                state.open -= 1;
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return match self.connect() {
                    Ok(client) => Ok(Pooled {
                        pool: self,
                        conn: Some(Conn {
                            client,
                            statements: HashMap::new(),
                        }),
                    }),
                    Err(e) => {
                        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                        state.open -= 1;
                        self.returned.notify_one();
                        Err(e)
                    }
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PgError::Busy(format!(
                    "all {} database connections stayed in use for {}s",
                    self.max,
                    CHECKOUT_WAIT.as_secs()
                )));
            }
            state = self
                .returned
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn give_back(&self, conn: Conn) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        self.returned.notify_one();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Closing a connection blocks on the driver's own runtime, which panics on a thread
        // that drives async tasks (serve drops its store there as it stops): close them on a
        // thread of their own.
        let idle =
            std::mem::take(&mut self.state.get_mut().unwrap_or_else(|p| p.into_inner()).idle);
        if !idle.is_empty() {
            let _ = std::thread::spawn(move || drop(idle)).join();
        }
    }
}

/// A checked-out connection; back in the pool when dropped.
pub(super) struct Pooled<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl Pooled<'_> {
    pub(super) fn conn(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a pooled connection until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.give_back(conn);
        }
    }
}
