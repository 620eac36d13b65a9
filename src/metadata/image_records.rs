//! The metadata image written back as metadata records (Kafka's `MetadataImage.write`): the
//! records that rebuild the image from nothing, what a KRaft snapshot holds (`raft::snapshot`).
//!
//! Order, as Kafka's image writes it: features (`metadata.version` first, since what other
//! records mean depends on it), cluster-level state (brokers, controllers), topics with their
//! partitions, configs, client quotas, the producer-id block, ACLs, SCRAM credentials,
//! delegation tokens. Within each, a stable order (ids, names), so one image always writes the
//! same records.
//!
//! Invariant (tested): applying `records(image)` to an empty image gives `image` back, except
//! for the offset (a snapshot's records all sit at the offset before its end) and the count of
//! record kinds the image does not keep.

use super::image::MetadataImage;
use super::records::{
    BrokerEndpoint, BrokerFeature, ConfigRecord, FeatureLevelRecord, MetadataRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, TopicRecord, UserScramCredentialRecord,
};

const METADATA_VERSION: &str = "metadata.version";

/// The records that rebuild `image` from an empty one.
pub fn records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    let feature = |name: &str, level: i16| {
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: name.to_string(),
            feature_level: level,
            ..Default::default()
        })
    };
    if let Some(&level) = image.features.get(METADATA_VERSION) {
        out.push(feature(METADATA_VERSION, level));
    }
    for (name, &level) in image.features.iter().filter(|(n, _)| *n != METADATA_VERSION) {
        out.push(feature(name, level));
    }
    for broker in image.brokers.values() {
        out.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: broker.id,
            incarnation_id: broker.incarnation_id,
            broker_epoch: broker.epoch,
            end_points: broker
                .endpoints
                .iter()
                .map(|e| BrokerEndpoint {
                    name: e.listener.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    security_protocol: e.security_protocol,
                    ..Default::default()
                })
                .collect(),
            features: broker
                .supported_features
                .iter()
                .map(|(name, &(min, max))| BrokerFeature {
                    name: name.clone(),
                    min_supported_version: min,
                    max_supported_version: max,
                    ..Default::default()
                })
                .collect(),
            rack: broker.rack.clone(),
            fenced: broker.fenced,
            in_controlled_shutdown: broker.in_controlled_shutdown,
            log_dirs: broker.log_dirs.clone(),
            ..Default::default()
        }));
    }
    for controller in image.controllers.values() {
        out.push(MetadataRecord::RegisterController(controller.clone()));
    }
    let mut topics: Vec<_> = image.topics.values().collect();
    topics.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    for topic in topics {
        out.push(MetadataRecord::Topic(TopicRecord {
            name: topic.name.clone(),
            topic_id: topic.id,
            ..Default::default()
        }));
        for (&partition_id, p) in &topic.partitions {
            let some_if_any = |v: &Vec<i32>| (!v.is_empty()).then(|| v.clone());
            out.push(MetadataRecord::Partition(PartitionRecord {
                partition_id,
                topic_id: topic.id,
                replicas: p.replicas.clone(),
                isr: p.isr.clone(),
                removing_replicas: p.removing_replicas.clone(),
                adding_replicas: p.adding_replicas.clone(),
                leader: p.leader,
                leader_recovery_state: p.leader_recovery_state,
                leader_epoch: p.leader_epoch,
                partition_epoch: p.partition_epoch,
                directories: p.directories.clone(),
                eligible_leader_replicas: some_if_any(&p.eligible_leader_replicas),
                last_known_elr: some_if_any(&p.last_known_elr),
                ..Default::default()
            }));
        }
    }
    for ((resource_type, resource_name), configs) in &image.configs {
        for (name, value) in configs {
            out.push(MetadataRecord::Config(ConfigRecord {
                resource_type: *resource_type,
                resource_name: resource_name.clone(),
                name: name.clone(),
                value: Some(value.clone()),
                ..Default::default()
            }));
        }
    }
    let quotas = image.quotas.iter().flat_map(|(entity, values)| {
        values.iter().map(|(key, value)| crate::quota::entity::Change {
            entity: entity.clone(),
            key: key.clone(),
            value: Some(*value),
        })
    });
    out.extend(crate::quota::store::records_of(quotas));
    if image.next_producer_id > 0 {
        // (Kafka's ProducerIdsImage writes the block's end with no broker.)
        out.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: -1,
            broker_epoch: -1,
            next_producer_id: image.next_producer_id,
            ..Default::default()
        }));
    }
    out.extend(image.acls.values().cloned().map(MetadataRecord::AccessControlEntry));
    for ((name, mechanism), c) in &image.scram {
        out.push(MetadataRecord::UserScramCredential(UserScramCredentialRecord {
            name: name.clone(),
            mechanism: *mechanism,
            salt: c.salt.clone(),
            stored_key: c.stored_key.clone(),
            server_key: c.server_key.clone(),
            iterations: c.iterations,
            ..Default::default()
        }));
    }
    out.extend(image.delegation_tokens.values().cloned().map(MetadataRecord::DelegationToken));
    out
}

#[cfg(test)]
#[path = "image_records_tests.rs"]
mod tests;
