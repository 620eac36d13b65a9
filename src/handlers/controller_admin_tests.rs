//! DeleteTopics on a Ketch controller: Kafka's answers to topics named twice, by name and id at
//! once, or by neither (`ControllerApis.deleteTopics`), against a real metadata log.

use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{DeleteTopicsRequest, TopicName};

use super::*;
use crate::controller::quorum::ControllerSettings;
use crate::controller::test_cluster::{mutation_quota_record, topic_records};
use crate::metadata::records::{MetadataRecord, TopicRecord};
use crate::quota::Client;

fn controller(dir: &std::path::Path) -> QuorumController {
    let config = crate::config::BrokerConfig::from_properties(Default::default()).expect("defaults");
    let settings = ControllerSettings::from_config(&config, 3000, 9_000, "test-cluster-id-000000");
    QuorumController::open(dir, settings).expect("open")
}

fn topic(controller: &QuorumController, name: &str) -> Uuid {
    let id = Uuid::from_bytes(crate::metadata::random_bytes());
    let record = MetadataRecord::Topic(TopicRecord { name: name.to_string(), topic_id: id, ..Default::default() });
    controller.change(|_| (vec![record], ())).expect("written");
    id
}

/// A client's address (no authorizer is configured here: everything is allowed).
const LOCAL: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

/// A client without a mutation quota.
fn anyone(c: &QuorumController) -> MutationQuota<'_> {
    c.mutation_quota(&Client::of("User:ANONYMOUS", Some("anyone")), true)
}

fn by_name(name: &str) -> DeleteTopicState {
    DeleteTopicState::default().with_name(Some(TopicName(str_bytes(name))))
}

fn by_id(id: Uuid) -> DeleteTopicState {
    DeleteTopicState::default().with_topic_id(id)
}

/// (name, id, error code, message) of each answer, sorted.
fn answers(response: DeleteTopicsResponse) -> Vec<(Option<String>, Uuid, i16, Option<String>)> {
    let mut out: Vec<_> = response
        .responses
        .into_iter()
        .map(|r| (r.name.map(|n| n.0.to_string()), r.topic_id, r.error_code, r.error_message.map(|m| m.to_string())))
        .collect();
    out.sort();
    out
}

#[test]
fn duplicates_and_ambiguous_entries_get_kafkas_answers_and_delete_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let [a, b, x, y] = ["a", "b", "x", "y"].map(|n| topic(&c, n));
    let invalid = ResponseError::InvalidRequest.code();
    let message = |m: &str| Some(m.to_string());
    let request = DeleteTopicsRequest::default().with_topics(vec![
        by_name("a"),
        by_name("a"),
        by_name("a"),
        by_id(b),
        by_id(b),
        by_name("x"),
        by_id(x),
        by_name("y").with_topic_id(y),
        DeleteTopicState::default(),
        by_name("gone"),
    ]);
    let nil = Uuid::nil();
    let mut want = vec![
        (Some("a".into()), nil, invalid, message("Duplicate topic name.")),
        (None, b, invalid, message("Duplicate topic id.")),
        (Some("x".into()), x, invalid, message("The provided topic name maps to an ID that was already supplied.")),
        (Some("y".into()), y, invalid, message("You may not specify both topic name and topic id.")),
        (None, nil, invalid, message("Neither topic name nor id were specified.")),
        (Some("gone".into()), nil, ResponseError::UnknownTopicOrPartition.code(), None),
    ];
    want.sort();
    assert_eq!(answers(delete_topics(&c, &c.authz("User:ANONYMOUS", LOCAL), request, 6, anyone(&c))), want);
    let image = c.image();
    for id in [a, b, x, y] {
        assert!(image.topics.contains_key(&id), "{id} deleted");
    }
    // Each named once: both deleted.
    let request = DeleteTopicsRequest::default().with_topics(vec![by_name("a"), by_id(b)]);
    let got = answers(delete_topics(&c, &c.authz("User:ANONYMOUS", LOCAL), request, 6, anyone(&c)));
    assert_eq!(got, vec![(Some("a".into()), a, 0, None), (Some("b".into()), b, 0, None)]);
    assert!(!c.image().topics.contains_key(&a) && !c.image().topics.contains_key(&b));
}

/// Kafka's `controller_mutation_rate` on the controller, from the image's client quotas: the
/// client's bucket (11 windows of 1 s at 1 partition per second: 11 partitions) lets whole
/// topics through while it is not below zero, then refuses them with THROTTLING_QUOTA_EXCEEDED
/// and the time the bucket needs; another client id is not held.
#[test]
fn deletions_take_the_clients_controller_mutation_quota() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let mut records = vec![mutation_quota_record("client-id", "m", 1.0)];
    for name in ["t0", "t1", "t2", "u0"] {
        records.extend(topic_records(name, 6));
    }
    c.change(|_| (records, ())).expect("written");
    let names = |names: &[&str]| DeleteTopicsRequest::default().with_topics(names.iter().map(|n| by_name(n)).collect());
    let held = c.mutation_quota(&Client::of("User:ANONYMOUS", Some("m")), true);
    let response = delete_topics(&c, &c.authz("User:ANONYMOUS", LOCAL), names(&["t0", "t1", "t2"]), 6, held);
    let codes: Vec<i16> = response.responses.iter().map(|r| r.error_code).collect();
    let throttled = ResponseError::ThrottlingQuotaExceeded.code();
    assert_eq!(codes, vec![0, 0, throttled]);
    // 11 - 12 = -1 token at 1 per second.
    assert!((900..=1000).contains(&response.throttle_time_ms), "{}", response.throttle_time_ms);
    assert!(c.image().topic("t2").is_some() && c.image().topic("t1").is_none());
    let response = delete_topics(&c, &c.authz("User:ANONYMOUS", LOCAL), names(&["t2", "u0"]), 6, anyone(&c));
    assert_eq!(response.responses.iter().map(|r| r.error_code).collect::<Vec<_>>(), vec![0, 0]);
    assert_eq!(response.throttle_time_ms, 0);
}
