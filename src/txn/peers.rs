//! The transaction coordinator's requests to other brokers in a cluster, one connection per
//! broker on the inter-broker listener (Kafka's `TransactionMarkerChannelManager` and
//! `AddPartitionsToTxnManager`): WriteTxnMarkers (v1) from a coordinator to partition leaders,
//! and AddPartitionsToTxn (v5, the brokers' batched form) from a partition leader to the
//! coordinator of a transactional id, to verify a transactional write or add its partition.
//! Invariants: every request is bounded by `PEER_TIMEOUT`; a connection serves one request
//! at a time and is dropped after any failure; a failed request answers every partition
//! NETWORK_EXCEPTION (retriable), never success.
//! `by_topic` groups partitions by topic as both APIs carry them, for these requests and for
//! the handlers answering them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::{ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::markers::MarkerResult;
use crate::node::client::Connection;

/// Bounds every request to another broker (Kafka's `request.timeout.ms`).
pub const PEER_TIMEOUT: Duration = Duration::from_secs(30);

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Groups (topic, partition) keys with their values by topic, topics and partitions in the
/// order first seen.
pub fn by_topic<V>(keyed: impl IntoIterator<Item = ((String, i32), V)>) -> Vec<(String, Vec<(i32, V)>)> {
    let mut topics: Vec<(String, Vec<(i32, V)>)> = Vec::new();
    for ((topic, p), value) in keyed {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.push((p, value)),
            None => topics.push((topic, vec![(p, value)])),
        }
    }
    topics
}

/// `partitions`' indexes by topic, as a request carries them.
fn indexes_by_topic(partitions: &[(String, i32)]) -> Vec<(String, Vec<i32>)> {
    let topics = by_topic(partitions.iter().map(|k| (k.clone(), ())));
    topics.into_iter().map(|(t, ps)| (t, ps.into_iter().map(|(p, ())| p).collect())).collect()
}

/// Every partition's answer when the request as a whole failed with `e`.
fn everywhere(partitions: &[(String, i32)], e: ResponseError) -> Vec<MarkerResult> {
    partitions.iter().map(|k| (k.clone(), Err(e))).collect()
}

/// Each partition's answer from a response's (topic, partition, error code) entries; a
/// partition the response leaves out gets UNKNOWN_SERVER_ERROR.
fn answers<'r>(partitions: &[(String, i32)], entries: impl Iterator<Item = (&'r str, i32, i16)>) -> Vec<MarkerResult> {
    let answered: HashMap<(String, i32), i16> = entries.map(|(t, p, code)| ((t.to_string(), p), code)).collect();
    partitions
        .iter()
        .map(|key| {
            let code = answered.get(key).copied().unwrap_or(ResponseError::UnknownServerError.code());
            (key.clone(), ResponseError::try_from_code(code).map_or(Ok(()), Err))
        })
        .collect()
}

/// Kafka clients' default `connections.max.idle.ms`.
const PEER_MAX_IDLE: std::time::Duration = std::time::Duration::from_secs(9 * 60);

/// The coordinator's side of a cluster: how to reach partition leaders on other brokers.
pub struct Cluster {
    /// This broker's id (in its requests' client id).
    pub node_id: i32,
    /// `inter.broker.listener.name`.
    pub listener: String,
    /// How that listener is reached (TLS, SASL login).
    security: Arc<crate::security::client::ClientSecurity>,
    /// One connection per broker, each used by one request at a time.
    conns: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<Option<Connection>>>>>,
}

impl Cluster {
    pub fn new(node_id: i32, security: Arc<crate::security::client::ClientSecurity>) -> Cluster {
        Cluster { node_id, listener: security.listener.clone(), security, conns: Mutex::new(HashMap::new()) }
    }

    fn conn(&self, broker: i32) -> Arc<tokio::sync::Mutex<Option<Connection>>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).entry(broker).or_default().clone()
    }

    /// Sends `request` to `broker` at `addr` on its connection (made first if needed; dropped
    /// after a failure).
    async fn send<R: kafka_protocol::protocol::Request>(
        &self,
        broker: i32,
        addr: &str,
        version: i16,
        request: &R,
    ) -> anyhow::Result<R::Response> {
        let slot = self.conn(broker);
        let mut conn = slot.lock().await;
        // A connection idle for longer than Kafka clients keep one (`connections.max.idle.ms`,
        // 9 minutes) is replaced: the broker closes it after its own 10.
        if conn.as_ref().is_none_or(|c| c.addr() != addr || c.idle_for() > PEER_MAX_IDLE) {
            let client_id = format!("broker-{}-txn", self.node_id);
            *conn = Some(Connection::connect(addr, &client_id, PEER_TIMEOUT, &self.security).await?);
        }
        let sent = conn.as_mut().expect("connected").send(version, request, PEER_TIMEOUT).await;
        if sent.is_err() {
            *conn = None;
        }
        sent
    }

    /// `send` for an answer about `partitions`: a failed request (`api`, for the log) answers
    /// every one of them NETWORK_EXCEPTION.
    async fn request<R: kafka_protocol::protocol::Request>(
        &self,
        api: &str,
        broker: i32,
        addr: &str,
        version: i16,
        request: &R,
        partitions: &[(String, i32)],
    ) -> Result<R::Response, Vec<MarkerResult>> {
        self.send(broker, addr, version, request).await.map_err(|e| {
            tracing::debug!(broker, error = %e, "{api} failed");
            everywhere(partitions, ResponseError::NetworkException)
        })
    }

    /// Sends one WriteTxnMarkers request to `broker` at `addr`: each partition's answer (all
    /// of them NETWORK_EXCEPTION if the request failed).
    pub async fn write_remote(
        &self,
        broker: i32,
        addr: &str,
        producer: (i64, i16),
        commit: bool,
        coordinator_epoch: i32,
        partitions: Vec<(String, i32)>,
    ) -> Vec<MarkerResult> {
        let marker = WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_transaction_result(commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(
                indexes_by_topic(&partitions)
                    .into_iter()
                    .map(|(t, ps)| {
                        WritableTxnMarkerTopic::default().with_name(TopicName(name(&t))).with_partition_indexes(ps)
                    })
                    .collect(),
            );
        let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
        let response = match self.request("WriteTxnMarkers", broker, addr, 1, &request, &partitions).await {
            Ok(r) => r,
            Err(failed) => return failed,
        };
        let entries = response
            .markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.as_str(), p.partition_index, p.error_code)));
        answers(&partitions, entries)
    }

    /// AddPartitionsToTxn v5 for one transaction to its coordinator `broker` at `addr`: only
    /// verifies that the partitions are in the ongoing transaction (`verify_only`, transaction
    /// protocol 1), or adds them (protocol 2). Each partition's answer.
    #[allow(clippy::too_many_arguments)]
    pub async fn add_partitions_remote(
        &self,
        broker: i32,
        addr: &str,
        id: &str,
        producer: (i64, i16),
        verify_only: bool,
        partitions: &[(String, i32)],
    ) -> Vec<MarkerResult> {
        let txn = AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(name(id)))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(verify_only)
            .with_topics(
                indexes_by_topic(partitions)
                    .into_iter()
                    .map(|(t, ps)| {
                        AddPartitionsToTxnTopic::default().with_name(TopicName(name(&t))).with_partitions(ps)
                    })
                    .collect(),
            );
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![txn]);
        let response = match self.request("AddPartitionsToTxn", broker, addr, 5, &request, partitions).await {
            Ok(r) => r,
            Err(failed) => return failed,
        };
        if let Some(e) = ResponseError::try_from_code(response.error_code) {
            return everywhere(partitions, e);
        }
        let transactions = response.results_by_transaction.iter().filter(|r| r.transactional_id.0.as_str() == id);
        let entries = transactions.flat_map(|r| &r.topic_results).flat_map(|t| {
            t.results_by_partition.iter().map(move |p| (t.name.0.as_str(), p.partition_index, p.partition_error_code))
        });
        answers(partitions, entries)
    }
}
