//! A worker's wall clock for the `Date` field (RFC 9110 §6.6.1) of the answers it writes itself:
//! formatted once a second by a worker task, read by requests as a copy of 29 bytes.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

pub struct Clock {
    date: Cell<[u8; DATE_LEN]>,
    secs: Cell<u64>,
}

impl Default for Clock {
    fn default() -> Self {
        let clock = Clock { date: Cell::new([b' '; DATE_LEN]), secs: Cell::new(0) };
        clock.tick();
        clock
    }
}

impl Clock {
    /// Formats the current second.
    pub fn tick(&self) {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.date.set(imf_fixdate(secs));
        self.secs.set(secs);
    }

    /// Seconds since the Unix epoch as of the last tick.
    #[inline]
    pub fn unix_secs(&self) -> u64 {
        self.secs.get()
    }

    /// The date as of the last tick.
    #[inline]
    pub fn date(&self) -> [u8; DATE_LEN] {
        self.date.get()
    }
}

pub use ramjet_shared::date::civil;

/// Formats seconds since the Unix epoch as an IMF-fixdate.
pub fn imf_fixdate(secs: u64) -> [u8; DATE_LEN] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] =
        [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hour, minute, second) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (year, month, day) = civil(days);

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    let two = |out: &mut [u8; DATE_LEN], at: usize, v: u64| {
        out[at] = b'0' + (v / 10 % 10) as u8;
        out[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut out, 5, day);
    out[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    two(&mut out, 12, year / 100);
    two(&mut out, 14, year % 100);
    two(&mut out, 17, hour);
    two(&mut out, 20, minute);
    two(&mut out, 23, second);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(&imf_fixdate(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&imf_fixdate(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&imf_fixdate(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(&imf_fixdate(1_798_761_599), b"Thu, 31 Dec 2026 23:59:59 GMT");
    }
}
