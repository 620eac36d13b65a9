//! ApiVersions: the table of APIs and versions Ketch serves (KIP-511 fallback included), and
//! the features it finalizes (KIP-584).
//!
//! Features of a single node: those of `metadata::features` (only `transaction.version`,
//! finalized at 2 on a new node, as on a new Kafka 4.1 cluster). A broker of a controller quorum
//! answers as Kafka 4.1's brokers do (`from_image`): what it supports
//! (`node::lifecycle::SUPPORTED_FEATURES`, as it registered) and the levels finalized in the
//! quorum's metadata image (its FeatureLevelRecords), at the epoch of the image's offset.
//! Clients read finalized features only when the epoch is not -1, and Java re-reads them only when it grows. Level 2 ships together with Produce v12+,
//! EndTxn v5 and TxnOffsetCommit v5 (`protocol/versions.rs`): a client told transaction
//! protocol 2 is on stops sending AddPartitionsToTxn. `group.version` (KIP-848) and the KRaft
//! features (`metadata.version`, `kraft.version`, ...) are left out until served.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, ApiVersionsResponse, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::ApiKey;

use super::str_bytes;
use crate::metadata::features::{Features, SUPPORTED};
use crate::metadata::image::MetadataImage;
use crate::node::lifecycle::SUPPORTED_FEATURES;

use super::versions::SERVED;

/// The ApiVersions table of `served` (API, lowest, highest version): a broker's
/// (`versions::SERVED`) or a controller's (`controller_apis::SERVED`).
pub fn version_table(served: &[(ApiKey, i16, i16)]) -> Vec<ApiVersion> {
    served
        .iter()
        .map(|(key, min, max)| {
            ApiVersion::default().with_api_key(*key as i16).with_min_version(*min).with_max_version(*max)
        })
        .collect()
}

/// Finalized feature levels (name, level) as ApiVersions answers them.
pub fn finalized_features<'a>(levels: impl IntoIterator<Item = (&'a String, &'a i16)>) -> Vec<FinalizedFeatureKey> {
    levels
        .into_iter()
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(str_bytes(name))
                .with_min_version_level(*level)
                .with_max_version_level(*level)
        })
        .collect()
}

/// The answer: every served API, the `supported` features (name, lowest, highest level) as
/// ApiVersions `version` shows them, and the `finalized` levels at `epoch`.
fn answer<'a>(
    version: i16,
    supported: impl IntoIterator<Item = (&'a str, i16, i16)>,
    epoch: i64,
    finalized: &std::collections::BTreeMap<String, i16>,
) -> ApiVersionsResponse {
    let supported = supported
        .into_iter()
        // KAFKA-17011: version 3 leaves out supported features whose lowest level is 0, which
        // clients of that version cannot parse.
        .filter(|(_, min, _)| version >= 4 || *min > 0)
        .map(|(name, min, max)| {
            SupportedFeatureKey::default().with_name(str_bytes(name)).with_min_version(min).with_max_version(max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(0)
        .with_api_keys(version_table(SERVED))
        .with_supported_features(supported)
        .with_finalized_features_epoch(epoch)
        .with_finalized_features(finalized_features(finalized))
}

pub fn handle(version: i16, features: &Features) -> ApiVersionsResponse {
    let finalized = features.finalized();
    let supported = SUPPORTED.iter().map(|(name, min, max, _)| (*name, *min, *max));
    answer(version, supported, finalized.epoch, &finalized.levels)
}

/// A broker of a controller quorum: the finalized features of the quorum's `image` at the
/// epoch of its offset (Kafka's `KRaftMetadataCache.features`); none before the first record.
pub fn from_image(version: i16, image: &MetadataImage) -> ApiVersionsResponse {
    answer(version, SUPPORTED_FEATURES.iter().copied(), image.offset, &image.features)
}

/// KIP-511: a client asking with a version we do not know gets a v0 body with
/// UNSUPPORTED_VERSION and, as in Kafka, only ApiVersions' own range, so it can retry at a
/// version we serve.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    unsupported_version_of(SERVED)
}

/// `unsupported_version_response` for the table `served`.
pub fn unsupported_version_of(served: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    let own = version_table(served).into_iter().filter(|v| v.api_key == ApiKey::ApiVersions as i16).collect();
    ApiVersionsResponse::default().with_error_code(ResponseError::UnsupportedVersion.code()).with_api_keys(own)
}
