//! UpdateFeatures on a Ketch controller (Kafka's `FeatureControlManager.updateFeatures`, with
//! the ELR safety records of Kafka 4.1's `ConfigurationControlManager`): the FeatureLevelRecords
//! changing the finalized levels, or Kafka's refusal of the whole update.
//!
//! Per update, in Kafka's order: an unknown upgrade type, a level below 0, a level this
//! controller does not support, then one some registered broker does not support, a downgrade
//! asked as an upgrade (or an upgrade asked as a downgrade), then a level whose dependencies the
//! proposed levels do not meet (`eligible.leader.replicas.version` 1 needs `metadata.version`
//! 4.0-IV1). `metadata.version` is downgraded only past levels that did not change the metadata
//! records (Kafka 4.1 refuses a downgrade that might delete metadata: 4.1-IV1 down to 4.0-IV1
//! goes, to 4.0-IV0 does not).
//!
//! Turning ELR on (Kafka 4.1): the cluster-level `min.insync.replicas` is written (this
//! controller's static value) when missing, and every broker-level `min.insync.replicas` is
//! removed (ELR reads only the topic and cluster values).
//! Invariants: a refused update yields no record; `validate_only` yields none either; a level
//! unchanged is still written (as Kafka does), so the finalized features epoch moves.

use kafka_protocol::error::ResponseError;

use super::elr::{ELR_FEATURE, ELR_METADATA_VERSION};
use crate::metadata::image::{MetadataImage, BROKER_RESOURCE};
use crate::metadata::records::{ConfigRecord, FeatureLevelRecord, MetadataRecord};
use crate::node::lifecycle::SUPPORTED_FEATURES;

/// Kafka's `FeatureUpdate.UpgradeType` codes.
pub const UPGRADE: i8 = 1;
pub const SAFE_DOWNGRADE: i8 = 2;
pub const UNSAFE_DOWNGRADE: i8 = 3;
const METADATA_VERSION: &str = "metadata.version";
const MIN_ISR: &str = "min.insync.replicas";

/// One feature update: name, level, upgrade type.
pub type Update = (String, i16, i8);

/// The records making `updates` (all or none), decided on `image` by controller `node_id`
/// whose static `min.insync.replicas` is `min_insync_replicas`.
pub fn update_features(
    image: &MetadataImage,
    node_id: i32,
    min_insync_replicas: i32,
    updates: &[Update],
    validate_only: bool,
) -> Result<Vec<MetadataRecord>, (ResponseError, String)> {
    let mut proposed = image.features.clone();
    for (name, level, _) in updates {
        proposed.insert(name.clone(), *level);
    }
    let mut records = Vec::new();
    for (name, level, upgrade_type) in updates {
        let invalid = |why: String| {
            (ResponseError::InvalidUpdateVersion, format!("Invalid update version {level} for feature {name}. {why}"))
        };
        if !matches!(*upgrade_type, UPGRADE | SAFE_DOWNGRADE | UNSAFE_DOWNGRADE) {
            return Err(invalid("The controller does not support the given upgrade type.".into()));
        }
        let current = image.features.get(name).copied().unwrap_or(0);
        if *level < 0 {
            return Err(invalid("A feature version cannot be less than 0.".into()));
        }
        let local = SUPPORTED_FEATURES.iter().find(|f| f.0 == name).map_or((0, 0), |f| (f.1, f.2));
        if let Some(why) = not_supported(*level, &format!("Local controller {node_id}"), local) {
            return Err(invalid(why));
        }
        for broker in image.brokers.values() {
            let range = broker.supported_features.get(name.as_str()).copied().unwrap_or((0, 0));
            if let Some(why) = not_supported(*level, &format!("Broker {}", broker.id), range) {
                return Err(invalid(why));
            }
        }
        if *level < current && *upgrade_type == UPGRADE {
            return Err(invalid(
                "Can't downgrade the version of this feature without setting the upgrade type to either safe or \
                 unsafe downgrade."
                    .into(),
            ));
        }
        if *level > current && *upgrade_type != UPGRADE {
            return Err(invalid("Can't downgrade to a newer version.".into()));
        }
        if name == METADATA_VERSION {
            if *level < current && metadata_changed(*level, current) {
                let why = if *upgrade_type == UNSAFE_DOWNGRADE {
                    "Unsafe metadata downgrade is not supported in this version."
                } else {
                    "Refusing to perform the requested downgrade because it might delete metadata information."
                };
                return Err((ResponseError::InvalidUpdateVersion, format!("Invalid metadata.version {level}. {why}")));
            }
        } else if let Some(needed) = metadata_version_needed(name, *level) {
            if proposed.get(METADATA_VERSION).is_none_or(|mv| *mv < needed) {
                return Err(invalid(format!(
                    "{name} could not be set to {level} because it depends on {METADATA_VERSION} level {needed}"
                )));
            }
        }
        records.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: name.clone(),
            feature_level: *level,
            ..Default::default()
        }));
    }
    if validate_only {
        return Ok(Vec::new());
    }
    let elr_before = super::elr::enabled(image);
    let elr_after = proposed.get(ELR_FEATURE).is_some_and(|l| *l >= 1)
        && proposed.get(METADATA_VERSION).is_some_and(|l| *l >= ELR_METADATA_VERSION);
    if elr_after && !elr_before {
        records.extend(elr_safety_records(image, min_insync_replicas));
    }
    Ok(records)
}

/// The `metadata.version` levels whose metadata records changed (Kafka 4.1's
/// `MetadataVersion.didMetadataChange`: 3.3-IV3, 3.4-IV0, 3.5-IV2, 3.6-IV1, 3.6-IV2, 3.7-IV0,
/// 3.7-IV2, 4.0-IV1).
const METADATA_CHANGED: &[i16] = &[7, 8, 11, 13, 14, 15, 17, 23];

/// Kafka's `MetadataVersion.checkIfMetadataChanged` for a downgrade from `current` to `level`:
/// whether a level above `level`, up to `current`, changed the metadata records.
fn metadata_changed(level: i16, current: i16) -> bool {
    METADATA_CHANGED.iter().any(|changed| (level + 1..=current).contains(changed))
}

/// Kafka's `QuorumFeatures.reasonNotSupported`.
fn not_supported(level: i16, what: &str, (min, max): (i16, i16)) -> Option<String> {
    if (min..=max).contains(&level) {
        None
    } else if max == 0 {
        Some(format!("{what} does not support this feature."))
    } else {
        Some(format!("{what} only supports versions {min}-{max}"))
    }
}

/// The `metadata.version` level a feature level depends on (Kafka's `FeatureVersion`
/// dependencies), when it has one this controller knows of.
fn metadata_version_needed(name: &str, level: i16) -> Option<i16> {
    match (name, level) {
        (ELR_FEATURE, 1..) => Some(ELR_METADATA_VERSION),
        _ => None,
    }
}

/// Kafka 4.1's `maybeGenerateElrSafetyRecords`: the cluster-level min ISR when missing, and no
/// broker-level one.
fn elr_safety_records(image: &MetadataImage, min_insync_replicas: i32) -> Vec<MetadataRecord> {
    let config = |resource_name: &str, value: Option<String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: BROKER_RESOURCE,
            resource_name: resource_name.to_string(),
            name: MIN_ISR.to_string(),
            value,
            ..Default::default()
        })
    };
    let mut records = Vec::new();
    let cluster = image.configs.get(&(BROKER_RESOURCE, String::new()));
    if cluster.is_none_or(|c| !c.contains_key(MIN_ISR)) {
        records.push(config("", Some(min_insync_replicas.to_string())));
    }
    for ((resource_type, name), configs) in &image.configs {
        if *resource_type == BROKER_RESOURCE && !name.is_empty() && configs.contains_key(MIN_ISR) {
            records.push(config(name, None));
        }
    }
    records
}

#[cfg(test)]
#[path = "feature_changes_tests.rs"]
mod feature_changes_tests;
