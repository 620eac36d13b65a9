//! Log engine tests: append/read, rolling, index rebuild, torn-tail recovery, retention and
//! timestamp lookups, driven through the public `ketch::log` API. Batches are encoded with
//! kafka-protocol's encoder (a client-side encoder; compatibility with real clients is proven in
//! compat-tests/).

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use ketch::config::{BrokerConfig, Properties, TopicConfig};
use ketch::error::LogError;
use ketch::log::batch::{self, Header};
use ketch::log::PartitionLog;

fn defaults() -> TopicConfig {
    BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults
}

fn encode(values: &[&str], first_timestamp: i64, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: first_timestamp + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).unwrap();
    buf.to_vec()
}

fn append(log: &mut PartitionLog, values: &[&str], ts: i64, now: i64) -> i64 {
    let (bytes, summary) = batch::validate_produce(encode(values, ts, Compression::None), log.config(), now).unwrap();
    ketch::replica::append_as_leader(log, bytes, &summary, now).unwrap().base_offset
}

/// Every batch in `bytes`: (base offset, last offset).
fn batches(mut bytes: &[u8]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let total = batch::check_batch(bytes).unwrap();
        let h = Header::new(bytes);
        out.push((h.base_offset(), h.last_offset()));
        bytes = &bytes[total..];
    }
    out
}

const NOW: i64 = 1_700_000_000_000;

#[test]
fn offsets_are_assigned_contiguously_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    assert_eq!(append(&mut log, &["a", "b", "c"], NOW, NOW), 0);
    assert_eq!(append(&mut log, &["d"], NOW, NOW), 3);
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.high_watermark(), 4);
    let all = log.read(0, 4, 1 << 20, true).unwrap();
    assert_eq!(batches(&all), vec![(0, 2), (3, 3)]);
    // Reading from inside a batch returns the whole batch that holds the offset.
    assert_eq!(batches(&log.read(1, 4, 1 << 20, true).unwrap()), vec![(0, 2), (3, 3)]);
    assert!(log.read(4, 4, 1 << 20, true).unwrap().is_empty());
    assert!(matches!(log.read(5, 4, 1 << 20, true), Err(LogError::OffsetOutOfRange { .. })));
}

#[test]
fn max_bytes_keeps_whole_batches_but_always_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    for _ in 0..3 {
        append(&mut log, &["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"], NOW, NOW);
    }
    let one = log.read(0, 3, 10, true).unwrap();
    assert_eq!(batches(&one), vec![(0, 0)]);
    assert!(log.read(0, 3, 10, false).unwrap().is_empty());
    let size = one.len();
    assert_eq!(batches(&log.read(0, 3, size * 2 + 5, false).unwrap()), vec![(0, 0), (1, 1)]);
}

#[test]
fn segments_roll_and_survive_reopen_with_rebuilt_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 300;
    config.index_interval_bytes = 100;
    let mut log = PartitionLog::open(dir.path(), config.clone(), NOW).unwrap();
    for i in 0..20 {
        append(&mut log, &["value-value-value", "v2"], NOW + i, NOW);
    }
    let segments = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "log"))
        .count();
    assert!(segments > 3, "expected several segments, got {segments}");
    let before: Vec<_> = (0..40).map(|o| batches(&log.read(o, 40, 1 << 20, true).unwrap())[0]).collect();
    log.close().unwrap();
    drop(log);
    // Corrupt one index and delete another: both must be rebuilt from the log.
    let mut indexes: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "index"))
        .collect();
    indexes.sort();
    std::fs::write(&indexes[0], [1, 2, 3]).unwrap();
    std::fs::remove_file(&indexes[1]).unwrap();
    let log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 40);
    let after: Vec<_> = (0..40).map(|o| batches(&log.read(o, 40, 1 << 20, true).unwrap())[0]).collect();
    assert_eq!(before, after);
}

#[test]
fn recovery_truncates_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    append(&mut log, &["a", "b"], NOW, NOW);
    append(&mut log, &["c"], NOW, NOW);
    drop(log);
    let path = dir.path().join("00000000000000000000.log");
    let full = std::fs::read(&path).unwrap();
    // A crash mid-write: half of a third batch, then garbage.
    let mut torn = full.clone();
    let third = encode(&["d"], NOW, Compression::None);
    torn.extend_from_slice(&third[..third.len() / 2]);
    std::fs::write(&path, &torn).unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    assert_eq!(log.log_end_offset(), 3);
    assert_eq!(std::fs::metadata(&path).unwrap().len() as usize, full.len());
    // A flipped bit in the last batch: its CRC fails and it is dropped.
    drop(log);
    let mut flipped = full.clone();
    let last = flipped.len() - 2;
    flipped[last] ^= 0x40;
    std::fs::write(&path, &flipped).unwrap();
    log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    // The log keeps working after recovery.
    assert_eq!(append(&mut log, &["e"], NOW, NOW), 2);
}

#[test]
fn a_batch_length_too_small_for_a_header_is_corruption_recovered_never_a_loop() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    append(&mut log, &["a", "b"], NOW, NOW);
    let second = append(&mut log, &["c"], NOW, NOW);
    append(&mut log, &["d"], NOW, NOW);
    let at = log.read(second, 4, 1 << 20, true).unwrap().len();
    let path = dir.path().join("00000000000000000000.log");
    let full = std::fs::read(&path).unwrap();
    let position = full.len() - at; // where the second batch starts
    log.close().unwrap();
    drop(log);
    // Lengths whose batch would be shorter than its header (-12 made every scan step 0 bytes).
    for length in [-12i32, -1, 0, 48, i32::MIN] {
        let mut bad = full.clone();
        bad[position + 8..position + 12].copy_from_slice(&length.to_be_bytes());
        for recover_tail in [false, true] {
            std::fs::write(&path, &bad).unwrap();
            let log = PartitionLog::open_with(dir.path(), defaults(), NOW, recover_tail).unwrap();
            assert_eq!(log.log_end_offset(), 2, "length {length}: the log ends before the corrupt batch");
            assert_eq!(batches(&log.read(0, 2, 1 << 20, true).unwrap()), vec![(0, 1)]);
        }
    }
}

#[test]
fn timestamp_lookup_finds_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.index_interval_bytes = 1;
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    append(&mut log, &["a", "b", "c"], NOW - 1000, NOW); // ts -1000, -999, -998
    append(&mut log, &["d", "e"], NOW - 500, NOW); // -500, -499
    append(&mut log, &["f"], NOW - 100, NOW);
    assert_eq!(log.offset_for_timestamp(NOW - 2000).unwrap(), Some((0, NOW - 1000)));
    assert_eq!(log.offset_for_timestamp(NOW - 999).unwrap(), Some((1, NOW - 999)));
    assert_eq!(log.offset_for_timestamp(NOW - 997).unwrap(), Some((3, NOW - 500)));
    assert_eq!(log.offset_for_timestamp(NOW - 499).unwrap(), Some((4, NOW - 499)));
    assert_eq!(log.offset_for_timestamp(NOW - 100).unwrap(), Some((5, NOW - 100)));
    assert_eq!(log.offset_for_timestamp(NOW).unwrap(), None);
    assert_eq!(log.max_timestamp(), Some((5, NOW - 100)));
}

#[test]
fn retention_deletes_whole_old_segments_and_moves_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 200;
    config.retention_ms = 10_000;
    let mut log = PartitionLog::open(dir.path(), config.clone(), NOW).unwrap();
    for i in 0..10 {
        append(&mut log, &["old-record-payload"], NOW - 60_000 + i, NOW);
    }
    for _ in 0..3 {
        append(&mut log, &["new-record-payload"], NOW, NOW);
    }
    let deleted = log.apply_retention(NOW).unwrap();
    assert!(deleted > 0);
    assert!(log.log_start_offset() > 0 && log.log_start_offset() <= 10);
    assert!(matches!(log.read(0, 13, 1000, true), Err(LogError::OffsetOutOfRange { .. })));
    assert_eq!(log.log_end_offset(), 13);
    // Size-based retention keeps at most retention.bytes (whole segments).
    let mut config = config.clone();
    config.retention_ms = -1;
    config.retention_bytes = 250;
    log.set_config(config);
    log.apply_retention(NOW).unwrap();
    assert!(log.size_bytes() <= 450, "size {}", log.size_bytes());
    let start = log.log_start_offset();
    drop(log);
    let log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    assert_eq!(log.log_start_offset(), start);
}

#[test]
fn validation_rejects_bad_batches_with_kafka_codes() {
    let config = defaults();
    let good = encode(&["a", "b"], NOW, Compression::None);
    // CRC mismatch -> CORRUPT_MESSAGE (2)
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    assert_eq!(batch::validate_produce(bad, &config, NOW).unwrap_err().code(), 2);
    // Two batches in one produce -> INVALID_RECORD (87)
    let mut two = good.clone();
    two.extend_from_slice(&good);
    assert_eq!(batch::validate_produce(two, &config, NOW).unwrap_err().code(), 87);
    // Too large -> MESSAGE_TOO_LARGE (10)
    let mut small = config.clone();
    small.max_message_bytes = 20;
    assert_eq!(batch::validate_produce(good.clone(), &small, NOW).unwrap_err().code(), 10);
    // Timestamp too far in the future -> INVALID_TIMESTAMP (32)
    let future = encode(&["a"], NOW + 10 * 3_600_000, Compression::None);
    assert_eq!(batch::validate_produce(future, &config, NOW).unwrap_err().code(), 32);
    // Truncated -> CORRUPT_MESSAGE
    assert_eq!(batch::validate_produce(good[..30].to_vec(), &config, NOW).unwrap_err().code(), 2);
}

#[test]
fn every_codec_validates_and_recompresses() {
    for codec in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let produced = encode(&["alpha", "beta", "gamma"], NOW, codec);
        let mut config = defaults();
        let (_, summary) = batch::validate_produce(produced.clone(), &config, NOW).unwrap();
        assert_eq!(summary.record_count, 3);
        config.set("compression.type", "zstd").unwrap();
        let (recompressed, _) = batch::validate_produce(produced, &config, NOW).unwrap();
        assert_eq!(Header::new(&recompressed).compression_id(), 4, "{codec:?} recompressed to zstd");
        let mut bytes = recompressed;
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
        let values: Vec<_> = set.records.iter().map(|r| r.value.clone().unwrap()).collect();
        assert_eq!(values, vec![Bytes::from("alpha"), Bytes::from("beta"), Bytes::from("gamma")]);
    }
}

/// LZ4 frames with 4 MiB maximum blocks and a content checksum (Go's pierrec/lz4 defaults, as
/// sent by clients built on it) validate like Kafka's 64 KiB-block frames.
#[test]
fn lz4_frames_with_4_mib_blocks_validate() {
    let values: Vec<String> = (0..200).map(|i| format!("value-{i}-{}", "y".repeat(i % 50))).collect();
    let refs: Vec<&str> = values.iter().map(|v| v.as_str()).collect();
    let (batch, _) = lz4_batch(&refs, |_| {});
    let (_, summary) = batch::validate_produce(batch, &defaults(), NOW).unwrap();
    assert_eq!(summary.record_count, 200);
}

/// Like Kafka 4.1 (whose LZ4 reader skips the trailer), a frame's content checksum is not
/// verified: the batch CRC covers the compressed bytes. The records are still walked in full.
#[test]
fn lz4_content_checksum_is_not_verified_but_records_are() {
    let values: Vec<String> = (0..100).map(|i| format!("v{i}-{}", "z".repeat(i))).collect();
    let refs: Vec<&str> = values.iter().map(|v| v.as_str()).collect();
    let (wrong_checksum, _) = lz4_batch(&refs, |frame| {
        let n = frame.len();
        frame[n - 1] ^= 0xff; // the last byte of the xxHash32 content checksum
    });
    let (_, summary) = batch::validate_produce(wrong_checksum, &defaults(), NOW).unwrap();
    assert_eq!(summary.record_count, 100);
    // A damaged block is still refused, with the same correct batch CRC.
    let (damaged, frame_len) = lz4_batch(&refs, |frame| {
        let middle = frame.len() / 2;
        frame[middle] ^= 0x5a;
        frame[middle + 1] ^= 0xa5;
    });
    assert!(frame_len > 100);
    let code = batch::validate_produce(damaged, &defaults(), NOW).unwrap_err().code();
    assert!(code == 2 || code == 87, "error code {code}");
}

/// A v2 batch of `values` whose body is one LZ4 frame as Go's pierrec/lz4 writes by default
/// (4 MiB blocks, content checksum), after `edit` of the frame, with a correct batch CRC.
/// Returns the batch and the frame's length.
fn lz4_batch(values: &[&str], edit: impl FnOnce(&mut Vec<u8>)) -> (Vec<u8>, usize) {
    use std::io::Write;
    let plain = encode(values, NOW, Compression::None);
    let mut encoder = lz4::EncoderBuilder::new()
        .block_size(lz4::BlockSize::Max4MB)
        .checksum(lz4::ContentChecksum::ChecksumEnabled)
        .build(Vec::new())
        .unwrap();
    encoder.write_all(&plain[61..]).unwrap();
    let (mut frame, result) = encoder.finish();
    result.unwrap();
    edit(&mut frame);
    let mut batch = plain[..61].to_vec();
    batch.extend_from_slice(&frame);
    let attributes = i16::from_be_bytes([batch[21], batch[22]]) | 3; // lz4
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    let len = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    (batch, frame.len())
}

/// A compressed body that is cut short or garbage (with a correct batch CRC, so only the codec
/// can notice) is refused with CORRUPT_MESSAGE or INVALID_RECORD, never accepted or a panic.
#[test]
fn broken_compressed_bodies_are_refused() {
    let values: Vec<String> = (0..50).map(|i| format!("value-{i}-{}", "x".repeat(i * 10))).collect();
    let refs: Vec<&str> = values.iter().map(|v| v.as_str()).collect();
    for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let good = encode(&refs, NOW, codec);
        let body = &good[61..];
        let mut garbage = body.to_vec();
        for (i, b) in garbage.iter_mut().enumerate().skip(8) {
            *b ^= (i * 37) as u8;
        }
        for broken in [body[..body.len() / 2].to_vec(), garbage, Vec::new()] {
            let mut batch = good[..61].to_vec();
            batch.extend_from_slice(&broken);
            let len = (batch.len() - 12) as i32;
            batch[8..12].copy_from_slice(&len.to_be_bytes());
            let crc = crc32c::crc32c(&batch[21..]);
            batch[17..21].copy_from_slice(&crc.to_be_bytes());
            let code = batch::validate_produce(batch, &defaults(), NOW).unwrap_err().code();
            assert!(code == 2 || code == 87, "{codec:?}: error code {code}");
        }
    }
}

#[test]
fn log_append_time_is_stamped_by_the_broker() {
    let mut config = defaults();
    config.set("message.timestamp.type", "LogAppendTime").unwrap();
    let (bytes, _) = batch::validate_produce(encode(&["a"], 5, Compression::None), &config, NOW).unwrap();
    assert_eq!(Header::new(&bytes).max_timestamp(), NOW);
    batch::check_batch(&bytes).unwrap();
}

/// A fetch locates its records under the partition lock and sends them after it: the slice
/// must stay readable (the same bytes) when DeleteRecords or retention deletes its segment
/// meanwhile, and a slice never ends mid-batch.
#[test]
fn a_located_slice_outlives_the_deletion_of_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 300;
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    for i in 0..20 {
        append(&mut log, &["value-value-value", "v2"], NOW + i, NOW);
    }
    let slice = log.read_slice(0, 40, 1 << 20, true).unwrap().expect("records at offset 0");
    let expected = log.read(0, 40, 1 << 20, true).unwrap();
    assert_eq!(slice.len, expected.len());
    assert_eq!(batches(&expected).first(), Some(&(0, 1)));
    log.delete_records_before(30).unwrap();
    assert!(!dir.path().join(format!("{:020}.log", 0)).exists(), "the first segment is gone");
    assert_eq!(slice.read_to_vec().unwrap(), expected);
    // Budgets cut at batch boundaries: never a partial batch, at least one with min_one.
    let one = log.read_slice(30, 40, 1, true).unwrap().unwrap();
    assert_eq!(batches(&one.read_to_vec().unwrap()), vec![(30, 31)]);
    assert!(log.read_slice(30, 40, 1, false).unwrap().is_none());
    assert!(log.read_slice(30, 30, 1 << 20, true).unwrap().is_none(), "nothing at or past max_offset");
}

#[test]
fn a_segment_created_during_an_fsync_still_gets_its_directory_synced() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    append(&mut log, &["a"], NOW, NOW);
    let first = log.flush_work().unwrap();
    assert!(first.includes_dir(), "the new log's first segment needs its directory entry synced");
    // While that fsync runs (outside the lock), the log rolls: the new segment is not covered.
    log.roll().unwrap();
    append(&mut log, &["b"], NOW, NOW);
    log.mark_flushed(&first, NOW);
    let second = log.flush_work().unwrap();
    assert!(second.includes_dir(), "the segment created during the first fsync needs the directory synced");
    log.mark_flushed(&second, NOW);
    assert!(!log.flush_work().unwrap().includes_dir());
    assert_eq!(log.flushed_offset(), 2);
}

#[test]
fn reads_near_the_log_end_match_reads_that_scan_the_file() {
    // The active segment remembers its newest batches so that tail reads need no header reads;
    // a log reopened with trusted indexes has no such memory and scans the file. Both must
    // locate exactly the same bytes for every offset, bound and size limit.
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    let values: Vec<String> = (0..40).map(|i| "v".repeat(1 + i * 37 % 300)).collect();
    for i in 0..100 {
        let n = 1 + i % 5;
        let batch: Vec<&str> = values[i % 30..i % 30 + n].iter().map(String::as_str).collect();
        append(&mut log, &batch, NOW + i as i64, NOW);
    }
    let end = log.log_end_offset();
    let cases: Vec<(i64, usize, bool)> = [end, end - 7, end - 60, 3]
        .into_iter()
        .flat_map(|max_offset| {
            [0, 1, 700, 5_000, 1 << 20].into_iter().flat_map(move |max_bytes| {
                [true, false].into_iter().map(move |min_one| (max_offset, max_bytes, min_one))
            })
        })
        .collect();
    let located = |log: &PartitionLog| -> Vec<Option<(u64, usize)>> {
        let mut out = Vec::new();
        for offset in 0..=end {
            for &(max_offset, max_bytes, min_one) in &cases {
                let slice = log.read_slice(offset, max_offset, max_bytes, min_one).unwrap();
                out.push(slice.map(|s| (s.position, s.len)));
            }
        }
        out
    };
    let with_memory = located(&log);
    assert!(with_memory.iter().filter(|s| s.is_some()).count() > 1000, "the cases locate batches");
    log.close().unwrap();
    drop(log);
    let reopened = PartitionLog::open_with(dir.path(), defaults(), NOW, false).unwrap();
    assert_eq!(reopened.log_end_offset(), end);
    assert_eq!(located(&reopened), with_memory);
}

/// `.log` files in a partition directory.
fn segment_files(dir: &std::path::Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(suffix))
        .count()
}

#[test]
fn segment_index_bytes_rolls_a_segment_whose_index_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.set("index.interval.bytes", "1").unwrap();
    // Room for 4 time-index entries (12 bytes each); an entry is added for every batch but the first.
    config.set("segment.index.bytes", "48").unwrap();
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    for i in 0..20 {
        append(&mut log, &["v"], NOW + i, NOW);
    }
    assert_eq!(segment_files(dir.path(), ".log"), 4, "5 batches per segment");
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(batches(&log.read(0, 20, 1 << 20, true).unwrap()).len(), 5);
}

/// Kafka's rule (`LogSegment.shouldRoll`): a segment's age is the incoming batch's max timestamp
/// minus the segment's first batch's, not the broker's clock minus that timestamp. Records from
/// 1970 (a replay of old data, fixed test timestamps, a skewed client clock) used to roll a new
/// segment, and write a producer snapshot, on every append.
#[test]
fn old_create_time_records_do_not_roll_a_segment_per_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    for i in 0..50 {
        append(&mut log, &["a", "b"], 1_000 + i, NOW + i);
    }
    assert_eq!(segment_files(dir.path(), ".log"), 1, "one segment, as in Kafka");
    assert_eq!(segment_files(dir.path(), ".snapshot"), 0, "no producer snapshot per append");
    // A read from inside the first batch returns it and the ones after it (one segment per read).
    assert_eq!(batches(&log.read(1, 100, 1 << 20, true).unwrap()).len(), 50);
}

#[test]
fn segment_ms_counts_between_batch_timestamps_not_on_the_broker_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.set("segment.ms", "1000").unwrap();
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    append(&mut log, &["first"], 5_000, NOW);
    // A day later on the broker's clock, but only 1000 ms later in the records: no roll yet.
    append(&mut log, &["second"], 6_000, NOW + 86_400_000);
    assert_eq!(segment_files(dir.path(), ".log"), 1, "rolls only once the wait exceeds segment.ms");
    append(&mut log, &["third"], 6_001, NOW);
    assert_eq!(segment_files(dir.path(), ".log"), 2, "a batch 1001 ms after the first batch rolls");
    // An out-of-order (older) batch does not roll the new segment either.
    append(&mut log, &["fourth"], 10, NOW);
    assert_eq!(segment_files(dir.path(), ".log"), 2);
}

#[test]
fn log_append_time_topics_roll_on_the_broker_clock() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.set("segment.ms", "1000").unwrap();
    config.set("message.timestamp.type", "LogAppendTime").unwrap();
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    append(&mut log, &["first"], 1_000, NOW);
    append(&mut log, &["second"], 1_000, NOW + 1_000);
    assert_eq!(segment_files(dir.path(), ".log"), 1);
    append(&mut log, &["third"], 1_000, NOW + 1_001);
    assert_eq!(segment_files(dir.path(), ".log"), 2, "the stamped append times are 1001 ms apart");
}

#[test]
fn segments_whose_first_batch_has_no_timestamp_roll_by_their_age() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.set("segment.ms", "1000").unwrap();
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    // Timestamp -1 (NO_TIMESTAMP): the segment's creation time on the broker clock counts.
    append(&mut log, &["first"], -1, NOW);
    append(&mut log, &["second"], -1, NOW + 1_000);
    assert_eq!(segment_files(dir.path(), ".log"), 1);
    append(&mut log, &["third"], -1, NOW + 1_001);
    assert_eq!(segment_files(dir.path(), ".log"), 2);
}

#[test]
fn segment_jitter_ms_rolls_segments_early_by_a_random_amount() {
    let rolled_after_999_ms = |jitter: &str| {
        (0..10)
            .filter(|_| {
                let dir = tempfile::tempdir().unwrap();
                let mut config = defaults();
                config.set("segment.ms", "1000").unwrap();
                config.set("segment.jitter.ms", jitter).unwrap();
                let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
                append(&mut log, &["first"], NOW, NOW);
                append(&mut log, &["second"], NOW + 999, NOW + 999);
                segment_files(dir.path(), ".log") == 2
            })
            .count()
    };
    assert_eq!(rolled_after_999_ms("0"), 0, "without jitter a segment rolls at segment.ms");
    // The jitter is drawn below min(segment.jitter.ms, segment.ms): 0 only 1 time in 1,000.
    assert!(rolled_after_999_ms("5000") >= 9);
}

#[test]
fn file_delete_delay_ms_keeps_deleted_segments_as_deleted_files_for_a_while() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 200;
    config.retention_ms = 10_000;
    config.set("file.delete.delay.ms", "300").unwrap();
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    for i in 0..10 {
        append(&mut log, &["old-record-payload"], NOW - 60_000 + i, NOW);
    }
    append(&mut log, &["new-record-payload"], NOW, NOW);
    let segments = segment_files(dir.path(), ".log");
    let deleted = log.apply_retention(NOW).unwrap();
    assert!(deleted > 0);
    assert_eq!(segment_files(dir.path(), ".log"), segments - deleted);
    assert_eq!(segment_files(dir.path(), ".log.deleted"), deleted, "renamed, not removed yet");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while segment_files(dir.path(), ".deleted") > 0 {
        assert!(std::time::Instant::now() < deadline, "deleted files still there after 10 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // With 0 they go at once; a `.deleted` file left by a crash goes when the log is opened.
    let mut config = log.config().clone();
    config.set("file.delete.delay.ms", "0").unwrap();
    log.set_config(config);
    for i in 0..10 {
        append(&mut log, &["later-record-payload"], NOW + i, NOW);
    }
    assert!(log.apply_retention(NOW + 100_000).unwrap() > 0);
    assert_eq!(segment_files(dir.path(), ".deleted"), 0);
    drop(log);
    std::fs::write(dir.path().join("00000000000000000000.log.deleted"), b"left over").unwrap();
    PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    assert_eq!(segment_files(dir.path(), ".deleted"), 0);
}

#[test]
fn preallocate_reserves_segment_bytes_without_changing_the_file_length() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 8 << 20;
    config.set("preallocate", "true").unwrap();
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    append(&mut log, &["a", "b"], NOW, NOW);
    let first = dir.path().join("00000000000000000000.log");
    let meta = std::fs::metadata(&first).unwrap();
    assert_eq!(meta.len(), log.size_bytes(), "the file ends where its data ends");
    assert!(meta.blocks() * 512 >= 8 << 20, "{} bytes reserved", meta.blocks() * 512);
    log.roll().unwrap();
    let meta = std::fs::metadata(&first).unwrap();
    assert!(meta.blocks() * 512 < 1 << 20, "a rolled segment gives the reservation back");
    let second = dir.path().join(format!("{:020}.log", log.log_end_offset()));
    assert!(std::fs::metadata(&second).unwrap().blocks() * 512 >= 8 << 20, "the new segment is reserved");
    log.close().unwrap();
    assert!(std::fs::metadata(&second).unwrap().blocks() * 512 < 1 << 20, "released at close");
}

#[test]
fn recompression_uses_the_topics_compression_levels() {
    let text: Vec<String> = (0..200).map(|i| format!("record {i} of a fairly repetitive payload {}", i % 7)).collect();
    let values: Vec<&str> = text.iter().map(String::as_str).collect();
    let produced = encode(&values, NOW, Compression::None);
    let size = |codec: &str, key: &str, level: &str| {
        let mut config = defaults();
        config.set("compression.type", codec).unwrap();
        config.set(key, level).unwrap();
        let (bytes, summary) = batch::validate_produce(produced.clone(), &config, NOW).unwrap();
        assert_eq!(summary.record_count, 200);
        let mut decoded = bytes.clone();
        let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut decoded).unwrap();
        assert_eq!(set.records.len(), 200);
        assert_eq!(set.records[199].value.as_deref(), Some(values[199].as_bytes()));
        bytes.len()
    };
    assert!(size("gzip", "compression.gzip.level", "9") < size("gzip", "compression.gzip.level", "1"));
    assert!(size("zstd", "compression.zstd.level", "19") < size("zstd", "compression.zstd.level", "-5"));
    assert!(size("lz4", "compression.lz4.level", "12") < size("lz4", "compression.lz4.level", "1"));
}

/// A batch of `values` from idempotent producer `producer_id` starting at `first_sequence`
/// (or a plain batch for producer -1).
fn producer_batch(values: &[&str], producer_id: i64, first_sequence: i32) -> Vec<u8> {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: if producer_id < 0 { -1 } else { 0 },
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if producer_id < 0 { i as i32 - 1 } else { first_sequence + i as i32 },
            timestamp: NOW,
            key: None,
            value: Some(Bytes::from(v.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.to_vec()
}

fn append_at_epoch(log: &mut PartitionLog, batch: Vec<u8>, epoch: i32) -> Result<i64, LogError> {
    let (bytes, summary) = batch::validate_produce(batch, log.config(), NOW).unwrap();
    let info = log.append(bytes, &summary, epoch, NOW)?;
    log.advance_high_watermark(log.log_end_offset());
    Ok(info.base_offset)
}

/// Every value from `from` to the log end (a read stops at a segment's end: read on).
fn values_from(log: &PartitionLog, mut from: i64) -> Vec<String> {
    let mut out = Vec::new();
    while from < log.log_end_offset() {
        let mut input = Bytes::from(log.read(from, log.log_end_offset(), 1 << 20, true).unwrap());
        while !input.is_empty() {
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut input).unwrap();
            for r in &set.records {
                out.push(String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap());
                from = r.offset + 1;
            }
        }
    }
    out
}

/// A follower's truncation (Kafka's `truncateTo`): whole batches at and past the point go,
/// segments past it are deleted, the epoch cache, high watermark and producer state follow, and
/// all of it holds after a reopen.
#[test]
fn truncation_removes_whole_batches_and_what_depends_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 300; // a few batches per segment
    let mut log = PartitionLog::open(dir.path(), config.clone(), NOW).unwrap();
    let mut expect = Vec::new();
    for (i, epoch) in [1, 1, 1, 2, 2, 2, 3, 3, 3].into_iter().enumerate() {
        let values = [format!("v{}", 2 * i), format!("v{}", 2 * i + 1)];
        expect.extend(values.iter().cloned());
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        append_at_epoch(&mut log, producer_batch(&refs, -1, 0), epoch).unwrap();
    }
    assert!(segment_files(dir.path(), "log") > 2, "several segments");
    assert_eq!(log.epochs(), &[(1, 0), (2, 6), (3, 12)]);
    assert_eq!(log.high_watermark(), 18);

    assert_eq!(log.truncate_to(10).unwrap(), 10, "at a batch boundary");
    assert_eq!(log.epochs(), &[(1, 0), (2, 6)]);
    assert_eq!(log.high_watermark(), 10);
    assert_eq!(values_from(&log, 0), expect[..10]);
    assert_eq!(log.truncate_to(7).unwrap(), 6, "inside a batch: the whole batch goes");
    assert_eq!(log.epochs(), &[(1, 0)], "epoch 2 started at 6: gone");
    assert_eq!(log.truncate_to(50).unwrap(), 6, "past the end: nothing");

    // The log goes on at a new epoch, and all of it survives a reopen.
    assert_eq!(append_at_epoch(&mut log, producer_batch(&["n0", "n1"], -1, 0), 4).unwrap(), 6);
    log.close().unwrap();
    drop(log);
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.epochs(), &[(1, 0), (4, 6)]);
    let mut now = expect[..6].to_vec();
    now.extend(["n0".to_string(), "n1".to_string()]);
    assert_eq!(values_from(&log, 0), now);
    log.delete_records_before(2).unwrap();
    assert!(matches!(log.truncate_to(1), Err(LogError::OffsetOutOfRange { .. })), "never below the log start");
}

#[test]
fn truncation_rewinds_idempotent_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    append_at_epoch(&mut log, producer_batch(&["a", "b"], 7, 0), 1).unwrap();
    append_at_epoch(&mut log, producer_batch(&["c", "d"], 7, 2), 1).unwrap();
    // Offsets 2-3 (sequences 2-3) were never replicated to the new leader: truncated here.
    assert_eq!(log.truncate_to(2).unwrap(), 2);
    // The new leader's copy of sequences 2-3 is appended again: in order, not a duplicate.
    assert_eq!(append_at_epoch(&mut log, producer_batch(&["c'", "d'"], 7, 2), 2).unwrap(), 2);
    assert_eq!(values_from(&log, 0), ["a", "b", "c'", "d'"]);
    // And a real duplicate is still answered with where it is.
    let (bytes, summary) = batch::validate_produce(producer_batch(&["c'", "d'"], 7, 2), log.config(), NOW).unwrap();
    assert_eq!(log.append(bytes, &summary, 2, NOW).unwrap().base_offset, 2);
    assert_eq!(log.log_end_offset(), 4);
}

/// One transactional record of `producer_id` at epoch 0 and sequence `seq`.
fn txn_batch(producer_id: i64, seq: i32) -> Vec<u8> {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: seq,
        timestamp: NOW,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).unwrap();
    buf.to_vec()
}

/// A transaction marker from a coordinator older than the last one that wrote a marker for the
/// producer is refused with TRANSACTION_COORDINATOR_FENCED, also after a restart (the epoch
/// is rebuilt from the log and its producer snapshot).
#[test]
fn a_zombie_coordinators_marker_is_fenced_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t-0");
    let mut log = PartitionLog::open(&path, defaults(), NOW).unwrap();
    let write = |log: &mut PartitionLog, seq: i32| {
        let (bytes, summary) = batch::validate_produce(txn_batch(7, seq), log.config(), NOW).unwrap();
        ketch::replica::append_as_leader(log, bytes, &summary, NOW).unwrap();
    };
    write(&mut log, 0);
    assert_eq!(log.append_marker(7, 0, true, 4, 0, NOW).unwrap(), 1);
    write(&mut log, 1);
    let fenced = log.append_marker(7, 0, false, 3, 0, NOW).unwrap_err();
    assert_eq!(fenced.code(), 52, "{fenced}");
    log.close().unwrap();
    drop(log);
    let mut log = PartitionLog::open(&path, defaults(), NOW).unwrap();
    assert_eq!(log.append_marker(7, 0, false, 3, 0, NOW).unwrap_err().code(), 52);
    log.close().unwrap();
    drop(log);
    // Without producer snapshots the markers in the log give the epoch back.
    let mut snapshots = 0;
    for entry in std::fs::read_dir(&path).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(file).unwrap();
            snapshots += 1;
        }
    }
    assert!(snapshots > 0, "a clean close writes a producer snapshot");
    let mut log = PartitionLog::open(&path, defaults(), NOW).unwrap();
    assert_eq!(log.append_marker(7, 0, false, 3, 0, NOW).unwrap_err().code(), 52);
    assert_eq!(log.append_marker(7, 0, false, 5, 0, NOW).unwrap(), 3);
}

#[test]
fn a_new_partition_directory_is_made_durable_by_its_first_flush() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("t-0");
    let mut log = PartitionLog::open(&dir, defaults(), NOW).unwrap();
    append(&mut log, &["a"], NOW, NOW);
    let first = log.flush_work().unwrap();
    assert!(first.creation, "the first flush covers the directory's entry in its log directory");
    for file in &first.files {
        file.sync_all().unwrap();
    }
    log.mark_flushed(&first, NOW);
    append(&mut log, &["b"], NOW, NOW);
    assert!(!log.flush_work().unwrap().creation, "once");
    drop(log);
    // A directory found at open was made by an earlier process: nothing to add.
    let mut log = PartitionLog::open(&dir, defaults(), NOW).unwrap();
    append(&mut log, &["c"], NOW, NOW);
    assert!(!log.flush_work().unwrap().creation);
}
