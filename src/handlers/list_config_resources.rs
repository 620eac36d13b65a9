//! ListConfigResources (KIP-1142; v0 was ListClientMetricsResources): the resources
//! `kafka-configs --describe` can list without a name. v0 lists client-metrics resources only;
//! v1 lists the requested types (all supported ones when none is given), and a request naming a
//! type that has no configs is refused whole with UNSUPPORTED_VERSION, as Kafka does.
//! GROUP lists the groups with configs set (Kafka's `GroupConfigManager.groupIds`; kafka-configs
//! adds the groups ListGroups knows). Ketch has no client-metrics subscriptions: that list is empty.
//! Needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_request::ListConfigResourcesRequest;
use kafka_protocol::messages::list_config_resources_response::{ConfigResource, ListConfigResourcesResponse};

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::security::acl;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;
const SUPPORTED: [i8; 5] = [TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP];

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ListConfigResourcesRequest,
    version: i16,
) -> ListConfigResourcesResponse {
    // Kafka: DESCRIBE_CONFIGS on the cluster, before anything else.
    if !ctx.authz(broker).cluster(acl::DESCRIBE_CONFIGS) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    if version == 0 {
        return ListConfigResourcesResponse::default(); // no client-metrics resources
    }
    let types = if req.resource_types.is_empty() { SUPPORTED.to_vec() } else { req.resource_types };
    if types.iter().any(|t| !SUPPORTED.contains(t)) {
        return ListConfigResourcesResponse::default().with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let resource =
        |name: &str, kind: i8| ConfigResource::default().with_resource_name(str_bytes(name)).with_resource_type(kind);
    let node = broker.config.node_id.to_string();
    let mut resources = Vec::new();
    if types.contains(&BROKER_LOGGER) {
        resources.push(resource(&node, BROKER_LOGGER));
    }
    if types.contains(&BROKER) {
        resources.push(resource(&node, BROKER));
    }
    if types.contains(&TOPIC) {
        let mut names: Vec<String> = broker.topics.all().iter().map(|t| t.name.clone()).collect();
        names.sort();
        resources.extend(names.iter().map(|n| resource(n, TOPIC)));
    }
    if types.contains(&GROUP) {
        resources.extend(broker.groups.groups_with_configs().iter().map(|g| resource(g, GROUP)));
    }
    ListConfigResourcesResponse::default().with_config_resources(resources)
}
