//! The image built from a real Apache Kafka 4.1 metadata log (the records of
//! `tests/fixtures/kafka-4.1-metadata-records.txt`: a capture that created topics meta-a (3
//! partitions) and meta-b (1, grown to 2, then deleted), set and deleted configs, downgraded and
//! upgraded transaction.version, registered broker 1, allocated producer ids and shut down).

use super::*;
use crate::metadata::records::{BeginTransactionRecord, EndTransactionRecord, TopicRecord};

pub(crate) fn kafka_log() -> Vec<(i64, MetadataRecord)> {
    let text = include_str!("../../tests/fixtures/kafka-4.1-metadata-records.txt");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let hex = f[3];
            let bytes: Vec<u8> =
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
            (f[0].parse().unwrap(), MetadataRecord::decode_framed(&bytes).unwrap().record)
        })
        .collect()
}

#[test]
fn kafkas_metadata_log_builds_the_image_of_what_was_done() {
    let mut builder = ImageBuilder::new();
    for (offset, record) in kafka_log() {
        builder.apply(offset, &record).unwrap_or_else(|e| panic!("{e}: {record:?}"));
    }
    let image = builder.publish();
    let a = image.topic("meta-a").expect("meta-a");
    assert_eq!(a.partitions.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2]);
    for p in a.partitions.values() {
        // Shut down: the last in-sync replica left the ISR for the ELR (KIP-966) and the leader
        // went to none, through a change record (a new leader epoch).
        assert_eq!(p.replicas, vec![1]);
        assert_eq!((p.isr.as_slice(), p.eligible_leader_replicas.as_slice()), (&[][..], &[1][..]), "{p:?}");
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (-1, 1, 1), "{p:?}");
    }
    assert!(image.topic("meta-b").is_none(), "deleted");
    assert_eq!(image.topics.len(), 1);
    let topic_configs = &image.configs[&(TOPIC_RESOURCE, "meta-a".to_string())];
    assert_eq!(topic_configs.get("cleanup.policy").map(String::as_str), Some("compact"));
    assert!(!topic_configs.contains_key("retention.ms"), "set, then deleted");
    assert_eq!(image.configs[&(4, "1".to_string())].get("log.cleaner.backoff.ms").map(String::as_str), Some("20000"));
    // The capture downgraded it to 1 and upgraded it back; the fixture keeps the first record of
    // each distinct value only, so the upgrade (the same bytes as the bootstrap record) is not
    // repeated at its end.
    assert_eq!(image.features.get("transaction.version"), Some(&1));
    assert!(image.features.get("metadata.version").is_some_and(|&l| l > 0));
    let broker = &image.brokers[&1];
    assert_eq!((broker.endpoints[0].listener.as_str(), broker.endpoints[0].host.as_str()), ("PLAINTEXT", "127.0.0.1"));
    assert!(image.next_producer_id > 0);
    assert!(!image.acls.is_empty(), "the capture's ACLs");
    assert!(!image.not_kept.contains_key("AccessControlEntryRecord"));
}

#[test]
fn inconsistent_records_are_refused_and_a_transaction_is_published_whole() {
    let id = Uuid::from_u128(7);
    let topic = |name: &str, id: Uuid| {
        MetadataRecord::Topic(TopicRecord { name: name.into(), topic_id: id, ..Default::default() })
    };
    let mut builder = ImageBuilder::new();
    builder.apply(0, &MetadataRecord::BeginTransaction(BeginTransactionRecord::default())).unwrap();
    builder.apply(1, &topic("t", id)).unwrap();
    assert!(builder.publish().topics.is_empty(), "not published inside a transaction");
    let err = builder.apply(2, &topic("t", Uuid::from_u128(8))).unwrap_err();
    assert_eq!(err.offset, 2);
    let partition = PartitionRecord { topic_id: Uuid::from_u128(9), ..Default::default() };
    assert!(builder.apply(3, &MetadataRecord::Partition(partition)).is_err(), "unknown topic");
    builder.apply(4, &MetadataRecord::EndTransaction(EndTransactionRecord::default())).unwrap();
    let image = builder.publish();
    assert_eq!((image.topics.len(), image.offset), (1, 4));

    let change = PartitionChangeRecord { topic_id: id, partition_id: 0, leader: 2, ..Default::default() };
    assert!(builder.apply(5, &MetadataRecord::PartitionChange(change.clone())).is_err(), "no partition 0 yet");
    let p0 = PartitionRecord {
        topic_id: id,
        partition_id: 0,
        replicas: vec![1, 2],
        isr: vec![1, 2],
        leader: 1,
        leader_epoch: 0,
        partition_epoch: 0,
        ..Default::default()
    };
    builder.apply(6, &MetadataRecord::Partition(p0)).unwrap();
    builder.apply(7, &MetadataRecord::PartitionChange(change)).unwrap();
    let isr_only = PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        leader: NO_LEADER_CHANGE,
        isr: Some(vec![2]),
        ..Default::default()
    };
    builder.apply(8, &MetadataRecord::PartitionChange(isr_only)).unwrap();
    let p = builder.publish().topic("t").unwrap().partitions[&0].clone();
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch, p.isr), (2, 1, 2, vec![2]));
    assert_eq!(p.replicas, vec![1, 2], "unchanged when the change leaves it out");
}

#[test]
fn scram_credentials_are_kept_replaced_and_removed() {
    use crate::metadata::records::{RemoveUserScramCredentialRecord, UserScramCredentialRecord};
    let upsert = |name: &str, mechanism: i8, iterations: i32| {
        MetadataRecord::UserScramCredential(UserScramCredentialRecord {
            name: name.into(),
            mechanism,
            salt: b"salt".to_vec(),
            stored_key: vec![1; 32],
            server_key: vec![2; 32],
            iterations,
            ..Default::default()
        })
    };
    let remove = |name: &str, mechanism: i8| {
        MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
            name: name.into(),
            mechanism,
            ..Default::default()
        })
    };
    let mut builder = ImageBuilder::new();
    for (offset, record) in [
        upsert("alice", 1, 4096),
        upsert("alice", 2, 4096),
        upsert("bob", 1, 4096),
        upsert("alice", 1, 8192),
        remove("bob", 1),
        remove("carol", 1),
    ]
    .iter()
    .enumerate()
    {
        builder.apply(offset as i64, record).unwrap();
    }
    let image = builder.publish();
    let keys: Vec<_> = image.scram.keys().cloned().collect();
    assert_eq!(keys, vec![("alice".to_string(), 1), ("alice".to_string(), 2)]);
    let alice = &image.scram[&("alice".to_string(), 1)];
    assert_eq!((alice.salt.as_slice(), alice.iterations), (&b"salt"[..], 8192));
    assert!(image.not_kept.is_empty(), "{:?}", image.not_kept);
}

/// Records no controller writes are refused with an error naming them and leave the image as it
/// was, so what comes after still applies (the metadata log is a peer's input too).
#[test]
fn impossible_partitions_are_refused_and_later_records_apply() {
    let id = Uuid::from_u128(7);
    let mut builder = ImageBuilder::new();
    let topic = TopicRecord { name: "t".into(), topic_id: id, ..Default::default() };
    builder.apply(0, &MetadataRecord::Topic(topic)).unwrap();
    let partition = |partition_id: i32, replicas: Vec<i32>| {
        MetadataRecord::Partition(PartitionRecord {
            topic_id: id,
            partition_id,
            isr: replicas.clone(),
            leader: replicas.first().copied().unwrap_or(-1),
            replicas,
            ..Default::default()
        })
    };
    for (offset, bad) in [
        (1, partition(-1, vec![1])),
        (2, partition(i32::MIN, vec![1])),
        (3, partition(0, vec![])),
        (4, partition(0, vec![1, -3])),
        (5, partition(0, vec![1, 1])),
    ] {
        let err = builder.apply(offset, &bad).unwrap_err();
        assert_eq!(err.offset, offset);
    }
    builder.apply(6, &partition(0, vec![1, 2])).unwrap();
    let bad_change = PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        leader: NO_LEADER_CHANGE,
        replicas: Some(vec![2, -1]),
        ..Default::default()
    };
    assert!(builder.apply(7, &MetadataRecord::PartitionChange(bad_change)).is_err());
    let image = builder.publish();
    let t = image.topic("t").unwrap();
    assert_eq!(t.partitions.keys().copied().collect::<Vec<_>>(), vec![0], "only the good partition");
    assert_eq!(t.partitions[&0].replicas, vec![1, 2], "the refused change left it as it was");
}
