//! What the Raft core (`core.rs`) exchanges with its driver: its configuration and durable
//! election state, the messages voters send each other (Kafka 4.1's Vote, BeginQuorumEpoch,
//! EndQuorumEpoch and Fetch, as `voter_wire.rs` maps them), and the inputs and outputs of one
//! step. Plain data: no behaviour beyond naming a message's epoch.

use super::entries::Entry;

pub type NodeId = i32;

/// splitmix64: a small seeded generator (timeouts here, shuffles and simulations elsewhere; not
/// for anything secret).
#[derive(Debug, Clone, Copy)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// What `quorum-state` keeps: the epoch, the vote cast in it, the leader known in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ElectionState {
    pub epoch: i32,
    pub voted_for: Option<NodeId>,
    pub leader: Option<NodeId>,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub id: NodeId,
    /// The voter set at the log's start (`controller.quorum.voters`, or the bootstrap
    /// checkpoint's, or the newest snapshot's); VotersRecords in the log change it (KIP-853).
    pub voters: Vec<NodeId>,
    /// `controller.quorum.election.timeout.ms`: the base of a randomized election timeout.
    pub election_timeout_ms: i64,
    /// `controller.quorum.fetch.timeout.ms`: a follower that hears nothing from its leader this
    /// long campaigns; a leader that no majority fetched from for 1.5 times this resigns.
    pub fetch_timeout_ms: i64,
    /// `controller.quorum.election.backoff.max.ms`.
    pub election_backoff_max_ms: i64,
    /// How long a fetch is waited for before it is sent again.
    pub request_timeout_ms: i64,
    /// Entries per fetch response.
    pub max_fetch_entries: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchResult<V> {
    /// Entries from the fetch offset on (possibly none), and the leader's high watermark (None
    /// until an entry of its epoch is committed: Kafka's leader answers -1 then, and a Kafka
    /// follower takes a high watermark going back, even across epochs, as a fatal error).
    Records { start: u64, entries: Vec<Entry<V>>, high_watermark: Option<u64> },
    /// The logs diverge: truncate to at most `end_offset`, the end of `epoch` in the leader's log.
    Diverging { epoch: i32, end_offset: u64 },
    /// Not the leader of the fetch's epoch (the response's epoch and leader say who is).
    NotLeader,
    /// The leader's log no longer holds what the follower needs: fetch the snapshot ending at
    /// `end_offset` (its last record of `epoch`) with FetchSnapshot, then the log from there.
    Snapshot { end_offset: u64, epoch: i32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<V> {
    Vote {
        epoch: i32,
        pre_vote: bool,
        last_epoch: i32,
        end_offset: u64,
    },
    VoteResponse {
        epoch: i32,
        pre_vote: bool,
        granted: bool,
        leader: Option<NodeId>,
    },
    BeginQuorumEpoch {
        epoch: i32,
    },
    BeginQuorumEpochResponse {
        epoch: i32,
    },
    EndQuorumEpoch {
        epoch: i32,
    },
    /// `id` stands for the request's correlation id: an answer is taken only for the fetch in
    /// flight (a late or duplicated answer to an earlier one could truncate what is committed).
    Fetch {
        epoch: i32,
        fetch_offset: u64,
        last_fetched_epoch: i32,
        id: u64,
    },
    FetchResponse {
        epoch: i32,
        leader: Option<NodeId>,
        result: FetchResult<V>,
        id: u64,
    },
}

impl<V> Message<V> {
    pub fn epoch(&self) -> i32 {
        match self {
            Message::Vote { epoch, .. }
            | Message::VoteResponse { epoch, .. }
            | Message::BeginQuorumEpoch { epoch }
            | Message::BeginQuorumEpochResponse { epoch }
            | Message::EndQuorumEpoch { epoch }
            | Message::Fetch { epoch, .. }
            | Message::FetchResponse { epoch, .. } => *epoch,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input<V> {
    /// This node's clock reads `now_ms`; `random` is a fresh random number (timeouts are
    /// randomized with it).
    Tick {
        now_ms: i64,
        random: u64,
    },
    Message {
        from: NodeId,
        message: Message<V>,
    },
    /// The log up to `end` (exclusive) is durable.
    Appended {
        end: u64,
    },
    /// A new value to replicate (only a leader takes it).
    Propose(V),
    /// This node durably wrote a snapshot of everything below `end` (at most the high
    /// watermark, an entry boundary): the leader points followers behind its log start at it.
    Snapshotted {
        end: u64,
    },
    /// Drop the log below `end` (at most the latest snapshot's end; the driver already deleted
    /// what the log held there, or is free to).
    Compact {
        end: u64,
    },
    /// Node `from` asked this node for a chunk of its snapshot (FetchSnapshot): a voter
    /// downloading the leader's snapshot counts as fetching for check-quorum (Kafka's leader
    /// updates the voter's fetch time on FetchSnapshot too), or a long download would make a
    /// leader that still has a majority resign.
    SnapshotRead {
        from: NodeId,
    },
    /// The snapshot the leader pointed at is downloaded (Some: its end, epoch and the voter set
    /// it holds) or could not be (None).
    SnapshotFetched(Option<(u64, i32, Vec<NodeId>)>),
    /// A request to `to` failed in transport: the connection was refused or closed (its process
    /// is gone, typically). A follower whose leader this is campaigns after a short random
    /// backoff instead of the whole fetch timeout, and grants pre-votes meanwhile: the pre-vote
    /// still needs a majority that no longer hears from the leader either.
    Unreachable {
        to: NodeId,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<V> {
    Send {
        to: NodeId,
        message: Message<V>,
    },
    /// Make this the durable election state before anything after it.
    Persist(ElectionState),
    /// Write `entries` at `start` (= the log end before them); `Appended` follows once durable.
    Append {
        start: u64,
        entries: Vec<Entry<V>>,
    },
    /// Remove everything from `end` on (durably, before anything after it).
    Truncate {
        end: u64,
    },
    /// Everything below this offset is committed.
    HighWatermark(u64),
    /// A proposal this node cannot take (not the leader).
    Refused(V),
    /// Download the snapshot `(end, epoch)` from `leader` (FetchSnapshot), then report with
    /// `SnapshotFetched`; no fetch is sent meanwhile.
    FetchSnapshot {
        leader: NodeId,
        end: u64,
        epoch: i32,
    },
    /// Empty the log and start it at the downloaded snapshot `(end, epoch)` (durably, before
    /// anything after it): everything below `end` is committed, and is the snapshot's state.
    InstallSnapshot {
        end: u64,
        epoch: i32,
    },
}
