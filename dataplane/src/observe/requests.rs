//! Seeing requests from the worker: request ids, what a request did ([`Tally`]), and where that is
//! accounted once it has ended — the status counters, the (route, backend) series and the access
//! log record (see [`crate::observe::access_log`]).
//!
//! Everything here is worker-local: ids come from a per-worker generator (no syscall), series are
//! found through a per-worker map keyed by the route's address in the serving generation (one hash
//! probe), and a record goes into the worker's own ring.

use std::cell::{Cell, RefCell};
use std::hash::{BuildHasher, Hash, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ramjet_shared::{Backend, Generation, RequestSample, Route, RouteCounters, RouteTable, WorkerStats};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::observe::trace::{set_traceparent, Trace};

/// Longest `X-Request-ID` kept from a client.
pub const MAX_REQUEST_ID: usize = 128;

/// A client's `X-Request-ID` is kept when it is 1 to 128 visible ASCII characters other than `"`,
/// `\` and `,` (so it can be logged and forwarded as it is); otherwise ramjet makes a new one.
pub(crate) fn valid_request_id(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID
        && id.iter().all(|&b| (0x21..=0x7e).contains(&b) && !matches!(b, b'"' | b'\\' | b','))
}

/// A worker's request-id generator: 32 lower-case hex digits (128 bits, like ingress-nginx's
/// `$req_id`) from a per-worker random key and a counter, mixed by SplitMix64. Unique per worker
/// by the counter, across workers and restarts by the key.
pub(crate) struct RequestIds {
    key: u64,
    counter: Cell<u64>,
}

impl RequestIds {
    pub fn new(worker: usize) -> Self {
        // The standard library's per-process random hash keys: random without a syscall of ours.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        worker.hash(&mut h);
        SystemTime::now().hash(&mut h);
        RequestIds { key: h.finish(), counter: Cell::new(0) }
    }

    #[inline]
    pub fn next(&self) -> [u8; 32] {
        let n = self.counter.get().wrapping_add(1);
        self.counter.set(n);
        let a = splitmix(self.key ^ n);
        let b = splitmix(a ^ self.key.rotate_left(32));
        let mut out = [0u8; 32];
        for (i, word) in [a, b].into_iter().enumerate() {
            out[i * 16..i * 16 + 8].copy_from_slice(&hex8((word >> 32) as u32));
            out[i * 16 + 8..i * 16 + 16].copy_from_slice(&hex8(word as u32));
        }
        out
    }
}

/// `v` in eight lowercase hex digits, most significant first: the nibbles spread one to a byte,
/// then turned to digits all at once (a table lookup per digit cost more than the rest of the id).
#[inline]
fn hex8(v: u32) -> [u8; 8] {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // 1 in each byte whose nibble is 10 or more: those become letters.
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    (x + 0x3030_3030_3030_3030 + letters * (b'a' - b'9' - 1) as u64).to_be_bytes()
}

#[inline]
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A request's id: the client's, or one generated for it; and where it stands in tracing (the
/// upstream gets both).
pub(crate) struct RequestId {
    bytes: [u8; MAX_REQUEST_ID],
    len: u8,
    pub trace: Trace,
}

impl RequestId {
    /// The client's id when it is valid, else a new one from `ids`.
    pub fn new(client: Option<&[u8]>, ids: &RequestIds) -> Self {
        let mut bytes = [0u8; MAX_REQUEST_ID];
        match client.filter(|id| valid_request_id(id)) {
            Some(id) => {
                bytes[..id.len()].copy_from_slice(id);
                RequestId { bytes, len: id.len() as u8, trace: Trace::None }
            }
            None => {
                bytes[..32].copy_from_slice(&ids.next());
                RequestId { bytes, len: 32, trace: Trace::None }
            }
        }
    }

    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Appends `x-request-id: <id>\r\n` before the blank line that ends the head in `out`, and
    /// for a traced request ramjet's `traceparent` in place of the client's.
    pub fn insert_before_end(&self, out: &mut Vec<u8>) {
        debug_assert!(out.ends_with(b"\r\n\r\n"));
        out.truncate(out.len() - 2);
        out.extend_from_slice(b"x-request-id: ");
        out.extend_from_slice(self.as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        if let Trace::Sampled { replaces, .. } = self.trace {
            if let Some(traceparent) = self.trace.traceparent() {
                set_traceparent(out, &traceparent, replaces);
            }
        }
    }
}

/// What a request did on its way, for its metrics and its record.
#[derive(Default, Clone, Copy)]
pub(crate) struct Tally {
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// The endpoint last tried.
    pub upstream: Option<SocketAddr>,
    /// Time to connect to it (zero for a pooled connection).
    pub upstream_connect: Option<Duration>,
    /// From the start of the upstream exchange (connect included) to the response head.
    pub upstream_header: Option<Duration>,
    /// The status the backend answered (the client's may differ: an error page, a retry's).
    pub upstream_status: Option<u16>,
    /// Connects that failed (refused, unreachable, timed out).
    pub connect_errors: u64,
}

/// What served a request: its route, and the backend the route's policy picked for it (a
/// canary's or the primary's), so each backend of a split route has its own series.
#[derive(Clone, Copy)]
pub(crate) struct Served<'a> {
    pub route: &'a Arc<Route>,
    pub backend: &'a Arc<Backend>,
}

/// The (route, backend) series of one worker, found by the route's and the backend's addresses in
/// the generation they were last looked up for, else by name.
#[derive(Default)]
pub(crate) struct RouteIndex {
    /// The generation `by_ptr` holds addresses of (routes of other generations are looked up by
    /// name: an address is only known to be the same route while its generation is alive).
    generation: usize,
    by_ptr: FxHashMap<(usize, usize), u32>,
    /// Hash of (route, backend) to the series with that hash.
    by_name: FxHashMap<u64, Vec<u32>>,
    series: Vec<Arc<RouteCounters>>,
    /// New series count by status code too.
    count_status_codes: bool,
}

fn name_hash(route: &str, backend: &str) -> u64 {
    let mut h = FxHasher::default();
    route.hash(&mut h);
    backend.hash(&mut h);
    h.finish()
}

impl RouteIndex {
    pub fn new(count_status_codes: bool) -> Self {
        RouteIndex { count_status_codes, ..RouteIndex::default() }
    }

    /// The series of `served` (created and published when new). `current`: `generation` is the
    /// worker's serving one, whose route and backend addresses may be remembered.
    pub fn series(
        &mut self,
        served: Served<'_>,
        generation: &Arc<Generation>,
        current: bool,
        publish: impl FnOnce(Vec<Arc<RouteCounters>>),
    ) -> &RouteCounters {
        let gen_ptr = Arc::as_ptr(generation) as usize;
        let ptrs = (Arc::as_ptr(served.route) as usize, Arc::as_ptr(served.backend) as usize);
        if current && gen_ptr != self.generation {
            self.generation = gen_ptr;
            self.by_ptr.clear();
        }
        let remember = gen_ptr == self.generation;
        if remember {
            if let Some(&i) = self.by_ptr.get(&ptrs) {
                return &self.series[i as usize];
            }
        }
        let (name, backend, origin) = (&served.route.source, &served.backend.name, served.route.origin);
        let hash = name_hash(name, backend);
        let found = self.by_name.get(&hash).and_then(|list| {
            list.iter().copied().find(|&i| {
                let s = &self.series[i as usize];
                *s.route == **name && *s.backend == **backend && s.origin == origin
            })
        });
        let i = match found {
            Some(i) => i,
            None => {
                let i = self.series.len() as u32;
                let counters = RouteCounters::new(origin, name.clone(), backend.clone(), self.count_status_codes);
                self.series.push(Arc::new(counters));
                self.by_name.entry(hash).or_default().push(i);
                publish(self.series.clone());
                i
            }
        };
        if remember {
            self.by_ptr.insert(ptrs, i);
        }
        &self.series[i as usize]
    }

    /// Drops the series whose (route, backend) is not in `table` and that have been idle for
    /// `grace`; `true` when any was dropped (the list must be published again).
    pub fn prune(&mut self, table: &RouteTable, now_secs: u64, grace: Duration) -> bool {
        let mut live: FxHashSet<(&str, &str)> = FxHashSet::default();
        let routes = table.hosts().flat_map(|h| h.routes()).map(|(_, r)| r).chain(table.default_route());
        for route in routes {
            live.insert((&route.source, &route.backend.name));
            for backend in route.policy.iter().flat_map(|p| p.backends()) {
                live.insert((&route.source, &backend.name));
            }
        }
        let before = self.series.len();
        self.series.retain(|s| {
            live.contains(&(&*s.route, &*s.backend))
                || now_secs.saturating_sub(s.last_active.load(std::sync::atomic::Ordering::Relaxed)) < grace.as_secs()
        });
        if self.series.len() == before {
            return false;
        }
        self.by_ptr.clear();
        self.by_name.clear();
        for (i, s) in self.series.iter().enumerate() {
            self.by_name.entry(name_hash(&s.route, &s.backend)).or_default().push(i as u32);
        }
        true
    }

    pub fn list(&self) -> Vec<Arc<RouteCounters>> {
        self.series.clone()
    }
}

/// How one request ended, for the worker's `request_done`.
pub(crate) struct Done<'a> {
    pub status: u16,
    pub start: Instant,
    pub served: Option<Served<'a>>,
    pub generation: &'a Arc<Generation>,
    pub tally: &'a Tally,
    /// Already in the status counters (an answer ramjet wrote itself is counted before it is
    /// written, so a client that has it can see it counted).
    pub counted: bool,
}

/// A worker's uniform random numbers in [0, 1) for sampling (xorshift; not for secrets).
pub(crate) struct Sampler(Cell<u64>);

impl Sampler {
    pub fn new(seed: u64) -> Self {
        Sampler(Cell::new(seed | 1))
    }

    #[inline]
    pub fn next(&self) -> f64 {
        let mut x = self.0.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Builds the sample a request adds to its series.
pub(crate) fn sample(done: &Done<'_>, duration: Duration, now_secs: u64) -> RequestSample {
    let t = done.tally;
    RequestSample {
        status: done.status,
        duration_us: duration.as_micros() as u64,
        upstream_us: t.upstream_header.map(|d| d.as_micros() as u64),
        bytes_in: t.bytes_in,
        bytes_out: t.bytes_out,
        connect_errors: t.connect_errors,
        now_secs,
    }
}

/// The worker's observability state.
pub(crate) struct Observer {
    pub ids: RequestIds,
    pub routes: RefCell<RouteIndex>,
    pub sampler: Sampler,
    pub stats: Arc<WorkerStats>,
}

/// The status logged for a request whose client went away before any answer (nginx's 499).
pub const CLIENT_CLOSED: u16 = 499;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_digits_are_the_nibbles_in_order() {
        for v in [0u32, 1, 0x9, 0xa, 0xf, 0x1234_abcd, 0xdead_beef, 0x0f0f_f0f0, u32::MAX] {
            assert_eq!(std::str::from_utf8(&hex8(v)).unwrap(), format!("{v:08x}"));
        }
    }

    #[test]
    fn request_ids_are_hex_and_distinct() {
        let ids = RequestIds::new(0);
        let a = ids.next();
        let b = ids.next();
        assert_ne!(a, b);
        assert!(a.iter().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(RequestIds::new(1).next(), RequestIds::new(1).next(), "keys differ per generator");
    }

    #[test]
    fn client_ids_are_kept_only_when_safe() {
        let ids = RequestIds::new(0);
        assert_eq!(RequestId::new(Some(b"abc-123"), &ids).as_bytes(), b"abc-123");
        for bad in [&b""[..], b"a b", b"a\"b", b"a,b", &[b'x'; 129][..], b"\xff"] {
            assert_eq!(RequestId::new(Some(bad), &ids).as_bytes().len(), 32, "{bad:?}");
        }
        let mut out = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n".to_vec();
        RequestId::new(Some(b"r1"), &ids).insert_before_end(&mut out);
        assert_eq!(out, b"GET / HTTP/1.1\r\nhost: a\r\nx-request-id: r1\r\n\r\n");
    }
}
