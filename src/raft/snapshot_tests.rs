//! Tests of KRaft snapshots on a broker's copy of the metadata log: a snapshot reads back only
//! whole (header first, footer last, CRCs), a download takes the leader's chunks in order and
//! within the announced size, and a copy restarted at a snapshot reopens from it.

use super::*;
use crate::metadata::records::{ApiMessageAndVersion, TopicRecord};
use crate::raft::{data_record, MetadataLog, METADATA_LOG_DIR_NAME};
use bytes::BytesMut;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};
use uuid::Uuid;

fn topic(name: &str) -> MetadataRecord {
    MetadataRecord::Topic(TopicRecord {
        name: name.into(),
        topic_id: Uuid::from_bytes(crate::metadata::random_bytes()),
        ..Default::default()
    })
}

fn encode(records: &[Record]) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    buf.to_vec()
}

fn control(offset: i64, kind: i16) -> Vec<u8> {
    let mut record = data_record(offset, Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 0);
    record.control = true;
    record.sequence = -1;
    record.key = Some(Bytes::from([0i16.to_be_bytes(), kind.to_be_bytes()].concat()));
    encode(&[record])
}

/// One data batch of `records` at `offset`, written in `epoch`.
fn data(offset: i64, epoch: i32, records: &[MetadataRecord]) -> Vec<u8> {
    let encoded: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let value = ApiMessageAndVersion { record: r.clone(), version: r.highest_version() }.encode().unwrap();
            let mut record = data_record(offset + i as i64, Bytes::from(value), 0);
            record.sequence = -1;
            record.partition_leader_epoch = epoch;
            record
        })
        .collect();
    encode(&encoded)
}

fn snapshot_bytes(records: &[MetadataRecord], header: bool, footer: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    if header {
        bytes.extend(control(0, SNAPSHOT_HEADER));
    }
    bytes.extend(data(1, 0, records));
    if footer {
        bytes.extend(control(1 + records.len() as i64, SNAPSHOT_FOOTER));
    }
    bytes
}

fn download(dir: &Path, id: SnapshotId, bytes: &[u8], chunk: usize) -> anyhow::Result<Vec<MetadataRecord>> {
    let mut d = Download::begin(dir, id)?;
    for piece in bytes.chunks(chunk) {
        d.write(bytes.len() as i64, d.position, piece)?;
    }
    d.finish()
}

#[test]
fn a_snapshot_reads_back_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![topic("a"), topic("b")];
    let id = SnapshotId { end_offset: 42, epoch: 3 };
    assert_eq!(id.file_name(), "00000000000000000042-0000000003.checkpoint");
    assert_eq!(download(dir.path(), id, &snapshot_bytes(&records, true, true), 7).unwrap(), records);
    assert_eq!(list(dir.path()).unwrap(), vec![id]);
    assert_eq!(read(dir.path(), id).unwrap(), records);

    let no_footer = SnapshotId { end_offset: 50, epoch: 3 };
    let err = download(dir.path(), no_footer, &snapshot_bytes(&records, true, false), 1 << 20).unwrap_err();
    assert!(err.to_string().contains("footer"), "{err}");
    let no_header = SnapshotId { end_offset: 51, epoch: 3 };
    let err = download(dir.path(), no_header, &snapshot_bytes(&records, false, true), 1 << 20).unwrap_err();
    assert!(err.to_string().contains("header"), "{err}");
    let mut corrupt = snapshot_bytes(&records, true, true);
    // Inside the first data batch's records (the CRC covers them, not the base offset).
    let at = control(0, SNAPSHOT_HEADER).len() + 80;
    corrupt[at] ^= 0xff;
    let torn = SnapshotId { end_offset: 52, epoch: 3 };
    assert!(download(dir.path(), torn, &corrupt, 1 << 20).is_err());
    assert_eq!(list(dir.path()).unwrap(), vec![id], "refused downloads leave nothing behind");

    // Kafka's bootstrap checkpoint (0-0) and partial downloads are not snapshots to load.
    std::fs::write(dir.path().join("00000000000000000000-0000000000.checkpoint"), b"").unwrap();
    std::fs::write(dir.path().join("00000000000000000060-0000000003.checkpoint.part"), b"x").unwrap();
    assert_eq!(list(dir.path()).unwrap(), vec![id]);
    assert!(!dir.path().join("00000000000000000060-0000000003.checkpoint.part").exists());
}

#[test]
fn a_download_takes_the_leaders_chunks_in_order_within_the_announced_size() {
    let dir = tempfile::tempdir().unwrap();
    let id = SnapshotId { end_offset: 9, epoch: 1 };
    let mut d = Download::begin(dir.path(), id).unwrap();
    assert!(d.write(10, 0, &[0; 4]).is_ok());
    assert!(d.write(10, 0, &[0; 4]).is_err(), "the same position again");
    assert!(d.write(11, 4, &[0; 4]).is_err(), "another size");
    assert!(d.write(10, 4, &[0; 7]).is_err(), "past the size");
    assert!(d.write(10, 4, &[]).is_err(), "an empty chunk");
    assert!(d.write(0, 0, &[]).is_err());
    assert!(Download::begin(dir.path(), id).unwrap().write(MAX_SNAPSHOT_BYTES + 1, 0, &[0]).is_err());
    assert!(!d.done());
    d.write(10, 4, &[0; 6]).unwrap();
    assert!(d.done());
    assert!(d.finish().is_err(), "ten zero bytes are no snapshot");
}

#[test]
fn a_copy_restarted_at_a_snapshot_reopens_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, records) = MetadataLog::open_replica(dir.path(), 2, 0).unwrap();
    assert!(records.is_empty());
    log.append_fetched(&data(0, 1, &[topic("old")])).unwrap();
    let log_dir = dir.path().join(METADATA_LOG_DIR_NAME);
    let id = SnapshotId { end_offset: 100, epoch: 4 };
    let state = vec![topic("a"), topic("b")];
    download(&log_dir, id, &snapshot_bytes(&state, true, true), 1 << 20).unwrap();
    log.start_at(id, 0).unwrap();
    assert_eq!((log.end_offset(), log.epoch()), (100, 4));
    log.append_fetched(&data(100, 5, &[topic("c")])).unwrap();
    log.close().unwrap();
    drop(log);

    let (log, records) = MetadataLog::open_replica(dir.path(), 2, 0).unwrap();
    let seen: Vec<(i64, String)> = records
        .iter()
        .map(|(o, r)| match r {
            MetadataRecord::Topic(t) => (*o, t.name.clone()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(seen, vec![(99, "a".into()), (99, "b".into()), (100, "c".into())]);
    assert_eq!((log.end_offset(), log.epoch()), (101, 5));
    drop(log);

    // A crash after the snapshot was stored but before the copy restarted at it: the old
    // prefix is dropped at the next open.
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = MetadataLog::open_replica(dir.path(), 2, 0).unwrap();
    log.append_fetched(&data(0, 1, &[topic("old")])).unwrap();
    log.close().unwrap();
    drop(log);
    let log_dir = dir.path().join(METADATA_LOG_DIR_NAME);
    download(&log_dir, id, &snapshot_bytes(&state, true, true), 1 << 20).unwrap();
    let (log, records) = MetadataLog::open_replica(dir.path(), 2, 0).unwrap();
    assert_eq!(records.len(), 2, "the snapshot's records only: {records:?}");
    assert_eq!((log.end_offset(), log.epoch()), (100, 4));
}

#[test]
fn a_written_snapshot_has_kafkas_layout_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<MetadataRecord> = (0..2500).map(|i| topic(&format!("t{i}"))).collect();
    let id = SnapshotId { end_offset: 9000, epoch: 7 };
    let size = write(dir.path(), id, &records, None, (1234, 5678)).unwrap();
    assert_eq!(list(dir.path()).unwrap(), vec![id], "complete, under its final name, no .part left");
    assert_eq!(read(dir.path(), id).unwrap(), records);
    let bytes = std::fs::read(dir.path().join(id.file_name())).unwrap();
    assert_eq!(bytes.len() as u64, size);
    assert_eq!(size, super::size(dir.path(), id).unwrap());
    // Header, three data batches (1000 records each at most), footer: offsets run 0.. through
    // the file, each batch in the snapshot's epoch, control batches only at both ends.
    let batches = batch::whole_batches(&bytes).unwrap();
    assert_eq!(batches.len(), 5);
    let mut next = 0;
    for (i, b) in batches.iter().enumerate() {
        let h = Header::new(b);
        assert_eq!((h.base_offset(), h.leader_epoch()), (next, 7), "batch {i}");
        assert_eq!(h.is_control(), i == 0 || i == 4, "batch {i}");
        assert_eq!((h.producer_id(), h.base_sequence(), h.is_transactional()), (-1, -1, false), "batch {i}");
        next = h.last_offset() + 1;
    }
    assert_eq!(next, 2502);
    assert_eq!(control_types(batches[0]).unwrap(), vec![SNAPSHOT_HEADER]);
    assert_eq!(control_types(batches[4]).unwrap(), vec![SNAPSHOT_FOOTER]);
    // Served in chunks that cut batches, it downloads whole elsewhere.
    let mut chunks = Vec::new();
    while (chunks.len() as u64) < size {
        chunks.extend(read_chunk(dir.path(), id, chunks.len() as u64, 4000).unwrap());
    }
    assert_eq!(chunks, bytes);
    let other = tempfile::tempdir().unwrap();
    assert_eq!(download(other.path(), id, &chunks, 4000).unwrap(), records);
    remove(dir.path(), id).unwrap();
    assert!(list(dir.path()).unwrap().is_empty());
}
