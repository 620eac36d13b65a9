//! The broker's log directories (`log.dirs`, JBOD): opening, locking and formatting them, where
//! new partitions go, and which directory holds each partition found on disk.
//!
//! On disk, in every entry of `log.dirs`:
//! - `.lock`: Kafka's advisory lock, held for the process lifetime (one broker per directory);
//! - `meta.properties`, Kafka's KIP-858 format: `version=1`, `cluster.id`, `node.id` and
//!   `directory.id` (16 random bytes, URL-safe base64 as Kafka prints a `Uuid`), written once
//!   when the directory is first used (Ketch has no separate format step) and given a
//!   `directory.id` when an older Ketch left none;
//! - `<topic>-<partition>/`: partition directories (see `log::partition_log`);
//! - `<topic>-<partition>.<32 hex digits>-stray/`: a partition directory found at start that the
//!   metadata does not want here (its topic gone or recreated, or reassigned away while this
//!   broker was down), renamed and kept for the operator, never deleted (Kafka 3.7+, KAFKA-16234;
//!   `mark_stray`). The scan below skips them.
//!
//! The FIRST entry is the metadata directory: only it holds `.ketch/` (topic store, dynamic
//! configs, producer ids, clean-shutdown marker), as Kafka's `metadata.log.dir` defaults to the
//! first log directory.
//!
//! Invariants checked at open (each refuses to start, never repairs by deleting data):
//! - no directory is listed twice (compared canonically);
//! - every formatted directory carries the same `cluster.id` and `node.id`, and distinct
//!   `directory.id`s;
//! - if any directory is formatted, the first one is (else the topic store is missing and the
//!   partitions in the other directories would look orphaned);
//! - `.ketch/` appears in no entry but the first (the order of `log.dirs` changed);
//! - a partition directory is in at most one entry (Kafka's "Duplicate log directories").
//!
//! Placement (Kafka's `LogManager.nextLogDirs`): a new partition goes to the online directory
//! holding the fewest partitions, ties broken by the order of `log.dirs`.
//!
//! Each directory has a `DirHealth` (`log::dir_health`): an I/O error in it at run time takes
//! it offline (its partitions answer KAFKA_STORAGE_ERROR, the others keep serving); the first
//! directory's failure stops the process. A directory other than the first that cannot be
//! created, read or locked at start is offline from the start (no `directory.id` known); the
//! first one failing refuses the start.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{parse_properties, BrokerConfig, Properties};
use crate::log::dir_health::DirHealth;
use crate::log::partition_log::write_atomically;

use super::store::random_bytes;

/// One entry of `log.dirs`.
#[derive(Debug, Clone)]
pub struct LogDir {
    /// As configured (what DescribeLogDirs reports, made absolute).
    pub path: PathBuf,
    /// `directory.id` from its `meta.properties`.
    pub id: String,
    /// Online or offline (after an I/O error), shared with the partition logs in it.
    pub health: Arc<DirHealth>,
}

#[derive(Debug)]
pub struct LogDirs {
    dirs: Vec<LogDir>,
    cluster_id: String,
    /// One `.lock` per directory, held while the broker runs.
    _locks: Vec<std::fs::File>,
}

/// Partition directories found on disk: `(topic, partition)` -> indexes of the log dirs
/// holding one (more than one is an error the caller reports).
pub type Found = HashMap<(String, i32), Vec<usize>>;

impl LogDirs {
    /// Creates missing directories, locks each, reads and checks every `meta.properties`, and
    /// formats the directories that have none.
    pub fn open(config: &BrokerConfig) -> anyhow::Result<LogDirs> {
        let mut canonical = Vec::new();
        let mut locks = Vec::new();
        // `None`: the directory failed to open (offline, as Kafka's `createAndValidateLogDirs`
        // leaves it); only the metadata directory (the first) failing stops the start.
        let mut metas: Vec<Option<Option<Properties>>> = Vec::new();
        for (i, dir) in config.log_dirs.iter().enumerate() {
            if !dir.exists() {
                tracing::info!(dir = %dir.display(), "log directory not found, creating it");
            }
            let located = (|| -> anyhow::Result<PathBuf> {
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("Failed to create data directory {}: {e}", dir.display()))?;
                if !dir.is_dir() {
                    anyhow::bail!("{} is not a readable log directory.", dir.display());
                }
                Ok(std::fs::canonicalize(dir)?)
            })();
            // Before anything in the directory is read or written: a second broker must not
            // touch it.
            let opened = located.and_then(|c| {
                if canonical.contains(&c) {
                    let all: Vec<String> = config.log_dirs.iter().map(|d| d.display().to_string()).collect();
                    return Err(ConfigError(format!("Duplicate log directory found: {}", all.join(", "))).into());
                }
                canonical.push(c);
                let lock = lock_log_dir(dir)?;
                Ok((lock, read_meta(dir)?))
            });
            match opened {
                Ok((lock, meta)) => {
                    locks.push(lock);
                    metas.push(Some(meta));
                }
                // A second broker on the directory or a duplicate entry is a configuration
                // error, not a disk failure.
                Err(e) if i == 0 || e.is::<ConfigError>() => return Err(e),
                Err(e) => {
                    tracing::error!(dir = %dir.display(), error = %e,
                        "log directory failed at start: it is offline, its partitions are not served");
                    metas.push(None);
                }
            }
        }
        let offline: Vec<bool> = metas.iter().map(Option::is_none).collect();
        let metas: Vec<Option<Properties>> = metas.into_iter().map(Option::flatten).collect();
        check_consistent(&config.log_dirs, &metas)?;
        let first = &config.log_dirs[0];
        if metas[0].is_none() {
            if let Some(i) = metas.iter().position(Option::is_some) {
                anyhow::bail!(
                    "No meta.properties found in {}, the first entry of log.dirs (it holds the broker's metadata), \
                     while {} has one: is its disk missing or unmounted, or did the order of log.dirs change?",
                    first.display(),
                    config.log_dirs[i].display()
                );
            }
        }
        for dir in &config.log_dirs[1..] {
            for held in [dir.join(".ketch"), dir.join(crate::raft::METADATA_LOG_DIR_NAME)] {
                if held.exists() {
                    anyhow::bail!(
                        "Found Ketch metadata ({}) in a log directory that is not the first entry of log.dirs ({}): \
                         did the order of log.dirs change?",
                        held.display(),
                        first.display()
                    );
                }
            }
        }
        let cluster_id = match metas.iter().flatten().find_map(|m| m.get("cluster.id")) {
            Some(id) => id.clone(),
            None if !config.cluster_id.is_empty() => config.cluster_id.clone(),
            // Kafka cluster ids are 16 random bytes in URL-safe base64 without padding.
            None => base64_url(&random_bytes()),
        };
        let mut dirs = Vec::with_capacity(metas.len());
        for ((dir, meta), offline) in config.log_dirs.iter().zip(metas).zip(offline) {
            if offline {
                let path = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
                let health = Arc::new(DirHealth::failed(path.clone()));
                dirs.push(LogDir { path, id: String::new(), health });
                continue;
            }
            let id = match meta.as_ref().and_then(|m| m.get("directory.id")) {
                Some(id) => id.clone(),
                None => {
                    let id = base64_url(&random_bytes());
                    let node_id = meta
                        .as_ref()
                        .and_then(|m| m.get("node.id").cloned())
                        .unwrap_or_else(|| config.node_id.to_string());
                    let text = format!("version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={id}\n");
                    write_atomically(&dir.join("meta.properties"), text.as_bytes())?;
                    tracing::info!(dir = %dir.display(), directory_id = %id, "formatted log directory");
                    id
                }
            };
            let path = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
            let health = Arc::new(DirHealth::new(path.clone(), dirs.is_empty()));
            dirs.push(LogDir { path, id, health });
        }
        Ok(LogDirs { dirs, cluster_id, _locks: locks })
    }

    /// Every entry of `log.dirs`, in configured order.
    pub fn dirs(&self) -> &[LogDir] {
        &self.dirs
    }

    /// The metadata directory (the first entry).
    pub fn first(&self) -> &Path {
        &self.dirs[0].path
    }

    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The online directory with this `directory.id`.
    pub fn index_of_id(&self, id: &str) -> Option<usize> {
        self.dirs.iter().position(|d| d.id == id && !d.health.is_offline())
    }

    /// Whether a directory is offline (it failed at start or at run time).
    pub fn any_offline(&self) -> bool {
        self.dirs.iter().any(|d| d.health.is_offline())
    }

    pub fn index_of_path(&self, path: &Path) -> Option<usize> {
        self.dirs.iter().position(|d| d.path == path)
    }

    /// Kafka's placement rule: the online directory with the fewest partitions (`counts[i]`
    /// for entry `i`), the first in `log.dirs` order among equals.
    pub fn next_dir(&self, counts: &[usize]) -> usize {
        (0..self.dirs.len())
            .filter(|&i| !self.dirs[i].health.is_offline())
            .min_by_key(|&i| counts.get(i).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Lists the partition directories (`<topic>-<partition>`) of every entry. Names with
    /// another suffix (Kafka's `-delete`, `-future`, `-stray`) are not partitions and ignored.
    pub fn scan(&self) -> anyhow::Result<Found> {
        let mut found = Found::new();
        for (i, dir) in self.dirs.iter().enumerate() {
            if dir.health.is_offline() {
                continue;
            }
            for entry in std::fs::read_dir(&dir.path)? {
                let entry = entry?;
                if !entry.file_type()?.is_dir() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().to_string();
                if name == crate::raft::METADATA_LOG_DIR_NAME {
                    continue;
                }
                let Some((topic, partition)) = name.rsplit_once('-') else { continue };
                let Ok(partition) = partition.parse::<i32>() else { continue };
                if topic.is_empty() || partition < 0 {
                    continue;
                }
                found.entry((topic.to_string(), partition)).or_default().push(i);
            }
        }
        Ok(found)
    }

    /// The error for a partition found in two directories (Kafka refuses to start too).
    pub fn duplicate_error(&self, topic: &str, partition: i32, holders: &[usize]) -> anyhow::Error {
        let paths: Vec<String> = holders
            .iter()
            .map(|&i| super::partition_dir(&self.dirs[i].path, topic, partition).display().to_string())
            .collect();
        anyhow::anyhow!(
            "Duplicate log directories for {topic}-{partition} are found in both {}. Recover by deleting all \
             but one of them (keep the one with the data you trust) and start again.",
            paths.join(" and ")
        )
    }
}

/// Takes Kafka's `.lock` on a log directory (an advisory lock held until the process exits),
/// so a second broker on the same directory refuses to start instead of corrupting it.
pub fn lock_log_dir(log_dir: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(log_dir)?;
    let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(log_dir.join(".lock"))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(ConfigError(format!(
            "Failed to acquire lock on file .lock in {}. A Kafka instance in another process or thread is using this directory.",
            log_dir.display()
        ))
        .into()),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// A start refused for the configuration (a duplicate entry, a directory another broker
/// holds), as opposed to a failing directory, which goes offline.
#[derive(Debug)]
struct ConfigError(String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

pub(super) fn read_meta(dir: &Path) -> anyhow::Result<Option<Properties>> {
    let path = dir.join("meta.properties");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let props = parse_properties(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            if !props.contains_key("cluster.id") {
                anyhow::bail!("Error: cluster ID not found in {}", path.display());
            }
            Ok(Some(props))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
    }
}

/// Kafka's `MetaPropertiesEnsemble.verify`: one cluster, one node, distinct directory ids.
fn check_consistent(paths: &[PathBuf], metas: &[Option<Properties>]) -> anyhow::Result<()> {
    let mut seen: HashMap<&str, (&str, &Path)> = HashMap::new();
    let mut ids: HashMap<&str, &Path> = HashMap::new();
    for (path, meta) in paths.iter().zip(metas) {
        let Some(meta) = meta else { continue };
        for key in ["cluster.id", "node.id"] {
            let Some(value) = meta.get(key) else { continue };
            match seen.get(key) {
                Some((expected, first)) if expected != value => anyhow::bail!(
                    "Inconsistent {key} across log directories: {} has {value}, {} has {expected}",
                    path.display(),
                    first.display()
                ),
                Some(_) => {}
                None => {
                    seen.insert(key, (value, path));
                }
            }
        }
        if let Some(id) = meta.get("directory.id") {
            if let Some(other) = ids.insert(id, path) {
                anyhow::bail!(
                    "Duplicate directory ID {id} found in {} and {} (was one directory copied onto another?)",
                    other.display(),
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// URL-safe base64 without padding, as Kafka prints cluster ids and `Uuid`s.
pub(super) fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, b)| acc | (*b as u32) << (16 - 8 * i));
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A printed Kafka `Uuid` (22 characters of URL-safe base64, as `base64_url` writes 16 bytes)
/// back to its 16 bytes; `None` for anything else.
pub(super) fn uuid_from_base64(text: &str) -> Option<uuid::Uuid> {
    if text.len() != 22 {
        return None;
    }
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(16);
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        bits = (bits << 6) | v as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    // 22 characters carry 132 bits: the 4 left over must be zero, as base64_url leaves them.
    (bits == 0 && out.len() == 16).then(|| uuid::Uuid::from_bytes(out.try_into().expect("16 bytes")))
}

/// Renames the partition directory `dir` (closed) to `<topic>-<partition>.<uuid>-stray` beside
/// it, as Kafka marks a stray log (`UnifiedLog.logStrayDirName`: the name capped at 255 bytes
/// by shortening the topic), and fsyncs the parent so the rename survives a crash. Returns the
/// new path. Nothing is deleted: the operator decides.
pub fn mark_stray(dir: &Path) -> io::Result<PathBuf> {
    let parent = dir.parent().ok_or_else(|| io::Error::other("a partition directory has a parent"))?;
    let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let id = uuid::Uuid::from_bytes(random_bytes()).simple().to_string();
    let suffix = format!(".{id}-stray");
    let (topic, partition) = name.rsplit_once('-').unwrap_or((&name, ""));
    let room = 255usize.saturating_sub(partition.len() + 1 + suffix.len());
    let mut cut = topic.len().min(room);
    while !topic.is_char_boundary(cut) {
        cut -= 1;
    }
    let to = parent.join(format!("{}-{partition}{suffix}", &topic[..cut]));
    std::fs::rename(dir, &to)?;
    std::fs::File::open(parent)?.sync_all()?;
    tracing::warn!("Log in {} marked stray and renamed to {}", dir.display(), to.display());
    Ok(to)
}

#[cfg(test)]
mod uuid_text_tests {
    use super::*;

    #[test]
    fn printed_uuids_round_trip() {
        for bytes in [[0u8; 16], [255u8; 16], crate::metadata::random_bytes()] {
            let text = base64_url(&bytes);
            assert_eq!(uuid_from_base64(&text), Some(uuid::Uuid::from_bytes(bytes)), "{text}");
        }
        assert_eq!(
            uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ"),
            Some(uuid::Uuid::from_u128(1)),
            "Kafka's METADATA_TOPIC_ID"
        );
        assert_eq!(uuid_from_base64("short"), None);
        assert_eq!(uuid_from_base64("AAAAAAAAAAAAAAAAAAAAA!"), None);
    }
}
