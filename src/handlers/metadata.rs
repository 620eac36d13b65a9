//! Metadata: brokers (just this node), topics with partitions and leaders, auto-creation.
//!
//! Authorization (Kafka's): topics need DESCRIBE (named ones are answered
//! TOPIC_AUTHORIZATION_FAILED without their id, the all-topics list leaves them out), an
//! auto-creation CREATE on the cluster or the topic; KIP-430 operations are the allowed ones.

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
use crate::metadata::Topic;
use crate::security::acl;

/// The host and port clients should use to reach this broker: the `advertised.listeners` entry
/// named as the listener the client came in on (names compared as Kafka does, case-insensitive),
/// else the address this client reached us on (also for an advertised entry with no host).
pub fn advertised_endpoint(broker: &Broker, ctx: &RequestContext) -> (String, i32) {
    let own = broker.config.advertised_listeners.iter().find(|l| l.name.eq_ignore_ascii_case(&ctx.listener));
    match own {
        Some(listener) if !listener.host.is_empty() => (listener.host.clone(), listener.port as i32),
        _ => (ctx.local_addr.ip().to_string(), ctx.local_addr.port() as i32),
    }
}

pub fn handle(broker: &Arc<Broker>, ctx: &RequestContext, req: MetadataRequest, version: i16) -> MetadataResponse {
    let node_id = broker.config.node_id;
    let (host, port) = advertised_endpoint(broker, ctx);
    let brokers = vec![MetadataResponseBroker::default()
        .with_node_id(BrokerId(node_id))
        .with_host(str_bytes(&host))
        .with_port(port)];
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let requested = match req.topics {
        None => None,
        Some(list) if list.is_empty() && version == 0 => None,
        Some(list) => Some(list),
    };
    let auto_create = broker.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
    let authz = ctx.authz(broker);
    let denied = |name: Option<&str>, id: Uuid| error_topic(name, id, ResponseError::TopicAuthorizationFailed);
    let mut topics: Vec<MetadataResponseTopic> = match requested {
        // All topics: those the principal may not describe are left out, silently.
        None => broker
            .topics
            .all()
            .iter()
            .filter(|t| authz.allows_quietly(acl::DESCRIBE, acl::TOPIC, &t.name))
            .map(|t| describe(node_id, t))
            .collect(),
        Some(list) => list
            .into_iter()
            .map(|wanted| match wanted.name {
                Some(name) => {
                    let name = name.0.as_str();
                    if !authz.allows(acl::DESCRIBE, acl::TOPIC, name) {
                        // Its existence is not disclosed (no id).
                        return denied(Some(name), Uuid::nil());
                    }
                    let creates = auto_create && broker.topics.get(name).is_none();
                    if creates
                        && !authz.allows_quietly(acl::CREATE, acl::CLUSTER, acl::CLUSTER_NAME)
                        && !authz.allows(acl::CREATE, acl::TOPIC, name)
                    {
                        return denied(Some(name), Uuid::nil()).with_is_internal(super::is_internal_topic(name));
                    }
                    lookup_or_create(broker, name, auto_create, node_id)
                }
                None => match broker.topics.get_by_id(wanted.topic_id) {
                    // Topic ids are not secret: the id is answered, the name is not.
                    Some(topic) if !authz.allows(acl::DESCRIBE, acl::TOPIC, &topic.name) => {
                        denied(None, wanted.topic_id)
                    }
                    Some(topic) => describe(node_id, &topic),
                    None => error_topic(None, wanted.topic_id, ResponseError::UnknownTopicId),
                },
            })
            .collect(),
    };
    // KIP-430: what the client may do, when asked, on each topic it may describe.
    if req.include_topic_authorized_operations {
        for t in topics.iter_mut().filter(|t| t.error_code != ResponseError::TopicAuthorizationFailed.code()) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations = authz.operations(acl::TOPIC, name.0.as_str());
            }
        }
    }
    let cluster_operations = authz.cluster_operations_if(version <= 10 && req.include_cluster_authorized_operations);
    MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(&broker.cluster_id)))
        .with_controller_id(BrokerId(node_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

fn lookup_or_create(broker: &Broker, name: &str, auto_create: bool, node_id: i32) -> MetadataResponseTopic {
    if let Some(topic) = broker.topics.get(name) {
        return describe(node_id, &topic);
    }
    if crate::metadata::validate_topic_name(name).is_err() {
        return error_topic(Some(name), Uuid::nil(), ResponseError::InvalidTopicException);
    }
    if !auto_create {
        return error_topic(Some(name), Uuid::nil(), ResponseError::UnknownTopicOrPartition);
    }
    match broker.topics.create(name, broker.config.num_partitions, Default::default()) {
        Ok(topic) => describe(node_id, &topic),
        // Lost a race with another creator: describe what exists now.
        Err(_) => match broker.topics.get(name) {
            Some(topic) => describe(node_id, &topic),
            None => error_topic(Some(name), Uuid::nil(), ResponseError::UnknownTopicOrPartition),
        },
    }
}

fn error_topic(name: Option<&str>, id: Uuid, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|n| TopicName(str_bytes(n))))
        .with_topic_id(id)
        .with_topic_authorized_operations(i32::MIN)
}

pub fn describe(node_id: i32, topic: &Topic) -> MetadataResponseTopic {
    let partitions = topic
        .partitions
        .iter()
        .map(|p| {
            let (epoch, offline) = {
                let log = p.log();
                (crate::replica::leader_epoch(&log), log.health().is_offline())
            };
            if offline {
                // Its log directory failed. Kafka's controller then leaves the partition
                // without a leader (the only replica's directory is offline) and the metadata
                // cache reports LEADER_NOT_AVAILABLE, no leader, the replica offline.
                return MetadataResponsePartition::default()
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_partition_index(p.index)
                    .with_leader_id(BrokerId(-1))
                    .with_leader_epoch(epoch)
                    .with_replica_nodes(vec![BrokerId(node_id)])
                    .with_isr_nodes(vec![BrokerId(node_id)])
                    .with_offline_replicas(vec![BrokerId(node_id)]);
            }
            MetadataResponsePartition::default()
                .with_partition_index(p.index)
                .with_leader_id(BrokerId(node_id))
                .with_leader_epoch(epoch)
                .with_replica_nodes(vec![BrokerId(node_id)])
                .with_isr_nodes(vec![BrokerId(node_id)])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(&topic.name))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.internal)
        .with_partitions(partitions)
        .with_topic_authorized_operations(i32::MIN)
}
