//! InitProducerId for idempotent producers: a fresh producer id at epoch 0 (Kafka does the
//! same for requests without a transactional id). Transactional ids are not served yet.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::ProducerId;

use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    if req.transactional_id.is_some() {
        // No transaction coordinator yet (issue 4): FindCoordinator for transactions is not
        // advertised, so well-behaved clients never get here.
        return response.with_error_code(ResponseError::UnsupportedVersion.code());
    }
    match broker.producer_ids.next() {
        Ok(id) => response.with_producer_id(ProducerId(id)).with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot reserve producer ids");
            response.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}
