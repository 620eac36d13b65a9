//! SSL listeners: a PLAINTEXT and an SSL listener on one broker, certificates made with rcgen,
//! clients over tokio-rustls. Each listener advertises its own address; produce and a large
//! fetch (stored batches written through TLS) work over SSL; a plaintext client on the SSL port
//! and a client that does not trust the broker's certificate are refused without harm; a client
//! certificate the CA signed but whose subject cannot be read names no principal: the connection
//! is closed (and logged), never taken as `User:ANONYMOUS`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader, ResponseKind, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SigningKey};
use rustls::pki_types::{PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

struct Pki {
    ca: rcgen::Certificate,
    server: (rcgen::Certificate, KeyPair),
    client: (rcgen::Certificate, KeyPair),
}

fn make_pki() -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "ketch test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        (params.signed_by(&key, &issuer).unwrap(), key)
    };
    Pki { ca: ca_cert, server: leaf("broker"), client: leaf("client-1") }
}

/// Starts ketch with the given overrides; returns it with the port of each listening line.
fn start(dir: &Path, overrides: &[String]) -> (common::TestBroker, Vec<u16>) {
    let (broker, ports, _log) = start_logged(dir, overrides);
    (broker, ports)
}

/// As [`start`], with the broker's log lines (stderr) as they come.
fn start_logged(dir: &Path, overrides: &[String]) -> (common::TestBroker, Vec<u16>, mpsc::Receiver<String>) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ketch"));
    cmd.arg("--override").arg(format!("log.dirs={}", dir.join("data").display()));
    for o in overrides {
        cmd.arg("--override").arg(o);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (log_tx, log) = mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = log_tx.send(line);
        }
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ports = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert!(line.starts_with("ketch listening on "), "{line:?}");
        ports.push(line.trim().rsplit(':').next().unwrap().parse().unwrap());
    }
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (common::TestBroker { child, port: ports[0], dir: tempfile::tempdir().unwrap() }, ports, log)
}

fn client_config(
    trusted: &rcgen::Certificate,
    identity: Option<&(rcgen::Certificate, KeyPair)>,
) -> rustls::ClientConfig {
    client_config_der(trusted, identity.map(|(cert, key)| (cert.der().to_vec(), key)))
}

/// As [`client_config`], the client certificate given as DER.
fn client_config_der(trusted: &rcgen::Certificate, identity: Option<(Vec<u8>, &KeyPair)>) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(vec![cert.into()], PrivateKeyDer::try_from(key.serialize_der()).unwrap())
            .unwrap(),
        None => builder.with_no_client_auth(),
    }
}

async fn tls_connect(
    port: u16,
    config: rustls::ClientConfig,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await?;
    // TLS 1.3 reports a refused client certificate only with the first read: make it show here.
    call(&mut tls, ApiKey::ApiVersions, 3, RequestKind::ApiVersions(Default::default()))
        .await
        .ok_or_else(|| std::io::Error::other("closed after the handshake"))?;
    Ok(tls)
}

async fn call<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: ApiKey,
    version: i16,
    body: RequestKind,
) -> Option<ResponseKind> {
    s.write_all(&common::frame(key, version, 7, &body)).await.ok()?;
    let len = s.read_i32().await.ok()?;
    let mut buf = vec![0u8; len as usize];
    s.read_exact(&mut buf).await.ok()?;
    let mut buf = Bytes::from(buf);
    let header_version = if key == ApiKey::ApiVersions { 0 } else { key.response_header_version(version) };
    assert_eq!(ResponseHeader::decode(&mut buf, header_version).unwrap().correlation_id, 7);
    Some(ResponseKind::decode(key, &mut buf, version).unwrap())
}

async fn advertised<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> (String, i32) {
    match call(s, ApiKey::Metadata, 12, RequestKind::Metadata(MetadataRequest::default())).await {
        Some(ResponseKind::Metadata(m)) => (m.brokers[0].host.to_string(), m.brokers[0].port),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_and_plaintext_listeners_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki();
    // The keystore: key and chain in one PEM file; the truststore: the CA.
    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, format!("{}{}", pki.server.1.serialize_pem(), pki.server.0.pem())).unwrap();
    let truststore = dir.path().join("ca.pem");
    std::fs::write(&truststore, pki.ca.pem()).unwrap();
    let (mut broker, ports) = start(
        dir.path(),
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0".into(),
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SECURE:SSL".into(),
            "advertised.listeners=PLAINTEXT://plain.example:1111,SECURE://secure.example:2222".into(),
            "ssl.keystore.type=PEM".into(),
            format!("listener.name.secure.ssl.keystore.location={}", keystore.display()),
            "ssl.truststore.type=PEM".into(),
            format!("ssl.truststore.location={}", truststore.display()),
            "ssl.client.auth=requested".into(),
        ],
    );
    let (plain_port, ssl_port) = (ports[0], ports[1]);

    // Each listener advertises its own address.
    let mut plain = TcpStream::connect(("127.0.0.1", plain_port)).await.unwrap();
    assert_eq!(advertised(&mut plain).await, ("plain.example".into(), 1111));
    let mut tls = tls_connect(ssl_port, client_config(&pki.ca, Some(&pki.client))).await.unwrap();
    assert_eq!(advertised(&mut tls).await, ("secure.example".into(), 2222));

    // Produce ~3 MB over TLS, then fetch it back in one response (stored batches through TLS).
    let value = "v".repeat(100 * 1024);
    let create = MetadataRequest::default()
        .with_allow_auto_topic_creation(true)
        .with_topics(Some(vec![kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("t"))))]));
    assert!(call(&mut tls, ApiKey::Metadata, 12, RequestKind::Metadata(create)).await.is_some());
    for _ in 0..30 {
        let request = kafka_protocol::messages::ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![kafka_protocol::messages::produce_request::TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partition_data(vec![kafka_protocol::messages::produce_request::PartitionProduceData::default(
                )
                .with_index(0)
                .with_records(Some(common::batch(&value)))])]);
        match call(&mut tls, ApiKey::Produce, 9, RequestKind::Produce(request)).await {
            Some(ResponseKind::Produce(r)) => assert_eq!(r.responses[0].partition_responses[0].error_code, 0),
            other => panic!("{other:?}"),
        }
    }
    let fetch =
        FetchRequest::default().with_max_wait_ms(100).with_max_bytes(50 << 20).with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(50 << 20)])]);
    let records = match call(&mut tls, ApiKey::Fetch, 12, RequestKind::Fetch(fetch)).await {
        Some(ResponseKind::Fetch(r)) => r.responses[0].partitions[0].records.clone().unwrap(),
        other => panic!("{other:?}"),
    };
    let mut buf = records;
    let mut count = 0;
    while buf.has_remaining() {
        for set in RecordBatchDecoder::decode_all(&mut buf).unwrap() {
            for record in set.records {
                assert_eq!(record.value.unwrap().len(), value.len());
                count += 1;
            }
        }
    }
    assert_eq!(count, 30);

    // A plaintext client on the SSL port: closed, nothing else happens.
    let mut wrong = std::net::TcpStream::connect(("127.0.0.1", ssl_port)).unwrap();
    wrong.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    let request = common::frame(ApiKey::ApiVersions, 3, 1, &RequestKind::ApiVersions(Default::default()));
    assert!(common::exchange_raw(&mut wrong, &request).is_none(), "no Kafka answer over a TLS port");
    // A client that does not trust the broker's CA fails its handshake, and so does a
    // certificate from another CA.
    let other = make_pki();
    assert!(tls_connect(ssl_port, client_config(&other.ca, None)).await.is_err());
    assert!(tls_connect(ssl_port, client_config(&pki.ca, Some(&other.client))).await.is_err());
    // Without a client certificate (requested, not required) and on the plaintext port: fine.
    let mut anonymous = tls_connect(ssl_port, client_config(&pki.ca, None)).await.unwrap();
    assert_eq!(advertised(&mut anonymous).await.1, 2222);
    assert_eq!(advertised(&mut plain).await.1, 1111);
    assert!(broker.alive());
}

#[test]
fn bad_tls_configuration_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_ketch"))
        .args(["--override", "listeners=SSL://127.0.0.1:0"])
        .arg("--override")
        .arg(format!("log.dirs={}", dir.path().display()))
        .args(["--override", "ssl.keystore.type=PKCS12", "--override", "ssl.keystore.location=/nonexistent"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success());
}

/// The (header length, total length) of the DER element `der` starts with.
fn der_element(der: &[u8]) -> (usize, usize) {
    match der[1] {
        short if short < 0x80 => (2, 2 + short as usize),
        long => {
            let n = (long & 0x7f) as usize;
            let len = der[2..2 + n].iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
            (2 + n, 2 + n + len)
        }
    }
}

fn der_encode(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    if content.len() < 0x80 {
        out.push(content.len() as u8);
    } else {
        let len: Vec<u8> = content.len().to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        out.push(0x80 | len.len() as u8);
        out.extend(len);
    }
    out.extend_from_slice(content);
    out
}

/// The fields of `cert`'s (DER) TBSCertificate: version [0], serial, signature, issuer,
/// validity, subject, subjectPublicKeyInfo, extensions; and its signatureAlgorithm.
fn tbs_fields(cert: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let body = &cert[der_element(cert).0..];
    let (tbs_header, tbs_len) = der_element(body);
    let (tbs, rest) = (&body[tbs_header..tbs_len], &body[tbs_len..]);
    let mut fields = Vec::new();
    let mut at = 0;
    while at < tbs.len() {
        let len = der_element(&tbs[at..]).1;
        fields.push(&tbs[at..at + len]);
        at += len;
    }
    assert_eq!(fields[0][0], 0xa0, "a v3 certificate");
    (fields, &rest[..der_element(rest).1])
}

/// `cert` (DER) with its subject replaced by `subject` (a whole DER element), signed again by
/// `issuer_key` (the signature algorithm stays the one `cert` names).
fn with_subject(cert: &[u8], subject: &[u8], issuer_key: &KeyPair) -> Vec<u8> {
    let (mut fields, signature_algorithm) = tbs_fields(cert);
    fields[5] = subject;
    let tbs = der_encode(0x30, &fields.concat());
    let mut signature = vec![0u8]; // no unused bits
    signature.extend(issuer_key.sign(&tbs).unwrap());
    der_encode(0x30, &[tbs, signature_algorithm.to_vec(), der_encode(0x03, &signature)].concat())
}

/// A client certificate the broker's CA signed, whose subject holds an attribute without a value
/// (`SEQUENCE { SET { SEQUENCE { OID 2.5.4.3 } } }`): the TLS handshake verifies its chain (the
/// subject is not part of that), but no principal can be named from it. The broker closes the
/// connection and logs why, as Kafka closes a connection whose principal cannot be built; it
/// does not serve the client as `User:ANONYMOUS` (what a client that sent no certificate is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_certificate_whose_subject_cannot_be_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let signer = KeyPair::try_from(ca_key.serialize_der().as_slice()).unwrap();
    let mut ca = CertificateParams::new(Vec::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "ketch test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["localhost".into()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        (params.signed_by(&key, &issuer).unwrap(), key)
    };
    let (server, client) = (leaf("broker"), leaf("client-1"));
    const NO_VALUE: &[u8] = &[0x30, 0x09, 0x31, 0x07, 0x30, 0x05, 0x06, 0x03, 0x55, 0x04, 0x03];
    let unreadable = with_subject(client.0.der(), NO_VALUE, &signer);
    // The same certificate signed again with its own subject: the control that the re-signing
    // is sound, so that only the subject differs.
    let resigned = with_subject(client.0.der(), tbs_fields(client.0.der()).0[5], &signer);

    let keystore = dir.path().join("broker.pem");
    std::fs::write(&keystore, format!("{}{}", server.1.serialize_pem(), server.0.pem())).unwrap();
    let truststore = dir.path().join("ca.pem");
    std::fs::write(&truststore, ca_cert.pem()).unwrap();
    let (mut broker, ports, log) = start_logged(
        dir.path(),
        &[
            "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0".into(),
            "ssl.keystore.type=PEM".into(),
            format!("ssl.keystore.location={}", keystore.display()),
            "ssl.truststore.type=PEM".into(),
            format!("ssl.truststore.location={}", truststore.display()),
            "ssl.client.auth=requested".into(),
        ],
    );
    let ssl_port = ports[1];

    let refused = tls_connect(ssl_port, client_config_der(&ca_cert, Some((unreadable, &client.1)))).await;
    assert!(refused.is_err(), "a certificate whose subject cannot be read was served (as User:ANONYMOUS)");
    let deadline = Instant::now() + Duration::from_secs(10);
    let logged = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match log.recv_timeout(left) {
            Ok(line) if line.contains("WARN") && line.contains("subject cannot be parsed") => break line,
            Ok(_) => continue,
            Err(e) => panic!("no WARN line naming the unreadable subject: {e}"),
        }
    };
    assert!(logged.contains("closing"), "{logged}");

    // The re-signed certificate with a readable subject, and no certificate at all, are served.
    assert!(tls_connect(ssl_port, client_config_der(&ca_cert, Some((resigned, &client.1)))).await.is_ok());
    assert!(tls_connect(ssl_port, client_config_der(&ca_cert, None)).await.is_ok());
    assert!(broker.alive());
}
