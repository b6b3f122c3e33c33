//! Consistent hashing of requests onto endpoints (ingress-nginx's `upstream-hash-by`): a key made
//! of nginx variables and text (`$request_uri`, `$remote_addr$host`, `${cookie_user}-x`) picks the
//! endpoint, so the same key goes to the same endpoint while it exists, and an endpoint that
//! leaves moves only its own keys.
//!
//! The key is hashed as it is read from the request (nothing is allocated), and the endpoint is
//! chosen by rendezvous hashing: the endpoint whose mix with the key scores highest. It is computed
//! from the addresses alone, so every worker and every replica agrees, and it costs one mix per
//! endpoint.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use super::request::{find_pair, RequestView};

/// One piece of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(Box<str>),
    /// `$request_uri`: the target as sent, query included.
    RequestUri,
    /// `$uri` (`$document_uri`): the path, without the query.
    Uri,
    /// `$args` (`$query_string`).
    Args,
    /// `$host`: the host, lower case, without the port.
    Host,
    /// `$remote_addr` (`$binary_remote_addr`): the client's address.
    RemoteAddr,
    /// `$scheme`.
    Scheme,
    /// `$request_method`.
    Method,
    /// `$http_<name>`: the first field named `name` (underscores read as dashes, as nginx does).
    Header(Box<str>),
    /// `$cookie_<name>`.
    Cookie(Box<str>),
    /// `$arg_<name>`: the query parameter.
    Arg(Box<str>),
    /// A variable ramjet does not have: empty, as an unset variable is in ingress-nginx's Lua.
    Unknown(Box<str>),
}

/// A route's hash key, parsed once at compile time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HashBy {
    template: Box<str>,
    /// `upstream-hash-by-subset`: each key goes to one of this many endpoints, drawn per request.
    subset: Option<u8>,
    /// Parsed from `template`, which says all it does.
    #[serde(skip)]
    parts: Box<[Part]>,
}

/// What the key can be made of besides the request's fields.
pub struct HashInput<'a> {
    /// The request target as sent (`/a?b=c`).
    pub target: &'a [u8],
    /// The `Host` (or `:authority`) as sent.
    pub host: &'a [u8],
    pub peer: IpAddr,
    pub tls: bool,
}

impl HashBy {
    /// Parses an nginx complex value: text with `$name` and `${name}` variables.
    pub fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut rest = template;
        while let Some(dollar) = rest.find('$') {
            text.push_str(&rest[..dollar]);
            rest = &rest[dollar + 1..];
            let (name, after) = if let Some(braced) = rest.strip_prefix('{') {
                let end = braced.find('}').ok_or_else(|| format!("`{template}`: a `${{` without its `}}`"))?;
                (&braced[..end], &braced[end + 1..])
            } else {
                let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(format!("`{template}`: `${name}` is not an nginx variable name"));
            }
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text).into()));
            }
            parts.push(variable(name));
            rest = after;
        }
        text.push_str(rest);
        if !text.is_empty() {
            parts.push(Part::Text(text.into()));
        }
        Ok(HashBy { template: template.into(), subset: None, parts: parts.into_boxed_slice() })
    }

    /// Each key spreads over `size` endpoints (at most [`MAX_SUBSET`]) instead of one, as
    /// ingress-nginx's `upstream-hash-by-subset` does.
    pub fn with_subset(mut self, size: u8) -> Self {
        self.subset = Some(size.clamp(1, MAX_SUBSET));
        self
    }

    /// The endpoint for this request's key: the key's own, or one of its subset drawn with `random`.
    #[inline]
    pub fn endpoint(&self, key: u64, endpoints: &[SocketAddr], random: impl FnOnce() -> u32) -> usize {
        match self.subset {
            None | Some(1) => pick(key, endpoints),
            Some(size) => pick_in_subset(key, endpoints, size, random()),
        }
    }

    /// The variables of the key ramjet does not have (each is empty, as in ingress-nginx when unset).
    pub fn unknown(&self) -> Vec<&str> {
        self.parts.iter().filter_map(|p| if let Part::Unknown(n) = p { Some(&**n) } else { None }).collect()
    }

    /// The key's hash for this request.
    pub fn key(&self, req: &impl RequestView, input: &HashInput<'_>) -> u64 {
        let mut h = Fnv::default();
        let (path, query) = match input.target.iter().position(|&b| b == b'?') {
            Some(q) => (&input.target[..q], &input.target[q + 1..]),
            None => (input.target, &b""[..]),
        };
        for part in self.parts.iter() {
            match part {
                Part::Text(t) => h.write(t.as_bytes()),
                Part::RequestUri => h.write(input.target),
                Part::Uri => h.write(path),
                Part::Args => h.write(query),
                Part::Host => {
                    let host = host_without_port(input.host);
                    for b in host {
                        h.write(&[b.to_ascii_lowercase()]);
                    }
                }
                Part::RemoteAddr => match input.peer {
                    IpAddr::V4(ip) => h.write(&ip.octets()),
                    IpAddr::V6(ip) => h.write(&ip.octets()),
                },
                Part::Scheme => h.write(if input.tls { b"https" } else { b"http" }),
                Part::Method => h.write(req.method()),
                Part::Header(name) => h.write(req.header(name).unwrap_or_default()),
                Part::Cookie(name) => h.write(req.cookie(name).unwrap_or_default()),
                Part::Arg(name) => h.write(find_pair(query, b'&', name).unwrap_or_default()),
                Part::Unknown(_) => {}
            }
        }
        h.0
    }
}

impl fmt::Display for HashBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoints by hash of {}", self.template)
    }
}

fn variable(name: &str) -> Part {
    let lower = name.to_ascii_lowercase();
    let field = |rest: &str, dashes: bool| -> Box<str> {
        if dashes {
            rest.replace('_', "-").into()
        } else {
            rest.into()
        }
    };
    match lower.as_str() {
        "request_uri" => Part::RequestUri,
        "uri" | "document_uri" => Part::Uri,
        "args" | "query_string" => Part::Args,
        "host" => Part::Host,
        "remote_addr" | "binary_remote_addr" => Part::RemoteAddr,
        "scheme" => Part::Scheme,
        "request_method" => Part::Method,
        _ => {
            if let Some(rest) = lower.strip_prefix("http_") {
                Part::Header(field(rest, true))
            } else if let Some(rest) = name.strip_prefix("cookie_") {
                Part::Cookie(field(rest, false))
            } else if let Some(rest) = name.strip_prefix("arg_") {
                Part::Arg(field(rest, false))
            } else {
                Part::Unknown(name.into())
            }
        }
    }
}

/// `a.com:8080` → `a.com`; `[::1]:80` → `[::1]`.
fn host_without_port(host: &[u8]) -> &[u8] {
    if host.first() == Some(&b'[') {
        return match host.iter().position(|&b| b == b']') {
            Some(end) => &host[..=end],
            None => host,
        };
    }
    match host.iter().rposition(|&b| b == b':') {
        Some(colon) => &host[..colon],
        None => host,
    }
}

/// FNV-1a, 64 bits: the key is short and not secret (who chooses it only chooses an endpoint).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// The largest subset `upstream-hash-by-subset-size` may ask for.
pub const MAX_SUBSET: u8 = 32;

/// One of the `size` endpoints with the highest scores for `key` (its subset), the `draw`-th
/// (modulo the subset's size). An endpoint that leaves moves only the keys whose subset held it,
/// as with [`pick`].
fn pick_in_subset(key: u64, endpoints: &[SocketAddr], size: u8, draw: u32) -> usize {
    let size = usize::from(size).min(endpoints.len());
    if size <= 1 {
        return pick(key, endpoints);
    }
    // The subset's members, best score first (insertion into a small array: no allocation).
    let mut best = [(0u64, 0usize); MAX_SUBSET as usize];
    let mut held = 0;
    for (i, e) in endpoints.iter().enumerate() {
        let score = mix(key ^ address_bits(e));
        if held == size && score <= best[size - 1].0 {
            continue;
        }
        let mut at = held.min(size - 1);
        while at > 0 && best[at - 1].0 < score {
            best[at] = best[at - 1];
            at -= 1;
        }
        best[at] = (score, i);
        held = (held + 1).min(size);
    }
    best[draw as usize % size].1
}

/// The endpoint for `key`: the highest score of [`mix`] over each endpoint's address.
pub fn pick(key: u64, endpoints: &[SocketAddr]) -> usize {
    let mut best = (0, 0u64);
    for (i, e) in endpoints.iter().enumerate() {
        let score = mix(key ^ address_bits(e));
        if i == 0 || score > best.1 {
            best = (i, score);
        }
    }
    best.0
}

/// An address as 64 bits (the IP folded, and the port).
fn address_bits(e: &SocketAddr) -> u64 {
    let ip = match e.ip() {
        IpAddr::V4(ip) => u64::from(u32::from(ip)),
        IpAddr::V6(ip) => {
            let n = u128::from(ip);
            (n as u64) ^ mix((n >> 64) as u64)
        }
    };
    mix(ip ^ (u64::from(e.port()) << 48))
}

/// SplitMix64's finalizer: every input bit moves every output bit.
#[inline]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Req;
    impl RequestView for Req {
        fn header(&self, name: &str) -> Option<&[u8]> {
            (name == "x-user").then_some(b"alice")
        }
        fn cookie(&self, name: &str) -> Option<&[u8]> {
            (name == "session").then_some(b"s1")
        }
        fn method(&self) -> &[u8] {
            b"GET"
        }
        fn query(&self) -> &[u8] {
            b"id=7"
        }
        fn path(&self) -> &[u8] {
            b"/"
        }
        fn tls(&self) -> bool {
            false
        }
    }

    fn input(target: &'static str, host: &'static str) -> HashInput<'static> {
        HashInput { target: target.as_bytes(), host: host.as_bytes(), peer: "10.0.0.9".parse().unwrap(), tls: false }
    }

    #[test]
    fn keys_are_read_from_the_variables_and_text() {
        let by = HashBy::parse("${request_uri}-text-value").unwrap();
        assert_eq!(by.parts.len(), 2);
        let same = |a: &HashBy, i: &HashInput<'_>, b: &HashBy, j: &HashInput<'_>| a.key(&Req, i) == b.key(&Req, j);
        let text = HashBy::parse("/a?id=7-text-value").unwrap();
        assert!(same(&by, &input("/a?id=7", "x"), &text, &input("/other", "y")));
        let uri = HashBy::parse("$uri").unwrap();
        assert!(same(&uri, &input("/a?id=7", "x"), &uri, &input("/a?id=8", "x")), "$uri has no query");
        let host = HashBy::parse("$host").unwrap();
        assert!(same(&host, &input("/", "A.test:8080"), &host, &input("/x", "a.test")));
        let mixed = HashBy::parse("$http_x_user$cookie_session$arg_id$request_method").unwrap();
        assert!(same(&mixed, &input("/?id=7", "a"), &HashBy::parse("alices17GET").unwrap(), &input("/", "b")));
        let unknown = HashBy::parse("$upstream_addr$uri").unwrap();
        assert_eq!(unknown.unknown(), vec!["upstream_addr"]);
        assert!(HashBy::parse("${request_uri").is_err());
        assert!(HashBy::parse("$").is_err());
    }

    #[test]
    fn an_endpoint_that_leaves_moves_only_its_own_keys() {
        let endpoints: Vec<SocketAddr> = (1..=5).map(|i| format!("10.0.0.{i}:8080").parse().unwrap()).collect();
        let picks: Vec<usize> = (0..2000u64).map(|k| pick(mix(k), &endpoints)).collect();
        let mut counts = [0usize; 5];
        for &p in &picks {
            counts[p] += 1;
        }
        assert!(counts.iter().all(|&c| c > 300), "spread over every endpoint: {counts:?}");
        let fewer: Vec<SocketAddr> = endpoints.iter().copied().filter(|e| e.ip().to_string() != "10.0.0.3").collect();
        for (k, &before) in picks.iter().enumerate() {
            let after = fewer[pick(mix(k as u64), &fewer)];
            if endpoints[before].ip().to_string() != "10.0.0.3" {
                assert_eq!(after, endpoints[before], "key {k} stays where it was");
            }
        }
    }
}
