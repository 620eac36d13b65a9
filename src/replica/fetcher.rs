//! Follower fetching (Kafka's `ReplicaFetcherThread`): for every partition the metadata image
//! assigns to this broker and leads elsewhere, keep a local log and fetch it from the leader
//! with Kafka's replica Fetch (v17: topic ids, ReplicaState with this broker's id and broker
//! epoch, the last fetched epoch for divergence detection), append what comes as follower
//! (offsets and leader epochs kept), truncate where the leader names a diverging epoch
//! (`state::truncation_point`), and follow the leader's high watermark.
//!
//! First step of replication (issue 14): the follower logs live beside the topic registry, in
//! `<first log dir>/<topic>-<partition>`; they are not served to clients, not flushed before
//! close, and a partition this broker comes to lead is not served by it yet. A partition whose
//! topic left the image is closed and its directory removed.
//! Invariants: a follower log only grows at its end with the leader's batches; its high
//! watermark never passes its log end; one fetch per leader is in flight.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::FetchRequest;
use tokio::sync::watch;
use uuid::Uuid;

use super::state::truncation_point;
use crate::config::TopicConfig;
use crate::log::batch;
use crate::log::partition_log::partition_dir;
use crate::log::PartitionLog;
use crate::metadata::image::{MetadataImage, TOPIC_RESOURCE};
use crate::node::client::Connection;
use crate::node::lifecycle::State;

const FETCH_VERSION: i16 = 17;
const FETCH_MAX_WAIT_MS: i32 = 500;
const FETCH_MAX_BYTES: i32 = 10 << 20;
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Kafka's `replica.fetch.backoff.ms` default.
const PARTITION_BACKOFF: Duration = Duration::from_millis(1000);

/// What the fetcher needs from its broker.
#[derive(Debug, Clone)]
pub struct FetcherSetup {
    pub node_id: i32,
    /// Where follower logs are kept.
    pub log_dir: PathBuf,
    /// The listener leaders are reached on (`inter.broker.listener.name`).
    pub listener: String,
    pub topic_defaults: TopicConfig,
    pub request_timeout: Duration,
}

struct Follower {
    topic: String,
    leader: i32,
    leader_epoch: i32,
    log: PartitionLog,
    /// Set after the leader refused a fetch: not fetched again before this instant (Kafka's
    /// `replica.fetch.backoff.ms`), or before the image moves the partition's leader or epoch.
    delayed_until: Option<tokio::time::Instant>,
}

pub struct FollowerFetcher {
    setup: FetcherSetup,
    image: watch::Receiver<Arc<MetadataImage>>,
    state: watch::Receiver<State>,
    partitions: BTreeMap<(Uuid, i32), Follower>,
    conns: HashMap<i32, Connection>,
}

impl FollowerFetcher {
    pub fn new(
        setup: FetcherSetup,
        image: watch::Receiver<Arc<MetadataImage>>,
        state: watch::Receiver<State>,
    ) -> FollowerFetcher {
        FollowerFetcher { setup, image, state, partitions: BTreeMap::new(), conns: HashMap::new() }
    }

    /// Follows until `stop` turns true; then closes (fsyncs) every follower log.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        while !*stop.borrow() {
            let image = self.image.borrow_and_update().clone();
            if let Err(e) = self.reconcile(&image) {
                tracing::warn!(error = %e, "opening follower partitions failed");
            }
            let epoch = match *self.state.borrow() {
                State::Fenced(e) | State::Running(e) => Some(e),
                _ => None,
            };
            let now = tokio::time::Instant::now();
            for f in self.partitions.values_mut() {
                if f.delayed_until.is_some_and(|t| t <= now) {
                    f.delayed_until = None;
                }
            }
            let leaders: Vec<i32> = {
                let mut l: Vec<i32> =
                    self.partitions.values().filter(|f| f.delayed_until.is_none()).map(|f| f.leader).collect();
                l.sort_unstable();
                l.dedup();
                l
            };
            let (Some(epoch), false) = (epoch, leaders.is_empty()) else {
                let wake = self.partitions.values().filter_map(|f| f.delayed_until).min();
                tokio::select! {
                    _ = self.image.changed() => {}
                    _ = self.state.changed() => {}
                    _ = stop.changed() => {}
                    _ = async { match wake { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {}
                }
                continue;
            };
            for leader in leaders {
                let fetched = tokio::select! {
                    r = self.fetch_from(&image, leader, epoch) => r,
                    _ = stop.changed() => break,
                };
                if let Err(e) = fetched {
                    tracing::debug!(leader, error = %e, "follower fetch failed");
                    self.conns.remove(&leader);
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        }
        for (key, mut f) in std::mem::take(&mut self.partitions) {
            if let Err(e) = f.log.close() {
                tracing::warn!(topic = %f.topic, partition = key.1, error = %e, "closing a follower log");
            }
        }
    }

    /// Opens a log for every partition this broker follows in `image`, updates leaders and
    /// epochs, and drops partitions it no longer follows.
    fn reconcile(&mut self, image: &MetadataImage) -> anyhow::Result<()> {
        let me = self.setup.node_id;
        let mut wanted = BTreeMap::new();
        for topic in image.topics.values() {
            for (&p, partition) in &topic.partitions {
                if partition.replicas.contains(&me) && partition.leader != me && partition.leader >= 0 {
                    wanted.insert((topic.id, p), (topic.name.clone(), partition.leader, partition.leader_epoch));
                }
            }
        }
        let gone: Vec<(Uuid, i32)> = self.partitions.keys().filter(|k| !wanted.contains_key(k)).copied().collect();
        for key in gone {
            let mut f = self.partitions.remove(&key).expect("listed");
            f.log.close()?;
            if !image.topics.contains_key(&key.0) {
                // The topic was deleted: its replica goes too (Kafka's StopReplica with delete).
                std::fs::remove_dir_all(f.log.dir())?;
                tracing::info!(topic = %f.topic, partition = key.1, "deleted the follower replica of a deleted topic");
            }
        }
        for (key, (name, leader, leader_epoch)) in wanted {
            if let Some(f) = self.partitions.get_mut(&key) {
                if f.leader_epoch != leader_epoch || f.leader != leader {
                    f.leader = leader;
                    f.leader_epoch = leader_epoch;
                    f.delayed_until = None;
                }
                continue;
            }
            let overrides = image.configs.get(&(TOPIC_RESOURCE, name.clone())).cloned().unwrap_or_default();
            let config = self.setup.topic_defaults.with_overrides(&overrides)?;
            let dir = partition_dir(&self.setup.log_dir, &name, key.1);
            let log = PartitionLog::open(&dir, config, crate::log::now_ms())?;
            tracing::info!(topic = %name, partition = key.1, leader, leader_epoch, log_end = log.log_end_offset(), "following");
            self.partitions.insert(key, Follower { topic: name, leader, leader_epoch, log, delayed_until: None });
        }
        Ok(())
    }

    async fn fetch_from(&mut self, image: &MetadataImage, leader: i32, broker_epoch: i64) -> anyhow::Result<()> {
        let mut topics: BTreeMap<Uuid, Vec<FetchPartition>> = BTreeMap::new();
        for ((topic_id, p), f) in
            self.partitions.iter().filter(|(_, f)| f.leader == leader && f.delayed_until.is_none())
        {
            topics.entry(*topic_id).or_default().push(
                FetchPartition::default()
                    .with_partition(*p)
                    .with_current_leader_epoch(f.leader_epoch)
                    .with_fetch_offset(f.log.log_end_offset())
                    .with_last_fetched_epoch(f.log.latest_epoch().map_or(-1, |(e, _)| e))
                    .with_log_start_offset(f.log.log_start_offset())
                    .with_partition_max_bytes(PARTITION_MAX_BYTES),
            );
        }
        let request = FetchRequest::default()
            .with_replica_state(
                ReplicaState::default().with_replica_id(self.setup.node_id.into()).with_replica_epoch(broker_epoch),
            )
            .with_max_wait_ms(FETCH_MAX_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_session_epoch(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| FetchTopic::default().with_topic_id(id).with_partitions(partitions))
                    .collect(),
            );
        let addr = leader_addr(image, leader, &self.setup.listener)
            .ok_or_else(|| anyhow::anyhow!("broker {leader} has no {} endpoint", self.setup.listener))?;
        if self.conns.get(&leader).is_none_or(|c| c.addr() != addr) {
            let client_id = format!("broker-{}-fetcher-0", self.setup.node_id);
            self.conns.insert(leader, Connection::connect(&addr, &client_id, self.setup.request_timeout).await?);
        }
        let conn = self.conns.get_mut(&leader).expect("connected");
        let response = conn.send(FETCH_VERSION, &request, Duration::from_millis(FETCH_MAX_WAIT_MS as u64)).await?;
        anyhow::ensure!(response.error_code == 0, "fetch refused with error {}", response.error_code);
        for topic in &response.responses {
            for data in &topic.partitions {
                let Some(f) = self.partitions.get_mut(&(topic.topic_id, data.partition_index)) else { continue };
                match data.error_code {
                    0 => {}
                    code => {
                        // NOT_LEADER_OR_FOLLOWER, FENCED / UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID (the
                        // leader has not seen the change yet)...: back off, or until the image moves.
                        tracing::debug!(topic = %f.topic, partition = data.partition_index, code, "follower fetch refused");
                        f.delayed_until = Some(tokio::time::Instant::now() + PARTITION_BACKOFF);
                        continue;
                    }
                }
                let diverging = &data.diverging_epoch;
                if diverging.epoch >= 0 {
                    let (to, _) =
                        truncation_point(f.log.epochs(), f.log.log_end_offset(), diverging.epoch, diverging.end_offset);
                    let end = f.log.truncate_to(to)?;
                    tracing::info!(topic = %f.topic, partition = data.partition_index, truncated_to = end, "follower log truncated (diverging epoch)");
                    continue;
                }
                if let Some(records) = &data.records {
                    append_fetched(&mut f.log, records)?;
                }
                let hw = data.high_watermark.min(f.log.log_end_offset());
                if hw > f.log.high_watermark() {
                    f.log.advance_high_watermark(hw);
                }
            }
        }
        Ok(())
    }
}

/// Appends every whole batch of `bytes` as follower (a trailing partial batch is fetched again).
fn append_fetched(log: &mut PartitionLog, bytes: &[u8]) -> anyhow::Result<()> {
    for whole in batch::whole_batches(bytes)? {
        let (owned, summary) = batch::validate_internal(whole.to_vec(), log.config(), crate::log::now_ms())?;
        log.append_as_follower(&owned, &summary, crate::log::now_ms())?;
    }
    Ok(())
}

/// `host:port` of `broker`'s endpoint on `listener`.
fn leader_addr(image: &MetadataImage, broker: i32, listener: &str) -> Option<String> {
    let b = image.brokers.get(&broker)?;
    let e = b.endpoints.iter().find(|e| e.listener == listener)?;
    Some(if e.host.contains(':') { format!("[{}]:{}", e.host, e.port) } else { format!("{}:{}", e.host, e.port) })
}
