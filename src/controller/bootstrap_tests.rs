//! The bootstrap metadata: Kafka 4.1 formatter's effective levels and messages, the file `ketch
//! format` writes on a controller node, and a controller's first start writing what was
//! formatted (and only its first start).

use super::*;
use crate::controller::quorum::{ControllerSettings, QuorumController};

fn levels(pairs: &[(&str, i16)]) -> BTreeMap<String, i16> {
    pairs.iter().map(|(n, l)| (n.to_string(), *l)).collect()
}

fn requested(pairs: &[(&str, i16)]) -> Vec<(String, i16)> {
    pairs.iter().map(|(n, l)| (n.to_string(), *l)).collect()
}

#[test]
fn a_new_cluster_gets_kafka_4_1_defaults() {
    let expected = levels(&[
        ("metadata.version", 27),
        ("eligible.leader.replicas.version", 1),
        ("transaction.version", 2),
        ("group.version", 1),
    ]);
    assert_eq!(effective_levels(&[]), Ok(expected));
}

#[test]
fn defaults_follow_the_metadata_version_as_kafkas_formatter() {
    // 4.0-IV0: group version 1 only; 4.0-IV2: transactions v2 too; 4.1-IV0: ELR too.
    let at = |mv: i16| effective_levels(&requested(&[("metadata.version", mv)])).unwrap();
    assert_eq!(at(22), levels(&[("metadata.version", 22), ("group.version", 1)]));
    assert_eq!(at(24), levels(&[("metadata.version", 24), ("group.version", 1), ("transaction.version", 2)]));
    assert_eq!(at(26)["eligible.leader.replicas.version"], 1);
    assert_eq!(at(21), levels(&[("metadata.version", 21)]));
}

#[test]
fn given_levels_win_and_level_0_is_left_out() {
    let got = effective_levels(&requested(&[("transaction.version", 1), ("eligible.leader.replicas.version", 0)]));
    assert_eq!(got, Ok(levels(&[("metadata.version", 27), ("transaction.version", 1), ("group.version", 1)])));
    // kraft.version 0 is what a static voter runs at: accepted, not a metadata record.
    assert!(!effective_levels(&requested(&[("kraft.version", 0)])).unwrap().contains_key("kraft.version"));
}

#[test]
fn refusals_carry_kafkas_messages() {
    let refused = |pairs: &[(&str, i16)]| effective_levels(&requested(pairs)).unwrap_err();
    assert_eq!(refused(&[("transaction.version", 3)]), "No feature:transaction.version with feature level 3");
    assert!(
        refused(&[("share.version", 1)]).starts_with("Unsupported feature: share.version. Supported features are: ")
    );
    assert_eq!(
        refused(&[("metadata.version", 22), ("eligible.leader.replicas.version", 1)]),
        "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"
    );
    assert!(refused(&[("kraft.version", 1)]).starts_with("Cannot set kraft.version to 1 unless KIP-853"));
    assert!(refused(&[("metadata.version", 28)]).starts_with("Unknown metadata.version 28"));
    assert!(refused(&[("metadata.version", 6)]).starts_with("Unknown metadata.version 6"));
}

#[test]
fn the_file_keeps_the_levels_and_a_missing_one_means_the_defaults() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(read(dir.path()).unwrap(), effective_levels(&[]).unwrap());
    let formatted = effective_levels(&requested(&[("eligible.leader.replicas.version", 0)])).unwrap();
    write(dir.path(), &formatted).unwrap();
    // ELR stays off: a feature left out of the file is at 0, not at its default.
    assert_eq!(read(dir.path()).unwrap(), formatted);
    std::fs::write(dir.path().join(".ketch/bootstrap.properties"), "transaction.version=9\n").unwrap();
    assert!(read(dir.path()).unwrap_err().to_string().contains("No feature:transaction.version with feature level 9"));
}

#[test]
fn records_put_metadata_version_first_and_min_isr_only_with_elr() {
    let names = |records: &[MetadataRecord]| -> Vec<String> {
        records
            .iter()
            .map(|r| match r {
                MetadataRecord::FeatureLevel(f) => format!("{}={}", f.name, f.feature_level),
                MetadataRecord::Config(c) => format!("config {}={:?}", c.name, c.value),
                other => format!("{:?}", other.api_key()),
            })
            .collect()
    };
    let on = records(&effective_levels(&[]).unwrap(), 2, Vec::new());
    assert_eq!(
        names(&on),
        [
            "metadata.version=27",
            "eligible.leader.replicas.version=1",
            "group.version=1",
            "transaction.version=2",
            "config min.insync.replicas=Some(\"2\")"
        ]
    );
    let off = effective_levels(&requested(&[("eligible.leader.replicas.version", 0)])).unwrap();
    assert_eq!(
        names(&records(&off, 2, Vec::new())),
        ["metadata.version=27", "group.version=1", "transaction.version=2"]
    );
}

fn controller_config(dir: &Path) -> crate::config::BrokerConfig {
    let props = [
        ("process.roles", "controller".to_string()),
        ("node.id", "3000".to_string()),
        ("controller.quorum.voters", "3000@127.0.0.1:9093".to_string()),
        ("listeners", "CONTROLLER://127.0.0.1:9093".to_string()),
        ("controller.listener.names", "CONTROLLER".to_string()),
        ("listener.security.protocol.map", "CONTROLLER:PLAINTEXT".to_string()),
        ("log.dirs", dir.display().to_string()),
    ];
    let props = props.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    crate::config::BrokerConfig::from_properties(props).expect("controller config")
}

fn open(dir: &Path, config: &crate::config::BrokerConfig) -> QuorumController {
    let settings = ControllerSettings::from_config(config, 3000, 9_000, "bootstrap-test");
    QuorumController::open(dir, settings).expect("open")
}

#[test]
fn a_formatted_controller_starts_its_metadata_log_with_the_formatted_levels_and_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let config = controller_config(dir.path());
    let features = requested(&[("transaction.version", 1), ("eligible.leader.replicas.version", 0)]);
    let scram = ["SCRAM-SHA-256=[name=alice,password=alice-secret]".to_string()];
    crate::metadata::format::format(&config, "AAAAAAAAAAAAAAAAAAAAAA", false, &features, &scram, &Default::default())
        .expect("format");

    let controller = open(dir.path(), &config);
    let image = controller.image();
    assert_eq!(image.features, levels(&[("metadata.version", 27), ("transaction.version", 1), ("group.version", 1)]));
    assert!(!crate::controller::elr::enabled(&image));
    assert!(!image.configs.contains_key(&(BROKER_RESOURCE, String::new())), "no cluster min ISR without ELR");
    let credentials: Vec<_> = image.scram.keys().cloned().collect();
    assert_eq!(credentials, vec![("alice".to_string(), 1)], "alice's credential is in the log");
    controller.close();
    drop(controller);

    // Only the first start bootstraps: the log is the cluster's metadata from then on.
    write(dir.path(), &effective_levels(&[]).unwrap()).unwrap();
    let reopened = open(dir.path(), &config);
    assert_eq!(reopened.image().features.get("transaction.version"), Some(&1));
    assert_eq!(reopened.image().features.get("eligible.leader.replicas.version"), None);
}

#[test]
fn format_refuses_on_a_controller_what_kafkas_formatter_refuses_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = controller_config(dir.path());
    let refused = crate::metadata::format::format(
        &config,
        "AAAAAAAAAAAAAAAAAAAAAA",
        false,
        &requested(&[("metadata.version", 22), ("eligible.leader.replicas.version", 1)]),
        &[],
        &Default::default(),
    )
    .unwrap_err();
    assert!(refused.to_string().contains("depends on metadata.version level 23"), "{refused}");
    assert!(!dir.path().join("meta.properties").exists());
    // group.version is a cluster feature Kafka's formatter takes, though a single node has none.
    let group = requested(&[("group.version", 0)]);
    crate::metadata::format::format(&config, "AAAAAAAAAAAAAAAAAAAAAA", false, &group, &[], &Default::default())
        .expect("format");
    assert_eq!(read(dir.path()).unwrap().get("group.version"), None);
}

#[test]
fn a_single_nodes_log_gets_the_levels_and_what_its_ketch_dir_kept() {
    use crate::security::acl::{self, AclBinding};
    let dir = tempfile::tempdir().unwrap();
    // A single node's metadata log: records, no feature level.
    let mut log = crate::raft::MetadataLog::open(dir.path(), 3000, 0, |_, _| Ok(())).unwrap();
    let topic = crate::metadata::records::TopicRecord {
        name: "kept".into(),
        topic_id: uuid::Uuid::from_u128(42),
        ..Default::default()
    };
    log.append(&[MetadataRecord::Topic(topic)], 0).unwrap();
    log.close().unwrap();
    drop(log);
    // Its `.ketch/`: an ACL and a dynamic cluster-default config.
    let mut props = crate::config::Properties::new();
    props.insert("authorizer.class.name".into(), crate::security::acl_store::STANDARD_AUTHORIZER.into());
    let store = crate::security::acl_store::AclStore::open(&props, dir.path()).unwrap().unwrap();
    let alice = AclBinding {
        id: uuid::Uuid::nil(),
        resource_type: acl::TOPIC,
        resource_name: "kept".into(),
        pattern_type: acl::LITERAL,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: acl::READ,
        permission: acl::ALLOW,
    };
    assert!(store.create(vec![alice]).iter().all(Result::is_ok));
    let configs = dir.path().join(".ketch").join("configs");
    std::fs::create_dir_all(&configs).unwrap();
    std::fs::write(configs.join("cluster-default.properties"), "log.retention.ms=1234\n").unwrap();

    let controller = open(dir.path(), &controller_config(dir.path()));
    let image = controller.image();
    assert!(image.features.contains_key("metadata.version"));
    assert!(image.topic("kept").is_some());
    assert_eq!(image.acls.values().map(|a| a.principal.as_str()).collect::<Vec<_>>(), vec!["User:alice"]);
    let default = &image.configs[&(crate::metadata::image::BROKER_RESOURCE, String::new())];
    assert_eq!(default.get("log.retention.ms").map(String::as_str), Some("1234"));
    drop(controller);
    // Carried once: a reopen finds metadata.version and adds nothing.
    let image = open(dir.path(), &controller_config(dir.path())).image();
    assert_eq!(image.acls.len(), 1);
}
