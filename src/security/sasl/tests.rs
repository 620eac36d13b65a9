//! The listener configuration and the authenticator's state machine, driven with request frames
//! encoded by kafka-protocol (the real clients are in compat-tests/test_sasl.py).

use super::*;
use kafka_protocol::messages::sasl_authenticate_request::SaslAuthenticateRequest;
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const JAAS: &str =
    "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\" user_admin='adm';";

fn config() -> Arc<ListenerSasl> {
    let p = props(&[
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        ("listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms", "60000"),
    ]);
    Arc::new(listener_config(&p, "SASL_PLAINTEXT").unwrap())
}

fn frame<T: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &T) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

fn handshake(mechanism: &str, version: i16) -> Bytes {
    frame(ApiKey::SaslHandshake, version, 1, &SaslHandshakeRequest::default().with_mechanism(text(mechanism)))
}

fn authenticate(token: &[u8], version: i16) -> Bytes {
    let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    frame(ApiKey::SaslAuthenticate, version, 2, &body)
}

/// The response body of a reply, decoded at `version`.
fn reply<T: Decodable>(step: Step, key: ApiKey, version: i16) -> (T, bool) {
    let Step::Reply { out, close } = step else { panic!("expected a reply") };
    let mut body = out.freeze().slice(4..);
    kafka_protocol::messages::ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    (T::decode(&mut body, version).unwrap(), close)
}

fn store() -> (tempfile::TempDir, ScramStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = ScramStore::open(dir.path()).unwrap();
    (dir, s)
}

#[test]
fn configuration_refusals_name_the_property() {
    let err = |p: &[(&str, &str)]| listener_config(&props(p), "SASL_SSL").unwrap_err().to_string();
    assert!(err(&[]).contains("GSSAPI"), "Kafka's default mechanism is refused");
    assert!(err(&[("sasl.enabled.mechanisms", "PLAIN")]).contains("listener.name.sasl_ssl.plain.sasl.jaas.config"));
    let bad = err(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\"",
        ),
    ]);
    assert!(bad.contains("semi-colon"), "{bad}");
    let wrong_module = err(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        ),
    ]);
    assert!(wrong_module.contains("does not serve PLAIN"), "{wrong_module}");
    assert!(err(&[("sasl.enabled.mechanisms", "GSSAPI")]).contains("GSSAPI"));
    // OAUTHBEARER needs no JAAS entry (Kafka's unsecured validator, default options).
    assert!(listener_config(&props(&[("sasl.enabled.mechanisms", "OAUTHBEARER")]), "SASL_SSL").is_ok());
    // Listener overrides win; SCRAM needs no JAAS entry.
    let p = props(&[
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_ssl.sasl.enabled.mechanisms", "SCRAM-SHA-512"),
    ]);
    assert_eq!(listener_config(&p, "SASL_SSL").unwrap().mechanisms, ["SCRAM-SHA-512"]);
    let c = config();
    assert_eq!(c.plain_users.len(), 2);
    assert_eq!(c.reauth_ms["SCRAM-SHA-256"], 60000);
    assert_eq!(c.reauth_ms["PLAIN"], 0);
    assert!(c.plain_ok("admin", "adm") && !c.plain_ok("admin", "adm ") && !c.plain_ok("nobody", "adm"));
}

#[test]
fn plain_with_kafka_frames_then_requests_pass() {
    let (_d, store) = store();
    let mut auth = Authenticator::new(config());
    let now = Instant::now();
    let versions = frame(ApiKey::ApiVersions, 3, 0, &ApiVersionsRequest::default());
    assert!(matches!(auth.on_frame(&versions, &store, now), Step::Pass));
    let (r, close): (SaslHandshakeResponse, _) =
        reply(auth.on_frame(&handshake("PLAIN", 1), &store, now), ApiKey::SaslHandshake, 1);
    assert_eq!((r.error_code, close), (0, false));
    assert_eq!(r.mechanisms, [text("PLAIN"), text("SCRAM-SHA-256")]);
    assert!(auth.principal().is_none());
    let (r, close): (SaslAuthenticateResponse, _) =
        reply(auth.on_frame(&authenticate(b"\0alice\0alice-secret", 2), &store, now), ApiKey::SaslAuthenticate, 2);
    assert_eq!((r.error_code, close, r.session_lifetime_ms), (0, false, 0));
    assert_eq!(auth.principal(), Some("User:alice"));
    let metadata = frame(ApiKey::Metadata, 12, 3, &MetadataRequest::default());
    assert!(matches!(auth.on_frame(&metadata, &store, now), Step::Pass));
    // No reauthentication lifetime for PLAIN here: the session never expires.
    assert!(matches!(auth.on_frame(&metadata, &store, now + Duration::from_secs(3600)), Step::Pass));
}

#[test]
fn failures_answer_kafkas_errors_and_close() {
    let (_d, store) = store();
    let now = Instant::now();
    for (token, message) in [
        (&b"\0alice\0wrong"[..], "Authentication failed: Invalid username or password"),
        (b"\0nobody\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (
            b"bob\0alice\0alice-secret",
            "Authentication failed: Client requested an authorization id that is different from username",
        ),
    ] {
        let mut auth = Authenticator::new(config());
        reply::<SaslHandshakeResponse>(auth.on_frame(&handshake("PLAIN", 1), &store, now), ApiKey::SaslHandshake, 1);
        let (r, close): (SaslAuthenticateResponse, _) =
            reply(auth.on_frame(&authenticate(token, 1), &store, now), ApiKey::SaslAuthenticate, 1);
        assert_eq!((r.error_code, close), (58, true));
        assert_eq!(r.error_message.as_deref(), Some(message));
        assert!(auth.principal().is_none());
    }
    // SCRAM with an unknown user: Kafka's generic text.
    let mut auth = Authenticator::new(config());
    reply::<SaslHandshakeResponse>(
        auth.on_frame(&handshake("SCRAM-SHA-256", 1), &store, now),
        ApiKey::SaslHandshake,
        1,
    );
    let (r, _): (SaslAuthenticateResponse, _) =
        reply(auth.on_frame(&authenticate(b"n,,n=ghost,r=abc", 2), &store, now), ApiKey::SaslAuthenticate, 2);
    assert_eq!(
        r.error_message.as_deref(),
        Some(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
        )
    );
    // An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the enabled list, then closed.
    let mut auth = Authenticator::new(config());
    let (r, close): (SaslHandshakeResponse, _) =
        reply(auth.on_frame(&handshake("GSSAPI", 1), &store, now), ApiKey::SaslHandshake, 1);
    assert_eq!((r.error_code, close, r.mechanisms.len()), (33, true, 2));
    // Anything but the SASL exchange before authentication closes: a Metadata request first,
    // after ApiVersions, in place of SaslAuthenticate; a second ApiVersions; garbage.
    let metadata = frame(ApiKey::Metadata, 12, 3, &MetadataRequest::default());
    let versions = frame(ApiKey::ApiVersions, 3, 0, &ApiVersionsRequest::default());
    let mut a = Authenticator::new(config());
    assert!(matches!(a.on_frame(&metadata, &store, now), Step::Close(_)));
    let mut a = Authenticator::new(config());
    assert!(matches!(a.on_frame(&versions, &store, now), Step::Pass));
    assert!(matches!(a.on_frame(&versions, &store, now), Step::Close(_)));
    // An ApiVersions version we do not serve (answered by the KIP-511 fallback) may be retried.
    let mut a = Authenticator::new(config());
    let future = frame(ApiKey::ApiVersions, 0, 0, &ApiVersionsRequest::default());
    let mut future = BytesMut::from(&future[..]);
    future[2..4].copy_from_slice(&99i16.to_be_bytes());
    assert!(matches!(a.on_frame(&future.freeze(), &store, now), Step::Pass));
    assert!(matches!(a.on_frame(&versions, &store, now), Step::Pass));
    assert!(matches!(a.on_frame(&versions, &store, now), Step::Close(_)));
    let mut a = Authenticator::new(config());
    assert!(matches!(a.on_frame(&handshake("PLAIN", 1), &store, now), Step::Reply { close: false, .. }));
    assert!(matches!(a.on_frame(&metadata, &store, now), Step::Close(_)));
    let mut a = Authenticator::new(config());
    assert!(matches!(a.on_frame(&Bytes::from_static(b"\x00"), &store, now), Step::Close(_)));
    let mut a = Authenticator::new(config());
    assert!(matches!(
        a.on_frame(&Bytes::from_static(&[0, 36, 0, 2, 0, 0, 0, 1, 0xff, 0xff, 0xff]), &store, now),
        Step::Close(_)
    ));
}

#[test]
fn legacy_v0_handshake_then_raw_tokens() {
    let (_d, store) = store();
    let now = Instant::now();
    let mut auth = Authenticator::new(config());
    reply::<SaslHandshakeResponse>(auth.on_frame(&handshake("PLAIN", 0), &store, now), ApiKey::SaslHandshake, 0);
    let Step::Reply { out, close: false } = auth.on_frame(&Bytes::from_static(b"\0alice\0alice-secret"), &store, now)
    else {
        panic!("raw reply expected")
    };
    assert_eq!(&out[..], &[0, 0, 0, 0], "an empty raw token");
    assert_eq!(auth.principal(), Some("User:alice"));
    let mut auth = Authenticator::new(config());
    reply::<SaslHandshakeResponse>(auth.on_frame(&handshake("PLAIN", 0), &store, now), ApiKey::SaslHandshake, 0);
    assert!(matches!(auth.on_frame(&Bytes::from_static(b"\0alice\0nope"), &store, now), Step::Close(_)));
}

#[test]
fn scram_session_lifetime_reauthentication_and_expiry() {
    let (_d, store) = store();
    let salted = scram::Mechanism::Sha256.salted_password(b"pw", b"salt", 4096);
    let add = |user: &str| crate::security::scram_store::Alteration::Upsert {
        user: user.into(),
        mechanism: 1,
        iterations: 4096,
        salt: b"salt".to_vec(),
        salted_password: salted.clone(),
    };
    store.alter(vec![add("carol"), add("dan")]);
    let now = Instant::now();
    let mut auth = Authenticator::new(config());
    let login = |auth: &mut Authenticator, user: &str, at: Instant| -> SaslAuthenticateResponse {
        let (r, _): (SaslHandshakeResponse, _) =
            reply(auth.on_frame(&handshake("SCRAM-SHA-256", 1), &store, at), ApiKey::SaslHandshake, 1);
        assert_eq!(r.error_code, 0);
        let first = scram::client::first(user, "clientnonce");
        let (r, _): (SaslAuthenticateResponse, _) =
            reply(auth.on_frame(&authenticate(first.as_bytes(), 2), &store, at), ApiKey::SaslAuthenticate, 2);
        let server_first = String::from_utf8(r.auth_bytes.to_vec()).unwrap();
        assert!(server_first.starts_with("r=clientnonce"), "{server_first}");
        let (last, _) = scram::client::last(scram::Mechanism::Sha256, "pw", &first, &server_first);
        let (r, _): (SaslAuthenticateResponse, _) =
            reply(auth.on_frame(&authenticate(last.as_bytes(), 2), &store, at), ApiKey::SaslAuthenticate, 2);
        r
    };
    let r = login(&mut auth, "carol", now);
    assert_eq!((r.error_code, r.session_lifetime_ms), (0, 60000));
    assert_eq!(auth.principal(), Some("User:carol"));
    let metadata = frame(ApiKey::Metadata, 12, 3, &MetadataRequest::default());
    assert!(matches!(auth.on_frame(&metadata, &store, now + Duration::from_secs(59)), Step::Pass));
    // Re-authentication on the same connection renews the session.
    let later = now + Duration::from_secs(50);
    let r = login(&mut auth, "carol", later);
    assert_eq!(r.error_code, 0);
    assert!(matches!(auth.on_frame(&metadata, &store, now + Duration::from_secs(100)), Step::Pass));
    // Past its lifetime, any request but a re-authentication closes the connection.
    assert!(matches!(auth.on_frame(&metadata, &store, later + Duration::from_secs(61)), Step::Close(_)));
    // Another principal is refused on re-authentication.
    let mut auth = Authenticator::new(config());
    login(&mut auth, "carol", now);
    let r = login(&mut auth, "dan", now);
    assert_eq!(r.error_code, 58);
    assert!(r.error_message.unwrap().contains("Cannot change principals"));
}

#[test]
fn reauthentication_needs_saslauthenticate_v1() {
    let (_d, store) = store();
    let now = Instant::now();
    let mut auth = Authenticator::new(config());
    reply::<SaslHandshakeResponse>(auth.on_frame(&handshake("PLAIN", 1), &store, now), ApiKey::SaslHandshake, 1);
    reply::<SaslAuthenticateResponse>(
        auth.on_frame(&authenticate(b"\0alice\0alice-secret", 0), &store, now),
        ApiKey::SaslAuthenticate,
        0,
    );
    // A v0 client cannot re-authenticate: the handshake goes to the handler (ILLEGAL_SASL_STATE).
    assert!(matches!(auth.on_frame(&handshake("PLAIN", 1), &store, now), Step::Pass));
}
