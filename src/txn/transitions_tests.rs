//! The coordinator's rules against Kafka 4.1's answers (measured; see the transaction protocol
//! 2 notes in `compat-tests/test_txn_v2.py`).

use super::*;

fn meta(state: TxnState, producer_id: i64, epoch: i16) -> TxnMeta {
    TxnMeta { state, epoch, ..TxnMeta::new(producer_id, 60_000, 0) }
}

fn ended(m: &TxnMeta, commit: bool, next_producer_id: i64) -> TxnMeta {
    complete(&prepare_end(m, commit, true, TV_2, next_producer_id, 1), 2)
}

#[test]
fn tv2_end_txn_bumps_and_answers_retries_with_the_new_epoch() {
    let ongoing = TxnMeta { partitions: [("t".to_string(), 0)].into_iter().collect(), ..meta(TxnState::Ongoing, 9, 0) };
    assert_eq!(end_txn_v2(&ongoing, 9, 0, true), Ok(EndTxnPlan::Prepare { empty: false }));
    let committed = ended(&ongoing, true, -1);
    assert_eq!((committed.state, committed.producer_id, committed.epoch), (TxnState::CompleteCommit, 9, 1));
    assert!(committed.partitions.is_empty());
    // The same EndTxn again (its answer was lost): no error, the new epoch.
    assert_eq!(end_txn_v2(&committed, 9, 0, true), Ok(EndTxnPlan::Done { producer_id: 9, epoch: 1 }));
    // A retried commit cannot become an abort.
    assert_eq!(end_txn_v2(&committed, 9, 0, false), Err(ResponseError::InvalidTxnState));
    // An abort at the new epoch with nothing open: an empty abort, which bumps.
    assert_eq!(end_txn_v2(&committed, 9, 1, false), Ok(EndTxnPlan::Prepare { empty: true }));
    let aborted = ended(&committed, false, -1);
    assert_eq!((aborted.state, aborted.epoch), (TxnState::CompleteAbort, 2));
    // A stale epoch two behind is fenced.
    assert_eq!(end_txn_v2(&aborted, 9, 0, true), Err(ResponseError::ProducerFenced));
    assert_eq!(end_txn_v2(&aborted, 8, 2, true), Err(ResponseError::InvalidProducerIdMapping));
    // A commit of nothing is refused.
    assert_eq!(end_txn_v2(&aborted, 9, 2, true), Err(ResponseError::InvalidTxnState));
    assert_eq!(end_txn_v2(&meta(TxnState::Empty, 9, 0), 9, 0, true), Err(ResponseError::InvalidTxnState));
}

#[test]
fn tv2_end_txn_rotates_an_exhausted_producer_id() {
    let last = meta(TxnState::Empty, 18, EXHAUSTED_EPOCH);
    assert_eq!(end_txn_v2(&last, 18, EXHAUSTED_EPOCH, false), Ok(EndTxnPlan::Prepare { empty: true }));
    let prepared = prepare_end(&last, false, true, TV_2, 19, 1);
    assert_eq!((prepared.producer_id, prepared.epoch), (18, i16::MAX), "markers carry the old id");
    let rotated = complete(&prepared, 2);
    assert_eq!((rotated.producer_id, rotated.epoch, rotated.prev_producer_id), (19, 0, 18));
    // A retry with the old id and epoch gets the new ones.
    assert_eq!(end_txn_v2(&rotated, 18, EXHAUSTED_EPOCH, false), Ok(EndTxnPlan::Done { producer_id: 19, epoch: 0 }));
    assert_eq!(init_producer_id(&rotated, Some((18, EXHAUSTED_EPOCH))), Ok(InitPlan::Current));
}

#[test]
fn tv1_end_txn_keeps_the_epoch() {
    let ongoing = meta(TxnState::Ongoing, 9, 3);
    assert_eq!(end_txn_v1(&ongoing, 9, 3, true), Ok(EndTxnPlan::Prepare { empty: false }));
    let committed = complete(&prepare_end(&ongoing, true, false, TV_0, -1, 1), 2);
    assert_eq!(committed.epoch, 3);
    assert_eq!(end_txn_v1(&committed, 9, 3, true), Ok(EndTxnPlan::Done { producer_id: 9, epoch: 3 }));
    assert_eq!(end_txn_v1(&committed, 9, 3, false), Err(ResponseError::InvalidTxnState));
    assert_eq!(end_txn_v1(&meta(TxnState::Empty, 9, 3), 9, 3, false), Err(ResponseError::InvalidTxnState));
    assert_eq!(end_txn_v1(&committed, 9, 2, true), Err(ResponseError::ProducerFenced));
}

#[test]
fn init_producer_id_after_a_lost_tv2_end_txn_answer_returns_the_bumped_epoch() {
    let ongoing = meta(TxnState::Ongoing, 9, 4);
    let committed = ended(&ongoing, true, -1);
    assert_eq!(init_producer_id(&committed, Some((9, 4))), Ok(InitPlan::Current));
    assert_eq!(init_producer_id(&committed, Some((9, 5))), Ok(InitPlan::Bump));
    assert_eq!(init_producer_id(&committed, Some((9, 2))), Err(ResponseError::ProducerFenced));
    assert_eq!(init_producer_id(&committed, Some((7, 5))), Err(ResponseError::ProducerFenced));
    assert_eq!(init_producer_id(&committed, None), Ok(InitPlan::Bump));
    assert_eq!(init_producer_id(&ongoing, None), Ok(InitPlan::FenceOngoing));
    let exhausted = meta(TxnState::CompleteAbort, 9, EXHAUSTED_EPOCH);
    assert_eq!(init_producer_id(&exhausted, None), Ok(InitPlan::Rotate { record_last_epoch: false }));
    assert_eq!(
        init_producer_id(&exhausted, Some((9, EXHAUSTED_EPOCH))),
        Ok(InitPlan::Rotate { record_last_epoch: true })
    );
}

#[test]
fn a_timeout_abort_fences_once_and_the_old_producer_recovers_by_aborting() {
    let ongoing = TxnMeta { partitions: [("t".to_string(), 0)].into_iter().collect(), ..meta(TxnState::Ongoing, 9, 4) };
    // The coordinator's abort: one bump, markers at epoch 5.
    let prepared = prepare_end(&ongoing, false, true, TV_2, -1, 1);
    assert_eq!((prepared.state, prepared.epoch), (TxnState::PrepareAbort, 5));
    let aborted = complete(&prepared, 2);
    assert_eq!(end_txn_v2(&aborted, 9, 4, true), Err(ResponseError::InvalidTxnState));
    assert_eq!(end_txn_v2(&aborted, 9, 4, false), Ok(EndTxnPlan::Done { producer_id: 9, epoch: 5 }));
}

#[test]
fn adding_and_verifying_partitions_follow_kafkas_order_of_checks() {
    let tp = ("t".to_string(), 0);
    let prepare = meta(TxnState::PrepareCommit, 9, 1);
    assert_eq!(add_partitions(&prepare, 8, 1, std::slice::from_ref(&tp)), Err(ResponseError::ConcurrentTransactions));
    let empty = meta(TxnState::Empty, 9, 1);
    assert_eq!(add_partitions(&empty, 8, 1, std::slice::from_ref(&tp)), Err(ResponseError::InvalidProducerIdMapping));
    assert_eq!(add_partitions(&empty, 9, 2, std::slice::from_ref(&tp)), Err(ResponseError::ProducerFenced));
    assert_eq!(add_partitions(&empty, 9, 1, std::slice::from_ref(&tp)), Ok(false));
    let ongoing = prepare_add(&empty, vec![tp.clone()], TV_2, 5);
    assert_eq!((ongoing.state, ongoing.start_ms, ongoing.client_tv), (TxnState::Ongoing, 5, TV_2));
    assert_eq!(add_partitions(&ongoing, 9, 1, std::slice::from_ref(&tp)), Ok(true));
    assert_eq!(verify(&ongoing, 9, 1, &tp), Ok(()));
    assert_eq!(verify(&ongoing, 9, 1, &("t".to_string(), 1)), Err(ResponseError::TransactionAbortable));
    assert_eq!(verify(&ongoing, 9, 0, &tp), Err(ResponseError::ProducerFenced));
}
