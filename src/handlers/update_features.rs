//! UpdateFeatures (`kafka-features upgrade / downgrade`, Admin `updateFeatures`): changes the
//! finalized feature levels (`metadata::features`), answered as Kafka 4.1's controller answers:
//! one refused update refuses them all, with a top-level error; per-feature results only for
//! v0-1 and only on success. Needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::messages::update_features_request::UpdateFeaturesRequest;
use kafka_protocol::messages::update_features_response::{UpdatableFeatureResult, UpdateFeaturesResponse};

use super::{cluster_denied, str_bytes, RequestContext};
use crate::broker::Broker;
use crate::metadata::features::{SAFE_DOWNGRADE, UPGRADE};
use crate::security::acl;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: UpdateFeaturesRequest,
    version: i16,
) -> UpdateFeaturesResponse {
    if !ctx.authz(broker).cluster(acl::ALTER) {
        let (code, message) = cluster_denied();
        return UpdateFeaturesResponse::default().with_error_code(code).with_error_message(message);
    }
    let updates: Vec<(String, i16, i8)> = req
        .feature_updates
        .iter()
        .map(|u| {
            // v0 had a flag instead of the upgrade type.
            let upgrade_type = if version == 0 {
                if u.allow_downgrade {
                    SAFE_DOWNGRADE
                } else {
                    UPGRADE
                }
            } else {
                u.upgrade_type
            };
            (u.feature.as_str().to_string(), u.max_version_level, upgrade_type)
        })
        .collect();
    match broker.features.update(&updates, req.validate_only) {
        Err(refused) => {
            UpdateFeaturesResponse::default().with_error_code(refused.0.code()).with_error_message(Some(str_bytes(
                &format!("The update failed for all features since the following feature had an error: {}", refused.1),
            )))
        }
        Ok(()) => {
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
