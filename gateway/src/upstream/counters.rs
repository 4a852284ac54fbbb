//! The counters of one upstream, read by `GET /metrics`: calls, errors, a latency histogram.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram's buckets.
pub(crate) const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0, 300.0,
];

/// A lock-free latency histogram.
#[derive(Default)]
pub struct Histogram {
    pub(crate) counts: [AtomicU64; BUCKETS.len()],
    pub(crate) count: AtomicU64,
    pub(crate) sum_micros: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(
            d.as_micros().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }
}

/// Counters of one upstream.
#[derive(Default)]
pub struct UpstreamMetrics {
    /// Tool calls received.
    pub calls: AtomicU64,
    /// Tool calls that ended in an error status.
    pub errors: AtomicU64,
    /// How long calls took, errors included.
    pub latency: Histogram,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(1000));
        assert_eq!(h.counts[0].load(Ordering::Relaxed), 1);
        assert_eq!(h.counts[3].load(Ordering::Relaxed), 1);
        assert_eq!(h.count.load(Ordering::Relaxed), 3);
    }
}
