//! The log of one partition: an ordered list of segments with one active segment at the end.
//!
//! Owns: offset assignment, segment rolling (`segment.bytes`, `segment.ms`), reads across
//! segments, timestamp lookups, retention by time and size (moving the log start offset), the
//! flush bookkeeping behind `flush.messages` / `flush.ms` / acks=all fsync, the high watermark
//! (kept here, decided by the replica layer: appends do not move it) and the leader-epoch cache. Modelled on the responsibilities of Kafka's `UnifiedLog`.
//! On disk: `<log.dir>/<topic>-<partition>/` (its entry in the log directory made durable by its
//! first flush) holding the segments, `partition.metadata` on cluster brokers (`partition_metadata`)
//! and `leader-epoch-checkpoint`
//! (Kafka's text format: version line, count line, then `epoch start_offset` lines; when it is
//! synced: `epoch_cache.rs`).
//! Invariants: log_start_offset <= high_watermark <= log_end_offset; segments are sorted by base
//! offset, non-overlapping and contiguous; only the last segment is ever written to;
//! `flushed_offset` <= log_end_offset and everything below it has been fsynced.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::TopicConfig;
use crate::error::LogError;
use crate::log::batch::{self, BatchSummary};
use crate::log::cleaner::{self, CleanPlan, CleanedGroup};
use crate::log::dir_health::DirHealth;
use crate::log::epoch_cache::EpochCache;
use crate::log::producer_state::{Check, Marker, ProducerState};
use crate::log::segment::{FileSlice, Segment};

mod retention;
mod verification;

/// Log start offset moved by DeleteRecords inside the first segment (one decimal number).
const LOG_START_CHECKPOINT: &str = "log-start-offset";

#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: TopicConfig,
    segments: Vec<Segment>,
    log_start_offset: i64,
    high_watermark: i64,
    /// Everything below this offset has been fsynced.
    flushed_offset: i64,
    unflushed_messages: i64,
    last_flush_ms: i64,
    /// Segment files created in the directory so far, and how many of those creations an fsync
    /// of the directory covers: while they differ the directory needs an fsync too. (Counts, not
    /// a flag: a segment created while an fsync is running is not covered by it.)
    dir_changes: u64,
    dir_changes_synced: u64,
    epochs: EpochCache,
    /// Idempotent producers' sequence state.
    producers: ProducerState,
    /// Compaction: records below this offset have been cleaned (`cleaner-offset-checkpoint`).
    cleaner_checkpoint: i64,
    /// How much earlier than `segment.ms` the active segment rolls: random per segment, below
    /// `segment.jitter.ms` and `segment.ms`, as Kafka draws it.
    roll_jitter_ms: i64,
    /// Whether the log directory is online; shared by every partition in it.
    health: std::sync::Arc<DirHealth>,
    /// This process created the partition directory and no flush has made its entry in the log
    /// directory (and its `partition.metadata`) durable yet.
    created_unsynced: bool,
}

/// What an append produced, for the produce response.
#[derive(Debug, Clone, Copy)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// The caller should fsync now (flush.messages reached).
    pub flush_due: bool,
}

/// Files and the offset an fsync pass covers, taken under the lock and synced outside it.
pub struct FlushWork {
    pub files: Vec<File>,
    pub up_to_offset: i64,
    /// Set when the directory is synced too: the directory changes that sync covers.
    pub dir_changes: Option<u64>,
    /// Set when the leader-epoch checkpoint is synced too: the writes that sync covers.
    pub epoch_writes: Option<u64>,
    /// The pass makes the directory's creation durable (its entry in the log directory).
    pub creation: bool,
}

impl FlushWork {
    pub fn includes_dir(&self) -> bool {
        self.dir_changes.is_some()
    }
}

impl PartitionLog {
    /// Opens (recovering if needed) or creates the log in `dir`.
    pub fn open(dir: &Path, config: TopicConfig, now_ms: i64) -> Result<PartitionLog, LogError> {
        Self::open_with(dir, config, now_ms, true)
    }

    /// Like `open`; after a clean shutdown (`recover_tail` false) the active segment is trusted
    /// like the others (indexes still checked against the log) instead of fully re-scanned.
    pub fn open_with(
        dir: &Path,
        config: TopicConfig,
        now_ms: i64,
        recover_tail: bool,
    ) -> Result<PartitionLog, LogError> {
        // A new directory's entry in its log directory is made durable by the first flush
        // (`flush_work`), with the data it covers: creating many partitions costs no fsync.
        let created = !dir.is_dir();
        if created {
            std::fs::create_dir_all(dir)?;
        }
        // A cleaning pass interrupted by a crash: finish a committed swap, drop a partial one.
        cleaner::finish_swaps(dir)?;
        let mut bases = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if let Some(stem) = name.strip_suffix(".log") {
                if let Ok(base) = stem.parse::<i64>() {
                    bases.push(base);
                }
            } else if name.ends_with(".tmp") || name.ends_with(".deleted") {
                let _ = std::fs::remove_file(dir.join(&*name));
            }
        }
        bases.sort_unstable();
        let mut segments = Vec::with_capacity(bases.len().max(1));
        let last_index = bases.len().saturating_sub(1);
        for (i, base) in bases.iter().enumerate() {
            // The active segment is where a crash leaves a torn tail: always fully recover it.
            segments.push(Segment::open(dir, *base, config.index_interval_bytes, recover_tail && i == last_index)?);
        }
        if segments.is_empty() {
            segments.push(Segment::create(dir, 0, config.index_interval_bytes)?);
        }
        if config.preallocate {
            segments.last_mut().expect("one segment").preallocate(config.segment_bytes);
        }
        let roll_jitter_ms = roll_jitter_ms(&config);
        let log_start_offset = segments[0].base_offset;
        let log_end_offset = segments.last().expect("one segment").next_offset;
        segments.last_mut().expect("one segment").created_ms = now_ms;
        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            high_watermark: log_end_offset,
            flushed_offset: log_end_offset,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            dir_changes: 1,
            dir_changes_synced: 0,
            epochs: EpochCache::empty(dir),
            producers: ProducerState::default(),
            roll_jitter_ms,
            cleaner_checkpoint: 0,
            health: Default::default(),
            created_unsynced: created,
        };
        log.epochs = EpochCache::load(dir, log.log_end_offset())?;
        if recover_tail || !log.epochs.intact() {
            log.recover_epochs()?;
        }
        if let Ok(text) = std::fs::read_to_string(log.dir.join(cleaner::CHECKPOINT_FILE)) {
            log.cleaner_checkpoint = text.trim().parse::<i64>().unwrap_or(0).clamp(0, log.log_end_offset());
        }
        if let Ok(text) = std::fs::read_to_string(log.dir.join(LOG_START_CHECKPOINT)) {
            if let Ok(start) = text.trim().parse::<i64>() {
                log.log_start_offset = start.clamp(log.log_start_offset, log.log_end_offset());
            }
        }
        log.rebuild_producer_state()?;
        Ok(log)
    }

    /// A partition whose log directory is offline since the start (it failed, or is gone): no
    /// segment is open, and every read or write answers KAFKA_STORAGE_ERROR (its `health` is
    /// offline, checked before any segment is touched). Nothing on disk is created or removed.
    pub fn offline(dir: PathBuf, config: TopicConfig, health: std::sync::Arc<DirHealth>) -> PartitionLog {
        assert!(health.is_offline(), "an offline placeholder needs an offline directory");
        PartitionLog {
            epochs: EpochCache::empty(&dir),
            dir,
            config,
            segments: Vec::new(),
            log_start_offset: 0,
            high_watermark: 0,
            flushed_offset: 0,
            unflushed_messages: 0,
            last_flush_ms: 0,
            dir_changes: 0,
            dir_changes_synced: 0,
            producers: ProducerState::default(),
            cleaner_checkpoint: 0,
            roll_jitter_ms: 0,
            health,
            created_unsynced: false,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The health of the log directory holding this log (an always-online one until set).
    pub fn health(&self) -> &std::sync::Arc<DirHealth> {
        &self.health
    }
    pub fn set_health(&mut self, health: std::sync::Arc<DirHealth>) {
        self.health = health;
    }
    /// An I/O error met outside the log lock (an fsync of its files): the directory goes offline.
    pub fn fail_storage(&self, error: &dyn std::fmt::Display) {
        self.health.fail(error);
    }
    pub fn config(&self) -> &TopicConfig {
        &self.config
    }
    pub fn set_config(&mut self, config: TopicConfig) {
        self.config = config;
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn log_end_offset(&self) -> i64 {
        // An offline placeholder has no segment.
        self.segments.last().map_or(self.log_start_offset, |s| s.next_offset)
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    /// Moves the high watermark up to `offset`: the replica layer (`crate::replica`) decides
    /// it, appends do not. Never moves it back.
    pub fn advance_high_watermark(&mut self, offset: i64) {
        assert!(offset <= self.log_end_offset(), "high watermark {offset} past the log end {}", self.log_end_offset());
        self.high_watermark = self.high_watermark.max(offset);
    }
    /// At open, in a cluster: the high watermark recorded before the restart (not the log end,
    /// which may hold records never committed), within [log start, log end].
    pub fn restore_high_watermark(&mut self, offset: i64) {
        self.high_watermark = offset.clamp(self.log_start_offset, self.log_end_offset());
    }
    pub fn flushed_offset(&self) -> i64 {
        self.flushed_offset
    }
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::size).sum()
    }
    /// (base offset, bytes of valid data) of every segment, the active one last: what a copy
    /// of the partition (AlterReplicaLogDirs) must hold of each `.log` file.
    pub fn segment_sizes(&self) -> Vec<(i64, u64)> {
        self.segments.iter().map(|s| (s.base_offset, s.size())).collect()
    }
    pub fn latest_epoch(&self) -> Option<(i32, i64)> {
        self.epochs.latest()
    }

    /// OffsetForLeaderEpoch (`EpochCache::end_offset_for`).
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epochs.end_offset_for(epoch, self.log_start_offset, self.log_end_offset())
    }

    fn active(&self) -> &Segment {
        self.segments.last().expect("a log always has an active segment")
    }

    /// Loads the newest producer snapshot and replays the batches written after it.
    fn rebuild_producer_state(&mut self) -> Result<(), LogError> {
        let end = self.log_end_offset();
        let (mut state, from) = match ProducerState::load_snapshot(&self.dir, end)? {
            Some((state, offset)) => (state, offset),
            None => (ProducerState::default(), self.log_start_offset),
        };
        for segment in self.segments.iter().filter(|s| s.next_offset > from) {
            segment.for_each_header(from, |header| {
                if header.base_offset() < from {
                    return;
                }
                if header.is_control() {
                    if let Some(marker) = batch::control_marker(header.0) {
                        state.complete_txn(
                            header.producer_id(),
                            header.producer_epoch(),
                            marker,
                            header.base_offset(),
                            header.max_timestamp(),
                        );
                    }
                } else if let Some(producer) = header.producer_batch() {
                    state.update(&producer, header.base_offset(), header.last_offset(), header.is_transactional());
                }
            })?;
        }
        state.truncate_head(self.log_start_offset);
        self.producers.hand_over_verifications(&mut state);
        self.producers = state;
        Ok(())
    }

    pub fn producer_state(&self) -> &ProducerState {
        &self.producers
    }

    /// Whether `producer_id` at `epoch` has an open transaction in this partition.
    pub fn has_open_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers.get(producer_id).is_some_and(|e| e.epoch == epoch && e.txn_first_offset.is_some())
    }

    /// Whether this partition holds no batch of `producer_id` at its current epoch (none at
    /// all, or none since a marker bumped its epoch).
    pub fn producer_batches_empty(&self, producer_id: i64) -> bool {
        self.producers.get(producer_id).is_none_or(|e| e.batches.is_empty())
    }

    /// The epoch this partition last saw from `producer_id`, if any.
    pub fn producer_epoch(&self, producer_id: i64) -> Option<i16> {
        self.producers.get(producer_id).map(|e| e.epoch)
    }

    /// The last stable offset: below it every transaction is decided (read_committed bound).
    pub fn last_stable_offset(&self) -> i64 {
        self.producers.first_unstable_offset().map_or(self.high_watermark, |f| f.min(self.high_watermark))
    }

    /// Aborted transactions a read_committed fetch from `from` must be told about.
    pub fn aborted_txns(&self, from: i64, to: i64) -> Vec<crate::log::producer_state::AbortedTxn> {
        self.producers.aborted_between(from, to)
    }

    /// Writes a transaction marker (commit or abort) for `producer_id`; returns its offset.
    /// A marker from a fenced epoch is refused with INVALID_PRODUCER_EPOCH.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        self.health.check()?;
        let result = self.append_marker_inner(producer_id, epoch, commit, coordinator_epoch, leader_epoch, now_ms);
        self.health.watch(result)
    }

    fn append_marker_inner(
        &mut self,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<i64, LogError> {
        if self.producers.get(producer_id).is_some_and(|e| epoch < e.epoch) {
            return Err(LogError::InvalidProducerEpoch(format!(
                "marker epoch {epoch} is fenced for producer {producer_id}"
            )));
        }
        self.producers.check_marker(producer_id, coordinator_epoch)?;
        let mut marker = batch::encode_marker(producer_id, epoch, commit, coordinator_epoch, now_ms);
        let offset = self.log_end_offset();
        batch::set_base_offset(&mut marker, offset);
        batch::set_leader_epoch(&mut marker, leader_epoch);
        self.maybe_roll(marker.len() as u64, (offset, offset), now_ms, now_ms)?;
        // A marker starts an epoch like any batch (Kafka assigns the epoch cache for every
        // appended batch, control batches included).
        self.assign_epoch(leader_epoch, offset)?;
        self.segments.last_mut().expect("active segment").append(&marker, offset)?;
        self.unflushed_messages += 1;
        self.producers.complete_txn(producer_id, epoch, Marker { commit, coordinator_epoch }, offset, now_ms);
        Ok(offset)
    }

    /// Drops producers idle for longer than `expiration_ms` (`producer.id.expiration.ms`).
    pub fn expire_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.expire(now_ms.saturating_sub(expiration_ms))
    }

    /// Validates nothing: `batch` comes from `batch::validate_produce`. Assigns offsets from the
    /// log end, stamps the leader epoch, rolls the segment if needed and writes. `batch` itself
    /// is not changed: its header is copied, stamped and written in front of the rest.
    pub fn append(
        &mut self,
        batch: impl AsRef<[u8]>,
        summary: &BatchSummary,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        self.health.check()?;
        let base_offset = self.log_end_offset();
        let offsets = (base_offset, base_offset + summary.record_count as i64 - 1);
        let result = self.append_inner(batch.as_ref(), summary, leader_epoch, offsets, now_ms, true);
        self.health.watch(result)
    }

    /// Appends a batch copied from the partition's leader (Kafka's `appendAsFollower`): only its
    /// integrity is checked (`batch::check_replicated`), never the producer's rules, and it keeps
    /// the offsets and the leader epoch it carries. It may start past this log's end (a gap a
    /// compaction left) but never before it (`LogError::UnexpectedAppendOffset`), and its epoch
    /// is never below this log's latest. Producer sequences are not checked (the leader did)
    /// but the producer state follows them.
    pub fn append_as_follower(&mut self, batch: &[u8], now_ms: i64) -> Result<AppendInfo, LogError> {
        self.health.check()?;
        let summary = batch::check_replicated(batch)?;
        let header = batch::Header::new(batch);
        let (first, last, end) = (header.base_offset(), header.last_offset(), self.log_end_offset());
        if first < end {
            return Err(LogError::UnexpectedAppendOffset { first, last, end });
        }
        let epoch = header.leader_epoch();
        if let Some((latest, _)) = self.latest_epoch().filter(|(latest, _)| epoch < *latest) {
            return Err(LogError::CorruptMessage(format!(
                "the batch at offset {first} has leader epoch {epoch}, below the log's latest epoch {latest}"
            )));
        }
        let result = self.append_inner(batch, &summary, epoch, (first, last), now_ms, false);
        self.health.watch(result)
    }

    /// Writes `batch` at `base_offset..=last_offset` (at or past the log end) in `leader_epoch`.
    fn append_inner(
        &mut self,
        batch: &[u8],
        summary: &BatchSummary,
        leader_epoch: i32,
        (base_offset, last_offset): (i64, i64),
        now_ms: i64,
        check_sequences: bool,
    ) -> Result<AppendInfo, LogError> {
        assert!(base_offset >= self.log_end_offset() && last_offset >= base_offset, "appends go past the log end");
        let header = batch::Header::new(batch);
        let transactional = header.is_transactional();
        let producer = header.producer_batch();
        // Coordinator writes carry a producer id but no sequence: only client batches are
        // checked for order and duplicates (as Kafka does for non-client origins).
        if let Some(producer) = producer.as_ref().filter(|p| check_sequences && p.first_seq >= 0) {
            if let Check::Duplicate { first_offset, last_offset, timestamp } = self.producers.check(producer)? {
                // A retried batch: answer with where it already is and, as Kafka does, its max
                // timestamp as the append time (on a LogAppendTime topic: the time it got),
                // write nothing.
                return Ok(AppendInfo {
                    base_offset: first_offset,
                    last_offset,
                    log_append_time_ms: timestamp,
                    log_start_offset: self.log_start_offset,
                    flush_due: false,
                });
            }
        }
        let (head, body) = batch.split_at(batch::HEADER_BYTES);
        let mut head: [u8; batch::HEADER_BYTES] = head.try_into().expect("split at the header length");
        batch::set_base_offset(&mut head, base_offset);
        batch::set_leader_epoch(&mut head, leader_epoch);
        self.maybe_roll(batch.len() as u64, (base_offset, last_offset), header.max_timestamp(), now_ms)?;
        self.assign_epoch(leader_epoch, base_offset)?;
        let offset_of_max_timestamp = base_offset + summary.offset_delta_of_max_timestamp as i64;
        self.segments.last_mut().expect("active segment").append_parts(&head, body, offset_of_max_timestamp)?;
        assert_eq!(self.log_end_offset(), last_offset + 1, "offsets stay contiguous");
        if header.is_control() {
            // A marker fetched from the leader ends its producer's transaction here too (on the
            // leader, `append_marker` does it), so a follower that becomes leader has the
            // leader's open transactions, last stable offset and aborted transactions.
            if let Some(marker) = batch::control_marker(batch) {
                let (id, epoch) = (header.producer_id(), header.producer_epoch());
                self.producers.complete_txn(id, epoch, marker, base_offset, header.max_timestamp());
            }
        } else if let Some(producer) = &producer {
            self.producers.update(producer, base_offset, last_offset, transactional);
        }
        // Single node: a write is committed as soon as it is in the log.
        self.unflushed_messages += summary.record_count as i64;
        let flush_due = self.unflushed_messages >= self.config.flush_messages;
        let log_append_time_ms = if header.attributes() & (1 << 3) != 0 { header.max_timestamp() } else { -1 };
        Ok(AppendInfo {
            base_offset,
            last_offset,
            log_append_time_ms,
            log_start_offset: self.log_start_offset,
            flush_due,
        })
    }

    /// Rolls before a write of `incoming_bytes` ending at `last_offset` whose largest timestamp
    /// is `max_timestamp`, with Kafka's rule (`LogSegment.shouldRoll`): the segment is full, its
    /// index is full, or it holds data and has waited longer than `segment.ms` minus the jitter.
    /// The wait is the incoming batch's max timestamp minus the segment's first batch's, so old
    /// or skewed CreateTime records roll by their own clock, not on every write; only when the
    /// first batch has no timestamp does it count from the segment's creation on the broker's clock.
    fn maybe_roll(
        &mut self,
        incoming_bytes: u64,
        (first_offset, last_offset): (i64, i64),
        max_timestamp: i64,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let active = self.active();
        let waited_ms = match active.first_batch_timestamp {
            Some(first) if first >= 0 => max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(active.created_ms),
        };
        let too_old = !active.is_empty() && waited_ms > self.config.segment_ms - self.roll_jitter_ms;
        let index_full = !active.is_empty() && active.index_full(self.config.segment_index_bytes);
        if active.is_full(incoming_bytes, self.config.segment_bytes, last_offset) || too_old || index_full {
            self.roll_at(self.log_end_offset(), now_ms)?;
        }
        // A batch too far past the active segment's base for its relative offsets (a follower
        // copying past a gap of over 2^31 offsets) starts a segment of its own at its first
        // offset, as Kafka rolls at a batch's first offset.
        if !self.active().holds_offset(last_offset) {
            self.roll_at(first_offset, now_ms)?;
        }
        Ok(())
    }

    /// Starts a new active segment at the log end offset.
    pub fn roll(&mut self) -> Result<(), LogError> {
        self.roll_at(self.log_end_offset(), crate::log::now_ms())
    }

    /// Starts a new active segment at `base` (the log end, or past it where a follower's next
    /// batch starts), created at `now_ms`.
    fn roll_at(&mut self, base: i64, now_ms: i64) -> Result<(), LogError> {
        assert!(base >= self.log_end_offset(), "a segment starts at or past the log end");
        // Only the active segment may hold batches whose epoch is not durable in the checkpoint
        // (recovery re-reads only that one).
        self.epochs.sync()?;
        let active = self.segments.last_mut().expect("active segment");
        active.sync_indexes()?;
        active.release_preallocation()?;
        // As Kafka does, snapshot producer state at every roll so recovery replays little.
        self.producers.write_snapshot(&self.dir, base)?;
        let mut segment = Segment::create(&self.dir, base, self.config.index_interval_bytes)?;
        segment.created_ms = now_ms;
        if self.config.preallocate {
            segment.preallocate(self.config.segment_bytes);
        }
        self.segments.push(segment);
        self.roll_jitter_ms = roll_jitter_ms(&self.config);
        self.dir_changes += 1;
        Ok(())
    }

    /// File handles to fsync so that everything up to the current log end is durable.
    pub fn flush_work(&self) -> io::Result<FlushWork> {
        self.health.check().map_err(|e| io::Error::other(e.to_string()))?;
        let result = self.flush_work_inner();
        if let Err(e) = &result {
            self.health.fail(e);
        }
        result
    }

    fn flush_work_inner(&self) -> io::Result<FlushWork> {
        let mut files = Vec::new();
        for segment in self.segments.iter().rev() {
            if segment.next_offset <= self.flushed_offset {
                // Durable already (an empty new segment only needs its directory entry synced).
                break;
            }
            files.push(segment.sync_handle()?);
        }
        let epoch_writes = self.epochs.unsynced();
        if epoch_writes.is_some() {
            files.push(self.epochs.file()?);
        }
        // A new epoch checkpoint is a rename in the directory: synced with it.
        let includes_dir =
            self.dir_changes > self.dir_changes_synced || epoch_writes.is_some() || self.created_unsynced;
        if includes_dir {
            // The directory too, so newly created segment files survive a crash.
            files.push(File::open(&self.dir)?);
        }
        if self.created_unsynced {
            // A directory this process created: its entry in the log directory, and the topic
            // id written in it, become durable with the first data.
            if let Some(parent) = self.dir.parent() {
                files.push(File::open(parent)?);
            }
            match File::open(self.dir.join(crate::log::partition_metadata::FILE_NAME)) {
                Ok(file) => files.push(file),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(FlushWork {
            files,
            up_to_offset: self.log_end_offset(),
            dir_changes: includes_dir.then_some(self.dir_changes),
            epoch_writes,
            creation: self.created_unsynced,
        })
    }

    /// Records that everything below `offset` is durable.
    pub fn mark_flushed(&mut self, work: &FlushWork, now_ms: i64) {
        let offset = work.up_to_offset;
        if work.creation {
            self.created_unsynced = false;
        }
        if let Some(changes) = work.dir_changes {
            self.dir_changes_synced = self.dir_changes_synced.max(changes);
        }
        if let Some(writes) = work.epoch_writes {
            self.epochs.mark_synced(writes);
        }
        if offset > self.flushed_offset {
            self.flushed_offset = offset;
        }
        if self.flushed_offset >= self.log_end_offset() {
            self.unflushed_messages = 0;
        }
        self.last_flush_ms = now_ms;
    }

    /// Whether `flush.ms` asks for an fsync now.
    pub fn flush_overdue(&self, now_ms: i64) -> bool {
        self.flushed_offset < self.log_end_offset() && now_ms - self.last_flush_ms >= self.config.flush_ms
    }

    /// Reads batches from `offset`, up to `max_offset` (exclusive) and about `max_bytes`.
    pub fn read(&self, offset: i64, max_offset: i64, max_bytes: usize, min_one: bool) -> Result<Vec<u8>, LogError> {
        match self.read_slice(offset, max_offset, max_bytes, min_one)? {
            Some(slice) => Ok(slice.read_to_vec()?),
            None => Ok(Vec::new()),
        }
    }

    /// Like `read`, but only locates the bytes: a slice of one segment file, read (or sent)
    /// after the partition lock is released. `None` when there is nothing to return.
    pub fn read_slice(
        &self,
        offset: i64,
        max_offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        self.health.check()?;
        let result = self.read_slice_inner(offset, max_offset, max_bytes, min_one);
        self.health.watch(result)
    }

    fn read_slice_inner(
        &self,
        offset: i64,
        max_offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        let end = self.log_end_offset();
        if offset < self.log_start_offset || offset > end {
            return Err(LogError::OffsetOutOfRange { offset, start: self.log_start_offset, end });
        }
        let i = self.segments.partition_point(|s| s.base_offset <= offset).saturating_sub(1);
        for segment in &self.segments[i..] {
            let slice = segment.read_slice(offset, max_offset, max_bytes, min_one)?;
            if slice.is_some() || segment.next_offset > offset.max(segment.base_offset) {
                return Ok(slice);
            }
        }
        Ok(None)
    }

    /// ListOffsets by timestamp: the first offset whose record timestamp is >= `target`.
    pub fn offset_for_timestamp(&self, target: i64) -> Result<Option<(i64, i64)>, LogError> {
        self.health.check()?;
        let result = self.offset_for_timestamp_inner(target);
        self.health.watch(result)
    }

    fn offset_for_timestamp_inner(&self, target: i64) -> Result<Option<(i64, i64)>, LogError> {
        for segment in &self.segments {
            if let Some(found) = segment.find_offset_by_timestamp(target, self.log_start_offset)? {
                if found.0 < self.high_watermark {
                    return Ok(Some(found));
                }
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP: the offset and timestamp of the record with the largest timestamp.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.segments
            .iter()
            .filter(|s| !s.is_empty())
            .max_by_key(|s| s.max_timestamp)
            .map(|s| (s.offset_of_max_timestamp, s.max_timestamp))
    }

    /// Records that `leader_epoch` starts at `offset` if it is newer than the latest epoch.
    fn assign_epoch(&mut self, leader_epoch: i32, offset: i64) -> Result<(), LogError> {
        self.epochs.assign(leader_epoch, offset)
    }

    /// After an unclean shutdown (or with a checkpoint that does not parse): the epochs of the
    /// active segment's batches (of every segment's) the checkpoint lacks (`EpochCache::recover`).
    fn recover_epochs(&mut self) -> Result<(), LogError> {
        let clear = !self.epochs.intact();
        if clear {
            tracing::warn!(dir = %self.dir.display(), "leader-epoch-checkpoint unreadable: rebuilt from the log");
        }
        let from = if clear { 0 } else { self.segments.len().saturating_sub(1) };
        let mut batches = Vec::new();
        for segment in &self.segments[from..] {
            segment.for_each_header(segment.base_offset, |h| {
                // Only where the epoch rises: a batch of an epoch seen already adds nothing.
                if batches.last().is_none_or(|&(e, _): &(i32, i64)| e < h.leader_epoch()) {
                    batches.push((h.leader_epoch(), h.base_offset()));
                }
            })?;
        }
        self.epochs.recover(&batches, clear)
    }

    /// Truncates the log to end before `offset` (a follower whose log diverged from its new
    /// leader's, Kafka's `UnifiedLog.truncateTo`): whole batches go (the log may end before
    /// `offset`), segments past it are deleted, the leader-epoch cache, high watermark, flushed
    /// offset, cleaner checkpoint and producer state follow. Never below the log start offset.
    /// Returns the new log end offset.
    pub fn truncate_to(&mut self, offset: i64) -> Result<i64, LogError> {
        self.health.check()?;
        let result = self.truncate_inner(offset);
        self.health.watch(result)
    }

    fn truncate_inner(&mut self, offset: i64) -> Result<i64, LogError> {
        if offset >= self.log_end_offset() {
            return Ok(self.log_end_offset());
        }
        if offset < self.log_start_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                start: self.log_start_offset,
                end: self.log_end_offset(),
            });
        }
        while self.segments.len() > 1 && self.segments.last().expect("segments").base_offset >= offset {
            let gone = self.segments.pop().expect("more than one");
            gone.delete()?;
            self.dir_changes += 1;
        }
        self.segments.last_mut().expect("active segment").truncate_to(offset)?;
        let end = self.log_end_offset();
        assert!(end <= offset && end >= self.log_start_offset, "truncated to {end}, asked {offset}");
        self.epochs.truncate_from_end(end)?;
        self.high_watermark = self.high_watermark.min(end);
        self.flushed_offset = self.flushed_offset.min(end);
        self.cleaner_checkpoint = self.cleaner_checkpoint.min(end);
        self.rebuild_producer_state()?;
        assert!(self.log_start_offset <= self.high_watermark && self.high_watermark <= end);
        Ok(end)
    }

    /// Empties the log and starts it over at `offset` (Kafka's `truncateFullyAndStartAt`): for a
    /// follower whose log ends before its leader's log start, or an empty follower whose first
    /// copied batch starts before its log start. Every segment goes (the newest first, so a
    /// crash leaves a prefix of the old log) and one empty segment starts at `offset`, which
    /// becomes the log start, high watermark, flushed offset and cleaner checkpoint; the epoch
    /// cache and the producer state (and its snapshots) are emptied.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.health.check()?;
        let result = self.truncate_fully_inner(offset);
        self.health.watch(result)
    }

    fn truncate_fully_inner(&mut self, offset: i64) -> Result<(), LogError> {
        assert!(offset >= 0, "a log starts at a non-negative offset");
        while let Some(gone) = self.segments.pop() {
            gone.delete()?;
        }
        self.epochs.clear()?;
        ProducerState::remove_snapshots(&self.dir)?;
        self.producers = ProducerState::default();
        let mut segment = Segment::create(&self.dir, offset, self.config.index_interval_bytes)?;
        segment.created_ms = crate::log::now_ms();
        if self.config.preallocate {
            segment.preallocate(self.config.segment_bytes);
        }
        self.segments.push(segment);
        write_atomically(&self.dir.join(LOG_START_CHECKPOINT), format!("{offset}\n").as_bytes())?;
        self.log_start_offset = offset;
        self.high_watermark = offset;
        self.flushed_offset = offset;
        self.cleaner_checkpoint = offset;
        self.unflushed_messages = 0;
        self.dir_changes += 1;
        assert_eq!(self.log_end_offset(), offset, "the log starts over empty");
        Ok(())
    }

    /// The leader-epoch cache: `(epoch, first offset written in it)`, ascending.
    pub fn epochs(&self) -> &[(i32, i64)] {
        self.epochs.entries()
    }

    /// Closes the log after an fsync of everything (clean shutdown).
    pub fn close(&mut self) -> Result<(), LogError> {
        let work = self.flush_work()?;
        for file in &work.files {
            file.sync_all()?;
        }
        let active = self.segments.last_mut().expect("active segment");
        active.sync_indexes()?;
        // The next open reserves again if `preallocate` is still set.
        active.release_preallocation()?;
        self.flushed_offset = work.up_to_offset;
        if let Some(writes) = work.epoch_writes {
            self.epochs.mark_synced(writes);
        }
        // A snapshot at the log end lets the next start skip replaying the log. Not needed when
        // one is there already (nothing appended since) or there is nothing to replay.
        let end = work.up_to_offset;
        let nothing_to_replay = end == self.log_start_offset && self.producers.is_empty();
        if !nothing_to_replay && !ProducerState::has_snapshot(&self.dir, end) {
            self.producers.write_snapshot(&self.dir, end)?;
        }
        Ok(())
    }

    /// Removes the whole partition directory (topic deletion).
    pub fn delete(self) -> Result<(), LogError> {
        let dir = self.dir.clone();
        let placeholder = self.segments.is_empty();
        drop(self);
        match std::fs::remove_dir_all(&dir) {
            // An offline placeholder's directory is not reachable (or never existed).
            Err(_) if placeholder => Ok(()),
            other => Ok(other?),
        }
    }
}

/// Kafka's `randomSegmentJitter`: uniform below `segment.jitter.ms` and `segment.ms` (0 without jitter).
fn roll_jitter_ms(config: &TopicConfig) -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let bound = config.segment_jitter_ms.min(config.segment_ms);
    if bound <= 0 {
        return 0;
    }
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    (random % bound as u64) as i64
}

/// Writes `bytes` to `path` via a temp file, fsync and rename, so readers see old or new.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// The directory name Kafka uses for a partition.
pub fn partition_dir(log_dir: &Path, topic: &str, partition: i32) -> PathBuf {
    log_dir.join(format!("{topic}-{partition}"))
}
