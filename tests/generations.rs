//! Generations over the real daemon: the admin API's every verb and error, pin and release moving
//! traffic, the audit webhook, and metrics.

use ramjet_test_support as support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ramjet::Daemon;
use ramjet_control::audit::Webhook;
use ramjet_dataplane::IoDriver;
use serde_json::Value;
use support::client::{get, request, Response};
use support::{daemon_with, routes, wait_serving};

/// A configuration whose one route answers with `name`.
fn says(name: &str) -> String {
    format!("backends:\n  {name}: {{ respond: {{ status: 200, body: \"{name}\" }} }}\nroutes:\n  - {{ path: /, backend: {name} }}\n")
}

fn admin(d: &Daemon, method: &str, path: &str, body: Option<&str>, token: Option<&str>) -> Response {
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let body = body.unwrap_or("");
    request(
        d.admin_addr(),
        &format!(
            "{method} {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\nContent-Type: application/x-www-form-urlencoded\r\n{auth}Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

fn json(r: &Response) -> Value {
    serde_json::from_str(&r.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", r.body))
}

fn serving_body(d: &Daemon) -> String {
    get(d.http_addr(), "h", "/").body
}

fn start(token: Option<&str>) -> Daemon {
    daemon_with(routes(&says("one")), IoDriver::IoUring, |c| c.admin_token = token.map(String::from))
}

#[test]
fn pin_moves_traffic_back_and_release_jumps_to_the_newest() {
    let d = start(None);
    assert_eq!(serving_body(&d), "one");
    d.submit(routes(&says("two")));
    wait_serving(&d, 2);
    assert_eq!(serving_body(&d), "two");

    let r = admin(&d, "POST", "/admin/rollback", Some(r#"{"generation": 1}"#), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(json(&r)["pinned"], 1);
    assert_eq!(serving_body(&d), "one");

    // Compiled while pinned: recorded, not published.
    d.submit(routes(&says("three")));
    let held = support::eventually(Duration::from_secs(10), || {
        json(&admin(&d, "GET", "/admin/generations", None, None))["newest"] == 3
    });
    assert!(held);
    assert_eq!(serving_body(&d), "one");
    let g = json(&admin(&d, "GET", "/admin/generations", None, None));
    assert_eq!((g["serving"].as_u64(), g["pinned"].as_u64()), (Some(1), Some(1)));
    let newest = &g["generations"][0];
    assert_eq!((newest["generation"].as_u64(), newest["published"].as_bool()), (Some(3), Some(false)));
    assert_eq!(g["generations"].as_array().unwrap().len(), 3);
    let metrics = admin(&d, "GET", "/metrics", None, None).body;
    assert!(metrics.contains("ramjet_pinned 1"), "{metrics}");

    // Release publishes the newest, not the one pinned over.
    let r = admin(&d, "DELETE", "/admin/rollback", None, None);
    assert_eq!(r.status, 200);
    assert_eq!((json(&r)["serving"].as_u64(), json(&r)["pinned"].is_null()), (Some(3), true));
    assert_eq!(serving_body(&d), "three");
    // Idempotent.
    let r = admin(&d, "DELETE", "/admin/rollback", None, None);
    assert_eq!(r.status, 200);
    assert!(json(&r)["message"].as_str().unwrap().contains("nothing was pinned"));
    let metrics = admin(&d, "GET", "/metrics", None, None).body;
    for line in [
        "ramjet_pinned 0",
        "ramjet_serving_generation 3",
        "ramjet_generations_compiled_total 3",
        "ramjet_generations_applied_total 3",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    // Pinning the generation that serves is allowed: it freezes the configuration.
    assert_eq!(admin(&d, "POST", "/admin/rollback", Some(r#"{"generation": 3}"#), None).status, 200);
    d.submit(routes(&says("four")));
    assert!(support::eventually(Duration::from_secs(10), || json(&admin(&d, "GET", "/admin/generations", None, None))
        ["newest"]
        == 4));
    assert_eq!(serving_body(&d), "three");
    d.shutdown();
}

#[test]
fn the_same_configuration_twice_is_no_new_generation() {
    let d = start(None);
    d.submit(routes(&says("one")));
    d.submit(routes(&says("one")));
    std::thread::sleep(Duration::from_millis(200));
    let g = json(&admin(&d, "GET", "/admin/generations", None, None));
    assert_eq!(g["generations"].as_array().unwrap().len(), 1);
    assert_eq!(g["newest"], 1);
    // With static routes there is one generation, and rolling back to it republishes it.
    let r = admin(&d, "POST", "/admin/rollback", Some(r#"{"generation": 1}"#), None);
    assert_eq!((r.status, json(&r)["serving"].as_u64()), (200, Some(1)));
    assert_eq!(serving_body(&d), "one");
    d.shutdown();
}

#[test]
fn operator_mistakes_change_nothing_and_say_why() {
    let d = start(Some("s3cret"));
    d.submit(routes(&says("two")));
    wait_serving(&d, 2);
    // (method, body, token, status, what the error says)
    type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, u16, &'a str);
    let cases: [Case; 7] = [
        ("POST", Some(r#"{"generation": 1}"#), None, 401, "Authorization: Bearer"),
        ("POST", Some(r#"{"generation": 1}"#), Some("wrong"), 401, "wrong admin token"),
        ("DELETE", None, Some("wrong"), 401, "wrong admin token"),
        ("POST", Some("generation=1"), Some("s3cret"), 400, "must be JSON"),
        ("POST", Some(r#"{"generation": 1, "force": true}"#), Some("s3cret"), 400, "unknown field"),
        ("POST", Some(r#"{"generation": "one"}"#), Some("s3cret"), 400, "must be JSON"),
        (
            "POST",
            Some(r#"{"generation": 99}"#),
            Some("s3cret"),
            404,
            "generation 99 is not in the history; the generations that are: [2, 1]",
        ),
    ];
    for (method, body, token, status, message) in cases {
        let r = admin(&d, method, "/admin/rollback", body, token);
        assert_eq!(r.status, status, "{method} {body:?} {token:?}: {}", r.body);
        assert!(json(&r)["error"].as_str().unwrap().contains(message), "{}", r.body);
        assert_eq!(serving_body(&d), "two", "nothing changed");
    }
    let big = format!(r#"{{"generation": 1, "pad": "{}"}}"#, "x".repeat(10_000));
    assert_eq!(admin(&d, "POST", "/admin/rollback", Some(&big), Some("s3cret")).status, 413);
    // GETs never need the token.
    assert_eq!(admin(&d, "GET", "/admin/generations", None, None).status, 200);
    assert_eq!(admin(&d, "GET", "/metrics", None, None).status, 200);
    // The right token works.
    assert_eq!(admin(&d, "POST", "/admin/rollback", Some(r#"{"generation": 1}"#), Some("s3cret")).status, 200);
    assert_eq!(serving_body(&d), "one");
    assert_eq!(admin(&d, "DELETE", "/admin/rollback", None, Some("s3cret")).status, 200);
    assert_eq!(serving_body(&d), "two");
    d.shutdown();
}

#[test]
fn probes_and_unknown_paths() {
    let d = start(None);
    assert_eq!(admin(&d, "GET", "/healthz", None, None).status, 200);
    assert_eq!(admin(&d, "GET", "/readyz", None, None).status, 200);
    let r = admin(&d, "GET", "/admin/nope", None, None);
    assert_eq!(r.status, 404);
    assert!(json(&r)["error"].as_str().unwrap().contains("/admin/generations"));
    d.shutdown();
}

/// A collector that records each POST body.
fn collector() -> (SocketAddr, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    let mut body = vec![0; len];
                    reader.read_exact(&mut body).unwrap();
                    let _ = tx.send(String::from_utf8(body).unwrap());
                    let _ = (&stream).write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
                    break;
                }
            }
        }
    });
    (addr, rx)
}

#[test]
fn the_audit_webhook_receives_each_publish_as_json() {
    let (addr, bodies) = collector();
    let webhook = Webhook::new(&format!("http://{addr}/audit")).unwrap();
    let d = daemon_with(routes(&says("one")), IoDriver::IoUring, |c| c.audit_webhook = Some(webhook));
    let first: Value = serde_json::from_str(&bodies.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(first["reason"], "ConfigApplied");
    assert_eq!(first["generation"], 1);
    assert_eq!(first["published"], true);
    assert_eq!(first["counts"]["routes_added"], 1);
    assert!(first["message"].as_str().unwrap().ends_with("(gen 0→1)"));
    d.submit(routes(&says("two")));
    let second: Value = serde_json::from_str(&bodies.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(second["counts"]["backends_changed"], 1);
    assert_eq!(second["message"], "1 backend changed (gen 1→2)");
    admin(&d, "POST", "/admin/rollback", Some(r#"{"generation": 1}"#), None);
    let pinned: Value = serde_json::from_str(&bodies.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!((pinned["reason"].as_str(), pinned["generation"].as_u64()), (Some("ConfigPinned"), Some(1)));
    admin(&d, "DELETE", "/admin/rollback", None, None);
    let resumed: Value = serde_json::from_str(&bodies.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(resumed["reason"], "ConfigResumed");
    d.shutdown();
}

#[test]
fn a_dead_webhook_slows_nothing() {
    // Accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let webhook = Webhook::new(&format!("http://{}/audit", silent.local_addr().unwrap())).unwrap();
    let d = daemon_with(routes(&says("g1")), IoDriver::IoUring, |c| c.audit_webhook = Some(webhook));
    let started = Instant::now();
    for n in 2..=6 {
        d.submit(routes(&says(&format!("g{n}"))));
        wait_serving(&d, n);
    }
    assert!(started.elapsed() < Duration::from_secs(4), "publishing waited for the webhook: {:?}", started.elapsed());
    assert_eq!(serving_body(&d), "g6");
    d.shutdown();
}

/// What used to make a new generation whose summary said "no route changes": a changed direct
/// response, new endpoints behind the default backend, and a host that starts redirecting to
/// HTTPS. Each is named in the summary `GET /admin/generations` shows.
#[test]
fn every_change_that_makes_a_generation_is_named_in_its_summary() {
    let dir = support::temp_dir("summary");
    let cert = rcgen::generate_simple_self_signed(vec!["a.test".to_string()]).unwrap();
    std::fs::write(dir.join("a.crt"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("a.key"), cert.signing_key.serialize_pem()).unwrap();
    let config = |body: &str, fallback: &str, redirect: bool| {
        support::routes_in(
            &format!(
                "backends:\n  page: {{ respond: {{ status: 200, body: \"{body}\" }} }}\n  fallback: {{ endpoints: [{fallback}] }}\n\
                 defaultBackend: fallback\nroutes:\n  - {{ host: a.test, path: /, backend: page }}\n\
                 tls:\n  - {{ hosts: [a.test], certFile: a.crt, keyFile: a.key, sslRedirect: {redirect} }}\n"
            ),
            &dir,
        )
    };
    let d = daemon_with(config("old", "\"127.0.0.1:9001\"", false), IoDriver::IoUring, |_| {});
    let summary = |n: u64| {
        wait_serving(&d, n);
        let g = json(&admin(&d, "GET", "/admin/generations", None, None));
        assert_eq!(g["generations"][0]["generation"], n);
        (g["generations"][0]["summary"].as_str().unwrap().to_string(), g["generations"][0]["changes"].clone())
    };
    d.submit(config("new", "\"127.0.0.1:9001\"", false));
    let (sentence, changes) = summary(2);
    assert_eq!(sentence, "1 backend changed");
    assert_eq!(changes["backends_changed"], 1);
    d.submit(config("new", "\"127.0.0.1:9001\", \"127.0.0.1:9002\"", false));
    let (sentence, changes) = summary(3);
    assert_eq!(sentence, "default backend fallback changed");
    assert_eq!(changes["default_backend_changed"], true);
    d.submit(config("new", "\"127.0.0.1:9001\", \"127.0.0.1:9002\"", true));
    let (sentence, changes) = summary(4);
    assert_eq!(sentence, "1 HTTPS redirect added");
    assert_eq!(changes["https_redirects_added"], 1);
    d.shutdown();
}

/// The daemon's answers are exactly the shared wire types `ramjet-top` reads: each body parses into
/// them and serializes back to the same JSON, so nothing is lost or invented on either side.
#[test]
fn the_admin_answers_are_the_shared_wire_types() {
    use ramjet_shared::admin::{ErrorBody, Generations, PinAnswer};
    let d = start(Some("s3cr3t"));
    d.submit(routes(&says("two")));
    wait_serving(&d, 2);
    let round_trip = |body: &str, parsed: Value| {
        assert_eq!(parsed, serde_json::from_str::<Value>(body).unwrap(), "{body}");
    };
    let body = admin(&d, "GET", "/admin/generations", None, None).body;
    let generations: Generations = serde_json::from_str(&body).unwrap();
    assert_eq!((generations.serving, generations.generations.len()), (2, 2));
    round_trip(&body, serde_json::to_value(&generations).unwrap());
    let body = admin(&d, "POST", "/admin/rollback", Some(r#"{"generation": 1}"#), Some("s3cr3t")).body;
    let answer: PinAnswer = serde_json::from_str(&body).unwrap();
    assert_eq!(answer.state.pinned, Some(1));
    round_trip(&body, serde_json::to_value(&answer).unwrap());
    let body = admin(&d, "DELETE", "/admin/rollback", None, None).body;
    let error: ErrorBody = serde_json::from_str(&body).unwrap();
    assert!(error.error.contains("Authorization: Bearer"), "{}", error.error);
    round_trip(&body, serde_json::to_value(&error).unwrap());
    d.shutdown();
}

#[test]
fn pin_by_digest_names_the_same_table_whatever_its_number() {
    let d = start(None);
    let digest_of = |d: &Daemon, n: u64| -> String {
        let gens = json(&admin(d, "GET", "/admin/generations", None, None));
        let entry = gens["generations"].as_array().unwrap().iter().find(|g| g["generation"] == n).cloned();
        entry.unwrap_or_else(|| panic!("generation {n} not in {gens}"))["digest"].as_str().unwrap().to_string()
    };
    let one = digest_of(&d, 1);
    assert_eq!(one.len(), 12, "GET shows 12 hex digits: {one}");
    d.submit(routes(&says("two")));
    wait_serving(&d, 2);

    // Any prefix of 8 or more digits, in either case.
    let r =
        admin(&d, "POST", "/admin/rollback", Some(&format!(r#"{{"digest": "{}"}}"#, one[..8].to_uppercase())), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!((json(&r)["serving"].as_u64(), json(&r)["pinned"].as_u64()), (Some(1), Some(1)));
    assert_eq!(serving_body(&d), "one");

    // Mistakes change nothing and say why.
    let before = json(&admin(&d, "GET", "/admin/generations", None, None));
    for (body, status, says_what) in [
        (r#"{"digest": "0000000000"}"#, 404, "no generation in the history has a digest starting with 0000000000"),
        (r#"{"digest": "abc"}"#, 400, "8 to 64 hex digits"),
        (r#"{"digest": "zzzzzzzzzz"}"#, 400, "8 to 64 hex digits"),
        (r#"{"digest": "0123456789", "generation": 1}"#, 400, "not both"),
        (r#"{}"#, 400, "give {\"generation\": N} or {\"digest\""),
    ] {
        let r = admin(&d, "POST", "/admin/rollback", Some(body), None);
        assert_eq!(r.status, status, "{body}: {}", r.body);
        assert!(json(&r)["error"].as_str().unwrap().contains(says_what), "{body}: {}", r.body);
    }
    // The 404 lists the ring by number and digest.
    let r = admin(&d, "POST", "/admin/rollback", Some(r#"{"digest": "00000000"}"#), None);
    assert!(r.body.contains(&format!("1:{one}")), "{}", r.body);
    assert_eq!(json(&admin(&d, "GET", "/admin/generations", None, None)), before);
    assert_eq!(serving_body(&d), "one");

    // The same table again under a new number: the digest names it, the newest copy is pinned.
    assert_eq!(admin(&d, "DELETE", "/admin/rollback", None, None).status, 200);
    d.submit(routes(&says("one")));
    wait_serving(&d, 3);
    assert_eq!(digest_of(&d, 3), one);
    let r = admin(&d, "POST", "/admin/rollback", Some(&format!(r#"{{"digest": "{one}"}}"#)), None);
    assert_eq!(json(&r)["pinned"].as_u64(), Some(3), "{}", r.body);
}

/// `GET /admin/route`: which route and backend the serving generation gives a host and path,
/// the way the workers decide it — and a clear 400 for a question that is not one.
#[test]
fn the_admin_api_says_which_route_and_backend_would_serve_a_request() {
    let api = support::backend::Backend::start("api");
    let yaml = format!(
        "backends:\n  api: {{ endpoints: [\"{}\"] }}\n  hello: {{ respond: {{ status: 200, body: hi }} }}\n\
         routes:\n  - {{ host: shop.test, path: /api, pathType: Prefix, backend: api }}\n  \
         - {{ host: shop.test, path: /, pathType: Prefix, backend: hello }}\n",
        api.addr
    );
    let d = daemon_with(routes(&yaml), IoDriver::Auto, |_| {});
    let ask = |query: &str| admin(&d, "GET", &format!("/admin/route?{query}"), None, None);
    let r = ask("host=Shop.Test:8080&path=/api/cart");
    assert_eq!(r.status, 200, "{}", r.body);
    let v = json(&r);
    assert_eq!((v["answer"].as_str(), v["host"].as_str()), (Some("route"), Some("shop.test")), "{v}");
    assert_eq!(v["route"]["backend"], "api");
    assert_eq!(v["route"]["endpoints"], serde_json::json!([api.addr.to_string()]));
    assert_eq!(v["generation"], d.published.current().number);
    // What a real request to the same place gets agrees.
    assert!(get(d.http_addr(), "shop.test", "/api/cart").body.contains("api"));
    let v = json(&ask("host=shop.test&path=/"));
    assert_eq!((v["route"]["backend"].as_str(), v["route"]["responds"].as_u64()), (Some("hello"), Some(200)), "{v}");
    let v = json(&ask("host=other.test"));
    assert_eq!(v["answer"], "no_route", "{v}");
    assert_eq!(get(d.http_addr(), "other.test", "/").status, 404);
    for bad in ["path=/x", "host=shop.test&path=x", "host=a%20b", "host=shop.test&colour=blue"] {
        let r = ask(bad);
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert!(json(&r)["error"].is_string(), "{bad}: {}", r.body);
    }
    d.shutdown();
}
