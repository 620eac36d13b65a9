//! CreateTopics on a Ketch controller (brokers forward it, Kafka's `ControllerApis.createTopics`):
//! the same checks, in Kafka's order and with Kafka's messages, as a single node's CreateTopics
//! (`create_topics.rs`), made against the metadata image, then the topic's records (replicas
//! placed over the usable brokers, or the manual assignment) written as one change.
//!
//! Not yet: ACLs on the controller (it trusts the brokers that forward, which authorize first),
//! CreateTopicPolicy.
//! Invariants: a refused topic writes nothing; a topic is answered with its state once durable.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{CreatableTopicResult, CreateTopicsResponse};
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

use super::create_topics::describe_configs;
use super::str_bytes;
use crate::config::Properties;
use crate::controller::quorum::QuorumController;
use crate::controller::topic_changes::{create_topic_assigned_records, create_topic_records, NewTopic};
use crate::metadata::image::MetadataImage;
use crate::metadata::validate_topic_name;

/// Kafka's `ConfigSource` codes used in the answer.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

type Refusal = (ResponseError, String);
/// `(partition, replicas)` of a manual assignment.
type Assignment = Vec<(i32, Vec<i32>)>;

pub fn create_topics(
    controller: &QuorumController,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> =
        request.topics.iter().map(|t| t.name.0.to_string()).filter(|n| !seen.insert(n.clone())).collect();
    let mut reported = HashSet::new();
    let topics = request
        .topics
        .into_iter()
        .filter_map(|t| {
            if !duplicates.contains(t.name.0.as_str()) {
                let result = create_one(controller, &t, request.validate_only, version);
                return Some(result.unwrap_or_else(|(error, message)| error_result(&t.name, error, message)));
            }
            reported
                .insert(t.name.0.to_string())
                .then(|| error_result(&t.name, ResponseError::InvalidRequest, "Duplicate topic name.".to_string()))
        })
        .collect();
    CreateTopicsResponse::default().with_topics(topics)
}

fn error_result(name: &TopicName, error: ResponseError, message: String) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name.clone())
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(&message)))
}

/// A legal name, not taken, not colliding once '.' and '_' are unified (Kafka's checks).
fn check_name(image: &MetadataImage, name: &str) -> Result<(), Refusal> {
    validate_topic_name(name).map_err(|e| (e.error, e.message))?;
    if name == crate::raft::METADATA_TOPIC_NAME {
        let message = format!("Topic name is invalid: '{name}' is reserved for the metadata log");
        return Err((ResponseError::InvalidTopicException, message));
    }
    if image.topic(name).is_some() {
        return Err((ResponseError::TopicAlreadyExists, format!("Topic '{name}' already exists.")));
    }
    let unified = name.replace('.', "_");
    if let Some(existing) = image.topic_ids.keys().find(|t| t.replace('.', "_") == unified) {
        return Err((
            ResponseError::InvalidTopicException,
            format!("Topic '{name}' collides with existing topic: {existing}"),
        ));
    }
    Ok(())
}

/// The manual assignment, `(partition, replicas)` (None: none given); the assignment itself is
/// checked with the image when the records are made.
fn manual_assignment(topic: &CreatableTopic) -> Result<Option<Assignment>, Refusal> {
    if topic.assignments.is_empty() {
        return Ok(None);
    }
    if topic.replication_factor != -1 {
        let message = "A manual partition assignment was specified, but replication factor was not set to -1.";
        return Err((ResponseError::InvalidRequest, message.into()));
    }
    if topic.num_partitions != -1 {
        let message = "A manual partition assignment was specified, but numPartitions was not set to -1.";
        return Err((ResponseError::InvalidRequest, message.into()));
    }
    Ok(Some(
        topic.assignments.iter().map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect())).collect(),
    ))
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
    check_name(&image, name)?;
    let null_configs: Vec<&str> = topic.configs.iter().filter(|c| c.value.is_none()).map(|c| c.name.as_str()).collect();
    if !null_configs.is_empty() {
        let message = format!("Null value not supported for topic configs: {}", null_configs.join(","));
        return Err((ResponseError::InvalidConfig, message));
    }
    let assignment = manual_assignment(topic)?;
    let (partitions, replication_factor) = match &assignment {
        Some(a) => (a.len() as i32, a[0].1.len() as i16),
        None => {
            if topic.replication_factor < -1 || topic.replication_factor == 0 {
                let message = "Replication factor must be larger than 0, or -1 to use the default value.";
                return Err((ResponseError::InvalidReplicationFactor, message.into()));
            }
            if topic.num_partitions < -1 || topic.num_partitions == 0 {
                let message = "Number of partitions was set to an invalid non-positive value.";
                return Err((ResponseError::InvalidPartitions, message.into()));
            }
            let partitions = if topic.num_partitions == -1 { settings.num_partitions } else { topic.num_partitions };
            let rf = match topic.replication_factor {
                -1 => settings.default_replication_factor,
                rf => rf,
            };
            (partitions, rf)
        }
    };
    let overrides: Properties = topic
        .configs
        .iter()
        .filter_map(|c| c.value.as_ref().map(|v| (c.name.as_str().to_string(), v.as_str().to_string())))
        .collect();
    let config = settings
        .topic_defaults
        .with_overrides(&overrides)
        .map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
    let id = Uuid::from_bytes(crate::metadata::random_bytes());
    let new = NewTopic { name, id, partitions, replication_factor, overrides: &overrides };
    let seed = u64::from_le_bytes(crate::metadata::random_bytes()[..8].try_into().expect("8 bytes"));
    let decided = controller.change(|d| {
        let records = match &assignment {
            Some(a) => create_topic_assigned_records(d.image, name, id, a, &overrides),
            None => create_topic_records(d.image, &new, seed),
        };
        match records {
            Ok(records) if !validate_only => (records, Ok(())),
            Ok(_) => (Vec::new(), Ok(())),
            Err(refusal) => (Vec::new(), Err(refusal)),
        }
    });
    decided.map_err(|e| {
        tracing::error!(error = %e, "CreateTopics: metadata records not written");
        (ResponseError::UnknownServerError, String::new())
    })??;
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
