//! The control side's threads give way to the data plane's.
//!
//! A pin, a release or a compile wakes the control thread (or one of its blocking-pool threads)
//! for a few hundred microseconds. At the same priority the scheduler lets it preempt a worker on
//! the worker's own CPU, and every request in flight there waits that long: with 20 pins or
//! releases a second the p99 of the proxied traffic rose 1.35-1.86x over the quiet run (median of
//! 3 runs 1.59x). At nice 10 a waking control thread preempts a worker less often: 1.01-1.62x
//! (median of 7 runs 1.37x, `docs/benchmarks.md`). It still gets a tenth of a core when every
//! worker is saturated, so a compile of 10,000 routes (6 ms) takes about 60 ms then, instead of
//! stalling requests.

/// The nice value of the control side's threads (the workers keep the process's own, usually 0).
const CONTROL_NICE: libc::c_int = 10;

/// Lowers the calling thread's priority to [`CONTROL_NICE`]; on Linux a nice value is per thread.
/// Lowering needs no privilege; a failure only costs the latency above, so it is logged and ignored.
#[allow(unsafe_code)]
pub(crate) fn yield_to_workers() {
    // SAFETY: setpriority on the calling thread (who 0), no pointers involved.
    let failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, CONTROL_NICE) } != 0;
    if failed {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower the control thread's priority");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_calling_thread_alone_gets_the_lower_priority() {
        let nice = || {
            // SAFETY: getpriority of the calling thread; errno is reset before, as its -1 result is valid.
            #[allow(unsafe_code)]
            unsafe {
                *libc::__errno_location() = 0;
                libc::getpriority(libc::PRIO_PROCESS, 0)
            }
        };
        let before = nice();
        let lowered = std::thread::spawn(move || {
            super::yield_to_workers();
            nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, super::CONTROL_NICE.max(before));
        assert_eq!(nice(), before, "other threads keep their priority");
    }
}
