//! A follower copies whatever its leader holds (Kafka's `appendAsFollower`): batches are checked
//! for integrity only (CRC, offsets that only go forward, epochs that never go back), never with
//! the rules for producers. Driven through the public `ketch::log` API: a leader's log is built
//! with the produce path (and the cleaner), then copied batch by batch, as the replica fetcher
//! copies a fetch answer, into a follower's log with a different config and clock.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use ketch::config::{BrokerConfig, Properties, TopicConfig};
use ketch::error::LogError;
use ketch::log::batch;
use ketch::log::cleaner;
use ketch::log::{Partition, PartitionLog};

const NOW: i64 = 1_700_000_000_000;
const HOUR_MS: i64 = 3_600_000;

fn config(extra: &[(&str, &str)]) -> TopicConfig {
    let mut config = BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults;
    for (k, v) in extra {
        config.set(k, v).unwrap();
    }
    config
}

/// One batch of `records` (key, value) at `timestamp`, idempotent from `producer` = (id, first
/// sequence) when given.
fn encode(records: &[(Option<&str>, &str)], timestamp: i64, producer: Option<(i64, i32)>) -> Vec<u8> {
    let (producer_id, base_seq) = producer.unwrap_or((-1, -1));
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: if producer_id >= 0 { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if producer_id >= 0 { base_seq + i as i32 } else { -1 },
            timestamp,
            key: k.map(|k| Bytes::from(k.to_string())),
            value: Some(Bytes::from(v.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.to_vec()
}

/// Produces `bytes` to the leader's log as a client would (the leader's rules, its clock).
fn produce(log: &mut PartitionLog, bytes: Vec<u8>, now: i64) -> i64 {
    let (bytes, summary) = batch::validate_produce(bytes, log.config(), now).unwrap();
    ketch::replica::append_as_leader(log, bytes, &summary, now).unwrap().base_offset
}

/// Copies the leader's whole log into `follower` as the replica fetcher does: fetches from the
/// follower's log end, appends every whole batch as follower.
fn copy(leader: &PartitionLog, follower: &mut PartitionLog, now: i64) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let fetched = leader.read(follower.log_end_offset(), leader.log_end_offset(), 700, true).unwrap();
        assert!(!fetched.is_empty(), "the leader returns a batch at or after {}", follower.log_end_offset());
        for whole in batch::whole_batches(&fetched).unwrap() {
            follower.append_as_follower(whole, now).unwrap();
        }
    }
}

/// Every batch of `log` as stored, from its log start.
fn batches(log: &PartitionLog) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        // One segment's batches at a time.
        let bytes = log.read(offset, log.log_end_offset(), usize::MAX >> 1, true).unwrap();
        out.extend(batch::whole_batches(&bytes).unwrap().into_iter().map(<[u8]>::to_vec));
        offset = batch::Header::new(out.last().expect("a batch")).last_offset() + 1;
    }
    out
}

fn open(dir: &Path, config: TopicConfig) -> PartitionLog {
    PartitionLog::open(dir, config, NOW).unwrap()
}

#[test]
fn a_compacted_log_with_offset_gaps_is_copied_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let compact = [("cleanup.policy", "compact"), ("segment.bytes", "1024"), ("min.cleanable.dirty.ratio", "0.01")];
    let leader = Partition::new("t".into(), 0, open(&dir.path().join("leader"), config(&compact)));
    for round in 0..20 {
        let value = format!("value-{round}-{}", "x".repeat(30));
        // The middle key is written every round: compaction leaves a hole inside each batch.
        let (first, last) = (format!("first{round}"), format!("last{round}"));
        let records: Vec<(Option<&str>, &str)> =
            vec![(Some(&first), &value), (Some("x"), &value), (Some(&last), &value)];
        let first_seq = round * 3;
        produce(&mut leader.log(), encode(&records, NOW + round as i64, Some((7, first_seq))), NOW);
    }
    leader.log().roll().unwrap();
    let stats = cleaner::clean_partition(&leader, 1 << 20, NOW).unwrap().expect("a cleanable log");
    assert!(stats.records_removed > 0, "the cleaner left gaps: {stats:?}");
    let leader = leader.log();
    let held = batches(&leader);
    assert!(
        held.iter().any(|b| {
            let h = batch::Header::new(b);
            h.record_count() != h.last_offset_delta() + 1
        }),
        "some batch holds fewer records than offsets"
    );

    // The follower's config is not the leader's (a delete topic), and its clock is a day later.
    let mut follower = open(&dir.path().join("follower"), config(&[("segment.bytes", "1024")]));
    copy(&leader, &mut follower, NOW + 24 * HOUR_MS);
    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(batches(&follower), held, "the follower holds the leader's batches exactly");
    assert_eq!(follower.epochs(), leader.epochs());
    // Producer state follows the copied batches: the last sequence is the last offset delta's.
    let last_seq = |log: &PartitionLog| log.producer_state().get(7).and_then(|p| p.batches.back()).map(|b| b.last_seq);
    assert_eq!(last_seq(&follower), Some(59));
    assert_eq!(last_seq(&follower), last_seq(&leader));

    // And all of it is found again after a restart.
    drop(follower);
    let follower = open(&dir.path().join("follower"), config(&[("segment.bytes", "1024")]));
    assert_eq!(batches(&follower), held);
}

#[test]
fn batches_the_producer_rules_would_refuse_are_copied() {
    let dir = tempfile::tempdir().unwrap();
    // LogAppendTime batches, keyless records (the follower's topic compacts), timestamps a day
    // ahead of the follower's clock: the leader's config and clock accepted all of them.
    let mut leader = open(&dir.path().join("leader"), config(&[("message.timestamp.type", "LogAppendTime")]));
    produce(&mut leader, encode(&[(None, "keyless")], NOW, None), NOW);
    let mut ahead = open(&dir.path().join("ahead"), config(&[]));
    produce(&mut ahead, encode(&[(Some("k"), "from the future")], NOW + 24 * HOUR_MS, None), NOW + 24 * HOUR_MS);
    let producer_rules = config(&[("cleanup.policy", "compact")]);
    for held in [batches(&leader), batches(&ahead)] {
        assert!(
            batch::validate_produce(Bytes::from(held[0].clone()), &producer_rules, NOW).is_err(),
            "the producer's rules refuse this batch on the follower's config and clock"
        );
        let mut follower = open(&dir.path().join(format!("f{}", held[0].len())), producer_rules.clone());
        follower.append_as_follower(&held[0], NOW).unwrap();
        assert_eq!(batches(&follower), held);
    }
}

#[test]
fn integrity_is_checked_and_nothing_is_written_for_a_bad_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = open(&dir.path().join("leader"), config(&[]));
    for i in 0..3 {
        produce(&mut leader, encode(&[(Some("k"), &format!("v{i}"))], NOW, None), NOW);
    }
    let held = batches(&leader);
    let mut follower = open(&dir.path().join("follower"), config(&[]));
    follower.append_as_follower(&held[0], NOW).unwrap();
    follower.append_as_follower(&held[1], NOW).unwrap();

    // A batch before the log end: not appended (Kafka's UnexpectedAppendOffsetException).
    let refused = follower.append_as_follower(&held[0], NOW).unwrap_err();
    assert!(matches!(refused, LogError::UnexpectedAppendOffset { first: 0, last: 0, end: 2 }), "{refused:?}");
    // A CRC that does not match.
    let mut corrupt = held[2].clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert!(matches!(follower.append_as_follower(&corrupt, NOW), Err(LogError::CorruptMessage(_))));
    // A leader epoch below the log's latest (epochs never go back in a leader's log).
    let mut later = open(&dir.path().join("later"), config(&[]));
    later.append_as_follower(&with_epoch(&held[0], 5), NOW).unwrap();
    let older = later.append_as_follower(&with_epoch(&held[1], 4), NOW).unwrap_err();
    assert!(matches!(older, LogError::CorruptMessage(ref m) if m.contains("below")), "{older:?}");
    assert_eq!(later.log_end_offset(), 1);

    assert_eq!(follower.log_end_offset(), 2, "nothing written by the refused batches");
    follower.append_as_follower(&held[2], NOW).unwrap();
    assert_eq!(batches(&follower), held);
}

/// `batch` with its partition leader epoch set to `epoch` (outside the CRC).
fn with_epoch(batch: &[u8], epoch: i32) -> Vec<u8> {
    let mut batch = batch.to_vec();
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
    batch
}

/// `batch` moved to start at `offset` (outside the CRC).
fn at_offset(batch: &[u8], offset: i64) -> Vec<u8> {
    let mut batch = batch.to_vec();
    batch[0..8].copy_from_slice(&offset.to_be_bytes());
    batch
}

#[test]
fn a_gap_too_large_for_a_segment_starts_a_segment_at_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = open(&dir.path().join("leader"), config(&[]));
    produce(&mut leader, encode(&[(Some("k"), "v")], NOW, None), NOW);
    let held = batches(&leader);
    let far = 5_000_000_000i64;
    let mut follower = open(&dir.path().join("follower"), config(&[]));
    follower.append_as_follower(&held[0], NOW).unwrap();
    follower.append_as_follower(&at_offset(&held[0], far), NOW).unwrap();
    assert_eq!(follower.log_end_offset(), far + 1);
    assert_eq!(follower.read(1, far + 1, 1 << 20, true).unwrap(), at_offset(&held[0], far), "found past the gap");
    drop(follower);
    let follower = open(&dir.path().join("follower"), config(&[]));
    assert_eq!(follower.log_end_offset(), far + 1);
    assert_eq!(follower.read(far, far + 1, 1 << 20, true).unwrap(), at_offset(&held[0], far));
}

#[test]
fn a_log_truncated_fully_starts_over_at_the_offset_given_and_stays_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("follower");
    let mut leader = open(&dir.path().join("leader"), config(&[]));
    for i in 0..3 {
        produce(&mut leader, encode(&[(Some("k"), &format!("v{i}"))], NOW, Some((9, i))), NOW);
    }
    let held = batches(&leader);
    let mut follower = open(&path, config(&[]));
    follower.append_as_follower(&held[0], NOW).unwrap();
    follower.roll().unwrap();
    follower.append_as_follower(&with_epoch(&held[1], 3), NOW).unwrap();
    follower.truncate_fully_and_start_at(100).unwrap();
    let state = (follower.log_start_offset(), follower.log_end_offset(), follower.high_watermark());
    assert_eq!(state, (100, 100, 100));
    assert!(follower.epochs().is_empty() && follower.producer_state().get(9).is_none());
    follower.append_as_follower(&at_offset(&held[2], 100), NOW).unwrap();
    drop(follower);
    let follower = open(&path, config(&[]));
    assert_eq!((follower.log_start_offset(), follower.log_end_offset()), (100, 101));
    let last_seq = follower.producer_state().get(9).and_then(|p| p.batches.back()).map(|b| b.last_seq);
    assert_eq!(last_seq, Some(2), "rebuilt from the copy only");
    assert_eq!(batches(&follower), vec![at_offset(&held[2], 100)]);
}

/// A producer's retry of a batch the log already holds is answered with where it is and, as
/// Kafka answers it (`BatchMetadata.timestamp`), the time it was stored with: on a LogAppendTime
/// topic the append time it got, on the leader that wrote it, on a follower that copied it and
/// became leader, and after either reopens (producer state replayed from the log, or loaded
/// from the snapshot a clean close leaves).
#[test]
fn a_retried_batch_is_answered_with_the_append_time_it_got() {
    let dir = tempfile::tempdir().unwrap();
    let append_time = config(&[("message.timestamp.type", "LogAppendTime")]);
    let sent = encode(&[(Some("k"), "v")], NOW - 5_000, Some((7, 0)));
    let send = |log: &mut PartitionLog, now: i64| {
        let (bytes, summary) = batch::validate_produce(sent.clone(), log.config(), now).unwrap();
        let info = ketch::replica::append_as_leader(log, bytes, &summary, now).unwrap();
        (info.base_offset, info.log_append_time_ms)
    };
    let mut leader = open(&dir.path().join("leader"), append_time.clone());
    assert_eq!(send(&mut leader, NOW), (0, NOW));
    assert_eq!(send(&mut leader, NOW + 1_000), (0, NOW), "a retry to the same leader");
    let mut follower = open(&dir.path().join("follower"), append_time.clone());
    copy(&leader, &mut follower, NOW + 2_000);
    assert_eq!(send(&mut follower, NOW + 3_000), (0, NOW), "a retry to the follower that took over");
    assert_eq!(follower.log_end_offset(), 1, "nothing written again");
    drop(follower);
    let mut reopened = open(&dir.path().join("follower"), append_time.clone());
    assert_eq!(send(&mut reopened, NOW + 4_000), (0, NOW), "after a kill: state replayed from the log");
    reopened.close().unwrap();
    let mut reopened = open(&dir.path().join("follower"), append_time);
    assert_eq!(send(&mut reopened, NOW + 5_000), (0, NOW), "after a clean close: state from the snapshot");
}
