//! The transaction coordinator: transactional ids, their producer ids and epochs, and the
//! two-phase completion of transactions (Kafka's `TransactionCoordinator`, transaction protocol
//! versions 1 and 2; the rules are in `transitions.rs`, this file does the I/O).
//!
//! Owns: each transactional id's metadata (producer id, epoch, timeout, state, partitions),
//! persisted to the internal `__transaction_state` topic (`records.rs`) on every change and
//! rebuilt from it at start; writing commit/abort markers to every partition of a transaction;
//! fencing zombies by bumping the epoch; aborting transactions past `transaction.timeout.ms`.
//! Invariants: a transaction is acknowledged as committed/aborted only after its Prepare state
//! and all its markers are durable; at start, transactions left in PrepareCommit/PrepareAbort
//! are completed before anything else runs; epochs only grow. Unlike Kafka, an EndTxn is
//! answered only once its markers are durable under both protocol versions (Kafka answers a
//! TV2 EndTxn once its Prepare record is): requests racing it wait for it instead of getting
//! CONCURRENT_TRANSACTIONS, and what clients observe is otherwise the same.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use kafka_protocol::error::ResponseError;

pub use super::peers::Cluster;
use super::records::{encode_key, TxnState, TxnValue};
use super::transitions::{self, EndTxnPlan, InitPlan, EXHAUSTED_EPOCH, TV_0, TV_2};
use crate::group::GroupCoordinator;
use crate::log::flusher::Flusher;
use crate::log::{now_ms, Partition};
use crate::metadata::features::{Features, TRANSACTION_VERSION};
use crate::metadata::TopicRegistry;
use crate::txn::producer_ids::ProducerIds;

pub const TXN_TOPIC: &str = "__transaction_state";

/// How long markers that could not be written wait before the next try (Kafka's
/// `TransactionMarkerChannelManager` retries on its next send).
const MARKER_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct TxnMeta {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// The producer id before the last transition (-1: none).
    pub prev_producer_id: i64,
    /// The producer id a transaction ending at an exhausted epoch rotates to (-1: none).
    pub next_producer_id: i64,
    /// The epoch before the last bump (-1: unknown). In memory only, as in Kafka: it lets a
    /// producer that lost an answer retry InitProducerId with its old epoch.
    pub last_epoch: i16,
    /// The transaction protocol version of the request behind the last transition.
    pub client_tv: i16,
}

impl TxnMeta {
    /// A transactional id seen for the first time.
    pub fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnMeta {
        TxnMeta {
            producer_id,
            epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            prev_producer_id: -1,
            next_producer_id: -1,
            last_epoch: -1,
            client_tv: TV_0,
        }
    }

    fn value(&self) -> TxnValue {
        TxnValue {
            producer_id: self.producer_id,
            epoch: self.epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.iter().cloned().collect(),
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            prev_producer_id: self.prev_producer_id,
            next_producer_id: self.next_producer_id,
            client_tv: self.client_tv,
        }
    }

    pub(super) fn from_value(v: TxnValue) -> TxnMeta {
        TxnMeta {
            producer_id: v.producer_id,
            epoch: v.epoch,
            timeout_ms: v.timeout_ms,
            state: v.state,
            partitions: v.partitions.into_iter().collect(),
            start_ms: v.start_ms,
            last_update_ms: v.last_update_ms,
            prev_producer_id: v.prev_producer_id,
            next_producer_id: v.next_producer_id,
            last_epoch: -1,
            client_tv: v.client_tv,
        }
    }
}

#[derive(Debug, Clone)]
pub struct TxnConfig {
    pub partitions: i32,
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: ids idle this long (no open transaction) are forgotten.
    pub id_expiration_ms: i64,
    /// `transaction.state.log.replication.factor`, `.min.isr`, `.segment.bytes`: how a cluster
    /// creates `__transaction_state`.
    pub replication_factor: i16,
    pub min_isr: i32,
    pub segment_bytes: i64,
}

/// What the coordinator needs from the rest of the broker.
pub struct Deps<'a> {
    pub topics: &'a TopicRegistry,
    pub flusher: &'a Flusher,
    pub groups: &'a GroupCoordinator,
    pub producer_ids: &'a ProducerIds,
    /// The finalized `transaction.version` of a single node (a cluster's is in `link`'s image):
    /// the protocol of coordinator-initiated aborts and the version of `__transaction_state`
    /// values.
    pub features: &'a Features,
    /// In a cluster: the replica layer (coordinator writes and markers go through it) and the
    /// controller link (its metadata image says who leads each partition).
    pub replicas: Option<&'a crate::replica::manager::ReplicaManager>,
    pub link: Option<&'a crate::node::ControllerLink>,
}

impl Deps<'_> {
    /// In a cluster, the level finalized in the quorum's metadata image; else this node's.
    fn cluster_tv(&self) -> i16 {
        match self.link {
            Some(link) => link.image().features.get(TRANSACTION_VERSION).copied().unwrap_or(0),
            None => self.features.level(TRANSACTION_VERSION),
        }
    }
}

/// One transactional id's turn (`TxnCoordinator::op`); ending it drops the id's lock from `ops`
/// when no other turn holds or awaits it.
pub(super) struct OpTurn<'a> {
    coordinator: &'a TxnCoordinator,
    id: String,
    lock: Option<Arc<tokio::sync::Mutex<()>>>,
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for OpTurn<'_> {
    fn drop(&mut self) {
        drop(self.held.take());
        drop(self.lock.take());
        // New turns reach the lock only through the map, under its lock: a count of one (the
        // map's own) means nobody holds or awaits it, and nobody can start to meanwhile.
        let mut ops = self.coordinator.ops.lock().unwrap_or_else(|p| p.into_inner());
        if ops.get(&self.id).is_some_and(|lock| Arc::strong_count(lock) == 1) {
            ops.remove(&self.id);
        }
    }
}

pub struct TxnCoordinator {
    pub config: TxnConfig,
    txns: Mutex<HashMap<String, TxnMeta>>,
    /// Serialises the state transitions of each transactional id across await points: one at
    /// a time per id, different ids independent (an EndTxn writing markers does not hold up
    /// another producer's implicit add). Holds only ids with a turn held or awaited (`OpTurn`).
    ops: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// In a cluster: the `__transaction_state` partitions this broker leads, each with the
    /// leader epoch it was loaded at (its coordinator epoch); `None` on a single node, which
    /// owns them all (`ownership.rs`).
    owned: Mutex<Option<BTreeMap<i32, i32>>>,
    /// In a cluster: the `__transaction_state` partitions this broker leads and is loading,
    /// each with the number of its load (`ownership::Load`); `loads` counts the loads started.
    loading: Mutex<HashMap<i32, u64>>,
    pub(super) loads: std::sync::atomic::AtomicU64,
    /// Set once in a cluster: the way to partition leaders on other brokers (the replicas
    /// coordinator writes go through are `Deps::replicas`).
    pub(super) cluster: OnceLock<Cluster>,
}

impl TxnCoordinator {
    pub fn new(config: TxnConfig) -> TxnCoordinator {
        TxnCoordinator {
            config,
            txns: Mutex::new(HashMap::new()),
            ops: Mutex::new(HashMap::new()),
            owned: Mutex::new(None),
            loading: Mutex::new(HashMap::new()),
            loads: std::sync::atomic::AtomicU64::new(0),
            cluster: OnceLock::new(),
        }
    }

    pub(super) fn owned(&self) -> MutexGuard<'_, Option<BTreeMap<i32, i32>>> {
        self.owned.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn loading(&self) -> MutexGuard<'_, HashMap<i32, u64>> {
        self.loading.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the transactional id's turn to change its state. The id's lock lives in `ops`
    /// only while a turn is held or awaited: the last turn to end removes it, so ids a client
    /// merely names (unknown ones answered INVALID_PRODUCER_ID_MAPPING) leave nothing behind.
    pub(super) async fn op(&self, id: &str) -> OpTurn<'_> {
        let lock = self.ops.lock().unwrap_or_else(|p| p.into_inner()).entry(id.to_string()).or_default().clone();
        // Made before the wait, so a wait given up (its request's connection closed) cleans up too.
        let mut turn = OpTurn { coordinator: self, id: id.to_string(), lock: Some(lock.clone()), held: None };
        turn.held = Some(lock.lock_owned().await);
        turn
    }

    /// Ids with a turn held or awaited (tests).
    #[cfg(test)]
    pub(super) fn ops_len(&self) -> usize {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// A copy of one transactional id's metadata (DescribeTransactions).
    pub fn describe(&self, id: &str) -> Option<TxnMeta> {
        self.lock().get(id).cloned()
    }

    /// Copies of every transactional id's metadata, sorted by id (ListTransactions).
    pub fn describe_all(&self) -> Vec<(String, TxnMeta)> {
        let mut all: Vec<(String, TxnMeta)> = self.lock().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, TxnMeta>> {
        self.txns.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        (crate::group::java_hash(transactional_id) & 0x7fff_ffff) % self.config.partitions
    }

    fn state_partition(&self, topics: &TopicRegistry, transactional_id: &str) -> Result<Arc<Partition>, ResponseError> {
        if self.is_cluster() {
            // Created through the controller (FindCoordinator), led here or not coordinated here.
            self.check_coordinator(transactional_id)?;
            return topics
                .partition(TXN_TOPIC, self.partition_for(transactional_id))
                .ok_or(ResponseError::NotCoordinator);
        }
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
        // As Kafka: version 1 values once `transaction.version` is 1 or more.
        let value = if deps.cluster_tv() >= 1 { meta.value().encode() } else { meta.value().encode_v0() };
        self.write_record(deps, transactional_id, Some(value)).await
    }

    /// Appends one record of `__transaction_state` (a tombstone: `None`) and waits until it is
    /// committed (acks=all in a cluster) and fsynced, with the errors Kafka's transaction state
    /// manager answers for a failed append.
    async fn write_record(&self, deps: &Deps<'_>, id: &str, value: Option<Vec<u8>>) -> Result<(), ResponseError> {
        let partition = self.state_partition(deps.topics, id)?;
        let end = crate::group::append_records(deps.replicas, &partition, vec![(encode_key(id), value)]).map_err(
            |e| match e {
                crate::error::LogError::NotLeader => ResponseError::NotCoordinator,
                e => {
                    tracing::error!(error = %e, "cannot write {TXN_TOPIC}");
                    ResponseError::CoordinatorNotAvailable
                }
            },
        )?;
        crate::group::await_durable(deps.replicas, deps.flusher, partition, end, super::markers::MARKER_TIMEOUT).await
    }

    /// Rebuilds state from `__transaction_state`; completes transactions caught mid-commit.
    pub async fn load(&self, deps: &Deps<'_>) -> anyhow::Result<()> {
        debug_assert!(!self.is_cluster(), "a cluster broker loads partitions as it leads them (elect)");
        let Some(topic) = deps.topics.get(TXN_TOPIC) else { return Ok(()) };
        let mut loaded: HashMap<String, TxnMeta> = HashMap::new();
        for partition in topic.partitions.iter() {
            loaded.extend(super::ownership::replay(partition)?);
        }
        let pending = super::ownership::prepared(&loaded);
        tracing::info!(
            transactional_ids = loaded.len(),
            completing = pending.len(),
            "transaction coordinator loaded {TXN_TOPIC}"
        );
        *self.lock() = loaded;
        for (id, meta) in pending {
            if let Err(e) = self.complete(deps, &id, meta).await {
                tracing::error!(transactional_id = %id, error = %e, "cannot complete transaction found prepared at start");
            }
        }
        Ok(())
    }

    /// Writes markers for `meta`'s partitions (at its epoch: the bumped one under TV2, so late
    /// writes of the ended transaction are fenced) and moves it to CompleteCommit/CompleteAbort.
    /// Returns the completed metadata.
    pub(super) async fn complete(&self, deps: &Deps<'_>, id: &str, meta: TxnMeta) -> Result<TxnMeta, ResponseError> {
        let commit = meta.state == TxnState::PrepareCommit;
        let coordinator_epoch = self.coordinator_epoch(id);
        let producer = (meta.producer_id, meta.epoch);
        let partitions: Vec<(String, i32)> = meta.partitions.iter().cloned().collect();
        match (self.cluster.get(), deps.link) {
            (Some(cluster), Some(link)) => {
                self.write_markers(deps, cluster, link, id, producer, commit, coordinator_epoch, partitions).await?
            }
            _ => {
                for ((topic, p), outcome) in
                    super::markers::write_here(deps, producer, commit, coordinator_epoch, partitions).await
                {
                    match outcome {
                        Ok(()) | Err(ResponseError::UnknownTopicOrPartition) => {}
                        Err(ResponseError::KafkaStorageError) => return Err(ResponseError::KafkaStorageError),
                        Err(e) => {
                            tracing::warn!(transactional_id = id, %topic, partition = p, error = ?e, "marker not written")
                        }
                    }
                }
            }
        }
        let completed = transitions::complete(&meta, now_ms());
        self.persist(deps, id, &completed).await?;
        self.lock().insert(id.to_string(), completed.clone());
        Ok(completed)
    }

    /// In a cluster: writes the markers on every partition's current leader (here, or with
    /// WriteTxnMarkers), retrying what is not written yet (a leader moving, a follower behind)
    /// until all are, the partition is deleted, or this broker stops coordinating `id`.
    #[allow(clippy::too_many_arguments)]
    async fn write_markers(
        &self,
        deps: &Deps<'_>,
        cluster: &Cluster,
        link: &crate::node::ControllerLink,
        id: &str,
        producer: (i64, i16),
        commit: bool,
        coordinator_epoch: i32,
        mut pending: Vec<(String, i32)>,
    ) -> Result<(), ResponseError> {
        let me = cluster.node_id;
        while !pending.is_empty() {
            if !self.still_owns(id, coordinator_epoch) {
                return Err(ResponseError::NotCoordinator);
            }
            let image = link.image();
            let mut here = Vec::new();
            let mut remote: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
            pending.retain(|(topic, p)| {
                let Some(partition) = image.topic(topic).and_then(|t| t.partitions.get(p)) else {
                    tracing::info!(transactional_id = id, %topic, partition = p, "no marker for a deleted partition");
                    return false;
                };
                match partition.leader {
                    leader if leader == me => here.push((topic.clone(), *p)),
                    leader if leader >= 0 => remote.entry(leader).or_default().push((topic.clone(), *p)),
                    _ => {} // no leader now: retried
                }
                true
            });
            let mut results = super::markers::write_here(deps, producer, commit, coordinator_epoch, here).await;
            for (broker, partitions) in remote {
                match image.endpoint_addr(broker, &cluster.listener) {
                    Some(addr) => results.extend(
                        cluster.write_remote(broker, &addr, producer, commit, coordinator_epoch, partitions).await,
                    ),
                    None => results.extend(partitions.into_iter().map(|k| (k, Err(ResponseError::NetworkException)))),
                }
            }
            for (key, outcome) in results {
                match outcome {
                    Ok(()) => pending.retain(|k| *k != key),
                    // A newer epoch or coordinator wrote there already: this marker is stale.
                    Err(e @ (ResponseError::InvalidProducerEpoch | ResponseError::TransactionCoordinatorFenced)) => {
                        tracing::warn!(transactional_id = id, topic = %key.0, partition = key.1, error = ?e, "marker refused");
                        pending.retain(|k| *k != key);
                    }
                    Err(e) => {
                        tracing::debug!(transactional_id = id, topic = %key.0, partition = key.1, error = ?e, "marker to retry")
                    }
                }
            }
            if !pending.is_empty() {
                tokio::time::sleep(MARKER_RETRY_BACKOFF).await;
            }
        }
        Ok(())
    }

    /// Persists a Prepare transition, then completes it.
    async fn end(&self, deps: &Deps<'_>, id: &str, prepared: TxnMeta) -> Result<TxnMeta, ResponseError> {
        self.persist(deps, id, &prepared).await?;
        self.lock().insert(id.to_string(), prepared.clone());
        self.complete(deps, id, prepared).await
    }

    /// Aborts `meta`'s ongoing transaction on the coordinator's initiative (InitProducerId of a
    /// new incarnation, or a timeout): the epoch is bumped once, which fences the old producer,
    /// and the abort markers carry the bumped epoch (Kafka's PrepareEpochFence, then the abort
    /// with the cluster's transaction version, which under either version bumps only once).
    async fn fence_and_abort(&self, deps: &Deps<'_>, id: &str, meta: &TxnMeta) -> Result<TxnMeta, ResponseError> {
        debug_assert_eq!(meta.state, TxnState::Ongoing);
        let next_producer_id = if meta.epoch >= EXHAUSTED_EPOCH { self.new_producer_id(deps)? } else { -1 };
        let prepared = transitions::prepare_end(meta, false, true, deps.cluster_tv(), next_producer_id, now_ms());
        self.end(deps, id, prepared).await
    }

    fn new_producer_id(&self, deps: &Deps<'_>) -> Result<i64, ResponseError> {
        deps.producer_ids.next().map_err(|e| match e {
            crate::txn::producer_ids::NoId::Pending => ResponseError::CoordinatorLoadInProgress,
            crate::txn::producer_ids::NoId::Io(_) => ResponseError::CoordinatorNotAvailable,
        })
    }

    /// InitProducerId with a transactional id: a producer id and a bumped epoch. An open
    /// transaction of the previous incarnation is aborted at a bumped epoch (zombie fencing) and
    /// the client told CONCURRENT_TRANSACTIONS, to retry, as Kafka does.
    pub async fn init_producer_id(
        &self,
        deps: &Deps<'_>,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), ResponseError> {
        self.check_coordinator(id)?;
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let _op = self.op(id).await;
        let now = now_ms();
        let current = self.lock().get(id).cloned();
        let mut meta = match current {
            None => TxnMeta::new(self.new_producer_id(deps)?, timeout_ms, now),
            Some(meta) => meta,
        };
        match transitions::init_producer_id(&meta, expected)? {
            InitPlan::FenceOngoing => {
                // As Kafka: abort the old producer's transaction at a bumped epoch, and let the
                // client retry (it then gets the epoch after that).
                self.fence_and_abort(deps, id, &meta).await?;
                return Err(ResponseError::ConcurrentTransactions);
            }
            // A retry whose answer was lost: the same id and epoch, and the id's state Empty.
            InitPlan::Current => {}
            InitPlan::Rotate { record_last_epoch } => {
                meta.last_epoch = if record_last_epoch { meta.epoch } else { -1 };
                meta.prev_producer_id = meta.producer_id;
                meta.producer_id = self.new_producer_id(deps)?;
                meta.epoch = 0;
            }
            InitPlan::Bump => {
                meta.last_epoch = meta.epoch;
                meta.prev_producer_id = meta.producer_id;
                meta.epoch += 1;
            }
        }
        meta.timeout_ms = timeout_ms;
        meta.state = TxnState::Empty;
        meta.partitions.clear();
        meta.next_producer_id = -1;
        meta.last_update_ms = now;
        self.persist(deps, id, &meta).await?;
        let result = (meta.producer_id, meta.epoch);
        self.lock().insert(id.to_string(), meta);
        Ok(result)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (`tv` 0), and the implicit add of Produce v12+ and
    /// TxnOffsetCommit v5 (`tv` 2).
    pub async fn add_partitions(
        &self,
        deps: &Deps<'_>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<(String, i32)>,
        tv: i16,
    ) -> Result<(), ResponseError> {
        self.check_coordinator(id)?;
        let _op = self.op(id).await;
        let meta = self.lock().get(id).cloned().ok_or(ResponseError::InvalidProducerIdMapping)?;
        if transitions::add_partitions(&meta, producer_id, epoch, &partitions)? {
            return Ok(());
        }
        let next = transitions::prepare_add(&meta, partitions, tv, now_ms());
        self.persist(deps, id, &next).await?;
        self.lock().insert(id.to_string(), next);
        Ok(())
    }

    /// Whether (topic, partition) is in the ongoing transaction of `id` at (`producer_id`,
    /// `epoch`), without adding it. `None` as id: any transactional id with that producer.
    pub fn verify(
        &self,
        id: Option<&str>,
        producer_id: i64,
        epoch: i16,
        partition: &(String, i32),
    ) -> Result<(), ResponseError> {
        if let Some(id) = id {
            self.check_coordinator(id)?;
        }
        let txns = self.lock();
        let meta = match id {
            Some(id) => txns.get(id),
            None => txns.values().find(|m| m.producer_id == producer_id),
        };
        let meta = meta.ok_or(ResponseError::InvalidProducerIdMapping)?;
        transitions::verify(meta, producer_id, epoch, partition)
    }

    /// Whether the implicit add of (topic, partition) has nothing to do: it is already in the
    /// ongoing transaction of `id` at (`producer_id`, `epoch`).
    pub fn in_transaction(&self, id: &str, producer_id: i64, epoch: i16, partition: &(String, i32)) -> bool {
        self.lock().get(id).is_some_and(|m| {
            transitions::add_partitions(m, producer_id, epoch, std::slice::from_ref(partition)) == Ok(true)
        })
    }

    /// EndTxn: two-phase commit or abort. `version` chooses the transaction protocol (v5: TV2,
    /// which bumps the epoch). Returns the producer id and epoch the client continues with.
    pub async fn end_txn(
        &self,
        deps: &Deps<'_>,
        id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        version: i16,
    ) -> Result<(i64, i16), ResponseError> {
        self.check_coordinator(id)?;
        let _op = self.op(id).await;
        let meta = self.lock().get(id).cloned().ok_or(ResponseError::InvalidProducerIdMapping)?;
        let tv2 = version >= 5;
        let plan = if tv2 {
            transitions::end_txn_v2(&meta, producer_id, epoch, commit)?
        } else {
            transitions::end_txn_v1(&meta, producer_id, epoch, commit)?
        };
        match plan {
            EndTxnPlan::Done { producer_id, epoch } => Ok((producer_id, epoch)),
            EndTxnPlan::Prepare { empty } => {
                debug_assert!(!empty || tv2, "only TV2 aborts an empty transaction");
                let next_producer_id =
                    if tv2 && meta.epoch >= EXHAUSTED_EPOCH { self.new_producer_id(deps)? } else { -1 };
                let tv = if tv2 { TV_2 } else { TV_0 };
                let prepared = transitions::prepare_end(&meta, commit, tv2, tv, next_producer_id, now_ms());
                let completed = self.end(deps, id, prepared).await?;
                Ok((completed.producer_id, completed.epoch))
            }
        }
    }

    /// Whether an id has no open transaction and has been idle past `transactional.id.expiration.ms`.
    fn is_idle(&self, m: &TxnMeta, now: i64) -> bool {
        matches!(m.state, TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort)
            && now - m.last_update_ms > self.config.id_expiration_ms
    }

    /// Forgets transactional ids idle for `transactional.id.expiration.ms` (tombstones them).
    pub async fn expire_ids(&self, deps: &Deps<'_>) {
        let now = now_ms();
        let idle: Vec<String> =
            self.lock().iter().filter(|(_, m)| self.is_idle(m, now)).map(|(id, _)| id.clone()).collect();
        for id in idle {
            let op = self.op(&id).await;
            // Still idle now that it is this id's turn (an InitProducerId may have come first).
            let idle = self.lock().get(&id).is_some_and(|m| self.is_idle(m, now));
            if !idle {
                continue;
            }
            if self.write_record(deps, &id, None).await.is_ok() {
                self.lock().remove(&id);
                tracing::info!(transactional_id = %id, "transactional id expired");
            }
            drop(op);
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
            let _op = self.op(&id).await;
            let Some(meta) = self.lock().get(&id).cloned() else { continue };
            if meta.state != TxnState::Ongoing {
                continue;
            }
            tracing::info!(transactional_id = %id, "transaction timed out; aborting and fencing its producer");
            if let Err(e) = self.fence_and_abort(deps, &id, &meta).await {
                tracing::warn!(transactional_id = %id, error = ?e, "cannot abort a timed-out transaction");
            }
        }
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;
