//! Group commit: a pool of threads fsyncs partition logs on behalf of many waiters.
//!
//! Owns: per partition, the waiters for "durable up to offset O". A partition with waiters is
//! queued; a pool thread takes it, takes all its waiters so far, fsyncs it once (file handles
//! are taken under the partition lock, fsync runs outside it so appends continue) and
//! completes them. Waiters that arrive during that fsync wait for the partition's next one,
//! queued as soon as this one ends. Partitions are synced independently (no pass barrier: a
//! slow fsync of one partition holds back no other) and in parallel (up to `SYNC_THREADS`), so
//! many producers writing at once share one fsync per partition.
//! Invariant: a waiter is completed with Ok only after an fsync that started after its data
//! was written (waiters register after their append; an fsync covers what was written before
//! it took its file handles).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use tokio::sync::oneshot;

use crate::log::{now_ms, Partition};

/// Most fsyncs running at once.
const SYNC_THREADS: usize = 8;

struct Waiter {
    offset: i64,
    done: oneshot::Sender<Result<(), String>>,
}

/// A partition with waiters: queued for a sync, or being synced.
struct Entry {
    partition: Arc<Partition>,
    waiters: Vec<Waiter>,
    queued: bool,
    syncing: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<usize, Entry>,
    queue: VecDeque<usize>,
    stopped: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Stops the pool when the last `Flusher` handle is dropped (queued waiters are still served).
struct StopOnDrop(Arc<Shared>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.lock().stopped = true;
        self.0.work.notify_all();
    }
}

#[derive(Clone)]
pub struct Flusher {
    shared: Arc<Shared>,
    _stop: Arc<StopOnDrop>,
}

impl Flusher {
    pub fn start() -> Flusher {
        let shared = Arc::new(Shared::default());
        for i in 0..SYNC_THREADS {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("ketch-flusher-{i}"))
                .spawn(move || run(&shared))
                .expect("spawn flusher thread");
        }
        Flusher { shared: shared.clone(), _stop: Arc::new(StopOnDrop(shared)) }
    }

    /// Resolves once everything in `partition` below `offset` is on stable storage.
    pub async fn flush(&self, partition: Arc<Partition>, offset: i64) -> Result<(), String> {
        self.flush_all(vec![(partition, offset)]).await.pop().expect("one result per request")
    }

    /// Like `flush` for several partitions at once: every request is queued before any is
    /// awaited, so their fsyncs run together. Results come back in input order.
    pub async fn flush_all(&self, work: Vec<(Arc<Partition>, i64)>) -> Vec<Result<(), String>> {
        let mut waits = Vec::with_capacity(work.len());
        for (partition, offset) in work {
            if partition.log().flushed_offset() >= offset {
                waits.push(None);
                continue;
            }
            let (done, wait) = oneshot::channel();
            self.enqueue(partition, Waiter { offset, done });
            waits.push(Some(wait));
        }
        let mut results = Vec::with_capacity(waits.len());
        for wait in waits {
            results.push(match wait {
                None => Ok(()),
                Some(wait) => wait.await.map_err(|_| "flusher stopped".to_string()).and_then(|r| r),
            });
        }
        results
    }

    fn enqueue(&self, partition: Arc<Partition>, waiter: Waiter) {
        let key = key(&partition);
        let mut state = self.shared.lock();
        let entry = state.entries.entry(key).or_insert_with(|| Entry {
            partition,
            waiters: Vec::new(),
            queued: false,
            syncing: false,
        });
        entry.waiters.push(waiter);
        if !entry.queued && !entry.syncing {
            entry.queued = true;
            state.queue.push_back(key);
            drop(state);
            self.shared.work.notify_one();
        }
    }

    /// Synchronous variant for background tasks (`flush.ms`, `flush.messages`).
    pub fn flush_now(partition: &Partition) -> Result<(), String> {
        sync_partition(partition)
    }
}

/// A pool thread: sync queued partitions until stopped with nothing left to do.
fn run(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        let Some(key) = state.queue.pop_front() else {
            if state.stopped {
                return;
            }
            state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let entry = state.entries.get_mut(&key).expect("queued partitions have an entry");
        entry.queued = false;
        entry.syncing = true;
        let waiters = std::mem::take(&mut entry.waiters);
        let partition = entry.partition.clone();
        drop(state);
        let result = sync_partition(&partition);
        let flushed = partition.log().flushed_offset();
        for waiter in waiters {
            let result = result.clone().and_then(|()| {
                if flushed >= waiter.offset {
                    Ok(())
                } else {
                    Err("log was truncated before it could be flushed".to_string())
                }
            });
            let _ = waiter.done.send(result);
        }
        state = shared.lock();
        let entry = state.entries.get_mut(&key).expect("a syncing partition keeps its entry");
        entry.syncing = false;
        if entry.waiters.is_empty() {
            state.entries.remove(&key);
        } else {
            entry.queued = true;
            state.queue.push_back(key);
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
        if let Err(e) = file.sync_data() {
            // Kafka's rule: an fsync that fails takes the log directory offline.
            partition.log().fail_storage(&e);
            return Err(format!("fsync failed: {e}"));
        }
    }
    partition.log().mark_flushed(&work, now_ms());
    Ok(())
}
