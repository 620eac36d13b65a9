//! The classic group membership APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, plus
//! ListGroups, DescribeGroups and DeleteGroups. The state machine lives in `crate::group`; a
//! classic member of a consumer group (online migration) is served by `group::migration`.
//! Authorization as Kafka's: membership needs READ on the group, DescribeGroups DESCRIBE,
//! DeleteGroups DELETE (else GROUP_AUTHORIZATION_FAILED); ListGroups shows the groups the
//! principal may describe, or all with DESCRIBE on the cluster.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{DeletableGroupResult, DeleteGroupsResponse};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{
    DescribeGroupsResponse, DescribedGroup, DescribedGroupMember,
};
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::{JoinGroupResponse, JoinGroupResponseMember};
use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::{LeaveGroupResponse, MemberResponse};
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::{ListGroupsResponse, ListedGroup};
use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::GroupId;

use super::{str_bytes, RequestContext};
use crate::broker::Broker;
use crate::group::api::DescribedGroup as Described;
use crate::group::{JoinRequest, JoinResult, Reply, Storage, SyncRequest, SyncResult};
use crate::security::acl;

fn storage(broker: &Broker) -> Storage<'_> {
    Storage { topics: &broker.topics, flusher: &broker.flusher }
}

/// Waits until a coordinator's write is durable (or says why it failed).
async fn durable(broker: &Broker, written: crate::group::api::Written) -> Result<(), ResponseError> {
    broker.groups.sync_to_disk(&broker.flusher, written?).await
}

pub async fn join(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: JoinGroupRequest,
    version: i16,
    client_id: &str,
) -> JoinGroupResponse {
    let group_id = req.group_id.0.as_str().to_string();
    let cfg = &broker.groups.config;
    let result = if !ctx.authz(broker).allows(acl::READ, acl::GROUP, &group_id) {
        JoinResult::error(ResponseError::GroupAuthorizationFailed, "")
    } else if group_id.is_empty() {
        JoinResult::error(ResponseError::InvalidGroupId, req.member_id.as_str())
    } else if let Err(e) = broker.groups.check_coordinator(&group_id) {
        JoinResult::error(e, req.member_id.as_str())
    } else if req.session_timeout_ms < cfg.min_session_timeout_ms || req.session_timeout_ms > cfg.max_session_timeout_ms
    {
        JoinResult::error(ResponseError::InvalidSessionTimeout, req.member_id.as_str())
    } else {
        let rebalance_ms = if version >= 1 { req.rebalance_timeout_ms } else { req.session_timeout_ms };
        let join = JoinRequest {
            member_id: req.member_id.as_str().to_string(),
            instance_id: req.group_instance_id.as_ref().map(|s| s.as_str().to_string()),
            client_id: client_id.to_string(),
            client_host: format!("/{}", ctx.peer_addr.ip()),
            session_timeout: Duration::from_millis(req.session_timeout_ms.max(0) as u64),
            rebalance_timeout: Duration::from_millis(rebalance_ms.max(0) as u64),
            protocol_type: req.protocol_type.as_str().to_string(),
            protocols: req.protocols.iter().map(|p| (p.name.as_str().to_string(), p.metadata.clone())).collect(),
            require_known_member_id: version >= 4,
            new_member_id: format!("{client_id}-{}", uuid::Uuid::from_bytes(crate::metadata::random_bytes())),
        };
        if let Some((result, written)) = broker.groups.consumer_group_join(&broker.topics, &group_id, &join) {
            // A classic member of a consumer group (online migration): answered once durable.
            match durable(broker, written).await {
                Ok(()) => result,
                Err(e) => JoinResult::error(e, &result.member_id),
            }
        } else {
            let reply = broker.groups.join(&group_id, join);
            let result = match reply {
                Reply::Now(r) => r,
                Reply::Wait(rx) => rx.await.unwrap_or_else(|_| JoinResult::error(ResponseError::UnknownMemberId, "")),
            };
            broker.groups.persist_dirty(&storage(broker)).await;
            result
        }
    };
    let mut response = JoinGroupResponse::default()
        .with_error_code(result.error)
        .with_generation_id(result.generation)
        .with_protocol_name(result.protocol_name.map(|s| str_bytes(&s)))
        .with_leader(str_bytes(&result.leader))
        .with_member_id(str_bytes(&result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(|(id, instance, metadata)| {
                    let m = JoinGroupResponseMember::default().with_member_id(str_bytes(&id)).with_metadata(metadata);
                    if version >= 5 {
                        m.with_group_instance_id(instance.map(|s| str_bytes(&s)))
                    } else {
                        m
                    }
                })
                .collect(),
        );
    if version >= 7 {
        response = response.with_protocol_type(result.protocol_type.map(|s| str_bytes(&s)));
    }
    if version >= 9 {
        response = response.with_skip_assignment(result.skip_assignment);
    }
    if version < 7 && response.protocol_name.is_none() {
        // Before v7 the protocol name is not nullable.
        response.protocol_name = Some(str_bytes(""));
    }
    response
}

pub async fn sync(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let group_id = req.group_id.0.as_str();
    if !ctx.authz(broker).allows(acl::READ, acl::GROUP, group_id) {
        return SyncGroupResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(group_id) {
        return SyncGroupResponse::default().with_error_code(e.code());
    }
    let sync_req = SyncRequest {
        member_id: req.member_id.as_str(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.as_str()),
        generation: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|s| s.as_str()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.as_str()),
    };
    if let Some(result) = broker.groups.consumer_group_sync(&broker.topics, group_id, sync_req) {
        return sync_response(result, version);
    }
    let assignments =
        req.assignments.iter().map(|a| (a.member_id.as_str().to_string(), a.assignment.clone())).collect();
    let reply = broker.groups.sync(group_id, sync_req, assignments);
    let result = match reply {
        Reply::Now(r) => r,
        Reply::Wait(rx) => {
            rx.await.unwrap_or(SyncResult { error: ResponseError::RebalanceInProgress.code(), ..Default::default() })
        }
    };
    broker.groups.persist_dirty(&storage(broker)).await;
    sync_response(result, version)
}

fn sync_response(result: SyncResult, version: i16) -> SyncGroupResponse {
    let response = SyncGroupResponse::default().with_error_code(result.error).with_assignment(result.assignment);
    if version >= 5 {
        response
            .with_protocol_type(result.protocol_type.map(|s| str_bytes(&s)))
            .with_protocol_name(result.protocol_name.map(|s| str_bytes(&s)))
    } else {
        response
    }
}

pub fn heartbeat(broker: &Arc<Broker>, ctx: &RequestContext, req: HeartbeatRequest) -> HeartbeatResponse {
    if !ctx.authz(broker).allows(acl::READ, acl::GROUP, req.group_id.0.as_str()) {
        return HeartbeatResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(req.group_id.0.as_str()) {
        return HeartbeatResponse::default().with_error_code(e.code());
    }
    let (group_id, member_id) = (req.group_id.0.as_str(), req.member_id.as_str());
    let instance_id = req.group_instance_id.as_ref().map(|s| s.as_str());
    let outcome = match broker.groups.consumer_group_heartbeat(group_id, member_id, instance_id, req.generation_id) {
        Some(outcome) => outcome,
        None => broker.groups.heartbeat(group_id, member_id, instance_id, req.generation_id),
    };
    let error = outcome.err().map_or(0, |e| e.code());
    HeartbeatResponse::default().with_error_code(error)
}

pub async fn leave(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    if !ctx.authz(broker).allows(acl::READ, acl::GROUP, req.group_id.0.as_str()) {
        return LeaveGroupResponse::default().with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    if let Err(e) = broker.groups.check_coordinator(req.group_id.0.as_str()) {
        return LeaveGroupResponse::default().with_error_code(e.code());
    }
    let leaving: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| (m.member_id.as_str().to_string(), m.group_instance_id.as_ref().map(|s| s.as_str().to_string())))
            .collect()
    } else {
        vec![(req.member_id.as_str().to_string(), None)]
    };
    let group_id = req.group_id.0.as_str();
    let results = match broker.groups.consumer_group_leave(&broker.topics, group_id, leaving.clone()) {
        Some((results, written)) => {
            if let Err(e) = durable(broker, written).await {
                return LeaveGroupResponse::default().with_error_code(e.code());
            }
            results
        }
        None => {
            let results = broker.groups.leave(group_id, leaving);
            broker.groups.persist_dirty(&storage(broker)).await;
            results
        }
    };
    if version >= 3 {
        let members = results
            .into_iter()
            .map(|(m, i, e)| {
                MemberResponse::default()
                    .with_member_id(str_bytes(&m))
                    .with_group_instance_id(i.map(|s| str_bytes(&s)))
                    .with_error_code(e)
            })
            .collect();
        LeaveGroupResponse::default().with_members(members)
    } else {
        LeaveGroupResponse::default().with_error_code(results.first().map_or(0, |r| r.2))
    }
}

pub fn list(broker: &Arc<Broker>, ctx: &RequestContext, req: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    // Kafka: every group with DESCRIBE on the cluster, else those the principal may describe.
    if broker.groups.is_loading() {
        return ListGroupsResponse::default().with_error_code(ResponseError::CoordinatorLoadInProgress.code());
    }
    let authz = ctx.authz(broker);
    let all = authz.allows_quietly(acl::DESCRIBE, acl::CLUSTER, acl::CLUSTER_NAME);
    let states: Vec<String> = req.states_filter.iter().map(|s| s.as_str().to_ascii_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.as_str().to_ascii_lowercase()).collect();
    let groups = broker
        .groups
        .list()
        .into_iter()
        .filter_map(|listed| {
            if !all && !authz.allows_quietly(acl::DESCRIBE, acl::GROUP, &listed.id) {
                return None;
            }
            if !states.is_empty() && !states.contains(&listed.state.to_ascii_lowercase()) {
                return None;
            }
            if !types.is_empty() && !types.iter().any(|t| t == listed.group_type) {
                return None;
            }
            let g = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&listed.id)))
                .with_protocol_type(str_bytes(&listed.protocol_type));
            let g = if version >= 4 { g.with_group_state(str_bytes(listed.state)) } else { g };
            Some(if version >= 5 { g.with_group_type(str_bytes(listed.group_type)) } else { g })
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

pub fn describe(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let authz = ctx.authz(broker);
    let groups = req
        .groups
        .iter()
        .map(|id| {
            let described = DescribedGroup::default().with_group_id(id.clone()).with_authorized_operations(i32::MIN);
            if !authz.allows(acl::DESCRIBE, acl::GROUP, id.0.as_str()) {
                return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            if let Err(e) = broker.groups.check_coordinator(id.0.as_str()) {
                return described.with_error_code(e.code());
            }
            // KIP-430, for groups that exist (Kafka leaves an unknown group's "not requested").
            let operations = authz.operations_if(req.include_authorized_operations, acl::GROUP, id.0.as_str());
            match broker.groups.describe(id.0.as_str()) {
                Described::OffsetsOnly => {
                    described.with_group_state(str_bytes("Empty")).with_authorized_operations(operations)
                }
                Described::Unknown if version >= 6 => described
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(str_bytes(&format!("Group {} not found.", id.0.as_str()))))
                    .with_group_state(str_bytes("Dead")),
                Described::NotClassic if version >= 6 => described
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(str_bytes(&format!("Group {} is not a classic group.", id.0.as_str()))))
                    .with_group_state(str_bytes("Dead")),
                Described::NotClassic => described.with_group_state(str_bytes("Dead")),
                // Before v6 an unknown group is described as a dead one, operations included.
                Described::Unknown => {
                    described.with_group_state(str_bytes("Dead")).with_authorized_operations(operations)
                }
                Described::Live { state, protocol_type, protocol, members } => {
                    let members = members
                        .into_iter()
                        .map(|m| {
                            let d = DescribedGroupMember::default()
                                .with_member_id(str_bytes(&m.id))
                                .with_client_id(str_bytes(&m.client_id))
                                .with_client_host(str_bytes(&m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment);
                            if version >= 4 {
                                d.with_group_instance_id(m.instance_id.as_ref().map(|s| str_bytes(s)))
                            } else {
                                d
                            }
                        })
                        .collect();
                    described
                        .with_authorized_operations(operations)
                        .with_group_state(str_bytes(state))
                        .with_protocol_type(str_bytes(&protocol_type))
                        .with_protocol_data(str_bytes(&protocol))
                        .with_members(members)
                }
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

pub async fn delete(broker: &Arc<Broker>, ctx: &RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let authz = ctx.authz(broker);
    let mut results = Vec::new();
    for id in &req.groups_names {
        let group_id = id.0.as_str().to_string();
        if !authz.allows(acl::DELETE, acl::GROUP, &group_id) {
            let error = ResponseError::GroupAuthorizationFailed.code();
            results.push(DeletableGroupResult::default().with_group_id(id.clone()).with_error_code(error));
            continue;
        }
        if let Err(e) = broker.groups.check_coordinator(&group_id) {
            results.push(DeletableGroupResult::default().with_group_id(id.clone()).with_error_code(e.code()));
            continue;
        }
        let outcome = broker.groups.delete_group(&broker.topics, &group_id);
        let error = match outcome {
            Ok(written) => broker.groups.sync_to_disk(&broker.flusher, written).await.err().map_or(0, |e| e.code()),
            Err(e) => e.code(),
        };
        results.push(DeletableGroupResult::default().with_group_id(id.clone()).with_error_code(error));
    }
    DeleteGroupsResponse::default().with_results(results)
}
