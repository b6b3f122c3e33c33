//! Mirrors: a copy of a request sent to another backend from the same worker, its answer read and
//! discarded. Fire and forget: the copy is a task of its own that the client's request never waits
//! for. At most [`MIRRORS_IN_FLIGHT`] copies per worker are in flight; one more is dropped and
//! counted, never queued. A copy that cannot connect, or gets no complete answer within
//! [`MIRROR_TIMEOUT`], is dropped and counted too.
//!
//! The copy carries the upstream head the real request carries (the `Host` replaced when the mirror
//! names one) and, when the mirror wants it, the body — only a body that was buffered whole, at most
//! the client buffer; a larger body that is streamed is not copied and the mirror is dropped and
//! counted. Each copy uses a fresh connection with `connection: close`: a slow mirror holds a
//! connection of its own, never one of the pool's. A mirror backend that speaks TLS gets the copy
//! over TLS, verified as its settings say; one whose handshake fails drops the copy.
//!
//! A mirror endpoint that cannot be connected to (down, refusing) rests for [`MIRROR_REST`]: its
//! copies are dropped and counted without a connection attempt, so a mirror that is down costs a
//! lookup per request instead of a failed connect each (which doubled a request's CPU). The first
//! copy after the rest tries again.

use std::net::SocketAddr;
use std::sync::Arc;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use ramjet_shared::{BackendKind, Mirror, Rule, UpstreamErrorKind, UpstreamTls};

use crate::base::coarse_timer::CoarseTimer;
use crate::error::ProxyError;
use crate::upstream::connect::connect;

use crate::policy::mirrors::{MIRRORS_IN_FLIGHT, MIRROR_TIMEOUT};
use crate::worker::Worker;

/// Sends a copy of the request to each of `rule`'s mirrors whose share this request draws.
pub(crate) fn send_all(worker: &Worker, rule: &Rule, head: &[u8], body: Option<&[u8]>) {
    for mirror in rule.mirrors() {
        if mirror.percent >= 100 || mirror.percent > 0 && worker.random() % 100 < mirror.percent as u32 {
            send(worker, mirror, head, body);
        }
    }
}

/// Sends a copy of the request whose upstream head is `head` (as written for the real backend) and
/// whose buffered body is `body` (`None`: the body is streamed and cannot be copied). Returns at
/// once; the copy runs as a task on this worker.
fn send(worker: &Worker, mirror: &Mirror, head: &[u8], body: Option<&[u8]>) {
    let state = &worker.mirrors;
    let BackendKind::Endpoints(endpoints) = &mirror.backend.kind else {
        state.counters().mirror_dropped();
        return;
    };
    if endpoints.is_empty() || (mirror.body && body.is_none()) || state.in_flight.get() >= MIRRORS_IN_FLIGHT {
        state.counters().mirror_dropped();
        return;
    }
    let addr = endpoints[worker.next_endpoint(mirror.backend.slot, endpoints.len())];
    if state.is_resting(addr) {
        state.counters().mirror_dropped();
        return;
    }
    let body = if mirror.body { body.unwrap_or_default() } else { &[] };
    let mut copy = Vec::with_capacity(head.len() + body.len() + 64);
    copy_head(head, mirror, &mut copy);
    copy.extend_from_slice(body);
    state.in_flight.set(state.in_flight.get() + 1);
    let state = state.clone();
    let timer = worker.coarse_timer.clone();
    // Over TLS to a backend that speaks it (an `https://` mirror-target), verified as its settings say.
    let tls = mirror.backend.tls.clone();
    monoio::spawn(async move {
        let sent = crate::base::watchdog::timeout(&timer, MIRROR_TIMEOUT, exchange(addr, tls, &timer, copy)).await;
        match sent {
            Ok(Ok(())) => state.counters().mirror_sent(),
            Ok(Err(CopyFailure::NotConnected)) => {
                state.rest(addr);
                state.counters().mirror_dropped();
            }
            _ => state.counters().mirror_dropped(),
        }
        state.in_flight.set(state.in_flight.get() - 1);
    });
}

/// Why a copy was not answered.
enum CopyFailure {
    /// The endpoint could not be connected to.
    NotConnected,
    /// The connection failed, or closed before an answer.
    Failed,
}

/// The head for the copy: the real head with `connection: close`, the mirror's `Host` if it names
/// one, and no framing fields when the body is not copied. Ramjet wrote those fields itself in
/// lower case (`host: `, `content-length: `, `transfer-encoding: `), so they are found by prefix.
fn copy_head(head: &[u8], mirror: &Mirror, out: &mut Vec<u8>) {
    let mut lines = head.split_inclusive(|&b| b == b'\n');
    if let Some(request_line) = lines.next() {
        match &mirror.path {
            Some(path) => copy_request_line(request_line, path, out),
            None => out.extend_from_slice(request_line),
        }
    }
    for line in lines {
        if line == b"\r\n" {
            break;
        }
        let drop = (mirror.host.is_some() && line.starts_with(b"host: "))
            || (!mirror.body && (line.starts_with(b"content-length: ") || line.starts_with(b"transfer-encoding: ")))
            || line.starts_with(b"connection: ");
        if !drop {
            out.extend_from_slice(line);
        }
    }
    if let Some(host) = &mirror.host {
        out.extend_from_slice(b"host: ");
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"x-ramjet-mirror: 1\r\nconnection: close\r\n\r\n");
}

/// `request_line` (`METHOD TARGET HTTP/1.1\r\n`) asking for `path` in place of the target's
/// path, the target's query kept, as nginx's `proxy_pass` with a URI does for a mirror.
fn copy_request_line(request_line: &[u8], path: &str, out: &mut Vec<u8>) {
    let mut parts = request_line.splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        out.extend_from_slice(request_line);
        return;
    };
    out.extend_from_slice(method);
    out.push(b' ');
    out.extend_from_slice(path.as_bytes());
    if let Some(q) = target.iter().position(|&b| b == b'?') {
        out.extend_from_slice(&target[q..]);
    }
    out.push(b' ');
    out.extend_from_slice(version);
}

/// Connects (with a TLS handshake for a backend that speaks TLS), writes the copy, and waits for
/// the first bytes of the answer; then the connection is closed (the answer is discarded, so there
/// is no reason to read it to its end).
async fn exchange(
    addr: SocketAddr,
    tls: Option<Arc<UpstreamTls>>,
    timer: &CoarseTimer,
    copy: Vec<u8>,
) -> Result<(), CopyFailure> {
    let connected = connect(addr, MIRROR_TIMEOUT, timer, Vec::new(), tls.as_deref()).await;
    let mut stream = match connected {
        Ok(conn) => conn.stream,
        Err(ProxyError::Upstream(UpstreamErrorKind::Connect)) => return Err(CopyFailure::NotConnected),
        Err(_) => return Err(CopyFailure::Failed),
    };
    let (written, mut buf) = stream.write_all(copy).await;
    written.map_err(|_| CopyFailure::Failed)?;
    buf.clear();
    buf.reserve(512);
    let (read, _) = stream.read(buf).await;
    match read {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(CopyFailure::Failed),
    }
}

#[cfg(test)]
mod tests {
    use super::copy_request_line;

    #[test]
    fn a_mirror_path_replaces_the_target_path_and_keeps_the_query() {
        let copy = |line: &[u8], path| {
            let mut out = Vec::new();
            copy_request_line(line, path, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(copy(b"POST /orders?id=7 HTTP/1.1\r\n", "/mirror"), "POST /mirror?id=7 HTTP/1.1\r\n");
        assert_eq!(copy(b"GET /a/b HTTP/1.1\r\n", "/m"), "GET /m HTTP/1.1\r\n");
    }
}
