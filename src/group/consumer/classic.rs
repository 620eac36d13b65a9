//! Classic members in a consumer group: Kafka 4.1's online migration between the classic
//! protocol (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) and the consumer protocol
//! (ConsumerGroupHeartbeat), as its GroupMetadataManager applies it.
//!
//! - Upgrade (`from_classic`): the first consumer-protocol member of a non-empty classic group
//!   of consumers turns it into a consumer group; every classic member keeps its subscription and
//!   its last assignment, at the classic generation as its member epoch.
//! - Classic members of a consumer group (`classic_join`, `classic_sync`, `classic_heartbeat`,
//!   `leave_members`): the coordinator computes their assignment as for any member. A JoinGroup
//!   is answered at once (no leader, no member list: the member runs no assignor) with its member
//!   epoch as the generation; its subscription's owned partitions acknowledge revocations (a
//!   classic member revokes by rejoining); SyncGroup returns its current partitions in the
//!   consumer protocol's assignment format; Heartbeat answers REBALANCE_IN_PROGRESS while it is
//!   behind the group epoch, owes revocations, or may now take partitions another member freed.
//!   Its timers: its own session timeout, and the rebalance timeout to rejoin once told to and
//!   to sync once joined.
//! - Downgrade (`to_classic`): when the last consumer-protocol member leaves and classic members
//!   remain, the group becomes a classic group again (generation = group epoch, each member's
//!   target assignment as its assignment) and rebalances as a classic group.
//!
//! Invariants: the reconciliation rules are those of every member (`reconcile.rs`), so a
//! classic member is never handed a partition another member still owns; every change is
//! returned as records, as in `mod.rs`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::records::{self, Rec};
use super::state::{Assignment, ClassicMeta, ConsumerGroup, Deadlines, Member, MemberState, TopicView};
use super::Settings;
use crate::group::embedded::{self, TopicPartitions};

/// The protocol type of consumers in classic groups.
pub const PROTOCOL_TYPE: &str = "consumer";

/// A classic JoinGroup as a consumer group takes it.
#[derive(Debug, Clone)]
pub struct ClassicJoin {
    /// Empty for a new member.
    pub member_id: String,
    /// The id a new member gets.
    pub new_member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member first learns its id (MEMBER_ID_REQUIRED).
    pub require_known_member_id: bool,
}

/// What a classic member's JoinGroup answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicJoined {
    pub member_id: String,
    /// The member's epoch: the generation it syncs, heartbeats and commits with.
    pub generation: i32,
    /// The first protocol of the member's own list.
    pub protocol_name: String,
}

/// Kafka's message for an upgrade refused because of a client-side assignor's user data.
pub fn custom_assignor_message(group: &str) -> String {
    format!(
        "Cannot upgrade classic group {group} to consumer group because an unsupported custom assignor is in use. \
         Please refer to the documentation or switch to a default assignor before re-attempting the upgrade."
    )
}

/// Partitions by topic name -> by topic id (topics unknown to the metadata are dropped).
fn by_id(parts: &TopicPartitions, topics: &TopicView) -> Assignment {
    let mut out = Assignment::new();
    for (name, ps) in parts {
        if let Some(t) = topics.get(name) {
            out.entry(t.id).or_default().extend(ps.iter().copied().filter(|p| *p >= 0 && *p < t.partitions));
        }
    }
    out.retain(|_, s| !s.is_empty());
    out
}

/// Partitions by topic id -> by topic name (in name order; unknown ids are dropped).
pub fn by_name(a: &Assignment, topics: &TopicView) -> TopicPartitions {
    let names: HashMap<Uuid, &String> = topics.iter().map(|(n, t)| (t.id, n)).collect();
    let mut out: TopicPartitions =
        a.iter().filter_map(|(id, ps)| Some(((*names.get(id)?).clone(), ps.iter().copied().collect()))).collect();
    out.sort();
    out
}

fn session_of(m: &Member) -> Duration {
    Duration::from_millis(m.classic.as_ref().map_or(0, |c| c.session_timeout_ms.max(0)) as u64)
}

fn rebalance_of(m: &Member) -> Duration {
    Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64)
}

impl ConsumerGroup {
    /// The consumer group a non-empty classic group of consumers becomes (Kafka's
    /// ConsumerGroup.fromClassicGroup), with the records describing it; `Err` is the message of
    /// the GROUP_ID_NOT_FOUND refusing it.
    pub fn from_classic(
        classic: &crate::group::state::Group,
        topics: &TopicView,
        now: Instant,
        out: &mut Vec<Rec>,
    ) -> Result<ConsumerGroup, String> {
        let malformed = || {
            format!(
                "Cannot upgrade the classic group {} to consumer group because the embedded consumer protocol is \
                 malformed.",
                classic.id
            )
        };
        let protocol = classic.protocol.clone().ok_or_else(malformed)?;
        let mut group = ConsumerGroup::new(&classic.id);
        group.group_epoch = classic.generation;
        group.assignment_epoch = classic.generation;
        for m in classic.members.values() {
            let sub = embedded::subscription(&m.metadata_for(&protocol)).ok_or_else(malformed)?;
            let assignment = embedded::assignment(&m.assignment).ok_or_else(malformed)?;
            if assignment.user_data.as_ref().is_some_and(|u| !u.is_empty()) {
                return Err(custom_assignor_message(&classic.id));
            }
            let assigned = by_id(&assignment.partitions, topics);
            let mut member = Member::new(&m.id);
            member.instance_id = m.instance_id.clone();
            member.rack_id = sub.rack.filter(|r| !r.is_empty());
            member.client_id = m.client_id.clone();
            member.client_host = m.client_host.clone();
            member.subscribed_topic_names = sub.topics;
            member.rebalance_timeout_ms = m.rebalance_timeout.as_millis().min(i32::MAX as u128) as i32;
            member.member_epoch = classic.generation;
            member.previous_member_epoch = classic.generation;
            member.state = MemberState::Stable;
            member.assigned = assigned.clone();
            member.classic = Some(ClassicMeta {
                session_timeout_ms: m.session_timeout.as_millis().min(i32::MAX as u128) as i32,
                protocols: m.protocols.clone(),
            });
            group.deadlines.insert(m.id.clone(), Deadlines::new(now + session_of(&member)));
            group.target.insert(m.id.clone(), assigned);
            group.members.insert(m.id.clone(), member);
        }
        group.metadata_hash = group.compute_metadata_hash(topics);
        out.extend(group.members.values().map(|m| records::member_metadata(&group.id, m)));
        out.push(records::group_metadata(&group.id, group.group_epoch, group.metadata_hash));
        out.extend(group.target.iter().map(|(id, a)| records::target_member(&group.id, id, a)));
        out.push(records::target_metadata(&group.id, group.assignment_epoch));
        out.extend(group.members.values().map(|m| records::current_assignment(&group.id, m)));
        Ok(group)
    }

    /// Whether a joining classic member's protocols fit the classic members already here: one
    /// of its protocol names is supported by all of them.
    fn supports_classic(&self, joining: &str, protocols: &[(String, Bytes)]) -> bool {
        let others: Vec<&ClassicMeta> =
            self.members.values().filter(|m| m.id != joining).filter_map(|m| m.classic.as_ref()).collect();
        !protocols.is_empty()
            && protocols.iter().any(|(name, _)| others.iter().all(|c| c.protocols.iter().any(|(n, _)| n == name)))
    }

    /// A classic JoinGroup in this (non-empty) consumer group.
    pub fn classic_join(
        &mut self,
        req: &ClassicJoin,
        topics: &TopicView,
        settings: &Settings,
        now: Instant,
        out: &mut Vec<Rec>,
    ) -> Result<ClassicJoined, ResponseError> {
        let id = if req.member_id.is_empty() { req.new_member_id.clone() } else { req.member_id.clone() };
        if !self.members.contains_key(&id) && self.members.len() >= settings.max_size {
            return Err(ResponseError::GroupMaxSizeReached);
        }
        if req.protocol_type != PROTOCOL_TYPE || !self.supports_classic(&id, &req.protocols) {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        if req.require_known_member_id && req.member_id.is_empty() && req.instance_id.is_none() {
            return Err(ResponseError::MemberIdRequired);
        }
        let existing = match &req.instance_id {
            None => self.members.get(&id).cloned(),
            Some(instance) => match self.static_member(instance).cloned() {
                None => self.members.get(&id).cloned(),
                // A new instance of a static member replaces it: same target, the new id.
                Some(old) if !self.members.contains_key(&id) => Some(self.replace_static(&old, &id, out)),
                Some(old) if old.id != id => return Err(ResponseError::FencedInstanceId),
                Some(old) => Some(old),
            },
        };
        let first = &req.protocols[0];
        let sub = embedded::subscription(&first.1).ok_or(ResponseError::UnknownServerError)?;
        let member = existing.unwrap_or_else(|| Member::new(&id));
        let mut updated = member.clone();
        updated.instance_id = req.instance_id.clone();
        updated.rack_id = sub.rack.clone().filter(|r| !r.is_empty());
        updated.client_id = req.client_id.clone();
        updated.client_host = req.client_host.clone();
        updated.subscribed_topic_names = sub.topics.clone();
        updated.subscribed_topic_regex = None;
        updated.rebalance_timeout_ms = req.rebalance_timeout_ms;
        updated.server_assignor = None;
        updated.classic =
            Some(ClassicMeta { session_timeout_ms: req.session_timeout_ms, protocols: req.protocols.clone() });
        let is_new = !self.members.contains_key(&id);
        let mut bump = false;
        if is_new || updated.metadata_differs(&member) {
            out.push(records::member_metadata(&self.id, &updated));
            bump = is_new || updated.subscribed_topic_names != member.subscribed_topic_names;
        }
        self.members.insert(id.clone(), updated);
        let hash = self.compute_metadata_hash(topics);
        if bump || hash != self.metadata_hash {
            self.bump_epoch(hash, out);
        }
        if self.group_epoch > self.assignment_epoch {
            self.assign(topics, settings, out);
        }
        // The partitions it still owns (eager clients revoked all before rejoining).
        let owned: Vec<(Uuid, Vec<i32>)> =
            by_id(&sub.owned, topics).into_iter().map(|(t, ps)| (t, ps.into_iter().collect())).collect();
        let reconciled =
            self.reconcile_member(&id, Some(&owned), now, out).map_err(|_| ResponseError::FencedMemberEpoch)?;
        let d = self.deadlines.entry(id.clone()).or_insert(Deadlines::new(now));
        d.session = now + session_of(&reconciled);
        d.classic_join = None;
        d.classic_sync = Some(now + rebalance_of(&reconciled));
        Ok(ClassicJoined { member_id: id, generation: reconciled.member_epoch, protocol_name: first.0.clone() })
    }

    /// The classic member a SyncGroup / Heartbeat names.
    fn classic_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<Member, ResponseError> {
        let m = match instance_id {
            None => self.members.get(member_id).ok_or(ResponseError::UnknownMemberId)?,
            Some(instance) => {
                let m = self.static_member(instance).ok_or(ResponseError::UnknownMemberId)?;
                if m.id != member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
                m
            }
        };
        if m.classic.is_none() {
            return Err(ResponseError::UnknownMemberId);
        }
        Ok(m.clone())
    }

    /// Tells a classic member to rejoin (REBALANCE_IN_PROGRESS), which it must within its
    /// rebalance timeout.
    fn rejoin(&mut self, m: &Member, now: Instant) -> ResponseError {
        let d = self.deadlines.entry(m.id.clone()).or_insert(Deadlines::new(now + session_of(m)));
        d.classic_join.get_or_insert(now + rebalance_of(m));
        ResponseError::RebalanceInProgress
    }

    /// A classic SyncGroup: the member's current partitions, in the consumer protocol's
    /// assignment format at its subscription's version.
    pub fn classic_sync(
        &mut self,
        req: crate::group::SyncRequest<'_>,
        topics: &TopicView,
        now: Instant,
    ) -> Result<Bytes, ResponseError> {
        let crate::group::SyncRequest { member_id, instance_id, generation, protocol_type, protocol_name } = req;
        let m = self.classic_member(member_id, instance_id)?;
        if generation != m.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        let first = m.classic.as_ref().and_then(|c| c.protocols.first()).cloned().unwrap_or_default();
        if protocol_type.is_some_and(|t| t != PROTOCOL_TYPE) || protocol_name.is_some_and(|n| n != first.0) {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        if self.group_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
            return Err(self.rejoin(&m, now));
        }
        let d = self.deadlines.entry(m.id.clone()).or_insert(Deadlines::new(now));
        d.session = now + session_of(&m);
        d.classic_sync = None;
        let version = embedded::version(&first.1).unwrap_or(0);
        Ok(embedded::encode_assignment(version, &by_name(&m.assigned, topics)))
    }

    /// A classic Heartbeat: REBALANCE_IN_PROGRESS while the member must rejoin.
    pub fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), ResponseError> {
        let m = self.classic_member(member_id, instance_id)?;
        if generation != m.member_epoch {
            return Err(ResponseError::IllegalGeneration);
        }
        self.deadlines.entry(m.id.clone()).or_insert(Deadlines::new(now)).session = now + session_of(&m);
        let released = m.state == MemberState::UnreleasedPartitions && !self.waiting_on_unreleased(&m);
        if m.member_epoch < self.group_epoch || m.state == MemberState::UnrevokedPartitions || released {
            return Err(self.rejoin(&m, now));
        }
        Ok(())
    }

    /// Whether a partition of the member's target it lacks is still owned by another member.
    fn waiting_on_unreleased(&self, m: &Member) -> bool {
        let epochs = self.partition_epochs();
        self.target.get(&m.id).into_iter().flatten().any(|(topic, parts)| {
            parts
                .iter()
                .any(|p| !m.assigned.get(topic).is_some_and(|s| s.contains(p)) && epochs.contains_key(&(*topic, *p)))
        })
    }

    /// LeaveGroup of members (any protocol, by member id or by instance id): the error code of
    /// each; the ones found are removed together (one epoch bump, one new target assignment).
    pub fn leave_members(
        &mut self,
        leaving: &[(String, Option<String>)],
        topics: &TopicView,
        settings: &Settings,
        out: &mut Vec<Rec>,
    ) -> Vec<i16> {
        let mut gone = Vec::new();
        let codes = leaving
            .iter()
            .map(|(member_id, instance_id)| {
                let found = match instance_id {
                    None => self.members.get(member_id).map(|m| m.id.clone()).ok_or(ResponseError::UnknownMemberId),
                    Some(instance) => match self.static_member(instance) {
                        None => Err(ResponseError::UnknownMemberId),
                        Some(m) if !member_id.is_empty() && m.id != *member_id => Err(ResponseError::FencedInstanceId),
                        Some(m) => Ok(m.id.clone()),
                    },
                };
                match found {
                    Ok(id) => {
                        if !gone.contains(&id) {
                            gone.push(id);
                        }
                        0
                    }
                    Err(e) => e.code(),
                }
            })
            .collect();
        if !gone.is_empty() {
            for id in &gone {
                self.remove_member(id, out);
            }
            let hash = self.compute_metadata_hash(topics);
            self.bump_epoch(hash, out);
            self.assign(topics, settings, out);
        }
        codes
    }

    /// Whether a consumer-protocol member is in the group.
    pub fn has_consumer_protocol_members(&self) -> bool {
        self.members.values().any(|m| m.classic.is_none())
    }

    /// Whether the group may become a classic group again: members remain, all classic.
    pub fn all_classic(&self) -> bool {
        !self.members.is_empty() && !self.has_consumer_protocol_members()
    }

    /// The classic members with the partitions each gets in the classic group it becomes
    /// (its target assignment).
    pub fn classic_members(&self, topics: &TopicView) -> Vec<(Member, TopicPartitions)> {
        self.members
            .values()
            .map(|m| (m.clone(), by_name(self.target.get(&m.id).unwrap_or(&Assignment::new()), topics)))
            .collect()
    }

    /// Classic members whose rejoin or sync deadline passed (fenced by `tick`).
    pub(super) fn classic_late(&self, id: &str, now: Instant) -> bool {
        self.deadlines
            .get(id)
            .is_some_and(|d| d.classic_join.is_some_and(|at| at <= now) || d.classic_sync.is_some_and(|at| at <= now))
    }
}
