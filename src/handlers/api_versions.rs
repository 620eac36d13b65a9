//! ApiVersions: the table of APIs and versions Ketch serves (KIP-511 fallback included).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{ApiVersion, ApiVersionsResponse};
use kafka_protocol::messages::ApiKey;

use crate::protocol::versions::SERVED;

fn table() -> Vec<ApiVersion> {
    SERVED
        .iter()
        .map(|(key, min, max)| {
            ApiVersion::default().with_api_key(*key as i16).with_min_version(*min).with_max_version(*max)
        })
        .collect()
}

pub fn handle(_version: i16) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_error_code(0).with_api_keys(table()).with_finalized_features_epoch(-1)
}

/// KIP-511: a client asking with a version we do not know gets a v0 body with
/// UNSUPPORTED_VERSION and, as in Kafka, only ApiVersions' own range, so it can retry at a
/// version we serve.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    let own = table().into_iter().filter(|v| v.api_key == ApiKey::ApiVersions as i16).collect();
    ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code()).with_api_keys(own)
}
