//! Log compaction, Kafka's `LogCleaner`, for topics whose `cleanup.policy` includes `compact`.
//!
//! Owns: one cleaning pass over one partition. `PartitionLog::clean_plan` (under the partition
//! lock) picks the cleanable segments and hands out read handles; this module then, without the
//! lock, builds the offset map (key -> latest offset) over the dirty section, rewrites the
//! cleanable segments into merged segments keeping only what must stay, and has
//! `PartitionLog::install_cleaned` swap each merged segment in (under the lock again).
//!
//! What a pass keeps: every record whose key has no later record in the dirty section, the
//! latest record of every key, every transaction marker; it drops superseded records, records
//! of aborted transactions, keyless records (Kafka refuses them on compacted topics), and
//! tombstones that were already in the cleaned section on an earlier pass and are older than
//! `delete.retention.ms` (by record timestamp). Offsets never change: a batch keeps its
//! records' offsets, batches keep their order, a batch left empty is dropped.
//!
//! On disk, inside the partition directory:
//! - `cleaner-offset-checkpoint`: the first dirty offset (decimal), written after a pass;
//! - `cleaning/`: the merged segment being written (log + indexes); removed on recovery;
//! - `swap-<base>-<end>/`: a merged segment committed to replace every segment whose base offset
//!   lies in [base, end). The rename of `cleaning/` to it is the commit point; `finish_swaps`
//!   completes it (delete the replaced segments, move the files in) at install and at recovery,
//!   so a `kill -9` at any step leaves either the old segments or the new one, never both.
//!
//! Invariants: the active segment, segments reaching the last stable offset and segments
//! younger than `min.compaction.lag.ms` are never read for rewriting; an install first checks
//! that the segments it replaces are still exactly the ones cleaned (retention or DeleteRecords
//! may have removed them meanwhile) and otherwise throws the work away.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions};

use crate::config::TopicConfig;
use crate::error::LogError;
use crate::log::batch::{self, Header, HEADER_BYTES, MAX_DECOMPRESSED_BYTES};
use crate::log::compression::{self, Codec};
use crate::log::producer_state::AbortedTxn;
use crate::log::segment::Segment;
use crate::log::Partition;

pub const CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
pub const CLEANING_DIR: &str = "cleaning";
const SWAP_PREFIX: &str = "swap-";
/// Bytes one offset-map entry costs beyond its key (hash table slot, allocation header, offset).
const MAP_ENTRY_OVERHEAD_BYTES: usize = 48;

/// The cleaner's map: key -> offset of its latest record in the dirty section.
type OffsetMap = HashMap<Box<[u8]>, i64>;

/// A read handle on one immutable (non-active) segment, taken under the partition lock.
#[derive(Debug)]
pub struct SegmentFile {
    pub base_offset: i64,
    pub next_offset: i64,
    pub size: u64,
    pub file: File,
}

/// What `PartitionLog::clean_plan` chose: the segments to rewrite and the dirty range.
#[derive(Debug)]
pub struct CleanPlan {
    pub dir: PathBuf,
    pub config: TopicConfig,
    /// Every cleanable segment, from the log start, in order.
    pub segments: Vec<SegmentFile>,
    /// Base offset of the first segment not cleanable (the end of the cleanable range).
    pub end_offset: i64,
    /// Records at or above this offset are dirty (not compacted yet).
    pub first_dirty: i64,
    pub aborted: Vec<AbortedTxn>,
    pub now_ms: i64,
}

/// One merged segment written to `cleaning/`, ready for `PartitionLog::install_cleaned`.
#[derive(Debug)]
pub struct CleanedGroup {
    pub base_offset: i64,
    /// The base offset of the first segment after the replaced ones.
    pub end_offset: i64,
    /// (base offset, size) of each segment it replaces, to check nothing changed meanwhile.
    pub replaces: Vec<(i64, u64)>,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// What one pass over a partition did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CleanStats {
    pub segments_in: usize,
    pub segments_out: usize,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub records_removed: u64,
    /// The new first dirty offset.
    pub cleaned_up_to: i64,
}

/// Runs one cleaning pass on `partition` if its log is due for one. `dedupe_buffer_bytes`
/// bounds the offset map (`log.cleaner.dedupe.buffer.size`); a dirty section larger than the
/// map is cleaned in several passes.
pub fn clean_partition(
    partition: &Partition,
    dedupe_buffer_bytes: usize,
    now_ms: i64,
) -> Result<Option<CleanStats>, LogError> {
    let Some(plan) = partition.log().clean_plan(now_ms)? else { return Ok(None) };
    let (map, end_offset) = build_offset_map(&plan, dedupe_buffer_bytes)?;
    let mut stats = CleanStats { cleaned_up_to: end_offset, ..CleanStats::default() };
    let cleanable: Vec<&SegmentFile> = plan.segments.iter().filter(|s| s.base_offset < end_offset).collect();
    let groups = group_segments(&cleanable, plan.config.segment_bytes);
    for (g, group) in groups.iter().enumerate() {
        // The merged segment stands for everything up to the next group's (or range's) start.
        let group_end = groups.get(g + 1).map_or(end_offset, |next| next[0].base_offset);
        let (cleaned, removed) = write_group(&plan, group, group_end, &map)?;
        stats.segments_in += group.len();
        stats.bytes_in += cleaned.bytes_in;
        stats.bytes_out += cleaned.bytes_out;
        stats.records_removed += removed;
        if !partition.log().install_cleaned(&cleaned)? {
            tracing::info!(dir = %plan.dir.display(), "log changed during cleaning; pass abandoned");
            let _ = std::fs::remove_dir_all(plan.dir.join(CLEANING_DIR));
            return Ok(None);
        }
        stats.segments_out += 1;
    }
    partition.log().set_cleaner_checkpoint(end_offset)?;
    tracing::info!(
        topic = %partition.topic,
        partition = partition.index,
        segments_in = stats.segments_in,
        segments_out = stats.segments_out,
        bytes_in = stats.bytes_in,
        bytes_out = stats.bytes_out,
        records_removed = stats.records_removed,
        "log cleaned"
    );
    Ok(Some(stats))
}

/// Key -> offset of its latest record in the dirty section, and the offset cleaning stops at
/// (a segment boundary; earlier than the plan's end when the map budget ran out).
fn build_offset_map(plan: &CleanPlan, budget_bytes: usize) -> Result<(OffsetMap, i64), LogError> {
    let mut map = OffsetMap::new();
    let mut used_bytes = 0usize;
    for segment in &plan.segments {
        if segment.next_offset <= plan.first_dirty {
            continue;
        }
        if used_bytes > budget_bytes && segment.base_offset > plan.first_dirty {
            // Out of map space: clean what the map covers now, the rest on the next pass.
            return Ok((map, segment.base_offset));
        }
        for_each_batch(segment, |bytes| {
            let header = Header::new(bytes);
            if header.is_control() || header.last_offset() < plan.first_dirty || is_aborted(&plan.aborted, &header) {
                return Ok(());
            }
            for record in decode_records(bytes)? {
                if let (Some(key), true) = (record.key, record.offset >= plan.first_dirty) {
                    if !map.contains_key(key.as_ref()) {
                        used_bytes += key.len() + MAP_ENTRY_OVERHEAD_BYTES;
                    }
                    map.insert(key.to_vec().into_boxed_slice(), record.offset);
                }
            }
            Ok(())
        })?;
    }
    Ok((map, plan.end_offset))
}

/// Consecutive segments merged into one output segment: their original sizes sum to at most
/// `segment_bytes` and their offsets fit the index's 32-bit relative offsets.
fn group_segments<'a>(segments: &[&'a SegmentFile], segment_bytes: u64) -> Vec<Vec<&'a SegmentFile>> {
    let mut groups: Vec<Vec<&SegmentFile>> = Vec::new();
    for segment in segments {
        let fits = groups.last().is_some_and(|g| {
            let size: u64 = g.iter().map(|s| s.size).sum();
            size + segment.size <= segment_bytes && segment.next_offset - g[0].base_offset < i32::MAX as i64
        });
        if fits {
            groups.last_mut().expect("checked").push(segment);
        } else {
            groups.push(vec![segment]);
        }
    }
    groups
}

/// Writes the retained contents of `group` as one segment in `cleaning/`.
fn write_group(
    plan: &CleanPlan,
    group: &[&SegmentFile],
    group_end: i64,
    map: &OffsetMap,
) -> Result<(CleanedGroup, u64), LogError> {
    let base_offset = group[0].base_offset;
    let cleaning = plan.dir.join(CLEANING_DIR);
    match std::fs::remove_dir_all(&cleaning) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    std::fs::create_dir(&cleaning)?;
    let mut out = Segment::create(&cleaning, base_offset, plan.config.index_interval_bytes)?;
    let tombstone_horizon_ms = plan.now_ms.saturating_sub(plan.config.delete_retention_ms);
    let mut removed = 0u64;
    let mut bytes_in = 0u64;
    for segment in group {
        bytes_in += segment.size;
        for_each_batch(segment, |bytes| {
            let header = Header::new(bytes);
            if header.is_control() {
                // Transaction markers stay: read_committed consumers and producer state need them.
                let offset = header.base_offset();
                return out.append(bytes, offset).map_err(LogError::from);
            }
            let aborted = is_aborted(&plan.aborted, &header);
            let previously_cleaned = header.last_offset() < plan.first_dirty;
            let records = decode_records(bytes)?;
            let total = records.len();
            let kept: Vec<Record> = records
                .into_iter()
                .filter(|r| {
                    let Some(key) = &r.key else { return false };
                    if aborted || map.get(key.as_ref()).is_some_and(|latest| *latest > r.offset) {
                        return false;
                    }
                    // A tombstone goes once it has been compacted before and is old enough.
                    !(r.value.is_none() && previously_cleaned && r.timestamp < tombstone_horizon_ms)
                })
                .collect();
            removed += (total - kept.len()) as u64;
            if kept.is_empty() {
                return Ok(());
            }
            if kept.len() == total {
                return out.append(bytes, offset_of_max_timestamp(&kept)).map_err(LogError::from);
            }
            let rebuilt = encode_retained(&header, &kept)?;
            out.append(&rebuilt, offset_of_max_timestamp(&kept)).map_err(LogError::from)
        })?;
    }
    out.sync_handle()?.sync_all()?;
    out.sync_indexes()?;
    let bytes_out = out.size();
    drop(out);
    File::open(&cleaning)?.sync_all()?;
    let replaces = group.iter().map(|s| (s.base_offset, s.size)).collect();
    Ok((CleanedGroup { base_offset, end_offset: group_end, replaces, bytes_in, bytes_out }, removed))
}

fn offset_of_max_timestamp(records: &[Record]) -> i64 {
    let mut best = &records[0];
    for r in records {
        if r.timestamp > best.timestamp {
            best = r;
        }
    }
    best.offset
}

/// Whether a data batch belongs to a transaction that was aborted.
fn is_aborted(aborted: &[AbortedTxn], header: &Header<'_>) -> bool {
    header.is_transactional()
        && aborted.iter().any(|a| {
            a.producer_id == header.producer_id()
                && a.first_offset <= header.base_offset()
                && header.base_offset() <= a.last_offset
        })
}

/// Re-encodes the records kept from the batch `original`, in its codec, keeping each record's
/// offset and the producer fields; a LogAppendTime batch keeps its timestamp type and time.
fn encode_retained(original: &Header<'_>, kept: &[Record]) -> Result<Vec<u8>, LogError> {
    let codec = Codec::from_id(original.compression_id())?;
    let mut records = kept.to_vec();
    let base_sequence = original.base_sequence();
    let first_kept = records[0].offset;
    for r in &mut records {
        // The encoder derives the base sequence from the first record: keep `sequence - offset`
        // constant as in the original batch (and -1 for batches without a producer).
        r.sequence = if base_sequence < 0 {
            (r.offset - first_kept) as i32 - 1
        } else {
            base_sequence.wrapping_add((r.offset - original.base_offset()) as i32)
        };
        r.partition_leader_epoch = original.leader_epoch();
    }
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: codec.to_protocol() };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options)
        .map_err(|e| LogError::CorruptMessage(format!("cannot re-encode a cleaned batch: {e}")))?;
    let mut bytes = buf.to_vec();
    if Header::new(&bytes).total_bytes() as usize != bytes.len() {
        return Err(LogError::CorruptMessage("a cleaned batch re-encoded as more than one batch".into()));
    }
    if original.attributes() & batch::ATTR_TIMESTAMP_TYPE != 0 {
        batch::restamp_log_append_time(&mut bytes, original.max_timestamp());
    }
    Ok(bytes)
}

/// Decodes every record of one stored batch (decompressing through the bounded reader).
fn decode_records(bytes: &[u8]) -> Result<Vec<Record>, LogError> {
    let header = Header::new(bytes);
    let codec = Codec::from_id(header.compression_id())?;
    let decompress = move |body: &mut Bytes, _| -> anyhow::Result<Bytes> {
        let mut out = Vec::new();
        compression::decompressing_reader(codec, body)?.take(MAX_DECOMPRESSED_BYTES + 1).read_to_end(&mut out)?;
        anyhow::ensure!(out.len() as u64 <= MAX_DECOMPRESSED_BYTES, "decompressed batch exceeds the size limit");
        Ok(Bytes::from(out))
    };
    let mut input = Bytes::copy_from_slice(bytes);
    RecordBatchDecoder::decode_with_custom_compression(&mut input, Some(decompress))
        .map(|set| set.records)
        .map_err(|e| LogError::CorruptMessage(format!("cannot decode a stored batch for cleaning: {e}")))
}

/// Calls `f` with every whole batch of `segment`, in order.
fn for_each_batch(segment: &SegmentFile, mut f: impl FnMut(&[u8]) -> Result<(), LogError>) -> Result<(), LogError> {
    let mut position = 0u64;
    let mut buf = Vec::new();
    while position + HEADER_BYTES as u64 <= segment.size {
        let mut head = [0u8; HEADER_BYTES];
        segment.file.read_exact_at(&mut head, position)?;
        let total = Header::new(&head).total_bytes();
        if total < HEADER_BYTES as i64 || position + total as u64 > segment.size {
            return Err(LogError::CorruptMessage(format!("bad batch length {total} at {position} while cleaning")));
        }
        buf.resize(total as usize, 0);
        segment.file.read_exact_at(&mut buf, position)?;
        f(&buf)?;
        position += total as u64;
    }
    Ok(())
}

/// Name of the committed-swap directory for a merged segment replacing [base, end).
pub fn swap_dir_name(base_offset: i64, end_offset: i64) -> String {
    format!("{SWAP_PREFIX}{base_offset}-{end_offset}")
}

/// Recovery and install: removes an unfinished `cleaning/` and completes every committed swap
/// in `dir`, so the segment files on disk are again one consistent list.
pub fn finish_swaps(dir: &Path) -> io::Result<()> {
    let cleaning = dir.join(CLEANING_DIR);
    if cleaning.exists() {
        std::fs::remove_dir_all(&cleaning)?;
    }
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(range) = name.strip_prefix(SWAP_PREFIX) else { continue };
        let Some((base, end)) = range.split_once('-').and_then(|(b, e)| Some((b.parse().ok()?, e.parse().ok()?)))
        else {
            continue;
        };
        complete_swap(dir, &dir.join(&name), base, end)?;
    }
    Ok(())
}

/// Replaces the segments with base offsets in [base, end) by the files in `swap`. Idempotent:
/// a crash at any point is finished by running it again.
fn complete_swap(dir: &Path, swap: &Path, base_offset: i64, end_offset: i64) -> io::Result<()> {
    use crate::log::segment::file_name;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".log") else { continue };
        let Ok(offset) = stem.parse::<i64>() else { continue };
        if offset > base_offset && offset < end_offset {
            for suffix in ["index", "timeindex", "log"] {
                match std::fs::remove_file(dir.join(file_name(offset, suffix))) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    // The log file moves last: until it has moved, the old base segment stays whole.
    for suffix in ["index", "timeindex", "log"] {
        let from = swap.join(file_name(base_offset, suffix));
        if from.exists() {
            std::fs::rename(&from, dir.join(file_name(base_offset, suffix)))?;
        }
    }
    File::open(dir)?.sync_all()?;
    std::fs::remove_dir_all(swap)?;
    File::open(dir)?.sync_all()
}
