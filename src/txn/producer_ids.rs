//! Hands out producer ids that are unique across restarts (and, in a cluster, across brokers).
//!
//! A single node reserves them itself. On disk: `<first log dir>/.ketch/producer-id-block` holds
//! one decimal number, the first id that has not been reserved. Ids are reserved in blocks of
//! `BLOCK_SIZE`: the new limit is written (atomically, fsynced) before any id of the block is
//! handed out, so a crash can skip ids but never hand one out twice.
//!
//! A broker of a controller quorum hands out ids from blocks the active controller allocates
//! (AllocateProducerIds, as Kafka's `RPCProducerIdManager`): the next block is asked for when
//! the current one is 90% used; with none left the caller is told to retry
//! (COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers). Nothing is stored: the controller's
//! metadata log records every block it gave out.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::log::partition_log::write_atomically;

const BLOCK_SIZE: i64 = 1000;

pub struct ProducerIds {
    /// The block file of a single node; `None` for a broker of a controller quorum.
    path: Option<PathBuf>,
    inner: Mutex<Blocks>,
    /// Woken when a block from the controller is wanted.
    pub wanted: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Blocks {
    next: i64,
    /// End (exclusive) of the block `next` is in.
    end: i64,
    /// Size of the current block (controller blocks), for the prefetch point.
    len: i64,
    /// The controller's next block, received before the current one ran out.
    prefetched: Option<(i64, i64)>,
    asked: bool,
}

/// Why no id was handed out.
#[derive(Debug, thiserror::Error)]
pub enum NoId {
    #[error("reserving a block of producer ids: {0}")]
    Io(#[from] std::io::Error),
    /// Asked for a block from the controller; retry.
    #[error("waiting for a block of producer ids from the controller")]
    Pending,
}

impl ProducerIds {
    pub fn open(log_dir: &Path) -> anyhow::Result<ProducerIds> {
        let dir = log_dir.join(".ketch");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("producer-id-block");
        let next = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().parse::<i64>()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        let blocks = Blocks { next, end: next, ..Default::default() };
        Ok(ProducerIds { path: Some(path), inner: Mutex::new(blocks), wanted: tokio::sync::Notify::new() })
    }

    /// Ids from the controller's blocks (a broker of a controller quorum); the first block is
    /// wanted at once.
    pub fn from_controller() -> ProducerIds {
        let blocks = Blocks { asked: true, ..Default::default() };
        ProducerIds { path: None, inner: Mutex::new(blocks), wanted: tokio::sync::Notify::new() }
    }

    /// The next unused producer id.
    pub fn next(&self) -> Result<i64, NoId> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(path) = &self.path else { return self.next_from_controller(&mut inner) };
        if inner.next >= inner.end {
            let end = inner.next + BLOCK_SIZE;
            write_atomically(path, format!("{end}\n").as_bytes())?;
            inner.end = end;
        }
        let id = inner.next;
        inner.next += 1;
        Ok(id)
    }

    fn next_from_controller(&self, inner: &mut Blocks) -> Result<i64, NoId> {
        if inner.next >= inner.end {
            if let Some((start, len)) = inner.prefetched.take() {
                (inner.next, inner.end, inner.len) = (start, start + len, len);
            }
        }
        let id = (inner.next < inner.end).then_some(inner.next);
        if id.is_some() {
            inner.next += 1;
        }
        // The next block is asked for once 90% of this one is used (or none is left).
        if (inner.end - inner.next) * 10 <= inner.len && inner.prefetched.is_none() && !inner.asked {
            inner.asked = true;
            self.wanted.notify_one();
        }
        id.ok_or(NoId::Pending)
    }

    /// Whether a block from the controller is wanted now.
    pub fn wants_block(&self) -> bool {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).asked
    }

    /// The controller allocated `[start, start + len)` (or failed: `None`, asked again later).
    pub fn add_block(&self, block: Option<(i64, i64)>) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.asked = false;
        if let Some((start, len)) = block {
            assert!(len > 0 && start >= inner.end, "controller blocks only grow");
            inner.prefetched = Some((start, len));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_stay_unique_across_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(dir.path()).unwrap();
        let a: Vec<i64> = (0..3).map(|_| ids.next().unwrap()).collect();
        assert_eq!(a, vec![0, 1, 2]);
        drop(ids);
        let ids = ProducerIds::open(dir.path()).unwrap();
        assert!(ids.next().unwrap() >= 1000);
    }

    #[test]
    fn controller_blocks_are_asked_for_ahead_and_used_in_order() {
        let ids = ProducerIds::from_controller();
        assert!(ids.wants_block(), "the first block is wanted at once");
        assert!(matches!(ids.next(), Err(NoId::Pending)), "no block yet");
        ids.add_block(Some((5000, 10)));
        let first: Vec<i64> = (0..9).map(|_| ids.next().unwrap()).collect();
        assert_eq!(first, (5000..5009).collect::<Vec<_>>());
        assert!(ids.wants_block(), "90% used: the next block is asked for");
        ids.add_block(Some((7000, 10)));
        assert_eq!((ids.next().unwrap(), ids.next().unwrap()), (5009, 7000));
    }
}
