//! SASL-related APIs that reach the normal request path: DescribeUserScramCredentials and
//! AlterUserScramCredentials (KIP-554, `kafka-configs --entity-type users`), and SaslHandshake /
//! SaslAuthenticate arriving where no authentication is going on (a PLAINTEXT or SSL listener, or
//! an authenticated connection that cannot re-authenticate): ILLEGAL_SASL_STATE, as Kafka's
//! `KafkaApis`. The authentication itself is `security::sasl`, driven by the connection.
//!
//! With an authorizer configured, describing needs DESCRIBE on the cluster and altering ALTER,
//! as Kafka checks (CLUSTER_AUTHORIZATION_FAILED otherwise).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::AlterUserScramCredentialsRequest;
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::sasl_authenticate_response::SaslAuthenticateResponse;
use kafka_protocol::messages::sasl_handshake_response::SaslHandshakeResponse;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::security::acl;
use crate::security::scram_store::{Alteration, Outcome, DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND};

const ILLEGAL_SASL_STATE: i16 = 34;
/// Whether the connection's principal may do `operation` on the cluster (always, without an
/// authorizer).
fn allowed(broker: &Broker, ctx: &RequestContext, operation: i8) -> bool {
    ctx.authz(broker).cluster(operation)
}

pub fn handshake_after_authentication() -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ILLEGAL_SASL_STATE)
}

pub fn authenticate_after_authentication() -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ILLEGAL_SASL_STATE)
        .with_error_message(Some(str_bytes("SaslAuthenticate request received after successful authentication")))
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !allowed(broker, ctx, acl::DESCRIBE) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return DescribeUserScramCredentialsResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(&default_message(e))));
    }
    let stored = broker.scram.users();
    // (user, named more than once): every user when none is named.
    let mut wanted: Vec<(String, bool)> = Vec::new();
    match req.users.filter(|u| !u.is_empty()) {
        None => wanted.extend(stored.keys().map(|u| (u.clone(), false))),
        Some(users) => {
            for u in users {
                let name = u.name.as_str();
                match wanted.iter_mut().find(|(w, _)| w == name) {
                    Some(entry) => entry.1 = true,
                    None => wanted.push((name.to_string(), false)),
                }
            }
        }
    }
    let results = wanted
        .into_iter()
        .map(|(user, duplicate)| {
            let result = DescribeUserScramCredentialsResult::default().with_user(str_bytes(&user));
            if duplicate {
                return result.with_error_code(DUPLICATE_RESOURCE).with_error_message(Some(str_bytes(&format!(
                    "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                ))));
            }
            match stored.get(&user) {
                Some(credentials) => result.with_credential_infos(
                    credentials
                        .iter()
                        .map(|(m, iterations)| {
                            CredentialInfo::default().with_mechanism(m.type_code()).with_iterations(*iterations)
                        })
                        .collect(),
                ),
                None => result.with_error_code(RESOURCE_NOT_FOUND).with_error_message(Some(str_bytes(&format!(
                    "Attempt to describe a user credential that does not exist: {user}"
                )))),
            }
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

pub fn alter(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let alterations = alterations_of(&req);
    if !allowed(broker, ctx, acl::ALTER) {
        let e = ResponseError::ClusterAuthorizationFailed;
        return alter_refused(&req, e.code(), Some(default_message(e)));
    }
    if broker.scram.is_from_image() {
        // A cluster broker not yet linked to its controller: nowhere to write the credentials.
        return alter_refused(&req, ResponseError::RequestTimedOut.code(), None);
    }
    alter_results(broker.scram.alter(alterations))
}

/// An AlterUserScramCredentials refused whole: each user named (once) gets `code`.
pub fn alter_refused(
    req: &AlterUserScramCredentialsRequest,
    code: i16,
    message: Option<String>,
) -> AlterUserScramCredentialsResponse {
    let mut users: Vec<&str> = Vec::new();
    let named = req.deletions.iter().map(|d| d.name.as_str()).chain(req.upsertions.iter().map(|u| u.name.as_str()));
    for user in named {
        if !users.contains(&user) {
            users.push(user);
        }
    }
    let results = users
        .iter()
        .map(|u| {
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(u))
                .with_error_code(code)
                .with_error_message(message.as_deref().map(str_bytes))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// The request's alterations, deletions first (the order Kafka's controller checks them in).
pub fn alterations_of(req: &AlterUserScramCredentialsRequest) -> Vec<Alteration> {
    let mut alterations = Vec::new();
    for d in &req.deletions {
        alterations.push(Alteration::Delete { user: d.name.as_str().to_string(), mechanism: d.mechanism });
    }
    for u in &req.upsertions {
        alterations.push(Alteration::Upsert {
            user: u.name.as_str().to_string(),
            mechanism: u.mechanism,
            iterations: u.iterations,
            salt: u.salt.to_vec(),
            salted_password: u.salted_password.to_vec(),
        });
    }
    alterations
}

/// One result per user: success, or (error code, message).
pub fn alter_results(outcomes: Vec<Outcome>) -> AlterUserScramCredentialsResponse {
    let results = outcomes
        .into_iter()
        .map(|(user, outcome)| {
            let r = AlterUserScramCredentialsResult::default().with_user(str_bytes(&user));
            match outcome {
                Ok(()) => r,
                Err((code, message)) => r.with_error_code(code).with_error_message(Some(str_bytes(&message))),
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}
