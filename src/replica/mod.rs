//! The replica layer, between the handlers and coordinators above and the partition logs below
//! (Kafka's `Partition` and `ReplicaManager`): it decides the high watermark, storage does not.
//!
//! Today Ketch runs one node: every hosted partition is led by this node at `LEADER_EPOCH` with
//! an in-sync replica set of this node alone, so after every append the high watermark is the
//! minimum log end offset over the ISR, i.e. the local log end. Followers, ISR changes
//! (AlterPartition), leader epochs from the metadata image and the delayed produce/fetch
//! operations of replication (issue 14) come here.
//!
//! Invariants: every append made as leader (client batches, coordinator records, transaction
//! markers) goes through this module, so the high-watermark rule has one home; the high
//! watermark only grows and never passes the log end of any in-sync replica.

use crate::error::LogError;
use crate::log::batch::BatchSummary;
use crate::log::{AppendInfo, PartitionLog};

/// The leader epoch this single node leads every partition at.
pub const LEADER_EPOCH: i32 = 0;

/// Appends a validated batch as the partition's leader, then advances the high watermark.
pub fn append_as_leader(
    log: &mut PartitionLog,
    batch: impl AsRef<[u8]>,
    summary: &BatchSummary,
    now_ms: i64,
) -> Result<AppendInfo, LogError> {
    let info = log.append(batch, summary, LEADER_EPOCH, now_ms)?;
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
    let offset = log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, LEADER_EPOCH, now_ms)?;
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
}
