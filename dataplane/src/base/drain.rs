//! A worker-local signal that wakes every idle keep-alive connection when draining starts.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Fired once; every [`DrainSignal::wait`] pending or started afterwards completes.
#[derive(Default)]
pub struct DrainSignal {
    fired: Cell<bool>,
    waiters: RefCell<Vec<Option<Waker>>>,
    free: RefCell<Vec<usize>>,
}

impl DrainSignal {
    pub fn fire(&self) {
        self.fired.set(true);
        for waker in self.waiters.borrow_mut().iter_mut().filter_map(Option::take) {
            waker.wake();
        }
    }

    pub fn is_fired(&self) -> bool {
        self.fired.get()
    }

    pub fn wait(&self) -> Wait<'_> {
        Wait { signal: self, slot: None }
    }
}

pub struct Wait<'a> {
    signal: &'a DrainSignal,
    slot: Option<usize>,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.fired.get() {
            return Poll::Ready(());
        }
        let mut waiters = self.signal.waiters.borrow_mut();
        match self.slot {
            Some(i) => match &mut waiters[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            },
            None => {
                let i = match self.signal.free.borrow_mut().pop() {
                    Some(i) => {
                        waiters[i] = Some(cx.waker().clone());
                        i
                    }
                    None => {
                        waiters.push(Some(cx.waker().clone()));
                        waiters.len() - 1
                    }
                };
                drop(waiters);
                self.slot = Some(i);
            }
        }
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            self.signal.waiters.borrow_mut()[i] = None;
            self.signal.free.borrow_mut().push(i);
        }
    }
}
