//! The parts of `PartitionLog` that remove data: DeleteRecords, retention by time and size, and
//! installing the compacted segments the cleaner (`log/cleaner.rs`) produced. Same invariants as
//! the parent module; in addition the log start offset only moves forward, and a segment is
//! removed only once the log start offset is past its last offset (or it is the cleaner's
//! replacement being swapped in).

use super::*;

impl PartitionLog {
    /// DeleteRecords: moves the log start offset to `offset` (-1: the high watermark), deleting
    /// the segments wholly below it. Returns the new log start offset.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        self.health.check()?;
        let result = self.delete_records_before_inner(offset);
        self.health.watch(result)
    }

    fn delete_records_before_inner(&mut self, offset: i64) -> Result<i64, LogError> {
        let target = if offset == -1 { self.high_watermark } else { offset };
        if target < 0 || target > self.high_watermark {
            return Err(LogError::OffsetOutOfRange {
                offset: target,
                start: self.log_start_offset,
                end: self.high_watermark,
            });
        }
        if target <= self.log_start_offset {
            return Ok(self.log_start_offset);
        }
        write_atomically(&self.dir.join(LOG_START_CHECKPOINT), format!("{target}\n").as_bytes())?;
        self.log_start_offset = target;
        let whole = self.segments.iter().take_while(|s| s.next_offset <= target && !s.is_empty()).count();
        let deletable = whole.min(self.segments.len() - 1);
        for segment in self.segments.drain(..deletable).collect::<Vec<_>>() {
            segment.delete_after(self.config.file_delete_delay_ms)?;
        }
        self.producers.truncate_head(self.log_start_offset);
        Ok(self.log_start_offset)
    }

    /// Deletes whole segments past `retention.ms` / `retention.bytes`; returns how many.
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        self.health.check()?;
        let result = self.apply_retention_inner(now_ms);
        self.health.watch(result)
    }

    fn apply_retention_inner(&mut self, now_ms: i64) -> Result<usize, LogError> {
        if !self.config.deletes() {
            return Ok(0);
        }
        let retention_ms = self.config.retention_ms;
        let retention_bytes = self.config.retention_bytes;
        let mut total = self.size_bytes() as i64;
        let mut deletable = 0;
        for (i, segment) in self.segments.iter().enumerate() {
            let is_active = i + 1 == self.segments.len();
            if segment.is_empty() {
                if is_active {
                    break;
                }
                // Compaction can leave an empty segment; it holds nothing to keep.
                deletable = i + 1;
                continue;
            }
            let expired = retention_ms >= 0 && now_ms - segment.max_timestamp > retention_ms;
            let oversize = retention_bytes >= 0 && total - segment.size() as i64 >= retention_bytes;
            if !(expired || oversize) || segment.next_offset > self.high_watermark {
                break;
            }
            if is_active {
                // Kafka rolls an expired active segment so that it can be deleted too.
                deletable = i + 1;
                break;
            }
            total -= segment.size() as i64;
            deletable = i + 1;
        }
        if deletable == 0 {
            return Ok(0);
        }
        if deletable == self.segments.len() {
            self.roll_at(self.log_end_offset(), now_ms)?;
        }
        let removed: Vec<Segment> = self.segments.drain(..deletable).collect();
        self.log_start_offset = self.log_start_offset.max(self.segments[0].base_offset);
        self.producers.truncate_head(self.log_start_offset);
        self.epochs.truncate_from_start(self.log_start_offset)?;
        for segment in removed {
            tracing::info!(dir = %self.dir.display(), base_offset = segment.base_offset, "retention deleted segment");
            segment.delete_after(self.config.file_delete_delay_ms)?;
        }
        Ok(deletable)
    }

    /// Compaction: what the cleaner may rewrite now, or `None` when nothing is due. The
    /// cleanable segments are the non-active ones wholly below the last stable offset and older
    /// than `min.compaction.lag.ms`; a pass is due when their dirty share reaches
    /// `min.cleanable.dirty.ratio`, or when dirty data is older than `max.compaction.lag.ms`.
    pub fn clean_plan(&self, now_ms: i64) -> Result<Option<CleanPlan>, LogError> {
        if !self.config.compacts() {
            return Ok(None);
        }
        let stable = self.last_stable_offset();
        let lag_cutoff_ms = now_ms.saturating_sub(self.config.min_compaction_lag_ms);
        let mut count = 0;
        for (i, segment) in self.segments.iter().enumerate() {
            let is_active = i + 1 == self.segments.len();
            let too_young = self.config.min_compaction_lag_ms > 0 && segment.max_timestamp > lag_cutoff_ms;
            if is_active || segment.next_offset > stable || too_young {
                break;
            }
            count = i + 1;
        }
        let first_dirty = self.cleaner_checkpoint.max(self.log_start_offset);
        let cleanable = &self.segments[..count];
        let dirty: Vec<&Segment> = cleanable.iter().filter(|s| s.next_offset > first_dirty).collect();
        let dirty_bytes: u64 = dirty.iter().map(|s| s.size()).sum();
        if dirty_bytes == 0 {
            return Ok(None);
        }
        let total_bytes: u64 = cleanable.iter().map(|s| s.size()).sum();
        let ratio = dirty_bytes as f64 / total_bytes as f64;
        let overdue_cutoff_ms = now_ms.saturating_sub(self.config.max_compaction_lag_ms);
        let overdue = dirty.iter().any(|s| s.first_batch_timestamp.is_some_and(|t| t < overdue_cutoff_ms));
        if ratio < self.config.min_cleanable_dirty_ratio && !overdue {
            return Ok(None);
        }
        let segments = cleanable.iter().map(Segment::file_view).collect::<io::Result<Vec<_>>>()?;
        Ok(Some(CleanPlan {
            dir: self.dir.clone(),
            config: self.config.clone(),
            end_offset: self.segments[count].base_offset,
            segments,
            first_dirty,
            aborted: self.producers.aborted_between(self.log_start_offset, stable),
            now_ms,
        }))
    }

    /// Swaps a merged segment from the cleaner in for the segments it replaces. Returns false
    /// (and changes nothing) when those segments are no longer exactly the ones cleaned.
    pub fn install_cleaned(&mut self, cleaned: &CleanedGroup) -> Result<bool, LogError> {
        let Some(i) = self.segments.iter().position(|s| s.base_offset == cleaned.base_offset) else {
            return Ok(false);
        };
        if !self.dir.join(cleaner::CLEANING_DIR).is_dir() {
            // The partition moved to another log directory during the pass (the cleaner's
            // scratch directory stayed in the old one, which is gone).
            return Ok(false);
        }
        let n = cleaned.replaces.len();
        let unchanged = i + n < self.segments.len()
            && self.segments[i + n].base_offset == cleaned.end_offset
            && self.segments[i..i + n]
                .iter()
                .zip(&cleaned.replaces)
                .all(|(s, (base, size))| s.base_offset == *base && s.size() == *size);
        if !unchanged {
            return Ok(false);
        }
        let swap = self.dir.join(cleaner::swap_dir_name(cleaned.base_offset, cleaned.end_offset));
        std::fs::rename(self.dir.join(cleaner::CLEANING_DIR), &swap)?;
        File::open(&self.dir)?.sync_all()?;
        // Committed: from here recovery finishes the swap even if this process dies.
        drop(self.segments.drain(i..i + n).collect::<Vec<_>>());
        cleaner::finish_swaps(&self.dir)?;
        let merged = Segment::open(&self.dir, cleaned.base_offset, self.config.index_interval_bytes, false)?;
        self.segments.insert(i, merged);
        Ok(true)
    }

    /// Records that everything below `offset` has been compacted.
    pub fn set_cleaner_checkpoint(&mut self, offset: i64) -> Result<(), LogError> {
        write_atomically(&self.dir.join(cleaner::CHECKPOINT_FILE), format!("{offset}\n").as_bytes())?;
        self.cleaner_checkpoint = offset;
        Ok(())
    }
}
