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
}
