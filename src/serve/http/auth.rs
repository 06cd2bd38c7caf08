//! Who is asking: principals from `listen.auth`, their credentials, and what they may do.
//!
//! A program presents `Authorization: Bearer TOKEN`; a person (or a program that can only do
//! Basic, such as Alertmanager's `basic_auth`) presents `Authorization: Basic NAME:SECRET`,
//! where SECRET is the principal's password or token. Tokens are kept only as SHA-256
//! digests and compared in constant time; passwords only as argon2 hashes, verified on the
//! blocking pool, a few at a time (an unknown name is checked against a dummy hash, so the
//! time taken does not tell which names exist).
//!
//! Guessing is slowed per client address (the peer, or behind `listen.trusted_proxies` the
//! address the proxy forwarded for): each failure pushes that address's next failure later
//! (250 ms, doubling to 8 s). A valid credential is never refused for failures it did not
//! make: a token is always checked first (a digest compare costs next to nothing), and only
//! a token that fails is answered 429 while its address is waiting. Behind one proxy address
//! every client looks alike, so one misconfigured sender cannot keep another's valid posts
//! out. A password check costs tens of milliseconds of CPU, so a password login (the
//! console's form, or Basic with a password) from a waiting address is refused unchecked; a
//! successful one forgets the address's failures. A valid token forgets nothing: it would
//! let a guesser sharing the address reset its own wait.
//!
//! Nothing here logs a credential: a failed login is logged with the principal's name only
//! when that name exists (a password typed into the name field stays out of the log).
//!
//! The principals themselves ([`Principals`]) are swapped whole by a reload; what is kept
//! across reloads is here: the failures (a reload does not reset anyone's wait), the dummy
//! hash, and the bound on password checks.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{self, HeaderMap};
use base64::Engine as _;
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

pub(super) use super::principals::{Caller, MIN_TOKEN_LEN};
use super::principals::{Principals, Secret, digest};
use super::swap::Swap;

/// The longest a failing address is made to wait per attempt.
const MAX_DELAY: Duration = Duration::from_secs(8);
/// Failures older than this are forgotten.
const FAILURE_MEMORY: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most (a flood of addresses cannot grow the table without bound).
const MAX_TRACKED: usize = 10_000;

/// Why credentials were not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum AuthError {
    #[error("the credentials are not valid")]
    Invalid,
    #[error("the Authorization header is malformed (use `Bearer TOKEN` or `Basic …`)")]
    Malformed,
    /// Failures from this address came too close: try again after this long.
    #[error("too many failed attempts from this address; try again later")]
    TooSoon(Duration),
}

#[derive(Default)]
struct Failures {
    count: u32,
    last: Option<Instant>,
}

pub(super) struct Auth {
    principals: Swap<Principals>,
    /// Verified when a login names nobody, so that it takes as long as a real check.
    dummy_hash: String,
    failures: Mutex<HashMap<IpAddr, Failures>>,
    /// Password verifications running at once (each costs tens of milliseconds of CPU).
    hashing: Semaphore,
}

impl Auth {
    pub(super) fn new(principals: Principals) -> Result<Auth, HashError> {
        Ok(Auth {
            principals: Swap::new(principals),
            dummy_hash: hash_password(&crate::serve::http::console_token())?,
            failures: Mutex::new(HashMap::new()),
            hashing: Semaphore::new(2),
        })
    }

    /// The principals in force now.
    pub(super) fn principals(&self) -> Arc<Principals> {
        self.principals.load()
    }

    /// Puts `principals` in force from the next request on; returns the set it replaced.
    pub(super) fn replace(&self, principals: Principals) -> Arc<Principals> {
        self.principals.store(principals)
    }

    /// The caller of a request with these headers, from the client address `peer`. No
    /// credentials: anonymous.
    pub(super) async fn identify(
        &self,
        headers: &HeaderMap,
        peer: IpAddr,
    ) -> Result<Caller, AuthError> {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Ok(self.principals().anonymous());
        };
        let value = value.to_str().map_err(|_| AuthError::Malformed)?;
        let (scheme, rest) = value.split_once(' ').ok_or(AuthError::Malformed)?;
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            let found = self.principals().by_token(rest.as_bytes());
            return self.token_checked(found, peer);
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(AuthError::Malformed);
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .map_err(|_| AuthError::Malformed)?;
        let text = String::from_utf8(decoded).map_err(|_| AuthError::Malformed)?;
        let (name, secret) = text.split_once(':').ok_or(AuthError::Malformed)?;
        if let Some(found) = self.by_name_and_token(name, secret) {
            return self.token_checked(found, peer);
        }
        self.password_checked(name, secret, peer).await
    }

    /// A token's verdict, checked already: valid is accepted whatever its address did; a
    /// failure counts, or is answered 429 while the address waits after earlier ones.
    fn token_checked(&self, found: Option<Caller>, peer: IpAddr) -> Result<Caller, AuthError> {
        match found {
            Some(caller) => Ok(caller),
            None => match self.too_soon(peer) {
                Some(wait) => Err(AuthError::TooSoon(wait)),
                None => {
                    self.note_failure(peer);
                    Err(AuthError::Invalid)
                }
            },
        }
    }

    /// A password (or an unknown name), checked only when its address is not waiting.
    async fn password_checked(
        &self,
        name: &str,
        secret: &str,
        peer: IpAddr,
    ) -> Result<Caller, AuthError> {
        if let Some(wait) = self.too_soon(peer) {
            return Err(AuthError::TooSoon(wait));
        }
        match self.by_name_and_password(name, secret).await {
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
    pub(super) async fn login(
        &self,
        name: &str,
        secret: &str,
        peer: IpAddr,
    ) -> Result<Caller, AuthError> {
        let result = match self.by_name_and_token(name, secret) {
            Some(found) => self.token_checked(found, peer),
            None => self.password_checked(name, secret, peer).await,
        };
        if result == Err(AuthError::Invalid) {
            let known = self.principals().named(name).is_some();
            let principal = if known { name } else { "(unknown)" };
            tracing::warn!(principal, %peer, "failed login");
        }
        result
    }

    /// `Some(verdict)` when `name` is a principal with a token (a cheap check, made at once);
    /// `None` when it has a password or names nobody.
    fn by_name_and_token(&self, name: &str, secret: &str) -> Option<Option<Caller>> {
        let principals = self.principals();
        let k = principals.named(name)?;
        let Secret::TokenDigest(d) = &k.secret else {
            return None;
        };
        let ok = bool::from(d.ct_eq(&digest(secret.as_bytes())));
        Some(ok.then(|| principals.current(&k.caller())).flatten())
    }

    async fn by_name_and_password(&self, name: &str, secret: &str) -> Option<Caller> {
        let principals = self.principals();
        let Some(k) = principals.named(name) else {
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
        // A reload during the check may have removed the principal or changed its password:
        // what counts is the set in force once the check is done.
        ok.then(|| self.principals().current(&k.caller())).flatten()
    }

    /// How long `peer` must still wait after its last failure, if at all.
    pub(super) fn too_soon(&self, peer: IpAddr) -> Option<Duration> {
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

    pub(super) fn note_failure(&self, peer: IpAddr) {
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

    pub(super) fn forget_failures(&self, peer: IpAddr) {
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

/// Why a password could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("no randomness for a salt: {0}")]
    Randomness(getrandom::Error),
    #[error("argon2: {0}")]
    Argon2(argon2::password_hash::Error),
}

/// An argon2id hash of `password` in PHC form, with a fresh salt (`pap hash-password`).
pub fn hash_password(password: &str) -> Result<String, HashError> {
    use argon2::PasswordHasher as _;
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(HashError::Randomness)?;
    let salt = argon2::password_hash::SaltString::encode_b64(&salt).map_err(HashError::Argon2)?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(HashError::Argon2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::compiled_listen::{Credential, ListenConfig, Scope};
    use crate::serve::http::principals::tests::principal;

    fn config(alice: &str) -> ListenConfig {
        ListenConfig {
            principals: vec![
                principal(
                    "am",
                    Credential::TokenEnv("AM_TOKEN".into()),
                    &[Scope::Ingest],
                ),
                principal(
                    "alice",
                    Credential::PasswordHash(hash_password(alice).unwrap()),
                    &[Scope::Read, Scope::Approve],
                ),
            ],
            ..ListenConfig::default()
        }
    }

    fn principals(config: &ListenConfig) -> Principals {
        Principals::resolve(config, std::path::Path::new("/"), |v| {
            (v == "AM_TOKEN").then(|| "0123456789abcdef-token".to_owned())
        })
        .unwrap()
    }

    fn auth() -> Auth {
        Auth::new(principals(&config("correct horse"))).unwrap()
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
        // Right after a failure, a valid token from the same address still gets in; a
        // further failing one is answered 429, a password refused unchecked.
        let valid = auth
            .identify(&headers("Bearer 0123456789abcdef-token"), peer(1))
            .await
            .unwrap();
        assert_eq!(valid.name.as_deref(), Some("am"));
        assert!(matches!(
            auth.identify(&headers("Bearer nope"), peer(1)).await,
            Err(AuthError::TooSoon(_))
        ));
        assert!(matches!(
            auth.identify(&headers(&basic("alice", "correct horse")), peer(1))
                .await,
            Err(AuthError::TooSoon(_))
        ));
        // A token as a Basic secret is a token: checked at once.
        assert!(
            auth.identify(&headers(&basic("am", "0123456789abcdef-token")), peer(1))
                .await
                .is_ok()
        );
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

    #[tokio::test]
    async fn a_replaced_set_is_in_force_from_the_next_request_and_failures_are_kept() {
        let auth = auth();
        let token = headers("Bearer 0123456789abcdef-token");
        assert!(auth.identify(&token, PEER).await.is_ok());
        let other = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 9));
        auth.note_failure(other);
        // am removed, alice's password changed.
        let mut next = config("new password");
        next.principals.remove(0);
        auth.replace(principals(&next));
        assert_eq!(auth.identify(&token, PEER).await, Err(AuthError::Invalid));
        auth.forget_failures(PEER);
        assert_eq!(
            auth.login("alice", "correct horse", PEER).await,
            Err(AuthError::Invalid)
        );
        auth.forget_failures(PEER);
        assert!(auth.login("alice", "new password", PEER).await.is_ok());
        // The count, not `too_soon`: the password checks above take real time, and on a
        // loaded machine more than the first failure's 250 ms wait (CI saw it expire).
        assert_eq!(
            auth.failures.lock().unwrap().get(&other).map(|f| f.count),
            Some(1),
            "a reload reset the failures"
        );
    }
}
