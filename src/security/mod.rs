//! Security: who a connection is and what it may do. ACLs with Kafka's semantics (`acl.rs`)
//! kept by the cluster when an authorizer is configured (`acl_store.rs`), served by
//! CreateAcls / DescribeAcls / DeleteAcls, and checked on every request through
//! `authorizer.rs` (Kafka's `AuthHelper`). Principals come from SASL authentication (`sasl.rs`:
//! PLAIN with users from the JAAS config (`jaas.rs`), SCRAM-SHA-256/512 (`scram.rs`) with
//! credentials kept by `scram_store.rs`, OAUTHBEARER tokens checked by `oauth.rs` against the keys
//! of `jwks.rs`) or from TLS client certificates (`server/tls.rs`, with the stores of `keystore.rs`
//! and the certificate fields of `certificate.rs`). Delegation tokens (`tokens.rs`, kept by
//! `token_store.rs`) log in through SCRAM as their owner.
//! The stores keep their files as framed Kafka metadata records (`records_file.rs`).
//! No secret (password, key, token, SCRAM credential, JAAS option) shows in a `Debug` output:
//! `redact.rs` says how, and which types.

pub mod acl;
pub mod acl_store;
pub mod authorizer;
pub mod certificate;
pub mod client;
pub mod jaas;
mod jwks;
pub mod keystore;
pub mod oauth;
pub mod records_file;
pub mod redact;
pub mod sasl;
pub mod scram;
pub mod scram_store;
pub mod stores;
pub mod token_store;
pub mod tokens;
