//! DeleteTopics: by name (v0-5) or by name or id (v6+), with Kafka's checks of the request
//! (`ControllerApis.deleteTopics`): an entry with both a name and an id, or neither, and names or
//! ids given twice are refused before anything is deleted. Authorization as Kafka's controller:
//! DELETE on the cluster or on each topic; a topic named without DESCRIBE, or named by an id
//! without DELETE, is TOPIC_AUTHORIZATION_FAILED (the name shown only when describable). A
//! deleted topic's partitions are taken from the client's controller mutation quota.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{DeletableTopicResult, DeleteTopicsResponse};
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

use super::create_topics::take_quota;
use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::error::default_message;
use crate::quota::mutation::MutationQuota;
use crate::security::acl;

fn result(name: Option<&str>, id: Uuid, error: Option<(ResponseError, String)>) -> DeletableTopicResult {
    let result = DeletableTopicResult::default().with_name(name.map(|n| TopicName(str_bytes(n)))).with_topic_id(id);
    match error {
        None => result.with_error_message(None),
        Some((e, message)) => result.with_error_code(e.code()).with_error_message(Some(str_bytes(&message))),
    }
}

/// Kafka's answer with its error's default message.
fn refused(error: ResponseError) -> Option<(ResponseError, String)> {
    Some((error, default_message(error)))
}

pub fn handle(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
    version: i16,
    mut quota: MutationQuota,
) -> DeleteTopicsResponse {
    let authz = ctx.authz(broker);
    let cluster_delete = authz.allows_quietly(acl::DELETE, acl::CLUSTER, acl::CLUSTER_NAME);
    let may = |op: i8, name: &str| cluster_delete || authz.allows(op, acl::TOPIC, name);
    let entries: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics.into_iter().map(|t| (t.name.map(|n| n.0.to_string()), t.topic_id)).collect()
    } else {
        req.topic_names.into_iter().map(|n| (Some(n.0.to_string()), Uuid::nil())).collect()
    };
    let mut responses = Vec::new();
    let (mut names, mut ids) = (Vec::new(), Vec::new());
    for (name, id) in entries {
        match (name, id.is_nil()) {
            (None, true) => responses.push(result(
                None,
                id,
                Some((ResponseError::InvalidRequest, "Neither topic name nor id were specified.".into())),
            )),
            (None, false) => ids.push(id),
            (Some(name), true) => names.push(name),
            (Some(name), false) => responses.push(result(
                Some(&name),
                id,
                Some((ResponseError::InvalidRequest, "You may not specify both topic name and topic id.".into())),
            )),
        }
    }
    let duplicated = |all: &[String]| -> HashSet<String> {
        let mut seen = HashSet::new();
        all.iter().filter(|n| !seen.insert(*n)).cloned().collect()
    };
    let duplicate_names = duplicated(&names);
    let duplicate_ids = duplicated(&ids.iter().map(Uuid::to_string).collect::<Vec<_>>());
    for name in &duplicate_names {
        let error = Some((ResponseError::InvalidRequest, "Duplicate topic name.".to_string()));
        responses.push(result(Some(name), Uuid::nil(), error));
    }
    for id in ids.iter().filter(|id| duplicate_ids.contains(&id.to_string())).collect::<HashSet<_>>() {
        responses.push(result(None, *id, Some((ResponseError::InvalidRequest, "Duplicate topic id.".to_string()))));
    }
    names.retain(|n| !duplicate_names.contains(n));
    ids.retain(|id| !duplicate_ids.contains(&id.to_string()));
    let topics = names
        .iter()
        .map(|n| (broker.topics.get(n), Some(n.as_str()), Uuid::nil()))
        .chain(ids.iter().map(|id| (broker.topics.get_by_id(*id), None, *id)));
    for (topic, name, id) in topics {
        // Kafka's order: by name, DESCRIBE before existence; by id, DELETE then DESCRIBE decide
        // whether the name is disclosed.
        let denied = ResponseError::TopicAuthorizationFailed;
        if let Some(name) = name.filter(|n| !may(acl::DESCRIBE, n)) {
            responses.push(result(Some(name), Uuid::nil(), refused(denied)));
            continue;
        }
        if let Some(t) = topic.as_ref().filter(|t| !may(acl::DELETE, &t.name)) {
            let shown = match name {
                Some(name) => Some(name),
                None => Some(t.name.as_str()).filter(|n| may(acl::DESCRIBE, n)),
            };
            responses.push(result(shown, id, refused(denied)));
            continue;
        }
        let Some(topic) = topic else {
            let error =
                if name.is_some() { ResponseError::UnknownTopicOrPartition } else { ResponseError::UnknownTopicId };
            responses.push(result(name, id, refused(error)));
            continue;
        };
        let outcome = if !broker.config.delete_topic_enable {
            refused(ResponseError::TopicDeletionDisabled)
        } else if let Err(refusal) = take_quota(&mut quota, topic.partitions.len() as i32) {
            Some(refusal)
        } else {
            broker.topics.delete(&topic.name).err().map(|e| (ResponseError::KafkaStorageError, e.to_string()))
        };
        responses.push(result(Some(&topic.name), topic.id, outcome));
    }
    DeleteTopicsResponse::default().with_responses(responses).with_throttle_time_ms(quota.throttle_ms())
}
