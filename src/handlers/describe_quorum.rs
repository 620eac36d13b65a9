//! DescribeQuorum on a broker (`kafka-metadata-quorum --bootstrap-server ... describe`). Kafka's
//! brokers forward it to the active controller, which answers with the client's principal
//! checked for DESCRIBE on the cluster. A broker of a cluster here does the same (the check made
//! here first: the controller sees this broker's connection, `forward.rs`); a single node, the
//! only voter of its own metadata log (`raft`), answers for itself: it leads in its epoch, its
//! log end is the high watermark, it is the only voter and nobody observes.
//!
//! Invariants: every answer names `__cluster_metadata` partition 0 only; a refused or failed
//! request gets a top-level error code and no partition.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    DescribeQuorumResponse, Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::DescribeQuorumRequest;
use kafka_protocol::protocol::StrBytes;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::raft::METADATA_TOPIC_NAME;
use crate::security::acl;

pub async fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    header: &kafka_protocol::messages::RequestHeader,
    request: DescribeQuorumRequest,
    version: i16,
) -> DescribeQuorumResponse {
    let failed = |error: ResponseError, message: Option<StrBytes>| {
        let message = if version >= 2 { message } else { None };
        DescribeQuorumResponse::default().with_error_code(error.code()).with_error_message(message)
    };
    if !ctx.authz(broker).cluster(acl::DESCRIBE) {
        let (_, message) = super::cluster_denied();
        return failed(ResponseError::ClusterAuthorizationFailed, message);
    }
    if let Some(link) = broker.controller.get() {
        let unreachable = |error: ResponseError| {
            let message = crate::error::default_message(error);
            failed(error, Some(StrBytes::from_string(message)))
        };
        let link = super::forwarder(link, ctx, header);
        return super::forward::forward_whole(&link, version, &request, unreachable).await;
    }
    let Some((epoch, end_offset)) = broker.topics.metadata_quorum() else {
        return failed(ResponseError::NotLeaderOrFollower, None);
    };
    // The node has no controller listener: the voter is reached where this request came.
    let (host, port) = super::metadata::advertised_endpoint(broker, ctx);
    let listener = (ctx.listener.as_ref(), host.as_str(), port as u16);
    answer(broker.config.node_id, epoch, end_offset, Vec::new(), listener, version)
}

/// The answer of a quorum whose only voter, `node_id`, leads it in `epoch` with its log ending
/// at `high_watermark` (it is committed as written), reached at `listener` (name, host, port).
pub fn answer(
    node_id: i32,
    epoch: i32,
    high_watermark: i64,
    observers: Vec<ReplicaState>,
    listener: (&str, &str, u16),
    version: i16,
) -> DescribeQuorumResponse {
    let now_ms = crate::log::now_ms();
    let voter = ReplicaState::default()
        .with_replica_id(node_id.into())
        .with_log_end_offset(high_watermark)
        .with_last_fetch_timestamp(now_ms)
        .with_last_caught_up_timestamp(now_ms);
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(node_id.into())
        .with_leader_epoch(epoch)
        .with_high_watermark(high_watermark)
        .with_current_voters(vec![voter])
        .with_observers(observers);
    let mut response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(str_bytes(METADATA_TOPIC_NAME).into())
        .with_partitions(vec![partition])]);
    if version >= 2 {
        let (name, host, port) = listener;
        response.nodes = vec![Node::default().with_node_id(node_id.into()).with_listeners(vec![Listener::default()
            .with_name(str_bytes(name))
            .with_host(str_bytes(host))
            .with_port(port)])];
    }
    response
}
