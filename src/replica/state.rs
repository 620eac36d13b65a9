//! The replication state machine of one partition, without I/O (Kafka's `Partition` leader
//! state, `Replica` follower states and the follower's truncation rule of
//! `AbstractFetcherThread`), so that it can be driven and checked deterministically.
//!
//! As leader it tracks each follower's log end offset and when it was last caught up, decides
//! ISR changes (one AlterPartition in flight at a time, carrying the partition epoch it is
//! based on), the high watermark, and whether an `acks=all` write may be appended and when it is
//! acknowledged. As follower it decides where to truncate after the leader names a diverging
//! epoch.
//!
//! Rules (Kafka 4.1): a follower is caught up when its fetch reached the leader's log end, or
//! reached the log end the leader had at its previous fetch (its caught-up time is then that
//! fetch's time); it leaves the ISR once not caught up for `replica.lag.time.max.ms`; it joins
//! when its log end reaches the high watermark and the start of the current leader epoch. While
//! a change is pending, the high watermark counts the larger ISR (the "maximal ISR"). The high
//! watermark is the smallest log end among the leader, the maximal ISR and the caught-up
//! replicas eligible to join; with eligible leader replicas (KIP-966) it does not move while the
//! ISR is smaller than `min.insync.replicas`. It never goes down.
//! Invariants (asserted): the leader is in its own ISR; the high watermark never exceeds the
//! leader's log end nor decreases; at most one ISR change is pending.

use std::collections::BTreeMap;

/// "Never caught up" (Kafka resets it to 0 on its wall clock; any time far in the past will do).
const NEVER_MS: i64 = i64::MIN / 4;

/// Partition-level settings the state machine needs.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaSettings {
    pub replica_lag_time_max_ms: i64,
    pub min_insync_replicas: usize,
    /// KIP-966 (`eligible.leader.replicas.version` >= 1): the high watermark waits for
    /// `min.insync.replicas` in-sync replicas.
    pub eligible_leader_replicas: bool,
}

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// -1 until its first fetch to this leader.
    pub log_end_offset: i64,
    pub last_caught_up_ms: i64,
    pub last_fetch_ms: i64,
    /// The leader's log end at the follower's previous fetch.
    pub last_fetch_leader_log_end: i64,
}

/// An ISR change to send to the controller (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrProposal {
    pub isr: Vec<i32>,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

/// Why a write is refused or acknowledged with an error (Kafka's error codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckError {
    /// NOT_ENOUGH_REPLICAS (19): refused before the append.
    NotEnoughReplicas,
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND (20): written, committed, but the ISR shrank below
    /// `min.insync.replicas` meanwhile.
    NotEnoughReplicasAfterAppend,
}

#[derive(Debug, Clone)]
pub struct LeaderState {
    pub node_id: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The ISR proposed to the controller and not answered yet.
    pub pending: Option<IsrProposal>,
    pub followers: BTreeMap<i32, FollowerState>,
    pub high_watermark: i64,
    /// The first offset of this leader epoch (the leader's log end when it became leader).
    pub epoch_start_offset: i64,
    pub settings: ReplicaSettings,
    /// Replicas on brokers that are fenced or shutting down (Kafka's `isReplicaIsrEligible`
    /// fails for them): they neither hold the high watermark back nor join the ISR.
    pub ineligible: std::collections::BTreeSet<i32>,
}

impl LeaderState {
    /// Becomes leader of `leader_epoch` with the log ending at `log_end_offset`. Followers in
    /// the ISR count as caught up now; the others as never (Kafka's `resetReplicaState`).
    #[allow(clippy::too_many_arguments)]
    pub fn become_leader(
        node_id: i32,
        leader_epoch: i32,
        partition_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        log_end_offset: i64,
        high_watermark: i64,
        now_ms: i64,
        settings: ReplicaSettings,
    ) -> LeaderState {
        assert!(isr.contains(&node_id), "a leader is in its own ISR");
        let followers = replicas
            .iter()
            .filter(|&&r| r != node_id)
            .map(|&r| {
                let caught_up = if isr.contains(&r) { now_ms } else { NEVER_MS };
                let state = FollowerState {
                    log_end_offset: -1,
                    last_caught_up_ms: caught_up,
                    last_fetch_ms: 0,
                    last_fetch_leader_log_end: -1,
                };
                (r, state)
            })
            .collect();
        LeaderState {
            node_id,
            leader_epoch,
            partition_epoch,
            replicas,
            isr,
            pending: None,
            followers,
            high_watermark: high_watermark.min(log_end_offset),
            epoch_start_offset: log_end_offset,
            settings,
            ineligible: Default::default(),
        }
    }

    /// The controller changed the replicas or the ISR within this leader epoch (a reassignment
    /// adding or removing replicas, an ISR change it made): followers no longer replicas are
    /// forgotten, new ones are tracked from now on (not caught up until they fetch).
    pub fn on_partition_change(&mut self, replicas: Vec<i32>, isr: Vec<i32>, partition_epoch: i32) {
        self.followers.retain(|r, _| replicas.contains(r));
        for &r in replicas.iter().filter(|&&r| r != self.node_id) {
            self.followers.entry(r).or_insert(FollowerState {
                log_end_offset: -1,
                last_caught_up_ms: NEVER_MS,
                last_fetch_ms: 0,
                last_fetch_leader_log_end: -1,
            });
        }
        self.replicas = replicas;
        self.isr = isr;
        self.partition_epoch = partition_epoch;
    }

    /// The ISR the high watermark counts: the current one, plus a pending addition.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some(p) = &self.pending {
            for r in &p.isr {
                if !isr.contains(r) {
                    isr.push(*r);
                }
            }
        }
        isr
    }

    /// A follower fetched at `fetch_offset` (its log end) while the leader's log ended at
    /// `leader_log_end`. Returns false for a broker that is not a replica.
    pub fn on_follower_fetch(&mut self, follower: i32, fetch_offset: i64, leader_log_end: i64, now_ms: i64) -> bool {
        let Some(state) = self.followers.get_mut(&follower) else { return false };
        if fetch_offset >= leader_log_end {
            state.last_caught_up_ms = state.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= state.last_fetch_leader_log_end {
            state.last_caught_up_ms = state.last_caught_up_ms.max(state.last_fetch_ms);
        }
        state.log_end_offset = fetch_offset;
        state.last_fetch_leader_log_end = leader_log_end;
        state.last_fetch_ms = now_ms;
        true
    }

    fn caught_up(&self, state: &FollowerState, leader_log_end: i64, now_ms: i64) -> bool {
        state.log_end_offset == leader_log_end
            || now_ms - state.last_caught_up_ms <= self.settings.replica_lag_time_max_ms
    }

    /// A follower out of the ISR that has reached the high watermark and this epoch's start
    /// joins it: the proposal to send (none while another change is pending).
    pub fn maybe_expand_isr(&mut self) -> Option<IsrProposal> {
        if self.pending.is_some() {
            return None;
        }
        let joining: Vec<i32> = self
            .followers
            .iter()
            .filter(|(r, s)| {
                !self.isr.contains(r)
                    && !self.ineligible.contains(r)
                    && s.log_end_offset >= self.high_watermark
                    && s.log_end_offset >= self.epoch_start_offset
            })
            .map(|(r, _)| *r)
            .collect();
        let first = *joining.first()?;
        let mut isr = self.isr.clone();
        isr.push(first);
        self.propose(isr)
    }

    /// Followers of the ISR not caught up for `replica.lag.time.max.ms` leave it: the proposal
    /// to send (none while another change is pending).
    pub fn maybe_shrink_isr(&mut self, leader_log_end: i64, now_ms: i64) -> Option<IsrProposal> {
        if self.pending.is_some() {
            return None;
        }
        let lagging: Vec<i32> = self
            .isr
            .iter()
            .filter(|&&r| r != self.node_id)
            .filter(|r| self.followers.get(r).is_some_and(|s| !self.caught_up(s, leader_log_end, now_ms)))
            .copied()
            .collect();
        if lagging.is_empty() {
            return None;
        }
        let isr = self.isr.iter().filter(|r| !lagging.contains(r)).copied().collect();
        self.propose(isr)
    }

    fn propose(&mut self, isr: Vec<i32>) -> Option<IsrProposal> {
        let proposal = IsrProposal { isr, leader_epoch: self.leader_epoch, partition_epoch: self.partition_epoch };
        self.pending = Some(proposal.clone());
        Some(proposal)
    }

    /// The controller's answer to the pending proposal: the committed ISR and partition epoch
    /// (which may differ from the proposal), or `None` for a refusal (the proposal is dropped;
    /// the next check proposes again).
    pub fn on_isr_committed(&mut self, committed: Option<(Vec<i32>, i32)>) {
        self.pending = None;
        if let Some((isr, partition_epoch)) = committed {
            if partition_epoch > self.partition_epoch {
                self.isr = isr;
                self.partition_epoch = partition_epoch;
            }
        }
    }

    /// Moves the high watermark up if it can; returns whether it moved.
    pub fn maybe_advance_high_watermark(&mut self, leader_log_end: i64, now_ms: i64) -> bool {
        if self.settings.eligible_leader_replicas && self.isr.len() < self.settings.min_insync_replicas {
            return false;
        }
        let maximal = self.maximal_isr();
        let mut candidate = leader_log_end;
        for (r, state) in &self.followers {
            let counts = maximal.contains(r)
                || (self.replicas.contains(r)
                    && !self.ineligible.contains(r)
                    && self.caught_up(state, leader_log_end, now_ms));
            if counts && state.log_end_offset < candidate {
                candidate = state.log_end_offset;
            }
        }
        if candidate > self.high_watermark {
            self.high_watermark = candidate;
            assert!(self.high_watermark <= leader_log_end, "the high watermark never passes the log end");
            true
        } else {
            false
        }
    }

    /// Whether an `acks=all` write may be appended now.
    pub fn check_append_acks_all(&self) -> Result<(), AckError> {
        if self.isr.len() < self.settings.min_insync_replicas {
            Err(AckError::NotEnoughReplicas)
        } else {
            Ok(())
        }
    }

    /// For an `acks=all` write ending before `required_offset`: `None` while it waits, else its
    /// outcome (Kafka's `checkEnoughReplicasReachOffset`).
    pub fn acks_all_outcome(&self, required_offset: i64) -> Option<Result<(), AckError>> {
        if self.high_watermark < required_offset {
            return None;
        }
        Some(if self.isr.len() >= self.settings.min_insync_replicas {
            Ok(())
        } else {
            Err(AckError::NotEnoughReplicasAfterAppend)
        })
    }
}

/// A log's leader-epoch cache, `(epoch, start offset)` ascending, with its log end: Kafka's
/// `endOffsetForEpoch`: the largest epoch <= `epoch` and where it ended (the next epoch's start,
/// or the log end for the latest). `None` when every known epoch is newer.
pub fn end_offset_for_epoch(epochs: &[(i32, i64)], log_end: i64, epoch: i32) -> Option<(i32, i64)> {
    let i = epochs.partition_point(|(e, _)| *e <= epoch);
    if i == 0 {
        return None;
    }
    let end = epochs.get(i).map_or(log_end, |(_, start)| *start);
    Some((epochs[i - 1].0, end.min(log_end)))
}

/// Where a follower truncates when the leader answers a fetch with a diverging epoch: the
/// leader's `(epoch, end offset)` for the follower's last fetched epoch. Returns the offset to
/// truncate to and whether truncation is complete (false: fetch again from there, another
/// round may go further back), as Kafka's `AbstractFetcherThread` decides.
pub fn truncation_point(
    follower_epochs: &[(i32, i64)],
    follower_log_end: i64,
    leader_epoch: i32,
    leader_end_offset: i64,
) -> (i64, bool) {
    match end_offset_for_epoch(follower_epochs, follower_log_end, leader_epoch) {
        // The follower knows no epoch that old: the leader's end offset for it is safe.
        None => (leader_end_offset.min(follower_log_end), true),
        Some((epoch, end)) if epoch != leader_epoch => (end.min(follower_log_end), false),
        Some(_) => (leader_end_offset.min(follower_log_end), true),
    }
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
