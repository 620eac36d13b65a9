//! The leader's side of the metadata log's Fetch (Kafka's `KafkaRaftClient.handleFetchRequest`,
//! leader role): what the only voter answers a broker (an observer) fetching `__cluster_metadata`
//! partition 0, and which observers it has heard from (for DescribeQuorum).
//!
//! Pure over the log: `answer` reads, never writes; the caller holds the fetch when there is
//! nothing new (`Answer::Wait`) and asks again when the log grows or `max_wait_ms` passes.
//! An observer behind the log start (cleaned below a snapshot, `single_snapshots.rs`) is told the
//! newest snapshot, which it fetches with FetchSnapshot.
//! Invariants: records are only ever sent from a position the observer's last fetched epoch
//! agrees with (else a diverging epoch tells it where to truncate); the high watermark sent is
//! the committed end (everything appended is durable, one voter), never past the log end; a
//! request for another cluster, another partition or a wrong epoch gets Kafka's error and no
//! records.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData, SnapshotId,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::protocol::StrBytes;

use super::observer::METADATA_TOPIC_ID;
use super::MetadataLog;

/// An observer's progress as last fetched (Kafka's `ReplicaState` of DescribeQuorum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObserverState {
    pub directory_id: uuid::Uuid,
    pub log_end_offset: i64,
    pub last_fetch_ms: i64,
    pub last_caught_up_ms: i64,
}

/// What the leader does with a fetch.
#[derive(Debug)]
pub enum Answer {
    /// Send this now.
    Now(Box<FetchResponse>),
    /// Nothing to send yet: hold the fetch up to its `max_wait_ms`, then ask again.
    Wait,
}

/// The leader's own endpoint on the listener the fetch came in on (FetchResponse v16+
/// `NodeEndpoints`, so observers learn where the leader is).
#[derive(Debug, Clone)]
pub struct LeaderEndpoint {
    pub host: String,
    pub port: u16,
}

/// Answers `request` from `log` (this node leads it). `may_wait`: whether an empty answer may
/// be held (false once the fetch has waited its `max_wait_ms`).
pub fn answer(
    log: &MetadataLog,
    cluster_id: &str,
    endpoint: &LeaderEndpoint,
    request: &FetchRequest,
    may_wait: bool,
    observers: &mut BTreeMap<i32, ObserverState>,
    now_ms: i64,
) -> Answer {
    let mut response = FetchResponse::default().with_node_endpoints(vec![NodeEndpoint::default()
        .with_node_id(log.node_id().into())
        .with_host(StrBytes::from_string(endpoint.host.clone()))
        .with_port(endpoint.port as i32)]);
    if let Some(id) = request.cluster_id.as_ref() {
        if id.as_str() != cluster_id {
            response.error_code = ResponseError::InconsistentClusterId.code();
            return Answer::Now(Box::new(response));
        }
    }
    let wanted = match (request.topics.as_slice(), request.topics.first().map(|t| t.partitions.as_slice())) {
        ([topic], Some([partition])) if topic.topic_id == METADATA_TOPIC_ID && partition.partition == 0 => partition,
        _ => {
            response.error_code = ResponseError::InvalidRequest.code();
            return Answer::Now(Box::new(response));
        }
    };
    let leader = LeaderIdAndEpoch::default().with_leader_id(log.node_id().into()).with_leader_epoch(log.epoch());
    let mut partition = PartitionData::default()
        .with_partition_index(0)
        .with_high_watermark(log.high_watermark())
        .with_log_start_offset(log.start_offset())
        .with_current_leader(leader);
    let topic = |partition: PartitionData| {
        vec![FetchableTopicResponse::default().with_topic_id(METADATA_TOPIC_ID).with_partitions(vec![partition])]
    };
    let epoch_error = match wanted.current_leader_epoch {
        e if e < log.epoch() => Some(ResponseError::FencedLeaderEpoch),
        e if e > log.epoch() => Some(ResponseError::UnknownLeaderEpoch),
        _ => None,
    };
    let bad_position = wanted.fetch_offset < 0 || (wanted.fetch_offset > 0 && wanted.last_fetched_epoch < 0);
    if let Some(error) = epoch_error.or(bad_position.then_some(ResponseError::InvalidRequest)) {
        partition.error_code = error.code();
        return Answer::Now(Box::new(response.with_responses(topic(partition))));
    }
    let replica_id = request.replica_state.replica_id.0;
    // Below the log start (cleaned below a snapshot): the observer fetches the newest snapshot
    // (Kafka's `validateOffsetAndEpoch`).
    if wanted.fetch_offset < log.start_offset() {
        if let Some(id) = log.latest_snapshot() {
            partition.snapshot_id = SnapshotId::default().with_end_offset(id.end_offset).with_epoch(id.epoch);
            return Answer::Now(Box::new(response.with_responses(topic(partition))));
        }
    }
    if let Some(diverging) = diverging(log, wanted.fetch_offset, wanted.last_fetched_epoch) {
        partition.diverging_epoch = diverging;
        return Answer::Now(Box::new(response.with_responses(topic(partition))));
    }
    if replica_id >= 0 {
        let state = observers.entry(replica_id).or_insert(ObserverState {
            directory_id: wanted.replica_directory_id,
            log_end_offset: -1,
            last_fetch_ms: now_ms,
            last_caught_up_ms: -1,
        });
        state.directory_id = wanted.replica_directory_id;
        state.log_end_offset = wanted.fetch_offset;
        state.last_fetch_ms = now_ms;
        if wanted.fetch_offset >= log.end_offset() {
            state.last_caught_up_ms = now_ms;
        }
    }
    let max_bytes = (wanted.partition_max_bytes.min(request.max_bytes).max(1)) as usize;
    let records = match log.read(wanted.fetch_offset, max_bytes) {
        Ok(records) => records,
        Err(e) => {
            tracing::warn!(error = %e, offset = wanted.fetch_offset, "reading the metadata log for a fetch");
            partition.error_code = ResponseError::UnknownServerError.code();
            return Answer::Now(Box::new(response.with_responses(topic(partition))));
        }
    };
    if records.is_empty() && may_wait && request.max_wait_ms > 0 {
        return Answer::Wait;
    }
    partition.records = Some(records);
    Answer::Now(Box::new(response.with_responses(topic(partition))))
}

/// Kafka's `validateOffsetAndEpoch`: where the observer's log stops agreeing with this one
/// (None: it agrees up to `fetch_offset`).
fn diverging(log: &MetadataLog, fetch_offset: i64, last_fetched_epoch: i32) -> Option<EpochEndOffset> {
    if fetch_offset == 0 && last_fetched_epoch <= 0 {
        return None;
    }
    let (epoch, end_offset) = log.end_offset_for_epoch(last_fetched_epoch);
    if epoch == last_fetched_epoch && end_offset >= fetch_offset {
        return None;
    }
    // An epoch this log never had (older than its first): truncate to the start.
    let (epoch, end_offset) = if epoch < 0 { (0, log.start_offset()) } else { (epoch, end_offset) };
    Some(EpochEndOffset::default().with_epoch(epoch).with_end_offset(end_offset))
}

impl MetadataLog {
    /// Whole batches from `offset`, at most `max_bytes` (at least one batch when there is one).
    pub fn read(&self, offset: i64, max_bytes: usize) -> anyhow::Result<Bytes> {
        let end = self.end_offset();
        if offset >= end {
            return Ok(Bytes::new());
        }
        Ok(Bytes::from(self.log.read(offset, end, max_bytes, true)?))
    }

    /// The end of the committed part (everything appended, one voter).
    pub fn high_watermark(&self) -> i64 {
        self.log.high_watermark()
    }

    pub fn start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }

    /// OffsetForLeaderEpoch on this log: the largest epoch <= `epoch` and where it ended
    /// ((-1, -1) for an epoch older than every known one).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.log.end_offset_for_epoch(epoch)
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
