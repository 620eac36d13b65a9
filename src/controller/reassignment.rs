//! Partition reassignment on the controller: AlterPartitionReassignments and
//! ListPartitionReassignments as Kafka's `ReplicationControlManager` decides them
//! (`alterPartitionReassignments`, `changePartitionReassignment`, `cancelPartitionReassignment`,
//! `listPartitionReassignments`, with `PartitionReassignmentReplicas` and
//! `PartitionReassignmentRevert`).
//!
//! Starting: the replicas become the target followed by the current replicas it drops
//! (ascending), `adding` the target's new brokers and `removing` the dropped ones (both
//! ascending); when the ISR already holds the whole target the builder completes the move in the
//! same record (`partition_change::Targets::complete_reassignment`), moving leadership off a
//! removed leader. Otherwise the move completes with the AlterPartition (or any other change)
//! whose ISR holds every target replica. Cancelling (`replicas: null`) reverts to the original
//! replicas (the current ones without the adding ones) and drops the adding replicas from the
//! ISR; when only adding replicas were in it, the first original replica becomes the ISR, which
//! Kafka counts as an unclean election (refused unless `unclean.leader.election.enable`).
//!
//! Per partition, in Kafka's order: an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; a
//! cancellation without a reassignment NO_REASSIGNMENT_IN_PROGRESS; an invalid target (empty,
//! an unregistered or negative broker id, a broker twice) INVALID_REPLICA_ASSIGNMENT; with
//! `allow_replication_factor_change` false (v1, KIP-1101), a target whose length differs from the
//! replica set the partition is headed for INVALID_REPLICATION_FACTOR. Each with Kafka's message.
//!
//! Invariants: a refused partition gets no record; each partition is decided against the image as
//! the request found it (as Kafka, whose records apply after the whole request); the records apply
//! to the image; a target equal to the current assignment without a reassignment writes nothing.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::partition_change::{leader_acceptor, unclean_enabled, Election, PartitionChange};
use super::topic_changes::{check_assignment, default_directory, Refusal};
use super::ControllerConfig;
use crate::metadata::image::{MetadataImage, PartitionImage, TopicImage};
use crate::metadata::records::{MetadataRecord, PartitionChangeRecord};

/// Kafka's `isReassignmentInProgress`.
pub fn in_progress(partition: &PartitionImage) -> bool {
    !partition.adding_replicas.is_empty() || !partition.removing_replicas.is_empty()
}

/// Kafka's `PartitionReassignmentReplicas` from a current and a target assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentReplicas {
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl ReassignmentReplicas {
    pub fn new(current: &[i32], target: &[i32]) -> ReassignmentReplicas {
        let difference = |a: &[i32], b: &[i32]| {
            let mut d: Vec<i32> = a.iter().copied().filter(|r| !b.contains(r)).collect();
            d.sort_unstable();
            d.dedup();
            d
        };
        let removing = difference(current, target);
        let adding = difference(target, current);
        let replicas = target.iter().chain(&removing).copied().collect();
        ReassignmentReplicas { replicas, adding, removing }
    }
}

/// Kafka's `PartitionReassignmentRevert`: the replicas and ISR after cancelling, and whether the
/// ISR had to be made up (an unclean election).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revert {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub unclean: bool,
}

impl Revert {
    pub fn new(partition: &PartitionImage) -> Result<Revert, Refusal> {
        let adding = &partition.adding_replicas;
        let replicas: Vec<i32> = partition.replicas.iter().copied().filter(|r| !adding.contains(r)).collect();
        let mut isr: Vec<i32> = partition.isr.iter().copied().filter(|r| !adding.contains(r)).collect();
        if !isr.is_empty() {
            return Ok(Revert { replicas, isr, unclean: false });
        }
        let Some(&first) = replicas.first() else {
            return Err(invalid_assignment("Invalid replica assignment: addingReplicas contains all replicas."));
        };
        isr.push(first);
        Ok(Revert { replicas, isr, unclean: true })
    }
}

fn invalid_assignment(message: &str) -> Refusal {
    (ResponseError::InvalidReplicaAssignment, message.to_string())
}

/// The records and the response of an AlterPartitionReassignments request (v0 asks with
/// `allow_replication_factor_change` true, as its decoder fills it in).
pub fn alter_partition_reassignments(
    image: &MetadataImage,
    config: &ControllerConfig,
    request: &AlterPartitionReassignmentsRequest,
) -> (Vec<MetadataRecord>, AlterPartitionReassignmentsResponse) {
    let allow_rf_change = request.allow_replication_factor_change;
    let mut records = Vec::new();
    let mut responses = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let partitions = topic
            .partitions
            .iter()
            .map(|target| {
                // Kafka's ApiError.NONE: a null message.
                let answer = ReassignablePartitionResponse::default()
                    .with_partition_index(target.partition_index)
                    .with_error_message(None);
                match alter_one(image, config, name, target, allow_rf_change) {
                    Ok(record) => {
                        records.extend(record.map(MetadataRecord::PartitionChange));
                        answer
                    }
                    Err((error, message)) => {
                        tracing::info!(topic = name, partition = target.partition_index, ?error, %message,
                            "partition reassignment refused");
                        answer.with_error_code(error.code()).with_error_message(Some(StrBytes::from_string(message)))
                    }
                }
            })
            .collect();
        responses.push(ReassignableTopicResponse::default().with_name(topic.name.clone()).with_partitions(partitions));
    }
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_error_message(None)
        .with_responses(responses);
    (records, response)
}

/// Kafka's `alterPartitionReassignment`: the record for one partition (none when nothing changes).
fn alter_one(
    image: &MetadataImage,
    config: &ControllerConfig,
    name: &str,
    target: &ReassignablePartition,
    allow_rf_change: bool,
) -> Result<Option<PartitionChangeRecord>, Refusal> {
    let unknown = |message: String| (ResponseError::UnknownTopicOrPartition, message);
    let topic = image.topic(name).ok_or_else(|| unknown(format!("Unable to find a topic named {name}.")))?;
    let index = target.partition_index;
    let partition =
        topic.partitions.get(&index).ok_or_else(|| unknown(format!("Unable to find partition {name}:{index}.")))?;
    match &target.replicas {
        None => cancel(image, config, topic, index, partition),
        Some(replicas) => {
            let replicas: Vec<i32> = replicas.iter().map(|b| b.0).collect();
            change(image, topic, index, partition, &replicas, allow_rf_change)
        }
    }
}

/// Kafka's `cancelPartitionReassignment`.
fn cancel(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionImage,
) -> Result<Option<PartitionChangeRecord>, Refusal> {
    if !in_progress(partition) {
        return Err((ResponseError::NoReassignmentInProgress, "No partition reassignment is in progress.".to_string()));
    }
    let revert = Revert::new(partition)?;
    let unclean = unclean_enabled(image, config, &topic.name);
    if revert.unclean && !unclean {
        return Err(invalid_assignment(&format!(
            "Unable to revert partition assignment for {}:{index} because it would require an unclean leader \
             election.",
            topic.name
        )));
    }
    let election = if unclean { Election::Unclean } else { Election::Default };
    Ok(PartitionChange::new(topic.id, index, partition, leader_acceptor(image, partition))
        .with_elr(image, &topic.name)
        .election(election)
        .target_isr(revert.isr)
        .target_assignment(revert.replicas, Vec::new(), Vec::new(), |b| default_directory(image, b))
        .build())
}

/// Kafka's `changePartitionReassignment` (and, when refused changes of the replication factor,
/// `validatePartitionReplicationFactorUnchanged`).
fn change(
    image: &MetadataImage,
    topic: &TopicImage,
    index: i32,
    partition: &PartitionImage,
    target: &[i32],
    allow_rf_change: bool,
) -> Result<Option<PartitionChangeRecord>, Refusal> {
    check_assignment(image, target, None)?;
    if !allow_rf_change {
        let heading = heading_replication_factor(partition);
        if heading != target.len() {
            return Err((
                ResponseError::InvalidReplicationFactor,
                format!("The replication factor is changed from {heading} to {}", target.len()),
            ));
        }
    }
    let moving = ReassignmentReplicas::new(&partition.replicas, target);
    // Kafka's builder keeps what it is not given: the current replicas, adding and removing
    // replicas when the new ones are the same or empty.
    let replicas = if moving.replicas == partition.replicas { partition.replicas.clone() } else { moving.replicas };
    let removing = if moving.removing.is_empty() { partition.removing_replicas.clone() } else { moving.removing };
    let adding = if moving.adding.is_empty() { partition.adding_replicas.clone() } else { moving.adding };
    Ok(PartitionChange::new(topic.id, index, partition, leader_acceptor(image, partition))
        .with_elr(image, &topic.name)
        .target_assignment(replicas, removing, adding, |b| default_directory(image, b))
        .build())
}

/// The number of replicas the partition is headed for: its replicas with the adding ones and
/// without the removing ones while a reassignment is in progress, its replicas otherwise.
fn heading_replication_factor(partition: &PartitionImage) -> usize {
    if !in_progress(partition) {
        return partition.replicas.len();
    }
    let mut heading: Vec<i32> = partition.replicas.iter().chain(&partition.adding_replicas).copied().collect();
    heading.sort_unstable();
    heading.dedup();
    heading.retain(|r| !partition.removing_replicas.contains(r));
    heading.len()
}

/// ListPartitionReassignments: the ongoing reassignments of every topic (by name, then partition
/// id) or of the named topics and partitions (unknown ones, and those not reassigning, left out).
pub fn list_partition_reassignments(
    image: &MetadataImage,
    topics: Option<&[ListPartitionReassignmentsTopics]>,
) -> ListPartitionReassignmentsResponse {
    let ongoing = |topic: &TopicImage, ids: &mut dyn Iterator<Item = i32>| {
        let partitions: Vec<OngoingPartitionReassignment> = ids
            .filter_map(|id| topic.partitions.get(&id).filter(|p| in_progress(p)).map(|p| (id, p)))
            .map(|(id, p)| {
                let brokers = |list: &[i32]| list.iter().map(|&b| BrokerId(b)).collect();
                OngoingPartitionReassignment::default()
                    .with_partition_index(id)
                    .with_replicas(brokers(&p.replicas))
                    .with_adding_replicas(brokers(&p.adding_replicas))
                    .with_removing_replicas(brokers(&p.removing_replicas))
            })
            .collect();
        (!partitions.is_empty()).then(|| {
            OngoingTopicReassignment::default()
                .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                .with_partitions(partitions)
        })
    };
    let listed = match topics {
        None => {
            let mut all: Vec<&TopicImage> = image.topics.values().map(|t| t.as_ref()).collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.into_iter().filter_map(|t| ongoing(t, &mut t.partitions.keys().copied())).collect()
        }
        Some(wanted) => wanted
            .iter()
            .filter_map(|w| image.topic(w.name.0.as_str()).map(|t| (t, w)))
            .filter_map(|(t, w)| ongoing(t, &mut w.partition_indexes.iter().copied()))
            .collect(),
    };
    ListPartitionReassignmentsResponse::default().with_error_message(None).with_topics(listed)
}

#[cfg(test)]
#[path = "reassignment_tests.rs"]
mod reassignment_tests;
