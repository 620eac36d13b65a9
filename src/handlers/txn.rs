//! Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
//! TxnOffsetCommit, and DescribeTransactions / ListTransactions / DescribeProducers for the
//! `kafka-transactions` tool. The coordinator lives in `crate::txn`. Each handler checks what
//! Kafka's `KafkaApis` checks (transactional id WRITE / DESCRIBE, group READ, topic WRITE /
//! READ / DESCRIBE, IDEMPOTENT_WRITE), described where it is done.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_offsets_to_txn_request::AddOffsetsToTxnRequest;
use kafka_protocol::messages::add_offsets_to_txn_response::AddOffsetsToTxnResponse;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_request::DescribeProducersRequest;
use kafka_protocol::messages::describe_producers_response::{self as dp, DescribeProducersResponse};
use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use kafka_protocol::messages::describe_transactions_response::{self as dt, DescribeTransactionsResponse};
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::list_transactions_response::{self as lt, ListTransactionsResponse};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequest;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ProducerId, TopicName, TransactionalId};

use super::{str_bytes, txn_verify, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::group::records::OffsetValue;
use crate::log::now_ms;
use crate::security::acl;
use crate::txn::transitions::TV_0;

fn code(r: Result<(), ResponseError>) -> i16 {
    r.err().map_or(0, |e| e.code())
}

/// Clients before version 2 of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn do not know
/// PRODUCER_FENCED: Kafka answers them INVALID_PRODUCER_EPOCH instead.
fn for_version(r: Result<(), ResponseError>, version: i16) -> Result<(), ResponseError> {
    match r {
        Err(ResponseError::ProducerFenced) if version < 2 => Err(ResponseError::InvalidProducerEpoch),
        other => other,
    }
}

pub async fn init_producer_id(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    // Kafka: WRITE on the transactional id; an idempotent producer IDEMPOTENT_WRITE on the
    // cluster or WRITE on some topic.
    let authz = ctx.authz(broker);
    let refused = match &req.transactional_id {
        Some(id) if !authz.allows(acl::WRITE, acl::TRANSACTIONAL_ID, id) => {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        }
        None if !authz.allows_quietly(acl::IDEMPOTENT_WRITE, acl::CLUSTER, acl::CLUSTER_NAME)
            && !authz.any_of_type(acl::WRITE, acl::TOPIC) =>
        {
            Some(ResponseError::ClusterAuthorizationFailed)
        }
        _ => None,
    };
    if let Some(e) = refused {
        return response.with_error_code(e.code());
    }
    let result = match &req.transactional_id {
        // Idempotent producer: always a fresh producer id at epoch 0, as Kafka does.
        None => broker.producer_ids.next().map(|id| (id, 0)).map_err(|e| match e {
            // Kafka's answer while its next block of ids comes from the controller.
            crate::txn::producer_ids::NoId::Pending => ResponseError::CoordinatorLoadInProgress,
            crate::txn::producer_ids::NoId::Io(_) => ResponseError::KafkaStorageError,
        }),
        Some(id) => {
            let expected = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
            broker.txns.init_producer_id(&broker.txn_deps(), id.0.as_str(), req.transaction_timeout_ms, expected).await
        }
    };
    // Clients before InitProducerId v4 do not know PRODUCER_FENCED.
    let result = match result {
        Err(ResponseError::ProducerFenced) if version < 4 => Err(ResponseError::InvalidProducerEpoch),
        other => other,
    };
    match result {
        Ok((id, epoch)) => response.with_producer_id(ProducerId(id)).with_producer_epoch(epoch),
        Err(e) => response.with_error_code(e.code()),
    }
}

pub async fn add_partitions(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    // Client versions (v0-3) only: one transaction per request. Kafka: WRITE on the
    // transactional id (else every partition refused), then on each topic (internal topics
    // never, with an authorizer); any refused or unknown partition fails the whole request.
    let authz = ctx.authz(broker);
    let txn_allowed = authz.allows(acl::WRITE, acl::TRANSACTIONAL_ID, req.v3_and_below_transactional_id.0.as_str());
    let writable = authz.allowed_names(
        acl::WRITE,
        acl::TOPIC,
        req.v3_and_below_topics
            .iter()
            .map(|t| t.name.0.as_str())
            .filter(|n| !authz.enabled() || !super::is_internal_topic(n)),
    );
    let mut wanted = Vec::new();
    let mut failed = Vec::new();
    for topic in &req.v3_and_below_topics {
        for p in &topic.partitions {
            let key = (topic.name.0.as_str().to_string(), *p);
            if !txn_allowed {
                failed.push((key, ResponseError::TransactionalIdAuthorizationFailed));
            } else if !writable.contains(key.0.as_str()) {
                failed.push((key, ResponseError::TopicAuthorizationFailed));
            } else if broker.topics.get(&key.0).is_some_and(|t| *p >= 0 && (*p as usize) < t.partitions.len()) {
                wanted.push(key);
            } else {
                failed.push((key, ResponseError::UnknownTopicOrPartition));
            }
        }
    }
    let outcome = if failed.is_empty() {
        broker
            .txns
            .add_partitions(
                &broker.txn_deps(),
                req.v3_and_below_transactional_id.0.as_str(),
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
                wanted,
                TV_0,
            )
            .await
    } else {
        Err(ResponseError::OperationNotAttempted)
    };
    let results = req
        .v3_and_below_topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let key = (topic.name.0.as_str().to_string(), *p);
                    let error = if let Some((_, e)) = failed.iter().find(|(k, _)| *k == key) {
                        e.code()
                    } else {
                        code(for_version(outcome, version))
                    };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(error)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default().with_name(topic.name.clone()).with_results_by_partition(partitions)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

pub async fn add_offsets(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let authz = ctx.authz(broker);
    let refused = if !authz.allows(acl::WRITE, acl::TRANSACTIONAL_ID, req.transactional_id.0.as_str()) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authz.allows(acl::READ, acl::GROUP, req.group_id.0.as_str()) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(e) = refused {
        return AddOffsetsToTxnResponse::default().with_error_code(e.code());
    }
    let result = match broker.groups.offsets_topic(&broker.topics) {
        Err(e) => Err(e),
        Ok(_) => {
            let partition =
                (crate::group::OFFSETS_TOPIC.to_string(), broker.groups.partition_for(req.group_id.0.as_str()));
            broker
                .txns
                .add_partitions(
                    &broker.txn_deps(),
                    req.transactional_id.0.as_str(),
                    req.producer_id.0,
                    req.producer_epoch,
                    vec![partition],
                    TV_0,
                )
                .await
        }
    };
    AddOffsetsToTxnResponse::default().with_error_code(code(for_version(result, version)))
}

/// EndTxn; v5 (transaction protocol 2) bumps the epoch and answers the producer id and epoch
/// the client goes on with.
pub async fn end_txn(broker: &Arc<Broker>, ctx: &RequestContext, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    if !ctx.authz(broker).allows(acl::WRITE, acl::TRANSACTIONAL_ID, req.transactional_id.0.as_str()) {
        return EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
    }
    let result = broker
        .txns
        .end_txn(
            &broker.txn_deps(),
            req.transactional_id.0.as_str(),
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
            version,
        )
        .await;
    if result.is_ok() {
        broker.notify_appended();
    }
    let (producer_id, epoch) = *result.as_ref().unwrap_or(&(-1, -1));
    EndTxnResponse::default()
        .with_error_code(code(for_version(result.map(|_| ()), version)))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
}

pub async fn txn_offset_commit(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let group = req.group_id.0.as_str().to_string();
    // Kafka: WRITE on the transactional id, READ on the group (else every partition refused),
    // READ on each topic (else its partitions TOPIC_AUTHORIZATION_FAILED, before anything else).
    let authz = ctx.authz(broker);
    let refused = if !authz.allows(acl::WRITE, acl::TRANSACTIONAL_ID, req.transactional_id.0.as_str()) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authz.allows(acl::READ, acl::GROUP, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        broker.groups.check_coordinator(&group).err()
    };
    if let Some(e) = refused {
        let topics = req.topics.iter().map(|t| {
            let partitions = t.partitions.iter().map(|p| {
                TxnOffsetCommitResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(e.code())
            });
            TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()).with_partitions(partitions.collect())
        });
        return TxnOffsetCommitResponse::default().with_topics(topics.collect());
    }
    let readable = authz.allowed_names(acl::READ, acl::TOPIC, req.topics.iter().map(|t| t.name.0.as_str()));
    // The group's `__consumer_offsets` partition must be in the transaction: added by
    // AddOffsetsToTxn before v5, implicitly from v5 (transaction protocol 2). As in Kafka, the
    // group's checks come after.
    // The guard of the verification the offsets partition started: the write presents it.
    let verified = match broker.groups.offsets_topic(&broker.topics) {
        Err(e) => Err(e),
        Ok(_) => {
            let partition = (crate::group::OFFSETS_TOPIC.to_string(), broker.groups.partition_for(&group));
            let id = req.transactional_id.0.as_str();
            txn_verify::txn_offset_commit(broker, id, req.producer_id.0, req.producer_epoch, partition, version).await
        }
    };
    let (mut check, guard) = match verified {
        Ok(guard) => (Ok(()), guard),
        Err(e) => (Err(e), None),
    };
    if check.is_ok() && version >= 3 && req.generation_id >= 0 {
        // KIP-447: the consumer's group generation is checked like an OffsetCommit's.
        let instance = req.group_instance_id.as_ref().map(|s| s.as_str());
        check = broker.groups.check_txn_offset_commit(&group, req.member_id.as_str(), instance, req.generation_id);
    }
    let now = now_ms();
    let mut offsets = Vec::new();
    let mut errors: Vec<(TopicName, Vec<(i32, i16)>)> = Vec::new();
    for topic in &req.topics {
        let known = broker.topics.get(topic.name.0.as_str());
        let readable = readable.contains(topic.name.0.as_str());
        let mut parts = Vec::new();
        for p in &topic.partitions {
            let error = if !readable {
                ResponseError::TopicAuthorizationFailed.code()
            } else if let Err(e) = check {
                e.code()
            } else if !known
                .as_ref()
                .is_some_and(|t| p.partition_index >= 0 && (p.partition_index as usize) < t.partitions.len())
            {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                offsets.push((
                    (topic.name.0.as_str().to_string(), p.partition_index),
                    OffsetValue {
                        offset: p.committed_offset,
                        leader_epoch: p.committed_leader_epoch,
                        metadata: p.committed_metadata.as_ref().map(|m| m.as_str().to_string()).unwrap_or_default(),
                        commit_timestamp: now,
                    },
                ));
                0
            };
            parts.push((p.partition_index, error));
        }
        errors.push((topic.name.clone(), parts));
    }
    let txn = (req.producer_id.0, req.producer_epoch, guard);
    let written = broker.groups.append_txn_offsets(&broker.topics, &group, txn, offsets);
    let storage = match written {
        Ok(w) => broker.groups.sync_to_disk(&broker.flusher, w).await.err(),
        Err(e) => Some(e),
    };
    let topics = errors
        .into_iter()
        .map(|(name, parts)| {
            let partitions = parts
                .into_iter()
                .map(|(p, e)| {
                    TxnOffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(if e == 0 {
                        storage.map_or(0, |s| s.code())
                    } else {
                        e
                    })
                })
                .collect();
            TxnOffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

pub fn describe_transactions(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    // Kafka: DESCRIBE on each transactional id; only the topics the principal may describe.
    let authz = ctx.authz(broker);
    let states = req
        .transactional_ids
        .iter()
        .map(|id| {
            let state = dt::TransactionState::default().with_transactional_id(id.clone());
            if !authz.allows(acl::DESCRIBE, acl::TRANSACTIONAL_ID, id.0.as_str()) {
                return state.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            if let Err(e) = broker.txns.check_coordinator(id.0.as_str()) {
                return state.with_error_code(e.code());
            }
            let Some(m) = broker.txns.describe(id.0.as_str()) else {
                return state.with_error_code(ResponseError::TransactionalIdNotFound.code());
            };
            let mut topics: Vec<dt::TopicData> = Vec::new();
            for (topic, p) in m.partitions.iter().filter(|(t, _)| authz.allows(acl::DESCRIBE, acl::TOPIC, t)) {
                match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
                    Some(t) => t.partitions.push(*p),
                    None => topics.push(
                        dt::TopicData::default().with_topic(TopicName(str_bytes(topic))).with_partitions(vec![*p]),
                    ),
                }
            }
            state
                .with_transaction_state(str_bytes(m.state.name()))
                .with_transaction_timeout_ms(m.timeout_ms)
                .with_transaction_start_time_ms(m.start_ms)
                .with_producer_id(ProducerId(m.producer_id))
                .with_producer_epoch(m.epoch)
                .with_topics(topics)
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

pub fn list_transactions(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    // Kafka: only the transactional ids the principal may describe.
    let authz = ctx.authz(broker);
    const KNOWN: &[&str] = &[
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ];
    let unknown: Vec<_> = req.state_filters.iter().filter(|s| !KNOWN.contains(&s.as_str())).cloned().collect();
    // ListTransactions v2: a Java regular expression that must match the whole id.
    let pattern = match req.transactional_id_pattern.as_ref().filter(|p| !p.is_empty()) {
        None => None,
        Some(p) => match regex::Regex::new(&format!("^(?:{})$", p.as_str())) {
            Ok(re) => Some(re),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code())
            }
        },
    };
    let now = now_ms();
    let txns = broker.txns.describe_all();
    let states = txns
        .iter()
        .filter_map(|(id, m)| {
            let state_ok =
                req.state_filters.is_empty() || req.state_filters.iter().any(|s| s.as_str() == m.state.name());
            let pid_ok =
                req.producer_id_filters.is_empty() || req.producer_id_filters.iter().any(|p| p.0 == m.producer_id);
            let duration_ok = req.duration_filter < 0
                || (m.state == crate::txn::records::TxnState::Ongoing && now - m.start_ms >= req.duration_filter);
            let pattern_ok = pattern.as_ref().is_none_or(|re| re.is_match(id));
            let visible = || authz.allows(acl::DESCRIBE, acl::TRANSACTIONAL_ID, id);
            (state_ok && pid_ok && duration_ok && pattern_ok && visible()).then(|| {
                lt::TransactionState::default()
                    .with_transactional_id(TransactionalId(str_bytes(id)))
                    .with_producer_id(ProducerId(m.producer_id))
                    .with_transaction_state(str_bytes(m.state.name()))
            })
        })
        .collect();
    ListTransactionsResponse::default().with_unknown_state_filters(unknown).with_transaction_states(states)
}

pub fn describe_producers(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let authz = ctx.authz(broker);
    let topics = req
        .topics
        .iter()
        .map(|topic| {
            // Kafka: READ on the topic (after the name's validity), before its existence.
            let name = topic.name.0.as_str();
            let refused =
                crate::metadata::validate_topic_name(name).is_ok() && !authz.allows(acl::READ, acl::TOPIC, name);
            let partitions = topic
                .partition_indexes
                .iter()
                .map(|p| {
                    let response = dp::PartitionResponse::default().with_partition_index(*p);
                    if refused {
                        let e = ResponseError::TopicAuthorizationFailed;
                        return response
                            .with_error_code(e.code())
                            .with_error_message(Some(str_bytes(&default_message(e))));
                    }
                    let Some(partition) = broker.topics.partition(topic.name.0.as_str(), *p) else {
                        // Kafka explains an unknown topic, not an unknown partition of a known one.
                        let error = ResponseError::UnknownTopicOrPartition;
                        let message =
                            broker.topics.get(topic.name.0.as_str()).is_none().then(|| default_message(error));
                        return response
                            .with_error_code(error.code())
                            .with_error_message(message.as_deref().map(str_bytes));
                    };
                    let log = partition.log();
                    let producers = log
                        .producer_state()
                        .producers()
                        .map(|(id, e)| {
                            dp::ProducerState::default()
                                .with_producer_id(ProducerId(*id))
                                .with_producer_epoch(e.epoch as i32)
                                .with_last_sequence(e.batches.back().map_or(-1, |b| b.last_seq))
                                .with_last_timestamp(e.last_timestamp)
                                .with_coordinator_epoch(0)
                                .with_current_txn_start_offset(e.txn_first_offset.unwrap_or(-1))
                        })
                        .collect();
                    response.with_active_producers(producers)
                })
                .collect();
            dp::TopicResponse::default().with_name(topic.name.clone()).with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
