//! Broker sessions: registration, heartbeats, fencing, expiry and controlled shutdown, every
//! record applied to an image.

use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::BrokerId;
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::controller::partition_change::NO_LEADER;
use crate::controller::test_cluster::{config, Cluster, METADATA_VERSION};
use crate::metadata::records::FeatureLevelRecord;

const CLUSTER: &str = "ketch-cluster";

fn registration(id: i32, incarnation: u128) -> BrokerRegistrationRequest {
    let listener = Listener::default()
        .with_name(StrBytes::from_static_str("PLAINTEXT"))
        .with_host(StrBytes::from_string(format!("b{id}")))
        .with_port(9092)
        .with_security_protocol(0);
    let feature = Feature::default()
        .with_name(StrBytes::from_static_str("metadata.version"))
        .with_min_supported_version(7)
        .with_max_supported_version(METADATA_VERSION);
    BrokerRegistrationRequest::default()
        .with_broker_id(BrokerId(id))
        .with_cluster_id(StrBytes::from_static_str(CLUSTER))
        .with_incarnation_id(Uuid::from_u128(incarnation))
        .with_listeners(vec![listener])
        .with_features(vec![feature])
        .with_rack(Some(StrBytes::from_string(format!("rack{id}"))))
        .with_log_dirs(vec![Uuid::from_u128(1000 * id as u128 + incarnation)])
}

fn beat(id: i32, epoch: i64, offset: i64) -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest::default()
        .with_broker_id(BrokerId(id))
        .with_broker_epoch(epoch)
        .with_current_metadata_offset(offset)
}

struct Env {
    c: Cluster,
    s: BrokerSessions,
    /// The connection each broker's heartbeats come on (default: its id).
    connections: BTreeMap<i32, u64>,
}

impl Env {
    fn new() -> Env {
        Env { c: Cluster::new(), s: BrokerSessions::new(config()), connections: BTreeMap::new() }
    }

    fn register(&mut self, request: &BrokerRegistrationRequest, now_ms: i64) -> Result<i64, Refusal> {
        let (records, epoch) = self.s.register(&self.c.image, CLUSTER, request, self.c.next_offset, now_ms)?;
        assert!(matches!(&records[0], MetadataRecord::RegisterBroker(r) if r.broker_epoch == epoch));
        self.c.apply(&records);
        Ok(epoch)
    }

    /// A heartbeat at the log end offset (the broker caught up).
    fn beat(&mut self, id: i32, now_ms: i64) -> Result<HeartbeatAnswer, ResponseError> {
        let offset = self.c.next_offset - 1;
        self.beat_at(id, offset, false, now_ms)
    }

    fn beat_at(
        &mut self,
        id: i32,
        offset: i64,
        shut_down: bool,
        now_ms: i64,
    ) -> Result<HeartbeatAnswer, ResponseError> {
        let epoch = self.c.image.brokers.get(&id).map_or(-1, |b| b.epoch);
        let request = beat(id, epoch, offset).with_want_shut_down(shut_down);
        self.send(&request, now_ms)
    }

    fn send(&mut self, request: &BrokerHeartbeatRequest, now_ms: i64) -> Result<HeartbeatAnswer, ResponseError> {
        let id = request.broker_id.0;
        let connection = self.connections.get(&id).copied().unwrap_or(id as u64);
        let (records, answer) =
            self.s.heartbeat(&self.c.image, request, Some(connection), self.c.next_offset, now_ms)?;
        self.c.apply(&records);
        Ok(answer)
    }

    fn expire(&mut self, now_ms: i64) -> usize {
        let records = self.s.expire(&self.c.image, now_ms);
        self.c.apply(&records);
        records.len()
    }

    /// Brokers 1..=3 registered and unfenced at time 0.
    fn three_unfenced() -> Env {
        let mut env = Env::new();
        for id in 1..=3 {
            env.register(&registration(id, 1), 0).unwrap();
        }
        for id in 1..=3 {
            let answer = env.beat(id, 0).unwrap();
            assert!(!answer.is_fenced && answer.is_caught_up);
        }
        env
    }

    fn fenced(&self, id: i32) -> bool {
        self.c.image.brokers[&id].fenced
    }
}

#[test]
fn a_broker_registers_fenced_and_is_unfenced_once_caught_up() {
    let mut env = Env::new();
    let epoch = env.register(&registration(1, 1), 0).unwrap();
    assert_eq!(epoch, 1, "the offset of its RegisterBrokerRecord (the feature level is at 0)");
    let b = env.c.image.brokers[&1].clone();
    assert!(b.fenced && !b.in_controlled_shutdown);
    assert_eq!((b.epoch, b.incarnation_id, b.rack.as_deref()), (1, Uuid::from_u128(1), Some("rack1")));
    assert_eq!(env.c.image.endpoint_addr(1, "PLAINTEXT").as_deref(), Some("b1:9092"));
    assert_eq!(b.log_dirs, vec![Uuid::from_u128(1001)]);

    let answer = env.beat_at(1, 0, false, 10).unwrap();
    let behind = HeartbeatAnswer {
        is_caught_up: false,
        is_fenced: true,
        in_controlled_shutdown: false,
        should_shut_down: false,
    };
    assert_eq!(answer, behind, "not yet at its registration record");
    assert!(env.fenced(1));
    let answer = env.beat_at(1, 1, false, 20).unwrap();
    assert_eq!(answer, HeartbeatAnswer { is_caught_up: true, is_fenced: false, ..behind });
    assert!(!env.fenced(1));
    let before = env.c.next_offset;
    assert_eq!(env.beat(1, 30).unwrap(), HeartbeatAnswer { is_caught_up: true, is_fenced: false, ..behind });
    assert_eq!(env.c.next_offset, before, "a steady heartbeat writes nothing");

    // A broker asking to stay fenced stays fenced; an unfenced one asking is fenced.
    env.register(&registration(2, 1), 0).unwrap();
    let request = beat(2, env.c.image.brokers[&2].epoch, 100).with_want_fence(true);
    assert!(env.send(&request, 40).unwrap().is_fenced);
    assert!(env.fenced(2));
    let request = beat(1, 1, 100).with_want_fence(true);
    assert!(env.send(&request, 50).unwrap().is_fenced);
    assert!(env.fenced(1));
}

#[test]
fn registrations_are_checked_as_kafka_checks_them() {
    let mut env = Env::new();
    let wrong = registration(1, 1).with_cluster_id(StrBytes::from_static_str("other"));
    assert_eq!(
        env.register(&wrong, 0).unwrap_err(),
        (ResponseError::InconsistentClusterId, format!("Expected cluster ID {CLUSTER}, but got cluster ID other"))
    );
    let old = registration(1, 1).with_features(vec![Feature::default()
        .with_name(StrBytes::from_static_str("metadata.version"))
        .with_min_supported_version(7)
        .with_max_supported_version(20)]);
    let (code, message) = env.register(&old, 0).unwrap_err();
    assert_eq!(code, ResponseError::UnsupportedVersion);
    assert_eq!(
        message,
        "Unable to register because the broker does not support finalized version 27 of metadata.version. The \
         broker wants a version between 7 and 20, inclusive."
    );
    let silent = registration(1, 1).with_features(vec![]);
    assert_eq!(env.register(&silent, 0).unwrap_err().0, ResponseError::UnsupportedVersion, "assumed at level 1");
    // A finalized feature the broker does not name must be supported at level 0.
    let level = FeatureLevelRecord { name: "transaction.version".into(), feature_level: 2, ..Default::default() };
    env.c.apply(&[MetadataRecord::FeatureLevel(level)]);
    let (code, message) = env.register(&registration(1, 1), 0).unwrap_err();
    assert_eq!(
        (code, message.contains("finalized version 2 of transaction.version")),
        (ResponseError::UnsupportedVersion, true)
    );
    let mut knows = registration(1, 1);
    knows.features.push(
        Feature::default()
            .with_name(StrBytes::from_static_str("transaction.version"))
            .with_min_supported_version(0)
            .with_max_supported_version(2),
    );
    env.register(&knows, 0).unwrap();
    assert!(env.c.image.brokers.contains_key(&1));

    let zk = registration(2, 1).with_is_migrating_zk_broker(true);
    assert_eq!(env.register(&zk, 0).unwrap_err().0, ResponseError::BrokerIdNotRegistered);
    let mut knows2 = registration(2, 1);
    knows2.features = knows.features.clone();
    let dirs = |dirs: Vec<Uuid>| knows2.clone().with_log_dirs(dirs);
    let refusal = |env: &mut Env, r: &BrokerRegistrationRequest| env.register(r, 0).unwrap_err();
    assert_eq!(
        refusal(&mut env, &dirs(vec![])),
        (ResponseError::InvalidRegistration, "No directories specified in request".into())
    );
    assert_eq!(refusal(&mut env, &dirs(vec![Uuid::from_u128(99)])).1, "Reserved directory ID in request");
    let d = Uuid::from_u128(4242);
    assert_eq!(refusal(&mut env, &dirs(vec![d, d])).1, "Duplicate directory ID in request");
    let (code, message) = refusal(&mut env, &dirs(vec![Uuid::from_u128(1001)]));
    assert_eq!(code, ResponseError::InvalidRegistration);
    assert!(message.starts_with("Broker 1 is already registered with directory "), "{message}");
    env.register(&dirs(vec![d]), 0).unwrap();
}

#[test]
fn a_new_incarnation_waits_for_the_old_session_to_lapse() {
    let mut env = Env::three_unfenced();
    let epoch = env.c.image.brokers[&1].epoch;
    assert_eq!(
        env.register(&registration(1, 2), 9000).unwrap_err(),
        (ResponseError::DuplicateBrokerRegistration, "Another broker is registered with that broker id.".into())
    );
    // The same incarnation registering again keeps its epoch and state.
    let offset = env.c.next_offset;
    assert_eq!(env.register(&registration(1, 1), 100).unwrap(), epoch);
    assert!(!env.fenced(1), "still unfenced");
    assert_eq!(env.c.next_offset, offset + 1);
    // Its session lapsed: a new incarnation is welcome, with a new epoch, fenced.
    let new_epoch = env.register(&registration(1, 2), 100 + 9001).unwrap();
    assert_eq!(new_epoch, offset + 1);
    assert!(env.fenced(1));
    assert_eq!(
        env.s.heartbeat(&env.c.image, &beat(1, epoch, 100), None, env.c.next_offset, 9200).unwrap_err(),
        ResponseError::StaleBrokerEpoch
    );
    assert_eq!(
        env.s.heartbeat(&env.c.image, &beat(9, 0, 100), None, env.c.next_offset, 9200).unwrap_err(),
        ResponseError::StaleBrokerEpoch,
        "unknown broker"
    );
    assert!(!env.beat(1, 9300).unwrap().is_fenced);
}

#[test]
fn a_new_incarnation_leaves_the_isrs_of_the_previous_one() {
    let mut env = Env::new();
    env.c.add_broker(1, None, true);
    env.c.add_broker(2, None, false);
    env.s.touch_all(&env.c.image, 0);
    let t = env.c.add_topic("t", 1, &[&[1, 2], &[2, 1]]);
    env.register(&registration(1, 7), 0).unwrap();
    let (p0, p1) = (env.c.partition(t, 0), env.c.partition(t, 1));
    assert_eq!((p0.leader, p0.isr, p0.leader_epoch), (2, vec![2], 1));
    assert_eq!((p1.leader, p1.isr, p1.leader_epoch), (2, vec![2], 0));
}

#[test]
fn an_expired_session_fences_the_broker_and_moves_its_partitions() {
    let mut env = Env::three_unfenced();
    let t = env.c.add_topic("t", 1, &[&[1, 2, 3], &[2, 1, 3], &[1]]);
    env.beat(2, 5000).unwrap();
    env.beat(3, 5000).unwrap();
    assert_eq!(env.s.next_expiry_ms(), Some(9001));
    assert_eq!(env.expire(9000), 0, "a session lasts broker.session.timeout.ms");
    assert!(env.expire(9001) > 0);
    assert!(env.fenced(1) && !env.fenced(2) && !env.fenced(3));
    let p0 = env.c.partition(t, 0);
    assert_eq!((p0.leader, p0.isr), (2, vec![2, 3]));
    assert_eq!(env.c.partition(t, 1).isr, vec![2, 3]);
    let p2 = env.c.partition(t, 2);
    assert_eq!((p2.leader, p2.isr), (NO_LEADER, vec![1]), "its only replica: leaderless, ISR kept");
    assert_eq!(env.expire(9001), 0, "one broker at a time, the others are alive");
    assert_eq!(env.s.next_expiry_ms(), Some(14001));
    assert!(!env.s.has_valid_session(1, 9001));

    // Back: unfenced once caught up, and it leads its leaderless partition again.
    let answer = env.beat(1, 9500).unwrap();
    assert!(!answer.is_fenced);
    assert!(!env.fenced(1));
    let p2 = env.c.partition(t, 2);
    assert_eq!((p2.leader, p2.isr), (1, vec![1]));
    assert_eq!(env.c.partition(t, 0).leader, 2, "leadership does not come back by itself");
}

#[test]
fn a_closed_heartbeat_connection_fences_the_broker_after_twice_its_heartbeat_interval() {
    let mut env = Env::three_unfenced();
    let t = env.c.add_topic("t", 1, &[&[2, 1, 3]]);
    for now in [500, 1000, 1500] {
        for id in 1..=3 {
            env.beat(id, now).unwrap();
        }
    }
    // Broker 2 killed: its connection closes at 1600; 2 x its 500 ms heartbeat interval later,
    // and not a session timeout (9 s) later, it is fenced and leaves its partition.
    assert_eq!(env.s.connection_closed(99, 1600), Vec::<i32>::new(), "nobody's heartbeats came on 99");
    assert_eq!(env.s.connection_closed(2, 1600), vec![2]);
    assert_eq!(env.s.next_expiry_ms(), Some(2601));
    assert!(env.s.has_valid_session(2, 2600));
    env.beat(1, 2000).unwrap();
    env.beat(3, 2000).unwrap();
    assert_eq!(env.expire(2600), 0, "within the grace");
    assert!(env.expire(2601) > 0);
    assert!(env.fenced(2) && !env.fenced(1) && !env.fenced(3));
    assert!(!env.s.has_valid_session(2, 2601));
    assert_eq!(env.c.partition(t, 0).leader, 1);
    assert_eq!(env.expire(2601), 0, "the others heartbeat on open connections");
    assert_eq!(env.s.connection_closed(2, 2700), Vec::<i32>::new(), "a fenced broker is not fenced again");
}

#[test]
fn a_broker_that_reconnects_and_heartbeats_keeps_its_session() {
    let mut env = Env::three_unfenced();
    for now in [500, 1000] {
        for id in 1..=3 {
            env.beat(id, now).unwrap();
        }
    }
    // Broker 1's connection drops; it heartbeats on a new one within the grace.
    assert_eq!(env.s.connection_closed(1, 1100), vec![1]);
    env.connections.insert(1, 11);
    env.beat(1, 1500).unwrap();
    assert_eq!(env.expire(3000), 0);
    // The old connection's close seen only after the new one carried a heartbeat: no effect.
    env.connections.insert(1, 12);
    env.beat(1, 3500).unwrap();
    assert_eq!(env.s.connection_closed(11, 3600), Vec::<i32>::new());
    assert_eq!(env.expire(5000), 0);
    assert!(!env.fenced(1));

    // The grace is at least MIN_DISCONNECT_GRACE_MS (heartbeats 100 ms apart)...
    env.beat(2, 5600).unwrap();
    env.beat(2, 5700).unwrap();
    env.beat(3, 5700).unwrap();
    assert_eq!(env.s.connection_closed(2, 6000), vec![2]);
    assert_eq!(env.expire(6000 + MIN_DISCONNECT_GRACE_MS), 0);
    assert!(env.expire(6001 + MIN_DISCONNECT_GRACE_MS) > 0);
    assert!(env.fenced(2) && !env.fenced(1) && !env.fenced(3));
    // ...and at most the session timeout (heartbeats 4.7 s apart: 9.4 s, capped at 9 s).
    env.beat(1, 7000).unwrap();
    env.beat(3, 10_400).unwrap();
    assert_eq!(env.s.connection_closed(3, 10_500), vec![3]);
    env.beat(1, 14_000).unwrap();
    assert_eq!(env.s.next_expiry_ms(), Some(19_401));
    assert_eq!(env.expire(19_400), 0);
    assert!(env.expire(19_401) > 0);
    assert!(env.fenced(3) && !env.fenced(1));
}

#[test]
fn a_new_controller_gives_every_broker_a_full_session() {
    let env = Env::three_unfenced();
    let mut fresh = BrokerSessions::new(config());
    fresh.touch_all(&env.c.image, 50_000);
    assert!(fresh.has_valid_session(2, 59_000));
    assert!(fresh.expire(&env.c.image, 59_000).is_empty());
    let records = fresh.expire(&env.c.image, 59_001);
    assert!(
        matches!(records.last(), Some(MetadataRecord::BrokerRegistrationChange(r)) if r.broker_id == 1 && r.fenced == 1)
    );
    let mut image = (*env.c.image).clone();
    image.brokers.remove(&3);
    let mut fresh = BrokerSessions::new(config());
    fresh.touch_all(&image, 0);
    assert!(fresh.has_valid_session(2, 0));
    assert!(!fresh.has_valid_session(3, 0), "only registered brokers have a session");
}

#[test]
fn controlled_shutdown_moves_leadership_then_lets_the_broker_go() {
    let mut env = Env::three_unfenced();
    let t = env.c.add_topic("t", 1, &[&[1, 2, 3], &[1, 3, 2], &[2, 3, 1]]);
    let reported = env.c.next_offset - 1;
    let answer = env.beat_at(1, reported, true, 100).unwrap();
    assert_eq!(
        answer,
        HeartbeatAnswer { is_caught_up: true, is_fenced: false, in_controlled_shutdown: true, should_shut_down: false }
    );
    let shutdown_offset = env.c.next_offset - 1;
    assert!(env.c.image.brokers[&1].in_controlled_shutdown);
    assert!(!env.fenced(1));
    for p in 0..3 {
        let got = env.c.partition(t, p);
        assert!(got.leader != 1 && !got.isr.contains(&1), "partition {p}: {got:?}");
    }
    assert_eq!(env.c.partition(t, 0).leader, 2);
    assert_eq!(env.c.partition(t, 1).leader, 3);

    // Brokers 2 and 3 have not seen the changes yet: not yet.
    let before = env.c.next_offset;
    assert!(!env.beat_at(1, shutdown_offset, true, 200).unwrap().should_shut_down);
    assert_eq!(env.c.next_offset, before);
    env.beat_at(2, shutdown_offset, false, 300).unwrap();
    assert!(!env.beat_at(1, shutdown_offset, true, 400).unwrap().should_shut_down, "3 is still behind");
    env.beat_at(3, shutdown_offset, false, 500).unwrap();
    let answer = env.beat_at(1, shutdown_offset, true, 600).unwrap();
    assert!(answer.should_shut_down && answer.is_fenced);
    assert!(env.fenced(1), "fenced on the way out");
}

#[test]
fn a_broker_leading_nothing_or_fenced_shuts_down_at_once() {
    let mut env = Env::three_unfenced();
    env.c.add_topic("t", 1, &[&[2, 1]]);
    let answer = env.beat_at(1, env.c.next_offset - 1, true, 100).unwrap();
    assert!(answer.should_shut_down && answer.is_fenced && !answer.in_controlled_shutdown);
    assert!(env.fenced(1));
    assert_eq!(env.c.partition(Uuid::from_u128(1), 0).isr, vec![2], "it left the ISR");

    env.register(&registration(4, 1), 0).unwrap();
    let answer = env.beat_at(4, 0, true, 100).unwrap();
    assert!(answer.should_shut_down && answer.is_fenced && !answer.is_caught_up);
}

#[test]
fn an_offline_directory_takes_its_partitions_away_from_the_broker() {
    let mut env = Env::new();
    let (d1, d2) = (Uuid::from_u128(7001), Uuid::from_u128(7002));
    env.register(&registration(1, 1).with_log_dirs(vec![d1, d2]), 0).unwrap();
    env.register(&registration(2, 1), 0).unwrap();
    env.beat(1, 0).unwrap();
    env.beat(2, 0).unwrap();
    let t = Uuid::from_u128(5);
    let mut records = vec![MetadataRecord::Topic(crate::metadata::records::TopicRecord {
        name: "t".into(),
        topic_id: t,
        ..Default::default()
    })];
    for (p, dir) in [(0, d1), (1, d2)] {
        records.push(MetadataRecord::Partition(crate::metadata::records::PartitionRecord {
            partition_id: p,
            topic_id: t,
            replicas: vec![1, 2],
            isr: vec![1, 2],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![dir, Uuid::from_u128(2001)],
            ..Default::default()
        }));
    }
    env.c.apply(&records);
    let epoch = env.c.image.brokers[&1].epoch;
    let request = beat(1, epoch, env.c.next_offset - 1).with_offline_log_dirs(vec![d1]);
    assert!(!env.send(&request, 10).unwrap().is_fenced);
    let (p0, p1) = (env.c.partition(t, 0), env.c.partition(t, 1));
    assert_eq!((p0.leader, p0.isr), (2, vec![2]), "its copy in d1 is offline");
    assert_eq!((p1.leader, p1.isr), (1, vec![1, 2]), "d2 is fine");
    assert_eq!(env.c.image.brokers[&1].log_dirs, vec![d2]);
    let before = env.c.next_offset;
    env.send(&request.with_current_metadata_offset(before - 1), 20).unwrap();
    assert_eq!(env.c.next_offset, before, "reported again: nothing new");
}

#[test]
fn an_unregistered_broker_leaves_everything() {
    let mut env = Env::three_unfenced();
    let t = env.c.add_topic("t", 1, &[&[1, 2]]);
    assert_eq!(
        env.s.unregister(&env.c.image, 9).unwrap_err(),
        (ResponseError::BrokerIdNotRegistered, "Broker ID 9 is not currently registered".into())
    );
    let records = env.s.unregister(&env.c.image, 1).unwrap();
    env.c.apply(&records);
    assert!(!env.c.image.brokers.contains_key(&1));
    let p = env.c.partition(t, 0);
    assert_eq!((p.leader, p.isr), (2, vec![2]));
    assert!(!env.s.has_valid_session(1, 0));
    assert!(!env.s.expire(&env.c.image, 100_000).is_empty(), "the others still expire");
}
