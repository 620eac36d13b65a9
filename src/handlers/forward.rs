//! Admin requests a broker of a controller quorum forwards to the active controller (Kafka's
//! `ForwardingManager`): CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders. Without
//! Kafka's Envelope the controller sees this broker's connection, not the client's principal,
//! so this broker authorizes first, as Kafka's controller would (CREATE / DELETE / ALTER on each
//! topic, or on the cluster; ALTER on the cluster for ElectLeaders): refused topics are answered
//! here with TOPIC_AUTHORIZATION_FAILED and only the others are forwarded. The controller's
//! answer is the answer; when it cannot be reached every forwarded topic gets REQUEST_TIMED_OUT,
//! as a Kafka broker whose forwarding times out answers.
//!
//! Invariants: a topic the principal may not change never reaches the controller; every topic
//! of the request gets exactly one answer.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, ElectLeadersRequest, ElectLeadersResponse, TopicName,
};

use crate::node::ControllerLink;
use crate::security::acl;
use crate::security::authorizer::Authz;

const UNREACHABLE: ResponseError = ResponseError::RequestTimedOut;
const REFUSED: ResponseError = ResponseError::TopicAuthorizationFailed;

async fn forward<R: kafka_protocol::protocol::Request>(
    link: &ControllerLink,
    version: i16,
    request: &R,
    what: &str,
) -> Option<R::Response> {
    match link.forward(version, request).await {
        Ok(response) => Some(response),
        Err(e) => {
            tracing::warn!(error = %e, request = what, "forwarding to the controller failed");
            None
        }
    }
}

/// Whether `operation` is allowed on topic `name`, or on the whole cluster.
fn may(authz: &Authz, operation: i8, name: &str) -> bool {
    authz.allows_quietly(operation, acl::CLUSTER, acl::CLUSTER_NAME) || authz.allows(operation, acl::TOPIC, name)
}

pub async fn create_topics(
    link: &ControllerLink,
    authz: &Authz<'_>,
    mut request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let (allowed, refused): (Vec<_>, Vec<_>) =
        std::mem::take(&mut request.topics).into_iter().partition(|t| may(authz, acl::CREATE, t.name.0.as_str()));
    let refused = refused.into_iter().map(|t| {
        CreatableTopicResult::default()
            .with_name(t.name)
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_error_code(REFUSED.code())
            .with_error_message(Some(super::str_bytes("Authorization failed.")))
    });
    request.topics = allowed;
    let answered = match request.topics.is_empty() {
        true => Vec::new(),
        false => match forward(link, version, &request, "CreateTopics").await {
            Some(response) => response.topics,
            None => request
                .topics
                .iter()
                .map(|t| CreatableTopicResult::default().with_name(t.name.clone()).with_error_code(UNREACHABLE.code()))
                .collect(),
        },
    };
    CreateTopicsResponse::default().with_topics(answered.into_iter().chain(refused).collect())
}

pub async fn delete_topics(
    link: &ControllerLink,
    authz: &Authz<'_>,
    mut request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let image = link.image();
    let mut refused = Vec::new();
    if version >= 6 {
        let (allowed, denied): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics).into_iter().partition(|t| {
            let name = t
                .name
                .as_ref()
                .map(|n| n.0.to_string())
                .or_else(|| image.topics.get(&t.topic_id).map(|t| t.name.clone()));
            // An unknown id is the controller's to answer (UNKNOWN_TOPIC_ID).
            name.is_none_or(|n| may(authz, acl::DELETE, &n))
        });
        request.topics = allowed;
        refused.extend(
            denied.into_iter().map(|t| DeletableTopicResult::default().with_name(t.name).with_topic_id(t.topic_id)),
        );
    } else {
        let (allowed, denied): (Vec<TopicName>, Vec<TopicName>) =
            std::mem::take(&mut request.topic_names).into_iter().partition(|n| may(authz, acl::DELETE, n.0.as_str()));
        request.topic_names = allowed;
        refused.extend(denied.into_iter().map(|n| DeletableTopicResult::default().with_name(Some(n))));
    }
    let refused = refused.into_iter().map(|r| r.with_error_code(REFUSED.code()));
    let nothing = request.topics.is_empty() && request.topic_names.is_empty();
    let answered = match nothing {
        true => Vec::new(),
        false => match forward(link, version, &request, "DeleteTopics").await {
            Some(response) => response.responses,
            None => {
                let failed = |r: DeletableTopicResult| r.with_error_code(UNREACHABLE.code());
                let by_state = request
                    .topics
                    .iter()
                    .map(|t| DeletableTopicResult::default().with_name(t.name.clone()).with_topic_id(t.topic_id));
                let by_name =
                    request.topic_names.iter().map(|n| DeletableTopicResult::default().with_name(Some(n.clone())));
                by_state.chain(by_name).map(failed).collect()
            }
        },
    };
    DeleteTopicsResponse::default().with_responses(answered.into_iter().chain(refused).collect())
}

pub async fn create_partitions(
    link: &ControllerLink,
    authz: &Authz<'_>,
    mut request: CreatePartitionsRequest,
    version: i16,
) -> CreatePartitionsResponse {
    let (allowed, refused): (Vec<_>, Vec<_>) =
        std::mem::take(&mut request.topics).into_iter().partition(|t| may(authz, acl::ALTER, t.name.0.as_str()));
    let refused = refused
        .into_iter()
        .map(|t| CreatePartitionsTopicResult::default().with_name(t.name).with_error_code(REFUSED.code()));
    request.topics = allowed;
    let answered = match request.topics.is_empty() {
        true => Vec::new(),
        false => match forward(link, version, &request, "CreatePartitions").await {
            Some(response) => response.results,
            None => request
                .topics
                .iter()
                .map(|t| {
                    CreatePartitionsTopicResult::default().with_name(t.name.clone()).with_error_code(UNREACHABLE.code())
                })
                .collect(),
        },
    };
    CreatePartitionsResponse::default().with_results(answered.into_iter().chain(refused).collect())
}

pub async fn elect_leaders(
    link: &ControllerLink,
    authz: &Authz<'_>,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    if !authz.cluster(acl::ALTER) {
        return ElectLeadersResponse::default().with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    match forward(link, version, &request, "ElectLeaders").await {
        Some(response) => response,
        None => ElectLeadersResponse::default().with_error_code(UNREACHABLE.code()),
    }
}
