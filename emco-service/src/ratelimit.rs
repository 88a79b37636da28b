//! Request rates per caller: a token bucket for each authenticated subject (each peer address
//! on an open server), refilled at the configured rate up to twice that as a burst. A caller
//! over its rate gets 429 with `Retry-After`; other callers are not slowed.

use emco_core::poison::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Buckets kept before the full (idle) ones are dropped.
const MAX_BUCKETS: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every caller.
#[derive(Debug)]
pub struct RateLimit {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimit {
    /// `per_second` requests a second per caller, bursts of twice that.
    #[must_use]
    pub fn new(per_second: u32) -> Self {
        let per_second = f64::from(per_second.max(1));
        Self {
            per_second,
            burst: 2.0 * per_second,
            buckets: Mutex::default(),
        }
    }

    /// The rate, requests a second.
    #[must_use]
    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Takes one request of `who`'s bucket at `now`; the wait until one is there when empty.
    pub fn take_at(&self, who: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = lock(&self.buckets);
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(who) {
            // A bucket refilled to the burst is the same as none.
            let (rate, burst) = (self.per_second, self.burst);
            buckets.retain(|_, b| {
                b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(who.to_owned()).or_insert(Bucket {
            tokens: self.burst,
            at: now,
        });
        let refill = now.saturating_duration_since(bucket.at).as_secs_f64() * self.per_second;
        bucket.tokens = (bucket.tokens + refill).min(self.burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - bucket.tokens) / self.per_second,
            ))
        }
    }

    /// [`RateLimit::take_at`] now.
    ///
    /// # Errors
    /// The wait until a request of `who` is allowed again.
    pub fn take(&self, who: &str) -> Result<(), Duration> {
        self.take_at(who, Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_gets_its_burst_then_its_rate_and_others_are_not_slowed() {
        let limit = RateLimit::new(10);
        let t0 = Instant::now();
        for _ in 0..20 {
            assert!(limit.take_at("alice", t0).is_ok());
        }
        let wait = limit.take_at("alice", t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        assert!(limit.take_at("bob", t0).is_ok());
        // A tenth of a second later: one more.
        let t1 = t0 + Duration::from_millis(100);
        assert!(limit.take_at("alice", t1).is_ok());
        assert!(limit.take_at("alice", t1).is_err());
        // Idle long enough: the whole burst again, never more.
        let t2 = t1 + Duration::from_secs(60);
        for _ in 0..20 {
            assert!(limit.take_at("alice", t2).is_ok());
        }
        assert!(limit.take_at("alice", t2).is_err());
    }

    #[test]
    fn idle_buckets_are_dropped_when_there_are_many() {
        let limit = RateLimit::new(1);
        let t0 = Instant::now();
        for i in 0..MAX_BUCKETS {
            limit.take_at(&format!("c{i}"), t0).unwrap();
        }
        // Ten seconds on, every bucket is full again and goes when a new caller comes.
        limit.take_at("new", t0 + Duration::from_secs(10)).unwrap();
        assert_eq!(limit.buckets.lock().unwrap().len(), 1);
    }
}
