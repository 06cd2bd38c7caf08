//! `Host` and `Origin` checks: a request must name this server, and a browser's request must
//! come from one of its pages.
//!
//! DNS rebinding points a name the attacker controls at 127.0.0.1, so a page of theirs can
//! reach a loopback pap: its requests carry the attacker's name in `Host`, which is refused.
//! A browser's post carries the page's origin in `Origin`: anything that changes state is
//! refused unless that origin is exactly this server as the request reached it (scheme, host
//! and port), so another web app on the same machine (another port of `localhost`) cannot
//! post either; `Sec-Fetch-Site: cross-site` is refused too. Programs (curl, Alertmanager)
//! send neither `Origin` nor `Sec-Fetch-Site` and are unaffected.

use std::net::IpAddr;

use axum::http::{HeaderMap, Method, header};

use crate::manifest::compile_listen::split_host_port;

/// The hosts requests may name.
#[derive(Debug, Clone)]
pub struct Hosts {
    /// (lower-case host, port if the entry names one).
    allowed: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// Loopback names, the configured hosts, and the listen address's host when it is not a
    /// wildcard (`0.0.0.0`, `[::]`).
    pub fn new(configured: &[String], listen_host: Option<&str>) -> Hosts {
        let mut allowed: Vec<(String, Option<u16>)> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(|h| (h.to_owned(), None))
            .collect();
        for entry in configured {
            allowed.push(parse_entry(entry));
        }
        if let Some(host) = listen_host
            && !matches!(host, "0.0.0.0" | "[::]")
        {
            allowed.push((host.to_ascii_lowercase(), None));
        }
        Hosts { allowed }
    }

    /// Whether `host` (a `Host` header, or an origin's authority) may be served. `local` is
    /// the address the client connected to: naming it as an IP literal cannot be DNS
    /// rebinding, which needs a name.
    pub fn allows(&self, authority: &str, local: Option<IpAddr>) -> bool {
        let (host, port) = parse_entry(authority);
        if self
            .allowed
            .iter()
            .any(|(h, p)| *h == host && (p.is_none() || *p == port))
        {
            return true;
        }
        let literal = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&host);
        // A dual-stack listener sees IPv4 clients at IPv4-mapped addresses.
        local.is_some_and(|ip| {
            literal
                .parse::<IpAddr>()
                .is_ok_and(|named| named.to_canonical() == ip.to_canonical())
        })
    }
}

fn parse_entry(text: &str) -> (String, Option<u16>) {
    let text = text.trim().to_ascii_lowercase();
    match split_host_port(&text) {
        Some((host, port)) => match port.parse() {
            Ok(port) => (host.to_owned(), Some(port)),
            Err(_) => (text.clone(), None),
        },
        None => (text.clone(), None),
    }
}

/// Why a request was refused before anything else looked at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Refusal {
    Host(String),
    Origin(String),
}

impl Refusal {
    pub(super) fn message(&self) -> String {
        match self {
            Refusal::Host(h) => format!(
                "Host `{}` is not served here (listen.allowed_hosts)",
                crate::term::for_humans(h)
            ),
            Refusal::Origin(o) => format!(
                "requests from `{}` are not accepted (cross-site, or not in listen.allowed_hosts)",
                crate::term::for_humans(o)
            ),
        }
    }
}

/// Checks `Host` always, and for a request that may change state (any request when
/// `strict`), `Origin` (which must be this server, `https` when `tls`) and `Sec-Fetch-Site`.
pub(super) fn check(
    hosts: &Hosts,
    method: &Method,
    headers: &HeaderMap,
    local: Option<IpAddr>,
    tls: bool,
    strict: bool,
) -> Result<(), Refusal> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if host.is_empty() || !hosts.allows(host, local) {
        return Err(Refusal::Host(host.to_owned()));
    }
    let safe = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if safe && !strict {
        return Ok(());
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let scheme = if tls { "https://" } else { "http://" };
        let same = origin
            .strip_prefix(scheme)
            .is_some_and(|authority| authority.eq_ignore_ascii_case(host));
        if !same {
            return Err(Refusal::Origin(origin.to_owned()));
        }
    }
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| site.eq_ignore_ascii_case("cross-site"))
    {
        return Err(Refusal::Origin("a cross-site page".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::serve::http::test_headers as headers;

    #[test]
    fn loopback_names_configured_hosts_and_the_connected_ip_are_allowed() {
        let hosts = Hosts::new(&["pap.example.com".into(), "ops.example:8443".into()], None);
        let local: Option<IpAddr> = Some("10.0.0.5".parse().unwrap());
        for ok in [
            "localhost:8080",
            "127.0.0.1",
            "[::1]:9",
            "PAP.example.com",
            "ops.example:8443",
            "10.0.0.5:8080",
        ] {
            assert!(hosts.allows(ok, local), "{ok}");
        }
        for bad in [
            "evil.example",
            "ops.example:80",
            "10.0.0.6",
            "localhost.evil",
        ] {
            assert!(!hosts.allows(bad, local), "{bad}");
        }
    }

    #[test]
    fn a_foreign_host_or_origin_is_refused_for_posts() {
        let hosts = Hosts::new(&[], Some("127.0.0.1"));
        let post = Method::POST;
        assert!(
            check(
                &hosts,
                &post,
                &headers(&[("host", "127.0.0.1:1")]),
                None,
                false,
                false
            )
            .is_ok()
        );
        assert!(matches!(
            check(
                &hosts,
                &post,
                &headers(&[("host", "rebound.evil:1")]),
                None,
                false,
                false
            ),
            Err(Refusal::Host(_))
        ));
        assert!(matches!(
            check(&hosts, &post, &HeaderMap::new(), None, false, false),
            Err(Refusal::Host(_))
        ));
        let cross = headers(&[("host", "localhost:1"), ("origin", "https://evil.example")]);
        assert!(matches!(
            check(&hosts, &post, &cross, None, false, false),
            Err(Refusal::Origin(_))
        ));
        // Reading is not a cross-site risk: the page cannot read the answer.
        assert!(check(&hosts, &Method::GET, &cross, None, false, false).is_ok());
        // /mcp: a cross-site GET (the event stream) is refused too.
        assert!(check(&hosts, &Method::GET, &cross, None, false, true).is_err());
        let null = headers(&[("host", "localhost:1"), ("origin", "null")]);
        assert!(check(&hosts, &post, &null, None, false, false).is_err());
        let same = headers(&[("host", "localhost:1"), ("origin", "http://localhost:1")]);
        assert!(check(&hosts, &post, &same, None, false, false).is_ok());
        // Another port of the same host (another web app), or the other scheme: refused.
        let port = headers(&[("host", "localhost:1"), ("origin", "http://localhost:3000")]);
        assert!(check(&hosts, &post, &port, None, false, false).is_err());
        assert!(check(&hosts, &post, &same, None, true, false).is_err());
        let fetch = headers(&[("host", "localhost:1"), ("sec-fetch-site", "cross-site")]);
        assert!(check(&hosts, &post, &fetch, None, false, false).is_err());
    }
}
