//! Config changes on a Ketch controller (Kafka's `ConfigurationControlManager` with the
//! controller's `ControllerConfigurationValidator` and `ConfigResourceExistenceChecker`): given
//! the metadata image and one resource's wanted change (IncrementalAlterConfigs' operations, or
//! legacy AlterConfigs' whole new set), the ConfigRecords that make it, or Kafka's refusal.
//! Pure functions: the caller writes the records of all resources as one change.
//!
//! Kafka's order, kept here: the operations make the new values (an APPEND / SUBTRACT on a name
//! that is not a LIST is refused at once); then each new value is checked (the ELR rules on
//! `min.insync.replicas`, the 32767-character limit); then the validator (the resource name;
//! a topic's whole resulting set against the controller's topic defaults, with the broker's
//! messages; a broker resource's name only: Kafka's controller does not check broker config
//! values, the forwarding broker does; a group's whole set with Kafka's `GroupConfig` rules and
//! the controller's own `group.*` bounds); then the resource must exist (a topic of the image; a
//! registered broker or this controller; "" is the cluster default; any group name but "").
//! Invariants: a refused resource yields no record; a record is made only for a name whose value
//! changes, except on BROKER resources, where Kafka writes every name given (KAFKA-14136: the
//! brokers reload); legacy AlterConfigs deletes every dynamic name not given.

use kafka_protocol::error::ResponseError;

use crate::config::{Properties, TopicConfig};
use crate::dynconf::defs::{self, Type};
use crate::dynconf::group as group_config;
use crate::metadata::image::MetadataImage;
use crate::metadata::records::{ClearElrRecord, ConfigRecord, MetadataRecord};
use crate::metadata::validate_topic_name;
use crate::security::redact::ConfigValue;

/// Kafka's `ConfigResource.Type` ids.
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const BROKER_LOGGER: i8 = 8;
pub const CLIENT_METRICS: i8 = 16;
pub const GROUP: i8 = 32;

/// Kafka's `AlterConfigOp.OpType` ids.
pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

/// Kafka's limit on a config value (`ConfigurationControlManager`), in UTF-16 units.
const MAX_VALUE_LENGTH: usize = 32767;
const MIN_ISR: &str = "min.insync.replicas";

pub type Refusal = (ResponseError, String);

/// What a change of one resource cannot be decided for at all: Kafka's controller fails the
/// whole request (an unknown operation, an APPEND / SUBTRACT without a value), every resource
/// answered UNKNOWN_SERVER_ERROR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unprocessable;

/// What a change is decided with, besides the image.
/// Its `Debug` hides the values of password configs (`security::redact`).
#[derive(Clone, Copy)]
pub struct ConfigContext<'a> {
    /// The controller's topic config defaults (its static configs over Kafka's defaults).
    pub topic_defaults: &'a TopicConfig,
    /// This controller's node id (a BROKER resource may name it).
    pub controller_id: i32,
    /// Its static settings: a GROUP resource's defaults and bounds (`group.consumer.*`, ...).
    pub group_settings: &'a Properties,
}

impl std::fmt::Debug for ConfigContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field, by name: a new field does not compile until it is printed here too.
        let ConfigContext { topic_defaults, controller_id, group_settings } = self;
        f.debug_struct("ConfigContext")
            .field("topic_defaults", topic_defaults)
            .field("controller_id", controller_id)
            .field("group_settings", &crate::security::redact::Configs(group_settings))
            .finish()
    }
}

/// One operation of IncrementalAlterConfigs. Its `Debug` hides a password config's value.
#[derive(Clone, PartialEq, Eq)]
pub struct Op {
    pub name: String,
    pub op: i8,
    pub value: Option<String>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op")
            .field("name", &self.name)
            .field("op", &self.op)
            .field("value", &ConfigValue(&self.name, self.value.as_deref()))
            .finish()
    }
}

/// The wanted change of one resource. Its `Debug` hides password configs' values.
#[derive(Clone)]
pub enum Change {
    /// IncrementalAlterConfigs: per name, one operation (a name given twice: the last, as Kafka).
    Incremental(Vec<Op>),
    /// Legacy AlterConfigs: the whole new set (a null value deletes the name).
    Replace(Vec<(String, Option<String>)>),
}

impl std::fmt::Debug for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Incremental(ops) => f.debug_tuple("Incremental").field(ops).finish(),
            Change::Replace(set) => {
                let shown: Vec<_> =
                    set.iter().map(|(name, value)| (name, ConfigValue(name, value.as_deref()))).collect();
                f.debug_tuple("Replace").field(&shown).finish()
            }
        }
    }
}

/// The outcome for one resource: its records, or Kafka's refusal.
pub type Outcome = Result<Vec<MetadataRecord>, Refusal>;

/// The ConfigRecords (and, with ELR on, the ClearElrRecords) that make `change` on the resource
/// `(resource_type, name)`, decided on `image`.
pub fn alter_resource(
    image: &MetadataImage,
    ctx: &ConfigContext<'_>,
    resource_type: i8,
    name: &str,
    change: &Change,
) -> Result<Outcome, Unprocessable> {
    let current = image.configs.get(&(resource_type, name.to_string()));
    let current_value = |key: &str| current.and_then(|c| c.get(key)).cloned();
    let record = |key: &str, value: Option<String>| ConfigRecord {
        resource_type,
        resource_name: name.to_string(),
        name: key.to_string(),
        value,
        ..Default::default()
    };
    let always = resource_type == BROKER;
    let mut explicit = Vec::new();
    let mut implicit = Vec::new();
    match change {
        Change::Incremental(ops) => {
            for op in last_of_each_name(ops) {
                let old = current_value(&op.name);
                let new = match op.op {
                    OP_SET => op.value.clone(),
                    OP_DELETE => None,
                    OP_APPEND | OP_SUBTRACT => {
                        let verb = if op.op == OP_APPEND { "APPEND" } else { "SUBTRACT" };
                        if !splittable(resource_type, &op.name) {
                            let message = format!("Can't {verb} to key {} because its type is not LIST.", op.name);
                            return Ok(Err((ResponseError::InvalidConfig, message)));
                        }
                        let Some(value) = &op.value else { return Err(Unprocessable) };
                        let mut parts = parts_of(old.clone().or_else(|| kafka_default(resource_type, &op.name)));
                        for v in java_split(value) {
                            if op.op == OP_APPEND && !parts.contains(&v) {
                                parts.push(v);
                            } else if op.op == OP_SUBTRACT {
                                // Java's List.remove: the first occurrence.
                                if let Some(i) = parts.iter().position(|p| *p == v) {
                                    parts.remove(i);
                                }
                            }
                        }
                        Some(parts.join(","))
                    }
                    _ => return Err(Unprocessable),
                };
                if new != old || always {
                    explicit.push(record(&op.name, new));
                }
            }
        }
        Change::Replace(set) => {
            let mut given: Vec<(&str, &Option<String>)> = Vec::new();
            for (key, value) in set {
                match given.iter_mut().find(|(k, _)| *k == key.as_str()) {
                    Some(kept) => kept.1 = value,
                    None => given.push((key.as_str(), value)),
                }
            }
            for (key, new) in &given {
                if **new != current_value(key) || always {
                    explicit.push(record(key, (*new).clone()));
                }
            }
            for key in current.into_iter().flat_map(|c| c.keys()) {
                if !given.iter().any(|(k, _)| *k == key.as_str()) {
                    implicit.push(record(key, None));
                }
            }
        }
    }
    if let Err(refusal) = validate(image, ctx, resource_type, name, &explicit, &implicit) {
        return Ok(Err(refusal));
    }
    let elr_cleared: Vec<MetadataRecord> = if elr_enabled(image) {
        explicit
            .iter()
            .chain(&implicit)
            .filter(|r| r.name == MIN_ISR)
            .map(|r| {
                let topic_name = if resource_type == TOPIC { r.resource_name.clone() } else { String::new() };
                MetadataRecord::ClearElr(ClearElrRecord { topic_name, ..Default::default() })
            })
            .collect()
    } else {
        Vec::new()
    };
    let records = explicit.into_iter().chain(implicit).map(MetadataRecord::Config).chain(elr_cleared).collect();
    Ok(Ok(records))
}

/// Kafka keeps one operation per name (a map): the last one given, at its first name's place.
fn last_of_each_name(ops: &[Op]) -> Vec<&Op> {
    let mut kept: Vec<&Op> = Vec::new();
    for op in ops {
        match kept.iter_mut().find(|k| k.name == op.name) {
            Some(k) => *k = op,
            None => kept.push(op),
        }
    }
    kept
}

/// Kafka's `KafkaConfigSchema.isSplittable`: the name's type is LIST.
fn splittable(resource_type: i8, key: &str) -> bool {
    match resource_type {
        TOPIC => defs::topic_config_type(key) == Type::List,
        BROKER => defs::lookup(key).is_some_and(|d| d.kind == Type::List),
        _ => false,
    }
}

/// Kafka's `KafkaConfigSchema.getDefault` of a LIST name (what APPEND / SUBTRACT start from
/// when the resource does not set it).
fn kafka_default(resource_type: i8, key: &str) -> Option<String> {
    match (resource_type, key) {
        (TOPIC, "cleanup.policy") => Some("delete".to_string()),
        (TOPIC, _) => Some(String::new()),
        (BROKER, _) => defs::lookup(key).and_then(|d| d.default).map(str::to_string),
        _ => None,
    }
}

/// Kafka's `getParts`: the non-empty items of a list value.
fn parts_of(value: Option<String>) -> Vec<String> {
    value.map_or_else(Vec::new, |v| v.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
}

/// Java's `String.split(",")`: trailing empty items dropped, but "" is one empty item.
fn java_split(value: &str) -> Vec<String> {
    if value.is_empty() {
        return vec![String::new()];
    }
    let mut items: Vec<String> = value.split(',').map(str::to_string).collect();
    while items.last().is_some_and(String::is_empty) {
        items.pop();
    }
    items
}

/// Kafka's `FeatureControlManager.isElrFeatureEnabled`.
fn elr_enabled(image: &MetadataImage) -> bool {
    super::elr::enabled(image)
}

/// Kafka's `validateAlterConfig`: the new values, then the validator, then existence.
fn validate(
    image: &MetadataImage,
    ctx: &ConfigContext<'_>,
    resource_type: i8,
    name: &str,
    explicit: &[ConfigRecord],
    implicit: &[ConfigRecord],
) -> Result<(), Refusal> {
    let invalid_config = |message: &str| (ResponseError::InvalidConfig, message.to_string());
    let mut all = image.configs.get(&(resource_type, name.to_string())).cloned().unwrap_or_default();
    let elr = elr_enabled(image);
    for (r, is_explicit) in explicit.iter().map(|r| (r, true)).chain(implicit.iter().map(|r| (r, false))) {
        if elr && r.name == MIN_ISR && resource_type == BROKER {
            if !name.is_empty() {
                return Err(invalid_config("Broker-level min.insync.replicas cannot be altered while ELR is enabled."));
            }
            if r.value.is_none() {
                return Err(invalid_config(
                    "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
                ));
            }
        }
        match (&r.value, is_explicit) {
            (Some(value), true) => {
                if value.encode_utf16().count() > MAX_VALUE_LENGTH {
                    return Err(invalid_config(
                        "The configuration value cannot be added because it exceeds the maximum value size of \
                         32767 bytes.",
                    ));
                }
                all.insert(r.name.clone(), value.clone());
            }
            _ => {
                all.remove(&r.name);
            }
        }
    }
    let invalid_request = |message: &str| (ResponseError::InvalidRequest, message.to_string());
    match resource_type {
        TOPIC => {
            if name.is_empty() {
                return Err(invalid_request("Default topic resources are not allowed."));
            }
            validate_topic_name(name).map_err(|e| (e.error, e.message))?;
            let overrides = all.into_iter().collect();
            ctx.topic_defaults.with_overrides(&overrides).map_err(|e| (ResponseError::InvalidConfig, e.to_string()))?;
            if image.topic(name).is_none() {
                return Err((ResponseError::UnknownTopicOrPartition, format!("The topic '{name}' does not exist.")));
            }
        }
        BROKER => {
            if name.is_empty() {
                return Ok(());
            }
            let id: i32 =
                name.parse().map_err(|_| invalid_request("Unable to parse broker name as a base 10 number."))?;
            if id < 0 {
                return Err(invalid_request("Invalid negative broker ID."));
            }
            if !image.brokers.contains_key(&id) && id != ctx.controller_id {
                return Err((ResponseError::BrokerIdNotRegistered, format!("No node with id {id} found.")));
            }
        }
        CLIENT_METRICS => {
            return Err(invalid_request("Altering CLIENT_METRICS configs is not supported by this controller yet."))
        }
        GROUP => {
            // Kafka's ControllerConfigurationValidator: no default group, then the whole set.
            if name.is_empty() {
                return Err(invalid_request("Default group resources are not allowed."));
            }
            group_config::validate(&all, ctx.group_settings).map_err(|m| (ResponseError::InvalidConfig, m))?;
        }
        other => return Err(invalid_request(&format!("Unknown resource type {other}"))),
    }
    Ok(())
}

#[cfg(test)]
#[path = "config_changes_tests.rs"]
mod tests;
