//! Keystores and truststores of type PKCS12 and JKS, as Kafka's `ssl.keystore.type` /
//! `ssl.truststore.type` name them (PEM stays in `tls.rs`).
//!
//! - PKCS12 (RFC 7292; what keytool, openssl and Java 9+ write by default): read with the
//!   `p12-keystore` crate, which checks the MAC with `ssl.keystore.password` and decrypts the bags
//!   (PBES2 with AES, or the legacy SHA-1 3DES / RC2 / RC4). A keystore gives its private key entry
//!   and its chain; a truststore its trusted-certificate entries (those keytool marks trusted;
//!   a store with none, as openssl writes, gives all its certificates).
//! - JKS (Sun's format, read here): `0xFEEDFEED`, version 1 or 2, the entries (1: a private key
//!   protected by Sun's `KeyProtector` and its chain; 2: a trusted certificate), then a SHA-1 over
//!   the password (UTF-16BE), the text "Mighty Aphrodite" and everything before it. A protected key
//!   is `salt(20) || key XOR keystream || SHA-1(password || key)`, the keystream being
//!   SHA-1(password || previous block), from the salt. The key itself is PKCS#8.
//!
//! An EC private key as Java writes it (PKCS#8 whose ECPrivateKey has no public key, which
//! rustls needs to sign) gets its public key computed from the private scalar (P-256, P-384):
//! `with_public_key`, applied to every PKCS#8 key a store or a PEM file gives.
//!
//! Invariants: a wrong password, a damaged file or a store without what is asked for is an error
//! naming the property, never a panic; every length read from a file is checked against what is
//! left of it before it is used; passwords are never logged.

use anyhow::{anyhow, bail};
use p12_keystore::{KeyStore, KeyStoreEntry, Pkcs12ImportPolicy};
use ring::digest::{digest, SHA1_FOR_LEGACY_USE_ONLY};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::certificate::der;

/// A keystore's private key and its certificate chain (leaf first).
pub type KeyAndChain = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

const JKS_MAGIC: u32 = 0xFEED_FEED;
/// Sun's `KeyProtector` algorithm (1.3.6.1.4.1.42.2.17.1.1), DER-encoded.
const SUN_KEY_PROTECTOR_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x2a, 0x02, 0x11, 0x01, 0x01];
const SHA1_LEN: usize = 20;

/// The private key entry of the keystore `bytes` (`property` names it in errors).
pub fn key_and_chain(
    kind: &str,
    property: &str,
    bytes: &[u8],
    store_password: Option<&str>,
    key_password: Option<&str>,
) -> anyhow::Result<KeyAndChain> {
    let store_password =
        store_password.ok_or_else(|| anyhow!("{property}: a {kind} keystore needs ssl.keystore.password"))?;
    match kind {
        "PKCS12" => {
            let store = KeyStore::from_pkcs12(bytes, store_password, Pkcs12ImportPolicy::Strict)
                .map_err(|e| anyhow!("{property}: cannot read the PKCS12 keystore (wrong password?): {e:?}"))?;
            let (_, chain) = store
                .private_key_chain()
                .ok_or_else(|| anyhow!("{property}: the PKCS12 keystore holds no private key"))?;
            if chain.certs().is_empty() {
                bail!("{property}: the PKCS12 keystore's private key has no certificate");
            }
            let certs = chain.certs().iter().map(|c| CertificateDer::from(c.as_der().to_vec())).collect();
            let key = with_public_key(chain.key().as_der().to_vec());
            Ok((certs, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key))))
        }
        "JKS" => {
            let entries = read_jks(bytes, Some(store_password)).map_err(|e| anyhow!("{property}: {e}"))?;
            let key_password = key_password.unwrap_or(store_password);
            for entry in entries {
                if let JksEntry::Key { protected, chain } = entry {
                    let key = unprotect(&protected, key_password).map_err(|e| anyhow!("{property}: {e}"))?;
                    if chain.is_empty() {
                        bail!("{property}: the JKS keystore's private key has no certificate");
                    }
                    return Ok((chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(with_public_key(key)))));
                }
            }
            bail!("{property}: the JKS keystore holds no private key")
        }
        other => bail!("{property}: keystore type {other} is not supported (PEM, PKCS12, JKS)"),
    }
}

/// id-ecPublicKey (1.2.840.10045.2.1), prime256v1 (1.2.840.10045.3.1.7) and secp384r1
/// (1.3.132.0.34), DER contents.
const EC_PUBLIC_KEY_OID: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const P256_OID: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const P384_OID: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

/// A PKCS#8 key as rustls can use it: an EC key on P-256 or P-384 whose ECPrivateKey lacks its
/// public key (as Java writes them) re-encoded with it; any other key unchanged.
pub fn with_public_key(pkcs8: Vec<u8>) -> Vec<u8> {
    fn parts(pkcs8: &[u8]) -> Option<(&[u8], &[u8])> {
        let (_, info, _) = der(pkcs8)?;
        let (_, _version, rest) = der(info)?;
        let (_, algorithm, rest) = der(rest)?;
        let (_, oid, params) = der(algorithm)?;
        if oid != EC_PUBLIC_KEY_OID {
            return None;
        }
        let (_, curve, _) = der(params)?;
        let (_, ec_private_key, _) = der(rest)?;
        let (_, fields, _) = der(ec_private_key)?;
        let (_, _version, fields) = der(fields)?;
        let (_, scalar, mut optional) = der(fields)?;
        while !optional.is_empty() {
            let (tag, _, next) = der(optional)?;
            if tag == 0xa1 {
                return None; // it has its public key
            }
            optional = next;
        }
        Some((curve, scalar))
    }
    use p256::pkcs8::EncodePrivateKey;
    let completed = match parts(&pkcs8) {
        Some((P256_OID, scalar)) => p256::SecretKey::from_slice(scalar).ok().and_then(|k| k.to_pkcs8_der().ok()),
        Some((P384_OID, scalar)) => p384::SecretKey::from_slice(scalar).ok().and_then(|k| k.to_pkcs8_der().ok()),
        _ => None,
    };
    completed.map_or(pkcs8, |doc| doc.as_bytes().to_vec())
}

/// The trusted certificates of the truststore `bytes`.
pub fn trusted(
    kind: &str,
    property: &str,
    bytes: &[u8],
    password: Option<&str>,
) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<CertificateDer<'static>> = match kind {
        "PKCS12" => {
            let password = password.unwrap_or("");
            let read = |policy| {
                KeyStore::from_pkcs12(bytes, password, policy)
                    .map_err(|e| anyhow!("{property}: cannot read the PKCS12 truststore (wrong password?): {e:?}"))
            };
            let certs_of = |store: &KeyStore| -> Vec<CertificateDer<'static>> {
                store
                    .entries()
                    .filter_map(|(_, e)| match e {
                        KeyStoreEntry::Certificate(c) => Some(CertificateDer::from(c.as_der().to_vec())),
                        _ => None,
                    })
                    .collect()
            };
            let strict = certs_of(&read(Pkcs12ImportPolicy::Strict)?);
            if strict.is_empty() {
                certs_of(&read(Pkcs12ImportPolicy::Raw)?)
            } else {
                strict
            }
        }
        "JKS" => read_jks(bytes, password)
            .map_err(|e| anyhow!("{property}: {e}"))?
            .into_iter()
            .filter_map(|e| match e {
                JksEntry::Trusted(c) => Some(c),
                JksEntry::Key { .. } => None,
            })
            .collect(),
        other => bail!("{property}: truststore type {other} is not supported (PEM, PKCS12, JKS)"),
    };
    if certs.is_empty() {
        bail!("{property}: the {kind} truststore holds no trusted certificate");
    }
    Ok(certs)
}

enum JksEntry {
    Key { protected: Vec<u8>, chain: Vec<CertificateDer<'static>> },
    Trusted(CertificateDer<'static>),
}

/// A bounds-checked reader over a JKS file.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> anyhow::Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let end = end.ok_or_else(|| anyhow!("the JKS file is truncated or damaged"))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn u16(&mut self) -> anyhow::Result<usize> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize)
    }
    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    /// A Java `writeUTF` string (length-prefixed); only skipped or compared here.
    fn utf(&mut self) -> anyhow::Result<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
    fn certificate(&mut self, version: u32) -> anyhow::Result<CertificateDer<'static>> {
        if version == 2 && self.utf()? != b"X.509" {
            bail!("the JKS file holds a certificate that is not X.509");
        }
        let n = self.u32()? as usize;
        Ok(CertificateDer::from(self.take(n)?.to_vec()))
    }
}

fn password_bytes(password: &str) -> Vec<u8> {
    password.encode_utf16().flat_map(|u| u.to_be_bytes()).collect()
}

fn read_jks(bytes: &[u8], password: Option<&str>) -> anyhow::Result<Vec<JksEntry>> {
    let mut r = Reader { bytes, at: 0 };
    if r.u32()? != JKS_MAGIC {
        bail!("not a JKS keystore (bad magic number)");
    }
    let version = r.u32()?;
    if version != 1 && version != 2 {
        bail!("JKS version {version} is not supported");
    }
    let count = r.u32()?;
    let mut entries = Vec::new();
    for _ in 0..count {
        let tag = r.u32()?;
        r.utf()?; // alias
        r.take(8)?; // creation time
        match tag {
            1 => {
                let n = r.u32()? as usize;
                let protected = r.take(n)?.to_vec();
                let certs = r.u32()?;
                let mut chain = Vec::new();
                for _ in 0..certs {
                    chain.push(r.certificate(version)?);
                }
                entries.push(JksEntry::Key { protected, chain });
            }
            2 => entries.push(JksEntry::Trusted(r.certificate(version)?)),
            3 => bail!("the keystore holds a secret key entry (JCEKS): not supported"),
            other => bail!("unknown JKS entry tag {other}"),
        }
    }
    let body_end = r.at;
    let stored = r.take(SHA1_LEN)?;
    if let Some(password) = password {
        let mut input = password_bytes(password);
        input.extend_from_slice(b"Mighty Aphrodite");
        input.extend_from_slice(&bytes[..body_end]);
        if digest(&SHA1_FOR_LEGACY_USE_ONLY, &input).as_ref() != stored {
            bail!("Keystore was tampered with, or password was incorrect");
        }
    }
    Ok(entries)
}

/// The PKCS#8 key inside a JKS-protected key (Sun's `KeyProtector.recover`).
fn unprotect(encrypted_info: &[u8], password: &str) -> anyhow::Result<Vec<u8>> {
    const BAD: &str = "the JKS private key entry is damaged";
    let (_, info, _) = der(encrypted_info).ok_or_else(|| anyhow!(BAD))?;
    let (_, algorithm, rest) = der(info).ok_or_else(|| anyhow!(BAD))?;
    let (_, oid, _) = der(algorithm).ok_or_else(|| anyhow!(BAD))?;
    if oid != SUN_KEY_PROTECTOR_OID {
        bail!("the JKS private key is protected by an algorithm other than Sun's KeyProtector");
    }
    let (_, protected, _) = der(rest).ok_or_else(|| anyhow!(BAD))?;
    if protected.len() < 2 * SHA1_LEN {
        bail!(BAD);
    }
    let (salt, rest) = protected.split_at(SHA1_LEN);
    let (encrypted, check) = rest.split_at(rest.len() - SHA1_LEN);
    let password = password_bytes(password);
    let mut key = Vec::with_capacity(encrypted.len());
    let mut block = salt.to_vec();
    for chunk in encrypted.chunks(SHA1_LEN) {
        let mut input = password.clone();
        input.extend_from_slice(&block);
        block = digest(&SHA1_FOR_LEGACY_USE_ONLY, &input).as_ref().to_vec();
        key.extend(chunk.iter().zip(&block).map(|(c, k)| c ^ k));
    }
    let mut input = password;
    input.extend_from_slice(&key);
    if digest(&SHA1_FOR_LEGACY_USE_ONLY, &input).as_ref() != check {
        bail!("Cannot recover key: the JKS key password (ssl.key.password) is wrong");
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    //! Against stores written by Java 17's keytool (tests/fixtures/keystores: an RSA 2048 key
    //! `CN=broker,O=ketch`; store password `store-secret`, the JKS key's `key-secret`; the
    //! truststores hold that certificate, password `trust-secret`).
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/tests/fixtures/keystores/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn pem_cert() -> Vec<u8> {
        let text = String::from_utf8(fixture("broker-cert.pem")).unwrap();
        let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(body).unwrap()
    }

    #[test]
    fn keytool_keystores_give_their_key_and_certificate() {
        let p12 = fixture("broker.p12");
        let (chain, key) = key_and_chain("PKCS12", "k", &p12, Some("store-secret"), None).unwrap();
        assert_eq!(chain[0].as_ref(), pem_cert().as_slice());
        assert!(matches!(key, PrivateKeyDer::Pkcs8(_)));
        let jks = fixture("broker.jks");
        let (chain, key) = key_and_chain("JKS", "k", &jks, Some("store-secret"), Some("key-secret")).unwrap();
        assert_eq!(chain.len(), 1);
        // The key is usable: rustls accepts it with its certificate.
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let signer = provider.key_provider.load_private_key(key).unwrap();
        assert_eq!(signer.algorithm(), rustls::SignatureAlgorithm::RSA);

        // Wrong passwords, missing passwords, damaged files: errors naming the property.
        let err = |r: anyhow::Result<KeyAndChain>| r.map(|_| ()).expect_err("refused").to_string();
        assert!(err(key_and_chain("PKCS12", "ssl.keystore.location", &p12, Some("nope"), None))
            .contains("ssl.keystore.location"));
        assert!(err(key_and_chain("JKS", "k", &jks, Some("nope"), Some("key-secret"))).contains("password"));
        assert!(err(key_and_chain("JKS", "k", &jks, Some("store-secret"), None)).contains("ssl.key.password"));
        assert!(err(key_and_chain("JKS", "k", &jks, None, None)).contains("ssl.keystore.password"));
        for cut in [0, 3, 10, 40, jks.len() - 21, jks.len() - 1] {
            assert!(key_and_chain("JKS", "k", &jks[..cut], Some("store-secret"), Some("key-secret")).is_err());
        }
        let mut flipped = jks.clone();
        flipped[60] ^= 1;
        assert!(key_and_chain("JKS", "k", &flipped, Some("store-secret"), Some("key-secret")).is_err());
    }

    /// keytool -genkeypair -keyalg EC (secp256r1 into PKCS12, secp384r1 into JKS): Java writes the
    /// keys without their public key; they are completed and rustls signs with them.
    #[test]
    fn keytool_ec_keys_get_their_public_key() {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        for (kind, file, key_password) in
            [("PKCS12", "broker-ec256.p12", None), ("JKS", "broker-ec384.jks", Some("key-secret"))]
        {
            let bytes = fixture(file);
            let (chain, key) = key_and_chain(kind, "k", &bytes, Some("store-secret"), key_password).unwrap();
            assert_eq!(chain.len(), 1);
            let signer = provider.key_provider.load_private_key(key.clone_key()).expect(file);
            assert_eq!(signer.algorithm(), rustls::SignatureAlgorithm::ECDSA, "{file}");
            // The key matches its certificate (what a TLS server config checks).
            let certified = rustls::sign::CertifiedKey::from_der(chain, key, &provider);
            assert!(certified.is_ok(), "{file}: {certified:?}");
        }
        // Keys that have their public key, and others, pass unchanged.
        let rsa = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256);
        if let Ok(rsa) = rsa {
            assert_eq!(with_public_key(rsa.serialize_der()), rsa.serialize_der());
        }
        let ec = rcgen::KeyPair::generate().unwrap();
        assert_eq!(with_public_key(ec.serialize_der()), ec.serialize_der());
        assert_eq!(with_public_key(vec![0x30, 0x03, 0x02, 0x01]), vec![0x30, 0x03, 0x02, 0x01]);
    }

    #[test]
    fn keytool_truststores_give_their_certificates() {
        for (kind, file) in [("PKCS12", "trust.p12"), ("JKS", "trust.jks")] {
            let certs = trusted(kind, "t", &fixture(file), Some("trust-secret")).unwrap();
            assert_eq!(certs.len(), 1, "{kind}");
            assert_eq!(certs[0].as_ref(), pem_cert().as_slice(), "{kind}");
            assert!(trusted(kind, "t", &fixture(file), Some("wrong")).is_err(), "{kind}");
        }
        // A JKS truststore without a password is read unchecked, as Java does.
        assert_eq!(trusted("JKS", "t", &fixture("trust.jks"), None).unwrap().len(), 1);
        // A keystore without trusted entries is no truststore.
        assert!(trusted("JKS", "t", &fixture("broker.jks"), Some("store-secret")).is_err());
    }
}
