//! The streams of one HTTP/2 connection that ramjet is still working on: the count the
//! concurrency limit is held against, kept until a stream's task ends (not only until the client
//! resets it).

use std::cell::Cell;
use std::rc::Rc;
use std::task::Waker;
use std::time::Instant;

/// The streams of one connection that ramjet is still working on.
#[derive(Default)]
pub(crate) struct Streams {
    pub active: Cell<usize>,
    /// Any stream was taken up yet (the first waits within the header timeout).
    pub seen: Cell<bool>,
    /// When the last stream finished.
    pub last_done: Cell<Option<Instant>>,
    /// The connection task, parked while the concurrency limit is reached.
    pub parked: Cell<Option<Waker>>,
}

/// One stream being served; dropping it frees its place.
pub(crate) struct StreamSlot(Rc<Streams>);

impl Streams {
    pub fn enter(self: &Rc<Self>) -> StreamSlot {
        self.active.set(self.active.get() + 1);
        self.seen.set(true);
        StreamSlot(self.clone())
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let streams = &self.0;
        streams.active.set(streams.active.get() - 1);
        streams.last_done.set(Some(Instant::now()));
        if let Some(waker) = streams.parked.take() {
            waker.wake();
        }
    }
}
