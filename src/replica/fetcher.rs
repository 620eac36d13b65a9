//! Follower fetching (Kafka's `ReplicaFetcherThread`): for every partition this broker follows
//! (the replica manager's followers, opened from the metadata image), fetch from the leader
//! with Kafka's replica Fetch (v17: topic ids, ReplicaState with this broker's id and broker
//! epoch, the last fetched epoch for divergence detection), append what comes as follower
//! (offsets and leader epochs kept), truncate where the leader names a diverging epoch
//! (`state::truncation_point`), and follow the leader's high watermark.
//!
//! A partition whose leader refuses a fetch is left alone for `replica.fetch.backoff.ms`, or
//! until the image moves its leader or epoch. A partition that starts following a leader
//! interrupts that leader's fetch in flight (a long poll), so it is fetched at once.
//! Invariants: a follower log only grows at its end with the leader's batches; its high
//! watermark never passes its log end; one fetch per (leader, fetcher id) is in flight, each
//! on its own connection, and each partition is fetched by exactly one of them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest, TopicName};
use tokio::sync::watch;
use uuid::Uuid;

use super::manager::{Replica, ReplicaManager};
use super::state::truncation_point;
use crate::error::LogError;
use crate::log::batch;
use crate::log::PartitionLog;
use crate::metadata::image::MetadataImage;
use crate::node::client::Connection;
use crate::node::lifecycle::State;

const FETCH_VERSION: i16 = 17;
/// ListOffsets as Kafka's followers send it after OFFSET_OUT_OF_RANGE (v4+: the current leader
/// epoch).
const LIST_OFFSETS_VERSION: i16 = 7;
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// What the fetchers need from their broker: its id, how leaders are reached, and Kafka's
/// `replica.fetch.*` / `num.replica.fetchers` settings.
#[derive(Debug, Clone)]
pub struct FetcherSetup {
    pub node_id: i32,
    /// The listener leaders are reached on (`inter.broker.listener.name`), and how (TLS, the
    /// `sasl.mechanism.inter.broker.protocol` login).
    pub listener: String,
    pub security: Arc<crate::security::client::ClientSecurity>,
    pub request_timeout: Duration,
    /// `num.replica.fetchers`: fetchers (connections) per leader; a partition goes to one of
    /// them by a hash of its topic id and index.
    pub fetchers_per_leader: usize,
    /// `replica.fetch.wait.max.ms`.
    pub wait_max_ms: i32,
    /// `replica.fetch.min.bytes`.
    pub min_bytes: i32,
    /// `replica.fetch.max.bytes` (per partition).
    pub partition_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub response_max_bytes: i32,
    /// `replica.fetch.backoff.ms`: a partition whose leader refused it waits this long.
    pub backoff: Duration,
}

impl FetcherSetup {
    /// Kafka's defaults, with `props` (broker properties) over them.
    pub fn from_properties(
        props: &crate::config::Properties,
        node_id: i32,
        request_timeout: Duration,
    ) -> anyhow::Result<FetcherSetup> {
        let int =
            |k: &str, default: i64, min: i64| crate::config::int_property(props, k, default, min, i32::MAX as i64);
        let listener = crate::config::inter_broker_listener(props);
        let security = crate::security::client::ClientSecurity::for_listener(
            props,
            &listener,
            "sasl.mechanism.inter.broker.protocol",
        )?;
        Ok(FetcherSetup {
            node_id,
            listener,
            security,
            request_timeout,
            fetchers_per_leader: int("num.replica.fetchers", 1, 1)? as usize,
            wait_max_ms: int("replica.fetch.wait.max.ms", 500, 0)? as i32,
            min_bytes: int("replica.fetch.min.bytes", 1, 0)? as i32,
            partition_max_bytes: int("replica.fetch.max.bytes", 1 << 20, 0)? as i32,
            response_max_bytes: int("replica.fetch.response.max.bytes", 10 << 20, 0)? as i32,
            backoff: Duration::from_millis(int("replica.fetch.backoff.ms", 1000, 0)? as u64),
        })
    }

    /// Which of a leader's fetchers fetches this partition.
    fn fetcher_of(&self, topic_id: Uuid, partition: i32) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(&(topic_id, partition), &mut h);
        (std::hash::Hasher::finish(&h) % self.fetchers_per_leader as u64) as usize
    }
}

/// Starts and stops one `LeaderFetcher` per (leader, fetcher id) as the image moves partitions.
pub struct FollowerFetcher {
    setup: FetcherSetup,
    manager: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
    state: watch::Receiver<State>,
}

/// One followed partition: (topic id, partition, leader, leader epoch, replica).
type Followed = (Uuid, i32, i32, i32, Arc<Replica>);

impl FollowerFetcher {
    pub fn new(
        setup: FetcherSetup,
        manager: Arc<ReplicaManager>,
        image: watch::Receiver<Arc<MetadataImage>>,
        state: watch::Receiver<State>,
    ) -> FollowerFetcher {
        FollowerFetcher { setup, manager, image, state }
    }

    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut generation = self.manager.subscribe();
        // Workers are stopped only from here (never exit by themselves), so a worker that is
        // wanted again is never mistaken for a running one.
        let mut workers: HashMap<(i32, usize), (watch::Sender<bool>, tokio::task::JoinHandle<()>)> = HashMap::new();
        while !*stop.borrow() {
            generation.mark_unchanged();
            let wanted: std::collections::BTreeSet<(i32, usize)> = self
                .manager
                .followers()
                .iter()
                .filter(|f| f.2 >= 0)
                .map(|f| (f.2, self.setup.fetcher_of(f.0, f.1)))
                .collect();
            workers.retain(|key, (stop_worker, _)| {
                let keep = wanted.contains(key);
                if !keep {
                    let _ = stop_worker.send(true);
                }
                keep
            });
            for key in wanted {
                workers.entry(key).or_insert_with(|| {
                    let (stop_worker, stop_rx) = watch::channel(false);
                    let worker = LeaderFetcher {
                        setup: self.setup.clone(),
                        leader: key.0,
                        fetcher_id: key.1,
                        manager: self.manager.clone(),
                        image: self.image.clone(),
                        state: self.state.clone(),
                        delayed: HashMap::new(),
                        conn: None,
                    };
                    (stop_worker, tokio::spawn(worker.run(stop_rx)))
                });
            }
            tokio::select! {
                _ = generation.changed() => {}
                _ = stop.changed() => {}
            }
        }
        for (_, (stop_worker, handle)) in workers {
            let _ = stop_worker.send(true);
            let _ = handle.await;
        }
    }
}

/// Fetches the partitions one leader leads for this broker, over its own connection, so a
/// long-polling fetch to one leader never holds back another (Kafka's fetcher thread per
/// source broker and fetcher id).
struct LeaderFetcher {
    setup: FetcherSetup,
    leader: i32,
    fetcher_id: usize,
    manager: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
    state: watch::Receiver<State>,
    /// Partitions the leader refused, or whose copy failed: not fetched again before this
    /// instant (Kafka's `replica.fetch.backoff.ms`; None: never, a failed partition), nor before
    /// the image moves their leader or epoch.
    delayed: HashMap<(Uuid, i32), (i32, i32, Option<tokio::time::Instant>)>,
    conn: Option<Connection>,
}

impl LeaderFetcher {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut generation = self.manager.subscribe();
        while !*stop.borrow() {
            generation.mark_unchanged();
            let image = self.image.borrow().clone();
            let epoch = match *self.state.borrow() {
                State::Fenced(e) | State::Running(e) => Some(e),
                _ => None,
            };
            let now = tokio::time::Instant::now();
            let followed: Vec<Followed> = self
                .manager
                .followers()
                .into_iter()
                .filter(|f| f.2 == self.leader && self.setup.fetcher_of(f.0, f.1) == self.fetcher_id)
                .collect();
            // A partition stays delayed only while its leader and epoch are those that refused.
            self.delayed.retain(|key, (leader, leader_epoch, until)| {
                until.is_none_or(|until| until > now)
                    && followed.iter().any(|f| (f.0, f.1) == *key && f.2 == *leader && f.3 == *leader_epoch)
            });
            let ready: Vec<&Followed> = followed.iter().filter(|f| !self.delayed.contains_key(&(f.0, f.1))).collect();
            let (Some(epoch), false) = (epoch, ready.is_empty()) else {
                let wake = self.delayed.values().filter_map(|d| d.2).min();
                tokio::select! {
                    _ = generation.changed() => {}
                    _ = self.state.changed() => {}
                    _ = stop.changed() => {}
                    _ = async { match wake { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {}
                }
                continue;
            };
            // A partition that starts following this leader (a failover) is not left waiting for
            // the fetch in flight, a long poll of up to replica.fetch.wait.max.ms: that fetch is
            // dropped (with its connection) and the next one names it.
            let known: HashSet<(Uuid, i32, i32)> = followed.iter().map(|f| (f.0, f.1, f.3)).collect();
            let (manager, setup, leader, fetcher_id) =
                (self.manager.clone(), self.setup.clone(), self.leader, self.fetcher_id);
            let fetched = {
                let fetch = self.fetch_from(&image, epoch, &ready);
                tokio::pin!(fetch);
                loop {
                    tokio::select! {
                        r = &mut fetch => break Some(r),
                        _ = generation.changed() => {
                            let new = manager.followers().iter().any(|f| {
                                f.2 == leader && setup.fetcher_of(f.0, f.1) == fetcher_id && !known.contains(&(f.0, f.1, f.3))
                            });
                            if new {
                                break None;
                            }
                        }
                        _ = stop.changed() => break None,
                    }
                }
            };
            let Some(fetched) = fetched else {
                self.conn = None;
                continue;
            };
            if let Err(e) = fetched {
                tracing::debug!(leader = self.leader, error = %e, "follower fetch failed");
                self.conn = None;
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_BACKOFF) => {}
                    _ = stop.changed() => {}
                }
            }
        }
    }

    async fn fetch_from(
        &mut self,
        image: &MetadataImage,
        broker_epoch: i64,
        partitions: &[&Followed],
    ) -> anyhow::Result<()> {
        let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
        for (topic_id, p, _, leader_epoch, replica) in partitions.iter().copied() {
            let log = replica.partition.log();
            topics.entry(*topic_id).or_default().push(
                FetchPartition::default()
                    .with_partition(*p)
                    .with_current_leader_epoch(*leader_epoch)
                    .with_fetch_offset(log.log_end_offset())
                    .with_last_fetched_epoch(log.latest_epoch().map_or(-1, |(e, _)| e))
                    .with_log_start_offset(log.log_start_offset())
                    .with_partition_max_bytes(self.setup.partition_max_bytes),
            );
        }
        let request = FetchRequest::default()
            .with_replica_state(
                ReplicaState::default().with_replica_id(self.setup.node_id.into()).with_replica_epoch(broker_epoch),
            )
            .with_max_wait_ms(self.setup.wait_max_ms)
            .with_min_bytes(self.setup.min_bytes)
            .with_max_bytes(self.setup.response_max_bytes)
            .with_session_epoch(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| FetchTopic::default().with_topic_id(id).with_partitions(partitions))
                    .collect(),
            );
        let leader = self.leader;
        let addr = image
            .endpoint_addr(leader, &self.setup.listener)
            .ok_or_else(|| anyhow::anyhow!("broker {leader} has no {} endpoint", self.setup.listener))?;
        if self.conn.as_ref().is_none_or(|c| c.addr() != addr) {
            let client_id = format!("broker-{}-fetcher-{}", self.setup.node_id, self.fetcher_id);
            self.conn =
                Some(Connection::connect(&addr, &client_id, self.setup.request_timeout, &self.setup.security).await?);
        }
        let conn = self.conn.as_mut().expect("connected");
        let wait = Duration::from_millis(self.setup.wait_max_ms as u64);
        let response = conn.send(FETCH_VERSION, &request, wait).await?;
        anyhow::ensure!(response.error_code == 0, "fetch refused with error {}", response.error_code);
        let mut out_of_range = Vec::new();
        for topic in &response.responses {
            for data in &topic.partitions {
                let key = (topic.topic_id, data.partition_index);
                let Some(followed) = partitions.iter().copied().find(|f| (f.0, f.1) == key) else {
                    continue;
                };
                let (_, _, leader, leader_epoch, replica) = followed;
                if replica.leader() != (*leader, *leader_epoch) {
                    continue; // the image moved it meanwhile
                }
                let name = &replica.partition.topic;
                if data.error_code == ResponseError::OffsetOutOfRange.code() {
                    out_of_range.push(followed);
                    continue;
                }
                if data.error_code != 0 {
                    // NOT_LEADER_OR_FOLLOWER, FENCED / UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID (the
                    // leader has not seen the change yet)...: back off, or until the image moves.
                    tracing::debug!(topic = %name, partition = key.1, code = data.error_code, "follower fetch refused");
                    self.delay(followed, Some(self.setup.backoff));
                    continue;
                }
                let mut log = replica.partition.log();
                let diverging = &data.diverging_epoch;
                if diverging.epoch >= 0 {
                    let (to, _) =
                        truncation_point(log.epochs(), log.log_end_offset(), diverging.epoch, diverging.end_offset);
                    match log.truncate_to(to) {
                        Ok(end) => tracing::info!(topic = %name, partition = key.1, truncated_to = end,
                            "follower log truncated (diverging epoch)"),
                        Err(e) => {
                            tracing::error!(topic = %name, partition = key.1, error = %e,
                                "truncating the follower log failed: the partition is marked failed until its leader or epoch changes");
                            drop(log);
                            self.delay(followed, None);
                        }
                    }
                    continue;
                }
                let fetch_offset = log.log_end_offset();
                // One partition's trouble never holds back the others of the response (Kafka's
                // `processFetchResponse`): invalid records back that partition off, anything else
                // marks it failed until the image gives it a new leader or epoch.
                match copy_from_leader(&mut log, data) {
                    Ok(()) => {}
                    Err(e @ (LogError::CorruptMessage(_) | LogError::InvalidRecord(_))) => {
                        tracing::warn!(topic = %name, partition = key.1, offset = fetch_offset, leader = *leader, error = %e,
                            "found invalid records in a fetch from the leader: fetched again after replica.fetch.backoff.ms");
                        drop(log);
                        self.delay(followed, Some(self.setup.backoff));
                    }
                    Err(e) => {
                        tracing::error!(topic = %name, partition = key.1, offset = fetch_offset, leader = *leader, error = %e,
                            "copying from the leader failed: the partition is marked failed until its leader or epoch changes");
                        drop(log);
                        self.delay(followed, None);
                    }
                }
            }
        }
        for followed in out_of_range {
            if let Err(e) = self.reset_out_of_range(followed).await {
                tracing::info!(topic = %followed.4.partition.topic, partition = followed.1, error = %e,
                    "could not ask the leader for its offsets after OFFSET_OUT_OF_RANGE");
                self.delay(followed, Some(self.setup.backoff));
            }
        }
        Ok(())
    }

    /// Leaves `followed` out of fetches for `backoff`, or (None) until the image moves its
    /// leader or epoch.
    fn delay(&mut self, followed: &Followed, backoff: Option<Duration>) {
        let until = backoff.map(|b| tokio::time::Instant::now() + b);
        self.delayed.insert((followed.0, followed.1), (followed.2, followed.3, until));
    }

    /// The leader answered OFFSET_OUT_OF_RANGE to a fetch at this replica's log end (Kafka's
    /// `fetchOffsetAndTruncate`): a log ending past the leader's is truncated to its end (an
    /// unclean election), one ending before the leader's log start starts over there.
    async fn reset_out_of_range(&mut self, followed: &Followed) -> anyhow::Result<()> {
        let (_, partition, leader, leader_epoch, replica) = followed;
        let name = replica.partition.topic.clone();
        let leader_end = self.leader_offset(followed, LATEST_TIMESTAMP).await?;
        let asked_end = replica.partition.log().log_end_offset();
        let leader_start =
            if leader_end < asked_end { None } else { Some(self.leader_offset(followed, EARLIEST_TIMESTAMP).await?) };
        let mut log = replica.partition.log();
        if replica.leader() != (*leader, *leader_epoch) || log.log_end_offset() != asked_end {
            return Ok(()); // moved meanwhile: the next fetch says where it stands
        }
        match leader_start {
            None => {
                tracing::warn!(topic = %name, partition, from = asked_end, to = leader_end,
                    "follower log end past the leader's: truncated to the leader's log end");
                if leader_end < log.log_start_offset() {
                    log.truncate_fully_and_start_at(leader_end)?;
                } else {
                    log.truncate_to(leader_end)?;
                }
            }
            Some(start) if start > asked_end => {
                tracing::warn!(topic = %name, partition, from = asked_end, to = start,
                    "follower log ends before the leader's log start: emptied, copying from the leader's log start");
                log.truncate_fully_and_start_at(start)?;
            }
            Some(_) => tracing::info!(topic = %name, partition, offset = asked_end,
                "fetch offset out of range on the leader (a leader change): fetched again from the log end"),
        }
        Ok(())
    }

    /// The leader's offset of `followed` for `timestamp` (LATEST_TIMESTAMP: its log end, as a
    /// replica reads it; EARLIEST_TIMESTAMP: its log start), by ListOffsets as a replica.
    async fn leader_offset(&mut self, followed: &Followed, timestamp: i64) -> anyhow::Result<i64> {
        let (_, partition, _, leader_epoch, replica) = followed;
        let request = ListOffsetsRequest::default().with_replica_id(self.setup.node_id.into()).with_topics(vec![
            ListOffsetsTopic::default().with_name(TopicName(replica.partition.topic.clone().into())).with_partitions(
                vec![ListOffsetsPartition::default()
                    .with_partition_index(*partition)
                    .with_current_leader_epoch(*leader_epoch)
                    .with_timestamp(timestamp)],
            ),
        ]);
        let conn = self.conn.as_mut().ok_or_else(|| anyhow::anyhow!("no connection to the leader"))?;
        let response = conn.send(LIST_OFFSETS_VERSION, &request, Duration::ZERO).await?;
        let answer = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == *partition)
            .ok_or_else(|| anyhow::anyhow!("ListOffsets answered without the partition"))?;
        anyhow::ensure!(answer.error_code == 0, "ListOffsets refused with error {}", answer.error_code);
        Ok(answer.offset)
    }
}

/// Copies what the leader sent for one partition (Kafka's `processPartitionData`): every whole
/// batch appended as follower (a trailing partial batch is fetched again), then the high
/// watermark and the log start offset follow the leader's, never past this log's end or high
/// watermark. An empty log whose first copied batch starts before its log start (the leader's
/// log start falls inside a batch, after DeleteRecords) starts over at that batch, as Kafka's
/// `appendRecordsToFollowerOrFutureReplica` does.
fn copy_from_leader(log: &mut PartitionLog, data: &PartitionData) -> Result<(), LogError> {
    if let Some(records) = &data.records {
        for whole in batch::whole_batches(records)? {
            match log.append_as_follower(whole, crate::log::now_ms()) {
                Err(LogError::UnexpectedAppendOffset { first, last, end })
                    if log.log_start_offset() == end && last >= end =>
                {
                    tracing::info!(dir = %log.dir().display(), first, end,
                        "the first copied batch starts before the empty log's start: the log starts over at it");
                    log.truncate_fully_and_start_at(first)?;
                    log.append_as_follower(whole, crate::log::now_ms())?;
                }
                result => {
                    result?;
                }
            }
        }
    }
    let hw = data.high_watermark.min(log.log_end_offset());
    if hw > log.high_watermark() {
        log.advance_high_watermark(hw);
    }
    let start = data.log_start_offset.min(log.high_watermark());
    if start > log.log_start_offset() {
        log.delete_records_before(start)?;
    }
    Ok(())
}
