//! UpdateFeatures on a controller-only Ketch node (`kafka-features --bootstrap-controller
//! upgrade / downgrade`): decided by `controller::feature_changes`, written as one change, and
//! answered as Kafka 4.1's controller answers (one refused update refuses them all, with a
//! top-level error; per-feature results only for v0-1 and only on success).
//!
//! Invariants: nothing is written for a refused or `validate_only` request; an answer without an
//! error means the records are durable.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_request::UpdateFeaturesRequest;
use kafka_protocol::messages::update_features_response::{UpdatableFeatureResult, UpdateFeaturesResponse};

use super::str_bytes;
use crate::controller::feature_changes::{self, SAFE_DOWNGRADE, UPGRADE};
use crate::controller::quorum::QuorumController;

pub fn update_features(
    controller: &QuorumController,
    req: &UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    let updates: Vec<feature_changes::Update> = req
        .feature_updates
        .iter()
        .map(|u| {
            // v0 had a flag instead of the upgrade type.
            let upgrade_type = match (version, u.allow_downgrade) {
                (0, true) => SAFE_DOWNGRADE,
                (0, false) => UPGRADE,
                _ => u.upgrade_type,
            };
            (u.feature.as_str().to_string(), u.max_version_level, upgrade_type)
        })
        .collect();
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
    match refused {
        Some((error, message)) => {
            UpdateFeaturesResponse::default().with_error_code(error.code()).with_error_message(Some(str_bytes(
                &format!("The update failed for all features since the following feature had an error: {message}"),
            )))
        }
        None => {
            let results = if version <= 1 {
                req.feature_updates
                    .iter()
                    // Kafka fills in the error's name, even for no error.
                    .map(|u| {
                        UpdatableFeatureResult::default()
                            .with_feature(u.feature.clone())
                            .with_error_message(Some(str_bytes("NONE")))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            UpdateFeaturesResponse::default().with_error_message(None).with_results(results)
        }
    }
}
