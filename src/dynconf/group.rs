//! Group configs: what `kafka-configs --entity-type groups --entity-name <group>` sets (Kafka's
//! `GroupConfig`): per-group overrides of the broker's `group.consumer.*` settings (and of
//! `group.share.*` / `group.streams.*`, which Kafka 4.1 defines too; Ketch has no share or streams
//! groups, so those are validated, stored and described, without effect).
//!
//! Owns: the names (Kafka's table, `kafka_group_configs.rs`), their defaults (the broker's
//! `group.<name>` where Kafka has such a broker config, else the name's own: Kafka's
//! `extractGroupConfigMap`), a group's effective values, and Kafka's validation of a group's
//! whole set (`GroupConfigManager.validate`, with its messages): unknown names first, then each
//! value parsed in definition order, then the bounds the broker's `group.*.min.*` / `.max.*`
//! configs set, then each session timeout above its heartbeat interval.
//! Not here: storage (ConfigRecords of resource type GROUP in the metadata log, as topic
//! overrides are) and reporting (`handlers/configs.rs`).
//! Invariants: `validate` accepts exactly the sets Kafka 4.1's does (same broker settings); the
//! effective value of a name always parses to its type when its set was accepted.

use super::defs::{self, Def};
use super::kafka_group_configs::KAFKA_GROUP_CONFIGS;
use crate::config::Properties;

/// Kafka's `ConfigResource.Type.GROUP`.
pub const RESOURCE: i8 = 32;

pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";

/// Every group config name, in Kafka's definition order.
pub fn names() -> impl Iterator<Item = &'static str> {
    KAFKA_GROUP_CONFIGS.iter().map(|r| r.name)
}

/// The definition of a group config (its own default, not the broker's).
pub fn lookup(name: &str) -> Option<Def> {
    KAFKA_GROUP_CONFIGS.iter().find(|r| r.name == name).map(|r| Def::of_row(r, false))
}

/// The broker config whose value is the default of group config `name`, if Kafka has one.
fn broker_key(name: &str) -> Option<String> {
    let key = format!("group.{name}");
    defs::lookup(&key).map(|_| key)
}

/// A broker config's value: `broker`'s, else its default (Ketch's or Kafka's).
fn broker_value(broker: &Properties, key: &str) -> Option<String> {
    broker.get(key).cloned().or_else(|| defs::lookup(key).and_then(|d| d.default).map(str::to_string))
}

/// The default of group config `name` on a broker with settings `broker`, as DescribeConfigs
/// shows it (parsed and printed back).
pub fn default_value(name: &str, broker: &Properties) -> Option<String> {
    let def = lookup(name)?;
    let value = broker_key(name).and_then(|k| broker_value(broker, &k)).or(def.default.map(str::to_string))?;
    Some(defs::render(def.kind, &value))
}

/// The value of `name` for a group whose set is `set`.
pub fn effective(name: &str, set: &Properties, broker: &Properties) -> Option<String> {
    let def = lookup(name)?;
    match set.get(name) {
        Some(v) => Some(defs::render(def.kind, v)),
        None => default_value(name, broker),
    }
}

/// An INT group config's value for a group (its default if the set has none or it does not
/// parse, which an accepted set never has).
pub fn int(name: &str, set: &Properties, broker: &Properties) -> Option<i32> {
    effective(name, set, broker).and_then(|v| v.trim().parse().ok())
}

/// Kafka's `GroupConfigManager.validate` of a group's whole new set on a broker (or controller)
/// with settings `broker`; the error is Kafka's message (INVALID_CONFIG).
pub fn validate(set: &Properties, broker: &Properties) -> Result<(), String> {
    if let Some(unknown) = set.keys().find(|k| lookup(k).is_none()) {
        return Err(format!("Unknown group config name: {unknown}"));
    }
    // The broker's group settings with the set over them, parsed in definition order.
    let value = |name: &str| set.get(name).cloned().or_else(|| default_value(name, broker)).unwrap_or_default();
    for row in KAFKA_GROUP_CONFIGS {
        let def = Def::of_row(row, false);
        let v = value(row.name);
        defs::validate(&def, &v)?;
        if row.name == SHARE_AUTO_OFFSET_RESET && !valid_share_auto_offset_reset(v.trim()) {
            let v = v.trim();
            return Err(format!(
                "Invalid value {v} for configuration {SHARE_AUTO_OFFSET_RESET}: Invalid value `{v}` for configuration \
                 {SHARE_AUTO_OFFSET_RESET}. The value must be either 'earliest', 'latest' or of the format \
                 'by_duration:<PnDTnHnMn.nS>'."
            ));
        }
    }
    let num = |name: &str| value(name).trim().parse::<i64>().unwrap_or_default();
    let bound = |key: &str| broker_value(broker, key).and_then(|v| v.trim().parse::<i64>().ok());
    // Kafka's order: per kind, heartbeat interval then session timeout; then the record lock
    // duration and the standby replicas; a bound is `group.<kind>.min.<rest>` / `.max.<rest>`.
    let bounded: [(&str, &str, &str, bool); 8] = [
        ("consumer.heartbeat.interval.ms", "consumer", "heartbeat.interval.ms", true),
        ("consumer.session.timeout.ms", "consumer", "session.timeout.ms", true),
        ("share.heartbeat.interval.ms", "share", "heartbeat.interval.ms", true),
        ("share.session.timeout.ms", "share", "session.timeout.ms", true),
        ("share.record.lock.duration.ms", "share", "record.lock.duration.ms", true),
        ("streams.heartbeat.interval.ms", "streams", "heartbeat.interval.ms", true),
        ("streams.session.timeout.ms", "streams", "session.timeout.ms", true),
        ("streams.num.standby.replicas", "streams", "standby.replicas", false),
    ];
    for (name, kind, rest, has_min) in bounded {
        let (min_key, max_key) = (format!("group.{kind}.min.{rest}"), format!("group.{kind}.max.{rest}"));
        if has_min && bound(&min_key).is_some_and(|min| num(name) < min) {
            return Err(format!("{name} must be greater than or equal to {min_key}"));
        }
        if bound(&max_key).is_some_and(|max| num(name) > max) {
            return Err(format!("{name} must be less than or equal to {max_key}"));
        }
    }
    for kind in ["consumer", "share", "streams"] {
        let (session, heartbeat) = (format!("{kind}.session.timeout.ms"), format!("{kind}.heartbeat.interval.ms"));
        if num(&session) <= num(&heartbeat) {
            return Err(format!("{session} must be greater than {heartbeat}"));
        }
    }
    Ok(())
}

/// Kafka's `ShareGroupAutoOffsetResetStrategy`: `earliest`, `latest`, or `by_duration:` and a
/// non-negative ISO-8601 duration as Java's `Duration.parse` reads it.
fn valid_share_auto_offset_reset(value: &str) -> bool {
    match value {
        "earliest" | "latest" => true,
        _ => value.strip_prefix("by_duration:").and_then(java_duration_seconds).is_some_and(|s| s >= 0),
    }
}

/// Java's `Duration.parse` (`[-+]PnDTnHnMn.nS`, case-insensitive, at least one part, at most nine
/// fraction digits, `.` or `,` before them), to whole seconds rounded down; `None` where Java
/// throws (including overflow).
fn java_duration_seconds(text: &str) -> Option<i128> {
    let upper = text.to_ascii_uppercase();
    let (negative, rest) = match upper.as_bytes().first()? {
        b'-' => (true, &upper[1..]),
        b'+' => (false, &upper[1..]),
        _ => (false, &upper[..]),
    };
    let rest = rest.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    // A signed integer of at most Java's long.
    let number = |s: &str| -> Option<i128> {
        let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: i128 = s.parse().ok()?;
        (i64::MIN as i128..=i64::MAX as i128).contains(&n).then_some(n)
    };
    let mut total: i128 = 0;
    let mut parts = 0;
    if !days.is_empty() {
        total += number(days.strip_suffix('D')?)? * 86_400;
        parts += 1;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None; // "PT" or "P1DT"
        }
        for (unit, seconds) in [('H', 3600), ('M', 60)] {
            if let Some(i) = t.find(unit) {
                total += number(&t[..i])? * seconds;
                t = &t[i + 1..];
                parts += 1;
            }
        }
        if !t.is_empty() {
            let s = t.strip_suffix('S')?;
            let (whole, fraction) = match s.find(['.', ',']) {
                Some(i) => (&s[..i], Some(&s[i + 1..])),
                None => (s, None),
            };
            if let Some(f) = fraction {
                if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
            }
            let seconds = number(whole)?;
            let negative_fraction = whole.starts_with('-') && fraction.is_some_and(|f| f.bytes().any(|b| b != b'0'));
            total += seconds - i128::from(negative_fraction);
            parts += 1;
        }
    }
    if parts == 0 || total.abs() > i64::MAX as i128 {
        return None;
    }
    Some(if negative { -total } else { total })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_come_from_the_broker_group_configs() {
        let none = Properties::new();
        assert_eq!(names().count(), 10);
        assert_eq!(default_value(CONSUMER_SESSION_TIMEOUT_MS, &none).as_deref(), Some("45000"));
        assert_eq!(default_value("share.auto.offset.reset", &none).as_deref(), Some("latest"));
        let broker = set(&[("group.consumer.session.timeout.ms", "50000")]);
        assert_eq!(default_value(CONSUMER_SESSION_TIMEOUT_MS, &broker).as_deref(), Some("50000"));
        assert_eq!(
            int(CONSUMER_SESSION_TIMEOUT_MS, &set(&[(CONSUMER_SESSION_TIMEOUT_MS, " 55000")]), &broker),
            Some(55000)
        );
    }

    #[test]
    fn validation_has_kafkas_order_and_messages() {
        let none = Properties::new();
        let check = |pairs: &[(&str, &str)]| validate(&set(pairs), &none).err();
        assert_eq!(check(&[("consumer.session.timeout.ms", "50000")]), None);
        assert_eq!(check(&[("nope", "1")]).unwrap(), "Unknown group config name: nope");
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "abc")]).unwrap(),
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "0")]).unwrap(),
            "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "1000")]).unwrap(),
            "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"
        );
        assert_eq!(
            check(&[("consumer.heartbeat.interval.ms", "16000")]).unwrap(),
            "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"
        );
        assert_eq!(
            check(&[("streams.num.standby.replicas", "3")]).unwrap(),
            "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"
        );
        let broker = set(&[("group.consumer.min.session.timeout.ms", "1000")]);
        assert_eq!(
            validate(&set(&[("consumer.session.timeout.ms", "5000")]), &broker).unwrap_err(),
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
        assert!(check(&[("share.isolation.level", "READ_COMMITTED")])
            .unwrap()
            .ends_with("String must be one of: read_committed, read_uncommitted"));
    }

    #[test]
    fn share_auto_offset_reset_reads_durations_as_java_does() {
        for ok in [
            "latest",
            " earliest ",
            "by_duration:PT1H",
            "by_duration:pt1h",
            "by_duration:P1DT-1H",
            "by_duration:PT0S",
            "by_duration:+PT1H",
            "by_duration:PT1,5S",
            "by_duration:P2D",
            "by_duration:PT1.123456789S",
        ] {
            assert!(valid_share_auto_offset_reset(ok.trim()), "{ok}");
        }
        for bad in [
            "none",
            "EARLIEST",
            "BY_DURATION:PT1H",
            "by_duration: PT1H",
            "by_duration:-P1D",
            "by_duration:P-1D",
            "by_duration:PT",
            "by_duration:P",
            "by_duration:P1DT",
            "by_duration:PT1.1234567891S",
            "",
            "by_duration:PT-0.5S",
        ] {
            assert!(!valid_share_auto_offset_reset(bad), "{bad}");
        }
    }
}
