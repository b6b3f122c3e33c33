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

pub mod access_log;
mod auth;
mod buf;
mod clock;
mod coarse_timer;
mod contain;
mod dispatch;
mod drain;
mod edit;
mod error;
mod error_pages;
mod ewma;
mod external_auth;
mod filters;
mod grpc;
pub mod http1;
mod http2;
mod limits;
mod listener;
mod mirror;
mod observe;
mod page_box;
mod passthrough;
mod tls;
mod upstream;
mod worker;

pub use access_log::{AccessLog, AccessLogSettings};
pub use error::{rescue, Failure, ProxyError, Rescue, Side};
pub use listener::{bind_shared, ListenError};
pub use tls::{server_config, SniResolver};

use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ramjet_shared::{Published, WorkerStats};
use rustls::ServerConfig;

/// Timeouts and limits of the request path.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A client must send a complete request head within this time.
    pub header_timeout: Duration,
    /// Each read of a request body must bring bytes within this time (408 otherwise).
    pub client_body_timeout: Duration,
    /// Each write to a client must complete within this time, or the connection is closed: a client
    /// that stops reading cannot hold its task and an upstream connection. With 32 KiB writes, the
    /// default is a minimum rate of about 550 bytes/s.
    pub client_write_timeout: Duration,
    /// An idle keep-alive client connection is closed after this time (up to one
    /// 50 ms tick of the worker's coarse timer later once it gave its buffers back).
    pub keepalive_timeout: Duration,
    /// An HTTP/1.1 client connection, plain or TLS, quiet for this long (waiting for its first or
    /// next request) gives its buffers back to the worker until bytes arrive (a TLS one its TLS
    /// stream's buffers too), so idle connections cost little memory; a client that sends sooner
    /// pays nothing for it.
    pub idle_release_after: Duration,
    /// Connect, send and each wait for upstream bytes must finish within this time (504 otherwise).
    pub upstream_timeout: Duration,
    /// Pooled upstream connections idle longer than this are closed.
    pub upstream_idle_timeout: Duration,
    /// Idle HTTP/1.1 connections a worker keeps per endpoint (ingress-nginx's
    /// `upstream-keepalive-connections`, which is per worker and upstream too). Beyond the first few,
    /// a pooled connection keeps no read buffer, so a large pool costs sockets, not memory.
    pub upstream_keepalive_connections: usize,
    /// On shutdown, in-flight requests get this long to finish.
    pub drain_timeout: Duration,
    /// The series of a (route, backend) that left the serving table are dropped from `/metrics`
    /// once they have had no request for this long.
    pub metrics_grace: Duration,
    /// Limits of HTTP/2 connections (the preface and first request share `header_timeout`, idle
    /// connections `keepalive_timeout`).
    pub http2: Http2Settings,
}

/// Limits of downstream HTTP/2 connections. The defaults are nginx's where nginx has the setting,
/// else Envoy's recommendations for an edge proxy (see `docs/http2.md`).
#[derive(Debug, Clone)]
pub struct Http2Settings {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; nginx: 128). Streams
    /// the client reset still count until ramjet has finished with them, so resetting does not
    /// buy a client more concurrent work (the Rapid Reset defence).
    pub max_concurrent_streams: u32,
    /// Largest decoded header list of a request (SETTINGS_MAX_HEADER_LIST_SIZE), the same budget as
    /// an HTTP/1.1 head (32 KiB; nginx's `large_client_header_buffers` 4 × 8k).
    pub max_header_list_size: u32,
    /// Flow-control window of each request body (64 KiB: RFC 9113's default, and nginx's
    /// `http2_body_preread_size`; Envoy's edge recommendation).
    pub initial_stream_window: u32,
    /// Flow-control window of a whole connection (1 MiB: Envoy's edge recommendation).
    pub initial_connection_window: u32,
    /// Largest frame accepted (16 KiB: the protocol's default and minimum).
    pub max_frame_size: u32,
    /// Response bytes buffered per stream before ramjet waits for the client's window (64 KiB).
    pub max_send_buffer: usize,
    /// Streams the client may reset before ramjet has taken them up, before the connection is
    /// closed with ENHANCE_YOUR_CALM (20, as hyper and the h2 crate).
    pub max_pending_accept_reset_streams: usize,
    /// Streams ramjet may reset for the client's protocol errors before the connection is closed
    /// (1024, as the h2 crate; the 2023–2024 "MadeYouReset" family).
    pub max_local_error_reset_streams: usize,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Http2Settings {
            max_concurrent_streams: 128,
            max_header_list_size: http1::MAX_HEAD as u32,
            initial_stream_window: 64 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_send_buffer: 64 * 1024,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 1024,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_timeout: Duration::from_secs(10),
            client_body_timeout: Duration::from_secs(60),
            client_write_timeout: Duration::from_secs(60),
            keepalive_timeout: Duration::from_secs(60),
            idle_release_after: Duration::from_secs(1),
            upstream_timeout: Duration::from_secs(60),
            upstream_idle_timeout: Duration::from_secs(30),
            upstream_keepalive_connections: 1024,
            drain_timeout: Duration::from_secs(30),
            metrics_grace: Duration::from_secs(300),
            http2: Http2Settings::default(),
        }
    }
}

/// Which I/O driver the workers may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoDriver {
    /// io_uring, or refuse to start.
    #[default]
    IoUring,
    /// io_uring where it can be set up, else epoll (with a warning that says why).
    Auto,
    /// epoll.
    Legacy,
}

/// The driver a worker ended up with, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverChoice {
    pub io_uring: bool,
    pub reason: String,
}

impl fmt::Display for DriverChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.io_uring { "io_uring" } else { "epoll (legacy)" };
        write!(f, "{name}: {}", self.reason)
    }
}

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
}

/// The running workers.
pub struct DataPlane {
    threads: Vec<JoinHandle<()>>,
    drain: Option<flume::Sender<()>>,
    /// Where HTTP is served (the real port when 0 was asked for).
    pub http_addr: SocketAddr,
    pub https_addr: Option<SocketAddr>,
    /// The driver of each worker.
    pub drivers: Vec<DriverChoice>,
    access_log: Option<AccessLog>,
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
        let http = listener::bind_shared(config.http_addr, workers)?;
        let http_addr = http[0].local_addr().map_err(|source| ListenError::Bind { addr: config.http_addr, source })?;
        let (https, https_addr, tls_config) = match config.https {
            Some((addr, tls)) => {
                let listeners = listener::bind_shared(addr, workers)?;
                let bound = listeners[0].local_addr().map_err(|source| ListenError::Bind { addr, source })?;
                (listeners.into_iter().map(Some).collect(), Some(bound), Some(tls))
            }
            None => ((0..workers).map(|_| None).collect::<Vec<Option<TcpListener>>>(), None, None),
        };
        let cpus = if config.pin_workers { allowed_cpus() } else { Vec::new() };
        let settings = Arc::new(config.settings);
        let (drain_tx, drain_rx) = flume::bounded::<()>(1);
        let (ready_tx, ready_rx) = mpsc::channel();
        let mut threads = Vec::with_capacity(workers);
        for (id, (http, https)) in http.into_iter().zip(https).enumerate() {
            let cpu = (!cpus.is_empty()).then(|| cpus[id % cpus.len()]);
            let settings = settings.clone();
            let published = published.clone();
            let stats = stats.clone();
            let drain_rx = drain_rx.clone();
            let ready_tx = ready_tx.clone();
            let tls_config = tls_config.clone();
            let log = worker_logs[id].take();
            let policy = config.io_driver;
            let thread = std::thread::Builder::new()
                .name(format!("ramjet-worker-{id}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        if let Err(e) = monoio::utils::bind_to_cpu_set([cpu]) {
                            tracing::warn!(worker = id, cpu, error = %e, "cannot pin worker to its CPU");
                        }
                    }
                    let main = move |started: worker::Started| async move {
                        let worker = Rc::new(worker::Worker::new(id, settings, published, stats, log));
                        let https = https.zip(tls_config.map(tls::TlsTerminator::new));
                        worker::run(worker, http, https, drain_rx, started).await
                    };
                    run_worker(id, policy, ready_tx, main);
                })
                .map_err(|e| StartError::Worker { worker: id, reason: e.to_string() })?;
            threads.push(thread);
        }
        drop(ready_tx);
        let mut drivers = vec![None; workers];
        for _ in 0..workers {
            match ready_rx.recv() {
                Ok((id, Ok(choice))) => drivers[id] = Some(choice),
                Ok((worker, Err(reason))) => {
                    drop(drain_tx);
                    return Err(StartError::Worker { worker, reason });
                }
                Err(_) => return Err(StartError::Worker { worker: 0, reason: "worker exited".into() }),
            }
        }
        Ok(DataPlane {
            threads,
            drain: Some(drain_tx),
            http_addr,
            https_addr,
            drivers: drivers.into_iter().flatten().collect(),
            access_log,
        })
    }

    /// Reopens the access log's file (SIGHUP: logrotate moved it away).
    pub fn reopen_access_log(&self) {
        if let Some(log) = &self.access_log {
            log.reopen();
        }
    }

    /// Stops accepting and lets the workers finish their connections (see [`Settings::drain_timeout`]).
    pub fn drain(&mut self) {
        self.drain.take();
    }

    /// Waits for every worker to finish (after [`DataPlane::drain`]).
    pub fn join(mut self) {
        self.drain();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // The workers are done: what their rings hold is written before the writer stops.
        if let Some(mut log) = self.access_log.take() {
            log.finish();
        }
    }
}

pub(crate) type Ready = mpsc::Sender<(usize, Result<DriverChoice, String>)>;

/// Builds the worker's runtime on the driver the policy allows and runs `main` on it; `main` says
/// when it serves (its listeners registered) or why it cannot, and only then is the worker started.
fn run_worker<F, Fut>(id: usize, policy: IoDriver, ready: Ready, main: F)
where
    F: FnOnce(worker::Started) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    type Uring = monoio::Runtime<monoio::time::TimeDriver<monoio::IoUringDriver>>;
    type Legacy = monoio::Runtime<monoio::time::TimeDriver<monoio::LegacyDriver>>;
    enum Built {
        Uring(Uring, &'static str),
        Legacy(Legacy, String),
    }
    let forced = std::env::var("MONOIO_FORCE_LEGACY_DRIVER")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"));
    let build_legacy = |reason: String| -> Result<Built, String> {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()
            .map(|rt| Built::Legacy(rt, reason))
            .map_err(|e| format!("cannot build the epoll runtime: {e}"))
    };
    let built = if forced {
        build_legacy("MONOIO_FORCE_LEGACY_DRIVER is set".into())
    } else if policy == IoDriver::Legacy {
        build_legacy("--io-driver legacy".into())
    } else {
        let uring = if monoio::utils::detect_uring() {
            // Cooperative task running: completions posted from another CPU wait for this thread's
            // next entry into the kernel instead of interrupting it (Linux 5.19+). Measured with
            // benches/proxy: about half a reschedule IPI per request fewer, and 16 % less CPU.
            let mut cooperative = io_uring::IoUring::builder();
            cooperative.setup_coop_taskrun().setup_taskrun_flag();
            let builder = || monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().enable_timer().with_entries(1024);
            match builder().uring_builder(cooperative).build() {
                Ok(rt) => Ok((rt, "io_uring available, cooperative task running")),
                // Older kernels refuse the flag: the same ring without it.
                Err(_) => {
                    builder().build().map(|rt| (rt, "io_uring available (kernel without cooperative task running)"))
                }
            }
        } else {
            Err(std::io::Error::other("the io_uring probe failed (kernel too old, seccomp, or RLIMIT_MEMLOCK)"))
        };
        match uring {
            Ok((rt, why)) => Ok(Built::Uring(rt, why)),
            Err(e) => {
                let why = format!("io_uring unavailable: {e}; RLIMIT_MEMLOCK is {}", memlock_limit());
                if policy == IoDriver::Auto {
                    build_legacy(format!("{why}; falling back as --io-driver auto allows"))
                } else {
                    Err(format!(
                        "{why}. Raise the memlock limit, or start with --io-driver auto to allow the epoll fallback"
                    ))
                }
            }
        }
    };
    match built {
        Ok(Built::Uring(mut rt, why)) => {
            let choice = DriverChoice { io_uring: true, reason: why.into() };
            rt.block_on(main(worker::Started::new(id, choice, ready)));
        }
        Ok(Built::Legacy(mut rt, reason)) => {
            let choice = DriverChoice { io_uring: false, reason };
            rt.block_on(main(worker::Started::new(id, choice, ready)));
        }
        Err(reason) => {
            let _ = ready.send((id, Err(reason)));
        }
    }
}

/// RLIMIT_MEMLOCK, for the start-up message (io_uring rings count against it).
#[allow(unsafe_code)]
fn memlock_limit() -> String {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct, which `limit` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return "unknown".into();
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        format!("{} KiB", limit.rlim_cur / 1024)
    }
}

/// The CPUs this process may run on (its affinity mask), in order.
#[allow(unsafe_code)]
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills at most size_of::<cpu_set_t>() bytes
    // of it, and CPU_ISSET reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect()
    }
}

/// The number of CPUs this process may run on: the default worker count.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}
