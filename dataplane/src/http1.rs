//! HTTP/1.x towards clients: one [`ClientConn`] per connection, one exchange per request.
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

pub(crate) mod body;
mod chunked;
mod h2_backend;
pub(crate) mod head;
mod idle;
mod proxy;
mod reply;

pub use chunked::{ChunkError, ChunkedDecoder};
pub use head::{parse_request, parse_response, ConnFacts, Framing, RequestHead, ResponsePlan, TlsSession, MAX_HEAD};

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt, Split};
use ramjet_shared::{Generation, HashInput, RequestView, RouteTable};

use crate::access_log::RequestFields;
use crate::buf::{write_vec, ReadBuf};
use crate::dispatch::{decide, Decision, Http1View, RouteExtras};
use crate::error::{Failure, ProxyError};
use crate::external_auth::{Asking, Passed, Refusal, Verdict};
use crate::http2;
use crate::observe::{Done, RequestId, Served, Tally};
use crate::upstream::UpstreamConn;
use crate::worker::Worker;
use body::Body;
use reply::{render, Reply};

/// Client read buffer: the largest accepted head plus room for a small body or pipelined requests.
pub const CLIENT_BUFFER: usize = MAX_HEAD + 4096;
/// Upstream read buffer.
pub const UPSTREAM_BUFFER: usize = 32 * 1024;
/// The status logged for a request whose client went away before any answer (nginx's 499).
pub const CLIENT_CLOSED: u16 = 499;

/// What happens to the client connection after an exchange.
pub(crate) enum Next {
    KeepAlive,
    Close,
    /// The upstream agreed to switch protocols: relay bytes both ways.
    Tunnel(Box<UpstreamConn>),
    /// The connection opened with the HTTP/2 preface (h2c by prior knowledge).
    Http2,
    /// Quiet between requests: wait the rest (`left`) of the wait outside the exchange's state.
    Quiet(std::time::Duration),
}

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

/// A client connection: its stream, the bytes read and not yet consumed, the buffer heads are
/// written into, and the facts every upstream head carries. Every read and write on it has a
/// deadline from the worker's settings.
pub(crate) struct ClientConn<'w, S> {
    pub worker: &'w Worker,
    pub stream: S,
    pub buf: ReadBuf,
    pub out: Vec<u8>,
    pub facts: &'w ConnFacts,
    /// The current request has body bytes that have not been read yet: after an early answer the
    /// connection cannot carry another request.
    pub body_pending: bool,
    first: bool,
    /// The current request: when its head was complete, what it did, the status sent (0: none
    /// yet), its id.
    start: Instant,
    pub tally: Tally,
    pub status: u16,
    /// The status is in the counters already.
    counted: bool,
    request_id: Option<RequestId>,
    /// The access-log record being written for the current request (begun: `logging`).
    record: Vec<u8>,
    logging: bool,
    /// Cancels a quiet connection's read so its buffers can go back to the pools (see `idle`).
    canceller: monoio::io::Canceller,
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
        stream,
        buf: ReadBuf::new(worker.client_buffers.take()),
        out: worker.out_buffers.take(),
        facts,
        body_pending: false,
        first: true,
        start: Instant::now(),
        tally: Tally::default(),
        status: 0,
        counted: false,
        request_id: None,
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

impl<S: AsyncReadRent + AsyncWriteRent> ClientConn<'_, S> {
    /// While idle: the read, head and record buffers go back to the worker's pools.
    fn release_buffers(&mut self) {
        self.worker.counters().idle_buffers_released();
        self.worker.client_buffers.give(self.buf.take_storage());
        self.worker.out_buffers.give(std::mem::take(&mut self.out));
        self.worker.give_record(std::mem::take(&mut self.record));
    }

    /// Bytes are coming: buffers from the pools again (the record's when a record is begun).
    fn reacquire_buffers(&mut self) {
        self.buf.restore(self.worker.client_buffers.take());
        self.out = self.worker.out_buffers.take();
    }
}

impl<S: idle::IdleWait> ClientConn<'_, S> {
    /// Waits for the next request and parses its head (the upstream head is left in `out`).
    async fn read_head(&mut self) -> Result<Incoming, ProxyError> {
        let settings = &self.worker.settings;
        if self.buf.is_empty() {
            let wait = if self.first { settings.header_timeout } else { settings.keepalive_timeout };
            let worker = self.worker;
            let read = monoio::select! {
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
            let deadline = *deadline.get_or_insert_with(|| monoio::time::Instant::now() + settings.header_timeout);
            match monoio::time::timeout_at(deadline, self.buf.fill(&mut self.stream)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => return Ok(Incoming::Close),
                Err(_) => return Err(ProxyError::HeaderTimeout),
            }
        }
    }
}

impl<S: AsyncReadRent + AsyncWriteRent> ClientConn<'_, S> {
    /// Reads more of the request (its body) within the body timeout.
    async fn fill_body(&mut self) -> Result<(), ProxyError> {
        match monoio::time::timeout(self.worker.settings.client_body_timeout, self.buf.fill(&mut self.stream)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            Ok(_) => Err(ProxyError::ClientGone),
            Err(_) => Err(ProxyError::BodyTimeout),
        }
    }

    /// Writes `out` to the client within the write timeout.
    async fn write_out(&mut self) -> Result<(), ProxyError> {
        match monoio::time::timeout(
            self.worker.settings.client_write_timeout,
            write_vec(&mut self.stream, &mut self.out),
        )
        .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(ProxyError::ClientGone),
            Err(_) => Err(ProxyError::ClientWriteTimeout),
        }
    }

    /// Writes `bytes` to the client within the write timeout.
    async fn write_static(&mut self, bytes: &'static [u8]) -> Result<(), ProxyError> {
        match monoio::time::timeout(self.worker.settings.client_write_timeout, self.stream.write_all(bytes)).await {
            Ok((Ok(_), _)) => Ok(()),
            Ok((Err(_), _)) => Err(ProxyError::ClientGone),
            Err(_) => Err(ProxyError::ClientWriteTimeout),
        }
    }

    /// Consumes the request body (the head is consumed already) if all of it is in the buffer, so
    /// that an early answer can keep the connection.
    fn discard_buffered_body(&mut self, head: &RequestHead) {
        if let Some(n) = buffered_body_len(head, self.buf.data()) {
            self.buf.consume(n);
            self.tally.bytes_in += n as u64;
            self.body_pending = false;
        }
    }

    /// Writes an answer ramjet makes itself; the request head has been consumed.
    async fn reply(&mut self, reply: Reply<'_>, keep_alive: bool) -> Next {
        let keep = keep_alive && !self.body_pending;
        let status = reply.status();
        let id = self.request_id.as_ref().map_or(&[][..], |id| id.as_bytes());
        render(&reply, !keep, &self.worker.clock.date(), id, &mut self.out);
        self.finish(status, keep).await
    }

    /// Writes the answer in `out`; the request is accounted by [`exchange`].
    async fn finish(&mut self, status: u16, keep: bool) -> Next {
        self.status = status;
        // Counted before it is written: a client that has the answer sees it counted.
        self.worker.counters().request(status);
        self.counted = true;
        self.tally.bytes_out += self.out.len() as u64;
        match self.write_out().await {
            Ok(()) if keep => Next::KeepAlive,
            _ => Next::Close,
        }
    }

    /// The one way out of a failed request: counted and logged once, answered as
    /// [`crate::error::rescue`] says.
    async fn fail(&mut self, failure: Failure, keep_alive: bool) -> Next {
        let worker = self.worker;
        let answer = worker.failed(&failure);
        match answer.status {
            Some(status) => {
                let keep = keep_alive && answer.keep && !self.body_pending;
                let date = worker.clock.date();
                let id = self.request_id.as_ref().map_or(&[][..], |id| id.as_bytes());
                render(&Reply::Status(status), !keep, &date, id, &mut self.out);
                self.finish(status, keep).await
            }
            None => {
                if self.status == 0 {
                    self.status = CLIENT_CLOSED;
                }
                Next::Close
            }
        }
    }

    /// Accounts the request that just ended: counters, its (route, backend) series, its record.
    fn done(&mut self, served: Option<Served<'_>>, generation: &Arc<Generation>) {
        if self.status == 0 {
            return;
        }
        let done = Done {
            status: self.status,
            start: self.start,
            served,
            generation,
            tally: &self.tally,
            counted: self.counted,
        };
        let record = if self.logging { Some(&mut self.record) } else { None };
        self.worker.request_done(&done, record);
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
                request_id: b"",
                generation: generation.number,
                tls: conn.facts.tls_session.as_ref(),
            };
            conn.logging = worker.log_begin(&fields, &mut conn.record);
            let next = conn.fail(e.into(), false).await;
            conn.done(None, &generation);
            return next;
        }
    };
    conn.tally.bytes_in = head.head_len as u64;
    let data = conn.buf.data();
    let id = worker.request_id(head.request_id.clone().map(|r| &data[r]));
    id.insert_before_end(&mut conn.out);
    let fields = RequestFields {
        client: conn.facts.peer,
        method: &data[head.method.clone()],
        host: &data[head.host.clone()],
        path: &data[head.target.clone()],
        protocol: if head.minor == 0 { "HTTP/1.0" } else { "HTTP/1.1" },
        user_agent: &data[head.user_agent.clone()],
        request_id: id.as_bytes(),
        generation: generation.number,
        tls: conn.facts.tls_session.as_ref(),
    };
    conn.logging = worker.log_begin(&fields, &mut conn.record);
    conn.request_id = Some(id);
    let (next, served) = answer(conn, &head, &generation.table).await;
    conn.done(served, &generation);
    next
}

/// Renders into `conn.out` an answer built from the request's own bytes (`data`, which it borrows),
/// The connection stays open only when the whole body is buffered (it is consumed with the head).
/// Returns whether to keep the connection, and the body's length.
fn render_from_request(
    reply: &Reply<'_>,
    head: &RequestHead,
    data: &[u8],
    keep_alive: bool,
    id: Option<&RequestId>,
    out: &mut Vec<u8>,
    worker: &Worker,
) -> (bool, usize) {
    let body = buffered_body_len(head, &data[head.head_len..]);
    let keep = keep_alive && body.is_some();
    render(reply, !keep, &worker.clock.date(), id.map_or(&[][..], |id| id.as_bytes()), out);
    (keep, body.unwrap_or(0))
}

/// Routes the request and answers it: redirect, 404, a configured answer, or the backend's.
async fn answer<'t, S>(
    conn: &mut ClientConn<'_, S>,
    head: &RequestHead,
    table: &'t RouteTable,
) -> (Next, Option<Served<'t>>)
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let worker = conn.worker;
    let keep_alive = head.keep_alive && !worker.drain.is_fired();
    let data = conn.buf.data();
    let host = std::str::from_utf8(&data[head.host.clone()]).unwrap_or("");
    let target = std::str::from_utf8(&data[head.target.clone()]).unwrap_or("/");
    let target = if target.starts_with('/') { target } else { "/" };
    let mut host_buf = [0u8; 256];
    let view = Http1View { head: &data[..head.head_len], target: target.as_bytes(), tls: conn.facts.tls };
    let peer = conn.facts.peer.ip();
    match decide(table, host, target, conn.facts.tls, peer, &mut host_buf, &view, &mut || worker.random()) {
        Decision::Redirect(h) => {
            // 308 keeps the method and body; the body is not read (skipped if it is all here).
            let body = buffered_body_len(head, &data[head.head_len..]);
            let keep = keep_alive && body.is_some();
            let reply = Reply::HttpsRedirect { host: h.as_bytes(), target: target.as_bytes() };
            let date = worker.clock.date();
            let id = conn.request_id.as_ref().map_or(&[][..], |id| id.as_bytes());
            render(&reply, !keep, &date, id, &mut conn.out);
            conn.buf.consume(head.head_len + body.unwrap_or(0));
            conn.tally.bytes_in += body.unwrap_or(0) as u64;
            (conn.finish(308, keep).await, None)
        }
        Decision::NoRoute => {
            conn.buf.consume(head.head_len);
            conn.discard_buffered_body(head);
            (conn.fail(ProxyError::NoRoute.into(), keep_alive).await, None)
        }
        Decision::Forbidden(served) => {
            conn.buf.consume(head.head_len);
            conn.discard_buffered_body(head);
            (conn.fail(ProxyError::Forbidden.into(), keep_alive).await, Some(served))
        }
        Decision::RuleRedirect { served, redirect } => {
            // As the HTTPS redirect: the body is not read (skipped if it is all here).
            let body = buffered_body_len(head, &data[head.head_len..]);
            let keep = keep_alive && body.is_some();
            let tls = conn.facts.tls;
            let reply = Reply::Redirect { redirect, tls, host, target, scratch: &worker.rewrite };
            let date = worker.clock.date();
            let id = conn.request_id.as_ref().map_or(&[][..], |id| id.as_bytes());
            render(&reply, !keep, &date, id, &mut conn.out);
            conn.buf.consume(head.head_len + body.unwrap_or(0));
            conn.tally.bytes_in += body.unwrap_or(0) as u64;
            (conn.finish(redirect.status(), keep).await, Some(served))
        }
        Decision::Direct { served, response } => {
            conn.buf.consume(head.head_len);
            conn.discard_buffered_body(head);
            (conn.reply(Reply::Direct { response, is_head: head.is_head }, keep_alive).await, Some(served))
        }
        Decision::HostRedirect { served, host } => {
            let https = conn.facts.tls;
            let reply = Reply::HostRedirect { https, host, port: conn.facts.local_port, target: target.as_bytes() };
            let id = conn.request_id.as_ref();
            let (keep, body) = render_from_request(&reply, head, data, keep_alive, id, &mut conn.out, worker);
            conn.buf.consume(head.head_len + body);
            conn.tally.bytes_in += body as u64;
            (conn.finish(308, keep).await, Some(served))
        }
        Decision::AppRoot { served, path } => {
            let reply = Reply::AppRoot { https: conn.facts.tls, host: &data[head.host.clone()], path };
            let id = conn.request_id.as_ref();
            let (keep, body) = render_from_request(&reply, head, data, keep_alive, id, &mut conn.out, worker);
            conn.buf.consume(head.head_len + body);
            conn.tally.bytes_in += body as u64;
            (conn.finish(302, keep).await, Some(served))
        }
        Decision::Proxy { served, endpoints, rule, sticky, edits } => {
            let tls = conn.facts.tls;
            let input = || HashInput { target: target.as_bytes(), host: &data[head.host.clone()], peer, tls };
            let mut extras = RouteExtras::new(served.route, rule, sticky);
            extras.choose_endpoint(&view, input, endpoints);
            // CORS: the allowed origin is kept in a pooled buffer (the read buffer moves on).
            let mut origin = Vec::new();
            if let Some(cors) = extras.route_cors() {
                if let Some(allow) = cors.allow_origin(view.header("origin")) {
                    if &data[head.method.clone()] == b"OPTIONS" {
                        let date = worker.clock.date();
                        let id = conn.request_id.as_ref().map_or(&[][..], |id| id.as_bytes());
                        let body = buffered_body_len(head, &data[head.head_len..]);
                        let keep = keep_alive && body.is_some();
                        render(&Reply::CorsPreflight { cors, allow }, !keep, &date, id, &mut conn.out);
                        conn.buf.consume(head.head_len + body.unwrap_or(0));
                        conn.tally.bytes_in += body.unwrap_or(0) as u64;
                        return (conn.finish(204, keep).await, Some(served));
                    }
                    origin = worker.out_buffers.take();
                    origin.clear();
                    origin.extend_from_slice(allow);
                }
            }
            if !origin.is_empty() {
                extras.cors = extras.route_cors().map(|c| (c, &origin[..]));
            }
            // The client's place under the route's per-client limits, held until the exchange ends.
            let _under_way = match extras.client_limits().map(|l| worker.limiter.admit(l, conn.facts.peer.ip())) {
                Some(Err(_)) => {
                    if origin.capacity() > 0 {
                        worker.out_buffers.give(origin);
                    }
                    conn.buf.consume(head.head_len);
                    conn.discard_buffered_body(head);
                    return (conn.fail(ProxyError::OverLimit.into(), keep_alive).await, Some(served));
                }
                Some(Ok(held)) => held,
                None => None,
            };
            // nginx's access phase: after the limits (preaccess), before anything is proxied.
            if let Some(auth) = extras.basic_auth() {
                if !worker.auth.admits(auth, view.header("authorization")) {
                    let reply = Reply::Unauthorized { challenge: auth.challenge().as_bytes(), cors: extras.cors };
                    conn.buf.consume(head.head_len);
                    conn.discard_buffered_body(head);
                    let next = conn.reply(reply, keep_alive).await;
                    if origin.capacity() > 0 {
                        worker.out_buffers.give(origin);
                    }
                    return (next, Some(served));
                }
            }
            let mut passed = Passed { fields: Vec::new(), cookies: Vec::new() };
            if let Some(auth) = extras.external_auth() {
                let asking = Asking {
                    method: &data[head.method.clone()],
                    target: target.as_bytes(),
                    host: &data[head.host.clone()],
                    peer,
                    tls: conn.facts.tls,
                    request_id: conn.request_id.as_ref().map_or(&[][..], |id| id.as_bytes()),
                };
                let refused = match crate::external_auth::ask(worker, table, auth, &asking, view.fields()).await {
                    Verdict::Pass(answer) => {
                        passed = answer;
                        None
                    }
                    Verdict::Refuse(refusal) => Some(refusal),
                };
                if let Some(refusal) = refused {
                    conn.buf.consume(head.head_len);
                    conn.discard_buffered_body(head);
                    let next = match &refusal {
                        Refusal::SignIn(location) => conn.reply(Reply::Found { location }, keep_alive).await,
                        Refusal::Deny(401, Some(challenge)) => {
                            conn.reply(Reply::Unauthorized { challenge, cors: extras.cors }, keep_alive).await
                        }
                        Refusal::Deny(status, _) => conn.reply(Reply::Status(*status), keep_alive).await,
                    };
                    if origin.capacity() > 0 {
                        worker.out_buffers.give(origin);
                    }
                    return (next, Some(served));
                }
            }
            if let Some(policy) = extras.filters {
                crate::filters::apply(&mut conn.out, policy, target.as_bytes(), &mut worker.rewrite.borrow_mut());
            }
            extras.auth_fields = &passed.fields;
            extras.auth_cookies = &passed.cookies;
            extras.set_auth_fields(&mut conn.out);
            if edits.changes_request() {
                let mut edited = worker.out_buffers.take();
                let scratch = &mut worker.rewrite.borrow_mut();
                crate::edit::edit_head(&conn.out, edits.request, edits.rewrite, scratch, &mut edited);
                worker.out_buffers.give(std::mem::replace(&mut conn.out, edited));
            }
            extras.response = edits.response;
            // Error pages: the error backend's request is made now, while the client's head is here.
            let mut error_head = Vec::new();
            if let Some(pages) = extras.error_pages() {
                error_head = worker.out_buffers.take();
                let accept = view.header("accept");
                crate::error_pages::request_head(&conn.out, target.as_bytes(), accept, pages, &mut error_head);
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
            if origin.capacity() > 0 {
                worker.out_buffers.give(origin);
            }
            if error_head.capacity() > 0 {
                worker.out_buffers.give(error_head);
            }
            (next, Some(served))
        }
    }
}

/// The length of the request body if `data` (what follows the head) holds all of it.
fn buffered_body_len(head: &RequestHead, data: &[u8]) -> Option<usize> {
    let mut probe = Body::new(head.body);
    let n = probe.advance(data, |_, _| {}).ok()?;
    probe.is_done().then_some(n)
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
    crate::buf::splice(client, up.stream).await;
}
