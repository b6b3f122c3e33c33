//! Loopback ports for listeners that a test starts later: the daemon as a child process, the API
//! server, etcd.
//!
//! A port found with `bind(127.0.0.1:0)` and given back comes from the kernel's ephemeral range,
//! the range every outgoing connection takes its local port from. Between the test's bind and the
//! child's, any client connection on the machine (the tests make thousands) may take that port,
//! and the child then refuses to start: "address in use". So these ports come from below the
//! ephemeral range, where the kernel never picks one by itself. Each search starts at a random
//! place (so test threads and processes running side by side seldom meet) and takes the first
//! port that a bind finds free.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::TcpListener;

/// The lowest port handed out.
const LOWEST: u16 = 10_000;

/// A loopback port that nothing listens on, outside the kernel's ephemeral range.
pub fn free_port() -> u16 {
    let ephemeral = first_ephemeral_port();
    if ephemeral <= LOWEST + 1_000 {
        // The ephemeral range starts too low to stay out of its way.
        return TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    }
    let span = u64::from(ephemeral - LOWEST);
    // Every `RandomState` has keys of its own: a random start, std only.
    let start = RandomState::new().hash_one(std::process::id());
    for step in 0..span {
        let port = LOWEST + (start.wrapping_add(step) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {LOWEST} and {ephemeral}");
}

/// The start of the kernel's ephemeral port range (`net.ipv4.ip_local_port_range`).
fn first_ephemeral_port() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}
