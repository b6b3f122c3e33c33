//! Seeing requests: request ids, what a request did and the (route, backend) series it counts in
//! ([`requests`]), the access log ([`access_log`]) and traces ([`trace`]), written into the
//! worker's own memory and sent on by threads of their own.

pub mod access_log;
pub mod log_template;
pub mod requests;
pub mod text;
pub mod trace;
