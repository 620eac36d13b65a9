//! The group coordinator's operations on KIP-848 consumer groups for the handlers
//! (ConsumerGroupHeartbeat, ConsumerGroupDescribe, and the consumer-group side of ListGroups,
//! OffsetCommit, OffsetFetch and DeleteGroups). Each takes the coordinator's lock itself,
//! appends the records of what changed to the group's `__consumer_offsets` partition under it,
//! and returns plain data plus the write for the caller to make durable before answering.
//!
//! A group id names either a classic group (`Inner::groups`) or a consumer group
//! (`Inner::consumer`): a heartbeat for an empty classic group replaces it (its offsets stay),
//! a non-empty one is upgraded online (`migration.rs`), and a consumer group whose last
//! consumer-protocol member leaves while classic members remain is downgraded back.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::error::ResponseError;

use super::consumer::records::{self as crecords, ConsumerKey, ConsumerValue, Rec};
use super::consumer::{assignor, state, Answer, Assignment, ConsumerGroup, Heartbeat, Member, Refusal, Settings};
use super::records::Key;
use super::{api::Written, GroupCoordinator, GroupState, Inner, Storage};
use crate::config::Properties;
use crate::dynconf::group as group_config;
use crate::metadata::image::MetadataImage;
use crate::metadata::TopicRegistry;

/// `group.consumer.*` with Kafka 4.1's defaults.
pub fn settings(p: &Properties) -> Settings {
    let int = |k: &str, d: i64| p.get(k).and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(d);
    let assignors = p
        .get("group.consumer.assignors")
        .map(|v| {
            v.split(',')
                .map(|a| a.trim())
                .filter(|a| !a.is_empty())
                .map(|a| match a.rsplit('.').next().unwrap_or(a) {
                    "UniformAssignor" => assignor::UNIFORM.to_string(),
                    "RangeAssignor" => assignor::RANGE.to_string(),
                    other => other.to_lowercase(),
                })
                .filter(|a| a == assignor::UNIFORM || a == assignor::RANGE)
                .collect::<Vec<_>>()
        })
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| vec![assignor::UNIFORM.into(), assignor::RANGE.into()]);
    let policy = p.get("group.consumer.migration.policy").map_or("bidirectional".into(), |v| v.trim().to_lowercase());
    Settings {
        upgrade: policy == "bidirectional" || policy == "upgrade",
        downgrade: policy == "bidirectional" || policy == "downgrade",
        session_timeout_ms: int("group.consumer.session.timeout.ms", 45_000) as i32,
        heartbeat_interval_ms: int("group.consumer.heartbeat.interval.ms", 5000) as i32,
        max_size: int("group.consumer.max.size", i32::MAX as i64).max(1) as usize,
        assignors,
    }
}

/// Every topic of the registry, as the assignors see them.
pub fn topic_view(topics: &TopicRegistry) -> state::TopicView {
    topics
        .all()
        .into_iter()
        .map(|t| (t.name.clone(), state::TopicInfo { id: t.id, partitions: t.partitions.len() as i32 }))
        .collect()
}

/// Applies one replayed consumer-group record.
pub fn replay(inner: &mut Inner, key: &ConsumerKey, value: Option<&[u8]>) {
    let decoded = match value {
        None => None,
        Some(v) => match ConsumerValue::decode(key.kind, key.member.as_deref(), v) {
            Some(d) => Some(d),
            None => {
                tracing::warn!(group = %key.group, kind = key.kind, "undecodable consumer group record skipped");
                return;
            }
        },
    };
    if key.kind == crecords::GROUP_METADATA && decoded.is_none() {
        inner.consumer.remove(&key.group);
        return;
    }
    if decoded.is_none() && !inner.consumer.contains_key(&key.group) {
        return;
    }
    inner.groups.remove(&key.group);
    let group = inner.consumer.entry(key.group.clone()).or_insert_with(|| ConsumerGroup::new(&key.group));
    group.apply(key, decoded);
}

/// A ConsumerGroupHeartbeat's request-level checks (Kafka's
/// throwIfConsumerGroupHeartbeatRequestIsInvalid).
pub fn validate(group_id: &str, hb: &Heartbeat, version: i16, settings: &Settings) -> Result<(), Refusal> {
    let invalid = |m: &str| Err((ResponseError::InvalidRequest, m.to_string()));
    if group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if hb.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if hb.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    match hb.member_epoch {
        e if e > 0 || e == -1 => {
            if hb.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
        0 => {
            if version >= 1 && hb.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if hb.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if hb.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if hb.subscribed_topic_names.is_none() && hb.subscribed_topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        -2 => {
            if hb.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
            if hb.instance_id.is_none() {
                return invalid("InstanceId can't be null.");
            }
        }
        _ => return invalid("MemberEpoch is invalid."),
    }
    if let Some(a) = &hb.server_assignor {
        if !settings.assignors.contains(a) {
            return Err((
                ResponseError::UnsupportedAssignor,
                format!("ServerAssignor {a} is not supported. Supported assignors: {}.", settings.assignors.join(", ")),
            ));
        }
    }
    if let Some(re) = hb.subscribed_topic_regex.as_deref().filter(|r| !r.is_empty()) {
        if let Err(e) = regex::Regex::new(re) {
            return Err((
                ResponseError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{re}` is not a valid regular expression: {e}."),
            ));
        }
    }
    Ok(())
}

/// A consumer group as ConsumerGroupDescribe shows it.
pub struct DescribedConsumerGroup {
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    /// Members with their target assignment.
    pub members: Vec<(Member, Assignment)>,
}

impl GroupCoordinator {
    /// Takes the per-group configs (GROUP config resources) of `image`, which the next
    /// heartbeat of each group uses, as Kafka's coordinator does.
    pub fn adopt_configs(&self, image: &MetadataImage) {
        let configs: HashMap<String, Properties> = image
            .configs
            .iter()
            .filter(|((kind, _), set)| *kind == group_config::RESOURCE && !set.is_empty())
            .map(|((_, name), set)| (name.clone(), set.clone()))
            .collect();
        let mut current = self.group_configs.write().unwrap_or_else(|p| p.into_inner());
        if **current != configs {
            *current = Arc::new(configs);
        }
    }

    /// The configs set on `group` (empty when none).
    pub fn configs_of(&self, group: &str) -> Properties {
        let configs = self.group_configs.read().unwrap_or_else(|p| p.into_inner());
        configs.get(group).cloned().unwrap_or_default()
    }

    /// Every group with configs set, by name.
    pub fn groups_with_configs(&self) -> Vec<String> {
        let configs = self.group_configs.read().unwrap_or_else(|p| p.into_inner());
        let mut names: Vec<String> = configs.keys().cloned().collect();
        names.sort();
        names
    }

    /// The consumer-group settings of `group`: the broker's, with the group's own session
    /// timeout and heartbeat interval where it has them (Kafka's `GroupConfig`).
    pub(super) fn settings_for(&self, group: &str) -> Cow<'_, Settings> {
        let configs = self.group_configs.read().unwrap_or_else(|p| p.into_inner());
        let Some(set) = configs.get(group) else { return Cow::Borrowed(&self.config.consumer) };
        let own = |name: &str| set.get(name).and_then(|v| v.trim().parse::<i32>().ok());
        let (session, heartbeat) =
            (own(group_config::CONSUMER_SESSION_TIMEOUT_MS), own(group_config::CONSUMER_HEARTBEAT_INTERVAL_MS));
        if session.is_none() && heartbeat.is_none() {
            return Cow::Borrowed(&self.config.consumer);
        }
        let mut settings = self.config.consumer.clone();
        settings.session_timeout_ms = session.unwrap_or(settings.session_timeout_ms);
        settings.heartbeat_interval_ms = heartbeat.unwrap_or(settings.heartbeat_interval_ms);
        Cow::Owned(settings)
    }

    /// The heartbeat interval `group`'s members are given.
    pub fn heartbeat_interval_ms(&self, group: &str) -> i32 {
        self.settings_for(group).heartbeat_interval_ms
    }

    /// Appends consumer-group records to the group's offsets partition.
    pub(super) fn append_consumer(&self, topics: &TopicRegistry, group: &str, recs: Vec<Rec>) -> Written {
        if recs.is_empty() {
            return Ok(None);
        }
        self.append_encoded(topics, group, recs)
    }

    /// ConsumerGroupHeartbeat (after `validate`).
    pub fn consumer_heartbeat(
        &self,
        topics: &TopicRegistry,
        group_id: &str,
        mut hb: Heartbeat,
    ) -> Result<(Answer, Written), Refusal> {
        if hb.member_id.is_empty() {
            hb.member_id = uuid::Uuid::from_bytes(crate::metadata::random_bytes()).to_string();
        }
        let view = topic_view(topics);
        let settings = self.settings_for(group_id);
        let mut inner = self.lock();
        let mut recs = Vec::new();
        if !inner.consumer.contains_key(group_id) {
            if hb.member_epoch != 0 {
                return Err((ResponseError::GroupIdNotFound, format!("Consumer group {group_id} not found.")));
            }
            if let Some(classic) = inner.groups.get(group_id) {
                if classic.state != GroupState::Empty || !classic.pending.is_empty() {
                    // Kafka's online upgrade (or its refusal).
                    self.upgrade(&mut inner, group_id, &view, &mut recs)?;
                } else {
                    inner.groups.remove(group_id);
                    let tombstone = (Key::Group { group: group_id.to_string() }.encode(), None);
                    recs.push(tombstone);
                }
            }
        }
        let had_consumer_members = inner.consumer.get(group_id).is_some_and(|g| g.has_consumer_protocol_members());
        let group = inner.consumer.entry(group_id.to_string()).or_insert_with(|| ConsumerGroup::new(group_id));
        let result = group.heartbeat(&hb, &view, &settings, Instant::now(), &mut recs);
        if result.is_err() && group.members.is_empty() && group.group_epoch == 0 {
            inner.consumer.remove(group_id);
        }
        self.maybe_downgrade(&mut inner, group_id, had_consumer_members, &view, &mut recs);
        let written = self.append_consumer(topics, group_id, recs);
        drop(inner);
        let answer = result?;
        Ok((answer, written))
    }

    /// Consumer-group timers and metadata changes, then persistence of what changed.
    pub async fn consumer_tick(&self, storage: &Storage<'_>) {
        let writes: Vec<(String, Vec<Rec>)> = {
            let mut inner = self.lock();
            if inner.consumer.is_empty() {
                return;
            }
            let view = topic_view(storage.topics);
            let now = Instant::now();
            let ids: Vec<String> = inner.consumer.keys().cloned().collect();
            let mut writes = Vec::new();
            for id in ids {
                let mut recs = Vec::new();
                let g = inner.consumer.get_mut(&id).expect("listed above");
                let had = g.has_consumer_protocol_members();
                g.tick(&view, &self.settings_for(&id), now, &mut recs);
                self.maybe_downgrade(&mut inner, &id, had, &view, &mut recs);
                if !recs.is_empty() {
                    writes.push((id, recs));
                }
            }
            writes
        };
        for (group, recs) in writes {
            match self.append_consumer(storage.topics, &group, recs) {
                Ok(w) => {
                    let _ = self.sync_to_disk(storage.flusher, w).await;
                }
                Err(e) => tracing::error!(group = %group, error = %e, "cannot persist consumer group"),
            }
        }
    }

    /// ConsumerGroupDescribe of one group: GROUP_ID_NOT_FOUND when it is not a consumer group.
    pub fn consumer_describe(&self, group_id: &str) -> Result<DescribedConsumerGroup, Refusal> {
        let inner = self.lock();
        let Some(g) = inner.consumer.get(group_id) else {
            // A group with committed offsets only is an empty classic group to Kafka.
            let msg = if inner.groups.contains_key(group_id) || inner.offsets.contains_key(group_id) {
                format!("Group {group_id} is not a consumer group.")
            } else {
                format!("Group {group_id} not found.")
            };
            return Err((ResponseError::GroupIdNotFound, msg));
        };
        Ok(DescribedConsumerGroup {
            state: g.state(),
            group_epoch: g.group_epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: g.assignor_name(&self.config.consumer),
            members: g
                .members
                .values()
                .map(|m| (m.clone(), g.target.get(&m.id).cloned().unwrap_or_default()))
                .collect(),
        })
    }

    /// Whether `group_id` is a consumer group, and its state if so.
    pub fn consumer_state(&self, group_id: &str) -> Option<&'static str> {
        self.lock().consumer.get(group_id).map(|g| g.state())
    }

    /// OffsetCommit / TxnOffsetCommit check for a consumer group (Kafka's
    /// ConsumerGroup.validateOffsetCommit); `None` when the group is not a consumer group.
    pub fn consumer_check_commit(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        member_epoch: i32,
        transactional: bool,
        version: i16,
    ) -> Option<Result<(), ResponseError>> {
        let inner = self.lock();
        let g = inner.consumer.get(group_id)?;
        if member_epoch < 0 && g.members.is_empty() {
            return Some(Ok(()));
        }
        if transactional && member_epoch == -1 && member_id.is_empty() && instance_id.is_none() {
            return Some(Ok(()));
        }
        let Some(m) = g.members.get(member_id) else { return Some(Err(ResponseError::UnknownMemberId)) };
        if m.classic.is_some() {
            // A classic member commits with its generation: its member epoch.
            return Some(if m.member_epoch != member_epoch { Err(ResponseError::IllegalGeneration) } else { Ok(()) });
        }
        if !transactional && version < 9 {
            return Some(Err(ResponseError::UnsupportedVersion));
        }
        Some(if m.member_epoch != member_epoch { Err(ResponseError::StaleMemberEpoch) } else { Ok(()) })
    }

    /// OffsetFetch v9+ check for a consumer group (Kafka's validateOffsetFetch).
    pub fn consumer_check_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        let inner = self.lock();
        let Some(g) = inner.consumer.get(group_id) else { return Ok(()) };
        if member_id.is_none() && member_epoch < 0 {
            return Ok(());
        }
        match g.members.get(member_id.unwrap_or_default()) {
            None => Err(ResponseError::UnknownMemberId),
            Some(m) if m.member_epoch != member_epoch => Err(ResponseError::StaleMemberEpoch),
            Some(_) => Ok(()),
        }
    }

    /// DeleteGroups of a consumer group: `None` when it is not one; NON_EMPTY_GROUP with
    /// members; else its offsets and records tombstoned.
    pub fn consumer_delete(&self, topics: &TopicRegistry, group_id: &str) -> Option<Written> {
        let mut inner = self.lock();
        let g = inner.consumer.get(group_id)?;
        if !g.members.is_empty() {
            return Some(Err(ResponseError::NonEmptyGroup));
        }
        inner.consumer.remove(group_id);
        let offsets = inner.offsets.remove(group_id).unwrap_or_default();
        let mut recs: Vec<Rec> = offsets
            .into_keys()
            .map(|(topic, partition)| (Key::Offset { group: group_id.to_string(), topic, partition }.encode(), None))
            .collect();
        recs.extend(crecords::group_tombstones(group_id));
        Some(self.append_consumer(topics, group_id, recs))
    }

    /// Topics a consumer group's members subscribe to (OffsetDelete refuses those).
    pub fn consumer_subscribed(&self, topics: &TopicRegistry, group_id: &str) -> Option<BTreeSet<String>> {
        let view = topic_view(topics);
        let inner = self.lock();
        let g = inner.consumer.get(group_id)?;
        Some(g.members.values().flat_map(|m| ConsumerGroup::member_topics(m, &view)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;
    use crate::group::GroupConfig;
    use crate::log::flusher::Flusher;

    #[tokio::test]
    async fn a_consumer_group_survives_a_restart_with_its_epochs_and_assignments() {
        let dir = tempfile::tempdir().unwrap();
        let mut props = Properties::new();
        props.insert("log.dirs".into(), dir.path().display().to_string());
        props.insert("offsets.topic.num.partitions".into(), "3".into());
        let config = BrokerConfig::from_properties(props).unwrap();
        let topics = TopicRegistry::open(&config).unwrap();
        topics.create("t", 4, Properties::new()).unwrap();
        let flusher = Flusher::start();
        let coordinator = GroupCoordinator::new(GroupConfig::from_broker(&config));
        let join = |id: &str| Heartbeat {
            member_id: id.into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            owned: Some(vec![]),
            ..Default::default()
        };
        for id in ["a", "b"] {
            let (_, written) = coordinator.consumer_heartbeat(&topics, "g", join(id)).unwrap();
            coordinator.sync_to_disk(&flusher, written.unwrap()).await.unwrap();
        }
        let before = coordinator.lock().consumer["g"].clone();
        assert_eq!(before.group_epoch, 2);
        let reloaded = GroupCoordinator::new(GroupConfig::from_broker(&config));
        reloaded.load(&topics).unwrap();
        let inner = reloaded.lock();
        let after = &inner.consumer["g"];
        assert_eq!((after.group_epoch, after.assignment_epoch), (before.group_epoch, before.assignment_epoch));
        assert_eq!(after.members, before.members);
        assert_eq!(after.target, before.target);
        assert!(!inner.groups.contains_key("g"));
        drop(inner);
        // A member's next heartbeat carries on at its epoch.
        let hb = Heartbeat { member_id: "a".into(), member_epoch: 1, rebalance_timeout_ms: -1, ..Default::default() };
        let (answer, _) = reloaded.consumer_heartbeat(&topics, "g", hb).unwrap();
        assert_eq!(answer.member_epoch, 1);
    }
}
