//! A rolling update of the controller, played with real parts (issue 36): replicas behind the
//! chart's Service, whose EndpointSlices in the real API server say which replica is ready; a
//! kubelet that probes each replica's `/readyz` and writes that readiness; a kube-proxy that
//! watches the slices and sends each new connection to a ready replica; and a client at a steady
//! rate while a third replica replaces the first. A user must see no refused connection and no
//! failed request.

use super::*;

use std::collections::{BTreeMap, HashMap};
use std::net::{Shutdown, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{watcher, WatchStreamExt};
use support::client::{Conn, Response};

/// The chart's readinessProbe, its period scaled down from 2 s; its failureThreshold as it is.
const PROBE_PERIOD: Duration = Duration::from_millis(200);
const FAILURE_THRESHOLD: u32 = 2;
/// `controller.shutdownDelay`, shortened from the chart's 5 s to keep the test short, and still
/// well above what taking a replica out takes here: two failed probes (0.4 s), one write and
/// one watch event.
const SHUTDOWN_DELAY: Duration = Duration::from_secs(2);
/// The client: one request on a new connection every 20 ms, and four keep-alive connections with
/// one every 40 ms each, 150 requests a second in all.
const NEW_CONNECTION_EVERY: Duration = Duration::from_millis(20);
const KEEP_ALIVE_CLIENTS: usize = 4;
const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(40);

#[test]
fn rolling_update_refuses_no_connection() {
    let name = "rollout";
    let ns = format!("t-{name}");
    let values = json!({
        "ingressClass": { "name": name, "controllerValue": format!("ramjet.dev/{name}") },
        "gatewayAPI": { "enabled": false },
        "controller": { "shutdownDelay": format!("{}s", SHUTDOWN_DELAY.as_secs()) },
    });
    let install = Install::apply(name, render(name, &ns, &values));
    let app = Backend::start("app");
    install.service("web", &[&app]);
    install.ingress("web", "web.test", "web");
    let drain_timeout = humantime::parse_duration(&flag(&install.args, "--drain-timeout").unwrap()).unwrap();
    let published = flag(&install.args, "--publish-service").expect("the chart's Service");
    let service = published.split_once('/').unwrap().1.to_string();
    let pod = |identity: &str| {
        let http = SocketAddr::new(netns::HOST_IP.into(), free_port());
        let admin = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        install.ramjet_listening(identity, &install.kubeconfig, &[], http, admin)
    };
    let mut one = pod("one");
    let mut two = pod("two");
    one.wait_ready();
    two.wait_ready();
    one.wait_served("web.test", "app");
    two.wait_served("web.test", "app");
    let names: Mutex<HashMap<SocketAddr, String>> = Mutex::default();
    let name_of = |endpoint: &SocketAddr| names.lock().unwrap().get(endpoint).cloned().unwrap_or("?".into());

    let plane = ControlPlane::shared();
    let kubelet =
        Kubelet { ns: &ns, service: &service, pods: Mutex::new(BTreeMap::new()), changes: Mutex::new(Vec::new()) };
    let proxy = Proxy::bind();
    // The clients stop first, then the parts of the cluster that carry their requests.
    let (clients_stop, stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let add = |r: &Ramjet| {
        names.lock().unwrap().insert(r.http, r.identity.clone());
        kubelet.pods.lock().unwrap().insert(r.identity.clone(), (r.admin, r.http));
    };
    add(&one);
    add(&two);

    let timeline = std::thread::scope(|s| {
        // Whatever happens below, the threads end and the scope returns.
        let _stop = StopOnDrop { flags: [&clients_stop, &stop], proxy: proxy.addr };
        s.spawn(|| kubelet.run(plane, &stop));
        s.spawn(|| proxy.watch(plane, &ns, &service, &stop));
        s.spawn(|| proxy.serve(s, &stop));
        let wait_in_rotation = |r: &Ramjet, wanted: bool| {
            assert!(
                eventually(PATIENCE, || proxy.ready().contains(&r.http) == wanted),
                "{} never {} the proxy's endpoints: {:?}",
                r.identity,
                if wanted { "in" } else { "out of" },
                proxy.ready()
            );
        };
        wait_in_rotation(&one, true);
        wait_in_rotation(&two, true);
        let clients: Vec<_> = (0..=KEEP_ALIVE_CLIENTS)
            .map(|i| {
                let (proxy, stop) = (&proxy, &clients_stop);
                s.spawn(move || if i == 0 { client(proxy, stop, None) } else { client(proxy, stop, Some(i)) })
            })
            .collect();
        let start = Instant::now();
        std::thread::sleep(Duration::from_secs(1));

        // The new replica: ready, and in the proxy's endpoints, before the old one is told to stop.
        let mut three = pod("three");
        add(&three);
        three.wait_ready();
        wait_in_rotation(&three, true);
        let three_in = Instant::now();
        std::thread::sleep(Duration::from_secs(1));

        // What the kubelet does to the old pod (the chart sets no preStop hook: ramjet's
        // `--shutdown-delay` is the wait).
        let term = Instant::now();
        one.signal(libc::SIGTERM);
        wait_in_rotation(&one, false);
        let one_out = Instant::now();
        assert!(one.wait_exit(SHUTDOWN_DELAY + drain_timeout + PATIENCE), "one never exited; log:\n{}", one.log());
        let one_exited = Instant::now();
        kubelet.pods.lock().unwrap().remove("one");
        std::thread::sleep(Duration::from_secs(1));
        clients_stop.store(true, Relaxed);
        let requests: Vec<Request> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
        three.assert_running();
        two.assert_running();
        Timeline { start, three_in, term, one_out, one_exited, requests }
    });

    let Timeline { start, three_in, term, one_out, one_exited, requests } = timeline;
    let at = |t: Instant| t.duration_since(start);
    let failed: Vec<String> = requests
        .iter()
        .filter_map(|r| {
            let to = r.endpoint.as_ref().map_or("?".into(), name_of);
            r.error.as_ref().map(|e| format!("{:.3?} {} to {to}: {e}", at(r.sent), r.how()))
        })
        .collect();
    let to = |r: &Request, who: &str| r.endpoint.is_some_and(|e| name_of(&e) == who);
    let served = |who: &str| requests.iter().filter(|r| to(r, who)).count();
    let after_term = requests.iter().filter(|r| r.sent >= term && to(r, "one"));
    // New connections the proxy sent to one after SIGTERM, before the removal reached it: what
    // `--shutdown-delay` keeps from being refused.
    let late = after_term.clone().filter(|r| r.client.is_none()).count();
    // The keep-alive clients whose connection went to one: each must end up on another replica.
    let moved: Vec<usize> =
        (1..=KEEP_ALIVE_CLIENTS).filter(|i| requests.iter().any(|r| r.client == Some(*i) && to(r, "one"))).collect();
    let mut latencies: Vec<Duration> = requests.iter().map(|r| r.latency).collect();
    latencies.sort();
    let refused = proxy.refused.lock().unwrap().clone();
    let reset = proxy.reset.load(Relaxed);
    let kubelet_out =
        kubelet.changes.lock().unwrap().iter().find(|(t, pod, ready)| *t > term && pod == "one" && !ready).map(|c| c.0);
    eprintln!(
        "rollout: {} requests ({} on new connections, {} keep-alive), {} failed; to one {} (after SIGTERM {}, \
         {late} of them on new connections), two {}, three {}; latency p99 {:.1?}, max {:.1?}; keep-alive clients \
         moved from one {}: told to close {}, found closed while idle {}, retried after a close on a reused \
         connection {}",
        requests.len(),
        requests.iter().filter(|r| r.client.is_none()).count(),
        requests.iter().filter(|r| r.client.is_some()).count(),
        failed.len(),
        served("one"),
        after_term.count(),
        served("two"),
        served("three"),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
        moved.len(),
        requests.iter().filter(|r| r.client.is_some() && r.told_to_close).count(),
        requests.iter().filter(|r| r.found_closed).count(),
        requests.iter().filter(|r| r.retried).count(),
    );
    eprintln!(
        "rollout: three in rotation at {:.1?}; SIGTERM to one at {:.1?}: out of the slice after {:.0?}, out of \
         the proxy after {:.0?}, exited after {:.2?} ({}); proxy: {} refused, {reset} reset",
        at(three_in),
        at(term),
        kubelet_out.map(|t| t - term).unwrap_or_default(),
        one_out - term,
        one_exited - term,
        one.exit.map_or("still running".into(), |e| e.to_string()),
        refused.len(),
    );
    assert!(failed.is_empty(), "{} of {} requests failed:\n{}", failed.len(), requests.len(), failed.join("\n"));
    assert!(refused.is_empty() && reset == 0, "the proxy met {refused:?} refused, {reset} reset");
    // Every replica served its share: the old one until the end of its delay, the new one once ready.
    for who in ["one", "two", "three"] {
        assert!(served(who) > 0, "{who} served nothing");
    }
    assert!(late > 0, "no new connection reached one after SIGTERM: the rollout proved nothing");
    for &i in &moved {
        let last = requests.iter().rfind(|r| r.client == Some(i)).unwrap();
        assert!(!to(last, "one"), "keep-alive client {i} was still on one at the end");
        // Told during the delay, not cut off when it ended: an answer said `Connection: close`.
        let told = requests.iter().any(|r| r.client == Some(i) && to(r, "one") && r.sent >= term && r.told_to_close);
        assert!(told, "keep-alive client {i} left one without being told to close");
    }
    assert!(!requests.iter().any(|r| r.retried), "a request was sent again after a reused connection closed");
    assert!(one.exit.is_some_and(|e| e.success()), "one exited with {:?}; log:\n{}", one.exit, one.log());
    let stopping = one_exited - term;
    assert!(
        stopping >= SHUTDOWN_DELAY && stopping < SHUTDOWN_DELAY + drain_timeout,
        "one exited {stopping:?} after SIGTERM (delay {SHUTDOWN_DELAY:?}, drain timeout {drain_timeout:?})"
    );
}

/// What the test thread saw happen, and every request the clients made.
struct Timeline {
    start: Instant,
    three_in: Instant,
    term: Instant,
    one_out: Instant,
    one_exited: Instant,
    requests: Vec<Request>,
}

/// Sets the flags, and wakes the proxy's accept loop to see them, when the test ends or fails.
struct StopOnDrop<'a> {
    flags: [&'a AtomicBool; 2],
    proxy: SocketAddr,
}

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.flags.iter().for_each(|f| f.store(true, Relaxed));
        drop(TcpStream::connect(self.proxy));
    }
}

/// The kubelet's readiness probes and the EndpointSlice controller, for the chart's Service. Each
/// replica has a slice of its own: the replicas share one address and differ in the port named
/// `http`, and the EndpointSlice controller groups endpoints by their ports.
struct Kubelet<'a> {
    ns: &'a str,
    service: &'a str,
    /// The running replicas (pods): identity → (admin address, HTTP address).
    pods: Mutex<BTreeMap<String, (SocketAddr, SocketAddr)>>,
    /// Each readiness written: when, which pod, ready or not.
    changes: Mutex<Vec<(Instant, String, bool)>>,
}

impl Kubelet<'_> {
    fn run(&self, plane: &ControlPlane, stop: &AtomicBool) {
        let kube = Kube::new(&plane.admin_kubeconfig);
        // Per pod: ready as last written, and failed probes in a row.
        let mut probed: BTreeMap<String, (bool, u32)> = BTreeMap::new();
        while !stop.load(Relaxed) {
            let pods = self.pods.lock().unwrap().clone();
            // A pod gone (its process exited and the pod was deleted): its endpoint goes with it.
            for gone in probed.keys().filter(|p| !pods.contains_key(*p)).cloned().collect::<Vec<_>>() {
                kube.delete("EndpointSlice", Some(self.ns), &format!("{}-{gone}", self.service));
                probed.remove(&gone);
            }
            for (pod, (admin, http)) in &pods {
                let ok = super::http(*admin, "localhost", "/readyz").is_some_and(|(status, _)| status == 200);
                let (ready, failures) = probed.get(pod).copied().map_or((None, 0), |(r, f)| (Some(r), f));
                let failures = if ok { 0 } else { failures + 1 };
                let now = ok || (ready == Some(true) && failures < FAILURE_THRESHOLD);
                if ready != Some(now) {
                    kube.apply_value(&self.slice(pod, *http, now), "endpointslice-controller")
                        .unwrap_or_else(|e| panic!("writing {pod}'s EndpointSlice: {e}"));
                    self.changes.lock().unwrap().push((Instant::now(), pod.clone(), now));
                }
                probed.insert(pod.clone(), (now, failures));
            }
            std::thread::sleep(PROBE_PERIOD);
        }
    }

    fn slice(&self, pod: &str, http: SocketAddr, ready: bool) -> Value {
        json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": format!("{}-{pod}", self.service),
                "namespace": self.ns,
                "labels": { "kubernetes.io/service-name": self.service },
            },
            "addressType": "IPv4",
            "ports": [{ "name": "http", "port": http.port(), "protocol": "TCP" }],
            "endpoints": [{
                "addresses": [http.ip().to_string()],
                "conditions": { "ready": ready },
                "targetRef": { "kind": "Pod", "namespace": self.ns, "name": pod },
            }],
        })
    }
}

/// kube-proxy: watches the Service's EndpointSlices through the API server and sends each new
/// connection to the next ready endpoint; a connection stays with its endpoint (conntrack).
struct Proxy {
    listener: TcpListener,
    addr: SocketAddr,
    /// The ready endpoints, as the watch last said.
    ready: Mutex<Vec<SocketAddr>>,
    /// Which endpoint each client connection went to, by the client's address.
    conntrack: Mutex<HashMap<SocketAddr, SocketAddr>>,
    /// Connections an endpoint refused, or that found none ready (the client sees its connection
    /// closed): to which endpoint, and the error.
    refused: Mutex<Vec<String>>,
    /// Connections an endpoint reset.
    reset: AtomicUsize,
}

impl Proxy {
    fn bind() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        Proxy {
            listener,
            addr,
            ready: Mutex::default(),
            conntrack: Mutex::default(),
            refused: Mutex::default(),
            reset: AtomicUsize::new(0),
        }
    }

    fn ready(&self) -> Vec<SocketAddr> {
        self.ready.lock().unwrap().clone()
    }

    /// An informer on the slices labelled with the Service's name, as kube-proxy runs.
    fn watch(&self, plane: &ControlPlane, ns: &str, service: &str, stop: &AtomicBool) {
        let kube = Kube::new(&plane.admin_kubeconfig);
        let api: kube::Api<EndpointSlice> = kube::Api::namespaced(kube.client.clone(), ns);
        let config = watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
        kube.block_on(async {
            let mut events = std::pin::pin!(watcher(api, config).default_backoff());
            let (mut slices, mut listing) = (BTreeMap::new(), BTreeMap::new());
            while !stop.load(Relaxed) {
                let event = match tokio::time::timeout(Duration::from_millis(100), events.next()).await {
                    Err(_) => continue,
                    Ok(None) => break,
                    Ok(Some(Err(e))) => {
                        eprintln!("rollout: the EndpointSlice watch failed ({e}); it starts again");
                        continue;
                    }
                    Ok(Some(Ok(event))) => event,
                };
                let name = |s: &EndpointSlice| s.metadata.name.clone().unwrap_or_default();
                match event {
                    watcher::Event::Init => listing.clear(),
                    watcher::Event::InitApply(s) => {
                        listing.insert(name(&s), ready_endpoints(&s));
                    }
                    watcher::Event::InitDone => slices = std::mem::take(&mut listing),
                    watcher::Event::Apply(s) => {
                        slices.insert(name(&s), ready_endpoints(&s));
                    }
                    watcher::Event::Delete(s) => {
                        slices.remove(&name(&s));
                    }
                }
                *self.ready.lock().unwrap() = slices.values().flatten().copied().collect();
            }
        });
    }

    /// Accepts client connections until told to stop, each relayed by a thread of its own.
    fn serve<'s>(&'s self, s: &'s std::thread::Scope<'s, '_>, stop: &'s AtomicBool) {
        let mut next = 0;
        for client in self.listener.incoming() {
            if stop.load(Relaxed) {
                return;
            }
            let Ok(client) = client else { continue };
            let endpoint = {
                let ready = self.ready.lock().unwrap();
                next += 1;
                (!ready.is_empty()).then(|| ready[next % ready.len()])
            };
            let Some(endpoint) = endpoint else {
                self.refused.lock().unwrap().push("no ready endpoint".into());
                continue;
            };
            self.conntrack.lock().unwrap().insert(client.peer_addr().unwrap(), endpoint);
            s.spawn(move || self.relay(client, endpoint));
        }
    }

    fn relay(&self, client: TcpStream, endpoint: SocketAddr) {
        let upstream = match TcpStream::connect_timeout(&endpoint, Duration::from_secs(2)) {
            Ok(upstream) => upstream,
            Err(e) => return self.refused.lock().unwrap().push(format!("{endpoint}: {e}")),
        };
        let (mut client_in, mut upstream_out) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
        std::thread::scope(|s| {
            // The request side, until the client closes. It fails only when the endpoint has
            // closed first, which the response side and the client see.
            s.spawn(move || {
                std::io::copy(&mut client_in, &mut upstream_out).ok();
                upstream_out.shutdown(Shutdown::Write).ok();
            });
            let (mut upstream_in, mut client_out) = (&upstream, &client);
            if std::io::copy(&mut upstream_in, &mut client_out).is_err() {
                self.reset.fetch_add(1, Relaxed);
            }
            // Already closed by the client, or not: nothing to learn either way.
            client.shutdown(Shutdown::Write).ok();
        });
    }
}

/// The ready endpoints of a slice, on its port named `http` (the Service's port).
fn ready_endpoints(slice: &EndpointSlice) -> Vec<SocketAddr> {
    let port = slice.ports.iter().flatten().find(|p| p.name.as_deref() == Some("http")).and_then(|p| p.port);
    let Some(port) = port else { return Vec::new() };
    slice
        .endpoints
        .iter()
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .flat_map(|e| &e.addresses)
        .map(|a| SocketAddr::new(a.parse().unwrap(), port as u16))
        .collect()
}

/// One request the client made, and what became of it.
struct Request {
    /// `None` for a request on a new connection; else which keep-alive client.
    client: Option<usize>,
    sent: Instant,
    latency: Duration,
    /// The replica the proxy sent its connection to.
    endpoint: Option<SocketAddr>,
    error: Option<String>,
    /// Answered with `Connection: close`.
    told_to_close: bool,
    /// The keep-alive connection it was to go on had been closed by the server while idle.
    found_closed: bool,
    /// Sent again on a new connection after the reused one closed without a response: what
    /// clients do for an idempotent request (RFC 9112, section 9.3.1).
    retried: bool,
}

impl Request {
    fn how(&self) -> String {
        match self.client {
            None => "new connection".into(),
            Some(i) => format!("keep-alive client {i}"),
        }
    }
}

/// Requests at a steady rate until `stop`: each on a new connection with `Connection: close`, or
/// (keep-alive client `i`) on one connection for as long as the server keeps it open.
fn client(proxy: &Proxy, stop: &AtomicBool, keep_alive: Option<usize>) -> Vec<Request> {
    let every = if keep_alive.is_some() { KEEP_ALIVE_EVERY } else { NEW_CONNECTION_EVERY };
    let mut requests = Vec::new();
    let mut conn: Option<Conn> = None;
    let mut next = Instant::now();
    while !stop.load(Relaxed) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        // A steady rate, without a burst to catch up after a slow request.
        next = (next + every).max(Instant::now());
        let sent = Instant::now();
        let mut request = Request {
            client: keep_alive,
            sent,
            latency: Duration::ZERO,
            endpoint: None,
            error: None,
            told_to_close: false,
            found_closed: false,
            retried: false,
        };
        // A pooled connection the server closed while it sat idle is not used again.
        if conn.as_mut().is_some_and(closed_while_idle) {
            conn = None;
            request.found_closed = true;
        }
        let reused = conn.is_some();
        let (mut endpoint, mut answer) = exchange(proxy, &mut conn, keep_alive.is_some());
        if reused && matches!(answer, Err(Exchange::NoResponse(_))) {
            request.retried = true;
            conn = None;
            (endpoint, answer) = exchange(proxy, &mut conn, true);
        }
        request.latency = sent.elapsed();
        request.endpoint = endpoint;
        match answer {
            Ok(response) => {
                request.told_to_close = response.header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
                if request.told_to_close || keep_alive.is_none() {
                    conn = None;
                }
                if response.status != 200 || served_by(&response) != "app" {
                    request.error = Some(format!("{} {}", response.status, response.body.trim()));
                }
            }
            Err(e) => {
                conn = None;
                request.error = Some(e.to_string());
            }
        }
        requests.push(request);
    }
    requests
}

enum Exchange {
    Connect(std::io::Error),
    /// Nothing came back: the connection was closed or reset before a response.
    NoResponse(String),
}

impl std::fmt::Display for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exchange::Connect(e) => write!(f, "connect: {e}"),
            Exchange::NoResponse(how) => write!(f, "no response: {how}"),
        }
    }
}

/// `GET /` for web.test on `conn`, opened through the proxy first if there is none: the endpoint
/// the proxy chose for the connection, and the response.
fn exchange(
    proxy: &Proxy,
    conn: &mut Option<Conn>,
    keep_alive: bool,
) -> (Option<SocketAddr>, Result<Response, Exchange>) {
    if conn.is_none() {
        match TcpStream::connect(proxy.addr) {
            Ok(stream) => {
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                stream.set_nodelay(true).unwrap();
                *conn = Some(Conn::over(stream));
            }
            Err(e) => return (None, Err(Exchange::Connect(e))),
        }
    }
    let c = conn.as_mut().unwrap();
    let close = if keep_alive { "" } else { "Connection: close\r\n" };
    let answer = match c.stream.write_all(format!("GET / HTTP/1.1\r\nHost: web.test\r\n{close}\r\n").as_bytes()) {
        Ok(()) => c.read_response_to(false).ok_or_else(|| Exchange::NoResponse("closed".into())),
        Err(e) => Err(Exchange::NoResponse(format!("write: {e}"))),
    };
    let endpoint = proxy.conntrack.lock().unwrap().get(&c.stream.local_addr().unwrap()).copied();
    (endpoint, answer)
}

/// Whether the server closed this idle connection (what a client's pool looks at before reuse).
fn closed_while_idle(conn: &mut Conn) -> bool {
    conn.stream.set_nonblocking(true).unwrap();
    let closed = match conn.stream.peek(&mut [0]) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    conn.stream.set_nonblocking(false).unwrap();
    closed
}
