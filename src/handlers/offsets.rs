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
use crate::group::records::{Key, OffsetValue};
use crate::group::{GroupCoordinator, GroupState};
use crate::log::now_ms;

/// Per topic, per partition: the commit outcome.
type CommitOutcome = Vec<(TopicName, Vec<(i32, Result<OffsetValue, ResponseError>)>)>;
/// Per topic: (partition, offset, leader epoch, metadata).
type Committed = Vec<(String, Vec<(i32, i64, i32, String)>)>;

pub async fn commit(broker: &Arc<Broker>, req: OffsetCommitRequest, _version: i16) -> OffsetCommitResponse {
    let group_id = req.group_id.0.as_str().to_string();
    let now = now_ms();
    // Per partition: Ok(value to store) or the error to report.
    let mut outcome: CommitOutcome = Vec::new();
    let group_error = {
        let inner = broker.groups.lock();
        let group = inner.groups.get(&group_id);
        if group_id.is_empty() {
            Some(ResponseError::InvalidGroupId)
        } else if req.generation_id_or_member_epoch < 0 && req.member_id.is_empty() {
            // A "simple" commit from a consumer outside any group: only allowed when the group
            // has no active members.
            group.filter(|g| g.state != GroupState::Empty).map(|_| ResponseError::UnknownMemberId)
        } else {
            match group {
                None => Some(ResponseError::IllegalGeneration),
                Some(g) => match g.check_member(
                    req.member_id.as_str(),
                    req.group_instance_id.as_ref().map(|s| s.as_str()),
                    req.generation_id_or_member_epoch,
                ) {
                    Err(e) => Some(e),
                    // As Kafka: members of the current generation may still commit while a
                    // rebalance is being prepared (eager consumers commit in onPartitionsRevoked),
                    // but not between JoinGroup and SyncGroup.
                    Ok(()) if g.state == GroupState::CompletingRebalance => Some(ResponseError::RebalanceInProgress),
                    Ok(()) => None,
                },
            }
        }
    };
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
    let mut entries: Vec<(Key, Option<Vec<u8>>)> = Vec::new();
    for (topic, parts) in &outcome {
        for (p, r) in parts {
            if let Ok(v) = r {
                entries.push((
                    Key::Offset { group: group_id.clone(), topic: topic.0.as_str().to_string(), partition: *p },
                    Some(v.encode()),
                ));
            }
        }
    }
    // Append and update the cache under the lock (so cache order is log order), fsync outside.
    let written = {
        let mut inner = broker.groups.lock();
        let written = broker.groups.append(&broker.topics, &group_id, entries);
        if written.is_ok() {
            let cache = inner.offsets.entry(group_id.clone()).or_default();
            for (topic, parts) in &outcome {
                for (p, r) in parts {
                    if let Ok(v) = r {
                        cache.insert((topic.0.as_str().to_string(), *p), v.clone());
                    }
                }
            }
        }
        written
    };
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

/// (topic, partition, offset, leader epoch, metadata) for a group, optionally filtered.
fn committed(broker: &Broker, group: &str, wanted: Option<Vec<(String, Vec<i32>)>>) -> Committed {
    let inner = broker.groups.lock();
    let offsets = inner.offsets.get(group);
    let lookup = |topic: &str, p: i32| offsets.and_then(|o| o.get(&(topic.to_string(), p)));
    match wanted {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, parts)| {
                let values = parts
                    .into_iter()
                    .map(|p| match lookup(&topic, p) {
                        Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone()),
                        None => (p, -1, -1, String::new()),
                    })
                    .collect();
                (topic, values)
            })
            .collect(),
        None => {
            let mut out: Committed = Vec::new();
            for ((topic, p), v) in offsets.into_iter().flatten() {
                if out.last().is_none_or(|(t, _)| t != topic) {
                    out.push((topic.clone(), Vec::new()));
                }
                out.last_mut().expect("pushed").1.push((*p, v.offset, v.leader_epoch, v.metadata.clone()));
            }
            out
        }
    }
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
                let topics = committed(broker, g.group_id.0.as_str(), wanted)
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
    let topics = committed(broker, req.group_id.0.as_str(), wanted)
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
    let mut entries = Vec::new();
    let result: Result<Vec<OffsetDeleteResponseTopic>, ResponseError> = {
        let mut inner = broker.groups.lock();
        let exists = inner.groups.contains_key(&group_id) || inner.offsets.contains_key(&group_id);
        if !exists {
            Err(ResponseError::GroupIdNotFound)
        } else {
            let group = inner.groups.get(&group_id);
            let active = group.is_some_and(|g| g.state != GroupState::Empty);
            let subscribed: Vec<bool> =
                req.topics.iter().map(|t| active && group.is_some_and(|g| g.subscribed(t.name.0.as_str()))).collect();
            let mut topics = Vec::new();
            for (t, busy) in req.topics.iter().zip(subscribed) {
                let mut partitions = Vec::new();
                for p in t.partitions.iter().filter(|p| known(&t.name, p.partition_index)) {
                    let error = if busy {
                        ResponseError::GroupSubscribedToTopic.code()
                    } else {
                        if let Some(o) = inner.offsets.get_mut(&group_id) {
                            if o.remove(&(t.name.0.as_str().to_string(), p.partition_index)).is_some() {
                                entries.push((
                                    Key::Offset {
                                        group: group_id.clone(),
                                        topic: t.name.0.as_str().to_string(),
                                        partition: p.partition_index,
                                    },
                                    None,
                                ));
                            }
                        }
                        0
                    };
                    partitions.push(
                        OffsetDeleteResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(error),
                    );
                }
                topics.push(OffsetDeleteResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions));
            }
            Ok(topics)
        }
    };
    // As Kafka's KafkaApis: partitions that do not exist are answered UNKNOWN_TOPIC_OR_PARTITION
    // and merged into the coordinator's answer, whatever the group's.
    let (error, mut topics) = match result {
        Err(e) => (e.code(), Vec::new()),
        Ok(topics) => {
            let written = broker.groups.append(&broker.topics, &group_id, entries);
            let error = match written {
                Ok(w) => GroupCoordinator::sync_to_disk(&broker.flusher, w).await.err().map_or(0, |e| e.code()),
                Err(e) => e.code(),
            };
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
