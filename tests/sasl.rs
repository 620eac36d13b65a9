//! SASL listeners against hostile and wrong input, over the wire with the real binary: garbage
//! SaslAuthenticate bodies, tokens beyond `sasl.server.max.receive.size`, requests before
//! authentication, malformed SCRAM messages, random frames. Each closes (or answers) that one
//! connection; the broker serves on. Also the happy paths the clients do not take: the legacy
//! SaslHandshake v0 raw-token flow, and the SASL APIs on a PLAINTEXT listener.

mod common;

use std::io::Write;

use bytes::Bytes;
use common::{call, closed, exchange_raw, frame, read_frame, TestBroker};
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

const JAAS: &str = "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";";

fn sasl_broker() -> TestBroker {
    TestBroker::start(&["listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256", JAAS])
}

fn handshake(mechanism: &str) -> RequestKind {
    RequestKind::SaslHandshake(SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())))
}

fn authenticate(token: &[u8]) -> RequestKind {
    RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token)))
}

fn metadata() -> RequestKind {
    RequestKind::Metadata(MetadataRequest::default())
}

fn handshake_ok(s: &mut std::net::TcpStream, mechanism: &str) {
    match call(s, ApiKey::SaslHandshake, 1, handshake(mechanism)) {
        ResponseKind::SaslHandshake(r) => assert_eq!(r.error_code, 0),
        other => panic!("{other:?}"),
    }
}

#[test]
fn plain_login_then_requests_and_failures_close() {
    let mut broker = sasl_broker();
    let mut s = broker.connect();
    handshake_ok(&mut s, "PLAIN");
    match call(&mut s, ApiKey::SaslAuthenticate, 2, authenticate(b"\0alice\0alice-secret")) {
        ResponseKind::SaslAuthenticate(r) => assert_eq!((r.error_code, r.session_lifetime_ms), (0, 0)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(call(&mut s, ApiKey::Metadata, 12, metadata()), ResponseKind::Metadata(_)));
    // A second SaslAuthenticate after success: ILLEGAL_SASL_STATE, as Kafka.
    match call(&mut s, ApiKey::SaslAuthenticate, 2, authenticate(b"x")) {
        ResponseKind::SaslAuthenticate(r) => assert_eq!(r.error_code, 34),
        other => panic!("{other:?}"),
    }
    // A wrong password: error 58 with Kafka's text, then closed.
    let mut s = broker.connect();
    handshake_ok(&mut s, "PLAIN");
    match call(&mut s, ApiKey::SaslAuthenticate, 1, authenticate(b"\0alice\0nope")) {
        ResponseKind::SaslAuthenticate(r) => {
            assert_eq!(r.error_code, 58);
            assert_eq!(r.error_message.as_deref(), Some("Authentication failed: Invalid username or password"));
        }
        other => panic!("{other:?}"),
    }
    assert!(closed(&mut s));
    // An unknown mechanism: 33 with the enabled list, then closed.
    let mut s = broker.connect();
    match call(&mut s, ApiKey::SaslHandshake, 1, handshake("GSSAPI")) {
        ResponseKind::SaslHandshake(r) => {
            assert_eq!(r.error_code, 33);
            assert_eq!(r.mechanisms.iter().map(|m| m.as_str()).collect::<Vec<_>>(), ["PLAIN", "SCRAM-SHA-256"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(closed(&mut s));
    assert!(broker.alive());
}

#[test]
fn requests_before_authentication_close_the_connection() {
    let mut broker = sasl_broker();
    // Metadata first.
    let mut s = broker.connect();
    assert!(exchange_raw(&mut s, &frame(ApiKey::Metadata, 12, 1, &metadata())).is_none());
    // After ApiVersions (answered), Metadata.
    let mut s = broker.connect();
    assert!(matches!(
        call(&mut s, ApiKey::ApiVersions, 3, RequestKind::ApiVersions(Default::default())),
        ResponseKind::ApiVersions(_)
    ));
    assert!(exchange_raw(&mut s, &frame(ApiKey::Metadata, 12, 1, &metadata())).is_none());
    // After the handshake, Metadata instead of SaslAuthenticate.
    let mut s = broker.connect();
    handshake_ok(&mut s, "PLAIN");
    assert!(exchange_raw(&mut s, &frame(ApiKey::Metadata, 12, 1, &metadata())).is_none());
    // SaslAuthenticate without a handshake.
    let mut s = broker.connect();
    assert!(
        exchange_raw(&mut s, &frame(ApiKey::SaslAuthenticate, 2, 1, &authenticate(b"\0alice\0alice-secret"))).is_none()
    );
    assert!(broker.alive());
}

#[test]
fn garbage_and_huge_tokens_close_without_harm() {
    let mut broker = sasl_broker();
    // SaslAuthenticate v1 whose bytes field claims 2 GB.
    let mut s = broker.connect();
    handshake_ok(&mut s, "PLAIN");
    let mut bad = vec![0, 0, 0, 0, 0, 36, 0, 1, 0, 0, 0, 9, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3];
    let len = (bad.len() - 4) as u32;
    bad[..4].copy_from_slice(&len.to_be_bytes());
    assert!(exchange_raw(&mut s, &bad).is_none());
    // A token past sasl.server.max.receive.size (512 KiB): closed before it is read whole.
    let mut s = broker.connect();
    handshake_ok(&mut s, "PLAIN");
    let huge = frame(ApiKey::SaslAuthenticate, 2, 1, &authenticate(&vec![b'a'; 600 * 1024]));
    let _ = s.write_all(&huge);
    assert!(read_frame(&mut s).is_none());
    // A length prefix of 100 MB before anything else.
    let mut s = broker.connect();
    assert!(exchange_raw(&mut s, &100_000_000i32.to_be_bytes()).is_none());
    // Malformed SCRAM messages: 58, then closed.
    for message in [&b"n,,n=,r="[..], b"n,,n=alice", b"p=tls,,n=alice,r=x", b"\xff\xfe", b"n,,n=al=ice,r=abc", b""] {
        let mut s = broker.connect();
        handshake_ok(&mut s, "SCRAM-SHA-256");
        match call(&mut s, ApiKey::SaslAuthenticate, 2, authenticate(message)) {
            ResponseKind::SaslAuthenticate(r) => assert_eq!(r.error_code, 58, "{message:?}"),
            other => panic!("{other:?}"),
        }
        assert!(closed(&mut s));
    }
    // Random frames before authentication (a fixed-seed xorshift): answered or closed, never a crash.
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for i in 0..200 {
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let len = (next() % 64) as usize + 1;
        let mut body: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if i % 2 == 0 && body.len() >= 4 {
            // Half of them look like SASL requests.
            body[0] = 0;
            body[1] = if i % 4 == 0 { 17 } else { 36 };
            body[2] = 0;
            body[3] = (next() % 3) as u8;
        }
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        let mut s = broker.connect();
        let _ = exchange_raw(&mut s, &out);
    }
    assert!(broker.alive());
    let mut s = broker.connect();
    handshake_ok(&mut s, "PLAIN");
}

#[test]
fn legacy_handshake_v0_with_raw_tokens() {
    let broker = sasl_broker();
    let mut s = broker.connect();
    match call(&mut s, ApiKey::SaslHandshake, 0, handshake("PLAIN")) {
        ResponseKind::SaslHandshake(r) => assert_eq!(r.error_code, 0),
        other => panic!("{other:?}"),
    }
    let token = b"\0alice\0alice-secret";
    let mut raw = (token.len() as u32).to_be_bytes().to_vec();
    raw.extend_from_slice(token);
    assert_eq!(exchange_raw(&mut s, &raw).expect("an empty raw token back").len(), 0);
    assert!(matches!(call(&mut s, ApiKey::Metadata, 12, metadata()), ResponseKind::Metadata(_)));
    // A wrong raw token: closed with no answer (Kafka's v0 flow has no error response).
    let mut s = broker.connect();
    call(&mut s, ApiKey::SaslHandshake, 0, handshake("PLAIN"));
    let mut raw = 11u32.to_be_bytes().to_vec();
    raw.extend_from_slice(b"\0alice\0nope");
    assert!(exchange_raw(&mut s, &raw).is_none());
}

#[test]
fn sasl_apis_on_a_plaintext_listener_are_illegal_state() {
    let broker = TestBroker::start(&[]);
    let mut s = broker.connect();
    match call(&mut s, ApiKey::SaslHandshake, 1, handshake("PLAIN")) {
        ResponseKind::SaslHandshake(r) => assert_eq!((r.error_code, r.mechanisms.len()), (34, 0)),
        other => panic!("{other:?}"),
    }
    match call(&mut s, ApiKey::SaslAuthenticate, 2, authenticate(b"x")) {
        ResponseKind::SaslAuthenticate(r) => assert_eq!(r.error_code, 34),
        other => panic!("{other:?}"),
    }
    // A SASL listener whose configuration cannot work refuses to start, naming the property.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ketch"))
        .args(["--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0", "--override", "sasl.enabled.mechanisms=PLAIN"])
        .args(["--override", &format!("log.dirs={}", broker.dir.path().join("other").display())])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listener.name.sasl_plaintext.plain.sasl.jaas.config"), "{err}");
}

#[test]
fn format_add_scram_then_a_scram_login_over_the_wire() {
    use ketch::security::scram::{client, Mechanism};
    let dir = tempfile::tempdir().unwrap();
    let dirs = format!("log.dirs={}", dir.path().display());
    let id = "J8m2cQ0sTn6cJ1Q8M8bnVw";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ketch"))
        .args(["format", "-t", id, "--override", &dirs])
        .args(["--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stored = std::fs::read(dir.path().join(".ketch/scram.records")).unwrap();
    assert!(!stored.windows(12).any(|w| w == b"alice-secret"), "no password on disk");
    let broker = TestBroker::start_in(
        dir,
        &[
            "listeners=SASL_SSL_FREE://127.0.0.1:0",
            "listener.security.protocol.map=SASL_SSL_FREE:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
        ],
    );
    for (password, ok) in [("alice-secret", true), ("wrong", false)] {
        let mut s = broker.connect();
        handshake_ok(&mut s, "SCRAM-SHA-512");
        let first = client::first("alice", "fyko+d2lbbFgONRv9qkxdawL");
        let ResponseKind::SaslAuthenticate(r) =
            call(&mut s, ApiKey::SaslAuthenticate, 2, authenticate(first.as_bytes()))
        else {
            panic!()
        };
        assert_eq!(r.error_code, 0);
        let server_first = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
        let (last, signature) = client::last(Mechanism::Sha512, password, &first, &server_first);
        let ResponseKind::SaslAuthenticate(r) =
            call(&mut s, ApiKey::SaslAuthenticate, 2, authenticate(last.as_bytes()))
        else {
            panic!()
        };
        if ok {
            assert_eq!(r.error_code, 0);
            use base64::Engine;
            let expected = format!("v={}", base64::engine::general_purpose::STANDARD.encode(signature));
            assert_eq!(r.auth_bytes, expected.as_bytes(), "the server proves it knows the credential");
            assert!(matches!(call(&mut s, ApiKey::Metadata, 12, metadata()), ResponseKind::Metadata(_)));
        } else {
            assert_eq!(r.error_code, 58);
            assert!(closed(&mut s));
        }
    }
}
