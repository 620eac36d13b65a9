//! Tests of the local metadata log: what is appended is replayed in order, each start is a new
//! epoch, and a torn tail loses only the batch that was being written.

use super::*;
use crate::metadata::records::{NoOpRecord, TopicRecord};
use uuid::Uuid;

fn topic(name: &str) -> MetadataRecord {
    MetadataRecord::Topic(TopicRecord {
        name: name.into(),
        topic_id: Uuid::from_bytes(crate::metadata::random_bytes()),
        ..Default::default()
    })
}

fn open(dir: &Path) -> (MetadataLog, Vec<(i64, MetadataRecord)>) {
    let mut seen = Vec::new();
    let log = MetadataLog::open(dir, 1, crate::log::now_ms(), |offset, r| {
        seen.push((offset, r));
        Ok(())
    })
    .unwrap();
    (log, seen)
}

#[test]
fn appended_records_are_replayed_in_order_and_each_start_is_a_new_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, seen) = open(dir.path());
    assert!(seen.is_empty());
    assert_eq!(log.epoch(), 1);
    assert_eq!(log.end_offset(), 1, "the leader change control record");
    let a = topic("a");
    let b = topic("b");
    assert_eq!(log.append(&[a.clone(), b.clone()], 0).unwrap(), 2);
    assert_eq!(log.append(&[MetadataRecord::NoOp(NoOpRecord::default())], 0).unwrap(), 3);
    assert_eq!(log.append(&[], 0).unwrap(), 3, "nothing to write");
    drop(log);
    let (log, seen) = open(dir.path());
    assert_eq!(log.epoch(), 2);
    let offsets: Vec<i64> = seen.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, vec![1, 2, 3], "control records are not replayed");
    assert_eq!(seen[0].1, a);
    assert_eq!(seen[1].1, b);
    let state = std::fs::read_to_string(dir.path().join(METADATA_LOG_DIR_NAME).join(QUORUM_STATE)).unwrap();
    assert!(state.contains("\"leaderEpoch\":2"), "{state}");
}

#[test]
fn a_torn_tail_loses_only_the_batch_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path());
    log.append(&[topic("kept")], 0).unwrap();
    log.append(&[topic("torn1"), topic("torn2")], 0).unwrap();
    drop(log);
    let segment = dir.path().join(METADATA_LOG_DIR_NAME).join("00000000000000000000.log");
    let len = std::fs::metadata(&segment).unwrap().len();
    let file = std::fs::OpenOptions::new().write(true).open(&segment).unwrap();
    file.set_len(len - 7).unwrap();
    let (_, seen) = open(dir.path());
    let names: Vec<String> = seen
        .iter()
        .map(|(_, r)| match r {
            MetadataRecord::Topic(t) => t.name.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(names, vec!["kept".to_string()]);
}

#[test]
fn a_record_that_cannot_be_applied_stops_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path());
    log.append(&[topic("a")], 0).unwrap();
    drop(log);
    let err = MetadataLog::open(dir.path(), 1, 0, |_, _| anyhow::bail!("refused")).unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
}

/// With a snapshot after every append and no log kept below the newest: appends `records` one
/// at a time, each followed by a snapshot of all of them so far. Returns them.
pub(super) fn append_snapshotting_each(log: &mut MetadataLog, records: Vec<MetadataRecord>) -> Vec<MetadataRecord> {
    log.set_snapshot_policy(voter::SnapshotPolicy {
        max_bytes_between: 1,
        max_interval_ms: 0,
        retention_bytes: 0,
        retention_ms: -1,
    });
    let mut state = Vec::new();
    for record in records {
        log.append(std::slice::from_ref(&record), 0).unwrap();
        state.push(record);
        log.maybe_snapshot(|| Some(state.clone()), 0).unwrap();
    }
    state
}

#[test]
fn the_only_voter_snapshots_cleans_and_reopens_from_its_newest_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path());
    let state = append_snapshotting_each(&mut log, vec![topic("a"), topic("b"), topic("c")]);
    // Inside a metadata transaction (no settled state): no snapshot.
    let d = topic("d");
    log.append(std::slice::from_ref(&d), 0).unwrap();
    log.maybe_snapshot(|| None, 0).unwrap();
    let snapshot_end = log.latest_snapshot().unwrap().end_offset;
    assert_eq!(snapshot_end, log.end_offset() - 1);
    let dir_path = dir.path().join(METADATA_LOG_DIR_NAME);
    assert_eq!(snapshot::ids(&dir_path).unwrap().len(), 1, "older snapshots cleaned: {:?}", snapshot::ids(&dir_path));
    assert_eq!(log.log.log_start_offset(), snapshot_end, "the log starts at the newest snapshot");
    drop(log);

    let (log, seen) = open(dir.path());
    let mut want: Vec<(i64, MetadataRecord)> = state.iter().map(|r| (snapshot_end - 1, r.clone())).collect();
    want.push((snapshot_end, d));
    assert_eq!(seen, want, "the snapshot's records, then the log after it");
    assert_eq!(log.latest_snapshot().map(|s| s.end_offset), Some(snapshot_end));
}
