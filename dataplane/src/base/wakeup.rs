//! Kernel counters a worker waits on: a timerfd (the clock under the worker's
//! [`crate::base::coarse_timer`]) and an eventfd (the drain signal from the control thread).
//!
//! They replace two pieces of monoio that cost every park of the runtime, busy or not: its timer
//! wheel (`enable_timer`: the wheel's next expiry, the clock and the wheel's processing, on every
//! park) and its channel of wakers from other threads (the `sync` feature: two locked channel
//! reads on every park). Together that was about a tenth of a keep-alive request's instructions
//! on io_uring (`benches/budget`). With these, the worker's only timer is one timerfd, set again
//! only when the earliest coarse deadline changes, and the only thing another thread does to a
//! worker is write its eventfd once, to drain it.
//!
//! A counter is waited on as a readable file descriptor: an io_uring poll, or epoll readiness on
//! the fallback driver. monoio offers that wait only on its socket types, so the descriptor is held
//! in a `TcpStream`, of which only `readable` and the close on drop are ever used.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use monoio::net::TcpStream;

/// A timerfd or an eventfd, registered with the worker's runtime.
pub struct Wakeup {
    fd: TcpStream,
}

impl Wakeup {
    /// A timer on the monotonic clock, not armed. Call in the worker's runtime.
    pub fn timer() -> io::Result<Self> {
        // SAFETY: timerfd_create has no memory arguments; its result is checked below.
        #[allow(unsafe_code)]
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        #[allow(unsafe_code)]
        Self::register(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The worker's end of an eventfd made by [`event_pair`]. Call in the worker's runtime.
    pub fn event(fd: OwnedFd) -> io::Result<Self> {
        Self::register(fd)
    }

    fn register(fd: OwnedFd) -> io::Result<Self> {
        // SAFETY: the descriptor is owned and moves into the stream, which closes it on drop.
        #[allow(unsafe_code)]
        let std = unsafe { std::net::TcpStream::from_raw_fd(fd.into_raw_fd()) };
        Ok(Wakeup { fd: TcpStream::from_std(std)? })
    }

    /// Sets the timer to expire at `at_nanos` on the monotonic clock (as [`monotonic_nanos`]
    /// reads it), or disarms it (`None`). A time in the past expires at once.
    pub fn set_timer(&self, at_nanos: Option<u64>) -> io::Result<()> {
        // Zero disarms a timerfd: a deadline at the clock's origin is moved one nanosecond on.
        let at = at_nanos.map_or(0, |n| n.max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (at / NANOS) as libc::time_t, tv_nsec: (at % NANOS) as libc::c_long },
        };
        // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
        #[allow(unsafe_code)]
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits until the counter is non-zero and resets it; what it held (events signalled since the
    /// last wait, or timer expiries).
    pub async fn wait(&self) -> io::Result<u64> {
        loop {
            // Not relaxed: on epoll the readiness is checked with the kernel, since the reads below
            // bypass the runtime and it cannot know they emptied the counter.
            self.fd.readable(false).await?;
            let mut count = 0u64;
            // SAFETY: reads 8 bytes into `count`, which has 8.
            #[allow(unsafe_code)]
            let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
            if n == 8 {
                return Ok(count);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
        }
    }
}

const NANOS: u64 = 1_000_000_000;

/// The monotonic clock in nanoseconds: what a timerfd on `CLOCK_MONOTONIC` counts in, and cheaper
/// to read than `Instant` when a number is all that is needed.
#[inline]
pub fn monotonic_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write into; CLOCK_MONOTONIC always exists on Linux.
    #[allow(unsafe_code)]
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts)
    };
    ts.tv_sec as u64 * NANOS + ts.tv_nsec as u64
}

/// An eventfd for another thread to wake a worker with: the sender's end (written when it is
/// dropped) and the worker's (for [`Wakeup::event`]).
pub fn event_pair() -> io::Result<(EventSender, OwnedFd)> {
    // SAFETY: eventfd has no memory arguments; its result is checked below.
    #[allow(unsafe_code)]
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    #[allow(unsafe_code)]
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let worker = fd.try_clone()?;
    Ok((EventSender(fd), worker))
}

/// The sending end of an [`event_pair`]: dropping it wakes the worker waiting on the other end
/// (now, or as soon as it waits), as a channel's receiver learns that its senders are gone.
pub struct EventSender(OwnedFd);

impl EventSender {
    /// Signals once without closing (the drop signals again).
    pub fn signal(&self) {
        let one = 1u64;
        // SAFETY: writes the 8 bytes of `one`; the counter is written at most twice.
        #[allow(unsafe_code)]
        unsafe {
            libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8)
        };
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        self.signal();
    }
}
