//! Controller registration (KIP-919, Kafka's `ControllerRegistrationManager` and
//! `ClusterControlManager.registerController`): every controller of a quorum tells the active
//! one its incarnation, listeners and supported features, which the active controller writes as
//! a RegisterControllerRecord; DescribeCluster to a controller lists the registered ones. Kafka's
//! controllers register with a Ketch active controller, and Ketch's with a Kafka one.
//!
//! Invariants: a registration equal to the image's writes nothing; a registration is refused
//! only while `metadata.version` predates controller registration (3.7-IV0).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::controller_registration_request::{Feature, Listener};
use kafka_protocol::messages::ControllerRegistrationRequest;
use kafka_protocol::protocol::StrBytes;

use crate::metadata::image::MetadataImage;
use crate::metadata::records::{ControllerEndpoint, ControllerFeature, MetadataRecord, RegisterControllerRecord};

/// Kafka's `MetadataVersion.IBP_3_7_IV0`, the first with controller registrations.
const REGISTRATION_METADATA_VERSION: i16 = 15;

/// The records a ControllerRegistration asks for, or Kafka's refusal.
pub fn decide(
    image: &MetadataImage,
    request: &ControllerRegistrationRequest,
) -> Result<Vec<MetadataRecord>, ResponseError> {
    if !image.metadata_version_at_least(REGISTRATION_METADATA_VERSION) {
        return Err(ResponseError::UnsupportedVersion);
    }
    let record = RegisterControllerRecord {
        controller_id: request.controller_id,
        incarnation_id: request.incarnation_id,
        zk_migration_ready: request.zk_migration_ready,
        end_points: request
            .listeners
            .iter()
            .map(|l| ControllerEndpoint {
                name: l.name.to_string(),
                host: l.host.to_string(),
                port: l.port,
                security_protocol: l.security_protocol,
                ..Default::default()
            })
            .collect(),
        features: request
            .features
            .iter()
            .map(|f| ControllerFeature {
                name: f.name.to_string(),
                min_supported_version: f.min_supported_version,
                max_supported_version: f.max_supported_version,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    match image.controllers.get(&request.controller_id) {
        Some(registered) if *registered == record => Ok(Vec::new()),
        _ => Ok(vec![MetadataRecord::RegisterController(record)]),
    }
}

/// This controller's registration: its incarnation, its controller listeners (name, host, port,
/// security protocol id) and the features it supports.
pub fn request(
    node_id: i32,
    incarnation_id: uuid::Uuid,
    listeners: &[(String, String, u16, i16)],
) -> ControllerRegistrationRequest {
    let listeners = listeners
        .iter()
        .map(|(name, host, port, protocol)| {
            Listener::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_host(StrBytes::from_string(host.clone()))
                .with_port(*port)
                .with_security_protocol(*protocol)
        })
        .collect();
    let features = crate::node::lifecycle::SUPPORTED_FEATURES
        .iter()
        .map(|(name, min, max)| {
            Feature::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_supported_version(*min)
                .with_max_supported_version(*max)
        })
        .collect();
    ControllerRegistrationRequest::default()
        .with_controller_id(node_id)
        .with_incarnation_id(incarnation_id)
        .with_listeners(listeners)
        .with_features(features)
}

/// Whether the image holds `request`'s registration as it is.
pub fn registered(image: &MetadataImage, request: &ControllerRegistrationRequest) -> bool {
    decide(image, request).is_ok_and(|records| records.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::image::ImageBuilder;
    use crate::metadata::records::FeatureLevelRecord;

    #[test]
    fn a_registration_is_written_once_and_again_when_it_changes() {
        let mut builder = ImageBuilder::new();
        let request = request(2, uuid::Uuid::from_u128(7), &[("CONTROLLER".into(), "h".into(), 9093, 0)]);
        assert_eq!(decide(&builder.publish(), &request), Err(ResponseError::UnsupportedVersion));
        let level = FeatureLevelRecord { name: "metadata.version".into(), feature_level: 27, ..Default::default() };
        builder.apply(0, &MetadataRecord::FeatureLevel(level)).expect("applies");
        let records = decide(&builder.publish(), &request).expect("decided");
        assert_eq!(records.len(), 1);
        builder.apply(1, &records[0]).expect("applies");
        assert!(registered(&builder.publish(), &request));
        let restarted = self::request(2, uuid::Uuid::from_u128(8), &[("CONTROLLER".into(), "h".into(), 9093, 0)]);
        assert_eq!(decide(&builder.publish(), &restarted).expect("decided").len(), 1, "a new incarnation");
    }
}
