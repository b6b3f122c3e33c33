//! What an operator sets for the data plane: timeouts and limits of the request path, HTTP/2's
//! limits, how the client's address is learnt (the PROXY protocol, trusted proxies), and which I/O
//! driver the workers may use.

use std::fmt;
use std::time::Duration;

use crate::codec::http1::MAX_HEAD;
use crate::conn::AddressRules;

/// Timeouts and limits of the request path.
#[derive(Debug, Clone)]
pub struct Settings {
    /// A client must send a complete request head within this time.
    pub header_timeout: Duration,
    /// Each read of a request body must bring bytes within this time (408 otherwise).
    pub client_body_timeout: Duration,
    /// Each write to a client must complete within this time, or the connection is closed: a client
    /// that stops reading cannot hold its task and an upstream connection. With 32 KiB writes, the
    /// default is a minimum rate of about 550 bytes/s.
    pub client_write_timeout: Duration,
    /// An idle keep-alive client connection is closed after this time (up to one 10 ms tick of
    /// the worker's coarse timer later).
    pub keepalive_timeout: Duration,
    /// An HTTP/1.1 client connection, plain or TLS, quiet for this long (waiting for its first or
    /// next request) gives its buffers back to the worker until bytes arrive (a TLS one its TLS
    /// stream's buffers too), so idle connections cost little memory; a client that sends sooner
    /// pays nothing for it.
    pub idle_release_after: Duration,
    /// Connect, send and each wait for upstream bytes must finish within this time (504 otherwise).
    pub upstream_timeout: Duration,
    /// Pooled upstream connections idle longer than this are closed.
    pub upstream_idle_timeout: Duration,
    /// Idle HTTP/1.1 connections a worker keeps per endpoint (ingress-nginx's
    /// `upstream-keepalive-connections`, which is per worker and upstream too). Beyond the first few,
    /// a pooled connection keeps no read buffer, so a large pool costs sockets, not memory.
    pub upstream_keepalive_connections: usize,
    /// On shutdown, in-flight requests get this long to finish.
    pub drain_timeout: Duration,
    /// The series of a (route, backend) that left the serving table are dropped from `/metrics`
    /// once they have had no request for this long.
    pub metrics_grace: Duration,
    /// Each (route, backend) series counts requests by status code too, not only by class.
    pub metrics_status_codes: bool,
    /// Limits of HTTP/2 connections (the preface and first request share `header_timeout`, idle
    /// connections `keepalive_timeout`).
    pub http2: Http2Settings,
    /// How the client's address is learnt.
    pub client_address: ClientAddress,
    /// A TCP route's relay (and a TLS passthrough) with no byte either way for this long is closed
    /// (nginx stream's `proxy_timeout`, 10 minutes).
    pub tcp_idle_timeout: Duration,
    /// A UDP route's flow with no datagram either way for this long ends, and its socket closes
    /// (60 s).
    pub udp_idle_timeout: Duration,
}

/// How the client's address is learnt, when a load balancer stands between the client and ramjet
/// (see `docs/client-address.md`). The default believes nothing: the client is the connection's
/// peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAddress {
    /// The plain-HTTP listener expects a PROXY protocol header (v1 or v2) before every
    /// connection's first byte, and refuses a connection without a valid one.
    pub proxy_protocol_http: bool,
    /// The same for the HTTPS listener (the header comes before the TLS ClientHello).
    pub proxy_protocol_https: bool,
    /// A PROXY protocol header must be whole within this time (ingress-nginx's
    /// `proxy-protocol-header-timeout`, 5 s).
    pub proxy_protocol_timeout: Duration,
    /// Whose forwarded fields are believed, which field, and what goes upstream.
    pub rules: AddressRules,
}

impl Default for ClientAddress {
    fn default() -> Self {
        ClientAddress {
            proxy_protocol_http: false,
            proxy_protocol_https: false,
            proxy_protocol_timeout: Duration::from_secs(5),
            rules: AddressRules::default(),
        }
    }
}

/// Limits of downstream HTTP/2 connections. The defaults are nginx's where nginx has the setting,
/// else Envoy's recommendations for an edge proxy (see `docs/http2.md`).
#[derive(Debug, Clone)]
pub struct Http2Settings {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS; nginx: 128). Streams
    /// the client reset still count until ramjet has finished with them, so resetting does not
    /// buy a client more concurrent work (the Rapid Reset defence).
    pub max_concurrent_streams: u32,
    /// Largest decoded header list of a request (SETTINGS_MAX_HEADER_LIST_SIZE), the same budget as
    /// an HTTP/1.1 head (32 KiB; nginx's `large_client_header_buffers` 4 × 8k).
    pub max_header_list_size: u32,
    /// Flow-control window of each request body (64 KiB: RFC 9113's default, and nginx's
    /// `http2_body_preread_size`; Envoy's edge recommendation).
    pub initial_stream_window: u32,
    /// Flow-control window of a whole connection (1 MiB: Envoy's edge recommendation).
    pub initial_connection_window: u32,
    /// Largest frame accepted (16 KiB: the protocol's default and minimum).
    pub max_frame_size: u32,
    /// Response bytes buffered per stream before ramjet waits for the client's window (64 KiB).
    pub max_send_buffer: usize,
    /// Streams the client may reset before ramjet has taken them up, before the connection is
    /// closed with ENHANCE_YOUR_CALM (20, as hyper and the h2 crate).
    pub max_pending_accept_reset_streams: usize,
    /// Streams ramjet may reset for the client's protocol errors before the connection is closed
    /// (1024, as the h2 crate; the 2023–2024 "MadeYouReset" family).
    pub max_local_error_reset_streams: usize,
}

impl Default for Http2Settings {
    fn default() -> Self {
        Http2Settings {
            max_concurrent_streams: 128,
            max_header_list_size: MAX_HEAD as u32,
            initial_stream_window: 64 * 1024,
            initial_connection_window: 1024 * 1024,
            max_frame_size: 16 * 1024,
            max_send_buffer: 64 * 1024,
            max_pending_accept_reset_streams: 20,
            max_local_error_reset_streams: 1024,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_timeout: Duration::from_secs(10),
            client_body_timeout: Duration::from_secs(60),
            client_write_timeout: Duration::from_secs(60),
            keepalive_timeout: Duration::from_secs(60),
            idle_release_after: Duration::from_secs(1),
            upstream_timeout: Duration::from_secs(60),
            upstream_idle_timeout: Duration::from_secs(30),
            upstream_keepalive_connections: 1024,
            drain_timeout: Duration::from_secs(30),
            metrics_grace: Duration::from_secs(300),
            metrics_status_codes: false,
            http2: Http2Settings::default(),
            client_address: ClientAddress::default(),
            tcp_idle_timeout: Duration::from_secs(600),
            udp_idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Which I/O driver the workers may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoDriver {
    /// io_uring, or refuse to start.
    #[default]
    IoUring,
    /// io_uring where it can be set up, else epoll (with a warning that says why).
    Auto,
    /// epoll.
    Legacy,
}

/// The driver a worker ended up with, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverChoice {
    pub io_uring: bool,
    pub reason: String,
}

impl fmt::Display for DriverChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.io_uring { "io_uring" } else { "epoll (legacy)" };
        write!(f, "{name}: {}", self.reason)
    }
}
