//! AssignReplicasToDirs (API 73): a broker with several log directories tells the controller
//! which directory holds each of its replicas (Kafka's `ReplicationControlManager.
//! handleAssignReplicasToDirs`). The assignment is what lets the controller move leadership
//! and ISR membership off exactly the partitions of a directory that fails
//! (`brokers::directories_offline`); a replica left UNASSIGNED stays led from a dead disk.
//!
//! Rules, as Kafka's: refused whole with UNSUPPORTED_VERSION below `metadata.version` 3.7-IV2,
//! STALE_BROKER_EPOCH for an unregistered broker or another epoch; per partition
//! UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (the broker holds no
//! replica of it); else a PartitionChangeRecord setting that replica's directory (none when it is
//! already there). A replica assigned to a directory the broker does not have online also
//! leaves the partition's ISR and leadership, in a second record (Kafka's
//! "offline-dir-assignment").
//! Invariants: records only for partitions the broker is a replica of; every partition named in
//! the request is answered, in the request's order.

use kafka_protocol::messages::assign_replicas_to_dirs_response::{DirectoryData, PartitionData, TopicData};
use kafka_protocol::messages::{AssignReplicasToDirsRequest, AssignReplicasToDirsResponse};

use super::brokers::directory_assignment_supported;
use super::partition_change::{leader_acceptor, partition_update, BrokerEvent, PartitionChange};
use super::ControllerConfig;
use crate::metadata::image::MetadataImage;
use crate::metadata::records::MetadataRecord;
use kafka_protocol::error::ResponseError;

/// The records and the answer of one AssignReplicasToDirs, or the error refusing it whole.
pub fn assign_replicas_to_dirs(
    image: &MetadataImage,
    config: &ControllerConfig,
    request: &AssignReplicasToDirsRequest,
) -> Result<(Vec<MetadataRecord>, AssignReplicasToDirsResponse), ResponseError> {
    if !directory_assignment_supported(image) {
        return Err(ResponseError::UnsupportedVersion);
    }
    let broker_id = request.broker_id.0;
    let Some(broker) = image.brokers.get(&broker_id).filter(|b| b.epoch == request.broker_epoch) else {
        return Err(ResponseError::StaleBrokerEpoch);
    };
    let mut records = Vec::new();
    let mut leaves = Vec::new();
    let mut response = AssignReplicasToDirsResponse::default();
    for dir in &request.directories {
        let offline = !broker.log_dirs.contains(&dir.id);
        let mut answered = DirectoryData::default().with_id(dir.id);
        for named in &dir.topics {
            let topic = image.topics.get(&named.topic_id);
            let mut topic_answer = TopicData::default().with_topic_id(named.topic_id);
            for p in &named.partitions {
                let index = p.partition_index;
                let error = match topic.map(|t| (t, t.partitions.get(&index))) {
                    None => ResponseError::UnknownTopicId.code(),
                    Some((_, None)) => ResponseError::UnknownTopicOrPartition.code(),
                    Some((_, Some(partition))) if !partition.replicas.contains(&broker_id) => {
                        ResponseError::NotLeaderOrFollower.code()
                    }
                    Some((topic, Some(partition))) => {
                        let change =
                            PartitionChange::new(topic.id, index, partition, leader_acceptor(image, partition))
                                .with_elr(image, &topic.name)
                                .directory(broker_id, dir.id)
                                .build();
                        records.extend(change.map(MetadataRecord::PartitionChange));
                        if offline && !leaves.contains(&(topic.id, index)) {
                            leaves.push((topic.id, index));
                        }
                        0
                    }
                };
                topic_answer
                    .partitions
                    .push(PartitionData::default().with_partition_index(index).with_error_code(error));
            }
            answered.topics.push(topic_answer);
        }
        response.directories.push(answered);
    }
    for (topic_id, index) in leaves {
        let topic = &image.topics[&topic_id];
        records.extend(partition_update(image, config, topic, index, BrokerEvent::Leaves(broker_id)));
    }
    Ok((records, response))
}

#[cfg(test)]
#[path = "directories_tests.rs"]
mod tests;
