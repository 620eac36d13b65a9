//! Produce: validate each partition's batch, append it, and acknowledge per `acks`
//! (0: no response; 1: once in the log; -1/all: once fsynced when `ketch.acks.all.fsync`).
//! Transactional batches are verified against their transaction first (`txn_verify`).
//! Authorization (`ProduceAuth`, Kafka's): transactional batches need WRITE on the
//! transactional id (else every partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic
//! WRITE (else TOPIC_AUTHORIZATION_FAILED, before any existence check).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::ProduceRequest;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::TopicName;

use super::{str_bytes, txn_verify, RequestContext};
use crate::broker::Broker;
use crate::error::LogError;
use crate::log::{batch, now_ms, record_error, Partition, PartitionLog};
use crate::replica;
use crate::replica::manager::Replica;
use crate::security::acl;

/// A Produce carrying transactional batches without a transactional id is refused as a whole,
/// as Kafka does (its authorizer check on the transactional id fails).
fn has_transactional_batch(req: &ProduceRequest) -> bool {
    req.topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .any(|d| d.records.as_deref().and_then(txn_verify::transactional_producer).is_some())
}

/// What the principal may not do in a Produce (Kafka's checks): nothing at all when the
/// request carries transactional batches without WRITE on its transactional id (or without
/// one), else write the `denied_topics` (no WRITE on them).
#[derive(Default)]
pub struct ProduceAuth {
    pub txn_denied: bool,
    pub denied_topics: HashSet<String>,
}

impl ProduceAuth {
    pub fn check(broker: &Broker, ctx: &RequestContext, req: &ProduceRequest, version: i16) -> ProduceAuth {
        let authz = ctx.authz(broker);
        if !authz.enabled() {
            // As Kafka, with no transactional id its authorizer check fails.
            return ProduceAuth {
                txn_denied: req.transactional_id.is_none() && has_transactional_batch(req),
                ..Default::default()
            };
        }
        if has_transactional_batch(req) {
            let allowed =
                req.transactional_id.as_ref().is_some_and(|id| authz.allows(acl::WRITE, acl::TRANSACTIONAL_ID, id));
            if !allowed {
                return ProduceAuth { txn_denied: true, ..Default::default() };
            }
        }
        let names: Vec<String> = req
            .topic_data
            .iter()
            .filter_map(|t| match version >= 13 {
                true => broker.topics.get_by_id(t.topic_id).map(|t| t.name.clone()),
                false => Some(t.name.0.as_str().to_string()),
            })
            .collect();
        let allowed = authz.allowed_names(acl::WRITE, acl::TOPIC, names.iter().map(String::as_str));
        let denied_topics = names.iter().filter(|n| !allowed.contains(n.as_str())).cloned().collect();
        ProduceAuth { txn_denied: false, denied_topics }
    }
}

/// A produce request whose batches are in the log; its response waits for the fsyncs.
pub struct Appended {
    acks: i16,
    responses: Vec<TopicProduceResponse>,
    /// (partition, offset to make durable, topic index, partition index in the response).
    to_flush: Vec<(Arc<Partition>, i64, usize, usize)>,
    /// In a cluster, acks=all writes waiting for the high watermark: (replica, offset it must
    /// pass, topic index, partition index in the response), until `deadline`.
    to_commit: Vec<(Arc<Replica>, i64, usize, usize)>,
    deadline: tokio::time::Instant,
}

impl Appended {
    /// Whether the response must wait for an fsync or for followers.
    pub fn waits_for_flush(&self) -> bool {
        !self.to_flush.is_empty() || !self.to_commit.is_empty()
    }
}

/// Validates and appends every partition's batch, in request order. Synchronous, so that the
/// connection can append the next pipelined request while this one waits for its fsync.
/// `added`: the coordinator's answers of `txn_verify::produce_implicit_adds`.
pub fn append(
    broker: &Arc<Broker>,
    req: ProduceRequest,
    version: i16,
    added: &HashMap<(String, i32), txn_verify::Asked>,
    auth: &ProduceAuth,
) -> Appended {
    let acks = req.acks;
    let txn_id = req.transactional_id.as_ref().map(|id| id.0.as_str().to_string());
    let mut responses = Vec::with_capacity(req.topic_data.len());
    let mut to_flush: Vec<(Arc<Partition>, i64, usize, usize)> = Vec::new();
    let mut to_commit = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(req.timeout_ms.max(0) as u64);
    // In a cluster: who leads what (a single node leads everything it hosts).
    let replicas = broker.replicas.get();
    let mut appended_any = false;
    for topic_data in req.topic_data {
        let topic = if version >= 13 {
            broker.topics.get_by_id(topic_data.topic_id)
        } else {
            broker.topics.get(topic_data.name.0.as_str())
        };
        let unknown =
            if version >= 13 { ResponseError::UnknownTopicId } else { ResponseError::UnknownTopicOrPartition };
        let mut partitions = Vec::with_capacity(topic_data.partition_data.len());
        for data in topic_data.partition_data {
            let response = PartitionProduceResponse::default()
                .with_index(data.index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            if auth.txn_denied {
                let e = ResponseError::TransactionalIdAuthorizationFailed;
                partitions.push(response.with_error_code(e.code()));
                continue;
            }
            // By name: a v13 topic id nobody knows stays UNKNOWN_TOPIC_ID.
            let name = match version >= 13 {
                true => topic.as_ref().map(|t| t.name.as_str()),
                false => Some(topic_data.name.0.as_str()),
            };
            if name.is_some_and(|n| auth.denied_topics.contains(n)) {
                partitions.push(response.with_error_code(ResponseError::TopicAuthorizationFailed.code()));
                continue;
            }
            let partition = topic
                .as_ref()
                .and_then(|t| usize::try_from(data.index).ok().and_then(|i| t.partitions.get(i).cloned()));
            let Some(partition) = partition else {
                // In a cluster, a partition of a known topic that is not hosted here.
                let elsewhere = replicas.is_some()
                    && topic.as_ref().is_some_and(|t| data.index >= 0 && (data.index as usize) < t.partitions.len());
                let error = if elsewhere { ResponseError::NotLeaderOrFollower } else { unknown };
                partitions.push(response.with_error_code(error.code()));
                continue;
            };
            let replica = match replicas.map(|r| r.get(&partition.topic, partition.index)) {
                None => None,
                Some(Some(replica)) if replica.check_leader(-1).is_ok() => Some(replica),
                Some(_) => {
                    partitions.push(response.with_error_code(ResponseError::NotLeaderOrFollower.code()));
                    continue;
                }
            };
            if topic.as_ref().is_some_and(|t| t.internal) {
                // Internal topics are written by their coordinators only, as in Kafka.
                partitions.push(response.with_error_code(ResponseError::InvalidTopicException.code()));
                continue;
            }
            if !matches!(acks, -1..=1) {
                partitions.push(response.with_error_code(ResponseError::InvalidRequiredAcks.code()));
                continue;
            }
            let config = partition.log().config().clone();
            if acks == -1 && config.min_insync_replicas > 1 && replica.is_none() {
                // One node is the whole in-sync replica set.
                partitions.push(response.with_error_code(ResponseError::NotEnoughReplicas.code()));
                continue;
            }
            let Some(records) = data.records else {
                partitions.push(response.with_error_code(ResponseError::InvalidRecord.code()));
                continue;
            };
            // Transactional batches only: the checks cost nothing on the plain produce path.
            // Verified before validation (as Kafka does: coordinator errors come first), and
            // checked again under the log lock with the append: the guard of the verification
            // must still be current, so that no transaction marker written in between lets the
            // batch open a transaction the coordinator does not know.
            let txn = txn_verify::transactional_producer(&records);
            let guard = match txn {
                None => None,
                Some(p) => {
                    let key = (partition.topic.clone(), partition.index);
                    let asked = added.get(&key).copied();
                    let verified = txn_verify::verify_produce(
                        broker,
                        &mut partition.log(),
                        &key,
                        txn_id.as_deref(),
                        p,
                        version,
                        asked,
                    );
                    match verified {
                        Ok(guard) => guard,
                        Err(refusal) => {
                            partitions.push(not_verified(response, refusal));
                            continue;
                        }
                    }
                }
            };
            let check = |log: &PartitionLog, batch: &[u8]| match txn {
                None => Ok(()),
                Some(_) => txn_verify::check_at_append(log, batch, guard, version),
            };
            let now = now_ms();
            let appended =
                batch::validate_produce(records, &config, now).map_err(Refused::Log).and_then(|(bytes, summary)| {
                    let mut log = partition.log();
                    check(&log, bytes.as_ref()).map_err(Refused::Txn)?;
                    match &replica {
                        None => replica::append_as_leader(&mut log, bytes, &summary, now).map_err(Refused::Log),
                        Some(r) => r
                            .append(&mut log, bytes, &summary, now, acks == -1)
                            .map_err(Refused::Replica)?
                            .map_err(Refused::Log),
                    }
                });
            match appended {
                Ok(info) => {
                    appended_any = true;
                    if acks == -1 && broker.config.ketch_acks_all_fsync || info.flush_due {
                        to_flush.push((partition.clone(), info.last_offset + 1, responses.len(), partitions.len()));
                    }
                    if let (-1, Some(r)) = (acks, &replica) {
                        to_commit.push((r.clone(), info.last_offset + 1, responses.len(), partitions.len()));
                    }
                    partitions.push(
                        response
                            .with_base_offset(info.base_offset)
                            .with_log_append_time_ms(info.log_append_time_ms)
                            .with_log_start_offset(info.log_start_offset),
                    );
                }
                Err(Refused::Txn(e)) => partitions.push(not_verified(response, e)),
                Err(Refused::Replica(e)) => partitions.push(response.with_error_code(e.code())),
                Err(Refused::Log(e)) => {
                    tracing::debug!(topic = %partition.topic, partition = partition.index, error = %e, "produce rejected");
                    partitions.push(rejected(response, &e, &partition));
                }
            }
        }
        responses.push(
            TopicProduceResponse::default()
                // A copy: the request's name is a slice of its frame, which would otherwise stay
                // in memory (megabytes) until the response is written, after the fsync.
                .with_name(TopicName(str_bytes(topic_data.name.0.as_str())))
                .with_topic_id(topic_data.topic_id)
                .with_partition_responses(partitions),
        );
    }
    if appended_any {
        broker.notify_appended();
    }
    Appended { acks, responses, to_flush, to_commit, deadline }
}

/// Why a batch was not appended.
enum Refused {
    Log(LogError),
    Txn(txn_verify::Refusal),
    /// Not the leader, or too few in-sync replicas for acks=all.
    Replica(ResponseError),
}

/// The response for a transactional batch that failed verification.
fn not_verified(response: PartitionProduceResponse, (e, message): txn_verify::Refusal) -> PartitionProduceResponse {
    response.with_error_code(e.code()).with_error_message(message.map(str_bytes))
}

/// The response for a batch the log refused, filled as Kafka's `ReplicaManager` fills it: only
/// refused records (KIP-467) get an `error_message` and `record_errors`; the log start offset is
/// reported except for corrupt, too large and storage errors, which Kafka answers before looking
/// at the partition.
fn rejected(response: PartitionProduceResponse, error: &LogError, partition: &Partition) -> PartitionProduceResponse {
    let response = response.with_error_code(error.code());
    match error {
        LogError::CorruptMessage(_) | LogError::MessageTooLarge { .. } | LogError::Io(_) => response,
        LogError::InvalidRecords(errors) => {
            let topic_partition = format!("{}-{}", partition.topic, partition.index);
            let record_errors = errors
                .iter()
                .map(|e| {
                    BatchIndexAndErrorMessage::default()
                        .with_batch_index(e.batch_index)
                        .with_batch_index_error_message(Some(str_bytes(&e.message(&topic_partition))))
                })
                .collect();
            response
                .with_log_start_offset(partition.log().log_start_offset())
                .with_record_errors(record_errors)
                .with_error_message(Some(str_bytes(&record_error::summary(errors, &topic_partition))))
        }
        _ => response.with_log_start_offset(partition.log().log_start_offset()),
    }
}

/// Waits until the appended data is durable where required, then builds the response
/// (`None` for acks=0, which gets none).
pub async fn complete(broker: &Broker, appended: Appended) -> Option<ProduceResponse> {
    let Appended { acks, mut responses, to_flush, to_commit, deadline } = appended;
    let work = to_flush.iter().map(|(partition, offset, _, _)| (partition.clone(), *offset)).collect();
    let results = broker.flusher.flush_all(work).await;
    for ((_, _, t, p), result) in to_flush.into_iter().zip(results) {
        if let Err(e) = result {
            tracing::error!(error = %e, "fsync failed");
            // Kafka answers a storage error without a message.
            responses[t].partition_responses[p].error_code = ResponseError::KafkaStorageError.code();
        }
    }
    // Kafka's delayed produce: done when the high watermark passes the write (or the ISR shrank
    // below min.insync.replicas, or leadership moved), else REQUEST_TIMED_OUT at the deadline.
    for (replica, required, t, p) in to_commit {
        if let Some(e) = replica.wait_acks_all(required, deadline).await {
            let code = &mut responses[t].partition_responses[p].error_code;
            if *code == 0 {
                *code = e.code();
            }
        }
    }
    if acks == 0 {
        return None;
    }
    Some(ProduceResponse::default().with_responses(responses))
}
