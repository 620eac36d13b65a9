//! Admin requests a broker of a controller quorum forwards to the active controller (Kafka's
//! `ForwardingManager`): CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders,
//! IncrementalAlterConfigs, AlterConfigs, AlterPartitionReassignments,
//! ListPartitionReassignments, UpdateFeatures, AlterUserScramCredentials and AlterClientQuotas, in
//! Kafka's Envelope (`node::envelope`: the controller sees the client's principal, address and
//! client id, and holds it to its `controller_mutation_rate`; the controller's `throttle_time_ms`
//! stays in the answer, which mutes the client). A Ketch controller does not authorize config
//! resources yet (`controller_authz`), so this broker authorizes every request first, as Kafka's
//! controller would (CREATE / DELETE / ALTER on each
//! topic, or on the cluster; ALTER on the cluster for ElectLeaders, reassignments and feature
//! updates and SCRAM credentials, ALTER_CONFIGS on the cluster for client quotas, DESCRIBE to
//! list them; ALTER_CONFIGS on each config resource, which is first checked as Kafka's
//! `ConfigAdminManager.preprocess` does, `configs.rs`): refused topics are answered
//! here with TOPIC_AUTHORIZATION_FAILED and only the others are forwarded. The controller's
//! answer is the answer; when it cannot be reached every forwarded topic gets REQUEST_TIMED_OUT,
//! as a Kafka broker whose forwarding times out answers, and UNSUPPORTED_VERSION when the
//! controller's ApiVersions does not list the request at its version (Kafka's forwarding checks
//! the controller's versions too). A CreateTopics is answered once this broker has applied the
//! topics it created (bounded by the request's timeout), so a client can use them here at once.
//!
//! Invariants: a topic the principal may not change never reaches the controller; every topic
//! of the request gets exactly one answer.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, ElectLeadersRequest, ElectLeadersResponse, TopicName,
};

use std::collections::HashMap;
use std::time::Duration;

use uuid::Uuid;

use kafka_protocol::messages::alter_configs_response::{AlterConfigsResourceResponse, AlterConfigsResponse};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterConfigsRequest, AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse, AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
    UpdateFeaturesRequest, UpdateFeaturesResponse,
};
use kafka_protocol::protocol::{Request, StrBytes};

use super::{cluster, configs, create_topics};
use crate::dynconf::Refusal;
use crate::metadata::image::MetadataImage;
use crate::node::{EnvelopeError, Forwarder};
use crate::security::acl;
use crate::security::authorizer::Authz;

const UNREACHABLE: ResponseError = ResponseError::RequestTimedOut;
const REFUSED: ResponseError = ResponseError::TopicAuthorizationFailed;

/// The controller's answer, or the error every forwarded item gets instead: UNSUPPORTED_VERSION
/// when the controller does not serve the request at this version (as Kafka's forwarding
/// answers), REQUEST_TIMED_OUT when it cannot be reached or does not answer.
async fn forward<R: Request>(link: &Forwarder<'_>, version: i16, request: &R) -> Result<R::Response, ResponseError>
where
    R::Response: Throttled,
{
    let what = std::any::type_name::<R>().rsplit("::").next().unwrap_or_default().trim_end_matches("Request");
    match link.forward_if_served(version, request).await {
        Ok(Some(response)) => {
            link.throttled(response.throttle_ms());
            Ok(response)
        }
        Ok(None) => {
            tracing::info!(request = what, version, "the controller does not serve this request at this version");
            Err(ResponseError::UnsupportedVersion)
        }
        Err(e) => match e.downcast_ref::<EnvelopeError>() {
            // Kafka's forwarding answers a controller's envelope error (its principal serde or
            // its authorization of this broker) UNKNOWN_SERVER_ERROR, not the error itself.
            Some(EnvelopeError(error)) => {
                tracing::warn!(?error, request = what, "the controller refused the forwarded envelope");
                Err(if *error == ResponseError::UnsupportedVersion {
                    *error
                } else {
                    ResponseError::UnknownServerError
                })
            }
            None => {
                tracing::warn!(error = %e, request = what, "forwarding to the controller failed");
                Err(UNREACHABLE)
            }
        },
    }
}

/// The responses this broker forwards, with the controller's `throttle_time_ms` (its
/// `controller_mutation_rate` quota of the client): kept in the answer this broker rebuilds,
/// which mutes the client's connection for that long, as Kafka's `sendForwardedResponse`.
pub(super) trait Throttled {
    fn throttle_ms(&self) -> i32;
}

macro_rules! throttled {
    ($($response:ty),* $(,)?) => {
        $(impl Throttled for $response {
            fn throttle_ms(&self) -> i32 {
                self.throttle_time_ms
            }
        })*
    };
}

throttled!(
    CreateTopicsResponse,
    DeleteTopicsResponse,
    CreatePartitionsResponse,
    ElectLeadersResponse,
    AlterConfigsResponse,
    IncrementalAlterConfigsResponse,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    UpdateFeaturesResponse,
    AlterUserScramCredentialsResponse,
    AlterClientQuotasResponse,
    kafka_protocol::messages::CreateAclsResponse,
    kafka_protocol::messages::DeleteAclsResponse,
    kafka_protocol::messages::CreateDelegationTokenResponse,
    kafka_protocol::messages::RenewDelegationTokenResponse,
    kafka_protocol::messages::ExpireDelegationTokenResponse,
);

impl Throttled for kafka_protocol::messages::DescribeQuorumResponse {
    fn throttle_ms(&self) -> i32 {
        0 // DescribeQuorum has no throttle time
    }
}

/// The shape of a forwarded request answered per resource: the resources `allowed` here are
/// forwarded (the request keeps only them; nothing is sent when none is), the others are
/// `answer`ed REFUSED. Returns the controller's answers (`answers`), or each forwarded
/// resource `answer`ed with the forwarding's error, then the refused ones.
async fn forward_allowed<R: Request, T, A>(
    link: &Forwarder<'_>,
    version: i16,
    mut request: R,
    resources: impl Fn(&mut R) -> &mut Vec<T>,
    allowed: impl FnMut(&T) -> bool,
    answer: impl Fn(&T, ResponseError) -> A,
    answers: impl FnOnce(R::Response) -> Vec<A>,
) -> Vec<A>
where
    R::Response: Throttled,
{
    let (passed, denied): (Vec<T>, Vec<T>) = std::mem::take(resources(&mut request)).into_iter().partition(allowed);
    *resources(&mut request) = passed;
    let answered = match resources(&mut request).is_empty() {
        true => Vec::new(),
        false => match forward(link, version, &request).await {
            Ok(response) => answers(response),
            Err(error) => resources(&mut request).iter().map(|t| answer(t, error)).collect(),
        },
    };
    answered.into_iter().chain(denied.iter().map(|t| answer(t, REFUSED))).collect()
}

/// The shape of a forwarded request answered as a whole: the controller's answer, or
/// `failed`'s with the forwarding's error (the caller authorized first).
pub(super) async fn forward_whole<R: Request>(
    link: &Forwarder<'_>,
    version: i16,
    request: &R,
    failed: impl FnOnce(ResponseError) -> R::Response,
) -> R::Response
where
    R::Response: Throttled,
{
    forward(link, version, request).await.unwrap_or_else(failed)
}

pub async fn create_topics(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let (validate_only, timeout_ms) = (request.validate_only, request.timeout_ms);
    let topics = forward_allowed(
        link,
        version,
        request,
        |r| &mut r.topics,
        |t| authz.cluster_or_topic(acl::CREATE, t.name.0.as_str()),
        |t, error| match error {
            REFUSED => create_topics::error_result(&t.name, error, "Authorization failed.".to_string()),
            _ => CreatableTopicResult::default().with_name(t.name.clone()).with_error_code(error.code()),
        },
        |response| response.topics,
    )
    .await;
    if !validate_only {
        let created: Vec<_> =
            topics.iter().filter(|t| t.error_code == 0).map(|t| (t.name.0.to_string(), t.topic_id)).collect();
        await_created(link, &created, timeout_ms).await;
    }
    CreateTopicsResponse::default().with_topics(topics).with_throttle_time_ms(link.throttle_ms())
}

/// The longest a CreateTopics waits for this broker to apply the topics it created.
const CREATED_WAIT_CAP: Duration = Duration::from_secs(30);

/// Waits (the request's timeout at most, and `CREATED_WAIT_CAP`) until this broker serves the
/// topics a forwarded CreateTopics created: the controller answers once their records are
/// committed, before this broker has applied them, and a client going on at once would get
/// UNKNOWN_TOPIC_ID / UNKNOWN_TOPIC_OR_PARTITION here. Kafka's broker answers at once (its
/// clients retry); waiting costs one metadata round trip. Past the wait the answer goes as is.
/// `created`: (name, id) of each, the id nil before v7 (then the name is looked for).
async fn await_created(link: &Forwarder<'_>, created: &[(String, Uuid)], timeout_ms: i32) {
    if created.is_empty() {
        return;
    }
    let timeout = Duration::from_millis(timeout_ms.max(0) as u64).min(CREATED_WAIT_CAP);
    let applied = |image: &MetadataImage| {
        created.iter().all(|(name, id)| match id.is_nil() {
            true => image.topic(name).is_some(),
            false => image.topics.contains_key(id),
        })
    };
    if !link.wait_applied(timeout, applied).await {
        tracing::info!(topics = ?created, ?timeout, "created topics not applied here within the request's timeout");
    }
}

pub async fn delete_topics(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let responses = if version >= 6 {
        let image = link.image();
        let allowed = |t: &DeleteTopicState| {
            let name = t
                .name
                .as_ref()
                .map(|n| n.0.to_string())
                .or_else(|| image.topics.get(&t.topic_id).map(|t| t.name.clone()));
            // An unknown id is the controller's to answer (UNKNOWN_TOPIC_ID).
            name.is_none_or(|n| authz.cluster_or_topic(acl::DELETE, &n))
        };
        let answer = |t: &DeleteTopicState, error: ResponseError| {
            DeletableTopicResult::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_error_code(error.code())
        };
        forward_allowed(link, version, request, |r| &mut r.topics, allowed, answer, |r| r.responses).await
    } else {
        let allowed = |n: &TopicName| authz.cluster_or_topic(acl::DELETE, n.0.as_str());
        let answer = |n: &TopicName, error: ResponseError| {
            DeletableTopicResult::default().with_name(Some(n.clone())).with_error_code(error.code())
        };
        forward_allowed(link, version, request, |r| &mut r.topic_names, allowed, answer, |r| r.responses).await
    };
    DeleteTopicsResponse::default().with_responses(responses).with_throttle_time_ms(link.throttle_ms())
}

pub async fn create_partitions(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: CreatePartitionsRequest,
    version: i16,
) -> CreatePartitionsResponse {
    let results = forward_allowed(
        link,
        version,
        request,
        |r| &mut r.topics,
        |t| authz.cluster_or_topic(acl::ALTER, t.name.0.as_str()),
        |t, error| CreatePartitionsTopicResult::default().with_name(t.name.clone()).with_error_code(error.code()),
        |response| response.results,
    )
    .await;
    CreatePartitionsResponse::default().with_results(results).with_throttle_time_ms(link.throttle_ms())
}

pub async fn elect_leaders(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    if !authz.cluster(acl::ALTER) {
        return ElectLeadersResponse::default().with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    forward_whole(link, version, &request, |error| ElectLeadersResponse::default().with_error_code(error.code())).await
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
async fn forward_configs<R: Request, T>(
    link: &Forwarder<'_>,
    version: i16,
    checks: Vec<Result<(), Refusal>>,
    mut request: R,
    resources: impl Fn(&mut R) -> &mut Vec<T>,
    key: impl Fn(&T) -> ConfigResource,
    answers: impl FnOnce(R::Response) -> HashMap<ConfigResource, ConfigAnswer>,
) -> Vec<(i8, StrBytes, i16, Option<StrBytes>)>
where
    R::Response: Throttled,
{
    let all = std::mem::take(resources(&mut request));
    let keys = all.iter().map(&key).collect();
    let passed = all.into_iter().zip(&checks).filter(|(_, check)| check.is_ok()).map(|(r, _)| r);
    *resources(&mut request) = passed.collect();
    let answered = match resources(&mut request).is_empty() {
        true => Ok(HashMap::new()),
        false => forward(link, version, &request).await.map(answers),
    };
    reassemble(keys, checks, answered)
}

/// A config request forwarded (`forward_configs`) and answered: IncrementalAlterConfigs and
/// AlterConfigs differ only in their types.
macro_rules! forward_config_request {
    ($link:expr, $version:expr, $checks:expr, $request:expr, $resource_response:ident, $response:ident) => {{
        let answered = forward_configs(
            $link,
            $version,
            $checks,
            $request,
            |r| &mut r.resources,
            |r| (r.resource_type, r.resource_name.clone()),
            |response| {
                let answers = response.responses.into_iter();
                answers.map(|r| ((r.resource_type, r.resource_name), (r.error_code, r.error_message))).collect()
            },
        )
        .await;
        let responses: Vec<_> = super::config_resource_responses!($resource_response, answered);
        $response::default().with_responses(responses).with_throttle_time_ms($link.throttle_ms())
    }};
}

/// IncrementalAlterConfigs: `checks` are this broker's preprocessing
/// (`configs::incremental_alter_configs_preprocess`); the resources that passed are forwarded.
pub async fn incremental_alter_configs(
    link: &Forwarder<'_>,
    checks: Vec<Result<(), Refusal>>,
    request: IncrementalAlterConfigsRequest,
    version: i16,
) -> IncrementalAlterConfigsResponse {
    forward_config_request!(
        link,
        version,
        checks,
        request,
        IncrementalAlterConfigsResourceResponse,
        IncrementalAlterConfigsResponse
    )
}

/// Legacy AlterConfigs, the same way (`configs::alter_configs_preprocess`).
pub async fn alter_configs(
    link: &Forwarder<'_>,
    checks: Vec<Result<(), Refusal>>,
    request: AlterConfigsRequest,
    version: i16,
) -> AlterConfigsResponse {
    forward_config_request!(link, version, checks, request, AlterConfigsResourceResponse, AlterConfigsResponse)
}

/// AlterPartitionReassignments: ALTER on the cluster here, then the controller's answer (every
/// partition REQUEST_TIMED_OUT when it cannot be reached).
pub async fn alter_partition_reassignments(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: AlterPartitionReassignmentsRequest,
    version: i16,
) -> AlterPartitionReassignmentsResponse {
    if !authz.cluster(acl::ALTER) {
        let (code, message) = super::cluster_denied();
        return cluster::reassignments_refused(&request, code, message);
    }
    forward_whole(link, version, &request, |error| cluster::reassignments_refused(&request, error.code(), None)).await
}

/// UpdateFeatures: ALTER on the cluster here, then the controller's answer (it decides and
/// writes the FeatureLevelRecords; this broker sees them in its image like any broker).
pub async fn update_features(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    if !authz.cluster(acl::ALTER) {
        let (code, message) = super::cluster_denied();
        return UpdateFeaturesResponse::default().with_error_code(code).with_error_message(message);
    }
    let failed = |error: ResponseError| {
        let message = crate::error::default_message(error);
        UpdateFeaturesResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_string(message)))
    };
    forward_whole(link, version, &request, failed).await
}

/// AlterUserScramCredentials: ALTER on the cluster here (every user refused otherwise, as a
/// broker answers), then the controller's answer (each user REQUEST_TIMED_OUT or
/// UNSUPPORTED_VERSION when the forwarding fails).
pub async fn alter_user_scram_credentials(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: AlterUserScramCredentialsRequest,
    version: i16,
) -> AlterUserScramCredentialsResponse {
    if !authz.cluster(acl::ALTER) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return super::sasl::alter_refused(&request, e.code(), Some(crate::error::default_message(e)));
    }
    let failed = |error: ResponseError| super::sasl::alter_refused(&request, error.code(), None);
    forward_whole(link, version, &request, failed).await
}

/// AlterClientQuotas: ALTER_CONFIGS on the cluster here, then the controller's answer.
pub async fn alter_client_quotas(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: AlterClientQuotasRequest,
    version: i16,
) -> AlterClientQuotasResponse {
    if !authz.cluster(acl::ALTER_CONFIGS) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return super::quotas::alter_refused(&request, e, Some(crate::error::default_message(e)));
    }
    let failed = |error: ResponseError| super::quotas::alter_refused(&request, error, None);
    forward_whole(link, version, &request, failed).await
}

/// ListPartitionReassignments: DESCRIBE on the cluster here, then the controller's answer.
pub async fn list_partition_reassignments(
    link: &Forwarder<'_>,
    authz: &Authz<'_>,
    request: ListPartitionReassignmentsRequest,
    version: i16,
) -> ListPartitionReassignmentsResponse {
    if !authz.cluster(acl::DESCRIBE) {
        let (code, message) = super::cluster_denied();
        return cluster::list_reassignments_refused(&request, code, message);
    }
    let failed = |error: ResponseError| cluster::list_reassignments_refused(&request, error.code(), None);
    forward_whole(link, version, &request, failed).await
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
