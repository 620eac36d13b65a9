//! The partition side of transaction verification against a real partition log: a
//! verification's guard must still be current when its batch is appended (Kafka 4.1's
//! `VerificationGuard`), so a marker landing between the coordinator's answer and the append
//! refuses the write instead of opening a transaction the coordinator does not know.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::{check_at_append, start_verification};
use crate::config::{BrokerConfig, Properties};
use crate::error::LogError;
use crate::log::verification::VerificationGuard;
use crate::log::{batch, PartitionLog};

const NOW: i64 = 1_700_000_000_000;
const PID: i64 = 7;

fn open_log(dir: &tempfile::TempDir) -> PartitionLog {
    let config = BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults;
    PartitionLog::open(&dir.path().join("t-0"), config, NOW).unwrap()
}

/// One transactional record of `PID` at `epoch` and sequence `seq`.
fn txn_batch(epoch: i16, seq: i32) -> Bytes {
    batch::one_sequenced_record_batch(Some((PID, epoch, seq)), NOW)
}

/// What Produce does with a verified batch, under the log lock: the check at append, then the
/// write. Returns the batch's offset, or the error code the producer gets.
fn append(
    log: &mut PartitionLog,
    epoch: i16,
    seq: i32,
    guard: Option<VerificationGuard>,
    version: i16,
) -> Result<i64, i16> {
    let (bytes, summary) = batch::validate_produce(txn_batch(epoch, seq), log.config(), NOW).unwrap();
    check_at_append(log, &bytes, guard, version).map_err(|(e, _)| e.code())?;
    let info = crate::replica::append_as_leader(log, bytes, &summary, NOW).map_err(|e: LogError| e.code())?;
    Ok(info.base_offset)
}

/// The partition starts a verification (the batch would open a transaction here).
fn verification(log: &mut PartitionLog, epoch: i16, seq: i32) -> VerificationGuard {
    start_verification(log, (PID, epoch, seq), NOW).unwrap().expect("no transaction is open here")
}

const INVALID_TXN_STATE: i16 = 48;

#[test]
fn a_verified_batch_is_appended_and_opens_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let guard = verification(&mut log, 0, 0);
    assert_eq!(append(&mut log, 0, 0, Some(guard), 11), Ok(0));
    assert!(log.has_open_txn(PID, 0));
    assert!(!log.txn_verification_holds(PID, guard), "the first write clears the verification");
    // The transaction is open: the next batch needs no verification (Kafka's sentinel guard).
    assert_eq!(start_verification(&mut log, (PID, 0, 1), NOW), Ok(None));
    assert_eq!(append(&mut log, 0, 1, None, 11), Ok(1));
}

/// Verified, then the coordinator aborts the transaction (a timeout, say) and writes its marker
/// here before the batch is appended: the append is refused with INVALID_TXN_STATE and nothing
/// is written, under either transaction protocol (the marker at the same epoch, TV1, or at the
/// bumped epoch, TV2, where Kafka 4.1 checks the guard before the epoch).
#[test]
fn a_marker_between_verification_and_append_refuses_the_append() {
    for (marker_epoch, version) in [(0, 11), (0, 10), (1, 12)] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = open_log(&dir);
        let guard = verification(&mut log, 0, 0);
        assert_eq!(log.append_marker(PID, marker_epoch, false, 0, 0, NOW).unwrap(), 0);
        assert_eq!(append(&mut log, 0, 0, Some(guard), version), Err(INVALID_TXN_STATE), "marker epoch {marker_epoch}");
        assert_eq!(log.log_end_offset(), 1, "only the marker is in the log");
        assert!(!log.has_open_txn(PID, 0) && log.producer_state().first_unstable_offset().is_none());
    }
}

/// A batch that found its transaction open (no verification) is refused all the same when the
/// transaction's marker lands before its append.
#[test]
fn a_batch_that_found_the_transaction_open_is_refused_after_its_marker() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let guard = verification(&mut log, 0, 0);
    assert_eq!(append(&mut log, 0, 0, Some(guard), 11), Ok(0));
    assert_eq!(start_verification(&mut log, (PID, 0, 1), NOW), Ok(None));
    assert_eq!(log.append_marker(PID, 0, true, 0, 0, NOW).unwrap(), 1);
    assert_eq!(append(&mut log, 0, 1, None, 11), Err(INVALID_TXN_STATE));
    assert_eq!(log.log_end_offset(), 2);
}

/// After a marker, a new verification gets a new guard: the stale one (of a request verified
/// before the marker) stays refused, the new one is accepted (no ABA).
#[test]
fn a_second_verification_replaces_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let first = verification(&mut log, 0, 0);
    // Another request of the producer verifying meanwhile joins the same verification.
    assert_eq!(verification(&mut log, 0, 0), first);
    assert_eq!(log.append_marker(PID, 0, false, 0, 0, NOW).unwrap(), 0);
    let second = verification(&mut log, 0, 0);
    assert_ne!(first, second);
    assert_eq!(append(&mut log, 0, 0, Some(first), 11), Err(INVALID_TXN_STATE));
    assert_eq!(append(&mut log, 0, 0, Some(second), 11), Ok(1));
    assert!(log.has_open_txn(PID, 0));
}

/// A batch with a higher sequence may not overtake a lower one still being verified (Kafka's
/// lowest sequence of the `VerificationStateEntry`): OUT_OF_ORDER_SEQUENCE_NUMBER, even for a
/// producer the partition does not know yet.
#[test]
fn a_higher_sequence_waits_for_the_lowest_one_being_verified() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let guard = verification(&mut log, 0, 1);
    assert_eq!(verification(&mut log, 0, 0), guard, "the lower sequence joins it");
    assert_eq!(append(&mut log, 0, 1, Some(guard), 11), Err(45));
    assert_eq!(append(&mut log, 0, 0, Some(guard), 11), Ok(0));
    assert_eq!(append(&mut log, 0, 1, None, 11), Ok(1), "in order once the verification is done");
}

/// A verification nobody completes expires with idle producers (`producer.id.expiration.ms`),
/// and its guard with it.
#[test]
fn an_abandoned_verification_expires() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let guard = verification(&mut log, 0, 0);
    log.expire_producers(NOW + 999, 1000);
    assert!(log.txn_verification_holds(PID, guard), "not yet expired");
    log.expire_producers(NOW + 1000, 1000);
    assert!(!log.txn_verification_holds(PID, guard));
    assert_eq!(append(&mut log, 0, 0, Some(guard), 11), Err(INVALID_TXN_STATE));
}

/// A batch from an epoch a marker already fenced is refused before any verification starts.
#[test]
fn a_fenced_epoch_starts_no_verification() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    assert_eq!(log.append_marker(PID, 1, false, 0, 0, NOW).unwrap(), 0);
    assert_eq!(start_verification(&mut log, (PID, 0, 0), NOW), Err(ResponseError::InvalidProducerEpoch));
    assert!(log.producer_state().verification(PID).is_none());
}

/// Transaction protocol 2: the first batch of an epoch in a partition must start at sequence 0.
#[test]
fn tv2_first_batch_starts_at_sequence_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    assert_eq!(log.append_marker(PID, 1, false, 0, 0, NOW).unwrap(), 0);
    let guard = verification(&mut log, 2, 3);
    assert_eq!(append(&mut log, 2, 3, Some(guard), 12), Err(45));
    let guard = verification(&mut log, 2, 0);
    assert_eq!(append(&mut log, 2, 0, Some(guard), 12), Ok(1));
}

/// A retry of a batch already in the log (same producer, epoch and sequences) is answered with
/// the original batch's offsets before any transaction check, as Kafka 4.1's
/// `UnifiedLog.analyzeAndValidateProducerState` does (the duplicate lookup comes first): even
/// when it found the transaction open (no verification) and the marker landed before its append.
#[test]
fn a_retried_batch_is_answered_with_its_offsets_after_the_marker() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let guard = verification(&mut log, 0, 0);
    assert_eq!(append(&mut log, 0, 0, Some(guard), 11), Ok(0));
    // The retry finds the transaction open here: no verification (Kafka's sentinel guard).
    assert_eq!(start_verification(&mut log, (PID, 0, 0), NOW), Ok(None));
    assert_eq!(log.append_marker(PID, 0, true, 0, 0, NOW).unwrap(), 1);
    assert_eq!(append(&mut log, 0, 0, None, 11), Ok(0), "the duplicate's offset");
    assert_eq!(log.log_end_offset(), 2, "nothing written");
    // A new batch (not a retry) in the same situation is still refused.
    assert_eq!(append(&mut log, 0, 1, None, 11), Err(INVALID_TXN_STATE));
}

/// The same with a verification whose guard a marker cleared: the retry of a written batch
/// is answered with its offsets, a batch never written is refused.
#[test]
fn a_retried_batch_with_a_stale_guard_is_answered_with_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open_log(&dir);
    let guard = verification(&mut log, 0, 0);
    assert_eq!(append(&mut log, 0, 0, Some(guard), 11), Ok(0));
    assert_eq!(log.append_marker(PID, 0, false, 0, 0, NOW).unwrap(), 1);
    // Transaction 2 (protocol 1, same epoch): a retry of transaction 1's batch verified, then
    // transaction 2's marker lands before its append.
    let stale = verification(&mut log, 0, 0);
    assert_eq!(log.append_marker(PID, 0, false, 0, 0, NOW).unwrap(), 2);
    assert_eq!(append(&mut log, 0, 0, Some(stale), 10), Ok(0), "the duplicate's offset");
    assert_eq!(append(&mut log, 0, 1, Some(stale), 10), Err(INVALID_TXN_STATE));
    assert_eq!(log.log_end_offset(), 3);
}
