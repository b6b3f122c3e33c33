//! The integration tests' kit (`ramjet-test-support`, a dev-dependency of the root package): real
//! backends and clients over loopback sockets, the daemon started in-process as the binary runs it,
//! a real Kubernetes control plane and a fake API server, and the manifest builders every test
//! writes its Services, EndpointSlices, Ingresses and Gateways with.
//!
//! Paths that only a test binary knows at compile time (`CARGO_BIN_EXE_ramjet`) are the test's to
//! pass in; paths into this repository come from [`repo_root`].

pub mod apiserver;
pub mod backend;
pub mod client;
pub mod control_plane;
pub mod dns_server;
pub mod echo;
pub mod go_tools;
pub mod grpc_backend;
pub mod grpc_echo;
pub mod h2_echo;
pub mod h2client;
pub mod kube_api;
pub mod manifests;
pub mod netns;
pub mod otel_collector;
pub mod pki;
pub mod ports;
pub mod tls_backend;

pub use ports::free_port;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ramjet::{Daemon, DaemonConfig};
use ramjet_control::routes_file::{self, StaticRoutes};
use ramjet_dataplane::IoDriver;

/// The root of this repository (the workspace), for the scripts and files the tests use.
pub fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Both I/O drivers: every data-plane test runs on each.
pub const DRIVERS: [IoDriver; 2] = [IoDriver::IoUring, IoDriver::Legacy];

/// Parses static routes YAML (relative paths from `dir`).
pub fn routes_in(yaml: &str, dir: &Path) -> StaticRoutes {
    routes_file::parse(yaml, dir, "test.yaml").unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

pub fn routes(yaml: &str) -> StaticRoutes {
    routes_in(yaml, Path::new("."))
}

/// Starts the daemon in-process on loopback with ephemeral ports.
pub fn daemon(yaml: &str, driver: IoDriver) -> Daemon {
    daemon_with(routes(yaml), driver, |_| {})
}

/// The GatewayClass `ramjet` of ramjet's default controller name, as a manifests document.
pub const GATEWAY_CLASS: &str =
    "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: { name: ramjet }\n\
                                 spec: { controllerName: ramjet.dev/gateway-controller }\n";

/// The daemon serving the `--manifests` directory `dir` (read again every 20 ms) with `workers`
/// workers on `driver`.
pub fn manifests_daemon(dir: &Path, driver: IoDriver, workers: usize) -> Daemon {
    let mut config = DaemonConfig::with_source(ramjet::Source::Manifests {
        dir: dir.to_path_buf(),
        options: ramjet_control::compile::ingress::IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.io_driver = driver;
    config.workers = workers;
    Daemon::start(config).expect("the daemon starts")
}

pub fn daemon_with(routes: StaticRoutes, driver: IoDriver, tweak: impl FnOnce(&mut DaemonConfig)) -> Daemon {
    let mut config = DaemonConfig::local(routes);
    config.io_driver = driver;
    tweak(&mut config);
    Daemon::start(config).expect("daemon starts")
}

/// An address that refuses connections, for the whole test process: a socket bound to it that
/// never listens (and is never closed) holds the port, so no test's listener can take it and turn
/// "refused" into an answer.
pub fn dead_addr() -> SocketAddr {
    #[allow(unsafe_code)]
    // SAFETY: plain socket calls on a descriptor this function owns; `addr` and `len` are a valid
    // sockaddr_in and its size for bind and getsockname.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let bound = libc::bind(fd, &addr as *const _ as *const libc::sockaddr, len);
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        let named = libc::getsockname(fd, &mut addr as *mut _ as *mut libc::sockaddr, &mut len);
        assert_eq!(named, 0, "getsockname: {}", std::io::Error::last_os_error());
        SocketAddr::from(([127, 0, 0, 1], u16::from_be(addr.sin_port)))
    }
}

/// A fresh directory under the target directory.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ramjet-test-{name}-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Polls `check` until it holds or `timeout` passes.
pub fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until the serving generation is `n`.
pub fn wait_serving(daemon: &Daemon, n: u64) {
    assert!(
        eventually(Duration::from_secs(10), || daemon.published.current().number == n),
        "generation {n} never served (serving {})",
        daemon.published.current().number
    );
}

/// Which backend answered `GET /` for `host`, or the status when it was not a 200.
pub fn served(daemon: &Daemon, host: &str) -> String {
    let response = client::get(daemon.http_addr(), host, "/");
    if response.status == 200 {
        client::served_by(&response)
    } else {
        response.status.to_string()
    }
}
