//! TxnOffsetCommit's write to `__consumer_offsets` against a real offsets partition (KIP-890
//! part 1, as Kafka 4.1's coordinator runtime does it): the group coordinator starts a
//! verification on the group's offsets partition before asking the transaction coordinator,
//! and the transactional offsets are written only if the transaction is still open there or
//! that verification's guard is still current. A marker landing in between (an abort after a
//! timeout) refuses the write with INVALID_TXN_STATE, so the offsets never become pending and
//! no later marker of the producer can publish them.

use super::*;
use crate::handlers::txn_verify::start_verification;

const PID: i64 = 11;
const GROUP: &str = "g";

struct Fixture {
    _dir: tempfile::TempDir,
    topics: TopicRegistry,
    coordinator: GroupCoordinator,
    partition: Arc<crate::log::Partition>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut props = crate::config::Properties::new();
    props.insert("log.dirs".into(), dir.path().display().to_string());
    props.insert("offsets.topic.num.partitions".into(), "1".into());
    let config = BrokerConfig::from_properties(props).unwrap();
    let topics = TopicRegistry::open(&config).unwrap();
    let coordinator = GroupCoordinator::new(GroupConfig::from_broker(&config));
    let partition = coordinator.group_partition(&topics, GROUP).unwrap();
    Fixture { _dir: dir, topics, coordinator, partition }
}

fn offset(value: i64) -> Vec<((String, i32), OffsetValue)> {
    let v = OffsetValue { offset: value, leader_epoch: 0, metadata: String::new(), commit_timestamp: now_ms() };
    vec![(("t".to_string(), 0), v)]
}

impl Fixture {
    /// What TxnOffsetCommit does before the write: the partition side of the verification (a
    /// fenced epoch is refused; `None` when the transaction is already open here).
    fn verify(&self, epoch: i16) -> Option<crate::log::verification::VerificationGuard> {
        start_verification(&mut self.partition.log(), (PID, epoch, -1), now_ms()).unwrap()
    }

    fn write(
        &self,
        epoch: i16,
        guard: Option<crate::log::verification::VerificationGuard>,
        value: i64,
    ) -> Result<(), ResponseError> {
        self.coordinator.append_txn_offsets(&self.topics, GROUP, (PID, epoch, guard), offset(value)).map(|_| ())
    }

    /// The transaction coordinator's marker on the offsets partition, and its effect on the
    /// pending offsets (what `txn::markers` does).
    fn marker(&self, epoch: i16, commit: bool) {
        self.partition.log().append_marker(PID, epoch, commit, 0, 0, now_ms()).unwrap();
        self.coordinator.complete_txn(PID, self.partition.index, commit);
    }

    fn committed(&self) -> Option<i64> {
        self.coordinator.lock().offsets.get(GROUP).and_then(|o| o.get(&("t".to_string(), 0))).map(|v| v.offset)
    }

    fn pending(&self) -> bool {
        !self.coordinator.pending_txn_partitions(GROUP).is_empty()
    }
}

/// Verified, then the transaction is aborted (its marker written) before the offsets are: the
/// write is refused, nothing is pending, and the producer's next transaction (transaction
/// protocol 1: same epoch) commits only its own offsets.
#[test]
fn a_marker_between_verification_and_write_refuses_the_offsets() {
    let f = fixture();
    let guard = f.verify(0);
    assert!(guard.is_some(), "no transaction is open in the offsets partition yet");
    f.marker(0, false);
    let end = f.partition.log().log_end_offset();
    assert_eq!(f.write(0, guard, 41), Err(ResponseError::InvalidTxnState));
    assert_eq!(f.partition.log().log_end_offset(), end, "nothing written after the marker");
    assert!(!f.pending() && !f.partition.log().has_open_txn(PID, 0));
    // The next transaction of the producer (same epoch under protocol 1).
    let guard = f.verify(0);
    assert_eq!(f.write(0, guard, 43), Ok(()));
    assert!(f.pending());
    f.marker(0, true);
    assert_eq!(f.committed(), Some(43), "the refused offsets are never published");
}

/// Offsets written while the transaction is open need no new verification; once its marker
/// is in, a write that found the transaction open is refused too (transaction protocol 2's
/// marker at the bumped epoch as well).
#[test]
fn a_write_that_found_the_transaction_open_is_refused_after_its_marker() {
    for marker_epoch in [0, 1] {
        let f = fixture();
        let guard = f.verify(0);
        assert_eq!(f.write(0, guard, 41), Ok(()));
        assert_eq!(f.verify(0), None, "the transaction is open in the offsets partition");
        f.marker(marker_epoch, false);
        assert_eq!(f.write(0, None, 42), Err(ResponseError::InvalidTxnState), "marker epoch {marker_epoch}");
        assert!(!f.pending());
        assert_eq!(f.committed(), None);
    }
}

/// The verification's guard is what counts, not only an open transaction: a write presenting
/// no guard when none is open (never verified) is refused.
#[test]
fn an_unverified_write_is_refused() {
    let f = fixture();
    assert_eq!(f.write(0, None, 41), Err(ResponseError::InvalidTxnState));
    assert!(!f.pending());
}
