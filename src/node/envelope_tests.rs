//! The Envelope's byte formats, checked against bytes Kafka's own serializers produce (worked
//! out from Kafka's message schemas: `DefaultPrincipalData` v0 and the v2 request header).

use super::*;
use kafka_protocol::messages::{ApiKey, CreateTopicsRequest, CreateTopicsResponse};

fn origin() -> Origin {
    Origin {
        client_id: Some("adminclient-1".into()),
        correlation_id: 7,
        principal: "User:alice".into(),
        token_authenticated: false,
        address: "10.1.2.3".parse().unwrap(),
    }
}

#[test]
fn the_principal_is_kafkas_version_prefixed_default_principal_data() {
    let bytes = encode_principal("User:alice", false).unwrap();
    // i16 version 0; then, flexible v0: compact strings (length + 1) "User", "alice", a false
    // boolean and no tagged fields.
    let expected: &[u8] = &[0, 0, 5, b'U', b's', b'e', b'r', 6, b'a', b'l', b'i', b'c', b'e', 0, 0];
    assert_eq!(&bytes[..], expected);
    assert_eq!(decode_principal(&bytes).unwrap(), ("User:alice".to_string(), false));
    // A name with colons keeps them (only the first one separates the type).
    let colons = decode_principal(&encode_principal("User:CN=a:b", false).unwrap()).unwrap();
    assert_eq!(colons, ("User:CN=a:b".to_string(), false));
    // A delegation token's login: the boolean is true.
    let token = encode_principal("User:alice", true).unwrap();
    assert_eq!(token[13], 1);
    assert_eq!(decode_principal(&token).unwrap(), ("User:alice".to_string(), true));
}

#[test]
fn a_principal_that_does_not_decode_is_an_error() {
    for bad in [&b""[..], &[0], &[0, 1, 5, b'U'], &[0, 0, 5, b'U'], &[0, 0, 1, 1, 0, 0, 9]] {
        assert!(decode_principal(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn addresses_are_four_or_sixteen_raw_bytes() {
    assert_eq!(decode_address(&[10, 1, 2, 3]).unwrap(), "10.1.2.3".parse::<IpAddr>().unwrap());
    assert_eq!(decode_address(&[0; 16]).unwrap(), "::".parse::<IpAddr>().unwrap());
    assert!(decode_address(&[1, 2, 3]).is_err());
    let mapped = Origin { address: "::ffff:10.1.2.3".parse().unwrap(), ..origin() };
    let envelope = wrap(&mapped, 7, &CreateTopicsRequest::default()).unwrap();
    assert_eq!(&envelope.client_host_address[..], &[10, 1, 2, 3]);
}

#[test]
fn the_inner_request_is_the_clients_header_and_body() {
    let request = CreateTopicsRequest::default().with_timeout_ms(1234);
    let envelope = wrap(&origin(), 7, &request).unwrap();
    assert_eq!(decode_address(&envelope.client_host_address).unwrap(), origin().address);
    assert_eq!(decode_principal(envelope.request_principal.as_ref().unwrap()).unwrap().0, "User:alice");
    let mut data = envelope.request_data.clone();
    let header = RequestHeader::decode(&mut data, CreateTopicsRequest::header_version(7)).unwrap();
    assert_eq!(header.request_api_key, ApiKey::CreateTopics as i16);
    assert_eq!((header.request_api_version, header.correlation_id), (7, 7));
    assert_eq!(header.client_id.as_ref().map(|s| s.as_str()), Some("adminclient-1"));
    assert_eq!(CreateTopicsRequest::decode(&mut data, 7).unwrap(), request);
    assert!(data.is_empty());
}

#[test]
fn the_inner_response_must_answer_the_inner_request() {
    let answer = |correlation_id: i32| {
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut out, CreateTopicsResponse::header_version(7))
            .unwrap();
        CreateTopicsResponse::default().with_throttle_time_ms(250).encode(&mut out, 7).unwrap();
        out.freeze()
    };
    let response = unwrap::<CreateTopicsRequest>(&origin(), 7, answer(7)).unwrap();
    assert_eq!(response.throttle_time_ms, 250);
    assert!(unwrap::<CreateTopicsRequest>(&origin(), 7, answer(8)).is_err());
    assert!(unwrap::<CreateTopicsRequest>(&origin(), 7, Bytes::from_static(&[0, 0])).is_err());
}

#[test]
fn an_inner_response_the_guard_refuses_is_an_error_not_an_abort() {
    // CreateTopics v5 (response header v1): correlation id 7, no tagged fields, throttle_time_ms,
    // then `topics` as a compact array claiming 2^32-2 elements in 5 bytes.
    let hostile = [&[0, 0, 0, 7, 0][..], &[0, 0, 0, 0], &[0xff, 0xff, 0xff, 0xff, 0x0f]].concat();
    let err = unwrap::<CreateTopicsRequest>(&origin(), 5, Bytes::from(hostile)).unwrap_err();
    assert!(err.to_string().contains("refused before decoding"), "{err:#}");
    // The same answer, well formed, is decoded.
    let mut good = BytesMut::new();
    ResponseHeader::default().with_correlation_id(7).encode(&mut good, 1).unwrap();
    CreateTopicsResponse::default().with_throttle_time_ms(3).encode(&mut good, 5).unwrap();
    let answer = unwrap::<CreateTopicsRequest>(&origin(), 5, good.freeze()).unwrap();
    assert_eq!(answer.throttle_time_ms, 3);
}
