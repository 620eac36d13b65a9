//! ACLs as cluster metadata, decided by the controller (Kafka's `AclControlManager`): CreateAcls
//! writes an AccessControlEntryRecord per new ACL (validated as Kafka validates, an identical
//! ACL already present or earlier in the request is a success writing nothing, each new one a
//! fresh id), DeleteAcls a RemoveAccessControlEntryRecord per ACL some filter matches (once,
//! however many filters match it). Brokers authorize with the ACLs of their images.
//! Invariants: records only name ACLs the image has (removals) or does not have (additions);
//! every binding and filter of a request gets one result, in order.

use crate::metadata::image::MetadataImage;
use crate::metadata::records::{MetadataRecord, RemoveAccessControlEntryRecord};
use crate::security::acl::{self, AclBinding, AclFilter};
use crate::security::acl_store::{bindings_of, record_of};

/// CreateAcls: the records to write and a result per binding (`Err`: Kafka's INVALID_REQUEST
/// message).
pub fn create(image: &MetadataImage, bindings: Vec<AclBinding>) -> (Vec<MetadataRecord>, Vec<Result<(), String>>) {
    let (added, results) = acl::plan_creations(&bindings_of(image), bindings);
    let records = added.iter().map(|a| MetadataRecord::AccessControlEntry(record_of(a))).collect();
    (records, results)
}

/// DeleteAcls (filters already validated): the records to write and, per filter, the ACLs it
/// removes.
pub fn delete(image: &MetadataImage, filters: &[AclFilter]) -> (Vec<MetadataRecord>, Vec<Vec<AclBinding>>) {
    let (removed, _) = acl::plan_deletions(&bindings_of(image), filters);
    let ids: std::collections::BTreeSet<uuid::Uuid> = removed.iter().flatten().map(|a| a.id).collect();
    let records = ids
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id, ..Default::default() }))
        .collect();
    (records, removed)
}

/// DescribeAcls: the image's ACLs `filter` matches.
pub fn describe(image: &MetadataImage, filter: &AclFilter) -> Vec<AclBinding> {
    bindings_of(image).into_iter().filter(|a| filter.matches(a)).collect()
}

#[cfg(test)]
#[path = "acls_tests.rs"]
mod tests;
