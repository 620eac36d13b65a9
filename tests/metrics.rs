//! The metrics endpoint of the real binary: figures follow the requests sent, and hostile HTTP
//! input gets 4xx answers without hurting the broker. (The client-level checks, lag included,
//! are in compat-tests/test_metrics.py.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::{ApiKey, RequestKind, TopicName};
use kafka_protocol::protocol::StrBytes;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Sends `request` as is, half-closes, returns the whole answer ("" if the server just closed).
fn http(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_follow_requests_and_bad_http_is_refused() {
    let port = free_port();
    let mut broker = TestBroker::start(&[&format!("ketch.metrics.listener=127.0.0.1:{port}")]);
    let mut s = broker.connect();
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("t"))))
    ]));
    call(&mut s, ApiKey::Metadata, 9, RequestKind::Metadata(metadata));
    for (i, v) in ["a", "b", "c"].into_iter().enumerate() {
        assert_eq!(produce(&mut s, batch(v)), (0, i as i64));
    }

    let answer = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(sample(body, "ketch_requests_total{api=\"Produce\"}"), Some(3.0));
    assert_eq!(sample(body, "ketch_requests_total{api=\"Metadata\"}"), Some(1.0));
    assert_eq!(sample(body, "ketch_request_duration_seconds_count{api=\"Produce\"}"), Some(3.0));
    assert_eq!(sample(body, "ketch_request_duration_seconds_bucket{api=\"Produce\",le=\"+Inf\"}"), Some(3.0));
    assert_eq!(sample(body, "ketch_log_end_offset{topic=\"t\",partition=\"0\"}"), Some(3.0));
    assert_eq!(sample(body, "ketch_connections_active"), Some(1.0));
    assert!(sample(body, "ketch_network_received_bytes_total").unwrap() > 3.0 * 60.0);
    assert!(sample(body, "ketch_network_sent_bytes_total").unwrap() > 0.0);
    assert_eq!(sample(body, "ketch_ready"), Some(1.0));

    assert!(http(port, b"\xff\xfe\x00garbage\r\n\r\n").starts_with("HTTP/1.1 400 "));
    assert!(http(port, b"DELETE /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
    assert!(http(port, b"GET /../../etc/passwd HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
    // Far more than the 8 KiB bound: answered 431 or reset, never read into memory.
    let huge = vec![b'A'; 1 << 20];
    let answer = http(port, &huge);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431 "), "{answer:.100}");
    // Many connections that send nothing: the endpoint keeps answering once they are gone.
    let idle: Vec<TcpStream> = (0..40).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    drop(idle);
    std::thread::sleep(Duration::from_millis(100));
    assert!(http(port, b"GET /live HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));
    assert!(http(port, b"GET /ready HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200 "));

    assert!(broker.alive(), "the broker survived the hostile requests");
    assert_eq!(produce(&mut s, batch("d")), (0, 3), "and still serves Kafka clients");
    drop(s);
    assert!(terminate(&mut broker), "clean exit on SIGTERM");
}

#[test]
fn no_endpoint_by_default() {
    // Only the Kafka listener: the broker's stdout has no metrics line and the process holds
    // a single listening socket (checked through /proc on Linux).
    let broker = TestBroker::start(&[]);
    let pid = broker.child.id();
    let mut inodes = std::collections::HashSet::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            if let Some(inode) = target.to_string_lossy().strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                inodes.insert(inode.to_string());
            }
        }
    }
    let mut listening = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for row in text.lines().skip(1) {
            let cols: Vec<&str> = row.split_whitespace().collect();
            if cols.len() > 9 && cols[3] == "0A" && inodes.contains(cols[9]) {
                listening.push(u16::from_str_radix(cols[1].rsplit(':').next().unwrap(), 16).unwrap());
            }
        }
    }
    assert_eq!(listening, vec![broker.port]);
}
