//! The Raft core's view of its log: entries (a batch each: the epoch it was written in and its
//! value), each taking as many offsets as it holds records, as Kafka's record batches do. Offsets
//! are Kafka's (a batch of n records at offset o ends at o + n); an entry starts where the one
//! before it ends, from the log's start offset on.
//!
//! Invariants: starts are contiguous (`starts[i + 1] == starts[i] + records(entries[i])`); epochs
//! never decrease along the log; every entry holds at least one record.

/// What an entry's value weighs in offsets (a record batch: its record count).
pub trait Records {
    fn records(&self) -> u64;
}

impl Records for u64 {
    /// (The simulation's values: 1 to 3 records each, from the value.)
    fn records(&self) -> u64 {
        1 + self % 3
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
    entries: Vec<Entry<V>>,
    /// `starts[i]`: the offset entry i starts at.
    starts: Vec<u64>,
    end: u64,
}

impl<V: Records + Clone> Entries<V> {
    pub fn new(entries: Vec<Entry<V>>) -> Self {
        let mut log = Entries { start: 0, entries: Vec::new(), starts: Vec::new(), end: 0 };
        log.extend(entries);
        log
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
        self.entries.last().map_or(0, |e| e.epoch)
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
            None => (0, self.start),
        }
    }

    /// Up to `max` entries from the one holding `offset`: (where the first starts, the entries).
    pub fn read(&self, offset: u64, max: usize) -> (u64, Vec<Entry<V>>) {
        let from = self.index_of(offset);
        let upto = (from + max).min(self.entries.len());
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
