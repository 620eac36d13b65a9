//! The consumer protocol embedded in classic groups: the subscription a consumer puts in its
//! JoinGroup protocols' metadata (Kafka's ConsumerProtocolSubscription) and the assignment a
//! SyncGroup hands it (ConsumerProtocolAssignment). The coordinator reads them only to move a
//! group between the classic and the consumer protocol (online migration) and to serve classic
//! members of a consumer group, whose assignment it computes itself.
//!
//! Format (non-flexible, big-endian, behind an `i16` version; a version above 3 is read as 3, as
//! Kafka reads it): subscription `[[]string topics][bytes? user data]`, v1+ `[[]{string topic,
//! []i32 partitions} owned]`, v2+ `[i32 generation]`, v3+ `[string? rack]`; assignment
//! `[[]{string topic, []i32 partitions}][bytes? user data]`.
//!
//! Invariant: parsing never trusts a count past the bytes present (a count is checked against
//! what remains before anything is allocated for it) and never panics.

use bytes::{BufMut, Bytes};

use super::records::Reader;

/// The highest version of both messages.
pub const MAX_VERSION: i16 = 3;

/// Partitions per topic name.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub topics: Vec<String>,
    pub user_data: Option<Bytes>,
    pub owned: TopicPartitions,
    pub generation: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    pub partitions: TopicPartitions,
    pub user_data: Option<Bytes>,
}

/// The version prefix of an embedded message (None: not one).
pub fn version(bytes: &[u8]) -> Option<i16> {
    Reader(bytes).i16().filter(|v| *v >= 0)
}

fn count(r: &mut Reader<'_>, min_size: usize) -> Option<usize> {
    let n = r.i32()?;
    (n >= 0 && (n as usize).saturating_mul(min_size) <= r.remaining()).then_some(n as usize)
}

fn topic_partitions(r: &mut Reader<'_>) -> Option<TopicPartitions> {
    let n = count(r, 6)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let topic = r.string()?;
        let parts = count(r, 4)?;
        out.push((topic, (0..parts).map(|_| r.i32()).collect::<Option<Vec<i32>>>()?));
    }
    Some(out)
}

pub fn subscription(bytes: &[u8]) -> Option<Subscription> {
    let mut r = Reader(bytes);
    let version = r.i16()?.min(MAX_VERSION);
    if version < 0 {
        return None;
    }
    let n = count(&mut r, 2)?;
    let topics = (0..n).map(|_| r.string()).collect::<Option<Vec<String>>>()?;
    let user_data = r.nullable_bytes()?;
    let mut s = Subscription { topics, user_data, generation: -1, ..Default::default() };
    if version >= 1 {
        s.owned = topic_partitions(&mut r)?;
    }
    if version >= 2 {
        s.generation = r.i32()?;
    }
    if version >= 3 {
        s.rack = r.nullable_string()?;
    }
    Some(s)
}

/// An assignment; empty bytes are no partitions (a member that joined but never synced).
pub fn assignment(bytes: &[u8]) -> Option<Assignment> {
    if bytes.is_empty() {
        return Some(Assignment::default());
    }
    let mut r = Reader(bytes);
    if r.i16()? < 0 {
        return None;
    }
    let partitions = topic_partitions(&mut r)?;
    let user_data = r.nullable_bytes()?;
    Some(Assignment { partitions, user_data })
}

/// An assignment at `version` (clamped to 0..=3), without user data.
pub fn encode_assignment(version: i16, partitions: &TopicPartitions) -> Bytes {
    let mut out = Vec::new();
    out.put_i16(version.clamp(0, MAX_VERSION));
    out.put_i32(partitions.len() as i32);
    for (topic, parts) in partitions {
        out.put_i16(topic.len() as i16);
        out.put_slice(topic.as_bytes());
        out.put_i32(parts.len() as i32);
        for p in parts {
            out.put_i32(*p);
        }
    }
    out.put_i32(-1);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_str(out: &mut Vec<u8>, s: &str) {
        out.put_i16(s.len() as i16);
        out.put_slice(s.as_bytes());
    }

    #[test]
    fn reads_every_subscription_version_and_round_trips_assignments() {
        let mut v3 = Vec::new();
        v3.put_i16(3);
        v3.put_i32(1);
        put_str(&mut v3, "t");
        v3.put_i32(-1);
        v3.put_i32(1);
        put_str(&mut v3, "t");
        v3.put_i32(2);
        v3.put_i32(0);
        v3.put_i32(4);
        v3.put_i32(7);
        put_str(&mut v3, "rack-a");
        let s = subscription(&v3).unwrap();
        assert_eq!(s.topics, vec!["t".to_string()]);
        assert_eq!(
            (s.owned.clone(), s.generation, s.rack.as_deref()),
            (vec![("t".into(), vec![0, 4])], 7, Some("rack-a"))
        );
        // A v0 subscription: topics and user data only.
        let mut v0 = Vec::new();
        v0.put_i16(0);
        v0.put_i32(0);
        v0.put_i32(2);
        v0.put_slice(b"ud");
        let s = subscription(&v0).unwrap();
        assert_eq!((s.topics.len(), s.user_data.as_deref(), s.generation), (0, Some(&b"ud"[..]), -1));
        let parts = vec![("a".to_string(), vec![1, 2]), ("b".to_string(), vec![])];
        let encoded = encode_assignment(9, &parts);
        assert_eq!(version(&encoded), Some(3));
        assert_eq!(assignment(&encoded), Some(Assignment { partitions: parts, user_data: None }));
        assert_eq!(assignment(b""), Some(Assignment::default()));
    }

    #[test]
    fn counts_past_the_bytes_are_refused_before_any_allocation() {
        let mut huge = Vec::new();
        huge.put_i16(1);
        huge.put_i32(i32::MAX);
        assert_eq!(subscription(&huge), None);
        assert_eq!(assignment(&huge), None);
        let mut neg = Vec::new();
        neg.put_i16(-1);
        assert_eq!(subscription(&neg), None);
        for cut in 0..20 {
            let _ = subscription(&encode_assignment(0, &vec![("topic".into(), vec![1, 2, 3])])[..cut.min(20)]);
        }
    }
}
