//! JBOD (several `log.dirs`): placement of new partitions on the directory with the fewest
//! partitions (ties by `log.dirs` order), one `meta.properties` and `.lock` per directory,
//! `.ketch/` only in the first, partitions found again after a restart wherever they are, and
//! the start refused (nothing deleted) when a partition is in two directories, when the first
//! directory is missing or the order of `log.dirs` changed; a directory that fails at start or
//! is gone leaves its partitions offline (never recreated empty) until it is back. The last test runs the real binary: data in three directories survives
//! SIGTERM and kill -9, and DescribeLogDirs reports each directory.
//!
//! Moves between directories (AlterReplicaLogDirs, `metadata::replica_move`): a move while
//! other threads append loses and duplicates nothing; a crash after each step of a move
//! (simulated by stopping there and reopening from disk) leaves the partition in exactly one
//! directory, the one its topic file names, with every record appended before the crash.

mod common;

use std::path::{Path, PathBuf};

use ketch::config::{BrokerConfig, Properties};
use ketch::metadata::TopicRegistry;

fn config(dirs: &[&Path]) -> BrokerConfig {
    let mut props = Properties::new();
    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    props.insert("log.dirs".into(), list.join(","));
    BrokerConfig::from_properties(props).unwrap()
}

/// Opens the registry on `dirs`. A `.lock` released by a registry just dropped can still be held
/// for a moment by a child process another test thread is starting (`mount`): the fork copies
/// every descriptor, and the flock goes with the copy until exec closes it. So a refused lock is
/// tried again for up to two seconds (a lock held by a live registry stays refused).
fn open(dirs: &[&Path]) -> anyhow::Result<TopicRegistry> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match TopicRegistry::open(&config(dirs)) {
            Err(e) if e.to_string().contains("Failed to acquire lock") && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

/// For each partition of `topic`, the index (in `dirs`) of the log dir holding it.
fn placement(registry: &TopicRegistry, topic: &str, dirs: &[&Path]) -> Vec<usize> {
    registry
        .get(topic)
        .unwrap()
        .partitions
        .iter()
        .map(|p| {
            let at = dirs.iter().position(|d| std::path::absolute(d).unwrap() == p.log_dir()).unwrap();
            assert!(dirs[at].join(format!("{topic}-{}", p.index)).is_dir(), "{topic}-{} on disk in {at}", p.index);
            at
        })
        .collect()
}

/// The log directory recorded for each partition of `topic` in the metadata image, as
/// comma-separated `directory.id`s.
fn stored_directories(registry: &TopicRegistry, topic: &str) -> String {
    let image = registry.metadata_image();
    let topic = image.topic(topic).unwrap();
    let ids: Vec<String> = topic.partitions.values().map(|p| ketch::metadata::print_uuid(&p.directories[0])).collect();
    ids.join(",")
}

fn meta(dir: &Path) -> Properties {
    ketch::config::parse_properties(&std::fs::read_to_string(dir.join("meta.properties")).unwrap()).unwrap()
}

/// What DescribeLogDirs says of one directory: its path, (partition, size) of topic "t", total bytes.
type DirSeen = (String, Vec<(i32, i64)>, i64);

struct Dirs {
    _root: tempfile::TempDir,
    paths: Vec<PathBuf>,
}

impl Dirs {
    fn new(n: usize) -> Dirs {
        let root = tempfile::tempdir().unwrap();
        let paths = (0..n).map(|i| root.path().join(format!("d{i}"))).collect();
        Dirs { _root: root, paths }
    }
    fn refs(&self) -> Vec<&Path> {
        self.paths.iter().map(PathBuf::as_path).collect()
    }
}

#[test]
fn new_partitions_go_to_the_directory_with_the_fewest_ties_by_order() {
    let d = Dirs::new(3);
    let dirs = d.refs();
    let registry = open(&dirs).unwrap();
    registry.create("a", 4, Properties::new()).unwrap();
    assert_eq!(placement(&registry, "a", &dirs), vec![0, 1, 2, 0]);
    registry.create("b", 2, Properties::new()).unwrap();
    assert_eq!(placement(&registry, "b", &dirs), vec![1, 2], "dirs 1 and 2 had one partition fewer");
    registry.add_partitions("a", 7, false).unwrap();
    assert_eq!(placement(&registry, "a", &dirs), vec![0, 1, 2, 0, 0, 1, 2]);
    registry.create("__consumer_offsets", 5, Properties::new()).unwrap();
    assert_eq!(placement(&registry, "__consumer_offsets", &dirs), vec![0, 1, 2, 0, 1], "internal topics too");
    // Deleting frees room: the next partitions fill the emptier directories first.
    registry.delete("b").unwrap();
    registry.create("c", 2, Properties::new()).unwrap();
    assert_eq!(placement(&registry, "c", &dirs), vec![2, 1], "5/4/3 partitions, then 5/4/4: a tie goes to the earlier");

    // One meta.properties and .lock per directory; one cluster; distinct directory ids;
    // Ketch's own metadata only in the first.
    let metas: Vec<_> = dirs.iter().map(|d| meta(d)).collect();
    for (dir, m) in dirs.iter().zip(&metas) {
        assert!(dir.join(".lock").exists(), "{} has a .lock", dir.display());
        assert_eq!(m.get("version").map(String::as_str), Some("1"));
        assert_eq!(m.get("cluster.id"), metas[0].get("cluster.id"));
        assert_eq!(m.get("node.id").map(String::as_str), Some("1"));
        assert_eq!(m.get("directory.id").unwrap().len(), 22, "Kafka's base64 Uuid");
    }
    let ids: std::collections::HashSet<_> = metas.iter().map(|m| m.get("directory.id").unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert!(dirs[0].join("__cluster_metadata-0").is_dir(), "the metadata log is in the first directory");
    for other in &dirs[1..] {
        assert!(!other.join(".ketch").exists() && !other.join("__cluster_metadata-0").exists());
    }
    assert_eq!(registry.log_dirs().cluster_id(), metas[0].get("cluster.id").unwrap());
}

#[test]
fn partitions_are_found_again_after_a_restart_and_moves_by_hand_are_recorded() {
    let d = Dirs::new(3);
    let dirs = d.refs();
    let registry = open(&dirs).unwrap();
    registry.create("a", 6, Properties::new()).unwrap();
    let id = registry.get("a").unwrap().id;
    let cluster = registry.log_dirs().cluster_id().to_string();
    drop(registry);

    let registry = open(&dirs).unwrap();
    assert_eq!(placement(&registry, "a", &dirs), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(registry.get("a").unwrap().id, id);
    assert_eq!(registry.log_dirs().cluster_id(), cluster);
    // A second broker on any of the directories refuses to start (each is locked).
    let err = TopicRegistry::open(&config(&[&d._root.path().join("other"), dirs[2]])).unwrap_err().to_string();
    assert!(err.contains("Failed to acquire lock"), "{err}");
    drop(registry);

    // Moved by hand while stopped: found where it is, and that is recorded.
    std::fs::rename(dirs[0].join("a-3"), dirs[2].join("a-3")).unwrap();
    let registry = open(&dirs).unwrap();
    assert_eq!(placement(&registry, "a", &dirs), vec![0, 1, 2, 2, 1, 2]);
    let stored = stored_directories(&registry, "a");
    let id2 = meta(dirs[2]).get("directory.id").unwrap().clone();
    let line = format!("directories={stored}");
    assert_eq!(line.split(',').nth(3), Some(id2.as_str()), "{line}");
}

#[test]
fn a_partition_in_two_directories_refuses_to_start_and_nothing_is_removed() {
    let d = Dirs::new(2);
    let dirs = d.refs();
    open(&dirs).unwrap().create("a", 2, Properties::new()).unwrap();
    std::fs::create_dir(dirs[1].join("a-0")).unwrap();
    let err = open(&dirs).unwrap_err().to_string();
    assert!(err.contains("Duplicate log directories for a-0"), "{err}");
    assert!(dirs[0].join("a-0").is_dir() && dirs[1].join("a-0").is_dir() && dirs[1].join("a-1").is_dir());
}

#[test]
fn partitions_of_a_directory_failed_or_gone_at_start_are_offline_and_come_back_with_it() {
    let d = Dirs::new(3);
    let dirs = d.refs();
    {
        let registry = open(&dirs).unwrap();
        registry.create("a", 3, Properties::new()).unwrap();
        append(&registry.partition("a", 2).unwrap(), "kept");
    }
    let offline = |registry: &TopicRegistry, p: i32| registry.partition("a", p).unwrap().log().health().is_offline();
    // The third disk fails to mount: its path is now a plain file. The start goes on without
    // it; its partition is offline (reads refused), the others are served.
    let away = d._root.path().join("away");
    std::fs::rename(dirs[2], &away).unwrap();
    std::fs::write(dirs[2], b"not a directory").unwrap();
    {
        let registry = open(&dirs).unwrap();
        assert!(registry.log_dirs().dirs()[2].health.is_offline());
        assert_eq!((offline(&registry, 0), offline(&registry, 1), offline(&registry, 2)), (false, false, true));
        assert!(registry.partition("a", 2).unwrap().log().read(0, 10, 1000, true).is_err());
        append(&registry.partition("a", 0).unwrap(), "served");
        // New partitions avoid the offline directory.
        registry.create("b", 2, Properties::new()).unwrap();
        assert!(placement(&registry, "b", &dirs[..2]).iter().all(|&i| i < 2));
    }
    // The disk is back: the partition is served again, with its data.
    std::fs::remove_file(dirs[2]).unwrap();
    std::fs::rename(&away, dirs[2]).unwrap();
    {
        let registry = open(&dirs).unwrap();
        assert!(!offline(&registry, 2));
        assert_eq!(placement(&registry, "a", &dirs), vec![0, 1, 2]);
        assert!(!registry.partition("a", 2).unwrap().log().read(0, 10, 1000, true).unwrap().is_empty());
    }
    // The disk is replaced by an empty one (or dropped from log.dirs): its partition stays
    // offline and is never recreated empty; its recorded directory is kept.
    std::fs::rename(dirs[2], &away).unwrap();
    for listed in [&dirs[..], &dirs[..2]] {
        let registry = open(listed).unwrap();
        assert!(offline(&registry, 2));
        assert!(!offline(&registry, 0) && !offline(&registry, 1));
        assert!(!dirs[0].join("a-2").exists() && !dirs[1].join("a-2").exists(), "not recreated");
    }
    std::fs::remove_dir_all(dirs[2]).unwrap();
    std::fs::rename(&away, dirs[2]).unwrap();
    let registry = open(&dirs).unwrap();
    assert!(!offline(&registry, 2), "the recorded directory was kept while it was gone");
}

#[test]
fn a_missing_first_directory_or_a_new_order_refuses_to_start() {
    let d = Dirs::new(3);
    let dirs = d.refs();
    open(&dirs).unwrap().create("a", 3, Properties::new()).unwrap();
    let err = open(&[dirs[1], dirs[0], dirs[2]]).unwrap_err().to_string();
    assert!(err.contains("not the first entry of log.dirs"), "{err}");
    let fresh = d._root.path().join("fresh");
    let err = open(&[&fresh, dirs[1], dirs[2]]).unwrap_err().to_string();
    assert!(err.contains("No meta.properties found in"), "{err}");
    let err = open(&[dirs[0], dirs[1], dirs[0]]).unwrap_err().to_string();
    assert!(err.contains("Duplicate log directory found"), "{err}");
    // Nothing was lost on the way.
    let registry = open(&dirs).unwrap();
    assert_eq!(placement(&registry, "a", &dirs), vec![0, 1, 2]);
}

#[test]
fn a_single_directory_from_before_jbod_gains_ids_and_a_new_directory_fills_first() {
    let d = Dirs::new(2);
    let dirs = d.refs();
    let id = open(&dirs[..1]).unwrap().create("a", 2, Properties::new()).unwrap().id;
    // What an older Ketch wrote: no directory.id, no directories= line, topic files instead of
    // the metadata log.
    std::fs::write(dirs[0].join("meta.properties"), "version=1\ncluster.id=old-cluster\nnode.id=1\n").unwrap();
    std::fs::remove_dir_all(dirs[0].join("__cluster_metadata-0")).unwrap();
    std::fs::create_dir_all(dirs[0].join(".ketch/topics")).unwrap();
    std::fs::write(dirs[0].join(".ketch/topics/a.properties"), format!("topic.id={id}\npartitions=2\n")).unwrap();

    // A second, empty directory is added.
    let registry = open(&dirs).unwrap();
    assert_eq!(registry.log_dirs().cluster_id(), "old-cluster");
    assert_eq!(meta(dirs[0]).get("cluster.id").map(String::as_str), Some("old-cluster"));
    assert!(meta(dirs[0]).contains_key("directory.id"));
    assert_eq!(meta(dirs[1]).get("cluster.id").map(String::as_str), Some("old-cluster"));
    assert_eq!(registry.get("a").unwrap().id, id, "the topic moved into the metadata log with its id");
    let first = meta(dirs[0]).get("directory.id").unwrap().clone();
    assert_eq!(stored_directories(&registry, "a"), format!("{first},{first}"), "directories are recorded");
    registry.create("b", 3, Properties::new()).unwrap();
    assert_eq!(placement(&registry, "b", &dirs), vec![1, 1, 0], "the empty directory first, then by order");
}

/// The real binary with three directories: partitions spread, records survive SIGTERM and
/// kill -9, DescribeLogDirs lists each directory with its partitions and sizes.
#[test]
fn three_directories_serve_and_survive_restarts() {
    use common::*;
    use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
    use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = (0..3).map(|i| root.path().join(format!("d{i}"))).collect();
    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let log_dirs = format!("log.dirs={}", list.join(","));
    let args = [log_dirs.as_str()];
    let mut broker = TestBroker::start(&args);
    let mut s = broker.connect();
    create_topic(&mut s, "t", 6);
    // `produce` writes to t-0; the other partitions stay empty.
    for i in 0..5 {
        assert_eq!(produce(&mut s, batch(&format!("v{i}"))), (0, i));
    }
    let end_offsets = |s: &mut std::net::TcpStream| -> Vec<i64> {
        let topic = ListOffsetsTopic::default().with_name(TopicName(StrBytes::from_static_str("t"))).with_partitions(
            (0..6).map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(-1)).collect(),
        );
        let req = ListOffsetsRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![topic]);
        match call(s, ApiKey::ListOffsets, 7, RequestKind::ListOffsets(req)) {
            ResponseKind::ListOffsets(r) => r.topics[0].partitions.iter().map(|p| p.offset).collect(),
            other => panic!("{other:?}"),
        }
    };
    let describe = |s: &mut std::net::TcpStream| -> Vec<DirSeen> {
        match call(
            s,
            ApiKey::DescribeLogDirs,
            4,
            RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(None)),
        ) {
            ResponseKind::DescribeLogDirs(r) => r
                .results
                .iter()
                .map(|d| {
                    let parts = d
                        .topics
                        .iter()
                        .filter(|t| t.name.0.as_str() == "t")
                        .flat_map(|t| t.partitions.iter().map(|p| (p.partition_index, p.partition_size)))
                        .collect();
                    assert_eq!(d.error_code, 0);
                    (d.log_dir.as_str().to_string(), parts, d.total_bytes)
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(end_offsets(&mut s), vec![5, 0, 0, 0, 0, 0]);
    let check = |seen: Vec<DirSeen>| {
        assert_eq!(seen.iter().map(|d| d.0.clone()).collect::<Vec<_>>(), list, "every directory, in order");
        let indexes: Vec<Vec<i32>> = seen.iter().map(|d| d.1.iter().map(|p| p.0).collect()).collect();
        assert_eq!(indexes, vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
        assert!(seen[0].1[0].1 > 0, "t-0 holds the records");
        assert!(seen.iter().all(|d| d.2 > 0), "total bytes of each volume");
    };
    check(describe(&mut s));
    drop(s);

    assert!(terminate(&mut broker), "clean exit on SIGTERM");
    let dir = std::mem::replace(&mut broker.dir, tempfile::tempdir().unwrap());
    let broker = TestBroker::start_in(dir, &args);
    let mut s = broker.connect();
    assert_eq!(end_offsets(&mut s), vec![5, 0, 0, 0, 0, 0], "after SIGTERM");
    check(describe(&mut s));
    assert_eq!(produce(&mut s, batch("after")), (0, 5));
    drop(s);

    let dir = broker.kill9();
    let broker = TestBroker::start_in(dir, &args);
    let mut s = broker.connect();
    assert_eq!(end_offsets(&mut s), vec![6, 0, 0, 0, 0, 0], "after kill -9");
    check(describe(&mut s));
}

fn props(pairs: &[(&str, &str)]) -> Properties {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Appends one record holding `value` to `partition`; returns its offset.
fn append(partition: &ketch::log::Partition, value: &str) -> i64 {
    let now = ketch::log::now_ms();
    let mut log = partition.log();
    let (bytes, summary) =
        ketch::log::batch::validate_produce(common::batch(value).to_vec(), log.config(), now).unwrap();
    ketch::replica::append_as_leader(&mut log, bytes, &summary, now).unwrap().base_offset
}

/// Every record value of `partition`, in offset order.
fn values(partition: &ketch::log::Partition) -> Vec<String> {
    let log = partition.log();
    let mut out = Vec::new();
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let mut bytes = bytes::Bytes::from(log.read(next, log.log_end_offset(), usize::MAX, true).unwrap());
        assert!(!bytes.is_empty(), "nothing read at {next}");
        while !bytes.is_empty() {
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
            for r in set.records {
                assert_eq!(r.offset, next, "offsets contiguous");
                next += 1;
                out.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
            }
        }
    }
    out
}

/// Where `<topic>-<p>` is on disk (indexes in `dirs`), and leftovers of moves.
fn on_disk(dirs: &[&Path], name: &str) -> (Vec<usize>, Vec<String>) {
    let mut at = Vec::new();
    let mut leftovers = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        for e in std::fs::read_dir(d).unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            if n == name {
                at.push(i);
            } else if n.starts_with(&format!("{name}.")) {
                leftovers.push(n);
            }
        }
    }
    (at, leftovers)
}

#[test]
fn a_move_under_concurrent_appends_loses_nothing() {
    use ketch::metadata::replica_move::MoveOutcome;
    let d = Dirs::new(2);
    let dirs = d.refs();
    let registry = std::sync::Arc::new(open(&dirs).unwrap());
    registry.create("m", 1, props(&[("segment.bytes", "2000")])).unwrap();
    let partition = registry.partition("m", 0).unwrap();
    for i in 0..300 {
        assert_eq!(append(&partition, &format!("before-{i}")), i);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (registry, stop) = (registry.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || i < 200 {
                    // Looked up each time, as a request does.
                    let p = registry.partition("m", 0).unwrap();
                    acked.push((append(&p, &format!("w{w}-{i}")), format!("w{w}-{i}")));
                    i += 1;
                }
                acked
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(registry.move_partition("m", 0, 1, None).unwrap(), MoveOutcome::Done);
    std::thread::sleep(std::time::Duration::from_millis(20));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acked: Vec<(i64, String)> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    acked.extend((0..300).map(|i| (i, format!("before-{i}"))));
    acked.sort();
    assert!(acked.len() > 700, "appends went on during the move: {}", acked.len());
    let expect: Vec<String> = acked.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(acked.iter().map(|(o, _)| *o).collect::<Vec<_>>(), (0..acked.len() as i64).collect::<Vec<_>>());
    assert_eq!(placement(&registry, "m", &dirs), vec![1]);
    let got = values(&partition);
    assert_eq!(got.len(), expect.len(), "every acknowledged record, once");
    assert!(got == expect, "every acknowledged record at its offset after the move");
    assert!(partition.log().segment_sizes().len() > 3, "several segments were copied");
    assert_eq!(on_disk(&dirs, "m-0"), (vec![1], vec![]), "only in the new directory, no leftovers");
    // Still serving from the new place, and after a restart.
    append(&partition, "after");
    drop(partition);
    drop(registry);
    let registry = open(&dirs).unwrap();
    assert_eq!(placement(&registry, "m", &dirs), vec![1]);
    let mut expect = expect;
    expect.push("after".into());
    assert!(values(&registry.partition("m", 0).unwrap()) == expect, "after a restart");
    // And back: moving to where it is does nothing.
    assert_eq!(registry.move_partition("m", 0, 1, None).unwrap(), MoveOutcome::NothingToDo);
    assert_eq!(registry.move_partition("m", 0, 0, None).unwrap(), MoveOutcome::Done);
    assert_eq!(placement(&registry, "m", &dirs), vec![0]);
    assert!(values(&registry.partition("m", 0).unwrap()) == expect, "after moving back");
}

#[test]
fn a_crash_at_each_step_of_a_move_recovers_to_one_directory_with_every_record() {
    use ketch::metadata::replica_move::{MoveOutcome, MoveStep};
    let steps = [
        (MoveStep::FutureCreated, 0),
        (MoveStep::Copied, 0),
        (MoveStep::TailCopied, 0),
        (MoveStep::Committed, 1),
        (MoveStep::SourceRenamed, 1),
        (MoveStep::FutureRenamed, 1),
    ];
    for (step, expected_dir) in steps {
        let d = Dirs::new(2);
        let dirs = d.refs();
        let registry = open(&dirs).unwrap();
        registry.create("c", 2, props(&[("segment.bytes", "1500")])).unwrap();
        assert_eq!(placement(&registry, "c", &dirs), vec![0, 1]);
        let partition = registry.partition("c", 0).unwrap();
        let mut expect: Vec<String> = (0..150).map(|i| format!("r{i}")).collect();
        for v in &expect {
            append(&partition, v);
        }
        assert_eq!(registry.move_partition("c", 0, 1, Some(step)).unwrap(), MoveOutcome::Stopped, "{step:?}");
        drop(partition);
        drop(registry);

        let registry = open(&dirs).unwrap();
        assert_eq!(placement(&registry, "c", &dirs), vec![expected_dir, 1], "after a crash at {step:?}");
        assert_eq!(on_disk(&dirs, "c-0"), (vec![expected_dir], vec![]), "one copy, no leftovers, at {step:?}");
        let id = meta(dirs[expected_dir]).get("directory.id").unwrap().clone();
        let stored = stored_directories(&registry, "c");
        assert!(stored.starts_with(&format!("{id},")), "{step:?}: {stored}");
        let partition = registry.partition("c", 0).unwrap();
        assert_eq!(values(&partition), expect, "every record after a crash at {step:?}");
        // The partition serves, and a new move completes.
        append(&partition, "more");
        expect.push("more".into());
        let other = 1 - expected_dir;
        assert_eq!(registry.move_partition("c", 0, other, None).unwrap(), MoveOutcome::Done);
        assert_eq!(values(&partition), expect);
        assert_eq!(on_disk(&dirs, "c-0"), (vec![other], vec![]));
    }
}

/// Unmounts a tmpfs when dropped (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// A tmpfs of `size` at `dir`. Where mounting is not permitted (not root, no
    /// CAP_SYS_ADMIN) the test fails: it cannot run there, and a skip would pass.
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot mount a tmpfs at {} (this test needs root or CAP_SYS_ADMIN)", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A directory that fails at run time (a 1 MiB tmpfs filled up: ENOSPC) goes offline: its
/// partition answers KAFKA_STORAGE_ERROR to Produce, Fetch and ListOffsets, Metadata shows it
/// without a leader (LEADER_NOT_AVAILABLE, replica offline) and DescribeLogDirs reports the
/// directory with KAFKA_STORAGE_ERROR, while the partition of the other directory keeps serving.
#[test]
fn a_directory_that_fails_at_run_time_goes_offline_and_the_others_keep_serving() {
    use common::*;
    use kafka_protocol::messages::describe_log_dirs_request::DescribeLogDirsRequest;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic};
    use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, BrokerId, RequestKind, ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let root = tempfile::tempdir().unwrap();
    let (d0, d1) = (root.path().join("d0"), root.path().join("d1"));
    let _mount = Tmpfs::mount(&d1, "1m");
    let log_dirs = format!("log.dirs={},{}", d0.display(), d1.display());
    let broker = TestBroker::start(&[log_dirs.as_str()]);
    let mut s = broker.connect();
    let t = || TopicName(StrBytes::from_static_str("t"));
    create_topic(&mut s, "t", 2);
    assert!(d0.join("t-0").is_dir() && d1.join("t-1").is_dir(), "one partition in each directory");
    let produce_to = |s: &mut std::net::TcpStream, p: i32, value: &str| -> i16 {
        let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(5000).with_topic_data(vec![
            TopicProduceData::default().with_name(t()).with_partition_data(vec![PartitionProduceData::default()
                .with_index(p)
                .with_records(Some(batch(value)))]),
        ]);
        match call(s, ApiKey::Produce, 9, RequestKind::Produce(request)) {
            ResponseKind::Produce(r) => r.responses[0].partition_responses[0].error_code,
            other => panic!("{other:?}"),
        }
    };
    let big = "x".repeat(100_000);
    let mut codes = Vec::new();
    for _ in 0..40 {
        let code = produce_to(&mut s, 1, &big);
        codes.push(code);
        if code != 0 {
            break;
        }
    }
    assert_eq!(codes.last(), Some(&56), "the full tmpfs fails an append with KAFKA_STORAGE_ERROR: {codes:?}");
    assert!(codes.len() > 3, "{codes:?}");
    // Offline from now on, even for a record that would fit; the other directory serves.
    assert_eq!(produce_to(&mut s, 1, "small"), 56);
    assert_eq!(produce_to(&mut s, 0, "fine"), 0);
    assert_eq!(produce_to(&mut s, 0, "fine again"), 0);

    let fetch =
        FetchRequest::default().with_max_wait_ms(0).with_max_bytes(1 << 20).with_topics(vec![FetchTopic::default()
            .with_topic(t())
            .with_partitions(
                (0..2).map(|p| FetchPartition::default().with_partition(p).with_partition_max_bytes(1 << 20)).collect(),
            )]);
    match call(&mut s, ApiKey::Fetch, 12, RequestKind::Fetch(fetch)) {
        ResponseKind::Fetch(r) => {
            let ps = &r.responses[0].partitions;
            assert_eq!((ps[0].error_code, ps[1].error_code), (0, 56));
            assert!(ps[0].records.as_ref().is_some_and(|b| !b.is_empty()), "records of t-0");
        }
        other => panic!("{other:?}"),
    }
    let list =
        ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![ListOffsetsTopic::default()
            .with_name(t())
            .with_partitions(
                (0..2).map(|p| ListOffsetsPartition::default().with_partition_index(p).with_timestamp(-1)).collect(),
            )]);
    match call(&mut s, ApiKey::ListOffsets, 7, RequestKind::ListOffsets(list)) {
        ResponseKind::ListOffsets(r) => {
            let ps = &r.topics[0].partitions;
            assert_eq!((ps[0].error_code, ps[0].offset, ps[1].error_code), (0, 2, 56));
        }
        other => panic!("{other:?}"),
    }
    let metadata =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(t()))]));
    match call(&mut s, ApiKey::Metadata, 12, RequestKind::Metadata(metadata)) {
        ResponseKind::Metadata(r) => {
            let ps = &r.topics[0].partitions;
            assert_eq!((ps[0].error_code, ps[0].leader_id.0), (0, 1));
            assert_eq!((ps[1].error_code, ps[1].leader_id.0), (5, -1), "LEADER_NOT_AVAILABLE, no leader");
            assert_eq!(ps[1].offline_replicas, vec![BrokerId(1)]);
        }
        other => panic!("{other:?}"),
    }
    let describe = DescribeLogDirsRequest::default().with_topics(None);
    match call(&mut s, ApiKey::DescribeLogDirs, 4, RequestKind::DescribeLogDirs(describe)) {
        ResponseKind::DescribeLogDirs(r) => {
            let seen: Vec<(String, i16, usize)> =
                r.results.iter().map(|d| (d.log_dir.to_string(), d.error_code, d.topics.len())).collect();
            let want = vec![(d0.display().to_string(), 0, 1), (d1.display().to_string(), 56, 0)];
            assert_eq!(seen, want);
        }
        other => panic!("{other:?}"),
    }
    // New partitions go to the online directory only.
    create_topic(&mut s, "u", 2);
    assert!(d0.join("u-0").is_dir() && d0.join("u-1").is_dir());
    drop(s);
    drop(broker);
}
