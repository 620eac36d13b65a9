//! A KRaft observer: this broker's copy of a controller quorum's metadata log, fetched from the
//! quorum's leader as Kafka brokers fetch it (Fetch v17 of `__cluster_metadata` partition 0 by
//! topic id, with this node's id in ReplicaState, its cluster id and metadata directory id), and
//! the metadata image built from the committed part of it, published to whoever watches.
//!
//! Owns: finding the leader (the voters or bootstrap servers, then the leader each answer names),
//! the fetch loop, the local copy (`MetadataLog::append_fetched`), and applying records below
//! the leader's high watermark to the image.
//! Invariants: only committed records (below the high watermark) reach the image, in offset
//! order; the local copy is appended at its end only, batch by batch, each with its epoch; a
//! copy that diverged from the leader's is truncated where Kafka's fetcher would truncate it
//! (fetched again from the start in the unexpected case that this would undo applied records).
//! When the leader's log starts past this copy's end (Kafka's controllers delete the log below
//! their snapshots), the leader's snapshot is fetched with FetchSnapshot (v1, as Kafka 4.1's
//! brokers), the copy restarts at its end and the image is rebuilt from it (Kafka's
//! `handleFetchSnapshotResponse`, then the loader's `handleLoadSnapshot`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use uuid::Uuid;

use super::snapshot::{Download, SnapshotId};
use super::snapshot_wire::{self, ChunkError};
use super::MetadataLog;
use crate::log::batch;
use crate::metadata::image::{ImageBuilder, MetadataImage};
use crate::metadata::records::MetadataRecord;
use crate::node::client::Connection;
use crate::node::NodeConfig;
use crate::replica::state::truncation_point;

/// Kafka's `Topic.CLUSTER_METADATA_TOPIC_ID` (`AAAAAAAAAAAAAAAAAAAAAQ`).
pub const METADATA_TOPIC_ID: Uuid = Uuid::from_u128(1);
/// The Fetch version Kafka 4.1's KRaft clients send.
const FETCH_VERSION: i16 = 17;
/// The FetchSnapshot version Kafka 4.1's KRaft clients send.
const FETCH_MAX_BYTES: i32 = 8 << 20;
/// How long the leader may hold a fetch with nothing new (Kafka's `fetchMaxWaitMs`).
const FETCH_MAX_WAIT_MS: i32 = 500;
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
/// Between fetches to the voters while looking for a new leader (Kafka's observers retry after
/// `retry.backoff.ms`, 100 ms), for the first `FIND_LEADER_TRIES` failures in a row.
const FIND_LEADER_BACKOFF: Duration = Duration::from_millis(50);
const FIND_LEADER_TRIES: u32 = 40;

/// The quorum's leader as last heard of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub id: i32,
    pub epoch: i32,
    /// `host:port` of its controller listener.
    pub addr: String,
}

/// What the observer publishes.
#[derive(Clone)]
pub struct ObserverHandle {
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub leader: watch::Receiver<Option<Leader>>,
}

pub struct Observer {
    config: NodeConfig,
    cluster_id: String,
    directory_id: Uuid,
    log: MetadataLog,
    builder: ImageBuilder,
    /// Fetched records not yet below the high watermark.
    pending: VecDeque<(i64, MetadataRecord)>,
    high_watermark: i64,
    leader: Option<Leader>,
    conn: Option<Connection>,
    /// Next entry of the voters / bootstrap servers to try while no leader is known.
    next_addr: usize,
    image_tx: watch::Sender<Arc<MetadataImage>>,
    leader_tx: watch::Sender<Option<Leader>>,
}

impl Observer {
    /// Opens the local copy in `metadata_dir` (its records wait for the leader's high watermark).
    pub fn open(
        metadata_dir: &std::path::Path,
        config: NodeConfig,
        cluster_id: String,
        directory_id: Uuid,
    ) -> anyhow::Result<(Observer, ObserverHandle)> {
        let (log, records) = MetadataLog::open_replica(metadata_dir, config.node_id, crate::log::now_ms())?;
        let mut builder = ImageBuilder::new();
        let (image_tx, image) = watch::channel(builder.publish());
        let (leader_tx, leader) = watch::channel(None);
        let observer = Observer {
            config,
            cluster_id,
            directory_id,
            log,
            builder,
            pending: records.into(),
            high_watermark: 0,
            leader: None,
            conn: None,
            next_addr: 0,
            image_tx,
            leader_tx,
        };
        Ok((observer, ObserverHandle { image, leader }))
    }

    /// Fetches until `stop` turns true.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let mut failures = 0u32;
        while !*stop.borrow() {
            let step = tokio::select! {
                r = self.fetch_once() => r,
                _ = stop.changed() => break,
            };
            match step {
                Ok(()) => failures = 0,
                Err(e) => {
                    failures += 1;
                    // Quiet while a controller is starting; loud once it keeps failing.
                    if failures % 25 == 1 {
                        tracing::warn!(error = %e, failures, "metadata fetch from the controller quorum failed");
                    } else {
                        tracing::debug!(error = %e, "metadata fetch failed");
                    }
                    self.conn = None;
                    // Refused, closed or unanswered (a dead, paused or cut-off leader): the voters
                    // are asked in turn (as Kafka's observers ask any voter once their fetch
                    // timeout expires); a voter that knows the leader names it in its answer, so
                    // a leader that was only slow is back at the next fetch.
                    self.set_leader(None);
                    // While no leader is known, the voters are asked in turn quickly for a while
                    // (an election takes a few hundred ms); then at the usual pace.
                    let backoff = if self.leader.is_none() && failures <= FIND_LEADER_TRIES {
                        FIND_LEADER_BACKOFF
                    } else {
                        RETRY_BACKOFF
                    };
                    tokio::time::sleep(backoff).await;
                }
            }
        }
        if let Err(e) = self.log.close() {
            tracing::warn!(error = %e, "closing the local metadata log copy");
        }
    }

    fn set_leader(&mut self, leader: Option<Leader>) {
        if self.leader != leader {
            if let Some(l) = &leader {
                tracing::info!(leader = l.id, epoch = l.epoch, addr = %l.addr, "metadata quorum leader");
            }
            self.leader = leader.clone();
            self.leader_tx.send_replace(leader);
        }
    }

    async fn connection(&mut self) -> anyhow::Result<&mut Connection> {
        let addr = match &self.leader {
            Some(l) => l.addr.clone(),
            None => {
                let addrs = self.config.quorum_addrs();
                let addr = addrs[self.next_addr % addrs.len()].clone();
                self.next_addr += 1;
                addr
            }
        };
        if self.conn.as_ref().is_none_or(|c| c.addr() != addr) {
            let timeout = Duration::from_millis(self.config.request_timeout_ms);
            let client_id = format!("raft-client-{}", self.config.node_id);
            self.conn = Some(Connection::connect(&addr, &client_id, timeout, &self.config.controller_security).await?);
        }
        Ok(self.conn.as_mut().expect("connected"))
    }

    /// The epoch of the leader last heard of (the copy's own before any).
    fn leader_epoch(&self) -> i32 {
        self.leader.as_ref().map_or(self.log.epoch(), |l| l.epoch)
    }

    fn request(&self) -> FetchRequest {
        let partition = FetchPartition::default()
            .with_partition(0)
            .with_current_leader_epoch(self.leader_epoch())
            .with_fetch_offset(self.log.end_offset())
            .with_last_fetched_epoch(self.log.epoch())
            .with_log_start_offset(-1)
            .with_partition_max_bytes(FETCH_MAX_BYTES)
            .with_replica_directory_id(self.directory_id);
        FetchRequest::default()
            .with_cluster_id(Some(StrBytes::from_string(self.cluster_id.clone())))
            .with_replica_state(
                ReplicaState::default().with_replica_id(self.config.node_id.into()).with_replica_epoch(-1),
            )
            .with_max_wait_ms(FETCH_MAX_WAIT_MS)
            .with_min_bytes(0)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default().with_topic_id(METADATA_TOPIC_ID).with_partitions(vec![partition])])
    }

    async fn fetch_once(&mut self) -> anyhow::Result<()> {
        let request = self.request();
        let wait = Duration::from_millis(FETCH_MAX_WAIT_MS as u64);
        let conn = self.connection().await?;
        let response = conn.send(FETCH_VERSION, &request, wait).await?;
        match self.handle(response)? {
            Some(snapshot) => self.fetch_snapshot(snapshot).await,
            None => Ok(()),
        }
    }

    /// Handles a Fetch answer; returns the leader's snapshot to fetch when its log starts past
    /// this copy's end.
    fn handle(&mut self, response: FetchResponse) -> anyhow::Result<Option<SnapshotId>> {
        if response.error_code != 0 {
            anyhow::bail!("fetch refused with error {} (104: INCONSISTENT_CLUSTER_ID)", response.error_code);
        }
        let endpoint = |id: i32| -> Option<String> {
            response
                .node_endpoints
                .iter()
                .find(|n| i32::from(n.node_id) == id)
                .map(|n| format!("{}:{}", n.host.as_str(), n.port))
                .or_else(|| self.config.voter(id).map(|v| v.addr()))
        };
        let Some(partition) =
            response.responses.iter().flat_map(|t| t.partitions.iter()).find(|p| p.partition_index == 0)
        else {
            anyhow::bail!("fetch response without partition 0 of the metadata topic");
        };
        let named = &partition.current_leader;
        let named_leader = (named.leader_id.0 >= 0)
            .then(|| {
                endpoint(named.leader_id.0).map(|addr| Leader {
                    id: named.leader_id.0,
                    epoch: named.leader_epoch,
                    addr,
                })
            })
            .flatten();
        match partition.error_code {
            0 => {}
            // NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH: go where the
            // answer points, with its epoch.
            6 | 74 | 75 => {
                let found = named_leader.is_some();
                self.set_leader(named_leader);
                if !found {
                    anyhow::bail!("no leader known yet (error {})", partition.error_code);
                }
                return Ok(None);
            }
            code => anyhow::bail!("metadata fetch partition error {code}"),
        }
        if let Some(leader) = named_leader {
            self.set_leader(Some(leader));
        }
        if partition.snapshot_id.end_offset >= 0 {
            let id = SnapshotId { end_offset: partition.snapshot_id.end_offset, epoch: partition.snapshot_id.epoch };
            anyhow::ensure!(
                id.end_offset > self.log.end_offset() && id.epoch >= 0,
                "the leader points at its snapshot {id:?} for a copy ending at {}",
                self.log.end_offset()
            );
            return Ok(Some(id));
        }
        let diverging = &partition.diverging_epoch;
        if diverging.epoch >= 0 {
            let (to, _) =
                truncation_point(self.log.epochs(), self.log.end_offset(), diverging.epoch, diverging.end_offset);
            let applied_end = self.image_tx.borrow().offset + 1;
            if to >= applied_end {
                // Only records not applied yet go (the usual case: uncommitted ones).
                let end = self.log.truncate_to(to)?;
                self.pending.retain(|(offset, _)| *offset < end);
                tracing::info!(
                    epoch = diverging.epoch,
                    end_offset = diverging.end_offset,
                    truncated_to = end,
                    "metadata log copy truncated"
                );
            } else {
                tracing::warn!(
                    epoch = diverging.epoch,
                    end_offset = diverging.end_offset,
                    "the local metadata log copy diverged below what was applied: fetching it again from the start"
                );
                self.log.reset(crate::log::now_ms())?;
                self.pending.clear();
                self.builder = ImageBuilder::new();
                self.high_watermark = 0;
            }
            return Ok(None);
        }
        if let Some(records) = &partition.records {
            self.append(records)?;
        }
        self.high_watermark = partition.high_watermark.min(self.log.end_offset());
        self.apply_committed()?;
        Ok(None)
    }

    /// Fetches the leader's snapshot `id` chunk by chunk, then restarts the copy at its end and
    /// publishes the image it holds. Any error leaves the copy as it was (the next Fetch names
    /// the snapshot again, e.g. a newer one after SNAPSHOT_NOT_FOUND).
    async fn fetch_snapshot(&mut self, id: SnapshotId) -> anyhow::Result<()> {
        tracing::info!(
            end_offset = id.end_offset,
            epoch = id.epoch,
            copy_end = self.log.end_offset(),
            "the metadata log starts at a snapshot: fetching it"
        );
        let mut download = Download::begin(&self.log.dir(), id)?;
        while !download.done() {
            let request = snapshot_wire::request(
                &self.cluster_id,
                self.config.node_id,
                self.leader_epoch(),
                id,
                download.position,
                self.directory_id,
            );
            let conn = self.connection().await?;
            let response = conn.send(snapshot_wire::FETCH_SNAPSHOT_VERSION, &request, Duration::ZERO).await?;
            match snapshot_wire::chunk(&response, id) {
                Ok((size, position, bytes)) => download.write(size, position, &bytes)?,
                Err(e @ ChunkError::NotLeader(_)) => {
                    self.set_leader(None);
                    anyhow::bail!("{e}");
                }
                Err(ChunkError::Failed(e)) => return Err(e),
            }
        }
        let records = download.finish()?;
        self.log.start_at(id, crate::log::now_ms())?;
        self.pending.clear();
        let mut builder = ImageBuilder::new();
        for record in &records {
            builder.apply(id.end_offset - 1, record)?;
        }
        self.builder = builder;
        self.high_watermark = id.end_offset;
        let image = self.builder.publish();
        tracing::info!(
            end_offset = id.end_offset,
            records = records.len(),
            topics = image.topics.len(),
            brokers = image.brokers.len(),
            "metadata image loaded from the leader's snapshot"
        );
        self.image_tx.send_replace(image);
        Ok(())
    }

    /// Appends every whole batch of `bytes` (a trailing partial batch is fetched again).
    fn append(&mut self, bytes: &Bytes) -> anyhow::Result<()> {
        for batch in batch::whole_batches(bytes)? {
            let fetched = self.log.append_fetched(batch)?;
            self.pending.extend(fetched);
        }
        Ok(())
    }

    /// Applies pending records below the high watermark and publishes the image.
    fn apply_committed(&mut self) -> anyhow::Result<()> {
        let mut applied = false;
        while self.pending.front().is_some_and(|(offset, _)| *offset < self.high_watermark) {
            let (offset, record) = self.pending.pop_front().expect("checked");
            // As Kafka's broker (its metadata loader's fault handler): a committed record that
            // does not apply is logged and left out; the records after it still apply.
            if let Err(e) = self.builder.apply(offset, &record) {
                tracing::error!(offset, error = %e, "Error replaying metadata log record: left out");
            }
            applied = true;
        }
        if applied {
            let image = self.builder.publish();
            if image.offset != self.image_tx.borrow().offset {
                self.image_tx.send_replace(image);
            }
        }
        Ok(())
    }
}
