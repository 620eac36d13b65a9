//! The leader-epoch cache of one partition log (Kafka's `LeaderEpochFileCache`): for every
//! leader epoch the log was written at, the offset of its first batch. Followers truncate by it
//! (OffsetForLeaderEpoch, diverging epochs) and ListOffsets answers epochs from it.
//!
//! On disk: `leader-epoch-checkpoint` in the partition directory, Kafka's format: a version
//! line (0), a count line, then one `<epoch> <start offset>` line per entry, ascending. Written
//! atomically (temp file, rename) after every change. Entries at or past the log end found when
//! loading describe data a crash truncated away and are dropped.
//!
//! Invariants: epochs and start offsets strictly ascend; every start offset is below the log
//! end of the log that owns the cache (an entry is only assigned for a batch being appended).

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
}

impl EpochCache {
    /// An empty cache for the partition in `dir` (nothing is read or written).
    pub fn empty(dir: &Path) -> EpochCache {
        EpochCache { path: dir.join(EPOCH_CHECKPOINT), entries: Vec::new() }
    }

    /// The cache of the partition in `dir` whose recovered log ends at `log_end`.
    pub fn load(dir: &Path, log_end: i64) -> Result<EpochCache, LogError> {
        let mut cache = EpochCache::empty(dir);
        let text = match std::fs::read_to_string(&cache.path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(cache),
            Err(e) => return Err(e.into()),
        };
        for line in text.lines().skip(2) {
            let mut parts = line.split_whitespace();
            if let (Some(Ok(epoch)), Some(Ok(start))) =
                (parts.next().map(str::parse::<i32>), parts.next().map(str::parse::<i64>))
            {
                // Entries past the recovered log end describe data that was truncated; an entry
                // out of order (a damaged file) is skipped rather than breaking the order.
                let ascending = cache.entries.last().is_none_or(|&(e, s)| e < epoch && s < start);
                if start < log_end && ascending {
                    cache.entries.push((epoch, start));
                }
            }
        }
        Ok(cache)
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
            self.write()?;
        }
        Ok(())
    }

    /// Drops the entries starting at or after `log_end` (the log was truncated to end there).
    pub fn truncate_from_end(&mut self, log_end: i64) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|(_, start)| *start < log_end);
        if self.entries.len() != before {
            self.write()?;
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
        self.write()
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

    fn write(&self) -> Result<(), LogError> {
        let mut text = format!("0\n{}\n", self.entries.len());
        for (epoch, start) in &self.entries {
            text.push_str(&format!("{epoch} {start}\n"));
        }
        write_atomically(&self.path, text.as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "epoch_cache_tests.rs"]
mod tests;
