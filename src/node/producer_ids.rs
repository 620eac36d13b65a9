//! Blocks of producer ids from the active controller (AllocateProducerIds, as Kafka's
//! `RPCProducerIdManager`): asked for when `txn::producer_ids` wants one, retried with a
//! backoff while the controller cannot answer.
//! Invariants: one request in flight; nothing is asked before this broker has a broker epoch.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{AllocateProducerIdsRequest, BrokerId};
use tokio::sync::watch;

use super::lifecycle::State;
use super::ControllerLink;
use crate::txn::producer_ids::ProducerIds;

const VERSION: i16 = 0;
const RETRY_BACKOFF: Duration = Duration::from_millis(500);

/// Serves `ids` until `stop`.
pub async fn run(
    ids: Arc<ProducerIds>,
    node_id: i32,
    link: ControllerLink,
    state: watch::Receiver<State>,
    mut stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        if !ids.wants_block() {
            tokio::select! {
                _ = ids.wanted.notified() => {}
                _ = stop.changed() => {}
            }
            continue;
        }
        let broker_epoch = match *state.borrow() {
            State::Fenced(e) | State::Running(e) => e,
            _ => -1,
        };
        let block = if broker_epoch < 0 {
            None
        } else {
            let request =
                AllocateProducerIdsRequest::default().with_broker_id(BrokerId(node_id)).with_broker_epoch(broker_epoch);
            match link.forward(VERSION, &request).await {
                Ok(r) if r.error_code == 0 && r.producer_id_len > 0 => {
                    tracing::info!(
                        start = r.producer_id_start.0,
                        len = r.producer_id_len,
                        "producer id block allocated"
                    );
                    Some((r.producer_id_start.0, i64::from(r.producer_id_len)))
                }
                Ok(r) => {
                    tracing::warn!(code = r.error_code, "AllocateProducerIds refused");
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "AllocateProducerIds failed");
                    None
                }
            }
        };
        if block.is_some() {
            ids.add_block(block);
            continue;
        }
        // Still wanted: asked again after the backoff.
        tokio::select! {
            _ = tokio::time::sleep(RETRY_BACKOFF) => {}
            _ = stop.changed() => {}
        }
    }
}
