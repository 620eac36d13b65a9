//! A consumer group of the KIP-848 protocol (`group.protocol=consumer`) as the coordinator holds
//! it: the group epoch, the target assignment and its epoch, every member's subscription and
//! current assignment (Kafka's `ConsumerGroup` / `ConsumerGroupMember`).
//!
//! Invariants: `target` only names members of `members`; a partition is owned (assigned or
//! pending revocation) by at most one member, which the reconciliation (`reconcile.rs`)
//! guarantees by handing a partition over only once its previous owner revoked it; the
//! persisted part of this state is exactly what `records.rs` writes, timers (`deadlines`) are
//! not persisted and restart fresh after a reload.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use bytes::Bytes;
use uuid::Uuid;

/// Partitions per topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// Kafka's `MemberState` (its byte value is stored in CurrentMemberAssignment records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
    Unknown,
}

impl MemberState {
    pub fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    pub fn from_value(v: i8) -> MemberState {
        match v {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// Epoch of a static member that left temporarily (it keeps its assignment for the session).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
    /// A member of the classic protocol (JoinGroup / SyncGroup / Heartbeat) in this group
    /// (online migration): its session timeout and protocols; None for a consumer-protocol one.
    pub classic: Option<ClassicMeta>,
}

/// What a classic member joined with (Kafka's ClassicMemberMetadata, tag 0 of the member's
/// metadata record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMeta {
    pub session_timeout_ms: i32,
    /// (name, embedded subscription) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

impl Member {
    pub fn new(id: &str) -> Member {
        Member {
            id: id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_topic_names: Vec::new(),
            subscribed_topic_regex: None,
            rebalance_timeout_ms: -1,
            server_assignor: None,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            classic: None,
        }
    }

    pub fn is_reconciled_to(&self, target_epoch: i32) -> bool {
        self.state == MemberState::Stable && self.member_epoch == target_epoch
    }

    /// The subscription part (what a ConsumerGroupMemberMetadata record holds) differs.
    pub fn metadata_differs(&self, other: &Member) -> bool {
        self.instance_id != other.instance_id
            || self.rack_id != other.rack_id
            || self.client_id != other.client_id
            || self.client_host != other.client_host
            || self.subscribed_topic_names != other.subscribed_topic_names
            || self.subscribed_topic_regex != other.subscribed_topic_regex
            || self.rebalance_timeout_ms != other.rebalance_timeout_ms
            || self.server_assignor != other.server_assignor
            || self.classic != other.classic
    }

    /// The assignment part (what a ConsumerGroupCurrentMemberAssignment record holds) differs.
    pub fn assignment_differs(&self, other: &Member) -> bool {
        self.member_epoch != other.member_epoch
            || self.previous_member_epoch != other.previous_member_epoch
            || self.state != other.state
            || self.assigned != other.assigned
            || self.pending_revocation != other.pending_revocation
    }
}

/// Timers of a member (not persisted).
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    pub session: Instant,
    /// Revocation deadline, with the member epoch it was set at.
    pub rebalance: Option<(Instant, i32)>,
    /// A classic member told to rejoin (REBALANCE_IN_PROGRESS) must JoinGroup by then.
    pub classic_join: Option<Instant>,
    /// A classic member that joined must SyncGroup by then.
    pub classic_sync: Option<Instant>,
}

impl Deadlines {
    pub fn new(session: Instant) -> Deadlines {
        Deadlines { session, rebalance: None, classic_join: None, classic_sync: None }
    }
}

/// A topic as the assignors and the metadata hash see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: Uuid,
    pub partitions: i32,
}

/// Every topic by name (the metadata image the coordinator assigns from).
pub type TopicView = BTreeMap<String, TopicInfo>;

#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub id: String,
    pub group_epoch: i32,
    /// Hash of the subscribed topics' metadata at the last epoch bump (ConsumerGroupMetadata's
    /// `metadata_hash`): a change bumps the group epoch.
    pub metadata_hash: i64,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, Member>,
    pub target: BTreeMap<String, Assignment>,
    pub deadlines: HashMap<String, Deadlines>,
    /// When the timers last compared the metadata hash (not persisted).
    pub metadata_checked: Option<Instant>,
}

impl ConsumerGroup {
    pub fn new(id: &str) -> ConsumerGroup {
        ConsumerGroup { id: id.to_string(), ..Default::default() }
    }

    /// Kafka's ConsumerGroupState names.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| !m.is_reconciled_to(self.assignment_epoch)) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    pub fn static_member(&self, instance_id: &str) -> Option<&Member> {
        self.members.values().find(|m| m.instance_id.as_deref() == Some(instance_id))
    }

    /// Epoch of the member owning (assigned or revoking) a partition, -1 when free.
    pub fn partition_epochs(&self) -> HashMap<(Uuid, i32), i32> {
        let mut out = HashMap::new();
        for m in self.members.values() {
            for (topic, parts) in m.assigned.iter().chain(m.pending_revocation.iter()) {
                for p in parts {
                    out.insert((*topic, *p), m.member_epoch);
                }
            }
        }
        out
    }

    /// Topic names a member subscribes to: its names plus what its regex matches.
    pub fn member_topics(member: &Member, topics: &TopicView) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = member.subscribed_topic_names.iter().cloned().collect();
        if let Some(re) = member.subscribed_topic_regex.as_deref().and_then(compile_regex) {
            out.extend(topics.keys().filter(|t| !is_internal(t) && re.is_match(t)).cloned());
        }
        out
    }

    /// Hash of what the assignment depends on: the subscribed topics that exist, with their
    /// ids and partition counts (FNV-1a; Kafka's own hash is Murmur3 over more fields: only
    /// its changes matter).
    pub fn compute_metadata_hash(&self, topics: &TopicView) -> i64 {
        let mut names = BTreeSet::new();
        for m in self.members.values() {
            names.extend(Self::member_topics(m, topics));
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for name in names {
            if let Some(t) = topics.get(&name) {
                eat(name.as_bytes());
                eat(t.id.as_bytes());
                eat(&t.partitions.to_be_bytes());
            }
        }
        h as i64
    }
}

/// Kafka's internal topics, never matched by a subscription regex.
pub fn is_internal(topic: &str) -> bool {
    topic == "__consumer_offsets" || topic == "__transaction_state"
}

/// A subscription regex (Kafka uses RE2J, whose syntax Rust's `regex` shares for the usual
/// constructs) matching whole topic names; None when it does not compile.
pub fn compile_regex(pattern: &str) -> Option<regex::Regex> {
    regex::Regex::new(&format!("^(?:{pattern})$")).ok()
}
