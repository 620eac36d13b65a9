//! The APIs a controller-only Ketch node serves on its controller listener (Kafka's
//! `ControllerApis`): the metadata log's Fetch for brokers (observers), DescribeQuorum,
//! ApiVersions, the brokers' own requests to the active controller, and the admin requests a
//! controller serves (topics, elections, config changes, feature levels, SCRAM credentials, ACLs,
//! delegation tokens: directly from `--bootstrap-controller`
//! clients or forwarded by brokers). Thin: each request goes to
//! `controller::quorum::QuorumController` and the decision functions it writes with.
//!
//! Invariants: versions outside `SERVED` never reach a handler (the decoder refuses them); a
//! request the controller cannot serve yet gets Kafka's error for it, never a dropped
//! connection.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{ApiVersionsResponse, SupportedFeatureKey};
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_quorum_response::DescribeQuorumResponse;
use kafka_protocol::messages::{
    AllocateProducerIdsResponse, AlterPartitionResponse, ApiKey, AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, DescribeClusterRequest, DescribeClusterResponse, EnvelopeRequest, EnvelopeResponse,
    RequestKind, ResponseKind,
};

use super::api_versions::{finalized_features, unsupported_version_of, version_table};
use super::controller_admin;
use super::controller_authz::{self, Caller};
use super::controller_configs;
use super::controller_describe_configs;
use super::controller_reassign;
use super::controller_topics::create_topics;
use super::str_bytes;
use crate::controller::quorum::QuorumController;
use crate::controller::{alter_partition, producer_ids};
use crate::node::envelope;
use crate::protocol::{self, DecodedRequest, ProtocolError};
use crate::raft::leader::LeaderEndpoint;

/// (API, lowest, highest version) a controller serves.
pub const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Fetch, 13, 17),
    // The leader's snapshots, for voters and brokers behind its log start (KIP-630).
    (ApiKey::FetchSnapshot, 0, 1),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::DescribeQuorum, 0, 2),
    (ApiKey::DescribeCluster, 1, 2),
    (ApiKey::Envelope, 0, 0),
    (ApiKey::BrokerRegistration, 0, 4),
    (ApiKey::BrokerHeartbeat, 0, 1),
    (ApiKey::AlterPartition, alter_partition::LOWEST_VERSION, 3),
    (ApiKey::AllocateProducerIds, 0, 0),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::AssignReplicasToDirs, 0, 0),
    (ApiKey::CreateAcls, 2, 3),
    (ApiKey::DeleteAcls, 2, 3),
    (ApiKey::DescribeAcls, 2, 3),
    (ApiKey::CreateDelegationToken, 1, 3),
    (ApiKey::RenewDelegationToken, 1, 2),
    (ApiKey::ExpireDelegationToken, 1, 2),
    // A voter's requests to the other voters (KIP-595, KIP-996 pre-votes at Vote v2).
    (ApiKey::Vote, 0, 2),
    (ApiKey::BeginQuorumEpoch, 0, 1),
    (ApiKey::EndQuorumEpoch, 0, 1),
    // KIP-853: changes of a dynamic quorum's voters (`kafka-metadata-quorum add-controller`...).
    (ApiKey::AddRaftVoter, 0, 0),
    (ApiKey::RemoveRaftVoter, 0, 0),
    (ApiKey::UpdateRaftVoter, 0, 0),
    // KIP-919: controllers register with the active one (Kafka's and Ketch's alike).
    (ApiKey::ControllerRegistration, 0, 0),
    // SASL controller listeners (`server::controller`: the authenticator sees these first); as
    // Kafka's ControllerApis, listed on every controller listener.
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

pub fn is_served(api_key: ApiKey, version: i16) -> bool {
    SERVED.iter().any(|(k, min, max)| *k == api_key && (*min..=*max).contains(&version))
}

/// The listener a request came in on, as the controller names itself there.
#[derive(Debug, Clone)]
pub struct ControllerListener {
    pub name: String,
    pub protocol: crate::config::SecurityProtocol,
    pub endpoint: LeaderEndpoint,
}

/// Serves one request, received on `connection` (an id unique to the connection: the
/// controller fences a broker whose heartbeat connection closed, see `controller::brokers`).
pub async fn handle(
    controller: &QuorumController,
    listener: &ControllerListener,
    request: DecodedRequest,
    connection: (u64, std::net::SocketAddr),
    (principal, token_authenticated): (&str, bool),
) -> ResponseKind {
    let (id, peer) = connection;
    let client_id = request.header.client_id.as_ref().map(|c| c.as_str().to_string());
    let caller = Caller { principal: principal.to_string(), token_authenticated, client_id, address: peer.ip() };
    match request.body {
        RequestKind::Envelope(envelope) => {
            // Only a broker may forward (Kafka's `handleEnvelopeRequest`).
            if !caller.authz(controller).cluster(crate::security::acl::CLUSTER_ACTION) {
                let refused = ResponseError::ClusterAuthorizationFailed.code();
                return ResponseKind::Envelope(EnvelopeResponse::default().with_error_code(refused));
            }
            // A voter that is not the active controller: the broker sends it again to the active one.
            if !controller.is_active() {
                let code = ResponseError::NotController.code();
                return ResponseKind::Envelope(EnvelopeResponse::default().with_error_code(code));
            }
            ResponseKind::Envelope(forwarded(controller, listener, envelope).await)
        }
        _ => handle_direct(controller, listener, request, Some(id), &caller).await,
    }
}

/// The APIs a broker may forward in an Envelope (Kafka's `ApiKeys.forwardable`).
fn forwardable(api_key: ApiKey) -> bool {
    use ApiKey::*;
    matches!(
        api_key,
        CreateTopics
            | DeleteTopics
            | CreateAcls
            | DeleteAcls
            | AlterConfigs
            | CreatePartitions
            | CreateDelegationToken
            | RenewDelegationToken
            | ExpireDelegationToken
            | ElectLeaders
            | IncrementalAlterConfigs
            | AlterPartitionReassignments
            | ListPartitionReassignments
            | AlterClientQuotas
            | AlterUserScramCredentials
            | DescribeQuorum
            | UpdateFeatures
            | UnregisterBroker
            | AllocateProducerIds
            | AddRaftVoter
            | RemoveRaftVoter
    )
}

/// A request a broker forwarded (Kafka's `ForwardingManager`, `EnvelopeUtils`): the client's
/// principal (PRINCIPAL_DESERIALIZATION_FAILURE when it does not decode) and address
/// (INVALID_REQUEST), then the inner request, whole with its header, decoded as if it came in
/// directly (guard first; UNSUPPORTED_VERSION when it does not decode or is not served here)
/// and answered whole with its header inside the EnvelopeResponse. An API Kafka does not forward
/// (a nested Envelope among them) is INVALID_REQUEST on the envelope.
async fn forwarded(
    controller: &QuorumController,
    listener: &ControllerListener,
    envelope: EnvelopeRequest,
) -> EnvelopeResponse {
    let refused = |error: ResponseError| EnvelopeResponse::default().with_error_code(error.code());
    let (principal, token_authenticated) = match envelope.request_principal.as_deref().map(envelope::decode_principal) {
        Some(Ok(principal)) => principal,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "a forwarded request's principal does not decode");
            return refused(ResponseError::PrincipalDeserializationFailure);
        }
        None => return refused(ResponseError::PrincipalDeserializationFailure),
    };
    let address = match envelope::decode_address(&envelope.client_host_address) {
        Ok(address) => address,
        Err(e) => {
            tracing::debug!(error = %e, "a forwarded request's client address does not decode");
            return refused(ResponseError::InvalidRequest);
        }
    };
    if let [high, low, ..] = envelope.request_data[..] {
        if ApiKey::try_from(i16::from_be_bytes([high, low])).is_ok_and(|key| !forwardable(key)) {
            return refused(ResponseError::InvalidRequest);
        }
    }
    let inner = match protocol::decode_served_request(envelope.request_data, is_served) {
        Ok(inner) => inner,
        Err(ProtocolError::UnsupportedVersion { .. } | ProtocolError::UnknownApiKey(_)) => {
            return refused(ResponseError::UnsupportedVersion)
        }
        Err(e) => {
            tracing::debug!(error = %e, "forwarded request refused");
            return refused(ResponseError::InvalidRequest);
        }
    };
    let (api_key, version, correlation_id) = (inner.api_key, inner.version, inner.header.correlation_id);
    let client_id = inner.header.client_id.as_ref().map(|c| c.as_str().to_string());
    let caller = Caller { principal, token_authenticated, client_id, address };
    let body = handle_direct(controller, listener, inner, None, &caller).await;
    match protocol::encode_response(api_key, version, correlation_id, &body) {
        // Without the length prefix: the envelope's bytes field has its own length.
        Ok(frame) => EnvelopeResponse::default().with_response_data(Some(frame.freeze().slice(4..))),
        Err(e) => {
            tracing::warn!(error = %e, ?api_key, "encoding a forwarded request's response");
            refused(ResponseError::UnknownServerError)
        }
    }
}

async fn handle_direct(
    controller: &QuorumController,
    listener: &ControllerListener,
    request: DecodedRequest,
    connection: Option<u64>,
    caller: &Caller,
) -> ResponseKind {
    let version = request.version;
    let authz = caller.authz(controller);
    let arrival = super::controller_tokens::Arrival { protocol: listener.protocol, forwarded: connection.is_none() };
    if let Some(refused) = controller_authz::refused_whole(&authz, &request.body, version) {
        return refused;
    }
    if let Some(answer) = super::controller_quorum::not_controller(controller, &request.body) {
        return answer;
    }
    if let Some(answer) = super::controller_quorum::voter_request(controller, &request.body).await {
        return answer;
    }
    // The request's `controller_mutation_rate` quota, strict from the version `strict_since` on.
    let quota = |strict_since: i16| controller.mutation_quota(&caller.client(), version >= strict_since);
    match request.body {
        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(api_versions(controller)),
        RequestKind::Fetch(fetch) => ResponseKind::Fetch(controller.fetch(&fetch, &listener.endpoint).await),
        RequestKind::DescribeQuorum(_) => ResponseKind::DescribeQuorum(describe_quorum(controller, listener, version)),
        RequestKind::DescribeCluster(r) => ResponseKind::DescribeCluster(describe_cluster(controller, listener, &r)),
        RequestKind::BrokerRegistration(r) => ResponseKind::BrokerRegistration(register(controller, &r)),
        RequestKind::BrokerHeartbeat(r) => ResponseKind::BrokerHeartbeat(heartbeat(controller, &r, connection)),
        RequestKind::AlterPartition(r) => {
            let config = controller.settings.config;
            let answer = controller.change(|d| alter_partition::alter_partition(d.image, &config, &r, version));
            ResponseKind::AlterPartition(written("AlterPartition", answer, |error| {
                AlterPartitionResponse::default().with_error_code(error.code())
            }))
        }
        RequestKind::CreateTopics(r) => {
            ResponseKind::CreateTopics(create_topics(controller, &authz, r, version, quota(6)))
        }
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(controller_admin::delete_topics(controller, &authz, r, version, quota(5)))
        }
        RequestKind::CreatePartitions(r) => {
            ResponseKind::CreatePartitions(controller_admin::create_partitions(controller, &authz, r, quota(3)))
        }
        RequestKind::ElectLeaders(r) => ResponseKind::ElectLeaders(controller_admin::elect_leaders(controller, r)),
        RequestKind::IncrementalAlterConfigs(r) => {
            ResponseKind::IncrementalAlterConfigs(controller_configs::incremental_alter_configs(controller, &authz, r))
        }
        RequestKind::AlterConfigs(r) => {
            ResponseKind::AlterConfigs(controller_configs::alter_configs(controller, &authz, r))
        }
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(controller_describe_configs::describe_configs(controller, &authz, r, version))
        }
        RequestKind::AlterPartitionReassignments(r) => {
            ResponseKind::AlterPartitionReassignments(controller_reassign::alter(controller, &r))
        }
        RequestKind::ListPartitionReassignments(r) => {
            ResponseKind::ListPartitionReassignments(controller_reassign::list(controller, &r))
        }
        RequestKind::UpdateFeatures(r) => {
            ResponseKind::UpdateFeatures(super::controller_features::update_features(controller, &r, version))
        }
        RequestKind::AlterUserScramCredentials(r) => ResponseKind::AlterUserScramCredentials(
            super::controller_scram::alter_user_scram_credentials(controller, &r),
        ),
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(super::controller_quotas::alter_client_quotas(controller, &r))
        }
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(super::controller_acls::create(controller, r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(super::controller_acls::delete(controller, r)),
        RequestKind::DescribeAcls(r) => ResponseKind::DescribeAcls(super::controller_acls::describe(controller, r)),
        RequestKind::CreateDelegationToken(r) => ResponseKind::CreateDelegationToken(super::controller_tokens::create(
            controller, caller, arrival, &r, version,
        )),
        RequestKind::RenewDelegationToken(r) => {
            ResponseKind::RenewDelegationToken(super::controller_tokens::renew(controller, caller, arrival, &r))
        }
        RequestKind::ExpireDelegationToken(r) => {
            ResponseKind::ExpireDelegationToken(super::controller_tokens::expire(controller, caller, arrival, &r))
        }
        RequestKind::AssignReplicasToDirs(r) => {
            ResponseKind::AssignReplicasToDirs(assign_replicas_to_dirs(controller, &r))
        }
        RequestKind::ControllerRegistration(r) => {
            ResponseKind::ControllerRegistration(super::controller_quorum::register_controller(controller, &r))
        }
        RequestKind::AllocateProducerIds(r) => {
            let answer = controller.change(|d| producer_ids::allocate_producer_ids(d.image, &r));
            ResponseKind::AllocateProducerIds(written("AllocateProducerIds", answer, |error| {
                AllocateProducerIdsResponse::default().with_error_code(error.code())
            }))
        }
        // Authentication is the connection's; these arrive only where none is going on.
        RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(super::sasl::handshake_after_authentication()),
        RequestKind::SaslAuthenticate(_) => {
            ResponseKind::SaslAuthenticate(super::sasl::authenticate_after_authentication())
        }
        other => unreachable!("the decoder only passes served APIs, not {:?}", other),
    }
}

/// ApiVersions: the controller's table and the finalized features of its image.
pub fn api_versions(controller: &QuorumController) -> ApiVersionsResponse {
    let image = controller.image();
    // What this controller supports (`kafka-features describe` shows it next to the levels).
    let supported = crate::node::lifecycle::SUPPORTED_FEATURES
        .iter()
        .map(|(name, min, max)| {
            SupportedFeatureKey::default().with_name(str_bytes(name)).with_min_version(*min).with_max_version(*max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_api_keys(version_table(SERVED))
        .with_supported_features(supported)
        .with_finalized_features_epoch(image.offset.max(0))
        .with_finalized_features(finalized_features(&image.features))
}

/// KIP-511: an ApiVersions at a version this controller does not know.
pub fn unsupported_api_versions() -> ApiVersionsResponse {
    unsupported_version_of(SERVED)
}

/// DescribeQuorum: this node is the only voter and the leader; observers as last fetched.
fn describe_quorum(
    controller: &QuorumController,
    listener: &ControllerListener,
    version: i16,
) -> DescribeQuorumResponse {
    if let Some(answer) = super::controller_quorum::describe(controller, version) {
        return answer;
    }
    let (epoch, high_watermark, observers) = controller.quorum();
    let observers = super::controller_quorum::observer_states(&observers);
    let endpoint = &listener.endpoint;
    let at = (listener.name.as_str(), endpoint.host.as_str(), endpoint.port);
    super::describe_quorum::answer(controller.settings.config.node_id, epoch, high_watermark, observers, at, version)
}

/// Kafka's `DescribeClusterRequest` endpoint type for controllers.
const CONTROLLER_ENDPOINT: i8 = 2;

/// DescribeCluster on a controller (`bootstrap.controllers` admin clients): the controller
/// quorum's nodes, this one.
fn describe_cluster(
    controller: &QuorumController,
    listener: &ControllerListener,
    request: &DescribeClusterRequest,
) -> DescribeClusterResponse {
    let node_id = controller.settings.config.node_id;
    let response = DescribeClusterResponse::default()
        .with_endpoint_type(CONTROLLER_ENDPOINT)
        .with_cluster_id(str_bytes(&controller.settings.cluster_id))
        .with_controller_id(node_id.into())
        .with_cluster_authorized_operations(i32::MIN);
    if request.endpoint_type != CONTROLLER_ENDPOINT {
        return response.with_error_code(ResponseError::MismatchedEndpointType.code()).with_error_message(Some(
            str_bytes(
                "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER",
            ),
        ));
    }
    if let Some(voter) = controller.voter() {
        // A quorum's voters, and the leader as the controller (admin clients send it what only
        // the active controller answers, DescribeQuorum among them). With no leader known, no
        // controller either (Kafka lists the controllers its image registered: none before a
        // leader), so the client asks its bootstrap servers again rather than wait for none.
        let Some(leader) = voter.status.borrow().leader else {
            return response.with_controller_id((-1).into());
        };
        // The registered controllers' endpoints on this listener (Kafka's answer), and voters not
        // registered yet where this node's configuration says they are.
        let image = controller.image();
        let mut nodes: std::collections::BTreeMap<i32, (String, u16)> =
            voter.voter_endpoints().into_iter().map(|(id, e)| (id, (e.host, e.port))).collect();
        for (id, registration) in &image.controllers {
            if let Some(e) = registration.end_points.iter().find(|e| e.name == listener.name) {
                nodes.insert(*id, (e.host.clone(), e.port));
            }
        }
        let nodes = nodes.into_iter().map(|(id, (host, port))| {
            DescribeClusterBroker::default()
                .with_broker_id(id.into())
                .with_host(str_bytes(&host))
                .with_port(port as i32)
        });
        return response.with_controller_id(leader.into()).with_brokers(nodes.collect());
    }
    response.with_brokers(vec![DescribeClusterBroker::default()
        .with_broker_id(node_id.into())
        .with_host(str_bytes(&listener.endpoint.host))
        .with_port(listener.endpoint.port as i32)])
}

/// BrokerRegistration: a fenced registration whose broker epoch is its record's offset.
fn register(controller: &QuorumController, request: &BrokerRegistrationRequest) -> BrokerRegistrationResponse {
    let cluster_id = controller.settings.cluster_id.clone();
    let decided =
        controller.change(|d| match d.sessions.register(d.image, &cluster_id, request, d.next_offset, d.now_ms) {
            Ok((records, epoch)) => (records, Ok(epoch)),
            Err(refusal) => (Vec::new(), Err(refusal)),
        });
    match decided {
        Ok(Ok(epoch)) => {
            tracing::info!(broker = request.broker_id.0, epoch, "broker registered");
            BrokerRegistrationResponse::default().with_broker_epoch(epoch)
        }
        Ok(Err((error, message))) => {
            tracing::info!(broker = request.broker_id.0, ?error, %message, "broker registration refused");
            BrokerRegistrationResponse::default().with_error_code(error.code()).with_broker_epoch(-1)
        }
        Err(e) => written("BrokerRegistration", Err(e), |error| {
            BrokerRegistrationResponse::default().with_error_code(error.code()).with_broker_epoch(-1)
        }),
    }
}

/// BrokerHeartbeat: the broker's session, and the fencing, unfencing or controlled shutdown it
/// moves the broker to.
fn heartbeat(
    controller: &QuorumController,
    request: &BrokerHeartbeatRequest,
    connection: Option<u64>,
) -> BrokerHeartbeatResponse {
    let decided =
        controller.change(|d| match d.sessions.heartbeat(d.image, request, connection, d.next_offset, d.now_ms) {
            Ok((records, answer)) => (records, Ok(answer)),
            Err(error) => (Vec::new(), Err(error)),
        });
    match decided {
        Ok(Ok(answer)) => BrokerHeartbeatResponse::default()
            .with_is_caught_up(answer.is_caught_up)
            .with_is_fenced(answer.is_fenced)
            .with_should_shut_down(answer.should_shut_down),
        Ok(Err(error)) => BrokerHeartbeatResponse::default().with_error_code(error.code()).with_is_fenced(true),
        Err(e) => written("BrokerHeartbeat", Err(e), |error| {
            BrokerHeartbeatResponse::default().with_error_code(error.code()).with_is_fenced(true)
        }),
    }
}

/// AssignReplicasToDirs: the directories a broker holds its replicas in.
fn assign_replicas_to_dirs(
    controller: &QuorumController,
    request: &AssignReplicasToDirsRequest,
) -> AssignReplicasToDirsResponse {
    let config = controller.settings.config;
    let decided = controller.change(|d| {
        match crate::controller::directories::assign_replicas_to_dirs(d.image, &config, request) {
            Ok((records, response)) => (records, Ok(response)),
            Err(error) => (Vec::new(), Err(error)),
        }
    });
    let refused = |error: ResponseError| AssignReplicasToDirsResponse::default().with_error_code(error.code());
    match decided {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => refused(error),
        Err(e) => written("AssignReplicasToDirs", Err(e), refused),
    }
}

/// The answer of a change, or `failed`'s (UNKNOWN_SERVER_ERROR) when its records could not be
/// written (the metadata log's directory failed). Every controller handler answers that case
/// through this.
pub(super) fn written<T>(what: &str, answer: anyhow::Result<T>, failed: impl FnOnce(ResponseError) -> T) -> T {
    answer.unwrap_or_else(|e| {
        if e.downcast_ref::<crate::controller::quorum::NotActive>().is_some() {
            return failed(ResponseError::NotController);
        }
        tracing::error!(error = %e, request = what, "metadata records not written");
        failed(ResponseError::UnknownServerError)
    })
}

#[cfg(test)]
#[path = "controller_apis_tests.rs"]
mod tests;
