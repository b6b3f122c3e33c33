//! One HTTP/1.1 exchange with a backend, whoever the client is: pick a connection (pooled or new,
//! with the one retry each case allows), send, read the response head, and give the connection
//! back only when the exchange was complete and unambiguous. HTTP/1.1 and HTTP/2 clients both go
//! through here, so the rules about reuse and retries exist once.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ramjet_shared::{Backend, BackendKind, NextUpstream, UpstreamErrorKind, UpstreamTls};

use crate::base::deadline::Deadline;
use crate::base::watchdog::Watchdog;
use crate::codec::http1::head::ResponseHead;
use crate::error::{Failure, ProxyError};
use crate::observe::requests::Tally;
use crate::upstream::connect::{connect, UpstreamConn};
use crate::upstream::pool::looks_alive;
use crate::worker::Worker;

/// How a failed try moves on to the next endpoint: the route's rule (`None`: ramjet's default,
/// a refused connection moves on once) and whether the request's method may be sent twice.
#[derive(Clone, Copy)]
pub(crate) struct Retry<'r> {
    pub next: Option<&'r NextUpstream>,
    pub idempotent: bool,
}

/// Where and how a request goes upstream: the endpoints and the one to try first, the TLS
/// settings, whether the request can be sent again as it is (`replayable`), how long a connect may
/// take, the exchange's deadline, and how a failed try moves on ([`attempt`] says how each is used).
#[derive(Clone, Copy)]
pub(crate) struct Attempt<'a> {
    pub endpoints: &'a [SocketAddr],
    pub tls: Option<&'a UpstreamTls>,
    pub first: usize,
    pub replayable: bool,
    pub connect_timeout: Duration,
    pub deadline: Deadline,
    pub retry: Retry<'a>,
}

impl<'a> Attempt<'a> {
    /// A complete, replayable request ramjet makes itself (an error page's, an auth sub-request)
    /// to `backend`: the next endpoint in turn, the daemon's upstream timeout, ramjet's default
    /// retry, no deadline. No endpoints: 503.
    pub fn own_request(worker: &Worker, backend: &'a Backend) -> Result<Self, ProxyError> {
        let endpoints = match &backend.kind {
            BackendKind::Endpoints(endpoints) if !endpoints.is_empty() => &endpoints[..],
            _ => return Err(ProxyError::Upstream(UpstreamErrorKind::NoEndpoints)),
        };
        Ok(Attempt {
            endpoints,
            tls: backend.tls.as_deref(),
            first: worker.next_endpoint(backend.slot, endpoints.len()),
            replayable: true,
            connect_timeout: worker.settings.upstream_timeout,
            deadline: Deadline::NONE,
            retry: Retry { next: None, idempotent: true },
        })
    }
}

/// What a try's exchange ends with: a response head, whose status may pass the request on.
pub(crate) trait Answered {
    fn status(&self) -> u16;
}

impl<X> Answered for (ResponseHead, X) {
    fn status(&self) -> u16 {
        self.0.status
    }
}

/// Runs `exchange` (send the request, read the response head) on a connection to
/// `to.endpoints[to.first]` (over TLS with `to.tls`): a pooled one if there is one, else a new one. A pooled
/// connection that turns out to have been closed by the backend is replaced by a fresh one once,
/// when the request is `replayable` (it can be sent again as it is); a request that cannot be
/// replayed is sent on a pooled connection only if it still looks open. Each connect lasts at most
/// `connect_timeout` (the route's, else the daemon's) and what is left of `deadline`; `exchange`
/// bounds its own waits by it too. Past the deadline no other endpoint is tried.
///
/// When a try fails, `retry` says whether the request moves on to the next endpoint (each is tried
/// once at most): by default only a refused connection does, once. With the route's
/// `proxy-next-upstream`, nginx's rules: the conditions it lists, within its tries and time, and
/// after the request was sent only if it is replayable and idempotent (or `non_idempotent` is
/// listed). An answer with a listed status is dropped for the next endpoint's, except on the last
/// try, whose answer is the client's. `tally` learns the endpoint, the connect and response-head
/// times, and failed connects.
pub(crate) async fn attempt<T: Answered>(
    worker: &Worker,
    to: Attempt<'_>,
    tally: &mut Tally,
    mut exchange: impl AsyncFnMut(&mut UpstreamConn) -> Result<T, Failure>,
) -> Result<(UpstreamConn, T), Failure> {
    let Attempt { endpoints, tls, first: mut index, replayable, connect_timeout, deadline, retry } = to;
    let max_tries = match retry.next {
        None => endpoints.len().min(2),
        Some(next) if next.is_off() => 1,
        Some(next) if next.tries == 0 => endpoints.len(),
        Some(next) => endpoints.len().min(next.tries as usize),
    };
    let mut tries = 1;
    let mut fresh_only = false;
    let started = Instant::now();
    // Whether another endpoint may be tried now.
    let within = |tries: usize| {
        tries < max_tries
            && !deadline.passed()
            && retry.next.and_then(|n| n.within).is_none_or(|limit| started.elapsed() < limit)
    };
    // Whether a request that was sent (perhaps in part) may be sent to another endpoint.
    let resendable = replayable && (retry.idempotent || retry.next.is_some_and(|n| n.non_idempotent));
    loop {
        let addr = endpoints[index];
        tally.upstream = Some(addr);
        tally.upstream_connect = Some(Duration::ZERO);
        let pooled =
            if fresh_only { None } else { worker.pool.take(addr, tls.map_or(0, |t| t.id), &worker.upstream_buffers) };
        let mut up = match pooled {
            Some(up) if replayable || looks_alive(&up) => up,
            stale => {
                if let Some(stale) = stale {
                    worker.upstream_buffers.give(stale.buf.into_inner());
                }
                let connecting = Instant::now();
                let timeout = deadline.limit(connect_timeout);
                let connected = connect(addr, timeout, &worker.coarse_timer, worker.upstream_buffers.take(), tls).await;
                tally.upstream_connect = Some(connecting.elapsed());
                match connected {
                    Ok(up) => up,
                    Err(e) => {
                        tally.connect_errors += 1;
                        // Nothing was sent: any method may move on.
                        let passes = match retry.next {
                            None => e.retry_safe(),
                            Some(next) => passes_on(next, e),
                        };
                        if passes && within(tries) {
                            // The error that moved it on is counted here; the last one by its answer.
                            worker.counters().upstream_error(e.upstream_kind().unwrap_or(UpstreamErrorKind::Connect));
                            worker.counters().upstream_retry();
                            tries += 1;
                            index = (index + 1) % endpoints.len();
                            fresh_only = false;
                            continue;
                        }
                        return Err(Failure::from(e).at(addr));
                    }
                }
            }
        };
        match exchange(&mut up).await {
            Ok(t) => {
                let again = retry.next.is_some_and(|n| n.on_status(t.status()));
                if again && resendable && within(tries) {
                    // The answer is dropped, and its connection with it (its body is unread).
                    worker.counters().upstream_retry();
                    worker.upstream_buffers.give(up.buf.into_inner());
                    tries += 1;
                    index = (index + 1) % endpoints.len();
                    fresh_only = false;
                    continue;
                }
                tally.upstream_header = Some(started.elapsed());
                tally.upstream_status = Some(t.status());
                return Ok((up, t));
            }
            Err(e) if e.error == ProxyError::StaleUpstream && replayable && !fresh_only => {
                worker.upstream_buffers.give(up.buf.into_inner());
                if deadline.passed() {
                    return Err(Failure::from(ProxyError::Upstream(UpstreamErrorKind::Timeout)).at(addr));
                }
                // The pooled connection had been closed by the backend: once more, on a new one.
                worker.counters().upstream_retry();
                fresh_only = true;
            }
            Err(e) => {
                worker.upstream_buffers.give(up.buf.into_inner());
                let passes = retry.next.is_some_and(|n| passes_on(n, e.error));
                if passes && resendable && within(tries) {
                    if let Some(kind) = e.error.upstream_kind() {
                        worker.counters().upstream_error(kind);
                    }
                    worker.counters().upstream_retry();
                    tries += 1;
                    index = (index + 1) % endpoints.len();
                    fresh_only = false;
                    continue;
                }
                return Err(e.at(addr));
            }
        }
    }
}

/// Whether `next` passes a request on after this error.
fn passes_on(next: &NextUpstream, error: ProxyError) -> bool {
    match error {
        ProxyError::Upstream(UpstreamErrorKind::Timeout) => next.timeout,
        ProxyError::Upstream(UpstreamErrorKind::Protocol) => next.invalid_header,
        ProxyError::Upstream(UpstreamErrorKind::Connect | UpstreamErrorKind::Reset | UpstreamErrorKind::Tls)
        | ProxyError::StaleUpstream => next.error,
        _ => false,
    }
}

/// Ends an exchange: the connection goes back to the pool only if the response was `complete`,
/// the backend allows reuse, and nothing unexpected follows it; otherwise it is closed.
pub(crate) fn release(worker: &Worker, up: UpstreamConn, complete: bool, head: &ResponseHead) {
    if complete && head.reusable && up.buf.is_empty() {
        worker.pool.put(up, &worker.upstream_buffers);
    } else {
        worker.upstream_buffers.give(up.buf.into_inner());
    }
}

/// The error for a failed write of a request: on a reused connection the backend may have closed
/// it while idle (retry-safe), otherwise the connection was reset.
pub(crate) fn write_failed(up: &UpstreamConn, io: Option<std::io::ErrorKind>) -> Failure {
    let error = if up.reused { ProxyError::StaleUpstream } else { ProxyError::Upstream(UpstreamErrorKind::Reset) };
    Failure { io, ..error.into() }
}

/// Reads the response head, skipping interim 1xx responses other than 101. `parse` sees the
/// unconsumed bytes and returns the head with whatever it made of it (`Ok(None)`: incomplete). Each
/// wait for bytes lasts at most `timeout` and what is left of `deadline`, kept by `watch` (the
/// calling task's). The head stays in the buffer (its length is in the [`ResponseHead`]).
pub(crate) async fn read_response_head<X>(
    up: &mut UpstreamConn,
    watch: &Watchdog<'_>,
    timeout: Duration,
    deadline: Deadline,
    mut parse: impl FnMut(&[u8]) -> Result<Option<(ResponseHead, X)>, ProxyError>,
) -> Result<(ResponseHead, X), Failure> {
    let mut received = false;
    loop {
        if !up.buf.is_empty() {
            received = true;
            if let Some((response, x)) = parse(up.buf.data())? {
                if (100..200).contains(&response.status) && response.status != 101 {
                    up.buf.consume(response.head_len);
                    continue;
                }
                return Ok((response, x));
            }
            if up.buf.room() == 0 {
                return Err(ProxyError::Upstream(UpstreamErrorKind::Protocol).into());
            }
        }
        match watch.bound(deadline.limit(timeout), up.buf.fill(&mut up.stream)).await {
            Ok(Ok(n)) if n > 0 => {}
            Ok(_) if up.reused && !received => return Err(ProxyError::StaleUpstream.into()),
            Ok(Ok(_)) => return Err(ProxyError::Upstream(UpstreamErrorKind::Reset).into()),
            Ok(Err(e)) => {
                return Err(Failure {
                    io: Some(e.kind()),
                    ..Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset))
                })
            }
            Err(_) => return Err(ProxyError::Upstream(UpstreamErrorKind::Timeout).into()),
        }
    }
}
