//! Partition changes: Kafka's `PartitionChangeBuilder` (leader election, ISR changes, leader
//! recovery state) and `ReplicationControlManager.generateLeaderAndIsrUpdates` (the changes a
//! broker's fencing, unfencing or shutdown makes to every partition it is in).
//!
//! Eligible leader replicas (KIP-966, `controller::elr`): a change built `with_elr` (ELR on:
//! the topic's effective min ISR) tracks the ELR, may empty the ISR (the leader becomes -1), may
//! elect an acceptable ELR member when the ISR is empty (the ISR becomes that member alone, a
//! clean election) and the last known leader when the ISR and the ELR are both empty (unclean),
//! and keeps the last known leader in the last known ELR. Without ELR (a cluster with
//! `eligible.leader.replicas.version=0`) the ELR is never grown (a non-empty one is cleared, as
//! Kafka clears it when ELR is disabled), the ISR never empties and the last known ELR is left
//! alone.
//!
//! Reassignment (Kafka's `completeReassignmentIfNeeded`, `setAssignmentChanges`): a change may
//! set the target replicas, adding and removing replicas (starting or reverting a reassignment,
//! `controller::reassignment`); any change whose ISR then holds every target replica completes an
//! ongoing reassignment in the same record (replicas = target, ISR without the removed replicas,
//! adding and removing cleared). Elections consider the target replicas in their order (adding
//! replicas included, eligible once in the ISR). A change whose replicas lose a broker bumps the
//! leader epoch (the leader field is set, to the same leader if it stays). Directories are
//! rewritten when the replicas change or a replica's directory is set (AssignReplicasToDirs,
//! Kafka's `setDirectory`): each kept replica keeps its directory unless set, a new one gets the
//! directory its caller gave (Kafka's `DefaultDirProvider`), UNASSIGNED otherwise.
//!
//! Metadata version 4.1 (at least 3.6): an ISR shrink does not bump the leader epoch, only a
//! leader change does.
//!
//! Invariants of every record built: it changes something (none otherwise); the new leader is
//! -1 or a member of the new ISR; without ELR the ISR is never emptied (when no acceptable member
//! is left, the leader becomes -1 and the ISR keeps its last members, as Kafka's does); with ELR
//! an empty ISR goes with no leader, and the ISR and the ELR never overlap; the ISR only names
//! replicas of the new assignment; adding and removing replicas are replicas.

use uuid::Uuid;

use super::elr;
use super::topic_changes::UNASSIGNED_DIRECTORY;
use super::ControllerConfig;
use crate::metadata::image::{MetadataImage, PartitionImage, TopicImage, NO_LEADER_CHANGE, TOPIC_RESOURCE};
use crate::metadata::records::{MetadataRecord, PartitionChangeRecord};

/// `PartitionChangeRecord.leader` / `PartitionRecord.leader`: no leader.
pub const NO_LEADER: i32 = -1;
/// `LeaderRecoveryState.RECOVERED`.
pub const RECOVERED: i8 = 0;
/// `LeaderRecoveryState.RECOVERING`: the leader was elected uncleanly and has not yet recovered.
pub const RECOVERING: i8 = 1;
pub use crate::metadata::image::BROKER_RESOURCE;

/// How the leader is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// Keep the current leader while it stays acceptable and in the ISR, else the first
    /// acceptable ISR member in replica order (Kafka's `ONLINE`).
    Default,
    /// Move leadership to the first replica when it is an acceptable ISR member.
    Preferred,
    /// As `Default`, then, when no ISR member is acceptable, any acceptable replica: the ISR
    /// becomes that replica alone and the leader RECOVERING (only with
    /// `unclean.leader.election.enable`).
    Unclean,
}

/// A change of one partition, built from its current state and the wanted ISR.
pub struct PartitionChange<'a, F: Fn(i32) -> bool> {
    topic_id: Uuid,
    partition_id: i32,
    partition: &'a PartitionImage,
    acceptable_leader: F,
    target_isr: Vec<i32>,
    election: Election,
    target_recovery_state: i8,
    target_replicas: Vec<i32>,
    target_removing: Vec<i32>,
    target_adding: Vec<i32>,
    /// The directories of replicas new to the partition.
    new_directories: Vec<(i32, Uuid)>,
    /// Directories set for replicas (Kafka's `setDirectory`).
    set_directories: Vec<(i32, Uuid)>,
    /// With ELR on: the topic's effective min ISR.
    min_isr: Option<usize>,
    /// Brokers that restarted after an unclean shutdown: they leave the ISR and the ELR.
    unclean_shutdown: Vec<i32>,
}

/// The replica sets a change aims at (Kafka's builder targets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Targets {
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
    pub removing: Vec<i32>,
    pub adding: Vec<i32>,
}

impl Targets {
    /// Kafka's `PartitionReassignmentReplicas.maybeCompleteReassignment`: when a reassignment is
    /// in progress and the ISR (without the replicas being removed, not empty) holds every
    /// replica that stays, the replicas become those, the ISR loses the removed ones, and adding
    /// and removing are cleared.
    pub fn complete_reassignment(&mut self) {
        if self.removing.is_empty() && self.adding.is_empty() {
            return;
        }
        let kept = |list: &[i32]| list.iter().copied().filter(|r| !self.removing.contains(r)).collect::<Vec<_>>();
        let (isr, replicas) = (kept(&self.isr), kept(&self.replicas));
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|r| isr.contains(r)) {
            return;
        }
        *self = Targets { isr, replicas, removing: Vec::new(), adding: Vec::new() };
    }
}

impl<'a, F: Fn(i32) -> bool> PartitionChange<'a, F> {
    /// A change that keeps the ISR, elects with `Election::Default` and keeps the leader
    /// recovery state; `acceptable_leader` says which brokers may lead (see `leader_acceptor`).
    pub fn new(topic_id: Uuid, partition_id: i32, partition: &'a PartitionImage, acceptable_leader: F) -> Self {
        PartitionChange {
            topic_id,
            partition_id,
            partition,
            acceptable_leader,
            target_isr: partition.isr.clone(),
            election: Election::Default,
            target_recovery_state: partition.leader_recovery_state,
            target_replicas: partition.replicas.clone(),
            target_removing: partition.removing_replicas.clone(),
            target_adding: partition.adding_replicas.clone(),
            new_directories: Vec::new(),
            set_directories: Vec::new(),
            min_isr: None,
            unclean_shutdown: Vec::new(),
        }
    }

    /// Tracks eligible leader replicas when the image has ELR on (the min ISR of `topic`).
    pub fn with_elr(mut self, image: &MetadataImage, topic: &str) -> Self {
        self.min_isr = elr::min_isr_if_enabled(image, topic, self.partition);
        self
    }

    /// ELR on with this min ISR (`None`: off).
    pub fn min_isr(mut self, min_isr: Option<usize>) -> Self {
        self.min_isr = min_isr;
        self
    }

    /// Kafka's `setUncleanShutdownReplicas`: these replicas may not stay in (or enter) the ELR.
    pub fn unclean_shutdown(mut self, brokers: Vec<i32>) -> Self {
        self.unclean_shutdown = brokers;
        self
    }

    /// The replicas, removing and adding replicas to have (starting, changing or reverting a
    /// reassignment); `default_dir` gives the directory of a replica new to the partition.
    pub fn target_assignment(
        mut self,
        replicas: Vec<i32>,
        removing: Vec<i32>,
        adding: Vec<i32>,
        default_dir: impl Fn(i32) -> Uuid,
    ) -> Self {
        self.new_directories =
            replicas.iter().filter(|r| !self.partition.replicas.contains(r)).map(|&r| (r, default_dir(r))).collect();
        self.target_replicas = replicas;
        self.target_removing = removing;
        self.target_adding = adding;
        self
    }

    /// Kafka's `setDirectory`: `broker`'s copy is in `dir`.
    pub fn directory(mut self, broker: i32, dir: Uuid) -> Self {
        self.set_directories.retain(|(b, _)| *b != broker);
        self.set_directories.push((broker, dir));
        self
    }

    pub fn target_isr(mut self, isr: Vec<i32>) -> Self {
        debug_assert!(isr.iter().all(|r| self.partition.replicas.contains(r)), "ISR {isr:?} names a non-replica");
        self.target_isr = isr;
        self
    }

    pub fn election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    pub fn target_recovery_state(mut self, state: i8) -> Self {
        debug_assert!(state == RECOVERED || state == RECOVERING);
        self.target_recovery_state = state;
        self
    }

    /// In the ISR, or in the ELR while the ISR is empty, and acceptable.
    fn valid_leader(&self, targets: &Targets, elr: &[i32], replica: i32) -> bool {
        (targets.isr.contains(&replica) || (targets.isr.is_empty() && elr.contains(&replica)))
            && (self.acceptable_leader)(replica)
    }

    /// Kafka's `canElectLastKnownLeader` (with KAFKA-19522: only an acceptable one).
    fn last_known_leader(&self, targets: &Targets, elr: &[i32]) -> Option<i32> {
        let last_known = &self.partition.last_known_elr;
        let usable = self.min_isr.is_some() && elr.is_empty() && targets.isr.is_empty() && last_known.len() == 1;
        last_known.first().copied().filter(|&r| usable && (self.acceptable_leader)(r))
    }

    /// The leader to have among the target replicas, and whether it was elected uncleanly.
    fn elect(&self, targets: &Targets, elr: &[i32]) -> (i32, bool) {
        let replicas = &targets.replicas;
        let current = self.partition.leader;
        if self.election == Election::Preferred {
            if let Some(&preferred) = replicas.first().filter(|&&r| self.valid_leader(targets, elr, r)) {
                return (preferred, false);
            }
        }
        if self.valid_leader(targets, elr, current) {
            return (current, false);
        }
        if let Some(&leader) = replicas.iter().find(|&&r| self.valid_leader(targets, elr, r)) {
            return (leader, false);
        }
        if let Some(leader) = self.last_known_leader(targets, elr) {
            return (leader, true);
        }
        if self.election == Election::Unclean {
            if let Some(&leader) = replicas.iter().find(|&&r| (self.acceptable_leader)(r)) {
                return (leader, true);
            }
        }
        (NO_LEADER, false)
    }

    /// The record taking the partition to the target, or none when nothing would change.
    pub fn build(&self) -> Option<PartitionChangeRecord> {
        let partition = self.partition;
        let mut record =
            PartitionChangeRecord { topic_id: self.topic_id, partition_id: self.partition_id, ..Default::default() };
        let mut targets = Targets {
            isr: self.target_isr.clone(),
            replicas: self.target_replicas.clone(),
            removing: self.target_removing.clone(),
            adding: self.target_adding.clone(),
        };
        targets.complete_reassignment();
        let mut target_elr = match self.min_isr {
            Some(min_isr) => elr::target_elr(partition, &targets.isr, min_isr, &self.unclean_shutdown),
            None => partition.eligible_leader_replicas.clone(),
        };
        let (leader, unclean) = self.elect(&targets, &target_elr);
        if leader != partition.leader {
            if target_elr.contains(&leader) {
                // Elected from the ELR (the ISR was empty): it becomes the ISR alone.
                targets.isr = vec![leader];
                target_elr.retain(|&r| r != leader);
            }
            record.leader = leader;
            if unclean {
                // Data loss is possible: the ISR becomes the new leader alone.
                record.isr = Some(vec![leader]);
                if partition.leader_recovery_state != RECOVERING {
                    record.leader_recovery_state = RECOVERING;
                }
            }
        }
        // Kafka's triggerLeaderEpochBumpForReplicaReassignmentIfNeeded: a broker leaving the
        // replicas must see a new leader epoch.
        if record.leader == NO_LEADER_CHANGE && !partition.replicas.iter().all(|r| targets.replicas.contains(r)) {
            record.leader = partition.leader;
        }
        // Kafka's maybeUpdateRecordElr: an unclean election or ELR off empties the ELR.
        if record.isr.is_some() || self.min_isr.is_none() {
            target_elr.clear();
        }
        if target_elr != partition.eligible_leader_replicas {
            record.eligible_leader_replicas = Some(target_elr);
        }
        // Without ELR the ISR never empties: the last members stay.
        let may_empty = self.min_isr.is_some();
        if record.isr.is_none() && (!targets.isr.is_empty() || may_empty) && targets.isr != partition.isr {
            record.isr = Some(targets.isr.clone());
        }
        self.last_known_leader_update(&mut record);
        self.assignment_changes(&targets, &mut record);
        if self.target_recovery_state != partition.leader_recovery_state {
            record.leader_recovery_state = self.target_recovery_state;
        }
        if is_no_op(&record) {
            return None;
        }
        check_change(partition, &record);
        Some(record)
    }

    /// Kafka's `maybeUpdateLastKnownLeader`: the first change emptying the ISR records the leader
    /// as the last known ELR; a change leaving or giving the partition a leader clears it.
    fn last_known_leader_update(&self, record: &mut PartitionChangeRecord) {
        if self.min_isr.is_none() {
            return;
        }
        let partition = self.partition;
        let known = &partition.last_known_elr;
        let emptied = record.isr.as_ref().is_some_and(|isr| isr.is_empty());
        if emptied && (known.len() != 1 || known[0] != partition.leader) {
            record.last_known_elr = Some(vec![partition.leader]);
        } else if (record.leader >= 0 || (partition.leader != NO_LEADER && record.leader != NO_LEADER))
            && !known.is_empty()
        {
            record.last_known_elr = Some(Vec::new());
        }
    }

    /// Kafka's `setAssignmentChanges` (directories only when the replicas change).
    fn assignment_changes(&self, targets: &Targets, record: &mut PartitionChangeRecord) {
        let partition = self.partition;
        let replicas_change = targets.replicas != partition.replicas;
        if !targets.replicas.is_empty() && (replicas_change || !self.set_directories.is_empty()) {
            let given = |list: &[(i32, Uuid)], r: i32| list.iter().find(|(b, _)| *b == r).map(|(_, d)| *d);
            let directories: Vec<Uuid> = targets
                .replicas
                .iter()
                .map(|&r| {
                    given(&self.set_directories, r)
                        .or_else(|| directory_of(partition, r))
                        .or_else(|| given(&self.new_directories, r))
                        .unwrap_or(UNASSIGNED_DIRECTORY)
                })
                .collect();
            if directories != partition.directories {
                record.directories = Some(directories);
            }
            if replicas_change {
                record.replicas = Some(targets.replicas.clone());
            }
        }
        if targets.removing != partition.removing_replicas {
            record.removing_replicas = Some(targets.removing.clone());
        }
        if targets.adding != partition.adding_replicas {
            record.adding_replicas = Some(targets.adding.clone());
        }
    }
}

fn is_no_op(r: &PartitionChangeRecord) -> bool {
    r.isr.is_none()
        && r.leader == NO_LEADER_CHANGE
        && r.replicas.is_none()
        && r.removing_replicas.is_none()
        && r.adding_replicas.is_none()
        && r.leader_recovery_state == -1
        && r.directories.is_none()
        && r.eligible_leader_replicas.is_none()
        && r.last_known_elr.is_none()
}

/// The partition after `change` satisfies the invariants (a bug otherwise).
fn check_change(partition: &PartitionImage, change: &PartitionChangeRecord) {
    let isr = change.isr.as_ref().unwrap_or(&partition.isr);
    let replicas = change.replicas.as_ref().unwrap_or(&partition.replicas);
    let leader = if change.leader == NO_LEADER_CHANGE { partition.leader } else { change.leader };
    let elr = change.eligible_leader_replicas.as_ref().unwrap_or(&partition.eligible_leader_replicas);
    debug_assert!(!isr.is_empty() || leader == NO_LEADER, "a change empties the ISR and keeps a leader: {change:?}");
    debug_assert!(leader == NO_LEADER || isr.contains(&leader), "leader {leader} outside the ISR {isr:?}");
    debug_assert!(!elr.iter().any(|r| isr.contains(r)), "ISR {isr:?} and ELR {elr:?} overlap");
    debug_assert!(isr.iter().all(|r| replicas.contains(r)), "ISR {isr:?} names a non-replica");
    let moving = change.adding_replicas.iter().chain(&change.removing_replicas).flatten();
    debug_assert!(moving.clone().all(|r| replicas.contains(r)), "adding or removing a non-replica: {change:?}");
}

/// Registered, unfenced and not in controlled shutdown (Kafka's `ClusterControlManager.isActive`).
pub fn is_active(image: &MetadataImage, broker: i32) -> bool {
    image.brokers.get(&broker).is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
}

/// Whether `broker`'s copy of `partition` is in one of its online log directories (Kafka's
/// `DirectoryId.isOnline`: unassigned and migrating copies count as online, lost ones not; a
/// broker that registered no directory counts as online).
pub fn has_online_dir(image: &MetadataImage, partition: &PartitionImage, broker: i32) -> bool {
    let Some(b) = image.brokers.get(&broker) else { return false };
    let dir = directory_of(partition, broker).unwrap_or(Uuid::nil());
    match dir.as_u128() {
        // Kafka's MIGRATING and UNASSIGNED.
        0 | 1 => true,
        // Kafka's LOST.
        2 => false,
        _ => b.log_dirs.is_empty() || b.log_dirs.contains(&dir),
    }
}

/// The directory holding `broker`'s copy of `partition`, when recorded.
pub fn directory_of(partition: &PartitionImage, broker: i32) -> Option<Uuid> {
    let at = partition.replicas.iter().position(|&r| r == broker)?;
    partition.directories.get(at).copied()
}

/// Kafka's `LeaderAcceptor`: an active broker whose copy of the partition is online.
pub fn leader_acceptor<'a>(image: &'a MetadataImage, partition: &'a PartitionImage) -> impl Fn(i32) -> bool + 'a {
    move |r| is_active(image, r) && has_online_dir(image, partition, r)
}

/// `unclean.leader.election.enable` for `topic`: the topic's config, else the controller node's
/// dynamic broker config, else the cluster default, else the static config (Kafka's
/// `ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic`).
pub fn unclean_enabled(image: &MetadataImage, config: &ControllerConfig, topic: &str) -> bool {
    const KEY: &str = "unclean.leader.election.enable";
    let lookup = |resource: (i8, String)| image.configs.get(&resource).and_then(|c| c.get(KEY)).cloned();
    lookup((TOPIC_RESOURCE, topic.to_string()))
        .or_else(|| lookup((BROKER_RESOURCE, config.node_id.to_string())))
        .or_else(|| lookup((BROKER_RESOURCE, String::new())))
        .map(|v| v.eq_ignore_ascii_case("true"))
        .unwrap_or(config.unclean_leader_election_enable)
}

/// Which broker a set of leader and ISR updates is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerEvent {
    /// The broker leaves every ISR and leadership (fenced, in controlled shutdown, or restarted
    /// as a new incarnation): every partition with it in its ISR.
    Leaves(i32),
    /// The broker is being unfenced: it may lead (though the image still shows it fenced), and
    /// every leaderless partition gets an election.
    Joins(i32),
    /// A log directory of the broker went offline: the broker leaves the ISR and leadership of
    /// the partitions it holds there.
    DirectoryOffline(i32, Uuid),
    /// The broker registered again after an unclean shutdown, with ELR on (Kafka's
    /// `handleBrokerUncleanShutdown`): it leaves every ISR, ELR and leadership.
    UncleanShutdown(i32),
}

/// Kafka's `generateLeaderAndIsrUpdates`: the partition changes `event` causes, in the order of
/// topic names then partition ids (deterministic).
pub fn leader_and_isr_updates(
    image: &MetadataImage,
    config: &ControllerConfig,
    event: BrokerEvent,
) -> Vec<MetadataRecord> {
    let mut topics: Vec<_> = image.topics.values().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let mut records = Vec::new();
    for topic in topics {
        for (&partition_id, partition) in &topic.partitions {
            let concerned = match event {
                BrokerEvent::Leaves(b) => partition.isr.contains(&b),
                BrokerEvent::UncleanShutdown(b) => {
                    partition.isr.contains(&b) || partition.eligible_leader_replicas.contains(&b)
                }
                BrokerEvent::Joins(_) => partition.leader == NO_LEADER,
                BrokerEvent::DirectoryOffline(b, dir) => directory_of(partition, b) == Some(dir),
            };
            if concerned {
                records.extend(partition_update(image, config, topic, partition_id, event));
            }
        }
    }
    records
}

/// The change `event` makes to one partition of `topic` (none when nothing changes).
pub fn partition_update(
    image: &MetadataImage,
    config: &ControllerConfig,
    topic: &TopicImage,
    partition_id: i32,
    event: BrokerEvent,
) -> Option<MetadataRecord> {
    let partition = topic.partitions.get(&partition_id)?;
    let election = if unclean_enabled(image, config, &topic.name) { Election::Unclean } else { Election::Default };
    let acceptable = |r: i32| {
        let allowed = match event {
            BrokerEvent::Leaves(b) | BrokerEvent::DirectoryOffline(b, _) | BrokerEvent::UncleanShutdown(b) => {
                r != b && is_active(image, r)
            }
            BrokerEvent::Joins(b) => r == b || is_active(image, r),
        };
        allowed && has_online_dir(image, partition, r)
    };
    let target_isr = match event {
        BrokerEvent::Leaves(b) | BrokerEvent::DirectoryOffline(b, _) | BrokerEvent::UncleanShutdown(b) => {
            partition.isr.iter().copied().filter(|&r| r != b).collect()
        }
        BrokerEvent::Joins(_) => partition.isr.clone(),
    };
    let unclean_shutdown = match event {
        BrokerEvent::UncleanShutdown(b) => vec![b],
        _ => Vec::new(),
    };
    PartitionChange::new(topic.id, partition_id, partition, acceptable)
        .with_elr(image, &topic.name)
        .target_isr(target_isr)
        .unclean_shutdown(unclean_shutdown)
        .election(election)
        .build()
        .map(MetadataRecord::PartitionChange)
}

/// Whether `broker` leads any partition.
pub fn leads_any(image: &MetadataImage, broker: i32) -> bool {
    image.topics.values().any(|t| t.partitions.values().any(|p| p.leader == broker))
}

#[cfg(test)]
#[path = "partition_change_tests.rs"]
mod partition_change_tests;
