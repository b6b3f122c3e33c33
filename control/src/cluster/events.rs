//! Kubernetes Events (events.k8s.io/v1), created directly — one create per Event, never through an
//! aggregating recorder, so each publish is one Event a person can find.
//!
//! * The audit trail: ConfigApplied / ConfigPinned / ConfigResumed on our IngressClass, with the
//!   diff sentence as the note. Every replica writes its own (each one publishes).
//! * Ingresses that fail to compile: a Warning Event on the Ingress per distinct problem, written
//!   once — not on every recompile — by the elected replica.
//!
//! A create refused with 403 (no RBAC) is logged at debug and skipped; nothing else changes.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use ramjet_shared::{Diagnostic, ObjectRef, Severity};
use tokio::sync::{mpsc, watch};

use super::{AuditEventsFrom, ClusterOptions};
use crate::audit::{AuditRecord, EventSink};

/// The namespace of Events about cluster-scoped objects (our IngressClass), as kubectl expects.
const CLUSTER_EVENTS_NAMESPACE: &str = "default";
/// The API's limit on an Event's note.
const NOTE_LIMIT: usize = 1024;
/// How long an Event waits for its namespace to exist, and how often it tries meanwhile.
const NAMESPACE_PATIENCE: Duration = Duration::from_secs(60);
const NAMESPACE_RETRY: Duration = Duration::from_millis(500);

/// The audit trail's Event sink: hands records to the writer task (never blocks the applier).
pub struct AuditEvents {
    tx: mpsc::UnboundedSender<AuditRecord>,
}

/// The receiving end, consumed by the writer once the client exists.
pub struct AuditEventsReceiver(mpsc::UnboundedReceiver<AuditRecord>);

impl AuditEvents {
    pub fn channel() -> (Arc<AuditEvents>, AuditEventsReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Arc::new(AuditEvents { tx }), AuditEventsReceiver(rx))
    }
}

impl EventSink for AuditEvents {
    fn record(&self, record: &AuditRecord) {
        // Closed only when the cluster source has stopped; then there is no one to tell.
        let _ = self.tx.send(record.clone());
    }
}

/// Creates Events.
#[derive(Clone)]
pub struct EventWriter {
    client: Client,
    controller: String,
    instance: String,
    counter: Arc<AtomicU64>,
}

/// One Event to create.
pub struct NewEvent {
    pub regarding: ObjectReference,
    pub warning: bool,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

impl EventWriter {
    pub fn new(client: Client, options: &ClusterOptions) -> Self {
        EventWriter {
            client,
            controller: options.ingress.controller_name.clone(),
            instance: options.instance.clone(),
            counter: Arc::default(),
        }
    }

    /// Creates the Event; `true` when it was written.
    pub async fn create(&self, event: NewEvent) -> bool {
        let namespace = event.regarding.namespace.clone().unwrap_or_else(|| CLUSTER_EVENTS_NAMESPACE.into());
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let unique = self.counter.fetch_add(1, Ordering::Relaxed);
        let regarding_name = event.regarding.name.clone().unwrap_or_default();
        let name = format!("{regarding_name}.{:x}{unique:x}", now.as_nanos());
        let mut note = event.note;
        if note.len() > NOTE_LIMIT {
            let mut cut = NOTE_LIMIT - 3;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let object = Event {
            metadata: ObjectMeta { name: Some(name), namespace: Some(namespace.clone()), ..Default::default() },
            event_time: Some(MicroTime(k8s_openapi::jiff::Timestamp::now())),
            type_: Some(if event.warning { "Warning" } else { "Normal" }.into()),
            reason: Some(event.reason.into()),
            action: Some(event.action.into()),
            note: Some(note),
            regarding: Some(event.regarding),
            reporting_controller: Some(self.controller.clone()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let mut waited = Duration::ZERO;
        loop {
            match api.create(&PostParams::default(), &object).await {
                // A brand-new API server answers before it has created the `default` namespace
                // (its bootstrap controller does that moments later): the first Event, about our
                // IngressClass, was lost to that race. Wait for the namespace a while.
                Err(kube::Error::Api(status)) if namespace_missing(&status) && waited < NAMESPACE_PATIENCE => {
                    if waited.is_zero() {
                        tracing::info!(
                            reason = event.reason,
                            namespace,
                            "the Event's namespace does not exist yet; waiting for it"
                        );
                    }
                    tokio::time::sleep(NAMESPACE_RETRY).await;
                    waited += NAMESPACE_RETRY;
                }
                result => return self.report(event.reason, result),
            }
        }
    }

    /// Whether an Event was written; a refusal is logged (at debug when RBAC forbids it).
    fn report(&self, reason: &str, result: Result<Event, kube::Error>) -> bool {
        match result {
            Ok(_) => true,
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::debug!(reason, "not allowed to create Events; skipped: {}", status.message);
                false
            }
            Err(e) => {
                tracing::warn!(reason, error = %e, "cannot create an Event");
                false
            }
        }
    }
}

/// A 404 about the namespace itself (not about the Event).
fn namespace_missing(status: &kube::core::Status) -> bool {
    status.code == 404 && status.details.as_ref().is_some_and(|d| d.kind == "namespaces")
}

/// A reference to an Ingress for `regarding`.
pub fn ingress_reference(ingress: &Ingress) -> ObjectReference {
    ObjectReference {
        api_version: Some("networking.k8s.io/v1".into()),
        kind: Some("Ingress".into()),
        namespace: ingress.metadata.namespace.clone(),
        name: ingress.metadata.name.clone(),
        uid: ingress.metadata.uid.clone(),
        resource_version: ingress.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Writes each audit record as an Event on our IngressClass.
pub async fn write_audit(
    writer: EventWriter,
    classes: Store<IngressClass>,
    options: Arc<ClusterOptions>,
    mut records: AuditEventsReceiver,
    leader: tokio::sync::watch::Receiver<bool>,
) {
    while let Some(record) = records.0.recv().await {
        let wanted = match options.audit_events {
            AuditEventsFrom::All => true,
            AuditEventsFrom::Off => false,
            AuditEventsFrom::Leader => record.reason != crate::audit::Reason::ConfigApplied || *leader.borrow(),
        };
        if !wanted {
            continue;
        }
        let class_name = &options.ingress.ingress_class;
        let uid = classes
            .state()
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(class_name))
            .and_then(|c| c.metadata.uid.clone());
        let regarding = ObjectReference {
            api_version: Some("networking.k8s.io/v1".into()),
            kind: Some("IngressClass".into()),
            name: Some(class_name.clone()),
            uid,
            ..Default::default()
        };
        let action = match record.reason {
            crate::audit::Reason::ConfigApplied => "Apply",
            crate::audit::Reason::ConfigPinned => "Pin",
            crate::audit::Reason::ConfigResumed => "Resume",
        };
        writer
            .create(NewEvent {
                regarding,
                warning: false,
                reason: record.reason.as_str(),
                action,
                note: record.message,
            })
            .await;
    }
}

/// While this replica is the leader, writes a Warning Event for each distinct problem of an
/// Ingress (once; a problem that goes away and comes back is reported again).
pub async fn report_diagnostics(
    writer: EventWriter,
    ingresses: Store<Ingress>,
    mut diagnostics: watch::Receiver<Arc<[Diagnostic]>>,
    mut leader: watch::Receiver<bool>,
) {
    let mut reported: HashSet<Diagnostic> = HashSet::new();
    loop {
        let current = diagnostics.borrow_and_update().clone();
        if *leader.borrow_and_update() {
            reported.retain(|d| current.contains(d));
            for diagnostic in current.iter() {
                if reported.contains(diagnostic) {
                    continue;
                }
                let Some(ingress) = find_ingress(&ingresses, &diagnostic.object) else { continue };
                writer
                    .create(NewEvent {
                        regarding: ingress_reference(&ingress),
                        warning: true,
                        reason: event_reason(diagnostic.severity),
                        action: "Compile",
                        note: diagnostic.message.clone(),
                    })
                    .await;
                reported.insert(diagnostic.clone());
            }
        } else {
            reported.clear();
        }
        tokio::select! {
            changed = diagnostics.changed() => if changed.is_err() { return },
            changed = leader.changed() => if changed.is_err() { return },
        }
    }
}

/// The Warning Event's reason: the Ingress is not served at all, or part of it is ignored.
fn event_reason(severity: Severity) -> &'static str {
    match severity {
        Severity::Error => "CompileFailed",
        Severity::Warning => "ConfigIgnored",
    }
}

/// The Ingress a diagnostic is about, if it is about one this replica watches.
fn find_ingress(store: &Store<Ingress>, object: &ObjectRef) -> Option<Arc<Ingress>> {
    if object.kind != "Ingress" || object.file.is_some() {
        return None;
    }
    let namespace = object.namespace.as_deref()?;
    store.get(&kube::runtime::reflector::ObjectRef::new(&object.name).within(namespace))
}
