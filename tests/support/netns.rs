//! Backends the real API server accepts in EndpointSlices, for the tests against it.

use std::process::Command;

/// The network namespace the backends live in. The API server refuses loopback addresses in
/// EndpointSlices ("may not be in the loopback range"), and test traffic must stay on loopback or on
/// test hosts of our own: so the backends listen inside a network namespace the tests make, joined
/// to this one by a veth pair (10.231.0.1 here, 10.231.0.2 there). Set up once per machine
/// (idempotent, under a lock; iproute2 is installed when missing) and reused by every run;
/// `ip netns del ramjet-test` removes it.
pub const BACKEND_NETNS: &str = "ramjet-test";
pub const BACKEND_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 231, 0, 2);
/// This namespace's end of the veth pair (once [`backend_netns`] made it): an address a listener of
/// the tests' own can bind and an EndpointSlice may name.
pub const HOST_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(10, 231, 0, 1);

pub fn backend_netns() {
    static READY: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    READY.get_or_init(|| {
        let script = r#"
set -e
command -v ip >/dev/null || { apt-get update -qq && apt-get install -y -qq iproute2 >/dev/null; }
exec 9>/tmp/ramjet-test-netns.lock
flock 9
ip netns list | grep -qw ramjet-test || ip netns add ramjet-test
if ! ip link show rjt-host >/dev/null 2>&1; then
  ip link add rjt-host type veth peer name rjt-ns
  ip link set rjt-ns netns ramjet-test
fi
ip addr replace 10.231.0.1/30 dev rjt-host
ip link set rjt-host up
ip netns exec ramjet-test ip addr replace 10.231.0.2/30 dev rjt-ns
ip netns exec ramjet-test ip link set rjt-ns up
ip netns exec ramjet-test ip link set lo up
"#;
        let out = Command::new("bash").args(["-c", script]).output().expect("run ip(8)");
        assert!(
            out.status.success(),
            "the cluster tests put their backends in a network namespace (root and iproute2 needed): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// A listener on [`BACKEND_IP`], inside [`BACKEND_NETNS`]: bound from a thread that joins the
/// namespace, so only that socket lives there.
pub fn bind_backend() -> std::net::TcpListener {
    in_backend_netns(|| std::net::TcpListener::bind((BACKEND_IP, 0)))
}

/// A UDP socket on [`BACKEND_IP`], inside [`BACKEND_NETNS`], as [`bind_backend`] binds.
pub fn bind_backend_udp() -> std::net::UdpSocket {
    in_backend_netns(|| std::net::UdpSocket::bind((BACKEND_IP, 0)))
}

#[allow(unsafe_code)]
fn in_backend_netns<S: Send + 'static>(bind: fn() -> std::io::Result<S>) -> S {
    use std::os::fd::AsRawFd;
    backend_netns();
    std::thread::spawn(move || {
        let ns = std::fs::File::open(format!("/var/run/netns/{BACKEND_NETNS}")).expect("the backend namespace");
        // SAFETY: setns(2) with an open namespace fd changes only this thread's network namespace;
        // the thread ends right after binding.
        let joined = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(joined, 0, "setns: {}", std::io::Error::last_os_error());
        bind().expect("bind in the backend namespace")
    })
    .join()
    .expect("the binding thread")
}
