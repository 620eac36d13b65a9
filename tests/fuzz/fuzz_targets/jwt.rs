//! OAUTHBEARER with signed tokens: the JWKS document parser every JWKS source (file, http(s))
//! uses, and a listener's validator (`OAuthBearerValidatorCallbackHandler`, a JWKS file with one
//! ES256 key) evaluating client messages that carry a token made of fuzzed parts.
//!
//! Input: byte 0 even: the rest is a JWKS document (`ketch::security::oauth::jwks_key_count`).
//! Byte 0 odd: the rest split at `\xfe` into a JOSE header, a claims set and a signature, each
//! base64url-encoded into `header.claims.signature` and sent as a client's first message
//! (`n,,^Aauth=Bearer <token>^A^A`), then a `^A` (the client's answer to a challenge). A panic is a
//! finding.
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use ketch::security::oauth::{config, jwks_key_count, now_ms, OAuthConfig, Server};
use libfuzzer_sys::fuzz_target;

/// The P-256 base point as a public key (private key 1): a valid key no token here can match.
const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","alg":"ES256","use":"sig",
"x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}]}"#;

fn fixture() -> &'static OAuthConfig {
    static CONFIG: OnceLock<OAuthConfig> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ketch-fuzz-jwt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join("jwks.json");
        std::fs::write(&path, JWKS).expect("the JWKS file");
        let props = [
            (
                "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler".to_string(),
            ),
            ("sasl.oauthbearer.jwks.endpoint.url", format!("file://{}", path.display())),
            ("sasl.oauthbearer.expected.audience", "kafka".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        config(&props, "SASL_SSL", &BTreeMap::new()).expect("a valid OAUTHBEARER configuration")
    })
}

fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 0 {
        let _ = jwks_key_count(rest);
        return;
    }
    let mut parts = rest.split(|b| *b == 0xfe);
    let (header, claims, signature) =
        (parts.next().unwrap_or_default(), parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let token = format!("{}.{}.{}", b64url(header), b64url(claims), b64url(signature));
    let message = format!("n,,\x01auth=Bearer {token}\x01\x01");
    let mut server = Server::default();
    let _ = server.evaluate(fixture(), message.as_bytes(), now_ms());
    let _ = server.evaluate(fixture(), &[1], now_ms());
});
