//! AlterClientQuotas on Ketch's controller (forwarded by cluster brokers from `kafka-configs
//! --alter --entity-type users / clients / ips --add-config producer_byte_rate=...`): decided as
//! Kafka's `ClientQuotaControlManager` (`quota::entity::decide`, against the quotas of the
//! controller's image) and written as ClientQuotaRecords in one change; every broker then
//! throttles with them (`quota::QuotaStore::read_from_image`).
//!
//! Invariants: nothing is written for a refused entity or with `validate_only`; a success means
//! the records are durable.

use kafka_protocol::messages::alter_client_quotas_request::AlterClientQuotasRequest;
use kafka_protocol::messages::alter_client_quotas_response::AlterClientQuotasResponse;

use super::controller_apis::written;
use super::quotas::{alter_answered, alter_refused, alterations};
use crate::controller::quorum::QuorumController;
use crate::quota::{entity, store};

pub fn alter_client_quotas(controller: &QuorumController, req: &AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    let alterations = alterations(req);
    let answer = controller.change(|d| {
        let decision = entity::decide(&d.image.quotas, &alterations);
        let records = match req.validate_only {
            true => Vec::new(),
            false => store::records_of(decision.changes.clone()),
        };
        (records, store::outcomes_of(&decision))
    });
    match answer {
        Ok(outcomes) => alter_answered(&outcomes),
        Err(e) => written("AlterClientQuotas", Err(e), |error| alter_refused(req, error, None)),
    }
}
