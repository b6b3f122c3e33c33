//! Containment: a panic inside one connection's (or stream's) task ends that task only.
//!
//! A worker serves thousands of connections on one thread; a panic that escaped a task would end
//! the thread and every connection on it. Known case: monoio-rustls answers a TLS record that does
//! not decrypt by writing an alert from inside the read, and when a write of the same connection is
//! pending (HTTP/2 or a tunnel, reading and writing at once) that write holds the buffer the alert
//! needs: it panics. Each task's poll runs inside `catch_unwind`; a panic is counted
//! (`ramjet_task_panics_total`), logged, and the task is dropped, which closes its connection and
//! cancels its I/O. Nothing on the request path changes: unwinding costs only when it happens.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::task::Poll;

use crate::worker::Worker;

/// Spawns `task` on the worker, contained (see the module doc).
pub(crate) fn spawn<F>(worker: &Rc<Worker>, what: &'static str, task: F)
where
    F: Future<Output = ()> + 'static,
{
    let worker = worker.clone();
    monoio::spawn(async move { contained(&worker, what, task).await });
}

/// Runs `task`, turning a panic inside it into a counted, logged end of the task.
pub(crate) async fn contained<F: Future<Output = ()>>(worker: &Worker, what: &'static str, task: F) {
    let mut task = std::pin::pin!(task);
    let finished = std::future::poll_fn(|cx| match catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(cx))) {
        Ok(Poll::Ready(())) => Poll::Ready(true),
        Ok(Poll::Pending) => Poll::Pending,
        Err(_) => Poll::Ready(false),
    })
    .await;
    if !finished {
        worker.counters().task_panicked();
        tracing::error!(
            worker = worker.id,
            task = what,
            "a task panicked and was ended; its connection is closed (please report this)"
        );
    }
}
