//! The controller configuration file (`--config`) end to end: an ingress-nginx ConfigMap as the
//! file, its defaults applied to Ingresses served from files (`--manifests`), re-read when it
//! changes (a new generation), a bad edit that changes nothing, and a bad file that refuses to
//! start naming the line and the key. HSTS, on by default as in ingress-nginx, is seen by curl.

use ramjet_test_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ramjet::{ConfigFile, Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::{get, request};
use support::manifests::{ingress_class, Ingress, Service};
use support::pki::Pki;
use support::{eventually, temp_dir};

const HOST: &str = "shop.test";

/// A TLS Ingress for [`HOST`] (its own certificate) and a plain one for `open.test`, both to `backend`.
fn objects(dir: &Path, pki: &Pki, backend: std::net::SocketAddr) {
    let b64 = |f: &str| support::control_plane::base64(&std::fs::read(pki.path(f)).unwrap());
    let secret = format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: shop-tls, namespace: shop }}\ntype: kubernetes.io/tls\n\
         data:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(&format!("{HOST}.crt")),
        b64(&format!("{HOST}.key"))
    );
    let text = [
        ingress_class("ramjet"),
        Service::new("shop", "web").target_port(backend.port()).endpoints(&[backend]).yaml(),
        secret,
        Ingress::new("shop", "web").host(HOST).to("web").tls("shop-tls").yaml(),
        Ingress::new("shop", "open").host("open.test").to("web").yaml(),
    ]
    .concat();
    write(&dir.join("objects.yaml"), &text);
}

fn write(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

fn start(dir: &Path, config: Option<&Path>) -> Daemon {
    let mut daemon = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options: IngressOptions::default(),
        interval: Duration::from_millis(20),
    });
    daemon.io_driver = IoDriver::Auto;
    daemon.config = config.map(|path| {
        let mut file = ConfigFile::read(path).expect("the configuration reads");
        file.interval = Duration::from_millis(20);
        file
    });
    Daemon::start(daemon).expect("the daemon starts")
}

/// curl's answer head and status for `https://<name>/` (any certificate accepted).
fn https_head(daemon: &Daemon, name: &str, extra: &[&str]) -> (u16, String) {
    let port = daemon.https_addr().unwrap().port();
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "10", "-o", "/dev/null", "-D", "-"])
        .args(["--resolve", &format!("{name}:{port}:127.0.0.1")])
        .args(extra)
        .arg(format!("https://{name}:{port}/"))
        .output()
        .expect("curl is installed");
    let head = String::from_utf8_lossy(&out.stdout).to_string();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head)
}

fn hsts_of(head: &str) -> Option<&str> {
    let field = |l: &&str| l.to_ascii_lowercase().starts_with("strict-transport-security:");
    head.lines().find(field).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim())
}

struct Setup {
    dir: PathBuf,
    pki: Pki,
    backend: Backend,
}

fn setup(name: &str) -> Setup {
    let pki = Pki::new(&format!("{name}-pki"));
    pki.leaf(HOST, &[HOST]);
    let setup = Setup { dir: temp_dir(name), pki, backend: Backend::start("web") };
    objects(&setup.dir, &setup.pki, setup.backend.addr);
    setup
}

#[test]
fn hsts_is_on_by_default_for_hosts_with_their_own_certificate() {
    let s = setup("config-hsts-default");
    let daemon = start(&s.dir, None);
    for extra in [&[][..], &["--http2"][..], &["--http1.1"][..]] {
        let (status, head) = https_head(&daemon, HOST, extra);
        assert_eq!(status, 200, "{head}");
        assert_eq!(hsts_of(&head), Some("max-age=31536000; includeSubDomains"), "{extra:?}: {head}");
    }
    // A host served with the default certificate, and plain HTTP, get none.
    let (status, head) = https_head(&daemon, "open.test", &[]);
    assert_eq!((status, hsts_of(&head)), (200, None), "{head}");
    let plain = get(daemon.http_addr(), HOST, "/");
    assert_eq!(plain.status, 200, "without --config, ramjet redirects only when the Ingress says so");
    assert!(plain.header("strict-transport-security").is_none());
    daemon.shutdown();
}

/// test/e2e/settings/hsts.go "overriding what's set from the upstream": a backend's own
/// `Strict-Transport-Security` is replaced by the configured one, over HTTP/1.1 and HTTP/2 alike.
#[test]
fn the_configured_hsts_replaces_the_backends_own() {
    let pki = Pki::new("config-hsts-upstream-pki");
    pki.leaf(HOST, &[HOST]);
    let dir = temp_dir("config-hsts-upstream");
    let answer =
        b"HTTP/1.1 200 OK\r\nstrict-transport-security: max-age=1; includeSubDomains\r\ncontent-length: 2\r\n\r\nok";
    let backend = support::backend::ScriptedBackend::start(vec![answer.to_vec(); 2]);
    objects(&dir, &pki, backend.addr);
    let file = dir.join("config.yaml");
    write(&file, "hsts-max-age: \"86400\"\nhsts-preload: \"true\"\nhsts-include-subdomains: \"false\"\n");
    let daemon = start(&dir, Some(&file));
    for extra in ["--http1.1", "--http2"] {
        let (status, head) = https_head(&daemon, HOST, &[extra, "--url-query", "hsts=true"]);
        assert_eq!(status, 200, "{head}");
        let fields = head.to_ascii_lowercase().matches("strict-transport-security:").count();
        assert_eq!((fields, hsts_of(&head)), (1, Some("max-age=86400; preload")), "{extra}: {head}");
    }
    daemon.shutdown();
}

/// test/e2e/settings/no_tls_redirect_locations.go: with `no-tls-redirect-locations`, plain HTTP
/// to the listed paths of a redirected host is served as it is; other paths are redirected, and
/// an ACME challenge never is.
#[test]
fn no_tls_redirect_locations_are_served_over_plain_http() {
    let s = setup("config-no-tls-redirect");
    let file = s.dir.join("config").join("config.yaml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    write(&file, "no-tls-redirect-locations: \"/check-no-tls, /.well-known/acme-challenge\"\n");
    let daemon = start(&s.dir, Some(&file));
    let addr = daemon.http_addr();
    assert_eq!(get(addr, HOST, "/").status, 308);
    for path in ["/check-no-tls", "/check-no-tls/x?y=1", "/.well-known/acme-challenge/t0k3n"] {
        let r = get(addr, HOST, path);
        assert_eq!(r.status, 200, "{path}: {}", r.head);
    }
    assert_eq!(get(addr, HOST, "/other/check-no-tls").status, 308);
    daemon.shutdown();
}

#[test]
fn an_ingress_nginx_configmap_is_read_applied_and_followed() {
    let s = setup("config-configmap");
    let file = s.dir.join("controller.yaml");
    let configmap = |data: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{ name: ingress-nginx-controller, namespace: ingress-nginx }}\n\
             data:\n{data}"
        )
    };
    // Settings ramjet does not apply from the file are allowed (and logged); the rest applies.
    std::fs::create_dir_all(s.dir.join("conf")).unwrap();
    let file = s.dir.join("conf").join(file.file_name().unwrap());
    write(
        &file,
        &configmap(
            "  hsts-max-age: \"600\"\n  hsts-preload: \"true\"\n  proxy-body-size: 1k\n  worker-processes: \"4\"\n",
        ),
    );
    let daemon = start(&s.dir, Some(&file));
    let (_, head) = https_head(&daemon, HOST, &[]);
    assert_eq!(hsts_of(&head), Some("max-age=600; includeSubDomains; preload"), "{head}");
    // ingress-nginx's default ssl-redirect: plain HTTP to the TLS host is redirected, the other not.
    let plain = get(daemon.http_addr(), HOST, "/");
    assert_eq!(plain.status, 308, "{}", plain.body);
    assert_eq!(get(daemon.http_addr(), "open.test", "/").status, 200);
    // proxy-body-size: 1k for every route whose Ingress does not say.
    let body = "x".repeat(2048);
    let big = format!("POST / HTTP/1.1\r\nHost: open.test\r\nContent-Length: 2048\r\nConnection: close\r\n\r\n{body}");
    assert_eq!(request(daemon.http_addr(), &big).status, 413);
    let small = "POST / HTTP/1.1\r\nHost: open.test\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi";
    assert_eq!(request(daemon.http_addr(), small).status, 200);

    // An edit is a new generation.
    let before = daemon.published.current().number;
    write(&file, &configmap("  hsts: \"false\"\n  ssl-redirect: \"false\"\n  proxy-body-size: \"0\"\n"));
    assert!(eventually(Duration::from_secs(10), || hsts_of(&https_head(&daemon, HOST, &[]).1).is_none()));
    assert!(daemon.published.current().number > before);
    assert_eq!(get(daemon.http_addr(), HOST, "/").status, 200);
    assert_eq!(request(daemon.http_addr(), &big).status, 200);
    let audit = request(daemon.admin_addr(), "GET /admin/generations HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert!(audit.body.contains("table setting changed"), "{}", audit.body);

    // A bad edit changes nothing: the last good configuration stays.
    let serving = daemon.published.current().number;
    write(&file, &configmap("  hsts: \"maybe\"\n"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(daemon.published.current().number, serving);
    assert_eq!(get(daemon.http_addr(), HOST, "/").status, 200);
    daemon.shutdown();
}

#[test]
fn a_bad_file_refuses_to_start_naming_the_line_and_the_key() {
    let dir = temp_dir("config-bad");
    let routes = dir.join("routes.yaml");
    std::fs::write(
        &routes,
        "backends:\n  hi: { respond: { status: 200, body: hi } }\nroutes:\n  - { path: /, backend: hi }\n",
    )
    .unwrap();
    let config = dir.join("controller.yaml");
    // `ramjet --check` with this configuration: whether it passes, and what it said.
    let check = |text: &str| {
        std::fs::write(&config, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_ramjet"))
            .args(["--check", "--static-routes"])
            .arg(&routes)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        (
            out.status.success(),
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        )
    };
    let (passed, said) = check("hsts: \"true\"\nproxy-read-timeout: soon\n");
    assert!(!passed);
    let expected = format!("--config {}:2: proxy-read-timeout: `soon` is not a number of seconds", config.display());
    assert!(said.contains(&expected), "{said}");
    let (passed, said) = check("hsts-max-age: \"60\"\nuse-gzip: \"true\"\n");
    assert!(passed, "{said}");
    assert!(said.contains("use-gzip: not read by ramjet"), "{said}");
}
