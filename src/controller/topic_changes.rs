//! Replicated topics: creating a topic and adding partitions, with placed replicas or manual
//! assignments (Kafka's `ReplicationControlManager.createTopic` / `createPartitions`), and
//! ElectLeaders (`electLeaders`, preferred and unclean) and the controller's periodic preferred
//! and unclean elections.
//!
//! A new partition's ISR is its active replicas (unfenced, not in controlled shutdown), led by the
//! first of them, at leader and partition epoch 0; each replica's directory is its broker's only
//! log directory, Kafka's UNASSIGNED when it has several (the broker picks one) and MIGRATING
//! (nil) when it registered none, as Kafka's `defaultDir`.
//!
//! Invariants: the records apply to the image; a refused request writes nothing; an election
//! writes one record per partition whose leader changed, none otherwise.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::partition_change::{is_active, leader_acceptor, unclean_enabled, Election, PartitionChange, NO_LEADER};
use super::placement::{place, placement_brokers};
use super::ControllerConfig;
use crate::config::Properties;
use crate::metadata::image::{MetadataImage, PartitionImage, TopicImage, TOPIC_RESOURCE};
use crate::metadata::records::{ConfigRecord, MetadataRecord, PartitionRecord, TopicRecord};

/// Kafka's `DirectoryId.UNASSIGNED`.
pub const UNASSIGNED_DIRECTORY: Uuid = Uuid::from_u128(1);

pub(super) type Refusal = (ResponseError, String);

/// A topic to create (`partitions` and `replication_factor` resolved: no -1 defaults).
#[derive(Debug, Clone)]
pub struct NewTopic<'a> {
    pub name: &'a str,
    pub id: Uuid,
    pub partitions: i32,
    pub replication_factor: i16,
    pub overrides: &'a Properties,
}

/// The records creating `topic` with replicas placed over the usable brokers (`seed` for the
/// placement; `create_topic_assigned_records` for a manual assignment).
pub fn create_topic_records(
    image: &MetadataImage,
    topic: &NewTopic,
    seed: u64,
) -> Result<Vec<MetadataRecord>, Refusal> {
    if image.topic(topic.name).is_some() || image.topics.contains_key(&topic.id) {
        return Err((ResponseError::TopicAlreadyExists, format!("Topic '{}' already exists.", topic.name)));
    }
    if topic.replication_factor <= 0 {
        return Err((
            ResponseError::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.".to_string(),
        ));
    }
    if topic.partitions <= 0 {
        return Err((
            ResponseError::InvalidPartitions,
            "Number of partitions was set to an invalid non-positive value.".to_string(),
        ));
    }
    let assignments = place(&placement_brokers(image), topic.partitions, topic.replication_factor, seed)
        .map_err(|refused| (ResponseError::InvalidReplicationFactor, refused.0))?;
    let mut records = vec![MetadataRecord::Topic(TopicRecord {
        name: topic.name.to_string(),
        topic_id: topic.id,
        ..Default::default()
    })];
    records.extend(partition_records(image, topic.id, 0, assignments, topic.replication_factor)?);
    records.extend(config_records(topic.name, topic.overrides));
    Ok(records)
}

/// CreatePartitions: the records growing topic `name` to `count` partitions, with the
/// replication factor of its partition 0.
pub fn create_partitions_records(
    image: &MetadataImage,
    name: &str,
    count: i32,
    seed: u64,
) -> Result<Vec<MetadataRecord>, (ResponseError, Option<String>)> {
    let (topic, have, replication_factor) = growth(image, name, count)?;
    let assignments = place(&placement_brokers(image), count - have, replication_factor, seed).map_err(|refused| {
        // Kafka answers the placer's reason alone here.
        let prefix = format!("Unable to replicate the partition {replication_factor} time(s): ");
        (ResponseError::InvalidReplicationFactor, refused.0.trim_start_matches(&prefix).to_string())
    });
    let assignments = assignments.map_err(|(code, message)| (code, Some(message)))?;
    partition_records(image, topic.id, have, assignments, replication_factor).map_err(|(code, m)| (code, Some(m)))
}

/// CreatePartitions with manual assignments: one replica list per new partition, each with the
/// topic's replication factor, of registered brokers, some of them active.
pub fn create_partitions_assigned_records(
    image: &MetadataImage,
    name: &str,
    count: i32,
    assignments: &[Vec<i32>],
) -> Result<Vec<MetadataRecord>, (ResponseError, Option<String>)> {
    let (topic, have, replication_factor) = growth(image, name, count)?;
    let additional = (count - have) as usize;
    let invalid = |message: String| (ResponseError::InvalidReplicaAssignment, Some(message));
    if assignments.len() != additional {
        return Err(invalid(format!(
            "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        )));
    }
    for (i, replicas) in assignments.iter().enumerate() {
        check_assignment(image, replicas, Some(replication_factor as usize)).map_err(|(c, m)| (c, Some(m)))?;
        if !replicas.iter().any(|&r| is_active(image, r)) {
            return Err(invalid(all_inactive(have + i as i32)));
        }
    }
    partition_records(image, topic.id, have, assignments.to_vec(), replication_factor).map_err(|(c, m)| (c, Some(m)))
}

/// CreateTopics with manual assignments (`num_partitions` and `replication_factor` -1, checked
/// by the caller): (partition index, replicas) for partitions 0, 1, ... in any order.
pub fn create_topic_assigned_records(
    image: &MetadataImage,
    name: &str,
    id: Uuid,
    assignments: &[(i32, Vec<i32>)],
    overrides: &Properties,
) -> Result<Vec<MetadataRecord>, Refusal> {
    if image.topic(name).is_some() || image.topics.contains_key(&id) {
        return Err((ResponseError::TopicAlreadyExists, format!("Topic '{name}' already exists.")));
    }
    let invalid = |message: String| (ResponseError::InvalidReplicaAssignment, message);
    let mut by_partition: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let mut replication_factor = None;
    for (index, replicas) in assignments {
        if by_partition.contains_key(index) {
            return Err(invalid(format!("Found multiple manual partition assignments for partition {index}")));
        }
        check_assignment(image, replicas, replication_factor)?;
        replication_factor = Some(replicas.len());
        if !replicas.iter().any(|&r| is_active(image, r)) {
            return Err(invalid(all_inactive(*index)));
        }
        by_partition.insert(*index, replicas.clone());
    }
    if by_partition.keys().copied().ne(0..by_partition.len() as i32) {
        return Err(invalid("partitions should be a consecutive 0-based integer sequence".to_string()));
    }
    let replication_factor = replication_factor.unwrap_or(0) as i16;
    let mut records =
        vec![MetadataRecord::Topic(TopicRecord { name: name.to_string(), topic_id: id, ..Default::default() })];
    records.extend(partition_records(image, id, 0, by_partition.into_values().collect(), replication_factor)?);
    records.extend(config_records(name, overrides));
    Ok(records)
}

fn all_inactive(partition: i32) -> String {
    format!(
        "All brokers specified in the manual partition assignment for partition {partition} are fenced or in \
         controlled shutdown."
    )
}

/// Kafka's `validateManualPartitionAssignment`.
pub(super) fn check_assignment(
    image: &MetadataImage,
    replicas: &[i32],
    replication_factor: Option<usize>,
) -> Result<(), Refusal> {
    let invalid = |message: String| Err((ResponseError::InvalidReplicaAssignment, message));
    if replicas.is_empty() {
        return invalid("The manual partition assignment includes an empty replica list.".to_string());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (i, &broker) in sorted.iter().enumerate() {
        if !image.brokers.contains_key(&broker) {
            return invalid(format!(
                "The manual partition assignment includes broker {broker}, but no such broker is registered."
            ));
        }
        if i > 0 && sorted[i - 1] == broker {
            return invalid(format!("The manual partition assignment includes the broker {broker} more than once."));
        }
    }
    match replication_factor {
        Some(rf) if rf != replicas.len() => invalid(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent \
             with previous partitions, which have {rf} replica(s).",
            replicas.len()
        )),
        _ => Ok(()),
    }
}

/// CreatePartitions' checks of the wanted count: the topic, its partition count and its
/// replication factor.
fn growth<'a>(
    image: &'a MetadataImage,
    name: &str,
    count: i32,
) -> Result<(&'a TopicImage, i32, i16), (ResponseError, Option<String>)> {
    let Some(topic) = image.topic(name) else {
        // Kafka's UnknownTopicOrPartitionException carries no message: null in the answer.
        return Err((ResponseError::UnknownTopicOrPartition, None));
    };
    let have = topic.partitions.len() as i32;
    if count == have {
        return Err((ResponseError::InvalidPartitions, Some(format!("Topic already has {have} partition(s)."))));
    }
    if count < have {
        return Err((
            ResponseError::InvalidPartitions,
            Some(format!("The topic {name} currently has {have} partition(s); {count} would not be an increase.")),
        ));
    }
    let Some(first) = topic.partitions.values().next() else {
        // Kafka never sends the text of an UNKNOWN_SERVER_ERROR.
        return Err((ResponseError::UnknownServerError, None));
    };
    Ok((topic, have, first.replicas.len() as i16))
}

fn config_records<'a>(name: &'a str, overrides: &'a Properties) -> impl Iterator<Item = MetadataRecord> + 'a {
    overrides.iter().map(move |(key, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: TOPIC_RESOURCE,
            resource_name: name.to_string(),
            name: key.clone(),
            value: Some(value.clone()),
            ..Default::default()
        })
    })
}

fn partition_records(
    image: &MetadataImage,
    topic_id: Uuid,
    first_partition: i32,
    assignments: Vec<Vec<i32>>,
    replication_factor: i16,
) -> Result<Vec<MetadataRecord>, Refusal> {
    let mut records = Vec::with_capacity(assignments.len());
    for (i, replicas) in assignments.into_iter().enumerate() {
        let isr: Vec<i32> = replicas.iter().copied().filter(|&r| is_active(image, r)).collect();
        let Some(&leader) = isr.first() else {
            return Err((
                ResponseError::InvalidReplicationFactor,
                format!(
                    "Unable to replicate the partition {replication_factor} time(s): All brokers are currently \
                     fenced or in controlled shutdown."
                ),
            ));
        };
        let directories = replicas.iter().map(|&r| default_directory(image, r)).collect();
        records.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: first_partition + i as i32,
            topic_id,
            replicas,
            isr,
            leader,
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories,
            ..Default::default()
        }));
    }
    Ok(records)
}

/// Kafka's `ClusterControlManager.defaultDir`.
pub(super) fn default_directory(image: &MetadataImage, broker: i32) -> Uuid {
    match image.brokers.get(&broker).map(|b| b.log_dirs.as_slice()) {
        None => UNASSIGNED_DIRECTORY,
        Some([]) => Uuid::nil(),
        Some([only]) => *only,
        Some(_) => UNASSIGNED_DIRECTORY,
    }
}

/// ElectLeaders' `election_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    Preferred,
    Unclean,
}

impl ElectionType {
    /// From the request's byte (INVALID_REQUEST otherwise, as Kafka).
    pub fn from_code(code: i8) -> Result<ElectionType, Refusal> {
        match code {
            0 => Ok(ElectionType::Preferred),
            1 => Ok(ElectionType::Unclean),
            other => Err((ResponseError::InvalidRequest, format!("Unknown election type {other}"))),
        }
    }
}

/// One partition's answer to ElectLeaders: `None` when a leader was elected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionResult {
    pub topic: String,
    pub partition: i32,
    pub error: Option<(ResponseError, String)>,
}

/// ElectLeaders: the records and each partition's result. `partitions` none: every partition
/// of every topic, leaving out those needing no election (as Kafka).
pub fn elect_leaders(
    image: &MetadataImage,
    election: ElectionType,
    partitions: Option<&[(String, i32)]>,
) -> (Vec<MetadataRecord>, Vec<ElectionResult>) {
    let mut records = Vec::new();
    let mut results = Vec::new();
    let everything;
    let wanted = match partitions {
        Some(wanted) => wanted,
        None => {
            everything = sorted_topics(image)
                .iter()
                .flat_map(|t| t.partitions.keys().map(|&p| (t.name.clone(), p)))
                .collect::<Vec<_>>();
            &everything
        }
    };
    for (topic, partition) in wanted {
        let error = match elect_one(image, election, topic, *partition) {
            Ok(record) => {
                records.push(record);
                None
            }
            Err((ResponseError::ElectionNotNeeded, _)) if partitions.is_none() => continue,
            Err(e) => Some(e),
        };
        results.push(ElectionResult { topic: topic.clone(), partition: *partition, error });
    }
    (records, results)
}

fn elect_one(
    image: &MetadataImage,
    election: ElectionType,
    topic_name: &str,
    partition_id: i32,
) -> Result<MetadataRecord, Refusal> {
    let unknown = |message: String| (ResponseError::UnknownTopicOrPartition, message);
    let topic = image.topic(topic_name).ok_or_else(|| unknown(format!("No such topic as {topic_name}")))?;
    let partition: &PartitionImage = topic
        .partitions
        .get(&partition_id)
        .ok_or_else(|| unknown(format!("No such partition as {topic_name}-{partition_id}")))?;
    let not_needed = match election {
        ElectionType::Preferred => partition.replicas.first() == Some(&partition.leader),
        ElectionType::Unclean => partition.leader != NO_LEADER,
    };
    if not_needed {
        return Err(error(ResponseError::ElectionNotNeeded));
    }
    let kind = match election {
        ElectionType::Preferred => Election::Preferred,
        ElectionType::Unclean => Election::Unclean,
    };
    let change = PartitionChange::new(topic.id, partition_id, partition, leader_acceptor(image, partition))
        .with_elr(image, &topic.name)
        .election(kind)
        .build();
    match (change, election) {
        (Some(record), _) => Ok(MetadataRecord::PartitionChange(record)),
        (None, ElectionType::Preferred) => Err(error(ResponseError::PreferredLeaderNotAvailable)),
        (None, ElectionType::Unclean) => Err(error(ResponseError::EligibleLeadersNotAvailable)),
    }
}

/// Kafka's periodic `maybeBalancePartitionLeaders` (`auto.leader.rebalance.enable`): a preferred
/// election for each partition not led by its first replica, at most `max_elections` records
/// (Kafka's `maxElectionsPerImbalance`); `true` when more may remain (run again at once).
pub fn balance_leaders(image: &MetadataImage, max_elections: usize) -> (Vec<MetadataRecord>, bool) {
    let mut records = Vec::new();
    for topic in sorted_topics(image) {
        for (&partition_id, partition) in &topic.partitions {
            if records.len() >= max_elections {
                return (records, true);
            }
            if partition.replicas.first() == Some(&partition.leader) {
                continue;
            }
            let change = PartitionChange::new(topic.id, partition_id, partition, leader_acceptor(image, partition))
                .with_elr(image, &topic.name)
                .election(Election::Preferred)
                .build();
            records.extend(change.map(MetadataRecord::PartitionChange));
        }
    }
    let more = records.len() >= max_elections;
    (records, more)
}

/// Kafka's periodic `maybeElectUncleanLeaders`: an unclean election for each leaderless
/// partition of a topic with `unclean.leader.election.enable`, at most `max_elections` records;
/// `true` when more may remain.
pub fn elect_unclean_leaders(
    image: &MetadataImage,
    config: &ControllerConfig,
    max_elections: usize,
) -> (Vec<MetadataRecord>, bool) {
    let mut records = Vec::new();
    for topic in sorted_topics(image) {
        if !unclean_enabled(image, config, &topic.name) {
            continue;
        }
        for (&partition_id, partition) in &topic.partitions {
            if records.len() >= max_elections {
                return (records, true);
            }
            if partition.leader == NO_LEADER {
                if let Ok(record) = elect_one(image, ElectionType::Unclean, &topic.name, partition_id) {
                    records.push(record);
                }
            }
        }
    }
    let more = records.len() >= max_elections;
    (records, more)
}

fn sorted_topics(image: &MetadataImage) -> Vec<&TopicImage> {
    let mut topics: Vec<&TopicImage> = image.topics.values().map(|t| t.as_ref()).collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    topics
}

/// An error with Kafka's default message for it.
fn error(code: ResponseError) -> Refusal {
    let message = match code {
        ResponseError::ElectionNotNeeded => "Leader election not needed for topic partition.",
        ResponseError::PreferredLeaderNotAvailable => "The preferred leader was not available.",
        ResponseError::EligibleLeadersNotAvailable => "Eligible topic partition leaders are not available.",
        _ => unreachable!("no default message kept for {code:?}"),
    };
    (code, message.to_string())
}

#[cfg(test)]
#[path = "topic_changes_tests.rs"]
mod topic_changes_tests;
