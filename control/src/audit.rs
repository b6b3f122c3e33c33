//! The audit trail: every publish, pin and release, written for three readers — a `tracing` event
//! on target `audit` (log pipelines), an [`EventSink`] (Kubernetes Events on the IngressClass), and
//! an optional webhook (one POST of the JSON, fire and forget).
//!
//! Canary auto-promotion decisions ([`CanaryRecord`]) go down the same log target and webhook;
//! their Kubernetes Events go on the canary Ingress itself (`cluster::promote` writes those).

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
            passthrough_changed = c.passthrough_changed,
            client_auth_changed = c.client_auth_changed,
            settings_changed = c.settings_changed,
            default_backend_changed = c.default_backend_changed,
            "{}",
            record.message
        );
        for sink in &self.sinks {
            sink.record(&record);
        }
        if let Some(webhook) = &self.webhook {
            webhook.send(&record, format!("generation {}", record.generation));
        }
    }
}

/// One canary auto-promotion decision (or pause, or halt), for the log and the webhook.
#[derive(Debug, Clone, Serialize)]
pub struct CanaryRecord {
    /// Always `canary`: tells these apart from config records at the webhook.
    pub event: &'static str,
    /// `CanaryStarted`, `CanaryStepped`, `CanaryCheckFailed`, `CanaryPromoted`, `CanaryAborted`,
    /// `CanaryPaused`, `CanaryHalted`.
    pub reason: &'static str,
    /// The canary Ingress, `namespace/name`.
    pub ingress: String,
    /// The weight served after the decision, out of `total`.
    pub weight: u32,
    pub total: u32,
    pub failures: u32,
    /// The window's figures, when the decision judged one.
    pub requests: Option<u64>,
    pub success_rate: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The Event's note.
    pub message: String,
}

impl AuditTrail {
    /// Logs a canary decision on target `audit` and sends it to the webhook.
    pub fn record_canary(&self, record: CanaryRecord) {
        tracing::info!(
            target: "audit",
            event = "canary",
            reason = record.reason,
            ingress = %record.ingress,
            weight = record.weight,
            total = record.total,
            failures = record.failures,
            requests = record.requests,
            success_rate = record.success_rate,
            p99_ms = record.p99_ms,
            "{}",
            record.message
        );
        if let Some(webhook) = &self.webhook {
            webhook.send(&record, format!("{} {}", record.reason, record.ingress));
        }
    }
}
