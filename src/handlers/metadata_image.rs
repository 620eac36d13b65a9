//! Metadata on a broker of a controller quorum (`process.roles=broker`): the answer comes from
//! the metadata image replicated from the quorum (`raft::observer`): the unfenced brokers with
//! their endpoint on the listener the client came in on, every topic with its partitions'
//! leaders, leader epochs, replicas and ISR. A named topic it does not have is auto-created as
//! Kafka's brokers do it (`auto_create`: a CreateTopics to the controller, the client answered
//! UNKNOWN_TOPIC_OR_PARTITION meanwhile). The controller id answered is this broker's, as Kafka's
//! brokers answer a broker id: admin requests sent to it are forwarded.
//!
//! Authorization as in `metadata.rs`: topics need DESCRIBE; the all-topics list leaves the
//! others out, a named one is answered TOPIC_AUTHORIZATION_FAILED without its id.
//!
//! Also owns how the image's brokers and partitions are shown to a client, as Kafka's
//! `KRaftMetadataCache` does: the brokers with an endpoint on the client's listener (DescribeCluster
//! in `admin.rs` lists them too; FindCoordinator answers a coordinator's `endpoint`), and for DescribeTopicPartitions (`topic_partitions_image`) a
//! partition's leader (known only when registered with such an endpoint) and offline replicas.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use uuid::Uuid;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::metadata::image::{BrokerImage, EndpointImage, MetadataImage, PartitionImage, TopicImage};
use crate::security::acl;

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: MetadataRequest,
    version: i16,
    image: &MetadataImage,
) -> MetadataResponse {
    let brokers = nodes(image, &ctx.listener)
        .filter(|(b, _)| !b.fenced)
        .map(|(b, e)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(str_bytes(&e.host))
                .with_port(e.port as i32)
                .with_rack(b.rack.as_deref().map(str_bytes))
        })
        .collect();
    let authz = ctx.authz(broker);
    let auto_create = broker.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
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
                .map(|t| describe(image, t, &ctx.listener))
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
                    Some(t) => describe(image, t, &ctx.listener),
                    None if name.is_some() => {
                        let name = name.as_deref().unwrap_or_default();
                        error_topic(Some(name), Uuid::nil(), missing(broker, &authz, name, auto_create))
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

/// The error for a named topic the image does not have, as Kafka's `KafkaApis` answers it: not
/// described without DESCRIBE; auto-created (a CreateTopics to the controller, not awaited:
/// UNKNOWN_TOPIC_OR_PARTITION until the client asks again and finds it) when the configuration
/// and the request allow it and the client may CREATE it (on the cluster or the topic).
fn missing(
    broker: &Arc<Broker>,
    authz: &crate::security::authorizer::Authz,
    name: &str,
    auto_create: bool,
) -> ResponseError {
    if !authz.allows(acl::DESCRIBE, acl::TOPIC, name) {
        return ResponseError::TopicAuthorizationFailed;
    }
    if crate::metadata::validate_topic_name(name).is_err() {
        return ResponseError::InvalidTopicException;
    }
    if !auto_create {
        return ResponseError::UnknownTopicOrPartition;
    }
    if !authz.allows_quietly(acl::CREATE, acl::CLUSTER, acl::CLUSTER_NAME)
        && !authz.allows(acl::CREATE, acl::TOPIC, name)
    {
        return ResponseError::TopicAuthorizationFailed;
    }
    if let Some(link) = broker.controller.get() {
        super::auto_create::request(broker, link, name);
    }
    ResponseError::UnknownTopicOrPartition
}

fn describe(image: &MetadataImage, topic: &TopicImage, listener: &str) -> MetadataResponseTopic {
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
                .with_replica_nodes(broker_ids(&part.replicas))
                .with_isr_nodes(broker_ids(&part.isr))
                .with_offline_replicas(offline_replicas(image, part, listener))
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(&topic.name))))
        .with_topic_id(topic.id)
        .with_is_internal(super::is_internal_topic(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(i32::MIN)
}

/// DescribeCluster's brokers and controller id from the image (Kafka 4.1's `KafkaApis`): every
/// broker with an endpoint on `listener`, the fenced ones only when asked for (v2+); the
/// controller, a broker id admin requests can be sent to (Kafka: an unfenced one at random, -1
/// when it is not listed): `own` when it is listed unfenced, else the first unfenced one listed.
pub(super) fn describe_cluster_brokers(
    image: &MetadataImage,
    listener: &str,
    own: i32,
    include_fenced: bool,
) -> (BrokerId, Vec<DescribeClusterBroker>) {
    let brokers: Vec<DescribeClusterBroker> = nodes(image, listener)
        .filter(|(b, _)| include_fenced || !b.fenced)
        .map(|(b, e)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(b.id))
                .with_host(str_bytes(&e.host))
                .with_port(e.port as i32)
                .with_rack(b.rack.as_deref().map(str_bytes))
                .with_is_fenced(b.fenced)
        })
        .collect();
    let unfenced = || brokers.iter().filter(|b| !b.is_fenced).map(|b| b.broker_id);
    let controller = unfenced().find(|id| id.0 == own).or_else(|| unfenced().next()).unwrap_or(BrokerId(-1));
    (controller, brokers)
}

/// The image's brokers with their endpoint on `listener` (Kafka's `getBrokerNodes`), by id.
fn nodes<'a>(
    image: &'a MetadataImage,
    listener: &'a str,
) -> impl Iterator<Item = (&'a BrokerImage, &'a EndpointImage)> {
    image.brokers.values().filter_map(move |b| Some((b, endpoint(b, listener)?)))
}

/// The broker's endpoint on `listener` (Kafka's `BrokerRegistration.node`).
pub(super) fn endpoint<'a>(broker: &'a BrokerImage, listener: &str) -> Option<&'a EndpointImage> {
    broker.endpoints.iter().find(|e| e.listener.eq_ignore_ascii_case(listener))
}

pub(super) fn broker_ids(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|&id| BrokerId(id)).collect()
}

/// The partition's leader as Kafka's `KRaftMetadataCache.getAliveEndpoint` finds it: a broker
/// registered with an endpoint on `listener` (fenced or not), else -1.
pub(super) fn reachable_leader(image: &MetadataImage, partition: &PartitionImage, listener: &str) -> BrokerId {
    let known = image.brokers.get(&partition.leader).and_then(|b| endpoint(b, listener));
    BrokerId(if known.is_some() { partition.leader } else { -1 })
}

/// Kafka's `KRaftMetadataCache.getOfflineReplicas`: the replicas, in assignment order, on a
/// broker that is not registered, is fenced, has no endpoint on `listener`, or does not have the
/// partition's directory online.
pub(super) fn offline_replicas(image: &MetadataImage, partition: &PartitionImage, listener: &str) -> Vec<BrokerId> {
    let offline = |i: usize, id: i32| match image.brokers.get(&id) {
        None => true,
        Some(b) => b.fenced || endpoint(b, listener).is_none() || !dir_online(b, partition_dir(partition, i)),
    };
    partition.replicas.iter().enumerate().filter(|&(i, &id)| offline(i, id)).map(|(_, &id)| BrokerId(id)).collect()
}

/// Kafka's reserved directory ids (`DirectoryId`): MIGRATING (0, 0), UNASSIGNED (0, 1), LOST (0, 2).
const DIR_MIGRATING: Uuid = Uuid::nil();
const DIR_UNASSIGNED: Uuid = Uuid::from_u64_pair(0, 1);
const DIR_LOST: Uuid = Uuid::from_u64_pair(0, 2);

/// The directory of the `i`th replica (Kafka's `PartitionRegistration.directory`); MIGRATING when
/// the partition has no directories (Kafka fills them in so, `defaultToMigrating`).
fn partition_dir(partition: &PartitionImage, i: usize) -> Uuid {
    match partition.directories.len() == partition.replicas.len() {
        true => partition.directories[i],
        false => DIR_MIGRATING,
    }
}

/// Kafka's `BrokerRegistration.hasOnlineDir` (`DirectoryId.isOnline`): MIGRATING and UNASSIGNED
/// count as online, LOST not; any other directory is online when the broker lists it among its
/// online log directories, or lists none (registered before directories were reported).
fn dir_online(broker: &BrokerImage, dir: Uuid) -> bool {
    match dir {
        DIR_MIGRATING | DIR_UNASSIGNED => true,
        DIR_LOST => false,
        _ => broker.log_dirs.is_empty() || broker.log_dirs.contains(&dir),
    }
}

fn error_topic(name: Option<&str>, id: Uuid, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|n| TopicName(str_bytes(n))))
        .with_topic_id(id)
        .with_topic_authorized_operations(i32::MIN)
}

#[cfg(test)]
#[path = "metadata_image_tests.rs"]
pub(super) mod tests;
