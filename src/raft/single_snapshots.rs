//! The only voter's snapshots (KIP-630), as Kafka's single controller keeps them: a single Ketch
//! node (its own metadata log) and a single Ketch controller (`process.roles=controller`, the
//! only voter) write them with the same policy as a voter of a quorum (`voter_snapshots.rs`):
//! - once `metadata.log.max.record.bytes.between.snapshots` bytes were appended since the last
//!   one (or `metadata.log.max.snapshot.interval.ms` passed, checked at each append), a snapshot
//!   of the state applied through the log end (everything appended is committed: one voter),
//!   named by the log end and its last epoch;
//! - the log is cleaned below a snapshot as Kafka's `KafkaMetadataLog.maybeClean` does: while the
//!   log and the snapshots exceed `metadata.max.retention.bytes`, or the oldest snapshot is older
//!   than `metadata.max.retention.ms`, and a newer one exists, the log start moves to the next
//!   snapshot and the older one goes;
//! - at open the newest snapshot is loaded and only the log after it replayed (`MetadataLog::open`);
//!   an observer fetching below the log start is pointed at the newest snapshot, which it fetches
//!   with FetchSnapshot (`leader.rs`, `handlers/controller_quorum.rs`).
//!
//! Invariants: a snapshot is written only of a state that includes every record up to its end
//! (the caller's applied state, outside a metadata transaction) and is durable before the log
//! start moves past anything; the newest snapshot is always kept.

use std::time::Instant;

use super::snapshot::{self, SnapshotId};
use super::voter::{clean_target, SnapshotPolicy};
use super::MetadataLog;
use crate::metadata::records::MetadataRecord;

/// The only voter's snapshot bookkeeping.
#[derive(Debug)]
pub(super) struct SingleSnapshots {
    pub(super) policy: SnapshotPolicy,
    /// Bytes appended (or replayed at open) since the newest snapshot.
    pub(super) since_bytes: u64,
    pub(super) last_at: Instant,
    /// The newest snapshot, if any.
    pub(super) latest: Option<SnapshotId>,
}

impl SingleSnapshots {
    pub(super) fn new(latest: Option<SnapshotId>) -> SingleSnapshots {
        SingleSnapshots { policy: SnapshotPolicy::default(), since_bytes: 0, last_at: Instant::now(), latest }
    }
}

impl MetadataLog {
    /// When this node, the only voter, snapshots and how much log it keeps.
    pub fn set_snapshot_policy(&mut self, policy: SnapshotPolicy) {
        self.snapshots.policy = policy;
    }

    /// The newest snapshot of this log (an observer behind the log start fetches it).
    pub fn latest_snapshot(&self) -> Option<SnapshotId> {
        self.snapshots.latest
    }

    /// The only voter, after an append: writes a snapshot of `state` (the state applied through
    /// the log end; `None` inside a metadata transaction: not now) when one is due, then cleans
    /// the log below the snapshots as the policy allows.
    pub fn maybe_snapshot(
        &mut self,
        state: impl FnOnce() -> Option<Vec<MetadataRecord>>,
        now_ms: i64,
    ) -> anyhow::Result<()> {
        let end = self.end_offset();
        let policy = &self.snapshots.policy;
        let due = self.snapshots.since_bytes >= policy.max_bytes_between
            || (policy.max_interval_ms > 0
                && self.snapshots.last_at.elapsed().as_millis() as i64 >= policy.max_interval_ms);
        if !due || end <= self.snapshots.latest.map_or(0, |s| s.end_offset) {
            return Ok(());
        }
        let Some(records) = state() else { return Ok(()) };
        let epoch = self.log.latest_epoch().map_or(self.epoch, |(epoch, _)| epoch);
        let id = SnapshotId { end_offset: end, epoch };
        let bytes = snapshot::write(&self.dir(), id, &records, None, (now_ms, now_ms))?;
        tracing::info!(end_offset = end, epoch, records = records.len(), bytes, "metadata snapshot written");
        self.snapshots.latest = Some(id);
        self.snapshots.since_bytes = 0;
        self.snapshots.last_at = Instant::now();
        self.clean_single()
    }

    /// Kafka's retention of the metadata log (see the module comment).
    fn clean_single(&mut self) -> anyhow::Result<()> {
        let dir = self.dir();
        let ids = snapshot::ids(&dir)?;
        let Some(id) = clean_target(&dir, &self.snapshots.policy, &ids, self.size_bytes()) else { return Ok(()) };
        if id.end_offset <= self.log.log_start_offset() {
            return Ok(());
        }
        self.compact_voter(id)?;
        tracing::info!(log_start = id.end_offset, snapshot = ?id, "metadata log cleaned below a snapshot");
        Ok(())
    }
}
