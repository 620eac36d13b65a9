//! DescribeClientQuotas and AlterClientQuotas (`kafka-configs --entity-type users / clients /
//! ips`): the quotas in force (`quota::QuotaStore`: a single node's own, a cluster broker's from
//! its metadata image) matched and decided as Kafka does (`quota::entity`). A single node
//! stores alterations itself; a cluster broker forwards them to the controller (`forward.rs`).
//! With an authorizer, DESCRIBE_CONFIGS on the cluster to describe and ALTER_CONFIGS to alter,
//! as Kafka checks (CLUSTER_AUTHORIZATION_FAILED for every entity otherwise).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::AlterClientQuotasRequest;
use kafka_protocol::messages::alter_client_quotas_response::{
    AlterClientQuotasResponse, EntityData as AlterEntityData, EntryData as AlterEntryData,
};
use kafka_protocol::messages::describe_client_quotas_request::DescribeClientQuotasRequest;
use kafka_protocol::messages::describe_client_quotas_response::{
    DescribeClientQuotasResponse, EntityData, EntryData, ValueData,
};

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::quota::entity::{self, Alteration, Entity};
use crate::security::acl;

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let refused = |e: ResponseError, message: String| {
        DescribeClientQuotasResponse::default().with_error_code(e.code()).with_error_message(Some(str_bytes(&message)))
    };
    if !ctx.authz(broker).cluster(acl::DESCRIBE_CONFIGS) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return refused(e, default_message(e));
    }
    let components: Vec<(String, i8, Option<String>)> = req
        .components
        .iter()
        .map(|c| (c.entity_type.to_string(), c.match_type, c._match.as_ref().map(|m| m.to_string())))
        .collect();
    let filter = match entity::filter(&components) {
        Ok(filter) => filter,
        Err((true, message)) => return refused(ResponseError::UnsupportedVersion, message),
        Err((false, message)) => return refused(ResponseError::InvalidRequest, message),
    };
    let entries = broker.quotas.with_quotas(|quotas| {
        quotas
            .iter()
            .filter(|(e, _)| entity::matches(e, &filter, req.strict))
            .map(|(e, values)| {
                let values =
                    values.iter().map(|(k, v)| ValueData::default().with_key(str_bytes(k)).with_value(*v)).collect();
                EntryData::default().with_entity(describe_entity(e)).with_values(values)
            })
            .collect()
    });
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}

fn describe_entity(e: &Entity) -> Vec<EntityData> {
    e.iter()
        .map(|(t, n)| {
            EntityData::default().with_entity_type(str_bytes(t)).with_entity_name(n.as_deref().map(str_bytes))
        })
        .collect()
}

/// The request's entries as alterations (an entity naming a type twice keeps the last name, as
/// Kafka's request reads it into a map).
pub fn alterations(req: &AlterClientQuotasRequest) -> Vec<Alteration> {
    req.entries
        .iter()
        .map(|entry| Alteration {
            entity: entry
                .entity
                .iter()
                .map(|e| (e.entity_type.to_string(), e.entity_name.as_ref().map(|n| n.to_string())))
                .collect(),
            ops: entry.ops.iter().map(|op| (op.key.to_string(), (!op.remove).then_some(op.value))).collect(),
        })
        .collect()
}

/// Every entity of the request answered with `error` (and `message`).
pub fn alter_refused(
    req: &AlterClientQuotasRequest,
    error: ResponseError,
    message: Option<String>,
) -> AlterClientQuotasResponse {
    let entries = alterations(req).iter().map(|a| answer(&a.entity, error.code(), message.clone())).collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

fn answer(e: &Entity, code: i16, message: Option<String>) -> AlterEntryData {
    let entity = e
        .iter()
        .map(|(t, n)| {
            AlterEntityData::default().with_entity_type(str_bytes(t)).with_entity_name(n.as_deref().map(str_bytes))
        })
        .collect();
    AlterEntryData::default()
        .with_error_code(code)
        .with_error_message(message.map(|m| str_bytes(&m)))
        .with_entity(entity)
}

/// AlterClientQuotas on a single node.
pub fn alter(broker: &Arc<Broker>, ctx: &RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    if !ctx.authz(broker).cluster(acl::ALTER_CONFIGS) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return alter_refused(&req, e, Some(default_message(e)));
    }
    alter_answered(&broker.quotas.alter(&alterations(&req), req.validate_only))
}

/// The response for each entity's outcome.
pub fn alter_answered(outcomes: &[crate::quota::store::Outcome]) -> AlterClientQuotasResponse {
    let entries = outcomes
        .iter()
        .map(|(e, outcome)| match outcome {
            Ok(()) => answer(e, 0, None),
            Err((code, message)) => answer(e, *code, Some(message.clone())),
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
