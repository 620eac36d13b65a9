//! Placement: distinct replicas, racks and leaders spread, fenced brokers avoided, Kafka's refusals.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

fn broker(id: i32, rack: Option<&str>, fenced: bool) -> PlacementBroker {
    PlacementBroker { id, rack: rack.map(str::to_string), fenced }
}

fn count_leaders(placed: &[Vec<i32>]) -> BTreeMap<i32, usize> {
    let mut leaders = BTreeMap::new();
    for replicas in placed {
        *leaders.entry(replicas[0]).or_default() += 1;
    }
    leaders
}

fn assert_distinct(placed: &[Vec<i32>], replication_factor: usize) {
    for replicas in placed {
        assert_eq!(replicas.len(), replication_factor, "{replicas:?}");
        let set: BTreeSet<i32> = replicas.iter().copied().collect();
        assert_eq!(set.len(), replication_factor, "replicas are distinct: {replicas:?}");
    }
}

#[test]
fn every_partition_gets_distinct_replicas_and_leaders_rotate() {
    let brokers: Vec<_> = (1..=4).map(|id| broker(id, None, false)).collect();
    for seed in 0..20 {
        let placed = place(&brokers, 12, 3, seed).unwrap();
        assert_eq!(placed.len(), 12);
        assert_distinct(&placed, 3);
        let leaders = count_leaders(&placed);
        assert_eq!(leaders.len(), 4, "seed {seed}: every broker leads: {leaders:?}");
        assert!(leaders.values().all(|&n| n == 3), "seed {seed}: leaders even: {leaders:?}");
        // Every broker holds the same number of replicas.
        let mut replicas: BTreeMap<i32, usize> = BTreeMap::new();
        for r in placed.iter().flatten() {
            *replicas.entry(*r).or_default() += 1;
        }
        assert!(replicas.values().all(|&n| n == 9), "seed {seed}: {replicas:?}");
    }
}

#[test]
fn the_seed_decides_and_nothing_else() {
    let brokers: Vec<_> = (1..=5).map(|id| broker(id, Some(["a", "b"][id as usize % 2]), false)).collect();
    assert_eq!(place(&brokers, 10, 2, 7).unwrap(), place(&brokers, 10, 2, 7).unwrap());
    let differ = (0..10).any(|seed| place(&brokers, 10, 2, seed).unwrap() != place(&brokers, 10, 2, 7).unwrap());
    assert!(differ, "another seed gives another placement");
}

#[test]
fn racks_are_spread() {
    // Three racks of two brokers: every partition of RF 3 has one replica in each rack.
    let racks = ["r1", "r2", "r3"];
    let brokers: Vec<_> = (0..6).map(|i| broker(i + 1, Some(racks[i as usize % 3]), false)).collect();
    let rack_of = |id: i32| racks[(id - 1) as usize % 3];
    for seed in 0..20 {
        let placed = place(&brokers, 30, 3, seed).unwrap();
        assert_distinct(&placed, 3);
        for replicas in &placed {
            let used: BTreeSet<&str> = replicas.iter().map(|&r| rack_of(r)).collect();
            assert_eq!(used.len(), 3, "seed {seed}: one replica per rack: {replicas:?}");
        }
        let leaders = count_leaders(&placed);
        assert_eq!(leaders.len(), 6, "seed {seed}: {leaders:?}");
        let (min, max) = (leaders.values().min().unwrap(), leaders.values().max().unwrap());
        assert!(max - min <= 1, "seed {seed}: leaders spread: {leaders:?}");
    }
    // Two racks, RF 2: never both replicas in one rack.
    let brokers: Vec<_> = (1..=4).map(|id| broker(id, Some(["a", "b"][id as usize % 2]), false)).collect();
    for replicas in place(&brokers, 8, 2, 3).unwrap() {
        assert_ne!(replicas[0] % 2, replicas[1] % 2, "{replicas:?}");
    }
}

#[test]
fn fenced_brokers_are_only_used_when_needed_and_never_lead() {
    let brokers = vec![broker(1, None, false), broker(2, None, true), broker(3, None, false), broker(4, None, false)];
    for seed in 0..20 {
        let placed = place(&brokers, 9, 3, seed).unwrap();
        assert_distinct(&placed, 3);
        assert!(placed.iter().flatten().all(|&r| r != 2), "seed {seed}: fenced broker avoided: {placed:?}");
    }
    // RF 3 with two unfenced brokers: the fenced one fills in, never as leader.
    let brokers = vec![broker(1, None, false), broker(2, None, true), broker(3, None, false)];
    for seed in 0..20 {
        let placed = place(&brokers, 6, 3, seed).unwrap();
        assert_distinct(&placed, 3);
        assert!(placed.iter().all(|r| r[0] != 2 && r.contains(&2)), "seed {seed}: {placed:?}");
    }
}

#[test]
fn refusals_carry_kafkas_texts() {
    let brokers = vec![broker(1, None, false), broker(2, None, false)];
    assert_eq!(
        place(&brokers, 1, 3, 0).unwrap_err().0,
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached \
         because only 2 broker(s) are registered."
    );
    assert_eq!(
        place(&brokers, 1, 0, 0).unwrap_err().0,
        "Unable to replicate the partition 0 time(s): Invalid replication factor 0: the replication factor must \
         be positive."
    );
    assert!(place(&brokers, 1, -1, 0).is_err());
    let fenced = vec![broker(1, None, true)];
    assert_eq!(
        place(&fenced, 1, 1, 0).unwrap_err().0,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced."
    );
    assert!(place(&[], 1, 1, 0).is_err());
    assert_eq!(place(&brokers, 0, 2, 0).unwrap(), Vec::<Vec<i32>>::new());
}

#[test]
fn a_single_broker_takes_every_partition() {
    let placed = place(&[broker(7, Some("x"), false)], 5, 1, 42).unwrap();
    assert_eq!(placed, vec![vec![7]; 5]);
}

#[test]
fn brokers_in_controlled_shutdown_are_not_offered() {
    use crate::metadata::image::ImageBuilder;
    use crate::metadata::records::{BrokerRegistrationChangeRecord, MetadataRecord, RegisterBrokerRecord};
    let mut builder = ImageBuilder::new();
    for id in 1..=3 {
        let record = RegisterBrokerRecord {
            broker_id: id,
            broker_epoch: id as i64,
            rack: Some(format!("r{id}")),
            fenced: id == 3,
            ..Default::default()
        };
        builder.apply(id as i64, &MetadataRecord::RegisterBroker(record)).unwrap();
    }
    let change = BrokerRegistrationChangeRecord {
        broker_id: 2,
        broker_epoch: 2,
        in_controlled_shutdown: 1,
        ..Default::default()
    };
    builder.apply(4, &MetadataRecord::BrokerRegistrationChange(change)).unwrap();
    let image = builder.publish();
    assert_eq!(
        placement_brokers(&image),
        vec![broker(1, Some("r1"), false), broker(3, Some("r3"), true)],
        "broker 2 shuts down; broker 3 is offered, fenced"
    );
}
