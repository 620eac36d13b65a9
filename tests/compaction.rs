//! Log compaction tests, driven through the public `ketch::log` API: latest value per key,
//! offsets unchanged, active segment untouched, tombstones and `delete.retention.ms`,
//! aborted transactions, the last stable offset, `min.cleanable.dirty.ratio`, and recovery from
//! a crash at every step of installing a cleaned segment. Batches are encoded with
//! kafka-protocol's encoder; real clients against compacted topics are in compat-tests/.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use ketch::config::{BrokerConfig, Properties, TopicConfig};
use ketch::error::LogError;
use ketch::log::batch;
use ketch::log::cleaner::{self, CleanStats};
use ketch::log::{Partition, PartitionLog};

const NOW: i64 = 1_700_000_000_000;
const BUDGET: usize = 1 << 20;

fn compact_config(extra: &[(&str, &str)]) -> TopicConfig {
    let mut config = BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults;
    config.set("cleanup.policy", "compact").unwrap();
    config.set("segment.bytes", "1024").unwrap();
    config.set("min.cleanable.dirty.ratio", "0.01").unwrap();
    for (k, v) in extra {
        config.set(k, v).unwrap();
    }
    config
}

/// (key, value) pairs; value None is a tombstone.
type Kv<'a> = (&'a str, Option<&'a str>);

fn encode(kvs: &[Kv<'_>], ts: i64, compression: Compression, producer: Option<(i64, i32, bool)>) -> Vec<u8> {
    let (producer_id, base_seq, transactional) = producer.unwrap_or((-1, -1, false));
    let records: Vec<Record> = kvs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: if producer_id >= 0 { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: base_seq + i as i32,
            timestamp: ts + i as i64,
            key: Some(Bytes::from(k.to_string())),
            value: v.map(|v| Bytes::from(v.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).unwrap();
    buf.to_vec()
}

fn append_batch(log: &mut PartitionLog, bytes: Vec<u8>, now: i64) -> i64 {
    let (bytes, summary) = batch::validate_produce(bytes, log.config(), now).unwrap();
    ketch::replica::append_as_leader(log, bytes, &summary, now).unwrap().base_offset
}

fn append(log: &mut PartitionLog, kvs: &[Kv<'_>], ts: i64) -> i64 {
    append_batch(log, encode(kvs, ts, Compression::None, None), ts)
}

/// Every record from the log start: offset -> (key, value), plus the control batches' offsets.
/// offset -> (key, value); value None is a tombstone.
type Records = BTreeMap<i64, (String, Option<String>)>;

fn contents(log: &PartitionLog) -> (Records, Vec<i64>) {
    let mut records = BTreeMap::new();
    let mut markers = Vec::new();
    let mut offset = log.log_start_offset();
    let end = log.log_end_offset();
    while offset < end {
        let bytes = log.read(offset, end, 1 << 20, true).unwrap();
        if bytes.is_empty() {
            break;
        }
        let mut buf = Bytes::from(bytes);
        while !buf.is_empty() {
            for r in RecordBatchDecoder::decode(&mut buf).unwrap().records {
                assert!(r.offset >= offset || records.contains_key(&r.offset), "offsets only move forward");
                offset = r.offset + 1;
                if r.control {
                    markers.push(r.offset);
                    continue;
                }
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let value = r.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
                records.insert(r.offset, (key, value));
            }
        }
    }
    (records, markers)
}

fn clean(partition: &Partition, now: i64) -> Option<CleanStats> {
    cleaner::clean_partition(partition, BUDGET, now).unwrap()
}

fn open(dir: &Path, config: TopicConfig) -> Partition {
    Partition::new("t".into(), 0, PartitionLog::open(dir, config, NOW).unwrap())
}

/// 5 keys written 20 times each in small batches, rolled across many 1 KiB segments.
fn fill(log: &mut PartitionLog) -> BTreeMap<String, (i64, String)> {
    let mut latest = BTreeMap::new();
    for round in 0..20 {
        for k in 0..5 {
            let key = format!("key{k}");
            let value = format!("value-{round}-{k}-{}", "x".repeat(40));
            let offset = append(log, &[(&key, Some(&value))], NOW + round);
            latest.insert(key, (offset, value));
        }
    }
    latest
}

#[test]
fn keeps_the_latest_record_per_key_at_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compact_config(&[]));
    let latest = fill(&mut partition.log());
    let (before, _) = contents(&partition.log());
    let end_before = partition.log().log_end_offset();
    let active_base = before.keys().copied().max().unwrap();

    let stats = clean(&partition, NOW + 100).expect("a pass is due");
    assert!(stats.records_removed > 0 && stats.bytes_out < stats.bytes_in, "{stats:?}");

    let log = partition.log();
    let (after, _) = contents(&log);
    assert_eq!(log.log_end_offset(), end_before, "the log end never moves");
    assert_eq!(log.log_start_offset(), 0);
    // Every record kept is exactly as it was, at the same offset.
    for (offset, kv) in &after {
        assert_eq!(before.get(offset), Some(kv));
    }
    // The latest value of every key is there at its original offset.
    for (key, (offset, value)) in &latest {
        assert_eq!(after.get(offset), Some(&(key.clone(), Some(value.clone()))));
    }
    // In the cleaned range each key appears once; the active segment is untouched.
    let cleaned_to = stats.cleaned_up_to;
    let mut seen = std::collections::HashSet::new();
    for (offset, (key, _)) in after.range(..cleaned_to) {
        assert!(seen.insert(key.clone()), "key {key} twice below {cleaned_to} (at {offset})");
    }
    assert!(after.contains_key(&active_base));
    assert_eq!(after.range(cleaned_to..).count(), before.range(cleaned_to..).count());
    drop(log);

    // Reopening finds the same contents; a second pass with nothing new dirty does nothing.
    let reopened = open(dir.path(), compact_config(&[]));
    assert_eq!(contents(&reopened.log()).0, after);
    assert_eq!(clean(&reopened, NOW + 200), None);
}

#[test]
fn compressed_and_idempotent_batches_keep_their_producer_fields() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compact_config(&[]));
    {
        let mut log = partition.log();
        for round in 0..12 {
            let a = format!("a{round}{}", "y".repeat(60));
            let b = format!("b{round}{}", "y".repeat(60));
            let kvs: [Kv<'_>; 3] = [("a", Some(&a)), (&format!("u{round}"), Some("unique")), ("b", Some(&b))];
            let kvs: Vec<(String, Option<String>)> =
                kvs.iter().map(|(k, v)| (k.to_string(), v.map(str::to_string))).collect();
            let refs: Vec<Kv<'_>> = kvs.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
            let bytes = encode(&refs, NOW + round, Compression::Lz4, Some((7, round as i32 * 3, false)));
            append_batch(&mut log, bytes, NOW + round);
        }
    }
    clean(&partition, NOW + 100).expect("a pass is due");
    let log = partition.log();
    let end = log.log_end_offset();
    let mut unique = 0;
    let mut offset = 0;
    while offset < end {
        let mut buf = Bytes::from(log.read(offset, end, 1 << 20, true).unwrap());
        if buf.is_empty() {
            break;
        }
        while !buf.is_empty() {
            let start = buf.clone();
            batch::check_batch(&start).expect("every cleaned batch has a valid CRC");
            let header = batch::Header::new(&start);
            assert_eq!(header.compression_id(), 3, "the producer's codec is kept");
            assert_eq!(header.producer_id(), 7);
            let set = RecordBatchDecoder::decode(&mut buf).unwrap();
            for r in &set.records {
                // The sequence of every record still matches its offset (3 records per batch).
                assert_eq!(r.sequence as i64 - r.offset, 0, "sequence stays aligned with the offset");
                unique += r.key.as_ref().is_some_and(|k| k.starts_with(b"u")) as i32;
                offset = r.offset + 1;
            }
        }
    }
    assert_eq!(unique, 12, "records with unique keys all stay");
}

#[test]
fn tombstones_stay_until_compacted_once_and_older_than_delete_retention() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compact_config(&[("delete.retention.ms", "1000")]));
    let tombstone_offset;
    {
        let mut log = partition.log();
        fill(&mut log);
        tombstone_offset = append(&mut log, &[("key0", None)], NOW + 30);
        log.roll().unwrap();
        append(&mut log, &[("other", Some("x"))], NOW + 31);
    }
    clean(&partition, NOW + 100).expect("first pass");
    let (after, _) = contents(&partition.log());
    assert_eq!(after.get(&tombstone_offset), Some(&("key0".to_string(), None)), "first pass keeps the tombstone");
    assert!(after.values().filter(|(k, _)| k == "key0").count() == 1, "older key0 values are gone");

    // New dirty data makes another pass due; the tombstone is now in the cleaned section.
    let add_dirty = |ts: i64| {
        let mut log = partition.log();
        for i in 0..30 {
            append(&mut log, &[(&format!("n{i}"), Some(&"z".repeat(50)))], ts);
        }
        log.roll().unwrap();
        append(&mut log, &[("tail", Some("t"))], ts);
    };
    add_dirty(NOW + 200);
    clean(&partition, NOW + 300).expect("second pass");
    assert!(contents(&partition.log()).0.contains_key(&tombstone_offset), "younger than delete.retention.ms");
    add_dirty(NOW + 400);
    clean(&partition, NOW + 5_000).expect("third pass");
    let (after, _) = contents(&partition.log());
    assert!(!after.contains_key(&tombstone_offset), "old tombstone removed");
    assert!(after.values().all(|(k, _)| k != "key0"), "and with it every trace of key0");
}

#[test]
fn aborted_records_go_markers_stay_and_open_transactions_block_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compact_config(&[]));
    let (aborted_at, committed_at, open_at);
    {
        let mut log = partition.log();
        fill(&mut log);
        aborted_at = append_batch(
            &mut log,
            encode(&[("key1", Some("aborted"))], NOW, Compression::None, Some((9, 0, true))),
            NOW + 40,
        );
        ketch::replica::append_marker_as_leader(&mut log, 9, 0, false, 0, NOW + 41).unwrap();
        committed_at = append_batch(
            &mut log,
            encode(&[("key2", Some("committed"))], NOW, Compression::None, Some((9, 1, true))),
            NOW + 42,
        );
        ketch::replica::append_marker_as_leader(&mut log, 9, 0, true, 0, NOW + 43).unwrap();
        log.roll().unwrap();
        // An open transaction: nothing from here on may be cleaned.
        open_at = append_batch(
            &mut log,
            encode(&[("key3", Some("open"))], NOW, Compression::None, Some((11, 0, true))),
            NOW + 44,
        );
        for i in 0..40 {
            append(&mut log, &[("key3", Some(&format!("later{i}{}", "w".repeat(40))))], NOW + 45);
        }
    }
    let (_, markers_before) = contents(&partition.log());
    let stats = clean(&partition, NOW + 100).expect("a pass is due");
    assert!(stats.cleaned_up_to <= open_at, "cleaning stops below the last stable offset");
    let (after, markers) = contents(&partition.log());
    assert_eq!(markers, markers_before, "transaction markers are kept");
    assert!(!after.contains_key(&aborted_at), "aborted records are removed");
    assert_eq!(after.get(&committed_at).map(|kv| kv.1.as_deref()), Some(Some("committed")));
    // key1's latest committed value (from fill) survives: the aborted write did not shadow it.
    assert!(after.values().any(|(k, v)| k == "key1" && v.as_deref().is_some_and(|v| v.starts_with("value-19"))));
    assert!(after.contains_key(&open_at));
}

#[test]
fn dirty_ratio_and_delete_policy() {
    let dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compact_config(&[("min.cleanable.dirty.ratio", "0.99")]));
    fill(&mut partition.log());
    clean(&partition, NOW + 100).expect("all dirty: ratio 1.0");
    {
        let mut log = partition.log();
        append(&mut log, &[("key0", Some("again"))], NOW + 101);
        log.roll().unwrap();
    }
    assert_eq!(clean(&partition, NOW + 200), None, "a little dirt is below the 0.99 ratio");

    // `delete` alone never compacts; `compact` alone never applies retention.
    let dir = tempfile::tempdir().unwrap();
    let mut config = compact_config(&[("cleanup.policy", "delete")]);
    let partition = open(dir.path(), config.clone());
    fill(&mut partition.log());
    assert_eq!(clean(&partition, NOW + 100), None);
    config.set("cleanup.policy", "compact").unwrap();
    config.set("retention.ms", "1").unwrap();
    partition.log().set_config(config);
    assert_eq!(partition.log().apply_retention(NOW + 1_000_000).unwrap(), 0);
}

#[test]
fn keyless_records_are_refused_on_compacted_topics() {
    let config = compact_config(&[]);
    let mut buf = BytesMut::new();
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: NOW,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: IndexMap::new(),
    };
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    let err = batch::validate_produce(buf.to_vec(), &config, NOW).unwrap_err();
    let LogError::InvalidRecords(errors) = &err else { panic!("{err}") };
    assert!(errors[0].message("t-0").contains("without key"), "{err}");
}

/// Copies the regular files of `from` into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn a_crash_at_any_step_of_the_swap_recovers_to_old_or_new() {
    // Build a log, keep a copy of it uncleaned, clean the original.
    let dir = tempfile::tempdir().unwrap();
    let before_dir = tempfile::tempdir().unwrap();
    let partition = open(dir.path(), compact_config(&[("segment.bytes", "1000000")]));
    {
        let mut log = partition.log();
        fill(&mut log);
        log.roll().unwrap();
        fill(&mut log);
        log.roll().unwrap();
        append(&mut log, &[("tail", Some("t"))], NOW + 50);
        log.close().unwrap();
    }
    copy_dir(dir.path(), before_dir.path());
    let (before, _) = contents(&PartitionLog::open(before_dir.path(), compact_config(&[]), NOW).unwrap());
    // One big segment limit: both old segments merge into one at base 0.
    let stats = clean(&partition, NOW + 100).unwrap();
    assert_eq!((stats.segments_in, stats.segments_out), (2, 1));
    let (after, _) = contents(&partition.log());
    partition.log().close().unwrap();
    let end = stats.cleaned_up_to;
    let merged = |suffix: &str| dir.path().join(format!("{:020}.{suffix}", 0));

    // Crash states, each on a fresh copy of the uncleaned log:
    for step in 0..5 {
        let crash = tempfile::tempdir().unwrap();
        copy_dir(before_dir.path(), crash.path());
        let second = std::fs::read_dir(crash.path())
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".log")?.parse::<i64>().ok())
            .filter(|b| *b > 0 && *b < end)
            .collect::<Vec<_>>();
        assert_eq!(second.len(), 1);
        let expected = if step == 0 {
            // 0: the merged segment was still being written: the partial one is discarded.
            let cleaning = crash.path().join(cleaner::CLEANING_DIR);
            std::fs::create_dir(&cleaning).unwrap();
            std::fs::write(cleaning.join(format!("{:020}.log", 0)), b"partial").unwrap();
            &before
        } else {
            // 1-4: committed (swap dir renamed in), then crashed at successive steps.
            let swap = crash.path().join(cleaner::swap_dir_name(0, end));
            std::fs::create_dir(&swap).unwrap();
            for suffix in ["log", "index", "timeindex"] {
                std::fs::copy(merged(suffix), swap.join(format!("{:020}.{suffix}", 0))).unwrap();
            }
            let old = |suffix: &str| crash.path().join(format!("{:020}.{suffix}", second[0]));
            if step >= 2 {
                std::fs::remove_file(old("index")).unwrap();
            }
            if step >= 3 {
                std::fs::remove_file(old("timeindex")).unwrap();
                std::fs::remove_file(old("log")).unwrap();
            }
            if step >= 4 {
                std::fs::rename(swap.join(format!("{:020}.index", 0)), crash.path().join(format!("{:020}.index", 0)))
                    .unwrap();
            }
            &after
        };
        let recovered = PartitionLog::open(crash.path(), compact_config(&[]), NOW).unwrap();
        assert_eq!(&contents(&recovered).0, expected, "crash at step {step}");
        assert!(!crash.path().join(cleaner::CLEANING_DIR).exists());
        assert!(!crash.path().join(cleaner::swap_dir_name(0, end)).exists());
    }
}
