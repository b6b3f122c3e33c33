//! Calendar dates from Unix time, for the dates ramjet writes itself (the `Date` field, a sticky
//! cookie's `Expires`).

/// (year, month, day) from days since 1970-01-01 (Howard Hinnant's algorithm, for non-negative
/// days).
pub fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + u64::from(month <= 2), month, day)
}

/// The weekday of a day since 1970-01-01 (a Thursday), as HTTP dates spell it.
pub fn weekday(days: u64) -> &'static str {
    ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][(days % 7) as usize]
}

/// A month (1 to 12), as HTTP dates spell it.
pub fn month_name(month: u64) -> &'static str {
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][(month - 1) as usize % 12]
}
