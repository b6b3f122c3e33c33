//! `--audit-webhook http://…`: one POST of each audit record as JSON, five-second timeout, no retry.
//! It is a copy, not the record (the log, the Event and the history ring have it), so a failure is
//! logged and forgotten.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;

use serde::Serialize;

/// Why a webhook URL was refused at start-up.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    /// https is refused rather than silently downgraded: the control plane carries no TLS client
    /// for this. Point it at a collector inside the cluster over http.
    #[error("--audit-webhook {0}: https:// is not supported (the control plane has no TLS client for the webhook); use an http:// collector inside the cluster")]
    Https(String),
    /// Not an absolute http URL.
    #[error("--audit-webhook {0}: not an absolute http:// URL")]
    Invalid(String),
}

#[derive(Clone)]
pub struct Webhook {
    uri: hyper::Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    /// Deliveries that failed (timeout, refused, non-2xx).
    pub failures: Arc<AtomicU64>,
    pub delivered: Arc<AtomicU64>,
}

impl Webhook {
    /// Validates the URL; https and anything that is not an absolute http URL are refused.
    pub fn new(url: &str) -> Result<Self, WebhookError> {
        if url.to_ascii_lowercase().starts_with("https://") {
            return Err(WebhookError::Https(url.into()));
        }
        let uri: hyper::Uri = url.parse().map_err(|_| WebhookError::Invalid(url.into()))?;
        if uri.scheme_str() != Some("http") || uri.host().is_none() {
            return Err(WebhookError::Invalid(url.into()));
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        Ok(Webhook {
            uri,
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout: Duration::from_secs(5),
            failures: Arc::default(),
            delivered: Arc::default(),
        })
    }

    /// Sends the record (a config record, or a canary decision) in the background; never waits
    /// and never retries. `about` names it in the log line of a failure.
    pub fn send(&self, record: &impl Serialize, about: String) {
        let body = match serde_json::to_vec(record) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode the audit record for the webhook");
                return;
            }
        };
        let request = Request::post(self.uri.clone())
            .header("content-type", "application/json")
            .header("user-agent", concat!("ramjet/", env!("CARGO_PKG_VERSION")))
            .body(Full::new(body));
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot build the audit webhook request");
                return;
            }
        };
        let this = self.clone();
        tokio::spawn(async move {
            let outcome = tokio::time::timeout(this.timeout, this.client.request(request)).await;
            let failure = match outcome {
                Ok(Ok(resp)) if resp.status().is_success() => None,
                Ok(Ok(resp)) => Some(format!("answered {}", resp.status())),
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some("no answer within 5 s".to_string()),
            };
            match failure {
                None => {
                    this.delivered.fetch_add(1, Ordering::Relaxed);
                }
                Some(why) => {
                    this.failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(url = %this.uri, record = %about, error = %why, "audit webhook delivery failed (not retried)");
                }
            }
        });
    }
}
