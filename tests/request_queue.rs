//! `queued.max.requests` and `queued.max.request.bytes` bound what the broker reads across all
//! connections, as Kafka's request queue and memory pool do (`server::request_queue`): while
//! they are used up no connection's next request is read, and reading goes on when they come
//! back.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::{ApiKey, RequestKind, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Sends an ApiVersions request on a new connection, without waiting for its answer.
fn ask_api_versions(broker: &TestBroker) -> TcpStream {
    let mut s = broker.connect();
    let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
    s.write_all(&frame(ApiKey::ApiVersions, 3, 7, &body)).unwrap();
    s
}

/// Whether an answer comes on `s` within `wait`.
fn answered_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    read_frame(s).is_some()
}

#[test]
fn a_used_up_memory_pool_holds_back_every_connection_until_its_bytes_come_back() {
    let max = 1_048_576;
    let mut broker =
        TestBroker::start(&[&format!("socket.request.max.bytes={max}"), &format!("queued.max.request.bytes={max}")]);
    // A frame announcing the whole pool, half sent: its bytes are leased as its length arrives.
    let mut slow = broker.connect();
    slow.write_all(&(max as i32).to_be_bytes()).unwrap();
    slow.write_all(&vec![0u8; max / 2]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut other = ask_api_versions(&broker);
    assert!(!answered_within(&mut other, Duration::from_secs(1)), "the pool is used up: no request is read");
    // The slow client goes away: its bytes come back and the waiting request is read.
    drop(slow);
    assert!(answered_within(&mut other, Duration::from_secs(10)), "read once the pool has room again");
    assert!(broker.alive());
}

#[test]
fn queued_max_requests_bounds_the_requests_read_ahead_of_their_turn() {
    let mut broker = TestBroker::start(&["queued.max.requests=1"]);
    let mut busy = broker.connect();
    create_topic(&mut busy, "t", 1);
    assert_eq!(produce(&mut busy, batch("one")), (0, 0));
    // A long poll (nothing past offset 1 for 3 s), then a request pipelined behind it: read
    // ahead, it holds the queue's only place until the poll is over.
    let fetch =
        FetchRequest::default().with_max_wait_ms(3000).with_min_bytes(1).with_max_bytes(1 << 20).with_topics(vec![
            FetchTopic::default().with_topic(TopicName(StrBytes::from_static_str("t"))).with_partitions(vec![
                FetchPartition::default().with_partition(0).with_fetch_offset(1).with_partition_max_bytes(1 << 20),
            ]),
        ]);
    let started = Instant::now();
    busy.write_all(&frame(ApiKey::Fetch, 12, 8, &RequestKind::Fetch(fetch))).unwrap();
    let body = RequestKind::ApiVersions(ApiVersionsRequest::default());
    busy.write_all(&frame(ApiKey::ApiVersions, 3, 9, &body)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut other = ask_api_versions(&broker);
    assert!(!answered_within(&mut other, Duration::from_secs(1)), "the queue is full: no request is read");
    assert!(answered_within(&mut other, Duration::from_secs(10)), "read once the poll is over");
    assert!(started.elapsed() >= Duration::from_millis(2500), "not before the poll ended: {:?}", started.elapsed());
    // The busy connection got both its answers, in order.
    busy.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert!(read_frame(&mut busy).is_some() && read_frame(&mut busy).is_some());
    assert!(broker.alive());
}

#[test]
fn a_pool_smaller_than_a_request_is_refused_at_start_as_kafka_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ketch"))
        .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().display()))
        .args(["--override", "queued.max.request.bytes=1000"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the broker started with a pool smaller than socket.request.max.bytes");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("queued.max.request.bytes must be larger or equal to socket.request.max.bytes"),
        "{stderr}"
    );
}
