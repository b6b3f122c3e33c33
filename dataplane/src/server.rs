//! The top floor: connections. The accept loop ([`accept`]) hands each connection to its server —
//! HTTP/1.1 ([`http1`], which upgrades to [`http2`] on the h2c preface), TLS ([`tls`], which picks
//! HTTP/1.1, HTTP/2 or a TLS route's relay) — and each server drives the request pipeline. The
//! ports of TCP, UDP and TLS routes ([`route_ports`]) are served beside them, their connections and
//! flows relayed as they are ([`tcp`], [`udp`]) or by server name ([`tls_port`], [`tls_relay`]),
//! to the backends [`relay_backend`] picks.

pub mod accept;
pub mod client_auth;
pub mod client_hello;
pub mod contain;
pub mod handshake;
pub mod http1;
pub mod http2;
pub mod passthrough;
pub mod proxy_header;
pub mod relay_backend;
pub mod route_ports;
pub mod runtime;
pub mod tcp;
pub mod tls;
pub mod tls_port;
pub mod tls_relay;
pub mod udp;
