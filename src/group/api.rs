//! The group coordinator's operations for the membership request handlers (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, ListGroups, DescribeGroups, DeleteGroups): each takes the
//! coordinator's lock itself and returns plain data, so handlers never hold it. The rules are
//! the group state machine's (`state.rs`); what is written goes to `__consumer_offsets` as in
//! `mod.rs`.

use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::records::{Key, OffsetValue};
use super::{Group, GroupCoordinator, GroupState, JoinRequest, JoinResult, Reply, SyncRequest, SyncResult};
use crate::log::{now_ms, Partition};
use crate::metadata::TopicRegistry;
use std::sync::Arc;

/// A group as ListGroups shows it.
pub struct ListedGroup {
    pub id: String,
    pub state: &'static str,
    pub protocol_type: String,
    /// "classic" or "consumer" (KIP-848).
    pub group_type: &'static str,
}

/// A member as DescribeGroups shows it.
pub struct DescribedMember {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
pub enum DescribedGroup {
    /// Neither members nor offsets.
    Unknown,
    /// A KIP-848 consumer group (Kafka 4.1 describes it as not a classic group).
    NotClassic,
    /// Committed offsets only (Kafka shows it Empty).
    OffsetsOnly,
    Live {
        state: &'static str,
        protocol_type: String,
        protocol: String,
        members: Vec<DescribedMember>,
    },
}

impl GroupCoordinator {
    /// JoinGroup (after the request's own checks): joins now, or waits for the rebalance.
    pub fn join(&self, group_id: &str, join: JoinRequest) -> Reply<JoinResult> {
        let cfg = &self.config;
        let mut inner = self.lock();
        if inner.consumer.get(group_id).is_some_and(|g| !g.members.is_empty()) {
            // Kafka 4.1 would let a classic member join a consumer group (mixed groups, online
            // migration); Ketch does not serve mixed groups.
            return Reply::Now(JoinResult::error(ResponseError::InconsistentGroupProtocol, &join.member_id));
        }
        // An empty consumer group becomes a classic one (its offsets stay); the classic
        // group's record replaces it at replay.
        inner.consumer.remove(group_id);
        let full = inner
            .groups
            .get(group_id)
            .is_some_and(|g| g.members.len() >= cfg.max_group_size && !g.members.contains_key(&join.member_id));
        if full {
            return Reply::Now(JoinResult::error(ResponseError::GroupMaxSizeReached, &join.member_id));
        }
        let group = inner.groups.entry(group_id.to_string()).or_insert_with(|| Group::new(group_id, now_ms()));
        group.join(join, Instant::now(), now_ms(), cfg.initial_rebalance_delay)
    }

    /// SyncGroup: the leader's assignments, or wait for them.
    pub fn sync(&self, group_id: &str, req: SyncRequest<'_>, assignments: Vec<(String, Bytes)>) -> Reply<SyncResult> {
        let SyncRequest { member_id, instance_id, generation, protocol_type, protocol_name } = req;
        let mut inner = self.lock();
        let Some(group) = inner.groups.get_mut(group_id) else {
            return Reply::Now(SyncResult { error: ResponseError::UnknownMemberId.code(), ..Default::default() });
        };
        let mismatch = protocol_type.is_some_and(|t| Some(t) != group.protocol_type.as_deref())
            || protocol_name.is_some_and(|n| Some(n) != group.protocol.as_deref());
        if mismatch && group.members.contains_key(member_id) {
            return Reply::Now(SyncResult {
                error: ResponseError::InconsistentGroupProtocol.code(),
                ..Default::default()
            });
        }
        group.sync(member_id, instance_id, generation, assignments, now_ms())
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        let mut inner = self.lock();
        let group = inner.groups.get_mut(group_id).ok_or(ResponseError::UnknownMemberId)?;
        group.heartbeat(member_id, instance_id, generation, Instant::now())
    }

    /// LeaveGroup: (member id, instance id, error code) per leaving member.
    pub fn leave(&self, group_id: &str, leaving: Vec<(String, Option<String>)>) -> Vec<(String, Option<String>, i16)> {
        let mut inner = self.lock();
        match inner.groups.get_mut(group_id) {
            None => leaving.into_iter().map(|(m, i)| (m, i, ResponseError::UnknownMemberId.code())).collect(),
            Some(group) => leaving
                .into_iter()
                .map(|(m, i)| {
                    let error = group.leave(&m, i.as_deref(), Instant::now(), now_ms()).err().map_or(0, |e| e.code());
                    (m, i, error)
                })
                .collect(),
        }
    }

    /// Every group with members or committed offsets, sorted by id.
    pub fn list(&self) -> Vec<ListedGroup> {
        let inner = self.lock();
        let mut ids: Vec<&String> =
            inner.groups.keys().chain(inner.consumer.keys()).chain(inner.offsets.keys()).collect();
        ids.sort();
        ids.dedup();
        ids.into_iter()
            .map(|id| {
                let (state, protocol_type) = match inner.groups.get(id) {
                    Some(g) => (g.state.name(), g.protocol_type.clone().unwrap_or_default()),
                    None => match inner.consumer.get(id) {
                        Some(g) => {
                            return ListedGroup {
                                id: id.clone(),
                                state: g.state(),
                                protocol_type: "consumer".into(),
                                group_type: "consumer",
                            }
                        }
                        None => (GroupState::Empty.name(), String::new()),
                    },
                };
                ListedGroup { id: id.clone(), state, protocol_type, group_type: "classic" }
            })
            .collect()
    }

    pub fn describe(&self, group_id: &str) -> DescribedGroup {
        let inner = self.lock();
        let Some(g) = inner.groups.get(group_id) else {
            return if inner.consumer.contains_key(group_id) {
                DescribedGroup::NotClassic
            } else if inner.offsets.contains_key(group_id) {
                DescribedGroup::OffsetsOnly
            } else {
                DescribedGroup::Unknown
            };
        };
        let protocol = g.protocol.clone().unwrap_or_default();
        let members = g
            .members
            .values()
            .map(|m| DescribedMember {
                id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: m.metadata_for(&protocol),
                assignment: m.assignment.clone(),
            })
            .collect();
        DescribedGroup::Live {
            state: g.state.name(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }

    /// DeleteGroups for one group: refused unless it exists and has no members; writes the
    /// tombstones of its offsets and metadata (to be made durable by the caller).
    pub fn delete_group(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
    ) -> Result<Option<(Arc<Partition>, i64)>, ResponseError> {
        if let Some(written) = self.consumer_delete(topics, group_id) {
            return written;
        }
        let mut inner = self.lock();
        let exists = inner.groups.contains_key(group_id) || inner.offsets.contains_key(group_id);
        if !exists {
            return Err(ResponseError::GroupIdNotFound);
        }
        if inner.groups.get(group_id).is_some_and(|g| g.state != GroupState::Empty) {
            return Err(ResponseError::NonEmptyGroup);
        }
        inner.groups.remove(group_id);
        let offsets = inner.offsets.remove(group_id).unwrap_or_default();
        let mut entries: Vec<(Key, Option<Vec<u8>>)> = offsets
            .into_keys()
            .map(|(topic, partition)| (Key::Offset { group: group_id.to_string(), topic, partition }, None))
            .collect();
        entries.push((Key::Group { group: group_id.to_string() }, None));
        self.append(topics, group_id, entries)
    }
}

/// Per topic: (partition, offset, leader epoch, metadata).
pub type Committed = Vec<(String, Vec<(i32, i64, i32, String)>)>;

/// Per topic: (partition, error code) of an OffsetDelete.
pub type Deleted = Vec<(String, Vec<(i32, i16)>)>;

/// A write to `__consumer_offsets` the caller must make durable (or why it failed).
pub type Written = Result<Option<(Arc<Partition>, i64)>, ResponseError>;

impl GroupCoordinator {
    /// OffsetCommit's check of the committing member: `None` when it may commit.
    pub fn check_offset_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        version: i16,
    ) -> Option<ResponseError> {
        if let Some(r) = self.consumer_check_commit(group_id, member_id, instance_id, generation, false, version) {
            return r.err();
        }
        let inner = self.lock();
        let group = inner.groups.get(group_id);
        if group_id.is_empty() {
            return Some(ResponseError::InvalidGroupId);
        }
        // Kafka's OffsetMetadataManager.validateOffsetCommit and ClassicGroup.validateOffsetCommit.
        let Some(g) = group else {
            return match generation {
                // A "simple" commit (the admin client, or a consumer outside group management)
                // to a group that does not exist: accepted, the group is made by the commit.
                ..0 => None,
                // Since v9 a group that does not exist is named as such; before, the error older
                // clients know.
                _ if version >= 9 => Some(ResponseError::GroupIdNotFound),
                _ => Some(ResponseError::IllegalGeneration),
            };
        };
        if generation < 0 && g.state == GroupState::Empty {
            return None;
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Err(e) = g.check_member(member_id, instance_id, generation) {
                return Some(e);
            }
        } else {
            // No member id and no generation (v0, or a simple commit): only to an empty group.
            return Some(ResponseError::UnknownMemberId);
        }
        // As Kafka: members of the current generation may still commit while a rebalance is
        // being prepared (eager consumers commit in onPartitionsRevoked), but not between
        // JoinGroup and SyncGroup.
        (g.state == GroupState::CompletingRebalance).then_some(ResponseError::RebalanceInProgress)
    }

    /// Writes committed offsets and updates the cache under the lock (so the cache's order is
    /// the log's); the caller makes the write durable before answering.
    pub fn commit_offsets(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
        values: Vec<((String, i32), OffsetValue)>,
    ) -> Result<Option<(Arc<Partition>, i64)>, ResponseError> {
        if values.is_empty() {
            // Nothing was accepted: no write, and no trace of the group (a refused commit to a
            // group that does not exist must not make one).
            return Ok(None);
        }
        let entries = values
            .iter()
            .map(|((topic, partition), v)| {
                (
                    Key::Offset { group: group_id.to_string(), topic: topic.clone(), partition: *partition },
                    Some(v.encode()),
                )
            })
            .collect();
        let mut inner = self.lock();
        let written = self.append(topics, group_id, entries)?;
        let cache = inner.offsets.entry(group_id.to_string()).or_default();
        for (key, value) in values {
            cache.insert(key, value);
        }
        Ok(written)
    }

    /// The committed offsets of a group: of the wanted partitions (-1 where none), or all.
    pub fn committed(&self, group_id: &str, wanted: Option<Vec<(String, Vec<i32>)>>) -> Committed {
        let inner = self.lock();
        let offsets = inner.offsets.get(group_id);
        let lookup = |topic: &str, p: i32| offsets.and_then(|o| o.get(&(topic.to_string(), p)));
        match wanted {
            Some(topics) => topics
                .into_iter()
                .map(|(topic, parts)| {
                    let values = parts
                        .into_iter()
                        .map(|p| match lookup(&topic, p) {
                            Some(v) => (p, v.offset, v.leader_epoch, v.metadata.clone()),
                            None => (p, -1, -1, String::new()),
                        })
                        .collect();
                    (topic, values)
                })
                .collect(),
            None => {
                let mut out: Committed = Vec::new();
                for ((topic, p), v) in offsets.into_iter().flatten() {
                    if out.last().is_none_or(|(t, _)| t != topic) {
                        out.push((topic.clone(), Vec::new()));
                    }
                    out.last_mut().expect("pushed").1.push((*p, v.offset, v.leader_epoch, v.metadata.clone()));
                }
                out
            }
        }
    }

    /// OffsetDelete of existing partitions (`requested`): refused for a topic the group is
    /// subscribed to while it has members; writes the tombstones (durable by the caller).
    pub fn delete_offsets(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
        requested: Vec<(String, Vec<i32>)>,
    ) -> Result<(Deleted, Written), ResponseError> {
        let consumer_topics = self.consumer_subscribed(topics, group_id);
        let mut inner = self.lock();
        if !inner.groups.contains_key(group_id)
            && !inner.offsets.contains_key(group_id)
            && !inner.consumer.contains_key(group_id)
        {
            return Err(ResponseError::GroupIdNotFound);
        }
        let group = inner.groups.get(group_id);
        let active = group.is_some_and(|g| g.state != GroupState::Empty);
        let busy: Vec<bool> = requested
            .iter()
            .map(|(t, _)| {
                (active && group.is_some_and(|g| g.subscribed(t)))
                    || consumer_topics.as_ref().is_some_and(|s| s.contains(t))
            })
            .collect();
        let mut entries = Vec::new();
        let mut deleted: Deleted = Vec::new();
        for ((topic, partitions), busy) in requested.into_iter().zip(busy) {
            let mut results = Vec::new();
            for p in partitions {
                let error = if busy {
                    ResponseError::GroupSubscribedToTopic.code()
                } else {
                    let removed = inner.offsets.get_mut(group_id).and_then(|o| o.remove(&(topic.clone(), p)));
                    if removed.is_some() {
                        entries.push((
                            Key::Offset { group: group_id.to_string(), topic: topic.clone(), partition: p },
                            None,
                        ));
                    }
                    0
                };
                results.push((p, error));
            }
            deleted.push((topic, results));
        }
        let written = self.append(topics, group_id, entries);
        Ok((deleted, written))
    }
}
