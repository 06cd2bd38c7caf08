//! The principals of `listen.auth` as serve holds them: tokens as SHA-256 digests, passwords
//! as argon2 hashes, each with a fingerprint of its credential, and what anonymous may do.
//! One set is in force at a time; a reload resolves a new set (environment variables and
//! credential files) before anything changes, and swaps it in whole (see [`super::auth`]).
//!
//! Whatever outlives one request (a console session, an MCP session, an open stream) holds
//! a [`Caller`] and asks [`Principals::current`] again: a principal that was removed, or
//! whose credential changed, is refused from then on, and one whose scopes changed gets the
//! new ones.

use std::path::Path;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::credential_file::{self, Kind};
use crate::manifest::compiled_listen::{Credential, ListenConfig, Scope};

/// Shortest token accepted: anything shorter can be guessed.
pub(super) const MIN_TOKEN_LEN: usize = 16;

/// A digest of a principal's credential: a session opened with a credential that is no
/// longer the principal's ends. Derived from the secret, so never logged nor shown.
pub(super) type Fingerprint = [u8; 32];

/// Who made a request: a named principal, or anonymous.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `None` for an anonymous request.
    pub name: Option<String>,
    pub scopes: Vec<Scope>,
    /// The credential it proved (`None` for anonymous).
    pub fingerprint: Option<Fingerprint>,
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

pub(super) enum Secret {
    TokenDigest([u8; 32]),
    PasswordHash(String),
}

pub(super) struct Known {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub secret: Secret,
    pub fingerprint: Fingerprint,
}

impl Known {
    pub(super) fn caller(&self) -> Caller {
        Caller {
            name: Some(self.name.clone()),
            scopes: self.scopes.clone(),
            fingerprint: Some(self.fingerprint),
        }
    }
}

/// Why a set of principals cannot be put in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "principal `{principal}`: the environment variable {var} that holds its token is not set"
    )]
    Unset { principal: String, var: String },
    #[error(
        "principal `{principal}`: the token in {place} is {len} characters; a token has at least {MIN_TOKEN_LEN} (e.g. `openssl rand -hex 32`)"
    )]
    Short {
        principal: String,
        place: String,
        len: usize,
    },
    #[error("principal `{principal}`: {why}")]
    File { principal: String, why: String },
    #[error("principal `{principal}`: password_hash_file {path}: {why}")]
    Hash {
        principal: String,
        path: String,
        why: String,
    },
}

/// What a reload changed, by principal name (for its log line).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Another credential, or other scopes.
    pub changed: Vec<String>,
    /// What anonymous may do changed.
    pub anonymous: bool,
}

pub(super) struct Principals {
    known: Vec<Known>,
    anonymous: Vec<Scope>,
}

pub(super) fn digest(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

fn fingerprint(kind: &[u8], material: &[u8]) -> Fingerprint {
    let mut h = Sha256::new();
    h.update(kind);
    h.update([0]);
    h.update(material);
    h.finalize().into()
}

impl Principals {
    /// The principals of `config`, their tokens read through `env` (serve's environment) or
    /// from their files (paths relative to `root`). Any that cannot be had refuses the set.
    pub(super) fn resolve(
        config: &ListenConfig,
        root: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Principals, ResolveError> {
        let mut known = Vec::new();
        for p in &config.principals {
            let principal = || p.name.clone();
            let token = |token: String, place: String| {
                if token.len() < MIN_TOKEN_LEN {
                    return Err(ResolveError::Short {
                        principal: principal(),
                        place,
                        len: token.len(),
                    });
                }
                Ok(Secret::TokenDigest(digest(token.as_bytes())))
            };
            let secret = match &p.credential {
                Credential::TokenEnv(var) => match env(var).filter(|t| !t.is_empty()) {
                    Some(t) => token(t, var.clone())?,
                    None => {
                        return Err(ResolveError::Unset {
                            principal: principal(),
                            var: var.clone(),
                        });
                    }
                },
                Credential::TokenFile(path) => {
                    let path = root.join(path);
                    let t = credential_file::read(&path, Kind::Token).map_err(|why| {
                        ResolveError::File {
                            principal: principal(),
                            why,
                        }
                    })?;
                    token(t, path.display().to_string())?
                }
                Credential::PasswordHash(hash) => Secret::PasswordHash(hash.clone()),
                Credential::PasswordHashFile(path) => {
                    let path = root.join(path);
                    let file_error = |why| ResolveError::File {
                        principal: principal(),
                        why,
                    };
                    let hash =
                        credential_file::read(&path, Kind::PasswordHash).map_err(file_error)?;
                    crate::manifest::compile_listen::check_password_hash(&hash).map_err(|why| {
                        ResolveError::Hash {
                            principal: principal(),
                            path: path.display().to_string(),
                            why: why.to_string(),
                        }
                    })?;
                    Secret::PasswordHash(hash)
                }
            };
            let fingerprint = match &secret {
                Secret::TokenDigest(d) => fingerprint(b"token", d),
                Secret::PasswordHash(h) => fingerprint(b"password_hash", h.as_bytes()),
            };
            known.push(Known {
                name: p.name.clone(),
                scopes: p.scopes.clone(),
                secret,
                fingerprint,
            });
        }
        Ok(Principals {
            known,
            anonymous: config.anonymous_scopes(),
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    pub(super) fn anonymous(&self) -> Caller {
        Caller {
            name: None,
            scopes: self.anonymous.clone(),
            fingerprint: None,
        }
    }

    pub(super) fn named(&self, name: &str) -> Option<&Known> {
        self.known.iter().find(|k| k.name == name)
    }

    /// The principal whose token this is.
    pub(super) fn by_token(&self, token: &[u8]) -> Option<Caller> {
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
        found.map(Known::caller)
    }

    /// `caller` as this set knows it now: the same principal with the same credential (with
    /// its scopes of now), or anonymous; `None` when the principal is gone or its credential
    /// changed.
    pub(super) fn current(&self, caller: &Caller) -> Option<Caller> {
        let Some(name) = &caller.name else {
            return Some(self.anonymous());
        };
        self.named(name)
            .filter(|k| Some(k.fingerprint) == caller.fingerprint)
            .map(Known::caller)
    }

    /// What changed from `before` to this set.
    pub(super) fn changes_from(&self, before: &Principals) -> Changes {
        let mut changes = Changes {
            anonymous: self.anonymous != before.anonymous,
            ..Changes::default()
        };
        for k in &self.known {
            match before.named(&k.name) {
                None => changes.added.push(k.name.clone()),
                Some(old) if old.fingerprint != k.fingerprint || old.scopes != k.scopes => {
                    changes.changed.push(k.name.clone())
                }
                Some(_) => {}
            }
        }
        for old in &before.known {
            if self.named(&old.name).is_none() {
                changes.removed.push(old.name.clone());
            }
        }
        changes
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::manifest::compiled_listen::Principal;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn principal(name: &str, credential: Credential, scopes: &[Scope]) -> Principal {
        Principal {
            name: name.into(),
            credential,
            scopes: scopes.to_vec(),
        }
    }

    fn config(principals: Vec<Principal>) -> ListenConfig {
        ListenConfig {
            principals,
            ..ListenConfig::default()
        }
    }

    fn env(v: &str) -> Option<String> {
        match v {
            "AM_TOKEN" => Some("0123456789abcdef-token".into()),
            "SHORT" => Some("short".into()),
            _ => None,
        }
    }

    #[test]
    fn a_missing_or_short_token_refuses_the_set() {
        let root = Path::new("/");
        let am = principal("am", Credential::TokenEnv("UNSET".into()), &[Scope::Ingest]);
        let err = Principals::resolve(&config(vec![am]), root, env)
            .err()
            .unwrap();
        assert!(matches!(&err, ResolveError::Unset { var, .. } if var == "UNSET"));
        assert!(err.to_string().contains("UNSET") && err.to_string().contains("not set"));
        let am = principal("am", Credential::TokenEnv("SHORT".into()), &[Scope::Ingest]);
        let err = Principals::resolve(&config(vec![am]), root, env)
            .err()
            .unwrap();
        assert!(err.to_string().contains("at least 16"), "{err}");
    }

    #[test]
    fn a_token_file_is_read_relative_to_the_root_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("am.token");
        std::fs::write(&file, "0123456789abcdef-from-file\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let am = principal(
            "am",
            Credential::TokenFile("am.token".into()),
            &[Scope::Ingest],
        );
        let p = Principals::resolve(&config(vec![am.clone()]), dir.path(), env).unwrap();
        let c = p.by_token(b"0123456789abcdef-from-file").unwrap();
        assert_eq!(c.name.as_deref(), Some("am"));
        std::fs::write(&file, "too-short\n").unwrap();
        let err = Principals::resolve(&config(vec![am.clone()]), dir.path(), env)
            .err()
            .unwrap();
        assert!(err.to_string().contains("at least 16"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = Principals::resolve(&config(vec![am]), dir.path(), env)
            .err()
            .unwrap();
        assert!(err.to_string().contains("chmod 640"), "{err}");
    }

    #[test]
    fn a_caller_is_current_while_its_principal_keeps_its_credential() {
        let root = Path::new("/");
        let hash = crate::serve::http::hash_password("correct horse").unwrap();
        let before = Principals::resolve(
            &config(vec![
                principal(
                    "am",
                    Credential::TokenEnv("AM_TOKEN".into()),
                    &[Scope::Ingest],
                ),
                principal(
                    "alice",
                    Credential::PasswordHash(hash.clone()),
                    &[Scope::Read],
                ),
            ]),
            root,
            env,
        )
        .unwrap();
        let am = before.by_token(b"0123456789abcdef-token").unwrap();
        let alice = before.named("alice").unwrap().caller();
        // am is gone, alice gained `approve`, bob is new: anonymous may do nothing now.
        let other = crate::serve::http::hash_password("other").unwrap();
        let after = Principals::resolve(
            &config(vec![
                principal(
                    "alice",
                    Credential::PasswordHash(hash),
                    &[Scope::Read, Scope::Approve],
                ),
                principal(
                    "bob",
                    Credential::PasswordHash(other.clone()),
                    &[Scope::Read],
                ),
            ]),
            root,
            env,
        )
        .unwrap();
        assert_eq!(after.current(&am), None);
        assert!(after.current(&alice).unwrap().may(Scope::Approve));
        let changes = after.changes_from(&before);
        assert_eq!(changes.added, ["bob"]);
        assert_eq!(changes.removed, ["am"]);
        assert_eq!(changes.changed, ["alice"]);
        assert!(!changes.anonymous);
        // alice's password changed: her old sessions are not current.
        let rotated = Principals::resolve(
            &config(vec![principal(
                "alice",
                Credential::PasswordHash(other),
                &[Scope::Read],
            )]),
            root,
            env,
        )
        .unwrap();
        assert_eq!(rotated.current(&alice), None);
        // Anonymous is always current, with what it may do now.
        let open = Principals::resolve(&config(vec![]), root, env).unwrap();
        let anon = open.anonymous();
        assert!(anon.may(Scope::Read));
        assert!(rotated.current(&anon).unwrap().scopes.is_empty());
        assert!(rotated.changes_from(&open).anonymous);
    }
}
