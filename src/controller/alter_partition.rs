//! AlterPartition (v2+, topics by id): a partition leader's ISR and leader recovery state
//! changes, validated and turned into PartitionChangeRecords as Kafka's
//! `ReplicationControlManager.alterPartition` does.
//!
//! Per partition, in Kafka's order: unknown partition UNKNOWN_TOPIC_OR_PARTITION; a leader or
//! partition epoch newer than the controller's NOT_CONTROLLER; an older leader epoch
//! FENCED_LEADER_EPOCH; a requester that is not the leader INVALID_REQUEST; an older partition
//! epoch INVALID_UPDATE_VERSION; an ISR naming non-replicas or twice the same broker, without the
//! leader, of more than one member while RECOVERING, or going back from RECOVERED to RECOVERING
//! INVALID_REQUEST; an ISR member unregistered, fenced, in controlled shutdown or at another
//! broker epoch INELIGIBLE_REPLICA. A stale broker epoch of the requester refuses the whole
//! request (STALE_BROKER_EPOCH). An unknown topic id answers UNKNOWN_TOPIC_ID for each of its
//! partitions.
//!
//! Invariants: a partition refused gets no record; a partition accepted is answered with its
//! state after the returned records; when the change would move leadership away from the
//! requester (only a reassignment completing does that in Kafka) the record is still written and
//! the answer is NEW_LEADER_ELECTED. An ISR that holds every target replica of an ongoing
//! reassignment completes it in the same record (`partition_change`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData};
use kafka_protocol::messages::alter_partition_response::{PartitionData as PartitionAnswer, TopicData as TopicAnswer};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};

use super::partition_change::{leader_acceptor, unclean_enabled, Election, PartitionChange, RECOVERED, RECOVERING};
use super::ControllerConfig;
use crate::metadata::image::{MetadataImage, PartitionImage, TopicImage, NO_LEADER_CHANGE};
use crate::metadata::records::MetadataRecord;

/// The lowest AlterPartition version served (topics by id).
pub const LOWEST_VERSION: i16 = 2;

/// The records to append and the response for an AlterPartition request of `version`.
pub fn alter_partition(
    image: &MetadataImage,
    config: &ControllerConfig,
    request: &AlterPartitionRequest,
    version: i16,
) -> (Vec<MetadataRecord>, AlterPartitionResponse) {
    assert!(version >= LOWEST_VERSION, "AlterPartition v{version} names topics: not served");
    let requester = request.broker_id.0;
    let mut response = AlterPartitionResponse::default();
    let epoch_ok = image.brokers.get(&requester).is_some_and(|b| b.epoch == request.broker_epoch);
    if !epoch_ok {
        response.error_code = ResponseError::StaleBrokerEpoch.code();
        return (Vec::new(), response);
    }
    let mut records = Vec::new();
    for topic in &request.topics {
        let mut answer = TopicAnswer::default().with_topic_id(topic.topic_id);
        let known = image.topics.get(&topic.topic_id).filter(|_| !topic.topic_id.is_nil());
        for data in &topic.partitions {
            let result = match known {
                None => Err(ResponseError::UnknownTopicId),
                Some(t) => alter_one(image, config, t, requester, data, version),
            };
            answer.partitions.push(match result {
                Ok((record, after)) => {
                    let moved_away =
                        record.as_ref().is_some_and(|r| r.leader != NO_LEADER_CHANGE && r.leader != requester);
                    records.extend(record.map(MetadataRecord::PartitionChange));
                    if moved_away {
                        refused(data.partition_index, ResponseError::NewLeaderElected)
                    } else {
                        accepted(data.partition_index, &after)
                    }
                }
                Err(error) => refused(data.partition_index, error),
            });
        }
        response.topics.push(answer);
    }
    (records, response)
}

/// The new ISR with broker epochs (-1: not checked), from either field of the request.
fn new_isr(data: &PartitionData, version: i16) -> Vec<BrokerState> {
    if version >= 3 {
        data.new_isr_with_epochs.clone()
    } else {
        data.new_isr.iter().map(|&b| BrokerState::default().with_broker_id(b).with_broker_epoch(-1)).collect()
    }
}

type Change = (Option<crate::metadata::records::PartitionChangeRecord>, PartitionImage);

fn alter_one(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
    requester: i32,
    data: &PartitionData,
    version: i16,
) -> Result<Change, ResponseError> {
    let Some(partition) = topic.partitions.get(&data.partition_index) else {
        return Err(ResponseError::UnknownTopicOrPartition);
    };
    let isr = new_isr(data, version);
    validate(image, partition, requester, data, &isr)?;
    let election = if unclean_enabled(image, config, &topic.name) { Election::Unclean } else { Election::Default };
    let record = PartitionChange::new(topic.id, data.partition_index, partition, leader_acceptor(image, partition))
        .with_elr(image, &topic.name)
        .target_isr(isr.iter().map(|b| b.broker_id.0).collect())
        .target_recovery_state(data.leader_recovery_state)
        .election(election)
        .build();
    let after = record.as_ref().map_or_else(|| partition.clone(), |r| partition.merge(r));
    Ok((record, after))
}

fn validate(
    image: &MetadataImage,
    partition: &PartitionImage,
    requester: i32,
    data: &PartitionData,
    isr: &[BrokerState],
) -> Result<(), ResponseError> {
    if data.leader_epoch > partition.leader_epoch || data.partition_epoch > partition.partition_epoch {
        // The requester knows a newer state: this controller is likely no longer active.
        return Err(ResponseError::NotController);
    }
    if data.leader_epoch < partition.leader_epoch {
        return Err(ResponseError::FencedLeaderEpoch);
    }
    if requester != partition.leader {
        return Err(ResponseError::InvalidRequest);
    }
    if data.partition_epoch < partition.partition_epoch {
        return Err(ResponseError::InvalidUpdateVersion);
    }
    let members: Vec<i32> = isr.iter().map(|b| b.broker_id.0).collect();
    let distinct = members.iter().enumerate().all(|(i, m)| !members[..i].contains(m));
    if !distinct || !members.iter().all(|m| partition.replicas.contains(m)) || !members.contains(&partition.leader) {
        return Err(ResponseError::InvalidRequest);
    }
    let recovery_state = data.leader_recovery_state;
    if recovery_state != RECOVERED && recovery_state != RECOVERING {
        return Err(ResponseError::InvalidRequest);
    }
    if recovery_state == RECOVERING && members.len() > 1 {
        return Err(ResponseError::InvalidRequest);
    }
    if partition.leader_recovery_state == RECOVERED && recovery_state == RECOVERING {
        return Err(ResponseError::InvalidRequest);
    }
    if isr.iter().any(|b| !eligible(image, b)) {
        return Err(ResponseError::IneligibleReplica);
    }
    Ok(())
}

/// Kafka's `ineligibleReplicasForIsr`, for one member.
fn eligible(image: &MetadataImage, member: &BrokerState) -> bool {
    match image.brokers.get(&member.broker_id.0) {
        None => false,
        Some(b) => {
            !b.in_controlled_shutdown && !b.fenced && (member.broker_epoch == -1 || member.broker_epoch == b.epoch)
        }
    }
}

fn accepted(partition_index: i32, p: &PartitionImage) -> PartitionAnswer {
    PartitionAnswer::default()
        .with_partition_index(partition_index)
        .with_leader_id(BrokerId(p.leader))
        .with_isr(p.isr.iter().map(|&b| BrokerId(b)).collect())
        .with_leader_recovery_state(p.leader_recovery_state)
        .with_leader_epoch(p.leader_epoch)
        .with_partition_epoch(p.partition_epoch)
}

fn refused(partition_index: i32, error: ResponseError) -> PartitionAnswer {
    PartitionAnswer::default().with_partition_index(partition_index).with_error_code(error.code())
}

#[cfg(test)]
#[path = "alter_partition_tests.rs"]
mod alter_partition_tests;
