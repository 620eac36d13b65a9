//! AlterReplicaLogDirs: moving a partition to another log directory while it keeps serving,
//! and finishing or undoing a move a crash interrupted.
//!
//! On disk, while `<t>-<p>` moves from log directory S to log directory D:
//! - `D/<t>-<p>.<id>-future/`: the copy being built (`<id>`: 32 hex digits, Kafka's
//!   `UnifiedLog.logFutureDirName`); ignored by `LogDirs::scan`;
//! - once committed, `S/<t>-<p>.<id>-delete/`: the old copy, removed right after.
//!
//! Steps (`MoveStep` names the point after each, where tests simulate a crash):
//! 1. the future directory is created, then filled without the log lock, in passes that each
//!    copy only what changed since the last: the appended tail of a `.log` file (appends never
//!    rewrite bytes; a compacted segment is a new file), other files whole when their inode,
//!    length or mtime changed; every copied file is fsynced;
//! 2. under the registry's topics lock and the partition's log lock (no append, roll,
//!    retention, compaction swap or topic-file write can happen), a last pass copies the
//!    active segment's new bytes and whatever else changed; the future directory is fsynced;
//! 3. COMMIT: the topic file's `directories=` entry for the partition names D (atomic replace:
//!    temp file, fsync, rename, fsync directory);
//! 4. S/<t>-<p> is renamed to its `-delete` name and the future into place (`D/<t>-<p>`), each
//!    directory fsynced; the log is reopened in D and swapped in under the same locks;
//! 5. the `-delete` directory is removed.
//!
//! Recovery at start (`recover`, before partitions are looked for), from the topic files:
//! a `-future` directory in the directory its partition is recorded in was committed: the old
//! copy elsewhere is renamed away and the future renamed into place; any other `-future`
//! directory (commit not reached, topic deleted) is removed, the partition staying where its
//! file says; every `-delete` directory is removed.
//! Invariant: after recovery each partition has exactly one `<t>-<p>` directory, the one its
//! topic file names, holding every record acknowledged before the crash.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::log_dirs::LogDirs;
use super::{directory_ids, store, TopicRegistry};
use crate::log::partition_log::partition_dir;
use crate::log::{now_ms, Partition, PartitionLog};

/// Unlocked copy passes before the last, locked one (each catches up with what was appended
/// during the previous one).
const UNLOCKED_PASSES: usize = 3;

/// The point after each step of a move, where `move_partition` may stop as if the process
/// died there (tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveStep {
    FutureCreated,
    Copied,
    TailCopied,
    Committed,
    SourceRenamed,
    FutureRenamed,
}

/// How a move ended.
#[derive(Debug, PartialEq, Eq)]
pub enum MoveOutcome {
    Done,
    /// Already in the target directory.
    NothingToDo,
    /// Another target was asked for meanwhile (or the topic went away): the copy was dropped.
    Abandoned,
    /// Stopped at a `MoveStep` as if the process had died.
    Stopped,
}

/// A move in progress, for DescribeLogDirs (`is_future_key`) and to change its target.
#[derive(Debug, Clone)]
pub struct MoveState {
    /// The directory (index in `log.dirs`) the last AlterReplicaLogDirs asked for.
    pub wanted: usize,
    /// The directory being copied into, once the copy started.
    pub future_dir: Option<usize>,
    /// Bytes copied so far, and the offset the copy holds every record below.
    pub future_bytes: u64,
    pub future_end_offset: i64,
}

pub(super) type Moves = std::sync::Mutex<HashMap<(String, i32), MoveState>>;

/// `<t>-<p>.<id>-future` / `<t>-<p>.<id>-delete`: the partition and the suffix, if the
/// directory name is one of those.
pub fn parse_suffixed(name: &str) -> Option<(String, i32, &str)> {
    let (rest, suffix) = name.rsplit_once('-')?;
    if suffix != "future" && suffix != "delete" {
        return None;
    }
    let (tp, id) = rest.rsplit_once('.')?;
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (topic, p) = tp.rsplit_once('-')?;
    Some((topic.to_string(), p.parse().ok()?, suffix))
}

fn suffixed_name(topic: &str, p: i32, suffix: &str) -> String {
    let id = uuid::Uuid::from_bytes(super::random_bytes()).simple().to_string();
    format!("{topic}-{p}.{id}-{suffix}")
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Start-time recovery of interrupted moves (see the module header). `recorded(topic, p)` is
/// the `directory.id` the topic files record for a partition.
pub fn recover(log_dirs: &LogDirs, recorded: impl Fn(&str, i32) -> Option<String>) -> anyhow::Result<()> {
    let mut futures = Vec::new();
    // Offline directories (failed at start) are left alone.
    for (i, dir) in log_dirs.dirs().iter().enumerate().filter(|(_, d)| !d.health.is_offline()) {
        for entry in std::fs::read_dir(&dir.path)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().to_string();
            match parse_suffixed(&name) {
                Some((_, _, "delete")) => {
                    tracing::info!(dir = %entry.path().display(), "removing a partition directory left to delete");
                    std::fs::remove_dir_all(entry.path())?;
                }
                Some((topic, p, _)) => futures.push((i, topic, p, entry.path())),
                None => {}
            }
        }
    }
    for (i, topic, p, future) in futures {
        let here = &log_dirs.dirs()[i];
        let target = partition_dir(&here.path, &topic, p);
        if recorded(&topic, p).as_deref() != Some(here.id.as_str()) || target.exists() {
            tracing::warn!(dir = %future.display(), "removing the copy of a partition move that was not committed");
            std::fs::remove_dir_all(&future)?;
            continue;
        }
        for other in log_dirs.dirs().iter().filter(|d| d.path != here.path && !d.health.is_offline()) {
            let old = partition_dir(&other.path, &topic, p);
            if old.exists() {
                let gone = other.path.join(suffixed_name(&topic, p, "delete"));
                std::fs::rename(&old, &gone)?;
                sync_dir(&other.path)?;
                std::fs::remove_dir_all(&gone)?;
            }
        }
        std::fs::rename(&future, &target)?;
        sync_dir(&here.path)?;
        tracing::info!(dir = %target.display(), "finished a partition move committed before a crash");
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Mark {
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

struct Copied {
    mark: Mark,
    /// Copied while the file belonged to the active segment (it may still change).
    active: bool,
    /// For a `.log`: bytes of data the copy holds.
    data: u64,
}

/// Copies a partition directory into its future copy, pass after pass.
struct Copier {
    src: PathBuf,
    dst: PathBuf,
    copied: HashMap<String, Copied>,
    bytes: u64,
}

impl Copier {
    /// One pass. `segments`: (base offset, data bytes) of every segment, the active one last,
    /// taken under the log lock (for the last pass, still held).
    fn pass(&mut self, segments: &[(i64, u64)]) -> io::Result<()> {
        let sizes: HashMap<i64, u64> = segments.iter().copied().collect();
        let active = segments.last().map_or(-1, |s| s.0);
        let mut present = HashSet::new();
        for entry in std::fs::read_dir(&self.src)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().to_string();
            // Regular files only: the cleaner's scratch directories are not part of the log.
            if !entry.file_type()?.is_file() || name.ends_with(".tmp") || name.ends_with(".deleted") {
                continue;
            }
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let mark = Mark { ino: meta.ino(), len: meta.len(), mtime: (meta.mtime(), meta.mtime_nsec()) };
            let base = name.split_once('.').and_then(|(stem, _)| stem.parse::<i64>().ok());
            let is_active = base == Some(active);
            let prev = self.copied.get(&name);
            if name.ends_with(".log") {
                let Some(&data) = base.and_then(|b| sizes.get(&b)) else { continue };
                present.insert(name.clone());
                let from = match prev {
                    Some(c) if c.mark.ino == mark.ino && !c.active && c.data == data => continue,
                    // Same file: appends only ever add bytes after what was copied.
                    Some(c) if c.mark.ino == mark.ino => c.data.min(data),
                    _ => 0,
                };
                if !self.copy_range(&name, from, data)? {
                    present.remove(&name);
                    continue;
                }
                self.copied.insert(name, Copied { mark, active: is_active, data });
            } else {
                present.insert(name.clone());
                if prev.is_some_and(|c| c.mark == mark && !c.active) && !is_active {
                    continue;
                }
                if !self.copy_range(&name, 0, mark.len)? {
                    present.remove(&name);
                    continue;
                }
                self.copied.insert(name, Copied { mark, active: is_active, data: mark.len });
            }
        }
        // Files gone from the source (retention, cleaning, old snapshots) go from the copy.
        let gone: Vec<String> = self.copied.keys().filter(|n| !present.contains(*n)).cloned().collect();
        for name in gone {
            self.copied.remove(&name);
            match std::fs::remove_file(self.dst.join(&name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Copies bytes `from..to` of `name` and makes the copy exactly `to` bytes long, fsynced.
    /// False when the source file is gone.
    fn copy_range(&mut self, name: &str, from: u64, to: u64) -> io::Result<bool> {
        let src = match File::open(self.src.join(name)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        let dst = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(self.dst.join(name))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut at = from;
        while at < to {
            let want = ((to - at) as usize).min(buf.len());
            let n = src.read_at(&mut buf[..want], at)?;
            if n == 0 {
                break;
            }
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
        dst.set_len(at)?;
        dst.sync_all()?;
        self.bytes += at - from;
        Ok(true)
    }
}

impl TopicRegistry {
    /// AlterReplicaLogDirs for one partition: checks it as Kafka does (`path` must be one of
    /// `log.dirs` as reported; the partition must exist) and records the wish. True when a
    /// worker must be started (`run_moves`); false when none is needed or one runs already.
    pub fn request_move(&self, topic: &str, p: i32, path: &str) -> Result<bool, ResponseError> {
        let target = self
            .log_dirs
            .dirs()
            .iter()
            .position(|d| d.path.as_os_str() == path)
            .ok_or(ResponseError::LogDirNotFound)?;
        if self.log_dirs.dirs()[target].health.is_offline() {
            return Err(ResponseError::KafkaStorageError);
        }
        let partition = self.partition(topic, p).ok_or(ResponseError::UnknownTopicOrPartition)?;
        if partition.offline() {
            return Err(ResponseError::KafkaStorageError);
        }
        if suffixed_name(topic, p, "future").len() > 255 {
            return Err(ResponseError::InvalidTopicException);
        }
        let mut moves = self.moves.lock().unwrap_or_else(|e| e.into_inner());
        let key = (topic.to_string(), p);
        if let Some(m) = moves.get_mut(&key) {
            m.wanted = target;
            return Ok(false);
        }
        if self.log_dirs.index_of_path(&partition.log_dir()) == Some(target) {
            return Ok(false);
        }
        moves.insert(key, MoveState { wanted: target, future_dir: None, future_bytes: 0, future_end_offset: -1 });
        Ok(true)
    }

    /// The moves in progress.
    pub fn moves(&self) -> HashMap<(String, i32), MoveState> {
        self.moves.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Worker of `request_move`: moves the partition until it is where the last request wants.
    pub fn run_moves(&self, topic: &str, p: i32) {
        let key = (topic.to_string(), p);
        loop {
            let wanted = {
                let mut moves = self.moves.lock().unwrap_or_else(|e| e.into_inner());
                let Some(m) = moves.get(&key) else { return };
                let here = self.partition(topic, p).and_then(|part| self.log_dirs.index_of_path(&part.log_dir()));
                if here.is_none() || here == Some(m.wanted) {
                    moves.remove(&key);
                    return;
                }
                m.wanted
            };
            if let Err(e) = self.move_partition(topic, p, wanted, None) {
                tracing::error!(topic, partition = p, error = %e, "moving the partition to another log directory failed");
                self.moves.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                return;
            }
        }
    }

    fn note_progress(&self, key: &(String, i32), update: impl FnOnce(&mut MoveState)) -> bool {
        let mut moves = self.moves.lock().unwrap_or_else(|e| e.into_inner());
        match moves.get_mut(key) {
            Some(m) => {
                update(m);
                true
            }
            None => false,
        }
    }

    /// Whether the move of `key` to `target` should go on (no other target asked for since).
    fn still_wanted(&self, key: &(String, i32), target: usize) -> bool {
        self.moves.lock().unwrap_or_else(|e| e.into_inner()).get(key).is_none_or(|m| m.wanted == target)
    }

    /// Moves partition `p` of `topic` into log directory `target` (index in `log.dirs`) while
    /// it serves; see the module header for the steps. `stop_at` stops after a step as if the
    /// process died there (nothing is cleaned up).
    pub fn move_partition(
        &self,
        topic: &str,
        p: i32,
        target: usize,
        stop_at: Option<MoveStep>,
    ) -> anyhow::Result<MoveOutcome> {
        let key = (topic.to_string(), p);
        let Some(partition) = self.partition(topic, p) else { return Ok(MoveOutcome::Abandoned) };
        let source_dir = partition.log_dir();
        let target_dir = self.log_dirs.dirs()[target].path.clone();
        if source_dir == target_dir {
            return Ok(MoveOutcome::NothingToDo);
        }
        let src = partition_dir(&source_dir, topic, p);
        let future = target_dir.join(suffixed_name(topic, p, "future"));
        std::fs::create_dir(&future)?;
        sync_dir(&target_dir)?;
        self.note_progress(&key, |m| m.future_dir = Some(target));
        if stop_at == Some(MoveStep::FutureCreated) {
            return Ok(MoveOutcome::Stopped);
        }
        let mut copier = Copier { src: src.clone(), dst: future.clone(), copied: HashMap::new(), bytes: 0 };
        let result = self.copy_and_swap(&partition, &key, target, &mut copier, stop_at);
        match result {
            Ok(MoveOutcome::Abandoned) | Err(_) => {
                if let Err(e) = std::fs::remove_dir_all(&future) {
                    tracing::warn!(dir = %future.display(), error = %e, "could not remove an abandoned move's copy");
                }
            }
            _ => {}
        }
        result
    }

    fn copy_and_swap(
        &self,
        partition: &Arc<Partition>,
        key: &(String, i32),
        target: usize,
        copier: &mut Copier,
        stop_at: Option<MoveStep>,
    ) -> anyhow::Result<MoveOutcome> {
        for _ in 0..UNLOCKED_PASSES {
            let segments = partition.log().segment_sizes();
            copier.pass(&segments)?;
            let end = segments.last().map_or(0, |s| s.0);
            let bytes = copier.bytes;
            self.note_progress(key, |m| {
                m.future_bytes = bytes;
                m.future_end_offset = end;
            });
            if !self.still_wanted(key, target) {
                return Ok(MoveOutcome::Abandoned);
            }
        }
        if stop_at == Some(MoveStep::Copied) {
            return Ok(MoveOutcome::Stopped);
        }
        // The last pass and the swap: nothing changes the partition or the topic files meanwhile.
        let topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let Some(topic) = topics.get(&key.0).cloned() else { return Ok(MoveOutcome::Abandoned) };
        if !topic.partitions.get(key.1 as usize).is_some_and(|q| Arc::ptr_eq(q, partition)) {
            return Ok(MoveOutcome::Abandoned);
        }
        let mut log = partition.log();
        copier.pass(&log.segment_sizes())?;
        sync_dir(&copier.dst)?;
        if stop_at == Some(MoveStep::TailCopied) {
            return Ok(MoveOutcome::Stopped);
        }
        // Commit point: the topic file names the new directory.
        let mut directories = directory_ids(&self.log_dirs, &topic.partitions);
        directories[key.1 as usize] = self.log_dirs.dirs()[target].id.clone();
        let stored = store::StoredTopic {
            name: topic.name.clone(),
            id: topic.id,
            partitions: topic.partitions.len() as i32,
            directories,
            overrides: topic.overrides.clone(),
        };
        self.store().save(&stored)?;
        if stop_at == Some(MoveStep::Committed) {
            return Ok(MoveOutcome::Stopped);
        }
        let source_dir = partition.log_dir();
        let target_dir = self.log_dirs.dirs()[target].path.clone();
        let gone = source_dir.join(suffixed_name(&key.0, key.1, "delete"));
        let swapped = (|| -> anyhow::Result<Option<PartitionLog>> {
            std::fs::rename(&copier.src, &gone)?;
            sync_dir(&source_dir)?;
            if stop_at == Some(MoveStep::SourceRenamed) {
                return Ok(None);
            }
            let dir = partition_dir(&target_dir, &key.0, key.1);
            std::fs::rename(&copier.dst, &dir)?;
            sync_dir(&target_dir)?;
            if stop_at == Some(MoveStep::FutureRenamed) {
                return Ok(None);
            }
            Ok(Some(PartitionLog::open_with(&dir, log.config().clone(), now_ms(), false)?))
        })();
        match swapped {
            Ok(Some(mut new_log)) => {
                new_log.set_health(self.log_dirs.dirs()[target].health.clone());
                *log = new_log;
                partition.set_log_dir(target_dir.clone());
            }
            Ok(None) => return Ok(MoveOutcome::Stopped),
            Err(e) => {
                // The topic file names the new directory, which may not hold the partition.
                // Serving on from the old copy would lose whatever is appended from now on at
                // the next start: the process stops, and the start finishes the move.
                tracing::error!(topic = %key.0, partition = key.1, error = %e,
                    "a committed log directory move could not be completed; stopping");
                std::process::exit(1);
            }
        }
        drop(log);
        drop(topics);
        if let Err(e) = std::fs::remove_dir_all(&gone) {
            tracing::warn!(dir = %gone.display(), error = %e, "could not remove a moved partition's old copy");
        }
        tracing::info!(topic = %key.0, partition = key.1, to = %target_dir.display(), "moved partition to another log directory");
        Ok(MoveOutcome::Done)
    }
}
