//! ingress-nginx's annotations through the real daemon: Ingresses in a `--manifests` directory,
//! real backends on loopback, a raw HTTP/1.1 client. Each test is written from ingress-nginx's
//! documented behaviour (its docs and `test/e2e/annotations`), not from ramjet's code.

use ramjet_test_support as support;
use ramjet_test_support::{grpc_backend, h2_echo, h2client, tls_backend};

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::{get, request, Conn, Response};
use support::manifests::{ingress_class, service, Ingress, Service};
use support::{temp_dir, wait_serving};

const NGINX: &str = "nginx.ingress.kubernetes.io";

/// The IngressClass `ramjet`, which every test's Ingresses name, and two Services, `a` and `b`,
/// each with one endpoint.
fn services(a: SocketAddr, b: SocketAddr) -> String {
    [ingress_class("ramjet"), service("shop", "a", a), service("shop", "b", b)].concat()
}

/// An Ingress with `annotations` (a YAML flow mapping body) and `paths` as (path, pathType,
/// service), to the Services' port 80.
fn ingress(name: &str, host: &str, annotations: &str, paths: &[(&str, &str, &str)]) -> String {
    let ingress = Ingress::new("shop", name).host(host).port_number(80).annotations_yaml(annotations);
    paths.iter().fold(ingress, |ingress, (path, kind, service)| ingress.path(path, kind, service)).yaml()
}

fn start(dir: &Path, text: &str) -> Daemon {
    start_with(dir, text, |_| {})
}

/// [`start`], with the daemon's configuration changed by `tweak` first.
fn start_with(dir: &Path, text: &str, tweak: impl FnOnce(&mut DaemonConfig)) -> Daemon {
    std::fs::write(dir.join("app.yaml"), text).unwrap();
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    config.io_driver = IoDriver::Auto;
    tweak(&mut config);
    let daemon = Daemon::start(config).expect("the daemon starts");
    wait_serving(&daemon, 1);
    daemon
}

/// The backend that answered and the request line's target it saw.
fn seen(r: &Response) -> (String, String) {
    let field = |k: &str| r.body.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("").to_string();
    (field("backend="), field("target="))
}

fn header_seen(r: &Response, name: &str) -> Option<String> {
    r.body.lines().filter_map(|l| l.strip_prefix("header=")).find_map(|h| {
        let (k, v) = h.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// docs/examples/rewrite and test/e2e/annotations/rewrite.go: captures fill the target, the query
/// is kept, matching is case-insensitive; a regex Ingress turns the other Ingresses' paths on its
/// host into regex locations (`/foo` matches `~* ^/foo`), ordered longest first, so a regex can
/// take a request from a longer literal path (the documented warning).
#[test]
fn use_regex_and_rewrite_target_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-rewrite");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "rewrite",
        "rewrite.bar.com",
        &format!("{NGINX}/use-regex: \"true\", {NGINX}/rewrite-target: /$2"),
        &[("/something(/|$)(.*)", "ImplementationSpecific", "a")],
    ));
    // e2e "should use ~* location modifier if regex annotation is present".
    text.push_str(&ingress("foo", "modifier.test", "", &[("/foo", "Prefix", "a")]));
    text.push_str(&ingress(
        "regex",
        "modifier.test",
        &format!("{NGINX}/use-regex: \"true\", {NGINX}/rewrite-target: /new/backend"),
        &[("/foo.+", "ImplementationSpecific", "b")],
    ));
    // e2e "should fail to use longest match for documented warning".
    text.push_str(&ingress("literal", "warning.test", "", &[("/foo/bar/bar", "Prefix", "a")]));
    text.push_str(&ingress(
        "pattern",
        "warning.test",
        &format!("{NGINX}/use-regex: \"true\", {NGINX}/rewrite-target: /new/backend/$1"),
        &[("/foo/bar/([a-z]{3})", "ImplementationSpecific", "b")],
    ));
    // A host without regex keeps element-wise prefixes.
    text.push_str(&ingress("plain", "plain.test", "", &[("/foo", "Prefix", "a")]));
    // nginx variables in the target: not reproduced, so not served.
    text.push_str(&ingress(
        "variable",
        "variable.test",
        &format!("{NGINX}/rewrite-target: /$request_uri"),
        &[("/", "Prefix", "a")],
    ));
    let d = start(&dir, &text);
    let at = |host: &str, path: &str| seen(&get(d.http_addr(), host, path));
    let pair = |b: &str, t: &str| (b.to_string(), t.to_string());

    assert_eq!(at("rewrite.bar.com", "/something"), pair("a", "/"));
    assert_eq!(at("rewrite.bar.com", "/something/"), pair("a", "/"));
    assert_eq!(at("rewrite.bar.com", "/something/new?x=1&y"), pair("a", "/new?x=1&y"));
    assert_eq!(at("rewrite.bar.com", "/SomeThing/New"), pair("a", "/New"));
    assert_eq!(get(d.http_addr(), "rewrite.bar.com", "/other").status, 404);

    assert_eq!(at("modifier.test", "/foo"), pair("a", "/foo"));
    assert_eq!(at("modifier.test", "/FOO"), pair("a", "/FOO"), "case-insensitive");
    assert_eq!(at("modifier.test", "/foo/bar"), pair("b", "/new/backend"));
    assert_eq!(at("modifier.test", "/foobar"), pair("b", "/new/backend"), "`^/foo` is no longer element-wise");

    assert_eq!(at("warning.test", "/foo/bar/bar"), pair("b", "/new/backend/bar"));
    assert_eq!(at("warning.test", "/foo/bar/bar/x"), pair("b", "/new/backend/bar"));
    assert_eq!(get(d.http_addr(), "warning.test", "/foo/bar/b").status, 404, "no longer a prefix of anything");

    assert_eq!(at("plain.test", "/foo/x"), pair("a", "/foo/x"));
    assert_eq!(get(d.http_addr(), "plain.test", "/foobar").status, 404);

    assert_eq!(get(d.http_addr(), "variable.test", "/").status, 404);
    let generation = d.published.current();
    let problem = generation.diagnostics.iter().find(|p| p.object.name == "variable").expect("a diagnostic");
    assert!(problem.message.contains("not nginx variables"), "{problem:?}");
    d.shutdown();
}

/// test/e2e/annotations/xforwardedprefix.go and approot.go: the prefix header is set on
/// rewritten requests (replacing the client's), not when the value is empty; `/` on an app-root
/// host answers 302 to `http://<host>/<app-root>`, other paths are proxied.
#[test]
fn x_forwarded_prefix_and_app_root_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-prefix");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "xfp",
        "xfp.baz.com",
        &format!("{NGINX}/x-forwarded-prefix: /test/value, {NGINX}/rewrite-target: /foo"),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "noxfp",
        "noxfp.baz.com",
        &format!("{NGINX}/x-forwarded-prefix: \"\", {NGINX}/rewrite-target: /foo"),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "norewrite",
        "norewrite.test",
        &format!("{NGINX}/x-forwarded-prefix: /p"),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress("approot", "approot.bar.com", &format!("{NGINX}/app-root: /foo"), &[("/", "Prefix", "b")]));
    let d = start(&dir, &text);

    let raw = "GET /x HTTP/1.1\r\nHost: xfp.baz.com\r\nX-Forwarded-Prefix: /from-client\r\nconnection: close\r\n\r\n";
    let r = request(d.http_addr(), raw);
    assert_eq!(seen(&r), ("a".to_string(), "/foo".to_string()));
    assert_eq!(header_seen(&r, "x-forwarded-prefix").as_deref(), Some("/test/value"));
    assert_eq!(r.body.matches("X-Forwarded-Prefix").count() + r.body.matches("x-forwarded-prefix").count(), 1);

    let r = get(d.http_addr(), "noxfp.baz.com", "/");
    assert_eq!(seen(&r).1, "/foo");
    assert_eq!(header_seen(&r, "x-forwarded-prefix"), None);
    let r = get(d.http_addr(), "norewrite.test", "/x");
    assert_eq!(seen(&r).1, "/x");
    assert_eq!(header_seen(&r, "x-forwarded-prefix"), None, "only rewritten paths carry the prefix");

    let r = get(d.http_addr(), "approot.bar.com", "/");
    assert_eq!((r.status, r.header("location")), (302, Some("http://approot.bar.com/foo")));
    let r = get(d.http_addr(), "approot.bar.com", "/?a=1");
    assert_eq!((r.status, r.header("location")), (302, Some("http://approot.bar.com/foo")), "the query is dropped");
    let raw = "GET / HTTP/1.1\r\nHost: approot.bar.com:8080\r\nconnection: close\r\n\r\n";
    assert_eq!(request(d.http_addr(), raw).header("location"), Some("http://approot.bar.com:8080/foo"));
    assert_eq!(seen(&get(d.http_addr(), "approot.bar.com", "/foo")), ("b".to_string(), "/foo".to_string()));
    d.shutdown();
}

/// A request with `body` (chunked in 8 KiB chunks, or with its length); the answer,
/// whatever happened to the rest of the body (ramjet may answer before reading it).
fn post(addr: SocketAddr, host: &str, body: &[u8], chunked: bool) -> Response {
    use std::io::Write;
    let mut conn = Conn::open(addr);
    let framing =
        if chunked { "transfer-encoding: chunked".to_string() } else { format!("content-length: {}", body.len()) };
    let mut raw = format!("POST /upload HTTP/1.1\r\nHost: {host}\r\n{framing}\r\n\r\n").into_bytes();
    if chunked {
        for piece in body.chunks(8192) {
            raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            raw.extend_from_slice(piece);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
    } else {
        raw.extend_from_slice(body);
    }
    // The answer may come (and the connection close) before all of it is written.
    let _ = conn.stream.write_all(&raw);
    conn.read_response_to(false).unwrap_or_else(|| panic!("no answer for {host}"))
}

/// ingress-nginx's `proxy-body-size` (nginx's `client_max_body_size`): 413 for a declared length
/// over the limit (nothing reaches the backend), for a chunked body that grows past it (buffered
/// or streamed), nothing for bodies within it, `0` unlimited; an invalid size is not served.
/// The proxy timeouts: a backend slower than `proxy-read-timeout` gives 504 on that route only.
#[test]
fn proxy_body_size_and_timeouts_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-limits");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress("small", "small.test", &format!("{NGINX}/proxy-body-size: 1k"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("large", "large.test", &format!("{NGINX}/proxy-body-size: 64K"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("free", "free.test", &format!("{NGINX}/proxy-body-size: \"0\""), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("odd", "odd.test", &format!("{NGINX}/proxy-body-size: 1.5m"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress(
        "impatient",
        "impatient.test",
        &format!("{NGINX}/proxy-read-timeout: \"1\", {NGINX}/proxy-connect-timeout: \"1\""),
        &[("/", "Prefix", "b")],
    ));
    text.push_str(&ingress("patient", "patient.test", "", &[("/", "Prefix", "b")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();

    let before = a.requests();
    assert_eq!(post(addr, "small.test", &[b'x'; 2000], false).status, 413);
    assert_eq!(post(addr, "small.test", &[b'x'; 1025], true).status, 413);
    assert_eq!(a.requests(), before, "nothing over the limit reached the backend");
    assert_eq!(post(addr, "small.test", &[b'x'; 1024], false).status, 200);
    assert_eq!(post(addr, "small.test", &[b'x'; 1024], true).status, 200);
    // Larger than the client buffer: streamed, and cut off with 413 when it passes 64 KiB.
    assert_eq!(post(addr, "large.test", &vec![b'y'; 200 * 1024], true).status, 413);
    assert_eq!(post(addr, "large.test", &vec![b'y'; 200 * 1024], false).status, 413);
    assert_eq!(post(addr, "large.test", &vec![b'y'; 60 * 1024], true).status, 200);
    // The backend connection that got part of a body is not reused: the next request is whole.
    let r = post(addr, "large.test", b"victim", false);
    assert_eq!((r.status, seen(&r).0), (200, "a".to_string()));
    assert!(r.body.ends_with("victim") || r.body.contains("victim"), "{}", r.body);
    assert_eq!(post(addr, "free.test", &vec![b'z'; 300 * 1024], true).status, 200);
    assert_eq!(get(addr, "odd.test", "/").status, 404);
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "odd" && p.message.contains("not an nginx size")));

    assert_eq!(get(addr, "impatient.test", "/slow/2500").status, 504);
    assert_eq!(get(addr, "patient.test", "/slow/1500").status, 200);
    d.shutdown();
}

/// test/e2e/annotations/ipallowlist.go and ipdenylist.go: a client outside the allow-list, or in
/// the deny-list, gets 403; the address is the connection's peer, so `X-Forwarded-For` changes
/// nothing; the deny-list is looked at first; a list that is not addresses keeps the Ingress out
/// (fail closed). A 403 keeps the connection, and the next request on it is served as its own.
#[test]
fn source_ranges_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-ranges");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let cases = [
        ("elsewhere", format!("{NGINX}/allowlist-source-range: \"10.0.0.0/8, 192.168.0.0/16\"")),
        ("loopback", format!("{NGINX}/whitelist-source-range: \"10.0.0.0/8,127.0.0.1/32\"")),
        ("newname", format!("{NGINX}/allowlist-source-range: 10.0.0.0/8, {NGINX}/whitelist-source-range: 127.0.0.1")),
        ("denied", format!("{NGINX}/denylist-source-range: 127.0.0.0/8")),
        ("notdenied", format!("{NGINX}/denylist-source-range: \"10.0.0.0/8, ::1/128\"")),
        ("both", format!("{NGINX}/denylist-source-range: 127.0.0.1, {NGINX}/allowlist-source-range: 127.0.0.0/8")),
        ("garbage", format!("{NGINX}/allowlist-source-range: \"127.0.0.1, not-an-address\"")),
    ];
    for (name, annotations) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &[("/", "Prefix", "a")]));
    }
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let status = |host: &str| get(addr, host, "/").status;
    assert_eq!(status("elsewhere.test"), 403);
    assert_eq!(status("loopback.test"), 200);
    assert_eq!(status("newname.test"), 403, "allowlist-source-range wins over its old name");
    assert_eq!(status("denied.test"), 403);
    assert_eq!(status("notdenied.test"), 200);
    assert_eq!(status("both.test"), 403, "the deny-list first");
    assert_eq!(status("garbage.test"), 404, "an allow-list ramjet cannot read is not served open");
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "garbage" && p.message.contains("not-an-address")));

    // A forged X-Forwarded-For does not make the client someone else.
    let raw = "GET / HTTP/1.1\r\nHost: elsewhere.test\r\nX-Forwarded-For: 10.1.2.3\r\nX-Real-IP: 10.1.2.3\r\nconnection: close\r\n\r\n";
    assert_eq!(request(addr, raw).status, 403);

    // Attacker then victim on one connection: the refused request (with a body) leaves nothing behind.
    let before = a.requests();
    let mut conn = Conn::open(addr);
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: loopback.test\r\n\r\n";
    let attack =
        format!("POST / HTTP/1.1\r\nHost: elsewhere.test\r\ncontent-length: {}\r\n\r\n{smuggled}", smuggled.len());
    conn.send(attack.as_bytes());
    let refused = conn.read_response_to(false).expect("an answer");
    assert_eq!(refused.status, 403, "{}", refused.head);
    assert_eq!(refused.header("connection"), None, "{}", refused.head);
    conn.send(b"GET /victim HTTP/1.1\r\nHost: loopback.test\r\n\r\n");
    let served = conn.read_response_to(false).expect("the connection is kept");
    assert_eq!(seen(&served), ("a".to_string(), "/victim".to_string()));
    assert_eq!(a.requests(), before + 1, "only the victim's request reached the backend");
    d.shutdown();
}

/// test/e2e/annotations/upstreamvhost.go and forcesslredirect.go: the backend gets the configured
/// Host (the client's stays in X-Forwarded-Host, one Host line only); plain HTTP for a host of an
/// Ingress without TLS answers 308 to HTTPS when force-ssl-redirect is true, one trailing `/` of
/// the target dropped unless preserve-trailing-slash.
#[test]
fn upstream_vhost_and_force_ssl_redirect_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-vhost");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "vhost",
        "vhost.test",
        &format!("{NGINX}/upstream-vhost: app.internal"),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "forced",
        "forced.test",
        &format!("{NGINX}/force-ssl-redirect: \"true\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "kept",
        "kept.test",
        &format!("{NGINX}/force-ssl-redirect: \"true\", {NGINX}/preserve-trailing-slash: \"true\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "unforced",
        "unforced.test",
        &format!("{NGINX}/force-ssl-redirect: \"false\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "badvhost",
        "badvhost.test",
        &format!("{NGINX}/upstream-vhost: $host"),
        &[("/", "Prefix", "a")],
    ));
    let d = start(&dir, &text);
    let addr = d.http_addr();

    let r = get(addr, "vhost.test", "/x");
    assert_eq!(header_seen(&r, "host").as_deref(), Some("app.internal"));
    assert_eq!(header_seen(&r, "x-forwarded-host").as_deref(), Some("vhost.test"));
    assert_eq!(r.body.lines().filter(|l| l.to_ascii_lowercase().starts_with("header=host:")).count(), 1);
    let r = get(addr, "forced.test", "/x?q=1");
    assert_eq!((r.status, r.header("location")), (308, Some("https://forced.test/x?q=1")));
    // forcesslredirect.go: one trailing `/` of the request URI is dropped (`/` leaves nothing),
    // unless preserve-trailing-slash.
    let location = |host: &str, target: &str| get(addr, host, target).header("location").map(String::from);
    assert_eq!(location("forced.test", "/").as_deref(), Some("https://forced.test"));
    assert_eq!(location("forced.test", "/dir/").as_deref(), Some("https://forced.test/dir"));
    assert_eq!(location("kept.test", "/").as_deref(), Some("https://kept.test/"));
    assert_eq!(location("kept.test", "/dir/").as_deref(), Some("https://kept.test/dir/"));
    assert_eq!(seen(&get(addr, "unforced.test", "/x")).0, "a");
    assert_eq!(get(addr, "badvhost.test", "/").status, 404);
    d.shutdown();
}

/// test/e2e/annotations/connection.go: `connection-proxy-header` is the `Connection` an HTTP/1.1
/// backend gets. After `close` the backend's connection is not used again, even when the backend
/// would keep it open; an upgrade keeps its own `Connection`; a value other than close or
/// keep-alive keeps the Ingress out.
#[test]
fn connection_proxy_header_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-connection");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let header = |value: &str| format!("{NGINX}/connection-proxy-header: {value}");
    text.push_str(&ingress("keep", "keep.test", &header("keep-alive"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("close", "close.test", &header("close"), &[("/", "Prefix", "b")]));
    text.push_str(&ingress("bad", "bad.test", &header("upgrade"), &[("/", "Prefix", "a")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();

    let r = get(addr, "keep.test", "/");
    assert_eq!(header_seen(&r, "connection").as_deref(), Some("keep-alive"));
    let mut client = Conn::open(addr);
    for _ in 0..3 {
        let r = client.get("close.test", "/");
        assert_eq!((r.status, header_seen(&r, "connection").as_deref()), (200, Some("close")));
    }
    assert_eq!(b.connections(), 3, "a connection per request");
    let mut ws = Conn::open(addr);
    ws.send(b"GET /ws HTTP/1.1\r\nHost: close.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    assert_eq!(ws.read_response().status, 101, "the upgrade's Connection is kept");
    assert_eq!(get(addr, "bad.test", "/").status, 404);
    d.shutdown();
}

/// test/e2e/annotations/customheaders.go: the entries of the `custom-headers` ConfigMap are set on
/// the backend's answers (values as written: `$remote_addr` is not expanded) when the controller
/// configuration's `global-allowed-response-headers` lists them; a ConfigMap that does not exist,
/// names a header not allowed or lives in another namespace makes the paths answer 503.
#[test]
fn custom_headers_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-custom-headers");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let config_map = |namespace: &str, name: &str, data: &str| {
        format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: {name}, namespace: {namespace} }}\ndata:\n{data}"
        )
    };
    text.push_str(&config_map(
        "shop",
        "custom-headers",
        "  My-Custom-Header: \"42\"\n  My-Custom-Header-Dollar: \"$remote_addr\"\n",
    ));
    text.push_str(&config_map("shop", "sneaky", "  Set-Cookie: \"admin=1\"\n"));
    text.push_str(&config_map("other", "custom-headers", "  My-Custom-Header: \"7\"\n"));
    let headers = |name: &str| format!("{NGINX}/custom-headers: {name}");
    text.push_str(&ingress("plain", "custom.test", "", &[("/", "Prefix", "a")]));
    text.push_str(&ingress("set", "set.test", &headers("shop/custom-headers"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("missing", "missing.test", &headers("shop/nothing"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("denied", "denied.test", &headers("sneaky"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("elsewhere", "elsewhere.test", &headers("other/custom-headers"), &[("/", "Prefix", "a")]));
    let config = dir.join("controller.yaml");
    std::fs::write(&config, "global-allowed-response-headers: My-Custom-Header,My-Custom-Header-Dollar\n").unwrap();
    let d = start_with(&dir, &text, |c| c.config = Some(ramjet::ConfigFile::read(&config).unwrap()));
    let addr = d.http_addr();

    let r = get(addr, "custom.test", "/");
    assert_eq!((r.status, r.header("my-custom-header")), (200, None));
    let r = get(addr, "set.test", "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("my-custom-header"), Some("42"));
    assert_eq!(r.header("my-custom-header-dollar"), Some("$remote_addr"));
    let mut h2 = h2client::H2Client::connect(addr);
    let r2 = h2.get("set.test", "/");
    assert_eq!(r2.header("my-custom-header"), Some("42"), "HTTP/2 answers too");
    for host in ["missing.test", "denied.test", "elsewhere.test"] {
        let r = get(addr, host, "/");
        assert_eq!((r.status, r.header("my-custom-header")), (503, None), "{host}");
    }
    assert_eq!(a.requests(), 3, "a denied path never reaches the backend");
    let generation = d.published.current();
    let warned = |name: &str, text: &str| {
        generation.diagnostics.iter().any(|p| p.object.name == name && p.message.contains(text))
    };
    assert!(warned("missing", "ConfigMap shop/nothing does not exist"), "{:?}", generation.diagnostics);
    assert!(warned("denied", "Set-Cookie is not in the controller configuration's global-allowed-response-headers"));
    assert!(warned("elsewhere", "another namespace"));
    d.shutdown();
}

/// test/e2e/annotations/alias.go: an alias answers like its host, every path of the host (from
/// another Ingress too); a name nobody declares stays 404; an alias that is some Ingress's host is
/// ignored with a warning.
#[test]
fn server_alias_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-alias");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress("foo", "foo", &format!("{NGINX}/server-alias: \"bar, baz\""), &[("/", "Prefix", "a")]));
    text.push_str(&ingress("other", "foo", "", &[("/other", "Prefix", "b")]));
    text.push_str(&ingress("taken", "qux", &format!("{NGINX}/server-alias: foo"), &[("/", "Prefix", "b")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    for host in ["foo", "bar", "baz"] {
        assert_eq!(seen(&get(addr, host, "/x")), ("a".to_string(), "/x".to_string()), "{host}");
        assert_eq!(seen(&get(addr, host, "/other")).0, "b", "{host}: the host's other Ingress too");
    }
    assert_eq!(get(addr, "nobody", "/").status, 404);
    assert_eq!(seen(&get(addr, "qux", "/")).0, "b");
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "taken" && p.message.contains("server-alias foo")));
    d.shutdown();
}

/// test/e2e/annotations/fromtowwwredirect.go: `www.<host>` answers 308 to
/// `http://<host>:<port><path>` (ingress-nginx's `ngx_srv_redirect.lua`, one trailing slash
/// dropped), and the other way round; a name that is a host of its own is left alone.
#[test]
fn from_to_www_redirect_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-www");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let on = format!("{NGINX}/from-to-www-redirect: \"true\"");
    text.push_str(&ingress("bare", "fromtowwwredirect.bar.com", &on, &[("/", "Prefix", "a")]));
    text.push_str(&ingress("www", "www.other.test", &on, &[("/", "Prefix", "a")]));
    text.push_str(&ingress("both", "both.test", &on, &[("/", "Prefix", "a")]));
    text.push_str(&ingress("both-www", "www.both.test", "", &[("/", "Prefix", "b")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let port = addr.port();
    let r = get(addr, "www.fromtowwwredirect.bar.com", "/foo");
    assert_eq!((r.status, r.header("location")), (308, Some(&*format!("http://fromtowwwredirect.bar.com:{port}/foo"))));
    let r = get(addr, "other.test", "/a/?q=1");
    assert_eq!(r.header("location"), Some(&*format!("http://www.other.test:{port}/a/?q=1")));
    let r = get(addr, "other.test", "/");
    assert_eq!(r.header("location"), Some(&*format!("http://www.other.test:{port}")), "one trailing slash dropped");
    assert_eq!(seen(&get(addr, "fromtowwwredirect.bar.com", "/foo")).0, "a");
    assert_eq!(seen(&get(addr, "www.both.test", "/")).0, "b", "a host of its own is not redirected");
    d.shutdown();
}

/// The same annotations for an HTTP/2 client (h2c by prior knowledge): the rewrite and the
/// forwarded prefix reach the backend, `/` answers the app root, a declared body over the limit
/// gets 413 and a streamed one past it too, a client outside the allow-list gets 403, CORS fields
/// and preflights, and the connection keeps serving its other streams.
#[test]
fn annotations_apply_to_http2_clients_too() {
    let dir = temp_dir("annotations-h2");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "rewrite",
        "rewrite.test",
        &format!("{NGINX}/rewrite-target: /$1, {NGINX}/x-forwarded-prefix: /api, {NGINX}/app-root: /home"),
        &[("/api/(.*)", "ImplementationSpecific", "a"), ("/", "Prefix", "b")],
    ));
    text.push_str(&ingress("small", "small.test", &format!("{NGINX}/proxy-body-size: 1k"), &[("/", "Prefix", "a")]));
    text.push_str(&ingress(
        "closed",
        "closed.test",
        &format!("{NGINX}/allowlist-source-range: 10.0.0.0/8"),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress("cors", "cors.test", &format!("{NGINX}/enable-cors: \"true\""), &[("/", "Prefix", "a")]));
    let d = start(&dir, &text);
    let mut h2 = h2client::H2Client::connect(d.http_addr());
    let preflight = h2.request("OPTIONS", "cors.test", "/", &[("origin", "https://x.test")], b"", false).unwrap();
    assert_eq!((preflight.status, preflight.header("access-control-allow-origin")), (204, Some("*")));
    assert_eq!(h2.get("cors.test", "/").header("access-control-max-age"), Some("1728000"));

    let r = h2.get("rewrite.test", "/API/users?id=7");
    let body = r.text();
    assert!(body.contains("backend=a\n") && body.contains("target=/users?id=7\n"), "{body}");
    assert!(body.to_ascii_lowercase().contains("header=x-forwarded-prefix: /api\n"), "{body}");
    let r = h2.get("rewrite.test", "/");
    assert_eq!((r.status, r.header("location")), (302, Some("http://rewrite.test/home")));

    let big = vec![b'x'; 2000];
    assert_eq!(h2.request("POST", "small.test", "/", &[], &big, true).unwrap().status, 413);
    assert_eq!(h2.request("POST", "small.test", "/", &[], &big, false).unwrap().status, 413);
    assert_eq!(h2.request("POST", "small.test", "/", &[], &big[..1000], false).unwrap().status, 200);
    assert_eq!(h2.get("closed.test", "/").status, 403);
    assert_eq!(h2.get("small.test", "/after").status, 200, "the connection still serves");
    d.shutdown();
}

/// test/e2e/annotations/cors.go: with enable-cors and no origin list, every response carries
/// ingress-nginx's defaults and `Access-Control-Allow-Origin: *`, and a preflight is answered 204
/// by the proxy (the backend never sees it); with a list, only a matching origin (wildcard label
/// included) gets the fields, echoed back.
#[test]
fn cors_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-cors");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress("open", "cors.foo.com", &format!("{NGINX}/enable-cors: \"true\""), &[("/", "Prefix", "a")]));
    text.push_str(&ingress(
        "listed",
        "listed.test",
        &format!(
            "{NGINX}/enable-cors: \"true\", {NGINX}/cors-allow-origin: \"https://origin.cors.com:8080, https://*.sub.cors.com\", \
             {NGINX}/cors-allow-credentials: \"false\", {NGINX}/cors-allow-methods: \"GET, POST\", {NGINX}/cors-max-age: \"200\", \
             {NGINX}/cors-expose-headers: \"X-Custom, X-Other\""
        ),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress("off", "off.test", &format!("{NGINX}/enable-cors: \"false\""), &[("/", "Prefix", "a")]));
    text.push_str(&ingress(
        "blank",
        "blank.test",
        &format!("{NGINX}/enable-cors: \"true\", {NGINX}/cors-allow-origin: \"      \""),
        &[("/", "Prefix", "a")],
    ));
    let d = start(&dir, &text);
    let addr = d.http_addr();

    // cors.go, "should allow - missing origins (should allow all origins)": a blank list is `*`.
    for origin in ["http://origin.com", "http://book.origin.com", "test.origin.com"] {
        let raw = format!("GET / HTTP/1.1\r\nHost: blank.test\r\nOrigin: {origin}\r\nconnection: close\r\n\r\n");
        assert_eq!(request(addr, &raw).header("access-control-allow-origin"), Some("*"), "{origin}");
    }
    let r = get(addr, "cors.foo.com", "/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, PUT, POST, DELETE, PATCH, OPTIONS"));
    assert_eq!(
        r.header("access-control-allow-headers"),
        Some("DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization")
    );
    assert_eq!(r.header("access-control-max-age"), Some("1728000"));
    assert_eq!(r.header("access-control-expose-headers"), None);
    let before = a.requests();
    let raw = "OPTIONS / HTTP/1.1\r\nHost: cors.foo.com\r\nOrigin: https://x.test\r\nconnection: close\r\n\r\n";
    let r = request(addr, raw);
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("content-type"), Some("text/plain charset=UTF-8"));
    assert_eq!(r.header("content-length"), Some("0"));
    assert_eq!(a.requests(), before, "the preflight is answered by the proxy");

    let with_origin = |origin: &str, method: &str| {
        request(
            addr,
            &format!("{method} / HTTP/1.1\r\nHost: listed.test\r\nOrigin: {origin}\r\nconnection: close\r\n\r\n"),
        )
    };
    let r = with_origin("https://origin.cors.com:8080", "GET");
    assert_eq!(r.header("access-control-allow-origin"), Some("https://origin.cors.com:8080"));
    assert_eq!(r.header("access-control-allow-credentials"), None, "credentials false: no field");
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST"));
    assert_eq!(r.header("access-control-max-age"), Some("200"));
    assert_eq!(r.header("access-control-expose-headers"), Some("X-Custom, X-Other"));
    assert_eq!(
        with_origin("https://api.sub.cors.com", "GET").header("access-control-allow-origin"),
        Some("https://api.sub.cors.com")
    );
    let r = with_origin("https://evil.com", "GET");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, None));
    let r = with_origin("https://evil.com", "OPTIONS");
    assert_eq!(r.status, 200, "a preflight from an origin not allowed goes to the backend");
    assert_eq!(with_origin("https://api.sub.cors.com", "OPTIONS").status, 204);
    assert_eq!(get(addr, "off.test", "/").header("access-control-allow-origin"), None);
    d.shutdown();
}

/// docs (annotations "Rate Limiting") and test/e2e/annotations/limitrate.go, limitconnections.go:
/// per client address, `limit-rps` / `limit-rpm` let a burst of rate × `limit-burst-multiplier`
/// through at once (nginx's `limit_req … nodelay`, which admits burst + 1) and answer 503 beyond
/// it, draining at the rate; all paths of one Ingress count together; `limit-allowlist` exempts
/// addresses; `limit-connections` caps requests under way at once (503 beyond), over HTTP/1.1
/// connections and HTTP/2 streams alike. A refused request's body is consumed, so nothing in it
/// reaches a backend. One worker, so that every connection is counted in one place for the rates.
#[test]
fn per_client_limits_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-limits");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let one_burst = format!("{NGINX}/limit-burst-multiplier: \"1\"");
    text.push_str(&ingress(
        "rps",
        "rps.test",
        &format!("{NGINX}/limit-rps: \"2\", {one_burst}"),
        &[("/", "Prefix", "a"), ("/b", "Prefix", "b")],
    ));
    text.push_str(&ingress(
        "rpm",
        "rpm.test",
        &format!("ramjet.dev/limit-rpm: \"1\", {one_burst}"),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "exempt",
        "exempt.test",
        &format!("{NGINX}/limit-rps: \"1\", {one_burst}, {NGINX}/limit-allowlist: \"10.0.0.0/8, 127.0.0.1\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "conns",
        "conns.test",
        &format!("{NGINX}/limit-connections: \"1\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress("bad", "bad.test", &format!("{NGINX}/limit-rps: ten"), &[("/", "Prefix", "a")]));
    let d = start_with(&dir, &text, |c| c.workers = 1);
    let addr = d.http_addr();

    // 2 r/s, burst 2: three at once, then 503; the paths of the Ingress share the count.
    let mut c = Conn::open(addr);
    let statuses: Vec<u16> = ["/", "/b", "/", "/b", "/"].iter().map(|p| c.get("rps.test", p).status).collect();
    assert_eq!(statuses, [200, 200, 200, 503, 503]);
    let refused = c.get("rps.test", "/");
    assert_eq!(refused.body, "service unavailable\n", "{refused:?}");
    // 2 r/s drains one request every 500 ms.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(c.get("rps.test", "/").status, 200);
    assert_eq!(c.get("rps.test", "/").status, 503);
    // Per minute, through ramjet's own name for the annotation.
    let statuses: Vec<u16> = (0..3).map(|_| c.get("rpm.test", "/").status).collect();
    assert_eq!(statuses, [200, 200, 503]);
    // Allow-listed addresses are not limited; another Ingress's limit is its own.
    assert!((0..10).all(|_| c.get("exempt.test", "/").status == 200));
    assert_eq!(c.get("conns.test", "/").status, 200);
    // A value ramjet cannot read keeps the Ingress out, with a diagnostic.
    assert_eq!(c.get("bad.test", "/").status, 404);
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "bad" && p.message.contains("limit-rps")));

    // The refused request's body (a request of its own) is read and dropped; the connection is
    // kept and the next request is served, and the backend never sees the hidden one.
    std::thread::sleep(Duration::from_millis(1600));
    let before = a.requests();
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: rps.test\r\n\r\n";
    for _ in 0..3 {
        c.get("rps.test", "/");
    }
    let attack = format!("POST / HTTP/1.1\r\nHost: rps.test\r\ncontent-length: {}\r\n\r\n{smuggled}", smuggled.len());
    c.send(attack.as_bytes());
    let r = c.read_response();
    assert_eq!((r.status, r.header("connection")), (503, None), "{}", r.head);
    assert_eq!(c.get("exempt.test", "/victim").status, 200);
    assert!(!a.received().contains("/smuggled"));
    assert!(a.requests() <= before + 4, "only the admitted requests reached the backend");

    // One request under way per client: a second one, on another connection or another HTTP/2
    // stream, is refused while the first is at the backend, and served once it is done.
    let slow = std::thread::spawn(move || get(addr, "conns.test", "/slow/800").status);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(get(addr, "conns.test", "/").status, 503);
    let mut h2 = h2client::H2Client::connect(addr);
    assert_eq!(h2.get("conns.test", "/").status, 503);
    assert_eq!(slow.join().unwrap(), 200);
    assert_eq!(get(addr, "conns.test", "/").status, 200);
    assert_eq!(h2.get("conns.test", "/").status, 200);
    d.shutdown();
}

/// test/e2e/annotations/limitconnections.go: `limit-connections: 8` and twenty requests from one
/// client at once, each on a connection of its own: exactly eight are served and twelve get 503,
/// however the connections spread over the workers (four here), as nginx's `limit_conn` counts for
/// the whole replica.
#[test]
fn limit_connections_counts_across_workers() {
    let dir = temp_dir("annotations-limit-connections");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "conns",
        "conns.test",
        &format!("{NGINX}/limit-connections: \"8\""),
        &[("/", "Prefix", "a")],
    ));
    let d = start_with(&dir, &text, |c| c.workers = 4);
    let addr = d.http_addr();
    let start = std::sync::Arc::new(std::sync::Barrier::new(20));
    let clients: Vec<_> = (0..20)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::open(addr);
                start.wait();
                conn.get("conns.test", "/slow/1500").status
            })
        })
        .collect();
    let mut statuses: Vec<u16> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    statuses.sort();
    assert_eq!(statuses, [[200; 8].as_slice(), [503; 12].as_slice()].concat(), "{statuses:?}");
    // Every place is given back.
    let after: Vec<u16> = (0..8).map(|_| get(addr, "conns.test", "/").status).collect();
    assert_eq!(after, [200; 8]);
    d.shutdown();
}

/// A Service `pair` with both backends as its endpoints.
fn pair_service(a: SocketAddr, b: SocketAddr) -> String {
    service_of("pair", &[a, b])
}

/// A Service `name` whose endpoints are `addrs`, in this order (one EndpointSlice each, since a
/// slice has one port for all its endpoints).
fn service_of(name: &str, addrs: &[SocketAddr]) -> String {
    Service::new("shop", name).slice_per_endpoint(addrs).yaml()
}

/// docs (annotations "Session Affinity") and test/e2e/annotations/affinity.go: with `affinity:
/// cookie` the first answer sets `INGRESSCOOKIE` (HttpOnly, the path of the Ingress's rule), and
/// a client that sends it back stays on that endpoint; the session-cookie-* annotations set the
/// cookie's name, path, lifetime, SameSite and Secure. A cookie that names no endpoint of the
/// backend is replaced. HTTP/2 clients get the same.
#[test]
fn session_affinity_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-affinity");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&pair_service(a.addr, b.addr));
    let pair = [("/", "Prefix", "pair")];
    text.push_str(&ingress(
        "sticky",
        "sticky.test",
        &format!("{NGINX}/affinity: cookie"),
        &[("/app", "Prefix", "pair")],
    ));
    let custom = format!(
        "{NGINX}/affinity: cookie, {NGINX}/affinity-mode: persistent, {NGINX}/session-cookie-name: route, \
         {NGINX}/session-cookie-path: /, {NGINX}/session-cookie-max-age: \"172800\", \
         {NGINX}/session-cookie-samesite: strict, ramjet.dev/session-cookie-secure: \"true\""
    );
    text.push_str(&ingress("custom", "custom.test", &custom, &pair));
    let expiring = format!(
        "{NGINX}/affinity: cookie, {NGINX}/session-cookie-name: ExpiresCookie, \
         {NGINX}/session-cookie-expires: \"172800\", {NGINX}/session-cookie-max-age: \"259200\""
    );
    text.push_str(&ingress("expiring", "expiring.test", &expiring, &pair));
    text.push_str(&ingress("plain", "plain.test", "team: shop", &pair));
    text.push_str(&ingress("bad", "bad.test", &format!("{NGINX}/affinity: ip"), &pair));
    let d = start(&dir, &text);
    let addr = d.http_addr();

    let first = get(addr, "sticky.test", "/app");
    assert_eq!(first.status, 200, "{first:?}");
    let set = first.header("set-cookie").expect("a new session gets the cookie").to_string();
    let value = set.strip_prefix("INGRESSCOOKIE=").and_then(|v| v.split(';').next()).unwrap().to_string();
    assert_eq!(set, format!("INGRESSCOOKIE={value}; Path=/app; HttpOnly"));
    let home = seen(&first).0;
    // Back with the cookie, on new connections: always the same endpoint, no new cookie.
    let cookie = format!("Cookie: theme=dark; INGRESSCOOKIE={value}\r\n");
    for _ in 0..10 {
        let mut c = Conn::open(addr);
        let r = c.get_with("sticky.test", "/app/page", &cookie);
        assert_eq!(seen(&r).0, home, "{r:?}");
        assert_eq!(r.header("set-cookie"), None, "{r:?}");
    }
    // Without it, balanced as usual (both endpoints answer), each new session with its cookie.
    let homes: std::collections::BTreeSet<String> = (0..6)
        .map(|_| {
            let r = get(addr, "sticky.test", "/app");
            assert!(r.header("set-cookie").is_some_and(|c| c.starts_with("INGRESSCOOKIE=")), "{r:?}");
            seen(&r).0
        })
        .collect();
    assert_eq!(homes.len(), 2, "{homes:?}");
    // A cookie that names no endpoint gets a new session.
    let r = Conn::open(addr).get_with("sticky.test", "/app", "Cookie: INGRESSCOOKIE=0123456789abcdef\r\n");
    assert!(r.header("set-cookie").is_some_and(|c| !c.contains("0123456789abcdef")), "{r:?}");

    // The cookie's attributes from the annotations.
    let r = get(addr, "custom.test", "/");
    let set = r.header("set-cookie").unwrap().to_string();
    assert!(
        set.starts_with("route=") && set.ends_with("; Path=/; Max-Age=172800; Secure; SameSite=Strict; HttpOnly"),
        "{set}"
    );
    // test/e2e/annotations/affinity.go "should set cookie with expires": Expires in two days, as
    // nginx writes dates, and Max-Age.
    let set = get(addr, "expiring.test", "/").header("set-cookie").unwrap().to_string();
    let expires = set.split("; ").find_map(|a| a.strip_prefix("Expires=")).expect("Expires");
    let in_two_days = std::time::SystemTime::now() + Duration::from_secs(172_800);
    let mut wanted = Vec::new();
    let unix = in_two_days.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    ramjet_shared::affinity::push_cookie_time(unix, &mut wanted);
    let wanted = String::from_utf8(wanted).unwrap();
    assert_eq!(&expires[..17], &wanted[..17], "{set}");
    assert!(set.ends_with("GMT; Max-Age=259200; HttpOnly"), "{set}");
    // "should set secure in cookie with provided false annotation on https": over HTTPS it is Secure.
    let port = d.https_addr().unwrap().port();
    let out = std::process::Command::new("curl")
        .args(["-sk", "-o", "/dev/null", "-D", "-", "--resolve", &format!("sticky.test:{port}:127.0.0.1")])
        .arg(format!("https://sticky.test:{port}/app"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(head.contains("; Path=/app; Secure; HttpOnly"), "{head}");
    // Without affinity, nothing is set.
    assert_eq!(get(addr, "plain.test", "/").header("set-cookie"), None);
    // An affinity ramjet does not know keeps the Ingress out, with a diagnostic.
    assert_eq!(get(addr, "bad.test", "/").status, 404);
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "bad" && p.message.contains("affinity")));

    // HTTP/2 clients: the same session, and a new one gets the cookie as a header.
    let mut h2 = h2client::H2Client::connect(addr);
    let cookie = format!("INGRESSCOOKIE={value}");
    for _ in 0..4 {
        let r = h2.request("GET", "sticky.test", "/app", &[("cookie", cookie.as_str())], b"", true).unwrap();
        assert!(r.text().contains(&format!("backend={home}\n")), "{}", r.text());
        assert_eq!(r.header("set-cookie"), None);
    }
    let r = h2.get("sticky.test", "/app");
    assert!(r.header("set-cookie").is_some_and(|c| c.starts_with("INGRESSCOOKIE=") && c.ends_with("HttpOnly")));
    d.shutdown();
}

/// Sticky sessions of HTTP/2 clients to an HTTP/2 backend (`backend-protocol: H2C`), streams
/// relayed frame by frame: a new session gets the cookie, every stream that sends it back goes to
/// that endpoint, and the answer carries the route's CORS fields as on every other path.
#[test]
fn session_affinity_holds_for_http2_clients_of_http2_backends() {
    let dir = temp_dir("annotations-affinity-h2");
    let (x, y) = (h2_echo::H2Echo::start(), h2_echo::H2Echo::start());
    let mut text = [ingress_class("ramjet"), service_of("pair", &[x.addr, y.addr])].concat();
    let annotations = format!(
        "{NGINX}/affinity: cookie, {NGINX}/backend-protocol: H2C, {NGINX}/enable-cors: \"true\", \
         {NGINX}/cors-allow-origin: \"https://app.example\""
    );
    text.push_str(&ingress("sticky", "sticky.test", &annotations, &[("/", "Prefix", "pair")]));
    let d = start(&dir, &text);
    let mut h2 = h2client::H2Client::connect(d.http_addr());
    let origin = [("origin", "https://app.example")];
    let which = |before: (usize, usize)| match (x.requests().len() - before.0, y.requests().len() - before.1) {
        (1, 0) => "x",
        (0, 1) => "y",
        counts => panic!("one stream, one request: {counts:?}"),
    };
    let counts = || (x.requests().len(), y.requests().len());

    let before = counts();
    let first = h2.request("GET", "sticky.test", "/", &origin, b"", true).unwrap();
    assert_eq!(first.status, 200, "{}", first.text());
    let home = which(before);
    let set = first.header("set-cookie").expect("a new session gets the cookie").to_string();
    let value = set.strip_prefix("INGRESSCOOKIE=").and_then(|v| v.split(';').next()).unwrap().to_string();
    assert_eq!(set, format!("INGRESSCOOKIE={value}; Path=/; HttpOnly"));
    assert_eq!(first.header("access-control-allow-origin"), Some("https://app.example"));

    let cookie = format!("INGRESSCOOKIE={value}");
    for i in 0..8 {
        let before = counts();
        let r = h2.request("GET", "sticky.test", &format!("/s{i}"), &[("cookie", cookie.as_str())], b"", true).unwrap();
        assert_eq!((r.status, which(before)), (200, home), "stream {i}");
        assert_eq!(r.header("set-cookie"), None, "stream {i}: the session goes on");
    }
    // Without the cookie: balanced over both, each new session with its own cookie.
    let homes: std::collections::BTreeSet<&str> = (0..6)
        .map(|_| {
            let before = counts();
            let r = h2.get("sticky.test", "/");
            assert!(
                r.header("set-cookie").is_some_and(|c| c.starts_with("INGRESSCOOKIE=")),
                "{:?}",
                r.header("set-cookie")
            );
            which(before)
        })
        .collect();
    assert_eq!(homes.len(), 2, "{homes:?}");
    d.shutdown();
}

/// An Opaque Secret in `shop` with `stringData` (a YAML flow mapping body).
fn secret(name: &str, string_data: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: shop }}\ntype: Opaque\n\
         stringData: {{ {string_data} }}\n"
    )
}

/// `Authorization: Basic` for `user:password`, encoded by Python's base64 (see each case).
fn basic(user_password: &str) -> &'static str {
    match user_password {
        "foo:bar" => "Basic Zm9vOmJhcg==",
        "foo:baz" => "Basic Zm9vOmJheg==",
        "bob:secret" => "Basic Ym9iOnNlY3JldA==",
        "mapuser:map-pass" => "Basic bWFwdXNlcjptYXAtcGFzcw==",
        "user:pass" => "Basic dXNlcjpwYXNz",
        _ => unreachable!("no encoding for {user_password}"),
    }
}

/// test/e2e/annotations/auth.go: without credentials, or with wrong ones, 401 and a challenge for
/// the realm; with a user of the htpasswd file (or of an auth-map Secret) the request passes,
/// without its Authorization (the template's `proxy_set_header Authorization ""`); a Secret that does not exist denies the location (503); a file line
/// without a hash lets nobody in as that user; CORS fields are on the 401 too. The hashes are
/// openssl's (`passwd -apr1`, `passwd -6`) and Python's SHA-1.
#[test]
fn basic_auth_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-basic-auth");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&secret(
        "basic",
        "auth: \"# users\\nfoo:$apr1$Qw3rTy12$ToV8Fflyor2TzTiUbMX9G.\\r\\n\\nbob:$6$s4ltS4lt$9uHOi55laf.sEEL.nTAfniTJjMMs7SDbYU5h7LVlO0kOSmOWxbm5Xz5q3kpep0HjBmO3KiwhbIAtD0zuw5Z8w0\\n\"",
    ));
    text.push_str(&secret("map", "mapuser: \"{SHA}cMDfr8HJx0TJ+topBwte1cIQGDY=\""));
    text.push_str(&secret("invalid", "auth: \"foo:\""));
    let auth = |secret: &str| {
        format!("{NGINX}/auth-type: basic, {NGINX}/auth-secret: {secret}, {NGINX}/auth-realm: \"test auth\"")
    };
    let cases = [
        ("open", String::new()),
        ("missing", auth("something")),
        ("auth", auth("basic")),
        ("map", format!("{}, {NGINX}/auth-secret-type: auth-map", auth("map"))),
        ("invalid", auth("invalid")),
        ("cors", format!("{}, {NGINX}/enable-cors: \"true\"", auth("basic"))),
        ("digest", format!("{NGINX}/auth-type: digest, {NGINX}/auth-secret: basic")),
    ];
    let h2c = grpc_backend::GrpcBackend::start();
    text.push_str(&service_of("h2c", &[h2c.addr]));
    text.push_str(&ingress(
        "h2c",
        "h2c.test",
        &format!("{}, {NGINX}/backend-protocol: H2C", auth("basic")),
        &[("/", "Prefix", "h2c")],
    ));
    for (name, annotations) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &[("/", "Prefix", "a")]));
    }
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let with = |host: &str, authorization: Option<&str>| {
        let field = authorization.map(|v| format!("authorization: {v}\r\n")).unwrap_or_default();
        request(addr, &format!("GET / HTTP/1.1\r\nHost: {host}\r\n{field}connection: close\r\n\r\n"))
    };
    assert_eq!(with("open.test", None).status, 200);
    assert_eq!(with("missing.test", None).status, 503, "a Secret that does not exist denies the location");
    assert_eq!(with("missing.test", Some(basic("foo:bar"))).status, 503);

    let challenged = with("auth.test", None);
    assert_eq!(challenged.status, 401, "{}", challenged.head);
    assert_eq!(challenged.header("www-authenticate"), Some("Basic realm=\"test auth\""));
    for wrong in ["foo:baz", "user:pass"] {
        let refused = with("auth.test", Some(basic(wrong)));
        assert_eq!(refused.status, 401, "{wrong}");
        assert_eq!(refused.header("www-authenticate"), Some("Basic realm=\"test auth\""));
    }
    assert_eq!(with("auth.test", Some("Bearer Zm9vOmJhcg==")).status, 401, "only Basic credentials count");
    let passed = with("auth.test", Some(basic("foo:bar")));
    assert_eq!(seen(&passed).0, "a", "{}", passed.head);
    assert_eq!(header_seen(&passed, "authorization"), None, "the credentials are not sent on, as in ingress-nginx");
    assert_eq!(with("auth.test", Some(basic("bob:secret"))).status, 200, "SHA-512 crypt after a CRLF line");
    assert_eq!(with("auth.test", Some(basic("foo:bar"))).status, 200, "again, as the worker remembers it");

    assert_eq!(with("map.test", Some(basic("mapuser:map-pass"))).status, 200);
    assert_eq!(with("map.test", Some(basic("foo:bar"))).status, 401);
    assert_eq!(with("invalid.test", Some(basic("foo:bar"))).status, 401, "a user without a hash cannot sign in");

    let cors = with("cors.test", None);
    assert_eq!(cors.status, 401);
    assert_eq!(cors.header("access-control-allow-origin"), Some("*"), "{}", cors.head);
    assert_eq!(with("digest.test", Some(basic("foo:bar"))).status, 404, "digest is refused, never served open");
    let generation = d.published.current();
    let said = |name: &str, text: &str| {
        generation.diagnostics.iter().any(|p| p.object.name == name && p.message.contains(text))
    };
    assert!(said("digest", "digest authentication is not available"), "{:?}", generation.diagnostics);
    assert!(said("missing", "Secret shop/something does not exist"), "{:?}", generation.diagnostics);

    // HTTP/2 clients are challenged the same way.
    let mut h2 = h2client::H2Client::connect(addr);
    let r = h2.get("auth.test", "/");
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Basic realm=\"test auth\"")));
    let r = h2.request("GET", "auth.test", "/", &[("authorization", basic("foo:bar"))], b"", true).unwrap();
    assert_eq!(r.status, 200);
    // An HTTP/2 backend does not get the credentials either, from either kind of client.
    let r = h2.request("GET", "h2c.test", "/plain", &[("authorization", basic("foo:bar"))], b"", true).unwrap();
    assert_eq!((r.status, r.header("x-seen-authorization")), (200, None), "{}", r.text());
    assert_eq!(h2.get("h2c.test", "/plain").status, 401);
    let raw = format!(
        "GET /plain HTTP/1.1\r\nHost: h2c.test\r\nauthorization: {}\r\nconnection: close\r\n\r\n",
        basic("foo:bar")
    );
    let r = request(addr, &raw);
    assert_eq!((r.status, r.header("x-seen-authorization")), (200, None), "{}", r.head);
    drop(h2c);

    // Attacker then victim on one connection: a refused request's body is not taken for a request,
    // and the connection goes on serving.
    let before = a.requests();
    let mut conn = Conn::open(addr);
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: open.test\r\n\r\n";
    let attack = format!("POST / HTTP/1.1\r\nHost: auth.test\r\ncontent-length: {}\r\n\r\n{smuggled}", smuggled.len());
    conn.send(attack.as_bytes());
    let refused = conn.read_response_to(false).expect("an answer");
    assert_eq!(refused.status, 401, "{}", refused.head);
    conn.send(
        format!("GET /victim HTTP/1.1\r\nHost: auth.test\r\nauthorization: {}\r\n\r\n", basic("foo:bar")).as_bytes(),
    );
    let served = conn.read_response_to(false).expect("the connection is kept");
    assert_eq!(seen(&served), ("a".to_string(), "/victim".to_string()));
    assert_eq!(a.requests(), before + 1, "only the victim's request reached the backend");
    drop(b);
    d.shutdown();
}

/// docs ("Custom NGINX upstream hashing") and test/e2e/annotations/upstreamhashby.go: with
/// `upstream-hash-by`, every request with the same key goes to the same endpoint, whatever the
/// connection or protocol, and different keys spread over the endpoints; the key may mix
/// variables and text.
#[test]
fn upstream_hash_by_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-hash-by");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&pair_service(a.addr, b.addr));
    let pair = [("/", "Prefix", "pair")];
    text.push_str(&ingress("uri", "uri.test", &format!("{NGINX}/upstream-hash-by: \"$request_uri\""), &pair));
    text.push_str(&ingress("user", "user.test", &format!("{NGINX}/upstream-hash-by: \"${{arg_user}}-x\""), &pair));
    text.push_str(&ingress("broken", "broken.test", &format!("{NGINX}/upstream-hash-by: \"${{request_uri\""), &pair));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let mut homes = std::collections::BTreeMap::new();
    for i in 0..20 {
        let path = format!("/item/{i}?q={i}");
        let first = seen(&get(addr, "uri.test", &path)).0;
        for _ in 0..4 {
            assert_eq!(seen(&get(addr, "uri.test", &path)).0, first, "{path} stays on one endpoint");
        }
        homes.insert(path, first);
    }
    let used: std::collections::BTreeSet<&String> = homes.values().collect();
    assert_eq!(used.len(), 2, "keys spread over both endpoints: {homes:?}");
    // HTTP/2 streams hash the same way.
    let mut h2 = h2client::H2Client::connect(addr);
    for (path, home) in homes.iter().take(6) {
        let r = h2.get("uri.test", path);
        assert!(r.text().contains(&format!("backend={home}\n")), "{path}: {}", r.text());
    }
    // The key is the user argument: the path does not matter.
    for user in ["alice", "bob", "carol"] {
        let home = seen(&get(addr, "user.test", &format!("/?user={user}"))).0;
        for path in ["/a", "/b/c", "/d?x=1"] {
            let sep = if path.contains('?') { '&' } else { '?' };
            assert_eq!(seen(&get(addr, "user.test", &format!("{path}{sep}user={user}"))).0, home, "{user} {path}");
        }
    }
    assert_eq!(get(addr, "broken.test", "/").status, 404, "a key ramjet cannot read keeps the Ingress out");
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "broken" && p.message.contains("upstream-hash-by")));
    d.shutdown();
}

/// test/e2e/annotations/upstreamhashby.go, "should connect to the same subset of pods": six
/// endpoints, `upstream-hash-by-subset` with a subset of 3: a hundred requests with one key reach
/// exactly three endpoints; another key has a subset of its own.
#[test]
fn upstream_hash_by_subset_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-hash-subset");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let six: Vec<Backend> = (0..6).map(|i| Backend::start(&format!("pod-{i}"))).collect();
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("six", &six.iter().map(|b| b.addr).collect::<Vec<_>>()));
    let annotations = format!(
        "{NGINX}/upstream-hash-by: \"$request_uri\", {NGINX}/upstream-hash-by-subset: \"true\", \
         {NGINX}/upstream-hash-by-subset-size: \"3\""
    );
    text.push_str(&ingress("subset", "subset.test", &annotations, &[("/", "Prefix", "six")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let subset = |path: &str| {
        let mut conn = Conn::open(addr);
        (0..100).map(|_| seen(&conn.get("subset.test", path)).0).collect::<std::collections::BTreeSet<String>>()
    };
    let first = subset("/");
    assert_eq!(first.len(), 3, "one key, three endpoints: {first:?}");
    let others: Vec<_> = (0..8).map(|i| subset(&format!("/key/{i}"))).collect();
    assert!(others.iter().all(|s| s.len() == 3), "{others:?}");
    assert!(others.iter().any(|s| *s != first), "keys have subsets of their own: {others:?}");
    d.shutdown();
}

/// A backend that answers every request with `status` (and closes the connection), counting them.
struct StatusBackend {
    addr: SocketAddr,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl StatusBackend {
    fn start(status: u16) -> Self {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                counted.fetch_add(1, Ordering::Relaxed);
                let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 7\r\nconnection: close\r\n\r\nstatus\n");
                let _ = stream.write_all(answer.as_bytes());
            }
        });
        StatusBackend { addr, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// nginx's `proxy_next_upstream` docs (ingress-nginx passes the annotations to it): with a status
/// listed, a request whose try got that status goes to the next endpoint, and the client never
/// sees it; a POST once sent is not passed on unless `non_idempotent` is listed; `off` (or one
/// try) passes nothing on, not even a refused connection; when every try got the status, the last
/// answer is the client's. Without the annotation, only a refused connection moves on.
#[test]
fn proxy_next_upstream_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-next-upstream");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let (busy, busier) = (StatusBackend::start(503), StatusBackend::start(503));
    let dead = support::dead_addr();
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("flaky", &[busy.addr, a.addr]));
    text.push_str(&service_of("down", &[dead, a.addr]));
    text.push_str(&service_of("busy", &[busy.addr, busier.addr]));
    let to = |service: &'static str| [("/", "Prefix", service)];
    let cases = [
        ("retry", format!("{NGINX}/proxy-next-upstream: \"error timeout http_503\""), "flaky"),
        ("retrypost", format!("{NGINX}/proxy-next-upstream: \"error http_503 non_idempotent\""), "flaky"),
        ("plain", String::new(), "flaky"),
        ("once", format!("{NGINX}/proxy-next-upstream: http_503, {NGINX}/proxy-next-upstream-tries: \"1\""), "flaky"),
        ("off", format!("{NGINX}/proxy-next-upstream: \"off\""), "down"),
        ("default", String::new(), "down"),
        (
            "allbusy",
            format!("{NGINX}/proxy-next-upstream: \"http_503\", {NGINX}/proxy-next-upstream-tries: \"0\""),
            "busy",
        ),
        ("broken", format!("{NGINX}/proxy-next-upstream: \"error http_418\""), "flaky"),
    ];
    for (name, annotations, service) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &to(service)));
    }
    let d = start(&dir, &text);
    let addr = d.http_addr();
    // Each on a new connection: the workers take turns over the endpoints.
    let statuses = |host: &str, method: &str| -> Vec<u16> {
        (0..12)
            .map(|_| {
                let body = if method == "POST" { "content-length: 4\r\n\r\nbody" } else { "\r\n" };
                request(addr, &format!("{method} / HTTP/1.1\r\nHost: {host}\r\nconnection: close\r\n{body}")).status
            })
            .collect()
    };
    let before = busy.requests();
    assert_eq!(statuses("retry.test", "GET"), vec![200; 12], "a 503 is passed to the next endpoint");
    assert!(busy.requests() > before, "the busy endpoint was tried (and its answer dropped)");
    assert!(statuses("plain.test", "GET").contains(&503), "without the annotation statuses are the client's");
    assert!(statuses("once.test", "GET").contains(&503), "one try passes nothing on");
    let posts = statuses("retry.test", "POST");
    assert!(posts.contains(&503) && posts.contains(&200), "a POST once sent is not passed on: {posts:?}");
    assert_eq!(statuses("retrypost.test", "POST"), vec![200; 12], "non_idempotent passes POSTs on too");
    assert!(statuses("off.test", "GET").contains(&502), "off: a refused connection is the client's 502");
    assert_eq!(statuses("default.test", "GET"), vec![200; 12], "ramjet's default moves a refused connection on");
    let (first, second) = (busy.requests(), busier.requests());
    assert_eq!(statuses("allbusy.test", "GET"), vec![503; 12], "the last try's answer is the client's");
    assert_eq!((busy.requests() - first, busier.requests() - second), (12, 12), "every request tried both");
    assert_eq!(statuses("broken.test", "GET"), vec![404; 12], "a list ramjet cannot read keeps the Ingress out");
    let generation = d.published.current();
    assert!(generation.diagnostics.iter().any(|p| p.object.name == "broken" && p.message.contains("http_418")));

    // HTTP/2 clients: the same passing on.
    let mut h2 = h2client::H2Client::connect(addr);
    for _ in 0..6 {
        assert_eq!(h2.get("retry.test", "/").status, 200);
    }
    d.shutdown();
}

/// test/e2e/annotations/default_backend.go: a path to a Service that does not exist is served (the
/// rest of the Ingress is not lost): `default-backend` answers it, told `X-Code: 503` and the
/// missing Service's name; without one it is a 503. Once the Service appears it serves.
#[test]
fn a_missing_service_answers_503_and_the_rest_of_the_ingress_is_served() {
    let dir = temp_dir("annotations-missing-service");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "fallback",
        "fallback.test",
        &format!("{NGINX}/default-backend: b"),
        &[("/alma", "Prefix", "invalid")],
    ));
    text.push_str(&ingress("partly", "partly.test", "", &[("/gone", "Prefix", "invalid"), ("/", "Prefix", "a")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let asked = request(
        addr,
        "GET /alma/armud HTTP/1.1\r\nHost: fallback.test\r\nx-request-id: something-unique\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(asked.status, 200, "{}", asked.head);
    assert_eq!(seen(&asked).0, "b");
    for (field, value) in [
        ("x-code", "503"),
        ("x-ingress-name", "fallback"),
        ("x-service-name", "invalid"),
        ("x-request-id", "something-unique"),
    ] {
        assert_eq!(header_seen(&asked, field).as_deref(), Some(value), "{field}: {}", asked.body);
    }
    assert_eq!(get(addr, "partly.test", "/gone").status, 503);
    assert_eq!(seen(&get(addr, "partly.test", "/")).0, "a", "the Ingress's other paths are served");
    let generation = d.published.current();
    assert!(generation
        .diagnostics
        .iter()
        .any(|p| p.object.name == "partly" && p.message.contains("shop/invalid does not exist")));
    // The Service appears: its path serves.
    text.push_str(&service("shop", "invalid", a.addr));
    std::fs::write(dir.join("app.yaml"), &text).unwrap();
    assert!(support::eventually(Duration::from_secs(10), || get(addr, "partly.test", "/gone").status == 200));
    d.shutdown();
}

/// test/e2e/annotations/customhttperrors.go and the template's error locations: with
/// `custom-http-errors` and `default-backend`, a backend answer with a listed status is replaced by
/// the default backend's answer to the same request at `/`, without its body, told what happened
/// (`X-Code`, `X-Format`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`, `X-Service-Name`,
/// `X-Service-Port`); other answers pass through; a Service without endpoints is served by the
/// default backend with `X-Code: 503`.
#[test]
fn custom_http_errors_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-custom-errors");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&Service::new("shop", "none").yaml());
    let errors = format!("{NGINX}/custom-http-errors: \"404, 503\", {NGINX}/default-backend: b");
    let cases = [
        ("errors", errors.clone(), "a"),
        ("empty", format!("{NGINX}/default-backend: b"), "none"),
        ("nobackend", format!("{NGINX}/custom-http-errors: \"404\""), "a"),
        ("disabled", format!("{errors}, {NGINX}/disable-proxy-intercept-errors: \"true\""), "a"),
    ];
    for (name, annotations, service) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &[("/", "Prefix", service)]));
    }
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let with_accept = |host: &str, method: &str, path: &str| {
        let body = if method == "POST" { "content-length: 4\r\n\r\nbody" } else { "\r\n" };
        request(
            addr,
            &format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\naccept: text/html\r\nconnection: close\r\n{body}"),
        )
    };
    let page = with_accept("errors.test", "GET", "/nobody/404");
    assert_eq!(page.status, 200, "the error backend's answer is the client's: {}", page.head);
    assert_eq!(seen(&page), ("b".to_string(), "/".to_string()));
    for (field, value) in [
        ("x-code", "404"),
        ("x-format", "text/html"),
        ("x-original-uri", "/nobody/404"),
        ("x-namespace", "shop"),
        ("x-ingress-name", "errors"),
        ("x-service-name", "a"),
        ("x-service-port", "80"),
    ] {
        assert_eq!(header_seen(&page, field).as_deref(), Some(value), "{field}: {}", page.body);
    }
    assert_eq!(seen(&with_accept("errors.test", "GET", "/fine")).0, "a", "other answers pass through");
    assert_eq!(with_accept("errors.test", "GET", "/nobody/500").status, 500, "a status not listed passes through");
    let posted = with_accept("errors.test", "POST", "/nobody/503");
    assert!(posted.body.contains("method=POST\n") && posted.body.contains("body=\n"), "{}", posted.body);
    assert_eq!(header_seen(&posted, "x-code").as_deref(), Some("503"));
    assert_eq!(header_seen(&posted, "content-length"), None, "the error request carries no body");

    let fallback = with_accept("empty.test", "GET", "/some/path");
    assert_eq!(seen(&fallback), ("b".to_string(), "/some/path".to_string()), "{}", fallback.body);
    assert_eq!(header_seen(&fallback, "x-code").as_deref(), Some("503"));
    assert_eq!(header_seen(&fallback, "x-service-name").as_deref(), Some("none"));

    assert_eq!(with_accept("nobackend.test", "GET", "/nobody/404").status, 404);
    assert_eq!(with_accept("disabled.test", "GET", "/nobody/404").status, 404);
    let generation = d.published.current();
    assert!(generation
        .diagnostics
        .iter()
        .any(|p| p.object.name == "nobackend" && p.message.contains("without default-backend")));

    // HTTP/2 clients get the same pages.
    let mut h2 = h2client::H2Client::connect(addr);
    let r = h2.get("errors.test", "/nobody/404");
    assert!(r.text().contains("backend=b\n") && r.text().to_ascii_lowercase().contains("header=x-code: 404\n"));
    assert!(h2.get("errors.test", "/fine").text().contains("backend=a\n"));

    // On one connection: the dropped answer leaves nothing behind for the next request.
    let mut conn = Conn::open(addr);
    let first = conn.get("errors.test", "/nobody/404");
    assert_eq!(seen(&first).0, "b");
    let next = conn.get("errors.test", "/victim");
    assert_eq!(seen(&next), ("a".to_string(), "/victim".to_string()));
    d.shutdown();
}

/// An authentication service: `session=good` in the cookie is alice (200 with `X-Auth-User`),
/// `session=forbidden` is 403, anything else 401 with a Bearer challenge. It keeps connections
/// open and records every sub-request head it reads.
struct AuthServer;

impl AuthServer {
    fn start() -> support::backend::HeadServer {
        support::backend::HeadServer::start(|head| {
            let lower = head.to_ascii_lowercase();
            if lower.starts_with("get /response-headers?authorization=foo ") {
                // httpbun's /response-headers: the query's fields in the answer.
                "HTTP/1.1 200 OK\r\nauthorization: foo\r\ncontent-length: 0\r\n\r\n"
            } else if lower.contains("session=smuggle") {
                // An answer with a second one behind it, as a desynchronised or hostile service
                // would send: it must never answer someone else.
                "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok\
                 HTTP/1.1 200 OK\r\nx-auth-user: mallory\r\ncontent-length: 0\r\n\r\n"
            } else if lower.contains("session=good") {
                "HTTP/1.1 200 OK\r\nx-auth-user: alice\r\nset-cookie: session=good; Path=/\r\n\
                 content-length: 2\r\n\r\nok"
            } else if lower.contains("session=forbidden") {
                "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n"
            } else {
                "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm=\"shop\"\r\ncontent-length: 0\r\n\r\n"
            }
        })
    }
}

/// test/e2e/annotations/grpc.go "authorization metadata should be overwritten by external auth
/// response headers": a gRPC call's `authorization` is replaced by the auth service's.
#[test]
fn external_auth_overwrites_grpc_metadata_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-grpc-auth");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let auth = AuthServer::start();
    let grpc = grpc_backend::GrpcBackend::start();
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("auth", &[auth.addr]));
    text.push_str(&service_of("grpcbin", &[grpc.addr]));
    let annotations = format!(
        "{NGINX}/auth-url: \"http://auth.shop.svc.cluster.local/response-headers?authorization=foo\", \
         {NGINX}/auth-response-headers: Authorization, {NGINX}/backend-protocol: GRPC"
    );
    text.push_str(&ingress("grpcbin", "grpc.test", &annotations, &[("/", "Prefix", "grpcbin")]));
    let d = start(&dir, &text);
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/grpc");
    let out = std::process::Command::new(support::go_tools::grpcurl())
        .args(["-import-path", proto_dir, "-proto", "echo.proto", "-max-time", "10", "-plaintext", "-v"])
        .args(["-d", r#"{"text":"hi"}"#, "-H", "authorization: bar", "-authority", "grpc.test"])
        .args([&d.http_addr().to_string(), "ramjet.test.Echo/Unary"])
        .output()
        .expect("grpcurl runs");
    let out = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.contains(r#""text": "hi""#), "{out}");
    assert!(out.contains("x-seen-authorization: foo"), "the service's authorization reached the backend: {out}");
    assert!(auth.last().to_ascii_lowercase().contains("\r\nauthorization: bar\r\n"), "{}", auth.last());
    d.shutdown();
}

/// docs ("External Authentication") and test/e2e/annotations/auth.go: with `auth-url`, a
/// sub-request (the request's fields, no body, X-Original-URL and the rest of the auth location's
/// fields) decides: 2xx lets the request through with `auth-response-headers` copied from the
/// answer, 401 is the client's (with the service's challenge) or a redirect to `auth-signin` with
/// `rd`, 403 is the client's, a service that cannot answer gives 500. `$host` routes the
/// sub-request through the Ingresses of the request's own host, as oauth2-proxy's set-up has it.
#[test]
fn external_auth_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-external-auth");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let auth = AuthServer::start();
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("auth", &[auth.addr]));
    text.push_str(&service_of("deadauth", &[support::dead_addr()]));
    let url = format!("{NGINX}/auth-url: \"http://auth.shop.svc.cluster.local/verify?from=ingress\"");
    let cases = [
        ("protected", format!("{url}, {NGINX}/auth-response-headers: \"X-Auth-User\"")),
        ("signin", format!("{url}, {NGINX}/auth-signin: \"https://$host/oauth2/start\"")),
        ("down", format!("{NGINX}/auth-url: \"http://deadauth/verify\"")),
        ("elsewhere", format!("{NGINX}/auth-url: \"https://auth.example.com/verify\"")),
    ];
    for (name, annotations) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &[("/", "Prefix", "a")]));
    }
    // oauth2-proxy's way: the sub-request goes to the request's own host, served by another Ingress.
    text.push_str(&ingress(
        "app",
        "self.test",
        &format!("{NGINX}/auth-url: \"https://$host/oauth2/auth\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress("oauth2", "self.test", "", &[("/oauth2", "Prefix", "auth")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let ask = |host: &str, cookie: &str, extra: &str| {
        let cookie = if cookie.is_empty() { String::new() } else { format!("cookie: session={cookie}\r\n") };
        request(addr, &format!("GET /page?id=1 HTTP/1.1\r\nHost: {host}\r\n{cookie}{extra}connection: close\r\n\r\n"))
    };
    let refused = ask("protected.test", "", "");
    assert_eq!(refused.status, 401, "{}", refused.head);
    assert_eq!(refused.header("www-authenticate"), Some("Bearer realm=\"shop\""), "the service's challenge");
    assert_eq!(a.requests(), 0, "nothing reached the backend");
    let sub = auth.last();
    assert!(sub.starts_with("GET /verify?from=ingress HTTP/1.1\r\nhost: auth.shop.svc.cluster.local\r\n"), "{sub}");
    for field in [
        "x-original-url: http://protected.test/page?id=1\r\n",
        "x-original-method: GET\r\n",
        "x-sent-from: nginx-ingress-controller\r\n",
        "x-real-ip: 127.0.0.1\r\n",
        "x-auth-request-redirect: /page?id=1\r\n",
    ] {
        assert!(sub.contains(field), "{field:?} in {sub}");
    }

    let passed = ask("protected.test", "good", "x-auth-user: mallory\r\n");
    assert_eq!(seen(&passed), ("a".to_string(), "/page?id=1".to_string()), "{}", passed.head);
    assert_eq!(header_seen(&passed, "x-auth-user").as_deref(), Some("alice"), "the service's, not the client's");
    assert_eq!(passed.body.matches("x-auth-user").count(), 1, "{}", passed.body);
    assert_eq!(passed.header("set-cookie"), Some("session=good; Path=/"), "the service's cookie reaches the client");
    assert_eq!(ask("protected.test", "forbidden", "").status, 403);

    // A POST's body goes to the backend, never to the service.
    let post = request(
        addr,
        "POST /orders HTTP/1.1\r\nHost: protected.test\r\ncookie: session=good\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
    );
    assert!(post.body.contains("body=hello\n"), "{}", post.body);
    let sub = auth.last();
    assert!(
        !sub.to_ascii_lowercase().contains("content-length") && sub.contains("x-original-method: POST\r\n"),
        "{sub}"
    );

    let to_signin = ask("signin.test", "", "");
    assert_eq!(to_signin.status, 302);
    assert_eq!(
        to_signin.header("location"),
        Some("https://signin.test/oauth2/start?rd=http://signin.test%2Fpage%3Fid%3D1")
    );
    assert_eq!(ask("down.test", "good", "").status, 500, "a service that cannot answer is a 500");
    // A host outside the cluster that does not resolve here: asked of nobody, so never served open.
    assert_eq!(ask("elsewhere.test", "good", "").status, 500, "an auth-url ramjet cannot reach is never served open");
    let generation = d.published.current();
    assert!(generation
        .diagnostics
        .iter()
        .any(|p| p.object.name == "elsewhere" && p.message.contains("auth.example.com")));

    // Through the host's own Ingresses.
    assert_eq!(ask("self.test", "", "").status, 401);
    let own = ask("self.test", "good", "");
    assert_eq!(seen(&own).0, "a", "{}", own.head);
    assert!(auth.last().starts_with("GET /oauth2/auth HTTP/1.1\r\nhost: self.test\r\n"), "{}", auth.last());

    // HTTP/2 clients are asked about the same way.
    let mut h2 = h2client::H2Client::connect(addr);
    assert_eq!(h2.get("protected.test", "/").status, 401);
    let r = h2.request("GET", "protected.test", "/h2", &[("cookie", "session=good")], b"", true).unwrap();
    assert!(r.text().contains("backend=a\n") && r.text().contains("x-auth-user: alice"), "{}", r.text());
    assert_eq!(r.header("set-cookie"), Some("session=good; Path=/"));

    // Sub-requests share the worker's pooled connections.
    assert!(auth.connections() < auth.asked(), "{} connections for {} sub-requests", auth.connections(), auth.asked());

    // Attacker then victim over the same pooled connection to the service: the answer the
    // attacker's sub-request left behind is not taken for the victim's.
    for _ in 0..4 {
        assert_eq!(ask("protected.test", "smuggle", "").status, 200);
        let victim = ask("protected.test", "", "");
        assert_eq!(victim.status, 401, "a stale answer let the victim in: {}", victim.head);
    }

    // Attacker then victim on one connection: the refused request's body is not a request.
    let before = a.requests();
    let mut conn = Conn::open(addr);
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: protected.test\r\ncookie: session=good\r\n\r\n";
    let attack =
        format!("POST / HTTP/1.1\r\nHost: protected.test\r\ncontent-length: {}\r\n\r\n{smuggled}", smuggled.len());
    conn.send(attack.as_bytes());
    assert_eq!(conn.read_response_to(false).expect("an answer").status, 401);
    conn.send(b"GET /victim HTTP/1.1\r\nHost: protected.test\r\ncookie: session=good\r\n\r\n");
    let served = conn.read_response_to(false).expect("the connection is kept");
    assert_eq!(seen(&served), ("a".to_string(), "/victim".to_string()));
    assert_eq!(a.requests(), before + 1, "only the victim's request reached the backend");
    d.shutdown();
}

/// A backend that answers every request 200 `slow` after `delay`, keeping connections open.
fn slow_backend(delay: Duration) -> SocketAddr {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    std::thread::sleep(delay);
                    let body = "backend=slow\n";
                    let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// docs ("Custom NGINX load balancing") and ingress-nginx's balancer/ewma.lua: with `load-balance:
/// ewma`, once both endpoints have answered, the slower one gets (almost) nothing, where round
/// robin gives it every other request.
#[test]
fn load_balance_ewma_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-ewma");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let slow = slow_backend(Duration::from_millis(150));
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("mixed", &[slow, a.addr]));
    text.push_str(&ingress("ewma", "ewma.test", &format!("{NGINX}/load-balance: ewma"), &[("/", "Prefix", "mixed")]));
    text.push_str(&ingress(
        "rr",
        "rr.test",
        &format!("{NGINX}/load-balance: round_robin"),
        &[("/", "Prefix", "mixed")],
    ));
    text.push_str(&ingress("bad", "bad.test", &format!("{NGINX}/load-balance: fastest"), &[("/", "Prefix", "mixed")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    // On one keep-alive connection (one worker): it learns both endpoints, then prefers the fast one.
    let served = |host: &str, n: usize| -> Vec<String> {
        let mut conn = Conn::open(addr);
        (0..n).map(|_| conn.get(host, "/").body.lines().next().unwrap_or("").to_string()).collect()
    };
    let ewma = served("ewma.test", 30);
    let slow_late = ewma[10..].iter().filter(|b| *b == "backend=slow").count();
    assert!(slow_late <= 1, "the slow endpoint kept getting requests: {ewma:?}");
    assert!(ewma.iter().any(|b| b == "backend=a"));
    let rr = served("rr.test", 10);
    assert_eq!(rr.iter().filter(|b| *b == "backend=slow").count(), 5, "round robin alternates: {rr:?}");
    assert_eq!(get(addr, "bad.test", "/").status, 404, "a balancer ramjet does not have keeps the Ingress out");
    d.shutdown();
}

/// docs ("SSL Passthrough"): with `ssl-passthrough`, a TLS connection for the Ingress's host goes to
/// its backend unopened — the client sees the backend's own certificate and talks to it end to
/// end — while connections for other names on the same listener are terminated by ramjet as usual.
#[test]
fn ssl_passthrough_behaves_as_in_ingress_nginx() {
    use std::io::{Read, Write};
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("annotations-passthrough");
    let backend_cert = pki.leaf("backend", &["passthrough.test"]);
    let default_cert = pki.leaf("default", &["terminated.test"]);
    let secure = tls_backend::TlsBackend::start("secure", &pki, "backend", None);
    let dir = temp_dir("annotations-passthrough");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("secure", &[secure.addr]));
    text.push_str(&ingress(
        "pass",
        "passthrough.test",
        &format!("{NGINX}/ssl-passthrough: \"true\""),
        &[("/", "Prefix", "secure")],
    ));
    text.push_str(&ingress("term", "terminated.test", "", &[("/", "Prefix", "a")]));
    let key = {
        let chain = std::fs::read(pki.path("default.crt")).unwrap();
        let key = std::fs::read(pki.path("default.key")).unwrap();
        ramjet_control::certs::parse_certificate(&chain, &key, "default").unwrap().key.clone()
    };
    let d = start_with(&dir, &text, |c| c.default_certificate = Some(key));
    let https = d.https_addr().expect("an HTTPS listener");
    let client = pki.client(&[&rustls::version::TLS13, &rustls::version::TLS12]);
    let fetch = |sni: &str| {
        let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
        let conn = rustls::ClientConnection::new(client.clone(), name).unwrap();
        let tcp = std::net::TcpStream::connect(https).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        write!(tls, "GET /hello HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n").unwrap();
        // One response (the test backend keeps its connections open): the head, then its length.
        let mut out = Vec::new();
        let mut byte = [0u8; 1];
        let complete = |out: &[u8]| {
            let text = String::from_utf8_lossy(out);
            let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
            let length = head.lines().find_map(|l| {
                l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0))
            });
            body.len() >= length.unwrap_or(0)
        };
        while !complete(&out) && tls.read(&mut byte).is_ok_and(|n| n == 1) {
            out.push(byte[0]);
        }
        let peer = tls.conn.peer_certificates().map(|c| c[0].clone());
        (peer, String::from_utf8_lossy(&out).to_string())
    };
    let (peer, answer) = fetch("passthrough.test");
    assert_eq!(peer.as_ref(), Some(&backend_cert), "the backend's own certificate, not ramjet's");
    assert!(answer.ends_with("secure sni=passthrough.test target=/hello\n"), "{answer}");
    assert_eq!(secure.snis(), vec![Some("passthrough.test".to_string())], "one end-to-end handshake, with the SNI");
    let (peer, answer) = fetch("terminated.test");
    assert_eq!(peer.as_ref(), Some(&default_cert), "other names are terminated by ramjet");
    assert!(answer.contains("backend=a\n"), "{answer}");
    // Both kinds, one after the other, over the workers' listeners.
    for i in 0..8 {
        let (sni, want) = if i % 2 == 0 {
            ("passthrough.test", "secure sni=passthrough.test")
        } else {
            ("terminated.test", "backend=a")
        };
        let answer = fetch(sni).1;
        assert!(answer.contains(want), "{i}: {answer}");
    }
    // A ClientHello sent a byte at a time is read whole before it is judged, and passed on whole.
    let name = rustls::pki_types::ServerName::try_from("passthrough.test").unwrap();
    let mut conn = rustls::ClientConnection::new(client.clone(), name).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    let mut tcp = std::net::TcpStream::connect(https).unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for byte in &hello {
        tcp.write_all(std::slice::from_ref(byte)).unwrap();
    }
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).unwrap();
    }
    assert_eq!(tls.conn.peer_certificates().map(|c| c[0].clone()), Some(backend_cert.clone()));
    // Closing it ends the splice (a spliced connection lasts as long as its two ends).
    drop(tls);
    // Not TLS at all: the connection is dropped, and the next ones are served.
    let mut garbage = std::net::TcpStream::connect(https).unwrap();
    garbage.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\nHost: passthrough.test\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("secure"), "nothing reached the backend");
    assert!(fetch("passthrough.test").1.contains("secure sni=passthrough.test"));
    assert!(fetch("terminated.test").1.contains("backend=a\n"));
    assert!(d.published.current().table.passthrough("PassThrough.Test").is_some());
    d.shutdown();
}

/// test/e2e/annotations/affinity.go, the cookie's scope: two rules of one Ingress to one Service
/// each set their own rule's path; `session-cookie-domain` adds `Domain` (and nothing does
/// without it); a regex rule takes `session-cookie-path`; on a host where only one of two
/// Ingresses asks for affinity, the other's paths set no cookie; a rule without a host sets it too.
#[test]
fn session_cookie_scope_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-affinity-scope");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let sticky = format!("{NGINX}/affinity: cookie, {NGINX}/session-cookie-name: SERVERID");
    let two_rules = [("/something", "Prefix", "a"), ("/somewhereelse", "Prefix", "a")];
    text.push_str(&ingress("morethanonerule", "morethanonerule.test", &sticky, &two_rules));
    let domain = format!("{sticky}, {NGINX}/session-cookie-domain: foo.bar");
    text.push_str(&ingress("domain", "domain.test", &domain, &[("/", "Prefix", "a")]));
    let regex = format!("{sticky}, {NGINX}/use-regex: \"true\", {NGINX}/session-cookie-path: /foo/bar");
    text.push_str(&ingress("useregex", "useregex.test", &regex, &[("/foo/.*", "Prefix", "a")]));
    let affinity = format!("{NGINX}/affinity: cookie");
    text.push_str(&ingress("ingress1", "separate.test", &affinity, &[("/foo/bar", "Prefix", "a")]));
    text.push_str(&ingress("ingress2", "separate.test", "", &[("/foo", "Prefix", "a")]));
    text.push_str(&Ingress::new("shop", "default-no-host").port_number(80).annotations_yaml(&sticky).to("a").yaml());
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let cookie = |host: &str, path: &str| {
        let r = get(addr, host, path);
        assert_eq!(r.status, 200, "{host}{path}: {r:?}");
        r.header("set-cookie").map(str::to_string)
    };

    for path in ["/something", "/somewhereelse"] {
        let set = cookie("morethanonerule.test", path).expect("a cookie");
        assert!(set.starts_with("SERVERID=") && set.contains(&format!("; Path={path};")), "{set}");
        assert!(!set.contains("; Domain"), "no domain without the annotation: {set}");
    }
    let set = cookie("domain.test", "/").expect("a cookie");
    assert!(set.contains("; Domain=foo.bar"), "{set}");
    let set = cookie("useregex.test", "/foo/bar").expect("a cookie");
    assert!(set.starts_with("SERVERID=") && set.contains("; Path=/foo/bar;"), "{set}");
    assert_eq!(cookie("separate.test", "/foo"), None, "the Ingress without affinity sets no cookie");
    let set = cookie("separate.test", "/foo/bar").expect("a cookie");
    assert!(set.contains("; Path=/foo/bar;"), "{set}");
    let set = cookie("127.0.0.1", "/").expect("the rule without a host sets it too");
    assert!(set.starts_with("SERVERID="), "{set}");
    d.shutdown();
}

/// test/e2e/annotations/cors.go, the origin lists: an entry without a scheme matches nothing,
/// while the list's other entries still do; a `*` anywhere makes the list `*`; dots are literal;
/// ports must match, a wildcard entry's included (and the wildcard stands for one label or more,
/// never for none); blank entries and a trailing comma are skipped; any scheme makes an origin.
#[test]
fn cors_origin_lists_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-cors-lists");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let lists = [
        ("mixed", "origin.cors.com:8080, https://origin2.cors.com, https://origin.com"),
        ("star", "*, foo.bar.com"),
        ("dots", "https://foo.bar.com"),
        ("ports", "https://origin2.cors.com, http://origin.com"),
        ("wildcard", "http://origin.cors.com:8080, http://*.origin.com:8080"),
        ("commas", "https://origin-123.cors.com:8080,   ,https://origin-321.cors.com:8080,"),
        ("schemes", "test://localhost, tauri://localhost:3000"),
    ];
    for (name, list) in lists {
        let annotations = format!("{NGINX}/enable-cors: \"true\", {NGINX}/cors-allow-origin: \"{list}\"");
        text.push_str(&ingress(name, &format!("{name}.test"), &annotations, &[("/", "Prefix", "a")]));
    }
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let allowed = |name: &str, origin: &str| {
        let origin = if origin.is_empty() { String::new() } else { format!("Origin: {origin}\r\n") };
        let r = request(addr, &format!("GET / HTTP/1.1\r\nHost: {name}.test\r\n{origin}connection: close\r\n\r\n"));
        assert_eq!(r.status, 200, "{r:?}");
        r.header("access-control-allow-origin").map(str::to_string)
    };
    let echoed = |name: &str, origin: &str| assert_eq!(allowed(name, origin).as_deref(), Some(origin), "{name}");
    let refused = |name: &str, origin: &str| assert_eq!(allowed(name, origin), None, "{name} {origin}");

    refused("mixed", "origin.cors.com:8080");
    echoed("mixed", "https://origin2.cors.com");
    echoed("mixed", "https://origin.com");
    assert_eq!(allowed("star", "").as_deref(), Some("*"));
    refused("dots", "https://fooxbar.com");
    refused("ports", "http://origin.com:8080");
    echoed("wildcard", "http://abc.origin.com:8080");
    echoed("wildcard", "http://bar.origin.com:8080");
    refused("wildcard", "http://abc.origin.com");
    refused("wildcard", "http://origin.com:8080");
    echoed("commas", "https://origin-123.cors.com:8080");
    echoed("commas", "https://origin-321.cors.com:8080");
    refused("commas", "https://unknown.cors.com:8080");
    echoed("schemes", "test://localhost");
    echoed("schemes", "tauri://localhost:3000");
    d.shutdown();
}

/// test/e2e/annotations/auth.go, around the sub-request: the service's cookie reaches the client
/// on a backend's 2xx only, unless `auth-always-set-cookie`; `auth-signin-redirect-param` renames
/// `rd`; a field named in `auth-response-headers` that the service's answer lacks is not passed on
/// from the client either; `auth-proxy-set-headers`' fields are set on the sub-request, and a
/// ConfigMap that is not there answers 503.
#[test]
fn external_auth_cookies_and_fields_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-external-auth-cookies");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let auth = AuthServer::start();
    let failing = StatusBackend::start(503);
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("auth", &[auth.addr]));
    text.push_str(&service_of("failing", &[failing.addr]));
    let url = format!("{NGINX}/auth-url: \"http://auth.shop.svc.cluster.local/verify\"");
    let signin = format!("{url}, {NGINX}/auth-signin: \"http://$host/auth/start\"");
    let always = format!("{signin}, {NGINX}/auth-always-set-cookie: \"true\"");
    for (host, annotations) in [("cookies.test", &signin), ("always.test", &always)] {
        let name = host.trim_end_matches(".test");
        text.push_str(&ingress(name, host, annotations, &[("/", "Prefix", "a")]));
        text.push_str(&ingress(&format!("{name}-error"), host, annotations, &[("/error", "Prefix", "failing")]));
    }
    let orig = format!("{signin}, {NGINX}/auth-signin-redirect-param: orig");
    text.push_str(&ingress("orig", "orig.test", &orig, &[("/", "Prefix", "a")]));
    let foo = format!("{url}, {NGINX}/auth-response-headers: Foo");
    text.push_str(&ingress("foo", "foo.test", &foo, &[("/", "Prefix", "a")]));
    // auth.go "should set proxy_set_header My-Custom-Header 42 when auth-headers are set".
    text.push_str(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: { name: auth-headers, namespace: shop }\n\
         data: { My-Custom-Header: \"42\" }\n",
    );
    let set = format!("{url}, {NGINX}/auth-proxy-set-headers: shop/auth-headers");
    text.push_str(&ingress("set", "set.test", &set, &[("/", "Prefix", "a")]));
    let missing = format!("{url}, {NGINX}/auth-proxy-set-headers: nothing-here");
    text.push_str(&ingress("missing", "missing.test", &missing, &[("/", "Prefix", "a")]));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let ask = |host: &str, target: &str, extra: &str| {
        request(addr, &format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}connection: close\r\n\r\n"))
    };
    let signed_in = "cookie: session=good\r\n";

    let r = ask("cookies.test", "/?a=b&c=d", signed_in);
    assert_eq!((r.status, r.header("set-cookie")), (200, Some("session=good; Path=/")), "{r:?}");
    let r = ask("cookies.test", "/error?a=b&c=d", signed_in);
    assert_eq!((r.status, r.header("set-cookie")), (503, None), "{r:?}");
    let r = ask("always.test", "/error?a=b&c=d", signed_in);
    assert_eq!((r.status, r.header("set-cookie")), (503, Some("session=good; Path=/")), "{r:?}");

    let r = ask("orig.test", "/?a=b&c=d", "");
    assert_eq!(r.status, 302, "{r:?}");
    assert_eq!(r.header("location"), Some("http://orig.test/auth/start?orig=http://orig.test%2F%3Fa%3Db%26c%3Dd"));

    let r = ask("foo.test", "/", &format!("{signed_in}Foo: bar\r\n"));
    assert_eq!(seen(&r).0, "a", "{r:?}");
    assert_eq!(header_seen(&r, "foo"), None, "{}", r.body);

    let r = ask("set.test", "/", &format!("{signed_in}My-Custom-Header: 7\r\n"));
    assert_eq!(seen(&r).0, "a", "{r:?}");
    let sub = auth.last();
    assert!(sub.contains("\r\nmy-custom-header: 42\r\n") && !sub.contains(": 7\r\n"), "{sub}");
    assert_eq!(ask("missing.test", "/", signed_in).status, 503, "a ConfigMap that is not there denies the paths");
    d.shutdown();
}

/// test/e2e/annotations/fromtowwwredirect.go "should redirect from www HTTPS to HTTPS": with a
/// certificate for both names, `https://www.<host>/` is redirected to `https://<host>:<port>` (the
/// listener's port, the one trailing slash dropped) and `<host>` itself is served.
#[test]
fn from_to_www_redirect_over_https_behaves_as_in_ingress_nginx() {
    let pki = support::pki::Pki::new("annotations-www-https");
    pki.leaf("site", &["fromtowww.test", "www.fromtowww.test"]);
    let b64 = |f: &str| support::control_plane::base64(&std::fs::read(pki.path(f)).unwrap());
    let dir = temp_dir("annotations-www-https");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: site, namespace: shop }}\ntype: kubernetes.io/tls\n\
         data:\n  tls.crt: {}\n  tls.key: {}\n",
        b64("site.crt"),
        b64("site.key")
    ));
    text.push_str(&format!(
        "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: www\n  namespace: shop\n  \
         annotations: {{ {NGINX}/from-to-www-redirect: \"true\" }}\nspec:\n  ingressClassName: ramjet\n  \
         tls: [{{ hosts: [fromtowww.test, www.fromtowww.test], secretName: site }}]\n  rules:\n  - host: fromtowww.test\n    \
         http: {{ paths: [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: a, port: {{ number: 80 }} }} }} }}] }}\n"
    ));
    let d = start(&dir, &text);
    let port = d.https_addr().expect("an HTTPS listener").port();
    let head = |name: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sk", "--http1.1", "--max-time", "10", "-o", "/dev/null", "-D", "-"])
            .args(["--resolve", &format!("{name}:{port}:127.0.0.1")])
            .arg(format!("https://{name}:{port}/"))
            .output()
            .expect("curl is installed");
        String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
    };
    let www = head("www.fromtowww.test");
    assert!(www.starts_with("http/1.1 308"), "{www}");
    assert!(www.contains(&format!("\r\nlocation: https://fromtowww.test:{port}\r\n")), "{www}");
    let bare = head("fromtowww.test");
    assert!(bare.starts_with("http/1.1 200"), "{bare}");
    d.shutdown();
}

/// ingress-nginx's `--default-backend-service` (test/e2e/defaultbackend/custom_default_backend.go)
/// and its ConfigMap's `custom-http-errors` (test/e2e/annotations/customhttperrors.go), as the
/// controller configuration's `default-backend-service` and `custom-http-errors`: the Service
/// answers requests no Ingress matches (any host, or a path no rule of a known host takes), the
/// statuses an Ingress lists without `default-backend` of its own, the configuration's statuses
/// for Ingresses that list none, and backends without endpoints (`X-Code: 503`); an Ingress's own
/// `default-backend` still comes first. A Service that does not exist is reported, and what no
/// Ingress matches answers 404 again.
#[test]
fn the_controller_default_backend_answers_what_no_ingress_takes() {
    let dir = temp_dir("annotations-controller-default-backend");
    let config_dir = temp_dir("annotations-controller-default-backend-config");
    let config = config_dir.join("config.yaml");
    std::fs::write(&config, "default-backend-service: shop/errors\ncustom-http-errors: \"503\"\n").unwrap();
    let (a, b, errors) = (Backend::start("a"), Backend::start("b"), Backend::start("errors"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&service("shop", "errors", errors.addr));
    text.push_str(&Service::new("shop", "none").yaml());
    let cases = [
        ("listed", format!("{NGINX}/custom-http-errors: \"404\""), "/", "a"),
        ("global", String::new(), "/", "a"),
        ("empty", String::new(), "/", "none"),
        ("own", format!("{NGINX}/custom-http-errors: \"404\", {NGINX}/default-backend: b"), "/", "a"),
        ("known", String::new(), "/app", "a"),
    ];
    for (name, annotations, path, service) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &[(path, "Prefix", service)]));
    }
    let d = start_with(&dir, &text, |c| {
        let mut file = ramjet::ConfigFile::read(&config).expect("the configuration reads");
        file.interval = Duration::from_millis(20);
        c.config = Some(file);
    });
    let addr = d.http_addr();

    // custom_default_backend.go: GET / without a host of any Ingress is the Service's 200.
    let r = get(addr, "127.0.0.1", "/");
    assert_eq!((r.status, seen(&r)), (200, ("errors".to_string(), "/".to_string())), "{r:?}");
    assert_eq!(seen(&get(addr, "known.test", "/other")).0, "errors", "a path no rule takes");
    assert_eq!(seen(&get(addr, "known.test", "/app")).0, "a");

    let page = get(addr, "listed.test", "/nobody/404");
    assert_eq!(seen(&page), ("errors".to_string(), "/".to_string()), "{page:?}");
    assert_eq!(header_seen(&page, "x-code").as_deref(), Some("404"));
    assert_eq!(header_seen(&page, "x-ingress-name").as_deref(), Some("listed"));
    assert_eq!(get(addr, "listed.test", "/nobody/503").status, 503, "the Ingress's list replaces the configuration's");
    let page = get(addr, "global.test", "/nobody/503");
    assert_eq!((seen(&page).0, header_seen(&page, "x-code")), ("errors".to_string(), Some("503".to_string())));
    assert_eq!(get(addr, "global.test", "/nobody/404").status, 404, "a status not listed passes through");
    let page = get(addr, "empty.test", "/some/path");
    assert_eq!(seen(&page), ("errors".to_string(), "/some/path".to_string()), "{page:?}");
    assert_eq!(header_seen(&page, "x-code").as_deref(), Some("503"));
    assert_eq!(seen(&get(addr, "own.test", "/nobody/404")).0, "b", "the Ingress's own default-backend first");

    // The Service goes away from the configuration: reported, and 404 for what no Ingress takes.
    std::fs::write(&config, "default-backend-service: shop/missing\n").unwrap();
    assert!(support::eventually(Duration::from_secs(10), || get(addr, "127.0.0.1", "/").status == 404));
    let generation = d.published.current();
    assert!(
        generation.diagnostics.iter().any(|p| p.object.name == "missing" && p.message.contains("default backend")),
        "{:?}",
        generation.diagnostics
    );
    assert_eq!(get(addr, "global.test", "/nobody/503").status, 503, "the statuses pass through");
    d.shutdown();
}

/// test/e2e/annotations/serviceupstream.go: with `service-upstream: "true"` requests go to the
/// Service's cluster IP and port, not to its endpoints; the controller configuration's
/// `service-upstream` does it for every Ingress but one that says `"false"`. A headless Service
/// keeps its endpoints, with a warning.
#[test]
fn service_upstream_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-service-upstream");
    let config_dir = temp_dir("annotations-service-upstream-config");
    let config = config_dir.join("config.yaml");
    std::fs::write(&config, "proxy-body-size: 1m\n").unwrap();
    // The cluster IP's port is where `cluster` listens; the Service's endpoint is `pod`.
    let (cluster, pod) = (Backend::start("cluster"), Backend::start("pod"));
    let port = cluster.addr.port();
    let echo = Service::new("shop", "echo").port("http", port).cluster_ip("127.0.0.1").endpoints(&[pod.addr]);
    let headless = Service::new("shop", "headless").port("http", port).cluster_ip("None").endpoints(&[pod.addr]);
    let mut text = [ingress_class("ramjet"), echo.yaml(), headless.yaml()].concat();
    let on = format!("{NGINX}/service-upstream: \"true\"");
    let off = format!("{NGINX}/service-upstream: \"false\"");
    for (name, annotations, service) in
        [("on", &on, "echo"), ("plain", &String::new(), "echo"), ("off", &off, "echo"), ("headless", &on, "headless")]
    {
        let ingress = Ingress::new("shop", name).host(&format!("{name}.test")).port_number(port);
        text.push_str(&ingress.annotations_yaml(annotations).to(service).yaml());
    }
    let d = start_with(&dir, &text, |c| {
        let mut file = ramjet::ConfigFile::read(&config).expect("the configuration reads");
        file.interval = Duration::from_millis(20);
        c.config = Some(file);
    });
    let addr = d.http_addr();
    let served = |name: &str| seen(&get(addr, &format!("{name}.test"), "/")).0;
    assert_eq!(served("on"), "cluster");
    assert_eq!(served("plain"), "pod");
    assert_eq!(served("off"), "pod");
    assert_eq!(served("headless"), "pod", "a headless Service keeps its endpoints");
    let generation = d.published.current();
    assert!(generation
        .diagnostics
        .iter()
        .any(|p| p.object.name == "headless" && p.message.contains("has no cluster IP")));

    // In the controller configuration: every Ingress but the one that says "false".
    std::fs::write(&config, "service-upstream: \"true\"\n").unwrap();
    assert!(support::eventually(Duration::from_secs(10), || served("plain") == "cluster"));
    assert_eq!(served("on"), "cluster");
    assert_eq!(served("off"), "pod");
    d.shutdown();
}

/// test/e2e/annotations/enableaccesslog.go: with `enable-access-log: "false"` the Ingress's
/// requests leave no access-log record, over HTTP/1.1 and HTTP/2, while every other Ingress's do.
#[test]
fn enable_access_log_behaves_as_in_ingress_nginx() {
    use ramjet_dataplane::access_log::{Destination, Format};
    let dir = temp_dir("annotations-access-log");
    let log = temp_dir("annotations-access-log-file").join("access.log");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress(
        "quiet",
        "quiet.test",
        &format!("{NGINX}/enable-access-log: \"false\""),
        &[("/", "Prefix", "a")],
    ));
    text.push_str(&ingress(
        "loud",
        "loud.test",
        &format!("{NGINX}/enable-access-log: \"true\""),
        &[("/", "Prefix", "a")],
    ));
    let d = start_with(&dir, &text, |c| {
        c.access_log = Some(ramjet_dataplane::AccessLogSettings::new(Destination::File(log.clone()), Format::Json));
    });
    let addr = d.http_addr();
    assert_eq!(get(addr, "quiet.test", "/quiet-1").status, 200);
    assert_eq!(get(addr, "loud.test", "/loud-1").status, 200);
    let mut h2 = h2client::H2Client::connect(addr);
    assert_eq!(h2.get("quiet.test", "/quiet-2").status, 200);
    assert_eq!(h2.get("loud.test", "/loud-2").status, 200);
    drop(h2);
    let logged = || std::fs::read_to_string(&log).unwrap_or_default();
    assert!(support::eventually(Duration::from_secs(10), || logged().contains("/loud-2")), "{}", logged());
    d.shutdown();
    let text = logged();
    assert!(text.contains("/loud-1"), "{text}");
    assert!(!text.contains("/quiet"), "{text}");
}

/// test/e2e/annotations/proxy.go "should set proxy_redirect to hello.com goodbye.com" and
/// "should setup proxy cookies", as nginx's `proxy_redirect`, `proxy_cookie_domain` and
/// `proxy_cookie_path` behave: a backend's `Location` starting with `hello.com` starts with
/// `goodbye.com`, a `Set-Cookie` for `localhost` is for `example.org`, a path under `/one/` loses
/// that prefix; other fields, and other Ingresses' answers, are untouched. HTTP/2 clients alike.
#[test]
fn proxy_redirect_and_cookie_rewrites_behave_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-proxy-rewrites");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let rewrites = format!(
        "{NGINX}/proxy-redirect-from: hello.com, {NGINX}/proxy-redirect-to: goodbye.com, \
         {NGINX}/proxy-cookie-domain: \"localhost example.org\", {NGINX}/proxy-cookie-path: \"/one/ /\""
    );
    text.push_str(&ingress("rewrites", "rewrites.test", &rewrites, &[("/", "Prefix", "a")]));
    text.push_str(&ingress("plain", "plain.test", "", &[("/", "Prefix", "a")]));
    text.push_str(&ingress(
        "off",
        "off.test",
        &format!("{NGINX}/proxy-redirect-from: \"off\""),
        &[("/", "Prefix", "a")],
    ));
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let echo =
        "X-Echo-Set-Header: Location:hello.com/next?x=1,Set-Cookie:sid=1; Domain=.localhost; Path=/one/two; HttpOnly,\
                Refresh:5; url=hello.com/later\r\n";
    let ask = |host: &str| request(addr, &format!("GET / HTTP/1.1\r\nHost: {host}\r\n{echo}connection: close\r\n\r\n"));
    let r = ask("rewrites.test");
    assert_eq!(r.header("location"), Some("goodbye.com/next?x=1"), "{}", r.head);
    assert_eq!(r.header("set-cookie"), Some("sid=1; Domain=example.org; Path=/two; HttpOnly"), "{}", r.head);
    assert_eq!(r.header("refresh"), Some("5; url=goodbye.com/later"), "{}", r.head);
    for host in ["plain.test", "off.test"] {
        let r = ask(host);
        assert_eq!(r.header("location"), Some("hello.com/next?x=1"), "{host}: {}", r.head);
        assert_eq!(r.header("set-cookie"), Some("sid=1; Domain=.localhost; Path=/one/two; HttpOnly"), "{host}");
    }
    let mut h2 = h2client::H2Client::connect(addr);
    let echo =
        [("x-echo-set-header", "Location:hello.com/h2,Set-Cookie:a=1; Path=/one/,Set-Cookie:b=2; Domain=localhost")];
    let r = h2.request("GET", "rewrites.test", "/", &echo, b"", true).unwrap();
    assert_eq!(r.header("location"), Some("goodbye.com/h2"));
    let cookies: Vec<&str> = r.headers.get_all("set-cookie").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(cookies, ["a=1; Path=/", "b=2; Domain=example.org"]);
    d.shutdown();
}

/// test/e2e/annotations/satisfy.go "should allow multiple auth with satisfy any" and nginx's
/// `satisfy any`: basic authentication alone lets a client in where auth-url would refuse it; one
/// that passes neither gets auth-url's answer (the sign-in redirect); a source range the client is
/// in lets it in without credentials, one it is not in leaves it to authentication. Without
/// `satisfy: any` every check must pass.
#[test]
fn satisfy_any_behaves_as_in_ingress_nginx() {
    let dir = temp_dir("annotations-satisfy");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let auth = AuthServer::start();
    let mut text = services(a.addr, b.addr);
    text.push_str(&service_of("auth", &[auth.addr]));
    text.push_str(&secret("basic", "auth: \"foo:$apr1$Qw3rTy12$ToV8Fflyor2TzTiUbMX9G.\\n\""));
    let basic_auth = format!("{NGINX}/auth-type: basic, {NGINX}/auth-secret: basic, {NGINX}/auth-realm: test");
    let external = format!(
        "{NGINX}/auth-url: \"http://auth.shop.svc.cluster.local/verify\", {NGINX}/auth-signin: \"http://$host/auth/start\""
    );
    let cases = [
        ("any", format!("{basic_auth}, {external}, {NGINX}/satisfy: any")),
        ("all", format!("{basic_auth}, {external}")),
        ("inside", format!("{basic_auth}, {NGINX}/whitelist-source-range: 127.0.0.0/8, {NGINX}/satisfy: any")),
        ("outside", format!("{basic_auth}, {NGINX}/whitelist-source-range: 10.0.0.0/8, {NGINX}/satisfy: any")),
        ("fenced", format!("{basic_auth}, {NGINX}/whitelist-source-range: 10.0.0.0/8")),
    ];
    for (name, annotations) in &cases {
        text.push_str(&ingress(name, &format!("{name}.test"), annotations, &[("/", "Prefix", "a")]));
    }
    let d = start(&dir, &text);
    let addr = d.http_addr();
    let ask = |host: &str, target: &str, extra: &str| {
        request(addr, &format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}connection: close\r\n\r\n"))
    };
    let creds = format!("authorization: {}\r\n", basic("foo:bar"));

    let asked = auth.asked();
    assert_eq!(seen(&ask("any.test", "/", &creds)).0, "a", "basic authentication alone is enough");
    assert_eq!(auth.asked(), asked, "the service is not asked once basic authentication passed");
    let r = ask("any.test", "/?a=b&c=d", "");
    assert_eq!(
        (r.status, r.header("location")),
        (302, Some("http://any.test/auth/start?rd=http://any.test%2F%3Fa%3Db%26c%3Dd"))
    );
    assert_eq!(seen(&ask("any.test", "/", "cookie: session=good\r\n")).0, "a", "auth-url alone is enough");
    // Without satisfy any: basic passes, then auth-url refuses (401 → sign-in).
    assert_eq!(ask("all.test", "/", &creds).status, 302);

    assert_eq!(seen(&ask("inside.test", "/", "")).0, "a", "the source range alone is enough");
    assert_eq!(ask("outside.test", "/", "").status, 401);
    assert_eq!(seen(&ask("outside.test", "/", &creds)).0, "a", "outside the range, credentials let it in");
    assert_eq!(ask("fenced.test", "/", &creds).status, 403, "without satisfy any the range must pass too");
    d.shutdown();
}

/// test/e2e/annotations/rewrite.go "should write rewrite logs": with `enable-rewrite-log: "true"`
/// each rewrite is logged as nginx's `rewrite_log` writes it (the daemon's log, text format);
/// another Ingress's rewrites are not.
#[test]
fn enable_rewrite_log_behaves_as_in_ingress_nginx() {
    use std::io::Read;
    let dir = temp_dir("annotations-rewrite-log");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    let logged = format!("{NGINX}/rewrite-target: /, {NGINX}/enable-rewrite-log: \"true\"");
    text.push_str(&ingress("logged", "logged.test", &logged, &[("/something", "Prefix", "a")]));
    text.push_str(&ingress("quiet", "quiet.test", &format!("{NGINX}/rewrite-target: /"), &[("/other", "Prefix", "a")]));
    std::fs::write(dir.join("app.yaml"), text).unwrap();
    let http = SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let admin = SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let https = SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .arg("--manifests")
        .arg(&dir)
        .args(["--workers", "1", "--io-driver", "auto", "--log-format", "text"])
        .args(["--http-addr", &http.to_string(), "--admin-addr", &admin.to_string()])
        .args(["--https-addr", &https.to_string()])
        .env("RAMJET_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let listening = || std::net::TcpStream::connect(http).is_ok();
    assert!(support::eventually(Duration::from_secs(20), listening), "the daemon listens");
    let served = || get(http, "logged.test", "/something").status == 200;
    assert!(support::eventually(Duration::from_secs(20), served), "the daemon serves");
    assert_eq!(seen(&get(http, "logged.test", "/something?x=1")), ("a".to_string(), "/?x=1".to_string()));
    assert_eq!(seen(&get(http, "quiet.test", "/other")).1, "/");
    let _ = child.kill();
    let mut log = String::new();
    child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    let _ = child.wait();
    assert!(log.contains("\"(?i)/something\" matches \"/something\", rewritten data: \"/\""), "{log}");
    assert!(log.contains("args: \"x=1\""), "{log}");
    assert!(!log.contains("(?i)/other"), "the other Ingress's rewrites are not logged: {log}");
}

/// test/e2e/defaultbackend/default_backend.go "enables/disables access logging for default
/// backend": with a controller configuration, requests no Ingress matches (a 404, or the
/// controller's default backend) are logged only with `enable-access-log-for-default-backend:
/// "true"`; an Ingress's requests are logged either way. Without a configuration, ramjet logs them.
#[test]
fn the_default_backends_access_log_switch_behaves_as_in_ingress_nginx() {
    use ramjet_dataplane::access_log::{Destination, Format};
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut text = services(a.addr, b.addr);
    text.push_str(&ingress("app", "app.test", "", &[("/app", "Prefix", "a")]));
    for (config, logged) in [
        (Some("proxy-body-size: 1m\n"), false),
        (Some("enable-access-log-for-default-backend: \"true\"\n"), true),
        (Some("default-backend-service: shop/b\n"), false),
        (None, true),
    ] {
        let dir = temp_dir("annotations-default-backend-log");
        let log = dir.join("access.log");
        let manifests = dir.join("objects");
        std::fs::create_dir_all(&manifests).unwrap();
        let d = start_with(&manifests, &text, |c| {
            c.access_log = Some(ramjet_dataplane::AccessLogSettings::new(Destination::File(log.clone()), Format::Json));
            if let Some(config) = config {
                let file = dir.join("config.yaml");
                std::fs::write(&file, config).unwrap();
                c.config = Some(ramjet::ConfigFile::read(&file).expect("the configuration reads"));
            }
        });
        let addr = d.http_addr();
        let unmatched = get(addr, "bar.test", "/somethingTwo");
        assert!(unmatched.status == 404 || seen(&unmatched).0 == "b", "{config:?}: {unmatched:?}");
        assert_eq!(get(addr, "app.test", "/app").status, 200);
        let written = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(support::eventually(Duration::from_secs(10), || written().contains("/app")), "{}", written());
        d.shutdown();
        assert_eq!(written().contains("/somethingTwo"), logged, "{config:?}: {}", written());
    }
}
