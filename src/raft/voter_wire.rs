//! Kafka 4.1's KRaft messages as the Raft core's (`core::Message`): Vote v2 (KIP-996 pre-votes),
//! BeginQuorumEpoch v1, EndQuorumEpoch v1 and Fetch v17 of `__cluster_metadata` partition 0, each
//! way. Pure: no I/O; the driver (`voter.rs`) sends and receives them.
//!
//! Invariants: a request for another cluster is INCONSISTENT_CLUSTER_ID and never reaches the
//! core; one for another topic or partition is INVALID_REQUEST; a response that does not decode
//! to a message (an error, a malformed answer) gives no message (the core's timeouts retry);
//! records fetched are taken whole-batch only (a torn batch at the end is dropped).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::{
    self, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData as FetchPartitionData,
};
use kafka_protocol::messages::{
    begin_quorum_epoch_request as bqe, begin_quorum_epoch_response as bqe_r, end_quorum_epoch_request as eqe,
    vote_request as vote, vote_response as vote_r, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
    EndQuorumEpochRequest, FetchRequest, FetchResponse, TopicName, VoteRequest, VoteResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::core::{FetchResult, Message, NodeId};
use super::observer::METADATA_TOPIC_ID;
use super::voter_log::Batch;
use super::METADATA_TOPIC_NAME;
use crate::log::batch::Header;

pub const VOTE_VERSION: i16 = 2;
pub const BEGIN_QUORUM_EPOCH_VERSION: i16 = 1;
pub const END_QUORUM_EPOCH_VERSION: i16 = 1;
pub const FETCH_VERSION: i16 = 17;

/// Where a node is reached (its controller listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(METADATA_TOPIC_NAME))
}
fn cluster(cluster_id: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(cluster_id.to_string()))
}
fn other_cluster(asked: &Option<StrBytes>, cluster_id: &str) -> bool {
    asked.as_ref().is_some_and(|id| id.as_str() != cluster_id)
}

// ---- Outgoing requests, and the messages their answers are ----

/// The request carrying `message` from `from` to `to` (a Fetch waits up to `max_wait_ms`).
pub enum Outgoing {
    Vote(VoteRequest),
    Begin(BeginQuorumEpochRequest),
    End(EndQuorumEpochRequest),
    Fetch(FetchRequest),
}

pub fn request(
    cluster_id: &str,
    from: NodeId,
    to: NodeId,
    message: &Message<Batch>,
    endpoint: &Endpoint,
    max_wait_ms: i32,
    directory_id: uuid::Uuid,
) -> Option<Outgoing> {
    Some(match *message {
        Message::Vote { epoch, pre_vote, last_epoch, end_offset } => {
            // A pre-vote is asked in the prospective's own epoch (KIP-996), the core's minus one.
            let partition = vote::PartitionData::default()
                .with_replica_epoch(if pre_vote { epoch - 1 } else { epoch })
                .with_replica_id(from.into())
                .with_last_offset_epoch(last_epoch)
                .with_last_offset(end_offset as i64)
                .with_pre_vote(pre_vote)
                .with_replica_directory_id(directory_id);
            let topic = vote::TopicData::default().with_topic_name(topic_name()).with_partitions(vec![partition]);
            Outgoing::Vote(
                VoteRequest::default()
                    .with_cluster_id(cluster(cluster_id))
                    .with_voter_id(to.into())
                    .with_topics(vec![topic]),
            )
        }
        Message::BeginQuorumEpoch { epoch } => {
            let partition = bqe::PartitionData::default().with_leader_id(from.into()).with_leader_epoch(epoch);
            let topic = bqe::TopicData::default().with_topic_name(topic_name()).with_partitions(vec![partition]);
            let leader = bqe::LeaderEndpoint::default()
                .with_name(StrBytes::from_string(endpoint.listener.clone()))
                .with_host(StrBytes::from_string(endpoint.host.clone()))
                .with_port(endpoint.port);
            Outgoing::Begin(
                BeginQuorumEpochRequest::default()
                    .with_cluster_id(cluster(cluster_id))
                    .with_voter_id(to.into())
                    .with_topics(vec![topic])
                    .with_leader_endpoints(vec![leader]),
            )
        }
        Message::EndQuorumEpoch { epoch } => {
            let partition = eqe::PartitionData::default().with_leader_id(from.into()).with_leader_epoch(epoch);
            let topic = eqe::TopicData::default().with_topic_name(topic_name()).with_partitions(vec![partition]);
            let leader = eqe::LeaderEndpoint::default()
                .with_name(StrBytes::from_string(endpoint.listener.clone()))
                .with_host(StrBytes::from_string(endpoint.host.clone()))
                .with_port(endpoint.port);
            Outgoing::End(
                EndQuorumEpochRequest::default()
                    .with_cluster_id(cluster(cluster_id))
                    .with_topics(vec![topic])
                    .with_leader_endpoints(vec![leader]),
            )
        }
        Message::Fetch { epoch, fetch_offset, last_fetched_epoch, .. } => {
            let partition = FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(epoch)
                .with_fetch_offset(fetch_offset as i64)
                .with_last_fetched_epoch(last_fetched_epoch)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(8 << 20)
                .with_replica_directory_id(directory_id);
            let topic = FetchTopic::default().with_topic_id(METADATA_TOPIC_ID).with_partitions(vec![partition]);
            Outgoing::Fetch(
                FetchRequest::default()
                    .with_cluster_id(cluster(cluster_id))
                    .with_replica_state(ReplicaState::default().with_replica_id(from.into()).with_replica_epoch(-1))
                    .with_max_wait_ms(max_wait_ms)
                    .with_min_bytes(0)
                    .with_max_bytes(8 << 20)
                    .with_topics(vec![topic]),
            )
        }
        _ => return None,
    })
}

fn leader_of(id: i32) -> Option<NodeId> {
    (id >= 0).then_some(id)
}

/// A Vote answer to a request the core made in `asked_epoch`: the voter's epoch and leader
/// (FENCED_LEADER_EPOCH too: it names the newer epoch); a granted pre-vote counts for the epoch
/// the core asked it for.
pub fn vote_answer(response: &VoteResponse, pre_vote: bool, asked_epoch: i32) -> Option<Message<Batch>> {
    if response.error_code != 0 {
        return None;
    }
    let p = response.topics.first()?.partitions.first()?;
    let fenced = p.error_code == ResponseError::FencedLeaderEpoch.code();
    (p.error_code == 0 || fenced).then(|| {
        let granted = p.vote_granted && !fenced;
        let epoch = if pre_vote && granted { asked_epoch } else { p.leader_epoch };
        Message::VoteResponse { epoch, pre_vote, granted, leader: leader_of(p.leader_id.0) }
    })
}

pub fn begin_answer(response: &BeginQuorumEpochResponse) -> Option<Message<Batch>> {
    let p = response.topics.first()?.partitions.first()?;
    (response.error_code == 0).then_some(Message::BeginQuorumEpochResponse { epoch: p.leader_epoch })
}

/// A Fetch answer: the message, and the bytes of the batches it carries (one per entry).
pub fn fetch_answer(response: &FetchResponse, fetch_offset: u64, id: u64) -> Option<(Message<Batch>, Vec<Bytes>)> {
    if response.error_code != 0 {
        return None;
    }
    let p = response.responses.first()?.partitions.first()?;
    let epoch = p.current_leader.leader_epoch;
    let leader = leader_of(p.current_leader.leader_id.0);
    let error = ResponseError::try_from_code(p.error_code);
    let (result, batches) = match error {
        None if p.diverging_epoch.epoch >= 0 => {
            let d = &p.diverging_epoch;
            (FetchResult::Diverging { epoch: d.epoch, end_offset: d.end_offset.max(0) as u64 }, Vec::new())
        }
        // (Kafka's follower ignores an answer with only one of the two set.)
        None if p.snapshot_id.end_offset >= 0 || p.snapshot_id.epoch >= 0 => {
            let id = &p.snapshot_id;
            if id.end_offset <= 0 || id.epoch < 0 {
                return None;
            }
            (FetchResult::Snapshot { end_offset: id.end_offset as u64, epoch: id.epoch }, Vec::new())
        }
        None => {
            let (start, entries) = split_batches(p.records.clone().unwrap_or_default(), fetch_offset, epoch);
            let batches = entries.iter().map(|(_, _, b)| b.clone()).collect();
            let mut values = Vec::with_capacity(entries.len());
            for (epoch, _, bytes) in &entries {
                // (A VotersRecord that does not decode makes the whole answer unusable.)
                match Batch::of(bytes) {
                    Ok(batch) => values.push(super::core::Entry { epoch: *epoch, value: Some(batch) }),
                    Err(e) => {
                        tracing::warn!(error = %e, "a fetched metadata batch does not decode");
                        return None;
                    }
                }
            }
            let entries = values;
            let high_watermark = (p.high_watermark >= 0).then_some(p.high_watermark as u64);
            (FetchResult::Records { start, entries, high_watermark }, batches)
        }
        Some(
            ResponseError::FencedLeaderEpoch | ResponseError::NotLeaderOrFollower | ResponseError::UnknownLeaderEpoch,
        ) => (FetchResult::NotLeader, Vec::new()),
        Some(_) => return None,
    };
    Some((Message::FetchResponse { epoch, leader, result, id }, batches))
}

/// Whole batches of `records`: (where the first starts, (epoch, record count, bytes) each). As a
/// follower copies (Kafka's `appendAsFollower`, and KAFKA-18723's valid prefix): the batches up to
/// the first that is not whole (a size limit cut it: fetched again), fails its integrity check
/// (`batch::check_replicated`), does not follow the one before it, or carries an epoch going
/// back or past the leader's `leader_epoch`; such a batch is logged and it and the rest are left
/// out, so the core never sees it and the voter carries on (it fetches from there again).
fn split_batches(records: Bytes, fetch_offset: u64, leader_epoch: i32) -> (u64, Vec<(i32, u64, Bytes)>) {
    let mut out: Vec<(i32, u64, Bytes)> = Vec::new();
    let mut at = 0;
    let mut start = None;
    let mut next: Option<i64> = None;
    while records.len() - at >= crate::log::batch::HEADER_BYTES {
        let total = Header::new(&records[at..]).total_bytes();
        if total > (records.len() - at) as i64 {
            break; // cut by the size limit
        }
        let bytes = records.slice(at..(at as i64 + total.max(0)) as usize);
        let refused = match crate::log::batch::check_replicated(&bytes) {
            Err(e) => Some(e.to_string()),
            Ok(_) => {
                let header = Header::new(&bytes);
                let epoch = header.leader_epoch();
                if next.is_some_and(|n| header.base_offset() != n) || header.base_offset() < 0 {
                    Some(format!("batch at offset {} does not follow the one before it", header.base_offset()))
                } else if (leader_epoch >= 0 && epoch > leader_epoch)
                    || out.last().is_some_and(|(before, _, _)| epoch < *before)
                {
                    Some(format!(
                        "batch at offset {} of epoch {epoch} in an answer of epoch {leader_epoch}",
                        header.base_offset()
                    ))
                } else {
                    None
                }
            }
        };
        if let Some(why) = refused {
            tracing::warn!(offset = fetch_offset, batches_kept = out.len(), reason = %why,
                "invalid metadata batch in a fetch from the leader: left out, fetched again");
            break;
        }
        at += bytes.len();
        let header = Header::new(&bytes);
        let count = (header.last_offset() - header.base_offset() + 1) as u64;
        start.get_or_insert(header.base_offset() as u64);
        next = Some(header.last_offset() + 1);
        out.push((header.leader_epoch(), count, bytes));
    }
    (start.unwrap_or(fetch_offset), out)
}

// ---- Incoming requests as messages, and the responses to them ----

/// A Vote request: (candidate, message), or the error to answer with.
pub fn vote_in(request: &VoteRequest, cluster_id: &str) -> Result<(NodeId, Message<Batch>), ResponseError> {
    if other_cluster(&request.cluster_id, cluster_id) {
        return Err(ResponseError::InconsistentClusterId);
    }
    let p = single(&request.topics, |t| (&t.topic_name, &t.partitions))?;
    Ok((
        p.replica_id.0,
        Message::Vote {
            // (The core counts a pre-vote in the epoch it would lead: one past the asker's.)
            epoch: if p.pre_vote { p.replica_epoch + 1 } else { p.replica_epoch },
            pre_vote: p.pre_vote,
            last_epoch: p.last_offset_epoch,
            end_offset: p.last_offset.max(0) as u64,
        },
    ))
}

fn single<'a, T, P: HasIndex>(
    topics: &'a [T],
    parts: impl Fn(&'a T) -> (&'a TopicName, &'a Vec<P>),
) -> Result<&'a P, ResponseError> {
    match topics {
        [topic] => match parts(topic) {
            (name, partitions) if name.0.as_str() == METADATA_TOPIC_NAME => match partitions.as_slice() {
                [p] if p.index() == 0 => Ok(p),
                _ => Err(ResponseError::InvalidRequest),
            },
            _ => Err(ResponseError::InvalidRequest),
        },
        _ => Err(ResponseError::InvalidRequest),
    }
}

trait HasIndex {
    fn index(&self) -> i32;
}
impl HasIndex for vote::PartitionData {
    fn index(&self) -> i32 {
        self.partition_index
    }
}
impl HasIndex for bqe::PartitionData {
    fn index(&self) -> i32 {
        self.partition_index
    }
}
impl HasIndex for eqe::PartitionData {
    fn index(&self) -> i32 {
        self.partition_index
    }
}

/// The answer to a Vote: granted or not, with this voter's epoch (`epoch`) and leader.
pub fn vote_out(message: Option<&Message<Batch>>, epoch: i32, error: Option<ResponseError>) -> VoteResponse {
    let mut partition = vote_r::PartitionData::default().with_leader_id((-1).into());
    match (message, error) {
        (_, Some(error)) => return VoteResponse::default().with_error_code(error.code()),
        (Some(Message::VoteResponse { granted, leader, .. }), None) => {
            partition = partition
                .with_leader_epoch(epoch)
                .with_vote_granted(*granted)
                .with_leader_id(leader.unwrap_or(-1).into());
        }
        _ => return VoteResponse::default().with_error_code(ResponseError::UnknownServerError.code()),
    }
    let topic = vote_r::TopicData::default().with_topic_name(topic_name()).with_partitions(vec![partition]);
    VoteResponse::default().with_topics(vec![topic])
}

/// A BeginQuorumEpoch request: (leader, message).
pub fn begin_in(
    request: &BeginQuorumEpochRequest,
    cluster_id: &str,
) -> Result<(NodeId, Message<Batch>), ResponseError> {
    if other_cluster(&request.cluster_id, cluster_id) {
        return Err(ResponseError::InconsistentClusterId);
    }
    let p = single(&request.topics, |t| (&t.topic_name, &t.partitions))?;
    Ok((p.leader_id.0, Message::BeginQuorumEpoch { epoch: p.leader_epoch }))
}

/// The answer to a BeginQuorumEpoch or EndQuorumEpoch: this node's epoch and leader after it.
pub fn begin_out(epoch: i32, leader: Option<NodeId>, error: Option<ResponseError>) -> BeginQuorumEpochResponse {
    if let Some(error) = error {
        return BeginQuorumEpochResponse::default().with_error_code(error.code());
    }
    let partition =
        bqe_r::PartitionData::default().with_leader_id(leader.unwrap_or(-1).into()).with_leader_epoch(epoch);
    let topic = bqe_r::TopicData::default().with_topic_name(topic_name()).with_partitions(vec![partition]);
    BeginQuorumEpochResponse::default().with_topics(vec![topic])
}

/// An EndQuorumEpoch request: (leader, message).
pub fn end_in(request: &EndQuorumEpochRequest, cluster_id: &str) -> Result<(NodeId, Message<Batch>), ResponseError> {
    if other_cluster(&request.cluster_id, cluster_id) {
        return Err(ResponseError::InconsistentClusterId);
    }
    let p = single(&request.topics, |t| (&t.topic_name, &t.partitions))?;
    Ok((p.leader_id.0, Message::EndQuorumEpoch { epoch: p.leader_epoch }))
}

/// A Fetch of the metadata log: (replica, message, max_wait_ms).
pub fn fetch_in(request: &FetchRequest, cluster_id: &str) -> Result<(NodeId, Message<Batch>, i32), ResponseError> {
    if other_cluster(&request.cluster_id, cluster_id) {
        return Err(ResponseError::InconsistentClusterId);
    }
    let p = match (request.topics.as_slice(), request.topics.first().map(|t| t.partitions.as_slice())) {
        ([topic], Some([p])) if topic.topic_id == METADATA_TOPIC_ID && p.partition == 0 => p,
        _ => return Err(ResponseError::InvalidRequest),
    };
    if p.fetch_offset < 0 || (p.fetch_offset > 0 && p.last_fetched_epoch < 0) {
        return Err(ResponseError::InvalidRequest);
    }
    let message = Message::Fetch {
        epoch: p.current_leader_epoch,
        fetch_offset: p.fetch_offset as u64,
        last_fetched_epoch: p.last_fetched_epoch.max(0),
        id: 0,
    };
    Ok((request.replica_state.replica_id.0, message, request.max_wait_ms))
}

/// The leader a Fetch answer names, with its endpoint (NodeEndpoints, on `listener`), if both.
pub fn leader_endpoint(response: &FetchResponse, listener: &str) -> Option<(NodeId, Endpoint)> {
    let p = response.responses.first()?.partitions.first()?;
    let leader = p.current_leader.leader_id.0;
    let node = response.node_endpoints.iter().find(|n| n.node_id.0 == leader && leader >= 0)?;
    let port = u16::try_from(node.port).ok()?;
    Some((leader, Endpoint { listener: listener.to_string(), host: node.host.to_string(), port }))
}

/// The answer to a Fetch: `message` (the core's), the bytes of the batches it names, the epoch
/// the fetch was for (the error when not this node's), the leader's endpoint.
pub fn fetch_out(
    message: Result<&Message<Batch>, ResponseError>,
    records: Bytes,
    asked_epoch: i32,
    leader_endpoint: Option<(NodeId, &Endpoint)>,
) -> FetchResponse {
    let mut response = FetchResponse::default();
    if let Some((id, e)) = leader_endpoint {
        response.node_endpoints = vec![NodeEndpoint::default()
            .with_node_id(id.into())
            .with_host(StrBytes::from_string(e.host.clone()))
            .with_port(e.port as i32)];
    }
    let message = match message {
        Ok(message) => message,
        Err(error) => return response.with_error_code(error.code()),
    };
    let Message::FetchResponse { epoch, leader, result, .. } = message else {
        return response.with_error_code(ResponseError::UnknownServerError.code());
    };
    let mut p = FetchPartitionData::default().with_partition_index(0).with_current_leader(
        LeaderIdAndEpoch::default().with_leader_id(leader.unwrap_or(-1).into()).with_leader_epoch(*epoch),
    );
    match result {
        FetchResult::Records { high_watermark, .. } => {
            p.high_watermark = high_watermark.map_or(-1, |hw| hw as i64);
            p.records = Some(records);
        }
        FetchResult::Diverging { epoch, end_offset } => {
            p.diverging_epoch = EpochEndOffset::default().with_epoch(*epoch).with_end_offset(*end_offset as i64);
        }
        FetchResult::Snapshot { end_offset, epoch } => {
            p.snapshot_id =
                fetch_response::SnapshotId::default().with_end_offset(*end_offset as i64).with_epoch(*epoch);
        }
        FetchResult::NotLeader => {
            p.error_code = match asked_epoch.cmp(epoch) {
                std::cmp::Ordering::Less => ResponseError::FencedLeaderEpoch,
                std::cmp::Ordering::Greater => ResponseError::UnknownLeaderEpoch,
                std::cmp::Ordering::Equal => ResponseError::NotLeaderOrFollower,
            }
            .code();
        }
    }
    let topic = FetchableTopicResponse::default().with_topic_id(METADATA_TOPIC_ID).with_partitions(vec![p]);
    response.with_responses(vec![topic])
}

#[cfg(test)]
#[path = "voter_wire_tests.rs"]
mod tests;
