//! Metadata on a broker of a controller quorum (`process.roles=broker`): the answer comes from
//! the metadata image replicated from the quorum (`raft::observer`): the unfenced brokers with
//! their endpoint on the listener the client came in on, every topic with its partitions'
//! leaders, leader epochs, replicas and ISR. Topics are not auto-created here (CreateTopics is
//! forwarded to the controller). The controller id answered is this broker's, as Kafka's brokers
//! answer a broker id: admin requests sent to it are forwarded.
//!
//! Authorization as in `metadata.rs`: topics need DESCRIBE; the all-topics list leaves the
//! others out, a named one is answered TOPIC_AUTHORIZATION_FAILED without its id.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use uuid::Uuid;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::metadata::image::{MetadataImage, TopicImage};
use crate::security::acl;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: MetadataRequest,
    version: i16,
    image: &MetadataImage,
) -> MetadataResponse {
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let e = b.endpoints.iter().find(|e| e.listener.eq_ignore_ascii_case(&ctx.listener))?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(b.id))
                    .with_host(str_bytes(&e.host))
                    .with_port(e.port as i32)
                    .with_rack(b.rack.as_deref().map(str_bytes)),
            )
        })
        .collect();
    let authz = ctx.authz(broker);
    let requested = match req.topics {
        None => None,
        Some(list) if list.is_empty() && version == 0 => None,
        Some(list) => Some(list),
    };
    let mut topics: Vec<MetadataResponseTopic> = match requested {
        None => {
            let mut all: Vec<&Arc<TopicImage>> = image.topics.values().collect();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.into_iter()
                .filter(|t| authz.allows_quietly(acl::DESCRIBE, acl::TOPIC, &t.name))
                .map(|t| describe(t))
                .collect()
        }
        Some(list) => list
            .into_iter()
            .map(|wanted| {
                let found = match &wanted.name {
                    Some(name) => image.topic(name.0.as_str()),
                    None => image.topics.get(&wanted.topic_id),
                };
                let name = wanted.name.as_ref().map(|n| n.0.as_str().to_string());
                match found {
                    Some(t) if !authz.allows(acl::DESCRIBE, acl::TOPIC, &t.name) => {
                        let id = if name.is_some() { Uuid::nil() } else { t.id };
                        error_topic(name.as_deref(), id, ResponseError::TopicAuthorizationFailed)
                    }
                    Some(t) => describe(t),
                    None if name.is_some() => {
                        error_topic(name.as_deref(), Uuid::nil(), ResponseError::UnknownTopicOrPartition)
                    }
                    None => error_topic(None, wanted.topic_id, ResponseError::UnknownTopicId),
                }
            })
            .collect(),
    };
    if req.include_topic_authorized_operations {
        for t in topics.iter_mut().filter(|t| t.error_code == 0) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations = authz.operations(acl::TOPIC, name.0.as_str());
            }
        }
    }
    let cluster_operations = authz.cluster_operations_if(version <= 10 && req.include_cluster_authorized_operations);
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(&broker.cluster_id)))
        .with_controller_id(BrokerId(broker.config.node_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

fn describe(topic: &TopicImage) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|(&p, part)| {
            let error = if part.leader < 0 { ResponseError::LeaderNotAvailable.code() } else { 0 };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(p)
                .with_leader_id(BrokerId(part.leader))
                .with_leader_epoch(part.leader_epoch)
                .with_replica_nodes(part.replicas.iter().map(|&r| BrokerId(r)).collect())
                .with_isr_nodes(part.isr.iter().map(|&r| BrokerId(r)).collect())
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(&topic.name))))
        .with_topic_id(topic.id)
        .with_is_internal(super::is_internal_topic(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(i32::MIN)
}

fn error_topic(name: Option<&str>, id: Uuid, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|n| TopicName(str_bytes(n))))
        .with_topic_id(id)
        .with_topic_authorized_operations(i32::MIN)
}
