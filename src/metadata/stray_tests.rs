//! A single node's start keeps partition directories its metadata does not know: renamed
//! `-stray`, never deleted (Kafka 3.7+).

use super::*;

#[test]
fn a_partition_directory_of_a_topic_the_metadata_lacks_is_kept_as_stray() {
    let dir = tempfile::tempdir().unwrap();
    let mut props = Properties::new();
    props.insert("log.dirs".into(), dir.path().display().to_string());
    let config = BrokerConfig::from_properties(props).unwrap();
    let topics = TopicRegistry::open(&config).unwrap();
    topics.create("kept", 1, Properties::new()).unwrap();
    drop(topics);
    // A topic the metadata does not have (deleted; the process stopped before its directory went).
    let ghost = dir.path().join("ghost-0");
    drop(PartitionLog::open(&ghost, config.topic_defaults.clone(), 0).unwrap());
    std::fs::write(ghost.join("00000000000000000000.log"), b"data nobody asked to delete").unwrap();

    let topics = TopicRegistry::open(&config).unwrap();
    assert!(topics.get("kept").is_some() && topics.get("ghost").is_none());
    assert!(!ghost.exists());
    let strays: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("ghost-0.") && n.ends_with("-stray"))
        .collect();
    let [stray] = strays.as_slice() else { panic!("one stray directory: {strays:?}") };
    assert_eq!(stray.len(), "ghost-0.".len() + 32 + "-stray".len(), "Kafka's name: a 32-digit hex id");
    let data = std::fs::read(dir.path().join(stray).join("00000000000000000000.log")).unwrap();
    assert_eq!(data, b"data nobody asked to delete");
    // And a second start leaves it alone.
    drop(topics);
    drop(TopicRegistry::open(&config).unwrap());
    assert!(dir.path().join(stray).exists());
}
