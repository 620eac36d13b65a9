//! This node's membership of a KRaft cluster: its roles (`process.roles`), how it finds the
//! controller quorum (`controller.quorum.voters`, `controller.quorum.bootstrap.servers`,
//! `controller.listener.names`), its link to the active controller (`link.rs`, `client.rs`) and, as a
//! broker, its registration, heartbeats and controlled shutdown (`lifecycle.rs`, Kafka's
//! `BrokerLifecycleManager`).
//!
//! The shapes (`Roles`). With no `process.roles` (or `broker,controller` without a controller
//! listener) Ketch is one node holding its own metadata log (`raft::MetadataLog`), as before.
//! With `process.roles=broker` it is a broker of a cluster whose controllers are elsewhere
//! (Apache Kafka 4.1's controllers, from Maven, in the compat tests, or a Ketch controller): it
//! replicates their metadata log as an observer (`raft::observer`) and registers with the active
//! controller. With `process.roles=broker,controller` and a controller listener it is Kafka's
//! combined node: a controller of a cluster, the only voter or one of several
//! (`server::combined`), whose broker half is a broker like the others, reading its own
//! controller's image instead of observing it.
//! Invariants: the configuration is refused at start, with Kafka's meaning of each name, when it
//! asks for something this Ketch cannot be (a controller that is not a voter, a dynamic quorum).

pub mod client;
pub mod envelope;
pub mod isr;
pub mod lifecycle;
mod link;
pub mod producer_ids;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;

use crate::config::Properties;
use crate::metadata::image::MetadataImage;
use crate::raft::observer::{Observer, ObserverHandle};
use crate::replica::fetcher::{FetcherSetup, FollowerFetcher};
use crate::replica::manager::ReplicaManager;
use crate::security::client::ClientSecurity;
use lifecycle::{Endpoint, Lifecycle, State};
pub use link::{ControllerLink, EnvelopeError, Forwarder};

/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default.
const HIGH_WATERMARK_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

/// How long a shutting-down broker waits for the controller to let it go.
const CONTROLLED_SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

/// What this broker registers with: its log directories' ids (the first is the metadata one),
/// its endpoints, and the broker epochs of clean shutdown detection.
pub struct Registration {
    pub log_dir_ids: Vec<Uuid>,
    pub endpoints: Vec<Endpoint>,
    pub epochs: lifecycle::Epochs,
}

/// Where a broker's metadata image comes from.
pub enum MetadataSource<'a> {
    /// A broker only: the quorum's log, fetched as an observer into a copy in this directory.
    Observe(&'a Path),
    /// A combined node: its own controller publishes the image of its log (Kafka's combined
    /// node shares one metadata log between its controller and its broker).
    Local(ObserverHandle),
}

/// A running broker membership: the metadata observer, the lifecycle and the follower
/// fetcher, until `stop`.
pub struct Membership {
    stop: watch::Sender<bool>,
    pub metadata: ObserverHandle,
    pub state: watch::Receiver<State>,
    /// The last metadata image applied to the replicas and topics (`apply_images`).
    applied: watch::Receiver<Arc<MetadataImage>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Membership {
    /// Starts fetching the quorum's metadata log into `metadata_dir` and registering this
    /// broker as `registration` says.
    pub fn start(
        config: &NodeConfig,
        source: MetadataSource,
        cluster_id: &str,
        registration: Registration,
        fetcher: FetcherSetup,
        replicas: ReplicaHost,
    ) -> anyhow::Result<Membership> {
        let Registration { log_dir_ids, endpoints, epochs } = registration;
        let directory_id = log_dir_ids.first().copied().unwrap_or(Uuid::nil());
        let (stop, stop_rx) = watch::channel(false);
        let mut tasks = Vec::new();
        let metadata = match source {
            MetadataSource::Observe(metadata_dir) => {
                let (observer, metadata) =
                    Observer::open(metadata_dir, config.clone(), cluster_id.to_string(), directory_id)?;
                tasks.push(tokio::spawn(observer.run(stop_rx.clone())));
                metadata
            }
            MetadataSource::Local(metadata) => metadata,
        };
        let (lifecycle, state) =
            Lifecycle::new(config.clone(), cluster_id.to_string(), endpoints, log_dir_ids, metadata.clone(), epochs);
        let ReplicaHost { manager, apply, tick } = replicas;
        let (applied_tx, applied) = watch::channel(metadata.image.borrow().clone());
        let images = metadata.image.clone();
        tasks.push(tokio::spawn(apply_images(
            images,
            applied_tx,
            apply,
            tick,
            (manager.clone(), state.clone()),
            stop_rx.clone(),
        )));
        let follower = FollowerFetcher::new(fetcher, manager.clone(), metadata.image.clone(), state.clone());
        tasks.push(tokio::spawn(follower.run(stop_rx.clone())));
        let link =
            ControllerLink::new(config.clone(), metadata.leader.clone(), metadata.image.clone(), applied.clone());
        tasks.push(tokio::spawn(isr::run(manager, link, state.clone(), stop_rx.clone())));
        tasks.push(tokio::spawn(lifecycle.run(stop_rx, CONTROLLED_SHUTDOWN_WAIT)));
        Ok(Membership { stop, metadata, state, applied, tasks })
    }

    /// Runs `task` (given the stop signal) until the membership stops.
    pub fn spawn<F>(&mut self, task: impl FnOnce(watch::Receiver<bool>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks.push(tokio::spawn(task(self.stop.subscribe())));
    }

    /// The link admin requests are forwarded through.
    pub fn controller_link(&self, config: &NodeConfig) -> ControllerLink {
        let (leader, image) = (self.metadata.leader.clone(), self.metadata.image.clone());
        ControllerLink::new(config.clone(), leader, image, self.applied.clone())
    }

    /// Controlled shutdown with the controller (bounded), then the observer stops.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// The replica manager and how images reach it (the caller opens the hosted logs in its
/// topic registry).
pub struct ReplicaHost {
    pub manager: Arc<ReplicaManager>,
    pub apply: Box<dyn Fn(&MetadataImage) + Send + Sync>,
    /// How often leaders check their ISR for lagging followers.
    pub tick: Duration,
}

/// Applies every metadata image to the replicas (in order, each once), publishing each in
/// `applied` once applied, and runs the leaders' ISR checks. Once the lifecycle first reports
/// this broker running (caught up with the metadata log, unfenced), the replica manager settles
/// and the current image is applied again: what it does not want of the partitions found on
/// disk at start is marked stray then.
async fn apply_images(
    mut image: watch::Receiver<Arc<MetadataImage>>,
    applied: watch::Sender<Arc<MetadataImage>>,
    apply: Box<dyn Fn(&MetadataImage) + Send + Sync>,
    tick: Duration,
    (manager, mut state): (Arc<ReplicaManager>, watch::Receiver<State>),
    mut stop: watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(tick);
    let mut checkpoints = tokio::time::interval(HIGH_WATERMARK_CHECKPOINT_INTERVAL);
    let current = image.borrow_and_update().clone();
    apply(&current);
    applied.send_replace(current);
    let mut lifecycle_alive = true;
    while !*stop.borrow() {
        tokio::select! {
            changed = image.changed() => {
                if changed.is_err() {
                    return;
                }
                let current = image.borrow_and_update().clone();
                apply(&current);
                applied.send_replace(current);
            }
            changed = state.changed(), if lifecycle_alive && !manager.is_settled() => {
                lifecycle_alive = changed.is_ok();
                if lifecycle_alive && matches!(*state.borrow_and_update(), State::Running(_)) {
                    manager.settle();
                    let current = image.borrow_and_update().clone();
                    apply(&current);
                    applied.send_replace(current);
                }
            }
            _ = ticks.tick() => manager.tick(crate::log::now_ms()),
            _ = checkpoints.tick() => manager.checkpoint(),
            _ = stop.changed() => {}
        }
    }
    manager.checkpoint();
}

/// What `process.roles` makes of this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    /// One node: broker and the only controller (no `process.roles`, or `broker,controller`
    /// with this node the only voter and no controller listener), serving no other broker.
    Combined,
    /// Broker and a controller of a cluster (`process.roles=broker,controller` with
    /// `controller.listener.names`): its controller, the only voter or one of several, serves
    /// other brokers on the controller listener, and its broker is one of them
    /// (`server::combined`).
    BrokerController,
    /// A broker only; the controllers are other nodes.
    Broker,
    /// A controller only (`process.roles=controller`), the only voter of its quorum: it serves
    /// brokers on its controller listener (`server::controller`).
    Controller,
}

impl Roles {
    /// A broker of a cluster: its partitions, leaders and topics come from the controller's
    /// metadata log, through `Membership`.
    pub fn is_cluster_broker(self) -> bool {
        matches!(self, Roles::Broker | Roles::BrokerController)
    }
}

/// A voter of `controller.quorum.voters` (`id@host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    pub host: String,
    pub port: u16,
}

impl Voter {
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub roles: Roles,
    pub node_id: i32,
    pub voters: Vec<Voter>,
    /// `controller.quorum.bootstrap.servers` (`host:port`), when no voters are listed.
    pub bootstrap_servers: Vec<String>,
    /// The voters of the bootstrap checkpoint this controller's metadata directory was formatted
    /// with (`resolve_bootstrap_voters`; KIP-853), which its quorum writes into the log.
    pub initial_voters: Option<Vec<crate::raft::voters_record::VoterInfo>>,
    /// A controller formatted `--no-initial-controllers`: it joins the dynamic quorum at its
    /// bootstrap servers as an observer (KIP-853) until the leader adds it as a voter.
    pub observer: bool,
    pub controller_listener_names: Vec<String>,
    pub heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `controller.quorum.request.timeout.ms`: every request to a controller.
    pub request_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`: without a successful fetch for this long, the
    /// observer looks for the leader again.
    pub fetch_timeout_ms: u64,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// How a broker reaches the controllers: the first of `controller.listener.names`, its
    /// security protocol and `sasl.mechanism.controller.protocol` login.
    pub controller_security: Arc<ClientSecurity>,
}

impl NodeConfig {
    pub fn from_properties(props: &Properties, node_id: i32) -> anyhow::Result<NodeConfig> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let ms = |k: &str, default: u64| -> anyhow::Result<u64> {
            Ok(crate::config::int_property(props, k, default as i64, 0, i64::MAX)? as u64)
        };
        let list = |k: &str| -> Vec<String> {
            get(k)
                .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
                .unwrap_or_default()
        };
        let voters =
            list("controller.quorum.voters").iter().map(|v| parse_voter(v)).collect::<anyhow::Result<Vec<_>>>()?;
        let bootstrap_servers = list("controller.quorum.bootstrap.servers");
        let roles: Vec<String> = list("process.roles");
        let broker = roles.iter().any(|r| r == "broker");
        let controller = roles.iter().any(|r| r == "controller");
        if let Some(other) = roles.iter().find(|r| *r != "broker" && *r != "controller") {
            anyhow::bail!("process.roles: unknown role {other} (Kafka's roles are broker and controller)");
        }
        let controller_listener_names = list("controller.listener.names");
        // With one static voter, a controller is that voter (as in Kafka, a static quorum's
        // controllers are its voters); without static voters, the bootstrap checkpoint or the
        // bootstrap servers say (`resolve_bootstrap_voters`).
        let only_voter = || -> anyhow::Result<()> {
            if voters.iter().any(|v| v.id != node_id) {
                anyhow::bail!(
                    "controller.quorum.voters must list this controller ({node_id}): the controllers of a static \
                     quorum are its voters (a controller joins a dynamic quorum formatted --no-initial-controllers, \
                     with controller.quorum.bootstrap.servers)"
                );
            }
            // (Bootstrap servers are checked at start, against the voters the metadata directory was
            // formatted with: `resolve_bootstrap_voters`.)
            Ok(())
        };
        // A controller is one of several voters, this node among them, or the only voter.
        let a_voter = || -> anyhow::Result<()> {
            if voters.len() <= 1 {
                return only_voter();
            }
            if !voters.iter().any(|v| v.id == node_id) {
                anyhow::bail!(
                    "controller.quorum.voters must list this controller ({node_id}): the controllers of a static \
                     quorum are its voters (a controller joins a dynamic quorum formatted --no-initial-controllers)"
                );
            }
            Ok(())
        };
        let roles = match (roles.is_empty(), broker, controller) {
            (true, _, _) => Roles::Combined,
            (false, true, false) => Roles::Broker,
            (false, true, true) => {
                // One voter of several (combined nodes of a Ketch quorum) or the only one.
                a_voter()?;
                // With a controller listener other brokers can join: a cluster's node. Without one
                // nothing can reach the controller: one node, as with no process.roles.
                match has_controller_listener(props, &controller_listener_names) {
                    false if voters.len() > 1 => anyhow::bail!(
                        "process.roles=broker,controller with several voters needs a controller listener (a listener \
                         named in controller.listener.names)"
                    ),
                    false => Roles::Combined,
                    true => Roles::BrokerController,
                }
            }
            (false, false, true) => {
                // A controller-only node may be one voter of several (a Ketch quorum, issue 15).
                a_voter()?;
                if voters.is_empty() && bootstrap_servers.is_empty() {
                    anyhow::bail!(
                        "process.roles=controller needs controller.quorum.voters (this node ({node_id}) only) or \
                         controller.quorum.bootstrap.servers (its own controller listener)"
                    );
                }
                Roles::Controller
            }
            _ => anyhow::bail!("process.roles is empty"),
        };
        if roles == Roles::Broker {
            if voters.is_empty() && bootstrap_servers.is_empty() {
                anyhow::bail!(
                    "process.roles=broker needs controller.quorum.voters or controller.quorum.bootstrap.servers"
                );
            }
            if controller_listener_names.is_empty() {
                anyhow::bail!("controller.listener.names must contain at least one value when running KRaft with just the broker role");
            }
        }
        // A broker of a quorum connects to a controller, and a voter to the other voters.
        let controller_security = match (&roles, controller_listener_names.first()) {
            (Roles::Broker | Roles::BrokerController, Some(listener)) => {
                ClientSecurity::for_listener(props, listener, "sasl.mechanism.controller.protocol")?
            }
            (Roles::Controller, Some(listener)) if voters.len() > 1 => {
                ClientSecurity::for_listener(props, listener, "sasl.mechanism.controller.protocol")?
            }
            _ => ClientSecurity::plaintext(),
        };
        Ok(NodeConfig {
            roles,
            node_id,
            voters,
            bootstrap_servers,
            initial_voters: None,
            observer: false,
            controller_listener_names,
            heartbeat_interval_ms: ms("broker.heartbeat.interval.ms", 2000)?.max(1),
            session_timeout_ms: ms("broker.session.timeout.ms", 9000)?,
            replica_lag_time_max_ms: ms("replica.lag.time.max.ms", 30_000)?.max(1),
            request_timeout_ms: ms("controller.quorum.request.timeout.ms", 2000)?.max(1),
            fetch_timeout_ms: ms("controller.quorum.fetch.timeout.ms", 2000)?.max(1),
            rack: get("broker.rack").map(str::to_string),
            controller_security,
        })
    }

    /// A controller without `controller.quorum.voters` takes its voters from the bootstrap
    /// checkpoint that `format --standalone / --initial-controllers` wrote into `metadata_dir`
    /// (KIP-853: reached on the first controller listener's endpoint they list); without one,
    /// its `controller.quorum.bootstrap.servers` must name its own controller listener only (the
    /// only voter, as Kafka's `server.properties` formatted `--standalone` before KIP-853's
    /// checkpoint existed here).
    pub fn resolve_bootstrap_voters(
        &mut self,
        props: &Properties,
        metadata_dir: &std::path::Path,
    ) -> anyhow::Result<()> {
        if !self.voters.is_empty()
            || !matches!(self.roles, Roles::Controller | Roles::BrokerController | Roles::Combined)
        {
            return Ok(());
        }
        let log_dir = metadata_dir.join(crate::raft::METADATA_LOG_DIR_NAME);
        let Some(initial) = crate::raft::snapshot::read_bootstrap_voters(&log_dir)? else {
            let others = !self.bootstrap_servers.is_empty()
                && !bootstraps_itself(props, &self.bootstrap_servers, &self.controller_listener_names)?;
            if others && matches!(self.roles, Roles::Controller | Roles::BrokerController) {
                // (Kafka's `--no-initial-controllers`: an observer of the quorum until added; a
                // combined node's broker half registers with whichever voter leads.)
                let listener = self.controller_listener_names.first().cloned().unwrap_or_default();
                self.controller_security =
                    ClientSecurity::for_listener(props, &listener, "sasl.mechanism.controller.protocol")?;
                self.observer = true;
                return Ok(());
            }
            if others {
                anyhow::bail!(
                    "controller.quorum.bootstrap.servers names other controllers but {} holds no initial voters: \
                     format it with --initial-controllers (or --standalone), or list controller.quorum.voters",
                    metadata_dir.display()
                );
            }
            return Ok(());
        };
        let listener = self.controller_listener_names.first().cloned().unwrap_or_default();
        let mut voters = Vec::new();
        for voter in &initial {
            let Some((_, host, port)) = voter.endpoints.iter().find(|e| e.0 == listener) else {
                anyhow::bail!("initial voter {} has no endpoint for the controller listener {listener}", voter.id);
            };
            voters.push(Voter { id: voter.id, host: host.clone(), port: *port });
        }
        anyhow::ensure!(
            voters.iter().any(|v| v.id == self.node_id),
            "this controller ({}) is not one of the initial voters in {}: format it with --no-initial-controllers to \
             join the quorum as an observer (then `kafka-metadata-quorum add-controller`)",
            self.node_id,
            metadata_dir.display()
        );
        if self.roles == Roles::Controller {
            self.controller_security =
                ClientSecurity::for_listener(props, &listener, "sasl.mechanism.controller.protocol")?;
        }
        self.voters = voters;
        self.initial_voters = Some(initial);
        Ok(())
    }

    /// Where to look for the quorum: the voters, else the bootstrap servers.
    pub fn quorum_addrs(&self) -> Vec<String> {
        if self.voters.is_empty() {
            self.bootstrap_servers.clone()
        } else {
            self.voters.iter().map(Voter::addr).collect()
        }
    }

    pub fn voter(&self, id: i32) -> Option<&Voter> {
        self.voters.iter().find(|v| v.id == id)
    }
}

/// Whether `controller.quorum.bootstrap.servers` names one server only, at the port of one of
/// this node's controller listeners (`listeners` entries named in `controller.listener.names`).
fn bootstraps_itself(props: &Properties, servers: &[String], controller_listeners: &[String]) -> anyhow::Result<bool> {
    let [server] = servers else {
        return Ok(false);
    };
    let Some(listeners) = props.get("listeners") else {
        return Ok(false);
    };
    let listeners = crate::config::Listener::parse_list("listeners", listeners)?;
    let port = server.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok());
    Ok(listeners.iter().any(|l| controller_listeners.contains(&l.name) && Some(l.port) == port && l.port != 0))
}

/// Whether `listeners` has an entry named in `controller.listener.names`.
fn has_controller_listener(props: &Properties, controller_listeners: &[String]) -> bool {
    let listeners = props.get("listeners").and_then(|l| crate::config::Listener::parse_list("listeners", l).ok());
    listeners.is_some_and(|all| all.iter().any(|l| controller_listeners.contains(&l.name)))
}

/// `id@host:port`, as `controller.quorum.voters` lists them.
pub(crate) fn parse_voter(text: &str) -> anyhow::Result<Voter> {
    let bad = || anyhow::anyhow!("controller.quorum.voters: {text:?} is not id@host:port");
    let (id, addr) = text.split_once('@').ok_or_else(bad)?;
    let (host, port) = addr.rsplit_once(':').ok_or_else(bad)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(Voter { id: id.parse().map_err(|_| bad())?, host: host.to_string(), port: port.parse().map_err(|_| bad())? })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> anyhow::Result<NodeConfig> {
        let props: Properties = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        NodeConfig::from_properties(&props, 2)
    }

    #[test]
    fn roles_and_quorum_as_kafka_names_them() {
        assert_eq!(config(&[]).unwrap().roles, Roles::Combined);
        let c = config(&[
            ("process.roles", "broker"),
            ("controller.quorum.voters", "3000@127.0.0.1:9093, 3001@[::1]:9094"),
            ("controller.listener.names", "CONTROLLER"),
        ])
        .unwrap();
        assert_eq!(c.roles, Roles::Broker);
        assert_eq!(c.voters[1], Voter { id: 3001, host: "::1".into(), port: 9094 });
        assert_eq!(c.quorum_addrs(), vec!["127.0.0.1:9093".to_string(), "[::1]:9094".to_string()]);
        assert!(config(&[("process.roles", "broker")]).is_err(), "no quorum");
        assert!(config(&[("process.roles", "broker"), ("controller.quorum.bootstrap.servers", "h:1")]).is_err());
        assert!(config(&[("process.roles", "controller")]).is_err(), "no voters");
        // A controller may be one voter of several, never a controller outside the voters.
        let quorum = [("process.roles", "controller"), ("controller.quorum.voters", "1@h:1,2@h:2,3@h:3")];
        assert_eq!(config(&quorum).unwrap().roles, Roles::Controller);
        assert!(config(&[("process.roles", "controller"), ("controller.quorum.voters", "1@h:1,3@h:3")]).is_err());
        assert_eq!(
            config(&[("process.roles", "controller"), ("controller.quorum.voters", "2@h:1")]).unwrap().roles,
            Roles::Controller
        );
        assert!(
            config(&[("process.roles", "broker,controller"), ("controller.quorum.voters", "1@h:1,2@h:2")]).is_err(),
            "several voters and no controller listener"
        );
        assert_eq!(
            config(&[("process.roles", "broker,controller"), ("controller.quorum.voters", "2@h:1")]).unwrap().roles,
            Roles::Combined,
            "no controller listener: nothing can join, one node"
        );
        let combined = [
            ("process.roles", "broker,controller"),
            ("controller.listener.names", "CONTROLLER"),
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
        ];
        let with = |extra: (&'static str, &'static str)| {
            let mut pairs = combined.to_vec();
            pairs.push(extra);
            config(&pairs)
        };
        assert_eq!(with(("controller.quorum.voters", "2@h:9093")).unwrap().roles, Roles::BrokerController);
        // One voter of several combined nodes; never a combined node outside the voters.
        assert_eq!(with(("controller.quorum.voters", "2@h:9093,3@h:9093")).unwrap().roles, Roles::BrokerController);
        assert!(with(("controller.quorum.voters", "1@h:9093,3@h:9093")).is_err(), "not a voter");
        // Kafka 4.1's own server.properties (formatted --standalone): its one bootstrap server
        // is its controller listener.
        assert_eq!(
            with(("controller.quorum.bootstrap.servers", "localhost:9093")).unwrap().roles,
            Roles::BrokerController
        );
        // Other servers: the initial voters formatted into the metadata directory (KIP-853), or
        // none (`--no-initial-controllers`): an observer until added.
        let dir = tempfile::tempdir().unwrap();
        let resolve = |servers: &'static str| {
            let mut pairs = combined.to_vec();
            pairs.push(("controller.quorum.bootstrap.servers", servers));
            let props: Properties = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let mut node = NodeConfig::from_properties(&props, 2)?;
            node.resolve_bootstrap_voters(&props, dir.path()).map(|_| node)
        };
        let alone = resolve("localhost:9093").unwrap();
        assert!(alone.voters.is_empty() && !alone.observer, "the only voter");
        assert!(resolve("localhost:9094").unwrap().observer, "someone else's");
        assert!(resolve("a:9093,b:9093").unwrap().observer, "several");
        let voter = |id, port| crate::raft::voters_record::VoterInfo {
            id,
            directory_id: uuid::Uuid::nil(),
            endpoints: vec![("CONTROLLER".into(), "h".into(), port)],
        };
        let log_dir = dir.path().join(crate::raft::METADATA_LOG_DIR_NAME);
        crate::raft::snapshot::write_bootstrap(&log_dir, &[voter(1, 9091), voter(2, 9093)], 0).unwrap();
        let node = resolve("a:9093,b:9093").unwrap();
        assert_eq!(node.voters.iter().map(|v| (v.id, v.port)).collect::<Vec<_>>(), vec![(1, 9091), (2, 9093)]);
        crate::raft::snapshot::write_bootstrap(&log_dir, &[voter(1, 9091), voter(3, 9093)], 0).unwrap();
        assert!(resolve("a:9093,b:9093").is_err(), "not one of the initial voters");
        assert!(Roles::BrokerController.is_cluster_broker() && Roles::Broker.is_cluster_broker());
        assert!(!Roles::Combined.is_cluster_broker() && !Roles::Controller.is_cluster_broker());
        let no_controller_listener = config(&[
            ("process.roles", "broker,controller"),
            ("controller.listener.names", "CONTROLLER"),
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
        ]);
        assert_eq!(no_controller_listener.unwrap().roles, Roles::Combined, "nothing can reach a controller");
        assert!(config(&[("process.roles", "broker"), ("controller.quorum.voters", "x@h:1")]).is_err());
    }
}
