//! An image written as records and read back is the same image: one built from a real Kafka 4.1
//! metadata log, and one holding every kind of state the image keeps.

use std::sync::Arc;

use uuid::Uuid;

use super::*;
use crate::metadata::image::{ImageBuilder, MetadataImage};
use crate::metadata::records::{
    AccessControlEntryRecord, BrokerRegistrationChangeRecord, ClientQuotaRecord, DelegationTokenRecord, EntityData,
    PartitionChangeRecord, RegisterControllerRecord,
};

fn build(records: &[MetadataRecord]) -> Arc<MetadataImage> {
    let mut builder = ImageBuilder::new();
    for (offset, record) in records.iter().enumerate() {
        builder.apply(offset as i64, record).unwrap_or_else(|e| panic!("{e}: {record:?}"));
    }
    builder.publish()
}

/// Writes `image` as records, rebuilds it from them and compares (all but the offset).
fn round_trip(image: &MetadataImage) -> Vec<MetadataRecord> {
    let written = records(image);
    let rebuilt = build(&written);
    let mut expected = image.clone();
    expected.offset = rebuilt.offset;
    expected.not_kept.clear();
    assert_eq!(*rebuilt, expected);
    // And written again, the same records in the same order.
    assert_eq!(records(&rebuilt), written);
    written
}

#[test]
fn kafkas_metadata_log_image_survives_being_written_as_records() {
    let log: Vec<MetadataRecord> =
        crate::metadata::image::tests::kafka_log().into_iter().map(|(_, record)| record).collect();
    let image = build(&log);
    assert!(!image.topics.is_empty() && !image.acls.is_empty() && image.next_producer_id > 0);
    let written = round_trip(&image);
    assert!(written.len() < log.len(), "a snapshot holds the state, not the history");
    assert!(
        matches!(&written[0], MetadataRecord::FeatureLevel(f) if f.name == "metadata.version"),
        "metadata.version first"
    );
}

#[test]
fn every_kind_of_state_survives_being_written_as_records() {
    let topic = Uuid::from_u128(11);
    let dir = Uuid::from_u128(12);
    let mut log = crate::metadata::image::tests::kafka_log()
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| matches!(r, MetadataRecord::FeatureLevel(_) | MetadataRecord::RegisterBroker(_)))
        .collect::<Vec<_>>();
    let broker = match log.iter().find(|r| matches!(r, MetadataRecord::RegisterBroker(_))) {
        Some(MetadataRecord::RegisterBroker(b)) => b.clone(),
        _ => panic!("the capture registers a broker"),
    };
    log.extend([
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: broker.broker_id,
            broker_epoch: broker.broker_epoch,
            fenced: -1,
            in_controlled_shutdown: 1,
            log_dirs: vec![dir],
            ..Default::default()
        }),
        MetadataRecord::RegisterController(RegisterControllerRecord {
            controller_id: 3000,
            incarnation_id: Uuid::from_u128(13),
            ..Default::default()
        }),
        MetadataRecord::Topic(crate::metadata::records::TopicRecord {
            name: "t".into(),
            topic_id: topic,
            ..Default::default()
        }),
        MetadataRecord::Partition(PartitionRecord {
            partition_id: 0,
            topic_id: topic,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            adding_replicas: vec![3],
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 9,
            directories: vec![dir, dir, dir],
            ..Default::default()
        }),
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: topic,
            partition_id: 0,
            eligible_leader_replicas: Some(vec![2]),
            last_known_elr: Some(vec![3]),
            leader: crate::metadata::image::NO_LEADER_CHANGE,
            ..Default::default()
        }),
        MetadataRecord::Config(ConfigRecord {
            resource_type: crate::metadata::image::TOPIC_RESOURCE,
            resource_name: "t".into(),
            name: "retention.ms".into(),
            value: Some("5".into()),
            ..Default::default()
        }),
        MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: vec![EntityData { entity_type: "user".into(), entity_name: None, ..Default::default() }],
            key: "producer_byte_rate".into(),
            value: 1024.0,
            ..Default::default()
        }),
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: broker.broker_epoch,
            next_producer_id: 2000,
            ..Default::default()
        }),
        MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
            id: Uuid::from_u128(14),
            resource_type: 2,
            resource_name: "t".into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
            ..Default::default()
        }),
        MetadataRecord::UserScramCredential(UserScramCredentialRecord {
            name: "alice".into(),
            mechanism: 1,
            salt: vec![1, 2],
            stored_key: vec![3],
            server_key: vec![4],
            iterations: 4096,
            ..Default::default()
        }),
        MetadataRecord::DelegationToken(DelegationTokenRecord {
            owner: "User:alice".into(),
            requester: "User:alice".into(),
            renewers: vec!["User:bob".into()],
            issue_timestamp: 1,
            max_timestamp: 3,
            expiration_timestamp: 2,
            token_id: "tok".into(),
            ..Default::default()
        }),
    ]);
    let image = build(&log);
    let b = &image.brokers[&broker.broker_id];
    assert!(!b.fenced && b.in_controlled_shutdown && b.log_dirs == vec![dir], "{b:?}");
    assert_eq!(image.topic("t").expect("t").partitions[&0].eligible_leader_replicas, vec![2]);
    assert!(!image.quotas.is_empty() && !image.scram.is_empty() && !image.delegation_tokens.is_empty());
    assert_eq!(image.controllers.len(), 1);
    round_trip(&image);
}
