//! One consumer group's membership state machine: Kafka's classic rebalance protocol.
//!
//! Owns: members and pending members, generations, protocol selection, the leader, waiting
//! JoinGroup / SyncGroup callers, and the timers (initial rebalance delay, rebalance timeout,
//! session timeouts, pending-member expiry). No I/O: the coordinator persists what changes.
//! States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back to
//! PreparingRebalance whenever membership or subscriptions change.
//! Invariants: every waiting JoinGroup is answered exactly once (with the new generation or an
//! error); a SyncGroup is answered only with the assignment of the generation it names.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// (member id, instance id, metadata): only the leader gets these.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    pub fn error(error: ResponseError, member_id: &str) -> JoinResult {
        JoinResult { error: error.code(), generation: -1, member_id: member_id.to_string(), ..Default::default() }
    }
}

#[derive(Debug, Clone, Default)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

#[derive(Debug)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub heartbeat_deadline: Instant,
    pub join_waiter: Option<oneshot::Sender<JoinResult>>,
    pub sync_waiter: Option<oneshot::Sender<SyncResult>>,
}

impl Member {
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(name, _)| name == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }
}

/// A SyncGroup as the coordinator sees it (the leader's assignments aside).
#[derive(Debug, Clone, Copy)]
pub struct SyncRequest<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub generation: i32,
    pub protocol_type: Option<&'a str>,
    pub protocol_name: Option<&'a str>,
}

/// A member of a consumer group turning classic (`Group::downgraded`).
pub struct Downgraded {
    pub id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocols: Vec<(String, Bytes)>,
    pub partitions: super::embedded::TopicPartitions,
}

/// A JoinGroup as the state machine sees it.
pub struct JoinRequest {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new member must first learn its id (MEMBER_ID_REQUIRED).
    pub require_known_member_id: bool,
    pub new_member_id: String,
}

pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub state_timestamp_ms: i64,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: IndexMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not joined yet, with their expiry.
    pub pending: HashMap<String, Instant>,
    /// Static membership: group.instance.id -> current member id.
    pub instances: HashMap<String, String>,
    initial_delay_until: Option<Instant>,
    rebalance_deadline: Option<Instant>,
    sync_deadline: Option<Instant>,
    /// Set when the group's metadata record must be (re)written.
    pub dirty: bool,
}

impl Group {
    pub fn new(id: &str, now_ms: i64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: IndexMap::new(),
            pending: HashMap::new(),
            instances: HashMap::new(),
            initial_delay_until: None,
            rebalance_deadline: None,
            sync_deadline: None,
            dirty: false,
        }
    }

    fn set_state(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// Kafka's protocol choice: among protocols every member supports, the one most members
    /// list first (ties broken by the first member's preference).
    fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| self.members.values().all(|m| m.protocols.iter().any(|(p, _)| p == *n)))
            .collect();
        let mut votes: Vec<(usize, &String)> = candidates.iter().map(|c| (0usize, *c)).collect();
        for member in self.members.values() {
            if let Some((name, _)) = member.protocols.iter().find(|(p, _)| candidates.contains(&p)) {
                if let Some(v) = votes.iter_mut().find(|(_, c)| *c == name) {
                    v.0 += 1;
                }
            }
        }
        let best = votes.iter().map(|(n, _)| *n).max()?;
        votes.iter().find(|(n, _)| *n == best).map(|(_, c)| (*c).clone())
    }

    /// Whether a joining member's protocols fit the group.
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|(name, _)| self.members.values().all(|m| m.protocols.iter().any(|(p, _)| p == name)))
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members.values().map(|m| m.rebalance_timeout).max().unwrap_or(Duration::from_secs(5))
    }

    fn prepare_rebalance(&mut self, now: Instant, now_ms: i64, initial_delay: Duration) {
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter
                        .send(SyncResult { error: ResponseError::RebalanceInProgress.code(), ..Default::default() });
                }
            }
        }
        let from_empty = self.state == GroupState::Empty;
        let deadline = now + self.max_rebalance_timeout();
        self.rebalance_deadline = Some(deadline);
        self.initial_delay_until =
            (from_empty && !initial_delay.is_zero()).then(|| (now + initial_delay).min(deadline));
        self.sync_deadline = None;
        self.set_state(GroupState::PreparingRebalance, now_ms);
    }

    fn add_member(&mut self, req: &JoinRequest, id: String, now: Instant, waiter: oneshot::Sender<JoinResult>) {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.instance_id {
            self.instances.insert(instance.clone(), id.clone());
        }
        self.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: req.instance_id.clone(),
                client_id: req.client_id.clone(),
                client_host: req.client_host.clone(),
                session_timeout: req.session_timeout,
                rebalance_timeout: req.rebalance_timeout,
                protocols: req.protocols.clone(),
                assignment: Bytes::new(),
                heartbeat_deadline: now + req.session_timeout,
                join_waiter: Some(waiter),
                sync_waiter: None,
            },
        );
    }

    /// The join response a member gets for the current generation.
    fn join_result(&self, member_id: &str) -> JoinResult {
        let protocol = self.protocol.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(member_id);
        JoinResult {
            error: 0,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            skip_assignment: false,
            members: if is_leader {
                self.members
                    .values()
                    .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata_for(&protocol)))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Handles a JoinGroup.
    pub fn join(&mut self, req: JoinRequest, now: Instant, now_ms: i64, initial_delay: Duration) -> Reply<JoinResult> {
        if !self.supports(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinResult::error(ResponseError::InconsistentGroupProtocol, &req.member_id));
        }
        let (tx, rx) = oneshot::channel();
        if req.member_id.is_empty() {
            let new_id = req.new_member_id.clone();
            if let Some(instance) = req.instance_id.clone() {
                if let Some(old_id) = self.instances.get(&instance).cloned() {
                    return self.replace_static_member(req, &old_id, new_id, now, now_ms, initial_delay, tx, rx);
                }
            } else if req.require_known_member_id {
                self.pending.insert(new_id.clone(), now + req.session_timeout);
                return Reply::Now(JoinResult::error(ResponseError::MemberIdRequired, &new_id));
            }
            self.add_member(&req, new_id, now, tx);
            self.new_member_joined(now, now_ms, initial_delay);
            return Reply::Wait(rx);
        }
        if self.pending.remove(&req.member_id).is_some() {
            let id = req.member_id.clone();
            self.add_member(&req, id, now, tx);
            self.new_member_joined(now, now_ms, initial_delay);
            return Reply::Wait(rx);
        }
        if let Some(instance) = &req.instance_id {
            if self.instances.get(instance).is_some_and(|current| *current != req.member_id) {
                return Reply::Now(JoinResult::error(ResponseError::FencedInstanceId, &req.member_id));
            }
        }
        let Some(member) = self.members.get_mut(&req.member_id) else {
            return Reply::Now(JoinResult::error(ResponseError::UnknownMemberId, &req.member_id));
        };
        let same_protocols = member.protocols == req.protocols;
        member.protocols = req.protocols.clone();
        member.session_timeout = req.session_timeout;
        member.rebalance_timeout = req.rebalance_timeout;
        member.heartbeat_deadline = now + req.session_timeout;
        let is_leader = self.leader.as_deref() == Some(req.member_id.as_str());
        match self.state {
            GroupState::PreparingRebalance => {
                member.join_waiter = Some(tx);
                self.try_complete_join(now, now_ms);
                Reply::Wait(rx)
            }
            GroupState::CompletingRebalance if same_protocols => Reply::Now(self.join_result(&req.member_id)),
            GroupState::Stable if same_protocols && !is_leader => Reply::Now(self.join_result(&req.member_id)),
            _ => {
                member.join_waiter = Some(tx);
                self.prepare_rebalance(now, now_ms, initial_delay);
                self.try_complete_join(now, now_ms);
                Reply::Wait(rx)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn replace_static_member(
        &mut self,
        req: JoinRequest,
        old_id: &str,
        new_id: String,
        now: Instant,
        now_ms: i64,
        initial_delay: Duration,
        tx: oneshot::Sender<JoinResult>,
        rx: oneshot::Receiver<JoinResult>,
    ) -> Reply<JoinResult> {
        let Some(mut old) = self.members.shift_remove(old_id) else {
            self.instances.remove(req.instance_id.as_deref().unwrap_or_default());
            self.add_member(&req, new_id, now, tx);
            self.new_member_joined(now, now_ms, initial_delay);
            return Reply::Wait(rx);
        };
        // The old incarnation is fenced: anything it still waits for fails.
        if let Some(w) = old.join_waiter.take() {
            let _ = w.send(JoinResult::error(ResponseError::FencedInstanceId, old_id));
        }
        if let Some(w) = old.sync_waiter.take() {
            let _ = w.send(SyncResult { error: ResponseError::FencedInstanceId.code(), ..Default::default() });
        }
        let assignment = old.assignment.clone();
        let (unused_tx, _) = oneshot::channel();
        self.add_member(&req, new_id.clone(), now, unused_tx);
        let member = self.members.get_mut(&new_id).expect("just added");
        member.join_waiter = None;
        member.assignment = assignment;
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        // As Kafka: only a change of the group's selected protocol forces a rebalance (the
        // subscription bytes of a restarted consumer always differ: no owned partitions).
        let protocol_unchanged = self.protocol.is_some() && self.select_protocol() == self.protocol;
        match self.state {
            GroupState::Stable if protocol_unchanged => {
                // KIP-345: a static member coming back keeps its assignment with no rebalance;
                // a returning leader is told to skip assigning (KIP-814).
                let mut result = self.join_result(&new_id);
                result.skip_assignment = self.leader.as_deref() == Some(new_id.as_str());
                self.dirty = true;
                Reply::Now(result)
            }
            _ => {
                self.members.get_mut(&new_id).expect("just added").join_waiter = Some(tx);
                if self.state != GroupState::PreparingRebalance {
                    self.prepare_rebalance(now, now_ms, initial_delay);
                }
                self.try_complete_join(now, now_ms);
                Reply::Wait(rx)
            }
        }
    }

    fn new_member_joined(&mut self, now: Instant, now_ms: i64, initial_delay: Duration) {
        match self.state {
            GroupState::PreparingRebalance => {
                // Each newcomer during the initial delay extends it, up to the rebalance timeout.
                if let (Some(until), Some(deadline)) = (self.initial_delay_until, self.rebalance_deadline) {
                    self.initial_delay_until = Some((now + initial_delay).min(deadline).max(until));
                }
            }
            _ => self.prepare_rebalance(now, now_ms, initial_delay),
        }
        self.try_complete_join(now, now_ms);
    }

    /// Completes the join phase once every member has rejoined (after any initial delay), or
    /// at the rebalance deadline without the stragglers.
    pub fn try_complete_join(&mut self, now: Instant, now_ms: i64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined = self.pending.is_empty() && self.members.values().all(|m| m.join_waiter.is_some());
        let delay_over = self.initial_delay_until.is_none_or(|t| now >= t);
        let deadline_passed = self.rebalance_deadline.is_some_and(|d| now >= d);
        if !(deadline_passed || all_joined && delay_over) {
            return;
        }
        let stragglers: Vec<String> =
            self.members.values().filter(|m| m.join_waiter.is_none()).map(|m| m.id.clone()).collect();
        for id in stragglers {
            tracing::info!(group = %self.id, member = %id, "member did not rejoin in time; removed");
            self.drop_member(&id);
        }
        self.generation += 1;
        self.initial_delay_until = None;
        self.rebalance_deadline = None;
        self.dirty = true;
        if self.members.is_empty() {
            // Kafka keeps the protocol type of an emptied group ("consumer" stays a consumer group).
            self.protocol = None;
            self.leader = None;
            self.set_state(GroupState::Empty, now_ms);
            return;
        }
        self.protocol = self.select_protocol();
        if !self.leader.as_ref().is_some_and(|l| self.members.contains_key(l)) {
            self.leader = self.members.keys().next().cloned();
        }
        self.set_state(GroupState::CompletingRebalance, now_ms);
        self.sync_deadline = Some(now + self.max_rebalance_timeout());
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result(&id);
            let member = self.members.get_mut(&id).expect("listed");
            member.assignment = Bytes::new();
            member.heartbeat_deadline = now + member.session_timeout;
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(result);
            }
        }
        tracing::info!(group = %self.id, generation = self.generation, members = self.members.len(), "rebalance: join complete");
    }

    /// Checks identity for SyncGroup, Heartbeat and OffsetCommit.
    pub fn check_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = instance_id {
            if self.instances.get(instance).is_some_and(|current| current != member_id) {
                return Err(ResponseError::FencedInstanceId);
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        if generation != self.generation {
            return Err(ResponseError::IllegalGeneration);
        }
        Ok(())
    }

    pub fn sync(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> Reply<SyncResult> {
        let fail = |e: ResponseError| Reply::Now(SyncResult { error: e.code(), ..Default::default() });
        if let Err(e) = self.check_member(member_id, instance_id, generation) {
            return fail(e);
        }
        match self.state {
            GroupState::Empty => fail(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => fail(ResponseError::RebalanceInProgress),
            GroupState::Stable => Reply::Now(self.sync_result(member_id)),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                self.members.get_mut(member_id).expect("checked").sync_waiter = Some(tx);
                if self.leader.as_deref() == Some(member_id) {
                    for (id, assignment) in assignments {
                        if let Some(m) = self.members.get_mut(&id) {
                            m.assignment = assignment;
                        }
                    }
                    self.sync_deadline = None;
                    self.set_state(GroupState::Stable, now_ms);
                    self.dirty = true;
                    let ids: Vec<String> = self.members.keys().cloned().collect();
                    for id in ids {
                        let result = self.sync_result(&id);
                        if let Some(w) = self.members.get_mut(&id).and_then(|m| m.sync_waiter.take()) {
                            let _ = w.send(result);
                        }
                    }
                    tracing::info!(group = %self.id, generation = self.generation, "rebalance: assignment distributed");
                }
                Reply::Wait(rx)
            }
        }
    }

    fn sync_result(&self, member_id: &str) -> SyncResult {
        SyncResult {
            error: 0,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment: self.members.get(member_id).map(|m| m.assignment.clone()).unwrap_or_default(),
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        self.check_member(member_id, instance_id, generation)?;
        let member = self.members.get_mut(member_id).expect("checked");
        member.heartbeat_deadline = now + member.session_timeout;
        match self.state {
            GroupState::PreparingRebalance => Err(ResponseError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// LeaveGroup for one member (by member id, or by instance id for static members).
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: Instant,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let id = match instance_id {
            Some(instance) => {
                let current = self.instances.get(instance).cloned().ok_or(ResponseError::UnknownMemberId)?;
                if !member_id.is_empty() && member_id != current {
                    return Err(ResponseError::FencedInstanceId);
                }
                current
            }
            None => member_id.to_string(),
        };
        if self.pending.remove(&id).is_some() {
            return Ok(());
        }
        if !self.members.contains_key(&id) {
            return Err(ResponseError::UnknownMemberId);
        }
        self.remove_member(&id, now, now_ms);
        Ok(())
    }

    fn drop_member(&mut self, id: &str) {
        if let Some(mut m) = self.members.shift_remove(id) {
            if let Some(instance) = &m.instance_id {
                if self.instances.get(instance).is_some_and(|c| c == id) {
                    self.instances.remove(instance);
                }
            }
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinResult::error(ResponseError::UnknownMemberId, id));
            }
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResult { error: ResponseError::UnknownMemberId.code(), ..Default::default() });
            }
        }
    }

    /// The classic group a consumer group whose remaining members all use the classic protocol
    /// becomes (online downgrade): at `generation` (the consumer group's epoch), the first
    /// member as leader, the protocol its members vote for, each member holding `partitions`
    /// (its target assignment, in the consumer protocol's format at its subscription's
    /// version); then a rebalance, so that the members rejoin it as a classic group.
    pub fn downgraded(id: &str, generation: i32, members: Vec<Downgraded>, now: Instant, now_ms: i64) -> Group {
        let mut g = Group::new(id, now_ms);
        g.generation = generation;
        g.protocol_type = Some("consumer".into());
        for m in members.iter() {
            if let Some(instance) = &m.instance_id {
                g.instances.insert(instance.clone(), m.id.clone());
            }
            g.members.insert(
                m.id.clone(),
                Member {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: m.protocols.clone(),
                    assignment: Bytes::new(),
                    heartbeat_deadline: now + m.session_timeout,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        g.leader = g.members.keys().next().cloned();
        g.protocol = g.select_protocol();
        let protocol = g.protocol.clone().unwrap_or_default();
        for m in members {
            let member = g.members.get_mut(&m.id).expect("inserted above");
            let version = super::embedded::version(&member.metadata_for(&protocol)).unwrap_or(0);
            member.assignment = super::embedded::encode_assignment(version, &m.partitions);
        }
        g.set_state(GroupState::Stable, now_ms);
        g.prepare_rebalance(now, now_ms, Duration::ZERO);
        g
    }

    /// Removes a member and starts a rebalance (or completes the one under way).
    pub fn remove_member(&mut self, id: &str, now: Instant, now_ms: i64) {
        self.drop_member(id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(now, now_ms, Duration::ZERO),
            _ => {}
        }
        self.try_complete_join(now, now_ms);
    }

    /// Timer work: expired sessions, pending members, sync and rebalance deadlines.
    pub fn tick(&mut self, now: Instant, now_ms: i64) {
        self.pending.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.heartbeat_deadline <= now)
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.id, member = %id, "session timed out; member removed");
            self.remove_member(&id, now, now_ms);
        }
        if self.state == GroupState::CompletingRebalance && self.sync_deadline.is_some_and(|d| d <= now) {
            // The leader never sent the assignment: members that did not sync are dropped.
            let unsynced: Vec<String> =
                self.members.values().filter(|m| m.sync_waiter.is_none()).map(|m| m.id.clone()).collect();
            for id in unsynced {
                tracing::info!(group = %self.id, member = %id, "no SyncGroup before the rebalance timeout; removed");
                self.drop_member(&id);
            }
            self.prepare_rebalance(now, now_ms, Duration::ZERO);
        }
        self.try_complete_join(now, now_ms);
    }

    /// Topics the members subscribe to (consumer protocol), for OffsetDelete.
    pub fn subscribed(&self, topic: &str) -> bool {
        let protocol = self.protocol.clone().unwrap_or_default();
        self.members.values().any(|m| {
            super::records::subscribed_topics(&m.metadata_for(&protocol))
                .is_none_or(|topics| topics.iter().any(|t| t == topic))
        })
    }
}
