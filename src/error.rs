//! Error types, each mapping to the Kafka error code a client sees.
//!
//! Owns: [`ConfigError`] (configuration problems), [`LogError`] (storage and batch validation) and
//! the mapping of both onto Kafka's wire error codes via `kafka_protocol::error::ResponseError`.
//! Invariant: every error a request can hit has exactly one Kafka code; I/O errors surface as
//! KAFKA_STORAGE_ERROR, never as a panic.

use kafka_protocol::error::ResponseError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot parse property line {0:?}")]
    Syntax(String),
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    Invalid { key: String, value: String, reason: String },
    #[error("Unknown topic config name: {0}")]
    UnknownKey(String),
    #[error("not supported by Ketch yet: {0}")]
    Unsupported(String),
    /// A valid value Kafka refuses too in this setup, with Kafka's message.
    #[error("{0}")]
    Refused(String),
}

impl ConfigError {
    pub fn invalid(key: &str, value: &str) -> Self {
        ConfigError::invalid_because(key, value, "not a valid value")
    }

    /// Kafka's wording: "Invalid value V for configuration K: REASON".
    pub fn invalid_because(key: &str, value: &str, reason: &str) -> Self {
        ConfigError::Invalid { key: key.to_string(), value: value.to_string(), reason: reason.to_string() }
    }
}

/// Errors from the log engine. Each maps to the Kafka error code of the same meaning.
#[derive(Debug, Error)]
pub enum LogError {
    #[error("corrupt record batch: {0}")]
    CorruptMessage(String),
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error("record batch of {size} bytes exceeds the limit of {limit} bytes")]
    MessageTooLarge { size: usize, limit: usize },
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// Records of a produced batch that Kafka refuses one by one (KIP-467): the batch is refused
    /// whole, and the response lists each of them.
    #[error("{} invalid records, the first at batch index {}", .0.len(), .0.first().map_or(-1, |e| e.batch_index))]
    InvalidRecords(Vec<crate::log::record_error::RecordError>),
    #[error("unsupported compression codec {0}")]
    UnsupportedCompression(i16),
    #[error("out of order sequence: {0}")]
    OutOfOrderSequence(String),
    #[error("invalid producer epoch: {0}")]
    InvalidProducerEpoch(String),
    /// A transaction marker from a coordinator older than the one that last wrote one for
    /// this producer (a zombie coordinator).
    #[error("{0}")]
    TransactionCoordinatorFenced(String),
    #[error("transactional batch outside a transaction: {0}")]
    InvalidTxnState(String),
    #[error("offset {offset} out of range [{start}, {end}]")]
    OffsetOutOfRange { offset: i64, start: i64, end: i64 },
    #[error("storage error: {0}")]
    Io(#[from] std::io::Error),
    /// In a cluster, this broker does not lead the partition (any more).
    #[error("not the leader of this partition")]
    NotLeader,
    /// A batch copied from the leader starts before this replica's log end (Kafka's
    /// `UnexpectedAppendOffsetException`); never answered to a client.
    #[error("a copied batch at offsets {first}..={last} starts before the log end {end}")]
    UnexpectedAppendOffset { first: i64, last: i64, end: i64 },
}

impl LogError {
    pub fn code(&self) -> i16 {
        let error = match self {
            LogError::InvalidRecords(errors) => return crate::log::record_error::error_code(errors),
            LogError::CorruptMessage(_) => ResponseError::CorruptMessage,
            LogError::InvalidRecord(_) => ResponseError::InvalidRecord,
            LogError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
            LogError::InvalidTimestamp(_) => ResponseError::InvalidTimestamp,
            LogError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType,
            LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
            LogError::OutOfOrderSequence(_) => ResponseError::OutOfOrderSequenceNumber,
            LogError::InvalidProducerEpoch(_) => ResponseError::InvalidProducerEpoch,
            LogError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
            LogError::TransactionCoordinatorFenced(_) => ResponseError::TransactionCoordinatorFenced,
            LogError::Io(_) => ResponseError::KafkaStorageError,
            LogError::NotLeader => ResponseError::NotLeaderOrFollower,
            LogError::UnexpectedAppendOffset { .. } => ResponseError::UnknownServerError,
        };
        error.code()
    }
}

/// Kafka's default message of an error (`Errors.message()`, the exception's own text), which
/// Kafka puts in a response's error message where it has nothing more specific to say. Only
/// the errors Ketch answers that way are listed; others give their name.
pub fn default_message(error: ResponseError) -> String {
    match error {
        ResponseError::UnknownTopicOrPartition => "This server does not host this topic-partition.",
        ResponseError::UnknownTopicId => "This server does not host this topic ID.",
        ResponseError::ElectionNotNeeded => "Leader election not needed for topic partition.",
        ResponseError::InvalidRequest => {
            "This most likely occurs because of a request being malformed by the client library or the message \
             was sent to an incompatible broker. See the broker logs for more details."
        }
        ResponseError::TopicDeletionDisabled => "Topic deletion is disabled.",
        ResponseError::CoordinatorNotAvailable => "The coordinator is not available.",
        ResponseError::CoordinatorLoadInProgress => "The coordinator is loading and hence can't process requests.",
        other => return other.to_string(),
    }
    .to_string()
}

/// Kafka error code for a success.
pub const NONE: i16 = 0;

/// Shorthand: the wire code of a `ResponseError`.
pub fn code(error: ResponseError) -> i16 {
    error.code()
}
