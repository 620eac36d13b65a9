//! FetchSnapshot (API 59, v0-1, KIP-630) both ways: the request a follower or an observer sends
//! for a chunk of the leader's snapshot, reading a chunk out of the answer, and the leader's
//! answer (Kafka's `KafkaRaftClient.handleFetchSnapshotRequest`): the cluster id and the one
//! partition of `__cluster_metadata` checked, the asker's epoch against the leader's
//! (FENCED_LEADER_EPOCH below it, UNKNOWN_LEADER_EPOCH above, NOT_LEADER_OR_FOLLOWER when not
//! leading), SNAPSHOT_NOT_FOUND for a snapshot this leader does not have (and for the bootstrap
//! one, 0-0), POSITION_OUT_OF_RANGE outside the file; otherwise up to `MaxBytes` raw bytes from
//! `Position` (they may cut a batch) with the snapshot's size. Every answer names the leader.
//!
//! Invariants: the position is echoed exactly, the snapshot id is the one asked for, and a chunk
//! never reaches past the file; reads are bounded by `MAX_CHUNK_BYTES` whatever is asked.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_snapshot_request::{self, PartitionSnapshot, TopicSnapshot};
use kafka_protocol::messages::fetch_snapshot_response::{self as response, LeaderIdAndEpoch};
use kafka_protocol::messages::{FetchSnapshotRequest, FetchSnapshotResponse};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::snapshot::{self, Download, SnapshotId};
use super::METADATA_TOPIC_NAME;
use crate::metadata::records::MetadataRecord;
use crate::node::client::Connection;

/// The version asked for (Kafka 4.1's highest).
pub const FETCH_SNAPSHOT_VERSION: i16 = 1;
/// What a fetcher asks per chunk (Kafka's `MAX_FETCH_SIZE_BYTES`).
pub const FETCH_MAX_BYTES: i32 = 8 << 20;
/// The most a leader sends per chunk, whatever is asked.
const MAX_CHUNK_BYTES: i32 = 8 << 20;

/// A FetchSnapshot for the chunk of snapshot `id` at `position`.
pub fn request(
    cluster_id: &str,
    replica_id: i32,
    leader_epoch: i32,
    id: SnapshotId,
    position: i64,
    directory_id: Uuid,
) -> FetchSnapshotRequest {
    let partition = PartitionSnapshot::default()
        .with_partition(0)
        .with_current_leader_epoch(leader_epoch)
        .with_snapshot_id(
            fetch_snapshot_request::SnapshotId::default().with_end_offset(id.end_offset).with_epoch(id.epoch),
        )
        .with_position(position)
        .with_replica_directory_id(directory_id);
    FetchSnapshotRequest::default()
        .with_cluster_id(Some(StrBytes::from_string(cluster_id.to_string())))
        .with_replica_id(replica_id.into())
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_topics(vec![TopicSnapshot::default()
            .with_name(StrBytes::from_static_str(METADATA_TOPIC_NAME).into())
            .with_partitions(vec![partition])])
}

/// Why a chunk did not come.
#[derive(Debug)]
pub enum ChunkError {
    /// The asked node does not lead this epoch (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
    /// UNKNOWN_LEADER_EPOCH): find the leader again with a Fetch.
    NotLeader(i16),
    Failed(anyhow::Error),
}

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChunkError::NotLeader(code) => write!(f, "FetchSnapshot: no longer the leader (error {code})"),
            ChunkError::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// The chunk an answer carries for snapshot `id`: (snapshot size, position, bytes).
pub fn chunk(response: &FetchSnapshotResponse, id: SnapshotId) -> Result<(i64, i64, Bytes), ChunkError> {
    let failed = |e: anyhow::Error| Err(ChunkError::Failed(e));
    if response.error_code != 0 {
        return failed(anyhow::anyhow!("FetchSnapshot refused with error {}", response.error_code));
    }
    let Some(partition) = response
        .topics
        .iter()
        .filter(|t| t.name.as_str() == METADATA_TOPIC_NAME)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.index == 0)
    else {
        return failed(anyhow::anyhow!("FetchSnapshot response without partition 0 of the metadata topic"));
    };
    match partition.error_code {
        0 => {}
        code @ (6 | 74 | 75) => return Err(ChunkError::NotLeader(code)),
        // SNAPSHOT_NOT_FOUND (98): deleted meanwhile; a Fetch names the leader's newer one.
        code => return failed(anyhow::anyhow!("FetchSnapshot of {id:?} failed with error {code}")),
    }
    let got = SnapshotId { end_offset: partition.snapshot_id.end_offset, epoch: partition.snapshot_id.epoch };
    if got != id {
        return failed(anyhow::anyhow!("FetchSnapshot answered with snapshot {got:?} for {id:?}"));
    }
    Ok((partition.size, partition.position, partition.unaligned_records.clone()))
}

/// Downloads snapshot `id` from the leader at `addr` into `dir` over a connection of its own;
/// returns its records once complete, durable and read back whole.
#[allow(clippy::too_many_arguments)]
pub async fn download(
    addr: &str,
    security: &std::sync::Arc<crate::security::client::ClientSecurity>,
    timeout: Duration,
    dir: &Path,
    cluster_id: &str,
    replica_id: i32,
    leader_epoch: i32,
    id: SnapshotId,
) -> anyhow::Result<Vec<MetadataRecord>> {
    let mut conn = Connection::connect(addr, "raft-snapshot", timeout, security).await?;
    let mut download = Download::begin(dir, id)?;
    while !download.done() {
        let ask = request(cluster_id, replica_id, leader_epoch, id, download.position, Uuid::nil());
        let answer = tokio::time::timeout(timeout, conn.send(FETCH_SNAPSHOT_VERSION, &ask, Duration::ZERO))
            .await
            .map_err(|_| anyhow::anyhow!("FetchSnapshot timed out"))??;
        let (size, position, bytes) = chunk(&answer, id).map_err(|e| anyhow::anyhow!("{e}"))?;
        download.write(size, position, &bytes)?;
    }
    download.finish()
}

/// What the leader knows when it answers: the cluster, its epoch and leader, whether it leads.
pub struct LeaderView<'a> {
    pub cluster_id: &'a str,
    pub epoch: i32,
    pub leader: Option<i32>,
    pub leading: bool,
}

/// The leader's answer to a FetchSnapshot, from the snapshots in `dir`.
pub fn serve(request: &FetchSnapshotRequest, view: &LeaderView, dir: &Path) -> FetchSnapshotResponse {
    let top = |error: ResponseError| FetchSnapshotResponse::default().with_error_code(error.code());
    if request.cluster_id.as_ref().is_some_and(|c| !c.is_empty() && c.as_str() != view.cluster_id) {
        return top(ResponseError::InconsistentClusterId);
    }
    let (topic, asked) = match request.topics.as_slice() {
        [t] if t.partitions.len() == 1 => (t, &t.partitions[0]),
        _ => return top(ResponseError::InvalidRequest),
    };
    let leader =
        LeaderIdAndEpoch::default().with_leader_id(view.leader.unwrap_or(-1).into()).with_leader_epoch(view.epoch);
    let id = SnapshotId { end_offset: asked.snapshot_id.end_offset, epoch: asked.snapshot_id.epoch };
    let mut partition = response::PartitionSnapshot::default()
        .with_index(asked.partition)
        .with_current_leader(leader)
        .with_snapshot_id(response::SnapshotId::default().with_end_offset(id.end_offset).with_epoch(id.epoch))
        .with_position(asked.position);
    let error = if topic.name.as_str() != METADATA_TOPIC_NAME || asked.partition != 0 {
        Some(ResponseError::UnknownTopicOrPartition)
    } else if asked.current_leader_epoch < view.epoch {
        Some(ResponseError::FencedLeaderEpoch)
    } else if asked.current_leader_epoch > view.epoch {
        Some(ResponseError::UnknownLeaderEpoch)
    } else if !view.leading {
        Some(ResponseError::NotLeaderOrFollower)
    } else {
        None
    };
    let result = match error {
        Some(error) => Err(error),
        None => read(dir, id, asked.position, request.max_bytes),
    };
    match result {
        Ok((size, bytes)) => {
            partition.size = size;
            partition.unaligned_records = bytes;
        }
        Err(error) => partition.error_code = error.code(),
    }
    let topic = response::TopicSnapshot::default().with_name(topic.name.clone()).with_partitions(vec![partition]);
    FetchSnapshotResponse::default().with_topics(vec![topic])
}

/// (size, up to `max_bytes` from `position`) of snapshot `id`, or the error Kafka answers.
fn read(dir: &Path, id: SnapshotId, position: i64, max_bytes: i32) -> Result<(i64, Bytes), ResponseError> {
    if id.end_offset <= 0 || id.epoch < 0 {
        return Err(ResponseError::SnapshotNotFound);
    }
    let size = snapshot::size(dir, id).map_err(|_| ResponseError::SnapshotNotFound)? as i64;
    if position < 0 || position >= size {
        return Err(ResponseError::PositionOutOfRange);
    }
    let want = max_bytes.clamp(1, MAX_CHUNK_BYTES) as usize;
    // (A snapshot deleted meanwhile: the fetcher asks its Fetch again, which names a newer one.)
    let bytes = snapshot::read_chunk(dir, id, position as u64, want).map_err(|_| ResponseError::SnapshotNotFound)?;
    Ok((size, Bytes::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(leading: bool) -> LeaderView<'static> {
        LeaderView { cluster_id: "c", epoch: 5, leader: Some(1), leading }
    }

    fn answer(response: &FetchSnapshotResponse) -> (i16, i16, i64, usize) {
        let p = &response.topics[0].partitions[0];
        (response.error_code, p.error_code, p.size, p.unaligned_records.len())
    }

    #[test]
    fn a_leader_serves_its_snapshot_in_chunks_and_refuses_what_kafka_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let records: Vec<MetadataRecord> = (0..50)
            .map(|i| {
                MetadataRecord::Topic(crate::metadata::records::TopicRecord {
                    name: format!("t{i}"),
                    ..Default::default()
                })
            })
            .collect();
        let id = SnapshotId { end_offset: 60, epoch: 5 };
        let size = snapshot::write(dir.path(), id, &records, None, (0, 0)).unwrap() as i64;
        let ask = |epoch: i32, id: SnapshotId, position: i64| {
            let mut r = request("c", 2, epoch, id, position, Uuid::nil());
            r.max_bytes = 100;
            r
        };
        let mut got = Vec::new();
        while (got.len() as i64) < size {
            let response = serve(&ask(5, id, got.len() as i64), &view(true), dir.path());
            let (s, position, bytes) = chunk(&response, id).unwrap();
            assert_eq!((s, position), (size, got.len() as i64));
            assert!(bytes.len() <= 100);
            got.extend_from_slice(&bytes);
        }
        assert_eq!(got, std::fs::read(dir.path().join(id.file_name())).unwrap());

        let code = |e: ResponseError| e.code();
        let r = serve(&ask(4, id, 0), &view(true), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::FencedLeaderEpoch));
        let r = serve(&ask(6, id, 0), &view(true), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::UnknownLeaderEpoch));
        let r = serve(&ask(5, id, 0), &view(false), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::NotLeaderOrFollower));
        assert!(matches!(chunk(&r, id), Err(ChunkError::NotLeader(6))));
        let r = serve(&ask(5, SnapshotId { end_offset: 61, epoch: 5 }, 0), &view(true), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::SnapshotNotFound));
        let r = serve(&ask(5, SnapshotId { end_offset: 0, epoch: 0 }, 0), &view(true), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::SnapshotNotFound));
        let r = serve(&ask(5, id, size), &view(true), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::PositionOutOfRange));
        let r = serve(&ask(5, id, -1), &view(true), dir.path());
        assert_eq!(answer(&r).1, code(ResponseError::PositionOutOfRange));
        let mut other = ask(5, id, 0);
        other.cluster_id = Some(StrBytes::from_static_str("other"));
        assert_eq!(serve(&other, &view(true), dir.path()).error_code, code(ResponseError::InconsistentClusterId));
        let mut two = ask(5, id, 0);
        two.topics.push(two.topics[0].clone());
        assert_eq!(serve(&two, &view(true), dir.path()).error_code, code(ResponseError::InvalidRequest));
    }
}
