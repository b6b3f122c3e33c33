//! Client certificates (ingress-nginx's `auth-tls-*`) end to end: Ingresses and Secrets in files
//! (`--manifests`), the real daemon, curl as the client with and without certificates, and a
//! backend that echoes what it was told.
//!
//! The first tests are ingress-nginx's own e2e cases (`test/e2e/annotations/authtls.go`): its
//! fixture (one Secret holding the server's certificate, its key and the client CA; a client
//! certificate `CN=<host>-client,O=Acme Co` signed by that CA; the "no certificate" client sending
//! no server name) and its expected answers. The rest are the attacks and the cases its suite does
//! not cover: another CA, an expired certificate, the optional modes, forged `ssl-client-*` fields,
//! a `Host` that is not the server name, plain HTTP, HTTP/2, TLS 1.2, a renegotiation, a broken
//! Secret.

use ramjet_test_support as support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use rcgen::{DistinguishedName, DnType, ExtendedKeyUsagePurpose};
use support::backend::Backend;
use support::manifests::{ingress_class, Ingress, Service};
use support::pki::Pki;
use support::{eventually, temp_dir};

const HOST: &str = "authtls.test";
const NGINX: &str = "nginx.ingress.kubernetes.io/";

/// ingress-nginx's fixture: a CA, the server's certificate for [`HOST`], a client certificate
/// from the CA, one from another CA, and an expired one.
struct Fixture {
    dir: PathBuf,
    pki: Pki,
    backend: Backend,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let pki = Pki::new(&format!("{name}-pki"));
        pki.leaf(HOST, &[HOST]);
        let client = |params: &mut rcgen::CertificateParams, cn: &str| {
            let mut dn = DistinguishedName::new();
            dn.push(DnType::OrganizationName, "Acme Co");
            dn.push(DnType::CommonName, cn);
            params.distinguished_name = dn;
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        };
        pki.leaf_with("client", &["client.test"], |p| client(p, &format!("{HOST}-client")));
        pki.leaf_with("expired", &["expired.test"], |p| {
            client(p, "expired-client");
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        });
        // A CA of another name: one of the same name is taken for the issuer and fails on the
        // signature ("certificate signature failure"), which optional_no_ca does not let through.
        let other = Pki::with_subject(&format!("{name}-other-pki"), "another CA");
        other.leaf_with("stranger", &["stranger.test"], |p| client(p, "stranger"));
        for f in ["stranger.crt", "stranger.key"] {
            std::fs::copy(other.path(f), pki.path(f)).unwrap();
        }
        Fixture { dir: temp_dir(name), pki, backend: Backend::start("echo") }
    }

    /// The Secret ingress-nginx's suite makes: `tls.crt`, `tls.key` and `ca.crt` in one.
    fn secret(&self, name: &str) -> String {
        let b64 = |f: &str| support::control_plane::base64(&std::fs::read(self.pki.path(f)).unwrap());
        format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: shop }}\ntype: kubernetes.io/tls\n\
             data:\n  tls.crt: {}\n  tls.key: {}\n  ca.crt: {}\n---\n",
            b64(&format!("{HOST}.crt")),
            b64(&format!("{HOST}.key")),
            b64("ca.pem")
        )
    }

    /// Writes the objects: the class, the Service, the Secret, and an Ingress for [`HOST`] with
    /// TLS and these annotations (without their prefix).
    fn write(&self, annotations: &[(&str, &str)]) {
        let mut ingress = Ingress::new("shop", "authtls").host(HOST).to("echo").tls("authtls");
        for (name, value) in annotations {
            ingress = ingress.annotation(&format!("{NGINX}{name}"), value);
        }
        let text = [
            ingress_class("ramjet"),
            Service::new("shop", "echo").target_port(self.backend.addr.port()).endpoints(&[self.backend.addr]).yaml(),
            self.secret("authtls"),
            ingress.yaml(),
        ]
        .concat();
        write(&self.dir.join("objects.yaml"), text);
    }

    fn start(&self) -> Daemon {
        let mut config = DaemonConfig::with_source(Source::Manifests {
            dir: self.dir.clone(),
            options: IngressOptions::default(),
            interval: Duration::from_millis(20),
        });
        config.io_driver = IoDriver::Auto;
        Daemon::start(config).expect("the daemon starts")
    }

    fn cert(&self, name: &str) -> (PathBuf, PathBuf) {
        (self.pki.path(&format!("{name}.crt")), self.pki.path(&format!("{name}.key")))
    }
}

/// Writes a file whole (renamed into place), as the manifest watcher expects.
fn write(path: &Path, text: String) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).unwrap();
    std::fs::rename(&temporary, path).unwrap();
}

/// What curl got.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    /// The value of a header the backend echoed (`header=<name>: <value>` in its body).
    fn upstream(&self, name: &str) -> Option<&str> {
        let prefix = format!("header={name}: ");
        self.body.lines().find_map(|l| l.strip_prefix(prefix.as_str()))
    }

    fn location(&self) -> Option<&str> {
        self.head.lines().find_map(|l| l.strip_prefix("location: ").or_else(|| l.strip_prefix("Location: ")))
    }
}

/// How a request is made.
#[derive(Clone, Copy)]
struct Ask<'a> {
    /// The name in the URL, so the server name sent (`None`: the address, so none is sent, as
    /// ingress-nginx's "no certificate" client does).
    sni: Option<&'a str>,
    cert: Option<&'a (PathBuf, PathBuf)>,
    extra: &'a [&'a str],
}

const PLAIN: Ask<'static> = Ask { sni: None, cert: None, extra: &[] };

/// `GET /` with `Host: authtls.test` over HTTPS to the daemon.
fn get(daemon: &Daemon, ask: Ask<'_>) -> Answer {
    let port = daemon.https_addr().unwrap().port();
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "10", "-D", "-", "-H", &format!("Host: {HOST}")]);
    match ask.sni {
        Some(name) => cmd.args(["--resolve", &format!("{name}:{port}:127.0.0.1"), &format!("https://{name}:{port}/")]),
        None => cmd.arg(format!("https://127.0.0.1:{port}/")),
    };
    if let Some((crt, key)) = ask.cert {
        cmd.arg("--cert").arg(crt).arg("--key").arg(key);
    }
    cmd.args(ask.extra);
    let out = cmd.output().expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Answer { status, head: head.to_string(), body: body.to_string() }
}

/// Waits until `check` holds for the answer to `ask` (a new generation is being published).
fn until(daemon: &Daemon, ask: Ask<'_>, check: impl Fn(&Answer) -> bool) -> Answer {
    let mut last = None;
    let ok = eventually(Duration::from_secs(10), || {
        let answer = get(daemon, ask);
        let ok = check(&answer);
        last = Some(answer);
        ok
    });
    let last = last.unwrap();
    assert!(ok, "never held; last answer: {last:?}");
    last
}

// ---- ingress-nginx's e2e cases (test/e2e/annotations/authtls.go) ----

#[test]
fn auth_tls_secret_alone_requires_a_certificate_from_its_ca() {
    let f = Fixture::new("authtls-secret");
    f.write(&[]);
    let daemon = f.start();
    let client = f.cert("client");
    let with_cert = Ask { sni: Some(HOST), cert: Some(&client), extra: &[] };
    assert_eq!(get(&daemon, PLAIN).status, 200, "no auth-tls yet");
    f.write(&[("auth-tls-secret", "shop/authtls")]);
    let refused = until(&daemon, PLAIN, |a| a.status == 400);
    assert!(refused.body.contains("No required SSL certificate was sent"), "{refused:?}");
    let served = get(&daemon, with_cert);
    assert_eq!(served.status, 200, "{served:?}");
    assert_eq!(served.upstream("ssl-client-verify"), Some("SUCCESS"), "{}", served.body);
    assert_eq!(served.upstream("ssl-client-subject-dn"), Some("CN=authtls.test-client,O=Acme Co"));
    assert_eq!(served.upstream("ssl-client-issuer-dn"), Some("CN=ramjet test CA"));
    assert_eq!(served.upstream("ssl-client-cert"), None, "only with pass-certificate-to-upstream");
    daemon.shutdown();
}

#[test]
fn verify_client_off_asks_for_no_certificate_and_says_none() {
    let f = Fixture::new("authtls-off");
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "off"), ("auth-tls-verify-depth", "2")]);
    let daemon = f.start();
    let served = get(&daemon, PLAIN);
    assert_eq!(served.status, 200, "{served:?}");
    assert_eq!(served.upstream("ssl-client-verify"), Some("NONE"), "{}", served.body);
    // on, then off again: the update is a generation like any other.
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "on")]);
    until(&daemon, PLAIN, |a| a.status == 400);
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "off")]);
    until(&daemon, PLAIN, |a| a.status == 200);
    let client = f.cert("client");
    assert_eq!(get(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra: &[] }).status, 200);
    daemon.shutdown();
}

#[test]
fn an_error_page_turns_the_400_into_a_redirect() {
    let f = Fixture::new("authtls-error-page");
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-error-page", "http://127.0.0.1/error")]);
    let daemon = f.start();
    let redirected = get(&daemon, PLAIN);
    assert_eq!(redirected.status, 302, "{redirected:?}");
    assert_eq!(redirected.location(), Some("http://127.0.0.1/error"));
    let stranger = f.cert("stranger");
    let bad = get(&daemon, Ask { sni: Some(HOST), cert: Some(&stranger), extra: &[] });
    assert_eq!((bad.status, bad.location()), (302, Some("http://127.0.0.1/error")), "{bad:?}");
    let client = f.cert("client");
    assert_eq!(get(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra: &[] }).status, 200);
    daemon.shutdown();
}

#[test]
fn the_certificate_is_passed_upstream_url_encoded() {
    let f = Fixture::new("authtls-pass");
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-pass-certificate-to-upstream", "true")]);
    let daemon = f.start();
    assert_eq!(get(&daemon, PLAIN).status, 400);
    let client = f.cert("client");
    let served = get(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra: &[] });
    assert_eq!(served.status, 200, "{served:?}");
    let sent = served.upstream("ssl-client-cert").expect("ssl-client-cert upstream");
    assert!(sent.starts_with("-----BEGIN%20CERTIFICATE-----%0A"), "{sent}");
    assert!(sent.ends_with("-----END%20CERTIFICATE-----%0A"), "{sent}");
    let pem = std::fs::read_to_string(f.pki.path("client.crt")).unwrap();
    let decoded = percent_decode(sent);
    assert_eq!(decoded.trim(), pem.trim(), "the client's own certificate, as PEM");
    daemon.shutdown();
}

#[test]
fn match_cn_is_a_pattern_on_the_subject_and_follows_updates() {
    let f = Fixture::new("authtls-match-cn");
    let client = f.cert("client");
    let with_cert = Ask { sni: Some(HOST), cert: Some(&client), extra: &[] };
    let annotations =
        |cn| [("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "on"), ("auth-tls-match-cn", cn)];
    f.write(&annotations("CN=notgonnamatch"));
    let daemon = f.start();
    let refused = get(&daemon, with_cert);
    assert_eq!((refused.status, refused.body.as_str()), (403, "client certificate unauthorized"), "{refused:?}");
    f.write(&annotations("CN=authtls"));
    until(&daemon, with_cert, |a| a.status == 200);
    f.write(&annotations("CN=notvalid"));
    until(&daemon, with_cert, |a| a.status == 403);
    f.write(&annotations("CN=(itwillmatch|withthenextoption|authtls)"));
    until(&daemon, with_cert, |a| a.status == 200);
    daemon.shutdown();
}

// ---- beyond ingress-nginx's suite ----

#[test]
fn certificates_from_another_ca_or_expired_are_refused_by_mode() {
    let f = Fixture::new("authtls-modes");
    let (client, stranger, expired) = (f.cert("client"), f.cert("stranger"), f.cert("expired"));
    let ask = |cert| Ask { sni: Some(HOST), cert: Some(cert), extra: &[] };
    f.write(&[("auth-tls-secret", "shop/authtls")]);
    let daemon = f.start();
    let other_ca = get(&daemon, ask(&stranger));
    assert_eq!(other_ca.status, 400, "{other_ca:?}");
    assert!(other_ca.body.contains("The SSL certificate error"), "{other_ca:?}");
    assert_eq!(get(&daemon, ask(&expired)).status, 400);

    // optional: no certificate passes, a bad one does not.
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "optional")]);
    let none = until(&daemon, PLAIN, |a| a.status == 200);
    assert_eq!(none.upstream("ssl-client-verify"), Some("NONE"));
    assert_eq!(get(&daemon, ask(&stranger)).status, 400);
    assert_eq!(get(&daemon, ask(&client)).upstream("ssl-client-verify"), Some("SUCCESS"));

    // optional_no_ca: another CA passes, and the backend is told why it failed; expired does not.
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "optional_no_ca")]);
    let passed = until(&daemon, ask(&stranger), |a| a.status == 200);
    assert_eq!(passed.upstream("ssl-client-verify"), Some("FAILED:unable to get local issuer certificate"));
    assert_eq!(passed.upstream("ssl-client-subject-dn"), Some("CN=stranger,O=Acme Co"));
    let expired = get(&daemon, ask(&expired));
    assert_eq!(expired.status, 400, "{expired:?}");
    assert!(expired.body.contains("The SSL certificate error"), "{expired:?}");
    daemon.shutdown();
}

#[test]
fn forged_client_certificate_fields_never_reach_the_backend() {
    let f = Fixture::new("authtls-forged");
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-verify-client", "optional")]);
    let daemon = f.start();
    let forged = [
        "-H",
        "ssl-client-verify: SUCCESS",
        "-H",
        "SSL-Client-Subject-DN: CN=admin",
        "-H",
        "ssl-client-issuer-dn: CN=ramjet test CA",
        "-H",
        "ssl-client-cert: -----BEGIN%20CERTIFICATE-----",
    ];
    // Without a certificate, over HTTP/1.1 and HTTP/2, and with one: only ramjet's fields arrive.
    for extra in [&forged[..], &[&forged[..], &["--http2"]].concat()] {
        let answer = get(&daemon, Ask { sni: Some(HOST), cert: None, extra });
        assert_eq!(answer.status, 200, "{answer:?}");
        let told: Vec<&str> =
            answer.body.lines().filter(|l| l.to_ascii_lowercase().starts_with("header=ssl-client")).collect();
        assert_eq!(told, ["header=ssl-client-verify: NONE"], "{}", answer.body);
    }
    let client = f.cert("client");
    let answer = get(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra: &forged });
    assert_eq!(answer.upstream("ssl-client-subject-dn"), Some("CN=authtls.test-client,O=Acme Co"), "{}", answer.body);
    assert_eq!(answer.upstream("ssl-client-cert"), None, "{}", answer.body);
    // The attacker's requests went over the same pooled upstream connections as everyone's: the
    // backend saw no forged value at all.
    let received = f.backend.received().to_ascii_lowercase();
    assert!(!received.contains("cn=admin"), "{received}");
    assert_eq!(received.matches("ssl-client-verify: success").count(), 1, "{received}");
    daemon.shutdown();
}

#[test]
fn the_auth_url_service_is_told_of_the_client_certificate_and_never_a_forged_one() {
    let f = Fixture::new("authtls-auth-url");
    let service = Backend::start("auth");
    let auth_url = format!("http://{}/check", service.addr);
    f.write(&[
        ("auth-tls-secret", "shop/authtls"),
        ("auth-tls-verify-client", "optional"),
        ("auth-tls-pass-certificate-to-upstream", "true"),
        ("auth-url", &auth_url),
    ]);
    let daemon = f.start();
    let forged = ["-H", "SSL-Client-Subject-DN: CN=admin", "-H", "ssl-client-verify: SUCCESS"];
    let client = f.cert("client");
    let answer = until(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra: &forged }, |a| a.status == 200);
    assert!(service.requests() > 0, "the service was asked");
    // The sub-request carried ramjet's fields, as ingress-nginx's auth location sets them, and the
    // certificate (pass-certificate-to-upstream) ...
    let asked = service.received();
    let told = |name: &str| -> Vec<String> {
        let prefix = format!("{name}: ");
        asked.lines().filter_map(|l| l.to_ascii_lowercase().strip_prefix(&prefix).map(str::to_string)).collect()
    };
    assert_eq!(told("ssl-client-verify").last().map(String::as_str), Some("success"), "{asked}");
    assert_eq!(
        told("ssl-client-subject-dn").last().map(String::as_str),
        Some("cn=authtls.test-client,o=acme co"),
        "{asked}"
    );
    assert!(told("ssl-client-cert").last().is_some_and(|c| c.starts_with("-----begin%20certificate-----")), "{asked}");
    // ... never the client's forged ones, with a certificate or without.
    assert_eq!(get(&daemon, Ask { sni: Some(HOST), cert: None, extra: &forged }).status, 200);
    let asked = service.received().to_ascii_lowercase();
    assert!(!asked.contains("cn=admin"), "{asked}");
    assert!(asked.contains("ssl-client-verify: none"), "the request without a certificate: {asked}");
    assert_eq!(answer.upstream("ssl-client-subject-dn"), Some("CN=authtls.test-client,O=Acme Co"));
    daemon.shutdown();
}

#[test]
fn a_host_other_than_the_server_name_is_misdirected_and_plain_http_has_no_certificate() {
    let f = Fixture::new("authtls-misdirected");
    f.write(&[("auth-tls-secret", "shop/authtls")]);
    let daemon = f.start();
    let client = f.cert("client");
    // The handshake for another name (no client certificate asked), then a request for the host.
    let other = get(&daemon, Ask { sni: Some("other.test"), cert: Some(&client), extra: &[] });
    assert_eq!(other.status, 421, "{other:?}");
    // Plain HTTP cannot carry a certificate: refused as if none was sent (ingress-nginx would serve it).
    let http = daemon.http_addr();
    let plain = support::client::get(http, HOST, "/");
    assert_eq!(plain.status, 400, "{}", plain.body);
    daemon.shutdown();
}

#[test]
fn http2_and_tls_1_2_clients_are_checked_alike() {
    let f = Fixture::new("authtls-protocols");
    f.write(&[("auth-tls-secret", "shop/authtls"), ("auth-tls-pass-certificate-to-upstream", "true")]);
    let daemon = f.start();
    let (client, stranger) = (f.cert("client"), f.cert("stranger"));
    for extra in
        [&["--http2"][..], &["--tlsv1.2", "--tls-max", "1.2"][..], &["--http2", "--tlsv1.2", "--tls-max", "1.2"][..]]
    {
        let served = get(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra });
        assert_eq!(served.status, 200, "{extra:?}: {served:?}");
        assert_eq!(served.upstream("ssl-client-verify"), Some("SUCCESS"), "{extra:?}");
        assert!(served.upstream("ssl-client-cert").is_some_and(|c| c.starts_with("-----BEGIN%20")), "{extra:?}");
        assert_eq!(get(&daemon, Ask { sni: Some(HOST), cert: Some(&stranger), extra }).status, 400, "{extra:?}");
        assert_eq!(get(&daemon, Ask { sni: None, cert: None, extra }).status, 400, "{extra:?}");
    }
    daemon.shutdown();
}

#[test]
fn a_secret_that_cannot_be_used_closes_the_host_and_nothing_else() {
    let f = Fixture::new("authtls-broken");
    let other = Ingress::new("shop", "open").host("open.test").to("echo").yaml();
    let mut ingress = Ingress::new("shop", "authtls").host(HOST).to("echo").tls("authtls");
    ingress = ingress.annotation(&format!("{NGINX}auth-tls-secret"), "shop/missing");
    let text = [
        ingress_class("ramjet"),
        Service::new("shop", "echo").target_port(f.backend.addr.port()).endpoints(&[f.backend.addr]).yaml(),
        f.secret("authtls"),
        ingress.yaml(),
        other,
    ]
    .concat();
    write(&f.dir.join("objects.yaml"), text);
    let daemon = f.start();
    let client = f.cert("client");
    assert_eq!(get(&daemon, Ask { sni: Some(HOST), cert: Some(&client), extra: &[] }).status, 403);
    assert_eq!(get(&daemon, PLAIN).status, 403);
    assert_eq!(support::client::get(daemon.http_addr(), "open.test", "/").status, 200);
    let report = support::client::request(
        daemon.admin_addr(),
        "GET /admin/generations HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert!(report.body.contains("Secret shop/missing does not exist"), "{}", report.body);
    daemon.shutdown();
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// A TLS 1.2 client (`openssl s_client`) that asks for a renegotiation (its `R`) halfway through a
/// connection: rustls never renegotiates, so no second handshake happens (no certificate can be
/// asked for, or slipped in, halfway), and the daemon goes on serving.
#[test]
fn a_renegotiation_is_refused_and_the_connection_keeps_its_first_handshake() {
    let f = Fixture::new("authtls-renegotiation");
    f.write(&[("auth-tls-secret", "shop/authtls")]);
    let daemon = f.start();
    let client = f.cert("client");
    let with_cert = Ask { sni: Some(HOST), cert: Some(&client), extra: &[] };
    until(&daemon, with_cert, |a| a.status == 200);
    let port = daemon.https_addr().unwrap().port();
    let mut s_client = Command::new("openssl")
        .args(["s_client", "-tls1_2", "-connect", &format!("127.0.0.1:{port}"), "-servername", HOST, "-cert"])
        .arg(&client.0)
        .arg("-key")
        .arg(&client.1)
        .arg("-CAfile")
        .arg(f.pki.path("ca.pem"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl");
    {
        use std::io::Write;
        let stdin = s_client.stdin.as_mut().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        stdin.write_all(b"R\n").unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let _ = stdin.write_all(format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes());
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(s_client.stdin.take());
    let out = s_client.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // OpenSSL asked, ramjet answered with the `no_renegotiation` alert, and OpenSSL gave up the
    // connection: one handshake verified (the CA, then the leaf), no answer to a request after it.
    assert!(stderr.contains("RENEGOTIATING"), "{stderr}");
    assert!(stderr.contains("no renegotiation"), "{stderr}");
    assert_eq!(stderr.matches("verify return:1").count(), 2, "one handshake: {stderr}");
    assert!(!stdout.contains("HTTP/1.1 200"), "{stdout}");
    assert_eq!(get(&daemon, with_cert).status, 200, "the daemon serves on");
    daemon.shutdown();
}
