//! The timeouts of one task's reads and writes, at the price of a clock read per wait.
//!
//! A connection waits many times per request (for the request, for the backend to take it, for its
//! answer, for the client to take that), and every wait has a timeout. A monoio `timeout` registers
//! a timer in the runtime's wheel and takes it out again for each of them: on a keep-alive request
//! that was about a fifth of the worker's instructions (`benches/budget`), to guard against timeouts
//! that almost never happen.
//!
//! A [`Watchdog`] is one task's standing registration on the worker's [`CoarseTimer`]. A wait
//! ([`Watchdog::bound`]) first polls what it waits for; only when that is pending does it read the
//! clock, and it keeps the registration that stands if that one is due no later than its own
//! deadline. The registration outlives the wait: the next wait of the task finds it standing, so a
//! busy connection registers again only when its registration comes due (once per its shortest
//! timeout), not once per wait. A registration that comes due early (it was made for an earlier
//! wait) wakes the task once, and the wait that is pending then registers for its own deadline.
//!
//! Like the coarse timer's other waits, a wait times out between its deadline and one
//! [`crate::base::coarse_timer::TICK`] later, never early.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::coarse_timer::{CoarseTimer, Key};

/// A wait bounded by a [`Watchdog`] lasted its whole timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// One task's timeouts: at most one registration on the worker's coarse timer at a time. Use it
/// from one task only (its registration wakes the task that last waited on it).
pub struct Watchdog<'t> {
    timer: &'t CoarseTimer,
    standing: Cell<Option<Key>>,
}

impl<'t> Watchdog<'t> {
    pub fn new(timer: &'t CoarseTimer) -> Self {
        Watchdog { timer, standing: Cell::new(None) }
    }

    /// Runs `fut` for at most `wait` (up to a tick more).
    pub async fn bound<F: Future>(&self, wait: Duration, fut: F) -> Result<F::Output, Elapsed> {
        let mut fut = pin!(fut);
        // The tick this wait is due at, from the first time it is pending.
        let mut due = None;
        poll_fn(|cx| match fut.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Ok(out)),
            Poll::Pending => self.watch(*due.get_or_insert_with(|| self.timer.tick_after(wait)), cx),
        })
        .await
    }

    /// Makes sure a registration due at `due` or before stands for the pending wait; `Elapsed` once
    /// `due` has passed.
    fn watch<T>(&self, due: u64, cx: &Context<'_>) -> Poll<Result<T, Elapsed>> {
        match self.standing.get() {
            Some(key) if self.timer.still_waiting(key, cx.waker()) => {
                if key.0 > due {
                    // Made for a longer wait: this one needs an earlier wake-up.
                    self.timer.cancel(key);
                    self.standing.set(Some(self.timer.register_at(due, cx.waker())));
                }
            }
            // None stands: it came due (for this wait or an earlier one), or none was made yet.
            _ => {
                if self.timer.fired_through(due) {
                    self.standing.set(None);
                    return Poll::Ready(Err(Elapsed));
                }
                self.standing.set(Some(self.timer.register_at(due, cx.waker())));
            }
        }
        Poll::Pending
    }
}

/// `fut` for at most `after` (up to a tick more) on `timer`, for a wait of a task without a
/// [`Watchdog`] of its own: it registers when pending, and takes its registration out when done.
pub async fn timeout<F: Future>(timer: &CoarseTimer, after: Duration, fut: F) -> Result<F::Output, Elapsed> {
    Watchdog::new(timer).bound(after, fut).await
}

impl Drop for Watchdog<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.standing.get() {
            self.timer.cancel(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::base::coarse_timer::tests::with_timer;
    use crate::base::coarse_timer::TICK;

    #[test]
    fn a_wait_that_is_ready_needs_no_registration() {
        with_timer(|timer| async move {
            let watch = Watchdog::new(&timer);
            assert_eq!(watch.bound(Duration::from_secs(1), async { 7 }).await, Ok(7));
            assert!(watch.standing.get().is_none(), "nothing was pending, nothing registered");
        });
    }

    #[test]
    fn a_pending_wait_times_out_at_its_deadline_not_before_and_at_most_a_tick_after() {
        with_timer(|timer| async move {
            let watch = Watchdog::new(&timer);
            for wait in [Duration::from_millis(30), Duration::from_millis(120)] {
                let began = Instant::now();
                let r = watch.bound(wait, std::future::pending::<()>()).await;
                let took = began.elapsed();
                assert_eq!(r, Err(Elapsed));
                assert!(took >= wait, "ended early: {took:?} < {wait:?}");
                assert!(took < wait + TICK + Duration::from_millis(200), "{wait:?} took {took:?}");
            }
        });
    }

    #[test]
    fn a_registration_outlives_its_wait_and_serves_the_next_one() {
        with_timer(|timer| async move {
            let watch = Watchdog::new(&timer);
            let pending_once = || {
                let mut first = true;
                poll_fn(move |cx| {
                    if std::mem::take(&mut first) {
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    } else {
                        Poll::Ready(())
                    }
                })
            };
            watch.bound(Duration::from_secs(5), pending_once()).await.unwrap();
            let standing = watch.standing.get().expect("a pending wait registers");
            // A longer wait keeps the registration that is due first.
            watch.bound(Duration::from_secs(60), pending_once()).await.unwrap();
            assert_eq!(watch.standing.get(), Some(standing));
            // A shorter one moves it earlier.
            watch.bound(Duration::from_millis(100), pending_once()).await.unwrap();
            let earlier = watch.standing.get().unwrap();
            assert!(earlier.0 < standing.0);
            assert_eq!(timer.waiting(), 1, "one registration per watchdog");
            drop(watch);
            assert_eq!(timer.waiting(), 0, "dropping the watchdog takes it out");
        });
    }

    #[test]
    fn a_registration_due_early_is_made_again_for_the_wait_pending_then() {
        with_timer(|timer| async move {
            let watch = Watchdog::new(&timer);
            // A short wait that completes leaves a registration due in ~60 ms standing.
            let quick = monoio::time::sleep(Duration::from_millis(10));
            watch.bound(Duration::from_millis(60), quick).await.unwrap();
            // A long wait pending across that registration's tick must neither end then nor hang.
            let began = Instant::now();
            let r = watch.bound(Duration::from_millis(400), std::future::pending::<()>()).await;
            let took = began.elapsed();
            assert_eq!(r, Err(Elapsed));
            assert!(took >= Duration::from_millis(400), "ended at the earlier registration: {took:?}");
        });
    }
}
