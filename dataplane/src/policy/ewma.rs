//! ingress-nginx's `load-balance: ewma` on the worker: each endpoint's response time, as an
//! exponentially weighted moving average that decays over ten seconds, and the power of two
//! choices: of two endpoints drawn at random, the one with the lower average takes the request.
//! An endpoint not yet measured scores zero, so new endpoints are tried.
//!
//! As in ingress-nginx (`balancer/ewma.lua`, kept per nginx worker), each worker keeps its own
//! averages: no lock, nothing shared. The table holds at most [`MAX_ENDPOINTS`] endpoints and
//! starts over when full.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

/// ingress-nginx's `DECAY_TIME`.
const DECAY: f64 = 10.0;
/// Endpoints each worker keeps averages for.
pub const MAX_ENDPOINTS: usize = 16_384;

#[derive(Default)]
pub(crate) struct Ewma {
    /// Average response time (ms) and when it was last updated.
    averages: RefCell<FxHashMap<SocketAddr, (f64, Instant)>>,
}

impl Ewma {
    /// The endpoint for the next request: the better of two drawn with `random`.
    pub fn pick(&self, endpoints: &[SocketAddr], now: Instant, random: &mut impl FnMut() -> u32) -> usize {
        if endpoints.len() < 2 {
            return 0;
        }
        let n = endpoints.len() as u32;
        let first = random() % n;
        let second = (first + 1 + random() % (n - 1)) % n;
        let (a, b) = (first as usize, second as usize);
        if self.score(endpoints[b], now) < self.score(endpoints[a], now) {
            b
        } else {
            a
        }
    }

    /// Notes that `endpoint` answered (its response head) after `took`.
    pub fn observe(&self, endpoint: SocketAddr, took: Duration, now: Instant) {
        let rtt = took.as_secs_f64() * 1000.0;
        let mut averages = self.averages.borrow_mut();
        if averages.len() >= MAX_ENDPOINTS && !averages.contains_key(&endpoint) {
            averages.clear();
        }
        let entry = averages.entry(endpoint).or_insert((rtt, now));
        let weight = decay_weight(entry.1, now);
        entry.0 = entry.0 * weight + rtt * (1.0 - weight);
        entry.1 = now;
    }

    /// The endpoint's average decayed to `now` (zero when never measured).
    fn score(&self, endpoint: SocketAddr, now: Instant) -> f64 {
        self.averages.borrow().get(&endpoint).map_or(0.0, |&(average, at)| average * decay_weight(at, now))
    }
}

fn decay_weight(since: Instant, now: Instant) -> f64 {
    (-(now.saturating_duration_since(since).as_secs_f64()) / DECAY).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_faster_endpoint_wins_and_the_slow_one_is_tried_again_as_it_decays() {
        let ewma = Ewma::default();
        let endpoints: Vec<SocketAddr> = vec!["10.0.0.1:80".parse().unwrap(), "10.0.0.2:80".parse().unwrap()];
        let t0 = Instant::now();
        let mut seed = 7u32;
        let mut random = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            seed >> 8
        };
        ewma.observe(endpoints[0], Duration::from_millis(150), t0);
        ewma.observe(endpoints[1], Duration::from_millis(2), t0);
        for _ in 0..20 {
            assert_eq!(ewma.pick(&endpoints, t0, &mut random), 1);
        }
        // A minute later the slow one's average has decayed below the fast one's of a minute ago.
        let later = t0 + Duration::from_secs(60);
        ewma.observe(endpoints[1], Duration::from_millis(2), later);
        assert!(ewma.score(endpoints[0], later) < 1.0);
        // Never measured: scores zero and is tried.
        let third: SocketAddr = "10.0.0.3:80".parse().unwrap();
        assert_eq!(ewma.score(third, later), 0.0);
        assert_eq!(ewma.pick(&[endpoints[1], third], later, &mut random), 1);
        assert_eq!(ewma.pick(&endpoints[..1], later, &mut random), 0);
    }
}
