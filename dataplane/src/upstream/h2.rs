//! HTTP/2 to backends that ask for it (`H2C`, `GRPC`, and over TLS `GRPCS`): one multiplexed
//! connection per endpoint (and TLS settings) per worker, shared by every stream of the worker that
//! goes there. Worker-local: no lock.
//!
//! A connection is opened by the first stream that needs it (within the upstream timeout, TLS
//! handshake included) and driven by its own task on the worker; when the backend closes it or it
//! fails, the task marks it dead and the next stream opens a new one. A connection that has carried
//! no stream for the upstream idle timeout is dropped by the worker's periodic sweep. A connection
//! replaced or dropped meanwhile finishes its streams and closes by itself once nothing holds it
//! (h2's client connection ends when its last handle is dropped).

use crate::base::coarse_timer::CoarseTimer;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::{ResponseFuture, SendRequest};
use h2::SendStream;
use http::Request;
use monoio::io::IntoPollIo;
use ramjet_shared::{UpstreamErrorKind, UpstreamTls};
use rustc_hash::FxHashMap;
use tokio::io::{AsyncRead, AsyncWrite};

use super::connect::connect_tcp;
use crate::error::{Failure, ProxyError};
use crate::settings::Http2Settings;

/// What the pool and the streams of one connection share.
struct Usage {
    alive: Cell<bool>,
    /// Streams under way on the connection.
    streams: Cell<usize>,
    /// When the last stream ended (or the connection opened).
    idle_since: Cell<Instant>,
}

struct Conn {
    send: SendRequest<Bytes>,
    usage: Rc<Usage>,
}

/// A stream's hold on its connection: while any is held the connection is not idle.
pub(crate) struct StreamGuard(Rc<Usage>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let usage = &self.0;
        usage.streams.set(usage.streams.get() - 1);
        if usage.streams.get() == 0 {
            usage.idle_since.set(Instant::now());
        }
    }
}

/// A worker's HTTP/2 connections to backends, by endpoint and TLS settings (0: plain).
#[derive(Default)]
pub struct H2Pool {
    conns: RefCell<FxHashMap<(SocketAddr, u64), Conn>>,
}

impl H2Pool {
    /// A handle on the connection to `addr` (over TLS with `tls`), opened now if there is none
    /// (or it died), a guard that counts the stream as under way until dropped, and whether the
    /// connection was opened for this stream.
    pub(crate) async fn get(
        &self,
        addr: SocketAddr,
        tls: Option<&UpstreamTls>,
        dial: &Dial<'_>,
    ) -> Result<(SendRequest<Bytes>, StreamGuard, bool), ProxyError> {
        let key = (addr, tls.map_or(0, |t| t.id));
        if let Some(conn) = self.conns.borrow().get(&key) {
            if conn.usage.alive.get() {
                return Ok((conn.send.clone(), guard(&conn.usage), false));
            }
        }
        let (send, usage) = crate::base::watchdog::timeout(dial.timer, dial.timeout, connect(addr, tls, dial.limits))
            .await
            .map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Timeout))??;
        let held = guard(&usage);
        self.conns.borrow_mut().insert(key, Conn { send: send.clone(), usage });
        Ok((send, held, true))
    }

    /// Forgets the connection to `addr` with `tls` (it failed a stream): the next stream opens a
    /// new one.
    pub(crate) fn forget(&self, addr: SocketAddr, tls: Option<&UpstreamTls>) {
        if let Some(conn) = self.conns.borrow_mut().remove(&(addr, tls.map_or(0, |t| t.id))) {
            conn.usage.alive.set(false);
        }
    }

    /// Drops connections that died, and those without a stream for `idle_timeout`; run
    /// periodically by the worker.
    pub fn sweep(&self, idle_timeout: Duration) {
        self.conns.borrow_mut().retain(|_, conn| {
            let usage = &conn.usage;
            let idle = usage.streams.get() == 0 && usage.idle_since.get().elapsed() >= idle_timeout;
            usage.alive.get() && !idle
        });
    }
}

/// A stream opened on a worker's HTTP/2 connection to a backend.
/// How a new connection to an HTTP/2 backend is opened: within `timeout` (on the worker's
/// `timer`), with the HTTP/2 `limits` of the daemon's settings.
pub(crate) struct Dial<'a> {
    pub timeout: Duration,
    pub timer: &'a CoarseTimer,
    pub limits: &'a Http2Settings,
}

pub(crate) struct OpenStream {
    /// The backend's response head, when it comes.
    pub response: ResponseFuture,
    /// The request body's half of the stream (ended already when the request has no body).
    pub send: SendStream<Bytes>,
    /// Counts the stream as under way on its connection while held.
    pub held: StreamGuard,
    /// Time spent opening a connection for this stream: zero on a shared one.
    pub connect: Duration,
    /// The first connection refused the stream and it was opened on a new one.
    pub retried: bool,
}

impl H2Pool {
    /// Opens a stream for `request()` on the connection to `addr` (over TLS with `tls`), with the
    /// request's end of stream set when `end` (no body follows). A connection that the backend has
    /// closed or is closing (GOAWAY) refuses the new stream before anything of it is sent: then
    /// once more, on a new connection. HTTP/2 and HTTP/1.1 clients of an HTTP/2 backend both open
    /// their streams here.
    pub(crate) async fn open_stream(
        &self,
        addr: SocketAddr,
        tls: Option<&UpstreamTls>,
        dial: Dial<'_>,
        request: impl Fn() -> Result<Request<()>, ProxyError>,
        end: bool,
    ) -> Result<OpenStream, Failure> {
        let mut fresh = false;
        let mut connect = Duration::ZERO;
        loop {
            let connecting = Instant::now();
            let (send, held, opened) = self.get(addr, tls, &dial).await?;
            if opened {
                connect += connecting.elapsed();
            }
            let sent = match send.ready().await {
                Ok(mut send) => send.send_request(request()?, end),
                Err(e) => Err(e),
            };
            match sent {
                Ok((response, send)) => return Ok(OpenStream { response, send, held, connect, retried: fresh }),
                Err(_) if !fresh => {
                    self.forget(addr, tls);
                    fresh = true;
                }
                Err(_) => return Err(self.failed(addr, tls)),
            }
        }
    }

    /// The connection to `addr` failed a stream (an I/O error, a GOAWAY): forgotten, so the next
    /// stream opens a new one, and the stream's failure.
    pub(crate) fn failed(&self, addr: SocketAddr, tls: Option<&UpstreamTls>) -> Failure {
        self.forget(addr, tls);
        Failure::from(ProxyError::Upstream(UpstreamErrorKind::Reset))
    }
}

fn guard(usage: &Rc<Usage>) -> StreamGuard {
    usage.streams.set(usage.streams.get() + 1);
    StreamGuard(usage.clone())
}

async fn connect(
    addr: SocketAddr,
    tls: Option<&UpstreamTls>,
    limits: &Http2Settings,
) -> Result<(SendRequest<Bytes>, Rc<Usage>), ProxyError> {
    let stream = connect_tcp(addr).await?;
    let io = stream.into_poll_io().map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Connect))?;
    match tls {
        None => start(addr, io, limits).await,
        Some(tls) => {
            // rustls through tokio-rustls over the readiness-based stream: reads and writes may run
            // at once (h2 does both), which monoio-rustls' owned-buffer stream does not allow.
            let connector = tokio_rustls::TlsConnector::from(tls.h2.clone());
            let tls_stream = connector.connect(tls.server_name.clone(), io).await.map_err(|e| {
                tracing::debug!(upstream = %addr, error = %e, "TLS handshake with an HTTP/2 backend failed");
                ProxyError::Upstream(UpstreamErrorKind::Tls)
            })?;
            start(addr, tls_stream, limits).await
        }
    }
}

/// The HTTP/2 handshake over `io`, and the task that drives the connection.
async fn start<T>(
    addr: SocketAddr,
    io: T,
    limits: &Http2Settings,
) -> Result<(SendRequest<Bytes>, Rc<Usage>), ProxyError>
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(limits.initial_stream_window)
        .initial_connection_window_size(limits.initial_connection_window)
        .max_frame_size(limits.max_frame_size)
        .max_header_list_size(limits.max_header_list_size)
        .max_send_buffer_size(limits.max_send_buffer)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Protocol))?;
    let usage = Rc::new(Usage { alive: Cell::new(true), streams: Cell::new(0), idle_since: Cell::new(Instant::now()) });
    let flag = usage.clone();
    monoio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(upstream = %addr, error = %e, "HTTP/2 upstream connection failed");
        }
        flag.alive.set(false);
    });
    Ok((send, usage))
}
