//! ListOffsets rules on a replica (Kafka's `fetchOffsetForTimestamp`), without a broker.

use super::*;

const NOT_AVAILABLE: i16 = 78; // OFFSET_NOT_AVAILABLE
const INVALID_REQUEST: i16 = 42;

/// A leader at epoch 3 (started at offset 40) of a log [10, 60) with HW 50, LSO 45; epochs
/// 1 from 10, 2 from 25, 3 from 40.
fn view(epochs: &[(i32, i64)]) -> OffsetView<'_> {
    OffsetView {
        log_start_offset: 10,
        log_end_offset: 60,
        high_watermark: 50,
        last_stable_offset: 45,
        epochs,
        leader_epoch: 3,
        epoch_start_offset: Some(40),
    }
}

const EPOCHS: [(i32, i64); 3] = [(1, 10), (2, 25), (3, 40)];

fn no_lookup(_: i64) -> Result<Option<(i64, i64)>, i16> {
    panic!("no log lookup expected")
}

fn at(offset: i64) -> impl FnOnce(i64) -> Result<Option<(i64, i64)>, i16> {
    move |_| Ok(Some((offset, 1_000 + offset)))
}

#[test]
fn latest_is_the_last_fetchable_offset_at_the_current_epoch() {
    let v = view(&EPOCHS);
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, LATEST, no_lookup), Ok(Some((50, -1, 3))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadCommitted, LATEST, no_lookup), Ok(Some((45, -1, 3))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::Replica, LATEST, no_lookup), Ok(Some((60, -1, 3))));
}

#[test]
fn a_lookup_at_or_beyond_the_last_fetchable_offset_finds_nothing() {
    let v = view(&EPOCHS);
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 5, at(49)), Ok(Some((49, 1_049, 3))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 5, at(50)), Ok(None));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadCommitted, 5, at(45)), Ok(None));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, MAX_TIMESTAMP, at(55)), Ok(None));
    // A replica reads up to the log end.
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::Replica, MAX_TIMESTAMP, at(55)), Ok(Some((55, 1_055, 3))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 5, |_| Ok(None)), Ok(None));
}

#[test]
fn a_found_record_carries_the_epoch_it_was_written_at() {
    let v = view(&EPOCHS);
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 0, at(10)), Ok(Some((10, 1_010, 1))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 0, at(24)), Ok(Some((24, 1_024, 1))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 0, at(25)), Ok(Some((25, 1_025, 2))));
    assert_eq!(
        fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, MAX_TIMESTAMP, at(41)),
        Ok(Some((41, 1_041, 3)))
    );
}

#[test]
fn earliest_is_the_log_start_at_its_epoch() {
    let v = view(&EPOCHS);
    for earliest in [EARLIEST, EARLIEST_LOCAL] {
        assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, earliest, no_lookup), Ok(Some((10, -1, 1))));
    }
    // Retention moved the log start into epoch 2.
    let v = OffsetView { log_start_offset: 30, ..view(&EPOCHS) };
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadCommitted, EARLIEST, no_lookup), Ok(Some((30, -1, 2))));
    // An empty cache: the log is at the leader's epoch from its start.
    let v = view(&[]);
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, EARLIEST, no_lookup), Ok(Some((10, -1, 3))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, EARLIEST_PENDING_UPLOAD, no_lookup), Ok(None));
}

#[test]
fn a_leader_whose_high_watermark_lags_its_epoch_start_answers_offset_not_available() {
    // Elected at offset 55 (its log end then), high watermark still 50.
    let v = OffsetView { epoch_start_offset: Some(55), ..view(&EPOCHS) };
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, LATEST, no_lookup), Err(NOT_AVAILABLE));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadCommitted, LATEST_TIERED, no_lookup), Err(NOT_AVAILABLE));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 7, at(52)), Err(NOT_AVAILABLE));
    // Below the last fetchable offset, and EARLIEST, are still answered.
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 7, at(12)), Ok(Some((12, 1_012, 1))));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, EARLIEST, no_lookup), Ok(Some((10, -1, 1))));
    // A replica's request is not a client's: no error.
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::Replica, LATEST, no_lookup), Ok(Some((60, -1, 3))));
    // A single node (no epoch start) never lags.
    let v = OffsetView { epoch_start_offset: None, high_watermark: 10, ..view(&EPOCHS) };
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, LATEST, no_lookup), Ok(Some((10, -1, 3))));
}

#[test]
fn lookup_errors_and_bad_timestamps() {
    let v = view(&EPOCHS);
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, 0, |_| Err(56)), Err(56));
    assert_eq!(fetch_offset_for_timestamp(&v, Reader::ReadUncommitted, -7, no_lookup), Err(INVALID_REQUEST));
}

#[test]
fn readers_from_the_request() {
    assert_eq!(Reader::of(-1, 0), Reader::ReadUncommitted);
    assert_eq!(Reader::of(-1, 1), Reader::ReadCommitted);
    assert_eq!(Reader::of(-2, 1), Reader::Replica);
    assert_eq!(Reader::of(3, 0), Reader::Replica);
}

#[test]
fn epoch_for_offset_is_the_largest_epoch_started_at_or_before() {
    assert_eq!(epoch_for_offset(&EPOCHS, 9), None);
    assert_eq!(epoch_for_offset(&EPOCHS, 10), Some(1));
    assert_eq!(epoch_for_offset(&EPOCHS, 39), Some(2));
    assert_eq!(epoch_for_offset(&EPOCHS, 1_000), Some(3));
    assert_eq!(epoch_for_offset(&[], 0), None);
}
