//! The `ramjet` binary as a user runs it: validation before binding, double start, drain on SIGTERM.

use ramjet_test_support as support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::backend::Backend;
use support::client::Conn;
use support::{eventually, free_port, temp_dir};

fn ramjet() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ramjet"));
    c.env("RAMJET_LOG", "info");
    c
}

fn run(args: &[&str]) -> Output {
    ramjet().args(args).output().unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const HELLO: &str = "backends:\n  hello: { respond: { status: 200, body: \"hello from ramjet\\n\" } }\nroutes:\n  - { path: /, backend: hello }\n";

struct Running {
    child: Child,
    http: SocketAddr,
    https: SocketAddr,
    admin: SocketAddr,
}

impl Running {
    fn start(routes: &str, extra: &[&str], env: &[(&str, &str)]) -> Running {
        Self::start_with_https(routes, SocketAddr::from(([127, 0, 0, 1], free_port())), extra, env)
    }

    fn start_with_https(routes: &str, https: SocketAddr, extra: &[&str], env: &[(&str, &str)]) -> Running {
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut cmd = ramjet();
        cmd.args(["--static-routes", routes, "--workers", "2", "--io-driver", "auto"])
            .args([
                "--http-addr",
                &http.to_string(),
                "--https-addr",
                &https.to_string(),
                "--admin-addr",
                &admin.to_string(),
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let ready = eventually(Duration::from_secs(20), || std::net::TcpStream::connect(http).is_ok());
        if !ready {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("daemon did not start: {}", String::from_utf8_lossy(&out.stderr));
        }
        Running { child, http, https, admin }
    }

    fn signal(&self, sig: &str) {
        Command::new("kill").args([sig, &self.child.id().to_string()]).status().unwrap();
    }

    /// Stops it and returns (exit success, stderr).
    fn stop(mut self) -> (bool, String) {
        self.signal("-TERM");
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        for line in BufReader::new(self.child.stderr.take().unwrap()).lines() {
            err.push_str(&line.unwrap());
            err.push('\n');
        }
        (status.success(), err)
    }
}

#[test]
fn check_validates_without_binding_and_names_file_line_field() {
    let dir = temp_dir("check");
    let good = write(&dir, "good.yaml", HELLO);
    let out = run(&["--check", "--static-routes", &good]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (1 routes"));

    let bad = write(
        &dir,
        "bad.yaml",
        "backends:\n  a: { endpoints: [\"127.0.0.1:1\"] }\nroutes:\n  - { path: /, backend: nope }\n",
    );
    let out = run(&["--check", "--static-routes", &bad]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{bad}:4:")) && err.contains("routes[0].backend: unknown backend `nope`"), "{err}");

    let unknown_field = write(&dir, "field.yaml", "backends: {}\nrouts: []\n");
    let err = String::from_utf8_lossy(&run(&["--check", "--static-routes", &unknown_field]).stderr).to_string();
    assert!(err.contains(":2:") && err.contains("unknown field `routs`"), "{err}");

    let missing = run(&["--check", "--static-routes", "/nonexistent/routes.yaml"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/routes.yaml: cannot read"));
}

#[test]
fn bad_operator_input_refuses_to_start_with_a_reason() {
    let dir = temp_dir("refuse");
    let routes = write(&dir, "r.yaml", HELLO);
    let out = run(&["--static-routes", &routes, "--audit-webhook", "https://collector:8443/audit"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("https:// is not supported"));

    let out = run(&["--static-routes", &routes, "--admin-token-file", "/nonexistent/token"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--admin-token-file /nonexistent/token: cannot read"));
    let empty = write(&dir, "empty-token", "\n");
    let out = run(&["--static-routes", &routes, "--admin-token-file", &empty]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the file is empty"));

    let out = run(&["--static-routes", &routes, "--upstream-timeout", "soon"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a duration"));
}

#[test]
fn a_second_daemon_on_the_same_ports_is_refused() {
    let dir = temp_dir("double");
    let routes = write(&dir, "r.yaml", HELLO);
    let first = Running::start(&routes, &[], &[]);
    // Same HTTP port, different admin port: the HTTP bind is refused despite SO_REUSEPORT.
    let out = run(&[
        "--static-routes",
        &routes,
        "--io-driver",
        "auto",
        "--http-addr",
        &first.http.to_string(),
        "--admin-addr",
        &format!("127.0.0.1:{}", free_port()),
        "--https-addr",
        &format!("127.0.0.1:{}", free_port()),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already in use (is another ramjet running?)"));
    // Same admin port.
    let out = run(&["--static-routes", &routes, "--admin-addr", &first.admin.to_string()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already in use"));
    // The first one still serves every connection.
    for _ in 0..10 {
        assert_eq!(Conn::open(first.http).get("h", "/").body, "hello from ramjet\n");
    }
    let (ok, _) = first.stop();
    assert!(ok);
}

#[test]
fn sigterm_drains_in_flight_requests_and_exits_zero() {
    let slow = Backend::start("slow");
    let dir = temp_dir("drain");
    let routes = write(
        &dir,
        "r.yaml",
        &format!(
            "backends:\n  slow: {{ endpoints: [\"{}\"] }}\nroutes:\n  - {{ path: /, backend: slow }}\n",
            slow.addr
        ),
    );
    for env in [&[][..], &[("MONOIO_FORCE_LEGACY_DRIVER", "1")][..]] {
        // The drain itself: no delay before it (`sigterm_first_takes_the_daemon_out_of_rotation`).
        let daemon = Running::start(&routes, &["--shutdown-delay", "0s"], env);
        let idle = Conn::open(daemon.http);
        let http = daemon.http;
        let in_flight = std::thread::spawn(move || Conn::open(http).get("h", "/slow/700"));
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        daemon.signal("-TERM");
        // New connections are refused once draining started.
        assert!(eventually(Duration::from_secs(5), || std::net::TcpStream::connect(http).is_err()));
        let resp = in_flight.join().unwrap();
        assert_eq!(resp.status, 200, "the in-flight request completes");
        assert!(resp.body.contains("target=/slow/700"));
        let (ok, log) = daemon.stop();
        assert!(ok, "exit 0 after draining: {log}");
        assert!(started.elapsed() < Duration::from_secs(10), "idle keep-alive connections do not hold the drain");
        drop(idle);
        let driver = if env.is_empty() { "driver io_uring" } else { "MONOIO_FORCE_LEGACY_DRIVER is set" };
        assert!(log.contains(driver), "{log}");
        assert!(!log.contains('\x1b'), "no terminal colour codes in a log that goes to a pipe: {log:?}");
    }
}

/// What a rolling update needs: on SIGTERM `/readyz` fails at once, but the listeners keep
/// accepting for `--shutdown-delay` (the endpoint's removal takes that long to reach every load
/// balancer), and every connection made then is served; only after it do they close and the
/// daemon drains. A client at a steady rate sees no refused connection and no failed request
/// until the delay is over; a busy keep-alive connection is told `Connection: close` during the
/// delay, so its client moves on before the drain closes what is left.
#[test]
fn sigterm_first_takes_the_daemon_out_of_rotation_then_drains() {
    let dir = temp_dir("shutdown-delay");
    let routes = write(&dir, "r.yaml", HELLO);
    let delay = Duration::from_millis(1500);
    let daemon = Running::start(&routes, &["--shutdown-delay", "1500ms"], &[]);
    let (http, admin) = (daemon.http, daemon.admin);
    let ready = || Conn::open(admin).get("x", "/readyz");
    assert!(eventually(Duration::from_secs(5), || ready().status == 200), "never ready");
    let mut kept = Conn::open(http);
    assert_eq!(kept.get("h", "/").header("connection"), None, "keep-alive before SIGTERM");
    let sent = Instant::now();
    daemon.signal("-TERM");
    assert!(eventually(Duration::from_millis(500), || ready().status == 503), "/readyz still says ready after SIGTERM");
    assert_eq!(ready().body, "shutting down\n");
    let told = kept.get("h", "/");
    assert_eq!(
        (told.status, told.header("connection")),
        (200, Some("close")),
        "a busy keep-alive connection during the delay"
    );
    assert!(kept.is_closed());
    // New connections, one every 50 ms through the delay: each is accepted and answered.
    let mut served = 0;
    while sent.elapsed() < delay - Duration::from_millis(300) {
        let resp = Conn::open(http).get("h", "/");
        assert_eq!((resp.status, resp.body.as_str()), (200, "hello from ramjet\n"), "during the delay");
        served += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(served >= 10, "only {served} connections during the delay");
    // Then the listeners close and the daemon exits.
    assert!(eventually(Duration::from_secs(5), || std::net::TcpStream::connect(http).is_err()));
    assert!(sent.elapsed() >= delay, "the listeners closed before the delay was over");
    let (ok, log) = daemon.stop();
    assert!(ok, "exit 0: {log}");
    assert!(log.contains("accepting for --shutdown-delay"), "{log}");
}

/// `--version` says which commit the binary is, and `completions SHELL` prints a script the shell
/// accepts that completes the flags.
#[test]
fn version_names_the_commit_and_completions_complete_the_flags() {
    let out = run(&["--version"]);
    assert!(out.status.success());
    let version = String::from_utf8(out.stdout).unwrap();
    // `ramjet 0.1.0 (0123456789ab 2026-12-05)`: the tests run in a git checkout, so both are known.
    let (name, build) = version.trim_end().split_once(" (").unwrap_or_else(|| panic!("{version:?}"));
    assert_eq!(name, format!("ramjet {}", env!("CARGO_PKG_VERSION")));
    let (commit, date) = build.trim_end_matches(')').split_once(' ').unwrap_or_else(|| panic!("{version:?}"));
    assert!(commit.len() == 12 && commit.bytes().all(|b| b.is_ascii_hexdigit()), "{version:?}");
    assert!(date.len() == 10 && date.as_bytes()[4] == b'-' && date.as_bytes()[7] == b'-', "{version:?}");
    let dir = temp_dir("completions");
    let out = run(&["completions", "bash"]);
    assert!(out.status.success());
    let script = write(&dir, "ramjet.bash", &String::from_utf8(out.stdout).unwrap());
    // Sourced by bash, then asked what follows `ramjet --shut`.
    let probe = format!(
        "source {script}; COMP_WORDS=(ramjet --shut); COMP_CWORD=1; _ramjet ramjet --shut ramjet; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "--shutdown-delay");
    for shell in ["zsh", "fish"] {
        let out = run(&["completions", shell]);
        assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains("shutdown-delay"), "{shell}");
    }
}

/// `--default-certificate` is read again when its files change (cert-manager renewing a mounted
/// Secret): the next handshake gets the new certificate, with no restart and no dropped listener.
/// A half-written renewal (a key that does not match) keeps the previous one in service.
#[test]
fn the_default_certificate_is_reloaded_when_its_files_change() {
    ramjet::install_crypto();
    let pki = support::pki::Pki::new("default-reload");
    pki.leaf("first", &["first.test"]);
    pki.leaf("second", &["second.test"]);
    let cert = pki.path("default.crt");
    let key = pki.path("default.key");
    let copy = |from: &str| {
        std::fs::copy(pki.path(&format!("{from}.crt")), &cert).unwrap();
        std::fs::copy(pki.path(&format!("{from}.key")), &key).unwrap();
    };
    copy("first");
    let routes = write(&pki.dir, "r.yaml", HELLO);
    let https = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let args = ["--default-certificate", cert.to_str().unwrap(), "--default-certificate-key", key.to_str().unwrap()];
    let daemon = Running::start_with_https(&routes, https, &args, &[]);
    // The subject of the certificate served to a name ramjet has no certificate for.
    let subject = || support::client::curl_https(https.port(), "any.test", true).subject;
    assert!(subject().contains("first.test"), "{}", subject());
    // Half a renewal: the new certificate with the old key. Refused; the first one stays.
    std::fs::copy(pki.path("second.crt"), &cert).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(subject().contains("first.test"), "a certificate without its key was served");
    // The rest of it.
    std::fs::copy(pki.path("second.key"), &key).unwrap();
    assert!(eventually(Duration::from_secs(10), || subject().contains("second.test")), "{}", subject());
    let (ok, log) = daemon.stop();
    assert!(ok, "{log}");
    assert!(log.contains("default certificate changed but cannot be used"), "{log}");
    assert!(log.contains("default certificate reloaded"), "{log}");
}

/// Static routes without a certificate leave the HTTPS port alone: nothing could be served there,
/// so a second daemon with the same `--https-addr` starts, and the log says HTTPS is off and why.
/// A default certificate (or a `tls:` entry) is something to serve: then the port is bound.
#[test]
fn https_is_bound_only_when_a_certificate_can_be_served() {
    let dir = temp_dir("https-off");
    let routes = write(&dir, "r.yaml", HELLO);
    let first = Running::start(&routes, &[], &[]);
    drop(std::net::TcpListener::bind(first.https).expect("the HTTPS port was bound without a certificate"));
    let second = Running::start_with_https(&routes, first.https, &[], &[]);
    assert_eq!(Conn::open(second.http).get("h", "/").body, "hello from ramjet\n");
    let (ok, log) = second.stop();
    let log = without_colours(&log);
    assert!(ok, "{log}");
    assert!(log.contains("https=off"), "{log}");
    assert!(
        log.contains(&format!("--https-addr {} is not bound: the static routes have no `tls:` entry", first.https)),
        "{log}"
    );
    let (ok, log) = first.stop();
    assert!(ok && without_colours(&log).contains("https=off"), "{log}");

    let cert = rcgen::generate_simple_self_signed(vec!["example.com".to_string()]).unwrap();
    let crt = write(&dir, "default.crt", &cert.cert.pem());
    let key = write(&dir, "default.key", &cert.signing_key.serialize_pem());
    let with_cert = Running::start(&routes, &["--default-certificate", &crt, "--default-certificate-key", &key], &[]);
    let https = with_cert.https;
    assert!(std::net::TcpStream::connect(https).is_ok(), "HTTPS is served with a default certificate");
    let (ok, log) = with_cert.stop();
    assert!(ok && without_colours(&log).contains(&format!("https={https}")), "{log}");
}

/// The log with its ANSI colour sequences taken out.
fn without_colours(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            chars.by_ref().find(|c| c.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

/// `--metrics-addr`: a listener for Prometheus and the kubelet that serves `/metrics` and the
/// probes and nothing else; a pin sent to it changes nothing and says where the admin API is.
#[test]
fn the_metrics_listener_serves_probes_and_metrics_and_nothing_that_changes() {
    let dir = temp_dir("metrics-listener");
    let routes = write(&dir, "r.yaml", HELLO);
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let daemon = Running::start(&routes, &["--metrics-addr", &metrics.to_string()], &[]);
    let get = |path: &str| Conn::open(metrics).get("x", path);
    assert!(eventually(Duration::from_secs(5), || get("/readyz").status == 200), "never ready");
    assert_eq!(get("/healthz").status, 200);
    let text = get("/metrics");
    assert!(text.status == 200 && text.body.contains("ramjet_serving_generation 1"), "{}", text.body);
    for path in ["/admin/generations", "/admin/traffic", "/admin/route?host=a&path=/"] {
        let r = get(path);
        assert_eq!(r.status, 404, "{path}");
        assert!(r.body.contains("the admin API is on --admin-addr"), "{path}: {}", r.body);
    }
    let pin = support::client::request(
        metrics,
        "POST /admin/rollback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16\r\nConnection: close\r\n\r\n{\"generation\":1}",
    );
    assert_eq!(pin.status, 404, "{}", pin.body);
    let generations = Conn::open(daemon.admin).get("x", "/admin/generations");
    assert!(generations.body.contains("\"pinned\":null"), "nothing was pinned: {}", generations.body);
    let (ok, log) = daemon.stop();
    assert!(ok, "{log}");
}
