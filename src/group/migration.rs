//! Online migration between classic and consumer groups at the coordinator (Kafka 4.1's
//! `group.consumer.migration.policy`, bidirectional by default): the upgrade of a non-empty
//! classic group of consumers when a consumer-protocol member joins it, the classic membership
//! APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) on a consumer group's classic members,
//! and the downgrade back to a classic group when its last consumer-protocol member leaves.
//! The group-level rules are `consumer/classic.rs`'s; here the groups change kind under the
//! coordinator's lock, with the records of the change for the caller to make durable.
//!
//! On disk: an upgrade writes the classic group's GroupMetadata tombstone, then the consumer
//! group's records; a downgrade writes the consumer group's tombstones (Kafka's order: current
//! assignments, target assignments, target metadata, member metadata, partition metadata, group
//! metadata), then the classic group's GroupMetadata. Replay rebuilds either kind from them.

use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;

use super::api::Written;
use super::consumer::classic::{ClassicJoin, PROTOCOL_TYPE};
use super::consumer::records::{self as crecords, Rec};
use super::consumer::{ConsumerGroup, Refusal, TopicView};
use super::consumer_api::topic_view;
use super::records::Key;
use super::state::Downgraded;
use super::{group_value, Group, GroupCoordinator, Inner, JoinRequest, JoinResult, SyncRequest, SyncResult};
use crate::log::now_ms;
use crate::metadata::TopicRegistry;

/// Per leaving member: (member id, instance id, error code).
pub type LeaveResults = Vec<(String, Option<String>, i16)>;

impl GroupCoordinator {
    /// Turns the non-empty classic group `group_id` into a consumer group for a joining
    /// consumer-protocol member (its records go to `recs`), or refuses as Kafka does.
    pub(super) fn upgrade(
        &self,
        inner: &mut Inner,
        group_id: &str,
        view: &TopicView,
        recs: &mut Vec<Rec>,
    ) -> Result<(), Refusal> {
        let settings = &self.config.consumer;
        let classic = inner.groups.get(group_id).expect("a classic group to upgrade");
        let why = if !settings.upgrade {
            Some("online upgrade is disabled")
        } else if classic.protocol_type.as_deref() != Some(PROTOCOL_TYPE) {
            Some("the group does not use the consumer embedded protocol")
        } else if classic.members.len() > settings.max_size {
            Some("the group size exceeds the consumer group maximum size")
        } else {
            None
        };
        if let Some(why) = why {
            let msg = format!("Cannot upgrade classic group {group_id} to consumer group because {why}.");
            return Err((ResponseError::GroupIdNotFound, msg));
        }
        let mut records = Vec::new();
        let group = ConsumerGroup::from_classic(classic, view, Instant::now(), &mut records)
            .map_err(|msg| (ResponseError::GroupIdNotFound, msg))?;
        let mut classic = inner.groups.remove(group_id).expect("looked up above");
        // Requests parked in the classic rebalance: the members rejoin the consumer group.
        for m in classic.members.values_mut() {
            if let Some(w) = m.join_waiter.take() {
                let _ = w.send(JoinResult::error(ResponseError::RebalanceInProgress, &m.id));
            }
            if let Some(w) = m.sync_waiter.take() {
                let _ = w.send(SyncResult { error: ResponseError::RebalanceInProgress.code(), ..Default::default() });
            }
        }
        recs.push((Key::Group { group: group_id.to_string() }.encode(), None));
        recs.extend(records);
        tracing::info!(group = %group_id, epoch = group.group_epoch, members = group.members.len(),
            "classic group upgraded to a consumer group");
        inner.consumer.insert(group_id.to_string(), group);
        Ok(())
    }

    /// After members left a consumer group (or a classic static member replaced one): if the
    /// last consumer-protocol member went (it had one before) and classic members remain, the
    /// group becomes classic again, when the policy and `group.max.size` allow (a refused
    /// downgrade only logs, as Kafka's). It then rebalances (Kafka 4.1.0 skips that after a
    /// static replacement; its later patch releases rebalance when the subscription changed).
    pub(super) fn maybe_downgrade(
        &self,
        inner: &mut Inner,
        group_id: &str,
        had_consumer_members: bool,
        view: &TopicView,
        recs: &mut Vec<Rec>,
    ) {
        let Some(g) = inner.consumer.get(group_id) else { return };
        if !had_consumer_members || !g.all_classic() {
            return;
        }
        if !self.config.consumer.downgrade {
            tracing::info!(group = %group_id, "consumer group not downgraded: the online downgrade is disabled");
            return;
        }
        if g.members.len() > self.config.max_group_size {
            tracing::info!(group = %group_id, "consumer group not downgraded: more members than group.max.size");
            return;
        }
        let members = g
            .classic_members(view)
            .into_iter()
            .map(|(m, partitions)| {
                let classic = m.classic.clone().unwrap_or_else(|| unreachable!("all members are classic"));
                Downgraded {
                    id: m.id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: Duration::from_millis(classic.session_timeout_ms.max(0) as u64),
                    rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                    protocols: classic.protocols,
                    partitions,
                }
            })
            .collect();
        let classic = Group::downgraded(group_id, g.group_epoch, members, Instant::now(), now_ms());
        recs.extend(crecords::downgrade_tombstones(group_id, g.members.keys().map(String::as_str)));
        recs.push((Key::Group { group: group_id.to_string() }.encode(), Some(group_value(&classic).encode())));
        tracing::info!(group = %group_id, generation = classic.generation, members = classic.members.len(),
            "consumer group downgraded to a classic group");
        inner.consumer.remove(group_id);
        inner.groups.insert(group_id.to_string(), classic);
    }

    /// JoinGroup of a classic member when `group_id` is a non-empty consumer group (`None`:
    /// it is not one, the classic group path applies).
    pub fn consumer_group_join(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
        join: &JoinRequest,
    ) -> Option<(JoinResult, Written)> {
        let view = topic_view(topics);
        let mut inner = self.lock();
        let group = inner.consumer.get_mut(group_id).filter(|g| !g.members.is_empty())?;
        let req = ClassicJoin {
            member_id: join.member_id.clone(),
            new_member_id: uuid::Uuid::from_bytes(crate::metadata::random_bytes()).to_string(),
            instance_id: join.instance_id.clone(),
            client_id: join.client_id.clone(),
            client_host: join.client_host.clone(),
            session_timeout_ms: join.session_timeout.as_millis().min(i32::MAX as u128) as i32,
            rebalance_timeout_ms: join.rebalance_timeout.as_millis().min(i32::MAX as u128) as i32,
            protocol_type: join.protocol_type.clone(),
            protocols: join.protocols.clone(),
            require_known_member_id: join.require_known_member_id,
        };
        let had = group.has_consumer_protocol_members();
        let mut recs = Vec::new();
        let result = match group.classic_join(&req, &view, &self.settings_for(group_id), Instant::now(), &mut recs) {
            Ok(joined) => JoinResult {
                error: 0,
                generation: joined.generation,
                protocol_type: Some(PROTOCOL_TYPE.into()),
                protocol_name: Some(joined.protocol_name),
                leader: String::new(),
                member_id: joined.member_id,
                skip_assignment: false,
                members: Vec::new(),
            },
            Err(ResponseError::MemberIdRequired) => {
                JoinResult::error(ResponseError::MemberIdRequired, &req.new_member_id)
            }
            Err(e) => JoinResult::error(e, &join.member_id),
        };
        // A classic static member that took over the last consumer-protocol member's instance
        // id: the group turns classic (and rebalances: the joiner syncs after rejoining).
        self.maybe_downgrade(&mut inner, group_id, had, &view, &mut recs);
        drop(inner);
        Some((result, self.append_consumer(topics, group_id, recs)))
    }

    /// SyncGroup of a classic member of a consumer group (`None`: not a consumer group).
    pub fn consumer_group_sync(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
        req: SyncRequest<'_>,
    ) -> Option<SyncResult> {
        let view = topic_view(topics);
        let mut inner = self.lock();
        let group = inner.consumer.get_mut(group_id)?;
        let synced = if group.members.is_empty() {
            Err(ResponseError::UnknownMemberId)
        } else {
            group.classic_sync(req, &view, Instant::now())
        };
        Some(match synced {
            Ok(assignment) => SyncResult {
                error: 0,
                protocol_type: req.protocol_type.map(str::to_string),
                protocol_name: req.protocol_name.map(str::to_string),
                assignment,
            },
            Err(e) => SyncResult { error: e.code(), ..Default::default() },
        })
    }

    /// Heartbeat of a classic member of a consumer group (`None`: not a consumer group).
    pub fn consumer_group_heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Option<Result<(), ResponseError>> {
        let mut inner = self.lock();
        let group = inner.consumer.get_mut(group_id)?;
        if group.members.is_empty() {
            return Some(Err(ResponseError::UnknownMemberId));
        }
        Some(group.classic_heartbeat(member_id, instance_id, generation, Instant::now()))
    }

    /// LeaveGroup on a consumer group (`None`: not a consumer group): any member, by member id
    /// or instance id; may downgrade the group.
    pub fn consumer_group_leave(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
        leaving: Vec<(String, Option<String>)>,
    ) -> Option<(LeaveResults, Written)> {
        let view = topic_view(topics);
        let mut inner = self.lock();
        let group = inner.consumer.get_mut(group_id)?;
        let had = group.has_consumer_protocol_members();
        let mut recs = Vec::new();
        let codes = group.leave_members(&leaving, &view, &self.settings_for(group_id), &mut recs);
        self.maybe_downgrade(&mut inner, group_id, had, &view, &mut recs);
        drop(inner);
        let results = leaving.into_iter().zip(codes).map(|((m, i), code)| (m, i, code)).collect();
        Some((results, self.append_consumer(topics, group_id, recs)))
    }
}

#[cfg(test)]
#[path = "migration_tests.rs"]
mod tests;
