//! Fetch: returns stored batches exactly as they sit on disk, with `min_bytes` / `max_wait_ms`
//! long polling woken by appends (no busy loop), and `max_bytes` / per-partition limits.
//!
//! Records are not copied here: each partition's answer is a `FileSlice` of a segment file,
//! located under the partition lock and read (or sent with `sendfile`) after it is released;
//! `FetchAnswer` carries the slices next to the response whose `records` they fill.
//!
//! Fetch sessions (KIP-227) are resolved by `crate::fetch_session`: incremental requests name
//! only changed partitions and get back only partitions with news.
//!
//! Authorization (Kafka's): a consumer needs READ on each topic, a follower (replica id >= 0)
//! CLUSTER_ACTION; a refused partition is answered TOPIC_AUTHORIZATION_FAILED.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchRequest;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, ProducerId, TopicName};

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::fetch_session::{Key, LastSent, Wanted as SessionWanted};
use crate::log::{FileSlice, Partition};
use crate::replica::manager::{Replica, ReplicaManager};
use crate::security::acl;

/// Upper bound on how long one fetch may wait, whatever the client asks.
const MAX_WAIT_CAP_MS: u64 = 60_000;

struct Wanted {
    key: Key,
    partition: Option<Arc<Partition>>,
    fetch_offset: i64,
    max_bytes: usize,
    error: Option<ResponseError>,
    /// A follower of a replicated partition: it reads up to the log end, not the high watermark.
    replica_read: bool,
    /// Where a follower's log diverged from this leader's: answered instead of records.
    diverging: Option<(i32, i64)>,
}

/// A fetch response whose partitions' `records` are still in segment files.
pub struct FetchAnswer {
    /// Every partition's `records` is empty here; the bytes are in `records`.
    pub response: FetchResponse,
    /// One entry per partition of `response`, in order (topics, then their partitions).
    pub records: Vec<Option<FileSlice>>,
}

impl FetchAnswer {
    /// The complete response, with the records read into memory. A segment that can no longer
    /// be read turns into KAFKA_STORAGE_ERROR for its partition.
    pub fn into_response(self) -> FetchResponse {
        let FetchAnswer { mut response, records } = self;
        let partitions = response.responses.iter_mut().flat_map(|t| t.partitions.iter_mut());
        for (data, slice) in partitions.zip(records) {
            let Some(slice) = slice else { continue };
            match slice.read_to_vec() {
                Ok(bytes) => data.records = Some(Bytes::from(bytes)),
                Err(e) => {
                    tracing::warn!(error = %e, "reading fetched records");
                    data.error_code = ResponseError::KafkaStorageError.code();
                }
            }
        }
        response
    }

    /// Bytes of records in the answer.
    pub fn records_bytes(&self) -> usize {
        self.records.iter().flatten().map(|s| s.len).sum()
    }
}

pub async fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: FetchRequest, version: i16) -> FetchAnswer {
    let by_id = version >= 13;
    // Names and ids both identify a topic in the session; resolve whichever the version lacks.
    let key_of = |name: &TopicName, id: uuid::Uuid, partition: i32| -> Key {
        if by_id {
            let name = broker.topics.get_by_id(id).map(|t| t.name.clone()).unwrap_or_default();
            (name, id, partition)
        } else {
            let id = broker.topics.get(name.0.as_str()).map_or(uuid::Uuid::nil(), |t| t.id);
            (name.0.as_str().to_string(), id, partition)
        }
    };
    let mut requested = Vec::new();
    let mut current_epochs = std::collections::HashMap::new();
    let mut last_fetched_epochs = std::collections::HashMap::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            let key = key_of(&topic.topic, topic.topic_id, p.partition);
            if p.current_leader_epoch >= 0 {
                current_epochs.insert(key.clone(), p.current_leader_epoch);
            }
            if p.last_fetched_epoch >= 0 {
                last_fetched_epochs.insert(key.clone(), p.last_fetched_epoch);
            }
            requested.push((key, SessionWanted { fetch_offset: p.fetch_offset, max_bytes: p.partition_max_bytes }));
        }
    }
    let forgotten = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, *p)))
        .map(|(t, p)| key_of(&t.topic, t.topic_id, p))
        .collect();
    let privileged = req.replica_id.0 >= 0 || req.replica_state.replica_id.0 >= 0;
    let plan = match broker.fetch_sessions.plan(req.session_id, req.session_epoch, requested, forgotten, privileged) {
        Ok(plan) => plan,
        Err(error) => {
            let response = FetchResponse::default().with_error_code(error.code()).with_session_id(0);
            return FetchAnswer { response, records: Vec::new() };
        }
    };
    let unknown = if by_id { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition };
    // Kafka: a follower (replica id >= 0) needs CLUSTER_ACTION, a consumer READ on each topic.
    let authz = ctx.authz(broker);
    let follower = req.replica_id.0 >= 0 || req.replica_state.replica_id.0 >= 0;
    let follower_allowed = follower && authz.cluster(acl::CLUSTER_ACTION);
    // In a cluster: who leads what, and the follower fetching (a single node leads all).
    let replicas = broker.replicas.get();
    let follower_id = req.replica_state.replica_id.0.max(req.replica_id.0);
    if let (Some(rm), true, true) = (replicas, follower_allowed, req.replica_state.replica_epoch >= 0) {
        rm.set_follower_epoch(follower_id, req.replica_state.replica_epoch);
    }
    let mut high_watermark_moved = false;
    // Nothing to compute on the hot path without an authorizer.
    let readable: Option<HashSet<String>> = (authz.enabled() && !follower).then(|| {
        let names = plan.partitions.iter().map(|(k, _)| k.0.as_str());
        authz.allowed_names(acl::READ, acl::TOPIC, names).into_iter().map(str::to_string).collect()
    });
    let wanted: Vec<Wanted> = plan
        .partitions
        .into_iter()
        .map(|(key, w)| {
            let topic = if by_id { broker.topics.get_by_id(key.1) } else { broker.topics.get(&key.0) };
            let partition =
                topic.as_ref().and_then(|t| usize::try_from(key.2).ok().and_then(|i| t.partitions.get(i).cloned()));
            // In a cluster, a partition of a known topic that is not hosted here.
            let elsewhere = replicas.is_some()
                && topic.as_ref().is_some_and(|t| key.2 >= 0 && (key.2 as usize) < t.partitions.len());
            let requested_epoch = current_epochs.get(&key).copied().unwrap_or(-1);
            // In a cluster, the partition's replica here (looked up once: its role, its followers).
            let replica = replicas.zip(partition.as_ref()).and_then(|(rm, p)| rm.get(&p.topic, p.index));
            let allowed = match &readable {
                _ if follower => follower_allowed,
                Some(readable) => readable.contains(&key.0),
                None => true,
            };
            let error = match &partition {
                // An unknown topic id has no name to authorize.
                _ if by_id && key.0.is_empty() && !follower => Some(ResponseError::UnknownTopicId),
                _ if !allowed => Some(ResponseError::TopicAuthorizationFailed),
                None if elsewhere => Some(ResponseError::NotLeaderOrFollower),
                None => Some(unknown),
                Some(_) if replicas.is_some() => match &replica {
                    Some(replica) => replica.check_leader(requested_epoch).err(),
                    None => Some(ResponseError::NotLeaderOrFollower),
                },
                // Only a request naming an epoch needs the log (its epoch cache) here.
                Some(p) if requested_epoch >= 0 => {
                    crate::replica::check_current_leader_epoch(&p.log(), requested_epoch).err()
                }
                Some(_) => None,
            };
            let mut wanted = Wanted {
                key,
                partition,
                fetch_offset: w.fetch_offset,
                max_bytes: w.max_bytes.max(0) as usize,
                error,
                replica_read: false,
                diverging: None,
            };
            if let (Some(rm), Some(p), Some(replica), None, true) =
                (replicas, wanted.partition.clone(), replica, error, follower)
            {
                let last_fetched_epoch = last_fetched_epochs.get(&wanted.key).copied().unwrap_or(-1);
                high_watermark_moved |=
                    follower_fetched(rm, &p, &replica, follower_id, &mut wanted, last_fetched_epoch);
            }
            wanted
        })
        .collect();
    if high_watermark_moved {
        broker.notify_appended();
    }
    let max_bytes = (req.max_bytes.max(0) as usize).min(broker.config.fetch_max_bytes);
    let read_committed = version >= 4 && req.isolation_level == 1;
    let min_bytes = req.min_bytes.max(0) as usize;
    let deadline =
        tokio::time::Instant::now() + Duration::from_millis((req.max_wait_ms.max(0) as u64).min(MAX_WAIT_CAP_MS));
    let mut appends = broker.subscribe_appends();
    let ReadAll { results, slices, .. } = loop {
        appends.mark_unchanged();
        let read = read_all(&wanted, max_bytes, read_committed);
        if read.total_bytes >= min_bytes || read.any_error || tokio::time::Instant::now() >= deadline {
            break read;
        }
        match tokio::time::timeout_at(deadline, appends.changed()).await {
            Ok(Ok(())) => continue,
            _ => break read_all(&wanted, max_bytes, read_committed),
        }
    };
    let sent: Vec<(Key, LastSent, bool)> = wanted
        .iter()
        .zip(&results)
        .zip(&slices)
        .map(|((w, d), slice)| {
            let news = d.error_code != 0 || slice.is_some();
            (w.key.clone(), LastSent { high_watermark: d.high_watermark, log_start_offset: d.log_start_offset }, news)
        })
        .collect();
    let shown = if plan.session_id != 0 {
        broker.fetch_sessions.record_sent(plan.session_id, &sent)
    } else {
        vec![true; sent.len()]
    };
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    let mut records = Vec::with_capacity(slices.len());
    for (((w, data), slice), show) in wanted.iter().zip(results).zip(slices).zip(shown) {
        if plan.incremental && !show {
            continue;
        }
        records.push(slice);
        let same_topic =
            topics.last().is_some_and(|t| if by_id { t.topic_id == w.key.1 } else { t.topic.0.as_str() == w.key.0 });
        if !same_topic {
            let topic = FetchableTopicResponse::default();
            topics.push(if by_id {
                topic.with_topic_id(w.key.1)
            } else {
                topic.with_topic(TopicName(str_bytes(&w.key.0)))
            });
        }
        topics.last_mut().expect("pushed above").partitions.push(data);
    }
    let response = FetchResponse::default().with_responses(topics);
    let response = if version >= 7 { response.with_session_id(plan.session_id) } else { response };
    FetchAnswer { response, records }
}

/// What one pass over the wanted partitions found.
struct ReadAll {
    /// One per wanted partition, `records` left empty.
    results: Vec<PartitionData>,
    /// The records of each, in `results` order.
    slices: Vec<Option<FileSlice>>,
    total_bytes: usize,
    /// Some partition failed (errors are answered immediately, as Kafka does).
    any_error: bool,
}

/// Reads every wanted partition once (locating its records, not copying them).
fn read_all(wanted: &[Wanted], max_bytes: usize, read_committed: bool) -> ReadAll {
    let mut read = ReadAll {
        results: Vec::with_capacity(wanted.len()),
        slices: Vec::with_capacity(wanted.len()),
        total_bytes: 0,
        any_error: false,
    };
    for w in wanted {
        let data = PartitionData::default()
            .with_partition_index(w.key.2)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica(BrokerId(-1))
            .with_records(Some(Bytes::new()));
        let (Some(partition), None) = (&w.partition, w.error) else {
            read.any_error = true;
            read.results.push(data.with_error_code(w.error.unwrap_or(ResponseError::UnknownTopicOrPartition).code()));
            read.slices.push(None);
            continue;
        };
        // KIP-74: the first batch of the first non-empty partition is returned even if larger.
        let min_one = read.total_bytes == 0;
        let budget = w.max_bytes.min(max_bytes.saturating_sub(read.total_bytes));
        let (data, slice) = read_partition(partition, w, data, budget, min_one, read_committed);
        if data.error_code != 0 {
            read.any_error = true;
        }
        read.total_bytes += slice.as_ref().map_or(0, |s| s.len);
        read.results.push(data);
        read.slices.push(slice);
    }
    read
}

/// One partition's answer under its lock: offsets, aborted transactions and where its records are.
fn read_partition(
    partition: &Partition,
    w: &Wanted,
    data: PartitionData,
    budget: usize,
    min_one: bool,
    read_committed: bool,
) -> (PartitionData, Option<FileSlice>) {
    let log = partition.log();
    if log.health().is_offline() {
        // Its log directory failed: Kafka answers KAFKA_STORAGE_ERROR without offsets.
        let data = data.with_high_watermark(-1).with_last_stable_offset(-1).with_log_start_offset(-1);
        return (data.with_error_code(ResponseError::KafkaStorageError.code()), None);
    }
    let high_watermark = log.high_watermark();
    let last_stable = log.last_stable_offset();
    // read_committed consumers see nothing past the LSO (an open transaction's first offset);
    // followers read everything (the leader's high watermark waits for them).
    let upper = match (w.replica_read, read_committed) {
        (true, _) => log.log_end_offset(),
        (false, true) => last_stable,
        (false, false) => high_watermark,
    };
    let data = data
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(last_stable)
        .with_log_start_offset(log.log_start_offset());
    let data = if read_committed {
        let aborted = log
            .aborted_txns(w.fetch_offset, upper)
            .into_iter()
            .map(|a| {
                AbortedTransaction::default()
                    .with_producer_id(ProducerId(a.producer_id))
                    .with_first_offset(a.first_offset)
            })
            .collect();
        data.with_aborted_transactions(Some(aborted))
    } else {
        data
    };
    if let Some((epoch, end_offset)) = w.diverging {
        let diverging = EpochEndOffset::default().with_epoch(epoch).with_end_offset(end_offset);
        return (data.with_diverging_epoch(diverging), None);
    }
    if budget == 0 && !min_one {
        return (data, None);
    }
    match log.read_slice(w.fetch_offset, upper, budget, min_one) {
        Ok(slice) => (data, slice),
        Err(e) => (data.with_error_code(e.code()), None),
    }
}

/// A follower fetched a partition led here: its log end is `fetch_offset`, which may move
/// the high watermark and bring it into the ISR (proposed to the controller); or its log
/// diverged after `last_fetched_epoch`, which it is told instead of getting records. Returns
/// whether the high watermark moved.
fn follower_fetched(
    rm: &ReplicaManager,
    partition: &Partition,
    replica: &Replica,
    follower_id: i32,
    w: &mut Wanted,
    last_fetched_epoch: i32,
) -> bool {
    w.replica_read = true;
    let mut log = partition.log();
    if let Some(diverging) = Replica::diverging_epoch(&log, last_fetched_epoch, w.fetch_offset) {
        w.diverging = Some(diverging);
        return false;
    }
    let (moved, proposal) = replica.on_follower_fetch(&mut log, follower_id, w.fetch_offset, crate::log::now_ms());
    drop(log);
    if let Some(proposal) = proposal {
        tracing::info!(topic = %partition.topic, partition = partition.index, isr = ?proposal.isr, "expanding the ISR");
        rm.propose(replica.topic_id, partition.index, proposal);
    }
    moved
}
