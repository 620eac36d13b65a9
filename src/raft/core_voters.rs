//! The Raft core's side of dynamic voters (KIP-853): the leader's rules for a change of voters
//! (Kafka's `AddVoterHandler` / `RemoveVoterHandler` checks), what the leader tracks of observers
//! (a voter to be must be one, caught up), a removed leader's resignation, and how a node outside
//! the voter set finds the leader and follows it without ever campaigning.
//!
//! Invariants: a change adds or removes exactly one voter, is appended only by a leader whose
//! epoch has an entry committed (it fenced the changes of earlier leaders) and only once the
//! previous change is committed, so any two voter sets in force at once overlap in a majority;
//! the set never becomes empty; a leader that removed itself leads until that removal commits
//! (counting only the new voters), then resigns; a non-voter never asks for votes.

use super::core::{Progress, RaftCore, Records, Role};
use super::core_io::{Message, NodeId, Output};
use super::voter_set::canonical;

/// How recently a voter to be must have fetched (Kafka's `isReplicaCaughtUp`: an hour).
const CAUGHT_UP_HORIZON_MS: i64 = 3_600_000;
/// Observers a leader tracks at most (brokers and controllers that are not voters).
const MAX_TRACKED_OBSERVERS: usize = 4096;

/// Why a leader refuses a change of voters now (the driver maps each to Kafka's error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeRefusal {
    /// Not the leader.
    NotLeader,
    /// No entry of this leader's epoch is committed yet (REQUEST_TIMED_OUT in Kafka: "waiting for
    /// leader to establish HWM and fence previous voter changes").
    EpochNotCommitted,
    /// The previous change is not committed yet (REQUEST_TIMED_OUT).
    ChangePending,
    /// The new set is the set in force.
    NoChange,
    /// The new set differs by more than one voter.
    NotOneVoter,
    /// The change would leave no voter.
    LastVoter,
    /// The voter to add has not fetched up to the leader's log end lately (REQUEST_TIMED_OUT:
    /// "lagging behind").
    Lagging(NodeId),
}

impl<V: Clone + std::fmt::Debug + Records> RaftCore<V> {
    /// Whether the leader may append a VotersRecord making `new` the voter set now.
    pub fn check_voter_change(&self, new: &[NodeId]) -> Result<(), ChangeRefusal> {
        let Role::Leader { epoch_start, progress } = &self.role else { return Err(ChangeRefusal::NotLeader) };
        if self.high_watermark <= *epoch_start {
            return Err(ChangeRefusal::EpochNotCommitted);
        }
        if self.voters.latest_offset().is_some_and(|offset| offset >= self.high_watermark) {
            return Err(ChangeRefusal::ChangePending);
        }
        if new.is_empty() {
            return Err(ChangeRefusal::LastVoter);
        }
        let new = canonical(new);
        let current = self.voters();
        let added: Vec<NodeId> = new.iter().copied().filter(|v| !current.contains(v)).collect();
        let removed = current.iter().filter(|v| !new.contains(v)).count();
        match (added.as_slice(), removed) {
            // (Writing down the set in force, which the log does not hold yet: the voters a
            // quorum was formatted with, written once by its first leader.)
            ([], 0) if self.voters.latest_offset().is_none() && self.log.start() == 0 => Ok(()),
            ([], 0) => Err(ChangeRefusal::NoChange),
            ([id], 0) => {
                let caught_up = progress
                    .get(id)
                    .is_some_and(|p| p.caught_up_ms.is_some() && self.now_ms - p.last_fetch_ms < CAUGHT_UP_HORIZON_MS);
                if caught_up {
                    Ok(())
                } else {
                    Err(ChangeRefusal::Lagging(*id))
                }
            }
            ([], 1) => Ok(()),
            _ => Err(ChangeRefusal::NotOneVoter),
        }
    }

    /// Whether a VotersRecord in the log (not yet compacted away) holds the set in force.
    pub fn voters_in_log(&self) -> bool {
        self.voters.latest_offset().is_some()
    }

    /// The voter set in force for a log ending at `end` (what a snapshot ending there holds).
    pub fn voters_at(&self, end: u64) -> &[NodeId] {
        self.voters.at(end)
    }

    /// The offset of the newest VotersRecord kept in the log, if any.
    pub fn latest_voters_offset(&self) -> Option<u64> {
        self.voters.latest_offset()
    }

    /// The set in force changed (appended or undone): a leader tracks every voter of it.
    pub(super) fn on_voters_changed(&mut self) {
        let (now, me) = (self.now_ms, self.config.id);
        let voters = self.voters().to_vec();
        if let Role::Leader { progress, .. } = &mut self.role {
            for id in voters.into_iter().filter(|v| *v != me) {
                // (A voter added was an observer the leader tracked; one it never heard from
                // counts as silent from now.)
                progress.entry(id).or_insert(Progress { end: 0, last_fetch_ms: now, caught_up_ms: None });
            }
        }
    }

    /// A leader's record of a fetch from `from` (a voter or an observer) at `fetch_offset`.
    pub(super) fn record_fetch(&mut self, from: NodeId, fetch_offset: u64) {
        let (now, end) = (self.now_ms, self.log.end());
        let Role::Leader { progress, .. } = &mut self.role else { return };
        if !progress.contains_key(&from) && progress.len() >= MAX_TRACKED_OBSERVERS {
            return;
        }
        let p = progress.entry(from).or_default();
        p.end = p.end.max(fetch_offset);
        p.last_fetch_ms = now;
        if fetch_offset >= end {
            p.caught_up_ms = Some(now);
        }
    }

    /// A leader no longer in the voter set resigns once the change that removed it is committed
    /// (Kafka's leader resigns after answering RemoveRaftVoter): the voters elect a new leader at
    /// once, and this node goes on as an observer.
    pub(super) fn resign_if_removed(&mut self, out: &mut Vec<Output<V>>) {
        let committed = self.voters.latest_offset().is_none_or(|offset| offset < self.high_watermark);
        if !self.is_leader() || self.am_voter() || !committed {
            return;
        }
        self.broadcast(Message::EndQuorumEpoch { epoch: self.state.epoch }, out);
        self.role = Role::Resigned;
        self.election_deadline_ms = self.now_ms + self.election_timeout();
    }

    /// A non-voter with no leader to follow (or whose leader went quiet) asks a voter: the answer
    /// names the epoch's leader, which it then follows (Kafka's observer fetches from the
    /// bootstrap servers until it learns the leader).
    pub(super) fn discover_leader(&mut self, out: &mut Vec<Output<V>>) {
        self.role = Role::Unattached;
        self.election_deadline_ms = self.now_ms + self.election_timeout();
        let voters = self.others();
        if voters.is_empty() {
            return;
        }
        let pick = self.jitter(voters.len() as i64) as usize % voters.len();
        let message = self.next_fetch();
        out.push(Output::Send { to: voters[pick], message });
    }

    /// A non-voter not following anyone hears of its epoch's known leader again: it follows it.
    pub(super) fn observer_found_leader(&mut self, message: &Message<V>, out: &mut Vec<Output<V>>) {
        if self.am_voter() || !matches!(self.role, Role::Unattached | Role::Resigned) {
            return;
        }
        let Message::FetchResponse { leader: Some(leader), .. } = message else { return };
        if Some(*leader) == self.state.leader && *leader != self.config.id {
            self.refollow(*leader, out);
        }
    }
}
