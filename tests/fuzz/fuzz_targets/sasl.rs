//! SASL on a listener with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (unsecured tokens)
//! enabled: `ketch::security::sasl::Authenticator`, the state machine a connection runs on every
//! frame until its client is authenticated.
//!
//! Input: byte 0 picks a mechanism and a mode. Mode "tokens": a SaslHandshake v0 for that
//! mechanism, then the rest split at `\xfe\xfe` into up to four raw tokens (the legacy path, the
//! same evaluation SaslAuthenticate's bytes get), so the fuzzer works on the mechanisms' parsers
//! (PLAIN's, SCRAM's client-first and client-final, OAUTHBEARER's first message and its token).
//! Mode "frames": the rest split the same way into whole request frames. A panic is a finding.
#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::sasl_handshake_request::SaslHandshakeRequest;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};
use ketch::security::sasl::{listener_config, Authenticator, ListenerSasl, Step};
use ketch::security::scram::{Credential, Mechanism};
use ketch::security::scram_store::ScramStore;
use libfuzzer_sys::fuzz_target;

const MECHANISMS: [&str; 4] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

struct Fixture {
    config: Arc<ListenerSasl>,
    store: ScramStore,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let props = [
            ("sasl.enabled.mechanisms", MECHANISMS.join(",")),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";".into(),
            ),
            (
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorRequiredScope=\"kafka\";".into(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let config = Arc::new(listener_config(&props, "SASL_PLAINTEXT").expect("a valid SASL configuration"));
        let dir = std::env::temp_dir().join(format!("ketch-fuzz-sasl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let store = ScramStore::open(&dir).expect("an empty SCRAM store");
        for m in [Mechanism::from_name("SCRAM-SHA-256"), Mechanism::from_name("SCRAM-SHA-512")].into_iter().flatten() {
            let credential = Credential::from_password(m, "carol-secret", b"0123456789abcdef", 4096);
            store.add("carol", m, credential).expect("a credential");
        }
        Fixture { config, store }
    })
}

fn handshake(mechanism: &str) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::SaslHandshake as i16)
        .with_request_api_version(0)
        .with_correlation_id(1);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, ApiKey::SaslHandshake.request_header_version(0)).expect("encodes");
    let body = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.to_string()));
    body.encode(&mut buf, 0).expect("encodes");
    buf.freeze()
}

fn pieces(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while out.len() < 3 {
        match rest.windows(2).position(|w| w == [0xfe, 0xfe]) {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + 2..];
            }
            None => break,
        }
    }
    out.push(rest);
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let f = fixture();
    let mut auth = Authenticator::new(f.config.clone());
    let now = Instant::now();
    let frames_mode = selector & 0x80 != 0;
    if !frames_mode {
        let mechanism = MECHANISMS[(selector as usize) % MECHANISMS.len()];
        if !matches!(auth.on_frame(&handshake(mechanism), &f.store, now), Step::Reply { close: false, .. }) {
            panic!("the handshake for an enabled mechanism was refused");
        }
    }
    for piece in pieces(rest) {
        match auth.on_frame(&Bytes::copy_from_slice(piece), &f.store, now) {
            Step::Close(_) | Step::Reply { close: true, .. } => return,
            Step::Pass | Step::Reply { .. } => {}
        }
        let _ = auth.principal();
    }
});
