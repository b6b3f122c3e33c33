//! `limit-connections` counted for the whole data plane, as nginx's `limit_conn` counts for a
//! replica: every worker adds to the same counts, with atomics only (no lock).
//!
//! The counts live in one table of [`SLOTS`] 64-bit slots that the workers share, allocated the
//! first time a route with the limit is asked. A slot holds a client's fingerprint (40 bits of a hash of its zone and
//! address) and the number of its requests under way (24 bits); a count of 0 is a free slot. A
//! client's slot is the first in a window of [`WINDOW`] slots from its hash's home that already
//! holds it, else the first free one, claimed by compare-and-swap: two workers that claim at once
//! for one client meet on the same slot. A client whose window is full is refused, as nginx
//! refuses one its zone has no room for.
//!
//! Two clients whose fingerprints collide (about one pair in 2^40) would count together; a slot
//! freed while the same client's requests still count further along its window can give that
//! client a second slot for a moment, so a burst at that instant may pass by a request or two.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Slots in the table (a power of two): 512 KiB.
pub const SLOTS: usize = 1 << 16;
/// How far from its home a client's slot may be.
pub const WINDOW: usize = 8;
const COUNT_BITS: u32 = 24;
const COUNT: u64 = (1 << COUNT_BITS) - 1;

/// The workers' shared counts (one per data plane, shared through an `Arc`).
#[derive(Default)]
pub(crate) struct UnderWayTable {
    slots: OnceLock<Box<[AtomicU64]>>,
}

/// Holds one request's place in its client's count until dropped.
pub(crate) struct UnderWay<'t> {
    slot: &'t AtomicU64,
}

impl Drop for UnderWay<'_> {
    fn drop(&mut self) {
        // The count is the low bits and is at least 1 while this guard lives.
        self.slot.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a slot says to a client.
enum Look<'t> {
    Taken(UnderWay<'t>),
    Full,
    /// Another client's, or free when only the client's own slot is looked for.
    Elsewhere,
}

impl UnderWayTable {
    /// A place for one more request of `client` in `zone` when fewer than `max` are under way;
    /// `None` when `max` are (or the client's window has no room).
    pub fn admit(&self, zone: u64, client: IpAddr, max: u32) -> Option<UnderWay<'_>> {
        let mut hasher = rustc_hash::FxHasher::default();
        (zone, client).hash(&mut hasher);
        // FxHash's low bits are weak: mix before taking the home and the fingerprint.
        let hash = ramjet_shared::hash_by::mix(hasher.finish());
        let home = hash as usize & (SLOTS - 1);
        let fingerprint = (hash >> COUNT_BITS) | 1;
        let slots = self.slots.get_or_init(|| (0..SLOTS).map(|_| AtomicU64::new(0)).collect());
        // The client's own slot first, wherever it is in the window; then the first free one.
        for claim in [false, true] {
            for k in 0..WINDOW {
                match look(&slots[(home + k) & (SLOTS - 1)], fingerprint, u64::from(max), claim) {
                    Look::Taken(place) => return Some(place),
                    Look::Full => return None,
                    Look::Elsewhere => {}
                }
            }
        }
        None
    }
}

fn look(slot: &AtomicU64, fingerprint: u64, max: u64, claim: bool) -> Look<'_> {
    let mut seen = slot.load(Ordering::Acquire);
    loop {
        let (holder, count) = (seen >> COUNT_BITS, seen & COUNT);
        let next = match (count, holder == fingerprint) {
            (0, _) if claim => fingerprint << COUNT_BITS | 1,
            (0, _) => return Look::Elsewhere,
            (_, false) => return Look::Elsewhere,
            (n, true) if n >= max.min(COUNT) => return Look::Full,
            (_, true) => seen + 1,
        };
        match slot.compare_exchange_weak(seen, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Look::Taken(UnderWay { slot }),
            Err(now) => seen = now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_share_one_count_per_client() {
        let table = UnderWayTable::default();
        let client: IpAddr = "192.0.2.77".parse().unwrap();
        let held: Vec<UnderWay> = std::thread::scope(|s| {
            let table = &table;
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(move || (0..10).filter_map(|_| table.admit(91, client, 8)).collect::<Vec<_>>()))
                .collect();
            workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(held.len(), 8, "eight places, whichever thread asked");
        assert!(table.admit(91, client, 8).is_none());
        assert!(table.admit(92, client, 8).is_some(), "another zone counts apart");
        drop(held);
        let again: Vec<_> = (0..8).filter_map(|_| table.admit(91, client, 8)).collect();
        assert_eq!(again.len(), 8, "every place came back");
    }

    #[test]
    fn many_clients_each_keep_their_own_count() {
        let table = UnderWayTable::default();
        let clients: Vec<IpAddr> =
            (0..2000).map(|i| IpAddr::from([198, 51, (i / 256) as u8, (i % 256) as u8])).collect();
        let held: Vec<UnderWay> = clients.iter().filter_map(|c| table.admit(93, *c, 1)).collect();
        assert_eq!(held.len(), clients.len());
        assert!(clients.iter().all(|c| table.admit(93, *c, 1).is_none()), "each at its limit of one");
    }
}
