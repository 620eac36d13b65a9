//! Admin APIs for the Kafka CLI tools and AdminClient: CreatePartitions (grow only),
//! DeleteRecords and DescribeCluster. The config APIs live in `configs.rs`.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsRequest;
use kafka_protocol::messages::create_partitions_response::{CreatePartitionsResponse, CreatePartitionsTopicResult};
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_cluster_response::{DescribeClusterBroker, DescribeClusterResponse};
use kafka_protocol::messages::BrokerId;

use super::metadata::advertised_endpoint;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;

pub fn create_partitions(broker: &Arc<Broker>, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let node = broker.config.node_id;
    let results = req
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let bad_assignment =
                t.assignments.as_ref().is_some_and(|a| a.iter().any(|x| x.broker_ids.iter().any(|b| b.0 != node)));
            let outcome = if bad_assignment {
                Err((ResponseError::InvalidReplicaAssignment, format!("only broker {node} exists")))
            } else if t.name.0.starts_with("__") {
                Err((ResponseError::InvalidPartitions, "internal topics cannot be changed".to_string()))
            } else {
                broker
                    .topics
                    .add_partitions(t.name.0.as_str(), t.count, req.validate_only)
                    .map_err(|e| (e.error, e.message))
            };
            match outcome {
                Ok(()) => result,
                Err((error, message)) => {
                    result.with_error_code(error.code()).with_error_message(Some(str_bytes(&message)))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}

pub fn describe_cluster(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
    version: i16,
) -> DescribeClusterResponse {
    // Endpoint type 2 (controllers) is not served: this single node is a broker.
    if version >= 1 && req.endpoint_type == 2 {
        return DescribeClusterResponse::default()
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_endpoint_type(req.endpoint_type)
            .with_controller_id(BrokerId(-1));
    }
    let (host, port) = advertised_endpoint(broker, ctx);
    let node = BrokerId(broker.config.node_id);
    let response = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.cluster_id))
        .with_controller_id(node)
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(str_bytes(&host))
            .with_port(port)])
        .with_cluster_authorized_operations(i32::MIN);
    if version >= 1 {
        response.with_endpoint_type(1)
    } else {
        response
    }
}

pub fn delete_records(broker: &Arc<Broker>, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
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
