//! TLS for SSL listeners: rustls with the ring provider.
//!
//! Owns: building each SSL listener's server configuration from Kafka's `ssl.*` properties, a
//! listener's own `listener.name.<name lowercase>.ssl.*` taking precedence over the broker-wide
//! value, as Kafka does: keystores (`ssl.keystore.location` of type PEM, PKCS12 or JKS with
//! `ssl.keystore.password` / `ssl.key.password` (`keystore.rs`), or inline PEM `ssl.keystore.key` +
//! `ssl.keystore.certificate.chain`), truststores (`ssl.truststore.location` of those types, or
//! inline `ssl.truststore.certificates`), `ssl.client.auth` (none / requested / required),
//! `ssl.enabled.protocols` (TLSv1.2, TLSv1.3) and `ssl.cipher.suites` (IANA names); and the
//! principal of a client: `User:` + its certificate's subject as RFC 2253 (what Java's
//! `X500Principal.getName()` gives, Kafka's default `ssl.principal.mapping.rules`), or
//! `User:ANONYMOUS` without a certificate.
//!
//! The subject becomes a principal's name through `ssl.principal.mapping.rules`
//! (`principal_mapper.rs`).
//!
//! Encrypted PEM keys (PKCS#8 PBES2) are read with `ssl.key.password`. `TlsListener` rebuilds a
//! listener's configuration for its next connection when its store settings (dynamic configs) or
//! store files change.
//!
//! Not yet: PBES1-encrypted PEM keys, validating a store at `kafka-configs --alter` time, kTLS.
//!
//! Invariants: a bad or incomplete configuration fails the start with the property's name,
//! never a connection (a bad reload keeps the previous configuration); nothing here reads a
//! secret into a log line.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::principal_mapper::PrincipalMapper;
use crate::config::Properties;

/// The principal of a connection without a client certificate (and of PLAINTEXT), as Kafka.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// The server configuration of the SSL listener `listener` (its name as in `listeners`).
pub fn server_config(props: &Properties, listener: &str) -> anyhow::Result<Arc<ServerConfig>> {
    let prefix = format!("listener.name.{}.", listener.to_lowercase());
    let get = |key: &str| -> Option<(String, &str)> {
        let own = format!("{prefix}{key}");
        match props.get(&own) {
            Some(v) => Some((own, v.as_str())),
            None => props.get(key).map(|v| (key.to_string(), v.as_str())),
        }
    };
    // A store's type: the property, else what the file is (Kafka's default, JKS, also reads
    // PKCS12 as Java's keystore does; a PEM file is taken as PEM).
    let store_type = |key: &str, bytes: &[u8]| -> String {
        match get(key) {
            Some((_, t)) => t.trim().to_ascii_uppercase(),
            None if bytes.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) => "JKS".into(),
            None if bytes.first() == Some(&0x30) => "PKCS12".into(),
            None => "PEM".into(),
        }
    };
    let password = |key: &str| get(key).map(|(_, v)| v.to_string());

    // Keystore: the listener's key and certificate chain.
    let (chain, key) = match (get("ssl.keystore.location"), get("ssl.keystore.key")) {
        (Some((k, path)), _) => {
            let bytes = std::fs::read(path).with_context(|| format!("{k}={path}"))?;
            match store_type("ssl.keystore.type", &bytes).as_str() {
                "PEM" => {
                    if password("ssl.keystore.password").is_some() {
                        bail!("SSL key store password cannot be specified with PEM format, only key password may be specified");
                    }
                    let text = String::from_utf8(bytes).map_err(|_| anyhow!("{k}={path}: not a PEM text file"))?;
                    (certificates(&k, &text)?, private_key(&k, &text, password("ssl.key.password").as_deref())?)
                }
                kind => super::keystore::key_and_chain(
                    kind,
                    &k,
                    &bytes,
                    password("ssl.keystore.password").as_deref(),
                    password("ssl.key.password").as_deref(),
                )?,
            }
        }
        (None, Some((k, key_text))) => {
            if let Some((tk, t)) = get("ssl.keystore.type").filter(|(_, t)| !t.eq_ignore_ascii_case("PEM")) {
                bail!("{k} is inline PEM but {tk}={t} (listener {listener}): inline keys need PEM");
            }
            let (ck, chain_text) = get("ssl.keystore.certificate.chain")
                .ok_or_else(|| anyhow!("{k} is set but not ssl.keystore.certificate.chain (listener {listener})"))?;
            (certificates(&ck, chain_text)?, private_key(&k, key_text, password("ssl.key.password").as_deref())?)
        }
        (None, None) => bail!(
            "listener {listener} is SSL: set ssl.keystore.location (PEM key + certificate chain) or \
             ssl.keystore.key and ssl.keystore.certificate.chain"
        ),
    };

    // Truststore: the CAs client certificates must chain to.
    let trusted = match (get("ssl.truststore.location"), get("ssl.truststore.certificates")) {
        (Some((k, path)), _) => {
            let bytes = std::fs::read(path).with_context(|| format!("{k}={path}"))?;
            match store_type("ssl.truststore.type", &bytes).as_str() {
                "PEM" => {
                    let text = String::from_utf8(bytes).map_err(|_| anyhow!("{k}={path}: not a PEM text file"))?;
                    Some(certificates(&k, &text)?)
                }
                kind => {
                    Some(super::keystore::trusted(kind, &k, &bytes, password("ssl.truststore.password").as_deref())?)
                }
            }
        }
        (None, Some((k, text))) => Some(certificates(&k, text)?),
        (None, None) => None,
    };

    let mut provider = rustls::crypto::ring::default_provider();
    if let Some((k, suites)) = get("ssl.cipher.suites").filter(|(_, v)| !v.trim().is_empty()) {
        let wanted: Vec<&str> = suites.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        provider.cipher_suites.retain(|s| wanted.iter().any(|w| format!("{:?}", s.suite()) == *w));
        if provider.cipher_suites.is_empty() {
            bail!("{k}={suites}: none of these cipher suites is available");
        }
    }
    let provider = Arc::new(provider);

    let (pk, protocols) = get("ssl.enabled.protocols").unwrap_or(("ssl.enabled.protocols".into(), "TLSv1.2,TLSv1.3"));
    let mut versions = Vec::new();
    for p in protocols.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        match p {
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            other => tracing::warn!(listener, protocol = other, "{pk}: protocol not supported by rustls, skipped"),
        }
    }
    if versions.is_empty() {
        bail!("{pk}={protocols}: neither TLSv1.2 nor TLSv1.3 is enabled");
    }

    let (ak, auth) = get("ssl.client.auth").unwrap_or(("ssl.client.auth".into(), "none"));
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .with_context(|| format!("{pk}={protocols}"))?;
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
                 (RSA, ECDSA with its public key, or Ed25519; Java writes EC keys without theirs)"
        )
    })?;
    Ok(Arc::new(config))
}

/// PEM blocks as rustls-pki-types reads them. Kafka's inline values are often written with
/// properties-file line continuations, which join the lines: the blocks are rebuilt with one
/// base64 line per 64 characters first.
fn normalized_pem(text: &str) -> String {
    let re = regex::Regex::new(r"(?s)-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END ([A-Z0-9 ]+)-----").expect("valid");
    let mut out = String::new();
    for m in re.captures_iter(text) {
        let body: String = m[2].chars().filter(|c| !c.is_whitespace()).collect();
        out.push_str(&format!("-----BEGIN {}-----\n", &m[1]));
        for line in body.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).expect("ascii"));
            out.push('\n');
        }
        out.push_str(&format!("-----END {}-----\n", &m[3]));
    }
    out
}

fn certificates(key: &str, text: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let pem = normalized_pem(text);
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{key}: bad PEM certificate: {e}"))?;
    if certs.is_empty() {
        bail!("{key}: no PEM certificate (-----BEGIN CERTIFICATE-----)");
    }
    Ok(certs)
}

/// The PEM private key in `text`; an encrypted PKCS#8 one (`ENCRYPTED PRIVATE KEY`, PBES2 as
/// openssl and Java write it) is decrypted with `password` (`ssl.key.password`).
fn private_key(key: &str, text: &str, password: Option<&str>) -> anyhow::Result<PrivateKeyDer<'static>> {
    if text.contains("ENCRYPTED PRIVATE KEY") {
        use pkcs8::der::Decode;
        let Some(password) = password else {
            bail!("{key}: the private key is encrypted: set ssl.key.password");
        };
        use base64::Engine;
        let body = text
            .split("-----BEGIN ENCRYPTED PRIVATE KEY-----")
            .nth(1)
            .and_then(|rest| rest.split("-----END ENCRYPTED PRIVATE KEY-----").next())
            .map(|b| b.chars().filter(|c| !c.is_whitespace()).collect::<String>())
            .ok_or_else(|| anyhow!("{key}: no complete ENCRYPTED PRIVATE KEY block"))?;
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| anyhow!("{key}: the ENCRYPTED PRIVATE KEY block is not base64: {e}"))?;
        let info = pkcs8::EncryptedPrivateKeyInfoRef::from_der(&der)
            .map_err(|e| anyhow!("{key}: bad ENCRYPTED PRIVATE KEY: {e}"))?;
        let plain = info
            .decrypt(password)
            .map_err(|_| anyhow!("{key}: cannot decrypt the private key: wrong ssl.key.password or an unsupported scheme (PBES2 with AES)"))?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    PrivateKeyDer::from_pem_slice(normalized_pem(text).as_bytes())
        .map_err(|e| anyhow!("{key}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"))
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
    fingerprint: Vec<String>,
    acceptor: tokio_rustls::TlsAcceptor,
    mapper: Arc<PrincipalMapper>,
}

/// What a listener's TLS was built from: the store settings in force and their files' stamps.
fn fingerprint(props: &Properties, listener: &str) -> Vec<String> {
    let own = |key: &str| format!("listener.name.{}.{key}", listener.to_lowercase());
    let mut out = Vec::new();
    for key in crate::dynconf::defs::RELOADABLE_SSL_CONFIGS {
        let value = props.get(&own(key)).or_else(|| props.get(*key)).cloned().unwrap_or_default();
        if key.ends_with(".location") && !value.is_empty() {
            let stamp = std::fs::metadata(&value).ok().map(|m| (m.modified().ok(), m.len()));
            out.push(format!("{key}={value} {stamp:?}"));
        } else {
            out.push(format!("{key}={value}"));
        }
    }
    out
}

impl TlsListener {
    /// The acceptor and principal mapper for a new connection, under `props` (the broker's
    /// effective config, dynamic changes included).
    pub fn current(&self, props: &Properties) -> (tokio_rustls::TlsAcceptor, Arc<PrincipalMapper>) {
        let now = fingerprint(props, &self.name);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if now != state.fingerprint {
            match parts(props, &self.name) {
                Ok((acceptor, mapper)) => {
                    tracing::info!(listener = %self.name, "TLS keystore / truststore reloaded");
                    (state.acceptor, state.mapper) = (acceptor, mapper);
                }
                Err(e) => {
                    tracing::warn!(listener = %self.name, error = %e, "TLS stores not reloaded; the previous ones stay")
                }
            }
            state.fingerprint = now;
        }
        (state.acceptor.clone(), state.mapper.clone())
    }
}

/// The TLS of listener `listener`: `server_config` and its `ssl.principal.mapping.rules`.
pub fn listener(props: &Properties, listener: &str) -> anyhow::Result<TlsListener> {
    let (acceptor, mapper) = parts(props, listener)?;
    let state = TlsState { fingerprint: fingerprint(props, listener), acceptor, mapper };
    Ok(TlsListener { name: listener.to_string(), state: Arc::new(std::sync::Mutex::new(state)) })
}

fn parts(props: &Properties, listener: &str) -> anyhow::Result<(tokio_rustls::TlsAcceptor, Arc<PrincipalMapper>)> {
    let config = server_config(props, listener)?;
    let own = format!("listener.name.{}.ssl.principal.mapping.rules", listener.to_lowercase());
    let (key, rules) = match props.get(&own) {
        Some(v) => (own, v.as_str()),
        None => (
            "ssl.principal.mapping.rules".to_string(),
            props.get("ssl.principal.mapping.rules").map_or("DEFAULT", |v| v.as_str()),
        ),
    };
    let mapper = PrincipalMapper::parse(rules).map_err(|e| anyhow!("{key}={rules}: {e}"))?;
    Ok((tokio_rustls::TlsAcceptor::from(config), Arc::new(mapper)))
}

/// `User:<name>` of a client's certificate: its subject (RFC 2253, most specific RDN first, as
/// Java's `X500Principal.getName()`) through `mapper`, or `User:ANONYMOUS` when it sent none.
/// `Err` (the connection is refused, as Kafka does) when no mapping rule applies.
pub fn principal(peer_certificates: Option<&[CertificateDer<'_>]>, mapper: &PrincipalMapper) -> Result<String, String> {
    let subject = peer_certificates.and_then(|c| c.first()).and_then(|c| subject_rfc2253(c));
    match subject {
        Some(s) => match mapper.name(&s) {
            Some(name) => Ok(format!("User:{name}")),
            None => Err(format!("no ssl.principal.mapping.rules rule applies to {s}")),
        },
        None => Ok(ANONYMOUS.to_string()),
    }
}

/// One DER element: (tag, content, rest).
pub(super) fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
        rest = &rest[n..];
        len
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subject of an X.509 certificate (DER) as RFC 2253.
fn subject_rfc2253(cert: &[u8]) -> Option<String> {
    let (_, cert, _) = der(cert)?;
    let (_, mut tbs, _) = der(cert)?;
    let mut element = der(tbs)?;
    if element.0 == 0xa0 {
        tbs = element.2; // explicit version
        element = der(tbs)?;
    }
    // serial, signature, issuer, validity, then the subject
    for _ in 0..4 {
        element = der(element.2)?;
    }
    let (_, mut rdns, _) = element;
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (_, mut set, rest) = der(rdns)?;
        rdns = rest;
        let mut avas = Vec::new();
        while !set.is_empty() {
            let (_, ava, rest) = der(set)?;
            set = rest;
            let (_, oid, value) = der(ava)?;
            let (vtag, vcontent, _) = der(value)?;
            let name = attribute_name(oid);
            let text = match vtag {
                0x0c | 0x13 | 0x16 | 0x14 | 0x1a => Some(String::from_utf8_lossy(vcontent).into_owned()),
                _ => None,
            };
            avas.push(match (text, name.1) {
                (Some(t), true) => format!("{}={}", name.0, escape(&t)),
                _ => format!("{}=#{}", name.0, value.iter().map(|b| format!("{b:02x}")).collect::<String>()),
            });
        }
        parts.push(avas.join("+"));
    }
    parts.reverse();
    Some(parts.join(","))
}

/// The RFC 2253 keyword of an attribute type, and whether its value is shown as a string (Java
/// shows the values of types it has no keyword for as `#` + hex of their DER).
fn attribute_name(oid: &[u8]) -> (String, bool) {
    let keyword = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x09] => "STREET",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC",
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID",
        _ => return (dotted(oid), false),
    };
    (keyword.to_string(), true)
}

fn dotted(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc = 0u64;
    for &b in oid {
        acc = (acc << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
        }
    }
    arcs.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::new();
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(principal(Some(&[der]), &none).unwrap_err().contains("CN=client-1"));
        assert_eq!(dotted(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]), "1.2.840.113549.1.9.1");
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
        assert!(server_config(&props(&[]), "SSL").err().unwrap().to_string().contains("ssl.keystore.location"));
    }
}
