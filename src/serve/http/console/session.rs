//! Console sessions: a random token in an `HttpOnly`, `SameSite=Strict` cookie (`Secure`
//! under TLS), naming the principal that logged in, with a CSRF token its forms carry.
//!
//! Sessions live in serve's memory: a restart logs everyone out, which for a console is the
//! safe side. A session lasts [`LIFETIME`] from its login; the table is bounded, the oldest
//! session giving way. A session is only as good as its principal: each request asks the
//! principals in force whether it still exists with the credential it logged in with (and
//! takes its scopes of now), and a reload ends the sessions of those that do not.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

use crate::serve::http::principals::{Caller, Principals};

pub(super) const COOKIE: &str = "pap_session";
/// How long a login lasts.
pub(super) const LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most.
const MAX_SESSIONS: usize = 10_000;

#[derive(Clone)]
pub(crate) struct Session {
    pub caller: Caller,
    /// Every form of this session carries it; a post without it is refused.
    pub csrf: String,
    started: Instant,
}

#[derive(Default)]
pub(crate) struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes as hex.
pub(super) fn random_token() -> String {
    crate::serve::http::console_token()
}

impl Sessions {
    /// A new session for `caller`; returns its cookie token.
    pub(crate) fn start(&self, caller: Caller) -> String {
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

    /// The live session of a request's cookie, its caller as `principals` know it now. A
    /// session whose principal is gone, or changed its credential, ends here.
    pub(crate) fn of(&self, headers: &HeaderMap, principals: &Principals) -> Option<Session> {
        let token = cookie(headers, COOKIE)?;
        let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        let s = map.get(&token).filter(|s| s.started.elapsed() < LIFETIME)?;
        match principals.current(&s.caller) {
            Some(caller) => Some(Session {
                caller,
                ..s.clone()
            }),
            None => {
                map.remove(&token);
                None
            }
        }
    }

    /// Ends every session `principals` no longer know (see [`Sessions::of`]); returns how
    /// many ended, by principal.
    pub(crate) fn end_unknown(&self, principals: &Principals) -> BTreeMap<String, usize> {
        let mut ended = BTreeMap::new();
        let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| {
            let keep = principals.current(&s.caller).is_some();
            if !keep {
                *ended.entry(s.caller.label().to_owned()).or_default() += 1;
            }
            keep
        });
        ended
    }

    pub(crate) fn end(&self, headers: &HeaderMap) {
        if let Some(token) = cookie(headers, COOKIE) {
            let mut map = self.by_token.lock().unwrap_or_else(|p| p.into_inner());
            map.remove(&token);
        }
    }
}

impl Session {
    /// Whether `presented` is this session's CSRF token (compared in constant time).
    pub(crate) fn csrf_ok(&self, presented: &str) -> bool {
        presented.len() == self.csrf.len()
            && bool::from(presented.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

/// The `Set-Cookie` value that starts (or, with an empty token, ends) a session.
pub(super) fn set_cookie(token: &str, secure: bool) -> String {
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

    use crate::manifest::compiled_listen::{Credential, ListenConfig, Scope};
    use crate::serve::http::principals::tests::principal;

    /// alice with a token in `ALICE`, with these scopes.
    fn principals(token: &str, scopes: &[Scope]) -> Principals {
        let config = ListenConfig {
            principals: vec![principal(
                "alice",
                Credential::TokenEnv("ALICE".into()),
                scopes,
            )],
            ..ListenConfig::default()
        };
        Principals::resolve(&config, std::path::Path::new("/"), |_| Some(token.into())).unwrap()
    }

    const TOKEN: &str = "alice-0123456789abcdef";

    fn headers_of(token: &str) -> HeaderMap {
        let cookie = format!("other=1; {COOKIE}={token}");
        test_headers(&[("cookie", cookie.as_str())])
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_ended() {
        let p = principals(TOKEN, &[Scope::Read]);
        let sessions = Sessions::default();
        let token = sessions.start(p.by_token(TOKEN.as_bytes()).unwrap());
        let headers = headers_of(&token);
        let s = sessions.of(&headers, &p).unwrap();
        assert_eq!(s.caller.name.as_deref(), Some("alice"));
        assert!(s.csrf_ok(&s.csrf.clone()));
        assert!(!s.csrf_ok("nope"));
        sessions.end(&headers);
        assert!(sessions.of(&headers, &p).is_none());
        assert!(
            sessions
                .of(&test_headers(&[("cookie", "pap_session=forged")]), &p)
                .is_none()
        );
    }

    #[test]
    fn a_session_follows_its_principal_and_ends_with_its_credential() {
        let p = principals(TOKEN, &[Scope::Read]);
        let sessions = Sessions::default();
        let alice = p.by_token(TOKEN.as_bytes()).unwrap();
        let (one, two) = (sessions.start(alice.clone()), sessions.start(alice));
        // Scopes taken away or given apply to the open session at once.
        let more = principals(TOKEN, &[Scope::Read, Scope::Approve]);
        let s = sessions.of(&headers_of(&one), &more).unwrap();
        assert!(s.caller.may(Scope::Approve));
        assert!(sessions.end_unknown(&more).is_empty());
        // A rotated token ends both sessions: one when it is next used, the other by the purge.
        let rotated = principals("alice-rotated-0123456789", &[Scope::Read]);
        assert!(sessions.of(&headers_of(&one), &rotated).is_none());
        assert!(
            sessions.of(&headers_of(&one), &p).is_none(),
            "it stays ended"
        );
        let ended = sessions.end_unknown(&rotated);
        assert_eq!(ended.get("alice"), Some(&1));
        assert!(sessions.of(&headers_of(&two), &p).is_none());
    }

    #[test]
    fn cookies_are_http_only_same_site_strict_and_secure_under_tls() {
        let c = set_cookie("abc", true);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.ends_with("Secure"));
        assert!(!set_cookie("abc", false).contains("Secure"));
        assert!(set_cookie("", false).contains("Max-Age=0"));
    }
}
