//! `ramjet-top --fleet` against three real daemons on three loopback addresses behind one name
//! (given with `--resolve`, as cluster DNS would give the chart's headless fleet Service): the same
//! routes compile to the same digest under different generation numbers, and one command pins or
//! releases all of them; and the fleet view, the same binary in a pseudo-terminal, doing the same
//! with keys.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ramjet::{Daemon, DaemonConfig};
use ramjet_top::client::{AdminClient, Token};
use support::{token_file, Top};

fn routes(body: &str) -> ramjet_control::routes_file::StaticRoutes {
    let yaml = format!(
        "backends:\n  b: {{ respond: {{ status: 200, body: \"{body}\" }} }}\nroutes:\n  - {{ path: /, backend: b }}\n"
    );
    ramjet_control::routes_file::parse(&yaml, Path::new("."), "test.yaml").expect("the test routes parse")
}

const REPLICAS: [[u8; 4]; 3] = [[127, 0, 0, 1], [127, 0, 0, 2], [127, 0, 0, 3]];

/// Three daemons, each on its own loopback address with the same admin port. Replica i went
/// through i extra generations first, so the same table has a different number on each.
fn fleet(token: Option<&str>) -> (Vec<Daemon>, u16) {
    let port = ramjet_test_support::free_port();
    let daemons = REPLICAS
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let mut config = DaemonConfig::local(routes("first"));
            config.workers = 1;
            config.admin_addr = SocketAddr::from((*ip, port));
            config.admin_token = token.map(str::to_string);
            let d = Daemon::start(config).expect("a replica starts");
            for n in 0..i {
                d.submit(routes(&format!("detour {n}")));
                wait(&d, 2 + n as u64);
            }
            d.submit(routes("good"));
            wait(&d, 2 + i as u64);
            d
        })
        .collect();
    (daemons, port)
}

fn wait(d: &Daemon, generation: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.published.current().number != generation {
        assert!(Instant::now() < deadline, "generation {generation} never served");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn served(d: &Daemon) -> String {
    let mut stream = std::net::TcpStream::connect(d.http_addr()).unwrap();
    use std::io::{Read, Write};
    stream.write_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.rsplit("\r\n\r\n").next().unwrap().to_string()
}

/// `--fleet edge-fleet:PORT --resolve edge-fleet:127.0.0.1,127.0.0.2,127.0.0.3`.
fn fleet_args(port: u16) -> [String; 4] {
    let addrs: Vec<String> = REPLICAS.iter().map(|ip| IpAddr::from(*ip).to_string()).collect();
    ["--fleet".into(), format!("edge-fleet:{port}"), "--resolve".into(), format!("edge-fleet:{}", addrs.join(","))]
}

/// Runs `ramjet-top --fleet edge-fleet:PORT --resolve ...` with `args`; (exit code, stdout).
fn top(port: u16, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ramjet-top"))
        .args(fleet_args(port))
        .args(args)
        .output()
        .expect("ramjet-top runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

fn digest_line(out: &str) -> Vec<String> {
    out.lines().filter_map(|l| l.split("digest ").nth(1)).map(|d| d[..12].to_string()).collect()
}

#[test]
fn one_command_pins_and_releases_every_replica_by_digest() {
    let (replicas, port) = fleet(None);
    let (code, out) = top(port, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 of 3 replicas answered"), "{out}");
    // The same table, three numbers.
    let digests = digest_line(&out);
    assert_eq!(digests.len(), 3, "{out}");
    assert!(digests.iter().all(|d| d == &digests[0]), "{out}");
    for (i, line) in out.lines().take(3).enumerate() {
        assert!(line.contains(&format!("serving {}", 2 + i)), "{out}");
    }
    let good = digests[0].clone();

    // A bad change reaches every replica; the brake puts the good table back everywhere.
    for d in &replicas {
        let next = d.published.current().number + 1;
        d.submit(routes("bad"));
        wait(d, next);
        assert_eq!(served(d), "bad");
    }
    let (code, out) = top(port, &["--status"]);
    assert_ne!(code, 0, "an unknown flag is refused: {out}");
    let (code, out) = top(port, &["--pin", &good[..8]]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("ok: generation").count(), 3, "{out}");
    for d in &replicas {
        assert_eq!(served(d), "good");
    }
    let (_, out) = top(port, &[]);
    assert_eq!(out.matches("PINNED").count(), 3, "{out}");

    // Release: every replica serves its newest again.
    let (code, out) = top(port, &["--release"]);
    assert_eq!(code, 0, "{out}");
    for d in &replicas {
        assert_eq!(served(d), "bad");
    }

    // One replica down: reported, the others pinned, the exit code says partial.
    let mut replicas = replicas;
    replicas.pop().unwrap().shutdown();
    let (code, out) = top(port, &["--pin", &good]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("127.0.0.3") && out.contains("FAILED"), "{out}");
    assert!(out.contains("2 of 3 replicas answered (partial)"), "{out}");
    for d in &replicas {
        assert_eq!(served(d), "good");
    }
    for d in replicas {
        d.shutdown();
    }
}

#[test]
fn a_wrong_token_changes_nothing_anywhere() {
    let (replicas, port) = fleet(Some("s3cret"));
    let wrong = token_file("fleet-wrong", "not-the-token");
    let before: Vec<u64> = replicas.iter().map(|d| d.published.current().number).collect();
    let (code, out) = top(port, &["--pin", "00000000", "--token-file", wrong.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert_eq!(out.matches("FAILED").count(), 3, "{out}");
    assert!(out.contains("0 of 3 replicas answered"), "{out}");
    let (_, status) = top(port, &[]);
    assert!(!status.contains("PINNED"), "{status}");
    assert_eq!(replicas.iter().map(|d| d.published.current().number).collect::<Vec<_>>(), before);
    // --read-only refuses before asking anyone.
    let (code, out) = top(port, &["--release", "--read-only"]);
    assert_ne!(code, 0);
    assert!(out.contains("--read-only refuses"), "{out}");
    for d in replicas {
        d.shutdown();
    }
}

/// The fleet view of the three replicas, in a pseudo-terminal, with `args` after the fleet's.
fn view(port: u16, args: &[&str]) -> Top {
    let fleet = fleet_args(port);
    let mut all: Vec<&str> = fleet.iter().map(String::as_str).collect();
    all.extend_from_slice(args);
    Top::start(&all, &[])
}

/// Every replica serves "bad", a table compiled after "good"; returns the good table's digest as
/// the views show it.
fn a_bad_change_everywhere(replicas: &[Daemon], port: u16) -> String {
    let (_, out) = top(port, &[]);
    let good = digest_line(&out)[0].clone();
    for d in replicas {
        let next = d.published.current().number + 1;
        d.submit(routes("bad"));
        wait(d, next);
        assert_eq!(served(d), "bad");
    }
    good
}

/// Selects the good table and presses `p`: the newest table ("bad") is selected first, as most
/// replicas serve it, and the good one is the next row.
fn ask_to_pin(top: &mut Top, good: &str) {
    top.wait_for("> ");
    top.press("j");
    top.wait_for(&format!("> {good}"));
    top.press("p");
    top.wait_for(&format!("Pin table {good} on all 3 replicas?"));
}

fn pinned(d: &Daemon) -> Option<u64> {
    let client = AdminClient::new(&format!("http://{}", d.admin_addr()), Duration::from_secs(5), None);
    client.generations().expect("the replica answers").pinned
}

#[test]
fn the_fleet_view_pins_a_table_everywhere_then_releases_and_survives_a_dead_replica() {
    let (mut replicas, port) = fleet(Some("s3cret"));
    let good = a_bad_change_everywhere(&replicas, port);
    // One replica is pinned to the good table by hand already: its row differs from the others.
    let first =
        AdminClient::new(&format!("http://{}", replicas[0].admin_addr()), Duration::from_secs(5), Token::new("s3cret"));
    first.pin_digest(&good).expect("a pin by hand");
    assert_eq!(served(&replicas[0]), "good");

    let token = token_file("fleet-view", "s3cret");
    let mut top = view(port, &["--token-file", token.to_str().unwrap()]);
    top.wait_for("3 of 3 replicas answer");
    let screen = top.wait_for("· 1 DIFFER · 1 PINNED");
    for ip in ["127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        assert!(screen.contains(&format!("{ip}:{port}")), "a row per replica:\n{screen}");
    }
    let differs: Vec<&str> = screen.lines().filter(|l| l.contains("DIFFERS from most")).collect();
    assert_eq!(differs.len(), 1, "{screen}");
    assert!(differs[0].contains(&format!("127.0.0.1:{port}")) && differs[0].contains("PINNED"), "{screen}");

    ask_to_pin(&mut top, &good);
    top.wait_for("2 of 3 replicas will change");
    top.wait_for("Already serving it (pinned to it too): 1");
    top.press("y");
    top.wait_for(&format!("pin of table {good} on every replica: done on all 3 replicas"));
    top.wait_for("· 3 PINNED");
    let screen = top.wait_for(&format!("last command: pin of table {good} on every replica"));
    assert_eq!(screen.matches("ok: generation").count(), 3, "{screen}");
    assert!(!screen.contains("DIFFERS"), "{screen}");
    assert!(!screen.contains("s3cret"), "the token must never show:\n{screen}");
    for d in &replicas {
        assert_eq!(served(d), "good", "traffic switched on {}", d.admin_addr());
        assert!(pinned(d).is_some());
    }

    // u releases every replica: each serves its newest ("bad") again.
    top.press("u");
    top.wait_for("Release the pin on all 3 replicas?");
    top.wait_for("3 of 3 replicas will change: each moves to its newest generation.");
    top.press("y");
    top.wait_for("release on every replica: done on all 3 replicas");
    top.wait_for("· none pinned");
    for d in &replicas {
        assert_eq!(served(d), "bad");
        assert_eq!(pinned(d), None);
    }

    // A replica goes away: its row says so, and a pin still reaches the other two.
    replicas.pop().unwrap().shutdown();
    top.wait_for("2 of 3 replicas answer");
    let screen = top.wait_for(&format!("127.0.0.3:{port}"));
    let dead: Vec<&str> = screen.lines().filter(|l| l.contains(&format!("127.0.0.3:{port}"))).collect();
    assert!(dead.iter().any(|l| l.contains("UNREACHABLE: Connection refused")), "{screen}");
    top.wait_for(&format!("> {good}"));
    top.press("p");
    top.wait_for("2 of 3 replicas will change");
    top.wait_for("Did not answer the last poll (asked all the same): 1");
    top.press("y");
    top.wait_for(&format!("pin of table {good} on every replica: 2 of 3 replicas did it, 1 failed (see below)"));
    let screen =
        top.wait_for(&format!("127.0.0.3:{port}  FAILED: cannot reach http://127.0.0.3:{port}/admin/rollback"));
    assert_eq!(screen.matches("ok: generation").count(), 2, "{screen}");
    for d in &replicas {
        assert_eq!(served(d), "good");
    }
    top.quit();
    for d in replicas {
        d.shutdown();
    }
}

#[test]
fn the_fleet_view_with_a_wrong_token_changes_nothing_and_read_only_refuses() {
    let (replicas, port) = fleet(Some("s3cret"));
    let good = a_bad_change_everywhere(&replicas, port);
    let wrong = token_file("fleet-view-wrong", "not-the-token-0xdead");
    let mut top = view(port, &["--token-file", wrong.to_str().unwrap()]);
    top.wait_for("3 of 3 replicas answer");
    ask_to_pin(&mut top, &good);
    top.wait_for("3 of 3 replicas will change");
    top.press("y");
    top.wait_for(&format!("pin of table {good} on every replica: 0 of 3 replicas did it, 3 failed (see below)"));
    let screen = top.wait_for("FAILED: wrong admin token; nothing was changed (HTTP 401)");
    assert_eq!(screen.matches("FAILED: wrong admin token").count(), 3, "{screen}");
    assert!(!screen.contains("0xdead"), "the token must never show:\n{screen}");
    top.wait_for("· none pinned");
    for d in &replicas {
        assert_eq!(served(d), "bad");
        assert_eq!(pinned(d), None);
    }
    top.quit();

    // --read-only: the keys say so, and p and u ask nothing and send nothing.
    let mut top = view(port, &["--read-only"]);
    top.wait_for("3 of 3 replicas answer");
    top.refuses_pin_and_release("Pin table");
    std::thread::sleep(Duration::from_secs(1));
    for d in &replicas {
        assert_eq!(pinned(d), None);
    }
    top.quit();
    for d in replicas {
        d.shutdown();
    }
}

/// Produces the captures in `docs/ramjet-top.md` ("The fleet view") from a real run:
/// `cargo test -p ramjet-top --test fleet capture -- --ignored --nocapture`.
#[test]
#[ignore = "prints screens for the docs; run by hand"]
fn capture_the_fleet_view_for_the_docs() {
    let (mut replicas, port) = fleet(None);
    let good = a_bad_change_everywhere(&replicas, port);
    let first = AdminClient::new(&format!("http://{}", replicas[0].admin_addr()), Duration::from_secs(5), None);
    first.pin_digest(&good).expect("a pin by hand");
    replicas.pop().unwrap().shutdown();
    let mut top = view(port, &["--interval", "1s"]);
    top.wait_for("2 of 3 replicas answer");
    println!("--- fleet view ---\n{}", top.text());
    ask_to_pin(&mut top, &good);
    println!("--- confirm ---\n{}", top.text());
    top.press("y");
    top.wait_for("last command");
    top.wait_for("2 PINNED");
    println!("--- after ---\n{}", top.text());
    top.quit();
    for d in replicas {
        d.shutdown();
    }
}
