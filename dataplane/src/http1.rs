//! HTTP/1.x towards clients: the per-connection loop.
//!
//! ```text
//! wait for bytes ─▶ parse head in place ─▶ load generation ─▶ route ─┬─ direct response
//!      ▲                                                            ├─ 404 / redirect
//!      │                                                            └─ proxy: endpoint ─▶ pooled connect
//!      │                                                                 ─▶ head + body ─▶ response head
//!      └──────────── keep-alive ◀── account ◀── stream body back ◀──────────┘   (101: tunnel both ways)
//! ```

mod chunked;
mod head;
mod proxy;

pub use chunked::{ChunkError, ChunkedDecoder};
pub use head::{parse_request, parse_response, ConnFacts, Framing, RequestHead, ResponsePlan, MAX_HEAD};

use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt, Split, Splitable};
use ramjet_shared::{normalize_host, BackendKind, RouteTable};

use crate::buf::{write_vec, ReadBuf};
use crate::error::{error_response, ProxyError};
use crate::upstream::UpstreamConn;
use crate::worker::Worker;

/// Client read buffer: the largest accepted head plus room for pipelined bytes behind it.
pub const CLIENT_BUFFER: usize = MAX_HEAD + 4096;
/// Upstream read buffer.
pub const UPSTREAM_BUFFER: usize = 32 * 1024;

/// What happens to the client connection after an exchange.
pub(crate) enum Next {
    KeepAlive,
    Close,
    /// The upstream agreed to switch protocols: relay bytes both ways.
    Tunnel(UpstreamConn),
}

/// Serves one client connection until it closes, fails, or is upgraded.
pub(crate) async fn serve<S>(worker: &Worker, mut client: S, facts: &ConnFacts)
where
    S: AsyncReadRent + AsyncWriteRent + Split + 'static,
{
    let mut cbuf = ReadBuf::new(worker.client_buffers.take());
    let mut out = worker.out_buffers.take();
    let mut first = true;
    let tunnel = loop {
        match exchange(worker, &mut client, &mut cbuf, &mut out, facts, first).await {
            Next::KeepAlive => first = false,
            Next::Close => break None,
            Next::Tunnel(up) => break Some(up),
        }
    };
    if let Some(up) = tunnel {
        relay(client, cbuf, up).await;
    } else {
        let _ = client.shutdown().await;
        worker.client_buffers.give(cbuf.into_inner());
    }
    worker.out_buffers.give(out);
}

/// One request and its response.
async fn exchange<S>(
    worker: &Worker,
    client: &mut S,
    cbuf: &mut ReadBuf,
    out: &mut Vec<u8>,
    facts: &ConnFacts,
    first: bool,
) -> Next
where
    S: AsyncReadRent + AsyncWriteRent,
{
    let settings = &worker.settings;
    // Wait for the next request: a silent close on idle timeout or drain, never a half answer.
    if cbuf.is_empty() {
        let wait = if first { settings.header_timeout } else { settings.keepalive_timeout };
        let read = monoio::select! {
            r = monoio::time::timeout(wait, cbuf.fill(client)) => r,
            _ = worker.drain.wait() => return Next::Close,
        };
        match read {
            Ok(Ok(n)) if n > 0 => {}
            _ => return Next::Close,
        }
    }

    // Parse in place; read more while the head is incomplete, within the header timeout.
    let mut deadline = None;
    let head = loop {
        match parse_request(cbuf.data(), facts, out) {
            Ok(Some(head)) => break head,
            Ok(None) if cbuf.room() == 0 => return reject(worker, client, ProxyError::HeadTooLarge).await,
            Ok(None) => {
                let deadline = *deadline.get_or_insert_with(|| monoio::time::Instant::now() + settings.header_timeout);
                match monoio::time::timeout_at(deadline, cbuf.fill(client)).await {
                    Ok(Ok(n)) if n > 0 => {}
                    Ok(_) => return Next::Close,
                    Err(_) => return reject(worker, client, ProxyError::HeaderTimeout).await,
                }
            }
            Err(e) => return reject(worker, client, e).await,
        }
    };

    // One generation for the whole life of this request.
    let generation = worker.generation();
    let table: &RouteTable = &generation.table;
    let data = cbuf.data();
    let host = std::str::from_utf8(&data[head.host.clone()]).unwrap_or("");
    let target = std::str::from_utf8(&data[head.target.clone()]).unwrap_or("/");
    let target = if target.is_empty() { "/" } else { target };
    let keep_alive = head.keep_alive && !worker.drain.is_fired();
    if !facts.tls && table.has_ssl_redirects() {
        let mut buf = [0u8; 256];
        if let Some(h) = normalize_host(host, &mut buf).filter(|h| table.redirects_to_https(h)) {
            // 308 keeps the method and body; the request body, if any, is not read.
            let keep = keep_alive && head.body == Framing::None;
            out.clear();
            out.extend_from_slice(b"HTTP/1.1 308 Permanent Redirect\r\nlocation: https://");
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(target.as_bytes());
            out.extend_from_slice(if keep {
                b"\r\ncontent-length: 0\r\n\r\n"
            } else {
                b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            });
            cbuf.consume(head.head_len);
            worker.counters().request(308);
            return match write_vec(client, out).await {
                Ok(()) if keep => Next::KeepAlive,
                _ => Next::Close,
            };
        }
    }
    let route = table.route(host, target);
    cbuf.consume(head.head_len);

    let Some(route) = route else {
        let keep = keep_alive && skip_buffered_body(&head, cbuf);
        return answer(worker, client, 404, error_response(404, !keep), keep).await;
    };
    match &route.backend.kind {
        BackendKind::Respond(direct) => {
            let keep = keep_alive && skip_buffered_body(&head, cbuf);
            out.clear();
            out.extend_from_slice(&direct.head);
            out.extend_from_slice(if keep { b"\r\n" } else { b"connection: close\r\n\r\n" });
            if !head.is_head {
                out.extend_from_slice(&direct.body);
            }
            worker.counters().request(direct.status);
            match write_vec(client, out).await {
                Ok(()) if keep => Next::KeepAlive,
                _ => Next::Close,
            }
        }
        BackendKind::Endpoints(endpoints) => {
            match proxy::forward(worker, client, cbuf, out, &head, route.backend.slot, endpoints, keep_alive).await {
                Ok((status, next)) => {
                    worker.counters().request(status);
                    next
                }
                Err((error, response_started)) => {
                    if let Some(kind) = error.upstream_kind() {
                        worker.counters().upstream_error(kind);
                    }
                    tracing::debug!(worker = worker.id, %error, "request failed");
                    match error.status() {
                        Some(status) if !response_started => {
                            let keep = keep_alive && error.keeps_connection() && head.body == Framing::None;
                            answer(worker, client, status, error_response(status, !keep), keep).await
                        }
                        _ => Next::Close,
                    }
                }
            }
        }
    }
}

/// Consumes a request body that is entirely in the buffer already, so the connection can serve the
/// next request; `false` when the body is not all there (the connection must close).
fn skip_buffered_body(head: &RequestHead, cbuf: &mut ReadBuf) -> bool {
    match head.body {
        Framing::None => true,
        Framing::Length(n) if (n as usize) <= cbuf.len() => {
            cbuf.consume(n as usize);
            true
        }
        _ => false,
    }
}

async fn answer<S: AsyncWriteRent>(
    worker: &Worker,
    client: &mut S,
    status: u16,
    bytes: &'static [u8],
    keep: bool,
) -> Next {
    worker.counters().request(status);
    match client.write_all(bytes).await {
        (Ok(_), _) if keep => Next::KeepAlive,
        _ => Next::Close,
    }
}

/// Answers a request that could not be read, then closes.
async fn reject<S: AsyncWriteRent>(worker: &Worker, client: &mut S, error: ProxyError) -> Next {
    match error.status() {
        Some(status) => answer(worker, client, status, error_response(status, true), false).await,
        None => Next::Close,
    }
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
    let (mut client_read, mut client_write) = client.into_split();
    let (mut up_read, mut up_write) = up.stream.into_split();
    let upstream_bound = async {
        let _ = monoio::io::copy(&mut client_read, &mut up_write).await;
        let _ = up_write.shutdown().await;
    };
    let client_bound = async {
        let _ = monoio::io::copy(&mut up_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    monoio::join!(upstream_bound, client_bound);
}
