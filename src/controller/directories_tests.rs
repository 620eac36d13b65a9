//! AssignReplicasToDirs decisions against a driven image: directories set per replica, Kafka's
//! per-partition errors, and an assignment to an offline directory taking the broker out of the
//! partition's ISR and leadership.

use kafka_protocol::messages::assign_replicas_to_dirs_request::{
    DirectoryData as ReqDir, PartitionData as ReqPartition, TopicData as ReqTopic,
};
use kafka_protocol::messages::BrokerId;
use uuid::Uuid;

use super::*;
use crate::controller::partition_change::directory_of;
use crate::controller::test_cluster::{config, Cluster};
use crate::metadata::records::BrokerRegistrationChangeRecord;

/// (directory, [(topic, [partition])]).
type Assignments<'a> = [(Uuid, &'a [(Uuid, &'a [i32])])];

fn request(broker: i32, epoch: i64, dirs: &Assignments) -> AssignReplicasToDirsRequest {
    AssignReplicasToDirsRequest::default().with_broker_id(BrokerId(broker)).with_broker_epoch(epoch).with_directories(
        dirs.iter()
            .map(|(dir, topics)| {
                ReqDir::default().with_id(*dir).with_topics(
                    topics
                        .iter()
                        .map(|(t, ps)| {
                            ReqTopic::default().with_topic_id(*t).with_partitions(
                                ps.iter().map(|&p| ReqPartition::default().with_partition_index(p)).collect(),
                            )
                        })
                        .collect(),
                )
            })
            .collect(),
    )
}

fn errors(response: &AssignReplicasToDirsResponse) -> Vec<(i32, i16)> {
    response
        .directories
        .iter()
        .flat_map(|d| d.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.error_code))))
        .collect()
}

/// Brokers 1 and 2 (broker 2 with a second directory), topic `t`: p0 on [1, 2], p1 on [2, 1],
/// p2 on [1].
fn cluster() -> (Cluster, Uuid, i64, Uuid, Uuid) {
    let mut c = Cluster::new();
    c.add_broker(1, None, false);
    let epoch = c.add_broker(2, None, false);
    let (first, second) = (c.image.brokers[&2].log_dirs[0], Uuid::from_u128(7002));
    c.apply(&[MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id: 2,
        broker_epoch: epoch,
        log_dirs: vec![first, second],
        ..Default::default()
    })]);
    let t = c.add_topic("t", 77, &[&[1, 2], &[2, 1], &[1]]);
    (c, t, epoch, first, second)
}

#[test]
fn replicas_move_to_the_named_directory_with_kafkas_per_partition_errors() {
    let (mut c, t, epoch, first, second) = cluster();
    let unknown = Uuid::from_u128(999);
    let req = request(2, epoch, &[(second, &[(t, &[0, 1, 2, 9]), (unknown, &[0])])]);
    let (records, response) = assign_replicas_to_dirs(&c.image, &config(), &req).unwrap();
    assert_eq!(
        errors(&response),
        vec![
            (0, 0),
            (1, 0),
            (2, ResponseError::NotLeaderOrFollower.code()),
            (9, ResponseError::UnknownTopicOrPartition.code()),
            (0, ResponseError::UnknownTopicId.code()),
        ]
    );
    assert_eq!(records.len(), 2, "{records:?}");
    let before = c.partition(t, 0);
    c.apply(&records);
    for p in [0, 1] {
        let partition = c.partition(t, p);
        assert_eq!(directory_of(&partition, 2), Some(second));
        assert_eq!(partition.leader, [1, 2][p as usize], "leadership stays");
        assert_eq!(partition.isr.len(), 2, "the ISR stays");
    }
    assert_eq!(c.partition(t, 0).leader_epoch, before.leader_epoch);
    assert_eq!(directory_of(&c.partition(t, 0), 1), before.directories.first().copied(), "broker 1's stays");

    // Already there: nothing to write; back to the first directory: one record.
    let (records, _) =
        assign_replicas_to_dirs(&c.image, &config(), &request(2, epoch, &[(second, &[(t, &[0])])])).unwrap();
    assert!(records.is_empty(), "{records:?}");
    let (records, _) =
        assign_replicas_to_dirs(&c.image, &config(), &request(2, epoch, &[(first, &[(t, &[0])])])).unwrap();
    assert_eq!(records.len(), 1);
}

#[test]
fn a_stale_epoch_or_an_old_metadata_version_is_refused_whole() {
    let (c, t, epoch, _, second) = cluster();
    let req = request(2, epoch + 1, &[(second, &[(t, &[0])])]);
    assert_eq!(assign_replicas_to_dirs(&c.image, &config(), &req).unwrap_err(), ResponseError::StaleBrokerEpoch);
    let req = request(5, epoch, &[(second, &[(t, &[0])])]);
    assert_eq!(assign_replicas_to_dirs(&c.image, &config(), &req).unwrap_err(), ResponseError::StaleBrokerEpoch);
    let mut old = Cluster::new();
    old.apply(&[MetadataRecord::FeatureLevel(crate::metadata::records::FeatureLevelRecord {
        name: "metadata.version".into(),
        feature_level: 16,
        ..Default::default()
    })]);
    let req = request(2, epoch, &[(second, &[(t, &[0])])]);
    assert_eq!(assign_replicas_to_dirs(&old.image, &config(), &req).unwrap_err(), ResponseError::UnsupportedVersion);
}

#[test]
fn a_replica_assigned_to_an_offline_directory_leaves_the_isr_and_leadership() {
    let (mut c, t, epoch, _, _) = cluster();
    let gone = Uuid::from_u128(8002);
    let req = request(2, epoch, &[(gone, &[(t, &[0, 1])])]);
    let (records, response) = assign_replicas_to_dirs(&c.image, &config(), &req).unwrap();
    assert_eq!(errors(&response), vec![(0, 0), (1, 0)]);
    c.apply(&records);
    let p1 = c.partition(t, 1);
    assert_eq!((p1.leader, p1.isr.clone()), (1, vec![1]), "broker 1 takes over p1");
    assert_eq!(directory_of(&p1, 2), Some(gone));
    let p0 = c.partition(t, 0);
    assert_eq!((p0.leader, p0.isr.clone()), (1, vec![1]));
}
