//! CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
//! DescribeDelegationToken on a broker (`kafka-delegation-tokens`, Admin's delegation token
//! calls), as Kafka's `KafkaApis` answers them: refused on PLAINTEXT, on SSL without a client
//! certificate and from a token-authenticated principal (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED); a
//! token for another owner needs CREATE_TOKENS on that USER resource; then a cluster broker
//! forwards the change to the controller, a single node decides it itself (`security::tokens`)
//! and stores it (`security::token_store`). Describing is local: the tokens the principal owns,
//! requested or may renew, and those it may DESCRIBE (DELEGATION_TOKEN) or whose owner it may
//! DESCRIBE_TOKENS (USER), each with its HMAC.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{
    CreateDelegationTokenRequest, CreateDelegationTokenResponse, DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse, ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest, RenewDelegationTokenResponse, RequestHeader,
};

use kafka_protocol::protocol::Request;

use super::forward::{forward_whole, Throttled};
use super::{forwarder, str_bytes, RequestContext};
use crate::broker::Broker;
use crate::log::now_ms;
use crate::metadata::records::MetadataRecord;
use crate::security::acl;
use crate::security::tokens::{self, split_principal, TokenSettings, Tokens};

fn allowed(ctx: &RequestContext) -> bool {
    tokens::allow_token_requests(ctx.security_protocol, &ctx.principal, ctx.token_authenticated, false)
}

/// A single node's token change could not be stored.
fn storage_failed(e: std::io::Error) -> ResponseError {
    tracing::error!(error = %e, "delegation tokens not stored");
    ResponseError::KafkaStorageError
}

pub async fn create(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    header: &RequestHeader,
    req: CreateDelegationTokenRequest,
    version: i16,
) -> CreateDelegationTokenResponse {
    let requester = ctx.principal.as_str();
    let owner = tokens::owner_of(requester, &req);
    let refused = |error| tokens::create_refused(error, &owner, requester, version);
    if !allowed(ctx) {
        return refused(ResponseError::DelegationTokenRequestNotAllowed);
    }
    if owner != requester && !ctx.authz(broker).allows(acl::CREATE_TOKENS, acl::USER, &owner) {
        return refused(ResponseError::DelegationTokenAuthorizationFailed);
    }
    if req.renewers.iter().any(|r| r.principal_type.as_str() != "User") {
        return refused(ResponseError::InvalidPrincipalType);
    }
    if let Some(link) = broker.controller.get() {
        return forward_whole(&forwarder(link, ctx, header), version, &req, refused).await;
    }
    let store = &broker.tokens;
    store
        .change(|_| tokens::create(&store.settings, true, requester, &req, version, now_ms()))
        .unwrap_or_else(|e| refused(storage_failed(e)))
}

pub async fn renew(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    header: &RequestHeader,
    req: RenewDelegationTokenRequest,
    version: i16,
) -> RenewDelegationTokenResponse {
    let decide = |settings: &_, t: &_, req: &_| tokens::renew(settings, true, t, &ctx.principal, req, now_ms());
    change_by_hmac(broker, ctx, header, (req, version), tokens::renew_refused, decide).await
}

pub async fn expire(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    header: &RequestHeader,
    req: ExpireDelegationTokenRequest,
    version: i16,
) -> ExpireDelegationTokenResponse {
    let decide = |settings: &_, t: &_, req: &_| tokens::expire(settings, true, t, &ctx.principal, req, now_ms());
    change_by_hmac(broker, ctx, header, (req, version), tokens::expire_refused, decide).await
}

/// A renewal or expiry: refused where token requests are not allowed, forwarded by a cluster
/// broker, else `decide`d here and stored.
async fn change_by_hmac<R: Request>(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    header: &RequestHeader,
    (req, version): (R, i16),
    refused: impl Fn(ResponseError) -> R::Response,
    decide: impl FnOnce(&TokenSettings, &Tokens, &R) -> (Vec<MetadataRecord>, R::Response),
) -> R::Response
where
    R::Response: Throttled,
{
    if !allowed(ctx) {
        return refused(ResponseError::DelegationTokenRequestNotAllowed);
    }
    if let Some(link) = broker.controller.get() {
        return forward_whole(&forwarder(link, ctx, header), version, &req, refused).await;
    }
    let store = &broker.tokens;
    store.change(|t| decide(&store.settings, t, &req)).unwrap_or_else(|e| refused(storage_failed(e)))
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeDelegationTokenRequest,
    version: i16,
) -> DescribeDelegationTokenResponse {
    let answer = |e: ResponseError| DescribeDelegationTokenResponse::default().with_error_code(e.code());
    if !allowed(ctx) {
        return answer(ResponseError::DelegationTokenRequestNotAllowed);
    }
    let settings = &broker.tokens.settings;
    if !settings.enabled() {
        return answer(ResponseError::DelegationTokenAuthDisabled);
    }
    let owners: Option<Vec<String>> = req.owners.as_ref().map(|owners| {
        owners.iter().map(|o| format!("{}:{}", o.principal_type.as_str(), o.principal_name.as_str())).collect()
    });
    if owners.as_ref().is_some_and(|o| o.is_empty()) {
        return DescribeDelegationTokenResponse::default();
    }
    let authz = ctx.authz(broker);
    let described = broker
        .tokens
        .current()
        .into_values()
        .filter(|t| {
            tokens::visible(
                t,
                &ctx.principal,
                owners.as_deref(),
                |id| authz.allows(acl::DESCRIBE, acl::DELEGATION_TOKEN, id),
                |owner| authz.allows(acl::DESCRIBE_TOKENS, acl::USER, owner),
            )
        })
        .map(|t| described(&t, settings.hmac_of(&t.token_id).unwrap_or_default(), version))
        .collect();
    DescribeDelegationTokenResponse::default().with_tokens(described)
}

/// One token as DescribeDelegationToken shows it (the requester from version 3 on).
fn described(
    t: &crate::metadata::records::DelegationTokenRecord,
    hmac: Vec<u8>,
    version: i16,
) -> DescribedDelegationToken {
    let (owner_type, owner_name) = split_principal(&t.owner);
    let renewers = t
        .renewers
        .iter()
        .map(|r| {
            let (kind, name) = split_principal(r);
            DescribedDelegationTokenRenewer::default()
                .with_principal_type(str_bytes(kind))
                .with_principal_name(str_bytes(name))
        })
        .collect();
    let mut out = DescribedDelegationToken::default()
        .with_principal_type(str_bytes(owner_type))
        .with_principal_name(str_bytes(owner_name))
        .with_issue_timestamp(t.issue_timestamp)
        .with_expiry_timestamp(t.expiration_timestamp)
        .with_max_timestamp(t.max_timestamp)
        .with_token_id(str_bytes(&t.token_id))
        .with_hmac(Bytes::from(hmac))
        .with_renewers(renewers);
    if version >= 3 {
        let (kind, name) = split_principal(&t.requester);
        out = out
            .with_token_requester_principal_type(str_bytes(kind))
            .with_token_requester_principal_name(str_bytes(name));
    }
    out
}
