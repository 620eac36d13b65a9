//! Transaction verification state of one partition's producers (KIP-890 part 1), modelled on
//! Kafka's `VerificationStateEntry` and `VerificationGuard`.
//!
//! Owns: per producer id, at most one verification in progress: a guard (a token unique in the
//! process) created when the partition leader starts verifying a transactional batch that would
//! open a transaction here, the time it was created, and the lowest sequence (and its epoch) of
//! the batches that waited on it. The append of a verified batch must present the guard that is
//! still current: any transactional write of the producer (its data batch or a marker) clears
//! the entry, so a marker landing between the coordinator's answer and the append (an abort after
//! a timeout, say) makes that append fail, and a later verification gets a new guard (no ABA).
//! A batch whose first sequence is above the entry's lowest sequence is out of order: a lower
//! batch that failed verification must be written first.
//! Not on disk: like Kafka, entries live in memory only; they end with the producer's next
//! transactional write or expire after `producer.id.expiration.ms`.
//! Invariants: guards are never reused; the lowest sequence belongs to the entry's epoch.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// Kafka's `VerificationGuard`: identifies one verification. Two guards are equal only if they
/// come from the same `VerificationGuard::new` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerificationGuard(NonZeroU64);

impl VerificationGuard {
    fn new() -> VerificationGuard {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let value = NEXT.fetch_add(1, Ordering::Relaxed);
        VerificationGuard(NonZeroU64::new(value).expect("the counter starts at 1 and does not wrap"))
    }
}

/// Kafka's `VerificationStateEntry`: a verification in progress for one producer.
#[derive(Debug, Clone)]
pub struct VerificationEntry {
    /// When the entry was created (broker clock, ms): it expires `producer.id.expiration.ms` later.
    pub created_ms: i64,
    pub guard: VerificationGuard,
    /// The lowest first sequence of the batches verified under this entry, at `epoch`.
    pub lowest_seq: i32,
    pub epoch: i16,
}

impl VerificationEntry {
    pub fn new(now_ms: i64, seq: i32, epoch: i16) -> VerificationEntry {
        VerificationEntry { created_ms: now_ms, guard: VerificationGuard::new(), lowest_seq: seq, epoch }
    }

    /// Kafka's `maybeUpdateLowestSequenceAndEpoch`: a lower sequence at the same epoch, or any
    /// sequence at a higher epoch (sequences restart with an epoch), becomes the lowest.
    pub fn note_batch(&mut self, seq: i32, epoch: i16) {
        if epoch == self.epoch && seq < self.lowest_seq {
            self.lowest_seq = seq;
        }
        if epoch > self.epoch {
            self.epoch = epoch;
            self.lowest_seq = seq;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_are_unique() {
        let (a, b) = (VerificationGuard::new(), VerificationGuard::new());
        assert_ne!(a, b);
        let copy = a;
        assert_eq!(a, copy);
    }

    #[test]
    fn lowest_sequence_follows_lower_sequences_and_newer_epochs() {
        let mut e = VerificationEntry::new(100, 5, 2);
        e.note_batch(7, 2);
        assert_eq!((e.lowest_seq, e.epoch), (5, 2), "a higher sequence does not move it");
        e.note_batch(3, 2);
        assert_eq!((e.lowest_seq, e.epoch), (3, 2), "a lower sequence does");
        e.note_batch(0, 1);
        assert_eq!((e.lowest_seq, e.epoch), (3, 2), "an older epoch is ignored");
        e.note_batch(9, 3);
        assert_eq!((e.lowest_seq, e.epoch), (9, 3), "a newer epoch restarts it");
    }
}
