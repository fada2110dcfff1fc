// SPDX-License-Identifier: GPL-2.0
//! ubperf's statistics: throughput from a count over a time, and latency
//! percentiles over samples.

use std::time::Duration;

use serde::Serialize;

/// The nearest-rank percentile `p` (0..=100) of `sorted` (ascending): the
/// smallest sample with at least p % of the samples at or below it; `None`
/// for no samples.
pub fn percentile<T: Copy>(sorted: &[T], p: u32) -> Option<T> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let p = p.min(100) as usize;
    // rank = ceil(p * n / 100), at least 1.
    let rank = (p * n).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

/// One-way latency (half the round trip) in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Latency {
    /// Round trips measured.
    pub samples: usize,
    /// Smallest.
    pub min_us: f64,
    /// The median (nearest rank).
    pub median_us: f64,
    /// The 99th percentile (nearest rank).
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
}

impl Latency {
    /// The summary of round-trip times; `None` for none.
    pub fn from_round_trips(mut rtts: Vec<Duration>) -> Option<Latency> {
        rtts.sort_unstable();
        let one_way = |d: Duration| d.as_secs_f64() * 1e6 / 2.0;
        Some(Latency {
            samples: rtts.len(),
            min_us: one_way(*rtts.first()?),
            median_us: one_way(percentile(&rtts, 50)?),
            p99_us: one_way(percentile(&rtts, 99)?),
            max_us: one_way(*rtts.last()?),
        })
    }
}

/// Messages and bytes over a time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Throughput {
    /// Messages.
    pub messages: u64,
    /// Bytes.
    pub bytes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Messages per second.
    pub messages_per_sec: f64,
    /// 10^6 bytes per second.
    pub mb_per_sec: f64,
}

impl Throughput {
    /// `messages` of `bytes` in all over `elapsed` (rates 0 for no time).
    pub fn new(messages: u64, bytes: u64, elapsed: Duration) -> Throughput {
        let s = elapsed.as_secs_f64();
        let rate = |x: u64| if s > 0.0 { x as f64 / s } else { 0.0 };
        Throughput {
            messages,
            bytes,
            seconds: s,
            messages_per_sec: rate(messages),
            mb_per_sec: rate(bytes) / 1e6,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 0), Some(1));
        assert_eq!(percentile(&v, 50), Some(50));
        assert_eq!(percentile(&v, 99), Some(99));
        assert_eq!(percentile(&v, 100), Some(100));
        let v = [15, 20, 35, 40, 50];
        assert_eq!(percentile(&v, 30), Some(20));
        assert_eq!(percentile(&v, 40), Some(20));
        assert_eq!(percentile(&v, 50), Some(35));
        assert_eq!(percentile(&v, 99), Some(50));
        assert_eq!(percentile(&[7], 99), Some(7));
        assert_eq!(percentile::<u32>(&[], 50), None);
    }

    #[test]
    fn latency_is_half_the_round_trip() {
        // 1..=1000 µs round trips, unsorted.
        let rtts: Vec<_> = (1..=1000u64)
            .rev()
            .map(|us| Duration::from_micros(us * 2))
            .collect();
        let l = Latency::from_round_trips(rtts);
        let l = l.unwrap_or(Latency {
            samples: 0,
            min_us: 0.0,
            median_us: 0.0,
            p99_us: 0.0,
            max_us: 0.0,
        });
        assert_eq!(l.samples, 1000);
        assert!((l.min_us - 1.0).abs() < 1e-9);
        assert!((l.median_us - 500.0).abs() < 1e-9);
        assert!((l.p99_us - 990.0).abs() < 1e-9);
        assert!((l.max_us - 1000.0).abs() < 1e-9);
        assert_eq!(Latency::from_round_trips(Vec::new()), None);
    }

    #[test]
    fn throughput_rates() {
        let t = Throughput::new(1000, 4_096_000, Duration::from_millis(500));
        assert!((t.messages_per_sec - 2000.0).abs() < 1e-9);
        assert!((t.mb_per_sec - 8.192).abs() < 1e-9);
        let z = Throughput::new(5, 5, Duration::ZERO);
        assert_eq!(z.messages_per_sec, 0.0);
    }
}
