//! Group commit: one background thread fsyncs partition logs on behalf of many waiters.
//!
//! Owns: the queue of "make partition P durable up to offset O" requests. Each pass drains every
//! request queued so far, fsyncs each distinct partition once (file handles are taken under the
//! partition lock, fsync runs outside it so appends continue), then completes all the waiters
//! it covered. Many producers writing at once therefore share one fsync per partition.
//! Invariant: a waiter is completed with Ok only after an fsync that started after its data
//! was written.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::Arc;

use tokio::sync::oneshot;

use crate::log::{now_ms, Partition};

struct Request {
    partition: Arc<Partition>,
    offset: i64,
    done: oneshot::Sender<Result<(), String>>,
}

#[derive(Clone)]
pub struct Flusher {
    tx: mpsc::Sender<Request>,
}

impl Flusher {
    pub fn start() -> Flusher {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new().name("ketch-flusher".into()).spawn(move || run(rx)).expect("spawn flusher thread");
        Flusher { tx }
    }

    /// Resolves once everything in `partition` below `offset` is on stable storage.
    pub async fn flush(&self, partition: Arc<Partition>, offset: i64) -> Result<(), String> {
        self.flush_all(vec![(partition, offset)]).await.pop().expect("one result per request")
    }

    /// Like `flush` for several partitions at once: every request is queued before any is
    /// awaited, so one group-commit pass covers them all. Results come back in input order.
    pub async fn flush_all(&self, work: Vec<(Arc<Partition>, i64)>) -> Vec<Result<(), String>> {
        let mut waits = Vec::with_capacity(work.len());
        for (partition, offset) in work {
            if partition.log().flushed_offset() >= offset {
                waits.push(Ok(None));
                continue;
            }
            let (done, wait) = oneshot::channel();
            let sent = self.tx.send(Request { partition, offset, done });
            waits.push(sent.map(|()| Some(wait)).map_err(|_| "flusher stopped".to_string()));
        }
        let mut results = Vec::with_capacity(waits.len());
        for wait in waits {
            results.push(match wait {
                Err(e) => Err(e),
                Ok(None) => Ok(()),
                Ok(Some(wait)) => wait.await.map_err(|_| "flusher stopped".to_string()).and_then(|r| r),
            });
        }
        results
    }

    /// Synchronous variant for background tasks (`flush.ms`, `flush.messages`).
    pub fn flush_now(partition: &Partition) -> Result<(), String> {
        sync_partition(partition)
    }
}

/// Most fsyncs one group-commit pass runs at once.
const SYNC_THREADS: usize = 8;

fn run(rx: mpsc::Receiver<Request>) {
    while let Ok(first) = rx.recv() {
        let mut pending = vec![first];
        while let Ok(more) = rx.try_recv() {
            pending.push(more);
        }
        // Each distinct partition once; several are synced in parallel, so their fsyncs can
        // share the file system's journal commits instead of queueing one behind another.
        let mut distinct: Vec<&Arc<Partition>> = Vec::new();
        for request in &pending {
            if !distinct.iter().any(|p| Arc::ptr_eq(p, &request.partition)) {
                distinct.push(&request.partition);
            }
        }
        let results: HashMap<usize, Result<(), String>> = if distinct.len() == 1 {
            distinct.iter().map(|p| (key(p), sync_partition(p))).collect()
        } else {
            let next = std::sync::atomic::AtomicUsize::new(0);
            let out = std::sync::Mutex::new(HashMap::new());
            std::thread::scope(|scope| {
                for _ in 0..SYNC_THREADS.min(distinct.len()) {
                    scope.spawn(|| loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(partition) = distinct.get(i) else { break };
                        let result = sync_partition(partition);
                        out.lock().unwrap_or_else(|e| e.into_inner()).insert(key(partition), result);
                    });
                }
            });
            out.into_inner().unwrap_or_else(|e| e.into_inner())
        };
        for request in pending {
            let result = results.get(&key(&request.partition)).cloned().unwrap_or(Ok(()));
            let result = result.and_then(|()| {
                if request.partition.log().flushed_offset() >= request.offset {
                    Ok(())
                } else {
                    Err("log was truncated before it could be flushed".to_string())
                }
            });
            let _ = request.done.send(result);
        }
    }
}

/// Identity of a partition for the duration of one pass (its address).
fn key(partition: &Arc<Partition>) -> usize {
    Arc::as_ptr(partition) as usize
}

fn sync_partition(partition: &Partition) -> Result<(), String> {
    let work = partition.log().flush_work().map_err(|e| e.to_string())?;
    for file in &work.files {
        file.sync_data().map_err(|e| format!("fsync failed: {e}"))?;
    }
    partition.log().mark_flushed(&work, now_ms());
    Ok(())
}
