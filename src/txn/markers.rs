//! Transaction markers (Kafka's `TransactionMarkerChannelManager` and the WriteTxnMarkers path
//! of `ReplicaManager`): writing a transaction's COMMIT/ABORT control batches to every
//! partition it touched.
//!
//! `write_here` appends markers to partitions this broker leads (the WriteTxnMarkers handler
//! and this broker's coordinator both use it) and answers per partition once each marker is
//! committed (acks=all in a cluster) and fsynced. Partitions led elsewhere get WriteTxnMarkers
//! from `peers.rs`.
//! Invariant: a partition's marker is reported written only once it is committed and fsynced
//! on its leader.

use std::time::Duration;

use kafka_protocol::error::ResponseError;

use super::coordinator::Deps;

/// How long a marker waits for the in-sync replicas (Kafka: the WriteTxnMarkers request
/// timeout, `request.timeout.ms`).
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

/// One partition's answer to a marker: written, or the error.
pub type MarkerResult = ((String, i32), Result<(), ResponseError>);

/// The markers of (producer id, epoch)'s transaction ending with `commit`, on the partitions
/// this broker leads (others: NOT_LEADER_OR_FOLLOWER, unknown ones UNKNOWN_TOPIC_OR_PARTITION).
pub async fn write_here(
    deps: &Deps<'_>,
    producer: (i64, i16),
    commit: bool,
    coordinator_epoch: i32,
    partitions: Vec<(String, i32)>,
) -> Vec<MarkerResult> {
    let now = crate::log::now_ms();
    let mut results = Vec::with_capacity(partitions.len());
    let mut written = Vec::new();
    for (topic, p) in partitions {
        let Some(partition) = deps.topics.partition(&topic, p) else {
            let hosted_elsewhere = deps.replicas.is_some() && deps.topics.get(&topic).is_some();
            let e = if hosted_elsewhere {
                ResponseError::NotLeaderOrFollower
            } else {
                ResponseError::UnknownTopicOrPartition
            };
            results.push(((topic, p), Err(e)));
            continue;
        };
        let appended = {
            let mut log = partition.log();
            match deps.replicas {
                None => crate::replica::append_marker_as_leader(
                    &mut log,
                    producer.0,
                    producer.1,
                    commit,
                    coordinator_epoch,
                    now,
                )
                .map_err(|e| log_error(&e)),
                Some(rm) => match rm.get(&topic, p) {
                    None => Err(ResponseError::NotLeaderOrFollower),
                    Some(replica) => match replica.append_marker(&mut log, producer, commit, coordinator_epoch, now) {
                        Err(e) => Err(e),
                        Ok(r) => r.map_err(|e| log_error(&e)),
                    },
                },
            }
        };
        match appended {
            Ok(offset) => {
                if topic == crate::group::OFFSETS_TOPIC {
                    deps.groups.complete_txn(producer.0, p, commit);
                }
                written.push((topic, p, partition, offset + 1));
            }
            Err(e) => {
                tracing::warn!(%topic, partition = p, error = ?e, "transaction marker not written");
                results.push(((topic, p), Err(e)));
            }
        }
    }
    let deadline = tokio::time::Instant::now() + MARKER_TIMEOUT;
    for (topic, p, partition, end) in written {
        let replicated = match deps.replicas {
            None => Ok(()),
            Some(rm) => rm.wait_replicated(&topic, p, end, deadline).await,
        };
        let outcome = match replicated {
            Ok(()) => deps.flusher.flush(partition, end).await.map_err(|_| ResponseError::KafkaStorageError),
            Err(e) => Err(e),
        };
        results.push(((topic, p), outcome));
    }
    results
}

fn log_error(e: &crate::error::LogError) -> ResponseError {
    ResponseError::try_from_code(e.code()).unwrap_or(ResponseError::UnknownServerError)
}
