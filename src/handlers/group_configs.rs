//! GROUP config resources (`kafka-configs --entity-type groups`) on a broker.
//!
//! Owns: DescribeConfigs of a group (Kafka's `ConfigHelper.createGroupConfigEntry`: every group
//! config, the group's own value as GROUP_CONFIG or the broker's default as DEFAULT_CONFIG, one
//! synonym each, never read-only) and, on a node that is its own controller, AlterConfigs /
//! IncrementalAlterConfigs of one: decided exactly as a Ketch controller decides them
//! (`controller::config_changes`: Kafka's `GroupConfig` validation against this node's
//! `group.*` bounds), written to the metadata log as ConfigRecords, then adopted by the group
//! coordinator, whose next heartbeat of the group uses them. On a broker of a controller quorum
//! the change is forwarded to the controller and comes back through the metadata image.
//! Invariants: a refused change writes nothing; the coordinator sees a change only once durable.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsSynonym};

use super::str_bytes;
use crate::broker::Broker;
use crate::config::Properties;
use crate::controller::config_changes::{alter_resource, Change, ConfigContext, GROUP};
use crate::dynconf::group as group_config;
use crate::dynconf::Refusal;

/// Kafka's ConfigSource values.
const GROUP_CONFIG: i8 = 8;
const DEFAULT_CONFIG: i8 = 5;

/// The entries DescribeConfigs returns for group `name` (Kafka's `allConfigs` of its
/// GroupConfig: the ten configs, and any other name stored for the group, shown as a sensitive
/// config of unknown type, as Kafka shows it).
pub(super) fn describe(
    broker: &Broker,
    name: &str,
    wanted: &dyn Fn(&str) -> bool,
    include_documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>, Refusal> {
    if name.is_empty() {
        return Err((ResponseError::InvalidRequest, "Group name must not be empty".into()));
    }
    let set = broker.groups.configs_of(name);
    let settings = &broker.config.properties;
    let unknown = set.keys().filter(|k| group_config::lookup(k).is_none()).map(String::as_str);
    let known = group_config::names().map(|n| -> &str { n });
    let entries = known
        .chain(unknown)
        .filter(|n| wanted(n))
        .map(|n| {
            let def = group_config::lookup(n);
            let sensitive = def.is_none();
            let value = if sensitive { None } else { group_config::effective(n, &set, settings) };
            let source = if set.contains_key(n) { GROUP_CONFIG } else { DEFAULT_CONFIG };
            let synonym = DescribeConfigsSynonym::default()
                .with_name(str_bytes(n))
                .with_value(value.as_deref().map(str_bytes))
                .with_source(source);
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(n))
                .with_value(value.as_deref().map(str_bytes))
                .with_config_source(source)
                .with_is_sensitive(sensitive)
                .with_read_only(false)
                .with_synonyms(vec![synonym])
                .with_config_type(def.map_or(0, |d| d.kind as i8))
                .with_documentation(def.and_then(|d| d.doc).filter(|_| include_documentation).map(str_bytes))
        })
        .collect();
    Ok(entries)
}

/// Makes `change` on group `name`'s configs (nothing when `validate_only`) on a node that is its
/// own controller.
pub(super) fn alter(broker: &Arc<Broker>, name: &str, change: Change, validate_only: bool) -> Result<(), Refusal> {
    let topic_defaults = broker.topics.defaults();
    let ctx = ConfigContext {
        topic_defaults: &topic_defaults,
        controller_id: broker.config.node_id,
        group_settings: &broker.config.properties,
    };
    let changed = broker.topics.change_metadata(|image| match alter_resource(image, &ctx, GROUP, name, &change) {
        // An operation Kafka cannot parse: an unknown server error, without a message.
        Err(_unprocessable) => Err((ResponseError::UnknownServerError, String::new())),
        Ok(Err(refusal)) => Err(refusal),
        Ok(Ok(_)) if validate_only => Ok(Vec::new()),
        Ok(Ok(records)) => Ok(records),
    });
    match changed {
        Err(e) => Err((ResponseError::KafkaStorageError, e.to_string())),
        Ok(Err(refusal)) => Err(refusal),
        Ok(Ok(image)) => {
            broker.groups.adopt_configs(&image);
            Ok(())
        }
    }
}

/// A legacy AlterConfigs resource's whole new set as the controller takes it.
pub(super) fn replace(set: &Properties) -> Change {
    Change::Replace(set.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect())
}
