//! This node's own client connections (`node::client::Connection`, as the replica fetchers,
//! the controller channel and the transaction coordinator use them) against the real binary's
//! SSL and SASL listeners: TLS with a truststore and host name verification, PLAIN, SCRAM and
//! unsecured OAUTHBEARER logins, wrong passwords refused at connect, and re-authentication
//! before `connections.max.reauth.ms` runs out (without it the broker closes the session).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::TestBroker;
use kafka_protocol::messages::MetadataRequest;
use ketch::config::Properties;
use ketch::node::client::Connection;
use ketch::security::client::ClientSecurity;

/// A CA, and a broker certificate it signed for localhost (only): (CA PEM, key + chain PEM).
fn pki() -> (String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "test-ca");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), format!("{}{}", key.serialize_pem(), cert.pem()))
}

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
    username=\"broker\" password=\"broker-secret\" user_broker=\"broker-secret\";";

/// A broker formatted with SCRAM-SHA-512 user `alice`, serving one SASL_SSL listener with PLAIN,
/// SCRAM-SHA-512 and OAUTHBEARER enabled; returns it with the CA's PEM file.
fn sasl_ssl_broker(extra: &[&str]) -> (TestBroker, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ketch"))
        .args(["format", "-t", "J8m2cQ0sTn6cJ1Q8M8bnVw", "--override", &format!("log.dirs={}", dir.path().display())])
        .args(["--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret]"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (ca, keystore) = pki();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, ca).unwrap();
    let keystore_path = dir.path().join("broker.pem");
    std::fs::write(&keystore_path, keystore).unwrap();
    let mut overrides = vec![
        "listeners=SASL_SSL://127.0.0.1:0".to_string(),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512,OAUTHBEARER".to_string(),
        format!("listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}"),
        format!("ssl.keystore.location={}", keystore_path.display()),
        "ssl.keystore.type=PEM".to_string(),
    ];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    (TestBroker::start_in(dir, &overrides), ca_path)
}

/// The client side's properties: this node's view of the listener, as a broker's would be.
fn client_props(ca: &std::path::Path, mechanism: &str, jaas: &str, extra: &[(&str, &str)]) -> Properties {
    let mut props = Properties::new();
    props.insert("listener.security.protocol.map".into(), "SASL_SSL:SASL_SSL".into());
    props.insert("ssl.truststore.location".into(), ca.display().to_string());
    props.insert("ssl.truststore.type".into(), "PEM".into());
    props.insert("sasl.mechanism.inter.broker.protocol".into(), mechanism.into());
    props.insert(format!("listener.name.sasl_ssl.{}.sasl.jaas.config", mechanism.to_lowercase()), jaas.into());
    for (k, v) in extra {
        props.insert(k.to_string(), v.to_string());
    }
    props
}

async fn connect(host: &str, port: u16, security: &Arc<ClientSecurity>) -> anyhow::Result<Connection> {
    Connection::connect(&format!("{host}:{port}"), "node-client-test", Duration::from_secs(10), security).await
}

async fn metadata_ok(conn: &mut Connection) {
    let response = conn.send(12, &MetadataRequest::default(), Duration::ZERO).await.unwrap();
    assert_eq!(response.brokers.len(), 1);
}

fn security(props: &Properties) -> Arc<ClientSecurity> {
    ClientSecurity::for_listener(props, "SASL_SSL", "sasl.mechanism.inter.broker.protocol").unwrap()
}

#[tokio::test]
async fn logins_over_tls_and_refusals() {
    let (broker, ca) = sasl_ssl_broker(&[]);
    let scram = |password: &str| {
        format!("org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"{password}\";")
    };
    let oauth = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"broker\";";
    for (mechanism, jaas) in
        [("PLAIN", PLAIN_JAAS.to_string()), ("SCRAM-SHA-512", scram("alice-secret")), ("OAUTHBEARER", oauth.into())]
    {
        let sec = security(&client_props(&ca, mechanism, &jaas, &[]));
        let mut conn = connect("localhost", broker.port, &sec).await.unwrap_or_else(|e| panic!("{mechanism}: {e:#}"));
        metadata_ok(&mut conn).await;
    }
    // A wrong password, an unknown user: refused at connect with Kafka's error.
    let wrong = [
        ("SCRAM-SHA-512", scram("wrong")),
        ("PLAIN", PLAIN_JAAS.replace("password=\"broker-secret\"", "password=\"nope\"")),
    ];
    for (mechanism, jaas) in wrong {
        let sec = security(&client_props(&ca, mechanism, &jaas, &[]));
        let err = connect("localhost", broker.port, &sec).await.expect_err("refused");
        assert!(format!("{err:#}").contains("SASL authentication failed (error 58)"), "{mechanism}: {err:#}");
    }
    // A mechanism the listener does not enable.
    let sec = security(&client_props(&ca, "SCRAM-SHA-256", &scram("alice-secret"), &[]));
    let err = connect("localhost", broker.port, &sec).await.expect_err("refused");
    assert!(format!("{err:#}").contains("SCRAM-SHA-256 refused (error 33"), "{err:#}");
    // The certificate names localhost, not 127.0.0.1: refused unless host names are not
    // checked (ssl.endpoint.identification.algorithm empty).
    let sec = security(&client_props(&ca, "PLAIN", PLAIN_JAAS, &[]));
    let err = connect("127.0.0.1", broker.port, &sec).await.expect_err("refused");
    assert!(format!("{err:#}").contains("TLS handshake"), "{err:#}");
    let unchecked = client_props(&ca, "PLAIN", PLAIN_JAAS, &[("ssl.endpoint.identification.algorithm", "")]);
    let mut conn = connect("127.0.0.1", broker.port, &security(&unchecked)).await.unwrap();
    metadata_ok(&mut conn).await;
    // A truststore without the broker's CA: refused whatever the name.
    let (other_ca, _) = pki();
    let other = broker.dir.path().join("other-ca.pem");
    std::fs::write(&other, other_ca).unwrap();
    let untrusted = client_props(&other, "PLAIN", PLAIN_JAAS, &[("ssl.endpoint.identification.algorithm", "")]);
    let err = connect("localhost", broker.port, &security(&untrusted)).await.expect_err("refused");
    assert!(format!("{err:#}").contains("TLS handshake"), "{err:#}");
}

#[tokio::test]
async fn a_session_is_renewed_before_connections_max_reauth_ms() {
    let (broker, ca) = sasl_ssl_broker(&["connections.max.reauth.ms=1500"]);
    let scram = "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"alice-secret\";";
    let sec = security(&client_props(&ca, "SCRAM-SHA-512", scram, &[]));
    let mut conn = connect("localhost", broker.port, &sec).await.unwrap();
    // Past the session's lifetime three times over: each request after 85% of it logs in again
    // first (the broker would close a connection whose session expired).
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(1_400)).await;
        metadata_ok(&mut conn).await;
    }
}

#[test]
fn configuration_refusals_name_the_property() {
    let base = |mechanism: Option<&str>, jaas: Option<&str>| {
        let mut props = Properties::new();
        props.insert("listener.security.protocol.map".into(), "INTERNAL:SASL_PLAINTEXT".into());
        if let Some(m) = mechanism {
            props.insert("sasl.mechanism.controller.protocol".into(), m.into());
        }
        if let Some(j) = jaas {
            props.insert("sasl.jaas.config".into(), j.into());
        }
        ClientSecurity::for_listener(&props, "INTERNAL", "sasl.mechanism.controller.protocol")
            .map(|s| format!("{s:?}"))
            .map_err(|e| format!("{e:#}"))
    };
    // Kafka's default mechanism, GSSAPI: not served.
    let err = base(None, Some(PLAIN_JAAS)).unwrap_err();
    assert!(err.contains("sasl.mechanism.controller.protocol=GSSAPI"), "{err}");
    let err = base(Some("PLAIN"), None).unwrap_err();
    assert!(err.contains("listener.name.internal.plain.sasl.jaas.config"), "{err}");
    let err =
        base(Some("PLAIN"), Some("org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";"))
            .unwrap_err();
    assert!(err.contains("no username and password"), "{err}");
    // The broker-wide JAAS line serves; the password never shows.
    let ok = base(Some("PLAIN"), Some(PLAIN_JAAS)).unwrap();
    assert!(ok.contains("PLAIN as broker") && !ok.contains("broker-secret"), "{ok}");
}
