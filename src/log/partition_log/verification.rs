//! The partition side of transaction verification (KIP-890): Kafka's
//! `maybeStartTransactionVerification` and `verificationGuard` on the log, under its lock. The
//! state itself is the producer state's (`log::verification`).

use super::PartitionLog;
use crate::log::verification::VerificationGuard;

impl PartitionLog {
    /// Starts (or joins) the verification of `producer_id`'s transactional batch at `epoch`
    /// starting at sequence `seq`: `None` when the batch continues a transaction already open
    /// here at its epoch (nothing to verify), else the guard its append must present.
    pub fn start_txn_verification(
        &mut self,
        producer_id: i64,
        seq: i32,
        epoch: i16,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        if self.has_open_txn(producer_id, epoch) {
            return None;
        }
        Some(self.producers.start_verification(producer_id, seq, epoch, now_ms))
    }

    /// Kafka's `VerificationGuard.verify` at append: whether `guard` is still the guard of
    /// `producer_id`'s verification in progress (no transactional write or marker of the
    /// producer landed since it was created, and it has not expired).
    pub fn txn_verification_holds(&self, producer_id: i64, guard: VerificationGuard) -> bool {
        self.producers.verification(producer_id).is_some_and(|v| v.guard == guard)
    }
}
