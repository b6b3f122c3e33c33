//! Canary auto-promotion, the I/O around [`crate::canary::promotion`]: only the Lease holder
//! decides. Every quarter second it looks at each auto-promoting canary of the last compile — a
//! canary Ingress or an HTTPRoute, handled alike, each on its own object:
//!
//! * pinned (a rollback): nothing moves and nothing is written; one `CanaryPaused` Event. After
//!   the release the window starts afresh;
//! * no state yet (or a state for other backends): it starts (`CanaryStarted`);
//! * a window of `canary-interval` has passed: the canary's figures since the last decision —
//!   from this replica's data plane, per backend, plus every other replica's when `--peers`
//!   names them ([`super::peers`]) — step it, count a failed check, promote or abort it
//!   ([`decide`]), with an Event on the canary Ingress (or the HTTPRoute) and a record on the
//!   audit log target and webhook;
//! * its state differs from the `ramjet.dev/canary-state` annotation: written by server-side
//!   apply as field manager `ramjet` (that annotation alone, so the user's own are never touched).
//!
//! Every replica compiles the weight from the annotation, so they all serve the same one, and a
//! restart (or a new leader) resumes from it. Somebody else changing the annotation after ramjet
//! wrote it is put right, but only [`MAX_REVERTS`] times: then ramjet stops promoting that canary
//! and says so with a Warning Event (`CanaryHalted`) rather than fight. Deleting the annotation
//! starts promotion over.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource};
use ramjet_shared::WorkerStats;
use serde_json::json;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::events::{ingress_reference, EventWriter, NewEvent};
use super::watch::Stores;
use super::FIELD_MANAGER;
use crate::apply::Applier;
use crate::audit::{AuditTrail, CanaryRecord};
use crate::canary::promotion::{
    decide, start, CanaryKind, CanaryPlan, CanaryState, Figures, FleetTotals, Outcome, Phase, STATE_ANNOTATION,
};
use crate::gateway_api::HttpRoute;

/// Changes by another writer to ramjet's annotation, after which ramjet stops promoting.
pub const MAX_REVERTS: u32 = 3;
/// How often the canaries are looked at.
const TICK: Duration = Duration::from_millis(250);
/// How long a write that failed waits before it is tried again.
const WRITE_RETRY: Duration = Duration::from_secs(5);

/// What promotion needs from the rest of the process.
pub struct PromotionContext {
    /// The data plane's counters (per backend).
    pub stats: Arc<WorkerStats>,
    /// Whether a rollback pin holds the configuration.
    pub applier: Arc<Applier>,
    pub audit: AuditTrail,
    /// The auto-promoting canaries of the latest compile.
    pub plans: watch::Receiver<Arc<[CanaryPlan]>>,
    /// `--peers`: the other replicas' admin listeners (`HOST:PORT` names, resolved at each poll).
    pub peers: Vec<String>,
    /// This process's instance id, to recognise its own answer among the peers'.
    pub instance: String,
}

/// What the deciding replica remembers of one canary.
struct Tracker {
    /// Where promotion stands, as ramjet decided it (`None`: not read or started yet).
    state: Option<CanaryState>,
    /// The counters at the start of the window (each replica's), and when it started.
    baseline: FleetTotals,
    since: Instant,
    written: Option<Written>,
    reverts: u32,
    halted: bool,
    paused: bool,
    next_write: Instant,
}

/// ramjet's last write of the annotation: its value, and the resourceVersions before and after.
struct Written {
    value: String,
    before: Option<String>,
    after: Option<String>,
}

/// Runs while the process runs; decides only while `leader` says this replica leads.
pub async fn run(
    client: Client,
    stores: Stores,
    mut context: PromotionContext,
    leader: watch::Receiver<bool>,
    events: EventWriter,
) {
    stores.ready().await;
    let (peers_tx, peers) = watch::channel(Arc::from(Vec::new()));
    if !context.peers.is_empty() {
        let poll = super::peers::PeerPoll {
            names: context.peers.clone(),
            own_instance: context.instance.clone(),
            leader: leader.clone(),
            plans: context.plans.clone(),
        };
        tokio::spawn(super::peers::run(poll, peers_tx));
    }
    let mut trackers: HashMap<(CanaryKind, String, String), Tracker> = HashMap::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !*leader.borrow() {
            // A new term starts from the annotations, with fresh windows.
            trackers.clear();
            continue;
        }
        let plans = context.plans.borrow_and_update().clone();
        trackers.retain(|(kind, ns, name), _| {
            plans.iter().any(|p| p.kind == *kind && p.namespace == *ns && p.name == *name)
        });
        if plans.is_empty() {
            continue;
        }
        let snapshot = context.stats.route_series();
        let fleet = peers.borrow().clone();
        let pinned = context.applier.pin_state().pinned.is_some();
        for plan in plans.iter() {
            let Some(object) = Object::find(&stores, plan) else { continue };
            let totals = FleetTotals::of(&snapshot, &fleet, &plan.series);
            let key = (plan.kind, plan.namespace.clone(), plan.name.clone());
            let tracker = trackers.entry(key).or_insert_with(|| Tracker {
                state: None,
                baseline: totals.clone(),
                since: Instant::now(),
                written: None,
                reverts: 0,
                halted: false,
                paused: false,
                next_write: Instant::now(),
            });
            let canary = Canary { client: &client, context: &context, events: &events, plan, object: &object };
            canary.look(tracker, totals, pinned).await;
        }
    }
}

/// The object that carries a canary's annotations, as the watch last saw it.
enum Object {
    Ingress(Arc<Ingress>),
    HttpRoute(Arc<HttpRoute>),
}

impl Object {
    /// The plan's object in the watch's stores (HTTPRoutes once the Gateway API is watched).
    fn find(stores: &Stores, plan: &CanaryPlan) -> Option<Object> {
        match plan.kind {
            CanaryKind::Ingress => {
                stores.ingresses.get(&ObjectRef::new(&plan.name).within(&plan.namespace)).map(Object::Ingress)
            }
            CanaryKind::HttpRoute => {
                let routes = &stores.gateway.get()?.http_routes;
                routes.get(&ObjectRef::new(&plan.name).within(&plan.namespace)).map(Object::HttpRoute)
            }
        }
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Object::Ingress(i) => &i.metadata,
            Object::HttpRoute(r) => &r.metadata,
        }
    }

    /// What its Events are about.
    fn reference(&self) -> ObjectReference {
        match self {
            Object::Ingress(i) => ingress_reference(i),
            Object::HttpRoute(r) => ObjectReference {
                api_version: Some(HttpRoute::api_version(&()).into()),
                kind: Some(HttpRoute::kind(&()).into()),
                namespace: r.metadata.namespace.clone(),
                name: r.metadata.name.clone(),
                uid: r.metadata.uid.clone(),
                resource_version: r.metadata.resource_version.clone(),
                ..Default::default()
            },
        }
    }
}

/// One canary, looked at once.
struct Canary<'a> {
    client: &'a Client,
    context: &'a PromotionContext,
    events: &'a EventWriter,
    plan: &'a CanaryPlan,
    object: &'a Object,
}

impl Canary<'_> {
    async fn look(&self, tracker: &mut Tracker, totals: FleetTotals, pinned: bool) {
        if tracker.halted {
            return;
        }
        let now = Instant::now();
        if pinned {
            if !tracker.paused {
                tracker.paused = true;
                let note = "a rollback pin holds the configuration: auto-promotion is paused (no step, no write) until it is released".to_string();
                self.tell("CanaryPaused", false, tracker, None, note).await;
            }
            return;
        }
        if tracker.paused {
            tracker.paused = false;
            tracker.baseline = totals.clone();
            tracker.since = now;
        }
        let meta = self.object.meta();
        let current = meta.annotations.as_ref().and_then(|a| a.get(STATE_ANNOTATION)).map(String::as_str);
        let version = meta.resource_version.clone();
        if let Some(w) = &tracker.written {
            let caught_up = version == w.before || version == w.after;
            if !caught_up && current != Some(w.value.as_str()) {
                tracker.written = None;
                match current {
                    // Deleted: the user starts promotion over.
                    None => tracker.state = None,
                    Some(_) => {
                        tracker.reverts += 1;
                        if tracker.reverts >= MAX_REVERTS {
                            tracker.halted = true;
                            let note = format!(
                                "{STATE_ANNOTATION} was changed {} times by another writer after ramjet wrote it; ramjet stops promoting this canary so as not to fight (the weight in the annotation is served)",
                                tracker.reverts
                            );
                            self.tell("CanaryHalted", true, tracker, None, note).await;
                            return;
                        }
                    }
                }
            }
        }
        if tracker.state.is_none() {
            let found = current.and_then(CanaryState::parse).filter(|s| s.backend == self.plan.backend);
            match found {
                // A restart, or a new leader: resume, with a fresh window.
                Some(state) => {
                    tracker.baseline = totals.clone();
                    tracker.since = now;
                    tracker.state = Some(state);
                }
                None => {
                    let (state, note) = start(&self.plan.settings, &self.plan.backend, &timestamp());
                    tracker.state = Some(state);
                    tracker.baseline = totals.clone();
                    tracker.since = now;
                    self.tell(Outcome::CanaryStarted.as_str(), false, tracker, None, note).await;
                }
            }
        }
        let Some(state) = tracker.state.clone() else { return };
        if state.phase == Phase::Progressing && now.duration_since(tracker.since) >= self.plan.settings.interval {
            let figures = totals.since(&tracker.baseline);
            let plan = self.plan;
            let (next, outcome, note) = decide(&plan.settings, plan.kind, plan.total, &state, &figures, &timestamp());
            tracker.state = Some(next);
            tracker.baseline = totals;
            tracker.since = now;
            self.tell(outcome.as_str(), outcome.is_warning(), tracker, Some(&figures), note).await;
        }
        self.write(tracker, current, version).await;
    }

    /// Writes the state when the annotation differs from it (and the watch is not merely behind
    /// ramjet's own last write).
    async fn write(&self, tracker: &mut Tracker, current: Option<&str>, version: Option<String>) {
        let Some(state) = &tracker.state else { return };
        let value = state.render();
        if current == Some(value.as_str()) || Instant::now() < tracker.next_write {
            return;
        }
        if let Some(w) = &tracker.written {
            if w.value == value && (version == w.before || version == w.after) {
                return;
            }
        }
        let (namespace, name) = (&self.plan.namespace, &self.plan.name);
        let metadata = json!({ "name": name, "namespace": namespace, "annotations": { STATE_ANNOTATION: value } });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        // The apply names that one annotation: the user's own fields are never touched.
        let written = match self.plan.kind {
            CanaryKind::Ingress => {
                let api: Api<Ingress> = Api::namespaced(self.client.clone(), namespace);
                let patch = json!({ "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata });
                api.patch(name, &params, &Patch::Apply(&patch)).await.map(|o| o.metadata.resource_version)
            }
            CanaryKind::HttpRoute => {
                let api: Api<HttpRoute> = Api::namespaced(self.client.clone(), namespace);
                let patch = json!({
                    "apiVersion": HttpRoute::api_version(&()),
                    "kind": HttpRoute::kind(&()),
                    "metadata": metadata,
                });
                api.patch(name, &params, &Patch::Apply(&patch)).await.map(|o| o.metadata.resource_version)
            }
        };
        let object = format!("{} {namespace}/{name}", self.plan.kind.as_str());
        match written {
            Ok(after) => {
                tracing::debug!(%object, state = %value, "canary state written");
                tracker.written = Some(Written { value, before: version, after });
            }
            Err(e) => {
                tracker.next_write = Instant::now() + WRITE_RETRY;
                tracing::warn!(%object, error = %e, "cannot write the canary state; retrying in 5 s");
            }
        }
    }

    /// One decision down every channel: an Event on the canary's object (the canary Ingress, or
    /// the HTTPRoute), the audit log target and the webhook.
    async fn tell(
        &self,
        reason: &'static str,
        warning: bool,
        tracker: &Tracker,
        figures: Option<&Figures>,
        note: String,
    ) {
        let state = tracker.state.as_ref();
        self.context.audit.record_canary(CanaryRecord {
            event: "canary",
            reason,
            // namespace/name of the canary Ingress or of the HTTPRoute (the Event says which kind).
            ingress: format!("{}/{}", self.plan.namespace, self.plan.name),
            weight: state.map_or(0, |s| s.served_weight(self.plan.total)),
            total: self.plan.total,
            failures: state.map_or(0, |s| s.failures),
            requests: figures.map(|f| f.requests),
            success_rate: figures.map(|f| f.success_rate),
            p99_ms: figures.map(|f| f.p99.as_secs_f64() * 1000.0),
            message: note.clone(),
        });
        let event = NewEvent { regarding: self.object.reference(), warning, reason, action: "Promote", note };
        self.events.create(event).await;
    }
}

/// Now, in RFC 3339 to the second.
fn timestamp() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
