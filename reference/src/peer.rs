//! The listen hub's admission buckets: a caller with a principal is counted
//! under its name, an anonymous one under its peer's IP address, so that
//! one anonymous client holding every stream it may does not deny every
//! other anonymous client.
//!
//! The peer is the `ConnectInfo<SocketAddr>` that axum puts in the request
//! extensions when served with
//! `into_make_service_with_connect_info::<SocketAddr>()`.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use http::request::Parts;
use http::HeaderMap;
use mcp_edge::ServerProfile;

/// Where an anonymous caller's address is read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PeerAddress {
    /// The peer of the connection (default). `X-Forwarded-For` is
    /// ignored: any client can write it.
    #[default]
    Connection,
    /// The rightmost `X-Forwarded-For` entry, the one the trusted proxy in
    /// front of the server appended (the entries before it are the
    /// client's to write); the connection's peer when the header is
    /// missing or that entry is not an address. Only behind a proxy that
    /// appends to the header.
    ForwardedFor,
}

/// The admission bucket of a listen request: `caller:` and the caller's
/// name, or, for an anonymous caller, `peer:` and its address (the
/// prefixes keep a name from ever being counted as an address). `None`,
/// the hub's shared bucket, for an anonymous caller whose peer is unknown.
pub fn admission_key(profile: &ServerProfile, from: PeerAddress, parts: &Parts) -> Option<String> {
    if let Some(caller) = profile.principal(parts) {
        return Some(format!("caller:{}", caller.as_str()));
    }
    let connection = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| peer.ip());
    let address = match from {
        PeerAddress::Connection => connection,
        PeerAddress::ForwardedFor => forwarded_for(&parts.headers).or(connection),
    }?;
    // An IPv4 client seen through an IPv6 socket is the same client.
    Some(format!("peer:{}", address.to_canonical()))
}

/// The address the nearest proxy appended: the last entry of the last
/// `X-Forwarded-For` line.
fn forwarded_for(headers: &HeaderMap) -> Option<IpAddr> {
    let line = headers.get_all("x-forwarded-for").iter().next_back()?;
    let entry = line.to_str().ok()?.rsplit(',').next()?.trim();
    entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|address| address.ip()))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_edge::Principal;

    fn parts(principal: Option<&str>, peer: Option<&str>, forwarded: &[&str]) -> Parts {
        let mut request = http::Request::builder();
        for line in forwarded {
            request = request.header("x-forwarded-for", *line);
        }
        let (mut parts, ()) = request.body(()).expect("a request").into_parts();
        if let Some(name) = principal {
            parts.extensions.insert(Principal::new(name));
        }
        if let Some(peer) = peer {
            let peer: SocketAddr = peer.parse().expect("an address");
            parts.extensions.insert(ConnectInfo(peer));
        }
        parts
    }

    fn key(from: PeerAddress, parts: &Parts) -> Option<String> {
        let profile = ServerProfile::builder().build().expect("a profile");
        admission_key(&profile, from, parts)
    }

    #[test]
    fn callers_are_counted_by_name_and_anonymous_ones_by_address() {
        for from in [PeerAddress::Connection, PeerAddress::ForwardedFor] {
            let alice = parts(Some("alice"), Some("10.0.0.1:5000"), &["10.0.0.9"]);
            assert_eq!(key(from, &alice).as_deref(), Some("caller:alice"));
            // A name that looks like an address is still a name.
            let named = parts(Some("peer:10.0.0.1"), Some("10.0.0.1:5000"), &[]);
            assert_eq!(key(from, &named).as_deref(), Some("caller:peer:10.0.0.1"));
            let anonymous = parts(None, Some("10.0.0.1:5000"), &[]);
            assert_eq!(key(from, &anonymous).as_deref(), Some("peer:10.0.0.1"));
            assert_eq!(key(from, &parts(None, None, &[])), None);
        }
    }

    #[test]
    fn the_port_and_the_ipv6_mapping_do_not_make_a_new_bucket() {
        let from = PeerAddress::Connection;
        for peer in ["10.0.0.1:1", "10.0.0.1:65535", "[::ffff:10.0.0.1]:80"] {
            let anonymous = parts(None, Some(peer), &[]);
            assert_eq!(
                key(from, &anonymous).as_deref(),
                Some("peer:10.0.0.1"),
                "{peer}"
            );
        }
        let v6 = parts(None, Some("[2001:db8::1]:80"), &[]);
        assert_eq!(key(from, &v6).as_deref(), Some("peer:2001:db8::1"));
    }

    #[test]
    fn forwarded_for_is_ignored_unless_trusted() {
        let forged = parts(None, Some("127.0.0.1:5000"), &["203.0.113.7"]);
        let connection = key(PeerAddress::Connection, &forged);
        assert_eq!(connection.as_deref(), Some("peer:127.0.0.1"));
        let trusted = key(PeerAddress::ForwardedFor, &forged);
        assert_eq!(trusted.as_deref(), Some("peer:203.0.113.7"));
    }

    #[test]
    fn the_rightmost_forwarded_entry_counts() {
        let from = PeerAddress::ForwardedFor;
        let peer = Some("127.0.0.1:5000");
        for (lines, expected) in [
            (&["198.51.100.1, 203.0.113.7"][..], "peer:203.0.113.7"),
            (&["198.51.100.1,203.0.113.7 "][..], "peer:203.0.113.7"),
            (&["198.51.100.1", "203.0.113.7"][..], "peer:203.0.113.7"),
            (&["203.0.113.7:4711"][..], "peer:203.0.113.7"),
            (&["[2001:db8::7]:4711"][..], "peer:2001:db8::7"),
            (&["2001:db8::7"][..], "peer:2001:db8::7"),
            // Not an address: the connection's peer, never a bucket of its own.
            (&["203.0.113.7, unknown"][..], "peer:127.0.0.1"),
            (&["203.0.113.7,"][..], "peer:127.0.0.1"),
            (&[""][..], "peer:127.0.0.1"),
        ] {
            let request = parts(None, peer, lines);
            assert_eq!(key(from, &request).as_deref(), Some(expected), "{lines:?}");
        }
    }
}
