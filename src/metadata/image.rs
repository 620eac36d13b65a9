//! The metadata image: the cluster's metadata as of one offset of the metadata log, built by
//! applying Kafka's metadata records (`records.rs`) in log order (Kafka's `MetadataImage` and
//! `MetadataDelta`). Immutable once built: readers (handlers, the replica manager) hold an
//! `Arc<MetadataImage>` snapshot; a writer applies records to a copy and publishes the result.
//!
//! Covered today: features, topics and their partitions (replicas, ISR, ELR and its clearing,
//! leader, leader and partition epochs, directories), broker registrations (endpoints, rack, fencing, controlled
//! shutdown, log directories), configs, the producer-id block, and SCRAM credentials (salt,
//! stored and server keys, iterations: what a cluster broker authenticates with, as Kafka's
//! `ScramImage`), ACLs, client quotas and delegation tokens. Records of other kinds are counted,
//! not kept.
//!
//! Metadata transactions (BeginTransaction ... EndTransaction, KIP-868) are applied as a whole:
//! `ImageBuilder::published` never shows a half-applied transaction, and AbortTransaction drops
//! it.
//!
//! Invariants (checked, an error otherwise, as Kafka's deltas throw): topic names and ids are
//! unique; a partition belongs to a known topic and is created once; a change applies to an
//! existing partition and moves its partition epoch up by one (and its leader epoch by one when
//! the leader changes); a broker registration replaces the previous one of that id.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use super::records::{
    AccessControlEntryRecord, MetadataRecord, PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord,
};

/// Kafka's `PartitionChangeRecord.leader` value meaning "leader unchanged".
pub const NO_LEADER_CHANGE: i32 = -2;
/// Kafka's `LeaderRecoveryState.NO_CHANGE`.
const NO_RECOVERY_STATE_CHANGE: i8 = -1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionImage {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    pub leader: i32,
    pub leader_recovery_state: i8,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub directories: Vec<Uuid>,
    pub eligible_leader_replicas: Vec<i32>,
    pub last_known_elr: Vec<i32>,
}

impl PartitionImage {
    fn from_record(r: &PartitionRecord) -> PartitionImage {
        PartitionImage {
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            removing_replicas: r.removing_replicas.clone(),
            adding_replicas: r.adding_replicas.clone(),
            leader: r.leader,
            leader_recovery_state: r.leader_recovery_state,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            directories: r.directories.clone(),
            eligible_leader_replicas: r.eligible_leader_replicas.clone().unwrap_or_default(),
            last_known_elr: r.last_known_elr.clone().unwrap_or_default(),
        }
    }

    /// Kafka's `PartitionRegistration.merge`.
    pub fn merge(&self, c: &PartitionChangeRecord) -> PartitionImage {
        let (leader, leader_epoch) = if c.leader == NO_LEADER_CHANGE {
            (self.leader, self.leader_epoch)
        } else {
            (c.leader, self.leader_epoch + 1)
        };
        let pick = |new: &Option<Vec<i32>>, old: &Vec<i32>| new.clone().unwrap_or_else(|| old.clone());
        PartitionImage {
            replicas: pick(&c.replicas, &self.replicas),
            isr: pick(&c.isr, &self.isr),
            removing_replicas: pick(&c.removing_replicas, &self.removing_replicas),
            adding_replicas: pick(&c.adding_replicas, &self.adding_replicas),
            leader,
            leader_recovery_state: if c.leader_recovery_state == NO_RECOVERY_STATE_CHANGE {
                self.leader_recovery_state
            } else {
                c.leader_recovery_state
            },
            leader_epoch,
            partition_epoch: self.partition_epoch + 1,
            directories: c.directories.clone().unwrap_or_else(|| self.directories.clone()),
            eligible_leader_replicas: pick(&c.eligible_leader_replicas, &self.eligible_leader_replicas),
            last_known_elr: pick(&c.last_known_elr, &self.last_known_elr),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionImage>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointImage {
    pub listener: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerImage {
    pub id: i32,
    pub epoch: i64,
    pub incarnation_id: Uuid,
    pub endpoints: Vec<EndpointImage>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
    pub log_dirs: Vec<Uuid>,
    /// The feature levels the broker registered as supported: name -> (min, max).
    pub supported_features: BTreeMap<String, (i16, i16)>,
}

impl BrokerImage {
    fn from_record(r: &RegisterBrokerRecord) -> BrokerImage {
        BrokerImage {
            id: r.broker_id,
            epoch: r.broker_epoch,
            incarnation_id: r.incarnation_id,
            endpoints: r
                .end_points
                .iter()
                .map(|e| EndpointImage {
                    listener: e.name.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    security_protocol: e.security_protocol,
                })
                .collect(),
            rack: r.rack.clone(),
            fenced: r.fenced,
            in_controlled_shutdown: r.in_controlled_shutdown,
            log_dirs: r.log_dirs.clone(),
            supported_features: r
                .features
                .iter()
                .map(|f| (f.name.clone(), (f.min_supported_version, f.max_supported_version)))
                .collect(),
        }
    }
}

/// One SCRAM credential (never a password: what the server verifies a login with). Its `Debug`
/// hides the salt and the keys (`security::redact`).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredentialImage {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredentialImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::security::redact::Hidden;
        f.debug_struct("ScramCredentialImage")
            .field("salt", &Hidden)
            .field("stored_key", &Hidden)
            .field("server_key", &Hidden)
            .field("iterations", &self.iterations)
            .finish()
    }
}

/// A record the image cannot apply (the log is inconsistent, or not Kafka's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata record at offset {offset} cannot be applied: {reason}")]
pub struct ImageError {
    pub offset: i64,
    pub reason: String,
}

/// The cluster metadata as of `offset` (Kafka's `MetadataImage`). Its `Debug` hides the values
/// of password configs and the SCRAM credentials (`security::redact`).
#[derive(Clone, Default, PartialEq)]
pub struct MetadataImage {
    /// The offset of the last record applied (-1: none).
    pub offset: i64,
    /// Finalized features above level 0.
    pub features: BTreeMap<String, i16>,
    pub topics: HashMap<Uuid, Arc<TopicImage>>,
    pub topic_ids: HashMap<String, Uuid>,
    pub brokers: BTreeMap<i32, BrokerImage>,
    /// (resource type, resource name) -> config name -> value.
    pub configs: BTreeMap<(i8, String), BTreeMap<String, String>>,
    /// The next producer id to hand out (the end of the last allocated block).
    pub next_producer_id: i64,
    /// SCRAM credentials: (user, mechanism type) -> credential (UserScramCredentialRecord and
    /// RemoveUserScramCredentialRecord).
    pub scram: BTreeMap<(String, i8), ScramCredentialImage>,
    /// ACLs by id (AccessControlEntryRecord and RemoveAccessControlEntryRecord), what a cluster
    /// broker's authorizer decides with (Kafka's `AclsImage`).
    pub acls: BTreeMap<Uuid, AccessControlEntryRecord>,
    /// Client quotas by entity (ClientQuotaRecord), what a cluster broker throttles with
    /// (Kafka's `ClientQuotasImage`).
    pub quotas: crate::quota::entity::Quotas,
    /// Delegation tokens by id (DelegationTokenRecord and RemoveDelegationTokenRecord, Kafka's
    /// `DelegationTokenImage`): what a broker's token logins and DescribeDelegationToken read.
    pub delegation_tokens: crate::security::tokens::Tokens,
    /// Controllers registered with the quorum (KIP-919: RegisterControllerRecord), by id.
    pub controllers: BTreeMap<i32, crate::metadata::records::RegisterControllerRecord>,
    /// Records of kinds the image does not keep yet, by record name.
    pub not_kept: BTreeMap<&'static str, u64>,
}

/// `Debug` of the image's configs, each resource's through `security::redact::Configs`.
struct ResourceConfigs<'a>(&'a BTreeMap<(i8, String), BTreeMap<String, String>>);

impl std::fmt::Debug for ResourceConfigs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.0.iter().map(|(k, v)| (k, crate::security::redact::Configs(v)))).finish()
    }
}

impl std::fmt::Debug for MetadataImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field, by name: a new field does not compile until it is printed here too.
        let MetadataImage {
            offset,
            features,
            topics,
            topic_ids,
            brokers,
            configs,
            next_producer_id,
            scram,
            acls,
            quotas,
            delegation_tokens,
            controllers,
            not_kept,
        } = self;
        f.debug_struct("MetadataImage")
            .field("offset", offset)
            .field("features", features)
            .field("topics", topics)
            .field("topic_ids", topic_ids)
            .field("brokers", brokers)
            .field("configs", &ResourceConfigs(configs))
            .field("next_producer_id", next_producer_id)
            .field("scram", scram)
            .field("acls", acls)
            .field("quotas", quotas)
            .field("delegation_tokens", delegation_tokens)
            .field("controllers", controllers)
            .field("not_kept", not_kept)
            .finish()
    }
}

impl MetadataImage {
    pub fn empty() -> MetadataImage {
        MetadataImage { offset: -1, ..Default::default() }
    }

    /// Whether the finalized `metadata.version` is at least `level` (what a record kind needs).
    pub fn metadata_version_at_least(&self, level: i16) -> bool {
        self.features.get("metadata.version").is_some_and(|&l| l >= level)
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// `host:port` of `broker`'s endpoint on `listener` (brackets around an IPv6 host).
    pub fn endpoint_addr(&self, broker: i32, listener: &str) -> Option<String> {
        let b = self.brokers.get(&broker)?;
        let e = b.endpoints.iter().find(|e| e.listener == listener)?;
        Some(if e.host.contains(':') { format!("[{}]:{}", e.host, e.port) } else { format!("{}:{}", e.host, e.port) })
    }

    /// Applies one record (at `offset`) to this image; a record no controller writes (see
    /// `impossible_partition`) or one that does not fit the image is refused, the image unchanged.
    fn apply(&mut self, offset: i64, record: &MetadataRecord) -> Result<(), ImageError> {
        let fail = |reason: String| Err(ImageError { offset, reason });
        match record {
            MetadataRecord::FeatureLevel(r) => {
                if r.feature_level == 0 {
                    self.features.remove(&r.name);
                } else {
                    self.features.insert(r.name.clone(), r.feature_level);
                }
            }
            MetadataRecord::Topic(r) => {
                if self.topic_ids.contains_key(&r.name) || self.topics.contains_key(&r.topic_id) {
                    return fail(format!("topic {} ({}) exists already", r.name, r.topic_id));
                }
                self.topic_ids.insert(r.name.clone(), r.topic_id);
                let topic = TopicImage { name: r.name.clone(), id: r.topic_id, partitions: BTreeMap::new() };
                self.topics.insert(r.topic_id, Arc::new(topic));
            }
            MetadataRecord::Partition(r) => {
                let Some(topic) = self.topics.get_mut(&r.topic_id) else {
                    return fail(format!("partition {} of unknown topic {}", r.partition_id, r.topic_id));
                };
                if let Some(why) = impossible_partition(r.partition_id, &r.replicas) {
                    return fail(why);
                }
                let topic = Arc::make_mut(topic);
                if topic.partitions.insert(r.partition_id, PartitionImage::from_record(r)).is_some() {
                    return fail(format!("partition {}-{} created twice", topic.name, r.partition_id));
                }
            }
            MetadataRecord::PartitionChange(c) => {
                let Some(topic) = self.topics.get_mut(&c.topic_id) else {
                    return fail(format!("change of a partition of unknown topic {}", c.topic_id));
                };
                let topic = Arc::make_mut(topic);
                let Some(partition) = topic.partitions.get_mut(&c.partition_id) else {
                    return fail(format!("change of unknown partition {}-{}", topic.name, c.partition_id));
                };
                let merged = partition.merge(c);
                if let Some(why) = impossible_partition(c.partition_id, &merged.replicas) {
                    return fail(why);
                }
                *partition = merged;
            }
            MetadataRecord::RemoveTopic(r) => {
                let Some(topic) = self.topics.remove(&r.topic_id) else {
                    return fail(format!("removal of unknown topic {}", r.topic_id));
                };
                self.topic_ids.remove(&topic.name);
                // Kafka drops the topic's configs with it.
                self.configs.remove(&(TOPIC_RESOURCE, topic.name.clone()));
            }
            MetadataRecord::Config(r) => {
                let configs = self.configs.entry((r.resource_type, r.resource_name.clone())).or_default();
                match &r.value {
                    Some(value) => {
                        configs.insert(r.name.clone(), value.clone());
                    }
                    None => {
                        configs.remove(&r.name);
                    }
                }
                if configs.is_empty() {
                    self.configs.remove(&(r.resource_type, r.resource_name.clone()));
                }
            }
            MetadataRecord::RegisterBroker(r) => {
                self.brokers.insert(r.broker_id, BrokerImage::from_record(r));
            }
            MetadataRecord::RegisterController(r) => {
                self.controllers.insert(r.controller_id, r.clone());
            }
            MetadataRecord::UnregisterBroker(r) => {
                self.brokers.remove(&r.broker_id);
            }
            MetadataRecord::FenceBroker(r) => self.broker(offset, r.id, r.epoch)?.fenced = true,
            MetadataRecord::UnfenceBroker(r) => self.broker(offset, r.id, r.epoch)?.fenced = false,
            MetadataRecord::BrokerRegistrationChange(r) => {
                let broker = self.broker(offset, r.broker_id, r.broker_epoch)?;
                // Kafka's BrokerRegistrationFencingChange: 1 fence, -1 unfence, 0 none; and
                // BrokerRegistrationInControlledShutdownChange: 1 in controlled shutdown.
                match r.fenced {
                    1 => broker.fenced = true,
                    -1 => broker.fenced = false,
                    _ => {}
                }
                if r.in_controlled_shutdown == 1 {
                    broker.in_controlled_shutdown = true;
                }
                if !r.log_dirs.is_empty() {
                    broker.log_dirs = r.log_dirs.clone();
                }
            }
            MetadataRecord::ProducerIds(r) => self.next_producer_id = r.next_producer_id,
            MetadataRecord::UserScramCredential(r) => {
                let credential = ScramCredentialImage {
                    salt: r.salt.clone(),
                    stored_key: r.stored_key.clone(),
                    server_key: r.server_key.clone(),
                    iterations: r.iterations,
                };
                self.scram.insert((r.name.clone(), r.mechanism), credential);
            }
            MetadataRecord::RemoveUserScramCredential(r) => {
                // Kafka's ScramDelta: a removal of a credential the image lacks is no error.
                self.scram.remove(&(r.name.clone(), r.mechanism));
            }
            MetadataRecord::DelegationToken(_) | MetadataRecord::RemoveDelegationToken(_) => {
                crate::security::tokens::apply(&mut self.delegation_tokens, std::slice::from_ref(record));
            }
            MetadataRecord::AccessControlEntry(r) => {
                self.acls.insert(r.id, r.clone());
            }
            MetadataRecord::RemoveAccessControlEntry(r) => {
                self.acls.remove(&r.id);
            }
            MetadataRecord::ClientQuota(r) => {
                crate::quota::entity::apply(&mut self.quotas, [crate::quota::store::change_of(r)]);
            }
            MetadataRecord::ClearElr(r) => {
                // Kafka's TopicDelta.maybeClearElr: every partition (of the named topic, or of
                // all topics) with an ELR or a last known ELR gets both emptied, as a change.
                let ids: Vec<Uuid> = if r.topic_name.is_empty() {
                    self.topics.keys().copied().collect()
                } else {
                    match self.topic_ids.get(&r.topic_name) {
                        Some(id) => vec![*id],
                        None => return fail(format!("ELR cleared for unknown topic {}", r.topic_name)),
                    }
                };
                for id in ids {
                    let topic = Arc::make_mut(self.topics.get_mut(&id).expect("listed"));
                    for (&partition_id, partition) in topic.partitions.iter_mut() {
                        if partition.eligible_leader_replicas.is_empty() && partition.last_known_elr.is_empty() {
                            continue;
                        }
                        let clear = PartitionChangeRecord {
                            topic_id: id,
                            partition_id,
                            eligible_leader_replicas: Some(Vec::new()),
                            last_known_elr: Some(Vec::new()),
                            ..Default::default()
                        };
                        *partition = partition.merge(&clear);
                    }
                }
            }
            MetadataRecord::NoOp(_)
            | MetadataRecord::BeginTransaction(_)
            | MetadataRecord::EndTransaction(_)
            | MetadataRecord::AbortTransaction(_) => {}
            other => *self.not_kept.entry(record_name(other)).or_default() += 1,
        }
        self.offset = offset;
        Ok(())
    }

    fn broker(&mut self, offset: i64, id: i32, epoch: i64) -> Result<&mut BrokerImage, ImageError> {
        match self.brokers.get_mut(&id) {
            Some(b) if b.epoch == epoch => Ok(b),
            Some(b) => Err(ImageError { offset, reason: format!("broker {id} is at epoch {}, not {epoch}", b.epoch) }),
            None => Err(ImageError { offset, reason: format!("unknown broker {id}") }),
        }
    }
}

/// `ConfigResource.Type.TOPIC`.
pub const TOPIC_RESOURCE: i8 = 2;
/// ConfigRecord's resource type of a broker's configs ("" = the cluster default).
pub const BROKER_RESOURCE: i8 = 4;

fn record_name(record: &MetadataRecord) -> &'static str {
    match record {
        MetadataRecord::UserScramCredential(_) => "UserScramCredentialRecord",
        MetadataRecord::RemoveUserScramCredential(_) => "RemoveUserScramCredentialRecord",
        MetadataRecord::ClientQuota(_) => "ClientQuotaRecord",
        MetadataRecord::RegisterController(_) => "RegisterControllerRecord",
        MetadataRecord::ZkMigrationState(_) => "ZkMigrationStateRecord",
        _ => "other",
    }
}

/// Applies records in log order to a working image, and publishes snapshots of it between
/// metadata transactions (`publish`, typically once per batch of records read).
#[derive(Debug, Clone)]
pub struct ImageBuilder {
    working: MetadataImage,
    /// Inside a metadata transaction: the image before it (what an abort goes back to).
    before_txn: Option<MetadataImage>,
    published: Arc<MetadataImage>,
}

impl Default for ImageBuilder {
    fn default() -> Self {
        ImageBuilder::new()
    }
}

impl ImageBuilder {
    pub fn new() -> ImageBuilder {
        ImageBuilder { working: MetadataImage::empty(), before_txn: None, published: Arc::new(MetadataImage::empty()) }
    }

    /// Applies one record. On error the working image is unchanged by this record.
    pub fn apply(&mut self, offset: i64, record: &MetadataRecord) -> Result<(), ImageError> {
        match record {
            MetadataRecord::BeginTransaction(_) => {
                if self.before_txn.is_some() {
                    return Err(ImageError { offset, reason: "a transaction begins inside another".into() });
                }
                self.before_txn = Some(self.working.clone());
            }
            MetadataRecord::EndTransaction(_) if self.before_txn.take().is_none() => {
                return Err(ImageError { offset, reason: "end of a transaction that did not begin".into() });
            }
            MetadataRecord::AbortTransaction(_) => {
                if let Some(before) = self.before_txn.take() {
                    self.working = before;
                }
            }
            _ => {}
        }
        self.working.apply(offset, record)
    }

    /// The image as applied so far, unless a metadata transaction is open (what a snapshot
    /// holds: never half a transaction).
    pub fn settled(&self) -> Option<&MetadataImage> {
        self.before_txn.is_none().then_some(&self.working)
    }

    /// Publishes the working image, unless a metadata transaction is open (then the last image
    /// published before it stays), and returns the published image.
    pub fn publish(&mut self) -> Arc<MetadataImage> {
        if self.before_txn.is_none() && self.working.offset != self.published.offset {
            self.published = Arc::new(self.working.clone());
        }
        self.published.clone()
    }
}

/// Why a partition no controller makes is refused, if it is one: a negative partition id, no
/// replicas, a negative or repeated replica id (the metadata log is a peer's input too: such a
/// record would name directories and fetchers after it).
fn impossible_partition(partition_id: i32, replicas: &[i32]) -> Option<String> {
    if partition_id < 0 {
        return Some(format!("partition id {partition_id} is negative"));
    }
    if replicas.is_empty() {
        return Some(format!("partition {partition_id} has no replicas"));
    }
    let mut seen = std::collections::BTreeSet::new();
    let bad = replicas.iter().find(|&&r| r < 0 || !seen.insert(r));
    bad.map(|r| format!("partition {partition_id} has replicas {replicas:?}: {r} is negative or repeated"))
}

#[cfg(test)]
#[path = "image_tests.rs"]
pub(crate) mod tests;
