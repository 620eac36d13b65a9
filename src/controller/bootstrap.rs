//! The bootstrap metadata of a new Ketch cluster (Kafka's `BootstrapMetadata`, which
//! `kafka-storage format` writes into the controller's `bootstrap.checkpoint`): the finalized
//! feature levels chosen at format time (`ketch format --feature name=level`) and the SCRAM
//! credentials (`--add-scram`), written by the controller into its new metadata log at its
//! first start (`records`), never afterwards.
//!
//! Levels follow Kafka 4.1's `Formatter.calculateEffectiveFeatureLevels`: `metadata.version` as
//! given (default 4.1-IV1, Kafka 4.1's latest production level), every other feature this
//! controller supports at the level given or else at its default for that `metadata.version`
//! (the highest level whose bootstrap metadata version it reaches), then every level checked
//! against what this controller supports and against its dependencies, with Kafka's messages.
//! `kraft.version` belongs to the quorum, not to the metadata: a single static voter runs at 0.
//!
//! On disk: `<metadata dir>/.ketch/bootstrap.properties`, Java properties syntax, one
//! `<feature>=<level>` per feature above level 0 (written by `ketch format` on a controller
//! node); absent = the defaults (a directory formatted by the first start, or by an older
//! Ketch). The credentials are `security::scram_store`'s file in the same directory.
//! Invariants: the levels written are the effective levels (checked before writing); the
//! cluster-wide `min.insync.replicas` is bootstrapped exactly when ELR is on, as `elr::enabled`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::elr::{ELR_FEATURE, ELR_METADATA_VERSION};
use crate::config::parse_properties;
use crate::log::partition_log::write_atomically;
use crate::metadata::image::BROKER_RESOURCE;
use crate::metadata::records::{ConfigRecord, FeatureLevelRecord, MetadataRecord};
use crate::node::lifecycle::SUPPORTED_FEATURES;

pub const METADATA_VERSION: &str = "metadata.version";
pub const KRAFT_VERSION: &str = "kraft.version";
const TRANSACTION_VERSION: &str = "transaction.version";
const GROUP_VERSION: &str = "group.version";

/// Kafka 4.1's `MetadataVersion.LATEST_PRODUCTION` (4.1-IV1): a new cluster's level.
pub const LATEST_METADATA_VERSION: i16 = 27;

/// A feature level: (level, the lowest `metadata.version` it is a default at, the
/// `metadata.version` it needs).
type Level = (i16, i16, i16);

/// For each feature besides `metadata.version` and `kraft.version`: its name and levels, from
/// Kafka 4.1's `FeatureVersion`s: 4.0-IV2 (24) for transaction versions, 4.0-IV0 (22) for group
/// version 1, 4.1-IV0 (26) for ELR by default, needing 4.0-IV1 (23).
const LEVELS: &[(&str, &[Level])] = &[
    (TRANSACTION_VERSION, &[(1, 24, 0), (2, 24, 0)]),
    (GROUP_VERSION, &[(1, 22, 0)]),
    (ELR_FEATURE, &[(1, 26, ELR_METADATA_VERSION)]),
];

/// The levels of a new cluster formatted with `requested` (name, level) pairs (Kafka's
/// formatter rules and messages); features at level 0 are left out.
pub fn effective_levels(requested: &[(String, i16)]) -> Result<BTreeMap<String, i16>, String> {
    let supported = |name: &str| SUPPORTED_FEATURES.iter().find(|f| f.0 == name).map(|f| (f.1, f.2));
    for (name, _) in requested {
        if supported(name).is_none() {
            let names: Vec<&str> = SUPPORTED_FEATURES.iter().map(|f| f.0).collect();
            return Err(format!("Unsupported feature: {name}. Supported features are: {}", names.join(", ")));
        }
    }
    let given = |name: &str| requested.iter().rev().find(|(n, _)| n == name).map(|(_, level)| *level);
    let metadata_version = given(METADATA_VERSION).unwrap_or(LATEST_METADATA_VERSION);
    let (min, max) = supported(METADATA_VERSION).unwrap_or((0, 0));
    if !(min..=max).contains(&metadata_version) {
        return Err(format!("Unknown metadata.version {metadata_version}. Supported metadata.version are {min}-{max}"));
    }
    if let Some(level) = given(KRAFT_VERSION).filter(|level| *level != 0) {
        return Err(format!(
            "Cannot set kraft.version to {level} unless KIP-853 configuration is present. Try removing the \
             --feature flag for kraft.version."
        ));
    }
    let mut levels = BTreeMap::from([(METADATA_VERSION.to_string(), metadata_version)]);
    for (name, known) in LEVELS {
        let default = known.iter().filter(|(_, from, _)| metadata_version >= *from).map(|(l, _, _)| *l).max();
        let level = given(name).unwrap_or(default.unwrap_or(0));
        let (min, max) = supported(name).unwrap_or((0, 0));
        if !(min..=max).contains(&level) {
            return Err(format!("No feature:{name} with feature level {level}"));
        }
        let needs = known.iter().find(|(l, _, _)| *l == level).map_or(0, |(_, _, needs)| *needs);
        if metadata_version < needs {
            return Err(format!(
                "{name} could not be set to {level} because it depends on {METADATA_VERSION} level {needs}"
            ));
        }
        if level > 0 {
            levels.insert(name.to_string(), level);
        }
    }
    Ok(levels)
}

fn path(metadata_dir: &Path) -> PathBuf {
    metadata_dir.join(".ketch").join("bootstrap.properties")
}

/// Writes the (effective) `levels` for the controller's first start.
pub fn write(metadata_dir: &Path, levels: &BTreeMap<String, i16>) -> std::io::Result<()> {
    let path = path(metadata_dir);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text: String = levels.iter().map(|(name, level)| format!("{name}={level}\n")).collect();
    write_atomically(&path, text.as_bytes())
}

/// The levels `ketch format` wrote in `metadata_dir`, checked again; the defaults when it wrote
/// none.
pub fn read(metadata_dir: &Path) -> anyhow::Result<BTreeMap<String, i16>> {
    let path = path(metadata_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return effective_levels(&[]).map_err(anyhow::Error::msg),
        Err(e) => return Err(e.into()),
    };
    let props = parse_properties(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut requested = Vec::new();
    for (name, value) in props {
        let level =
            value.trim().parse().map_err(|_| anyhow::anyhow!("{}: bad level of {name}: {value:?}", path.display()))?;
        requested.push((name, level));
    }
    // A feature the file leaves out is at level 0 (not its default).
    for (name, _) in LEVELS {
        if !requested.iter().any(|(n, _)| n == name) {
            requested.push((name.to_string(), 0));
        }
    }
    effective_levels(&requested).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The records a new metadata log starts with: a FeatureLevelRecord per level
/// (`metadata.version` first, as Kafka's bootstrap), the cluster-wide `min.insync.replicas`
/// (`min_insync_replicas`) when ELR is on, then the SCRAM credentials (`scram`).
pub fn records(
    levels: &BTreeMap<String, i16>,
    min_insync_replicas: i32,
    scram: Vec<MetadataRecord>,
) -> Vec<MetadataRecord> {
    let feature = |name: &str, level: i16| {
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: name.to_string(),
            feature_level: level,
            ..Default::default()
        })
    };
    let mut out: Vec<MetadataRecord> =
        levels.get(METADATA_VERSION).map(|l| feature(METADATA_VERSION, *l)).into_iter().collect();
    out.extend(levels.iter().filter(|(name, _)| *name != METADATA_VERSION).map(|(name, level)| feature(name, *level)));
    let elr = levels.get(ELR_FEATURE).is_some_and(|l| *l >= 1)
        && levels.get(METADATA_VERSION).is_some_and(|l| *l >= ELR_METADATA_VERSION);
    if elr {
        out.push(MetadataRecord::Config(ConfigRecord {
            resource_type: BROKER_RESOURCE,
            resource_name: String::new(),
            name: "min.insync.replicas".to_string(),
            value: Some(min_insync_replicas.to_string()),
            ..Default::default()
        }));
    }
    out.extend(scram);
    out
}

#[cfg(test)]
#[path = "bootstrap_tests.rs"]
mod tests;
