//! Producer id blocks: contiguous, refused on stale epochs and exhaustion.

use kafka_protocol::messages::BrokerId;

use super::*;
use crate::controller::test_cluster::Cluster;

fn request(broker: i32, epoch: i64) -> AllocateProducerIdsRequest {
    AllocateProducerIdsRequest::default().with_broker_id(BrokerId(broker)).with_broker_epoch(epoch)
}

#[test]
fn blocks_follow_each_other() {
    let mut c = Cluster::new();
    let e1 = c.add_broker(1, None, false);
    let e2 = c.add_broker(2, None, false);
    let mut starts = Vec::new();
    for (broker, epoch) in [(1, e1), (2, e2), (1, e1)] {
        let (records, response) = allocate_producer_ids(&c.image, &request(broker, epoch));
        assert_eq!((response.error_code, response.producer_id_len), (0, 1000));
        c.apply(&records);
        starts.push(response.producer_id_start.0);
        assert_eq!(c.image.next_producer_id, response.producer_id_start.0 + 1000);
    }
    assert_eq!(starts, vec![0, 1000, 2000]);
}

#[test]
fn stale_epochs_and_exhaustion_are_refused() {
    let mut c = Cluster::new();
    let epoch = c.add_broker(1, None, false);
    for r in [request(1, epoch + 1), request(2, epoch)] {
        let (records, response) = allocate_producer_ids(&c.image, &r);
        assert!(records.is_empty());
        assert_eq!(response.error_code, ResponseError::StaleBrokerEpoch.code());
    }
    let near_end =
        ProducerIdsRecord { broker_id: 1, broker_epoch: epoch, next_producer_id: i64::MAX - 999, ..Default::default() };
    c.apply(&[MetadataRecord::ProducerIds(near_end)]);
    let (records, response) = allocate_producer_ids(&c.image, &request(1, epoch));
    assert!(records.is_empty());
    assert_eq!(response.error_code, ResponseError::UnknownServerError.code());
}
