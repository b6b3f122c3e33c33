//! HTTP/1.x towards clients: one [`ClientConn`] per connection (`conn`), one exchange per request.
//!
//! ```text
//! wait for bytes ─▶ parse head in place ─▶ load generation ─▶ route ─┬─ reply (404, 308, direct)
//!      ▲                                                            └─ proxy: buffer a small body ─▶
//!      │                                                                 endpoint ─▶ pooled connect ─▶
//!      │                                                                 head + body ─▶ response head
//!      └──────────── keep-alive ◀── account ◀── stream body back ◀──────────┘   (101: tunnel both ways)
//! ```
//!
//! Every failure on the way becomes a [`Failure`] and goes through [`ClientConn::fail`], which counts
//! it, logs one line, and answers as [`rescue`] says.

mod answer;
mod conn;
mod h2_backend;
mod idle;
mod proxy;
mod respond;

use std::rc::Rc;
use std::time::Instant;

use monoio::io::{AsyncReadRent, AsyncWriteRent, Split};
use ramjet_shared::{HashInput, RequestView, RouteTable};

use super::http2;
use crate::base::buf::ReadBuf;
use crate::base::watchdog::Watchdog;
use crate::codec::http1::head::{parse_request, text, RequestHead};
use crate::conn::ConnFacts;
use crate::error::ProxyError;
use crate::observe::access_log::{FieldSource, RequestFields};
use crate::observe::requests::{RequestId, Served, Tally};
use crate::pipeline::admit::{admit, Admission, Gate};
use crate::pipeline::answer::LocalAnswer;
use crate::pipeline::external_auth::Asking;
use crate::pipeline::route::{decide, Addressed, Proxy, RouteExtras, Step};
use crate::pipeline::view::Http1View;
use crate::upstream::connect::UpstreamConn;
use crate::worker::Worker;
use answer::render;
use conn::{buffered_body_len, ClientConn, Next, Rendered};

/// What waiting for a request brought.
enum Incoming {
    Head(RequestHead),
    /// The HTTP/2 connection preface, on the first read of a plain-text connection.
    Http2,
    /// Nothing yet, for `idle_release_after`: the rest of the wait (see [`idle`]).
    Quiet(std::time::Duration),
    /// Nothing more (idle timeout, drain, end of stream): close without a word.
    Close,
}

/// Serves one client connection until it closes, fails, or is upgraded (to a tunnel, or to HTTP/2
/// when it opens with the HTTP/2 preface).
///
/// Not an `async fn`: an async fn's arguments are kept in its state beside the locals they are moved
/// into, so the stream was held twice by every waiting connection. The block below owns `conn` once.
pub(crate) fn serve<'w, S>(
    worker: &'w Rc<Worker>,
    stream: S,
    facts: &'w Rc<ConnFacts>,
) -> impl std::future::Future<Output = ()> + 'w
where
    S: idle::IdleWait + Split + http2::IntoH2Io + 'static,
{
    let mut conn = ClientConn {
        worker,
        watch: Watchdog::new(&worker.coarse_timer),
        stream,
        buf: ReadBuf::new(worker.client_buffers.take()),
        out: worker.out_buffers.take(),
        facts,
        body_pending: false,
        first: true,
        is_head: false,
        start: Instant::now(),
        tally: Tally::default(),
        status: 0,
        counted: false,
        request_id: None,
        span: None,
        record: Vec::new(),
        logging: false,
        canceller: monoio::io::Canceller::new(),
    };
    async move {
        let tunnel = loop {
            // The exchanges' state (6 KB) is boxed in pages of its own (`page_box`) and lives only
            // while the connection is busy: a connection quiet for `idle_release_after` holds this
            // function's state alone (see `idle`). A busy keep-alive connection keeps its box from one
            // request to the next.
            // The quiet wait comes after this statement, so it does not hold the `Next` (160 bytes).
            let left = match worker.exchange_pages.pin(exchanges(&mut conn)).await {
                Next::KeepAlive => continue,
                Next::Quiet(left) => left,
                Next::Close => break None,
                Next::Tunnel(up) => break Some(up),
                Next::Http2 => {
                    worker.out_buffers.give(conn.out);
                    worker.give_record(conn.record);
                    // Boxed, as the tunnel below: what a connection carries while it waits is only the
                    // HTTP/1.1 state (memory of idle connections), not HTTP/2's.
                    return Box::pin(http2::serve(worker.clone(), conn.stream, Some(conn.buf), facts.clone())).await;
                }
            };
            let woke = monoio::select! {
                biased;
                r = idle::wait_quietly(&mut conn, left) => r,
                _ = worker.drain.wait() => Ok(None),
            };
            match woke {
                Ok(Some(n)) if n > 0 => {}
                _ => break None,
            }
        };
        worker.out_buffers.give(std::mem::take(&mut conn.out));
        worker.give_record(std::mem::take(&mut conn.record));
        if let Some(up) = tunnel {
            Box::pin(relay(conn.stream, conn.buf, *up)).await;
        } else {
            conn.stream.finish().await;
            worker.client_buffers.give(conn.buf.into_inner());
        }
    }
}

impl<S: idle::IdleWait> ClientConn<'_, S> {
    /// Waits for the next request and parses its head (the upstream head is left in `out`).
    async fn read_head(&mut self) -> Result<Incoming, ProxyError> {
        let settings = &self.worker.settings;
        if self.buf.is_empty() {
            let wait = if self.first { settings.header_timeout } else { settings.keepalive_timeout };
            let worker = self.worker;
            // Biased: the read first, without drawing a random number to pick the order.
            let read = monoio::select! {
                biased;
                r = idle::next_bytes(self, wait) => r,
                _ = worker.drain.wait() => return Ok(Incoming::Close),
            };
            match read {
                Ok(idle::Arrival::Bytes(n)) if n > 0 => {}
                Ok(idle::Arrival::Quiet { left }) => return Ok(Incoming::Quiet(left)),
                _ => return Ok(Incoming::Close),
            }
        }
        // Read more while the head is incomplete, within the header timeout.
        let mut deadline = None;
        // h2c by prior knowledge: one comparison, on the first read of a plain-text connection.
        let mut preface = self.first && !self.facts.tls && self.buf.data()[0] == http2::PREFACE[0];
        loop {
            if preface {
                match http2::preface(self.buf.data()) {
                    Some(true) => return Ok(Incoming::Http2),
                    Some(false) => preface = false,
                    None => {}
                }
            }
            match parse_request(self.buf.data(), self.facts, &mut self.out) {
                Ok(Some(head)) => {
                    self.body_pending = head.body.has_body();
                    return Ok(Incoming::Head(head));
                }
                Ok(None) if self.buf.room() == 0 => return Err(ProxyError::HeadTooLarge),
                // A partial preface parses as a bad HTTP/1 head: wait for the rest of it.
                Ok(None) | Err(_) if preface => {}
                Ok(None) => {}
                Err(e) => return Err(e),
            }
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + settings.header_timeout);
            let left = deadline.saturating_duration_since(Instant::now());
            match self.watch.bound(left, self.buf.fill(&mut self.stream)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return Ok(Incoming::Close),
                Err(_) => return Err(ProxyError::HeaderTimeout),
            }
        }
    }
}

/// Requests one after another, while the connection is busy: until it closes, is upgraded, or goes
/// quiet.
async fn exchanges<S>(conn: &mut ClientConn<'_, S>) -> Next
where
    S: idle::IdleWait,
{
    loop {
        match exchange(conn).await {
            Next::KeepAlive => conn.first = false,
            other => return other,
        }
    }
}

/// One request and its response, accounted once it has ended.
async fn exchange<S>(conn: &mut ClientConn<'_, S>) -> Next
where
    S: idle::IdleWait,
{
    let incoming = conn.read_head().await;
    if let Ok(Incoming::Quiet(left)) = incoming {
        return Next::Quiet(left);
    }
    conn.start = Instant::now();
    conn.tally = Tally::default();
    conn.status = 0;
    conn.counted = false;
    conn.request_id = None;
    conn.logging = false;
    conn.is_head = false;
    let worker = conn.worker;
    // One generation for the whole life of this request.
    let generation = worker.generation();
    let head = match incoming {
        Ok(Incoming::Head(head)) => head,
        Ok(Incoming::Http2) => return Next::Http2,
        Ok(Incoming::Close | Incoming::Quiet(_)) => return Next::Close,
        Err(e) => {
            // A head that could not be parsed is still a request the client sent: logged without
            // its fields.
            let fields = RequestFields {
                client: conn.facts.peer,
                method: b"",
                host: b"",
                path: b"",
                protocol: "HTTP/1.1",
                user_agent: b"",
                referer: b"",
                request_id: b"",
                trace_id: None,
                generation: generation.number,
                tls: conn.facts.tls_session.as_ref(),
                head: FieldSource::None,
            };
            conn.logging = worker.log_begin(&fields, &mut conn.record);
            let next = conn.fail(e.into(), false).await;
            conn.done(None, &generation);
            return next;
        }
    };
    conn.tally.bytes_in = head.head_len as u64;
    conn.is_head = head.is_head;
    let data = conn.buf.data();
    let id =
        worker.request_id(head.request_id.clone().map(|r| &data[r]), || head.traceparent.clone().map(|r| &data[r]));
    id.insert_before_end(&mut conn.out);
    let fields = RequestFields {
        client: head.client.unwrap_or(conn.facts.peer),
        method: &data[head.method.clone()],
        host: &data[head.host.clone()],
        path: &data[head.target.clone()],
        protocol: if head.minor == 0 { "HTTP/1.0" } else { "HTTP/1.1" },
        user_agent: &data[head.user_agent.clone()],
        referer: &data[head.referer.clone()],
        request_id: id.as_bytes(),
        trace_id: id.trace.trace_id(),
        generation: generation.number,
        tls: conn.facts.tls_session.as_ref(),
        head: FieldSource::Http1(&data[..head.head_len]),
    };
    conn.logging = worker.log_begin(&fields, &mut conn.record);
    conn.span = worker.span_begin(&id, &fields);
    conn.request_id = Some(id);
    let (next, served) = answer(conn, &head, &generation.table).await;
    conn.done(served, &generation);
    next
}

/// Routes the request and answers it: an answer made here (a redirect, a configured answer, an
/// error), or the backend's once admitted. The phases are the pipeline's (`crate::pipeline`); this
/// function only reads them from the HTTP/1.1 head and writes their answers as HTTP/1.1.
async fn answer<'t, S>(
    conn: &mut ClientConn<'_, S>,
    head: &RequestHead,
    table: &'t RouteTable,
) -> (Next, Option<Served<'t>>)
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let worker = conn.worker;
    let keep_alive = head.keep_alive && !worker.closing.is_fired();
    let data = conn.buf.data();
    let host = text(&data[head.host.clone()]).unwrap_or("");
    let target = text(&data[head.target.clone()]).unwrap_or("/");
    let target = if target.starts_with('/') { target } else { "/" };
    let mut host_buf = [0u8; 256];
    // Over TLS to ramjet, or to a trusted proxy that says so.
    let tls = conn.facts.tls || head.forwarded_https;
    let view = Http1View { head: &data[..head.head_len], target: target.as_bytes(), tls };
    let peer = head.client.unwrap_or(conn.facts.peer).ip();
    let forwarded_host = head.forwarded_host.clone().and_then(|h| text(&data[h]));
    let to = Addressed { host, target, tls, port: conn.facts.local_port, forwarded_host };
    let decision = decide(table, host, target, tls, peer, &mut host_buf, &view, &mut || worker.random());
    let proxy = match decision.step(&to, &worker.rewrite) {
        Step::Proxy(proxy) => proxy,
        Step::Answer { answer, served } => {
            let local = render_local(&answer, head, data, keep_alive, conn.request_id.as_ref(), worker, &mut conn.out);
            return (conn.finish_local(head, local).await, served);
        }
        Step::Fail { error, served } => return (conn.fail_request(head, error, keep_alive).await, served),
    };
    let Proxy { served, endpoints, rule, sticky, edits } = proxy;
    let input = || HashInput { target: target.as_bytes(), host: &data[head.host.clone()], peer, tls };
    let mut extras = RouteExtras::new(served.route, rule, sticky);
    extras.https = tls;
    if conn.facts.own_certificate {
        extras.hsts = table.hsts();
    }
    extras.choose_endpoint(&view, input, (&served, endpoints), || worker.random());
    let mut held = Admission::default();
    let gate = if extras.needs_admission() {
        let asking = Asking {
            method: &data[head.method.clone()],
            target: target.as_bytes(),
            host: &data[head.host.clone()],
            peer,
            tls,
            request_id: conn.request_id.as_ref().map_or(&[][..], |id| id.as_bytes()),
        };
        admit(worker, table, (&asking, conn.facts), &view, &extras, &mut held).await
    } else {
        Gate::Open
    };
    match gate {
        Gate::Open => {}
        Gate::Answer(answer) => {
            let local = render_local(&answer, head, data, keep_alive, conn.request_id.as_ref(), worker, &mut conn.out);
            let next = conn.finish_local(head, local).await;
            held.release(worker);
            return (next, Some(served));
        }
        Gate::Fail(error) => {
            let next = conn.fail_request(head, error, keep_alive).await;
            held.release(worker);
            return (next, Some(served));
        }
    }
    held.grant(&mut extras);
    if let Some(policy) = extras.filters {
        crate::policy::filters::apply(&mut conn.out, policy, target.as_bytes(), &mut worker.rewrite.borrow_mut());
    }
    extras.set_auth_fields(&mut conn.out);
    if edits.changes_request() {
        let mut edited = worker.out_buffers.take();
        let scratch = &mut worker.rewrite.borrow_mut();
        crate::policy::edit::edit_head(&conn.out, edits.request, edits.rewrite, scratch, &mut edited);
        worker.out_buffers.give(std::mem::replace(&mut conn.out, edited));
    }
    extras.response = edits.response;
    // Error pages: the error backend's request is made now, while the client's head is here.
    let mut error_head = Vec::new();
    if let Some(pages) = extras.error_pages() {
        error_head = worker.out_buffers.take();
        let accept = view.header("accept");
        crate::policy::error_pages::request_head(&conn.out, target.as_bytes(), accept, pages, &mut error_head);
    }
    if error_head.capacity() > 0 {
        extras.error_head = Some(&error_head[..]);
    }
    conn.buf.consume(head.head_len);
    let next = match proxy::forward(conn, head, served.backend, endpoints, keep_alive, &mut extras).await {
        Ok((status, next)) => {
            conn.status = status;
            next
        }
        Err(failure) => conn.fail(failure, keep_alive).await,
    };
    if error_head.capacity() > 0 {
        worker.out_buffers.give(error_head);
    }
    held.release(worker);
    (next, Some(served))
}

/// Renders `answer` to the request `head` (whose bytes start `data`) into `out`. The connection
/// stays open only when the whole body is buffered: it is consumed with the head.
fn render_local(
    answer: &LocalAnswer<'_>,
    head: &RequestHead,
    data: &[u8],
    keep_alive: bool,
    id: Option<&RequestId>,
    worker: &Worker,
    out: &mut Vec<u8>,
) -> Rendered {
    let body = buffered_body_len(head, &data[head.head_len..]);
    let keep = keep_alive && body.is_some();
    let id = id.map_or(&[][..], |id| id.as_bytes());
    render(answer, head.is_head, !keep, &worker.clock.date(), id, out);
    Rendered { status: answer.status(), keep, consumed: head.head_len + body.unwrap_or(0) }
}

/// After a `101 Switching Protocols`: bytes flow both ways until either side closes. A new
/// generation never touches this: the tunnel holds no reference to any table.
async fn relay<S>(client: S, mut cbuf: ReadBuf, mut up: UpstreamConn)
where
    S: AsyncReadRent + AsyncWriteRent + Split + 'static,
{
    let mut client = client;
    let pending_up = cbuf.len();
    if cbuf.forward(pending_up, &mut up.stream).await.is_err() {
        return;
    }
    let pending_down = up.buf.len();
    if up.buf.forward(pending_down, &mut client).await.is_err() {
        return;
    }
    crate::base::buf::splice(client, up.stream, None).await;
}
