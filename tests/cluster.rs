//! The real `ramjet` binary against a real Kubernetes API server (kube-apiserver and etcd built
//! from `tests/k8s`, see `ramjet_test_support::control_plane`), installed the way `helm install` does:
//! the chart is rendered by Helm's own engine, its ServiceAccount, RBAC, IngressClass and Service
//! are applied, and ramjet runs with the chart's own arguments as that ServiceAccount (a token from
//! the TokenRequest API). Backends are real processes on 127.0.0.1 named by EndpointSlices.
//!
//! One control plane serves every test of this binary; each test installs its own release in its
//! own namespace with its own IngressClass and controller name, so tests never see each other.
//! `RAMJET_KEEP_CONTROL_PLANE=1` keeps the control plane's directory (logs, audit log) after the run.

use ramjet_test_support as support;
use ramjet_test_support::{control_plane, kube_api, netns, tls_backend};

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use control_plane::{base64, ControlPlane};
use kube_api::Kube;
use netns::bind_backend;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};
use support::client::{get, request, served_by};
use support::manifests::{endpoint_slice, Ingress, Service};
use support::pki::Pki;
use support::{eventually, free_port};
use tls_backend::TlsBackend;

/// The address the chart's Service gets from the (simulated) cloud load balancer.
const LB_IP: &str = "203.0.113.10";
/// Generous: a loaded 2-core machine runs the API server, etcd, ramjet and the tests at once.
const PATIENCE: Duration = Duration::from_secs(60);

/// One `helm install` of the chart into a namespace of its own.
struct Install {
    name: String,
    ns: String,
    class: String,
    election: String,
    service_account: String,
    /// The chart's container arguments, as the Deployment runs them.
    args: Vec<String>,
    /// A kubeconfig holding a TokenRequest token of the chart's ServiceAccount.
    kubeconfig: PathBuf,
    dir: PathBuf,
    admin: Kube,
}

/// Renders the chart with Helm's engine (`tests/chart/run.sh --render`).
fn render(release: &str, ns: &str, values: &Value) -> Vec<Value> {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/tests/chart/run.sh"))
        .args(["--render", release, ns, &values.to_string()])
        .stderr(Stdio::inherit())
        .output()
        .expect("run tests/chart/run.sh --render");
    assert!(out.status.success(), "rendering the chart failed");
    serde_json::from_slice(&out.stdout).expect("rendered chart as JSON")
}

/// The kinds of the chart that `helm install` creates and that matter without a kubelet.
const INSTALLED_KINDS: &[&str] =
    &["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "IngressClass", "Service"];

impl Install {
    fn new(name: &str) -> Install {
        let docs = Install::render(name);
        Install::apply(name, docs)
    }

    fn render(name: &str) -> Vec<Value> {
        // The Gateway API has its own tests (gateway_api_*): the others run without it.
        let values = json!({
            "ingressClass": { "name": name, "controllerValue": format!("ramjet.dev/{name}") },
            "gatewayAPI": { "enabled": false },
        });
        render(name, &format!("t-{name}"), &values)
    }

    fn apply(name: &str, docs: Vec<Value>) -> Install {
        Install::apply_on(ControlPlane::shared(), name, docs)
    }

    fn apply_on(plane: &ControlPlane, name: &str, docs: Vec<Value>) -> Install {
        let admin = Kube::new(&plane.admin_kubeconfig);
        let ns = format!("t-{name}");
        admin.apply(&format!("apiVersion: v1\nkind: Namespace\nmetadata: {{ name: {ns} }}\n"));
        let deployment = docs.iter().find(|d| d["kind"] == "Deployment").expect("the chart renders a Deployment");
        let pod = &deployment["spec"]["template"]["spec"];
        let args: Vec<String> =
            pod["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect();
        let service_account = pod["serviceAccountName"].as_str().unwrap().to_string();
        let election = flag(&args, "--election-id").unwrap();
        for doc in docs.iter().filter(|d| INSTALLED_KINDS.contains(&d["kind"].as_str().unwrap())) {
            admin.apply_value(doc, "helm").unwrap_or_else(|e| panic!("applying the chart's {}: {e}", doc["kind"]));
        }
        // What a cloud load balancer would do for the chart's Service: give it an address.
        if let Some(published) = flag(&args, "--publish-service") {
            let (_, name) = published.split_once('/').unwrap();
            admin
                .apply_status(
                    "Service",
                    &ns,
                    name,
                    "test-cloud",
                    json!({ "loadBalancer": { "ingress": [{ "ip": LB_IP }] } }),
                )
                .unwrap();
        }
        let dir = support::temp_dir(&format!("cluster-{name}"));
        let token = admin.token(&ns, &service_account);
        let kubeconfig = dir.join("ramjet.kubeconfig");
        plane.write_kubeconfig(&kubeconfig, &token, &ns);
        Install { name: name.into(), class: name.into(), ns, election, service_account, args, kubeconfig, dir, admin }
    }

    /// Starts the real binary with the chart's arguments (ports moved to free loopback ones).
    fn ramjet(&self, identity: &str) -> Ramjet {
        self.ramjet_with(identity, &self.kubeconfig.clone(), &[])
    }

    fn ramjet_with(&self, identity: &str, kubeconfig: &std::path::Path, extra: &[&str]) -> Ramjet {
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        self.ramjet_at(identity, kubeconfig, extra, admin)
    }

    /// As [`Install::ramjet_with`], with the admin listener on `admin` (known before it starts).
    fn ramjet_at(&self, identity: &str, kubeconfig: &std::path::Path, extra: &[&str], admin: SocketAddr) -> Ramjet {
        let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let https: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut args: Vec<String> = self
            .args
            .iter()
            .filter(|a| {
                !["--http-addr", "--https-addr", "--admin-addr", "--io-driver"].iter().any(|f| a.starts_with(f))
            })
            .cloned()
            .collect();
        args.extend([
            format!("--http-addr={http}"),
            format!("--https-addr={https}"),
            format!("--admin-addr={admin}"),
            "--io-driver=auto".into(),
            "--workers=1".into(),
            format!("--kubeconfig={}", kubeconfig.display()),
        ]);
        args.extend(extra.iter().map(|s| s.to_string()));
        spawn_ramjet(&self.dir, identity, &self.ns, &args, http, https, admin)
    }

    fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.ns, self.service_account)
    }

    fn lease_holder(&self) -> Option<String> {
        let lease = self.admin.get("Lease", Some(&self.ns), &self.election)?;
        lease["spec"]["holderIdentity"].as_str().map(String::from)
    }

    /// Service `name` (port `http` 80) and one EndpointSlice naming `endpoints`.
    fn service(&self, name: &str, endpoints: &[&Backend]) {
        self.admin.apply(&Service::new(&self.ns, name).target_port(8080).service_yaml());
        self.slice(&format!("{name}-1"), name, endpoints);
    }

    fn slice(&self, slice: &str, service: &str, endpoints: &[&Backend]) {
        self.admin.apply(&slice_yaml(&self.ns, slice, service, endpoints));
    }

    fn ingress(&self, name: &str, host: &str, service: &str) {
        self.admin.apply(&ingress_yaml(&self.ns, &self.class, name, host, service, None));
    }

    fn ingress_value(&self, name: &str) -> Value {
        self.admin.get("Ingress", Some(&self.ns), name).unwrap_or_else(|| panic!("no Ingress {name}"))
    }

    fn status_ips(&self, name: &str) -> Vec<String> {
        self.admin
            .get("Ingress", Some(&self.ns), name)
            .and_then(|i| i["status"]["loadBalancer"]["ingress"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e["ip"].as_str().map(String::from))
            .collect()
    }

    /// events.k8s.io/v1 Events with this reason about the object named `regarding`.
    fn events(&self, reason: &str, regarding: &str) -> Vec<Value> {
        self.admin
            .list("Event", None)
            .into_iter()
            .filter(|e| e["reason"] == reason && e["regarding"]["name"] == regarding)
            // A namespaced object of this install (tests in parallel use the same names).
            .filter(|e| e["regarding"]["namespace"].as_str().is_none_or(|ns| ns == self.ns))
            .filter(|e| {
                e["reportingController"] == format!("ramjet.dev/{}", self.name) || e["reportingController"].is_string()
            })
            .collect()
    }
}

impl Drop for Install {
    fn drop(&mut self) {
        // Cluster-scoped objects would otherwise outlive the test (namespaces are never deleted:
        // there is no namespace controller without kube-controller-manager).
        if std::thread::panicking() {
            return;
        }
        self.admin.delete("IngressClass", None, &self.class);
        for kind in ["ClusterRoleBinding", "ClusterRole"] {
            self.admin.delete(kind, None, &format!("{}-ramjet", self.name));
        }
    }
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().find_map(|a| a.strip_prefix(name)?.strip_prefix('=').map(String::from))
}

/// EndpointSlice `slice` of `service`, to these backends (on the port of the first).
fn slice_yaml(ns: &str, slice: &str, service: &str, endpoints: &[&Backend]) -> String {
    let addrs: Vec<SocketAddr> = endpoints.iter().map(|b| b.addr).collect();
    endpoint_slice(ns, slice, service, "http", &addrs)
}

/// Ingress `name` of `class`: `host` to `service`'s port `http`, with TLS from Secret `tls`.
fn ingress_yaml(ns: &str, class: &str, name: &str, host: &str, service: &str, tls: Option<&str>) -> String {
    let ingress = Ingress::new(ns, name).class(class).host(host).to(service);
    match tls {
        Some(secret) => ingress.tls(secret).yaml(),
        None => ingress.yaml(),
    }
}

/// Starts the real binary with `args` (which must name these addresses); its log goes to `dir`.
fn spawn_ramjet(
    dir: &std::path::Path,
    identity: &str,
    ns: &str,
    args: &[String],
    http: SocketAddr,
    https: SocketAddr,
    admin: SocketAddr,
) -> Ramjet {
    let log = dir.join(format!("{identity}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_ramjet"))
        .args(args)
        .env("RAMJET_POD_NAMESPACE", ns)
        .env("POD_NAME", identity)
        // The election's rounds at debug: a slow takeover is explained in the replica's log.
        .env(
            "RAMJET_LOG",
            std::env::var("RAMJET_LOG").unwrap_or_else(|_| "info,ramjet_control::cluster::lease=debug".into()),
        )
        // Both in append mode: a second handle at its own offset would overwrite the other's lines.
        .stdout(
            std::fs::File::options()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&log)
                .and_then(|_| std::fs::File::options().append(true).open(&log))
                .unwrap(),
        )
        .stderr(std::fs::File::options().append(true).open(&log).unwrap())
        .spawn()
        .expect("start ramjet");
    Ramjet { child: Some(child), http, https, admin, log, identity: identity.into() }
}

/// The real binary, killed (SIGKILL) when dropped.
struct Ramjet {
    child: Option<Child>,
    http: SocketAddr,
    https: SocketAddr,
    admin: SocketAddr,
    log: PathBuf,
    identity: String,
}

impl Ramjet {
    fn readyz(&self) -> Option<u16> {
        http(self.admin, "localhost", "/readyz").map(|(status, _)| status)
    }

    fn wait_ready(&mut self) {
        self.wait_ready_within(PATIENCE)
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn wait_ready_within(&mut self, patience: Duration) {
        let ok = eventually(patience, || {
            self.assert_running();
            self.readyz() == Some(200)
        });
        assert!(ok, "{} never became ready; log:\n{}", self.identity, self.log());
        // Ready means a Service may send traffic at once: the listener is there.
        if let Err(e) = TcpStream::connect_timeout(&self.http, Duration::from_secs(1)) {
            panic!("{} ready but its HTTP listener refuses ({e}); log:\n{}", self.identity, self.log());
        }
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            panic!("{} exited ({status}); log:\n{}", self.identity, self.log());
        }
    }

    /// Which backend answered `GET /` for `host` (or the status, or "down").
    fn served(&self, host: &str) -> String {
        if TcpStream::connect_timeout(&self.http, Duration::from_secs(1)).is_err() {
            return "down".into();
        }
        let response = get(self.http, host, "/");
        if response.status == 200 {
            served_by(&response)
        } else {
            response.status.to_string()
        }
    }

    fn wait_served(&self, host: &str, want: &str) {
        assert!(
            eventually(PATIENCE, || self.served(host) == want),
            "{host} never served by {want} (now: {}); log:\n{}",
            self.served(host),
            self.log()
        );
    }

    fn generations(&self) -> Value {
        let (_, body) = http(self.admin, "localhost", "/admin/generations").expect("admin listener");
        serde_json::from_str(&body).unwrap_or(Value::Null)
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    fn full_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&mut self, signal: i32) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on the PID of a child this process spawned and has not reaped yet.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(child.id() as libc::pid_t, signal);
            }
        }
    }

    /// Waits for the process to exit after a signal.
    fn wait_exit(&mut self, timeout: Duration) -> bool {
        let Some(child) = self.child.as_mut() else { return true };
        let exited = eventually(timeout, || matches!(child.try_wait(), Ok(Some(_))));
        if exited {
            self.child = None;
        }
        exited
    }
}

impl Drop for Ramjet {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A request to the admin listener with a JSON body and `Connection: close`.
fn http_request(addr: SocketAddr, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

/// A plain HTTP/1.1 GET with `Connection: close`; `None` when nothing answers.
fn http(addr: SocketAddr, host: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// A real HTTP/1.1 backend on [`BACKEND_IP`] that answers every request with `backend=NAME`.
struct Backend {
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Request heads answered.
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Their request lines, in order.
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Backend {
    fn start(name: &str) -> Backend {
        Backend::answering(name, 200)
    }

    /// A backend whose every answer has this status.
    fn answering(name: &str, status: u16) -> Backend {
        use std::io::BufRead;
        let listener = bind_backend();
        let addr = listener.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (name, stopping, counter, seen) = (name.to_string(), stop.clone(), requests.clone(), lines.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (name, counter, seen) = (name.clone(), counter.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_nodelay(true);
                    let mut writer = stream.try_clone().unwrap();
                    let mut reader = std::io::BufReader::new(stream);
                    loop {
                        // The head; these tests send no request bodies.
                        let mut line = String::new();
                        let mut first = true;
                        loop {
                            line.clear();
                            match reader.read_line(&mut line) {
                                Ok(0) | Err(_) => return,
                                Ok(_) if line == "\r\n" => break,
                                Ok(_) if first => seen.lock().unwrap().push(line.trim_end().to_string()),
                                Ok(_) => {}
                            }
                            first = false;
                        }
                        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let body = format!("backend={name}\n");
                        let answer = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        if writer.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Backend { addr, stop, requests, lines }
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The request lines received (`GET /path HTTP/1.1`).
    fn request_lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

/// A CA and a `kubernetes.io/tls` Secret for `host` signed by it.
struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl TestCa {
    fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        TestCa { issuer: Issuer::new(params, key), pem }
    }

    fn secret(&self, ns: &str, name: &str, host: &str) -> String {
        let params = CertificateParams::new(vec![host.to_string()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{ name: {name}, namespace: {ns} }}\ntype: kubernetes.io/tls\n\
             data: {{ tls.crt: {}, tls.key: {} }}\n",
            base64(cert.pem().as_bytes()),
            base64(key.serialize_pem().as_bytes())
        )
    }
}

/// `curl` over TLS with SNI `host`, trusting only `ca_pem`: the status, or curl's exit code.
fn https_status(ramjet: &Ramjet, host: &str, ca_pem: &str, dir: &std::path::Path) -> String {
    let ca = dir.join(format!("ca-{}.pem", free_port()));
    std::fs::write(&ca, ca_pem).unwrap();
    let port = ramjet.https.port();
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "--cacert"])
        .arg(&ca)
        .arg("--resolve")
        .arg(format!("{host}:{port}:127.0.0.1"))
        .arg(format!("https://{host}:{port}/"))
        .output()
        .expect("curl");
    let _ = std::fs::remove_file(&ca);
    if out.status.success() {
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        format!("curl exit {}", out.status.code().unwrap_or(-1))
    }
}

/// The writes (create/update/patch/delete) `user` made, as "verb resource[/subresource]".
fn writes_by(plane: &ControlPlane, user: &str, since: usize) -> Vec<String> {
    plane.audit_entries()[since..]
        .iter()
        .filter(|e| e["user"]["username"] == user)
        .filter(|e| e["stage"] == "ResponseComplete")
        .filter(|e| {
            ["create", "update", "patch", "delete", "deletecollection"].contains(&e["verb"].as_str().unwrap_or(""))
        })
        .map(|e| {
            let r = &e["objectRef"];
            let sub = r["subresource"].as_str().map(|s| format!("/{s}")).unwrap_or_default();
            format!("{} {}{}", e["verb"].as_str().unwrap_or("?"), r["resource"].as_str().unwrap_or("?"), sub)
        })
        .collect()
}

/// Every request `user` made (reads and writes), as "verb resource[/subresource]".
fn requests_by(plane: &ControlPlane, user: &str) -> BTreeSet<String> {
    plane
        .audit_entries()
        .iter()
        .filter(|e| e["user"]["username"] == user)
        .map(|e| {
            let r = &e["objectRef"];
            let sub = r["subresource"].as_str().map(|s| format!("/{s}")).unwrap_or_default();
            format!("{} {}{}", e["verb"].as_str().unwrap_or("?"), r["resource"].as_str().unwrap_or("?"), sub)
        })
        .collect()
}

fn audit_len(plane: &ControlPlane) -> usize {
    plane.audit_entries().len()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

// ---------------------------------------------------------------------------------------------
// 1. The chart's RBAC is enough, and no more than needed.
// ---------------------------------------------------------------------------------------------

/// Everything a working install shows; [`what_fails`] names the ones that never happened.
const WORKS: &[&str] = &[
    "ready and serving",
    "Ingress change followed",
    "Service change followed",
    "EndpointSlice change followed",
    "Ingress status written",
    "ConfigApplied Event",
    "Lease held",
    "Lease renewed",
    "Lease watched",
    "Canary state written",
];

/// The objects [`what_fails`] expects before ramjet starts: `web.test` served by `a`; `svc.test`
/// naming a port its Service does not have yet; `eps.test` whose EndpointSlice has no endpoint yet;
/// an auto-promoting canary of `web.test` (on `web-v2`, also served by `a`).
fn rbac_objects(install: &Install, a: &Backend) {
    let ns = &install.ns;
    install.service("web", &[a]);
    install.ingress("web", "web.test", "web");
    install.service("web-v2", &[a]);
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web-canary\n  namespace: {ns}\n  \
         annotations: {{ nginx.ingress.kubernetes.io/canary: \"true\", ramjet.dev/canary-auto-promote: \"true\", \
         ramjet.dev/canary-interval: 1h }}\nspec:\n  ingressClassName: {}\n  rules: [{{ host: web.test, http: {{ paths: \
         [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: web-v2, port: {{ name: http }} }} }} }}] }} }}]\n",
        install.class
    ));
    install.admin.apply(&Service::new(&ns, "svc").port("other", 80).target_port(8080).service_yaml());
    install.slice("svc-1", "svc", &[a]);
    install.ingress("svc", "svc.test", "svc");
    install.service("eps", &[]);
    install.ingress("eps", "eps.test", "eps");
}

/// What a working install shows within the deadline; each entry names what never happened. Once
/// ramjet serves, one change of each watched kind is made, and each must reach traffic.
fn what_fails(install: &Install, a: &Backend, ramjet: &mut Ramjet, deadline: Instant) -> BTreeSet<&'static str> {
    let mut missing: BTreeSet<&'static str> = WORKS.iter().copied().collect();
    let mut changed = false;
    let plane = ControlPlane::shared();
    while !missing.is_empty() && Instant::now() < deadline {
        ramjet.assert_running();
        if missing.contains("ready and serving") && ramjet.readyz() == Some(200) && ramjet.served("web.test") == "a" {
            missing.remove("ready and serving");
        }
        if !missing.contains("ready and serving") && !changed {
            install.ingress("new", "new.test", "web");
            install.service("svc", &[a]);
            install.slice("eps-1", "eps", &[a]);
            changed = true;
        }
        if changed {
            for (what, host) in [
                ("Ingress change followed", "new.test"),
                ("Service change followed", "svc.test"),
                ("EndpointSlice change followed", "eps.test"),
            ] {
                if missing.contains(what) && ramjet.served(host) == "a" {
                    missing.remove(what);
                }
            }
        }
        if missing.contains("Ingress status written") && install.status_ips("web") == [LB_IP] {
            missing.remove("Ingress status written");
        }
        if missing.contains("Canary state written") && canary_state(install).is_some() {
            missing.remove("Canary state written");
        }
        if missing.contains("ConfigApplied Event") && !install.events("ConfigApplied", &install.class).is_empty() {
            missing.remove("ConfigApplied Event");
        }
        let lease = install.admin.get("Lease", Some(&install.ns), &install.election);
        let spec = lease.as_ref().map(|l| l["spec"].clone()).unwrap_or_default();
        if spec["holderIdentity"] == ramjet.identity.as_str() {
            missing.remove("Lease held");
            if spec["renewTime"] != spec["acquireTime"] {
                missing.remove("Lease renewed");
            }
        }
        if missing.contains("Lease watched")
            && plane.audit_entries().iter().any(|e| {
                e["user"]["username"] == install.user().as_str()
                    && e["verb"] == "watch"
                    && e["objectRef"]["resource"] == "leases"
                    && e["responseStatus"]["code"] == 200
            })
        {
            missing.remove("Lease watched");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    missing
}

/// Exactly what must stop working when `verb` is taken out of this rule of the rendered chart
/// (everything else keeps working). A grant the test does not know fails the test: every verb the
/// chart grants needs a reason here.
fn needed_for(kind: &str, rule: &Value, verb: &str) -> BTreeSet<&'static str> {
    let resources: Vec<&str> = rule["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    let named = rule["resourceNames"].is_array();
    let set = match (kind, resources.as_slice(), verb) {
        ("ClusterRole", ["ingresses/status"], "patch") => vec!["Ingress status written"],
        ("ClusterRole", ["ingresses"], "patch") => vec!["Canary state written"],
        // Missing Event permission is skipped (logged at debug): nothing else changes.
        ("ClusterRole", ["events"], "create") => vec!["ConfigApplied Event"],
        // Without a first list nothing is compiled, published or written; the election still runs.
        ("ClusterRole", _, "list") => WORKS.iter().copied().filter(|w| !w.starts_with("Lease")).collect(),
        // Without the watch, the first list is served, and no change after it.
        ("ClusterRole", ["ingresses", "ingressclasses"], "watch") => vec!["Ingress change followed"],
        ("ClusterRole", ["services", "secrets"], "watch") => vec!["Service change followed"],
        ("ClusterRole", ["endpointslices"], "watch") => vec!["EndpointSlice change followed"],
        // Not elected: no status, no canary decisions; everything else works.
        ("Role", ["leases"], "create") if !named => {
            vec!["Lease held", "Lease renewed", "Ingress status written", "Canary state written"]
        }
        ("Role", ["leases"], "get") if named => {
            vec!["Lease held", "Lease renewed", "Ingress status written", "Canary state written"]
        }
        // Created and led for a while, never renewed (it steps down after two thirds of the lease).
        ("Role", ["leases"], "update") if named => vec!["Lease renewed"],
        // The election still works by reading the Lease every round; a takeover waits for it.
        ("Role", ["leases"], "list" | "watch") if named => vec!["Lease watched"],
        _ => panic!("the chart grants what no test knows the need of: {kind} {verb} in {rule}"),
    };
    set.into_iter().collect()
}

/// The rendered chart with `verb` taken out of rule `index` of the `kind` document (the whole rule
/// when it was its only verb).
fn without(mut docs: Vec<Value>, kind: &str, index: usize, verb: &str) -> Vec<Value> {
    let doc = docs.iter_mut().find(|d| d["kind"] == kind).unwrap();
    let rules = doc["rules"].as_array_mut().unwrap();
    let verbs = rules[index]["verbs"].as_array_mut().unwrap();
    verbs.retain(|v| v != verb);
    if verbs.is_empty() {
        rules.remove(index);
    }
    docs
}

#[test]
fn chart_rbac_is_enough_and_every_rule_is_needed() {
    let plane = ControlPlane::shared();
    let a = Backend::start("a");
    let base = "rbac";
    let docs = Install::render(base);
    let rules_of = |kind: &str| -> Vec<Value> {
        docs.iter().find(|d| d["kind"] == kind).unwrap()["rules"].as_array().unwrap().clone()
    };
    // Every variant: the chart as rendered (None), or with one verb of one rule taken out.
    type Variant = Option<(&'static str, usize, String)>;
    let mut variants: Vec<Variant> = vec![None];
    for kind in ["ClusterRole", "Role"] {
        for (i, rule) in rules_of(kind).iter().enumerate() {
            for verb in rule["verbs"].as_array().unwrap() {
                variants.push(Some((kind, i, verb.as_str().unwrap().to_string())));
            }
        }
    }
    let started = Instant::now();
    type Outcome<'a> = (&'a Variant, BTreeSet<&'static str>, String, BTreeSet<String>);
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = variants
            .iter()
            .enumerate()
            .map(|(n, variant)| {
                let a = &a;
                s.spawn(move || {
                    let name = if variant.is_none() { base.to_string() } else { format!("{base}-{n}") };
                    let mut docs = Install::render(&name);
                    if let Some((kind, i, verb)) = variant {
                        docs = without(docs, kind, *i, verb);
                    }
                    let install = Install::apply(&name, docs);
                    rbac_objects(&install, a);
                    let mut ramjet = install.ramjet("rbac");
                    // The full chart gets everything well within this; a missing grant never does.
                    let missing = what_fails(&install, a, &mut ramjet, Instant::now() + PATIENCE);
                    if variant.is_none() {
                        // Long enough for every kind of request to happen at least once.
                        std::thread::sleep(Duration::from_secs(3));
                    }
                    (variant, missing, ramjet.log(), requests_by(plane, &install.user()))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut report = Vec::new();
    for (variant, missing, log, used) in &results {
        match variant {
            None => {
                assert!(missing.is_empty(), "with the chart's RBAC, never: {missing:?}; log:\n{log}");
                // No more than needed, verb by verb: every verb the chart grants is one ramjet used
                // (the audit log records all its requests).
                let mut granted = BTreeSet::new();
                for kind in ["ClusterRole", "Role"] {
                    for rule in rules_of(kind) {
                        for resource in rule["resources"].as_array().unwrap() {
                            for verb in rule["verbs"].as_array().unwrap() {
                                granted.insert(format!("{} {}", verb.as_str().unwrap(), resource.as_str().unwrap()));
                            }
                        }
                    }
                }
                eprintln!("chart RBAC: ramjet used {used:?}");
                let unused: Vec<&String> = granted.difference(used).collect();
                assert!(unused.is_empty(), "the chart grants what ramjet never uses: {unused:?} (used: {used:?})");
                let ungranted: Vec<&String> = used.difference(&granted).collect();
                assert!(ungranted.is_empty(), "ramjet used what the chart does not grant: {ungranted:?}");
            }
            Some((kind, i, verb)) => {
                let rule = &rules_of(kind)[*i];
                let expected = needed_for(kind, rule, verb);
                report.push(format!("{kind} {verb} {} removed: {missing:?}", rule["resources"]));
                assert_eq!(
                    missing, &expected,
                    "taking {verb} out of {kind} rule {rule} should break exactly {expected:?}, but what failed was {missing:?}; log:\n{log}"
                );
            }
        }
    }
    eprintln!("chart RBAC ({} variants in {:.1?}):\n  {}", results.len(), started.elapsed(), report.join("\n  "));
}

// ---------------------------------------------------------------------------------------------
// 2. It follows the cluster.
// ---------------------------------------------------------------------------------------------

#[test]
fn follows_the_cluster_through_the_api_server() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let install = Install::new("follow");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut ramjet = install.ramjet("follow");
    ramjet.wait_ready();
    ramjet.wait_served("web.test", "a");

    // EndpointSlice changed: the new endpoint serves.
    install.slice("web-1", "web", &[&b]);
    ramjet.wait_served("web.test", "b");
    // A second EndpointSlice of the same Service adds its endpoints; deleting it takes them away.
    install.slice("web-2", "web", &[&a]);
    assert!(eventually(PATIENCE, || {
        let seen: BTreeSet<String> = (0..8).map(|_| ramjet.served("web.test")).collect();
        seen == BTreeSet::from(["a".to_string(), "b".to_string()])
    }));
    install.admin.delete("EndpointSlice", Some(&ns), "web-2");
    assert!(eventually(PATIENCE, || (0..8).all(|_| ramjet.served("web.test") == "b")));

    // Ingress changed: the new host serves, the old one no longer does.
    install.ingress("web", "shop.test", "web");
    ramjet.wait_served("shop.test", "b");
    ramjet.wait_served("web.test", "404");

    // Service changed: a port that the Ingress names no longer exists → 503 for the route.
    install.admin.apply(&Service::new(&ns, "web").port("other", 80).target_port(8080).service_yaml());
    assert!(eventually(PATIENCE, || ramjet.served("shop.test") != "b"), "a Service port removed still serves");
    install.service("web", &[&b]);
    ramjet.wait_served("shop.test", "b");

    // TLS Secret created, rotated and deleted.
    let (ca1, ca2) = (TestCa::new("one"), TestCa::new("two"));
    install.admin.apply(&ca1.secret(&ns, "shop-tls", "shop.test"));
    install.admin.apply(&ingress_yaml(&ns, &install.class, "web", "shop.test", "web", Some("shop-tls")));
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "shop.test", &ca1.pem, &install.dir) == "200"),
        "HTTPS never served with the Secret's certificate: {}",
        https_status(&ramjet, "shop.test", &ca1.pem, &install.dir)
    );
    install.admin.apply(&ca2.secret(&ns, "shop-tls", "shop.test"));
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "shop.test", &ca2.pem, &install.dir) == "200"),
        "the rotated certificate never served"
    );
    assert_ne!(https_status(&ramjet, "shop.test", &ca1.pem, &install.dir), "200", "the old certificate still serves");
    install.admin.delete("Secret", Some(&ns), "shop-tls");
    assert!(
        eventually(PATIENCE, || https_status(&ramjet, "shop.test", &ca2.pem, &install.dir) != "200"),
        "a deleted Secret's certificate still serves"
    );

    // Ingress deleted, then the IngressClass: nothing of ours is served.
    install.ingress("web", "shop.test", "web");
    ramjet.wait_served("shop.test", "b");
    install.admin.delete("Ingress", Some(&ns), "web");
    ramjet.wait_served("shop.test", "404");
    install.ingress("web", "shop.test", "web");
    ramjet.wait_served("shop.test", "b");
    install.admin.delete("IngressClass", None, &install.class);
    ramjet.wait_served("shop.test", "404");
    ramjet.assert_running();
}

/// A canary Ingress with ingress-nginx's annotations and a mirror annotation on the primary, written
/// through the API server: the header decides, the weight follows an edit, the mirror gets copies,
/// and the generation's audit record counts the mirror.
#[test]
fn canaries_and_mirrors_through_the_api_server() {
    let (web, v2, shadow) = (Backend::start("web"), Backend::start("web-v2"), Backend::start("shadow"));
    let install = Install::new("canary");
    let (ns, class) = (install.ns.clone(), install.class.clone());
    install.service("web", &[&web]);
    install.service("web-v2", &[&v2]);
    install.service("shadow", &[&shadow]);
    let ingress = |name: &str, service: &str, annotations: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: {ns}\n  \
             annotations: {{ {annotations} }}\nspec:\n  ingressClassName: {class}\n  rules: [{{ host: shop.test, http: \
             {{ paths: [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: {service}, port: {{ name: http }} }} }} }}] }} }}]\n"
        )
    };
    install.admin.apply(&ingress("web", "web", "ramjet.dev/mirror-backend: \"shadow:http\""));
    let canary = |weight: u32| {
        ingress(
            "web-canary",
            "web-v2",
            &format!(
                "nginx.ingress.kubernetes.io/canary: \"true\", nginx.ingress.kubernetes.io/canary-by-header: X-Canary, \
                 nginx.ingress.kubernetes.io/canary-weight: \"{weight}\""
            ),
        )
    };
    install.admin.apply(&canary(0));
    let mut ramjet = install.ramjet("canary");
    ramjet.wait_ready();
    ramjet.wait_served("shop.test", "web");
    let with_header = |value: &str| {
        let mut conn = support::client::Conn::open(ramjet.http);
        served_by(&conn.get_with("shop.test", "/", &format!("X-Canary: {value}\r\n")))
    };
    assert!(eventually(PATIENCE, || with_header("always") == "web-v2"), "the canary header never reached web-v2");
    assert_eq!(with_header("never"), "web");
    assert!(eventually(PATIENCE, || shadow.requests() > 0), "the mirror never got a copy");
    // Weight 100: everything but `never` goes to the canary.
    install.admin.apply(&canary(100));
    ramjet.wait_served("shop.test", "web-v2");
    assert_eq!(with_header("never"), "web");
    let generations = ramjet.generations();
    let counted = generations["generations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|g| g["changes"]["mirrors_added"].as_u64() == Some(1));
    assert!(counted, "no generation counts the mirror added: {generations}");
    ramjet.assert_running();
}

/// The time from an API write being answered to the first request the new generation serves,
/// over 100 EndpointSlice changes (alternating between two backends).
#[test]
fn api_write_to_first_served_latency() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let install = Install::new("latency");
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut ramjet = install.ramjet("latency");
    ramjet.wait_ready();
    ramjet.wait_served("web.test", "a");
    let mut conn = support::client::Conn::open(ramjet.http);
    let mut samples = Vec::new();
    for i in 0..100 {
        let (to, name) = if i % 2 == 0 { (&b, "b") } else { (&a, "a") };
        let yaml = slice_yaml(&install.ns, "web-1", "web", &[to]);
        install.admin.apply(&yaml);
        let written = Instant::now();
        loop {
            let response = conn.get("web.test", "/");
            if served_by(&response) == name {
                break;
            }
            assert!(written.elapsed() < PATIENCE, "change {i} never reached traffic; log:\n{}", ramjet.log());
        }
        samples.push(written.elapsed());
    }
    samples.sort();
    let (p50, p99, max) = (percentile(&samples, 0.50), percentile(&samples, 0.99), samples[samples.len() - 1]);
    eprintln!("API write → first request served by the new generation, 100 changes: p50 {p50:.1?}, p99 {p99:.1?}, max {max:.1?}");
    assert!(p99 < Duration::from_secs(5), "p99 {p99:?}");
}

// ---------------------------------------------------------------------------------------------
// 3. Status is a fixed point.
// ---------------------------------------------------------------------------------------------

/// How long the idle window watches the audit log: the issue's 60 s (RAMJET_IDLE_WINDOW_SECS
/// shortens it while working on the test).
fn idle_window() -> Duration {
    let secs = std::env::var("RAMJET_IDLE_WINDOW_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    Duration::from_secs(secs)
}

#[test]
fn status_is_a_fixed_point() {
    let plane = ControlPlane::shared();
    let a = Backend::start("a");
    let install = Install::new("fixed");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    install.ingress("shop", "shop.test", "web");
    let mut ramjet = install.ramjet("fixed");
    ramjet.wait_ready();
    assert!(
        eventually(PATIENCE, || install.status_ips("web") == [LB_IP] && install.status_ips("shop") == [LB_IP]),
        "status never written; log:\n{}",
        ramjet.log()
    );

    // Status follows the --publish-service Service's address (the chart's Service).
    let published = flag(&install.args, "--publish-service").expect("the chart passes --publish-service");
    let (_, service) = published.split_once('/').unwrap();
    for ip in ["203.0.113.11", LB_IP] {
        install
            .admin
            .apply_status(
                "Service",
                &ns,
                service,
                "test-cloud",
                json!({ "loadBalancer": { "ingress": [{ "ip": ip }] } }),
            )
            .unwrap();
        assert!(
            eventually(PATIENCE, || install.status_ips("web") == [ip] && install.status_ips("shop") == [ip]),
            "status did not follow the Service's address to {ip}"
        );
    }

    // Field manager `ramjet` owns status.loadBalancer and nothing else.
    let ingress = install.ingress_value("web");
    let managers = ingress["metadata"]["managedFields"].as_array().unwrap();
    let ours: Vec<&Value> = managers.iter().filter(|m| m["manager"] == "ramjet").collect();
    assert_eq!(ours.len(), 1, "{managers:#?}");
    assert_eq!(ours[0]["operation"], "Apply", "{managers:#?}");
    assert_eq!(ours[0]["subresource"], "status", "{managers:#?}");
    let fields = &ours[0]["fieldsV1"];
    assert_eq!(fields.as_object().unwrap().keys().collect::<Vec<_>>(), ["f:status"], "{fields}");
    assert_eq!(fields["f:status"].as_object().unwrap().keys().collect::<Vec<_>>(), ["f:loadBalancer"], "{fields}");

    // Re-applying the same manifests changes no resourceVersion, and ramjet writes nothing back.
    let versions = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .map(|n| install.ingress_value(n)["metadata"]["resourceVersion"].as_str().unwrap().to_string())
            .collect()
    };
    let before = versions(&["web", "shop"]);
    let generation_before = ramjet.generations();
    install.ingress("web", "web.test", "web");
    install.ingress("shop", "shop.test", "web");
    install.service("web", &[&a]);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(versions(&["web", "shop"]), before, "re-applying the same manifests changed an Ingress");

    // The idle window: no write by ramjet but its Lease renewals.
    let since = audit_len(plane);
    std::thread::sleep(idle_window());
    let writes = writes_by(plane, &install.user(), since);
    let others: Vec<&String> = writes.iter().filter(|w| *w != "update leases").collect();
    assert!(others.is_empty(), "ramjet wrote while idle: {others:?}");
    assert!(writes.iter().any(|w| w == "update leases"), "no Lease renewal in the idle window: {writes:?}");
    assert_eq!(versions(&["web", "shop"]), before, "an Ingress changed while idle");
    let generation_after = ramjet.generations();
    assert_eq!(
        generation_before.to_string().len(),
        generation_after.to_string().len(),
        "a generation was published while idle:\n{generation_before}\n{generation_after}"
    );
    eprintln!("idle window {:?}: writes by ramjet: {} Lease renewals, nothing else", idle_window(), writes.len());

    // Another writer that keeps reverting the address: ramjet stops and says so with a warning Event.
    let mut reverted = 0;
    let stopped = eventually(PATIENCE, || {
        if install.status_ips("shop") == [LB_IP] {
            install.apply_status_as_other("shop");
            reverted += 1;
        }
        !install.events("StatusReverted", "shop").is_empty()
    });
    assert!(stopped, "ramjet kept fighting over status ({reverted} reverts) and said nothing; log:\n{}", ramjet.log());
    let event = &install.events("StatusReverted", "shop")[0];
    assert_eq!(event["type"], "Warning", "{event:#}");
    assert_eq!(event["regarding"]["kind"], "Ingress", "{event:#}");
    assert_eq!(event["regarding"]["namespace"], ns.as_str(), "{event:#}");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(note.contains("ramjet stops writing it"), "the Event does not say ramjet stopped: {note}");
    // Once stopped, it stays stopped: no more status writes, and the other writer's value stays.
    let since = audit_len(plane);
    std::thread::sleep(Duration::from_secs(5));
    let writes = writes_by(plane, &install.user(), since);
    assert!(!writes.iter().any(|w| w == "patch ingresses/status"), "ramjet still writes status: {writes:?}");
    assert_eq!(install.status_ips("shop"), ["198.51.100.1"]);
    assert_eq!(install.events("StatusReverted", "shop").len(), 1, "more than one StatusReverted Event");
    eprintln!("a writer reverting status: ramjet stopped after {reverted} reverts, with one warning Event");

    // An Ingress that stops being ours loses the address ramjet wrote.
    install.admin.apply(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: elsewhere }\nspec: { controller: example.com/other }\n",
    );
    install.admin.apply(&ingress_yaml(&ns, "elsewhere", "web", "web.test", "web", None));
    assert!(
        eventually(PATIENCE, || install.status_ips("web").is_empty()),
        "the address stayed on an Ingress of another class: {:?}",
        install.status_ips("web")
    );
    // Back in our class it gets the address again; when our IngressClass is deleted, it loses it.
    install.ingress("web", "web.test", "web");
    assert!(eventually(PATIENCE, || install.status_ips("web") == [LB_IP]));

    // An Ingress that names no class is ours while our IngressClass is the cluster's default; when
    // the default moves to another controller's class, the Ingress moves with it and loses the
    // address. (Created while no class is the default, so the API server's DefaultIngressClass
    // admission leaves its class unset.)
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: unnamed, namespace: {ns} }}\n\
         spec:\n  rules: [{{ host: unnamed.test, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ service: {{ name: web, port: {{ name: http }} }} }} }}] }} }}]\n"
    ));
    let class_yaml = |name: &str, controller: &str, default: bool| {
        let annotation = if default { "\"ingressclass.kubernetes.io/is-default-class\": \"true\"" } else { "" };
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: IngressClass\n\
             metadata: {{ name: {name}, annotations: {{ {annotation} }} }}\nspec: {{ controller: {controller} }}\n"
        )
    };
    let ours = format!("ramjet.dev/{}", install.name);
    install.admin.apply(&class_yaml(&install.class, &ours, true));
    assert!(
        eventually(PATIENCE, || install.status_ips("unnamed") == [LB_IP]),
        "an Ingress of the default class (ours) got no address; log:\n{}",
        ramjet.log()
    );
    install.admin.apply(&class_yaml(&install.class, &ours, false));
    install.admin.apply(&class_yaml("elsewhere", "example.com/other", true));
    let moved = eventually(PATIENCE, || install.status_ips("unnamed").is_empty());
    // The cluster has no default class again, whatever happened.
    install.admin.apply(&class_yaml("elsewhere", "example.com/other", false));
    assert!(
        moved,
        "the address stayed on an Ingress that moved to another controller: {:?}",
        install.status_ips("unnamed")
    );
    install.admin.delete("IngressClass", None, &install.class);
    assert!(
        eventually(PATIENCE, || install.status_ips("web").is_empty()),
        "the address stayed after our IngressClass was deleted: {:?}",
        install.status_ips("web")
    );
    // What another writer set is not ramjet's to remove.
    assert_eq!(install.status_ips("shop"), ["198.51.100.1"]);
    ramjet.assert_running();
}

impl Install {
    /// Another field manager sets the Ingress's address to its own value.
    fn apply_status_as_other(&self, name: &str) {
        self.admin
            .apply_status(
                "Ingress",
                &self.ns,
                name,
                "someone-else",
                json!({ "loadBalancer": { "ingress": [{ "ip": "198.51.100.1" }] } }),
            )
            .unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Events pass the real validation.
// ---------------------------------------------------------------------------------------------

#[test]
fn events_pass_the_real_validation() {
    let a = Backend::start("a");
    let install = Install::new("events");
    let ns = install.ns.clone();
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut ramjet = install.ramjet("events");
    ramjet.wait_ready();
    assert!(
        eventually(PATIENCE, || install.events("ConfigApplied", &install.class).len() == 1),
        "no ConfigApplied Event; log:\n{}",
        ramjet.log()
    );
    let event = &install.events("ConfigApplied", &install.class)[0];
    assert_eq!(event["regarding"]["kind"], "IngressClass", "{event:#}");
    assert_eq!(event["type"], "Normal", "{event:#}");
    for field in ["reportingController", "reportingInstance", "action", "eventTime", "note"] {
        assert!(event[field].is_string() && event[field] != "", "{field} missing: {event:#}");
    }

    // One Event per publish: a change makes exactly one more.
    install.ingress("shop", "shop.test", "web");
    ramjet.wait_served("shop.test", "a");
    assert!(eventually(PATIENCE, || install.events("ConfigApplied", &install.class).len() == 2));

    // A pin and its release: ConfigPinned and ConfigResumed on the IngressClass, one each.
    let (status, body) = http_request(ramjet.admin, "POST", "/admin/rollback", r#"{"generation": 1}"#).unwrap();
    assert_eq!(status, 200, "{body}");
    ramjet.wait_served("shop.test", "404");
    let (status, body) = http_request(ramjet.admin, "DELETE", "/admin/rollback", "").unwrap();
    assert_eq!(status, 200, "{body}");
    ramjet.wait_served("shop.test", "a");
    for reason in ["ConfigPinned", "ConfigResumed"] {
        assert!(
            eventually(PATIENCE, || install.events(reason, &install.class).len() == 1),
            "{reason}: {:#?}",
            install.events(reason, &install.class)
        );
    }

    // Bad Ingresses: a missing TLS Secret and an unknown Service port get a warning Event each.
    install.admin.apply(&ingress_yaml(&ns, &install.class, "no-secret", "tls.test", "web", Some("missing")));
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: bad-port, namespace: {ns} }}\n\
         spec:\n  ingressClassName: {}\n  rules: [{{ host: port.test, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ service: {{ name: web, port: {{ name: nope }} }} }} }}] }} }}]\n",
        install.class
    ));
    let warnings = |name: &str| -> Vec<Value> {
        install
            .admin
            .list("Event", Some(&ns))
            .into_iter()
            .filter(|e| e["regarding"]["name"] == name && e["type"] == "Warning")
            .collect()
    };
    // What ramjet cannot serve is said plainly: an ExternalName Service, a resource backend.
    install.admin.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: ext, namespace: {ns} }}\n\
         spec: {{ type: ExternalName, externalName: example.com, ports: [{{ name: http, port: 80 }}] }}\n"
    ));
    install.admin.apply(&ingress_yaml(&ns, &install.class, "external-name", "ext.test", "ext", None));
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{ name: resource-backend, namespace: {ns} }}\n\
         spec:\n  ingressClassName: {}\n  rules: [{{ host: res.test, http: {{ paths: [{{ path: /, pathType: Prefix, \
         backend: {{ resource: {{ apiGroup: k8s.example.com, kind: StorageBucket, name: static }} }} }}] }} }}]\n",
        install.class
    ));
    for (name, says) in [
        ("no-secret", "missing"),
        ("bad-port", "nope"),
        ("external-name", "is of type ExternalName, which is not supported"),
        ("resource-backend", "resource backends (StorageBucket static) are not supported"),
    ] {
        assert!(
            eventually(PATIENCE, || !warnings(name).is_empty()),
            "no warning Event on {name}; log:\n{}",
            ramjet.log()
        );
        let event = &warnings(name)[0];
        assert_eq!(event["regarding"]["kind"], "Ingress", "{event:#}");
        let note = event["note"].as_str().unwrap();
        assert!(note.len() <= 1024 && note.contains(says), "{name}: the note does not say \"{says}\": {note}");
    }
    // The rest of the cluster still serves.
    ramjet.wait_served("web.test", "a");

    // Idle: no more Events (about this install's objects: other tests run beside this one).
    let ours = || {
        let events = install.admin.list("Event", None);
        events
            .iter()
            .filter(|e| {
                e["regarding"]["namespace"] == install.ns.as_str() || e["regarding"]["name"] == install.class.as_str()
            })
            .count()
    };
    let count = ours();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(ours(), count, "Events written while idle");
    ramjet.assert_running();
}

// ---------------------------------------------------------------------------------------------
// 5. Two replicas, one writer.
// ---------------------------------------------------------------------------------------------

#[test]
fn two_replicas_one_writer_and_takeover() {
    let plane = ControlPlane::shared();
    let a = Backend::start("a");
    let install = Install::new("replicas");
    install.service("web", &[&a]);
    install.ingress("web", "web.test", "web");
    let mut one = install.ramjet("one");
    let mut two = install.ramjet("two");
    one.wait_ready();
    two.wait_ready();
    one.wait_served("web.test", "a");
    two.wait_served("web.test", "a");
    assert!(eventually(PATIENCE, || install.status_ips("web") == [LB_IP]));
    let leader = install.lease_holder().expect("a Lease holder");
    let (mut leader_proc, mut follower) = if leader == "one" { (one, two) } else { (two, one) };

    // Exactly one replica writes status.
    install.ingress("shop", "shop.test", "web");
    assert!(eventually(PATIENCE, || install.status_ips("shop") == [LB_IP]));
    let status_writes = plane
        .audit_entries()
        .iter()
        .filter(|e| e["objectRef"]["subresource"] == "status" && e["objectRef"]["namespace"] == install.ns.as_str())
        .filter(|e| e["objectRef"]["resource"] == "ingresses" && e["objectRef"]["name"] == "shop")
        .filter(|e| e["stage"] == "ResponseComplete" && e["user"]["username"] == install.user().as_str())
        .count();
    assert_eq!(status_writes, 1, "the new Ingress's status was written {status_writes} times by two replicas");

    // SIGKILL the leader: the other takes over within the lease duration (15 s) of the leader's last
    // renewal and writes status. The follower watches the Lease, so it sees that renewal within the
    // watch's latency, and tries to take over the moment it expires (not at its next 2 s round):
    // the bound is the lease duration plus the slack of a watch event and one get and update on a
    // loaded machine, which the test takes as 1.5 s. Polling alone allowed 15 s + 2 × 2 s.
    const LEASE: Duration = Duration::from_secs(15);
    const SLACK: Duration = Duration::from_millis(1500);
    let killed = Instant::now();
    leader_proc.signal(libc::SIGKILL);
    assert!(leader_proc.wait_exit(Duration::from_secs(10)));
    let last_renewal = install.admin.get("Lease", Some(&install.ns), &install.election).unwrap();
    assert_eq!(last_renewal["spec"]["holderIdentity"], leader.as_str(), "{last_renewal:#}");
    assert!(
        eventually(Duration::from_secs(30), || install.lease_holder().as_deref() == Some(follower.identity.as_str())),
        "no takeover; log:\n{}",
        follower.log()
    );
    let takeover = killed.elapsed();
    let taken = install.admin.get("Lease", Some(&install.ns), &install.election).unwrap();
    // Both times are this machine's clock: the leader's renewTime, the new holder's acquireTime.
    let time = |lease: &Value, field: &str| -> k8s_openapi::jiff::Timestamp {
        lease["spec"][field].as_str().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("{field}: {lease:#}"))
    };
    let after_renewal = Duration::try_from(time(&taken, "acquireTime") - time(&last_renewal, "renewTime")).unwrap();
    install.ingress("late", "late.test", "web");
    assert!(
        eventually(PATIENCE, || install.status_ips("late") == [LB_IP]),
        "the new leader writes no status; its log:\n{}",
        follower.log()
    );
    eprintln!(
        "leader SIGKILL → takeover {takeover:.1?} after the kill, {after_renewal:.1?} after its last renewal (lease {LEASE:?})"
    );
    assert!(after_renewal >= LEASE, "taken over {after_renewal:?} after the last renewal: before the lease expired");
    assert!(after_renewal <= LEASE + SLACK, "taken over {after_renewal:?} after the last renewal");
    assert!(takeover <= LEASE + SLACK, "takeover took {takeover:?} after the kill");

    // SIGTERM releases at once: a third replica takes over well before the lease would expire. It
    // sees the release on its watch and takes over within about 130 ms here; the bound leaves room
    // for one Lease request that hangs on a loaded machine (the election gives it up after a third
    // of the lease), and is still half the 15 s a Lease that was not released would take.
    const RELEASED: Duration = Duration::from_millis(7500);
    let mut three = install.ramjet("three");
    three.wait_ready();
    let stopped = Instant::now();
    follower.signal(libc::SIGTERM);
    assert!(
        eventually(Duration::from_secs(30), || install.lease_holder().as_deref() == Some("three")),
        "no takeover after SIGTERM; log:\n{}",
        three.log()
    );
    let released = stopped.elapsed();
    assert!(
        released < RELEASED,
        "takeover after SIGTERM took {released:?}; the stopped leader's log:\n{}\nthree's log:\n{}\nthe Lease requests:\n{}",
        follower.log(),
        three.full_log(),
        lease_requests(plane, &install)
    );
    eprintln!("leader SIGTERM → takeover {released:.1?}");
    assert!(follower.wait_exit(PATIENCE));
}

/// The API server's record of every request on the install's Lease: when, which verb, the answer.
fn lease_requests(plane: &ControlPlane, install: &Install) -> String {
    let entries = plane.audit_entries();
    let lines = entries
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "leases" && e["objectRef"]["namespace"] == install.ns.as_str())
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| {
            format!(
                "{} {} {} {}",
                e["requestReceivedTimestamp"].as_str().unwrap_or("?"),
                e["verb"].as_str().unwrap_or("?"),
                e["responseStatus"]["code"],
                e["userAgent"].as_str().unwrap_or("?"),
            )
        });
    lines.collect::<Vec<_>>().join("\n")
}

// ---------------------------------------------------------------------------------------------
// 6. Faults (a control plane of their own: these stop the API server).
// ---------------------------------------------------------------------------------------------

/// How long the API server stays down under load (RAMJET_OUTAGE_SECS; 30 s by default).
fn outage() -> Duration {
    Duration::from_secs(std::env::var("RAMJET_OUTAGE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30))
}

#[test]
fn survives_the_api_server_starting_late_and_going_away() {
    let plane = ControlPlane::prepare("faults");
    plane.start_etcd();
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let dir = support::temp_dir("cluster-faults");
    let (http, https, admin) = (
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
    );
    // The API server is not up yet, so no ServiceAccount token can be had: ramjet runs with a static
    // token (user `ramjet`, whose reads the audit log records too).
    let kubeconfig = dir.join("ramjet.kubeconfig");
    plane.write_kubeconfig(&kubeconfig, control_plane::RAMJET_TOKEN, "default");
    let args: Vec<String> = vec![
        format!("--http-addr={http}"),
        format!("--https-addr={https}"),
        format!("--admin-addr={admin}"),
        "--io-driver=auto".into(),
        "--workers=1".into(),
        "--ingress-class=faults".into(),
        "--controller-name=ramjet.dev/faults".into(),
        format!("--publish-address={LB_IP}"),
        format!("--kubeconfig={}", kubeconfig.display()),
    ];
    let mut ramjet = spawn_ramjet(&dir, "faults", "default", &args, http, https, admin);

    // Started before the API server: /readyz answers 503, and the log says why.
    assert!(
        eventually(PATIENCE, || ramjet.readyz() == Some(503)),
        "/readyz never answered 503 while the API server was down: {:?}; log:\n{}",
        ramjet.readyz(),
        ramjet.log()
    );
    let down_since = Instant::now();
    while down_since.elapsed() < Duration::from_secs(3) {
        assert_eq!(ramjet.readyz(), Some(503));
        std::thread::sleep(Duration::from_millis(100));
    }
    ramjet.assert_running();
    let log = ramjet.full_log();
    assert!(
        log.contains(&plane.url.replace("https://", "")) || log.to_lowercase().contains("connect"),
        "the log does not say why ramjet is not ready:\n{log}"
    );

    plane.start_apiserver();
    let up = Instant::now();
    let admin_api = Kube::new(&plane.admin_kubeconfig);
    admin_api.apply("apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: { name: faults }\nspec: { controller: ramjet.dev/faults }\n");
    admin_api.apply("apiVersion: v1\nkind: Namespace\nmetadata: { name: shop }\n");
    admin_api.apply(&Service::new("shop", "web").target_port(8080).service_yaml());
    admin_api.apply(&slice_yaml("shop", "web-1", "web", &[&a]));
    admin_api.apply(&ingress_yaml("shop", "faults", "web", "web.test", "web", None));
    ramjet.wait_ready();
    ramjet.wait_served("web.test", "a");
    eprintln!("started before the API server: ready and serving {:.1?} after it came up", up.elapsed());
    // No Event is lost on a brand-new cluster. Events about our (cluster-scoped) IngressClass go to
    // the `default` namespace, which the API server's bootstrap controller creates only after the
    // server answers: the first publish's Event used to be refused with 404 `namespaces "default"
    // not found` and dropped. Every generation published so far has its ConfigApplied Event.
    let published: Vec<u64> = ramjet.generations()["generations"]
        .as_array()
        .map(|g| g.iter().filter(|g| g["published"] == true).filter_map(|g| g["generation"].as_u64()).collect())
        .unwrap_or_default();
    assert!(published.contains(&1), "generation 1 was not published: {}", ramjet.generations());
    let applied_notes = || -> Vec<String> {
        admin_api
            .list("Event", Some("default"))
            .into_iter()
            .filter(|e| e["reason"] == "ConfigApplied" && e["regarding"]["name"] == "faults")
            .filter_map(|e| e["note"].as_str().map(String::from))
            .collect()
    };
    assert!(
        eventually(PATIENCE, || {
            let notes = applied_notes();
            published.iter().all(|g| notes.iter().any(|n| n.contains(&format!("→{g})"))))
        }),
        "a ConfigApplied Event is missing for generations {published:?}: {:?}; log:\n{}",
        applied_notes(),
        ramjet.full_log()
    );
    if ramjet.full_log().contains("namespace does not exist yet") {
        eprintln!("the first Event met the `default` namespace missing, and waited for it");
    }

    // Under load, the API server goes away: every request is still served by the last generation.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let outage = outage();
    let slice_lists = || {
        plane
            .audit_entries()
            .iter()
            .filter(|e| e["user"]["username"] == "ramjet" && e["verb"] == "list" && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["resource"] == "endpointslices")
            .count()
    };
    let lists_before = slice_lists();
    let (served, failed) = std::thread::scope(|s| {
        let load = s.spawn(|| {
            let (mut ok, mut failed) = (0u64, Vec::new());
            let mut conn = support::client::Conn::open(http);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                conn.send(b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n");
                match conn.read_response_to(false) {
                    Some(r) if r.status == 200 => ok += 1,
                    Some(r) => failed.push(r.status.to_string()),
                    None => {
                        failed.push("connection closed".into());
                        conn = support::client::Conn::open(http);
                    }
                }
            }
            (ok, failed)
        });
        // Whatever happens below (a failed assertion too), the load stops, or the scope never ends.
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        std::thread::sleep(Duration::from_secs(1));
        plane.stop_apiserver();
        let stopped = Instant::now();
        while stopped.elapsed() < outage {
            assert_eq!(ramjet.readyz(), Some(200), "not ready while the API server is away");
            std::thread::sleep(Duration::from_millis(500));
        }
        // While it is away, etcd forgets its history: ramjet's watches cannot resume (410 Gone) and
        // must list again.
        plane.compact_etcd();
        plane.start_apiserver();
        // A change made once the API server is back reaches traffic after ramjet reconnects.
        // The watches come back through their backoff (capped at 5 s): a resumed watch gets 410
        // Gone, waits once more and lists again. With kube-rs' default cap of 30 s this took 40-60 s.
        let admin_api = Kube::new(&plane.admin_kubeconfig);
        admin_api.apply(&slice_yaml("shop", "web-1", "web", &[&b]));
        let changed = Instant::now();
        assert!(
            eventually(PATIENCE, || ramjet.served("web.test") == "b"),
            "a change made after the API server came back never reached traffic; log:\n{}",
            ramjet.log()
        );
        eprintln!("after the outage: a change reached traffic {:.1?} after it was written", changed.elapsed());
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        load.join().unwrap()
    });
    assert!(
        failed.is_empty(),
        "{} requests failed while the API server was away: {:?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    assert!(slice_lists() > lists_before, "no relist after the history was compacted away");
    // And it keeps watching afterwards: the relist left no gap.
    Kube::new(&plane.admin_kubeconfig).apply(&slice_yaml("shop", "web-1", "web", &[&a]));
    ramjet.wait_served("web.test", "a");
    eprintln!("API server away for {outage:?} under load: {served} requests served, none failed");

    // A wedged API server (its process stopped, connections open, every request hanging): the
    // election gives a hanging Lease request up after a third of the lease (5 s) and tries again,
    // so the leader renews once the server answers, without stepping down (it has 10 s).
    let lease_renewals = || {
        plane
            .audit_entries()
            .iter()
            .filter(|e| e["user"]["username"] == "ramjet" && e["verb"] == "update" && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["resource"] == "leases" && e["objectRef"]["name"] == "ramjet-leader")
            .count()
    };
    let renewals = lease_renewals();
    let log_before = ramjet.full_log().len();
    plane.freeze_apiserver(Duration::from_secs(7));
    assert!(
        eventually(PATIENCE, || lease_renewals() > renewals),
        "no Lease renewal after the API server came back; log:\n{}",
        ramjet.log()
    );
    let log = ramjet.full_log().split_off(log_before);
    assert!(
        log.contains("did not answer a Lease request in time"),
        "the hanging Lease request was not given up; log:\n{log}"
    );
    assert!(!log.contains("stepping down"), "the leader stepped down over a 7 s freeze; log:\n{log}");
    Kube::new(&plane.admin_kubeconfig).apply(&slice_yaml("shop", "web-1", "web", &[&b]));
    ramjet.wait_served("web.test", "b");
    ramjet.assert_running();
}

// ---------------------------------------------------------------------------------------------
// 7. Scale (a control plane of its own: thousands of objects would slow every other test's lists).
// ---------------------------------------------------------------------------------------------

/// How many Ingresses (each with its Service and EndpointSlice): RAMJET_SCALE_INGRESSES, 5,000 by default.
fn scale() -> usize {
    std::env::var("RAMJET_SCALE_INGRESSES").ok().and_then(|s| s.parse().ok()).unwrap_or(5_000)
}

#[test]
fn scale_thousands_of_ingresses() {
    let n = scale();
    let plane = ControlPlane::start("scale");
    let install = Install::apply_on(&plane, "scale", Install::render("scale"));
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let ns = install.ns.clone();
    let class = install.class.clone();
    let writing = Instant::now();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (plane, a, ns, class) = (&plane, &a, &ns, &class);
            s.spawn(move || {
                let kube = Kube::new(&plane.admin_kubeconfig);
                for i in (t..n).step_by(4) {
                    let name = format!("web-{i}");
                    kube.apply(&Service::new(ns, &name).target_port(8080).service_yaml());
                    kube.apply(&slice_yaml(ns, &format!("{name}-1"), &name, &[a]));
                    kube.apply(&ingress_yaml(ns, class, &name, &format!("{name}.test"), &name, None));
                }
            });
        }
    });
    eprintln!("scale: wrote {n} Ingresses, Services and EndpointSlices in {:.1?}", writing.elapsed());

    let since = audit_len(&plane);
    let started = Instant::now();
    let mut ramjet = install.ramjet("scale");
    ramjet.wait_ready_within(Duration::from_secs(300));
    let ready = started.elapsed();
    ramjet.wait_served("web-0.test", "a");
    ramjet.wait_served(&format!("web-{}.test", n - 1), "a");
    let rss_kb: u64 = std::fs::read_to_string(format!("/proc/{}/status", ramjet.pid()))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0);
    let requests: Vec<String> = plane.audit_entries()[since..]
        .iter()
        .filter(|e| e["user"]["username"] == install.user().as_str() && e["stage"] == "ResponseComplete")
        .filter(|e| e["objectRef"]["resource"] != "leases" && e["objectRef"]["resource"] != "events")
        .filter(|e| e["verb"] == "list" || e["verb"] == "watch" || e["verb"] == "get")
        .map(|e| {
            format!("{} {}", e["verb"].as_str().unwrap_or("?"), e["objectRef"]["resource"].as_str().unwrap_or("?"))
        })
        .collect();

    // All status written (one write per Ingress), and how long that takes.
    let status_writes = || {
        plane.audit_entries()[since..]
            .iter()
            .filter(|e| e["user"]["username"] == install.user().as_str() && e["stage"] == "ResponseComplete")
            .filter(|e| e["objectRef"]["subresource"] == "status" && e["objectRef"]["resource"] == "ingresses")
            .count()
    };
    assert!(
        eventually(Duration::from_secs(600), || status_writes() >= n),
        "status written for {} of {n} Ingresses; log:\n{}",
        status_writes(),
        ramjet.log()
    );
    let all_status = started.elapsed();

    // One change reaches traffic.
    let mut conn = support::client::Conn::open(ramjet.http);
    install.admin.apply(&slice_yaml(&ns, "web-7-1", "web-7", &[&b]));
    let written = Instant::now();
    while served_by(&conn.get("web-7.test", "/")) != "b" {
        assert!(written.elapsed() < PATIENCE, "the change never reached traffic");
    }
    let change = written.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(status_writes(), n, "status written more than once per Ingress");
    eprintln!(
        "scale: {n} Ingresses: ready {ready:.1?} after start, RSS {:.1} MB, {} read requests until then {:?}, \
         status on all {n} after {all_status:.1?}, one EndpointSlice change → traffic {change:.1?}",
        rss_kb as f64 / 1024.0,
        requests.len(),
        requests,
    );
}

/// Moving over from ingress-nginx without touching an Ingress: ramjet installed by its chart to take
/// over ingress-nginx's IngressClass (`ingressClass.create: false`, its name, controller
/// `k8s.io/ingress-nginx`). `ramjet migration-report` first says what will differ; then the daemon
/// serves the class's Ingresses, refuses the snippet with a warning Event, and keeps an Ingress whose
/// authentication it cannot enforce out of the table, with an Event saying why.
#[test]
fn takes_over_ingress_nginx_and_reports_its_annotations() {
    let name = "takeover";
    let ns = format!("t-{name}");
    let plane = ControlPlane::shared();
    let admin = Kube::new(&plane.admin_kubeconfig);
    // ingress-nginx's IngressClass, as its own chart made it.
    admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {{ name: {name} }}\n\
         spec: {{ controller: k8s.io/ingress-nginx }}\n"
    ));
    let values =
        json!({ "ingressClass": { "create": false, "name": name, "controllerValue": "k8s.io/ingress-nginx" } });
    let install = Install::apply(name, render(name, &ns, &values));
    let a = Backend::start("a");
    install.service("web", &[&a]);
    let annotated = |ingress: &str, host: &str, annotations: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\n\
             metadata: {{ name: {ingress}, namespace: {ns}, annotations: {{ {annotations} }} }}\n\
             spec:\n  ingressClassName: {name}\n  rules: [{{ host: {host}, http: {{ paths: [{{ path: /, pathType: Prefix, \
             backend: {{ service: {{ name: web, port: {{ name: http }} }} }} }}] }} }}]\n"
        )
    };
    admin.apply(&annotated("plain", "plain.test", "nginx.ingress.kubernetes.io/proxy-buffering: \"off\""));
    admin.apply(&annotated(
        "snippet",
        "snippet.test",
        "nginx.ingress.kubernetes.io/configuration-snippet: \"more_set_headers 'X-A: b';\", \
         nginx.ingress.kubernetes.io/limit-rate: \"1024\"",
    ));
    admin.apply(&annotated(
        "private",
        "private.test",
        "nginx.ingress.kubernetes.io/auth-url: https://auth.example.com/check",
    ));

    // Before switching: the report, from the API server.
    let report = |format: &str| {
        let kubeconfig = plane.admin_kubeconfig.display().to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_ramjet"))
            .args(["migration-report", "--kubeconfig", &kubeconfig, "-n", &ns, "--format", format])
            .output()
            .expect("run ramjet migration-report");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, text, stderr) = report("text");
    assert_eq!(code, Some(1), "a report with refusals is not clean:\n{text}{stderr}");
    for line in [
        format!("Ingress {ns}/plain (class {name})"),
        "honoured         nginx.ingress.kubernetes.io/proxy-buffering=\"off\"".to_string(),
        "refused          nginx.ingress.kubernetes.io/configuration-snippet=".to_string(),
        "its directives (more_set_headers) are not applied".to_string(),
        "ignored          nginx.ingress.kubernetes.io/limit-rate=\"1024\": response bandwidth is not limited"
            .to_string(),
        "refused-to-serve nginx.ingress.kubernetes.io/auth-url=".to_string(),
        "3 Ingresses, 4 findings: 1 honoured, 1 refused, 1 ignored, 1 refused-to-serve".to_string(),
    ] {
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    let (code, json, _) = report("json");
    assert_eq!(code, Some(1));
    let json: Value = serde_json::from_str(&json).expect("JSON report");
    assert_eq!(json["totals"], json!({ "honoured": 1, "refused": 1, "ignored": 1, "refused-to-serve": 1 }), "{json:#}");

    // The switch: the class's Ingresses are served; the one with authentication is not.
    let mut ramjet = install.ramjet(name);
    ramjet.wait_ready();
    ramjet.wait_served("plain.test", "a");
    ramjet.wait_served("snippet.test", "a");
    assert_eq!(ramjet.served("private.test"), "404", "an Ingress asking for authentication is never served open");
    let note_of = |reason: &str, ingress: &str| {
        install.events(reason, ingress).first().and_then(|e| e["note"].as_str().map(String::from))
    };
    assert!(
        eventually(PATIENCE, || note_of("ConfigIgnored", "snippet")
            .is_some_and(|n| n.contains("configuration-snippet is refused"))),
        "no warning Event for the snippet: {:#?}\nlog:\n{}",
        install.events("ConfigIgnored", "snippet"),
        ramjet.log()
    );
    assert!(
        eventually(PATIENCE, || note_of("CompileFailed", "private").is_some_and(|n| n.contains("auth-url"))),
        "no Event for the Ingress left out: {:#?}",
        install.events("CompileFailed", "private")
    );
    admin.delete("IngressClass", None, name);
}

// ---------------------------------------------------------------------------------------------
// Canary auto-promotion, decided by the Lease holder and kept in ramjet.dev/canary-state.
// ---------------------------------------------------------------------------------------------

/// `web` (primary) and `web-v2` (canary) for shop.test; the canary Ingress auto-promotes with
/// these `ramjet.dev/canary-*` settings and carries the user's own annotation `team: shop`.
fn auto_canary(install: &Install, web: &Backend, v2: &Backend, settings: &[(&str, &str)]) {
    install.service("web", &[web]);
    install.service("web-v2", &[v2]);
    install.ingress("web", "shop.test", "web");
    install.admin.apply(&auto_canary_yaml(install, settings, &[]));
}

fn auto_canary_yaml(install: &Install, settings: &[(&str, &str)], extra: &[(&str, &str)]) -> String {
    let mut annotations = vec![
        "team: shop".to_string(),
        "nginx.ingress.kubernetes.io/canary: \"true\"".to_string(),
        "ramjet.dev/canary-auto-promote: \"true\"".to_string(),
    ];
    annotations.extend(settings.iter().map(|(k, v)| format!("ramjet.dev/canary-{k}: \"{v}\"")));
    annotations.extend(extra.iter().map(|(k, v)| format!("{k}: '{v}'")));
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web-canary\n  namespace: {}\n  \
         annotations: {{ {} }}\nspec:\n  ingressClassName: {}\n  rules: [{{ host: shop.test, http: {{ paths: \
         [{{ path: /, pathType: Prefix, backend: {{ service: {{ name: web-v2, port: {{ name: http }} }} }} }}] }} }}]\n",
        install.ns,
        annotations.join(", "),
        install.class
    )
}

/// The canary's `ramjet.dev/canary-state`, parsed.
fn canary_state(install: &Install) -> Option<Value> {
    let ingress = install.admin.get("Ingress", Some(&install.ns), "web-canary")?;
    let text = ingress["metadata"]["annotations"]["ramjet.dev/canary-state"].as_str()?.to_string();
    serde_json::from_str(&text).ok()
}

fn state_weight(install: &Install) -> Option<u64> {
    canary_state(install).and_then(|s| s["weight"].as_u64())
}

fn phase(install: &Install) -> String {
    canary_state(install).and_then(|s| s["phase"].as_str().map(String::from)).unwrap_or_default()
}

/// Requests to shop.test through `addr`, every few milliseconds, until dropped: what answered.
struct Traffic {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Traffic {
    fn start(addr: SocketAddr) -> Traffic {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stopping, record) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                // One connection per request: a restarting ramjet only costs a few failures.
                let answer = match http(addr, "shop.test", "/") {
                    Some((status, body)) => format!("{status} {}", body.trim()),
                    None => "down".to_string(),
                };
                record.lock().unwrap().push(answer);
                std::thread::sleep(Duration::from_millis(8));
            }
        });
        Traffic { stop, seen }
    }

    /// Waits until 20 answers in a row are `want`.
    fn wait_all(&self, want: &str) {
        self.take();
        let mut last = Vec::new();
        let ok = eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(300));
            last = self.take();
            last.len() >= 20 && last.iter().all(|s| s == want)
        });
        assert!(ok, "never all `{want}`; the last answers: {last:?}");
    }

    /// Answers since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// An audit webhook receiver: the JSON bodies POSTed to it.
struct Webhook {
    url: String,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Webhook {
    fn start() -> Webhook {
        use std::io::BufRead;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/audit", listener.local_addr().unwrap());
        let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let keep = bodies.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':') {
                        if name.eq_ignore_ascii_case("content-length") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                }
                let mut body = vec![0; length];
                if reader.read_exact(&mut body).is_ok() {
                    if let Ok(v) = serde_json::from_slice(&body) {
                        keep.lock().unwrap().push(v);
                    }
                }
                let _ = (&stream).write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
            }
        });
        Webhook { url, bodies }
    }

    /// The canary decisions received, by reason.
    fn canary_reasons(&self) -> Vec<String> {
        let bodies = self.bodies.lock().unwrap();
        bodies.iter().filter(|b| b["event"] == "canary").map(|b| b["reason"].as_str().unwrap().to_string()).collect()
    }
}

/// A healthy canary steps 25 → 50 → 75 and is promoted (every request by weight to it); a restart
/// in the middle resumes from the annotation instead of starting over; the user's own annotation
/// and a later apply of the canary by the user leave ramjet's state alone, and its writes leave
/// theirs alone.
#[test]
fn a_healthy_canary_promotes_itself_and_a_restart_resumes() {
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("promote");
    let settings =
        [("step-weight", "25"), ("max-weight", "75"), ("interval", "2s"), ("min-requests", "5"), ("max-p99", "5s")];
    auto_canary(&install, &web, &v2, &settings);
    let webhook = Webhook::start();
    let extra = [format!("--audit-webhook={}", webhook.url), "--access-log-errors-only".to_string()];
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut ramjet = install.ramjet_with("promote", &install.kubeconfig, &extra);
    ramjet.wait_ready();
    let traffic = Traffic::start(ramjet.http);
    assert!(
        eventually(PATIENCE, || state_weight(&install) == Some(50)),
        "never stepped to 50: {:?}; log:\n{}",
        canary_state(&install),
        ramjet.log()
    );
    // The user re-applies the canary (their field manager, without ramjet's annotation): the state
    // stays, and ramjet's writes never took the user's annotation.
    install.admin.apply(&auto_canary_yaml(&install, &settings, &[]));
    let ingress = install.ingress_value("web-canary");
    assert_eq!(ingress["metadata"]["annotations"]["team"], "shop");
    assert_eq!(state_weight(&install), Some(50), "{ingress:#}");
    let managers: Vec<&str> = ingress["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["manager"] == "ramjet" && m["subresource"].is_null())
        .flat_map(|m| m["fieldsV1"]["f:metadata"]["f:annotations"].as_object().unwrap().keys())
        .map(String::as_str)
        .collect();
    assert_eq!(managers, ["f:ramjet.dev/canary-state"], "ramjet owns exactly its annotation: {ingress:#}");

    // Restart: a new process resumes at 50, never back to 25, and does not start over.
    drop(ramjet);
    let mut ramjet = install.ramjet_with("promote", &install.kubeconfig, &extra);
    ramjet.wait_ready();
    drop(traffic);
    let traffic = Traffic::start(ramjet.http);
    let mut weights = Vec::new();
    let promoted = eventually(PATIENCE, || {
        let w = state_weight(&install);
        if weights.last() != Some(&w) {
            weights.push(w);
        }
        phase(&install) == "Promoted"
    });
    assert!(promoted, "never promoted: {weights:?}; log:\n{}", ramjet.log());
    assert!(!weights.contains(&Some(25)), "started over after the restart: {weights:?}");
    assert_eq!(
        install.events("CanaryStarted", "web-canary").len(),
        1,
        "{:#?}",
        install.events("CanaryStarted", "web-canary")
    );
    let stepped = install.events("CanaryStepped", "web-canary");
    assert!(stepped.len() >= 2, "{stepped:#?}");
    let note = stepped[0]["note"].as_str().unwrap();
    assert!(note.contains("requests, success rate 100.00%, p99"), "{note}");
    let promoted = install.events("CanaryPromoted", "web-canary");
    assert_eq!(promoted.len(), 1, "{promoted:#?}");
    assert!(promoted[0]["note"].as_str().unwrap().contains("Make the primary Ingress's backend match the canary"));
    // Promoted: every request goes to the canary.
    traffic.wait_all("200 backend=web-v2");
    // The same decisions went to the audit webhook (and the `audit` log target beside it).
    let reasons = webhook.canary_reasons();
    assert!(
        ["CanaryStarted", "CanaryStepped", "CanaryPromoted"].iter().all(|r| reasons.iter().any(|x| x == r)),
        "{reasons:?}"
    );
    ramjet.assert_running();
}

/// A canary whose backend answers 500 fails its checks and is aborted to weight 0 after the
/// threshold; the primary gets everything again.
#[test]
fn a_failing_canary_aborts_to_zero() {
    let (web, v2) = (Backend::start("web"), Backend::answering("web-v2", 500));
    let install = Install::new("abort");
    let settings = [("step-weight", "50"), ("interval", "1s"), ("min-requests", "3"), ("failure-threshold", "2")];
    auto_canary(&install, &web, &v2, &settings);
    let mut ramjet = install.ramjet("abort");
    ramjet.wait_ready();
    let traffic = Traffic::start(ramjet.http);
    assert!(
        eventually(PATIENCE, || phase(&install) == "Aborted"),
        "never aborted: {:?}; log:\n{}",
        canary_state(&install),
        ramjet.log()
    );
    assert_eq!(state_weight(&install), Some(0));
    let failed = install.events("CanaryCheckFailed", "web-canary");
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert_eq!(failed[0]["type"], "Warning");
    assert!(failed[0]["note"].as_str().unwrap().contains("success rate 0.00% is below 99%"), "{failed:#?}");
    let aborted = install.events("CanaryAborted", "web-canary");
    assert_eq!(aborted.len(), 1, "{aborted:#?}");
    assert!(aborted[0]["note"].as_str().unwrap().contains("aborted to weight 0 after 2 failed checks"));
    traffic.wait_all("200 backend=web");
    // Deleting the annotation (`kubectl annotate ... ramjet.dev/canary-state-`) starts over.
    let api: kube::Api<k8s_openapi::api::networking::v1::Ingress> =
        kube::Api::namespaced(install.admin.client.clone(), &install.ns);
    let unset = json!({ "metadata": { "annotations": { "ramjet.dev/canary-state": null } } });
    let params = kube::api::PatchParams::default();
    install.admin.block_on(api.patch("web-canary", &params, &kube::api::Patch::Merge(&unset))).unwrap();
    assert!(
        eventually(PATIENCE, || install.events("CanaryStarted", "web-canary").len() == 2),
        "deleting the state did not start over: {:?}",
        canary_state(&install)
    );
    ramjet.assert_running();
}

/// A rollback pin pauses promotion entirely: no step and no write while it holds (one CanaryPaused
/// Event); after the release it goes on.
#[test]
fn a_pin_pauses_promotion() {
    let plane = ControlPlane::shared();
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("pause");
    let settings =
        [("step-weight", "10"), ("max-weight", "90"), ("interval", "1s"), ("min-requests", "1"), ("max-p99", "5s")];
    auto_canary(&install, &web, &v2, &settings);
    let mut ramjet = install.ramjet("pause");
    ramjet.wait_ready();
    let _traffic = Traffic::start(ramjet.http);
    assert!(eventually(PATIENCE, || state_weight(&install) >= Some(20)), "never stepped; log:\n{}", ramjet.log());
    let serving = ramjet.generations()["serving"].as_u64().unwrap();
    let (status, body) =
        http_request(ramjet.admin, "POST", "/admin/rollback", &format!("{{\"generation\": {serving}}}")).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(eventually(PATIENCE, || install.events("CanaryPaused", "web-canary").len() == 1));
    let held = canary_state(&install);
    let since = audit_len(plane);
    // Several intervals with traffic flowing: nothing moves, nothing is written.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(canary_state(&install), held, "the state moved under a pin");
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w == "patch ingresses").collect();
    assert!(writes.is_empty(), "ramjet wrote the canary while pinned: {writes:?}");
    assert_eq!(install.events("CanaryPaused", "web-canary").len(), 1);
    let (status, body) = http_request(ramjet.admin, "DELETE", "/admin/rollback", "").unwrap();
    assert_eq!(status, 200, "{body}");
    let before = held.as_ref().and_then(|s| s["weight"].as_u64());
    assert!(eventually(PATIENCE, || state_weight(&install) > before), "never went on after the release");
}

/// Another writer that keeps changing ramjet's annotation (a GitOps tool re-applying an old copy):
/// ramjet puts it right twice, then stops promoting that canary with a Warning Event, and writes
/// it no more.
#[test]
fn a_reverting_writer_makes_ramjet_stop() {
    let plane = ControlPlane::shared();
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("revert");
    let settings = [("step-weight", "20"), ("interval", "1h")];
    auto_canary(&install, &web, &v2, &settings);
    let mut ramjet = install.ramjet("revert");
    ramjet.wait_ready();
    assert!(eventually(PATIENCE, || state_weight(&install) == Some(20)), "never started; log:\n{}", ramjet.log());
    let old = format!(
        r#"{{"phase":"Progressing","weight":5,"step":1,"failures":0,"last":"started","at":"2026-01-01T00:00:00Z","backend":"{}/web-v2:80"}}"#,
        install.ns
    );
    let foreign = auto_canary_yaml(&install, &settings, &[("ramjet.dev/canary-state", &old)]);
    let mut changes = 0;
    while install.events("CanaryHalted", "web-canary").is_empty() {
        assert!(changes < 3, "still not halted after {changes} changes; log:\n{}", ramjet.log());
        install.admin.try_apply_as(&foreign, "gitops").unwrap();
        changes += 1;
        // ramjet puts its value back, or halts.
        assert!(eventually(PATIENCE, || state_weight(&install) == Some(20)
            || !install.events("CanaryHalted", "web-canary").is_empty()));
    }
    assert_eq!(changes, 3);
    let halted = install.events("CanaryHalted", "web-canary");
    assert_eq!(halted[0]["type"], "Warning");
    assert!(halted[0]["note"].as_str().unwrap().contains("changed 3 times by another writer"), "{halted:#?}");
    // It never fights again: the other writer's value stays, unwritten by ramjet.
    let since = audit_len(plane);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(state_weight(&install), Some(5));
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w == "patch ingresses").collect();
    assert!(writes.is_empty(), "{writes:?}");
    ramjet.assert_running();
}

/// Two replicas: only the Lease holder decides (one CanaryStarted, from it), and the follower
/// serves the weight it wrote, read back through its own watch.
#[test]
fn two_replicas_serve_the_weight_the_leader_wrote() {
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("weights");
    auto_canary(&install, &web, &v2, &[("step-weight", "100"), ("max-weight", "100"), ("interval", "1h")]);
    let mut one = install.ramjet("one");
    one.wait_ready();
    assert!(eventually(PATIENCE, || install.lease_holder().as_deref() == Some("one")));
    let mut two = install.ramjet("two");
    two.wait_ready();
    assert!(eventually(PATIENCE, || state_weight(&install) == Some(100)), "log:\n{}", one.log());
    // Weight 100 of 100: every request by weight goes to the canary on both.
    one.wait_served("shop.test", "web-v2");
    two.wait_served("shop.test", "web-v2");
    let started = install.events("CanaryStarted", "web-canary");
    assert_eq!(started.len(), 1, "{started:#?}");
    assert_eq!(started[0]["reportingInstance"], "one");
}

/// The leader judges a canary on the whole fleet's traffic (`--peers`, as the chart passes its
/// fleet Service): with every request going to the other replica, the leader still sees a healthy
/// canary and promotes it, and its Events count two replicas — the leader's own answer among the
/// peers' is recognised and not counted twice. Without the peers' figures the leader would see no
/// request at all and abort the canary.
#[test]
fn the_leader_promotes_a_canary_on_the_traffic_of_the_other_replicas() {
    let (web, v2) = (Backend::start("web"), Backend::start("web-v2"));
    let install = Install::new("peers");
    let settings = [
        ("step-weight", "50"),
        ("max-weight", "100"),
        ("interval", "2s"),
        ("min-requests", "5"),
        ("max-p99", "5s"),
        ("failure-threshold", "2"),
    ];
    auto_canary(&install, &web, &v2, &settings);
    let free_admin = || -> SocketAddr { format!("127.0.0.1:{}", free_port()).parse().unwrap() };
    let (one_admin, two_admin) = (free_admin(), free_admin());
    // Both replicas' admin listeners, the leader's own included, as a headless Service resolves.
    let peers = format!("--peers=localhost:{},localhost:{}", one_admin.port(), two_admin.port());
    let mut one = install.ramjet_at("one", &install.kubeconfig, &[&peers], one_admin);
    one.wait_ready();
    assert!(eventually(PATIENCE, || install.lease_holder().as_deref() == Some("one")));
    let mut two = install.ramjet_at("two", &install.kubeconfig, &[&peers], two_admin);
    two.wait_ready();
    let _traffic = Traffic::start(two.http);
    let promoted = eventually(PATIENCE, || phase(&install) == "Promoted" || phase(&install) == "Aborted");
    assert!(promoted && phase(&install) == "Promoted", "{:?}; log:\n{}", canary_state(&install), one.log());
    let stepped = install.events("CanaryStepped", "web-canary");
    assert!(!stepped.is_empty(), "{stepped:#?}");
    for event in &stepped {
        assert_eq!(event["reportingInstance"], "one", "{event:#}");
        let note = event["note"].as_str().unwrap();
        assert!(note.contains("(over 2 replicas)"), "{note}");
    }
    two.wait_served("shop.test", "web-v2");
    one.assert_running();
    two.assert_running();
}

// ---------------------------------------------------------------------------------------------
// 9. Gateway API: the standard-channel CRDs from the Go module sigs.k8s.io/gateway-api.
// ---------------------------------------------------------------------------------------------

/// The Gateway API release whose standard-channel CRDs the tests install.
const GATEWAY_API: &str = "sigs.k8s.io/gateway-api@v1.4.0";

/// The module's directory in the Go module cache (`go mod download`, through the module proxy).
fn gateway_api_module() -> PathBuf {
    let out = Command::new("go")
        .args(["mod", "download", "-json", GATEWAY_API])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run go mod download");
    assert!(out.status.success(), "go mod download {GATEWAY_API}: {}", String::from_utf8_lossy(&out.stderr));
    let info: Value = serde_json::from_slice(&out.stdout).expect("go mod download -json");
    PathBuf::from(info["Dir"].as_str().expect("Dir"))
}

/// Installs the standard-channel CRDs (once per control plane; applying again changes nothing) and
/// waits until the API server serves them.
fn install_gateway_crds(admin: &Kube) {
    let dir = gateway_api_module().join("config/crd/standard");
    for kind in ["gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"] {
        let yaml = std::fs::read_to_string(dir.join(format!("gateway.networking.k8s.io_{kind}.yaml"))).unwrap();
        admin.try_apply_as(&yaml, "test").unwrap_or_else(|e| panic!("installing the {kind} CRD: {e}"));
    }
    for kind in ["GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant"] {
        assert!(eventually(PATIENCE, || admin.try_list(kind, None).is_ok()), "the {kind} CRD is never served");
    }
}

/// The conditions of a status (`conditions` list) as (type, status, reason).
fn conditions_of(status: &Value) -> BTreeSet<(String, String, String)> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let field = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (field("type"), field("status"), field("reason"))
        })
        .collect()
}

fn has(status: &Value, type_: &str, value: &str, reason: &str) -> bool {
    conditions_of(status).contains(&(type_.into(), value.into(), reason.into()))
}

/// The chart installed with its GatewayClass (as `helm install` creates it) and the standard
/// CRDs on the shared control plane: the admin's client, the install, the controller name.
fn gateway_install(name: &str) -> (Kube, Install, String) {
    let admin = Kube::new(&ControlPlane::shared().admin_kubeconfig);
    install_gateway_crds(&admin);
    let controller = format!("ramjet.dev/{name}-gateway");
    let values = json!({
        "ingressClass": { "name": name, "controllerValue": format!("ramjet.dev/{name}") },
        "gatewayAPI": { "controllerName": controller, "gatewayClass": { "create": true, "name": name } },
    });
    let mut docs = render(name, &format!("t-{name}"), &values);
    let class = docs.iter().find(|d| d["kind"] == "GatewayClass").expect("the chart renders the GatewayClass").clone();
    admin.apply_value(&class, "helm").unwrap();
    docs.retain(|d| d["kind"] != "GatewayClass");
    (admin, Install::apply(name, docs), controller)
}

#[test]
fn gateway_api_routes_serve_and_their_status_is_written_once_by_the_leader() {
    let name = "gw";
    let (admin, install, controller) = gateway_install(name);
    let ns = install.ns.clone();
    let (stable, beta, shadow) = (Backend::start("stable"), Backend::start("beta"), Backend::start("shadow"));
    install.service("stable", &[&stable]);
    install.service("beta", &[&beta]);
    install.service("shadow", &[&shadow]);
    admin.apply(&format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{ name: edge, namespace: {ns} }}
spec:
  gatewayClassName: {name}
  listeners:
    - {{ name: http, port: 80, protocol: HTTP, hostname: "*.gw.test" }}
    - {{ name: tcp, port: 9000, protocol: TCP }}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: store, namespace: {ns} }}
spec:
  parentRefs: [{{ name: edge, sectionName: http }}, {{ name: elsewhere }}]
  hostnames: [shop.gw.test]
  rules:
    - matches: [{{ path: {{ type: PathPrefix, value: /cart }}, headers: [{{ name: x-beta, value: "yes" }}] }}]
      backendRefs: [{{ name: beta, port: 80 }}]
    - matches: [{{ path: {{ type: PathPrefix, value: / }} }}]
      backendRefs: [{{ name: stable, port: 80, weight: 9 }}, {{ name: beta, port: 80, weight: 1 }}]
      filters:
        - type: RequestMirror
          requestMirror: {{ backendRef: {{ name: shadow, port: 80 }} }}
    - matches: [{{ path: {{ type: PathPrefix, value: /old }} }}]
      filters:
        - type: RequestRedirect
          requestRedirect: {{ statusCode: 301, path: {{ type: ReplacePrefixMatch, replacePrefixMatch: /new }} }}
    - matches: [{{ path: {{ type: PathPrefix, value: /api }} }}]
      filters:
        - type: URLRewrite
          urlRewrite: {{ path: {{ type: ReplacePrefixMatch, replacePrefixMatch: /v2 }} }}
      backendRefs: [{{ name: stable, port: 80 }}]
"#
    ));
    // Another controller's entry for another Gateway, already in the route's status: ramjet must
    // leave it as it is (status.parents is an atomic list).
    let theirs = json!({
        "parentRef": { "group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "elsewhere" },
        "controllerName": "example.com/other",
        "conditions": [{ "type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                         "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z" }],
    });
    admin.apply_status("HTTPRoute", &ns, "store", "other-controller", json!({ "parents": [theirs] })).unwrap();

    let mut ramjet = install.ramjet_with("gw-0", &install.kubeconfig.clone(), &[]);
    ramjet.wait_ready();
    let mut second = install.ramjet_with("gw-1", &install.kubeconfig.clone(), &[]);
    second.wait_ready();
    // Traffic: the header match, the split, the redirect and the rewrite.
    let ask = |raw: &str| {
        let mut conn = support::client::Conn::open(ramjet.http);
        conn.send(raw.as_bytes());
        conn.read_response()
    };
    assert!(
        eventually(PATIENCE, || ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\nX-Beta: yes\r\n\r\n").status == 200),
        "never served; log:\n{}",
        ramjet.log()
    );
    for _ in 0..20 {
        assert_eq!(served_by(&ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\nX-Beta: yes\r\n\r\n")), "beta");
    }
    let to_beta =
        (0..1_000).filter(|_| served_by(&ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n")) == "beta").count();
    // n = 1,000, p = 0.1: mean 100, σ ≈ 9.5. The bounds are the exact binomial quantiles with at
    // most 5·10⁻⁷ of the distribution below 57 and above 149 (it is skewed: ±kσ is not), so a fair
    // split fails here about once in 1.2 million runs, as the other split tests do.
    assert!((57..=149).contains(&to_beta), "{to_beta} of 1,000 at weight 1 of 10");
    assert!(eventually(PATIENCE, || shadow.requests() >= 1_000), "the mirror got {}", shadow.requests());
    let moved = ask("GET /old/page HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n");
    assert_eq!((moved.status, moved.header("location")), (301, Some("http://shop.gw.test/new/page")));
    assert_eq!(ask("GET /api/items HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n").status, 200);
    assert!(
        stable.request_lines().contains(&"GET /v2/items HTTP/1.1".to_string()),
        "the rewrite never reached the backend"
    );

    // Status, on the real API server.
    let route_status = || admin.get("HTTPRoute", Some(&ns), "store").unwrap();
    let ours = |route: &Value| -> Option<Value> {
        route["status"]["parents"].as_array()?.iter().find(|p| p["controllerName"] == controller.as_str()).cloned()
    };
    assert!(
        eventually(PATIENCE, || ours(&route_status()).is_some_and(
            |p| has(&p, "Accepted", "True", "Accepted") && has(&p, "ResolvedRefs", "True", "ResolvedRefs")
        )),
        "route status: {:#}\nlog:\n{}",
        route_status()["status"],
        ramjet.log()
    );
    let route = route_status();
    let parents = route["status"]["parents"].as_array().unwrap();
    assert_eq!(parents.len(), 2, "ours and theirs: {parents:#?}");
    assert!(parents.iter().any(|p| p == &theirs), "the other controller's entry is kept as it was: {parents:#?}");
    let mine = ours(&route).unwrap();
    assert_eq!(mine["parentRef"]["name"], "edge");
    assert_eq!(mine["parentRef"]["sectionName"], "http");
    assert!(mine["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["observedGeneration"] == route["metadata"]["generation"]));
    let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
    let status = &gateway["status"];
    assert!(has(status, "Accepted", "True", "ListenersNotValid"), "{status:#}");
    assert!(has(status, "Programmed", "True", "Programmed"), "{status:#}");
    assert_eq!(status["addresses"], json!([{ "type": "IPAddress", "value": LB_IP }]));
    let listener = |n: &str| status["listeners"].as_array().unwrap().iter().find(|l| l["name"] == n).unwrap().clone();
    assert!(has(&listener("http"), "Programmed", "True", "Programmed"));
    assert_eq!(listener("http")["attachedRoutes"], 1);
    assert!(has(&listener("tcp"), "Accepted", "False", "UnsupportedProtocol"), "{:#}", listener("tcp"));
    let class_status = admin.get("GatewayClass", None, name).unwrap();
    assert!(has(&class_status["status"], "Accepted", "True", "Accepted"), "{:#}", class_status["status"]);

    // A fixed point: with two replicas running, nothing more is written.
    let versions = || {
        let route = admin.get("HTTPRoute", Some(&ns), "store").unwrap();
        let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
        (route["metadata"]["resourceVersion"].clone(), gateway["metadata"]["resourceVersion"].clone())
    };
    let before = versions();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(versions(), before, "status was rewritten with nothing changed");
    let writers: BTreeSet<String> = ControlPlane::shared()
        .audit_entries()
        .iter()
        .filter(|e| e["objectRef"]["resource"] == "httproutes" && e["objectRef"]["subresource"] == "status")
        .filter(|e| e["objectRef"]["namespace"] == ns.as_str() && e["verb"] == "update")
        .filter_map(|e| e["user"]["username"].as_str().map(String::from))
        .collect();
    assert_eq!(writers, [install.user()].into(), "only ramjet's ServiceAccount updates the route's status");

    // A new generation of the route: observedGeneration follows.
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{ name: store, namespace: {ns} }}\n\
         spec:\n  parentRefs: [{{ name: edge, sectionName: http }}]\n  hostnames: [shop.gw.test]\n  \
         rules: [{{ backendRefs: [{{ name: nowhere, port: 80 }}] }}]\n"
    ));
    assert!(
        eventually(PATIENCE, || {
            let route = route_status();
            ours(&route).is_some_and(|p| {
                has(&p, "ResolvedRefs", "False", "BackendNotFound")
                    && p["conditions"][0]["observedGeneration"] == route["metadata"]["generation"]
            })
        }),
        "route status after the change: {:#}",
        route_status()["status"]
    );
    // The status may be the other replica's (the leader's): this one serves the change on its own watch.
    assert!(
        eventually(PATIENCE, || ask("GET /cart HTTP/1.1\r\nHost: shop.gw.test\r\n\r\n").status == 500),
        "the route without backends never answered 500"
    );

    // A GRPCRoute on the same listener: its status too, with the spec's reasons.
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {{ name: rpc, namespace: {ns} }}\n\
         spec:\n  parentRefs: [{{ name: edge, sectionName: http }}]\n  hostnames: [rpc.gw.test]\n  \
         rules: [{{ matches: [{{ method: {{ service: demo.Echo }} }}], backendRefs: [{{ name: stable, port: 80 }}] }}]\n"
    ));
    let grpc_status = || admin.get("GRPCRoute", Some(&ns), "rpc").unwrap();
    assert!(
        eventually(PATIENCE, || ours(&grpc_status()).is_some_and(|p| has(&p, "Accepted", "True", "Accepted")
            && has(&p, "ResolvedRefs", "True", "ResolvedRefs")
            && p["conditions"][0]["observedGeneration"] == grpc_status()["metadata"]["generation"])),
        "GRPCRoute status: {:#}\nlog:\n{}",
        grpc_status()["status"],
        ramjet.log()
    );
    drop(second);
    admin.delete("GatewayClass", None, name);
}

/// How long after the CRDs are served an HTTPRoute may take to reach traffic when ramjet started
/// without them: its re-check of discovery comes every 10 s (`control/src/cluster/watch/gateway.rs`),
/// and 30 s more covers the first lists, the compile and the publish on a loaded 2-core machine.
const PICK_UP: Duration = Duration::from_secs(40);

#[test]
fn gateway_api_crds_installed_after_start_are_picked_up_without_a_restart() {
    // An API server of its own: the shared one may already serve the CRDs (other tests install them).
    let plane = ControlPlane::start("gw-late");
    let name = "gw-late";
    let controller = format!("ramjet.dev/{name}-gateway");
    let values = json!({
        "ingressClass": { "name": name, "controllerValue": format!("ramjet.dev/{name}") },
        "gatewayAPI": { "controllerName": controller },
    });
    let install = Install::apply_on(&plane, name, render(name, &format!("t-{name}"), &values));
    let (ns, admin) = (install.ns.clone(), &install.admin);
    let web = Backend::start("web");
    install.service("web", &[&web]);
    install.ingress("web", "web.gw-late.test", "web");

    // No Gateway API at start: one warning, and Ingresses are served as usual.
    let mut ramjet = install.ramjet("gw-late-0");
    ramjet.wait_ready();
    ramjet.wait_served("web.gw-late.test", "web");
    let log = ramjet.full_log();
    assert!(log.contains("gateway.networking.k8s.io/v1) is not served"), "no warning at start:\n{log}");
    assert!(!log.contains("until ramjet restarts"), "the warning still asks for a restart:\n{log}");
    assert!(!log.contains("Gateway API CRDs found"), "picked up with no CRDs:\n{log}");
    // Past the first re-check (2 s after start): the pick-up comes from the periodic one.
    std::thread::sleep(Duration::from_secs(3));

    let installed_since = Instant::now();
    install_gateway_crds(admin);
    let served_since = Instant::now();
    let crds_served = installed_since.elapsed();
    admin.apply(&format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{ name: {name} }}
spec: {{ controllerName: {controller} }}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{ name: edge, namespace: {ns} }}
spec:
  gatewayClassName: {name}
  listeners: [{{ name: http, port: 80, protocol: HTTP, hostname: "*.gw-late.test" }}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{ name: store, namespace: {ns} }}
spec:
  parentRefs: [{{ name: edge, sectionName: http }}]
  hostnames: [shop.gw-late.test]
  rules: [{{ backendRefs: [{{ name: web, port: 80 }}] }}]
"#
    ));
    // Served through ramjet's real HTTP port, with no restart.
    assert!(
        eventually(PICK_UP, || ramjet.served("shop.gw-late.test") == "web"),
        "the HTTPRoute was not served within {PICK_UP:?} of the CRDs being served (now: {}); log:\n{}",
        ramjet.served("shop.gw-late.test"),
        ramjet.log()
    );
    let picked_up = (served_since.elapsed(), installed_since.elapsed());
    ramjet.assert_running();

    // And its status is written, by the status writer that had nothing to watch at start.
    let ours = || -> Option<Value> {
        let route = admin.get("HTTPRoute", Some(&ns), "store")?;
        route["status"]["parents"].as_array()?.iter().find(|p| p["controllerName"] == controller.as_str()).cloned()
    };
    assert!(
        eventually(PATIENCE, || ours().is_some_and(
            |p| has(&p, "Accepted", "True", "Accepted") && has(&p, "ResolvedRefs", "True", "ResolvedRefs")
        )),
        "route status: {:?}\nlog:\n{}",
        ours(),
        ramjet.log()
    );
    let status_written = served_since.elapsed();
    let gateway = admin.get("Gateway", Some(&ns), "edge").unwrap();
    assert!(has(&gateway["status"], "Programmed", "True", "Programmed"), "{:#}", gateway["status"]);
    let class = admin.get("GatewayClass", None, name).unwrap();
    assert!(has(&class["status"], "Accepted", "True", "Accepted"), "{:#}", class["status"]);

    let found = ramjet.full_log().matches("Gateway API CRDs found: watching Gateways and HTTPRoutes").count();
    assert_eq!(found, 1, "the pick-up is logged once; log:\n{}", ramjet.log());
    assert_eq!(ramjet.served("web.gw-late.test"), "web", "the Ingress is still served");
    eprintln!(
        "Gateway API CRDs installed after start: served by the API server {crds_served:.1?} after they were \
         applied; the HTTPRoute served {:.1?} after that ({:.1?} after the CRDs were applied), its status \
         written {status_written:.1?} after",
        picked_up.0, picked_up.1
    );
}

/// Two auto-promoting HTTPRoutes on one Gateway, through the real API server with the chart's
/// RBAC: `shop` (its canary `beta` healthy) steps 25 → 50 → 75 and is promoted, every request then
/// going to `beta`; `cart` (its canary answering 500) fails its checks and is aborted, every
/// request going back to the primary. The state is `ramjet.dev/canary-state` on each HTTPRoute,
/// written by server-side apply (ramjet owns that annotation alone, the user's re-apply leaves it),
/// and read back by the compile that serves the weight. The decisions are Events regarding the
/// HTTPRoutes and audit records, and the route's status says where promotion stands. Once both
/// are done, nothing more is written.
#[test]
fn gateway_api_httproute_canaries_promote_or_abort_themselves() {
    let name = "gw-canary";
    let plane = ControlPlane::shared();
    let (admin, install, controller) = gateway_install(name);
    let ns = install.ns.clone();
    let (stable, beta, broken) = (Backend::start("stable"), Backend::start("beta"), Backend::answering("broken", 500));
    install.service("stable", &[&stable]);
    install.service("beta", &[&beta]);
    install.service("broken", &[&broken]);
    let route_yaml = |route: &str, canary: &str, settings: &[(&str, &str)]| {
        let mut annotations = vec!["team: shop".to_string(), "ramjet.dev/canary-auto-promote: \"true\"".to_string()];
        annotations.extend(settings.iter().map(|(k, v)| format!("ramjet.dev/canary-{k}: \"{v}\"")));
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: {route}\n  namespace: {ns}\n  \
             annotations: {{ {} }}\nspec:\n  parentRefs: [{{ name: edge, sectionName: http }}]\n  \
             hostnames: [{route}.{name}.test]\n  rules:\n    - backendRefs: [{{ name: stable, port: 80, weight: 100 }}, \
             {{ name: {canary}, port: 80, weight: 0 }}]\n",
            annotations.join(", ")
        )
    };
    let shop_settings =
        [("step-weight", "25"), ("max-weight", "75"), ("interval", "2s"), ("min-requests", "5"), ("max-p99", "5s")];
    let shop = route_yaml("shop", "beta", &shop_settings);
    let cart_settings = [("step-weight", "50"), ("interval", "1s"), ("min-requests", "3"), ("failure-threshold", "2")];
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: {ns} }}\n\
         spec:\n  gatewayClassName: {name}\n  listeners: [{{ name: http, port: 80, protocol: HTTP, hostname: \
         \"*.{name}.test\" }}]\n---\n{shop}---\n{}",
        route_yaml("cart", "broken", &cart_settings)
    ));
    let webhook = Webhook::start();
    let extra = [format!("--audit-webhook={}", webhook.url), "--access-log-errors-only".to_string()];
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let mut ramjet = install.ramjet_with(name, &install.kubeconfig, &extra);
    ramjet.wait_ready();
    let (shop_host, cart_host) = (format!("shop.{name}.test"), format!("cart.{name}.test"));
    ramjet.wait_served(&shop_host, "stable");

    // Requests to both hosts until dropped, one connection each; what answered, by host.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let traffic = {
        let (stop, seen, addr) = (stop.clone(), seen.clone(), ramjet.http);
        let hosts = [shop_host.clone(), cart_host.clone()];
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for host in &hosts {
                    let answer = match http(addr, host, "/") {
                        Some((status, body)) => format!("{status} {}", body.trim()),
                        None => "down".to_string(),
                    };
                    seen.lock().unwrap().push((host.clone(), answer));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    // Waits until the last 20 answers for `host` since the call are all `want`.
    let all_answers = |host: &str, want: &str| {
        seen.lock().unwrap().clear();
        let mut last = Vec::new();
        let ok = eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(300));
            last = seen.lock().unwrap().drain(..).filter(|(h, _)| h == host).map(|(_, a)| a).collect();
            last.len() >= 20 && last.iter().all(|a| a == want)
        });
        assert!(ok, "{host}: never all `{want}`; the last answers: {last:?}");
    };
    let state = |route: &str| -> Option<Value> {
        let object = admin.get("HTTPRoute", Some(&ns), route)?;
        serde_json::from_str(object["metadata"]["annotations"]["ramjet.dev/canary-state"].as_str()?).ok()
    };

    // shop: from the start weight to promoted, one step per window.
    let mut weights = Vec::new();
    let mut reapplied = false;
    let promoted = eventually(PATIENCE, || {
        std::thread::sleep(Duration::from_millis(100));
        let now = state("shop");
        let w = now.as_ref().and_then(|s| s["weight"].as_u64());
        if w.is_some() && weights.last() != Some(&w) {
            weights.push(w);
        }
        if w.is_some() && !reapplied {
            // The user re-applies their route (their field manager, without ramjet's annotation).
            admin.apply(&shop);
            reapplied = true;
        }
        now.is_some_and(|s| s["phase"] == "Promoted")
    });
    assert!(promoted, "shop never promoted: {weights:?} {:?}; log:\n{}", state("shop"), ramjet.log());
    assert_eq!(weights, [Some(25), Some(50), Some(75), Some(100)], "the weights written, in order");
    all_answers(&shop_host, "200 backend=beta");
    let route = admin.get("HTTPRoute", Some(&ns), "shop").unwrap();
    assert_eq!(route["metadata"]["annotations"]["team"], "shop", "{route:#}");
    assert_eq!(route["spec"]["rules"][0]["backendRefs"][1]["weight"], 0, "the user's weights are theirs: {route:#}");
    let owned: Vec<&str> = route["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["manager"] == "ramjet" && m["subresource"].is_null())
        .flat_map(|m| m["fieldsV1"]["f:metadata"]["f:annotations"].as_object().unwrap().keys())
        .map(String::as_str)
        .collect();
    assert_eq!(owned, ["f:ramjet.dev/canary-state"], "ramjet owns exactly its annotation: {route:#}");
    assert_eq!(install.events("CanaryStarted", "shop").len(), 1, "{:#?}", install.events("CanaryStarted", "shop"));
    let stepped = install.events("CanaryStepped", "shop");
    assert_eq!(stepped.len(), 2, "{stepped:#?}");
    assert_eq!(stepped[0]["regarding"]["kind"], "HTTPRoute");
    assert_eq!(stepped[0]["regarding"]["apiVersion"], "gateway.networking.k8s.io/v1");
    assert!(stepped[0]["note"].as_str().unwrap().contains("requests, success rate 100.00%, p99"), "{stepped:#?}");
    let promoted = install.events("CanaryPromoted", "shop");
    assert_eq!(promoted.len(), 1, "{promoted:#?}");
    assert!(promoted[0]["note"].as_str().unwrap().contains("Make the canary the only backendRef"), "{promoted:#?}");

    // cart: its canary fails the checks and is aborted to weight 0.
    assert!(
        eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(100));
            state("cart").is_some_and(|s| s["phase"] == "Aborted")
        }),
        "cart never aborted: {:?}; log:\n{}",
        state("cart"),
        ramjet.log()
    );
    assert_eq!(state("cart").unwrap()["weight"], 0);
    assert_eq!(state("cart").unwrap()["backend"], format!("{ns}/broken:80"));
    let failed = install.events("CanaryCheckFailed", "cart");
    assert_eq!((failed.len(), &failed[0]["type"]), (1, &json!("Warning")), "{failed:#?}");
    assert!(failed[0]["note"].as_str().unwrap().contains("success rate 0.00% is below 99%"), "{failed:#?}");
    let aborted = install.events("CanaryAborted", "cart");
    assert_eq!(aborted.len(), 1, "{aborted:#?}");
    assert!(aborted[0]["note"].as_str().unwrap().contains("aborted to weight 0 after 2 failed checks"));
    all_answers(&cart_host, "200 backend=stable");

    // Status says where each stands.
    let condition = |route: &str| -> Option<(String, String)> {
        let object = admin.get("HTTPRoute", Some(&ns), route)?;
        let parents = object["status"]["parents"].as_array()?.clone();
        let ours = parents.iter().find(|p| p["controllerName"] == controller.as_str())?;
        let c = ours["conditions"].as_array()?.iter().find(|c| c["type"] == "ramjet.dev/CanaryAutoPromote")?.clone();
        Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string()))
    };
    let want = |status: &str, reason: &str| Some((status.to_string(), reason.to_string()));
    assert!(
        eventually(PATIENCE, || {
            std::thread::sleep(Duration::from_millis(100));
            condition("shop") == want("True", "Promoted") && condition("cart") == want("True", "Aborted")
        }),
        "status: {:?} {:?}",
        condition("shop"),
        condition("cart")
    );

    // The same decisions went down the audit webhook, naming each route.
    let records: Vec<(String, String)> = webhook
        .bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|b| b["event"] == "canary")
        .map(|b| (b["ingress"].as_str().unwrap().to_string(), b["reason"].as_str().unwrap().to_string()))
        .collect();
    for (route, reason) in [
        ("shop", "CanaryStarted"),
        ("shop", "CanaryStepped"),
        ("shop", "CanaryPromoted"),
        ("cart", "CanaryCheckFailed"),
        ("cart", "CanaryAborted"),
    ] {
        assert!(records.contains(&(format!("{ns}/{route}"), reason.to_string())), "{route} {reason}: {records:?}");
    }

    // Done: with traffic still flowing, ramjet writes the routes no more.
    let since = audit_len(plane);
    std::thread::sleep(Duration::from_secs(3));
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w.contains("httproutes")).collect();
    assert!(writes.is_empty(), "{writes:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    traffic.join().unwrap();
    ramjet.assert_running();
    admin.delete("GatewayClass", None, name);
}

// ---------------------------------------------------------------------------------------------
// 10. TLS to backends, as ingress-nginx's annotations ask.
// ---------------------------------------------------------------------------------------------

/// `ramjet_upstream_errors_total{kind="tls"}` on the admin listener's /metrics.
fn tls_upstream_errors(ramjet: &Ramjet) -> u64 {
    let (_, text) = http(ramjet.admin, "localhost", "/metrics").expect("admin listener");
    text.lines()
        .find_map(|l| l.strip_prefix("ramjet_upstream_errors_total{kind=\"tls\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no TLS upstream error count in /metrics:\n{text}")) as u64
}

/// An Ingress with ingress-nginx's `backend-protocol: HTTPS` and `proxy-ssl-secret` /
/// `proxy-ssl-verify` / `proxy-ssl-name`, its `kubernetes.io/tls` Secret written through the real
/// API server: the backend's certificate is verified against the Secret's `ca.crt` under the
/// configured name, and the Secret's certificate is presented to the backend (which asks for one).
/// With another CA in the Secret that route answers 502 (a failed handshake) while a plain Ingress
/// beside it keeps serving; with the CA restored it answers 200 again.
#[test]
fn ingress_nginx_backend_tls_annotations_verify_the_backend_through_the_real_api_server() {
    ramjet::install_crypto();
    let pki = Pki::new("cluster-backend-tls");
    pki.leaf("backend", &["orders.internal"]);
    pki.leaf("client", &["ramjet.client"]);
    let other = Pki::new("cluster-backend-tls-other");
    // In the backends' network namespace, wanting a client certificate from the same CA.
    let orders = TlsBackend::serve("orders", bind_backend(), &pki, "backend", Some(pki.ca.clone()));
    let plain = Backend::start("plain");
    let install = Install::new("backend-tls");
    let ns = install.ns.clone();
    let read = |p: &Pki, f: &str| base64(&std::fs::read(p.path(f)).unwrap());
    // tls.crt / tls.key: ramjet's client certificate; ca.crt: the CA the backend's must chain to.
    let secret = |ca: &Pki| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{ name: orders-upstream, namespace: {ns} }}\n\
             type: kubernetes.io/tls\ndata: {{ tls.crt: {}, tls.key: {}, ca.crt: {} }}\n",
            read(&pki, "client.crt"),
            read(&pki, "client.key"),
            read(ca, "ca.pem")
        )
    };
    install.admin.apply(&secret(&pki));
    install.admin.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{ name: orders, namespace: {ns} }}\n\
         spec: {{ ports: [{{ name: https, port: 443, targetPort: 8443 }}] }}\n---\n\
         apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {{ name: orders-1, namespace: {ns}, labels: {{ kubernetes.io/service-name: orders }} }}\n\
         addressType: IPv4\nports: [{{ name: https, port: {port}, protocol: TCP }}]\n\
         endpoints: [{{ addresses: [\"{ip}\"], conditions: {{ ready: true }} }}]\n---\n\
         apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: orders\n  namespace: {ns}\n  \
         annotations:\n    nginx.ingress.kubernetes.io/backend-protocol: HTTPS\n    \
         nginx.ingress.kubernetes.io/proxy-ssl-secret: {ns}/orders-upstream\n    \
         nginx.ingress.kubernetes.io/proxy-ssl-verify: \"on\"\n    \
         nginx.ingress.kubernetes.io/proxy-ssl-name: orders.internal\n\
         spec:\n  ingressClassName: {class}\n  rules: [{{ host: orders.test, http: {{ paths: [{{ path: /, \
         pathType: Prefix, backend: {{ service: {{ name: orders, port: {{ name: https }} }} }} }}] }} }}]\n",
        port = orders.addr.port(),
        ip = orders.addr.ip(),
        class = install.class,
    ));
    install.service("plain", &[&plain]);
    install.ingress("plain", "plain.test", "plain");
    let mut ramjet = install.ramjet("backend-tls");
    ramjet.wait_ready();
    let orders_answer = || {
        let r = get(ramjet.http, "orders.test", "/orders?id=7");
        (r.status, r.body)
    };
    // Verified, and without SNI (ingress-nginx's default, `proxy-ssl-server-name: off`).
    let verified = (200, "orders sni=- target=/orders?id=7\n".to_string());
    assert!(
        eventually(PATIENCE, || orders_answer() == verified),
        "the HTTPS backend never answered through ramjet (now: {:?}); log:\n{}",
        orders_answer(),
        ramjet.log()
    );
    ramjet.wait_served("plain.test", "plain");

    // Another CA in the Secret: the backend's certificate no longer verifies. The route answers
    // 502, counted as a TLS error; the plain Ingress beside it is untouched.
    let tls_errors = tls_upstream_errors(&ramjet);
    install.admin.apply(&secret(&other));
    assert!(
        eventually(PATIENCE, || orders_answer().0 == 502),
        "a backend certificate from a CA no longer in ca.crt is still accepted (now: {:?}); log:\n{}",
        orders_answer(),
        ramjet.log()
    );
    assert!(tls_upstream_errors(&ramjet) > tls_errors, "the 502 was not a failed TLS handshake");
    for _ in 0..5 {
        assert_eq!(orders_answer().0, 502, "a connection verified under the old CA is still used");
        assert_eq!(ramjet.served("plain.test"), "plain", "one bad backend took down another Ingress");
    }

    // The CA restored: verified again.
    install.admin.apply(&secret(&pki));
    assert!(
        eventually(PATIENCE, || orders_answer() == verified),
        "the restored CA never verified the backend again (now: {:?}); log:\n{}",
        orders_answer(),
        ramjet.log()
    );
    ramjet.wait_served("plain.test", "plain");
    ramjet.assert_running();
}

/// ingress-nginx's basic authentication against the real API server: the users come from an
/// Opaque Secret (as `kubectl create secret generic --from-file=auth` makes it), a change to the
/// Secret changes who gets in, and a deleted Secret denies the paths (503) while the Ingress beside
/// it is untouched. The hashes are openssl's (`openssl passwd -apr1`).
#[test]
fn basic_auth_reads_its_users_from_an_opaque_secret_through_the_real_api_server() {
    let web = Backend::start("web");
    let install = Install::new("basic-auth");
    let ns = install.ns.clone();
    install.service("web", &[&web]);
    install.ingress("plain", "plain.test", "web");
    let secret = |file: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{ name: basic-auth, namespace: {ns} }}\ntype: Opaque\n\
             data: {{ auth: {} }}\n",
            base64(file.as_bytes())
        )
    };
    // foo:bar
    install.admin.apply(&secret("foo:$apr1$Qw3rTy12$ToV8Fflyor2TzTiUbMX9G.\n"));
    install.admin.apply(&format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: private\n  namespace: {ns}\n  \
         annotations:\n    nginx.ingress.kubernetes.io/auth-type: basic\n    \
         nginx.ingress.kubernetes.io/auth-secret: basic-auth\n    \
         nginx.ingress.kubernetes.io/auth-realm: \"Authentication Required - foo\"\n\
         spec:\n  ingressClassName: {class}\n  rules: [{{ host: private.test, http: {{ paths: [{{ path: /, \
         pathType: Prefix, backend: {{ service: {{ name: web, port: {{ name: http }} }} }} }}] }} }}]\n",
        class = install.class,
    ));
    let mut ramjet = install.ramjet("basic-auth");
    ramjet.wait_ready();
    let http = ramjet.http;
    let as_user = |authorization: &str| {
        let r = request(
            http,
            &format!(
                "GET / HTTP/1.1\r\nHost: private.test\r\nauthorization: {authorization}\r\nconnection: close\r\n\r\n"
            ),
        );
        if r.status == 200 {
            served_by(&r)
        } else {
            r.status.to_string()
        }
    };
    const FOO_BAR: &str = "Basic Zm9vOmJhcg==";
    const FOO_NEW: &str = "Basic Zm9vOm5ldw==";
    assert!(
        eventually(PATIENCE, || as_user(FOO_BAR) == "web"),
        "foo never got in (now: {}); log:\n{}",
        as_user(FOO_BAR),
        ramjet.log()
    );
    let challenged = get(http, "private.test", "/");
    assert_eq!(challenged.status, 401);
    assert_eq!(challenged.header("www-authenticate"), Some("Basic realm=\"Authentication Required - foo\""));
    assert_eq!(as_user(FOO_NEW), "401");
    ramjet.wait_served("plain.test", "web");

    // A new password in the Secret: the old one no longer opens the door, the new one does.
    install.admin.apply(&secret("foo:$apr1$Nw8sAlt1$q5k8mBCyohmfHUDQR1y6m0\n"));
    assert!(
        eventually(PATIENCE, || as_user(FOO_NEW) == "web" && as_user(FOO_BAR) == "401"),
        "the changed Secret was not applied (new: {}, old: {}); log:\n{}",
        as_user(FOO_NEW),
        as_user(FOO_BAR),
        ramjet.log()
    );

    // The Secret deleted: nobody gets in (503, as ingress-nginx denies the location).
    install.admin.delete("Secret", Some(&ns), "basic-auth");
    assert!(
        eventually(PATIENCE, || as_user(FOO_NEW) == "503"),
        "a deleted Secret still lets users in (now: {}); log:\n{}",
        as_user(FOO_NEW),
        ramjet.log()
    );
    assert_eq!(ramjet.served("private.test"), "503");
    ramjet.wait_served("plain.test", "web");
    ramjet.assert_running();
}

/// A rollback pin pauses an HTTPRoute's promotion as it does an Ingress's: one CanaryPaused Event
/// about the route, no step and no write while it holds; after the release it goes on.
#[test]
fn gateway_api_a_pin_pauses_httproute_promotion() {
    let name = "gw-pause";
    let plane = ControlPlane::shared();
    let (admin, install, _) = gateway_install(name);
    let ns = install.ns.clone();
    let (stable, beta) = (Backend::start("stable"), Backend::start("beta"));
    install.service("stable", &[&stable]);
    install.service("beta", &[&beta]);
    let settings =
        [("step-weight", "10"), ("max-weight", "90"), ("interval", "1s"), ("min-requests", "1"), ("max-p99", "5s")];
    let annotations: Vec<String> = std::iter::once("ramjet.dev/canary-auto-promote: \"true\"".to_string())
        .chain(settings.iter().map(|(k, v)| format!("ramjet.dev/canary-{k}: \"{v}\"")))
        .collect();
    let host = format!("shop.{name}.test");
    admin.apply(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{ name: edge, namespace: {ns} }}\n\
         spec:\n  gatewayClassName: {name}\n  listeners: [{{ name: http, port: 80, protocol: HTTP }}]\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata:\n  name: shop\n  namespace: {ns}\n  \
         annotations: {{ {} }}\nspec:\n  parentRefs: [{{ name: edge }}]\n  hostnames: [{host}]\n  rules:\n    - \
         backendRefs: [{{ name: stable, port: 80, weight: 100 }}, {{ name: beta, port: 80, weight: 0 }}]\n",
        annotations.join(", ")
    ));
    let mut ramjet = install.ramjet(name);
    ramjet.wait_ready();
    ramjet.wait_served(&host, "stable");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = {
        let (stop, addr, host) = (stop.clone(), ramjet.http, host.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = http(addr, &host, "/");
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let state = || -> Option<Value> {
        let route = admin.get("HTTPRoute", Some(&ns), "shop")?;
        serde_json::from_str(route["metadata"]["annotations"]["ramjet.dev/canary-state"].as_str()?).ok()
    };
    let weight = || state().and_then(|s| s["weight"].as_u64());
    assert!(eventually(PATIENCE, || weight() >= Some(20)), "never stepped: {:?}; log:\n{}", state(), ramjet.log());
    let serving = ramjet.generations()["serving"].as_u64().unwrap();
    let (status, body) =
        http_request(ramjet.admin, "POST", "/admin/rollback", &format!("{{\"generation\": {serving}}}")).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        eventually(PATIENCE, || install.events("CanaryPaused", "shop").len() == 1),
        "no CanaryPaused about the route"
    );
    let held = state();
    let since = audit_len(plane);
    // Several intervals with traffic flowing: nothing moves, nothing is written.
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(state(), held, "the state moved under a pin");
    let writes: Vec<String> =
        writes_by(plane, &install.user(), since).into_iter().filter(|w| w.starts_with("patch httproutes")).collect();
    assert!(writes.is_empty(), "ramjet wrote the route while pinned: {writes:?}");
    assert_eq!(install.events("CanaryPaused", "shop").len(), 1);
    let (status, body) = http_request(ramjet.admin, "DELETE", "/admin/rollback", "").unwrap();
    assert_eq!(status, 200, "{body}");
    let before = held.as_ref().and_then(|s| s["weight"].as_u64());
    assert!(eventually(PATIENCE, || weight() > before), "never went on after the release");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    traffic.join().unwrap();
    ramjet.assert_running();
    admin.delete("GatewayClass", None, name);
}
