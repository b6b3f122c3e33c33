//! Arbitrary bytes as the start of a connection on a listener that expects a PROXY protocol header
//! (`codec::proxy_protocol`):
//!
//! * `parse` never panics; a complete header is at most `MAX_HEADER` bytes (`MAX_V1` for version 1)
//!   and reads the same with or without the bytes after it;
//! * the reader's promise: reading exactly what each step asks for — the bytes arriving in pieces
//!   of any size up to that — never takes a byte past the header, and ends as parsing the whole
//!   input at once does (the same header, a refusal, or still incomplete);
//! * a relayed header written again (version 1's text or version 2's binary) reads back to the same
//!   addresses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ramjet_dataplane::codec::proxy_protocol::{parse, Addresses, Header, Progress, MAX_HEADER, MAX_V1};
use std::net::{IpAddr, SocketAddr};

#[derive(Debug, PartialEq)]
enum Outcome {
    Complete(Header),
    Refused,
    Incomplete,
}

/// Reads `input` as the server does, each read bringing at most what `piece` allows of what the
/// parser asked for.
fn read_in_steps(input: &[u8], mut piece: impl FnMut(usize) -> usize) -> Outcome {
    let mut have = 0;
    loop {
        match parse(&input[..have]) {
            Ok(Progress::Complete(header)) => {
                assert_eq!(header.len, have, "the reader took bytes past the header");
                return Outcome::Complete(header);
            }
            Ok(Progress::Partial { more }) => {
                assert!(more >= 1);
                if have == input.len() {
                    return Outcome::Incomplete;
                }
                have = (have + piece(more).clamp(1, more)).min(input.len());
            }
            Err(_) => return Outcome::Refused,
        }
    }
}

fn v2(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n\x21".to_vec();
    let mut block = Vec::new();
    match (source.ip(), destination.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            h.push(0x11);
            block.extend_from_slice(&s.octets());
            block.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            h.push(0x21);
            block.extend_from_slice(&s.octets());
            block.extend_from_slice(&d.octets());
        }
        _ => unreachable!("a header names one family"),
    }
    block.extend_from_slice(&source.port().to_be_bytes());
    block.extend_from_slice(&destination.port().to_be_bytes());
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(&block);
    h
}

fuzz_target!(|data: &[u8]| {
    let whole = match parse(data) {
        Ok(Progress::Complete(header)) => {
            assert!(header.len <= data.len() && header.len <= MAX_HEADER);
            if header.version == 1 {
                assert!(header.len <= MAX_V1);
            }
            assert_eq!(parse(&data[..header.len]), Ok(Progress::Complete(header)), "alone, the same header");
            Outcome::Complete(header)
        }
        Ok(Progress::Partial { more }) => {
            assert!(more >= 1);
            Outcome::Incomplete
        }
        Err(_) => Outcome::Refused,
    };
    assert_eq!(read_in_steps(data, |more| more), whole, "reading exactly what is asked for");
    assert_eq!(read_in_steps(data, |_| 1), whole, "one byte at a time");
    let mut state = data.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let random = read_in_steps(data, |more| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % more as u64) as usize + 1
    });
    assert_eq!(random, whole, "random pieces");

    if let Outcome::Complete(Header { addresses: Addresses::Relayed { source, destination }, version, .. }) = whole {
        let again = match version {
            1 => {
                let family = if source.is_ipv4() { "TCP4" } else { "TCP6" };
                format!("PROXY {family} {} {} {} {}\r\n", source.ip(), destination.ip(), source.port(), destination.port())
                    .into_bytes()
            }
            _ => v2(source, destination),
        };
        match parse(&again) {
            Ok(Progress::Complete(h)) => {
                assert_eq!(h.len, again.len());
                assert_eq!(h.addresses, Addresses::Relayed { source, destination });
            }
            other => panic!("{:?} written again reads as {other:?}", String::from_utf8_lossy(&again)),
        }
    }
});
