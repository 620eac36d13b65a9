//! The broker's shared state and its background work.
//!
//! Owns: the config (static, and the dynamic broker configs over it), the topic registry, the group-commit flusher and the "data appended"
//! signal that wakes long-polling fetches; background tasks for retention and `flush.ms`; and
//! the orderly close of every log at shutdown. Handlers receive `&Broker`.
//! Invariant: after `close` returns every partition log has been fsynced.

use kafka_protocol::error::ResponseError;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::BrokerConfig;
use crate::dynconf::DynamicConfigs;
use crate::fetch_session::FetchSessions;
use crate::group::{GroupConfig, GroupCoordinator, Storage};
use crate::log::flusher::Flusher;
use crate::log::now_ms;
use crate::metadata::features::Features;
use crate::metadata::log_dirs::LogDirs;
use crate::metadata::TopicRegistry;
use crate::node::{NodeConfig, Roles};
use crate::quota::rate::Window;
use crate::quota::QuotaStore;
use crate::security::acl_store::AclStore;
use crate::security::scram_store::ScramStore;
use crate::security::token_store::TokenStore;
use crate::security::tokens::TokenSettings;
use crate::txn::coordinator::{Deps, TxnConfig, TxnCoordinator};
use crate::txn::producer_ids::ProducerIds;

/// Threads that close (fsync) partition logs at shutdown.
const CLOSE_THREADS: usize = 16;

pub struct Broker {
    /// The static config (`server.properties`, `--override`) the broker started with.
    pub config: BrokerConfig,
    /// Dynamic broker configs; `dynamic.effective()` is the config in force.
    pub dynamic: DynamicConfigs,
    pub cluster_id: String,
    pub topics: TopicRegistry,
    pub flusher: Flusher,
    pub fetch_sessions: FetchSessions,
    pub producer_ids: Arc<ProducerIds>,
    pub features: Features,
    /// ACLs, when an authorizer is configured (`authorizer.class.name`).
    pub acls: Option<AclStore>,
    /// SCRAM credentials (KIP-554), always served.
    pub scram: ScramStore,
    /// Delegation tokens (on when `delegation.token.secret.key` is set); their logins are SCRAM.
    pub tokens: Arc<TokenStore>,
    /// Client quotas (`quota::`): set through AlterClientQuotas, enforced by connections.
    pub quotas: QuotaStore,
    pub groups: GroupCoordinator,
    pub txns: TxnCoordinator,
    /// This node's roles and controller quorum (`process.roles`, `controller.quorum.*`).
    pub node: NodeConfig,
    /// On a broker of a controller quorum: where admin changes are forwarded (set once the
    /// membership starts).
    pub controller: std::sync::OnceLock<crate::node::ControllerLink>,
    /// On a broker of a controller quorum: the partitions it hosts and their roles (set once
    /// the membership starts). None on a single node, which leads everything it hosts.
    pub replicas: std::sync::OnceLock<Arc<crate::replica::manager::ReplicaManager>>,
    /// In a cluster: topics whose auto-creation through the controller is in flight (one
    /// request at a time per topic, `handlers::auto_create`).
    pub auto_creating: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Bumped after every append; long-polling fetches wait on it.
    appended: watch::Sender<u64>,
}

impl Broker {
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        // Whether the first log directory is being formatted now (LogDirs writes its meta.properties).
        let formatting = !config.log_dir().join("meta.properties").exists();
        let mut node = NodeConfig::from_properties(&config.properties, config.node_id)?;
        node.resolve_bootstrap_voters(&config.properties, config.log_dir())?;
        anyhow::ensure!(
            node.roles != Roles::Controller,
            "process.roles=controller: a controller-only node runs server::controller, not a broker"
        );
        if node.roles == Roles::Broker && formatting {
            anyhow::bail!(
                "No meta.properties found in {}: a broker of a controller quorum (process.roles=broker) starts on a \
                 directory formatted with the quorum's cluster id (`ketch format -t <cluster id>`, as Kafka's \
                 `kafka-storage format`)",
                config.log_dir().display()
            );
        }
        // Before anything in the directories is read or written (each `.lock` taken, a second
        // broker must not touch them), and their meta.properties checked.
        let log_dirs = LogDirs::open(&config)?;
        let dynamic = DynamicConfigs::open(&config)?;
        // A cluster being formatted: like Kafka 4.1 formatting a cluster with eligible leader
        // replicas on (KIP-966), keep the cluster-wide min.insync.replicas as a cluster-default
        // dynamic config.
        if formatting && node.roles == Roles::Combined {
            let value = dynamic.effective().topic_defaults.min_insync_replicas.to_string();
            let with_min_isr = |current: &crate::config::Properties| {
                let mut set = current.clone();
                set.entry("min.insync.replicas".to_string()).or_insert(value);
                Ok(set)
            };
            dynamic
                .alter(crate::dynconf::Scope::ClusterDefault, false, with_min_isr)
                .map_err(|(_, why)| anyhow::anyhow!(why))?;
        }
        // Topics open with the topic defaults in force, dynamic ones included. The registry
        // keeps the directories (and their locks) for the broker's lifetime.
        let topics = match node.roles {
            Roles::Combined | Roles::Controller => TopicRegistry::open_in(log_dirs, &dynamic.effective())?,
            Roles::Broker | Roles::BrokerController => TopicRegistry::open_detached(log_dirs, &dynamic.effective())?,
        };
        let cluster_id = topics.log_dirs().cluster_id().to_string();
        let (appended, _) = watch::channel(0u64);
        let fetch_sessions = FetchSessions::new(
            config.max_incremental_fetch_session_cache_slots,
            Duration::from_millis(config.min_incremental_fetch_session_eviction_ms),
        );
        let producer_ids = match node.roles {
            Roles::Combined | Roles::Controller => ProducerIds::open(config.log_dir())?,
            Roles::Broker | Roles::BrokerController => ProducerIds::from_controller(),
        };
        let producer_ids = Arc::new(producer_ids);
        let features = Features::open(config.log_dir(), config.node_id)?;
        let acls = AclStore::open(&config.properties, config.log_dir())?;
        let scram = ScramStore::open(config.log_dir())?;
        let tokens = Arc::new(TokenStore::open(TokenSettings::from_properties(&config.properties), config.log_dir())?);
        scram.attach_tokens(tokens.clone());
        let quotas = QuotaStore::open(config.log_dir(), Window::from_properties(&config.properties)?)?
            .with_mutation_window(Window::controller_from_properties(&config.properties)?);
        let groups = GroupCoordinator::new(GroupConfig::from_broker(&config));
        groups.load(&topics)?;
        groups.adopt_configs(&topics.metadata_image());
        let p = &config.properties;
        let txns = TxnCoordinator::new(TxnConfig {
            partitions: p
                .get("transaction.state.log.num.partitions")
                .and_then(|v| v.parse().ok())
                .unwrap_or(50i32)
                .max(1),
            max_timeout_ms: p.get("transaction.max.timeout.ms").and_then(|v| v.parse().ok()).unwrap_or(900_000),
            id_expiration_ms: p
                .get("transactional.id.expiration.ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(604_800_000),
            replication_factor: p
                .get("transaction.state.log.replication.factor")
                .and_then(|v| v.parse().ok())
                .unwrap_or(3i16)
                .max(1),
            min_isr: p.get("transaction.state.log.min.isr").and_then(|v| v.parse().ok()).unwrap_or(2i32).max(1),
            segment_bytes: p
                .get("transaction.state.log.segment.bytes")
                .and_then(|v| v.parse().ok())
                .unwrap_or(104_857_600i64),
        });
        let in_cluster = matches!(node.roles, Roles::Broker | Roles::BrokerController);
        Ok(Arc::new_cyclic(|weak: &std::sync::Weak<Broker>| {
            // A broker of a cluster authenticates SCRAM logins with the credentials of its
            // metadata image (Kafka's brokers in KRaft mode), not its own file.
            if in_cluster {
                let for_scram = weak.clone();
                scram.read_from_image(Box::new(move || Some(for_scram.upgrade()?.controller.get()?.image())));
                let for_tokens = weak.clone();
                tokens.read_from_image(Box::new(move || Some(for_tokens.upgrade()?.controller.get()?.image())));
                // Client quotas likewise (Kafka's brokers throttle with their ClientQuotasImage).
                let for_quotas = weak.clone();
                quotas.read_from_image(Box::new(move || Some(for_quotas.upgrade()?.controller.get()?.image())));
                // And authorizes with the ACLs of its image (Kafka's StandardAuthorizer in KRaft).
                if let Some(acls) = &acls {
                    let weak = weak.clone();
                    acls.read_from_image(Box::new(move || Some(weak.upgrade()?.controller.get()?.image())));
                }
            }
            Broker {
                config,
                dynamic,
                cluster_id,
                topics,
                flusher: Flusher::start(),
                fetch_sessions,
                producer_ids,
                features,
                acls,
                scram,
                tokens,
                quotas,
                groups,
                txns,
                node,
                controller: std::sync::OnceLock::new(),
                replicas: std::sync::OnceLock::new(),
                auto_creating: Default::default(),
                appended,
            }
        }))
    }

    pub fn txn_deps(&self) -> Deps<'_> {
        Deps {
            topics: &self.topics,
            flusher: &self.flusher,
            groups: &self.groups,
            producer_ids: &self.producer_ids,
            features: &self.features,
            replicas: self.replicas.get().map(|r| &**r),
            link: self.controller.get(),
        }
    }

    /// Recovery work that needs the runtime: transactions caught mid-commit are completed. A
    /// cluster broker loads `__transaction_state` partitions as it becomes their leader instead.
    pub async fn recover(&self) -> anyhow::Result<()> {
        if self.node.roles.is_cluster_broker() {
            return Ok(());
        }
        self.txns.load(&self.txn_deps()).await
    }

    pub fn notify_appended(&self) {
        self.appended.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The partition a leader-only request names, hosted here: UNKNOWN_TOPIC_OR_PARTITION when
    /// the cluster has no such partition, NOT_LEADER_OR_FOLLOWER when another broker hosts it.
    pub fn hosted_partition(&self, topic: &str, index: i32) -> Result<Arc<crate::log::Partition>, ResponseError> {
        let t = self.topics.get(topic).ok_or(ResponseError::UnknownTopicOrPartition)?;
        let i = usize::try_from(index).map_err(|_| ResponseError::UnknownTopicOrPartition)?;
        match t.partitions.get(i) {
            Some(p) => Ok(p.clone()),
            None if i < t.partitions.len() => Err(ResponseError::NotLeaderOrFollower),
            None => Err(ResponseError::UnknownTopicOrPartition),
        }
    }

    /// Kafka's check of a request's `current_leader_epoch` (KIP-320) and, in a cluster, that
    /// this broker leads `partition` (`log` is its locked log).
    pub fn check_leader(
        &self,
        partition: &crate::log::Partition,
        log: &crate::log::PartitionLog,
        requested_epoch: i32,
    ) -> Result<(), ResponseError> {
        match self.replicas.get() {
            None => crate::replica::check_current_leader_epoch(log, requested_epoch),
            Some(rm) => rm
                .get(&partition.topic, partition.index)
                .ok_or(ResponseError::NotLeaderOrFollower)?
                .check_leader(requested_epoch),
        }
    }

    /// The "appended" signal itself, for the replica manager (its high watermark moves).
    pub fn appended_sender(&self) -> watch::Sender<u64> {
        self.appended.clone()
    }

    pub fn subscribe_appends(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// Spawns retention and `flush.ms` tasks on the current runtime.
    pub fn start_background(self: &Arc<Self>) {
        let broker = self.clone();
        let interval_ms = self.config.log_retention_check_interval_ms;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(interval_ms));
            tick.tick().await;
            loop {
                tick.tick().await;
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || b.apply_retention()).await;
            }
        });
        let broker = self.clone();
        tokio::spawn(async move {
            // Group timers (sessions, rebalance deadlines) run at this resolution.
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            let mut last_expiry = std::time::Instant::now();
            loop {
                tick.tick().await;
                let storage = Storage { topics: &broker.topics, flusher: &broker.flusher };
                broker.groups.tick(&storage).await;
                broker.txns.abort_expired(&broker.txn_deps()).await;
                if last_expiry.elapsed() >= Duration::from_millis(broker.config.offsets_retention_check_interval_ms) {
                    last_expiry = std::time::Instant::now();
                    broker.groups.expire_offsets(&storage).await;
                    broker.txns.expire_ids(&broker.txn_deps()).await;
                }
            }
        });
        if self.config.log_cleaner_enable {
            let broker = self.clone();
            tokio::spawn(async move {
                loop {
                    // log.cleaner.backoff.ms is dynamic: read at every pass (0, which Kafka
                    // accepts, still yields for a millisecond)
                    let backoff_ms = broker.dynamic.effective().log_cleaner_backoff_ms.max(1);
                    tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                    let b = broker.clone();
                    let _ = tokio::task::spawn_blocking(move || b.clean_logs()).await;
                }
            });
        }
        let broker = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(1000));
            loop {
                tick.tick().await;
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || b.flush_overdue()).await;
            }
        });
        // A single node removes its expired delegation tokens (a cluster's controller does).
        if self.tokens.settings.enabled() && !self.tokens.is_from_image() {
            let tokens = self.tokens.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(tokens.settings.check_interval_ms as u64));
                loop {
                    tick.tick().await;
                    let swept = tokens.change(|t| (crate::security::tokens::sweep(t, now_ms()), ()));
                    if let Err(e) = swept {
                        tracing::error!(error = %e, "expired delegation tokens not removed");
                    }
                }
            });
        }
    }

    /// Applies a new effective config (dynamic broker configs changed): topics without an
    /// override take the new defaults, and retention runs at once so that e.g. a lowered
    /// `log.retention.ms` deletes segments now rather than at the next check.
    pub fn reconfigure(&self, effective: &BrokerConfig) {
        let changed = self.topics.set_defaults(effective.topic_defaults.clone());
        let now = now_ms();
        for topic in changed {
            for partition in &topic.partitions {
                if let Err(e) = partition.log().apply_retention(now) {
                    tracing::error!(topic = %topic.name, error = %e, "retention after a broker config change failed");
                }
            }
        }
    }

    pub fn apply_retention(&self) {
        let now = now_ms();
        let expiration_ms = self.dynamic.effective().producer_id_expiration_ms;
        for partition in self.topics.all_partitions() {
            let result = {
                let mut log = partition.log();
                log.expire_producers(now, expiration_ms);
                log.apply_retention(now)
            };
            if let Err(e) = result {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "retention failed");
            }
        }
    }

    /// One compaction pass over every partition of a `cleanup.policy=compact` topic that is due.
    pub fn clean_logs(&self) {
        // log.cleaner.dedupe.buffer.size is dynamic: read at every pass
        let budget_bytes = self.dynamic.effective().log_cleaner_dedupe_buffer_size;
        for partition in self.topics.all_partitions() {
            if !partition.log().config().compacts() {
                continue;
            }
            if let Err(e) = crate::log::cleaner::clean_partition(&partition, budget_bytes, now_ms()) {
                tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "cleaning failed");
            }
        }
    }

    fn flush_overdue(&self) {
        let now = now_ms();
        for partition in self.topics.all_partitions() {
            let overdue = partition.log().flush_overdue(now);
            if overdue {
                if let Err(e) = Flusher::flush_now(&partition) {
                    tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "flush failed");
                }
            }
        }
    }

    /// Fsyncs and closes every log (clean shutdown); only if all closed cleanly is the
    /// clean-shutdown marker written.
    pub fn close(&self) {
        // Partitions close in parallel: each close is mostly fsync latency, which the device
        // overlaps (10,000 partitions closed one by one took minutes).
        let partitions = self.topics.all_partitions();
        let failures = std::sync::atomic::AtomicUsize::new(0);
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..CLOSE_THREADS.min(partitions.len()) {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(partition) = partitions.get(i) else { break };
                    if let Err(e) = partition.log().close() {
                        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::error!(topic = %partition.topic, partition = partition.index, error = %e, "close failed");
                    }
                });
            }
        });
        let all_clean = failures.into_inner() == 0;
        if all_clean {
            if let Err(e) = self.topics.mark_clean_shutdown() {
                tracing::error!(error = %e, "cannot write the clean shutdown marker");
            }
        }
    }
}
