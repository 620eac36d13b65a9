//! Three voters on loopback, each behind a listener of its own speaking Kafka's framing: they
//! elect a leader, commit what it proposes on all of them, elect another when it stops, and the
//! stopped one catches up when it is back; with snapshots at every commit and no retention, a
//! voter that was down catches up from the leader's snapshot. The applied state here is the list
//! of committed record offsets (a snapshot carries it as records).

use std::sync::Mutex;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::metadata::records::MetadataRecord;
use crate::raft::voters_record::{self, VoterInfo};

type Applied = Arc<Mutex<Vec<i64>>>;

/// Answers Kafka frames on `listener` through `voter` until the task is aborted.
async fn serve(listener: TcpListener, voter: VoterHandle) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else { return };
        let voter = voter.clone();
        tokio::spawn(async move {
            loop {
                let mut len = [0u8; 4];
                if stream.read_exact(&mut len).await.is_err() {
                    return;
                }
                let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
                if stream.read_exact(&mut frame).await.is_err() {
                    return;
                }
                let Ok(request) = crate::protocol::decode_served_request(Bytes::from(frame), |_, _| true) else {
                    return;
                };
                let body = match request.body {
                    RequestKind::Vote(r) => ResponseKind::Vote(voter.vote(&r).await),
                    RequestKind::BeginQuorumEpoch(r) => {
                        ResponseKind::BeginQuorumEpoch(voter.begin_quorum_epoch(&r).await)
                    }
                    RequestKind::EndQuorumEpoch(r) => ResponseKind::EndQuorumEpoch(voter.end_quorum_epoch(&r).await),
                    RequestKind::Fetch(r) => ResponseKind::Fetch(voter.fetch(&r).await),
                    RequestKind::FetchSnapshot(r) => ResponseKind::FetchSnapshot(voter.fetch_snapshot(&r).await),
                    RequestKind::ApiVersions(_) => {
                        ResponseKind::ApiVersions(api_versions(Some(voters_record::SUPPORTED_KRAFT_VERSIONS)))
                    }
                    RequestKind::UpdateRaftVoter(r) => {
                        let endpoints = r.listeners.iter().map(|l| (l.name.to_string(), l.host.to_string(), l.port));
                        let info = VoterInfo {
                            id: r.voter_id,
                            directory_id: r.voter_directory_id,
                            endpoints: endpoints.collect(),
                        };
                        let code = match voter.change_voters(VoterChange::Update(info)).await {
                            Ok(()) => 0,
                            Err((error, _)) => error.code(),
                        };
                        ResponseKind::UpdateRaftVoter(
                            kafka_protocol::messages::UpdateRaftVoterResponse::default().with_error_code(code),
                        )
                    }
                    _ => return,
                };
                let out = crate::protocol::encode_response(
                    request.api_key,
                    request.version,
                    request.header.correlation_id,
                    &body,
                )
                .expect("encodes");
                if stream.write_all(&out).await.is_err() {
                    return;
                }
                let _ = ApiKey::Vote;
            }
        });
    }
}

/// An ApiVersions answer naming `kraft` as the kraft.version range (None: no such feature).
fn api_versions(kraft: Option<(i16, i16)>) -> kafka_protocol::messages::ApiVersionsResponse {
    use kafka_protocol::messages::api_versions_response::SupportedFeatureKey;
    let features = kraft.map(|(min, max)| {
        SupportedFeatureKey::default().with_name("kraft.version".into()).with_min_version(min).with_max_version(max)
    });
    kafka_protocol::messages::ApiVersionsResponse::default().with_supported_features(features.into_iter().collect())
}

/// A peer that answers ApiVersions (with `kraft` as its kraft.version range) and nothing else.
async fn serve_api_versions(listener: TcpListener, kraft: Option<(i16, i16)>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let mut len = [0u8; 4];
        while stream.read_exact(&mut len).await.is_ok() {
            let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
            if stream.read_exact(&mut frame).await.is_err() {
                break;
            }
            let Ok(request) = crate::protocol::decode_served_request(Bytes::from(frame), |_, _| true) else { break };
            let body = ResponseKind::ApiVersions(api_versions(kraft));
            let out = crate::protocol::encode_response(
                request.api_key,
                request.version,
                request.header.correlation_id,
                &body,
            );
            if stream.write_all(&out.expect("encodes")).await.is_err() {
                break;
            }
        }
    }
}

struct Node {
    handle: VoterHandle,
    server: tokio::task::JoinHandle<()>,
    applied: Applied,
}

/// The applied offsets, snapshotted as one record each.
struct OffsetsApplier(Applied);

impl Applier for OffsetsApplier {
    fn apply(&mut self, log: &MetadataLog, from: u64, to: u64) -> u64 {
        log.records_between(from as i64, to as i64, &mut |offset, _| {
            self.0.lock().unwrap().push(offset);
            Ok(())
        })
        .expect("committed records read back")
    }

    fn snapshot(&self) -> Option<Vec<MetadataRecord>> {
        use crate::metadata::records::FeatureLevelRecord;
        let offsets = self.0.lock().unwrap().clone();
        let record = |o: i64| FeatureLevelRecord { name: o.to_string(), feature_level: 1, ..Default::default() };
        Some(offsets.into_iter().map(|o| MetadataRecord::FeatureLevel(record(o))).collect())
    }

    fn load(&mut self, end: u64, records: Vec<MetadataRecord>) {
        let offsets: Vec<i64> = records
            .iter()
            .map(|r| match r {
                MetadataRecord::FeatureLevel(f) => f.name.parse().expect("an offset"),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(offsets.iter().all(|o| (*o as u64) < end), "a snapshot holds what is below its end");
        *self.0.lock().unwrap() = offsets;
    }
}

async fn start_node(dir: &std::path::Path, id: NodeId, voters: &BTreeMap<NodeId, Endpoint>) -> Node {
    start_with(dir, id, voters, SnapshotPolicy::default(), false).await
}

/// Voter `id`'s directory id in these tests.
fn directory_of(id: NodeId) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x1000 + id as u128)
}

/// `voters` as a dynamic quorum's initial voters (KIP-853).
fn initial_voters(voters: &BTreeMap<NodeId, Endpoint>) -> Vec<VoterInfo> {
    voters
        .iter()
        .map(|(id, e)| VoterInfo {
            id: *id,
            directory_id: directory_of(*id),
            endpoints: vec![(e.listener.clone(), e.host.clone(), e.port)],
        })
        .collect()
}

async fn start_with(
    dir: &std::path::Path,
    id: NodeId,
    voters: &BTreeMap<NodeId, Endpoint>,
    snapshots: SnapshotPolicy,
    dynamic: bool,
) -> Node {
    start_settings(dir, settings_of(id, voters, snapshots, dynamic)).await
}

fn settings_of(
    id: NodeId,
    voters: &BTreeMap<NodeId, Endpoint>,
    snapshots: SnapshotPolicy,
    dynamic: bool,
) -> VoterSettings {
    VoterSettings {
        node_id: id,
        voters: voters.clone(),
        cluster_id: "test-cluster".into(),
        election_timeout_ms: 300,
        fetch_timeout_ms: 600,
        election_backoff_max_ms: 300,
        request_timeout_ms: 1000,
        security: ClientSecurity::plaintext(),
        snapshots,
        initial_voters: dynamic.then(|| initial_voters(voters)),
        directory_id: if dynamic { directory_of(id) } else { uuid::Uuid::nil() },
        writer_gate: Default::default(),
        observer: false,
    }
}

async fn start_settings(dir: &std::path::Path, settings: VoterSettings) -> Node {
    // A restarted voter binds its port again: an outgoing connection of the test's other voters
    // may hold it for a moment as its local port (ports are picked from the ephemeral range).
    let port = settings.voters[&settings.node_id].port;
    let deadline = Instant::now() + Duration::from_secs(10);
    let listener = loop {
        match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(listener) => break listener,
            Err(e) if Instant::now() < deadline => {
                tracing::debug!(port, error = %e, "bind: trying again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("bind 127.0.0.1:{port}: {e}"),
        }
    };
    let applied: Applied = Arc::default();
    let handle = start(dir, settings, Box::new(OffsetsApplier(applied.clone()))).expect("voter starts");
    let server = tokio::spawn(serve(listener, handle.clone()));
    Node { handle, server, applied }
}

/// Stops `nodes` (their drivers and listeners).
fn stop_all<'a>(nodes: impl IntoIterator<Item = &'a Node>) {
    for node in nodes {
        node.handle.stop();
        node.server.abort();
    }
}

async fn active(nodes: &BTreeMap<NodeId, Node>, not: Option<NodeId>) -> NodeId {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for (id, node) in nodes {
            if Some(*id) != not && node.handle.status.borrow().active {
                return *id;
            }
        }
        if Instant::now() >= deadline {
            let states: Vec<_> = nodes.iter().map(|(id, n)| (*id, n.handle.status.borrow().clone())).collect();
            panic!("no active leader within 20 s: {states:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn record(i: i16) -> Vec<MetadataRecord> {
    use crate::metadata::records::FeatureLevelRecord;
    let level = FeatureLevelRecord { name: "test.feature".into(), feature_level: i, ..Default::default() };
    vec![MetadataRecord::FeatureLevel(level.clone()), MetadataRecord::FeatureLevel(level)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_replicate_and_fail_over() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let mut voters = BTreeMap::new();
    for id in 1..=3 {
        // An ephemeral port, released for the voter to bind again.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        voters.insert(id, Endpoint { listener: "CONTROLLER".into(), host: "127.0.0.1".into(), port });
    }
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start_node(dirs[id as usize - 1].path(), id, &voters).await);
    }
    let first = active(&nodes, None).await;
    // A healthy quorum keeps its leader: no election for several fetch timeouts.
    let epoch = nodes[&first].handle.status.borrow().epoch;
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let now: Vec<_> = nodes.values().map(|n| n.handle.status.borrow().clone()).collect();
    assert!(now.iter().all(|s| s.epoch == epoch && s.leader == Some(first)), "{epoch} {first}: {now:?}");
    let mut ends = Vec::new();
    for i in 0..10 {
        ends.push(nodes[&first].handle.propose(record(i)).await.expect("committed"));
    }
    assert!(ends.windows(2).all(|w| w[1] == w[0] + 2), "two records per batch: {ends:?}");
    // A follower refuses proposals.
    let follower = *nodes.keys().find(|id| **id != first).unwrap();
    assert!(nodes[&follower].handle.propose(record(99)).await.is_err());
    // Static voters (kraft.version 0) do not change.
    let change = VoterChange::Remove { id: follower, directory_id: uuid::Uuid::nil() };
    let refused = nodes[&first].handle.change_voters(change).await;
    assert!(matches!(refused, Err((ResponseError::UnsupportedVersion, _))), "{refused:?}");

    // The leader stops: another is elected and commits on its own epoch.
    let old = nodes.remove(&first).unwrap();
    old.handle.stop();
    old.server.abort();
    let second = active(&nodes, Some(first)).await;
    assert_ne!(second, first);
    let last = nodes[&second].handle.propose(record(11)).await.expect("committed after failover");
    assert!(last > *ends.last().unwrap());
    // Everything committed before is there, on every live voter, exactly once, in order.
    let deadline = Instant::now() + Duration::from_secs(10);
    for node in nodes.values() {
        while node.applied.lock().unwrap().len() < 22 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let applied = node.applied.lock().unwrap().clone();
        assert_eq!(applied.len(), 22, "{applied:?}");
        assert!(applied.windows(2).all(|w| w[0] < w[1]));
    }

    // Back with its log: it follows and catches up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let back = start_node(dirs[first as usize - 1].path(), first, &voters).await;
    nodes.insert(first, back);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let hw = nodes[&second].handle.status.borrow().high_watermark;
        let caught_up = nodes[&first].handle.status.borrow().high_watermark >= hw;
        if caught_up && nodes[&first].applied.lock().unwrap().len() == 22 {
            break;
        }
        assert!(Instant::now() < deadline, "the restarted voter did not catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(nodes[&first].handle.status.borrow().leader, Some(second));
    stop_all(nodes.values());
}

fn ephemeral_voters(n: NodeId) -> BTreeMap<NodeId, Endpoint> {
    (1..=n)
        .map(|id| {
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            (id, Endpoint { listener: "CONTROLLER".into(), host: "127.0.0.1".into(), port })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_behind_the_log_start_catches_up_from_the_leaders_snapshot() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let voters = ephemeral_voters(3);
    // A snapshot at every commit, and no log kept below the newest one.
    let policy = SnapshotPolicy { max_bytes_between: 1, max_interval_ms: 0, retention_bytes: 0, retention_ms: -1 };
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start_with(dirs[id as usize - 1].path(), id, &voters, policy.clone(), false).await);
    }
    let leader = active(&nodes, None).await;
    nodes[&leader].handle.propose(record(0)).await.expect("committed");
    let behind = *nodes.keys().find(|id| **id != leader).unwrap();
    let down = nodes.remove(&behind).unwrap();
    down.handle.stop();
    down.server.abort();
    for i in 1..20 {
        nodes[&leader].handle.propose(record(i)).await.expect("committed");
    }
    // The leader snapshotted and cleaned its log up to its newest snapshot.
    let leader_dir = dirs[leader as usize - 1].path().join(super::super::METADATA_LOG_DIR_NAME);
    let deadline = Instant::now() + Duration::from_secs(10);
    let newest = loop {
        let ids = snapshot::ids(&leader_dir).unwrap();
        if ids.len() == 1 && ids[0].end_offset > 10 {
            break ids[0];
        }
        assert!(Instant::now() < deadline, "the leader did not snapshot and clean: {ids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Back, far behind the leader's log start: it downloads a snapshot and goes on from there.
    let back = start_with(dirs[behind as usize - 1].path(), behind, &voters, policy.clone(), false).await;
    nodes.insert(behind, back);
    let expected = nodes[&leader].applied.lock().unwrap().clone();
    assert_eq!(expected.len(), 40);
    let deadline = Instant::now() + Duration::from_secs(20);
    while *nodes[&behind].applied.lock().unwrap() != expected {
        assert!(Instant::now() < deadline, "the voter that was down did not catch up: {:?}", nodes[&behind].applied);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let behind_dir = dirs[behind as usize - 1].path().join(super::super::METADATA_LOG_DIR_NAME);
    let installed = snapshot::ids(&behind_dir).unwrap();
    assert!(installed.iter().any(|id| id.end_offset >= newest.end_offset), "{installed:?} vs {newest:?}");
    // And it replicates what comes next, on top of the snapshot's state.
    let end = nodes[&leader].handle.propose(record(99)).await.expect("committed");
    let deadline = Instant::now() + Duration::from_secs(10);
    while nodes[&behind].applied.lock().unwrap().len() < 42 {
        assert!(Instant::now() < deadline, "not replicated after the snapshot");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(*nodes[&behind].applied.lock().unwrap().last().unwrap(), end as i64 - 1);
    stop_all(nodes.values());
}

/// Asks `node` for `change` until it is not refused for a reason that passes (REQUEST_TIMED_OUT:
/// the initial voters or the previous change not committed yet, a voter to add not caught up).
async fn change_voters(node: &Node, change: VoterChange) -> ChangeOutcome {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match node.handle.change_voters(change.clone()).await {
            Err((ResponseError::RequestTimedOut, _)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            outcome => return outcome,
        }
    }
}

/// Waits until `node` sees `voters` in force.
async fn voters_become(node: &Node, voters: &[NodeId]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.handle.status.borrow().voters != voters {
        assert!(Instant::now() < deadline, "voters {:?}, not {voters:?}", node.handle.status.borrow().voters);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_quorums_leader_removes_and_adds_voters_one_at_a_time() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let voters = ephemeral_voters(3);
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        let dir = dirs[id as usize - 1].path();
        nodes.insert(id, start_with(dir, id, &voters, SnapshotPolicy::default(), true).await);
    }
    let leader = active(&nodes, None).await;
    let follower = *nodes.keys().find(|id| **id != leader).unwrap();
    let info = |id: NodeId| initial_voters(&voters).into_iter().find(|v| v.id == id).unwrap();
    let remove = |id: NodeId, directory_id| VoterChange::Remove { id, directory_id };

    // Kafka's refusals: a voter already in, a voter (or directory) not in, asking a follower.
    let duplicate = change_voters(&nodes[&leader], VoterChange::Add(info(follower))).await;
    assert!(matches!(duplicate, Err((ResponseError::DuplicateVoter, _))), "{duplicate:?}");
    let unknown = change_voters(&nodes[&leader], remove(follower, directory_of(9))).await;
    assert!(matches!(unknown, Err((ResponseError::VoterNotFound, _))), "{unknown:?}");
    let not_leader = nodes[&follower].handle.change_voters(remove(follower, directory_of(follower))).await;
    assert!(matches!(not_leader, Err((ResponseError::NotLeaderOrFollower, _))), "{not_leader:?}");

    // A follower removed goes on as an observer; added back once caught up.
    change_voters(&nodes[&leader], remove(follower, directory_of(follower))).await.expect("removed");
    let rest: Vec<NodeId> = (1..=3).filter(|id| *id != follower).collect();
    voters_become(&nodes[&leader], &rest).await;
    voters_become(&nodes[&follower], &rest).await;
    nodes[&leader].handle.propose(record(1)).await.expect("committed by two voters");
    // Kafka's leader asks a voter to add for its ApiVersions first: nobody there, or a
    // kraft.version range without the finalized level 1, and the voter is not added.
    let nobody = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let at = |port: u16| VoterInfo {
        id: 7,
        directory_id: directory_of(7),
        endpoints: vec![("CONTROLLER".into(), "127.0.0.1".into(), port)],
    };
    let unreachable = nodes[&leader].handle.change_voters(VoterChange::Add(at(nobody))).await;
    let (error, message) = unreachable.expect_err("nobody listens there");
    assert_eq!(error, ResponseError::RequestTimedOut);
    assert_eq!(message, "Aborted add voter operation for since API_VERSIONS returned an error BROKER_NOT_AVAILABLE");
    let old = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let old_port = old.local_addr().unwrap().port();
    let old_server = tokio::spawn(serve_api_versions(old, Some((0, 0))));
    let refused = nodes[&leader].handle.change_voters(VoterChange::Add(at(old_port))).await;
    let (error, message) = refused.expect_err("kraft.version 1 unsupported");
    assert_eq!(error, ResponseError::InvalidRequest);
    assert!(
        message.ends_with("kraft.version range (min: 0, max: 0 doesn't support the finalized version 1"),
        "{message}"
    );
    old_server.abort();
    assert_eq!(nodes[&leader].handle.status.borrow().voters, rest, "nothing written");
    change_voters(&nodes[&leader], VoterChange::Add(info(follower))).await.expect("added back");
    voters_become(&nodes[&follower], &[1, 2, 3]).await;

    // The leader removes itself: it resigns once that commits, and the two others elect a leader.
    change_voters(&nodes[&leader], remove(leader, directory_of(leader))).await.expect("leader removed");
    let others: BTreeMap<NodeId, Node> = nodes.into_iter().collect();
    let second = active(&others, Some(leader)).await;
    let rest: Vec<NodeId> = (1..=3).filter(|id| *id != leader).collect();
    voters_become(&others[&second], &rest).await;
    others[&second].handle.propose(record(2)).await.expect("committed under the new leader");
    stop_all(others.values());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_quorums_voters_are_in_its_snapshots_and_survive_a_restart_past_the_log() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let voters = ephemeral_voters(3);
    // A snapshot at every commit, and no log kept below the newest one.
    let policy = SnapshotPolicy { max_bytes_between: 1, max_interval_ms: 0, retention_bytes: 0, retention_ms: -1 };
    let start = |id: NodeId| start_with(dirs[id as usize - 1].path(), id, &voters, policy.clone(), true);
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        nodes.insert(id, start(id).await);
    }
    let leader = active(&nodes, None).await;
    let removed = *nodes.keys().find(|id| **id != leader).unwrap();
    let change = VoterChange::Remove { id: removed, directory_id: directory_of(removed) };
    change_voters(&nodes[&leader], change).await.expect("removed");
    for i in 0..20 {
        nodes[&leader].handle.propose(record(i)).await.expect("committed");
    }
    let rest: Vec<NodeId> = (1..=3).filter(|id| *id != removed).collect();
    // The leader's log now starts past the VotersRecord: its newest snapshot holds the voters.
    let leader_dir = dirs[leader as usize - 1].path().join(super::super::METADATA_LOG_DIR_NAME);
    let deadline = Instant::now() + Duration::from_secs(10);
    let newest = loop {
        let ids = snapshot::ids(&leader_dir).unwrap();
        if ids.len() == 1 && ids[0].end_offset > 30 {
            break ids[0];
        }
        assert!(Instant::now() < deadline, "the leader did not snapshot and clean: {ids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let in_snapshot = snapshot::read_voters(&leader_dir, newest).unwrap().expect("voters in the snapshot");
    assert_eq!(in_snapshot.iter().map(|v| v.id).collect::<Vec<_>>(), rest);
    assert!(in_snapshot.iter().all(|v| v.directory_id == directory_of(v.id) && !v.endpoints.is_empty()));

    // Every node restarted: the voters are the snapshot's, not the bootstrap checkpoint's three.
    stop_all(std::mem::take(&mut nodes).values());
    tokio::time::sleep(Duration::from_millis(200)).await;
    for id in 1..=3 {
        nodes.insert(id, start(id).await);
    }
    let leader = active(&nodes, None).await;
    assert_ne!(leader, removed, "a removed voter never leads");
    for node in nodes.values() {
        voters_become(node, &rest).await;
    }
    nodes[&leader].handle.propose(record(99)).await.expect("committed after the restart");
    stop_all(nodes.values());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_controller_finds_the_leader_through_a_bootstrap_server_and_is_added() {
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().expect("dir")).collect();
    let all = ephemeral_voters(4);
    let voters: BTreeMap<NodeId, Endpoint> =
        all.iter().filter(|(id, _)| **id <= 3).map(|(k, v)| (*k, v.clone())).collect();
    let mut nodes = BTreeMap::new();
    for id in 1..=3 {
        let dir = dirs[id as usize - 1].path();
        nodes.insert(id, start_with(dir, id, &voters, SnapshotPolicy::default(), true).await);
    }
    let leader = active(&nodes, None).await;
    nodes[&leader].handle.propose(record(1)).await.expect("committed");
    // Node 4 knows only a bootstrap server (voter 1, under Kafka's id -2) and itself.
    let mut settings = settings_of(4, &all, SnapshotPolicy::default(), false);
    settings.voters = BTreeMap::from([(4, all[&4].clone()), (-2, all[&1].clone())]);
    settings.observer = true;
    settings.directory_id = directory_of(4);
    let observer = start_settings(dirs[3].path(), settings).await;
    // It follows the leader (learnt from the bootstrap server's answer) and replicates the log,
    // the voters with it, never campaigning.
    voters_become(&observer, &[1, 2, 3]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while observer.applied.lock().unwrap().len() < nodes[&leader].applied.lock().unwrap().len() {
        assert!(Instant::now() < deadline, "the observer did not catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(observer.handle.status.borrow().leader, Some(leader));
    let info = VoterInfo {
        id: 4,
        directory_id: directory_of(4),
        endpoints: vec![(all[&4].listener.clone(), all[&4].host.clone(), all[&4].port)],
    };
    change_voters(&nodes[&leader], VoterChange::Add(info)).await.expect("added");
    voters_become(&observer, &[1, 2, 3, 4]).await;
    nodes.insert(4, observer);
    // The leader goes: the four-voter quorum (majority 3) elects another, node 4 voting.
    let old = nodes.remove(&leader).unwrap();
    old.handle.stop();
    old.server.abort();
    let second = active(&nodes, Some(leader)).await;
    nodes[&second].handle.propose(record(2)).await.expect("committed by three of four voters");
    stop_all(nodes.values());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voter_listening_elsewhere_than_the_log_says_updates_its_endpoint() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let real = ephemeral_voters(3);
    // The log (the bootstrap checkpoint) has voter 3 at a port nothing listens on.
    let mut stale = real.clone();
    stale.get_mut(&3).unwrap().port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut nodes = BTreeMap::new();
    for id in 1..=2 {
        nodes.insert(id, start_with(dirs[id as usize - 1].path(), id, &stale, SnapshotPolicy::default(), true).await);
    }
    let leader = active(&nodes, None).await;
    nodes[&leader].handle.propose(record(1)).await.expect("committed by two of three");
    let mut settings = settings_of(3, &stale, SnapshotPolicy::default(), true);
    settings.voters.insert(3, real[&3].clone());
    nodes.insert(3, start_settings(dirs[2].path(), settings).await);
    let deadline = Instant::now() + Duration::from_secs(20);
    while nodes[&leader].handle.voter_endpoint(3).map(|e| e.port) != Some(real[&3].port) {
        assert!(
            Instant::now() < deadline,
            "voter 3's endpoint not updated: {:?}, voter 3: {:?}",
            nodes[&leader].handle.voter_endpoint(3),
            nodes[&3].handle.status.borrow()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Every voter has it now, and reaches voter 3 there: without the leader, 3 and the other elect.
    let deadline = Instant::now() + Duration::from_secs(20);
    while nodes.values().any(|n| n.handle.voter_endpoint(3).map(|e| e.port) != Some(real[&3].port)) {
        assert!(Instant::now() < deadline, "not every voter learnt voter 3's endpoint");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let old = nodes.remove(&leader).unwrap();
    old.handle.stop();
    old.server.abort();
    let second = active(&nodes, Some(leader)).await;
    nodes[&second].handle.propose(record(2)).await.expect("committed by the two left");
    stop_all(nodes.values());
}
