//! The only place that touches `kafka_protocol` codecs for requests and responses.
//!
//! Owns: turning a request frame (the bytes after the 4-byte length prefix) into a typed
//! request, and a typed response into a length-prefixed frame (requests at versions outside
//! the handlers' table, `handlers::versions`, are refused here); and the allocation guard that
//! runs before any decoder (`guard.rs`), also before `node::client` and `node::envelope` decode
//! the responses other nodes send (`guard::check_response`).
//! Invariants: no decoder runs on bytes the guard has not accepted, so a frame of N bytes makes
//! decoding allocate O(N); requests at versions outside our table never reach a handler.

pub mod fetch_frame;
pub mod guard;
#[allow(clippy::all)]
#[rustfmt::skip]
pub mod guard_schemas;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use thiserror::Error;

/// A decoded request, ready for a handler.
#[derive(Debug)]
pub struct DecodedRequest {
    pub api_key: ApiKey,
    pub version: i16,
    pub header: RequestHeader,
    pub body: RequestKind,
}

#[derive(Debug, Error)]
pub enum ProtocolError {
    #[error("frame too short for a request header")]
    TooShort,
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    /// The version is outside what we serve; ApiVersions answers these, others close.
    #[error("unsupported version {version} of {api_key:?}")]
    UnsupportedVersion { api_key: ApiKey, version: i16, correlation_id: i32 },
    #[error("request rejected before decoding: {0}")]
    Guard(guard::GuardError),
    #[error("malformed request: {0}")]
    Decode(String),
}

/// Reads the api key, version and correlation id that start every request header.
pub fn peek_header(frame: &[u8]) -> Result<(i16, i16, i32), ProtocolError> {
    if frame.len() < 8 {
        return Err(ProtocolError::TooShort);
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    Ok((api_key, version, correlation_id))
}

/// Decodes one request frame (without its length prefix).
pub fn decode_request(frame: Bytes) -> Result<DecodedRequest, ProtocolError> {
    decode_served_request(frame, crate::handlers::versions::is_served)
}

/// Decodes one request frame of an API and version `served` accepts (a controller's table
/// differs from a broker's).
pub fn decode_served_request(
    mut frame: Bytes,
    served: impl Fn(ApiKey, i16) -> bool,
) -> Result<DecodedRequest, ProtocolError> {
    let (raw_key, version, correlation_id) = peek_header(&frame)?;
    let api_key = ApiKey::try_from(raw_key).map_err(|_| ProtocolError::UnknownApiKey(raw_key))?;
    if !served(api_key, version) {
        return Err(ProtocolError::UnsupportedVersion { api_key, version, correlation_id });
    }
    guard::check_request(&frame).map_err(ProtocolError::Guard)?;
    let header_version = api_key.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(|e| ProtocolError::Decode(e.to_string()))?;
    let body = RequestKind::decode(api_key, &mut frame, version).map_err(|e| ProtocolError::Decode(e.to_string()))?;
    Ok(DecodedRequest { api_key, version, header, body })
}

/// Encodes a response frame, including its 4-byte length prefix.
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> anyhow::Result<BytesMut> {
    // KIP-511: the ApiVersions response header is always v0 so any client can read it.
    let header_version = if api_key == ApiKey::ApiVersions { 0 } else { api_key.response_header_version(version) };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    // Size large responses exactly up front: growing a multi-megabyte Fetch response by
    // doubling would copy its records several times over.
    let capacity = match body {
        ResponseKind::Fetch(fetch) => fetch.compute_size(version).unwrap_or(0) + 64,
        _ => 256,
    };
    let mut buf = BytesMut::with_capacity(capacity);
    buf.put_i32(0);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, version)?;
    let len = (buf.len() - 4) as i32;
    buf[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}
