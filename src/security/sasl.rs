//! SASL authentication of SASL_PLAINTEXT and SASL_SSL connections, as Kafka's
//! `SaslServerAuthenticator`: the listener's configuration (`ListenerSasl`: enabled mechanisms,
//! PLAIN users from the JAAS config, OAUTHBEARER's validator (`oauth.rs`), `connections.max.reauth.ms`,
//! `sasl.server.max.receive.size`; a listener whose OAUTHBEARER accepts unsecured tokens warns
//! once when it is built, at start)
//! and one connection's state machine (`Authenticator`), which sees every frame until the client
//! is authenticated, and afterwards the frames of a re-authentication (KIP-368).
//!
//! The flow (KIP-43, KIP-152): an optional ApiVersions first (answered by the normal request
//! path), then SaslHandshake; with SaslHandshake v1 the tokens travel in SaslAuthenticate
//! requests, with v0 as raw length-prefixed frames (Kafka 4.1 still serves v0). Anything else
//! before authentication closes the connection; a failed authentication answers
//! SASL_AUTHENTICATION_FAILED (58) with Kafka's text and closes; an unknown mechanism answers
//! UNSUPPORTED_SASL_MECHANISM (33) with the enabled list and closes. Principal: `User:<name>`.
//!
//! Invariants: no request other than ApiVersions, SaslHandshake and SaslAuthenticate reaches a
//! handler before authentication; a frame is decoded only through `protocol::decode_request`
//! (guarded); passwords are compared in constant time (over their SHA-256 digests, so neither
//! content nor length leaks); a session past its lifetime is closed at its next request other
//! than a re-authentication.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::jaas;
use super::oauth::{self, OAuthConfig};
use super::scram::{self, Failure};
use super::scram_store::ScramStore;
use crate::config::{listener_key, listener_value, mechanism_value, Properties};
use crate::protocol;

pub const PLAIN: &str = "PLAIN";
const PLAIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// Kafka's `sasl.server.max.receive.size` default: the largest frame before authentication.
pub const DEFAULT_MAX_RECEIVE: usize = 524288;

/// `connection.failed.authentication.delay.ms` (Kafka's default 100 ms): how long a connection
/// whose authentication failed (SASL, or the TLS handshake) is held before its failure response
/// and close, so that a client guessing passwords gets one guess per delay per connection.
pub fn failed_authentication_delay(props: &Properties) -> Duration {
    let ms = crate::config::int_property(props, "connection.failed.authentication.delay.ms", 100, 0, i32::MAX as i64);
    Duration::from_millis(ms.unwrap_or(100) as u64)
}

/// Error codes of the SASL responses.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// One SASL listener's configuration. Its `Debug` shows the PLAIN users' names, not their
/// passwords.
#[derive(Clone)]
pub struct ListenerSasl {
    /// Enabled mechanisms, in configuration order (the handshake answers them in that order).
    pub mechanisms: Vec<String>,
    plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms` per mechanism (0: sessions do not expire).
    reauth_ms: BTreeMap<String, i64>,
    /// Largest frame accepted before authentication.
    pub max_receive: usize,
    /// OAUTHBEARER's validator, when enabled.
    oauth: Option<OAuthConfig>,
}

impl std::fmt::Debug for ListenerSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerSasl")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &super::redact::Keys(&self.plain_users))
            .field("reauth_ms", &self.reauth_ms)
            .field("max_receive", &self.max_receive)
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// Builds a SASL listener's configuration; refuses what Ketch cannot serve, naming the property.
pub fn listener_config(props: &Properties, listener: &str) -> anyhow::Result<ListenerSasl> {
    let (key, enabled) = listener_value(props, listener, "sasl.enabled.mechanisms")
        .unwrap_or(("sasl.enabled.mechanisms".into(), "GSSAPI"));
    let mechanisms: Vec<String> = enabled.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect();
    if mechanisms.is_empty() {
        bail!("listener {listener}: {key} is empty: no SASL mechanisms are enabled");
    }
    let mut plain_users = BTreeMap::new();
    let mut reauth_ms = BTreeMap::new();
    let mut oauth = None;
    for m in &mechanisms {
        let module = if m == PLAIN {
            PLAIN_MODULE
        } else if m == oauth::MECHANISM {
            oauth::LOGIN_MODULE
        } else if scram::Mechanism::from_name(m).is_some() {
            SCRAM_MODULE
        } else {
            bail!("listener {listener}: {key}={enabled}: mechanism {m} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)");
        };
        let jaas_key = listener_key(listener, &format!("{}.sasl.jaas.config", m.to_lowercase()));
        let mut jaas_options = BTreeMap::new();
        match props.get(&jaas_key) {
            Some(text) => {
                let entry = jaas::parse_single(text).map_err(|e| anyhow!("{jaas_key}: {e}"))?;
                if entry.class != module {
                    bail!("{jaas_key}: login module {} does not serve {m}: use {module}", entry.class);
                }
                jaas_options = entry.options.clone();
                if m == PLAIN {
                    for (k, v) in &entry.options {
                        if let Some(user) = k.strip_prefix("user_") {
                            plain_users.insert(user.to_string(), v.clone());
                        }
                    }
                }
            }
            // Kafka would look for a static JAAS file; PLAIN needs its users from somewhere.
            None if m == PLAIN => bail!(
                "listener {listener}: PLAIN is enabled but {jaas_key} is not set (e.g. {jaas_key}={PLAIN_MODULE} required user_alice=\"alice-secret\";)"
            ),
            None => {}
        }
        if m == oauth::MECHANISM {
            let config =
                oauth::config(props, listener, &jaas_options).map_err(|e| anyhow!("listener {listener}: {e}"))?;
            if config.accepts_unsecured_tokens() {
                tracing::warn!(
                    listener,
                    "OAUTHBEARER on listener {listener} accepts unsecured JWTs (alg none, unsigned: any client can \
                     name any principal); not suitable for production use: set \
                     listener.name.{}.oauthbearer.sasl.server.callback.handler.class to {} and \
                     sasl.oauthbearer.jwks.endpoint.url",
                    listener.to_lowercase(),
                    oauth::JWKS_HANDLERS[0]
                );
            }
            oauth = Some(config);
        }
        let (k, v) = mechanism_value(props, listener, m, "connections.max.reauth.ms").unwrap_or_default();
        let ms = if v.trim().is_empty() {
            0
        } else {
            v.trim().parse::<i64>().map_err(|_| anyhow!("{k}={v} is not a number"))?
        };
        reauth_ms.insert(m.clone(), ms.max(0));
    }
    let max_receive = match listener_value(props, listener, "sasl.server.max.receive.size") {
        Some((k, v)) => v.trim().parse::<usize>().map_err(|_| anyhow!("{k}={v} is not a size"))?,
        None => DEFAULT_MAX_RECEIVE,
    };
    Ok(ListenerSasl { mechanisms, plain_users, reauth_ms, max_receive, oauth })
}

impl ListenerSasl {
    /// PLAIN's check, constant time over the digests; an unknown user costs the same.
    fn plain_ok(&self, user: &str, password: &str) -> bool {
        let given = Sha256::digest(password.as_bytes());
        match self.plain_users.get(user) {
            Some(expected) => bool::from(Sha256::digest(expected.as_bytes()).ct_eq(&given)),
            None => {
                let _ = Sha256::digest(b"").ct_eq(&given);
                false
            }
        }
    }
}

/// What the connection does with a frame.
pub enum Step {
    /// Not SASL's: the normal request path handles it.
    Pass,
    /// Write this frame (length prefix included); close afterwards if `close`.
    Reply { out: BytesMut, close: bool },
    /// Close without a word (Kafka closes on these too).
    Close(String),
}

enum Mech {
    Plain,
    Scram(Box<scram::Server>),
    OAuth(oauth::Server),
}

enum Phase {
    /// Nothing received yet: ApiVersions or SaslHandshake may come.
    Initial,
    /// ApiVersions answered: SaslHandshake must come.
    Versioned,
    /// Handshake done: tokens come (raw frames with handshake v0).
    Exchange {
        mechanism: String,
        mech: Mech,
        raw: bool,
    },
    /// Re-authentication with another mechanism than the session's: refused at the next frame.
    BadReauthMechanism(String),
    Authenticated,
}

/// One token's evaluation: the challenge to send, the user once authenticated, and the
/// credential's expiry in epoch milliseconds when it has one (OAUTHBEARER, delegation tokens).
type Evaluated = (Vec<u8>, Option<String>, Option<i64>);

/// One connection's SASL state.
pub struct Authenticator {
    config: Arc<ListenerSasl>,
    phase: Phase,
    principal: Option<String>,
    /// Whether the principal logged in with a delegation token (it may not manage tokens).
    token_authenticated: bool,
    mechanism: Option<String>,
    reauthenticating: bool,
    supports_reauth: bool,
    expires: Option<Instant>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A failed authentication: SASL_AUTHENTICATION_FAILED with `message`, then the connection
/// closes (closed at once in the legacy flow, which has no response to carry it).
fn failed(reply_to: Option<(i16, i32)>, message: String) -> Result<Step, Step> {
    let Some((version, correlation_id)) = reply_to else { return Err(Step::Close(message)) };
    let response = SaslAuthenticateResponse::default()
        .with_error_code(SASL_AUTHENTICATION_FAILED)
        .with_error_message(Some(text(&message)));
    let out = encode(ApiKey::SaslAuthenticate, version, correlation_id, ResponseKind::SaslAuthenticate(response))?;
    Ok(Step::Reply { out, close: true })
}

fn encode(api_key: ApiKey, version: i16, correlation_id: i32, body: ResponseKind) -> Result<BytesMut, Step> {
    protocol::encode_response(api_key, version, correlation_id, &body)
        .map_err(|e| Step::Close(format!("cannot encode the {api_key:?} response: {e}")))
}

impl Authenticator {
    pub fn new(config: Arc<ListenerSasl>) -> Authenticator {
        Authenticator {
            config,
            phase: Phase::Initial,
            principal: None,
            token_authenticated: false,
            mechanism: None,
            reauthenticating: false,
            supports_reauth: false,
            expires: None,
        }
    }

    /// `User:<name>` once authenticated.
    pub fn principal(&self) -> Option<&str> {
        matches!(self.phase, Phase::Authenticated).then_some(self.principal.as_deref()).flatten()
    }

    /// Whether the principal logged in with a delegation token (Kafka's `tokenAuthenticated`).
    pub fn token_authenticated(&self) -> bool {
        self.token_authenticated
    }

    /// The largest frame the connection may read now.
    pub fn max_frame(&self, full: usize) -> usize {
        if self.principal.is_some() {
            full
        } else {
            self.config.max_receive.min(full)
        }
    }

    fn during(&self) -> &'static str {
        if self.reauthenticating {
            "re-authentication"
        } else {
            "authentication"
        }
    }

    /// Looks at one frame (the bytes after its length prefix).
    pub fn on_frame(&mut self, frame: &Bytes, store: &ScramStore, now: Instant) -> Step {
        match self.step(frame, store, now) {
            Ok(step) | Err(step) => step,
        }
    }

    fn step(&mut self, frame: &Bytes, store: &ScramStore, now: Instant) -> Result<Step, Step> {
        if let Phase::Exchange { raw: true, .. } = self.phase {
            return self.token(frame, None, store, now);
        }
        if let Phase::BadReauthMechanism(why) = &self.phase {
            return Err(Step::Close(why.clone()));
        }
        let Ok((raw_key, version, _)) = protocol::peek_header(frame) else {
            return Err(Step::Close("a frame too short for a request header before authentication".into()));
        };
        let api_key = ApiKey::try_from(raw_key).ok();
        match (&self.phase, api_key) {
            (Phase::Authenticated, Some(ApiKey::SaslHandshake)) if self.supports_reauth => {
                self.reauthenticating = true;
                self.handshake(frame)
            }
            (Phase::Authenticated, _) => match self.expires {
                Some(at) if now >= at => Err(Step::Close("the session expired (connections.max.reauth.ms)".into())),
                _ => Ok(Step::Pass),
            },
            (Phase::Initial, Some(ApiKey::ApiVersions)) => {
                // A version we do not serve is answered (KIP-511) and the client may ask again.
                if crate::handlers::versions::is_served(ApiKey::ApiVersions, version) {
                    self.phase = Phase::Versioned;
                }
                Ok(Step::Pass)
            }
            (Phase::Initial | Phase::Versioned, Some(ApiKey::SaslHandshake)) => self.handshake(frame),
            (Phase::Exchange { .. }, Some(ApiKey::SaslAuthenticate)) => {
                let request = protocol::decode_request(frame.clone())
                    .map_err(|e| Step::Close(format!("bad SaslAuthenticate request: {e}")))?;
                let RequestKind::SaslAuthenticate(body) = request.body else {
                    return Err(Step::Close("not a SaslAuthenticate request".into()));
                };
                let reply_to = (request.version, request.header.correlation_id);
                self.token(&body.auth_bytes, Some(reply_to), store, now)
            }
            (_, key) => Err(Step::Close(format!(
                "{key:?} (api key {raw_key}) during SASL {}: only ApiVersions, SaslHandshake and SaslAuthenticate are accepted",
                self.during()
            ))),
        }
    }

    fn handshake(&mut self, frame: &Bytes) -> Result<Step, Step> {
        let request = protocol::decode_request(frame.clone())
            .map_err(|e| Step::Close(format!("bad SaslHandshake request: {e}")))?;
        let RequestKind::SaslHandshake(body) = request.body else {
            return Err(Step::Close("not a SaslHandshake request".into()));
        };
        let (version, correlation_id) = (request.version, request.header.correlation_id);
        let wanted = body.mechanism.as_str().to_string();
        let enabled = self.config.mechanisms.contains(&wanted);
        let response = SaslHandshakeResponse::default()
            .with_error_code(if enabled { 0 } else { UNSUPPORTED_SASL_MECHANISM })
            .with_mechanisms(self.config.mechanisms.iter().map(|m| text(m)).collect());
        let out = encode(ApiKey::SaslHandshake, version, correlation_id, ResponseKind::SaslHandshake(response))?;
        if !enabled {
            tracing::debug!(mechanism = %wanted, "SASL mechanism requested by client is not supported");
            return Ok(Step::Reply { out, close: true });
        }
        if self.reauthenticating && self.mechanism.as_deref() != Some(wanted.as_str()) {
            let old = self.mechanism.clone().unwrap_or_default();
            self.phase = Phase::BadReauthMechanism(format!(
                "SASL mechanism '{wanted}' requested by client is not supported for re-authentication of mechanism '{old}'"
            ));
            return Ok(Step::Reply { out, close: false });
        }
        let mech = match scram::Mechanism::from_name(&wanted) {
            Some(m) => Mech::Scram(Box::new(scram::Server::new(m))),
            None if wanted == oauth::MECHANISM => Mech::OAuth(oauth::Server::default()),
            None => Mech::Plain,
        };
        self.phase = Phase::Exchange { mechanism: wanted, mech, raw: version == 0 };
        Ok(Step::Reply { out, close: false })
    }

    /// One token of the exchange; `reply_to` is (version, correlation id) of the
    /// SaslAuthenticate request carrying it, `None` for a raw v0 token.
    fn token(
        &mut self,
        token: &[u8],
        reply_to: Option<(i16, i32)>,
        store: &ScramStore,
        now: Instant,
    ) -> Result<Step, Step> {
        let Phase::Exchange { mechanism, mech, .. } = &mut self.phase else {
            return Err(Step::Close("no SASL exchange in progress".into()));
        };
        let mechanism = mechanism.clone();
        let result: Result<Evaluated, Failure> = match mech {
            Mech::Plain => plain(&self.config, token).map(|user| (Vec::new(), Some(user), None)),
            Mech::Scram(server) => {
                let m = scram::Mechanism::from_name(&mechanism).expect("a SCRAM mechanism");
                server
                    .evaluate_with_tokens(token, |user| store.lookup(user, m), |id| store.token_login(id, m))
                    .map(|out| (out, server.user.clone(), server.token_expiry_ms))
            }
            Mech::OAuth(server) => {
                let config = self.config.oauth.as_ref().expect("OAUTHBEARER is enabled, so configured");
                match server.evaluate(config, token, oauth::now_ms()) {
                    Ok(oauth::Outcome::Challenge(json)) => Ok((json, None, None)),
                    Ok(oauth::Outcome::Authenticated(t)) => Ok((Vec::new(), Some(t.principal), Some(t.expires_ms))),
                    Err(failure) => Err(failure),
                }
            }
        };
        let (challenge, user, credential_expires_ms) = match result {
            Ok(ok) => ok,
            Err(failure) => {
                let message = match failure {
                    Failure::Reported(m) => m,
                    Failure::Generic(why) => {
                        tracing::debug!(%mechanism, %why, "SASL authentication failed");
                        format!(
                            "Authentication failed during {} due to invalid credentials with SASL mechanism {mechanism}",
                            self.during()
                        )
                    }
                };
                return failed(reply_to, message);
            }
        };
        let mut lifetime_ms = 0;
        if let Some(user) = user {
            let principal = format!("User:{user}");
            if self.reauthenticating && self.principal.as_deref() != Some(principal.as_str()) {
                let old = self.principal.clone().unwrap_or_default();
                let message = format!("Cannot change principals during re-authentication from {old}: {principal}");
                return failed(reply_to, message);
            }
            lifetime_ms = session_lifetime_ms(
                self.config.reauth_ms.get(&mechanism).copied().unwrap_or(0),
                credential_expires_ms,
                oauth::now_ms(),
            );
            let expiring = lifetime_ms > 0 || credential_expires_ms.is_some();
            self.expires = expiring.then(|| now + Duration::from_millis(lifetime_ms as u64));
            if let Some((version, _)) = reply_to {
                if !self.reauthenticating {
                    self.supports_reauth = version > 0;
                }
            }
            tracing::debug!(%principal, %mechanism, reauthentication = self.reauthenticating, "SASL authenticated");
            self.token_authenticated = matches!(mech, Mech::Scram(server) if server.token_expiry_ms.is_some());
            self.principal = Some(principal);
            self.mechanism = Some(mechanism);
            self.reauthenticating = false;
            self.phase = Phase::Authenticated;
        }
        let out = match reply_to {
            None => {
                let mut out = BytesMut::with_capacity(4 + challenge.len());
                out.extend_from_slice(&(challenge.len() as u32).to_be_bytes());
                out.extend_from_slice(&challenge);
                out
            }
            Some((version, correlation_id)) => {
                let response = SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(challenge))
                    .with_session_lifetime_ms(lifetime_ms);
                encode(ApiKey::SaslAuthenticate, version, correlation_id, ResponseKind::SaslAuthenticate(response))?
            }
        };
        Ok(Step::Reply { out, close: false })
    }
}

/// The session lifetime returned to the client (Kafka's `calcCompletionTimesAndReturnSessionLifetimeMs`):
/// `connections.max.reauth.ms` when positive, the credential's remaining life when it has an expiry
/// (OAUTHBEARER), the smaller of the two when both; 0 (no expiry) otherwise.
fn session_lifetime_ms(max_reauth_ms: i64, credential_expires_ms: Option<i64>, now_ms: i64) -> i64 {
    match credential_expires_ms {
        None => max_reauth_ms.max(0),
        Some(exp) if max_reauth_ms <= 0 => (exp - now_ms).max(0),
        Some(exp) => (exp - now_ms).min(max_reauth_ms).max(0),
    }
}

/// SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer`: `authzid NUL user NUL password`.
fn plain(config: &ListenerSasl, token: &[u8]) -> Result<String, Failure> {
    let message = String::from_utf8_lossy(token);
    let tokens: Vec<&str> = message.splitn(4, '\u{0}').collect();
    if tokens.len() != 3 {
        return Err(Failure::Reported(format!("Invalid SASL/PLAIN response: expected 3 tokens, got {}", tokens.len())));
    }
    let (authzid, user, password) = (tokens[0], tokens[1], tokens[2]);
    if user.is_empty() {
        return Err(Failure::Reported("Authentication failed: username not specified".into()));
    }
    if password.is_empty() {
        return Err(Failure::Reported("Authentication failed: password not specified".into()));
    }
    if !config.plain_ok(user, password) {
        return Err(Failure::Reported("Authentication failed: Invalid username or password".into()));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(Failure::Reported(
            "Authentication failed: Client requested an authorization id that is different from username".into(),
        ));
    }
    Ok(user.to_string())
}

#[cfg(test)]
mod tests;
