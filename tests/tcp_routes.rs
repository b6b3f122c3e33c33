//! TCP and UDP routes (Layer 4) over real sockets, on both I/O drivers: a static routes file's
//! `tcp:` and `udp:` entries and a Gateway's `TCP` and `UDP` listeners with their TCPRoute and
//! UDPRoute (`--manifests`), relayed to backends that greet with their name and echo what they read
//! (until the client half-closes, for TCP; a datagram for a datagram, for UDP).
//!
//! What a user sees: bytes arrive whole and in order both ways, a half-close reaches the backend
//! (so protocols that end a request with EOF work), weights split connections, and a port opens
//! and closes with the generation that has it — a rollback brings it back — while established
//! relays and the HTTP listener carry on.

use ramjet_test_support as support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ramjet::Daemon;
use support::backend::Backend;
use support::client::{get, request};
use support::echo::{udp_echo, EchoBackend};
use support::manifests::Service;
use support::{daemon_with, eventually, free_port, manifests_daemon, routes_in, temp_dir, DRIVERS, GATEWAY_CLASS};

/// Connects to `port`, reads the greeting, sends `payload` (from another thread, while the echo
/// comes back), half-closes, and reads to EOF: the backend's name and what came back.
fn exchange(port: u16, payload: &[u8]) -> std::io::Result<(String, Vec<u8>)> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut name = String::new();
    reader.read_line(&mut name)?;
    let mut writer = stream.try_clone()?;
    let sent = payload.to_vec();
    let sender = std::thread::spawn(move || {
        writer.write_all(&sent)?;
        writer.shutdown(Shutdown::Write)
    });
    let mut echoed = Vec::new();
    reader.read_to_end(&mut echoed)?;
    sender.join().unwrap()?;
    Ok((name.trim().to_string(), echoed))
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn a_static_tcp_route_relays_both_ways_with_half_close_and_splits_by_weight() {
    let (a, b) = (EchoBackend::start("a"), EchoBackend::start("b"));
    let http = Backend::start("web");
    for driver in DRIVERS {
        let (one, split) = (free_port(), free_port());
        let yaml = format!(
        "backends:\n  a: {{ endpoints: [\"{}\"] }}\n  b: {{ endpoints: [\"{}\"] }}\n  web: {{ endpoints: [\"{}\"] }}\n\
         routes:\n  - {{ host: web.test, path: /, backend: web }}\n\
         tcp:\n  - {{ port: {one}, backend: a }}\n  - {{ port: {split}, backends: [{{ name: a, weight: 3 }}, {{ name: b, weight: 1 }}] }}\n",
        a.addr, b.addr, http.addr
    );
        let d = daemon_with(routes_in(&yaml, Path::new(".")), driver, |c| c.workers = 2);
        assert!(
            eventually(Duration::from_secs(10), || exchange(one, b"hi").is_ok()),
            "{driver:?}: port {one} never opened"
        );
        // A megabyte each way, sent while the echo comes back; then the half-close reaches the
        // backend, which closes, which reaches the client.
        let sent = payload(1 << 20);
        let (name, echoed) = exchange(one, &sent).unwrap();
        assert_eq!(name, "a", "{driver:?}");
        assert!(echoed == sent, "{driver:?}: {} bytes came back of {}", echoed.len(), sent.len());
        // 400 connections at weights 3:1: 100 expected on b, σ ≈ 8.7; outside 55..=145 about
        // once in 10⁷ runs.
        let on_b = (0..400).filter(|_| exchange(split, b"x").unwrap().0 == "b").count();
        assert!((55..=145).contains(&on_b), "{driver:?}: {on_b} of 400 on b at weight 1 of 4");
        // HTTP is served beside it as ever.
        assert_eq!(get(d.http_addr(), "web.test", "/").status, 200, "{driver:?}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
    assert!(b.connections.load(Ordering::SeqCst) > 0);
}

#[test]
fn a_static_tcp_route_is_checked_where_it_is_written() {
    let bad = [
        ("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\ntcp:\n  - { port: 0, backend: a }\n", "tcp[0].port", "0 is not a port"),
        ("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\ntcp:\n  - { port: 9000, backend: nope }\n", "tcp[0].backend", "unknown backend `nope`"),
        ("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\ntcp:\n  - { port: 9000 }\n", "tcp[0].backend", "exactly one of `backend`"),
        ("backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\ntcp:\n  - { port: 9000, backends: [{ name: a, weight: 0 }] }\n", "tcp[0].backends", "every weight is 0"),
    ];
    for (yaml, field, words) in bad {
        let e = ramjet_control::routes_file::parse(yaml, Path::new("."), "r.yaml").expect_err(yaml).to_string();
        assert!(e.contains("r.yaml") && e.contains(field) && e.contains(words), "{e}");
        assert!(e.starts_with("r.yaml:4:"), "the error names the line: {e}");
    }
}

fn gateway_with_tcp(port: u16) -> String {
    format!(
        "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: db }}\nspec:\n  gatewayClassName: ramjet\n  listeners:\n    - {{ name: http, port: 80, protocol: HTTP }}\n    - {{ name: pg, port: {port}, protocol: TCP }}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {{ name: pg, namespace: db }}\nspec:\n  parentRefs: [{{ name: edge, sectionName: pg }}]\n  rules: [{{ backendRefs: [{{ name: pg, port: 5432 }}] }}]\n"
    )
}

fn write(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(temporary, path).unwrap();
}

fn admin(d: &Daemon, method: &str, path: &str, body: &str) -> u16 {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    request(d.admin_addr(), &head).status
}

#[test]
fn a_gateway_tcp_listener_opens_and_closes_with_its_generation_and_a_rollback_brings_it_back() {
    let pg = EchoBackend::start("pg");
    let web = Backend::start("web");
    for driver in DRIVERS {
        let port = free_port();
        let dir = temp_dir("tcp-gateway");
        let file = dir.join("all.yaml");
        let services = format!(
            "---\n{}---\n{}",
            Service::new("db", "pg").port("pg", 5432).endpoints(&[pg.addr]).yaml(),
            Service::new("db", "web").endpoints(&[web.addr]).yaml()
        );
        let http_route = "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: { name: web, namespace: db }\nspec:\n  parentRefs: [{ name: edge, sectionName: http }]\n  hostnames: [web.test]\n  rules: [{ backendRefs: [{ name: web, port: 80 }] }]\n";
        // A second TCP listener that stays, on a Gateway of its own.
        let steady = free_port();
        let steady_gateway = format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: steady, namespace: db }}\nspec:\n  gatewayClassName: ramjet\n  listeners: [{{ name: pg, port: {steady}, protocol: TCP }}]\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {{ name: steady, namespace: db }}\nspec:\n  parentRefs: [{{ name: steady, sectionName: pg }}]\n  rules: [{{ backendRefs: [{{ name: pg, port: 5432 }}] }}]\n"
        );
        let with_tcp = format!("{GATEWAY_CLASS}{}{steady_gateway}{services}{http_route}", gateway_with_tcp(port));
        write(&file, &with_tcp);
        let d = manifests_daemon(&dir, driver, 2);
        assert!(
            eventually(Duration::from_secs(10), || exchange(port, b"x").is_ok()),
            "{driver:?}: the TCP listener never opened"
        );
        let (name, echoed) = exchange(port, b"select 1").unwrap();
        assert_eq!((name.as_str(), echoed.as_slice()), ("pg", &b"select 1"[..]), "{driver:?}");
        let with_tcp_generation = d.published.current().number;

        assert!(eventually(Duration::from_secs(10), || exchange(steady, b"x").is_ok()), "{driver:?}: steady");

        // HTTP requests and connections to the other TCP port all along, counted: none may fail
        // while the TCP listener comes and goes.
        let stop = Arc::new(AtomicBool::new(false));
        let failures = Arc::new(AtomicUsize::new(0));
        let tcp_prober = {
            let (stop, failures) = (stop.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut sent = 0;
                while !stop.load(Ordering::SeqCst) {
                    match exchange(steady, b"steady") {
                        Ok((name, echoed)) if name == "pg" && echoed == b"steady" => {}
                        _ => {
                            failures.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    sent += 1;
                }
                sent
            })
        };
        let prober = {
            let (stop, failures, http) = (stop.clone(), failures.clone(), d.http_addr());
            std::thread::spawn(move || {
                let mut sent = 0;
                while !stop.load(Ordering::SeqCst) {
                    if get(http, "web.test", "/").status != 200 {
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                    sent += 1;
                }
                sent
            })
        };

        // An established relay, then the listener removed: the port refuses new connections and
        // the relay goes on.
        let mut held = TcpStream::connect(("127.0.0.1", port)).unwrap();
        held.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut greeting = [0u8; 3];
        held.read_exact(&mut greeting).unwrap();
        let without_tcp = with_tcp.replace(&format!("    - {{ name: pg, port: {port}, protocol: TCP }}\n"), "");
        write(&file, &without_tcp);
        assert!(
            eventually(Duration::from_secs(10), || TcpStream::connect(("127.0.0.1", port)).is_err()),
            "{driver:?}: the port stayed open without its listener"
        );
        held.write_all(b"still here").unwrap();
        let mut echoed = [0u8; 10];
        held.read_exact(&mut echoed).unwrap();
        assert_eq!(&echoed, b"still here", "{driver:?}: the established relay was cut");
        drop(held);

        // A rollback to the generation that had it opens the port again; releasing closes it.
        assert_eq!(admin(&d, "POST", "/admin/rollback", &format!("{{\"generation\": {with_tcp_generation}}}")), 200);
        assert!(
            eventually(Duration::from_secs(10), || exchange(port, b"x").is_ok()),
            "{driver:?}: the rollback did not reopen the port"
        );
        assert_eq!(admin(&d, "DELETE", "/admin/rollback", ""), 200);
        assert!(
            eventually(Duration::from_secs(10), || TcpStream::connect(("127.0.0.1", port)).is_err()),
            "{driver:?}: releasing the pin did not close the port"
        );

        stop.store(true, Ordering::SeqCst);
        let (sent, relayed) = (prober.join().unwrap(), tcp_prober.join().unwrap());
        assert!(sent > 10 && relayed > 10, "{driver:?}: only {sent} HTTP requests and {relayed} relays were made");
        assert_eq!(
            failures.load(Ordering::SeqCst),
            0,
            "{driver:?}: HTTP requests or relays on the other port failed while a TCP listener changed"
        );
        d.shutdown();
    }
}

#[test]
fn a_static_udp_route_relays_flows_and_answers_from_its_port() {
    let (a, b) = (udp_echo("a"), udp_echo("b"));
    for driver in DRIVERS {
        let port = free_port();
        let yaml = format!(
            "backends:\n  a: {{ endpoints: [\"{a}\"] }}\n  b: {{ endpoints: [\"{b}\"] }}\n\
             udp:\n  - {{ port: {port}, backends: [{{ name: a, weight: 1 }}, {{ name: b, weight: 1 }}] }}\n"
        );
        let d = daemon_with(routes_in(&yaml, Path::new(".")), driver, |c| c.workers = 2);
        let ask = |client: &std::net::UdpSocket, payload: &[u8]| -> Option<(String, SocketAddr)> {
            client.send_to(payload, ("127.0.0.1", port)).ok()?;
            let mut buf = vec![0u8; 65_535];
            let (n, from) = client.recv_from(&mut buf).ok()?;
            Some((String::from_utf8_lossy(&buf[..n]).to_string(), from))
        };
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        assert!(eventually(Duration::from_secs(10), || ask(&client, b"ping").is_some()), "{driver:?}: no answer");
        // A flow stays with its backend, and its answers come from the route's port.
        let (first, from) = ask(&client, b"hello").unwrap();
        assert_eq!(from.port(), port, "{driver:?}");
        let backend = &first[..2];
        assert_eq!(first, format!("{backend}hello"), "{driver:?}");
        for i in 0..20 {
            assert_eq!(ask(&client, format!("n{i}").as_bytes()).unwrap().0, format!("{backend}n{i}"), "{driver:?}");
        }
        // A large datagram arrives whole.
        let big = vec![b'x'; 60_000];
        assert_eq!(ask(&client, &big).unwrap().0.len(), 60_002, "{driver:?}");
        // 4,000 flows (a socket each), opened 200 at a time: every one answered, split over both
        // backends. (All at once, a burst overflows the port's receive buffer and datagrams are
        // lost, as UDP allows.)
        let clients: Vec<std::net::UdpSocket> =
            (0..4_000).map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).collect();
        let mut on = std::collections::BTreeMap::new();
        for (batch, group) in clients.chunks(200).enumerate() {
            for (j, c) in group.iter().enumerate() {
                c.send_to(format!("f{}", batch * 200 + j).as_bytes(), ("127.0.0.1", port)).unwrap();
            }
            for (j, c) in group.iter().enumerate() {
                let i = batch * 200 + j;
                c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let mut buf = [0u8; 64];
                let (n, _) = c.recv_from(&mut buf).unwrap_or_else(|e| panic!("{driver:?}: flow {i} unanswered: {e}"));
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                assert!(text.ends_with(&format!(":f{i}")), "{driver:?}: {text}");
                *on.entry(text[..1].to_string()).or_insert(0) += 1;
            }
        }
        // 2,000 expected on each, σ ≈ 32: outside 1,800..=2,200 about once in 10¹⁰ runs.
        assert!(on.values().all(|n| (1_800..=2_200).contains(n)), "{driver:?}: {on:?}");
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        d.shutdown();
    }
}

#[test]
fn a_gateway_udp_listener_relays_its_udproutes_flows() {
    let dns = udp_echo("dns");
    for driver in DRIVERS {
        let port = free_port();
        let dir = temp_dir("udp-gateway");
        let manifests = format!(
            "{GATEWAY_CLASS}---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: net }}\nspec:\n  gatewayClassName: ramjet\n  listeners:\n    - {{ name: dns, port: {port}, protocol: UDP }}\n    - {{ name: dns-tcp, port: {port}, protocol: TCP }}\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {{ name: dns, namespace: net }}\nspec:\n  parentRefs: [{{ name: edge, sectionName: dns }}]\n  rules: [{{ backendRefs: [{{ name: dns, port: 53 }}] }}]\n---\n{}",
            Service::new("net", "dns").port("dns", 53).endpoints(&[dns]).yaml()
        );
        std::fs::write(dir.join("all.yaml"), manifests).unwrap();
        let d = manifests_daemon(&dir, driver, 2);
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let ask = |payload: &[u8]| -> Option<String> {
            client.send_to(payload, ("127.0.0.1", port)).ok()?;
            let mut buf = [0u8; 512];
            let (n, _) = client.recv_from(&mut buf).ok()?;
            Some(String::from_utf8_lossy(&buf[..n]).to_string())
        };
        assert!(eventually(Duration::from_secs(10), || ask(b"q").is_some()), "{driver:?}: no answer");
        assert_eq!(ask(b"query").as_deref(), Some("dns:query"), "{driver:?}");
        // The TCP listener on the same port number has no route: that port is not opened.
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err(), "{driver:?}");
        d.shutdown();
    }
}

#[test]
fn idle_tcp_relays_are_closed_and_an_active_one_beside_them_is_not() {
    let db = EchoBackend::start("db");
    for driver in DRIVERS {
        let port = free_port();
        let yaml =
            format!("backends:\n  db: {{ endpoints: [\"{}\"] }}\ntcp:\n  - {{ port: {port}, backend: db }}\n", db.addr);
        let d = daemon_with(routes_in(&yaml, Path::new(".")), driver, |c| {
            c.workers = 1;
            c.settings.tcp_idle_timeout = Duration::from_secs(1);
        });
        assert!(eventually(Duration::from_secs(10), || exchange(port, b"x").is_ok()), "{driver:?}");
        // A slowloris: 50 connections that read the greeting and then send nothing.
        let idle: Vec<TcpStream> = (0..50)
            .map(|_| {
                let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut greeting = [0u8; 3];
                s.read_exact(&mut greeting).unwrap();
                s
            })
            .collect();
        // Beside them, a client that keeps talking, every 300 ms, for 3 s.
        let mut active = TcpStream::connect(("127.0.0.1", port)).unwrap();
        active.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut greeting = [0u8; 3];
        active.read_exact(&mut greeting).unwrap();
        for i in 0..10 {
            std::thread::sleep(Duration::from_millis(300));
            let word = format!("w{i}");
            active.write_all(word.as_bytes()).unwrap();
            let mut echo = vec![0u8; word.len()];
            active.read_exact(&mut echo).unwrap_or_else(|e| panic!("{driver:?}: the active relay was cut at {i}: {e}"));
            assert_eq!(echo, word.as_bytes(), "{driver:?}");
        }
        // The idle ones were closed after about a second of silence: each reads EOF.
        for (i, mut s) in idle.into_iter().enumerate() {
            let mut rest = Vec::new();
            assert_eq!(
                s.read_to_end(&mut rest).map(|_| rest.len()).ok(),
                Some(0),
                "{driver:?}: idle relay {i} is still open"
            );
        }
        d.shutdown();
    }
}
