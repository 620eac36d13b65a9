//! The replica manager driven by metadata images: hosted partitions, roles, the high watermark
//! from follower fetches, acks=all, divergence, and replicas removed when the image moves them.

use super::*;
use crate::config::BrokerConfig;
use crate::log::batch;
use crate::metadata::image::ImageBuilder;
use crate::metadata::image::NO_LEADER_CHANGE;
use crate::metadata::log_dirs::LogDirs;
use crate::metadata::records::{
    ConfigRecord, MetadataRecord, PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord,
};

const ME: i32 = 1;
const OTHER: i32 = 2;
const TOPIC_ID: Uuid = Uuid::from_u128(9);

struct Node {
    _dir: tempfile::TempDir,
    config: BrokerConfig,
    registry: TopicRegistry,
    manager: ReplicaManager,
    builder: ImageBuilder,
    offset: i64,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let props = [("log.dirs", dir.path().to_str().unwrap()), ("node.id", "1")];
        let config =
            BrokerConfig::from_properties(props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap();
        let registry = TopicRegistry::open_detached(LogDirs::open(&config).unwrap(), &config).unwrap();
        let setup = ReplicaSetup {
            node_id: ME,
            log_dir: dir.path().to_path_buf(),
            health: Arc::new(DirHealth::new(dir.path().to_path_buf(), false)),
            replica_lag_time_max_ms: 1_000,
        };
        let manager = ReplicaManager::new(setup, watch::channel(0).0);
        Node { _dir: dir, config, registry, manager, builder: ImageBuilder::new(), offset: 0 }
    }

    fn apply(&mut self, records: Vec<MetadataRecord>, now_ms: i64) {
        for r in &records {
            self.builder.apply(self.offset, r).unwrap();
            self.offset += 1;
        }
        let image = self.builder.publish();
        self.manager.apply(&image, &self.registry, &self.config.topic_defaults, now_ms);
    }
}

fn partition(
    p: i32,
    replicas: &[i32],
    isr: &[i32],
    leader: i32,
    leader_epoch: i32,
    partition_epoch: i32,
) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        partition_id: p,
        topic_id: TOPIC_ID,
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch,
        partition_epoch,
        ..Default::default()
    })
}

/// A change of partition 0 (the image moves the partition epoch, and the leader epoch with a
/// new leader).
fn change(isr: Option<&[i32]>, leader: Option<i32>, replicas: Option<&[i32]>) -> MetadataRecord {
    MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: 0,
        topic_id: TOPIC_ID,
        isr: isr.map(<[i32]>::to_vec),
        leader: leader.unwrap_or(NO_LEADER_CHANGE),
        replicas: replicas.map(<[i32]>::to_vec),
        ..Default::default()
    })
}

fn topic() -> MetadataRecord {
    MetadataRecord::Topic(TopicRecord { name: "t".to_string(), topic_id: TOPIC_ID, ..Default::default() })
}

fn append(replica: &Replica, acks_all: bool) -> Result<i64, ResponseError> {
    let records = batch::one_record_batch(None, 0);
    let mut log = replica.partition.log();
    let (bytes, summary) = batch::validate_produce(records, log.config(), 0).unwrap();
    let info = replica.append(&mut log, bytes, &summary, 0, acks_all)?.unwrap();
    Ok(info.last_offset + 1)
}

#[tokio::test]
async fn a_leader_commits_what_its_in_sync_follower_fetched() {
    let mut node = Node::new();
    // Partition 0 led here with the other broker in sync; partition 1 led there; partition 2
    // not assigned here at all.
    node.apply(
        vec![
            topic(),
            partition(0, &[ME, OTHER], &[ME, OTHER], ME, 3, 5),
            partition(1, &[OTHER, ME], &[OTHER, ME], OTHER, 2, 2),
            partition(2, &[OTHER], &[OTHER], OTHER, 0, 0),
            MetadataRecord::Config(ConfigRecord {
                resource_type: TOPIC_RESOURCE,
                resource_name: "t".to_string(),
                name: "min.insync.replicas".to_string(),
                value: Some("2".to_string()),
                ..Default::default()
            }),
        ],
        0,
    );
    let t = node.registry.get("t").unwrap();
    assert_eq!(t.partitions.len(), 3, "the topic's partition count");
    assert_eq!(t.partitions.iter().map(|p| p.index).collect::<Vec<_>>(), vec![0, 1], "hosted here");
    let led = node.manager.get("t", 0).unwrap();
    assert_eq!(led.leader(), (ME, 3));
    assert_eq!(led.check_leader(3), Ok(()));
    assert_eq!(led.check_leader(2), Err(ResponseError::FencedLeaderEpoch));
    assert_eq!(led.check_leader(4), Err(ResponseError::UnknownLeaderEpoch));
    let followed = node.manager.get("t", 1).unwrap();
    assert_eq!(followed.check_leader(-1), Err(ResponseError::NotLeaderOrFollower));
    assert_eq!(node.manager.followers().iter().map(|f| (f.1, f.2, f.3)).collect::<Vec<_>>(), vec![(1, OTHER, 2)]);

    let end = append(&led, true).unwrap();
    assert_eq!((end, led.partition.log().high_watermark()), (1, 0), "the follower has not fetched it yet");
    assert_eq!(led.partition.log().latest_epoch().map(|e| e.0), Some(3), "written at the image's epoch");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(50);
    assert_eq!(led.wait_acks_all(end, deadline).await, Some(ResponseError::RequestTimedOut));
    let (moved, proposal) = led.on_follower_fetch(&mut led.partition.log(), OTHER, 1, 10);
    assert!(moved && proposal.is_none());
    assert_eq!(led.partition.log().high_watermark(), 1);
    assert_eq!(led.wait_acks_all(end, tokio::time::Instant::now()).await, None);

    // The follower stops fetching: after replica.lag.time.max.ms it leaves the ISR, and an
    // acks=all write is refused once the controller commits that (min.insync.replicas=2).
    append(&led, false).unwrap();
    node.manager.tick(500);
    assert!(node.manager.take_proposals().is_empty(), "within replica.lag.time.max.ms");
    node.manager.tick(2_000);
    let proposals = node.manager.take_proposals();
    assert_eq!(proposals.len(), 1);
    assert_eq!((proposals[0].2.isr.clone(), proposals[0].2.partition_epoch), (vec![ME], 5));
    led.on_isr_committed(3, Some((vec![ME], 6)), 2_000);
    node.apply(vec![change(Some(&[ME]), None, None)], 2_000);
    assert_eq!(led.leader(), (ME, 3), "an ISR change keeps the leader epoch");
    assert_eq!(append(&led, true), Err(ResponseError::NotEnoughReplicas));
}

#[tokio::test]
async fn a_follower_that_diverged_is_told_where_and_moved_replicas_are_removed() {
    let mut node = Node::new();
    node.apply(vec![topic(), partition(0, &[ME, OTHER], &[ME, OTHER], ME, 1, 1)], 0);
    let led = node.manager.get("t", 0).unwrap();
    append(&led, false).unwrap();
    append(&led, false).unwrap();
    // Leadership goes away (epoch 2) and comes back (epoch 3). A follower that last fetched at
    // epoch 1 up to offset 2 has not diverged; one claiming epoch 2 up to offset 5 (written by
    // the other leader, never committed) truncates to the end of epoch 1 here.
    node.apply(vec![change(None, Some(OTHER), None)], 0);
    assert_eq!(led.check_leader(-1), Err(ResponseError::NotLeaderOrFollower));
    node.apply(vec![change(None, Some(ME), None)], 0);
    assert_eq!(led.leader(), (ME, 3));
    append(&led, false).unwrap();
    let log = led.partition.log();
    assert_eq!(log.epochs(), &[(1, 0), (3, 2)]);
    assert_eq!(Replica::diverging_epoch(&log, 1, 2), None);
    assert_eq!(Replica::diverging_epoch(&log, 2, 5), Some((1, 2)));
    assert_eq!(Replica::diverging_epoch(&log, 3, 3), None);
    let dir = log.dir().to_path_buf();
    drop(log);
    // Moved away: closed, deleted, out of the registry.
    node.apply(vec![change(Some(&[OTHER]), Some(OTHER), Some(&[OTHER]))], 0);
    assert!(node.manager.get("t", 0).is_none() && !dir.exists());
    let t = node.registry.get("t").unwrap();
    assert_eq!((t.partitions.len(), t.partitions.iter().count()), (1, 0), "known here, hosted elsewhere");
    node.apply(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: TOPIC_ID, ..Default::default() })], 0);
    assert!(node.registry.get("t").is_none());
}

#[tokio::test]
async fn an_acks_all_write_waiting_on_a_replica_moved_away_is_answered_at_once() {
    // A reassignment moves the partition off this leader while an acks=all write waits for its
    // follower: the write is answered NOT_LEADER_OR_FOLLOWER now, not at its deadline.
    let mut node = Node::new();
    node.apply(vec![topic(), partition(0, &[ME, OTHER], &[ME, OTHER], ME, 1, 1)], 0);
    let led = node.manager.get("t", 0).unwrap();
    let end = append(&led, true).unwrap();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let waiting = tokio::spawn({
        let led = led.clone();
        async move { led.wait_acks_all(end, deadline).await }
    });
    tokio::task::yield_now().await;
    node.apply(vec![change(Some(&[OTHER]), Some(OTHER), Some(&[OTHER]))], 0);
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
    assert_eq!(answer.expect("answered before the deadline").unwrap(), Some(ResponseError::NotLeaderOrFollower));
    assert_eq!(led.check_leader(-1), Err(ResponseError::NotLeaderOrFollower));
}

#[tokio::test]
async fn a_follower_ends_transactions_with_the_markers_it_fetches() {
    // The leader writes a transaction and its abort marker; a follower that appends what it
    // fetched must end the transaction too (else, once leader, its last stable offset is stuck).
    let mut node = Node::new();
    node.apply(vec![topic(), partition(0, &[ME], &[ME], ME, 1, 1)], 0);
    let led = node.manager.get("t", 0).unwrap();
    let mut log = led.partition.log();
    let (bytes, summary) = batch::validate_produce(batch::one_record_batch(Some((7, 0)), 0), log.config(), 0).unwrap();
    led.append(&mut log, bytes, &summary, 0, false).unwrap().unwrap();
    assert_eq!(log.producer_state().first_unstable_offset(), Some(0));
    let marker = led.append_marker(&mut log, (7, 0), false, 0, 0).unwrap().unwrap();
    assert_eq!((marker, log.producer_state().first_unstable_offset()), (1, None));
    let fetched = log.read(0, 2, 1 << 20, true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut follower = PartitionLog::open(&dir.path().join("t-0"), log.config().clone(), 0).unwrap();
    for whole in batch::whole_batches(&fetched).unwrap() {
        follower.append_as_follower(whole, 0).unwrap();
    }
    assert_eq!(follower.log_end_offset(), 2);
    assert_eq!(follower.producer_state().first_unstable_offset(), None, "the marker ended it");
    assert_eq!(follower.producer_state().aborted_between(0, 2).len(), 1, "as an aborted transaction");
}

/// A node following partition 0 of `t` (led by the other broker, both in the ISR) that has
/// fetched one record the leader has not committed yet.
fn follower_with_one_fetched_record() -> (Node, Arc<Replica>) {
    let mut node = Node::new();
    node.apply(vec![topic(), partition(0, &[OTHER, ME], &[OTHER, ME], OTHER, 1, 1)], 0);
    let followed = node.manager.get("t", 0).unwrap();
    {
        let mut log = followed.partition.log();
        log.append_as_follower(&batch::one_record_batch(None, 0), 1).unwrap();
        assert_eq!((log.log_end_offset(), log.high_watermark()), (1, 0), "fetched, not committed yet");
    }
    (node, followed)
}

#[tokio::test]
async fn a_leader_alone_in_its_isr_commits_its_whole_log_at_once() {
    // Kafka's makeLeader advances the high watermark: a follower that had fetched records past
    // its checkpointed high watermark and becomes the only replica of the ISR commits them all
    // (else consumers see nothing until the next write).
    let (mut node, followed) = follower_with_one_fetched_record();
    node.apply(vec![change(Some(&[ME]), Some(ME), None)], 10);
    assert_eq!(followed.leader().0, ME);
    assert_eq!(followed.partition.log().high_watermark(), 1, "the ISR is this replica alone");

    // With its follower still in the ISR a new leader waits for the follower's fetch.
    let (mut node, followed) = follower_with_one_fetched_record();
    node.apply(vec![change(None, Some(ME), None)], 10);
    assert_eq!(followed.leader().0, ME);
    assert_eq!(followed.partition.log().high_watermark(), 0, "the follower in the ISR has not fetched");
}

/// A partition directory `name` in `node`'s log directory holding one record (and, with
/// `topic_id`, a `partition.metadata` naming that topic), as a previous process left it.
fn left_on_disk(node: &Node, name: &str, topic_id: Option<Uuid>) -> std::path::PathBuf {
    let dir = node._dir.path().join(name);
    let mut log = PartitionLog::open(&dir, node.config.topic_defaults.clone(), 0).unwrap();
    let (bytes, summary) = batch::validate_produce(batch::one_record_batch(None, 0), log.config(), 0).unwrap();
    crate::replica::append_as_leader(&mut log, bytes, &summary, 0).unwrap();
    log.close().unwrap();
    if let Some(id) = topic_id {
        partition_metadata::write(&dir, id).unwrap();
    }
    dir
}

/// The `-stray` directories of `node`'s log directory whose name starts with `prefix`.
fn strays(node: &Node, prefix: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(node._dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with(prefix) && name.ends_with("-stray")
        })
        .collect()
}

#[tokio::test]
async fn directories_found_at_start_that_the_metadata_does_not_want_are_marked_stray_once_settled() {
    let mut node = Node::new();
    let gone = left_on_disk(&node, "gone-0", Some(Uuid::from_u128(77)));
    let recreated = left_on_disk(&node, "t-0", Some(Uuid::from_u128(78))); // an older topic `t`
    let kept = left_on_disk(&node, "t-1", Some(TOPIC_ID));
    let adopted = left_on_disk(&node, "t-2", None); // written before partition.metadata existed
    let hosted = |p| partition(p, &[ME], &[ME], ME, 1, 1);
    node.apply(vec![topic(), hosted(0), hosted(1), hosted(2)], 0);

    // Not caught up yet: nothing found on disk is removed, and the other topic's directory is
    // not taken for this one's.
    assert!(gone.join("00000000000000000000.log").exists() && strays(&node, "gone-0").is_empty());
    assert!(node.manager.get("t", 0).is_none(), "t-0 holds an older topic's log: not opened");
    assert_eq!(partition_metadata::read(&recreated).unwrap(), Some(Uuid::from_u128(78)));
    assert_eq!(node.manager.get("t", 1).unwrap().partition.log().log_end_offset(), 1);
    assert_eq!(partition_metadata::read(&adopted).unwrap(), Some(TOPIC_ID), "adopted");

    node.manager.settle();
    node.apply(vec![], 10);
    let [stray] = strays(&node, "gone-0.").try_into().expect("gone-0 marked stray");
    assert!(stray.join("00000000000000000000.log").exists() && !gone.exists(), "kept, renamed");
    let [older] = strays(&node, "t-0.").try_into().expect("the older t-0 marked stray");
    assert_eq!(partition_metadata::read(&older).unwrap(), Some(Uuid::from_u128(78)));
    let t0 = node.manager.get("t", 0).expect("t-0 of this topic opened");
    assert_eq!(t0.partition.log().log_end_offset(), 0, "a new, empty log");
    assert_eq!(partition_metadata::read(&recreated).unwrap(), Some(TOPIC_ID));
    assert!(kept.exists() && adopted.exists());

    // Once settled, a replica the image takes away is deleted, as Kafka's StopReplica deletes.
    node.apply(vec![change(Some(&[OTHER]), Some(OTHER), Some(&[OTHER]))], 20);
    assert!(!recreated.exists() && strays(&node, "t-0.").len() == 1, "deleted, not marked stray");
}
