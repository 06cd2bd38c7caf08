//! Where the PostgreSQL store is and how to reach it: a `postgres://` URL from
//! `PAP_DATABASE_URL` or `store:` in pap.yaml, turned into a driver configuration with pap's
//! own rules on top of the driver's.
//!
//! A leaf below both of its users: `pap lint` checks pap.yaml's `store:` with it (the
//! manifest), and the PostgreSQL store connects with what it returns (`pgstore`). One parser,
//! so that lint and the store never disagree; it reads no file and opens no connection (the
//! driver's `Config` is plain data), so the manifest does not depend on the store.
//!
//!
//! - the password comes from the environment (`PAP_DATABASE_PASSWORD`, else `PGPASSWORD`),
//!   or from `PAP_DATABASE_URL` itself, never from a file or a command line;
//! - a host that is not loopback (nor a unix socket) gets TLS with the certificate verified,
//!   unless the URL says `sslmode=disable` in so many words. The driver's own default,
//!   `prefer`, silently falls back to plain text when a server offers no TLS, so pap parses
//!   `sslmode` itself (and `sslrootcert`, which the driver does not know).

use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use postgres::config::{Host, SslMode};

/// Where a URL came from: it decides whether a password in it is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `PAP_DATABASE_URL`: the environment, where secrets may live.
    Environment,
    /// `store:` in pap.yaml: a file, often committed.
    ProjectFile,
    /// A command-line argument (`pap store copy --to`): visible in `ps`.
    CommandLine,
}

/// How the connection is protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// Plain text: a loopback host or socket, or `sslmode=disable` said explicitly.
    Off,
    /// TLS, the server's certificate verified against the system's roots, or the CA file.
    Verified { ca_file: Option<PathBuf> },
    /// TLS when the server offers it (verified then), plain text otherwise: `sslmode=prefer`
    /// on a loopback host only.
    Preferred { ca_file: Option<PathBuf> },
}

/// A parsed database URL.
#[derive(Clone)]
pub struct DatabaseUrl {
    pub config: postgres::Config,
    pub tls: Tls,
    /// The URL without its password, for messages and `pap status`.
    pub shown: String,
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseUrl")
            .field("shown", &self.shown)
            .field("tls", &self.tls)
            .finish()
    }
}

/// What is wrong with a URL, for a message that names where it came from.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UrlError {
    #[error("not a postgres:// or postgresql:// URL")]
    Scheme,
    #[error("{0}")]
    Invalid(String),
    #[error(
        "it contains a password; a password comes from the environment only \
         (PAP_DATABASE_PASSWORD or PGPASSWORD), never from a file or a command line"
    )]
    PasswordOutsideEnvironment,
    #[error("sslmode={0} is not one of disable, prefer, require, verify-ca, verify-full")]
    SslMode(String),
    #[error(
        "sslmode=prefer may fall back to plain text, which pap allows only for a loopback \
         host; use sslmode=verify-full (the default) or say sslmode=disable"
    )]
    PreferRemote,
}

/// Parses `url` as found at `origin`, taking the password from `env` (a lookup, so tests
/// need not change the process's environment).
pub fn parse(
    url: &str,
    origin: Origin,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<DatabaseUrl, UrlError> {
    let url = url.trim();
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .ok_or(UrlError::Scheme)?;
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let mut kept = Vec::new();
    let mut ssl_mode: Option<String> = None;
    let mut ca_file: Option<PathBuf> = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_encoding::percent_decode_str(v)
            .decode_utf8_lossy()
            .into_owned();
        match k {
            "sslmode" => ssl_mode = Some(value),
            "sslrootcert" => ca_file = Some(PathBuf::from(value)),
            "password" => return Err(password_error(origin)),
            _ => kept.push(pair),
        }
    }
    let driver_url = if kept.is_empty() {
        format!("postgresql://{before_query}")
    } else {
        format!("postgresql://{before_query}?{}", kept.join("&"))
    };
    let mut config =
        postgres::Config::from_str(&driver_url).map_err(|e| UrlError::Invalid(e.to_string()))?;
    if config.get_password().is_some() && origin != Origin::Environment {
        return Err(password_error(origin));
    }
    if config.get_password().is_none()
        && let Some(password) = env("PAP_DATABASE_PASSWORD").or_else(|| env("PGPASSWORD"))
    {
        config.password(password);
    }
    if config.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(|| env("USER"))
            .unwrap_or_else(|| "postgres".into());
        config.user(&user);
    }
    if config.get_hosts().is_empty() {
        config.host_path("/var/run/postgresql");
    }
    let local = config.get_hosts().iter().all(is_loopback)
        && config.get_hostaddrs().iter().all(|ip| ip.is_loopback());
    let tls = match ssl_mode.as_deref() {
        None if local => Tls::Off,
        None => Tls::Verified { ca_file },
        Some("disable") => Tls::Off,
        Some("prefer" | "allow") if local => Tls::Preferred { ca_file },
        Some("prefer" | "allow") => return Err(UrlError::PreferRemote),
        Some("require" | "verify-ca" | "verify-full") => Tls::Verified { ca_file },
        Some(other) => return Err(UrlError::SslMode(other.to_owned())),
    };
    config.ssl_mode(match tls {
        Tls::Off => SslMode::Disable,
        Tls::Verified { .. } => SslMode::Require,
        Tls::Preferred { .. } => SslMode::Prefer,
    });
    // A partitioned database must fail a statement in bounded time, so a node stops deciding
    // and says so instead of hanging.
    config
        .application_name("pap")
        .connect_timeout(Duration::from_secs(10))
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(30));
    #[cfg(target_os = "linux")]
    config.tcp_user_timeout(Duration::from_secs(30));
    Ok(DatabaseUrl {
        shown: redact(url),
        config,
        tls,
    })
}

fn password_error(origin: Origin) -> UrlError {
    match origin {
        Origin::Environment => UrlError::Invalid("password= is not a URL parameter".into()),
        _ => UrlError::PasswordOutsideEnvironment,
    }
}

/// Whether `host` is this machine: a unix socket, `localhost`, or a loopback address.
fn is_loopback(host: &Host) -> bool {
    match host {
        Host::Unix(_) => true,
        Host::Tcp(name) => {
            let bare = name.trim_start_matches('[').trim_end_matches(']');
            name == "localhost" || IpAddr::from_str(bare).is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// `url` with any password replaced by `***`. The driver takes the user information up to
/// the last `@` (a password may hold `/`, `?` or `@`), so everything from the first `:` after
/// the scheme up to the last `@` goes.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let (userinfo, host) = rest.split_at(at);
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_remote_host_gets_verified_tls_by_default() {
        let u = parse(
            "postgres://pap@db.example.com/pap",
            Origin::ProjectFile,
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(u.tls, Tls::Verified { ca_file: None });
        let u = parse(
            "postgres://pap@db.example.com/pap?sslmode=verify-full&sslrootcert=/etc/ca.pem",
            Origin::ProjectFile,
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(
            u.tls,
            Tls::Verified {
                ca_file: Some("/etc/ca.pem".into())
            }
        );
    }

    #[test]
    fn prefer_is_refused_for_a_remote_host_and_disable_must_be_said() {
        let e = parse(
            "postgres://pap@10.0.0.5/pap?sslmode=prefer",
            Origin::Environment,
            &env_with(&[]),
        )
        .unwrap_err();
        assert_eq!(e, UrlError::PreferRemote);
        let u = parse(
            "postgres://pap@10.0.0.5/pap?sslmode=disable",
            Origin::Environment,
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(u.tls, Tls::Off);
        let u = parse(
            "postgres://pap@127.0.0.1:5433/pap",
            Origin::ProjectFile,
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(u.tls, Tls::Off);
        let u = parse(
            "postgres://pap@[::1]/pap",
            Origin::ProjectFile,
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(u.tls, Tls::Off);
    }

    #[test]
    fn a_password_comes_from_the_environment_only() {
        for origin in [Origin::ProjectFile, Origin::CommandLine] {
            let e = parse("postgres://pap:hunter2@db/pap", origin, &env_with(&[])).unwrap_err();
            assert_eq!(e, UrlError::PasswordOutsideEnvironment);
        }
        let u = parse(
            "postgres://pap@db/pap",
            Origin::ProjectFile,
            &env_with(&[("PAP_DATABASE_PASSWORD", "s3cret"), ("PGPASSWORD", "other")]),
        )
        .unwrap();
        assert_eq!(u.config.get_password(), Some(&b"s3cret"[..]));
        let u = parse(
            "postgres://pap:pw@db/pap",
            Origin::Environment,
            &env_with(&[]),
        )
        .unwrap();
        assert_eq!(u.shown, "postgres://pap:***@db/pap");
        assert!(!format!("{u:?}").contains("pw@"));
    }

    #[test]
    fn a_unix_socket_directory_is_a_host() {
        let u = parse(
            "postgres://pap@%2Ftmp%2Fpg/pap?port=5499",
            Origin::ProjectFile,
            &env_with(&[]),
        )
        .unwrap();
        assert!(matches!(u.config.get_hosts()[0], Host::Unix(_)));
        assert_eq!(u.tls, Tls::Off);
        assert_eq!(
            parse("mysql://x", Origin::ProjectFile, &env_with(&[])).unwrap_err(),
            UrlError::Scheme
        );
    }
}
