//! The leader's answers to observers' fetches: a replica copy built from them equals the log;
//! wrong clusters, partitions and epochs are refused; a diverged copy is told where to truncate.

use std::collections::BTreeMap;
use std::path::Path;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use uuid::Uuid;

use super::*;
use crate::metadata::records::{MetadataRecord, TopicRecord};

const CLUSTER: &str = "q1Wl2Ic1TDa8R9ch-jT5vQ";

fn topic(name: &str) -> MetadataRecord {
    MetadataRecord::Topic(TopicRecord {
        name: name.into(),
        topic_id: Uuid::from_bytes(crate::metadata::random_bytes()),
        ..Default::default()
    })
}

fn open(dir: &Path) -> MetadataLog {
    MetadataLog::open(dir, 3000, crate::log::now_ms(), |_, _| Ok(())).unwrap()
}

fn request(offset: i64, last_epoch: i32, leader_epoch: i32) -> FetchRequest {
    FetchRequest::default()
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER)))
        .with_replica_state(ReplicaState::default().with_replica_id(7.into()))
        .with_max_wait_ms(500)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default().with_topic_id(METADATA_TOPIC_ID).with_partitions(vec![
            FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(last_epoch)
                .with_current_leader_epoch(leader_epoch)
                .with_partition_max_bytes(1 << 20),
        ])])
}

fn ask(log: &MetadataLog, request: &FetchRequest, may_wait: bool) -> Answer {
    let endpoint = LeaderEndpoint { host: "127.0.0.1".into(), port: 9093 };
    answer(log, CLUSTER, &endpoint, request, may_wait, &mut BTreeMap::new(), 0)
}

fn now(answer: Answer) -> FetchResponse {
    match answer {
        Answer::Now(r) => *r,
        Answer::Wait => panic!("expected an answer now"),
    }
}

fn partition(response: &FetchResponse) -> &PartitionData {
    &response.responses[0].partitions[0]
}

#[test]
fn an_observer_fetching_from_the_start_copies_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    let written = vec![topic("a"), topic("b")];
    log.append(&written, 0).unwrap();
    log.append(&[topic("c")], 0).unwrap();
    let copy_dir = tempfile::tempdir().unwrap();
    let (mut copy, _) = MetadataLog::open_replica(copy_dir.path(), 7, 0).unwrap();
    let mut copied = Vec::new();
    for _ in 0..10 {
        if copy.end_offset() == log.end_offset() {
            break;
        }
        let response = now(ask(&log, &request(copy.end_offset(), copy.epoch(), log.epoch()), true));
        let p = partition(&response);
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, log.end_offset(), "everything appended is committed");
        assert_eq!(p.current_leader.leader_id.0, 3000);
        assert_eq!(response.node_endpoints[0].port, 9093);
        for batch in crate::log::batch::whole_batches(p.records.as_ref().unwrap()).unwrap() {
            copied.extend(copy.append_fetched(batch).unwrap().into_iter().map(|(_, r)| r));
        }
    }
    assert_eq!(copy.end_offset(), log.end_offset());
    assert_eq!(copied.len(), 3);
    assert_eq!(copied[..2], written[..]);
    assert_eq!(copy.epochs(), log.epochs());
}

#[test]
fn a_caught_up_observer_waits_then_gets_an_empty_answer() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let at_end = request(log.end_offset(), log.epoch(), log.epoch());
    assert!(matches!(ask(&log, &at_end, true), Answer::Wait));
    let response = now(ask(&log, &at_end, false));
    assert_eq!(partition(&response).error_code, 0);
    assert!(partition(&response).records.as_ref().unwrap().is_empty());
}

#[test]
fn wrong_cluster_partition_or_epoch_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    let mut other = request(0, 0, log.epoch());
    other.cluster_id = Some(StrBytes::from_static_str("AAAAAAAAAAAAAAAAAAAAAA"));
    assert_eq!(now(ask(&log, &other, true)).error_code, ResponseError::InconsistentClusterId.code());
    let mut elsewhere = request(0, 0, log.epoch());
    elsewhere.topics[0].partitions[0].partition = 1;
    assert_eq!(now(ask(&log, &elsewhere, true)).error_code, ResponseError::InvalidRequest.code());
    let stale = now(ask(&log, &request(0, 0, log.epoch() - 1), true));
    assert_eq!(partition(&stale).error_code, ResponseError::FencedLeaderEpoch.code());
    assert_eq!(partition(&stale).current_leader.leader_epoch, log.epoch(), "names the current epoch");
    let future = now(ask(&log, &request(0, 0, log.epoch() + 1), true));
    assert_eq!(partition(&future).error_code, ResponseError::UnknownLeaderEpoch.code());
    let negative = now(ask(&log, &request(-1, 0, log.epoch()), true));
    assert_eq!(partition(&negative).error_code, ResponseError::InvalidRequest.code());
}

#[test]
fn a_copy_that_went_past_an_epoch_s_end_is_told_where_it_ended() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    log.append(&[topic("a")], 0).unwrap();
    let epoch_one_end = log.end_offset();
    drop(log);
    // A restart: epoch 2 starts where epoch 1 ended.
    let mut log = open(dir.path());
    log.append(&[topic("b")], 0).unwrap();
    // The observer has epoch-1 records up to an offset the leader's epoch 1 never reached.
    let response = now(ask(&log, &request(epoch_one_end + 3, 1, log.epoch()), true));
    let d = &partition(&response).diverging_epoch;
    assert_eq!((d.epoch, d.end_offset), (1, epoch_one_end));
    assert!(partition(&response).records.as_ref().is_none_or(|r| r.is_empty()), "no records with a diverging epoch");
    // Agreeing exactly at the end of epoch 1 is fine.
    let fine = now(ask(&log, &request(epoch_one_end, 1, log.epoch()), false));
    assert_eq!(partition(&fine).diverging_epoch.epoch, -1);
    assert!(!partition(&fine).records.as_ref().unwrap().is_empty());
}

#[test]
fn an_observer_behind_the_log_start_is_told_the_newest_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path());
    crate::raft::tests::append_snapshotting_each(&mut log, vec![topic("a"), topic("b"), topic("c")]);
    let latest = log.latest_snapshot().expect("snapshots written");
    assert_eq!(latest.end_offset, log.end_offset());
    assert!(log.start_offset() > 0, "cleaned below a snapshot");
    let epoch = log.epoch();
    let got = now(ask(&log, &request(0, -1, epoch), false));
    let p = partition(&got);
    assert_eq!((p.snapshot_id.end_offset, p.snapshot_id.epoch), (latest.end_offset, latest.epoch));
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()), "no records with a snapshot id");
    // From the log start on, records as usual.
    let got = now(ask(&log, &request(log.start_offset(), epoch, epoch), false));
    assert_eq!(partition(&got).snapshot_id.end_offset, -1);
}
