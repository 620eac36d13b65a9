//! KRaft's metadata log on this node: `__cluster_metadata` partition 0, kept by Ketch's segment
//! engine (`PartitionLog`). As the only voter (a single node, or a single controller) every start
//! elects itself in a new epoch (`MetadataLog::open`) and snapshots as a voter does
//! (`single_snapshots.rs`). A voter of a quorum runs the consensus of `core.rs`, a side-effect-free
//! state machine checked by a deterministic simulation (`core_sim.rs`), which `voter.rs` drives
//! over these files (`voter_log.rs`) and Kafka 4.1's Vote / BeginQuorumEpoch / EndQuorumEpoch /
//! Fetch (`voter_wire.rs`); an observer copies the log (`observer.rs`).
//!
//! On disk, laid out as Kafka lays it out: `<metadata dir>/__cluster_metadata-0/` holding Kafka
//! v2 record batches (segments, indexes, `leader-epoch-checkpoint`), and `quorum-state`
//! (Kafka's JSON, data version 0: leader id, leader epoch, voters). A data batch holds metadata
//! records, each a record with a null key whose value is the record framed as Kafka's
//! `ApiMessageAndVersion` (`metadata::records::framing`). At every start the voter appends a
//! control batch holding a LeaderChangeMessage for its new epoch. A quorum formatted with initial
//! voters (KIP-853) also holds KRaftVersionRecord / VotersRecord control batches
//! (`voters_record.rs`), which make the voter set (`voter_set.rs`). Snapshots are Kafka's
//! `<end offset>-<epoch>.checkpoint` files beside the segments (`snapshot.rs`). Kafka's
//! `kafka-dump-log --cluster-metadata-decoder` reads these files.
//!
//! Invariants: an append returns only once its batch is fsynced (with one voter a record is
//! committed when it is durable here); a batch is all or nothing (recovery truncates a torn
//! tail); offsets are contiguous; the epoch grows at every start, is written to `quorum-state`
//! before anything is appended in it, and every batch carries the epoch it was written in;
//! replay yields the records of data batches in offset order and skips control batches.

pub mod core;
pub mod core_io;
pub mod core_voters;
pub mod entries;
pub mod leader;
pub mod observer;
mod single_snapshots;
pub mod snapshot;
pub mod snapshot_wire;
pub mod voter;
pub mod voter_log;
pub mod voter_set;
pub mod voter_wire;
pub mod voters_record;

use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::leader_change_message::Voter;
use kafka_protocol::messages::LeaderChangeMessage;
use kafka_protocol::protocol::Encodable;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::config::{BrokerConfig, Properties};
use crate::log::batch::{self, Header};
use crate::log::partition_log::{write_atomically, PartitionLog};
use crate::metadata::records::{ApiMessageAndVersion, MetadataRecord};

/// The directory of the metadata log inside the metadata log directory.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";
/// Kafka's name for the metadata topic (reserved: no user topic may take it).
pub const METADATA_TOPIC_NAME: &str = "__cluster_metadata";
const QUORUM_STATE: &str = "quorum-state";
/// Kafka's `ControlRecordType.LEADER_CHANGE`.
const LEADER_CHANGE: i16 = 2;
/// Bytes read per step of a replay.
const REPLAY_CHUNK_BYTES: usize = 1 << 20;
/// Upper bound on one append (Kafka's controller writes batches of at most 8 KiB of records each,
/// many per operation; one Ketch operation is one batch, so this bounds an operation).
pub const MAX_BATCH_BYTES: usize = 64 << 20;

/// The metadata log of the only voter.
pub struct MetadataLog {
    log: PartitionLog,
    node_id: i32,
    epoch: i32,
    /// The only voter's snapshots (`single_snapshots.rs`; a voter of a quorum has its driver's).
    snapshots: single_snapshots::SingleSnapshots,
}

impl std::fmt::Debug for MetadataLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataLog")
            .field("dir", &self.log.dir())
            .field("epoch", &self.epoch)
            .field("end_offset", &self.log.log_end_offset())
            .finish()
    }
}

impl MetadataLog {
    /// Opens (recovering a torn tail) or creates the metadata log in `metadata_dir`, replays its
    /// metadata records through `apply` (offset, record: the newest snapshot's first, each at the
    /// offset before its end, then the log's after it), then elects this node leader of a new
    /// epoch: `quorum-state` first, then a LeaderChangeMessage, both durable.
    pub fn open(
        metadata_dir: &Path,
        node_id: i32,
        now_ms: i64,
        mut apply: impl FnMut(i64, MetadataRecord) -> anyhow::Result<()>,
    ) -> anyhow::Result<MetadataLog> {
        let dir = metadata_dir.join(METADATA_LOG_DIR_NAME);
        let latest = snapshot::list(&dir)?.last().copied();
        let log = PartitionLog::open(&dir, log_config()?, now_ms)?;
        let mut this =
            MetadataLog { log, node_id, epoch: 0, snapshots: single_snapshots::SingleSnapshots::new(latest) };
        // The newest snapshot first (each record at the offset before its end), then the log after it.
        let mut from = 0;
        if let Some(id) = latest {
            this.reach_snapshot(id, now_ms)?;
            for record in snapshot::read(&dir, id)? {
                apply(id.end_offset - 1, record)?;
            }
            from = id.end_offset;
        }
        this.snapshots.since_bytes = replay(&this.log, from, &mut apply)?;
        let stored_epoch = read_quorum_epoch(&dir)?;
        let log_epoch = this.log.latest_epoch().map_or(0, |(epoch, _)| epoch).max(latest.map_or(0, |s| s.epoch));
        let epoch = stored_epoch.max(log_epoch) + 1;
        write_atomically(&dir.join(QUORUM_STATE), quorum_state(node_id, epoch).as_bytes())?;
        this.epoch = epoch;
        this.append_batch(leader_change_batch(node_id, now_ms))?;
        tracing::info!(epoch, end_offset = this.end_offset(), "metadata log open: this node leads it (single voter)");
        Ok(this)
    }

    /// Opens the local copy of a metadata log this node does not lead (an observer's): nothing
    /// is appended at open. Returns the log and the metadata records in it, in offset order
    /// (committed or not: the leader's high watermark decides). With a snapshot fetched from the
    /// leader (`snapshot.rs`), its records come first, each at the offset before the snapshot's
    /// end, then the log's from that end on; a log that does not reach the snapshot's end (a crash
    /// while it was being emptied) starts over there.
    pub fn open_replica(
        metadata_dir: &Path,
        node_id: i32,
        now_ms: i64,
    ) -> anyhow::Result<(MetadataLog, Vec<(i64, MetadataRecord)>)> {
        let dir = metadata_dir.join(METADATA_LOG_DIR_NAME);
        if let Ok(text) = std::fs::read_to_string(dir.join(QUORUM_STATE)) {
            if text.contains(&format!("\"leaderId\":{node_id},")) {
                anyhow::bail!(
                    "{} is the metadata log of a single-node Ketch (this node led it): a broker of a controller \
                     quorum starts on a directory formatted for that quorum's cluster",
                    dir.display()
                );
            }
        }
        let latest = snapshot::list(&dir)?.last().copied();
        let log = PartitionLog::open(&dir, log_config()?, now_ms)?;
        let epoch = log.latest_epoch().map_or(0, |(epoch, _)| epoch);
        let mut this = MetadataLog { log, node_id, epoch, snapshots: single_snapshots::SingleSnapshots::new(latest) };
        let mut records = Vec::new();
        let mut from = 0;
        if let Some(id) = latest {
            let at = id.end_offset - 1;
            records.extend(snapshot::read(&dir, id)?.into_iter().map(|r| (at, r)));
            this.reach_snapshot(id, now_ms)?;
            this.epoch = this.epoch.max(id.epoch);
            from = id.end_offset;
        }
        replay(&this.log, from, &mut |offset, record| {
            records.push((offset, record));
            Ok(())
        })?;
        Ok((this, records))
    }

    /// A log that does not reach the snapshot `id` (its start is past it, or its end before it:
    /// a crash while it was being emptied for it) starts over at its end.
    fn reach_snapshot(&mut self, id: snapshot::SnapshotId, now_ms: i64) -> anyhow::Result<()> {
        let (start, end) = (self.log.log_start_offset(), self.end_offset());
        if start > id.end_offset || end < id.end_offset {
            tracing::info!(start, end, snapshot = ?id, "the metadata log does not reach its newest snapshot: it starts over there");
            self.start_at(id, now_ms)?;
        }
        Ok(())
    }

    /// Empties the copy and starts it at the end of the snapshot `id` (Kafka's
    /// `truncateFullyAndStartAt`), keeping only that snapshot (and Kafka's bootstrap one). The
    /// snapshot is durable before this runs; segments go from the last, so a crash leaves a prefix
    /// of the old log, which `open_replica` starts over.
    pub fn start_at(&mut self, id: snapshot::SnapshotId, now_ms: i64) -> anyhow::Result<()> {
        let dir = self.dir();
        self.log.close()?;
        let keep = [id.file_name(), snapshot::SnapshotId { end_offset: 0, epoch: 0 }.file_name(), QUORUM_STATE.into()];
        let mut segments = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if keep.contains(&name) {
                continue;
            }
            match name.strip_suffix(".log").and_then(|stem| stem.parse::<i64>().ok()) {
                Some(base) => segments.push((base, name)),
                None => std::fs::remove_file(dir.join(&name))?,
            }
        }
        segments.sort_unstable();
        for (_, name) in segments.iter().rev() {
            std::fs::remove_file(dir.join(name))?;
        }
        let config = log_config()?;
        drop(crate::log::segment::Segment::create(&dir, id.end_offset, config.index_interval_bytes)?);
        std::fs::File::open(&dir)?.sync_all()?;
        self.log = PartitionLog::open(&dir, config, now_ms)?;
        assert_eq!(self.log.log_start_offset(), id.end_offset, "the copy starts at the snapshot's end");
        assert_eq!(self.end_offset(), id.end_offset, "the copy is empty after the snapshot");
        self.epoch = id.epoch;
        Ok(())
    }

    /// Appends one batch fetched from the leader, at this log's end, with the leader epoch it
    /// carries (not synced: an observer fetches again what a crash loses). Returns the
    /// metadata records of a data batch (none for a control batch).
    pub fn append_fetched(&mut self, batch: &[u8]) -> anyhow::Result<Vec<(i64, MetadataRecord)>> {
        let header = Header::new(batch);
        anyhow::ensure!(
            header.base_offset() == self.end_offset(),
            "fetched batch at offset {} but the log ends at {}",
            header.base_offset(),
            self.end_offset()
        );
        let epoch = header.leader_epoch();
        anyhow::ensure!(epoch >= self.epoch, "fetched batch of epoch {epoch} after epoch {}", self.epoch);
        // A follower's checks (integrity only): the leader's clock and rules made the batch.
        let info = self.log.append_as_follower(batch, crate::log::now_ms())?;
        assert_eq!(info.base_offset, header.base_offset(), "fetched batches keep their offsets");
        self.epoch = epoch;
        let mut records = Vec::new();
        if !header.is_control() {
            decode_records(batch, &mut |offset, record| {
                records.push((offset, record));
                Ok(())
            })?;
        }
        Ok(records)
    }

    /// Truncates the copy to end before `offset` (it diverged from the leader's); returns the new
    /// end offset.
    pub fn truncate_to(&mut self, offset: i64) -> anyhow::Result<i64> {
        let end = self.log.truncate_to(offset)?;
        self.epoch = self.log.latest_epoch().map_or(0, |(epoch, _)| epoch);
        Ok(end)
    }

    /// The leader-epoch cache of the copy: `(epoch, first offset)`, ascending.
    pub fn epochs(&self) -> &[(i32, i64)] {
        self.log.epochs()
    }

    /// Empties the log (an observer whose copy diverged from the leader's fetches it again).
    pub fn reset(&mut self, now_ms: i64) -> anyhow::Result<()> {
        let dir = self.dir();
        self.log.close()?;
        std::fs::remove_dir_all(&dir)?;
        self.log = PartitionLog::open(&dir, log_config()?, now_ms)?;
        self.epoch = 0;
        Ok(())
    }

    /// The current leader epoch (this node leads it, or the last fetched batch's).
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// The next offset to be written.
    pub fn end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Appends `records` as one batch and returns the offset of the last one once the batch is
    /// durable. Nothing is written for no records (returns the offset before the end).
    pub fn append(&mut self, records: &[MetadataRecord], now_ms: i64) -> anyhow::Result<i64> {
        if records.is_empty() {
            return Ok(self.end_offset() - 1);
        }
        let batch = encode_batch(records, now_ms)?;
        self.append_batch(batch)
    }

    fn append_batch(&mut self, batch: Vec<u8>) -> anyhow::Result<i64> {
        let before = self.end_offset();
        let (bytes, summary) = batch::validate_internal(batch, self.log.config(), crate::log::now_ms())?;
        let size = bytes.len() as u64;
        let info = self.log.append(bytes, &summary, self.epoch, crate::log::now_ms())?;
        assert_eq!(info.base_offset, before, "metadata batches are appended at the log end");
        self.sync()?;
        self.snapshots.since_bytes += size;
        // One voter: durable here is committed.
        self.log.advance_high_watermark(info.last_offset + 1);
        assert!(self.log.flushed_offset() > info.last_offset, "acknowledged only once durable");
        Ok(info.last_offset)
    }

    fn sync(&mut self) -> anyhow::Result<()> {
        let work = self.log.flush_work()?;
        for file in &work.files {
            if let Err(e) = file.sync_data() {
                self.log.fail_storage(&e);
                anyhow::bail!("fsync of the metadata log failed: {e}");
            }
        }
        self.log.mark_flushed(&work, crate::log::now_ms());
        Ok(())
    }

    /// Flushes and closes the log (a clean shutdown).
    pub fn close(&mut self) -> anyhow::Result<()> {
        self.log.close()?;
        Ok(())
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn dir(&self) -> PathBuf {
        self.log.dir().to_path_buf()
    }
}

/// The metadata log is never cleaned by retention (its start moves to a snapshot: a voter's
/// driver does it, `voter_snapshots.rs`, the only voter `single_snapshots.rs`) and is synced by
/// `append` itself.
fn log_config() -> anyhow::Result<crate::config::TopicConfig> {
    let mut props = Properties::new();
    props.insert("log.retention.ms".into(), "-1".into());
    props.insert("log.retention.bytes".into(), "-1".into());
    props.insert("log.flush.interval.messages".into(), i64::MAX.to_string());
    props.insert("message.max.bytes".into(), MAX_BATCH_BYTES.to_string());
    Ok(BrokerConfig::from_properties(props)?.topic_defaults)
}

/// `records` as one data batch (base offset 0: the append gives it its offset and epoch).
pub fn encode_batch(records: &[MetadataRecord], now_ms: i64) -> anyhow::Result<Vec<u8>> {
    let mut encoded = Vec::with_capacity(records.len());
    for (i, record) in records.iter().enumerate() {
        let value = ApiMessageAndVersion { record: record.clone(), version: record.highest_version() }
            .encode()
            .map_err(|e| anyhow::anyhow!("metadata record {} cannot be encoded: {e:?}", record.name()))?;
        encoded.push(data_record(i as i64, Bytes::from(value), now_ms));
    }
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        encoded.iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .map_err(|e| anyhow::anyhow!("metadata batch cannot be encoded: {e:?}"))?;
    anyhow::ensure!(buf.len() <= MAX_BATCH_BYTES, "metadata batch of {} bytes is too large", buf.len());
    Ok(buf.to_vec())
}

/// Reads every batch from `from` (or the log start, if later); the records of data batches go to
/// `apply`. Returns the bytes of the batches read.
fn replay(
    log: &PartitionLog,
    from: i64,
    apply: &mut impl FnMut(i64, MetadataRecord) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut offset = log.log_start_offset().max(from);
    let mut bytes_read = 0u64;
    let end = log.log_end_offset();
    while offset < end {
        let chunk = log.read(offset, end, REPLAY_CHUNK_BYTES, true)?;
        anyhow::ensure!(!chunk.is_empty(), "metadata log: nothing readable at offset {offset} (end {end})");
        let mut at = 0;
        while at < chunk.len() {
            let Ok(len) = batch::check_batch(&chunk[at..]) else { break };
            let bytes = &chunk[at..at + len];
            at += len;
            let header = Header::new(bytes);
            let next = header.last_offset() + 1;
            if header.last_offset() < offset {
                continue;
            }
            bytes_read += len as u64;
            if !header.is_control() {
                let mut input = Bytes::copy_from_slice(bytes);
                let set = RecordBatchDecoder::decode(&mut input)
                    .map_err(|e| anyhow::anyhow!("metadata log batch at {}: {e:?}", header.base_offset()))?;
                for record in set.records.into_iter().filter(|r| r.offset >= from) {
                    let value = record.value.as_deref().unwrap_or_default();
                    let framed = ApiMessageAndVersion::decode(value)
                        .map_err(|e| anyhow::anyhow!("metadata log record at offset {}: {e:?}", record.offset))?;
                    apply(record.offset, framed.record)?;
                }
            }
            offset = next;
        }
        anyhow::ensure!(at > 0, "metadata log: a batch at offset {offset} is larger than a replay step");
    }
    Ok(bytes_read)
}

/// The metadata records of one data batch, in offset order.
fn decode_records(
    batch: &[u8],
    apply: &mut impl FnMut(i64, MetadataRecord) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut input = Bytes::copy_from_slice(batch);
    let set = RecordBatchDecoder::decode(&mut input)
        .map_err(|e| anyhow::anyhow!("metadata log batch at {}: {e:?}", Header::new(batch).base_offset()))?;
    for record in set.records {
        let value = record.value.as_deref().unwrap_or_default();
        let framed = ApiMessageAndVersion::decode(value)
            .map_err(|e| anyhow::anyhow!("metadata log record at offset {}: {e:?}", record.offset))?;
        apply(record.offset, framed.record)?;
    }
    Ok(())
}

fn data_record(offset: i64, value: Bytes, now_ms: i64) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        // The encoder keeps records in one batch while offset minus sequence stays the same,
        // and takes the batch's base sequence from the first: -1 (no producer) for offset 0.
        sequence: offset as i32 - 1,
        timestamp: now_ms,
        key: None,
        value: Some(value),
        headers: Default::default(),
    }
}

/// A control batch announcing `node_id` as leader (voters and granting voters: itself).
fn leader_change_batch(node_id: i32, now_ms: i64) -> Vec<u8> {
    leader_change_batch_of(node_id, &[node_id], now_ms)
}

/// A control batch announcing `leader` as leader of a quorum of `voters` (Kafka lists the
/// voters in both fields).
fn leader_change_batch_of(leader: i32, voters: &[i32], now_ms: i64) -> Vec<u8> {
    let voters: Vec<Voter> = voters.iter().map(|v| Voter::default().with_voter_id(*v)).collect();
    let message = LeaderChangeMessage::default()
        .with_version(0)
        .with_leader_id(leader.into())
        .with_voters(voters.clone())
        .with_granting_voters(voters);
    let mut value = BytesMut::new();
    message.encode(&mut value, 0).expect("a leader change message always encodes");
    control_batch(&[(LEADER_CHANGE, value.freeze())], now_ms)
}

/// One control batch (base offset 0) of `records`, each a control record type and its value
/// (a message at schema version 0, as Kafka's `ControlRecordUtils` reads them).
fn control_batch(records: &[(i16, Bytes)], now_ms: i64) -> Vec<u8> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (kind, value))| {
            let mut key = Vec::with_capacity(4);
            key.extend_from_slice(&0i16.to_be_bytes());
            key.extend_from_slice(&kind.to_be_bytes());
            let mut record = data_record(i as i64, value.clone(), now_ms);
            record.control = true;
            record.key = Some(Bytes::from(key));
            record
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .expect("a control batch always encodes");
    buf.to_vec()
}

/// Kafka's `quorum-state` (data version 0) for a single voter leading `epoch`.
fn quorum_state(node_id: i32, epoch: i32) -> String {
    format!(
        "{{\"clusterId\":\"\",\"leaderId\":{node_id},\"leaderEpoch\":{epoch},\"votedId\":-1,\"appliedOffset\":0,\
         \"currentVoters\":[{{\"voterId\":{node_id}}}],\"data_version\":0}}\n"
    )
}

/// The leader epoch recorded in `quorum-state` (0 when there is none).
fn read_quorum_epoch(dir: &Path) -> anyhow::Result<i32> {
    let text = match std::fs::read_to_string(dir.join(QUORUM_STATE)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let field = "\"leaderEpoch\":";
    let Some(at) = text.find(field) else { anyhow::bail!("{}: no leaderEpoch in {text:?}", dir.display()) };
    let digits: String = text[at + field.len()..].trim_start().chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().map_err(|_| anyhow::anyhow!("{}: bad leaderEpoch in {text:?}", dir.display()))
}

#[cfg(test)]
mod tests;
