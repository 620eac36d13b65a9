//! Security: who a connection is and what it may do. Today: ACLs with Kafka's semantics
//! (`acl.rs`) kept by the cluster when an authorizer is configured (`acl_store.rs`), served by
//! CreateAcls / DescribeAcls / DeleteAcls. Authentication (TLS client certificates, SASL) and
//! the enforcement of ACLs on every request come next (issue 16).

pub mod acl;
pub mod acl_store;
