//! Client byte-rate quotas on a connection (`quota::QuotaStore`), where Kafka's `KafkaApis`
//! and socket server apply them: a Produce request's bytes are counted when it arrives; a
//! consumer's Fetch asks for at most its quota's bytes over the window, and its encoded response
//! is counted: when that puts the client over its quota, the client gets an empty response
//! instead (the bytes taken back), as Kafka answers a throttled fetch. Either way the response
//! carries the throttle time and the connection reads nothing more from the client until it has
//! passed (`connection.rs`), as Kafka mutes a throttled channel (KIP-219).
//!
//! The request quota (`request_percentage`, Kafka's `ClientRequestQuotaManager`): the time a
//! request's handler spends being polled (`Timed`: what occupies a thread, not the time it
//! waits, as Kafka counts request-handler thread time, not purgatory time) is counted in percent
//! of a thread per second; over the quota, the response carries the throttle time (at most one
//! quota window), a fetch is answered empty, and the connection is muted for it. Exempt as in
//! Kafka: followers' fetches and the inter-broker APIs; acks=0 produce requests.
//!
//! Followers' fetches are not client traffic (Kafka's replication quotas are separate).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, FetchResponse, RequestHeader, RequestKind};

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
    /// The request quota its handling time counts against (`request_ms`).
    pub request_limit: Option<Limit>,
}

fn now_ms() -> u64 {
    crate::log::now_ms().max(0) as u64
}

/// Before a request is handled, with one lookup of the quotas: counts a Produce's
/// `frame_bytes`; caps a consumer Fetch's `max_bytes` at its quota's bytes over the window; names
/// the request quota the request counts against, unless it is exempt (followers' fetches,
/// inter-broker APIs, acks=0 produce requests).
pub fn before(
    broker: &Broker,
    ctx: &RequestContext,
    header: &RequestHeader,
    body: &mut RequestKind,
    frame_bytes: usize,
) -> Quota {
    let client = Client::of(&ctx.principal, header.client_id.as_ref().map(|c| c.as_str()));
    let (bytes_kind, exempt) = match body {
        RequestKind::Produce(req) => (Some(Kind::Produce), req.acks == 0),
        RequestKind::Fetch(req) if req.replica_id.0 >= 0 || req.replica_state.replica_id.0 >= 0 => (None, true),
        RequestKind::Fetch(_) => (Some(Kind::Fetch), false),
        _ => {
            let inter_broker = matches!(
                ApiKey::try_from(header.request_api_key),
                Ok(ApiKey::WriteTxnMarkers | ApiKey::AlterPartition | ApiKey::Envelope)
            );
            (None, inter_broker)
        }
    };
    let [bytes_limit, request_limit] = match bytes_kind {
        Some(kind) => broker.quotas.limits_for([kind, Kind::Request], &client),
        None => {
            let [request_limit] = broker.quotas.limits_for([Kind::Request], &client);
            [None, request_limit]
        }
    };
    let mut quota = Quota { request_limit: request_limit.filter(|_| !exempt), ..Quota::default() };
    match (body, bytes_limit) {
        (RequestKind::Produce(_), Some(limit)) => {
            quota.produce_ms = broker.quotas.record(&limit, frame_bytes, now_ms())
        }
        (RequestKind::Fetch(req), Some(limit)) => {
            let cap = broker.quotas.max_bytes_in_window(&limit);
            req.max_bytes = req.max_bytes.min(cap.min(i32::MAX as u64) as i32);
            quota.fetch_limit = Some(limit);
        }
        _ => {}
    }
    quota
}

/// A Fetch response's frame parts; a consumer's is counted against its quota, and answered
/// empty with the throttle time when that puts it over, or when its request quota throttles it
/// (`request_ms` > 0), as Kafka answers a fetch either quota throttles.
pub fn fetch_parts(
    broker: &Broker,
    header: &RequestHeader,
    version: i16,
    answer: FetchAnswer,
    quota: &Quota,
    request_ms: u64,
) -> anyhow::Result<(Vec<OutPart>, u64)> {
    let correlation_id = header.correlation_id;
    let session_id = answer.response.session_id;
    let parts = fetch_frame::encode_fetch_response(version, correlation_id, answer)?;
    if quota.fetch_limit.is_none() && request_ms == 0 {
        return Ok((parts, 0));
    }
    let bytes: usize = parts.iter().map(OutPart::len).sum();
    let now = now_ms();
    let bytes_ms = quota.fetch_limit.as_ref().map_or(0, |limit| broker.quotas.record(limit, bytes, now));
    let throttle_ms = bytes_ms.max(request_ms);
    if throttle_ms == 0 {
        return Ok((parts, 0));
    }
    if let Some(limit) = &quota.fetch_limit {
        broker.quotas.unrecord(limit, bytes, now);
    }
    let response = FetchResponse::default().with_throttle_time_ms(clamp_ms(throttle_ms)).with_session_id(session_id);
    let empty = FetchAnswer { response, records: Vec::new() };
    Ok((fetch_frame::encode_fetch_response(version, correlation_id, empty)?, throttle_ms))
}

/// Counts `busy` (a request's handling time) against its request quota: the throttle time (0:
/// none, or no quota).
pub fn request_ms(broker: &Broker, limit: Option<&Limit>, busy: Duration) -> u64 {
    let Some(limit) = limit else { return 0 };
    // Kafka's nanosToPercentage: one second of a thread is 100 (percent).
    let percent = busy.as_nanos() as f64 * 100.0 / 1e9;
    broker.quotas.record_value(limit, percent, now_ms())
}

/// A future and the time spent polling it: what its handler occupied a thread for.
pub struct Timed<F> {
    inner: Pin<Box<F>>,
    busy: Duration,
}

impl<F: Future> Timed<F> {
    pub fn new(inner: F) -> Timed<F> {
        Timed { inner: Box::pin(inner), busy: Duration::ZERO }
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = (F::Output, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        self.busy += started.elapsed();
        let busy = self.busy;
        polled.map(|out| (out, busy))
    }
}

/// A throttle time as the responses' `throttle_time_ms` field.
pub fn clamp_ms(ms: u64) -> i32 {
    ms.min(i32::MAX as u64) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn timed_counts_the_polls_not_the_waits() {
        let handler = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            std::thread::sleep(Duration::from_millis(20)); // work that holds the thread
            7
        };
        let (out, busy) = Timed::new(handler).await;
        assert_eq!(out, 7);
        assert!(busy >= Duration::from_millis(20), "the blocking part is counted: {busy:?}");
        assert!(busy < Duration::from_millis(200), "the wait is not: {busy:?}");
    }
}
