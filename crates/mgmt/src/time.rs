//! Calendar dates from UNIX seconds, for the text the API and the CLI write (no time zone
//! database: everything is UTC).

/// UNIX seconds as a UTC (year, month, day, hour, minute, second).
pub fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86400);
    let rem = secs.rem_euclid(86400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem / 60 % 60, rem % 60)
}

/// UNIX seconds as RFC 3339 in UTC, to the millisecond (`2026-11-27T16:41:44.123Z`).
pub fn rfc3339(unix: f64) -> String {
    let unix = unix.max(0.0);
    let whole = unix.floor();
    let millis = (((unix - whole) * 1000.0) as i64).clamp(0, 999);
    let (year, month, day, h, m, s) = civil(whole as i64);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(rfc3339(1_795_467_600.25), "2026-11-23T21:00:00.250Z");
        assert_eq!(rfc3339(951_782_400.0), "2000-02-29T00:00:00.000Z");
    }
}
