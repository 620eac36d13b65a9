//! The group coordinator: consumer groups (classic protocol) and their committed offsets.
//!
//! Owns: every group's state machine (`state.rs`), the committed-offset cache, and writing
//! both to the internal `__consumer_offsets` topic (`records.rs`), whose partition for a group
//! is Kafka's `abs(javaHashCode(group id)) % offsets.topic.num.partitions`. State changes only
//! by what is replayed from that topic at start (`load`) plus what this process appended, so a
//! restart rebuilds it. Invariants: an OffsetCommit is acknowledged only after its records are
//! fsynced; the cache never holds an offset the log does not. Transactional offsets
//! (TxnOffsetCommit) are written only while their transaction is open in the offsets partition
//! or their verification's guard is current (KIP-890), and only their marker publishes them.
//! The internal-topic I/O here (`append_records`, `await_durable`, `replay`) serves the
//! transaction coordinator's `__transaction_state` too.

pub mod api;
pub mod consumer;
pub mod consumer_api;
pub mod embedded;
pub mod migration;
pub mod ownership;
pub mod records;
pub mod state;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::config::{BrokerConfig, Properties};
use crate::log::flusher::Flusher;
use crate::log::verification::VerificationGuard;
use crate::log::{batch, now_ms};
use crate::metadata::{Topic, TopicRegistry};

/// One group's offsets: (topic, partition) -> committed value.
pub type GroupOffsets = BTreeMap<(String, i32), OffsetValue>;
/// A record to write: key and value (None: tombstone).
type KeyedValue = (Key, Option<Vec<u8>>);
use records::{GroupValue, Key, MemberValue, OffsetValue};
pub use state::{Group, GroupState, JoinRequest, JoinResult, Reply, SyncRequest, SyncResult};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Where the coordinator's records go.
pub struct Storage<'a> {
    pub topics: &'a TopicRegistry,
    pub flusher: &'a Flusher,
}

#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub offsets_topic_partitions: i32,
    pub offsets_topic_segment_bytes: i64,
    /// In a cluster, how long a write to the offsets topic waits for the in-sync replicas.
    pub offsets_commit_timeout: Duration,
    /// In a cluster, the offsets topic's replication factor when it is created.
    pub offsets_topic_replication_factor: i16,
    pub initial_rebalance_delay: Duration,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_group_size: usize,
    pub offset_metadata_max_bytes: usize,
    pub offsets_retention_ms: i64,
    /// KIP-848 consumer groups (`group.consumer.*`).
    pub consumer: consumer::Settings,
}

impl GroupConfig {
    pub fn from_broker(config: &BrokerConfig) -> GroupConfig {
        let p = &config.properties;
        let int = |k: &str, d: i64| p.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(d);
        GroupConfig {
            offsets_topic_partitions: int("offsets.topic.num.partitions", 50).max(1) as i32,
            offsets_topic_segment_bytes: int("offsets.topic.segment.bytes", 104_857_600),
            offsets_commit_timeout: Duration::from_millis(int("offsets.commit.timeout.ms", 5000).max(1) as u64),
            offsets_topic_replication_factor: int("offsets.topic.replication.factor", 3).clamp(1, 32_767) as i16,
            initial_rebalance_delay: Duration::from_millis(int("group.initial.rebalance.delay.ms", 3000).max(0) as u64),
            min_session_timeout_ms: int("group.min.session.timeout.ms", 6000) as i32,
            max_session_timeout_ms: int("group.max.session.timeout.ms", 1_800_000) as i32,
            max_group_size: int("group.max.size", i32::MAX as i64).max(1) as usize,
            offset_metadata_max_bytes: int("offset.metadata.max.bytes", 4096).max(0) as usize,
            offsets_retention_ms: int("offsets.retention.minutes", 10080).saturating_mul(60_000),
            consumer: consumer_api::settings(p),
        }
    }
}

#[derive(Default)]
pub struct Inner {
    pub groups: HashMap<String, Group>,
    pub offsets: HashMap<String, BTreeMap<(String, i32), OffsetValue>>,
    /// Offsets committed inside open transactions: producer id -> group -> offsets. They become
    /// visible when the commit marker reaches the group's offsets partition.
    pub pending_txn: HashMap<i64, HashMap<String, GroupOffsets>>,
    /// KIP-848 consumer groups (a group id is either here or in `groups`, never both).
    pub consumer: HashMap<String, consumer::ConsumerGroup>,
    /// In a cluster, the offsets partitions this broker leads and has loaded (their groups are
    /// coordinated here); `None` on a single node, which coordinates every group.
    pub owned: Option<std::collections::BTreeSet<i32>>,
    /// In a cluster, the offsets partitions this broker leads and is loading, each with the
    /// number of its load (`ownership::Load`): their groups get COORDINATOR_LOAD_IN_PROGRESS.
    pub loading: HashMap<i32, u64>,
    /// The number of the last load started.
    pub loads: u64,
}

pub struct GroupCoordinator {
    pub config: GroupConfig,
    inner: Mutex<Inner>,
    /// Per-group configs (`kafka-configs --entity-type groups`): the GROUP config resources of
    /// the last metadata image adopted. Never held while taking `inner`.
    group_configs: std::sync::RwLock<Arc<HashMap<String, Properties>>>,
    /// In a cluster: writes go through the offsets partitions' replicas (leader epoch, high
    /// watermark), and wait for the in-sync replicas.
    pub replicas: std::sync::OnceLock<Arc<crate::replica::manager::ReplicaManager>>,
}

/// Java's `String.hashCode`, which Kafka uses to place a group on a partition.
pub fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig) -> GroupCoordinator {
        GroupCoordinator {
            config,
            inner: Mutex::new(Inner::default()),
            group_configs: Default::default(),
            replicas: std::sync::OnceLock::new(),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// TxnOffsetCommit's check of the consumer's group membership (KIP-447): as an
    /// OffsetCommit's, and not while the group completes a rebalance.
    pub fn check_txn_offset_commit(
        &self,
        group: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        if let Some(r) = self.consumer_check_commit(group, member_id, instance_id, generation, true, 5) {
            return r;
        }
        let inner = self.lock();
        let g = inner.groups.get(group).ok_or(ResponseError::IllegalGeneration)?;
        g.check_member(member_id, instance_id, generation)?;
        if g.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    pub fn partition_for(&self, group: &str) -> i32 {
        (java_hash(group) & 0x7fff_ffff) % self.config.offsets_topic_partitions
    }

    /// The offsets topic, created on first use as Kafka does.
    pub fn offsets_topic(&self, topics: &TopicRegistry) -> Result<Arc<Topic>, ResponseError> {
        if let Some(topic) = topics.get(OFFSETS_TOPIC) {
            return Ok(topic);
        }
        if self.replicas.get().is_some() {
            // In a cluster the controller creates it (FindCoordinator asks); a broker that
            // hosts none of it coordinates no group.
            return Err(ResponseError::NotCoordinator);
        }
        let mut overrides = Properties::new();
        // As Kafka: compacted, so the latest offset and metadata per key are kept forever.
        overrides.insert("cleanup.policy".into(), "compact".into());
        overrides.insert("compression.type".into(), "producer".into());
        overrides.insert("segment.bytes".into(), self.config.offsets_topic_segment_bytes.to_string());
        match topics.create(OFFSETS_TOPIC, self.config.offsets_topic_partitions, overrides) {
            Ok(topic) => Ok(topic),
            Err(_) => topics.get(OFFSETS_TOPIC).ok_or(ResponseError::CoordinatorNotAvailable),
        }
    }

    /// Rebuilds groups and offsets by replaying `__consumer_offsets` (a single node, at start).
    pub fn load(&self, topics: &TopicRegistry) -> anyhow::Result<()> {
        let Some(topic) = topics.get(OFFSETS_TOPIC) else { return Ok(()) };
        for partition in &topic.partitions {
            let (loaded, _) = self.read_partition(partition, Inner::default(), None)?;
            absorb(&mut self.lock(), loaded);
        }
        Ok(())
    }

    /// Replays offsets partition `partition` from `from` (its start if `None`) into `into`,
    /// which holds the state of what was replayed before; returns it and where the replay
    /// stopped. Takes no coordinator lock.
    fn read_partition(
        &self,
        partition: &crate::log::Partition,
        mut into: Inner,
        from: Option<i64>,
    ) -> anyhow::Result<(Inner, i64)> {
        let now = Instant::now();
        let mut records = 0usize;
        let end = replay_from(partition, from, |record| {
            records += 1;
            replay_record(&mut into, record, partition.index, self.config.offsets_topic_partitions, now);
        })?;
        tracing::info!(
            partition = partition.index,
            groups = into.groups.len() + into.consumer.len(),
            records,
            "group coordinator loaded {OFFSETS_TOPIC}"
        );
        Ok((into, end))
    }

    /// A transaction marker reached offsets partition `partition`: publish (commit) or drop
    /// (abort) the producer's pending offsets of the groups that live there.
    pub fn complete_txn(&self, producer_id: i64, partition: i32, commit: bool) {
        let mut inner = self.lock();
        apply_txn_end(&mut inner, producer_id, partition, self.config.offsets_topic_partitions, commit);
    }

    /// Partitions of `group` with offsets waiting on an open transaction (OffsetFetch with
    /// require_stable answers UNSTABLE_OFFSET_COMMIT for them).
    pub fn pending_txn_partitions(&self, group: &str) -> std::collections::HashSet<(String, i32)> {
        self.lock()
            .pending_txn
            .values()
            .filter_map(|groups| groups.get(group))
            .flat_map(|o| o.keys().cloned())
            .collect()
    }

    /// TxnOffsetCommit: writes the offsets as a transactional batch of `producer_id` at
    /// `epoch`; they stay pending until the transaction's marker. Under the log lock with the
    /// write (Kafka's check at append for coordinator writes): the transaction must be open in
    /// the offsets partition at that epoch or `guard` (of the verification TxnOffsetCommit
    /// started there) still current, else INVALID_TXN_STATE and nothing is written or pending.
    pub fn append_txn_offsets(
        &self,
        topics: &TopicRegistry,
        group: &str,
        (producer_id, epoch, guard): (i64, i16, Option<VerificationGuard>),
        offsets: Vec<((String, i32), OffsetValue)>,
    ) -> Result<Option<(Arc<crate::log::Partition>, i64)>, ResponseError> {
        if offsets.is_empty() {
            return Ok(None);
        }
        let partition = self.group_partition(topics, group)?;
        let mut inner = self.lock();
        let entries = offsets
            .iter()
            .map(|((t, p), v)| {
                (Key::Offset { group: group.to_string(), topic: t.clone(), partition: *p }.encode(), Some(v.encode()))
            })
            .collect();
        let txn = Some((producer_id, epoch, guard));
        let end = append_batch(self.replicas.get().map(|r| &**r), &partition, entries, txn).map_err(|e| match e {
            crate::error::LogError::InvalidProducerEpoch(_) => ResponseError::InvalidProducerEpoch,
            crate::error::LogError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
            e => {
                tracing::error!(error = %e, "cannot write to {OFFSETS_TOPIC}");
                ResponseError::CoordinatorNotAvailable
            }
        })?;
        let pending = inner.pending_txn.entry(producer_id).or_default().entry(group.to_string()).or_default();
        pending.extend(offsets);
        Ok(Some((partition, end)))
    }

    /// Appends records for `group` to its offsets partition; returns (partition, end offset)
    /// for the fsync the caller must await before acknowledging.
    pub fn append(
        &self,
        topics: &TopicRegistry,
        group: &str,
        entries: Vec<(Key, Option<Vec<u8>>)>,
    ) -> Result<Option<(Arc<crate::log::Partition>, i64)>, ResponseError> {
        if entries.is_empty() {
            return Ok(None);
        }
        self.append_encoded(topics, group, entries.into_iter().map(|(k, v)| (k.encode(), v)).collect())
    }

    /// `group`'s partition of the offsets topic (the topic created on first use).
    fn group_partition(
        &self,
        topics: &TopicRegistry,
        group: &str,
    ) -> Result<Arc<crate::log::Partition>, ResponseError> {
        let topic = self.offsets_topic(topics)?;
        topic.partitions.get(self.partition_for(group) as usize).cloned().ok_or(ResponseError::CoordinatorNotAvailable)
    }

    /// `append` of records already encoded (key, value).
    fn append_encoded(
        &self,
        topics: &TopicRegistry,
        group: &str,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<Option<(Arc<crate::log::Partition>, i64)>, ResponseError> {
        let partition = self.group_partition(topics, group)?;
        let end = append_records(self.replicas.get().map(|r| &**r), &partition, records).map_err(|e| {
            tracing::error!(error = %e, "cannot write to {OFFSETS_TOPIC}");
            ResponseError::CoordinatorNotAvailable
        })?;
        Ok(Some((partition, end)))
    }

    /// Waits for an append to be durable (`await_durable`), within `offsets.commit.timeout.ms`
    /// in a cluster.
    pub async fn sync_to_disk(
        &self,
        flusher: &Flusher,
        written: Option<(Arc<crate::log::Partition>, i64)>,
    ) -> Result<(), ResponseError> {
        let Some((partition, end)) = written else { return Ok(()) };
        let replicas = self.replicas.get().map(|r| &**r);
        await_durable(replicas, flusher, partition, end, self.config.offsets_commit_timeout).await
    }

    /// Persists the metadata of every group marked dirty (after a rebalance step).
    pub async fn persist_dirty(&self, storage: &Storage<'_>) {
        let pending: Vec<(String, Option<Vec<u8>>)> = {
            let mut inner = self.lock();
            inner
                .groups
                .values_mut()
                .filter(|g| g.dirty)
                .map(|g| {
                    g.dirty = false;
                    (g.id.clone(), Some(group_value(g).encode()))
                })
                .collect()
        };
        for (group, value) in pending {
            let written = self.append(storage.topics, &group, vec![(Key::Group { group: group.clone() }, value)]);
            match written {
                Ok(w) => {
                    let _ = self.sync_to_disk(storage.flusher, w).await;
                }
                Err(e) => tracing::error!(group = %group, error = %e, "cannot persist group metadata"),
            }
        }
    }

    /// Timer work for every group, then persistence of what changed.
    pub async fn tick(&self, storage: &Storage<'_>) {
        {
            let mut inner = self.lock();
            let now = Instant::now();
            let now_ms = now_ms();
            for group in inner.groups.values_mut() {
                group.tick(now, now_ms);
            }
        }
        self.persist_dirty(storage).await;
        self.consumer_tick(storage).await;
    }

    /// Expires offsets of groups that have been empty for `offsets.retention.minutes` (and of
    /// standalone committers by commit time), then removes empty groups with no offsets.
    pub async fn expire_offsets(&self, storage: &Storage<'_>) {
        let now = now_ms();
        let retention = self.config.offsets_retention_ms;
        let mut tombstones: Vec<(String, Vec<KeyedValue>)> = Vec::new();
        {
            let mut inner = self.lock();
            let Inner { groups, offsets, consumer, .. } = &mut *inner;
            for (group_id, group_offsets) in offsets.iter_mut() {
                let group = groups.get(group_id);
                if group.is_some_and(|g| g.state != GroupState::Empty)
                    || consumer.get(group_id).is_some_and(|g| !g.members.is_empty())
                {
                    continue;
                }
                let empty_since = group.map(|g| g.state_timestamp_ms);
                let expired: Vec<(String, i32)> = group_offsets
                    .iter()
                    .filter(|(_, v)| {
                        now - empty_since.unwrap_or(v.commit_timestamp).max(v.commit_timestamp) > retention
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                let mut entries = Vec::new();
                for (topic, partition) in expired {
                    group_offsets.remove(&(topic.clone(), partition));
                    entries.push((Key::Offset { group: group_id.clone(), topic, partition }, None));
                }
                if !entries.is_empty() {
                    tombstones.push((group_id.clone(), entries));
                }
            }
            offsets.retain(|_, o| !o.is_empty());
            let dead: Vec<String> = groups
                .values()
                .filter(|g| g.state == GroupState::Empty && g.pending.is_empty() && !offsets.contains_key(&g.id))
                .map(|g| g.id.clone())
                .collect();
            for id in dead {
                groups.remove(&id);
                tombstones.push((id.clone(), vec![(Key::Group { group: id }, None)]));
            }
        }
        for (group, entries) in tombstones {
            if let Ok(w) = self.append(storage.topics, &group, entries) {
                let _ = self.sync_to_disk(storage.flusher, w).await;
            }
        }
    }
}

/// Waits until a coordinator's append to an internal topic's `partition`, ending before `end`,
/// is durable: in a cluster committed by the in-sync replicas within `timeout` (Kafka's
/// coordinator writes are acks=all), then fsynced here. Errors as Kafka maps a failed
/// coordinator write: NOT_COORDINATOR once leadership moved, else COORDINATOR_NOT_AVAILABLE.
pub async fn await_durable(
    replicas: Option<&crate::replica::manager::ReplicaManager>,
    flusher: &Flusher,
    partition: Arc<crate::log::Partition>,
    end: i64,
    timeout: Duration,
) -> Result<(), ResponseError> {
    if let Some(rm) = replicas {
        let deadline = tokio::time::Instant::now() + timeout;
        match rm.wait_replicated(&partition.topic, partition.index, end, deadline).await {
            Ok(()) => {}
            Err(ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError) => {
                return Err(ResponseError::NotCoordinator)
            }
            Err(e) => {
                tracing::warn!(error = ?e, "a write to {} was not replicated", partition.topic);
                return Err(ResponseError::CoordinatorNotAvailable);
            }
        }
    }
    let topic = partition.topic.clone();
    flusher.flush(partition, end).await.map_err(|e| {
        tracing::error!(error = %e, "fsync of {topic} failed");
        ResponseError::CoordinatorNotAvailable
    })
}

/// Appends (key, value) records as one batch to an internal topic's partition; returns the
/// end offset to fsync up to.
pub fn append_records(
    replicas: Option<&crate::replica::manager::ReplicaManager>,
    partition: &crate::log::Partition,
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
) -> Result<i64, crate::error::LogError> {
    append_batch(replicas, partition, entries, None)
}

/// Like `append_records`, optionally as a transactional batch of (producer id, epoch).
fn append_batch(
    replicas: Option<&crate::replica::manager::ReplicaManager>,
    partition: &crate::log::Partition,
    entries: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    txn: Option<(i64, i16, Option<VerificationGuard>)>,
) -> Result<i64, crate::error::LogError> {
    let now = now_ms();
    let (producer_id, producer_epoch, guard) = txn.unwrap_or((-1, -1, None));
    let records: Vec<Record> = entries
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: txn.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // No sequence numbers: coordinator writes are not deduplicated (as in Kafka).
            sequence: i as i32 - 1,
            timestamp: now,
            key: Some(Bytes::from(key)),
            value: value.map(Bytes::from),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .map_err(|e| crate::error::LogError::InvalidRecord(e.to_string()))?;
    let mut log = partition.log();
    let verified = log.has_open_txn(producer_id, producer_epoch)
        || guard.is_some_and(|g| log.txn_verification_holds(producer_id, g));
    if txn.is_some() && !verified {
        return Err(crate::error::LogError::InvalidTxnState(format!(
            "producer {producer_id} epoch {producer_epoch} has no ongoing transaction in {}-{}",
            partition.topic, partition.index
        )));
    }
    let (bytes, summary) = batch::validate_internal(buf.to_vec(), log.config(), now)?;
    let info = match replicas {
        None => crate::replica::append_as_leader(&mut log, bytes, &summary, now)?,
        // In a cluster, as the partition's leader (its epoch; the high watermark follows the ISR).
        Some(rm) => {
            let replica = rm.get(&partition.topic, partition.index).ok_or(crate::error::LogError::NotLeader)?;
            replica.append(&mut log, bytes, &summary, now, false).map_err(|_| crate::error::LogError::NotLeader)??
        }
    };
    Ok(info.last_offset + 1)
}

/// Calls `f` with every record of an internal topic's partition, oldest first (`replay_from`
/// its log start offset); returns the offset it stopped at.
pub fn replay(partition: &crate::log::Partition, f: impl FnMut(&Record)) -> anyhow::Result<i64> {
    replay_from(partition, None, f)
}

/// Calls `f` with every record from offset `from` (the log start offset if `None` or below it)
/// up to the log end offset as it was when called, oldest first; returns the offset after the
/// last batch read. The partition's lock is held only while each chunk is located, never while
/// its bytes are read, so appends and fetches of the partition go on meanwhile.
pub fn replay_from(
    partition: &crate::log::Partition,
    from: Option<i64>,
    mut f: impl FnMut(&Record),
) -> anyhow::Result<i64> {
    let (mut offset, end) = {
        let log = partition.log();
        (from.unwrap_or(i64::MIN).max(log.log_start_offset()), log.log_end_offset())
    };
    while offset < end {
        let slice = partition.log().read_slice(offset, end, 1 << 20, true)?;
        let Some(slice) = slice else { break };
        let mut buf = Bytes::from(slice.read_to_vec()?);
        let before = offset;
        while !buf.is_empty() {
            // A batch's last offset from its header: a batch the cleaner emptied still moves the
            // replay past it.
            let last = (buf.len() >= batch::HEADER_BYTES).then(|| batch::Header::new(&buf).last_offset());
            let set = RecordBatchDecoder::decode(&mut buf)
                .map_err(|e| anyhow::anyhow!("corrupt batch in {}-{}: {e}", partition.topic, partition.index))?;
            for record in &set.records {
                if record.offset < offset {
                    continue;
                }
                offset = record.offset + 1;
                f(record);
            }
            if let Some(last) = last {
                offset = offset.max(last + 1);
            }
        }
        if offset == before {
            anyhow::bail!("no progress replaying {}-{} at offset {offset}", partition.topic, partition.index);
        }
    }
    Ok(offset)
}

/// Applies one record replayed from offsets partition `partition` to `inner`.
fn replay_record(inner: &mut Inner, record: &Record, partition: i32, partitions: i32, now: Instant) {
    if record.control {
        let commit = record.key.as_deref().is_some_and(|k| k.len() >= 4 && k[3] == 1);
        apply_txn_end(inner, record.producer_id, partition, partitions, commit);
        return;
    }
    if let Some(key) = record.key.as_deref().and_then(consumer::records::ConsumerKey::decode) {
        if !record.transactional {
            consumer_api::replay(inner, &key, record.value.as_deref());
        }
        return;
    }
    let Some(key) = record.key.as_deref().and_then(Key::decode) else { return };
    if record.transactional {
        if let (Key::Offset { group, topic, partition }, Some(v)) =
            (&key, record.value.as_deref().and_then(OffsetValue::decode))
        {
            inner
                .pending_txn
                .entry(record.producer_id)
                .or_default()
                .entry(group.clone())
                .or_default()
                .insert((topic.clone(), *partition), v);
        }
        return;
    }
    apply(inner, key, record.value.as_deref(), now);
}

/// Adds the groups `loaded` from one offsets partition to `inner`, which holds none of them.
fn absorb(inner: &mut Inner, loaded: Inner) {
    inner.groups.extend(loaded.groups);
    inner.offsets.extend(loaded.offsets);
    inner.consumer.extend(loaded.consumer);
    for (producer_id, groups) in loaded.pending_txn {
        inner.pending_txn.entry(producer_id).or_default().extend(groups);
    }
}

fn apply_txn_end(inner: &mut Inner, producer_id: i64, partition: i32, partitions: i32, commit: bool) {
    let Some(groups) = inner.pending_txn.get_mut(&producer_id) else { return };
    let here: Vec<String> =
        groups.keys().filter(|g| (java_hash(g) & 0x7fff_ffff) % partitions == partition).cloned().collect();
    for group in here {
        let offsets = groups.remove(&group).unwrap_or_default();
        if commit {
            inner.offsets.entry(group).or_default().extend(offsets);
        }
    }
    if inner.pending_txn.get(&producer_id).is_some_and(|g| g.is_empty()) {
        inner.pending_txn.remove(&producer_id);
    }
}

/// Applies one replayed record to the in-memory state.
fn apply(inner: &mut Inner, key: Key, value: Option<&[u8]>, now: Instant) {
    match key {
        Key::Offset { group, topic, partition } => match value.and_then(OffsetValue::decode) {
            Some(v) => {
                inner.offsets.entry(group).or_default().insert((topic, partition), v);
            }
            None => {
                if let Some(o) = inner.offsets.get_mut(&group) {
                    o.remove(&(topic, partition));
                    if o.is_empty() {
                        inner.offsets.remove(&group);
                    }
                }
            }
        },
        Key::Group { group } => match value.and_then(GroupValue::decode) {
            Some(v) => {
                inner.consumer.remove(&group);
                inner.groups.insert(group.clone(), restore_group(&group, v, now));
            }
            None => {
                inner.groups.remove(&group);
            }
        },
    }
}

pub(crate) fn group_value(g: &Group) -> GroupValue {
    let protocol = g.protocol.clone().unwrap_or_default();
    GroupValue {
        protocol_type: g.protocol_type.clone().unwrap_or_default(),
        generation: g.generation,
        protocol: g.protocol.clone(),
        leader: g.leader.clone(),
        state_timestamp: g.state_timestamp_ms,
        members: g
            .members
            .values()
            .map(|m| MemberValue {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                session_timeout_ms: m.session_timeout.as_millis() as i32,
                subscription: m.metadata_for(&protocol),
                assignment: m.assignment.clone(),
            })
            .collect(),
    }
}

/// A group as stored: members get a fresh session to come back and heartbeat (as in Kafka after
/// a coordinator move); those that do not are expired by the usual timers.
fn restore_group(id: &str, v: GroupValue, now: Instant) -> Group {
    let mut g = Group::new(id, v.state_timestamp);
    g.generation = v.generation;
    g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
    g.protocol = v.protocol.clone();
    g.leader = v.leader;
    for m in v.members {
        if let Some(instance) = &m.instance_id {
            g.instances.insert(instance.clone(), m.member_id.clone());
        }
        let session = Duration::from_millis(m.session_timeout_ms.max(0) as u64);
        g.members.insert(
            m.member_id.clone(),
            state::Member {
                id: m.member_id,
                instance_id: m.instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                session_timeout: session,
                rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                protocols: vec![(v.protocol.clone().unwrap_or_default(), m.subscription)],
                assignment: m.assignment,
                heartbeat_deadline: now + session,
                join_waiter: None,
                sync_waiter: None,
            },
        );
    }
    g.state = if g.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn expired_offsets_and_empty_groups_are_tombstoned_and_stay_gone_after_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mut props = crate::config::Properties::new();
        props.insert("log.dirs".into(), dir.path().display().to_string());
        props.insert("offsets.topic.num.partitions".into(), "3".into());
        let config = BrokerConfig::from_properties(props).unwrap();
        let topics = TopicRegistry::open(&config).unwrap();
        let flusher = Flusher::start();
        let storage = Storage { topics: &topics, flusher: &flusher };
        let mut group_config = GroupConfig::from_broker(&config);
        group_config.offsets_retention_ms = 60_000;
        let coordinator = GroupCoordinator::new(group_config.clone());
        let old =
            OffsetValue { offset: 5, leader_epoch: 0, metadata: "m".into(), commit_timestamp: now_ms() - 120_000 };
        let fresh = OffsetValue { offset: 9, leader_epoch: 0, metadata: String::new(), commit_timestamp: now_ms() };
        for (group, value) in [("old-group", old), ("fresh-group", fresh)] {
            let key = Key::Offset { group: group.into(), topic: "t".into(), partition: 0 };
            let written = coordinator.append(&topics, group, vec![(key, Some(value.encode()))]).unwrap();
            coordinator.sync_to_disk(&flusher, written).await.unwrap();
            coordinator.lock().offsets.entry(group.into()).or_default().insert(("t".into(), 0), value);
        }
        coordinator.expire_offsets(&storage).await;
        {
            let inner = coordinator.lock();
            assert!(!inner.offsets.contains_key("old-group"), "offsets older than the retention expire");
            assert_eq!(inner.offsets["fresh-group"][&("t".to_string(), 0)].offset, 9);
        }
        let reloaded = GroupCoordinator::new(group_config);
        reloaded.load(&topics).unwrap();
        let inner = reloaded.lock();
        assert!(!inner.offsets.contains_key("old-group"), "the tombstone is replayed");
        assert_eq!(inner.offsets["fresh-group"][&("t".to_string(), 0)].offset, 9);
    }

    #[test]
    fn java_hash_matches_java() {
        // Values from java.lang.String#hashCode.
        assert_eq!(java_hash(""), 0);
        assert_eq!(java_hash("a"), 97);
        assert_eq!(java_hash("my-group"), -1_906_497_762);
        assert_eq!(java_hash("console-consumer-12345"), 158_455_506);
    }
}

#[cfg(test)]
#[path = "txn_offsets_tests.rs"]
mod txn_offsets_tests;
