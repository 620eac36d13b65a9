//! The v2 record batch as it sits on the wire and on disk, and its validation on the produce path.
//!
//! Owns: reading and patching the fixed 61-byte batch header in place (Kafka's
//! `DefaultRecordBatch` layout), walking the records inside a batch (through a bounded,
//! streaming decompressor) to validate them, and the checks Kafka's `LogValidator` makes.
//! Record contents are never materialised here: whole-batch decoding and re-encoding, which only
//! broker-side recompression needs, goes through `kafka_protocol::records` (see `recompress.rs`),
//! as do the markers and the one-record batches tests use that are encoded here.
//!
//! Header layout (big-endian): base offset i64 @0, batch length i32 @8 (bytes after this field),
//! partition leader epoch i32 @12, magic i8 @16, CRC-32C u32 @17 (covers bytes 21..end),
//! attributes i16 @21, last offset delta i32 @23, base timestamp i64 @27, max timestamp i64 @35,
//! producer id i64 @43, producer epoch i16 @51, base sequence i32 @53, record count i32 @57.
//! Base offset and leader epoch sit outside the CRC, so the broker assigns them without
//! recomputing it.

use crate::log::producer_state::Marker;
use std::io::BufRead;

use bytes::Bytes;

use crate::config::{TimestampType, TopicConfig};
use crate::error::LogError;
use crate::log::compression::{self, Codec};
use crate::log::producer_state::ProducerBatch;
use crate::log::record_error::{RecordError, RecordProblem};

pub const HEADER_BYTES: usize = 61;
/// Bytes before the length field's coverage starts: base offset + batch length.
pub const LOG_OVERHEAD: usize = 12;
const CRC_START: usize = 21;
pub(crate) const ATTR_TIMESTAMP_TYPE: i16 = 1 << 3;
const ATTR_TRANSACTIONAL: i16 = 1 << 4;
const ATTR_CONTROL: i16 = 1 << 5;

/// Read-only accessors over the header of one complete batch.
#[derive(Clone, Copy)]
pub struct Header<'a>(pub &'a [u8]);

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl<'a> Header<'a> {
    /// Wraps `bytes`, which must hold at least a full header.
    pub fn new(bytes: &'a [u8]) -> Header<'a> {
        assert!(bytes.len() >= HEADER_BYTES, "batch header needs {HEADER_BYTES} bytes");
        Header(bytes)
    }
    pub fn base_offset(&self) -> i64 {
        be_i64(self.0, 0)
    }
    /// Total size of the batch including the 12-byte log overhead.
    pub fn total_bytes(&self) -> i64 {
        be_i32(self.0, 8) as i64 + LOG_OVERHEAD as i64
    }
    pub fn leader_epoch(&self) -> i32 {
        be_i32(self.0, 12)
    }
    pub fn magic(&self) -> i8 {
        self.0[16] as i8
    }
    pub fn crc(&self) -> u32 {
        be_i32(self.0, 17) as u32
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.0, 21)
    }
    pub fn compression_id(&self) -> i16 {
        self.attributes() & 0x7
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.0, 23)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + self.last_offset_delta() as i64
    }
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.0, 27)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.0, 35)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.0, 43)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.0, 51)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.0, 53)
    }
    pub fn record_count(&self) -> i32 {
        be_i32(self.0, 57)
    }
    /// The producer fields, for batches written by an idempotent producer (producer id >= 0).
    pub fn producer_batch(&self) -> Option<ProducerBatch> {
        (self.producer_id() >= 0).then(|| ProducerBatch {
            producer_id: self.producer_id(),
            epoch: self.producer_epoch(),
            first_seq: self.base_sequence(),
            last_offset_delta: self.last_offset_delta(),
            max_timestamp: self.max_timestamp(),
        })
    }
}

/// In-place header patches the broker makes; `fix_crc` must follow any patch inside the CRC.
pub fn set_base_offset(batch: &mut [u8], offset: i64) {
    batch[0..8].copy_from_slice(&offset.to_be_bytes());
}
pub fn set_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[12..16].copy_from_slice(&epoch.to_be_bytes());
}
fn set_max_timestamp(batch: &mut [u8], timestamp_type: TimestampType, max_timestamp: i64) {
    let mut attributes = be_i16(batch, 21) & !ATTR_TIMESTAMP_TYPE;
    if timestamp_type == TimestampType::LogAppendTime {
        attributes |= ATTR_TIMESTAMP_TYPE;
    }
    batch[21..23].copy_from_slice(&attributes.to_be_bytes());
    batch[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
}
/// Marks a (re-encoded) batch as LogAppendTime with `max_timestamp` and fixes its CRC.
pub fn restamp_log_append_time(batch: &mut [u8], max_timestamp: i64) {
    set_max_timestamp(batch, TimestampType::LogAppendTime, max_timestamp);
    fix_crc(batch);
}
fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Checks that `bytes` starts with a structurally complete v2 batch whose CRC matches; returns
/// its total size. Used by recovery and by produce validation.
pub fn check_batch(bytes: &[u8]) -> Result<usize, LogError> {
    if bytes.len() < HEADER_BYTES {
        return Err(LogError::CorruptMessage(format!("{} bytes is shorter than a batch header", bytes.len())));
    }
    let header = Header::new(bytes);
    let total = header.total_bytes();
    if total < HEADER_BYTES as i64 || total > bytes.len() as i64 {
        return Err(LogError::CorruptMessage(format!("batch length {total} does not fit {} bytes", bytes.len())));
    }
    if header.magic() != 2 {
        return Err(LogError::CorruptMessage(format!("unsupported magic {}", header.magic())));
    }
    let total = total as usize;
    if crc32c::crc32c(&bytes[CRC_START..total]) != header.crc() {
        return Err(LogError::CorruptMessage("CRC-32C mismatch".into()));
    }
    Ok(total)
}

/// The whole batches at the start of `bytes` (a fetched chunk), each CRC-checked; a trailing
/// partial batch (cut by a size limit) is left out, to be fetched again. A batch length too
/// small for a header is corruption, not a partial batch.
pub fn whole_batches(bytes: &[u8]) -> Result<Vec<&[u8]>, LogError> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while rest.len() >= HEADER_BYTES && Header::new(rest).total_bytes() <= rest.len() as i64 {
        let len = check_batch(rest)?;
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    Ok(out)
}

/// What validation learned about a produced batch.
#[derive(Debug, Clone)]
pub struct BatchSummary {
    pub record_count: i32,
    pub max_timestamp: i64,
    /// Offset delta of the (first) record carrying `max_timestamp`.
    pub offset_delta_of_max_timestamp: i32,
    pub codec: Codec,
}

/// Upper bound on the decompressed size of one batch; beyond it the batch is rejected rather
/// than letting a tiny compressed batch expand without bound.
pub const MAX_DECOMPRESSED_BYTES: u64 = 512 << 20;

/// Validates one produced batch (the whole `records` field of a partition), as Kafka's
/// `LogValidator` does, and prepares it for appending: the returned bytes have their max
/// timestamp / timestamp type finalised; base offset and leader epoch are set at append time.
pub fn validate_produce(
    records: impl Into<Bytes>,
    config: &TopicConfig,
    now_ms: i64,
) -> Result<(Bytes, BatchSummary), LogError> {
    let mut records: Bytes = records.into();
    let total = check_batch(&records)?;
    if total != records.len() {
        return Err(LogError::InvalidRecord("a produce request must hold exactly one batch per partition".into()));
    }
    if total > config.max_message_bytes {
        return Err(LogError::MessageTooLarge { size: total, limit: config.max_message_bytes });
    }
    let header = Header::new(&records);
    if header.is_control() {
        return Err(LogError::InvalidRecord("clients may not write control batches".into()));
    }
    if header.is_transactional() && header.producer_id() < 0 {
        return Err(LogError::InvalidRecord("a transactional batch needs a producer id".into()));
    }
    if header.producer_id() >= 0 && header.base_sequence() < 0 {
        return Err(LogError::InvalidRecord("an idempotent batch needs a base sequence".into()));
    }
    let count = header.record_count();
    if count <= 0 || header.last_offset_delta() != count - 1 {
        return Err(LogError::InvalidRecord(format!(
            "record count {count} does not match last offset delta {}",
            header.last_offset_delta()
        )));
    }
    let codec = Codec::from_id(header.compression_id())?;
    let summary = walk_body(header, codec, config, now_ms)?;
    if let Some(target) = Codec::for_topic(config.compression_type) {
        if target != codec {
            records = compression::recompress(&records, target, config)?.into();
            check_batch(&records)?;
        }
    }
    // Usually the batch is stored exactly as received (the broker's own header fields are set as
    // it is written): it is copied only when a CRC-covered field must change.
    match config.message_timestamp_type {
        TimestampType::LogAppendTime => {
            records = edited(records, |b| {
                set_max_timestamp(b, TimestampType::LogAppendTime, now_ms);
                fix_crc(b);
            });
        }
        TimestampType::CreateTime => {
            let header = Header::new(&records);
            if header.max_timestamp() != summary.max_timestamp || header.attributes() & ATTR_TIMESTAMP_TYPE != 0 {
                records = edited(records, |b| {
                    set_max_timestamp(b, TimestampType::CreateTime, summary.max_timestamp);
                    fix_crc(b);
                });
            }
        }
    }
    Ok((records, summary))
}

/// `bytes` changed by `edit`: in place if nothing else shares them, else in a copy.
fn edited(bytes: Bytes, edit: impl FnOnce(&mut [u8])) -> Bytes {
    match bytes.try_into_mut() {
        Ok(mut owned) => {
            edit(&mut owned);
            owned.freeze()
        }
        Err(shared) => {
            let mut owned = shared.to_vec();
            edit(&mut owned);
            owned.into()
        }
    }
}

/// Validation for batches the broker's own coordinators write (never from the network): the
/// same structural checks, but producer ids without sequence numbers are allowed.
pub fn validate_internal(
    records: Vec<u8>,
    config: &TopicConfig,
    now_ms: i64,
) -> Result<(Vec<u8>, BatchSummary), LogError> {
    let total = check_batch(&records)?;
    let header = Header::new(&records);
    let codec = Codec::from_id(header.compression_id())?;
    let summary = walk_body(Header::new(&records[..total]), codec, config, now_ms)?;
    Ok((records, summary))
}

/// The checks a replica makes on a batch copied from its leader (Kafka's `appendAsFollower`,
/// origin REPLICATION): integrity only. `batch` must be exactly one whole v2 batch whose CRC
/// matches, whose last offset is not before its base offset and whose codec is known. None of
/// the producer's rules apply (the leader applied them, with its clock and its topic config):
/// records are not walked, so a compacted batch (offset gaps, fewer records than offsets, none
/// at all), LogAppendTime, keyless records or any timestamp pass. The summary comes from the
/// header: the max timestamp is the batch's, found at its last offset (Kafka's shallow offset
/// of max timestamp).
pub fn check_replicated(batch: &[u8]) -> Result<BatchSummary, LogError> {
    let total = check_batch(batch)?;
    if total != batch.len() {
        return Err(LogError::CorruptMessage(format!("{} bytes left after a batch of {total}", batch.len() - total)));
    }
    let header = Header::new(batch);
    if header.last_offset_delta() < 0 || header.record_count() < 0 {
        return Err(LogError::CorruptMessage(format!(
            "last offset delta {} and record count {} of the batch at offset {}",
            header.last_offset_delta(),
            header.record_count(),
            header.base_offset()
        )));
    }
    Ok(BatchSummary {
        record_count: header.record_count(),
        max_timestamp: header.max_timestamp(),
        offset_delta_of_max_timestamp: header.last_offset_delta(),
        codec: Codec::from_id(header.compression_id())?,
    })
}

/// `walk_records` over the body of the batch `header` starts: uncompressed bodies are walked
/// where the bytes are, with no copy and no dynamic dispatch per byte; compressed ones through
/// their decompressor.
fn walk_body(header: Header, codec: Codec, config: &TopicConfig, now_ms: i64) -> Result<BatchSummary, LogError> {
    let body = &header.0[HEADER_BYTES..];
    if codec == Codec::None {
        walk_records(body, header, codec, config, now_ms)
    } else {
        let reader = compression::decompressing_reader(codec, body)?;
        walk_records(reader, header, codec, config, now_ms)
    }
}

/// Streams through the batch's records, checking framing, offset deltas, sizes, keys and
/// timestamps. Framing errors stop the walk; invalid keys and timestamps are collected for every
/// record and refuse the batch at the end with all of them, as Kafka's `LogValidator` does.
fn walk_records(
    reader: impl BufRead,
    header: Header,
    codec: Codec,
    config: &TopicConfig,
    now_ms: i64,
) -> Result<BatchSummary, LogError> {
    let count = header.record_count();
    let base_timestamp = header.base_timestamp();
    let producer_log_append_time = header.attributes() & ATTR_TIMESTAMP_TYPE != 0;
    let mut reader = Walker::new(reader);
    let mut max_timestamp = i64::MIN;
    let mut offset_delta_of_max_timestamp = 0;
    let mut record_errors: Vec<RecordError> = Vec::new();
    let invalid = |what: &str| LogError::InvalidRecord(what.to_string());
    for expected_delta in 0..count {
        let length = reader.varint()?;
        if length < 6 {
            return Err(invalid("record length too small"));
        }
        let start = reader.read;
        reader.skip(1)?;
        let timestamp_delta = reader.varlong()?;
        let offset_delta = reader.varint()?;
        if offset_delta != expected_delta {
            return Err(invalid("record offset deltas are not consecutive from zero"));
        }
        let key_len = reader.varint()?;
        if key_len >= 0 {
            reader.skip(key_len as u64)?;
        } else if key_len != -1 {
            return Err(invalid("negative key length"));
        }
        let value_len = reader.varint()?;
        if value_len >= 0 {
            reader.skip(value_len as u64)?;
        } else if value_len != -1 {
            return Err(invalid("negative value length"));
        }
        let headers = reader.varint()?;
        if headers < 0 {
            return Err(invalid("negative header count"));
        }
        for _ in 0..headers {
            let header_key_len = reader.varint()?;
            if header_key_len < 0 {
                return Err(invalid("null header key"));
            }
            reader.skip(header_key_len as u64)?;
            let header_value_len = reader.varint()?;
            if header_value_len >= 0 {
                reader.skip(header_value_len as u64)?;
            } else if header_value_len != -1 {
                return Err(invalid("negative header value length"));
            }
            // Each header takes at least two bytes; this also bounds the header map the
            // kafka-protocol decoder pre-sizes should the batch later be re-encoded.
            if reader.read - start > length as u64 {
                return Err(invalid("record headers overrun the record"));
            }
        }
        if reader.read - start != length as u64 {
            return Err(invalid("record length does not match its contents"));
        }
        let timestamp = base_timestamp.saturating_add(timestamp_delta);
        let problem = if key_len == -1 && config.compacts() {
            Some(RecordProblem::NoKeyOnCompactedTopic)
        } else {
            let offset = header.base_offset().wrapping_add(offset_delta as i64);
            let sizes = (key_len.max(0), value_len.max(0));
            record_timestamp_problem(timestamp, offset, sizes, producer_log_append_time, config, now_ms)
        };
        if let Some(problem) = problem {
            // Bounded by the record count, itself bounded by the batch's bytes.
            record_errors.push(RecordError { batch_index: offset_delta, problem });
        }
        if timestamp > max_timestamp {
            max_timestamp = timestamp;
            offset_delta_of_max_timestamp = offset_delta;
        }
    }
    if !reader.at_end()? {
        return Err(invalid("bytes left over after the last record"));
    }
    if !record_errors.is_empty() {
        return Err(LogError::InvalidRecords(record_errors));
    }
    Ok(BatchSummary { record_count: count, max_timestamp, offset_delta_of_max_timestamp, codec })
}

/// Kafka's `validateTimestamp`: a CreateTime timestamp (other than -1, "none") must lie within
/// `message.timestamp.{before,after}.max.ms` of the broker's clock; otherwise only the broker may
/// use LogAppendTime.
fn record_timestamp_problem(
    timestamp_ms: i64,
    offset: i64,
    (key_bytes, value_bytes): (i32, i32),
    producer_log_append_time: bool,
    config: &TopicConfig,
    now_ms: i64,
) -> Option<RecordProblem> {
    if config.message_timestamp_type == TimestampType::CreateTime && timestamp_ms != NO_TIMESTAMP {
        // Kafka compares differences and prints the bounds as Java computes them (wrapping).
        let before_ms = now_ms.wrapping_sub(timestamp_ms);
        if before_ms <= config.message_timestamp_before_max_ms
            && before_ms.wrapping_neg() <= config.message_timestamp_after_max_ms
        {
            return None;
        }
        return Some(RecordProblem::TimestampOutOfRange {
            timestamp_ms,
            offset,
            earliest_ms: now_ms.wrapping_sub(config.message_timestamp_before_max_ms),
            latest_ms: now_ms.wrapping_add(config.message_timestamp_after_max_ms),
        });
    }
    producer_log_append_time.then_some(RecordProblem::LogAppendTimeFromProducer {
        offset,
        timestamp_ms,
        key_bytes,
        value_bytes,
    })
}

/// A record's timestamp when it has none (Kafka's `RecordBatch.NO_TIMESTAMP`).
const NO_TIMESTAMP: i64 = -1;

/// For a control batch: its (single) record as a transaction marker: a commit for control type
/// 1, else an abort, with the coordinator epoch in its value (-1 if the value has none).
pub fn control_marker(batch: &[u8]) -> Option<Marker> {
    let header = Header::new(batch);
    if !header.is_control() || header.record_count() < 1 {
        return None;
    }
    let total = (header.total_bytes() as usize).min(batch.len());
    let mut reader = Walker::new(&batch[HEADER_BYTES..total]);
    reader.varint().ok()?;
    reader.skip(1).ok()?;
    reader.varlong().ok()?;
    reader.varint().ok()?;
    let key_length = reader.varint().ok()?;
    if key_length < 4 {
        return None;
    }
    reader.skip(2).ok()?;
    let kind = i16::from_be_bytes([reader.byte().ok()?, reader.byte().ok()?]);
    // The value of a marker (Kafka's `EndTransactionMarker`): [i16 version][i32 coordinator epoch].
    let coordinator_epoch = (|| {
        reader.skip(key_length as u64 - 4).ok()?;
        if reader.varint().ok()? < 6 {
            return None;
        }
        reader.skip(2).ok()?;
        let bytes = [reader.byte().ok()?, reader.byte().ok()?, reader.byte().ok()?, reader.byte().ok()?];
        Some(i32::from_be_bytes(bytes))
    })();
    Some(Marker { commit: kind == 1, coordinator_epoch: coordinator_epoch.unwrap_or(-1) })
}

/// Encodes a transaction marker (control batch) for `producer_id` at `epoch`.
pub fn encode_marker(producer_id: i64, epoch: i16, commit: bool, coordinator_epoch: i32, timestamp: i64) -> Vec<u8> {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType as RecordTimestampType,
    };
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&(commit as i16).to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let record = Record {
        transactional: true,
        control: true,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: epoch,
        timestamp_type: RecordTimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp,
        key: Some(bytes::Bytes::from(key)),
        value: Some(bytes::Bytes::from(value)),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [record].iter(),
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .expect("a marker always encodes");
    buf.to_vec()
}

/// For tests: a batch of one record (value "v") at `timestamp`; transactional (sequence 0) for
/// `Some((producer id, epoch))`.
#[cfg(test)]
pub(crate) fn one_record_batch(txn: Option<(i64, i16)>, timestamp: i64) -> Bytes {
    one_sequenced_record_batch(txn.map(|(producer_id, epoch)| (producer_id, epoch, 0)), timestamp)
}

/// For tests: as `one_record_batch`, transactional with `Some((producer id, epoch, sequence))`.
#[cfg(test)]
pub(crate) fn one_sequenced_record_batch(txn: Option<(i64, i16, i32)>, timestamp: i64) -> Bytes {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType as RecordTimestampType,
    };
    let record = Record {
        transactional: txn.is_some(),
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: txn.map_or(-1, |t| t.0),
        producer_epoch: txn.map_or(-1, |t| t.1),
        timestamp_type: RecordTimestampType::Creation,
        offset: 0,
        sequence: txn.map_or(-1, |t| t.2),
        timestamp,
        key: None,
        value: Some(Bytes::from_static(b"v")),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).unwrap();
    buf.freeze()
}

/// Offset (delta) and timestamp of the first record in `batch` whose timestamp is >= `target`.
pub fn first_record_at_or_after(batch: &[u8], target: i64) -> Result<Option<(i32, i64)>, LogError> {
    let header = Header::new(batch);
    let codec = Codec::from_id(header.compression_id())?;
    if header.attributes() & ATTR_TIMESTAMP_TYPE != 0 {
        // LogAppendTime: every record carries the batch's max timestamp.
        return Ok((header.max_timestamp() >= target).then_some((0, header.max_timestamp())));
    }
    let total = header.total_bytes() as usize;
    let mut reader = Walker::new(compression::decompressing_reader(codec, &batch[HEADER_BYTES..total])?);
    for _ in 0..header.record_count() {
        let length = reader.varint()?;
        let start = reader.read;
        reader.skip(1)?;
        let timestamp = header.base_timestamp().saturating_add(reader.varlong()?);
        let offset_delta = reader.varint()?;
        if timestamp >= target {
            return Ok(Some((offset_delta, timestamp)));
        }
        let consumed = reader.read - start;
        reader.skip((length as u64).saturating_sub(consumed))?;
    }
    Ok(None)
}

/// Reads a batch's records where they sit (the stored bytes, or a decompressor's buffer),
/// counting the bytes consumed against `MAX_DECOMPRESSED_BYTES`.
struct Walker<R> {
    inner: R,
    read: u64,
}

impl<R: BufRead> Walker<R> {
    fn new(inner: R) -> Self {
        Walker { inner, read: 0 }
    }

    fn advance(&mut self, n: usize) -> Result<(), LogError> {
        self.inner.consume(n);
        self.read += n as u64;
        if self.read > MAX_DECOMPRESSED_BYTES {
            return Err(LogError::CorruptMessage(
                "cannot read records: decompressed batch exceeds the size limit".into(),
            ));
        }
        Ok(())
    }

    /// Up to `want` bytes are available (at least one), or the data ended.
    fn available(&mut self, want: u64) -> Result<usize, LogError> {
        let buf = self.inner.fill_buf().map_err(io_to_corrupt)?;
        if buf.is_empty() {
            return Err(ends_early());
        }
        Ok((buf.len() as u64).min(want) as usize)
    }

    fn byte(&mut self) -> Result<u8, LogError> {
        let Some(&b) = self.inner.fill_buf().map_err(io_to_corrupt)?.first() else {
            return Err(ends_early());
        };
        self.advance(1)?;
        Ok(b)
    }

    fn skip(&mut self, mut n: u64) -> Result<(), LogError> {
        while n > 0 {
            let k = self.available(n)?;
            self.advance(k)?;
            n -= k as u64;
        }
        Ok(())
    }

    fn at_end(&mut self) -> Result<bool, LogError> {
        Ok(self.inner.fill_buf().map_err(io_to_corrupt)?.is_empty())
    }

    fn unsigned_varint(&mut self, max_bytes: u32) -> Result<u64, LogError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.byte()?;
            value |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(LogError::InvalidRecord("varint too long".into()))
    }

    fn varint(&mut self) -> Result<i32, LogError> {
        let raw = self.unsigned_varint(5)?;
        if raw > u32::MAX as u64 {
            return Err(LogError::InvalidRecord("varint out of range".into()));
        }
        let raw = raw as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, LogError> {
        let raw = self.unsigned_varint(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }
}

fn ends_early() -> LogError {
    LogError::CorruptMessage("record data ends early".into())
}

fn io_to_corrupt(e: std::io::Error) -> LogError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        ends_early()
    } else {
        LogError::CorruptMessage(format!("cannot read records: {e}"))
    }
}
