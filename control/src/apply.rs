//! The applier: takes compiled generations, records them in the history ring, publishes them (or
//! holds them back while pinned), and carries out rollback and release.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

pub use ramjet_shared::admin::PinState;
use ramjet_shared::{CertId, Generation, Published};

use crate::audit::diff::{diff_tables, diff_tables_among, TableView};
use crate::audit::{AuditRecord, AuditTrail, Reason};
use crate::history::{Entry, History};
use crate::metrics::ControlMetrics;

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
    newest: Arc<Generation>,
    serving: Arc<Generation>,
    pinned: Option<u64>,
    /// Certificates no remembered generation names any more, and since when.
    unreferenced: HashMap<CertId, Instant>,
    ready: bool,
}

pub struct Applier {
    state: Mutex<State>,
    published: Arc<Published>,
    audit: AuditTrail,
    metrics: Arc<ControlMetrics>,
}

impl Applier {
    pub fn new(
        published: Arc<Published>,
        history_size: usize,
        audit: AuditTrail,
        metrics: Arc<ControlMetrics>,
    ) -> Self {
        let empty = published.current();
        Applier {
            state: Mutex::new(State {
                history: History::new(history_size),
                newest: empty.clone(),
                serving: empty,
                pinned: None,
                unreferenced: HashMap::new(),
                ready: false,
            }),
            published,
            audit,
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a newly compiled generation and publishes it, unless a pin holds it back.
    ///
    /// The diff against the last compiled generation is taken before the state is locked (only
    /// `apply` replaces that generation, and applies run one at a time), so the admin API, which
    /// reads the same state, never waits for a large diff.
    pub fn apply(&self, generation: Generation) {
        let generation = Arc::new(generation);
        let newest = self.lock().newest.clone();
        // One walk of the host groups finds the ones that changed; the diff looks at those only.
        let changed_hosts: Arc<[Arc<str>]> = TableView::changed_hosts(&newest.table, &generation.table).into();
        let d = diff_tables_among(&newest.table, &generation.table, changed_hosts.iter().map(|h| &**h));
        let mut state = self.lock();
        let published = state.pinned.is_none();
        let previous = state.newest.number;
        if published {
            self.publish(&mut state, generation.clone());
        }
        state.history.push(Entry {
            generation: generation.clone(),
            applied_at: SystemTime::now(),
            published,
            summary: d.sentence(),
            counts: d.counts(),
            changed_hosts,
        });
        state.newest = generation.clone();
        self.metrics.applied();
        self.prune_certificates(&mut state);
        for diag in generation.diagnostics.iter() {
            tracing::warn!(
                generation = generation.number,
                object = %diag.object,
                severity = diag.severity.as_str(),
                "{}",
                diag.message
            );
        }
        drop(state);
        self.audit.record(AuditRecord::new(Reason::ConfigApplied, previous, generation.number, published, d));
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
        let target = entry.generation.clone();
        let before = state.serving.clone();
        self.publish(&mut state, target.clone());
        if let Some(e) = state.history.get_mut(number) {
            e.published = true;
        }
        state.pinned = Some(number);
        self.metrics.set_pinned(true);
        let pin = pin_state(&state);
        let changed = state.history.changed_between(before.number, number);
        drop(state);
        let d = diff_between(&before, &target, changed);
        self.audit.record(AuditRecord::new(Reason::ConfigPinned, before.number, number, true, d));
        Ok(pin)
    }

    /// Releases the pin and publishes the newest generation. A no-op when not pinned (`false`).
    pub fn release(&self) -> (bool, PinState) {
        let mut state = self.lock();
        if state.pinned.is_none() {
            return (false, pin_state(&state));
        }
        let before = state.serving.clone();
        let newest = state.newest.clone();
        state.pinned = None;
        self.metrics.set_pinned(false);
        self.publish(&mut state, newest.clone());
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
    /// [`Published::publish`].
    fn publish(&self, state: &mut State, generation: Arc<Generation>) {
        let started = Instant::now();
        let store = self.published.certs().load_full();
        let with_new = Arc::new(store.with(generation.certificates.iter().cloned()));
        self.published.publish(with_new, generation.clone());
        self.metrics.published(started.elapsed(), generation.number);
        state.serving = generation;
        state.ready = true;
    }

    /// Drops certificates that no generation in the ring (nor the serving one) has named for the
    /// grace period.
    fn prune_certificates(&self, state: &mut State) {
        let mut keep: HashSet<CertId> = state.serving.cert_ids().into_iter().collect();
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
        let serving = state.serving.number;
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
    PinState { serving: state.serving.number, pinned: state.pinned, newest: state.newest.number }
}

#[cfg(test)]
mod tests;
