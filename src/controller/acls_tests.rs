//! ACL decisions against a driven image: creations written once with fresh ids, invalid ones
//! refused, deletions matched by filters and written once per ACL.

use super::*;
use crate::controller::test_cluster::Cluster;

fn read_for(principal: &str, topic: &str) -> AclBinding {
    AclBinding {
        id: uuid::Uuid::nil(),
        resource_type: acl::TOPIC,
        resource_name: topic.into(),
        pattern_type: acl::LITERAL,
        principal: principal.into(),
        host: "*".into(),
        operation: acl::READ,
        permission: acl::ALLOW,
    }
}

fn all() -> AclFilter {
    AclFilter::any()
}

#[test]
fn acls_are_created_once_and_deleted_by_filter() {
    let mut c = Cluster::new();
    let alice = read_for("User:alice", "orders");
    let bad = AclBinding { pattern_type: acl::MATCH, ..alice.clone() };
    let (records, results) = create(&c.image, vec![alice.clone(), bad, alice.clone(), read_for("User:bob", "orders")]);
    assert_eq!(results[1], Err("Invalid patternType MATCH".to_string()));
    assert!(results[0].is_ok() && results[2].is_ok() && results[3].is_ok());
    assert_eq!(records.len(), 2, "alice's twice is one ACL: {records:?}");
    c.apply(&records);
    assert_eq!(describe(&c.image, &all()).len(), 2);
    let (records, results) = create(&c.image, vec![alice.clone()]);
    assert!(records.is_empty() && results[0].is_ok(), "an existing ACL is a success writing nothing");

    let by_alice = AclFilter { principal: Some("User:alice".into()), ..all() };
    let (records, removed) = delete(&c.image, &[by_alice.clone(), all()]);
    assert_eq!((removed[0].len(), removed[1].len()), (1, 2));
    assert_eq!(records.len(), 2, "each ACL removed once however many filters match it");
    c.apply(&records);
    assert!(describe(&c.image, &all()).is_empty());
    let (records, removed) = delete(&c.image, &[by_alice]);
    assert!(records.is_empty() && removed[0].is_empty());
}
