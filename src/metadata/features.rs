//! Finalized features (KIP-584) of a single node: the level of each cluster-wide feature it runs
//! at, advertised in ApiVersions and changed with UpdateFeatures (`kafka-features upgrade /
//! downgrade`), following Kafka 4.1's controller rules (`FeatureControlManager`). A broker of a
//! controller quorum does not use this store: its levels are the quorum's (FeatureLevelRecords in
//! the metadata image), changed through the controller (`handlers::forward`).
//!
//! Only `transaction.version` exists here (levels 0-2, finalized at 2 on a new node as on a new
//! Kafka 4.1 cluster): level 2 tells clients to use transaction protocol 2 (KIP-890 part 2),
//! lower levels make them use protocol 1. The coordinator serves both per request version in
//! any case; the level decides what clients choose, the version of `__transaction_state`
//! values, and the protocol of coordinator-initiated aborts.
//!
//! On disk: `<first log dir>/.ketch/features.properties`, Java properties syntax:
//! `epoch=<n>` and `<feature>=<level>` for every finalized feature; absent = the defaults at
//! epoch 1. Replaced atomically.
//! Invariants: a feature at level 0 is not finalized (not listed); the epoch grows with every
//! change (Java clients re-read features only when it grows); an update is all or nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kafka_protocol::error::ResponseError;

use crate::config::parse_properties;
use crate::log::partition_log::write_atomically;

pub const TRANSACTION_VERSION: &str = "transaction.version";

/// Features this node supports: (name, lowest level, highest level, level on a new node).
pub const SUPPORTED: &[(&str, i16, i16, i16)] = &[(TRANSACTION_VERSION, 0, 2, 2)];

/// Kafka's `FeatureUpdate.UpgradeType` codes.
pub const UPGRADE: i8 = 1;
pub const SAFE_DOWNGRADE: i8 = 2;
pub const UNSAFE_DOWNGRADE: i8 = 3;

/// A snapshot of the finalized features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finalized {
    pub epoch: i64,
    /// Features above level 0, by name.
    pub levels: BTreeMap<String, i16>,
}

impl Finalized {
    fn defaults() -> Finalized {
        let levels =
            SUPPORTED.iter().filter(|f| f.3 > 0).map(|(name, _, _, level)| (name.to_string(), *level)).collect();
        Finalized { epoch: 1, levels }
    }

    pub fn level(&self, name: &str) -> i16 {
        self.levels.get(name).copied().unwrap_or(0)
    }
}

pub struct Features {
    path: PathBuf,
    /// Named in refusals, as Kafka names its controller.
    node_id: i32,
    current: Mutex<Finalized>,
}

/// An update refused: Kafka's INVALID_UPDATE_VERSION and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub ResponseError, pub String);

impl Features {
    /// Reads the finalized features of the node whose metadata lives in `log_dir`.
    pub fn open(log_dir: &Path, node_id: i32) -> anyhow::Result<Features> {
        let path = log_dir.join(".ketch").join("features.properties");
        let current = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let props = parse_properties(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                let mut levels = BTreeMap::new();
                let mut epoch = 1;
                for (key, value) in props {
                    if key == "epoch" {
                        epoch =
                            value.parse().map_err(|_| anyhow::anyhow!("{}: bad epoch {value:?}", path.display()))?;
                    } else {
                        let level: i16 = value
                            .parse()
                            .map_err(|_| anyhow::anyhow!("{}: bad level of {key}: {value:?}", path.display()))?;
                        let Some((_, min, max, _)) = SUPPORTED.iter().find(|f| f.0 == key) else {
                            anyhow::bail!("{}: finalized feature {key} is not supported by this Ketch", path.display());
                        };
                        anyhow::ensure!(
                            (*min..=*max).contains(&level),
                            "{}: {key} is finalized at {level}; this Ketch supports {min}-{max}",
                            path.display()
                        );
                        if level > 0 {
                            levels.insert(key, level);
                        }
                    }
                }
                Finalized { epoch, levels }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Finalized::defaults(),
            Err(e) => return Err(e.into()),
        };
        Ok(Features { path, node_id, current: Mutex::new(current) })
    }

    pub fn finalized(&self) -> Finalized {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn level(&self, name: &str) -> i16 {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).level(name)
    }

    /// UpdateFeatures: applies every (feature, level, upgrade type) or none. Kafka's checks, in
    /// its order, with its messages.
    pub fn update(&self, updates: &[(String, i16, i8)], validate_only: bool) -> Result<(), Refused> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = current.clone();
        for (name, level, upgrade_type) in updates {
            let invalid = |why: String| {
                Refused(
                    ResponseError::InvalidUpdateVersion,
                    format!("Invalid update version {level} for feature {name}. {why}"),
                )
            };
            if !matches!(*upgrade_type, UPGRADE | SAFE_DOWNGRADE | UNSAFE_DOWNGRADE) {
                return Err(invalid("The controller does not support the given upgrade type.".into()));
            }
            if *level < 0 {
                return Err(invalid("A feature version cannot be less than 0.".into()));
            }
            let (min, max) = SUPPORTED.iter().find(|f| f.0 == name).map_or((0, 0), |f| (f.1, f.2));
            if !(min..=max).contains(level) {
                let why = if max == 0 {
                    format!("Local controller {} does not support this feature.", self.node_id)
                } else {
                    format!("Local controller {} only supports versions {min}-{max}", self.node_id)
                };
                return Err(invalid(why));
            }
            let now = current.level(name);
            if *level < now && *upgrade_type == UPGRADE {
                return Err(invalid(
                    "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
                        .into(),
                ));
            }
            if *level > now && *upgrade_type != UPGRADE {
                return Err(invalid("Can't downgrade to a newer version.".into()));
            }
            if *level == 0 {
                next.levels.remove(name);
            } else {
                next.levels.insert(name.clone(), *level);
            }
        }
        if validate_only || next.levels == current.levels {
            return Ok(());
        }
        next.epoch = current.epoch + 1;
        self.save(&next).map_err(|e| {
            tracing::error!(error = %e, "cannot write {}", self.path.display());
            Refused(ResponseError::KafkaStorageError, e.to_string())
        })?;
        tracing::info!(features = ?next.levels, epoch = next.epoch, "finalized features updated");
        *current = next;
        Ok(())
    }

    fn save(&self, finalized: &Finalized) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = format!("epoch={}\n", finalized.epoch);
        for (name, level) in &finalized.levels {
            text.push_str(&format!("{name}={level}\n"));
        }
        write_atomically(&self.path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update(f: &Features, level: i16, upgrade_type: i8) -> Result<(), Refused> {
        f.update(&[(TRANSACTION_VERSION.to_string(), level, upgrade_type)], false)
    }

    #[test]
    fn transaction_version_starts_at_2_and_changes_by_kafkas_rules_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let f = Features::open(dir.path(), 1).unwrap();
        assert_eq!(f.finalized(), Finalized { epoch: 1, levels: [(TRANSACTION_VERSION.to_string(), 2)].into() });
        let refused = update(&f, 1, UPGRADE).unwrap_err();
        assert_eq!(refused.0, ResponseError::InvalidUpdateVersion);
        assert!(refused.1.starts_with("Invalid update version 1 for feature transaction.version. Can't downgrade"));
        assert_eq!(
            update(&f, 3, UPGRADE).unwrap_err().1,
            "Invalid update version 3 for feature transaction.version. Local controller 1 only supports versions 0-2"
        );
        assert_eq!(update(&f, 2, UPGRADE), Ok(()), "no change: no new epoch");
        assert_eq!(f.finalized().epoch, 1);
        f.update(&[(TRANSACTION_VERSION.to_string(), 1, SAFE_DOWNGRADE)], true).unwrap();
        assert_eq!(f.level(TRANSACTION_VERSION), 2, "validate only");
        update(&f, 1, SAFE_DOWNGRADE).unwrap();
        assert_eq!((f.level(TRANSACTION_VERSION), f.finalized().epoch), (1, 2));
        assert!(update(&f, 2, SAFE_DOWNGRADE).unwrap_err().1.ends_with("Can't downgrade to a newer version."));
        update(&f, 0, UNSAFE_DOWNGRADE).unwrap();
        let reopened = Features::open(dir.path(), 1).unwrap();
        assert_eq!(reopened.finalized(), Finalized { epoch: 3, levels: BTreeMap::new() });
        update(&reopened, 2, UPGRADE).unwrap();
        assert_eq!(Features::open(dir.path(), 1).unwrap().finalized().epoch, 4);
        let unknown = f.update(&[("group.version".to_string(), 1, UPGRADE)], false).unwrap_err();
        assert!(unknown.1.ends_with("Local controller 1 does not support this feature."));
    }
}
