//! The replica manager of a broker in a controller quorum (Kafka's `ReplicaManager` and
//! `Partition`): from each metadata image it opens the logs of the partitions assigned to this
//! broker (publishing them to the topic registry, the handlers' view), decides each one's role,
//! leader (driving `state::LeaderState`) or follower (fetched by `fetcher.rs`), and closes and
//! deletes the replicas the image no longer assigns here. Every topic of the image is in the
//! registry, with its partition count, hosting some of its partitions here or none.
//!
//! Directories found on disk at start are never deleted: once this broker has caught up with
//! the metadata log and been unfenced (`settle`, Kafka's first publish), those the image does not
//! want here (topic gone, another topic id in their `partition.metadata`, replicas moved away)
//! are renamed `-stray` (`metadata::log_dirs::mark_stray`); until then they are left as they are,
//! and a directory holding another topic's log is never opened for a topic of the same name.
//! Every partition directory opened here records its topic id (`log::partition_metadata`).
//!
//! As leader it appends at the image's leader epoch, moves the high watermark from its
//! followers' fetches (the minimum log end of the ISR), lets `acks=all` writes wait for it,
//! answers followers whose log diverged with the epoch to truncate to, and proposes ISR changes
//! to the controller (AlterPartition, one in flight per partition, sent by `alter_partition.rs`).
//!
//! Lock order: a partition's log, then its replica role. Invariants: a replica is leader only at
//! the leader epoch the image names for this broker; the high watermark recorded in the log is
//! the leader state's and never passes the log end; a partition is hosted in the registry exactly
//! while this broker is in its replica set in the image.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use kafka_protocol::error::ResponseError;
use tokio::sync::{watch, Notify};
use uuid::Uuid;

use super::state::{end_offset_for_epoch, AckError, IsrProposal, LeaderState, ReplicaSettings};
use crate::config::TopicConfig;
use crate::error::LogError;
use crate::log::batch::BatchSummary;
use crate::log::dir_health::DirHealth;
use crate::log::partition_log::partition_dir;
use crate::log::partition_metadata;
use crate::log::{AppendInfo, Partition, PartitionLog};
use crate::metadata::image::{MetadataImage, PartitionImage, TOPIC_RESOURCE};
use crate::metadata::{HostedPartitions, Topic, TopicRegistry};

/// KIP-966's feature: with it the high watermark waits for `min.insync.replicas`.
const ELR_FEATURE: &str = "eligible.leader.replicas.version";

/// What this broker is for one partition.
#[derive(Debug)]
pub enum Role {
    Leader(LeaderState),
    Follower { leader: i32, leader_epoch: i32 },
}

/// One partition hosted here, with its role.
#[derive(Debug)]
pub struct Replica {
    pub topic_id: Uuid,
    pub partition: Arc<Partition>,
    role: Mutex<Role>,
    /// Bumped whenever the high watermark, the ISR or the role changes (acks=all waiters).
    changed: watch::Sender<u64>,
    /// The broker-wide "something was appended or committed" signal, bumped with `changed`:
    /// long-polling fetches (followers waiting for an append, consumers for the high
    /// watermark) wake on it.
    appended: watch::Sender<u64>,
}

impl Replica {
    fn role(&self) -> MutexGuard<'_, Role> {
        self.role.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// This broker no longer hosts the partition (the image dropped it from the replicas, e.g. a
    /// reassignment moved it away): it leads nothing any more, so pending `acks=all` waiters
    /// answer NOT_LEADER_OR_FOLLOWER now, as Kafka completes a removed partition's delayed
    /// produces, instead of holding the producer until their deadline.
    fn stop(&self) {
        let leader_epoch = self.leader().1;
        *self.role() = Role::Follower { leader: -1, leader_epoch };
        self.bump();
    }

    /// The leader and leader epoch this replica knows.
    pub fn leader(&self) -> (i32, i32) {
        match &*self.role() {
            Role::Leader(s) => (s.node_id, s.leader_epoch),
            Role::Follower { leader, leader_epoch } => (*leader, *leader_epoch),
        }
    }

    /// As leader, the log end offset when this broker became leader at its current epoch
    /// (Kafka's `leaderEpochStartOffsetOpt`); `None` as follower.
    pub fn epoch_start_offset(&self) -> Option<i64> {
        match &*self.role() {
            Role::Leader(s) => Some(s.epoch_start_offset),
            Role::Follower { .. } => None,
        }
    }

    /// Kafka's check of a request's `current_leader_epoch` (KIP-320, -1 skips it), then that
    /// this broker leads the partition.
    pub fn check_leader(&self, requested_epoch: i32) -> Result<(), ResponseError> {
        let (is_leader, epoch) = match &*self.role() {
            Role::Leader(s) => (true, s.leader_epoch),
            Role::Follower { leader_epoch, .. } => (false, *leader_epoch),
        };
        match requested_epoch {
            r if r >= 0 && r < epoch => Err(ResponseError::FencedLeaderEpoch),
            r if r > epoch => Err(ResponseError::UnknownLeaderEpoch),
            _ if !is_leader => Err(ResponseError::NotLeaderOrFollower),
            _ => Ok(()),
        }
    }

    /// Appends a validated client batch as leader at its leader epoch; `acks_all` refuses it
    /// first while the ISR is smaller than `min.insync.replicas`. The outer error is the
    /// replica's (not leader, not enough replicas), the inner one the log's.
    pub fn append(
        &self,
        log: &mut PartitionLog,
        batch: impl AsRef<[u8]>,
        summary: &BatchSummary,
        now_ms: i64,
        acks_all: bool,
    ) -> Result<Result<AppendInfo, LogError>, ResponseError> {
        self.append_as_leader(log, now_ms, acks_all, |log, leader_epoch| {
            log.append(batch, summary, leader_epoch, now_ms)
        })
    }

    /// Appends a transaction marker as leader (WriteTxnMarkers, or this broker's transaction
    /// coordinator): the marker's offset. The outer error is the replica's, the inner the log's.
    pub fn append_marker(
        &self,
        log: &mut PartitionLog,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Result<Result<i64, LogError>, ResponseError> {
        self.append_as_leader(log, now_ms, false, |log, leader_epoch| {
            log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch, leader_epoch, now_ms)
        })
    }

    /// `append` (given the leader epoch) done as leader: refused when this broker does not lead
    /// (or, with `acks_all`, while the ISR is too small); the high watermark follows the log end.
    fn append_as_leader<T>(
        &self,
        log: &mut PartitionLog,
        now_ms: i64,
        acks_all: bool,
        append: impl FnOnce(&mut PartitionLog, i32) -> Result<T, LogError>,
    ) -> Result<Result<T, LogError>, ResponseError> {
        let mut role = self.role();
        let Role::Leader(state) = &mut *role else { return Err(ResponseError::NotLeaderOrFollower) };
        if acks_all && state.check_append_acks_all().is_err() {
            return Err(ResponseError::NotEnoughReplicas);
        }
        let appended = match append(log, state.leader_epoch) {
            Ok(appended) => appended,
            Err(e) => return Ok(Err(e)),
        };
        if state.maybe_advance_high_watermark(log.log_end_offset(), now_ms) {
            log.advance_high_watermark(state.high_watermark);
        }
        drop(role);
        self.bump();
        Ok(Ok(appended))
    }

    /// A follower fetched at `fetch_offset`: its state, the high watermark, and an ISR
    /// expansion to propose. Returns whether the high watermark moved.
    pub fn on_follower_fetch(
        &self,
        log: &mut PartitionLog,
        follower: i32,
        fetch_offset: i64,
        now_ms: i64,
    ) -> (bool, Option<IsrProposal>) {
        let mut role = self.role();
        let Role::Leader(state) = &mut *role else { return (false, None) };
        let log_end = log.log_end_offset();
        if !state.on_follower_fetch(follower, fetch_offset.min(log_end), log_end, now_ms) {
            return (false, None);
        }
        let moved = state.maybe_advance_high_watermark(log_end, now_ms);
        if moved {
            log.advance_high_watermark(state.high_watermark);
        }
        let proposal = state.maybe_expand_isr();
        drop(role);
        if moved || proposal.is_some() {
            self.bump();
        }
        (moved, proposal)
    }

    /// For a follower fetching at `fetch_offset` after `last_fetched_epoch`: where its log
    /// diverged from this leader's, `(epoch, end offset)` (Kafka's diverging epoch), if it did.
    pub fn diverging_epoch(log: &PartitionLog, last_fetched_epoch: i32, fetch_offset: i64) -> Option<(i32, i64)> {
        if last_fetched_epoch < 0 {
            return None;
        }
        let (epoch, end) = end_offset_for_epoch(log.epochs(), log.log_end_offset(), last_fetched_epoch)?;
        (epoch < last_fetched_epoch || end < fetch_offset).then_some((epoch, end))
    }

    /// ISR shrink check (`replica.lag.time.max.ms`).
    fn maybe_shrink_isr(&self, now_ms: i64) -> Option<IsrProposal> {
        let log = self.partition.log();
        let mut role = self.role();
        let Role::Leader(state) = &mut *role else { return None };
        state.maybe_shrink_isr(log.log_end_offset(), now_ms)
    }

    /// The controller answered an ISR proposal made at `leader_epoch`.
    pub fn on_isr_committed(&self, leader_epoch: i32, committed: Option<(Vec<i32>, i32)>, now_ms: i64) {
        let mut log = self.partition.log();
        let mut role = self.role();
        let Role::Leader(state) = &mut *role else { return };
        if state.leader_epoch != leader_epoch {
            return;
        }
        state.on_isr_committed(committed);
        if state.maybe_advance_high_watermark(log.log_end_offset(), now_ms) {
            log.advance_high_watermark(state.high_watermark);
        }
        drop(role);
        self.bump();
    }

    /// Waits until an `acks=all` write ending before `required_offset` is committed (or the
    /// ISR shrank below `min.insync.replicas` meanwhile, or this broker stopped leading), at
    /// most until `deadline`: the error to answer, if any.
    pub async fn wait_acks_all(&self, required_offset: i64, deadline: tokio::time::Instant) -> Option<ResponseError> {
        let mut changed = self.changed.subscribe();
        loop {
            changed.mark_unchanged();
            let outcome = match &*self.role() {
                Role::Leader(s) => s.acks_all_outcome(required_offset),
                Role::Follower { .. } => return Some(ResponseError::NotLeaderOrFollower),
            };
            match outcome {
                Some(Ok(())) => return None,
                Some(Err(AckError::NotEnoughReplicasAfterAppend)) => {
                    return Some(ResponseError::NotEnoughReplicasAfterAppend)
                }
                Some(Err(AckError::NotEnoughReplicas)) => return Some(ResponseError::NotEnoughReplicas),
                None => {}
            }
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() {
                return Some(ResponseError::RequestTimedOut);
            }
        }
    }
}

/// What the replica manager needs from its broker.
#[derive(Debug, Clone)]
pub struct ReplicaSetup {
    pub node_id: i32,
    /// Where replicas are kept (the first log directory).
    pub log_dir: PathBuf,
    /// That directory's health, shared by every replica opened here: an I/O error in any of them
    /// (or in the high-watermark checkpoint) fails the directory, and as it is also the metadata
    /// log's, the broker stops, as Kafka halts when its only log directory fails.
    pub health: Arc<DirHealth>,
    pub replica_lag_time_max_ms: i64,
}

/// The replicas hosted here, by (topic, partition) and by (topic id, partition).
#[derive(Default)]
struct Hosted {
    by_name: HashMap<(String, i32), Arc<Replica>>,
    by_id: HashMap<(Uuid, i32), Arc<Replica>>,
}

impl Hosted {
    /// The replica of `key`, made by `new` if not hosted yet.
    fn get_or_insert(&mut self, key: (String, i32), new: impl FnOnce() -> Replica) -> Arc<Replica> {
        let partition = key.1;
        let replica = self.by_name.entry(key).or_insert_with(|| Arc::new(new()));
        self.by_id.entry((replica.topic_id, partition)).or_insert_with(|| replica.clone());
        replica.clone()
    }

    fn remove(&mut self, key: &(String, i32)) -> Option<Arc<Replica>> {
        let removed = self.by_name.remove(key)?;
        let id = (removed.topic_id, key.1);
        if self.by_id.get(&id).is_some_and(|r| Arc::ptr_eq(r, &removed)) {
            self.by_id.remove(&id);
        }
        Some(removed)
    }
}

pub struct ReplicaManager {
    setup: ReplicaSetup,
    replicas: RwLock<Hosted>,
    /// ISR changes to send to the controller: (topic id, partition, proposal).
    proposals: Mutex<Vec<(Uuid, i32, IsrProposal)>>,
    pub proposed: Notify,
    /// Bumped after every image applied (the follower fetcher waits on it).
    generation: watch::Sender<u64>,
    /// The broker-wide "something was appended or committed" signal (long-polling fetches).
    appended: watch::Sender<u64>,
    /// Each follower's broker epoch, from its last fetch (sent with ISR changes, KIP-903).
    follower_epochs: Mutex<HashMap<i32, i64>>,
    /// High watermarks of the last checkpoint before this start (`checkpoint.rs`).
    recovered: HashMap<(String, i32), i64>,
    /// Whether this broker caught up with the metadata log since it started (`settle`; Kafka's
    /// first publish, which starts its log manager): until then no partition found on disk at
    /// start is removed, whatever a (possibly stale) image says.
    settled: std::sync::atomic::AtomicBool,
    /// The partition directories found on disk at start (scanned at the first `apply`) that no
    /// image applied since settling has confirmed yet: one that image does not want is stray
    /// (renamed, kept), never deleted. None before the first `apply`.
    found_at_start: Mutex<Option<BTreeSet<(String, i32)>>>,
}

impl ReplicaManager {
    pub fn new(setup: ReplicaSetup, appended: watch::Sender<u64>) -> ReplicaManager {
        ReplicaManager {
            replicas: RwLock::new(Hosted::default()),
            proposals: Mutex::new(Vec::new()),
            proposed: Notify::new(),
            generation: watch::channel(0).0,
            appended,
            follower_epochs: Mutex::new(HashMap::new()),
            recovered: super::checkpoint::read(&setup.log_dir),
            setup,
            settled: Default::default(),
            found_at_start: Mutex::new(None),
        }
    }

    /// This broker caught up with the metadata log (and was unfenced): from the next `apply`,
    /// partitions found on disk at start that the image does not want are marked stray.
    pub fn settle(&self) {
        self.settled.store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_settled(&self) -> bool {
        self.settled.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn node_id(&self) -> i32 {
        self.setup.node_id
    }

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Replica>> {
        self.hosted().by_name.get(&(topic.to_string(), partition)).cloned()
    }

    /// Waits until this broker's write to `topic`/`partition` ending before `end` is committed
    /// (acks=all, as coordinator writes and markers are), at most until `deadline`.
    pub async fn wait_replicated(
        &self,
        topic: &str,
        partition: i32,
        end: i64,
        deadline: tokio::time::Instant,
    ) -> Result<(), ResponseError> {
        let replica = self.get(topic, partition).ok_or(ResponseError::NotLeaderOrFollower)?;
        match replica.wait_acks_all(end, deadline).await {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// The partitions this broker follows: (topic id, partition, leader, leader epoch, replica).
    pub fn followers(&self) -> Vec<(Uuid, i32, i32, i32, Arc<Replica>)> {
        let replicas = self.hosted();
        let mut out: Vec<_> = replicas
            .by_name
            .iter()
            .filter_map(|((_, p), r)| match &*r.role() {
                Role::Follower { leader, leader_epoch } => Some((r.topic_id, *p, *leader, *leader_epoch, r.clone())),
                Role::Leader(_) => None,
            })
            .collect();
        out.sort_by_key(|f| (f.0, f.1));
        out
    }

    /// Records the broker epoch a follower fetched with.
    pub fn set_follower_epoch(&self, follower: i32, broker_epoch: i64) {
        self.follower_epochs.lock().unwrap_or_else(|p| p.into_inner()).insert(follower, broker_epoch);
    }

    /// The broker epoch `follower` last fetched with (-1: unknown).
    pub fn follower_epoch(&self, follower: i32) -> i64 {
        self.follower_epochs.lock().unwrap_or_else(|p| p.into_inner()).get(&follower).copied().unwrap_or(-1)
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Wakes long-polling fetches (the high watermark moved).
    pub fn notify_appended(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Queues an ISR change for the controller.
    pub fn propose(&self, topic_id: Uuid, partition: i32, proposal: IsrProposal) {
        self.proposals.lock().unwrap_or_else(|p| p.into_inner()).push((topic_id, partition, proposal));
        self.proposed.notify_one();
    }

    pub fn take_proposals(&self) -> Vec<(Uuid, i32, IsrProposal)> {
        std::mem::take(&mut *self.proposals.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The replica of (topic id, partition), if hosted here.
    pub fn by_id(&self, topic_id: Uuid, partition: i32) -> Option<Arc<Replica>> {
        self.hosted().by_id.get(&(topic_id, partition)).cloned()
    }

    fn hosted(&self) -> std::sync::RwLockReadGuard<'_, Hosted> {
        self.replicas.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes every hosted partition's high watermark to the checkpoint file.
    pub fn checkpoint(&self) {
        let replicas: Vec<Arc<Replica>> = self.hosted().by_name.values().cloned().collect();
        let mut entries: Vec<(String, i32, i64)> = replicas
            .iter()
            .map(|r| (r.partition.topic.clone(), r.partition.index, r.partition.log().high_watermark()))
            .collect();
        entries.sort();
        if let Err(e) = super::checkpoint::write(&self.setup.log_dir, &entries) {
            tracing::warn!(error = %e, "writing the high-watermark checkpoint failed");
            self.setup.health.fail(&e);
        }
    }

    /// ISR shrink checks of every partition led here.
    pub fn tick(&self, now_ms: i64) {
        let replicas: Vec<((String, i32), Arc<Replica>)> =
            self.hosted().by_name.iter().map(|(k, r)| (k.clone(), r.clone())).collect();
        for ((_, p), r) in replicas {
            if let Some(proposal) = r.maybe_shrink_isr(now_ms) {
                tracing::info!(topic = %r.partition.topic, partition = p, isr = ?proposal.isr, "shrinking the ISR");
                self.propose(r.topic_id, p, proposal);
            }
        }
    }

    /// Makes the hosted partitions and their roles those of `image`: opens new replicas,
    /// publishes each topic's hosted partitions to `registry`, moves leadership, and closes and
    /// deletes replicas no longer assigned here.
    /// Returns the partitions that became led here (`true`) or stopped being led here (`false`:
    /// followed now, or removed), for the coordinators that live on them.
    pub fn apply(
        &self,
        image: &MetadataImage,
        registry: &TopicRegistry,
        defaults: &TopicConfig,
        now_ms: i64,
    ) -> Vec<(Arc<Partition>, bool)> {
        let mut changes = Vec::new();
        let me = self.setup.node_id;
        let elr = image.features.get(ELR_FEATURE).is_some_and(|l| *l >= 1);
        // Brokers whose replicas may not hold the high watermark nor join an ISR (Kafka: fenced
        // or shutting down; a broker the image does not know is neither).
        let ineligible: BTreeSet<i32> =
            image.brokers.iter().filter(|(_, b)| b.fenced || b.in_controlled_shutdown).map(|(id, _)| *id).collect();
        let mut wanted_topics = BTreeMap::new();
        for topic in image.topics.values() {
            let hosted: Vec<i32> =
                topic.partitions.iter().filter(|(_, p)| p.replicas.contains(&me)).map(|(i, _)| *i).collect();
            // Every topic is published (handlers see its partition count), hosting some or none.
            wanted_topics.insert(topic.name.clone(), (topic.clone(), hosted));
        }
        // Replicas no longer assigned here go first (their directories may be reused). Those
        // found on disk at start wait until this broker has settled, then are marked stray
        // (Kafka's `isStrayKraftReplica`: a topic the image lacks, another topic id in
        // `partition.metadata`, or a replica set without this broker); those this process saw
        // assigned here and then taken away are deleted.
        let settled = self.is_settled();
        let mut on_disk_guard = self.found_at_start.lock().unwrap_or_else(|p| p.into_inner());
        let on_disk = on_disk_guard.get_or_insert_with(|| partition_dirs(&self.setup.log_dir));
        // Names whose directories a partition opened from disk still holds (before settling).
        let mut occupied = BTreeSet::new();
        for topic in registry.all() {
            let keep = wanted_topics.get(&topic.name).filter(|(t, _)| t.id == topic.id);
            let gone: Vec<&Arc<Partition>> =
                topic.partitions.iter().filter(|p| keep.is_none_or(|(_, hosted)| !hosted.contains(&p.index))).collect();
            let (waiting, gone): (Vec<&Arc<Partition>>, Vec<&Arc<Partition>>) =
                gone.into_iter().partition(|p| !settled && on_disk.contains(&(p.topic.clone(), p.index)));
            if !waiting.is_empty() {
                occupied.insert(topic.name.clone());
            }
            if keep.is_none() && waiting.is_empty() {
                registry.forget_hosted(&topic.name);
            }
            for p in gone {
                let removed =
                    self.replicas.write().unwrap_or_else(|p| p.into_inner()).remove(&(p.topic.clone(), p.index));
                if let Some(r) = removed {
                    if matches!(&*r.role(), Role::Leader(_)) {
                        changes.push((p.clone(), false));
                    }
                    r.stop();
                }
                let stray = on_disk.remove(&(p.topic.clone(), p.index));
                let mut log = p.log();
                let dir = log.dir().to_path_buf();
                let removed = log.close().and_then(|_| {
                    if stray {
                        crate::metadata::log_dirs::mark_stray(&dir).map(drop).map_err(LogError::Io)
                    } else {
                        std::fs::remove_dir_all(&dir).map_err(LogError::Io)
                    }
                });
                if let Err(e) = removed {
                    tracing::warn!(topic = %p.topic, partition = p.index, error = %e, "removing a replica");
                } else if !stray {
                    tracing::info!(topic = %p.topic, partition = p.index, "replica removed (no longer assigned here)");
                }
            }
        }
        for (name, (topic, hosted)) in wanted_topics {
            if occupied.contains(&name) {
                // Another topic of this name, opened from disk, holds its directories until this
                // broker settles and knows which one is stray.
                continue;
            }
            let overrides = image.configs.get(&(TOPIC_RESOURCE, name.clone())).cloned().unwrap_or_default();
            let config = match defaults.with_overrides(&overrides) {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(topic = %name, error = %e, "topic configs not applied");
                    defaults.clone()
                }
            };
            let existing = registry.get(&name).filter(|t| t.id == topic.id);
            let mut partitions = Vec::with_capacity(hosted.len());
            for &p in &hosted {
                let found = existing.as_ref().and_then(|t| t.partitions.get(p as usize).cloned());
                let partition = match found {
                    Some(partition) => partition,
                    None => {
                        let dir = partition_dir(&self.setup.log_dir, &name, p);
                        let record = match self.claim_dir(&dir, topic.id, on_disk.contains(&(name.clone(), p)), settled)
                        {
                            Ok(Some(record)) => record,
                            Ok(None) => continue, // another topic's, until settled
                            Err(e) => {
                                tracing::error!(topic = %name, partition = p, error = %e, "opening a replica failed");
                                continue;
                            }
                        };
                        let opened = PartitionLog::open(&dir, config.clone(), now_ms).and_then(|log| {
                            if record {
                                partition_metadata::write(&dir, topic.id)?;
                            }
                            Ok(log)
                        });
                        match opened {
                            Ok(mut log) => {
                                log.set_health(self.setup.health.clone());
                                // Not the log end: records past the old high watermark may
                                // never have been committed.
                                let hw = self.recovered.get(&(name.clone(), p)).copied().unwrap_or(0);
                                log.restore_high_watermark(hw);
                                Arc::new(Partition::new(name.clone(), p, log))
                            }
                            Err(e) => {
                                tracing::error!(topic = %name, partition = p, error = %e, "opening a replica failed");
                                continue;
                            }
                        }
                    }
                };
                if settled {
                    on_disk.remove(&(name.clone(), p)); // confirmed by an image after settling
                }
                if partition.log().config() != &config {
                    partition.log().set_config(config.clone());
                }
                let image_partition = &topic.partitions[&p];
                if let Some(leads) = self.set_role(topic.id, &partition, image_partition, elr, &ineligible, now_ms) {
                    changes.push((partition.clone(), leads));
                }
                partitions.push(partition);
            }
            let count = topic.partitions.keys().max().map_or(0, |m| *m as usize + 1);
            let same = existing.as_ref().is_some_and(|t| {
                t.partitions.len() == count
                    && t.overrides == overrides
                    && t.partitions.iter().map(|p| p.index).eq(partitions.iter().map(|p| p.index))
            });
            if !same {
                registry.publish_hosted(Topic {
                    internal: name.starts_with("__"),
                    name: name.clone(),
                    id: topic.id,
                    overrides,
                    config: config.clone(),
                    partitions: HostedPartitions::some(count, partitions),
                });
            }
        }
        if settled {
            // What is left of the directories found at start no image wants: stray.
            for (topic, p) in std::mem::take(on_disk) {
                let dir = partition_dir(&self.setup.log_dir, &topic, p);
                if let Err(e) = crate::metadata::log_dirs::mark_stray(&dir) {
                    tracing::warn!(dir = %dir.display(), error = %e, "marking a stray partition directory");
                }
            }
        }
        drop(on_disk_guard);
        self.generation.send_modify(|n| *n = n.wrapping_add(1));
        self.notify_appended();
        changes
    }

    /// Whether the partition directory `dir` may be opened for topic `topic_id`: it is new, or
    /// its `partition.metadata` names that topic (or no topic: a directory from before the
    /// file, adopted). One that names another topic and was found at start (`found`) is marked
    /// stray once this broker has settled, and waits until then (false); found later (a topic
    /// deleted and recreated while this process ran, its directory not yet removed), it is
    /// another topic's leftover and is marked stray at once.
    /// Some(whether `partition.metadata` must be written) when it may be opened.
    fn claim_dir(
        &self,
        dir: &std::path::Path,
        topic_id: Uuid,
        found: bool,
        settled: bool,
    ) -> std::io::Result<Option<bool>> {
        if !dir.is_dir() {
            return Ok(Some(true));
        }
        match partition_metadata::read(dir)? {
            None => Ok(Some(true)),
            Some(id) if id == topic_id => Ok(Some(false)),
            Some(_) if found && !settled => Ok(None),
            Some(_) => crate::metadata::log_dirs::mark_stray(dir).map(|_| Some(true)),
        }
    }

    /// Makes `partition`'s role what the image says; returns whether it became led here
    /// (`Some(true)`) or stopped being led here (`Some(false)`).
    fn set_role(
        &self,
        topic_id: Uuid,
        partition: &Arc<Partition>,
        image: &PartitionImage,
        elr: bool,
        ineligible_brokers: &BTreeSet<i32>,
        now_ms: i64,
    ) -> Option<bool> {
        let me = self.setup.node_id;
        let ineligible: BTreeSet<i32> =
            image.replicas.iter().filter(|r| **r != me && ineligible_brokers.contains(r)).copied().collect();
        let key = (partition.topic.clone(), partition.index);
        let replica = self.replicas.write().unwrap_or_else(|p| p.into_inner()).get_or_insert(key, || Replica {
            topic_id,
            partition: partition.clone(),
            role: Mutex::new(Role::Follower { leader: -1, leader_epoch: -1 }),
            changed: watch::channel(0).0,
            appended: self.appended.clone(),
        });
        let mut log = partition.log();
        let mut role = replica.role();
        let was_leader = matches!(&*role, Role::Leader(_));
        let mut new_leadership = false;
        let settings = ReplicaSettings {
            replica_lag_time_max_ms: self.setup.replica_lag_time_max_ms,
            min_insync_replicas: log.config().min_insync_replicas.max(1) as usize,
            eligible_leader_replicas: elr,
        };
        match &mut *role {
            Role::Leader(state) if image.leader == me && state.leader_epoch == image.leader_epoch => {
                state.settings = settings;
                let mut changed = state.ineligible != ineligible;
                state.ineligible = ineligible;
                if image.partition_epoch > state.partition_epoch {
                    // The controller changed the ISR or replicas within this epoch.
                    state.on_partition_change(image.replicas.clone(), image.isr.clone(), image.partition_epoch);
                    changed = true;
                }
                // A fenced follower no longer holds the high watermark back.
                if changed && state.maybe_advance_high_watermark(log.log_end_offset(), now_ms) {
                    log.advance_high_watermark(state.high_watermark);
                }
            }
            _ if image.leader == me => {
                let mut isr = image.isr.clone();
                if !isr.contains(&me) {
                    isr.push(me);
                }
                let mut state = LeaderState::become_leader(
                    me,
                    image.leader_epoch,
                    image.partition_epoch,
                    image.replicas.clone(),
                    isr,
                    log.log_end_offset(),
                    log.high_watermark(),
                    now_ms,
                    settings,
                );
                state.ineligible = ineligible;
                // Kafka's makeLeader: the ISR may be this replica alone (or its followers
                // ineligible), and the checkpointed high watermark behind the log end.
                if state.maybe_advance_high_watermark(log.log_end_offset(), now_ms) {
                    log.advance_high_watermark(state.high_watermark);
                }
                tracing::info!(topic = %partition.topic, partition = partition.index, leader_epoch = image.leader_epoch, isr = ?image.isr, log_end = log.log_end_offset(), "leading");
                *role = Role::Leader(state);
                new_leadership = true;
            }
            Role::Follower { leader, leader_epoch }
                if *leader == image.leader && *leader_epoch == image.leader_epoch => {}
            _ => {
                tracing::info!(topic = %partition.topic, partition = partition.index, leader = image.leader, leader_epoch = image.leader_epoch, "following");
                *role = Role::Follower { leader: image.leader, leader_epoch: image.leader_epoch };
            }
        }
        let is_leader = matches!(&*role, Role::Leader(_));
        drop(role);
        drop(log);
        replica.bump();
        match (was_leader, is_leader) {
            (_, true) if new_leadership => Some(true),
            (true, false) => Some(false),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;

/// The partition directories (`<topic>-<partition>`) in `log_dir`: Kafka's naming, without the
/// metadata log's (`__cluster_metadata-0`) and the suffixed ones (`-stray`, `-delete`,
/// `-future`: their last part is not a number).
fn partition_dirs(log_dir: &std::path::Path) -> BTreeSet<(String, i32)> {
    let Ok(entries) = std::fs::read_dir(log_dir) else { return BTreeSet::new() };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let (topic, p) = name.rsplit_once('-')?;
            let p = p.parse::<i32>().ok().filter(|p| *p >= 0)?;
            (!topic.is_empty() && topic != "__cluster_metadata").then(|| (topic.to_string(), p))
        })
        .collect()
}
