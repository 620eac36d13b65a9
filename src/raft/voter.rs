//! The driver of one voter of a multi-voter KRaft quorum (Kafka's `KafkaRaftClient` around the
//! pure `core::RaftCore`): it owns the core and the metadata log's files (`voter_log.rs`), runs
//! on a thread of its own (appends are fsynced in place), and talks to the other voters with
//! Kafka 4.1's messages (`voter_wire.rs`) over connections of its own, two per voter (one for
//! Fetch, which the leader may hold, one for everything else). Incoming requests (from the
//! controller listener: Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of voters and observers)
//! come through `VoterHandle` and are answered with what the core says; a Fetch with nothing new
//! is held (up to its max_wait_ms) until the log or the high watermark moves.
//!
//! The driver executes the core's outputs in order: the election state is in `quorum-state`
//! before any message after it is sent; appends are written and fsynced before the core hears
//! they are durable; a truncation is durable before anything after it. Committed records reach
//! `on_commit` in offset order, each batch once, before a proposal waiting for them is answered.
//!
//! Snapshots (`voter_snapshots.rs`): the applied state is written as a snapshot after enough
//! committed bytes or time, the log is cleaned below older snapshots past its retention, a
//! follower behind the leader's log start downloads the leader's newest snapshot, and the leader
//! serves its snapshots with FetchSnapshot.
//!
//! Dynamic voters (`voter_changes.rs`, KIP-853): the voters and their endpoints are the log's;
//! connections open to voters as they are learnt; the leader writes the changes Add/Remove/
//! UpdateRaftVoter ask for; a node that is not a voter yet (an observer controller) follows the
//! leader its bootstrap servers name until a VotersRecord makes it one.
//!
//! Invariants: only the leader's own proposals are appended as its own (stamped with its epoch
//! at the core's offset); a proposal is answered once committed, or refused (not the leader, or
//! leadership lost before it committed: it may still commit under the next leader, as in Kafka);
//! a failed write stops the voter (Kafka halts on a metadata log I/O error).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest,
    FetchResponse, VoteRequest, VoteResponse,
};
use tokio::sync::{oneshot, watch};

use super::core::{Config, FetchResult, Input, Message, NodeId, Output, RaftCore, Role};
use super::leader::ObserverState;
use super::snapshot::{self, SnapshotId};
use super::snapshot_wire;
use super::voter_log::{Batch, VoterLog};
use super::voter_wire::{self as wire, Endpoint, Outgoing};
use super::MetadataLog;
use crate::metadata::records::MetadataRecord;
use crate::node::client::{transport_failed, Connection};
use crate::security::client::ClientSecurity;

/// How often the core's clock ticks.
const TICK: Duration = Duration::from_millis(10);
/// How long a follower's fetch may be held by the leader.
const FETCH_MAX_WAIT_MS: i32 = 500;
/// Batches per fetch answer.
const MAX_FETCH_ENTRIES: usize = 64;

#[derive(Debug, Clone)]
pub struct VoterSettings {
    pub node_id: NodeId,
    /// Every voter: id and controller listener (`controller.quorum.voters`).
    pub voters: BTreeMap<NodeId, Endpoint>,
    pub cluster_id: String,
    pub election_timeout_ms: i64,
    pub fetch_timeout_ms: i64,
    pub election_backoff_max_ms: i64,
    pub request_timeout_ms: i64,
    pub security: Arc<ClientSecurity>,
    pub snapshots: SnapshotPolicy,
    /// The voters of the bootstrap checkpoint (`format --initial-controllers / --standalone`),
    /// which the first leader writes into the log (KIP-853).
    pub initial_voters: Option<Vec<super::voters_record::VoterInfo>>,
    /// This voter's metadata directory id (`meta.properties`): with its id, the key Kafka's
    /// leader knows a voter of a dynamic quorum by (Fetch v17, Vote v2).
    pub directory_id: uuid::Uuid,
    /// Not a voter (yet): a controller formatted `--no-initial-controllers`, whose `voters` are
    /// its own endpoint and the bootstrap servers under ids -2, -3, ... (as Kafka numbers them):
    /// it follows the leader they name until a VotersRecord makes it a voter.
    pub observer: bool,
    /// Held by the controller from choosing the offsets of its records until they are answered
    /// (it decides them at the log's end): the driver appends batches of its own (the initial
    /// voters, changes of voters) only while it can take it, so they never land in between.
    pub writer_gate: Arc<std::sync::Mutex<()>>,
}

impl VoterSettings {
    /// The listener the voters talk on (this node's own endpoint's).
    pub fn listener(&self) -> &str {
        &self.voters[&self.node_id].listener
    }
}

/// What the voter knows, published after every step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub epoch: i32,
    pub leader: Option<NodeId>,
    /// Leading, and everything before its epoch is committed: it may take proposals.
    pub active: bool,
    pub high_watermark: u64,
    pub end: u64,
    /// The voter set in force (sorted ids).
    pub voters: Vec<NodeId>,
}

/// A voter's replication as its leader last saw it (DescribeQuorum): durable log end, and when
/// it last fetched (wall clock, ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VoterProgress {
    pub id: NodeId,
    pub end: i64,
    pub last_fetch_ms: i64,
}

/// What the quorum's committed records drive (the controller's image): batches as they commit,
/// the state a snapshot holds, and a snapshot's state loaded in its place.
pub trait Applier: Send {
    /// Applies the committed batches in [from, to) of `log`; returns the bytes they took.
    fn apply(&mut self, log: &MetadataLog, from: u64, to: u64) -> u64;
    /// The records that rebuild what was applied so far (None while it cannot be snapshotted,
    /// inside a metadata transaction).
    fn snapshot(&self) -> Option<Vec<MetadataRecord>>;
    /// Replaces the state with a snapshot's: everything below `end`.
    fn load(&mut self, end: u64, records: Vec<MetadataRecord>);
}

enum Event {
    Request {
        from: NodeId,
        message: Message<Batch>,
        max_wait_ms: i32,
        reply: oneshot::Sender<Reply>,
    },
    Answer {
        from: NodeId,
        message: Message<Batch>,
        batches: Vec<Bytes>,
    },
    Propose {
        records: Vec<MetadataRecord>,
        reply: ProposalReply,
    },
    Downloaded {
        id: SnapshotId,
        result: anyhow::Result<Vec<MetadataRecord>>,
    },
    /// Node `from` read a chunk of this voter's snapshot (FetchSnapshot).
    SnapshotRead {
        from: NodeId,
    },
    /// A change of voters asked of the leader (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter).
    ChangeVoters {
        change: VoterChange,
        reply: oneshot::Sender<ChangeOutcome>,
    },
    /// Whether the leader would accept a change now, nothing written (a voter's lag aside).
    CheckVoterChange {
        change: VoterChange,
        reply: oneshot::Sender<ChangeOutcome>,
    },
    /// A fetch answer named the leader's endpoint (how an observer reaches a leader it only
    /// heard of from a bootstrap server).
    LeaderEndpoint {
        id: NodeId,
        endpoint: Endpoint,
    },
    /// A request to voter `to` failed in transport (refused, reset, closed).
    Unreachable {
        to: NodeId,
    },
    Stop,
}

/// Where a proposal's outcome goes (the end offset of its batch once committed).
type ProposalReply = Box<dyn FnOnce(anyhow::Result<u64>) + Send>;

/// The core's answer to a request, with the bytes a fetch answer carries.
struct Reply {
    message: Option<Message<Batch>>,
    records: Bytes,
    epoch: i32,
    leader: Option<NodeId>,
}

struct Parked {
    from: NodeId,
    message: Message<Batch>,
    deadline: Instant,
    reply: oneshot::Sender<Reply>,
}

/// How handlers and the controller reach the voter.
#[derive(Clone)]
pub struct VoterHandle {
    events: mpsc::Sender<Event>,
    pub status: watch::Receiver<Status>,
    settings: Arc<VoterSettings>,
    progress: Arc<std::sync::Mutex<Vec<VoterProgress>>>,
    /// Observers (brokers) as they last fetched (DescribeQuorum's observers).
    observers: Arc<std::sync::Mutex<BTreeMap<NodeId, ObserverState>>>,
    /// The metadata log's directory (where its snapshots are).
    dir: std::path::PathBuf,
    /// Every voter as last known (configuration, log): directory id, endpoints.
    known: KnownVoters,
}

/// What is known of the voters, shared by the driver (which learns it from the log) and the
/// handle.
type KnownVoters = Arc<std::sync::RwLock<BTreeMap<NodeId, super::voters_record::VoterInfo>>>;

struct Driver {
    settings: Arc<VoterSettings>,
    core: RaftCore<Batch>,
    log: MetadataLog,
    events: mpsc::Receiver<Event>,
    peers: HashMap<NodeId, Peer>,
    /// Bytes of entries proposed or fetched, by the id their `Batch` carries, until written.
    pending: HashMap<u64, Bytes>,
    next_id: u64,
    /// Proposals waiting for the high watermark: (end offset, answer).
    waiting: Vec<(u64, ProposalReply)>,
    parked: Vec<Parked>,
    status: watch::Sender<Status>,
    progress: Arc<std::sync::Mutex<Vec<VoterProgress>>>,
    applier: Box<dyn Applier>,
    committed: u64,
    started: Instant,
    seed: u64,
    snapshots: snapshots::Snapshots,
    /// What is known of every voter, past and present (`voter_changes.rs`).
    known: BTreeMap<NodeId, super::voters_record::VoterInfo>,
    /// `known`, as the handle reads it.
    known_shared: KnownVoters,
    /// 1 for a dynamic quorum (KIP-853: its voters are in its log), else 0 (static voters).
    kraft_version: i16,
    runtime: tokio::runtime::Handle,
    events_tx: mpsc::Sender<Event>,
    /// Changes of voters asked while the controller was writing (`writer_gate`): tried again
    /// at the next tick.
    deferred_changes: Vec<(VoterChange, oneshot::Sender<ChangeOutcome>)>,
    /// When this voter last sent UpdateRaftVoter (core clock).
    update_sent_ms: Option<i64>,
}

/// `gate` if it is free now (a poisoned gate is free: its holder is gone).
fn take_gate(gate: &std::sync::Mutex<()>) -> Option<std::sync::MutexGuard<'_, ()>> {
    match gate.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

struct Peer {
    control: tokio::sync::mpsc::Sender<Message<Batch>>,
    fetch: tokio::sync::mpsc::Sender<Message<Batch>>,
}

/// Messages waiting for one peer connection, at most: past it a new one is dropped (Raft
/// tolerates lost messages: the core sends again on its timers), so a peer that stops reading
/// never makes this voter queue without bound.
const PEER_QUEUE: usize = 64;

/// Opens the voter's log in `metadata_dir` and starts its driver thread (peers' connections
/// on the current tokio runtime).
pub fn start(
    metadata_dir: &std::path::Path,
    settings: VoterSettings,
    mut applier: Box<dyn Applier>,
) -> anyhow::Result<VoterHandle> {
    anyhow::ensure!(settings.voters.contains_key(&settings.node_id), "the voter settings name this node's endpoint");
    let VoterLog { log, state, entries, snapshot } =
        MetadataLog::open_voter(metadata_dir, settings.node_id, crate::log::now_ms())?;
    // The newest snapshot's state first; the log after it applies as the quorum commits it.
    let committed = match snapshot {
        Some(id) => {
            applier.load(id.end_offset as u64, snapshot::read(&log.dir(), id)?);
            id.end_offset as u64
        }
        None => 0,
    };
    // The voters at the log's start: the newest snapshot's (a dynamic quorum's), else the
    // configured (static, or the bootstrap checkpoint's).
    let snapshot_voters = match snapshot {
        Some(id) => snapshot::read_voters(&log.dir(), id)?,
        None => None,
    };
    let config = Config {
        id: settings.node_id,
        voters: match &snapshot_voters {
            Some(voters) => voters.iter().map(|v| v.id).collect(),
            // (An observer's: the bootstrap servers, never itself.)
            None => {
                settings.voters.keys().copied().filter(|id| !settings.observer || *id != settings.node_id).collect()
            }
        },
        election_timeout_ms: settings.election_timeout_ms,
        fetch_timeout_ms: settings.fetch_timeout_ms,
        election_backoff_max_ms: settings.election_backoff_max_ms,
        request_timeout_ms: settings.request_timeout_ms + FETCH_MAX_WAIT_MS as i64,
        max_fetch_entries: MAX_FETCH_ENTRIES,
    };
    let seed = rand::random::<u64>();
    let known = changes::known_at_start(&settings, snapshot_voters.as_deref(), entries.entries());
    let core_snapshot = snapshot.map(|id| (id.end_offset as u64, id.epoch));
    let core = RaftCore::restore(config, state, entries, core_snapshot, 0, seed);
    let dynamic = settings.initial_voters.is_some() || snapshot_voters.is_some() || settings.observer;
    let core_voters_in_log = core.voters_in_log();
    tracing::info!(
        node = settings.node_id,
        epoch = state.epoch,
        start = core.log().start(),
        end = core.log().end(),
        voters = ?settings.voters.keys().collect::<Vec<_>>(),
        "metadata log voter open"
    );
    let settings = Arc::new(settings);
    let (events_tx, events) = mpsc::channel();
    let (status, status_rx) = watch::channel(Status::default());
    let runtime = tokio::runtime::Handle::current();
    let progress = Arc::new(std::sync::Mutex::new(Vec::new()));
    let dir = log.dir();
    let snapshots = snapshots::Snapshots::new(events_tx.clone(), runtime.clone());
    let mut driver = Driver {
        settings: settings.clone(),
        core,
        log,
        events,
        peers: HashMap::new(),
        pending: HashMap::new(),
        next_id: 1,
        waiting: Vec::new(),
        parked: Vec::new(),
        status,
        progress: progress.clone(),
        applier,
        committed,
        started: Instant::now(),
        seed,
        snapshots,
        kraft_version: if dynamic || core_voters_in_log { 1 } else { 0 },
        known,
        known_shared: KnownVoters::default(),
        runtime: runtime.clone(),
        events_tx: events_tx.clone(),
        deferred_changes: Vec::new(),
        update_sent_ms: None,
    };
    driver.publish_known();
    let known = driver.known_shared.clone();
    std::thread::Builder::new().name(format!("raft-voter-{}", settings.node_id)).spawn(move || {
        if let Err(e) = driver.run() {
            // Kafka's "Unexpected error in raft IO thread": a node whose voter is gone must not
            // keep serving as if it had one. (What a leader sends is checked before it gets here:
            // a bad fetched batch is refused there and fetched again.)
            crate::fatal::halt(&format!("the metadata log's voter stopped: {e:#}"));
        }
        let _ = driver.log.close();
    })?;
    let observers = Default::default();
    Ok(VoterHandle { events: events_tx, status: status_rx, settings, progress, observers, dir, known })
}

/// A task sending one kind of message to voter `to` over a connection of its own, from a queue
/// of at most `PEER_QUEUE` messages.
fn spawn_peer(
    runtime: &tokio::runtime::Handle,
    settings: &Arc<VoterSettings>,
    to: NodeId,
    addr: String,
    answers: mpsc::Sender<Event>,
) -> tokio::sync::mpsc::Sender<Message<Batch>> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message<Batch>>(PEER_QUEUE);
    let settings = settings.clone();
    runtime.spawn(async move {
        let mut connection: Option<Connection> = None;
        let timeout = Duration::from_millis(settings.request_timeout_ms.max(1) as u64);
        let own = settings.voters[&settings.node_id].clone();
        while let Some(message) = rx.recv().await {
            let Some(request) = wire::request(
                &settings.cluster_id,
                settings.node_id,
                to,
                &message,
                &own,
                FETCH_MAX_WAIT_MS,
                settings.directory_id,
            ) else {
                continue;
            };
            if connection.is_none() {
                match Connection::connect(&addr, "raft-client", timeout, &settings.security).await {
                    Ok(c) => connection = Some(c),
                    Err(e) => {
                        tracing::debug!(to, error = %e, "connecting to a voter");
                        if transport_failed(&e) {
                            let _ = answers.send(Event::Unreachable { to });
                        }
                        continue;
                    }
                }
            }
            let conn = connection.as_mut().expect("connected");
            let answer = match (request, &message) {
                (Outgoing::Vote(r), Message::Vote { pre_vote, epoch, .. }) => conn
                    .send(wire::VOTE_VERSION, &r, Duration::ZERO)
                    .await
                    .map(|a| wire::vote_answer(&a, *pre_vote, *epoch).map(|m| (m, Vec::new()))),
                (Outgoing::Begin(r), _) => conn
                    .send(wire::BEGIN_QUORUM_EPOCH_VERSION, &r, Duration::ZERO)
                    .await
                    .map(|a| wire::begin_answer(&a).map(|m| (m, Vec::new()))),
                (Outgoing::End(r), _) => {
                    conn.send(wire::END_QUORUM_EPOCH_VERSION, &r, Duration::ZERO).await.map(|_| None)
                }
                (Outgoing::Fetch(r), Message::Fetch { fetch_offset, id, .. }) => {
                    conn.send(wire::FETCH_VERSION, &r, Duration::from_millis(FETCH_MAX_WAIT_MS as u64)).await.map(|a| {
                        if let Some((id, endpoint)) = wire::leader_endpoint(&a, &own.listener) {
                            let _ = answers.send(Event::LeaderEndpoint { id, endpoint });
                        }
                        wire::fetch_answer(&a, *fetch_offset, *id)
                    })
                }
                _ => Ok(None),
            };
            match answer {
                Ok(Some((message, batches))) => {
                    if answers.send(Event::Answer { from: to, message, batches }).is_err() {
                        return;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(to, error = %e, "a request to a voter failed");
                    connection = None;
                    if transport_failed(&e) {
                        let _ = answers.send(Event::Unreachable { to });
                    }
                }
            }
        }
    });
    tx
}

impl Driver {
    /// The voter set in force (the log's newest VotersRecord, else `controller.quorum.voters`).
    fn voter_ids(&self) -> Vec<NodeId> {
        self.core.voters().to_vec()
    }

    fn now_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    /// A quorum formatted with initial voters has them written into its log once (kraft.version 1
    /// and the VotersRecord), by the first leader whose epoch has committed, as Kafka's leader
    /// writes them at its first epoch: observers, snapshots and restarts then take the voters
    /// from the log. (Tried at every tick until it commits: the core refuses it meanwhile.)
    fn write_initial_voters(&mut self) -> anyhow::Result<()> {
        let Some(initial) = &self.settings.initial_voters else { return Ok(()) };
        let gate = self.settings.writer_gate.clone();
        let Some(_writing) = take_gate(&gate) else { return Ok(()) };
        let ids: Vec<NodeId> = initial.iter().map(|v| v.id).collect();
        let proposable = self.status.borrow().active
            && !self.core.voters_in_log()
            && self.core.log().start() == 0
            && self.core.check_voter_change(&ids).is_ok();
        if !proposable {
            return Ok(());
        }
        let bytes = super::voters_record::voters_batch(1, initial, crate::log::now_ms());
        let id = self.next_id;
        self.next_id += 1;
        self.pending.insert(id, Bytes::from(bytes));
        tracing::info!(voters = ?ids, "writing the initial voters into the metadata log");
        let voters = Some(initial.clone().into());
        self.step(Input::Propose(Batch { records: 2, id, voters }), None)?;
        Ok(())
    }

    fn run(&mut self) -> anyhow::Result<()> {
        let mut next_tick = Instant::now();
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(wait) {
                Ok(Event::Stop) => return Ok(()),
                Ok(event) => self.on_event(event)?,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + TICK;
                self.seed = super::core::SplitMix64(self.seed).next_u64();
                let tick = Input::Tick { now_ms: self.now_ms(), random: self.seed };
                self.step(tick, None)?;
                self.on_tick_snapshots()?;
                self.write_initial_voters()?;
                self.maybe_update_own_endpoint();
                for (change, reply) in std::mem::take(&mut self.deferred_changes) {
                    self.change_voters(change, reply)?;
                }
                self.release_parked(false)?;
            }
        }
    }

    fn on_event(&mut self, event: Event) -> anyhow::Result<()> {
        match event {
            Event::Request { from, message, max_wait_ms, reply } => {
                if matches!(message, Message::EndQuorumEpoch { .. }) {
                    self.step(Input::Message { from, message }, None)?;
                    let _ = reply.send(self.reply(None));
                    return Ok(());
                }
                let deadline = Instant::now() + Duration::from_millis(max_wait_ms.max(0) as u64);
                self.answer(Parked { from, message, deadline, reply }, true)?;
            }
            Event::Answer { from, mut message, batches } => {
                // Fetched batches: their bytes wait (by id) for the core's append.
                if let Message::FetchResponse { result: FetchResult::Records { entries, .. }, .. } = &mut message {
                    for (entry, bytes) in entries.iter_mut().zip(batches) {
                        let id = self.next_id;
                        self.next_id += 1;
                        self.pending.insert(id, bytes);
                        if let Some(batch) = entry.value.as_mut() {
                            batch.id = id;
                        }
                    }
                }
                self.step(Input::Message { from, message }, None)?;
                self.pending.clear();
            }
            Event::Propose { records, reply } => {
                if !self.status.borrow().active {
                    reply(Err(not_leader()));
                    return Ok(());
                }
                let bytes = match super::encode_batch(&records, crate::log::now_ms()) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        reply(Err(e));
                        return Ok(());
                    }
                };
                let id = self.next_id;
                self.next_id += 1;
                self.pending.insert(id, Bytes::from(bytes));
                let end = self.core.log().end() + records.len() as u64;
                self.waiting.push((end, reply));
                self.step(Input::Propose(Batch { records: records.len() as u64, id, voters: None }), None)?;
            }
            Event::Downloaded { id, result } => self.on_downloaded(id, result)?,
            Event::Unreachable { to } => {
                self.step(Input::Unreachable { to }, None)?;
            }
            Event::ChangeVoters { change, reply } => self.change_voters(change, reply)?,
            Event::CheckVoterChange { change, reply } => drop(reply.send(self.checked_change(&change, true).map(drop))),
            Event::LeaderEndpoint { id, endpoint } => self.learn_endpoint(id, endpoint),
            Event::SnapshotRead { from } => {
                self.step(Input::SnapshotRead { from }, None)?;
            }
            Event::Stop => {}
        }
        Ok(())
    }

    /// Answers a request now, or holds a fetch with nothing new until its deadline.
    fn answer(&mut self, request: Parked, may_hold: bool) -> anyhow::Result<()> {
        let Parked { from, message, deadline, reply } = request;
        let hw_before = self.core.high_watermark();
        let answered = self.step(Input::Message { from, message: message.clone() }, Some(from))?;
        // (A fetch that moved the high watermark is answered at once: the fetcher learns it.)
        let empty = self.core.high_watermark() == hw_before
            && matches!(
                &answered,
                Some(Message::FetchResponse { result: FetchResult::Records { entries, .. }, .. }) if entries.is_empty()
            );
        if empty && may_hold && Instant::now() < deadline {
            self.parked.push(Parked { from, message, deadline, reply });
            return Ok(());
        }
        let reply_value = self.reply(answered);
        let _ = reply.send(reply_value);
        Ok(())
    }

    fn reply(&self, message: Option<Message<Batch>>) -> Reply {
        let records = match &message {
            Some(Message::FetchResponse { result: FetchResult::Records { start, entries, .. }, .. }) => {
                let end = start + entries.iter().map(|e| e.records()).sum::<u64>();
                self.log.read_batches(*start, end).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "reading the metadata log for a fetch");
                    Bytes::new()
                })
            }
            _ => Bytes::new(),
        };
        let state = self.core.election_state();
        Reply { message, records, epoch: state.epoch, leader: state.leader }
    }

    /// Steps held fetches again (all when the log or high watermark moved, else the expired).
    fn release_parked(&mut self, moved: bool) -> anyhow::Result<()> {
        let now = Instant::now();
        let (due, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.parked).into_iter().partition(|p| moved || p.deadline <= now);
        self.parked = kept;
        for parked in due {
            // (Released because the log or the high watermark moved: answered now, with the new
            // high watermark, even with no new records for this fetcher.)
            self.answer(parked, false)?;
        }
        Ok(())
    }

    /// Feeds `input` to the core and carries out its outputs; returns the answer to `reply_to`'s
    /// request when the core gave one.
    fn step(&mut self, input: Input<Batch>, reply_to: Option<NodeId>) -> anyhow::Result<Option<Message<Batch>>> {
        let mut queue = VecDeque::from([input]);
        let mut reply = None;
        let mut moved = false;
        let asked = match queue.front() {
            Some(Input::Message { message, .. }) => Some(message.clone()),
            _ => None,
        };
        while let Some(input) = queue.pop_front() {
            let election = is_election(&input) && tracing::enabled!(tracing::Level::DEBUG);
            let shown = if election { format!("{input:?}") } else { String::new() };
            let role_before = std::mem::discriminant(self.core.role());
            let outputs = self.core.step(input);
            if election || role_before != std::mem::discriminant(self.core.role()) {
                let state = self.core.election_state();
                tracing::debug!(input = %shown, role = ?self.core.role(), ?state, ?outputs, "raft election step");
            }
            for output in outputs {
                match output {
                    Output::Send { to, message } => {
                        let answers = asked.as_ref().is_some_and(|a| answers_request(a, &message));
                        if reply.is_none() && reply_to == Some(to) && answers {
                            reply = Some(message);
                        } else {
                            self.send(to, message);
                        }
                    }
                    Output::Persist(state) => {
                        self.log.persist_election(state, &self.voter_ids())?;
                    }
                    Output::Append { start, entries } => {
                        let mut at = start;
                        for entry in entries {
                            let bytes = match &entry.value {
                                None => Bytes::from(MetadataLog::leader_change(
                                    self.settings.node_id,
                                    &self.voter_ids(),
                                    crate::log::now_ms(),
                                )),
                                Some(batch) => self
                                    .pending
                                    .remove(&batch.id)
                                    .ok_or_else(|| anyhow::anyhow!("no bytes for the entry at {at}"))?,
                            };
                            self.log.write_at(at, entry.epoch, &bytes)?;
                            if let Some(voters) = entry.value.as_ref().and_then(|b| b.voters.as_ref()) {
                                self.learn_voters(voters);
                            }
                            at += entry.records();
                        }
                        self.log.sync_voter()?;
                        queue.push_back(Input::Appended { end: at });
                        moved = true;
                    }
                    Output::Truncate { end } => {
                        tracing::info!(end, "metadata log truncated where it diverged from the leader's");
                        self.log.truncate_voter(end)?;
                    }
                    Output::HighWatermark(hw) => {
                        self.commit(hw);
                        queue.extend(self.maybe_snapshot()?);
                        moved = true;
                    }
                    Output::Refused(batch) => {
                        self.pending.remove(&batch.id);
                    }
                    Output::FetchSnapshot { leader, end, epoch } => self.download(leader, end, epoch),
                    Output::InstallSnapshot { end, epoch } => {
                        self.install(end, epoch)?;
                        moved = true;
                    }
                }
            }
        }
        self.publish();
        if moved {
            self.release_parked(true)?;
        }
        Ok(reply)
    }

    fn send(&mut self, to: NodeId, message: Message<Batch>) {
        let Some(peer) = self.peer(to) else { return };
        let queue = match message {
            Message::Fetch { .. } => &peer.fetch,
            _ => &peer.control,
        };
        if let Err(tokio::sync::mpsc::error::TrySendError::Full(_)) = queue.try_send(message) {
            tracing::debug!(to, "voter connection backed up: message dropped (sent again by the core)");
        }
    }

    fn commit(&mut self, hw: u64) {
        if hw > self.committed {
            let bytes = self.applier.apply(&self.log, self.committed, hw);
            self.snapshots.committed(bytes);
            self.committed = hw;
        }
        let (done, waiting): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.waiting).into_iter().partition(|(end, _)| *end <= hw);
        self.waiting = waiting;
        for (end, reply) in done {
            reply(Ok(end));
        }
    }

    fn publish(&mut self) {
        let state = self.core.election_state();
        let hw = self.core.high_watermark();
        let active = match self.core.role() {
            Role::Leader { epoch_start, .. } => hw > *epoch_start,
            _ => false,
        };
        if !self.core.is_leader() {
            // Leadership lost: proposals not committed yet are refused (they may still commit).
            for (_, reply) in self.waiting.drain(..) {
                reply(Err(not_leader()));
            }
        }
        let end = self.core.log().end();
        let voters = self.voter_ids();
        let status = Status { epoch: state.epoch, leader: state.leader, active, high_watermark: hw, end, voters };
        let mut progress = Vec::new();
        if let Role::Leader { progress: voters, .. } = self.core.role() {
            let (wall, core_now) = (crate::log::now_ms(), self.now_ms());
            if self.core.am_voter() {
                progress.push(VoterProgress { id: self.settings.node_id, end: end as i64, last_fetch_ms: wall });
            }
            // (The core tracks observers too; they are reported as observers elsewhere.)
            for (id, p) in voters.iter().filter(|(id, _)| self.core.voters().contains(id)) {
                let last_fetch_ms = wall - (core_now - p.last_fetch_ms).max(0);
                progress.push(VoterProgress { id: *id, end: p.end as i64, last_fetch_ms });
            }
        }
        *self.progress.lock().unwrap_or_else(|p| p.into_inner()) = progress;
        self.status.send_if_modified(|s| {
            let changed = *s != status;
            if changed && (s.leader != status.leader || s.epoch != status.epoch) {
                tracing::info!(epoch = status.epoch, leader = ?status.leader, "metadata quorum leader");
            }
            *s = status.clone();
            changed
        });
    }
}

/// Whether `input` is part of an election (traced at debug level): votes, epochs, transport
/// failures.
fn is_election(input: &Input<Batch>) -> bool {
    match input {
        Input::Message { message, .. } => !matches!(message, Message::Fetch { .. } | Message::FetchResponse { .. }),
        Input::Unreachable { .. } => true,
        _ => false,
    }
}

/// Whether `reply` is the core's answer to `request`.
fn answers_request(request: &Message<Batch>, reply: &Message<Batch>) -> bool {
    matches!(
        (request, reply),
        (Message::Vote { .. }, Message::VoteResponse { .. })
            | (Message::BeginQuorumEpoch { .. }, Message::BeginQuorumEpochResponse { .. })
            | (Message::Fetch { .. }, Message::FetchResponse { .. })
    )
}

/// The error a proposal to a voter that does not lead gets (the controller answers NOT_CONTROLLER).
pub fn not_leader() -> anyhow::Error {
    crate::controller::quorum::NotActive.into()
}

fn stopped() -> anyhow::Error {
    anyhow::anyhow!("the metadata log's voter has stopped")
}

#[path = "voter_changes.rs"]
mod changes;
pub use changes::{endpoint_on, ChangeOutcome, VoterChange};
#[path = "voter_handle.rs"]
mod handle;
#[path = "voter_snapshots.rs"]
mod snapshots;
pub(crate) use snapshots::clean_target;
pub use snapshots::SnapshotPolicy;

#[cfg(test)]
#[path = "voter_tests.rs"]
mod tests;
