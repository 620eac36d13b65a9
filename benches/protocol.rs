//! Request decoding and response encoding in `ketch::protocol`, the codec work every request pays:
//!
//! * `decode_request`: a Produce v12 frame (built with kafka-protocol's encoder, like
//!   tests/common/mod.rs `frame()`) carrying one 16 KiB batch, and one carrying 64 partitions x
//!   16 KiB (1 MiB). Includes the pre-decode guard; record bytes are zero-copy slices.
//! * `guard`: the pre-decode allocation guard alone (`protocol::guard::check_request`).
//! * `encode_response`: a Fetch v16 response whose one partition carries 1 MiB of stored batches
//!   (64 x 16 KiB), i.e. what a consumer's fetch returns; the records are copied into the frame.
//!
//! Throughput is the frame size (request without, response with its 4-byte length prefix).

mod common;

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::messages::fetch_response::{FetchResponse, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use kafka_protocol::messages::{ApiKey, BrokerId, RequestHeader, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::Compression;
use ketch::log::batch;
use ketch::protocol::{self, guard};

const PRODUCE_VERSION: i16 = 12;
const FETCH_VERSION: i16 = 16;

/// A request frame without its length prefix (what `decode_request` receives).
fn request_frame(api_key: ApiKey, version: i16, body: &RequestKind) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("ketch-bench")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, api_key.request_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.freeze()
}

fn produce_frame(partitions: i32, records: &Bytes) -> Bytes {
    let data = (0..partitions)
        .map(|p| PartitionProduceData::default().with_index(p).with_records(Some(records.clone())))
        .collect();
    let request = ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![
        TopicProduceData::default().with_name(TopicName(StrBytes::from_static_str("bench"))).with_partition_data(data),
    ]);
    request_frame(ApiKey::Produce, PRODUCE_VERSION, &RequestKind::Produce(request))
}

fn bench_decode(c: &mut Criterion) {
    let records = Bytes::from(common::encode_batch(16, 1024, common::NOW, Compression::None));
    for (name, partitions) in [("produce_1x16KiB", 1), ("produce_64x16KiB", 64)] {
        let frame = produce_frame(partitions, &records);
        let decoded = protocol::decode_request(frame.clone()).unwrap();
        assert!(
            matches!(decoded.body, RequestKind::Produce(ref r) if r.topic_data[0].partition_data.len() == partitions as usize)
        );

        let mut group = c.benchmark_group("decode_request");
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_function(name, |b| b.iter(|| black_box(protocol::decode_request(frame.clone()).unwrap())));
        group.finish();

        let mut group = c.benchmark_group("guard");
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_function(name, |b| b.iter(|| guard::check_request(black_box(&frame)).unwrap()));
        group.finish();
    }
}

fn bench_encode(c: &mut Criterion) {
    let (validated, _) = common::validated_16k(Compression::None);
    let mut stored = Vec::with_capacity(64 * validated.len());
    for i in 0..64 {
        let mut copy = validated.clone();
        batch::set_base_offset(&mut copy, i * 16);
        stored.extend_from_slice(&copy);
    }
    let records = Bytes::from(stored);
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_high_watermark(1024)
        .with_last_stable_offset(1024)
        .with_log_start_offset(0)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(records));
    let response = ResponseKind::Fetch(FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic_id(uuid::Uuid::from_u128(0x1234_5678_9abc_def0))
        .with_partitions(vec![partition])]));
    let len = protocol::encode_response(ApiKey::Fetch, FETCH_VERSION, 7, &response).unwrap().len();

    let mut group = c.benchmark_group("encode_response");
    group.throughput(Throughput::Bytes(len as u64));
    group.bench_function("fetch_1MiB", |b| {
        b.iter(|| black_box(protocol::encode_response(ApiKey::Fetch, FETCH_VERSION, 7, &response).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, bench_decode, bench_encode);
criterion_main!(benches);
