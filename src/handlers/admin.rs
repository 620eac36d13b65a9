//! Admin APIs for the Kafka CLI tools and AdminClient: CreatePartitions (grow only),
//! DeleteRecords and DescribeCluster (on a broker of a controller quorum, the brokers of the
//! metadata image: `metadata_image`). The config APIs live in `configs.rs`.
//! Authorization as Kafka's: CreatePartitions ALTER and DeleteRecords DELETE on each topic
//! (else TOPIC_AUTHORIZATION_FAILED); DescribeCluster reports the cluster operations allowed.
//! CreatePartitions takes the new partitions from the client's controller mutation quota.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::{CreatePartitionsRequest, CreatePartitionsTopic};
use kafka_protocol::messages::create_partitions_response::{CreatePartitionsResponse, CreatePartitionsTopicResult};
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::{DescribeClusterBroker, DescribeClusterResponse};
use kafka_protocol::messages::BrokerId;

use super::create_topics::{take_quota, validate_assignment};
use super::metadata::advertised_endpoint;
use super::{metadata_image, str_bytes, RequestContext};
use crate::broker::Broker;
use crate::quota::mutation::MutationQuota;
use crate::security::acl;

/// CreatePartitions with Kafka's checks and messages (`ControllerApis` refuses a topic named
/// twice; `ReplicationControlManager.createPartitions` the rest, in its order).
pub fn create_partitions(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
    mut quota: MutationQuota,
) -> CreatePartitionsResponse {
    let node = broker.config.node_id;
    let alterable =
        ctx.authz(broker).allowed_names(acl::ALTER, acl::TOPIC, req.topics.iter().map(|t| t.name.0.as_str()));
    let mut seen = HashSet::new();
    let duplicates: HashSet<&str> = req.topics.iter().map(|t| t.name.0.as_str()).filter(|n| !seen.insert(*n)).collect();
    let mut reported = HashSet::new();
    // What the request may still add (Kafka's bounded record list, shared by its topics).
    let mut budget = super::create_topics::MAX_RECORDS_PER_USER_OP;
    let results = req
        .topics
        .iter()
        .filter(|t| !duplicates.contains(t.name.0.as_str()) || reported.insert(t.name.0.as_str()))
        .map(|t| {
            let name = t.name.0.as_str();
            let outcome = if duplicates.contains(name) {
                Err((ResponseError::InvalidRequest, Some("Duplicate topic name.".to_string())))
            } else if !alterable.contains(name) {
                Err((ResponseError::TopicAuthorizationFailed, None))
            } else if name.starts_with("__") {
                Err((ResponseError::InvalidPartitions, Some("internal topics cannot be changed".to_string())))
            } else {
                check_new_partitions(broker, t, node).and_then(|added| {
                    if added.max(0) as u64 > budget {
                        // Kafka's controller runs out of its bounded list for this topic: an
                        // unexpected error, without a message (no partition opened here).
                        return Err((ResponseError::UnknownServerError, None));
                    }
                    if added > 0 {
                        // (no increase: refused by `add_partitions`, before the quota as in Kafka)
                        take_quota(&mut quota, added).map_err(|(e, m)| (e, Some(m)))?;
                    }
                    broker
                        .topics
                        .add_partitions(name, t.count, req.validate_only)
                        .map_err(|e| (e.error, Some(e.message)))?;
                    budget -= added.max(0) as u64;
                    Ok(())
                })
            };
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone()).with_error_message(None);
            match outcome {
                Ok(()) => result,
                Err((error, message)) => {
                    result.with_error_code(error.code()).with_error_message(message.as_deref().map(str_bytes))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results).with_throttle_time_ms(quota.throttle_ms())
}

/// The checks Kafka makes before growing `t`: the topic exists (no message when it does not),
/// grows, and any assignment names one valid replica list per new partition.
fn check_new_partitions(
    broker: &Broker,
    t: &CreatePartitionsTopic,
    node: i32,
) -> Result<i32, (ResponseError, Option<String>)> {
    let Some(topic) = broker.topics.get(t.name.0.as_str()) else {
        return Err((ResponseError::UnknownTopicOrPartition, None));
    };
    let additional = t.count - topic.partitions.len() as i32;
    let Some(assignments) = t.assignments.as_ref().filter(|_| additional > 0) else {
        return Ok(additional); // the partition count itself is checked by `add_partitions`
    };
    if assignments.len() as i32 != additional {
        let message = format!(
            "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        );
        return Err((ResponseError::InvalidReplicaAssignment, Some(message)));
    }
    for a in assignments {
        validate_assignment(&a.broker_ids, &[node]).map_err(|(e, message)| (e, Some(message)))?;
    }
    Ok(additional)
}

pub fn describe_cluster(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    // Controllers (endpoint type 2) are asked on a controller listener; this is a broker's, and
    // Kafka answers with the type it is and why.
    if version >= 1 && req.endpoint_type == 2 {
        let message =
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER";
        return DescribeClusterResponse::default()
            .with_error_code(ResponseError::MismatchedEndpointType.code())
            .with_error_message(Some(str_bytes(message)))
            .with_endpoint_type(1)
            .with_controller_id(BrokerId(-1));
    }
    let (controller, brokers) = match broker.controller.get() {
        // A broker of a controller quorum: the brokers of the quorum's metadata image.
        Some(link) => metadata_image::describe_cluster_brokers(
            &link.image(),
            &ctx.listener,
            broker.config.node_id,
            req.include_fenced_brokers,
        ),
        None => {
            let (host, port) = advertised_endpoint(broker, ctx);
            let node = BrokerId(broker.config.node_id);
            (
                node,
                vec![DescribeClusterBroker::default().with_broker_id(node).with_host(str_bytes(&host)).with_port(port)],
            )
        }
    };
    let response = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.cluster_id))
        .with_controller_id(controller)
        .with_brokers(brokers)
        .with_cluster_authorized_operations(
            ctx.authz(broker).cluster_operations_if(req.include_cluster_authorized_operations),
        );
    if version >= 1 {
        response.with_endpoint_type(1)
    } else {
        response
    }
}

pub fn delete_records(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let deletable =
        ctx.authz(broker).allowed_names(acl::DELETE, acl::TOPIC, req.topics.iter().map(|t| t.name.0.as_str()));
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let result = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    if !deletable.contains(t.name.0.as_str()) {
                        return result.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let Some(partition) = broker.topics.partition(t.name.0.as_str(), p.partition_index) else {
                        return result.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let moved = partition.log().delete_records_before(p.offset);
                    match moved {
                        Ok(low) => result.with_low_watermark(low),
                        Err(e) => result.with_error_code(e.code()),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default().with_name(t.name.clone()).with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}
