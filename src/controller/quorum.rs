//! The active controller of a single-voter Ketch quorum (`process.roles=controller`, Kafka's
//! `QuorumController` with one voter): it owns the metadata log (`raft::MetadataLog`, this node
//! leads it), the image replayed from it, the brokers' sessions and the observers' progress;
//! every change is decided by the pure functions of this module's siblings, appended as one
//! batch (durable before anything is answered), applied to the image and published, and held
//! fetches are woken.
//!
//! On disk: the metadata log in the first log directory (`raft`). A new log starts with the
//! bootstrap records (`bootstrap`: the feature levels `ketch format` chose, or a new Kafka 4.1
//! cluster's, ELR being on the cluster-wide `min.insync.replicas`, and the formatted SCRAM
//! credentials).
//! Invariants: one change at a time (the state's lock is held from deciding to applying); the
//! image is the replay of the log, and a change is visible (image, fetches) only once durable;
//! records that would not apply to the image are never written (checked before the append).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kafka_protocol::messages::{FetchRequest, FetchResponse};
use tokio::sync::watch;

use super::bootstrap;
use super::brokers::BrokerSessions;
use super::ControllerConfig;
use crate::metadata::image::{ImageBuilder, MetadataImage};
use crate::metadata::records::MetadataRecord;
use crate::raft::leader::{self, Answer, LeaderEndpoint, ObserverState};
use crate::raft::voter::VoterHandle;
use crate::raft::MetadataLog;

/// The settings the controller decides with.
/// Its `Debug` hides the values of password configs and the token secret (`security::redact`).
#[derive(Clone)]
pub struct ControllerSettings {
    pub config: ControllerConfig,
    pub cluster_id: String,
    /// `num.partitions` and `default.replication.factor`: CreateTopics' -1.
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    /// The topic configs' defaults (this node's static broker configs over Kafka's defaults).
    pub topic_defaults: crate::config::TopicConfig,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// Topic configs whose broker-level synonym this node's configuration sets.
    pub static_config_keys: std::collections::HashSet<String>,
    /// This node's static configuration (`server.properties`, overrides): what DescribeConfigs
    /// reports as STATIC_BROKER_CONFIG.
    pub static_props: crate::config::Properties,
    /// The `delegation.token.*` configs delegation token changes are decided with.
    pub tokens: crate::security::tokens::TokenSettings,
    /// When the only voter snapshots its log and how much it keeps (`metadata.log.*`,
    /// `metadata.max.retention.*`).
    pub snapshots: crate::raft::voter::SnapshotPolicy,
}

impl std::fmt::Debug for ControllerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Every field, by name: a new field does not compile until it is printed here too.
        let ControllerSettings {
            config,
            cluster_id,
            num_partitions,
            default_replication_factor,
            topic_defaults,
            delete_topic_enable,
            static_config_keys,
            static_props,
            tokens,
            snapshots,
        } = self;
        f.debug_struct("ControllerSettings")
            .field("config", config)
            .field("cluster_id", cluster_id)
            .field("num_partitions", num_partitions)
            .field("default_replication_factor", default_replication_factor)
            .field("topic_defaults", topic_defaults)
            .field("delete_topic_enable", delete_topic_enable)
            .field("static_config_keys", static_config_keys)
            .field("static_props", &crate::security::redact::Configs(static_props))
            .field("tokens", tokens)
            .field("snapshots", snapshots)
            .finish()
    }
}

impl ControllerSettings {
    /// The settings node `node_id`'s controller decides with, from its configuration
    /// (`broker.session.timeout.ms` given as `session_timeout_ms`).
    pub fn from_config(
        config: &crate::config::BrokerConfig,
        node_id: i32,
        session_timeout_ms: i64,
        cluster_id: &str,
    ) -> ControllerSettings {
        let unclean = config.properties.get("unclean.leader.election.enable");
        ControllerSettings {
            config: ControllerConfig {
                node_id,
                session_timeout_ms,
                unclean_leader_election_enable: unclean.is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            },
            cluster_id: cluster_id.to_string(),
            num_partitions: config.num_partitions,
            default_replication_factor: config.default_replication_factor,
            topic_defaults: config.topic_defaults.clone(),
            delete_topic_enable: config.delete_topic_enable,
            static_config_keys: crate::config::TOPIC_CONFIG_KEYS
                .iter()
                .filter(|(_, broker_key)| config.properties.contains_key(*broker_key))
                .map(|(key, _)| key.to_string())
                .collect(),
            static_props: config.properties.clone(),
            tokens: crate::security::tokens::TokenSettings::from_properties(&config.properties),
            snapshots: crate::raft::voter::SnapshotPolicy::from_config(config).unwrap_or_default(),
        }
    }
}

/// Where the metadata log is: this node's alone (the only voter), or a voter's of a quorum.
enum Log {
    Single(Box<MetadataLog>),
    /// (The voter is `QuorumController::voter`.)
    Voter,
}

struct State {
    log: Log,
    observers: BTreeMap<i32, ObserverState>,
    sessions: BrokerSessions,
}

/// The image, and the builder it was published from: the replay of the committed log. Locked
/// after `State` when both are (a voter's commits lock it alone, from the driver's thread).
struct Applied {
    builder: ImageBuilder,
    image: Arc<MetadataImage>,
}

/// A change asked of a controller that is not the quorum's active one (NOT_CONTROLLER).
#[derive(Debug)]
pub struct NotActive;

impl std::fmt::Display for NotActive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not the active controller")
    }
}

impl std::error::Error for NotActive {}

/// What a decision is made from: the image, the brokers' sessions, where its records will be
/// appended, and the time.
pub struct Decide<'a> {
    pub image: &'a Arc<MetadataImage>,
    pub sessions: &'a mut BrokerSessions,
    pub next_offset: i64,
    pub now_ms: i64,
}

pub struct QuorumController {
    pub settings: ControllerSettings,
    state: Mutex<State>,
    /// The voter under this controller when it is one of several (read without `state`'s lock:
    /// a change holds that lock until the quorum commits it, which takes the voters' fetches).
    voter: Option<VoterHandle>,
    /// Held by a voter's change from its decision until the quorum committed it.
    changing: Arc<Mutex<()>>,
    applied: Arc<Mutex<Applied>>,
    /// The log end offset after every append (held fetches wait on it).
    appended: watch::Sender<i64>,
    /// The clients' `controller_mutation_rate` buckets (the quotas are the image's).
    mutations: crate::quota::mutation::MutationBuckets,
    /// With `authorizer.class.name` set: the ACLs callers are authorized with, the image's once
    /// `read_acls_from_own_image` ran.
    acls: Option<crate::security::acl_store::AclStore>,
}

impl QuorumController {
    /// Opens (or creates, with the bootstrap records) the metadata log in `metadata_dir` and
    /// replays it.
    pub fn open(metadata_dir: &std::path::Path, settings: ControllerSettings) -> anyhow::Result<QuorumController> {
        let mut builder = ImageBuilder::new();
        let mut replayed = 0u64;
        let mut log =
            MetadataLog::open(metadata_dir, settings.config.node_id, crate::log::now_ms(), |offset, record| {
                replayed += 1;
                builder.apply(offset, &record)?;
                Ok(())
            })?;
        log.set_snapshot_policy(settings.snapshots.clone());
        let image = builder.publish();
        let (appended, _) = watch::channel(log.end_offset());
        // A new active controller gives every registered broker a full session.
        let mut sessions = BrokerSessions::new(settings.config);
        sessions.touch_all(&image, crate::log::now_ms());
        let state = State { log: Log::Single(Box::new(log)), observers: BTreeMap::new(), sessions };
        let applied = Arc::new(Mutex::new(Applied { builder, image }));
        // `controller.quota.window.*` were checked with the rest of the configuration.
        let window = crate::quota::rate::Window::controller_from_properties(&settings.static_props).unwrap_or_default();
        let mutations = crate::quota::mutation::MutationBuckets::new(window);
        let acls = crate::security::acl_store::AclStore::open(&settings.static_props, metadata_dir)?;
        let controller = QuorumController {
            settings,
            state: Mutex::new(state),
            voter: None,
            changing: Arc::default(),
            applied,
            appended,
            mutations,
            acls,
        };
        if replayed == 0 {
            // A new cluster: the levels and credentials `ketch format` chose (`bootstrap`).
            let levels = bootstrap::read(metadata_dir)?;
            let scram = crate::security::scram_store::ScramStore::open(metadata_dir)?.records();
            let min_isr = controller.settings.topic_defaults.min_insync_replicas;
            let mut state = controller.lock();
            controller.write(&mut state, bootstrap::records(&levels, min_isr, scram))?;
            tracing::info!(features = ?levels, "new metadata log: bootstrap metadata written");
        } else if !controller.image().features.contains_key("metadata.version") {
            // A log a single Ketch node wrote (it kept its feature levels, SCRAM credentials,
            // ACLs, dynamic broker configs and client quotas in `.ketch/`) becoming a cluster's: the bootstrap
            // levels for every feature it does not finalize, and what `.ketch/` holds.
            let levels = bootstrap::read(metadata_dir)?;
            let node_id = controller.settings.config.node_id;
            let kept = [
                crate::security::scram_store::ScramStore::open(metadata_dir)?.records(),
                crate::security::acl_store::stored_records(metadata_dir)?,
                crate::dynconf::stored_records(metadata_dir, node_id)?,
                crate::quota::QuotaStore::open(metadata_dir, Default::default())?.records(),
            ]
            .concat();
            let mut state = controller.lock();
            let finalized = controller.image().features.clone();
            let min_isr = controller.settings.topic_defaults.min_insync_replicas;
            let mut records: Vec<MetadataRecord> = bootstrap::records(&levels, min_isr, Vec::new())
                .into_iter()
                .filter(|r| matches!(r, MetadataRecord::FeatureLevel(f) if !finalized.contains_key(&f.name)))
                .collect();
            let carried = kept.len();
            records.extend(kept);
            controller.write(&mut state, records)?;
            tracing::info!(
                carried,
                "metadata log without metadata.version (a single node's): bootstrap feature levels written, with \
                 the node's SCRAM credentials, ACLs, dynamic broker configs and client quotas"
            );
        }
        Ok(controller)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn applied(&self) -> MutexGuard<'_, Applied> {
        self.applied.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A FetchSnapshot of the only voter's snapshots (a voter of a quorum answers its own).
    pub async fn fetch_single_snapshot(
        &self,
        request: &kafka_protocol::messages::FetchSnapshotRequest,
    ) -> kafka_protocol::messages::FetchSnapshotResponse {
        let (dir, epoch) = match &self.lock().log {
            Log::Single(log) => (log.dir(), log.epoch()),
            Log::Voter => {
                return kafka_protocol::messages::FetchSnapshotResponse::default()
                    .with_error_code(kafka_protocol::error::ResponseError::InvalidRequest.code())
            }
        };
        let (request, cluster_id, node_id) =
            (request.clone(), self.settings.cluster_id.clone(), self.settings.config.node_id);
        let answer = tokio::task::spawn_blocking(move || {
            let view = crate::raft::snapshot_wire::LeaderView {
                cluster_id: &cluster_id,
                epoch,
                leader: Some(node_id),
                leading: true,
            };
            crate::raft::snapshot_wire::serve(&request, &view, &dir)
        });
        answer.await.unwrap_or_else(|_| {
            kafka_protocol::messages::FetchSnapshotResponse::default()
                .with_error_code(kafka_protocol::error::ResponseError::UnknownServerError.code())
        })
    }

    /// The image as of the last committed change.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.applied().image.clone()
    }

    /// From now on callers are authorized with the ACLs of this controller's latest image (Kafka's
    /// `StandardAuthorizer` on a controller). Called once the controller is shared.
    pub fn read_acls_from_own_image(self: &Arc<Self>) {
        if let Some(acls) = &self.acls {
            let weak = Arc::downgrade(self);
            acls.read_from_image(Box::new(move || Some(weak.upgrade()?.image())));
        }
    }

    /// What `principal`, connected from `address`, may do (everything without an authorizer).
    /// Reads the image: never called inside `change`.
    pub fn authz<'a>(
        &'a self,
        principal: &'a str,
        address: std::net::IpAddr,
    ) -> crate::security::authorizer::Authz<'a> {
        crate::security::authorizer::Authz::new(self.acls.as_ref(), principal, address)
    }

    /// The `controller_mutation_rate` quota one request of `client` is held to (Kafka's
    /// `ControllerMutationQuotaManager`), by the client quotas of the image: strict or permissive
    /// as the request's version asks.
    pub fn mutation_quota(
        &self,
        client: &crate::quota::Client,
        strict: bool,
    ) -> crate::quota::mutation::MutationQuota<'_> {
        self.mutations.quota_for(&self.image().quotas, client, strict)
    }

    /// Checks `records` against the image, appends them (durable on return), applies them and
    /// publishes the image (the only voter). Returns the offset of the last record (the one
    /// before the end for no records).
    fn write(&self, state: &mut State, records: Vec<MetadataRecord>) -> anyhow::Result<i64> {
        let Log::Single(log) = &mut state.log else { unreachable!("a voter's changes are proposed") };
        let first = log.end_offset();
        if records.is_empty() {
            return Ok(first - 1);
        }
        let trial = self.dry_run(first, &records)?;
        let last = log.append(&records, crate::log::now_ms())?;
        assert_eq!(last, first + records.len() as i64 - 1, "one batch, contiguous offsets");
        let mut applied = self.applied();
        applied.builder = trial;
        applied.image = applied.builder.publish();
        debug_assert_eq!(applied.image.offset, last);
        self.appended.send_replace(log.end_offset());
        // A snapshot of the applied state when one is due (the records are durable already).
        let settled = applied.builder.settled();
        if let Err(e) =
            log.maybe_snapshot(|| settled.map(crate::metadata::image_records::records), crate::log::now_ms())
        {
            tracing::warn!(error = %e, "metadata snapshot not written");
        }
        Ok(last)
    }

    /// `records` applied to a copy of the image's builder as if at `first`: a record the image
    /// refuses is never written.
    fn dry_run(&self, first: i64, records: &[MetadataRecord]) -> anyhow::Result<ImageBuilder> {
        let mut trial = self.applied().builder.clone();
        for (i, record) in records.iter().enumerate() {
            trial.apply(first + i as i64, record)?;
        }
        Ok(trial)
    }

    /// Runs `decide` on the current state and writes the records it returns; returns its answer
    /// once they are durable and applied (a voter's: once the quorum committed them).
    /// The brokers' sessions `decide` changed are put back when the records are not written.
    /// The append's fsync (a quorum's commit) blocks: on a multi-threaded runtime the worker's
    /// other tasks move to other threads meanwhile (`block_in_place`).
    pub fn change<T>(&self, decide: impl FnOnce(&mut Decide) -> (Vec<MetadataRecord>, T)) -> anyhow::Result<T> {
        let multi_threaded = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if let Some(voter) = &self.voter {
            return match multi_threaded {
                true => tokio::task::block_in_place(|| self.change_on_voter(voter, decide)),
                false => self.change_on_voter(voter, decide),
            };
        }
        let mut state = self.lock();
        let state = &mut *state;
        let Log::Single(log) = &state.log else { unreachable!("a voter's controller has its voter") };
        let next_offset = log.end_offset();
        let sessions_before = state.sessions.clone();
        let image = self.image();
        let mut input =
            Decide { image: &image, sessions: &mut state.sessions, next_offset, now_ms: crate::log::now_ms() };
        let (records, answer) = decide(&mut input);
        if records.is_empty() {
            return Ok(answer);
        }
        let written = match multi_threaded {
            true => tokio::task::block_in_place(|| self.write(state, records)),
            false => self.write(state, records),
        };
        if let Err(e) = written {
            state.sessions = sessions_before;
            return Err(e);
        }
        Ok(answer)
    }

    /// `change` on a voter: decided under the state's lock, proposed without it (the quorum's
    /// commit needs the voters' fetches, which must never wait for that lock); one change at a
    /// time all the same (`changing`).
    fn change_on_voter<T>(
        &self,
        voter: &VoterHandle,
        decide: impl FnOnce(&mut Decide) -> (Vec<MetadataRecord>, T),
    ) -> anyhow::Result<T> {
        let _one_at_a_time = self.changing.lock().unwrap_or_else(|p| p.into_inner());
        let (records, answer, sessions_before, first) = {
            let mut state = self.lock();
            let status = voter.status.borrow().clone();
            if !status.active {
                return Err(NotActive.into());
            }
            let sessions_before = state.sessions.clone();
            let image = self.image();
            let next_offset = status.end as i64;
            let mut input =
                Decide { image: &image, sessions: &mut state.sessions, next_offset, now_ms: crate::log::now_ms() };
            let (records, answer) = decide(&mut input);
            (records, answer, sessions_before, next_offset)
        };
        if records.is_empty() {
            return Ok(answer);
        }
        let count = records.len() as i64;
        // Committed and applied (by the voter's commit callback) when the proposal returns.
        let proposed = self.dry_run(first, &records).and_then(|_| voter.propose_blocking(records));
        match proposed {
            Ok(end) => {
                assert_eq!(end as i64, first + count, "one batch, contiguous offsets, at the log end");
                debug_assert!(self.image().offset >= end as i64 - 1, "applied before answered");
                Ok(answer)
            }
            Err(e) => {
                self.lock().sessions = sessions_before;
                Err(e)
            }
        }
    }

    /// Fences brokers whose session lapsed (one change each, as Kafka); returns how many.
    pub fn expire_sessions(&self) -> anyhow::Result<usize> {
        if !self.is_active() {
            return Ok(0);
        }
        let mut fenced = 0;
        while self.change(|d| {
            let records = d.sessions.expire(d.image, d.now_ms);
            let any = !records.is_empty();
            (records, any)
        })? {
            fenced += 1;
        }
        Ok(fenced)
    }

    /// A connection to this controller closed: brokers whose heartbeats came on it are fenced
    /// unless they heartbeat again soon (`BrokerSessions::connection_closed`).
    pub fn connection_closed(&self, connection: u64) {
        let brokers = self.lock().sessions.connection_closed(connection, crate::log::now_ms());
        for broker in brokers {
            tracing::info!(broker, "the connection of the broker's heartbeats closed");
        }
    }

    /// Answers an observer's Fetch, holding it up to its `max_wait_ms` while there is nothing new.
    /// (A voter's driver answers voters and observers alike.)
    pub async fn fetch(&self, request: &FetchRequest, endpoint: &LeaderEndpoint) -> FetchResponse {
        if let Some(voter) = &self.voter {
            return voter.fetch(request).await;
        }
        let wait = Duration::from_millis(request.max_wait_ms.clamp(0, 60_000) as u64);
        let deadline = tokio::time::Instant::now() + wait;
        let mut appended = self.appended.subscribe();
        loop {
            let may_wait = tokio::time::Instant::now() < deadline;
            // Seen before reading: an append after this read wakes the wait below.
            appended.borrow_and_update();
            let answer = {
                let mut state = self.lock();
                let state = &mut *state;
                let Log::Single(log) = &state.log else { unreachable!("a voter answers its own fetches") };
                leader::answer(
                    log,
                    &self.settings.cluster_id,
                    endpoint,
                    request,
                    may_wait,
                    &mut state.observers,
                    crate::log::now_ms(),
                )
            };
            match answer {
                Answer::Now(response) => return *response,
                Answer::Wait => {
                    tokio::select! {
                        _ = appended.changed() => {}
                        _ = tokio::time::sleep_until(deadline) => {}
                    }
                }
            }
        }
    }

    /// The log end offset, as of every durable change (the image is published before it moves).
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.appended.subscribe()
    }

    /// The voter of a multi-voter quorum this controller sits on (None: the only voter).
    pub fn voter(&self) -> Option<VoterHandle> {
        self.voter.clone()
    }

    /// Whether this controller may change the metadata: the only voter always, a voter of a
    /// quorum while it leads it and everything before its epoch is committed and applied.
    pub fn is_active(&self) -> bool {
        self.voter.as_ref().is_none_or(|voter| voter.status.borrow().active)
    }

    /// The leader epoch, end offset and observers' progress (DescribeQuorum of the only voter).
    pub fn quorum(&self) -> (i32, i64, BTreeMap<i32, ObserverState>) {
        if let Some(voter) = &self.voter {
            let status = voter.status.borrow();
            return (status.epoch, status.high_watermark as i64, voter.observers());
        }
        let state = self.lock();
        match &state.log {
            Log::Single(log) => (log.epoch(), log.high_watermark(), state.observers.clone()),
            Log::Voter => unreachable!("a voter's controller has its voter"),
        }
    }

    /// Flushes and closes the metadata log.
    pub fn close(&self) {
        if let Some(voter) = &self.voter {
            voter.stop();
            return;
        }
        match &mut self.lock().log {
            Log::Single(log) => {
                if let Err(e) = log.close() {
                    tracing::warn!(error = %e, "closing the metadata log");
                }
            }
            Log::Voter => {}
        }
    }
}

#[path = "quorum_voter.rs"]
mod voter_mode;
