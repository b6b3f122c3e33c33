//! UDP routes as their users run them, over real sockets: a DNS resolver (hickory, as a client
//! program would use it) asks a real DNS server through a UDP route; and 10,000 flows at once, each
//! a client socket of its own (in a Python process, so that both sides' descriptors fit), answered
//! from the route's port, then ended once idle — the sockets ramjet held for them are closed.

use ramjet_test_support as support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::TokioResolver;
use support::dns_server::DnsServer;
use support::echo::udp_echo;
use support::{daemon_with, eventually, free_port, routes_in, DRIVERS};

/// A resolver that asks only `server`, over UDP.
fn resolver(server: SocketAddr) -> TokioResolver {
    let mut config = ResolverConfig::new();
    config.add_name_server(NameServerConfig::new(server, Protocol::Udp));
    let mut options = ResolverOpts::default();
    options.timeout = Duration::from_millis(500);
    options.attempts = 2;
    options.cache_size = 0;
    TokioResolver::builder_with_config(config, TokioConnectionProvider::default()).with_options(options).build()
}

#[test]
fn a_dns_query_is_answered_through_a_udp_route() {
    let dns = DnsServer::start();
    dns.set("db.shop.test", &["10.1.2.3".parse().unwrap(), "10.1.2.4".parse().unwrap()], 30);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for driver in DRIVERS {
        let port = free_port();
        let yaml = format!(
            "backends:\n  dns: {{ endpoints: [\"{}\"] }}\nudp:\n  - {{ port: {port}, backend: dns }}\n",
            dns.addr
        );
        let d = daemon_with(routes_in(&yaml, Path::new(".")), driver, |c| c.workers = 2);
        let through = resolver(SocketAddr::from(([127, 0, 0, 1], port)));
        let lookup = || runtime.block_on(through.lookup_ip("db.shop.test."));
        assert!(eventually(Duration::from_secs(10), || lookup().is_ok()), "{driver:?}: {:?}", lookup().err());
        let mut found: Vec<IpAddr> = lookup().unwrap().iter().collect();
        found.sort();
        assert_eq!(found, ["10.1.2.3".parse::<IpAddr>().unwrap(), "10.1.2.4".parse().unwrap()], "{driver:?}");
        // A name the server does not have: its NXDOMAIN comes back through the route too.
        let missing = runtime.block_on(through.lookup_ip("nowhere.shop.test."));
        let error = missing.expect_err("no such name").to_string();
        assert!(error.contains("no record") || error.contains("NXDomain"), "{driver:?}: {error}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
}

/// Opens `flows` UDP sockets (one flow each), sends from each in turns of `batch` (more at once
/// would overflow the route port's receive buffer, and UDP may drop), and checks every answer:
/// from the route's port, for its own datagram. Prints the answers per backend as `name count`.
const CLIENT: &str = r#"
import collections, resource, socket, sys
port, flows, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
if hard != resource.RLIM_INFINITY and hard < flows + 100:
    sys.exit(f"needs {flows + 100} file descriptors; the hard limit is {hard}")
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
sockets = []
for _ in range(flows):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(5)
    sockets.append(s)
on = collections.Counter()
for start in range(0, flows, batch):
    group = list(enumerate(sockets[start:start + batch], start))
    for i, s in group:
        s.sendto(b"f%d" % i, ("127.0.0.1", port))
    for i, s in group:
        data, sender = s.recvfrom(64)
        assert sender[1] == port, f"flow {i}: answered from {sender}"
        name, _, echoed = data.partition(b":")
        assert echoed == b"f%d" % i, f"flow {i}: {data!r}"
        on[name.decode()] += 1
for name, count in sorted(on.items()):
    print(name, count)
"#;

/// Descriptors this process holds: the in-process daemon's sockets among them.
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map(|d| d.count()).unwrap_or(0)
}

/// Raises this process's descriptor limit to its hard limit (the daemon holds a socket per flow).
fn raise_descriptor_limit(needed: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    #[allow(unsafe_code)]
    // SAFETY: getrlimit and setrlimit with a valid rlimit this function owns.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        assert!(limit.rlim_max >= needed, "needs {needed} file descriptors; the hard limit is {}", limit.rlim_max);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

#[test]
fn ten_thousand_udp_flows_are_answered_and_end_once_idle() {
    const FLOWS: usize = 10_000;
    raise_descriptor_limit(FLOWS as u64 + 1_000);
    let (a, b) = (udp_echo("a"), udp_echo("b"));
    // Longer than the client takes for all its flows, so that none ends before they are counted.
    let idle = Duration::from_secs(6);
    for driver in DRIVERS {
        let port = free_port();
        let yaml = format!(
            "backends:\n  a: {{ endpoints: [\"{a}\"] }}\n  b: {{ endpoints: [\"{b}\"] }}\n\
             udp:\n  - {{ port: {port}, backends: [{{ name: a, weight: 3 }}, {{ name: b, weight: 1 }}] }}\n"
        );
        let d = daemon_with(routes_in(&yaml, Path::new(".")), driver, |c| {
            c.workers = 2;
            c.settings.udp_idle_timeout = idle;
        });
        let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        probe.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let answered = || {
            let mut buf = [0u8; 64];
            probe.send_to(b"probe", ("127.0.0.1", port)).is_ok() && probe.recv_from(&mut buf).is_ok()
        };
        assert!(eventually(Duration::from_secs(10), answered), "{driver:?}: the port does not answer");
        let before = open_descriptors();
        let out = Command::new("python3")
            .args(["-c", CLIENT, &port.to_string(), &FLOWS.to_string(), "200"])
            .output()
            .expect("run python3");
        assert!(out.status.success(), "{driver:?}: {}", String::from_utf8_lossy(&out.stderr));
        let held = open_descriptors();
        // Every flow answered, split 3:1: 2,500 expected on b, σ ≈ 43.
        let counts: Vec<(String, usize)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(' ').map(|(n, c)| (n.to_string(), c.parse().unwrap())))
            .collect();
        assert_eq!(counts.iter().map(|(_, c)| c).sum::<usize>(), FLOWS, "{driver:?}: {counts:?}");
        let on_b = counts.iter().find(|(n, _)| n == "b").map_or(0, |(_, c)| *c);
        assert!((2_250..=2_750).contains(&on_b), "{driver:?}: {counts:?}");
        // A socket to the backend per flow while the flows live ...
        assert!(held >= before + FLOWS * 9 / 10, "{driver:?}: {before} descriptors before, {held} with the flows");
        // ... closed once they have been idle for the timeout.
        let quiet = Instant::now();
        assert!(
            eventually(idle * 3, || open_descriptors() < before + 200),
            "{driver:?}: {} descriptors {:?} after the flows went quiet ({before} before)",
            open_descriptors(),
            quiet.elapsed()
        );
        // The port still answers: a new flow after the old ones ended.
        assert!(answered(), "{driver:?}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
}
