//! CreateTopics on a Ketch controller (brokers forward it, Kafka's `ControllerApis.createTopics`):
//! the same checks, in Kafka's order and with Kafka's messages, as a single node's CreateTopics
//! (`create_topics.rs`), made against the metadata image, then the topic's records (replicas
//! placed over the usable brokers, or the manual assignment) written as one change. Each valid
//! topic takes its partitions from the client's `controller_mutation_rate` quota (THROTTLING_QUOTA_EXCEEDED
//! once exhausted, from v6), the client being the forwarding broker's or a direct one.
//!
//! With an authorizer (`controller_authz`): CREATE on the cluster or the topic, else
//! TOPIC_AUTHORIZATION_FAILED; a created topic's settings only with its DESCRIBE_CONFIGS.
//! Not yet: CreateTopicPolicy.
//! Invariants: a refused topic writes nothing; a topic is answered with its state once durable.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{CreatableTopicResult, CreateTopicsResponse};
use uuid::Uuid;

use super::controller_apis::written;
use super::create_topics::{
    answer_each_name_once, describe_configs, eligible, error_result, overrides, requested_layout, take_quota,
    too_large, Layout, Refusal,
};
use crate::controller::quorum::QuorumController;
use crate::controller::topic_changes::{create_topic_assigned_records, create_topic_records, NewTopic};
use crate::metadata::check_new_topic_name;
use crate::quota::mutation::MutationQuota;
use crate::security::acl;
use crate::security::authorizer::Authz;

/// Kafka's `ConfigSource` codes used in the answer.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

pub fn create_topics(
    controller: &QuorumController,
    authz: &Authz,
    request: CreateTopicsRequest,
    version: i16,
    mut quota: MutationQuota<'_>,
) -> CreateTopicsResponse {
    let validate_only = request.validate_only;
    let settings = &controller.settings;
    let eligible = eligible(&request.topics, |name| {
        authz.allows_quietly(acl::CREATE, acl::CLUSTER, acl::CLUSTER_NAME)
            || authz.allows_quietly(acl::CREATE, acl::TOPIC, name)
    });
    let too_large = too_large(&eligible, settings.num_partitions, settings.default_replication_factor);
    let topics = answer_each_name_once(request.topics, |t| {
        let name = t.name.0.as_str();
        if !authz.cluster_or_topic(acl::CREATE, name) {
            return error_result(&t.name, ResponseError::TopicAuthorizationFailed, "Authorization failed.".into());
        }
        if let Some(message) = too_large {
            return error_result(&t.name, ResponseError::PolicyViolation, message.to_string());
        }
        // Kafka's `getDescribableTopics`: the topic's own DESCRIBE_CONFIGS, not logged.
        let describable = authz.allows_quietly(acl::DESCRIBE_CONFIGS, acl::TOPIC, name);
        create_one(controller, &t, validate_only, version, describable, &mut quota)
            .unwrap_or_else(|(error, message)| error_result(&t.name, error, message))
    });
    CreateTopicsResponse::default().with_topics(topics).with_throttle_time_ms(quota.throttle_ms())
}

fn create_one(
    controller: &QuorumController,
    topic: &CreatableTopic,
    validate_only: bool,
    version: i16,
    describable: bool,
    quota: &mut MutationQuota<'_>,
) -> Result<CreatableTopicResult, Refusal> {
    let settings = &controller.settings;
    let name = topic.name.0.as_str();
    let image = controller.image();
    check_new_topic_name(name, |n| image.topic_ids.contains_key(n), image.topic_ids.keys())
        .map_err(|e| (e.error, e.message))?;
    let layout = requested_layout(topic, settings.num_partitions, settings.default_replication_factor)?;
    let (partitions, replication_factor) = layout.shape();
    let overrides = overrides(topic);
    let config = settings
        .topic_defaults
        .with_overrides(&overrides)
        .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
    let id = Uuid::from_bytes(crate::metadata::random_bytes());
    let new = NewTopic { name, id, partitions, replication_factor, overrides: &overrides };
    let seed = u64::from_le_bytes(crate::metadata::random_bytes()[..8].try_into().expect("8 bytes"));
    let decided = controller.change(|d| {
        let records = match &layout {
            Layout::Manual(a) => create_topic_assigned_records(d.image, name, id, a, &overrides),
            Layout::Placed { .. } => create_topic_records(d.image, &new, seed),
        };
        // The client's mutation quota, once the topic is valid (Kafka's `applyPartitionChangeQuota`).
        match records.and_then(|records| take_quota(quota, partitions).map(|()| records)) {
            Ok(records) if !validate_only => (records, Ok(())),
            Ok(_) => (Vec::new(), Ok(())),
            Err(refusal) => (Vec::new(), Err(refusal)),
        }
    });
    written("CreateTopics", decided, |error| Err((error, String::new())))?;
    if !validate_only {
        tracing::info!(topic = name, partitions, replication_factor, "topic created");
    }
    let ok = CreatableTopicResult::default().with_name(topic.name.clone()).with_topic_id(id).with_error_message(None);
    if !describable {
        // Created, but its settings are not shown (Kafka's `authorizedToReturnConfigs`).
        return Ok(ok.with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()));
    }
    let ok = ok.with_num_partitions(partitions).with_replication_factor(replication_factor).with_error_message(None);
    if version < 5 {
        return Ok(ok);
    }
    let statics = &settings.static_config_keys;
    let source = |key: &str, overridden: bool| match (overridden, statics.contains(key)) {
        (true, _) => DYNAMIC_TOPIC_CONFIG,
        (false, true) => STATIC_BROKER_CONFIG,
        (false, false) => DEFAULT_CONFIG,
    };
    Ok(ok.with_configs(Some(describe_configs(&config, &overrides, source))))
}
