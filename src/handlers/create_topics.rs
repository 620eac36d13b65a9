//! CreateTopics: validate names, partition counts, replication factor, assignments and configs
//! in Kafka's order and with Kafka's messages; create. Authorization as Kafka's controller:
//! CREATE on the cluster or on each topic (else TOPIC_AUTHORIZATION_FAILED), DESCRIBE_CONFIGS on
//! a topic to see its configs in the answer (else its `topic_config_error_code`).

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsResponse,
};

use kafka_protocol::messages::{BrokerId, TopicName};
use uuid::Uuid;

use super::configs::topic_config_sources;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::config::{Properties, TopicConfig};
use crate::security::acl;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let authz = ctx.authz(broker);
    let names = || req.topics.iter().map(|t| t.name.0.as_str());
    let creatable: HashSet<String> = match authz.allows_quietly(acl::CREATE, acl::CLUSTER, acl::CLUSTER_NAME) {
        true => names().map(str::to_string).collect(),
        false => authz.allowed_names(acl::CREATE, acl::TOPIC, names()).into_iter().map(str::to_string).collect(),
    };
    let describable: HashSet<String> =
        names().filter(|n| authz.allows_quietly(acl::DESCRIBE_CONFIGS, acl::TOPIC, n)).map(str::to_string).collect();
    // As Kafka's ControllerApis: a name given twice is refused once, and neither entry is created.
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> =
        req.topics.iter().map(|t| t.name.0.to_string()).filter(|name| !seen.insert(name.clone())).collect();
    let mut reported = HashSet::new();
    let topics = req
        .topics
        .into_iter()
        .filter_map(|t| {
            if !duplicates.contains(t.name.0.as_str()) {
                if !creatable.contains(t.name.0.as_str()) {
                    let message = "Authorization failed.".to_string();
                    return Some(error_result(&t.name, ResponseError::TopicAuthorizationFailed, message));
                }
                let describable = describable.contains(t.name.0.as_str());
                return Some(create_one(broker, t, req.validate_only, version, describable));
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

/// Kafka's checks of a manual assignment (`validateManualPartitionAssignment`), given the
/// brokers that exist; the messages are Kafka's.
pub fn validate_assignment(replicas: &[BrokerId], registered: &[i32]) -> Result<(), (ResponseError, String)> {
    let refuse = |message: String| Err((ResponseError::InvalidReplicaAssignment, message));
    if replicas.is_empty() {
        return refuse("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted: Vec<i32> = replicas.iter().map(|b| b.0).collect();
    sorted.sort_unstable();
    for (i, broker) in sorted.iter().enumerate() {
        if !registered.contains(broker) {
            return refuse(format!(
                "The manual partition assignment includes broker {broker}, but no such broker is registered."
            ));
        }
        if i > 0 && sorted[i - 1] == *broker {
            return refuse(format!("The manual partition assignment includes the broker {broker} more than once."));
        }
    }
    Ok(())
}

/// Kafka's order (`ReplicationControlManager.createTopics`): name, existence, null configs, then
/// the assignment or partition count and replication factor, then the configs' values.
/// `describable`: whether the principal may see the new topic's configs (DESCRIBE_CONFIGS);
/// if not, Kafka answers neither them nor its partition count and replication factor.
fn create_one(
    broker: &Broker,
    topic: CreatableTopic,
    validate_only: bool,
    version: i16,
    describable: bool,
) -> CreatableTopicResult {
    let name = topic.name.0.as_str().to_string();
    let fail = |error: ResponseError, message: String| error_result(&topic.name, error, message);
    if let Err(e) = broker.topics.check_new_name(&name) {
        return fail(e.error, e.message);
    }
    let null_configs: Vec<&str> = topic.configs.iter().filter(|c| c.value.is_none()).map(|c| c.name.as_str()).collect();
    if !null_configs.is_empty() {
        let message = format!("Null value not supported for topic configs: {}", null_configs.join(","));
        return fail(ResponseError::InvalidConfig, message);
    }
    let node_id = broker.config.node_id;
    let partitions;
    let replication_factor;
    if !topic.assignments.is_empty() {
        if topic.replication_factor != -1 {
            let message = "A manual partition assignment was specified, but replication factor was not set to -1.";
            return fail(ResponseError::InvalidRequest, message.into());
        }
        if topic.num_partitions != -1 {
            let message = "A manual partition assignment was specified, but numPartitions was not set to -1.";
            return fail(ResponseError::InvalidRequest, message.into());
        }
        let mut indexes = HashSet::new();
        for a in &topic.assignments {
            if !indexes.insert(a.partition_index) {
                let message =
                    format!("Found multiple manual partition assignments for partition {}", a.partition_index);
                return fail(ResponseError::InvalidReplicaAssignment, message);
            }
            if let Err((error, message)) = validate_assignment(&a.broker_ids, &[node_id]) {
                return fail(error, message);
            }
        }
        if (0..topic.assignments.len() as i32).any(|i| !indexes.contains(&i)) {
            let message = "partitions should be a consecutive 0-based integer sequence";
            return fail(ResponseError::InvalidReplicaAssignment, message.into());
        }
        partitions = topic.assignments.len() as i32;
        replication_factor = 1;
    } else if topic.replication_factor < -1 || topic.replication_factor == 0 {
        let message = "Replication factor must be larger than 0, or -1 to use the default value.";
        return fail(ResponseError::InvalidReplicationFactor, message.into());
    } else if topic.num_partitions < -1 || topic.num_partitions == 0 {
        let message = "Number of partitions was set to an invalid non-positive value.";
        return fail(ResponseError::InvalidPartitions, message.into());
    } else {
        partitions = if topic.num_partitions == -1 { broker.config.num_partitions } else { topic.num_partitions };
        replication_factor = if topic.replication_factor == -1 {
            broker.config.default_replication_factor
        } else {
            topic.replication_factor
        };
        if replication_factor > 1 {
            return fail(ResponseError::InvalidReplicationFactor, format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) are registered."));
        }
    }
    let overrides: Properties = topic
        .configs
        .iter()
        .filter_map(|c| c.value.as_ref().map(|v| (c.name.as_str().to_string(), v.as_str().to_string())))
        .collect();
    let outcome = if validate_only {
        // Kafka draws the id of a topic it validates too.
        let id = Uuid::from_bytes(crate::metadata::random_bytes());
        broker.topics.check_create(&name, partitions, &overrides).map(|config| (id, config))
    } else {
        broker.topics.create(&name, partitions, overrides.clone()).map(|t| (t.id, t.config.clone()))
    };
    match outcome {
        Ok((id, _)) if !describable => CreatableTopicResult::default()
            .with_name(topic.name.clone())
            .with_topic_id(id)
            .with_error_message(None)
            .with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()),
        Ok((id, config)) => {
            let ok = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_topic_id(id)
                .with_num_partitions(partitions)
                .with_replication_factor(replication_factor)
                .with_error_message(None);
            if version >= 5 {
                ok.with_configs(Some(describe_configs(&config, &overrides, topic_config_sources(broker))))
            } else {
                ok
            }
        }
        Err(e) => fail(e.error, e.message),
    }
}

/// The topic's effective configs as CreateTopics v5+ reports them; `source` gives a config's
/// ConfigSource from its name and whether the topic overrides it.
pub fn describe_configs(
    config: &TopicConfig,
    overrides: &Properties,
    source: impl Fn(&str, bool) -> i8,
) -> Vec<CreatableTopicConfigs> {
    crate::config::topic_config_names()
        .map(|key| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(key))
                .with_value(Some(str_bytes(&config.value_of(key))))
                .with_config_source(source(key, overrides.contains_key(key)))
        })
        .collect()
}
