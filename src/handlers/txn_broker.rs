//! The transaction APIs brokers send each other (Kafka's inter-broker side of transactions):
//! WriteTxnMarkers (v1), from a transaction coordinator to the leaders of a transaction's
//! partitions, and AddPartitionsToTxn v4+ (batched transactions, `verify_only`), from
//! partition leaders to the coordinator of a transactional id. Both need CLUSTER_ACTION on the
//! cluster, as in Kafka. The work is `crate::txn`'s: this file maps requests and answers.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::write_txn_markers_request::WriteTxnMarkersRequest;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult, WriteTxnMarkersResponse,
};
use kafka_protocol::messages::TopicName;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::security::acl;
use crate::txn::peers::by_topic;
use crate::txn::transitions::TV_2;

fn cluster_action(broker: &Arc<Broker>, ctx: &RequestContext) -> bool {
    ctx.authz(broker).allows(acl::CLUSTER_ACTION, acl::CLUSTER, acl::CLUSTER_NAME)
}

pub async fn write_txn_markers(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = cluster_action(broker, ctx);
    let mut markers = Vec::with_capacity(req.markers.len());
    for marker in req.markers {
        let partitions: Vec<(String, i32)> =
            marker.topics.iter().flat_map(|t| t.partition_indexes.iter().map(|p| (t.name.0.to_string(), *p))).collect();
        let answers: Vec<((String, i32), i16)> = if allowed {
            let producer = (marker.producer_id.0, marker.producer_epoch);
            let written = crate::txn::markers::write_here(
                &broker.txn_deps(),
                producer,
                marker.transaction_result,
                marker.coordinator_epoch,
                partitions,
            )
            .await;
            written.into_iter().map(|(k, r)| (k, r.err().map_or(0, |e| e.code()))).collect()
        } else {
            partitions.into_iter().map(|k| (k, ResponseError::ClusterAuthorizationFailed.code())).collect()
        };
        let topics = by_topic(answers)
            .into_iter()
            .map(|(t, ps)| {
                WritableTxnMarkerTopicResult::default().with_name(TopicName(str_bytes(&t))).with_partitions(
                    ps.into_iter()
                        .map(|(p, code)| {
                            WritableTxnMarkerPartitionResult::default().with_partition_index(p).with_error_code(code)
                        })
                        .collect(),
                )
            })
            .collect();
        markers.push(WritableTxnMarkerResult::default().with_producer_id(marker.producer_id).with_topics(topics));
    }
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// AddPartitionsToTxn v4+: each transaction's partitions verified (`verify_only`, for a
/// protocol-1 producer's write) or added (protocol 2's implicit add), on this coordinator.
pub async fn add_partitions_batched(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if !cluster_action(broker, ctx) {
        return AddPartitionsToTxnResponse::default().with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut results = Vec::with_capacity(req.transactions.len());
    for txn in req.transactions {
        let id = txn.transactional_id.0.as_str();
        let (producer_id, epoch) = (txn.producer_id.0, txn.producer_epoch);
        let partitions: Vec<(String, i32)> =
            txn.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), *p))).collect();
        let answers: Vec<((String, i32), Result<(), ResponseError>)> = if txn.verify_only {
            partitions
                .into_iter()
                .map(|p| {
                    let verified = broker.txns.verify(Some(id), producer_id, epoch, &p);
                    (p, verified)
                })
                .collect()
        } else {
            let added =
                broker.txns.add_partitions(&broker.txn_deps(), id, producer_id, epoch, partitions.clone(), TV_2).await;
            partitions.into_iter().map(|p| (p, added)).collect()
        };
        // Version 4 does not know TRANSACTION_ABORTABLE.
        let code = |r: Result<(), ResponseError>| match r {
            Ok(()) => 0,
            Err(ResponseError::TransactionAbortable) if version < 5 => ResponseError::InvalidTxnState.code(),
            Err(e) => e.code(),
        };
        let topics = by_topic(answers.into_iter().map(|(k, r)| (k, code(r))))
            .into_iter()
            .map(|(t, ps)| {
                AddPartitionsToTxnTopicResult::default().with_name(TopicName(str_bytes(&t))).with_results_by_partition(
                    ps.into_iter()
                        .map(|(p, code)| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
            })
            .collect();
        results.push(
            AddPartitionsToTxnResult::default().with_transactional_id(txn.transactional_id).with_topic_results(topics),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}
