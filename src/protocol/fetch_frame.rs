//! Fetch response frames that send stored batches straight from segment files.
//!
//! Owns: turning a `FetchAnswer` (a response plus, per partition, a `FileSlice` of records)
//! into the parts of one response frame: encoded bytes, then a file range, then bytes again.
//! The connection writes bytes with `write` and file ranges with `sendfile`, so record bytes
//! never pass through the broker's memory (Kafka does the same with `FileChannel.transferTo`).
//!
//! How, without a hand-written codec: every partition with records gets a random 16-byte
//! marker as its `records`, the whole response is encoded by kafka-protocol, and each marker
//! (with the length prefix kafka-protocol wrote before it) is replaced by the prefix for the
//! slice's length and the slice itself. Records are the last field before a partition's tagged
//! fields and no Kafka structure carries its own byte length, so nothing else changes but the
//! frame length.
//!
//! Invariants: the parts, written in order, are exactly the frame that encoding the response
//! with the records in memory would give (checked by the tests below against kafka-protocol's
//! decoder). If the markers are not found exactly where expected, the records are read into
//! memory and the response is encoded the ordinary way. Small answers are copied too: below
//! `ZERO_COPY_MIN_BYTES` one write is cheaper than a write, a sendfile and a write.

use std::hash::BuildHasher;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseKind};

use super::encode_response;
use crate::handlers::fetch::FetchAnswer;
use crate::log::FileSlice;

/// Below this many bytes of records a response is copied into one buffer.
pub const ZERO_COPY_MIN_BYTES: usize = 64 * 1024;

const MARKER_BYTES: usize = 16;

/// One piece of a response frame, written in order.
#[derive(Debug)]
pub enum OutPart {
    Bytes(Bytes),
    File(FileSlice),
}

impl OutPart {
    pub fn len(&self) -> usize {
        match self {
            OutPart::Bytes(b) => b.len(),
            OutPart::File(f) => f.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Encodes a Fetch response frame (length prefix included) as parts.
pub fn encode_fetch_response(version: i16, correlation_id: i32, answer: FetchAnswer) -> anyhow::Result<Vec<OutPart>> {
    if answer.records_bytes() < ZERO_COPY_MIN_BYTES {
        return encode_copied(version, correlation_id, answer);
    }
    let marker = random_marker();
    let FetchAnswer { mut response, records } = answer;
    let mut slices = Vec::new();
    let partitions = response.responses.iter_mut().flat_map(|t| t.partitions.iter_mut());
    for (data, slice) in partitions.zip(records.iter()) {
        if let Some(slice) = slice {
            data.records = Some(Bytes::copy_from_slice(&marker));
            slices.push(slice.clone());
        }
    }
    let body = ResponseKind::Fetch(response);
    let frame = encode_response(ApiKey::Fetch, version, correlation_id, &body)?;
    if let Some(parts) = splice(&frame, &marker, slices, version >= 12)? {
        return Ok(parts);
    }
    tracing::warn!("fetch response markers not where expected; copying the records instead");
    // `into_response` overwrites every marker with the records it stands for.
    let ResponseKind::Fetch(response) = body else { unreachable!("built above") };
    encode_copied(version, correlation_id, FetchAnswer { response, records })
}

/// The ordinary way: records read into memory and encoded with the rest, one part.
fn encode_copied(version: i16, correlation_id: i32, answer: FetchAnswer) -> anyhow::Result<Vec<OutPart>> {
    let body = ResponseKind::Fetch(answer.into_response());
    Ok(vec![OutPart::Bytes(encode_response(ApiKey::Fetch, version, correlation_id, &body)?.freeze())])
}

/// Replaces each marker (in order, one per slice) by the slice. `None` if the frame does not
/// hold exactly the expected markers behind their expected length prefixes.
fn splice(frame: &[u8], marker: &[u8], slices: Vec<FileSlice>, compact: bool) -> anyhow::Result<Option<Vec<OutPart>>> {
    let marker_prefix = length_prefix(MARKER_BYTES, compact)?;
    // The frame grows by what each slice and its prefix add over the marker and its prefix.
    // Negative only if the frame cannot hold every marker (then they are not all found below).
    let mut body_bytes = frame.len() as i64 - 4;
    for slice in &slices {
        let added = length_prefix(slice.len, compact)?.len() + slice.len;
        body_bytes += added as i64 - (marker_prefix.len() + MARKER_BYTES) as i64;
    }
    if body_bytes < 0 {
        return Ok(None);
    }
    let mut parts = Vec::with_capacity(2 * slices.len() + 1);
    let mut head = BytesMut::with_capacity(256);
    head.put_i32(i32::try_from(body_bytes)?);
    let mut from = 4;
    for slice in slices {
        let Some(found) = memchr::memmem::find(&frame[from..], marker) else { return Ok(None) };
        let at = from + found;
        let Some(prefix_at) = at.checked_sub(marker_prefix.len()).filter(|&p| p >= from) else { return Ok(None) };
        if frame[prefix_at..at] != marker_prefix[..] {
            return Ok(None);
        }
        head.extend_from_slice(&frame[from..prefix_at]);
        head.extend_from_slice(&length_prefix(slice.len, compact)?);
        parts.push(OutPart::Bytes(head.split().freeze()));
        parts.push(OutPart::File(slice));
        from = at + MARKER_BYTES;
    }
    if memchr::memmem::find(&frame[from..], marker).is_some() {
        return Ok(None);
    }
    head.extend_from_slice(&frame[from..]);
    parts.push(OutPart::Bytes(head.freeze()));
    Ok(Some(parts))
}

/// The length prefix kafka-protocol writes before `len` bytes of records: an unsigned varint
/// of `len + 1` in flexible versions (COMPACT_RECORDS), a big-endian int32 before them.
/// (kafka-protocol keeps its primitive encoders private; the tests check these against it.)
fn length_prefix(len: usize, compact: bool) -> anyhow::Result<Vec<u8>> {
    if !compact {
        return Ok(i32::try_from(len)?.to_be_bytes().to_vec());
    }
    let mut value = u32::try_from(len + 1)?;
    let mut buf = Vec::with_capacity(5);
    while value >= 0x80 {
        buf.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
    Ok(buf)
}

/// 16 bytes no client can predict (std's randomly keyed SipHash, fresh keys per call), so a
/// topic name or error message cannot imitate a marker.
fn random_marker() -> [u8; MARKER_BYTES] {
    let state = std::collections::hash_map::RandomState::new();
    let mut marker = [0u8; MARKER_BYTES];
    marker[..8].copy_from_slice(&state.hash_one(0x6b_6574_6368_u64).to_le_bytes());
    marker[8..].copy_from_slice(&state.hash_one(0x6d61_726b_6572_u64).to_le_bytes());
    marker
}

#[cfg(test)]
#[path = "fetch_frame_tests.rs"]
mod tests;
