//! Eligible leader replicas: the ELR rules of a partition change (Kafka's KIP-966
//! `PartitionChangeBuilderTest` cases), and a partition's ELR through broker fencing, clean and
//! unclean restarts and unfencing, every record applied to an image.

use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::{BrokerId, BrokerRegistrationRequest};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::*;
use crate::controller::brokers::BrokerSessions;
use crate::controller::partition_change::{
    leader_and_isr_updates, BrokerEvent, Election, PartitionChange, NO_LEADER, RECOVERED, RECOVERING,
};
use crate::controller::test_cluster::{config, Cluster, METADATA_VERSION};
use crate::metadata::image::NO_LEADER_CHANGE;
use crate::metadata::records::{ConfigRecord, FeatureLevelRecord, MetadataRecord, PartitionChangeRecord};

fn partition(replicas: &[i32], isr: &[i32], leader: i32, elr: &[i32], last_known: &[i32]) -> PartitionImage {
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
        eligible_leader_replicas: elr.to_vec(),
        last_known_elr: last_known.to_vec(),
    }
}

/// A change with ELR on at `min_isr`.
fn change(
    p: &PartitionImage,
    isr: &[i32],
    min_isr: usize,
    election: Election,
    acceptable: impl Fn(i32) -> bool,
) -> Option<PartitionChangeRecord> {
    PartitionChange::new(Uuid::from_u128(9), 0, p, acceptable)
        .min_isr(Some(min_isr))
        .target_isr(isr.to_vec())
        .election(election)
        .build()
}

/// (leader, ISR, ELR, last known ELR) of a record.
type Fields = (i32, Option<Vec<i32>>, Option<Vec<i32>>, Option<Vec<i32>>);

fn fields(r: &PartitionChangeRecord) -> Fields {
    (r.leader, r.isr.clone(), r.eligible_leader_replicas.clone(), r.last_known_elr.clone())
}

#[test]
fn an_isr_shrinking_below_min_isr_puts_the_removed_members_in_the_elr() {
    let p = partition(&[1, 2, 3, 4], &[1, 2, 3, 4], 1, &[], &[]);
    let c = change(&p, &[1, 2], 3, Election::Default, |_| true).unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, Some(vec![1, 2]), Some(vec![3, 4]), None));
    let c = change(&p, &[1, 2, 3], 3, Election::Default, |_| true).unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, Some(vec![1, 2, 3]), None, None), "at min ISR: no ELR");
    // Without ELR the same shrink leaves the ELR empty.
    let off = PartitionChange::new(Uuid::from_u128(9), 0, &p, |_| true).target_isr(vec![1, 2]).build().unwrap();
    assert_eq!(fields(&off), (NO_LEADER_CHANGE, Some(vec![1, 2]), None, None));
}

#[test]
fn the_elr_keeps_its_members_and_loses_those_back_in_the_isr() {
    let p = partition(&[1, 2, 3, 4], &[1, 2], 1, &[3, 4], &[]);
    let c = change(&p, &[1], 3, Election::Default, |_| true).unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, Some(vec![1]), Some(vec![2, 3, 4]), None));
    let c = change(&p, &[1, 2, 4], 4, Election::Default, |_| true).unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, Some(vec![1, 2, 4]), Some(vec![3]), None), "4 rejoined the ISR");
    let c = change(&p, &[1, 2, 3], 3, Election::Default, |_| true).unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, Some(vec![1, 2, 3]), Some(vec![]), None), "min ISR reached");
}

#[test]
fn the_isr_may_empty_and_then_the_last_leader_is_the_last_known_elr() {
    let p = partition(&[1, 2, 3], &[1], 1, &[2, 3], &[]);
    let c = change(&p, &[], 2, Election::Default, |_| false).unwrap();
    assert_eq!(fields(&c), (NO_LEADER, Some(vec![]), Some(vec![1, 2, 3]), Some(vec![1])));
    // Leaderless already: the last known leader stays.
    let p = partition(&[1, 2, 3], &[], NO_LEADER, &[1, 2, 3], &[1]);
    assert_eq!(change(&p, &[], 2, Election::Default, |_| false), None);
}

#[test]
fn with_an_empty_isr_an_acceptable_elr_member_is_elected_cleanly() {
    let p = partition(&[1, 2, 3], &[1], 1, &[2, 3], &[]);
    // Leader 1 leaves; 2 and 3 are acceptable ELR members: 2, first in replica order, leads.
    let c = change(&p, &[], 2, Election::Default, |r| r != 1).unwrap();
    assert_eq!(fields(&c), (2, Some(vec![2]), Some(vec![1, 3]), None));
    assert_eq!(c.leader_recovery_state, -1, "a clean election");
    // From leaderless: 3 comes back; the last known leader is cleared.
    let p = partition(&[1, 2, 3], &[], NO_LEADER, &[1, 2, 3], &[1]);
    let c = change(&p, &[], 2, Election::Default, |r| r == 3).unwrap();
    assert_eq!(fields(&c), (3, Some(vec![3]), Some(vec![1, 2]), Some(vec![])));
    // A preferred election considers the ELR the same way.
    let c = change(&p, &[], 2, Election::Preferred, |r| r == 3).unwrap();
    assert_eq!(fields(&c), (3, Some(vec![3]), Some(vec![1, 2]), Some(vec![])));
}

#[test]
fn an_unclean_shutdown_takes_the_broker_out_of_the_elr() {
    let p = partition(&[1, 2, 3], &[], NO_LEADER, &[1, 2], &[1]);
    let c = PartitionChange::new(Uuid::from_u128(9), 0, &p, |r| r != 2)
        .min_isr(Some(2))
        .target_isr(vec![])
        .unclean_shutdown(vec![2])
        .build()
        .unwrap();
    assert_eq!(fields(&c), (1, Some(vec![1]), Some(vec![]), Some(vec![])), "2 left, 1 (acceptable) elected");
    let c = PartitionChange::new(Uuid::from_u128(9), 0, &p, |_| false)
        .min_isr(Some(2))
        .target_isr(vec![])
        .unclean_shutdown(vec![2])
        .build()
        .unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, None, Some(vec![1]), None));
    // An ISR member: out of the ISR, not into the ELR.
    let p = partition(&[1, 2, 3], &[1, 2], 1, &[], &[]);
    let c = PartitionChange::new(Uuid::from_u128(9), 0, &p, |r| r != 2)
        .min_isr(Some(2))
        .target_isr(vec![1])
        .unclean_shutdown(vec![2])
        .build()
        .unwrap();
    assert_eq!(fields(&c), (NO_LEADER_CHANGE, Some(vec![1]), None, None));
}

#[test]
fn the_last_known_leader_is_elected_uncleanly_only_when_acceptable() {
    let p = partition(&[1, 2, 3], &[], NO_LEADER, &[], &[1]);
    let c = change(&p, &[], 2, Election::Default, |r| r == 1).unwrap();
    assert_eq!(fields(&c), (1, Some(vec![1]), None, Some(vec![])));
    assert_eq!(c.leader_recovery_state, RECOVERING);
    // KAFKA-19522: a fenced last known leader is not elected.
    assert_eq!(change(&p, &[], 2, Election::Default, |r| r != 1), None);
    // More than one last known ELR member (an earlier mode): no last known leader.
    let p = partition(&[1, 2, 3], &[], NO_LEADER, &[], &[1, 2]);
    assert_eq!(change(&p, &[], 2, Election::Default, |_| true), None);
}

#[test]
fn an_unclean_election_empties_the_elr() {
    let p = partition(&[1, 2, 3], &[], NO_LEADER, &[1], &[]);
    let c = change(&p, &[], 3, Election::Unclean, |r| r == 3).unwrap();
    assert_eq!(fields(&c), (3, Some(vec![3]), Some(vec![]), None));
    assert_eq!(c.leader_recovery_state, RECOVERING);
}

#[test]
fn effective_min_isr_is_the_topic_then_the_cluster_value_capped_at_the_replication_factor() {
    let mut c = Cluster::new();
    let t = c.add_topic("t", 1, &[&[1, 2, 3]]);
    let p = c.partition(t, 0);
    assert_eq!(effective_min_isr(&c.image, "t", &p), 1, "Kafka's default");
    c.set_config(BROKER_RESOURCE, "", "min.insync.replicas", "2");
    assert_eq!(effective_min_isr(&c.image, "t", &p), 2);
    c.set_config(TOPIC_RESOURCE, "t", "min.insync.replicas", "5");
    assert_eq!(effective_min_isr(&c.image, "t", &p), 3, "at most the replication factor");
    assert!(!enabled(&c.image));
    assert_eq!(min_isr_if_enabled(&c.image, "t", &p), None);
    c.apply(&[elr_feature(1)]);
    assert_eq!(min_isr_if_enabled(&c.image, "t", &p), Some(3));
}

#[test]
fn bootstrap_turns_elr_on_with_the_cluster_min_isr() {
    let levels = crate::controller::bootstrap::effective_levels(&[]).unwrap();
    let records = crate::controller::bootstrap::records(&levels, 2, Vec::new());
    let mut c = Cluster::new();
    c.apply(&records);
    assert!(enabled(&c.image));
    let cluster = &c.image.configs[&(BROKER_RESOURCE, String::new())];
    assert_eq!(cluster.get("min.insync.replicas").map(String::as_str), Some("2"));
}

fn elr_feature(level: i16) -> MetadataRecord {
    MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: ELR_FEATURE.to_string(),
        feature_level: level,
        ..Default::default()
    })
}

const CLUSTER: &str = "ketch-cluster";

fn registration(id: i32, incarnation: u128, previous_epoch: i64) -> BrokerRegistrationRequest {
    let listener = Listener::default()
        .with_name(StrBytes::from_static_str("PLAINTEXT"))
        .with_host(StrBytes::from_string(format!("b{id}")))
        .with_port(9092)
        .with_security_protocol(0);
    let feature = |name: &'static str, max: i16| {
        Feature::default()
            .with_name(StrBytes::from_static_str(name))
            .with_min_supported_version(0)
            .with_max_supported_version(max)
    };
    BrokerRegistrationRequest::default()
        .with_broker_id(BrokerId(id))
        .with_cluster_id(StrBytes::from_static_str(CLUSTER))
        .with_incarnation_id(Uuid::from_u128(incarnation))
        .with_listeners(vec![listener])
        .with_features(vec![feature("metadata.version", METADATA_VERSION), feature(ELR_FEATURE, 1)])
        .with_log_dirs(vec![Uuid::from_u128(1000 * id as u128 + 7)])
        .with_previous_broker_epoch(previous_epoch)
}

/// Three brokers registered through `BrokerSessions`, unfenced, ELR on with a cluster min ISR
/// of 2, topic `t` with one partition on all three.
struct Env {
    c: Cluster,
    s: BrokerSessions,
    t: Uuid,
    epochs: [i64; 4],
}

impl Env {
    fn new() -> Env {
        let mut c = Cluster::new();
        c.apply(&[
            elr_feature(1),
            MetadataRecord::Config(ConfigRecord {
                resource_type: BROKER_RESOURCE,
                resource_name: String::new(),
                name: "min.insync.replicas".to_string(),
                value: Some("2".to_string()),
                ..Default::default()
            }),
        ]);
        let s = BrokerSessions::new(config());
        let mut env = Env { c, s, t: Uuid::nil(), epochs: [-1; 4] };
        for id in 1..=3 {
            env.register(id, 1, -1);
            env.c.set_broker(id, -1, 0);
        }
        env.t = env.c.add_topic("t", 1, &[&[1, 2, 3]]);
        env
    }

    fn register(&mut self, id: i32, incarnation: u128, previous_epoch: i64) {
        let request = registration(id, incarnation, previous_epoch);
        let (records, epoch) = self.s.register(&self.c.image, CLUSTER, &request, self.c.next_offset, 0).unwrap();
        self.c.apply(&records);
        self.epochs[id as usize] = epoch;
    }

    fn fence(&mut self, id: i32) {
        let records = self.s.fence_records(&self.c.image, id);
        self.c.apply(&records);
    }

    fn unfence(&mut self, id: i32) {
        let records = leader_and_isr_updates(&self.c.image, &config(), BrokerEvent::Joins(id));
        self.c.apply(&records);
        self.c.set_broker(id, -1, 0);
    }

    /// (leader, ISR, ELR, last known ELR) of the partition.
    fn state(&self) -> (i32, Vec<i32>, Vec<i32>, Vec<i32>) {
        let p = self.c.partition(self.t, 0);
        (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr)
    }
}

#[test]
fn fenced_brokers_go_to_the_elr_and_a_cleanly_restarted_one_is_elected() {
    let mut env = Env::new();
    env.fence(3);
    assert_eq!(env.state(), (1, vec![1, 2], vec![], vec![]), "at min ISR: no ELR");
    env.fence(2);
    assert_eq!(env.state(), (1, vec![1], vec![2], vec![]), "3 left at min ISR: it may lack committed data");
    env.fence(1);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![1, 2], vec![1]), "ISR empty, 1 the last known leader");
    // 3 (not eligible) comes back: it may not lead.
    env.register(3, 2, env.epochs[3]);
    env.unfence(3);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![1, 2], vec![1]));
    // 2 restarts after a clean shutdown (it gives the epoch it was registered with): it stays
    // in the ELR, and leads once unfenced.
    env.register(2, 2, env.epochs[2]);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![1, 2], vec![1]));
    env.unfence(2);
    assert_eq!(env.state(), (2, vec![2], vec![1], vec![]));
    // The leader adds 3 back to the ISR: min ISR reached, the ELR is cleared.
    let p = env.c.partition(env.t, 0);
    let expand = PartitionChange::new(env.t, 0, &p, |_| true).with_elr(&env.c.image, "t").target_isr(vec![2, 3]);
    env.c.apply(&[MetadataRecord::PartitionChange(expand.build().unwrap())]);
    assert_eq!(env.state(), (2, vec![2, 3], vec![], vec![]));
}

#[test]
fn an_uncleanly_restarted_broker_leaves_the_elr() {
    let mut env = Env::new();
    for id in [3, 2, 1] {
        env.fence(id);
    }
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![1, 2], vec![1]));
    // 2 crashed: it registers without its previous epoch and leaves the ELR.
    env.register(2, 2, -1);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![1], vec![1]));
    env.unfence(2);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![1], vec![1]), "2 may not lead: it may have lost data");
    // 1 restarts cleanly and leads.
    env.register(1, 2, env.epochs[1]);
    env.unfence(1);
    assert_eq!(env.state(), (1, vec![1], vec![], vec![]));
}

#[test]
fn with_the_elr_emptied_the_last_known_leader_leads_again_uncleanly() {
    let mut env = Env::new();
    for id in [3, 2, 1] {
        env.fence(id);
    }
    env.register(2, 2, -1);
    env.register(1, 2, -1);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![], vec![1]));
    env.unfence(2);
    assert_eq!(env.state(), (NO_LEADER, vec![], vec![], vec![1]), "only the last known leader may lead");
    env.unfence(1);
    assert_eq!(env.state(), (1, vec![1], vec![], vec![]));
    assert_eq!(env.c.partition(env.t, 0).leader_recovery_state, RECOVERING);
}

#[test]
fn without_elr_a_restart_leaves_the_isr_only() {
    let mut env = Env::new();
    env.c.apply(&[elr_feature(0)]);
    env.register(2, 2, -1);
    assert_eq!(env.state(), (1, vec![1, 3], vec![], vec![]));
}
