//! Replicated topic creation, partition growth and leader elections, applied to an image.

use std::collections::BTreeMap;

use super::*;
use crate::controller::test_cluster::Cluster;
use crate::metadata::records::{PartitionChangeRecord, RegisterBrokerRecord};

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn three_racks() -> Cluster {
    let mut c = Cluster::new();
    for b in 1..=3 {
        c.add_broker(b, Some(["ra", "rb", "rc"][b as usize - 1]), false);
    }
    c
}

fn new_topic<'a>(name: &'a str, partitions: i32, replication_factor: i16, overrides: &'a Properties) -> NewTopic<'a> {
    NewTopic { name, id: topic_id(name), partitions, replication_factor, overrides }
}

fn topic_id(name: &str) -> Uuid {
    Uuid::from_u128(name.bytes().fold(100, |id, b| id * 31 + b as u128))
}

#[test]
fn a_replicated_topic_is_placed_over_the_active_brokers() {
    let mut c = three_racks();
    let overrides = props(&[("min.insync.replicas", "2")]);
    let records = create_topic_records(&c.image, &new_topic("t", 6, 3, &overrides), 11).unwrap();
    assert_eq!(records.len(), 1 + 6 + 1);
    c.apply(&records);
    let topic = c.image.topic("t").unwrap().clone();
    let mut leaders = BTreeMap::new();
    for (p, partition) in &topic.partitions {
        assert_eq!(partition.replicas.len(), 3, "partition {p}");
        assert_eq!(partition.isr, partition.replicas, "every replica active: all in the ISR");
        assert_eq!(partition.leader, partition.replicas[0]);
        assert_eq!((partition.leader_epoch, partition.partition_epoch), (0, 0));
        let dirs: Vec<Uuid> = partition.replicas.iter().map(|b| c.image.brokers[b].log_dirs[0]).collect();
        assert_eq!(partition.directories, dirs, "each broker's only directory");
        *leaders.entry(partition.leader).or_insert(0) += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2], "leaders spread: {leaders:?}");
    assert_eq!(c.image.configs[&(TOPIC_RESOURCE, "t".to_string())]["min.insync.replicas"], "2");

    let again = create_topic_records(&c.image, &new_topic("t", 1, 1, &overrides), 0).unwrap_err();
    assert_eq!(again, (ResponseError::TopicAlreadyExists, "Topic 't' already exists.".to_string()));
}

#[test]
fn fenced_replicas_are_placed_but_not_in_the_isr() {
    let mut c = three_racks();
    c.set_broker(3, 1, 0);
    let none = Properties::new();
    let records = create_topic_records(&c.image, &new_topic("t", 4, 3, &none), 5).unwrap();
    c.apply(&records);
    for partition in c.image.topic("t").unwrap().partitions.values() {
        assert!(partition.replicas.contains(&3));
        assert!(!partition.isr.contains(&3) && partition.isr.len() == 2, "{partition:?}");
        assert!(partition.leader != 3);
    }
    // Broker 3 in controlled shutdown is not even placed.
    c.set_broker(3, -1, 1);
    let error = create_topic_records(&c.image, &new_topic("u", 1, 3, &none), 5).unwrap_err();
    assert_eq!(
        error,
        (
            ResponseError::InvalidReplicationFactor,
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached \
             because only 2 broker(s) are registered."
                .to_string()
        )
    );
}

#[test]
fn creation_refusals_carry_kafkas_texts() {
    let c = three_racks();
    let none = Properties::new();
    let refuse = |t: NewTopic| create_topic_records(&c.image, &t, 0).unwrap_err();
    assert_eq!(
        refuse(new_topic("t", 1, 0, &none)),
        (
            ResponseError::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.".to_string()
        )
    );
    assert_eq!(
        refuse(new_topic("t", 0, 1, &none)),
        (
            ResponseError::InvalidPartitions,
            "Number of partitions was set to an invalid non-positive value.".to_string()
        )
    );
    assert_eq!(refuse(new_topic("t", 1, 4, &none)).0, ResponseError::InvalidReplicationFactor);
    let mut all_fenced = Cluster::new();
    all_fenced.add_broker(1, None, true);
    let error = create_topic_records(&all_fenced.image, &new_topic("t", 1, 1, &none), 0).unwrap_err();
    assert_eq!(error.1, "Unable to replicate the partition 1 time(s): All brokers are currently fenced.");
}

#[test]
fn directories_follow_kafkas_default_dir() {
    let mut c = Cluster::new();
    let two_dirs = RegisterBrokerRecord {
        broker_id: 1,
        broker_epoch: 1,
        fenced: false,
        log_dirs: vec![Uuid::from_u128(501), Uuid::from_u128(502)],
        ..Default::default()
    };
    let no_dirs = RegisterBrokerRecord { broker_id: 2, broker_epoch: 2, fenced: false, ..Default::default() };
    c.apply(&[MetadataRecord::RegisterBroker(two_dirs), MetadataRecord::RegisterBroker(no_dirs)]);
    let none = Properties::new();
    c.apply(&create_topic_records(&c.image, &new_topic("t", 1, 2, &none), 0).unwrap());
    let p = c.partition(topic_id("t"), 0);
    let expect: Vec<Uuid> =
        p.replicas.iter().map(|&b| if b == 1 { UNASSIGNED_DIRECTORY } else { Uuid::nil() }).collect();
    assert_eq!(p.directories, expect);
}

#[test]
fn partitions_are_added_with_the_topics_replication_factor() {
    let mut c = three_racks();
    let none = Properties::new();
    c.apply(&create_topic_records(&c.image, &new_topic("t", 2, 2, &none), 1).unwrap());
    let records = create_partitions_records(&c.image, "t", 5, 2).unwrap();
    assert_eq!(records.len(), 3);
    c.apply(&records);
    let topic = c.image.topic("t").unwrap();
    assert_eq!(topic.partitions.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    assert!(topic.partitions.values().all(|p| p.replicas.len() == 2 && p.isr == p.replicas));

    let refuse = |count| create_partitions_records(&c.image, "t", count, 0).unwrap_err();
    assert_eq!(refuse(5), (ResponseError::InvalidPartitions, Some("Topic already has 5 partition(s).".to_string())));
    assert_eq!(
        refuse(3),
        (
            ResponseError::InvalidPartitions,
            Some("The topic t currently has 5 partition(s); 3 would not be an increase.".to_string())
        )
    );
    assert_eq!(
        create_partitions_records(&c.image, "nope", 3, 0).unwrap_err(),
        (ResponseError::UnknownTopicOrPartition, None)
    );
    c.apply(&create_topic_records(&c.image, &new_topic("wide", 1, 3, &none), 1).unwrap());
    c.set_broker(3, -1, 1);
    assert_eq!(
        create_partitions_records(&c.image, "wide", 2, 0).unwrap_err(),
        (
            ResponseError::InvalidReplicationFactor,
            Some(
                "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."
                    .to_string()
            )
        ),
        "the placer's reason alone, as Kafka"
    );
}

/// Brokers 1..=3; topic `t`: partition 0 on [1, 2, 3] led by 2, partition 1 on [1, 2] led by 1,
/// partition 2 on [3, 2] leaderless with ISR [3].
fn elections() -> (Cluster, Uuid) {
    let mut c = three_racks();
    let t = c.add_topic("t", 9, &[&[1, 2, 3], &[1, 2], &[3, 2]]);
    let moved = PartitionChangeRecord { topic_id: t, partition_id: 0, leader: 2, ..Default::default() };
    let leaderless = PartitionChangeRecord {
        topic_id: t,
        partition_id: 2,
        leader: NO_LEADER,
        isr: Some(vec![3]),
        ..Default::default()
    };
    c.apply(&[MetadataRecord::PartitionChange(moved), MetadataRecord::PartitionChange(leaderless)]);
    (c, t)
}

fn pairs(list: &[(&str, i32)]) -> Vec<(String, i32)> {
    list.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

#[test]
fn preferred_elections_bring_leadership_back() {
    let (mut c, t) = elections();
    let wanted = pairs(&[("t", 0), ("t", 1), ("t", 7), ("u", 0)]);
    let (records, results) = elect_leaders(&c.image, ElectionType::Preferred, Some(&wanted));
    assert_eq!(records.len(), 1);
    c.apply(&records);
    assert_eq!(c.partition(t, 0).leader, 1);
    let errors: Vec<_> = results.iter().map(|r| r.error.clone()).collect();
    assert_eq!(
        errors,
        vec![
            None,
            Some((ResponseError::ElectionNotNeeded, "Leader election not needed for topic partition.".to_string())),
            Some((ResponseError::UnknownTopicOrPartition, "No such partition as t-7".to_string())),
            Some((ResponseError::UnknownTopicOrPartition, "No such topic as u".to_string())),
        ]
    );

    // The preferred replica cannot lead: not available.
    let moved = PartitionChangeRecord { topic_id: t, partition_id: 0, leader: 2, ..Default::default() };
    c.apply(&[MetadataRecord::PartitionChange(moved)]);
    c.set_broker(1, 1, 0);
    let (records, results) = elect_leaders(&c.image, ElectionType::Preferred, Some(&pairs(&[("t", 0)])));
    assert!(records.is_empty());
    assert_eq!(results[0].error.as_ref().unwrap().0, ResponseError::PreferredLeaderNotAvailable);
}

#[test]
fn elections_over_every_partition_leave_out_those_not_needed() {
    let (c, _) = elections();
    let (records, results) = elect_leaders(&c.image, ElectionType::Preferred, None);
    // Partition 0 is elected; 1 needs nothing; 2 (leaderless, preferred 3 in the ISR) too.
    assert_eq!(records.len(), 2);
    let listed: Vec<_> = results.iter().map(|r| (r.partition, r.error.is_none())).collect();
    assert_eq!(listed, vec![(0, true), (2, true)]);
}

#[test]
fn unclean_elections_pick_any_live_replica() {
    let (mut c, t) = elections();
    c.set_broker(3, 1, 0);
    let wanted = pairs(&[("t", 2), ("t", 1)]);
    let (records, results) = elect_leaders(&c.image, ElectionType::Unclean, Some(&wanted));
    assert_eq!(records.len(), 1);
    c.apply(&records);
    let p2 = c.partition(t, 2);
    assert_eq!((p2.leader, p2.isr, p2.leader_recovery_state), (2, vec![2], 1));
    assert_eq!(results[1].error.as_ref().unwrap().0, ResponseError::ElectionNotNeeded);

    // Nobody acceptable: not available.
    let leaderless = PartitionChangeRecord { topic_id: t, partition_id: 2, leader: NO_LEADER, ..Default::default() };
    c.apply(&[MetadataRecord::PartitionChange(leaderless)]);
    c.set_broker(2, 1, 0);
    let (records, results) = elect_leaders(&c.image, ElectionType::Unclean, Some(&pairs(&[("t", 2)])));
    assert!(records.is_empty());
    assert_eq!(results[0].error.as_ref().unwrap().0, ResponseError::EligibleLeadersNotAvailable);
    assert!(ElectionType::from_code(2).is_err());
    assert_eq!(ElectionType::from_code(1).unwrap(), ElectionType::Unclean);
}

#[test]
fn periodic_balancing_moves_leaders_back_to_preferred_replicas() {
    let (mut c, t) = elections();
    let (records, more) = balance_leaders(&c.image, 1);
    assert_eq!((records.len(), more), (1, true), "bounded");
    let (records, more) = balance_leaders(&c.image, 10);
    assert_eq!((records.len(), more), (2, false));
    c.apply(&records);
    assert_eq!(c.partition(t, 0).leader, 1);
    assert_eq!(c.partition(t, 2).leader, 3, "a leaderless partition gets its preferred replica");
    assert_eq!(balance_leaders(&c.image, 10), (vec![], false), "balanced");
}

#[test]
fn periodic_unclean_elections_only_where_enabled() {
    let (mut c, t) = elections();
    c.set_broker(3, 1, 0);
    let config = crate::controller::test_cluster::config();
    assert!(elect_unclean_leaders(&c.image, &config, 10).0.is_empty(), "disabled by default");
    c.set_config(TOPIC_RESOURCE, "t", "unclean.leader.election.enable", "true");
    let (records, more) = elect_unclean_leaders(&c.image, &config, 10);
    assert!(!more);
    c.apply(&records);
    let p2 = c.partition(t, 2);
    assert_eq!((p2.leader, p2.isr), (2, vec![2]));
}

#[test]
fn manual_assignments_are_checked_as_kafka_checks_them() {
    let mut c = three_racks();
    c.set_broker(3, 1, 0);
    let none = Properties::new();
    let id = topic_id("m");
    let create = |c: &Cluster, a: &[(i32, Vec<i32>)]| create_topic_assigned_records(&c.image, "m", id, a, &none);
    let refused = |c: &Cluster, a: &[(i32, Vec<i32>)]| {
        let (code, message) = create(c, a).unwrap_err();
        assert_eq!(code, ResponseError::InvalidReplicaAssignment);
        message
    };
    assert_eq!(refused(&c, &[(0, vec![])]), "The manual partition assignment includes an empty replica list.");
    assert_eq!(
        refused(&c, &[(0, vec![1, 9])]),
        "The manual partition assignment includes broker 9, but no such broker is registered."
    );
    assert_eq!(
        refused(&c, &[(0, vec![2, 1, 2])]),
        "The manual partition assignment includes the broker 2 more than once."
    );
    assert_eq!(
        refused(&c, &[(0, vec![1, 2]), (1, vec![1])]),
        "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with \
         previous partitions, which have 2 replica(s)."
    );
    assert_eq!(
        refused(&c, &[(0, vec![1]), (0, vec![2])]),
        "Found multiple manual partition assignments for partition 0"
    );
    assert_eq!(refused(&c, &[(1, vec![1])]), "partitions should be a consecutive 0-based integer sequence");
    assert_eq!(
        refused(&c, &[(0, vec![3])]),
        "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown."
    );

    let records = create(&c, &[(1, vec![3, 2]), (0, vec![1, 3])]).unwrap();
    c.apply(&records);
    let (p0, p1) = (c.partition(id, 0), c.partition(id, 1));
    assert_eq!((p0.replicas, p0.isr, p0.leader), (vec![1, 3], vec![1], 1));
    assert_eq!((p1.replicas, p1.isr, p1.leader), (vec![3, 2], vec![2], 2), "the first active replica leads");

    let grow = |c: &Cluster, a: &[Vec<i32>]| create_partitions_assigned_records(&c.image, "m", 4, a).unwrap_err();
    assert_eq!(
        grow(&c, &[vec![1, 2]]),
        (
            ResponseError::InvalidReplicaAssignment,
            Some("Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.".to_string())
        )
    );
    assert_eq!(grow(&c, &[vec![1, 2], vec![1]]).0, ResponseError::InvalidReplicaAssignment, "RF 2 expected");
    c.set_broker(2, 1, 0);
    assert!(grow(&c, &[vec![1, 2], vec![3, 2]]).1.unwrap().contains("partition 3 are fenced"));
    c.set_broker(2, -1, 0);
    let records = create_partitions_assigned_records(&c.image, "m", 4, &[vec![2, 1], vec![1, 2]]).unwrap();
    c.apply(&records);
    assert_eq!(c.partition(id, 2).replicas, vec![2, 1]);
    assert_eq!(c.partition(id, 3).leader, 1);
}
