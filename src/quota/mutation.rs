//! The controller mutation quota (`controller_mutation_rate`, KIP-599): how many partitions a
//! client may create or delete per second through CreateTopics, CreatePartitions and DeleteTopics,
//! as Kafka's `ControllerMutationQuotaManager` counts them, where the topics are decided: a
//! single node's handlers, or a controller's (`controller::quorum`), which knows the client of a
//! request a broker forwarded from its Envelope.
//!
//! Each (user, client-id) sharing a quota (the same tags as the byte-rate quotas) has a token
//! bucket (Kafka's `TokenBucket`): it starts full with `quota.window.num` x
//! `quota.window.size.seconds` x rate tokens and refills at the rate. A strict quota (the
//! request versions that know the error: CreateTopics v6+, CreatePartitions v3+, DeleteTopics
//! v5+) refuses a topic with THROTTLING_QUOTA_EXCEEDED once the bucket is below zero, and takes
//! the whole topic's partitions otherwise (a topic may take it below zero); a permissive one
//! (older versions) takes every topic. Either way the response carries the time the bucket needs
//! to be back at zero. Invariants: without a `controller_mutation_rate` quota nothing is kept;
//! at most `MAX_BUCKETS` buckets, idle (full) ones dropped first.

use std::collections::HashMap;
use std::sync::Mutex;

use super::entity::Quotas;
use super::rate::Window;
use super::store::{limit_of, Client, Kind, Limit, SensorKey};

/// Buckets kept at most (one per active (user, client-id) tags).
const MAX_BUCKETS: usize = 100_000;

/// Kafka's message for THROTTLING_QUOTA_EXCEEDED.
pub const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last_ms: u64,
}

impl Bucket {
    /// Kafka's `TokenBucket.refill`: at `rate` per second, up to `burst`.
    fn refill(&mut self, rate: f64, burst: f64, now_ms: u64) {
        let elapsed_s = now_ms.saturating_sub(self.last_ms) as f64 / 1000.0;
        self.tokens = burst.min(self.tokens + rate * elapsed_s);
        self.last_ms = self.last_ms.max(now_ms);
    }
}

/// The token buckets of one node's mutation quotas.
pub struct MutationBuckets {
    window: Window,
    buckets: Mutex<HashMap<SensorKey, Bucket>>,
}

impl MutationBuckets {
    pub fn new(window: Window) -> MutationBuckets {
        MutationBuckets { window, buckets: Mutex::new(HashMap::new()) }
    }

    /// The quota one request of `client` is held to under `quotas`: strict or permissive as its
    /// version asks; unbounded without a `controller_mutation_rate` for it.
    pub fn quota_for(&self, quotas: &Quotas, client: &Client, strict: bool) -> MutationQuota<'_> {
        MutationQuota { buckets: self, limit: limit_of(quotas, Kind::Mutation, client), strict, throttle_ms: 0 }
    }

    fn burst(&self, rate: f64) -> f64 {
        self.window.samples as f64 * (self.window.window_ms as f64 / 1000.0) * rate
    }
}

/// One request's use of its mutation quota.
pub struct MutationQuota<'a> {
    buckets: &'a MutationBuckets,
    limit: Option<Limit>,
    strict: bool,
    throttle_ms: u64,
}

impl MutationQuota<'_> {
    /// Takes `partitions` permits for one topic at `now_ms`: Err(THROTTLED_MESSAGE) when a strict
    /// quota is already exhausted (nothing taken).
    pub fn take(&mut self, partitions: u32, now_ms: u64) -> Result<(), &'static str> {
        let Some(limit) = &self.limit else { return Ok(()) };
        let (rate, burst) = (limit.bound, self.buckets.burst(limit.bound));
        let mut buckets = self.buckets.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(&limit.key) && buckets.len() >= MAX_BUCKETS {
            // A full bucket is as good as a new one.
            buckets.retain(|_, b| {
                let mut b = *b;
                b.refill(rate, burst, now_ms);
                b.tokens < burst
            });
        }
        // A new bucket starts full (Kafka's starts empty at time 0 and refills to its burst).
        let bucket = buckets.entry(limit.key.clone()).or_insert(Bucket { tokens: burst, last_ms: now_ms });
        bucket.refill(rate, burst, now_ms);
        let throttle_ms = |tokens: f64| if tokens < 0.0 { (-tokens / rate * 1000.0).round() as u64 } else { 0 };
        if self.strict && bucket.tokens < 0.0 {
            self.throttle_ms = throttle_ms(bucket.tokens);
            return Err(THROTTLED_MESSAGE);
        }
        bucket.tokens = burst.min(bucket.tokens - f64::from(partitions));
        if !self.strict {
            self.throttle_ms = throttle_ms(bucket.tokens);
        }
        Ok(())
    }

    /// The throttle time the response carries (Kafka's `lastThrottleTimeMs`).
    pub fn throttle_ms(&self) -> i32 {
        self.throttle_ms.min(i32::MAX as u64) as i32
    }
}

#[cfg(test)]
#[path = "mutation_tests.rs"]
mod tests;
