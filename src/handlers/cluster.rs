//! Cluster-shape APIs that a single node answers for itself: DescribeLogDirs and
//! AlterReplicaLogDirs (moves between log directories run in `metadata::replica_move`),
//! DescribeTopicPartitions (paginated), OffsetForLeaderEpoch, ElectLeaders and the partition
//! reassignment pair (this node is every partition's only replica and leader). A broker of a
//! controller quorum answers DescribeTopicPartitions from the metadata image instead
//! (`topic_partitions_image`).
//!
//! Authorization as Kafka's: AlterReplicaLogDirs, ElectLeaders and AlterPartitionReassignments
//! need ALTER on the cluster, DescribeLogDirs and ListPartitionReassignments DESCRIBE (refused
//! whole, CLUSTER_AUTHORIZATION_FAILED); DescribeTopicPartitions DESCRIBE on each topic;
//! OffsetForLeaderEpoch CLUSTER_ACTION or DESCRIBE on each topic.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::AlterPartitionReassignmentsRequest;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    AlterPartitionReassignmentsResponse, ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::AlterReplicaLogDirsRequest;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult, AlterReplicaLogDirsResponse,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResponse, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::describe_topic_partitions_request::DescribeTopicPartitionsRequest;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::elect_leaders_request::ElectLeadersRequest;
use kafka_protocol::messages::elect_leaders_response::{ElectLeadersResponse, PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsRequest;
use kafka_protocol::messages::list_partition_reassignments_response::{
    ListPartitionReassignmentsResponse, OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::create_topics::validate_assignment;
use super::{cluster_denied, str_bytes, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::security::acl;

/// AlterReplicaLogDirs (Kafka's `ReplicaManager.alterReplicaLogDirs`): per partition, a path
/// that is not one of `log.dirs` as DescribeLogDirs reports them is LOG_DIR_NOT_FOUND, an
/// unknown partition UNKNOWN_TOPIC_OR_PARTITION; otherwise NONE at once and the move runs in
/// the background (already there: nothing to do, and an unfinished move elsewhere is dropped).
pub fn alter_replica_log_dirs(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let allowed = ctx.authz(broker).cluster(acl::ALTER);
    let mut results: indexmap::IndexMap<String, Vec<AlterReplicaLogDirPartitionResult>> = Default::default();
    for dir in &req.dirs {
        for topic in &dir.topics {
            let name = topic.name.0.as_str().to_string();
            for &p in &topic.partitions {
                if !allowed {
                    let result = AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
                    results.entry(name.clone()).or_default().push(result);
                    continue;
                }
                let code = match broker.topics.request_move(&name, p, dir.path.as_str()) {
                    Ok(start) => {
                        if start {
                            let (b, t) = (broker.clone(), name.clone());
                            let spawned = std::thread::Builder::new()
                                .name(format!("move-{t}-{p}"))
                                .spawn(move || b.topics.run_moves(&t, p));
                            if let Err(e) = spawned {
                                tracing::error!(error = %e, "could not start a log directory move");
                            }
                        }
                        0
                    }
                    Err(e) => e.code(),
                };
                let result = AlterReplicaLogDirPartitionResult::default().with_partition_index(p).with_error_code(code);
                results.entry(name.clone()).or_default().push(result);
            }
        }
    }
    let results = results
        .into_iter()
        .map(|(name, partitions)| {
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(TopicName(str_bytes(&name)))
                .with_partitions(partitions)
        })
        .collect();
    AlterReplicaLogDirsResponse::default().with_results(results)
}

/// Every entry of `log.dirs` with the partitions it holds (Kafka's
/// `ReplicaManager.describeLogDirs`): sizes, offset lag 0 for the partitions themselves and,
/// while a partition moves, its copy in the target directory as a future replica (its size so
/// far, its lag behind the log end); topics without a wanted partition left out; from v4 the
/// volume's total and usable bytes.
pub fn describe_log_dirs(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeLogDirsRequest,
    version: i16,
) -> DescribeLogDirsResponse {
    if !ctx.authz(broker).cluster(acl::DESCRIBE) {
        // Kafka: no directory at all, the error at the top (v3+).
        return DescribeLogDirsResponse::default().with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let wanted = |topic: &str, p: i32| {
        req.topics.as_ref().is_none_or(|ts| ts.iter().any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&p)))
    };
    let topics = broker.topics.all();
    let moves = broker.topics.moves();
    let results = broker
        .topics
        .log_dirs()
        .dirs()
        .iter()
        .enumerate()
        .map(|(i, dir)| {
            if dir.health.is_offline() {
                // Kafka: the directory with KAFKA_STORAGE_ERROR, nothing else (sizes unknown).
                return DescribeLogDirsResult::default()
                    .with_log_dir(str_bytes(&dir.path.display().to_string()))
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_total_bytes(-1)
                    .with_usable_bytes(-1);
            }
            let in_dir: Vec<_> = topics
                .iter()
                .filter_map(|t| {
                    let mut partitions = Vec::new();
                    for p in t.partitions.iter().filter(|p| wanted(&t.name, p.index)) {
                        if p.log_dir() == dir.path {
                            partitions.push(
                                DescribeLogDirsPartition::default()
                                    .with_partition_index(p.index)
                                    .with_partition_size(p.log().size_bytes() as i64)
                                    .with_offset_lag(0),
                            );
                        }
                        let future = moves.get(&(t.name.clone(), p.index)).filter(|m| m.future_dir == Some(i));
                        if let Some(m) = future {
                            let lag = (p.log().log_end_offset() - m.future_end_offset.max(0)).max(0);
                            partitions.push(
                                DescribeLogDirsPartition::default()
                                    .with_partition_index(p.index)
                                    .with_partition_size(m.future_bytes as i64)
                                    .with_offset_lag(lag)
                                    .with_is_future_key(true),
                            );
                        }
                    }
                    (!partitions.is_empty()).then(|| {
                        DescribeLogDirsTopic::default()
                            .with_name(TopicName(str_bytes(&t.name)))
                            .with_partitions(partitions)
                    })
                })
                .collect();
            let result = DescribeLogDirsResult::default()
                .with_log_dir(str_bytes(&dir.path.display().to_string()))
                .with_topics(in_dir);
            // v4+: the size of the directory's volume and the space left to this process, as
            // Kafka's FileStore total and usable space (-1 when unknown).
            if version >= 4 {
                let (total, usable) = rustix::fs::statvfs(&dir.path)
                    .map_or((-1, -1), |s| ((s.f_blocks * s.f_frsize) as i64, (s.f_bavail * s.f_frsize) as i64));
                result.with_total_bytes(total).with_usable_bytes(usable)
            } else {
                result
            }
        })
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

pub fn describe_topic_partitions(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let authz = ctx.authz(broker);
    let node = BrokerId(broker.config.node_id);
    let limit = req.response_partition_limit.max(1) as usize;
    let mut names: Vec<String> = if req.topics.is_empty() {
        broker.topics.all().iter().map(|t| t.name.clone()).collect()
    } else {
        req.topics.iter().map(|t| t.name.0.as_str().to_string()).collect()
    };
    names.sort();
    let (start_topic, start_partition) =
        req.cursor.as_ref().map_or((String::new(), 0), |c| (c.topic_name.0.as_str().to_string(), c.partition_index));
    let mut emitted = 0usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    // Kafka's: a named topic without DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED after the
    // others (without its id); the all-topics listing leaves it out.
    let mut refused = Vec::new();
    for name in names.into_iter().filter(|n| *n >= start_topic) {
        if !authz.allows(acl::DESCRIBE, acl::TOPIC, &name) {
            if !req.topics.is_empty() {
                refused.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        .with_name(Some(TopicName(str_bytes(&name)))),
                );
            }
            continue;
        }
        let operations = authz.operations(acl::TOPIC, &name);
        let Some(topic) = broker.topics.get(&name) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    .with_name(Some(TopicName(str_bytes(&name))))
                    .with_topic_authorized_operations(operations),
            );
            continue;
        };
        let first = if name == start_topic { start_partition.max(0) as usize } else { 0 };
        let mut partitions = Vec::new();
        for p in topic.partitions.iter().skip(first) {
            if emitted == limit {
                next_cursor =
                    Some(Cursor::default().with_topic_name(TopicName(str_bytes(&name))).with_partition_index(p.index));
                break;
            }
            let epoch = crate::replica::leader_epoch(&p.log());
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p.index)
                    .with_leader_id(node)
                    .with_leader_epoch(epoch)
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node])
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new())),
            );
            emitted += 1;
        }
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(TopicName(str_bytes(&name))))
                .with_topic_id(topic.id)
                .with_is_internal(topic.internal)
                .with_partitions(partitions)
                .with_topic_authorized_operations(operations),
        );
        if next_cursor.is_some() {
            break;
        }
    }
    topics.extend(refused);
    DescribeTopicPartitionsResponse::default().with_topics(topics).with_next_cursor(next_cursor)
}

pub fn offset_for_leader_epoch(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    // Kafka: CLUSTER_ACTION (replicas) covers every topic, else each needs DESCRIBE.
    let authz = ctx.authz(broker);
    let replica = authz.allows_quietly(acl::CLUSTER_ACTION, acl::CLUSTER, acl::CLUSTER_NAME);
    let describable = match replica {
        true => req.topics.iter().map(|t| t.topic.0.as_str()).collect(),
        false => authz.allowed_names(acl::DESCRIBE, acl::TOPIC, req.topics.iter().map(|t| t.topic.0.as_str())),
    };
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let result =
                        EpochEndOffset::default().with_partition(p.partition).with_leader_epoch(-1).with_end_offset(-1);
                    if !describable.contains(t.topic.0.as_str()) {
                        return result.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let partition = match broker.hosted_partition(t.topic.0.as_str(), p.partition) {
                        Ok(partition) => partition,
                        Err(e) => return result.with_error_code(e.code()),
                    };
                    let log = partition.log();
                    if let Err(e) = broker.check_leader(&partition, &log, p.current_leader_epoch) {
                        return result.with_error_code(e.code());
                    }
                    let (epoch, end) = log.end_offset_for_epoch(p.leader_epoch);
                    result.with_leader_epoch(epoch).with_end_offset(end)
                })
                .collect();
            OffsetForLeaderTopicResult::default().with_topic(t.topic.clone()).with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

pub fn elect_leaders(broker: &Arc<Broker>, ctx: &RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse {
    if !ctx.authz(broker).cluster(acl::ALTER) {
        // Kafka's error response: every partition asked for refused, the error at the top too.
        let (code, message) = cluster_denied();
        let results = req.topic_partitions.iter().flatten().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                PartitionResult::default()
                    .with_partition_id(*p)
                    .with_error_code(code)
                    .with_error_message(message.clone())
            });
            ReplicaElectionResult::default().with_topic(t.topic.clone()).with_partition_result(partitions.collect())
        });
        return ElectLeadersResponse::default().with_error_code(code).with_replica_election_results(results.collect());
    }
    // The only replica already leads every partition: nothing to elect. Asked for every
    // partition (null), Kafka lists each topic with no partition results, as a partition that
    // needs no election is left out then.
    let Some(requested) = req.topic_partitions.as_ref() else {
        let results = broker
            .topics
            .all()
            .iter()
            .map(|t| ReplicaElectionResult::default().with_topic(TopicName(str_bytes(&t.name))))
            .collect();
        return ElectLeadersResponse::default().with_replica_election_results(results);
    };
    let results = requested
        .iter()
        .map(|t| {
            let name = t.topic.0.as_str();
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let (error, message) = if broker.topics.get(name).is_none() {
                        (ResponseError::UnknownTopicOrPartition, format!("No such topic as {name}"))
                    } else if broker.topics.partition(name, *p).is_none() {
                        (ResponseError::UnknownTopicOrPartition, format!("No such partition as {name}-{p}"))
                    } else {
                        (ResponseError::ElectionNotNeeded, default_message(ResponseError::ElectionNotNeeded))
                    };
                    PartitionResult::default()
                        .with_partition_id(*p)
                        .with_error_code(error.code())
                        .with_error_message(Some(str_bytes(&message)))
                })
                .collect();
            ReplicaElectionResult::default().with_topic(t.topic.clone()).with_partition_result(partitions)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// AlterPartitionReassignments refused whole: every partition with the top-level error and message.
pub(crate) fn reassignments_refused(
    req: &AlterPartitionReassignmentsRequest,
    code: i16,
    message: Option<StrBytes>,
) -> AlterPartitionReassignmentsResponse {
    let responses: Vec<_> = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                ReassignablePartitionResponse::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(message.clone())
            });
            ReassignableTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions.collect())
        })
        .collect();
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(code)
        .with_error_message(message)
        .with_responses(responses)
}

/// ListPartitionReassignments refused whole, with the named partitions.
pub(crate) fn list_reassignments_refused(
    req: &ListPartitionReassignmentsRequest,
    code: i16,
    message: Option<StrBytes>,
) -> ListPartitionReassignmentsResponse {
    let topics = req.topics.iter().flatten().map(|t| {
        let partitions =
            t.partition_indexes.iter().map(|p| OngoingPartitionReassignment::default().with_partition_index(*p));
        OngoingTopicReassignment::default().with_name(t.name.clone()).with_partitions(partitions.collect())
    });
    ListPartitionReassignmentsResponse::default()
        .with_error_code(code)
        .with_error_message(message)
        .with_topics(topics.collect())
}

pub fn alter_partition_reassignments(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    if !ctx.authz(broker).cluster(acl::ALTER) {
        let (code, message) = cluster_denied();
        return reassignments_refused(&req, code, message);
    }
    let node = broker.config.node_id;
    let responses = req
        .topics
        .iter()
        .map(|t| {
            let name = t.name.0.as_str();
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    // Kafka's checks and messages (`alterPartitionReassignment`); reassignments
                    // complete at once on a single node.
                    let index = p.partition_index;
                    let outcome = if broker.topics.get(name).is_none() {
                        Err((ResponseError::UnknownTopicOrPartition, format!("Unable to find a topic named {name}.")))
                    } else if broker.topics.partition(name, index).is_none() {
                        let message = format!("Unable to find partition {name}:{index}.");
                        Err((ResponseError::UnknownTopicOrPartition, message))
                    } else {
                        match &p.replicas {
                            // Kafka answers this one without a message.
                            None => Err((ResponseError::NoReassignmentInProgress, String::new())),
                            Some(replicas) => validate_assignment(replicas, &[node]),
                        }
                    };
                    let (error, message) = match outcome {
                        Ok(()) => (0, None),
                        Err((e, message)) => (e.code(), Some(message).filter(|m| !m.is_empty()).map(|m| str_bytes(&m))),
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(index)
                        .with_error_code(error)
                        .with_error_message(message)
                })
                .collect();
            ReassignableTopicResponse::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    AlterPartitionReassignmentsResponse::default().with_responses(responses).with_error_message(None)
}

pub fn list_partition_reassignments(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !ctx.authz(broker).cluster(acl::DESCRIBE) {
        let (code, message) = cluster_denied();
        return list_reassignments_refused(&req, code, message);
    }
    // Reassignments complete at once on a single node: none is ever in progress.
    ListPartitionReassignmentsResponse::default().with_error_message(None)
}
