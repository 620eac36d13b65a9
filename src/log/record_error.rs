//! Per-record produce errors (KIP-467): which records of a produced batch were invalid and why,
//! worded as Kafka's `LogValidator` words them, for the `record_errors` and `error_message` of a
//! Produce response.
//!
//! Owns: the problems found in single records (a keyless record on a compacted topic, a
//! CreateTime timestamp out of range, a producer-set LogAppendTime) and their messages.
//! Invariant: a batch with any of these is refused whole (nothing of it is appended), and every
//! invalid record of it is listed, at most one problem per record, in batch order.

use kafka_protocol::error::ResponseError;

/// What is wrong with one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordProblem {
    /// A record without a key on a compacted topic.
    NoKeyOnCompactedTopic,
    /// A CreateTime timestamp outside `[earliest_ms, latest_ms]`
    /// (`message.timestamp.{before,after}.max.ms` around the broker's clock).
    TimestampOutOfRange { timestamp_ms: i64, offset: i64, earliest_ms: i64, latest_ms: i64 },
    /// The producer set the LogAppendTime timestamp type, which only the broker may set.
    LogAppendTimeFromProducer { offset: i64, timestamp_ms: i64, key_bytes: i32, value_bytes: i32 },
}

/// One invalid record: its index in the batch (0-based) and its problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub problem: RecordProblem,
}

impl RecordError {
    pub fn is_timestamp(&self) -> bool {
        !matches!(self.problem, RecordProblem::NoKeyOnCompactedTopic)
    }

    /// Kafka's message for this record, `topic_partition` as `<topic>-<partition>`.
    pub fn message(&self, topic_partition: &str) -> String {
        match &self.problem {
            RecordProblem::NoKeyOnCompactedTopic => {
                format!("Compacted topic cannot accept message without key in topic partition {topic_partition}")
            }
            RecordProblem::TimestampOutOfRange { timestamp_ms, offset, earliest_ms, latest_ms } => format!(
                "Timestamp {timestamp_ms} of message with offset {offset} is out of range. \
                 The timestamp should be within [{earliest_ms}, {latest_ms}]"
            ),
            RecordProblem::LogAppendTimeFromProducer { offset, timestamp_ms, key_bytes, value_bytes } => format!(
                "Invalid timestamp type in message DefaultRecord(offset={offset}, timestamp={timestamp_ms}, \
                 key={key_bytes} bytes, value={value_bytes} bytes). Producer should not set timestamp type to \
                 LogAppendTime."
            ),
        }
    }
}

/// The error code of a batch refused for `errors`: INVALID_TIMESTAMP if any is about a
/// timestamp, else INVALID_RECORD (Kafka's `processRecordErrors`).
pub fn error_code(errors: &[RecordError]) -> i16 {
    if errors.iter().any(RecordError::is_timestamp) {
        ResponseError::InvalidTimestamp.code()
    } else {
        ResponseError::InvalidRecord.code()
    }
}

/// The response's top-level `error_message` for a batch refused for `errors`, as Kafka words it
/// (the first three record errors in Kafka's `RecordError.toString` form).
pub fn summary(errors: &[RecordError], topic_partition: &str) -> String {
    if errors.iter().any(RecordError::is_timestamp) {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let shown: Vec<String> = errors
        .iter()
        .take(3)
        .map(|e| format!("RecordError(batchIndex={}, message='{}')", e.batch_index, e.message(topic_partition)))
        .collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the first \
         three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}
