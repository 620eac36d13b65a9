//! The voter set as a function of the metadata log (KIP-853; Kafka's `VoterSetHistory`): the set
//! at the log's start (the static `controller.quorum.voters`, the bootstrap checkpoint's, or the
//! newest snapshot's), then every VotersRecord in the log at its offset. The set in force is the
//! newest one in the log, committed or not, as in Kafka: a leader counts a new voter's fetches
//! toward its high watermark from the moment the record is appended, which is why a change is
//! one voter at a time, and only once the previous change and an entry of the leader's epoch
//! are committed (`core_voters.rs`).
//!
//! Invariants: changes are kept at strictly increasing offsets; a truncation of the log to `end`
//! undoes every change at or past `end`; a compaction to `start` folds the changes below `start`
//! into the base; a voter set is never empty and holds no id twice (sorted).

use std::collections::BTreeMap;

use super::core_io::NodeId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterHistory {
    /// The voter set in force before the first change kept.
    base: Vec<NodeId>,
    /// Offset of a VotersRecord's batch -> the set it makes current.
    changes: BTreeMap<u64, Vec<NodeId>>,
}

/// A voter set in canonical form: sorted, no duplicates, not empty.
pub fn canonical(voters: &[NodeId]) -> Vec<NodeId> {
    let mut voters = voters.to_vec();
    voters.sort_unstable();
    voters.dedup();
    assert!(!voters.is_empty(), "a voter set is never empty");
    voters
}

impl VoterHistory {
    pub fn new(base: &[NodeId]) -> Self {
        VoterHistory { base: canonical(base), changes: BTreeMap::new() }
    }

    /// The set in force now: the newest change, else the base.
    pub fn latest(&self) -> &[NodeId] {
        self.changes.values().next_back().unwrap_or(&self.base)
    }

    /// The offset of the newest change kept, if any.
    pub fn latest_offset(&self) -> Option<u64> {
        self.changes.keys().next_back().copied()
    }

    /// The set in force for a log ending at `end`: the newest change below it, else the base.
    pub fn at(&self, end: u64) -> &[NodeId] {
        self.changes.range(..end).next_back().map_or(&self.base, |(_, v)| v)
    }

    /// A VotersRecord appended at `offset` (past every change kept).
    pub fn record(&mut self, offset: u64, voters: &[NodeId]) {
        assert!(self.latest_offset().is_none_or(|o| o < offset), "voter changes at growing offsets");
        self.changes.insert(offset, canonical(voters));
    }

    /// The log was truncated to `end`: changes at or past it are undone.
    pub fn truncate(&mut self, end: u64) {
        self.changes.split_off(&end);
    }

    /// The log now starts at `start`: the changes below it fold into the base.
    pub fn compact(&mut self, start: u64) {
        let kept = self.changes.split_off(&start);
        if let Some((_, newest)) = self.changes.pop_last() {
            self.base = newest;
        }
        self.changes = kept;
    }

    /// Whether `id` votes in the set in force.
    pub fn contains(&self, id: NodeId) -> bool {
        self.latest().binary_search(&id).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_change_is_in_force_and_truncation_or_compaction_keep_the_history_right() {
        let mut h = VoterHistory::new(&[3, 1, 2]);
        assert_eq!(h.latest(), &[1, 2, 3]);
        h.record(5, &[1, 2, 3, 4]);
        h.record(9, &[2, 3, 4]);
        assert_eq!(h.latest(), &[2, 3, 4]);
        assert!(!h.contains(1) && h.contains(4));
        assert_eq!(h.at(5), &[1, 2, 3]);
        assert_eq!(h.at(6), &[1, 2, 3, 4]);
        assert_eq!(h.at(100), &[2, 3, 4]);
        let mut t = h.clone();
        t.truncate(9);
        assert_eq!((t.latest(), t.latest_offset()), (&[1, 2, 3, 4][..], Some(5)));
        t.truncate(0);
        assert_eq!((t.latest(), t.latest_offset()), (&[1, 2, 3][..], None));
        h.compact(7);
        assert_eq!((h.at(7), h.latest()), (&[1, 2, 3, 4][..], &[2, 3, 4][..]));
        h.compact(10);
        assert_eq!((h.latest(), h.latest_offset()), (&[2, 3, 4][..], None));
    }

    #[test]
    #[should_panic(expected = "growing offsets")]
    fn a_change_below_the_newest_is_a_bug() {
        let mut h = VoterHistory::new(&[1]);
        h.record(5, &[1, 2]);
        h.record(5, &[1]);
    }
}
