//! CreateTopics: validate names, partition counts, replication factor, assignments and configs
//! in Kafka's order and with Kafka's messages; create. Authorization as Kafka's controller:
//! CREATE on the cluster or on each topic (else TOPIC_AUTHORIZATION_FAILED), DESCRIBE_CONFIGS on
//! a topic to see its configs in the answer (else its `topic_config_error_code`). Each valid
//! topic's partitions are taken from the client's controller mutation quota
//! (`quota::mutation`) before it is created.

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
use crate::quota::mutation::MutationQuota;
use crate::security::acl;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
    version: i16,
    mut quota: MutationQuota,
) -> CreateTopicsResponse {
    let authz = ctx.authz(broker);
    let names = || req.topics.iter().map(|t| t.name.0.as_str());
    let creatable: HashSet<String> = match authz.allows_quietly(acl::CREATE, acl::CLUSTER, acl::CLUSTER_NAME) {
        true => names().map(str::to_string).collect(),
        false => authz.allowed_names(acl::CREATE, acl::TOPIC, names()).into_iter().map(str::to_string).collect(),
    };
    let describable: HashSet<String> =
        names().filter(|n| authz.allows_quietly(acl::DESCRIBE_CONFIGS, acl::TOPIC, n)).map(str::to_string).collect();
    let validate_only = req.validate_only;
    let (default_partitions, default_factor) = (broker.config.num_partitions, broker.config.default_replication_factor);
    let eligible = eligible(&req.topics, |name| creatable.contains(name));
    let too_large = too_large(&eligible, default_partitions, default_factor);
    let topics = answer_each_name_once(req.topics, |t| {
        if !creatable.contains(t.name.0.as_str()) {
            let message = "Authorization failed.".to_string();
            return error_result(&t.name, ResponseError::TopicAuthorizationFailed, message);
        }
        if let Some(message) = too_large {
            return error_result(&t.name, ResponseError::PolicyViolation, message.to_string());
        }
        let describable = describable.contains(t.name.0.as_str());
        let name = t.name.clone();
        create_one(broker, t, validate_only, version, describable, &mut quota)
            .unwrap_or_else(|(error, message)| error_result(&name, error, message))
    });
    CreateTopicsResponse::default().with_topics(topics).with_throttle_time_ms(quota.throttle_ms())
}

/// Takes a topic's partitions from the request's controller mutation quota (Kafka's
/// `applyPartitionChangeQuota`): THROTTLING_QUOTA_EXCEEDED once it is exhausted.
pub fn take_quota(quota: &mut MutationQuota, partitions: i32) -> Result<(), Refusal> {
    let now = crate::log::now_ms().max(0) as u64;
    quota.take(partitions.max(0) as u32, now).map_err(|m| (ResponseError::ThrottlingQuotaExceeded, m.to_string()))
}

/// Kafka's refusal of one topic: its error and message.
pub type Refusal = (ResponseError, String);

/// Kafka's bound on the partitions one CreateTopics may ask for (`ReplicationControlManager`'s
/// `MAX_PARTITIONS_PER_BATCH`), checked first: the request is refused whole.
pub const MAX_PARTITIONS_PER_BATCH: u64 = 10_000;
/// Kafka's message for a request over `MAX_PARTITIONS_PER_BATCH` (POLICY_VIOLATION).
pub const EXCESSIVE_PARTITIONS: &str = "Excessively large number of partitions per request.";
/// Kafka's bound on the metadata records one request may write (`QuorumController`'s
/// `MAX_RECORDS_PER_USER_OP`): a CreateTopics over it is refused whole, before any placement
/// (sized by the request's partition counts) or any partition is made.
pub const MAX_RECORDS_PER_USER_OP: u64 = 10_000;
/// Kafka's message for a request over `MAX_RECORDS_PER_USER_OP` (POLICY_VIOLATION).
pub const EXCESSIVE_BATCH: &str = "Unable to perform excessively large batch operation.";

/// Why creating `topics` is refused whole, as Kafka's controller checks it (POLICY_VIOLATION
/// with this message), or `None`: first more than `MAX_PARTITIONS_PER_BATCH` partitions asked
/// for (a count of -1 is the default, assignments count by their number), then more than
/// `MAX_RECORDS_PER_USER_OP` records to write (a TopicRecord, one ConfigRecord per config and
/// one PartitionRecord per partition of each topic whose layout is valid).
pub fn too_large(
    topics: &[&CreatableTopic],
    default_partitions: i32,
    default_replication_factor: i16,
) -> Option<&'static str> {
    let partitions: u64 = topics
        .iter()
        .map(|t| match (t.assignments.is_empty(), t.num_partitions) {
            (false, _) => t.assignments.len() as u64,
            (true, -1) => default_partitions.max(0) as u64,
            (true, n) => n.max(0) as u64,
        })
        .sum();
    if partitions > MAX_PARTITIONS_PER_BATCH {
        return Some(EXCESSIVE_PARTITIONS);
    }
    let records: u64 = topics
        .iter()
        .filter_map(|t| requested_layout(t, default_partitions, default_replication_factor).ok().map(|l| (t, l)))
        .map(|(t, layout)| 1 + t.configs.len() as u64 + layout.shape().0.max(0) as u64)
        .sum();
    (records > MAX_RECORDS_PER_USER_OP).then_some(EXCESSIVE_BATCH)
}

/// The topics of a CreateTopics that reach its creation step: named once, and allowed.
pub fn eligible(topics: &[CreatableTopic], allowed: impl Fn(&str) -> bool) -> Vec<&CreatableTopic> {
    let mut seen = std::collections::HashMap::new();
    for t in topics {
        *seen.entry(t.name.0.as_str()).or_insert(0) += 1;
    }
    topics.iter().filter(|t| seen[t.name.0.as_str()] == 1 && allowed(t.name.0.as_str())).collect()
}

/// The answer of each topic of a CreateTopics, in the request's order: a name given more than
/// once is answered once, INVALID_REQUEST, and none of its entries is created (Kafka's
/// `ControllerApis.createTopics`); every other topic is `answer`ed.
pub fn answer_each_name_once(
    topics: Vec<CreatableTopic>,
    mut answer: impl FnMut(CreatableTopic) -> CreatableTopicResult,
) -> Vec<CreatableTopicResult> {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> =
        topics.iter().map(|t| t.name.0.to_string()).filter(|name| !seen.insert(name.clone())).collect();
    let mut reported = HashSet::new();
    topics
        .into_iter()
        .filter_map(|t| {
            if !duplicates.contains(t.name.0.as_str()) {
                return Some(answer(t));
            }
            reported
                .insert(t.name.0.to_string())
                .then(|| error_result(&t.name, ResponseError::InvalidRequest, "Duplicate topic name.".to_string()))
        })
        .collect()
}

/// A topic refused: Kafka answers -1 partitions and replication factor with the error.
pub fn error_result(name: &TopicName, error: ResponseError, message: String) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name.clone())
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_error_code(error.code())
        .with_error_message(Some(str_bytes(&message)))
}

/// How a new topic's partitions are to be laid out, as its request asks.
pub enum Layout {
    /// A manual assignment, `(partition, replicas)` in the request's order; checked against the
    /// brokers when placed.
    Manual(Vec<(i32, Vec<i32>)>),
    /// Placed by the cluster: the count and replication factor asked, or the defaults.
    Placed { partitions: i32, replication_factor: i16 },
}

impl Layout {
    /// (partitions, replication factor) as CreateTopics answers them.
    pub fn shape(&self) -> (i32, i16) {
        match self {
            Layout::Manual(a) => (a.len() as i32, a.first().map_or(0, |(_, r)| r.len() as i16)),
            Layout::Placed { partitions, replication_factor } => (*partitions, *replication_factor),
        }
    }
}

/// Kafka's checks of a new topic's request after its name (`ReplicationControlManager
/// .createTopic`), in its order and with its messages: no null config value, then a manual
/// assignment with partition count and replication factor -1, or a valid count and factor
/// (-1: the defaults given).
pub fn requested_layout(
    topic: &CreatableTopic,
    default_partitions: i32,
    default_replication_factor: i16,
) -> Result<Layout, Refusal> {
    let null_configs: Vec<&str> = topic.configs.iter().filter(|c| c.value.is_none()).map(|c| c.name.as_str()).collect();
    if !null_configs.is_empty() {
        let message = format!("Null value not supported for topic configs: {}", null_configs.join(","));
        return Err((ResponseError::InvalidConfig, message));
    }
    if !topic.assignments.is_empty() {
        if topic.replication_factor != -1 {
            let message = "A manual partition assignment was specified, but replication factor was not set to -1.";
            return Err((ResponseError::InvalidRequest, message.into()));
        }
        if topic.num_partitions != -1 {
            let message = "A manual partition assignment was specified, but numPartitions was not set to -1.";
            return Err((ResponseError::InvalidRequest, message.into()));
        }
        let assignment = topic.assignments.iter();
        return Ok(Layout::Manual(
            assignment.map(|a| (a.partition_index, a.broker_ids.iter().map(|b| b.0).collect())).collect(),
        ));
    }
    if topic.replication_factor < -1 || topic.replication_factor == 0 {
        let message = "Replication factor must be larger than 0, or -1 to use the default value.";
        return Err((ResponseError::InvalidReplicationFactor, message.into()));
    }
    if topic.num_partitions < -1 || topic.num_partitions == 0 {
        let message = "Number of partitions was set to an invalid non-positive value.";
        return Err((ResponseError::InvalidPartitions, message.into()));
    }
    let partitions = if topic.num_partitions == -1 { default_partitions } else { topic.num_partitions };
    let replication_factor =
        if topic.replication_factor == -1 { default_replication_factor } else { topic.replication_factor };
    Ok(Layout::Placed { partitions, replication_factor })
}

/// The topic configs a CreateTopics sets (null values are refused before).
pub fn overrides(topic: &CreatableTopic) -> Properties {
    let set = topic.configs.iter().filter_map(|c| c.value.as_ref().map(|v| (c.name.as_str(), v.as_str())));
    set.map(|(name, value)| (name.to_string(), value.to_string())).collect()
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
    quota: &mut MutationQuota,
) -> Result<CreatableTopicResult, Refusal> {
    let name = topic.name.0.as_str().to_string();
    broker.topics.check_new_name(&name).map_err(|e| (e.error, e.message))?;
    let layout = requested_layout(&topic, broker.config.num_partitions, broker.config.default_replication_factor)?;
    match &layout {
        Layout::Manual(_) => {
            let node_id = broker.config.node_id;
            let mut indexes = HashSet::new();
            for a in &topic.assignments {
                if !indexes.insert(a.partition_index) {
                    let message =
                        format!("Found multiple manual partition assignments for partition {}", a.partition_index);
                    return Err((ResponseError::InvalidReplicaAssignment, message));
                }
                validate_assignment(&a.broker_ids, &[node_id])?;
            }
            if (0..topic.assignments.len() as i32).any(|i| !indexes.contains(&i)) {
                let message = "partitions should be a consecutive 0-based integer sequence";
                return Err((ResponseError::InvalidReplicaAssignment, message.into()));
            }
        }
        Layout::Placed { replication_factor, .. } if *replication_factor > 1 => {
            let rf = replication_factor;
            return Err((ResponseError::InvalidReplicationFactor, format!("Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only 1 broker(s) are registered.")));
        }
        Layout::Placed { .. } => {}
    }
    let (partitions, replication_factor) = layout.shape();
    let overrides = overrides(&topic);
    let checked = broker.topics.check_create(&name, partitions, &overrides).map_err(|e| (e.error, e.message))?;
    take_quota(quota, partitions)?;
    let outcome = if validate_only {
        // Kafka draws the id of a topic it validates too.
        Ok((Uuid::from_bytes(crate::metadata::random_bytes()), checked))
    } else {
        broker.topics.create(&name, partitions, overrides.clone()).map(|t| (t.id, t.config.clone()))
    };
    let (id, config) = outcome.map_err(|e| (e.error, e.message))?;
    let ok = CreatableTopicResult::default().with_name(topic.name.clone()).with_topic_id(id).with_error_message(None);
    if !describable {
        return Ok(ok.with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()));
    }
    let ok = ok.with_num_partitions(partitions).with_replication_factor(replication_factor);
    if version < 5 {
        return Ok(ok);
    }
    Ok(ok.with_configs(Some(describe_configs(&config, &overrides, topic_config_sources(broker)))))
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

#[cfg(test)]
#[path = "create_topics_tests.rs"]
mod tests;
