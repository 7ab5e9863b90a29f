//! When and how long to wait before retrying a summarizer request.
//!
//! Retry on overload and transient server trouble (429, 500–504, 529) and on connection
//! errors and timeouts; never on other client errors (400, 401, 403, 404, …), which would
//! only fail again. The wait is the server's `retry-after-ms` or `retry-after` (seconds or
//! an HTTP date) when it sends one, else exponential backoff with jitter; either way at
//! most [`MAX_WAIT`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The longest we wait before one retry, whatever the server asks for.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Retries after the first attempt.
    pub(crate) max_retries: u32,
    /// The wait before the first retry; it doubles with every further retry.
    pub(crate) base: Duration,
}

/// Whether an answer with `status` is worth retrying.
pub(crate) fn is_retryable(status: u16) -> bool {
    matches!(status, 429 | 500..=504 | 529)
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1 for the first retry): `retry_after` when the
    /// server sent one, else the backoff; at most [`MAX_WAIT`].
    pub(crate) fn wait(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(wait) => wait.min(MAX_WAIT),
            None => self.backoff(retry),
        }
    }

    /// `base · 2^(retry-1)`, capped at [`MAX_WAIT`], times a random factor in [0.5, 1) so
    /// that clients that failed together do not retry together.
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(20);
        let full = self.base.saturating_mul(1 << doublings).min(MAX_WAIT);
        full.mul_f64(0.5 + fastrand::f64() * 0.5)
    }
}

/// The wait a server asked for: `retry-after-ms` (milliseconds) wins over `retry-after`
/// (whole or fractional seconds, or an HTTP date, counted from `now`). `None` when absent
/// or unreadable.
pub(crate) fn retry_after(
    retry_after_ms: Option<&str>,
    retry_after: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    if let Some(ms) = retry_after_ms.and_then(|value| value.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64((ms / 1000.0).min(MAX_WAIT.as_secs_f64())));
        }
    }
    let value = retry_after?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(MAX_WAIT.as_secs_f64())));
    }
    let at = http_date(value)?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Parses an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`, the only date format
/// HTTP senders may use.
fn http_date(value: &str) -> Option<SystemTime> {
    let parts: Vec<&str> = value.split_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let month = MONTHS.iter().position(|name| name == month)? as u32 + 1;
    let day: u32 = day.parse().ok()?;
    let year: i64 = year.parse().ok()?;
    let mut clock = time.split(':').map(|part| part.parse::<u64>().ok());
    let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
    if clock.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = u64::try_from(days_from_civil(year, month, day)).ok()?;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month = i64::from(month);
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_overload_and_server_errors_only() {
        for status in [429, 500, 502, 503, 504, 529] {
            assert!(is_retryable(status), "{status}");
        }
        for status in [200, 400, 401, 403, 404, 408, 413, 422, 505] {
            assert!(!is_retryable(status), "{status}");
        }
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let policy = RetryPolicy { max_retries: 10, base: Duration::from_millis(100) };
        for _ in 0..50 {
            let first = policy.backoff(1);
            assert!(first >= Duration::from_millis(50) && first < Duration::from_millis(100));
            let third = policy.backoff(3);
            assert!(third >= Duration::from_millis(200) && third < Duration::from_millis(400));
            assert!(policy.backoff(40) <= MAX_WAIT);
        }
        assert_eq!(policy.wait(1, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(policy.wait(1, Some(Duration::from_secs(3600))), MAX_WAIT);
    }

    #[test]
    fn reads_seconds_milliseconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(retry_after(None, Some("2"), now), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(None, Some(" 0 "), now), Some(Duration::ZERO));
        assert_eq!(retry_after(None, Some("1.5"), now), Some(Duration::from_millis(1500)));
        assert_eq!(retry_after(Some("250"), Some("9"), now), Some(Duration::from_millis(250)));
        assert_eq!(retry_after(None, Some("-1"), now), None);
        assert_eq!(retry_after(None, Some("soon"), now), None);
        assert_eq!(retry_after(None, None, now), None);
        assert_eq!(retry_after(None, Some("Sun, 06 Nov 1994 08:49:47 GMT"), now), Some(Duration::from_secs(10)));
        assert_eq!(retry_after(None, Some("Sun, 06 Nov 1994 08:49:00 GMT"), now), Some(Duration::ZERO));
        assert_eq!(retry_after(None, Some("Sun, 06 Nov 1994 25:49:00 GMT"), now), None);
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1994, 11, 6), 9_075);
    }
}
