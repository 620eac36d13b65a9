//! Broker configs: every one Apache Kafka 4.1 has (the table in `kafka_broker_configs.rs`,
//! generated from Kafka's jars by `scripts/gen-kafka-broker-configs`: type, default,
//! documentation, validator, ReadOnly, whether AlterConfigs accepts it) plus Ketch's own `ketch.*`
//! settings, and what Ketch does with each.
//!
//! Owns: which broker configs exist for DescribeConfigs and AlterConfigs, their synonyms
//! (`log.retention.ms` / `.minutes` / `.hours`, `listener.name.<listener>.<config>`), Kafka's
//! checks of a value and how DescribeConfigs renders one.
//! Invariants: a config is [`Def::applied`] only if Ketch applies a dynamic change to it live
//! (the broker-level names of topic configs, see `TOPIC_CONFIG_KEYS`, and [`APPLIED_LIVE`]); every
//! applied config is dynamic in Kafka; the other names Kafka accepts dynamically are stored and
//! described without effect. Defaults are Kafka's except the few in [`KETCH_DEFAULTS`], which are
//! the values Ketch really uses.

use super::kafka_broker_configs::{
    CLUSTER_LEVEL_LISTENER_CONFIGS, KAFKA_BROKER_CONFIGS, LISTENER_MECHANISM_CONFIGS, SYNONYMS, VALIDATION_ORDER,
};
use crate::config::TOPIC_CONFIG_KEYS;

/// Kafka's `ConfigDef.Type` as DescribeConfigs v3+ reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Bool = 1,
    Str = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

/// Kafka's validator of a config, where it is one of `ConfigDef`'s own (others: [`Check::Any`]).
#[derive(Debug, Clone, Copy)]
pub enum Check {
    Any,
    /// `ConfigDef.Range`: bounds as Java prints them.
    Range(Option<&'static str>, Option<&'static str>),
    /// `ConfigDef.ValidString`.
    OneOf(&'static [&'static str]),
    /// `ConfigDef.CaseInsensitiveValidString` (upper case).
    OneOfIgnoreCase(&'static [&'static str]),
    /// `ConfigDef.ValidList`: every item one of these.
    EachOneOf(&'static [&'static str]),
    /// `ConfigDef.NonEmptyString`.
    NonEmpty,
}

/// Listed by DescribeConfigs of a broker even when not set (Kafka's non-internal configs).
pub const LISTED: u8 = 1;
/// DescribeConfigs' ReadOnly (Kafka: the name is not in `DynamicBrokerConfig.AllDynamicConfigs`).
pub const READ_ONLY: u8 = 2;
/// AlterConfigs accepts it (Kafka's `DynamicConfig.Broker`).
pub const ALTERABLE: u8 = 4;
/// Only per broker, never at the cluster-default level.
pub const PER_BROKER: u8 = 8;
/// A security config that can only be altered with a `listener.name.<listener>.` prefix.
pub const LISTENER_ONLY: u8 = 16;

/// One row of a config table.
#[derive(Debug, Clone, Copy)]
pub struct KafkaDef {
    pub name: &'static str,
    pub kind: Type,
    /// As DescribeConfigs renders it (the DEFAULT_CONFIG synonym); `None`: no default.
    pub default: Option<&'static str>,
    pub flags: u8,
    pub check: Check,
    pub doc: Option<&'static str>,
}

/// Broker configs whose dynamic changes Ketch applies live, besides the broker-level names of
/// topic configs (`TOPIC_CONFIG_KEYS`).
pub const APPLIED_LIVE: &[&str] =
    &["producer.id.expiration.ms", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size"];

/// Defaults Ketch really uses where they differ from Kafka's on purpose.
pub const KETCH_DEFAULTS: &[(&str, &str)] = &[
    // a single node: node id 1 unless set (Kafka requires node.id; broker.id defaults to -1)
    ("broker.id", "1"),
    ("node.id", "1"),
    // Kafka: /tmp/kafka-logs
    ("log.dir", "./data"),
    // OS autotuning, not Kafka's 100 KiB (see `BrokerConfig::from_properties`)
    ("socket.receive.buffer.bytes", "-1"),
];

/// Ketch's own broker configs (no Kafka equivalent): static, listed after Kafka's, except
/// `min.incremental.fetch.session.eviction.ms`, which Kafka 4.1 does not list (still accepted).
#[rustfmt::skip]
static KETCH_CONFIGS: &[KafkaDef] = &[
    KafkaDef { name: "ketch.acks.all.fsync", kind: Type::Bool, default: Some("true"), flags: LISTED | READ_ONLY, check: Check::Any, doc: Some("Ketch: fsync a partition's log before acknowledging an acks=all produce request (Kafka relies on replication instead).") },
    KafkaDef { name: "ketch.log.level", kind: Type::Str, default: Some("info"), flags: LISTED | READ_ONLY, check: Check::Any, doc: Some("Ketch: the tracing filter for the broker's log on stderr (the KETCH_LOG environment variable wins when set).") },
    KafkaDef { name: "ketch.metrics.listener", kind: Type::Str, default: Some(""), flags: LISTED | READ_ONLY, check: Check::Any, doc: Some("Ketch: HOST:PORT of the Prometheus /metrics and /ready endpoint; empty (the default) turns it off.") },
    KafkaDef { name: "min.incremental.fetch.session.eviction.ms", kind: Type::Int, default: Some("120000"), flags: READ_ONLY, check: Check::Any, doc: Some("Ketch: the minimum time an incremental fetch session is kept before a new session may evict it.") },
];

/// A broker config: Kafka's definition (with Ketch's default where it differs) or Ketch's own.
#[derive(Debug, Clone, Copy)]
pub struct Def {
    pub name: &'static str,
    pub kind: Type,
    pub default: Option<&'static str>,
    flags: u8,
    pub check: Check,
    pub doc: Option<&'static str>,
    /// A dynamic change takes effect in Ketch; otherwise it is only stored and described.
    pub applied: bool,
}

impl Def {
    pub fn listed(&self) -> bool {
        self.flags & LISTED != 0
    }
    pub fn read_only(&self) -> bool {
        self.flags & READ_ONLY != 0
    }
    pub fn alterable(&self) -> bool {
        self.flags & ALTERABLE != 0
    }
    pub fn per_broker(&self) -> bool {
        self.flags & PER_BROKER != 0
    }
    pub fn listener_only(&self) -> bool {
        self.flags & LISTENER_ONLY != 0
    }
    /// Kafka hides the values of PASSWORD configs.
    pub fn sensitive(&self) -> bool {
        self.kind == Type::Password
    }
}

fn applied(name: &str) -> bool {
    APPLIED_LIVE.contains(&name) || TOPIC_CONFIG_KEYS.iter().any(|(_, broker_key)| *broker_key == name)
}

/// The definition of a broker config, or `None` for a name neither Kafka nor Ketch has (a
/// `listener.name.<listener>.<config>` name included: see [`listener_base`]).
pub fn lookup(name: &str) -> Option<Def> {
    let row = match KAFKA_BROKER_CONFIGS.binary_search_by(|r| r.name.cmp(name)) {
        Ok(i) => &KAFKA_BROKER_CONFIGS[i],
        Err(_) => KETCH_CONFIGS.iter().find(|r| r.name == name)?,
    };
    let default = KETCH_DEFAULTS.iter().find(|(n, _)| *n == name).map_or(row.default, |(_, d)| Some(*d));
    Some(Def {
        name: row.name,
        kind: row.kind,
        default,
        flags: row.flags,
        check: row.check,
        doc: row.doc,
        applied: row.flags & ALTERABLE != 0 && applied(name),
    })
}

/// Every broker config name DescribeConfigs lists without it being set, sorted.
pub fn all_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> =
        KAFKA_BROKER_CONFIGS.iter().chain(KETCH_CONFIGS).filter(|r| r.flags & LISTED != 0).map(|r| r.name).collect();
    names.sort_unstable();
    names
}

/// The `<config>` of a `listener.name.<listener>.<config>` name (Kafka's `ListenerConfigRegex`).
pub fn listener_base(name: &str) -> Option<&str> {
    let (_listener, base) = name.strip_prefix("listener.name.")?.split_once('.')?;
    Some(base)
}

/// Kafka's `DynamicBrokerConfig.brokerConfigSynonyms(name, matchListenerOverride = true)`: the
/// names that set the same value, the most precise first.
pub fn synonyms(name: &str) -> Vec<&str> {
    if let Some((_, group)) = SYNONYMS.iter().find(|(n, _)| *n == name) {
        return group.to_vec();
    }
    match listener_base(name) {
        // listener.name.<l>.<mechanism>.sasl.jaas.config has sasl.jaas.config as synonym
        Some(base) => {
            vec![name, LISTENER_MECHANISM_CONFIGS.iter().find(|m| base.ends_with(*m)).copied().unwrap_or(base)]
        }
        None => vec![name],
    }
}

/// Kafka's `KafkaConfig.configType`: the name's own type, else the first synonym's; `None` (an
/// unknown name) makes DescribeConfigs treat the config as sensitive.
pub fn config_type(name: &str) -> Option<Type> {
    lookup(name).or_else(|| synonyms(name).into_iter().find_map(lookup)).map(|d| d.kind)
}

/// A listener-prefixed name that cannot be set at the cluster-default level (Kafka's
/// `perBrokerListenerConfig`).
pub fn per_broker_listener_config(name: &str) -> bool {
    listener_base(name).is_some_and(|base| !CLUSTER_LEVEL_LISTENER_CONFIGS.contains(&base))
}

/// Where Kafka's `DynamicConfig.Broker.validate` checks this name (it reports the first invalid
/// value in that order); names it does not check come last.
pub fn validation_rank(name: &str) -> usize {
    VALIDATION_ORDER.iter().position(|n| *n == name).unwrap_or(usize::MAX)
}

/// Kafka's type of a topic-level config (DescribeConfigs on a topic).
pub fn topic_config_type(topic_key: &str) -> Type {
    match topic_key {
        "cleanup.policy" | "leader.replication.throttled.replicas" | "follower.replication.throttled.replicas" => {
            Type::List
        }
        "compression.type" | "message.timestamp.type" => Type::Str,
        "index.interval.bytes"
        | "max.message.bytes"
        | "segment.bytes"
        | "min.insync.replicas"
        | "segment.index.bytes"
        | "compression.gzip.level"
        | "compression.lz4.level"
        | "compression.zstd.level" => Type::Int,
        "preallocate"
        | "unclean.leader.election.enable"
        | "remote.storage.enable"
        | "remote.log.copy.disable"
        | "remote.log.delete.on.disable" => Type::Bool,
        "min.cleanable.dirty.ratio" => Type::Double,
        _ => Type::Long,
    }
}

/// A value parsed as Kafka's `ConfigDef.parseType` would.
enum Parsed {
    Number(f64),
    Text(String),
    Items(Vec<String>),
}

/// Kafka's `ConfigDef.parseType`; the error is Kafka's reason.
fn parse(kind: Type, value: &str) -> Result<Parsed, String> {
    let v = value.trim();
    let number = |what: &str, n: Option<f64>| n.map(Parsed::Number).ok_or(format!("Not a number of type {what}"));
    match kind {
        Type::Int => number("INT", v.parse::<i32>().ok().map(f64::from)),
        Type::Short => number("SHORT", v.parse::<i16>().ok().map(f64::from)),
        Type::Long => number("LONG", v.parse::<i64>().ok().map(|n| n as f64)),
        Type::Double => number("DOUBLE", v.parse::<f64>().ok()),
        Type::Bool if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") => {
            Ok(Parsed::Text(v.to_ascii_lowercase()))
        }
        Type::Bool => Err("Expected value to be either true or false".into()),
        Type::List => Ok(Parsed::Items(split_list(v))),
        Type::Str | Type::Password | Type::Class => Ok(Parsed::Text(v.to_string())),
    }
}

/// Kafka's LIST parsing: split at commas with the whitespace around them; "" is the empty list.
fn split_list(v: &str) -> Vec<String> {
    if v.is_empty() {
        Vec::new()
    } else {
        v.split(',').map(|s| s.trim().to_string()).collect()
    }
}

/// Checks a value against the config's type and Kafka's validator; the error is Kafka's text.
pub fn validate(def: &Def, value: &str) -> Result<(), String> {
    let name = def.name;
    let invalid = |shown: &str, reason: &str| Err(format!("Invalid value {shown} for configuration {name}: {reason}"));
    let parsed = match parse(def.kind, value) {
        Ok(p) => p,
        Err(reason) => return invalid(value, &reason),
    };
    if def.kind == Type::Class && Some(value.trim()) != def.default {
        // Ketch loads no Java classes: only Kafka's own default class exists.
        return invalid(value.trim(), &format!("Class {} could not be found.", value.trim()));
    }
    match (&def.check, &parsed) {
        (Check::Range(min, max), Parsed::Number(n)) => {
            let shown = render(def.kind, value);
            if let Some(min) = min.filter(|m| m.parse::<f64>().is_ok_and(|m| *n < m)) {
                return invalid(&shown, &format!("Value must be at least {min}"));
            }
            if let Some(max) = max.filter(|m| m.parse::<f64>().is_ok_and(|m| *n > m)) {
                return invalid(&shown, &format!("Value must be no more than {max}"));
            }
        }
        (Check::OneOf(allowed), Parsed::Text(s)) if !allowed.contains(&s.as_str()) => {
            return invalid(s, &format!("String must be one of: {}", allowed.join(", ")));
        }
        (Check::OneOfIgnoreCase(allowed), Parsed::Text(s)) if !allowed.contains(&s.to_uppercase().as_str()) => {
            return invalid(s, &format!("String must be one of (case insensitive): {}", allowed.join(", ")));
        }
        (Check::EachOneOf(allowed), Parsed::Items(items)) => {
            if let Some(bad) = items.iter().find(|i| !allowed.contains(&i.as_str())) {
                return invalid(bad, &format!("String must be one of: {}", allowed.join(", ")));
            }
        }
        (Check::NonEmpty, Parsed::Text(s)) if s.is_empty() => return invalid(s, "String must be non-empty"),
        _ => {}
    }
    if let (Parsed::Number(n), "log.roll.ms") = (&parsed, name) {
        if *n < 1.0 {
            // Checked by KafkaConfig itself, not its ConfigDef: a Scala `require`.
            return Err(format!("requirement failed: {name} must be greater than or equal to 1"));
        }
    }
    Ok(())
}

/// A value as DescribeConfigs shows it: Kafka parses it to its type and prints it back
/// (`ConfigDef.convertToString`): numbers canonical, booleans in lower case, lists comma-joined
/// without spaces, strings trimmed. A value that does not parse is shown as given.
pub fn render(kind: Type, value: &str) -> String {
    let v = value.trim();
    match kind {
        Type::Int => v.parse::<i32>().map_or_else(|_| value.to_string(), |n| n.to_string()),
        Type::Short => v.parse::<i16>().map_or_else(|_| value.to_string(), |n| n.to_string()),
        Type::Long => v.parse::<i64>().map_or_else(|_| value.to_string(), |n| n.to_string()),
        Type::Double => v.parse::<f64>().map_or_else(|_| value.to_string(), java_double),
        Type::Bool if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false") => v.to_ascii_lowercase(),
        Type::List => split_list(v).join(","),
        _ => v.to_string(),
    }
}

/// Java's `Double.toString`: plain between 10^-3 and 10^7, else computerized scientific notation.
fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let a = x.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        return format!("{x:?}");
    }
    let s = format!("{x:e}");
    let (mantissa, exponent) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exponent}")
}

/// Kafka's checks of a change that need the value in force before it (its reconfigurables'
/// `validateReconfiguration`): thread pools may at most double or halve at once. `old` and
/// `new` are the effective values of `name`. The error is Kafka's text.
pub fn validate_reconfiguration(name: &str, old: &str, new: &str) -> Result<(), String> {
    let (Ok(old), Ok(new)) = (old.trim().parse::<i64>(), new.trim().parse::<i64>()) else { return Ok(()) };
    if old == new {
        return Ok(());
    }
    let failed = |reason: String| {
        Err(format!(
            "Invalid value org.apache.kafka.common.config.ConfigException: {reason} for configuration Invalid dynamic \
             configuration"
        ))
    };
    match name {
        "num.io.threads"
        | "num.network.threads"
        | "num.replica.fetchers"
        | "num.recovery.threads.per.data.dir"
        | "background.threads" => {
            let what = format!("Dynamic thread count update validation failed for {name}={new}");
            if new <= 0 {
                failed(format!("{what}, value should be at least 1"))
            } else if new < old / 2 {
                failed(format!("{what}, value should be at least half the current value {old}"))
            } else if new > old * 2 {
                failed(format!("{what}, value should not be greater than double the current value {old}"))
            } else {
                Ok(())
            }
        }
        "log.cleaner.threads" if new > old * 2 => {
            failed(format!("Log cleaner threads cannot be increased to more than double the current value {old}"))
        }
        _ => Ok(()),
    }
}

/// KafkaConfig's own requirement on the cleaner's memory: more than 1 MiB of dedupe buffer per
/// cleaner thread (integer division, as Kafka's: 0 threads is Java's division error).
pub fn validate_cleaner_memory(dedupe_buffer_size: &str, threads: &str) -> Result<(), String> {
    let (Ok(size), Ok(threads)) = (dedupe_buffer_size.trim().parse::<i64>(), threads.trim().parse::<i64>()) else {
        return Ok(());
    };
    match size.checked_div(threads) {
        None => Err("/ by zero".into()),
        Some(per_thread) if per_thread <= 1024 * 1024 => {
            Err("requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner thread.".into())
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BrokerConfig, Properties};

    #[test]
    fn table_is_sorted_and_ketch_names_are_not_kafka_names() {
        assert!(KAFKA_BROKER_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for r in KETCH_CONFIGS {
            assert!(KAFKA_BROKER_CONFIGS.iter().all(|k| k.name != r.name), "{}", r.name);
        }
        for (name, _) in KETCH_DEFAULTS {
            assert!(lookup(name).is_some(), "{name}");
        }
        assert_eq!(all_names().len(), 316 + 3, "Kafka 4.1 lists 316 broker configs; Ketch adds its 3 ketch.* ones");
        assert!(lookup("min.incremental.fetch.session.eviction.ms").is_some_and(|d| !d.listed()));
    }

    #[test]
    fn applied_configs_are_dynamic_in_kafka() {
        for name in APPLIED_LIVE.iter().chain(TOPIC_CONFIG_KEYS.iter().map(|(_, b)| b)) {
            let def = lookup(name).unwrap();
            assert!(def.alterable() && !def.read_only() && def.applied, "{name}");
        }
        let stored = lookup("log.cleaner.threads").unwrap();
        assert!(stored.alterable() && !stored.applied);
        assert!(!lookup("num.partitions").unwrap().alterable());
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
        let default = |name| lookup(name).unwrap().default.unwrap();
        assert_eq!(default("num.partitions"), "1");
        assert_eq!(default("node.id"), base.node_id.to_string());
        assert_eq!(default("log.dir"), base.log_dir().display().to_string());
        assert_eq!(default("log.cleaner.backoff.ms"), base.log_cleaner_backoff_ms.to_string());
        assert_eq!(default("log.cleaner.dedupe.buffer.size"), base.log_cleaner_dedupe_buffer_size.to_string());
        assert_eq!(default("fetch.max.bytes"), base.fetch_max_bytes.to_string());
        assert_eq!(default("producer.id.expiration.ms"), base.producer_id_expiration_ms.to_string());
        assert_eq!(default("socket.receive.buffer.bytes"), "-1");
    }

    #[test]
    fn synonyms_and_types() {
        assert_eq!(
            synonyms("log.retention.hours"),
            ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
        );
        assert_eq!(synonyms("log.flush.interval.ms"), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]);
        assert_eq!(synonyms("log.flush.scheduler.interval.ms"), ["log.flush.scheduler.interval.ms"]);
        let name = "listener.name.plaintext.ssl.keystore.password";
        assert_eq!(synonyms(name), [name, "ssl.keystore.password"]);
        let name = "listener.name.sasl_ssl.plain.sasl.jaas.config";
        assert_eq!(synonyms(name), [name, "sasl.jaas.config"]);
        assert_eq!(config_type("listener.name.plaintext.ssl.keystore.password"), Some(Type::Password));
        assert_eq!(config_type("no.such.config"), None);
        assert_eq!(config_type("log.retention.hours"), Some(Type::Int), "its own type, not log.retention.ms's");
        assert_eq!(config_type("leader.replication.throttled.rate"), Some(Type::Long));
        assert!(per_broker_listener_config("listener.name.plaintext.ssl.keystore.type"));
        assert!(!per_broker_listener_config("listener.name.plaintext.max.connections"));
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
        assert_eq!(
            check("compression.type", "bogus").unwrap_err(),
            "Invalid value bogus for configuration compression.type: String must be one of: uncompressed, zstd, lz4, \
             snappy, gzip, producer"
        );
        assert_eq!(
            check("log.cleanup.policy", "compact,bogus").unwrap_err(),
            "Invalid value bogus for configuration log.cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            check("log.cleaner.io.max.bytes.per.second", "abc").unwrap_err(),
            "Invalid value abc for configuration log.cleaner.io.max.bytes.per.second: Not a number of type DOUBLE"
        );
        assert_eq!(
            check("background.threads", "0").unwrap_err(),
            "Invalid value 0 for configuration background.threads: Value must be at least 1"
        );
        assert_eq!(
            check("ssl.engine.factory.class", "foo.Bar").unwrap_err(),
            "Invalid value foo.Bar for configuration ssl.engine.factory.class: Class foo.Bar could not be found."
        );
        assert_eq!(
            check("log.roll.ms", "0").unwrap_err(),
            "requirement failed: log.roll.ms must be greater than or equal to 1"
        );
        assert!(check("log.retention.ms", "-5").is_ok());
        assert!(check("message.max.bytes", "99999999999").is_err());
        assert!(check("log.cleanup.policy", "compact, delete").is_ok());
        assert!(check("log.cleaner.threads", "2").is_ok());
    }

    #[test]
    fn reconfiguration_and_cleaner_memory() {
        assert!(validate_reconfiguration("num.io.threads", "8", "16").is_ok());
        assert_eq!(
            validate_reconfiguration("num.io.threads", "8", "17").unwrap_err(),
            "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation \
             failed for num.io.threads=17, value should not be greater than double the current value 8 for \
             configuration Invalid dynamic configuration"
        );
        assert!(validate_reconfiguration("num.io.threads", "8", "3")
            .unwrap_err()
            .contains("at least half the current value 8"));
        assert!(validate_reconfiguration("log.cleaner.threads", "1", "3").unwrap_err().contains("Log cleaner threads"));
        assert!(validate_reconfiguration("log.cleaner.threads", "4", "1").is_ok());
        assert_eq!(validate_cleaner_memory("134217728", "0").unwrap_err(), "/ by zero");
        assert!(validate_cleaner_memory("2097152", "2").is_err());
        assert!(validate_cleaner_memory("2097153", "2").is_err());
        assert!(validate_cleaner_memory("2097154", "2").is_ok());
    }

    #[test]
    fn rendering_follows_kafka() {
        assert_eq!(
            render(Type::List, "PLAINTEXT:PLAINTEXT , CONTROLLER:PLAINTEXT"),
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        );
        assert_eq!(render(Type::Bool, "TRUE"), "true");
        assert_eq!(render(Type::Int, "+007"), "7");
        assert_eq!(render(Type::Double, "0.75"), "0.75");
        assert_eq!(render(Type::Double, "1"), "1.0");
        assert_eq!(render(Type::Double, "1.7976931348623157E308"), "1.7976931348623157E308");
        assert_eq!(render(Type::Double, "1e7"), "1.0E7");
        assert_eq!(render(Type::Str, " x "), "x");
    }
}
