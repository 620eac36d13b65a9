//! Committed offsets: OffsetCommit, OffsetFetch (single and multi-group) and OffsetDelete.
//! Authorization as Kafka's: OffsetCommit needs READ on the group and on each topic,
//! OffsetFetch DESCRIBE on the group and shows only topics it may describe (named ones refused
//! TOPIC_AUTHORIZATION_FAILED), OffsetDelete DELETE on the group and READ on each topic.

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

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::group::api::Committed;
use crate::group::records::OffsetValue;
use crate::log::now_ms;
use crate::security::acl;
use crate::security::authorizer::Authz;

/// Per topic, per partition: the commit outcome.
type CommitOutcome = Vec<(TopicName, Vec<(i32, Result<OffsetValue, ResponseError>)>)>;

pub async fn commit(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let group_id = req.group_id.0.as_str().to_string();
    let authz = ctx.authz(broker);
    if !authz.allows(acl::READ, acl::GROUP, &group_id) {
        return refuse_commit(&req, ResponseError::GroupAuthorizationFailed);
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return refuse_commit(&req, e);
    }
    let readable = authz.allowed_names(acl::READ, acl::TOPIC, req.topics.iter().map(|t| t.name.0.as_str()));
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
        let readable = readable.contains(topic.name.0.as_str());
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                // Kafka answers unreadable topics before asking the coordinator.
                let result = if !readable {
                    Err(ResponseError::TopicAuthorizationFailed)
                } else if let Some(e) = group_error {
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
        Ok(w) => broker.groups.sync_to_disk(&broker.flusher, w).await.err(),
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

/// Every partition of an OffsetCommit refused as a whole (Kafka's `getErrorResponse`).
fn refuse_commit(req: &OffsetCommitRequest, error: ResponseError) -> OffsetCommitResponse {
    let topics = req.topics.iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(error.code())
        });
        OffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions.collect())
    });
    OffsetCommitResponse::default().with_topics(topics.collect())
}

/// What OffsetFetch shows the principal (Kafka's): the committed offsets of the topics it may
/// describe (of all topics when `wanted` is None, silently), and the topics asked for that it
/// may not describe, to answer TOPIC_AUTHORIZATION_FAILED.
fn visible_committed(
    broker: &Broker,
    authz: &Authz<'_>,
    group_id: &str,
    wanted: Option<Vec<(String, Vec<i32>)>>,
) -> (Committed, Vec<(String, Vec<i32>)>) {
    let describable = |topic: &String| authz.allows(acl::DESCRIBE, acl::TOPIC, topic);
    match wanted {
        None => {
            let all = broker.groups.committed(group_id, None);
            (all.into_iter().filter(|(topic, _)| describable(topic)).collect(), Vec::new())
        }
        Some(topics) => {
            let (allowed, denied): (Vec<_>, Vec<_>) = topics.into_iter().partition(|(topic, _)| describable(topic));
            (broker.groups.committed(group_id, Some(allowed)), denied)
        }
    }
}

pub fn fetch(broker: &Arc<Broker>, ctx: &RequestContext, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let authz = ctx.authz(broker);
    let group_denied = |group: &str| !authz.allows(acl::DESCRIBE, acl::GROUP, group);
    let as_wanted = |t: &kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics| {
        (t.name.0.as_str().to_string(), t.partition_indexes.clone())
    };
    if version >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let group_id = g.group_id.0.as_str();
                let group = OffsetFetchResponseGroup::default().with_group_id(GroupId(g.group_id.0.clone()));
                if group_denied(group_id) {
                    return group.with_error_code(ResponseError::GroupAuthorizationFailed.code());
                }
                if let Err(e) = broker.groups.check_coordinator(group_id) {
                    return group.with_error_code(e.code());
                }
                let wanted = g.topics.as_ref().map(|ts| ts.iter().map(as_wanted).collect());
                let unstable = if req.require_stable {
                    broker.groups.pending_txn_partitions(group_id)
                } else {
                    Default::default()
                };
                let member = g.member_id.as_ref().map(|m| m.as_str());
                if let Err(e) = broker.groups.consumer_check_fetch(g.group_id.0.as_str(), member, g.member_epoch) {
                    return OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(e.code());
                }
                let (committed, denied) = visible_committed(broker, &authz, group_id, wanted);
                let topic_entry = |topic: &str, partitions| {
                    let t = OffsetFetchResponseTopics::default()
                        .with_name(TopicName(str_bytes(topic)))
                        .with_partitions(partitions);
                    if version >= 10 {
                        t.with_topic_id(broker.topics.get(topic).map_or(uuid::Uuid::nil(), |t| t.id))
                    } else {
                        t
                    }
                };
                let mut topics: Vec<OffsetFetchResponseTopics> = committed
                    .into_iter()
                    .map(|(topic, parts)| {
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
                        topic_entry(&topic, partitions)
                    })
                    .collect();
                topics.extend(denied.into_iter().map(|(topic, parts)| {
                    let partitions = parts.into_iter().map(|p| {
                        OffsetFetchResponsePartitions::default()
                            .with_partition_index(p)
                            .with_committed_offset(-1)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    });
                    topic_entry(&topic, partitions.collect())
                }));
                group.with_topics(topics)
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let group_id = req.group_id.0.as_str();
    if group_denied(group_id) {
        return OffsetFetchResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(group_id) {
        return OffsetFetchResponse::default().with_error_code(e.code());
    }
    let wanted = req
        .topics
        .as_ref()
        .map(|ts| ts.iter().map(|t| (t.name.0.as_str().to_string(), t.partition_indexes.clone())).collect());
    let unstable = if version >= 7 && req.require_stable {
        broker.groups.pending_txn_partitions(group_id)
    } else {
        Default::default()
    };
    let (committed, denied) = visible_committed(broker, &authz, group_id, wanted);
    let mut topics: Vec<OffsetFetchResponseTopic> = committed
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
    topics.extend(denied.into_iter().map(|(topic, parts)| {
        let partitions = parts.into_iter().map(|p| {
            OffsetFetchResponsePartition::default()
                .with_partition_index(p)
                .with_committed_offset(-1)
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        });
        OffsetFetchResponseTopic::default()
            .with_name(TopicName(str_bytes(&topic)))
            .with_partitions(partitions.collect())
    }));
    OffsetFetchResponse::default().with_topics(topics)
}

pub async fn delete(broker: &Arc<Broker>, ctx: &RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = req.group_id.0.as_str().to_string();
    let authz = ctx.authz(broker);
    if !authz.allows(acl::DELETE, acl::GROUP, &group_id) {
        return OffsetDeleteResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(&group_id) {
        return OffsetDeleteResponse::default().with_error_code(e.code());
    }
    let readable = authz.allowed_names(acl::READ, acl::TOPIC, req.topics.iter().map(|t| t.name.0.as_str()));
    // Unreadable topics are answered TOPIC_AUTHORIZATION_FAILED, unknown partitions
    // UNKNOWN_TOPIC_OR_PARTITION; the rest goes to the coordinator.
    let refusal = |topic: &TopicName, partition: i32| {
        if !readable.contains(topic.0.as_str()) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else if !broker
            .topics
            .get(topic.0.as_str())
            .is_some_and(|t| partition >= 0 && (partition as usize) < t.partitions.len())
        {
            Some(ResponseError::UnknownTopicOrPartition)
        } else {
            None
        }
    };
    let known = |topic: &TopicName, partition: i32| refusal(topic, partition).is_none();
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
                Ok(w) => broker.groups.sync_to_disk(&broker.flusher, w).await.err().map_or(0, |e| e.code()),
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
            .filter_map(|p| {
                let e = refusal(&t.name, p.partition_index)?;
                Some(
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(e.code()),
                )
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
