//! HTTP/2 to backends that ask for it (`H2C`, `GRPC`): one multiplexed connection per endpoint per
//! worker, shared by every stream of the worker that goes there. Worker-local: no lock.
//!
//! A connection is opened by the first stream that needs it (within the upstream timeout) and
//! driven by its own task on the worker; when the backend closes it or it fails, the task marks it
//! dead and the next stream opens a new one. A connection replaced meanwhile finishes its streams
//! and closes by itself once nothing holds it (h2's client connection ends when its last handle is
//! dropped).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use monoio::io::IntoPollIo;
use monoio::net::TcpStream;
use ramjet_shared::UpstreamErrorKind;
use rustc_hash::FxHashMap;

use crate::error::ProxyError;
use crate::Http2Settings;

struct Conn {
    send: SendRequest<Bytes>,
    alive: Rc<Cell<bool>>,
}

/// A worker's HTTP/2 connections to backends, by endpoint.
#[derive(Default)]
pub struct H2Pool {
    conns: RefCell<FxHashMap<SocketAddr, Conn>>,
}

impl H2Pool {
    /// A handle on the connection to `addr`, opened now if there is none (or it died).
    pub(crate) async fn get(
        &self,
        addr: SocketAddr,
        timeout: Duration,
        limits: &Http2Settings,
    ) -> Result<SendRequest<Bytes>, ProxyError> {
        if let Some(conn) = self.conns.borrow().get(&addr) {
            if conn.alive.get() {
                return Ok(conn.send.clone());
            }
        }
        let (send, alive) = monoio::time::timeout(timeout, connect(addr, limits))
            .await
            .map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Timeout))??;
        self.conns.borrow_mut().insert(addr, Conn { send: send.clone(), alive });
        Ok(send)
    }

    /// Forgets the connection to `addr` (it failed a stream): the next stream opens a new one.
    pub(crate) fn forget(&self, addr: SocketAddr) {
        if let Some(conn) = self.conns.borrow_mut().remove(&addr) {
            conn.alive.set(false);
        }
    }
}

async fn connect(addr: SocketAddr, limits: &Http2Settings) -> Result<(SendRequest<Bytes>, Rc<Cell<bool>>), ProxyError> {
    let stream = TcpStream::connect_addr(addr).await.map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Connect))?;
    let _ = stream.set_nodelay(true);
    let io = stream.into_poll_io().map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Connect))?;
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(limits.initial_stream_window)
        .initial_connection_window_size(limits.initial_connection_window)
        .max_frame_size(limits.max_frame_size)
        .max_header_list_size(limits.max_header_list_size)
        .max_send_buffer_size(limits.max_send_buffer)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|_| ProxyError::Upstream(UpstreamErrorKind::Protocol))?;
    let alive = Rc::new(Cell::new(true));
    let flag = alive.clone();
    monoio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(upstream = %addr, error = %e, "HTTP/2 upstream connection failed");
        }
        flag.set(false);
    });
    Ok((send, alive))
}
