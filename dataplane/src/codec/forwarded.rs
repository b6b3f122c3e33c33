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
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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

/// The host a trusted proxy's client asked for: the first entry of its `X-Forwarded-Host`, sent
/// upstream as `Host` (ingress-nginx's `$best_http_host` with `use-forwarded-headers`). `None` for
/// anyone else, or a value that is not visible ASCII.
#[inline]
pub fn forwarded_host<'c, 'v, I>(conn: &'c ConnFacts, fields: impl Fn(&'c str) -> I) -> Option<&'v [u8]>
where
    I: Iterator<Item = &'v [u8]>,
{
    if !conn.trusted_fields {
        return None;
    }
    first_of(fields("x-forwarded-host")).filter(|h| h.iter().all(|&b| b.is_ascii_graphic()))
}

/// Whether a request came over HTTPS to a load balancer that ended TLS: its connection's PROXY
/// protocol header named port 443, or it is from a trusted proxy and says so (the first
/// `X-Forwarded-Proto` value is `https`, ingress-nginx's `use-forwarded-headers`). Such a request
/// is not sent round again by an HTTPS redirect. Anyone else's fields are never looked at.
#[inline]
pub fn forwarded_https<'c, 'v, I>(conn: &'c ConnFacts, fields: impl Fn(&'c str) -> I) -> bool
where
    I: Iterator<Item = &'v [u8]>,
{
    conn.https_by_proxy
        || conn.trusted_fields
            && first_of(fields("x-forwarded-proto")).is_some_and(|p| p.eq_ignore_ascii_case(b"https"))
}

/// The first token of the first value (`https` of `https, http`): what the first proxy saw.
fn first_of<'v>(mut values: impl Iterator<Item = &'v [u8]>) -> Option<&'v [u8]> {
    let value = values.next()?;
    let token = trim(value.split(|&b| b == b',').next().unwrap_or(value));
    (!token.is_empty()).then_some(token)
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
        for entry in (RevEntries { rest: value }) {
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

/// The entries of a comma-separated value, right-most first, without the spaces and tabs around
/// them; empty entries are skipped (as nginx skips runs of commas and spaces). One pass over the
/// bytes, right to left, and only as far as the walk goes.
struct RevEntries<'v> {
    rest: &'v [u8],
}

impl<'v> Iterator for RevEntries<'v> {
    type Item = &'v [u8];

    #[inline]
    fn next(&mut self) -> Option<&'v [u8]> {
        let rest = self.rest;
        let mut end = rest.len();
        while end > 0 && matches!(rest[end - 1], b',' | b' ' | b'\t') {
            end -= 1;
        }
        if end == 0 {
            self.rest = &[];
            return None;
        }
        let start = rest[..end].iter().rposition(|&b| b == b',').map_or(0, |comma| comma + 1);
        let mut first = start;
        while matches!(rest[first], b' ' | b'\t') {
            first += 1;
        }
        self.rest = &rest[..start];
        Some(&rest[first..end])
    }
}

/// An address as forwarded fields carry it: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:8080` (IPv4-mapped IPv6 addresses become IPv4).
pub fn address(entry: &[u8]) -> Option<SocketAddr> {
    // The usual entry, a bare IPv4 address, without the general parser.
    if let Some(ip) = ipv4(entry) {
        return Some(SocketAddr::new(IpAddr::V4(ip), 0));
    }
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

/// A dotted-quad IPv4 address, read as strictly as `Ipv4Addr::from_str` reads it (four decimal
/// octets of at most 255, no leading zeros); `None` for anything else.
fn ipv4(entry: &[u8]) -> Option<Ipv4Addr> {
    if entry.len() > 15 {
        return None;
    }
    let mut octets = [0u8; 4];
    let mut i = 0;
    // The octet so far, and where it started.
    let (mut n, mut start) = (0u32, 0);
    for (at, &b) in entry.iter().enumerate() {
        let digit = b.wrapping_sub(b'0');
        if digit < 10 {
            // Capped: any value over 255 is refused below, and fifteen digits must not overflow.
            n = (n * 10 + u32::from(digit)).min(1000);
            continue;
        }
        // A dot ends an octet: 1 to 3 digits, no leading zero, at most 255.
        if b != b'.' || i == 3 || !octet(n, at - start, entry[start]) {
            return None;
        }
        octets[i] = n as u8;
        i += 1;
        (n, start) = (0, at + 1);
    }
    if i != 3 || !octet(n, entry.len() - start, *entry.get(start)?) {
        return None;
    }
    octets[3] = n as u8;
    Some(Ipv4Addr::from(octets))
}

/// Whether `len` digits starting with `first`, of value `n`, are an octet as `Ipv4Addr` reads it.
#[inline]
fn octet(n: u32, len: usize, first: u8) -> bool {
    (1..=3).contains(&len) && n <= 255 && (len == 1 || first != b'0')
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
    // A trusted proxy's X-Forwarded-Host is the host its client asked for.
    let forwarded_host = forwarded_host(conn, &fields);
    push_address_lines(out, conn, client, fields);
    if let Some(host) = forwarded_host.or((!host.is_empty()).then_some(host)) {
        out.extend_from_slice(b"x-forwarded-host: ");
        out.extend_from_slice(host);
        out.extend_from_slice(b"\r\n");
    }
}

/// ingress-nginx's `X-Original-Forwarded-For` and `X-Original-Forwarded-Host`: what the client sent
/// as `X-Forwarded-For` and `X-Forwarded-Host`, trusted or not, under names of their own (ramjet's
/// own `X-Forwarded-*` replace the client's). Several fields of one name are joined with `, `.
/// Asked only of a request that has one of them.
pub fn push_originals<'c, 'v, I>(out: &mut Vec<u8>, fields: impl Fn(&'c str) -> I)
where
    I: Iterator<Item = &'v [u8]>,
{
    for (name, line) in
        [("x-forwarded-for", &b"x-original-forwarded-for: "[..]), ("x-forwarded-host", b"x-original-forwarded-host: ")]
    {
        let mut values = fields(name).map(trim).filter(|v| !v.is_empty()).peekable();
        if values.peek().is_none() {
            continue;
        }
        out.extend_from_slice(line);
        for (i, value) in values.enumerate() {
            if i > 0 {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(value);
        }
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
        push_ip(out, conn.peer.ip().to_canonical());
    } else {
        push_ip(out, ip);
    }
    out.extend_from_slice(b"\r\nx-real-ip: ");
    push_ip(out, ip);
    out.extend_from_slice(b"\r\n");
    if !conn.trusted_fields {
        out.extend_from_slice(conn.proto_and_port_lines());
        return;
    }
    // A trusted proxy's scheme and port are the client's: passed on when they are well formed (a
    // scheme is a token, as ingress-nginx passes any: `wss`, a balancer's own).
    let proto = first_of(fields("x-forwarded-proto"))
        .filter(|p| p.len() <= 16 && p.iter().all(|&b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)));
    let port = first_of(fields("x-forwarded-port")).filter(|p| p.len() <= 5 && p.iter().all(u8::is_ascii_digit));
    let scheme: &[u8] = match proto {
        Some(p) => p,
        None if conn.tls || conn.https_by_proxy => b"https",
        None => b"http",
    };
    out.extend_from_slice(b"x-forwarded-proto: ");
    out.extend_from_slice(scheme);
    out.extend_from_slice(b"\r\nx-forwarded-port: ");
    match port {
        Some(p) => out.extend_from_slice(p),
        None => {
            let _ = write!(out, "{}", conn.local_port);
        }
    }
    out.extend_from_slice(b"\r\n");
    crate::conn::push_scheme_lines(out, scheme);
}

/// Appends `ip` as text; IPv4 without the formatting machinery, which costs a request from a
/// trusted proxy more than everything else here.
fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let mut text = [0u8; 15];
            let mut len = 0;
            for (i, n) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[len] = b'.';
                    len += 1;
                }
                if n >= 100 {
                    text[len] = b'0' + n / 100;
                    len += 1;
                }
                if n >= 10 {
                    text[len] = b'0' + n / 10 % 10;
                    len += 1;
                }
                text[len] = b'0' + n % 10;
                len += 1;
            }
            out.extend_from_slice(&text[..len]);
        }
        IpAddr::V6(v6) => {
            let _ = write!(out, "{v6}");
        }
    }
}

fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

#[cfg(test)]
mod tests;
