//! The storage engine: partition logs made of segments, their indexes, batch validation,
//! compression, recovery, retention and group-commit fsync.
//!
//! Layering: `batch` (format + validation) and `compression` are pure; `index` and `segment`
//! own files; `partition_log` owns one partition's segments, with its leader-epoch cache
//! (`epoch_cache`) and producer state (`producer_state`: idempotence, transactions; `verification`: KIP-890 verification
//! guards); `flusher` batches fsyncs across partitions and producers. Nothing here knows about the network or the
//! Kafka protocol messages, nor decides the high watermark: the replica layer does and storage
//! keeps it.

pub mod batch;
pub mod cleaner;
pub mod compression;
pub mod deleter;
pub mod dir_health;
pub mod epoch_cache;
pub mod flusher;
pub mod index;
pub mod lz4_frame;
pub mod partition_log;
pub mod partition_metadata;
pub mod producer_state;
pub mod record_error;
pub mod segment;
pub mod verification;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, RwLock};

pub use partition_log::{AppendInfo, PartitionLog};
pub use segment::FileSlice;

/// One partition of a topic: its identity and its log.
#[derive(Debug)]
pub struct Partition {
    pub topic: String,
    pub index: i32,
    /// The log directory (an entry of `log.dirs`) holding this partition's directory; read
    /// without locking the log (placement counts, DescribeLogDirs). Changes only when
    /// AlterReplicaLogDirs moves the partition (`metadata::replica_move`), together with the log.
    log_dir: RwLock<PathBuf>,
    log: Mutex<PartitionLog>,
}

impl Partition {
    pub fn new(topic: String, index: i32, log: PartitionLog) -> Partition {
        let log_dir = log.dir().parent().map(Path::to_path_buf).unwrap_or_default();
        Partition { topic, index, log_dir: RwLock::new(log_dir), log: Mutex::new(log) }
    }

    /// The entry of `log.dirs` this partition lives in.
    pub fn log_dir(&self) -> PathBuf {
        self.log_dir.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether the partition's log directory is offline (KAFKA_STORAGE_ERROR to every request).
    pub fn offline(&self) -> bool {
        self.log().health().is_offline()
    }

    /// Records that the partition now lives in `log_dir` (after a move; the caller holds the
    /// log lock and has swapped the log).
    pub fn set_log_dir(&self, log_dir: PathBuf) {
        *self.log_dir.write().unwrap_or_else(|p| p.into_inner()) = log_dir;
    }

    /// Locks the log. A poisoned lock (a panic while it was held, which only a client's request
    /// can leave behind: other panics halt at once, `crate::fatal`) halts the process: the panic
    /// may have stopped an append between its segment and its indexes, which only the recovery
    /// of the next start repairs.
    pub fn log(&self) -> MutexGuard<'_, PartitionLog> {
        self.log.lock().unwrap_or_else(|_| {
            crate::fatal::halt(&format!("the log of {}-{} was poisoned by a panic", self.topic, self.index))
        })
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
