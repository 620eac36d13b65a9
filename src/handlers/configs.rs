//! Config APIs: DescribeConfigs (topics, this broker, the cluster default, groups), AlterConfigs
//! and IncrementalAlterConfigs (topic configs; dynamic broker configs per broker and
//! cluster-wide; group configs, in `group_configs.rs`).
//!
//! Owns: how configs are reported, the way Kafka's `ConfigHelper` does it: sources, synonyms
//! (every layer of every synonym name: per-broker, cluster default, static, default, then
//! dropped up to the first entry of the described name), read-only flags, types, documentation;
//! and turning alter operations into new topic overrides or dynamic broker config sets.
//! Authorization (Kafka's): DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the group, or the
//! cluster for broker resources, refused per resource with TOPIC / GROUP / CLUSTER
//! _AUTHORIZATION_FAILED (after the request's own checks when altering, as Kafka).
//! Invariants: a refused resource changes nothing; a broker config change is validated and
//! persisted by `DynamicConfigs` before `Broker::reconfigure` applies it to the topics.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{AlterConfigsResourceResponse, AlterConfigsResponse};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsRequest;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::incremental_alter_configs_request::{AlterableConfig, IncrementalAlterConfigsRequest};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::config::{topic_config_names, Properties, TopicConfig, TOPIC_CONFIG_KEYS};
use crate::dynconf::defs::{self, Type};
use crate::dynconf::{Refusal, Scope};
use crate::error::default_message;
use crate::metadata::validate_topic_name;
use crate::security::acl;
use crate::security::authorizer::Authz;

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
const RESOURCE_CLIENT_METRICS: i8 = 16;
const RESOURCE_GROUP: i8 = 32;
// Kafka's ConfigSource values.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;
// Kafka's ConfigType for a name it does not know.
const TYPE_UNKNOWN: i8 = 0;

/// One synonym: (name, value, source).
type Synonym = (String, Option<String>, i8);

/// The layers a broker config value can come from, highest precedence first.
pub(crate) struct Layers {
    per_broker: Properties,
    cluster_default: Properties,
    static_props: Properties,
}

impl Layers {
    fn of(broker: &Broker) -> Layers {
        Layers::new(
            broker.dynamic.get(Scope::Broker),
            broker.dynamic.get(Scope::ClusterDefault),
            broker.dynamic.static_props().clone(),
        )
    }

    /// The layers of a node with these dynamic sets (its own, the cluster default) and static
    /// settings.
    pub(crate) fn new(per_broker: Properties, cluster_default: Properties, mut static_props: Properties) -> Layers {
        // Kafka's `populateSynonyms`: node.id and broker.id stand for each other.
        for (from, to) in [("node.id", "broker.id"), ("broker.id", "node.id")] {
            if let (Some(v), false) = (static_props.get(from).cloned(), static_props.contains_key(to)) {
                static_props.insert(to.to_string(), v);
            }
        }
        Layers { per_broker, cluster_default, static_props }
    }

    /// Kafka's `ConfigHelper.configSynonyms`: each layer in turn, each synonym name within it;
    /// entries before the first one named `name` are dropped (e.g. describing
    /// `log.retention.hours` does not list a `log.retention.ms` set dynamically).
    fn synonyms(&self, name: &str) -> Vec<Synonym> {
        let names = defs::synonyms(name);
        let mut all = Vec::new();
        type Layer<'a> = (i8, &'a dyn Fn(&str) -> Option<String>);
        let layers: [Layer<'_>; 4] = [
            (DYNAMIC_BROKER_CONFIG, &|n| self.per_broker.get(n).cloned()),
            (DYNAMIC_DEFAULT_BROKER_CONFIG, &|n| self.cluster_default.get(n).cloned()),
            (STATIC_BROKER_CONFIG, &|n| self.static_props.get(n).cloned()),
            (DEFAULT_CONFIG, &|n| defs::lookup(n).and_then(|d| d.default).map(str::to_string)),
        ];
        for (source, get) in layers {
            for n in &names {
                if let Some(v) = get(n) {
                    all.push((n.to_string(), Some(v), source));
                }
            }
        }
        all.into_iter().skip_while(|(n, _, _)| n != name).collect()
    }
}

/// Kafka's check of a config resource (`ConfigHelper`, `ControllerApis.authorizeAlterResource`):
/// `operation` on the topic, the group, or the cluster for broker-wide resources, refused with
/// the matching error and its default message. Other types are left to the handler.
pub(super) fn authorize_config(authz: &Authz<'_>, operation: i8, resource_type: i8, name: &str) -> Result<(), Refusal> {
    let (allowed, error) = match resource_type {
        RESOURCE_TOPIC => (authz.allows(operation, acl::TOPIC, name), ResponseError::TopicAuthorizationFailed),
        RESOURCE_GROUP => (authz.allows(operation, acl::GROUP, name), ResponseError::GroupAuthorizationFailed),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER | RESOURCE_CLIENT_METRICS => {
            (authz.cluster(operation), ResponseError::ClusterAuthorizationFailed)
        }
        _ => return Ok(()),
    };
    if allowed {
        Ok(())
    } else {
        Err((error, default_message(error)))
    }
}

pub fn describe_configs(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
    version: i16,
) -> DescribeConfigsResponse {
    let authz = ctx.authz(broker);
    let results = req
        .resources
        .iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let name = resource.resource_name.as_str();
            if let Err((e, message)) = authorize_config(&authz, acl::DESCRIBE_CONFIGS, resource.resource_type, name) {
                return result.with_error_code(e.code()).with_error_message(Some(str_bytes(&message)));
            }
            // Kafka: no key list, or an empty one, means every config.
            let wanted = |key: &str| {
                resource.configuration_keys.as_ref().is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k == key))
            };
            let doc = req.include_documentation;
            let entries = match resource.resource_type {
                RESOURCE_TOPIC => match broker.topics.get(resource.resource_name.as_str()) {
                    // Kafka: an illegal name is INVALID_TOPIC_EXCEPTION with its reason; an unknown
                    // one UNKNOWN_TOPIC_OR_PARTITION with an empty message.
                    None => {
                        let (error, message) = match validate_topic_name(resource.resource_name.as_str()) {
                            Err(e) => (e.error, e.message),
                            Ok(()) => (ResponseError::UnknownTopicOrPartition, String::new()),
                        };
                        return result.with_error_code(error.code()).with_error_message(Some(str_bytes(&message)));
                    }
                    Some(topic) => topic_entries(&Layers::of(broker), &topic.config, &topic.overrides, &wanted, doc),
                },
                RESOURCE_BROKER => match broker.dynamic.scope_of(resource.resource_name.as_str()) {
                    Err((error, message)) => {
                        return result.with_error_code(error.code()).with_error_message(Some(str_bytes(&message)))
                    }
                    Ok(scope) => broker_entries(&Layers::of(broker), scope, &wanted, doc),
                },
                RESOURCE_GROUP => match super::group_configs::describe(broker, name, &wanted, doc) {
                    Ok(entries) => entries,
                    Err((error, message)) => {
                        return result.with_error_code(error.code()).with_error_message(Some(str_bytes(&message)))
                    }
                },
                // `kafka-configs --entity-type broker-loggers`: Ketch has no log4j loggers to list
                // or change (its log level is `ketch.log.level`).
                RESOURCE_BROKER_LOGGER if broker.dynamic.scope_of(resource.resource_name.as_str()).is_ok() => {
                    Vec::new()
                }
                _ => {
                    return result.with_error_code(ResponseError::InvalidRequest.code()).with_error_message(Some(
                        str_bytes(&format!("Unsupported resource type: {}", resource.resource_type)),
                    ))
                }
            };
            let entries = finish_entries(entries, req.include_synonyms, version);
            // Kafka leaves the message of a success at its default, "".
            result.with_configs(entries).with_error_message(Some(str_bytes("")))
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// The entries as the request's version and `include_synonyms` have them.
pub(crate) fn finish_entries(
    entries: Vec<DescribeConfigsResourceResult>,
    include_synonyms: bool,
    version: i16,
) -> Vec<DescribeConfigsResourceResult> {
    entries
        .into_iter()
        .map(|e| {
            let e = if include_synonyms { e } else { e.with_synonyms(Vec::new()) };
            if version >= 3 {
                e
            } else {
                e.with_config_type(TYPE_UNKNOWN).with_documentation(None)
            }
        })
        .collect()
}

fn synonym_entries(synonyms: &[Synonym]) -> Vec<DescribeConfigsSynonym> {
    synonyms
        .iter()
        .map(|(name, value, source)| {
            DescribeConfigsSynonym::default()
                .with_name(str_bytes(name))
                .with_value(value.as_deref().map(str_bytes))
                .with_source(*source)
        })
        .collect()
}

/// Where each topic config's value comes from (Kafka's ConfigSource), as CreateTopics reports
/// it: the topic's override, else the layer of its broker-level name (per-broker, cluster
/// default, static), else the default.
pub fn topic_config_sources(broker: &Broker) -> impl Fn(&str, bool) -> i8 {
    let layers = Layers::of(broker);
    move |key, overridden| {
        if overridden {
            return DYNAMIC_TOPIC_CONFIG;
        }
        let broker_key = TOPIC_CONFIG_KEYS.iter().find(|(k, _)| *k == key).map(|(_, b)| *b);
        broker_key.and_then(|b| layers.synonyms(b).first().map(|s| s.2)).unwrap_or(DEFAULT_CONFIG)
    }
}

/// Kafka's `createTopicConfigEntry`: every topic config Kafka 4.1 lists, with its value, source,
/// synonyms and type, and (when the request asks) Kafka's documentation of it.
pub(crate) fn topic_entries(
    layers: &Layers,
    config: &TopicConfig,
    overrides: &Properties,
    wanted: &dyn Fn(&str) -> bool,
    include_documentation: bool,
) -> Vec<DescribeConfigsResourceResult> {
    topic_config_names()
        .filter(|key| wanted(key))
        .map(|key| {
            let value = config.value_of(key);
            let broker_key = TOPIC_CONFIG_KEYS.iter().find(|(k, _)| *k == key).map(|(_, b)| *b);
            let mut synonyms = broker_key.map_or_else(Vec::new, |b| layers.synonyms(b));
            if overrides.contains_key(key) {
                synonyms.insert(0, (key.to_string(), Some(value.clone()), DYNAMIC_TOPIC_CONFIG));
            }
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(key))
                .with_value(Some(str_bytes(&value)))
                .with_config_source(synonyms.first().map_or(DEFAULT_CONFIG, |s| s.2))
                .with_synonyms(synonym_entries(&synonyms))
                .with_config_type(defs::topic_config_type(key) as i8)
                .with_documentation(defs::topic_config_doc(key).filter(|_| include_documentation).map(str_bytes))
        })
        .collect()
}

/// Kafka's `createBrokerConfigEntry`: this broker's configs (every one Kafka 4.1 lists, Ketch's
/// own, and any other name set statically or dynamically), or only the dynamic cluster-default
/// ones. Kafka's type, ReadOnly flag and documentation; a name of unknown type is treated as
/// sensitive, as Kafka does, and sensitive values are never shown.
pub(crate) fn broker_entries(
    layers: &Layers,
    scope: Scope,
    wanted: &dyn Fn(&str) -> bool,
    include_documentation: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let names: BTreeSet<String> = match scope {
        Scope::ClusterDefault => layers.cluster_default.keys().cloned().collect(),
        Scope::Broker => defs::all_names()
            .into_iter()
            .map(str::to_string)
            .chain(layers.static_props.keys().cloned())
            .chain(layers.cluster_default.keys().cloned())
            .chain(layers.per_broker.keys().cloned())
            .collect(),
    };
    names
        .iter()
        .filter(|name| wanted(name))
        .map(|name| {
            let def = defs::lookup(name);
            let kind = defs::config_type(name);
            let sensitive = kind.is_none_or(|k| k == Type::Password);
            let mut synonyms = layers.synonyms(name);
            if scope == Scope::ClusterDefault {
                synonyms.retain(|s| s.2 == DYNAMIC_DEFAULT_BROKER_CONFIG);
            }
            if sensitive {
                synonyms.iter_mut().for_each(|s| s.1 = None);
            }
            // This broker's values are parsed to their type and printed back; the cluster
            // default's are shown as stored.
            let value = synonyms.first().and_then(|s| s.1.clone()).map(|v| match (scope, kind) {
                (Scope::Broker, Some(kind)) => defs::render(kind, &v),
                _ => v,
            });
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(name))
                .with_value(value.as_deref().map(str_bytes))
                .with_config_source(synonyms.first().map_or(DEFAULT_CONFIG, |s| s.2))
                .with_is_sensitive(sensitive)
                .with_read_only(def.is_none_or(|d| d.read_only()))
                .with_synonyms(synonym_entries(&synonyms))
                .with_config_type(kind.map_or(TYPE_UNKNOWN, |k| k as i8))
                .with_documentation(def.and_then(|d| d.doc).filter(|_| include_documentation).map(str_bytes))
        })
        .collect()
}

/// Replaces the dynamic config set of a BROKER resource (`change` maps the current set to the
/// new one) and applies the result.
fn alter_broker(
    broker: &Arc<Broker>,
    resource_name: &str,
    validate_only: bool,
    change: impl FnOnce(&Properties) -> Result<Properties, Refusal>,
) -> Result<(), Refusal> {
    let scope = broker.dynamic.scope_of(resource_name)?;
    if let Some(effective) = broker.dynamic.alter(scope, validate_only, change)? {
        broker.reconfigure(&effective);
    }
    Ok(())
}

/// Applies topic config changes and runs retention at once, so that e.g. a lowered
/// `retention.ms` deletes segments right away rather than at the next check.
fn apply_topic_config(
    broker: &Arc<Broker>,
    name: &str,
    overrides: Properties,
    validate_only: bool,
) -> Result<(), Refusal> {
    if broker.topics.get(name).is_none() {
        return Err(unknown_topic(name));
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

/// Kafka's answer for a topic it does not have (QuorumController).
fn unknown_topic(name: &str) -> Refusal {
    (ResponseError::UnknownTopicOrPartition, format!("The topic '{name}' does not exist."))
}

/// Kafka's `ConfigAdminManager.preprocess`: a resource named twice in one request is refused
/// (both entries); then, per resource, a name given twice, and null values (`nulls_refused`
/// tells which entries may not be null).
fn preprocess<'a>(resources: impl Iterator<Item = (i8, &'a str, Vec<(&'a str, bool)>)>) -> Vec<Result<(), Refusal>> {
    let resources: Vec<_> = resources.collect();
    resources
        .iter()
        .map(|(kind, name, configs)| {
            if resources.iter().filter(|(k, n, _)| k == kind && n == name).count() > 1 {
                return Err((ResponseError::InvalidRequest, "Each resource must appear at most once.".to_string()));
            }
            let mut seen = std::collections::HashSet::new();
            if !configs.iter().all(|(key, _)| seen.insert(*key)) {
                return Err((ResponseError::InvalidRequest, "Error due to duplicate config keys".to_string()));
            }
            let nulls: Vec<&str> = configs.iter().filter(|(_, null)| *null).map(|(key, _)| *key).collect();
            if !nulls.is_empty() {
                return Err((
                    ResponseError::InvalidRequest,
                    format!("Null value not supported for : {}", nulls.join(", ")),
                ));
            }
            Ok(())
        })
        .collect()
}

/// The response's error code and message: Kafka leaves the message of a success null.
pub(crate) fn outcome_fields(outcome: Result<(), Refusal>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match outcome {
        Ok(()) => (0, None),
        // An unknown server error (e.g. an unknown operation) has no message.
        Err((ResponseError::UnknownServerError, _)) => (ResponseError::UnknownServerError.code(), None),
        Err((e, message)) => (e.code(), Some(str_bytes(&message))),
    }
}

pub fn alter_configs(broker: &Arc<Broker>, ctx: &RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let authz = ctx.authz(broker);
    let checks = preprocess(req.resources.iter().map(|r| {
        let configs = r.configs.iter().map(|c| (c.name.as_str(), c.value.is_none())).collect();
        (r.resource_type, r.resource_name.as_str(), configs)
    }));
    let responses = req
        .resources
        .iter()
        .zip(checks)
        .map(|(r, check)| {
            // Legacy AlterConfigs replaces the whole set (topic overrides, or dynamic broker configs).
            let set: Properties = r
                .configs
                .iter()
                .filter_map(|c| c.value.as_ref().map(|v| (c.name.as_str().to_string(), v.as_str().to_string())))
                .collect();
            let outcome = check
                .and_then(|()| authorize_config(&authz, acl::ALTER_CONFIGS, r.resource_type, r.resource_name.as_str()))
                .and_then(|()| match r.resource_type {
                    RESOURCE_TOPIC => apply_topic_config(broker, r.resource_name.as_str(), set, req.validate_only),
                    RESOURCE_BROKER => alter_broker(broker, r.resource_name.as_str(), req.validate_only, |_| Ok(set)),
                    RESOURCE_GROUP => {
                        let change = super::group_configs::replace(&set);
                        super::group_configs::alter(broker, r.resource_name.as_str(), change, req.validate_only)
                    }
                    _ => Err((ResponseError::InvalidRequest, "unsupported resource type".to_string())),
                });
            let (error_code, error_message) = outcome_fields(outcome);
            AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(error_code)
                .with_error_message(error_message)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}

/// What a broker of a controller quorum answers itself before forwarding a legacy AlterConfigs
/// (Kafka's `ConfigAdminManager.preprocess`): the request's own checks, authorization (a Ketch
/// controller does not authorize yet, even in an Envelope), and a BROKER resource's new set
/// checked against this broker's own dynamic configs (validate only: the controller does not
/// know this broker's static settings). `Ok` resources go to the controller.
pub fn alter_configs_preprocess(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: &AlterConfigsRequest,
) -> Vec<Result<(), Refusal>> {
    let authz = ctx.authz(broker);
    let checks = preprocess(req.resources.iter().map(|r| {
        let configs = r.configs.iter().map(|c| (c.name.as_str(), c.value.is_none())).collect();
        (r.resource_type, r.resource_name.as_str(), configs)
    }));
    req.resources
        .iter()
        .zip(checks)
        .map(|(r, check)| {
            let name = r.resource_name.as_str();
            let set: Properties = r
                .configs
                .iter()
                .filter_map(|c| c.value.as_ref().map(|v| (c.name.as_str().to_string(), v.as_str().to_string())))
                .collect();
            check.and_then(|()| authorize_config(&authz, acl::ALTER_CONFIGS, r.resource_type, name)).and_then(|()| {
                match r.resource_type {
                    RESOURCE_BROKER => alter_broker(broker, name, true, |_| Ok(set)),
                    RESOURCE_TOPIC | RESOURCE_GROUP | RESOURCE_CLIENT_METRICS => Ok(()),
                    other => Err((ResponseError::InvalidRequest, format!("Unknown resource type {other}"))),
                }
            })
        })
        .collect()
}

/// The same for IncrementalAlterConfigs: a BROKER resource's operations are applied to this
/// broker's current set and the result checked (validate only); BROKER_LOGGER is answered
/// here as on a single node.
pub fn incremental_alter_configs_preprocess(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: &IncrementalAlterConfigsRequest,
) -> Vec<Result<(), Refusal>> {
    let authz = ctx.authz(broker);
    let checks = preprocess(req.resources.iter().map(|r| {
        let configs = r.configs.iter().map(|c| (c.name.as_str(), c.value.is_none() && c.config_operation != OP_DELETE));
        (r.resource_type, r.resource_name.as_str(), configs.collect())
    }));
    req.resources
        .iter()
        .zip(checks)
        .map(|(r, check)| {
            let name = r.resource_name.as_str();
            check.and_then(|()| authorize_config(&authz, acl::ALTER_CONFIGS, r.resource_type, name)).and_then(|()| {
                match r.resource_type {
                    RESOURCE_BROKER => alter_broker(broker, name, true, |current| {
                        apply_ops(current, &r.configs, &|k| defs::config_type(k) == Some(Type::List), &|k| {
                            defs::lookup(k).and_then(|d| d.default).unwrap_or_default().to_string()
                        })
                    }),
                    RESOURCE_TOPIC | RESOURCE_GROUP | RESOURCE_CLIENT_METRICS => Ok(()),
                    RESOURCE_BROKER_LOGGER => Err((ResponseError::InvalidRequest, "unsupported resource type".into())),
                    other => Err((ResponseError::InvalidRequest, format!("Unknown resource type {other}"))),
                }
            })
        })
        .collect()
}

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Kafka's `prepareIncrementalConfigs`: applies SET / DELETE / APPEND / SUBTRACT to `current`.
/// `is_list` tells list-typed names; `base` is the value APPEND / SUBTRACT start from when
/// `current` does not hold the name.
fn apply_ops(
    current: &Properties,
    ops: &[AlterableConfig],
    is_list: &dyn Fn(&str) -> bool,
    base: &dyn Fn(&str) -> String,
) -> Result<Properties, Refusal> {
    let mut set = current.clone();
    for c in ops {
        let key = c.name.as_str().to_string();
        let value = c.value.as_ref().map(|v| v.as_str().to_string()).unwrap_or_default();
        match c.config_operation {
            OP_SET => {
                set.insert(key, value);
            }
            OP_DELETE => {
                set.remove(&key);
            }
            OP_APPEND | OP_SUBTRACT if is_list(&key) => {
                let old = set.get(&key).cloned().unwrap_or_else(|| base(&key));
                let mut items: Vec<String> =
                    old.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect();
                for v in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if c.config_operation == OP_APPEND && !items.iter().any(|i| i == v) {
                        items.push(v.to_string());
                    } else if c.config_operation == OP_SUBTRACT {
                        items.retain(|i| i != v);
                    }
                }
                set.insert(key, items.join(","));
            }
            OP_APPEND | OP_SUBTRACT => {
                let verb = if c.config_operation == OP_APPEND { "APPEND" } else { "SUBTRACT" };
                return Err((
                    ResponseError::InvalidConfig,
                    format!("Can't {verb} to key {key} because its type is not LIST."),
                ));
            }
            // Kafka fails to parse the operation: an unknown server error, without a message.
            other => return Err((ResponseError::UnknownServerError, format!("unknown config operation {other}"))),
        }
    }
    Ok(set)
}

pub fn incremental_alter_configs(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let authz = ctx.authz(broker);
    let checks = preprocess(req.resources.iter().map(|r| {
        let configs = r.configs.iter().map(|c| (c.name.as_str(), c.value.is_none() && c.config_operation != OP_DELETE));
        (r.resource_type, r.resource_name.as_str(), configs.collect())
    }));
    let responses = req
        .resources
        .iter()
        .zip(checks)
        .map(|(r, check)| {
            let name = r.resource_name.as_str();
            let outcome = check
                .and_then(|()| authorize_config(&authz, acl::ALTER_CONFIGS, r.resource_type, name))
                .and_then(|()| match r.resource_type {
                    RESOURCE_TOPIC => match broker.topics.get(name) {
                        None => Err(unknown_topic(name)),
                        Some(topic) => apply_ops(
                            &topic.overrides,
                            &r.configs,
                            &|k| defs::topic_config_type(k) == Type::List,
                            &|k| topic.config.value_of(k),
                        )
                        .and_then(|overrides| apply_topic_config(broker, name, overrides, req.validate_only)),
                    },
                    RESOURCE_BROKER => alter_broker(broker, name, req.validate_only, |current| {
                        apply_ops(current, &r.configs, &|k| defs::config_type(k) == Some(Type::List), &|k| {
                            defs::lookup(k).and_then(|d| d.default).unwrap_or_default().to_string()
                        })
                    }),
                    RESOURCE_GROUP => {
                        let change = super::controller_configs::incremental_change(&r.configs);
                        super::group_configs::alter(broker, name, change, req.validate_only)
                    }
                    _ => Err((ResponseError::InvalidRequest, "unsupported resource type".to_string())),
                });
            let (error_code, error_message) = outcome_fields(outcome);
            IncrementalAlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_error_code(error_code)
                .with_error_message(error_message)
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
