//! Loopback ports for listeners that a test starts later: the daemon as a child process, the API
//! server, etcd.
//!
//! A port found with `bind(127.0.0.1:0)` and given back comes from the kernel's ephemeral range,
//! the range every outgoing connection takes its local port from, and the kernel may give it out
//! again before the child binds it. These ports come from below that range, where the kernel
//! never picks one by itself. Tests start many daemons at once from parallel threads, so a port
//! handed out must not be handed out again while its daemon is still starting: each process walks
//! the range in order from its own starting point, and takes the next port a bind finds free.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};

/// The lowest port handed out.
const LOWEST: u16 = 10_000;

/// A loopback port that nothing listens on, outside the kernel's ephemeral range, and not handed
/// out before by this process.
pub fn free_port() -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let ephemeral = first_ephemeral_port();
    if ephemeral <= LOWEST + 1_000 {
        // The ephemeral range starts too low to stay out of its way.
        return TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    }
    let span = u64::from(ephemeral - LOWEST);
    // Test processes side by side start at different places.
    let mut hasher = DefaultHasher::new();
    std::process::id().hash(&mut hasher);
    let start = hasher.finish();
    for _ in 0..span {
        let port = LOWEST + (start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
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
