//! Per-client limits of a route (ingress-nginx's `limit-rps`, `limit-rpm`, `limit-connections`).
//! The rates are counted by each worker on its own: no lock, no shared counter. ingress-nginx
//! counts per replica (nginx's shared-memory zones); with N workers a client spread over several
//! connections may get up to N times a rate (docs/ingress.md says so). The concurrency limit is
//! counted for the whole process ([`super::under_way`]), as nginx's `limit_conn` is.
//!
//! The rates follow nginx's `limit_req … nodelay` exactly: a client's *excess* (in thousandths of
//! a request) drains at the rate and grows by one per request; a request that would take it past
//! the burst is refused and changes nothing. A new client starts at zero. The concurrency limit
//! counts requests under way (an HTTP/1.1 exchange, an HTTP/2 stream), as `limit_conn` does.
//!
//! Memory is bounded: each worker's rate table holds at most [`MAX_CLIENTS`] clients; the
//! periodic sweep forgets clients whose excess has drained. A new client that finds a table full
//! is refused, as nginx refuses one it cannot find room for.

use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ramjet_shared::ClientLimits;
use rustc_hash::FxHashMap;

pub(crate) use super::under_way::UnderWay;
use super::under_way::UnderWayTable;

/// Clients each table of a worker keeps at most.
pub const MAX_CLIENTS: usize = 65_536;

/// A client's standing against one rate: nginx's `excess`, when it was last updated, and the
/// rate it drains at (thousandths of a request per second).
#[derive(Clone, Copy)]
struct Standing {
    excess: u64,
    at: Instant,
    drain: u64,
}

impl Standing {
    /// What is left of the excess at `now`.
    fn drained(&self, now: Instant) -> u64 {
        let ms = now.saturating_duration_since(self.at).as_millis() as u64;
        self.excess.saturating_sub(self.drain.saturating_mul(ms) / 1000)
    }
}

/// Which rate of a zone: per second or per minute.
type RateKey = (u64, bool, IpAddr);

/// One worker's rate counts, for every zone, and the concurrency counts all workers share.
#[derive(Default)]
pub(crate) struct ClientLimiter {
    rates: RefCell<FxHashMap<RateKey, Standing>>,
    under_way: Arc<UnderWayTable>,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OverLimit;

impl ClientLimiter {
    /// Admits a request from `client` under `limits`, or refuses it. An admitted request holds a
    /// place in the concurrency limit (when there is one) for as long as the guard lives.
    pub fn admit(&self, limits: &ClientLimits, client: IpAddr) -> Result<Option<UnderWay<'_>>, OverLimit> {
        self.admit_at(limits, client, Instant::now())
    }

    /// A limiter whose concurrency counts are `shared` with the other workers'.
    pub fn sharing(shared: Arc<UnderWayTable>) -> Self {
        ClientLimiter { rates: RefCell::default(), under_way: shared }
    }

    fn admit_at(&self, limits: &ClientLimits, client: IpAddr, now: Instant) -> Result<Option<UnderWay<'_>>, OverLimit> {
        let client = client.to_canonical();
        if limits.exempt.iter().any(|b| b.contains(client)) {
            return Ok(None);
        }
        self.take_rates(limits, client, now)?;
        let Some(max) = limits.concurrent else { return Ok(None) };
        self.under_way.admit(limits.zone, client, max).map(Some).ok_or(OverLimit)
    }

    /// nginx's `limit_req` with `nodelay` over each of the zone's rates: refused when any rate
    /// would be exceeded, and then no rate counts the request.
    fn take_rates(&self, limits: &ClientLimits, client: IpAddr, now: Instant) -> Result<(), OverLimit> {
        let rates = [(false, limits.per_second), (true, limits.per_minute)];
        if rates.iter().all(|(_, r)| r.is_none()) {
            return Ok(());
        }
        let mut table = self.rates.borrow_mut();
        let mut next = [None, None];
        for (slot, (per_minute, rate)) in next.iter_mut().zip(rates) {
            let Some(rate) = rate else { continue };
            let key = (limits.zone, per_minute, client);
            let excess = match table.get(&key) {
                // A new client: nginx admits it with an excess of zero.
                None if table.len() >= MAX_CLIENTS => return Err(OverLimit),
                None => 0,
                Some(standing) => {
                    let excess = standing.drained(now) + 1000;
                    if excess > rate.burst * 1000 {
                        return Err(OverLimit);
                    }
                    excess
                }
            };
            *slot = Some((key, Standing { excess, at: now, drain: rate.milli_per_second() }));
        }
        for (key, standing) in next.into_iter().flatten() {
            table.insert(key, standing);
        }
        Ok(())
    }

    /// Forgets clients with nothing left to count: their excess has drained to zero. Run
    /// periodically by the worker.
    pub fn sweep(&self) {
        self.sweep_at(Instant::now())
    }

    fn sweep_at(&self, now: Instant) {
        self.rates.borrow_mut().retain(|_, standing| standing.drained(now) > 0);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ramjet_shared::Rate;

    use super::*;

    fn limits(rps: Option<u64>, burst: u64, concurrent: Option<u32>) -> ClientLimits {
        ClientLimits {
            zone: 7,
            per_second: rps.map(|n| Rate { requests: n, per_minute: false, burst }),
            per_minute: None,
            concurrent,
            exempt: vec![ramjet_shared::IpBlock::parse("10.0.0.0/8").unwrap()].into(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// nginx admits burst + 1 requests at once (the first at zero excess, then one per request up
    /// to the burst), refuses the next, and admits one more per 1/rate seconds.
    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let limiter = ClientLimiter::default();
        let l = limits(Some(10), 5, None);
        let client = ip("192.0.2.1");
        let t = Instant::now();
        let admitted = (0..20).filter(|_| limiter.admit_at(&l, client, t).is_ok()).count();
        assert_eq!(admitted, 6);
        // Another client, and an exempt one, are not affected.
        assert!(limiter.admit_at(&l, ip("192.0.2.2"), t).is_ok());
        assert!((0..50).all(|_| limiter.admit_at(&l, ip("10.1.2.3"), t).is_ok()));
        // 100 ms at 10 r/s drains one request; 99 ms does not.
        assert!(limiter.admit_at(&l, client, t + Duration::from_millis(99)).is_err());
        assert!(limiter.admit_at(&l, client, t + Duration::from_millis(100)).is_ok());
        assert!(limiter.admit_at(&l, client, t + Duration::from_millis(100)).is_err());
        // Long after, the burst again: a known client starts from its drained excess (burst
        // requests, as nginx's node), a forgotten one as new (burst + 1).
        let later = t + Duration::from_secs(10);
        assert_eq!((0..20).filter(|_| limiter.admit_at(&l, client, later).is_ok()).count(), 5);
        let much_later = t + Duration::from_secs(20);
        limiter.sweep_at(much_later);
        assert_eq!((0..20).filter(|_| limiter.admit_at(&l, client, much_later).is_ok()).count(), 6);
    }

    #[test]
    fn a_refused_request_counts_against_no_rate() {
        let limiter = ClientLimiter::default();
        let mut l = limits(Some(1000), 0, None);
        l.per_minute = Some(Rate { requests: 1, per_minute: true, burst: 0 });
        let client = ip("192.0.2.9");
        assert!(limiter.admit(&l, client).is_ok());
        // The per-minute rate refuses; the per-second one must not have been charged for it.
        assert!(limiter.admit(&l, client).is_err());
        let standing = limiter.rates.borrow()[&(7, false, client)];
        assert_eq!(standing.excess, 0);
    }

    #[test]
    fn the_sweep_forgets_clients_whose_excess_has_drained() {
        let limiter = ClientLimiter::default();
        let l = limits(Some(100), 5, None);
        let t = Instant::now();
        for i in 0..10 {
            let _ = limiter.admit_at(&l, ip(&format!("192.0.2.{i}")), t);
            let _ = limiter.admit_at(&l, ip(&format!("192.0.2.{i}")), t);
        }
        limiter.sweep_at(t);
        assert_eq!(limiter.rates.borrow().len(), 10, "each has one request of excess left");
        // 100 r/s drains one request in 10 ms.
        limiter.sweep_at(t + Duration::from_millis(10));
        assert!(limiter.rates.borrow().is_empty());
    }

    #[test]
    fn requests_under_way_are_limited_until_they_end() {
        let limiter = ClientLimiter::default();
        let l = limits(None, 0, Some(2));
        let client = ip("2001:db8::1");
        let first = limiter.admit(&l, client).unwrap();
        let second = limiter.admit(&l, client).unwrap();
        assert!(limiter.admit(&l, client).is_err());
        drop(first);
        let third = limiter.admit(&l, client).unwrap();
        drop((second, third));
        assert!(limiter.admit(&l, client).is_ok(), "every place came back");
        // IPv4 over IPv6 is the same client as IPv4.
        let mapped: IpAddr = ip("::ffff:192.0.2.1");
        let _a = limiter.admit(&l, mapped).unwrap();
        let _b = limiter.admit(&l, ip("192.0.2.1")).unwrap();
        assert!(limiter.admit(&l, ip("192.0.2.1")).is_err());
    }
}
