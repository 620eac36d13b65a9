//! Admin requests a broker of a controller quorum forwards to the active controller (Kafka's
//! `ForwardingManager`, without its Envelope: the controller sees this broker's connection):
//! DeleteTopics, CreatePartitions and ElectLeaders here (CreateTopics in `create_topics.rs`).
//! The controller's answer is the answer; when it cannot be reached every topic or partition
//! gets REQUEST_TIMED_OUT, as a Kafka broker whose forwarding times out answers.
//!
//! Not yet: ACLs checked before forwarding (the controller does not authorize requests it gets
//! without an Envelope).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest,
    ElectLeadersResponse,
};

use crate::node::ControllerLink;

const UNREACHABLE: ResponseError = ResponseError::RequestTimedOut;

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

pub async fn delete_topics(link: &ControllerLink, request: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    if let Some(response) = forward(link, version, &request, "DeleteTopics").await {
        return response;
    }
    let failed = |r: DeletableTopicResult| r.with_error_code(UNREACHABLE.code());
    let responses = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| failed(DeletableTopicResult::default().with_name(t.name).with_topic_id(t.topic_id)))
            .collect()
    } else {
        request.topic_names.into_iter().map(|n| failed(DeletableTopicResult::default().with_name(Some(n)))).collect()
    };
    DeleteTopicsResponse::default().with_responses(responses)
}

pub async fn create_partitions(
    link: &ControllerLink,
    request: CreatePartitionsRequest,
    version: i16,
) -> CreatePartitionsResponse {
    if let Some(response) = forward(link, version, &request, "CreatePartitions").await {
        return response;
    }
    let results = request
        .topics
        .into_iter()
        .map(|t| CreatePartitionsTopicResult::default().with_name(t.name).with_error_code(UNREACHABLE.code()))
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

pub async fn elect_leaders(link: &ControllerLink, request: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    match forward(link, version, &request, "ElectLeaders").await {
        Some(response) => response,
        None => ElectLeadersResponse::default().with_error_code(UNREACHABLE.code()),
    }
}
