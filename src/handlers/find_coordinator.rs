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
    let answer = |key: &StrBytes| -> (i16, Option<String>) {
        if req.key_type == TRANSACTION {
            return match broker.txns.ensure_topic(&broker.topics) {
                Ok(()) => (0, None),
                Err(e) => (e.code(), None),
            };
        }
        if req.key_type != GROUP {
            return (
                ResponseError::InvalidRequest.code(),
                Some(format!("unknown coordinator key type {}", req.key_type)),
            );
        }
        // Kafka creates the offsets topic when a group coordinator is first looked up.
        match broker.groups.offsets_topic(&broker.topics) {
            Ok(_) => (0, None),
            Err(e) => {
                let _ = key;
                (e.code(), None)
            }
        }
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
                    .with_error_message(message.as_deref().map(str_bytes));
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
    let response = if version >= 1 { response.with_error_message(message.as_deref().map(str_bytes)) } else { response };
    if error == 0 {
        response.with_node_id(BrokerId(node)).with_host(str_bytes(&host)).with_port(port)
    } else {
        response.with_node_id(BrokerId(-1)).with_port(-1)
    }
}
