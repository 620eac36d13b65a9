//! UpdateFeatures (`kafka-features upgrade / downgrade`, Admin `updateFeatures`) on a single
//! node: changes its finalized feature levels (`metadata::features`; a broker of a controller
//! quorum forwards it instead, `forward.rs`), answered as Kafka 4.1's controller answers:
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
    let refused =
        broker.features.update(&requested_updates(&req, version), req.validate_only).err().map(|r| (r.0, r.1));
    answer(&req, version, refused)
}

/// The request's updates as (feature, max level, upgrade type); v0 had a flag instead of the
/// upgrade type.
pub fn requested_updates(req: &UpdateFeaturesRequest, version: i16) -> Vec<(String, i16, i8)> {
    req.feature_updates
        .iter()
        .map(|u| {
            let upgrade_type = match (version, u.allow_downgrade) {
                (0, true) => SAFE_DOWNGRADE,
                (0, false) => UPGRADE,
                _ => u.upgrade_type,
            };
            (u.feature.as_str().to_string(), u.max_version_level, upgrade_type)
        })
        .collect()
}

/// Kafka 4.1's answer: a refusal (error, message) fails every update with a top-level error;
/// on success v0-1 list each feature with the error name "NONE", later versions nothing.
pub fn answer(
    req: &UpdateFeaturesRequest,
    version: i16,
    refused: Option<(kafka_protocol::error::ResponseError, String)>,
) -> UpdateFeaturesResponse {
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
