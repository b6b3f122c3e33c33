//! The request pipeline, the same for every protocol: **route** ([`route::decide`]) → **admit**
//! (source ranges, CORS preflight, per-client limits, basic and external auth: [`admit`]) → an
//! **upstream attempt** (`crate::pipeline::exchange`) → **response edits** → **log and count**.
//! Answers ramjet makes itself are one type, [`answer::LocalAnswer`]; the servers (HTTP/1.1,
//! HTTP/2) only turn bytes into a request view and answers back into bytes.

pub mod admit;
pub mod answer;
pub mod exchange;
pub mod external_auth;
pub mod mirror;
pub mod respond;
pub mod route;
pub mod view;
