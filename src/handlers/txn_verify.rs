//! Verification of transactional writes on the partition they go to (KIP-890), for Produce and
//! TxnOffsetCommit: a transactional batch that would open a transaction in a partition is
//! written only if the transaction coordinator has that partition in the producer's ongoing
//! transaction, so a late or stray write cannot leave a transaction hanging (and the LSO stuck).
//!
//! Which protocol applies is chosen per request version, as Kafka 4.1 does:
//! - Produce v0-11 and TxnOffsetCommit v0-4 only verify (the client added the partition with
//!   AddPartitionsToTxn / AddOffsetsToTxn); a partition missing from the transaction is
//!   refused with INVALID_TXN_STATE (Produce v0-10, TxnOffsetCommit v0-3) or
//!   TRANSACTION_ABORTABLE (Produce v11, TxnOffsetCommit v4).
//! - Produce v12+ and TxnOffsetCommit v5 (transaction protocol 2) add the partition to the
//!   transaction themselves ("implicit add"), before the write.
//!
//! The partition side is checked first, as Kafka's `maybeStartTransactionVerification` does: a
//! batch from an epoch older than the partition's last (a write of a transaction whose marker,
//! at the bumped epoch, is already in the partition) is fenced with INVALID_PRODUCER_EPOCH
//! without asking the coordinator, and a batch continuing a transaction already open in the
//! partition at the same epoch needs no coordinator. Otherwise the partition starts a
//! verification (`log::verification`) before the coordinator is asked, and the append, under
//! the log lock, must still find the transaction open or that verification's guard current
//! (`check_at_append`): a marker of the producer written in between (an abort after a timeout,
//! a commit) clears the guard, and the write is refused with INVALID_TXN_STATE, as Kafka 4.1's
//! `UnifiedLog.analyzeAndValidateProducerState` does, instead of opening a transaction the
//! coordinator does not know. That check comes after Kafka's duplicate lookup: a retry of a
//! batch already in the log is answered with its original offsets even if its transaction
//! ended meanwhile. TxnOffsetCommit's offsets go through the same guard on the group's
//! `__consumer_offsets` partition (`GroupCoordinator::append_txn_offsets`), so offsets of a
//! transaction aborted before their write are refused and never published by a later marker.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;

use crate::broker::Broker;
use crate::log::verification::VerificationGuard;
use crate::log::{batch, now_ms, PartitionLog};

/// Kafka's `add.partitions.to.txn.retry.backoff.ms` and `...backoff.max.ms`: how the broker
/// retries an implicit add the coordinator answered CONCURRENT_TRANSACTIONS (a previous
/// transaction of the producer still completing).
const RETRY_BACKOFF: Duration = Duration::from_millis(20);
const RETRY_MAX: Duration = Duration::from_millis(100);

/// The producer of a transactional batch: (producer id, epoch, first sequence).
pub fn transactional_producer(records: &[u8]) -> Option<(i64, i16, i32)> {
    if records.len() < batch::HEADER_BYTES {
        return None; // validation reports the corrupt batch
    }
    let header = batch::Header::new(records);
    (header.is_transactional() && header.producer_id() >= 0).then(|| {
        let first_seq = header.producer_batch().map_or(-1, |p| p.first_seq);
        (header.producer_id(), header.producer_epoch(), first_seq)
    })
}

/// Kafka's `maybeStartTransactionVerification`, under the log lock: a fenced epoch is
/// INVALID_PRODUCER_EPOCH; `Ok(None)` when the batch continues a transaction open here at its
/// epoch (Kafka's sentinel guard); else the guard of the verification it waits on (started at
/// `now_ms` if it is new).
pub fn start_verification(
    log: &mut PartitionLog,
    (producer_id, epoch, first_seq): (i64, i16, i32),
    now_ms: i64,
) -> Result<Option<VerificationGuard>, ResponseError> {
    if log.producer_epoch(producer_id).is_some_and(|known| epoch < known) {
        return Err(ResponseError::InvalidProducerEpoch);
    }
    Ok(log.start_txn_verification(producer_id, first_seq, epoch, now_ms))
}

/// A transactional batch the coordinator was asked about before its append: its answer and
/// the guard of the verification the partition started before asking.
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    pub answer: Result<(), ResponseError>,
    pub guard: VerificationGuard,
}

/// Why a transactional batch is not written: the error, and the message Kafka gives with it.
pub type Refusal = (ResponseError, Option<&'static str>);

/// The implicit add (transaction protocol 2), retried while the coordinator answers
/// CONCURRENT_TRANSACTIONS if `retry` (Produce does, TxnOffsetCommit does not).
pub async fn add_implicitly(
    broker: &Broker,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partitions: Vec<(String, i32)>,
    retry: bool,
) -> Result<(), ResponseError> {
    let started = Instant::now();
    loop {
        let added =
            broker.txns.verify_or_add(&broker.txn_deps(), id, (producer_id, epoch), false, partitions.clone()).await;
        match added {
            Err(ResponseError::ConcurrentTransactions) if retry && started.elapsed() + RETRY_BACKOFF <= RETRY_MAX => {
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
            // The coordinator's PRODUCER_FENCED reaches the producer as INVALID_PRODUCER_EPOCH.
            Err(ResponseError::ProducerFenced) => return Err(ResponseError::InvalidProducerEpoch),
            other => return other,
        }
    }
}

/// The coordinator's answers, by (topic, partition), to the implicit adds a Produce v12+
/// request needs, and in a cluster to the verifications of an older Produce whose coordinator
/// is another broker (a local coordinator is asked by `verify_produce`, synchronously), each
/// with the guard of the verification the partition started first. Runs before the request's
/// batches are appended (the connection awaits it, so later requests on the connection cannot
/// overtake it); returns at once when every transactional batch continues a transaction the
/// partition or the coordinator already has.
pub async fn produce_implicit_adds(
    broker: &Broker,
    req: &ProduceRequest,
    version: i16,
    auth: &super::produce::ProduceAuth,
) -> HashMap<(String, i32), Asked> {
    let mut answers = HashMap::new();
    let Some(id) = req.transactional_id.as_ref().map(|id| id.0.as_str()) else { return answers };
    let remote = broker.txns.is_cluster() && broker.txns.coordinated_elsewhere(id);
    if (version < 12 && !remote) || auth.txn_denied {
        return answers;
    }
    // (producer id, epoch) -> partitions to add, with their guards.
    type Guarded = Vec<((String, i32), VerificationGuard)>;
    let mut wanted: HashMap<(i64, i16), Guarded> = HashMap::new();
    for topic_data in &req.topic_data {
        let topic = if version >= 13 {
            broker.topics.get_by_id(topic_data.topic_id)
        } else {
            broker.topics.get(topic_data.name.0.as_str())
        };
        let Some(topic) = topic.filter(|t| !auth.denied_topics.contains(&t.name)) else { continue };
        for data in &topic_data.partition_data {
            let Some(partition) = usize::try_from(data.index).ok().and_then(|i| topic.partitions.get(i)) else {
                continue;
            };
            let Some(producer) = data.records.as_deref().and_then(transactional_producer) else {
                continue;
            };
            let (producer_id, epoch, _) = producer;
            // A fenced epoch or an open transaction: decided again by `verify_produce`.
            let Ok(Some(guard)) = start_verification(&mut partition.log(), producer, now_ms()) else { continue };
            let key = (partition.topic.clone(), partition.index);
            if remote || !broker.txns.in_transaction(id, producer_id, epoch, &key) {
                wanted.entry((producer_id, epoch)).or_default().push((key, guard));
            }
        }
    }
    for ((producer_id, epoch), guarded) in wanted {
        let partitions: Vec<(String, i32)> = guarded.iter().map(|(p, _)| p.clone()).collect();
        let answer = if version >= 12 {
            add_implicitly(broker, id, producer_id, epoch, partitions, true).await
        } else {
            broker.txns.verify_or_add(&broker.txn_deps(), id, (producer_id, epoch), true, partitions).await
        };
        answers.extend(guarded.into_iter().map(|(p, guard)| (p, Asked { answer, guard })));
    }
    answers
}

/// The verification of one transactional batch before its append (Kafka's pre-append checks,
/// under the log lock): the coordinator's answer from `produce_implicit_adds` if it was asked
/// then, else the partition side and a local coordinator. Returns the guard the append must
/// present (`None`: the transaction was open here, Kafka's sentinel).
pub fn verify_produce(
    broker: &Broker,
    log: &mut PartitionLog,
    partition: &(String, i32),
    txn_id: Option<&str>,
    producer: (i64, i16, i32),
    version: i16,
    asked: Option<Asked>,
) -> Result<Option<VerificationGuard>, Refusal> {
    if let Some(Asked { answer, guard }) = asked {
        return answer.map(|()| Some(guard)).map_err(|e| coordinator_refusal(e, version));
    }
    let (producer_id, epoch, _) = producer;
    let Some(guard) = start_verification(log, producer, now_ms()).map_err(|e| (e, None))? else { return Ok(None) };
    let verified = broker.txns.verify(txn_id, producer_id, epoch, partition);
    verified.map(|()| Some(guard)).map_err(|e| coordinator_refusal(e, version))
}

/// Kafka's check at append (`analyzeAndValidateProducerState`), under the log lock with the
/// write of `batch` (one transactional batch): a retry of a batch already in the log passes
/// (the append answers it with the original batch's offsets: Kafka looks for duplicates
/// first, so a retry whose transaction ended meanwhile still gets them); else the batch
/// continues a transaction open here at its epoch, or its verification's `guard` is still
/// current (no marker of the producer since it started); else INVALID_TXN_STATE, which Kafka
/// answers without a message.
pub fn check_at_append(
    log: &PartitionLog,
    batch: &[u8],
    guard: Option<VerificationGuard>,
    version: i16,
) -> Result<(), Refusal> {
    let Some((producer_id, epoch, first_seq)) = transactional_producer(batch) else { return Ok(()) };
    if log.has_open_txn(producer_id, epoch) || log.is_duplicate(batch) {
        return Ok(());
    }
    if !guard.is_some_and(|g| log.txn_verification_holds(producer_id, g)) {
        return Err((ResponseError::InvalidTxnState, None));
    }
    // Transaction protocol 2: the first batch of a producer in a partition starts at sequence 0
    // (the epoch was bumped, so sequences restarted).
    if version >= 12 && first_seq != 0 && log.producer_batches_empty(producer_id) {
        return Err((ResponseError::OutOfOrderSequenceNumber, None));
    }
    Ok(())
}

/// A failed verification as the producer sees it, with Kafka's message for a partition the
/// coordinator does not have in the transaction.
fn coordinator_refusal(e: ResponseError, version: i16) -> Refusal {
    let e = produce_error(e, version);
    (e, (e == ResponseError::InvalidTxnState).then_some("Partition was not added to the transaction"))
}

/// The error a producer sees for a failed verification (Kafka's `AddPartitionsToTxnManager`
/// and `ReplicaManager` mappings).
fn produce_error(e: ResponseError, version: i16) -> ResponseError {
    match e {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        ResponseError::TransactionAbortable if version <= 10 => ResponseError::InvalidTxnState,
        // Verified, then the transaction ended before the write (TV2): Kafka's guard refuses
        // the append.
        ResponseError::TransactionAbortable if version >= 12 => ResponseError::InvalidTxnState,
        ResponseError::ConcurrentTransactions if version >= 12 => e,
        ResponseError::ConcurrentTransactions
        | ResponseError::NetworkException
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator => ResponseError::NotEnoughReplicas,
        other => other,
    }
}

/// TxnOffsetCommit's verification of `__consumer_offsets`' partition for the group (v0-4), or
/// its implicit add (v5), with the errors Kafka's group coordinator answers. As Kafka 4.1's
/// coordinator runtime does (`maybeStartTransactionVerification` with no sequence, then the
/// write with the guard), the partition starts a verification before the coordinator is
/// asked: returns the guard the offsets' write must present (`None`: the transaction was open
/// in the partition, Kafka's sentinel), checked under the log lock with the write
/// (`GroupCoordinator::append_txn_offsets`), so a marker landing in between refuses the write.
pub async fn txn_offset_commit(
    broker: &Broker,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partition: (String, i32),
    version: i16,
) -> Result<Option<VerificationGuard>, ResponseError> {
    let guard = match broker.topics.partition(&partition.0, partition.1) {
        Some(p) => start_verification(&mut p.log(), (producer_id, epoch, -1), now_ms())?,
        // Not hosted here (any more): Kafka's NOT_LEADER_OR_FOLLOWER, as its group
        // coordinator answers it.
        None => return Err(ResponseError::NotCoordinator),
    };
    let Some(guard) = guard else { return Ok(None) };
    let result = if version >= 5 {
        add_implicitly(broker, id, producer_id, epoch, vec![partition], false).await
    } else {
        let verified =
            broker.txns.verify_or_add(&broker.txn_deps(), id, (producer_id, epoch), true, vec![partition]).await;
        verified.map_err(|e| match e {
            ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
            ResponseError::TransactionAbortable if version <= 3 => ResponseError::InvalidTxnState,
            other => other,
        })
    };
    // Kafka's `CoordinatorOperationExceptionHelper`.
    result
        .map_err(|e| match e {
            ResponseError::NetworkException => ResponseError::CoordinatorLoadInProgress,
            ResponseError::UnknownTopicOrPartition
            | ResponseError::NotEnoughReplicas
            | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
            ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => ResponseError::NotCoordinator,
            other => other,
        })
        .map(|()| Some(guard))
}

#[cfg(test)]
#[path = "txn_verify_tests.rs"]
mod tests;
