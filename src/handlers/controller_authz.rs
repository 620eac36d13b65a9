//! Authorization on a Ketch controller, as Kafka's `ControllerApis` does it when an authorizer
//! is configured (`authorizer.class.name`: Kafka's StandardAuthorizer, deciding with the ACLs of
//! the controller's metadata image, `super.users`, `allow.everyone.if.no.acl.found`). The caller
//! is the connection's (a controller listener is PLAINTEXT: `User:ANONYMOUS`, from its address)
//! or, for a request a broker forwarded, the client in the Envelope; the forwarding broker itself
//! needs CLUSTER_ACTION for the Envelope.
//!
//! Refused whole, CLUSTER_AUTHORIZATION_FAILED, without the cluster operation Kafka asks for:
//! CLUSTER_ACTION for the brokers' own APIs (the metadata log's Fetch, BrokerRegistration,
//! BrokerHeartbeat, AlterPartition, AllocateProducerIds, AssignReplicasToDirs); ALTER for
//! ElectLeaders, AlterPartitionReassignments, UpdateFeatures, AlterUserScramCredentials,
//! CreateAcls, DeleteAcls and (on a controller) DescribeCluster; ALTER_CONFIGS for
//! AlterClientQuotas; DESCRIBE for DescribeQuorum, ListPartitionReassignments and DescribeAcls.
//! Per topic (`controller_topics`, `controller_admin`): CREATE (CreateTopics), DELETE and
//! DESCRIBE (DeleteTopics), ALTER (CreatePartitions), each on the topic or the whole cluster.
//! Per config resource (`controller_configs`, `controller_describe_configs`): ALTER_CONFIGS /
//! DESCRIBE_CONFIGS on the cluster (BROKER, BROKER_LOGGER, CLIENT_METRICS) or on the topic or group.
//!
//! Invariant: a check reads the controller's image (its ACLs), so none runs inside
//! `QuorumController::change`.

use std::net::IpAddr;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AllocateProducerIdsResponse, AlterPartitionResponse, AssignReplicasToDirsResponse, BrokerHeartbeatResponse,
    BrokerRegistrationResponse, DescribeAclsResponse, DescribeClusterResponse, DescribeQuorumResponse,
    ElectLeadersResponse, FetchResponse, RequestKind, ResponseKind, UpdateFeaturesResponse,
};

use super::cluster::{list_reassignments_refused, reassignments_refused};
use crate::controller::quorum::QuorumController;
use crate::security::acl;
use crate::security::authorizer::Authz;

/// Who a request is from: the connection's client, or the client a broker forwarded it for (the
/// Envelope's principal and address, the inner header's client id).
pub struct Caller {
    pub principal: String,
    /// Whether the principal logged in with a delegation token.
    pub token_authenticated: bool,
    pub client_id: Option<String>,
    pub address: IpAddr,
}

impl Caller {
    /// The client of this caller's `controller_mutation_rate` quota.
    pub fn client(&self) -> crate::quota::Client<'_> {
        crate::quota::Client::of(&self.principal, self.client_id.as_deref())
    }

    /// What this caller may do on `controller`.
    pub fn authz<'a>(&'a self, controller: &'a QuorumController) -> Authz<'a> {
        controller.authz(&self.principal, self.address)
    }
}

/// The cluster operation Kafka's controller requires for `request` as a whole, if any.
fn cluster_operation(request: &RequestKind) -> Option<i8> {
    use RequestKind as R;
    Some(match request {
        R::Fetch(_)
        | R::FetchSnapshot(_)
        | R::Vote(_)
        | R::BeginQuorumEpoch(_)
        | R::EndQuorumEpoch(_)
        | R::ControllerRegistration(_)
        | R::BrokerRegistration(_)
        | R::BrokerHeartbeat(_)
        | R::AlterPartition(_)
        | R::AllocateProducerIds(_)
        | R::AssignReplicasToDirs(_)
        | R::UpdateRaftVoter(_)
        | R::Envelope(_) => acl::CLUSTER_ACTION,
        R::ElectLeaders(_)
        | R::AlterPartitionReassignments(_)
        | R::UpdateFeatures(_)
        | R::AlterUserScramCredentials(_)
        | R::CreateAcls(_)
        | R::DeleteAcls(_)
        | R::AddRaftVoter(_)
        | R::RemoveRaftVoter(_)
        // Unlike a broker, a controller asks ALTER for DescribeCluster (Kafka's comment).
        | R::DescribeCluster(_) => acl::ALTER,
        R::AlterClientQuotas(_) => acl::ALTER_CONFIGS,
        R::DescribeQuorum(_) | R::ListPartitionReassignments(_) | R::DescribeAcls(_) => acl::DESCRIBE,
        _ => return None,
    })
}

/// Kafka's answer to `request` when `authz` lacks the cluster operation it needs: the request's
/// error response with CLUSTER_AUTHORIZATION_FAILED. `None` when it may go on. (An Envelope is
/// answered by the caller, with the error on the envelope.)
pub fn refused_whole(authz: &Authz, request: &RequestKind, version: i16) -> Option<ResponseKind> {
    let operation = cluster_operation(request)?;
    if authz.cluster(operation) {
        return None;
    }
    let (code, message) = super::cluster_denied();
    let message_from = |since: i16| if version >= since { message.clone() } else { None };
    let text = message.as_ref().map(|m| m.to_string());
    if let Some(refused) = plain_error(request, code) {
        return Some(refused);
    }
    use RequestKind as R;
    Some(match request {
        R::ElectLeaders(_) => ResponseKind::ElectLeaders(ElectLeadersResponse::default().with_error_code(code)),
        R::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(reassignments_refused(r, code, message.clone()))
        }
        R::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(list_reassignments_refused(r, code, message.clone()))
        }
        R::UpdateFeatures(_) => ResponseKind::UpdateFeatures(
            UpdateFeaturesResponse::default().with_error_code(code).with_error_message(message.clone()),
        ),
        R::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(super::sasl::alter_refused(r, code, text.clone()))
        }
        R::AlterClientQuotas(r) => ResponseKind::AlterClientQuotas(super::quotas::alter_refused(
            r,
            ResponseError::ClusterAuthorizationFailed,
            text.clone(),
        )),
        R::CreateAcls(r) => ResponseKind::CreateAcls(super::acls::creations_refused(r, code, message.clone())),
        R::DeleteAcls(r) => ResponseKind::DeleteAcls(super::acls::deletions_refused(r, code, message.clone())),
        R::DescribeAcls(_) => ResponseKind::DescribeAcls(
            DescribeAclsResponse::default().with_error_code(code).with_error_message(message),
        ),
        R::DescribeCluster(_) => ResponseKind::DescribeCluster(
            DescribeClusterResponse::default().with_error_code(code).with_error_message(message),
        ),
        R::AddRaftVoter(_) => ResponseKind::AddRaftVoter(
            kafka_protocol::messages::AddRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message.clone()),
        ),
        R::RemoveRaftVoter(_) => ResponseKind::RemoveRaftVoter(
            kafka_protocol::messages::RemoveRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message.clone()),
        ),
        R::DescribeQuorum(_) => ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default().with_error_code(code).with_error_message(message_from(2)),
        ),
        _ => return None,
    })
}

/// The answer to one of the cluster's internal APIs with nothing but a top-level error code (None
/// for another API).
pub fn plain_error(request: &RequestKind, code: i16) -> Option<ResponseKind> {
    use kafka_protocol::messages::{
        BeginQuorumEpochResponse, ControllerRegistrationResponse, EndQuorumEpochResponse, VoteResponse,
    };
    use RequestKind as R;
    Some(match request {
        R::Fetch(_) => ResponseKind::Fetch(FetchResponse::default().with_error_code(code)),
        R::FetchSnapshot(_) => ResponseKind::FetchSnapshot(
            kafka_protocol::messages::FetchSnapshotResponse::default().with_error_code(code),
        ),
        R::Vote(_) => ResponseKind::Vote(VoteResponse::default().with_error_code(code)),
        R::BeginQuorumEpoch(_) => {
            ResponseKind::BeginQuorumEpoch(BeginQuorumEpochResponse::default().with_error_code(code))
        }
        R::EndQuorumEpoch(_) => ResponseKind::EndQuorumEpoch(EndQuorumEpochResponse::default().with_error_code(code)),
        R::UpdateRaftVoter(_) => ResponseKind::UpdateRaftVoter(
            kafka_protocol::messages::UpdateRaftVoterResponse::default().with_error_code(code),
        ),
        R::ControllerRegistration(_) => {
            ResponseKind::ControllerRegistration(ControllerRegistrationResponse::default().with_error_code(code))
        }
        R::BrokerRegistration(_) => {
            ResponseKind::BrokerRegistration(BrokerRegistrationResponse::default().with_error_code(code))
        }
        R::BrokerHeartbeat(_) => {
            ResponseKind::BrokerHeartbeat(BrokerHeartbeatResponse::default().with_error_code(code))
        }
        R::AlterPartition(_) => ResponseKind::AlterPartition(AlterPartitionResponse::default().with_error_code(code)),
        R::AllocateProducerIds(_) => {
            ResponseKind::AllocateProducerIds(AllocateProducerIdsResponse::default().with_error_code(code))
        }
        R::AssignReplicasToDirs(_) => {
            ResponseKind::AssignReplicasToDirs(AssignReplicasToDirsResponse::default().with_error_code(code))
        }
        _ => return None,
    })
}

#[cfg(test)]
#[path = "controller_authz_tests.rs"]
mod tests;
