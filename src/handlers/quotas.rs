//! DescribeClientQuotas: Ketch keeps no client quotas yet (AlterClientQuotas is not served), so
//! every filter matches nothing: an empty list, as Kafka answers for a cluster without quotas.
//! Served because `kafka-configs --describe --entity-type users` asks for quotas next to the
//! SCRAM credentials and fails when the API is missing. With an authorizer, DESCRIBE_CONFIGS on
//! the cluster is needed, as Kafka checks.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::DescribeClientQuotasRequest;
use kafka_protocol::messages::describe_client_quotas_response::DescribeClientQuotasResponse;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::security::acl;

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    _req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let allowed = ctx.authz(broker).cluster(acl::DESCRIBE_CONFIGS);
    if !allowed {
        let e = ResponseError::ClusterAuthorizationFailed;
        return DescribeClientQuotasResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(&default_message(e))));
    }
    DescribeClientQuotasResponse::default().with_entries(Some(Vec::new()))
}
