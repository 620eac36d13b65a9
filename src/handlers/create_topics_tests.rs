//! The CreateTopics checks a single node and a controller share: each name answered once, the
//! request's layout in Kafka's order, and the new name against the existing ones.

use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopicConfig};

use super::*;
use crate::metadata::check_new_topic_name;

fn topic(name: &str) -> CreatableTopic {
    CreatableTopic::default().with_name(TopicName(str_bytes(name))).with_num_partitions(-1).with_replication_factor(-1)
}

#[test]
fn a_name_given_twice_is_answered_once_and_not_created() {
    let mut asked = Vec::new();
    let answers = answer_each_name_once(vec![topic("a"), topic("b"), topic("a"), topic("c"), topic("a")], |t| {
        asked.push(t.name.0.to_string());
        CreatableTopicResult::default().with_name(t.name)
    });
    let answered: Vec<(&str, i16)> = answers.iter().map(|r| (r.name.0.as_str(), r.error_code)).collect();
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(answered, vec![("a", invalid), ("b", 0), ("c", 0)]);
    assert_eq!(asked, vec!["b", "c"]);
    assert_eq!(answers[0].error_message.as_ref().map(|m| m.as_str()), Some("Duplicate topic name."));
    assert_eq!((answers[0].num_partitions, answers[0].replication_factor), (-1, -1));
}

#[test]
fn the_layout_is_checked_in_kafkas_order() {
    let null = CreatableTopicConfig::default().with_name(str_bytes("cleanup.policy")).with_value(None);
    let manual = CreatableReplicaAssignment::default().with_partition_index(0).with_broker_ids(vec![BrokerId(1)]);
    // Null configs first, even with a bad assignment.
    let t = topic("t").with_configs(vec![null]).with_assignments(vec![manual.clone()]).with_replication_factor(2);
    assert_eq!(requested_layout(&t, 1, 1).err().map(|r| r.0), Some(ResponseError::InvalidConfig));
    let t = topic("t").with_assignments(vec![manual.clone()]).with_replication_factor(2);
    assert_eq!(requested_layout(&t, 1, 1).err().map(|r| r.0), Some(ResponseError::InvalidRequest));
    let t = topic("t").with_assignments(vec![manual]);
    assert_eq!(requested_layout(&t, 1, 1).map(|l| l.shape()).ok(), Some((1, 1)));
    let t = topic("t").with_replication_factor(0).with_num_partitions(0);
    assert_eq!(requested_layout(&t, 1, 1).err().map(|r| r.0), Some(ResponseError::InvalidReplicationFactor));
    let t = topic("t").with_num_partitions(0);
    assert_eq!(requested_layout(&t, 1, 1).err().map(|r| r.0), Some(ResponseError::InvalidPartitions));
    assert_eq!(requested_layout(&topic("t"), 6, 3).map(|l| l.shape()).ok(), Some((6, 3)));
    let t = topic("t").with_num_partitions(2).with_replication_factor(1);
    assert_eq!(requested_layout(&t, 6, 3).map(|l| l.shape()).ok(), Some((2, 1)));
}

#[test]
fn a_new_name_is_legal_free_and_does_not_collide() {
    let existing = ["a.b".to_string(), "c".to_string()];
    let check = |name: &str| {
        check_new_topic_name(name, |n| existing.iter().any(|e| e == n), existing.iter())
            .map_err(|e| (e.error, e.message))
    };
    assert!(check("d").is_ok());
    assert_eq!(check("c").err().map(|e| e.0), Some(ResponseError::TopicAlreadyExists));
    assert_eq!(
        check("a_b").err(),
        Some((ResponseError::InvalidTopicException, "Topic 'a_b' collides with existing topic: a.b".to_string()))
    );
    assert_eq!(check("a/b").err().map(|e| e.0), Some(ResponseError::InvalidTopicException));
    assert_eq!(check(crate::raft::METADATA_TOPIC_NAME).err().map(|e| e.0), Some(ResponseError::InvalidTopicException));
}
