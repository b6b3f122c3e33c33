//! HTTP/2 downstream over real sockets: h2c by prior knowledge and ALPN h2 on TLS with curl, the
//! same routing, answers, headers and generation semantics as HTTP/1.1 (with the h2 crate as the
//! client), bodies both ways, many streams on one connection, and the known HTTP/2 attacks, each
//! showing that another client of the same worker keeps being served and memory stays bounded.
//! Every test runs once per I/O driver (io_uring, then epoll).

use ramjet_test_support as support;
use ramjet_test_support::h2client;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use h2client::{frame, hpack_indexed_literal, hpack_int, request_block, rss_kib, H2Client, RawH2};
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::{daemon_with, dead_addr, routes, routes_in, DRIVERS};

fn each_driver(test: impl Fn(IoDriver)) {
    for driver in DRIVERS {
        test(driver);
    }
}

/// Routes like tests/proxy.rs's, plus failing backends and a configured answer.
fn config(a: &Backend, b: &Backend) -> String {
    format!(
        r#"
backends:
  a: {{ endpoints: ["{a}"] }}
  b: {{ endpoints: ["{b}"] }}
  dead: {{ endpoints: ["{dead}"] }}
  empty: {{ endpoints: [] }}
  hello: {{ respond: {{ status: 200, body: "hello\n" }} }}
routes:
  - {{ host: example.com, path: /api, pathType: Prefix, backend: a }}
  - {{ host: example.com, path: /api/v2/, pathType: Prefix, backend: b }}
  - {{ host: "*.example.com", path: /, pathType: Prefix, backend: b }}
  - {{ path: /dead, backend: dead }}
  - {{ path: /empty, backend: empty }}
  - {{ path: /hello, pathType: Exact, backend: hello }}
  - {{ path: /, pathType: Prefix, backend: a }}
"#,
        a = a.addr,
        b = b.addr,
        dead = dead_addr()
    )
}

fn served_by(text: &str) -> &str {
    text.lines().find_map(|l| l.strip_prefix("backend=")).unwrap_or("?")
}

fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("curl").args(["-sS", "--max-time", "20"]).args(args).output().expect("curl is installed");
    assert!(out.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, meta) = text.rsplit_once('\n').unwrap_or(("", &text));
    (body.to_string(), meta.to_string())
}

#[test]
fn curl_speaks_h2c_by_prior_knowledge_and_http1_still_works_on_the_same_port() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    each_driver(|driver| {
        let d = daemon_with(routes(&config(&a, &b)), driver, |_| {});
        let base = format!("http://{}", d.http_addr());
        let w = "\n%{http_code} %{http_version}";
        let (body, meta) = curl(&["--http2-prior-knowledge", "-w", w, &format!("{base}/hello")]);
        assert_eq!((body.as_str(), meta.as_str()), ("hello\n", "200 2"), "{driver:?}");
        let (body, meta) =
            curl(&["--http2-prior-knowledge", "-w", w, "-H", "Host: example.com", &format!("{base}/api/x")]);
        assert_eq!((served_by(&body), meta.as_str()), ("a", "200 2"), "{driver:?}: {body}");
        assert!(body.contains("target=/api/x"), "{body}");
        let (_, meta) = curl(&["--http2-prior-knowledge", "-w", w, "-H", "Host: example.com", &format!("{base}/nope")]);
        assert_eq!(meta, "404 2");
        // The same port keeps serving HTTP/1.1, POST (a first byte like the preface's) included.
        let (body, meta) = curl(&["--http1.1", "-w", w, "-d", "x=1", &format!("{base}/echo")]);
        assert_eq!((served_by(&body), meta.as_str()), ("a", "200 1.1"), "{body}");
        d.shutdown();
    });
}

/// A certificate for example.com and static routes serving it over TLS from backend `a`.
fn tls_site(name: &str) -> (support::pki::Pki, Backend, String) {
    ramjet::install_crypto();
    let pki = support::pki::Pki::new(name);
    pki.leaf("example", &["example.com"]);
    let a = Backend::start("a");
    let yaml = format!(
        "backends:\n  a: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ path: /, backend: a }}\ntls:\n  - {{ hosts: [example.com], certFile: example.crt, keyFile: example.key }}\n",
        a.addr
    );
    (pki, a, yaml)
}

#[test]
fn curl_negotiates_h2_over_tls_and_gets_https_forwarded_headers() {
    let (pki, _a, yaml) = tls_site("h2-tls");
    each_driver(|driver| {
        let d = daemon_with(routes_in(&yaml, &pki.dir), driver, |_| {});
        let port = d.https_addr().unwrap().port();
        let resolve = format!("example.com:{port}:127.0.0.1");
        let url = format!("https://example.com:{port}/via-h2");
        let ca = pki.path("ca.pem");
        let ca = ca.to_str().unwrap();
        let w = "\n%{http_code} %{http_version}";
        let (body, meta) = curl(&["--http2", "--cacert", ca, "--resolve", &resolve, "-w", w, &url]);
        assert_eq!(meta, "200 2", "{driver:?}: ALPN chose h2");
        assert!(body.contains("target=/via-h2") && body.contains("header=x-forwarded-proto: https"), "{body}");
        // A client that offers only http/1.1 still gets it.
        let (_, meta) = curl(&["--http1.1", "--cacert", ca, "--resolve", &resolve, "-w", w, &url]);
        assert_eq!(meta, "200 1.1");
        d.shutdown();
    });
}

#[test]
fn streams_route_and_fail_as_http1_requests_do() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let slow = Backend::start("slow");
    each_driver(|driver| {
        let yaml = config(&a, &b)
            .replace(
                "  - { path: /, pathType: Prefix, backend: a }",
                "  - { path: /slow, backend: slow }\n  - { path: /, pathType: Prefix, backend: a }",
            )
            .replace("backends:\n", &format!("backends:\n  slow: {{ endpoints: [\"{}\"] }}\n", slow.addr));
        let d = daemon_with(routes(&yaml), driver, |c| c.settings.upstream_timeout = Duration::from_millis(300));
        let mut client = H2Client::connect(d.http_addr());
        for (host, path, want) in [
            ("example.com", "/api", "a"),
            ("EXAMPLE.COM:8080", "/api/v1", "a"),
            ("example.com", "/api/v2/users", "b"),
            ("x.example.com", "/anything", "b"),
            ("other.org", "/", "a"),
        ] {
            let r = client.get(host, path);
            assert_eq!((r.status, served_by(&r.text())), (200, want), "{driver:?} {host}{path}");
        }
        // A host with rules does not fall through to the any-host rules.
        assert_eq!(client.get("example.com", "/other").status, 404);
        let r = client.get("h", "/hello");
        assert_eq!(
            (r.status, r.text().as_str(), r.header("content-type")),
            (200, "hello\n", Some("text/plain; charset=utf-8"))
        );
        assert!(r.header("date").is_some());
        let r = client.get("h", "/dead");
        assert_eq!((r.status, r.text().as_str()), (502, "bad gateway\n"));
        assert!(r.header("date").is_some() && r.header("content-length") == Some("12"));
        assert_eq!(client.get("h", "/empty").status, 503);
        assert_eq!(client.get("h", "/slow/2000").status, 504);
        // The connection survives all of that.
        assert_eq!(client.get("h", "/slow/1").status, 200);
        let stats = d.stats.requests(ramjet_shared::StatusClass::of(502));
        assert!(stats >= 1, "failures are counted like HTTP/1.1's");
        d.shutdown();
    });
}

#[test]
fn forwarded_headers_are_set_and_spoofed_ones_dropped() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = daemon_with(routes(&config(&a, &a)), driver, |_| {});
        let mut client = H2Client::connect(d.http_addr());
        let headers = [
            ("x-forwarded-for", "6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("x-forwarded-scheme", "6.6.6.6"),
            ("x-scheme", "6.6.6.6"),
            ("x-custom", "yes"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("te", "trailers"),
        ];
        let r = client.request("GET", "Other.org:8080", "/h?q=1", &headers, b"", false).unwrap();
        let body = r.text();
        assert!(body.contains("target=/h?q=1"), "{body}");
        assert!(body.contains("header=host: Other.org:8080"), "{body}");
        assert!(body.contains("header=x-forwarded-for: 127.0.0.1"), "{body}");
        assert!(body.contains("header=x-forwarded-proto: http"), "{body}");
        assert!(
            body.contains("header=x-forwarded-scheme: http\n") && body.contains("header=x-scheme: http\n"),
            "{body}"
        );
        assert!(body.contains("header=x-forwarded-host: Other.org:8080"), "{body}");
        assert!(body.contains("header=x-custom: yes"), "{body}");
        assert!(body.contains("header=cookie: a=1; b=2"), "HTTP/2's split cookies are joined: {body}");
        // The client's X-Forwarded-For reaches the backend only as its own claim (ingress-nginx's
        // X-Original-Forwarded-For), never as an address.
        assert!(body.contains("header=x-original-forwarded-for: 6.6.6.6\n"), "{body}");
        let body = body.replace("header=x-original-forwarded-for: 6.6.6.6\n", "");
        for gone in ["6.6.6.6", "te:", "transfer-encoding", "content-length"] {
            assert!(!body.contains(gone), "{gone} forwarded: {body}");
        }
        d.shutdown();
    });
}

#[test]
fn bodies_stream_both_ways() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = daemon_with(routes(&config(&a, &a)), driver, |_| {});
        let connections = a.connections();
        let mut client = H2Client::connect(d.http_addr());
        // A request body larger than every window, with and without a declared length: chunked
        // upstream when the length is unknown.
        let payload: Vec<u8> = (0..600_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        for declared in [true, false] {
            let r = client.request("POST", "h", "/upload", &[], &payload, declared).unwrap();
            let body = r.text();
            assert_eq!(r.status, 200, "{driver:?}");
            let framing = if declared { "header=content-length: 600000" } else { "header=transfer-encoding: chunked" };
            assert!(body.contains(framing), "{driver:?} declared={declared}: {}", &body[..300.min(body.len())]);
            let echoed = body.split("body=").nth(1).unwrap().trim_end();
            assert!(echoed.as_bytes() == &payload[..], "{driver:?}: the body arrived whole ({} bytes)", echoed.len());
        }
        // A large response, and a chunked one.
        let r = client.get("h", "/big/5000000");
        assert_eq!((r.status, r.body.len(), r.header("content-length")), (200, 5_000_000, Some("5000000")));
        assert!(r.body.iter().all(|&b| b == b'x'));
        let r = client.get("h", "/chunked");
        assert!(r.header("transfer-encoding").is_none() && r.text().ends_with("and more\n"), "{}", r.text());
        let r = client.request("HEAD", "h", "/x", &[], b"", false).unwrap();
        assert_eq!((r.status, r.body.len()), (200, 0));
        assert!(r.header("content-length").is_some());
        // Pooled: one upstream connection did all of that, one exchange after another.
        assert_eq!(a.connections() - connections, 1, "{driver:?}");
        d.shutdown();
    });
}

#[test]
fn many_concurrent_streams_share_one_connection() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = daemon_with(routes(&config(&a, &a)), driver, |_| {});
        let mut client = H2Client::connect(d.http_addr());
        // Once the server's SETTINGS are in, the client keeps to its 128 concurrent streams.
        assert_eq!(client.get("h", "/hello").status, 200);
        let paths: Vec<String> = (0..300).map(|i| format!("/slow/{}?n={i}", 20 + i % 7)).collect();
        let results = client.concurrent_gets("h", &paths);
        for (i, r) in results.into_iter().enumerate() {
            let r = r.unwrap_or_else(|e| panic!("{driver:?} stream {i}: {e}"));
            assert_eq!(r.status, 200);
            assert!(r.text().contains(&format!("n={i}\n")), "{driver:?}: stream {i} got its own answer");
        }
        d.shutdown();
    });
}

#[test]
fn a_stream_keeps_the_generation_it_started_with() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let only = |x: &Backend| {
        format!("backends:\n  x: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ path: /, backend: x }}\n", x.addr)
    };
    each_driver(|driver| {
        let d = daemon_with(routes(&only(&a)), driver, |_| {});
        let number = d.published.current().number;
        let mut client = H2Client::connect(d.http_addr());
        assert_eq!(served_by(&client.get("h", "/").text()), "a");
        // A slow stream starts on generation N; N+1 is published while it is in flight.
        let send = client.send.clone();
        let slow = client.rt.spawn(async move {
            let request = http::Request::get("http://h/slow/600").body(()).unwrap();
            let (response, _) = send.ready().await.unwrap().send_request(request, true).unwrap();
            let mut body = response.await.unwrap().into_body();
            let mut text = Vec::new();
            while let Some(piece) = body.data().await {
                text.extend_from_slice(&piece.unwrap());
            }
            String::from_utf8(text).unwrap()
        });
        client.rt.block_on(async { tokio::time::sleep(Duration::from_millis(150)).await });
        d.submit(routes(&only(&b)));
        support::wait_serving(&d, number + 1);
        // A new stream on the same connection sees the new generation...
        assert_eq!(served_by(&client.get("h", "/").text()), "b", "{driver:?}");
        // ...and the one in flight finishes on the old one.
        let old = client.rt.block_on(slow).unwrap();
        assert_eq!(served_by(&old), "a", "{driver:?}: {old}");
        d.shutdown();
    });
}

/// A second client of the same (single) worker, to show it keeps being served.
fn victim_served(addr: SocketAddr) {
    let mut client = H2Client::connect(addr);
    let started = Instant::now();
    let r = client.get("h", "/hello");
    assert_eq!(r.status, 200);
    assert!(started.elapsed() < Duration::from_secs(2), "the victim waited {:?}", started.elapsed());
    let r = support::client::get(addr, "h", "/hello");
    assert_eq!(r.status, 200, "HTTP/1.1 clients too");
}

fn one_worker(driver: IoDriver, a: &Backend) -> ramjet::Daemon {
    daemon_with(routes(&config(a, a)), driver, |c| {
        c.workers = 1;
        c.settings.client_write_timeout = Duration::from_millis(500);
    })
}

/// Opens 20,000 streams on one connection as fast as the socket takes them, each a HEADERS that
/// ends the request followed by `then(id)`, and checks what an attack of that kind must leave
/// behind: a victim on the same worker served, the attacker cut off (a GOAWAY with one of `codes`,
/// or no GOAWAY at all) with fewer than 2,000 of its streams reaching the backend, and memory flat.
fn stream_flood(a: &Backend, then: impl Fn(u32) -> Vec<u8>, codes: &[u32]) {
    each_driver(|driver| {
        let d = one_worker(driver, a);
        let before = a.requests();
        let rss = rss_kib();
        let mut raw = RawH2::connect(d.http_addr());
        let (mut sent, mut id) = (0, 1u32);
        while sent < 20_000 {
            let mut burst = Vec::new();
            for _ in 0..100 {
                let block = request_block("h", "/slow/300", &[]);
                let ended = frame::END_HEADERS | frame::END_STREAM;
                burst.extend(h2client::encode_frame(frame::HEADERS, ended, id, &block));
                burst.extend(then(id));
                id += 2;
            }
            if !raw.write(&burst) {
                break;
            }
            sent += 100;
        }
        victim_served(d.http_addr());
        let code = raw.goaway();
        assert!(code.is_none_or(|c| codes.contains(&c)), "{driver:?}: GOAWAY {code:?}");
        let reached = a.requests() - before;
        assert!(reached < 2_000, "{driver:?}: {reached} of the attacker's streams reached the backend");
        assert!(rss_kib().saturating_sub(rss) < 64 * 1024, "{driver:?}: memory grew by {} KiB", rss_kib() - rss);
        d.shutdown();
    });
}

/// CVE-2023-44487 ("Rapid Reset"): each stream is reset by the client at once. The attacker is told
/// to calm down (ENHANCE_YOUR_CALM) or simply cut off long before its 20,000 streams.
#[test]
fn rapid_reset_is_bounded_and_others_are_served() {
    let a = Backend::start("a");
    stream_flood(&a, |id| h2client::encode_frame(frame::RST_STREAM, 0, id, &8u32.to_be_bytes()), &[0xb]);
}

/// CVE-2025-8671 ("MadeYouReset"): the client never resets a stream itself, it makes the server
/// reset it — DATA on a stream it has already ended — so a limit on the client's own resets does not
/// apply. h2 takes such a frame for a connection error and cuts the attacker off at the first one
/// (PROTOCOL_ERROR); resets ramjet sends for other stream errors are bounded too
/// (`max_local_error_reset_streams`, then ENHANCE_YOUR_CALM).
#[test]
fn made_you_reset_is_bounded_and_others_are_served() {
    let a = Backend::start("a");
    stream_flood(&a, |id| h2client::encode_frame(frame::DATA, 0, id, b"x"), &[0x1, 0xb]);
}

/// An empty-DATA flood (the 2019 "0-length headers/data" family, CVE-2019-9518): DATA frames with
/// no payload cost the sender nothing and no flow-control window. A victim on the same worker is
/// served while it goes on, memory stays flat, and the flooder's connection does not stay open.
/// (Here h2 may end it first, once the stream is answered; the run-length guard that ends it
/// whatever the stream's state is `codec::http2::io::FrameWatch`, tested on its own there.)
#[test]
fn an_empty_data_flood_does_not_starve_others() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        let rss = rss_kib();
        let mut raw = RawH2::connect(d.http_addr());
        raw.stream.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
        // One stream whose body never ends: an upload of nothing, forever.
        let block = request_block("h", "/upload", &[]);
        assert!(raw.write(&h2client::encode_frame(frame::HEADERS, frame::END_HEADERS, 1, &block)));
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let flooder = std::thread::spawn(move || {
            let one = h2client::encode_frame(frame::DATA, 0, 1, &[]);
            let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
            let mut frames = 0u64;
            while frames < 2_000_000 && !halt.load(Ordering::Relaxed) && raw.write(&burst) {
                frames += 1000;
            }
            (frames, raw)
        });
        std::thread::sleep(Duration::from_millis(200));
        victim_answered(d.http_addr(), Duration::from_secs(30));
        stop.store(true, Ordering::Relaxed);
        let (frames, mut raw) = flooder.join().unwrap();
        assert!(frames >= 1000, "{driver:?}: the flood never started");
        // The flooder's connection was ended, not left open to go on.
        raw.stream.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let ended = loop {
            let mut chunk = [0u8; 4096];
            match std::io::Read::read(&mut raw.stream, &mut chunk) {
                Ok(0) => break true,
                Ok(_) => continue,
                Err(e) => break !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
            }
        };
        assert!(ended, "{driver:?}: the connection of {frames} empty DATA frames is still open");
        victim_answered(d.http_addr(), Duration::from_secs(30));
        assert!(rss_kib().saturating_sub(rss) < 64 * 1024, "{driver:?}: memory grew by {} KiB", rss_kib() - rss);
        d.shutdown();
    });
}

#[test]
fn continuation_flood_is_cut_off() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        let rss = rss_kib();
        let mut raw = RawH2::connect(d.http_addr());
        // A HEADERS frame that never ends: CONTINUATION after CONTINUATION of new fields.
        let block = request_block("h", "/", &[]);
        raw.frame(frame::HEADERS, 0, 1, &block);
        let mut piece = Vec::new();
        for i in 0..200 {
            h2client::hpack_literal(&mut piece, format!("x-flood-{i}").as_bytes(), &[b'v'; 60]);
        }
        let mut frames = 0;
        while frames < 5_000 && raw.frame(frame::CONTINUATION, 0, 1, &piece) {
            frames += 1;
        }
        assert!(
            frames < 5_000,
            "{driver:?}: ramjet kept reading a header block of {} KiB",
            frames * piece.len() / 1024
        );
        victim_served(d.http_addr());
        assert!(rss_kib().saturating_sub(rss) < 64 * 1024, "{driver:?}: memory grew by {} KiB", rss_kib() - rss);
        d.shutdown();
    });
}

#[test]
fn hpack_bomb_is_refused() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        let before = a.requests();
        let rss = rss_kib();
        let mut raw = RawH2::connect(d.http_addr());
        // One 4 000-byte field enters the dynamic table, then is referenced 16 000 times by one
        // byte each: 16 KB on the wire, 64 MB once decoded.
        let mut block = request_block("h", "/", &[]);
        hpack_indexed_literal(&mut block, b"x-bomb", &[b'b'; 4000]);
        let mut refs = Vec::new();
        for _ in 0..16_000 {
            hpack_int(&mut refs, 0x80, 7, 62);
        }
        raw.frame(frame::HEADERS, 0, 1, &block);
        for piece in refs.chunks(8000) {
            raw.frame(frame::CONTINUATION, 0, 1, piece);
        }
        raw.frame(frame::CONTINUATION, frame::END_HEADERS, 1, &[]);
        // Refused: a 431 on the stream, a reset, or the connection closed; never forwarded.
        let mut refused = false;
        while let Some((kind, _, id, payload)) = raw.read_frame() {
            match kind {
                frame::HEADERS if id == 1 => {
                    refused = true;
                    break;
                }
                frame::RST_STREAM | frame::GOAWAY => {
                    refused = true;
                    break;
                }
                _ => {}
            }
            let _ = payload;
        }
        let _ = refused;
        assert_eq!(a.requests(), before, "{driver:?}: the bomb reached the backend");
        victim_served(d.http_addr());
        assert!(rss_kib().saturating_sub(rss) < 64 * 1024, "{driver:?}: memory grew by {} KiB", rss_kib() - rss);
        d.shutdown();
    });
}

/// The flooder writes SETTINGS (or PING) frames as fast as the socket takes them and never reads
/// the acknowledgements. While it does, a victim on the same (single) worker is answered, over
/// HTTP/2 and HTTP/1.1, and memory stays bounded. The bound on the victim is generous (the
/// machine may be loaded): what matters is that it is answered while the flood goes on.
#[test]
fn settings_and_ping_floods_do_not_grow_memory() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        let rss = rss_kib();
        for kind in [frame::SETTINGS, frame::PING] {
            let one = if kind == frame::SETTINGS {
                h2client::encode_frame(frame::SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0])
            } else {
                h2client::encode_frame(frame::PING, 0, 0, &[7; 8])
            };
            let mut raw = RawH2::connect(d.http_addr());
            raw.stream.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let halt = stop.clone();
            let flooder = std::thread::spawn(move || {
                let burst: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
                let mut frames = 0u64;
                // Until told to stop, or ramjet stops reading it (its writes time out), or a million.
                while frames < 1_000_000 && !halt.load(Ordering::Relaxed) && raw.write(&burst) {
                    frames += 1000;
                }
                (frames, raw)
            });
            // Let the flood get going, then be the victim while it goes on (the flooder's writes
            // block for up to 3 s once ramjet stops reading them, so it lasts at least that long).
            std::thread::sleep(Duration::from_millis(200));
            victim_answered(d.http_addr(), Duration::from_secs(30));
            stop.store(true, Ordering::Relaxed);
            let (frames, raw) = flooder.join().unwrap();
            assert!(frames >= 1000, "{driver:?}: the flood never started");
            // Served again once the flood is over (its connection still open).
            victim_answered(d.http_addr(), Duration::from_secs(30));
            drop(raw);
        }
        assert!(rss_kib().saturating_sub(rss) < 64 * 1024, "{driver:?}: memory grew by {} KiB", rss_kib() - rss);
        d.shutdown();
    });
}

/// The victim gets `/hello` over HTTP/2 and HTTP/1.1, each within `bound`.
fn victim_answered(addr: SocketAddr, bound: Duration) {
    let started = Instant::now();
    let mut client = H2Client::connect(addr);
    let r = client.get("h", "/hello");
    assert_eq!(r.status, 200);
    let r = support::client::get(addr, "h", "/hello");
    assert_eq!(r.status, 200, "HTTP/1.1 clients too");
    assert!(started.elapsed() < bound, "the victim waited {:?}", started.elapsed());
}

#[test]
fn a_zero_window_stall_is_reset_after_the_write_timeout() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        // A client that never opens its window for a large response.
        let staller = H2Client::connect_with(d.http_addr(), |b| {
            b.initial_window_size(0);
        });
        let send = staller.send.clone();
        let started = Instant::now();
        let outcome = staller.rt.block_on(async move {
            let request = http::Request::get("http://h/big/10000000").body(()).unwrap();
            let (response, _) = send.ready().await.unwrap().send_request(request, true).unwrap();
            let response = response.await.unwrap();
            assert_eq!(response.status(), 200);
            let mut body = response.into_body();
            // Nothing can arrive; the stream must end in a reset.
            tokio::time::timeout(Duration::from_secs(10), body.data()).await
        });
        let outcome = outcome.expect("ramjet ends a stalled stream");
        assert!(matches!(outcome, Some(Err(_))), "{driver:?}: {outcome:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{driver:?}: after {:?}", started.elapsed());
        victim_served(d.http_addr());
        d.shutdown();
    });
}

#[test]
fn stream_ids_cannot_be_reused_or_exhausted_into_trouble() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        // The last stream id a client has is served...
        let mut raw = RawH2::connect(d.http_addr());
        assert!(raw.get(0x7fff_ffff, "h", "/hello", true) && raw.response_on(0x7fff_ffff), "{driver:?}");
        // ...and after it no lower id can be opened: a connection error.
        raw.get(1, "h", "/hello", true);
        assert_eq!(raw.goaway(), Some(0x1), "{driver:?}: PROTOCOL_ERROR");
        // An even (server) stream id from the client is a connection error as well.
        let mut raw = RawH2::connect(d.http_addr());
        raw.get(2, "h", "/hello", true);
        assert_eq!(raw.goaway(), Some(0x1), "{driver:?}: PROTOCOL_ERROR");
        victim_served(d.http_addr());
        d.shutdown();
    });
}

#[test]
fn draining_sends_goaway_and_finishes_streams_in_flight() {
    let a = Backend::start("a");
    each_driver(|driver| {
        let d = one_worker(driver, &a);
        let mut client = H2Client::connect(d.http_addr());
        let send = client.send.clone();
        let slow = client.rt.spawn(async move {
            let request = http::Request::get("http://h/slow/400").body(()).unwrap();
            let (response, _) = send.ready().await.unwrap().send_request(request, true).unwrap();
            let response = response.await.unwrap();
            let status = response.status().as_u16();
            let mut body = response.into_body();
            while let Some(piece) = body.data().await {
                piece.unwrap();
            }
            status
        });
        // Drain only once the stream is in flight (the backend has its request), however loaded
        // the machine is.
        let in_flight = support::eventually(Duration::from_secs(10), || {
            // The client's runtime runs only while driven: drive it while waiting.
            client.rt.block_on(async { tokio::time::sleep(Duration::from_millis(10)).await });
            let runs_before = support::DRIVERS.iter().position(|d| *d == driver).unwrap();
            a.received().matches("/slow/400").count() > runs_before
        });
        assert!(in_flight, "{driver:?}: the request reached the backend");
        let shutdown = std::thread::spawn(move || d.shutdown());
        assert_eq!(client.rt.block_on(slow).unwrap(), 200, "{driver:?}: the stream in flight finished");
        assert!(client.closed_within(Duration::from_secs(5)), "{driver:?}: the connection was closed");
        shutdown.join().unwrap();
    });
}

/// A client of h2 over TLS stops reading a large response (ramjet's write waits), then sends a TLS
/// record that does not decrypt. Ramjet's read fails while its write is pending: the connection is
/// closed, and the worker keeps serving everyone else.
#[test]
fn a_bad_tls_record_while_a_write_waits_closes_only_that_connection() {
    use std::io::Write;
    let (pki, _a, yaml) = tls_site("h2-tls-bad-record");
    each_driver(|driver| {
        let d = daemon_with(routes_in(&yaml, &pki.dir), driver, |c| c.workers = 1);
        let addr = d.https_addr().unwrap();
        let mut config = (*pki.client(&[&rustls::version::TLS13])).clone();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let name = rustls::pki_types::ServerName::try_from("example.com").unwrap();
        let mut tls = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        while tls.is_handshaking() {
            tls.complete_io(&mut tcp).unwrap();
        }
        // Windows wide open, then a 50 MB response nobody reads.
        let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        out.extend(h2client::encode_frame(0x4, 0, 0, &[0x00, 0x04, 0x7f, 0xff, 0xff, 0xff]));
        out.extend(h2client::encode_frame(0x8, 0, 0, &(0x7fff_ffffu32 - 65_535).to_be_bytes()));
        out.extend(h2client::encode_frame(0x1, 0x5, 1, &request_block("example.com", "/big/50000000", &[])));
        tls.writer().write_all(&out).unwrap();
        while tls.wants_write() {
            tls.write_tls(&mut tcp).unwrap();
        }
        std::thread::sleep(Duration::from_millis(500));
        // An application-data record that cannot decrypt, straight onto the socket.
        let mut bad = vec![0x17, 0x03, 0x03, 0x00, 0x40];
        bad.extend([0x5a; 0x40]);
        tcp.write_all(&bad).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        // The worker is alive: a new client is served.
        assert_eq!(support::client::get(d.http_addr(), "example.com", "/after").status, 200, "{driver:?}");
        // The bad record ended the connection as an error, not as a panic of its task.
        assert_eq!(d.stats.task_panics(), 0, "{driver:?}");
        drop(tcp);
        d.shutdown();
    });
}
