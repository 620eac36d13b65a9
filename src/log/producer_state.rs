//! Producer and transaction state of one partition, modelled on Kafka's `ProducerStateManager`
//! and transaction index.
//!
//! Owns: per producer id, its epoch, the epoch of the transaction coordinator that wrote its
//! last marker (a marker from an older coordinator is TRANSACTION_COORDINATOR_FENCED), the metadata of its last `MAX_CACHED_BATCHES` batches
//! (sequence range, offsets, max timestamp) and the first offset of its open transaction, if any. These
//! decide whether a new batch is in sequence, a duplicate of a retried batch (answered with the
//! original offsets and timestamp, not written again), out of order (OUT_OF_ORDER_SEQUENCE_NUMBER) or from a
//! fenced epoch (INVALID_PRODUCER_EPOCH); open transactions bound the last stable offset (LSO);
//! aborted transactions are listed for read_committed fetches. Also the producers' transaction
//! verifications in progress (`verification`): in memory only, cleared by the producer's next
//! transactional write or marker, expired with idle producers; they bound the sequences of
//! client batches (`check`).
//! On disk: `<offset, 20 digits>.snapshot` files in the partition directory, holding the state
//! as of that log offset: `[u32 crc32c of the rest][u32 version=4][u32 count]` then per
//! producer `[i64 pid][i16 epoch][i64 last timestamp][i64 open txn first offset or -1]
//! [i32 coordinator epoch or -1][u8 n]` (version 2, still read, has no coordinator epoch)
//! and n times `[i32 first seq][i32 last seq][i64 first offset][i64 last offset]
//! [i64 max timestamp]` (versions 2 and 3, still read, have no timestamp: -1), then
//! `[u32 aborted count]` and per aborted transaction `[i64 pid][i64 first][i64 last][i64 lso]`,
//! big-endian.
//! Invariants: the state equals what replaying every batch below the snapshot offset gives;
//! recovery loads the newest valid snapshot at or below the log end and replays the batches
//! after it.

use std::collections::{HashMap, VecDeque};
use std::path::Path;

use crate::error::LogError;
use crate::log::verification::{VerificationEntry, VerificationGuard};

/// Kafka keeps the last five batches per producer (max.in.flight.requests.per.connection <= 5).
pub const MAX_CACHED_BATCHES: usize = 5;
const SNAPSHOT_SUFFIX: &str = "snapshot";
const SNAPSHOTS_KEPT: usize = 2;
/// Version 3 added the coordinator epoch, version 4 each cached batch's max timestamp; version 2
/// and 3 snapshots (earlier Ketch) are still read.
const SNAPSHOT_VERSION: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp as stored: its append time on a LogAppendTime topic (Kafka's
    /// `BatchMetadata.timestamp`, answered to a retry of the batch).
    pub timestamp: i64,
}

#[derive(Debug, Clone, Default)]
pub struct ProducerEntry {
    pub epoch: i16,
    pub last_timestamp: i64,
    pub batches: VecDeque<BatchMeta>,
    /// First offset of this producer's open transaction in this partition.
    pub txn_first_offset: Option<i64>,
    /// The coordinator epoch of the last marker written for this producer; `None` before any.
    pub coordinator_epoch: Option<i32>,
}

/// A transaction that ended with an abort marker: its records must be skipped by
/// read_committed consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// Offset of the abort marker.
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

/// A transaction marker: how the transaction ended and the epoch of the coordinator that
/// ended it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub commit: bool,
    pub coordinator_epoch: i32,
}

/// The producer fields of a batch header.
#[derive(Debug, Clone, Copy)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    /// The batch's last offset delta: its last sequence is `first_seq` plus this (Kafka's
    /// `lastSequence`), also for a compacted batch holding fewer records than that.
    pub last_offset_delta: i32,
    pub max_timestamp: i64,
}

impl ProducerBatch {
    pub fn last_seq(&self) -> i32 {
        // Sequences wrap from i32::MAX to 0.
        ((self.first_seq as i64 + self.last_offset_delta as i64) % (i32::MAX as i64 + 1)) as i32
    }
}

/// The verdict on an incoming idempotent batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Append it.
    Append,
    /// A retry of a batch already in the log at these offsets, with this max timestamp.
    Duplicate { first_offset: i64, last_offset: i64, timestamp: i64 },
}

#[derive(Debug, Default)]
pub struct ProducerState {
    producers: HashMap<i64, ProducerEntry>,
    aborted: Vec<AbortedTxn>,
    /// Verifications in progress, by producer id (Kafka's `verificationStates`).
    verifications: HashMap<i64, VerificationEntry>,
}

fn in_sequence(last_seq: i32, next_first_seq: i32) -> bool {
    next_first_seq as i64 == last_seq as i64 + 1 || (next_first_seq == 0 && last_seq == i32::MAX)
}

impl ProducerState {
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    pub fn len(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Kafka's checks for a batch about to be appended by a client, in Kafka's order: a retry
    /// of a cached batch is a duplicate; then the epoch; then the sequence, which must not pass
    /// a lower one still being verified (Kafka's `checkSequence`) and must follow the last.
    pub fn check(&self, batch: &ProducerBatch) -> Result<Check, LogError> {
        let entry = self.producers.get(&batch.producer_id);
        if let Some(entry) = entry {
            if batch.epoch < entry.epoch {
                return Err(LogError::InvalidProducerEpoch(format!(
                    "producer {} epoch {} is older than the current epoch {}",
                    batch.producer_id, batch.epoch, entry.epoch
                )));
            }
            let last_seq = batch.last_seq();
            let duplicate = entry.batches.iter().find(|b| b.first_seq == batch.first_seq && b.last_seq == last_seq);
            if let (true, Some(dup)) = (batch.epoch == entry.epoch, duplicate) {
                let (first_offset, last_offset, timestamp) = (dup.first_offset, dup.last_offset, dup.timestamp);
                return Ok(Check::Duplicate { first_offset, last_offset, timestamp });
            }
        }
        if let Some(v) = self.verifications.get(&batch.producer_id).filter(|v| batch.first_seq > v.lowest_seq) {
            return Err(LogError::OutOfOrderSequence(format!(
                "producer {} sent sequence {} while sequence {} is still being verified",
                batch.producer_id, batch.first_seq, v.lowest_seq
            )));
        }
        let Some(entry) = entry else {
            // Unknown producer (new, or its state expired / was deleted by retention): any
            // sequence is accepted, as Kafka does.
            return Ok(Check::Append);
        };
        if batch.epoch > entry.epoch {
            if batch.first_seq != 0 {
                return Err(LogError::OutOfOrderSequence(format!(
                    "a new epoch {} of producer {} must start at sequence 0, not {}",
                    batch.epoch, batch.producer_id, batch.first_seq
                )));
            }
            return Ok(Check::Append);
        }
        match entry.batches.back() {
            Some(last) if !in_sequence(last.last_seq, batch.first_seq) => Err(LogError::OutOfOrderSequence(format!(
                "producer {} sent sequence {} after {}",
                batch.producer_id, batch.first_seq, last.last_seq
            ))),
            // A marker at a bumped epoch (transaction protocol 2) cleared the batches: the
            // producer restarted its sequences, as Kafka requires.
            None if batch.first_seq != 0 && entry.epoch >= 0 => Err(LogError::OutOfOrderSequence(format!(
                "producer {} epoch {} must start at sequence 0, not {}",
                batch.producer_id, batch.epoch, batch.first_seq
            ))),
            _ => Ok(Check::Append),
        }
    }

    /// Kafka's `maybeCreateVerificationStateEntry`: the verification of `producer_id`'s
    /// transactional batch starting at `seq`, created unless one is already in progress (which
    /// then notes the batch), and its guard.
    pub fn start_verification(&mut self, producer_id: i64, seq: i32, epoch: i16, now_ms: i64) -> VerificationGuard {
        let entry = self.verifications.entry(producer_id).or_insert_with(|| VerificationEntry::new(now_ms, seq, epoch));
        entry.note_batch(seq, epoch);
        entry.guard
    }

    /// The verification of `producer_id` in progress, if any.
    pub fn verification(&self, producer_id: i64) -> Option<&VerificationEntry> {
        self.verifications.get(&producer_id)
    }

    /// Moves the verifications in progress to `other` (a rebuilt state: Kafka keeps them when
    /// it reloads producer state).
    pub fn hand_over_verifications(&mut self, other: &mut ProducerState) {
        other.verifications = std::mem::take(&mut self.verifications);
    }
    /// Records a batch now in the log at `first_offset..=last_offset` (appends and replay).
    pub fn update(&mut self, batch: &ProducerBatch, first_offset: i64, last_offset: i64, transactional: bool) {
        if transactional {
            // The transaction is open here now: its later batches need no verification.
            self.verifications.remove(&batch.producer_id);
        }
        let entry = self.producers.entry(batch.producer_id).or_default();
        if batch.epoch != entry.epoch {
            entry.batches.clear();
            entry.epoch = batch.epoch;
        }
        if transactional && entry.txn_first_offset.is_none() {
            entry.txn_first_offset = Some(first_offset);
        }
        entry.last_timestamp = entry.last_timestamp.max(batch.max_timestamp);
        entry.batches.push_back(BatchMeta {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq(),
            first_offset,
            last_offset,
            timestamp: batch.max_timestamp,
        });
        while entry.batches.len() > MAX_CACHED_BATCHES {
            entry.batches.pop_front();
        }
    }

    /// Kafka's `checkCoordinatorEpoch` for a marker the leader is about to write: a marker
    /// from a coordinator older than the last one that wrote a marker for this producer is
    /// refused (a zombie coordinator). Replicated and replayed markers are not checked.
    pub fn check_marker(&self, producer_id: i64, coordinator_epoch: i32) -> Result<(), LogError> {
        match self.producers.get(&producer_id).and_then(|e| e.coordinator_epoch) {
            Some(current) if current > coordinator_epoch => Err(LogError::TransactionCoordinatorFenced(format!(
                "Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} (zombie), {current} (current)"
            ))),
            _ => Ok(()),
        }
    }

    /// Applies a transaction marker written by the coordinator at `coordinator_epoch` at
    /// `offset`; an abort is recorded for read_committed fetches. Returns false if the
    /// marker's producer epoch is fenced.
    pub fn complete_txn(&mut self, producer_id: i64, epoch: i16, marker: Marker, offset: i64, timestamp: i64) -> bool {
        let Marker { commit, coordinator_epoch } = marker;
        // The transaction a verification in progress found is over: its append must fail.
        self.verifications.remove(&producer_id);
        let entry = self.producers.entry(producer_id).or_default();
        if epoch < entry.epoch {
            return false;
        }
        entry.coordinator_epoch = Some(coordinator_epoch);
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(timestamp);
        if let Some(first) = entry.txn_first_offset.take() {
            if !commit {
                let lso = self.first_unstable_offset().unwrap_or(offset + 1).min(offset + 1);
                self.aborted.push(AbortedTxn {
                    producer_id,
                    first_offset: first,
                    last_offset: offset,
                    last_stable_offset: lso,
                });
            }
        }
        true
    }

    /// The first offset of the oldest open transaction, if any.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.producers.values().filter_map(|e| e.txn_first_offset).min()
    }

    /// Open transactions: (producer id, first offset).
    pub fn open_txns(&self) -> Vec<(i64, i64)> {
        self.producers.iter().filter_map(|(id, e)| e.txn_first_offset.map(|f| (*id, f))).collect()
    }

    /// Aborted transactions that overlap `[from, to)`, for read_committed fetches.
    pub fn aborted_between(&self, from: i64, to: i64) -> Vec<AbortedTxn> {
        self.aborted.iter().filter(|a| a.last_offset >= from && a.first_offset < to).copied().collect()
    }

    pub fn producers(&self) -> impl Iterator<Item = (&i64, &ProducerEntry)> {
        self.producers.iter()
    }

    /// Drops producers idle since before `cutoff_ms` (`producer.id.expiration.ms`), except
    /// those with an open transaction, and verifications started at or before it (Kafka's
    /// `removeExpiredProducers`).
    pub fn expire(&mut self, cutoff_ms: i64) -> usize {
        self.verifications.retain(|_, v| v.created_ms > cutoff_ms);
        let before = self.producers.len();
        self.producers.retain(|_, e| e.last_timestamp >= cutoff_ms || e.txn_first_offset.is_some());
        before - self.producers.len()
    }

    /// Drops state wholly below `log_start_offset` (retention).
    pub fn truncate_head(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| {
            e.txn_first_offset.is_some() || e.batches.back().is_some_and(|b| b.last_offset >= log_start_offset)
        });
        self.aborted.retain(|a| a.last_offset >= log_start_offset);
    }

    fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(8 + self.producers.len() * 64);
        body.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        body.extend_from_slice(&(self.producers.len() as u32).to_be_bytes());
        let mut ids: Vec<_> = self.producers.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let e = &self.producers[&id];
            body.extend_from_slice(&id.to_be_bytes());
            body.extend_from_slice(&e.epoch.to_be_bytes());
            body.extend_from_slice(&e.last_timestamp.to_be_bytes());
            body.extend_from_slice(&e.txn_first_offset.unwrap_or(-1).to_be_bytes());
            body.extend_from_slice(&e.coordinator_epoch.unwrap_or(-1).to_be_bytes());
            body.push(e.batches.len() as u8);
            for b in &e.batches {
                body.extend_from_slice(&b.first_seq.to_be_bytes());
                body.extend_from_slice(&b.last_seq.to_be_bytes());
                body.extend_from_slice(&b.first_offset.to_be_bytes());
                body.extend_from_slice(&b.last_offset.to_be_bytes());
                body.extend_from_slice(&b.timestamp.to_be_bytes());
            }
        }
        body.extend_from_slice(&(self.aborted.len() as u32).to_be_bytes());
        for a in &self.aborted {
            for v in [a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset] {
                body.extend_from_slice(&v.to_be_bytes());
            }
        }
        let mut out = crc32c::crc32c(&body).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    fn decode(bytes: &[u8]) -> Option<ProducerState> {
        let (crc, body) = (bytes.get(..4)?, bytes.get(4..)?);
        if u32::from_be_bytes(crc.try_into().ok()?) != crc32c::crc32c(body) {
            return None;
        }
        let mut r = Reader(body);
        let version = r.u32()?;
        if !(2..=SNAPSHOT_VERSION).contains(&version) {
            return None;
        }
        let count = r.u32()? as usize;
        // Each producer takes at least 27 bytes: bound the map by what the file holds.
        if count > body.len() / 27 {
            return None;
        }
        let mut producers = HashMap::with_capacity(count);
        for _ in 0..count {
            let id = r.i64()?;
            let epoch = r.i64_16()?;
            let last_timestamp = r.i64()?;
            let txn_first_offset = Some(r.i64()?).filter(|o| *o >= 0);
            let coordinator_epoch = if version >= 3 { Some(r.i32()?).filter(|e| *e >= 0) } else { None };
            let n = r.u8()? as usize;
            let mut batches = VecDeque::with_capacity(n.min(MAX_CACHED_BATCHES));
            for _ in 0..n {
                batches.push_back(BatchMeta {
                    first_seq: r.i32()?,
                    last_seq: r.i32()?,
                    first_offset: r.i64()?,
                    last_offset: r.i64()?,
                    timestamp: if version >= 4 { r.i64()? } else { -1 },
                });
            }
            producers.insert(id, ProducerEntry { epoch, last_timestamp, batches, txn_first_offset, coordinator_epoch });
        }
        let aborted_count = r.u32()? as usize;
        if aborted_count > body.len() / 32 {
            return None;
        }
        let mut aborted = Vec::with_capacity(aborted_count);
        for _ in 0..aborted_count {
            aborted.push(AbortedTxn {
                producer_id: r.i64()?,
                first_offset: r.i64()?,
                last_offset: r.i64()?,
                last_stable_offset: r.i64()?,
            });
        }
        Some(ProducerState { producers, aborted, verifications: HashMap::new() })
    }

    /// Writes `<offset>.snapshot` and removes all but the newest `SNAPSHOTS_KEPT` snapshots.
    pub fn write_snapshot(&self, dir: &Path, offset: i64) -> std::io::Result<()> {
        let path = dir.join(crate::log::segment::file_name(offset, SNAPSHOT_SUFFIX));
        crate::log::partition_log::write_atomically(&path, &self.encode())?;
        let mut offsets = snapshot_offsets(dir)?;
        offsets.sort_unstable();
        let excess = offsets.len().saturating_sub(SNAPSHOTS_KEPT);
        for old in &offsets[..excess] {
            let _ = std::fs::remove_file(dir.join(crate::log::segment::file_name(*old, SNAPSHOT_SUFFIX)));
        }
        Ok(())
    }

    /// Removes every snapshot (the log they describe is gone).
    pub fn remove_snapshots(dir: &Path) -> std::io::Result<()> {
        for offset in snapshot_offsets(dir)? {
            std::fs::remove_file(dir.join(crate::log::segment::file_name(offset, SNAPSHOT_SUFFIX)))?;
        }
        Ok(())
    }

    /// Whether a snapshot at exactly `offset` exists.
    pub fn has_snapshot(dir: &Path, offset: i64) -> bool {
        dir.join(crate::log::segment::file_name(offset, SNAPSHOT_SUFFIX)).exists()
    }

    /// Loads the newest valid snapshot at or below `max_offset`, deleting snapshots above it
    /// (they describe data a recovery truncated). Returns the state and its offset.
    pub fn load_snapshot(dir: &Path, max_offset: i64) -> std::io::Result<Option<(ProducerState, i64)>> {
        let mut offsets = snapshot_offsets(dir)?;
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        for offset in offsets {
            let path = dir.join(crate::log::segment::file_name(offset, SNAPSHOT_SUFFIX));
            if offset > max_offset {
                std::fs::remove_file(&path)?;
                continue;
            }
            match ProducerState::decode(&std::fs::read(&path)?) {
                Some(state) => return Ok(Some((state, offset))),
                None => {
                    tracing::warn!(snapshot = %path.display(), "ignoring corrupt producer state snapshot");
                    std::fs::remove_file(&path)?;
                }
            }
        }
        Ok(None)
    }
}

fn snapshot_offsets(dir: &Path) -> std::io::Result<Vec<i64>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        if let Some(stem) = name.to_string_lossy().strip_suffix(".snapshot") {
            if let Ok(offset) = stem.parse() {
                out.push(offset);
            }
        }
    }
    Ok(out)
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = (self.0.get(..N)?, self.0.get(N..)?);
        self.0 = rest;
        head.try_into().ok()
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take::<1>()?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take()?))
    }
    fn i64_16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(pid: i64, epoch: i16, seq: i32, n: i32) -> ProducerBatch {
        ProducerBatch { producer_id: pid, epoch, first_seq: seq, last_offset_delta: n - 1, max_timestamp: 10 }
    }

    #[test]
    fn sequences_duplicates_gaps_and_epochs() {
        let mut s = ProducerState::default();
        assert_eq!(s.check(&batch(1, 0, 0, 3)).unwrap(), Check::Append);
        s.update(&batch(1, 0, 0, 3), 0, 2, false);
        assert_eq!(s.check(&batch(1, 0, 3, 2)).unwrap(), Check::Append);
        s.update(&batch(1, 0, 3, 2), 3, 4, false);
        // A retry of either cached batch is a duplicate with its original offsets.
        assert_eq!(
            s.check(&batch(1, 0, 0, 3)).unwrap(),
            Check::Duplicate { first_offset: 0, last_offset: 2, timestamp: 10 }
        );
        assert_eq!(
            s.check(&batch(1, 0, 3, 2)).unwrap(),
            Check::Duplicate { first_offset: 3, last_offset: 4, timestamp: 10 }
        );
        // A gap is out of order.
        assert_eq!(s.check(&batch(1, 0, 7, 1)).unwrap_err().code(), 45);
        // An older epoch is fenced; a newer one must restart at 0.
        s.update(&batch(1, 1, 0, 1), 5, 5, false);
        assert_eq!(s.check(&batch(1, 0, 6, 1)).unwrap_err().code(), 47);
        assert_eq!(s.check(&batch(1, 2, 5, 1)).unwrap_err().code(), 45);
        assert_eq!(s.check(&batch(1, 2, 0, 1)).unwrap(), Check::Append);
        // An unknown producer may start anywhere.
        assert_eq!(s.check(&batch(9, 0, 42, 1)).unwrap(), Check::Append);
    }

    #[test]
    fn transactions_bound_the_lso_and_aborts_are_listed() {
        let mut s = ProducerState::default();
        s.update(&batch(1, 0, 0, 2), 10, 11, true);
        s.update(&batch(2, 0, 0, 1), 12, 12, true);
        assert_eq!(s.first_unstable_offset(), Some(10));
        assert!(s.complete_txn(1, 0, Marker { commit: true, coordinator_epoch: 0 }, 13, 0));
        assert_eq!(s.first_unstable_offset(), Some(12));
        assert!(s.complete_txn(2, 0, Marker { commit: false, coordinator_epoch: 0 }, 14, 0));
        assert_eq!(s.first_unstable_offset(), None);
        assert_eq!(
            s.aborted_between(0, 20),
            vec![AbortedTxn { producer_id: 2, first_offset: 12, last_offset: 14, last_stable_offset: 15 }]
        );
        assert!(s.aborted_between(15, 20).is_empty());
        // A marker from an older epoch is refused.
        s.update(&batch(1, 3, 0, 1), 15, 15, true);
        assert!(!s.complete_txn(1, 2, Marker { commit: false, coordinator_epoch: 0 }, 16, 0));
    }

    #[test]
    fn sequence_wraps_around() {
        let mut s = ProducerState::default();
        s.update(&batch(1, 0, i32::MAX - 1, 2), 0, 1, false);
        assert_eq!(batch(1, 0, i32::MAX - 1, 2).last_seq(), i32::MAX);
        assert_eq!(s.check(&batch(1, 0, 0, 1)).unwrap(), Check::Append);
    }

    #[test]
    fn snapshot_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = ProducerState::default();
        for i in 0..7 {
            s.update(&batch(1, 0, i, 1), i as i64, i as i64, false);
        }
        s.update(&batch(2, 3, 0, 5), 7, 11, true);
        s.update(&batch(3, 0, 0, 1), 12, 12, true);
        assert!(s.complete_txn(3, 0, Marker { commit: false, coordinator_epoch: 7 }, 13, 10));
        s.write_snapshot(dir.path(), 14).unwrap();
        let (loaded, at) = ProducerState::load_snapshot(dir.path(), 14).unwrap().unwrap();
        assert_eq!(at, 14);
        assert_eq!(loaded.get(3).unwrap().coordinator_epoch, Some(7));
        assert_eq!(loaded.get(1).unwrap().coordinator_epoch, None);
        assert_eq!(loaded.get(1).unwrap().batches.len(), MAX_CACHED_BATCHES);
        assert_eq!(loaded.get(2).unwrap().epoch, 3);
        assert_eq!(loaded.first_unstable_offset(), Some(7));
        assert_eq!(loaded.aborted_between(0, 100).len(), 1);
        // A snapshot beyond the log end is dropped.
        assert!(ProducerState::load_snapshot(dir.path(), 13).unwrap().is_none());
        s.write_snapshot(dir.path(), 14).unwrap();
        let path = dir.path().join("00000000000000000014.snapshot");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(ProducerState::load_snapshot(dir.path(), 12).unwrap().is_none());
    }

    #[test]
    fn a_marker_from_an_older_coordinator_is_fenced() {
        let mut s = ProducerState::default();
        assert!(s.check_marker(1, 0).is_ok(), "no marker yet");
        s.update(&batch(1, 0, 0, 1), 0, 0, true);
        assert!(s.complete_txn(1, 0, Marker { commit: true, coordinator_epoch: 5 }, 1, 0));
        assert_eq!(s.check_marker(1, 4).unwrap_err().code(), 52, "TRANSACTION_COORDINATOR_FENCED");
        assert!(s.check_marker(1, 5).is_ok() && s.check_marker(1, 6).is_ok());
        assert!(s.check_marker(2, 0).is_ok(), "another producer");
        // Replicated and replayed markers are applied unchecked, as Kafka does.
        assert!(s.complete_txn(1, 0, Marker { commit: false, coordinator_epoch: 3 }, 2, 0));
        assert_eq!(s.get(1).unwrap().coordinator_epoch, Some(3));
    }

    /// A version 2 snapshot (Ketch before coordinator epochs) still loads, without one.
    #[test]
    fn a_version_2_snapshot_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = Vec::new();
        body.extend_from_slice(&2u32.to_be_bytes());
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&9i64.to_be_bytes()); // producer id
        body.extend_from_slice(&4i16.to_be_bytes()); // epoch
        body.extend_from_slice(&100i64.to_be_bytes()); // last timestamp
        body.extend_from_slice(&3i64.to_be_bytes()); // open transaction from offset 3
        body.push(1);
        for v in [0i32, 1] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        for v in [3i64, 4] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.extend_from_slice(&0u32.to_be_bytes());
        let mut bytes = crc32c::crc32c(&body).to_be_bytes().to_vec();
        bytes.extend_from_slice(&body);
        std::fs::write(dir.path().join("00000000000000000005.snapshot"), bytes).unwrap();
        let (loaded, at) = ProducerState::load_snapshot(dir.path(), 5).unwrap().unwrap();
        let entry = loaded.get(9).unwrap();
        assert_eq!((at, entry.epoch, entry.txn_first_offset, entry.coordinator_epoch), (5, 4, Some(3), None));
        assert_eq!(entry.batches.len(), 1);
    }
}
