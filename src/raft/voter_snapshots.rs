//! A voter's snapshots (KIP-630), as Kafka's controllers keep them:
//! - written from the applied state (`Applier::snapshot`) once
//!   `metadata.log.max.record.bytes.between.snapshots` committed bytes or
//!   `metadata.log.max.snapshot.interval.ms` have passed since the last one, at the high
//!   watermark (a batch boundary), named by it and the epoch of the batch before it;
//! - cleaned as Kafka's `KafkaMetadataLog.maybeClean` does, every minute and after each new
//!   snapshot: while the log and the snapshots together exceed `metadata.max.retention.bytes`,
//!   or the oldest snapshot is older than `metadata.max.retention.ms`, and a newer snapshot
//!   exists, the log start moves to the next snapshot and the older one goes (the newest is
//!   always kept);
//! - downloaded from the leader when it points this follower at one (its log no longer holds
//!   what this voter needs), on a connection of its own, then installed when the core says so:
//!   the log starts over at its end and the applied state becomes the snapshot's.
//!
//! Invariants: a snapshot holds only committed state (at most the high watermark, outside a
//! metadata transaction); the core hears of a snapshot only once its file is durable; one
//! download at a time, and a download the core no longer wants is deleted, never installed.

use std::time::{Duration, Instant};

use super::*;

/// How often retention is checked besides after a snapshot (Kafka's cleaner: every 60 s).
const CLEAN_INTERVAL: Duration = Duration::from_secs(60);

/// When a voter snapshots and how much log it keeps (Kafka's `metadata.log.*` and
/// `metadata.max.retention.*` configs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotPolicy {
    /// `metadata.log.max.record.bytes.between.snapshots` (20 MiB).
    pub max_bytes_between: u64,
    /// `metadata.log.max.snapshot.interval.ms` (1 hour; 0: no time trigger).
    pub max_interval_ms: i64,
    /// `metadata.max.retention.bytes` (100 MiB; -1: no limit).
    pub retention_bytes: i64,
    /// `metadata.max.retention.ms` (7 days; -1: no limit).
    pub retention_ms: i64,
}

impl Default for SnapshotPolicy {
    fn default() -> Self {
        SnapshotPolicy {
            max_bytes_between: 20 << 20,
            max_interval_ms: 3_600_000,
            retention_bytes: 100 << 20,
            retention_ms: 7 * 24 * 3_600_000,
        }
    }
}

/// Kafka's `KafkaMetadataLog.maybeClean` over the snapshots `ids` (ascending) in `dir` and a log
/// of `log_bytes`: the snapshot the log start moves to, if any (while the log and the snapshots
/// exceed the retention bytes, or the oldest snapshot is older than the retention time, and a
/// newer snapshot exists, the start moves to the next one; the newest always stays).
pub(crate) fn clean_target(
    dir: &std::path::Path,
    policy: &SnapshotPolicy,
    ids: &[SnapshotId],
    log_bytes: u64,
) -> Option<SnapshotId> {
    let sizes: Vec<u64> = ids.iter().map(|id| snapshot::size(dir, *id).unwrap_or(0)).collect();
    let mut total = log_bytes + sizes.iter().sum::<u64>();
    let mut target = None;
    for (i, pair) in ids.windows(2).enumerate() {
        let over = policy.retention_bytes >= 0 && total > policy.retention_bytes as u64;
        let old = policy.retention_ms >= 0
            && snapshot::age_ms(dir, pair[0]).is_some_and(|age| age > policy.retention_ms as u64);
        if !(over || old) {
            break;
        }
        target = Some(pair[1]);
        total = total.saturating_sub(sizes[i]);
    }
    target
}

impl SnapshotPolicy {
    /// Kafka's snapshot and metadata retention configs of `config` (defaults as Kafka's).
    pub fn from_config(config: &crate::config::BrokerConfig) -> anyhow::Result<SnapshotPolicy> {
        let defaults = SnapshotPolicy::default();
        let int = |key: &str, default: i64, min: i64| {
            crate::config::int_property(&config.properties, key, default, min, i64::MAX)
        };
        Ok(SnapshotPolicy {
            max_bytes_between: int(
                "metadata.log.max.record.bytes.between.snapshots",
                defaults.max_bytes_between as i64,
                1,
            )? as u64,
            max_interval_ms: int("metadata.log.max.snapshot.interval.ms", defaults.max_interval_ms, 0)?,
            retention_bytes: int("metadata.max.retention.bytes", defaults.retention_bytes, -1)?,
            retention_ms: int("metadata.max.retention.ms", defaults.retention_ms, -1)?,
        })
    }
}

/// The driver's snapshot bookkeeping.
pub(super) struct Snapshots {
    /// Committed bytes applied since the last snapshot.
    since_bytes: u64,
    last_at: Instant,
    last_clean: Instant,
    /// A download finished and waiting for the core's word to install it.
    downloaded: Option<(SnapshotId, Vec<MetadataRecord>)>,
    downloading: bool,
    /// A snapshot was written since the last cleaning.
    clean_due: bool,
    events: mpsc::Sender<Event>,
    runtime: tokio::runtime::Handle,
}

impl Snapshots {
    pub(super) fn new(events: mpsc::Sender<Event>, runtime: tokio::runtime::Handle) -> Snapshots {
        let now = Instant::now();
        Snapshots {
            since_bytes: 0,
            last_at: now,
            last_clean: now,
            downloaded: None,
            downloading: false,
            clean_due: false,
            events,
            runtime,
        }
    }

    pub(super) fn committed(&mut self, bytes: u64) {
        self.since_bytes += bytes;
    }
}

impl Driver {
    /// Writes a snapshot of the applied state when one is due; returns the core's input for it.
    pub(super) fn maybe_snapshot(&mut self) -> anyhow::Result<Option<Input<Batch>>> {
        let end = self.committed;
        let latest = self.core.snapshot().map_or(0, |(e, _)| e);
        let policy = &self.settings.snapshots;
        let due = self.snapshots.since_bytes >= policy.max_bytes_between
            || (policy.max_interval_ms > 0
                && self.snapshots.last_at.elapsed() >= Duration::from_millis(policy.max_interval_ms as u64));
        if end <= latest || end <= self.core.log().start() || end > self.core.high_watermark() || !due {
            return Ok(None);
        }
        let Some(records) = self.applier.snapshot() else { return Ok(None) };
        let id = SnapshotId { end_offset: end as i64, epoch: self.core.log().epoch_before(end) };
        let now = crate::log::now_ms();
        // (A dynamic quorum's snapshot holds its voters at its end: a voter restarted or
        // installing it after the log below it is gone knows them, as Kafka's snapshots do.)
        // (Not an observer's bootstrap servers, which are no voters: ids below 0.)
        let ids = self.core.voters_at(end);
        let voters = (self.kraft_version >= 1 && ids.iter().all(|id| *id >= 0)).then(|| self.infos(ids));
        let bytes = snapshot::write(&self.log.dir(), id, &records, voters.as_deref(), (now, now))?;
        tracing::info!(
            end_offset = id.end_offset,
            epoch = id.epoch,
            records = records.len(),
            bytes,
            committed_bytes_since = self.snapshots.since_bytes,
            "metadata snapshot written"
        );
        self.snapshots.since_bytes = 0;
        self.snapshots.last_at = Instant::now();
        self.snapshots.clean_due = true;
        Ok(Some(Input::Snapshotted { end }))
    }

    /// Periodic work: a snapshot due by time, retention every `CLEAN_INTERVAL`.
    pub(super) fn on_tick_snapshots(&mut self) -> anyhow::Result<()> {
        if let Some(input) = self.maybe_snapshot()? {
            self.step(input, None)?;
        }
        if self.snapshots.clean_due || self.snapshots.last_clean.elapsed() >= CLEAN_INTERVAL {
            self.clean()?;
        }
        Ok(())
    }

    /// Kafka's retention of the metadata log (see the module comment).
    fn clean(&mut self) -> anyhow::Result<()> {
        self.snapshots.last_clean = Instant::now();
        self.snapshots.clean_due = false;
        if self.snapshots.downloading {
            return Ok(()); // (the directory is being written to; next time)
        }
        let dir = self.log.dir();
        let policy = self.settings.snapshots.clone();
        let known = self.core.snapshot().map_or(0, |(end, _)| end as i64);
        let ids: Vec<SnapshotId> = snapshot::ids(&dir)?.into_iter().filter(|s| s.end_offset <= known).collect();
        let Some(id) = clean_target(&dir, &policy, &ids, self.log.size_bytes()) else { return Ok(()) };
        let end = id.end_offset as u64;
        if end <= self.core.log().start() {
            return Ok(());
        }
        self.log.compact_voter(id)?;
        tracing::info!(log_start = end, snapshot = ?id, "metadata log cleaned below a snapshot");
        self.step(Input::Compact { end }, None)?;
        Ok(())
    }

    /// Starts downloading the leader's snapshot `(end, epoch)`; `Event::Downloaded` reports.
    pub(super) fn download(&mut self, leader: NodeId, end: u64, epoch: i32) {
        let id = SnapshotId { end_offset: end as i64, epoch };
        let events = self.snapshots.events.clone();
        let Some(endpoint) = self.known.get(&leader).and_then(|v| endpoint_on(v, self.settings.listener())) else {
            let _ = events.send(Event::Downloaded { id, result: Err(anyhow::anyhow!("leader {leader} unknown")) });
            return;
        };
        tracing::info!(leader, end, epoch, "the leader's log starts past this voter's: fetching its snapshot");
        self.snapshots.downloading = true;
        let addr = format!("{}:{}", endpoint.host, endpoint.port);
        let settings = self.settings.clone();
        let dir = self.log.dir();
        let leader_epoch = self.core.election_state().epoch;
        self.snapshots.runtime.spawn(async move {
            let timeout = Duration::from_millis(settings.request_timeout_ms.max(1) as u64);
            let result = snapshot_wire::download(
                &addr,
                &settings.security,
                timeout,
                &dir,
                &settings.cluster_id,
                settings.node_id,
                leader_epoch,
                id,
            )
            .await;
            let _ = events.send(Event::Downloaded { id, result });
        });
    }

    pub(super) fn on_downloaded(
        &mut self,
        id: SnapshotId,
        result: anyhow::Result<Vec<MetadataRecord>>,
    ) -> anyhow::Result<()> {
        self.snapshots.downloading = false;
        let fetched = match result {
            Ok(records) => {
                self.snapshots.downloaded = Some((id, records));
                // The snapshot's voters (a dynamic quorum's), else the static ones: a snapshot
                // of a quorum formatted with `controller.quorum.voters` holds no VotersRecord.
                let voters = match snapshot::read_voters(&self.log.dir(), id) {
                    Ok(Some(voters)) => {
                        self.learn_voters(&voters);
                        voters.iter().map(|v| v.id).collect()
                    }
                    Ok(None) => self.settings.voters.keys().copied().collect(),
                    Err(e) => {
                        tracing::warn!(snapshot = ?id, error = %e, "the fetched snapshot's voters do not decode");
                        self.step(Input::SnapshotFetched(None), None)?;
                        return Ok(());
                    }
                };
                Some((id.end_offset as u64, id.epoch, voters))
            }
            Err(e) => {
                tracing::warn!(snapshot = ?id, error = %e, "fetching the leader's snapshot failed");
                None
            }
        };
        self.step(Input::SnapshotFetched(fetched), None)?;
        if let Some((id, _)) = self.snapshots.downloaded.take() {
            // No longer wanted (leadership moved on meanwhile): not kept.
            snapshot::remove(&self.log.dir(), id)?;
        }
        Ok(())
    }

    /// Starts the log over at the downloaded snapshot and loads its state.
    pub(super) fn install(&mut self, end: u64, epoch: i32) -> anyhow::Result<()> {
        let Some((id, records)) = self.snapshots.downloaded.take() else {
            anyhow::bail!("the core installs snapshot ({end}, {epoch}) but none was downloaded");
        };
        anyhow::ensure!(
            (id.end_offset as u64, id.epoch) == (end, epoch),
            "snapshot {id:?} downloaded, ({end}, {epoch}) installed"
        );
        self.log.start_at(id, crate::log::now_ms())?;
        let count = records.len();
        self.applier.load(end, records);
        self.committed = end;
        self.snapshots.since_bytes = 0;
        self.snapshots.last_at = Instant::now();
        tracing::info!(end, epoch, records = count, "metadata state loaded from the leader's snapshot");
        Ok(())
    }
}
