//! The Raft core's view of its log: entries (a batch each: the epoch it was written in and its
//! value), each taking as many offsets as it holds records, as Kafka's record batches do. Offsets
//! are Kafka's (a batch of n records at offset o ends at o + n); an entry starts where the one
//! before it ends, from the log's start offset on.
//!
//! A log may start past offset 0, after a snapshot (KIP-630): `start` is the snapshot's end
//! offset and `start_epoch` the epoch of its last record; the entries below were compacted away
//! (this node snapshotted them, or installed the leader's snapshot).
//!
//! Invariants: starts are contiguous from `start` (`starts[i + 1] == starts[i] +
//! records(entries[i])`); epochs never decrease along the log, from `start_epoch` on; every
//! entry holds at least one record; truncation never goes below `start`.

/// What the core needs to know of an entry's value: what it weighs in offsets (a record batch:
/// its record count), and the voter set it makes current if it holds a VotersRecord (KIP-853).
pub trait Records {
    fn records(&self) -> u64;
    fn voters(&self) -> Option<Vec<super::core_io::NodeId>> {
        None
    }
}

/// The simulation's values mark a voter set with this bit; the bits below it are the voters.
pub const SIM_VOTERS: u64 = 1 << 63;

impl Records for u64 {
    /// (The simulation's values: 1 to 3 records each, from the value.)
    fn records(&self) -> u64 {
        1 + self % 3
    }
    /// (A simulation value with `SIM_VOTERS` set is a voter set: voter i is bit i.)
    fn voters(&self) -> Option<Vec<super::core_io::NodeId>> {
        (self & SIM_VOTERS != 0).then(|| (0..63).filter(|i| self & (1 << i) != 0).collect())
    }
}

/// One log entry: the epoch it was written in, and its value (None: the leader's
/// LeaderChangeMessage at the start of its epoch, one record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<V> {
    pub epoch: i32,
    pub value: Option<V>,
}

impl<V: Records> Entry<V> {
    pub fn records(&self) -> u64 {
        self.value.as_ref().map_or(1, |v| v.records().max(1))
    }
}

#[derive(Debug, Clone)]
pub struct Entries<V> {
    start: u64,
    start_epoch: i32,
    entries: Vec<Entry<V>>,
    /// `starts[i]`: the offset entry i starts at.
    starts: Vec<u64>,
    end: u64,
}

impl<V: Records + Clone> Entries<V> {
    pub fn new(entries: Vec<Entry<V>>) -> Self {
        Self::after_snapshot(0, 0, entries)
    }

    /// A log starting at `start`, after a snapshot whose last record is of `start_epoch`.
    pub fn after_snapshot(start: u64, start_epoch: i32, entries: Vec<Entry<V>>) -> Self {
        let mut log = Entries { start, start_epoch, entries: Vec::new(), starts: Vec::new(), end: start };
        log.extend(entries);
        log
    }

    /// The first offset held (the end of the snapshot before it, or 0).
    pub fn start(&self) -> u64 {
        self.start
    }
    /// The epoch of the record before `start` (0 at offset 0).
    pub fn start_epoch(&self) -> i32 {
        self.start_epoch
    }

    /// The epoch of the record before `offset` (a boundary in `[start, end]`).
    pub fn epoch_before(&self, offset: u64) -> i32 {
        assert!(offset >= self.start && offset <= self.end && self.is_boundary(offset), "{offset} in the log");
        let before = self.starts.partition_point(|s| *s < offset);
        if before == 0 {
            self.start_epoch
        } else {
            self.entries[before - 1].epoch
        }
    }

    /// Drops every entry below `end` (a boundary, at most the log end): the log then starts
    /// there, after a snapshot of them.
    pub fn compact(&mut self, end: u64) {
        if end <= self.start {
            return;
        }
        let epoch = self.epoch_before(end);
        let drop = self.starts.partition_point(|s| *s < end);
        self.entries.drain(..drop);
        self.starts.drain(..drop);
        self.start = end;
        self.start_epoch = epoch;
    }

    pub fn entries(&self) -> &[Entry<V>] {
        &self.entries
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// The offset after the last entry.
    pub fn end(&self) -> u64 {
        self.end
    }
    pub fn last_epoch(&self) -> i32 {
        self.entries.last().map_or(self.start_epoch, |e| e.epoch)
    }
    pub fn start_of(&self, index: usize) -> u64 {
        self.starts[index]
    }

    pub fn extend(&mut self, entries: Vec<Entry<V>>) {
        for entry in entries {
            assert!(entry.epoch >= self.last_epoch(), "epochs never decrease along the log");
            self.starts.push(self.end);
            self.end += entry.records();
            self.entries.push(entry);
        }
    }

    /// The index of the entry holding `offset` (`len()` at the end or past it).
    pub fn index_of(&self, offset: u64) -> usize {
        if offset >= self.end {
            return self.entries.len();
        }
        self.starts.partition_point(|s| *s <= offset).saturating_sub(1)
    }

    /// Whether `offset` is where an entry starts, or the end.
    pub fn is_boundary(&self, offset: u64) -> bool {
        offset == self.end || self.starts.binary_search(&offset).is_ok()
    }

    /// Removes every entry holding an offset at or past `end` (an entry `end` falls inside goes
    /// whole, as Kafka truncates a segment to a batch boundary); returns the new end.
    pub fn truncate(&mut self, end: u64) -> u64 {
        assert!(end >= self.start, "no truncation below the log start {} (to {end})", self.start);
        let keep = self.starts.partition_point(|s| *s < end);
        // An entry starting below `end` but reaching past it goes too.
        let keep =
            if keep > 0 && self.starts[keep - 1] + self.entries[keep - 1].records() > end { keep - 1 } else { keep };
        self.entries.truncate(keep);
        self.starts.truncate(keep);
        self.end = self.starts.last().map_or(self.start, |s| s + self.entries[keep - 1].records());
        self.end
    }

    /// The end of `epoch` (or of the largest epoch below it) in this log: (that epoch, its end).
    pub fn end_of_epoch(&self, epoch: i32) -> (i32, u64) {
        match self.entries.iter().rposition(|e| e.epoch <= epoch) {
            Some(i) => (self.entries[i].epoch, self.starts[i] + self.entries[i].records()),
            // (Below the log start only the snapshot's epoch is known.)
            None => (self.start_epoch.min(epoch), self.start),
        }
    }

    /// Up to `max` entries from the one holding `offset`: (where the first starts, the entries).
    pub fn read(&self, offset: u64, max: usize) -> (u64, Vec<Entry<V>>) {
        let from = self.index_of(offset);
        let upto = from.saturating_add(max).min(self.entries.len());
        let start = if from < self.entries.len() { self.starts[from] } else { self.end };
        (start, self.entries[from..upto].to_vec())
    }

    /// The entry starting at `offset`, if one does.
    pub fn at(&self, offset: u64) -> Option<&Entry<V>> {
        self.starts.binary_search(&offset).ok().map(|i| &self.entries[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, value: u64) -> Entry<u64> {
        Entry { epoch, value: Some(value) }
    }

    #[test]
    fn a_log_after_a_snapshot_starts_at_its_end() {
        let mut log = Entries::new(vec![e(1, 0), e(1, 1), e(2, 2), e(3, 0)]);
        log.compact(3);
        assert_eq!((log.start(), log.start_epoch(), log.len(), log.end()), (3, 1, 2, 7));
        assert_eq!(log.epoch_before(3), 1);
        assert_eq!(log.epoch_before(6), 2);
        assert_eq!(log.end_of_epoch(1), (1, 3));
        assert_eq!(log.end_of_epoch(2), (2, 6));
        assert_eq!(log.read(0, 8).0, 3);
        log.compact(7);
        assert_eq!((log.start(), log.start_epoch(), log.last_epoch(), log.end()), (7, 3, 3, 7));
        assert_eq!(log.truncate(7), 7);
        let log: Entries<u64> = Entries::after_snapshot(40, 4, vec![e(5, 0)]);
        assert_eq!((log.start_of(0), log.end(), log.end_of_epoch(4)), (40, 41, (4, 40)));
    }

    #[test]
    fn offsets_count_records() {
        // Values 0, 1, 2 weigh 1, 2, 3 records; a leader change weighs 1.
        let mut log = Entries::new(vec![Entry { epoch: 1, value: None }, e(1, 1), e(2, 2), e(2, 0)]);
        assert_eq!(log.end(), 1 + 2 + 3 + 1);
        assert_eq!((0..4).map(|i| log.start_of(i)).collect::<Vec<_>>(), vec![0, 1, 3, 6]);
        assert_eq!(log.index_of(0), 0);
        assert_eq!(log.index_of(2), 1);
        assert_eq!(log.index_of(3), 2);
        assert_eq!(log.index_of(5), 2);
        assert_eq!(log.index_of(7), 4);
        assert_eq!(log.index_of(99), 4);
        assert!(log.is_boundary(3) && log.is_boundary(7) && !log.is_boundary(4));
        assert_eq!(log.end_of_epoch(1), (1, 3));
        assert_eq!(log.end_of_epoch(5), (2, 7));
        assert_eq!(log.end_of_epoch(0), (0, 0));
        assert_eq!(log.read(4, 8), (3, vec![e(2, 2), e(2, 0)]));
        assert_eq!(log.read(7, 8), (7, vec![]));
        // Truncating inside an entry removes it whole.
        assert_eq!(log.truncate(4), 3);
        assert_eq!(log.len(), 2);
        assert_eq!(log.truncate(3), 3);
        assert_eq!(log.truncate(0), 0);
        assert!(log.is_empty());
        log.extend(vec![e(3, 2)]);
        assert_eq!((log.start_of(0), log.end()), (0, 3));
    }
}
