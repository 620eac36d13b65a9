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
//! partition at the same epoch needs no coordinator.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;

use crate::broker::Broker;
use crate::log::{batch, PartitionLog};

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

/// The partition-side check: `Ok(true)` if the batch continues a transaction already open here
/// at its epoch (nothing more to verify).
pub fn partition_side(log: &PartitionLog, producer_id: i64, epoch: i16) -> Result<bool, ResponseError> {
    if log.producer_epoch(producer_id).is_some_and(|known| epoch < known) {
        return Err(ResponseError::InvalidProducerEpoch);
    }
    Ok(log.has_open_txn(producer_id, epoch))
}

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
/// is another broker (a local coordinator is asked at append time, under the log lock). Runs
/// before the request's batches are appended (the connection awaits it, so later requests on
/// the connection cannot overtake it); returns at once when every transactional batch continues
/// a transaction the partition or the coordinator already has.
pub async fn produce_implicit_adds(
    broker: &Broker,
    req: &ProduceRequest,
    version: i16,
    auth: &super::produce::ProduceAuth,
) -> HashMap<(String, i32), Result<(), ResponseError>> {
    let mut answers = HashMap::new();
    let Some(id) = req.transactional_id.as_ref().map(|id| id.0.as_str()) else { return answers };
    let remote = broker.txns.is_cluster() && broker.txns.check_coordinator(id).is_err();
    if (version < 12 && !remote) || auth.txn_denied {
        return answers;
    }
    // (producer id, epoch) -> partitions to add.
    let mut wanted: HashMap<(i64, i16), Vec<(String, i32)>> = HashMap::new();
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
            let Some((producer_id, epoch, _)) = data.records.as_deref().and_then(transactional_producer) else {
                continue;
            };
            // A fenced epoch or an open transaction: decided again when appending.
            if partition_side(&partition.log(), producer_id, epoch) != Ok(false) {
                continue;
            }
            let key = (partition.topic.clone(), partition.index);
            if remote || !broker.txns.in_transaction(id, producer_id, epoch, &key) {
                wanted.entry((producer_id, epoch)).or_default().push(key);
            }
        }
    }
    for ((producer_id, epoch), partitions) in wanted {
        let answer = if version >= 12 {
            add_implicitly(broker, id, producer_id, epoch, partitions.clone(), true).await
        } else {
            broker.txns.verify_or_add(&broker.txn_deps(), id, (producer_id, epoch), true, partitions.clone()).await
        };
        answers.extend(partitions.into_iter().map(|p| (p, answer)));
    }
    answers
}

/// The verification of one transactional batch at append time, under the partition's log lock
/// (so that no marker can land between the check and the append). `asked`: the coordinator's
/// answer for this partition from `produce_implicit_adds`, if it was asked then.
pub fn verify_produce(
    broker: &Broker,
    log: &PartitionLog,
    partition: &(String, i32),
    txn_id: Option<&str>,
    (producer_id, epoch, first_seq): (i64, i16, i32),
    version: i16,
    asked: Option<Result<(), ResponseError>>,
) -> Result<(), ResponseError> {
    let open = partition_side(log, producer_id, epoch)?;
    if !open {
        let verified = match asked {
            Some(answer) => answer,
            None => broker.txns.verify(txn_id, producer_id, epoch, partition),
        };
        if let Err(e) = verified {
            return Err(produce_error(e, version));
        }
        // Transaction protocol 2: the first batch of a producer in a partition starts at
        // sequence 0 (the epoch was bumped, so sequences restarted).
        if version >= 12 && first_seq != 0 && log.producer_batches_empty(producer_id) {
            return Err(ResponseError::OutOfOrderSequenceNumber);
        }
    }
    Ok(())
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
/// its implicit add (v5), with the errors Kafka's group coordinator answers.
pub async fn txn_offset_commit(
    broker: &Broker,
    id: &str,
    producer_id: i64,
    epoch: i16,
    partition: (String, i32),
    version: i16,
) -> Result<(), ResponseError> {
    let open = match broker.topics.partition(&partition.0, partition.1) {
        Some(p) => partition_side(&p.log(), producer_id, epoch)?,
        None => false,
    };
    if open {
        return Ok(());
    }
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
    result.map_err(|e| match e {
        ResponseError::NetworkException => ResponseError::CoordinatorLoadInProgress,
        ResponseError::UnknownTopicOrPartition | ResponseError::NotEnoughReplicas | ResponseError::RequestTimedOut => {
            ResponseError::CoordinatorNotAvailable
        }
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => ResponseError::NotCoordinator,
        other => other,
    })
}
