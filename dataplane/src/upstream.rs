//! Upstream connections: per-worker keep-alive pools ([`pool`], [`h2`]) and connecting with a
//! deadline in plain TCP or over TLS ([`connect`]). One exchange with retries over them is the
//! pipeline's upstream attempt (`crate::pipeline::exchange`).

pub mod connect;
pub mod h2;
pub mod pool;
pub mod stream;
