//! `ramjet-top` as an operator meets it: the real binary in a pseudo-terminal, its screen read
//! through a terminal emulator (vt100), against a real daemon on loopback.
//!
//! Every wait polls the screen until the text appears, with a generous deadline, so the tests hold
//! on a loaded 2-core machine.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use ramjet::{Daemon, DaemonConfig};
use serde_json::Value;
use support::{token_file, Top, DEADLINE};

/// A routes file with `n` routes: each generation differs from the one before.
fn routes(n: usize) -> ramjet_control::routes_file::StaticRoutes {
    let mut yaml = String::from(
        "backends:\n  hello: { respond: { status: 200, body: \"hello\\n\" } }\ndefaultBackend: hello\nroutes:\n",
    );
    for i in 1..=n {
        yaml.push_str(&format!("  - {{ path: /r{i}, pathType: Prefix, backend: hello }}\n"));
    }
    ramjet_control::routes_file::parse(&yaml, Path::new("."), "test.yaml").expect("the test routes parse")
}

/// A daemon on loopback with generations 1..=`generations`, generation `generations` serving.
fn daemon(admin: Option<SocketAddr>, token: Option<&str>, generations: usize) -> Daemon {
    let mut config = DaemonConfig::local(routes(1));
    config.workers = 1;
    config.admin_token = token.map(str::to_string);
    if let Some(addr) = admin {
        config.admin_addr = addr;
    }
    let daemon = Daemon::start(config).expect("the daemon starts");
    for n in 2..=generations {
        daemon.submit(routes(n));
        wait_for_daemon(&daemon, &format!("generation {n} compiled"), |g| g["newest"] == n as u64);
    }
    daemon
}

fn admin_url(daemon: &Daemon) -> String {
    format!("http://{}", daemon.admin_addr())
}

fn generations(daemon: &Daemon) -> Value {
    let url = format!("{}/admin/generations", admin_url(daemon));
    let text = ureq::get(&url).call().expect("GET /admin/generations").body_mut().read_to_string().unwrap();
    serde_json::from_str(&text).unwrap()
}

fn wait_for_daemon(daemon: &Daemon, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let g = generations(daemon);
        if done(&g) {
            return g;
        }
        assert!(Instant::now() < deadline, "the daemon never got to: {what}; it says {g}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// `ramjet-top --admin ADMIN ARGS...` in a pseudo-terminal.
fn start(admin: &str, args: &[&str], env: &[(&str, &str)]) -> Top {
    let mut all = vec!["--admin", admin];
    all.extend_from_slice(args);
    Top::start(&all, env)
}

#[test]
fn the_timeline_appears_and_p_y_pins_and_u_y_releases() {
    let daemon = daemon(None, Some("the-right-token"), 3);
    let token = token_file("pin", "the-right-token");
    let mut top = start(&admin_url(&daemon), &["--token-file", token.to_str().unwrap()], &[]);

    let screen = top.wait_for("serving generation 3");
    top.wait_for("not pinned");
    let rows: Vec<usize> =
        ["    3 ", "    2 ", "    1 "].iter().map(|r| screen.find(r).unwrap_or_else(|| panic!("{screen}"))).collect();
    assert!(rows[0] < rows[1] && rows[1] < rows[2], "newest first:\n{screen}");

    top.press("j");
    top.wait_for("generation 2  digest");
    top.press("p");
    top.wait_for("Pin generation 2?");
    top.press("y");
    top.wait_for("daemon: generation 2 is serving and pinned");
    top.wait_for("PINNED to generation 2: generation 3 is held back");
    let g = wait_for_daemon(&daemon, "pinned to 2", |g| g["pinned"] == 2);
    assert_eq!(g["serving"], 2);

    top.press("u");
    top.wait_for("Release the pin on generation 2?");
    top.press("y");
    top.wait_for("daemon: pin released; the newest generation 3 is serving");
    top.wait_until("the banner is gone", |s| !s.contains("PINNED") && s.contains("serving generation 3"));
    let g = wait_for_daemon(&daemon, "released", |g| g["pinned"].is_null());
    assert_eq!(g["serving"], 3);

    let screen = top.text();
    assert!(!screen.contains("the-right-token"), "the token must never show:\n{screen}");
    top.quit();
    daemon.shutdown();
}

#[test]
fn p_then_n_sends_nothing() {
    let daemon = daemon(None, None, 2);
    let mut top = start(&admin_url(&daemon), &[], &[]);
    top.wait_for("serving generation 2");
    top.press("j");
    top.wait_for("generation 1  digest");
    top.press("p");
    top.wait_for("Pin generation 1?");
    top.press("n");
    top.wait_for("pin of generation 1 cancelled; nothing was sent.");
    // A few more polls: still nothing pinned, on the daemon and on the screen.
    thread::sleep(Duration::from_secs(1));
    let g = generations(&daemon);
    assert!(g["pinned"].is_null(), "{g}");
    assert_eq!(g["serving"], 2);
    let screen = top.wait_for("not pinned");
    assert!(!screen.contains("PINNED"), "{screen}");
    top.quit();
    daemon.shutdown();
}

#[test]
fn read_only_refuses_pin_and_release() {
    let daemon = daemon(None, None, 2);
    let mut top = start(&admin_url(&daemon), &["--read-only"], &[]);
    top.wait_for("serving generation 2");
    top.press("j");
    top.wait_for("generation 1  digest");
    top.refuses_pin_and_release("Pin generation");
    thread::sleep(Duration::from_secs(1));
    let g = generations(&daemon);
    assert!(g["pinned"].is_null(), "{g}");
    assert_eq!(g["serving"], 2);
    top.quit();
    daemon.shutdown();
}

#[test]
fn a_wrong_token_shows_the_daemons_401_message() {
    let daemon = daemon(None, Some("the-right-token"), 2);
    let token = token_file("wrong", "a-wrong-token-0xdead");
    // The token file comes from the environment variable this time.
    let mut top = start(&admin_url(&daemon), &[], &[("RAMJET_TOP_TOKEN_FILE", token.to_str().unwrap())]);
    top.wait_for("serving generation 2");
    top.press("j");
    top.wait_for("generation 1  digest");
    top.press("p");
    top.wait_for("Pin generation 1?");
    top.press("y");
    let screen = top.wait_for("pin of generation 1 failed: wrong admin token; nothing was changed (HTTP 401)");
    assert!(!screen.contains("0xdead"), "the token must never show:\n{screen}");
    let g = generations(&daemon);
    assert!(g["pinned"].is_null(), "{g}");
    assert_eq!(g["serving"], 2);
    top.quit();
    daemon.shutdown();
}

#[test]
fn no_token_against_a_daemon_that_wants_one_says_how_to_give_it() {
    let daemon = daemon(None, Some("the-right-token"), 1);
    let mut top = start(&admin_url(&daemon), &[], &[]);
    top.wait_for("serving generation 1");
    top.press("u");
    top.wait_for("Release the pin?");
    top.press("y");
    top.wait_for("release failed: this endpoint needs `Authorization: Bearer <token>`");
    top.wait_for("--token-file PATH (or RAMJET_TOP_TOKEN_FILE)");
    top.quit();
    daemon.shutdown();
}

#[test]
fn a_dead_daemon_shows_as_unreachable_and_is_retried() {
    // A port nothing listens on (for now).
    let addr = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut top = start(&format!("http://{addr}"), &[], &[]);
    top.wait_for("UNREACHABLE");
    top.wait_for(&format!("cannot reach http://{addr}/admin/generations"));
    top.wait_until("several polls have failed", |s| {
        s.split("failed polls)").next().and_then(|l| l.rsplit('(').next()).and_then(|n| n.trim().parse::<u32>().ok())
            >= Some(3)
    });
    assert!(top.running(), "ramjet-top must keep running while the daemon is away");
    top.press("p");
    top.wait_for("nothing to pin: the daemon has not listed any generation yet");

    // The daemon comes up on that port: the next poll finds it.
    let daemon = daemon(Some(addr), None, 1);
    let screen = top.wait_for("serving generation 1");
    assert!(!screen.contains("UNREACHABLE"), "{screen}");
    top.quit();
    daemon.shutdown();
}

/// Produces the captures in `docs/ramjet-top.md` from a real run:
/// `cargo test --test top capture -- --ignored --nocapture`.
#[test]
#[ignore = "prints screens for the docs; run by hand"]
fn capture_for_the_docs() {
    let daemon = daemon(None, None, 4);
    // One backend nobody listens on, so the capture shows 5xx and upstream errors as well.
    let mut yaml = String::from(
        "backends:\n  hello: { respond: { status: 200, body: \"hello\\n\" } }\n  \
         api: { endpoints: [\"127.0.0.1:9\"] }\ndefaultBackend: hello\nroutes:\n  \
         - { path: /api, pathType: Prefix, backend: api }\n",
    );
    for i in 1..=4 {
        yaml.push_str(&format!("  - {{ path: /r{i}, pathType: Prefix, backend: hello }}\n"));
    }
    let parsed = ramjet_control::routes_file::parse(&yaml, Path::new("."), "capture.yaml");
    daemon.submit(parsed.unwrap());
    wait_for_daemon(&daemon, "generation 5", |g| g["newest"] == 5);

    let http = daemon.http_addr();
    let traffic = thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(12);
        let mut i = 0u64;
        while Instant::now() < until {
            i += 1;
            let path = if i.is_multiple_of(10) { "/api/orders" } else { "/r1" };
            if let Ok(mut s) = std::net::TcpStream::connect(http) {
                let request = format!("GET {path} HTTP/1.1\r\nHost: shop.example\r\nConnection: close\r\n\r\n");
                if s.write_all(request.as_bytes()).is_ok() {
                    let _ = s.read_to_end(&mut Vec::new());
                }
            }
            thread::sleep(Duration::from_millis(4 + i % 7));
        }
    });
    let mut top = start(&admin_url(&daemon), &["--interval", "1s"], &[]);
    top.wait_for("serving generation 5");
    thread::sleep(Duration::from_secs(8));
    println!("--- main view ---\n{}", top.text());
    top.press("jj");
    top.wait_for("generation 3  digest");
    top.press("p");
    top.wait_for("Pin generation 3?");
    println!("--- confirm ---\n{}", top.text());
    top.press("y");
    top.wait_for("PINNED to generation 3");
    thread::sleep(Duration::from_secs(2));
    println!("--- pinned ---\n{}", top.text());
    traffic.join().unwrap();
    top.quit();
    daemon.shutdown();
}
