//! Console sessions: a random token in an `HttpOnly`, `SameSite=Strict` cookie (`Secure`
//! under TLS), naming the principal that logged in, with a CSRF token its forms carry.
//!
//! Sessions live in serve's memory: a restart logs everyone out, which for a console is the
//! safe side. A session lasts [`LIFETIME`] from its login; the table is bounded, the oldest
//! session giving way.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

use crate::serve::http::auth::Caller;

pub const COOKIE: &str = "pap_session";
/// How long a login lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most.
const MAX_SESSIONS: usize = 10_000;

#[derive(Clone)]
pub struct Session {
    pub caller: Caller,
    /// Every form of this session carries it; a post without it is refused.
    pub csrf: String,
    started: Instant,
}

#[derive(Default)]
pub struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes as hex.
pub fn random_token() -> String {
    crate::serve::http::console_token()
}

impl Sessions {
    /// A new session for `caller`; returns its cookie token.
    pub fn start(&self, caller: Caller) -> String {
        let token = random_token();
        let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| s.started.elapsed() < LIFETIME);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            token.clone(),
            Session {
                caller,
                csrf: random_token(),
                started: Instant::now(),
            },
        );
        token
    }

    /// The live session of a request's cookie.
    pub fn of(&self, headers: &HeaderMap) -> Option<Session> {
        let token = cookie(headers, COOKIE)?;
        let map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&token)
            .filter(|s| s.started.elapsed() < LIFETIME)
            .cloned()
    }

    pub fn end(&self, headers: &HeaderMap) {
        if let Some(token) = cookie(headers, COOKIE) {
            let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
            map.remove(&token);
        }
    }
}

impl Session {
    /// Whether `presented` is this session's CSRF token (compared in constant time).
    pub fn csrf_ok(&self, presented: &str) -> bool {
        presented.len() == self.csrf.len()
            && bool::from(presented.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

/// The `Set-Cookie` value that starts (or, with an empty token, ends) a session.
pub fn set_cookie(token: &str, secure: bool) -> String {
    let max_age = if token.is_empty() {
        0
    } else {
        LIFETIME.as_secs()
    };
    let mut c = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}");
    if secure {
        c.push_str("; Secure");
    }
    c
}

/// The value of cookie `name` in a request.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::http::test_headers;

    fn alice() -> Caller {
        Caller {
            name: Some("alice".into()),
            scopes: vec![],
        }
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_ended() {
        let sessions = Sessions::default();
        let token = sessions.start(alice());
        let cookie = format!("other=1; {COOKIE}={token}");
        let headers = test_headers(&[("cookie", cookie.as_str())]);
        let s = sessions.of(&headers).unwrap();
        assert_eq!(s.caller.name.as_deref(), Some("alice"));
        assert!(s.csrf_ok(&s.csrf.clone()));
        assert!(!s.csrf_ok("nope"));
        sessions.end(&headers);
        assert!(sessions.of(&headers).is_none());
        assert!(
            sessions
                .of(&test_headers(&[("cookie", "pap_session=forged")]))
                .is_none()
        );
    }

    #[test]
    fn cookies_are_http_only_same_site_strict_and_secure_under_tls() {
        let c = set_cookie("abc", true);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.ends_with("Secure"));
        assert!(!set_cookie("abc", false).contains("Secure"));
        assert!(set_cookie("", false).contains("Max-Age=0"));
    }
}
