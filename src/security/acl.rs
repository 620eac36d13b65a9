//! ACLs with Kafka's semantics (`StandardAuthorizer`, KIP-290 prefixed patterns): the ACL
//! bindings, the filters of DescribeAcls / DeleteAcls, and the authorization decision.
//!
//! Codes are Kafka's enums: resource types (TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5,
//! DELEGATION_TOKEN 6, USER 7), pattern types (ANY 1, MATCH 2, LITERAL 3, PREFIXED 4),
//! operations (ALL 2, READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
//! DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, CREATE_TOKENS 13,
//! DESCRIBE_TOKENS 14, TWO_PHASE_COMMIT 15), permissions (DENY 2, ALLOW 3); 1 is ANY.
//!
//! Decision (Kafka's `StandardAuthorizerData.authorize`): super users are allowed; otherwise
//! the ACLs whose pattern matches the resource (a LITERAL equal to its name or `*`, or a
//! PREFIXED one its name starts with) and whose principal (`User:*` matches any user) and host
//! (`*` matches any) match: any DENY for the operation (or ALL) denies; else an ALLOW for it,
//! for ALL, or one implying it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
//! implies DESCRIBE_CONFIGS) allows; else denied, unless no ACL at all matches the resource
//! and `allow.everyone.if.no.acl.found` is set.
//!
//! Invariants: a stored binding is valid (`validate`): a concrete resource type, LITERAL or
//! PREFIXED, a concrete operation and permission, a non-empty resource name.

use uuid::Uuid;

pub const ANY: i8 = 1;
pub const MATCH: i8 = 2;
pub const LITERAL: i8 = 3;
pub const PREFIXED: i8 = 4;
pub const ALL: i8 = 2;
pub const READ: i8 = 3;
pub const WRITE: i8 = 4;
pub const CREATE: i8 = 5;
pub const DELETE: i8 = 6;
pub const ALTER: i8 = 7;
pub const DESCRIBE: i8 = 8;
pub const CLUSTER_ACTION: i8 = 9;
pub const DESCRIBE_CONFIGS: i8 = 10;
pub const ALTER_CONFIGS: i8 = 11;
pub const IDEMPOTENT_WRITE: i8 = 12;
pub const CREATE_TOKENS: i8 = 13;
pub const DESCRIBE_TOKENS: i8 = 14;
pub const TOPIC: i8 = 2;
pub const GROUP: i8 = 3;
pub const CLUSTER: i8 = 4;
pub const TRANSACTIONAL_ID: i8 = 5;
pub const DELEGATION_TOKEN: i8 = 6;
pub const USER: i8 = 7;
/// The name of the one cluster resource (Kafka's `CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";
pub const DENY: i8 = 2;
pub const ALLOW: i8 = 3;
const WILDCARD: &str = "*";
const WILDCARD_USER: &str = "User:*";

/// One ACL: a resource pattern and an access control entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBinding {
    pub id: Uuid,
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

fn name_of(code: i8, names: &[&str]) -> String {
    names.get(code as usize).map_or_else(|| code.to_string(), |n| n.to_string())
}

const RESOURCE_TYPES: &[&str] =
    &["UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"];
const PATTERN_TYPES: &[&str] = &["UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"];
const OPERATIONS: &[&str] = &[
    "UNKNOWN",
    "ANY",
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
    "TWO_PHASE_COMMIT",
];
const PERMISSIONS: &[&str] = &["UNKNOWN", "ANY", "DENY", "ALLOW"];

/// Kafka's name of an operation code (`AclOperation`), for logs.
pub fn operation_name(code: i8) -> String {
    name_of(code, OPERATIONS)
}

impl AclBinding {
    /// Kafka's `AclControlManager.validateNewAcl`: the message of the INVALID_REQUEST.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=7).contains(&self.resource_type) {
            return Err(format!("Invalid resourceType {}", name_of(self.resource_type, RESOURCE_TYPES)));
        }
        if !matches!(self.pattern_type, LITERAL | PREFIXED) {
            return Err(format!("Invalid patternType {}", name_of(self.pattern_type, PATTERN_TYPES)));
        }
        if !(2..=15).contains(&self.operation) {
            return Err(format!("Invalid operation {}", name_of(self.operation, OPERATIONS)));
        }
        if !matches!(self.permission, DENY | ALLOW) {
            return Err(format!("Invalid permissionType {}", name_of(self.permission, PERMISSIONS)));
        }
        if self.resource_name.is_empty() {
            return Err("Resource name should not be empty".into());
        }
        Ok(())
    }

    /// Whether this ACL's pattern covers a resource of `resource_type` named `name`.
    fn covers(&self, resource_type: i8, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                LITERAL => self.resource_name == name || self.resource_name == WILDCARD,
                PREFIXED => name.starts_with(&self.resource_name),
                _ => false,
            }
    }

    /// Whether this ACL grants (ALLOW) or refuses (DENY) `operation`.
    fn applies_to(&self, operation: i8) -> bool {
        if self.operation == operation || self.operation == ALL {
            return true;
        }
        // Implied operations hold for ALLOW only, as in Kafka.
        self.permission == ALLOW
            && match operation {
                DESCRIBE => matches!(self.operation, READ | WRITE | DELETE | ALTER),
                DESCRIBE_CONFIGS => self.operation == ALTER_CONFIGS,
                _ => false,
            }
    }
}

/// A DescribeAcls / DeleteAcls filter (Kafka's `AclBindingFilter`): `None` and ANY match all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl AclFilter {
    /// The filter matching every ACL.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ANY,
            resource_name: None,
            pattern_type: ANY,
            principal: None,
            host: None,
            operation: ANY,
            permission: ANY,
        }
    }

    pub fn matches(&self, acl: &AclBinding) -> bool {
        let resource = (self.resource_type == ANY || self.resource_type == acl.resource_type)
            && match self.pattern_type {
                ANY => self.resource_name.as_ref().is_none_or(|n| *n == acl.resource_name),
                // MATCH: every pattern that would match a resource of that name.
                MATCH => self.resource_name.as_ref().is_none_or(|n| match acl.pattern_type {
                    LITERAL => acl.resource_name == *n || acl.resource_name == WILDCARD,
                    PREFIXED => n.starts_with(&acl.resource_name),
                    _ => false,
                }),
                p => p == acl.pattern_type && self.resource_name.as_ref().is_none_or(|n| *n == acl.resource_name),
            };
        resource
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == ANY || self.operation == acl.operation)
            && (self.permission == ANY || self.permission == acl.permission)
    }

    /// Kafka refuses filters with an UNKNOWN field.
    pub fn validate(&self) -> Result<(), String> {
        if self.resource_type == 0 || self.pattern_type == 0 || self.operation == 0 || self.permission == 0 {
            return Err("Filter contains UNKNOWN elements".into());
        }
        Ok(())
    }
}

/// The authorizer's configuration (`super.users`, `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default)]
pub struct AuthorizerConfig {
    pub super_users: Vec<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// Kafka's decision for `principal` from `host` doing `operation` on a resource.
pub fn authorize(
    config: &AuthorizerConfig,
    acls: &[AclBinding],
    principal: &str,
    host: &str,
    operation: i8,
    resource_type: i8,
    resource_name: &str,
) -> bool {
    if config.super_users.iter().any(|s| s == principal) {
        return true;
    }
    let on_resource: Vec<&AclBinding> = acls.iter().filter(|a| a.covers(resource_type, resource_name)).collect();
    if on_resource.is_empty() {
        return config.allow_everyone_if_no_acl_found;
    }
    let relevant = |a: &&&AclBinding| {
        (a.principal == principal || (a.principal == WILDCARD_USER && principal.starts_with("User:")))
            && (a.host == host || a.host == WILDCARD)
            && a.applies_to(operation)
    };
    if on_resource.iter().filter(relevant).any(|a| a.permission == DENY) {
        return false;
    }
    on_resource.iter().filter(relevant).any(|a| a.permission == ALLOW)
}

/// Whether `principal` may do `operation` on some resource of `resource_type` (Kafka's default
/// `Authorizer.authorizeByResourceType`, which StandardAuthorizer keeps): allowed when the
/// decision for a resource named `hardcode` allows (super users, `allow.everyone.if.no.acl.found`);
/// otherwise when one of the principal's ALLOW ACLs for exactly this operation (or ALL; no
/// implied operations here) is a literal `*`, or names a literal or prefix that no DENY
/// dominates (a literal DENY of the same name, a prefixed DENY of one of its prefixes); a
/// literal DENY of `*` denies at once.
pub fn authorize_by_resource_type(
    config: &AuthorizerConfig,
    acls: &[AclBinding],
    principal: &str,
    host: &str,
    operation: i8,
    resource_type: i8,
) -> bool {
    if authorize(config, acls, principal, host, operation, resource_type, "hardcode") {
        return true;
    }
    let mine = acls.iter().filter(|a| {
        a.resource_type == resource_type
            && (a.host == host || a.host == WILDCARD)
            && (a.principal == principal || a.principal == WILDCARD_USER)
            && (a.operation == operation || a.operation == ALL)
    });
    let (mut deny_literal, mut deny_prefixed, mut allows) = (Vec::new(), Vec::new(), Vec::new());
    for a in mine {
        match (a.permission, a.pattern_type) {
            (DENY, LITERAL) if a.resource_name == WILDCARD => return false,
            (DENY, LITERAL) => deny_literal.push(a.resource_name.as_str()),
            (DENY, PREFIXED) => deny_prefixed.push(a.resource_name.as_str()),
            (ALLOW, LITERAL) if a.resource_name == WILDCARD => return true,
            (ALLOW, _) => allows.push((a.pattern_type, a.resource_name.as_str())),
            _ => {}
        }
    }
    allows.iter().any(|(pattern, name)| {
        let literal_denied = *pattern == LITERAL && deny_literal.contains(name);
        let prefix_denied = deny_prefixed.iter().any(|d| name.starts_with(d));
        !literal_denied && !prefix_denied
    })
}

/// CreateAcls' decision (Kafka's `AclControlManager.createAcls`): each binding validated, a valid
/// one new unless an identical ACL exists (or came earlier in the same request), with a fresh id.
/// Returns the new ACLs and a result per binding.
pub fn plan_creations(
    existing: &[AclBinding],
    bindings: Vec<AclBinding>,
) -> (Vec<AclBinding>, Vec<Result<(), String>>) {
    let mut added: Vec<AclBinding> = Vec::new();
    let mut results = Vec::with_capacity(bindings.len());
    for binding in bindings {
        if let Err(why) = binding.validate() {
            results.push(Err(why));
            continue;
        }
        let same = |a: &AclBinding| AclBinding { id: a.id, ..binding.clone() } == *a;
        if !existing.iter().any(same) && !added.iter().any(same) {
            added.push(AclBinding { id: uuid::Uuid::from_bytes(crate::metadata::random_bytes()), ..binding });
        }
        results.push(Ok(()));
    }
    (added, results)
}

/// DeleteAcls' decision: per filter the ACLs it matches, and the ACLs no filter matches.
pub fn plan_deletions(existing: &[AclBinding], filters: &[AclFilter]) -> (Vec<Vec<AclBinding>>, Vec<AclBinding>) {
    let removed = filters.iter().map(|f| existing.iter().filter(|a| f.matches(a)).cloned().collect()).collect();
    let kept = existing.iter().filter(|a| !filters.iter().any(|f| f.matches(a))).cloned().collect();
    (removed, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, pattern: i8, principal: &str, op: i8, permission: i8) -> AclBinding {
        AclBinding {
            id: Uuid::nil(),
            resource_type: TOPIC,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission,
        }
    }

    #[test]
    fn decisions_follow_kafkas_rules() {
        let config = AuthorizerConfig { super_users: vec!["User:admin".into()], allow_everyone_if_no_acl_found: false };
        let acls = vec![
            acl("orders", LITERAL, "User:alice", READ, ALLOW),
            acl("pay-", PREFIXED, "User:alice", WRITE, ALLOW),
            acl("pay-secret", LITERAL, "User:*", ALL, DENY),
            acl("*", LITERAL, "User:bob", DESCRIBE, ALLOW),
        ];
        let can = |p: &str, op: i8, name: &str| authorize(&config, &acls, p, "10.0.0.1", op, TOPIC, name);
        assert!(can("User:alice", READ, "orders"));
        assert!(can("User:alice", DESCRIBE, "orders"), "READ implies DESCRIBE");
        assert!(!can("User:alice", WRITE, "orders"));
        assert!(can("User:alice", WRITE, "pay-in"), "prefixed");
        assert!(!can("User:alice", WRITE, "pay-secret"), "DENY wins, User:* matches alice");
        assert!(can("User:bob", DESCRIBE, "anything"), "the * resource");
        assert!(!can("User:bob", READ, "anything"), "DESCRIBE implies nothing");
        assert!(can("User:admin", WRITE, "pay-secret"), "super users skip ACLs");
        assert!(!can("User:carol", READ, "no-acl-topic"), "no ACL: denied by default");
        let open = AuthorizerConfig { allow_everyone_if_no_acl_found: true, ..config.clone() };
        assert!(!authorize(&open, &acls, "User:carol", "h", READ, TOPIC, "no-acl-topic"), "bob's `*` ACL is on it");
        assert!(authorize(&open, &acls, "User:carol", "h", READ, GROUP, "g1"), "no ACL on the group at all");
        assert!(!authorize(&config, &acls, "User:carol", "h", READ, GROUP, "g1"));
        assert!(!authorize(&open, &acls, "User:carol", "h", READ, TOPIC, "orders"), "ACLs exist on it");
        let deny_describe = vec![acl("t", LITERAL, "User:dan", ALL, ALLOW), acl("t", LITERAL, "User:dan", READ, DENY)];
        assert!(
            authorize(&config, &deny_describe, "User:dan", "h", DESCRIBE, TOPIC, "t"),
            "a DENY READ does not deny DESCRIBE"
        );
        assert!(!authorize(&config, &deny_describe, "User:dan", "h", READ, TOPIC, "t"));
    }

    #[test]
    fn by_resource_type_follows_kafkas_default_rule() {
        let config = AuthorizerConfig { super_users: vec!["User:admin".into()], allow_everyone_if_no_acl_found: false };
        let by_type = |acls: &[AclBinding], p: &str| authorize_by_resource_type(&config, acls, p, "h", WRITE, TOPIC);
        assert!(by_type(&[], "User:admin"), "super users");
        assert!(!by_type(&[], "User:alice"), "no ACL at all");
        assert!(by_type(&[acl("orders", LITERAL, "User:alice", WRITE, ALLOW)], "User:alice"));
        assert!(!by_type(&[acl("orders", LITERAL, "User:alice", READ, ALLOW)], "User:alice"), "another operation");
        assert!(by_type(&[acl("orders", LITERAL, "User:*", ALL, ALLOW)], "User:alice"), "ALL and User:*");
        let dominated =
            [acl("pay-in", LITERAL, "User:alice", WRITE, ALLOW), acl("pay", PREFIXED, "User:alice", WRITE, DENY)];
        assert!(!by_type(&dominated, "User:alice"), "a prefixed DENY dominates the literal ALLOW");
        let same = [acl("t", LITERAL, "User:alice", WRITE, ALLOW), acl("t", LITERAL, "User:alice", WRITE, DENY)];
        assert!(!by_type(&same, "User:alice"), "a literal DENY of the same name");
        let other = [acl("t", LITERAL, "User:alice", WRITE, ALLOW), acl("u", LITERAL, "User:alice", WRITE, DENY)];
        assert!(by_type(&other, "User:alice"), "a DENY elsewhere leaves the ALLOW");
        let wild_deny = [acl("t", LITERAL, "User:alice", WRITE, ALLOW), acl("*", LITERAL, "User:*", WRITE, DENY)];
        assert!(!by_type(&wild_deny, "User:alice"));
        let open = AuthorizerConfig { allow_everyone_if_no_acl_found: true, ..config.clone() };
        assert!(authorize_by_resource_type(&open, &[], "User:bob", "h", WRITE, TOPIC), "nothing on `hardcode`");
    }

    #[test]
    fn filters_and_validation_are_kafkas() {
        let a = acl("pay-", PREFIXED, "User:alice", WRITE, ALLOW);
        let b = acl("payments", LITERAL, "User:bob", READ, ALLOW);
        let any = AclFilter::any();
        assert!(any.matches(&a) && any.matches(&b));
        let matching = AclFilter { resource_name: Some("pay-x".into()), pattern_type: MATCH, ..any.clone() };
        assert!(matching.matches(&a) && !matching.matches(&b));
        let literal = AclFilter { resource_name: Some("payments".into()), pattern_type: LITERAL, ..any.clone() };
        assert!(!literal.matches(&a) && literal.matches(&b));
        assert_eq!(acl("t", ANY, "User:x", READ, ALLOW).validate(), Err("Invalid patternType ANY".into()));
        assert_eq!(acl("t", LITERAL, "User:x", ANY, ALLOW).validate(), Err("Invalid operation ANY".into()));
        assert_eq!(acl("", LITERAL, "User:x", READ, ALLOW).validate(), Err("Resource name should not be empty".into()));
        assert!(AclFilter { operation: 0, ..any }.validate().is_err());
    }
}
