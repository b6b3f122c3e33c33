use super::*;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn relayed(source: &str, destination: &str) -> Addresses {
    Addresses::Relayed { source: addr(source), destination: addr(destination) }
}

fn complete(data: &[u8]) -> Header {
    match parse(data) {
        Ok(Progress::Complete(h)) => h,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
    }
}

fn refused(data: &[u8]) -> Refused {
    match parse(data) {
        Err(e) => e,
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(data)),
    }
}

/// A version 2 header: command, family/transport byte, the block after the 16-byte prefix.
fn v2(command: u8, family: u8, block: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.push(0x20 | command);
    h.push(family);
    h.extend_from_slice(&(block.len() as u16).to_be_bytes());
    h.extend_from_slice(block);
    h
}

fn v4_block(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut b = src.to_vec();
    b.extend_from_slice(&dst);
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b
}

fn v6_block(src: &str, dst: &str, sport: u16, dport: u16) -> Vec<u8> {
    let mut b = src.parse::<Ipv6Addr>().unwrap().octets().to_vec();
    b.extend_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&dport.to_be_bytes());
    b
}

fn tlv(kind: u8, value: &[u8]) -> Vec<u8> {
    let mut t = vec![kind];
    t.extend_from_slice(&(value.len() as u16).to_be_bytes());
    t.extend_from_slice(value);
    t
}

/// Every valid header the tests know, with what it says.
fn valid_headers() -> Vec<(Vec<u8>, Addresses)> {
    let mut with_tlvs = v4_block([192, 0, 2, 1], [10, 0, 0, 1], 51000, 443);
    with_tlvs.extend(tlv(0x04, b""));
    with_tlvs.extend(tlv(0xEA, b"vpce-0123456789abcdef0"));
    with_tlvs.extend(tlv(0x20, &[0x01, 0, 0, 0, 0]));
    vec![
        (b"PROXY TCP4 192.0.2.1 10.0.0.1 51000 443\r\n".to_vec(), relayed("192.0.2.1:51000", "10.0.0.1:443")),
        (b"PROXY TCP4 0.0.0.0 0.0.0.0 0 0\r\n".to_vec(), relayed("0.0.0.0:0", "0.0.0.0:0")),
        (
            b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n".to_vec(),
            relayed("255.255.255.255:65535", "255.255.255.255:65535"),
        ),
        (b"PROXY TCP6 2001:db8::1 ::1 8080 80\r\n".to_vec(), relayed("[2001:db8::1]:8080", "[::1]:80")),
        (b"PROXY TCP6 :: :: 0 0\r\n".to_vec(), relayed("[::]:0", "[::]:0")),
        (b"PROXY TCP6 ::ffff:192.0.2.7 ::1 1 2\r\n".to_vec(), relayed("[::ffff:192.0.2.7]:1", "[::1]:2")),
        (b"PROXY UNKNOWN\r\n".to_vec(), Addresses::Own),
        (b"PROXY UNKNOWN ffff:f::1 ffff:f::2 65535 65535\r\n".to_vec(), Addresses::Own),
        (b"PROXY UNKNOWN \xff\x00 anything\r\n".to_vec(), Addresses::Own),
        (v2(1, 0x11, &v4_block([192, 0, 2, 1], [10, 0, 0, 1], 51000, 443)), relayed("192.0.2.1:51000", "10.0.0.1:443")),
        (v2(1, 0x11, &with_tlvs), relayed("192.0.2.1:51000", "10.0.0.1:443")),
        (
            v2(1, 0x21, &v6_block("2001:db8::7", "2001:db8::1", 40000, 8443)),
            relayed("[2001:db8::7]:40000", "[2001:db8::1]:8443"),
        ),
        (v2(0, 0x00, b""), Addresses::Own),
        (v2(0, 0x11, &v4_block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)), Addresses::Own),
        (v2(1, 0x00, b"whatever"), Addresses::Own),
        (v2(1, 0x12, &v4_block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2)), Addresses::Own),
        (v2(1, 0x22, &v6_block("::1", "::2", 1, 2)), Addresses::Own),
        (v2(1, 0x31, &[0u8; 216]), Addresses::Own),
    ]
}

#[test]
fn valid_headers_say_who_the_client_is_and_leave_what_follows_alone() {
    for (header, addresses) in valid_headers() {
        let mut data = header.clone();
        data.extend_from_slice(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        let h = complete(&data);
        assert_eq!(h.len, header.len(), "{:?}", String::from_utf8_lossy(&header));
        assert_eq!(h.addresses, addresses, "{:?}", String::from_utf8_lossy(&header));
        assert_eq!(h.version, if header[0] == b'P' { 1 } else { 2 });
        assert_eq!(complete(&header), h, "the same without the bytes after it");
    }
}

/// The reader's promise: for every cut of a valid header, what it is asked to read never goes
/// past the header's end, so the client's first bytes stay in the socket for HTTP or TLS.
#[test]
fn every_prefix_of_a_valid_header_asks_for_no_more_than_the_rest() {
    for (header, _) in valid_headers() {
        for cut in 0..header.len() {
            match parse(&header[..cut]) {
                Ok(Progress::Partial { more }) => assert!(
                    more >= 1 && cut + more <= header.len(),
                    "{:?} cut at {cut}: asks for {more} of {}",
                    String::from_utf8_lossy(&header),
                    header.len()
                ),
                other => panic!("{:?} cut at {cut}: {other:?}", String::from_utf8_lossy(&header)),
            }
        }
    }
}

/// Reading exactly what each step asks for takes a version 1 line in a few reads, not byte by byte.
#[test]
fn a_version_1_line_is_read_in_a_few_exact_steps() {
    let header = b"PROXY TCP4 192.168.100.200 10.0.0.1 56324 443\r\n";
    let mut have = 0;
    let mut reads = 0;
    loop {
        match parse(&header[..have]).unwrap() {
            Progress::Partial { more } => {
                have += more;
                reads += 1;
            }
            Progress::Complete(h) => {
                assert_eq!(h.len, header.len());
                break;
            }
        }
    }
    assert!(reads <= 8, "{reads} reads");
}

#[test]
fn other_protocols_are_told_apart_at_the_first_byte() {
    for data in [&b"GET / HTTP/1.1\r\n"[..], b"\x16\x03\x01\x02\x00", b"proxy TCP4", b" PROXY"] {
        assert_eq!(refused(&data[..1]), Refused::NotProxy, "{data:?}");
        assert_eq!(refused(data), Refused::NotProxy, "{data:?}");
    }
    assert_eq!(refused(b"PROXZ"), Refused::NotProxy);
    assert_eq!(refused(b"PRI"), Refused::NotProxy, "the HTTP/2 preface, at its third byte");
    assert_eq!(refused(b"POST / HTTP/1.1\r\n"), Refused::NotProxy);
    assert_eq!(refused(b"\r\n\r\n\0\r\nQUIX"), Refused::NotProxy);
    assert_eq!(refused(b"\r\nGET"), Refused::NotProxy);
}

#[test]
fn malformed_version_1_lines_are_refused() {
    for line in [
        &b"PROXY TCP4 192.0.2.1 10.0.0.1 51000 443\n"[..], // LF alone
        b"PROXY TCP4 192.0.2.1 10.0.0.1 51000 443\rX",     // CR alone
        b"PROXY TCP4 192.0.2.1  10.0.0.1 51000 443\r\n",   // two spaces
        b"PROXY TCP4 192.0.2.1 10.0.0.1 51000 443 \r\n",   // a trailing space
        b"PROXY TCP4 192.0.2.1 10.0.0.1 051000 443\r\n",   // six digits
        b"PROXY TCP4 192.0.2.1 10.0.0.1 01 443\r\n",       // a leading zero
        b"PROXY TCP4 192.0.2.1 10.0.0.1 65536 443\r\n",    // over 65535
        b"PROXY TCP4 192.0.2.01 10.0.0.1 1 443\r\n",       // a leading zero in the address
        b"PROXY TCP4 2001:db8::1 10.0.0.1 1 443\r\n",      // IPv6 under TCP4
        b"PROXY TCP6 192.0.2.1 ::1 1 443\r\n",             // IPv4 under TCP6
        b"PROXY TCP4 192.0.2.1 10.0.0.1 1\r\n",            // a port missing
        b"PROXY TCP4 192.0.2.1 10.0.0.1 1 2 3\r\n",        // a field too many
        b"PROXY TCP4 256.0.0.1 10.0.0.1 1 2\r\n",          // not an address
        b"PROXY TCP5 1.2.3.4 1.2.3.4 1 2\r\n",             // unknown protocol
        b"PROXY UNKNOWNX\r\n",
        b"PROXY \r\n",
        b"PROXY  TCP4 1.2.3.4 1.2.3.4 1 2\r\n",
        b"PROXY\r\n",
    ] {
        assert!(
            matches!(parse(line), Err(Refused::Malformed(_) | Refused::NotProxy)),
            "{:?}: {:?}",
            String::from_utf8_lossy(line),
            parse(line)
        );
    }
}

#[test]
fn junk_is_refused_before_the_line_ends() {
    // The reader stops at the first byte that no valid line can have.
    for partial in [
        &b"PROXY TCP4 1.2.x"[..],
        b"PROXY TCP4 1.2.3.4  ",
        b"PROXY TCP6 2001:db8::g",
        b"PROXY TCPX",
        b"PROXY TCP4 1 2 3 4 ",
    ] {
        assert!(matches!(parse(partial), Err(Refused::Malformed(_))), "{:?}", String::from_utf8_lossy(partial));
    }
    assert!(matches!(parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r"), Ok(Progress::Partial { more: 1 })));
    assert!(matches!(parse(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 02\r"), Err(Refused::Malformed(_))));
}

#[test]
fn a_version_1_line_longer_than_107_bytes_is_refused() {
    let mut line = b"PROXY UNKNOWN ".to_vec();
    line.resize(MAX_V1 - 2, b'x');
    line.extend_from_slice(b"\r\n");
    assert_eq!(complete(&line).len, MAX_V1, "107 bytes is the limit, inclusive");
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(MAX_V1 - 1, b'x');
    long.extend_from_slice(b"\r\n");
    assert_eq!(refused(&long), Refused::TooLong);
    assert_eq!(refused(&long[..MAX_V1]), Refused::TooLong, "known before the CRLF arrives");
    assert!(parse(&b"PROXY ".repeat(40)).is_err());
}

#[test]
fn malformed_version_2_headers_are_refused() {
    let good = v2(1, 0x11, &v4_block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2));
    let mut version = good.clone();
    version[12] = 0x11;
    assert!(matches!(refused(&version), Refused::Malformed(_)));
    assert!(matches!(refused(&version[..13]), Refused::Malformed(_)), "refused as soon as the byte arrives");
    let mut command = good.clone();
    command[12] = 0x22;
    assert!(matches!(refused(&command), Refused::Malformed(_)));
    for family in [0x41, 0x13, 0xff, 0x1f] {
        let mut f = good.clone();
        f[13] = family;
        assert!(matches!(refused(&f), Refused::Malformed(_)), "{family:#x}");
    }
    // The length says fewer bytes than the family's addresses.
    assert!(matches!(refused(&v2(1, 0x11, &[1, 2, 3, 4, 5, 6, 7, 8])), Refused::Malformed(_)));
    assert!(matches!(refused(&v2(1, 0x21, &[0; 35])), Refused::Malformed(_)));
    assert!(matches!(refused(&v2(1, 0x31, &[0; 200])), Refused::Malformed(_)));
    // TLVs must fit: one cut short, one longer than what is left.
    let mut cut = v4_block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
    cut.extend_from_slice(&[0x04, 0x00]);
    assert!(matches!(refused(&v2(1, 0x11, &cut)), Refused::Malformed(_)));
    let mut over = v4_block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
    over.extend_from_slice(&[0x05, 0x00, 0x09, b'a']);
    assert!(matches!(refused(&v2(1, 0x11, &over)), Refused::Malformed(_)));
}

#[test]
fn a_version_2_header_over_the_limit_is_refused_from_its_length_alone() {
    let mut block = v4_block([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
    block.extend(tlv(0xE0, &vec![b'x'; MAX_HEADER - 16 - 12 - 3]));
    assert_eq!(complete(&v2(1, 0x11, &block)).len, MAX_HEADER, "the limit is inclusive");
    block.push(0);
    let long = v2(1, 0x11, &block);
    assert_eq!(refused(&long[..16]), Refused::TooLong, "refused before any of the block is read");
    let mut huge = long[..14].to_vec();
    huge.extend_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(refused(&huge), Refused::TooLong);
}

#[test]
fn partial_version_2_headers_ask_for_the_prefix_then_the_block() {
    let h = v2(1, 0x21, &v6_block("::1", "::2", 1, 2));
    assert_eq!(parse(&h[..1]), Ok(Progress::Partial { more: 15 }));
    assert_eq!(parse(&h[..12]), Ok(Progress::Partial { more: 4 }));
    assert_eq!(parse(&h[..16]), Ok(Progress::Partial { more: 36 }));
    assert_eq!(parse(&h[..50]), Ok(Progress::Partial { more: 2 }));
    assert_eq!(parse(b""), Ok(Progress::Partial { more: 15 }));
}
