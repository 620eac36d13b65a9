//! The metadata log as one voter of a multi-voter quorum keeps it (`voter.rs` drives it): the
//! same files as the single voter's (`mod.rs`), written only as the Raft core says: batches at
//! the log end (the leader's own, stamped with its epoch, or the leader's as fetched), truncation
//! where the logs diverge, fsync before the core hears that an append is durable, and
//! `quorum-state` (Kafka's JSON, data version 0, with `votedId`) before anything after a change
//! of election state.
//!
//! Snapshots (`snapshot.rs` files beside the segments): the log starts at the end of one of them
//! (or at 0); compaction moves the log start to a newer one (Kafka's `deleteBeforeSnapshot`:
//! `log-start-offset` first, then whole segments below it) and deletes the older snapshots. A
//! log that does not reach its newest snapshot at open (a crash while installing one fetched
//! from the leader) starts over at it.
//!
//! Invariants: batches are appended only at the log end and keep the offsets and epochs the core
//! gave them; `quorum-state` is replaced atomically (written, synced, renamed); nothing is read
//! past the log end or below the log start; a log starting past 0 starts at a snapshot's end.

use std::path::Path;

use bytes::Bytes;

use super::core::{ElectionState, Entries, Entry, Records};
use super::snapshot::{self, SnapshotId};
use super::{leader_change_batch_of, MetadataLog, METADATA_LOG_DIR_NAME, QUORUM_STATE};
use crate::log::batch::{self, Header};
use crate::log::partition_log::{write_atomically, PartitionLog};

/// A Raft entry as the core sees a record batch: how many offsets it takes, an id the driver
/// finds its bytes by when it is appended (0: already on disk), and the voters of the
/// VotersRecord it holds, if any (KIP-853: ids, directory ids, endpoints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub records: u64,
    pub id: u64,
    pub voters: Option<std::sync::Arc<[super::voters_record::VoterInfo]>>,
}

impl Batch {
    /// The entry for the whole v2 batch `bytes` (read from disk or fetched from the leader).
    pub fn of(bytes: &[u8]) -> anyhow::Result<Batch> {
        let header = Header::new(bytes);
        let records = (header.last_offset() - header.base_offset() + 1) as u64;
        let voters = super::voters_record::decode_voters(bytes)?.map(Into::into);
        Ok(Batch { records, id: 0, voters })
    }
}

impl Records for Batch {
    fn records(&self) -> u64 {
        self.records
    }
    fn voters(&self) -> Option<Vec<i32>> {
        self.voters.as_ref().map(|v| v.iter().map(|v| v.id).collect())
    }
}

impl MetadataLog {
    /// Opens (recovering a torn tail) or creates the metadata log of voter `node_id`: the log,
    /// the election state in `quorum-state`, one entry per batch from the log start, and the
    /// newest snapshot.
    pub fn open_voter(metadata_dir: &Path, node_id: i32, now_ms: i64) -> anyhow::Result<VoterLog> {
        let dir = metadata_dir.join(METADATA_LOG_DIR_NAME);
        std::fs::create_dir_all(&dir)?;
        let snapshots = snapshot::list(&dir)?;
        let log = PartitionLog::open(&dir, super::log_config()?, now_ms)?;
        let state = read_election_state(&dir)?;
        let mut this =
            MetadataLog { log, node_id, epoch: 0, snapshots: super::single_snapshots::SingleSnapshots::new(None) };
        let latest = snapshots.last().copied();
        if let Some(id) = latest {
            this.reach_snapshot(id, now_ms)?;
        }
        let start = this.log.log_start_offset();
        let start_epoch = match snapshots.iter().find(|s| s.end_offset == start) {
            _ if start == 0 => 0,
            Some(id) => id.epoch,
            None => anyhow::bail!(
                "{}: the metadata log starts at {start} but no snapshot ends there ({snapshots:?})",
                dir.display()
            ),
        };
        let log = &this.log;
        let mut entries = Vec::new();
        scan(log, &mut |bytes| {
            entries.push(Entry { epoch: Header::new(bytes).leader_epoch(), value: Some(Batch::of(bytes)?) });
            Ok(())
        })?;
        let epoch = log.latest_epoch().map_or(0, |(epoch, _)| epoch).max(start_epoch);
        let state = ElectionState { epoch: state.epoch.max(epoch), ..state };
        this.epoch = epoch;
        let entries = Entries::after_snapshot(start as u64, start_epoch, entries);
        Ok(VoterLog { log: this, state, entries, snapshot: latest })
    }

    /// Moves the log start to `end`, the end of the snapshot `id` (committed, durable), and
    /// deletes the snapshots older than it.
    pub fn compact_voter(&mut self, id: SnapshotId) -> anyhow::Result<()> {
        let end = id.end_offset;
        anyhow::ensure!(end <= self.end_offset(), "compaction to {end} past the log end {}", self.end_offset());
        self.log.advance_high_watermark(end);
        let start = self.log.delete_records_before(end)?;
        anyhow::ensure!(start == end, "the metadata log starts at {start} after compaction to {end}");
        for older in snapshot::ids(&self.dir())?.into_iter().filter(|s| *s < id) {
            snapshot::remove(&self.dir(), older)?;
        }
        Ok(())
    }

    /// Bytes in the log's segments.
    pub fn size_bytes(&self) -> u64 {
        self.log.size_bytes()
    }

    /// Appends `bytes` (one record batch) at `start`, the log end, in `epoch`; not synced.
    pub fn write_at(&mut self, start: u64, epoch: i32, bytes: &[u8]) -> anyhow::Result<()> {
        let end = self.end_offset();
        anyhow::ensure!(start as i64 == end, "a batch for offset {start} but the log ends at {end}");
        // Integrity only, as a follower checks what it copies: a batch fetched from the leader
        // was made with the leader's clock and rules (and this voter's own batches with its).
        let summary = batch::check_replicated(bytes)?;
        let info = self.log.append(bytes, &summary, epoch, crate::log::now_ms())?;
        assert_eq!(info.base_offset, start as i64, "batches keep the offsets the core gave them");
        self.epoch = epoch;
        Ok(())
    }

    /// The control batch a leader of `epoch` starts it with (LeaderChangeMessage).
    pub fn leader_change(leader: i32, voters: &[i32], now_ms: i64) -> Vec<u8> {
        leader_change_batch_of(leader, voters, now_ms)
    }

    /// Makes everything written durable.
    pub fn sync_voter(&mut self) -> anyhow::Result<()> {
        self.sync()
    }

    /// Removes everything from `end` on (durably).
    pub fn truncate_voter(&mut self, end: u64) -> anyhow::Result<()> {
        let now = self.log.truncate_to(end as i64)?;
        anyhow::ensure!(now == end as i64, "truncated to {now}, not {end}");
        self.epoch = self.log.latest_epoch().map_or(0, |(epoch, _)| epoch);
        self.sync()
    }

    /// The bytes of the batches in [start, end).
    pub fn read_batches(&self, start: u64, end: u64) -> anyhow::Result<Bytes> {
        if start >= end {
            return Ok(Bytes::new());
        }
        let bytes = self.log.read(start as i64, end as i64, usize::MAX >> 1, true)?;
        Ok(Bytes::from(bytes))
    }

    /// Every data record in [from, to) (whole batches), in offset order: what becomes the image.
    /// Returns the bytes of the batches read.
    pub fn records_between(
        &self,
        from: i64,
        to: i64,
        apply: &mut impl FnMut(i64, crate::metadata::records::MetadataRecord) -> anyhow::Result<()>,
    ) -> anyhow::Result<u64> {
        if from >= to {
            return Ok(0);
        }
        let chunk = self.log.read(from, to, usize::MAX >> 1, true)?;
        let mut at = 0;
        while at < chunk.len() {
            let len = batch::check_batch(&chunk[at..])?;
            let bytes = &chunk[at..at + len];
            at += len;
            let header = Header::new(bytes);
            if header.base_offset() >= from && header.last_offset() < to && !header.is_control() {
                super::decode_records(bytes, apply)?;
            }
        }
        Ok(chunk.len() as u64)
    }

    /// Replaces `quorum-state` with `state` (voters: the static quorum's).
    pub fn persist_election(&self, state: ElectionState, voters: &[i32]) -> anyhow::Result<()> {
        let voters: Vec<String> = voters.iter().map(|v| format!("{{\"voterId\":{v}}}")).collect();
        let text = format!(
            "{{\"clusterId\":\"\",\"leaderId\":{},\"leaderEpoch\":{},\"votedId\":{},\"appliedOffset\":0,\
             \"currentVoters\":[{}],\"data_version\":0}}\n",
            state.leader.unwrap_or(-1),
            state.epoch,
            state.voted_for.unwrap_or(-1),
            voters.join(",")
        );
        write_atomically(&self.dir().join(QUORUM_STATE), text.as_bytes())?;
        Ok(())
    }
}

/// A voter's metadata log as opened: the files, the election state, the core's entries and the
/// newest snapshot.
pub struct VoterLog {
    pub log: MetadataLog,
    pub state: ElectionState,
    pub entries: Entries<Batch>,
    pub snapshot: Option<SnapshotId>,
}

/// Every batch header from the log start on.
fn scan(log: &PartitionLog, each: &mut impl FnMut(&[u8]) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let (mut offset, end) = (log.log_start_offset(), log.log_end_offset());
    while offset < end {
        let chunk = log.read(offset, end, super::REPLAY_CHUNK_BYTES, true)?;
        anyhow::ensure!(!chunk.is_empty(), "metadata log: nothing readable at offset {offset} (end {end})");
        let mut at = 0;
        while at < chunk.len() {
            let Ok(len) = batch::check_batch(&chunk[at..]) else { break };
            let header = Header::new(&chunk[at..at + len]);
            at += len;
            if header.last_offset() >= offset {
                each(&chunk[at - len..at])?;
                offset = header.last_offset() + 1;
            }
        }
        anyhow::ensure!(at > 0, "metadata log: a batch at offset {offset} is larger than a read step");
    }
    Ok(())
}

/// `quorum-state`'s leaderEpoch, votedId and leaderId (none: epoch 0, no vote, no leader).
fn read_election_state(dir: &Path) -> anyhow::Result<ElectionState> {
    let text = match std::fs::read_to_string(dir.join(QUORUM_STATE)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ElectionState::default()),
        Err(e) => return Err(e.into()),
    };
    let field = |name: &str| -> anyhow::Result<Option<i32>> {
        let key = format!("\"{name}\":");
        let Some(at) = text.find(&key) else { return Ok(None) };
        let digits: String =
            text[at + key.len()..].trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        digits.parse().map(Some).map_err(|_| anyhow::anyhow!("{}: bad {name} in {text:?}", dir.display()))
    };
    let epoch = field("leaderEpoch")?.unwrap_or(0).max(0);
    Ok(ElectionState {
        epoch,
        voted_for: field("votedId")?.filter(|v| *v >= 0),
        leader: field("leaderId")?.filter(|v| *v >= 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_voter_log_reopens_with_its_entries_and_election_state() {
        let dir = tempfile::tempdir().expect("dir");
        let VoterLog { mut log, state, entries, snapshot } = MetadataLog::open_voter(dir.path(), 2, 0).expect("open");
        assert_eq!(state, ElectionState::default());
        assert!(entries.is_empty() && snapshot.is_none());
        let state = ElectionState { epoch: 3, voted_for: Some(1), leader: Some(1) };
        log.persist_election(state, &[1, 2, 3]).expect("persist");
        log.write_at(0, 3, &MetadataLog::leader_change(1, &[1, 2, 3], 0)).expect("write");
        log.sync_voter().expect("sync");
        let end = log.end_offset() as u64;
        assert_eq!(end, 1);
        assert!(!log.read_batches(0, end).expect("read").is_empty());
        assert!(log.write_at(5, 3, &MetadataLog::leader_change(1, &[1, 2, 3], 0)).is_err(), "only at the end");
        // A VotersRecord (with its KRaftVersionRecord: two records) is an entry naming its voters.
        let voter =
            |id| crate::raft::voters_record::VoterInfo { id, directory_id: uuid::Uuid::nil(), endpoints: vec![] };
        log.write_at(1, 3, &crate::raft::voters_record::voters_batch(1, &[voter(2), voter(1)], 0)).expect("write");
        log.sync_voter().expect("sync");
        log.close().expect("close");
        let VoterLog { log, state: reopened, entries, .. } = MetadataLog::open_voter(dir.path(), 2, 0).expect("reopen");
        assert_eq!(reopened, state);
        let voters = Some(std::sync::Arc::from(vec![voter(2), voter(1)]));
        assert_eq!(
            entries.entries(),
            &[
                Entry { epoch: 3, value: Some(Batch { records: 1, id: 0, voters: None }) },
                Entry { epoch: 3, value: Some(Batch { records: 2, id: 0, voters }) }
            ]
        );
        assert_eq!(log.end_offset(), 3);
    }

    fn topic(name: &str) -> crate::metadata::records::MetadataRecord {
        crate::metadata::records::MetadataRecord::Topic(crate::metadata::records::TopicRecord {
            name: name.into(),
            ..Default::default()
        })
    }

    #[test]
    fn a_voter_log_compacts_below_a_snapshot_and_reopens_after_it() {
        let dir = tempfile::tempdir().expect("dir");
        let VoterLog { mut log, .. } = MetadataLog::open_voter(dir.path(), 2, 0).expect("open");
        log.write_at(0, 1, &MetadataLog::leader_change(1, &[1, 2, 3], 0)).expect("write");
        for i in 0..4u64 {
            let batch = crate::raft::encode_batch(&[topic(&format!("t{i}")), topic(&format!("u{i}"))], 0).unwrap();
            log.write_at(1 + 2 * i, if i < 2 { 1 } else { 2 }, &batch).expect("write");
        }
        log.sync_voter().expect("sync");
        assert_eq!(log.end_offset(), 9);
        let older = SnapshotId { end_offset: 3, epoch: 1 };
        let newer = SnapshotId { end_offset: 7, epoch: 2 };
        snapshot::write(&log.dir(), older, &[topic("t0")], None, (0, 0)).expect("snapshot");
        snapshot::write(&log.dir(), newer, &[topic("t0"), topic("t1"), topic("t2")], None, (0, 0)).expect("snapshot");
        log.compact_voter(newer).expect("compact");
        assert_eq!(snapshot::list(&log.dir()).unwrap(), vec![newer], "the older snapshot deleted");
        log.close().expect("close");
        let VoterLog { log, entries, snapshot, .. } = MetadataLog::open_voter(dir.path(), 2, 0).expect("reopen");
        assert_eq!(snapshot, Some(newer));
        assert_eq!((entries.start(), entries.start_epoch(), entries.end(), entries.len()), (7, 2, 9, 1));
        let mut seen = Vec::new();
        log.records_between(7, 9, &mut |offset, _| {
            seen.push(offset);
            Ok(())
        })
        .expect("read after the start");
        assert_eq!(seen, vec![7, 8]);
        drop(log);
        // A log that does not reach its newest snapshot starts over at it.
        let far = SnapshotId { end_offset: 20, epoch: 3 };
        snapshot::write(&dir.path().join(METADATA_LOG_DIR_NAME), far, &[topic("t0")], None, (0, 0)).expect("snapshot");
        let VoterLog { log, entries, snapshot, .. } = MetadataLog::open_voter(dir.path(), 2, 0).expect("reopen");
        assert_eq!(snapshot, Some(far));
        assert_eq!((entries.start(), entries.start_epoch(), entries.len(), log.end_offset()), (20, 3, 0, 20));
    }
}
