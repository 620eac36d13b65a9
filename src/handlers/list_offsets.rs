//! ListOffsets: earliest, latest, max timestamp, and the first offset at or after a timestamp.
//! Topics need DESCRIBE (else TOPIC_AUTHORIZATION_FAILED on each partition), as in Kafka. The
//! answer's rules (high watermark, epochs, OFFSET_NOT_AVAILABLE) are `replica::offsets`.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};

use super::RequestContext;
use crate::broker::Broker;
use crate::replica::offsets::{OffsetView, Reader};
use crate::replica::{self, offsets};
use crate::security::acl;

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
                    let replicated = broker.replicas.get().and_then(|rm| rm.get(&partition.topic, partition.index));
                    let view = OffsetView {
                        log_start_offset: log.log_start_offset(),
                        log_end_offset: log.log_end_offset(),
                        high_watermark: log.high_watermark(),
                        last_stable_offset: log.last_stable_offset(),
                        epochs: log.epochs(),
                        leader_epoch: replicated.as_ref().map_or_else(|| replica::leader_epoch(&log), |r| r.leader().1),
                        epoch_start_offset: replicated.as_ref().and_then(|r| r.epoch_start_offset()),
                    };
                    let reader = Reader::of(req.replica_id.0, req.isolation_level);
                    let found = offsets::fetch_offset_for_timestamp(&view, reader, p.timestamp, |ts| {
                        let found = if ts == offsets::MAX_TIMESTAMP {
                            Ok(log.max_timestamp())
                        } else {
                            log.offset_for_timestamp(ts)
                        };
                        found.map_err(|e| e.code())
                    });
                    match found {
                        // The leader epoch field exists from v4 on; older versions leave it at -1.
                        Ok(Some((offset, timestamp, epoch))) => response
                            .with_offset(offset)
                            .with_timestamp(timestamp)
                            .with_leader_epoch(if version >= 4 { epoch } else { -1 }),
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
