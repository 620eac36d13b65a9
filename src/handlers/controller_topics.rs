//! CreateTopics on a Ketch controller (brokers forward it, Kafka's `ControllerApis.createTopics`):
//! the same checks, in Kafka's order and with Kafka's messages, as a single node's CreateTopics
//! (`create_topics.rs`), made against the metadata image, then the topic's records (replicas
//! placed over the usable brokers, or the manual assignment) written as one change.
//!
//! Not yet: ACLs on the controller (it trusts the brokers that forward, which authorize first),
//! CreateTopicPolicy.
//! Invariants: a refused topic writes nothing; a topic is answered with its state once durable.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{CreatableTopicResult, CreateTopicsResponse};
use uuid::Uuid;

use super::controller_apis::written;
use super::create_topics::{
    answer_each_name_once, describe_configs, error_result, overrides, requested_layout, Layout, Refusal,
};
use crate::controller::quorum::QuorumController;
use crate::controller::topic_changes::{create_topic_assigned_records, create_topic_records, NewTopic};
use crate::metadata::check_new_topic_name;

/// Kafka's `ConfigSource` codes used in the answer.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

pub fn create_topics(
    controller: &QuorumController,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let validate_only = request.validate_only;
    let topics = answer_each_name_once(request.topics, |t| {
        create_one(controller, &t, validate_only, version)
            .unwrap_or_else(|(error, message)| error_result(&t.name, error, message))
    });
    CreateTopicsResponse::default().with_topics(topics)
}

fn create_one(
    controller: &QuorumController,
    topic: &CreatableTopic,
    validate_only: bool,
    version: i16,
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
        match records {
            Ok(records) if !validate_only => (records, Ok(())),
            Ok(_) => (Vec::new(), Ok(())),
            Err(refusal) => (Vec::new(), Err(refusal)),
        }
    });
    written("CreateTopics", decided, |error| Err((error, String::new())))?;
    if !validate_only {
        tracing::info!(topic = name, partitions, replication_factor, "topic created");
    }
    let ok = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_topic_id(id)
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_error_message(None);
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
