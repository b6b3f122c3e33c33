//! The access log and request ids, as an operator sees them: records written by the real daemon for
//! requests sent over real sockets (HTTP/1.1 and HTTP/2), in both formats, with the filtering
//! knobs; records that do not fit are counted; the file is reopened on SIGHUP (the binary); ids are
//! kept or made, sent upstream and returned; trace context passes untouched.

use ramjet_test_support as support;
use ramjet_test_support::h2client;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use h2client::H2Client;
use ramjet_dataplane::access_log::{Destination, Format};
use ramjet_dataplane::{AccessLogSettings, IoDriver};
use serde_json::Value;
use support::backend::Backend;
use support::client::{get, request, Conn};
use support::{daemon_with, eventually, free_port, routes, temp_dir, DRIVERS};

fn yaml(backend: SocketAddr) -> String {
    format!(
        "backends:\n  app: {{ endpoints: [\"{backend}\"] }}\n  hi: {{ respond: {{ status: 200, body: \"hi\" }} }}\n  dead: {{ endpoints: [\"127.0.0.1:{}\"] }}\nroutes:\n  - {{ host: app.test, path: /, backend: app }}\n  - {{ host: hi.test, path: /, backend: hi }}\n  - {{ host: dead.test, path: /, backend: dead }}\n",
        free_port()
    )
}

fn log_to(path: &Path, format: Format) -> AccessLogSettings {
    AccessLogSettings::new(Destination::File(path.to_path_buf()), format)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

fn records(path: &Path) -> Vec<Value> {
    lines(path).iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

fn metrics(admin: SocketAddr) -> String {
    request(admin, "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").body
}

/// The value of one sample line of `/metrics`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

const HELLO: &str =
    "backends:\n  hi: { respond: { status: 200, body: \"hi\" } }\nroutes:\n  - { path: /, backend: hi }\n";

/// The routes file every binary test serves, in `dir`.
fn hello_routes(dir: &Path) -> PathBuf {
    let file = dir.join("routes.yaml");
    std::fs::write(&file, HELLO).unwrap();
    file
}

/// The `ramjet` binary serving `routes` with one worker on free ports, and `extra` flags; returns
/// once it serves, with its HTTP and admin addresses.
fn start_binary(routes: &Path, extra: &[&str], stdout: Stdio) -> (Child, SocketAddr, SocketAddr) {
    let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let child = Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .args(["--static-routes", routes.to_str().unwrap(), "--workers", "1", "--io-driver", "auto"])
        .args(["--http-addr", &http.to_string(), "--admin-addr", &admin.to_string()])
        .args(extra)
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(Duration::from_secs(20), || std::net::TcpStream::connect(http).is_ok()), "daemon starts");
    (child, http, admin)
}

#[test]
fn json_records_describe_every_request_on_both_protocols() {
    let backend = Backend::start("app");
    for driver in DRIVERS {
        let dir = temp_dir("access-json");
        let file = dir.join("access.log");
        let d = daemon_with(routes(&yaml(backend.addr)), driver, |c| c.access_log = Some(log_to(&file, Format::Json)));
        let http = d.http_addr();

        let mut conn = Conn::open(http);
        conn.send(b"POST /submit?x=1 HTTP/1.1\r\nHost: app.test\r\nUser-Agent: probe/1.0\r\nReferer: https://shop.test/cart\r\nX-Request-ID: req-42\r\nContent-Length: 5\r\n\r\nhello");
        let proxied = conn.read_response();
        assert_eq!(proxied.status, 200);
        let direct = conn.get("hi.test", "/greeting");
        assert_eq!(direct.status, 200);
        let missing = conn.get("nowhere.test", "/x");
        assert_eq!(missing.status, 404);
        let refused = get(http, "dead.test", "/down");
        assert_eq!(refused.status, 502);
        let mut h2 = H2Client::connect(http);
        let over_h2 = h2.request("GET", "app.test", "/h2/path", &[("user-agent", "h2probe")], b"", false).unwrap();
        assert_eq!(over_h2.status, 200);
        drop(h2);
        d.shutdown();

        let recs = records(&file);
        assert_eq!(recs.len(), 5, "{driver:?}: one record per request: {recs:#?}");
        let find = |path: &str| {
            recs.iter()
                .find(|r| r["path"] == path)
                .unwrap_or_else(|| panic!("{driver:?}: no record for {path}: {recs:#?}"))
        };
        let post = find("/submit?x=1");
        assert_eq!(post["method"], "POST");
        assert_eq!(post["host"], "app.test");
        assert_eq!(post["protocol"], "HTTP/1.1");
        assert_eq!(post["status"], 200);
        assert_eq!(post["user_agent"], "probe/1.0");
        assert_eq!(post["referer"], "https://shop.test/cart");
        assert_eq!(post["upstream_status"], 200, "what the backend answered: {post}");
        assert_eq!(post["request_id"], "req-42");
        assert_eq!(post["upstream_addr"], backend.addr.to_string());
        assert_eq!(post["route"], "routes[0]");
        assert_eq!(post["backend"], "app");
        assert_eq!(post["generation"], d_generation_one());
        assert_eq!(post["tls"], false);
        assert!(post["client"].as_str().unwrap().starts_with("127.0.0.1:"), "{post}");
        assert!(post["bytes_in"].as_u64().unwrap() > 5, "head and body: {post}");
        let body_len = proxied.body.len() as u64;
        assert!(post["bytes_out"].as_u64().unwrap() > body_len, "head and body: {post}");
        assert!(post["duration_ms"].as_f64().unwrap() >= post["upstream_header_ms"].as_f64().unwrap(), "{post}");
        assert!(post["upstream_connect_ms"].as_f64().is_some(), "{post}");
        assert!(post["time"].as_str().unwrap().ends_with('Z'), "{post}");

        let greeting = find("/greeting");
        assert_eq!((greeting["status"].as_u64(), greeting["backend"].as_str()), (Some(200), Some("hi")));
        assert!(greeting["upstream_addr"].is_null(), "a direct answer has no upstream: {greeting}");
        assert!(greeting["upstream_status"].is_null() && greeting["referer"].is_null(), "{greeting}");
        assert_eq!(greeting["request_id"].as_str().unwrap().len(), 32, "an id was made: {greeting}");

        let nowhere = find("/x");
        assert_eq!(nowhere["status"], 404);
        assert!(nowhere["route"].is_null(), "{nowhere}");

        let down = find("/down");
        assert_eq!(down["status"], 502);
        assert_eq!(down["backend"], "dead");
        assert!(down["upstream_addr"].as_str().is_some(), "the endpoint that refused is named: {down}");
        assert!(down["upstream_status"].is_null(), "the backend never answered: {down}");

        let h2rec = find("/h2/path");
        assert_eq!(h2rec["protocol"], "HTTP/2.0");
        assert_eq!(h2rec["user_agent"], "h2probe");
        assert_eq!(h2rec["upstream_status"], 200, "{h2rec}");
        assert_eq!(h2rec["status"], 200);
        assert_eq!(h2rec["backend"], "app");
        assert_eq!(h2rec["bytes_out"].as_u64(), Some(over_h2.body.len() as u64), "{h2rec}");
        assert_eq!(over_h2.header("x-request-id"), h2rec["request_id"].as_str());
    }
}

/// Static routes compile into generation 1.
fn d_generation_one() -> u64 {
    1
}

#[test]
fn text_records_are_one_line_each() {
    let backend = Backend::start("app");
    let dir = temp_dir("access-text");
    let file = dir.join("access.log");
    let d = daemon_with(routes(&yaml(backend.addr)), IoDriver::IoUring, |c| {
        c.access_log = Some(log_to(&file, Format::Text))
    });
    let mut conn = Conn::open(d.http_addr());
    conn.send(b"GET /t HTTP/1.1\r\nHost: app.test\r\nUser-Agent: a \"quoted\" agent\r\nX-Request-ID: abc\r\n\r\n");
    assert_eq!(conn.read_response().status, 200);
    d.shutdown();
    let lines = lines(&file);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(
        line.contains(
            " \"GET app.test /t HTTP/1.1\" gen=1 id=abc trace=- tls=- sni=- ua=\"a\\x20\\x22quoted\\x22\\x20agent\" ref=- -> 200 in="
        ),
        "{line}"
    );
    assert!(
        line.contains(&format!(" upstream={} ", backend.addr))
            && line.ends_with(" upstream_status=200 route=routes[0] backend=app"),
        "{line}"
    );
}

#[test]
fn skip_paths_errors_only_and_sampling_choose_what_is_logged() {
    let backend = Backend::start("app");
    let dir = temp_dir("access-knobs");
    let skip = dir.join("skip.log");
    let d = daemon_with(routes(&yaml(backend.addr)), IoDriver::IoUring, |c| {
        let mut log = log_to(&skip, Format::Json);
        log.skip_paths = vec!["/healthz".into()];
        c.access_log = Some(log);
    });
    for path in ["/healthz", "/healthz?probe=1", "/healthz/deeper", "/other"] {
        assert_eq!(get(d.http_addr(), "hi.test", path).status, 200);
    }
    d.shutdown();
    // Each worker has its own ring: records of different workers are not in request order.
    let mut paths: Vec<String> = records(&skip).iter().map(|r| r["path"].as_str().unwrap().to_string()).collect();
    paths.sort();
    assert_eq!(paths, ["/healthz/deeper", "/other"], "only the exact path is skipped, whatever its query");

    let errors = dir.join("errors.log");
    let d = daemon_with(routes(&yaml(backend.addr)), IoDriver::IoUring, |c| {
        let mut log = log_to(&errors, Format::Json);
        log.errors_only = true;
        c.access_log = Some(log);
    });
    assert_eq!(get(d.http_addr(), "hi.test", "/ok").status, 200);
    assert_eq!(get(d.http_addr(), "nowhere.test", "/missing").status, 404);
    d.shutdown();
    let statuses: Vec<u64> = records(&errors).iter().map(|r| r["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [404]);

    let sampled = dir.join("sampled.log");
    let d = daemon_with(routes(&yaml(backend.addr)), IoDriver::IoUring, |c| {
        let mut log = log_to(&sampled, Format::Json);
        log.success_sample = 0.25;
        c.access_log = Some(log);
    });
    let mut conn = Conn::open(d.http_addr());
    for _ in 0..400 {
        assert_eq!(conn.get("hi.test", "/s").status, 200);
    }
    assert_eq!(conn.get("nowhere.test", "/e").status, 404);
    d.shutdown();
    let recs = records(&sampled);
    let successes = recs.iter().filter(|r| r["status"] == 200).count();
    assert!((50..=150).contains(&successes), "about a quarter of 400 successes: {successes}");
    assert_eq!(recs.iter().filter(|r| r["status"] == 404).count(), 1, "errors are always logged");
}

#[test]
fn records_that_do_not_fit_are_dropped_and_counted() {
    let dir = temp_dir("access-full");
    let file = dir.join("access.log");
    let d = daemon_with(routes(HELLO), IoDriver::IoUring, |c| {
        c.workers = 1;
        let mut log = log_to(&file, Format::Json);
        // A ring of 2 KiB that the writer does not drain while the test runs: it fills.
        log.buffer_bytes = 2048;
        log.flush_interval = Duration::from_secs(3600);
        log.skip_paths = vec!["/sync".into()];
        c.access_log = Some(log);
    });
    std::thread::sleep(Duration::from_millis(100));
    let mut conn = Conn::open(d.http_addr());
    let sent = 60;
    for _ in 0..sent {
        assert_eq!(conn.get("h", "/fill").status, 200);
    }
    // One worker, one connection: once this (unlogged) request is answered, every earlier one has
    // been accounted.
    assert_eq!(conn.get("h", "/sync").status, 200);
    let text = metrics(d.admin_addr());
    let dropped = sample(&text, "ramjet_access_log_dropped_total").expect("the counter is exported") as usize;
    assert!(dropped >= sent - 10, "a 2 KiB ring holds a few records: {dropped} dropped of {sent}");
    d.shutdown();
    let written = records(&file).len();
    assert!(written > 0);
    assert_eq!(written + dropped, sent, "every request is either logged or counted as dropped");
}

#[test]
fn the_binary_reopens_its_log_file_on_sighup() {
    let dir = temp_dir("access-hup");
    let file = dir.join("access.log");
    let log = ["--access-log", file.to_str().unwrap(), "--access-log-format", "json"];
    let (mut child, http, _) = start_binary(&hello_routes(&dir), &log, Stdio::null());
    assert_eq!(get(http, "h", "/before").status, 200);
    assert!(eventually(Duration::from_secs(5), || lines(&file).len() == 1), "the first record is written");

    // logrotate: move the file away, then SIGHUP.
    let rotated = PathBuf::from(format!("{}.1", file.display()));
    std::fs::rename(&file, &rotated).unwrap();
    Command::new("kill").args(["-HUP", &child.id().to_string()]).status().unwrap();
    assert!(eventually(Duration::from_secs(5), || file.exists()), "the file is created again on SIGHUP");
    assert_eq!(get(http, "h", "/after").status, 200);
    assert!(eventually(Duration::from_secs(5), || lines(&file).len() == 1), "the new record goes to the new file");
    let _ = child.kill();
    let _ = child.wait();
    assert!(lines(&rotated)[0].contains("\"path\":\"/before\""));
    assert!(lines(&file)[0].contains("\"path\":\"/after\""));
}

#[test]
fn request_ids_are_kept_or_made_sent_upstream_and_returned() {
    let backend = Backend::start("app");
    for driver in DRIVERS {
        let d = daemon_with(routes(&yaml(backend.addr)), driver, |_| {});
        let http = d.http_addr();
        let upstream_ids = |body: &str| -> Vec<String> {
            body.lines()
                .filter_map(|l| l.strip_prefix("header="))
                .filter_map(|h| h.split_once(':'))
                .filter(|(k, _)| k.eq_ignore_ascii_case("x-request-id"))
                .map(|(_, v)| v.trim().to_string())
                .collect()
        };

        // A valid id is kept.
        let kept = request(
            http,
            "GET /k HTTP/1.1\r\nHost: app.test\r\nX-Request-ID: client-id.1\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(upstream_ids(&kept.body), ["client-id.1"], "{driver:?}: {}", kept.body);
        assert_eq!(kept.header("x-request-id"), Some("client-id.1"));

        // None: one is made, the same upstream and back.
        let made = get(http, "app.test", "/m");
        let ids = upstream_ids(&made.body);
        assert_eq!(ids.len(), 1, "{}", made.body);
        assert!(ids[0].len() == 32 && ids[0].bytes().all(|b| b.is_ascii_hexdigit()), "{ids:?}");
        assert_eq!(made.head.matches("x-request-id").count(), 1, "{}", made.head);
        assert_eq!(made.header("x-request-id"), Some(ids[0].as_str()));
        let again = get(http, "app.test", "/m");
        assert_ne!(again.header("x-request-id"), made.header("x-request-id"), "each request its own id");

        // Unsafe to log or forward as it is: replaced.
        let bad =
            request(http, "GET /b HTTP/1.1\r\nHost: app.test\r\nX-Request-ID: a\"b,c\r\nConnection: close\r\n\r\n");
        let ids = upstream_ids(&bad.body);
        assert_eq!(ids.len(), 1, "{}", bad.body);
        assert_eq!(ids[0].len(), 32);

        // Answers ramjet writes itself carry it too.
        let own =
            request(http, "GET /x HTTP/1.1\r\nHost: nowhere.test\r\nX-Request-ID: mine\r\nConnection: close\r\n\r\n");
        assert_eq!((own.status, own.header("x-request-id")), (404, Some("mine")));

        // HTTP/2.
        let mut h2 = H2Client::connect(http);
        let r = h2.request("GET", "app.test", "/h2", &[("x-request-id", "h2-id")], b"", false).unwrap();
        assert_eq!(upstream_ids(&r.text()), ["h2-id"]);
        assert_eq!(r.header("x-request-id"), Some("h2-id"));
        let r = h2.get("app.test", "/h2made");
        let ids = upstream_ids(&r.text());
        assert_eq!(ids.len(), 1);
        assert_eq!(r.header("x-request-id"), Some(ids[0].as_str()));
        d.shutdown();
    }
}

#[test]
fn trace_context_passes_through_untouched() {
    let backend = Backend::start("app");
    let d = daemon_with(routes(&yaml(backend.addr)), IoDriver::IoUring, |_| {});
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let tracestate = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7";
    let raw = format!(
        "GET /trace HTTP/1.1\r\nHost: app.test\r\ntraceparent: {traceparent}\r\nTraceState: {tracestate}\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(request(d.http_addr(), &raw).status, 200);
    let received = backend.received();
    assert!(received.contains(&format!("\r\ntraceparent: {traceparent}\r\n")), "{received}");
    assert!(
        received.contains(&format!("\r\nTraceState: {tracestate}\r\n")),
        "byte for byte, name case too: {received}"
    );

    let mut h2 = H2Client::connect(d.http_addr());
    let r = h2
        .request("GET", "app.test", "/trace2", &[("traceparent", traceparent), ("tracestate", tracestate)], b"", false)
        .unwrap();
    assert!(r.text().contains(&format!("header=traceparent: {traceparent}\n")), "{}", r.text());
    assert!(r.text().contains(&format!("header=tracestate: {tracestate}\n")), "{}", r.text());
    d.shutdown();
}

#[test]
fn an_access_log_that_cannot_be_written_refuses_to_start() {
    let dir = temp_dir("access-refuse");
    let routes_file = hello_routes(&dir);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_ramjet"))
            .args(["--static-routes", routes_file.to_str().unwrap(), "--http-addr", "127.0.0.1:0"])
            .args(["--admin-addr", "127.0.0.1:0"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--access-log", "/nonexistent/dir/access.log"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--access-log /nonexistent/dir/access.log: cannot open for appending"), "{err}");
    let out = run(&["--check", "--access-log", "/nonexistent/dir/access.log"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the directory /nonexistent/dir does not exist"));
    let fine = dir.join("later.log");
    let out = run(&["--check", "--access-log", fine.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!fine.exists(), "--check creates nothing");
    let out = run(&["--access-log-sample", "1.5"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a share between 0 and 1"));
}

#[test]
fn a_stdout_nobody_reads_drops_records_and_does_not_hold_up_shutdown() {
    let dir = temp_dir("access-stuck");
    // stdout is a pipe this test never reads: once its 64 KiB are full, the writer blocks.
    let log = ["--access-log", "stdout", "--access-log-buffer-kib", "16"];
    let (mut child, http, admin) = start_binary(&hello_routes(&dir), &log, Stdio::piped());
    let mut conn = Conn::open(http);
    for _ in 0..2000 {
        assert_eq!(conn.get("h", "/a-path-long-enough-to-fill-the-pipe-sooner").status, 200, "requests never wait");
    }
    assert_eq!(conn.get("h", "/sync").status, 200);
    let dropped = sample(&metrics(admin), "ramjet_access_log_dropped_total").unwrap();
    assert!(dropped > 0.0, "records that found no room were counted");
    let started = std::time::Instant::now();
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(started.elapsed() < Duration::from_secs(15), "shutdown took {:?}", started.elapsed());
}

/// ingress-nginx's `log-format-upstream` with `log-format-escape-json` / `-none`
/// (test/e2e/settings/log-format.go), as `--access-log-template` and `--access-log-escape`: the
/// line is the template with the request's fields in it, escaped as nginx escapes them — `json`
/// (`\"`, an absent field empty), nginx's default (`\x22`, an absent field `-`), or `none`.
/// The variables ingress-nginx's default line uses are filled in too, over HTTP/1.1 and HTTP/2.
#[test]
fn a_template_of_ones_own_is_written_as_ingress_nginx_writes_it() {
    use ramjet_dataplane::{LogEscape, LogTemplate};
    let backend = Backend::start("app");
    let cases = [
        (
            LogEscape::Json,
            "header1",
            "json",
            r#"{"my_header1":"Here is \"header1\" with json escape", "my_header2":""}"#,
        ),
        (
            LogEscape::Default,
            "header3",
            "default",
            r#"{"my_header1":"Here is \x22header3\x22 with default escape", "my_header2":"-"}"#,
        ),
        (LogEscape::None, "header5", "none", r#"{"my_header1":"Here is "header5" with none escape", "my_header2":""}"#),
    ];
    for (escape, header, name, wanted) in cases {
        let dir = temp_dir("access-template");
        let file = dir.join("access.log");
        let line = "\"{\"my_header1\":\"$http_header1\", \"my_header2\":\"$http_header2\"}\" $remote_addr $request \
                    $status $proxy_upstream_name $upstream_status $request_length $req_id";
        let line = if header == "header1" {
            line.to_string()
        } else {
            line.replace("$http_header1", &format!("$http_{header}"))
        };
        let (template, missing) = LogTemplate::parse(&line, escape);
        assert!(missing.is_empty(), "{missing:?}");
        let d = daemon_with(routes(&yaml(backend.addr)), IoDriver::Auto, |c| {
            let mut settings = log_to(&file, Format::Json);
            settings.template = Some(std::sync::Arc::new(template));
            c.access_log = Some(settings);
        });
        let value = format!("Here is \"{header}\" with {name} escape");
        let r = Conn::open(d.http_addr()).get_with(
            "app.test",
            "/a?b=1",
            &format!("{header}: {value}\r\nX-Request-ID: r-{name}\r\n"),
        );
        assert_eq!(r.status, 200);
        let mut h2 = H2Client::connect(d.http_addr());
        assert_eq!(h2.request("GET", "app.test", "/h2", &[("header1", "two")], b"", false).unwrap().status, 200);
        drop(h2);
        assert!(eventually(Duration::from_secs(5), || lines(&file).len() == 2), "{:?}", lines(&file));
        d.shutdown();
        // Each worker writes its own records: in any order.
        let mut lines = lines(&file);
        lines.sort_by_key(|l| l.contains("/h2"));
        assert!(
            lines[0].starts_with(&format!("\"{wanted}\" 127.0.0.1 GET /a?b=1 HTTP/1.1 200 app 200 ")),
            "{name}: {}",
            lines[0]
        );
        assert!(lines[0].ends_with(&format!(" r-{name}")), "{}", lines[0]);
        if escape == LogEscape::Json {
            assert!(
                lines[1].contains(r#""my_header1":"two""#) && lines[1].contains(" GET /h2 HTTP/2.0 200 "),
                "{}",
                lines[1]
            );
        }
    }
}
