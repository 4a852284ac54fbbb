//! Calendar dates of UTC times, for the timestamps the gateway and its test server write.

use std::time::{SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 to a proleptic Gregorian `(year, month, day)` (Howard Hinnant's
/// algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `time` as UTC `YYYY-MM-DDTHH:MM:SS` and the microseconds past that second (times before
/// 1970 count as 1970-01-01T00:00:00).
pub fn utc(time: SystemTime) -> (String, u32) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs() as i64;
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    let text = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    );
    (text, since.subsec_micros())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_of_known_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        let t = UNIX_EPOCH + Duration::from_micros(1_796_171_696_789_012);
        assert_eq!(utc(t), ("2026-12-02T00:34:56".to_string(), 789_012));
    }
}
