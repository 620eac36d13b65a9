//! The replica layer, between the handlers and coordinators above and the partition logs below
//! (Kafka's `Partition` and `ReplicaManager`): it decides the high watermark, storage does not.
//!
//! Two ways to run: a single node (no controller quorum) leads every hosted partition at
//! `LEADER_EPOCH` (or its log's latest epoch) with an in-sync replica set of itself alone, so the
//! free functions below move the high watermark to the log end after every append; a broker of a
//! controller quorum runs `manager.rs` (roles, leader epochs and ISR from the metadata image,
//! follower fetching in `fetcher.rs`, acks=all waits, AlterPartition).
//!
//! `state.rs` is the replication state machine itself (follower states, ISR changes, high
//! watermark, acks=all, follower truncation), without I/O and checked by a seeded simulation;
//! `offsets.rs` is ListOffsets' rules on a replica; `checkpoint.rs` the high-watermark file.
//!
//! Invariants: every append made as leader (client batches, coordinator records, transaction
//! markers) goes through this module, so the high-watermark rule has one home; the high
//! watermark only grows and never passes the log end of any in-sync replica.

pub mod checkpoint;
pub mod fetcher;
pub mod manager;
pub mod offsets;
pub mod state;

use crate::error::LogError;
use crate::log::batch::BatchSummary;
use crate::log::{AppendInfo, PartitionLog};

/// The leader epoch this single node leads a new partition at.
pub const LEADER_EPOCH: i32 = 0;

/// The partition's leader epoch: `LEADER_EPOCH`, or the latest epoch its log was written at if
/// that is newer (a log copied from a Kafka cluster keeps its epochs, and appends go on at its
/// latest one, so epochs in the log never go down).
pub fn leader_epoch(log: &PartitionLog) -> i32 {
    log.latest_epoch().map_or(LEADER_EPOCH, |(epoch, _)| epoch.max(LEADER_EPOCH))
}

/// Kafka's check of a request's `current_leader_epoch` (KIP-320): -1 skips it; an older epoch
/// is FENCED_LEADER_EPOCH (the client is behind), a newer one UNKNOWN_LEADER_EPOCH (we are).
pub fn check_current_leader_epoch(
    log: &PartitionLog,
    requested: i32,
) -> Result<(), kafka_protocol::error::ResponseError> {
    use kafka_protocol::error::ResponseError;
    let current = leader_epoch(log);
    match requested {
        r if r < 0 || r == current => Ok(()),
        r if r < current => Err(ResponseError::FencedLeaderEpoch),
        _ => Err(ResponseError::UnknownLeaderEpoch),
    }
}

/// Appends a validated batch as the partition's leader, then advances the high watermark.
pub fn append_as_leader(
    log: &mut PartitionLog,
    batch: impl AsRef<[u8]>,
    summary: &BatchSummary,
    now_ms: i64,
) -> Result<AppendInfo, LogError> {
    let epoch = leader_epoch(log);
    let info = log.append(batch, summary, epoch, now_ms)?;
    advance_high_watermark(log);
    Ok(info)
}

/// Writes a transaction marker as the partition's leader, then advances the high watermark.
/// Returns the marker's offset.
pub fn append_marker_as_leader(
    log: &mut PartitionLog,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
    now_ms: i64,
) -> Result<i64, LogError> {
    let epoch = leader_epoch(log);
    let offset = log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, epoch, now_ms)?;
    advance_high_watermark(log);
    Ok(offset)
}

/// Kafka's `maybeIncrementLeaderHW`: the smallest log end offset of the in-sync replicas. The
/// ISR is this node alone.
fn advance_high_watermark(log: &mut PartitionLog) {
    let isr_min_log_end = log.log_end_offset();
    log.advance_high_watermark(isr_min_log_end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_moves_the_high_watermark_and_storage_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::BrokerConfig::from_properties(Default::default()).unwrap().topic_defaults;
        let mut log = PartitionLog::open(&dir.path().join("t-0"), config, 0).unwrap();
        let marker = log.append_marker(7, 0, true, 0, LEADER_EPOCH, 0).unwrap();
        assert_eq!((marker, log.log_end_offset(), log.high_watermark()), (0, 1, 0), "storage alone keeps the HW");
        let marker = append_marker_as_leader(&mut log, 7, 0, false, 0, 0).unwrap();
        assert_eq!((marker, log.high_watermark()), (1, 2));
    }

    /// A log written at epoch 5 (copied from a Kafka cluster) keeps epoch 5: appends continue
    /// at it, and clients naming it are served; older epochs are fenced, newer unknown.
    #[test]
    fn the_leader_epoch_never_goes_below_the_logs() {
        use kafka_protocol::error::ResponseError;
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::BrokerConfig::from_properties(Default::default()).unwrap().topic_defaults;
        let mut log = PartitionLog::open(&dir.path().join("t-0"), config, 0).unwrap();
        assert_eq!(leader_epoch(&log), LEADER_EPOCH);
        log.append_marker(7, 0, true, 0, 5, 0).unwrap();
        assert_eq!(leader_epoch(&log), 5);
        append_marker_as_leader(&mut log, 7, 0, true, 0, 0).unwrap();
        assert_eq!(log.latest_epoch().map(|(e, _)| e), Some(5), "appends go on at the log's epoch");
        assert_eq!(check_current_leader_epoch(&log, -1), Ok(()));
        assert_eq!(check_current_leader_epoch(&log, 5), Ok(()));
        assert_eq!(check_current_leader_epoch(&log, 4), Err(ResponseError::FencedLeaderEpoch));
        assert_eq!(check_current_leader_epoch(&log, 6), Err(ResponseError::UnknownLeaderEpoch));
    }
}
