//! Committed offsets: OffsetCommit, OffsetFetch (single and multi-group) and OffsetDelete.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_request::OffsetDeleteRequest;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, TopicName};

use super::str_bytes;
use crate::broker::Broker;
use crate::group::records::OffsetValue;
use crate::group::GroupCoordinator;
use crate::log::now_ms;

/// Per topic, per partition: the commit outcome.
type CommitOutcome = Vec<(TopicName, Vec<(i32, Result<OffsetValue, ResponseError>)>)>;

pub async fn commit(broker: &Arc<Broker>, req: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
    let group_id = req.group_id.0.as_str().to_string();
    let now = now_ms();
    // Per partition: Ok(value to store) or the error to report.
    let mut outcome: CommitOutcome = Vec::new();
    let group_error = broker.groups.check_offset_commit(
        &group_id,
        req.member_id.as_str(),
        req.group_instance_id.as_ref().map(|s| s.as_str()),
        req.generation_id_or_member_epoch,
        version,
    );
    for topic in &req.topics {
        let known = broker.topics.get(topic.name.0.as_str());
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let result = if let Some(e) = group_error {
                    Err(e)
                } else if !known
                    .as_ref()
                    .is_some_and(|t| p.partition_index >= 0 && (p.partition_index as usize) < t.partitions.len())
                {
                    Err(ResponseError::UnknownTopicOrPartition)
                } else if p
                    .committed_metadata
                    .as_ref()
                    .is_some_and(|m| m.len() > broker.groups.config.offset_metadata_max_bytes)
                {
                    Err(ResponseError::OffsetMetadataTooLarge)
                } else {
                    Ok(OffsetValue {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.as_str().to_string()).unwrap_or_default(),
                        commit_timestamp: now,
                    })
                };
                (p.partition_index, result)
            })
            .collect();
        outcome.push((topic.name.clone(), partitions));
    }
    let values = outcome
        .iter()
        .flat_map(|(topic, parts)| {
            parts
                .iter()
                .filter_map(move |(p, r)| r.as_ref().ok().map(|v| ((topic.0.as_str().to_string(), *p), v.clone())))
        })
        .collect();
    let written = broker.groups.commit_offsets(&broker.topics, &group_id, values);
    let storage_error = match written {
        Ok(w) => GroupCoordinator::sync_to_disk(&broker.flusher, w).await.err(),
        Err(e) => Some(e),
    };
    let topics = outcome
        .into_iter()
        .map(|(name, parts)| {
            let partitions = parts
                .into_iter()
                .map(|(p, r)| {
                    let code = match r {
                        Ok(_) => storage_error.map_or(0, |e| e.code()),
                        Err(e) => e.code(),
                    };
                    OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

pub fn fetch(broker: &Arc<Broker>, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    if version >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let wanted = g.topics.as_ref().map(|ts| {
                    ts.iter().map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone())).collect()
                });
                let unstable = if req.require_stable {
                    broker.groups.pending_txn_partitions(g.group_id.0.as_str())
                } else {
                    Default::default()
                };
                let member = g.member_id.as_ref().map(|m| m.as_str());
                if let Err(e) = broker.groups.consumer_check_fetch(g.group_id.0.as_str(), member, g.member_epoch) {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(e.code());
                }
                let topics = broker
                    .groups
                    .committed(g.group_id.0.as_str(), wanted)
                    .into_iter()
                    .map(|(topic, parts)| {
                        let topic_id = broker.topics.get(&topic).map_or(uuid::Uuid::nil(), |t| t.id);
                        let partitions = parts
                            .into_iter()
                            .map(|(p, offset, epoch, metadata)| {
                                let r = OffsetFetchResponsePartitions::default().with_partition_index(p);
                                if unstable.contains(&(topic.clone(), p)) {
                                    return r
                                        .with_committed_offset(-1)
                                        .with_committed_leader_epoch(-1)
                                        .with_error_code(ResponseError::UnstableOffsetCommit.code());
                                }
                                r.with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(Some(str_bytes(&metadata)))
                            })
                            .collect();
                        let t = OffsetFetchResponseTopics::default()
                            .with_name(TopicName(str_bytes(&topic)))
                            .with_partitions(partitions);
                        if version >= 10 {
                            t.with_topic_id(topic_id)
                        } else {
                            t
                        }
                    })
                    .collect();
                OffsetFetchResponseGroup::default().with_group_id(GroupId(g.group_id.0.clone())).with_topics(topics)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = req
        .topics
        .as_ref()
        .map(|ts| ts.iter().map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone())).collect());
    let unstable = if version >= 7 && req.require_stable {
        broker.groups.pending_txn_partitions(req.group_id.0.as_str())
    } else {
        Default::default()
    };
    let topics = broker
        .groups
        .committed(req.group_id.0.as_str(), wanted)
        .into_iter()
        .map(|(topic, parts)| {
            let partitions = parts
                .into_iter()
                .map(|(p, offset, epoch, metadata)| {
                    if unstable.contains(&(topic.clone(), p)) {
                        return OffsetFetchResponsePartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(ResponseError::UnstableOffsetCommit.code());
                    }
                    let r = OffsetFetchResponsePartition::default()
                        .with_partition_index(p)
                        .with_committed_offset(offset)
                        .with_metadata(Some(str_bytes(&metadata)));
                    if version >= 5 {
                        r.with_committed_leader_epoch(epoch)
                    } else {
                        r
                    }
                })
                .collect();
            OffsetFetchResponseTopic::default().with_name(TopicName(str_bytes(&topic))).with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

pub async fn delete(broker: &Arc<Broker>, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.as_str().to_string();
    let known = |topic: &TopicName, partition: i32| broker.topics.partition(topic.0.as_str(), partition).is_some();
    let requested = req
        .topics
        .iter()
        .map(|t| {
            let parts = t.partitions.iter().map(|p| p.partition_index).filter(|&p| known(&t.name, p)).collect();
            (t.name.0.as_str().to_string(), parts)
        })
        .collect();
    // As Kafka's KafkaApis: partitions that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION
    // and merged into the coordinator's answer, whatever the group's.
    let (error, mut topics) = match broker.groups.delete_offsets(&broker.topics, &group_id, requested) {
        Err(e) => (e.code(), Vec::new()),
        Ok((deleted, written)) => {
            let error = match written {
                Ok(w) => GroupCoordinator::sync_to_disk(&broker.flusher, w).await.err().map_or(0, |e| e.code()),
                Err(e) => e.code(),
            };
            let topics = deleted
                .into_iter()
                .map(|(topic, parts)| {
                    let partitions = parts
                        .into_iter()
                        .map(|(p, e)| {
                            OffsetDeleteResponsePartition::default().with_partition_index(p).with_error_code(e)
                        })
                        .collect();
                    OffsetDeleteResponseTopic::default()
                        .with_name(TopicName(str_bytes(&topic)))
                        .with_partitions(partitions)
                })
                .collect();
            (error, topics)
        }
    };
    for t in &req.topics {
        let unknown: Vec<OffsetDeleteResponsePartition> = t
            .partitions
            .iter()
            .filter(|p| !known(&t.name, p.partition_index))
            .map(|p| {
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
            })
            .collect();
        if unknown.is_empty() {
            continue;
        }
        match topics.iter_mut().find(|r| r.name == t.name) {
            Some(r) => r.partitions.extend(unknown),
            None => {
                topics.push(OffsetDeleteResponseTopic::default().with_name(t.name.clone()).with_partitions(unknown))
            }
        }
    }
    OffsetDeleteResponse::default().with_error_code(error).with_topics(topics)
}
