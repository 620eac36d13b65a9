//! Unit tests of dynamic voters in the Raft core (`core_voters.rs`); the simulation
//! (`core_sim.rs`) adds and removes voters under faults.

use super::*;
use crate::raft::core_voters::ChangeRefusal;
use crate::raft::entries::SIM_VOTERS;

fn config(id: NodeId, voters: &[NodeId]) -> Config {
    super::tests::config(id, voters, 8)
}

/// The simulation's encoding of a voter set as a value.
fn voters_value(voters: &[NodeId]) -> u64 {
    voters.iter().fold(SIM_VOTERS, |bits, id| bits | (1 << id))
}

fn fetch(fetch_offset: u64, last_fetched_epoch: i32, id: u64) -> Message<u64> {
    Message::Fetch { epoch: 1, fetch_offset, last_fetched_epoch, id }
}

/// Node 1, the only voter, leading epoch 1 with its LeaderChange committed (offset 1).
fn sole_leader() -> RaftCore<u64> {
    let mut l = RaftCore::restore(config(1, &[1]), ElectionState::default(), Entries::new(Vec::new()), None, 0, 7);
    let _ = l.step(Input::Tick { now_ms: 5_000, random: 1 });
    assert!(l.is_leader());
    assert_eq!(l.check_voter_change(&[1, 2]), Err(ChangeRefusal::EpochNotCommitted));
    assert_eq!(l.step(Input::Appended { end: 1 }), vec![Output::HighWatermark(1)]);
    l
}

#[test]
fn a_leader_adds_a_caught_up_observer_one_change_at_a_time_and_counts_it_at_once() {
    let mut l = sole_leader();
    // Node 2 never fetched, then fetched but behind: lagging.
    assert_eq!(l.check_voter_change(&[1, 2]), Err(ChangeRefusal::Lagging(2)));
    let _ = l.step(Input::Propose(42)); // offset 1..2 (42 weighs 1)
    let _ = l.step(Input::Message { from: 2, message: fetch(0, 0, 1) });
    assert_eq!(l.check_voter_change(&[1, 2]), Err(ChangeRefusal::Lagging(2)));
    let _ = l.step(Input::Message { from: 2, message: fetch(2, 1, 2) });
    assert_eq!(l.check_voter_change(&[1, 2, 3]), Err(ChangeRefusal::NotOneVoter));
    // (The set in force may be written down once, when the log holds none.)
    assert_eq!(l.check_voter_change(&[1]), Ok(()));
    assert_eq!(l.check_voter_change(&[]), Err(ChangeRefusal::LastVoter));
    assert_eq!(l.check_voter_change(&[1, 2]), Ok(()));
    let value = voters_value(&[1, 2]);
    let out = l.step(Input::Propose(value));
    assert!(matches!(&out[..], [Output::Append { start: 2, .. }]), "{out:?}");
    assert_eq!(l.voters(), &[1, 2]);
    // Pending until committed, now by both voters: this node's durable end is not enough.
    assert_eq!(l.check_voter_change(&[1]), Err(ChangeRefusal::ChangePending));
    assert_eq!(l.step(Input::Propose(voters_value(&[1]))), vec![Output::Refused(voters_value(&[1]))]);
    let end = l.log().end();
    // (Voter 2 holds offset 1, which commits now; the change itself waits for it.)
    assert_eq!(l.step(Input::Appended { end }), vec![Output::HighWatermark(2)]);
    assert_eq!(l.check_voter_change(&[1]), Err(ChangeRefusal::ChangePending));
    let _ = l.step(Input::Message { from: 2, message: fetch(end, 1, 3) });
    assert_eq!(l.high_watermark(), end);
    assert_eq!(l.check_voter_change(&[1]), Ok(()));
    assert_eq!(l.check_voter_change(&[1, 2]), Err(ChangeRefusal::NoChange));
}

#[test]
fn a_leader_that_removed_itself_leads_until_the_removal_commits_then_resigns() {
    let mut l = sole_leader();
    let _ = l.step(Input::Message { from: 2, message: fetch(1, 1, 1) });
    let _ = l.step(Input::Propose(voters_value(&[1, 2])));
    let end = l.log().end();
    let _ = l.step(Input::Appended { end });
    let _ = l.step(Input::Message { from: 2, message: fetch(end, 1, 2) });
    assert_eq!(l.high_watermark(), end);
    // Remove itself: the set is {2}, whose fetch alone commits.
    let _ = l.step(Input::Propose(voters_value(&[2])));
    assert!(l.is_leader() && !l.am_voter());
    let end = l.log().end();
    assert!(l.step(Input::Appended { end }).is_empty(), "its own durable end no longer counts");
    let out = l.step(Input::Message { from: 2, message: fetch(end, 1, 3) });
    assert!(out.contains(&Output::HighWatermark(end)), "{out:?}");
    assert!(out.iter().any(|o| matches!(o, Output::Send { to: 2, message: Message::EndQuorumEpoch { epoch: 1 } })));
    assert_eq!(l.role(), &Role::Resigned);
    // As an observer it never campaigns: after the timeout it asks voter 2 who leads.
    let out = l.step(Input::Tick { now_ms: 60_000, random: 3 });
    assert!(matches!(&out[..], [Output::Send { to: 2, message: Message::Fetch { .. } }]), "{out:?}");
    assert_eq!(l.election_state().epoch, 1);
}

#[test]
fn an_observer_finds_the_leader_through_any_voter_and_follows_it() {
    let mut o: RaftCore<u64> =
        RaftCore::restore(config(4, &[1, 2, 3]), ElectionState::default(), Entries::new(Vec::new()), None, 0, 9);
    assert!(!o.am_voter());
    let out = o.step(Input::Tick { now_ms: 5_000, random: 1 });
    let (to, id) = match &out[..] {
        [Output::Send { to, message: Message::Fetch { epoch: 0, fetch_offset: 0, id, .. } }] => (*to, *id),
        _ => panic!("{out:?}"),
    };
    assert!([1, 2, 3].contains(&to));
    let answer = Message::FetchResponse { epoch: 3, leader: Some(2), result: FetchResult::NotLeader, id };
    let out = o.step(Input::Message { from: to, message: answer });
    assert_eq!(o.role(), &Role::Follower { leader: 2 });
    assert!(out.iter().any(|m| matches!(m, Output::Send { to: 2, message: Message::Fetch { epoch: 3, .. } })));
    // A vote asked of it is granted (it may be a voter it has not heard of yet); it never asks.
    let vote = Message::Vote { epoch: 4, pre_vote: false, last_epoch: 3, end_offset: 10 };
    let out = o.step(Input::Message { from: 1, message: vote });
    assert!(out.iter().any(|m| matches!(m, Output::Send { message: Message::VoteResponse { granted: true, .. }, .. })));
    let out = o.step(Input::Tick { now_ms: 60_000, random: 1 });
    assert!(!out.iter().any(|m| matches!(m, Output::Send { message: Message::Vote { .. }, .. })), "{out:?}");
}
