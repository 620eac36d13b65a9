//! Bad input never takes the broker down: malformed, truncated, oversized and hostile frames
//! get Kafka's error code or a closed connection, other connections keep working, stored data
//! is untouched.

mod common;

use std::io::Write;

use bytes::Bytes;
use common::*;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;

fn api_versions_ok(broker: &TestBroker) {
    let mut s = broker.connect();
    match call(&mut s, ApiKey::ApiVersions, 3, RequestKind::ApiVersions(ApiVersionsRequest::default())) {
        ResponseKind::ApiVersions(r) => assert_eq!(r.error_code, 0),
        other => panic!("unexpected {other:?}"),
    }
}

/// A raw frame: length prefix + header fields + arbitrary body bytes.
fn raw(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    let len = 2 + 2 + 4 + 2 + body.len();
    f.extend_from_slice(&(len as i32).to_be_bytes());
    f.extend_from_slice(&api_key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&9i32.to_be_bytes());
    f.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    f.extend_from_slice(body);
    f
}

#[test]
fn hostile_frames_close_only_their_connection() {
    let mut broker = TestBroker::start(&["socket.request.max.bytes=1048576"]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"\x00\x00\x00\x10GET / HTTP/1.1\r\n".to_vec()),
        ("negative length", (-5i32).to_be_bytes().to_vec()),
        ("oversized length", (64i32 << 20).to_be_bytes().to_vec()),
        ("too short for a header", vec![0, 0, 0, 3, 0, 1, 2]),
        ("unknown api key", raw(9999, 0, &[])),
        ("unsupported fetch version", raw(1, 99, &[])),
        ("produce v2 (advertised, refused)", raw(0, 2, &[0, 1, 0, 0, 0, 0, 0, 0, 0, 0])),
        // CVE-2022-34917 class: a 5-byte Metadata v4 body claiming 2^31 topics.
        ("huge array count", raw(3, 4, &[0x7f, 0xff, 0xff, 0xff, 0x00])),
        (
            "huge nested count",
            raw(0, 3, &[0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0x7f, 0xff, 0xff, 0xff]),
        ),
        ("truncated metadata", raw(3, 1, &[0, 0, 0, 2, 0, 5, b'a'])),
    ];
    for (name, bytes) in cases {
        let mut s = broker.connect();
        let _ = s.write_all(&bytes);
        assert!(closed(&mut s), "{name}: connection should be closed");
        assert!(broker.alive(), "{name}: broker died");
        api_versions_ok(&broker);
    }
}

#[test]
fn frame_claiming_more_than_it_sends_does_not_hurt() {
    let mut broker = TestBroker::start(&[]);
    let mut s = broker.connect();
    // Claims 100 MB, sends 10 bytes, hangs up.
    s.write_all(&(100_000_000i32).to_be_bytes()).unwrap();
    s.write_all(&[0u8; 10]).unwrap();
    drop(s);
    api_versions_ok(&broker);
    assert!(broker.alive());
}

#[test]
fn unknown_api_versions_version_gets_kip_511_fallback() {
    let broker = TestBroker::start(&[]);
    let mut s = broker.connect();
    let mut response = exchange_raw(&mut s, &raw(18, 99, &[])).expect("a response, not a hangup");
    let header = ResponseHeader::decode(&mut response, 0).unwrap();
    assert_eq!(header.correlation_id, 9);
    let body = ApiVersionsResponse::decode(&mut response, 0).unwrap();
    assert_eq!(body.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(body.api_keys.iter().any(|k| k.api_key == 18));
}

#[test]
fn corrupt_batches_get_kafka_error_codes_and_leave_the_log_intact() {
    let broker = TestBroker::start(&[]);
    let mut s = broker.connect();
    create_topic(&mut s, "t", 1);
    assert_eq!(produce(&mut s, batch("first")), (0, 0));
    let good = batch("second");
    let mut bad_crc = good.to_vec();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    assert_eq!(produce(&mut s, Bytes::from(bad_crc)).0, 2, "CORRUPT_MESSAGE");
    assert_eq!(produce(&mut s, good.slice(..40)).0, 2, "truncated batch: CORRUPT_MESSAGE");
    let mut bad_count = good.to_vec();
    bad_count[57..61].copy_from_slice(&5i32.to_be_bytes());
    let crc = crc32c::crc32c(&bad_count[21..]);
    bad_count[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(produce(&mut s, Bytes::from(bad_count)).0, 87, "record count mismatch: INVALID_RECORD");
    let mut bad_magic = good.to_vec();
    bad_magic[16] = 7;
    assert_eq!(produce(&mut s, Bytes::from(bad_magic)).0, 2);
    // Nothing bad was stored: the next good batch lands right after the first.
    assert_eq!(produce(&mut s, good), (0, 1));
}
