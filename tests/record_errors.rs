//! Per-record produce errors (KIP-467): a batch with invalid records is refused whole, every
//! invalid record is reported with its batch index and Kafka's message, and the batch's error
//! code is INVALID_TIMESTAMP if any record's timestamp is wrong, else INVALID_RECORD. Real
//! clients' handling of these answers is proven in compat-tests/test_record_errors.py.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use ketch::config::{BrokerConfig, Properties, TopicConfig};
use ketch::error::LogError;
use ketch::log::batch;
use ketch::log::record_error::{self, RecordError, RecordProblem};

const NOW: i64 = 1_700_000_000_000;

fn config(settings: &[(&str, &str)]) -> TopicConfig {
    let mut config = BrokerConfig::from_properties(Properties::new()).unwrap().topic_defaults;
    for (k, v) in settings {
        config.set(k, v).unwrap();
    }
    config
}

/// A batch of records `(key, timestamp)`.
fn encode(records: &[(Option<&str>, i64)], compression: Compression) -> Vec<u8> {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, timestamp))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch only while their sequences follow on.
            sequence: i as i32 - 1,
            timestamp: *timestamp,
            key: key.map(|k| Bytes::from(k.to_string())),
            value: Some(Bytes::from_static(b"value")),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(&mut buf, records.iter(), &RecordEncodeOptions { version: 2, compression }).unwrap();
    buf.to_vec()
}

fn record_errors(result: Result<impl Sized, LogError>) -> Vec<RecordError> {
    match result {
        Err(LogError::InvalidRecords(errors)) => errors,
        Err(e) => panic!("expected record errors, got {e}"),
        Ok(_) => panic!("expected record errors, the batch was accepted"),
    }
}

#[test]
fn every_keyless_record_of_a_batch_on_a_compacted_topic_is_reported() {
    let config = config(&[("cleanup.policy", "compact")]);
    for compression in [Compression::None, Compression::Lz4] {
        let batch = encode(
            &[(Some("a"), NOW), (None, NOW), (Some("b"), NOW), (None, NOW), (None, NOW), (Some("c"), NOW)],
            compression,
        );
        let errors = record_errors(batch::validate_produce(batch, &config, NOW));
        let indexes: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indexes, [1, 3, 4], "{compression:?}");
        assert_eq!(record_error::error_code(&errors), ResponseError::InvalidRecord.code());
        assert_eq!(
            errors[0].message("t-0"),
            "Compacted topic cannot accept message without key in topic partition t-0"
        );
        assert_eq!(
            record_error::summary(&errors, "t-0"),
            "One or more records have been rejected due to 3 record errors in total, and only showing the first \
             three errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept message without \
             key in topic partition t-0'), RecordError(batchIndex=3, message='Compacted topic cannot accept message \
             without key in topic partition t-0'), RecordError(batchIndex=4, message='Compacted topic cannot accept \
             message without key in topic partition t-0')]"
        );
    }
}

#[test]
fn timestamps_out_of_range_are_reported_per_record_and_win_the_error_code() {
    let config = config(&[
        ("cleanup.policy", "compact"),
        ("message.timestamp.before.max.ms", "3600000"),
        ("message.timestamp.after.max.ms", "60000"),
    ]);
    let two_days_ago = NOW - 2 * 86_400_000;
    let batch = encode(
        &[
            (Some("a"), NOW),
            (Some("b"), two_days_ago),
            (None, NOW),
            (Some("c"), NOW + 120_000),
            (Some("d"), -1), // no timestamp: not checked, as in Kafka
        ],
        Compression::None,
    );
    let errors = record_errors(batch::validate_produce(batch, &config, NOW));
    let indexes: Vec<i32> = errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, [1, 2, 3]);
    assert_eq!(
        errors[1].problem,
        RecordProblem::NoKeyOnCompactedTopic,
        "a key error is reported before a timestamp one"
    );
    assert_eq!(record_error::error_code(&errors), ResponseError::InvalidTimestamp.code());
    assert_eq!(
        errors[0].message("t-0"),
        format!(
            "Timestamp {two_days_ago} of message with offset 1 is out of range. The timestamp should be within [{}, {}]",
            NOW - 3_600_000,
            NOW + 60_000
        )
    );
    assert_eq!(
        record_error::summary(&errors, "t-0"),
        "One or more records have been rejected due to invalid timestamp"
    );
}

#[test]
fn a_batch_of_valid_records_is_accepted_and_log_append_time_topics_check_no_create_time() {
    let old = encode(&[(Some("a"), 1_000), (Some("b"), NOW)], Compression::None);
    assert!(batch::validate_produce(old.clone(), &config(&[]), NOW).is_ok(), "no limit by default");
    let append_time = config(&[("message.timestamp.type", "LogAppendTime"), ("message.timestamp.before.max.ms", "1")]);
    assert!(batch::validate_produce(old, &append_time, NOW).is_ok());
}

#[test]
fn a_producer_may_not_set_the_log_append_time_type() {
    let mut batch = encode(&[(Some("a"), NOW), (Some("bb"), NOW)], Compression::None);
    // Set the timestamp-type attribute bit and fix the CRC, as a misbehaving producer would.
    batch[22] |= 1 << 3;
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    let config = config(&[("message.timestamp.type", "LogAppendTime")]);
    let errors = record_errors(batch::validate_produce(batch, &config, NOW));
    assert_eq!(errors.len(), 2);
    assert_eq!(record_error::error_code(&errors), ResponseError::InvalidTimestamp.code());
    assert_eq!(
        errors[1].message("t-0"),
        format!(
            "Invalid timestamp type in message DefaultRecord(offset=1, timestamp={NOW}, key=2 bytes, value=5 bytes). \
             Producer should not set timestamp type to LogAppendTime."
        )
    );
}
