//! Produce-path batch validation: `ketch::log::batch::validate_produce` (CRC-32C, header checks,
//! a streaming walk over every record through the decompressor, timestamp checks) on one 16 KiB
//! batch of 16 x 1 KiB records, uncompressed, lz4 and zstd, with the default topic config (no
//! recompression, CreateTime). Throughput is the *uncompressed* batch size for every codec, so the
//! numbers compare as "produced data validated per second"; the batch copy that
//! `validate_produce` consumes is made outside the timed section.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_protocol::records::Compression;
use ketch::log::batch;

fn bench_validate(c: &mut Criterion) {
    let config = common::defaults();
    let uncompressed_len = common::encode_batch(16, 1024, common::NOW, Compression::None).len() as u64;
    let mut group = c.benchmark_group("validate_produce");
    group.throughput(Throughput::Bytes(uncompressed_len));
    for (name, codec) in [("none", Compression::None), ("lz4", Compression::Lz4), ("zstd", Compression::Zstd)] {
        let produced = common::encode_batch(16, 1024, common::NOW, codec);
        // Sanity: the batch is valid and holds what the name says.
        let (_, summary) = batch::validate_produce(produced.clone(), &config, common::NOW).unwrap();
        assert_eq!(summary.record_count, 16);
        eprintln!(
            "validate_produce/16x1KiB_{name}: batch of {} bytes ({uncompressed_len} uncompressed)",
            produced.len()
        );
        group.bench_function(format!("16x1KiB_{name}"), |b| {
            b.iter_batched(
                || produced.clone(),
                |bytes| black_box(batch::validate_produce(bytes, &config, common::NOW).unwrap()),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench_validate);
criterion_main!(benches);
