//! `ramjet-top --fleet` against three real daemons on three loopback addresses behind one name
//! (given with `--resolve`, as cluster DNS would give the chart's headless fleet Service): the same
//! routes compile to the same digest under different generation numbers, and one command pins or
//! releases all of them.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ramjet::{Daemon, DaemonConfig};

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
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
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

/// Runs `ramjet-top --fleet edge-fleet:PORT --resolve ...` with `args`; (exit code, stdout).
fn top(port: u16, args: &[&str]) -> (i32, String) {
    let addrs: Vec<String> = REPLICAS.iter().map(|ip| IpAddr::from(*ip).to_string()).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_ramjet-top"))
        .args(["--fleet", &format!("edge-fleet:{port}"), "--resolve", &format!("edge-fleet:{}", addrs.join(","))])
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
    let dir = std::env::temp_dir().join(format!("ramjet-fleet-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong = dir.join("wrong");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
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
