//! A real Kubernetes control plane for tests: etcd and `kube-apiserver` built from the pinned Go
//! module in `tests/k8s` (by `tests/k8s/build.sh`, once per machine, cached under
//! `target/k8s-bin/<version>/`), started on loopback ports chosen at run time with a generated CA
//! and serving certificate, RBAC on (`--authorization-mode=Node,RBAC`), service-account tokens,
//! and an audit log of every write.
//!
//! Both processes are stopped by PID when the [`ControlPlane`] is dropped; the shared one (see
//! [`ControlPlane::shared`]) is stopped when the test binary exits, and on Linux both also die with
//! the thread that started them (`PR_SET_PDEATHSIG`), so a test binary killed mid-run leaves nothing.

use crate::go_tools;
use crate::ports::free_port;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use serde_json::Value;

/// The admin's bearer token (user `test-admin`, group `system:masters`).
const ADMIN_TOKEN: &str = "ramjet-test-admin-token";
/// A static token for ramjet itself where no ServiceAccount token can be had yet (the API server is
/// not up): user `ramjet`, groups `system:masters` and `ramjet:audited` (its reads are audited too).
pub const RAMJET_TOKEN: &str = "ramjet-test-static-token";

/// The directory holding `kube-apiserver`, `kubectl` and `etcd`, built on first use.
pub fn k8s_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let started = Instant::now();
        let dir = go_tools::go_build("tests/k8s/build.sh", "kube-apiserver and etcd");
        if started.elapsed() > Duration::from_secs(30) {
            eprintln!("control plane: built {} in {:.0?}", dir.display(), started.elapsed());
        }
        dir
    })
}

/// The CA and the API server's serving certificate.
struct Pki {
    ca_pem: String,
    serving_pem: String,
    serving_key_pem: String,
    service_account_key_pem: String,
    service_account_pub_pem: String,
}

fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "ramjet test cluster CA");
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);

    let mut serving =
        CertificateParams::new(vec!["localhost".to_string(), "kubernetes.default.svc".to_string()]).unwrap();
    serving.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
    serving.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate().unwrap();
    let serving_cert = serving.signed_by(&serving_key, &issuer).unwrap();

    let service_account_key = KeyPair::generate().unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        serving_pem: serving_cert.pem(),
        serving_key_pem: serving_key.serialize_pem(),
        service_account_key_pem: service_account_key.serialize_pem(),
        service_account_pub_pem: service_account_key.public_key_pem(),
    }
}

/// Every write at the Metadata level (who, what, when, which user agent); and the reads of
/// ServiceAccounts (ramjet runs as one), to count the requests it makes; nothing else.
const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: Metadata
    verbs: [get, list, watch]
    userGroups: [\"system:serviceaccounts\", \"ramjet:audited\"]
  - level: None
";

/// A running etcd + kube-apiserver pair on loopback.
pub struct ControlPlane {
    pub dir: PathBuf,
    /// `https://127.0.0.1:<port>`
    pub url: String,
    pub ca_pem: String,
    pub etcd_url: String,
    api_port: u16,
    procs: Mutex<Procs>,
    /// Kubeconfig of the admin (group system:masters).
    pub admin_kubeconfig: PathBuf,
}

#[derive(Default)]
struct Procs {
    etcd: Option<Child>,
    apiserver: Option<Child>,
}

impl ControlPlane {
    /// One control plane for every test of this test binary, started on first use and stopped
    /// when the binary exits. Tests isolate themselves by namespace and IngressClass names.
    pub fn shared() -> &'static ControlPlane {
        static SHARED: OnceLock<&'static ControlPlane> = OnceLock::new();
        SHARED.get_or_init(|| {
            let plane: &'static ControlPlane = Box::leak(Box::new(ControlPlane::start("shared")));
            stop_at_exit(plane);
            plane
        })
    }

    /// A control plane of its own (for tests that stop the API server), stopped on drop.
    pub fn start(name: &str) -> ControlPlane {
        let plane = ControlPlane::prepare(name);
        plane.start_etcd();
        plane.start_apiserver();
        plane
    }

    /// Everything but the processes: certificates, keys, policy, kubeconfig, ports.
    pub fn prepare(name: &str) -> ControlPlane {
        let bin = k8s_bin();
        assert!(bin.join("kube-apiserver").exists(), "{} has no kube-apiserver", bin.display());
        let dir = std::env::temp_dir().join(format!("ramjet-k8s-{name}-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        let pki = pki();
        std::fs::write(dir.join("ca.crt"), &pki.ca_pem).unwrap();
        std::fs::write(dir.join("apiserver.crt"), format!("{}{}", pki.serving_pem, pki.ca_pem)).unwrap();
        std::fs::write(dir.join("apiserver.key"), &pki.serving_key_pem).unwrap();
        std::fs::write(dir.join("sa.key"), &pki.service_account_key_pem).unwrap();
        std::fs::write(dir.join("sa.pub"), &pki.service_account_pub_pem).unwrap();
        std::fs::write(dir.join("audit-policy.yaml"), AUDIT_POLICY).unwrap();
        std::fs::write(
            dir.join("tokens.csv"),
            format!(
                "{ADMIN_TOKEN},test-admin,test-admin-uid,\"system:masters\"\n\
                 {RAMJET_TOKEN},ramjet,ramjet-uid,\"system:masters,ramjet:audited\"\n"
            ),
        )
        .unwrap();
        let api_port = free_port();
        let url = format!("https://127.0.0.1:{api_port}");
        let plane = ControlPlane {
            url,
            ca_pem: pki.ca_pem,
            etcd_url: format!("http://127.0.0.1:{}", free_port()),
            api_port,
            procs: Mutex::default(),
            admin_kubeconfig: dir.join("admin.kubeconfig"),
            dir,
        };
        plane.write_kubeconfig(&plane.admin_kubeconfig, ADMIN_TOKEN, "default");
        plane
    }

    /// Writes a kubeconfig that reaches this API server with `token`, default namespace `namespace`.
    pub fn write_kubeconfig(&self, path: &Path, token: &str, namespace: &str) {
        let ca = base64(self.ca_pem.as_bytes());
        let text = format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: test\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\n\
             users:\n- name: test\n  user:\n    token: {token}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: {namespace}\n\
             current-context: test\n",
            url = self.url
        );
        std::fs::write(path, text).unwrap();
    }

    /// Compacts etcd's history up to its current revision (through etcd's JSON gateway), so a watch
    /// resumed from an older resourceVersion gets 410 Gone. Returns the revision.
    pub fn compact_etcd(&self) -> u64 {
        let post = |path: &str, body: &str| -> Value {
            let out = Command::new("curl")
                .args(["-sS", "--max-time", "10", "-X", "POST", "-d", body])
                .arg(format!("{}{path}", self.etcd_url))
                .output()
                .expect("curl");
            serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("etcd {path}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
        };
        let revision: u64 = post("/v3/kv/range", r#"{"key":"AA=="}"#)["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .expect("etcd revision");
        post("/v3/kv/compaction", &format!(r#"{{"revision":"{revision}","physical":true}}"#));
        revision
    }

    pub fn audit_log(&self) -> PathBuf {
        self.dir.join("audit.log")
    }

    /// The audit log's entries (one JSON object per line), from the start.
    pub fn audit_entries(&self) -> Vec<Value> {
        let Ok(file) = File::open(self.audit_log()) else { return Vec::new() };
        BufReader::new(file).lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect()
    }

    pub fn start_etcd(&self) {
        let peer = format!("http://127.0.0.1:{}", free_port());
        let log = File::create(self.dir.join("etcd.log")).unwrap();
        let mut command = Command::new(k8s_bin().join("etcd"));
        command
            .args(["-data-dir", self.dir.join("etcd").to_str().unwrap()])
            .args(["-listen-client", &self.etcd_url, "-listen-peer", &peer])
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = spawn(command, "etcd");
        // The embedded etcd prints "ready" once it serves clients.
        let mut stdout = child.stdout.take().unwrap();
        let mut line = [0u8; 6];
        let ok = stdout.read_exact(&mut line).is_ok() && &line == b"ready\n";
        if !ok {
            let _ = child.kill();
            panic!("etcd did not start; {}:\n{}", self.dir.join("etcd.log").display(), self.log_tail("etcd.log"));
        }
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        self.procs().etcd = Some(child);
    }

    /// Starts the API server (again, on the same port after [`stop_apiserver`]) and waits for /readyz.
    pub fn start_apiserver(&self) {
        self.spawn_apiserver();
        self.wait_ready();
    }

    /// Starts the API server without waiting for it to be ready.
    pub fn spawn_apiserver(&self) {
        let d = |f: &str| self.dir.join(f).to_str().unwrap().to_string();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("apiserver.log")).unwrap();
        let mut command = Command::new(k8s_bin().join("kube-apiserver"));
        command
            .arg(format!("--etcd-servers={}", self.etcd_url))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={}", self.api_port))
            .arg(format!("--cert-dir={}", d("certs")))
            .arg(format!("--tls-cert-file={}", d("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", d("apiserver.key")))
            .arg(format!("--client-ca-file={}", d("ca.crt")))
            .arg(format!("--token-auth-file={}", d("tokens.csv")))
            .arg("--authorization-mode=Node,RBAC")
            .arg("--anonymous-auth=false")
            .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
            .arg(format!("--service-account-key-file={}", d("sa.pub")))
            .arg(format!("--service-account-signing-key-file={}", d("sa.key")))
            .arg("--api-audiences=https://kubernetes.default.svc.cluster.local")
            .arg("--service-cluster-ip-range=10.96.0.0/16")
            .arg(format!("--audit-policy-file={}", d("audit-policy.yaml")))
            .arg(format!("--audit-log-path={}", d("audit.log")))
            .arg("--audit-log-format=json")
            .arg("--audit-log-mode=blocking")
            .arg("--profiling=false")
            .arg("--enable-priority-and-fairness=false")
            .arg("--endpoint-reconciler-type=none")
            .arg("--v=1")
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        self.procs().apiserver = Some(spawn(command, "kube-apiserver"));
    }

    /// Polls /readyz (generous: a loaded 2-core machine takes a while to start the API server).
    pub fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if self.readyz() {
                return;
            }
            if let Some(child) = self.procs().apiserver.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!(
                        "kube-apiserver exited ({status}); {}:\n{}",
                        self.dir.display(),
                        self.log_tail("apiserver.log")
                    );
                }
            }
            assert!(
                Instant::now() < deadline,
                "kube-apiserver not ready after 180 s; {}:\n{}",
                self.dir.display(),
                self.log_tail("apiserver.log")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn readyz(&self) -> bool {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "--cacert"])
            .arg(self.dir.join("ca.crt"))
            .arg("-H")
            .arg(format!("Authorization: Bearer {ADMIN_TOKEN}"))
            .arg(format!("{}/readyz", self.url))
            .output()
            .expect("curl is needed by the cluster tests");
        out.stdout == b"200"
    }

    /// Stops the API server (SIGTERM, then SIGKILL after 10 s) and waits for it to exit.
    pub fn stop_apiserver(&self) {
        if let Some(child) = self.procs().apiserver.take() {
            stop(child);
        }
    }

    /// Freezes the API server (SIGSTOP) for `pause`, then lets it go on (SIGCONT): its connections
    /// stay open and every request hangs, as on an overloaded or wedged server.
    pub fn freeze_apiserver(&self, pause: Duration) {
        let Some(pid) = self.procs().apiserver.as_ref().map(|c| c.id() as libc::pid_t) else { return };
        // SAFETY: kill(2) on the PID of a child this process spawned and has not reaped yet.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, libc::SIGSTOP);
        }
        std::thread::sleep(pause);
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
    }

    fn stop_all(&self) {
        let mut procs = self.procs();
        if let Some(child) = procs.apiserver.take() {
            stop(child);
        }
        if let Some(child) = procs.etcd.take() {
            stop(child);
        }
    }

    fn procs(&self) -> std::sync::MutexGuard<'_, Procs> {
        self.procs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The end of a log, without the API server's flag dump.
    fn log_tail(&self, file: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.contains("flags.go")).collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// SIGTERM, a grace period, then SIGKILL; always reaped.
fn stop(mut child: Child) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on the PID of a child this process spawned and has not reaped yet.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Spawns `command` from a thread that lives as long as the process, with `PR_SET_PDEATHSIG`, so the
/// child is killed if the test binary dies without running its exit handlers.
pub(crate) fn spawn(mut command: Command, what: &str) -> Child {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl(2) is async-signal-safe and touches no memory of the parent.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    // The death signal follows the spawning *thread*: spawn from one that never exits.
    type Job = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Mutex<std::sync::mpsc::Sender<Job>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // Keep the thread (and so the death signal's anchor) alive until the process exits.
                loop {
                    std::thread::park();
                }
            })
            .unwrap();
        Mutex::new(tx)
    });
    let (reply, child) = std::sync::mpsc::channel();
    spawner.lock().unwrap().send((command, reply)).unwrap();
    child.recv().unwrap().unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

/// Stops the shared control plane when the test binary exits (statics are never dropped).
fn stop_at_exit(plane: &'static ControlPlane) {
    static PLANE: OnceLock<&'static ControlPlane> = OnceLock::new();
    let _ = PLANE.set(plane);
    extern "C" fn at_exit() {
        if let Some(plane) = PLANE.get() {
            plane.stop_all();
            if std::env::var_os("RAMJET_KEEP_CONTROL_PLANE").is_none() {
                let _ = std::fs::remove_dir_all(&plane.dir);
            }
        }
    }
    // SAFETY: registers a plain function with no arguments to run at exit(3).
    #[allow(unsafe_code)]
    unsafe {
        libc::atexit(at_exit);
    }
}

pub fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The bytes of standard base64 `text` (a Secret's `data`); panics on anything else.
pub fn unbase64(text: &str) -> Vec<u8> {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let digits: Vec<u32> = text
        .bytes()
        .filter(|&b| b != b'=')
        .map(|b| T.iter().position(|&t| t == b).unwrap_or_else(|| panic!("not base64: {text}")) as u32)
        .collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let n = chunk.iter().enumerate().fold(0, |n, (i, d)| n | d << (18 - 6 * i));
        out.extend(n.to_be_bytes()[1..chunk.len()].iter());
    }
    out
}

/// Writes `text` to a fresh file in `dir` and returns its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
    path
}
