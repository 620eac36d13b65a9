//! Heartbeat scenarios on one group: joins, revocation before hand-over, leaves, session
//! expiry, static members, and replay of the records rebuilding the same group.

use super::*;

fn topics() -> TopicView {
    TopicView::from([("t".to_string(), TopicInfo { id: Uuid::from_u128(1), partitions: 4 })])
}

fn settings() -> Settings {
    Settings {
        upgrade: true,
        downgrade: true,
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5000,
        max_size: 3,
        assignors: vec!["uniform".into(), "range".into()],
    }
}

fn join(id: &str) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 300_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(vec![]),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn beat(id: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned.iter().map(|(t, ps)| (*t, ps.iter().copied().collect())).collect()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(|s| s.len()).sum()
}

fn replayed(g: &ConsumerGroup, log: &[Rec]) {
    let mut r = ConsumerGroup::new(&g.id);
    for (k, v) in log {
        let key = records::ConsumerKey::decode(k).unwrap();
        let value = v.as_deref().map(|v| records::ConsumerValue::decode(key.kind, key.member.as_deref(), v).unwrap());
        r.apply(&key, value);
    }
    assert_eq!(
        (r.group_epoch, r.assignment_epoch, r.metadata_hash),
        (g.group_epoch, g.assignment_epoch, g.metadata_hash)
    );
    assert_eq!(r.members, g.members);
    assert_eq!(r.target, g.target);
}

#[test]
fn partitions_move_only_after_revocation_and_replay_matches() {
    let (t, s, now) = (topics(), settings(), Instant::now());
    let mut g = ConsumerGroup::new("g");
    let mut log = Vec::new();
    let a1 = g.heartbeat(&join("a"), &t, &s, now, &mut log).unwrap();
    assert_eq!((a1.member_epoch, count(a1.assignment.as_ref().unwrap())), (1, 4));
    assert_eq!(g.state(), "Stable");
    // b joins: epoch 2, the target splits 2/2, but b gets nothing until a revokes.
    let b1 = g.heartbeat(&join("b"), &t, &s, now, &mut log).unwrap();
    assert_eq!(b1.member_epoch, 2);
    assert_eq!(count(b1.assignment.as_ref().unwrap()), 0, "a still owns every partition");
    assert_eq!(g.state(), "Reconciling");
    let a_owned = a1.assignment.clone().unwrap();
    let a2 = g.heartbeat(&beat("a", 1, &a_owned), &t, &s, now, &mut log).unwrap();
    assert_eq!(a2.member_epoch, 1, "a stays at epoch 1 while it revokes");
    let a_kept = a2.assignment.clone().unwrap();
    assert_eq!(count(&a_kept), 2);
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    // b heartbeats: the partitions are not released yet.
    let b2 = g.heartbeat(&beat("b", 2, &Assignment::new()), &t, &s, now, &mut log).unwrap();
    assert_eq!(b2.assignment, None);
    // a acknowledges the revocation; then b gets the other two.
    let a3 = g.heartbeat(&beat("a", 1, &a_kept), &t, &s, now, &mut log).unwrap();
    assert_eq!(a3.member_epoch, 2);
    let b3 = g.heartbeat(&beat("b", 2, &Assignment::new()), &t, &s, now, &mut log).unwrap();
    let b_owned = b3.assignment.clone().unwrap();
    assert_eq!(count(&b_owned), 2);
    assert!(b_owned[&Uuid::from_u128(1)].is_disjoint(&a_kept[&Uuid::from_u128(1)]));
    assert_eq!(g.state(), "Stable");
    replayed(&g, &log);
    // Stale epochs are fenced; unknown members refused.
    let err = g.heartbeat(&beat("b", 7, &b_owned), &t, &s, now, &mut log).unwrap_err();
    assert_eq!(err.0, ResponseError::FencedMemberEpoch);
    let err = g.heartbeat(&beat("zz", 2, &Assignment::new()), &t, &s, now, &mut log).unwrap_err();
    assert_eq!(err.0, ResponseError::UnknownMemberId);
    // b's session expires: a gets everything back at the next epoch.
    g.tick(&t, &s, now + Duration::from_secs(46), &mut log);
    assert!(g.members.is_empty(), "both sessions expired");
    assert_eq!(g.state(), "Empty");
    replayed(&g, &log);
}

#[test]
fn leave_bumps_epoch_and_hands_partitions_over() {
    let (t, s, now) = (topics(), settings(), Instant::now());
    let mut g = ConsumerGroup::new("g");
    let mut log = Vec::new();
    g.heartbeat(&join("a"), &t, &s, now, &mut log).unwrap();
    g.heartbeat(&join("b"), &t, &s, now, &mut log).unwrap();
    let before = g.group_epoch;
    let mut leave = beat("a", g.members["a"].member_epoch, &Assignment::new());
    leave.member_epoch = -1;
    let ans = g.heartbeat(&leave, &t, &s, now, &mut log).unwrap();
    assert_eq!(ans.member_epoch, -1);
    assert_eq!(g.group_epoch, before + 1);
    let b = g.heartbeat(&beat("b", g.members["b"].member_epoch, &Assignment::new()), &t, &s, now, &mut log).unwrap();
    assert_eq!(count(b.assignment.as_ref().unwrap()), 4);
    replayed(&g, &log);
}

#[test]
fn static_member_comes_back_with_its_partitions_and_group_size_is_capped() {
    let (t, s, now) = (topics(), settings(), Instant::now());
    let mut g = ConsumerGroup::new("g");
    let mut log = Vec::new();
    let mut j = join("a1");
    j.instance_id = Some("inst".into());
    let first = g.heartbeat(&j, &t, &s, now, &mut log).unwrap();
    let epoch = g.group_epoch;
    // A second instance with the same id while the first is there.
    let mut dup = join("a2");
    dup.instance_id = Some("inst".into());
    assert_eq!(g.heartbeat(&dup, &t, &s, now, &mut log).unwrap_err().0, ResponseError::UnreleasedInstanceId);
    let mut leave = beat("a1", first.member_epoch, &Assignment::new());
    leave.instance_id = Some("inst".into());
    leave.member_epoch = -2;
    assert_eq!(g.heartbeat(&leave, &t, &s, now, &mut log).unwrap().member_epoch, -2);
    let back = g.heartbeat(&dup, &t, &s, now, &mut log).unwrap();
    assert_eq!(back.assignment, first.assignment, "same partitions under the new member id");
    assert_eq!(g.group_epoch, epoch, "no rebalance");
    assert!(!g.members.contains_key("a1"));
    replayed(&g, &log);
    g.heartbeat(&join("b"), &t, &s, now, &mut log).unwrap();
    g.heartbeat(&join("c"), &t, &s, now, &mut log).unwrap();
    assert_eq!(g.heartbeat(&join("d"), &t, &s, now, &mut log).unwrap_err().0, ResponseError::GroupMaxSizeReached);
}

#[test]
fn new_partitions_bump_the_epoch() {
    let (mut t, s, now) = (topics(), settings(), Instant::now());
    let mut g = ConsumerGroup::new("g");
    let mut log = Vec::new();
    g.heartbeat(&join("a"), &t, &s, now, &mut log).unwrap();
    let epoch = g.group_epoch;
    g.tick(&t, &s, now, &mut log);
    assert_eq!(g.group_epoch, epoch, "nothing changed");
    t.get_mut("t").unwrap().partitions = 6;
    g.tick(&t, &s, now + Duration::from_millis(100), &mut log);
    assert_eq!(g.group_epoch, epoch, "the timers look at the metadata every 500 ms");
    g.tick(&t, &s, now + Duration::from_secs(1), &mut log);
    assert_eq!(g.group_epoch, epoch + 1);
    assert_eq!(count(&g.target["a"]), 6);
}

#[test]
fn regex_subscription_matches_whole_names() {
    let (mut t, s, now) = (topics(), settings(), Instant::now());
    t.insert("tx".into(), TopicInfo { id: Uuid::from_u128(2), partitions: 1 });
    t.insert("other".into(), TopicInfo { id: Uuid::from_u128(3), partitions: 1 });
    let mut g = ConsumerGroup::new("g");
    let mut log = Vec::new();
    let mut j = join("a");
    j.subscribed_topic_names = None;
    j.subscribed_topic_regex = Some("t.*".into());
    let a = g.heartbeat(&j, &t, &s, now, &mut log).unwrap();
    assert_eq!(count(a.assignment.as_ref().unwrap()), 5, "t (4) and tx (1), not other");
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_fenced() {
    let (t, s, now) = (topics(), settings(), Instant::now());
    let mut g = ConsumerGroup::new("g");
    let mut log = Vec::new();
    let mut j = join("a");
    j.rebalance_timeout_ms = 5000;
    let a = g.heartbeat(&j, &t, &s, now, &mut log).unwrap();
    g.heartbeat(&join("b"), &t, &s, now, &mut log).unwrap();
    // a is asked to revoke and keeps heartbeating with every partition.
    let owned = a.assignment.unwrap();
    g.heartbeat(&beat("a", 1, &owned), &t, &s, now, &mut log).unwrap();
    assert_eq!(g.members["a"].state, MemberState::UnrevokedPartitions);
    let later = now + Duration::from_secs(4);
    g.heartbeat(&beat("a", 1, &owned), &t, &s, later, &mut log).unwrap();
    g.heartbeat(&beat("b", 2, &Assignment::new()), &t, &s, later, &mut log).unwrap();
    g.tick(&t, &s, later, &mut log);
    assert!(g.members.contains_key("a"), "within the rebalance timeout");
    g.tick(&t, &s, now + Duration::from_secs(6), &mut log);
    assert!(!g.members.contains_key("a"), "fenced after the rebalance timeout");
    let b = g.heartbeat(&beat("b", 2, &Assignment::new()), &t, &s, now + Duration::from_secs(6), &mut log).unwrap();
    assert_eq!(count(b.assignment.as_ref().unwrap()), 4, "b gets every partition once a is gone");
    replayed(&g, &log);
}
