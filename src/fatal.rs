//! What the process does when one of its parts fails for good: it halts, as Kafka's fatal fault
//! handler does (`ProcessTerminatingFaultHandler`: "Encountered fatal fault: ...", then
//! `Exit.halt(1)`), so that no live broker or controller ever runs with a dead part (a Raft
//! voter, a fetcher, the flusher, a coordinator) that clients and peers would keep waiting on.
//!
//! Owns: the panic hook of the `ketch` binary (`install`), the client scope (`client_scope`),
//! and `halt`, for the loops that end on an error nothing can repair.
//!
//! Invariants (once `install` ran; without it, as in tests, `halt` panics instead of exiting):
//! * A panic outside a client scope, in any thread or task, halts the process with exit code 1
//!   after one ERROR line naming the thread and the panic (and the default hook's message).
//! * A panic inside a client scope (the work a client connection started: reading its frames,
//!   handling its requests) ends that connection only: bad input never stops the broker. The
//!   locks such a panic poisons are recovered where the data they guard stays consistent (maps
//!   and caches written in one step), except a partition's log (`log::Partition::log`), whose
//!   poisoning halts: a panic in the middle of an append may leave its segment and indexes out of
//!   step, which only the recovery of the next start repairs.

use std::future::Future;

tokio::task_local! {
    /// Set while a client connection's work is polled.
    static CLIENT: ();
}

/// Runs `work` (a client connection's, or a request's it spawned: task-local scopes do not pass
/// to spawned tasks) so that a panic in it ends only that work.
pub fn client_scope<F: Future>(work: F) -> impl Future<Output = F::Output> {
    CLIENT.scope((), work)
}

/// Whether the current code runs inside a client scope.
pub fn in_client_scope() -> bool {
    CLIENT.try_with(|_| ()).is_ok()
}

/// Whether `install` ran: the process is the `ketch` binary, which `halt` may stop.
static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Installs the panic hook that halts the process on a panic outside a client scope (after the
/// default hook printed the panic and its backtrace). For the binary only: a test harness keeps
/// its own hook.
pub fn install() {
    INSTALLED.store(true, std::sync::atomic::Ordering::Release);
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        if in_client_scope() {
            return;
        }
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        halt(&format!("a panic in thread '{name}': {info}"));
    }));
}

/// Logs `what` as a fatal fault and halts the process with exit code 1, running no destructor
/// and no shutdown (as Kafka's `Exit.halt`): what is durable stays durable, recovery at the next
/// start handles the rest. In a process that did not `install` (a library user, a test) it
/// panics instead: the part that failed stops, and so does a test that did not expect it.
pub fn halt(what: &str) -> ! {
    tracing::error!("Encountered fatal fault: {what}; halting the process");
    if !INSTALLED.load(std::sync::atomic::Ordering::Acquire) {
        panic!("fatal fault: {what}");
    }
    eprintln!("ketch: encountered fatal fault: {what}; halting the process");
    std::process::exit(1)
}
