//! Every type that holds a secret, formatted with `{:?}` (and `{:#?}`): the secret does not
//! show, `[hidden]` does. A secret is looked for as a derived `Debug` would print it (a string
//! as itself, bytes as `[1, 2, ...]`).

use std::collections::BTreeMap;

use super::*;
use crate::config::{BrokerConfig, Properties};
use crate::controller::config_changes::{Change, ConfigContext, Op};
use crate::controller::quorum::ControllerSettings;
use crate::metadata::image::{MetadataImage, ScramCredentialImage};
use crate::metadata::records::{ConfigRecord, MetadataRecord, UserScramCredentialRecord};
use crate::security::client::{ClientSecurity, Login};
use crate::security::scram::{Credential, Mechanism, TokenLogin};
use crate::security::tokens::TokenSettings;
use crate::security::{jaas, oauth, sasl};

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Bytes as a derived `Debug` prints them.
fn bytes(b: &[u8]) -> String {
    format!("{b:?}")
}

const SALT: &[u8] = b"salt-of-the-earth-0123";
const PLAIN_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw-7f3a" user_alice="alice-pw-91c2";"#;

/// (what, its `Debug`, its `{:#?}`, the secrets it holds).
type Case = (&'static str, String, String, Vec<String>);

fn case<T: std::fmt::Debug>(what: &'static str, value: &T, secrets: &[&str]) -> Case {
    (what, format!("{value:?}"), format!("{value:#?}"), secrets.iter().map(|s| s.to_string()).collect())
}

fn cases() -> Vec<Case> {
    let credential = Credential::from_password(Mechanism::Sha256, "scram-pw-5d1e", SALT, 4096);
    let credential_secrets = [bytes(SALT), bytes(&credential.stored_key), bytes(&credential.server_key)];
    let credential_secrets: Vec<&str> = credential_secrets.iter().map(String::as_str).collect();
    let token_login = TokenLogin { credential: credential.clone(), owner_name: "User:alice".into(), expiry_ms: 1 };
    let image_credential = ScramCredentialImage {
        salt: credential.salt.clone(),
        stored_key: credential.stored_key.clone(),
        server_key: credential.server_key.clone(),
        iterations: 4096,
    };
    let scram_record = UserScramCredentialRecord {
        name: "alice".into(),
        mechanism: 1,
        salt: credential.salt.clone(),
        stored_key: credential.stored_key.clone(),
        server_key: credential.server_key.clone(),
        iterations: 4096,
        ..Default::default()
    };
    let config_record = ConfigRecord {
        resource_type: 4,
        name: "listener.name.sasl_ssl.plain.sasl.jaas.config".into(),
        value: Some(PLAIN_JAAS.into()),
        ..Default::default()
    };
    let unknown_record = ConfigRecord {
        resource_type: 4,
        name: "my.plugin.secret".into(),
        value: Some("plugin-pw-2b8d".into()),
        ..Default::default()
    };

    let tokens = TokenSettings::from_properties(&props(&[("delegation.token.secret.key", "token-key-4e6f")]));
    let broker_props = props(&[
        ("ssl.keystore.password", "keystore-pw-0a9b"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN_JAAS),
        ("sasl.oauthbearer.client.credentials.client.secret", "oauth-client-secret-c0de"),
        ("delegation.token.secret.key", "token-key-4e6f"),
        ("my.plugin.secret", "plugin-pw-2b8d"),
        ("num.partitions", "7"),
    ]);
    let broker_secrets = [
        "keystore-pw-0a9b",
        "admin-pw-7f3a",
        "alice-pw-91c2",
        "oauth-client-secret-c0de",
        "token-key-4e6f",
        "plugin-pw-2b8d",
    ];
    let broker_config = BrokerConfig::from_properties(broker_props.clone()).unwrap();
    let controller = ControllerSettings::from_config(&broker_config, 1, 9000, "cluster");
    let context = ConfigContext {
        topic_defaults: &broker_config.topic_defaults,
        controller_id: 1,
        group_settings: &broker_props,
    };
    let op = Op { name: "listener.name.ssl.ssl.key.password".into(), op: 0, value: Some("key-pw-6c4d".into()) };
    let replace = Change::Replace(vec![("ssl.truststore.password".into(), Some("trust-pw-3e2f".into()))]);

    let mut image = MetadataImage::default();
    image.configs.insert((4, String::new()), [("ssl.key.password".to_string(), "key-pw-6c4d".to_string())].into());
    image.scram.insert(("alice".into(), 1), image_credential.clone());

    let listener = sasl::listener_config(
        &props(&[
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN_JAAS),
        ]),
        "SASL_PLAINTEXT",
    )
    .unwrap();
    let login_module = jaas::parse_single(PLAIN_JAAS).unwrap();
    let initial = oauth::parse_initial_response(
        b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.\x01ext=ext-value-8a7b\x01\x01",
    )
    .unwrap();
    let login = Login::Scram { mechanism: Mechanism::Sha512, user: "broker".into(), password: "login-pw-1d2c".into() };
    let client = ClientSecurity::for_listener(
        &props(&[
            ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN_JAAS),
        ]),
        "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol",
    )
    .unwrap();

    #[cfg_attr(not(feature = "testcontainers"), allow(unused_mut))] // one more case with it
    let mut all = vec![
        case("scram::Credential", &credential, &credential_secrets),
        case("TokenLogin", &token_login, &credential_secrets),
        case("ScramCredentialImage", &image_credential, &credential_secrets),
        case("UserScramCredentialRecord", &scram_record, &credential_secrets),
        case(
            "MetadataRecord::UserScramCredential",
            &MetadataRecord::UserScramCredential(scram_record.clone()),
            &credential_secrets,
        ),
        case("ConfigRecord (a password)", &config_record, &["admin-pw-7f3a", "alice-pw-91c2"]),
        case("ConfigRecord (an unknown name)", &unknown_record, &["plugin-pw-2b8d"]),
        case("MetadataRecord::Config", &MetadataRecord::Config(config_record.clone()), &["admin-pw-7f3a"]),
        case("TokenSettings", &tokens, &["token-key-4e6f"]),
        case("BrokerConfig", &broker_config, &broker_secrets),
        case("ControllerSettings", &controller, &broker_secrets),
        case("ConfigContext", &context, &broker_secrets),
        case("config_changes::Op", &op, &["key-pw-6c4d"]),
        case("config_changes::Change::Incremental", &Change::Incremental(vec![op.clone()]), &["key-pw-6c4d"]),
        case("config_changes::Change::Replace", &replace, &["trust-pw-3e2f"]),
        case("MetadataImage", &image, &[&["key-pw-6c4d"][..], &credential_secrets].concat()),
        case("ListenerSasl", &listener, &["admin-pw-7f3a", "alice-pw-91c2"]),
        case("jaas::LoginModule", &login_module, &["admin-pw-7f3a", "alice-pw-91c2"]),
        case("oauth::InitialResponse", &initial, &["eyJhbGciOiJub25lIn0", "ext-value-8a7b"]),
        case("client::Login", &login, &["login-pw-1d2c"]),
        case("ClientSecurity", &client, &["admin-pw-7f3a"]),
    ];
    #[cfg(feature = "testcontainers")]
    all.push(case(
        "testcontainers::Ketch",
        &crate::testcontainers::Ketch::default().with_config("ssl.key.password", "container-pw-5f5f"),
        &["container-pw-5f5f"],
    ));
    all
}

#[test]
fn no_secret_shows_in_debug() {
    let mut leaks = Vec::new();
    for (what, debug, pretty, secrets) in cases() {
        for secret in &secrets {
            if debug.contains(secret.as_str()) || pretty.contains(secret.as_str()) {
                leaks.push(format!("{what} shows {secret}"));
            }
        }
        // Client logins print who, not a placeholder; everything else marks what it hid.
        if !what.starts_with("client::") && what != "ClientSecurity" && !debug.contains(HIDDEN) {
            leaks.push(format!("{what} shows no {HIDDEN}: {debug}"));
        }
    }
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

#[test]
fn what_is_not_secret_still_shows() {
    let config = BrokerConfig::from_properties(props(&[("num.partitions", "7"), ("ssl.key.password", "x")])).unwrap();
    assert!(format!("{config:?}").contains(r#""num.partitions": "7""#));
    let record = ConfigRecord {
        resource_type: 2,
        name: "retention.ms".into(),
        value: Some("86400000".into()),
        ..Default::default()
    };
    assert!(format!("{record:?}").contains("86400000"));
    let module = jaas::parse_single(PLAIN_JAAS).unwrap();
    let shown = format!("{module:?}");
    assert!(shown.contains("PlainLoginModule") && shown.contains("user_alice"), "{shown}");
}

#[test]
fn which_config_values_are_shown() {
    for (name, shown) in [
        ("num.partitions", true),
        ("listener.name.ssl.ssl.keystore.location", true),
        ("retention.ms", true), // a topic config
        ("ssl.keystore.password", false),
        ("listener.name.ssl.ssl.keystore.password", false),
        ("sasl.jaas.config", false),
        ("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", false),
        ("delegation.token.secret.key", false),
        ("sasl.oauthbearer.client.credentials.client.secret", false),
        ("not.a.known.config", false),
    ] {
        assert_eq!(config_value(name, "v") == "v", shown, "{name}");
    }
    let mut set = BTreeMap::new();
    set.insert("ssl.key.password".to_string(), "p".to_string());
    set.insert("num.io.threads".to_string(), "8".to_string());
    assert_eq!(format!("{:?}", Configs(&set)), r#"{"num.io.threads": "8", "ssl.key.password": "[hidden]"}"#);
    assert_eq!(format!("{:?}", ConfigValue("ssl.key.password", None)), "None");
}
