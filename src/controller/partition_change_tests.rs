//! Partition changes: elections, ISR changes and the updates a broker event causes, applied to
//! an image.

use super::*;
use crate::controller::test_cluster::{config, Cluster};
use crate::metadata::records::MetadataRecord;

fn change(
    partition: &PartitionImage,
    isr: &[i32],
    election: Election,
    acceptable: impl Fn(i32) -> bool,
) -> Option<PartitionChangeRecord> {
    PartitionChange::new(Uuid::from_u128(9), 0, partition, acceptable)
        .target_isr(isr.to_vec())
        .election(election)
        .build()
}

fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionImage {
    PartitionImage {
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        removing_replicas: vec![],
        adding_replicas: vec![],
        leader,
        leader_recovery_state: RECOVERED,
        leader_epoch: 4,
        partition_epoch: 7,
        directories: vec![],
        eligible_leader_replicas: vec![],
        last_known_elr: vec![],
    }
}

#[test]
fn nothing_to_change_builds_nothing() {
    let p = partition(&[1, 2, 3], &[1, 2, 3], 1);
    assert_eq!(change(&p, &[1, 2, 3], Election::Default, |_| true), None);
    assert_eq!(change(&p, &[1, 2, 3], Election::Preferred, |_| true), None, "replicas[0] leads already");
    assert_eq!(change(&p, &[1, 2, 3], Election::Unclean, |_| true), None);
}

#[test]
fn the_current_leader_stays_while_acceptable_and_in_the_isr() {
    let p = partition(&[1, 2, 3], &[1, 2, 3], 2);
    let c = change(&p, &[2, 3], Election::Default, |_| true).unwrap();
    assert_eq!((c.leader, c.isr), (NO_LEADER_CHANGE, Some(vec![2, 3])), "shrink keeps leader 2, no epoch bump");
    let c = change(&p, &[1, 2, 3], Election::Default, |r| r != 2).unwrap();
    assert_eq!((c.leader, c.isr), (1, None), "leader 2 not acceptable: first acceptable ISR member in replica order");
    let c = change(&p, &[2, 3], Election::Default, |r| r != 2).unwrap();
    assert_eq!((c.leader, c.isr.clone()), (3, Some(vec![2, 3])), "1 is out of the ISR");
}

#[test]
fn preferred_election_moves_leadership_to_the_first_replica_when_it_can() {
    let p = partition(&[1, 2, 3], &[1, 2, 3], 2);
    assert_eq!(change(&p, &[1, 2, 3], Election::Preferred, |_| true).unwrap().leader, 1);
    assert_eq!(change(&p, &[1, 2, 3], Election::Default, |_| true), None, "a default election keeps 2");
    assert_eq!(change(&p, &[2, 3], Election::Preferred, |_| true).unwrap().leader, NO_LEADER_CHANGE, "1 not in ISR");
    assert_eq!(change(&p, &[1, 2, 3], Election::Preferred, |r| r != 1), None, "1 not acceptable: 2 stays");
    let p = partition(&[1, 2, 3], &[1, 2, 3], NO_LEADER);
    assert_eq!(change(&p, &[1, 2, 3], Election::Preferred, |r| r == 3).unwrap().leader, 3, "else any ISR member");
}

#[test]
fn with_no_acceptable_isr_member_the_leader_goes_and_the_isr_keeps_its_last_member() {
    let p = partition(&[1, 2, 3], &[1], 1);
    let c = change(&p, &[], Election::Default, |r| r != 1).unwrap();
    assert_eq!((c.leader, c.isr), (NO_LEADER, None), "the ISR is never emptied");
    let p = partition(&[1, 2, 3], &[1, 2], 1);
    let c = change(&p, &[2], Election::Default, |r| r == 1).unwrap();
    assert_eq!((c.leader, c.isr), (NO_LEADER, Some(vec![2])));
    let p = partition(&[1, 2, 3], &[1], NO_LEADER);
    assert_eq!(change(&p, &[1], Election::Default, |_| false), None, "leaderless stays leaderless: no record");
}

#[test]
fn unclean_election_takes_any_acceptable_replica_and_marks_it_recovering() {
    let p = partition(&[1, 2, 3], &[1], NO_LEADER);
    let c = change(&p, &[1], Election::Unclean, |r| r == 3).unwrap();
    assert_eq!((c.leader, c.isr.clone(), c.leader_recovery_state), (3, Some(vec![3]), RECOVERING));
    assert_eq!(change(&p, &[1], Election::Default, |r| r == 3), None, "only when unclean is enabled");
    assert_eq!(change(&p, &[1], Election::Unclean, |_| false), None, "nobody acceptable");
    let c = change(&p, &[1], Election::Unclean, |_| true).unwrap();
    assert_eq!((c.leader, c.isr, c.leader_recovery_state), (1, None, -1), "a clean candidate first");
    // Already recovering: the state is not set again.
    let mut p = partition(&[1, 2, 3], &[1], NO_LEADER);
    p.leader_recovery_state = RECOVERING;
    let c = change(&p, &[1], Election::Unclean, |r| r == 2).unwrap();
    assert_eq!((c.leader, c.leader_recovery_state), (2, -1));
}

#[test]
fn recovery_state_and_a_left_over_elr_are_changed() {
    let mut p = partition(&[1, 2], &[1], 1);
    p.leader_recovery_state = RECOVERING;
    let c = PartitionChange::new(Uuid::nil(), 0, &p, |_| true).target_recovery_state(RECOVERED).build().unwrap();
    assert_eq!((c.leader_recovery_state, c.isr, c.leader), (RECOVERED, None, NO_LEADER_CHANGE));
    let mut p = partition(&[1, 2], &[1, 2], 1);
    p.eligible_leader_replicas = vec![2];
    let c = change(&p, &[1, 2], Election::Default, |_| true).unwrap();
    assert_eq!(c.eligible_leader_replicas, Some(vec![]), "ELR disabled: cleared");
    assert_eq!(c.last_known_elr, None);
}

fn three_brokers_one_topic() -> (Cluster, Uuid) {
    let mut c = Cluster::new();
    for b in 1..=3 {
        c.add_broker(b, None, false);
    }
    let t = c.add_topic("t", 1, &[&[1, 2, 3], &[2, 3, 1], &[3, 1, 2], &[2, 3]]);
    (c, t)
}

#[test]
fn a_leaving_broker_leaves_every_isr_and_leadership() {
    let (mut c, t) = three_brokers_one_topic();
    c.set_broker(2, 1, 0); // fenced
    let records = leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(2));
    assert_eq!(records.len(), 4, "every partition has 2 in its ISR");
    c.apply(&records);
    let expect = [(1, vec![1, 3], 0), (3, vec![3, 1], 1), (3, vec![3, 1], 0), (3, vec![3], 1)];
    for (p, (leader, isr, leader_epoch)) in expect.into_iter().enumerate() {
        let got = c.partition(t, p as i32);
        assert_eq!((got.leader, got.isr, got.leader_epoch), (leader, isr, leader_epoch), "partition {p}");
        assert_eq!(got.partition_epoch, 1);
    }
    assert!(!leads_any(&c.image, 2));
    assert!(leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(2)).is_empty(), "done once");

    // Broker 3 leaves too: partition 3's last ISR member goes, the partition is leaderless.
    c.set_broker(3, 1, 0);
    c.apply(&leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(3)));
    let p3 = c.partition(t, 3);
    assert_eq!((p3.leader, p3.isr), (NO_LEADER, vec![3]));

    // Broker 3 comes back: it leads partition 3 again, nothing else moves.
    let joins = leader_and_isr_updates(&c.image, &config(), BrokerEvent::Joins(3));
    assert_eq!(joins.len(), 1);
    c.apply(&joins);
    c.set_broker(3, -1, 0);
    let p3 = c.partition(t, 3);
    assert_eq!((p3.leader, p3.isr), (3, vec![3]));
    assert_eq!(c.partition(t, 1).isr, vec![1], "ISRs are grown by AlterPartition only");
}

#[test]
fn unclean_election_follows_the_topic_config_then_the_broker_configs() {
    let (mut c, t) = three_brokers_one_topic();
    assert!(!unclean_enabled(&c.image, &config(), "t"));
    c.set_config(BROKER_RESOURCE, "", "unclean.leader.election.enable", "true");
    assert!(unclean_enabled(&c.image, &config(), "t"), "cluster default");
    c.set_config(BROKER_RESOURCE, "3000", "unclean.leader.election.enable", "false");
    assert!(!unclean_enabled(&c.image, &config(), "t"), "the controller node's config first");
    c.set_config(TOPIC_RESOURCE, "t", "unclean.leader.election.enable", "TRUE");
    assert!(unclean_enabled(&c.image, &config(), "t"), "the topic's config first");

    // Partition 3 ([2, 3]): 3 leaves the ISR first (it is fenced), then 2 dies: unclean
    // election brings 3 back as leader once it is unfenced.
    c.set_broker(3, 1, 0);
    c.apply(&leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(3)));
    c.set_broker(2, 1, 0);
    c.apply(&leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(2)));
    assert_eq!(c.partition(t, 3).leader, NO_LEADER);
    let joins = leader_and_isr_updates(&c.image, &config(), BrokerEvent::Joins(3));
    c.apply(&joins);
    let p3 = c.partition(t, 3);
    assert_eq!((p3.leader, p3.isr, p3.leader_recovery_state), (3, vec![3], RECOVERING));
}

#[test]
fn a_replica_in_an_offline_directory_cannot_lead() {
    let (mut c, t) = three_brokers_one_topic();
    let p = c.partition(t, 0);
    assert!(has_online_dir(&c.image, &p, 2));
    // Broker 2 re-registers without the directory partition 0 is in.
    let mut record = match c.image.brokers.get(&2) {
        Some(b) => crate::metadata::records::RegisterBrokerRecord {
            broker_id: 2,
            broker_epoch: b.epoch,
            incarnation_id: b.incarnation_id,
            fenced: false,
            ..Default::default()
        },
        None => unreachable!(),
    };
    record.log_dirs = vec![Uuid::from_u128(77)];
    c.apply(&[MetadataRecord::RegisterBroker(record)]);
    assert!(!has_online_dir(&c.image, &p, 2));
    assert!(!leader_acceptor(&c.image, &p)(2));
    assert!(leader_acceptor(&c.image, &p)(3));
    c.set_broker(1, 1, 0);
    let records = leader_and_isr_updates(&c.image, &config(), BrokerEvent::Leaves(1));
    c.apply(&records);
    assert_eq!(c.partition(t, 0).leader, 3, "2 is skipped: its copy is offline");
}

#[test]
fn an_isr_holding_the_whole_target_completes_a_reassignment() {
    // Moving [1, 2] to [3, 2]: replicas [3, 2, 1], adding [3], removing [1], led by 1.
    let mut p = partition(&[3, 2, 1], &[1, 2], 1);
    (p.adding_replicas, p.removing_replicas) = (vec![3], vec![1]);
    assert_eq!(change(&p, &[1, 2], Election::Default, |_| true), None, "3 not in sync yet");
    let c = change(&p, &[1, 2, 3], Election::Default, |_| true).unwrap();
    assert_eq!((c.replicas, c.isr), (Some(vec![3, 2]), Some(vec![2, 3])), "the ISR keeps its order, without 1");
    assert_eq!((c.adding_replicas, c.removing_replicas), (Some(vec![]), Some(vec![])));
    assert_eq!(c.leader, 3, "1 removed: the first in-sync target replica (replica order) leads");
    assert_eq!(c.directories, Some(vec![UNASSIGNED_DIRECTORY; 2]), "no directories known: UNASSIGNED");
    // An ISR of removed replicas only leaves nothing to complete with: a plain shrink.
    let c = change(&p, &[1], Election::Default, |_| true).unwrap();
    assert_eq!((c.isr, c.replicas, c.adding_replicas), (Some(vec![1]), None, None));
}

#[test]
fn a_new_replica_gets_the_directory_given_and_a_removed_one_bumps_the_leader_epoch() {
    let mut p = partition(&[1, 2], &[1, 2], 1);
    p.directories = vec![Uuid::from_u128(11), Uuid::from_u128(12)];
    let c = PartitionChange::new(Uuid::from_u128(9), 0, &p, |_| true)
        .target_isr(vec![1])
        .target_assignment(vec![3, 1], vec![], vec![], |b| Uuid::from_u128(10 + b as u128))
        .build()
        .unwrap();
    assert_eq!(c.directories, Some(vec![Uuid::from_u128(13), Uuid::from_u128(11)]));
    assert_eq!((c.replicas, c.isr), (Some(vec![3, 1]), Some(vec![1])));
    assert_eq!(c.leader, 1, "2 left the replicas: the same leader at a new epoch");
}
