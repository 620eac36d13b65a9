//! Authorization of requests, as Kafka's `AuthHelper` does it for `KafkaApis`: the vocabulary
//! handlers use to check what the connection's principal may do. One `Authz` per request
//! (the broker's ACLs, when an authorizer is configured, and the connection's principal and
//! client address); without an authorizer every check allows, so behaviour is unchanged.
//!
//! Shapes: `allows` (one operation on one named resource), `cluster` (on the cluster
//! resource), `allowed_names` (of many named items, the names allowed: Kafka's
//! `filterByAuthorized`), `any_of_type` (Kafka's `authorizeByResourceType`), and
//! `operations` (KIP-430: the bitset of allowed operations, bit i = ACL operation code i).
//! Denials are logged at debug level under the target `kafka.authorizer.logger`, in the
//! words of Kafka's authorizer log, unless the check asks for quiet (Kafka's `logIfDenied`).
//!
//! Holds no state; reads the ACLs under `AclStore`'s read lock for each decision.

use std::collections::HashSet;
use std::net::IpAddr;

use super::acl::{self, CLUSTER, CLUSTER_NAME, GROUP, TOPIC};
use super::acl_store::AclStore;

/// The operations of a resource type that KIP-430 reports (Kafka's `AclEntry.supportedOperations`).
fn supported_operations(resource_type: i8) -> &'static [i8] {
    use acl::*;
    match resource_type {
        TOPIC => &[READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS],
        GROUP => &[READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS],
        CLUSTER => &[CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE],
        TRANSACTIONAL_ID => &[DESCRIBE, WRITE],
        _ => &[],
    }
}

fn bits(ops: impl Iterator<Item = i8>) -> i32 {
    ops.fold(0, |acc, op| acc | (1 << op))
}

/// Kafka's names in its authorizer log (`ResourceType`, `AclOperation`).
fn resource_type_name(t: i8) -> &'static str {
    match t {
        TOPIC => "Topic",
        GROUP => "Group",
        CLUSTER => "Cluster",
        acl::TRANSACTIONAL_ID => "TransactionalId",
        _ => "Unknown",
    }
}

/// What one request's principal may do.
pub struct Authz<'a> {
    acls: Option<&'a AclStore>,
    principal: &'a str,
    host: String,
}

impl<'a> Authz<'a> {
    pub fn new(acls: Option<&'a AclStore>, principal: &'a str, client: IpAddr) -> Authz<'a> {
        Authz { acls, principal, host: java_host(client) }
    }

    /// Whether an authorizer is configured (else everything is allowed).
    pub fn enabled(&self) -> bool {
        self.acls.is_some()
    }

    fn decide(&self, operation: i8, resource_type: i8, name: &str, log_denial: bool) -> bool {
        let Some(store) = self.acls else { return true };
        let allowed = store.authorize(self.principal, &self.host, operation, resource_type, name);
        if !allowed && log_denial {
            tracing::debug!(
                target: "kafka.authorizer.logger",
                "Principal = {} is Denied operation = {} from host = {} on resource = {}:LITERAL:{}",
                self.principal,
                acl::operation_name(operation),
                self.host,
                resource_type_name(resource_type),
                name
            );
        }
        allowed
    }

    /// `operation` on the resource of `resource_type` named `name`.
    pub fn allows(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        self.decide(operation, resource_type, name, true)
    }

    /// As `allows`, without logging a denial (Kafka's `logIfDenied = false`).
    pub fn allows_quietly(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        self.decide(operation, resource_type, name, false)
    }

    /// `operation` on the cluster.
    pub fn cluster(&self, operation: i8) -> bool {
        self.allows(operation, CLUSTER, CLUSTER_NAME)
    }

    /// `operation` on the whole cluster (asked without logging a denial: Kafka's
    /// `hasClusterAuth`), else on topic `name`.
    pub fn cluster_or_topic(&self, operation: i8, name: &str) -> bool {
        self.allows_quietly(operation, CLUSTER, CLUSTER_NAME) || self.allows(operation, TOPIC, name)
    }

    /// Of the names given (repeats allowed), those allowed `operation` (Kafka's `filterByAuthorized`).
    pub fn allowed_names<'n>(
        &self,
        operation: i8,
        resource_type: i8,
        names: impl IntoIterator<Item = &'n str>,
    ) -> HashSet<&'n str> {
        let distinct: HashSet<&'n str> = names.into_iter().collect();
        distinct.into_iter().filter(|n| self.allows(operation, resource_type, n)).collect()
    }

    /// Whether some resource of the type allows `operation` (Kafka's `authorizeByResourceType`).
    pub fn any_of_type(&self, operation: i8, resource_type: i8) -> bool {
        let Some(store) = self.acls else { return true };
        store.authorize_by_resource_type(self.principal, &self.host, operation, resource_type)
    }

    /// KIP-430: the operations allowed on the resource, as a bitset; every supported one
    /// without an authorizer.
    pub fn operations(&self, resource_type: i8, name: &str) -> i32 {
        let ops = supported_operations(resource_type).iter().copied();
        bits(ops.filter(|&op| self.allows_quietly(op, resource_type, name)))
    }

    /// `operations` when the client asked for them, else Kafka's "not requested" (i32::MIN).
    pub fn operations_if(&self, requested: bool, resource_type: i8, name: &str) -> i32 {
        if requested {
            self.operations(resource_type, name)
        } else {
            i32::MIN
        }
    }

    /// The cluster's operations as Metadata (v8-10) and DescribeCluster answer them: 0 without
    /// DESCRIBE on the cluster, i32::MIN when not requested.
    pub fn cluster_operations_if(&self, requested: bool) -> i32 {
        match requested {
            false => i32::MIN,
            true if self.cluster(acl::DESCRIBE) => self.operations(CLUSTER, CLUSTER_NAME),
            true => 0,
        }
    }
}

/// An address as Java's `InetAddress.getHostAddress` writes it, which is what Kafka's ACL hosts
/// are compared with: IPv4 dotted, IPv6 as eight hex groups without zero compression
/// (`0:0:0:0:0:0:0:1`, where Rust writes `::1`).
fn java_host(ip: IpAddr) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => v6.segments().iter().map(|g| format!("{g:x}")).collect::<Vec<_>>().join(":"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Properties;
    use crate::security::acl::{AclBinding, ALLOW, LITERAL, PREFIXED};

    fn store(dir: &std::path::Path) -> AclStore {
        let mut props = Properties::new();
        props.insert("authorizer.class.name".into(), super::super::acl_store::STANDARD_AUTHORIZER.into());
        props.insert("super.users".into(), "User:admin".into());
        AclStore::open(&props, dir).unwrap().unwrap()
    }

    fn allow(resource_type: i8, name: &str, pattern: i8, op: i8) -> AclBinding {
        AclBinding {
            id: uuid::Uuid::nil(),
            resource_type,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: ALLOW,
        }
    }

    #[test]
    fn without_an_authorizer_everything_is_allowed_and_every_operation_reported() {
        let authz = Authz::new(None, "User:ANONYMOUS", "127.0.0.1".parse().unwrap());
        assert!(!authz.enabled());
        assert!(
            authz.allows(acl::WRITE, TOPIC, "t") && authz.cluster(acl::ALTER) && authz.any_of_type(acl::WRITE, TOPIC)
        );
        assert_eq!(authz.operations(TOPIC, "t"), 3576, "Kafka's value for every topic operation");
        assert_eq!(authz.operations(GROUP, "g"), 3400);
        assert_eq!(authz.operations(CLUSTER, CLUSTER_NAME), 8096);
        assert_eq!(authz.operations_if(false, TOPIC, "t"), i32::MIN);
        assert_eq!(authz.allowed_names(acl::READ, TOPIC, ["a", "b", "a"]).len(), 2);
    }

    #[test]
    fn checks_bitsets_and_filters_follow_the_acls() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let results = store.create(vec![
            allow(TOPIC, "orders", LITERAL, acl::READ),
            allow(TOPIC, "pay-", PREFIXED, acl::WRITE),
            allow(GROUP, "g", LITERAL, acl::ALL),
        ]);
        assert!(results.iter().all(|r| r.is_ok()));
        assert_eq!(java_host("::1".parse().unwrap()), "0:0:0:0:0:0:0:1");
        assert_eq!(java_host("fe80::a:b0".parse().unwrap()), "fe80:0:0:0:0:0:a:b0");
        assert_eq!(java_host("::ffff:10.1.2.3".parse().unwrap()), "10.1.2.3");
        let host: IpAddr = "10.1.2.3".parse().unwrap();
        let alice = Authz::new(Some(&store), "User:alice", host);
        assert!(alice.enabled());
        assert!(alice.allows(acl::READ, TOPIC, "orders") && !alice.allows(acl::WRITE, TOPIC, "orders"));
        let allowed = alice.allowed_names(acl::DESCRIBE, TOPIC, ["orders", "pay-x", "secret", "orders"]);
        assert_eq!(allowed, HashSet::from(["orders", "pay-x"]), "READ and WRITE imply DESCRIBE");
        assert_eq!(alice.operations(TOPIC, "orders"), (1 << acl::READ) | (1 << acl::DESCRIBE));
        assert_eq!(alice.operations(TOPIC, "pay-in"), (1 << acl::WRITE) | (1 << acl::DESCRIBE));
        assert_eq!(alice.operations(GROUP, "g"), 3400, "ALL covers every group operation");
        assert_eq!(alice.cluster_operations_if(true), 0, "no DESCRIBE on the cluster");
        assert!(alice.any_of_type(acl::WRITE, TOPIC) && !alice.any_of_type(acl::IDEMPOTENT_WRITE, CLUSTER));
        let admin = Authz::new(Some(&store), "User:admin", host);
        assert_eq!(admin.cluster_operations_if(true), 8096);
        assert_eq!(admin.operations(TOPIC, "anything"), 3576);
        let bob = Authz::new(Some(&store), "User:bob", host);
        assert!(!bob.allows(acl::DESCRIBE, TOPIC, "orders") && !bob.any_of_type(acl::WRITE, TOPIC));
        assert_eq!(bob.operations(TOPIC, "orders"), 0);
    }
}
