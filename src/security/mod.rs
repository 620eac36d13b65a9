//! Security: who a connection is and what it may do. ACLs with Kafka's semantics (`acl.rs`)
//! kept by the cluster when an authorizer is configured (`acl_store.rs`), served by
//! CreateAcls / DescribeAcls / DeleteAcls, and checked on every request through
//! `authorizer.rs` (Kafka's `AuthHelper`). Principals come from TLS client certificates
//! (`server/tls.rs`); SASL comes next (issue 16).

pub mod acl;
pub mod acl_store;
pub mod authorizer;
