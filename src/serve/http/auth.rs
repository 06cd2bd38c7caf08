//! Who is asking: principals from `listen.auth`, their credentials, and what they may do.
//!
//! A program presents `Authorization: Bearer TOKEN`; a person (or a program that can only do
//! Basic, such as Alertmanager's `basic_auth`) presents `Authorization: Basic NAME:SECRET`,
//! where SECRET is the principal's password or token. Tokens are kept only as SHA-256
//! digests and compared in constant time; passwords only as argon2 hashes, verified on the
//! blocking pool, a few at a time (an unknown name is checked against a dummy hash, so the
//! time taken does not tell which names exist). Each failure from an address pushes that
//! address's next attempt later (250 ms, doubling to 8 s); an attempt before then is refused
//! at once, unchecked, so parallel guesses gain nothing. A success forgets the failures.
//!
//! Nothing here logs a credential: a failed login is logged with the principal's name only
//! when that name exists (a password typed into the name field stays out of the log).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{self, HeaderMap};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

use crate::manifest::compiled_listen::{Credential, ListenConfig, Scope};

/// Shortest token accepted: anything shorter can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;
/// The longest a failing address is made to wait per attempt.
const MAX_DELAY: Duration = Duration::from_secs(8);
/// Failures older than this are forgotten.
const FAILURE_MEMORY: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most (a flood of addresses cannot grow the table without bound).
const MAX_TRACKED: usize = 10_000;

/// Who made a request: a named principal, or anonymous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `None` for an anonymous request.
    pub name: Option<String>,
    pub scopes: Vec<Scope>,
}

impl Caller {
    pub fn may(&self, scope: Scope) -> bool {
        self.scopes.contains(&scope)
    }

    /// For logs: the principal's name, or `anonymous`.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or("anonymous")
    }
}

/// Why credentials were not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("the credentials are not valid")]
    Invalid,
    #[error("the Authorization header is malformed (use `Bearer TOKEN` or `Basic …`)")]
    Malformed,
    /// Failures from this address came too close: try again after this long.
    #[error("too many failed attempts from this address; try again later")]
    TooSoon(Duration),
}

enum Secret {
    TokenDigest([u8; 32]),
    PasswordHash(String),
}

struct Known {
    name: String,
    scopes: Vec<Scope>,
    secret: Secret,
}

#[derive(Default)]
struct Failures {
    count: u32,
    last: Option<Instant>,
}

pub struct Auth {
    known: Vec<Known>,
    /// Verified when a login names nobody, so that it takes as long as a real check.
    dummy_hash: String,
    anonymous: Vec<Scope>,
    failures: Mutex<HashMap<IpAddr, Failures>>,
    /// Password verifications running at once (each costs tens of milliseconds of CPU).
    hashing: Semaphore,
}

fn digest(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

impl Auth {
    /// The principals of `config`, with their tokens read through `env` (serve's
    /// environment). A token variable that is unset, empty or too short stops the start.
    pub fn resolve(
        config: &ListenConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Auth, String> {
        let mut known = Vec::new();
        for p in &config.principals {
            let secret = match &p.credential {
                Credential::TokenEnv(var) => {
                    let token = env(var).unwrap_or_default();
                    if token.is_empty() {
                        return Err(format!(
                            "principal `{}`: the environment variable {var} that holds its token is not set",
                            p.name
                        ));
                    }
                    if token.len() < MIN_TOKEN_LEN {
                        return Err(format!(
                            "principal `{}`: the token in {var} is {} characters; a token has at least {MIN_TOKEN_LEN} (e.g. `openssl rand -hex 32`)",
                            p.name,
                            token.len()
                        ));
                    }
                    Secret::TokenDigest(digest(token.as_bytes()))
                }
                Credential::PasswordHash(hash) => Secret::PasswordHash(hash.clone()),
            };
            known.push(Known {
                name: p.name.clone(),
                scopes: p.scopes.clone(),
                secret,
            });
        }
        Ok(Auth {
            known,
            dummy_hash: hash_password(&crate::serve::http::console_token())?,
            anonymous: config.anonymous_scopes(),
            failures: Mutex::new(HashMap::new()),
            hashing: Semaphore::new(2),
        })
    }

    pub fn has_principals(&self) -> bool {
        !self.known.is_empty()
    }

    pub fn anonymous(&self) -> Caller {
        Caller {
            name: None,
            scopes: self.anonymous.clone(),
        }
    }

    /// The caller of a request with these headers, from `peer`. No credentials: anonymous.
    pub async fn identify(&self, headers: &HeaderMap, peer: IpAddr) -> Result<Caller, AuthError> {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Ok(self.anonymous());
        };
        let value = value.to_str().map_err(|_| AuthError::Malformed)?;
        let (scheme, rest) = value.split_once(' ').ok_or(AuthError::Malformed)?;
        let rest = rest.trim();
        if let Some(wait) = self.too_soon(peer) {
            return Err(AuthError::TooSoon(wait));
        }
        let found = if scheme.eq_ignore_ascii_case("bearer") {
            self.by_token(rest.as_bytes())
        } else if scheme.eq_ignore_ascii_case("basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest)
                .map_err(|_| AuthError::Malformed)?;
            let text = String::from_utf8(decoded).map_err(|_| AuthError::Malformed)?;
            let (name, secret) = text.split_once(':').ok_or(AuthError::Malformed)?;
            self.by_name_and_secret(name, secret).await
        } else {
            return Err(AuthError::Malformed);
        };
        match found {
            Some(caller) => {
                self.forget_failures(peer);
                Ok(caller)
            }
            None => {
                self.note_failure(peer);
                Err(AuthError::Invalid)
            }
        }
    }

    /// A login (the console's form): a principal's name and its password or token.
    pub async fn login(&self, name: &str, secret: &str, peer: IpAddr) -> Result<Caller, AuthError> {
        if let Some(wait) = self.too_soon(peer) {
            return Err(AuthError::TooSoon(wait));
        }
        match self.by_name_and_secret(name, secret).await {
            Some(caller) => {
                self.forget_failures(peer);
                Ok(caller)
            }
            None => {
                let known = self.known.iter().any(|k| k.name == name);
                let principal = if known { name } else { "(unknown)" };
                tracing::warn!(principal, %peer, "failed login");
                self.note_failure(peer);
                Err(AuthError::Invalid)
            }
        }
    }

    fn by_token(&self, token: &[u8]) -> Option<Caller> {
        let presented = digest(token);
        // Every token is compared, so the time taken says nothing about which one matched.
        let mut found = None;
        for k in &self.known {
            if let Secret::TokenDigest(d) = &k.secret
                && bool::from(d.ct_eq(&presented))
            {
                found = Some(k);
            }
        }
        found.map(|k| Caller {
            name: Some(k.name.clone()),
            scopes: k.scopes.clone(),
        })
    }

    async fn by_name_and_secret(&self, name: &str, secret: &str) -> Option<Caller> {
        let Some(k) = self.known.iter().find(|k| k.name == name) else {
            // As long as a real check: the answer's time must not say the name is unknown.
            let _permit = self.hashing.acquire().await.ok()?;
            let (hash, secret) = (self.dummy_hash.clone(), secret.to_owned());
            let _ = tokio::task::spawn_blocking(move || verify_password(&hash, &secret)).await;
            return None;
        };
        let ok = match &k.secret {
            Secret::TokenDigest(d) => bool::from(d.ct_eq(&digest(secret.as_bytes()))),
            Secret::PasswordHash(hash) => {
                let _permit = self.hashing.acquire().await.ok()?;
                let (hash, secret) = (hash.clone(), secret.to_owned());
                tokio::task::spawn_blocking(move || verify_password(&hash, &secret))
                    .await
                    .unwrap_or(false)
            }
        };
        ok.then(|| Caller {
            name: Some(k.name.clone()),
            scopes: k.scopes.clone(),
        })
    }

    /// How long `peer` must still wait after its last failure, if at all.
    pub fn too_soon(&self, peer: IpAddr) -> Option<Duration> {
        let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let f = failures.get(&peer)?;
        let elapsed = f.last?.elapsed();
        if elapsed >= FAILURE_MEMORY {
            return None;
        }
        delay_after(f.count)
            .checked_sub(elapsed)
            .filter(|d| !d.is_zero())
    }

    pub fn note_failure(&self, peer: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() >= MAX_TRACKED {
            failures.retain(|_, f| f.last.is_some_and(|at| at.elapsed() < FAILURE_MEMORY));
            if failures.len() >= MAX_TRACKED {
                failures.clear();
            }
        }
        let f = failures.entry(peer).or_default();
        if f.last.is_some_and(|at| at.elapsed() >= FAILURE_MEMORY) {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = Some(Instant::now());
    }

    pub fn forget_failures(&self, peer: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        failures.remove(&peer);
    }
}

/// How long after its last failure an address may try again, after `count` failures: 250 ms
/// after the first, doubling up to [`MAX_DELAY`].
fn delay_after(count: u32) -> Duration {
    if count == 0 {
        return Duration::ZERO;
    }
    let exp = (count - 1).min(6);
    (Duration::from_millis(250) * (1 << exp)).min(MAX_DELAY)
}

fn verify_password(hash: &str, password: &str) -> bool {
    use argon2::PasswordVerifier as _;
    let Ok(parsed) = argon2::PasswordHash::new(hash) else {
        return false;
    };
    argon2::Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok()
}

/// An argon2id hash of `password` in PHC form, with a fresh salt (`pap hash-password`).
pub fn hash_password(password: &str) -> Result<String, String> {
    use argon2::PasswordHasher as _;
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| format!("no randomness for a salt: {e}"))?;
    let salt = argon2::password_hash::SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::compiled_listen::Principal;

    fn config() -> ListenConfig {
        ListenConfig {
            principals: vec![
                Principal {
                    name: "am".into(),
                    credential: Credential::TokenEnv("AM_TOKEN".into()),
                    scopes: vec![Scope::Ingest],
                },
                Principal {
                    name: "alice".into(),
                    credential: Credential::PasswordHash(hash_password("correct horse").unwrap()),
                    scopes: vec![Scope::Read, Scope::Approve],
                },
            ],
            ..ListenConfig::default()
        }
    }

    fn auth() -> Auth {
        Auth::resolve(&config(), |v| {
            (v == "AM_TOKEN").then(|| "0123456789abcdef-token".to_owned())
        })
        .unwrap()
    }

    fn headers(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    fn basic(user: &str, secret: &str) -> String {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"));
        format!("Basic {b}")
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[tokio::test]
    async fn bearer_tokens_and_basic_passwords_name_their_principal() {
        let auth = auth();
        let c = auth
            .identify(&headers("Bearer 0123456789abcdef-token"), PEER)
            .await
            .unwrap();
        assert_eq!(c.name.as_deref(), Some("am"));
        assert!(c.may(Scope::Ingest) && !c.may(Scope::Approve));
        let c = auth
            .identify(&headers(&basic("alice", "correct horse")), PEER)
            .await
            .unwrap();
        assert_eq!(c.name.as_deref(), Some("alice"));
        assert!(c.may(Scope::Approve));
        // A token works as a Basic secret too (Alertmanager's basic_auth).
        let c = auth
            .identify(&headers(&basic("am", "0123456789abcdef-token")), PEER)
            .await
            .unwrap();
        assert_eq!(c.name.as_deref(), Some("am"));
    }

    #[tokio::test]
    async fn wrong_or_malformed_credentials_are_refused_and_no_header_is_anonymous() {
        let auth = auth();
        let peer = |n: u8| IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, n));
        assert_eq!(
            auth.identify(&headers("Bearer nope"), peer(1)).await,
            Err(AuthError::Invalid)
        );
        // Right after a failure, the same address is refused unchecked.
        assert!(matches!(
            auth.identify(&headers("Bearer 0123456789abcdef-token"), peer(1))
                .await,
            Err(AuthError::TooSoon(_))
        ));
        assert_eq!(
            auth.identify(&headers("Digest x"), peer(2)).await,
            Err(AuthError::Malformed)
        );
        assert_eq!(
            auth.identify(&headers(&basic("alice", "wrong")), peer(3))
                .await,
            Err(AuthError::Invalid)
        );
        // An unknown name takes a password check too, and fails the same way.
        assert_eq!(
            auth.identify(&headers(&basic("nobody", "wrong")), peer(4))
                .await,
            Err(AuthError::Invalid)
        );
        // With principals configured, anonymous may do nothing by default.
        let anon = auth.identify(&HeaderMap::new(), PEER).await.unwrap();
        assert_eq!(anon.name, None);
        assert!(anon.scopes.is_empty());
    }

    #[test]
    fn failures_slow_down_the_next_attempts() {
        assert_eq!(delay_after(0), Duration::ZERO);
        assert_eq!(delay_after(1), Duration::from_millis(250));
        assert_eq!(delay_after(3), Duration::from_secs(1));
        assert_eq!(delay_after(40), MAX_DELAY);
        let auth = auth();
        assert_eq!(auth.too_soon(PEER), None);
        auth.note_failure(PEER);
        auth.note_failure(PEER);
        assert_eq!(auth.failures.lock().unwrap()[&PEER].count, 2);
        assert!(
            auth.too_soon(PEER)
                .is_some_and(|d| d <= Duration::from_millis(500))
        );
        auth.forget_failures(PEER);
        assert!(auth.failures.lock().unwrap().is_empty());
        assert_eq!(auth.too_soon(PEER), None);
    }

    #[test]
    fn a_missing_or_short_token_stops_the_start() {
        let err = Auth::resolve(&config(), |_| None).err().unwrap();
        assert!(err.contains("AM_TOKEN") && err.contains("not set"), "{err}");
        let err = Auth::resolve(&config(), |_| Some("short".into()))
            .err()
            .unwrap();
        assert!(err.contains("at least 16"), "{err}");
    }
}
