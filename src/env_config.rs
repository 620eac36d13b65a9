//! Broker properties from the environment, for containers: `KETCH_<NAME>` sets property `name`
//! with `_` read as `.` and lower-cased, e.g. `KETCH_LOG_RETENTION_HOURS=24` sets
//! `log.retention.hours=24` and `KETCH_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092` sets
//! `advertised.listeners`. Ketch's own `ketch.*` properties take a doubled prefix
//! (`KETCH_KETCH_ACKS_ALL_FSYNC=false`).
//!
//! Owns: that mapping. Invariants: only names of broker configs Ketch knows are mapped (so
//! `KETCH_LOG`, the log filter, and unrelated `KETCH_*` variables never become properties; they
//! are reported back so the caller can log them); the result is an ordinary property set, merged
//! by the caller between the properties file and `--override` (file < environment < override).

use crate::config::Properties;
use crate::dynconf::defs;

/// Environment variables that are not properties by design.
const RESERVED: &[&str] = &["KETCH_LOG"];

/// Maps `KETCH_*` variables to properties. Returns the properties and the names of `KETCH_*`
/// variables that match no known broker config (ignored).
pub fn from_env(vars: impl IntoIterator<Item = (String, String)>) -> (Properties, Vec<String>) {
    let mut props = Properties::new();
    let mut ignored = Vec::new();
    for (var, value) in vars {
        let Some(rest) = var.strip_prefix("KETCH_") else { continue };
        if RESERVED.contains(&var.as_str()) {
            continue;
        }
        let name = rest.to_ascii_lowercase().replace('_', ".");
        if defs::lookup(&name).is_some() {
            props.insert(name, value.trim().to_string());
        } else {
            ignored.push(var);
        }
    }
    ignored.sort();
    (props, ignored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn maps_known_configs_only() {
        let (props, ignored) = from_env(env(&[
            ("KETCH_LOG_DIRS", "/var/lib/ketch"),
            ("KETCH_ADVERTISED_LISTENERS", "PLAINTEXT://localhost:9092"),
            ("KETCH_NUM_PARTITIONS", " 3 "),
            ("KETCH_KETCH_ACKS_ALL_FSYNC", "false"),
            ("KETCH_LOG", "debug"),
            ("KETCH_COMPAT_TARGET", "kafka"),
            ("PATH", "/bin"),
        ]));
        let want: Properties = [
            ("advertised.listeners", "PLAINTEXT://localhost:9092"),
            ("ketch.acks.all.fsync", "false"),
            ("log.dirs", "/var/lib/ketch"),
            ("num.partitions", "3"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(props, want);
        assert_eq!(ignored, vec!["KETCH_COMPAT_TARGET".to_string()]);
    }
}
