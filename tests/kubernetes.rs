//! The cluster source end to end: the daemon (as the binary runs it) watches the test API server
//! in `tests/support/apiserver.rs` through the real `kube::Client`, and real requests go through
//! the data plane to real backends.

#[path = "support/apiserver.rs"]
mod apiserver;
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use apiserver::ApiServer;
use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::cluster::{ClusterOptions, LeaseOptions, StatusAddresses};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use serde_json::Value;
use support::backend::Backend;
use support::client::{get, served_by};
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
    Daemon::start(config).expect("the daemon starts")
}

fn ingress_class() -> &'static str {
    "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: ramjet }\nspec: { controller: ramjet.dev/ingress-controller }\n"
}

fn service(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: {name}, namespace: shop }}\n\
         spec: {{ ports: [{{ name: http, port: 80, targetPort: 8080 }}] }}\n"
    )
}

/// One EndpointSlice for `service` with these ready endpoints (all on the port of the first).
fn slice(name: &str, service: &str, endpoints: &[SocketAddr]) -> String {
    let port = endpoints.first().map(|a| a.port()).unwrap_or(8080);
    let list: Vec<String> =
        endpoints.iter().map(|a| format!("{{ addresses: [\"{}\"], conditions: {{ ready: true }} }}", a.ip())).collect();
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{ name: {name}, namespace: shop, labels: {{ kubernetes.io/service-name: {service} }} }}\n\
         addressType: IPv4\nports: [{{ name: http, port: {port} }}]\nendpoints: [{}]\n",
        list.join(", ")
    )
}

fn ingress(name: &str, host: &str, service: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: {name}, namespace: shop }}\n\
         spec:\n  ingressClassName: ramjet\n  rules: [{{ host: {host}, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ service: {{ name: {service}, port: {{ name: http }} }} }} }}] }} }}]\n"
    )
}

/// The cluster every test starts from: `web.test` → Service `web` → backend `a`.
fn seed(api: &ApiServer, a: &Backend) {
    api.apply(ingress_class());
    api.apply(&service("web"));
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

fn events_with_reason(api: &ApiServer, reason: &str) -> Vec<Value> {
    api.events().into_iter().filter(|e| e["reason"] == reason).collect()
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
fn an_endpoint_slice_change_reaches_the_data_plane() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-slices");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    seed(&api, &a);
    let daemon = start(options(&api, &dir, "replica-a"));
    assert_eq!(served(&daemon, "web.test"), "a");
    // The Deployment rolls: the endpoint moves from a to b, no Ingress changes.
    api.apply(&slice("web-1", "web", &[b.addr]));
    wait_served(&daemon, "web.test", "b");
    // No ready endpoint at all: 503, not 404.
    api.apply(&slice("web-1", "web", &[]));
    wait_served(&daemon, "web.test", "503");
    // The Ingress goes away: so does the route.
    api.delete("networking.k8s.io/v1", "Ingress", "shop", "web");
    wait_served(&daemon, "web.test", "404");
    daemon.shutdown();
}

#[test]
fn a_bad_ingress_does_not_block_a_good_one() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-bad");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    seed(&api, &a);
    api.apply(&ingress("broken", "broken.test", "no-such-service"));
    let daemon = start(options(&api, &dir, "replica-a"));
    assert_eq!(served(&daemon, "web.test"), "a");
    assert_eq!(served(&daemon, "broken.test"), "404");
    // The leader tells the broken Ingress why, once.
    assert!(eventually(Duration::from_secs(10), || !events_with_reason(&api, "CompileFailed").is_empty()));
    let warning = &events_with_reason(&api, "CompileFailed")[0];
    assert_eq!(warning["type"], "Warning");
    assert_eq!(warning["regarding"]["kind"], "Ingress");
    assert_eq!(warning["regarding"]["name"], "broken");
    assert_eq!(warning["metadata"]["namespace"], "shop");
    let note = warning["note"].as_str().unwrap();
    assert!(note.contains("Service shop/no-such-service does not exist"), "{note}");
    // Recompiles for other reasons do not repeat it.
    api.apply(&slice("web-1", "web", &[b.addr]));
    wait_served(&daemon, "web.test", "b");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(events_with_reason(&api, "CompileFailed").len(), 1);
    // Fixing it serves it.
    api.apply(&service("no-such-service"));
    api.apply(&slice("fixed-1", "no-such-service", &[a.addr]));
    wait_served(&daemon, "broken.test", "a");
    daemon.shutdown();
}

#[test]
fn events_and_status_are_written_once() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-writes");
    let a = Backend::start("a");
    seed(&api, &a);
    let daemon = start(options(&api, &dir, "replica-a"));
    assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == 1));
    let patch = &api.status_patches()[0];
    assert_eq!((patch.namespace.as_str(), patch.name.as_str()), ("shop", "web"));
    assert_eq!(patch.content_type, "application/apply-patch+yaml");
    assert!(patch.query.contains("fieldManager=ramjet"), "{}", patch.query);
    assert_eq!(patch.body["status"]["loadBalancer"]["ingress"][0]["ip"], PUBLISHED_IP);
    assert!(patch.body.get("spec").is_none(), "status apply must not carry the spec: {}", patch.body);
    let stored = api.get("networking.k8s.io/v1/ingresses", "shop", "web").unwrap();
    assert_eq!(stored["status"]["loadBalancer"]["ingress"][0]["ip"], PUBLISHED_IP);

    assert!(eventually(Duration::from_secs(10), || events_with_reason(&api, "ConfigApplied").len() == 1));
    let applied = &events_with_reason(&api, "ConfigApplied")[0];
    assert_eq!(applied["type"], "Normal");
    assert_eq!(applied["regarding"]["kind"], "IngressClass");
    assert_eq!(applied["regarding"]["name"], "ramjet");
    assert_eq!(applied["metadata"]["namespace"], "default");
    assert_eq!(applied["reportingController"], "ramjet.dev/ingress-controller");
    assert_eq!(applied["reportingInstance"], "replica-a");
    assert!(applied["note"].as_str().unwrap().contains("(gen 0→1)"), "{}", applied["note"]);

    // Re-applying the same manifests (GitOps does this all day) changes nothing ramjet writes.
    api.apply(&ingress("web", "web.test", "web"));
    api.apply(&slice("web-1", "web", &[a.addr]));
    api.apply(ingress_class());
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(api.status_patches().len(), 1, "status rewritten without a change");
    assert_eq!(events_with_reason(&api, "ConfigApplied").len(), 1, "an Event without a new generation");
    assert_eq!(daemon.published.current().number, 1);
    daemon.shutdown();
}

#[test]
fn a_status_someone_keeps_reverting_is_given_up_with_a_warning() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-revert");
    let a = Backend::start("a");
    seed(&api, &a);
    let daemon = start(options(&api, &dir, "replica-a"));
    assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == 1));
    let revert = || {
        let mut web = api.get("networking.k8s.io/v1/ingresses", "shop", "web").unwrap();
        web["status"] = serde_json::json!({ "loadBalancer": { "ingress": [{ "ip": "192.0.2.1" }] } });
        api.apply_value(web);
    };
    // Reverted: written again, up to the limit; then one warning, and the other writer keeps it.
    for n in 2..=3 {
        revert();
        assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == n), "rewrite {n}");
    }
    revert();
    assert!(eventually(Duration::from_secs(10), || !events_with_reason(&api, "StatusReverted").is_empty()));
    revert();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(api.status_patches().len(), 3);
    assert_eq!(events_with_reason(&api, "StatusReverted").len(), 1);
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

#[test]
fn without_permission_for_events_everything_else_works() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-forbidden");
    let a = Backend::start("a");
    seed(&api, &a);
    api.forbid("events.k8s.io/v1/events");
    api.apply(&ingress("broken", "broken.test", "no-such-service"));
    let daemon = start(options(&api, &dir, "replica-a"));
    assert_eq!(served(&daemon, "web.test"), "a");
    assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == 2));
    assert!(api.events().is_empty());
    daemon.shutdown();
}

#[test]
fn one_replica_writes_status_and_another_takes_over() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-lease");
    let a = Backend::start("a");
    seed(&api, &a);
    // A long lease: a takeover within it proves the leader released the Lease on shutdown.
    let replica = |identity: &str| {
        let mut options = options(&api, &dir, identity);
        options.lease.duration = Duration::from_secs(10);
        options
    };
    let first = start(replica("replica-a"));
    assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == 1));
    let second = start(replica("replica-b"));
    assert_eq!(served(&second, "web.test"), "a", "a follower serves traffic");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(api.status_patches().len(), 1, "the follower wrote status");
    assert_eq!(holder(&api).as_deref(), Some("replica-a"));
    let stopped = std::time::Instant::now();
    first.shutdown();
    assert!(eventually(Duration::from_secs(5), || holder(&api).as_deref() == Some("replica-b")));
    assert!(stopped.elapsed() < Duration::from_secs(8), "took over only when the lease expired");
    // The new leader writes what changes from now on.
    api.apply(&ingress("shop", "shop.test", "web"));
    assert!(eventually(Duration::from_secs(10), || api.status_patches().iter().any(|p| p.name == "shop")));
    let lease = api.get("coordination.k8s.io/v1/leases", "ramjet", "ramjet-leader").unwrap();
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    let writes = api.lease_writes();
    let creates: Vec<_> = writes.iter().filter(|(verb, _)| verb == "create").collect();
    assert_eq!(creates.len(), 1, "the Lease is created once, then only read and updated");
    assert_eq!(creates[0].1["spec"]["holderIdentity"], "replica-a");
    second.shutdown();
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

/// The binary as the Helm chart runs it: flags, `POD_NAME` and `RAMJET_POD_NAMESPACE`.
#[test]
fn the_binary_serves_the_cluster_its_kubeconfig_names() {
    use std::process::{Command, Stdio};
    let api = ApiServer::start();
    let dir = temp_dir("k8s-binary");
    let a = Backend::start("a");
    seed(&api, &a);
    let port = || SocketAddr::from(([127, 0, 0, 1], support::free_port())).to_string();
    let (http, https, admin) = (port(), port(), port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .arg("--kubeconfig")
        .arg(api.kubeconfig(&dir))
        .args(["--workers", "1", "--io-driver", "auto", "--http-addr", &http, "--https-addr", &https])
        .args(["--admin-addr", &admin, "--publish-address", PUBLISHED_IP, "--election-id", "ramjet-test-leader"])
        .env("POD_NAME", "ramjet-0")
        .env("RAMJET_POD_NAMESPACE", "ingress")
        .env("RAMJET_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let http: SocketAddr = http.parse().unwrap();
    let up = eventually(Duration::from_secs(20), || std::net::TcpStream::connect(http).is_ok());
    if !up {
        let _ = child.kill();
        panic!("the daemon did not start");
    }
    assert_eq!(served_by(&get(http, "web.test", "/")), "a");
    let lease = || api.get("coordination.k8s.io/v1/leases", "ingress", "ramjet-test-leader");
    assert!(eventually(Duration::from_secs(10), || lease().is_some()));
    assert_eq!(lease().unwrap()["spec"]["holderIdentity"], "ramjet-0");
    assert!(eventually(Duration::from_secs(10), || api.status_patches().len() == 1));
    assert!(eventually(Duration::from_secs(10), || !events_with_reason(&api, "ConfigApplied").is_empty()));
    assert_eq!(events_with_reason(&api, "ConfigApplied")[0]["reportingInstance"], "ramjet-0");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(child.wait().unwrap().success());
}

/// `--publish-service`: status follows that Service's load-balancer address, also when it changes.
#[test]
fn status_follows_the_publish_service() {
    let api = ApiServer::start();
    let dir = temp_dir("k8s-publish-service");
    let a = Backend::start("a");
    seed(&api, &a);
    let lb = |ip: &str| {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{ name: ramjet, namespace: ingress }}\n\
             spec: {{ type: LoadBalancer, ports: [{{ name: http, port: 80 }}] }}\n\
             status: {{ loadBalancer: {{ ingress: [{{ ip: \"{ip}\" }}] }} }}\n"
        )
    };
    api.apply(&lb("198.51.100.10"));
    let mut options = options(&api, &dir, "replica-a");
    options.status_addresses = StatusAddresses::Service { namespace: "ingress".into(), name: "ramjet".into() };
    // Only the Ingress's namespace is watched; the publish Service lives elsewhere.
    options.watch_namespace = Some("shop".into());
    let daemon = start(options);
    let written = |ip: &str| {
        api.get("networking.k8s.io/v1/ingresses", "shop", "web")
            .is_some_and(|i| i["status"]["loadBalancer"]["ingress"][0]["ip"] == ip)
    };
    assert!(eventually(Duration::from_secs(10), || written("198.51.100.10")));
    api.apply(&lb("198.51.100.20"));
    assert!(eventually(Duration::from_secs(10), || written("198.51.100.20")));
    assert_eq!(api.status_patches().len(), 2);
    daemon.shutdown();
}
