//! Typed broker and topic configuration, under Apache Kafka's own property names.
//!
//! Owns: parsing a Java-style `.properties` file plus `--override key=value` pairs into a
//! [`BrokerConfig`], and deriving each topic's effective [`TopicConfig`] from the broker defaults
//! (`log.*` names) and the topic's overrides (topic-level names such as `retention.ms`).
//! Invariants: every value is validated at parse time (a bad value is an error naming the key,
//! never a silent default); unknown broker keys are kept and logged, unknown topic keys are
//! rejected (Kafka answers INVALID_CONFIG for them). `int_property` reads the whole-number
//! settings that other parts read for themselves (the node's, the replica fetcher's).

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::error::ConfigError;

mod listeners;
pub use listeners::{
    inter_broker_listener, listener_key, listener_value, mechanism_value, security_protocol, SecurityProtocol,
};

/// Ordered `key -> value` pairs, as read from a properties file or a topic's overrides.
pub type Properties = BTreeMap<String, String>;

/// A whole-number property outside `BrokerConfig` (the node's quorum and replication
/// settings): `default` when missing or blank, else its value, which must lie from `min` to
/// `max`.
pub fn int_property(props: &Properties, key: &str, default: i64, min: i64, max: i64) -> anyhow::Result<i64> {
    match props.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
        None => Ok(default),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => anyhow::bail!("{key}={v}: expected a number from {min} to {max}"),
        },
    }
}

/// Parses Java `.properties` text: `key=value` or `key: value`, `#`/`!` comments, blank lines and
/// trailing-backslash line continuations.
pub fn parse_properties(text: &str) -> Result<Properties, ConfigError> {
    let mut props = Properties::new();
    let mut pending = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!')) {
            continue;
        }
        if let Some(stripped) = line.strip_suffix('\\') {
            pending.push_str(stripped);
            continue;
        }
        pending.push_str(line);
        let entry = std::mem::take(&mut pending);
        let (key, value) = split_property(&entry)?;
        props.insert(key, value);
    }
    if !pending.is_empty() {
        let (key, value) = split_property(&pending)?;
        props.insert(key, value);
    }
    Ok(props)
}

/// Splits one `key=value` (or `key: value`) pair; also used for `--override` arguments.
pub fn split_property(entry: &str) -> Result<(String, String), ConfigError> {
    let at = entry.find(['=', ':']).ok_or_else(|| ConfigError::Syntax(entry.to_string()))?;
    let key = entry[..at].trim();
    if key.is_empty() {
        return Err(ConfigError::Syntax(entry.to_string()));
    }
    Ok((key.to_string(), entry[at + 1..].trim().to_string()))
}

/// How a batch's timestamp is chosen (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// A topic's `compression.type`: `producer` keeps what the producer sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    fn parse(key: &str, value: &str) -> Result<Self, ConfigError> {
        Ok(match value.to_ascii_lowercase().as_str() {
            "producer" => Self::Producer,
            "uncompressed" | "none" => Self::Uncompressed,
            "gzip" => Self::Gzip,
            "snappy" => Self::Snappy,
            "lz4" => Self::Lz4,
            "zstd" => Self::Zstd,
            _ => {
                let reason = "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer";
                return Err(ConfigError::invalid_because(key, value, reason));
            }
        })
    }
}

/// The effective configuration of one topic (all partitions share it).
#[derive(Debug, Clone, PartialEq)]
pub struct TopicConfig {
    pub cleanup_policy: String,
    pub compression_type: CompressionType,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub index_interval_bytes: u64,
    pub max_message_bytes: usize,
    pub message_timestamp_type: TimestampType,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub min_insync_replicas: i32,
    /// How long a tombstone stays after it was compacted once (`delete.retention.ms`).
    pub delete_retention_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    /// `segment.jitter.ms`: a segment rolls up to this much (random per segment) before `segment.ms`.
    pub segment_jitter_ms: i64,
    /// `segment.index.bytes`: a segment rolls once its offset or time index would outgrow this.
    pub segment_index_bytes: u64,
    /// `file.delete.delay.ms`: the files of segments that retention or DeleteRecords remove are
    /// renamed `*.deleted` and removed this much later.
    pub file_delete_delay_ms: i64,
    /// `preallocate`: reserve `segment.bytes` of disk for every new segment.
    pub preallocate: bool,
    /// `compression.gzip.level`, `compression.lz4.level`, `compression.zstd.level`: the levels
    /// of broker-side recompression.
    pub gzip_level: i32,
    pub lz4_level: i32,
    pub zstd_level: i32,
    /// Values set for [`INERT_TOPIC_CONFIGS`] (the rest have their defaults).
    pub inert: Properties,
}

/// Topic configs Kafka keeps that change nothing on a single node without tiered storage, with
/// their defaults: the only replica is always the leader and in sync, so unclean election and
/// replication throttles have nothing to act on (as on a Kafka topic with one replica), and the
/// local retention and remote log settings only act with `remote.storage.enable=true`, which is
/// refused as Kafka refuses it when tiered storage is off. They are validated, kept and
/// described as Kafka does.
pub const INERT_TOPIC_CONFIGS: &[(&str, &str)] = &[
    ("unclean.leader.election.enable", "false"),
    ("leader.replication.throttled.replicas", ""),
    ("follower.replication.throttled.replicas", ""),
    ("local.retention.ms", "-2"),
    ("local.retention.bytes", "-2"),
    ("remote.storage.enable", "false"),
    ("remote.log.copy.disable", "false"),
    ("remote.log.delete.on.disable", "false"),
];

/// Every topic-level config name, as DescribeConfigs and CreateTopics list them: those with a
/// broker-level default (`TOPIC_CONFIG_KEYS`), then the inert ones Kafka has no server synonym
/// for (the replication throttles and the remote log settings).
pub fn topic_config_names() -> impl Iterator<Item = &'static str> {
    let with_default = |name: &str| TOPIC_CONFIG_KEYS.iter().any(|(topic_key, _)| *topic_key == name);
    TOPIC_CONFIG_KEYS
        .iter()
        .map(|(topic_key, _)| *topic_key)
        .chain(INERT_TOPIC_CONFIGS.iter().map(|(name, _)| *name).filter(move |name| !with_default(name)))
}

/// Topic-level config names Ketch knows, with the broker property each one defaults from.
pub const TOPIC_CONFIG_KEYS: &[(&str, &str)] = &[
    ("cleanup.policy", "log.cleanup.policy"),
    ("compression.type", "compression.type"),
    ("retention.ms", "log.retention.ms"),
    ("retention.bytes", "log.retention.bytes"),
    ("segment.bytes", "log.segment.bytes"),
    ("segment.ms", "log.roll.ms"),
    ("index.interval.bytes", "log.index.interval.bytes"),
    ("max.message.bytes", "message.max.bytes"),
    ("message.timestamp.type", "log.message.timestamp.type"),
    ("message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms"),
    ("message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"),
    ("flush.messages", "log.flush.interval.messages"),
    ("flush.ms", "log.flush.interval.ms"),
    ("min.insync.replicas", "min.insync.replicas"),
    ("delete.retention.ms", "log.cleaner.delete.retention.ms"),
    ("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
    ("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
    ("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
    ("segment.jitter.ms", "log.roll.jitter.ms"),
    ("segment.index.bytes", "log.index.size.max.bytes"),
    ("file.delete.delay.ms", "log.segment.delete.delay.ms"),
    ("preallocate", "log.preallocate"),
    ("compression.gzip.level", "compression.gzip.level"),
    ("compression.lz4.level", "compression.lz4.level"),
    ("compression.zstd.level", "compression.zstd.level"),
    ("unclean.leader.election.enable", "unclean.leader.election.enable"),
    ("local.retention.ms", "log.local.retention.ms"),
    ("local.retention.bytes", "log.local.retention.bytes"),
];

impl TopicConfig {
    /// `cleanup.policy` includes `compact`: the cleaner keeps the latest record per key.
    pub fn compacts(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p == "compact")
    }

    /// `cleanup.policy` includes `delete`: retention by time and size applies.
    pub fn deletes(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p == "delete")
    }

    /// Applies topic-level overrides on top of `self` (the broker defaults).
    pub fn with_overrides(&self, overrides: &Properties) -> Result<TopicConfig, ConfigError> {
        let mut config = self.clone();
        for (key, value) in overrides {
            config.set(key, value)?;
        }
        Ok(config)
    }

    /// The value of a topic-level key, as Kafka would print it.
    pub fn value_of(&self, key: &str) -> String {
        match key {
            "cleanup.policy" => self.cleanup_policy.clone(),
            "compression.type" => match self.compression_type {
                CompressionType::Producer => "producer",
                CompressionType::Uncompressed => "uncompressed",
                CompressionType::Gzip => "gzip",
                CompressionType::Snappy => "snappy",
                CompressionType::Lz4 => "lz4",
                CompressionType::Zstd => "zstd",
            }
            .to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "message.timestamp.type" => match self.message_timestamp_type {
                TimestampType::CreateTime => "CreateTime",
                TimestampType::LogAppendTime => "LogAppendTime",
            }
            .to_string(),
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms.to_string(),
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "min.cleanable.dirty.ratio" => format!("{:?}", self.min_cleanable_dirty_ratio),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "segment.jitter.ms" => self.segment_jitter_ms.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "file.delete.delay.ms" => self.file_delete_delay_ms.to_string(),
            "preallocate" => self.preallocate.to_string(),
            "compression.gzip.level" => self.gzip_level.to_string(),
            "compression.lz4.level" => self.lz4_level.to_string(),
            "compression.zstd.level" => self.zstd_level.to_string(),
            _ => match INERT_TOPIC_CONFIGS.iter().find(|(name, _)| *name == key) {
                Some((name, default)) => self.inert.get(*name).map_or(default.to_string(), String::clone),
                None => String::new(),
            },
        }
    }

    /// Sets one topic-level key; unknown keys are an error.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        match key {
            "cleanup.policy" => {
                for policy in value.split(',') {
                    if !matches!(policy.trim(), "delete" | "compact") {
                        // Kafka's ValidList names the element it refuses.
                        return Err(ConfigError::invalid_because(
                            key,
                            policy.trim(),
                            "String must be one of: compact, delete",
                        ));
                    }
                }
                self.cleanup_policy = value.split(',').map(str::trim).collect::<Vec<_>>().join(",");
            }
            "compression.type" => self.compression_type = CompressionType::parse(key, value)?,
            "retention.ms" => self.retention_ms = parse_i64_min(key, value, -1)?,
            "retention.bytes" => self.retention_bytes = parse_i64_min(key, value, -1)?,
            "segment.bytes" => self.segment_bytes = parse_i64_min(key, value, 14)? as u64,
            "segment.ms" => self.segment_ms = parse_i64_min(key, value, 1)?,
            "index.interval.bytes" => self.index_interval_bytes = parse_i64_min(key, value, 0)? as u64,
            "max.message.bytes" => self.max_message_bytes = parse_i64_min(key, value, 0)? as usize,
            "message.timestamp.type" => {
                self.message_timestamp_type = match value {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => {
                        let reason = "String must be one of: CreateTime, LogAppendTime";
                        return Err(ConfigError::invalid_because(key, value, reason));
                    }
                }
            }
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms = parse_i64_min(key, value, 0)?,
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms = parse_i64_min(key, value, 0)?,
            "flush.messages" => self.flush_messages = parse_i64_min(key, value, 1)?,
            "flush.ms" => self.flush_ms = parse_i64_min(key, value, 0)?,
            "min.insync.replicas" => self.min_insync_replicas = parse_i64_min(key, value, 1)? as i32,
            "delete.retention.ms" => self.delete_retention_ms = parse_i64_min(key, value, 0)?,
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = match value.trim().parse::<f64>() {
                    Ok(v) if (0.0..=1.0).contains(&v) => v,
                    Ok(_) => return Err(ConfigError::invalid_because(key, value, "Value must be between 0 and 1")),
                    Err(_) => return Err(ConfigError::invalid_because(key, value, "Not a number of type DOUBLE")),
                }
            }
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = parse_i64_min(key, value, 0)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = parse_i64_min(key, value, 1)?,
            "segment.jitter.ms" => self.segment_jitter_ms = parse_i64_min(key, value, 0)?,
            "segment.index.bytes" => self.segment_index_bytes = parse_i32_range(key, value, 4, i32::MAX)? as u64,
            "file.delete.delay.ms" => self.file_delete_delay_ms = parse_i64_min(key, value, 0)?,
            "preallocate" => self.preallocate = parse_bool(key, value)?,
            "compression.gzip.level" => {
                self.gzip_level = match value.trim().parse::<i32>() {
                    Ok(level) if level == -1 || (1..=9).contains(&level) => level,
                    Ok(_) => {
                        return Err(ConfigError::invalid_because(
                            key,
                            value,
                            "Value must be between 1 and 9 or equal to -1",
                        ))
                    }
                    Err(_) => return Err(ConfigError::invalid_because(key, value, "Not a number of type INT")),
                }
            }
            "compression.lz4.level" => self.lz4_level = parse_i32_range(key, value, 1, 17)?,
            "compression.zstd.level" => self.zstd_level = parse_i32_range(key, value, -131_072, 22)?,
            _ => {
                let Some((name, _)) = INERT_TOPIC_CONFIGS.iter().find(|(name, _)| *name == key) else {
                    return Err(ConfigError::UnknownKey(key.to_string()));
                };
                self.inert.insert(name.to_string(), validate_inert(key, value)?);
            }
        }
        Ok(())
    }
}

/// The broker's configuration. Its `Debug` hides the values of password configs
/// (`security::redact`).
#[derive(Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    pub cluster_id: String,
    /// `listeners`: where to bind (host may be empty for all interfaces; port 0 = ephemeral).
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`; when absent the bound listener addresses are advertised.
    pub advertised_listeners: Vec<Listener>,
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub socket_request_max_bytes: usize,
    /// `queued.max.requests` (500): whole requests read ahead of their turn, across every
    /// connection (`server::request_queue`).
    pub queued_max_requests: usize,
    /// `queued.max.request.bytes` (-1: `None`): the memory pool requests are read into; when set,
    /// at least `socket.request.max.bytes`, as Kafka requires.
    pub queued_max_request_bytes: Option<usize>,
    /// `socket.send.buffer.bytes` / `socket.receive.buffer.bytes`: SO_SNDBUF / SO_RCVBUF of
    /// client connections (100 KiB / OS default); `None` (-1) leaves the OS default.
    pub socket_send_buffer_bytes: Option<usize>,
    pub socket_receive_buffer_bytes: Option<usize>,
    pub log_retention_check_interval_ms: u64,
    /// `producer.id.expiration.ms`: idle idempotent producers are forgotten after this.
    pub producer_id_expiration_ms: i64,
    /// `offsets.retention.check.interval.ms`
    pub offsets_retention_check_interval_ms: u64,
    /// `fetch.max.bytes`: the most one fetch response carries, whatever the client asks.
    pub fetch_max_bytes: usize,
    pub max_incremental_fetch_session_cache_slots: usize,
    pub min_incremental_fetch_session_eviction_ms: u64,
    /// Ketch's own knob (no Kafka equivalent): fsync before acknowledging an acks=all write.
    pub ketch_acks_all_fsync: bool,
    /// `log.cleaner.enable`: run the compaction thread for `cleanup.policy=compact` topics.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: pause between cleaning passes over all partitions.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: memory bound of the cleaner's key -> offset map.
    pub log_cleaner_dedupe_buffer_size: usize,
    /// Defaults every topic starts from.
    pub topic_defaults: TopicConfig,
    /// Every property given, for DescribeConfigs and logging.
    pub properties: Properties,
}

impl std::fmt::Debug for BrokerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field, by name: a new field does not compile until it is printed here too.
        let BrokerConfig {
            node_id,
            cluster_id,
            listeners,
            advertised_listeners,
            log_dirs,
            num_partitions,
            default_replication_factor,
            auto_create_topics_enable,
            delete_topic_enable,
            socket_request_max_bytes,
            queued_max_requests,
            queued_max_request_bytes,
            socket_send_buffer_bytes,
            socket_receive_buffer_bytes,
            log_retention_check_interval_ms,
            producer_id_expiration_ms,
            offsets_retention_check_interval_ms,
            fetch_max_bytes,
            max_incremental_fetch_session_cache_slots,
            min_incremental_fetch_session_eviction_ms,
            ketch_acks_all_fsync,
            log_cleaner_enable,
            log_cleaner_backoff_ms,
            log_cleaner_dedupe_buffer_size,
            topic_defaults,
            properties,
        } = self;
        f.debug_struct("BrokerConfig")
            .field("node_id", node_id)
            .field("cluster_id", cluster_id)
            .field("listeners", listeners)
            .field("advertised_listeners", advertised_listeners)
            .field("log_dirs", log_dirs)
            .field("num_partitions", num_partitions)
            .field("default_replication_factor", default_replication_factor)
            .field("auto_create_topics_enable", auto_create_topics_enable)
            .field("delete_topic_enable", delete_topic_enable)
            .field("socket_request_max_bytes", socket_request_max_bytes)
            .field("queued_max_requests", queued_max_requests)
            .field("queued_max_request_bytes", queued_max_request_bytes)
            .field("socket_send_buffer_bytes", socket_send_buffer_bytes)
            .field("socket_receive_buffer_bytes", socket_receive_buffer_bytes)
            .field("log_retention_check_interval_ms", log_retention_check_interval_ms)
            .field("producer_id_expiration_ms", producer_id_expiration_ms)
            .field("offsets_retention_check_interval_ms", offsets_retention_check_interval_ms)
            .field("fetch_max_bytes", fetch_max_bytes)
            .field("max_incremental_fetch_session_cache_slots", max_incremental_fetch_session_cache_slots)
            .field("min_incremental_fetch_session_eviction_ms", min_incremental_fetch_session_eviction_ms)
            .field("ketch_acks_all_fsync", ketch_acks_all_fsync)
            .field("log_cleaner_enable", log_cleaner_enable)
            .field("log_cleaner_backoff_ms", log_cleaner_backoff_ms)
            .field("log_cleaner_dedupe_buffer_size", log_cleaner_dedupe_buffer_size)
            .field("topic_defaults", topic_defaults)
            .field("properties", &crate::security::redact::Configs(properties))
            .finish()
    }
}

/// One `NAME://host:port` entry of `listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Listener {
    pub fn parse_list(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
        let mut out = Vec::new();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, rest) = item.split_once("://").ok_or_else(|| ConfigError::invalid(key, value))?;
            let at = rest.rfind(':').ok_or_else(|| ConfigError::invalid(key, value))?;
            let host = rest[..at].trim_start_matches('[').trim_end_matches(']');
            let port = rest[at + 1..].parse::<u16>().map_err(|_| ConfigError::invalid(key, value))?;
            out.push(Listener { name: name.to_string(), host: host.to_string(), port });
        }
        if out.is_empty() {
            return Err(ConfigError::invalid(key, value));
        }
        Ok(out)
    }
}

const MS_PER_HOUR: i64 = 3_600_000;

impl BrokerConfig {
    /// Builds the config from properties (file contents merged with overrides).
    pub fn from_properties(props: Properties) -> Result<BrokerConfig, ConfigError> {
        let get = |k: &str| props.get(k).map(String::as_str);
        let int = |k: &str, default: i64, min: i64| -> Result<i64, ConfigError> {
            get(k).map_or(Ok(default), |v| parse_i64_min(k, v, min))
        };
        let boolean = |k: &str, default: bool| -> Result<bool, ConfigError> {
            match get(k) {
                None => Ok(default),
                Some("true") => Ok(true),
                Some("false") => Ok(false),
                Some(v) => Err(ConfigError::invalid(k, v)),
            }
        };
        let ms_with_units = |ms: &str, minutes: &str, hours: &str, default_ms: i64| {
            if let Some(v) = get(ms) {
                return parse_i64_min(ms, v, -1);
            }
            if let Some(v) = get(minutes) {
                return Ok(parse_i64_min(minutes, v, -1)?.saturating_mul(60_000));
            }
            if let Some(v) = get(hours) {
                return Ok(parse_i64_min(hours, v, -1)?.saturating_mul(MS_PER_HOUR));
            }
            Ok(default_ms)
        };

        let listeners_value = get("listeners").unwrap_or("PLAINTEXT://:9092");
        let listeners = Listener::parse_list("listeners", listeners_value)?;
        let advertised_listeners = match get("advertised.listeners") {
            Some(v) => Listener::parse_list("advertised.listeners", v)?,
            None => Vec::new(),
        };
        // Kafka's `log.dirs` (else `log.dir`): a comma-separated list, blanks around entries and
        // empty entries ignored. Duplicates are refused when the directories are opened
        // (`metadata::log_dirs`), where they can be compared canonically.
        let (dirs_key, dirs_value) = match get("log.dirs") {
            Some(v) => ("log.dirs", v),
            None => ("log.dir", get("log.dir").unwrap_or("./data")),
        };
        let log_dirs: Vec<PathBuf> =
            dirs_value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(PathBuf::from).collect();
        if log_dirs.is_empty() {
            return Err(ConfigError::invalid_because(dirs_key, dirs_value, "no directory given"));
        }

        let mut topic_defaults = TopicConfig {
            cleanup_policy: "delete".into(),
            compression_type: CompressionType::Producer,
            retention_ms: ms_with_units(
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
                168 * MS_PER_HOUR,
            )?,
            retention_bytes: int("log.retention.bytes", -1, -1)?,
            segment_bytes: int("log.segment.bytes", 1 << 30, 14)? as u64,
            segment_ms: ms_with_units("log.roll.ms", "log.roll.minutes", "log.roll.hours", 168 * MS_PER_HOUR)?,
            index_interval_bytes: int("log.index.interval.bytes", 4096, 0)? as u64,
            max_message_bytes: int("message.max.bytes", 1_048_588, 0)? as usize,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: int("log.message.timestamp.before.max.ms", i64::MAX, 0)?,
            message_timestamp_after_max_ms: int("log.message.timestamp.after.max.ms", MS_PER_HOUR, 0)?,
            flush_messages: int("log.flush.interval.messages", i64::MAX, 1)?,
            // Kafka: without log.flush.interval.ms, topics default to log.flush.scheduler.interval.ms.
            flush_ms: int("log.flush.interval.ms", int("log.flush.scheduler.interval.ms", i64::MAX, 0)?, 0)?,
            min_insync_replicas: int("min.insync.replicas", 1, 1)? as i32,
            delete_retention_ms: int("log.cleaner.delete.retention.ms", 86_400_000, 0)?,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: int("log.cleaner.min.compaction.lag.ms", 0, 0)?,
            max_compaction_lag_ms: int("log.cleaner.max.compaction.lag.ms", i64::MAX, 1)?,
            segment_jitter_ms: match get("log.roll.jitter.ms") {
                Some(v) => parse_i64_min("log.roll.jitter.ms", v, 0)?,
                None => int("log.roll.jitter.hours", 0, 0)?.saturating_mul(MS_PER_HOUR),
            },
            segment_index_bytes: 10_485_760,
            file_delete_delay_ms: int("log.segment.delete.delay.ms", 60_000, 0)?,
            preallocate: false,
            gzip_level: -1,
            lz4_level: 9,
            zstd_level: 3,
            inert: Properties::new(),
        };
        // Broker-level names whose topic-level checks (ranges, booleans) apply as they are.
        for (topic_key, broker_key) in TOPIC_CONFIG_KEYS {
            let checked_here = matches!(
                *topic_key,
                "segment.index.bytes"
                    | "preallocate"
                    | "compression.gzip.level"
                    | "compression.lz4.level"
                    | "compression.zstd.level"
                    | "unclean.leader.election.enable"
                    | "local.retention.ms"
                    | "local.retention.bytes"
            );
            if let (true, Some(v)) = (checked_here, get(broker_key)) {
                topic_defaults.set(topic_key, v).map_err(|e| match e {
                    ConfigError::Invalid { value, reason, .. } => {
                        ConfigError::Invalid { key: broker_key.to_string(), value, reason }
                    }
                    other => other,
                })?;
            }
        }
        if let Some(v) = get("log.cleaner.min.cleanable.ratio") {
            topic_defaults.set("min.cleanable.dirty.ratio", v)?;
        }
        if let Some(v) = get("log.cleanup.policy") {
            topic_defaults.set("cleanup.policy", v)?;
        }
        if let Some(v) = get("compression.type") {
            topic_defaults.set("compression.type", v)?;
        }
        if let Some(v) = get("log.message.timestamp.type") {
            topic_defaults.set("message.timestamp.type", v)?;
        }

        let socket_request_max_bytes = int("socket.request.max.bytes", 104_857_600, 1024)? as usize;
        let queued_max_request_bytes =
            usize::try_from(int("queued.max.request.bytes", -1, i64::MIN)?).ok().filter(|&b| b > 0);
        if queued_max_request_bytes.is_some_and(|b| b < socket_request_max_bytes) {
            // Kafka's KafkaConfig.validateValues.
            return Err(ConfigError::Refused(
                "requirement failed: queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
                    .to_string(),
            ));
        }
        let config = BrokerConfig {
            node_id: int("node.id", int("broker.id", 1, 0)?, 0)? as i32,
            cluster_id: get("ketch.cluster.id").unwrap_or("").to_string(),
            listeners,
            advertised_listeners,
            log_dirs,
            num_partitions: int("num.partitions", 1, 1)? as i32,
            default_replication_factor: int("default.replication.factor", 1, 1)? as i16,
            auto_create_topics_enable: boolean("auto.create.topics.enable", true)?,
            delete_topic_enable: boolean("delete.topic.enable", true)?,
            socket_request_max_bytes,
            queued_max_requests: int("queued.max.requests", 500, 1)?.min(i32::MAX as i64) as usize,
            queued_max_request_bytes,
            socket_send_buffer_bytes: usize::try_from(int("socket.send.buffer.bytes", 102_400, -1)?).ok(),
            // -1 (OS autotuning), not Kafka's 100 KiB: a 100 KiB window held 384 KiB produce
            // requests to 60% of the rate over loopback.
            socket_receive_buffer_bytes: usize::try_from(int("socket.receive.buffer.bytes", -1, -1)?).ok(),
            log_retention_check_interval_ms: int("log.retention.check.interval.ms", 300_000, 1)? as u64,
            producer_id_expiration_ms: int("producer.id.expiration.ms", 86_400_000, 1)?,
            offsets_retention_check_interval_ms: int("offsets.retention.check.interval.ms", 600_000, 1)? as u64,
            fetch_max_bytes: int("fetch.max.bytes", 57_671_680, 1024)? as usize,
            max_incremental_fetch_session_cache_slots: int("max.incremental.fetch.session.cache.slots", 1000, 0)?
                as usize,
            min_incremental_fetch_session_eviction_ms: int("min.incremental.fetch.session.eviction.ms", 120_000, 0)?
                as u64,
            ketch_acks_all_fsync: boolean("ketch.acks.all.fsync", true)?,
            log_cleaner_enable: boolean("log.cleaner.enable", true)?,
            log_cleaner_backoff_ms: int("log.cleaner.backoff.ms", 15_000, 0)? as u64,
            log_cleaner_dedupe_buffer_size: int("log.cleaner.dedupe.buffer.size", 134_217_728, 1024)? as usize,
            topic_defaults,
            properties: props,
        };
        Ok(config)
    }

    /// The first entry of `log.dirs`: the metadata directory, holding Ketch's own bookkeeping
    /// (`.ketch/`: topic store, dynamic configs, producer ids, clean-shutdown marker), as
    /// Kafka's `metadata.log.dir` defaults to the first log directory. Partitions may be in
    /// any entry (see `metadata::log_dirs`).
    pub fn log_dir(&self) -> &PathBuf {
        &self.log_dirs[0]
    }
}

/// Checks a value for one of [`INERT_TOPIC_CONFIGS`] as Kafka does; returns it as Kafka prints it.
fn validate_inert(key: &str, value: &str) -> Result<String, ConfigError> {
    match key {
        "local.retention.ms" | "local.retention.bytes" => Ok(parse_i64_min(key, value, -2)?.to_string()),
        "leader.replication.throttled.replicas" | "follower.replication.throttled.replicas" => {
            let items: Vec<&str> = value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            let replica = |item: &str| {
                item.split_once(':')
                    .is_some_and(|(p, b)| p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok())
            };
            if items == ["*"] || items.iter().all(|item| replica(item)) {
                Ok(items.join(","))
            } else {
                Err(ConfigError::invalid_because(
                    key,
                    value,
                    &format!(
                        "{key} must be the literal '*' or a list of replicas in the following format: \
                         [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                    ),
                ))
            }
        }
        "remote.storage.enable" if parse_bool(key, value)? => Err(ConfigError::Refused(
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log \
             storage."
                .into(),
        )),
        _ => Ok(parse_bool(key, value)?.to_string()),
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError::invalid_because(key, value, "Expected value to be either true or false")),
    }
}

/// Kafka's `Range.between` on an INT config.
fn parse_i32_range(key: &str, value: &str, min: i32, max: i32) -> Result<i32, ConfigError> {
    match value.trim().parse::<i32>() {
        Ok(v) if v < min => Err(ConfigError::invalid_because(key, value, &format!("Value must be at least {min}"))),
        Ok(v) if v > max => Err(ConfigError::invalid_because(key, value, &format!("Value must be no more than {max}"))),
        Ok(v) => Ok(v),
        Err(_) => Err(ConfigError::invalid_because(key, value, "Not a number of type INT")),
    }
}

fn parse_i64_min(key: &str, value: &str, min: i64) -> Result<i64, ConfigError> {
    match value.trim().parse::<i64>() {
        Ok(v) if v >= min => Ok(v),
        Ok(_) => Err(ConfigError::invalid_because(key, value, &format!("Value must be at least {min}"))),
        Err(_) => Err(ConfigError::invalid_because(key, value, "Not a number of type LONG")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_file_syntax() {
        let props =
            parse_properties("# c\nnum.partitions=3\nlog.dirs : /tmp/x\nlisteners=PLAINTEXT://a:1,\\\n  X://b:2\n")
                .unwrap();
        let config = BrokerConfig::from_properties(props).unwrap();
        assert_eq!(config.num_partitions, 3);
        assert_eq!(config.log_dir(), &PathBuf::from("/tmp/x"));
        assert_eq!(config.listeners.len(), 2);
        assert_eq!(config.listeners[1].port, 2);
    }

    #[test]
    fn log_dirs_list_and_log_dir_fallback() {
        let with = |k: &str, v: &str| BrokerConfig::from_properties([(k.to_string(), v.to_string())].into());
        let c = with("log.dirs", " /a , /b,,/c ").unwrap();
        assert_eq!(c.log_dirs, ["/a", "/b", "/c"].map(PathBuf::from));
        assert_eq!(c.log_dir(), &PathBuf::from("/a"), "the first is the metadata directory");
        assert_eq!(with("log.dir", "/x,/y").unwrap().log_dirs.len(), 2);
        assert!(with("log.dirs", " , ").is_err());
    }

    #[test]
    fn defaults_match_kafka() {
        let config = BrokerConfig::from_properties(Properties::new()).unwrap();
        assert_eq!(config.topic_defaults.retention_ms, 7 * 24 * 3_600_000);
        assert_eq!(config.topic_defaults.max_message_bytes, 1_048_588);
        assert_eq!(config.listeners[0].port, 9092);
        assert!(config.auto_create_topics_enable);
    }

    #[test]
    fn kafka_topic_configs_default_and_validate_as_kafka_does() {
        let mut c = BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults;
        for (key, default) in [
            ("segment.jitter.ms", "0"),
            ("segment.index.bytes", "10485760"),
            ("file.delete.delay.ms", "60000"),
            ("preallocate", "false"),
            ("compression.gzip.level", "-1"),
            ("compression.lz4.level", "9"),
            ("compression.zstd.level", "3"),
            ("unclean.leader.election.enable", "false"),
            ("local.retention.ms", "-2"),
            ("local.retention.bytes", "-2"),
            ("remote.storage.enable", "false"),
            ("leader.replication.throttled.replicas", ""),
        ] {
            assert_eq!(c.value_of(key), default, "{key}");
        }
        assert_eq!(topic_config_names().count(), 33, "Kafka 4.1 lists 33 topic configs");
        let error = |c: &mut TopicConfig, k: &str, v: &str| c.set(k, v).unwrap_err().to_string();
        assert_eq!(
            error(&mut c, "compression.gzip.level", "0"),
            "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
        );
        assert_eq!(
            error(&mut c, "compression.lz4.level", "18"),
            "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"
        );
        assert_eq!(
            error(&mut c, "segment.index.bytes", "3"),
            "Invalid value 3 for configuration segment.index.bytes: Value must be at least 4"
        );
        assert!(error(&mut c, "remote.storage.enable", "true").starts_with("Tiered Storage functionality is disabled"));
        assert!(c.set("preallocate", "yes").is_err());
        assert!(c.set("follower.replication.throttled.replicas", "0-1").is_err());
        c.set("remote.storage.enable", "false").unwrap();
        c.set("leader.replication.throttled.replicas", " 0:1, 1:1").unwrap();
        c.set("follower.replication.throttled.replicas", "*").unwrap();
        c.set("unclean.leader.election.enable", "TRUE").unwrap();
        assert_eq!(c.value_of("leader.replication.throttled.replicas"), "0:1,1:1");
        assert_eq!(c.value_of("unclean.leader.election.enable"), "true");
        // Broker-level names set the defaults topics start from.
        let mut props = Properties::new();
        for (k, v) in [("log.roll.jitter.hours", "1"), ("compression.zstd.level", "7"), ("log.preallocate", "true")] {
            props.insert(k.into(), v.into());
        }
        let d = BrokerConfig::from_properties(props.clone()).unwrap().topic_defaults;
        assert_eq!((d.segment_jitter_ms, d.zstd_level, d.preallocate), (3_600_000, 7, true));
        props.insert("compression.lz4.level".into(), "99".into());
        let e = BrokerConfig::from_properties(props).unwrap_err().to_string();
        assert!(e.contains("configuration compression.lz4.level: Value must be no more than 17"), "{e}");
    }

    #[test]
    fn bad_values_are_errors() {
        let mut props = Properties::new();
        props.insert("num.partitions".into(), "zero".into());
        assert!(BrokerConfig::from_properties(props).is_err());
        let defaults = BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults;
        let mut overrides = Properties::new();
        overrides.insert("no.such.key".into(), "1".into());
        assert!(defaults.with_overrides(&overrides).is_err());
        overrides.clear();
        overrides.insert("retention.hours".into(), "1".into());
        assert!(defaults.with_overrides(&overrides).is_err());
    }
}
