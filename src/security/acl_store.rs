//! The ACLs of the cluster, when an authorizer is configured (`authorizer.class.name=
//! org.apache.kafka.metadata.authorizer.StandardAuthorizer`, Kafka's class name is the switch):
//! CreateAcls / DescribeAcls / DeleteAcls change and read them, `authorize` decides with them
//! (`acl.rs`).
//!
//! On disk: `<first log dir>/.ketch/acls.records`: the ACLs as Kafka's own metadata records
//! (`AccessControlEntryRecord`, in the file format of `records_file.rs`). Replaced atomically on
//! every change; read at start. (With the metadata log of issue 14 these records move into
//! `__cluster_metadata`.) On a broker of a cluster the ACLs are the metadata image's instead
//! (`read_from_image`, Kafka's `StandardAuthorizer` loading `AclsImage`): the controller writes
//! them, CreateAcls / DeleteAcls are forwarded to it, and the file is not used.
//! Invariants: every stored ACL is valid and has a unique id; a change is acknowledged only once
//! the file holding it is durable; a cluster broker decides with the ACLs of its latest image.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::acl::{self, AclBinding, AclFilter, AuthorizerConfig};
use super::records_file;
use crate::config::Properties;
use crate::metadata::image::MetadataImage;
use crate::metadata::records::{AccessControlEntryRecord, MetadataRecord};
use crate::security::scram_store::ImageSource;

/// Kafka's authorizer class: configuring it turns ACLs on.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

pub struct AclStore {
    path: PathBuf,
    pub config: AuthorizerConfig,
    acls: RwLock<Vec<AclBinding>>,
    /// Set on a broker of a cluster: the ACLs are the metadata image's.
    image: OnceLock<ImageSource>,
    /// The image's ACLs as bindings, for the image at that offset.
    from_image: Mutex<(i64, Arc<Vec<AclBinding>>)>,
}

/// An ACL change refused: INVALID_REQUEST with Kafka's message, or a storage error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclError {
    Invalid(String),
    Storage(String),
}

impl AclStore {
    /// `None` when no authorizer is configured (the ACL APIs then answer SECURITY_DISABLED).
    pub fn open(properties: &Properties, metadata_dir: &std::path::Path) -> anyhow::Result<Option<AclStore>> {
        match authorizer_class(properties) {
            None => return Ok(None),
            Some(STANDARD_AUTHORIZER) => {}
            Some(other) => anyhow::bail!("authorizer.class.name={other} is not supported: use {STANDARD_AUTHORIZER}"),
        }
        let config = AuthorizerConfig {
            super_users: properties
                .get("super.users")
                .map(|s| s.split(';').map(|u| u.trim().to_string()).filter(|u| !u.is_empty()).collect())
                .unwrap_or_default(),
            allow_everyone_if_no_acl_found: properties
                .get("allow.everyone.if.no.acl.found")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        };
        let path = metadata_dir.join(".ketch").join("acls.records");
        let acls = match std::fs::read(&path) {
            Ok(bytes) => decode_file(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        Ok(Some(AclStore {
            path,
            config,
            acls: RwLock::new(acls),
            image: OnceLock::new(),
            from_image: Mutex::new((-1, Arc::new(Vec::new()))),
        }))
    }

    /// From now on the ACLs are those of the metadata image `source` gives (a broker of a
    /// cluster). Set once; later calls are ignored.
    pub fn read_from_image(&self, source: ImageSource) {
        let _ = self.image.set(source);
    }

    /// Whether the ACLs are the metadata image's (a cluster broker's).
    pub fn is_from_image(&self) -> bool {
        self.image.get().is_some()
    }

    /// Runs `f` on the ACLs in force: the latest image's on a cluster broker (none before it has
    /// one), the file's otherwise.
    fn with_acls<T>(&self, f: impl FnOnce(&[AclBinding]) -> T) -> T {
        let Some(source) = self.image.get() else {
            return f(&self.acls.read().unwrap_or_else(|p| p.into_inner()));
        };
        let Some(image) = source() else { return f(&[]) };
        let acls = {
            let mut cached = self.from_image.lock().unwrap_or_else(|p| p.into_inner());
            if cached.0 != image.offset {
                *cached = (image.offset, Arc::new(bindings_of(&image)));
            }
            cached.1.clone()
        };
        f(&acls)
    }

    /// CreateAcls: each binding is validated; the valid ones are stored together.
    pub fn create(&self, bindings: Vec<AclBinding>) -> Vec<Result<(), AclError>> {
        let mut acls = self.acls.write().unwrap_or_else(|p| p.into_inner());
        let (added, results) = acl::plan_creations(&acls, bindings);
        let mut results: Vec<Result<(), AclError>> =
            results.into_iter().map(|r| r.map_err(AclError::Invalid)).collect();
        if added.is_empty() {
            return results;
        }
        let next: Vec<AclBinding> = acls.iter().cloned().chain(added).collect();
        if let Err(e) = self.save(&next) {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(AclError::Storage(e.to_string()));
            }
            return results;
        }
        *acls = next;
        results
    }

    pub fn describe(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.with_acls(|acls| acls.iter().filter(|a| filter.matches(a)).cloned().collect())
    }

    /// DeleteAcls: per filter, the ACLs it removed.
    pub fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, AclError> {
        let mut acls = self.acls.write().unwrap_or_else(|p| p.into_inner());
        let (removed, next) = acl::plan_deletions(&acls, filters);
        if next.len() != acls.len() {
            self.save(&next).map_err(|e| AclError::Storage(e.to_string()))?;
            *acls = next;
        }
        Ok(removed)
    }

    /// The authorization decision for one operation on one resource.
    pub fn authorize(&self, principal: &str, host: &str, operation: i8, resource_type: i8, name: &str) -> bool {
        self.with_acls(|acls| acl::authorize(&self.config, acls, principal, host, operation, resource_type, name))
    }

    /// Whether some resource of `resource_type` allows `operation` (`acl::authorize_by_resource_type`).
    pub fn authorize_by_resource_type(&self, principal: &str, host: &str, operation: i8, resource_type: i8) -> bool {
        self.with_acls(|acls| {
            acl::authorize_by_resource_type(&self.config, acls, principal, host, operation, resource_type)
        })
    }

    fn save(&self, acls: &[AclBinding]) -> std::io::Result<()> {
        records_file::write(&self.path, acls.iter().map(|a| MetadataRecord::AccessControlEntry(record_of(a))))
    }
}

/// `authorizer.class.name` when set (trimmed, not empty).
pub fn authorizer_class(properties: &Properties) -> Option<&str> {
    properties.get("authorizer.class.name").map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// The ACLs a single node stored in `<metadata dir>/.ketch/acls.records`, as records (a single
/// node becoming a cluster's combined node); none without the file.
pub fn stored_records(metadata_dir: &std::path::Path) -> anyhow::Result<Vec<MetadataRecord>> {
    let path = metadata_dir.join(".ketch").join("acls.records");
    match std::fs::read(&path) {
        Ok(bytes) => Ok(decode_file(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            .iter()
            .map(|a| MetadataRecord::AccessControlEntry(record_of(a)))
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// The record keeping `a` (Kafka's `AccessControlEntryRecord`).
pub fn record_of(a: &AclBinding) -> AccessControlEntryRecord {
    AccessControlEntryRecord {
        id: a.id,
        resource_type: a.resource_type,
        resource_name: a.resource_name.clone(),
        pattern_type: a.pattern_type,
        principal: a.principal.clone(),
        host: a.host.clone(),
        operation: a.operation,
        permission_type: a.permission,
        ..Default::default()
    }
}

/// The image's ACLs as bindings, in id order.
pub fn bindings_of(image: &MetadataImage) -> Vec<AclBinding> {
    image.acls.values().map(binding).collect()
}

fn binding(r: &AccessControlEntryRecord) -> AclBinding {
    AclBinding {
        id: r.id,
        resource_type: r.resource_type,
        resource_name: r.resource_name.clone(),
        pattern_type: r.pattern_type,
        principal: r.principal.clone(),
        host: r.host.clone(),
        operation: r.operation,
        permission: r.permission_type,
    }
}

fn decode_file(bytes: &[u8]) -> Result<Vec<AclBinding>, String> {
    let mut acls = Vec::new();
    records_file::read(bytes, |record| match record {
        MetadataRecord::AccessControlEntry(r) => {
            acls.push(binding(&r));
            Ok(())
        }
        other => Err(format!("unexpected record {:?}", other.api_key())),
    })?;
    Ok(acls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acls_are_created_listed_deleted_and_kept_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut props = Properties::new();
        assert!(AclStore::open(&props, dir.path()).unwrap().is_none(), "no authorizer, no ACLs");
        props.insert("authorizer.class.name".into(), STANDARD_AUTHORIZER.into());
        props.insert("super.users".into(), "User:admin;User:ops".into());
        let store = AclStore::open(&props, dir.path()).unwrap().unwrap();
        assert_eq!(store.config.super_users, vec!["User:admin", "User:ops"]);
        let alice = AclBinding {
            id: uuid::Uuid::nil(),
            resource_type: 2,
            resource_name: "orders".into(),
            pattern_type: acl::LITERAL,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: acl::READ,
            permission: acl::ALLOW,
        };
        let bad = AclBinding { pattern_type: acl::MATCH, ..alice.clone() };
        let results = store.create(vec![alice.clone(), bad, alice.clone()]);
        assert_eq!(results[1], Err(AclError::Invalid("Invalid patternType MATCH".into())));
        assert!(results[0].is_ok() && results[2].is_ok());
        let all = AclFilter::any();
        assert_eq!(store.describe(&all).len(), 1, "the same binding twice is stored once");
        assert!(store.authorize("User:alice", "h", acl::DESCRIBE, 2, "orders"));
        assert!(!store.authorize("User:bob", "h", acl::READ, 2, "orders"));
        assert!(store.authorize("User:ops", "h", acl::ALTER, 4, "kafka-cluster"));
        let reopened = AclStore::open(&props, dir.path()).unwrap().unwrap();
        assert_eq!(reopened.describe(&all)[0].principal, "User:alice");
        let removed = reopened.delete(&[AclFilter { principal: Some("User:alice".into()), ..all.clone() }]).unwrap();
        assert_eq!(removed[0].len(), 1);
        assert!(AclStore::open(&props, dir.path()).unwrap().unwrap().describe(&all).is_empty());
        props.insert("authorizer.class.name".into(), "kafka.security.authorizer.AclAuthorizer".into());
        assert!(AclStore::open(&props, dir.path()).is_err(), "ZooKeeper's authorizer is not Kafka 4's");
    }
}
