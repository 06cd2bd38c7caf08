//! pap.yaml compile step for `listen:`: the address, TLS files, limits and principals.

use std::collections::HashSet;
use std::path::PathBuf;

use super::compile_agent::valid_env_name;
use super::compiled_listen::{Credential, ListenConfig, Principal, Scope, TlsFiles};
use super::duration;
use super::file_ctx::{FileCtx, HelpExt};
use super::raw;
use crate::path;

pub fn compile(raw: &raw::ListenSettings, ctx: &mut FileCtx) -> ListenConfig {
    let defaults = ListenConfig::default();
    let mut config = ListenConfig {
        address: raw.address.clone(),
        tls: raw.tls.as_ref().map(|t| TlsFiles {
            cert: PathBuf::from(&t.cert),
            key: PathBuf::from(&t.key),
        }),
        allowed_hosts: raw.allowed_hosts.clone(),
        allow_unauthenticated: raw.allow_unauthenticated.unwrap_or(false),
        max_body_bytes: raw.max_body_bytes.unwrap_or(defaults.max_body_bytes),
        max_queued_events: raw
            .max_queued_events
            .map_or(defaults.max_queued_events, |n| n as usize),
        max_connections: raw
            .max_connections
            .map_or(defaults.max_connections, |n| n as usize),
        ..defaults
    };
    if let Some(address) = &raw.address
        && let Err(why) = check_address(address)
    {
        ctx.at(
            "invalid-listen-address",
            &path!["listen", "address"],
            format!("`{address}`: {why}"),
        )
        .help("write HOST:PORT, e.g. 127.0.0.1:8080, [::1]:8080 or 0.0.0.0:8080");
    }
    for (i, host) in raw.allowed_hosts.iter().enumerate() {
        if let Err(why) = check_host(host) {
            ctx.at(
                "invalid-listen-address",
                &path!["listen", "allowed_hosts", i],
                format!("allowed host `{host}`: {why}"),
            )
            .help("a host name or address, with an optional :PORT (no scheme, no path)");
        }
    }
    if let Some(text) = &raw.read_timeout {
        match duration::parse(text) {
            Ok(d) if d.is_zero() => ctx
                .at(
                    "invalid-duration",
                    &path!["listen", "read_timeout"],
                    format!("`read_timeout` `{text}`: must be longer than zero"),
                )
                .help("durations look like 10s, 30s or 2m"),
            Ok(d) => config.read_timeout = d,
            Err(reason) => ctx
                .at(
                    "invalid-duration",
                    &path!["listen", "read_timeout"],
                    format!("`read_timeout` `{text}`: {reason}"),
                )
                .help("durations look like 10s, 30s or 2m"),
        }
    }
    if let Some(auth) = &raw.auth {
        config.principals = compile_principals(&auth.principals, ctx);
        if let Some(anonymous) = &auth.anonymous {
            if let Some(i) = anonymous.iter().position(|s| *s == Scope::Approve) {
                ctx.at(
                    "anonymous-approve",
                    &path!["listen", "auth", "anonymous", i],
                    "`approve` cannot be anonymous: an approval names the person who gave it",
                )
                .help("give `approve` to a named principal with a password hash or a token");
            }
            config.anonymous = Some(anonymous.clone());
        }
    }
    config
}

fn compile_principals(raw: &[raw::PrincipalSettings], ctx: &mut FileCtx) -> Vec<Principal> {
    let mut seen = HashSet::new();
    let mut principals = Vec::new();
    for (i, p) in raw.iter().enumerate() {
        let at = path!["listen", "auth", "principals", i];
        if !valid_principal_name(&p.name) {
            ctx.at(
                "invalid-id",
                &path!["listen", "auth", "principals", i, "name"],
                format!(
                    "principal name `{}` must be 1 to 64 letters, digits, `.`, `-`, `_` or `@`",
                    p.name
                ),
            );
        } else if !seen.insert(p.name.clone()) {
            ctx.at(
                "duplicate-principal",
                &path!["listen", "auth", "principals", i, "name"],
                format!("principal `{}` is defined twice", p.name),
            );
        }
        let credential = match (&p.token, &p.password_hash) {
            (Some(token), None) => match token_env(token) {
                Some(name) => Some(Credential::TokenEnv(name)),
                None => {
                    ctx.at(
                        "plain-secret",
                        &path!["listen", "auth", "principals", i, "token"],
                        format!(
                            "principal `{}`: a token is never written into a file; give the environment variable that holds it",
                            p.name
                        ),
                    )
                    .help("write `token: ${PAP_TOKEN_NAME}` and set PAP_TOKEN_NAME in serve's environment");
                    None
                }
            },
            (None, Some(hash)) => match check_password_hash(hash) {
                Ok(()) => Some(Credential::PasswordHash(hash.clone())),
                Err(why) => {
                    ctx.at(
                        "invalid-password-hash",
                        &path!["listen", "auth", "principals", i, "password_hash"],
                        format!("principal `{}`: {why}", p.name),
                    )
                    .help("make one with `pap hash-password` (it reads the password from the terminal or stdin)");
                    None
                }
            },
            (token, _) => {
                let what = if token.is_some() { "both" } else { "neither" };
                ctx.at_key(
                    "principal-credential",
                    &at,
                    format!(
                        "principal `{}` has {what} of `token` and `password_hash`; give exactly one",
                        p.name
                    ),
                )
                .help("`token: ${ENV_NAME}` for programs, `password_hash` for people logging in to the console");
                None
            }
        };
        if let Some(credential) = credential {
            let mut scopes = p.scopes.clone();
            scopes.sort();
            scopes.dedup();
            principals.push(Principal {
                name: p.name.clone(),
                credential,
                scopes,
            });
        }
    }
    principals
}

/// `${NAME}` and nothing else: the name of the variable that holds the token.
fn token_env(text: &str) -> Option<String> {
    let name = text.strip_prefix("${")?.strip_suffix('}')?;
    valid_env_name(name).then(|| name.to_owned())
}

/// A PHC string of one of argon2's variants, with a salt and a hash.
pub fn check_password_hash(text: &str) -> Result<(), String> {
    let parsed = argon2::PasswordHash::new(text)
        .map_err(|e| format!("not a password hash in PHC form ({e})"))?;
    if !matches!(
        parsed.algorithm.as_str(),
        "argon2id" | "argon2i" | "argon2d"
    ) {
        return Err(format!(
            "the hash is `{}`; pap verifies argon2 hashes only",
            parsed.algorithm
        ));
    }
    if parsed.hash.is_none() || parsed.salt.is_none() {
        return Err("the hash has no salt or no hash value".into());
    }
    argon2::Params::try_from(&parsed)
        .map(|_| ())
        .map_err(|e| format!("its argon2 parameters are not valid ({e})"))
}

fn valid_principal_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '@'))
}

/// `HOST:PORT`, where HOST is a name, an IPv4 address or a bracketed IPv6 address.
pub fn check_address(text: &str) -> Result<(), String> {
    let (host, port) = split_host_port(text).ok_or("no `:PORT` at the end")?;
    if host.is_empty() {
        return Err("no host before the port".into());
    }
    port.parse::<u16>()
        .map_err(|_| format!("`{port}` is not a port number (0 to 65535)"))?;
    check_host(host)
}

/// A host with an optional `:PORT`, as `Host` headers carry it.
pub fn check_host(text: &str) -> Result<(), String> {
    let host = match split_host_port(text) {
        Some((host, port)) => {
            port.parse::<u16>()
                .map_err(|_| format!("`{port}` is not a port number"))?;
            host
        }
        None => text,
    };
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<std::net::Ipv6Addr>()
            .map(|_| ())
            .map_err(|_| format!("`{inner}` is not an IPv6 address"));
    }
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    if ok {
        Ok(())
    } else {
        Err("not a host name or address".into())
    }
}

/// `host:port` → (`host`, `port`); an unbracketed IPv6 address has no port.
pub fn split_host_port(text: &str) -> Option<(&str, &str)> {
    let (host, port) = text.rsplit_once(':')?;
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return None;
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_a_host_and_a_port() {
        assert!(check_address("127.0.0.1:8080").is_ok());
        assert!(check_address("[::1]:0").is_ok());
        assert!(check_address("pap.example.com:443").is_ok());
        assert!(check_address("127.0.0.1").is_err());
        assert!(check_address(":8080").is_err());
        assert!(check_address("127.0.0.1:99999").is_err());
        assert!(check_address("http://x:1").is_err());
        assert!(check_address("::1:80").is_err());
    }

    #[test]
    fn tokens_are_only_environment_references() {
        assert_eq!(token_env("${AM_TOKEN}").as_deref(), Some("AM_TOKEN"));
        assert_eq!(token_env("s3cret"), None);
        assert_eq!(token_env("${A}x"), None);
        assert_eq!(token_env("${1A}"), None);
    }

    #[test]
    fn password_hashes_must_be_argon2() {
        let good = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG";
        assert!(
            check_password_hash(good).is_ok(),
            "{:?}",
            check_password_hash(good)
        );
        assert!(check_password_hash("hunter2").is_err());
        assert!(
            check_password_hash(
                "$pbkdf2-sha256$i=1000$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG"
            )
            .is_err()
        );
    }
}
