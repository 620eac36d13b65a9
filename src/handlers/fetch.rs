//! Fetch: returns stored batches exactly as they sit on disk, with `min_bytes` / `max_wait_ms`
//! long polling woken by appends (no busy loop), and `max_bytes` / per-partition limits.
//!
//! Fetch sessions (KIP-227): Ketch answers every fetch with session id 0, i.e. "no session
//! created", which Kafka itself does when its session cache is full; clients then keep sending
//! full fetch requests. An incremental fetch naming a session gets FETCH_SESSION_ID_NOT_FOUND.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::{FetchResponse, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::BrokerId;

use crate::broker::Broker;
use crate::log::Partition;

/// Upper bound on how long one fetch may wait, whatever the client asks.
const MAX_WAIT_CAP_MS: u64 = 60_000;

struct Wanted {
    topic_index: usize,
    partition: Option<Arc<Partition>>,
    partition_index: i32,
    fetch_offset: i64,
    max_bytes: usize,
    error: Option<ResponseError>,
}

pub async fn handle(broker: &Arc<Broker>, req: FetchRequest, version: i16) -> FetchResponse {
    if req.session_id != 0 || req.session_epoch > 0 {
        return FetchResponse::default().with_error_code(ResponseError::FetchSessionIdNotFound.code()).with_session_id(0);
    }
    let mut topics = Vec::with_capacity(req.topics.len());
    let mut wanted = Vec::new();
    for (topic_index, fetch_topic) in req.topics.iter().enumerate() {
        let topic = if version >= 13 { broker.topics.get_by_id(fetch_topic.topic_id) } else { broker.topics.get(fetch_topic.topic.0.as_str()) };
        let unknown = if version >= 13 { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition };
        for p in &fetch_topic.partitions {
            let partition = topic.as_ref().and_then(|t| usize::try_from(p.partition).ok().and_then(|i| t.partitions.get(i).cloned()));
            let error = if partition.is_none() {
                Some(unknown)
            } else if p.current_leader_epoch > 0 {
                Some(ResponseError::UnknownLeaderEpoch)
            } else {
                None
            };
            wanted.push(Wanted {
                topic_index,
                partition,
                partition_index: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes.max(0) as usize,
                error,
            });
        }
        topics.push(FetchableTopicResponse::default().with_topic(fetch_topic.topic.clone()).with_topic_id(fetch_topic.topic_id));
    }
    let max_bytes = if version >= 3 { req.max_bytes.max(0) as usize } else { usize::MAX };
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline = tokio::time::Instant::now() + Duration::from_millis((req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP_MS));
    let mut appends = broker.subscribe_appends();
    let results = loop {
        appends.mark_unchanged();
        let (results, total_bytes, any_error) = read_all(&wanted, max_bytes);
        if total_bytes >= min_bytes || any_error || tokio::time::Instant::now() >= deadline {
            break results;
        }
        match tokio::time::timeout_at(deadline, appends.changed()).await {
            Ok(Ok(())) => continue,
            _ => break read_all(&wanted, max_bytes).0,
        }
    };
    for (w, data) in wanted.iter().zip(results) {
        topics[w.topic_index].partitions.push(data);
    }
    FetchResponse::default().with_session_id(0).with_responses(topics)
}

/// Reads every wanted partition once; returns the partition results, bytes gathered and whether
/// any partition failed (errors are answered immediately, as Kafka does).
fn read_all(wanted: &[Wanted], max_bytes: usize) -> (Vec<PartitionData>, usize, bool) {
    let mut total = 0usize;
    let mut any_error = false;
    let mut results = Vec::with_capacity(wanted.len());
    for w in wanted {
        let data = PartitionData::default()
            .with_partition_index(w.partition_index)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica(BrokerId(-1))
            .with_records(Some(Bytes::new()));
        let (Some(partition), None) = (&w.partition, w.error) else {
            any_error = true;
            results.push(data.with_error_code(w.error.unwrap_or(ResponseError::UnknownTopicOrPartition).code()));
            continue;
        };
        let log = partition.log();
        let high_watermark = log.high_watermark();
        let data = data
            .with_high_watermark(high_watermark)
            .with_last_stable_offset(high_watermark)
            .with_log_start_offset(log.log_start_offset());
        let budget = w.max_bytes.min(max_bytes.saturating_sub(total));
        // KIP-74: the first batch of the first non-empty partition is returned even if larger.
        let min_one = total == 0;
        if budget == 0 && !min_one {
            results.push(data.with_records(Some(Bytes::new())));
            continue;
        }
        match log.read(w.fetch_offset, high_watermark, budget, min_one) {
            Ok(bytes) => {
                total += bytes.len();
                results.push(data.with_records(Some(Bytes::from(bytes))));
            }
            Err(e) => {
                any_error = true;
                results.push(data.with_error_code(e.code()));
            }
        }
    }
    (results, total, any_error)
}
