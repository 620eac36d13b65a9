//! JWKS: the keys OAUTHBEARER tokens are checked against (`sasl.oauthbearer.jwks.endpoint.url`).
//!
//! Owns: a JWKS document (RFC 7517) read into the keys Ketch can verify with (RSA; EC P-256 and
//! P-384; other keys skipped, as a key resolver skips them), and the two sources Kafka reads
//! them from:
//! - a `file:` URL: read at startup and again when the file's modification time changes
//!   (looked at, at most once a second, when a token is checked), as Kafka 4.1's CachedFile;
//! - an `http:` / `https:` URL, as Kafka's RefreshingHttpsJwks: fetched at startup (a failure
//!   fails the start, as Kafka's `init()` does), then every
//!   `sasl.oauthbearer.jwks.endpoint.refresh.ms` (1 h) by a refresher thread, retried with
//!   backoff from `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms` (100 ms) up to
//!   `...retry.backoff.max.ms` (10 s). A token naming a key id the set does not hold asks for an
//!   early refresh (at most one a second) and is refused this time, as in Kafka. TLS trusts the
//!   truststore named in the OAUTHBEARER JAAS options (`ssl.truststore.location`, `.type`,
//!   `.password`, or inline `ssl.truststore.certificates`; Kafka's JaasOptionsUtils), else
//!   Mozilla's roots (Java's would be its cacerts).
//!
//! Invariants: a failed read or fetch keeps the keys in force (logged); a fetched document is
//! at most `MAX_DOCUMENT_BYTES`; the refresher thread ends once its listener's configuration is
//! dropped.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, bail};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use serde_json::Value;

use super::oauth::b64;

/// How often a JWKS file's modification time is looked at.
pub(super) const JWKS_RECHECK: Duration = Duration::from_secs(1);
/// The largest JWKS document fetched (an identity provider's holds a few keys: a few KiB).
const MAX_DOCUMENT_BYTES: u64 = 1 << 20;
/// The shortest time between two refreshes asked by tokens naming unknown key ids.
const EXPEDITE_INTERVAL: Duration = Duration::from_secs(1);
/// One fetch's time limit (connect, TLS, the whole response).
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a listener's keys come from.
#[derive(Debug)]
pub(super) enum JwksSource {
    File(JwksFile),
    Http(JwksHttp),
}

impl JwksSource {
    /// The source `url` names (`key` is its property, for errors); `jaas` holds the options of
    /// the OAUTHBEARER JAAS line (the endpoint's truststore), `setting` the listener's other
    /// `sasl.oauthbearer.*` values.
    pub(super) fn open(
        key: &str,
        url: &str,
        jaas: &BTreeMap<String, String>,
        setting: &dyn Fn(&str) -> Option<(String, String)>,
    ) -> anyhow::Result<JwksSource> {
        if let Some(path) = url.strip_prefix("file://").or_else(|| url.strip_prefix("file:")) {
            return Ok(JwksSource::File(JwksFile::open(PathBuf::from(path)).map_err(|e| anyhow!("{key}={url}: {e}"))?));
        }
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            bail!("{key}={url}: expected a file:, http: or https: URL");
        }
        let ms = |name: &str, default: u64| -> anyhow::Result<Duration> {
            match setting(name) {
                None => Ok(Duration::from_millis(default)),
                Some((k, v)) => match v.trim().parse::<u64>() {
                    Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
                    _ => bail!("{k}={v}: expected a positive number of milliseconds"),
                },
            }
        };
        let timing = Timing {
            refresh: ms("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000)?,
            backoff: ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100)?,
            backoff_max: ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000)?,
        };
        let roots = truststore(jaas)?;
        let http = JwksHttp::open(url, roots, timing).map_err(|e| anyhow!("{key}={url}: {e:#}"))?;
        Ok(JwksSource::Http(http))
    }

    /// The keys in force.
    pub(super) fn current(&self) -> Arc<Vec<Jwk>> {
        match self {
            JwksSource::File(f) => f.current(),
            JwksSource::Http(h) => h.shared.keys.read().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }

    /// A token named key id `kid`, which the keys in force do not hold: an endpoint is asked
    /// again soon (a file is looked at anyway).
    pub(super) fn missing(&self, kid: Option<&str>) {
        if let JwksSource::Http(h) = self {
            let mut last = h.shared.expedited.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|t| t.elapsed() < EXPEDITE_INTERVAL) {
                return;
            }
            *last = Some(Instant::now());
            tracing::debug!(url = %h.shared.url, kid = ?kid.map(|k| k.chars().take(64).collect::<String>()), "JWKS: unknown key id, refreshing");
            let _ = h.shared.wake.try_send(());
        }
    }
}

/// The endpoint's truststore from the OAUTHBEARER JAAS options, if they name one.
fn truststore(jaas: &BTreeMap<String, String>) -> anyhow::Result<Option<Vec<CertificateDer<'static>>>> {
    let option = |k: &str| jaas.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    if let Some(text) = option("ssl.truststore.certificates") {
        return pem_certificates("ssl.truststore.certificates", text.as_bytes()).map(Some);
    }
    let Some(path) = option("ssl.truststore.location") else { return Ok(None) };
    let key = "ssl.truststore.location";
    let bytes = std::fs::read(path).map_err(|e| anyhow!("{key}={path} (OAUTHBEARER JAAS option): {e}"))?;
    let kind = match option("ssl.truststore.type") {
        Some(t) => t.to_ascii_uppercase(),
        None if bytes.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) => "JKS".into(),
        None if bytes.first() == Some(&0x30) => "PKCS12".into(),
        None => "PEM".into(),
    };
    match kind.as_str() {
        "PEM" => pem_certificates(key, &bytes).map(Some),
        kind => super::keystore::trusted(kind, key, &bytes, option("ssl.truststore.password")).map(Some),
    }
}

fn pem_certificates(key: &str, pem: &[u8]) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> =
        CertificateDer::pem_slice_iter(pem).collect::<Result<_, _>>().map_err(|e| anyhow!("{key}: {e}"))?;
    if certs.is_empty() {
        bail!("{key}: no PEM certificate");
    }
    Ok(certs)
}

/// An http(s) JWKS endpoint and the thread that keeps its keys fresh.
#[derive(Debug)]
pub(super) struct JwksHttp {
    shared: Arc<HttpShared>,
}

#[derive(Debug)]
struct HttpShared {
    url: String,
    keys: RwLock<Arc<Vec<Jwk>>>,
    /// When a token last asked for an early refresh.
    expedited: Mutex<Option<Instant>>,
    /// Wakes the refresher; dropped with this, which ends it.
    wake: SyncSender<()>,
}

#[derive(Debug, Clone, Copy)]
struct Timing {
    refresh: Duration,
    backoff: Duration,
    backoff_max: Duration,
}

impl JwksHttp {
    fn open(url: &str, roots: Option<Vec<CertificateDer<'static>>>, timing: Timing) -> anyhow::Result<JwksHttp> {
        let agent = agent(roots);
        let keys = fetch(&agent, url)?;
        tracing::info!(url, keys = keys.len(), refresh = ?timing.refresh, "JWKS fetched");
        let (wake, woken) = sync_channel(1);
        let shared = Arc::new(HttpShared {
            url: url.to_string(),
            keys: RwLock::new(Arc::new(keys)),
            expedited: Mutex::new(None),
            wake,
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("jwks-refresh".into())
            .spawn(move || refresher(weak, woken, agent, timing))
            .map_err(|e| anyhow!("cannot start the JWKS refresher: {e}"))?;
        Ok(JwksHttp { shared })
    }
}

fn agent(roots: Option<Vec<CertificateDer<'static>>>) -> ureq::Agent {
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(roots) = roots {
        let certs = roots.iter().map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned()).collect();
        tls = tls.root_certs(ureq::tls::RootCerts::Specific(Arc::new(certs)));
    }
    ureq::Agent::config_builder().tls_config(tls.build()).timeout_global(Some(FETCH_TIMEOUT)).build().into()
}

fn fetch(agent: &ureq::Agent, url: &str) -> anyhow::Result<Vec<Jwk>> {
    let mut response = agent.get(url).call().map_err(|e| anyhow!("GET {url}: {e}"))?;
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_DOCUMENT_BYTES)
        .read_to_vec()
        .map_err(|e| anyhow!("GET {url}: {e}"))?;
    parse_jwks(&body)
}

/// Refreshes the keys every `timing.refresh`, or when woken; ends when `shared` is gone.
fn refresher(shared: Weak<HttpShared>, woken: Receiver<()>, agent: ureq::Agent, timing: Timing) {
    loop {
        if let Err(RecvTimeoutError::Disconnected) = woken.recv_timeout(timing.refresh) {
            return;
        }
        let Some(url) = shared.upgrade().map(|s| s.url.clone()) else { return };
        let mut backoff = timing.backoff;
        let keys = loop {
            match fetch(&agent, &url) {
                Ok(keys) => break Some(keys),
                Err(e) if backoff < timing.backoff_max => {
                    tracing::debug!(%url, error = %e, ?backoff, "JWKS refresh failed; retrying");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(timing.backoff_max);
                }
                Err(e) => {
                    tracing::warn!(%url, error = %e, "JWKS refresh failed; keeping the keys in force");
                    break None;
                }
            }
        };
        let Some(shared) = shared.upgrade() else { return };
        if let Some(keys) = keys {
            tracing::info!(%url, keys = keys.len(), "JWKS refreshed");
            *shared.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
        }
    }
}

/// One key of a JWKS document that Ketch can verify with.
#[derive(Debug)]
pub(super) struct Jwk {
    kid: Option<String>,
    alg: Option<String>,
    key: KeyMaterial,
}

#[derive(Debug)]
enum KeyMaterial {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (0x04 || x || y) on `curve` ("P-256" or "P-384").
    Ec {
        curve: String,
        point: Vec<u8>,
    },
}

impl Jwk {
    pub(super) fn fits(&self, alg: &str, kid: Option<&str>) -> bool {
        let kind_ok = match (&self.key, alg) {
            (KeyMaterial::Rsa { .. }, "RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512") => true,
            (KeyMaterial::Ec { curve, .. }, "ES256") => curve == "P-256",
            (KeyMaterial::Ec { curve, .. }, "ES384") => curve == "P-384",
            _ => false,
        };
        let kid_ok = match (kid, &self.kid) {
            (Some(want), Some(have)) => want == have,
            (Some(_), None) => true,
            (None, _) => true,
        };
        kind_ok && kid_ok && self.alg.as_deref().is_none_or(|a| a == alg)
    }

    pub(super) fn verify(&self, alg: &str, message: &[u8], signature: &[u8]) -> bool {
        use ring::signature as sig;
        match &self.key {
            KeyMaterial::Rsa { n, e } => {
                let params: &sig::RsaParameters = match alg {
                    "RS256" => &sig::RSA_PKCS1_2048_8192_SHA256,
                    "RS384" => &sig::RSA_PKCS1_2048_8192_SHA384,
                    "RS512" => &sig::RSA_PKCS1_2048_8192_SHA512,
                    "PS256" => &sig::RSA_PSS_2048_8192_SHA256,
                    "PS384" => &sig::RSA_PSS_2048_8192_SHA384,
                    "PS512" => &sig::RSA_PSS_2048_8192_SHA512,
                    _ => return false,
                };
                sig::RsaPublicKeyComponents { n, e }.verify(params, message, signature).is_ok()
            }
            KeyMaterial::Ec { point, .. } => {
                let params: &dyn sig::VerificationAlgorithm = match alg {
                    "ES256" => &sig::ECDSA_P256_SHA256_FIXED,
                    "ES384" => &sig::ECDSA_P384_SHA384_FIXED,
                    _ => return false,
                };
                sig::UnparsedPublicKey::new(params, point).verify(message, signature).is_ok()
            }
        }
    }
}

/// Parses a JWKS document; keys Ketch cannot use (other types, curves, encryption keys) are
/// skipped, as a key resolver skips them.
pub(super) fn parse_jwks(text: &[u8]) -> anyhow::Result<Vec<Jwk>> {
    let doc: Value = serde_json::from_slice(text).map_err(|e| anyhow!("not a JWKS document: {e}"))?;
    let keys = doc.get("keys").and_then(Value::as_array).ok_or_else(|| anyhow!("not a JWKS document: no keys"))?;
    let mut out = Vec::new();
    for k in keys {
        let field = |name: &str| k.get(name).and_then(Value::as_str);
        if field("use").is_some_and(|u| u != "sig") {
            continue;
        }
        let key = match field("kty") {
            Some("RSA") => match (field("n").and_then(b64), field("e").and_then(b64)) {
                (Some(n), Some(e)) => KeyMaterial::Rsa { n, e },
                _ => bail!("an RSA key without n and e"),
            },
            Some("EC") => {
                let curve = field("crv").unwrap_or_default().to_string();
                let size = match curve.as_str() {
                    "P-256" => 32,
                    "P-384" => 48,
                    _ => continue,
                };
                match (field("x").and_then(b64), field("y").and_then(b64)) {
                    (Some(x), Some(y)) if x.len() == size && y.len() == size => {
                        let mut point = vec![4u8];
                        point.extend_from_slice(&x);
                        point.extend_from_slice(&y);
                        KeyMaterial::Ec { curve, point }
                    }
                    _ => bail!("an EC key with a bad x or y"),
                }
            }
            _ => continue,
        };
        out.push(Jwk { kid: field("kid").map(String::from), alg: field("alg").map(String::from), key });
    }
    Ok(out)
}

/// A JWKS file, read again when its modification time changes (looked at most once a second).
#[derive(Debug)]
pub(super) struct JwksFile {
    path: PathBuf,
    state: Mutex<JwksState>,
}

#[derive(Debug)]
struct JwksState {
    modified: Option<SystemTime>,
    checked: Instant,
    keys: Arc<Vec<Jwk>>,
}

impl JwksFile {
    pub(super) fn open(path: PathBuf) -> anyhow::Result<JwksFile> {
        let text = std::fs::read(&path).map_err(|e| anyhow!("cannot read {}: {e}", path.display()))?;
        let keys = parse_jwks(&text)?;
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        let state = JwksState { modified, checked: Instant::now(), keys: Arc::new(keys) };
        Ok(JwksFile { path, state: Mutex::new(state) })
    }

    fn current(&self) -> Arc<Vec<Jwk>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.checked.elapsed() >= JWKS_RECHECK {
            state.checked = Instant::now();
            let modified = std::fs::metadata(&self.path).and_then(|m| m.modified()).ok();
            if modified != state.modified {
                match std::fs::read(&self.path).map_err(anyhow::Error::from).and_then(|t| parse_jwks(&t)) {
                    Ok(keys) => {
                        tracing::info!(path = %self.path.display(), keys = keys.len(), "JWKS file reloaded");
                        state.keys = Arc::new(keys);
                        state.modified = modified;
                    }
                    Err(e) => {
                        tracing::warn!(path = %self.path.display(), error = %e, "JWKS file unreadable; keeping its previous keys")
                    }
                }
            }
        }
        state.keys.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn document(kids: &[&str]) -> String {
        let keys: Vec<String> =
            kids.iter().map(|k| format!(r#"{{"kty":"RSA","kid":"{k}","n":"AQAB","e":"AQAB"}}"#)).collect();
        format!(r#"{{"keys":[{}]}}"#, keys.join(","))
    }

    /// An http endpoint serving `doc` (chunked, as identity providers often answer), counting requests.
    fn endpoint(doc: Arc<Mutex<String>>, served: Arc<AtomicUsize>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                served.fetch_add(1, Ordering::SeqCst);
                let body = doc.lock().unwrap().clone();
                let (a, b) = body.split_at(body.len() / 2);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\
                     Connection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                    a.len(),
                    b.len()
                );
            }
        });
        url
    }

    #[test]
    fn an_http_endpoint_is_fetched_at_start_and_again_for_an_unknown_key_id() {
        let doc = Arc::new(Mutex::new(document(&["a"])));
        let served = Arc::new(AtomicUsize::new(0));
        let url = endpoint(doc.clone(), served.clone());
        let no_settings = |_: &str| None;
        let source = JwksSource::open("url", &url, &BTreeMap::new(), &no_settings).unwrap();
        assert_eq!(source.current().len(), 1);
        assert_eq!(served.load(Ordering::SeqCst), 1);
        *doc.lock().unwrap() = document(&["a", "b"]);
        source.missing(Some("b"));
        source.missing(Some("c")); // within a second of the first: no second refresh
        let deadline = Instant::now() + Duration::from_secs(10);
        while source.current().len() != 2 {
            assert!(Instant::now() < deadline, "the unknown key id did not bring a refresh");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(served.load(Ordering::SeqCst), 2, "one refresh for the two unknown ids");
        // An endpoint answering an error keeps the keys in force.
        *doc.lock().unwrap() = "not json".into();
        std::thread::sleep(EXPEDITE_INTERVAL);
        source.missing(Some("d"));
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(source.current().len(), 2);
        // Settings are checked; the refresher ends with its source.
        let bad = |name: &str| (name == "sasl.oauthbearer.jwks.endpoint.refresh.ms").then(|| (name.into(), "0".into()));
        assert!(JwksSource::open("url", &url, &BTreeMap::new(), &bad)
            .unwrap_err()
            .to_string()
            .contains("refresh.ms=0"));
        drop(source);
    }
}
