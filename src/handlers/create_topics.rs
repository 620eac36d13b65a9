//! CreateTopics: validate names, partition counts, replication factor and configs; create.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
};

use super::str_bytes;
use crate::broker::Broker;
use crate::config::{Properties, TopicConfig};

/// Kafka's ConfigSource values.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;

pub fn handle(broker: &Arc<Broker>, req: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
    let topics = req.topics.into_iter().map(|t| create_one(broker, t, req.validate_only, version)).collect();
    CreateTopicsResponse::default().with_topics(topics)
}

fn create_one(broker: &Broker, topic: CreatableTopic, validate_only: bool, version: i16) -> CreatableTopicResult {
    let name = topic.name.0.as_str().to_string();
    let result = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_num_partitions(-1)
        .with_replication_factor(-1);
    let fail = |error: ResponseError, message: String| {
        result.clone().with_error_code(error.code()).with_error_message(Some(str_bytes(&message)))
    };
    let node_id = broker.config.node_id;
    let mut partitions = if topic.num_partitions == -1 { broker.config.num_partitions } else { topic.num_partitions };
    let replication_factor = if topic.replication_factor == -1 {
        broker.config.default_replication_factor
    } else {
        topic.replication_factor
    };
    if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return fail(
                ResponseError::InvalidRequest,
                "both assignments and num_partitions/replication_factor were set".into(),
            );
        }
        for (i, a) in topic.assignments.iter().enumerate() {
            if a.partition_index != i as i32 || a.broker_ids.len() != 1 || a.broker_ids[0].0 != node_id {
                return fail(
                    ResponseError::InvalidReplicaAssignment,
                    format!("only broker {node_id} exists; assignments must name it once per partition, in order"),
                );
            }
        }
        partitions = topic.assignments.len() as i32;
    } else if replication_factor <= 0 {
        return fail(ResponseError::InvalidReplicationFactor, "replication factor must be larger than 0".into());
    } else if replication_factor > 1 {
        return fail(ResponseError::InvalidReplicationFactor, format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) are registered."));
    }
    let mut overrides = Properties::new();
    for config in &topic.configs {
        match &config.value {
            Some(value) => {
                overrides.insert(config.name.as_str().to_string(), value.as_str().to_string());
            }
            None => {
                return fail(ResponseError::InvalidConfig, format!("null value for config {}", config.name.as_str()))
            }
        }
    }
    let outcome = if validate_only {
        broker.topics.check_create(&name, partitions, &overrides).map(|config| (uuid::Uuid::nil(), config))
    } else {
        broker.topics.create(&name, partitions, overrides.clone()).map(|t| (t.id, t.config.clone()))
    };
    match outcome {
        Ok((id, config)) => {
            let mut ok = result.with_topic_id(id).with_num_partitions(partitions).with_replication_factor(1);
            if version >= 5 {
                ok = ok.with_configs(Some(describe_configs(&config, &overrides)));
            }
            ok
        }
        Err(e) => fail(e.error, e.message),
    }
}

/// The topic's effective configs as CreateTopics v5+ reports them.
pub fn describe_configs(config: &TopicConfig, overrides: &Properties) -> Vec<CreatableTopicConfigs> {
    crate::config::topic_config_names()
        .map(|key| {
            let source = if overrides.contains_key(key) { SOURCE_DYNAMIC_TOPIC } else { SOURCE_DEFAULT };
            CreatableTopicConfigs::default()
                .with_name(str_bytes(key))
                .with_value(Some(str_bytes(&config.value_of(key))))
                .with_config_source(source)
        })
        .collect()
}
