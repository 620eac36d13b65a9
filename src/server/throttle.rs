//! Client byte-rate quotas on a connection (`quota::QuotaStore`), where Kafka's `KafkaApis`
//! and socket server apply them: a Produce request's bytes are counted when it arrives; a
//! consumer's Fetch asks for at most its quota's bytes over the window, and its encoded response
//! is counted: when that puts the client over its quota, the client gets an empty response
//! instead (the bytes taken back), as Kafka answers a throttled fetch. Either way the response
//! carries the throttle time and the connection reads nothing more from the client until it has
//! passed (`connection.rs`), as Kafka mutes a throttled channel (KIP-219).
//!
//! Followers' fetches are not client traffic (Kafka's replication quotas are separate).

use std::time::{SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{FetchResponse, RequestHeader, RequestKind};

use crate::broker::Broker;
use crate::handlers::fetch::FetchAnswer;
use crate::handlers::RequestContext;
use crate::protocol::fetch_frame::{self, OutPart};
use crate::quota::{Client, Kind};

/// What a request's quota asks of the connection.
#[derive(Debug, Default)]
pub struct Quota {
    /// A Produce's throttle time (0: none).
    pub produce_ms: u64,
    /// A consumer's Fetch: its response is counted (`fetch_parts`).
    pub consumer_fetch: bool,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Who a request comes from for quotas: the principal's name (`User:` left out) and its client id.
fn client<'a>(ctx: &'a RequestContext, header: &'a RequestHeader) -> Client<'a> {
    let user = ctx.principal.strip_prefix("User:").unwrap_or(&ctx.principal);
    Client { user, client_id: header.client_id.as_ref().map_or("", |c| c.as_str()) }
}

/// Before a request is handled: counts a Produce's `frame_bytes`; caps a consumer Fetch's
/// `max_bytes` at its quota's bytes over the window.
pub fn before(
    broker: &Broker,
    ctx: &RequestContext,
    header: &RequestHeader,
    body: &mut RequestKind,
    frame_bytes: usize,
) -> Quota {
    match body {
        RequestKind::Produce(_) => {
            let produce_ms = broker.quotas.record(Kind::Produce, &client(ctx, header), frame_bytes, now_ms());
            Quota { produce_ms, consumer_fetch: false }
        }
        RequestKind::Fetch(req) if req.replica_id.0 < 0 && req.replica_state.replica_id.0 < 0 => {
            if let Some(cap) = broker.quotas.max_bytes_in_window(Kind::Fetch, &client(ctx, header)) {
                req.max_bytes = req.max_bytes.min(cap.min(i32::MAX as u64) as i32);
            }
            Quota { produce_ms: 0, consumer_fetch: true }
        }
        _ => Quota::default(),
    }
}

/// A Fetch response's frame parts; a consumer's is counted against its quota, and answered
/// empty with the throttle time when that puts it over.
pub fn fetch_parts(
    broker: &Broker,
    ctx: &RequestContext,
    header: &RequestHeader,
    version: i16,
    answer: FetchAnswer,
    quota: &Quota,
) -> anyhow::Result<(Vec<OutPart>, u64)> {
    let correlation_id = header.correlation_id;
    let session_id = answer.response.session_id;
    let parts = fetch_frame::encode_fetch_response(version, correlation_id, answer)?;
    if !quota.consumer_fetch {
        return Ok((parts, 0));
    }
    let bytes: usize = parts.iter().map(OutPart::len).sum();
    let (who, now) = (client(ctx, header), now_ms());
    let throttle_ms = broker.quotas.record(Kind::Fetch, &who, bytes, now);
    if throttle_ms == 0 {
        return Ok((parts, 0));
    }
    broker.quotas.unrecord(Kind::Fetch, &who, bytes, now);
    let response = FetchResponse::default().with_throttle_time_ms(clamp_ms(throttle_ms)).with_session_id(session_id);
    let empty = FetchAnswer { response, records: Vec::new() };
    Ok((fetch_frame::encode_fetch_response(version, correlation_id, empty)?, throttle_ms))
}

/// A throttle time as the responses' `throttle_time_ms` field.
pub fn clamp_ms(ms: u64) -> i32 {
    ms.min(i32::MAX as u64) as i32
}
