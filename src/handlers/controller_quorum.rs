//! A controller's side of a multi-voter quorum (`raft::voter`): the voters' own requests (Vote,
//! BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot; their Fetch goes through
//! `QuorumController::fetch`), the
//! NOT_CONTROLLER answer of a controller that is not the active one to what brokers send the
//! active one, and DescribeQuorum of a quorum (voters with the leader's view of their progress).
//!
//! Invariants: a voter's request reaches the Raft core only on a voter (elsewhere it is
//! INVALID_REQUEST); a broker's request to an inactive controller changes nothing.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    DescribeQuorumResponse, Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{RequestKind, ResponseKind};

use super::str_bytes;
use crate::controller::quorum::QuorumController;
use crate::raft::leader::ObserverState;
use crate::raft::METADATA_TOPIC_NAME;

/// Answers a voter's request (None: not one).
pub async fn voter_request(controller: &QuorumController, request: &RequestKind) -> Option<ResponseKind> {
    let voter = controller.voter();
    Some(match (request, voter) {
        (RequestKind::Vote(r), Some(v)) => ResponseKind::Vote(v.vote(r).await),
        (RequestKind::BeginQuorumEpoch(r), Some(v)) => ResponseKind::BeginQuorumEpoch(v.begin_quorum_epoch(r).await),
        (RequestKind::EndQuorumEpoch(r), Some(v)) => ResponseKind::EndQuorumEpoch(v.end_quorum_epoch(r).await),
        (RequestKind::FetchSnapshot(r), Some(v)) => ResponseKind::FetchSnapshot(v.fetch_snapshot(r).await),
        // The only voter's snapshots (named in its Fetch answers to observers behind its log start).
        (RequestKind::FetchSnapshot(r), None) => ResponseKind::FetchSnapshot(controller.fetch_single_snapshot(r).await),
        // KIP-853's changes of voters (a controller that is no voter answers UNSUPPORTED_VERSION).
        (RequestKind::AddRaftVoter(r), _) => {
            ResponseKind::AddRaftVoter(super::controller_voters::add(controller, r).await)
        }
        (RequestKind::RemoveRaftVoter(r), _) => {
            ResponseKind::RemoveRaftVoter(super::controller_voters::remove(controller, r).await)
        }
        (RequestKind::UpdateRaftVoter(r), _) => {
            ResponseKind::UpdateRaftVoter(super::controller_voters::update(controller, r).await)
        }
        (RequestKind::Vote(_) | RequestKind::BeginQuorumEpoch(_) | RequestKind::EndQuorumEpoch(_), None) => {
            return super::controller_authz::plain_error(request, ResponseError::InvalidRequest.code());
        }
        _ => return None,
    })
}

/// ControllerRegistration (KIP-919): the active controller writes the registration when it is
/// new or changed.
pub fn register_controller(
    controller: &QuorumController,
    request: &kafka_protocol::messages::ControllerRegistrationRequest,
) -> kafka_protocol::messages::ControllerRegistrationResponse {
    use crate::controller::registration;
    let decided = controller.change(|d| match registration::decide(d.image, request) {
        Ok(records) => (records, Ok(())),
        Err(error) => (Vec::new(), Err(error)),
    });
    let code = match decided {
        Ok(Ok(())) => 0,
        Ok(Err(error)) => error.code(),
        Err(e) if e.downcast_ref::<crate::controller::quorum::NotActive>().is_some() => {
            ResponseError::NotController.code()
        }
        Err(e) => {
            tracing::error!(error = %e, "a controller registration not written");
            ResponseError::UnknownServerError.code()
        }
    };
    if code == 0 {
        tracing::info!(controller = request.controller_id, "controller registered");
    }
    kafka_protocol::messages::ControllerRegistrationResponse::default().with_error_code(code)
}

/// NOT_CONTROLLER for what a broker sends the active controller, when this one is not it.
pub fn not_controller(controller: &QuorumController, request: &RequestKind) -> Option<ResponseKind> {
    use RequestKind as R;
    if !matches!(
        request,
        R::BrokerRegistration(_)
            | R::BrokerHeartbeat(_)
            | R::AlterPartition(_)
            | R::AllocateProducerIds(_)
            | R::AssignReplicasToDirs(_)
    ) || controller.is_active()
    {
        return None;
    }
    super::controller_authz::plain_error(request, ResponseError::NotController.code())
}

/// DescribeQuorum on a voter of a quorum: the leader answers with every voter's progress as it
/// sees it; another voter answers NOT_LEADER_OR_FOLLOWER (Kafka's answer: ask the leader), with
/// the leader it knows of (-1 while it knows none, or while it names itself but does not lead).
pub fn describe(controller: &QuorumController, version: i16) -> Option<DescribeQuorumResponse> {
    let voter = controller.voter()?;
    let status = voter.status.borrow().clone();
    let settings = voter.settings();
    let topic = |partition: PartitionData| {
        vec![TopicData::default()
            .with_topic_name(str_bytes(METADATA_TOPIC_NAME).into())
            .with_partitions(vec![partition])]
    };
    // Its own id as leader is not enough: a voter restarted from a quorum-state naming itself
    // leads nothing until elected again (Kafka's resigned state). Only a leading core reports
    // its voters' progress.
    let progress = voter.progress();
    if status.leader != Some(settings.node_id) || progress.is_empty() {
        let partition = PartitionData::default()
            .with_partition_index(0)
            .with_error_code(ResponseError::NotLeaderOrFollower.code())
            .with_leader_id(status.leader.filter(|&l| l != settings.node_id).unwrap_or(-1).into())
            .with_leader_epoch(status.epoch);
        return Some(DescribeQuorumResponse::default().with_topics(topic(partition)));
    }
    let voters = progress
        .into_iter()
        .map(|p| {
            let caught_up = if p.end >= status.high_watermark as i64 { p.last_fetch_ms } else { -1 };
            ReplicaState::default()
                .with_replica_id(p.id.into())
                .with_replica_directory_id(voter.voter_directory_id(p.id))
                .with_log_end_offset(p.end)
                .with_last_fetch_timestamp(p.last_fetch_ms)
                .with_last_caught_up_timestamp(caught_up)
        })
        .collect();
    // (A voter added was an observer before: listed as a voter only.)
    let mut observers = voter.observers();
    observers.retain(|id, _| !status.voters.contains(id));
    let observers = observer_states(&observers);
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(settings.node_id.into())
        .with_leader_epoch(status.epoch)
        .with_high_watermark(status.high_watermark as i64)
        .with_current_voters(voters)
        .with_observers(observers);
    let mut response = DescribeQuorumResponse::default().with_topics(topic(partition));
    if version >= 2 {
        response.nodes = voter
            .voter_endpoints()
            .iter()
            .map(|(id, e)| {
                Node::default().with_node_id((*id).into()).with_listeners(vec![Listener::default()
                    .with_name(str_bytes(&e.listener))
                    .with_host(str_bytes(&e.host))
                    .with_port(e.port)])
            })
            .collect();
    }
    Some(response)
}

/// DescribeQuorum's observers, as they last fetched.
pub fn observer_states(observers: &std::collections::BTreeMap<i32, ObserverState>) -> Vec<ReplicaState> {
    observers
        .iter()
        .map(|(id, s)| {
            ReplicaState::default()
                .with_replica_id((*id).into())
                .with_replica_directory_id(s.directory_id)
                .with_log_end_offset(s.log_end_offset)
                .with_last_fetch_timestamp(s.last_fetch_ms)
                .with_last_caught_up_timestamp(s.last_caught_up_ms)
        })
        .collect()
}
