//! Dynamic broker configs: what `kafka-configs --entity-type brokers --entity-name <id>` (per
//! broker) and `--entity-default` (cluster default) set at runtime.
//!
//! Owns: the two dynamic config sets, their persistence in `<first log dir>/.ketch/configs/`
//! (`broker-<node.id>.properties`, `cluster-default.properties`), validating a change with
//! Kafka's rules and messages, and the effective broker config they yield. Precedence, as in
//! Kafka: per-broker > cluster default > static (`server.properties`, `--override`) > default.
//! Invariants: a stored set holds only configs Ketch updates dynamically ([`defs::Def::dynamic`]),
//! each with a valid value, and the effective config built from them always parses (a change
//! that would break it is refused); a change is on disk (fsynced, atomically replaced) before it
//! becomes visible; changes are serialized.
//! Applying the effective config to topics and background work is the broker's job
//! (`Broker::reconfigure`).

pub mod defs;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::error::ResponseError;

use crate::config::{parse_properties, BrokerConfig, Properties};

/// Which dynamic set a DescribeConfigs / AlterConfigs BROKER resource names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Resource name = this node's id.
    Broker,
    /// Resource name = "" (`--entity-default`).
    ClusterDefault,
}

/// A refused change, as Kafka reports it.
pub type Refusal = (ResponseError, String);

pub struct DynamicConfigs {
    dir: PathBuf,
    node_id: i32,
    static_props: Properties,
    state: RwLock<State>,
    /// Held from reading the current set to publishing the new one.
    alter: Mutex<()>,
}

struct State {
    per_broker: Properties,
    cluster_default: Properties,
    effective: Arc<BrokerConfig>,
}

impl DynamicConfigs {
    /// Loads the persisted sets. A stored config that is no longer valid (e.g. stored by another
    /// version) is dropped with a warning, as Kafka ignores invalid dynamic configs at startup.
    pub fn open(config: &BrokerConfig) -> anyhow::Result<DynamicConfigs> {
        let dir = config.log_dir().join(".ketch").join("configs");
        let mut configs = DynamicConfigs {
            dir,
            node_id: config.node_id,
            static_props: config.properties.clone(),
            state: RwLock::new(State {
                per_broker: Properties::new(),
                cluster_default: Properties::new(),
                effective: Arc::new(config.clone()),
            }),
            alter: Mutex::new(()),
        };
        for scope in [Scope::ClusterDefault, Scope::Broker] {
            let path = configs.path(scope);
            let stored = match std::fs::read_to_string(&path) {
                Ok(text) => parse_properties(&text)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
            };
            let mut kept = Properties::new();
            for (key, value) in stored {
                let mut candidate = kept.clone();
                candidate.insert(key.clone(), value.clone());
                match configs.check(scope, &candidate) {
                    Ok(_) => {
                        kept = candidate;
                    }
                    Err((_, why)) => {
                        tracing::warn!(file = %path.display(), key, value, why, "ignoring stored dynamic broker config")
                    }
                }
            }
            let effective = configs.check(scope, &kept).map_err(|(_, why)| anyhow::anyhow!(why))?;
            let state = configs.state.get_mut().unwrap_or_else(|p| p.into_inner());
            *state.set_mut(scope) = kept;
            state.effective = Arc::new(effective);
        }
        Ok(configs)
    }

    /// The broker config in force: static settings with the dynamic sets applied.
    pub fn effective(&self) -> Arc<BrokerConfig> {
        self.read().effective.clone()
    }

    /// The dynamic set of one scope.
    pub fn get(&self, scope: Scope) -> Properties {
        let state = self.read();
        match scope {
            Scope::Broker => state.per_broker.clone(),
            Scope::ClusterDefault => state.cluster_default.clone(),
        }
    }

    /// Settings from `server.properties` and `--override`.
    pub fn static_props(&self) -> &Properties {
        &self.static_props
    }

    /// Maps a BROKER resource name to its scope, with Kafka's errors for any other name.
    pub fn scope_of(&self, resource_name: &str) -> Result<Scope, Refusal> {
        if resource_name.is_empty() {
            return Ok(Scope::ClusterDefault);
        }
        match resource_name.parse::<i32>() {
            Ok(id) if id == self.node_id => Ok(Scope::Broker),
            Ok(_) => Err((
                ResponseError::InvalidRequest,
                format!(
                    "Unexpected broker id, expected {} or empty string, but received {resource_name}",
                    self.node_id
                ),
            )),
            Err(_) => Err((
                ResponseError::InvalidRequest,
                format!("Broker id must be an integer, but it is: {resource_name}"),
            )),
        }
    }

    /// Replaces the set of `scope` with what `change` makes of the current one: validates it,
    /// persists it and publishes the new effective config, which is returned (`None` when
    /// `validate_only`).
    pub fn alter(
        &self,
        scope: Scope,
        validate_only: bool,
        change: impl FnOnce(&Properties) -> Result<Properties, Refusal>,
    ) -> Result<Option<Arc<BrokerConfig>>, Refusal> {
        let _serialized = self.alter.lock().unwrap_or_else(|p| p.into_inner());
        let new_set = change(&self.get(scope))?;
        let effective = self.check(scope, &new_set)?;
        if validate_only {
            return Ok(None);
        }
        self.persist(scope, &new_set)
            .map_err(|e| (ResponseError::KafkaStorageError, format!("cannot persist dynamic broker configs: {e}")))?;
        let effective = Arc::new(effective);
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        *state.set_mut(scope) = new_set;
        state.effective = effective.clone();
        tracing::info!(?scope, "dynamic broker configs updated");
        Ok(Some(effective))
    }

    /// Kafka's checks of a new dynamic set (`DynamicBrokerConfig.validateConfigs`), in its
    /// order: read-only names, then values; then the effective config must parse.
    fn check(&self, scope: Scope, set: &Properties) -> Result<BrokerConfig, Refusal> {
        let invalid = |message: String| (ResponseError::InvalidRequest, message);
        let mut read_only = Vec::new();
        let mut unknown = Vec::new();
        let mut defs = Vec::new();
        for (key, value) in set {
            match defs::lookup(key) {
                Some(def) if def.dynamic => defs.push((def, value)),
                Some(_) => read_only.push(key.as_str()),
                None => unknown.push(key.as_str()),
            }
        }
        if !read_only.is_empty() {
            return Err(invalid(format!("Cannot update these configs dynamically: Set({})", read_only.join(", "))));
        }
        if !unknown.is_empty() {
            // Kafka stores names it does not know; Ketch refuses what it would not apply.
            return Err(invalid(format!("Ketch does not support these broker configs: Set({})", unknown.join(", "))));
        }
        for (def, value) in defs {
            defs::validate(&def, value).map_err(invalid)?;
        }
        let state = self.read();
        let mut merged = self.static_props.clone();
        let (default_set, broker_set) = match scope {
            Scope::ClusterDefault => (set, &state.per_broker),
            Scope::Broker => (&state.cluster_default, set),
        };
        for (key, value) in default_set.iter().chain(broker_set) {
            merged.insert(key.clone(), value.trim().to_string());
        }
        BrokerConfig::from_properties(merged).map_err(|e| invalid(e.to_string()))
    }

    fn path(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::Broker => self.dir.join(format!("broker-{}.properties", self.node_id)),
            Scope::ClusterDefault => self.dir.join("cluster-default.properties"),
        }
    }

    fn persist(&self, scope: Scope, set: &Properties) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut text = String::from("# Dynamic broker configs set with AlterConfigs / IncrementalAlterConfigs.\n");
        for (key, value) in set {
            text.push_str(&format!("{key}={value}\n"));
        }
        crate::log::partition_log::write_atomically(&self.path(scope), text.as_bytes())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn set_mut(&mut self, scope: Scope) -> &mut Properties {
        match scope {
            Scope::Broker => &mut self.per_broker,
            Scope::ClusterDefault => &mut self.cluster_default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker_config(dir: &std::path::Path, extra: &[(&str, &str)]) -> BrokerConfig {
        let mut props = Properties::new();
        props.insert("log.dirs".into(), dir.display().to_string());
        for (k, v) in extra {
            props.insert(k.to_string(), v.to_string());
        }
        BrokerConfig::from_properties(props).unwrap()
    }

    fn set(pairs: &[(&str, &str)]) -> Properties {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn precedence_persistence_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let config = broker_config(dir.path(), &[("log.retention.hours", "24")]);
        let dynamic = DynamicConfigs::open(&config).unwrap();
        assert_eq!(dynamic.effective().topic_defaults.retention_ms, 24 * 3_600_000);

        let cluster = set(&[("log.retention.ms", "5000"), ("message.max.bytes", "2000")]);
        dynamic.alter(Scope::ClusterDefault, false, |_| Ok(cluster.clone())).unwrap();
        assert_eq!(dynamic.effective().topic_defaults.retention_ms, 5000, "cluster default over static");
        dynamic.alter(Scope::Broker, false, |_| Ok(set(&[("log.retention.ms", "7000")]))).unwrap();
        assert_eq!(dynamic.effective().topic_defaults.retention_ms, 7000, "per-broker over cluster default");
        assert_eq!(dynamic.effective().topic_defaults.max_message_bytes, 2000);

        // validate_only changes nothing
        dynamic.alter(Scope::Broker, true, |_| Ok(set(&[("log.retention.ms", "1")]))).unwrap();
        assert_eq!(dynamic.effective().topic_defaults.retention_ms, 7000);

        let refused = |scope, pairs: &[(&str, &str)]| {
            let new = set(pairs);
            dynamic.alter(scope, false, |_| Ok(new)).unwrap_err()
        };
        let (code, message) = refused(Scope::Broker, &[("num.partitions", "4"), ("log.dirs", "/x")]);
        assert_eq!(code, ResponseError::InvalidRequest);
        assert_eq!(message, "Cannot update these configs dynamically: Set(log.dirs, num.partitions)");
        let (_, message) = refused(Scope::ClusterDefault, &[("log.retention.hours", "1")]);
        assert_eq!(message, "Cannot update these configs dynamically: Set(log.retention.hours)");
        let (_, message) = refused(Scope::Broker, &[("log.segment.bytes", "10")]);
        assert_eq!(message, "Invalid value 10 for configuration log.segment.bytes: Value must be at least 1048576");
        assert!(refused(Scope::Broker, &[("num.io.threads", "4")]).1.contains("Ketch does not support"));
        assert_eq!(dynamic.effective().topic_defaults.retention_ms, 7000, "refusals change nothing");

        // a restart keeps both sets
        drop(dynamic);
        let reopened = DynamicConfigs::open(&config).unwrap();
        assert_eq!(reopened.get(Scope::ClusterDefault), cluster);
        assert_eq!(reopened.get(Scope::Broker), set(&[("log.retention.ms", "7000")]));
        assert_eq!(reopened.effective().topic_defaults.retention_ms, 7000);

        // deleting the per-broker value falls back to the cluster default
        reopened.alter(Scope::Broker, false, |_| Ok(Properties::new())).unwrap();
        assert_eq!(reopened.effective().topic_defaults.retention_ms, 5000);
    }

    #[test]
    fn scopes_and_stale_stored_configs() {
        let dir = tempfile::tempdir().unwrap();
        let config = broker_config(dir.path(), &[("node.id", "3")]);
        let configs = dir.path().join(".ketch").join("configs");
        std::fs::create_dir_all(&configs).unwrap();
        std::fs::write(configs.join("broker-3.properties"), "log.segment.bytes=2000000\nnum.partitions=9\n").unwrap();
        let dynamic = DynamicConfigs::open(&config).unwrap();
        assert_eq!(dynamic.get(Scope::Broker), set(&[("log.segment.bytes", "2000000")]), "invalid stored key dropped");
        assert_eq!(dynamic.effective().topic_defaults.segment_bytes, 2_000_000);
        assert_eq!(dynamic.scope_of("").unwrap(), Scope::ClusterDefault);
        assert_eq!(dynamic.scope_of("3").unwrap(), Scope::Broker);
        assert_eq!(
            dynamic.scope_of("1").unwrap_err().1,
            "Unexpected broker id, expected 3 or empty string, but received 1"
        );
    }
}
