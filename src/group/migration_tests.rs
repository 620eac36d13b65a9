//! Online migration through the coordinator's operations, with its records replayed after a
//! restart: a classic group upgraded by a consumer-protocol member, classic members reconciled
//! inside the consumer group (revocation by rejoining, hand-over only once released), and the
//! downgrade when the last consumer-protocol member leaves.

use std::time::Duration;

use bytes::{BufMut, Bytes};

use super::*;
use crate::config::{BrokerConfig, Properties};
use crate::group::consumer::Heartbeat;
use crate::group::embedded;
use crate::group::state::Downgraded;
use crate::group::{GroupConfig, GroupState};
use crate::log::flusher::Flusher;

/// A v1 subscription of `topics`, owning `owned` (partitions of topic "t").
fn subscription(topics: &[&str], owned: &[i32]) -> Bytes {
    let mut out = Vec::new();
    out.put_i16(1);
    out.put_i32(topics.len() as i32);
    for t in topics {
        out.put_i16(t.len() as i16);
        out.put_slice(t.as_bytes());
    }
    out.put_i32(-1);
    out.put_i32(1);
    out.put_i16(1);
    out.put_slice(b"t");
    out.put_i32(owned.len() as i32);
    for p in owned {
        out.put_i32(*p);
    }
    Bytes::from(out)
}

fn sync<'a>(member_id: &'a str, generation: i32, ptype: Option<&'a str>, pname: Option<&'a str>) -> SyncRequest<'a> {
    SyncRequest { member_id, instance_id: None, generation, protocol_type: ptype, protocol_name: pname }
}

fn classic_join(member_id: &str, owned: &[i32]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout: Duration::from_secs(10),
        rebalance_timeout: Duration::from_secs(30),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), subscription(&["t"], owned))],
        require_known_member_id: true,
        new_member_id: String::new(),
    }
}

fn consumer_join(id: &str) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned: Some(vec![]),
        ..Default::default()
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    config: BrokerConfig,
    topics: TopicRegistry,
    flusher: Flusher,
    coordinator: GroupCoordinator,
}

impl Setup {
    fn new(policy: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let mut props = Properties::new();
        props.insert("log.dirs".into(), dir.path().display().to_string());
        props.insert("offsets.topic.num.partitions".into(), "1".into());
        props.insert("group.consumer.migration.policy".into(), policy.into());
        let config = BrokerConfig::from_properties(props).unwrap();
        let topics = TopicRegistry::open(&config).unwrap();
        topics.create("t", 4, Properties::new()).unwrap();
        let coordinator = GroupCoordinator::new(GroupConfig::from_broker(&config));
        Setup { _dir: dir, config, topics, flusher: Flusher::start(), coordinator }
    }

    async fn durable(&self, written: Written) {
        self.coordinator.sync_to_disk(&self.flusher, written.unwrap()).await.unwrap();
    }

    /// A classic group "g" at generation 5 whose two members own partitions {0,1} and {2,3}.
    fn classic_group(&self) {
        let member = |id: &str, partitions: Vec<i32>| Downgraded {
            id: id.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: Duration::from_secs(10),
            rebalance_timeout: Duration::from_secs(30),
            protocols: vec![("range".into(), subscription(&["t"], &[]))],
            partitions: vec![("t".into(), partitions)],
        };
        let g = Group::downgraded("g", 5, vec![member("a", vec![0, 1]), member("b", vec![2, 3])], Instant::now(), 0);
        self.coordinator.lock().groups.insert("g".into(), g);
    }

    fn reloaded(&self) -> GroupCoordinator {
        let c = GroupCoordinator::new(GroupConfig::from_broker(&self.config));
        c.load(&self.topics).unwrap();
        c
    }
}

#[tokio::test]
async fn a_consumer_protocol_member_upgrades_a_classic_group_which_downgrades_when_it_leaves() {
    let s = Setup::new("bidirectional");
    s.classic_group();
    let (answer, written) = s.coordinator.consumer_heartbeat(&s.topics, "g", consumer_join("n")).unwrap();
    s.durable(written).await;
    {
        let inner = s.coordinator.lock();
        assert!(!inner.groups.contains_key("g"));
        let g = &inner.consumer["g"];
        // The classic generation, bumped once by the new member's subscription.
        assert_eq!((g.group_epoch, g.assignment_epoch), (6, 6));
        assert_eq!(g.members["a"].member_epoch, 5, "a classic member keeps its generation as its epoch");
        assert!(g.members["a"].classic.is_some() && g.members["n"].classic.is_none());
        // Every partition is still owned by a classic member: the new one waits for them.
        assert_eq!(answer.assignment.map(|a| a.values().map(|s| s.len()).sum::<usize>()), Some(0));
    }
    let reloaded = s.reloaded();
    assert_eq!(reloaded.lock().consumer["g"].members, s.coordinator.lock().consumer["g"].members);

    // a is behind the group epoch: its heartbeat tells it to rejoin; the rejoin owning {0,1}
    // (an eager client would report none) keeps what stays its own and gives the rest up.
    assert_eq!(
        s.coordinator.consumer_group_heartbeat("g", "a", None, 5),
        Some(Err(ResponseError::RebalanceInProgress))
    );
    assert_eq!(s.coordinator.consumer_group_heartbeat("g", "a", None, 4), Some(Err(ResponseError::IllegalGeneration)));
    let (joined, written) = s.coordinator.consumer_group_join(&s.topics, "g", &classic_join("a", &[0, 1])).unwrap();
    s.durable(written).await;
    assert_eq!((joined.error, joined.leader.as_str(), joined.members.len()), (0, "", 0));
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    let synced = s
        .coordinator
        .consumer_group_sync(&s.topics, "g", sync("a", joined.generation, Some("consumer"), Some("range")))
        .unwrap();
    assert_eq!(synced.error, 0);
    let a_holds = embedded::assignment(&synced.assignment).unwrap().partitions;
    assert!(a_holds.iter().all(|(t, ps)| t == "t" && ps.iter().all(|p| [0, 1].contains(p))), "{a_holds:?}");
    // A commit needs the member's generation (its epoch).
    assert_eq!(s.coordinator.consumer_check_commit("g", "a", None, joined.generation, false, 2), Some(Ok(())));
    assert_eq!(
        s.coordinator.consumer_check_commit("g", "a", None, joined.generation + 7, false, 2),
        Some(Err(ResponseError::IllegalGeneration))
    );

    // The only consumer-protocol member leaves: the group is classic again, every member to rejoin.
    let leave = Heartbeat { member_id: "n".into(), member_epoch: -1, ..Default::default() };
    let (_, written) = s.coordinator.consumer_heartbeat(&s.topics, "g", leave).unwrap();
    s.durable(written).await;
    let check = |c: &GroupCoordinator| {
        let inner = c.lock();
        assert!(!inner.consumer.contains_key("g"));
        let g = &inner.groups["g"];
        assert_eq!(g.members.keys().collect::<Vec<_>>(), vec!["a", "b"]);
        assert_eq!((g.protocol.as_deref(), g.protocol_type.as_deref()), (Some("range"), Some("consumer")));
        g.generation
    };
    let generation = check(&s.coordinator);
    assert_eq!(s.coordinator.lock().groups["g"].state, GroupState::PreparingRebalance);
    assert_eq!(check(&s.reloaded()), generation, "the downgrade survives a restart");
}

#[tokio::test]
async fn the_policy_refuses_the_upgrade_and_the_downgrade() {
    let s = Setup::new("disabled");
    s.classic_group();
    let refused = s.coordinator.consumer_heartbeat(&s.topics, "g", consumer_join("n")).unwrap_err();
    assert_eq!(refused.0, ResponseError::GroupIdNotFound);
    assert!(refused.1.contains("online upgrade is disabled"), "{}", refused.1);
    assert!(s.coordinator.lock().groups.contains_key("g"));

    // A classic member still joins a consumer group (the policy governs conversions only), and
    // the group stays a consumer group when the consumer-protocol member leaves.
    let s = Setup::new("upgrade");
    let (_, written) = s.coordinator.consumer_heartbeat(&s.topics, "g", consumer_join("n")).unwrap();
    s.durable(written).await;
    let (joined, written) = s.coordinator.consumer_group_join(&s.topics, "g", &classic_join("", &[])).unwrap();
    assert_eq!(joined.error, ResponseError::MemberIdRequired.code());
    s.durable(written).await;
    let (joined, written) =
        s.coordinator.consumer_group_join(&s.topics, "g", &classic_join(&joined.member_id, &[])).unwrap();
    assert_eq!(joined.error, 0);
    s.durable(written).await;
    let (results, written) = s.coordinator.consumer_group_leave(&s.topics, "g", vec![("n".into(), None)]).unwrap();
    s.durable(written).await;
    assert_eq!(results[0].2, 0);
    let inner = s.coordinator.lock();
    assert!(inner.consumer["g"].all_classic() && !inner.groups.contains_key("g"));
}

#[tokio::test]
async fn a_classic_member_revokes_by_rejoining_before_its_partition_moves() {
    let s = Setup::new("bidirectional");
    s.classic_group();
    let (_, written) = s.coordinator.consumer_heartbeat(&s.topics, "g", consumer_join("n")).unwrap();
    s.durable(written).await;
    let parts = |a: &crate::group::consumer::Assignment| a.values().flatten().copied().collect::<Vec<i32>>();
    // The uniform assignor moves one partition of a classic member (x) to n.
    let (x, owned, taken) = {
        let inner = s.coordinator.lock();
        let g = &inner.consumer["g"];
        let x = ["a", "b"].into_iter().find(|x| parts(&g.target[*x]).len() == 1).expect("one gave a partition up");
        let owned = parts(&g.members[x].assigned);
        let taken = owned.iter().copied().find(|p| !parts(&g.target[x]).contains(p)).unwrap();
        assert!(!parts(&g.members["n"].assigned).contains(&taken), "not handed over while x owns it");
        (x.to_string(), owned, taken)
    };
    // x rejoins still owning both: it stays at its epoch, revoking, and syncs only what it keeps.
    let (joined, written) = s.coordinator.consumer_group_join(&s.topics, "g", &classic_join(&x, &owned)).unwrap();
    s.durable(written).await;
    assert_eq!(joined.generation, 5, "revoking at its old epoch");
    let synced = s.coordinator.consumer_group_sync(&s.topics, "g", sync(&x, 5, None, None)).unwrap();
    let kept: Vec<i32> = embedded::assignment(&synced.assignment).unwrap().partitions.concat_partitions();
    assert_eq!(kept.len(), 1);
    assert!(!kept.contains(&taken));
    assert_eq!(s.coordinator.consumer_group_heartbeat("g", &x, None, 5), Some(Err(ResponseError::RebalanceInProgress)));
    let n_hb = |epoch: i32| Heartbeat { member_id: "n".into(), member_epoch: epoch, ..Default::default() };
    let (answer, _) = s.coordinator.consumer_heartbeat(&s.topics, "g", n_hb(6)).unwrap();
    assert!(answer.assignment.is_none_or(|a| !parts(&a).contains(&taken)));
    // Rejoining without it: x moves to the group epoch, and n gets the partition.
    let (joined, written) = s.coordinator.consumer_group_join(&s.topics, "g", &classic_join(&x, &kept)).unwrap();
    s.durable(written).await;
    assert_eq!(joined.generation, 6);
    let (answer, _) = s.coordinator.consumer_heartbeat(&s.topics, "g", n_hb(6)).unwrap();
    assert!(parts(&answer.assignment.expect("n's assignment changed")).contains(&taken));
}

/// The partitions of "t" in an embedded assignment.
trait ConcatPartitions {
    fn concat_partitions(&self) -> Vec<i32>;
}

impl ConcatPartitions for embedded::TopicPartitions {
    fn concat_partitions(&self) -> Vec<i32> {
        self.iter().flat_map(|(_, ps)| ps.iter().copied()).collect()
    }
}

#[tokio::test]
async fn a_classic_static_member_taking_over_the_last_consumer_protocol_member_downgrades_the_group() {
    let s = Setup::new("bidirectional");
    let static_join = Heartbeat { instance_id: Some("i1".into()), ..consumer_join("n") };
    let (_, written) = s.coordinator.consumer_heartbeat(&s.topics, "g", static_join).unwrap();
    s.durable(written).await;
    let (joined, written) = s.coordinator.consumer_group_join(&s.topics, "g", &classic_join("", &[])).unwrap();
    s.durable(written).await;
    let (joined, written) =
        s.coordinator.consumer_group_join(&s.topics, "g", &classic_join(&joined.member_id, &[])).unwrap();
    s.durable(written).await;
    assert_eq!(joined.error, 0);
    assert!(s.coordinator.lock().consumer.contains_key("g"), "n still uses the consumer protocol");
    let replacing = JoinRequest { instance_id: Some("i1".into()), ..classic_join("", &[]) };
    let (joined, written) = s.coordinator.consumer_group_join(&s.topics, "g", &replacing).unwrap();
    s.durable(written).await;
    assert_eq!(joined.error, 0);
    let inner = s.coordinator.lock();
    assert!(!inner.consumer.contains_key("g"));
    let g = &inner.groups["g"];
    assert_eq!(g.members.len(), 2);
    assert!(!g.members.contains_key("n") && g.members.contains_key(&joined.member_id));
    assert_eq!(g.instances.get("i1"), Some(&joined.member_id));
}
