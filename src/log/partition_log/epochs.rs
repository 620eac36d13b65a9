//! The leader-epoch cache of `PartitionLog` and its file, `leader-epoch-checkpoint` (Kafka's
//! text format: version line, count line, then `epoch start_offset` lines).
//!
//! When an append starts a new epoch (the first batch of a new leader, on the leader and on
//! each follower), the checkpoint is rewritten (temp file, rename) without an fsync: on the
//! append path, under the partition lock, an fsync per partition made a failover of hundreds of
//! partitions wait for hundreds of fsyncs in a row. The rewrite survives a process crash (page
//! cache) at once, and is made durable by the partition's next flush (`flush_work` syncs the
//! checkpoint and the directory with the segment), so an acks=all write acknowledged after its
//! fsync (`ketch.acks.all.fsync`) has its epoch durable too. Rewrites that remove entries
//! (truncation, retention) stay synchronous with fsync, as before.
//!
//! Invariants: `epochs` is ascending in epoch and start offset, every start below the log end;
//! only the active segment may hold batches whose epoch is not durably in the checkpoint (a roll
//! syncs a pending rewrite first), and recovery after an unclean shutdown re-reads the active
//! segment's batch headers and adds the epochs the checkpoint lacks (Kafka's log recovery
//! assigns epochs from the recovered batches the same way). A checkpoint that does not parse
//! (a rewrite cut short by a power loss) is rebuilt from every segment's batch headers.

use super::*;

impl PartitionLog {
    /// Records that `leader_epoch` starts at `offset` if it is newer than the latest epoch.
    pub(super) fn assign_epoch(&mut self, leader_epoch: i32, offset: i64) -> Result<(), LogError> {
        if self.epochs.last().is_none_or(|(e, _)| *e < leader_epoch) {
            self.epochs.push((leader_epoch, offset));
            self.write_epochs(false)?;
        }
        Ok(())
    }

    /// Loads the checkpoint; after an unclean shutdown (`recovered`), adds the epochs of the
    /// active segment's batches it lacks, or rebuilds it from every segment if it does not parse.
    pub(super) fn load_epochs(&mut self, recovered: bool) -> Result<(), LogError> {
        let path = self.dir.join(EPOCH_CHECKPOINT);
        let (entries, intact) = match std::fs::read_to_string(&path) {
            Ok(text) => parse_checkpoint(&text),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Vec::new(), true),
            Err(e) => return Err(e.into()),
        };
        let end = self.log_end_offset();
        // Entries past the recovered log end describe data that was truncated.
        self.epochs = entries.into_iter().filter(|(_, start)| *start < end).collect();
        let rescan = match (intact, recovered) {
            (false, _) => 0..self.segments.len(),
            (true, true) => self.segments.len().saturating_sub(1)..self.segments.len(),
            (true, false) => return Ok(()),
        };
        if !intact {
            tracing::warn!(dir = %self.dir.display(), "leader-epoch-checkpoint unreadable: rebuilt from the log");
            self.epochs.clear();
        }
        let before = self.epochs.clone();
        let mut found = Vec::new();
        for segment in &self.segments[rescan] {
            let mut latest = found.last().or(self.epochs.last()).map(|(e, _): &(i32, i64)| *e);
            segment.for_each_header(segment.base_offset, |header| {
                let epoch = header.leader_epoch();
                if epoch >= 0 && latest.is_none_or(|l| l < epoch) {
                    found.push((epoch, header.base_offset()));
                    latest = Some(epoch);
                }
            })?;
        }
        self.epochs.extend(found);
        if self.epochs != before || !intact {
            self.write_epochs_synced()?;
        }
        Ok(())
    }

    /// Rewrites the checkpoint and makes it durable now (entries removed, recovery).
    pub(super) fn write_epochs_synced(&mut self) -> Result<(), LogError> {
        self.write_epochs(true)
    }

    /// Makes a pending rewrite of the checkpoint durable (before a roll).
    pub(super) fn sync_epochs(&mut self) -> Result<(), LogError> {
        if self.epoch_writes > self.epoch_writes_synced {
            File::open(self.dir.join(EPOCH_CHECKPOINT))?.sync_all()?;
            File::open(&self.dir)?.sync_all()?;
            self.epoch_writes_synced = self.epoch_writes;
        }
        Ok(())
    }

    fn write_epochs(&mut self, sync: bool) -> Result<(), LogError> {
        let mut text = format!("0\n{}\n", self.epochs.len());
        for (epoch, start) in &self.epochs {
            text.push_str(&format!("{epoch} {start}\n"));
        }
        let path = self.dir.join(EPOCH_CHECKPOINT);
        self.epoch_writes += 1;
        if sync {
            write_atomically(&path, text.as_bytes())?;
            self.epoch_writes_synced = self.epoch_writes;
        } else {
            use std::io::Write;
            let tmp = path.with_extension("tmp");
            File::create(&tmp)?.write_all(text.as_bytes())?;
            std::fs::rename(&tmp, &path)?;
            // The rename is a change of the directory: the next flush syncs it too.
            self.dir_changes += 1;
        }
        Ok(())
    }
}

/// The entries of a checkpoint's text, and whether it is whole: version 0, then as many
/// well-formed entry lines as its count line says.
fn parse_checkpoint(text: &str) -> (Vec<(i32, i64)>, bool) {
    let mut lines = text.lines();
    let version = lines.next().map(str::trim);
    let count = lines.next().and_then(|l| l.trim().parse::<usize>().ok());
    let mut entries = Vec::new();
    let mut malformed = false;
    for line in lines {
        let mut parts = line.split_whitespace();
        match (parts.next().map(str::parse::<i32>), parts.next().map(str::parse::<i64>), parts.next()) {
            (Some(Ok(epoch)), Some(Ok(start)), None) => entries.push((epoch, start)),
            _ => malformed = true,
        }
    }
    let intact = version == Some("0") && count == Some(entries.len()) && !malformed;
    (entries, intact)
}
