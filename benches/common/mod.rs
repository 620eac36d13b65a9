//! Shared by the benches: record batches built with kafka-protocol's (client-side) encoder, as
//! tests/log_engine.rs does, with payloads like Kafka's `ProducerPerformance` (random uppercase
//! letters), validated through the public `ketch::log::batch` API.

#![allow(dead_code)]

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use ketch::config::{BrokerConfig, Properties, TopicConfig};
use ketch::log::batch::{self, BatchSummary};

/// "Now" for every bench, so timestamps always pass validation.
pub const NOW: i64 = 1_700_000_000_000;

/// The broker's default topic config (no recompression, CreateTime).
pub fn defaults() -> TopicConfig {
    BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults
}

/// Deterministic random uppercase letters (xorshift64), like `ProducerPerformance` payloads:
/// compressible by entropy coders (zstd), much less so by lz4.
pub fn payload(len: usize, seed: u64) -> Bytes {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'A' + (state % 26) as u8
        })
        .collect::<Vec<u8>>()
        .into()
}

/// One v2 batch of `count` keyless records of `value_bytes` each, timestamps from `first_timestamp`.
pub fn encode_batch(count: usize, value_bytes: usize, first_timestamp: i64, compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // offset - sequence must stay constant or the encoder starts a new batch.
            sequence: i as i32 - 1,
            timestamp: first_timestamp + i as i64,
            key: None,
            value: Some(payload(value_bytes, first_timestamp as u64 ^ i as u64)),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).unwrap();
    buf.to_vec()
}

/// The 16 KiB batch of 16 x 1 KiB records most benches use, validated and ready to append.
pub fn validated_16k(compression: Compression) -> (Vec<u8>, BatchSummary) {
    let (bytes, summary) = batch::validate_produce(encode_batch(16, 1024, NOW, compression), &defaults(), NOW).unwrap();
    (bytes.to_vec(), summary)
}
