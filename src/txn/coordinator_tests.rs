//! The coordinator's I/O: transitions serialised per transactional id, and prepared
//! transactions completed at start.

use super::*;
use crate::config::{BrokerConfig, Properties};
use crate::group::{GroupConfig, GroupCoordinator};

/// Transitions of one transactional id wait for each other; other ids do not wait.
#[tokio::test]
async fn transitions_are_serialised_per_transactional_id_only() {
    let config = TxnConfig {
        partitions: 1,
        max_timeout_ms: 900_000,
        id_expiration_ms: 604_800_000,
        replication_factor: 1,
        min_isr: 1,
        segment_bytes: 1 << 20,
    };
    let coordinator = TxnCoordinator::new(config);
    let held = coordinator.op("a").await;
    let soon = std::time::Duration::from_millis(50);
    assert!(tokio::time::timeout(soon, coordinator.op("b")).await.is_ok(), "another id goes ahead");
    assert!(tokio::time::timeout(soon, coordinator.op("a")).await.is_err(), "the same id waits");
    let waiter = {
        let second = coordinator.op("a");
        tokio::pin!(second);
        assert!(tokio::time::timeout(soon, &mut second).await.is_err(), "still held");
        assert_eq!(coordinator.ops_len(), 1, "a's lock stays while a turn is awaited ('b' is gone)");
        drop(held);
        tokio::time::timeout(soon, second).await.expect("its turn")
    };
    assert_eq!(coordinator.ops_len(), 1);
    drop(waiter);
    assert_eq!(coordinator.ops_len(), 0, "no lock outlives the last turn");
    // A wait given up (its connection closed) after the turn it waited for ended leaves nothing.
    let held = coordinator.op("c").await;
    let mut given_up = Box::pin(coordinator.op("c"));
    assert!(tokio::time::timeout(soon, &mut given_up).await.is_err());
    drop(held);
    drop(given_up);
    assert_eq!(coordinator.ops_len(), 0, "a waiter that gave up leaves no lock");
}

/// A crash between PrepareCommit and the markers: the next start writes the markers, so the
/// transaction's data becomes readable (LSO reaches the high watermark).
#[tokio::test]
async fn a_transaction_prepared_before_a_crash_is_completed_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = Properties::new();
    props.insert("log.dirs".into(), dir.path().display().to_string());
    let config = BrokerConfig::from_properties(props).unwrap();
    let topics = TopicRegistry::open(&config).unwrap();
    let topic = topics.create("t", 1, Properties::new()).unwrap();
    let partition = topic.partitions.get(0).unwrap().clone();
    let records = crate::log::batch::one_record_batch(Some((5, 0)), now_ms());
    let (bytes, summary) = crate::log::batch::validate_produce(records, &topic.config, now_ms()).unwrap();
    crate::replica::append_as_leader(&mut partition.log(), bytes, &summary, now_ms()).unwrap();
    assert_eq!(partition.log().last_stable_offset(), 0, "the open transaction holds the LSO");

    let flusher = Flusher::start();
    let groups = GroupCoordinator::new(GroupConfig::from_broker(&config));
    let producer_ids = ProducerIds::open(dir.path()).unwrap();
    let features = Features::open(dir.path(), 1).unwrap();
    let deps = Deps {
        topics: &topics,
        flusher: &flusher,
        groups: &groups,
        producer_ids: &producer_ids,
        features: &features,
        replicas: None,
        link: None,
    };
    let txn_config = TxnConfig {
        partitions: 3,
        max_timeout_ms: 900_000,
        id_expiration_ms: 604_800_000,
        replication_factor: 1,
        min_isr: 1,
        segment_bytes: 1 << 20,
    };
    let before_crash = TxnCoordinator::new(txn_config.clone());
    let prepared = TxnMeta {
        epoch: 0,
        state: TxnState::PrepareCommit,
        partitions: [("t".to_string(), 0)].into_iter().collect(),
        start_ms: now_ms(),
        ..TxnMeta::new(5, 60_000, now_ms())
    };
    before_crash.persist(&deps, "tx", &prepared).await.unwrap();

    let restarted = TxnCoordinator::new(txn_config);
    restarted.load(&deps).await.unwrap();
    assert_eq!(restarted.lock()["tx"].state, TxnState::CompleteCommit);
    let log = partition.log();
    assert_eq!(log.log_end_offset(), 2, "data plus the commit marker");
    assert_eq!(log.last_stable_offset(), log.high_watermark());
    assert!(log.aborted_txns(0, 2).is_empty());
}

/// In a cluster a `__transaction_state` partition loads off the publisher (`elect`, then
/// `run_load`): its ids get COORDINATOR_LOAD_IN_PROGRESS meanwhile (and are not sent to another
/// broker), no lock of the coordinator is held while the partition is read, the prepared
/// transactions found are returned, and a load overtaken by a resignation hands nothing over.
#[tokio::test]
async fn a_loading_partition_answers_load_in_progress_while_the_locks_stay_free() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = Properties::new();
    props.insert("log.dirs".into(), dir.path().display().to_string());
    let config = BrokerConfig::from_properties(props).unwrap();
    let topics = TopicRegistry::open(&config).unwrap();
    let flusher = Flusher::start();
    let groups = GroupCoordinator::new(GroupConfig::from_broker(&config));
    let producer_ids = ProducerIds::open(dir.path()).unwrap();
    let features = Features::open(dir.path(), 1).unwrap();
    let deps = Deps {
        topics: &topics,
        flusher: &flusher,
        groups: &groups,
        producer_ids: &producer_ids,
        features: &features,
        replicas: None,
        link: None,
    };
    let txn_config = TxnConfig {
        partitions: 1,
        max_timeout_ms: 900_000,
        id_expiration_ms: 604_800_000,
        replication_factor: 1,
        min_isr: 1,
        segment_bytes: 1 << 20,
    };
    let writer = TxnCoordinator::new(txn_config.clone());
    let prepared = TxnMeta { epoch: 0, state: TxnState::PrepareAbort, ..TxnMeta::new(5, 60_000, now_ms()) };
    writer.persist(&deps, "tx", &prepared).await.unwrap();
    let partition = topics.partition(TXN_TOPIC, 0).unwrap();

    let coordinator = Arc::new(TxnCoordinator::new(txn_config));
    *coordinator.owned() = Some(Default::default());
    assert_eq!(coordinator.check_coordinator("tx"), Err(ResponseError::NotCoordinator));
    assert!(coordinator.coordinated_elsewhere("tx"));

    // The read waits for the partition's log (a slow disk).
    let log = partition.log();
    let load = coordinator.elect(&partition, 7);
    assert_eq!(coordinator.check_coordinator("tx"), Err(ResponseError::CoordinatorLoadInProgress));
    assert!(!coordinator.coordinated_elsewhere("tx"), "a loading id is not sent to another broker");
    let loader = {
        let coordinator = coordinator.clone();
        std::thread::spawn(move || coordinator.run_load(load))
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(coordinator.txns.try_lock().is_ok(), "the ids' lock is free while the partition is read");
    assert!(coordinator.owned.try_lock().is_ok(), "so is the ownership's");
    assert_eq!(coordinator.check_coordinator("tx"), Err(ResponseError::CoordinatorLoadInProgress));
    drop(log);
    let pending = loader.join().unwrap();
    assert_eq!(pending.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ["tx"], "found prepared");
    assert_eq!(coordinator.check_coordinator("tx"), Ok(()));
    assert_eq!(coordinator.coordinator_epoch("tx"), 7, "the leader epoch it was loaded at");
    assert_eq!(coordinator.lock()["tx"].state, TxnState::PrepareAbort);

    // Resigned while loading: nothing is handed over.
    let load = coordinator.elect(&partition, 8);
    assert!(coordinator.lock().is_empty(), "elect drops what was loaded before");
    coordinator.resign(0);
    assert!(coordinator.run_load(load).is_empty());
    assert_eq!(coordinator.check_coordinator("tx"), Err(ResponseError::NotCoordinator));
    assert!(coordinator.lock().is_empty());
}
