//! The table of broker configs Ketch describes: Kafka's name, type, default, whether Ketch
//! updates it dynamically, and Kafka's documentation text, plus Kafka's broker synonyms
//! (`log.retention.ms` / `.minutes` / `.hours`, `log.roll.ms` / `.hours`).
//!
//! Owns: which broker configs exist for DescribeConfigs and which AlterConfigs may change.
//! Invariants: a config is `dynamic` only if Ketch applies a change to it live (today: the
//! broker-level names of topic configs, see `TOPIC_CONFIG_KEYS`, and `producer.id.expiration.ms`);
//! every dynamic config is dynamic in Apache Kafka too; defaults are the values Ketch really uses.
//! A topic config added to `TOPIC_CONFIG_KEYS` without a row here still becomes dynamic (see
//! [`lookup`]), typed and defaulted from the topic side.

use std::borrow::Cow;

use crate::config::{BrokerConfig, Properties, TOPIC_CONFIG_KEYS};

/// Kafka's `ConfigDef.Type` as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Bool = 1,
    Str = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

#[derive(Debug, Clone)]
pub struct Def {
    pub name: Cow<'static, str>,
    pub kind: Type,
    pub default: Option<Cow<'static, str>>,
    pub dynamic: bool,
    pub doc: Option<&'static str>,
}

const fn def(name: &'static str, kind: Type, default: Option<&'static str>, dynamic: bool, doc: &'static str) -> Row {
    Row { name, kind, default, dynamic, doc }
}

struct Row {
    name: &'static str,
    kind: Type,
    default: Option<&'static str>,
    dynamic: bool,
    doc: &'static str,
}

use Type::*;

/// Documentation strings are Apache Kafka 4.1's (`DescribeConfigs` with documentation).
#[rustfmt::skip]
static ROWS: &[Row] = &[
    def("advertised.listeners", Str, None, false, "Specifies the listener addresses that the Kafka brokers will advertise to clients and other brokers. The config is useful where the actual listener configuration <code>listeners</code> does not represent the addresses that clients should use to connect, such as in cloud environments. The addresses are published to and managed by the controller, the brokers pull these data from the controller as needed. In IaaS environments, this may need to be different from the interface to which the broker binds. If this is not set, the value for <code>listeners</code> will be used. Unlike <code>listeners</code>, it is not valid to advertise the 0.0.0.0 meta-address.\n Also unlike <code>listeners</code>, there can be duplicated ports in this property, so that one listener can be configured to advertise another listener's address. This can be useful in some cases where external load balancers are used."),
    def("auto.create.topics.enable", Bool, Some("true"), false, "Enable auto creation of topic on the server."),
    def("broker.id", Int, Some("1"), false, "The broker id for this server."),
    def("compression.type", Str, Some("producer"), true, "Specify the final compression type for a given topic. This configuration accepts the standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts 'uncompressed' which is equivalent to no compression; and 'producer' which means retain the original compression codec set by the producer."),
    def("default.replication.factor", Int, Some("1"), false, "The replication factor for automatically created topics, and for topics created with -1 as the replication factor"),
    def("delete.topic.enable", Bool, Some("true"), false, "When set to true, topics can be deleted by the admin client. When set to false, deletion requests will be explicitly rejected by the broker."),
    def("fetch.max.bytes", Int, Some("57671680"), false, "The maximum number of bytes we will return for a fetch request. Must be at least 1024."),
    def("group.initial.rebalance.delay.ms", Int, Some("3000"), false, "The amount of time the group coordinator will wait for more consumers to join a new group before performing the first rebalance. A longer delay means potentially fewer rebalances, but increases the time until processing begins."),
    def("group.max.session.timeout.ms", Int, Some("1800000"), false, "The maximum allowed session timeout for registered consumers. Longer timeouts give consumers more time to process messages in between heartbeats at the cost of a longer time to detect failures."),
    def("group.max.size", Int, Some("2147483647"), false, "The maximum number of consumers that a single consumer group can accommodate."),
    def("group.min.session.timeout.ms", Int, Some("6000"), false, "The minimum allowed session timeout for registered consumers. Shorter timeouts result in quicker failure detection at the cost of more frequent consumer heartbeating, which can overwhelm broker resources."),
    def("listeners", Str, Some("PLAINTEXT://:9092"), false, "Listener List - Comma-separated list of URIs we will listen on and the listener names. If the listener name is not a security protocol, <code>listener.security.protocol.map</code> must also be set.\n Listener names and port numbers must be unique unless one listener is an IPv4 address and the other listener is an IPv6 address (for the same port).\n Specify hostname as 0.0.0.0 to bind to all interfaces.\n Leave hostname empty to bind to default interface.\n Examples of legal listener lists:\n <code>PLAINTEXT://myhost:9092,SSL://:9091</code>\n <code>CLIENT://0.0.0.0:9092,REPLICATION://localhost:9093</code>\n <code>PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092</code>\n"),
    def("log.cleanup.policy", List, Some("delete"), true, "The default cleanup policy for segments beyond the retention window. A comma separated list of valid policies."),
    def("log.dir", Str, Some("./data"), false, "The directory in which the log data is kept (supplemental for log.dirs property)"),
    def("log.dirs", Str, None, false, "A comma-separated list of the directories where the log data is stored. If not set, the value in log.dir is used."),
    def("log.flush.interval.messages", Long, Some("9223372036854775807"), true, "The number of messages accumulated on a log partition before messages are flushed to disk."),
    def("log.flush.interval.ms", Long, None, true, "The maximum time in ms that a message in any topic is kept in memory before flushed to disk. If not set, the value in log.flush.scheduler.interval.ms is used"),
    def("log.flush.scheduler.interval.ms", Long, Some("9223372036854775807"), false, "The frequency in ms that the log flusher checks whether any log needs to be flushed to disk"),
    def("log.index.interval.bytes", Int, Some("4096"), true, "The interval with which we add an entry to the offset index."),
    def("log.message.timestamp.after.max.ms", Long, Some("3600000"), true, "This configuration sets the allowable timestamp difference between the message timestamp and the broker's timestamp. The message timestamp can be later than or equal to the broker's timestamp, with the maximum allowable difference determined by the value set in this configuration. If log.message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds this specified threshold. This configuration is ignored if log.message.timestamp.type=LogAppendTime."),
    def("log.message.timestamp.before.max.ms", Long, Some("9223372036854775807"), true, "This configuration sets the allowable timestamp difference between the broker's timestamp and the message timestamp. The message timestamp can be earlier than or equal to the broker's timestamp, with the maximum allowable difference determined by the value set in this configuration. If log.message.timestamp.type=CreateTime, the message will be rejected if the difference in timestamps exceeds this specified threshold. This configuration is ignored if log.message.timestamp.type=LogAppendTime."),
    def("log.message.timestamp.type", Str, Some("CreateTime"), true, "Define whether the timestamp in the message is message create time or log append time. The value should be either <code>CreateTime</code> or <code>LogAppendTime</code>."),
    def("log.retention.bytes", Long, Some("-1"), true, "The maximum size of the log before deleting it"),
    def("log.retention.check.interval.ms", Long, Some("300000"), false, "The frequency in milliseconds that the log cleaner checks whether any log is eligible for deletion"),
    def("log.retention.hours", Int, Some("168"), false, "The number of hours to keep a log file before deleting it (in hours), tertiary to log.retention.ms property"),
    def("log.retention.minutes", Int, None, false, "The number of minutes to keep a log file before deleting it (in minutes), secondary to log.retention.ms property. If not set, the value in log.retention.hours is used"),
    def("log.retention.ms", Long, None, true, "The number of milliseconds to keep a log file before deleting it (in milliseconds), If not set, the value in log.retention.minutes is used. If set to -1, no time limit is applied."),
    def("log.roll.hours", Int, Some("168"), false, "The maximum time before a new log segment is rolled out (in hours), secondary to log.roll.ms property"),
    def("log.roll.jitter.hours", Int, Some("0"), false, "The maximum jitter to subtract from logRollTimeMillis (in hours), secondary to log.roll.jitter.ms property"),
    def("log.roll.jitter.ms", Long, None, true, "The maximum jitter to subtract from logRollTimeMillis (in milliseconds). If not set, the value in log.roll.jitter.hours is used"),
    def("log.roll.ms", Long, None, true, "The maximum time before a new log segment is rolled out (in milliseconds). If not set, the value in log.roll.hours is used"),
    def("log.segment.bytes", Int, Some("1073741824"), true, "The maximum size of a single log file"),
    def("max.incremental.fetch.session.cache.slots", Int, Some("1000"), false, "The maximum number of total incremental fetch sessions that we will maintain. FetchSessionCache is sharded into 8 shards and the limit is equally divided among all shards. Sessions are allocated to each shard in round-robin. Only entries within a shard are considered eligible for eviction."),
    def("message.max.bytes", Int, Some("1048588"), true, "The largest record batch size allowed by Kafka (after compression if compression is enabled).This can be set per topic with the topic level <code>max.message.bytes</code> config."),
    def("min.insync.replicas", Int, Some("1"), true, "Specifies the <i>minimum</i> number of in-sync replicas (including the leader) required for a write to succeed when a producer sets <code>acks</code> to \"all\" (or \"-1\"). In the <code>acks=all</code> case, every in-sync replica must acknowledge a write for it to be considered successful. E.g., if a topic has <code>replication.factor</code> of 3 and the ISR set includes all three replicas, then all three replicas must acknowledge an <code>acks=all</code> write for it to succeed, even if <code>min.insync.replicas</code> happens to be less than 3. If <code>acks=all</code> and the current ISR set contains fewer than <code>min.insync.replicas</code> members, then the producer will raise an exception (either <code>NotEnoughReplicas</code> or <code>NotEnoughReplicasAfterAppend</code>).<br> Regardless of the <code>acks</code> setting, the messages will not be visible to the consumers until they are replicated to all in-sync replicas and the <code>min.insync.replicas</code> condition is met.<br> When used together, <code>min.insync.replicas</code> and <code>acks</code> allow you to enforce greater durability guarantees. A typical scenario would be to create a topic with a replication factor of 3, set <code>min.insync.replicas</code> to 2, and produce with <code>acks</code> of \"all\". This ensures that a majority of replicas must persist a write before it's considered successful by the producer and it's visible to consumers.<p>Note that when the Eligible Leader Replicas feature is enabled, the semantics of this config changes. Please refer to <a href=\"#eligible_leader_replicas\">the ELR section</a> for more info.</p>"),
    def("node.id", Int, Some("1"), false, "The node ID associated with the roles this process is playing when <code>process.roles</code> is non-empty. This is required configuration when running in KRaft mode."),
    def("num.partitions", Int, Some("1"), false, "The default number of log partitions per topic"),
    def("offset.metadata.max.bytes", Int, Some("4096"), false, "The maximum size for a metadata entry associated with an offset commit."),
    def("offsets.retention.check.interval.ms", Long, Some("600000"), false, "Frequency at which to check for stale offsets"),
    def("offsets.retention.minutes", Int, Some("10080"), false, "For subscribed consumers, committed offset of a specific partition will be expired and discarded when 1) this retention period has elapsed after the consumer group loses all its consumers (i.e. becomes empty); 2) this retention period has elapsed since the last time an offset is committed for the partition and the group is no longer subscribed to the corresponding topic. For standalone consumers (using manual assignment), offsets will be expired after this retention period has elapsed since the time of last commit. Note that when a group is deleted via the delete-group request, its committed offsets will also be deleted without extra retention period; also when a topic is deleted via the delete-topic request, upon propagated metadata update any group's committed offsets for that topic will also be deleted without extra retention period."),
    def("offsets.topic.num.partitions", Int, Some("50"), false, "The number of partitions for the offset commit topic (should not change after deployment)."),
    def("offsets.topic.segment.bytes", Int, Some("104857600"), false, "The offsets topic segment bytes should be kept relatively small in order to facilitate faster log compaction and cache loads."),
    def("producer.id.expiration.ms", Int, Some("86400000"), true, "The time in ms that a topic partition leader will wait before expiring producer IDs. Producer IDs will not expire while a transaction associated to them is still ongoing. Note that producer IDs may expire sooner if the last write from the producer ID is deleted due to the topic's retention settings. Setting this value the same or higher than <code>delivery.timeout.ms</code> can help prevent expiration during retries and protect against message duplication, but the default should be reasonable for most use cases."),
    def("socket.receive.buffer.bytes", Int, Some("-1"), false, "The SO_RCVBUF buffer of the socket server sockets. If the value is -1, the OS default will be used."),
    def("socket.request.max.bytes", Int, Some("104857600"), false, "The maximum number of bytes in a socket request"),
    def("socket.send.buffer.bytes", Int, Some("102400"), false, "The SO_SNDBUF buffer of the socket server sockets. If the value is -1, the OS default will be used."),
    def("transaction.max.timeout.ms", Int, Some("900000"), false, "The maximum allowed timeout for transactions. If a client\u{2019}s requested transaction time exceed this, then the broker will return an error in InitProducerIdRequest. This prevents a client from too large of a timeout, which can stall consumers reading from topics included in the transaction."),
    def("transaction.state.log.num.partitions", Int, Some("50"), false, "The number of partitions for the transaction topic (should not change after deployment)."),
    def("transactional.id.expiration.ms", Int, Some("604800000"), false, "The time in ms that the transaction coordinator will wait without receiving any transaction status updates for the current transaction before expiring its transactional id. Transactional IDs will not expire while a the transaction is still ongoing."),
    def("min.incremental.fetch.session.eviction.ms", Int, Some("120000"), false, "Ketch: the minimum time an incremental fetch session is kept before a new session may evict it."),
    def("log.cleaner.enable", Bool, Some("true"), false, "Enable the log cleaner process to run on the server. Should be enabled if using any topics with a cleanup.policy=compact including the internal offsets topic. If disabled those topics will not be compacted and continually grow in size."),
    def("log.cleaner.backoff.ms", Long, Some("15000"), false, "The amount of time to sleep when there are no logs to clean"),
    def("log.cleaner.dedupe.buffer.size", Long, Some("134217728"), false, "The total memory used for log deduplication across all cleaner threads"),
    def("ketch.log.level", Str, Some("info"), false, "Ketch: the tracing filter for the broker's log on stderr (the KETCH_LOG environment variable wins when set)."),
    def("ketch.metrics.listener", Str, Some(""), false, "Ketch: HOST:PORT of the Prometheus /metrics and /ready endpoint; empty (the default) turns it off."),
    def("ketch.acks.all.fsync", Bool, Some("true"), false, "Ketch: fsync a partition's log before acknowledging an acks=all produce request (Kafka relies on replication instead)."),
];

/// Kafka's type of a topic-level config (DescribeConfigs on a topic).
pub fn topic_config_type(topic_key: &str) -> Type {
    match topic_key {
        "cleanup.policy" | "leader.replication.throttled.replicas" | "follower.replication.throttled.replicas" => List,
        "compression.type" | "message.timestamp.type" => Str,
        "index.interval.bytes"
        | "max.message.bytes"
        | "segment.bytes"
        | "min.insync.replicas"
        | "segment.index.bytes" => Int,
        "compression.gzip.level" | "compression.lz4.level" | "compression.zstd.level" => Int,
        "preallocate"
        | "unclean.leader.election.enable"
        | "remote.storage.enable"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable" => Bool,
        "min.cleanable.dirty.ratio" => Double,
        _ => Long,
    }
}

/// The definition of a broker config Ketch knows, or `None`.
pub fn lookup(name: &str) -> Option<Def> {
    if let Some(r) = ROWS.iter().find(|r| r.name == name) {
        return Some(Def {
            name: Cow::Borrowed(r.name),
            kind: r.kind,
            default: r.default.map(Cow::Borrowed),
            dynamic: r.dynamic,
            doc: Some(r.doc),
        });
    }
    // A topic config whose broker-level name has no row yet: dynamic, typed from the topic side.
    let (topic_key, broker_key) = TOPIC_CONFIG_KEYS.iter().find(|(_, b)| *b == name)?;
    let base = BrokerConfig::from_properties(Properties::new()).ok()?.topic_defaults;
    Some(Def {
        name: Cow::Owned(broker_key.to_string()),
        kind: topic_config_type(topic_key),
        default: Some(Cow::Owned(base.value_of(topic_key))),
        dynamic: true,
        doc: None,
    })
}

/// Every broker config name Ketch describes, sorted.
pub fn all_names() -> Vec<String> {
    let mut names: Vec<String> = ROWS.iter().map(|r| r.name.to_string()).collect();
    for (_, broker_key) in TOPIC_CONFIG_KEYS {
        if !names.iter().any(|n| n == broker_key) {
            names.push(broker_key.to_string());
        }
    }
    names.sort();
    names
}

/// Kafka's `DynamicBrokerConfig.brokerConfigSynonyms`: the names that set the same value, the
/// most precise first.
pub fn synonyms(name: &str) -> Vec<&str> {
    match name {
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => {
            vec!["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
        }
        "log.roll.ms" | "log.roll.hours" => vec!["log.roll.ms", "log.roll.hours"],
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => vec!["log.roll.jitter.ms", "log.roll.jitter.hours"],
        "log.flush.interval.ms" => vec!["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        _ => vec![name],
    }
}

/// Checks a value against the config's type and Kafka's validator; the error is Kafka's text.
pub fn validate(def: &Def, value: &str) -> Result<(), String> {
    let name = &def.name;
    let invalid = |reason: &str| Err(format!("Invalid value {value} for configuration {name}: {reason}"));
    let v = value.trim();
    let number = match def.kind {
        Int => match v.parse::<i32>() {
            Ok(n) => Some(n as i64),
            Err(_) => return invalid("Not a number of type INT"),
        },
        Long => match v.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => return invalid("Not a number of type LONG"),
        },
        Double => match v.parse::<f64>() {
            Ok(_) => None,
            Err(_) => return invalid("Not a number of type DOUBLE"),
        },
        Bool if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") => None,
        Bool => return invalid("Expected value to be either true or false"),
        Str | List => None,
    };
    if let (Some(n), Some(min)) = (number, min_value(name)) {
        if n < min && name == "log.roll.ms" {
            // Checked by KafkaConfig itself, not its ConfigDef: a Scala `require`.
            return Err(format!("requirement failed: {name} must be greater than or equal to {min}"));
        }
        if n < min {
            return invalid(&format!("Value must be at least {min}"));
        }
    }
    let one_of = |allowed: &[&str], item: &str| allowed.contains(&item);
    match name.as_ref() {
        "compression.type" if !one_of(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"], v) => {
            invalid("String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")
        }
        "log.message.timestamp.type" if !one_of(&["CreateTime", "LogAppendTime"], v) => {
            invalid("String must be one of: CreateTime, LogAppendTime")
        }
        "log.cleanup.policy" => match v.split(',').map(str::trim).find(|p| !one_of(&["compact", "delete"], p)) {
            Some(bad) => {
                Err(format!("Invalid value {bad} for configuration {name}: String must be one of: compact, delete"))
            }
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Kafka's `atLeast` bound of a dynamic config, where it has one.
fn min_value(name: &str) -> Option<i64> {
    Some(match name {
        "log.segment.bytes" => 1_048_576,
        "log.index.interval.bytes" | "message.max.bytes" => 0,
        "log.message.timestamp.before.max.ms" | "log.message.timestamp.after.max.ms" => 0,
        "log.flush.interval.messages" | "min.insync.replicas" | "producer.id.expiration.ms" | "log.roll.ms" => 1,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_configs_are_the_topic_defaults_ketch_applies() {
        for r in ROWS.iter().filter(|r| r.dynamic) {
            let topic_default = TOPIC_CONFIG_KEYS.iter().any(|(_, b)| *b == r.name);
            assert!(topic_default || r.name == "producer.id.expiration.ms", "{} is dynamic but not applied", r.name);
        }
        for (_, broker_key) in TOPIC_CONFIG_KEYS {
            assert!(lookup(broker_key).unwrap().dynamic, "{broker_key}");
        }
    }

    #[test]
    fn defaults_are_the_values_ketch_uses() {
        let base = BrokerConfig::from_properties(Properties::new()).unwrap();
        for (topic_key, broker_key) in TOPIC_CONFIG_KEYS {
            let def = lookup(broker_key).unwrap();
            // log.retention.ms, log.roll.ms and log.flush.interval.ms have no default: their last
            // synonym (in hours, or the flush scheduler interval) carries it.
            let default = match def.default {
                Some(d) => d.to_string(),
                None => {
                    let last = *synonyms(broker_key).last().unwrap();
                    let value: i64 = lookup(last).unwrap().default.unwrap().parse().unwrap();
                    let unit = if last.ends_with(".hours") { 3_600_000 } else { 1 };
                    (value * unit).to_string()
                }
            };
            assert_eq!(default, base.topic_defaults.value_of(topic_key), "{broker_key}");
        }
        assert_eq!(lookup("num.partitions").unwrap().default.as_deref(), Some("1"));
        assert_eq!(lookup("node.id").unwrap().default.as_deref(), Some(base.node_id.to_string().as_str()));
    }

    #[test]
    fn validation_speaks_kafka() {
        let check = |n: &str, v: &str| validate(&lookup(n).unwrap(), v);
        assert_eq!(
            check("log.retention.ms", "abc").unwrap_err(),
            "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            check("log.segment.bytes", "10").unwrap_err(),
            "Invalid value 10 for configuration log.segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            check("log.message.timestamp.type", "Bogus").unwrap_err(),
            "Invalid value Bogus for configuration log.message.timestamp.type: String must be one of: CreateTime, \
             LogAppendTime"
        );
        assert!(check("log.retention.ms", "-5").is_ok());
        assert!(check("message.max.bytes", "99999999999").is_err());
        assert!(check("log.cleanup.policy", "compact,delete").is_ok());
    }
}
