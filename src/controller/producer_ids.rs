//! AllocateProducerIds on the controller side (Kafka's `ProducerIdControlManager`): each request
//! of a registered broker at its current epoch gets the next block of 1000 producer ids, recorded
//! as a ProducerIdsRecord naming the end of the block (`MetadataImage::next_producer_id`).
//!
//! Invariants: blocks never overlap and follow each other without gaps (a block starts where the
//! image's last one ended); a refused request writes nothing.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AllocateProducerIdsRequest, AllocateProducerIdsResponse, ProducerId};

use crate::metadata::image::MetadataImage;
use crate::metadata::records::{MetadataRecord, ProducerIdsRecord};

/// Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
pub const BLOCK_SIZE: i32 = 1000;

/// The record to append and the response (STALE_BROKER_EPOCH for an unknown broker or another
/// epoch, UNKNOWN_SERVER_ERROR once the ids are exhausted, as Kafka).
pub fn allocate_producer_ids(
    image: &MetadataImage,
    request: &AllocateProducerIdsRequest,
) -> (Vec<MetadataRecord>, AllocateProducerIdsResponse) {
    let broker_id = request.broker_id.0;
    let refuse =
        |error: ResponseError| (Vec::new(), AllocateProducerIdsResponse::default().with_error_code(error.code()));
    if image.brokers.get(&broker_id).is_none_or(|b| b.epoch != request.broker_epoch) {
        return refuse(ResponseError::StaleBrokerEpoch);
    }
    let start = image.next_producer_id;
    assert!(start >= 0, "producer ids start at 0");
    if start > i64::MAX - BLOCK_SIZE as i64 {
        return refuse(ResponseError::UnknownServerError);
    }
    let record = ProducerIdsRecord {
        broker_id,
        broker_epoch: request.broker_epoch,
        next_producer_id: start + BLOCK_SIZE as i64,
        ..Default::default()
    };
    let response = AllocateProducerIdsResponse::default()
        .with_producer_id_start(ProducerId(start))
        .with_producer_id_len(BLOCK_SIZE);
    (vec![MetadataRecord::ProducerIds(record)], response)
}

#[cfg(test)]
#[path = "producer_ids_tests.rs"]
mod producer_ids_tests;
