//! `ketch format` / `ketch random-uuid` (Kafka's `kafka-storage format` / `random-uuid`): the
//! directories get `meta.properties` with the given cluster id, the node id and a distinct
//! `directory.id` each; a formatted directory is refused (or skipped with --ignore-formatted);
//! a bad cluster id is refused; `--feature` sets the starting level; the broker then starts on
//! the formatted directories and keeps the cluster id.

mod common;

use std::process::Command;

fn ketch(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ketch")).args(args).output().unwrap()
}

fn meta(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("meta.properties")).unwrap()
}

#[test]
fn format_writes_kafkas_meta_properties_and_refuses_to_format_twice() {
    let out = ketch(&["random-uuid"]);
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(id.len(), 22, "{id}");
    assert!(!id.starts_with('-'));
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let dirs = format!("log.dirs={},{}", a.display(), b.display());
    let args = ["format", "-t", id.as_str(), "--override", dirs.as_str(), "--override", "node.id=3"];
    let out = ketch(&[&args[..], &["--feature", "transaction.version=1"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(printed.contains("Formatting metadata directory") && printed.contains("Formatting data directory"));
    let (ma, mb) = (meta(&a), meta(&b));
    for m in [&ma, &mb] {
        assert!(m.contains(&format!("cluster.id={id}\n")) && m.contains("node.id=3\n") && m.contains("version=1\n"));
    }
    let dir_id = |m: &str| m.lines().find(|l| l.starts_with("directory.id=")).unwrap().to_string();
    assert_ne!(dir_id(&ma), dir_id(&mb));
    assert!(std::fs::read_to_string(a.join(".ketch/features.properties")).unwrap().contains("transaction.version=1"));

    let again = ketch(&args);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is already formatted. Use --ignore-formatted"));
    assert_eq!(meta(&a), ma, "a formatted directory is never rewritten");
    let c = root.path().join("c");
    let three = format!("log.dirs={},{},{}", a.display(), b.display(), c.display());
    let out = ketch(&["format", "-t", &id, "--override", &three, "--override", "node.id=3", "--ignore-formatted"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(meta(&c).contains(&format!("cluster.id={id}\n")));
    assert_eq!(meta(&b), mb);
    // Everything formatted: Kafka's formatter says so and succeeds with --ignore-formatted.
    let out = ketch(&["format", "-t", &id, "--override", &three, "--override", "node.id=3", "--ignore-formatted"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("All of the log directories are already formatted."));

    let bad =
        ketch(&["format", "-t", "not-a-uuid", "--override", &format!("log.dirs={}", root.path().join("d").display())]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("does not appear to be a valid UUID"));
    assert!(!root.path().join("d").join("meta.properties").exists());

    // The broker starts on what format wrote and keeps its cluster id.
    let mut broker = common::TestBroker::start(&[&three, "node.id=3"]);
    assert!(broker.alive());
    drop(broker.kill9());
    assert!(meta(&a).contains(&format!("cluster.id={id}\n")));
}
