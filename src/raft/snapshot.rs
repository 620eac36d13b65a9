//! KRaft snapshots of the metadata log, as Kafka keeps them: what a broker downloads with
//! FetchSnapshot when the quorum leader's log no longer starts where this copy ends (Kafka's
//! controllers snapshot their state and delete the log before a snapshot once
//! `metadata.max.retention.bytes` / `.ms` is exceeded), and reads again at every start.
//!
//! On disk, as Kafka's `Snapshots`: `<metadata log dir>/<end offset, 20 digits>-<epoch, 10
//! digits>.checkpoint`, a sequence of v2 record batches: a control batch whose first record is a
//! SnapshotHeaderRecord (control type 3), data batches holding metadata records framed as in the
//! log (the whole state as of the end offset: the records that rebuild it from nothing), and a
//! control batch holding a SnapshotFooterRecord (type 4). A download is written to
//! `<name>.checkpoint.part` and renamed once complete and fsynced; a `.part` left by a crash is
//! removed at open. The snapshot `0-0` is Kafka's bootstrap checkpoint (written by `format` for
//! controllers): it holds no quorum state and is ignored here.
//!
//! Invariants: a `.checkpoint` file is complete (every batch CRC-checked, header first, footer
//! last) before its records reach an image; reading streams batch by batch, each at most
//! `MAX_BATCH_BYTES`; a download accepts only the bytes at its current position, within the size
//! the leader announced, and never more than `MAX_SNAPSHOT_BYTES` in all.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{SnapshotFooterRecord, SnapshotHeaderRecord};
use kafka_protocol::protocol::Encodable;
use kafka_protocol::records::RecordBatchDecoder;

use super::MAX_BATCH_BYTES;
use crate::log::batch::{self, Header, HEADER_BYTES};
use crate::metadata::records::MetadataRecord;

pub const SUFFIX: &str = ".checkpoint";
const PART_SUFFIX: &str = ".checkpoint.part";
/// Kafka's `ControlRecordType.SNAPSHOT_HEADER` and `SNAPSHOT_FOOTER`.
const SNAPSHOT_HEADER: i16 = 3;
const SNAPSHOT_FOOTER: i16 = 4;
/// Upper bound on a snapshot a leader may announce (Kafka has none; a metadata image of this
/// size would not fit this node's memory anyway).
pub const MAX_SNAPSHOT_BYTES: i64 = 8 << 30;

/// Kafka's `OffsetAndEpoch` naming a snapshot: it holds the state of every record below
/// `end_offset`, the last of them written in `epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
}

impl SnapshotId {
    pub fn file_name(&self) -> String {
        format!("{:020}-{:010}{SUFFIX}", self.end_offset, self.epoch)
    }

    fn parse(name: &str) -> Option<SnapshotId> {
        let stem = name.strip_suffix(SUFFIX)?;
        let (offset, epoch) = stem.split_once('-')?;
        if offset.len() != 20 || epoch.len() != 10 {
            return None;
        }
        Some(SnapshotId { end_offset: offset.parse().ok()?, epoch: epoch.parse().ok()? })
    }
}

/// The complete snapshots in `dir` other than the bootstrap one, ascending (partial downloads
/// left alone: one may be under way).
pub fn ids(dir: &Path) -> std::io::Result<Vec<SnapshotId>> {
    let mut ids = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ids),
        Err(e) => return Err(e),
    };
    for entry in entries {
        if let Some(id) = SnapshotId::parse(&entry?.file_name().to_string_lossy()) {
            if id.end_offset > 0 {
                ids.push(id);
            }
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// How long ago the snapshot `id` was written (its file's modification time).
pub fn age_ms(dir: &Path, id: SnapshotId) -> Option<u64> {
    let modified = std::fs::metadata(dir.join(id.file_name())).ok()?.modified().ok()?;
    Some(modified.elapsed().unwrap_or_default().as_millis() as u64)
}

/// The complete snapshots in `dir` other than the bootstrap one, ascending; partial downloads
/// are removed (at open, when none can be under way).
pub fn list(dir: &Path) -> std::io::Result<Vec<SnapshotId>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(PART_SUFFIX) {
            std::fs::remove_file(dir.join(&*name))?;
        }
    }
    ids(dir)
}

/// Reads the snapshot `id` in `dir`: its metadata records in order.
pub fn read(dir: &Path, id: SnapshotId) -> anyhow::Result<Vec<MetadataRecord>> {
    let path = dir.join(id.file_name());
    read_file(&path).map_err(|e| anyhow::anyhow!("snapshot {}: {e}", path.display()))
}

fn read_file(path: &Path) -> anyhow::Result<Vec<MetadataRecord>> {
    let mut input = BufReader::new(File::open(path)?);
    let mut records = Vec::new();
    let mut batches = 0u64;
    let mut footer = false;
    loop {
        let mut head = [0u8; 12];
        match input.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e.into()),
        }
        anyhow::ensure!(!footer, "batches after the snapshot footer");
        let len = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes"));
        let total = 12 + len as i64;
        anyhow::ensure!(
            total >= HEADER_BYTES as i64 && total <= MAX_BATCH_BYTES as i64,
            "batch {batches} of {total} bytes"
        );
        let mut bytes = vec![0u8; total as usize];
        bytes[..12].copy_from_slice(&head);
        input.read_exact(&mut bytes[12..])?;
        batch::check_batch(&bytes).map_err(|e| anyhow::anyhow!("batch {batches}: {e}"))?;
        let control = Header::new(&bytes).is_control();
        if control {
            let types = control_types(&bytes)?;
            if batches == 0 {
                anyhow::ensure!(types.first() == Some(&SNAPSHOT_HEADER), "first batch without a snapshot header");
            }
            footer = types.contains(&SNAPSHOT_FOOTER);
        } else {
            anyhow::ensure!(batches > 0, "first batch without a snapshot header");
            super::decode_records(&bytes, &mut |_, record| {
                records.push(record);
                Ok(())
            })?;
        }
        batches += 1;
    }
    anyhow::ensure!(footer, "no snapshot footer (incomplete)");
    Ok(records)
}

/// The control record types of a control batch (each record's key: version, type).
fn control_types(bytes: &[u8]) -> anyhow::Result<Vec<i16>> {
    let mut input = Bytes::copy_from_slice(bytes);
    let set = RecordBatchDecoder::decode(&mut input).map_err(|e| anyhow::anyhow!("control batch: {e:?}"))?;
    Ok(set
        .records
        .iter()
        .map(|r| match r.key.as_deref() {
            Some([_, _, hi, lo, ..]) => i16::from_be_bytes([*hi, *lo]),
            _ => -1,
        })
        .collect())
}

/// Records per data batch of a snapshot this node writes (Kafka's writer fills batches of up to
/// 8 MiB; metadata records are small, so this keeps a batch far below that).
const SNAPSHOT_BATCH_RECORDS: usize = 1000;

/// Writes `records` (the whole state below `id.end_offset`) as the snapshot `id` in `dir`, as
/// Kafka's `RecordsSnapshotWriter` lays it out: a header control batch (SnapshotHeaderRecord v0
/// with `last_contained_ms`, the time of the last record it holds; for a dynamic quorum also
/// kraft.version 1 and the `voters` in force at the snapshot's end), data batches, a footer
/// control batch; offsets 0, 1, 2... through the file and every batch stamped with `id.epoch`.
/// Written to `.part`, fsynced, renamed, and the directory fsynced: a `.checkpoint` is complete.
/// Returns its size in bytes.
pub fn write(
    dir: &Path,
    id: SnapshotId,
    records: &[MetadataRecord],
    voters: Option<&[super::voters_record::VoterInfo]>,
    (last_contained_ms, now_ms): (i64, i64),
) -> anyhow::Result<u64> {
    assert!(id.end_offset > 0 && id.epoch >= 0, "a snapshot holds at least one record: {id:?}");
    let header = SnapshotHeaderRecord::default().with_version(0).with_last_contained_log_timestamp(last_contained_ms);
    let mut control = vec![(SNAPSHOT_HEADER, encode_control(&header)?)];
    if let Some(voters) = voters {
        control.extend(super::voters_record::control_records(1, voters));
    }
    let mut batches = vec![super::control_batch(&control, now_ms)];
    for chunk in records.chunks(SNAPSHOT_BATCH_RECORDS) {
        batches.push(super::encode_batch(chunk, now_ms)?);
    }
    let footer = SnapshotFooterRecord::default().with_version(0);
    batches.push(super::control_batch(&[(SNAPSHOT_FOOTER, encode_control(&footer)?)], now_ms));
    write_batches(dir, id, batches)
}

/// Writes `batches` as the checkpoint file `id` in `dir`: offsets 0, 1, 2... through the file,
/// every batch stamped with `id.epoch`; to `.part`, fsynced, renamed, the directory fsynced.
/// Returns its size in bytes.
fn write_batches(dir: &Path, id: SnapshotId, batches: Vec<Vec<u8>>) -> anyhow::Result<u64> {
    let mut bytes = Vec::with_capacity(batches.iter().map(Vec::len).sum());
    let mut offset = 0;
    for mut b in batches {
        batch::set_base_offset(&mut b, offset);
        batch::set_leader_epoch(&mut b, id.epoch);
        offset = Header::new(&b).last_offset() + 1;
        bytes.extend_from_slice(&b);
    }
    anyhow::ensure!(bytes.len() as i64 <= MAX_SNAPSHOT_BYTES, "a snapshot of {} bytes", bytes.len());
    let part = dir.join(part_name(id));
    let mut file = File::create(&part)?;
    file.write_all(&bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&part, dir.join(id.file_name()))?;
    File::open(dir)?.sync_all()?;
    Ok(bytes.len() as u64)
}

/// The bootstrap checkpoint (`00000000000000000000-0000000000.checkpoint`) that Kafka's
/// `format --standalone / --initial-controllers` writes into the metadata log directory `dir`:
/// one control batch holding the SnapshotHeaderRecord, a KRaftVersionRecord (kraft.version 1)
/// and the initial VotersRecord, then the footer. Written as a snapshot is (complete or absent).
pub fn write_bootstrap(dir: &Path, voters: &[super::voters_record::VoterInfo], now_ms: i64) -> anyhow::Result<()> {
    let header = SnapshotHeaderRecord::default().with_version(0).with_last_contained_log_timestamp(now_ms);
    let mut control = vec![(SNAPSHOT_HEADER, encode_control(&header)?)];
    control.extend(super::voters_record::control_records(1, voters));
    let footer = SnapshotFooterRecord::default().with_version(0);
    let batches = vec![
        super::control_batch(&control, now_ms),
        super::control_batch(&[(SNAPSHOT_FOOTER, encode_control(&footer)?)], now_ms),
    ];
    std::fs::create_dir_all(dir)?;
    write_batches(dir, SnapshotId { end_offset: 0, epoch: 0 }, batches).map(|_| ())
}

/// The initial voters of the bootstrap checkpoint in `dir`, if there is one holding a VotersRecord.
pub fn read_bootstrap_voters(dir: &Path) -> anyhow::Result<Option<Vec<super::voters_record::VoterInfo>>> {
    read_voters(dir, SnapshotId { end_offset: 0, epoch: 0 })
}

/// The voters of snapshot `id` in `dir` (its VotersRecord), if it exists and holds one.
pub fn read_voters(dir: &Path, id: SnapshotId) -> anyhow::Result<Option<Vec<super::voters_record::VoterInfo>>> {
    let path = dir.join(id.file_name());
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut at = 0;
    while at < bytes.len() {
        let len = batch::check_batch(&bytes[at..]).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if let Some(voters) = super::voters_record::decode_voters(&bytes[at..at + len])? {
            return Ok(Some(voters));
        }
        at += len;
    }
    Ok(None)
}

fn encode_control(message: &impl Encodable) -> anyhow::Result<Bytes> {
    let mut value = BytesMut::new();
    message.encode(&mut value, 0).map_err(|e| anyhow::anyhow!("control record: {e:?}"))?;
    Ok(value.freeze())
}

/// Removes the snapshot `id` (one older than the newest, once the log no longer needs it).
pub fn remove(dir: &Path, id: SnapshotId) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(id.file_name())) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The size in bytes of the snapshot `id` in `dir`.
pub fn size(dir: &Path, id: SnapshotId) -> std::io::Result<u64> {
    Ok(std::fs::metadata(dir.join(id.file_name()))?.len())
}

/// Up to `max_bytes` of the snapshot `id` from `position` (what a FetchSnapshot answer carries:
/// raw bytes that may cut a batch, as Kafka's `UnalignedRecords`).
pub fn read_chunk(dir: &Path, id: SnapshotId, position: u64, max_bytes: usize) -> std::io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    let mut file = File::open(dir.join(id.file_name()))?;
    let len = file.metadata()?.len();
    let want = (len.saturating_sub(position)).min(max_bytes as u64) as usize;
    let mut chunk = vec![0u8; want];
    file.seek(SeekFrom::Start(position))?;
    file.read_exact(&mut chunk)?;
    Ok(chunk)
}

/// A snapshot being fetched from the quorum leader, chunk by chunk (Kafka's
/// `RawSnapshotWriter` on a follower).
#[derive(Debug)]
pub struct Download {
    pub id: SnapshotId,
    dir: PathBuf,
    file: File,
    /// The size the leader announced with the first chunk.
    size: Option<i64>,
    pub position: i64,
}

impl Download {
    /// Starts (over) the download of `id` into `dir`.
    pub fn begin(dir: &Path, id: SnapshotId) -> std::io::Result<Download> {
        let file = File::create(dir.join(part_name(id)))?;
        Ok(Download { id, dir: dir.to_path_buf(), file, size: None, position: 0 })
    }

    /// Writes one chunk the leader sent for `position` of a snapshot of `size` bytes.
    pub fn write(&mut self, size: i64, position: i64, chunk: &[u8]) -> anyhow::Result<()> {
        anyhow::ensure!(
            size > 0 && size <= MAX_SNAPSHOT_BYTES,
            "snapshot {:?} of {size} bytes (at most {MAX_SNAPSHOT_BYTES})",
            self.id
        );
        anyhow::ensure!(self.size.is_none_or(|s| s == size), "snapshot size changed to {size} mid-download");
        anyhow::ensure!(position == self.position, "chunk at {position}, expected {}", self.position);
        anyhow::ensure!(
            !chunk.is_empty() && chunk.len() as i64 <= size - position,
            "chunk of {} bytes at {position} of {size}",
            chunk.len()
        );
        self.file.write_all(chunk)?;
        self.size = Some(size);
        self.position += chunk.len() as i64;
        Ok(())
    }

    pub fn done(&self) -> bool {
        self.size == Some(self.position)
    }

    /// Checks the complete download, makes it durable under its final name and returns its
    /// records. A snapshot that does not read back whole is removed and refused.
    pub fn finish(self) -> anyhow::Result<Vec<MetadataRecord>> {
        assert!(self.done(), "a snapshot is finished once every byte arrived");
        self.file.sync_all()?;
        drop(self.file);
        let part = self.dir.join(part_name(self.id));
        let records = match read_file(&part) {
            Ok(records) => records,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                anyhow::bail!("snapshot {:?} fetched from the leader does not read back: {e}", self.id);
            }
        };
        std::fs::rename(&part, self.dir.join(self.id.file_name()))?;
        File::open(&self.dir)?.sync_all()?;
        Ok(records)
    }
}

fn part_name(id: SnapshotId) -> String {
    format!("{:020}-{:010}{PART_SUFFIX}", id.end_offset, id.epoch)
}

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
