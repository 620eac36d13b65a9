//! Delegation tokens (KIP-48, KIP-373), decided as Kafka's `DelegationTokenControlManager` and
//! `KafkaApis` decide them: CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken,
//! DescribeDelegationToken, the periodic sweep of expired tokens, and what a token login is
//! checked against (`token_store.rs` keeps the tokens, `scram.rs` runs the login).
//!
//! A token is a DelegationTokenRecord (owner, requester, renewers, issue / max / expiry
//! timestamps, id). Its HMAC, the token's password, is never stored: it is HmacSHA512 of the
//! token id keyed with `delegation.token.secret.key`, computed again wherever it is needed (every
//! broker and controller of a cluster must share the key, as in Kafka). A token login is SCRAM
//! (either mechanism) with the `tokenauth=true` extension, the token id as user name and the
//! base64 HMAC as password; the session's principal is the token's owner, marked token
//! authenticated, and such a principal may not create, renew, expire or describe tokens.
//!
//! Everything here is pure: inputs are the tokens in force, the settings and the clock; outputs
//! are the records to write and the answer. Invariants: a refused request writes nothing; a
//! token's expiry never passes its max timestamp; timestamps saturate instead of overflowing.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse, RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::config::{Properties, SecurityProtocol};
use crate::metadata::records::{DelegationTokenRecord, MetadataRecord, RemoveDelegationTokenRecord};

/// The tokens in force, by id.
pub type Tokens = BTreeMap<String, DelegationTokenRecord>;

/// Kafka's `MetadataVersion.IBP_3_6_IV2`, the first with delegation tokens in the metadata log.
pub const TOKENS_METADATA_VERSION: i16 = 14;

/// Kafka's `DelegationTokenManager.ErrorTimestamp`: what a broker answers a refused renewal or
/// expiry with.
pub const ERROR_TIMESTAMP_MS: i64 = -1;

/// The `delegation.token.*` configs. Its `Debug` hides the secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSettings {
    /// `delegation.token.secret.key` (before it, `delegation.token.master.key`): tokens are off
    /// without one (DELEGATION_TOKEN_AUTH_DISABLED).
    pub secret: Option<String>,
    /// `delegation.token.max.lifetime.ms` (7 days).
    pub max_lifetime_ms: i64,
    /// `delegation.token.expiry.time.ms` (1 day): how long a creation or renewal lasts.
    pub expiry_time_ms: i64,
    /// `delegation.token.expiry.check.interval.ms` (1 hour): how often expired tokens are removed.
    pub check_interval_ms: i64,
}

impl std::fmt::Debug for TokenSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSettings")
            .field("secret", &self.secret.as_ref().map(|_| super::redact::Hidden))
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("expiry_time_ms", &self.expiry_time_ms)
            .field("check_interval_ms", &self.check_interval_ms)
            .finish()
    }
}

impl TokenSettings {
    pub fn from_properties(p: &Properties) -> TokenSettings {
        let long = |name: &str, default: i64| {
            p.get(name).and_then(|v| v.trim().parse::<i64>().ok()).filter(|v| *v >= 1).unwrap_or(default)
        };
        let secret = p
            .get("delegation.token.secret.key")
            .or_else(|| p.get("delegation.token.master.key"))
            .filter(|s| !s.is_empty())
            .cloned();
        TokenSettings {
            secret,
            max_lifetime_ms: long("delegation.token.max.lifetime.ms", 604_800_000),
            expiry_time_ms: long("delegation.token.expiry.time.ms", 86_400_000),
            check_interval_ms: long("delegation.token.expiry.check.interval.ms", 3_600_000),
        }
    }

    pub fn enabled(&self) -> bool {
        self.secret.is_some()
    }

    /// The token's HMAC (its password's bytes), when tokens are on.
    pub fn hmac_of(&self, token_id: &str) -> Option<Vec<u8>> {
        self.secret.as_deref().map(|secret| hmac(secret, token_id))
    }
}

/// HmacSHA512 of `token_id` keyed with the secret's UTF-8 bytes (Kafka's `createHmac`).
pub fn hmac(secret: &str, token_id: &str) -> Vec<u8> {
    let mut mac = Hmac::<sha2::Sha512>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(token_id.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The password a token login uses: the HMAC in standard base64 (Kafka's `hmacAsBase64String`).
pub fn password(hmac: &[u8]) -> String {
    B64.encode(hmac)
}

/// A new token id as Kafka's `Uuid.randomUuid().toString()`: 16 random bytes in URL-safe base64
/// without padding, never starting with '-'.
pub fn new_token_id() -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    loop {
        let id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
        if !id.starts_with('-') {
            return id;
        }
    }
}

/// Kafka's `allowTokenRequests`: never from a token-authenticated principal; directly (not
/// forwarded) never over PLAINTEXT nor over SSL without a client certificate.
pub fn allow_token_requests(
    protocol: SecurityProtocol,
    principal: &str,
    token_authenticated: bool,
    forwarded: bool,
) -> bool {
    let anonymous_ssl = protocol == SecurityProtocol::Ssl && principal == crate::server::tls::ANONYMOUS;
    !(token_authenticated || (!forwarded && (protocol == SecurityProtocol::Plaintext || anonymous_ssl)))
}

/// `Type:name` split (a bare name is a user).
pub fn split_principal(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn sum(now_ms: i64, duration_ms: i64) -> i64 {
    now_ms.saturating_add(duration_ms)
}

/// The owner a CreateDelegationToken names, else the requester.
pub fn owner_of(requester: &str, req: &CreateDelegationTokenRequest) -> String {
    match req.owner_principal_name.as_ref().filter(|n| !n.is_empty()) {
        Some(name) => {
            let kind = req.owner_principal_type.as_ref().map(|t| t.as_str()).unwrap_or("User");
            format!("{kind}:{}", name.as_str())
        }
        None => requester.to_string(),
    }
}

/// A CreateDelegationToken answer without a token (its owner and requester named; at versions
/// below 3, which lack the requester fields, they stay empty). Kafka's `prepareResponse`.
pub fn create_refused(
    error: ResponseError,
    owner: &str,
    requester: &str,
    version: i16,
) -> CreateDelegationTokenResponse {
    let (owner_type, owner_name) = split_principal(owner);
    let mut response = CreateDelegationTokenResponse::default()
        .with_error_code(error.code())
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_issue_timestamp_ms(ERROR_TIMESTAMP_MS)
        .with_expiry_timestamp_ms(ERROR_TIMESTAMP_MS)
        .with_max_timestamp_ms(ERROR_TIMESTAMP_MS);
    if version >= 3 {
        let (requester_type, requester_name) = split_principal(requester);
        response = response
            .with_token_requester_principal_type(str_bytes(requester_type))
            .with_token_requester_principal_name(str_bytes(requester_name));
    }
    response
}

/// A RenewDelegationToken refused before a decision (Kafka's `ErrorTimestamp` as the expiry).
pub fn renew_refused(error: ResponseError) -> RenewDelegationTokenResponse {
    RenewDelegationTokenResponse::default().with_error_code(error.code()).with_expiry_timestamp_ms(ERROR_TIMESTAMP_MS)
}

/// An ExpireDelegationToken refused before a decision.
pub fn expire_refused(error: ResponseError) -> ExpireDelegationTokenResponse {
    ExpireDelegationTokenResponse::default().with_error_code(error.code()).with_expiry_timestamp_ms(ERROR_TIMESTAMP_MS)
}

/// CreateDelegationToken (Kafka's `createDelegationToken`), once the request is allowed:
/// `requester` asks for a token of the owner the request names (itself by default).
pub fn create(
    settings: &TokenSettings,
    supported: bool,
    requester: &str,
    req: &CreateDelegationTokenRequest,
    version: i16,
    now_ms: i64,
) -> (Vec<MetadataRecord>, CreateDelegationTokenResponse) {
    let owner = owner_of(requester, req);
    let refused = |error| (Vec::new(), create_refused(error, &owner, requester, version));
    let Some(secret) = settings.secret.as_deref() else { return refused(ResponseError::DelegationTokenAuthDisabled) };
    if !supported {
        return refused(ResponseError::UnsupportedVersion);
    }
    if req.renewers.iter().any(|r| r.principal_type.as_str() != "User") {
        return refused(ResponseError::InvalidPrincipalType);
    }
    let max_lifetime_ms = match req.max_lifetime_ms {
        asked if asked > 0 => settings.max_lifetime_ms.min(asked),
        _ => settings.max_lifetime_ms,
    };
    let max_timestamp = sum(now_ms, max_lifetime_ms);
    let expiration_timestamp = max_timestamp.min(sum(now_ms, settings.expiry_time_ms));
    let token_id = new_token_id();
    let record = DelegationTokenRecord {
        owner: owner.clone(),
        requester: requester.to_string(),
        renewers: req
            .renewers
            .iter()
            .map(|r| format!("{}:{}", r.principal_type.as_str(), r.principal_name.as_str()))
            .collect(),
        issue_timestamp: now_ms,
        max_timestamp,
        expiration_timestamp,
        token_id: token_id.clone(),
        unknown_tagged_fields: Vec::new(),
    };
    let response = create_refused(ResponseError::UnknownServerError, &owner, requester, version)
        .with_error_code(0)
        .with_issue_timestamp_ms(now_ms)
        .with_expiry_timestamp_ms(expiration_timestamp)
        .with_max_timestamp_ms(max_timestamp)
        .with_token_id(str_bytes(&token_id))
        .with_hmac(Bytes::from(hmac(secret, &token_id)));
    (vec![record.into()], response)
}

/// The token whose HMAC is `hmac` (Kafka's `tokenForHmac`).
fn by_hmac<'t>(tokens: &'t Tokens, secret: &str, given: &[u8]) -> Option<&'t DelegationTokenRecord> {
    use subtle::ConstantTimeEq;
    tokens.values().find(|t| bool::from(hmac(secret, &t.token_id).ct_eq(given)))
}

/// Whether `principal` owns the token or is one of its renewers (Kafka's `allowedToRenew`).
fn may_renew(token: &DelegationTokenRecord, principal: &str) -> bool {
    token.owner == principal || token.renewers.iter().any(|r| r == principal)
}

/// Whether `principal` owns, requested or may renew the token (Kafka's `ownerOrRenewer`).
pub fn owner_or_renewer(token: &DelegationTokenRecord, principal: &str) -> bool {
    may_renew(token, principal) || token.requester == principal
}

fn expired(token: &DelegationTokenRecord, now_ms: i64) -> bool {
    token.max_timestamp < now_ms || token.expiration_timestamp < now_ms
}

/// The token a renewal or expiry names, once tokens are on.
fn changeable<'t>(
    settings: &TokenSettings,
    supported: bool,
    tokens: &'t Tokens,
    given: &[u8],
) -> Result<&'t DelegationTokenRecord, ResponseError> {
    let secret = settings.secret.as_deref().ok_or(ResponseError::DelegationTokenAuthDisabled)?;
    if !supported {
        return Err(ResponseError::UnsupportedVersion);
    }
    by_hmac(tokens, secret, given).ok_or(ResponseError::DelegationTokenNotFound)
}

/// RenewDelegationToken (Kafka's `renewDelegationToken`).
pub fn renew(
    settings: &TokenSettings,
    supported: bool,
    tokens: &Tokens,
    principal: &str,
    req: &RenewDelegationTokenRequest,
    now_ms: i64,
) -> (Vec<MetadataRecord>, RenewDelegationTokenResponse) {
    let refused = |e: ResponseError| (Vec::new(), RenewDelegationTokenResponse::default().with_error_code(e.code()));
    let token = match changeable(settings, supported, tokens, &req.hmac) {
        Ok(token) => token,
        Err(e) => return refused(e),
    };
    if expired(token, now_ms) {
        return refused(ResponseError::DelegationTokenExpired);
    }
    if !may_renew(token, principal) {
        return refused(ResponseError::DelegationTokenOwnerMismatch);
    }
    let renew_ms = match req.renew_period_ms {
        asked if asked > 0 => settings.expiry_time_ms.min(asked),
        _ => settings.expiry_time_ms,
    };
    let expiry = token.max_timestamp.min(sum(now_ms, renew_ms));
    let record = DelegationTokenRecord { expiration_timestamp: expiry, ..token.clone() };
    (vec![record.into()], RenewDelegationTokenResponse::default().with_expiry_timestamp_ms(expiry))
}

/// ExpireDelegationToken (Kafka's `expireDelegationToken`): a negative period removes the token
/// now, another moves its expiry to at most now + period.
pub fn expire(
    settings: &TokenSettings,
    supported: bool,
    tokens: &Tokens,
    principal: &str,
    req: &ExpireDelegationTokenRequest,
    now_ms: i64,
) -> (Vec<MetadataRecord>, ExpireDelegationTokenResponse) {
    let refused = |e: ResponseError| (Vec::new(), ExpireDelegationTokenResponse::default().with_error_code(e.code()));
    let token = match changeable(settings, supported, tokens, &req.hmac) {
        Ok(token) => token,
        Err(e) => return refused(e),
    };
    if !may_renew(token, principal) {
        return refused(ResponseError::DelegationTokenOwnerMismatch);
    }
    if req.expiry_time_period_ms < 0 {
        let record = RemoveDelegationTokenRecord { token_id: token.token_id.clone(), ..Default::default() };
        return (vec![record.into()], ExpireDelegationTokenResponse::default().with_expiry_timestamp_ms(now_ms));
    }
    if expired(token, now_ms) {
        return refused(ResponseError::DelegationTokenExpired);
    }
    let expiry = token.max_timestamp.min(sum(now_ms, req.expiry_time_period_ms));
    let record = DelegationTokenRecord { expiration_timestamp: expiry, ..token.clone() };
    (vec![record.into()], ExpireDelegationTokenResponse::default().with_expiry_timestamp_ms(expiry))
}

/// The removals of every expired token (Kafka's `sweepExpiredDelegationTokens`).
pub fn sweep(tokens: &Tokens, now_ms: i64) -> Vec<MetadataRecord> {
    tokens
        .values()
        .filter(|t| expired(t, now_ms))
        .map(|t| {
            tracing::info!(token = %t.token_id, owner = %t.owner, "delegation token expired");
            RemoveDelegationTokenRecord { token_id: t.token_id.clone(), ..Default::default() }.into()
        })
        .collect()
}

/// Applies token records to `tokens` (a removal of an unknown token is no error, as Kafka's
/// `DelegationTokenDelta`); other records are ignored.
pub fn apply(tokens: &mut Tokens, records: &[MetadataRecord]) {
    for record in records {
        match record {
            MetadataRecord::DelegationToken(r) => {
                tokens.insert(r.token_id.clone(), r.clone());
            }
            MetadataRecord::RemoveDelegationToken(r) => {
                tokens.remove(&r.token_id);
            }
            _ => {}
        }
    }
}

/// Kafka's `DelegationTokenManager.filterToken`: which tokens a DescribeDelegationToken shows
/// `requester` (the owners asked for, when any are), given whether it may describe a token id
/// (DESCRIBE on the DELEGATION_TOKEN) and an owner's tokens (DESCRIBE_TOKENS on the USER).
pub fn visible(
    token: &DelegationTokenRecord,
    requester: &str,
    owners: Option<&[String]>,
    may_describe_token: impl Fn(&str) -> bool,
    may_describe_owner: impl Fn(&str) -> bool,
) -> bool {
    if let Some(owners) = owners {
        if !owners.iter().any(|o| owner_or_renewer(token, o)) {
            return false;
        }
    }
    owner_or_renewer(token, requester) || may_describe_token(&token.token_id) || may_describe_owner(&token.owner)
}

#[cfg(test)]
#[path = "tokens_tests.rs"]
mod tests;
