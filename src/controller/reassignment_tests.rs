//! Reassignment: starting, completing (at once or on the AlterPartition that brings the new
//! replicas in sync), cancelling, refusing and listing, every record applied to an image.

use kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic;
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::AlterPartitionRequest;
use uuid::Uuid;

use super::*;
use crate::controller::alter_partition::alter_partition;
use crate::controller::partition_change::{leader_and_isr_updates, BrokerEvent, NO_LEADER, RECOVERED};
use crate::controller::test_cluster::{config, Cluster};
use crate::metadata::image::{NO_LEADER_CHANGE, TOPIC_RESOURCE};

const T: u128 = 7;

/// Brokers 1..=4 unfenced; topic `t`: partition 0 on [1, 2], partition 1 on [2, 3].
fn cluster() -> (Cluster, Uuid) {
    let mut c = Cluster::new();
    for b in 1..=4 {
        c.add_broker(b, None, false);
    }
    let t = c.add_topic("t", T, &[&[1, 2], &[2, 3]]);
    (c, t)
}

/// Applies `records` and checks every partition's invariants after them.
fn apply(c: &mut Cluster, records: &[MetadataRecord]) {
    c.apply(records);
    for topic in c.image.topics.values() {
        for (id, p) in &topic.partitions {
            let within = |list: &[i32]| list.iter().all(|r| p.replicas.contains(r));
            let what = format!("{}-{id}: {p:?}", topic.name);
            assert!(within(&p.isr) && within(&p.adding_replicas) && within(&p.removing_replicas), "{what}");
            assert!(!p.isr.is_empty() && (p.leader == NO_LEADER || p.isr.contains(&p.leader)), "{what}");
            assert_eq!(p.directories.len(), p.replicas.len(), "{what}");
        }
    }
}

/// Broker `b`'s only log directory in `Cluster`.
fn dir(b: i32) -> Uuid {
    Uuid::from_u128(5000 + b as u128)
}

fn dirs(brokers: &[i32]) -> Vec<Uuid> {
    brokers.iter().map(|&b| dir(b)).collect()
}

fn target(topic: &str, partition: i32, replicas: Option<&[i32]>) -> ReassignableTopic {
    let p = ReassignablePartition::default()
        .with_partition_index(partition)
        .with_replicas(replicas.map(|r| r.iter().map(|&b| BrokerId(b)).collect()));
    ReassignableTopic::default().with_name(TopicName(StrBytes::from_string(topic.to_string()))).with_partitions(vec![p])
}

/// Sends one request, applies its records; returns them and each partition's (code, message).
fn reassign_all(
    c: &mut Cluster,
    topics: Vec<ReassignableTopic>,
    allow_rf_change: bool,
) -> (Vec<MetadataRecord>, Vec<(i16, Option<String>)>) {
    let request = AlterPartitionReassignmentsRequest::default()
        .with_allow_replication_factor_change(allow_rf_change)
        .with_topics(topics);
    let (records, response) = alter_partition_reassignments(&c.image, &config(), &request);
    assert_eq!((response.error_code, response.error_message.clone()), (0, None));
    assert_eq!(response.allow_replication_factor_change, allow_rf_change, "echoed");
    apply(c, &records);
    let answers = response
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.error_code, p.error_message.as_ref().map(|m| m.to_string())))
        .collect();
    (records, answers)
}

/// Reassigns `t` partition `p`; returns its record (None when nothing changed), checked accepted.
fn reassign(c: &mut Cluster, p: i32, replicas: Option<&[i32]>) -> Option<PartitionChangeRecord> {
    let (records, answers) = reassign_all(c, vec![target("t", p, replicas)], true);
    assert_eq!(answers, vec![(0, None)]);
    assert!(records.len() <= 1);
    records.into_iter().next().map(|r| match r {
        MetadataRecord::PartitionChange(c) => c,
        other => panic!("not a partition change: {other:?}"),
    })
}

/// Refused: the error and message, nothing written.
fn refused(c: &mut Cluster, topic: &str, p: i32, replicas: Option<&[i32]>, allow_rf: bool) -> (ResponseError, String) {
    let before = c.next_offset;
    let (records, answers) = reassign_all(c, vec![target(topic, p, replicas)], allow_rf);
    assert!(records.is_empty());
    assert_eq!(c.next_offset, before);
    let (code, message) = answers.into_iter().next().expect("one answer");
    (ResponseError::try_from_code(code).expect("an error"), message.expect("a message"))
}

/// The leader of partition `p` asks for ISR `isr`; returns (error code, leader, ISR, leader epoch).
fn alter_isr(c: &mut Cluster, t: Uuid, p: i32, isr: &[i32]) -> (i16, i32, Vec<i32>, i32) {
    let now = c.partition(t, p);
    let members = isr
        .iter()
        .map(|&b| BrokerState::default().with_broker_id(BrokerId(b)).with_broker_epoch(c.image.brokers[&b].epoch))
        .collect();
    let data = PartitionData::default()
        .with_partition_index(p)
        .with_leader_epoch(now.leader_epoch)
        .with_partition_epoch(now.partition_epoch)
        .with_new_isr_with_epochs(members)
        .with_leader_recovery_state(RECOVERED);
    let request = AlterPartitionRequest::default()
        .with_broker_id(BrokerId(now.leader))
        .with_broker_epoch(c.image.brokers[&now.leader].epoch)
        .with_topics(vec![TopicData::default().with_topic_id(t).with_partitions(vec![data])]);
    let (records, response) = alter_partition(&c.image, &config(), &request, 3);
    apply(c, &records);
    let a = &response.topics[0].partitions[0];
    (a.error_code, a.leader_id.0, a.isr.iter().map(|b| b.0).collect(), a.leader_epoch)
}

/// (topic, partition, replicas, adding, removing).
type Listed = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

fn listed(c: &Cluster, topics: Option<&[ListPartitionReassignmentsTopics]>) -> Vec<Listed> {
    let response = list_partition_reassignments(&c.image, topics);
    assert_eq!((response.error_code, response.error_message), (0, None));
    let ids = |l: &[BrokerId]| l.iter().map(|b| b.0).collect::<Vec<_>>();
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
        })
        .collect()
}

#[test]
fn the_replica_sets_of_a_move_are_kafkas() {
    let r = ReassignmentReplicas::new(&[3, 1, 2], &[4, 2, 5]);
    assert_eq!(r, ReassignmentReplicas { replicas: vec![4, 2, 5, 1, 3], adding: vec![4, 5], removing: vec![1, 3] });
    let r = ReassignmentReplicas::new(&[1, 2], &[2, 1]);
    assert_eq!(r, ReassignmentReplicas { replicas: vec![2, 1], adding: vec![], removing: vec![] });
}

#[test]
fn a_move_starts_with_target_then_removed_replicas_and_completes_when_the_new_ones_are_in_sync() {
    let (mut c, t) = cluster();
    let start = reassign(&mut c, 0, Some(&[3, 4])).expect("a record");
    assert_eq!(start.replicas, Some(vec![3, 4, 1, 2]));
    assert_eq!((start.adding_replicas.clone(), start.removing_replicas.clone()), (Some(vec![3, 4]), Some(vec![1, 2])));
    assert_eq!((start.leader, start.isr.clone()), (NO_LEADER_CHANGE, None), "leader and ISR unchanged, no epoch bump");
    assert_eq!(start.directories, Some(dirs(&[3, 4, 1, 2])), "new replicas in their broker's only directory");
    assert_eq!(listed(&c, None), vec![("t".to_string(), 0, vec![3, 4, 1, 2], vec![3, 4], vec![1, 2])]);
    let p = c.partition(t, 0);
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (1, 0, vec![1, 2]));

    // 3 catches up: not all the target is in sync yet.
    let (code, leader, isr, epoch) = alter_isr(&mut c, t, 0, &[1, 2, 3]);
    assert_eq!((code, leader, isr, epoch), (0, 1, vec![1, 2, 3], 0));
    assert!(in_progress(&c.partition(t, 0)));

    // 4 catches up: the move completes in the same record, leadership leaves removed 1.
    let (code, ..) = alter_isr(&mut c, t, 0, &[1, 2, 3, 4]);
    assert_eq!(ResponseError::try_from_code(code), Some(ResponseError::NewLeaderElected));
    let p = c.partition(t, 0);
    assert_eq!((p.replicas.clone(), p.isr.clone(), p.leader, p.leader_epoch), (vec![3, 4], vec![3, 4], 3, 1));
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    assert_eq!(p.directories, dirs(&[3, 4]));
    assert_eq!(listed(&c, None), vec![]);
}

#[test]
fn completion_keeping_the_leader_bumps_its_epoch_and_answers_the_new_state() {
    let (mut c, t) = cluster();
    reassign(&mut c, 0, Some(&[1, 3])).expect("a record");
    let p = c.partition(t, 0);
    assert_eq!(
        (p.replicas.clone(), p.adding_replicas.clone(), p.removing_replicas.clone()),
        (vec![1, 3, 2], vec![3], vec![2])
    );
    let (code, leader, isr, epoch) = alter_isr(&mut c, t, 0, &[1, 2, 3]);
    assert_eq!((code, leader, isr, epoch), (0, 1, vec![1, 3], 1), "2 left the replicas: a new leader epoch");
    let p = c.partition(t, 0);
    assert_eq!((p.replicas.clone(), p.directories.clone()), (vec![1, 3], dirs(&[1, 3])));
}

#[test]
fn a_target_already_in_sync_completes_at_once() {
    let (mut c, t) = cluster();
    // A reorder: the replicas and directories change, the leader stays (no preferred election).
    let r = reassign(&mut c, 0, Some(&[2, 1])).expect("a record");
    assert_eq!((r.replicas.clone(), r.leader, r.adding_replicas.clone()), (Some(vec![2, 1]), NO_LEADER_CHANGE, None));
    assert_eq!(r.directories, Some(dirs(&[2, 1])));
    assert_eq!(c.partition(t, 0).leader, 1);
    // A shrink removing the leader: 2 leads, the ISR loses 1, at a new leader epoch.
    let r = reassign(&mut c, 0, Some(&[2])).expect("a record");
    assert_eq!((r.replicas, r.isr, r.leader), (Some(vec![2]), Some(vec![2]), 2));
    let p = c.partition(t, 0);
    assert_eq!((p.leader, p.leader_epoch, p.directories.clone()), (2, 1, dirs(&[2])));
    assert!(!in_progress(&p));
    // The same assignment again: nothing to write.
    assert_eq!(reassign(&mut c, 0, Some(&[2])), None);
}

#[test]
fn cancelling_reverts_to_the_original_replicas() {
    let (mut c, t) = cluster();
    reassign(&mut c, 0, Some(&[3, 4]));
    alter_isr(&mut c, t, 0, &[1, 2, 3]);
    let r = reassign(&mut c, 0, None).expect("a record");
    assert_eq!((r.replicas.clone(), r.isr.clone()), (Some(vec![1, 2]), Some(vec![1, 2])));
    assert_eq!((r.adding_replicas.clone(), r.removing_replicas.clone()), (Some(vec![]), Some(vec![])));
    assert_eq!(r.leader, 1, "3 and 4 left the replicas: leader 1 at a new epoch");
    let p = c.partition(t, 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader_epoch, p.directories.clone()),
        (vec![1, 2], vec![1, 2], 1, dirs(&[1, 2]))
    );
    assert_eq!(listed(&c, None), vec![]);
    let (error, message) = refused(&mut c, "t", 0, None, true);
    assert_eq!(
        (error, message.as_str()),
        (ResponseError::NoReassignmentInProgress, "No partition reassignment is in progress.")
    );
}

#[test]
fn a_revert_that_would_need_an_unclean_election_is_refused_unless_enabled() {
    let (mut c, t) = cluster();
    // Partition 1 on [2, 3] moves to [4, 1]; 4 catches up; then 2 and 3 are fenced: the ISR
    // keeps only adding replica 4.
    reassign(&mut c, 1, Some(&[4, 1]));
    alter_isr(&mut c, t, 1, &[2, 3, 4]);
    for b in [2, 3] {
        c.set_broker(b, 1, 0);
        let records = leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(b));
        apply(&mut c, &records);
    }
    let p = c.partition(t, 1);
    assert_eq!((p.isr.clone(), p.leader, p.adding_replicas.clone()), (vec![4], 4, vec![1, 4]), "adding 4 leads now");
    let (error, message) = refused(&mut c, "t", 1, None, true);
    assert_eq!(error, ResponseError::InvalidReplicaAssignment);
    assert_eq!(
        message,
        "Unable to revert partition assignment for t:1 because it would require an unclean leader election."
    );
    c.set_config(TOPIC_RESOURCE, "t", "unclean.leader.election.enable", "true");
    let r = reassign(&mut c, 1, None).expect("a record");
    assert_eq!(r.replicas, Some(vec![2, 3]));
    let p = c.partition(t, 1);
    assert_eq!((p.isr.clone(), p.leader), (vec![2], NO_LEADER), "2 made the ISR; fenced, it cannot lead");
}

#[test]
fn elections_during_a_move_take_only_in_sync_replicas_in_replica_order() {
    let (mut c, t) = cluster();
    reassign(&mut c, 0, Some(&[3, 4, 2]));
    c.set_broker(1, 1, 0);
    let records = leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(1));
    apply(&mut c, &records);
    let p = c.partition(t, 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]), "3 and 4 come first but are not in sync");
    assert!(in_progress(&p), "1 out of the ISR does not complete: 3 and 4 are missing");
    let (code, leader, isr, _) = alter_isr(&mut c, t, 0, &[2, 3, 4]);
    assert_eq!((code, leader, isr), (0, 2, vec![2, 3, 4]), "complete: the ISR keeps the order asked");
    assert_eq!(c.partition(t, 0).replicas, vec![3, 4, 2]);
}

#[test]
fn refusals_carry_kafkas_messages() {
    let (mut c, _) = cluster();
    type Case<'a> = (&'a str, i32, Option<&'a [i32]>, ResponseError, &'a str);
    let cases: &[Case] = &[
        ("nope", 0, Some(&[1]), ResponseError::UnknownTopicOrPartition, "Unable to find a topic named nope."),
        ("t", 5, Some(&[1]), ResponseError::UnknownTopicOrPartition, "Unable to find partition t:5."),
        ("t", 5, None, ResponseError::UnknownTopicOrPartition, "Unable to find partition t:5."),
        (
            "t",
            0,
            Some(&[]),
            ResponseError::InvalidReplicaAssignment,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            "t",
            0,
            Some(&[1, 9]),
            ResponseError::InvalidReplicaAssignment,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            "t",
            0,
            Some(&[1, -1]),
            ResponseError::InvalidReplicaAssignment,
            "The manual partition assignment includes broker -1, but no such broker is registered.",
        ),
        (
            "t",
            0,
            Some(&[3, 1, 3]),
            ResponseError::InvalidReplicaAssignment,
            "The manual partition assignment includes the broker 3 more than once.",
        ),
    ];
    for &(topic, p, replicas, error, message) in cases {
        assert_eq!(refused(&mut c, topic, p, replicas, true), (error, message.to_string()), "{topic}:{p} {replicas:?}");
    }
}

#[test]
fn without_replication_factor_changes_the_target_keeps_the_length_headed_for() {
    let (mut c, t) = cluster();
    let (error, message) = refused(&mut c, "t", 0, Some(&[1, 2, 3]), false);
    assert_eq!(
        (error, message.as_str()),
        (ResponseError::InvalidReplicationFactor, "The replication factor is changed from 2 to 3")
    );
    let (_, answers) = reassign_all(&mut c, vec![target("t", 0, Some(&[3, 4]))], false);
    assert_eq!(answers, vec![(0, None)]);
    // Headed for [3, 4] (replicas [3, 4, 1, 2], removing [1, 2]): 2 replicas.
    let (error, message) = refused(&mut c, "t", 0, Some(&[3]), false);
    assert_eq!(
        (error, message.as_str()),
        (ResponseError::InvalidReplicationFactor, "The replication factor is changed from 2 to 1")
    );
    // A new target is computed from the current replicas (adding ones included), and Kafka's
    // builder keeps the adding replicas when the new target adds none.
    assert!(reassign(&mut c, 0, Some(&[4, 1])).is_some());
    let p = c.partition(t, 0);
    assert_eq!((p.replicas, p.removing_replicas, p.adding_replicas), (vec![4, 1, 2, 3], vec![2, 3], vec![3, 4]));
}

#[test]
fn one_request_answers_each_partition_and_writes_the_accepted_ones() {
    let (mut c, t) = cluster();
    let topics = vec![target("t", 0, Some(&[3, 4])), target("t", 1, Some(&[2, 2])), target("t", 1, Some(&[1, 2]))];
    let (records, answers) = reassign_all(&mut c, topics, true);
    assert_eq!(records.len(), 2);
    assert_eq!(
        answers.iter().map(|a| a.0).collect::<Vec<_>>(),
        vec![0, ResponseError::InvalidReplicaAssignment.code(), 0]
    );
    assert_eq!(c.partition(t, 1).replicas, vec![1, 2, 3]);
}

#[test]
fn listing_names_topics_and_partitions_or_all() {
    let (mut c, _) = cluster();
    c.add_topic("a", 8, &[&[1], &[2]]);
    let (_, answers) = reassign_all(&mut c, vec![target("t", 1, Some(&[4])), target("a", 0, Some(&[2, 3]))], true);
    assert_eq!(answers, vec![(0, None), (0, None)]);
    let all = listed(&c, None);
    assert_eq!(
        all,
        vec![
            ("a".to_string(), 0, vec![2, 3, 1], vec![2, 3], vec![1]),
            ("t".to_string(), 1, vec![4, 2, 3], vec![4], vec![2, 3]),
        ]
    );
    let named = |name: &str, ids: &[i32]| {
        ListPartitionReassignmentsTopics::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_partition_indexes(ids.to_vec())
    };
    let wanted = [named("t", &[0, 1, 7]), named("nope", &[0]), named("a", &[1])];
    assert_eq!(listed(&c, Some(&wanted)), vec![all[1].clone()]);
}
