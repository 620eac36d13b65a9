//! IncrementalAlterConfigs and AlterConfigs on a Ketch controller (Kafka's `ControllerApis`
//! `handleIncrementalAlterConfigs` / `handleLegacyAlterConfigs`, brokers forward them and
//! `kafka-configs --bootstrap-controller` sends them directly): the request's resources sorted
//! out as Kafka does (an unknown resource type: UNSUPPORTED_VERSION; a resource named twice:
//! one INVALID_REQUEST "Duplicate resource.", the resource otherwise ignored; BROKER_LOGGER
//! resources answered by this node, which has no log4j loggers), then every remaining resource
//! decided on the image by `controller::config_changes` and all their records written as one
//! change, answered once durable.
//!
//! With an authorizer, a resource the caller (the connection's, or the client in a broker's
//! Envelope) may not ALTER_CONFIGS is refused first, as Kafka's `authorizeAlterResource`: BROKER,
//! BROKER_LOGGER and CLIENT_METRICS need it on the cluster (CLUSTER_AUTHORIZATION_FAILED), a TOPIC
//! or GROUP on itself (TOPIC_ / GROUP_AUTHORIZATION_FAILED).
//!
//! Not yet: AlterConfigPolicy, CLIENT_METRICS configs.
//! Invariants: `validate_only` writes nothing; a refused resource writes nothing; the response
//! lists the early refusals (request order), then the decided resources (request order), then
//! the BROKER_LOGGER ones, as Kafka does; an operation Kafka cannot process at all fails every
//! resource with UNKNOWN_SERVER_ERROR and writes nothing.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsRequest;
use kafka_protocol::messages::alter_configs_response::{AlterConfigsResourceResponse, AlterConfigsResponse};
use kafka_protocol::messages::incremental_alter_configs_request::{AlterableConfig, IncrementalAlterConfigsRequest};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse as IncrementalResourceResponse, IncrementalAlterConfigsResponse,
};

use super::configs::authorize_config;
use super::controller_apis::written;
use super::str_bytes;
use crate::controller::config_changes::{
    alter_resource, Change, ConfigContext, Op, Refusal, Unprocessable, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP,
    OP_APPEND, OP_DELETE, OP_SET, OP_SUBTRACT, TOPIC,
};
use crate::controller::quorum::QuorumController;
use crate::metadata::image::MetadataImage;
use crate::metadata::records::MetadataRecord;
use crate::security::acl;
use crate::security::authorizer::Authz;

/// The answer for one resource: `(resource type, resource name, error)`.
pub(crate) type Answer = (i8, String, Option<Refusal>);

/// A request's resources, sorted out before any is decided.
struct Sorted {
    refused: Vec<Answer>,
    changes: Vec<(i8, String, Change)>,
    loggers: Vec<Answer>,
}

pub fn incremental_alter_configs(
    controller: &QuorumController,
    authz: &Authz<'_>,
    mut request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let ctx = context(controller);
    let unauthorized = keep_authorized(authz, &mut request.resources, |r| (r.resource_type, r.resource_name.as_str()));
    let decided = controller.change(|d| decide_incremental(d.image, &ctx, &request));
    let answers = written("IncrementalAlterConfigs", decided, |_| {
        failed(request.resources.iter().map(|r| (r.resource_type, r.resource_name.to_string())))
    });
    let answers = unauthorized.into_iter().chain(answers).map(|(resource_type, name, error)| {
        let (code, message) = fields(error);
        (resource_type, str_bytes(&name), code, message)
    });
    let responses: Vec<_> = super::config_resource_responses!(IncrementalResourceResponse, answers);
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

pub fn alter_configs(
    controller: &QuorumController,
    authz: &Authz<'_>,
    mut request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let ctx = context(controller);
    let unauthorized = keep_authorized(authz, &mut request.resources, |r| (r.resource_type, r.resource_name.as_str()));
    let decided = controller.change(|d| decide_legacy(d.image, &ctx, &request));
    let answers = written("AlterConfigs", decided, |_| {
        failed(request.resources.iter().map(|r| (r.resource_type, r.resource_name.to_string())))
    });
    let answers = unauthorized.into_iter().chain(answers).map(|(resource_type, name, error)| {
        let (code, message) = fields(error);
        (resource_type, str_bytes(&name), code, message)
    });
    let responses: Vec<_> = super::config_resource_responses!(AlterConfigsResourceResponse, answers);
    AlterConfigsResponse::default().with_responses(responses)
}

/// Removes from `resources` those the caller may not ALTER_CONFIGS and answers them (in request
/// order, before the others, as Kafka does).
fn keep_authorized<R>(authz: &Authz<'_>, resources: &mut Vec<R>, key: impl Fn(&R) -> (i8, &str)) -> Vec<Answer> {
    let mut refused = Vec::new();
    resources.retain(|r| {
        let (resource_type, name) = key(r);
        match authorize_config(authz, acl::ALTER_CONFIGS, resource_type, name) {
            Ok(()) => true,
            Err(refusal) => {
                refused.push((resource_type, name.to_string(), Some(refusal)));
                false
            }
        }
    });
    refused
}

fn context(controller: &QuorumController) -> ConfigContext<'_> {
    ConfigContext {
        topic_defaults: &controller.settings.topic_defaults,
        controller_id: controller.settings.config.node_id,
        group_settings: &controller.settings.static_props,
    }
}

/// Error code and message as Kafka's response carries them (a success: no message).
fn fields(error: Option<Refusal>) -> (i16, Option<kafka_protocol::protocol::StrBytes>) {
    match error {
        None => (0, None),
        // Kafka leaves an unknown server error of the whole request without a message.
        Some((ResponseError::UnknownServerError, m)) if m.is_empty() => {
            (ResponseError::UnknownServerError.code(), None)
        }
        Some((error, message)) => (error.code(), Some(str_bytes(&message))),
    }
}

/// Every resource of the request answered UNKNOWN_SERVER_ERROR (Kafka's `getErrorResponse`).
fn failed(resources: impl Iterator<Item = (i8, String)>) -> Vec<Answer> {
    resources.map(|(t, n)| (t, n, Some((ResponseError::UnknownServerError, String::new())))).collect()
}

/// Kafka's `ConfigResource.Type.forId` knows the type (else UNKNOWN).
fn known_type(resource_type: i8) -> bool {
    matches!(resource_type, TOPIC | BROKER | BROKER_LOGGER | CLIENT_METRICS | GROUP)
}

/// Sorts one resource into `sorted` (Kafka's duplicate handling: the second occurrence drops
/// the resource and is answered, later ones are ignored).
fn sort_in(sorted: &mut Sorted, duplicates: &mut Vec<(i8, String)>, resource_type: i8, name: String, change: Change) {
    if !known_type(resource_type) {
        let message = format!("Unknown resource type {resource_type}.");
        sorted.refused.push((resource_type, name, Some((ResponseError::UnsupportedVersion, message))));
    } else if duplicates.iter().any(|(t, n)| *t == resource_type && *n == name) {
    } else if let Some(i) = sorted.changes.iter().position(|(t, n, _)| *t == resource_type && *n == name) {
        sorted.changes.remove(i);
        duplicates.push((resource_type, name.clone()));
        let refusal = (ResponseError::InvalidRequest, "Duplicate resource.".to_string());
        sorted.refused.push((resource_type, name, Some(refusal)));
    } else {
        sorted.changes.push((resource_type, name, change));
    }
}

/// Decides every change on `image`: their records (none when `validate_only`) and answers;
/// `Unprocessable` fails the whole request.
fn decide_all(
    image: &MetadataImage,
    ctx: &ConfigContext<'_>,
    sorted: Sorted,
    validate_only: bool,
) -> Result<(Vec<MetadataRecord>, Vec<Answer>), Unprocessable> {
    let mut records = Vec::new();
    let mut answers = sorted.refused;
    for (resource_type, name, change) in sorted.changes {
        match alter_resource(image, ctx, resource_type, &name, &change)? {
            Ok(made) => {
                if !validate_only {
                    tracing::info!(resource_type, resource = %name, records = made.len(), "configs altered");
                    records.extend(made);
                }
                answers.push((resource_type, name, None));
            }
            Err(refusal) => answers.push((resource_type, name, Some(refusal))),
        }
    }
    answers.extend(sorted.loggers);
    Ok((records, answers))
}

/// IncrementalAlterConfigs decided on `image`: the records to write and the answers.
pub(crate) fn decide_incremental(
    image: &MetadataImage,
    ctx: &ConfigContext<'_>,
    request: &IncrementalAlterConfigsRequest,
) -> (Vec<MetadataRecord>, Vec<Answer>) {
    let mut sorted = Sorted { refused: Vec::new(), changes: Vec::new(), loggers: Vec::new() };
    let mut duplicates = Vec::new();
    for r in &request.resources {
        let name = r.resource_name.to_string();
        if r.resource_type == BROKER_LOGGER {
            let error = alter_loggers(ctx.controller_id, &name, &r.configs).err();
            sorted.loggers.push((r.resource_type, name, error));
            continue;
        }
        sort_in(&mut sorted, &mut duplicates, r.resource_type, name, incremental_change(&r.configs));
    }
    let resources = || request.resources.iter().map(|r| (r.resource_type, r.resource_name.to_string()));
    decide_all(image, ctx, sorted, request.validate_only)
        .unwrap_or_else(|Unprocessable| (Vec::new(), failed(resources())))
}

/// The operations of an IncrementalAlterConfigs resource as `config_changes` takes them.
pub(super) fn incremental_change(
    configs: &[kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> Change {
    Change::Incremental(
        configs
            .iter()
            .map(|c| Op {
                name: c.name.to_string(),
                op: c.config_operation,
                value: c.value.as_ref().map(|v| v.to_string()),
            })
            .collect(),
    )
}

/// Legacy AlterConfigs decided on `image`: the records to write and the answers.
pub(crate) fn decide_legacy(
    image: &MetadataImage,
    ctx: &ConfigContext<'_>,
    request: &AlterConfigsRequest,
) -> (Vec<MetadataRecord>, Vec<Answer>) {
    let mut sorted = Sorted { refused: Vec::new(), changes: Vec::new(), loggers: Vec::new() };
    let mut duplicates = Vec::new();
    for r in &request.resources {
        let set = r.configs.iter().map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string()))).collect();
        sort_in(&mut sorted, &mut duplicates, r.resource_type, r.resource_name.to_string(), Change::Replace(set));
    }
    // Kafka's `authorizeAlterResource`: a type it does not authorize for AlterConfigs.
    let (loggers, changes): (Vec<_>, Vec<_>) = sorted.changes.into_iter().partition(|(t, _, _)| *t == BROKER_LOGGER);
    sorted.changes = changes;
    for (resource_type, name, _) in loggers {
        let refusal = (ResponseError::InvalidRequest, "Unexpected resource type BROKER_LOGGER.".to_string());
        sorted.refused.push((resource_type, name, Some(refusal)));
    }
    let resources = || request.resources.iter().map(|r| (r.resource_type, r.resource_name.to_string()));
    decide_all(image, ctx, sorted, request.validate_only)
        .unwrap_or_else(|Unprocessable| (Vec::new(), failed(resources())))
}

/// Kafka's `RuntimeLoggerManager` on this node: the resource must name it; this node has no
/// log4j loggers (its log level is `ketch.log.level`), so any logger named does not exist.
fn alter_loggers(node_id: i32, name: &str, ops: &[AlterableConfig]) -> Result<(), Refusal> {
    let invalid_request = |message: String| (ResponseError::InvalidRequest, message);
    let id: i32 =
        name.parse().map_err(|_| invalid_request(format!("Node id must be an integer, but it is: {name}")))?;
    if id != node_id {
        // Kafka's message names its own id twice.
        return Err(invalid_request(format!("Unexpected node id. Expected {node_id}, but received {node_id}")));
    }
    // Every logger named is refused: the first operation answers.
    let Some(op) = ops.first() else { return Ok(()) };
    match op.config_operation {
        OP_SET | OP_DELETE => {
            Err((ResponseError::InvalidConfig, format!("Logger {} does not exist!", op.name.as_str())))
        }
        OP_APPEND => Err(invalid_request("APPEND operation is not allowed for the BROKER_LOGGER resource".into())),
        OP_SUBTRACT => Err(invalid_request("SUBTRACT operation is not allowed for the BROKER_LOGGER resource".into())),
        // Kafka's `OpType.forId` gives null: a NullPointerException, answered with the error's
        // default message.
        _ => {
            let error = ResponseError::UnknownServerError;
            Err((error, crate::error::default_message(error)))
        }
    }
}
