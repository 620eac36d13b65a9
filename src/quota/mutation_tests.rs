use super::*;
use crate::quota::entity::{Entity, CLIENT_ID, CONTROLLER_MUTATION_RATE};

fn quotas(client_id: &str, rate: f64) -> Quotas {
    let entity: Entity = [(CLIENT_ID.to_string(), Some(client_id.to_string()))].into();
    [(entity, [(CONTROLLER_MUTATION_RATE.to_string(), rate)].into())].into()
}

fn client(id: &str) -> Client<'_> {
    Client { user: "ANONYMOUS", client_id: id }
}

/// 2 samples of 1 s: a bucket holds 2 s of its rate.
fn buckets() -> MutationBuckets {
    MutationBuckets::new(Window { samples: 2, window_ms: 1000 })
}

#[test]
fn a_strict_quota_takes_whole_topics_until_the_bucket_is_below_zero() {
    let (b, q) = (buckets(), quotas("admin", 5.0));
    // Full at 10 tokens: a 6-partition topic, then an 8-partition one (which goes below zero).
    let mut quota = b.quota_for(&q, &client("admin"), true);
    assert_eq!(quota.take(6, 1_000), Ok(()));
    assert_eq!(quota.take(8, 1_000), Ok(()));
    assert_eq!(quota.throttle_ms(), 0, "Kafka reports a throttle only with a refusal");
    // At -4 tokens the next topic is refused, for the 800 ms that 4 tokens take at 5/s.
    assert_eq!(quota.take(1, 1_000), Err(THROTTLED_MESSAGE));
    assert_eq!(quota.throttle_ms(), 800);
    // A later request, after the refill: 1 s gives 5 tokens, back to 1.
    let mut later = b.quota_for(&q, &client("admin"), true);
    assert_eq!(later.take(1, 2_000), Ok(()));
}

#[test]
fn a_permissive_quota_takes_everything_and_reports_the_throttle() {
    let (b, q) = (buckets(), quotas("old", 5.0));
    let mut quota = b.quota_for(&q, &client("old"), false);
    assert_eq!(quota.take(15, 1_000), Ok(()));
    assert_eq!(quota.take(5, 1_000), Ok(()));
    assert_eq!(quota.throttle_ms(), 2_000, "-10 tokens at 5/s");
}

#[test]
fn without_a_quota_nothing_is_counted() {
    let (b, q) = (buckets(), quotas("admin", 5.0));
    let mut quota = b.quota_for(&q, &client("someone-else"), true);
    for _ in 0..100 {
        assert_eq!(quota.take(1_000, 1_000), Ok(()));
    }
    assert_eq!(quota.throttle_ms(), 0);
    assert!(b.buckets.lock().unwrap().is_empty());
}
