//! KIP-848 consumer groups (`group.protocol=consumer`): the rules of ConsumerGroupHeartbeat on
//! one group, as Kafka 4.1's GroupMetadataManager applies them. Joining (epoch 0), heartbeats,
//! leaving (epoch -1; -2 for a static member that comes back), fencing on session or rebalance
//! timeout, the group epoch bumped on subscription or metadata changes, the target assignment
//! recomputed by the group's assignor whenever the group epoch passes the assignment epoch, and
//! each member reconciled towards it (`reconcile.rs`).
//!
//! Every change is returned as `__consumer_offsets` records (`records.rs`) for the caller to
//! append and make durable before answering; replaying them (`apply`) rebuilds the same group.
//! Invariant: the in-memory group only changes together with the records describing the change.

pub mod assignor;
pub mod classic;
pub mod reconcile;
pub mod records;
pub mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use records::{ConsumerKey, ConsumerValue, Rec};
pub use state::{Assignment, ConsumerGroup, Member, MemberState, TopicInfo, TopicView};
use state::{Deadlines, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH};

/// How often the timers compare a group's subscribed topics with the metadata.
const METADATA_CHECK: Duration = Duration::from_millis(500);

/// The broker's consumer-group settings (`group.consumer.*`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    /// Assignor names, the first is the default.
    pub assignors: Vec<String>,
    /// `group.consumer.migration.policy`: whether a non-empty classic group may become a
    /// consumer group (upgrade), and back (downgrade).
    pub upgrade: bool,
    pub downgrade: bool,
}

/// A ConsumerGroupHeartbeat, after the request-level checks.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Vec<(Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
}

/// What a successful heartbeat answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's assigned partitions, when the response carries them.
    pub assignment: Option<Assignment>,
}

/// An error code and Kafka's message.
pub type Refusal = (ResponseError, String);

fn fenced(msg: String) -> Refusal {
    (ResponseError::FencedMemberEpoch, msg)
}

fn is_subset(owned: Option<&[(Uuid, Vec<i32>)]>, assigned: &Assignment) -> bool {
    let Some(owned) = owned else { return false };
    owned.iter().all(|(t, ps)| assigned.get(t).is_some_and(|set| ps.iter().all(|p| set.contains(p))))
}

/// Kafka's check of the epoch a member heartbeats with.
fn check_epoch(member: &Member, received: i32, owned: Option<&[(Uuid, Vec<i32>)]>) -> Result<(), Refusal> {
    if received > member.member_epoch {
        return Err(fenced(format!(
            "The consumer group member has a greater member epoch ({received}) than the one known by the group \
             coordinator ({}). The member must abandon all its partitions and rejoin.",
            member.member_epoch
        )));
    }
    if received < member.member_epoch
        && (received != member.previous_member_epoch || !is_subset(owned, &member.assigned))
    {
        return Err(fenced(format!(
            "The consumer group member has a smaller member epoch ({received}) than the one known by the group \
             coordinator ({}). The member must abandon all its partitions and rejoin.",
            member.member_epoch
        )));
    }
    Ok(())
}

impl ConsumerGroup {
    /// A heartbeat of a member (join, heartbeat or leave); records of every change go to `out`.
    pub fn heartbeat(
        &mut self,
        hb: &Heartbeat,
        topics: &TopicView,
        settings: &Settings,
        now: Instant,
        out: &mut Vec<Rec>,
    ) -> Result<Answer, Refusal> {
        if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH || hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            return self.leave(hb, topics, settings, out);
        }
        let joining = hb.member_epoch == 0;
        // As Kafka, before looking the member up (a static replacement counts as a new member).
        if !self.members.contains_key(&hb.member_id) && self.members.len() >= settings.max_size {
            return Err((
                ResponseError::GroupMaxSizeReached,
                format!("The consumer group has reached its maximum capacity of {} members.", settings.max_size),
            ));
        }
        let existing = match &hb.instance_id {
            None => match self.members.get(&hb.member_id) {
                Some(m) => {
                    check_epoch(m, hb.member_epoch, hb.owned.as_deref())?;
                    Some(m.clone())
                }
                None if joining => None,
                None => {
                    return Err((
                        ResponseError::UnknownMemberId,
                        format!("Member {} is not a member of group {}.", hb.member_id, self.id),
                    ))
                }
            },
            Some(instance) => match self.static_member(instance).cloned() {
                None if joining => self.members.get(&hb.member_id).cloned(),
                None => return Err((ResponseError::UnknownMemberId, format!("Instance id {instance} is unknown."))),
                Some(old) if joining => {
                    if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH && old.id != hb.member_id {
                        return Err((
                            ResponseError::UnreleasedInstanceId,
                            format!(
                                "Static member {} with instance id {instance} cannot join the group because the \
                                 instance id is owned by {} member.",
                                hb.member_id, old.id
                            ),
                        ));
                    }
                    Some(self.replace_static(&old, &hb.member_id, out))
                }
                Some(old) => {
                    if old.id != hb.member_id {
                        return Err((
                            ResponseError::FencedInstanceId,
                            format!(
                                "Static member {} with instance id {instance} was fenced by member {}.",
                                hb.member_id, old.id
                            ),
                        ));
                    }
                    check_epoch(&old, hb.member_epoch, hb.owned.as_deref())?;
                    Some(old)
                }
            },
        };
        let member = existing.unwrap_or_else(|| Member::new(&hb.member_id));
        let mut updated = member.clone();
        if hb.instance_id.is_some() {
            updated.instance_id = hb.instance_id.clone();
        }
        if hb.rack_id.is_some() {
            updated.rack_id = hb.rack_id.clone();
        }
        if hb.rebalance_timeout_ms != -1 {
            updated.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if hb.server_assignor.is_some() {
            updated.server_assignor = hb.server_assignor.clone();
        }
        if let Some(names) = &hb.subscribed_topic_names {
            updated.subscribed_topic_names = names.clone();
        }
        if let Some(re) = &hb.subscribed_topic_regex {
            // An empty regex clears it (as Kafka's maybeUpdateSubscribedTopicRegex).
            updated.subscribed_topic_regex = (!re.is_empty()).then(|| re.clone());
        }
        updated.client_id = hb.client_id.clone();
        updated.client_host = hb.client_host.clone();
        let is_new = !self.members.contains_key(&updated.id);
        let mut bump = false;
        if is_new || updated.metadata_differs(&member) {
            out.push(records::member_metadata(&self.id, &updated));
            bump = is_new
                || updated.subscribed_topic_names != member.subscribed_topic_names
                || updated.subscribed_topic_regex != member.subscribed_topic_regex;
        }
        self.members.insert(updated.id.clone(), updated.clone());
        let hash = self.compute_metadata_hash(topics);
        if bump || hash != self.metadata_hash {
            self.bump_epoch(hash, out);
        }
        if self.group_epoch > self.assignment_epoch {
            self.assign(topics, settings, out);
        }
        let reconciled = self.reconcile_member(&updated.id, hb.owned.as_deref(), now, out)?;
        self.deadlines.entry(updated.id.clone()).or_insert(Deadlines::new(now)).session =
            now + Duration::from_millis(settings.session_timeout_ms.max(0) as u64);
        let full =
            joining || (hb.rebalance_timeout_ms != -1 && hb.subscribed_topic_names.is_some() && hb.owned.is_some());
        let assignment = (full || reconciled.assigned != member.assigned).then(|| reconciled.assigned.clone());
        Ok(Answer { member_id: reconciled.id.clone(), member_epoch: reconciled.member_epoch, assignment })
    }

    /// Moves a member towards the target assignment; records and timers follow its state.
    fn reconcile_member(
        &mut self,
        id: &str,
        owned: Option<&[(Uuid, Vec<i32>)]>,
        now: Instant,
        out: &mut Vec<Rec>,
    ) -> Result<Member, Refusal> {
        let member = self.members.get(id).cloned().expect("member present");
        if member.is_reconciled_to(self.assignment_epoch) {
            return Ok(member);
        }
        let empty = Assignment::new();
        let target = self.target.get(id).unwrap_or(&empty);
        let next = reconcile::reconcile(&member, self.assignment_epoch, target, &self.partition_epochs(), owned)
            .map_err(fenced)?;
        if next.assignment_differs(&member) {
            out.push(records::current_assignment(&self.id, &next));
            let d = self.deadlines.entry(id.to_string()).or_insert(Deadlines::new(now));
            // (A classic member revokes by rejoining: its join and sync timers bound that.)
            d.rebalance = (next.state == MemberState::UnrevokedPartitions && next.classic.is_none())
                .then(|| (now + Duration::from_millis(next.rebalance_timeout_ms.max(0) as u64), next.member_epoch));
            self.members.insert(id.to_string(), next.clone());
        }
        Ok(next)
    }

    fn leave(
        &mut self,
        hb: &Heartbeat,
        topics: &TopicView,
        settings: &Settings,
        out: &mut Vec<Rec>,
    ) -> Result<Answer, Refusal> {
        let id = match &hb.instance_id {
            None => {
                if !self.members.contains_key(&hb.member_id) {
                    return Err((
                        ResponseError::UnknownMemberId,
                        format!("Member {} is not a member of group {}.", hb.member_id, self.id),
                    ));
                }
                hb.member_id.clone()
            }
            Some(instance) => {
                let Some(m) = self.static_member(instance) else {
                    return Err((ResponseError::UnknownMemberId, format!("Instance id {instance} is unknown.")));
                };
                if m.id != hb.member_id {
                    return Err((
                        ResponseError::FencedInstanceId,
                        format!(
                            "Static member {} with instance id {instance} was fenced by member {}.",
                            hb.member_id, m.id
                        ),
                    ));
                }
                if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                    // A temporary leave: it keeps its partitions for its session.
                    let mut m = m.clone();
                    m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                    m.pending_revocation = Assignment::new();
                    out.push(records::current_assignment(&self.id, &m));
                    self.members.insert(m.id.clone(), m.clone());
                    return Ok(Answer {
                        member_id: m.id,
                        member_epoch: LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                        assignment: None,
                    });
                }
                m.id.clone()
            }
        };
        self.fence(&id, topics, settings, out);
        Ok(Answer { member_id: hb.member_id.clone(), member_epoch: hb.member_epoch, assignment: None })
    }

    /// Removes a member (left, or fenced by a timer), bumps the group epoch and reassigns.
    pub fn fence(&mut self, id: &str, topics: &TopicView, settings: &Settings, out: &mut Vec<Rec>) {
        self.remove_member(id, out);
        let hash = self.compute_metadata_hash(topics);
        self.bump_epoch(hash, out);
        self.assign(topics, settings, out);
    }

    /// A new instance of a static member replaces the previous one: same subscription and
    /// target, the new id, epoch 0.
    fn replace_static(&mut self, old: &Member, new_id: &str, out: &mut Vec<Rec>) -> Member {
        let mut m = old.clone();
        m.id = new_id.to_string();
        m.member_epoch = 0;
        m.previous_member_epoch = 0;
        let target = self.target.remove(&old.id);
        self.remove_member(&old.id, out);
        if let Some(target) = target {
            out.push(records::target_member(&self.id, &m.id, &target));
            self.target.insert(m.id.clone(), target);
        }
        out.push(records::member_metadata(&self.id, &m));
        out.push(records::current_assignment(&self.id, &m));
        self.members.insert(m.id.clone(), m.clone());
        m
    }

    fn remove_member(&mut self, id: &str, out: &mut Vec<Rec>) {
        out.extend(records::member_tombstones(&self.id, id));
        self.members.remove(id);
        self.target.remove(id);
        self.deadlines.remove(id);
    }

    fn bump_epoch(&mut self, hash: i64, out: &mut Vec<Rec>) {
        self.group_epoch += 1;
        self.metadata_hash = hash;
        out.push(records::group_metadata(&self.id, self.group_epoch, hash));
    }

    /// The assignor the group uses: the one most members ask for, else the default.
    pub fn assignor_name(&self, settings: &Settings) -> String {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = m.server_assignor.as_deref() {
                *votes.entry(a).or_default() += 1;
            }
        }
        let best = votes.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(a, _)| a.to_string());
        best.unwrap_or_else(|| settings.assignors.first().cloned().unwrap_or_else(|| assignor::UNIFORM.into()))
    }

    /// Computes the target assignment at the group epoch.
    fn assign(&mut self, topics: &TopicView, settings: &Settings, out: &mut Vec<Rec>) {
        let mut topic_ids: BTreeMap<Uuid, i32> = BTreeMap::new();
        let specs: Vec<assignor::MemberSpec> = self
            .members
            .values()
            .map(|m| {
                let ids: BTreeSet<Uuid> = Self::member_topics(m, topics)
                    .iter()
                    .filter_map(|name| topics.get(name))
                    .map(|t| {
                        topic_ids.insert(t.id, t.partitions);
                        t.id
                    })
                    .collect();
                assignor::MemberSpec {
                    id: m.id.clone(),
                    topics: ids,
                    previous: self.target.get(&m.id).cloned().unwrap_or_default(),
                }
            })
            .collect();
        let result = assignor::assign(&self.assignor_name(settings), &specs, &topic_ids);
        for (id, a) in result {
            if self.target.get(&id) != Some(&a) {
                out.push(records::target_member(&self.id, &id, &a));
                self.target.insert(id, a);
            }
        }
        self.assignment_epoch = self.group_epoch;
        out.push(records::target_metadata(&self.id, self.assignment_epoch));
    }

    /// Timers and metadata changes: fences members whose session or revocation deadline
    /// passed; bumps the epoch when the subscribed topics changed (new partitions or topics).
    pub fn tick(&mut self, topics: &TopicView, settings: &Settings, now: Instant, out: &mut Vec<Rec>) {
        let session = Duration::from_millis(settings.session_timeout_ms.max(0) as u64);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let d = *self.deadlines.entry(id.clone()).or_insert(Deadlines::new(now + session));
            let member = &self.members[&id];
            let revoke_late = d.rebalance.is_some_and(|(at, epoch)| {
                at <= now && member.state == MemberState::UnrevokedPartitions && member.member_epoch == epoch
            });
            let classic_late = self.classic_late(&id, now);
            if d.session <= now || revoke_late || classic_late {
                let why = if revoke_late {
                    "it did not revoke its partitions in time"
                } else if classic_late {
                    "the classic member did not rejoin or sync within its rebalance timeout"
                } else {
                    "its session expired"
                };
                tracing::info!(group = %self.id, member = %id, "consumer group member fenced: {why}");
                self.fence(&id, topics, settings, out);
            }
        }
        // Metadata changes are looked for every METADATA_CHECK (heartbeats look at every call).
        let due = self.metadata_checked.is_none_or(|at| now.saturating_duration_since(at) >= METADATA_CHECK);
        if !self.members.is_empty() && due {
            self.metadata_checked = Some(now);
            let hash = self.compute_metadata_hash(topics);
            if hash != self.metadata_hash {
                self.bump_epoch(hash, out);
                self.assign(topics, settings, out);
            }
        }
    }

    /// Replays one record (a `None` value is a tombstone).
    pub fn apply(&mut self, key: &ConsumerKey, value: Option<ConsumerValue>) {
        let member = key.member.clone().unwrap_or_default();
        match (key.kind, value) {
            (records::GROUP_METADATA, Some(ConsumerValue::Group { epoch, metadata_hash })) => {
                self.group_epoch = epoch;
                self.metadata_hash = metadata_hash;
            }
            (records::MEMBER_METADATA, Some(ConsumerValue::Member(m))) => {
                let entry = self.members.entry(member).or_insert_with(|| (*m).clone());
                let (epoch, prev, state, assigned, pending) = (
                    entry.member_epoch,
                    entry.previous_member_epoch,
                    entry.state,
                    std::mem::take(&mut entry.assigned),
                    std::mem::take(&mut entry.pending_revocation),
                );
                *entry = *m;
                entry.member_epoch = epoch;
                entry.previous_member_epoch = prev;
                entry.state = state;
                entry.assigned = assigned;
                entry.pending_revocation = pending;
            }
            (records::MEMBER_METADATA, None) => {
                self.members.remove(&member);
                self.deadlines.remove(&member);
            }
            (records::TARGET_METADATA, Some(ConsumerValue::TargetMetadata { assignment_epoch })) => {
                self.assignment_epoch = assignment_epoch;
            }
            (records::TARGET_MEMBER, Some(ConsumerValue::TargetMember(a))) => {
                self.target.insert(member, a);
            }
            (records::TARGET_MEMBER, None) => {
                self.target.remove(&member);
            }
            (
                records::CURRENT_ASSIGNMENT,
                Some(ConsumerValue::Current { epoch, previous, state, assigned, pending }),
            ) => {
                let m = self.members.entry(member.clone()).or_insert_with(|| Member::new(&member));
                m.member_epoch = epoch;
                m.previous_member_epoch = previous;
                m.state = state;
                m.assigned = assigned;
                m.pending_revocation = pending;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
