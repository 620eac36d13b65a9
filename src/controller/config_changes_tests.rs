//! Config changes decided on an image (IncrementalAlterConfigs, legacy AlterConfigs), their
//! records applied to it, and the same through a `QuorumController` on disk.

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsRequest, AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::config::{BrokerConfig, Properties};
use crate::controller::test_cluster::{config, Cluster};
use crate::handlers::controller_configs::{decide_incremental, decide_legacy, Answer};
use crate::metadata::records::FeatureLevelRecord;

fn defaults() -> TopicConfig {
    BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults
}

fn cluster() -> Cluster {
    let mut c = Cluster::new();
    c.add_broker(1, None, false);
    c.add_topic("t", 1, &[&[1]]);
    c
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn op(name: &str, op: i8, value: Option<&str>) -> AlterableConfig {
    AlterableConfig::default().with_name(s(name)).with_config_operation(op).with_value(value.map(s))
}

fn resource(resource_type: i8, name: &str, configs: Vec<AlterableConfig>) -> AlterConfigsResource {
    AlterConfigsResource::default().with_resource_type(resource_type).with_resource_name(s(name)).with_configs(configs)
}

fn incremental(resources: Vec<AlterConfigsResource>, validate_only: bool) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(resources).with_validate_only(validate_only)
}

fn legacy(resource_type: i8, name: &str, pairs: &[(&str, Option<&str>)]) -> AlterConfigsRequest {
    let configs = pairs.iter().map(|(k, v)| LegacyConfig::default().with_name(s(k)).with_value(v.map(s))).collect();
    AlterConfigsRequest::default().with_resources(vec![LegacyResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(configs)])
}

/// Decides `request` on the cluster's image and applies its records; returns the answers.
fn run(c: &mut Cluster, request: &IncrementalAlterConfigsRequest) -> (Vec<MetadataRecord>, Vec<Answer>) {
    let defaults = defaults();
    let ctx = ConfigContext {
        topic_defaults: &defaults,
        controller_id: config().node_id,
        group_settings: &Properties::new(),
    };
    let (records, answers) = decide_incremental(&c.image, &ctx, request);
    c.apply(&records);
    (records, answers)
}

fn run_legacy(c: &mut Cluster, request: &AlterConfigsRequest) -> (Vec<MetadataRecord>, Vec<Answer>) {
    let defaults = defaults();
    let ctx = ConfigContext {
        topic_defaults: &defaults,
        controller_id: config().node_id,
        group_settings: &Properties::new(),
    };
    let (records, answers) = decide_legacy(&c.image, &ctx, request);
    c.apply(&records);
    (records, answers)
}

fn ok(resource_type: i8, name: &str) -> Answer {
    (resource_type, name.to_string(), None)
}

fn refused(resource_type: i8, name: &str, error: ResponseError, message: &str) -> Answer {
    (resource_type, name.to_string(), Some((error, message.to_string())))
}

fn configs(c: &Cluster, resource_type: i8, name: &str) -> Vec<(String, String)> {
    c.image
        .configs
        .get(&(resource_type, name.to_string()))
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn set_delete_append_subtract_on_a_topic() {
    let mut c = cluster();
    let request = incremental(
        vec![resource(
            TOPIC,
            "t",
            vec![op("retention.ms", OP_SET, Some("1000")), op("cleanup.policy", OP_APPEND, Some("compact"))],
        )],
        false,
    );
    let (records, answers) = run(&mut c, &request);
    assert_eq!(answers, vec![ok(TOPIC, "t")]);
    assert_eq!(records.len(), 2);
    // APPEND starts from Kafka's default, `delete`.
    assert_eq!(configs(&c, TOPIC, "t"), pairs(&[("cleanup.policy", "delete,compact"), ("retention.ms", "1000")]));

    let request = incremental(
        vec![resource(
            TOPIC,
            "t",
            vec![
                op("cleanup.policy", OP_SUBTRACT, Some("delete")),
                op("retention.ms", OP_DELETE, None),
                op("segment.ms", OP_DELETE, None),
            ],
        )],
        false,
    );
    let (records, answers) = run(&mut c, &request);
    assert_eq!(answers, vec![ok(TOPIC, "t")]);
    assert_eq!(records.len(), 2, "deleting a name the topic does not set changes nothing: no record");
    assert_eq!(configs(&c, TOPIC, "t"), pairs(&[("cleanup.policy", "compact")]));

    // Unchanged value: no record for a topic.
    let same = incremental(vec![resource(TOPIC, "t", vec![op("cleanup.policy", OP_SET, Some("compact"))])], false);
    assert_eq!(run(&mut c, &same), (Vec::new(), vec![ok(TOPIC, "t")]));
    // A name given twice: the last operation (Kafka keeps one per name).
    let twice = incremental(
        vec![resource(TOPIC, "t", vec![op("retention.ms", OP_SET, Some("5")), op("retention.ms", OP_SET, Some("7"))])],
        false,
    );
    run(&mut c, &twice);
    assert_eq!(configs(&c, TOPIC, "t"), pairs(&[("cleanup.policy", "compact"), ("retention.ms", "7")]));
}

#[test]
fn validate_only_writes_nothing() {
    let mut c = cluster();
    let request = incremental(vec![resource(TOPIC, "t", vec![op("retention.ms", OP_SET, Some("1000"))])], true);
    assert_eq!(run(&mut c, &request), (Vec::new(), vec![ok(TOPIC, "t")]));
    assert!(configs(&c, TOPIC, "t").is_empty());
    let bad = incremental(vec![resource(TOPIC, "t", vec![op("retention.ms", OP_SET, Some("x"))])], true);
    let (_, answers) = run(&mut c, &bad);
    assert_eq!(answers[0].2.as_ref().unwrap().0, ResponseError::InvalidConfig, "validate_only still validates");
}

#[test]
fn refusals_with_kafkas_messages() {
    let mut c = cluster();
    let cases: Vec<(AlterConfigsResource, Answer)> = vec![
        (
            resource(TOPIC, "nope", vec![op("retention.ms", OP_SET, Some("1000"))]),
            refused(TOPIC, "nope", ResponseError::UnknownTopicOrPartition, "The topic 'nope' does not exist."),
        ),
        // Values are checked before existence, as Kafka's controller does.
        (
            resource(TOPIC, "nope", vec![op("retention.ms", OP_SET, Some("abc"))]),
            refused(
                TOPIC,
                "nope",
                ResponseError::InvalidConfig,
                "Invalid value abc for configuration retention.ms: Not a number of type LONG",
            ),
        ),
        (
            resource(TOPIC, "t", vec![op("no.such.config", OP_SET, Some("1"))]),
            refused(TOPIC, "t", ResponseError::InvalidConfig, "Unknown topic config name: no.such.config"),
        ),
        (
            resource(TOPIC, "t", vec![op("retention.ms", OP_APPEND, Some("1"))]),
            refused(TOPIC, "t", ResponseError::InvalidConfig, "Can't APPEND to key retention.ms because its type is not LIST."),
        ),
        (
            resource(TOPIC, "", vec![]),
            refused(TOPIC, "", ResponseError::InvalidRequest, "Default topic resources are not allowed."),
        ),
        (
            resource(TOPIC, "a b", vec![]),
            refused(
                TOPIC,
                "a b",
                ResponseError::InvalidTopicException,
                "Topic name is invalid: 'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'",
            ),
        ),
        (
            resource(BROKER, "7", vec![op("log.retention.ms", OP_SET, Some("1"))]),
            refused(BROKER, "7", ResponseError::BrokerIdNotRegistered, "No node with id 7 found."),
        ),
        (
            resource(BROKER, "abc", vec![]),
            refused(BROKER, "abc", ResponseError::InvalidRequest, "Unable to parse broker name as a base 10 number."),
        ),
        (resource(BROKER, "-1", vec![]), refused(BROKER, "-1", ResponseError::InvalidRequest, "Invalid negative broker ID.")),
        (
            resource(TOPIC, "t", vec![op("retention.ms", OP_SET, Some("1".repeat(32768).as_str()))]),
            refused(
                TOPIC,
                "t",
                ResponseError::InvalidConfig,
                "The configuration value cannot be added because it exceeds the maximum value size of 32767 bytes.",
            ),
        ),
        (
            resource(99, "x", vec![]),
            refused(99, "x", ResponseError::UnsupportedVersion, "Unknown resource type 99."),
        ),
        (
            resource(BROKER_LOGGER, "3000", vec![op("root", OP_SET, Some("DEBUG"))]),
            refused(BROKER_LOGGER, "3000", ResponseError::InvalidConfig, "Logger root does not exist!"),
        ),
    ];
    for (r, want) in cases {
        let (records, answers) = run(&mut c, &incremental(vec![r], false));
        assert_eq!(answers, vec![want]);
        assert!(records.is_empty());
    }
    assert!(configs(&c, TOPIC, "t").is_empty());
}

#[test]
fn broker_configs_cluster_default_and_per_node() {
    let mut c = cluster();
    let request = incremental(
        vec![
            resource(BROKER, "", vec![op("log.retention.ms", OP_SET, Some("5000"))]),
            resource(BROKER, "1", vec![op("log.cleaner.threads", OP_SET, Some("2"))]),
            // This controller's own id is a node too.
            resource(BROKER, "3000", vec![op("background.threads", OP_SET, Some("4"))]),
        ],
        false,
    );
    let (records, answers) = run(&mut c, &request);
    assert_eq!(answers, vec![ok(BROKER, ""), ok(BROKER, "1"), ok(BROKER, "3000")]);
    assert_eq!(records.len(), 3);
    assert_eq!(configs(&c, BROKER, ""), pairs(&[("log.retention.ms", "5000")]));
    assert_eq!(configs(&c, BROKER, "1"), pairs(&[("log.cleaner.threads", "2")]));
    // KAFKA-14136: a broker resource gets its records even when nothing changes, and a DELETE of
    // an unset name too.
    let again = incremental(
        vec![resource(
            BROKER,
            "",
            vec![op("log.retention.ms", OP_SET, Some("5000")), op("num.io.threads", OP_DELETE, None)],
        )],
        false,
    );
    let (records, _) = run(&mut c, &again);
    assert_eq!(records.len(), 2);
    assert_eq!(configs(&c, BROKER, ""), pairs(&[("log.retention.ms", "5000")]));
    // APPEND on a broker LIST config starts from Kafka's default.
    let append =
        incremental(vec![resource(BROKER, "", vec![op("log.cleanup.policy", OP_APPEND, Some("compact"))])], false);
    run(&mut c, &append);
    assert_eq!(configs(&c, BROKER, "")[0], ("log.cleanup.policy".to_string(), "delete,compact".to_string()));
}

#[test]
fn group_configs_with_kafkas_validation() {
    let mut c = cluster();
    let set = |name: &str, value: &str| op(name, OP_SET, Some(value));
    let (_, answers) =
        run(&mut c, &incremental(vec![resource(GROUP, "g", vec![set("consumer.session.timeout.ms", "50000")])], false));
    assert_eq!(answers, vec![ok(GROUP, "g")]);
    assert_eq!(configs(&c, GROUP, "g"), pairs(&[("consumer.session.timeout.ms", "50000")]));
    // The whole resulting set is checked: a heartbeat interval at the session timeout is refused.
    let (records, answers) = run(
        &mut c,
        &incremental(
            vec![
                resource(GROUP, "g", vec![set("consumer.heartbeat.interval.ms", "50000")]),
                resource(GROUP, "", vec![set("consumer.session.timeout.ms", "50000")]),
                resource(GROUP, "h", vec![set("nope", "1")]),
            ],
            false,
        ),
    );
    assert!(records.is_empty());
    let message =
        "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms";
    assert_eq!(
        answers,
        vec![
            refused(GROUP, "g", ResponseError::InvalidConfig, message),
            refused(GROUP, "", ResponseError::InvalidRequest, "Default group resources are not allowed."),
            refused(GROUP, "h", ResponseError::InvalidConfig, "Unknown group config name: nope"),
        ]
    );
    let (_, answers) = run(
        &mut c,
        &incremental(vec![resource(GROUP, "g", vec![op("consumer.session.timeout.ms", OP_DELETE, None)])], false),
    );
    assert_eq!(answers, vec![ok(GROUP, "g")]);
    assert_eq!(configs(&c, GROUP, "g"), Vec::new());
}

#[test]
fn legacy_alter_configs_replaces_the_whole_set() {
    let mut c = cluster();
    c.set_config(TOPIC, "t", "retention.ms", "1000");
    c.set_config(TOPIC, "t", "cleanup.policy", "compact");
    let (records, answers) = run_legacy(&mut c, &legacy(TOPIC, "t", &[("segment.ms", Some("100000"))]));
    assert_eq!(answers, vec![ok(TOPIC, "t")]);
    assert_eq!(records.len(), 3, "one set, two implicit deletions: {records:?}");
    assert_eq!(configs(&c, TOPIC, "t"), pairs(&[("segment.ms", "100000")]));
    // The whole resulting set is validated.
    let (records, answers) = run_legacy(&mut c, &legacy(TOPIC, "t", &[("retention.ms", Some("-5"))]));
    assert!(records.is_empty());
    assert_eq!(
        answers,
        vec![refused(
            TOPIC,
            "t",
            ResponseError::InvalidConfig,
            "Invalid value -5 for configuration retention.ms: Value must be at least -1"
        )]
    );
    // Legacy AlterConfigs has no BROKER_LOGGER.
    let (_, answers) = run_legacy(&mut c, &legacy(BROKER_LOGGER, "3000", &[]));
    assert_eq!(
        answers,
        vec![refused(BROKER_LOGGER, "3000", ResponseError::InvalidRequest, "Unexpected resource type BROKER_LOGGER.")]
    );
    // An empty set deletes everything.
    run_legacy(&mut c, &legacy(TOPIC, "t", &[]));
    assert!(configs(&c, TOPIC, "t").is_empty());
}

#[test]
fn duplicates_unprocessable_requests_and_one_change_for_all() {
    let mut c = cluster();
    c.add_topic("u", 2, &[&[1]]);
    let set = |v: &str| vec![op("retention.ms", OP_SET, Some(v))];
    let request = incremental(
        vec![
            resource(TOPIC, "t", set("1")),
            resource(TOPIC, "u", set("2")),
            resource(TOPIC, "t", set("3")),
            resource(TOPIC, "t", set("4")),
            resource(TOPIC, "nope", set("5")),
            resource(BROKER_LOGGER, "3000", vec![]),
        ],
        false,
    );
    let (records, answers) = run(&mut c, &request);
    assert_eq!(
        answers,
        vec![
            refused(TOPIC, "t", ResponseError::InvalidRequest, "Duplicate resource."),
            ok(TOPIC, "u"),
            refused(TOPIC, "nope", ResponseError::UnknownTopicOrPartition, "The topic 'nope' does not exist."),
            ok(BROKER_LOGGER, "3000"),
        ]
    );
    assert_eq!(records.len(), 1);
    assert!(configs(&c, TOPIC, "t").is_empty());
    assert_eq!(configs(&c, TOPIC, "u"), pairs(&[("retention.ms", "2")]));

    // An unknown operation fails the whole request, nothing written.
    let request =
        incremental(vec![resource(TOPIC, "u", set("9")), resource(TOPIC, "t", vec![op("x", 7, Some("1"))])], false);
    let (records, answers) = run(&mut c, &request);
    assert!(records.is_empty());
    let unknown = (ResponseError::UnknownServerError, String::new());
    assert_eq!(answers, vec![(TOPIC, "u".to_string(), Some(unknown.clone())), (TOPIC, "t".to_string(), Some(unknown))]);
}

#[test]
fn min_insync_replicas_with_elr_enabled() {
    let mut c = cluster();
    c.apply(&[MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: "eligible.leader.replicas.version".to_string(),
        feature_level: 1,
        ..Default::default()
    })]);
    let min_isr = |v: Option<&str>| vec![op("min.insync.replicas", if v.is_some() { OP_SET } else { OP_DELETE }, v)];
    let (_, answers) = run(&mut c, &incremental(vec![resource(BROKER, "1", min_isr(Some("2")))], false));
    let message = "Broker-level min.insync.replicas cannot be altered while ELR is enabled.";
    assert_eq!(answers, vec![refused(BROKER, "1", ResponseError::InvalidConfig, message)]);
    let (_, answers) = run(&mut c, &incremental(vec![resource(BROKER, "", min_isr(None))], false));
    let message = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.";
    assert_eq!(answers, vec![refused(BROKER, "", ResponseError::InvalidConfig, message)]);
    let (records, _) = run(&mut c, &incremental(vec![resource(BROKER, "", min_isr(Some("2")))], false));
    assert!(matches!(&records[1], MetadataRecord::ClearElr(r) if r.topic_name.is_empty()), "{records:?}");
    let (records, _) = run(&mut c, &incremental(vec![resource(TOPIC, "t", min_isr(Some("2")))], false));
    assert!(matches!(&records[1], MetadataRecord::ClearElr(r) if r.topic_name == "t"), "{records:?}");
}

#[test]
fn through_the_quorum_controller_durably() {
    use crate::controller::quorum::{ControllerSettings, QuorumController};
    use crate::metadata::records::TopicRecord;
    let dir = tempfile::tempdir().unwrap();
    let settings = ControllerSettings {
        config: config(),
        cluster_id: "configs-test".to_string(),
        num_partitions: 1,
        default_replication_factor: 1,
        topic_defaults: defaults(),
        delete_topic_enable: true,
        static_config_keys: Default::default(),
        static_props: Properties::new(),
        tokens: crate::security::tokens::TokenSettings::from_properties(&Properties::new()),
        snapshots: Default::default(),
    };
    let controller = QuorumController::open(dir.path(), settings.clone()).unwrap();
    let topic = TopicRecord { name: "t".to_string(), topic_id: uuid::Uuid::from_u128(7), ..Default::default() };
    controller.change(|_| (vec![MetadataRecord::Topic(topic)], ())).unwrap();
    let request = incremental(
        vec![
            resource(TOPIC, "t", vec![op("retention.ms", OP_SET, Some("1234"))]),
            resource(BROKER, "", vec![op("log.retention.ms", OP_SET, Some("5000"))]),
        ],
        false,
    );
    let response = crate::handlers::controller_configs::incremental_alter_configs(
        &controller,
        &controller.authz("User:ANONYMOUS", std::net::Ipv4Addr::LOCALHOST.into()),
        request,
    );
    assert!(response.responses.iter().all(|r| r.error_code == 0 && r.error_message.is_none()), "{response:?}");
    let legacy_response = crate::handlers::controller_configs::alter_configs(
        &controller,
        &controller.authz("User:ANONYMOUS", std::net::Ipv4Addr::LOCALHOST.into()),
        // The cluster-level min.insync.replicas (bootstrapped, ELR on) cannot be removed.
        legacy(BROKER, "", &[("log.segment.bytes", Some("1048576")), ("min.insync.replicas", Some("1"))]),
    );
    assert_eq!(legacy_response.responses[0].error_code, 0);
    controller.close();
    drop(controller);
    let reopened = QuorumController::open(dir.path(), settings).unwrap();
    let image = reopened.image();
    assert_eq!(image.configs[&(TOPIC, "t".to_string())]["retention.ms"], "1234");
    let cluster_default: Vec<_> = image.configs[&(BROKER, String::new())].keys().cloned().collect();
    assert_eq!(
        cluster_default,
        vec!["log.segment.bytes".to_string(), "min.insync.replicas".to_string()],
        "legacy replaced the cluster default set"
    );

    // DescribeConfigs on the controller (what kafka-configs --bootstrap-controller reads first).
    use kafka_protocol::messages::describe_configs_request::{DescribeConfigsRequest, DescribeConfigsResource};
    let describe = |resource_type: i8, name: &str| {
        let request = DescribeConfigsRequest::default().with_include_synonyms(true).with_resources(vec![
            DescribeConfigsResource::default().with_resource_type(resource_type).with_resource_name(s(name)),
        ]);
        crate::handlers::controller_describe_configs::describe_configs(
            &reopened,
            &reopened.authz("User:ANONYMOUS", std::net::Ipv4Addr::LOCALHOST.into()),
            request,
            4,
        )
        .results
        .remove(0)
    };
    let topic = describe(TOPIC, "t");
    assert_eq!(topic.error_code, 0);
    let retention = topic.configs.iter().find(|c| c.name.as_str() == "retention.ms").unwrap();
    assert_eq!((retention.value.as_deref(), retention.config_source), (Some("1234"), 1), "DYNAMIC_TOPIC_CONFIG");
    let segment = topic.configs.iter().find(|c| c.name.as_str() == "segment.bytes").unwrap();
    assert_eq!(
        (segment.value.as_deref(), segment.config_source),
        (Some("1048576"), 3),
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    );
    // Stored without a check (as Kafka's controller), described only as this node would apply it.
    let set = incremental(vec![resource(BROKER, "", vec![op("num.partitions", OP_SET, Some("5"))])], false);
    let response = crate::handlers::controller_configs::incremental_alter_configs(
        &reopened,
        &reopened.authz("User:ANONYMOUS", std::net::Ipv4Addr::LOCALHOST.into()),
        set,
    );
    assert_eq!(response.responses[0].error_code, 0);
    assert_eq!(reopened.image().configs[&(BROKER, String::new())]["num.partitions"], "5");
    let default = describe(BROKER, "");
    let names: Vec<&str> = default.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["log.segment.bytes", "min.insync.replicas"], "num.partitions is not dynamic: not described");
    assert_eq!(describe(BROKER, "3000").error_code, 0);
    let other = describe(BROKER, "1");
    assert_eq!(other.error_code, ResponseError::InvalidRequest.code());
    assert_eq!(
        other.error_message.as_deref(),
        Some("Unexpected broker id, expected 3000 or empty string, but received 1")
    );
    assert_eq!(describe(TOPIC, "nope").error_code, ResponseError::UnknownTopicOrPartition.code());
}
