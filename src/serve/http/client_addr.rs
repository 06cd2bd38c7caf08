//! The client's address behind a reverse proxy (`listen.trusted_proxies`).
//!
//! Behind an ingress or a proxy every request comes from the proxy's address, so the
//! back-off after failed credentials and the logs would lump every client together. A proxy
//! names the client in `Forwarded` (RFC 7239) or `X-Forwarded-For`; those headers are taken
//! only from a peer that is a trusted proxy, since anyone else could write them. Each proxy
//! appends the address it received from, so the list is read from the right: the first
//! address that is not itself a trusted proxy is the client. `Forwarded` wins over
//! `X-Forwarded-For` when both are present. A header that does not parse is ignored (the
//! peer is then the client), and an obfuscated or `unknown` node stops the walk there.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// How many hops of a forwarding header are read at most (a long header costs nothing more).
const MAX_HOPS: usize = 32;

/// The client's address of a request from `peer` with `headers`.
pub(crate) fn client(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    if trusted.is_empty() || !is_trusted(&peer) {
        return peer;
    }
    let hops = forwarded(headers).or_else(|| x_forwarded_for(headers));
    let Some(hops) = hops else {
        return peer;
    };
    let mut client = peer;
    for hop in hops.iter().rev().take(MAX_HOPS) {
        match hop {
            Some(ip) => {
                client = *ip;
                if !is_trusted(ip) {
                    break;
                }
            }
            // `unknown` or an obfuscated name: nothing further left can be trusted.
            None => break,
        }
    }
    client
}

/// The `for=` nodes of every `Forwarded` header, in order (`None` for a node that is not an
/// address); `None` when there is no such header or one does not parse.
fn forwarded(headers: &HeaderMap) -> Option<Vec<Option<IpAddr>>> {
    let mut hops = Vec::new();
    let mut any = false;
    for value in headers.get_all(axum::http::header::FORWARDED) {
        any = true;
        let text = value.to_str().ok()?;
        for element in text.split(',') {
            let node = element
                .split(';')
                .filter_map(|pair| pair.split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
                .map(|(_, value)| value.trim());
            if let Some(node) = node {
                hops.push(node_address(node));
            }
        }
    }
    (any && !hops.is_empty()).then_some(hops)
}

/// A `Forwarded` node: `192.0.2.60`, `"192.0.2.60:4711"`, `"[2001:db8::1]:4711"`,
/// `unknown` or `_hidden` (the last two are no address).
fn node_address(node: &str) -> Option<IpAddr> {
    let node = node.trim_matches('"');
    if let Some(rest) = node.strip_prefix('[') {
        return rest.split_once(']')?.0.parse().ok();
    }
    let host = match node.rsplit_once(':') {
        // An IPv4 address with a port; a bare IPv6 address has several colons.
        Some((host, port)) if !host.contains(':') && !port.is_empty() => host,
        _ => node,
    };
    host.parse().ok()
}

/// The addresses of every `X-Forwarded-For` header, in order.
fn x_forwarded_for(headers: &HeaderMap) -> Option<Vec<Option<IpAddr>>> {
    let mut hops = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let text = value.to_str().ok()?;
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            hops.push(node_address(item));
        }
    }
    (!hops.is_empty()).then_some(hops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|n| n.parse().unwrap()).collect()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        crate::serve::http::test_headers(pairs)
    }

    #[test]
    fn forwarding_headers_count_only_from_a_trusted_peer() {
        let h = headers(&[("x-forwarded-for", "203.0.113.7")]);
        let proxies = nets(&["10.0.0.0/8"]);
        assert_eq!(client(ip("10.1.2.3"), &h, &proxies), ip("203.0.113.7"));
        // Anyone else may write the header: it is ignored.
        assert_eq!(client(ip("198.51.100.9"), &h, &proxies), ip("198.51.100.9"));
        // No trusted proxies: never read.
        assert_eq!(client(ip("10.1.2.3"), &h, &[]), ip("10.1.2.3"));
    }

    #[test]
    fn the_list_is_read_from_the_right_past_every_trusted_proxy() {
        let proxies = nets(&["10.0.0.0/8", "192.168.0.1/32"]);
        // A client-written first entry is not believed: the proxy appended the real one.
        let h = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.7, 10.9.9.9")]);
        assert_eq!(client(ip("192.168.0.1"), &h, &proxies), ip("203.0.113.7"));
        // Several headers are one list.
        let mut h = headers(&[("x-forwarded-for", "1.2.3.4")]);
        h.append("x-forwarded-for", "203.0.113.8".parse().unwrap());
        assert_eq!(client(ip("10.0.0.1"), &h, &proxies), ip("203.0.113.8"));
        // All trusted: the leftmost is the client.
        let h = headers(&[("x-forwarded-for", "10.3.3.3, 10.2.2.2")]);
        assert_eq!(client(ip("10.0.0.1"), &h, &proxies), ip("10.3.3.3"));
    }

    #[test]
    fn forwarded_wins_and_its_nodes_parse_as_rfc_7239_writes_them() {
        let proxies = nets(&["10.0.0.0/8", "::1/128"]);
        let h = headers(&[
            (
                "forwarded",
                "for=192.0.2.43, for=\"[2001:db8:cafe::17]:4711\";proto=https",
            ),
            ("x-forwarded-for", "198.51.100.1"),
        ]);
        assert_eq!(
            client(ip("10.0.0.1"), &h, &proxies),
            ip("2001:db8:cafe::17")
        );
        let h = headers(&[("forwarded", "for=\"192.0.2.60:8080\";by=203.0.113.43")]);
        assert_eq!(client(ip("::1"), &h, &proxies), ip("192.0.2.60"));
        // An obfuscated node stops the walk at the proxy that wrote it.
        let h = headers(&[("forwarded", "for=198.51.100.3, for=_hidden")]);
        assert_eq!(client(ip("10.0.0.1"), &h, &proxies), ip("10.0.0.1"));
    }

    #[test]
    fn a_header_that_does_not_parse_leaves_the_peer() {
        let proxies = nets(&["10.0.0.0/8"]);
        let h = headers(&[("x-forwarded-for", "not an address")]);
        assert_eq!(client(ip("10.0.0.1"), &h, &proxies), ip("10.0.0.1"));
        let h = headers(&[("forwarded", "proto=https")]);
        assert_eq!(client(ip("10.0.0.1"), &h, &proxies), ip("10.0.0.1"));
    }
}
