//! The per-core context: what one worker owns — its pools, buffers, cursors, limiters, counters and
//! the cached generation pointer — read by every floor above it. It runs nothing itself; the
//! accept loop (`crate::server::accept`) does.

use std::cell::{Cell, RefCell};
use std::ops::Deref;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::{ArcSwap, Cache};
use ramjet_shared::{Exemplar, Generation, Published, WorkerCounters, WorkerStats};

use crate::base::buf::BufferPool;
use crate::base::clock::Clock;
use crate::base::coarse_timer::{CoarseSleep, CoarseTimer};
use crate::base::drain::DrainSignal;
use crate::base::page_box::PagePool;
use crate::codec::http1::{CLIENT_BUFFER, UPSTREAM_BUFFER};
use crate::error::{rescue, Failure, Rescue};
use crate::observe::access_log::{self, RequestFields, ResponseFields, WorkerLog};
use crate::observe::requests::{self, Done, Observer, RequestId, RequestIds, RouteIndex, Sampler};
use crate::observe::trace::{self, SpanRecord, Trace, WorkerTracer};
use crate::policy::basic_auth::AuthCache;
use crate::policy::ewma::Ewma;
use crate::policy::limits::ClientLimiter;
use crate::policy::mirrors::Mirrors;
use crate::settings::Settings;
use crate::upstream::{h2::H2Pool, pool::Pool};

/// Derefs to the published generation pointer, so a per-worker `arc_swap::Cache` can follow it.
struct GenerationPointer(Arc<Published>);

impl Deref for GenerationPointer {
    type Target = ArcSwap<Generation>;

    fn deref(&self) -> &Self::Target {
        self.0.generation()
    }
}

pub(crate) struct Worker {
    pub id: usize,
    pub settings: Arc<Settings>,
    pub pool: Pool,
    /// HTTP/2 connections to backends that speak it, one per endpoint (and TLS settings).
    pub h2_pool: H2Pool,
    /// Client-side read buffers (room for the largest head).
    pub client_buffers: BufferPool,
    /// Blocks for the request path's state of busy connections (`http1::exchanges`).
    pub exchange_pages: PagePool,
    /// Upstream read buffers.
    pub upstream_buffers: BufferPool,
    /// Head-writing buffers.
    pub out_buffers: BufferPool,
    pub drain: DrainSignal,
    /// Fired when the daemon begins to shut down, before the drain: the listeners still accept,
    /// but HTTP/1.1 answers say `Connection: close`, so busy keep-alive clients move to another
    /// replica during the shutdown delay instead of all being closed at once when it ends.
    pub closing: DrainSignal,
    /// The `Date` of answers the worker writes itself.
    pub clock: Clock,
    /// Waits that may end a tick late (quiet connections' keep-alive, every timeout of a
    /// connection's reads and writes through a `Watchdog`), at a few bytes each.
    pub coarse_timer: Rc<CoarseTimer>,
    /// The worker runs on io_uring: a read in flight holds its buffer in the kernel (on epoll a
    /// pending read has read nothing yet).
    pub io_uring: bool,
    stats: Arc<WorkerStats>,
    cache: RefCell<Cache<GenerationPointer, Arc<Generation>>>,
    /// The generation in use, wrapped so that requests share it by a worker-local count instead of
    /// the cross-core atomic count of the `Arc` (which every worker would bounce between caches).
    #[allow(clippy::redundant_allocation)]
    current: RefCell<Rc<Arc<Generation>>>,
    cursors: RefCell<Vec<u32>>,
    pub open_connections: Cell<usize>,
    /// Open connections at the last buffer trim (see [`Worker::trim_buffers`]).
    open_at_last_trim: Cell<usize>,
    observer: Observer,
    /// The access log's ring, when logging is on.
    log: Option<RefCell<WorkerLog>>,
    /// Sampling and the span ring, when tracing is on.
    tracer: Option<RefCell<WorkerTracer>>,
    /// This worker's random numbers (canary splits, mirror shares): xorshift64*, no lock, no
    /// syscall, nothing shared with other workers.
    random: Cell<u64>,
    pub mirrors: Rc<Mirrors>,
    /// Scratch memory for path rewrites (the regex engine's cache, the new path).
    pub rewrite: RefCell<ramjet_shared::RewriteScratch>,
    /// Routes' per-client limits, counted on this worker.
    pub limiter: ClientLimiter,
    /// Basic-auth credentials that passed on this worker.
    pub auth: AuthCache,
    /// Endpoints' response times, for routes balanced by EWMA.
    pub ewma: Ewma,
}

impl Worker {
    pub fn new(
        id: usize,
        settings: Arc<Settings>,
        published: Arc<Published>,
        stats: Arc<WorkerStats>,
        log: Option<WorkerLog>,
        tracer: Option<WorkerTracer>,
    ) -> Self {
        let cache = Cache::new(GenerationPointer(published.clone()));
        let current = Rc::new(published.generation().load_full());
        let ids = RequestIds::new(id);
        let sampler = Sampler::new(u64::from_le_bytes(ids.next()[..8].try_into().unwrap_or_default()));
        // A seed from the process's random hash keys, different per worker.
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_usize(id);
            h.finish() | 1
        };
        Worker {
            observer: Observer {
                ids,
                routes: RefCell::new(RouteIndex::new(settings.metrics_status_codes)),
                sampler,
                stats: stats.clone(),
            },
            log: log.map(RefCell::new),
            tracer: tracer.map(RefCell::new),
            random: Cell::new(seed),
            mirrors: Rc::new(Mirrors::new(stats.clone(), id)),
            rewrite: RefCell::default(),
            limiter: ClientLimiter::default(),
            auth: AuthCache::default(),
            ewma: Ewma::default(),
            id,
            pool: Pool::new(settings.upstream_idle_timeout, settings.upstream_keepalive_connections),
            h2_pool: H2Pool::default(),
            client_buffers: BufferPool::new(CLIENT_BUFFER, 1024),
            exchange_pages: PagePool::new(),
            upstream_buffers: BufferPool::new(UPSTREAM_BUFFER, 1024),
            out_buffers: BufferPool::new(4096, 1024),
            drain: DrainSignal::default(),
            closing: DrainSignal::default(),
            clock: Clock::default(),
            coarse_timer: Rc::default(),
            io_uring: true,
            settings,
            stats,
            cache: RefCell::new(cache),
            current: RefCell::new(current),
            cursors: RefCell::new(Vec::new()),
            open_connections: Cell::new(0),
            open_at_last_trim: Cell::new(0),
        }
    }

    #[inline]
    pub fn counters(&self) -> &WorkerCounters {
        self.stats.worker(self.id)
    }

    /// `fut` for at most `after` (up to a [`crate::base::coarse_timer::TICK`] more), on the
    /// worker's timer (monoio's is not built). A connection's own waits use its `Watchdog`.
    pub async fn timeout<F: std::future::Future>(
        &self,
        after: std::time::Duration,
        fut: F,
    ) -> Result<F::Output, crate::base::watchdog::Elapsed> {
        crate::base::watchdog::timeout(&self.coarse_timer, after, fut).await
    }

    /// How this worker opens a connection to an HTTP/2 backend, within `timeout`.
    pub fn dial(&self, timeout: std::time::Duration) -> crate::upstream::h2::Dial<'_> {
        crate::upstream::h2::Dial { timeout, timer: &self.coarse_timer, limits: &self.settings.http2 }
    }

    /// Completes after `after` (up to a tick more), on the worker's timer.
    pub fn sleep(&self, after: std::time::Duration) -> CoarseSleep<'_> {
        self.coarse_timer.sleep(after)
    }

    /// The generation for a new request: one pointer comparison when nothing changed.
    #[inline]
    #[allow(clippy::redundant_allocation)]
    pub fn generation(&self) -> Rc<Arc<Generation>> {
        let mut cache = self.cache.borrow_mut();
        let latest = cache.load();
        let mut current = self.current.borrow_mut();
        if !Arc::ptr_eq(&current, latest) {
            *current = Rc::new(latest.clone());
        }
        current.clone()
    }

    /// Round robin over a backend's endpoints; each worker starts at its own offset.
    #[inline]
    pub fn next_endpoint(&self, slot: u32, len: usize) -> usize {
        let mut cursors = self.cursors.borrow_mut();
        let slot = slot as usize;
        if cursors.len() <= slot {
            let id = self.id as u32;
            cursors.resize(slot + 1, id);
        }
        let c = cursors[slot];
        cursors[slot] = c.wrapping_add(1);
        c as usize % len
    }

    /// A uniform random `u32` from this worker's own generator (xorshift64*).
    #[inline]
    pub fn random(&self) -> u32 {
        let mut x = self.random.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.random.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }

    /// A request failed: count it, log it once (at debug: never a per-request line by default), and
    /// say what the client is told, as [`rescue`] decides. Every protocol's failures end here.
    pub fn failed(&self, failure: &Failure) -> Rescue {
        if let Some(kind) = failure.error.upstream_kind() {
            self.counters().upstream_error(kind);
        }
        let answer = rescue(failure);
        tracing::debug!(
            target: "ramjet::request",
            worker = self.id,
            status = answer.status,
            side = ?failure.error.side(),
            upstream = ?failure.upstream,
            io = ?failure.io,
            error = %failure.error,
            "request failed"
        );
        answer
    }

    /// The request's id: the client's when valid, else a new one; with tracing on, whether the
    /// request is traced (its `traceparent`, if any, and the sampler decide).
    #[inline]
    pub fn request_id<'a>(&self, client: Option<&[u8]>, traceparent: impl FnOnce() -> Option<&'a [u8]>) -> RequestId {
        let mut id = RequestId::new(client, &self.observer.ids);
        if let Some(tracer) = &self.tracer {
            id.trace = tracer.borrow_mut().decide(traceparent(), self.observer.sampler.next());
        }
        id
    }

    /// The span of a traced request, begun with its request fields; `None` when it is not traced.
    #[inline]
    pub fn span_begin(&self, id: &RequestId, fields: &RequestFields<'_>) -> Option<Box<SpanRecord>> {
        match id.trace {
            Trace::Sampled { .. } => Some(Self::new_span(id, fields)),
            _ => None,
        }
    }

    #[cold]
    fn new_span(id: &RequestId, fields: &RequestFields<'_>) -> Box<SpanRecord> {
        let Trace::Sampled { span, parent, .. } = id.trace else { unreachable!("a sampled request's id") };
        let mut record = Box::new(SpanRecord {
            trace_id: span.trace_id,
            span_id: span.span_id,
            parent,
            start_unix_nanos: trace::unix_nanos(),
            protocol_version: match fields.protocol {
                "HTTP/1.0" => "1.0",
                "HTTP/2.0" => "2",
                _ => "1.1",
            },
            tls: fields.tls.is_some(),
            client: Some(fields.client),
            generation: fields.generation,
            ..SpanRecord::default()
        });
        record.keep_request_text([fields.method, fields.host, fields.path, fields.user_agent, fields.request_id]);
        record
    }

    /// Starts the access-log record of a request in `record` (taken from the head-buffer pool when
    /// empty); `false` when logging is off or the path is skipped (nothing was written).
    pub fn log_begin(&self, fields: &RequestFields<'_>, record: &mut Vec<u8>) -> bool {
        let Some(log) = &self.log else { return false };
        let log = log.borrow();
        if !log.wants(fields.path) {
            return false;
        }
        if record.capacity() == 0 {
            *record = self.out_buffers.take();
        }
        match &log.settings.template {
            Some(template) => crate::observe::log_template::begin(template, fields, record),
            None => access_log::begin(log.settings.format, fields, record),
        }
        true
    }

    /// Returns a record buffer to the pool (a connection or stream is done with it).
    pub fn give_record(&self, record: Vec<u8>) {
        if record.capacity() > 0 {
            self.out_buffers.give(record);
        }
    }

    /// A request ended: counted by status class, added to its (route, backend) series, and its
    /// access-log record (begun in `record` by [`Worker::log_begin`]) completed and handed to the
    /// writer — or dropped and counted when the ring is full.
    pub fn request_done(&self, done: &Done<'_>, record: Option<&mut Vec<u8>>, span: Option<Box<SpanRecord>>) {
        if !done.counted {
            self.counters().request(done.status);
        }
        let duration = done.start.elapsed();
        if let Some(served) = done.served {
            let current = Arc::ptr_eq(&self.current.borrow(), done.generation);
            let sample = requests::sample(done, duration, self.clock.unix_secs());
            let mut routes = self.observer.routes.borrow_mut();
            let stats = &self.observer.stats;
            let series = routes.series(served, done.generation, current, |list| stats.publish_series(self.id, list));
            series.record(&sample);
            if let Some(span) = &span {
                let unix_ms = (span.start_unix_nanos + duration.as_nanos() as u64) / 1_000_000;
                series.traced(&Exemplar { trace_id: span.trace_id, duration_us: sample.duration_us, unix_ms });
            }
        }
        if let Some(span) = span {
            self.span_done(span, done, duration);
        }
        let (Some(log), Some(record)) = (&self.log, record) else { return };
        if done.served.and_then(|s| s.route.policy.as_deref()).is_some_and(|p| p.limits.unlogged) {
            return;
        }
        // `enable-access-log-for-default-backend: "false"`: what no rule matched is not logged.
        let table = &done.generation.table;
        if table.unlogged_unmatched() {
            let default = table.default_route();
            let unmatched = match done.served {
                Some(s) => default.is_some_and(|d| Arc::ptr_eq(s.route, d)),
                None => done.status == 404,
            };
            if unmatched {
                return;
            }
        }
        let mut log = log.borrow_mut();
        if !log.keeps(done.status, self.observer.sampler.next()) {
            return;
        }
        let t = done.tally;
        let fields = ResponseFields {
            status: done.status,
            bytes_in: t.bytes_in,
            bytes_out: t.bytes_out,
            duration,
            upstream: t.upstream,
            upstream_connect: t.upstream_connect,
            upstream_header: t.upstream_header,
            upstream_status: t.upstream_status,
            route: done.served.map(|s| &*s.route.source),
            backend: done.served.map(|s| &*s.backend.name),
            origin: done.served.map(|s| s.route.origin),
        };
        match &log.settings.template {
            Some(template) => {
                // The line is written from what the record kept into another pooled buffer.
                let kept = std::mem::replace(record, self.out_buffers.take());
                crate::observe::log_template::end(template, &fields, &kept, record);
                self.out_buffers.give(kept);
            }
            None => access_log::end(log.settings.format, &fields, record),
        }
        if !log.push(record) {
            self.counters().access_log_dropped();
        }
    }

    /// Completes a traced request's span and hands it to the exporter (or counts it dropped).
    #[cold]
    fn span_done(&self, mut span: Box<SpanRecord>, done: &Done<'_>, duration: Duration) {
        let Some(tracer) = &self.tracer else { return };
        let t = done.tally;
        span.end_unix_nanos = span.start_unix_nanos + duration.as_nanos() as u64;
        span.status = done.status;
        span.route = done.served.map(|s| s.route.source.clone());
        span.backend = done.served.map(|s| s.backend.name.clone());
        span.upstream = t.upstream;
        span.upstream_status = t.upstream_status;
        span.upstream_connect = t.upstream_connect;
        span.upstream_header = t.upstream_header;
        span.bytes_in = t.bytes_in;
        span.bytes_out = t.bytes_out;
        if !tracer.borrow_mut().push(span) {
            self.counters().span_dropped();
        }
    }

    /// Drops the series of routes gone from the serving table for longer than the grace period.
    pub fn prune_series(&self) {
        let generation = self.generation();
        let mut routes = self.observer.routes.borrow_mut();
        if routes.prune(&generation.table, self.clock.unix_secs(), self.settings.metrics_grace) {
            self.observer.stats.publish_series(self.id, routes.list());
        }
    }

    /// Frees pooled buffers that no connection needed during the last period: after a burst of
    /// connections (or thousands going idle), memory returns to what the traffic needs.
    ///
    /// Freed memory inside the allocator's arenas is not given back to the system by itself (the
    /// resident size after a burst stayed at its peak), so when a period freed many buffers or
    /// closed many connections, the worker asks glibc to return free pages (`malloc_trim`). That
    /// walks the arenas, so it runs only then, never per request.
    pub fn trim_buffers(&self) {
        // Unmapped at once: these blocks never were in the allocator's heap.
        self.exchange_pages.trim();
        let freed = self.client_buffers.trim() + self.upstream_buffers.trim() + self.out_buffers.trim();
        let open = self.open_connections.get();
        let closed = self.open_at_last_trim.replace(open).saturating_sub(open);
        if freed >= TRIM_AFTER_FREEING || closed >= TRIM_AFTER_FREEING {
            release_free_pages();
        }
    }

    pub fn connection_opened(&self) {
        self.open_connections.set(self.open_connections.get() + 1);
        self.counters().connection_opened();
    }

    pub fn connection_closed(&self) {
        self.open_connections.set(self.open_connections.get() - 1);
        self.counters().connection_closed();
    }
}

/// Buffers freed, or connections closed, in one period that make it worth returning free pages.
const TRIM_AFTER_FREEING: usize = 128;

/// Returns the allocator's free pages to the system (glibc; elsewhere nothing to do).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn release_free_pages() {
    // SAFETY: malloc_trim only releases memory the allocator holds free; no pointer is involved.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_pages() {}
