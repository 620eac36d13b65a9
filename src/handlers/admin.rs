//! Admin APIs for the Kafka CLI tools and AdminClient: DescribeConfigs (topics and this
//! broker, with sources, synonyms and types), AlterConfigs and IncrementalAlterConfigs (topic
//! configs: validated, persisted, applied live), CreatePartitions (grow only), DeleteRecords
//! and DescribeCluster.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{AlterConfigsResourceResponse, AlterConfigsResponse};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{CreatePartitionsResponse, CreatePartitionsTopicResult};
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::{DescribeClusterBroker, DescribeClusterResponse};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_request::IncrementalAlterConfigsRequest;
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::messages::BrokerId;

use super::metadata::advertised_endpoint;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::config::TOPIC_CONFIG_KEYS;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
// Kafka's ConfigSource values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
// Kafka's ConfigType values.
const TYPE_STRING: i8 = 2;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;
const TYPE_DOUBLE: i8 = 6;
const TYPE_LIST: i8 = 7;

fn config_type(key: &str) -> i8 {
    match key {
        "cleanup.policy" => TYPE_LIST,
        "compression.type" | "message.timestamp.type" => TYPE_STRING,
        "index.interval.bytes" | "max.message.bytes" | "segment.bytes" | "min.insync.replicas" => TYPE_INT,
        "min.cleanable.dirty.ratio" => TYPE_DOUBLE,
        _ => TYPE_LONG,
    }
}

pub fn describe_configs(broker: &Arc<Broker>, req: DescribeConfigsRequest, version: i16) -> DescribeConfigsResponse {
    let results = req
        .resources
        .iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let wanted = |key: &str| {
                resource.configuration_keys.as_ref().is_none_or(|keys| keys.iter().any(|k| k.as_str() == key))
            };
            let entries = match resource.resource_type {
                RESOURCE_TOPIC => match broker.topics.get(resource.resource_name.as_str()) {
                    None => {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(str_bytes("topic does not exist")))
                    }
                    Some(topic) => TOPIC_CONFIG_KEYS
                        .iter()
                        .filter(|(key, _)| wanted(key))
                        .map(|(key, broker_key)| {
                            let value = topic.config.value_of(key);
                            let broker_value = broker.config.properties.get(*broker_key);
                            let source = if topic.overrides.contains_key(*key) {
                                DYNAMIC_TOPIC_CONFIG
                            } else if broker_value.is_some() {
                                STATIC_BROKER_CONFIG
                            } else {
                                DEFAULT_CONFIG
                            };
                            let mut synonyms = Vec::new();
                            if req.include_synonyms {
                                if let Some(v) = topic.overrides.get(*key) {
                                    synonyms.push(
                                        DescribeConfigsSynonym::default()
                                            .with_name(str_bytes(key))
                                            .with_value(Some(str_bytes(v)))
                                            .with_source(DYNAMIC_TOPIC_CONFIG),
                                    );
                                }
                                if let Some(v) = broker_value {
                                    synonyms.push(
                                        DescribeConfigsSynonym::default()
                                            .with_name(str_bytes(broker_key))
                                            .with_value(Some(str_bytes(v)))
                                            .with_source(STATIC_BROKER_CONFIG),
                                    );
                                }
                                let default = broker.config.topic_defaults.value_of(key);
                                synonyms.push(
                                    DescribeConfigsSynonym::default()
                                        .with_name(str_bytes(broker_key))
                                        .with_value(Some(str_bytes(&default)))
                                        .with_source(DEFAULT_CONFIG),
                                );
                            }
                            entry(key, &value, source, synonyms, version)
                        })
                        .collect(),
                },
                RESOURCE_BROKER => {
                    let ours = resource.resource_name.is_empty()
                        || resource.resource_name.as_str() == broker.config.node_id.to_string();
                    if !ours {
                        return result
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_error_message(Some(str_bytes("unknown broker id")));
                    }
                    broker_entries(broker)
                        .into_iter()
                        .filter(|(key, _, _)| wanted(key))
                        .map(|(key, value, source)| {
                            let synonyms = if req.include_synonyms {
                                vec![DescribeConfigsSynonym::default()
                                    .with_name(str_bytes(&key))
                                    .with_value(Some(str_bytes(&value)))
                                    .with_source(source)]
                            } else {
                                Vec::new()
                            };
                            entry(&key, &value, source, synonyms, version)
                        })
                        .collect()
                }
                _ => {
                    return result
                        .with_error_code(ResponseError::InvalidRequest.code())
                        .with_error_message(Some(str_bytes("unsupported resource type")))
                }
            };
            result.with_configs(entries)
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn entry(
    key: &str,
    value: &str,
    source: i8,
    synonyms: Vec<DescribeConfigsSynonym>,
    version: i16,
) -> DescribeConfigsResourceResult {
    let e = DescribeConfigsResourceResult::default()
        .with_name(str_bytes(key))
        .with_value(Some(str_bytes(value)))
        .with_config_source(source)
        .with_synonyms(synonyms);
    if version >= 3 {
        e.with_config_type(config_type(key))
    } else {
        e
    }
}

/// Broker configs: the broker-level names of every topic default plus the main broker settings.
fn broker_entries(broker: &Broker) -> Vec<(String, String, i8)> {
    let c = &broker.config;
    let source = |key: &str| if c.properties.contains_key(key) { STATIC_BROKER_CONFIG } else { DEFAULT_CONFIG };
    let mut out: Vec<(String, String, i8)> = TOPIC_CONFIG_KEYS
        .iter()
        .map(|(topic_key, broker_key)| {
            (broker_key.to_string(), c.topic_defaults.value_of(topic_key), source(broker_key))
        })
        .collect();
    let listeners =
        c.listeners.iter().map(|l| format!("{}://{}:{}", l.name, l.host, l.port)).collect::<Vec<_>>().join(",");
    for (key, value) in [
        ("node.id", c.node_id.to_string()),
        ("listeners", listeners),
        ("log.dirs", c.log_dir().display().to_string()),
        ("num.partitions", c.num_partitions.to_string()),
        ("default.replication.factor", c.default_replication_factor.to_string()),
        ("auto.create.topics.enable", c.auto_create_topics_enable.to_string()),
        ("delete.topic.enable", c.delete_topic_enable.to_string()),
        ("socket.request.max.bytes", c.socket_request_max_bytes.to_string()),
        ("fetch.max.bytes", c.fetch_max_bytes.to_string()),
        ("log.retention.check.interval.ms", c.log_retention_check_interval_ms.to_string()),
    ] {
        let s = source(key);
        out.push((key.to_string(), value, s));
    }
    out
}

pub fn create_partitions(broker: &Arc<Broker>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let node = broker.config.node_id;
    let results = req
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let bad_assignment =
                t.assignments.as_ref().is_some_and(|a| a.iter().any(|x| x.broker_ids.iter().any(|b| b.0 != node)));
            let outcome = if bad_assignment {
                Err((ResponseError::InvalidReplicaAssignment, format!("only broker {node} exists")))
            } else if t.name.0.starts_with("__") {
                Err((ResponseError::InvalidPartitions, "internal topics cannot be changed".to_string()))
            } else {
                broker
                    .topics
                    .add_partitions(t.name.0.as_str(), t.count, req.validate_only)
                    .map_err(|e| (e.error, e.message))
            };
            match outcome {
                Ok(()) => result,
                Err((error, message)) => {
                    result.with_error_code(error.code()).with_error_message(Some(str_bytes(&message)))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

pub fn describe_cluster(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    // Endpoint type 2 (controllers) is not served: this single node is a broker.
    if version >= 1 && req.endpoint_type == 2 {
        return DescribeClusterResponse::default()
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_endpoint_type(req.endpoint_type)
            .with_controller_id(BrokerId(-1));
    }
    let (host, port) = advertised_endpoint(broker, ctx);
    let node = BrokerId(broker.config.node_id);
    let response = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.cluster_id))
        .with_controller_id(node)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(str_bytes(&host))
            .with_port(port)])
        .with_cluster_authorized_operations(i32::MIN);
    if version >= 1 {
        response.with_endpoint_type(1)
    } else {
        response
    }
}

/// Applies topic config changes and runs retention at once, so that e.g. a lowered
/// `retention.ms` deletes segments right away rather than at the next check.
fn apply_topic_config(
    broker: &Arc<Broker>,
    name: &str,
    overrides: crate::config::Properties,
    validate_only: bool,
) -> Result<(), (ResponseError, String)> {
    if broker.topics.get(name).is_none() {
        return Err((ResponseError::UnknownTopicOrPartition, format!("topic {name} does not exist")));
    }
    let topic = broker.topics.alter_config(name, overrides, validate_only).map_err(|e| (e.error, e.message))?;
    if !validate_only {
        let now = crate::log::now_ms();
        for partition in &topic.partitions {
            if let Err(e) = partition.log().apply_retention(now) {
                tracing::error!(topic = name, error = %e, "retention after config change failed");
            }
        }
    }
    Ok(())
}

fn broker_configs_unsupported() -> (ResponseError, String) {
    (
        ResponseError::InvalidRequest,
        "dynamic broker configs are not supported yet; set them in server.properties or with --override".to_string(),
    )
}

pub fn alter_configs(broker: &Arc<Broker>, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let outcome = match r.resource_type {
                RESOURCE_TOPIC => {
                    // Legacy AlterConfigs replaces the whole set of overrides.
                    let overrides = r
                        .configs
                        .iter()
                        .filter_map(|c| c.value.as_ref().map(|v| (c.name.as_str().to_string(), v.as_str().to_string())))
                        .collect();
                    apply_topic_config(broker, r.resource_name.as_str(), overrides, req.validate_only)
                }
                RESOURCE_BROKER => Err(broker_configs_unsupported()),
                _ => Err((ResponseError::InvalidRequest, "unsupported resource type".to_string())),
            };
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match outcome {
                Ok(()) => response,
                Err((e, message)) => response.with_error_code(e.code()).with_error_message(Some(str_bytes(&message))),
            }
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

pub fn incremental_alter_configs(
    broker: &Arc<Broker>,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let responses = req
        .resources
        .iter()
        .map(|r| {
            let outcome = match r.resource_type {
                RESOURCE_TOPIC => match broker.topics.get(r.resource_name.as_str()) {
                    None => Err((ResponseError::UnknownTopicOrPartition, "topic does not exist".to_string())),
                    Some(topic) => {
                        let mut overrides = topic.overrides.clone();
                        let mut error = None;
                        for c in &r.configs {
                            let key = c.name.as_str().to_string();
                            let value = c.value.as_ref().map(|v| v.as_str().to_string()).unwrap_or_default();
                            let list = |o: &crate::config::Properties| -> Vec<String> {
                                o.get(&key)
                                    .cloned()
                                    .unwrap_or_else(|| topic.config.value_of(&key))
                                    .split(',')
                                    .filter(|s| !s.is_empty())
                                    .map(str::to_string)
                                    .collect()
                            };
                            match c.config_operation {
                                OP_SET => {
                                    overrides.insert(key, value);
                                }
                                OP_DELETE => {
                                    overrides.remove(&key);
                                }
                                OP_APPEND | OP_SUBTRACT if config_type(&key) == TYPE_LIST => {
                                    let mut items = list(&overrides);
                                    for v in value.split(',').filter(|s| !s.is_empty()) {
                                        if c.config_operation == OP_APPEND && !items.iter().any(|i| i == v) {
                                            items.push(v.to_string());
                                        } else if c.config_operation == OP_SUBTRACT {
                                            items.retain(|i| i != v);
                                        }
                                    }
                                    overrides.insert(key, items.join(","));
                                }
                                OP_APPEND | OP_SUBTRACT => {
                                    error = Some((
                                        ResponseError::InvalidConfig,
                                        format!("{key} is not a list: APPEND and SUBTRACT do not apply"),
                                    ))
                                }
                                other => {
                                    error = Some((
                                        ResponseError::InvalidRequest,
                                        format!("unknown config operation {other}"),
                                    ))
                                }
                            }
                        }
                        match error {
                            Some(e) => Err(e),
                            None => apply_topic_config(broker, r.resource_name.as_str(), overrides, req.validate_only),
                        }
                    }
                },
                RESOURCE_BROKER => Err(broker_configs_unsupported()),
                _ => Err((ResponseError::InvalidRequest, "unsupported resource type".to_string())),
            };
            let response = IncrementalAlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match outcome {
                Ok(()) => response,
                Err((e, message)) => response.with_error_code(e.code()).with_error_message(Some(str_bytes(&message))),
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

pub fn delete_records(broker: &Arc<Broker>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    let Some(partition) = broker.topics.partition(t.name.0.as_str(), p.partition_index) else {
                        return result.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let moved = partition.log().delete_records_before(p.offset);
                    match moved {
                        Ok(low) => result.with_low_watermark(low),
                        Err(e) => result.with_error_code(e.code()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
