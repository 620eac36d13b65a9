//! Loading an offsets partition in a cluster (`elect`, `run_load`): its groups get
//! COORDINATOR_LOAD_IN_PROGRESS meanwhile, the coordinator's lock is free while the partition
//! is read, and a load overtaken by a resignation hands nothing over.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;

use crate::config::BrokerConfig;
use crate::group::records::{Key, OffsetValue};
use crate::group::{GroupConfig, GroupCoordinator, OFFSETS_TOPIC};
use crate::log::flusher::Flusher;
use crate::log::now_ms;
use crate::metadata::TopicRegistry;

/// A group id placed on offsets partition `p` of 2.
fn group_on(coordinator: &GroupCoordinator, p: i32) -> String {
    (0..).map(|i| format!("g{i}")).find(|g| coordinator.partition_for(g) == p).expect("some name hashes there")
}

fn offset_of(coordinator: &GroupCoordinator, group: &str) -> Option<i64> {
    coordinator.lock().offsets.get(group).and_then(|o| o.get(&("t".to_string(), 0))).map(|v| v.offset)
}

#[tokio::test]
async fn a_loading_partition_answers_load_in_progress_while_the_lock_stays_free() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = crate::config::Properties::new();
    props.insert("log.dirs".into(), dir.path().display().to_string());
    props.insert("offsets.topic.num.partitions".into(), "2".into());
    let config = BrokerConfig::from_properties(props).unwrap();
    let topics = TopicRegistry::open(&config).unwrap();
    let flusher = Flusher::start();
    let writer = GroupCoordinator::new(GroupConfig::from_broker(&config));
    let (a, b) = (group_on(&writer, 0), group_on(&writer, 1));
    for (group, offset) in [(&a, 7), (&b, 9)] {
        let key = Key::Offset { group: group.clone(), topic: "t".into(), partition: 0 };
        let value = OffsetValue { offset, leader_epoch: 0, metadata: String::new(), commit_timestamp: now_ms() };
        let written = writer.append(&topics, group, vec![(key, Some(value.encode()))]).unwrap();
        writer.sync_to_disk(&flusher, written).await.unwrap();
    }
    let p0 = topics.partition(OFFSETS_TOPIC, 0).unwrap();
    let p1 = topics.partition(OFFSETS_TOPIC, 1).unwrap();

    let coordinator = Arc::new(GroupCoordinator::new(GroupConfig::from_broker(&config)));
    coordinator.lock().owned = Some(BTreeSet::new());
    assert_eq!(coordinator.check_coordinator(&b), Err(ResponseError::NotCoordinator));
    let load = coordinator.elect(&p1);
    coordinator.run_load(load);
    assert_eq!(coordinator.check_coordinator(&b), Ok(()));
    assert_eq!(offset_of(&coordinator, &b), Some(9));

    // Partition 0's read waits for its log (a slow disk): the group on it is loading, the one on
    // partition 1 is served, and the coordinator's lock is free.
    let log = p0.log();
    let load = coordinator.elect(&p0);
    assert_eq!(coordinator.check_coordinator(&a), Err(ResponseError::CoordinatorLoadInProgress));
    assert!(coordinator.is_loading());
    let loader = {
        let coordinator = coordinator.clone();
        std::thread::spawn(move || coordinator.run_load(load))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert!(coordinator.inner.try_lock().is_ok(), "the lock is not held while the partition is read");
    assert_eq!(coordinator.check_coordinator(&b), Ok(()));
    assert_eq!(coordinator.check_coordinator(&a), Err(ResponseError::CoordinatorLoadInProgress));
    assert_eq!(offset_of(&coordinator, &a), None);
    drop(log);
    loader.join().unwrap();
    assert_eq!(coordinator.check_coordinator(&a), Ok(()));
    assert!(!coordinator.is_loading());
    assert_eq!(offset_of(&coordinator, &a), Some(7));
    assert_eq!(offset_of(&coordinator, &b), Some(9), "loading one partition leaves the other's groups");

    // Resigned while loading: the load hands nothing over.
    let load = coordinator.elect(&p0);
    assert_eq!(offset_of(&coordinator, &a), None, "elect drops what was loaded before");
    coordinator.resign(0);
    coordinator.run_load(load);
    assert_eq!(coordinator.check_coordinator(&a), Err(ResponseError::NotCoordinator));
    assert_eq!(offset_of(&coordinator, &a), None);

    // Elected twice: only the second load counts.
    let first = coordinator.elect(&p0);
    let second = coordinator.elect(&p0);
    coordinator.run_load(first);
    assert_eq!(coordinator.check_coordinator(&a), Err(ResponseError::CoordinatorLoadInProgress));
    coordinator.run_load(second);
    assert_eq!(offset_of(&coordinator, &a), Some(7));
}
