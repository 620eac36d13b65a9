//! Key stores and trust stores as Kafka's `ssl.*` properties name them, for both ends of a TLS
//! connection (SSL listeners, `server/tls.rs`; this node's own connections to controllers and
//! brokers, `security/client.rs`): a listener's own `listener.name.<name lowercase>.ssl.*` taking
//! precedence over the broker-wide value. Keystores: `ssl.keystore.location` of type PEM, PKCS12
//! or JKS with `ssl.keystore.password` / `ssl.key.password` (`keystore.rs`), or inline PEM
//! `ssl.keystore.key` + `ssl.keystore.certificate.chain`; truststores: `ssl.truststore.location`
//! of those types, or inline `ssl.truststore.certificates`. Encrypted PEM keys (PKCS#8 PBES2) are
//! read with `ssl.key.password`.
//!
//! Invariants: a store that does not load is an error naming the property, never a panic;
//! nothing here puts a secret into an error or a log line.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use rustls::crypto::CryptoProvider;
use rustls::SupportedProtocolVersion;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{listener_value, Properties};
use crate::security::keystore::with_public_key;

/// A listener's setting (its own, else the broker-wide one), its value only.
pub fn setting(props: &Properties, listener: &str, key: &str) -> Option<String> {
    listener_value(props, listener, key).map(|(_, v)| v.to_string())
}

/// A store's type: the property, else what the file is (Kafka's default, JKS, also reads
/// PKCS12 as Java's keystore does; a PEM file is taken as PEM).
fn store_type(props: &Properties, listener: &str, key: &str, bytes: &[u8]) -> String {
    match setting(props, listener, key) {
        Some(t) => t.trim().to_ascii_uppercase(),
        None if bytes.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) => "JKS".into(),
        None if bytes.first() == Some(&0x30) => "PKCS12".into(),
        None => "PEM".into(),
    }
}

/// The listener's keystore: its certificate chain and private key.
pub fn keystore(
    props: &Properties,
    listener: &str,
) -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let get = |key: &str| listener_value(props, listener, key);
    let password = |key: &str| setting(props, listener, key);
    let store_type = |key: &str, bytes: &[u8]| store_type(props, listener, key, bytes);
    Ok(match (get("ssl.keystore.location"), get("ssl.keystore.key")) {
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
                kind => crate::security::keystore::key_and_chain(
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
    })
}

/// The listener's truststore: the CAs client certificates must chain to, if it has one.
pub fn truststore(props: &Properties, listener: &str) -> anyhow::Result<Option<Vec<CertificateDer<'static>>>> {
    let get = |key: &str| listener_value(props, listener, key);
    let password = |key: &str| setting(props, listener, key);
    let store_type = |key: &str, bytes: &[u8]| store_type(props, listener, key, bytes);
    Ok(match (get("ssl.truststore.location"), get("ssl.truststore.certificates")) {
        (Some((k, path)), _) => {
            let bytes = std::fs::read(path).with_context(|| format!("{k}={path}"))?;
            match store_type("ssl.truststore.type", &bytes).as_str() {
                "PEM" => {
                    let text = String::from_utf8(bytes).map_err(|_| anyhow!("{k}={path}: not a PEM text file"))?;
                    Some(certificates(&k, &text)?)
                }
                kind => Some(crate::security::keystore::trusted(
                    kind,
                    &k,
                    &bytes,
                    password("ssl.truststore.password").as_deref(),
                )?),
            }
        }
        (None, Some((k, text))) => Some(certificates(&k, text)?),
        (None, None) => None,
    })
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

pub fn certificates(key: &str, text: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
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
pub fn private_key(key: &str, text: &str, password: Option<&str>) -> anyhow::Result<PrivateKeyDer<'static>> {
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
        return Ok(PrivateKeyDer::Pkcs8(with_public_key(plain.as_bytes().to_vec()).into()));
    }
    match PrivateKeyDer::from_pem_slice(normalized_pem(text).as_bytes()) {
        Ok(PrivateKeyDer::Pkcs8(k)) => Ok(PrivateKeyDer::Pkcs8(with_public_key(k.secret_pkcs8_der().to_vec()).into())),
        Ok(other) => Ok(other),
        Err(e) => Err(anyhow!("{key}: no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}")),
    }
}

/// A rustls cipher suite's IANA name, as Kafka (JSSE) spells it: rustls writes the TLS 1.3
/// suites `TLS13_AES_128_GCM_SHA256`, IANA and Java `TLS_AES_128_GCM_SHA256`.
pub fn iana_name(suite: rustls::CipherSuite) -> String {
    let name = format!("{suite:?}");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

/// The crypto provider (ring, its cipher suites cut to `ssl.cipher.suites` when set, IANA names)
/// and the protocol versions (`ssl.enabled.protocols`) of `listener`, for either end.
pub fn crypto(
    props: &Properties,
    listener: &str,
) -> anyhow::Result<(Arc<CryptoProvider>, Vec<&'static SupportedProtocolVersion>)> {
    let get = |key: &str| listener_value(props, listener, key);
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some((k, suites)) = get("ssl.cipher.suites").filter(|(_, v)| !v.trim().is_empty()) {
        let wanted: Vec<&str> = suites.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        provider.cipher_suites.retain(|s| wanted.contains(&iana_name(s.suite()).as_str()));
        if provider.cipher_suites.is_empty() {
            bail!("{k}={suites}: none of these cipher suites is available");
        }
    }
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
    Ok((Arc::new(provider), versions))
}
