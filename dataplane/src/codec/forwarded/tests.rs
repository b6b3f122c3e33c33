use std::rc::Rc;

use super::*;
use crate::conn::AddressField;
use ramjet_shared::parse_ranges;

fn rules(trusted: &str) -> AddressRules {
    AddressRules {
        trusted: if trusted.is_empty() { Box::new([]) } else { parse_ranges(trusted).unwrap().into() },
        ..AddressRules::default()
    }
}

fn walk_xff(trusted: &str, values: &[&str]) -> Option<String> {
    walk(values.iter().map(|v| v.as_bytes()), false, &rules(trusted)).map(shown)
}

fn walk_forwarded(trusted: &str, values: &[&str]) -> Option<String> {
    walk(values.iter().map(|v| v.as_bytes()), true, &rules(trusted)).map(shown)
}

/// The address, with its port only when the field gave one.
fn shown(a: SocketAddr) -> String {
    if a.port() == 0 {
        a.ip().to_string()
    } else {
        a.to_string()
    }
}

const PROXIES: &str = "10.0.0.0/8, 192.168.0.0/16, fd00::/8";

#[test]
fn the_rightmost_untrusted_address_is_the_client() {
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7"]).as_deref(), Some("203.0.113.7"));
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7, 10.1.1.1"]).as_deref(), Some("203.0.113.7"));
    // A spoofed entry left of the real client changes nothing.
    assert_eq!(walk_xff(PROXIES, &["6.6.6.6, 203.0.113.7, 10.1.1.1, 192.168.3.4"]).as_deref(), Some("203.0.113.7"));
    assert_eq!(walk_xff(PROXIES, &["6.6.6.6,203.0.113.7,10.1.1.1"]).as_deref(), Some("203.0.113.7"));
}

#[test]
fn ipv6_ipv4_mapped_and_ports() {
    assert_eq!(walk_xff(PROXIES, &["2001:db8::7, fd00::1"]).as_deref(), Some("2001:db8::7"));
    assert_eq!(walk_xff(PROXIES, &["[2001:db8::7]:4711"]).as_deref(), Some("[2001:db8::7]:4711"));
    assert_eq!(walk_xff(PROXIES, &["[2001:db8::7]"]).as_deref(), Some("2001:db8::7"));
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7:5000, 10.0.0.1:80"]).as_deref(), Some("203.0.113.7:5000"));
    // An IPv4-mapped address is its IPv4 address, for the trust check and for what is forwarded.
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7, ::ffff:10.0.0.1"]).as_deref(), Some("203.0.113.7"));
    assert_eq!(walk_xff(PROXIES, &["::ffff:203.0.113.7"]).as_deref(), Some("203.0.113.7"));
}

#[test]
fn garbage_ends_the_walk_at_the_last_trusted_address() {
    // nginx: an entry that is not an address stops the walk; what was found so far stands.
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7, unknown, 10.1.1.1"]).as_deref(), Some("10.1.1.1"));
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7, 10.1.1.1, garbage"]), None, "the peer stands");
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7 10.1.1.1"]), None, "a space is not a separator");
    for junk in ["", " , ,", "1.2.3.4.5", "[1.2.3.4]", "1.2.3.4:99999", "::ffff:1.2.3.4:80", "\u{fffd}", "_hidden", "-"]
    {
        let got = walk_xff(PROXIES, &[junk]);
        assert!(got.is_none(), "{junk:?} -> {got:?}");
    }
    // Empty entries are skipped, as nginx skips runs of commas and spaces.
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7,, ,10.1.1.1,"]).as_deref(), Some("203.0.113.7"));
}

/// The IPv4 fast path reads exactly what `Ipv4Addr::from_str` reads, and writes what `Display` writes.
#[test]
fn ipv4_is_read_and_written_as_the_standard_library_does() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut samples: Vec<String> = (0..20_000)
        .map(|_| {
            let n = next();
            match n % 4 {
                0 => std::net::Ipv4Addr::from(n as u32 >> (n % 3 * 8)).to_string(),
                1 => format!("{}.{}.{}.{}", n % 300, n / 7 % 260, n / 11 % 256, n / 13 % 1000),
                2 => format!("0{}.{}.{}", n % 9, n / 3 % 256, n / 5 % 256),
                _ => (0..(n % 12)).map(|i| b"0123456789.:x"[((n >> (i * 4)) % 13) as usize] as char).collect(),
            }
        })
        .collect();
    samples.extend(
        ["", ".", "1.2.3.", ".1.2.3", "1..2.3", "00.0.0.0", "0.0.0.0", "255.255.255.255", "256.0.0.0", "1.2.3.4.5"]
            .map(String::from),
    );
    for text in samples {
        let std_reads = text.parse::<std::net::Ipv4Addr>().ok();
        assert_eq!(ipv4(text.as_bytes()), std_reads, "{text:?}");
        if let Some(ip) = std_reads {
            let mut out = Vec::new();
            push_ip(&mut out, IpAddr::V4(ip));
            assert_eq!(String::from_utf8(out).unwrap(), ip.to_string());
        }
    }
    let mut out = Vec::new();
    push_ip(&mut out, "2001:db8::1".parse().unwrap());
    assert_eq!(out, b"2001:db8::1");
}

#[test]
fn entries_are_read_right_to_left_trimmed_and_never_empty() {
    let entries = |v: &str| {
        RevEntries { rest: v.as_bytes() }.map(|e| String::from_utf8_lossy(e).into_owned()).collect::<Vec<_>>()
    };
    assert_eq!(entries("a, b ,c"), ["c", "b", "a"]);
    assert_eq!(entries(" ,, a\t,\t, b c ,"), ["b c", "a"]);
    assert_eq!(entries(""), Vec::<String>::new());
    assert_eq!(entries(" , ,\t"), Vec::<String>::new());
    assert_eq!(entries("x"), ["x"]);
}

#[test]
fn a_list_of_trusted_addresses_names_its_leftmost() {
    assert_eq!(walk_xff(PROXIES, &["10.9.9.9, 10.1.1.1, 192.168.1.1"]).as_deref(), Some("10.9.9.9"));
    assert_eq!(walk_xff("0.0.0.0/0", &["1.1.1.1, 2.2.2.2"]).as_deref(), Some("1.1.1.1"));
}

#[test]
fn several_fields_are_one_list_the_last_field_last() {
    assert_eq!(walk_xff(PROXIES, &["6.6.6.6", "203.0.113.7, 10.1.1.1"]).as_deref(), Some("203.0.113.7"));
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7", "10.1.1.1", "192.168.0.9"]).as_deref(), Some("203.0.113.7"));
    assert_eq!(walk_xff(PROXIES, &["203.0.113.7", "junk", "10.1.1.1"]).as_deref(), Some("10.1.1.1"));
    assert_eq!(walk_xff(PROXIES, &[]), None);
}

#[test]
fn many_hops_are_walked_in_one_pass() {
    let mut list: Vec<String> = (0..5000).map(|i| format!("10.{}.{}.1", i / 256 % 256, i % 256)).collect();
    list.insert(0, "203.0.113.7".into());
    list.insert(0, "6.6.6.6".into());
    let joined = list.join(", ");
    assert_eq!(walk_xff(PROXIES, &[&joined]).as_deref(), Some("203.0.113.7"));
    let v6: Vec<String> = (0..2000).map(|i| format!("fd00::{i:x}")).collect();
    let joined = format!("2001:db8::1, {}", v6.join(","));
    assert_eq!(walk_xff(PROXIES, &[&joined]).as_deref(), Some("2001:db8::1"));
}

#[test]
fn forwarded_elements_give_their_for_parameter() {
    let f = |values: &[&str]| walk_forwarded(PROXIES, values);
    assert_eq!(f(&["for=203.0.113.7"]).as_deref(), Some("203.0.113.7"));
    assert_eq!(
        f(&["for=6.6.6.6, for=203.0.113.7;proto=https, for=10.1.1.1;by=10.0.0.2"]).as_deref(),
        Some("203.0.113.7")
    );
    assert_eq!(f(&[r#"For="[2001:db8:cafe::17]:4711""#]).as_deref(), Some("[2001:db8:cafe::17]:4711"));
    assert_eq!(f(&[r#"proto=http;for="203.0.113.7:80";host=a"#]).as_deref(), Some("203.0.113.7:80"));
    // Obfuscated or unknown nodes, and elements without `for=`, end the walk.
    assert_eq!(f(&["for=203.0.113.7, for=unknown, for=10.1.1.1"]).as_deref(), Some("10.1.1.1"));
    assert_eq!(f(&["for=203.0.113.7, for=_hidden"]), None);
    assert_eq!(f(&["for=203.0.113.7, proto=https"]), None);
    // A comma inside quotes cannot smuggle an address past the walk: the pieces are garbage.
    assert_eq!(f(&[r#"for="6.6.6.6, for=7.7.7.7", for=10.1.1.1"#]).as_deref(), Some("10.1.1.1"));
    assert_eq!(f(&[r#"for="203.0.113.7\"""#]), None);
}

fn conn(peer: &str, rules: Option<AddressRules>) -> ConnFacts {
    ConnFacts::new(peer.parse().unwrap(), false, 8080).with_rules(rules.map(Rc::new).as_ref())
}

/// Finds fields by name in a list, as the servers find them in a head.
fn fields<'a>(list: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> std::vec::IntoIter<&'a [u8]> + 'a {
    move |name: &str| {
        let found: Vec<&[u8]> =
            list.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_bytes()).collect();
        found.into_iter()
    }
}

fn upstream(conn: &ConnFacts, list: &[(&str, &str)]) -> (Option<SocketAddr>, String) {
    let client = request_client(conn, fields(list));
    let mut out = Vec::new();
    push_forwarded(&mut out, conn, client, fields(list), b"a.example");
    (client, String::from_utf8(out).unwrap())
}

#[test]
fn without_rules_the_lines_rendered_for_the_connection_go_upstream() {
    let c = conn("192.0.2.9:4000", None);
    assert!(c.rules.is_none());
    let (client, out) = upstream(&c, &[("x-forwarded-for", "6.6.6.6")]);
    assert_eq!(client, None);
    assert_eq!(
        out,
        "x-forwarded-for: 192.0.2.9\r\nx-real-ip: 192.0.2.9\r\nx-forwarded-proto: http\r\nx-forwarded-port: 8080\r\n\
         x-forwarded-scheme: http\r\nx-scheme: http\r\nx-forwarded-host: a.example\r\n"
    );
}

#[test]
fn rules_are_kept_only_for_connections_they_concern() {
    assert!(conn("192.0.2.9:4000", Some(rules(PROXIES))).rules.is_none(), "an untrusted peer reads nothing");
    let trusted = conn("10.0.0.2:4000", Some(rules(PROXIES)));
    assert!(trusted.rules.is_some() && trusted.trusted);
    let mapped = conn("[::ffff:10.0.0.2]:4000", Some(rules(PROXIES)));
    assert!(mapped.trusted, "an IPv4-mapped peer is its IPv4 address");
    let full = AddressRules { full_forwarded_for: true, ..rules("") };
    let untrusted_full = conn("192.0.2.9:4000", Some(full));
    assert!(untrusted_full.rules.is_some() && !untrusted_full.trusted);
}

#[test]
fn a_trusted_peer_names_the_client_upstream() {
    let c = conn("10.0.0.2:4000", Some(rules(PROXIES)));
    let (client, out) = upstream(&c, &[("X-Forwarded-For", "6.6.6.6, 203.0.113.7, 10.0.0.3")]);
    assert_eq!(client, Some("203.0.113.7:0".parse().unwrap()));
    assert!(
        out.starts_with("x-forwarded-for: 203.0.113.7\r\nx-real-ip: 203.0.113.7\r\nx-forwarded-proto: http\r\n"),
        "{out}"
    );
    // No field: the peer stands.
    let (client, out) = upstream(&c, &[]);
    assert_eq!(client, None);
    assert!(out.starts_with("x-forwarded-for: 10.0.0.2\r\nx-real-ip: 10.0.0.2\r\n"), "{out}");
}

#[test]
fn an_untrusted_peers_fields_change_nothing() {
    let c = conn("192.0.2.9:4000", Some(rules(PROXIES)));
    let (client, out) = upstream(&c, &[("x-forwarded-for", "6.6.6.6"), ("x-real-ip", "6.6.6.6")]);
    assert_eq!(client, None);
    assert!(!out.contains("6.6.6.6"), "{out}");
}

#[test]
fn the_configured_field_is_the_one_believed() {
    let real_ip = AddressRules { field: AddressField::new("X-Real-IP").unwrap(), ..rules(PROXIES) };
    let c = conn("10.0.0.2:4000", Some(real_ip));
    let (client, _) = upstream(&c, &[("x-forwarded-for", "6.6.6.6"), ("x-real-ip", "203.0.113.7")]);
    assert_eq!(client, Some("203.0.113.7:0".parse().unwrap()));
    let forwarded = AddressRules { field: AddressField::new("Forwarded").unwrap(), ..rules(PROXIES) };
    let c = conn("10.0.0.2:4000", Some(forwarded));
    let (client, _) = upstream(&c, &[("x-forwarded-for", "6.6.6.6"), ("forwarded", "for=203.0.113.8")]);
    assert_eq!(client, Some("203.0.113.8:0".parse().unwrap()));
    for bad in ["", "x forwarded", "x:y", "é"] {
        assert!(AddressField::new(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn compute_full_forwarded_for_appends_the_peer_to_what_came() {
    // ingress-nginx's compute-full-forwarded-for: "$http_x_forwarded_for, <peer>", or the peer alone.
    let full = AddressRules { full_forwarded_for: true, ..rules(PROXIES) };
    let c = conn("10.0.0.2:4000", Some(full.clone()));
    let (client, out) = upstream(&c, &[("x-forwarded-for", "6.6.6.6, 203.0.113.7"), ("x-forwarded-for", "10.0.0.3")]);
    assert_eq!(client, Some("203.0.113.7:0".parse().unwrap()));
    assert!(
        out.starts_with("x-forwarded-for: 6.6.6.6, 203.0.113.7, 10.0.0.3, 10.0.0.2\r\nx-real-ip: 203.0.113.7\r\n"),
        "{out}"
    );
    // From an untrusted peer the list is still kept (the backend judges it), the client is the peer.
    let c = conn("192.0.2.9:4000", Some(full));
    let (client, out) = upstream(&c, &[("x-forwarded-for", "6.6.6.6")]);
    assert_eq!(client, None);
    assert!(out.starts_with("x-forwarded-for: 6.6.6.6, 192.0.2.9\r\nx-real-ip: 192.0.2.9\r\n"), "{out}");
    let (_, out) = upstream(&c, &[]);
    assert!(out.starts_with("x-forwarded-for: 192.0.2.9\r\n"), "{out}");
}
