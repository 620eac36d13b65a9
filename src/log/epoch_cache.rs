//! The leader-epoch cache of one partition log (Kafka's `LeaderEpochFileCache`): for every
//! leader epoch the log was written at, the offset of its first batch. Followers truncate by it
//! (OffsetForLeaderEpoch, diverging epochs) and ListOffsets answers epochs from it.
//!
//! On disk: `leader-epoch-checkpoint` in the partition directory, Kafka's format: a version
//! line (0), a count line, then one `<epoch> <start offset>` line per entry, ascending. Written
//! atomically (temp file, rename) after every change. Entries at or past the log end found when
//! loading describe data a crash truncated away and are dropped.
//!
//! Durability: removals (truncation at either end) are fsynced at once (file and directory). A
//! new epoch (`assign`, on the append path under the partition lock: the first batch of a new
//! leader, on the leader and on each follower) is written without fsync: an fsync per partition
//! there made a failover of hundreds of partitions wait for hundreds of fsyncs in a row. The
//! write survives a process crash at once (page cache); the owning log's next flush syncs it
//! with the segment and the directory (`unsynced`, `mark_synced`), so an acks=all write
//! acknowledged after its fsync has its epoch durable too; a roll syncs it first (`sync`). After
//! an unclean shutdown the owning log re-reads the active segment's batches and `recover`s the
//! entries a lost write lacks, and rebuilds a checkpoint that does not parse (`intact`) from every
//! segment, as Kafka's recovery assigns epochs from recovered batches.
//!
//! Invariants: epochs and start offsets strictly ascend; every start offset is below the log
//! end of the log that owns the cache (an entry is only assigned for a batch being appended);
//! only the active segment may hold batches whose epoch is not durable in the file.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::LogError;
use crate::log::partition_log::write_atomically;

const EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

#[derive(Debug)]
pub struct EpochCache {
    path: PathBuf,
    /// (leader epoch, first offset written in it), ascending.
    entries: Vec<(i32, i64)>,
    /// Writes of the file so far, and how many of them an fsync covers (counts, as the log's
    /// directory changes: a write during an fsync is not covered by it).
    writes: u64,
    writes_synced: u64,
    /// Whether the file read at `load` parsed whole (or was absent).
    intact: bool,
}

impl EpochCache {
    /// An empty cache for the partition in `dir` (nothing is read or written).
    pub fn empty(dir: &Path) -> EpochCache {
        EpochCache { path: dir.join(EPOCH_CHECKPOINT), entries: Vec::new(), writes: 0, writes_synced: 0, intact: true }
    }

    /// The cache of the partition in `dir` whose recovered log ends at `log_end`.
    pub fn load(dir: &Path, log_end: i64) -> Result<EpochCache, LogError> {
        let mut cache = EpochCache::empty(dir);
        let text = match std::fs::read_to_string(&cache.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(cache),
            Err(e) => return Err(e.into()),
        };
        let mut lines = text.lines();
        let version = lines.next().map(str::trim);
        let count = lines.next().and_then(|l| l.trim().parse::<usize>().ok());
        let mut parsed = 0;
        let mut whole = version == Some("0");
        for line in lines {
            let mut parts = line.split_whitespace();
            let entry = (parts.next().map(str::parse::<i32>), parts.next().map(str::parse::<i64>), parts.next());
            whole &= matches!(entry, (Some(Ok(_)), Some(Ok(_)), None));
            if let (Some(Ok(epoch)), Some(Ok(start)), _) = entry {
                parsed += 1;
                // Entries past the recovered log end describe data that was truncated; an entry
                // out of order (a damaged file) is skipped rather than breaking the order.
                let ascending = cache.entries.last().is_none_or(|&(e, s)| e < epoch && s < start);
                whole &= ascending;
                if start < log_end && ascending {
                    cache.entries.push((epoch, start));
                }
            }
        }
        cache.intact = whole && count == Some(parsed);
        Ok(cache)
    }

    /// Whether the file read at `load` parsed whole (else the owner rebuilds it from the log).
    pub fn intact(&self) -> bool {
        self.intact
    }

    /// After an unclean shutdown: the (leader epoch, base offset) of the batches re-read from
    /// the log, in order, starting with `clear` (the file did not parse: every segment is read).
    /// Epochs newer than the latest are added, and the file is written and synced if it changed.
    pub fn recover(&mut self, batches: &[(i32, i64)], clear: bool) -> Result<(), LogError> {
        let before = self.entries.clone();
        if clear {
            self.entries.clear();
        }
        for &(epoch, start) in batches {
            if epoch >= 0 && self.entries.last().is_none_or(|&(e, s)| e < epoch && s < start) {
                self.entries.push((epoch, start));
            }
        }
        if clear || self.entries != before {
            self.write(true)?;
        }
        self.intact = true;
        Ok(())
    }

    /// The write count to sync, when the file holds a write not yet fsynced.
    pub fn unsynced(&self) -> Option<u64> {
        (self.writes > self.writes_synced).then_some(self.writes)
    }

    /// The file, to fsync outside the owner's lock (with its directory).
    pub fn file(&self) -> io::Result<File> {
        File::open(&self.path)
    }

    /// An fsync covered the writes up to `writes`.
    pub fn mark_synced(&mut self, writes: u64) {
        self.writes_synced = self.writes_synced.max(writes);
    }

    /// Fsyncs a pending write now (file and directory).
    pub fn sync(&mut self) -> Result<(), LogError> {
        if let Some(writes) = self.unsynced() {
            self.file()?.sync_all()?;
            if let Some(dir) = self.path.parent() {
                File::open(dir)?.sync_all()?;
            }
            self.mark_synced(writes);
        }
        Ok(())
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest(&self) -> Option<(i32, i64)> {
        self.entries.last().copied()
    }

    /// Records that `epoch` starts at `offset` if it is newer than the latest epoch.
    pub fn assign(&mut self, epoch: i32, offset: i64) -> Result<(), LogError> {
        if self.entries.last().is_none_or(|(e, _)| *e < epoch) {
            // Kafka's `maybeTruncateNonMonotonicEntries`: an older epoch starting at or after
            // this offset never kept a batch there.
            self.entries.retain(|(_, start)| *start < offset);
            self.entries.push((epoch, offset));
            self.write(false)?;
        }
        Ok(())
    }

    /// Drops every entry, durably (the log was emptied).
    pub fn clear(&mut self) -> Result<(), LogError> {
        self.entries.clear();
        self.write(true)
    }

    /// Drops the entries starting at or after `log_end` (the log was truncated to end there).
    pub fn truncate_from_end(&mut self, log_end: i64) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|(_, start)| *start < log_end);
        if self.entries.len() != before {
            self.write(true)?;
        }
        Ok(())
    }

    /// The log start moved to `log_start` (Kafka's `truncateFromStart`): the epoch in force
    /// there is kept, starting at `log_start`, and older ones are dropped.
    pub fn truncate_from_start(&mut self, log_start: i64) -> Result<(), LogError> {
        let first_kept = self.entries.partition_point(|(_, start)| *start <= log_start).saturating_sub(1);
        self.entries.drain(..first_kept);
        if let Some(first) = self.entries.first_mut() {
            first.1 = first.1.max(log_start);
        }
        self.write(true)
    }

    /// OffsetForLeaderEpoch: the largest epoch <= `epoch` and the offset where it ended (the
    /// next epoch's start, or `log_end` for the latest). Like Kafka, the current leader epoch
    /// (0 on a single node) counts as started at the log start even before any write. Returns
    /// (-1, -1) for an epoch older than every known one or newer than the latest.
    pub fn end_offset_for(&self, epoch: i32, log_start: i64, log_end: i64) -> (i32, i64) {
        let implicit = [(0, log_start)];
        let epochs: &[(i32, i64)] = if self.entries.is_empty() { &implicit } else { &self.entries };
        let i = epochs.partition_point(|(e, _)| *e <= epoch);
        // Older than every known epoch, or newer than the latest (Kafka's `endOffsetFor`: no
        // higher entry and not the latest): undefined.
        if i == 0 || (i == epochs.len() && epochs[i - 1].0 != epoch) {
            return (-1, -1);
        }
        let end = epochs.get(i).map_or(log_end, |(_, start)| *start);
        (epochs[i - 1].0, end)
    }

    /// Rewrites the file (temp file, rename), fsynced (file and directory) when `sync`, else
    /// left for the owner's next flush.
    fn write(&mut self, sync: bool) -> Result<(), LogError> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for (epoch, start) in &self.entries {
            text.push_str(&format!("{epoch} {start}\n"));
        }
        self.writes += 1;
        if sync {
            write_atomically(&self.path, text.as_bytes())?;
            self.writes_synced = self.writes;
        } else {
            use std::io::Write;
            let tmp = self.path.with_extension("tmp");
            File::create(&tmp)?.write_all(text.as_bytes())?;
            std::fs::rename(&tmp, &self.path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "epoch_cache_tests.rs"]
mod tests;
