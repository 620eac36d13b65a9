//! DescribeCluster's brokers from a metadata image, and the image builders the handler tests of
//! the image (`topic_partitions_image_tests.rs`) share.

use std::collections::{BTreeMap, HashMap};

use super::*;
use crate::metadata::image::{BrokerImage, EndpointImage, PartitionImage};

pub(crate) const LISTENER: &str = "PLAINTEXT";
pub(crate) const DIR_A: Uuid = Uuid::from_u128(0xa);
pub(crate) const DIR_B: Uuid = Uuid::from_u128(0xb);

pub(crate) fn broker(id: i32, fenced: bool, listeners: &[&str], log_dirs: &[Uuid]) -> BrokerImage {
    BrokerImage {
        id,
        epoch: 10,
        incarnation_id: Uuid::from_u128(id as u128),
        endpoints: listeners
            .iter()
            .map(|l| EndpointImage {
                listener: l.to_string(),
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
                security_protocol: 0,
            })
            .collect(),
        rack: None,
        fenced,
        in_controlled_shutdown: false,
        log_dirs: log_dirs.to_vec(),
        supported_features: Default::default(),
    }
}

pub(crate) fn partition(leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionImage {
    PartitionImage {
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        removing_replicas: vec![],
        adding_replicas: vec![],
        leader,
        leader_recovery_state: 0,
        leader_epoch: 4,
        partition_epoch: 7,
        directories: vec![],
        eligible_leader_replicas: vec![],
        last_known_elr: vec![],
    }
}

/// An image with the given brokers and topics (name, partitions by index), topic ids 1, 2, ...
pub(crate) fn image(brokers: Vec<BrokerImage>, topics: Vec<(&str, Vec<PartitionImage>)>) -> MetadataImage {
    let mut image = MetadataImage::empty();
    image.brokers = brokers.into_iter().map(|b| (b.id, b)).collect();
    image.topics = HashMap::new();
    for (i, (name, partitions)) in topics.into_iter().enumerate() {
        let id = Uuid::from_u128(i as u128 + 1);
        let partitions: BTreeMap<i32, PartitionImage> =
            partitions.into_iter().enumerate().map(|(p, part)| (p as i32, part)).collect();
        image.topic_ids.insert(name.to_string(), id);
        image.topics.insert(id, Arc::new(TopicImage { name: name.to_string(), id, partitions }));
    }
    image
}

#[test]
fn describe_cluster_lists_the_brokers_on_the_listener_fenced_ones_when_asked() {
    let mut brokers: Vec<BrokerImage> = (1..=4).map(|id| broker(id, false, &[LISTENER], &[])).collect();
    brokers[0].fenced = true; // 1
    brokers[1].rack = Some("r2".into()); // 2
    brokers[3].endpoints[0].listener = "OTHER".into(); // 4: not on the client's listener
    let image = image(brokers, vec![]);
    let listed = |own, fenced| {
        let (controller, brokers) = describe_cluster_brokers(&image, LISTENER, own, fenced);
        let rows: Vec<_> = brokers
            .iter()
            .map(|b| {
                (
                    b.broker_id.0,
                    b.host.as_str().to_string(),
                    b.port,
                    b.rack.as_ref().map(|r| r.to_string()),
                    b.is_fenced,
                )
            })
            .collect();
        (controller.0, rows)
    };
    let row =
        |id: i32, rack: Option<&str>, fenced| (id, "127.0.0.1".to_string(), 9000 + id, rack.map(String::from), fenced);
    assert_eq!(listed(3, false), (3, vec![row(2, Some("r2"), false), row(3, None, false)]));
    assert_eq!(listed(3, true), (3, vec![row(1, None, true), row(2, Some("r2"), false), row(3, None, false)]));
    // The controller id is an unfenced broker listed: this one when it is, else another.
    assert_eq!(listed(1, true).0, 2, "broker 1 is fenced");
    assert_eq!(listed(4, false).0, 2, "broker 4 has no endpoint on the listener");
    let (controller, none) = describe_cluster_brokers(&image, "NOWHERE", 3, true);
    assert_eq!((controller.0, none.len()), (-1, 0));
}
