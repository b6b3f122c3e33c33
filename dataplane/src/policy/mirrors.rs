//! A worker's mirror bookkeeping: copies in flight, and endpoints resting after a failed connect
//! (see `crate::pipeline::mirror` for how copies are sent).

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ramjet_shared::{WorkerCounters, WorkerStats};
use rustc_hash::FxHashMap;

/// A worker's mirror bookkeeping, shared with its copy tasks.
pub(crate) struct Mirrors {
    pub in_flight: Cell<usize>,
    /// Endpoints that could not be connected to, and until when their copies are dropped unsent.
    resting: RefCell<FxHashMap<SocketAddr, Instant>>,
    stats: Arc<WorkerStats>,
    worker: usize,
}

impl Mirrors {
    pub fn new(stats: Arc<WorkerStats>, worker: usize) -> Self {
        Mirrors { in_flight: Cell::new(0), resting: RefCell::default(), stats, worker }
    }

    /// Whether copies to `addr` are dropped unsent for now (it could not be connected to lately).
    pub fn is_resting(&self, addr: SocketAddr) -> bool {
        let mut resting = self.resting.borrow_mut();
        if resting.is_empty() {
            return false;
        }
        match resting.get(&addr) {
            Some(until) if Instant::now() < *until => true,
            Some(_) => {
                resting.remove(&addr);
                false
            }
            None => false,
        }
    }

    pub fn rest(&self, addr: SocketAddr) {
        self.resting.borrow_mut().insert(addr, Instant::now() + MIRROR_REST);
    }

    pub fn counters(&self) -> &WorkerCounters {
        self.stats.worker(self.worker)
    }
}

/// Copies in flight per worker; beyond it a copy is dropped and counted.
pub const MIRRORS_IN_FLIGHT: usize = 64;
/// How long one copy may take, connect to last byte of the answer.
pub const MIRROR_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a mirror endpoint that could not be connected to is left alone.
pub const MIRROR_REST: Duration = Duration::from_secs(1);
