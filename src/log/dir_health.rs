//! Whether a log directory is online: Kafka's `LogDirFailureChannel` for one directory.
//!
//! Owns: the online/offline flag of one entry of `log.dirs`, shared by the `LogDirs` entry and
//! every partition log in that directory. Nothing on disk.
//! Invariants: a directory goes offline at the first I/O error on a read, write, fsync or roll
//! of any of its partitions and never comes back while the process runs (as in Kafka, a
//! restart brings it back); once offline, every operation of its partitions is refused with
//! KAFKA_STORAGE_ERROR before touching the disk. The metadata directory (the first of
//! `log.dirs`, holding `.ketch/`) is fatal: its failure stops the process, as Kafka halts when
//! its metadata log directory fails.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::LogError;

#[derive(Debug, Default)]
pub struct DirHealth {
    path: PathBuf,
    offline: AtomicBool,
    /// The metadata directory: its failure stops the broker.
    fatal: bool,
}

impl DirHealth {
    pub fn new(path: PathBuf, fatal: bool) -> DirHealth {
        DirHealth { path, offline: AtomicBool::new(false), fatal }
    }

    /// A directory that failed before the broker started serving (at open), or a directory
    /// that is gone (`path` then names what is known of it): offline for good.
    pub fn failed(path: PathBuf) -> DirHealth {
        DirHealth { path, offline: AtomicBool::new(true), fatal: false }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// Takes the directory offline after `error` (logged once).
    pub fn fail(&self, error: &dyn std::fmt::Display) {
        if self.offline.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::error!(dir = %self.path.display(), %error,
            "I/O error in a log directory: it is offline, its partitions are no longer served");
        if self.fatal {
            tracing::error!(dir = %self.path.display(),
                "the metadata log directory failed: stopping the broker (as Kafka halts)");
            std::process::exit(1);
        }
    }

    /// KAFKA_STORAGE_ERROR when offline.
    pub fn check(&self) -> Result<(), LogError> {
        if self.is_offline() {
            return Err(LogError::Io(std::io::Error::other(format!(
                "Log directory {} is offline",
                self.path.display()
            ))));
        }
        Ok(())
    }

    /// Passes `result` on, taking the directory offline if it is an I/O error.
    pub fn watch<T>(&self, result: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(LogError::Io(e)) = &result {
            self.fail(e);
        }
        result
    }
}
