//! DescribeConfigs on a Ketch controller (Kafka's `ControllerApis.handleDescribeConfigsRequest`,
//! its `ConfigHelper` over the controller's metadata image): what `kafka-configs
//! --bootstrap-controller` reads, before every `--alter` too. Topics of the image with their
//! dynamic configs; BROKER resources "" (the cluster default) and this node's id, from the
//! image's ConfigRecords over this node's static configuration (those this node would apply,
//! as Kafka's controller describes its `DynamicBrokerConfig`); BROKER_LOGGER of this node
//! (none). Entries are built by the broker's `configs.rs`, so that a controller and a broker
//! describe alike.
//!
//! With an authorizer, a resource the caller may not DESCRIBE_CONFIGS (BROKER and BROKER_LOGGER
//! on the cluster, a TOPIC on itself) is answered with Kafka's authorization error and no entries.
//!
//! Not yet: GROUP and CLIENT_METRICS resources.
//! Invariants: read-only (the image as of the last durable change); a resource's error never
//! fails the others.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResponse, DescribeConfigsResult};

use super::configs::{authorize_config, broker_entries, finish_entries, topic_entries, Layers};
use super::str_bytes;
use crate::config::{BrokerConfig, Properties, TopicConfig};
use crate::controller::config_changes::{BROKER, BROKER_LOGGER, TOPIC};
use crate::controller::quorum::{ControllerSettings, QuorumController};
use crate::dynconf::{scope_of, DynamicConfigs, Scope};
use crate::metadata::image::MetadataImage;
use crate::metadata::validate_topic_name;
use crate::security::acl;
use crate::security::authorizer::Authz;

pub fn describe_configs(
    controller: &QuorumController,
    authz: &Authz<'_>,
    request: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let image = controller.image();
    let settings = &controller.settings;
    let node_id = settings.config.node_id;
    let (per_node, cluster_default, topic_defaults) = dynamic_configs(settings, &image);
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
            if let Err((error, message)) = authorize_config(authz, acl::DESCRIBE_CONFIGS, resource.resource_type, name)
            {
                return refused(error, &message);
            }
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

/// This node's dynamic broker configs (its own, the cluster default) and the topic defaults they
/// make, as Kafka's `DynamicBrokerConfig` on a controller holds them: the image's BROKER
/// ConfigRecords less the names and values this node refuses (Kafka's controller stores a
/// BROKER config without checking it, the forwarding broker checks; a name set directly on the
/// controller that is not dynamic, or a bad value, is in the image but not described).
fn dynamic_configs(settings: &ControllerSettings, image: &MetadataImage) -> (Properties, Properties, TopicConfig) {
    let set = |name: &str| image.configs.get(&(BROKER, name.to_string())).cloned().unwrap_or_default();
    let (per_node, cluster_default) = (set(&settings.config.node_id.to_string()), set(""));
    if per_node.is_empty() && cluster_default.is_empty() {
        return (per_node, cluster_default, settings.topic_defaults.clone());
    }
    let dynamic = BrokerConfig::from_properties(settings.static_props.clone())
        .map_err(anyhow::Error::from)
        .and_then(|config| DynamicConfigs::open(&config));
    match dynamic {
        Ok(dynamic) => {
            dynamic.adopt(&cluster_default, &per_node);
            let topic_defaults = dynamic.effective().topic_defaults.clone();
            (dynamic.get(Scope::Broker), dynamic.get(Scope::ClusterDefault), topic_defaults)
        }
        Err(e) => {
            tracing::warn!(error = %e, "dynamic broker configs of the image not checked");
            (per_node, cluster_default, settings.topic_defaults.clone())
        }
    }
}
