//! The applier: takes compiled generations, publishes them (or holds them back while pinned),
//! records them in the history ring, and carries out rollback and release.
//!
//! Publishing comes first: the pointer store never waits for the audit diff, which is taken after
//! it, off the lock. Each generation travels with what its compile said beside the table
//! ([`Compiled`]: the Gateway API status report), and [`Applier::served`] tells the status writer
//! what the generation on the wire says — so status always describes the table being served.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

pub use ramjet_shared::admin::PinState;
use ramjet_shared::{CertId, Diagnostic, Generation, Published};
use tokio::sync::watch;

use crate::audit::diff::{diff_tables, diff_tables_among, DiffCounts, TableView};
use crate::audit::{AuditRecord, AuditTrail, Reason};
use crate::compile::status;
use crate::history::{Entry, History};
use crate::metrics::ControlMetrics;

/// A compiled generation and what its compile said beside the table: control-only data that the
/// data plane never reads, so it lives here rather than in [`Generation`].
#[derive(Clone)]
pub struct Compiled {
    pub generation: Arc<Generation>,
    /// What Gateway API status says about the objects this table was compiled from.
    pub gateway_status: Arc<status::Report>,
}

impl From<Generation> for Compiled {
    /// A generation with nothing to say about Gateway API objects (a routes file, a test).
    fn from(generation: Generation) -> Self {
        Compiled { generation: Arc::new(generation), gateway_status: Arc::default() }
    }
}

/// Certificates no remembered generation names are dropped after this grace period, so a handshake
/// that loaded a table just before a publish still finds that table's certificates.
const CERT_GRACE: Duration = Duration::from_secs(10);

/// Why a rollback was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RollbackError {
    /// The generation is not (or no longer) in the history ring.
    #[error("generation {wanted} is not in the history; the generations that are: {available:?}")]
    NotInHistory { wanted: u64, available: Vec<u64> },
    /// No generation in the ring has a digest with this prefix.
    #[error("no generation in the history has a digest starting with {prefix}; the ring holds {}", .available.join(", "))]
    DigestNotInHistory {
        prefix: String,
        /// `generation:digest` of each entry, newest first.
        available: Vec<String>,
    },
    /// The prefix names more than one compiled table.
    #[error("digest prefix {prefix} is ambiguous: it matches {}; give more digits", .matches.join(", "))]
    AmbiguousDigest { prefix: String, matches: Vec<String> },
}

struct State {
    history: History,
    /// The last compiled generation: what new ones are diffed against, and what a release publishes.
    newest: Compiled,
    serving: Compiled,
    pinned: Option<u64>,
    /// Certificates no remembered generation names any more, and since when.
    unreferenced: HashMap<CertId, Instant>,
    ready: bool,
    /// The diagnostics of the last applied generation: what has been logged already.
    logged: Arc<[Diagnostic]>,
}

pub struct Applier {
    state: Mutex<State>,
    published: Arc<Published>,
    audit: AuditTrail,
    metrics: Arc<ControlMetrics>,
    /// The generation on the wire and its status report; `None` until the first publish.
    served: watch::Sender<Option<Compiled>>,
}

impl Applier {
    /// The control thread's counters, for the parts of it that report through them.
    pub fn metrics(&self) -> &Arc<ControlMetrics> {
        &self.metrics
    }

    pub fn new(
        published: Arc<Published>,
        history_size: usize,
        audit: AuditTrail,
        metrics: Arc<ControlMetrics>,
    ) -> Self {
        let empty = Compiled { generation: published.current(), gateway_status: Arc::default() };
        Applier {
            state: Mutex::new(State {
                history: History::new(history_size),
                newest: empty.clone(),
                serving: empty,
                pinned: None,
                unreferenced: HashMap::new(),
                ready: false,
                logged: Arc::from(Vec::new()),
            }),
            published,
            audit,
            metrics,
            served: watch::channel(None).0,
        }
    }

    /// The generation being served and its compile's status report, from the first publish on:
    /// after an apply that was published, a rollback, a release — never a generation held back by
    /// a pin. What the Gateway API status writer writes from.
    pub fn served(&self) -> watch::Receiver<Option<Compiled>> {
        self.served.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Publishes a newly compiled generation, unless a pin holds it back, and records it in the
    /// ring. The generation compiled last again (the same `Arc`: its table did not change) with a
    /// new status report only replaces that generation's report.
    ///
    /// The publish comes first; the diff against the last compiled generation is taken after it,
    /// outside the lock (only `apply` replaces that generation, and applies run one at a time), so
    /// neither the pointer store nor the admin API waits for a large diff. Until it is taken, the
    /// ring's entry has no summary and no changed hosts (a rollback across it compares all hosts).
    pub fn apply(&self, compiled: impl Into<Compiled>) {
        let compiled = compiled.into();
        let generation = compiled.generation.clone();
        let mut state = self.lock();
        if Arc::ptr_eq(&state.newest.generation, &generation) {
            self.restate(&mut state, compiled);
            return;
        }
        let newest = state.newest.generation.clone();
        let published = state.pinned.is_none();
        if published {
            self.publish(&mut state, compiled.clone());
        }
        state.history.push(Entry {
            generation: generation.clone(),
            applied_at: SystemTime::now(),
            published,
            summary: String::new(),
            counts: DiffCounts::default(),
            changed_hosts: None,
            gateway_status: compiled.gateway_status.clone(),
        });
        state.newest = compiled;
        self.metrics.applied();
        self.prune_certificates(&mut state);
        let logged = std::mem::replace(&mut state.logged, generation.diagnostics.clone());
        drop(state);
        log_diagnostics(generation.number, &logged, &generation.diagnostics);
        // One walk of the host groups finds the ones that changed; the diff looks at those only.
        let changed_hosts: Arc<[Arc<str>]> = TableView::changed_hosts(&newest.table, &generation.table).into();
        let d = diff_tables_among(&newest.table, &generation.table, changed_hosts.iter().map(|h| &**h));
        if let Some(entry) = self.lock().history.get_mut(generation.number) {
            entry.summary = d.sentence();
            entry.counts = d.counts();
            entry.changed_hosts = Some(changed_hosts);
        }
        self.audit.record(AuditRecord::new(Reason::ConfigApplied, newest.number, generation.number, published, d));
    }

    /// The newest generation's status report is `compiled`'s from now on (same table, newer
    /// objects); the served one too, when that generation is on the wire.
    fn restate(&self, state: &mut State, compiled: Compiled) {
        if let Some(entry) = state.history.get_mut(compiled.generation.number) {
            entry.gateway_status = compiled.gateway_status.clone();
        }
        if Arc::ptr_eq(&state.serving.generation, &compiled.generation) {
            state.serving = compiled.clone();
            self.served.send_replace(Some(compiled.clone()));
        }
        state.newest = compiled;
    }

    /// Pins the generation whose compiled-table digest starts with `prefix` (lowercase hex): the same
    /// table on every replica that compiled the same cluster state, whatever its number here. When
    /// the ring holds that table more than once, the newest of them.
    pub fn rollback_to_digest(&self, prefix: &str) -> Result<PinState, RollbackError> {
        let number = {
            let state = self.lock();
            let label = |e: &crate::history::Entry| format!("{}:{}", e.generation.number, e.generation.digest.short());
            let matching: Vec<&crate::history::Entry> =
                state.history.iter().filter(|e| e.generation.digest.hex().starts_with(prefix)).collect();
            let Some(newest) = matching.iter().max_by_key(|e| e.generation.number) else {
                let available = state.history.iter().map(label).collect();
                return Err(RollbackError::DigestNotInHistory { prefix: prefix.into(), available });
            };
            if matching.iter().any(|e| e.generation.digest != newest.generation.digest) {
                let matches = matching.iter().map(|e| label(e)).collect();
                return Err(RollbackError::AmbiguousDigest { prefix: prefix.into(), matches });
            }
            newest.generation.number
        };
        self.rollback(number)
    }

    /// Puts generation `number` from the ring back on the wire and pins it.
    pub fn rollback(&self, number: u64) -> Result<PinState, RollbackError> {
        let mut state = self.lock();
        let Some(entry) = state.history.get(number) else {
            return Err(RollbackError::NotInHistory { wanted: number, available: state.history.numbers() });
        };
        let target = Compiled { generation: entry.generation.clone(), gateway_status: entry.gateway_status.clone() };
        let before = state.serving.generation.clone();
        self.publish(&mut state, target.clone());
        if let Some(e) = state.history.get_mut(number) {
            e.published = true;
        }
        state.pinned = Some(number);
        self.metrics.set_pinned(true);
        let pin = pin_state(&state);
        let changed = state.history.changed_between(before.number, number);
        drop(state);
        let d = diff_between(&before, &target.generation, changed);
        self.audit.record(AuditRecord::new(Reason::ConfigPinned, before.number, number, true, d));
        Ok(pin)
    }

    /// Releases the pin and publishes the newest generation. A no-op when not pinned (`false`).
    pub fn release(&self) -> (bool, PinState) {
        let mut state = self.lock();
        if state.pinned.is_none() {
            return (false, pin_state(&state));
        }
        let before = state.serving.generation.clone();
        let newest = state.newest.clone();
        state.pinned = None;
        self.metrics.set_pinned(false);
        self.publish(&mut state, newest.clone());
        let newest = newest.generation;
        if let Some(e) = state.history.get_mut(newest.number) {
            e.published = true;
        }
        self.prune_certificates(&mut state);
        let pin = pin_state(&state);
        let changed = state.history.changed_between(before.number, newest.number);
        drop(state);
        let d = diff_between(&before, &newest, changed);
        self.audit.record(AuditRecord::new(Reason::ConfigResumed, before.number, newest.number, true, d));
        (true, pin)
    }

    /// Certificates first (old store plus this generation's), then the table: see
    /// [`Published::publish`]. Then the status writer hears what is served now.
    fn publish(&self, state: &mut State, compiled: Compiled) {
        let started = Instant::now();
        let generation = &compiled.generation;
        let store = self.published.certs().load_full();
        let with_new = Arc::new(store.with(generation.certificates.iter().cloned()));
        self.published.publish(with_new, generation.clone());
        self.metrics.published(started.elapsed(), generation.number);
        state.serving = compiled.clone();
        state.ready = true;
        self.served.send_replace(Some(compiled));
    }

    /// Drops certificates that no generation in the ring (nor the serving one) has named for the
    /// grace period.
    fn prune_certificates(&self, state: &mut State) {
        let mut keep: HashSet<CertId> = state.serving.generation.cert_ids().into_iter().collect();
        for e in state.history.iter() {
            keep.extend(e.generation.cert_ids());
        }
        let store = self.published.certs().load_full();
        let now = Instant::now();
        let mut drop_ids = HashSet::new();
        for id in store.ids() {
            if keep.contains(id) {
                state.unreferenced.remove(id);
            } else {
                let since = *state.unreferenced.entry(*id).or_insert(now);
                if now.duration_since(since) >= CERT_GRACE {
                    drop_ids.insert(*id);
                }
            }
        }
        if !drop_ids.is_empty() {
            self.published.set_certs(Arc::new(store.retain(|id| !drop_ids.contains(id))));
            state.unreferenced.retain(|id, _| !drop_ids.contains(id));
        }
    }

    /// Runs the certificate pruning on its own (periodically, so memory is released without
    /// publishes).
    pub fn prune(&self) {
        let mut state = self.lock();
        self.prune_certificates(&mut state);
    }

    /// Whether the first generation has been published.
    pub fn is_ready(&self) -> bool {
        self.lock().ready
    }

    pub fn pin_state(&self) -> PinState {
        pin_state(&self.lock())
    }

    /// The ring, newest first, with the serving and pin state.
    pub fn snapshot(&self) -> (PinState, usize, Vec<(Entry, bool)>) {
        let state = self.lock();
        let serving = state.serving.generation.number;
        let entries = state.history.iter().map(|e| (e.clone(), e.generation.number == serving)).collect();
        (pin_state(&state), state.history.capacity(), entries)
    }
}

/// The diff from one generation of the ring to another: only the host groups that changed at some
/// step between them are compared (`changed`), so a pin or release costs what differs, not the
/// table's size; all of them when a generation left the ring.
fn diff_between(from: &Generation, to: &Generation, changed: Option<Vec<Arc<str>>>) -> crate::audit::diff::TableDiff {
    match changed {
        Some(hosts) => diff_tables_among(&from.table, &to.table, hosts.iter().map(|h| &**h)),
        None => diff_tables(&from.table, &to.table),
    }
}

fn pin_state(state: &State) -> PinState {
    PinState { serving: state.serving.generation.number, pinned: state.pinned, newest: state.newest.generation.number }
}

/// Logs the diagnostics of generation `number` that the one applied before it did not have (new,
/// or changed: a changed message is a new diagnostic), at warn, and those it no longer has, at
/// info — not every diagnostic on every generation. Both lists are sorted (see
/// [`crate::compile::Compiler::finish`]).
fn log_diagnostics(number: u64, before: &[Diagnostic], now: &[Diagnostic]) {
    let (appeared, gone) = diagnostic_changes(before, now);
    for diag in appeared {
        tracing::warn!(
            generation = number,
            object = %diag.object,
            severity = diag.severity.as_str(),
            "{}",
            diag.message
        );
    }
    for diag in gone {
        tracing::info!(generation = number, object = %diag.object, "resolved: {}", diag.message);
    }
}

/// What is in `now` and not in `before`, and what is in `before` and not in `now` (both sorted).
fn diagnostic_changes<'d>(
    before: &'d [Diagnostic],
    now: &'d [Diagnostic],
) -> (Vec<&'d Diagnostic>, Vec<&'d Diagnostic>) {
    let appeared = now.iter().filter(|d| before.binary_search(d).is_err()).collect();
    let gone = before.iter().filter(|d| now.binary_search(d).is_err()).collect();
    (appeared, gone)
}

#[cfg(test)]
mod tests;
