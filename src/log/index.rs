//! Sparse per-segment indexes: offset -> file position, and timestamp -> offset.
//!
//! On-disk format (big-endian, like Kafka's): `.index` holds 8-byte entries
//! `[relative offset u32][position u32]`; `.timeindex` holds 12-byte entries
//! `[timestamp i64][relative offset u32]`. Entries are appended every `index.interval.bytes` of
//! log; the whole index is also kept in memory (a few KB per GB of log).
//! Invariants: offsets, positions and timestamps strictly increase from entry to entry; an
//! entry never points past the end of its segment. A file that breaks these is rebuilt from the
//! log by the segment, never trusted.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

/// An append-only index: entries in memory, written to its file by `sync`.
#[derive(Debug)]
pub struct IndexFile<E> {
    path: PathBuf,
    entries: Vec<E>,
    /// How many of `entries` are already in the file.
    persisted: usize,
}

pub trait Entry: Copy {
    const BYTES: usize;
    fn encode(&self, out: &mut Vec<u8>);
    fn decode(bytes: &[u8]) -> Self;
    /// True when `self` may follow `prev` in a valid index.
    fn follows(&self, prev: &Self) -> bool;
    fn relative_offset(&self) -> u32;
}

impl Entry for OffsetEntry {
    const BYTES: usize = 8;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        OffsetEntry {
            relative_offset: u32::from_be_bytes(b[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(b[4..8].try_into().expect("4 bytes")),
        }
    }
    fn follows(&self, prev: &Self) -> bool {
        self.relative_offset > prev.relative_offset && self.position > prev.position
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
}

impl Entry for TimeEntry {
    const BYTES: usize = 12;
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(b: &[u8]) -> Self {
        TimeEntry {
            timestamp: i64::from_be_bytes(b[0..8].try_into().expect("8 bytes")),
            relative_offset: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
        }
    }
    fn follows(&self, prev: &Self) -> bool {
        self.timestamp > prev.timestamp && self.relative_offset >= prev.relative_offset
    }
    fn relative_offset(&self) -> u32 {
        self.relative_offset
    }
}

impl<E: Entry> IndexFile<E> {
    /// Starts an empty index, removing any file left at `path`.
    pub fn create(path: &Path) -> io::Result<Self> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(IndexFile { path: path.to_path_buf(), entries: Vec::new(), persisted: 0 })
    }

    /// A placeholder; `create` or `load` replaces it before any append.
    pub fn unopened(path: &Path) -> Self {
        IndexFile { path: path.to_path_buf(), entries: Vec::new(), persisted: 0 }
    }

    /// Loads an existing index. Returns `Ok(None)` when the file is missing or fails validation,
    /// so the caller rebuilds it from the log.
    pub fn load(path: &Path, entry_ok: impl Fn(&E) -> bool) -> io::Result<Option<Self>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        if bytes.len() % E::BYTES != 0 {
            return Ok(None);
        }
        let mut entries: Vec<E> = Vec::with_capacity(bytes.len() / E::BYTES);
        for chunk in bytes.chunks_exact(E::BYTES) {
            let entry = E::decode(chunk);
            let ordered = entries.last().is_none_or(|prev| entry.follows(prev));
            if !ordered || !entry_ok(&entry) {
                return Ok(None);
            }
            entries.push(entry);
        }
        let persisted = entries.len();
        Ok(Some(IndexFile { path: path.to_path_buf(), entries, persisted }))
    }

    /// Adds an entry in memory; an entry that would break the ordering is skipped.
    pub fn append(&mut self, entry: E) -> io::Result<()> {
        if let Some(prev) = self.entries.last() {
            if !entry.follows(prev) {
                return Ok(());
            }
        }
        self.entries.push(entry);
        Ok(())
    }

    pub fn entries(&self) -> &[E] {
        &self.entries
    }

    pub fn last(&self) -> Option<&E> {
        self.entries.last()
    }

    /// Writes the entries not yet in the file (creating it if needed) and fsyncs it.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.persisted == self.entries.len() && (self.persisted > 0 || self.path.exists()) {
            return Ok(());
        }
        let mut buf = Vec::with_capacity((self.entries.len() - self.persisted) * E::BYTES);
        for entry in &self.entries[self.persisted..] {
            entry.encode(&mut buf);
        }
        let mut file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        if self.persisted == 0 {
            file.set_len(0)?;
        }
        if !buf.is_empty() {
            // An empty index needs no fsync: should it vanish in a crash it is rebuilt.
            file.write_all(&buf)?;
            file.sync_data()?;
        }
        self.persisted = self.entries.len();
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn delete(self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

impl IndexFile<OffsetEntry> {
    /// File position to start scanning from for `relative_offset` (0 when before every entry).
    pub fn lookup(&self, relative_offset: u32) -> u32 {
        let i = self.entries.partition_point(|e| e.relative_offset <= relative_offset);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].position
        }
    }
}

impl IndexFile<TimeEntry> {
    /// Relative offset to start scanning from for the first record with timestamp >= `target`:
    /// every record before the returned offset has a timestamp below `target`.
    pub fn lookup(&self, target: i64) -> u32 {
        let i = self.entries.partition_point(|e| e.timestamp < target);
        if i == 0 {
            0
        } else {
            self.entries[i - 1].relative_offset
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_index_round_trip_and_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut index = IndexFile::<OffsetEntry>::create(&path).unwrap();
        index.append(OffsetEntry { relative_offset: 10, position: 4096 }).unwrap();
        index.append(OffsetEntry { relative_offset: 20, position: 8192 }).unwrap();
        assert!(!path.exists(), "entries stay in memory until sync");
        index.sync().unwrap();
        assert_eq!(index.lookup(5), 0);
        assert_eq!(index.lookup(10), 4096);
        assert_eq!(index.lookup(19), 4096);
        assert_eq!(index.lookup(25), 8192);
        let loaded = IndexFile::<OffsetEntry>::load(&path, |_| true).unwrap().unwrap();
        assert_eq!(loaded.entries(), index.entries());
        // An entry the caller rejects makes the file untrusted.
        assert!(IndexFile::<OffsetEntry>::load(&path, |e| e.position < 5000).unwrap().is_none());
        std::fs::write(&path, [0u8; 7]).unwrap();
        assert!(IndexFile::<OffsetEntry>::load(&path, |_| true).unwrap().is_none());
    }

    #[test]
    fn time_index_lookup_starts_before_target() {
        let dir = tempfile::tempdir().unwrap();
        let mut index = IndexFile::<TimeEntry>::create(&dir.path().join("0.timeindex")).unwrap();
        index.append(TimeEntry { timestamp: 100, relative_offset: 5 }).unwrap();
        index.append(TimeEntry { timestamp: 200, relative_offset: 9 }).unwrap();
        assert_eq!(index.lookup(50), 0);
        assert_eq!(index.lookup(100), 0);
        assert_eq!(index.lookup(150), 5);
        assert_eq!(index.lookup(201), 9);
    }
}
