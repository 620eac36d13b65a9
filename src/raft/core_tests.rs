//! Unit tests of the Raft core's elections and replication (hand-written cases; the simulation
//! in `core_sim.rs` covers the rest under faults).

use super::*;

/// A node's configuration with the timeouts the tests and the simulation use.
pub(super) fn config(id: NodeId, voters: &[NodeId], max_fetch_entries: usize) -> Config {
    Config {
        id,
        voters: voters.to_vec(),
        election_timeout_ms: 1000,
        fetch_timeout_ms: 2000,
        election_backoff_max_ms: 1000,
        request_timeout_ms: 300,
        max_fetch_entries,
    }
}

#[test]
fn one_voter_leads_at_once_and_commits_alone() {
    let voters = [1];
    let mut core: RaftCore<u64> =
        RaftCore::restore(config(1, &voters, 8), ElectionState::default(), Entries::new(Vec::new()), None, 0, 7);
    let out = core.step(Input::Tick { now_ms: 5_000, random: 1 });
    assert!(core.is_leader(), "{out:?}");
    assert_eq!(core.election_state(), ElectionState { epoch: 1, voted_for: Some(1), leader: Some(1) });
    let out = core.step(Input::Propose(42));
    assert_eq!(out, vec![Output::Append { start: 1, entries: vec![Entry { epoch: 1, value: Some(42) }] }]);
    assert_eq!(core.step(Input::Appended { end: 2 }), vec![Output::HighWatermark(2)]);
}

#[test]
fn a_follower_truncates_where_the_leader_says_the_logs_diverge() {
    let voters = [1, 2, 3];
    // (Values that are multiples of 3 weigh one record each.)
    let e = |epoch, value| Entry { epoch, value: Some(value) };
    // Node 2 has entries of epoch 2 the leader (epoch 3) never had.
    let state = ElectionState { epoch: 3, voted_for: None, leader: Some(1) };
    let log = Entries::new(vec![e(1, 3), e(2, 6), e(2, 9)]);
    let mut f = RaftCore::restore(config(2, &voters, 8), state, log, None, 0, 1);
    let diverging = FetchResult::Diverging { epoch: 1, end_offset: 1 };
    let message = Message::FetchResponse { epoch: 3, leader: Some(1), result: diverging, id: 1 };
    // (It sends its first fetch on a tick past its request timeout.)
    let _ = f.step(Input::Tick { now_ms: 400, random: 0 });
    let out = f.step(Input::Message { from: 1, message });
    assert_eq!(out[0], Output::Truncate { end: 1 });
    assert!(matches!(
        &out[1],
        Output::Send { to: 1, message: Message::Fetch { fetch_offset: 1, last_fetched_epoch: 1, id: 2, .. } }
    ));
    // A late copy of that answer is not taken again.
    let stale = Message::FetchResponse {
        epoch: 3,
        leader: Some(1),
        result: FetchResult::Diverging { epoch: 0, end_offset: 0 },
        id: 1,
    };
    assert!(f.step(Input::Message { from: 1, message: stale }).is_empty());
    assert_eq!(f.log().entries(), &[e(1, 3)]);
}

#[test]
fn a_follower_that_lost_its_leader_for_a_moment_follows_it_again_when_a_pre_vote_is_refused() {
    // (The fault suite's stall: a voter paused as leader came back in the next epoch as a
    // follower, could not reach the new leader once and campaigned; the others, following a live
    // leader, refuse its pre-votes, so it must go back to fetching from that leader.)
    let voters = [1, 2, 3];
    let state = ElectionState { epoch: 4, voted_for: None, leader: Some(1) };
    let log = Entries::new(vec![Entry { epoch: 3, value: Some(3) }]);
    let mut f = RaftCore::restore(config(2, &voters, 8), state, log, None, 0, 1);
    let _ = f.step(Input::Tick { now_ms: 400, random: 0 });
    let _ = f.step(Input::Unreachable { to: 1 });
    let out = f.step(Input::Tick { now_ms: 3_000, random: 0 });
    assert!(matches!(f.role(), Role::Prospective { .. }), "{out:?}");
    let refused = Message::VoteResponse { epoch: 4, pre_vote: true, granted: false, leader: Some(1) };
    let out = f.step(Input::Message { from: 3, message: refused });
    assert_eq!(f.role(), &Role::Follower { leader: 1 });
    assert!(
        out.iter().any(|o| matches!(o, Output::Send { to: 1, message: Message::Fetch { epoch: 4, .. } })),
        "{out:?}"
    );
    // It refuses pre-votes only while its last contact with the leader is recent: none since
    // it went back, so a campaign for the next epoch is not held up by it.
    let pre_vote = Message::Vote { epoch: 5, pre_vote: true, last_epoch: 3, end_offset: 1 };
    let out = f.step(Input::Message { from: 3, message: pre_vote });
    assert!(
        out.iter().any(|o| matches!(o, Output::Send { to: 3, message: Message::VoteResponse { granted: true, .. } })),
        "{out:?}"
    );
}

#[test]
fn a_leader_repeats_begin_quorum_epoch_to_a_quiet_voter_and_steps_down_for_a_later_epoch() {
    let voters = [1, 2, 3];
    let mut l: RaftCore<u64> =
        RaftCore::restore(config(1, &voters, 8), ElectionState::default(), Entries::new(Vec::new()), None, 0, 7);
    let _ = l.step(Input::Tick { now_ms: 5_000, random: 1 });
    for from in [2, 3] {
        let grant = Message::VoteResponse { epoch: 1, pre_vote: true, granted: true, leader: None };
        let _ = l.step(Input::Message { from, message: grant });
    }
    for from in [2, 3] {
        let grant = Message::VoteResponse { epoch: 1, pre_vote: false, granted: true, leader: None };
        let _ = l.step(Input::Message { from, message: grant });
    }
    assert!(l.is_leader());
    let _ = l.step(Input::Appended { end: 1 });
    // Voter 2 fetches, voter 3 stays quiet: BeginQuorumEpoch again to 3 only.
    let fetch = Message::Fetch { epoch: 1, fetch_offset: 1, last_fetched_epoch: 1, id: 1 };
    let _ = l.step(Input::Message { from: 2, message: fetch.clone() });
    let _ = l.step(Input::Tick { now_ms: 6_000, random: 0 });
    let _ = l.step(Input::Message { from: 2, message: fetch.clone() });
    let out = l.step(Input::Tick { now_ms: 7_100, random: 0 });
    let begins: Vec<NodeId> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send { to, message: Message::BeginQuorumEpoch { .. } } => Some(*to),
            _ => None,
        })
        .collect();
    assert_eq!(begins, vec![3], "{out:?}");
    // 3 moved on to epoch 2 (an election it lost): its answer makes the leader step down.
    let _ = l.step(Input::Message { from: 3, message: Message::BeginQuorumEpochResponse { epoch: 2 } });
    assert!(!l.is_leader());
    assert_eq!(l.election_state().epoch, 2);
}

#[test]
fn a_voter_downloading_the_leaders_snapshot_keeps_the_leader_from_resigning() {
    let voters = [1, 2, 3];
    let mut l: RaftCore<u64> =
        RaftCore::restore(config(1, &voters, 8), ElectionState::default(), Entries::new(Vec::new()), None, 0, 7);
    let _ = l.step(Input::Tick { now_ms: 5_000, random: 1 });
    for pre_vote in [true, false] {
        let grant = Message::VoteResponse { epoch: 1, pre_vote, granted: true, leader: None };
        let _ = l.step(Input::Message { from: 2, message: grant });
    }
    assert!(l.is_leader());
    // Voter 2 only reads the snapshot (FetchSnapshot), voter 3 is silent: 2 and the leader are a
    // majority past the check-quorum horizon (1.5 fetch timeouts, 3 s).
    for now_ms in (5_500..=9_500).step_by(500) {
        let _ = l.step(Input::SnapshotRead { from: 2 });
        let _ = l.step(Input::Tick { now_ms, random: 0 });
    }
    assert!(l.is_leader());
    let _ = l.step(Input::Tick { now_ms: 13_000, random: 0 });
    assert!(!l.is_leader(), "without them it resigns");
}
