//! The topic store: the metadata log (`raft::MetadataLog`) and the image built from it, seen by
//! the topic registry as "the stored state of each topic". `save` turns the wanted state of a
//! topic into the controller's records (`controller::topic_records`), appends them (durable
//! before `save` returns) and applies them to the image; `topics` reads the stored topics back
//! from the image. At start the log is replayed into the image.
//!
//! On disk: `<first log dir>/__cluster_metadata-0/` (see `raft`). Before the metadata log, Ketch
//! kept one file per topic, `<log.dir>/.ketch/topics/<name>.properties` (Java properties:
//! `topic.id`, `partitions`, `directories` — the `directory.id` of each partition's log
//! directory, comma-separated, absent before JBOD — and `config.<key>` per override). Those
//! files are read once: on the first start with an empty metadata log their topics are written
//! to it in one batch, then the directory is renamed `.ketch/topics.moved-to-metadata-log`.
//! Invariants: a change is visible (in the image) only once its records are durable; records
//! that would not apply to the image are never written; the image is the replay of the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use super::image::{ImageBuilder, MetadataImage, TOPIC_RESOURCE};
use super::log_dirs::{base64_url, uuid_from_base64};
use super::records::MetadataRecord;
use crate::config::{parse_properties, Properties};
use crate::controller::{self, TopicSpec};
use crate::raft::MetadataLog;

/// Where the topic files of a Ketch from before the metadata log are kept once moved into it.
const MOVED_TOPICS_DIR: &str = "topics.moved-to-metadata-log";

pub struct StoredTopic {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// `directory.id` per partition; empty when not known (files written before JBOD).
    pub directories: Vec<String>,
    pub overrides: Properties,
}

impl StoredTopic {
    /// The directory partition `p` was last recorded in, if known.
    pub fn directory(&self, p: i32) -> Option<&str> {
        self.directories.get(p as usize).map(String::as_str).filter(|d| !d.is_empty())
    }
}

fn topics_dir(log_dir: &Path) -> PathBuf {
    log_dir.join(".ketch").join("topics")
}

/// The topics of the per-topic files of a Ketch from before the metadata log.
fn load_legacy(log_dir: &Path) -> anyhow::Result<Vec<StoredTopic>> {
    let dir = topics_dir(log_dir);
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".properties")) else {
            continue;
        };
        let props = parse_properties(&std::fs::read_to_string(&path)?)?;
        let id = props.get("topic.id").ok_or_else(|| anyhow::anyhow!("{} lacks topic.id", path.display()))?;
        let partitions =
            props.get("partitions").ok_or_else(|| anyhow::anyhow!("{} lacks partitions", path.display()))?;
        let overrides =
            props.iter().filter_map(|(k, v)| k.strip_prefix("config.").map(|k| (k.to_string(), v.clone()))).collect();
        let directories =
            props.get("directories").map_or_else(Vec::new, |d| d.split(',').map(str::to_string).collect());
        out.push(StoredTopic {
            name: name.to_string(),
            id: id.parse()?,
            partitions: partitions.parse()?,
            directories,
            overrides,
        });
    }
    Ok(out)
}

/// Random bytes from the OS (topic ids, cluster id).
pub fn random_bytes() -> [u8; 16] {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(&mut bytes).is_ok() {
            return bytes;
        }
    }
    // Fallback: hash the clock and pid through std's randomly seeded hasher.
    use std::hash::{BuildHasher, Hasher};
    for chunk in bytes.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_i64(crate::log::now_ms());
        h.write_u32(std::process::id());
        chunk.copy_from_slice(&h.finish().to_be_bytes()[..chunk.len()]);
    }
    bytes
}

/// The metadata log and the image replayed from it.
pub struct MetadataStore {
    /// None on a broker of a controller quorum (`process.roles=broker`): the metadata log is
    /// the quorum's (`raft::observer` keeps this node's copy) and changes go through it.
    log: Option<MetadataLog>,
    builder: ImageBuilder,
    image: Arc<MetadataImage>,
}

impl std::fmt::Debug for MetadataStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataStore").field("log", &self.log).field("offset", &self.image.offset).finish()
    }
}

impl MetadataStore {
    /// Opens the metadata log in `log_dir`, replays it, and moves the topic files of an older
    /// Ketch into it.
    pub fn open(
        log_dir: &Path,
        node_id: i32,
        snapshots: crate::raft::voter::SnapshotPolicy,
    ) -> anyhow::Result<MetadataStore> {
        let mut builder = ImageBuilder::new();
        let mut replayed = 0u64;
        let log = MetadataLog::open(log_dir, node_id, crate::log::now_ms(), |offset, record| {
            replayed += 1;
            builder.apply(offset, &record)?;
            Ok(())
        })?;
        let mut log = log;
        log.set_snapshot_policy(snapshots);
        let image = builder.publish();
        let mut store = MetadataStore { log: Some(log), builder, image };
        store.move_legacy_topics(log_dir, replayed == 0)?;
        Ok(store)
    }

    /// The store of a broker whose metadata belongs to a controller quorum: no topics of its
    /// own, and no changes through it.
    pub fn detached() -> MetadataStore {
        let mut builder = ImageBuilder::new();
        let image = builder.publish();
        MetadataStore { log: None, builder, image }
    }

    /// Whether topic changes are made here (a node that is its own controller).
    pub fn is_local(&self) -> bool {
        self.log.is_some()
    }

    fn log(&mut self) -> anyhow::Result<&mut MetadataLog> {
        self.log.as_mut().ok_or_else(|| {
            anyhow::anyhow!(
                "this broker's topics belong to its controller quorum (process.roles=broker): changing them through \
                 a Ketch broker is not supported yet"
            )
        })
    }

    /// The image as of the last durable change.
    /// This node's metadata log as its only voter sees it: (leader epoch, log end offset), none
    /// on a broker of a controller quorum.
    pub fn quorum(&self) -> Option<(i32, i64)> {
        self.log.as_ref().map(|log| (log.epoch(), log.end_offset()))
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.clone()
    }

    /// Every stored topic, by name.
    pub fn topics(&self) -> Vec<StoredTopic> {
        let mut out: Vec<StoredTopic> = self
            .image
            .topics
            .values()
            .map(|t| StoredTopic {
                name: t.name.clone(),
                id: t.id,
                partitions: t.partitions.len() as i32,
                directories: t
                    .partitions
                    .values()
                    .map(|p| match p.directories.first() {
                        Some(d) if !d.is_nil() => base64_url(d.as_bytes()),
                        _ => String::new(),
                    })
                    .collect(),
                overrides: self.image.configs.get(&(TOPIC_RESOURCE, t.name.clone())).cloned().unwrap_or_default(),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Makes `topic` the stored state of that topic (creating it if new). Durable on return.
    pub fn save(&mut self, topic: &StoredTopic) -> anyhow::Result<()> {
        let records = self.records_for(topic)?;
        self.commit(records)
    }

    /// The controller's records that take the image to `topic`.
    fn records_for(&mut self, topic: &StoredTopic) -> anyhow::Result<Vec<MetadataRecord>> {
        let directories: Vec<Uuid> =
            topic.directories.iter().map(|d| uuid_from_base64(d).unwrap_or(Uuid::nil())).collect();
        let spec = TopicSpec {
            name: &topic.name,
            id: topic.id,
            partitions: topic.partitions,
            directories: &directories,
            overrides: &topic.overrides,
        };
        let node_id = self.log()?.node_id();
        Ok(controller::topic_records(&self.image, node_id, &spec)?)
    }

    /// Removes the topic `name` (nothing when there is none). Durable on return.
    pub fn remove(&mut self, name: &str) -> anyhow::Result<()> {
        let records = controller::remove_topic_records(&self.image, name);
        self.commit(records)
    }

    /// Checks that `records` apply, appends them as one batch, then applies and publishes them.
    pub(super) fn commit(&mut self, records: Vec<MetadataRecord>) -> anyhow::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let first = self.log()?.end_offset();
        let mut trial = self.builder.clone();
        for (i, record) in records.iter().enumerate() {
            trial.apply(first + i as i64, record)?;
        }
        let last = self.log()?.append(&records, crate::log::now_ms())?;
        assert_eq!(last, first + records.len() as i64 - 1, "one offset per record");
        self.builder = trial;
        self.image = self.builder.publish();
        assert_eq!(self.image.offset, last, "the image is the replay of the log");
        // A snapshot of the image when one is due (the records are durable already).
        let settled = self.builder.settled();
        if let Some(log) = self.log.as_mut() {
            if let Err(e) = log.maybe_snapshot(|| settled.map(super::image_records::records), crate::log::now_ms()) {
                tracing::warn!(error = %e, "metadata snapshot not written");
            }
        }
        Ok(())
    }

    /// The per-topic files of an older Ketch: their topics go into an empty metadata log in one
    /// batch; then (or if the log already has them: a crash came before the rename) the files
    /// are set aside.
    fn move_legacy_topics(&mut self, log_dir: &Path, log_was_empty: bool) -> anyhow::Result<()> {
        let legacy = topics_dir(log_dir);
        if !legacy.exists() {
            return Ok(());
        }
        if log_was_empty {
            let topics = load_legacy(log_dir)?;
            let mut records = Vec::new();
            for topic in &topics {
                // Each topic is new to the image: records against it do not depend on each other.
                records.extend(self.records_for(topic)?);
            }
            self.commit(records)?;
            tracing::info!(topics = topics.len(), dir = %legacy.display(), "moved the topic files into the metadata log");
        }
        let moved = log_dir.join(".ketch").join(MOVED_TOPICS_DIR);
        if moved.exists() {
            std::fs::remove_dir_all(&moved)?;
        }
        std::fs::rename(&legacy, &moved)?;
        std::fs::File::open(log_dir.join(".ketch"))?.sync_all()?;
        Ok(())
    }
}
