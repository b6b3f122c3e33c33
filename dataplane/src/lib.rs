//! The data plane: one monoio worker per core, serving HTTP/1.1 and HTTP/2 (and TLS) from the published
//! generation, with nothing shared between workers but the published pointers and their counters.
//!
//! [`DataPlane::start`] binds one SO_REUSEPORT listener per worker (refusing a port another process
//! holds), starts the worker threads (`ramjet-worker-N`, each pinned to a CPU, each its own
//! io_uring runtime, or the epoll driver where allowed) and returns once every worker runs. A worker
//! accepts connections, parses each request head in place, loads the current generation once,
//! routes, and answers directly or proxies over its own pooled upstream connections (see
//! [`http1`]). [`DataPlane::drain`] stops accepting, lets in-flight requests finish within the drain
//! timeout, and closes idle keep-alive connections.
//!
//! The client of a request is one value, the client address, used by routing (source ranges),
//! admission (per-client limits, external auth), endpoint hashing, the access log and the forwarded
//! fields upstream: the connection's peer, unless its listener expects a PROXY protocol header
//! ([`Settings::client_address`]; read once per connection, before anything else) or the peer is a
//! trusted proxy whose requests name their client (read once per request, only for such peers; see
//! [`codec::forwarded`] and [`codec::proxy_protocol`]).
//!
//! The ports of the serving table's TCP and UDP routes are opened by the control thread through the
//! [`PortOpener`] (after each publish) and served by every worker beside HTTP and HTTPS; their
//! connections and flows are relayed as they are (Layer 4) to the routes' backends.
//!
//! HTTP/2 connections (module `http2`, h2c by prior knowledge or ALPN `h2`) are served on the same
//! worker by the `h2` crate; tokio is a dependency only for the I/O traits that crate is written
//! against (no tokio runtime runs here). The crate takes no lock on the request path.
//!
//! Backends are spoken to as their compiled [`ramjet_shared::BackendProtocol`] says (module
//! `upstream`): HTTP/1.1 on pooled connections, HTTP/2 on one multiplexed connection per endpoint,
//! either over TLS (`HTTPS`, `GRPCS`) with the rustls settings the compiler put in the backend.
//!
//! Memory per connection follows what it is doing: buffers come from per-worker pools (module
//! `buf`), and a busy connection's request state lives in page blocks of the worker's (module
//! `page_box`), both given back when the connection goes quiet, so idle connections stay small.

mod base;
pub mod codec;
pub mod conn;
mod error;
mod observe;
mod pipeline;
mod policy;
mod server;
mod settings;
mod upstream;
mod worker;

pub use base::listener::{bind_shared, ListenError};
pub use conn::{AddressField, AddressRules};
pub use error::{rescue, Failure, ProxyError, Rescue, Side};
pub use observe::access_log::{self, AccessLog, AccessLogSettings};
pub use observe::log_template::{Escape as LogEscape, LogTemplate};
pub use observe::trace::{OtlpEndpoint, TraceExport, TraceSettings};
pub use ramjet_shared::operation_name::OperationName;
pub use server::route_ports::{PortOpener, RoutePorts};
pub use server::tls::{server_config, DefaultCertificate, SniResolver};
pub use settings::{ClientAddress, DriverChoice, Http2Settings, IoDriver, Settings};

use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use base::wakeup::EventSender;
use ramjet_shared::{Published, WorkerStats};
use rustls::ServerConfig;

/// What the data plane needs to start.
pub struct DataPlaneConfig {
    pub workers: usize,
    pub http_addr: SocketAddr,
    /// HTTPS listener and the TLS configuration (see [`server_config`]).
    pub https: Option<(SocketAddr, Arc<ServerConfig>)>,
    pub settings: Settings,
    pub io_driver: IoDriver,
    /// Pin worker `i` to the i-th CPU this process may run on.
    pub pin_workers: bool,
    /// The access log (`None`: off).
    pub access_log: Option<AccessLogSettings>,
    /// Traces (`None`: off).
    pub traces: Option<TraceSettings>,
}

/// Why the data plane did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener could not be bound.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// A worker could not build its runtime.
    #[error("worker {worker} could not start: {reason}")]
    Worker { worker: usize, reason: String },
    /// The access log's destination could not be opened.
    #[error(transparent)]
    AccessLog(std::io::Error),
    /// The trace exporter's thread could not start.
    #[error("cannot start the trace exporter: {0}")]
    Traces(std::io::Error),
}

/// The running workers.
pub struct DataPlane {
    threads: Vec<JoinHandle<()>>,
    /// One eventfd per worker, written once to drain it.
    drain: Vec<EventSender>,
    /// Where HTTP is served (the real port when 0 was asked for).
    pub http_addr: SocketAddr,
    pub https_addr: Option<SocketAddr>,
    /// The driver of each worker.
    pub drivers: Vec<DriverChoice>,
    /// The listeners of the serving table's TCP routes.
    pub route_ports: Arc<RoutePorts>,
    /// What opens them, until the control thread takes it ([`DataPlane::take_port_opener`]).
    port_opener: Option<PortOpener>,
    access_log: Option<AccessLog>,
    traces: Option<TraceExport>,
    /// [`DataPlane::begin_closing`] was called.
    closing: bool,
}

impl DataPlane {
    /// Binds the listeners and starts the workers; returns once all of them serve.
    pub fn start(
        config: DataPlaneConfig,
        published: Arc<Published>,
        stats: Arc<WorkerStats>,
    ) -> Result<DataPlane, StartError> {
        let workers = config.workers.max(1);
        let (access_log, mut worker_logs) = match config.access_log {
            Some(settings) => {
                let (log, rings) = AccessLog::start(settings, workers).map_err(StartError::AccessLog)?;
                (Some(log), rings.into_iter().map(Some).collect())
            }
            None => (None, (0..workers).map(|_| None).collect::<Vec<_>>()),
        };
        let (traces, mut worker_tracers) = match config.traces {
            Some(settings) => {
                let (export, tracers) =
                    TraceExport::start(settings, workers, stats.clone()).map_err(StartError::Traces)?;
                (Some(export), tracers.into_iter().map(Some).collect())
            }
            None => (None, (0..workers).map(|_| None).collect::<Vec<_>>()),
        };
        let http = base::listener::bind_shared(config.http_addr, workers)?;
        let http_addr = http[0].local_addr().map_err(|source| ListenError::Bind { addr: config.http_addr, source })?;
        let (https, https_addr, tls_config) = match config.https {
            Some((addr, tls)) => {
                let listeners = base::listener::bind_shared(addr, workers)?;
                let bound = listeners[0].local_addr().map_err(|source| ListenError::Bind { addr, source })?;
                (listeners.into_iter().map(Some).collect(), Some(bound), Some(tls))
            }
            None => ((0..workers).map(|_| None).collect::<Vec<Option<TcpListener>>>(), None, None),
        };
        let (route_ports, port_opener, mut ports_changed) =
            server::route_ports::RoutePorts::new(http_addr.ip(), workers, published.clone()).map_err(|e| {
                StartError::Worker { worker: 0, reason: format!("cannot create its wake-up eventfd: {e}") }
            })?;
        let cpus = if config.pin_workers { server::runtime::allowed_cpus() } else { Vec::new() };
        let settings = Arc::new(config.settings);
        // `limit-connections` counts, shared by the workers as nginx's zones are by its workers.
        let under_way = Arc::new(policy::under_way::UnderWayTable::default());
        let mut drain = Vec::with_capacity(workers);
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut threads = Vec::with_capacity(workers);
        for (id, (http, https)) in http.into_iter().zip(https).enumerate() {
            let cpu = (!cpus.is_empty()).then(|| cpus[id % cpus.len()]);
            let settings = settings.clone();
            let under_way = under_way.clone();
            let published = published.clone();
            let stats = stats.clone();
            let (sender, drain_rx) = base::wakeup::event_pair().map_err(|e| StartError::Worker {
                worker: id,
                reason: format!("cannot create its drain eventfd: {e}"),
            })?;
            drain.push(sender);
            let ready_tx = ready_tx.clone();
            let tls_config = tls_config.clone();
            let log = worker_logs[id].take();
            let tracer = worker_tracers[id].take();
            let ports = (route_ports.clone(), ports_changed.remove(0));
            let policy = config.io_driver;
            let thread = std::thread::Builder::new()
                .name(format!("ramjet-worker-{id}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        if let Err(e) = monoio::utils::bind_to_cpu_set([cpu]) {
                            tracing::warn!(worker = id, cpu, error = %e, "cannot pin worker to its CPU");
                        }
                    }
                    let main = move |started: server::runtime::Started| async move {
                        let mut worker = worker::Worker::new(id, settings, published.clone(), stats, log, tracer);
                        worker.limiter = policy::limits::ClientLimiter::sharing(under_way);
                        worker.io_uring = started.io_uring();
                        let worker = Rc::new(worker);
                        let terminator = |config| server::tls::TlsTerminator::new(config, published.clone());
                        let https = https.zip(tls_config.map(terminator));
                        server::accept::run(worker, http, https, ports, drain_rx, started).await
                    };
                    server::runtime::run_worker(id, policy, ready_tx, main);
                })
                .map_err(|e| StartError::Worker { worker: id, reason: e.to_string() })?;
            threads.push(thread);
        }
        drop(ready_tx);
        let mut drivers = vec![None; workers];
        for _ in 0..workers {
            match ready_rx.recv() {
                Ok((id, Ok(choice))) => drivers[id] = Some(choice),
                // Dropping `drain` tells the workers that started to stop.
                Ok((worker, Err(reason))) => return Err(StartError::Worker { worker, reason }),
                Err(_) => return Err(StartError::Worker { worker: 0, reason: "worker exited".into() }),
            }
        }
        Ok(DataPlane {
            threads,
            drain,
            route_ports,
            port_opener: Some(port_opener),
            http_addr,
            https_addr,
            drivers: drivers.into_iter().flatten().collect(),
            access_log,
            traces,
            closing: false,
        })
    }

    /// What opens and closes the TCP routes' ports, for the control thread (once).
    pub fn take_port_opener(&mut self) -> Option<PortOpener> {
        self.port_opener.take()
    }

    /// Reopens the access log's file (SIGHUP: logrotate moved it away).
    pub fn reopen_access_log(&self) {
        if let Some(log) = &self.access_log {
            log.reopen();
        }
    }

    /// Shutdown begins: HTTP/1.1 answers say `Connection: close` from now on, while the listeners
    /// still accept (the shutdown delay); [`DataPlane::drain`] follows.
    pub fn begin_closing(&mut self) {
        if std::mem::replace(&mut self.closing, true) {
            return;
        }
        for sender in &self.drain {
            sender.signal();
        }
    }

    /// Stops accepting and lets the workers finish their connections (see [`Settings::drain_timeout`]).
    /// Counts as [`DataPlane::begin_closing`] too when that was not called.
    pub fn drain(&mut self) {
        self.begin_closing();
        // Dropping a worker's sender tells it, once more.
        self.drain.clear();
    }

    /// Waits for every worker to finish (after [`DataPlane::drain`]).
    pub fn join(mut self) {
        self.drain();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.route_ports.close();
        // The workers are done: what their rings hold is written before the writer stops.
        if let Some(mut log) = self.access_log.take() {
            log.finish();
        }
        if let Some(mut traces) = self.traces.take() {
            traces.finish();
        }
    }
}

/// The number of CPUs this process may run on: the default worker count.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
