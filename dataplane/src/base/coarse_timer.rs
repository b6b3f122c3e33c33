//! A worker's timer for waits that may end a little late: the rest of a quiet connection's
//! keep-alive wait, and (through [`crate::base::watchdog`]) every timeout of a connection's reads
//! and writes.
//!
//! monoio's `Sleep` is 640 bytes, aligned to 128, and it sits in the future that waits. Thousands
//! of idle connections each holding one paid more for the timer than for the rest of their state
//! (`docs/benchmarks.md`, idle connections). Here a wait is a key in one ordered map of the
//! worker's (a deadline, counted in [`TICK`]s of the monotonic clock and rounded up, and a sequence
//! number) with the task's waker: a few dozen bytes. One task per worker ([`CoarseTimer::run`])
//! sleeps on a timerfd ([`crate::base::wakeup`]) until the earliest deadline, then wakes every wait
//! that is due. Waits that end in the same tick share one wake-up, so the worker wakes at most once
//! a tick for them, and not at all while nothing waits. It is the worker's only timer: the runtime
//! is built without monoio's, whose wheel cost every park of the runtime.
//!
//! A wait ends between its deadline and one tick later, never early.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::wakeup::{monotonic_nanos, Wakeup};

/// The timer's resolution: how late a wait may end.
pub const TICK: Duration = Duration::from_millis(10);
const TICK_NANOS: u64 = TICK.as_nanos() as u64;

/// A wait's place in the map: its deadline in ticks of the monotonic clock, then a number that
/// keeps waits of the same tick apart.
pub(crate) type Key = (u64, u64);

#[derive(Default)]
pub struct CoarseTimer {
    inner: RefCell<Inner>,
}

#[derive(Default)]
struct Inner {
    waits: BTreeMap<Key, Waker>,
    next_seq: u64,
    /// The tick the timer task sleeps until (`None`: it sleeps until a wait arrives).
    armed_for: Option<u64>,
    /// A wait arrived that is due before `armed_for`: the timer task must sleep again.
    rearm: bool,
    timer_task: Option<Waker>,
    /// Wakers of the waits due, collected outside the map's borrow (kept for its capacity).
    due: Vec<Waker>,
    /// Every wait due at this tick or before has been woken.
    fired_through: u64,
}

impl CoarseTimer {
    /// Completes `after` (rounded up to the next tick) from the first poll, or up to one tick later.
    pub fn sleep(&self, after: Duration) -> CoarseSleep<'_> {
        CoarseSleep { timer: self, state: State::Unarmed(after) }
    }

    /// Waits currently registered.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.inner.borrow().waits.len()
    }

    /// The worker's timer task: sleeps on `clock` (a timerfd) until the earliest deadline and wakes
    /// the waits that are due. Runs for the worker's life.
    pub async fn run(&self, clock: Wakeup) {
        // What the timerfd is set to (`None`: disarmed, or expired).
        let mut set_for = None;
        loop {
            let earliest = {
                let mut inner = self.inner.borrow_mut();
                inner.rearm = false;
                inner.armed_for = inner.waits.first_key_value().map(|((tick, _), _)| *tick);
                inner.armed_for
            };
            if earliest.is_some() && earliest != set_for {
                if let Err(e) = clock.set_timer(earliest.map(|tick| tick.saturating_mul(TICK_NANOS))) {
                    tracing::error!(error = %e, "cannot set the worker's timer");
                }
                set_for = earliest;
            }
            if earliest.is_none() {
                Rearm(self).await;
                continue;
            }
            let expired = monoio::select! {
                biased;
                r = clock.wait() => {
                    if let Err(e) = r {
                        tracing::error!(error = %e, "cannot read the worker's timer");
                    }
                    true
                }
                _ = Rearm(self) => false,
            };
            if expired {
                set_for = None;
                self.wake_due();
            }
        }
    }

    fn now_tick(&self) -> u64 {
        monotonic_nanos() / TICK_NANOS
    }

    /// Removes the waits due by now and wakes their tasks.
    fn wake_due(&self) {
        let now = self.now_tick();
        let mut due = {
            let mut inner = self.inner.borrow_mut();
            let mut due = std::mem::take(&mut inner.due);
            inner.fired_through = inner.fired_through.max(now);
            while let Some(entry) = inner.waits.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                due.push(entry.remove());
            }
            due
        };
        // Waking only queues the tasks; done outside the borrow all the same.
        for waker in due.drain(..) {
            waker.wake();
        }
        self.inner.borrow_mut().due = due;
    }

    /// The tick a wait of `after` from now is due at: rounded up, so that it never ends early.
    pub(crate) fn tick_after(&self, after: Duration) -> u64 {
        // In u64 nanoseconds (584 years of uptime): a u128 division costs more than the rest of a
        // registration.
        let after = u64::try_from(after.as_nanos()).unwrap_or(u64::MAX);
        monotonic_nanos().saturating_add(after).div_ceil(TICK_NANOS)
    }

    /// Every wait due at `tick` or before has been woken: a wait of that tick is over.
    pub(crate) fn fired_through(&self, tick: u64) -> bool {
        self.inner.borrow().fired_through >= tick
    }

    fn register(&self, after: Duration, waker: &Waker) -> Key {
        self.register_at(self.tick_after(after), waker)
    }

    /// Adds a wait due at `tick` that wakes `waker`.
    pub(crate) fn register_at(&self, tick: u64, waker: &Waker) -> Key {
        let mut inner = self.inner.borrow_mut();
        let key = (tick, inner.next_seq);
        inner.next_seq += 1;
        inner.waits.insert(key, waker.clone());
        if inner.armed_for.is_none_or(|armed| tick < armed) {
            inner.rearm = true;
            if let Some(task) = inner.timer_task.take() {
                task.wake();
            }
        }
        key
    }

    /// Whether the wait `key` is still registered (not yet due); if so it wakes `waker` from now on.
    pub(crate) fn still_waiting(&self, key: Key, waker: &Waker) -> bool {
        match self.inner.borrow_mut().waits.get_mut(&key) {
            None => false,
            Some(w) => {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                true
            }
        }
    }

    /// Takes the wait `key` out (nothing happens if it was due already).
    pub(crate) fn cancel(&self, key: Key) {
        self.inner.borrow_mut().waits.remove(&key);
    }
}

/// Completes when the timer task must look at the map again (a wait arrived due earlier than the
/// tick it sleeps until).
struct Rearm<'t>(&'t CoarseTimer);

impl Future for Rearm<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = self.0.inner.borrow_mut();
        if inner.rearm {
            return Poll::Ready(());
        }
        match &mut inner.timer_task {
            Some(w) if w.will_wake(cx.waker()) => {}
            w => *w = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

enum State {
    Unarmed(Duration),
    Waiting(Key),
    Done,
}

/// A wait on a [`CoarseTimer`]; dropping it before it completes takes it out of the timer.
pub struct CoarseSleep<'t> {
    timer: &'t CoarseTimer,
    state: State,
}

impl Future for CoarseSleep<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.state {
            State::Done => Poll::Ready(()),
            State::Unarmed(after) => {
                self.state = State::Waiting(self.timer.register(after, cx.waker()));
                Poll::Pending
            }
            State::Waiting(key) => {
                if self.timer.still_waiting(key, cx.waker()) {
                    return Poll::Pending;
                }
                // Taken out by the timer task: due.
                self.state = State::Done;
                Poll::Ready(())
            }
        }
    }
}

impl Drop for CoarseSleep<'_> {
    fn drop(&mut self) {
        if let State::Waiting(key) = self.state {
            self.timer.cancel(key);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::rc::Rc;
    use std::time::Instant;

    use super::*;

    /// Runs `test` on a runtime of its own, with a timer whose task runs (for the watchdog's
    /// tests too).
    pub(crate) fn with_timer<F: Future<Output = ()>>(test: impl FnOnce(Rc<CoarseTimer>) -> F) {
        let mut runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().enable_timer().build().unwrap();
        runtime.block_on(async {
            let timer = Rc::new(CoarseTimer::default());
            let _task = monoio::spawn({
                let timer = timer.clone();
                async move { timer.run(crate::base::wakeup::Wakeup::timer().unwrap()).await }
            });
            test(timer).await;
        });
    }

    #[test]
    fn a_wait_ends_at_its_deadline_or_within_a_tick_after() {
        with_timer(|timer| async move {
            for after in [Duration::ZERO, Duration::from_millis(30), Duration::from_millis(120)] {
                let began = Instant::now();
                timer.sleep(after).await;
                let took = began.elapsed();
                assert!(took >= after, "ended early: {took:?} < {after:?}");
                // A tick late at most, and some room for a loaded machine.
                assert!(took < after + TICK + Duration::from_millis(200), "{after:?} took {took:?}");
            }
            assert_eq!(timer.waiting(), 0);
        });
    }

    #[test]
    fn an_earlier_wait_rearms_the_timer_and_a_dropped_wait_leaves_it() {
        with_timer(|timer| async move {
            // The timer task sleeps until the long wait's deadline; the short one must still end on time.
            let mut long = Box::pin(timer.sleep(Duration::from_secs(30)));
            monoio::select! {
                _ = long.as_mut() => panic!("a 30 s wait ended at once"),
                _ = monoio::time::sleep(Duration::from_millis(10)) => {}
            }
            assert_eq!(timer.waiting(), 1);
            let began = Instant::now();
            timer.sleep(Duration::from_millis(60)).await;
            assert!(began.elapsed() < Duration::from_secs(5), "the short wait waited for the long one");
            drop(long);
            assert_eq!(timer.waiting(), 0, "a dropped wait is taken out");
        });
    }

    #[test]
    fn many_waits_of_the_same_tick_end_together() {
        with_timer(|timer| async move {
            let ended = Rc::new(std::cell::Cell::new(0));
            let waits: Vec<_> = (0..1000)
                .map(|i| {
                    let (timer, ended) = (timer.clone(), ended.clone());
                    monoio::spawn(async move {
                        timer.sleep(Duration::from_millis(20 + i % 7)).await;
                        ended.set(ended.get() + 1);
                    })
                })
                .collect();
            for w in waits {
                w.await;
            }
            assert_eq!(ended.get(), 1000);
            assert_eq!(timer.waiting(), 0);
        });
    }
}
