//! CreateDelegationToken, RenewDelegationToken and ExpireDelegationToken on Ketch's controller
//! (forwarded by brokers, as Kafka's brokers forward them): checked as Kafka's `ControllerApis`
//! checks them (never from a token-authenticated principal; PLAINTEXT and certificate-less SSL
//! refused only when not forwarded; CREATE_TOKENS on the USER for another owner), decided by
//! `security::tokens` against the tokens of the controller's image with its own
//! `delegation.token.*` configs, and written as DelegationTokenRecord /
//! RemoveDelegationTokenRecord. Below metadata.version 3.6-IV2 every change is refused
//! (UNSUPPORTED_VERSION), as Kafka refuses it.
//!
//! Invariants: a refused request writes nothing; a success means the records are durable.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse, RenewDelegationTokenRequest, RenewDelegationTokenResponse,
};

use super::controller_apis::written;
use super::controller_authz::Caller;
use crate::config::SecurityProtocol;
use crate::controller::quorum::QuorumController;
use crate::metadata::image::MetadataImage;
use crate::metadata::records::MetadataRecord;
use crate::security::acl;
use crate::security::tokens::{self, TokenSettings, Tokens, TOKENS_METADATA_VERSION};

/// How a request reached the controller: the listener's protocol, and whether a broker
/// forwarded it (then the client's own connection was already checked by that broker).
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub protocol: SecurityProtocol,
    pub forwarded: bool,
}

fn supported(image: &MetadataImage) -> bool {
    image.metadata_version_at_least(TOKENS_METADATA_VERSION)
}

fn allowed(caller: &Caller, arrival: Arrival) -> bool {
    tokens::allow_token_requests(arrival.protocol, &caller.principal, caller.token_authenticated, arrival.forwarded)
}

pub fn create(
    controller: &QuorumController,
    caller: &Caller,
    arrival: Arrival,
    req: &CreateDelegationTokenRequest,
    version: i16,
) -> CreateDelegationTokenResponse {
    let requester = caller.principal.as_str();
    let owner = tokens::owner_of(requester, req);
    let refused = |error| tokens::create_refused(error, &owner, requester, version);
    if !allowed(caller, arrival) {
        return refused(ResponseError::DelegationTokenRequestNotAllowed);
    }
    if owner != requester && !caller.authz(controller).allows(acl::CREATE_TOKENS, acl::USER, &owner) {
        return refused(ResponseError::DelegationTokenAuthorizationFailed);
    }
    let settings = &controller.settings.tokens;
    let answer = controller.change(|d| tokens::create(settings, supported(d.image), requester, req, version, d.now_ms));
    written("CreateDelegationToken", answer, refused)
}

pub fn renew(
    controller: &QuorumController,
    caller: &Caller,
    arrival: Arrival,
    req: &RenewDelegationTokenRequest,
) -> RenewDelegationTokenResponse {
    let decide = |s: &_, ok, t: &_, now| tokens::renew(s, ok, t, &caller.principal, req, now);
    change_by_hmac("RenewDelegationToken", controller, caller, arrival, tokens::renew_refused, decide)
}

pub fn expire(
    controller: &QuorumController,
    caller: &Caller,
    arrival: Arrival,
    req: &ExpireDelegationTokenRequest,
) -> ExpireDelegationTokenResponse {
    let decide = |s: &_, ok, t: &_, now| tokens::expire(s, ok, t, &caller.principal, req, now);
    change_by_hmac("ExpireDelegationToken", controller, caller, arrival, tokens::expire_refused, decide)
}

/// A renewal or expiry: refused where token requests are not allowed, else decided against the
/// image's tokens (whether its metadata.version has tokens, the clock) and written.
fn change_by_hmac<T>(
    what: &str,
    controller: &QuorumController,
    caller: &Caller,
    arrival: Arrival,
    refused: impl Fn(ResponseError) -> T,
    decide: impl FnOnce(&TokenSettings, bool, &Tokens, i64) -> (Vec<MetadataRecord>, T),
) -> T {
    if !allowed(caller, arrival) {
        return refused(ResponseError::DelegationTokenRequestNotAllowed);
    }
    let settings = &controller.settings.tokens;
    let answer = controller.change(|d| decide(settings, supported(d.image), &d.image.delegation_tokens, d.now_ms));
    written(what, answer, refused)
}

/// Removes the expired tokens (Kafka's controller sweeps every
/// `delegation.token.expiry.check.interval.ms`); returns how many.
pub fn sweep(controller: &QuorumController) -> anyhow::Result<usize> {
    controller.change(|d| {
        let records = tokens::sweep(&d.image.delegation_tokens, d.now_ms);
        let n = records.len();
        (records, n)
    })
}
