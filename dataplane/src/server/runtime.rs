//! A worker's thread: its monoio runtime on the driver the policy allows (io_uring, or epoll where
//! allowed), pinned to its CPU, and the report of whether it serves.

use std::sync::mpsc;

use crate::settings::{DriverChoice, IoDriver};

/// Where a worker reports that it serves, or why it cannot.
pub(crate) type Ready = mpsc::Sender<(usize, Result<DriverChoice, String>)>;

/// Builds the worker's runtime on the driver the policy allows and runs `main` on it; `main` says
/// when it serves (its listeners registered) or why it cannot, and only then is the worker started.
///
/// Never inlined: it runs once per thread, and profiles find a worker's thread by its name
/// (`benches/budget/check.py` does, for the instruction budget).
#[inline(never)]
pub(crate) fn run_worker<F, Fut>(id: usize, policy: IoDriver, ready: Ready, main: F)
where
    F: FnOnce(Started) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    // No monoio timer: the worker's timer is its own (`base::coarse_timer`, on a timerfd).
    type Uring = monoio::Runtime<monoio::IoUringDriver>;
    type Legacy = monoio::Runtime<monoio::LegacyDriver>;
    enum Built {
        Uring(Uring, &'static str),
        Legacy(Legacy, String),
    }
    let forced = std::env::var("MONOIO_FORCE_LEGACY_DRIVER")
        .is_ok_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"));
    let build_legacy = |reason: String| -> Result<Built, String> {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .build()
            .map(|rt| Built::Legacy(rt, reason))
            .map_err(|e| format!("cannot build the epoll runtime: {e}"))
    };
    let built = if forced {
        build_legacy("MONOIO_FORCE_LEGACY_DRIVER is set".into())
    } else if policy == IoDriver::Legacy {
        build_legacy("--io-driver legacy".into())
    } else {
        let uring = if monoio::utils::detect_uring() {
            // Cooperative task running: completions posted from another CPU wait for this thread's
            // next entry into the kernel instead of interrupting it (Linux 5.19+). Measured with
            // benches/proxy: about half a reschedule IPI per request fewer, and 16 % less CPU.
            let mut cooperative = io_uring::IoUring::builder();
            cooperative.setup_coop_taskrun().setup_taskrun_flag();
            let builder = || monoio::RuntimeBuilder::<monoio::IoUringDriver>::new().with_entries(1024);
            match builder().uring_builder(cooperative).build() {
                Ok(rt) => Ok((rt, "io_uring available, cooperative task running")),
                // Older kernels refuse the flag: the same ring without it.
                Err(_) => {
                    builder().build().map(|rt| (rt, "io_uring available (kernel without cooperative task running)"))
                }
            }
        } else {
            Err(std::io::Error::other("the io_uring probe failed (kernel too old, seccomp, or RLIMIT_MEMLOCK)"))
        };
        match uring {
            Ok((rt, why)) => Ok(Built::Uring(rt, why)),
            Err(e) => {
                let why = format!("io_uring unavailable: {e}; RLIMIT_MEMLOCK is {}", memlock_limit());
                if policy == IoDriver::Auto {
                    build_legacy(format!("{why}; falling back as --io-driver auto allows"))
                } else {
                    Err(format!(
                        "{why}. Raise the memlock limit, or start with --io-driver auto to allow the epoll fallback"
                    ))
                }
            }
        }
    };
    match built {
        Ok(Built::Uring(mut rt, why)) => {
            let choice = DriverChoice { io_uring: true, reason: why.into() };
            rt.block_on(main(Started::new(id, choice, ready)));
        }
        Ok(Built::Legacy(mut rt, reason)) => {
            let choice = DriverChoice { io_uring: false, reason };
            rt.block_on(main(Started::new(id, choice, ready)));
        }
        Err(reason) => {
            let _ = ready.send((id, Err(reason)));
        }
    }
}

/// RLIMIT_MEMLOCK, for the start-up message (io_uring rings count against it).
#[allow(unsafe_code)]
fn memlock_limit() -> String {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit struct, which `limit` is.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return "unknown".into();
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        "unlimited".into()
    } else {
        format!("{} KiB", limit.rlim_cur / 1024)
    }
}

/// The CPUs this process may run on (its affinity mask), in order.
#[allow(unsafe_code)]
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills at most size_of::<cpu_set_t>() bytes
    // of it, and CPU_ISSET reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect()
    }
}

/// Tells [`crate::DataPlane::start`] that a worker serves, or why it cannot.
pub(crate) struct Started {
    id: usize,
    choice: DriverChoice,
    ready: Ready,
}

impl Started {
    pub fn new(id: usize, choice: DriverChoice, ready: Ready) -> Self {
        Started { id, choice, ready }
    }

    /// The worker runs on io_uring (else on epoll).
    pub fn io_uring(&self) -> bool {
        self.choice.io_uring
    }

    pub fn serving(self) {
        let _ = self.ready.send((self.id, Ok(self.choice)));
    }

    pub fn failed(self, reason: String) {
        let _ = self.ready.send((self.id, Err(reason)));
    }
}
