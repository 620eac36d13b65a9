//! ListOffsets: earliest, latest, max timestamp, and the first offset at or after a timestamp.
//! Topics need DESCRIBE (else TOPIC_AUTHORIZATION_FAILED on each partition), as in Kafka.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};

use super::RequestContext;
use crate::broker::Broker;
use crate::security::acl;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const EARLIEST_PENDING_UPLOAD: i64 = -5;
const LATEST_TIERED: i64 = -6;

/// A partition's answer before any offset is found.
fn unanswered(partition_index: i32) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(partition_index)
        .with_timestamp(-1)
        .with_offset(-1)
        .with_leader_epoch(-1)
}

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
    version: i16,
) -> ListOffsetsResponse {
    let authz = ctx.authz(broker);
    let describable = authz.allowed_names(acl::DESCRIBE, acl::TOPIC, req.topics.iter().map(|t| t.name.0.as_str()));
    let describable: HashSet<String> = describable.into_iter().map(str::to_string).collect();
    // A partition asked for twice is answered once, INVALID_REQUEST, as Kafka does.
    let mut seen = HashSet::new();
    let duplicates: HashSet<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.0.to_string(), p.partition_index)))
        .filter(|key| !seen.insert(key.clone()))
        .collect();
    let mut answered = HashSet::new();
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            if !describable.contains(topic.name.0.as_str()) {
                // Every partition as asked, before any other check (Kafka's order).
                let refused = topic.partitions.iter().map(|p| {
                    unanswered(p.partition_index).with_error_code(ResponseError::TopicAuthorizationFailed.code())
                });
                return ListOffsetsTopicResponse::default().with_partitions(refused.collect()).with_name(topic.name);
            }
            let partitions = topic
                .partitions
                .iter()
                .filter(|p| answered.insert((topic.name.0.to_string(), p.partition_index)))
                .map(|p| {
                    let response = unanswered(p.partition_index);
                    if duplicates.contains(&(topic.name.0.to_string(), p.partition_index)) {
                        return response.with_error_code(ResponseError::InvalidRequest.code());
                    }
                    let partition = match broker.hosted_partition(topic.name.0.as_str(), p.partition_index) {
                        Ok(partition) => partition,
                        Err(e) => return response.with_error_code(e.code()),
                    };
                    let log = partition.log();
                    if let Err(e) = broker.check_leader(&partition, &log, p.current_leader_epoch) {
                        return response.with_error_code(e.code());
                    }
                    if log.health().is_offline() {
                        return response.with_error_code(ResponseError::KafkaStorageError.code());
                    }
                    // A replicated partition's replica state (a broker of a controller quorum).
                    let replica = broker.replicas.get().and_then(|rm| rm.get(&partition.topic, partition.index));
                    // The leader epoch field exists from v4 on; older versions must leave it at
                    // -1. The latest offset carries the leader's current epoch (Kafka's), which a
                    // leader just elected has not written yet.
                    let latest_epoch = log.latest_epoch().map_or(0, |(e, _)| e);
                    let epoch = match (version >= 4, &replica) {
                        (false, _) => -1,
                        (true, Some(r)) if matches!(p.timestamp, LATEST | LATEST_TIERED) => r.leader().1,
                        (true, _) => latest_epoch,
                    };
                    // Kafka's `fetchOffsetForTimestamp`: a client (not a replica) reads up to the
                    // high watermark (read_committed: the last stable offset); a leader whose
                    // high watermark is still below where its epoch started (just elected, not
                    // caught up) answers OFFSET_NOT_AVAILABLE rather than an offset it may not
                    // have yet.
                    let client = req.replica_id.0 < 0;
                    let last_fetchable = match (client, req.isolation_level) {
                        (false, _) => log.log_end_offset(),
                        (true, 1) => log.last_stable_offset(),
                        (true, _) => log.high_watermark(),
                    };
                    let lagging = client
                        && replica
                            .and_then(|r| r.epoch_start_offset())
                            .is_some_and(|start| start > log.high_watermark());
                    let not_available = ResponseError::OffsetNotAvailable.code();
                    let beyond = |found: Result<Option<(i64, i64)>, i16>| match found {
                        Ok(Some((offset, _))) if offset >= last_fetchable && lagging => Err(not_available),
                        Ok(Some((offset, _))) if offset >= last_fetchable => Ok(None),
                        other => other,
                    };
                    let found: Result<Option<(i64, i64)>, i16> = match p.timestamp {
                        LATEST | LATEST_TIERED if lagging => Err(not_available),
                        LATEST | LATEST_TIERED => Ok(Some((last_fetchable, -1))),
                        EARLIEST | EARLIEST_LOCAL => Ok(Some((log.log_start_offset(), -1))),
                        EARLIEST_PENDING_UPLOAD => Ok(None),
                        MAX_TIMESTAMP => beyond(Ok(log.max_timestamp())),
                        ts if ts >= 0 => beyond(log.offset_for_timestamp(ts).map_err(|e| e.code())),
                        _ => return response.with_error_code(ResponseError::InvalidRequest.code()),
                    };
                    match found {
                        Ok(Some((offset, timestamp))) => {
                            response.with_offset(offset).with_timestamp(timestamp).with_leader_epoch(epoch)
                        }
                        Ok(None) => response,
                        Err(code) => response.with_error_code(code),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
