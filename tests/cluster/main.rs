//! The real `ramjet` binary against a real Kubernetes API server (kube-apiserver and etcd built
//! from `tests/k8s`, see `ramjet_test_support::control_plane`), installed the way `helm install` does:
//! the chart is rendered by Helm's own engine, its ServiceAccount, RBAC, IngressClass and Service
//! are applied, and ramjet runs with the chart's own arguments as that ServiceAccount (a token from
//! the TokenRequest API). Backends are real processes on 127.0.0.1 named by EndpointSlices.
//!
//! One control plane serves every test of this binary; each test installs its own release in its
//! own namespace with its own IngressClass and controller name, so tests never see each other.
//! `RAMJET_KEEP_CONTROL_PLANE=1` keeps the control plane's directory (logs, audit log) after the run.
//!
//! This file is the harness every module shares (an [`Install`] of the chart, the [`Ramjet`] binary,
//! backends in the test network namespace, the audit log); each module is one subject, and all of
//! them are one test binary, so they share the one control plane.

mod admission;
mod canary;
mod faults;
mod gateway;
mod ingress;
mod ingress_nginx;
mod rbac;
mod replicas;
mod rollout;
mod scale;
mod status;

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
    /// The admin token of the Secret the chart makes, which the kubelet would mount.
    admin_token: Option<String>,
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
        let admin_token = docs
            .iter()
            .find(|d| {
                d["kind"] == "Secret" && d["metadata"]["name"].as_str().is_some_and(|n| n.ends_with("-admin-token"))
            })
            .map(|s| {
                String::from_utf8(support::control_plane::unbase64(s["data"]["token"].as_str().unwrap())).unwrap()
            });
        let token = admin.token(&ns, &service_account);
        let kubeconfig = dir.join("ramjet.kubeconfig");
        plane.write_kubeconfig(&kubeconfig, &token, &ns);
        Install {
            name: name.into(),
            class: name.into(),
            ns,
            election,
            service_account,
            args,
            kubeconfig,
            admin_token,
            dir,
            admin,
        }
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
        self.ramjet_listening(identity, kubeconfig, extra, http, admin)
    }

    /// As [`Install::ramjet_at`], with the HTTP listener on `http` too (an EndpointSlice may not
    /// name a loopback address).
    fn ramjet_listening(
        &self,
        identity: &str,
        kubeconfig: &std::path::Path,
        extra: &[&str],
        http: SocketAddr,
        admin: SocketAddr,
    ) -> Ramjet {
        let https: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut args: Vec<String> = self
            .args
            .iter()
            .filter(|a| {
                !["--http-addr", "--https-addr", "--admin-addr", "--metrics-addr", "--io-driver", "--admin-token-file"]
                    .iter()
                    .any(|f| a.starts_with(f))
            })
            .cloned()
            .collect();
        // Where the kubelet would mount the chart's admin-token Secret.
        if let Some(token) = &self.admin_token {
            let file = support::control_plane::write_file(&self.dir, "admin-token", token);
            args.push(format!("--admin-token-file={}", file.display()));
        }
        args.extend([
            format!("--http-addr={http}"),
            format!("--https-addr={https}"),
            format!("--admin-addr={admin}"),
            format!("--metrics-addr=127.0.0.1:{}", free_port()),
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
    // The admin token it was started with, for the mutating admin calls.
    let admin_token = args
        .iter()
        .find_map(|a| a.strip_prefix("--admin-token-file="))
        .map(|file| std::fs::read_to_string(file).unwrap().trim().to_string());
    Ramjet { child: Some(child), http, https, admin, admin_token, log, identity: identity.into(), exit: None }
}

/// The real binary, killed (SIGKILL) when dropped.
struct Ramjet {
    child: Option<Child>,
    http: SocketAddr,
    https: SocketAddr,
    admin: SocketAddr,
    admin_token: Option<String>,
    log: PathBuf,
    identity: String,
    /// How it exited, once [`Ramjet::wait_exit`] saw it.
    exit: Option<std::process::ExitStatus>,
}

impl Ramjet {
    /// A call to the admin API with the token it was started with, if any.
    fn admin_request(&self, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
        http_request(self.admin, self.admin_token.as_deref(), method, path, body)
    }

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
        let mut exit = None;
        eventually(timeout, || {
            exit = child.try_wait().ok().flatten();
            exit.is_some()
        });
        if exit.is_some() {
            self.child = None;
            self.exit = exit;
        }
        exit.is_some()
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
fn http_request(addr: SocketAddr, token: Option<&str>, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{auth}\
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

/// The annotations ramjet's field manager owns on an object (its server-side-apply entries, not
/// the status subresource's): ramjet must own its own annotation and nothing of the user's.
fn annotations_owned_by_ramjet(object: &Value) -> Vec<&str> {
    object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["manager"] == "ramjet" && m["subresource"].is_null())
        .flat_map(|m| m["fieldsV1"]["f:metadata"]["f:annotations"].as_object().unwrap().keys())
        .map(String::as_str)
        .collect()
}

/// The canary's `ramjet.dev/canary-state`, parsed.
fn canary_state(install: &Install) -> Option<Value> {
    let ingress = install.admin.get("Ingress", Some(&install.ns), "web-canary")?;
    let text = ingress["metadata"]["annotations"]["ramjet.dev/canary-state"].as_str()?.to_string();
    serde_json::from_str(&text).ok()
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
