//! Faults the real API server cannot be made to produce at a chosen moment, against the test API
//! server written here (`tests/support/apiserver.rs`): a list held back during start-up, the
//! Events' namespace not there yet, watches dropped with the history compacted away mid-run, a
//! Lease left by a replica that died. The daemon
//! (as the binary runs it) talks to it through the real `kube::Client`. Everything else about the
//! cluster is tested against the real kube-apiserver in `tests/cluster/`.

use ramjet_test_support as support;
use ramjet_test_support::apiserver;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use apiserver::ApiServer;
use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::cluster::{ClusterOptions, LeaseOptions, StatusAddresses};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::get;
use support::manifests::{endpoint_slice, ingress_class, Ingress, Service};
use support::{eventually, served, temp_dir};

const SLICES: &str = "discovery.k8s.io/v1/endpointslices";
const PUBLISHED_IP: &str = "203.0.113.7";

fn options(api: &ApiServer, dir: &Path, identity: &str) -> ClusterOptions {
    let mut lease = LeaseOptions::new("ramjet-leader", Some("ramjet".into()), identity);
    lease.duration = Duration::from_secs(2);
    lease.retry = Duration::from_millis(100);
    let mut options = ClusterOptions::new(Some(api.kubeconfig(dir)), IngressOptions::default(), lease);
    options.status_addresses = StatusAddresses::Addresses(vec![PUBLISHED_IP.into()]);
    options.debounce = Duration::from_millis(5);
    options
}

fn start(options: ClusterOptions) -> Daemon {
    // RAMJET_LOG=debug shows what the watcher and the writers do.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_env("RAMJET_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    }
    ramjet::install_crypto();
    let mut config = DaemonConfig::with_source(Source::Cluster(options));
    config.io_driver = IoDriver::Auto;
    let daemon = Daemon::start(config).expect("the daemon starts");
    // TLS Secrets may arrive at any time in cluster mode: HTTPS is listening before any does.
    assert!(daemon.https_addr().is_some(), "cluster mode binds HTTPS");
    daemon
}

fn service(name: &str) -> Service {
    Service::new("shop", name).target_port(8080)
}

/// One EndpointSlice for `service` with these ready endpoints (all on the port of the first).
fn slice(name: &str, service: &str, endpoints: &[SocketAddr]) -> String {
    endpoint_slice("shop", name, service, "http", endpoints)
}

fn ingress(name: &str, host: &str, service: &str) -> String {
    Ingress::new("shop", name).host(host).to(service).yaml()
}

/// The cluster every test starts from: `web.test` → Service `web` → backend `a`.
fn seed(api: &ApiServer, a: &Backend) {
    api.apply(&ingress_class("ramjet"));
    api.apply(&service("web").service_yaml());
    api.apply(&slice("web-1", "web", &[a.addr]));
    api.apply(&ingress("web", "web.test", "web"));
}

fn wait_served(daemon: &Daemon, host: &str, want: &str) {
    assert!(
        eventually(Duration::from_secs(10), || served(daemon, host) == want),
        "{host} never served by {want} (now: {})",
        served(daemon, host)
    );
}

#[test]
fn start_up_waits_for_every_list() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-startup");
    let a = Backend::start("a");
    seed(&api, &a);
    // The Ingress and the Service are listed; the endpoints are not, yet.
    api.hold_lists(SLICES, true);
    let options = options(&api, &dir, "replica-a");
    std::thread::scope(|s| {
        let starting = s.spawn(|| start(options));
        assert!(eventually(Duration::from_secs(10), || {
            api.lists("networking.k8s.io/v1/ingresses") > 0
                && api.lists("v1/services") > 0
                && api.lists("v1/secrets") > 0
        }));
        std::thread::sleep(Duration::from_millis(500));
        assert!(!starting.is_finished(), "the daemon started before the EndpointSlices were listed");
        api.hold_lists(SLICES, false);
        let daemon = starting.join().unwrap();
        // The very first generation already has the endpoints: no 503 window.
        assert_eq!(served(&daemon, "web.test"), "a");
        assert_eq!(daemon.published.current().number, 1);
        daemon.shutdown();
    });
}

#[test]
fn the_first_event_waits_for_its_namespace() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-event-namespace");
    let a = Backend::start("a");
    seed(&api, &a);
    // A brand-new kube-apiserver answers before its bootstrap controller has created `default`,
    // where Events about our (cluster-scoped) IngressClass go; the real one does so only sometimes
    // by the time of the first publish (tests/cluster/faults.rs meets it), this one on cue.
    api.namespace_missing("default", true);
    let daemon = start(options(&api, &dir, "replica-a"));
    assert_eq!(served(&daemon, "web.test"), "a");
    std::thread::sleep(Duration::from_secs(2));
    assert!(api.events().is_empty(), "an Event was created in a namespace that does not exist");
    api.namespace_missing("default", false);
    let first = || {
        api.events()
            .iter()
            .any(|e| e["reason"] == "ConfigApplied" && e["note"].as_str().is_some_and(|n| n.contains("(gen 0→1)")))
    };
    assert!(eventually(Duration::from_secs(10), first), "the first publish's Event was lost: {:#?}", api.events());
    daemon.shutdown();
}

#[test]
fn a_dropped_watch_recovers() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-drop");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    seed(&api, &a);
    let daemon = start(options(&api, &dir, "replica-a"));
    assert_eq!(served(&daemon, "web.test"), "a");
    let lists_before = api.lists(SLICES);
    let watches_before = api.watches(SLICES);
    // The watches drop and the server's history is gone: resuming gets 410, which forces a relist.
    api.compact();
    api.drop_watches();
    api.apply(&slice("web-1", "web", &[b.addr]));
    wait_served(&daemon, "web.test", "b");
    assert!(api.lists(SLICES) > lists_before, "no relist after 410 Gone");
    assert!(api.watches(SLICES) > watches_before + 1, "no watch after the 410 and the relist");
    // And it keeps watching afterwards.
    api.apply(&slice("web-1", "web", &[a.addr]));
    wait_served(&daemon, "web.test", "a");
    daemon.shutdown();
}

fn holder(api: &ApiServer) -> Option<String> {
    api.get("coordination.k8s.io/v1/leases", "ramjet", "ramjet-leader")
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(String::from))
}

/// A replica that died holding the Lease keeps it for its lease duration, measured on our clock.
#[test]
fn a_lease_held_by_a_dead_replica_is_taken_over_when_it_expires() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-dead-leader");
    let a = Backend::start("a");
    seed(&api, &a);
    api.apply(
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: { name: ramjet-leader, namespace: ramjet }\n\
         spec: { holderIdentity: crashed, leaseDurationSeconds: 3, renewTime: \"2025-01-01T00:00:00.000000Z\" }\n",
    );
    let started = std::time::Instant::now();
    let daemon = start(options(&api, &dir, "replica-a"));
    assert_eq!(served(&daemon, "web.test"), "a", "serving does not wait for the Lease");
    if started.elapsed() < Duration::from_secs(2) {
        assert_eq!(holder(&api).as_deref(), Some("crashed"));
        assert!(api.status_patches().is_empty(), "status written without the Lease");
    }
    assert!(eventually(Duration::from_secs(10), || holder(&api).as_deref() == Some("replica-a")));
    assert!(started.elapsed() >= Duration::from_secs(3), "took the Lease before it expired");
    assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == 1));
    daemon.shutdown();
}

/// The scale figure of `tests/cluster/scale.rs` (`scale_thousands_of_ingresses`) against this test API
/// server, for docs/benchmarks.md: the real binary, 5,000 Ingresses with their Services and
/// EndpointSlices (RAMJET_SCALE_INGRESSES). A measurement, not a check:
/// `cargo test --test kubernetes -- --ignored --nocapture scale`.
#[test]
#[ignore]
fn scale_on_the_test_api_server() {
    let n: usize = std::env::var("RAMJET_SCALE_INGRESSES").ok().and_then(|s| s.parse().ok()).unwrap_or(5_000);
    let api = ApiServer::start();
    let dir = temp_dir("k8s-scale");
    let a = Backend::start("a");
    api.apply(&ingress_class("ramjet"));
    for i in 0..n {
        let name = format!("web-{i}");
        api.apply(&service(&name).service_yaml());
        api.apply(&slice(&format!("{name}-1"), &name, &[a.addr]));
        api.apply(&ingress(&name, &format!("{name}.test"), &name));
    }
    let port = || std::net::SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let (http, https, admin) = (port(), port(), port());
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .args(["--kubeconfig", api.kubeconfig(&dir).to_str().unwrap(), "--publish-address", PUBLISHED_IP])
        .args(["--io-driver", "auto", "--workers", "1"])
        .arg(format!("--http-addr={http}"))
        .arg(format!("--https-addr={https}"))
        .arg(format!("--admin-addr={admin}"))
        .env("RAMJET_POD_NAMESPACE", "ramjet")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ready = eventually(Duration::from_secs(300), || {
        std::net::TcpStream::connect(admin).is_ok() && get(admin, "localhost", "/readyz").status == 200
    });
    assert!(ready, "never ready");
    let ready = started.elapsed();
    let rss = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let rss = rss.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap_or("?").trim().to_string();
    let lists: Vec<String> = ["networking.k8s.io/v1/ingresses", "v1/services", SLICES, "v1/secrets"]
        .iter()
        .map(|r| format!("{r}: {}", api.lists(r)))
        .collect();
    assert!(eventually(Duration::from_secs(600), || api.status_patches().len() >= n), "status never written on all");
    let all_status = started.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "test API server, {n} Ingresses: ready {ready:.1?} after start, RSS {rss}, lists {lists:?}, status on all after {all_status:.1?}"
    );
}
