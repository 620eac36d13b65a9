//! Follower fetching (Kafka's `ReplicaFetcherThread`): for every partition this broker follows
//! (the replica manager's followers, opened from the metadata image), fetch from the leader
//! with Kafka's replica Fetch (v17: topic ids, ReplicaState with this broker's id and broker
//! epoch, the last fetched epoch for divergence detection), append what comes as follower
//! (offsets and leader epochs kept), truncate where the leader names a diverging epoch
//! (`state::truncation_point`), and follow the leader's high watermark.
//!
//! A partition whose leader refuses a fetch is left alone for `replica.fetch.backoff.ms`, or
//! until the image moves its leader or epoch.
//! Invariants: a follower log only grows at its end with the leader's batches; its high
//! watermark never passes its log end; one fetch per leader is in flight.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::FetchRequest;
use tokio::sync::watch;
use uuid::Uuid;

use super::manager::{Replica, ReplicaManager};
use super::state::truncation_point;
use crate::log::batch;
use crate::log::PartitionLog;
use crate::metadata::image::MetadataImage;
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
    /// The listener leaders are reached on (`inter.broker.listener.name`).
    pub listener: String,
    pub request_timeout: Duration,
}

pub struct FollowerFetcher {
    setup: FetcherSetup,
    manager: Arc<ReplicaManager>,
    image: watch::Receiver<Arc<MetadataImage>>,
    state: watch::Receiver<State>,
    /// Partitions whose leader refused a fetch: not fetched again before this instant (Kafka's
    /// `replica.fetch.backoff.ms`), or before the image moves their leader or epoch.
    delayed: HashMap<(Uuid, i32), (i32, i32, tokio::time::Instant)>,
    conns: HashMap<i32, Connection>,
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
        FollowerFetcher { setup, manager, image, state, delayed: HashMap::new(), conns: HashMap::new() }
    }

    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut generation = self.manager.subscribe();
        while !*stop.borrow() {
            generation.mark_unchanged();
            let image = self.image.borrow().clone();
            let epoch = match *self.state.borrow() {
                State::Fenced(e) | State::Running(e) => Some(e),
                _ => None,
            };
            let now = tokio::time::Instant::now();
            let followed = self.manager.followers();
            // A partition stays delayed only while its leader and epoch are those that refused.
            self.delayed.retain(|key, (leader, leader_epoch, until)| {
                *until > now && followed.iter().any(|f| (f.0, f.1) == *key && f.2 == *leader && f.3 == *leader_epoch)
            });
            let ready: Vec<Followed> =
                followed.into_iter().filter(|f| f.2 >= 0 && !self.delayed.contains_key(&(f.0, f.1))).collect();
            let mut leaders: Vec<i32> = ready.iter().map(|f| f.2).collect();
            leaders.sort_unstable();
            leaders.dedup();
            let (Some(epoch), false) = (epoch, leaders.is_empty()) else {
                let wake = self.delayed.values().map(|d| d.2).min();
                tokio::select! {
                    _ = generation.changed() => {}
                    _ = self.state.changed() => {}
                    _ = stop.changed() => {}
                    _ = async { match wake { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {}
                }
                continue;
            };
            for leader in leaders {
                let partitions: Vec<&Followed> = ready.iter().filter(|f| f.2 == leader).collect();
                let fetched = tokio::select! {
                    r = self.fetch_from(&image, leader, epoch, &partitions) => r,
                    _ = stop.changed() => break,
                };
                if let Err(e) = fetched {
                    tracing::debug!(leader, error = %e, "follower fetch failed");
                    self.conns.remove(&leader);
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        }
    }

    async fn fetch_from(
        &mut self,
        image: &MetadataImage,
        leader: i32,
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
                let key = (topic.topic_id, data.partition_index);
                let Some((_, _, leader, leader_epoch, replica)) =
                    partitions.iter().copied().find(|f| (f.0, f.1) == key)
                else {
                    continue;
                };
                if replica.leader() != (*leader, *leader_epoch) {
                    continue; // the image moved it meanwhile
                }
                let name = &replica.partition.topic;
                if data.error_code != 0 {
                    // NOT_LEADER_OR_FOLLOWER, FENCED / UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID (the
                    // leader has not seen the change yet)...: back off, or until the image moves.
                    tracing::debug!(topic = %name, partition = key.1, code = data.error_code, "follower fetch refused");
                    let until = tokio::time::Instant::now() + PARTITION_BACKOFF;
                    self.delayed.insert(key, (*leader, *leader_epoch, until));
                    continue;
                }
                let mut log = replica.partition.log();
                let diverging = &data.diverging_epoch;
                if diverging.epoch >= 0 {
                    let (to, _) =
                        truncation_point(log.epochs(), log.log_end_offset(), diverging.epoch, diverging.end_offset);
                    let end = log.truncate_to(to)?;
                    tracing::info!(topic = %name, partition = key.1, truncated_to = end, "follower log truncated (diverging epoch)");
                    continue;
                }
                if let Some(records) = &data.records {
                    append_fetched(&mut log, records)?;
                }
                let hw = data.high_watermark.min(log.log_end_offset());
                if hw > log.high_watermark() {
                    log.advance_high_watermark(hw);
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
