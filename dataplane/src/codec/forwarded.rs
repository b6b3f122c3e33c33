//! The forwarded fields, both ways: which address a request from a trusted proxy names as its
//! client ([`request_client`]), and the `X-Forwarded-*` and `X-Real-IP` fields ramjet writes
//! upstream for it ([`push_forwarded`]). HTTP/1.1 heads and HTTP/2 streams both come here, each
//! handing over a way to find its fields by name, so the two read and write them alike.
//!
//! The client is nginx's `real_ip_recursive on`: only when the connection's peer (after the PROXY
//! protocol) is a trusted proxy is the configured field believed, and then it is walked from its
//! right-most address leftwards, past every trusted one; the first untrusted address is the client.
//! An entry that is not an address ends the walk at the last trusted one (nobody may hide behind
//! garbage), and a list that is all trusted names its left-most address. Several fields of the
//! name are one list, the last field last. A connection without rules ([`ConnFacts::rules`]) costs
//! a request nothing here: its lines were rendered once, when it was accepted.

use std::io::Write as _;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::conn::{AddressRules, ConnFacts};

/// The client a request on `conn` names through its fields, found by (lower-case) name with
/// `fields`; `None` when the connection's peer stands (it is not a trusted proxy, the field is
/// missing, or its right-most entry is not an address). A port the field gives is kept; else the
/// port is 0.
#[inline]
pub fn request_client<'c, 'v, I>(conn: &'c ConnFacts, fields: impl Fn(&'c str) -> I) -> Option<SocketAddr>
where
    I: DoubleEndedIterator<Item = &'v [u8]>,
{
    let rules = conn.rules.as_deref()?;
    if !conn.trusted {
        return None;
    }
    walk(fields(rules.field.name()), rules.field.is_forwarded(), rules)
}

/// The right-most untrusted address of the field values `values` (in the order they came),
/// `forwarded` when they are RFC 7239 `Forwarded` values; the caller has checked that the peer is
/// trusted. `None`: no address at all before the walk stopped.
pub fn walk<'v>(
    values: impl DoubleEndedIterator<Item = &'v [u8]>,
    forwarded: bool,
    rules: &AddressRules,
) -> Option<SocketAddr> {
    let mut found = None;
    for value in values.rev() {
        for entry in value.rsplit(|&b| b == b',').map(trim).filter(|e| !e.is_empty()) {
            let address = if forwarded { for_parameter(entry).and_then(address) } else { address(entry) };
            let Some(address) = address else { return found };
            found = Some(address);
            if !rules.trusts(address.ip()) {
                return found;
            }
        }
    }
    found
}

/// An address as forwarded fields carry it: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:8080` (IPv4-mapped IPv6 addresses become IPv4).
pub fn address(entry: &[u8]) -> Option<SocketAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(canonical(SocketAddr::new(ip, 0)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(canonical(addr));
    }
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    inner.parse::<Ipv6Addr>().ok().map(|ip| canonical(SocketAddr::new(IpAddr::V6(ip), 0)))
}

/// The value of an RFC 7239 element's `for=` parameter (`for=192.0.2.60;proto=http`,
/// `for="[2001:db8::1]:4711"`), unquoted; `None` when it has none or it is not a plain token or
/// quoted string.
fn for_parameter(element: &[u8]) -> Option<&[u8]> {
    element.split(|&b| b == b';').find_map(|pair| {
        let pair = trim(pair);
        let eq = pair.iter().position(|&b| b == b'=')?;
        if !trim(&pair[..eq]).eq_ignore_ascii_case(b"for") {
            return None;
        }
        let value = trim(&pair[eq + 1..]);
        match value {
            [b'"', inner @ .., b'"'] if !inner.contains(&b'"') && !inner.contains(&b'\\') => Some(inner),
            _ if !value.contains(&b'"') => Some(value),
            _ => None,
        }
    })
}

/// Appends the fields every upstream head carries about its client: `x-forwarded-for`,
/// `x-real-ip`, `x-forwarded-proto`, `x-forwarded-port`, and `x-forwarded-host` when there is a
/// host. `client` is what [`request_client`] found (`None`: the connection's peer); with
/// `compute-full-forwarded-for`, `x-forwarded-for` is the client's own `X-Forwarded-For` (found with
/// `fields`) followed by the peer.
#[inline]
pub fn push_forwarded<'c, 'v, I>(
    out: &mut Vec<u8>,
    conn: &'c ConnFacts,
    client: Option<SocketAddr>,
    fields: impl Fn(&'c str) -> I,
    host: &[u8],
) where
    I: Iterator<Item = &'v [u8]>,
{
    push_address_lines(out, conn, client, fields);
    if !host.is_empty() {
        out.extend_from_slice(b"x-forwarded-host: ");
        out.extend_from_slice(host);
        out.extend_from_slice(b"\r\n");
    }
}

/// [`push_forwarded`] without `x-forwarded-host`: the lines of the connection, rendered when it was
/// accepted, unless rules apply to it.
#[inline]
pub fn push_address_lines<'c, 'v, I>(
    out: &mut Vec<u8>,
    conn: &'c ConnFacts,
    client: Option<SocketAddr>,
    fields: impl Fn(&'c str) -> I,
) where
    I: Iterator<Item = &'v [u8]>,
{
    let Some(rules) = conn.rules.as_deref() else {
        out.extend_from_slice(&conn.forwarded);
        return;
    };
    let ip = client.map_or(conn.peer.ip(), |c| c.ip()).to_canonical();
    out.extend_from_slice(b"x-forwarded-for: ");
    if rules.full_forwarded_for {
        for value in fields("x-forwarded-for").map(trim).filter(|v| !v.is_empty()) {
            out.extend_from_slice(value);
            out.extend_from_slice(b", ");
        }
        let _ = write!(out, "{}", conn.peer.ip().to_canonical());
    } else {
        let _ = write!(out, "{ip}");
    }
    let _ = write!(out, "\r\nx-real-ip: {ip}\r\n");
    out.extend_from_slice(conn.proto_and_port_lines());
}

fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

#[cfg(test)]
mod tests;
