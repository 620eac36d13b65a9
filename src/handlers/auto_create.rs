//! Topic auto-creation on a broker of a cluster (Kafka's `AutoTopicCreationManager`): a topic a
//! Metadata request names (with `auto.create.topics.enable` and the request allowing it), or an
//! internal topic a coordinator lookup needs, is created by a CreateTopics sent to the active
//! controller, not awaited: the client is answered at once and asks again.
//!
//! Owns: what such a topic is created with, as Kafka's broker asks for it: `__consumer_offsets`
//! from `offsets.topic.*`, `__transaction_state` from `transaction.state.log.*` (both compacted,
//! with their coordinators' configs), any other topic with `num.partitions` and
//! `default.replication.factor`; and the topics whose creation is in flight.
//! Invariants: at most one creation in flight per topic name (`Broker::auto_creating`); a name
//! Kafka would refuse is never sent (the caller answers INVALID_TOPIC_EXCEPTION).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig, CreateTopicsRequest};
use kafka_protocol::messages::TopicName;

use super::str_bytes;
use crate::broker::Broker;
use crate::node::ControllerLink;

/// The CreateTopics version sent (the controller's link negotiates down when it must).
const CREATE_TOPICS_VERSION: i16 = 7;
/// Kafka's `request.timeout.ms` default, which its broker sends as the CreateTopics timeout.
const CREATE_TIMEOUT_MS: i32 = 30_000;

/// Asks the controller to create `name` unless that is in flight already; returns at once.
pub fn request(broker: &Arc<Broker>, link: &ControllerLink, name: &str) {
    if !broker.auto_creating.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string()) {
        return;
    }
    let request =
        CreateTopicsRequest::default().with_topics(vec![creatable(broker, name)]).with_timeout_ms(CREATE_TIMEOUT_MS);
    let (link, broker, name) = (link.clone(), broker.clone(), name.to_string());
    tokio::spawn(async move {
        match link.forward(CREATE_TOPICS_VERSION, &request).await {
            Ok(r) => {
                let code = r.topics.first().map_or(0, |t| t.error_code);
                if code != 0 && code != ResponseError::TopicAlreadyExists.code() {
                    tracing::warn!(topic = %name, code, "auto-creating the topic through the controller failed");
                }
            }
            Err(e) => {
                tracing::warn!(topic = %name, error = %e, "auto-creating the topic through the controller failed")
            }
        }
        broker.auto_creating.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
    });
}

/// The topic as Kafka's broker asks for it.
fn creatable(broker: &Broker, name: &str) -> CreatableTopic {
    let config = |name: &str, value: String| {
        CreatableTopicConfig::default().with_name(str_bytes(name)).with_value(Some(str_bytes(&value)))
    };
    let (partitions, replication_factor, configs) = if name == crate::group::OFFSETS_TOPIC {
        let cfg = &broker.groups.config;
        let configs = vec![
            config("cleanup.policy", "compact".to_string()),
            config("compression.type", "producer".to_string()),
            config("segment.bytes", cfg.offsets_topic_segment_bytes.to_string()),
        ];
        (cfg.offsets_topic_partitions, cfg.offsets_topic_replication_factor, configs)
    } else if name == crate::txn::coordinator::TXN_TOPIC {
        let cfg = &broker.txns.config;
        let configs = vec![
            config("cleanup.policy", "compact".to_string()),
            config("compression.type", "uncompressed".to_string()),
            config("segment.bytes", cfg.segment_bytes.to_string()),
            config("min.insync.replicas", cfg.min_isr.to_string()),
            config("unclean.leader.election.enable", "false".to_string()),
        ];
        (cfg.partitions, cfg.replication_factor, configs)
    } else {
        (broker.config.num_partitions, broker.config.default_replication_factor, Vec::new())
    };
    CreatableTopic::default()
        .with_name(TopicName(str_bytes(name)))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
        .with_configs(configs)
}
