//! OAUTHBEARER: the client's first message, unsecured tokens and JWKS-signed tokens (ES256 and
//! ES384 keys made here with ring; RS256 is signed by Python's cryptography in
//! compat-tests/test_oauth.py, with the real clients).

use super::*;
use crate::security::jwks::JWKS_RECHECK;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING};
use std::time::Duration;

const NOW_MS: i64 = 1_800_000_000_000;

fn url64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unsecured_token(claims: &str) -> String {
    format!("{}.{}.", url64(br#"{"alg":"none"}"#), url64(claims.as_bytes()))
}

fn first(token: &str, extra: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {token}\u{1}{extra}\u{1}").into_bytes()
}

fn unsecured_config(options: &[(&str, &str)]) -> OAuthConfig {
    let jaas = options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    config(&Properties::default(), "SASL_PLAINTEXT", &jaas).unwrap()
}

#[test]
fn the_first_message_is_parsed_as_kafka_does() {
    let r = parse_initial_response(b"n,a=alice,\x01auth=Bearer abc.def.\x01traceId=42\x01\x01").unwrap();
    assert_eq!(r.authzid, "alice");
    assert_eq!(r.token, "abc.def.");
    assert_eq!(r.extensions.get("traceId").map(String::as_str), Some("42"));
    assert_eq!(parse_initial_response(b"n,,\x01auth=bearer  t0k3n==\x01\x01").unwrap().token, "t0k3n==");
    for bad in [
        &b"y,,\x01auth=Bearer x\x01\x01"[..],
        b"n,,\x01auth=Bearer x\x01",
        b"n,,\x01\x01",
        b"n,,\x01auth=Basic x\x01\x01",
        b"n,,\x01auth=Bearer x y\x01\x01",
        b"n,,\x01auth=Bearer x\x01bad-key=1\x01\x01",
        b"n,,\x01auth=Bearer x\x01\x01\x01",
        b"\x01",
        b"",
    ] {
        assert!(parse_initial_response(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn unsecured_tokens_are_checked_for_expiry_principal_and_scope() {
    let config = unsecured_config(&[("unsecuredValidatorRequiredScope", "produce")]);
    let exp = NOW_MS / 1000 + 60;
    let good =
        unsecured_token(&format!(r#"{{"sub":"alice","iat":{},"exp":{exp},"scope":["produce","x"]}}"#, exp - 120));
    let mut server = Server::default();
    let outcome = server.evaluate(&config, &first(&good, ""), NOW_MS).unwrap();
    assert_eq!(outcome, Outcome::Authenticated(Token { principal: "alice".into(), expires_ms: exp * 1000 }));

    // Refused tokens: a JSON challenge, then the client's ^A fails with it.
    let cases = [
        (format!(r#"{{"sub":"alice","exp":{}}}"#, NOW_MS / 1000 - 1), "invalid_token"),
        (r#"{"sub":"alice"}"#.to_string(), "invalid_token"),
        (format!(r#"{{"exp":{exp},"scope":"produce"}}"#), "invalid_token"),
        (format!(r#"{{"sub":"alice","exp":{exp},"iat":{}}}"#, exp + 10), "invalid_token"),
        (format!(r#"{{"sub":"alice","exp":{exp},"scope":"consume"}}"#), "insufficient_scope"),
    ];
    for (claims, status) in cases {
        let mut server = Server::default();
        let Outcome::Challenge(json) = server.evaluate(&config, &first(&unsecured_token(&claims), ""), NOW_MS).unwrap()
        else {
            panic!("{claims} accepted")
        };
        let json = String::from_utf8(json).unwrap();
        assert!(json.contains(status), "{claims}: {json}");
        match server.evaluate(&config, b"\x01", NOW_MS) {
            Err(Failure::Reported(m)) => assert_eq!(m, json),
            _ => panic!("the ^A after a challenge must fail"),
        }
    }
    // A signed token is not an unsecured one; a different authzid is refused.
    let signed = format!("{}.{}.c2ln", url64(br#"{"alg":"ES256"}"#), url64(b"{}"));
    assert!(matches!(Server::default().evaluate(&config, &first(&signed, ""), NOW_MS), Ok(Outcome::Challenge(_))));
    let with_authzid = format!("n,a=bob,\u{1}auth=Bearer {good}\u{1}\u{1}");
    assert!(matches!(
        Server::default().evaluate(&config, with_authzid.as_bytes(), NOW_MS),
        Err(Failure::Reported(m)) if m.contains("different from the token's principal name (alice)")
    ));
    // A principal claim of another name.
    let config = unsecured_config(&[("unsecuredValidatorPrincipalClaimName", "client_id")]);
    let token = unsecured_token(&format!(r#"{{"client_id":"svc-1","exp":{exp}}}"#));
    let outcome = Server::default().evaluate(&config, &first(&token, ""), NOW_MS).unwrap();
    assert!(matches!(outcome, Outcome::Authenticated(t) if t.principal == "svc-1"));
}

struct Signer {
    key: EcdsaKeyPair,
    alg: &'static str,
    kid: &'static str,
}

impl Signer {
    fn new(alg: &'static str, kid: &'static str) -> Signer {
        let rng = SystemRandom::new();
        let algorithm =
            if alg == "ES256" { &ECDSA_P256_SHA256_FIXED_SIGNING } else { &ECDSA_P384_SHA384_FIXED_SIGNING };
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(algorithm, &rng).unwrap();
        Signer { key: EcdsaKeyPair::from_pkcs8(algorithm, pkcs8.as_ref(), &rng).unwrap(), alg, kid }
    }

    fn jwk(&self) -> String {
        let point = self.key.public_key().as_ref();
        let size = (point.len() - 1) / 2;
        let crv = if self.alg == "ES256" { "P-256" } else { "P-384" };
        format!(
            r#"{{"kty":"EC","use":"sig","kid":"{}","crv":"{crv}","x":"{}","y":"{}"}}"#,
            self.kid,
            url64(&point[1..1 + size]),
            url64(&point[1 + size..])
        )
    }

    fn sign(&self, claims: &str) -> String {
        let header = format!(r#"{{"alg":"{}","typ":"JWT","kid":"{}"}}"#, self.alg, self.kid);
        let input = format!("{}.{}", url64(header.as_bytes()), url64(claims.as_bytes()));
        let signature = self.key.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
        format!("{input}.{}", url64(signature.as_ref()))
    }
}

fn jwks_config(dir: &std::path::Path, keys: &[&Signer], extra: &[(&str, &str)]) -> OAuthConfig {
    let path = dir.join("jwks.json");
    let body: Vec<String> = keys.iter().map(|s| s.jwk()).collect();
    std::fs::write(&path, format!(r#"{{"keys":[{}]}}"#, body.join(","))).unwrap();
    let mut props: Properties = [
        (
            "listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class".to_string(),
            JWKS_HANDLERS[0].to_string(),
        ),
        ("sasl.oauthbearer.jwks.endpoint.url".to_string(), format!("file://{}", path.display())),
    ]
    .into_iter()
    .collect();
    for (k, v) in extra {
        props.insert(k.to_string(), v.to_string());
    }
    config(&props, "SASL_SSL", &BTreeMap::new()).unwrap()
}

fn accepted(config: &OAuthConfig, token: &str) -> Option<String> {
    match Server::default().evaluate(config, &first(token, ""), NOW_MS) {
        Ok(Outcome::Authenticated(t)) => Some(t.principal),
        _ => None,
    }
}

#[test]
fn signed_tokens_are_verified_against_the_jwks_file() {
    let dir = std::env::temp_dir().join(format!("ketch-oauth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (p256, p384, stranger) = (Signer::new("ES256", "k1"), Signer::new("ES384", "k2"), Signer::new("ES256", "k1"));
    let config = jwks_config(
        &dir,
        &[&p256, &p384],
        &[("sasl.oauthbearer.expected.audience", "kafka,other"), ("sasl.oauthbearer.expected.issuer", "https://idp")],
    );
    let exp = NOW_MS / 1000 + 600;
    let iat = NOW_MS / 1000 - 10;
    let claims =
        |extra: &str| format!(r#"{{"sub":"svc","iss":"https://idp","aud":["kafka"],"iat":{iat},"exp":{exp}{extra}}}"#);
    assert_eq!(accepted(&config, &p256.sign(&claims(""))).as_deref(), Some("svc"));
    assert_eq!(accepted(&config, &p384.sign(&claims(""))).as_deref(), Some("svc"));
    // Another key with the same kid, a tampered payload, no signature, alg none: refused.
    assert_eq!(accepted(&config, &stranger.sign(&claims(""))), None);
    let good = p256.sign(&claims(""));
    let parts: Vec<&str> = good.split('.').collect();
    let tampered = format!("{}.{}.{}", parts[0], url64(claims(r#","admin":true"#).as_bytes()), parts[2]);
    assert_eq!(accepted(&config, &tampered), None);
    assert_eq!(accepted(&config, &format!("{}.{}.", parts[0], parts[1])), None);
    assert_eq!(accepted(&config, &unsecured_token(&claims(""))), None);
    // Claims: wrong issuer or audience, expired (past the 30 s skew), not yet valid, no iat, no sub.
    let cases = [
        format!(r#"{{"sub":"svc","iss":"https://evil","aud":"kafka","iat":{iat},"exp":{exp}}}"#),
        format!(r#"{{"sub":"svc","iss":"https://idp","aud":"web","iat":{iat},"exp":{exp}}}"#),
        format!(r#"{{"sub":"svc","iss":"https://idp","iat":{iat},"exp":{exp}}}"#),
        format!(r#"{{"sub":"svc","iss":"https://idp","aud":"kafka","iat":{iat},"exp":{}}}"#, NOW_MS / 1000 - 31),
        format!(r#"{{"sub":"svc","iss":"https://idp","aud":"kafka","iat":{iat},"exp":{exp},"nbf":{}}}"#, exp - 100),
        format!(r#"{{"sub":"svc","iss":"https://idp","aud":"kafka","exp":{exp}}}"#),
        format!(r#"{{"sub":" ","iss":"https://idp","aud":"kafka","iat":{iat},"exp":{exp}}}"#),
    ];
    for c in &cases {
        assert_eq!(accepted(&config, &p256.sign(c)), None, "{c}");
    }
    // Within the skew, an expired token still passes.
    let late = format!(r#"{{"sub":"svc","iss":"https://idp","aud":"kafka","iat":{iat},"exp":{}}}"#, NOW_MS / 1000 - 5);
    assert_eq!(accepted(&config, &p256.sign(&late)).as_deref(), Some("svc"));

    // Without an expected audience, a token naming one is refused (jose4j's rule), one naming none passes.
    let open = jwks_config(&dir, &[&p256], &[]);
    assert_eq!(accepted(&open, &p256.sign(&claims(""))), None);
    let no_aud = format!(r#"{{"sub":"svc","iat":{iat},"exp":{exp}}}"#);
    assert_eq!(accepted(&open, &p256.sign(&no_aud)).as_deref(), Some("svc"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_rewritten_jwks_file_is_read_again() {
    let dir = std::env::temp_dir().join(format!("ketch-oauth-rotate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (old, new) = (Signer::new("ES256", "old"), Signer::new("ES256", "new"));
    let config = jwks_config(&dir, &[&old], &[]);
    let claims = format!(r#"{{"sub":"svc","iat":{},"exp":{}}}"#, NOW_MS / 1000, NOW_MS / 1000 + 600);
    assert!(accepted(&config, &old.sign(&claims)).is_some());
    assert!(accepted(&config, &new.sign(&claims)).is_none());
    std::thread::sleep(JWKS_RECHECK + Duration::from_millis(50));
    // Rotation: the file now holds the new key only (a later mtime).
    let path = dir.join("jwks.json");
    std::fs::write(&path, format!(r#"{{"keys":[{}]}}"#, new.jwk())).unwrap();
    let later = SystemTime::now() + Duration::from_secs(2);
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(later).unwrap();
    assert!(accepted(&config, &new.sign(&claims)).is_some());
    assert!(accepted(&config, &old.sign(&claims)).is_none());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn misconfigurations_are_refused_by_name() {
    let props =
        |pairs: &[(&str, &str)]| -> Properties { pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
    let handler = "sasl.server.callback.handler.class";
    let err = config(&props(&[(handler, JWKS_HANDLERS[0])]), "X", &BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("sasl.oauthbearer.jwks.endpoint.url is required"), "{err}");
    let err = config(
        &props(&[(handler, JWKS_HANDLERS[1]), ("sasl.oauthbearer.jwks.endpoint.url", "ftp://idp/jwks")]),
        "X",
        &BTreeMap::new(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("file:, http: or https: URL"), "{err}");
    // An endpoint that does not answer fails the start, as Kafka's init().
    let url = ("sasl.oauthbearer.jwks.endpoint.url", "https://127.0.0.1:1/jwks");
    let err = config(&props(&[(handler, JWKS_HANDLERS[0]), url]), "X", &BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("https://127.0.0.1:1/jwks"), "{err}");
    let err = config(&props(&[(handler, "com.example.Mine")]), "X", &BTreeMap::new()).unwrap_err().to_string();
    assert!(err.contains("com.example.Mine"), "{err}");
    let skew = [("unsecuredValidatorAllowableClockSkewMs".to_string(), "-1".to_string())].into_iter().collect();
    assert!(config(&Properties::default(), "X", &skew).is_err());
}

#[test]
fn only_the_unsecured_validator_accepts_unsecured_tokens() {
    // Kafka's default (no callback handler configured) and the unsecured handler named
    // explicitly take unsigned tokens: the listener warns at start.
    assert!(unsecured_config(&[]).accepts_unsecured_tokens());
    let named: Properties =
        [("listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class", UNSECURED_HANDLER)]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    assert!(config(&named, "SASL_PLAINTEXT", &BTreeMap::new()).unwrap().accepts_unsecured_tokens());
    // A listener checking signatures against a JWKS does not.
    let dir = tempfile::tempdir().unwrap();
    let signed = jwks_config(dir.path(), &[&Signer::new("ES256", "k1")], &[]);
    assert!(!signed.accepts_unsecured_tokens());
    assert!(accepted(&signed, &unsecured_token(r#"{"sub":"mallory","exp":2000000000}"#)).is_none());
}
