//! UpdateFeatures on a controller-only Ketch node (`kafka-features --bootstrap-controller
//! upgrade / downgrade`): decided by `controller::feature_changes`, written as one change, and
//! answered as Kafka 4.1's controller answers (one refused update refuses them all, with a
//! top-level error; per-feature results only for v0-1 and only on success).
//!
//! Invariants: nothing is written for a refused or `validate_only` request; an answer without an
//! error means the records are durable.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_request::UpdateFeaturesRequest;
use kafka_protocol::messages::update_features_response::UpdateFeaturesResponse;

use super::update_features;
use crate::controller::feature_changes;
use crate::controller::quorum::QuorumController;

pub fn update_features(
    controller: &QuorumController,
    req: &UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let updates: Vec<feature_changes::Update> = update_features::requested_updates(req, version);
    let node_id = controller.settings.config.node_id;
    let min_isr = controller.settings.topic_defaults.min_insync_replicas;
    let decided = controller.change(|d| {
        match feature_changes::update_features(d.image, node_id, min_isr, &updates, req.validate_only) {
            Ok(records) => (records, None),
            Err(refused) => (Vec::new(), Some(refused)),
        }
    });
    let refused = decided.unwrap_or_else(|e| {
        tracing::error!(error = %e, "UpdateFeatures: metadata records not written");
        Some((ResponseError::UnknownServerError, e.to_string()))
    });
    update_features::answer(req, version, refused)
}
