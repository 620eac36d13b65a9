//! A metadata image the controller tests drive: every record a decision returns is applied to an
//! `ImageBuilder` (which refuses inconsistent records), at consecutive offsets.

use std::sync::Arc;

use uuid::Uuid;

use super::ControllerConfig;
use crate::metadata::image::{ImageBuilder, MetadataImage, PartitionImage};
use crate::metadata::records::{
    BrokerRegistrationChangeRecord, FeatureLevelRecord, MetadataRecord, PartitionRecord, RegisterBrokerRecord,
    TopicRecord,
};

/// Kafka 4.1-IV1's `metadata.version` level.
pub const METADATA_VERSION: i16 = 27;

pub fn config() -> ControllerConfig {
    ControllerConfig { node_id: 3000, session_timeout_ms: 9000, unclean_leader_election_enable: false }
}

pub struct Cluster {
    builder: ImageBuilder,
    pub image: Arc<MetadataImage>,
    /// The offset the next record is applied at (the log end offset).
    pub next_offset: i64,
}

impl Cluster {
    /// An image with `metadata.version` finalized.
    pub fn new() -> Cluster {
        let builder = ImageBuilder::new();
        let image = Arc::new(MetadataImage::empty());
        let mut cluster = Cluster { builder, image, next_offset: 0 };
        let level = FeatureLevelRecord {
            name: "metadata.version".to_string(),
            feature_level: METADATA_VERSION,
            ..Default::default()
        };
        cluster.apply(&[MetadataRecord::FeatureLevel(level)]);
        cluster
    }

    /// Applies `records` at the next offsets; panics when the image refuses one.
    pub fn apply(&mut self, records: &[MetadataRecord]) {
        for r in records {
            self.builder.apply(self.next_offset, r).unwrap_or_else(|e| panic!("{e}: {r:?}"));
            self.next_offset += 1;
        }
        self.image = self.builder.publish();
    }

    /// Registers broker `id` directly (not through `BrokerSessions`): epoch = its record's offset.
    pub fn add_broker(&mut self, id: i32, rack: Option<&str>, fenced: bool) -> i64 {
        let epoch = self.next_offset;
        let record = RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid::from_u128(1000 + id as u128),
            broker_epoch: epoch,
            rack: rack.map(str::to_string),
            fenced,
            log_dirs: vec![Uuid::from_u128(5000 + id as u128)],
            ..Default::default()
        };
        self.apply(&[MetadataRecord::RegisterBroker(record)]);
        epoch
    }

    pub fn set_broker(&mut self, id: i32, fenced: i8, in_controlled_shutdown: i8) {
        let epoch = self.image.brokers[&id].epoch;
        let change = BrokerRegistrationChangeRecord {
            broker_id: id,
            broker_epoch: epoch,
            fenced,
            in_controlled_shutdown,
            ..Default::default()
        };
        self.apply(&[MetadataRecord::BrokerRegistrationChange(change)]);
    }

    /// A topic whose partition `p` has replicas `assignments[p]`, all in the ISR, led by the first,
    /// each in its broker's first log directory.
    pub fn add_topic(&mut self, name: &str, id: u128, assignments: &[&[i32]]) -> Uuid {
        let topic_id = Uuid::from_u128(id);
        let mut records =
            vec![MetadataRecord::Topic(TopicRecord { name: name.to_string(), topic_id, ..Default::default() })];
        for (p, replicas) in assignments.iter().enumerate() {
            records.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: p as i32,
                topic_id,
                replicas: replicas.to_vec(),
                isr: replicas.to_vec(),
                leader: replicas[0],
                leader_epoch: 0,
                partition_epoch: 0,
                directories: replicas
                    .iter()
                    .map(|b| self.image.brokers.get(b).and_then(|b| b.log_dirs.first()).copied().unwrap_or(Uuid::nil()))
                    .collect(),
                ..Default::default()
            }));
        }
        self.apply(&records);
        topic_id
    }

    pub fn partition(&self, topic: Uuid, p: i32) -> PartitionImage {
        self.image.topics[&topic].partitions[&p].clone()
    }

    pub fn set_config(&mut self, resource_type: i8, resource: &str, name: &str, value: &str) {
        let record = crate::metadata::records::ConfigRecord {
            resource_type,
            resource_name: resource.to_string(),
            name: name.to_string(),
            value: Some(value.to_string()),
            ..Default::default()
        };
        self.apply(&[MetadataRecord::Config(record)]);
    }
}

/// A topic of `partitions` partitions, each on broker 1 alone (for tests of decisions that only
/// count or name partitions).
pub fn topic_records(name: &str, partitions: i32) -> Vec<MetadataRecord> {
    let id = Uuid::from_bytes(crate::metadata::random_bytes());
    let topic = MetadataRecord::Topic(TopicRecord { name: name.into(), topic_id: id, ..Default::default() });
    let partition = |p| PartitionRecord {
        partition_id: p,
        topic_id: id,
        replicas: vec![1],
        isr: vec![1],
        leader: 1,
        ..Default::default()
    };
    std::iter::once(topic).chain((0..partitions).map(|p| MetadataRecord::Partition(partition(p)))).collect()
}

/// `controller_mutation_rate=rate` for the entity `entity_type` (`user`, `client-id`) `name`.
pub fn mutation_quota_record(entity_type: &str, name: &str, rate: f64) -> MetadataRecord {
    use crate::metadata::records::{ClientQuotaRecord, EntityData};
    let entity = EntityData { entity_type: entity_type.into(), entity_name: Some(name.into()), ..Default::default() };
    MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: vec![entity],
        key: "controller_mutation_rate".into(),
        value: rate,
        ..Default::default()
    })
}
