//! The scenario a user of the container image runs, against a native `ketch` process configured
//! the way the image configures it (`KETCH_LISTENERS` / `KETCH_ADVERTISED_LISTENERS` on a port
//! chosen beforehand) and, with `--features testcontainers` and a reachable Docker engine, against
//! the `ketch:latest` image through `ketch::testcontainers::Ketch` (build it first:
//! `docker build -f docker/Dockerfile -t ketch .`). Without an engine that test says so and passes
//! without running the scenario.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::{batch, call, produce};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Connects to `bootstrap`, checks the broker advertises exactly that address, auto-creates
/// topic "t" and produces two records to it.
fn scenario(bootstrap: &str) {
    let mut s = TcpStream::connect(bootstrap).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = MetadataRequest::default().with_allow_auto_topic_creation(true).with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("t")))),
    ]));
    let ResponseKind::Metadata(metadata) = call(&mut s, ApiKey::Metadata, 9, RequestKind::Metadata(request)) else {
        panic!("not a Metadata response")
    };
    let advertised: Vec<String> = metadata.brokers.iter().map(|b| format!("{}:{}", b.host.as_str(), b.port)).collect();
    assert_eq!(advertised, vec![bootstrap.to_string()], "clients must be sent back to the address they used");
    assert_eq!(metadata.topics.len(), 1);
    assert_eq!(produce(&mut s, batch("a")), (0, 0));
    assert_eq!(produce(&mut s, batch("b")), (0, 1));
}

#[test]
fn native_broker_configured_like_the_image() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listeners = format!("PLAINTEXT://127.0.0.1:{port}");
    // TestBroker's own `--override listeners=...:0` is replaced by the later override.
    let dir = tempfile::tempdir().unwrap();
    let broker = common::TestBroker::start_with_env(
        dir,
        &[&format!("listeners={listeners}")],
        &[("KETCH_ADVERTISED_LISTENERS", &listeners)],
    );
    assert_eq!(broker.port, port);
    scenario(&format!("127.0.0.1:{port}"));
}

#[cfg(feature = "testcontainers")]
#[tokio::test(flavor = "multi_thread")]
async fn container_image_through_testcontainers() {
    if let Err(why) = docker_engine_reachable() {
        eprintln!("SKIPPED container_image_through_testcontainers: no Docker engine reachable ({why})");
        return;
    }
    let ketch = ketch::testcontainers::Ketch::default()
        .run()
        .await
        .expect("start ketch:latest (build it with `docker build -f docker/Dockerfile -t ketch .`)");
    let bootstrap = ketch.bootstrap_servers().to_string();
    tokio::task::spawn_blocking(move || scenario(&bootstrap)).await.unwrap();
}

/// Whether a Docker engine answers where testcontainers looks for one (`DOCKER_HOST`, else the
/// default socket).
#[cfg(feature = "testcontainers")]
fn docker_engine_reachable() -> Result<(), String> {
    let host = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    if let Some(path) = host.strip_prefix("unix://") {
        std::os::unix::net::UnixStream::connect(path).map(drop).map_err(|e| format!("{path}: {e}"))
    } else if let Some(addr) = host.strip_prefix("tcp://") {
        TcpStream::connect(addr).map(drop).map_err(|e| format!("{addr}: {e}"))
    } else {
        Err(format!("DOCKER_HOST={host} is not unix:// or tcp://"))
    }
}
