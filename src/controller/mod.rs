//! The controller's translation of a change into Kafka's metadata records (Kafka's
//! `ReplicationControlManager` and `ConfigurationControlManager`): given the metadata image and
//! the state a topic should reach, the records that take the image there. Pure functions: the
//! caller appends the records to the metadata log (`raft`) and applies them to the image.
//!
//! Single node today (issue 14, first step): every partition has this node as its only replica,
//! in the ISR and leader, at leader epoch 0; a partition's `directories` names the log directory
//! holding it (`Uuid::nil()`, Kafka's `DirectoryId.UNASSIGNED`, when not known).
//! Invariants: the records apply to the image without error (checked by the tests with
//! `ImageBuilder`); a topic never loses partitions; a topic keeps its id; no record is produced
//! when nothing changes.

pub mod acls;
pub mod alter_partition;
pub mod bootstrap;
pub mod brokers;
pub mod config_changes;
pub mod directories;
pub mod elr;
pub mod feature_changes;
pub mod partition_change;
pub mod placement;
pub mod producer_ids;
pub mod quorum;
pub mod reassignment;
pub mod registration;
pub mod topic_changes;

use uuid::Uuid;

use crate::config::Properties;
use crate::metadata::image::{MetadataImage, NO_LEADER_CHANGE, TOPIC_RESOURCE};
use crate::metadata::records::{
    ConfigRecord, MetadataRecord, PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord,
};

/// The state a topic should be in.
#[derive(Debug, Clone)]
pub struct TopicSpec<'a> {
    pub name: &'a str,
    pub id: Uuid,
    pub partitions: i32,
    /// Per partition, the log directory holding it (shorter when unknown).
    pub directories: &'a [Uuid],
    pub overrides: &'a Properties,
}

/// The controller's settings its decisions depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerConfig {
    /// This controller's `node.id` (its dynamic broker configs count for its decisions).
    pub node_id: i32,
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: i64,
    /// The static `unclean.leader.election.enable`.
    pub unclean_leader_election_enable: bool,
}

/// A change the controller refuses (the image disagrees with the request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The records that create `want` or move the existing topic of that name to it.
pub fn topic_records(image: &MetadataImage, node_id: i32, want: &TopicSpec) -> Result<Vec<MetadataRecord>, Refused> {
    let directory = |p: i32| want.directories.get(p as usize).copied().unwrap_or(Uuid::nil());
    let mut records = Vec::new();
    let existing = image.topic(want.name);
    let have_partitions = match existing {
        None => {
            records.push(MetadataRecord::Topic(TopicRecord {
                name: want.name.to_string(),
                topic_id: want.id,
                ..Default::default()
            }));
            0
        }
        Some(topic) if topic.id != want.id => {
            return Err(Refused(format!("topic {} has id {}, not {}", want.name, topic.id, want.id)));
        }
        Some(topic) => topic.partitions.len() as i32,
    };
    if want.partitions < have_partitions {
        return Err(Refused(format!(
            "topic {} has {have_partitions} partitions: it cannot shrink to {}",
            want.name, want.partitions
        )));
    }
    if let Some(topic) = existing {
        for (&p, partition) in &topic.partitions {
            let dir = directory(p);
            if partition.directories.first() != Some(&dir) {
                records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    topic_id: want.id,
                    partition_id: p,
                    leader: NO_LEADER_CHANGE,
                    directories: Some(vec![dir]),
                    ..Default::default()
                }));
            }
        }
    }
    for p in have_partitions..want.partitions {
        records.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: p,
            topic_id: want.id,
            replicas: vec![node_id],
            isr: vec![node_id],
            leader: node_id,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![directory(p)],
            ..Default::default()
        }));
    }
    let have_configs = image.configs.get(&(TOPIC_RESOURCE, want.name.to_string()));
    let config = |name: &str, value: Option<&String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: TOPIC_RESOURCE,
            resource_name: want.name.to_string(),
            name: name.to_string(),
            value: value.cloned(),
            ..Default::default()
        })
    };
    for (name, value) in want.overrides {
        if have_configs.and_then(|c| c.get(name)) != Some(value) {
            records.push(config(name, Some(value)));
        }
    }
    for name in have_configs.into_iter().flat_map(|c| c.keys()) {
        if !want.overrides.contains_key(name) {
            records.push(config(name, None));
        }
    }
    Ok(records)
}

/// The records that delete the topic `name` (none when it does not exist).
pub fn remove_topic_records(image: &MetadataImage, name: &str) -> Vec<MetadataRecord> {
    image
        .topic(name)
        .map(|t| vec![MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: t.id, ..Default::default() })])
        .unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod test_cluster;
#[cfg(test)]
mod tests;
