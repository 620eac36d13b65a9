//! KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69). The
//! rules live in `crate::group::consumer`; this file only translates requests and responses.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::{
    self as describe, ConsumerGroupDescribeResponse, DescribedGroup,
};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, ConsumerGroupHeartbeatResponse, TopicPartitions,
};
use kafka_protocol::messages::TopicName;

use kafka_protocol::error::ResponseError;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::group::consumer::{self, Heartbeat};
use crate::group::consumer_api::validate;
use crate::security::acl;

pub async fn heartbeat(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ConsumerGroupHeartbeatRequest,
    version: i16,
    client_id: &str,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = req.group_id.0.as_str();
    // Kafka's KafkaApis: READ on the group, then DESCRIBE on every subscribed topic named.
    let authz = ctx.authz(broker);
    let refused = |error: ResponseError| ConsumerGroupHeartbeatResponse::default().with_error_code(error.code());
    if !authz.allows(acl::READ, acl::GROUP, group_id) {
        return refused(ResponseError::GroupAuthorizationFailed);
    }
    if let Err(e) = broker.groups.check_coordinator(group_id) {
        return refused(e);
    }
    if let Some(names) = req.subscribed_topic_names.as_ref().filter(|n| !n.is_empty()) {
        let allowed = authz.allowed_names(acl::DESCRIBE, acl::TOPIC, names.iter().map(|n| n.0.as_str()));
        if names.iter().any(|n| !allowed.contains(n.0.as_str())) {
            return refused(ResponseError::TopicAuthorizationFailed);
        }
    }
    let hb = Heartbeat {
        member_id: req.member_id.as_str().to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.as_str().to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.as_str().to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|names| names.iter().map(|n| n.0.as_str().to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|s| s.as_str().to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.as_str().to_string()),
        owned: req
            .topic_partitions
            .as_ref()
            .map(|tps| tps.iter().map(|tp| (tp.topic_id, tp.partitions.clone())).collect()),
        client_id: client_id.to_string(),
        client_host: format!("/{}", ctx.peer_addr.ip()),
    };
    let settings = &broker.groups.config.consumer;
    let outcome = validate(group_id, &hb, version, settings)
        .and_then(|()| broker.groups.consumer_heartbeat(&broker.topics, group_id, hb));
    let (answer, written) = match outcome {
        Ok(ok) => ok,
        Err((error, message)) => {
            return ConsumerGroupHeartbeatResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(str_bytes(&message)))
        }
    };
    let synced = match written {
        Ok(w) => broker.groups.sync_to_disk(&broker.flusher, w).await,
        Err(e) => Err(e),
    };
    if let Err(e) = synced {
        return ConsumerGroupHeartbeatResponse::default().with_error_code(e.code());
    }
    // The group's own heartbeat interval where it has one (Kafka's GroupConfig).
    let interval = if answer.member_epoch < 0 { 0 } else { broker.groups.heartbeat_interval_ms(group_id) };
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(str_bytes(&answer.member_id)))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(interval)
        .with_assignment(answer.assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                a.into_iter()
                    .map(|(id, ps)| {
                        TopicPartitions::default().with_topic_id(id).with_partitions(ps.into_iter().collect())
                    })
                    .collect(),
            )
        }))
}

fn described_assignment(broker: &Broker, a: &consumer::Assignment) -> describe::Assignment {
    describe::Assignment::default().with_topic_partitions(
        a.iter()
            .map(|(id, ps)| {
                let name = broker.topics.get_by_id(*id).map(|t| t.name.clone()).unwrap_or_default();
                describe::TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(TopicName(str_bytes(&name)))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: ConsumerGroupDescribeRequest,
    version: i16,
) -> ConsumerGroupDescribeResponse {
    let authz = ctx.authz(broker);
    let groups = req
        .group_ids
        .iter()
        .map(|id| {
            let d = DescribedGroup::default().with_group_id(id.clone()).with_authorized_operations(i32::MIN);
            if !authz.allows(acl::DESCRIBE, acl::GROUP, id.0.as_str()) {
                return d.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            if let Err(e) = broker.groups.check_coordinator(id.0.as_str()) {
                return d.with_error_code(e.code());
            }
            let operations = authz.operations_if(req.include_authorized_operations, acl::GROUP, id.0.as_str());
            match broker.groups.consumer_describe(id.0.as_str()) {
                Err((error, message)) => d.with_error_code(error.code()).with_error_message(Some(str_bytes(&message))),
                Ok(g) => {
                    let members = g
                        .members
                        .iter()
                        .map(|(m, target)| {
                            let member = describe::Member::default()
                                .with_member_id(str_bytes(&m.id))
                                .with_instance_id(m.instance_id.as_deref().map(str_bytes))
                                .with_rack_id(m.rack_id.as_deref().map(str_bytes))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(str_bytes(&m.client_id))
                                .with_client_host(str_bytes(&m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topic_names.iter().map(|t| TopicName(str_bytes(t))).collect(),
                                )
                                .with_subscribed_topic_regex(m.subscribed_topic_regex.as_deref().map(str_bytes))
                                .with_assignment(described_assignment(broker, &m.assigned))
                                .with_target_assignment(described_assignment(broker, target));
                            if version >= 1 {
                                // 0: a classic member (online migration), 1: a consumer-protocol one.
                                member.with_member_type(if m.classic.is_some() { 0 } else { 1 })
                            } else {
                                member
                            }
                        })
                        .collect();
                    d.with_group_state(str_bytes(g.state))
                        .with_group_epoch(g.group_epoch)
                        .with_assignment_epoch(g.assignment_epoch)
                        .with_assignor_name(str_bytes(&g.assignor))
                        .with_members(members)
                        .with_authorized_operations(operations)
                }
            }
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}
