//! DeleteTopics: by name (v0-5) or by name or id (v6+).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_request::DeleteTopicsRequest;
use kafka_protocol::messages::delete_topics_response::{DeletableTopicResult, DeleteTopicsResponse};
use kafka_protocol::messages::TopicName;

use super::str_bytes;
use crate::broker::Broker;

pub fn handle(broker: &Arc<Broker>, req: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    let wanted: Vec<(Option<String>, uuid::Uuid)> = if version >= 6 {
        req.topics.into_iter().map(|t| (t.name.map(|n| n.0.as_str().to_string()), t.topic_id)).collect()
    } else {
        req.topic_names.into_iter().map(|n| (Some(n.0.as_str().to_string()), uuid::Uuid::nil())).collect()
    };
    let responses = wanted
        .into_iter()
        .map(|(name, id)| {
            let topic = match &name {
                Some(name) => broker.topics.get(name),
                None => broker.topics.get_by_id(id),
            };
            let result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(|n| TopicName(str_bytes(n))))
                .with_topic_id(id);
            let Some(topic) = topic else {
                let error =
                    if name.is_some() { ResponseError::UnknownTopicOrPartition } else { ResponseError::UnknownTopicId };
                return result.with_error_code(error.code());
            };
            let result = result.with_name(Some(TopicName(str_bytes(&topic.name)))).with_topic_id(topic.id);
            if !broker.config.delete_topic_enable {
                return result.with_error_code(ResponseError::TopicDeletionDisabled.code());
            }
            match broker.topics.delete(&topic.name) {
                Ok(_) => result,
                Err(e) => result
                    .with_error_code(ResponseError::KafkaStorageError.code())
                    .with_error_message(Some(str_bytes(&e.to_string()))),
            }
        })
        .collect();
    DeleteTopicsResponse::default().with_responses(responses)
}
