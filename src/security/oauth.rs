//! SASL/OAUTHBEARER (RFC 7628; Kafka's KIP-255 and KIP-768) as Kafka's `OAuthBearerSaslServer`:
//! the client's first message, the token's validation, and the listener's configuration.
//!
//! The exchange: the client sends `n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A`
//! (extensions are accepted, as Kafka's validators accept them). A valid token authenticates
//! `User:<principal claim>`; its `exp` is the credential's expiry, so the session lifetime the
//! broker returns (KIP-368) is the token's remaining life, capped by `connections.max.reauth.ms`.
//! An invalid token is answered with a JSON challenge (`{"status":"invalid_token"}`, or
//! `insufficient_scope` with the scope missing); the client replies `^A` and the authentication
//! fails with that JSON as its message. A malformed first message fails at once.
//!
//! Two validators, chosen as Kafka chooses its server callback handler
//! (`listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`):
//! - unsecured (Kafka's default, for development): `alg` "none", no signature, options from the
//!   JAAS line of `OAuthBearerLoginModule` (`unsecuredValidatorPrincipalClaimName`,
//!   `unsecuredValidatorScopeClaimName`, `unsecuredValidatorRequiredScope`,
//!   `unsecuredValidatorAllowableClockSkewMs`);
//! - `OAuthBearerValidatorCallbackHandler`: a signed JWT (RS256/384/512, PS256/384/512, ES256,
//!   ES384) checked against the keys of `sasl.oauthbearer.jwks.endpoint.url` (a `file:` URL; the
//!   file is read again when it changes, as Kafka 4.1 does), then `exp` and `iat` required, `nbf`,
//!   `sasl.oauthbearer.expected.audience` / `.expected.issuer`, the subject claim
//!   (`sasl.oauthbearer.sub.claim.name`) and `sasl.oauthbearer.clock.skew.seconds`.
//!
//! A listener with the unsecured validator logs one WARN line when it starts (not for
//! production: `OAuthConfig::accepts_unsecured_tokens`).
//!
//! Invariants: a token is never logged (only why it failed); every failure is an `Err` or a
//! challenge, never a panic; parsing is bounded by the frame (the pre-authentication frame limit
//! applies) and by serde_json's nesting limit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{anyhow, bail};
use base64::Engine;
use serde_json::Value;

use super::jwks::{Jwk, JwksSource};
use super::scram::Failure;
use crate::config::Properties;

pub const MECHANISM: &str = "OAUTHBEARER";
pub const LOGIN_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// The signed-token validators' class names (4.x, and the deprecated `secured` package's).
pub(crate) const JWKS_HANDLERS: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];
/// `sasl.oauthbearer.jwt.validator.class` values that mean "check the token against the JWKS".
/// (Kafka 4.1's default, DefaultJwtValidator, is built by the callback handler without its key
/// resolver and then checks no signature; Ketch checks it whichever of the two is named.)
const JWT_VALIDATORS: [&str; 2] = [
    "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
];
const UNSECURED_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// A validated token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub principal: String,
    /// The `exp` claim, in milliseconds since the epoch.
    pub expires_ms: i64,
}

/// Why a token is not valid: becomes the JSON challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub why: String,
    /// The required scope, when the token lacks part of it (`insufficient_scope`).
    pub scope: Option<String>,
}

fn invalid(why: impl Into<String>) -> Invalid {
    Invalid { why: why.into(), scope: None }
}

#[derive(Debug)]
enum Validator {
    Unsecured { principal_claim: String, scope_claim: String, required_scope: Vec<String>, skew_ms: i64 },
    Jwks(JwksValidator),
}

#[derive(Debug)]
struct JwksValidator {
    keys: JwksSource,
    audiences: Vec<String>,
    issuer: Option<String>,
    sub_claim: String,
    skew_s: i64,
}

/// One listener's OAUTHBEARER configuration.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    validator: Arc<Validator>,
}

impl OAuthConfig {
    /// Whether the listener takes unsecured JWTs (`alg` "none", no signature: anyone can name
    /// any principal): Kafka's default validator, `OAuthBearerUnsecuredValidatorCallbackHandler`,
    /// which its javadoc calls "not suitable for production use due to the use of unsecured JWT
    /// tokens". The listener's start warns of it (`sasl::listener_config`).
    pub fn accepts_unsecured_tokens(&self) -> bool {
        matches!(*self.validator, Validator::Unsecured { .. })
    }
}

/// `name` for the OAUTHBEARER callback handler of `listener`: the mechanism's prefix, the
/// listener's, then the broker's.
fn setting<'a>(props: &'a Properties, listener: &str, name: &str) -> Option<(String, &'a str)> {
    crate::config::mechanism_value(props, listener, MECHANISM, name)
}

/// Builds the listener's validator from its properties and its JAAS options.
pub fn config(props: &Properties, listener: &str, jaas: &BTreeMap<String, String>) -> anyhow::Result<OAuthConfig> {
    let handler = setting(props, listener, "sasl.server.callback.handler.class");
    let validator = match handler {
        None => unsecured(jaas)?,
        Some((_, class)) if class.trim() == UNSECURED_HANDLER => unsecured(jaas)?,
        Some((_, class)) if JWKS_HANDLERS.contains(&class.trim()) => Validator::Jwks(jwks(props, listener, jaas)?),
        Some((key, class)) => bail!(
            "{key}={class}: Ketch validates OAUTHBEARER tokens with {} (JWKS) or, when unset, unsecured tokens",
            JWKS_HANDLERS[0]
        ),
    };
    Ok(OAuthConfig { validator: Arc::new(validator) })
}

fn unsecured(jaas: &BTreeMap<String, String>) -> anyhow::Result<Validator> {
    let option = |name: &str| jaas.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let skew_ms = match option("unsecuredValidatorAllowableClockSkewMs") {
        None => 0,
        Some(v) => match v.parse::<i64>() {
            Ok(ms) if ms >= 0 => ms,
            _ => bail!("unsecuredValidatorAllowableClockSkewMs={v}: not a non-negative number of milliseconds"),
        },
    };
    Ok(Validator::Unsecured {
        principal_claim: option("unsecuredValidatorPrincipalClaimName").unwrap_or("sub").to_string(),
        scope_claim: option("unsecuredValidatorScopeClaimName").unwrap_or("scope").to_string(),
        required_scope: option("unsecuredValidatorRequiredScope")
            .map(|s| s.split(' ').filter(|x| !x.is_empty()).map(String::from).collect())
            .unwrap_or_default(),
        skew_ms,
    })
}

fn jwks(props: &Properties, listener: &str, jaas: &BTreeMap<String, String>) -> anyhow::Result<JwksValidator> {
    let get = |name: &str| setting(props, listener, name).map(|(k, v)| (k, v.trim().to_string()));
    let (key, url) = get("sasl.oauthbearer.jwks.endpoint.url")
        .ok_or_else(|| anyhow!("The OAuth configuration option sasl.oauthbearer.jwks.endpoint.url is required"))?;
    if let Some((k, class)) = get("sasl.oauthbearer.jwt.validator.class") {
        if !JWT_VALIDATORS.contains(&class.as_str()) {
            bail!("{k}={class}: Ketch validates signed tokens itself ({})", JWT_VALIDATORS.join(" or "));
        }
    }
    let keys = JwksSource::open(&key, &url, jaas, &get)?;
    let skew_s = match get("sasl.oauthbearer.clock.skew.seconds") {
        None => 30,
        Some((k, v)) => v.parse::<i64>().ok().filter(|s| *s >= 0).ok_or_else(|| anyhow!("{k}={v} is not a number"))?,
    };
    let audiences = get("sasl.oauthbearer.expected.audience")
        .map(|(_, v)| v.split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect())
        .unwrap_or_default();
    Ok(JwksValidator {
        keys,
        audiences,
        issuer: get("sasl.oauthbearer.expected.issuer").map(|(_, v)| v).filter(|v| !v.is_empty()),
        sub_claim: get("sasl.oauthbearer.sub.claim.name").map(|(_, v)| v).unwrap_or_else(|| "sub".into()),
        skew_s,
    })
}

/// One connection's OAUTHBEARER exchange.
#[derive(Default)]
pub struct Server {
    /// The JSON challenge sent for an invalid token: the client's `^A` then fails with it.
    error: Option<String>,
}

/// What a client message leads to.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Authenticated(Token),
    /// Send this challenge; the exchange goes on.
    Challenge(Vec<u8>),
}

impl Server {
    /// Evaluates one client message at wall-clock `now_ms`.
    pub fn evaluate(&mut self, config: &OAuthConfig, response: &[u8], now_ms: i64) -> Result<Outcome, Failure> {
        if response == [1u8] {
            if let Some(error) = self.error.take() {
                return Err(Failure::Reported(error));
            }
        }
        self.error = None;
        let first = parse_initial_response(response).map_err(Failure::Generic)?;
        let validated = match &*config.validator {
            Validator::Unsecured { principal_claim, scope_claim, required_scope, skew_ms } => {
                validate_unsecured(&first.token, principal_claim, scope_claim, required_scope, *skew_ms, now_ms)
            }
            Validator::Jwks(v) => v.validate(&first.token, now_ms),
        };
        let token = match validated {
            Ok(token) => token,
            Err(e) => {
                tracing::debug!(why = %e.why, "OAUTHBEARER token refused");
                let json = match &e.scope {
                    Some(scope) => format!("{{\"status\":\"insufficient_scope\", \"scope\":\"{scope}\"}}"),
                    None => "{\"status\":\"invalid_token\"}".to_string(),
                };
                self.error = Some(json.clone());
                return Ok(Outcome::Challenge(json.into_bytes()));
            }
        };
        if !first.authzid.is_empty() && first.authzid != token.principal {
            return Err(Failure::Reported(format!(
                "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                first.authzid, token.principal
            )));
        }
        Ok(Outcome::Authenticated(token))
    }
}

/// The parts of a client's first message Kafka uses. Its `Debug` hides the token (a bearer
/// credential) and the extensions' values.
#[derive(PartialEq, Eq)]
pub struct InitialResponse {
    pub authzid: String,
    pub token: String,
    pub extensions: BTreeMap<String, String>,
}

impl std::fmt::Debug for InitialResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use super::redact::{Hidden, Keys};
        f.debug_struct("InitialResponse")
            .field("authzid", &self.authzid)
            .field("token", &Hidden)
            .field("extensions", &Keys(&self.extensions))
            .finish()
    }
}

/// Parses `n,[a=authzid],^A(key=value^A)*^A` as Kafka's `OAuthBearerClientInitialResponse`.
pub fn parse_initial_response(response: &[u8]) -> Result<InitialResponse, String> {
    const BAD: &str = "Invalid OAUTHBEARER client first message";
    let text = std::str::from_utf8(response).map_err(|_| BAD.to_string())?;
    let rest = text.strip_prefix("n,").ok_or(BAD)?;
    let (gs2, rest) = rest.split_once(',').ok_or(BAD)?;
    let authzid = match gs2 {
        "" => String::new(),
        a => {
            let name = a.strip_prefix("a=").ok_or(BAD)?;
            let ok = !name.is_empty() && name.chars().all(|c| (c as u32) >= 1 && (c as u32) <= 0x7f);
            if !ok {
                return Err(BAD.into());
            }
            name.replace("=2C", ",").replace("=3D", "=")
        }
    };
    let body = rest.strip_prefix('\u{1}').and_then(|r| r.strip_suffix('\u{1}')).ok_or(BAD)?;
    let mut pairs = BTreeMap::new();
    if !body.is_empty() {
        let body = body.strip_suffix('\u{1}').ok_or(BAD)?;
        for pair in body.split('\u{1}') {
            let (k, v) = pair.split_once('=').ok_or(BAD)?;
            let key_ok = !k.is_empty() && k.chars().all(|c| c.is_ascii_alphabetic());
            let value_ok =
                !v.is_empty() && v.chars().all(|c| matches!(c, '\u{21}'..='\u{7e}' | ' ' | '\t' | '\r' | '\n'));
            if !key_ok || !value_ok {
                return Err(BAD.into());
            }
            pairs.insert(k.to_string(), v.to_string());
        }
    }
    let auth = pairs.remove("auth").ok_or_else(|| format!("{BAD}: 'auth' not specified"))?;
    let (scheme, token) = auth.split_once(' ').ok_or_else(|| format!("{BAD}: invalid 'auth' format"))?;
    let token = token.trim_start_matches(' ');
    let body_len = token.trim_end_matches('=').len();
    let token_ok = body_len > 0
        && token[..body_len].chars().all(|c| c.is_ascii_alphanumeric() || "-_~+/.".contains(c))
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !token_ok {
        return Err(format!("{BAD}: invalid 'auth' format"));
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(format!("Invalid scheme in OAUTHBEARER client first message: {scheme}"));
    }
    Ok(InitialResponse { authzid, token: token.to_string(), extensions: pairs })
}

/// Base64url (or standard base64) without padding, as JWS sections come.
pub(super) fn b64(section: &str) -> Option<Vec<u8>> {
    let normal: String = section.trim_end_matches('=').replace('-', "+").replace('_', "/");
    base64::engine::general_purpose::STANDARD_NO_PAD.decode(normal).ok()
}

fn json_object(section: &str) -> Result<serde_json::Map<String, Value>, Invalid> {
    let bytes = b64(section).ok_or_else(|| invalid("malformed Base64 URL encoded value"))?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(invalid("malformed JSON")),
    }
}

/// A time claim in milliseconds (seconds in the token, fractions allowed).
fn time_ms(claims: &serde_json::Map<String, Value>, name: &str) -> Result<Option<i64>, Invalid> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64().map(|s| (s * 1000.0).round() as i64)),
        Some(_) => Err(invalid(format!("The '{name}' claim was not of type Number"))),
    }
}

fn scopes(claims: &serde_json::Map<String, Value>, name: &str) -> Vec<String> {
    match claims.get(name) {
        Some(Value::String(s)) if !s.trim().is_empty() => vec![s.trim().to_string()],
        Some(Value::Array(items)) => {
            items.iter().filter_map(|v| v.as_str().map(str::trim).filter(|s| !s.is_empty()).map(String::from)).collect()
        }
        _ => Vec::new(),
    }
}

/// Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`.
fn validate_unsecured(
    token: &str,
    principal_claim: &str,
    scope_claim: &str,
    required_scope: &[String],
    skew_ms: i64,
    now_ms: i64,
) -> Result<Token, Invalid> {
    if token.contains("..") {
        return Err(invalid("Malformed compact serialization contains '..'"));
    }
    let sections: Vec<&str> = token.split('.').collect();
    if sections.len() != 3 {
        return Err(invalid("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values"));
    }
    let header = json_object(sections[0])?;
    let claims = json_object(sections[1])?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err(invalid("Unsecured JWS must have 'none' for an algorithm"));
    }
    if !sections[2].is_empty() {
        return Err(invalid("Unsecured JWS must not contain a digital signature"));
    }
    let exp = time_ms(&claims, "exp")?.ok_or_else(|| invalid("No expiration time in JWT"))?;
    let principal = match claims.get(principal_claim) {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) | None => {
            return Err(invalid(format!("No principal name in JWT claim: {principal_claim}")))
        }
        Some(_) => return Err(invalid(format!("The '{principal_claim}' claim was not of type String"))),
    };
    let iat = time_ms(&claims, "iat")?;
    if let Some(iat) = iat {
        if iat > now_ms + skew_ms {
            return Err(invalid("The Issued At value was after the indicated time plus allowable clock skew"));
        }
    }
    if now_ms - skew_ms >= exp {
        return Err(invalid("The indicated time minus allowable clock skew was on or after the Expiration Time value"));
    }
    if iat.is_some_and(|iat| exp <= iat) {
        return Err(invalid("The Expiration Time time was not after the Issued At time"));
    }
    let have = scopes(&claims, scope_claim);
    if let Some(missing) = required_scope.iter().find(|s| !have.contains(s)) {
        return Err(Invalid {
            why: format!("The provided scope ({have:?}) was missing a required scope ({missing})"),
            scope: Some(format!("[{}]", required_scope.join(", "))),
        });
    }
    Ok(Token { principal, expires_ms: exp })
}

impl JwksValidator {
    /// Kafka's `BrokerJwtValidator` (jose4j's checks, then the claims Kafka reads).
    fn validate(&self, token: &str, now_ms: i64) -> Result<Token, Invalid> {
        let token = token.trim();
        let sections: Vec<&str> = token.split('.').collect();
        if sections.len() != 3 || sections.iter().any(|s| s.is_empty()) {
            return Err(invalid("Malformed JWT provided; expected three sections (header, payload, and signature)"));
        }
        let header = json_object(sections[0])?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if alg.is_empty() || alg == "none" {
            return Err(invalid(format!("'{alg}' is not a permitted signature algorithm")));
        }
        let signature = b64(sections[2]).ok_or_else(|| invalid("malformed signature"))?;
        let signed = &token.as_bytes()[..sections[0].len() + 1 + sections[1].len()];
        let kid = header.get("kid").and_then(Value::as_str);
        let keys = self.keys.current();
        let candidates: Vec<&Jwk> = keys.iter().filter(|k| k.fits(alg, kid)).collect();
        if candidates.is_empty() {
            self.keys.missing(kid);
            return Err(invalid(format!("Unable to find a suitable verification key for JWS alg {alg} kid {kid:?}")));
        }
        if !candidates.iter().any(|k| k.verify(alg, signed, &signature)) {
            return Err(invalid("JWS signature is invalid"));
        }
        let claims = json_object(sections[1])?;
        let skew_ms = self.skew_s * 1000;
        let exp = time_ms(&claims, "exp")?.ok_or_else(|| invalid("No Expiration Time (exp) claim present"))?;
        let iat = time_ms(&claims, "iat")?;
        if iat.is_none() {
            return Err(invalid("No Issued At (iat) claim present"));
        }
        if now_ms - skew_ms >= exp {
            return Err(invalid("The JWT is no longer valid (exp)"));
        }
        if time_ms(&claims, "nbf")?.is_some_and(|nbf| now_ms + skew_ms < nbf) {
            return Err(invalid("The JWT is not yet valid (nbf)"));
        }
        let aud: Vec<&str> = match claims.get("aud") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            Some(_) => return Err(invalid("The aud claim is malformed")),
        };
        let aud_present = claims.get("aud").is_some_and(|a| !a.is_null());
        // (jose4j: a token naming an audience is refused when none is expected.)
        let aud_ok = aud.iter().any(|a| self.audiences.iter().any(|e| e == a));
        if (!self.audiences.is_empty() || aud_present) && !aud_ok {
            return Err(invalid(format!("Audience (aud) claim {aud:?} is not one of {:?}", self.audiences)));
        }
        if let Some(issuer) = &self.issuer {
            if claims.get("iss").and_then(Value::as_str) != Some(issuer.as_str()) {
                return Err(invalid(format!("Issuer (iss) claim is not {issuer}")));
            }
        }
        let principal = match claims.get(&self.sub_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            _ => return Err(invalid(format!("{} value must be non-empty", self.sub_claim))),
        };
        Ok(Token { principal, expires_ms: exp })
    }
}

/// How many usable keys a JWKS document holds (an error when it is not one): the entry of the
/// `jwt` fuzz target to the parser every JWKS source uses.
pub fn jwks_key_count(text: &[u8]) -> Result<usize, String> {
    super::jwks::parse_jwks(text).map(|keys| keys.len()).map_err(|e| e.to_string())
}

/// Wall-clock milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

#[cfg(test)]
mod tests;
