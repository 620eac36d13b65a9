//! One log segment: a `.log` file of consecutive v2 batches plus its offset and time indexes.
//!
//! On-disk format: `<base offset, 20 digits>.log` holds batches exactly as produced (with broker-
//! assigned base offsets and leader epochs), back to back; `.index` / `.timeindex` are described in
//! `index.rs`. A deleted segment's files may stay a while renamed `*.deleted`
//! (`file.delete.delay.ms`); opening the partition removes any left. Invariants: batches are
//! contiguous and their offsets strictly increase; `size` is the byte length of valid data and,
//! once the segment is open, of its file (a torn tail past it is truncated by `recover`;
//! `preallocate` reserves disk without changing the length); index entries only point at batch
//! starts within `size`.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::LogError;
use crate::log::batch::{self, Header, HEADER_BYTES};
use crate::log::index::{IndexFile, OffsetEntry, TimeEntry};

/// Bytes of a batch header needed to find its last offset.
const PEEK_BYTES: usize = 27;

/// Most batches `Segment::recent` remembers.
const RECENT_BATCHES: usize = 32;

#[derive(Debug)]
pub struct Segment {
    pub base_offset: i64,
    log_path: PathBuf,
    /// Shared with in-flight fetch responses (`FileSlice`), which send from it after the
    /// partition lock is released; a deleted segment's bytes stay readable until they are sent.
    file: Arc<File>,
    size: u64,
    index: IndexFile<OffsetEntry>,
    time_index: IndexFile<TimeEntry>,
    index_interval_bytes: u64,
    bytes_since_index_entry: u64,
    /// Offset after the last batch (== base offset when empty).
    pub next_offset: i64,
    pub max_timestamp: i64,
    pub offset_of_max_timestamp: i64,
    /// Max timestamp of the first batch, the reference for time-based rolling (as Kafka does).
    pub first_batch_timestamp: Option<i64>,
    /// When this segment was created or opened (wall clock, ms): the reference for time-based
    /// rolling when its first batch has no timestamp (Kafka's `LogSegment.created`).
    pub created_ms: i64,
    /// The newest batches (at most `RECENT_BATCHES`), oldest first, back to back and ending at
    /// `size`: fetches near the end of the log, where caught-up consumers read, locate their
    /// batches here instead of reading headers from the file. Empty for a segment opened with
    /// trusted indexes until something is appended (lookups then read headers, as before).
    recent: VecDeque<BatchPos>,
    /// Disk reserved past the data by `preallocate`, until `release_preallocation`.
    preallocated: bool,
}

pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}.{suffix}")
}

/// A byte range of a segment file: whole batches exactly as stored, which a fetch response
/// sends straight from the file (`sendfile`) instead of copying them through memory.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: usize,
}

impl FileSlice {
    /// Copies the bytes into memory (for small responses, and for callers that need them).
    pub fn read_to_vec(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; self.len];
        self.file.read_exact_at(&mut buf, self.position)?;
        Ok(buf)
    }
}

/// A batch location found by scanning: start position and header facts.
#[derive(Debug, Clone, Copy)]
pub struct BatchPos {
    pub position: u64,
    pub total_bytes: u64,
    pub base_offset: i64,
    pub last_offset: i64,
}

impl Segment {
    pub fn create(dir: &Path, base_offset: i64, index_interval_bytes: u64) -> io::Result<Segment> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new().create(true).read(true).write(true).truncate(true).open(&log_path)?;
        let index = IndexFile::create(&dir.join(file_name(base_offset, "index")))?;
        let time_index = IndexFile::create(&dir.join(file_name(base_offset, "timeindex")))?;
        Ok(Segment::new(base_offset, log_path, file, 0, index, time_index, index_interval_bytes))
    }

    /// A segment over `file` (`size` bytes) and its indexes, with the bookkeeping of one that
    /// holds nothing yet (`open` restores an existing one's).
    fn new(
        base_offset: i64,
        log_path: PathBuf,
        file: File,
        size: u64,
        index: IndexFile<OffsetEntry>,
        time_index: IndexFile<TimeEntry>,
        index_interval_bytes: u64,
    ) -> Segment {
        Segment {
            base_offset,
            log_path,
            file: Arc::new(file),
            size,
            index,
            time_index,
            index_interval_bytes,
            bytes_since_index_entry: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            offset_of_max_timestamp: base_offset,
            first_batch_timestamp: None,
            created_ms: crate::log::now_ms(),
            recent: VecDeque::new(),
            preallocated: false,
        }
    }

    /// Opens an existing segment. With `full_recovery` every batch is CRC-checked and a torn or
    /// corrupt tail is truncated; indexes are rebuilt whenever they are missing or invalid.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        index_interval_bytes: u64,
        full_recovery: bool,
    ) -> Result<Segment, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let file = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let size = file.metadata()?.len();
        let index_path = dir.join(file_name(base_offset, "index"));
        let time_path = dir.join(file_name(base_offset, "timeindex"));
        let (index, time_index) = if full_recovery {
            (None, None)
        } else {
            (
                IndexFile::<OffsetEntry>::load(&index_path, |e| (e.position as u64) < size)?,
                IndexFile::<TimeEntry>::load(&time_path, |_| true)?,
            )
        };
        let (index_unopened, time_unopened) = (IndexFile::unopened(&index_path), IndexFile::unopened(&time_path));
        let mut segment =
            Segment::new(base_offset, log_path, file, size, index_unopened, time_unopened, index_interval_bytes);
        if let (Some(index), Some(time_index)) = (index, time_index) {
            segment.index = index;
            segment.time_index = time_index;
            if segment.trust_loaded_indexes()? {
                return Ok(segment);
            }
            tracing::info!(segment = %segment.log_path.display(), "index does not match the log; rebuilding");
        } else if !full_recovery {
            tracing::info!(segment = %segment.log_path.display(), "index missing or invalid; rebuilding");
        }
        segment.rebuild(size)?;
        Ok(segment)
    }

    /// With indexes loaded from disk: finds the last batch (scanning from the last index entry),
    /// checks the indexes agree with the log, and restores the in-memory bookkeeping.
    fn trust_loaded_indexes(&mut self) -> Result<bool, LogError> {
        let mut position = self.index.last().map_or(0, |e| e.position as u64);
        if let Some(entry) = self.index.last() {
            match self.peek(position)? {
                Some(b) if b.base_offset == self.base_offset + entry.relative_offset as i64 => {}
                _ => return Ok(false),
            }
        }
        let mut last = None;
        while let Some(b) = self.peek(position)? {
            if position + b.total_bytes > self.size {
                return Ok(false);
            }
            last = Some(b);
            position += b.total_bytes;
        }
        if position != self.size {
            return Ok(false);
        }
        let last_offset = last.map_or(self.base_offset - 1, |b| b.last_offset);
        if self.time_index.last().is_some_and(|e| self.base_offset + e.relative_offset as i64 > last_offset) {
            return Ok(false);
        }
        self.next_offset = last_offset + 1;
        if let Some(t) = self.time_index.last() {
            self.max_timestamp = t.timestamp;
            self.offset_of_max_timestamp = self.base_offset + t.relative_offset as i64;
        }
        self.first_batch_timestamp = self.batch_max_timestamp(0)?;
        // The time index only samples; batches after its last entry may carry later timestamps.
        let mut position = self.index.last().map_or(0, |e| e.position as u64);
        while let Some(b) = self.peek(position)? {
            if let Some(ts) = self.batch_max_timestamp(position)? {
                if ts > self.max_timestamp {
                    self.max_timestamp = ts;
                    self.offset_of_max_timestamp = b.base_offset;
                }
            }
            position += b.total_bytes;
        }
        self.bytes_since_index_entry = self.size - self.index.last().map_or(0, |e| e.position as u64);
        Ok(true)
    }

    /// Scans every batch from the start, truncating at the first invalid one, and rewrites the
    /// indexes from what it finds.
    fn rebuild(&mut self, file_size: u64) -> Result<(), LogError> {
        let dir = self.log_path.parent().expect("segment has a directory").to_path_buf();
        self.index = IndexFile::create(&dir.join(file_name(self.base_offset, "index")))?;
        self.time_index = IndexFile::create(&dir.join(file_name(self.base_offset, "timeindex")))?;
        self.next_offset = self.base_offset;
        self.max_timestamp = -1;
        self.bytes_since_index_entry = 0;
        self.first_batch_timestamp = None;
        self.recent.clear();
        let mut position = 0u64;
        let mut buf = Vec::new();
        while position + HEADER_BYTES as u64 <= file_size {
            let mut head = [0u8; HEADER_BYTES];
            self.file.read_exact_at(&mut head, position)?;
            let header = Header::new(&head);
            let total = header.total_bytes();
            if total < HEADER_BYTES as i64
                || position + total as u64 > file_size
                || header.base_offset() < self.next_offset
            {
                break;
            }
            buf.resize(total as usize, 0);
            self.file.read_exact_at(&mut buf, position)?;
            if batch::check_batch(&buf).is_err() {
                break;
            }
            self.note_appended(&buf, total as u64, position)?;
            position += total as u64;
        }
        if position < file_size {
            tracing::warn!(segment = %self.log_path.display(), valid_bytes = position, file_bytes = file_size, "truncating torn or corrupt log tail");
            self.file.set_len(position)?;
            self.file.sync_all()?;
        }
        self.size = position;
        // Persist the rebuilt indexes so the next start need not rebuild them again.
        self.sync_indexes()?;
        Ok(())
    }

    /// Index bookkeeping for a batch of `len` bytes (starting with `header`) that now sits at
    /// `position`.
    fn note_appended(&mut self, header: &[u8], len: u64, position: u64) -> io::Result<()> {
        let header = Header::new(header);
        let relative = (header.last_offset() - self.base_offset) as u32;
        let max_ts = header.max_timestamp();
        if self.first_batch_timestamp.is_none() {
            self.first_batch_timestamp = Some(max_ts);
        }
        if max_ts > self.max_timestamp {
            self.max_timestamp = max_ts;
            self.offset_of_max_timestamp = header.base_offset();
        }
        if self.bytes_since_index_entry >= self.index_interval_bytes && position > 0 {
            self.index.append(OffsetEntry {
                relative_offset: (header.base_offset() - self.base_offset) as u32,
                position: position as u32,
            })?;
            self.time_index.append(TimeEntry {
                timestamp: self.max_timestamp,
                relative_offset: (self.offset_of_max_timestamp - self.base_offset) as u32,
            })?;
            self.bytes_since_index_entry = 0;
        }
        self.bytes_since_index_entry += len;
        debug_assert_eq!(self.base_offset + relative as i64, header.last_offset());
        self.next_offset = header.last_offset() + 1;
        if self.recent.len() == RECENT_BATCHES {
            self.recent.pop_front();
        }
        debug_assert!(self.recent.back().is_none_or(|b| b.position + b.total_bytes == position));
        self.recent.push_back(BatchPos {
            position,
            total_bytes: len,
            base_offset: header.base_offset(),
            last_offset: header.last_offset(),
        });
        Ok(())
    }

    /// Appends one batch whose base offset has already been set. `offset_of_max_timestamp`
    /// refines the segment's max-timestamp bookkeeping to the exact record.
    pub fn append(&mut self, batch: &[u8], offset_of_max_timestamp: i64) -> io::Result<()> {
        let (head, body) = batch.split_at(HEADER_BYTES);
        self.append_parts(head, body, offset_of_max_timestamp)
    }

    /// `append` of a batch given as its 61-byte header and the rest, written with one `pwritev`
    /// so the produce path never joins them into one buffer.
    pub fn append_parts(&mut self, head: &[u8], body: &[u8], offset_of_max_timestamp: i64) -> io::Result<()> {
        assert_eq!(head.len(), HEADER_BYTES, "a batch header is {HEADER_BYTES} bytes");
        let position = self.size;
        write_all_at(&self.file, head, body, position)?;
        let len = (head.len() + body.len()) as u64;
        self.size += len;
        let before = self.max_timestamp;
        self.note_appended(head, len, position)?;
        if self.max_timestamp > before {
            self.offset_of_max_timestamp = offset_of_max_timestamp;
        }
        Ok(())
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Whether `extra` more bytes / a batch ending at `last_offset` would overflow this segment.
    pub fn is_full(&self, extra: u64, segment_bytes: u64, last_offset: i64) -> bool {
        !self.is_empty() && (self.size + extra > segment_bytes || !self.holds_offset(last_offset))
    }

    /// Whether a batch ending at `last_offset` fits this segment's relative offsets (Kafka's
    /// `LogSegment.canConvertToRelativeOffset`, kept within a positive i32).
    pub fn holds_offset(&self, last_offset: i64) -> bool {
        last_offset - self.base_offset <= i32::MAX as i64
    }

    /// A read handle for the cleaner, which reads this (immutable) segment without the lock.
    pub fn file_view(&self) -> io::Result<crate::log::cleaner::SegmentFile> {
        Ok(crate::log::cleaner::SegmentFile {
            base_offset: self.base_offset,
            next_offset: self.next_offset,
            size: self.size,
            file: self.file.try_clone()?,
        })
    }

    /// A handle for fsync outside the partition lock.
    pub fn sync_handle(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    pub fn sync_indexes(&mut self) -> io::Result<()> {
        self.index.sync()?;
        self.time_index.sync()
    }

    /// Finds the batch containing `offset` (or the first batch after it), scanning from the
    /// index entry at or before it. Returns `None` when no batch at or after `offset` exists.
    pub fn find_batch(&self, offset: i64) -> io::Result<Option<BatchPos>> {
        if offset >= self.next_offset {
            return Ok(None);
        }
        if self.recent.front().is_some_and(|b| b.base_offset <= offset) {
            // `recent` ends with the last batch, whose last offset is >= `offset`.
            return Ok(self.recent.get(self.recent.partition_point(|b| b.last_offset < offset)).copied());
        }
        let relative = (offset - self.base_offset).clamp(0, u32::MAX as i64) as u32;
        let mut position = self.index.lookup(relative) as u64;
        while let Some(b) = self.batch_at(position)? {
            if b.last_offset >= offset {
                return Ok(Some(b));
            }
            position += b.total_bytes;
        }
        Ok(None)
    }

    /// The batch starting at `position` (a batch start, or `size`), from `recent` if it is there.
    fn batch_at(&self, position: u64) -> io::Result<Option<BatchPos>> {
        if self.recent.front().is_some_and(|b| b.position <= position) {
            let b = self.recent.get(self.recent.partition_point(|b| b.position < position));
            debug_assert!(b.is_none_or(|b| b.position == position), "{position} is not a batch start");
            return Ok(b.copied());
        }
        self.peek(position)
    }

    fn peek(&self, position: u64) -> io::Result<Option<BatchPos>> {
        if position + PEEK_BYTES as u64 > self.size {
            return Ok(None);
        }
        let mut head = [0u8; PEEK_BYTES];
        self.file.read_exact_at(&mut head, position)?;
        let base_offset = i64::from_be_bytes(head[0..8].try_into().expect("8 bytes"));
        let total = i32::from_be_bytes(head[8..12].try_into().expect("4 bytes")) as i64 + 12;
        let last_delta = i32::from_be_bytes(head[23..27].try_into().expect("4 bytes")) as i64;
        if total < HEADER_BYTES as i64 {
            // Corruption (a batch is never shorter than its header): the segment ends here for
            // readers, and a start recovers it (the scan finds the segment shorter than its file).
            tracing::warn!(segment = %self.log_path.display(), position, length = total - 12,
                "corrupt batch length: the segment is read up to it");
            return Ok(None);
        }
        Ok(Some(BatchPos { position, total_bytes: total as u64, base_offset, last_offset: base_offset + last_delta }))
    }

    fn batch_max_timestamp(&self, position: u64) -> io::Result<Option<i64>> {
        if position + HEADER_BYTES as u64 > self.size {
            return Ok(None);
        }
        let mut head = [0u8; HEADER_BYTES];
        self.file.read_exact_at(&mut head, position)?;
        Ok(Some(Header::new(&head).max_timestamp()))
    }

    /// Calls `f` with the header of every batch whose last offset is >= `from_offset`; control
    /// batches (transaction markers, a few dozen bytes) are passed whole.
    pub fn for_each_header(&self, from_offset: i64, mut f: impl FnMut(&Header<'_>)) -> io::Result<()> {
        let Some(first) = self.find_batch(from_offset)? else { return Ok(()) };
        let mut position = first.position;
        let mut head = [0u8; HEADER_BYTES];
        while position + HEADER_BYTES as u64 <= self.size {
            self.file.read_exact_at(&mut head, position)?;
            let header = Header::new(&head);
            if header.total_bytes() < HEADER_BYTES as i64 {
                break; // corruption: see `peek`
            }
            let total = header.total_bytes() as u64;
            if header.is_control() && total <= 4096 && position + total <= self.size {
                let mut whole = vec![0u8; total as usize];
                self.file.read_exact_at(&mut whole, position)?;
                f(&Header::new(&whole));
            } else {
                f(&header);
            }
            position += total;
        }
        Ok(())
    }

    /// Locates whole batches starting with the one containing `offset`, stopping before
    /// `max_offset` and within `max_bytes` (always at least one whole batch when `min_one`).
    /// Only batch headers are read: the bytes themselves are sent from the file later.
    pub fn read_slice(
        &self,
        offset: i64,
        max_offset: i64,
        max_bytes: usize,
        min_one: bool,
    ) -> io::Result<Option<FileSlice>> {
        let Some(first) = self.find_batch(offset)? else { return Ok(None) };
        let limit = if min_one { max_bytes.max(first.total_bytes as usize) } else { max_bytes };
        let limit = first.position + limit as u64;
        let mut end = first.position;
        let mut next = Some(first);
        while let Some(b) = next {
            let batch_end = b.position + b.total_bytes;
            if b.base_offset >= max_offset || batch_end > limit || batch_end > self.size {
                break;
            }
            end = batch_end;
            next = self.batch_at(end)?;
        }
        Ok((end > first.position).then(|| FileSlice {
            file: self.file.clone(),
            position: first.position,
            len: (end - first.position) as usize,
        }))
    }

    /// The first record offset with timestamp >= `target` in this segment, with its timestamp.
    pub fn find_offset_by_timestamp(&self, target: i64, start_offset: i64) -> Result<Option<(i64, i64)>, LogError> {
        if self.max_timestamp < target {
            return Ok(None);
        }
        let from = (self.base_offset + self.time_index.lookup(target) as i64).max(start_offset);
        let Some(mut b) = self.find_batch(from)? else { return Ok(None) };
        loop {
            let mut bytes = vec![0u8; b.total_bytes as usize];
            self.file.read_exact_at(&mut bytes, b.position)?;
            if Header::new(&bytes).max_timestamp() >= target {
                if let Some((delta, ts)) = batch::first_record_at_or_after(&bytes, target)? {
                    let found = b.base_offset + delta as i64;
                    if found >= start_offset {
                        return Ok(Some((found, ts)));
                    }
                }
            }
            match self.batch_at(b.position + b.total_bytes)? {
                Some(next) => b = next,
                None => return Ok(None),
            }
        }
    }

    /// `preallocate`: reserves `bytes` of disk for this segment without changing the file's
    /// length, so the file still ends where its data ends (unlike Kafka's, which grows the file
    /// to `segment.bytes` and finds the data's end again on recovery). Best effort: a file
    /// system without `fallocate` just does not reserve.
    pub fn preallocate(&mut self, bytes: u64) {
        match rustix::fs::fallocate(&*self.file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, bytes) {
            Ok(()) => self.preallocated = true,
            Err(e) => tracing::debug!(segment = %self.log_path.display(), error = %e, "cannot preallocate"),
        }
    }

    /// Gives back the disk `preallocate` reserved past the data (truncating to the data's length).
    pub fn release_preallocation(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.preallocated) {
            self.file.set_len(self.size)?;
        }
        Ok(())
    }

    /// Whether the offset or time index holds as many entries as `index_bytes` of index file
    /// would (`segment.index.bytes`; Kafka rolls the segment then).
    pub fn index_full(&self, index_bytes: u64) -> bool {
        self.index.entries().len() as u64 >= index_bytes / 8
            || self.time_index.entries().len() as u64 >= index_bytes / 12
    }

    /// Removes every batch whose last offset is >= `offset` (the batch holding `offset` goes
    /// whole: a log is truncated at batch boundaries, as Kafka's `LogSegment.truncateTo`), and
    /// rebuilds the indexes from what stays. Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64, LogError> {
        let Some(first_gone) = self.find_batch(offset)? else { return Ok(0) };
        let removed = self.size - first_gone.position;
        self.file.set_len(first_gone.position)?;
        self.rebuild(first_gone.position)?;
        assert!(self.next_offset <= offset.max(self.base_offset), "nothing at or past the truncation point stays");
        Ok(removed)
    }

    /// Removes the segment's files after `delay_ms` (`file.delete.delay.ms`): renamed
    /// `*.deleted` now, removed by `deleter` later. Fetches already sending from the file keep it.
    pub fn delete_after(self, delay_ms: i64) -> io::Result<()> {
        if delay_ms <= 0 {
            return self.delete();
        }
        // The log last: a crash in between leaves a whole segment whose indexes are rebuilt.
        let paths = [self.index.path().to_path_buf(), self.time_index.path().to_path_buf(), self.log_path.clone()];
        drop(self);
        let mut renamed = Vec::new();
        for path in paths {
            let mut target = path.clone().into_os_string();
            target.push(".deleted");
            match std::fs::rename(&path, &target) {
                Ok(()) => renamed.push(PathBuf::from(target)),
                // An index that never reached its file.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        crate::log::deleter::remove_later(renamed, std::time::Duration::from_millis(delay_ms as u64));
        Ok(())
    }

    /// Removes the segment's files.
    pub fn delete(self) -> io::Result<()> {
        let Segment { log_path, file, index, time_index, .. } = self;
        drop(file);
        std::fs::remove_file(&log_path)?;
        index.delete()?;
        time_index.delete()
    }
}

/// Writes `head` then `body` at `position` of `file`, as one `pwritev` when the kernel takes it
/// all (it may write less; the rest follows).
fn write_all_at(file: &File, mut head: &[u8], mut body: &[u8], mut position: u64) -> io::Result<()> {
    while !head.is_empty() || !body.is_empty() {
        let written = match rustix::io::pwritev(file, &[io::IoSlice::new(head), io::IoSlice::new(body)], position) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        position += written as u64;
        let from_head = written.min(head.len());
        head = &head[from_head..];
        body = &body[written - from_head..];
    }
    Ok(())
}
