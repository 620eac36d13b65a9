//! Cluster metadata for a single node: which topics exist, their ids, partition counts and
//! config overrides, and the open partition logs.
//!
//! Owns: creating (explicitly or by auto-creation), looking up and deleting topics, and
//! persisting that as records in the metadata log `__cluster_metadata` (see `store.rs`: the
//! image replayed from that log is what this registry opens at start);
//! placing each new partition in one of the log directories and finding it there at start
//! (see `log_dirs.rs`).
//! Invariants: a topic is visible only after its records are durable in the metadata log and every
//! partition directory exists; deletion writes its removal record first, so a crash mid-delete leaves orphan
//! partition directories that the next start removes, never a half-visible topic. A partition
//! recorded in a log directory that is offline or no longer among `log.dirs` (a failed, missing
//! or replaced disk) is served offline (KAFKA_STORAGE_ERROR, no leader in Metadata): it is never
//! recreated empty elsewhere, and its recorded directory is kept.

pub mod features;
pub mod format;
pub mod format_voters;
pub mod hosted;
pub mod image;
pub mod image_records;
pub mod log_dirs;
pub mod records;
pub mod replica_move;
mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::config::{BrokerConfig, Properties, TopicConfig};
use crate::log::dir_health::DirHealth;
use crate::log::partition_log::partition_dir;
use crate::log::{now_ms, Partition, PartitionLog};

pub use hosted::HostedPartitions;
use log_dirs::LogDirs;
pub use log_dirs::{lock_log_dir, LogDir};
pub use store::random_bytes;

/// Written into `<log.dir>/.ketch/` after every log was closed cleanly.
pub const CLEAN_SHUTDOWN_MARKER: &str = "clean-shutdown";

/// The clean shutdown marker's line naming the broker epoch (`broker.epoch=<epoch>`).
const BROKER_EPOCH_KEY: &str = "broker.epoch";

/// The broker epoch a clean shutdown marker carries, -1 when it has none (or is unreadable).
fn marker_broker_epoch(marker: &std::path::Path) -> i64 {
    let content = std::fs::read_to_string(marker).unwrap_or_default();
    content
        .lines()
        .filter_map(|line| line.split_once('='))
        .find(|(key, _)| key.trim() == BROKER_EPOCH_KEY)
        .and_then(|(_, value)| value.trim().parse::<i64>().ok())
        .filter(|epoch| *epoch >= 0)
        .unwrap_or(-1)
}

/// Kafka's limit on topic name length.
pub const MAX_TOPIC_NAME_BYTES: usize = 249;

#[derive(Debug)]
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub overrides: Properties,
    pub config: TopicConfig,
    /// The partitions hosted here (all of them on a single node).
    pub partitions: HostedPartitions,
    pub internal: bool,
}

#[derive(Debug)]
pub struct TopicRegistry {
    /// The metadata directory (first entry of `log.dirs`): the topic store is there.
    log_dir: PathBuf,
    /// Every entry of `log.dirs`, locked while the registry lives.
    log_dirs: LogDirs,
    /// The broker-level topic defaults in force (dynamic broker configs change them).
    defaults: RwLock<TopicConfig>,
    topics: RwLock<HashMap<String, Arc<Topic>>>,
    /// The metadata log and its image: where topic changes are made durable. Taken after
    /// `topics` when both are held.
    store: Mutex<store::MetadataStore>,
    /// Moves between log directories in progress (AlterReplicaLogDirs).
    moves: replica_move::Moves,
    /// The broker epoch the clean shutdown marker found at start carried (-1: none), Kafka's
    /// `PreviousBrokerEpoch` of the next registration (KIP-966 clean shutdown detection).
    previous_broker_epoch: i64,
    /// The broker epoch of this process's registration (-1: none yet), written into the clean
    /// shutdown marker.
    broker_epoch: Arc<std::sync::atomic::AtomicI64>,
}

/// Why a topic could not be created, as Kafka reports it.
#[derive(Debug)]
pub struct CreateError {
    pub error: ResponseError,
    pub message: String,
}

impl CreateError {
    fn new(error: ResponseError, message: impl Into<String>) -> Self {
        CreateError { error, message: message.into() }
    }
}

/// A Kafka `Uuid` as Kafka prints it (URL-safe base64, no padding).
pub fn print_uuid(id: &Uuid) -> String {
    log_dirs::base64_url(id.as_bytes())
}

/// The `directory.id` of the formatted log directory `dir` (None: not formatted, or none given).
pub fn directory_id_of(dir: &std::path::Path) -> anyhow::Result<Option<Uuid>> {
    let meta = log_dirs::read_meta(dir)?;
    Ok(meta.and_then(|props| props.get("directory.id").and_then(|id| parse_uuid(id))))
}

/// A printed Kafka `Uuid` back to its value (`None` if it is not one).
pub fn parse_uuid(text: &str) -> Option<Uuid> {
    log_dirs::uuid_from_base64(text)
}

/// Kafka's rule for legal topic names (`Topic.validate`), with its messages.
pub fn validate_topic_name(name: &str) -> Result<(), CreateError> {
    let reason = if name.is_empty() {
        "the empty string is not allowed".to_string()
    } else if name == "." || name == ".." {
        format!("'{name}' is not allowed")
    } else if name.encode_utf16().count() > MAX_TOPIC_NAME_BYTES {
        format!("the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_BYTES}")
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        format!("'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
    } else {
        return Ok(());
    };
    Err(CreateError::new(ResponseError::InvalidTopicException, format!("Topic name is invalid: {reason}")))
}

/// Whether `name` may be given to a new topic, checked as Kafka's controller does: a legal name,
/// not the metadata log's, not `taken`, and not colliding with one of the `existing` names once
/// '.' and '_' are unified (their metric names would clash).
pub fn check_new_topic_name<'a>(
    name: &str,
    taken: impl FnOnce(&str) -> bool,
    existing: impl IntoIterator<Item = &'a String>,
) -> Result<(), CreateError> {
    validate_topic_name(name)?;
    if name == crate::raft::METADATA_TOPIC_NAME {
        let message = format!("Topic name is invalid: '{name}' is reserved for the metadata log");
        return Err(CreateError::new(ResponseError::InvalidTopicException, message));
    }
    if taken(name) {
        return Err(CreateError::new(ResponseError::TopicAlreadyExists, format!("Topic '{name}' already exists.")));
    }
    // A name with neither '.' nor '_' collides only with itself, taken above.
    let unified = name.replace('.', "_");
    if unified != name || name.contains('_') {
        if let Some(existing) = existing.into_iter().find(|t| t.replace('.', "_") == unified) {
            let message = format!("Topic '{name}' collides with existing topic: {existing}");
            return Err(CreateError::new(ResponseError::InvalidTopicException, message));
        }
    }
    Ok(())
}

impl TopicRegistry {
    /// Opens (locking, formatting) the log directories, then the topics in them.
    pub fn open(config: &BrokerConfig) -> anyhow::Result<TopicRegistry> {
        Self::open_in(LogDirs::open(config)?, config)
    }

    /// Loads every persisted topic and opens (recovering) its partition logs, each in the log
    /// directory that holds it.
    pub fn open_in(log_dirs: LogDirs, config: &BrokerConfig) -> anyhow::Result<TopicRegistry> {
        let log_dir = log_dirs.first().to_path_buf();
        let snapshots = crate::raft::voter::SnapshotPolicy::from_config(config)?;
        let metadata = store::MetadataStore::open(&log_dir, config.node_id, snapshots)?;
        Self::open_with(log_dirs, config, metadata)
    }

    /// The registry of a broker whose topics belong to a controller quorum
    /// (`process.roles=broker`): none are opened yet, and partition directories on disk are
    /// left alone (never removed as orphans).
    pub fn open_detached(log_dirs: LogDirs, config: &BrokerConfig) -> anyhow::Result<TopicRegistry> {
        Self::open_with(log_dirs, config, store::MetadataStore::detached())
    }

    fn open_with(
        log_dirs: LogDirs,
        config: &BrokerConfig,
        mut metadata: store::MetadataStore,
    ) -> anyhow::Result<TopicRegistry> {
        let log_dir = log_dirs.first().to_path_buf();
        let now = now_ms();
        // A clean shutdown left a marker: logs were fsynced and closed, so the active segments
        // need no full scan. The marker is consumed, so a later crash gets full recovery. One
        // marker (in the metadata directory) covers every log directory: all close together.
        let marker = log_dir.join(".ketch").join(CLEAN_SHUTDOWN_MARKER);
        let clean = marker.exists();
        let previous_broker_epoch = if clean { marker_broker_epoch(&marker) } else { -1 };
        let stored_topics = metadata.topics();
        // Moves between directories a crash interrupted are finished or undone first.
        replica_move::recover(&log_dirs, |topic, p| {
            stored_topics.iter().find(|t| t.name == topic).and_then(|t| t.directory(p)).map(str::to_string)
        })?;
        let found = log_dirs.scan()?;
        // Where each partition is. A duplicate stops the start before anything is opened,
        // created or removed. A partition recorded in a directory that is offline or gone (or
        // recorded nowhere and found nowhere while a directory is offline) is served offline,
        // never recreated empty.
        let mut counts = vec![0usize; log_dirs.dirs().len()];
        let mut placed: Vec<Vec<Place>> = Vec::with_capacity(stored_topics.len());
        let mut lost = Vec::new();
        for stored in &stored_topics {
            let mut dirs = Vec::with_capacity(stored.partitions as usize);
            for p in 0..stored.partitions {
                let holders = found.get(&(stored.name.clone(), p)).map_or(&[][..], Vec::as_slice);
                let at = match (holders, stored.directory(p)) {
                    ([_, _, ..], _) => return Err(log_dirs.duplicate_error(&stored.name, p, holders)),
                    ([i], _) => Place::At(*i),
                    ([], Some(id)) => match log_dirs.index_of_id(id) {
                        Some(i) => Place::At(i),
                        None => Place::Offline(id.to_string()),
                    },
                    ([], None) if log_dirs.any_offline() => Place::Offline(String::new()),
                    ([], None) => Place::New,
                };
                match &at {
                    Place::At(i) => counts[*i] += 1,
                    Place::Offline(id) => lost.push(format!("{}-{p} (directory.id {id:?})", stored.name)),
                    Place::New => {}
                }
                dirs.push(at);
            }
            placed.push(dirs);
        }
        if !lost.is_empty() {
            tracing::error!(
                partitions = %lost.join(", "),
                "partitions recorded in a log directory that is offline or not among log.dirs (a failed, missing, \
                 unmounted or replaced disk?) are offline: put the directory back and restart to serve them"
            );
        }
        if clean {
            std::fs::remove_file(&marker)?;
            tracing::info!("clean shutdown marker found: skipping full recovery of active segments");
        }
        let mut topics = HashMap::new();
        for (stored, dirs) in stored_topics.into_iter().zip(placed) {
            let topic_config = config.topic_defaults.with_overrides(&stored.overrides)?;
            let mut partitions = Vec::with_capacity(stored.partitions as usize);
            let mut recorded = stored.directories.clone();
            for (p, at) in (0..stored.partitions).zip(dirs) {
                let i = match at {
                    Place::At(i) => i,
                    Place::New => {
                        let i = log_dirs.next_dir(&counts);
                        counts[i] += 1;
                        i
                    }
                    Place::Offline(id) => {
                        let where_ = if id.is_empty() {
                            "an offline log directory".to_string()
                        } else {
                            format!("log directory {id}")
                        };
                        let health = Arc::new(DirHealth::failed(PathBuf::from(format!("<{where_}>"))));
                        let dir = PathBuf::from(format!("<{where_}>/{}-{p}", stored.name));
                        let log = PartitionLog::offline(dir, topic_config.clone(), health);
                        partitions.push(Arc::new(Partition::new(stored.name.clone(), p, log)));
                        continue;
                    }
                };
                if let Some(slot) = recorded.get_mut(p as usize) {
                    *slot = log_dirs.dirs()[i].id.clone();
                }
                let dir = partition_dir(&log_dirs.dirs()[i].path, &stored.name, p);
                if !found.contains_key(&(stored.name.clone(), p)) {
                    tracing::warn!(dir = %dir.display(), "partition directory missing: creating it empty");
                }
                let mut log = PartitionLog::open_with(&dir, topic_config.clone(), now, !clean)?;
                log.set_health(log_dirs.dirs()[i].health.clone());
                partitions.push(Arc::new(Partition::new(stored.name.clone(), p, log)));
            }
            let partitions = HostedPartitions::all(partitions);
            // Offline partitions keep the directory they were recorded in.
            let directories =
                if recorded.len() == partitions.len() { recorded } else { directory_ids(&log_dirs, &partitions) };
            let stored = if directories != stored.directories {
                // Found elsewhere than recorded (moved by hand while stopped), recreated, or
                // recorded by a Ketch before JBOD: record where each partition is now.
                let updated = store::StoredTopic { directories, ..stored };
                metadata.save(&updated)?;
                updated
            } else {
                stored
            };
            let topic = Topic {
                internal: stored.name.starts_with("__"),
                name: stored.name.clone(),
                id: stored.id,
                overrides: stored.overrides,
                config: topic_config,
                partitions,
            };
            topics.insert(stored.name, Arc::new(topic));
        }
        for ((topic, p), holders) in found.iter().filter(|_| metadata.is_local()) {
            if topics.get(topic).is_none_or(|t: &Arc<Topic>| (*p as usize) >= t.partitions.len()) {
                // A topic this node's own metadata does not have (deleted, the process stopped
                // before its directories went): kept as stray, never deleted at start.
                for &i in holders {
                    log_dirs::mark_stray(&partition_dir(&log_dirs.dirs()[i].path, topic, *p))?;
                }
            }
        }
        Ok(TopicRegistry {
            log_dir,
            log_dirs,
            defaults: RwLock::new(config.topic_defaults.clone()),
            topics: RwLock::new(topics),
            store: Mutex::new(metadata),
            moves: Default::default(),
            previous_broker_epoch,
            broker_epoch: Arc::new(std::sync::atomic::AtomicI64::new(-1)),
        })
    }

    /// The entries of `log.dirs` (locked, formatted) and the cluster id they carry.
    /// A single node's own metadata log: (leader epoch, log end offset); none in a cluster.
    pub fn metadata_quorum(&self) -> Option<(i32, i64)> {
        self.store.lock().unwrap_or_else(|p| p.into_inner()).quorum()
    }

    pub fn log_dirs(&self) -> &LogDirs {
        &self.log_dirs
    }

    /// Partitions per log directory (entry order of `log.dirs`).
    fn partition_counts(&self, topics: &HashMap<String, Arc<Topic>>) -> Vec<usize> {
        let mut counts = vec![0usize; self.log_dirs.dirs().len()];
        for p in topics.values().flat_map(|t| t.partitions.iter()) {
            if let Some(i) = self.log_dirs.index_of_path(&p.log_dir()) {
                counts[i] += 1;
            }
        }
        counts
    }

    /// Opens new, empty partitions `from..to` of a topic, each in the log directory with the
    /// fewest partitions at that moment (Kafka's `nextLogDirs`).
    fn open_new_partitions(
        &self,
        topics: &HashMap<String, Arc<Topic>>,
        name: &str,
        range: std::ops::Range<i32>,
        config: &TopicConfig,
    ) -> Result<Vec<Arc<Partition>>, CreateError> {
        let mut counts = self.partition_counts(topics);
        let now = now_ms();
        let mut out = Vec::with_capacity(range.len());
        for p in range {
            let i = self.log_dirs.next_dir(&counts);
            counts[i] += 1;
            let dir = partition_dir(&self.log_dirs.dirs()[i].path, name, p);
            let mut log = PartitionLog::open(&dir, config.clone(), now)
                .map_err(|e| CreateError::new(ResponseError::KafkaStorageError, e.to_string()))?;
            log.set_health(self.log_dirs.dirs()[i].health.clone());
            out.push(Arc::new(Partition::new(name.to_string(), p, log)));
        }
        Ok(out)
    }

    fn stored(&self, topic: &Topic, partitions: &HostedPartitions, overrides: &Properties) -> store::StoredTopic {
        store::StoredTopic {
            name: topic.name.clone(),
            id: topic.id,
            partitions: partitions.len() as i32,
            directories: directory_ids(&self.log_dirs, partitions),
            overrides: overrides.clone(),
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.read().get(name).cloned()
    }

    pub fn get_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.read().values().find(|t| t.id == id).cloned()
    }

    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut topics: Vec<_> = self.read().values().cloned().collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        topics
    }

    /// On a broker of a controller quorum: makes `topic` (with the partitions this broker
    /// hosts, opened by the replica manager from the metadata image) what handlers see,
    /// replacing the previous version of it.
    pub fn publish_hosted(&self, topic: Topic) {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        topics.insert(topic.name.clone(), Arc::new(topic));
    }

    /// On a broker of a controller quorum: the topic left the image (or this broker hosts
    /// none of it); returns it so its logs can be closed.
    pub fn forget_hosted(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.write().unwrap_or_else(|p| p.into_inner()).remove(name)
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let topic = self.get(topic)?;
        usize::try_from(index).ok().and_then(|i| topic.partitions.get(i).cloned())
    }

    fn store(&self) -> MutexGuard<'_, store::MetadataStore> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The metadata image as of the last topic change.
    pub fn metadata_image(&self) -> Arc<image::MetadataImage> {
        self.store().image()
    }

    /// On a node that is its own controller: the records `decide` makes on the current image,
    /// made durable under the store's lock (no other change decided in between); the image
    /// after them. An error when they cannot be written (or this broker's metadata belongs to
    /// a controller quorum).
    pub fn change_metadata<E>(
        &self,
        decide: impl FnOnce(&image::MetadataImage) -> Result<Vec<records::MetadataRecord>, E>,
    ) -> anyhow::Result<Result<Arc<image::MetadataImage>, E>> {
        let mut store = self.store();
        let records = match decide(&store.image()) {
            Ok(records) => records,
            Err(e) => return Ok(Err(e)),
        };
        store.commit(records)?;
        Ok(Ok(store.image()))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Topic>>> {
        self.topics.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Validates a create request without creating anything (CreateTopics `validate_only`).
    pub fn check_create(
        &self,
        name: &str,
        partitions: i32,
        overrides: &Properties,
    ) -> Result<TopicConfig, CreateError> {
        self.check_new_name(name)?;
        if partitions <= 0 {
            let message = "Number of partitions was set to an invalid non-positive value.";
            return Err(CreateError::new(ResponseError::InvalidPartitions, message));
        }
        if partitions > 100_000 {
            return Err(CreateError::new(ResponseError::InvalidPartitions, "too many partitions for one topic"));
        }
        self.defaults()
            .with_overrides(overrides)
            .map_err(|e| CreateError::new(ResponseError::InvalidConfig, e.to_string()))
    }

    /// Whether `name` may be given to a new topic (`check_new_topic_name`, against this
    /// registry's topics).
    pub fn check_new_name(&self, name: &str) -> Result<(), CreateError> {
        let topics = self.read();
        check_new_topic_name(name, |n| topics.contains_key(n), topics.keys())
    }

    /// The topic defaults in force.
    pub fn defaults(&self) -> TopicConfig {
        self.defaults.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Installs new broker-level topic defaults (a dynamic broker config changed): every topic
    /// takes them for each config it does not override, as in Kafka. Returns the topics whose
    /// effective config changed.
    pub fn set_defaults(&self, defaults: TopicConfig) -> Vec<Arc<Topic>> {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        *self.defaults.write().unwrap_or_else(|p| p.into_inner()) = defaults.clone();
        let mut changed = Vec::new();
        for topic in topics.values_mut() {
            // Overrides were validated when set, and validity does not depend on the defaults.
            let config = match defaults.with_overrides(&topic.overrides) {
                Ok(config) => config,
                Err(e) => {
                    tracing::error!(topic = %topic.name, error = %e, "stored overrides no longer valid");
                    continue;
                }
            };
            if config == topic.config {
                continue;
            }
            for partition in &topic.partitions {
                partition.log().set_config(config.clone());
            }
            *topic = Arc::new(Topic {
                name: topic.name.clone(),
                id: topic.id,
                overrides: topic.overrides.clone(),
                config,
                partitions: topic.partitions.clone(),
                internal: topic.internal,
            });
            changed.push(topic.clone());
        }
        changed
    }

    /// Creates a topic: writes its metadata, creates its partition logs, then publishes it.
    pub fn create(&self, name: &str, partitions: i32, overrides: Properties) -> Result<Arc<Topic>, CreateError> {
        self.check_create(name, partitions, &overrides)?;
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        if topics.contains_key(name) {
            return Err(CreateError::new(ResponseError::TopicAlreadyExists, format!("Topic '{name}' already exists.")));
        }
        // Under the lock `set_defaults` takes, so a concurrent change of the defaults is not missed.
        let config = self
            .defaults()
            .with_overrides(&overrides)
            .map_err(|e| CreateError::new(ResponseError::InvalidConfig, e.to_string()))?;
        let storage = |e: anyhow::Error| CreateError::new(ResponseError::KafkaStorageError, e.to_string());
        let id = Uuid::from_bytes(random_bytes());
        let logs = self.open_new_partitions(&topics, name, 0..partitions, &config)?;
        let topic = Arc::new(Topic {
            name: name.to_string(),
            id,
            overrides,
            config,
            partitions: HostedPartitions::all(logs),
            internal: name.starts_with("__"),
        });
        self.store().save(&self.stored(&topic, &topic.partitions, &topic.overrides)).map_err(storage)?;
        topics.insert(name.to_string(), topic.clone());
        tracing::info!(topic = name, partitions, "created topic");
        Ok(topic)
    }

    /// Grows a topic to `count` partitions (never shrinks: Kafka answers INVALID_PARTITIONS).
    pub fn add_partitions(&self, name: &str, count: i32, validate_only: bool) -> Result<(), CreateError> {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let topic = topics.get(name).cloned().ok_or_else(|| {
            CreateError::new(ResponseError::UnknownTopicOrPartition, format!("topic {name} does not exist"))
        })?;
        let current = topic.partitions.len() as i32;
        // Kafka's wording for both refusals.
        if count == current {
            return Err(CreateError::new(
                ResponseError::InvalidPartitions,
                format!("Topic already has {current} partition(s)."),
            ));
        }
        if count < current {
            return Err(CreateError::new(
                ResponseError::InvalidPartitions,
                format!("The topic {name} currently has {current} partition(s); {count} would not be an increase."),
            ));
        }
        if count > 100_000 {
            return Err(CreateError::new(ResponseError::InvalidPartitions, "too many partitions for one topic"));
        }
        if validate_only {
            return Ok(());
        }
        let storage = |e: anyhow::Error| CreateError::new(ResponseError::KafkaStorageError, e.to_string());
        let partitions = topic
            .partitions
            .grown(count as usize, self.open_new_partitions(&topics, name, current..count, &topic.config)?);
        self.store().save(&self.stored(&topic, &partitions, &topic.overrides)).map_err(storage)?;
        let grown = Topic {
            name: topic.name.clone(),
            id: topic.id,
            overrides: topic.overrides.clone(),
            config: topic.config.clone(),
            partitions,
            internal: topic.internal,
        };
        topics.insert(name.to_string(), Arc::new(grown));
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(())
    }

    /// Replaces a topic's config overrides (validated, persisted, applied to every partition).
    pub fn alter_config(
        &self,
        name: &str,
        overrides: Properties,
        validate_only: bool,
    ) -> Result<Arc<Topic>, CreateError> {
        let mut topics = self.topics.write().unwrap_or_else(|p| p.into_inner());
        let topic = topics.get(name).cloned().ok_or_else(|| {
            CreateError::new(ResponseError::UnknownTopicOrPartition, format!("topic {name} does not exist"))
        })?;
        let config = self
            .defaults()
            .with_overrides(&overrides)
            .map_err(|e| CreateError::new(ResponseError::InvalidConfig, e.to_string()))?;
        if validate_only {
            return Ok(topic);
        }
        self.store()
            .save(&self.stored(&topic, &topic.partitions, &overrides))
            .map_err(|e| CreateError::new(ResponseError::KafkaStorageError, e.to_string()))?;
        for partition in &topic.partitions {
            partition.log().set_config(config.clone());
        }
        let altered = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            overrides,
            config,
            partitions: topic.partitions.clone(),
            internal: topic.internal,
        });
        topics.insert(name.to_string(), altered.clone());
        tracing::info!(topic = name, "altered topic config");
        Ok(altered)
    }

    /// Deletes a topic and its data. Returns the deleted topic, or None if it did not exist.
    pub fn delete(&self, name: &str) -> anyhow::Result<Option<Arc<Topic>>> {
        let removed = self.topics.write().unwrap_or_else(|p| p.into_inner()).remove(name);
        let Some(topic) = removed else { return Ok(None) };
        self.store().remove(name)?;
        for partition in &topic.partitions {
            let dir = partition_dir(&partition.log_dir(), name, partition.index);
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove partition directory");
            }
        }
        tracing::info!(topic = name, "deleted topic");
        Ok(Some(topic))
    }

    /// Records that every log was fsynced and closed (the next start may skip full recovery),
    /// with the broker epoch of this process's registration when it has one (as Kafka's
    /// `.kafka_cleanshutdown` file carries it).
    pub fn mark_clean_shutdown(&self) -> std::io::Result<()> {
        let dir = self.log_dir.join(".ketch");
        std::fs::create_dir_all(&dir)?;
        let epoch = self.broker_epoch.load(std::sync::atomic::Ordering::Acquire);
        let content = if epoch >= 0 { format!("clean\n{BROKER_EPOCH_KEY}={epoch}\n") } else { "clean\n".to_string() };
        crate::log::partition_log::write_atomically(&dir.join(CLEAN_SHUTDOWN_MARKER), content.as_bytes())
    }

    /// The broker epoch the last clean shutdown recorded (-1 when none: a crash, or no
    /// registration before it).
    pub fn previous_broker_epoch(&self) -> i64 {
        self.previous_broker_epoch
    }

    /// Where the registration's broker epoch is kept for the clean shutdown marker.
    pub fn broker_epoch_cell(&self) -> Arc<std::sync::atomic::AtomicI64> {
        self.broker_epoch.clone()
    }

    /// Every open partition (for background tasks and shutdown).
    pub fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.read().values().flat_map(|t| t.partitions.iter().cloned()).collect()
    }
}

/// For each partition in order, the `directory.id` of the log directory holding it.
/// Where a partition of a stored topic is opened at start.
enum Place {
    /// In this entry of `log.dirs`.
    At(usize),
    /// Nowhere yet (recorded nowhere, found nowhere): created where placement says.
    New,
    /// In an offline or lost directory (its `directory.id`, empty if unknown).
    Offline(String),
}

/// The directory id of every partition of a topic (a single node's: it hosts them all).
fn directory_ids(log_dirs: &LogDirs, partitions: &HostedPartitions) -> Vec<String> {
    assert!(partitions.hosts_all(), "directories are recorded by the node hosting every partition");
    partitions
        .iter()
        .map(|p| log_dirs.index_of_path(&p.log_dir()).map_or_else(String::new, |i| log_dirs.dirs()[i].id.clone()))
        .collect()
}

#[cfg(test)]
#[path = "clean_shutdown_tests.rs"]
mod clean_shutdown_tests;
#[cfg(test)]
#[path = "stray_tests.rs"]
mod stray_tests;
