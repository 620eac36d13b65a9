//! Envelopes on a Ketch controller (Kafka's `EnvelopeUtils`): the client's principal decoded
//! (PRINCIPAL_DESERIALIZATION_FAILURE when it does not), only forwardable APIs served, and the
//! inner request held to the forwarded client's `controller_mutation_rate` quota, not to the
//! forwarding broker's.

use bytes::Bytes;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, MetadataRequest, TopicName};

use super::*;
use crate::controller::quorum::ControllerSettings;
use crate::controller::test_cluster::{mutation_quota_record, topic_records};
use crate::node::envelope::{self, Origin};

fn controller(dir: &std::path::Path) -> QuorumController {
    let config = crate::config::BrokerConfig::from_properties(Default::default()).expect("defaults");
    let settings = ControllerSettings::from_config(&config, 3000, 9_000, "test-cluster-id-000000");
    QuorumController::open(dir, settings).expect("open")
}

fn listener() -> ControllerListener {
    ControllerListener {
        name: "CONTROLLER".into(),
        protocol: crate::config::SecurityProtocol::Plaintext,
        endpoint: LeaderEndpoint { host: "127.0.0.1".into(), port: 9093 },
    }
}

fn origin(principal: &str) -> Origin {
    Origin {
        client_id: Some("admin-1".into()),
        correlation_id: 42,
        principal: principal.into(),
        token_authenticated: false,
        address: "10.0.0.9".parse().unwrap(),
    }
}

/// Topics of 6 partitions each, and `controller_mutation_rate=1` for the user `alice` (a bucket
/// of 11 partitions).
fn topics_and_quota(c: &QuorumController, names: &[&str]) {
    let mut records = vec![mutation_quota_record("user", "alice", 1.0)];
    for name in names {
        records.extend(topic_records(name, 6));
    }
    c.change(|_| (records, ())).expect("written");
}

fn delete(names: &[&str]) -> DeleteTopicsRequest {
    let topic = |n: &&str| DeleteTopicState::default().with_name(Some(TopicName(str_bytes(n))));
    DeleteTopicsRequest::default().with_topics(names.iter().map(topic).collect())
}

async fn forward_delete(c: &QuorumController, principal: &str, names: &[&str]) -> DeleteTopicsResponse {
    let from = origin(principal);
    let envelope = envelope::wrap(&from, 6, &delete(names)).unwrap();
    let answer = forwarded(c, &listener(), envelope).await;
    assert_eq!(answer.error_code, 0);
    envelope::unwrap::<DeleteTopicsRequest>(&from, 6, answer.response_data.expect("a response")).unwrap()
}

#[tokio::test]
async fn the_forwarded_clients_quota_holds_not_the_brokers() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    topics_and_quota(&c, &["a0", "a1", "a2", "b0", "b1", "b2"]);
    let throttled = ResponseError::ThrottlingQuotaExceeded.code();
    // alice, forwarded by a broker: 6 + 6 partitions pass (the second takes the bucket to -1),
    // the third topic is refused, and the answer says how long the bucket needs.
    let alice = forward_delete(&c, "User:alice", &["a0", "a1", "a2"]).await;
    assert_eq!(alice.responses.iter().map(|r| r.error_code).collect::<Vec<_>>(), vec![0, 0, throttled]);
    assert!((900..=1000).contains(&alice.throttle_time_ms), "{}", alice.throttle_time_ms);
    // bob through the same broker has no quota.
    let bob = forward_delete(&c, "User:bob", &["b0", "b1", "b2"]).await;
    assert_eq!(bob.responses.iter().map(|r| r.error_code).collect::<Vec<_>>(), vec![0, 0, 0]);
    assert_eq!(bob.throttle_time_ms, 0);
}

#[tokio::test]
async fn a_principal_that_does_not_decode_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let envelope = envelope::wrap(&origin("User:alice"), 6, &delete(&["x"])).unwrap();
    let failure = ResponseError::PrincipalDeserializationFailure.code();
    let bad = envelope.clone().with_request_principal(Some(Bytes::from_static(&[0, 7, 1])));
    assert_eq!(forwarded(&c, &listener(), bad).await.error_code, failure);
    let none = envelope.clone().with_request_principal(None);
    assert_eq!(forwarded(&c, &listener(), none).await.error_code, failure);
    let address = envelope.with_client_host_address(Bytes::from_static(&[1, 2, 3]));
    assert_eq!(forwarded(&c, &listener(), address).await.error_code, ResponseError::InvalidRequest.code());
}

#[tokio::test]
async fn only_apis_kafka_forwards_are_served_in_an_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let metadata = envelope::wrap(&origin("User:alice"), 12, &MetadataRequest::default()).unwrap();
    assert_eq!(forwarded(&c, &listener(), metadata).await.error_code, ResponseError::InvalidRequest.code());
    let nested = envelope::wrap(&origin("User:alice"), 6, &delete(&["x"])).unwrap();
    let nested = envelope::wrap(&origin("User:alice"), 0, &nested).unwrap();
    assert_eq!(forwarded(&c, &listener(), nested).await.error_code, ResponseError::InvalidRequest.code());
}
