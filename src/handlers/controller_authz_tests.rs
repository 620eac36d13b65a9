//! Authorization on a Ketch controller with Kafka's StandardAuthorizer configured: the caller's
//! cluster operations and topic ACLs decide, as Kafka's `ControllerApis` does, against a real
//! metadata log whose image holds the ACLs.

use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    BrokerHeartbeatRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, TopicName,
};
use uuid::Uuid;

use super::*;
use crate::controller::quorum::ControllerSettings;
use crate::controller::test_cluster::topic_records;
use crate::metadata::records::{AccessControlEntryRecord, MetadataRecord};

fn controller(dir: &std::path::Path) -> Arc<QuorumController> {
    let mut props = crate::config::Properties::new();
    props.insert("authorizer.class.name".into(), crate::security::acl_store::STANDARD_AUTHORIZER.into());
    props.insert("super.users".into(), "User:ANONYMOUS".into());
    let config = crate::config::BrokerConfig::from_properties(props).expect("config");
    let settings = ControllerSettings::from_config(&config, 3000, 9_000, "test-cluster-id-000000");
    let controller = Arc::new(QuorumController::open(dir, settings).expect("open"));
    controller.read_acls_from_own_image();
    controller
}

fn alice() -> Caller {
    Caller {
        principal: "User:alice".into(),
        token_authenticated: false,
        client_id: None,
        address: "10.0.0.1".parse().unwrap(),
    }
}

/// An ALLOW ACL for alice on a literal resource.
fn allow(resource_type: i8, name: &str, operation: i8) -> MetadataRecord {
    MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
        id: Uuid::from_bytes(crate::metadata::random_bytes()),
        resource_type,
        resource_name: name.into(),
        pattern_type: acl::LITERAL,
        principal: "User:alice".into(),
        host: "*".into(),
        operation,
        permission_type: acl::ALLOW,
        ..Default::default()
    })
}

#[test]
fn cluster_operations_are_refused_whole_without_the_acl() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let heartbeat = RequestKind::BrokerHeartbeat(BrokerHeartbeatRequest::default());
    let caller = alice();
    let refused = refused_whole(&caller.authz(&c), &heartbeat, 1);
    let Some(ResponseKind::BrokerHeartbeat(r)) = refused else { panic!("not refused: {refused:?}") };
    assert_eq!(r.error_code, ResponseError::ClusterAuthorizationFailed.code());
    // The super user (a broker's PLAINTEXT connection) may.
    let broker = Caller { principal: "User:ANONYMOUS".into(), ..alice() };
    assert!(refused_whole(&broker.authz(&c), &heartbeat, 1).is_none());
    // An ACL on the cluster lets alice heartbeat too; topics' requests are not refused whole.
    c.change(|_| (vec![allow(acl::CLUSTER, acl::CLUSTER_NAME, acl::CLUSTER_ACTION)], ())).unwrap();
    assert!(refused_whole(&caller.authz(&c), &heartbeat, 1).is_none());
    let create = RequestKind::CreateTopics(CreateTopicsRequest::default());
    assert!(refused_whole(&caller.authz(&c), &create, 7).is_none());
}

#[test]
fn topics_are_created_deleted_and_grown_only_as_the_acls_allow() {
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let mut records = topic_records("mine", 1);
    records.extend(topic_records("theirs", 1));
    records.extend(topic_records("seen", 1));
    records.push(allow(acl::TOPIC, "mine", acl::DELETE));
    records.push(allow(acl::TOPIC, "mine", acl::ALTER));
    records.push(allow(acl::TOPIC, "seen", acl::DESCRIBE));
    records.push(allow(acl::TOPIC, "new", acl::CREATE));
    c.change(|_| (records, ())).unwrap();
    let caller = alice();
    let authz = caller.authz(&c);
    let quota = || c.mutation_quota(&caller.client(), true);
    let denied = ResponseError::TopicAuthorizationFailed.code();

    // CreateTopics: CREATE on "new" only; without DESCRIBE_CONFIGS its settings are not shown.
    let topic = |n: &str| CreatableTopic::default().with_name(TopicName(super::super::str_bytes(n)));
    let request = CreateTopicsRequest::default().with_topics(vec![topic("new"), topic("other")]);
    let created = super::super::controller_topics::create_topics(&c, &authz, request, 7, quota()).topics;
    // ("new" cannot be placed without registered brokers: it gets past authorization to that.)
    assert_ne!(created[0].error_code, denied, "{:?}", created[0]);
    assert_eq!((created[1].error_code, created[1].error_message.as_deref()), (denied, Some("Authorization failed.")));

    // DeleteTopics: "mine" (DELETE, and DESCRIBE implied), not "theirs" (nothing) nor "seen"
    // (DESCRIBE only); by id, "theirs" is refused without its name, "seen" with it.
    let by_name = |n: &str| DeleteTopicState::default().with_name(Some(TopicName(super::super::str_bytes(n))));
    let id = |n: &str| c.image().topic(n).unwrap().id;
    let (theirs, seen) = (id("theirs"), id("seen"));
    let request = DeleteTopicsRequest::default().with_topics(vec![
        by_name("mine"),
        by_name("theirs"),
        DeleteTopicState::default().with_topic_id(theirs),
        DeleteTopicState::default().with_topic_id(seen),
    ]);
    let mut answers: Vec<(Option<String>, Uuid, i16)> =
        super::super::controller_admin::delete_topics(&c, &authz, request, 6, quota())
            .responses
            .into_iter()
            .map(|r| (r.name.map(|n| n.0.to_string()), r.topic_id, r.error_code))
            .collect();
    answers.sort();
    let mine = answers.iter().find(|a| a.0.as_deref() == Some("mine")).unwrap();
    assert_eq!(mine.2, 0);
    assert!(answers.contains(&(Some("theirs".into()), Uuid::nil(), denied)), "{answers:?}");
    assert!(answers.contains(&(None, theirs, denied)), "{answers:?}");
    assert!(answers.contains(&(Some("seen".into()), seen, denied)), "{answers:?}");
    assert!(c.image().topic("mine").is_none() && c.image().topic("theirs").is_some());

    // CreatePartitions: ALTER on the topic.
    let grow = |n: &str| {
        kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic::default()
            .with_name(TopicName(super::super::str_bytes(n)))
            .with_count(2)
    };
    let request = CreatePartitionsRequest::default().with_topics(vec![grow("theirs")]);
    let grown = super::super::controller_admin::create_partitions(&c, &authz, request, quota()).results;
    assert_eq!(grown[0].error_code, denied);
}

#[test]
fn config_resources_are_altered_and_described_only_as_the_acls_allow() {
    use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
    };
    use kafka_protocol::protocol::StrBytes;
    const TOPIC: i8 = 2;
    const BROKER: i8 = 4;
    let dir = tempfile::tempdir().unwrap();
    let c = controller(dir.path());
    let mut records = topic_records("mine", 1);
    records.extend(topic_records("theirs", 1));
    records.push(allow(acl::TOPIC, "mine", acl::ALTER_CONFIGS));
    records.push(allow(acl::TOPIC, "mine", acl::DESCRIBE_CONFIGS));
    c.change(|_| (records, ())).unwrap();
    let caller = alice();
    let set = |resource_type: i8, name: &str, key: &str, value: &str| {
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_string(key.into()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.into())))])
    };
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        set(TOPIC, "mine", "retention.ms", "1000"),
        set(TOPIC, "theirs", "retention.ms", "1000"),
        set(BROKER, "", "log.retention.ms", "1000"),
    ]);
    let response = crate::handlers::controller_configs::incremental_alter_configs(&c, &caller.authz(&c), request);
    let code = |name: &str| response.responses.iter().find(|r| r.resource_name.as_str() == name).unwrap().error_code;
    assert_eq!(code("mine"), 0);
    assert_eq!(code("theirs"), ResponseError::TopicAuthorizationFailed.code());
    assert_eq!(code(""), ResponseError::ClusterAuthorizationFailed.code());
    let image = c.image();
    assert_eq!(image.configs[&(TOPIC, "mine".to_string())]["retention.ms"], "1000");
    assert!(!image.configs.contains_key(&(TOPIC, "theirs".to_string())), "theirs was changed");
    assert!(!image.configs.get(&(BROKER, String::new())).is_some_and(|c| c.contains_key("log.retention.ms")));

    let describe = DescribeConfigsRequest::default().with_resources(
        [(TOPIC, "mine"), (TOPIC, "theirs"), (BROKER, "")]
            .iter()
            .map(|(t, n)| {
                DescribeConfigsResource::default()
                    .with_resource_type(*t)
                    .with_resource_name(StrBytes::from_string((*n).into()))
            })
            .collect(),
    );
    let results =
        crate::handlers::controller_describe_configs::describe_configs(&c, &caller.authz(&c), describe, 4).results;
    assert_eq!(results[0].error_code, 0);
    assert!(!results[0].configs.is_empty());
    assert_eq!(results[1].error_code, ResponseError::TopicAuthorizationFailed.code());
    assert!(results[1].configs.is_empty());
    assert_eq!(results[2].error_code, ResponseError::ClusterAuthorizationFailed.code());
}
