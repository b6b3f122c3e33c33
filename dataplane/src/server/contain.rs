//! Containment: a panic inside one connection's (or stream's) task ends that task only.
//!
//! A worker serves thousands of connections on one thread; a panic that escaped a task would end
//! the thread and every connection on it. The case that made this necessary (monoio-rustls writing a
//! TLS alert from inside a read while a write of the same connection held the buffer) is fixed in
//! the vendored copy, `vendor/monoio-rustls`; this stays as the net for whatever comes next.
//! Each task's poll runs inside `catch_unwind`; a panic is counted
//! (`ramjet_task_panics_total`), logged, and the task is dropped, which closes its connection and
//! cancels its I/O. Nothing on the request path changes: unwinding costs only when it happens.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::worker::Worker;

/// Spawns `task` on the worker, contained (see the module doc).
pub(crate) fn spawn<F>(worker: &Rc<Worker>, what: &'static str, task: F)
where
    F: Future<Output = ()> + 'static,
{
    monoio::spawn(contained(worker, what, task));
}

/// `task`, with a panic inside it turned into a counted, logged end of the task.
pub(crate) fn contained<F: Future<Output = ()>>(worker: &Rc<Worker>, what: &'static str, task: F) -> Contained<F> {
    Contained { task, worker: worker.clone(), what }
}

pin_project_lite::pin_project! {
    /// A task contained: the task itself is stored once, in place, so wrapping it costs no copy of
    /// its state (an `async fn` wrapper kept the task twice, and moved it on its first poll: a
    /// connection's or a stream's whole state, copied for every request of HTTP/2).
    pub(crate) struct Contained<F> {
        #[pin]
        task: F,
        worker: Rc<Worker>,
        what: &'static str,
    }
}

impl<F: Future<Output = ()>> Future for Contained<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        let task = this.task;
        match catch_unwind(AssertUnwindSafe(|| task.poll(cx))) {
            Ok(polled) => polled,
            Err(_) => {
                this.worker.counters().task_panicked();
                tracing::error!(
                    worker = this.worker.id,
                    task = *this.what,
                    "a task panicked and was ended; its connection is closed (please report this)"
                );
                Poll::Ready(())
            }
        }
    }
}
