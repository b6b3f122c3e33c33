//! Per-worker counters: each worker writes only its own cache line; the control thread sums them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
}

impl UpstreamErrorKind {
    pub const ALL: [UpstreamErrorKind; 5] = [
        UpstreamErrorKind::Connect,
        UpstreamErrorKind::Reset,
        UpstreamErrorKind::Timeout,
        UpstreamErrorKind::Protocol,
        UpstreamErrorKind::NoEndpoints,
    ];

    pub fn label(self) -> &'static str {
        ["connect", "reset", "timeout", "protocol", "no_endpoints"][self as usize]
    }
}

/// One worker's counters, on cache lines of their own. Only the owning worker writes (plain
/// load + store, no read-modify-write needed); anyone may read.
#[repr(align(128))]
#[derive(Default)]
pub struct WorkerCounters {
    requests: [AtomicU64; 5],
    upstream_errors: [AtomicU64; 5],
    connections_accepted: AtomicU64,
    connections_closed: AtomicU64,
    tls_handshake_failures: AtomicU64,
    upstream_retries: AtomicU64,
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

    #[inline]
    pub fn upstream_retry(&self) {
        bump(&self.upstream_retries);
    }
}

/// All workers' counters. Created before the workers start; worker `i` writes `worker(i)`.
pub struct WorkerStats {
    workers: Box<[WorkerCounters]>,
}

impl WorkerStats {
    pub fn new(workers: usize) -> Self {
        WorkerStats { workers: (0..workers).map(|_| WorkerCounters::default()).collect() }
    }

    pub fn worker(&self, index: usize) -> &WorkerCounters {
        &self.workers[index]
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

    pub fn upstream_retries(&self) -> u64 {
        self.sum(|w| &w.upstream_retries)
    }

    fn sum(&self, field: impl Fn(&WorkerCounters) -> &AtomicU64) -> u64 {
        self.workers.iter().map(|w| field(w).load(Relaxed)).sum()
    }
}
