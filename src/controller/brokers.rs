//! Broker registration, heartbeats, fencing and controlled shutdown: Kafka's
//! `ClusterControlManager.registerBroker`, `BrokerHeartbeatManager` and
//! `ReplicationControlManager.processBrokerHeartbeat` / `maybeFenceOneStaleBroker`.
//!
//! `BrokerSessions` is the controller's in-memory state about brokers that is not in the
//! metadata image: when each broker last heartbeated, the metadata offset it reported, the
//! offset of its registration record and, once it asked to shut down, the offset of the records
//! that moved its partitions away. A newly elected controller starts it with `touch_all`, giving
//! every registered broker a full session, as Kafka does.
//!
//! A broker moves between FENCED, UNFENCED and CONTROLLED_SHUTDOWN (and is answered "shut down
//! now"): fenced until it caught up with its registration record, unfenced while it heartbeats
//! within `broker.session.timeout.ms`, in controlled shutdown from its first `want_shut_down`
//! until it leads nothing and every active broker has seen the records moving its partitions.
//! Fencing, controlled shutdown and a new incarnation take the broker out of every ISR and
//! leadership (with ELR on, a new incarnation after an unclean shutdown out of every ELR too);
//! unfencing elects it where a partition has no leader.
//!
//! Records are Kafka 4.1's (metadata.version >= 3.3-IV2): fencing and unfencing are
//! BrokerRegistrationChangeRecords. A registration's records start with its RegisterBrokerRecord,
//! so the new broker epoch is the offset of that record (Kafka writes the ISR removals of a new
//! incarnation first and uses the batch's first offset: same epoch, same atomic batch).
//!
//! A broker is also fenced, as by a lapsed session, when the connection that carried its
//! heartbeats closed and it did not heartbeat again within a grace period: twice the time
//! between its last two heartbeats, at least `MIN_DISCONNECT_GRACE_MS`, never more than the
//! session timeout. A process killed with SIGKILL has its connections closed by its OS at once,
//! so it is fenced after about a second instead of after `broker.session.timeout.ms`; a live
//! broker whose connection dropped reconnects and heartbeats within the grace (its next beat is
//! due within one interval) and keeps its session. (Kafka's controller waits for the session
//! timeout only.)
//!
//! Invariants: a session exists for every broker this controller registered or saw at
//! `touch_all`; a session's fencing mirrors the image's once the returned records are applied; a
//! controlled-shutdown offset is only kept for an unfenced broker.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerRegistrationRequest};
use uuid::Uuid;

use super::partition_change::{leader_and_isr_updates, leads_any, BrokerEvent};
use super::ControllerConfig;
use crate::metadata::image::MetadataImage;
use crate::metadata::print_uuid;
use crate::metadata::records::{
    BrokerEndpoint, BrokerFeature, BrokerRegistrationChangeRecord, MetadataRecord, RegisterBrokerRecord,
    UnregisterBrokerRecord,
};

const METADATA_VERSION: &str = "metadata.version";
/// Kafka's `MetadataVersion.MINIMUM_KRAFT_VERSION` (3.0-IV1) level, assumed for a broker that
/// does not say which metadata versions it supports.
const MINIMUM_KRAFT_METADATA_VERSION: i16 = 1;
/// The first `metadata.version` level with directory assignment (3.7-IV2).
const DIRECTORY_ASSIGNMENT_METADATA_VERSION: i16 = 17;

/// Whether the image's `metadata.version` has directory assignment (3.7-IV2 and later).
pub fn directory_assignment_supported(image: &MetadataImage) -> bool {
    image.features.get(METADATA_VERSION).copied().unwrap_or(MINIMUM_KRAFT_METADATA_VERSION)
        >= DIRECTORY_ASSIGNMENT_METADATA_VERSION
}
/// Kafka's `DirectoryId.reserved`: the first 100 ids.
const RESERVED_DIRECTORY_IDS: u128 = 100;

/// What a heartbeat is answered (the caller adds the error code and throttle time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub in_controlled_shutdown: bool,
    pub should_shut_down: bool,
}

/// The least grace between the close of a broker's heartbeat connection and its fencing.
pub const MIN_DISCONNECT_GRACE_MS: i64 = 1_000;

/// Kafka's `BrokerControlState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Fenced,
    Unfenced,
    ControlledShutdown,
    ShutdownNow,
}

impl State {
    fn fenced(self) -> bool {
        matches!(self, State::Fenced | State::ShutdownNow)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Session {
    incarnation_id: Uuid,
    last_contact_ms: i64,
    /// The metadata offset the broker last reported (-1: none yet).
    metadata_offset: i64,
    /// The offset of the broker's last RegisterBrokerRecord.
    registration_offset: i64,
    fenced: bool,
    /// In controlled shutdown: the last offset of the records that moved its partitions away.
    controlled_shutdown_offset: Option<i64>,
    /// The connection the broker's last heartbeat came on (none: not known).
    connection: Option<u64>,
    /// When that connection closed, while no heartbeat came since.
    disconnected_ms: Option<i64>,
    /// When the broker last heartbeated, and the time between its last two heartbeats.
    last_heartbeat_ms: Option<i64>,
    heartbeat_gap_ms: Option<i64>,
}

impl Session {
    fn new(incarnation_id: Uuid, now_ms: i64, registration_offset: i64, fenced: bool) -> Session {
        Session {
            incarnation_id,
            last_contact_ms: now_ms,
            metadata_offset: -1,
            registration_offset,
            fenced,
            controlled_shutdown_offset: None,
            connection: None,
            disconnected_ms: None,
            last_heartbeat_ms: None,
            heartbeat_gap_ms: None,
        }
    }

    /// When this session lapses: its timeout after the last contact, or earlier, the grace
    /// after its heartbeat connection closed.
    fn lapses_at(&self, timeout_ms: i64) -> i64 {
        let lapses = self.last_contact_ms + timeout_ms;
        let Some(closed) = self.disconnected_ms else { return lapses };
        let grace = self.heartbeat_gap_ms.map_or(timeout_ms, |gap| (2 * gap).max(MIN_DISCONNECT_GRACE_MS));
        lapses.min(closed + grace.min(timeout_ms))
    }
}

/// The controller's view of its brokers' sessions.
#[derive(Debug, Clone)]
pub struct BrokerSessions {
    config: ControllerConfig,
    sessions: BTreeMap<i32, Session>,
}

type Refusal = (ResponseError, String);

impl BrokerSessions {
    pub fn new(config: ControllerConfig) -> BrokerSessions {
        assert!(config.session_timeout_ms > 0);
        BrokerSessions { config, sessions: BTreeMap::new() }
    }

    /// A newly active controller: every registered broker gets a full session from `now_ms`.
    pub fn touch_all(&mut self, image: &MetadataImage, now_ms: i64) {
        self.sessions.clear();
        for b in image.brokers.values() {
            // The image does not keep the offset of the registration record; its epoch is that
            // offset unless the same incarnation registered again since.
            let session = Session::new(b.incarnation_id, now_ms, b.epoch, b.fenced);
            self.sessions.insert(b.id, session);
        }
    }

    /// BrokerRegistration: the records to append at `next_offset` (the log end offset) and the
    /// broker epoch to answer, or the error code and message to answer.
    pub fn register(
        &mut self,
        image: &MetadataImage,
        cluster_id: &str,
        request: &BrokerRegistrationRequest,
        next_offset: i64,
        now_ms: i64,
    ) -> Result<(Vec<MetadataRecord>, i64), Refusal> {
        let broker_id = request.broker_id.0;
        if request.cluster_id.as_str() != cluster_id {
            return Err((
                ResponseError::InconsistentClusterId,
                format!("Expected cluster ID {cluster_id}, but got cluster ID {}", request.cluster_id.as_str()),
            ));
        }
        let existing = image.brokers.get(&broker_id);
        if let Some(existing) = existing {
            if self.has_valid_session(broker_id, now_ms) && existing.incarnation_id != request.incarnation_id {
                return Err((
                    ResponseError::DuplicateBrokerRegistration,
                    "Another broker is registered with that broker id.".to_string(),
                ));
            }
        }
        if request.is_migrating_zk_broker {
            return Err((
                ResponseError::BrokerIdNotRegistered,
                "Controller does not support registering ZK brokers.".to_string(),
            ));
        }
        let directories = directory_assignment_supported(image);
        if directories {
            check_log_dirs(image, broker_id, &request.log_dirs)?;
        }
        let features = check_features(image, request)?;
        let same_incarnation = existing.is_some_and(|e| e.incarnation_id == request.incarnation_id);
        let mut record = RegisterBrokerRecord {
            broker_id,
            is_migrating_zk_broker: false,
            incarnation_id: request.incarnation_id,
            broker_epoch: next_offset,
            end_points: request
                .listeners
                .iter()
                .map(|l| BrokerEndpoint {
                    name: l.name.to_string(),
                    host: l.host.to_string(),
                    port: l.port,
                    security_protocol: l.security_protocol,
                    ..Default::default()
                })
                .collect(),
            features,
            rack: request.rack.as_ref().map(|r| r.to_string()),
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: if directories { request.log_dirs.clone() } else { Vec::new() },
            ..Default::default()
        };
        let mut records = Vec::new();
        match existing.filter(|_| same_incarnation) {
            // The same process registering again (e.g. after a controller change): it keeps its
            // epoch and state.
            Some(e) => {
                record.broker_epoch = e.epoch;
                record.fenced = e.fenced;
                record.in_controlled_shutdown = e.in_controlled_shutdown;
                records.push(MetadataRecord::RegisterBroker(record));
            }
            // A new incarnation: the previous one leaves every ISR (Kafka's handleBrokerShutdown).
            // With ELR on, one that did not shut down cleanly (its PreviousBrokerEpoch is not
            // the registered epoch, KIP-966) leaves every ELR too.
            None => {
                let clean = request.previous_broker_epoch == existing.map_or(-2, |e| e.epoch);
                let event = if !clean && super::elr::enabled(image) {
                    BrokerEvent::UncleanShutdown(broker_id)
                } else {
                    BrokerEvent::Leaves(broker_id)
                };
                records.push(MetadataRecord::RegisterBroker(record));
                records.extend(leader_and_isr_updates(image, &self.config, event));
                self.sessions.remove(&broker_id);
            }
        }
        let MetadataRecord::RegisterBroker(registered) = &records[0] else { unreachable!() };
        let (epoch, fenced) = (registered.broker_epoch, registered.fenced);
        let session = self
            .sessions
            .entry(broker_id)
            .or_insert_with(|| Session::new(request.incarnation_id, now_ms, next_offset, fenced));
        // Kafka's BrokerHeartbeatManager.register: the reported offset survives only a change
        // of fencing.
        let metadata_offset = if session.fenced != fenced { session.metadata_offset } else { -1 };
        session.incarnation_id = request.incarnation_id;
        session.registration_offset = next_offset;
        touch(session, fenced, metadata_offset, now_ms);
        Ok((records, epoch))
    }

    /// BrokerHeartbeat, received on `connection` (an id unique to it): the records to append at
    /// `next_offset` (the log end offset) and the answer, or STALE_BROKER_EPOCH (also for an
    /// unregistered broker, as Kafka).
    pub fn heartbeat(
        &mut self,
        image: &MetadataImage,
        request: &BrokerHeartbeatRequest,
        connection: Option<u64>,
        next_offset: i64,
        now_ms: i64,
    ) -> Result<(Vec<MetadataRecord>, HeartbeatAnswer), ResponseError> {
        let broker_id = request.broker_id.0;
        let Some(broker) = image.brokers.get(&broker_id) else { return Err(ResponseError::StaleBrokerEpoch) };
        if broker.epoch != request.broker_epoch {
            return Err(ResponseError::StaleBrokerEpoch);
        }
        let (broker_epoch, image_in_controlled_shutdown) = (broker.epoch, broker.in_controlled_shutdown);
        if !self.sessions.contains_key(&broker_id) {
            // Registered before this controller's sessions were started (touch_all missed it).
            let mut fresh = BrokerSessions::new(self.config);
            fresh.touch_all(image, now_ms);
            self.sessions.insert(broker_id, fresh.sessions.remove(&broker_id).expect("registered"));
        }
        let lowest_active_offset = self.lowest_active_offset();
        let session = &self.sessions[&broker_id];
        let current = current_state(session);
        let next = next_state(session, current, request, || leads_any(image, broker_id), lowest_active_offset);
        let mut records = Vec::new();
        if current != next {
            match next {
                State::Fenced | State::ShutdownNow => records = self.fence_records(image, broker_id),
                State::Unfenced => {
                    records.push(registration_change(broker_id, broker_epoch, -1, 0));
                    records.extend(leader_and_isr_updates(image, &self.config, BrokerEvent::Joins(broker_id)));
                }
                State::ControlledShutdown => {
                    if !image_in_controlled_shutdown {
                        records.push(registration_change(broker_id, broker_epoch, 0, 1));
                    }
                    records.extend(leader_and_isr_updates(image, &self.config, BrokerEvent::Leaves(broker_id)));
                }
            }
        }
        if records.is_empty() {
            // Computed from the same image, these could repeat the changes above: left to the
            // next heartbeat, which reports the offline directories again.
            records = directories_offline(image, &self.config, broker_id, &request.offline_log_dirs);
        }
        let session = self.sessions.get_mut(&broker_id).expect("present");
        touch(session, next.fenced(), request.current_metadata_offset, now_ms);
        session.heartbeat_gap_ms = session.last_heartbeat_ms.map(|last| now_ms - last).or(session.heartbeat_gap_ms);
        session.last_heartbeat_ms = Some(now_ms);
        session.connection = connection;
        session.disconnected_ms = None;
        if next == State::ControlledShutdown && session.controlled_shutdown_offset.is_none() {
            // The offset of the last record of this heartbeat's batch (Kafka's batch end offset).
            session.controlled_shutdown_offset = Some(next_offset + records.len() as i64 - 1);
        }
        let answer = HeartbeatAnswer {
            is_caught_up: request.current_metadata_offset >= session.registration_offset,
            is_fenced: next.fenced(),
            in_controlled_shutdown: next == State::ControlledShutdown,
            should_shut_down: next == State::ShutdownNow,
        };
        Ok((records, answer))
    }

    /// The connection `connection` closed: a broker whose heartbeats came on it is fenced
    /// unless it heartbeats again within the grace (`expire`). Returns those brokers.
    pub fn connection_closed(&mut self, connection: u64, now_ms: i64) -> Vec<i32> {
        let mut brokers = Vec::new();
        for (&id, session) in &mut self.sessions {
            if !session.fenced && session.connection == Some(connection) && session.disconnected_ms.is_none() {
                session.disconnected_ms = Some(now_ms);
                brokers.push(id);
            }
        }
        brokers
    }

    /// Fences the unfenced broker whose session lapsed longest ago (its timeout, or the grace
    /// after its heartbeat connection closed), if any (one at a time, so the effect of each
    /// fencing is seen before the next, as Kafka's `maybeFenceOneStaleBroker`).
    pub fn expire(&mut self, image: &MetadataImage, now_ms: i64) -> Vec<MetadataRecord> {
        let timeout_ms = self.config.session_timeout_ms;
        let stale = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.fenced && s.lapses_at(timeout_ms) < now_ms)
            .min_by_key(|(&id, s)| (s.lapses_at(timeout_ms), id))
            .map(|(&id, _)| id);
        let Some(broker_id) = stale else { return Vec::new() };
        let session = self.sessions.get_mut(&broker_id).expect("present");
        // Before the session's end: its heartbeat connection closed and no heartbeat came since.
        let closed_ms_ago = session
            .disconnected_ms
            .filter(|_| session.last_contact_ms + timeout_ms >= now_ms)
            .map(|closed| now_ms - closed);
        tracing::info!(
            broker = broker_id,
            silent_ms = now_ms - session.last_contact_ms,
            ?closed_ms_ago,
            "broker session lapsed: fencing the broker"
        );
        session.fenced = true;
        session.controlled_shutdown_offset = None;
        session.disconnected_ms = None;
        if !image.brokers.contains_key(&broker_id) {
            // Unregistered meanwhile: nothing to fence in the image.
            self.sessions.remove(&broker_id);
            return Vec::new();
        }
        self.fence_records(image, broker_id)
    }

    /// When `expire` should run next: the earliest time an unfenced session lapses.
    pub fn next_expiry_ms(&self) -> Option<i64> {
        let timeout_ms = self.config.session_timeout_ms;
        self.sessions.values().filter(|s| !s.fenced).map(|s| s.lapses_at(timeout_ms) + 1).min()
    }

    /// Kafka's `handleBrokerFenced`: the broker leaves every ISR and leadership, then is fenced.
    pub fn fence_records(&self, image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
        let epoch = image.brokers.get(&broker_id).expect("fencing a registered broker").epoch;
        let mut records = leader_and_isr_updates(image, &self.config, BrokerEvent::Leaves(broker_id));
        records.push(registration_change(broker_id, epoch, 1, 0));
        records
    }

    /// UnregisterBroker: the broker leaves every ISR and leadership, then its registration goes
    /// (Kafka's `handleBrokerUnregistered`); BROKER_ID_NOT_REGISTERED when unknown.
    pub fn unregister(&mut self, image: &MetadataImage, broker_id: i32) -> Result<Vec<MetadataRecord>, Refusal> {
        let Some(broker) = image.brokers.get(&broker_id) else {
            return Err((
                ResponseError::BrokerIdNotRegistered,
                format!("Broker ID {broker_id} is not currently registered"),
            ));
        };
        let mut records = leader_and_isr_updates(image, &self.config, BrokerEvent::Leaves(broker_id));
        records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id,
            broker_epoch: broker.epoch,
            ..Default::default()
        }));
        self.sessions.remove(&broker_id);
        Ok(records)
    }

    /// Whether `broker_id` has a live, unfenced session (Kafka's `hasValidSession`).
    pub fn has_valid_session(&self, broker_id: i32, now_ms: i64) -> bool {
        self.sessions
            .get(&broker_id)
            .is_some_and(|s| !s.fenced && s.lapses_at(self.config.session_timeout_ms) >= now_ms)
    }

    /// The lowest metadata offset reported by an unfenced broker not shutting down.
    fn lowest_active_offset(&self) -> i64 {
        let active = self.sessions.values().filter(|s| !s.fenced && s.controlled_shutdown_offset.is_none());
        active.map(|s| s.metadata_offset).min().unwrap_or(i64::MAX)
    }
}

/// Kafka's `BrokerHeartbeatManager.touch`.
fn touch(session: &mut Session, fenced: bool, metadata_offset: i64, now_ms: i64) {
    session.last_contact_ms = now_ms;
    session.metadata_offset = metadata_offset;
    session.fenced = fenced;
    if fenced {
        // A fenced broker leaves controlled shutdown: its next heartbeat shuts it down.
        session.controlled_shutdown_offset = None;
    }
}

fn current_state(session: &Session) -> State {
    if session.controlled_shutdown_offset.is_some() {
        debug_assert!(!session.fenced, "a fenced broker is not in controlled shutdown");
        State::ControlledShutdown
    } else if session.fenced {
        State::Fenced
    } else {
        State::Unfenced
    }
}

/// Kafka's `calculateNextBrokerState`.
fn next_state(
    session: &Session,
    current: State,
    request: &BrokerHeartbeatRequest,
    leads_any: impl Fn() -> bool,
    lowest_active_offset: i64,
) -> State {
    match current {
        State::Fenced if request.want_shut_down => State::ShutdownNow,
        State::Fenced if !request.want_fence && request.current_metadata_offset >= session.registration_offset => {
            State::Unfenced
        }
        State::Fenced => State::Fenced,
        State::Unfenced if request.want_fence && request.want_shut_down => State::ShutdownNow,
        State::Unfenced if request.want_fence => State::Fenced,
        State::Unfenced if request.want_shut_down && leads_any() => State::ControlledShutdown,
        State::Unfenced if request.want_shut_down => State::ShutdownNow,
        State::Unfenced => State::Unfenced,
        State::ControlledShutdown if leads_any() => State::ControlledShutdown,
        State::ControlledShutdown => {
            let offset = session.controlled_shutdown_offset.expect("in controlled shutdown");
            if offset <= lowest_active_offset {
                State::ShutdownNow
            } else {
                State::ControlledShutdown
            }
        }
        State::ShutdownNow => State::ShutdownNow,
    }
}

/// Kafka's `handleDirectoriesOffline`: the broker leaves the ISRs and leadership of the
/// partitions in its newly offline directories, and its registration keeps the others.
fn directories_offline(
    image: &MetadataImage,
    config: &ControllerConfig,
    broker_id: i32,
    offline: &[Uuid],
) -> Vec<MetadataRecord> {
    let broker = &image.brokers[&broker_id];
    let newly_offline: Vec<Uuid> = broker.log_dirs.iter().copied().filter(|d| offline.contains(d)).collect();
    if newly_offline.is_empty() {
        return Vec::new();
    }
    let mut records = Vec::new();
    for dir in newly_offline {
        records.extend(leader_and_isr_updates(image, config, BrokerEvent::DirectoryOffline(broker_id, dir)));
    }
    let online: Vec<Uuid> = broker.log_dirs.iter().copied().filter(|d| !offline.contains(d)).collect();
    records.push(MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id,
        broker_epoch: broker.epoch,
        log_dirs: online,
        ..Default::default()
    }));
    records
}

fn registration_change(broker_id: i32, broker_epoch: i64, fenced: i8, in_controlled_shutdown: i8) -> MetadataRecord {
    MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id,
        broker_epoch,
        fenced,
        in_controlled_shutdown,
        ..Default::default()
    })
}

/// Kafka's log directory checks of a registration (metadata.version 3.7-IV2 and later).
fn check_log_dirs(image: &MetadataImage, broker_id: i32, log_dirs: &[Uuid]) -> Result<(), Refusal> {
    let invalid = |message: String| Err((ResponseError::InvalidRegistration, message));
    if log_dirs.is_empty() {
        return invalid("No directories specified in request".to_string());
    }
    if log_dirs.iter().any(|d| d.as_u128() < RESERVED_DIRECTORY_IDS) {
        return invalid("Reserved directory ID in request".to_string());
    }
    if log_dirs.iter().collect::<BTreeSet<_>>().len() != log_dirs.len() {
        return invalid("Duplicate directory ID in request".to_string());
    }
    for dir in log_dirs {
        let owner = image.brokers.values().find(|b| b.id != broker_id && b.log_dirs.contains(dir));
        if let Some(owner) = owner {
            return invalid(format!("Broker {} is already registered with directory {}", owner.id, print_uuid(dir)));
        }
    }
    Ok(())
}

/// The features the broker supports, checked against every finalized level (Kafka's
/// `processRegistrationFeature`): each level the cluster finalized must be in the broker's range;
/// a feature the broker does not name counts as supported at level 0 only.
fn check_features(image: &MetadataImage, request: &BrokerRegistrationRequest) -> Result<Vec<BrokerFeature>, Refusal> {
    let check = |name: &str, min: i16, max: i16| {
        let default = if name == METADATA_VERSION { MINIMUM_KRAFT_METADATA_VERSION } else { 0 };
        let finalized = image.features.get(name).copied().unwrap_or(default);
        if !(min..=max).contains(&finalized) {
            return Err((
                ResponseError::UnsupportedVersion,
                format!(
                    "Unable to register because the broker does not support finalized version {finalized} of \
                     {name}. The broker wants a version between {min} and {max}, inclusive."
                ),
            ));
        }
        Ok(BrokerFeature {
            name: name.to_string(),
            min_supported_version: min,
            max_supported_version: max,
            ..Default::default()
        })
    };
    let mut features = Vec::new();
    for f in &request.features {
        features.push(check(f.name.as_str(), f.min_supported_version, f.max_supported_version)?);
    }
    let named = |name: &str| request.features.iter().any(|f| f.name.as_str() == name);
    if !named(METADATA_VERSION) {
        features.push(check(METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION, MINIMUM_KRAFT_METADATA_VERSION)?);
    }
    // Checked only: Kafka does not record the features the broker did not name.
    for (name, &level) in &image.features {
        if level != 0 && !named(name) && name != METADATA_VERSION {
            check(name, 0, 0)?;
        }
    }
    Ok(features)
}

#[cfg(test)]
#[path = "brokers_tests.rs"]
mod brokers_tests;
