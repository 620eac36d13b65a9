//! The clean shutdown marker's broker epoch (KIP-966 clean shutdown detection).

use super::marker_broker_epoch;

#[test]
fn the_marker_gives_its_broker_epoch_or_none() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join(super::CLEAN_SHUTDOWN_MARKER);
    assert_eq!(marker_broker_epoch(&marker), -1, "no marker");
    std::fs::write(&marker, "clean\n").unwrap();
    assert_eq!(marker_broker_epoch(&marker), -1, "a marker of a process that never registered");
    std::fs::write(&marker, "clean\nbroker.epoch=4711\n").unwrap();
    assert_eq!(marker_broker_epoch(&marker), 4711);
    std::fs::write(&marker, "clean\nbroker.epoch=junk\n").unwrap();
    assert_eq!(marker_broker_epoch(&marker), -1, "unreadable: as after a crash");
}
