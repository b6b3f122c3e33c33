//! The file source (`--manifests DIR`) end to end: real Kubernetes objects in files, compiled by
//! the Ingress compiler, published, rolled back — and the binary's `--check` on the same files.

use ramjet_test_support as support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ramjet::{Daemon, DaemonConfig, Source};
use ramjet_control::compile::ingress::IngressOptions;
use ramjet_dataplane::IoDriver;
use support::backend::Backend;
use support::client::{get, request};
use support::manifests::{ingress_class, Ingress, Service};
use support::{eventually, served, temp_dir, wait_serving};

/// `web.test` → Service `web` → `endpoint`, and the IngressClass `ramjet`.
fn objects(endpoint: SocketAddr) -> String {
    [
        ingress_class("ramjet"),
        Service::new("shop", "web").target_port(8080).endpoints(&[endpoint]).yaml(),
        Ingress::new("shop", "web").host("web.test").to("web").yaml(),
    ]
    .concat()
}

/// An Ingress of our class that names a port its Service does not have.
const BROKEN: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: { name: broken, namespace: shop }\n\
                      spec:\n  ingressClassName: ramjet\n  defaultBackend: { service: { name: web, port: { number: 81 } } }\n";

/// Writes a file the way an editor or `git checkout` should for a watcher: whole, by renaming a
/// temporary file over it, so a re-read never sees it half written.
fn write(path: &Path, text: impl AsRef<[u8]>) -> std::io::Result<()> {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)
}

fn start(dir: &Path) -> Daemon {
    start_with(dir, IngressOptions::default())
}

fn start_with(dir: &Path, options: IngressOptions) -> Daemon {
    let mut config = DaemonConfig::with_source(Source::Manifests {
        dir: dir.to_path_buf(),
        options,
        interval: Duration::from_millis(20),
    });
    config.io_driver = IoDriver::Auto;
    Daemon::start(config).expect("the daemon starts")
}

/// A Secret `namespace/name` of `kind` holding `pki`'s certificate and key `leaf`.
fn tls_secret(pki: &support::pki::Pki, namespace: &str, name: &str, kind: &str, leaf: &str) -> String {
    let b64 = |f: String| support::control_plane::base64(&std::fs::read(pki.path(&f)).unwrap());
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: {namespace} }}\ntype: {kind}\n\
         data:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(format!("{leaf}.crt")),
        b64(format!("{leaf}.key"))
    )
}

#[test]
fn manifests_are_served_re_read_and_rolled_back() {
    let dir = temp_dir("manifests");
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    write(&dir.join("app.yaml"), objects(a.addr)).unwrap();
    let daemon = start(&dir);
    assert_eq!(served(&daemon, "web.test"), "a");
    assert_eq!(daemon.published.current().number, 1);

    // The endpoint moves: a new generation.
    write(&dir.join("app.yaml"), objects(b.addr)).unwrap();
    wait_serving(&daemon, 2);
    assert_eq!(served(&daemon, "web.test"), "b");

    // Writing the same objects again (or adding a file of other kinds) is no generation.
    write(&dir.join("app.yaml"), objects(b.addr)).unwrap();
    write(&dir.join("deployment.yaml"), "apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: web }\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(daemon.published.current().number, 2);

    // Roll back to generation 1 through the admin API: a again, pinned.
    let body = r#"{"generation":1}"#;
    let raw = format!(
        "POST /admin/rollback HTTP/1.1\r\nHost: admin\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let response = request(daemon.admin_addr(), &raw);
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(served(&daemon, "web.test"), "a");
    let raw = "DELETE /admin/rollback HTTP/1.1\r\nHost: admin\r\nconnection: close\r\n\r\n";
    assert_eq!(request(daemon.admin_addr(), raw).status, 200);
    assert_eq!(served(&daemon, "web.test"), "b");

    // A broken file is reported and the rest keeps serving.
    write(&dir.join("broken.yaml"), "kind: [unclosed").unwrap();
    let diagnostics = daemon.control.diagnostics();
    assert!(eventually(Duration::from_secs(5), || diagnostics
        .borrow()
        .iter()
        .any(|d| d.object.kind == "File" && d.object.name.ends_with("broken.yaml (document 1)"))));
    assert_eq!(served(&daemon, "web.test"), "b");
    daemon.shutdown();
}

#[test]
fn check_reports_every_problem_and_fails() {
    let dir = temp_dir("manifests-check");
    let endpoint: SocketAddr = "10.0.0.1:8080".parse().unwrap();
    // The application's own manifests beside the Ingress: named as not read, and no problem.
    let deployment = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: { name: web, namespace: shop }\n";
    write(&dir.join("app.yaml"), objects(endpoint) + deployment).unwrap();
    let ramjet = env!("CARGO_BIN_EXE_ramjet");
    let ok = Command::new(ramjet).arg("--manifests").arg(&dir).arg("--check").output().unwrap();
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{stdout}{}", String::from_utf8_lossy(&ok.stderr));
    assert!(stdout.contains(": ok (1 Ingresses of class ramjet, 1 routes, 1 hosts"), "{stdout}");
    assert!(
        stdout.contains("not read: ")
            && stdout.contains("Deployment shop/web: Deployment (apps/v1) is not a kind ramjet reads"),
        "{stdout}"
    );

    // An Ingress in a version ramjet does not read is a problem: its author expects it served.
    let old = "---\napiVersion: extensions/v1beta1\nkind: Ingress\nmetadata: { name: old, namespace: shop }\n";
    write(&dir.join("broken.yaml"), format!("{BROKEN}{old}")).unwrap();
    let failed = Command::new(ramjet).arg("--manifests").arg(&dir).arg("--check").output().unwrap();
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert!(!failed.status.success());
    assert!(
        stdout.contains("warning: ")
            && stdout.contains("Ingress shop/old: Ingress in \"extensions/v1beta1\" is not read"),
        "{stdout}"
    );
    assert!(
        stdout.contains("error: Ingress shop/broken: spec.defaultBackend: Service shop/web has no port 81 (its ports: 80 (http)); the Ingress is not served"),
        "{stdout}"
    );

    // Ingresses of another class are named as skipped, and a check that checked none of them fails.
    let other = temp_dir("manifests-check-other-class");
    let nginx = Ingress::new("shop", "legacy").class("nginx").host("legacy.test").to("web").yaml();
    write(&other.join("app.yaml"), nginx).unwrap();
    let nothing = Command::new(ramjet).arg("--manifests").arg(&other).arg("--check").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&nothing.stdout), String::from_utf8_lossy(&nothing.stderr));
    assert!(!nothing.status.success(), "{stdout}");
    assert!(stdout.contains("skipped: Ingress shop/legacy: its class nginx is not an IngressClass"), "{stdout}");
    assert!(stderr.contains("checked nothing: none of the 1 Ingresses"), "{stderr}");
}

/// A generation's diagnostics, as `GET /admin/generations` shows them: the object (kind, namespace,
/// name), the severity, and the message.
#[test]
fn diagnostics_are_objects_in_the_admin_api() {
    let dir = temp_dir("manifests-diagnostics");
    let a = Backend::start("a");
    write(&dir.join("app.yaml"), objects(a.addr)).unwrap();
    write(&dir.join("broken.yaml"), BROKEN).unwrap();
    let daemon = start(&dir);
    assert_eq!(served(&daemon, "web.test"), "a");
    // No certificate yet, but a Secret may be added to the directory: HTTPS is listening.
    assert!(daemon.https_addr().is_some());
    let raw = "GET /admin/generations HTTP/1.1\r\nHost: admin\r\nconnection: close\r\n\r\n";
    let answer: serde_json::Value = serde_json::from_str(&request(daemon.admin_addr(), raw).body).unwrap();
    assert_eq!(
        answer["generations"][0]["diagnostics"],
        serde_json::json!([{
            "object": {"kind": "Ingress", "namespace": "shop", "name": "broken"},
            "severity": "error",
            "message": "spec.defaultBackend: Service shop/web has no port 81 (its ports: 80 (http)); the Ingress is not served"
        }])
    );
    daemon.shutdown();
}

/// `ingresses` Ingresses of five paths each for one Service, in one file; `version` is in every path,
/// so each version compiles to another table.
fn many_ingresses(ingresses: usize, version: u32) -> String {
    let mut yaml = ingress_class("ramjet") + &Service::new("shop", "web").yaml();
    for i in 0..ingresses {
        let ingress = Ingress::new("shop", &format!("web-{i}")).host(&format!("h{i}.test")).port_number(80);
        let ingress = (0..5).fold(ingress, |ingress, p| ingress.path(&format!("/v{version}/p{p}"), "Prefix", "web"));
        yaml.push_str(&ingress.yaml());
    }
    yaml
}

/// A large directory is re-read and compiled off the control thread: while it takes seconds, the
/// admin API (on the control thread, like the Lease renewal) keeps answering at once.
#[test]
fn the_admin_api_answers_while_a_large_directory_compiles() {
    let dir = temp_dir("manifests-large");
    write(&dir.join("app.yaml"), many_ingresses(4000, 1)).unwrap();
    let daemon = start(&dir);
    let first = daemon.published.current().number;
    write(&dir.join("app.yaml"), many_ingresses(4000, 2)).unwrap();
    let started = std::time::Instant::now();
    let (mut worst, mut polls) = (Duration::ZERO, 0);
    while daemon.published.current().number == first {
        assert!(started.elapsed() < Duration::from_secs(120), "the new directory was never served");
        let asked = std::time::Instant::now();
        let answer = request(daemon.admin_addr(), "GET /healthz HTTP/1.1\r\nHost: admin\r\nconnection: close\r\n\r\n");
        assert_eq!(answer.status, 200);
        worst = worst.max(asked.elapsed());
        polls += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    eprintln!("re-read and compiled in {took:?}; {polls} admin requests, the slowest {worst:?}");
    // Debug builds take seconds here; the bound stays meaningful in faster builds too.
    let bound = (took / 5).max(Duration::from_millis(50));
    assert!(worst < bound, "the admin API waited {worst:?} of the {took:?} the re-read and compile took");
    daemon.shutdown();
}

/// `ramjet migration-report --manifests`: 0 when every Ingress behaves as under ingress-nginx, 1
/// with a line for what would not, 2 when the directory cannot be read.
#[test]
fn migration_report_reads_a_directory_and_its_exit_code_says_whether_it_is_clean() {
    let dir = temp_dir("migration-report");
    write(&dir.join("app.yaml"), objects("10.0.0.1:8080".parse().unwrap())).unwrap();
    let ramjet = env!("CARGO_BIN_EXE_ramjet");
    let report =
        |dir: &Path| Command::new(ramjet).arg("migration-report").arg("--manifests").arg(dir).output().unwrap();
    let clean = report(&dir);
    let stdout = String::from_utf8_lossy(&clean.stdout);
    assert_eq!(clean.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&clean.stderr));
    assert!(
        stdout.contains("Ingress shop/web (class ramjet): served\n  no ingress-nginx or ramjet annotations"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 Ingresses, 0 findings\nramjet serves these Ingresses as ingress-nginx does"),
        "{stdout}"
    );

    write(
        &dir.join("typo.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: typo\n  namespace: shop\n  annotations:\n    \
         nginx.ingress.kubernetes.io/rewrite-targt: /\n    nginx.ingress.kubernetes.io/use-regex: \"false\"\n\
         spec:\n  ingressClassName: nginx\n  defaultBackend: { service: { name: web, port: { number: 80 } } }\n",
    )
    .unwrap();
    let typo = report(&dir);
    let stdout = String::from_utf8_lossy(&typo.stdout);
    assert_eq!(typo.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "unknown          nginx.ingress.kubernetes.io/rewrite-targt=\"/\": not an annotation ingress-nginx defines"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("honoured         nginx.ingress.kubernetes.io/use-regex=\"false\""), "{stdout}");

    let missing = report(&dir.join("nope"));
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("ramjet migration-report:"));
}

/// `ramjet migration-report --manifests DIR` with `extra` options: what it printed and its exit code.
fn migration_report(dir: &Path, extra: &[&str]) -> std::process::Output {
    let ramjet = env!("CARGO_BIN_EXE_ramjet");
    Command::new(ramjet).args(["migration-report", "--manifests"]).arg(dir).args(extra).output().unwrap()
}

/// The report as a CI gate: each Ingress compiled with what it refers to (served, partly, not
/// served, and why), `--fail-on` choosing what fails the run, JSON with a schema version, and
/// Markdown for a pull-request comment.
#[test]
fn migration_report_compiles_each_ingress_and_gates_on_what_it_is_told() {
    let dir = temp_dir("migration-report-gate");
    write(&dir.join("app.yaml"), objects("10.0.0.1:8080".parse().unwrap())).unwrap();
    let ingress = |name: &str, annotations: &str, service: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: shop\n  \
             annotations: {{ {annotations} }}\nspec:\n  ingressClassName: nginx\n  rules: [{{ host: {name}.test, http: \
             {{ paths: [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: {service}, port: {{ number: 80 }} }} }} }}] }} }}]\n"
        )
    };
    let text = [
        ingress("limited", "nginx.ingress.kubernetes.io/limit-rate: \"1024\"", "web"),
        ingress("gone", "", "nope"),
        ingress("secret", "nginx.ingress.kubernetes.io/auth-type: digest", "web"),
    ]
    .join("---\n");
    write(&dir.join("more.yaml"), text).unwrap();
    let report = |extra: &[&str]| {
        let out = migration_report(&dir, extra);
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, json) = report(&["--format", "json"]);
    assert_eq!(code, Some(1));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((json["schema_version"].as_u64(), json["compiled"].as_bool()), (Some(1), Some(true)), "{json:#}");
    let outcome = |name: &str| {
        let i = json["ingresses"].as_array().unwrap().iter().find(|i| i["name"] == name).unwrap();
        (i["outcome"].as_str().unwrap().to_string(), i["compile"].to_string())
    };
    assert_eq!(outcome("web").0, "served");
    assert_eq!(outcome("limited").0, "partly", "an ignored annotation: served, not as asked");
    // A Service that does not exist: its paths answer 503, the rest is served (as ingress-nginx).
    let (gone, why) = outcome("gone");
    assert!(gone == "partly" && why.contains("Service shop/nope does not exist"), "{gone}: {why}");
    assert_eq!(outcome("secret").0, "not-served", "an access control that cannot be enforced");

    // What fails the run is the CI's choice.
    assert_eq!(report(&["--fail-on", "unknown"]).0, Some(0));
    assert_eq!(report(&["--fail-on", "ignored"]).0, Some(1));
    assert_eq!(report(&["--fail-on", "not-served"]).0, Some(1));
    let (code, stdout) = report(&["--fail-on", "nonsense"]);
    assert_eq!(code, Some(2), "{stdout}");

    let (_, markdown) = report(&["--format", "markdown"]);
    assert!(markdown.contains("| `shop/secret` | nginx | **not-served** |"), "{markdown}");
    let (_, text) = report(&[]);
    assert!(text.contains("Ingress shop/limited (class nginx): partly"), "{text}");
}

/// `ramjet migration-report --nginx-configmap`: ingress-nginx's controller settings for the
/// client's address, judged, with the flags that keep them; a ConfigMap that is not there is an
/// error (exit 2), never an empty review.
#[test]
fn migration_report_maps_the_ingress_nginx_configmap_to_flags() {
    let dir = temp_dir("migration-configmap");
    write(&dir.join("app.yaml"), objects("10.0.0.1:8080".parse().unwrap())).unwrap();
    write(
        &dir.join("controller.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ingress-nginx-controller\n  namespace: ingress-nginx\n\
         data:\n  use-proxy-protocol: \"true\"\n  use-forwarded-headers: \"true\"\n  proxy-real-ip-cidr: \"10.0.0.0/8\"\n  \
         compute-full-forwarded-for: \"true\"\n  allow-snippet-annotations: \"false\"\n",
    )
    .unwrap();
    let report =
        |configmap: &str, format: &str| migration_report(&dir, &["--nginx-configmap", configmap, "--format", format]);
    let out = report("ingress-nginx/ingress-nginx-controller", "text");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("ConfigMap ingress-nginx/ingress-nginx-controller (ingress-nginx's controller settings)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("approximated     use-proxy-protocol=\"true\": set --proxy-protocol=http,https"),
        "{stdout}"
    );
    assert!(stdout.contains("not reviewed yet: allow-snippet-annotations"), "{stdout}");
    assert!(
        stdout.contains(
            "ramjet flags for these settings: --proxy-protocol=http,https --trusted-proxies=10.0.0.0/8 \
             --compute-full-forwarded-for"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("1 Ingresses and a ConfigMap, 4 findings"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_slice(&report("ingress-nginx/ingress-nginx-controller", "json").stdout).unwrap();
    assert_eq!(json["settings"]["flags"][1], "--trusted-proxies=10.0.0.0/8", "{json}");
    let missing = report("ingress-nginx/other", "text");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no ConfigMap ingress-nginx/other"));
}

/// `ramjet migration-report --nginx-controller`: ingress-nginx's controller flags, read from its
/// Deployment's container args (as its Helm chart renders them), judged, with the ramjet flags
/// that keep them; the ConfigMap its `--configmap` names is judged too. A workload that is not there
/// is an error (exit 2).
#[test]
fn migration_report_maps_the_controller_flags_to_ramjet_flags() {
    let dir = temp_dir("migration-controller");
    write(&dir.join("app.yaml"), objects("10.0.0.1:8080".parse().unwrap())).unwrap();
    write(
        &dir.join("controller.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: { name: ingress-nginx-controller, namespace: ingress-nginx }\n\
         data:\n  use-forwarded-headers: \"true\"\n  proxy-real-ip-cidr: \"10.0.0.0/8\"\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata: { name: ingress-nginx-controller, namespace: ingress-nginx }\n\
         spec:\n  template:\n    spec:\n      containers:\n      - name: controller\n        args:\n\
         \x20       - /nginx-ingress-controller\n\
         \x20       - --publish-service=$(POD_NAMESPACE)/ingress-nginx-controller\n\
         \x20       - --election-id=ingress-nginx-leader\n\
         \x20       - --controller-class=k8s.io/ingress-nginx\n\
         \x20       - --ingress-class=nginx\n\
         \x20       - --configmap=ingress-nginx/ingress-nginx-controller\n\
         \x20       - --validating-webhook=:8443\n\
         \x20       - --default-backend-service=ingress-nginx/default-http-backend\n",
    )
    .unwrap();
    let report = |controller: &str, format: &str| {
        migration_report(&dir, &["--nginx-controller", controller, "--format", format])
    };
    let out = report("ingress-nginx/ingress-nginx-controller", "text");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Deployment ingress-nginx/ingress-nginx-controller (ingress-nginx's controller flags)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "honoured         --controller-class=\"k8s.io/ingress-nginx\": set --controller-name=k8s.io/ingress-nginx"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "honoured         --default-backend-service=\"ingress-nginx/default-http-backend\": add \
             `default-backend-service: ingress-nginx/default-http-backend` to the controller configuration"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "ramjet flags for these: --controller-name=k8s.io/ingress-nginx --election-id=ingress-nginx-leader \
             --ingress-class=nginx --publish-service=ingress-nginx/ingress-nginx-controller"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("ConfigMap ingress-nginx/ingress-nginx-controller (ingress-nginx's controller settings)"),
        "the ConfigMap --configmap names is judged: {stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "every flag is kept or approximated: {stdout}");
    let json: serde_json::Value =
        serde_json::from_slice(&report("ingress-nginx/ingress-nginx-controller", "json").stdout).unwrap();
    assert_eq!(json["controller"]["flags"][0], "--controller-name=k8s.io/ingress-nginx", "{json}");
    let missing = report("ingress-nginx/other", "text");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no Deployment or DaemonSet ingress-nginx/other"));
}

/// ingress-nginx's redirects: `permanent-redirect` answers 301 (or its code in 300–308),
/// `temporal-redirect` 302 (or its code in 300–307) and wins over the permanent one; every path
/// answers, whatever Service it names; a target with nginx variables keeps the Ingress out.
#[test]
fn permanent_and_temporal_redirects_answer_as_in_ingress_nginx() {
    let dir = temp_dir("manifests-redirects");
    let ingress = |name: &str, annotations: &str| {
        format!(
            "---\napiVersion: networking.k8s.io/v1\nkind: Ingress\n\
             metadata: {{ name: {name}, namespace: shop, annotations: {{ {annotations} }} }}\n\
             spec:\n  ingressClassName: ramjet\n  rules: [{{ host: {name}.test, http: {{ paths: [{{ path: /, \
             pathType: Prefix, backend: {{ service: {{ name: gone, port: {{ number: 80 }} }} }} }}] }} }}]\n"
        )
    };
    let nginx = "nginx.ingress.kubernetes.io";
    let mut text = objects("10.0.0.1:8080".parse().unwrap());
    for (name, annotations) in [
        ("moved", format!("{nginx}/permanent-redirect: https://new.example/")),
        ("coded", format!("{nginx}/permanent-redirect: /elsewhere, {nginx}/permanent-redirect-code: \"308\"")),
        ("odd", format!("{nginx}/permanent-redirect: https://new.example/, {nginx}/permanent-redirect-code: \"999\"")),
        (
            "both",
            format!(
                "{nginx}/permanent-redirect: https://p.example/, {nginx}/temporal-redirect: https://t.example/, \
                 {nginx}/temporal-redirect-code: \"307\""
            ),
        ),
        ("variable", format!("{nginx}/permanent-redirect: \"https://new.example$request_uri\"")),
        // relativeredirects.go: a path is made absolute on the request's scheme and host name (no
        // port, no query), unless relative-redirects.
        ("absolute", format!("{nginx}/permanent-redirect: /new-location?from=old")),
        ("relative", format!("{nginx}/permanent-redirect: /new-location, {nginx}/relative-redirects: \"true\"")),
    ] {
        text.push_str(&ingress(name, &annotations));
    }
    write(&dir.join("app.yaml"), text).unwrap();
    let d = start(&dir);
    wait_serving(&d, 1);
    let answer = |host: &str| {
        let r = get(d.http_addr(), host, "/any/path");
        (r.status, r.header("location").map(String::from))
    };
    assert_eq!(answer("moved.test"), (301, Some("https://new.example/".into())));
    assert_eq!(answer("coded.test"), (308, Some("http://coded.test/elsewhere".into())));
    assert_eq!(answer("relative.test"), (301, Some("/new-location".into())));
    let r = get(d.http_addr(), "Absolute.Test:8080", "/something?q=1");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("http://absolute.test/new-location?from=old"), "no port, no request query");
    assert_eq!(answer("odd.test"), (301, Some("https://new.example/".into())), "an out-of-range code is the default");
    assert_eq!(answer("both.test"), (307, Some("https://t.example/".into())), "the temporal redirect wins");
    assert_eq!(answer("variable.test").0, 404, "a redirect ramjet cannot reproduce is not served otherwise");
    let generation = d.published.current();
    let problem = generation.diagnostics.iter().find(|p| p.object.name == "variable").expect("a diagnostic");
    assert!(problem.message.contains("nginx variables ($request_uri, $host, ...)"), "{problem:?}");
    d.shutdown();
}

/// `--default-ssl-certificate NAMESPACE/NAME`: the Secret's certificate for TLS names that have
/// none, compiled like an Ingress's, so a renewed Secret is served with the next generation. A
/// Secret that does not exist is reported, and the fallback serves.
#[test]
fn the_default_ssl_certificate_comes_from_a_secret_and_is_renewed_with_it() {
    ramjet::install_crypto();
    let dir = temp_dir("manifests-default-ssl");
    let pki = support::pki::Pki::new("manifests-default-ssl");
    pki.leaf("first", &["first.test"]);
    pki.leaf("second", &["second.test"]);
    let secret = |leaf: &str| tls_secret(&pki, "edge", "fallback-tls", "kubernetes.io/tls", leaf);
    let backend = Backend::start("a");
    write(&dir.join("app.yaml"), objects(backend.addr)).unwrap();
    write(&dir.join("secret.yaml"), secret("first")).unwrap();
    let options = |secret: &str| IngressOptions {
        default_ssl_certificate: Some(("edge".into(), secret.into())),
        ..IngressOptions::default()
    };
    // The subject curl sees for a name no Ingress has a certificate for.
    let subject =
        |daemon: &Daemon| support::client::curl_https(daemon.https_addr().unwrap().port(), "any.test", true).subject;
    let daemon = start_with(&dir, options("fallback-tls"));
    assert!(subject(&daemon).contains("first.test"), "{}", subject(&daemon));
    write(&dir.join("secret.yaml"), secret("second")).unwrap();
    assert!(eventually(Duration::from_secs(10), || subject(&daemon).contains("second.test")), "{}", subject(&daemon));
    daemon.shutdown();

    let daemon = start_with(&dir, options("missing"));
    assert!(subject(&daemon).contains(ramjet_control::certs::FALLBACK_SUBJECT), "{}", subject(&daemon));
    let report =
        request(daemon.admin_addr(), "GET /admin/generations HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert!(report.body.contains("--default-ssl-certificate cannot be served"), "{}", report.body);
    daemon.shutdown();
}

/// cert-manager's order of events: the Ingress comes first and its Secret later. Meanwhile the
/// Ingress is served — over plain HTTP, and over HTTPS with the default certificate, without its
/// HTTPS redirect — and a warning says why; once the Secret is written its certificate is served
/// and the redirect starts.
#[test]
fn an_ingress_waiting_for_its_tls_secret_is_served_with_the_default_certificate() {
    ramjet::install_crypto();
    let dir = temp_dir("manifests-tls-later");
    let pki = support::pki::Pki::new("manifests-tls-later");
    pki.leaf("web", &["web.test"]);
    let backend = Backend::start("a");
    let ingress = Ingress::new("shop", "web")
        .host("web.test")
        .to("web")
        .annotation("nginx.ingress.kubernetes.io/ssl-redirect", "true")
        .tls("web-tls")
        .yaml();
    let app = [
        ingress_class("ramjet"),
        Service::new("shop", "web").target_port(8080).endpoints(&[backend.addr]).yaml(),
        ingress,
    ]
    .concat();
    write(&dir.join("app.yaml"), app).unwrap();
    let daemon = start(&dir);
    wait_serving(&daemon, 1);
    let port = daemon.https_addr().unwrap().port();
    // Before the Secret: served, over HTTP without a redirect and over HTTPS with the fallback.
    assert_eq!(get(daemon.http_addr(), "web.test", "/").status, 200);
    let https = support::client::curl_https(port, "web.test", true);
    assert_eq!(https.status, "200", "{}", https.log);
    assert!(https.subject.contains(ramjet_control::certs::FALLBACK_SUBJECT), "{}", https.subject);
    let report =
        request(daemon.admin_addr(), "GET /admin/generations HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    assert!(
        report.body.contains("its hosts get the default certificate until the Secret can be served"),
        "{}",
        report.body
    );
    // cert-manager writes the Secret: its certificate is served, and HTTP redirects.
    write(&dir.join("secret.yaml"), tls_secret(&pki, "shop", "web-tls", "kubernetes.io/tls", "web")).unwrap();
    let issued = || support::client::curl_https(port, "web.test", true).subject.contains("web.test");
    assert!(
        eventually(Duration::from_secs(10), issued),
        "{}",
        support::client::curl_https(port, "web.test", true).subject
    );
    assert_eq!(get(daemon.http_addr(), "web.test", "/").status, 308);
    daemon.shutdown();
}

/// ingress-nginx serves an Ingress's certificate from any Secret with `tls.crt` and `tls.key`: its
/// own e2e fixtures (`framework.CreateIngressTLSSecret`) make `Opaque` ones. Ramjet serves them too,
/// with the HTTPS redirect; a Gateway listener keeps to the `kubernetes.io/tls` type.
#[test]
fn an_opaque_secret_with_a_certificate_serves_an_ingress() {
    ramjet::install_crypto();
    let dir = temp_dir("manifests-opaque-tls");
    let pki = support::pki::Pki::new("manifests-opaque-tls");
    pki.leaf("web", &["web.test"]);
    let backend = Backend::start("a");
    let secret = tls_secret(&pki, "shop", "web-tls", "Opaque", "web");
    let app = [
        ingress_class("ramjet"),
        Service::new("shop", "web").target_port(8080).endpoints(&[backend.addr]).yaml(),
        Ingress::new("shop", "web")
            .host("web.test")
            .to("web")
            .annotation("nginx.ingress.kubernetes.io/ssl-redirect", "true")
            .tls("web-tls")
            .yaml(),
        secret,
    ]
    .concat();
    write(&dir.join("app.yaml"), app).unwrap();
    let daemon = start(&dir);
    wait_serving(&daemon, 1);
    let https = support::client::curl_https(daemon.https_addr().unwrap().port(), "web.test", true);
    assert_eq!(https.status, "200", "{}", https.log);
    assert!(https.subject.contains("web.test"), "{}", https.subject);
    assert_eq!(get(daemon.http_addr(), "web.test", "/").status, 308, "its host redirects to HTTPS");
    daemon.shutdown();
}
