//! DeleteTopics, CreatePartitions and ElectLeaders on a Ketch controller (brokers forward them,
//! Kafka's `ControllerApis`): each topic or partition checked against the metadata image, its
//! records (`controller::topic_changes`, `controller::remove_topic_records`) written as one change, answered once
//! durable.
//!
//! DeleteTopics and CreatePartitions take the partitions they delete or add from the client's
//! `controller_mutation_rate` quota (THROTTLING_QUOTA_EXCEEDED once exhausted, from v5 and v3).
//!
//! With an authorizer (`controller_authz`), as Kafka's `ControllerApis`: DeleteTopics needs DELETE
//! on the cluster, or DESCRIBE and DELETE on the topic; CreatePartitions ALTER on the topic;
//! ElectLeaders ALTER on the cluster. A refused topic is TOPIC_AUTHORIZATION_FAILED.
//! Not yet: CreateTopicPolicy.
//! Invariants: a refused topic or partition writes nothing.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, DeleteTopicsRequest, DeleteTopicsResponse, ElectLeadersRequest,
    ElectLeadersResponse, TopicName,
};
use uuid::Uuid;

use super::controller_apis::written;
use super::create_topics::{take_quota, MAX_RECORDS_PER_USER_OP};
use super::str_bytes;
use crate::controller::quorum::QuorumController;
use crate::controller::remove_topic_records;
use crate::controller::topic_changes::{
    create_partitions_assigned_records, create_partitions_records, elect_leaders as elect, ElectionType,
};
use crate::quota::mutation::MutationQuota;
use crate::security::acl;
use crate::security::authorizer::Authz;

/// A topic the caller may not change (`controller_authz`).
const DENIED: i16 = ResponseError::TopicAuthorizationFailed.code();

/// DeleteTopics, by name (v0-5) or by name or id (v6+), with Kafka's answers to a topic named
/// twice, by name and id at once, or by neither.
pub fn delete_topics(
    controller: &QuorumController,
    authz: &Authz,
    request: DeleteTopicsRequest,
    version: i16,
    mut quota: MutationQuota<'_>,
) -> DeleteTopicsResponse {
    if !controller.settings.delete_topic_enable {
        let error = if version < 3 { ResponseError::InvalidRequest } else { ResponseError::TopicDeletionDisabled };
        let refused = |name: Option<TopicName>, id: Uuid| {
            DeletableTopicResult::default().with_name(name).with_topic_id(id).with_error_code(error.code())
        };
        let responses = if version >= 6 {
            request.topics.into_iter().map(|t| refused(t.name, t.topic_id)).collect()
        } else {
            request.topic_names.into_iter().map(|n| refused(Some(n), Uuid::nil())).collect()
        };
        return DeleteTopicsResponse::default().with_responses(responses);
    }
    let mut refused = Vec::new();
    let invalid = |name: Option<&str>, id: Uuid, message: &str| {
        DeletableTopicResult::default()
            .with_name(name.map(|n| TopicName(str_bytes(n))))
            .with_topic_id(id)
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(str_bytes(message)))
    };
    // Kafka's `ControllerApis.deleteTopics`: the names and ids provided, each once; one named
    // twice gets one INVALID_REQUEST answer and is not deleted.
    let mut names = Provided::default();
    let mut ids = Provided::default();
    request.topic_names.iter().for_each(|n| names.add(n.0.to_string()));
    for t in &request.topics {
        match (&t.name, t.topic_id.is_nil()) {
            (None, true) => refused.push(invalid(None, Uuid::nil(), "Neither topic name nor id were specified.")),
            (None, false) => ids.add(t.topic_id),
            (Some(n), true) => names.add(n.0.to_string()),
            (Some(n), false) => {
                refused.push(invalid(Some(n.as_str()), t.topic_id, "You may not specify both topic name and topic id."))
            }
        }
    }
    refused.extend(names.given_once(false).iter().map(|n| invalid(Some(n), Uuid::nil(), "Duplicate topic name.")));
    refused.extend(ids.given_once(false).iter().map(|id| invalid(None, *id, "Duplicate topic id.")));
    // Kafka's `deleteTopics` authorization: DELETE on the cluster, or DESCRIBE and DELETE on the
    // topic. A topic given by id that may not be deleted is refused, named only if describable.
    let image = controller.image();
    let cluster = authz.allows_quietly(acl::DELETE, acl::CLUSTER, acl::CLUSTER_NAME);
    let describable = |name: &str| cluster || authz.allows(acl::DESCRIBE, acl::TOPIC, name);
    let deletable = |name: &str| cluster || authz.allows(acl::DELETE, acl::TOPIC, name);
    let mut by_id: std::collections::HashSet<Uuid> = ids.given_once(true).into_iter().collect();
    by_id.retain(|id| {
        let Some(name) = image.topics.get(id).map(|t| t.name.as_str()) else { return true };
        let may_delete = deletable(name);
        if !may_delete {
            let shown = describable(name).then(|| TopicName(str_bytes(name)));
            refused.push(DeletableTopicResult::default().with_name(shown).with_topic_id(*id).with_error_code(DENIED));
        }
        may_delete
    });
    // A name that maps to an id also provided: neither is deleted, one answer.
    let mut wanted: Vec<(Option<String>, Uuid)> = Vec::new();
    for name in names.given_once(true) {
        let denied =
            || DeletableTopicResult::default().with_name(Some(TopicName(str_bytes(&name)))).with_error_code(DENIED);
        if !describable(&name) || (image.topic(&name).is_some() && !deletable(&name)) {
            refused.push(denied());
            continue;
        }
        match image.topic(&name).map(|t| t.id).filter(|id| by_id.contains(id)) {
            Some(id) => {
                by_id.remove(&id);
                refused.push(invalid(
                    Some(&name),
                    id,
                    "The provided topic name maps to an ID that was already supplied.",
                ));
            }
            None => wanted.push((Some(name), Uuid::nil())),
        }
    }
    wanted.extend(ids.given_once(true).into_iter().filter(|id| by_id.contains(id)).map(|id| (None, id)));
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let decided = controller.change(|d| {
                let topic = match &name {
                    Some(n) => d.image.topic(n).cloned(),
                    None => d.image.topics.get(&id).cloned(),
                };
                let Some(topic) = topic else {
                    let error = if name.is_some() {
                        ResponseError::UnknownTopicOrPartition
                    } else {
                        ResponseError::UnknownTopicId
                    };
                    return (Vec::new(), Err((error, None::<String>)));
                };
                // The client's mutation quota, for a topic that exists (Kafka's `deleteTopic`).
                if let Err((error, message)) = take_quota(&mut quota, topic.partitions.len() as i32) {
                    return (Vec::new(), Err((error, Some(message))));
                }
                (remove_topic_records(d.image, &topic.name), Ok((topic.name.clone(), topic.id)))
            });
            let result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(|n| TopicName(str_bytes(n))))
                .with_topic_id(id);
            match written("DeleteTopics", decided, |error| Err((error, None))) {
                Ok((name, id)) => {
                    tracing::info!(topic = %name, "topic deleted");
                    result.with_name(Some(TopicName(str_bytes(&name)))).with_topic_id(id)
                }
                Err((error, message)) => {
                    result.with_error_code(error.code()).with_error_message(message.map(|m| str_bytes(&m)))
                }
            }
        })
        .collect::<Vec<_>>();
    DeleteTopicsResponse::default()
        .with_responses(refused.into_iter().chain(responses).collect())
        .with_throttle_time_ms(quota.throttle_ms())
}

/// Names or ids a DeleteTopics provides, in order, with how often each is given.
#[derive(Debug)]
struct Provided<T> {
    order: Vec<T>,
    counts: std::collections::HashMap<T, usize>,
}

impl<T> Default for Provided<T> {
    fn default() -> Self {
        Provided { order: Vec::new(), counts: std::collections::HashMap::new() }
    }
}

impl<T: Clone + Eq + std::hash::Hash> Provided<T> {
    fn add(&mut self, item: T) {
        let count = self.counts.entry(item.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.order.push(item);
        }
    }

    /// Those given once (`true`) or more than once (`false`).
    fn given_once(&self, once: bool) -> Vec<T> {
        self.order.iter().filter(|i| (self.counts[*i] == 1) == once).cloned().collect()
    }
}

/// CreatePartitions: new partitions placed over the usable brokers.
pub fn create_partitions(
    controller: &QuorumController,
    authz: &Authz,
    request: CreatePartitionsRequest,
    mut quota: MutationQuota<'_>,
) -> CreatePartitionsResponse {
    // What the request may still add (Kafka's bounded record list, shared by its topics).
    let mut budget = MAX_RECORDS_PER_USER_OP;
    let results = request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.0.as_str();
            let result = CreatePartitionsTopicResult::default().with_name(topic.name.clone());
            // ALTER on the topic (Kafka's `filterAlterAuthorizedTopics`).
            if !authz.allows(acl::ALTER, acl::TOPIC, name) {
                return result.with_error_code(DENIED).with_error_message(None);
            }
            let current = controller.image().topic(name).map_or(0, |t| t.partitions.len() as i64);
            let added = (topic.count as i64 - current).max(0) as u64;
            if added > budget {
                // Kafka's controller runs out of its bounded list for this topic: an unexpected
                // error, without a message (nothing placed, nothing written here).
                return result.with_error_code(ResponseError::UnknownServerError.code()).with_error_message(None);
            }
            let seed = u64::from_le_bytes(crate::metadata::random_bytes()[..8].try_into().expect("8 bytes"));
            let manual: Option<Vec<Vec<i32>>> = topic
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|p| p.broker_ids.iter().map(|b| b.0).collect()).collect());
            let decided = controller.change(|d| {
                let records = match &manual {
                    Some(a) => create_partitions_assigned_records(d.image, name, topic.count, a),
                    None => create_partitions_records(d.image, name, topic.count, seed),
                };
                // The client's mutation quota, for the partitions a valid request adds.
                let records = records.and_then(|records| {
                    let current = d.image.topic(name).map_or(0, |t| t.partitions.len() as i32);
                    take_quota(&mut quota, topic.count - current).map_err(|(e, m)| (e, Some(m))).map(|()| records)
                });
                match records {
                    Ok(records) if !request.validate_only => (records, Ok(())),
                    Ok(_) => (Vec::new(), Ok(())),
                    Err(refusal) => (Vec::new(), Err(refusal)),
                }
            });
            match written("CreatePartitions", decided, |error| Err((error, None))) {
                Ok(()) => {
                    budget -= added;
                    result
                }
                Err((error, message)) => {
                    result.with_error_code(error.code()).with_error_message(message.map(|m| str_bytes(&m)))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results).with_throttle_time_ms(quota.throttle_ms())
}

/// ElectLeaders (preferred or unclean), for the partitions named or all of them.
pub fn elect_leaders(controller: &QuorumController, request: ElectLeadersRequest) -> ElectLeadersResponse {
    let election = match ElectionType::from_code(request.election_type) {
        Ok(e) => e,
        Err((error, _)) => return ElectLeadersResponse::default().with_error_code(error.code()),
    };
    let wanted: Option<Vec<(String, i32)>> = request
        .topic_partitions
        .as_ref()
        .map(|topics| topics.iter().flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p))).collect());
    let decided = controller.change(|d| elect(d.image, election, wanted.as_deref()));
    let results = match written("ElectLeaders", decided.map(Ok), Err) {
        Ok(results) => results,
        Err(error) => return ElectLeadersResponse::default().with_error_code(error.code()),
    };
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for r in results {
        let (code, message) = r.error.map_or((0, None), |(e, m)| (e.code(), Some(str_bytes(&m))));
        by_topic.entry(r.topic).or_default().push(
            PartitionResult::default().with_partition_id(r.partition).with_error_code(code).with_error_message(message),
        );
    }
    let results = by_topic
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default().with_topic(TopicName(str_bytes(&topic))).with_partition_result(partitions)
        })
        .collect();
    ElectLeadersResponse::default().with_replica_election_results(results)
}

#[cfg(test)]
#[path = "controller_admin_tests.rs"]
mod tests;
