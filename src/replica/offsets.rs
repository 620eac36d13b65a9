//! ListOffsets on one partition replica: Kafka's `Partition.fetchOffsetForTimestamp` and the
//! epoch rules of `UnifiedLog.fetchOffsetByTimestamp`, as a pure function of what the replica
//! knows (`OffsetView`) and a lookup into its log, so the rules are tested without a broker.
//!
//! Rules (Kafka 4.1):
//! - a client (replica id -1) sees offsets below its last fetchable offset only: the high
//!   watermark, or the last stable offset with read_committed; a replica's request (replica id
//!   >= 0, or Kafka's debugging id -2) sees up to the log end;
//! - LATEST is that last fetchable offset, at the leader's current epoch (a leader just elected
//!   has not written at it yet); a timestamp or MAX_TIMESTAMP lookup that lands at or beyond it
//!   finds nothing;
//! - a client asking a leader whose high watermark is still below the offset where its epoch
//!   started (elected, followers not caught up) gets OFFSET_NOT_AVAILABLE for LATEST and for a
//!   lookup that lands beyond the last fetchable offset, rather than an offset it may not keep;
//! - EARLIEST (and EARLIEST_LOCAL: no tiered storage) is the log start offset at the epoch the
//!   leader-epoch cache gives it; a found record comes with the epoch of the batch holding it
//!   (the cache's epoch for its offset: the cache is built from the batches' epochs).
//!
//! Invariant: an answered offset is never above the last fetchable offset (LATEST is equal to
//! it), so a consumer never seeks to data that may still be truncated away.

use kafka_protocol::error::ResponseError;

pub const LATEST: i64 = -1;
pub const EARLIEST: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL: i64 = -4;
pub const EARLIEST_PENDING_UPLOAD: i64 = -5;
pub const LATEST_TIERED: i64 = -6;

/// Who asks, which decides the last fetchable offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A follower or a debugging tool (replica id other than -1): up to the log end.
    Replica,
    ReadUncommitted,
    ReadCommitted,
}

impl Reader {
    /// From a ListOffsets request's replica id and isolation level (Kafka: only replica id -1,
    /// `CONSUMER_REPLICA_ID`, is a client request).
    pub fn of(replica_id: i32, isolation_level: i8) -> Reader {
        match (replica_id, isolation_level) {
            (-1, 1) => Reader::ReadCommitted,
            (-1, _) => Reader::ReadUncommitted,
            _ => Reader::Replica,
        }
    }
}

/// What the replica knows about its log when it answers.
#[derive(Debug, Clone, Copy)]
pub struct OffsetView<'a> {
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    /// The leader-epoch cache, `(epoch, start offset)` ascending.
    pub epochs: &'a [(i32, i64)],
    /// The partition's current leader epoch.
    pub leader_epoch: i32,
    /// As a replicated leader, the log end offset when its current epoch began (Kafka's
    /// `leaderEpochStartOffsetOpt`); `None` on a single node.
    pub epoch_start_offset: Option<i64>,
}

/// A found offset: (offset, timestamp, leader epoch; -1 for none).
pub type Found = (i64, i64, i32);

/// The largest epoch whose start offset is <= `offset` (Kafka's `epochForOffset`).
pub fn epoch_for_offset(epochs: &[(i32, i64)], offset: i64) -> Option<i32> {
    let i = epochs.partition_point(|(_, start)| *start <= offset);
    i.checked_sub(1).map(|i| epochs[i].0)
}

/// Answers one partition of a ListOffsets request. `lookup` finds (offset, timestamp) for
/// MAX_TIMESTAMP or a timestamp >= 0 in the log. `Ok(None)`: nothing found (offset and
/// timestamp -1 on the wire); `Err`: the partition's error code.
pub fn fetch_offset_for_timestamp(
    view: &OffsetView,
    reader: Reader,
    timestamp: i64,
    lookup: impl FnOnce(i64) -> Result<Option<(i64, i64)>, i16>,
) -> Result<Option<Found>, i16> {
    let last_fetchable = match reader {
        Reader::Replica => view.log_end_offset,
        Reader::ReadUncommitted => view.high_watermark,
        Reader::ReadCommitted => view.last_stable_offset,
    };
    let lagging = reader != Reader::Replica && view.epoch_start_offset.is_some_and(|start| start > view.high_watermark);
    let not_available = ResponseError::OffsetNotAvailable.code();
    // A log whose cache is still empty is at the leader's epoch from its start (Kafka assigns
    // the epoch at the log end when the leader takes over).
    let implicit = [(view.leader_epoch, view.log_start_offset)];
    let epochs = if view.epochs.is_empty() { &implicit[..] } else { view.epochs };
    let epoch_at = |offset: i64| epoch_for_offset(epochs, offset).unwrap_or(-1);
    match timestamp {
        LATEST | LATEST_TIERED if lagging => Err(not_available),
        LATEST | LATEST_TIERED => Ok(Some((last_fetchable, -1, view.leader_epoch))),
        EARLIEST | EARLIEST_LOCAL => Ok(Some((view.log_start_offset, -1, epoch_at(view.log_start_offset)))),
        EARLIEST_PENDING_UPLOAD => Ok(None),
        MAX_TIMESTAMP | 0.. => match lookup(timestamp)? {
            Some((offset, _)) if offset >= last_fetchable && lagging => Err(not_available),
            Some((offset, _)) if offset >= last_fetchable => Ok(None),
            Some((offset, ts)) => Ok(Some((offset, ts, epoch_at(offset)))),
            None => Ok(None),
        },
        _ => Err(ResponseError::InvalidRequest.code()),
    }
}

#[cfg(test)]
#[path = "offsets_tests.rs"]
mod tests;
