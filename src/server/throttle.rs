//! Client byte-rate quotas on a connection (`quota::QuotaStore`), where Kafka's `KafkaApis`
//! and socket server apply them: a Produce request's bytes are counted when it arrives; a
//! consumer's Fetch asks for at most its quota's bytes over the window, and its encoded response
//! is counted: when that puts the client over its quota, the client gets an empty response
//! instead (the bytes taken back), as Kafka answers a throttled fetch. Either way the response
//! carries the throttle time and the connection reads nothing more from the client until it has
//! passed (`connection.rs`), as Kafka mutes a throttled channel (KIP-219).
//!
//! Followers' fetches are not client traffic (Kafka's replication quotas are separate).

use kafka_protocol::messages::{FetchResponse, RequestHeader, RequestKind};

use crate::broker::Broker;
use crate::handlers::fetch::FetchAnswer;
use crate::handlers::RequestContext;
use crate::protocol::fetch_frame::{self, OutPart};
use crate::quota::store::Limit;
use crate::quota::{Client, Kind};

/// What a request's quota asks of the connection.
#[derive(Debug, Default)]
pub struct Quota {
    /// A Produce's throttle time (0: none).
    pub produce_ms: u64,
    /// A consumer's Fetch under a quota: its response is counted against it (`fetch_parts`).
    pub fetch_limit: Option<Limit>,
}

fn now_ms() -> u64 {
    crate::log::now_ms().max(0) as u64
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
        RequestKind::Produce(_) => match broker.quotas.limit_for(Kind::Produce, &client(ctx, header)) {
            Some(limit) => Quota { produce_ms: broker.quotas.record(&limit, frame_bytes, now_ms()), fetch_limit: None },
            None => Quota::default(),
        },
        RequestKind::Fetch(req) if req.replica_id.0 < 0 && req.replica_state.replica_id.0 < 0 => {
            let fetch_limit = broker.quotas.limit_for(Kind::Fetch, &client(ctx, header));
            if let Some(limit) = &fetch_limit {
                let cap = broker.quotas.max_bytes_in_window(limit);
                req.max_bytes = req.max_bytes.min(cap.min(i32::MAX as u64) as i32);
            }
            Quota { produce_ms: 0, fetch_limit }
        }
        _ => Quota::default(),
    }
}

/// A Fetch response's frame parts; a consumer's is counted against its quota, and answered
/// empty with the throttle time when that puts it over.
pub fn fetch_parts(
    broker: &Broker,
    header: &RequestHeader,
    version: i16,
    answer: FetchAnswer,
    quota: &Quota,
) -> anyhow::Result<(Vec<OutPart>, u64)> {
    let correlation_id = header.correlation_id;
    let session_id = answer.response.session_id;
    let parts = fetch_frame::encode_fetch_response(version, correlation_id, answer)?;
    let Some(limit) = &quota.fetch_limit else { return Ok((parts, 0)) };
    let bytes: usize = parts.iter().map(OutPart::len).sum();
    let now = now_ms();
    let throttle_ms = broker.quotas.record(limit, bytes, now);
    if throttle_ms == 0 {
        return Ok((parts, 0));
    }
    broker.quotas.unrecord(limit, bytes, now);
    let response = FetchResponse::default().with_throttle_time_ms(clamp_ms(throttle_ms)).with_session_id(session_id);
    let empty = FetchAnswer { response, records: Vec::new() };
    Ok((fetch_frame::encode_fetch_response(version, correlation_id, empty)?, throttle_ms))
}

/// A throttle time as the responses' `throttle_time_ms` field.
pub fn clamp_ms(ms: u64) -> i32 {
    ms.min(i32::MAX as u64) as i32
}
