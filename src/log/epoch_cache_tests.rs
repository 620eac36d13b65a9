//! The leader-epoch cache: assignment, truncation at both ends, lookups, the checkpoint file.

use super::*;

fn cache_with(dir: &Path, entries: &[(i32, i64)]) -> EpochCache {
    let mut cache = EpochCache::empty(dir);
    for &(epoch, start) in entries {
        cache.assign(epoch, start).unwrap();
    }
    cache
}

#[test]
fn only_a_newer_epoch_is_assigned_and_the_file_follows() {
    let dir = tempfile::tempdir().unwrap();
    let mut cache = cache_with(dir.path(), &[(1, 0), (1, 5), (3, 10), (2, 12)]);
    assert_eq!(cache.entries(), &[(1, 0), (3, 10)]);
    // An older epoch that never kept a batch at this offset is replaced (Kafka's
    // non-monotonic entries).
    cache.assign(4, 10).unwrap();
    assert_eq!(cache.entries(), &[(1, 0), (4, 10)]);
    let text = std::fs::read_to_string(dir.path().join(EPOCH_CHECKPOINT)).unwrap();
    assert_eq!(text, "0\n2\n1 0\n4 10\n");
    assert_eq!(EpochCache::load(dir.path(), 11).unwrap().entries(), &[(1, 0), (4, 10)]);
}

#[test]
fn loading_drops_entries_a_crash_cut_off_and_out_of_order_lines() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(EPOCH_CHECKPOINT), "0\n5\n1 0\n3 20\n2 25\n5 40\nbad line\n").unwrap();
    assert_eq!(EpochCache::load(dir.path(), 40).unwrap().entries(), &[(1, 0), (3, 20)]);
    assert_eq!(EpochCache::load(dir.path(), 0).unwrap().entries(), &[]);
    let missing = tempfile::tempdir().unwrap();
    assert_eq!(EpochCache::load(missing.path(), 10).unwrap().latest(), None);
}

#[test]
fn truncation_from_either_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut cache = cache_with(dir.path(), &[(1, 0), (2, 10), (3, 20)]);
    cache.truncate_from_end(20).unwrap();
    assert_eq!(cache.entries(), &[(1, 0), (2, 10)]);
    cache.truncate_from_start(15).unwrap();
    assert_eq!(cache.entries(), &[(2, 15)], "the epoch in force at the new start, from there");
    assert_eq!(EpochCache::load(dir.path(), 30).unwrap().entries(), &[(2, 15)]);
}

#[test]
fn end_offsets_for_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_with(dir.path(), &[(1, 5), (3, 20)]);
    assert_eq!(cache.end_offset_for(0, 5, 30), (-1, -1), "older than every epoch");
    assert_eq!(cache.end_offset_for(1, 5, 30), (1, 20));
    assert_eq!(cache.end_offset_for(2, 5, 30), (1, 20), "the largest epoch at or below");
    assert_eq!(cache.end_offset_for(3, 5, 30), (3, 30), "the latest ends at the log end");
    assert_eq!(cache.end_offset_for(4, 5, 30), (-1, -1), "newer than the latest");
    let empty = EpochCache::empty(dir.path());
    assert_eq!(empty.end_offset_for(0, 7, 9), (0, 9), "a single node's implicit epoch 0");
}
