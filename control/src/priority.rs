//! The control side's threads give way to the data plane's.
//!
//! A pin, a release or a compile wakes the control thread (or one of its blocking-pool threads)
//! for a few hundred microseconds. At the same priority the scheduler lets it preempt a worker on
//! the worker's own CPU, and every request in flight there waits that long: with 20 pins or
//! releases a second the p99 of the proxied traffic rose 1.35-1.86x over the quiet run (median of
//! 3 runs 1.59x). Ten nice levels below the workers, a waking control thread preempts a worker less
//! often: 1.01-1.62x (median of 7 runs 1.37x, `docs/benchmarks.md`). It still gets a tenth of a
//! core when every worker is saturated, so a compile of 10,000 routes (6 ms) takes about 60 ms
//! then, instead of stalling requests.

/// How many nice levels the control side's threads sit below the workers (which keep the
/// process's own).
const BELOW_WORKERS: libc::c_int = 10;
/// The lowest priority there is.
const NICE_MAX: libc::c_int = 19;

/// Lowers the calling thread's priority by [`BELOW_WORKERS`] nice levels from the process's own (so
/// it is never raised, whatever nice level the daemon was started at); on Linux a nice value is per
/// thread. Lowering needs no privilege; a failure only costs the latency above, so it is logged and
/// ignored.
#[allow(unsafe_code)]
pub(crate) fn yield_to_workers() {
    let target = (current_nice() + BELOW_WORKERS).min(NICE_MAX);
    // SAFETY: setpriority on the calling thread (who 0), no pointers involved.
    let failed = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, target) } != 0;
    if failed {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower the control thread's priority");
    }
}

/// The calling thread's nice value.
#[allow(unsafe_code)]
fn current_nice() -> libc::c_int {
    // SAFETY: getpriority of the calling thread. Its -1 is also a valid nice value, so errno is
    // reset before and only a set errno means failure (then the default, 0, is assumed).
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, 0);
        if nice == -1 && *libc::__errno_location() != 0 {
            return 0;
        }
        nice
    }
}

#[cfg(test)]
mod tests {
    use super::{current_nice, yield_to_workers, BELOW_WORKERS, NICE_MAX};

    #[test]
    fn the_calling_thread_alone_gets_the_lower_priority() {
        let before = current_nice();
        let lowered = std::thread::spawn(move || {
            yield_to_workers();
            current_nice()
        })
        .join()
        .unwrap();
        assert_eq!(lowered, (before + BELOW_WORKERS).min(NICE_MAX), "ten levels below, never above");
        assert_eq!(current_nice(), before, "other threads keep their priority");
    }
}
