//! A small blocking client for the admin API, for the background threads of `ramjet-top`.
//!
//! Plain HTTP/1.1 (ureq, no TLS: the admin port is reached on loopback, through
//! `kubectl port-forward` or an SSH tunnel), no proxy from the environment, no redirects, and a
//! timeout on every call so a hung daemon cannot hold a thread for long. The bearer token is sent
//! on `POST` and `DELETE /admin/rollback` only; polling never carries it.

use std::fmt;
use std::time::Duration;

use ramjet_shared::admin::{ErrorBody, RollbackRequest};
use serde::de::DeserializeOwned;

use super::model::{Generations, PinAnswer, Scrape, Traffic};

/// Largest answer read from the admin API.
const MAX_BODY: u64 = 8 << 20;

/// The bearer token for the mutating verbs. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token read from a file; surrounding whitespace (a trailing newline) is dropped.
    /// `None` when nothing is left.
    pub fn new(text: &str) -> Option<Token> {
        let token = text.trim();
        (!token.is_empty()).then(|| Token(token.to_string()))
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why a call to the admin API failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No answer: connection refused, name not found, timeout, or the connection broke.
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The daemon answered with an error status; `message` is its `{"error": ...}` text.
    #[error("{message} (HTTP {status})")]
    Status { status: u16, message: String },
    /// The daemon answered 200 with something the admin API does not send.
    #[error("unexpected answer from {url}: {detail}")]
    Malformed { url: String, detail: String },
}

/// The admin API of one daemon.
pub struct AdminClient {
    base: String,
    agent: ureq::Agent,
    token: Option<Token>,
}

impl AdminClient {
    /// `base` is like `http://127.0.0.1:10254`, without a trailing slash.
    pub fn new(base: &str, timeout: Duration, token: Option<Token>) -> AdminClient {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .proxy(None)
            .user_agent(concat!("ramjet-top/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        AdminClient { base: base.trim_end_matches('/').to_string(), agent, token }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET /admin/generations`.
    pub fn generations(&self) -> Result<Generations, ClientError> {
        let url = self.url("/admin/generations");
        let answer = self.agent.get(&url).call();
        json(&url, answer)
    }

    /// `GET /metrics`.
    pub fn metrics(&self) -> Result<Scrape, ClientError> {
        let url = self.url("/metrics");
        let answer = self.agent.get(&url).call();
        text(&url, answer).map(|t| Scrape::parse(&t))
    }

    /// `GET /admin/traffic`: the per route and backend counters.
    pub fn traffic(&self) -> Result<Traffic, ClientError> {
        let url = self.url("/admin/traffic");
        let answer = self.agent.get(&url).call();
        json(&url, answer)
    }

    /// `POST /admin/rollback {"generation": N}`: serve generation N and pin it.
    pub fn pin(&self, generation: u64) -> Result<PinAnswer, ClientError> {
        self.rollback(&RollbackRequest::generation(generation))
    }

    /// `POST /admin/rollback {"digest": "<prefix>"}`: serve the generation with that compiled table
    /// and pin it (the same table on every replica, whatever its number there).
    pub fn pin_digest(&self, prefix: &str) -> Result<PinAnswer, ClientError> {
        self.rollback(&RollbackRequest::digest(prefix))
    }

    fn rollback(&self, body: &RollbackRequest) -> Result<PinAnswer, ClientError> {
        let url = self.url("/admin/rollback");
        let mut request = self.agent.post(&url).content_type("application/json");
        if let Some(Token(token)) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        let body = serde_json::to_string(body).expect("a rollback request serializes");
        json(&url, request.send(body))
    }

    /// `DELETE /admin/rollback`: release the pin; the newest generation serves.
    pub fn release(&self) -> Result<PinAnswer, ClientError> {
        let url = self.url("/admin/rollback");
        let mut request = self.agent.delete(&url);
        if let Some(Token(token)) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        json(&url, request.call())
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

type Answer = Result<ureq::http::Response<ureq::Body>, ureq::Error>;

fn json<T: DeserializeOwned>(url: &str, answer: Answer) -> Result<T, ClientError> {
    let body = text(url, answer)?;
    serde_json::from_str(&body).map_err(|e| ClientError::Malformed { url: url.to_string(), detail: e.to_string() })
}

/// The body of a 2xx answer; any other status becomes [`ClientError::Status`] with the daemon's
/// own message.
fn text(url: &str, answer: Answer) -> Result<String, ClientError> {
    let mut response = answer.map_err(|e| unreachable(url, e))?;
    let status = response.status().as_u16();
    let body = response.body_mut().with_config().limit(MAX_BODY).read_to_string().map_err(|e| unreachable(url, e))?;
    if (200..300).contains(&status) {
        return Ok(body);
    }
    Err(ClientError::Status { status, message: error_message(status, &body) })
}

/// The `error` field of the admin API's JSON errors; otherwise the start of the body.
fn error_message(status: u16, body: &str) -> String {
    if let Ok(e) = serde_json::from_str::<ErrorBody>(body) {
        return e.error;
    }
    let body = body.trim();
    if body.is_empty() {
        return match status {
            300..=399 => "the admin API answered with a redirect, which ramjet-top does not follow".to_string(),
            _ => "the daemon gave no reason".to_string(),
        };
    }
    body.chars().take(200).collect()
}

fn unreachable(url: &str, e: ureq::Error) -> ClientError {
    let reason = match e {
        ureq::Error::Io(io) => io.to_string(),
        ureq::Error::Timeout(_) => "no answer in time".to_string(),
        ureq::Error::HostNotFound => "host not found".to_string(),
        other => other.to_string(),
    };
    ClientError::Unreachable { url: url.to_string(), reason }
}
