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
    /// Partitions the leader refused: not fetched again before this instant (Kafka's
    /// `replica.fetch.backoff.ms`), or before the image moves their leader or epoch.
    delayed: HashMap<(Uuid, i32), (i32, i32, tokio::time::Instant)>,
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
                *until > now && followed.iter().any(|f| (f.0, f.1) == *key && f.2 == *leader && f.3 == *leader_epoch)
            });
            let ready: Vec<&Followed> = followed.iter().filter(|f| !self.delayed.contains_key(&(f.0, f.1))).collect();
            let (Some(epoch), false) = (epoch, ready.is_empty()) else {
                let wake = self.delayed.values().map(|d| d.2).min();
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
                    let until = tokio::time::Instant::now() + self.setup.backoff;
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
