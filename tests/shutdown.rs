//! Graceful shutdown: SIGTERM closes every log and leaves a clean-shutdown marker, which the
//! next start consumes (skipping full recovery); a kill -9 leaves none, so recovery runs. A
//! second broker on the same log directory refuses to start (Kafka's `.lock`).

mod common;

use common::*;

fn marker(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(".ketch").join("clean-shutdown")
}

#[test]
fn sigterm_leaves_a_clean_shutdown_marker_and_data_survives() {
    let mut broker = TestBroker::start(&["auto.create.topics.enable=true"]);
    let mut s = broker.connect();
    // Metadata auto-creates the topic "t" (default 1 partition).
    let metadata = kafka_protocol::messages::metadata_request::MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default().with_name(Some(
            kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_static_str("t")),
        )),
    ]));
    call(
        &mut s,
        kafka_protocol::messages::ApiKey::Metadata,
        9,
        kafka_protocol::messages::RequestKind::Metadata(metadata),
    );
    assert_eq!(produce(&mut s, batch("a")), (0, 0));
    assert_eq!(produce(&mut s, batch("b")), (0, 1));
    drop(s);
    assert!(terminate(&mut broker), "ketch exits 0 on SIGTERM");
    let dir = std::mem::replace(&mut broker.dir, tempfile::tempdir().unwrap());
    assert!(marker(dir.path()).exists(), "clean shutdown marker written");

    let broker = TestBroker::start_in(dir, &[]);
    assert!(!marker(broker.dir.path()).exists(), "the marker is consumed at start");
    let mut s = broker.connect();
    assert_eq!(produce(&mut s, batch("c")), (0, 2), "offsets continue after the restart");

    // After a kill -9 there is no marker.
    let dir = broker.kill9();
    assert!(!marker(dir.path()).exists());
    let broker = TestBroker::start_in(dir, &[]);
    let mut s = broker.connect();
    assert_eq!(produce(&mut s, batch("d")), (0, 3));
}

#[test]
fn a_second_broker_on_the_same_log_dir_refuses_to_start() {
    let broker = TestBroker::start(&["auto.create.topics.enable=true"]);
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_ketch"))
        .arg("--override")
        .arg("listeners=PLAINTEXT://127.0.0.1:0")
        .arg("--override")
        .arg(format!("log.dirs={}", broker.dir.path().display()))
        .output()
        .unwrap();
    assert!(!second.status.success(), "the second broker must not start");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("Failed to acquire lock on file .lock"), "stderr: {stderr}");
    assert!(!String::from_utf8_lossy(&second.stdout).contains("listening"));
    // The first one is untouched and keeps serving.
    let mut s = broker.connect();
    let metadata = kafka_protocol::messages::metadata_request::MetadataRequest::default().with_topics(Some(vec![
        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default().with_name(Some(
            kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_static_str("t")),
        )),
    ]));
    call(
        &mut s,
        kafka_protocol::messages::ApiKey::Metadata,
        9,
        kafka_protocol::messages::RequestKind::Metadata(metadata),
    );
    assert_eq!(produce(&mut s, batch("a")), (0, 0));
}
