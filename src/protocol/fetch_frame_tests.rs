//! The zero-copy frame must be byte for byte the frame kafka-protocol encodes with the records
//! in memory, for every Fetch version we serve (int32 and varint length prefixes).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchResponse, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::*;

fn slice_of(file: &Arc<File>, position: u64, len: usize) -> FileSlice {
    FileSlice { file: file.clone(), position, len }
}

fn joined(parts: &[OutPart]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            OutPart::Bytes(b) => out.extend_from_slice(b),
            OutPart::File(f) => out.extend_from_slice(&f.read_to_vec().unwrap()),
        }
    }
    out
}

/// Two topics; partitions with records, without records, and with an error (fields as the
/// version has them).
fn answer(file: &Arc<File>, big: usize, version: i16) -> FetchAnswer {
    let partition = |i: i32| {
        PartitionData::default()
            .with_partition_index(i)
            .with_high_watermark(1000 + i as i64)
            .with_records(Some(Bytes::new()))
    };
    let topic = |name: &str, n: i32| {
        let topic = FetchableTopicResponse::default().with_partitions((0..n).map(partition).collect());
        if version >= 13 {
            topic.with_topic_id(uuid::Uuid::from_u128(n as u128 + 7))
        } else {
            topic.with_topic(TopicName(StrBytes::from_string(name.to_string())))
        }
    };
    let mut response = FetchResponse::default().with_responses(vec![topic("a", 3), topic("bb", 2)]);
    if version >= 7 {
        response.session_id = 5;
    }
    response.responses[1].partitions[1].error_code = 1;
    let records = vec![
        Some(slice_of(file, 0, big)),
        None,
        Some(slice_of(file, big as u64, 300)),
        Some(slice_of(file, 17, 200_000)),
        None,
    ];
    FetchAnswer { response, records }
}

fn temp_file(len: usize) -> Arc<File> {
    let mut f = tempfile::tempfile().unwrap();
    let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    f.write_all(&bytes).unwrap();
    Arc::new(f)
}

#[test]
fn spliced_frame_equals_copied_frame_for_every_version() {
    let file = temp_file(400_000);
    for version in 4..=18 {
        for big in [10, 126, 127, 16_382, 16_383, 70_000] {
            let parts = encode_fetch_response(version, 42, answer(&file, big, version)).unwrap();
            let copied = encode_copied(version, 42, answer(&file, big, version)).unwrap();
            assert_eq!(joined(&parts), joined(&copied), "version {version}, big {big}");
            assert!(parts.iter().any(|p| matches!(p, OutPart::File(_))), "zero-copy used at version {version}");
            // And kafka-protocol's own decoder reads it back.
            let frame = joined(&parts);
            assert_eq!(i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize, frame.len() - 4);
            let mut body = Bytes::from(frame[4..].to_vec());
            let header_version = ApiKey::Fetch.response_header_version(version);
            assert_eq!(ResponseHeader::decode(&mut body, header_version).unwrap().correlation_id, 42);
            let decoded = FetchResponse::decode(&mut body, version).unwrap();
            let records = decoded.responses[0].partitions[0].records.clone().unwrap();
            let mut expected = vec![0u8; big];
            file.read_exact_at(&mut expected, 0).unwrap();
            assert_eq!(records, expected);
        }
    }
}

#[test]
fn small_answers_are_one_copied_part() {
    let file = temp_file(1000);
    let mut small = answer(&file, 10, 17);
    small.records[3] = Some(slice_of(&file, 0, 500));
    let parts = encode_fetch_response(17, 1, small).unwrap();
    assert_eq!(parts.len(), 1);
    assert!(matches!(parts[0], OutPart::Bytes(_)));
}

#[test]
fn a_marker_out_of_place_falls_back_to_copying() {
    let file = temp_file(1000);
    let marker = random_marker();
    // No marker in the frame at all, or one behind the wrong length prefix.
    assert!(splice(&[0, 0, 0, 0, 1, 2, 3], &marker, vec![slice_of(&file, 0, 10)], true).unwrap().is_none());
    let mut frame = vec![0u8; 4];
    frame.push(99);
    frame.extend_from_slice(&marker);
    assert!(splice(&frame, &marker, vec![slice_of(&file, 0, 10)], true).unwrap().is_none());
    // An extra marker the slices do not account for.
    frame[4] = MARKER_BYTES as u8 + 1;
    frame.extend_from_slice(&marker);
    assert!(splice(&frame, &marker, vec![slice_of(&file, 0, 10)], true).unwrap().is_none());
    frame.truncate(4 + 1 + MARKER_BYTES);
    let parts = splice(&frame, &marker, vec![slice_of(&file, 0, 10)], true).unwrap().unwrap();
    assert_eq!(joined(&parts).len(), 4 + 1 + 10);
}
