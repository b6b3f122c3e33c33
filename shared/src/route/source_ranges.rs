//! Source address allow- and deny-lists (ingress-nginx's `allowlist-source-range`,
//! `whitelist-source-range` and `denylist-source-range`): nginx's `deny <cidr>;` lines, then
//! `allow <cidr>; … deny all;`, the first that matches deciding. The address is the request's client
//! address (nginx's `$remote_addr`): the connection's peer, or who a PROXY protocol header or a
//! trusted proxy names (the data plane decides which); an IPv4-mapped IPv6 address counts as its
//! IPv4 address. [`IpBlock`] is also the data plane's trusted-proxy block.

use std::fmt;
use std::net::IpAddr;

/// An address block: `10.0.0.0/8`, `2001:db8::/32`, or one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct IpBlock {
    /// The network address (host bits cleared).
    addr: IpAddr,
    prefix: u8,
}

impl IpBlock {
    /// Parses an address or a CIDR block (host bits are cleared, as Go's `net.ParseCIDR` does).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bad = || format!("`{text}` is not an IP address or CIDR block");
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => {
                let addr: IpAddr = a.parse().map_err(|_| bad())?;
                let prefix: u8 = p.parse().map_err(|_| bad())?;
                (addr, prefix)
            }
            None => {
                let addr: IpAddr = text.parse().map_err(|_| bad())?;
                (addr, if addr.is_ipv4() { 32 } else { 128 })
            }
        };
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(bad());
        }
        Ok(IpBlock { addr: mask(addr, prefix), prefix })
    }

    /// Whether `ip` is in this block.
    #[inline]
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => mask(ip, self.prefix) == self.addr,
            _ => false,
        }
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let keep = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) };
            IpAddr::V4((bits & keep).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let keep = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix) };
            IpAddr::V6((bits & keep).into())
        }
    }
}

impl fmt::Display for IpBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Parses ingress-nginx's comma-separated list of addresses and blocks.
pub fn parse_ranges(list: &str) -> Result<Vec<IpBlock>, String> {
    let mut blocks: Vec<IpBlock> =
        list.split(',').filter(|s| !s.trim().is_empty()).map(IpBlock::parse).collect::<Result<_, _>>()?;
    if blocks.is_empty() {
        return Err(format!("`{}` names no IP address or CIDR block", list.trim()));
    }
    blocks.sort();
    blocks.dedup();
    Ok(blocks)
}

/// A route's source address rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SourceRanges {
    /// Denied first.
    pub deny: Box<[IpBlock]>,
    /// When not empty, only these are allowed.
    pub allow: Box<[IpBlock]>,
}

impl SourceRanges {
    pub fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.allow.is_empty()
    }

    /// Whether a request from `peer` may pass.
    #[inline]
    pub fn admits(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        if self.deny.iter().any(|b| b.contains(peer)) {
            return false;
        }
        self.allow.is_empty() || self.allow.iter().any(|b| b.contains(peer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn deny_first_then_allow_then_deny_all() {
        let ranges = SourceRanges {
            deny: parse_ranges("10.0.0.5").unwrap().into(),
            allow: parse_ranges("10.0.0.0/24, 2001:db8::/32").unwrap().into(),
        };
        assert!(ranges.admits(ip("10.0.0.1")));
        assert!(ranges.admits(ip("::ffff:10.0.0.1")), "an IPv4-mapped peer is its IPv4 address");
        assert!(!ranges.admits(ip("10.0.0.5")));
        assert!(!ranges.admits(ip("10.0.1.1")));
        assert!(ranges.admits(ip("2001:db8::1")));
        assert!(!ranges.admits(ip("2001:db9::1")));
        let deny_only = SourceRanges { deny: parse_ranges("0.0.0.0/0").unwrap().into(), allow: Box::new([]) };
        assert!(!deny_only.admits(ip("1.2.3.4")));
        assert!(deny_only.admits(ip("::1")), "an IPv4 block never matches IPv6");
    }

    #[test]
    fn parsing_masks_host_bits_and_refuses_garbage() {
        assert_eq!(IpBlock::parse("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        for bad in ["", "10.0.0.0/33", "10.0.0/8", "::/129", "host.example", "10.0.0.1/-1", "1.2.3.4 5"] {
            assert!(IpBlock::parse(bad).is_err(), "{bad}");
        }
        assert!(parse_ranges(" , ").is_err());
        assert_eq!(parse_ranges("1.2.3.4, 1.2.3.4/32").unwrap().len(), 1);
    }

    /// Any address against any block: never a panic, and the answer agrees with a bit-by-bit
    /// comparison of the prefix.
    #[test]
    fn contains_agrees_with_a_bitwise_prefix_comparison() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let (a, b) = (next() as u32, next() as u32);
            let prefix = (next() % 33) as u8;
            let block = IpBlock::parse(&format!("{}/{prefix}", std::net::Ipv4Addr::from(a))).unwrap();
            let same = (0..prefix).all(|i| (a >> (31 - i)) & 1 == (b >> (31 - i)) & 1);
            assert_eq!(block.contains(IpAddr::V4(b.into())), same);
        }
    }
}
