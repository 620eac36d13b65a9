//! The leader-epoch checkpoint (`log/epoch_cache.rs`): a new epoch's entry is written
//! on the append path without an fsync and made durable by the partition's next flush; recovery
//! after an unclean shutdown restores entries the checkpoint lacks from the active segment's
//! batches, and rebuilds a checkpoint that does not parse from every segment.

mod common;

use ketch::config::{BrokerConfig, Properties, TopicConfig};
use ketch::log::batch;
use ketch::log::PartitionLog;

const NOW: i64 = 1_700_000_000_000;
const CHECKPOINT: &str = "leader-epoch-checkpoint";

fn defaults() -> TopicConfig {
    BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults
}

fn append_at_epoch(log: &mut PartitionLog, value: &str, epoch: i32) -> i64 {
    let (bytes, summary) = batch::validate_produce(common::batch_at(value, NOW).to_vec(), log.config(), NOW).unwrap();
    log.append(bytes, &summary, epoch, NOW).unwrap().base_offset
}

fn checkpoint(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join(CHECKPOINT)).unwrap()
}

/// What `flush_work` covers: (files, directory included).
fn flush_covers(log: &PartitionLog) -> (usize, bool) {
    let work = log.flush_work().unwrap();
    (work.files.len(), work.includes_dir())
}

#[test]
fn a_new_epoch_is_written_at_once_and_synced_by_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    let work = log.flush_work().unwrap();
    log.mark_flushed(&work, NOW);
    append_at_epoch(&mut log, "a", 1);
    assert_eq!(checkpoint(dir.path()), "0\n1\n1 0\n", "on disk (page cache) before any flush");
    // The flush covers the segment, the checkpoint and the directory (for the rename).
    assert_eq!(flush_covers(&log), (3, true));
    let work = log.flush_work().unwrap();
    for file in &work.files {
        file.sync_data().unwrap();
    }
    log.mark_flushed(&work, NOW);
    // Same epoch: only the segment.
    append_at_epoch(&mut log, "b", 1);
    assert_eq!(flush_covers(&log), (1, false));
    let work = log.flush_work().unwrap();
    log.mark_flushed(&work, NOW);
    append_at_epoch(&mut log, "c", 3);
    assert_eq!(checkpoint(dir.path()), "0\n2\n1 0\n3 2\n");
    assert_eq!(flush_covers(&log), (3, true));
    assert_eq!(log.epochs(), &[(1, 0), (3, 2)]);
}

#[test]
fn recovery_restores_the_epochs_a_lost_checkpoint_rewrite_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    append_at_epoch(&mut log, "a", 1);
    append_at_epoch(&mut log, "b", 1);
    append_at_epoch(&mut log, "c", 2);
    append_at_epoch(&mut log, "d", 5);
    drop(log); // no close: an unclean stop
               // A power loss kept the data but not the last two rewrites of the checkpoint.
    std::fs::write(dir.path().join(CHECKPOINT), "0\n1\n1 0\n").unwrap();
    let log = PartitionLog::open(dir.path(), defaults(), NOW).unwrap();
    assert_eq!(log.epochs(), &[(1, 0), (2, 2), (5, 3)]);
    assert_eq!(checkpoint(dir.path()), "0\n3\n1 0\n2 2\n5 3\n", "written back");
    drop(log);
    // After a clean shutdown the checkpoint is trusted as it is (no re-read of the log).
    std::fs::write(dir.path().join(CHECKPOINT), "0\n1\n1 0\n").unwrap();
    let log = PartitionLog::open_with(dir.path(), defaults(), NOW, false).unwrap();
    assert_eq!(log.epochs(), &[(1, 0)]);
}

#[test]
fn a_checkpoint_that_does_not_parse_is_rebuilt_from_every_segment() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults();
    config.segment_bytes = 150; // about two batches per segment
    let mut log = PartitionLog::open(dir.path(), config.clone(), NOW).unwrap();
    for (i, epoch) in [1, 1, 2, 2, 2, 4, 4].into_iter().enumerate() {
        append_at_epoch(&mut log, &format!("v{i}"), epoch);
    }
    let segments = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".log"))
        .count();
    assert!(segments > 2, "several segments: {segments}");
    assert_eq!(log.epochs(), &[(1, 0), (2, 2), (4, 5)]);
    drop(log);
    for broken in ["", "0\n3\n1 0\n2 2\n", "0\n2\n1 0\n2 x\n"] {
        std::fs::write(dir.path().join(CHECKPOINT), broken).unwrap();
        let log = PartitionLog::open(dir.path(), config.clone(), NOW).unwrap();
        assert_eq!(log.epochs(), &[(1, 0), (2, 2), (4, 5)], "from {broken:?}");
        assert_eq!(checkpoint(dir.path()), "0\n3\n1 0\n2 2\n4 5\n");
    }
}
