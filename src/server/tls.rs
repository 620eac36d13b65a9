//! TLS for SSL listeners: rustls with the ring provider.
//!
//! Owns: building each SSL listener's server configuration from Kafka's `ssl.*` properties, a
//! listener's own `listener.name.<name lowercase>.ssl.*` taking precedence over the broker-wide
//! value, as Kafka does: the key store and trust store (`security/stores.rs`),
//! `ssl.client.auth` (none / requested / required),
//! `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) and `ssl.cipher.suites` (IANA names); and the
//! principal of a client: `User:` + its certificate's subject as RFC 2253 (what Java's
//! `X500Principal.getName()` gives, Kafka's default `ssl.principal.mapping.rules`), or
//! `User:ANONYMOUS` without a certificate. A verified certificate whose subject cannot be parsed,
//! or that no mapping rule names, gives no principal: the connection is closed (logged at WARN
//! with the reason), never served as `User:ANONYMOUS`.
//!
//! The subject becomes a principal's name through `ssl.principal.mapping.rules`
//! (`principal_mapper.rs`).
//!
//! `TlsListener` rebuilds a
//! listener's configuration for its next connection when its store settings (dynamic configs) or
//! store files change.
//!
//! Not yet: PBES1-encrypted PEM keys, kTLS.
//!
//! Invariants: a bad or incomplete configuration fails the start with the property's name,
//! never a connection (a bad reload keeps the previous configuration); nothing here reads a
//! secret into a log line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::CertificateDer;

use super::principal_mapper::PrincipalMapper;
use crate::config::{listener_value, Properties};
use crate::security::certificate;
use crate::security::stores::{keystore, setting, truststore};

/// The principal of a connection without a client certificate (and of PLAINTEXT), as Kafka.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The server configuration of the SSL listener `listener` (its name as in `listeners`).
pub fn server_config(props: &Properties, listener: &str) -> anyhow::Result<Arc<ServerConfig>> {
    let get = |key: &str| listener_value(props, listener, key);
    let (chain, key) = keystore(props, listener)?;
    let trusted = truststore(props, listener)?;

    let (provider, versions) = crate::security::stores::crypto(props, listener)?;

    let (ak, auth) = get("ssl.client.auth").unwrap_or(("ssl.client.auth".into(), "none"));
    let builder = ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(&versions)?;
    let builder = match auth.to_ascii_lowercase().as_str() {
        "none" => builder.with_no_client_auth(),
        mode @ ("requested" | "required") => {
            let Some(trusted) = trusted else {
                bail!("{ak}={auth} on listener {listener} needs ssl.truststore.location or ssl.truststore.certificates")
            };
            let mut roots = RootCertStore::empty();
            for cert in trusted {
                roots.add(cert).context("ssl.truststore: a certificate is not usable as a trust anchor")?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if mode == "requested" { verifier.allow_unauthenticated() } else { verifier };
            builder.with_client_cert_verifier(verifier.build()?)
        }
        _ => bail!("{ak}={auth}: expected none, requested or required"),
    };
    let config = builder.with_single_cert(chain, key).with_context(|| {
        format!(
            "listener {listener}: the keystore's key is unusable or does not match its certificate \
                 (RSA, ECDSA on P-256 / P-384, or Ed25519)"
        )
    })?;
    Ok(Arc::new(config))
}

/// An SSL listener's TLS: the acceptor, and how a client certificate names its principal; built
/// again for the next connection when a store's settings change (`kafka-configs --alter` of
/// `listener.name.<l>.ssl.keystore.*` / `ssl.truststore.*`, Kafka's certificate rotation) or its
/// file is rewritten (so an alter naming the same file after it was replaced reloads it, as in
/// Kafka). A store that does not load keeps the previous one (logged).
#[derive(Clone)]
pub struct TlsListener {
    name: String,
    state: Arc<std::sync::Mutex<TlsState>>,
}

struct TlsState {
    /// The store settings in force (`settings`) and their files' stamps, when last looked at.
    settings: Vec<String>,
    stamps: Vec<String>,
    stamped_at: Instant,
    acceptor: tokio_rustls::TlsAcceptor,
    mapper: Arc<PrincipalMapper>,
}

/// How often a listener looks at its store files for a rewrite (a new connection does, at most
/// this often); a changed setting is seen at once.
const STORE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The store settings of `listener` in force: `key=value` of each reloadable SSL config.
fn settings(props: &Properties, listener: &str) -> Vec<String> {
    let value = |key: &str| listener_value(props, listener, key).map_or("", |(_, v)| v).to_string();
    crate::dynconf::defs::RELOADABLE_SSL_CONFIGS.iter().map(|key| format!("{key}={}", value(key))).collect()
}

/// The stamps (modified time, length) of the store files `settings` name.
fn stamps(settings: &[String]) -> Vec<String> {
    let files = settings.iter().filter_map(|s| s.split_once(".location=")).map(|(_, path)| path);
    files
        .filter(|path| !path.is_empty())
        .map(|path| {
            let stamp = std::fs::metadata(path).ok().map(|m| (m.modified().ok(), m.len()));
            format!("{path} {stamp:?}")
        })
        .collect()
}

impl TlsListener {
    /// The acceptor and principal mapper for a new connection, under `props` (the broker's
    /// effective config, dynamic changes included). Rebuilt (off the async threads) when a
    /// setting changed or, looked at once a [`STORE_CHECK_INTERVAL`], a store file did.
    pub async fn current(&self, props: &Properties) -> (tokio_rustls::TlsAcceptor, Arc<PrincipalMapper>) {
        let now = settings(props, &self.name);
        let old_stamps = {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if now == state.settings && state.stamped_at.elapsed() < STORE_CHECK_INTERVAL {
                return (state.acceptor.clone(), state.mapper.clone());
            }
            // None: a setting changed, so rebuild whatever the files say.
            (now == state.settings).then(|| state.stamps.clone())
        };
        let (props, name, settings) = (props.clone(), self.name.clone(), now.clone());
        let checked = tokio::task::spawn_blocking(move || {
            let stamps = stamps(&settings);
            let rebuilt = (old_stamps.as_ref() != Some(&stamps)).then(|| parts(&props, &name));
            (stamps, rebuilt)
        })
        .await;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match checked {
            Ok((stamps, rebuilt)) => {
                match rebuilt {
                    Some(Ok((acceptor, mapper))) => {
                        tracing::info!(listener = %self.name, "TLS keystore / truststore reloaded");
                        (state.acceptor, state.mapper) = (acceptor, mapper);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(listener = %self.name, error = %e, "TLS stores not reloaded; the previous ones stay")
                    }
                    None => {}
                }
                (state.settings, state.stamps, state.stamped_at) = (now, stamps, Instant::now());
            }
            Err(e) => {
                tracing::warn!(listener = %self.name, error = %e, "TLS store check failed; the previous stores stay")
            }
        }
        (state.acceptor.clone(), state.mapper.clone())
    }
}

/// The TLS of listener `listener`: `server_config` and its `ssl.principal.mapping.rules`.
pub fn listener(props: &Properties, listener: &str) -> anyhow::Result<TlsListener> {
    let (acceptor, mapper) = parts(props, listener)?;
    let settings = settings(props, listener);
    let stamps = stamps(&settings);
    let state = TlsState { settings, stamps, stamped_at: Instant::now(), acceptor, mapper };
    Ok(TlsListener { name: listener.to_string(), state: Arc::new(std::sync::Mutex::new(state)) })
}

fn parts(props: &Properties, listener: &str) -> anyhow::Result<(tokio_rustls::TlsAcceptor, Arc<PrincipalMapper>)> {
    let config = server_config(props, listener)?;
    let (key, rules) = listener_value(props, listener, "ssl.principal.mapping.rules")
        .unwrap_or(("ssl.principal.mapping.rules".into(), "DEFAULT"));
    let mapper = PrincipalMapper::parse(rules).map_err(|e| anyhow!("{key}={rules}: {e}"))?;
    Ok((tokio_rustls::TlsAcceptor::from(config), Arc::new(mapper)))
}

/// Kafka's check of a dynamic change to an SSL listener's stores (`SslFactory`'s
/// `validateReconfiguration`), run before `kafka-configs --alter` is accepted: with `old` and
/// `new` the effective configs, a change to the listener's store settings must load, keep the
/// keystore certificate's subject (unless `ssl.allow.dn.changes`) and every subject alternative
/// name (unless `ssl.allow.san.changes`), and may not add a truststore to a listener without one.
pub fn validate_reconfiguration(old: &Properties, new: &Properties, listener: &str) -> Result<(), String> {
    if settings(old, listener) == settings(new, listener) {
        return Ok(());
    }
    let failed = |why: String| format!("Validation of dynamic config update of SSLFactory failed: {why}");
    parts(new, listener).map_err(|e| failed(format!("{e:#}")))?;
    let allowed = |key: &str| setting(new, listener, key).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    // The store in force loaded when the listener started or last reloaded; if it no longer
    // does (its file is gone), there is nothing to compare with.
    if let (Ok((old_chain, _)), Ok((new_chain, _))) = (keystore(old, listener), keystore(new, listener)) {
        let (old_leaf, new_leaf) = (&old_chain[0], &new_chain[0]);
        let (old_dn, new_dn) = (certificate::subject_rfc2253(old_leaf), certificate::subject_rfc2253(new_leaf));
        if !allowed("ssl.allow.dn.changes")
            && !old_dn.as_deref().unwrap_or("").eq_ignore_ascii_case(new_dn.as_deref().unwrap_or(""))
        {
            return Err(failed(format!(
                "Keystore DistinguishedName does not match:  existing={{DN={}}}, new={{DN={}}}",
                old_dn.unwrap_or_default(),
                new_dn.unwrap_or_default()
            )));
        }
        let (old_sans, new_sans) = (certificate::subject_alt_names(old_leaf), certificate::subject_alt_names(new_leaf));
        let (old_sans, new_sans) = (old_sans.unwrap_or_default(), new_sans.unwrap_or_default());
        if !allowed("ssl.allow.san.changes") && !old_sans.iter().all(|n| new_sans.contains(n)) {
            return Err(failed(format!(
                "Keystore SubjectAltNames do not match:  existing={{SAN count={}}}, new={{SAN count={}}}",
                old_sans.len(),
                new_sans.len()
            )));
        }
    }
    if matches!(truststore(old, listener), Ok(None)) && matches!(truststore(new, listener), Ok(Some(_))) {
        return Err(failed(
            "Cannot add SSL truststore to an existing listener for which no truststore was configured.".into(),
        ));
    }
    Ok(())
}

/// `User:<name>` of a client's certificate: its subject (RFC 2253, most specific RDN first, as
/// Java's `X500Principal.getName()`) through `mapper`, or `User:ANONYMOUS` when it sent none
/// (Kafka's `DefaultKafkaPrincipalBuilder`: only a peer that is not verified is anonymous).
/// `Err` (the connection is closed, as Kafka closes it) when the certificate's subject cannot be
/// parsed or no mapping rule applies: a client that presented a certificate is never anonymous.
pub fn principal(peer_certificates: Option<&[CertificateDer<'_>]>, mapper: &PrincipalMapper) -> Result<String, String> {
    let Some(leaf) = peer_certificates.and_then(|c| c.first()) else {
        return Ok(ANONYMOUS.to_string());
    };
    let subject = certificate::subject_rfc2253(leaf)
        .ok_or_else(|| "the client certificate's subject cannot be parsed as an X.500 name".to_string())?;
    match mapper.name(&subject) {
        Some(name) => Ok(format!("User:{name}")),
        None => Err(format!("Failed to map name for '{subject}' based on SSL principal mapping rules.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::stores::{certificates, private_key};

    #[test]
    fn subject_as_java_names_it() {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc");
        dn.push(rcgen::DnType::CommonName, "client-1");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der().clone();
        let default = PrincipalMapper::default();
        assert_eq!(
            principal(Some(std::slice::from_ref(&der)), &default).unwrap(),
            "User:CN=client-1,O=Acme\\, Inc,C=US"
        );
        assert_eq!(principal(None, &default).unwrap(), ANONYMOUS);
        // Through ssl.principal.mapping.rules: the CN, lowered; no rule applying refuses the client.
        let cn = PrincipalMapper::parse("RULE:^CN=([^,]+),.*$/$1/L").unwrap();
        assert_eq!(principal(Some(std::slice::from_ref(&der)), &cn).unwrap(), "User:client-1");
        let none = PrincipalMapper::parse("RULE:^O=(.*)$/$1/").unwrap();
        assert_eq!(
            principal(Some(&[der]), &none).unwrap_err(),
            "Failed to map name for 'CN=client-1,O=Acme\\, Inc,C=US' based on SSL principal mapping rules."
        );
    }

    /// A certificate (unsigned, fields before the subject left empty: only the subject matters
    /// here) whose TBSCertificate ends with `subject`.
    fn with_subject(subject: &[u8]) -> CertificateDer<'static> {
        // version [0] v3, serial, signature, issuer, validity, then the subject
        let mut tbs = vec![0xa0, 0x03, 0x02, 0x01, 0x02, 0x02, 0x01, 0x01, 0x30, 0x00, 0x30, 0x00, 0x30, 0x00];
        tbs.extend_from_slice(subject);
        let tbs = [&[0x30, tbs.len() as u8][..], &tbs].concat();
        CertificateDer::from([&[0x30, tbs.len() as u8][..], &tbs].concat())
    }

    #[test]
    fn a_certificate_whose_subject_cannot_be_parsed_names_no_principal() {
        let default = PrincipalMapper::default();
        // CN=xy: the control, read as any subject is.
        let readable =
            with_subject(&[0x30, 0x0d, 0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x02, b'x', b'y']);
        assert_eq!(principal(Some(&[readable]), &default).unwrap(), "User:CN=xy");
        // An attribute without a value; an RDN that is not a SET's content; a subject cut short.
        for subject in [
            &[0x30, 0x09, 0x31, 0x07, 0x30, 0x05, 0x06, 0x03, 0x55, 0x04, 0x03][..],
            &[0x30, 0x03, 0x31, 0x01, 0x30][..],
            &[0x30, 0x05, 0x31, 0x07, 0x30, 0x05, 0x06][..],
        ] {
            let cert = with_subject(subject);
            assert_eq!(certificate::subject_rfc2253(&cert), None, "{subject:02x?}");
            let why = principal(Some(&[cert]), &default).expect_err("not User:ANONYMOUS");
            assert!(why.contains("cannot be parsed"), "{why}");
        }
    }

    #[test]
    fn pem_joined_by_line_continuations_still_parses() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap().self_signed(&key).unwrap();
        let joined = cert.pem().replace('\n', "");
        assert_eq!(certificates("k", &joined).unwrap().len(), 1);
        assert!(private_key("k", &key.serialize_pem().replace('\n', ""), None).is_ok());
        assert!(certificates("k", "nothing").is_err());
    }

    #[test]
    fn an_encrypted_pem_key_needs_ssl_key_password() {
        // openssl pkcs8 -topk8 -v2 aes-256-cbc of the keytool fixture's key, then its certificate.
        let path = format!("{}/tests/fixtures/keystores/broker-encrypted.pem", env!("CARGO_MANIFEST_DIR"));
        let props = |extra: &[(&str, &str)]| -> Properties {
            let mut p: Properties = [("ssl.keystore.type", "PEM"), ("ssl.keystore.location", path.as_str())]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            p.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            p
        };
        assert!(server_config(&props(&[("ssl.key.password", "key-secret")]), "SSL").is_ok());
        let e = server_config(&props(&[]), "SSL").map(|_| ()).expect_err("refused").to_string();
        assert!(e.contains("ssl.key.password"), "{e}");
        let e =
            server_config(&props(&[("ssl.key.password", "nope")]), "SSL").map(|_| ()).expect_err("refused").to_string();
        assert!(e.contains("cannot decrypt"), "{e}");
    }

    #[test]
    fn configuration_inline_overrides_and_refusals() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap().self_signed(&key).unwrap();
        let props = |pairs: &[(&str, &str)]| -> Properties {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        // Inline PEM joined by line continuations, as in a properties file.
        let (key_pem, cert_pem) = (key.serialize_pem().replace('\n', ""), cert.pem().replace('\n', ""));
        let inline = [
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.key", key_pem.as_str()),
            ("ssl.keystore.certificate.chain", cert_pem.as_str()),
            ("ssl.truststore.certificates", cert_pem.as_str()),
        ];
        assert!(server_config(&props(&inline), "SSL").is_ok());
        // The listener's own value wins over the broker-wide one.
        let mut own = inline.to_vec();
        own.push(("ssl.client.auth", "bogus"));
        own.push(("listener.name.ssl.ssl.client.auth", "required"));
        assert!(server_config(&props(&own), "SSL").is_ok());
        assert!(server_config(&props(&own), "OTHER").is_err(), "OTHER sees ssl.client.auth=bogus");
        let refused = |extra: &[(&str, &str)], what: &str| {
            let mut p = inline[..3].to_vec();
            p.extend_from_slice(extra);
            let e = server_config(&props(&p), "SSL").err().map(|e| e.to_string()).expect("refused");
            assert!(e.contains(what), "{e}");
        };
        refused(&[("ssl.client.auth", "required")], "truststore");
        refused(&[("ssl.keystore.type", "PKCS12")], "PKCS12");
        refused(&[("listener.name.ssl.ssl.enabled.protocols", "TLSv1.1")], "ssl.enabled.protocols");
        refused(&[("ssl.cipher.suites", "TLS_NOPE")], "cipher");
        // Kafka's (IANA) names, TLS 1.3 ones included (rustls spells those TLS13_*).
        let mut suites = inline[..3].to_vec();
        suites.push(("ssl.cipher.suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384"));
        let config = server_config(&props(&suites), "SSL").unwrap();
        let mut names: Vec<String> = config
            .crypto_provider()
            .cipher_suites
            .iter()
            .map(|s| crate::security::stores::iana_name(s.suite()))
            .collect();
        names.sort();
        assert_eq!(names, ["TLS_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]);
        assert!(server_config(&props(&[]), "SSL").err().unwrap().to_string().contains("ssl.keystore.location"));
    }

    #[test]
    fn a_store_change_is_validated_as_kafka_does() {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let store = |cn: &str, sans: &[&str]| -> Vec<(String, String)> {
            let mut params =
                rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
            params.distinguished_name.push(rcgen::DnType::CommonName, cn);
            let cert = params.self_signed(&ca_key).unwrap();
            let key = ca_key.serialize_pem();
            vec![
                ("listener.name.ssl.ssl.keystore.key".into(), key),
                ("listener.name.ssl.ssl.keystore.certificate.chain".into(), cert.pem()),
            ]
        };
        let with = |pairs: Vec<(String, String)>, extra: &[(&str, &str)]| -> Properties {
            let mut p: Properties = pairs.into_iter().collect();
            p.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            p
        };
        let old = with(store("broker", &["a.example", "b.example"]), &[]);
        let check = |new: &Properties| validate_reconfiguration(&old, new, "SSL");
        assert_eq!(check(&old), Ok(()), "nothing changed");
        assert_eq!(check(&with(store("broker", &["b.example", "a.example", "c.example"]), &[])), Ok(()));
        let e = check(&with(store("other", &["a.example", "b.example"]), &[])).unwrap_err();
        assert!(e.contains("Keystore DistinguishedName does not match") && e.contains("CN=other"), "{e}");
        let allowed = [("ssl.allow.dn.changes", "true")];
        assert_eq!(check(&with(store("other", &["a.example", "b.example"]), &allowed)), Ok(()));
        let e = check(&with(store("broker", &["a.example"]), &[])).unwrap_err();
        assert!(e.contains("SubjectAltNames do not match"), "{e}");
        assert_eq!(check(&with(store("broker", &["a.example"]), &[("ssl.allow.san.changes", "true")])), Ok(()));
        let mut broken = old.clone();
        broken.insert("listener.name.ssl.ssl.keystore.location".into(), "/nonexistent/keystore.p12".into());
        let e = check(&broken).unwrap_err();
        assert!(
            e.starts_with("Validation of dynamic config update of SSLFactory failed") && e.contains("nonexistent"),
            "{e}"
        );
        let ca = old["listener.name.ssl.ssl.keystore.certificate.chain"].clone();
        let e = check(&with(store("broker", &["a.example", "b.example"]), &[("ssl.truststore.certificates", &ca)]))
            .unwrap_err();
        assert!(e.contains("Cannot add SSL truststore"), "{e}");
        // Another listener's change is not this one's.
        assert_eq!(validate_reconfiguration(&old, &broken, "OTHER"), Ok(()));
    }
}
