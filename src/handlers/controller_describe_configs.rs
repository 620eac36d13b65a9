//! DescribeConfigs on a Ketch controller (Kafka's `ControllerApis.handleDescribeConfigsRequest`,
//! its `ConfigHelper` over the controller's metadata image): what `kafka-configs
//! --bootstrap-controller` reads, before every `--alter` too. Topics of the image with their
//! dynamic configs; BROKER resources "" (the cluster default) and this node's id, from the
//! image's ConfigRecords over this node's static configuration; BROKER_LOGGER of this node
//! (none). Entries are built by the broker's `configs.rs`, so that a controller and a broker
//! describe alike.
//!
//! Not yet: ACLs on the controller, GROUP and CLIENT_METRICS resources.
//! Invariants: read-only (the image as of the last durable change); a resource's error never
//! fails the others.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResponse, DescribeConfigsResult};

use super::configs::{broker_entries, finish_entries, topic_entries, Layers};
use super::str_bytes;
use crate::config::{BrokerConfig, Properties, TopicConfig};
use crate::controller::config_changes::{BROKER, BROKER_LOGGER, TOPIC};
use crate::controller::quorum::{ControllerSettings, QuorumController};
use crate::dynconf::{defs, scope_of};
use crate::metadata::image::MetadataImage;
use crate::metadata::validate_topic_name;

pub fn describe_configs(
    controller: &QuorumController,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let image = controller.image();
    let settings = &controller.settings;
    let node_id = settings.config.node_id;
    let dynamic = |name: &str| image.configs.get(&(BROKER, name.to_string())).cloned().unwrap_or_default();
    let (per_node, cluster_default) = (dynamic(&node_id.to_string()), dynamic(""));
    let topic_defaults = effective_topic_defaults(settings, &cluster_default, &per_node);
    let layers = Layers::new(per_node, cluster_default, settings.static_props.clone());
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let refused = |error: ResponseError, message: &str| {
                result.clone().with_error_code(error.code()).with_error_message(Some(str_bytes(message)))
            };
            // Kafka: no key list, or an empty one, means every config.
            let wanted = |key: &str| {
                resource.configuration_keys.as_ref().is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k == key))
            };
            let doc = request.include_documentation;
            let entries = match resource.resource_type {
                TOPIC => match topic_config(&image, &topic_defaults, name) {
                    Ok((config, overrides)) => topic_entries(&layers, &config, &overrides, &wanted, doc),
                    Err((error, message)) => return refused(error, &message),
                },
                BROKER => match scope_of(node_id, name) {
                    Ok(scope) => broker_entries(&layers, scope, &wanted, doc),
                    Err((error, message)) => return refused(error, &message),
                },
                BROKER_LOGGER if scope_of(node_id, name).is_ok() => Vec::new(),
                other => return refused(ResponseError::InvalidRequest, &format!("Unsupported resource type: {other}")),
            };
            // Kafka leaves the message of a success at its default, "".
            result
                .with_configs(finish_entries(entries, request.include_synonyms, version))
                .with_error_message(Some(str_bytes("")))
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// A topic's effective config and its overrides (ConfigRecords), or Kafka's error for a name it
/// does not have: an illegal name INVALID_TOPIC_EXCEPTION with its reason, an unknown one
/// UNKNOWN_TOPIC_OR_PARTITION with an empty message.
fn topic_config(
    image: &MetadataImage,
    defaults: &TopicConfig,
    name: &str,
) -> Result<(TopicConfig, Properties), (ResponseError, String)> {
    if image.topic(name).is_none() {
        validate_topic_name(name).map_err(|e| (e.error, e.message))?;
        return Err((ResponseError::UnknownTopicOrPartition, String::new()));
    }
    let overrides = image.configs.get(&(TOPIC, name.to_string())).cloned().unwrap_or_default();
    // Overrides the controller validated; one it would refuse now is shown with the defaults.
    let config = defaults.with_overrides(&overrides).unwrap_or_else(|_| defaults.clone());
    Ok((config, overrides))
}

/// The topic defaults of this node with the dynamic broker configs of the image applied (the
/// cluster default, then this node's), as a broker's `DynamicConfigs` applies them.
fn effective_topic_defaults(
    settings: &ControllerSettings,
    cluster_default: &Properties,
    per_node: &Properties,
) -> TopicConfig {
    if cluster_default.is_empty() && per_node.is_empty() {
        return settings.topic_defaults.clone();
    }
    let mut merged = settings.static_props.clone();
    for (key, value) in cluster_default.iter().chain(per_node) {
        if defs::lookup(key).is_some_and(|d| d.applied) {
            merged.insert(key.clone(), value.trim().to_string());
        }
    }
    BrokerConfig::from_properties(merged).map_or_else(|_| settings.topic_defaults.clone(), |c| c.topic_defaults)
}
