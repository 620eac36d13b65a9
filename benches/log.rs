//! Storage-engine hot paths through the public `ketch::log` API, on temp dirs from `tempfile`
//! (under $TMPDIR, /tmp by default). Nothing here fsyncs (the broker fsyncs outside the partition
//! lock, in `flusher`), so writes land in the page cache and reads come from it.
//!
//! * `append`: `PartitionLog::append` of an already validated 16 KiB batch (16 x 1 KiB records).
//!   Only the appends are timed: the batch copies they consume are made beforehand, and every
//!   256 MiB the log is replaced by a fresh one (untimed) so it never rolls a segment.
//! * `lookup`: on a segment of 200,000 small batches with an index entry for each (like a full
//!   1 GiB segment at the default `index.interval.bytes`): the in-memory offset-index binary
//!   search (`IndexFile::lookup`), `Segment::find_batch` (that search plus one header read),
//!   `PartitionLog::read` of the one batch holding an offset, and
//!   `PartitionLog::offset_for_timestamp` (time index, then a scan of one batch's records).
//!   Targets are pseudo-random; throughput is lookups per second.
//! * `read`: `PartitionLog::read` of 1 MiB (whole batches) from the middle of a 128 MiB segment
//!   of 16 KiB batches: the disk read behind every Fetch.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::records::Compression;
use ketch::config::TopicConfig;
use ketch::log::batch::{self, BatchSummary};
use ketch::log::index::{IndexFile, OffsetEntry};
use ketch::log::segment::Segment;
use ketch::log::PartitionLog;
use tempfile::TempDir;

use common::NOW;

/// Appends timed per chunk; each chunk's batch copies are made before its timer starts.
const APPEND_CHUNK: u64 = 1024;
/// Replace the append log once it holds this much (below the default 1 GiB `segment.bytes`).
const APPEND_RESET_BYTES: u64 = 256 << 20;
/// Small batches in the lookup segment, each with an offset- and time-index entry.
const LOOKUP_BATCHES: i64 = 200_000;
/// 16 KiB batches in the read segment (about 128 MiB).
const READ_BATCHES: usize = 8192;

/// A partition log in its own temp dir.
struct TempLog {
    log: PartitionLog,
    _dir: TempDir,
}

fn open_log(config: TopicConfig) -> TempLog {
    let dir = tempfile::tempdir().unwrap();
    let log = PartitionLog::open(dir.path(), config, NOW).unwrap();
    TempLog { log, _dir: dir }
}

/// Pseudo-random values in `0..bound`, to spread lookups over the whole index.
fn spread(count: usize, bound: i64) -> Vec<i64> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as i64
        })
        .collect()
}

fn bench_append(c: &mut Criterion) {
    let (validated, summary) = common::validated_16k(Compression::None);
    let len = validated.len() as u64;
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Bytes(len));
    group.bench_function("16KiB_batch", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut target = fresh_append_log(&validated, &summary);
            let mut held = 0u64;
            let mut left = iters;
            while left > 0 {
                let n = left.min(APPEND_CHUNK);
                if held + n * len > APPEND_RESET_BYTES {
                    drop(target);
                    target = fresh_append_log(&validated, &summary);
                    held = 0;
                }
                let copies: Vec<Vec<u8>> = (0..n).map(|_| validated.clone()).collect();
                let start = Instant::now();
                for copy in copies {
                    black_box(ketch::replica::append_as_leader(&mut target.log, copy, &summary, NOW).unwrap());
                }
                elapsed += start.elapsed();
                held += n * len;
                left -= n;
            }
            elapsed
        })
    });
    group.finish();
}

/// A new log with one batch already in it: the first append writes (and fsyncs) the
/// leader-epoch checkpoint, a once-per-log cost kept out of the measurement.
fn fresh_append_log(validated: &[u8], summary: &BatchSummary) -> TempLog {
    let mut target = open_log(common::defaults());
    ketch::replica::append_as_leader(&mut target.log, validated, summary, NOW).unwrap();
    target
}

fn bench_lookup(c: &mut Criterion) {
    let mut config = common::defaults();
    config.index_interval_bytes = 1;
    let mut target = open_log(config);
    let segment_dir = tempfile::tempdir().unwrap();
    let mut segment = Segment::create(segment_dir.path(), 0, 1).unwrap();
    let first_timestamp = NOW - LOOKUP_BATCHES;
    for i in 0..LOOKUP_BATCHES {
        let produced = common::encode_batch(1, 100, first_timestamp + i, Compression::None);
        let (bytes, summary) = batch::validate_produce(produced, target.log.config(), NOW).unwrap();
        ketch::replica::append_as_leader(&mut target.log, &bytes, &summary, NOW).unwrap();
        let mut bytes = bytes.to_vec();
        batch::set_base_offset(&mut bytes, i);
        segment.append(&bytes, i).unwrap();
    }
    let log = &target.log;
    let end = log.log_end_offset();
    assert_eq!(end, LOOKUP_BATCHES);
    let mut index = IndexFile::<OffsetEntry>::create(&segment_dir.path().join("bench.index")).unwrap();
    for i in 1..LOOKUP_BATCHES as u32 {
        index.append(OffsetEntry { relative_offset: i, position: i * 200 }).unwrap();
    }
    let offsets = spread(4096, end);
    for &offset in &offsets[..16] {
        assert_eq!(
            log.offset_for_timestamp(first_timestamp + offset).unwrap(),
            Some((offset, first_timestamp + offset))
        );
        assert_eq!(segment.find_batch(offset).unwrap().unwrap().base_offset, offset);
    }

    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    group.bench_function("offset_index_200k_entries", |b| {
        b.iter(|| {
            i = (i + 1) % offsets.len();
            black_box(index.lookup(offsets[i] as u32))
        })
    });
    group.bench_function("segment_find_batch", |b| {
        b.iter(|| {
            i = (i + 1) % offsets.len();
            black_box(segment.find_batch(offsets[i]).unwrap().unwrap())
        })
    });
    group.bench_function("log_read_one_batch", |b| {
        b.iter(|| {
            i = (i + 1) % offsets.len();
            black_box(log.read(offsets[i], end, 1, true).unwrap())
        })
    });
    group.bench_function("offset_for_timestamp", |b| {
        b.iter(|| {
            i = (i + 1) % offsets.len();
            black_box(log.offset_for_timestamp(first_timestamp + offsets[i]).unwrap())
        })
    });
    group.finish();
}

fn bench_read(c: &mut Criterion) {
    let (validated, summary) = common::validated_16k(Compression::None);
    let mut target = open_log(common::defaults());
    for _ in 0..READ_BATCHES {
        ketch::replica::append_as_leader(&mut target.log, validated.clone(), &summary, NOW).unwrap();
    }
    let log = &target.log;
    let end = log.log_end_offset();
    let middle = end / 2;
    let read_len = log.read(middle, end, 1 << 20, true).unwrap().len();
    assert!(read_len > (1 << 20) - validated.len(), "read {read_len} bytes");

    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(read_len as u64));
    group.bench_function("1MiB_from_middle_of_128MiB_segment", |b| {
        b.iter(|| black_box(log.read(middle, end, 1 << 20, true).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench_append, bench_lookup, bench_read);
criterion_main!(benches);
