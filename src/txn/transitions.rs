//! The transaction coordinator's decisions, as pure functions of one transactional id's
//! metadata and a request: which requests are valid, which error each invalid one gets, and
//! the metadata each transition produces. No I/O here: `coordinator.rs` persists what these
//! functions decide, so every rule can be tested on its own.
//!
//! Two transaction protocol versions are served at once, chosen per request version as Kafka
//! 4.1 does (never from the finalized `transaction.version` feature):
//! - TV1 (EndTxn v0-4, AddPartitionsToTxn v0-3, Produce v0-11, TxnOffsetCommit v0-4): the
//!   epoch changes only through InitProducerId; partitions are added explicitly.
//! - TV2 (EndTxn v5, Produce v12+, TxnOffsetCommit v5; KIP-890 part 2): every EndTxn bumps the
//!   epoch (markers are written at the bumped epoch, which fences late writes of the ended
//!   transaction), a producer whose epoch is exhausted is rotated to a new producer id, and
//!   partitions are added implicitly by the first produce.
//!
//! Invariants: epochs of one producer id only grow; an answer of "no error with the current
//! producer id and epoch" is given only to a retry of the transition that produced them.

use kafka_protocol::error::ResponseError;

use super::coordinator::TxnMeta;
use super::records::TxnState;

/// Kafka's `TransactionMetadata.isEpochExhausted`: from this epoch on the producer id rotates.
pub const EXHAUSTED_EPOCH: i16 = i16::MAX - 1;

/// Transaction protocol versions as stored in `ClientTransactionVersion`.
pub const TV_0: i16 = 0;
pub const TV_2: i16 = 2;

fn is_prepare(state: TxnState) -> bool {
    matches!(state, TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence)
}

/// What an EndTxn does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndTxnPlan {
    /// Move to PrepareCommit/PrepareAbort (then write markers and complete). `empty`: an abort
    /// of a transaction with no partitions (TV2 only), which restarts the transaction clock.
    Prepare { empty: bool },
    /// A retry of an EndTxn that already completed: answer with these (TV1 answers carry none).
    Done { producer_id: i64, epoch: i16 },
}

/// EndTxn v0-4 (Kafka's `endTransactionWithTV1`): the epoch must be the current one.
pub fn end_txn_v1(meta: &TxnMeta, producer_id: i64, epoch: i16, commit: bool) -> Result<EndTxnPlan, ResponseError> {
    if producer_id != meta.producer_id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if epoch != meta.epoch {
        return Err(ResponseError::ProducerFenced);
    }
    let done = EndTxnPlan::Done { producer_id: meta.producer_id, epoch: meta.epoch };
    match (meta.state, commit) {
        (TxnState::Ongoing, _) => Ok(EndTxnPlan::Prepare { empty: false }),
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(done),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(ResponseError::ConcurrentTransactions),
        (TxnState::PrepareEpochFence, _) => Err(ResponseError::ConcurrentTransactions),
        // Nothing to end: Kafka answers INVALID_TXN_STATE to a commit or an abort alike.
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// EndTxn v5 (Kafka 4.1's TV2 `endTransaction`, client-initiated).
pub fn end_txn_v2(meta: &TxnMeta, producer_id: i64, epoch: i16, commit: bool) -> Result<EndTxnPlan, ResponseError> {
    // A retry of an EndTxn that rotated the producer id (its epoch was exhausted).
    let retry_on_overflow = meta.prev_producer_id == producer_id && epoch == EXHAUSTED_EPOCH && meta.epoch == 0;
    // A retry of an EndTxn that bumped the epoch from `epoch`.
    let retry_on_bump = meta.epoch as i32 == epoch as i32 + 1;
    if producer_id != meta.producer_id && !retry_on_overflow {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    let valid_epoch = match meta.state {
        TxnState::Ongoing | TxnState::Empty | TxnState::Dead | TxnState::PrepareEpochFence => epoch == meta.epoch,
        TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
        TxnState::CompleteCommit | TxnState::CompleteAbort => retry_on_bump || retry_on_overflow || epoch == meta.epoch,
    };
    if !valid_epoch {
        return Err(ResponseError::ProducerFenced);
    }
    let is_retry = retry_on_bump || retry_on_overflow;
    let done = EndTxnPlan::Done { producer_id: meta.producer_id, epoch: meta.epoch };
    let empty_abort = EndTxnPlan::Prepare { empty: true };
    match (meta.state, commit) {
        (TxnState::Ongoing, _) => Ok(EndTxnPlan::Prepare { empty: false }),
        (TxnState::Empty, true) => Err(ResponseError::InvalidTxnState),
        (TxnState::Empty, false) => Ok(empty_abort),
        (TxnState::CompleteCommit, true) if is_retry => Ok(done),
        (TxnState::CompleteCommit, true) => Err(ResponseError::InvalidTxnState),
        (TxnState::CompleteCommit, false) if is_retry => Err(ResponseError::InvalidTxnState),
        (TxnState::CompleteCommit, false) => Ok(empty_abort),
        (TxnState::CompleteAbort, true) => Err(ResponseError::InvalidTxnState),
        (TxnState::CompleteAbort, false) if is_retry => Ok(done),
        (TxnState::CompleteAbort, false) => Ok(empty_abort),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(ResponseError::ConcurrentTransactions),
        (TxnState::PrepareCommit, false) | (TxnState::PrepareAbort, true) => Err(ResponseError::InvalidTxnState),
        (TxnState::Dead | TxnState::PrepareEpochFence, _) => Err(ResponseError::InvalidTxnState),
    }
}

/// The Prepare transition of an EndTxn or of a coordinator-initiated abort. `bump`: TV2 bumps
/// the epoch (an exhausted one moves to `EXHAUSTED_EPOCH + 1` and `next_producer_id` takes over
/// at completion); TV1 and a fence that already bumped keep it.
pub fn prepare_end(meta: &TxnMeta, commit: bool, bump: bool, tv: i16, next_producer_id: i64, now_ms: i64) -> TxnMeta {
    let mut next = meta.clone();
    next.prev_producer_id = meta.producer_id;
    next.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
    if bump {
        debug_assert!(meta.epoch < i16::MAX, "an epoch at i16::MAX is rotated before it is bumped");
        next.last_epoch = meta.epoch;
        next.epoch = meta.epoch + 1;
        next.next_producer_id = next_producer_id;
    }
    if meta.state != TxnState::Ongoing {
        // An empty abort (TV2) starts and ends a transaction of its own.
        next.start_ms = now_ms;
    }
    next.client_tv = tv;
    next.last_update_ms = now_ms;
    next
}

/// The Complete transition once every marker is durable: a rotated producer id starts at
/// epoch 0.
pub fn complete(meta: &TxnMeta, now_ms: i64) -> TxnMeta {
    debug_assert!(matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort));
    let mut next = meta.clone();
    next.prev_producer_id = meta.producer_id;
    next.state = if meta.state == TxnState::PrepareCommit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
    if meta.next_producer_id >= 0 {
        next.producer_id = meta.next_producer_id;
        next.epoch = 0;
    }
    next.next_producer_id = -1;
    next.partitions.clear();
    next.last_update_ms = now_ms;
    next
}

/// What an InitProducerId does for an existing transactional id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitPlan {
    /// Abort the open transaction (fencing its producer), then decide again.
    FenceOngoing,
    /// Same producer id, epoch + 1.
    Bump,
    /// A new producer id at epoch 0 (the epoch is exhausted). `record_last_epoch`: the
    /// request named its producer, whose retry must then get the same answer.
    Rotate { record_last_epoch: bool },
    /// A retry of an InitProducerId (or of a TV2 EndTxn) whose answer was lost: the current id
    /// and epoch, unchanged.
    Current,
}

/// Kafka's `prepareInitProducerIdTransit` and `prepareIncrementProducerEpoch` (KIP-360: a
/// producer re-initialising names its current id and epoch).
pub fn init_producer_id(meta: &TxnMeta, expected: Option<(i64, i16)>) -> Result<InitPlan, ResponseError> {
    if let Some((pid, epoch)) = expected {
        let known =
            meta.epoch == -1 || pid == meta.producer_id || (pid == meta.prev_producer_id && epoch >= EXHAUSTED_EPOCH);
        if !known {
            return Err(ResponseError::ProducerFenced);
        }
    }
    match meta.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
            Err(ResponseError::ConcurrentTransactions)
        }
        TxnState::Ongoing => Ok(InitPlan::FenceOngoing),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Dead => {
            if meta.epoch >= EXHAUSTED_EPOCH && expected.is_none_or(|(_, e)| e == meta.epoch) {
                return Ok(InitPlan::Rotate { record_last_epoch: expected.is_some() });
            }
            match expected {
                None => Ok(InitPlan::Bump),
                Some((_, e)) if e == meta.epoch || meta.epoch == -1 => Ok(InitPlan::Bump),
                Some((_, e)) if e == meta.last_epoch => Ok(InitPlan::Current),
                Some(_) => Err(ResponseError::ProducerFenced),
            }
        }
    }
}

/// The checks adding or verifying a partition starts with, in Kafka 4.1's order: no
/// transaction completing, the id's producer id, its current epoch.
fn check_producer(meta: &TxnMeta, producer_id: i64, epoch: i16) -> Result<(), ResponseError> {
    if is_prepare(meta.state) {
        return Err(ResponseError::ConcurrentTransactions);
    }
    if producer_id != meta.producer_id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if epoch != meta.epoch {
        return Err(ResponseError::ProducerFenced);
    }
    Ok(())
}

/// Kafka's checks of AddPartitionsToTxn (client v0-3, and the implicit add of Produce v12+ and
/// TxnOffsetCommit v5), in Kafka 4.1's order. `Ok(true)`: nothing to write (every partition is
/// already in the ongoing transaction).
pub fn add_partitions(
    meta: &TxnMeta,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
) -> Result<bool, ResponseError> {
    check_producer(meta, producer_id, epoch)?;
    Ok(meta.state == TxnState::Ongoing && partitions.iter().all(|p| meta.partitions.contains(p)))
}

/// The Ongoing transition adding `partitions`.
pub fn prepare_add(meta: &TxnMeta, partitions: Vec<(String, i32)>, tv: i16, now_ms: i64) -> TxnMeta {
    let mut next = meta.clone();
    next.prev_producer_id = meta.producer_id;
    if meta.state != TxnState::Ongoing {
        next.start_ms = now_ms;
    }
    next.state = TxnState::Ongoing;
    next.partitions.extend(partitions);
    next.client_tv = tv;
    next.last_update_ms = now_ms;
    next
}

/// Verification of a partition in a transaction without adding it (Produce v0-11 and
/// TxnOffsetCommit v0-4; Kafka's `handleVerifyPartitionsInTransaction`).
pub fn verify(meta: &TxnMeta, producer_id: i64, epoch: i16, partition: &(String, i32)) -> Result<(), ResponseError> {
    check_producer(meta, producer_id, epoch)?;
    if meta.state == TxnState::Ongoing && meta.partitions.contains(partition) {
        Ok(())
    } else {
        Err(ResponseError::TransactionAbortable)
    }
}

#[cfg(test)]
#[path = "transitions_tests.rs"]
mod tests;
