//! The controller's records, applied to an image: they take it exactly to the wanted state.

use std::sync::Arc;

use super::*;
use crate::metadata::image::ImageBuilder;

struct Cluster {
    builder: ImageBuilder,
    image: Arc<MetadataImage>,
    offset: i64,
}

impl Cluster {
    fn new() -> Cluster {
        let mut builder = ImageBuilder::new();
        let image = builder.publish();
        Cluster { builder, image, offset: 0 }
    }

    fn apply(&mut self, records: Vec<MetadataRecord>) -> usize {
        let n = records.len();
        for r in &records {
            self.builder.apply(self.offset, r).expect("controller records apply");
            self.offset += 1;
        }
        self.image = self.builder.publish();
        n
    }

    fn want(&mut self, spec: &TopicSpec) -> usize {
        let records = topic_records(&self.image, 7, spec).unwrap();
        self.apply(records)
    }
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn create_grow_move_and_reconfigure_a_topic() {
    let mut c = Cluster::new();
    let id = Uuid::from_u128(42);
    let d1 = Uuid::from_u128(1);
    let d2 = Uuid::from_u128(2);
    let overrides = props(&[("retention.ms", "1000"), ("cleanup.policy", "compact")]);
    let spec = TopicSpec { name: "t", id, partitions: 2, directories: &[d1, d2], overrides: &overrides };
    assert_eq!(c.want(&spec), 1 + 2 + 2);
    let topic = c.image.topic("t").unwrap().clone();
    assert_eq!(topic.id, id);
    assert_eq!(topic.partitions.len(), 2);
    let p1 = &topic.partitions[&1];
    assert_eq!((p1.replicas.clone(), p1.isr.clone(), p1.leader), (vec![7], vec![7], 7));
    assert_eq!(p1.directories, vec![d2]);
    assert_eq!(c.image.configs[&(TOPIC_RESOURCE, "t".to_string())].len(), 2);

    assert_eq!(c.want(&spec), 0, "no change, no records");

    // Grow to 3, move partition 0 to d2, drop one override and change the other.
    let overrides = props(&[("retention.ms", "2000")]);
    let spec = TopicSpec { name: "t", id, partitions: 3, directories: &[d2, d2], overrides: &overrides };
    assert_eq!(c.want(&spec), 1 + 1 + 2);
    let topic = c.image.topic("t").unwrap().clone();
    assert_eq!(topic.partitions[&0].directories, vec![d2]);
    assert_eq!(topic.partitions[&0].partition_epoch, 1, "a change moves the partition epoch");
    assert_eq!(topic.partitions[&2].directories, vec![Uuid::nil()], "unknown directory: unassigned");
    let configs = &c.image.configs[&(TOPIC_RESOURCE, "t".to_string())];
    assert_eq!(configs.len(), 1);
    assert_eq!(configs["retention.ms"], "2000");

    let shrink = TopicSpec { name: "t", id, partitions: 1, directories: &[], overrides: &overrides };
    assert!(topic_records(&c.image, 7, &shrink).is_err());
    let other_id =
        TopicSpec { name: "t", id: Uuid::from_u128(43), partitions: 3, directories: &[], overrides: &overrides };
    assert!(topic_records(&c.image, 7, &other_id).is_err());

    assert_eq!(c.apply(remove_topic_records(&c.image, "t")), 1);
    assert!(c.image.topic("t").is_none());
    assert!(c.image.configs.is_empty(), "configs go with the topic");
    assert!(remove_topic_records(&c.image, "t").is_empty());
}
