//! Deadlines that cost no timer: an instant that bounds every wait of an exchange.

use std::time::Duration;

/// A rule's deadline for the whole exchange (the route's `Timeouts::deadline`): the instant
/// it ends, if the rule has one. It has no timer of its own: each wait of the exchange — the
/// connect, each write, each read, in both directions — lasts at most what is left of it
/// ([`Deadline::clamp`]), so a deadline costs a connection's future no state beyond this instant.
/// Past it the wait that was cut fails with a timeout: 504 before the answer started, the client
/// connection closed after (the caller knows which phase it is in); its upstream connection is
/// closed, never pooled, as after any failed exchange.
#[derive(Clone, Copy, Debug)]
pub struct Deadline(Option<std::time::Instant>);

impl Deadline {
    /// No deadline: each wait lasts its own timeout.
    pub const NONE: Deadline = Deadline(None);

    /// A deadline `deadline` from now (none for `None`).
    #[inline]
    pub fn from_now(deadline: Option<Duration>) -> Self {
        Deadline(deadline.map(|d| std::time::Instant::now() + d))
    }

    /// How long a wait that may last `timeout` may last from now, and whether the deadline is what
    /// ends it (`true`: if it times out, the deadline cut it). Without a deadline it is `timeout`,
    /// and no clock is read.
    #[inline]
    pub fn clamp(self, timeout: Duration) -> (Duration, bool) {
        match self.0 {
            None => (timeout, false),
            Some(at) => {
                let left = at.saturating_duration_since(std::time::Instant::now());
                if left <= timeout {
                    (left, true)
                } else {
                    (timeout, false)
                }
            }
        }
    }

    /// [`Deadline::clamp`]'s wait, for a wait whose timeout means the same whoever cut it.
    #[inline]
    pub fn limit(self, timeout: Duration) -> Duration {
        self.clamp(timeout).0
    }

    /// Whether the deadline has passed (never, without one).
    #[inline]
    pub fn passed(self) -> bool {
        self.0.is_some_and(|at| std::time::Instant::now() >= at)
    }
}
