//! Per-core plumbing that knows nothing of HTTP: pooled buffers and page blocks, the clock and the
//! coarse timer with the watchdogs that bound a connection's waits on it and the kernel counters
//! that wake a worker (its timerfd, the drain eventfd), the drain signal, the
//! shared listeners, and deadlines.

pub mod buf;
pub mod clock;
pub mod coarse_timer;
pub mod deadline;
pub mod drain;
pub mod listener;
pub mod page_box;
pub mod wakeup;
pub mod watchdog;
