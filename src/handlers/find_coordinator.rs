//! FindCoordinator (v0-3 one key, v4+ batched keys). A single node coordinates every group
//! and every transactional id. In a cluster a group's coordinator is the leader of its
//! `__consumer_offsets` partition in the metadata image, a transactional id's the leader of its
//! `__transaction_state` partition, on the listener the client came in on; the internal topic
//! is created through the controller on first lookup (COORDINATOR_NOT_AVAILABLE meanwhile), as
//! Kafka does.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;

use super::metadata::advertised_endpoint;
use super::metadata_image::endpoint;
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
    let here = (broker.config.node_id, host, port);
    let cluster = broker.controller.get().filter(|_| broker.replicas.get().is_some());
    // Kafka fills the message of every answer: the error's default text, "" for a success in
    // v4+ and "NONE" (the error's name) before.
    let authz = ctx.authz(broker);
    let answer = |key: &StrBytes| -> (i16, String, (i32, String, i32)) {
        let mut at = here.clone();
        // Kafka: DESCRIBE on the group or transactional id, before anything else.
        let error = if req.key_type == GROUP && !authz.allows(acl::DESCRIBE, acl::GROUP, key) {
            ResponseError::GroupAuthorizationFailed.code()
        } else if req.key_type == TRANSACTION && !authz.allows(acl::DESCRIBE, acl::TRANSACTIONAL_ID, key) {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        } else if let (Some(link), TRANSACTION | GROUP) = (cluster, req.key_type) {
            let (topic, partition) = match req.key_type {
                GROUP => (crate::group::OFFSETS_TOPIC, broker.groups.partition_for(key.as_str())),
                _ => (crate::txn::coordinator::TXN_TOPIC, broker.txns.partition_for(key.as_str())),
            };
            match coordinator_in_cluster(broker, link, ctx, topic, partition) {
                Ok(found) => {
                    at = found;
                    0
                }
                Err(e) => e.code(),
            }
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
        (error, message, at)
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, message, (node, host, port)) = answer(key);
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
    let (error, message, (node, host, port)) = answer(&req.key);
    let response = FindCoordinatorResponse::default().with_error_code(error);
    let response = if version >= 1 { response.with_error_message(Some(str_bytes(&message))) } else { response };
    if error == 0 {
        response.with_node_id(BrokerId(node)).with_host(str_bytes(&host)).with_port(port)
    } else {
        response.with_node_id(BrokerId(-1)).with_port(-1)
    }
}

/// In a cluster: (node id, host, port) of the leader of `topic`'s `partition` (the offsets or
/// the transaction state partition of a key), on the client's listener. The topic is created
/// through the controller when missing (COORDINATOR_NOT_AVAILABLE meanwhile).
fn coordinator_in_cluster(
    broker: &Arc<Broker>,
    link: &crate::node::ControllerLink,
    ctx: &RequestContext,
    topic: &'static str,
    partition: i32,
) -> Result<(i32, String, i32), ResponseError> {
    let image = link.image();
    let Some(found) = image.topic(topic) else {
        super::auto_create::request(broker, link, topic);
        return Err(ResponseError::CoordinatorNotAvailable);
    };
    let leader = found.partitions.get(&partition).map_or(-1, |p| p.leader);
    match image.brokers.get(&leader).filter(|b| !b.fenced).and_then(|b| endpoint(b, &ctx.listener)) {
        Some(e) => Ok((leader, e.host.clone(), i32::from(e.port))),
        None => Err(ResponseError::CoordinatorNotAvailable),
    }
}
