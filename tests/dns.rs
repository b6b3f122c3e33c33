//! DNS for names outside the cluster, end to end: an ExternalName Service served from files
//! (`--manifests`), its name answered by a real DNS server started here, whose answers change, whose
//! TTLs expire and which then goes away. Traffic follows the answers; a failed lookup never empties
//! the backend.

use ramjet_test_support as support;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_control::dns::DnsSettings;
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::{get, served_by};
use support::dns_server::DnsServer;
use support::manifests::{ingress_class, Ingress};
use support::{eventually, temp_dir};

/// An ExternalName Service `name` for `external`, whose port 80 targets `target`, and an Ingress
/// for `host` to it.
fn external(name: &str, external: &str, target: u16, host: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Service\nmetadata: {{ name: {name}, namespace: shop }}\nspec:\n  type: ExternalName\n  \
         externalName: {external}\n  ports: [{{ name: http, port: 80, targetPort: {target} }}]\n---\n{}",
        Ingress::new("shop", name).host(host).port_number(80).to(name).yaml()
    )
}

fn start(dir: &Path, dns: SocketAddr) -> Daemon {
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.io_driver = IoDriver::Auto;
    config.dns =
        DnsSettings { servers: Some(vec![dns]), min_ttl: Duration::from_secs(1), max_ttl: Duration::from_secs(30) };
    Daemon::start(config).expect("the daemon starts")
}

/// Who answered `GET /` for `host`: the backend's name, or the status when it is not 200.
fn answered_by(http: SocketAddr, host: &str) -> String {
    let r = get(http, host, "/");
    if r.status == 200 {
        served_by(&r)
    } else {
        r.status.to_string()
    }
}

/// With its DNS server gone, `name`'s lookups fail: a warning says so, and `host` is still
/// answered by `backend` (a failed lookup never empties a backend).
fn the_last_answer_is_kept(daemon: &Daemon, name: &str, host: &str, backend: &str) {
    let failing = format!("{name} up fails");
    assert!(eventually(Duration::from_secs(20), || diagnostics(daemon).contains(&failing)), "{}", diagnostics(daemon));
    for _ in 0..5 {
        assert_eq!(answered_by(daemon.http_addr(), host), backend, "a failed lookup never empties the backend");
    }
}

/// What the latest compile says (a warning may change without the table: the last answer kept).
fn diagnostics(daemon: &Daemon) -> String {
    let latest = daemon.control.diagnostics().borrow().clone();
    latest.iter().map(|d| format!("{} {}: {}\n", d.object.kind, d.object.name, d.message)).collect()
}

#[test]
fn an_external_name_follows_its_dns_answers_and_keeps_the_last_good_one() {
    let dir = temp_dir("dns-external-name");
    let first = Backend::start("first");
    let port = first.addr.port();
    // The second answer: another address, the same port (127.0.0.2 is loopback too).
    let second = Backend::on_listener("second", TcpListener::bind(("127.0.0.2", port)).unwrap(), None);
    let mut dns = DnsServer::start();
    let loopback = |last: u8| IpAddr::from([127, 0, 0, last]);
    dns.set("api.partner.test", &[loopback(1)], 1);
    let objects = [
        ingress_class("ramjet"),
        external("partner", "api.partner.test", port, "partner.test"),
        external("nowhere", "nothing.partner.test", port, "nowhere.test"),
        external("literal", "127.0.0.2", port, "literal.test"),
    ]
    .concat();
    std::fs::write(dir.join("objects.yaml"), objects).unwrap();
    let daemon = start(&dir, dns.addr);
    let http = daemon.http_addr();
    let answered_by = |host: &str| answered_by(http, host);

    // Resolved on the control thread, then served.
    assert!(eventually(Duration::from_secs(10), || answered_by("partner.test") == "first"), "{}", diagnostics(&daemon));
    assert_eq!(answered_by("literal.test"), "second", "an IP address needs no lookup");
    // A name that does not exist: its requests answer 503, and the Service says why.
    assert_eq!(answered_by("nowhere.test"), "503");
    assert!(
        eventually(Duration::from_secs(10), || diagnostics(&daemon).contains("nothing.partner.test does not resolve")),
        "{}",
        diagnostics(&daemon)
    );

    // The answer changes: within its TTL (1 s) traffic moves.
    dns.set("api.partner.test", &[loopback(2)], 1);
    assert!(
        eventually(Duration::from_secs(10), || answered_by("partner.test") == "second"),
        "{}",
        diagnostics(&daemon)
    );
    let asked = dns.queries();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(dns.queries() > asked, "the name is asked again when its TTL runs out");

    // The server goes away: lookups fail, the last good answer stays, and a warning says so.
    dns.stop();
    the_last_answer_is_kept(&daemon, "api.partner.test", "partner.test", "second");
    drop(second);
    daemon.shutdown();
}

/// An `auth-url` outside the cluster, by DNS name (an oauth2-proxy or identity provider elsewhere):
/// asked over plain HTTP as ingress-nginx asks it; over `https://` its certificate is verified
/// (one no public CA signed is refused: the request answers 500, never passes).
#[test]
fn an_auth_url_outside_the_cluster_is_reached_by_its_dns_name() {
    ramjet::install_crypto();
    let dir = temp_dir("dns-auth-url");
    let app = Backend::start("app");
    let auth = Backend::start("auth");
    let pki = support::pki::Pki::new("dns-auth-url-pki");
    pki.leaf("tls", &["tls.partner.test"]);
    let tls_auth = support::tls_backend::TlsBackend::start("tls-auth", &pki, "tls", None);
    let dns = DnsServer::start();
    let loopback = IpAddr::from([127, 0, 0, 1]);
    dns.set("auth.partner.test", &[loopback], 30);
    dns.set("tls.partner.test", &[loopback], 30);
    let service = support::manifests::Service::new("shop", "app").target_port(app.addr.port()).endpoints(&[app.addr]);
    let guarded = |name: &str, url: String| {
        Ingress::new("shop", name)
            .host(&format!("{name}.test"))
            .port_number(80)
            .to("app")
            .annotation("nginx.ingress.kubernetes.io/auth-url", &url)
            .yaml()
    };
    let objects = [
        ingress_class("ramjet"),
        service.port("http", 80).yaml(),
        guarded("allowed", format!("http://auth.partner.test:{}/nobody/200", auth.addr.port())),
        guarded("denied", format!("http://auth.partner.test:{}/nobody/401", auth.addr.port())),
        guarded("untrusted", format!("https://tls.partner.test:{}/", tls_auth.addr.port())),
    ]
    .join("---\n");
    std::fs::write(dir.join("objects.yaml"), objects).unwrap();
    let daemon = start(&dir, dns.addr);
    let http = daemon.http_addr();
    assert!(
        eventually(Duration::from_secs(10), || get(http, "allowed.test", "/").status == 200),
        "{}",
        diagnostics(&daemon)
    );
    assert_eq!(served_by(&get(http, "allowed.test", "/")), "app");
    assert_eq!(get(http, "denied.test", "/").status, 401);
    assert!(auth.requests() >= 2, "the auth service was asked");
    // A certificate of a private CA is not trusted for a host outside the cluster.
    assert_eq!(get(http, "untrusted.test", "/").status, 500);
    assert_eq!(tls_auth.snis(), vec![Some("tls.partner.test".to_string()); tls_auth.snis().len()]);
    daemon.shutdown();
}

/// ingress-nginx's `mirror-target` to a host outside the cluster: by DNS name (resolved on the
/// control thread) or by address, with the URL's own path in place of the request's (its query
/// kept), and without the body under `mirror-request-body: off`; a Service of the cluster by its
/// DNS name as before. Over `https://`, the copy goes over TLS, verified against the Mozilla roots.
#[test]
fn a_mirror_target_outside_the_cluster_gets_copies() {
    let dir = temp_dir("dns-mirror-target");
    let app = Backend::start("app");
    let (named, literal, in_cluster) = (Backend::start("named"), Backend::start("literal"), Backend::start("cluster"));
    let dns = DnsServer::start();
    dns.set("mirror.partner.test", &[IpAddr::from([127, 0, 0, 1])], 30);
    // Over https://, a certificate of a private CA: the Mozilla roots do not trust it.
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("dns-mirror-target-pki");
    pki.leaf("tls", &["mirror.partner.test"]);
    let private = support::tls_backend::TlsBackend::start("private", &pki, "tls", None);
    let service = |name: &str, addr: SocketAddr| {
        support::manifests::Service::new("shop", name).target_port(addr.port()).endpoints(&[addr]).yaml()
    };
    let mirrored = |name: &str, url: String, body: &str| {
        Ingress::new("shop", name)
            .host(&format!("{name}.test"))
            .port_number(80)
            .to("app")
            .annotation("nginx.ingress.kubernetes.io/mirror-target", &url)
            .annotation("nginx.ingress.kubernetes.io/mirror-request-body", body)
            .yaml()
    };
    let objects = [
        ingress_class("ramjet"),
        service("app", app.addr),
        service("shadow", in_cluster.addr),
        mirrored("named", format!("http://mirror.partner.test:{}/mirror", named.addr.port()), "on"),
        mirrored("literal", format!("http://127.0.0.1:{}/$request_uri", literal.addr.port()), "off"),
        mirrored("cluster", "http://shadow.shop.svc.cluster.local/$request_uri".into(), "on"),
        mirrored("secure", format!("https://mirror.partner.test:{}/$request_uri", private.addr.port()), "on"),
    ]
    .join("---\n");
    std::fs::write(dir.join("objects.yaml"), objects).unwrap();
    let daemon = start(&dir, dns.addr);
    let http = daemon.http_addr();
    let post = |host: &str| {
        let raw = format!(
            "POST /orders?id=7 HTTP/1.1\r\nHost: {host}\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"
        );
        support::client::request(http, &raw)
    };
    // The name resolves, then the table has its address.
    assert!(
        eventually(Duration::from_secs(10), || {
            post("named.test");
            named.received().contains("POST /mirror?id=7 HTTP/1.1\r\n")
        }),
        "{}\n{}",
        named.received(),
        diagnostics(&daemon)
    );
    let copy = named.received();
    assert!(copy.contains("x-ramjet-mirror: 1\r\n") && copy.contains("hello"), "{copy}");

    let real = post("literal.test");
    assert_eq!(served_by(&real), "app", "the client gets the real answer");
    assert!(eventually(Duration::from_secs(5), || literal.received().contains("POST /orders?id=7 HTTP/1.1\r\n")));
    assert!(!literal.received().contains("hello"), "no body: {}", literal.received());

    post("cluster.test");
    assert!(eventually(Duration::from_secs(5), || in_cluster.received().contains("POST /orders?id=7 HTTP/1.1\r\n")));

    // Over TLS, with the name as SNI; the private CA is not trusted, so the copy is dropped.
    let dropped = daemon.stats.mirrors_dropped();
    assert_eq!(served_by(&post("secure.test")), "app", "the real request is served");
    assert!(eventually(Duration::from_secs(5), || daemon.stats.mirrors_dropped() > dropped));
    assert_eq!(private.snis(), [Some("mirror.partner.test".to_string())]);
    daemon.shutdown();
}

/// A static routes file's endpoint by DNS name (`api.partner.test:<port>`), for proxied routes
/// and a TCP relay alike: resolved on the control thread, followed when the answer changes, and
/// kept when the server goes away.
#[test]
fn a_static_routes_endpoint_by_name_follows_its_dns_answers() {
    let first = Backend::start("first");
    let port = first.addr.port();
    let second = Backend::on_listener("second", TcpListener::bind(("127.0.0.2", port)).unwrap(), None);
    let mut dns = DnsServer::start();
    dns.set("api.partner.test", &[IpAddr::from([127, 0, 0, 1])], 1);
    let relay_port = support::free_port();
    let text = format!(
        "backends:\n  api: {{ endpoints: [\"api.partner.test:{port}\"] }}\n  \
         gone: {{ endpoints: [\"nothing.partner.test:{port}\"] }}\n\
         routes:\n  - {{ host: api.test, path: /, backend: api }}\n  - {{ host: gone.test, path: /, backend: gone }}\n\
         tcp:\n  - {{ port: {relay_port}, backend: api }}\n"
    );
    let routes = support::routes(&text);
    let mut config = DaemonConfig::local(routes);
    config.io_driver = IoDriver::Auto;
    config.dns = DnsSettings {
        servers: Some(vec![dns.addr]),
        min_ttl: Duration::from_secs(1),
        max_ttl: Duration::from_secs(30),
    };
    let daemon = Daemon::start(config).expect("the daemon starts");
    let http = daemon.http_addr();
    let answered_by = |host: &str| answered_by(http, host);
    assert!(eventually(Duration::from_secs(10), || answered_by("api.test") == "first"), "{}", diagnostics(&daemon));
    let relayed = || {
        let raw = "GET / HTTP/1.1\r\nHost: api.test\r\nconnection: close\r\n\r\n";
        served_by(&support::client::request(SocketAddr::from(([127, 0, 0, 1], relay_port)), raw))
    };
    assert_eq!(relayed(), "first", "the TCP relay takes the same addresses");
    assert_eq!(answered_by("gone.test"), "503");
    assert!(
        eventually(Duration::from_secs(10), || diagnostics(&daemon).contains("nothing.partner.test does not resolve")),
        "{}",
        diagnostics(&daemon)
    );

    dns.set("api.partner.test", &[IpAddr::from([127, 0, 0, 2])], 1);
    assert!(eventually(Duration::from_secs(10), || answered_by("api.test") == "second"), "{}", diagnostics(&daemon));
    dns.stop();
    the_last_answer_is_kept(&daemon, "api.partner.test", "api.test", "second");
    drop(second);
    daemon.shutdown();
}
