//! KRaft's consensus as a side-effect-free state machine (KIP-595, with KIP-996 pre-votes): the
//! roles of one voter (unattached, prospective, candidate, leader, follower, resigned), elections
//! with pre-votes and votes, BeginQuorumEpoch / EndQuorumEpoch, and the pull replication of the
//! log with Fetch (a follower fetches from its log end; the leader answers with records, or
//! with the diverging epoch and end offset the follower truncates to; the high watermark is what
//! a majority of voters has durably, once an entry of the leader's epoch is among it).
//!
//! `RaftCore::step` takes one input (a tick of this node's clock, a message, a disk completion,
//! a proposal) and returns outputs (messages to send, the election state to persist, log
//! appends and truncations to make, high watermark changes). Nothing here does I/O, reads a
//! clock or draws randomness of its own: the driver executes outputs in order, and the
//! deterministic simulation (`core_sim.rs`) runs many voters against a hostile network and disk.
//! The wire mapping (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of Kafka 4.1) and the
//! metadata log's files are the driver's.
//!
//! Invariants (asserted where cheap, checked by the simulation after every step): at most one
//! leader per epoch (a vote is persisted before it is sent, a voter votes once per epoch); the
//! epoch only grows; a leader never truncates its log and commits only once an entry of its own
//! epoch is on a majority; a follower appends only records the leader of its epoch sent it at its
//! log end, and truncates only where that leader says the logs diverge; a fetch offset counts
//! toward the high watermark only once durable (a follower fetches only when its appends are
//! durable).
//!
//! The voter set is the log's (KIP-853, `voter_set.rs`): the newest VotersRecord in it, else the
//! set at its start. A node outside that set never campaigns: it finds the leader by fetching
//! from a voter and follows it as an observer (`core_voters.rs`, which also holds the leader's
//! rules for a change of voters).

use std::collections::{BTreeMap, BTreeSet};

pub use super::entries::{Entries, Entry, Records};
use super::voter_set::VoterHistory;

pub use super::core_io::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Unattached,
    Prospective { granted: BTreeSet<NodeId> },
    Candidate { granted: BTreeSet<NodeId> },
    Leader { epoch_start: u64, progress: BTreeMap<NodeId, Progress> },
    Follower { leader: NodeId },
    Resigned,
}

/// What the leader knows of a voter or an observer: its durable log end, when it last fetched,
/// and when a fetch of it last reached the leader's log end (Kafka's `lastCaughtUpTimestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub end: u64,
    pub last_fetch_ms: i64,
    pub caught_up_ms: Option<i64>,
}

pub struct RaftCore<V> {
    pub(super) config: Config,
    /// The voter set in force, and where in the log it changed.
    pub(super) voters: VoterHistory,
    pub(super) state: ElectionState,
    pub(super) role: Role,
    pub(super) log: Entries<V>,
    durable_end: u64,
    pub(super) high_watermark: u64,
    pub(super) now_ms: i64,
    random: u64,
    /// Unattached / prospective / candidate / resigned: when to campaign.
    pub(super) election_deadline_ms: i64,
    /// Follower: when to give up on the leader.
    fetch_deadline_ms: i64,
    /// Follower: when the fetch in flight (if any) was sent, and its id.
    pub(super) fetch_sent: Option<(i64, u64)>,
    /// The id of the last fetch sent.
    pub(super) fetch_id: u64,
    /// The newest snapshot this node has: (end, epoch of its last record).
    snapshot: Option<(u64, i32)>,
    /// Follower: the leader's snapshot being downloaded.
    fetching_snapshot: Option<(u64, i32)>,
    /// Follower: a request to the leader failed in transport since its last answer.
    leader_unreachable: bool,
    /// When this node last heard from the leader it follows (an answer to its fetch, or its
    /// BeginQuorumEpoch): a follower refuses pre-votes only within a fetch timeout of that.
    leader_contact_ms: i64,
    /// Leader: when to repeat BeginQuorumEpoch to voters that have not fetched lately.
    begin_epoch_resend_ms: i64,
}

impl<V: Clone + std::fmt::Debug + Records> RaftCore<V> {
    /// A voter restarting with its durable election state and log (everything in `log` is
    /// durable; it may start after a snapshot) and its newest snapshot, if any. It never leads
    /// the epoch it restarts in: a leader of it resigns.
    pub fn restore(
        config: Config,
        state: ElectionState,
        log: Entries<V>,
        snapshot: Option<(u64, i32)>,
        now_ms: i64,
        random: u64,
    ) -> Self {
        assert!(log.last_epoch() <= state.epoch, "no entry of a future epoch");
        assert!(
            snapshot.is_none_or(|(end, _)| end >= log.start() && end <= log.end())
                && (log.start() == 0 || snapshot.is_some()),
            "the log starts at or before the newest snapshot, and after one if not at 0"
        );
        let durable_end = log.end();
        // What a snapshot holds is committed.
        let high_watermark = snapshot.map_or(0, |(end, _)| end);
        let role = match state.leader {
            Some(leader) if leader == config.id => Role::Resigned,
            Some(leader) => Role::Follower { leader },
            None => Role::Unattached,
        };
        let mut voters = VoterHistory::new(&config.voters);
        record_voters(&mut voters, log.start(), log.entries());
        let mut core = RaftCore {
            config,
            voters,
            state,
            role,
            log,
            durable_end,
            high_watermark,
            now_ms,
            random,
            election_deadline_ms: 0,
            fetch_deadline_ms: 0,
            fetch_sent: None,
            fetch_id: 0,
            snapshot,
            fetching_snapshot: None,
            leader_unreachable: false,
            leader_contact_ms: now_ms,
            begin_epoch_resend_ms: 0,
        };
        core.election_deadline_ms = now_ms + core.election_timeout();
        core.fetch_deadline_ms = now_ms + core.config.fetch_timeout_ms;
        core
    }

    pub fn role(&self) -> &Role {
        &self.role
    }
    pub fn election_state(&self) -> ElectionState {
        self.state
    }
    pub fn log(&self) -> &Entries<V> {
        &self.log
    }
    pub fn durable_end(&self) -> u64 {
        self.durable_end
    }
    pub fn high_watermark(&self) -> u64 {
        self.high_watermark
    }
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }
    pub fn snapshot(&self) -> Option<(u64, i32)> {
        self.snapshot
    }

    /// The voter set in force (the newest in the log, committed or not).
    pub fn voters(&self) -> &[NodeId] {
        self.voters.latest()
    }
    pub(super) fn majority(&self) -> usize {
        self.voters().len() / 2 + 1
    }
    /// Every voter but this node.
    pub(super) fn others(&self) -> Vec<NodeId> {
        self.voters().iter().copied().filter(|v| *v != self.config.id).collect()
    }
    pub(super) fn is_voter(&self, id: NodeId) -> bool {
        self.voters.contains(id)
    }
    /// Whether this node votes (else it observes: it follows the leader and never campaigns).
    pub fn am_voter(&self) -> bool {
        self.is_voter(self.config.id)
    }
    /// The leader of this epoch that this node names in its answers: not itself once it no longer
    /// leads (a resigned leader, removed from the voters, never campaigns again: voters it sent
    /// back to itself would wait for it forever).
    fn named_leader(&self) -> Option<NodeId> {
        self.state.leader.filter(|l| *l != self.config.id || self.is_leader())
    }
    fn last_epoch(&self) -> i32 {
        self.log.last_epoch()
    }
    fn end(&self) -> u64 {
        self.log.end()
    }
    /// A random duration in [base, 2 * base).
    pub(super) fn jitter(&mut self, base_ms: i64) -> i64 {
        // splitmix64 over the driver's randomness: deterministic for a deterministic driver.
        let mut rng = SplitMix64(self.random);
        let z = rng.next_u64();
        self.random = rng.0;
        base_ms + (z % base_ms.max(1) as u64) as i64
    }
    pub(super) fn election_timeout(&mut self) -> i64 {
        self.jitter(self.config.election_timeout_ms)
    }

    /// The end of `epoch` (or of the largest epoch below it) in this log: (that epoch, its end).
    fn end_of_epoch(&self, epoch: i32) -> (i32, u64) {
        self.log.end_of_epoch(epoch)
    }

    pub fn step(&mut self, input: Input<V>) -> Vec<Output<V>> {
        let mut out = Vec::new();
        match input {
            Input::Tick { now_ms, random } => {
                self.now_ms = self.now_ms.max(now_ms);
                self.random ^= random;
                self.on_tick(&mut out);
            }
            Input::Message { from, message } => self.on_message(from, message, &mut out),
            Input::Appended { end } => self.on_appended(end, &mut out),
            Input::Propose(value) => match (&self.role, value.voters()) {
                (Role::Leader { .. }, None) => {
                    self.append(vec![Entry { epoch: self.state.epoch, value: Some(value) }], &mut out)
                }
                // (The same voters again is allowed: new endpoints, UpdateRaftVoter.)
                (Role::Leader { .. }, Some(set))
                    if matches!(
                        self.check_voter_change(&set),
                        Ok(()) | Err(super::core_voters::ChangeRefusal::NoChange)
                    ) =>
                {
                    self.append(vec![Entry { epoch: self.state.epoch, value: Some(value) }], &mut out)
                }
                _ => out.push(Output::Refused(value)),
            },
            Input::Snapshotted { end } => {
                assert!(end <= self.high_watermark && end >= self.log.start(), "a snapshot of committed entries");
                if self.snapshot.is_none_or(|(e, _)| e < end) {
                    self.snapshot = Some((end, self.log.epoch_before(end)));
                }
            }
            Input::Compact { end } => {
                assert!(self.snapshot.is_some_and(|(e, _)| end <= e), "a log compacts below a snapshot only");
                self.log.compact(end);
                self.voters.compact(self.log.start());
            }
            Input::SnapshotFetched(fetched) => self.on_snapshot_fetched(fetched, &mut out),
            Input::SnapshotRead { from } => {
                let now = self.now_ms;
                if let Role::Leader { progress, .. } = &mut self.role {
                    if let Some(p) = progress.get_mut(&from) {
                        p.last_fetch_ms = now;
                    }
                }
            }
            Input::Unreachable { to } => {
                if matches!(self.role, Role::Follower { leader } if leader == to) && !self.leader_unreachable {
                    self.leader_unreachable = true;
                    let soon = self.now_ms + self.jitter(self.config.election_backoff_max_ms / 4 + 1);
                    self.fetch_deadline_ms = self.fetch_deadline_ms.min(soon);
                }
            }
        }
        out
    }

    /// A downloaded snapshot replaces the log, if it is still the one wanted: it is committed,
    /// and beyond this log (the leader points at one only then), so nothing durable this node
    /// had counted for the leader's high watermark is lost.
    fn on_snapshot_fetched(&mut self, fetched: Option<(u64, i32, Vec<NodeId>)>, out: &mut Vec<Output<V>>) {
        let wanted = self.fetching_snapshot.take();
        if let Some((end, epoch, voters)) = fetched.filter(|(end, epoch, _)| Some((*end, *epoch)) == wanted) {
            if end > self.log.end() || epoch > self.log.last_epoch() {
                self.log = Entries::after_snapshot(end, epoch, Vec::new());
                self.voters = VoterHistory::new(&voters);
                self.durable_end = end;
                self.snapshot = Some((end, epoch));
                out.push(Output::InstallSnapshot { end, epoch });
                if end > self.high_watermark {
                    self.high_watermark = end;
                    out.push(Output::HighWatermark(end));
                }
            }
        }
        if let Role::Follower { leader } = self.role {
            self.fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms;
            self.send_fetch(leader, out);
        }
    }

    pub(super) fn persist(&mut self, state: ElectionState, out: &mut Vec<Output<V>>) {
        assert!(state.epoch >= self.state.epoch, "the epoch never goes back");
        if state.epoch == self.state.epoch {
            assert!(self.state.voted_for.is_none() || self.state.voted_for == state.voted_for, "one vote per epoch");
            assert!(self.state.leader.is_none() || self.state.leader == state.leader, "one leader per epoch");
        }
        self.state = state;
        out.push(Output::Persist(state));
    }

    fn append(&mut self, entries: Vec<Entry<V>>, out: &mut Vec<Output<V>>) {
        if entries.is_empty() {
            return;
        }
        out.push(Output::Append { start: self.end(), entries: entries.clone() });
        let start = self.end();
        let changed = record_voters(&mut self.voters, start, &entries);
        self.log.extend(entries);
        if changed {
            self.on_voters_changed();
        }
    }

    fn on_tick(&mut self, out: &mut Vec<Output<V>>) {
        let now = self.now_ms;
        match &self.role {
            Role::Unattached | Role::Resigned | Role::Prospective { .. } | Role::Candidate { .. } => {
                if now >= self.election_deadline_ms && self.am_voter() {
                    self.become_prospective(out);
                } else if now >= self.election_deadline_ms {
                    self.discover_leader(out);
                }
            }
            Role::Follower { leader } => {
                let leader = *leader;
                if now >= self.fetch_deadline_ms && self.am_voter() {
                    self.become_prospective(out);
                } else if now >= self.fetch_deadline_ms {
                    self.discover_leader(out);
                } else if self.fetch_sent.is_none_or(|(sent, _)| now >= sent + self.config.request_timeout_ms) {
                    self.fetch_sent = None;
                    self.send_fetch(leader, out);
                }
            }
            Role::Leader { progress, .. } => {
                // Check quorum: a leader a majority of voters has not fetched from lately resigns
                // (itself counted if it votes; a voter it has not heard from counts as silent).
                let mut recent: Vec<i64> =
                    progress.iter().filter(|(id, _)| self.is_voter(**id)).map(|(_, p)| p.last_fetch_ms).collect();
                if self.am_voter() {
                    recent.push(now);
                }
                recent.sort_unstable_by(|a, b| b.cmp(a));
                let horizon = self.config.fetch_timeout_ms * 3 / 2;
                let latest = recent.get(self.majority() - 1).copied().unwrap_or(i64::MIN);
                if self.voters() != [self.config.id] && now.saturating_sub(latest) > horizon {
                    self.broadcast(Message::EndQuorumEpoch { epoch: self.state.epoch }, out);
                    self.role = Role::Resigned;
                    self.election_deadline_ms = now + self.jitter(self.config.election_backoff_max_ms / 2 + 1);
                } else if now >= self.begin_epoch_resend_ms {
                    // BeginQuorumEpoch again to voters that have not fetched lately (Kafka's leader
                    // repeats it until they do): one that missed it learns the leader; one that
                    // moved to a later epoch (a lost election) answers with it, and this leader
                    // steps down for an election everyone can join.
                    let quiet: Vec<NodeId> = progress
                        .iter()
                        .filter(|(id, p)| self.is_voter(**id) && now - p.last_fetch_ms >= self.config.fetch_timeout_ms)
                        .map(|(id, _)| *id)
                        .collect();
                    for to in quiet {
                        out.push(Output::Send { to, message: Message::BeginQuorumEpoch { epoch: self.state.epoch } });
                    }
                    self.begin_epoch_resend_ms = now + self.config.fetch_timeout_ms / 2;
                }
            }
        }
    }

    /// KIP-996: ask for pre-votes for the next epoch before bumping ours.
    fn become_prospective(&mut self, out: &mut Vec<Output<V>>) {
        self.role = Role::Prospective { granted: BTreeSet::from([self.config.id]) };
        self.campaign(self.state.epoch + 1, true, out);
    }

    fn become_candidate(&mut self, out: &mut Vec<Output<V>>) {
        let state = ElectionState { epoch: self.state.epoch + 1, voted_for: Some(self.config.id), leader: None };
        self.persist(state, out);
        self.role = Role::Candidate { granted: BTreeSet::from([self.config.id]) };
        self.campaign(state.epoch, false, out);
    }

    /// Asks every other voter for its (pre-)vote in `epoch`; decides at once if this node's own
    /// is enough (a single voter).
    fn campaign(&mut self, epoch: i32, pre_vote: bool, out: &mut Vec<Output<V>>) {
        self.election_deadline_ms = self.now_ms + self.election_timeout();
        let (last_epoch, end_offset) = (self.last_epoch(), self.end());
        self.broadcast(Message::Vote { epoch, pre_vote, last_epoch, end_offset }, out);
        self.check_election(out);
    }

    pub(super) fn broadcast(&self, message: Message<V>, out: &mut Vec<Output<V>>) {
        for to in self.others() {
            out.push(Output::Send { to, message: message.clone() });
        }
    }

    fn check_election(&mut self, out: &mut Vec<Output<V>>) {
        if !self.am_voter() {
            return;
        }
        match &self.role {
            Role::Prospective { granted } if granted.len() >= self.majority() => self.become_candidate(out),
            Role::Candidate { granted } if granted.len() >= self.majority() => self.become_leader(out),
            _ => {}
        }
    }

    fn become_leader(&mut self, out: &mut Vec<Output<V>>) {
        let state = ElectionState { leader: Some(self.config.id), ..self.state };
        self.persist(state, out);
        let epoch_start = self.end();
        let progress = self
            .others()
            .into_iter()
            .map(|v| (v, Progress { end: 0, last_fetch_ms: self.now_ms, caught_up_ms: None }))
            .collect();
        self.role = Role::Leader { epoch_start, progress };
        self.begin_epoch_resend_ms = self.now_ms + self.config.fetch_timeout_ms / 2;
        self.append(vec![Entry { epoch: self.state.epoch, value: None }], out);
        self.broadcast(Message::BeginQuorumEpoch { epoch: self.state.epoch }, out);
    }

    pub(super) fn become_follower(&mut self, epoch: i32, leader: NodeId, out: &mut Vec<Output<V>>) {
        let voted_for = if epoch == self.state.epoch { self.state.voted_for } else { None };
        self.persist(ElectionState { epoch, voted_for, leader: Some(leader) }, out);
        self.leader_contact_ms = self.now_ms;
        self.refollow(leader, out);
    }

    /// Back to following this epoch's leader after a lost pre-vote election (Kafka's prospective
    /// state with a known leader): fetching again, but with no fresh contact with it, so this
    /// node grants pre-votes as soon as its last contact is a fetch timeout old (two nodes
    /// sending each other back to a dead leader would otherwise never elect a new one).
    pub(super) fn refollow(&mut self, leader: NodeId, out: &mut Vec<Output<V>>) {
        self.role = Role::Follower { leader };
        self.fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms;
        self.fetch_sent = None;
        self.leader_unreachable = false;
        self.send_fetch(leader, out);
    }

    fn become_unattached(&mut self, epoch: i32, out: &mut Vec<Output<V>>) {
        self.persist(ElectionState { epoch, voted_for: None, leader: None }, out);
        self.role = Role::Unattached;
        self.election_deadline_ms = self.now_ms + self.election_timeout();
    }

    fn send_fetch(&mut self, leader: NodeId, out: &mut Vec<Output<V>>) {
        // Only from a durable log end: what the leader counts toward the high watermark.
        if self.fetch_sent.is_some() || self.fetching_snapshot.is_some() || self.durable_end < self.end() {
            return;
        }
        let message = self.next_fetch();
        out.push(Output::Send { to: leader, message });
    }

    /// A Fetch from this node's log end, now the one in flight.
    pub(super) fn next_fetch(&mut self) -> Message<V> {
        self.fetch_id += 1;
        self.fetch_sent = Some((self.now_ms, self.fetch_id));
        Message::Fetch {
            epoch: self.state.epoch,
            fetch_offset: self.end(),
            last_fetched_epoch: self.last_epoch(),
            id: self.fetch_id,
        }
    }

    fn on_appended(&mut self, end: u64, out: &mut Vec<Output<V>>) {
        // A completion for entries since truncated away is ignored (it covers no more than the log).
        self.durable_end = self.durable_end.max(end.min(self.end()));
        match &self.role {
            Role::Leader { .. } => self.advance_high_watermark(out),
            Role::Follower { leader } => {
                let leader = *leader;
                self.send_fetch(leader, out);
            }
            _ => {}
        }
    }

    fn advance_high_watermark(&mut self, out: &mut Vec<Output<V>>) {
        let Role::Leader { epoch_start, progress } = &self.role else { return };
        // The voters' durable ends (this node's only if it votes; a voter not heard from yet
        // holds nothing).
        let mut ends: Vec<u64> = progress.iter().filter(|(id, _)| self.is_voter(**id)).map(|(_, p)| p.end).collect();
        if self.am_voter() {
            ends.push(self.durable_end);
        }
        ends.sort_unstable_by(|a, b| b.cmp(a));
        let Some(&candidate) = ends.get(self.majority() - 1) else { return };
        // Only once an entry of this epoch (its first at epoch_start) is on a majority.
        if candidate > *epoch_start && candidate > self.high_watermark {
            self.high_watermark = candidate;
            out.push(Output::HighWatermark(candidate));
            self.resign_if_removed(out);
        }
    }

    fn on_message(&mut self, from: NodeId, message: Message<V>, out: &mut Vec<Output<V>>) {
        let epoch = message.epoch();
        let pre_vote =
            matches!(message, Message::Vote { pre_vote: true, .. } | Message::VoteResponse { pre_vote: true, .. });
        // A higher epoch: this node moves to it (a pre-vote's epoch is only a proposal).
        if epoch > self.state.epoch && !pre_vote {
            let leader = match &message {
                Message::BeginQuorumEpoch { .. } => Some(from),
                Message::FetchResponse { leader, .. } | Message::VoteResponse { leader, .. } => *leader,
                _ => None,
            };
            match leader {
                Some(leader) if leader != self.config.id => self.become_follower(epoch, leader, out),
                _ => self.become_unattached(epoch, out),
            }
        }
        // This epoch's leader named by an answer, while none is known: follow it.
        if epoch == self.state.epoch && self.state.leader.is_none() {
            let named = match &message {
                Message::FetchResponse { leader, .. } | Message::VoteResponse { pre_vote: false, leader, .. } => {
                    *leader
                }
                _ => None,
            };
            if let Some(leader) = named.filter(|l| *l != self.config.id) {
                self.become_follower(epoch, leader, out);
            }
        } else if epoch == self.state.epoch {
            self.observer_found_leader(&message, out);
        }
        match message {
            Message::Vote { epoch, pre_vote, last_epoch, end_offset } => {
                self.on_vote(from, epoch, pre_vote, (last_epoch, end_offset), out)
            }
            Message::VoteResponse { epoch, pre_vote, granted, leader } => {
                self.on_vote_response(from, epoch, pre_vote, granted, leader, out)
            }
            Message::BeginQuorumEpoch { epoch } => {
                // (A second leader named in one epoch is ignored: it cannot be, and the first stays.)
                if epoch == self.state.epoch && self.state.leader.is_none() && from != self.config.id {
                    self.become_follower(epoch, from, out);
                }
                out.push(Output::Send {
                    to: from,
                    message: Message::BeginQuorumEpochResponse { epoch: self.state.epoch },
                });
            }
            Message::BeginQuorumEpochResponse { .. } => {}
            Message::EndQuorumEpoch { epoch } => {
                // The leader resigned: campaign soon rather than after the fetch timeout.
                if epoch == self.state.epoch && matches!(self.role, Role::Follower { leader } if leader == from) {
                    self.fetch_deadline_ms = self.now_ms + self.jitter(self.config.election_backoff_max_ms / 4 + 1);
                }
            }
            Message::Fetch { epoch, fetch_offset, last_fetched_epoch, id } => {
                self.on_fetch(from, epoch, (fetch_offset, last_fetched_epoch), id, out)
            }
            Message::FetchResponse { epoch, leader, result, id } => {
                self.on_fetch_response(from, epoch, leader, result, id, out)
            }
        }
    }

    fn on_vote(&mut self, from: NodeId, epoch: i32, pre_vote: bool, last: (i32, u64), out: &mut Vec<Output<V>>) {
        let up_to_date = last >= (self.last_epoch(), self.end());
        // (As in Kafka, a vote is not refused for the candidate's membership: a voter behind on
        // the log may not know it was added yet, and the candidate counts only its voters.)
        let granted = if pre_vote {
            // Granted to a better-or-equal log for a future epoch, unless this node still follows
            // (or is) a live leader.
            let live_leader = match self.role {
                Role::Leader { .. } => true,
                Role::Follower { .. } => {
                    let lease_end = self.fetch_deadline_ms.min(self.leader_contact_ms + self.config.fetch_timeout_ms);
                    self.now_ms < lease_end && !self.leader_unreachable
                }
                _ => false,
            };
            // Two voters campaigning at once with the same log would grant each other and split
            // the vote that follows: the lower id goes first (a pre-vote binds nothing, and the
            // better log, or the lowest id among equal ones, is never refused).
            let tie_lost = matches!(self.role, Role::Prospective { .. })
                && epoch == self.state.epoch + 1
                && last == (self.last_epoch(), self.end())
                && from > self.config.id;
            epoch > self.state.epoch && up_to_date && !live_leader && !tie_lost
        } else {
            let free = self.state.voted_for.is_none_or(|v| v == from) && self.state.leader.is_none();
            let grant = epoch == self.state.epoch && free && up_to_date;
            if grant && self.state.voted_for.is_none() {
                self.persist(ElectionState { voted_for: Some(from), ..self.state }, out);
                self.election_deadline_ms = self.now_ms + self.election_timeout();
            }
            grant
        };
        // A granted pre-vote answers in the epoch asked for; otherwise this node's epoch and leader
        // (a voter behind catches up with them).
        let epoch = if pre_vote && granted { epoch } else { self.state.epoch };
        let message = Message::VoteResponse { epoch, pre_vote, granted, leader: self.named_leader() };
        out.push(Output::Send { to: from, message });
    }

    fn on_vote_response(
        &mut self,
        from: NodeId,
        epoch: i32,
        pre_vote: bool,
        granted: bool,
        leader: Option<NodeId>,
        out: &mut Vec<Output<V>>,
    ) {
        if pre_vote && !granted && epoch > self.state.epoch {
            // Behind: follow the leader it names, else wait in its epoch.
            match leader {
                Some(l) if l != self.config.id => self.become_follower(epoch, l, out),
                _ => self.become_unattached(epoch, out),
            }
            return;
        }
        if pre_vote && !granted && epoch == self.state.epoch && matches!(self.role, Role::Prospective { .. }) {
            // A voter still follows a live leader of this epoch: follow it again (Kafka's
            // prospective state after a lost election), rather than campaign on forever while
            // the leader's other followers keep refusing (a leader is not voted away).
            match leader.filter(|l| *l != self.config.id) {
                Some(l) if self.state.leader == Some(l) => self.refollow(l, out),
                Some(l) if self.state.leader.is_none() => self.become_follower(epoch, l, out),
                _ => {}
            }
            return;
        }
        if !granted || !self.is_voter(from) {
            return;
        }
        let current = self.state.epoch;
        match &mut self.role {
            Role::Prospective { granted } if pre_vote && epoch == current + 1 => {
                granted.insert(from);
            }
            Role::Candidate { granted } if !pre_vote && epoch == current => {
                granted.insert(from);
            }
            _ => return,
        }
        self.check_election(out);
    }

    fn on_fetch(&mut self, from: NodeId, epoch: i32, position: (u64, i32), id: u64, out: &mut Vec<Output<V>>) {
        let (fetch_offset, last_fetched_epoch) = position;
        let (my_epoch, leader) = (self.state.epoch, self.named_leader());
        let reply = move |result| Message::FetchResponse { epoch: my_epoch, leader, result, id };
        if !self.is_leader() || epoch != self.state.epoch {
            out.push(Output::Send { to: from, message: reply(FetchResult::NotLeader) });
            return;
        }
        // Behind the log start (or with nothing at all): the newest snapshot first (Kafka's
        // `validateOffsetAndEpoch` and its fetch-from-zero rule).
        if let Some((end_offset, epoch)) = self.snapshot {
            let (start, start_epoch) = (self.log.start(), self.log.start_epoch());
            if fetch_offset == 0
                || fetch_offset < start
                || (fetch_offset == start && last_fetched_epoch != start_epoch)
                || last_fetched_epoch < start_epoch
            {
                out.push(Output::Send { to: from, message: reply(FetchResult::Snapshot { end_offset, epoch }) });
                return;
            }
        }
        if fetch_offset > 0 {
            let (found, end) = self.end_of_epoch(last_fetched_epoch);
            if found != last_fetched_epoch || end < fetch_offset {
                let result = FetchResult::Diverging { epoch: found, end_offset: end };
                out.push(Output::Send { to: from, message: reply(result) });
                return;
            }
        }
        self.record_fetch(from, fetch_offset);
        self.advance_high_watermark(out);
        let (start, entries) = self.log.read(fetch_offset, self.config.max_fetch_entries);
        let established = matches!(self.role, Role::Leader { epoch_start, .. } if self.high_watermark > epoch_start);
        let high_watermark = established.then_some(self.high_watermark);
        let result = FetchResult::Records { start, entries, high_watermark };
        out.push(Output::Send { to: from, message: reply(result) });
    }

    fn on_fetch_response(
        &mut self,
        from: NodeId,
        epoch: i32,
        leader: Option<NodeId>,
        result: FetchResult<V>,
        id: u64,
        out: &mut Vec<Output<V>>,
    ) {
        let Role::Follower { leader: following } = self.role else { return };
        if self.fetch_sent.is_none_or(|(_, in_flight)| in_flight != id) {
            return; // not the answer to the fetch in flight
        }
        if from != following || epoch != self.state.epoch {
            // Another epoch's answer (or a stale one): a newer leader it names is followed.
            if epoch == self.state.epoch && leader.is_some_and(|l| l != following) {
                tracing::debug!(?leader, following, "a fetch answer names another leader in this epoch");
            }
            return;
        }
        self.fetch_sent = None;
        self.leader_unreachable = false;
        if !matches!(result, FetchResult::NotLeader) {
            self.leader_contact_ms = self.now_ms;
        }
        match result {
            FetchResult::NotLeader => {}
            FetchResult::Snapshot { end_offset, epoch } => {
                self.fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms;
                self.fetching_snapshot = Some((end_offset, epoch));
                out.push(Output::FetchSnapshot { leader: following, end: end_offset, epoch });
            }
            FetchResult::Diverging { epoch: diverging, end_offset } => {
                self.fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms;
                let (_, own_end) = self.end_of_epoch(diverging);
                // (Never below the log start: what a snapshot holds is committed.)
                let end = end_offset.min(own_end).max(self.log.start());
                if end < self.end() {
                    let end = self.log.truncate(end);
                    self.voters.truncate(end);
                    self.durable_end = self.durable_end.min(end);
                    out.push(Output::Truncate { end });
                }
                self.send_fetch(following, out);
            }
            FetchResult::Records { start, entries, high_watermark } => {
                self.fetch_deadline_ms = self.now_ms + self.config.fetch_timeout_ms;
                if start == self.end() {
                    self.append(entries, out);
                }
                let high_watermark = high_watermark.unwrap_or(0).min(self.end());
                if high_watermark > self.high_watermark {
                    debug_assert!(self.log.is_boundary(high_watermark), "a high watermark ends a batch");
                    self.high_watermark = high_watermark;
                    out.push(Output::HighWatermark(high_watermark));
                }
                self.send_fetch(following, out);
            }
        }
    }
}

/// Records in `voters` the VotersRecords among `entries` (the first at offset `start`); whether
/// there was one.
fn record_voters<V: Records>(voters: &mut VoterHistory, start: u64, entries: &[Entry<V>]) -> bool {
    let mut offset = start;
    let mut changed = false;
    for entry in entries {
        if let Some(set) = entry.value.as_ref().and_then(Records::voters) {
            voters.record(offset, &set);
            changed = true;
        }
        offset += entry.records();
    }
    changed
}

#[cfg(test)]
#[path = "core_sim.rs"]
mod sim;

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "core_voters_tests.rs"]
mod voters_tests;
