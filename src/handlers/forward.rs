//! Admin requests a broker of a controller quorum forwards to the active controller (Kafka's
//! `ForwardingManager`): CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
//! IncrementalAlterConfigs, AlterConfigs, AlterPartitionReassignments and
//! ListPartitionReassignments. Without
//! Kafka's Envelope the controller sees this broker's connection, not the client's principal,
//! so this broker authorizes first, as Kafka's controller would (CREATE / DELETE / ALTER on each
//! topic, or on the cluster; ALTER on the cluster for ElectLeaders and reassignments, DESCRIBE to
//! list them; ALTER_CONFIGS on each config resource, which is first checked as Kafka's
//! `ConfigAdminManager.preprocess` does, `configs.rs`): refused topics are answered
//! here with TOPIC_AUTHORIZATION_FAILED and only the others are forwarded. The controller's
//! answer is the answer; when it cannot be reached every forwarded topic gets REQUEST_TIMED_OUT,
//! as a Kafka broker whose forwarding times out answers, and UNSUPPORTED_VERSION when the
//! controller's ApiVersions does not list the request at its version (Kafka's forwarding checks
//! the controller's versions too).
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

use std::collections::HashMap;

use kafka_protocol::messages::alter_configs_response::{AlterConfigsResourceResponse, AlterConfigsResponse};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{cluster, configs};
use crate::dynconf::Refusal;
use crate::node::ControllerLink;
use crate::security::acl;
use crate::security::authorizer::Authz;

const UNREACHABLE: ResponseError = ResponseError::RequestTimedOut;
const REFUSED: ResponseError = ResponseError::TopicAuthorizationFailed;

/// The controller's answer, or the error every forwarded item gets instead: UNSUPPORTED_VERSION
/// when the controller does not serve the request at this version (as Kafka's forwarding
/// answers), REQUEST_TIMED_OUT when it cannot be reached or does not answer.
async fn forward<R: kafka_protocol::protocol::Request>(
    link: &ControllerLink,
    version: i16,
    request: &R,
    what: &str,
) -> Result<R::Response, ResponseError> {
    match link.forward_if_served(version, request).await {
        Ok(Some(response)) => Ok(response),
        Ok(None) => {
            tracing::info!(request = what, version, "the controller does not serve this request at this version");
            Err(ResponseError::UnsupportedVersion)
        }
        Err(e) => {
            tracing::warn!(error = %e, request = what, "forwarding to the controller failed");
            Err(UNREACHABLE)
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
            Ok(response) => response.topics,
            Err(error) => request
                .topics
                .iter()
                .map(|t| CreatableTopicResult::default().with_name(t.name.clone()).with_error_code(error.code()))
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
            Ok(response) => response.responses,
            Err(error) => {
                let failed = |r: DeletableTopicResult| r.with_error_code(error.code());
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
            Ok(response) => response.results,
            Err(error) => request
                .topics
                .iter()
                .map(|t| CreatePartitionsTopicResult::default().with_name(t.name.clone()).with_error_code(error.code()))
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
        Ok(response) => response,
        Err(error) => ElectLeadersResponse::default().with_error_code(error.code()),
    }
}

/// A config resource (type, name) and the answer for it (error code, message).
type ConfigResource = (i8, StrBytes);
type ConfigAnswer = (i16, Option<StrBytes>);

/// The answer for each resource of a config request, in the request's order: refused here, or
/// the controller's answer for it (matched by type and name, as Kafka's
/// `reassembleIncrementalResponse`), or the forwarding's error (`forward`).
fn reassemble(
    keys: Vec<ConfigResource>,
    checks: Vec<Result<(), Refusal>>,
    answered: Result<HashMap<ConfigResource, ConfigAnswer>, ResponseError>,
) -> Vec<(i8, StrBytes, i16, Option<StrBytes>)> {
    keys.into_iter()
        .zip(checks)
        .map(|(key, check)| {
            let (code, message) = match (check, &answered) {
                (Err(refused), _) => configs::outcome_fields(Err(refused)),
                (Ok(()), Err(error)) => (error.code(), None),
                (Ok(()), Ok(answers)) => answers.get(&key).cloned().unwrap_or_else(|| {
                    tracing::error!(resource = %key.1.as_str(), "the controller returned no answer for a resource");
                    (ResponseError::UnknownServerError.code(), None)
                }),
            };
            (key.0, key.1, code, message)
        })
        .collect()
}

/// Which of a config request's resources passed this broker's checks go to the controller:
/// `resources` takes them out of the request (the others are dropped), `answers` reads the
/// controller's answer. Returns every resource's answer (`reassemble`).
async fn forward_configs<R: kafka_protocol::protocol::Request, T>(
    link: &ControllerLink,
    version: i16,
    checks: Vec<Result<(), Refusal>>,
    mut request: R,
    resources: impl Fn(&mut R) -> &mut Vec<T>,
    key: impl Fn(&T) -> ConfigResource,
    answers: impl FnOnce(R::Response) -> HashMap<ConfigResource, ConfigAnswer>,
) -> Vec<(i8, StrBytes, i16, Option<StrBytes>)> {
    let all = std::mem::take(resources(&mut request));
    let keys = all.iter().map(&key).collect();
    let passed = all.into_iter().zip(&checks).filter(|(_, check)| check.is_ok()).map(|(r, _)| r);
    *resources(&mut request) = passed.collect();
    let answered = match resources(&mut request).is_empty() {
        true => Ok(HashMap::new()),
        false => {
            let what = std::any::type_name::<R>().rsplit("::").next().unwrap_or_default();
            forward(link, version, &request, what).await.map(answers)
        }
    };
    reassemble(keys, checks, answered)
}

/// IncrementalAlterConfigs: `checks` are this broker's preprocessing
/// (`configs::incremental_alter_configs_preprocess`); the resources that passed are forwarded.
pub async fn incremental_alter_configs(
    link: &ControllerLink,
    checks: Vec<Result<(), Refusal>>,
    request: IncrementalAlterConfigsRequest,
    version: i16,
) -> IncrementalAlterConfigsResponse {
    let answered = forward_configs(
        link,
        version,
        checks,
        request,
        |r| &mut r.resources,
        |r| (r.resource_type, r.resource_name.clone()),
        |response| {
            let answers = response.responses.into_iter();
            answers.map(|r| ((r.resource_type, r.resource_name), (r.error_code, r.error_message))).collect()
        },
    )
    .await;
    let responses: Vec<_> = super::config_resource_responses!(IncrementalAlterConfigsResourceResponse, answered);
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Legacy AlterConfigs, the same way (`configs::alter_configs_preprocess`).
pub async fn alter_configs(
    link: &ControllerLink,
    checks: Vec<Result<(), Refusal>>,
    request: AlterConfigsRequest,
    version: i16,
) -> AlterConfigsResponse {
    let answered = forward_configs(
        link,
        version,
        checks,
        request,
        |r| &mut r.resources,
        |r| (r.resource_type, r.resource_name.clone()),
        |response| {
            let answers = response.responses.into_iter();
            answers.map(|r| ((r.resource_type, r.resource_name), (r.error_code, r.error_message))).collect()
        },
    )
    .await;
    let responses: Vec<_> = super::config_resource_responses!(AlterConfigsResourceResponse, answered);
    AlterConfigsResponse::default().with_responses(responses)
}

/// AlterPartitionReassignments: ALTER on the cluster here, then the controller's answer (every
/// partition REQUEST_TIMED_OUT when it cannot be reached).
pub async fn alter_partition_reassignments(
    link: &ControllerLink,
    authz: &Authz<'_>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    if !authz.cluster(acl::ALTER) {
        let (code, message) = super::cluster_denied();
        return cluster::reassignments_refused(&request, code, message);
    }
    match forward(link, version, &request, "AlterPartitionReassignments").await {
        Ok(response) => response,
        Err(error) => cluster::reassignments_refused(&request, error.code(), None),
    }
}

/// ListPartitionReassignments: DESCRIBE on the cluster here, then the controller's answer.
pub async fn list_partition_reassignments(
    link: &ControllerLink,
    authz: &Authz<'_>,
    request: ListPartitionReassignmentsRequest,
    version: i16,
) -> ListPartitionReassignmentsResponse {
    if !authz.cluster(acl::DESCRIBE) {
        let (code, message) = super::cluster_denied();
        return cluster::list_reassignments_refused(&request, code, message);
    }
    match forward(link, version, &request, "ListPartitionReassignments").await {
        Ok(response) => response,
        Err(error) => cluster::list_reassignments_refused(&request, error.code(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: i8, name: &str) -> ConfigResource {
        (kind, StrBytes::from_string(name.to_string()))
    }

    #[test]
    fn config_answers_keep_the_request_order_and_fill_every_resource() {
        let keys = vec![key(2, "a"), key(4, ""), key(2, "b"), key(2, "c")];
        let checks = vec![Ok(()), Err((ResponseError::InvalidRequest, "no".to_string())), Ok(()), Ok(())];
        // The controller answers in another order and forgets "c".
        let answered = HashMap::from([
            (key(2, "b"), (ResponseError::InvalidConfig.code(), Some(StrBytes::from_static_str("bad")))),
            (key(2, "a"), (0, None)),
        ]);
        let out = reassemble(keys.clone(), checks.clone(), Ok(answered));
        let codes: Vec<(&str, i16)> = out.iter().map(|(_, n, code, _)| (n.as_str(), *code)).collect();
        assert_eq!(
            codes,
            vec![
                ("a", 0),
                ("", ResponseError::InvalidRequest.code()),
                ("b", ResponseError::InvalidConfig.code()),
                ("c", ResponseError::UnknownServerError.code()),
            ]
        );
        assert_eq!(out[1].3.as_ref().map(|m| m.as_str()), Some("no"));
        // The controller not reached: the forwarded ones time out, the refused keep their answer.
        let out = reassemble(keys, checks, Err(UNREACHABLE));
        let codes: Vec<i16> = out.iter().map(|(_, _, code, _)| *code).collect();
        let timed_out = UNREACHABLE.code();
        assert_eq!(codes, vec![timed_out, ResponseError::InvalidRequest.code(), timed_out, timed_out]);
    }
}
