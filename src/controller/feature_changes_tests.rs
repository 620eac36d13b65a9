//! UpdateFeatures on the controller: Kafka's refusals and messages, and the ELR safety records.

use super::*;
use crate::controller::test_cluster::Cluster;

fn update(name: &str, level: i16, upgrade_type: i8) -> Update {
    (name.to_string(), level, upgrade_type)
}

fn refusal(c: &Cluster, updates: &[Update]) -> String {
    update_features(&c.image, 3000, 2, updates, false).unwrap_err().1
}

#[test]
fn elr_upgrade_writes_the_level_and_the_min_isr_safety_records() {
    let mut c = Cluster::new();
    c.set_config(BROKER_RESOURCE, "1", MIN_ISR, "3");
    c.set_config(BROKER_RESOURCE, "1", "log.retention.ms", "5");
    let records = update_features(&c.image, 3000, 2, &[update(ELR_FEATURE, 1, UPGRADE)], false).unwrap();
    assert_eq!(records.len(), 3, "{records:?}");
    assert!(matches!(&records[0], MetadataRecord::FeatureLevel(r) if r.name == ELR_FEATURE && r.feature_level == 1));
    let cluster_min_isr = |r: &MetadataRecord| matches!(r, MetadataRecord::Config(r) if r.resource_name.is_empty() && r.value.as_deref() == Some("2"));
    assert!(cluster_min_isr(&records[1]), "{records:?}");
    assert!(
        matches!(&records[2], MetadataRecord::Config(r) if r.resource_name == "1" && r.name == MIN_ISR && r.value.is_none())
    );
    c.apply(&records);
    assert!(crate::controller::elr::enabled(&c.image));
    assert!(!c.image.configs[&(BROKER_RESOURCE, "1".to_string())].contains_key(MIN_ISR));
    // Already on: only the level.
    let again = update_features(&c.image, 3000, 2, &[update(ELR_FEATURE, 1, UPGRADE)], false).unwrap();
    assert_eq!(again.len(), 1);
    // Downgrade: safe, the level only.
    let down = update_features(&c.image, 3000, 2, &[update(ELR_FEATURE, 0, SAFE_DOWNGRADE)], false).unwrap();
    assert!(matches!(&down[..], [MetadataRecord::FeatureLevel(r)] if r.feature_level == 0));
    assert!(update_features(&c.image, 3000, 2, &[update(ELR_FEATURE, 0, SAFE_DOWNGRADE)], true).unwrap().is_empty());
}

#[test]
fn kafkas_refusals() {
    let mut c = Cluster::new();
    let prefix = |f: &str, l: i16| format!("Invalid update version {l} for feature {f}. ");
    assert_eq!(
        refusal(&c, &[update(ELR_FEATURE, 1, 0)]),
        prefix(ELR_FEATURE, 1) + "The controller does not support the given upgrade type."
    );
    assert_eq!(
        refusal(&c, &[update(ELR_FEATURE, -1, UPGRADE)]),
        prefix(ELR_FEATURE, -1) + "A feature version cannot be less than 0."
    );
    assert_eq!(
        refusal(&c, &[update(ELR_FEATURE, 2, UPGRADE)]),
        prefix(ELR_FEATURE, 2) + "Local controller 3000 only supports versions 0-1"
    );
    assert_eq!(
        refusal(&c, &[update("nope", 1, UPGRADE)]),
        prefix("nope", 1) + "Local controller 3000 does not support this feature."
    );
    c.add_broker(1, None, false);
    assert_eq!(
        refusal(&c, &[update(ELR_FEATURE, 1, UPGRADE)]),
        prefix(ELR_FEATURE, 1) + "Broker 1 does not support this feature."
    );
    let mut c = Cluster::new();
    c.apply(&[MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: "metadata.version".into(),
        feature_level: 22,
        ..Default::default()
    })]);
    assert_eq!(
        refusal(&c, &[update(ELR_FEATURE, 1, UPGRADE)]),
        prefix(ELR_FEATURE, 1)
            + "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"
    );
    assert!(update_features(
        &c.image,
        3000,
        2,
        &[update("metadata.version", 23, UPGRADE), update(ELR_FEATURE, 1, UPGRADE)],
        false
    )
    .is_ok());
    // 4.0-IV0 (22) down to 3.9-IV0 (21) or 3.7-IV2 (17) changes no metadata record: allowed, as
    // in Kafka 4.1; down to 3.7-IV1 (16) undoes 3.7-IV2's change.
    for (level, kind) in [(21, SAFE_DOWNGRADE), (17, SAFE_DOWNGRADE), (21, UNSAFE_DOWNGRADE)] {
        let records = update_features(&c.image, 3000, 2, &[update("metadata.version", level, kind)], false);
        assert!(
            matches!(&records.as_deref(), Ok([MetadataRecord::FeatureLevel(f)]) if f.feature_level == level),
            "{records:?}"
        );
    }
    assert_eq!(
        refusal(&c, &[update("metadata.version", 16, SAFE_DOWNGRADE)]),
        "Invalid metadata.version 16. Refusing to perform the requested downgrade because it might delete metadata information."
    );
    assert_eq!(
        refusal(&c, &[update("metadata.version", 16, UNSAFE_DOWNGRADE)]),
        "Invalid metadata.version 16. Unsafe metadata downgrade is not supported in this version."
    );
    assert_eq!(
        refusal(&c, &[update("metadata.version", 21, UPGRADE)]),
        prefix("metadata.version", 21) + "Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
    );
    assert_eq!(
        refusal(&c, &[update("metadata.version", 23, SAFE_DOWNGRADE)]),
        prefix("metadata.version", 23) + "Can't downgrade to a newer version."
    );
}
