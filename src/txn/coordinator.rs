//! The transaction coordinator: transactional ids, their producer ids and epochs, and the
//! two-phase completion of transactions (Kafka's `TransactionCoordinator`, transaction protocol
//! version 1).
//!
//! Owns: each transactional id's metadata (producer id, epoch, timeout, state, partitions),
//! persisted to the internal `__transaction_state` topic (`records.rs`) on every change and
//! rebuilt from it at start; writing commit/abort markers to every partition of a transaction;
//! fencing zombies by bumping the epoch; aborting transactions past `transaction.timeout.ms`.
//! Invariants: a transaction is acknowledged as committed/aborted only after its Prepare state
//! and all its markers are durable; at start, transactions left in PrepareCommit/PrepareAbort
//! are completed before anything else runs; epochs only grow.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use kafka_protocol::error::ResponseError;

use super::records::{decode_key, encode_key, TxnState, TxnValue};
use crate::group::GroupCoordinator;
use crate::log::flusher::Flusher;
use crate::log::{now_ms, Partition};
use crate::metadata::TopicRegistry;
use crate::txn::producer_ids::ProducerIds;

pub const TXN_TOPIC: &str = "__transaction_state";

#[derive(Debug, Clone)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
}

impl TxnMeta {
    fn value(&self) -> TxnValue {
        TxnValue {
            producer_id: self.producer_id,
            epoch: self.epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.iter().cloned().collect(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
        }
    }
}

#[derive(Debug, Clone)]
pub struct TxnConfig {
    pub partitions: i32,
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: ids idle this long (no open transaction) are forgotten.
    pub id_expiration_ms: i64,
}

/// What the coordinator needs from the rest of the broker.
pub struct Deps<'a> {
    pub topics: &'a TopicRegistry,
    pub flusher: &'a Flusher,
    pub groups: &'a GroupCoordinator,
    pub producer_ids: &'a ProducerIds,
}

pub struct TxnCoordinator {
    pub config: TxnConfig,
    txns: Mutex<HashMap<String, TxnMeta>>,
    /// Serialises state transitions of one transactional id across await points.
    ops: tokio::sync::Mutex<()>,
}

/// Kafka's check of a client's producer id and epoch against its transaction (transaction
/// protocol 1: clients never bump the epoch themselves, so any other epoch is fenced).
fn fenced_or_mapping(meta: &TxnMeta, producer_id: i64, epoch: i16) -> Result<(), ResponseError> {
    if producer_id != meta.producer_id {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    if epoch != meta.epoch {
        return Err(ResponseError::ProducerFenced);
    }
    Ok(())
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        TxnCoordinator { config, txns: Mutex::new(HashMap::new()), ops: tokio::sync::Mutex::new(()) }
    }

    pub fn lock(&self) -> MutexGuard<'_, HashMap<String, TxnMeta>> {
        self.txns.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        (crate::group::java_hash(transactional_id) & 0x7fff_ffff) % self.config.partitions
    }

    fn state_partition(&self, topics: &TopicRegistry, transactional_id: &str) -> Result<Arc<Partition>, ResponseError> {
        let topic = match topics.get(TXN_TOPIC) {
            Some(t) => t,
            None => {
                let mut overrides = crate::config::Properties::new();
                // As Kafka: compacted, so the latest state of every transactional id is kept.
                overrides.insert("cleanup.policy".into(), "compact".into());
                overrides.insert("compression.type".into(), "producer".into());
                overrides.insert("segment.bytes".into(), "104857600".into());
                topics
                    .create(TXN_TOPIC, self.config.partitions, overrides)
                    .or_else(|_| topics.get(TXN_TOPIC).ok_or(ResponseError::CoordinatorNotAvailable))?
            }
        };
        topic
            .partitions
            .get(self.partition_for(transactional_id) as usize)
            .cloned()
            .ok_or(ResponseError::CoordinatorNotAvailable)
    }

    /// Ensures the state topic exists (FindCoordinator for a transactional id).
    pub fn ensure_topic(&self, topics: &TopicRegistry) -> Result<(), ResponseError> {
        self.state_partition(topics, "").map(|_| ())
    }

    /// Writes and fsyncs the metadata record of one transactional id.
    async fn persist(&self, deps: &Deps<'_>, transactional_id: &str, meta: &TxnMeta) -> Result<(), ResponseError> {
        let partition = self.state_partition(deps.topics, transactional_id)?;
        let value = meta.value().encode();
        let end = crate::group::append_records(&partition, vec![(encode_key(transactional_id), Some(value))]).map_err(
            |e| {
                tracing::error!(error = %e, "cannot write {TXN_TOPIC}");
                ResponseError::CoordinatorNotAvailable
            },
        )?;
        deps.flusher.flush(partition, end).await.map_err(|_| ResponseError::CoordinatorNotAvailable)
    }

    /// Rebuilds state from `__transaction_state`; completes transactions caught mid-commit.
    pub async fn load(&self, deps: &Deps<'_>) -> anyhow::Result<()> {
        let Some(topic) = deps.topics.get(TXN_TOPIC) else { return Ok(()) };
        let mut loaded: HashMap<String, TxnMeta> = HashMap::new();
        for partition in &topic.partitions {
            crate::group::replay(partition, |record| {
                let Some(id) = record.key.as_deref().and_then(decode_key) else { return };
                match record.value.as_deref().and_then(TxnValue::decode) {
                    Some(v) => {
                        loaded.insert(
                            id,
                            TxnMeta {
                                producer_id: v.producer_id,
                                epoch: v.epoch,
                                timeout_ms: v.timeout_ms,
                                state: v.state,
                                partitions: v.partitions.into_iter().collect(),
                                start_ms: v.start_ms,
                                last_update_ms: v.last_update_ms,
                            },
                        );
                    }
                    None => {
                        loaded.remove(&id);
                    }
                }
            })?;
        }
        let pending: Vec<(String, TxnMeta)> = loaded
            .iter()
            .filter(|(_, m)| matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        tracing::info!(
            transactional_ids = loaded.len(),
            completing = pending.len(),
            "transaction coordinator loaded {TXN_TOPIC}"
        );
        *self.lock() = loaded;
        for (id, meta) in pending {
            let commit = meta.state == TxnState::PrepareCommit;
            if let Err(e) = self.complete(deps, &id, meta, commit).await {
                tracing::error!(transactional_id = %id, error = %e, "cannot complete transaction found prepared at start");
            }
        }
        Ok(())
    }

    /// Writes markers for `meta`'s partitions and moves it to CompleteCommit/CompleteAbort.
    async fn complete(&self, deps: &Deps<'_>, id: &str, mut meta: TxnMeta, commit: bool) -> Result<(), ResponseError> {
        let now = now_ms();
        let mut written = Vec::new();
        for (topic, p) in &meta.partitions {
            let Some(partition) = deps.topics.partition(topic, *p) else { continue };
            let offset = partition.log().append_marker(meta.producer_id, meta.epoch, commit, 0, 0, now);
            match offset {
                Ok(offset) => {
                    if topic == crate::group::OFFSETS_TOPIC {
                        deps.groups.complete_txn(meta.producer_id, *p, commit);
                    }
                    written.push((partition, offset + 1));
                }
                Err(e) => {
                    tracing::warn!(transactional_id = id, %topic, partition = p, error = %e, "marker not written")
                }
            }
        }
        for (partition, end) in written {
            deps.flusher.flush(partition, end).await.map_err(|_| ResponseError::KafkaStorageError)?;
        }
        meta.state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
        meta.partitions.clear();
        meta.last_update_ms = now;
        self.persist(deps, id, &meta).await?;
        self.lock().insert(id.to_string(), meta);
        Ok(())
    }

    /// InitProducerId with a transactional id: a producer id and a bumped epoch; an open
    /// transaction of the previous incarnation is aborted first (zombie fencing).
    pub async fn init_producer_id(
        &self,
        deps: &Deps<'_>,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ResponseError> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let _op = self.ops.lock().await;
        let now = now_ms();
        let current = self.lock().get(id).cloned();
        let mut meta = match current {
            None => TxnMeta {
                producer_id: deps.producer_ids.next().map_err(|_| ResponseError::CoordinatorNotAvailable)?,
                epoch: -1,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                start_ms: -1,
                last_update_ms: now,
            },
            Some(meta) => {
                if let Some((pid, epoch)) = expected {
                    // KIP-360: a producer re-initialising must name its current id and epoch.
                    if pid != meta.producer_id || epoch != meta.epoch {
                        return Err(ResponseError::ProducerFenced);
                    }
                }
                match meta.state {
                    TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                        return Err(ResponseError::ConcurrentTransactions)
                    }
                    TxnState::Ongoing => {
                        // Fence the old producer: abort its transaction with a bumped epoch.
                        let mut fenced = meta.clone();
                        fenced.epoch = fenced.epoch.saturating_add(1);
                        fenced.state = TxnState::PrepareAbort;
                        self.persist(deps, id, &fenced).await?;
                        self.lock().insert(id.to_string(), fenced.clone());
                        self.complete(deps, id, fenced, false).await?;
                        self.lock().get(id).cloned().ok_or(ResponseError::CoordinatorNotAvailable)?
                    }
                    _ => meta,
                }
            }
        };
        if meta.epoch >= i16::MAX - 1 {
            meta.producer_id = deps.producer_ids.next().map_err(|_| ResponseError::CoordinatorNotAvailable)?;
            meta.epoch = 0;
        } else {
            meta.epoch += 1;
        }
        meta.timeout_ms = timeout_ms;
        meta.state = TxnState::Empty;
        meta.partitions.clear();
        meta.last_update_ms = now;
        self.persist(deps, id, &meta).await?;
        let result = (meta.producer_id, meta.epoch);
        self.lock().insert(id.to_string(), meta);
        Ok(result)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: returns per-partition errors (empty Ok = all added).
    pub async fn add_partitions(
        &self,
        deps: &Deps<'_>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
    ) -> Result<(), ResponseError> {
        let _op = self.ops.lock().await;
        let mut meta = self.lock().get(id).cloned().ok_or(ResponseError::InvalidProducerIdMapping)?;
        fenced_or_mapping(&meta, producer_id, epoch)?;
        if matches!(meta.state, TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let new: Vec<_> = partitions.into_iter().filter(|p| !meta.partitions.contains(p)).collect();
        if new.is_empty() && meta.state == TxnState::Ongoing {
            return Ok(());
        }
        let now = now_ms();
        if meta.state != TxnState::Ongoing {
            meta.start_ms = now;
        }
        meta.state = TxnState::Ongoing;
        meta.partitions.extend(new);
        meta.last_update_ms = now;
        self.persist(deps, id, &meta).await?;
        self.lock().insert(id.to_string(), meta);
        Ok(())
    }

    /// EndTxn: two-phase commit or abort.
    pub async fn end_txn(
        &self,
        deps: &Deps<'_>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ResponseError> {
        let _op = self.ops.lock().await;
        let mut meta = self.lock().get(id).cloned().ok_or(ResponseError::InvalidProducerIdMapping)?;
        fenced_or_mapping(&meta, producer_id, epoch)?;
        match (meta.state, commit) {
            (TxnState::Ongoing, _) => {}
            // A retry of a completed EndTxn.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => return Ok(()),
            (TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence, _) => {
                return Err(ResponseError::ConcurrentTransactions)
            }
            // Nothing to end (transaction protocol 1): Kafka answers INVALID_TXN_STATE to a commit
            // or an abort alike.
            _ => return Err(ResponseError::InvalidTxnState),
        }
        meta.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
        meta.last_update_ms = now_ms();
        self.persist(deps, id, &meta).await?;
        self.lock().insert(id.to_string(), meta.clone());
        self.complete(deps, id, meta, commit).await
    }

    /// Whether `producer_id` at `epoch` has (topic, partition) in its ongoing transaction: the
    /// broker-side verification of transactional produce (KIP-890 part 1).
    pub fn verify_partition(&self, producer_id: i64, epoch: i16, topic: &str, partition: i32) -> bool {
        self.lock().values().any(|m| {
            m.producer_id == producer_id
                && m.epoch == epoch
                && m.state == TxnState::Ongoing
                && m.partitions.contains(&(topic.to_string(), partition))
        })
    }

    /// Validates a TxnOffsetCommit's producer against its transaction.
    pub fn check_offsets_producer(&self, id: &str, producer_id: i64, epoch: i16) -> Result<(), ResponseError> {
        let txns = self.lock();
        let meta = txns.get(id).ok_or(ResponseError::InvalidProducerIdMapping)?;
        if producer_id != meta.producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        match epoch.cmp(&meta.epoch) {
            std::cmp::Ordering::Less => Err(ResponseError::ProducerFenced),
            std::cmp::Ordering::Greater => Err(ResponseError::InvalidProducerEpoch),
            std::cmp::Ordering::Equal => Ok(()),
        }
    }

    /// Forgets transactional ids idle for `transactional.id.expiration.ms` (tombstones them).
    pub async fn expire_ids(&self, deps: &Deps<'_>) {
        let now = now_ms();
        let idle: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, m)| {
                matches!(m.state, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
                    && now - m.last_update_ms > self.config.id_expiration_ms
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            let _op = self.ops.lock().await;
            let Ok(partition) = self.state_partition(deps.topics, &id) else { continue };
            if let Ok(end) = crate::group::append_records(&partition, vec![(encode_key(&id), None)]) {
                if deps.flusher.flush(partition, end).await.is_ok() {
                    self.lock().remove(&id);
                    tracing::info!(transactional_id = %id, "transactional id expired");
                }
            }
        }
    }

    /// Aborts transactions open longer than their timeout, fencing their producers.
    pub async fn abort_expired(&self, deps: &Deps<'_>) {
        let now = now_ms();
        let expired: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, m)| m.state == TxnState::Ongoing && now - m.start_ms > m.timeout_ms as i64)
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let _op = self.ops.lock().await;
            let Some(mut meta) = self.lock().get(&id).cloned() else { continue };
            if meta.state != TxnState::Ongoing {
                continue;
            }
            tracing::info!(transactional_id = %id, "transaction timed out; aborting and fencing its producer");
            meta.epoch = meta.epoch.saturating_add(1);
            meta.state = TxnState::PrepareAbort;
            if self.persist(deps, &id, &meta).await.is_ok() {
                self.lock().insert(id.clone(), meta.clone());
                let _ = self.complete(deps, &id, meta, false).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BrokerConfig, Properties};
    use crate::group::{GroupConfig, GroupCoordinator};
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

    fn txn_batch(producer_id: i64) -> Vec<u8> {
        let record = Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: 0,
            timestamp: now_ms(),
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: Default::default(),
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            [record].iter(),
            &RecordEncodeOptions { version: 2, compression: Compression::None },
        )
        .unwrap();
        buf.to_vec()
    }

    /// A crash between PrepareCommit and the markers: the next start writes the markers, so the
    /// transaction's data becomes readable (LSO reaches the high watermark).
    #[tokio::test]
    async fn a_transaction_prepared_before_a_crash_is_completed_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let mut props = Properties::new();
        props.insert("log.dirs".into(), dir.path().display().to_string());
        let config = BrokerConfig::from_properties(props).unwrap();
        let topics = TopicRegistry::open(&config).unwrap();
        let topic = topics.create("t", 1, Properties::new()).unwrap();
        let partition = topic.partitions[0].clone();
        let (bytes, summary) = crate::log::batch::validate_produce(txn_batch(5), &topic.config, now_ms()).unwrap();
        partition.log().append(bytes, &summary, 0, now_ms()).unwrap();
        assert_eq!(partition.log().last_stable_offset(), 0, "the open transaction holds the LSO");

        let flusher = Flusher::start();
        let groups = GroupCoordinator::new(GroupConfig::from_broker(&config));
        let producer_ids = ProducerIds::open(dir.path()).unwrap();
        let deps = Deps { topics: &topics, flusher: &flusher, groups: &groups, producer_ids: &producer_ids };
        let txn_config = TxnConfig { partitions: 3, max_timeout_ms: 900_000, id_expiration_ms: 604_800_000 };
        let before_crash = TxnCoordinator::new(txn_config.clone());
        let prepared = TxnMeta {
            producer_id: 5,
            epoch: 0,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [("t".to_string(), 0)].into_iter().collect(),
            start_ms: now_ms(),
            last_update_ms: now_ms(),
        };
        before_crash.persist(&deps, "tx", &prepared).await.unwrap();

        let restarted = TxnCoordinator::new(txn_config);
        restarted.load(&deps).await.unwrap();
        assert_eq!(restarted.lock()["tx"].state, TxnState::CompleteCommit);
        let log = partition.log();
        assert_eq!(log.log_end_offset(), 2, "data plus the commit marker");
        assert_eq!(log.last_stable_offset(), log.high_watermark());
        assert!(log.aborted_txns(0, 2).is_empty());
    }
}
