//! The partition side of transaction verification (KIP-890): Kafka's
//! `maybeStartTransactionVerification` and `verificationGuard` on the log, under its lock. The
//! state itself is the producer state's (`log::verification`). Also the duplicate lookup that
//! comes before the transaction checks at append.

use super::PartitionLog;
use crate::log::batch;
use crate::log::producer_state::Check;
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

    /// Whether `records` (a client's batch, with a producer id) is a retry of one of its producer's
    /// batches still cached here at the same epoch and sequences: Kafka's duplicate lookup,
    /// which `analyzeAndValidateProducerState` does before the transaction checks (the append
    /// then answers it with the original batch's offsets).
    pub fn is_duplicate(&self, records: &[u8]) -> bool {
        if records.len() < batch::HEADER_BYTES {
            return false;
        }
        let producer = batch::Header::new(records).producer_batch().filter(|p| p.first_seq >= 0);
        producer.is_some_and(|p| matches!(self.producers.check(&p), Ok(Check::Duplicate { .. })))
    }
}
