//! What the proxy's benches measure with: percentiles of samples and the process's CPU time.

use std::time::Duration;

/// p50 and p99 of `samples` (NaN for none).
pub fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    if samples.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    samples.sort_by(f64::total_cmp);
    let at = |share: f64| samples[((samples.len() - 1) as f64 * share).round() as usize];
    (at(0.5), at(0.99))
}

/// The CPU time this process has used, all threads, to the nanosecond the kernel accounts.
pub fn cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to write.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
