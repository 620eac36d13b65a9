//! Test support: run the real `ketch` binary on an ephemeral port and talk to it over TCP.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use kafka_protocol::messages::TopicName;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};

pub struct TestBroker {
    pub child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl TestBroker {
    pub fn start(overrides: &[&str]) -> TestBroker {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(dir, overrides)
    }

    pub fn start_in(dir: tempfile::TempDir, overrides: &[&str]) -> TestBroker {
        Self::start_with_env(dir, overrides, &[])
    }

    /// Starts the broker with extra environment variables (e.g. `KETCH_NUM_PARTITIONS`).
    pub fn start_with_env(dir: tempfile::TempDir, overrides: &[&str], env: &[(&str, &str)]) -> TestBroker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ketch"));
        cmd.envs(env.iter().copied());
        cmd.arg("--override").arg("listeners=PLAINTEXT://127.0.0.1:0");
        cmd.arg("--override").arg(format!("log.dirs={}", dir.path().display()));
        for o in overrides {
            cmd.arg("--override").arg(o);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no listening line: {line:?}"));
        TestBroker { child, port, dir }
    }

    pub fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn kill9(mut self) -> tempfile::TempDir {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap())
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Encodes a request frame (with length prefix) using kafka-protocol's client-side encoder.
pub fn frame(api_key: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("ketch-test")));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, api_key.request_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    buf.to_vec()
}

/// Sends raw bytes, then reads one response frame; `None` if the broker closed the connection.
pub fn exchange_raw(stream: &mut TcpStream, bytes: &[u8]) -> Option<Bytes> {
    stream.write_all(bytes).ok()?;
    read_frame(stream)
}

pub fn read_frame(stream: &mut TcpStream) -> Option<Bytes> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut body).ok()?;
    Some(Bytes::from(body))
}

/// Sends a request and decodes its response.
pub fn call(stream: &mut TcpStream, api_key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
    let mut response = exchange_raw(stream, &frame(api_key, version, 7, &body)).expect("response");
    let header_version = if api_key == ApiKey::ApiVersions { 0 } else { api_key.response_header_version(version) };
    let header = ResponseHeader::decode(&mut response, header_version).unwrap();
    assert_eq!(header.correlation_id, 7);
    ResponseKind::decode(api_key, &mut response, version).unwrap()
}

/// True when the broker closed the connection (read returns EOF or reset).
pub fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(stream.read(&mut buf), Ok(0) | Err(_))
}

pub fn batch(value: &str) -> Bytes {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    batch_at(value, now)
}

/// One keyless, non-transactional record `value` at `timestamp`, in a v2 batch.
pub fn batch_at(value: &str, timestamp: i64) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: None,
        value: Some(Bytes::from(value.to_string())),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    buf.freeze()
}

/// Creates topic `name` of `partitions` partitions (replication factor 1) with CreateTopics v7;
/// panics unless it was created.
pub fn create_topic(s: &mut TcpStream, name: &str, partitions: i32) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let create = CreateTopicsRequest::default().with_timeout_ms(5000).with_topics(vec![topic]);
    match call(s, ApiKey::CreateTopics, 7, RequestKind::CreateTopics(create)) {
        ResponseKind::CreateTopics(r) => assert_eq!(r.topics[0].error_code, 0, "creating {name}: {r:?}"),
        other => panic!("unexpected {other:?}"),
    }
}

pub fn produce(s: &mut std::net::TcpStream, records: Bytes) -> (i16, i64) {
    let request =
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![PartitionProduceData::default().with_index(0).with_records(Some(records))])]);
    match call(s, ApiKey::Produce, 9, RequestKind::Produce(request)) {
        ResponseKind::Produce(r) => {
            let p = &r.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Sends SIGTERM and waits for the process to exit; returns whether it exited successfully.
pub fn terminate(broker: &mut TestBroker) -> bool {
    let pid = broker.child.id().to_string();
    std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    broker.child.wait().unwrap().success()
}
