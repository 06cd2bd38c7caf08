//! pap.yaml compile step for `listen:`: the address, TLS files, limits and principals.

use std::collections::HashSet;
use std::path::PathBuf;

use super::compiled_listen::{Credential, ListenConfig, Principal, Scope, TlsFiles};
use super::duration;
use super::file_ctx::{FileCtx, HelpExt};
use super::raw;
use crate::interpolate::valid_env_name;
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
    if let Some(url) = &raw.public_url {
        let trimmed = url.trim_end_matches('/');
        if crate::adapter::web_url(trimmed) && !trimmed.contains(['?', '#']) {
            config.public_url = Some(trimmed.to_owned());
        } else {
            ctx.at(
                "invalid-listen-address",
                &path!["listen", "public_url"],
                format!("`{url}` is not an http(s) URL without a query or fragment"),
            )
            .help("the console's address as people reach it, e.g. https://pap.example.com");
        }
    }
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
    for (i, text) in raw.trusted_proxies.iter().enumerate() {
        match parse_network(text) {
            Some(net) => config.trusted_proxies.push(net),
            None => {
                ctx.at(
                    "invalid-listen-address",
                    &path!["listen", "trusted_proxies", i],
                    format!("trusted proxy `{text}` is not an IP address or a CIDR"),
                )
                .help("an address (10.1.2.3, ::1) or a network (10.0.0.0/8, fd00::/8)");
            }
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

/// An address (a network of one) or a CIDR.
fn parse_network(text: &str) -> Option<ipnet::IpNet> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .ok()
        .or_else(|| {
            text.parse::<std::net::IpAddr>()
                .ok()
                .map(ipnet::IpNet::from)
        })
        .map(|net| net.trunc())
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
        let given: Vec<&str> = [
            ("token", p.token.is_some()),
            ("token_file", p.token_file.is_some()),
            ("password_hash", p.password_hash.is_some()),
            ("password_hash_file", p.password_hash_file.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect();
        let credential = match given.as_slice() {
            ["token"] => token_credential(p, i, ctx),
            ["token_file"] => file_credential(p, i, "token_file", ctx).map(Credential::TokenFile),
            ["password_hash"] => hash_credential(p, i, ctx),
            ["password_hash_file"] => {
                file_credential(p, i, "password_hash_file", ctx).map(Credential::PasswordHashFile)
            }
            _ => {
                let what = if given.is_empty() {
                    "none".to_owned()
                } else {
                    given
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                };
                ctx.at_key(
                    "principal-credential",
                    &at,
                    format!(
                        "principal `{}` has {what} of `token`, `token_file`, `password_hash` and `password_hash_file`; give exactly one",
                        p.name
                    ),
                )
                .help("`token: ${ENV_NAME}` or `token_file: PATH` for programs, `password_hash` or `password_hash_file: PATH` for people logging in to the console");
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

fn token_credential(p: &raw::PrincipalSettings, i: usize, ctx: &mut FileCtx) -> Option<Credential> {
    let token = p.token.as_deref()?;
    if let Some(name) = token_env(token) {
        return Some(Credential::TokenEnv(name));
    }
    ctx.at(
        "plain-secret",
        &path!["listen", "auth", "principals", i, "token"],
        format!(
            "principal `{}`: a token is never written into a file; give the environment variable that holds it",
            p.name
        ),
    )
    .help("write `token: ${PAP_TOKEN_NAME}` and set PAP_TOKEN_NAME in serve's environment, or `token_file: PATH` to a file only serve may read");
    None
}

fn hash_credential(p: &raw::PrincipalSettings, i: usize, ctx: &mut FileCtx) -> Option<Credential> {
    let hash = p.password_hash.as_deref()?;
    match check_password_hash(hash) {
        Ok(()) => Some(Credential::PasswordHash(hash.to_owned())),
        Err(why) => {
            ctx.at(
                "invalid-password-hash",
                &path!["listen", "auth", "principals", i, "password_hash"],
                format!("principal `{}`: {why}", p.name),
            )
            .help("make one with `pap hash-password` (it reads the password from the terminal or stdin)");
            None
        }
    }
}

/// The path of `token_file` or `password_hash_file`. The file itself is read by serve (at
/// start and at each reload), never here: lint runs where the secrets are not.
fn file_credential(
    p: &raw::PrincipalSettings,
    i: usize,
    key: &'static str,
    ctx: &mut FileCtx,
) -> Option<PathBuf> {
    let text = match key {
        "token_file" => p.token_file.as_deref(),
        _ => p.password_hash_file.as_deref(),
    }?;
    if text.trim().is_empty() || text.contains('\0') {
        ctx.at(
            "principal-credential",
            &path!["listen", "auth", "principals", i, key],
            format!("principal `{}`: `{key}` is not a path", p.name),
        )
        .help("a path relative to the project root, or an absolute one, e.g. /etc/pap/tokens/NAME");
        return None;
    }
    Some(PathBuf::from(text))
}

/// `${NAME}` and nothing else: the name of the variable that holds the token.
fn token_env(text: &str) -> Option<String> {
    let name = text.strip_prefix("${")?.strip_suffix('}')?;
    valid_env_name(name).then(|| name.to_owned())
}

crate::reason::reason_error!(
    /// Why a password hash is not a usable PHC string.
    InvalidPasswordHash
);

/// A PHC string of one of argon2's variants, with a salt and a hash.
pub fn check_password_hash(text: &str) -> Result<(), InvalidPasswordHash> {
    check_password_hash_reason(text).map_err(InvalidPasswordHash::from)
}

/// [`check_password_hash`], with the reason as text (for messages that quote it).
pub(crate) fn check_password_hash_reason(text: &str) -> Result<(), String> {
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

crate::reason::reason_error!(
    /// Why a listen address is not `HOST:PORT`.
    InvalidAddress
);

/// `HOST:PORT`, where HOST is a name, an IPv4 address or a bracketed IPv6 address.
pub fn check_address(text: &str) -> Result<(), InvalidAddress> {
    check_address_reason(text).map_err(InvalidAddress::from)
}

/// [`check_address`], with the reason as text (for messages that quote it).
pub(crate) fn check_address_reason(text: &str) -> Result<(), String> {
    let (host, port) = split_host_port(text).ok_or("no `:PORT` at the end")?;
    if host.is_empty() {
        return Err("no host before the port".into());
    }
    port.parse::<u16>()
        .map_err(|_| format!("`{port}` is not a port number (0 to 65535)"))?;
    check_host(host)
}

/// A host with an optional `:PORT`, as `Host` headers carry it.
pub(crate) fn check_host(text: &str) -> Result<(), String> {
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

    /// The principals `listen:` in `yaml` compiles to, and the codes it reports.
    fn principals_of(yaml: &str) -> (Vec<Principal>, Vec<&'static str>) {
        let tree = crate::manifest::yaml_tree::parse(yaml).unwrap();
        let settings: raw::ListenSettings = serde_saphyr::from_str(yaml).unwrap();
        let mut diags = Vec::new();
        let mut ctx = FileCtx {
            file: "pap.yaml",
            tree: &tree,
            diags: &mut diags,
        };
        let config = compile(&settings, &mut ctx);
        (config.principals, diags.iter().map(|d| d.code).collect())
    }

    #[test]
    fn a_principal_has_exactly_one_credential_and_files_are_paths_not_read() {
        let (p, codes) = principals_of(
            "auth:\n  principals:\n    - {name: am, token_file: /nowhere/am, scopes: [ingest]}\n    - {name: al, password_hash_file: hashes/al, scopes: [read]}\n",
        );
        assert!(codes.is_empty(), "{codes:?}");
        assert_eq!(p[0].credential, Credential::TokenFile("/nowhere/am".into()));
        assert_eq!(
            p[1].credential,
            Credential::PasswordHashFile("hashes/al".into())
        );
        for both in [
            "{name: x, token: \"${X}\", token_file: x, scopes: [ingest]}",
            "{name: x, token_file: x, password_hash_file: y, scopes: [ingest]}",
            "{name: x, scopes: [ingest]}",
        ] {
            let (p, codes) = principals_of(&format!("auth:\n  principals:\n    - {both}\n"));
            assert!(p.is_empty());
            assert_eq!(codes, ["principal-credential"], "{both}");
        }
        let (_, codes) = principals_of(
            "auth:\n  principals:\n    - {name: x, token_file: \"\", scopes: [read]}\n",
        );
        assert_eq!(codes, ["principal-credential"]);
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
