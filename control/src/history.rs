//! The history ring: the last N applied generations, newest last.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::SystemTime;

use ramjet_shared::Generation;

use crate::audit::diff::DiffCounts;

/// One applied generation and what is known about its application.
#[derive(Clone)]
pub struct Entry {
    pub generation: Arc<Generation>,
    pub applied_at: SystemTime,
    /// Whether it has been on the wire (at apply time, or later by a rollback or a release).
    pub published: bool,
    /// The diff sentence against the generation compiled before it.
    pub summary: String,
    pub counts: DiffCounts,
    /// The host groups that differ from the generation applied before it (the entry before it in
    /// the ring): what a rollback across this entry has to compare. `None` until the applier's
    /// diff, which follows the publish, is taken.
    pub changed_hosts: Option<Arc<[Arc<str>]>>,
    /// What Gateway API status says about the objects this generation was compiled from: what
    /// the status writer writes while it is served.
    pub gateway_status: Arc<crate::compile::status::Report>,
}

pub struct History {
    entries: VecDeque<Entry>,
    capacity: usize,
}

impl History {
    pub fn new(capacity: usize) -> Self {
        History { entries: VecDeque::with_capacity(capacity.max(1)), capacity: capacity.max(1) }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Records an entry, forgetting the oldest when full.
    pub fn push(&mut self, entry: Entry) {
        if self.entries.len() == self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    pub fn get(&self, number: u64) -> Option<&Entry> {
        self.entries.iter().find(|e| e.generation.number == number)
    }

    pub fn get_mut(&mut self, number: u64) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|e| e.generation.number == number)
    }

    pub fn newest(&self) -> Option<&Entry> {
        self.entries.back()
    }

    /// Newest first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().rev()
    }

    pub fn numbers(&self) -> Vec<u64> {
        self.iter().map(|e| e.generation.number).collect()
    }

    /// Every host group that changed at some step between generations `a` and `b` (either order):
    /// the only groups in which their tables can differ. `None` when either is no longer in the
    /// ring, or a step's diff is not taken yet.
    pub fn changed_between(&self, a: u64, b: u64) -> Option<Vec<Arc<str>>> {
        let at = |n: u64| self.entries.iter().position(|e| e.generation.number == n);
        let (i, j) = (at(a)?, at(b)?);
        let mut changed = Vec::new();
        for step in self.entries.range(i.min(j) + 1..=i.max(j)) {
            changed.extend(step.changed_hosts.as_ref()?.iter().cloned());
        }
        Some(changed)
    }
}
