//! The audit trail: every publish, pin and release, written for three readers — a `tracing` event
//! on target `audit` (log pipelines), an [`EventSink`] (Kubernetes Events on the IngressClass), and
//! an optional webhook (one POST of the JSON, fire and forget).

pub mod diff;
mod webhook;

pub use webhook::{Webhook, WebhookError};

use std::sync::Arc;

use serde::Serialize;

use diff::{DiffCounts, TableDiff};

/// Why an audit record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Reason {
    /// A compiled generation was applied (published, or held back by a pin).
    ConfigApplied,
    /// An operator pinned a generation (rollback).
    ConfigPinned,
    /// An operator released the pin; the newest generation is published.
    ConfigResumed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ConfigApplied => "ConfigApplied",
            Reason::ConfigPinned => "ConfigPinned",
            Reason::ConfigResumed => "ConfigResumed",
        }
    }
}

/// One audit record.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    pub reason: Reason,
    /// The generation this record is about, and the one it is compared with.
    pub generation: u64,
    pub previous: u64,
    /// Whether it went on the wire.
    pub published: bool,
    /// "3 routes added, 1 cert rotated (gen 41→42)".
    pub message: String,
    pub counts: DiffCounts,
    pub diff: TableDiff,
}

impl AuditRecord {
    pub fn new(reason: Reason, previous: u64, generation: u64, published: bool, diff: TableDiff) -> Self {
        let what = match reason {
            Reason::ConfigApplied if !published => format!("{} (held back by the pin)", diff.sentence()),
            Reason::ConfigApplied => diff.sentence(),
            Reason::ConfigPinned => format!("pinned: {}", diff.sentence()),
            Reason::ConfigResumed => format!("pin released: {}", diff.sentence()),
        };
        AuditRecord {
            reason,
            generation,
            previous,
            published,
            message: format!("{what} (gen {previous}→{generation})"),
            counts: diff.counts(),
            diff,
        }
    }
}

/// Somewhere audit records go besides the log: Kubernetes Events. Implementations must not block
/// (spawn the write) and must not fail the publish.
pub trait EventSink: Send + Sync {
    fn record(&self, record: &AuditRecord);
}

/// Writes each record down every channel configured.
#[derive(Clone, Default)]
pub struct AuditTrail {
    pub sinks: Vec<Arc<dyn EventSink>>,
    pub webhook: Option<Webhook>,
}

impl AuditTrail {
    /// Logs the record on target `audit`, hands it to the sinks and the webhook. Must be called
    /// within the control thread's tokio runtime.
    pub fn record(&self, record: AuditRecord) {
        let c = record.counts;
        tracing::info!(
            target: "audit",
            event = "config",
            reason = record.reason.as_str(),
            generation = record.generation,
            previous = record.previous,
            published = record.published,
            routes_added = c.routes_added,
            routes_removed = c.routes_removed,
            backends_changed = c.backends_changed,
            hosts_added = c.hosts_added,
            hosts_removed = c.hosts_removed,
            certs_added = c.certs_added,
            certs_removed = c.certs_removed,
            certs_rotated = c.certs_rotated,
            https_redirects_added = c.https_redirects_added,
            https_redirects_removed = c.https_redirects_removed,
            mirrors_added = c.mirrors_added,
            mirrors_removed = c.mirrors_removed,
            default_backend_changed = c.default_backend_changed,
            "{}",
            record.message
        );
        for sink in &self.sinks {
            sink.record(&record);
        }
        if let Some(webhook) = &self.webhook {
            webhook.send(&record);
        }
    }
}
