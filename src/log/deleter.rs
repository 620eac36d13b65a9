//! Delayed removal of deleted segments' files (`file.delete.delay.ms`), as Kafka does it: the
//! files are renamed `<name>.deleted` at once and removed later by one background thread.
//!
//! Owns: the queue of files waiting for removal. Nothing on disk of its own: a `.deleted` file
//! left by a crash or a stop before it was due is removed when its partition is next opened
//! (`PartitionLog::open`).
//! Invariants: a file is removed no earlier than its delay after it was queued; the thread,
//! started on first use, sleeps until the earliest due time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

static DUE: Mutex<BinaryHeap<Reverse<(Instant, PathBuf)>>> = Mutex::new(BinaryHeap::new());
static CHANGED: Condvar = Condvar::new();
static START: Once = Once::new();

fn due() -> MutexGuard<'static, BinaryHeap<Reverse<(Instant, PathBuf)>>> {
    DUE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes `files` once `delay` has passed.
pub fn remove_later(files: Vec<PathBuf>, delay: Duration) {
    START.call_once(|| {
        std::thread::Builder::new().name("ketch-file-deleter".into()).spawn(run).expect("spawn file deleter");
    });
    let at = Instant::now() + delay;
    due().extend(files.into_iter().map(|path| Reverse((at, path))));
    CHANGED.notify_one();
}

fn run() {
    let mut queue = due();
    loop {
        let now = Instant::now();
        match queue.peek() {
            None => queue = CHANGED.wait(queue).unwrap_or_else(|e| e.into_inner()),
            Some(Reverse((at, _))) if *at > now => {
                let wait = *at - now;
                queue = CHANGED.wait_timeout(queue, wait).unwrap_or_else(|e| e.into_inner()).0;
            }
            Some(_) => {
                let Reverse((_, path)) = queue.pop().expect("peeked");
                drop(queue);
                match std::fs::remove_file(&path) {
                    // The partition directory went with its topic meanwhile.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot remove a deleted segment file")
                    }
                    Ok(()) => tracing::debug!(path = %path.display(), "removed deleted segment file"),
                }
                queue = due();
            }
        }
    }
}
