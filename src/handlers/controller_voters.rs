//! KIP-853's changes of the controller quorum's voters, on a controller listener:
//! AddRaftVoter and RemoveRaftVoter (`kafka-metadata-quorum add-controller / remove-controller`
//! through an admin client) and UpdateRaftVoter (a voter telling the leader its new endpoints).
//! Thin: the request is checked as Kafka's `KafkaRaftClient` checks it (cluster id, a directory
//! id, an endpoint on the quorum's listener), then the voter's driver decides and writes the
//! change (`raft::voter_changes`) and the answer comes once it is committed.
//!
//! Invariants: nothing is written for a request refused here; a change not committed within
//! the request's timeout is REQUEST_TIMED_OUT (it may still commit, as in Kafka).

use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_raft_voter_response::CurrentLeader;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse, UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::controller::quorum::QuorumController;
use crate::raft::voter::{ChangeOutcome, VoterChange, VoterHandle};
use crate::raft::voters_record::VoterInfo;

/// How long a change waits for its commit when the request names no timeout.
const DEFAULT_TIMEOUT_MS: i32 = 30_000;

type Refusal = (ResponseError, String);

/// The checks before a change: a voter of a dynamic quorum, the same cluster.
fn voter_of(controller: &QuorumController, cluster_id: &Option<StrBytes>, what: &str) -> Result<VoterHandle, Refusal> {
    let Some(voter) = controller.voter() else {
        let message = format!("Cluster doesn't support {what} voter because the kraft.version feature is 0");
        return Err((ResponseError::UnsupportedVersion, message));
    };
    let ours = &controller.settings.cluster_id;
    match cluster_id {
        Some(id) if id.as_str() != ours => Err((
            ResponseError::InconsistentClusterId,
            format!("The given id \"{id}\" doesn't match the cluster id \"{ours}\""),
        )),
        _ => Ok(voter),
    }
}

/// A voter as a request names it, checked: a directory id, an endpoint on the quorum's listener.
fn voter_info(
    voter: &VoterHandle,
    id: i32,
    directory_id: uuid::Uuid,
    endpoints: Vec<(String, String, u16)>,
    what: &str,
) -> Result<VoterInfo, Refusal> {
    if directory_id.is_nil() || id < 0 {
        return Err((ResponseError::InvalidRequest, format!("{what} request didn't include a valid voter")));
    }
    let listener = voter.settings().listener();
    if !endpoints.iter().any(|(name, ..)| name == listener) {
        let shown: Vec<String> = endpoints.iter().map(|(n, h, p)| format!("{n}://{h}:{p}")).collect();
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "{what} request didn't include the endpoint ({}) for the default listener {listener}",
                shown.join(", ")
            ),
        ));
    }
    Ok(VoterInfo { id, directory_id, endpoints })
}

/// The change's outcome within `timeout_ms`.
async fn changed(voter: &VoterHandle, change: VoterChange, timeout_ms: i32) -> ChangeOutcome {
    let timeout_ms = if timeout_ms > 0 { timeout_ms } else { DEFAULT_TIMEOUT_MS };
    match tokio::time::timeout(Duration::from_millis(timeout_ms as u64), voter.change_voters(change)).await {
        Ok(outcome) => outcome,
        Err(_) => {
            Err((ResponseError::RequestTimedOut, "Request timed out waiting for the voter change to commit".into()))
        }
    }
}

fn error_of(outcome: ChangeOutcome) -> (i16, Option<StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        Err((error, message)) => (error.code(), (!message.is_empty()).then(|| str_bytes(&message))),
    }
}

pub async fn add(controller: &QuorumController, request: &AddRaftVoterRequest) -> AddRaftVoterResponse {
    let outcome = async {
        let voter = voter_of(controller, &request.cluster_id, "adding")?;
        let endpoints = request.listeners.iter().map(|l| (l.name.to_string(), l.host.to_string(), l.port)).collect();
        let info = voter_info(&voter, request.voter_id, request.voter_directory_id, endpoints, "Add voter")?;
        changed(&voter, VoterChange::Add(info), request.timeout_ms).await
    };
    let (code, message) = error_of(outcome.await);
    AddRaftVoterResponse::default().with_error_code(code).with_error_message(message)
}

pub async fn remove(controller: &QuorumController, request: &RemoveRaftVoterRequest) -> RemoveRaftVoterResponse {
    let outcome = async {
        let voter = voter_of(controller, &request.cluster_id, "removing")?;
        let (id, directory_id) = (request.voter_id, request.voter_directory_id);
        if directory_id.is_nil() || id < 0 {
            return Err((ResponseError::InvalidRequest, "Remove voter request didn't include a valid voter".into()));
        }
        changed(&voter, VoterChange::Remove { id, directory_id }, DEFAULT_TIMEOUT_MS).await
    };
    let (code, message) = error_of(outcome.await);
    RemoveRaftVoterResponse::default().with_error_code(code).with_error_message(message)
}

/// UpdateRaftVoter: the answer names the leader as this voter knows it (Kafka's
/// `CurrentLeader`, its endpoint on the quorum's listener).
pub async fn update(controller: &QuorumController, request: &UpdateRaftVoterRequest) -> UpdateRaftVoterResponse {
    let outcome = async {
        let voter = voter_of(controller, &request.cluster_id, "updating")?;
        let endpoints = request.listeners.iter().map(|l| (l.name.to_string(), l.host.to_string(), l.port)).collect();
        let info = voter_info(&voter, request.voter_id, request.voter_directory_id, endpoints, "Update voter")?;
        changed(&voter, VoterChange::Update(info), DEFAULT_TIMEOUT_MS).await
    };
    let (code, _) = error_of(outcome.await);
    let mut leader = CurrentLeader::default().with_leader_id((-1).into());
    if let Some(voter) = controller.voter() {
        let status = voter.status.borrow().clone();
        leader = leader.with_leader_epoch(status.epoch);
        if let Some((id, endpoint)) = status.leader.and_then(|id| Some((id, voter.voter_endpoint(id)?))) {
            leader =
                leader.with_leader_id(id.into()).with_host(str_bytes(&endpoint.host)).with_port(endpoint.port.into());
        }
    }
    UpdateRaftVoterResponse::default().with_error_code(code).with_current_leader(leader)
}
