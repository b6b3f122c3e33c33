//! The PROXY protocol header (HAProxy's `proxy-protocol.txt`, versions 1 and 2): what a load
//! balancer that relays TCP says, before the first byte of the client's own, about the connection it
//! relays — the client's address and the address it connected to.
//!
//! [`parse`] reads a header at the start of some bytes. It is written for a reader that must not
//! take a byte past the header (what follows is the client's: an HTTP request or a TLS
//! ClientHello, and nobody else may have it): given an incomplete header it says how many more
//! bytes a valid header needs *at least* ([`Progress::Partial`]), so reading exactly that many never
//! reads past the end of the header, however the header is cut into packets. It refuses, as soon
//! as it can tell, anything that cannot become a valid header.
//!
//! * **Version 1**: one line of text, `PROXY TCP4|TCP6 <src> <dst> <sport> <dport>\r\n` or
//!   `PROXY UNKNOWN …\r\n`, at most 107 bytes with its CRLF; exactly one space between fields,
//!   addresses of the announced family, ports without leading zeros.
//! * **Version 2**: a 16-byte binary prefix (a 12-byte signature, version and command, family and
//!   transport, the length of the rest), then the addresses and optional TLVs. The LOCAL command
//!   and PROXY with a family or transport other than TCP over IPv4/IPv6 keep the connection's own
//!   addresses, as the specification lets a receiver do; TLVs are skipped, each checked to fit. A
//!   whole header is at most [`MAX_HEADER`] bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The longest version 1 line, CRLF included (the specification's worst case).
pub const MAX_V1: usize = 107;
/// The longest header ramjet accepts, TLVs included. The specification keeps its own fields within
/// 232 bytes and a sender within one 536-byte segment; 4 KiB leaves room for any balancer's TLVs.
pub const MAX_HEADER: usize = 4096;

const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
const V1_PREFIX: &[u8; 6] = b"PROXY ";

/// What a header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addresses {
    /// The connection was relayed for `source` (the client), which connected to `destination`.
    Relayed { source: SocketAddr, destination: SocketAddr },
    /// The connection's own addresses stand: version 2's LOCAL command (a balancer's health
    /// check), version 1's `UNKNOWN`, or version 2's PROXY for a family or transport other than TCP
    /// over IPv4 or IPv6 (UNSPEC, UDP, UNIX).
    Own,
}

/// A complete header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Its length in bytes: the client's own bytes start here.
    pub len: usize,
    /// 1 or 2.
    pub version: u8,
    pub addresses: Addresses,
}

/// How far the bytes given go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    Complete(Header),
    /// Valid so far; a valid header is at least `more` (≥ 1) bytes longer than what was given.
    Partial {
        more: usize,
    },
}

/// Why the bytes are not a PROXY protocol header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Neither version's signature: the peer speaks something else (HTTP, TLS, …).
    #[error("no PROXY protocol header (the connection starts with something else)")]
    NotProxy,
    /// Longer than version 1's 107 bytes, or version 2's length over [`MAX_HEADER`].
    #[error("PROXY protocol header too long")]
    TooLong,
    /// The signature was there, the rest is not what the specification allows.
    #[error("malformed PROXY protocol header: {0}")]
    Malformed(&'static str),
}

/// Reads the header at the start of `data` (bytes after it are left alone).
pub fn parse(data: &[u8]) -> Result<Progress, Refused> {
    match data.first() {
        None => Ok(Progress::Partial { more: 15 }), // the shortest header: `PROXY UNKNOWN\r\n`
        Some(b'\r') => v2(data),
        Some(b'P') => v1(data),
        Some(_) => Err(Refused::NotProxy),
    }
}

fn v2(data: &[u8]) -> Result<Progress, Refused> {
    let sig = data.len().min(V2_SIGNATURE.len());
    if data[..sig] != V2_SIGNATURE[..sig] {
        return Err(Refused::NotProxy);
    }
    if let Some(&ver_cmd) = data.get(12) {
        if ver_cmd >> 4 != 2 {
            return Err(Refused::Malformed("version 2 signature with another version"));
        }
        if ver_cmd & 0x0f > 1 {
            return Err(Refused::Malformed("unknown command"));
        }
    }
    if let Some(&family) = data.get(13) {
        if family >> 4 > 3 || family & 0x0f > 2 {
            return Err(Refused::Malformed("unknown address family or transport"));
        }
    }
    if data.len() < 16 {
        return Ok(Progress::Partial { more: 16 - data.len() });
    }
    let len = 16 + usize::from(u16::from_be_bytes([data[14], data[15]]));
    if len > MAX_HEADER {
        return Err(Refused::TooLong);
    }
    if data.len() < len {
        return Ok(Progress::Partial { more: len - data.len() });
    }
    let body = &data[16..len];
    let header = |addresses| Ok(Progress::Complete(Header { len, version: 2, addresses }));
    // LOCAL: the connection's own endpoints, whatever the block holds.
    if data[12] & 0x0f == 0 {
        return header(Addresses::Own);
    }
    let (addresses, address_len) = match data[13] {
        0x11 => {
            let block = body.get(..12).ok_or(Refused::Malformed("IPv4 addresses cut short"))?;
            let ip = |at: usize| IpAddr::V4(Ipv4Addr::new(block[at], block[at + 1], block[at + 2], block[at + 3]));
            let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
            let source = SocketAddr::new(ip(0), port(8));
            let destination = SocketAddr::new(ip(4), port(10));
            (Addresses::Relayed { source, destination }, 12)
        }
        0x21 => {
            let block = body.get(..36).ok_or(Refused::Malformed("IPv6 addresses cut short"))?;
            let ip = |at: usize| {
                let octets: [u8; 16] = block[at..at + 16].try_into().unwrap_or_default();
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            let port = |at: usize| u16::from_be_bytes([block[at], block[at + 1]]);
            let source = SocketAddr::new(ip(0), port(32));
            let destination = SocketAddr::new(ip(16), port(34));
            (Addresses::Relayed { source, destination }, 36)
        }
        // UDP over IPv4 or IPv6, UNIX stream or datagram: valid, and not what a TCP connection to
        // ramjet relays; the receiver falls back to the connection's own addresses.
        0x12 => (Addresses::Own, 12),
        0x22 => (Addresses::Own, 36),
        0x31 | 0x32 => (Addresses::Own, 216),
        // UNSPEC family or transport: the address information, if any, is to be ignored, and
        // where it ends (and TLVs begin) is unknown.
        _ => return header(Addresses::Own),
    };
    if body.len() < address_len {
        return Err(Refused::Malformed("addresses cut short"));
    }
    // TLVs: a type, a 16-bit length, that many bytes; each must fit.
    let mut tlvs = &body[address_len..];
    while !tlvs.is_empty() {
        let Some(&[_, hi, lo]) = tlvs.get(..3) else { return Err(Refused::Malformed("TLV cut short")) };
        let end = 3 + usize::from(u16::from_be_bytes([hi, lo]));
        if tlvs.len() < end {
            return Err(Refused::Malformed("TLV longer than the header"));
        }
        tlvs = &tlvs[end..];
    }
    header(addresses)
}

/// The fields of a version 1 line for TCP, after `PROXY TCP4 ` or `PROXY TCP6 `.
#[derive(Clone, Copy)]
enum Field {
    Address { v6: bool },
    Port,
}

impl Field {
    const ORDER: [fn(bool) -> Field; 4] =
        [|v6| Field::Address { v6 }, |v6| Field::Address { v6 }, |_| Field::Port, |_| Field::Port];

    /// The fewest bytes the field can have.
    fn min(self) -> usize {
        match self {
            Field::Address { v6: false } => 7, // 0.0.0.0
            Field::Address { v6: true } => 2,  // ::
            Field::Port => 1,
        }
    }

    /// The most bytes the field can have (an IPv6 address may end in dotted IPv4).
    fn max(self) -> usize {
        match self {
            Field::Address { v6: false } => 15,
            Field::Address { v6: true } => 45,
            Field::Port => 5,
        }
    }

    fn allows(self, b: u8) -> bool {
        match self {
            Field::Address { v6: false } => b.is_ascii_digit() || b == b'.',
            Field::Address { v6: true } => b.is_ascii_hexdigit() || b == b':' || b == b'.',
            Field::Port => b.is_ascii_digit(),
        }
    }
}

fn v1(data: &[u8]) -> Result<Progress, Refused> {
    let prefix = data.len().min(V1_PREFIX.len());
    if data[..prefix] != V1_PREFIX[..prefix] {
        return Err(Refused::NotProxy);
    }
    let window = &data[..data.len().min(MAX_V1)];
    match window.iter().position(|&b| b == b'\r' || b == b'\n') {
        Some(i) if window[i] == b'\n' => Err(Refused::Malformed("line ends without CR")),
        // The CRLF would end past the longest line.
        Some(i) if i + 2 > MAX_V1 => Err(Refused::TooLong),
        Some(i) if i + 1 == data.len() => {
            // A CR, the LF not here yet: the line is complete with one more byte, if it is valid.
            line(&data[..i])?;
            Ok(Progress::Partial { more: 1 })
        }
        Some(i) if data[i + 1] != b'\n' => Err(Refused::Malformed("CR without LF")),
        Some(i) => {
            let addresses = line(&data[..i])?;
            Ok(Progress::Complete(Header { len: i + 2, version: 1, addresses }))
        }
        None if data.len() >= MAX_V1 => Err(Refused::TooLong),
        None => {
            let more = v1_more(data)?;
            if data.len() + more > MAX_V1 {
                return Err(Refused::TooLong);
            }
            Ok(Progress::Partial { more })
        }
    }
}

/// The fewest bytes a valid line still needs after `data` (a prefix of a line, no CR or LF in it),
/// or why no line can start this way.
fn v1_more(data: &[u8]) -> Result<usize, Refused> {
    if data.len() < V1_PREFIX.len() {
        return Ok(15 - data.len());
    }
    let rest = &data[V1_PREFIX.len()..];
    let (protocol, fields) = match rest.iter().position(|&b| b == b' ') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let v6 = match (protocol, fields) {
        (b"UNKNOWN", _) => return Ok(2), // anything until CRLF
        (b"TCP4", Some(_)) => false,
        (b"TCP6", Some(_)) => true,
        (p, None) => {
            // The protocol is still coming: the shortest line any protocol it may be allows
            // (`PROXY UNKNOWN\r\n` 15 bytes, `PROXY TCP6 :: :: 0 0\r\n` 22, `PROXY TCP4 …` 32).
            let shortest: usize = [(&b"UNKNOWN"[..], 15), (b"TCP6", 22), (b"TCP4", 32)]
                .iter()
                .filter(|(name, _)| name.starts_with(p))
                .map(|&(_, n)| n)
                .min()
                .ok_or(Refused::Malformed("unknown protocol (TCP4, TCP6 or UNKNOWN)"))?;
            return Ok(shortest.saturating_sub(data.len()).max(2));
        }
        _ => return Err(Refused::Malformed("unknown protocol (TCP4, TCP6 or UNKNOWN)")),
    };
    let fields = fields.unwrap_or_default();
    let mut current = 0;
    let mut current_len = 0;
    for &b in fields {
        if b == b' ' {
            if current_len == 0 {
                return Err(Refused::Malformed("more than one space between fields"));
            }
            current += 1;
            current_len = 0;
            if current == Field::ORDER.len() {
                return Err(Refused::Malformed("more than four fields"));
            }
            continue;
        }
        let field = Field::ORDER[current](v6);
        current_len += 1;
        if !field.allows(b) || current_len > field.max() {
            return Err(Refused::Malformed("not an address or port of the announced family"));
        }
    }
    let this = Field::ORDER[current](v6).min().saturating_sub(current_len);
    let later: usize = Field::ORDER[current + 1..].iter().map(|f| 1 + f(v6).min()).sum();
    Ok(this + later + 2)
}

/// A whole version 1 line without its CRLF.
fn line(line: &[u8]) -> Result<Addresses, Refused> {
    // `UNKNOWN`: whatever follows, up to the CRLF, is ignored.
    if let Some(rest) = line.strip_prefix(b"PROXY UNKNOWN") {
        if rest.is_empty() || rest[0] == b' ' {
            return Ok(Addresses::Own);
        }
    }
    let text = std::str::from_utf8(line).map_err(|_| Refused::Malformed("not US-ASCII"))?;
    let mut fields = text.split(' ');
    fields.next(); // "PROXY", checked by the caller
    let v6 = match fields.next() {
        Some("TCP4") => false,
        Some("TCP6") => true,
        _ => return Err(Refused::Malformed("unknown protocol (TCP4, TCP6 or UNKNOWN)")),
    };
    let malformed = Refused::Malformed("not `PROXY TCPx <source> <destination> <source port> <destination port>`");
    let (Some(src), Some(dst), Some(sport), Some(dport), None) =
        (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(malformed);
    };
    let address = |s: &str| -> Result<IpAddr, Refused> {
        let bad = Refused::Malformed("address not of the announced family, or not canonical");
        match v6 {
            false => s.parse::<Ipv4Addr>().map(IpAddr::V4).map_err(|_| bad),
            true => s.parse::<Ipv6Addr>().map(IpAddr::V6).map_err(|_| bad),
        }
    };
    let port = |s: &str| -> Result<u16, Refused> {
        let bad = Refused::Malformed("port not a decimal number in 0..65535 without leading zeros");
        let digits = !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits || (s.len() > 1 && s.starts_with('0')) {
            return Err(bad);
        }
        s.parse().map_err(|_| bad)
    };
    Ok(Addresses::Relayed {
        source: SocketAddr::new(address(src)?, port(sport)?),
        destination: SocketAddr::new(address(dst)?, port(dport)?),
    })
}

#[cfg(test)]
mod tests;
