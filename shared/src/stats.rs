//! Per-worker counters: each worker writes only its own cache line; the control thread sums them.
//!
//! Two kinds: the fixed [`WorkerCounters`] (process-wide figures), and per route and backend
//! [`RouteCounters`] series. A worker creates a series the first time it serves a request of a
//! (route, backend) pair and publishes its list of series through an `ArcSwap` (a pointer store,
//! only when the list changes); the control thread loads every worker's list at scrape time and
//! sums series with the same labels. Labels are the route's kind and source (`namespace/ingress`
//! or the static route) and the backend's name: bounded by the routes and backends of the table,
//! never by paths or clients. Counting by status code is opt-in (`--metrics-status-codes`): it
//! costs each series 4 KiB per worker.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::route::RouteOrigin;

/// Status codes counted one by one when that is on: 100 to 599.
const CODES: std::ops::Range<u16> = 100..600;

/// Status classes counted for `ramjet_requests_total{class}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusClass {
    Informational = 0,
    Success = 1,
    Redirection = 2,
    ClientError = 3,
    ServerError = 4,
}

impl StatusClass {
    pub const ALL: [StatusClass; 5] = [
        StatusClass::Informational,
        StatusClass::Success,
        StatusClass::Redirection,
        StatusClass::ClientError,
        StatusClass::ServerError,
    ];

    pub fn of(status: u16) -> Self {
        match status {
            0..=199 => StatusClass::Informational,
            200..=299 => StatusClass::Success,
            300..=399 => StatusClass::Redirection,
            400..=499 => StatusClass::ClientError,
            _ => StatusClass::ServerError,
        }
    }

    pub fn label(self) -> &'static str {
        ["1xx", "2xx", "3xx", "4xx", "5xx"][self as usize]
    }
}

/// Why an upstream exchange failed, for `ramjet_upstream_errors_total{kind}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamErrorKind {
    /// Connection refused or unreachable.
    Connect = 0,
    /// Reset or closed before a complete response.
    Reset = 1,
    /// No answer within the upstream timeout.
    Timeout = 2,
    /// The upstream sent something that is not HTTP/1.x.
    Protocol = 3,
    /// The backend had no endpoints.
    NoEndpoints = 4,
    /// The TLS handshake with the backend failed (its certificate did not verify, or it does not
    /// speak TLS).
    Tls = 5,
}

impl UpstreamErrorKind {
    pub const ALL: [UpstreamErrorKind; 6] = [
        UpstreamErrorKind::Connect,
        UpstreamErrorKind::Reset,
        UpstreamErrorKind::Timeout,
        UpstreamErrorKind::Protocol,
        UpstreamErrorKind::NoEndpoints,
        UpstreamErrorKind::Tls,
    ];

    pub fn label(self) -> &'static str {
        ["connect", "reset", "timeout", "protocol", "no_endpoints", "tls"][self as usize]
    }
}

/// One worker's counters, on cache lines of their own. Only the owning worker writes (plain
/// load + store, no read-modify-write needed); anyone may read.
#[repr(align(128))]
#[derive(Default)]
pub struct WorkerCounters {
    requests: [AtomicU64; 5],
    upstream_errors: [AtomicU64; 6],
    connections_accepted: AtomicU64,
    connections_closed: AtomicU64,
    tls_handshake_failures: AtomicU64,
    proxy_protocol_refusals: AtomicU64,
    idle_buffer_releases: AtomicU64,
    task_panics: AtomicU64,
    upstream_retries: AtomicU64,
    access_log_dropped: AtomicU64,
    mirrors_sent: AtomicU64,
    mirrors_dropped: AtomicU64,
    spans_dropped: AtomicU64,
}

#[inline]
fn bump(counter: &AtomicU64) {
    // Single writer: a relaxed load and store compile to plain moves, no locked instruction.
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

impl WorkerCounters {
    #[inline]
    pub fn request(&self, status: u16) {
        bump(&self.requests[StatusClass::of(status) as usize]);
    }

    #[inline]
    pub fn upstream_error(&self, kind: UpstreamErrorKind) {
        bump(&self.upstream_errors[kind as usize]);
    }

    #[inline]
    pub fn connection_opened(&self) {
        bump(&self.connections_accepted);
    }

    #[inline]
    pub fn connection_closed(&self) {
        bump(&self.connections_closed);
    }

    #[inline]
    pub fn tls_handshake_failed(&self) {
        bump(&self.tls_handshake_failures);
    }

    /// A connection to a listener that expects a PROXY protocol header was closed without a valid
    /// one (none, malformed, too long, or not within the timeout).
    #[inline]
    pub fn proxy_protocol_refused(&self) {
        bump(&self.proxy_protocol_refusals);
    }

    /// A quiet client connection gave its buffers back while it waits.
    #[inline]
    pub fn idle_buffers_released(&self) {
        bump(&self.idle_buffer_releases);
    }

    /// A connection's or stream's task panicked and was ended (a bug; the worker goes on).
    pub fn task_panicked(&self) {
        bump(&self.task_panics);
    }

    #[inline]
    pub fn upstream_retry(&self) {
        bump(&self.upstream_retries);
    }

    /// An access-log record did not fit the worker's buffer and was dropped.
    #[inline]
    pub fn access_log_dropped(&self) {
        bump(&self.access_log_dropped);
    }

    /// A mirrored copy was answered (the answer is discarded).
    #[inline]
    pub fn mirror_sent(&self) {
        bump(&self.mirrors_sent);
    }

    /// A mirrored copy was not sent (bound reached, body not buffered) or got no complete answer
    /// (its first bytes) in time.
    #[inline]
    pub fn mirror_dropped(&self) {
        bump(&self.mirrors_dropped);
    }

    /// A finished span found the worker's trace ring full.
    #[inline]
    pub fn span_dropped(&self) {
        bump(&self.spans_dropped);
    }
}

/// Upper bounds of the duration histograms, in seconds: ingress-nginx's defaults, so dashboards and
/// alerts written for it keep their meaning.
pub const DURATION_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
const DURATION_BOUNDS_US: [u64; 11] =
    [5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000];

/// A duration histogram written by one worker: a count per bucket (not cumulative; the last
/// counts what exceeds every bound) and the sum in microseconds.
#[derive(Default)]
pub struct Histogram {
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_us: AtomicU64,
}

impl Histogram {
    #[inline]
    pub fn observe(&self, micros: u64) {
        let i = DURATION_BOUNDS_US.iter().position(|&b| micros <= b).unwrap_or(DURATION_BOUNDS_US.len());
        bump(&self.buckets[i]);
        let sum = &self.sum_us;
        sum.store(sum.load(Relaxed).wrapping_add(micros), Relaxed);
    }

    fn add_to(&self, into: &mut HistogramSnapshot) {
        for (total, b) in into.buckets.iter_mut().zip(&self.buckets) {
            *total += b.load(Relaxed);
        }
        into.sum_us += self.sum_us.load(Relaxed);
    }
}

/// One (route, backend) series of one worker. Only the owning worker writes.
pub struct RouteCounters {
    /// The kind of object the route came from.
    pub origin: RouteOrigin,
    /// Where the route came from: `namespace/ingress`, or the static route.
    pub route: Arc<str>,
    /// The backend's name (`namespace/service:port`, or the static backend's key).
    pub backend: Arc<str>,
    requests: [AtomicU64; 5],
    /// By status code, 100 to 599, when counted (`--metrics-status-codes`).
    codes: Option<Box<[AtomicU64]>>,
    duration: Histogram,
    upstream: Histogram,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    connect_errors: AtomicU64,
    /// Seconds since the Unix epoch of the last request (coarse): a series of a vanished route is
    /// dropped once it has been idle for the grace period.
    pub last_active: AtomicU64,
    /// The last traced request, for the duration histogram's exemplar.
    exemplar: ExemplarSlot,
}

/// A traced request a histogram points to (an OpenMetrics exemplar): its trace, its duration and
/// when it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exemplar {
    pub trace_id: [u8; 16],
    pub duration_us: u64,
    pub unix_ms: u64,
}

/// One [`Exemplar`] written by the owning worker and read at scrape time: a sequence lock (odd
/// while a write is under way), so a scrape never pairs one request's trace with another's time.
#[derive(Default)]
struct ExemplarSlot {
    seq: AtomicU64,
    fields: [AtomicU64; 4],
}

impl ExemplarSlot {
    fn store(&self, e: &Exemplar) {
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq + 1, Relaxed);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        let [hi, lo] =
            [&e.trace_id[..8], &e.trace_id[8..]].map(|b| u64::from_be_bytes(b.try_into().unwrap_or_default()));
        for (f, v) in self.fields.iter().zip([hi, lo, e.duration_us, e.unix_ms]) {
            f.store(v, Relaxed);
        }
        self.seq.store(seq + 2, std::sync::atomic::Ordering::Release);
    }

    fn load(&self) -> Option<Exemplar> {
        for _ in 0..64 {
            let before = self.seq.load(std::sync::atomic::Ordering::Acquire);
            if before == 0 {
                return None;
            }
            let [hi, lo, duration_us, unix_ms] = [0, 1, 2, 3].map(|i| self.fields[i].load(Relaxed));
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            if before & 1 == 0 && self.seq.load(Relaxed) == before {
                let mut trace_id = [0u8; 16];
                trace_id[..8].copy_from_slice(&hi.to_be_bytes());
                trace_id[8..].copy_from_slice(&lo.to_be_bytes());
                return Some(Exemplar { trace_id, duration_us, unix_ms });
            }
            std::hint::spin_loop();
        }
        None
    }
}

/// What one request adds to its series.
pub struct RequestSample {
    pub status: u16,
    /// From the complete request head to the end of the response, microseconds.
    pub duration_us: u64,
    /// From the start of the upstream exchange to the response head, when there was one.
    pub upstream_us: Option<u64>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Connects that failed while serving it (refused, unreachable or timed out).
    pub connect_errors: u64,
    /// Seconds since the Unix epoch (the worker's clock).
    pub now_secs: u64,
}

impl RouteCounters {
    /// `codes`: count by status code too.
    pub fn new(origin: RouteOrigin, route: Arc<str>, backend: Arc<str>, codes: bool) -> Self {
        RouteCounters {
            origin,
            route,
            backend,
            requests: Default::default(),
            codes: codes.then(|| CODES.map(|_| AtomicU64::new(0)).collect()),
            duration: Histogram::default(),
            upstream: Histogram::default(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connect_errors: AtomicU64::new(0),
            last_active: AtomicU64::new(0),
            exemplar: ExemplarSlot::default(),
        }
    }

    /// A traced request of this series: the exemplar of its duration histogram.
    pub fn traced(&self, e: &Exemplar) {
        self.exemplar.store(e);
    }

    #[inline]
    pub fn record(&self, s: &RequestSample) {
        bump(&self.requests[StatusClass::of(s.status) as usize]);
        if let Some(codes) = &self.codes {
            if let Some(c) = codes.get(usize::from(s.status.wrapping_sub(CODES.start))) {
                bump(c);
            }
        }
        self.duration.observe(s.duration_us);
        if let Some(us) = s.upstream_us {
            self.upstream.observe(us);
        }
        let add = |c: &AtomicU64, n: u64| c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
        add(&self.bytes_in, s.bytes_in);
        add(&self.bytes_out, s.bytes_out);
        if s.connect_errors > 0 {
            add(&self.connect_errors, s.connect_errors);
        }
        self.last_active.store(s.now_secs, Relaxed);
    }
}

/// A histogram summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per bucket (not cumulative), the last one above every bound of [`DURATION_BUCKETS`].
    pub buckets: [u64; DURATION_BUCKETS.len() + 1],
    pub sum_us: u64,
}

impl HistogramSnapshot {
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// A (route, backend) series summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteSnapshot {
    pub origin: RouteOrigin,
    pub route: Arc<str>,
    pub backend: Arc<str>,
    /// By [`StatusClass`].
    pub requests: [u64; 5],
    /// By status code, the codes seen, when counted.
    pub codes: BTreeMap<u16, u64>,
    pub duration: HistogramSnapshot,
    pub upstream: HistogramSnapshot,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub connect_errors: u64,
    /// The newest traced request of the series, over the workers.
    pub exemplar: Option<Exemplar>,
}

/// All workers' counters. Created before the workers start; worker `i` writes `worker(i)`.
pub struct WorkerStats {
    workers: Box<[WorkerCounters]>,
    /// Each worker's (route, backend) series, replaced by that worker when the list changes.
    series: Box<[ArcSwap<Vec<Arc<RouteCounters>>>]>,
    /// Spans the trace exporter sent, and those the collector did not take (its only writer).
    spans_exported: AtomicU64,
    spans_failed: AtomicU64,
}

impl WorkerStats {
    pub fn new(workers: usize) -> Self {
        WorkerStats {
            workers: (0..workers).map(|_| WorkerCounters::default()).collect(),
            series: (0..workers).map(|_| ArcSwap::from_pointee(Vec::new())).collect(),
            spans_exported: AtomicU64::new(0),
            spans_failed: AtomicU64::new(0),
        }
    }

    pub fn worker(&self, index: usize) -> &WorkerCounters {
        &self.workers[index]
    }

    /// Worker `index` publishes its list of series (when it added or dropped one).
    pub fn publish_series(&self, index: usize, series: Vec<Arc<RouteCounters>>) {
        self.series[index].store(Arc::new(series));
    }

    /// Every (route, backend) series summed over the workers, sorted by route then backend.
    pub fn route_series(&self) -> Vec<RouteSnapshot> {
        let mut summed: BTreeMap<(Arc<str>, Arc<str>, RouteOrigin), RouteSnapshot> = BTreeMap::new();
        for worker in self.series.iter() {
            for c in worker.load().iter() {
                let key = (c.route.clone(), c.backend.clone(), c.origin);
                let s = summed.entry(key).or_insert_with(|| RouteSnapshot {
                    origin: c.origin,
                    route: c.route.clone(),
                    backend: c.backend.clone(),
                    ..RouteSnapshot::default()
                });
                for (total, n) in s.requests.iter_mut().zip(&c.requests) {
                    *total += n.load(Relaxed);
                }
                for (code, n) in CODES.zip(c.codes.iter().flat_map(|codes| codes.iter())) {
                    match n.load(Relaxed) {
                        0 => {}
                        n => *s.codes.entry(code).or_default() += n,
                    }
                }
                c.duration.add_to(&mut s.duration);
                c.upstream.add_to(&mut s.upstream);
                s.bytes_in += c.bytes_in.load(Relaxed);
                s.bytes_out += c.bytes_out.load(Relaxed);
                s.connect_errors += c.connect_errors.load(Relaxed);
                if let Some(e) = c.exemplar.load() {
                    if s.exemplar.is_none_or(|old| old.unix_ms < e.unix_ms) {
                        s.exemplar = Some(e);
                    }
                }
            }
        }
        summed.into_values().collect()
    }

    pub fn access_log_dropped(&self) -> u64 {
        self.sum(|w| &w.access_log_dropped)
    }

    pub fn requests(&self, class: StatusClass) -> u64 {
        self.sum(|w| &w.requests[class as usize])
    }

    pub fn upstream_errors(&self, kind: UpstreamErrorKind) -> u64 {
        self.sum(|w| &w.upstream_errors[kind as usize])
    }

    pub fn connections_accepted(&self) -> u64 {
        self.sum(|w| &w.connections_accepted)
    }

    /// Connections open now, across workers.
    pub fn active_connections(&self) -> u64 {
        self.connections_accepted().saturating_sub(self.sum(|w| &w.connections_closed))
    }

    pub fn tls_handshake_failures(&self) -> u64 {
        self.sum(|w| &w.tls_handshake_failures)
    }

    pub fn proxy_protocol_refusals(&self) -> u64 {
        self.sum(|w| &w.proxy_protocol_refusals)
    }

    pub fn task_panics(&self) -> u64 {
        self.sum(|w| &w.task_panics)
    }

    pub fn idle_buffer_releases(&self) -> u64 {
        self.sum(|w| &w.idle_buffer_releases)
    }

    pub fn upstream_retries(&self) -> u64 {
        self.sum(|w| &w.upstream_retries)
    }

    pub fn mirrors_sent(&self) -> u64 {
        self.sum(|w| &w.mirrors_sent)
    }

    pub fn mirrors_dropped(&self) -> u64 {
        self.sum(|w| &w.mirrors_dropped)
    }

    /// Spans by outcome: (exported, failed, dropped for a full ring).
    pub fn spans(&self) -> (u64, u64, u64) {
        (self.spans_exported.load(Relaxed), self.spans_failed.load(Relaxed), self.sum(|w| &w.spans_dropped))
    }

    /// The exporter sent `n` spans.
    pub fn trace_spans_exported(&self, n: u64) {
        self.spans_exported.fetch_add(n, Relaxed);
    }

    /// The exporter could not send `n` spans.
    pub fn trace_spans_failed(&self, n: u64) {
        self.spans_failed.fetch_add(n, Relaxed);
    }

    fn sum(&self, field: impl Fn(&WorkerCounters) -> &AtomicU64) -> u64 {
        self.workers.iter().map(|w| field(w).load(Relaxed)).sum()
    }
}
