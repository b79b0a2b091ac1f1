//! `log.cleaner.io.max.bytes.per.second`, as Kafka's `Throttler`: the bytes every cleaner thread
//! reads and writes are counted together over windows of `CHECK_INTERVAL` (or of the bytes the
//! rate allows in that time); a window that ran ahead of the rate is followed by the sleep that
//! brings it back to the rate.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the observed rate is compared with the limit (Kafka's 300 ms).
pub const CHECK_INTERVAL: Duration = Duration::from_millis(300);
/// A sleep is cut into slices this long so that a stopping cleaner is not held up.
const SLEEP_SLICE: Duration = Duration::from_millis(50);

/// The rate arithmetic, without clocks or sleeping (`observe` says how long to sleep).
#[derive(Debug)]
pub struct Throttle {
    bytes_per_second: f64,
    window_start: Instant,
    bytes: f64,
}

impl Throttle {
    pub fn new(bytes_per_second: f64, now: Instant) -> Self {
        assert!(bytes_per_second > 0.0, "a rate limit is positive");
        Throttle { bytes_per_second, window_start: now, bytes: 0.0 }
    }

    /// Count `bytes` done at `now`; returns how long to sleep before going on, if at all.
    pub fn observe(&mut self, bytes: u64, now: Instant) -> Option<Duration> {
        self.bytes += bytes as f64;
        let elapsed = now.saturating_duration_since(self.window_start);
        let due = Duration::from_secs_f64(self.bytes / self.bytes_per_second);
        // A window ends after CHECK_INTERVAL (Kafka) or once its bytes are worth that long at the
        // rate (so that a fast pass is not one unthrottled burst).
        if elapsed < CHECK_INTERVAL && due < CHECK_INTERVAL {
            return None;
        }
        self.bytes = 0.0;
        let sleep = due.checked_sub(elapsed).filter(|s| !s.is_zero());
        self.window_start = now + sleep.unwrap_or_default();
        sleep
    }
}

/// The throttle all cleaner threads share (no lock at all when there is no limit).
pub struct IoThrottle(Option<Mutex<Throttle>>);

impl IoThrottle {
    /// `bytes_per_second` of `f64::MAX` (Kafka's default) or more means no limit.
    pub fn new(bytes_per_second: f64) -> Self {
        if bytes_per_second >= f64::MAX {
            IoThrottle(None)
        } else {
            IoThrottle(Some(Mutex::new(Throttle::new(bytes_per_second, Instant::now()))))
        }
    }

    pub fn unlimited() -> Self {
        IoThrottle(None)
    }

    /// Count `bytes` and sleep if the cleaner is ahead of the limit (until `stop` is set).
    pub fn charge(&self, bytes: u64, stop: &AtomicBool) {
        let Some(t) = &self.0 else { return };
        let sleep = t.lock().unwrap_or_else(|p| p.into_inner()).observe(bytes, Instant::now());
        let Some(sleep) = sleep else { return };
        let until = Instant::now() + sleep;
        while !stop.load(Ordering::Relaxed) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(SLEEP_SLICE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_ahead_of_the_rate_sleeps_back_to_it_and_one_under_it_does_not() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut t = Throttle::new(1_000_000.0, t0);
        assert_eq!(t.observe(100_000, t0 + ms(100)), None, "100 ms worth in 100 ms");
        // 900 KB after 200 ms at 1 MB/s: due at 900 ms, so 700 ms of sleep.
        assert_eq!(t.observe(800_000, t0 + ms(200)), Some(ms(700)));
        // The next window starts after the sleep: 200 KB in its 400 ms is under the rate.
        assert_eq!(t.observe(200_000, t0 + ms(1300)), None);
        assert_eq!(t.observe(100_000, t0 + ms(1350)), None);
    }
}
