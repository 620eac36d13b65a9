//! FindCoordinator: this node coordinates every group (v0-3 one key, v4+ batched keys).
//! and every transactional id.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;

use super::metadata::advertised_endpoint;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::security::acl;

const GROUP: i8 = 0;
const TRANSACTION: i8 = 1;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let (host, port) = advertised_endpoint(broker, ctx);
    let node = broker.config.node_id;
    // Kafka fills the message of every answer: the error's default text, "" for a success in
    // v4+ and "NONE" (the error's name) before.
    let authz = ctx.authz(broker);
    let answer = |key: &StrBytes| -> (i16, String) {
        // Kafka: DESCRIBE on the group or transactional id, before anything else.
        let error = if req.key_type == GROUP && !authz.allows(acl::DESCRIBE, acl::GROUP, key) {
            ResponseError::GroupAuthorizationFailed.code()
        } else if req.key_type == TRANSACTION && !authz.allows(acl::DESCRIBE, acl::TRANSACTIONAL_ID, key) {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        } else if req.key_type == TRANSACTION {
            broker.txns.ensure_topic(&broker.topics).err().map_or(0, |e| e.code())
        } else if req.key_type != GROUP {
            ResponseError::InvalidRequest.code()
        } else {
            // Kafka creates the offsets topic when a group coordinator is first looked up.
            let _ = key;
            broker.groups.offsets_topic(&broker.topics).err().map_or(0, |e| e.code())
        };
        let message = match ResponseError::try_from_code(error) {
            Some(e) => default_message(e),
            None if version >= 4 => String::new(),
            None => "NONE".to_string(),
        };
        (error, message)
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, message) = answer(key);
                let c = Coordinator::default()
                    .with_key(key.clone())
                    .with_error_code(error)
                    .with_error_message(Some(str_bytes(&message)));
                if error == 0 {
                    c.with_node_id(BrokerId(node)).with_host(str_bytes(&host)).with_port(port)
                } else {
                    c.with_node_id(BrokerId(-1)).with_port(-1)
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (error, message) = answer(&req.key);
    let response = FindCoordinatorResponse::default().with_error_code(error);
    let response = if version >= 1 { response.with_error_message(Some(str_bytes(&message))) } else { response };
    if error == 0 {
        response.with_node_id(BrokerId(node)).with_host(str_bytes(&host)).with_port(port)
    } else {
        response.with_node_id(BrokerId(-1)).with_port(-1)
    }
}
