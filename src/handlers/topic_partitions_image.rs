//! DescribeTopicPartitions on a broker of a controller quorum (`process.roles=broker`): answered
//! from the metadata image replicated from the quorum, as Kafka 4.1's
//! `DescribeTopicPartitionsRequestHandler` with `KRaftMetadataCache.describeTopicResponse`
//! (the single-node answer is `cluster::describe_topic_partitions`).
//!
//! - Topics: the named ones (each once), or every topic of the image when none is named; only
//!   those from the cursor's topic on, in name order. A named topic the image does not have is
//!   UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name), without id.
//! - Partitions: replicas and ISR as assigned, the ELR and last known ELR (KIP-966), the offline
//!   replicas and the leader as `metadata_image` shows them (-1 when its broker has no endpoint on
//!   the client's listener).
//! - Pagination: at most `min(max.request.partition.size.limit, ResponsePartitionLimit)`
//!   partitions (at least 1); the first topic starts at the cursor's partition. When the limit
//!   falls inside a topic the next cursor is its first partition left out; when it is reached at
//!   a topic's end, the next (authorized) topic at partition 0.
//! - A cursor with a negative partition, or (topics named) a cursor topic not among them, is an
//!   invalid request: every named topic is answered INVALID_REQUEST (Kafka's error response).
//! - Authorization: DESCRIBE on each topic, checked in name order as far as the answer goes. The
//!   all-topics listing leaves the others out; a named one is answered TOPIC_AUTHORIZATION_FAILED
//!   without its id, after the others. Every other topic carries its authorized operations.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_request::DescribeTopicPartitionsRequest;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::TopicName;

use super::metadata_image::{broker_ids, offline_replicas, reachable_leader};
use super::{is_internal_topic, str_bytes, RequestContext};
use crate::broker::Broker;
use crate::metadata::image::{MetadataImage, TopicImage};
use crate::security::acl;
use crate::security::authorizer::Authz;

/// Kafka's `max.request.partition.size.limit` (read-only) and its default.
const PARTITION_LIMIT_CONFIG: &str = "max.request.partition.size.limit";
const PARTITION_LIMIT_DEFAULT: i32 = 2000;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
    image: &MetadataImage,
) -> DescribeTopicPartitionsResponse {
    let limit = broker.config.properties.get(PARTITION_LIMIT_CONFIG).and_then(|v| v.trim().parse::<i32>().ok());
    describe(image, &ctx.authz(broker), &ctx.listener, limit.unwrap_or(PARTITION_LIMIT_DEFAULT), &req)
}

/// The answer to `req` from `image` for a client on `listener` allowed what `authz` allows, with
/// at most `max_partitions` partitions (the broker's limit).
pub(super) fn describe(
    image: &MetadataImage,
    authz: &Authz,
    listener: &str,
    max_partitions: i32,
    req: &DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let all = req.topics.is_empty();
    let cursor = req.cursor.as_ref().map(|c| (c.topic_name.0.as_str(), c.partition_index));
    let cursor_topic = cursor.map_or("", |(topic, _)| topic);
    let names: BTreeSet<&str> = match all {
        true => image.topic_ids.keys().map(String::as_str).filter(|n| *n >= cursor_topic).collect(),
        false => req.topics.iter().map(|t| t.name.0.as_str()).filter(|n| *n >= cursor_topic).collect(),
    };
    if let Some((topic, partition)) = cursor {
        if (!all && !names.contains(topic)) || partition < 0 {
            return invalid_request(req);
        }
    }
    let mut remaining = max_partitions.min(req.response_partition_limit).max(1) as usize;
    let mut topics = Vec::new();
    let mut refused = Vec::new();
    let mut next_cursor = None;
    for name in names {
        if !authz.allows(acl::DESCRIBE, acl::TOPIC, name) {
            if !all {
                refused.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        .with_name(Some(TopicName(str_bytes(name)))),
                );
            }
            continue;
        }
        if remaining == 0 {
            next_cursor = Some(cursor_at(name, 0));
            break;
        }
        let Some(topic) = image.topic(name) else {
            if !all {
                let error = match crate::metadata::validate_topic_name(name) {
                    Ok(()) => ResponseError::UnknownTopicOrPartition,
                    Err(_) => ResponseError::InvalidTopicException,
                };
                topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(error.code())
                        .with_name(Some(TopicName(str_bytes(name))))
                        .with_is_internal(is_internal_topic(name)),
                );
            }
            continue;
        };
        let first = cursor.filter(|&(t, _)| t == name).map_or(0, |(_, p)| p);
        let (partitions, next) = partitions(image, topic, listener, first, remaining);
        remaining -= partitions.len();
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(TopicName(str_bytes(name))))
                .with_topic_id(topic.id)
                .with_is_internal(is_internal_topic(name))
                .with_partitions(partitions),
        );
        if let Some(next) = next {
            next_cursor = Some(cursor_at(name, next));
            break;
        }
    }
    for topic in &mut topics {
        let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
        topic.topic_authorized_operations = authz.operations(acl::TOPIC, name);
    }
    topics.extend(refused);
    DescribeTopicPartitionsResponse::default().with_topics(topics).with_next_cursor(next_cursor)
}

/// Partitions `first..` of `topic`, at most `max` of them (Kafka counts by index up to the
/// number of partitions), and the index of the next one when some are left.
fn partitions(
    image: &MetadataImage,
    topic: &TopicImage,
    listener: &str,
    first: i32,
    max: usize,
) -> (Vec<DescribeTopicPartitionsResponsePartition>, Option<i32>) {
    let count = topic.partitions.len() as i64;
    let upper = count.min(first as i64 + max as i64);
    let partitions = (first as i64..upper)
        .filter_map(|index| {
            let p = topic.partitions.get(&(index as i32))?;
            Some(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(index as i32)
                    .with_leader_id(reachable_leader(image, p, listener))
                    .with_leader_epoch(p.leader_epoch)
                    .with_replica_nodes(broker_ids(&p.replicas))
                    .with_isr_nodes(broker_ids(&p.isr))
                    .with_eligible_leader_replicas(Some(broker_ids(&p.eligible_leader_replicas)))
                    .with_last_known_elr(Some(broker_ids(&p.last_known_elr)))
                    .with_offline_replicas(offline_replicas(image, p, listener)),
            )
        })
        .collect();
    (partitions, (upper < count).then_some(upper as i32))
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    Cursor::default().with_topic_name(TopicName(str_bytes(topic))).with_partition_index(partition)
}

/// Kafka's error response to an invalid request (`DescribeTopicPartitionsRequest.getErrorResponse`):
/// every named topic with the error, nothing else.
fn invalid_request(req: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_name(Some(t.name.clone()))
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

#[cfg(test)]
#[path = "topic_partitions_image_tests.rs"]
mod tests;
