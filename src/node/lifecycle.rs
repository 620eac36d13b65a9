//! A broker's life in a KRaft cluster, as Kafka's `BrokerLifecycleManager` leads it: register
//! with the active controller (BrokerRegistration v4: incarnation id, listeners, supported
//! features, rack, log directories), then heartbeat every `broker.heartbeat.interval.ms`
//! (BrokerHeartbeat v1 with the offset of the metadata image applied so far), asking to stay
//! fenced until the controller says this broker has caught up with the metadata log, and to
//! be unfenced after; at shutdown, heartbeat with `want_shut_down` until the controller lets
//! the broker go (controlled shutdown), bounded in time.
//!
//! Invariants: a heartbeat carries the broker epoch of the registration it follows; a stale epoch
//! (the controller fenced this incarnation out) or an unknown broker leads to a new
//! registration; at most one request to the controller is in flight.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerRegistrationRequest};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use uuid::Uuid;

use super::client::Connection;
use super::NodeConfig;
use crate::metadata::image::MetadataImage;
use crate::raft::observer::{Leader, ObserverHandle};

const REGISTRATION_VERSION: i16 = 4;
const HEARTBEAT_VERSION: i16 = 1;
/// Kafka's `Errors` codes met here.
const STALE_BROKER_EPOCH: i16 = 77;
const NOT_CONTROLLER: i16 = 41;
const BROKER_ID_NOT_REGISTERED: i16 = 102;
/// How soon a request that failed on an open connection is retried (Kafka's first backoff).
const RETRY_AFTER_DISCONNECT: Duration = Duration::from_millis(100);
/// Between heartbeats while catching up with the metadata log (Kafka's STARTING state).
const STARTING_HEARTBEAT: Duration = Duration::from_millis(10);

/// The features this broker supports, as (name, min, max) levels. `metadata.version` 7..27 is
/// Kafka 3.3-IV3 .. 4.1-IV1: every metadata record version of Kafka 4.1's schemas is decoded
/// (`metadata::records`). `group.version` 1 is KIP-848 consumer groups (`group::consumer`).
pub const SUPPORTED_FEATURES: &[(&str, i16, i16)] = &[
    ("metadata.version", 7, 27),
    ("kraft.version", 0, 1),
    ("transaction.version", 0, 2),
    ("eligible.leader.replicas.version", 0, 1),
    ("group.version", 0, 1),
];

/// One of this broker's listeners, as it registers it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Kafka's `SecurityProtocol` id: PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3.
    pub security_protocol: i16,
}

/// Where the broker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Registering,
    /// Registered with this broker epoch, fenced (catching up).
    Fenced(i64),
    /// Unfenced: partitions may be led here.
    Running(i64),
    /// The controller let it go (or it gave up waiting).
    ShutDown,
}

/// The broker epochs of KIP-966's clean shutdown detection.
#[derive(Debug, Clone)]
pub struct Epochs {
    /// Registered with as `PreviousBrokerEpoch` (the epoch the last clean shutdown recorded,
    /// -1 after a crash): the controller keeps this broker's ELR memberships only when it is the
    /// epoch it last registered.
    pub previous: i64,
    /// Set to each new registration's epoch (the clean shutdown marker records it).
    pub current: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

pub struct Lifecycle {
    config: NodeConfig,
    epochs: Epochs,
    cluster_id: String,
    incarnation_id: Uuid,
    endpoints: Vec<Endpoint>,
    log_dirs: Vec<Uuid>,
    metadata: ObserverHandle,
    state_tx: watch::Sender<State>,
    conn: Option<Connection>,
}

impl Lifecycle {
    pub fn new(
        config: NodeConfig,
        cluster_id: String,
        endpoints: Vec<Endpoint>,
        log_dirs: Vec<Uuid>,
        metadata: ObserverHandle,
        epochs: Epochs,
    ) -> (Lifecycle, watch::Receiver<State>) {
        let (state_tx, state) = watch::channel(State::Registering);
        let incarnation_id = Uuid::from_bytes(crate::metadata::random_bytes());
        let lifecycle = Lifecycle {
            config,
            epochs,
            cluster_id,
            incarnation_id,
            endpoints,
            log_dirs,
            metadata,
            state_tx,
            conn: None,
        };
        (lifecycle, state)
    }

    /// Registers and heartbeats until `stop` turns true, then shuts down with the controller's
    /// leave, waiting at most `shutdown_wait`.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>, shutdown_wait: Duration) {
        let interval = Duration::from_millis(self.config.heartbeat_interval_ms);
        let mut epoch: Option<i64> = None;
        let mut caught_up = false;
        let mut failures = 0u32;
        loop {
            if *stop.borrow() {
                break;
            }
            let had_connection = self.conn.is_some();
            // Kafka's BrokerLifecycleManager: a heartbeat right after registering, then every
            // 10 ms while catching up (STARTING) so that a broker with nothing to recover is
            // unfenced in moments; every interval once caught up.
            let mut next = interval;
            let step = match epoch {
                None => self.register().await.map(|e| {
                    next = Duration::ZERO;
                    tracing::info!(broker_epoch = e, "registered with the controller");
                    epoch = Some(e);
                    self.epochs.current.store(e, std::sync::atomic::Ordering::Release);
                    caught_up = false;
                    self.state_tx.send_replace(State::Fenced(e));
                }),
                Some(e) => match self.heartbeat(e, !caught_up, false).await {
                    Ok(beat) => {
                        if !caught_up {
                            next = STARTING_HEARTBEAT;
                        }
                        if beat.is_caught_up && !caught_up {
                            tracing::info!("caught up with the metadata log: asking to be unfenced");
                            caught_up = true;
                        }
                        let state = if beat.is_fenced { State::Fenced(e) } else { State::Running(e) };
                        if *self.state_tx.borrow() != state {
                            tracing::info!(?state, "broker state");
                            self.state_tx.send_replace(state);
                        }
                        Ok(())
                    }
                    Err(HeartbeatError::Reregister(why)) => {
                        tracing::warn!(why, "registering again");
                        epoch = None;
                        Ok(())
                    }
                    Err(HeartbeatError::Other(e)) => Err(e),
                },
            };
            // A request that failed on an open connection (it was closed under it) is retried on
            // a new one soon, as Kafka's broker does after a disconnect: the controller fences a
            // broker whose heartbeat connection closed and that does not heartbeat again within
            // about two intervals.
            let mut wait = next;
            if let Err(e) = step {
                wait = interval;
                failures += 1;
                if had_connection {
                    wait = interval.min(RETRY_AFTER_DISCONNECT);
                }
                // Quiet while the controller is being found; loud when it keeps refusing.
                if failures % 20 == 5 {
                    tracing::warn!(error = %e, failures, "request to the controller failed");
                } else {
                    tracing::debug!(error = %e, "request to the controller failed");
                }
                self.conn = None;
            } else {
                failures = 0;
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
        if let Some(e) = epoch {
            self.controlled_shutdown(e, interval, shutdown_wait).await;
        }
        self.state_tx.send_replace(State::ShutDown);
    }

    /// Heartbeats with `want_shut_down` until the controller answers `should_shut_down`.
    async fn controlled_shutdown(&mut self, epoch: i64, interval: Duration, wait: Duration) {
        let deadline = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < deadline {
            match self.heartbeat(epoch, false, true).await {
                Ok(beat) if beat.should_shut_down => {
                    tracing::info!("the controller completed this broker's controlled shutdown");
                    return;
                }
                Ok(_) => {}
                Err(HeartbeatError::Reregister(_)) => return,
                Err(HeartbeatError::Other(_)) => self.conn = None,
            }
            tokio::time::sleep(interval.min(Duration::from_millis(200))).await;
        }
        tracing::warn!("controlled shutdown not confirmed by the controller in time: stopping anyway");
    }

    async fn controller(&mut self) -> anyhow::Result<&mut Connection> {
        let leader: Option<Leader> = self.metadata.leader.borrow().clone();
        let Some(leader) = leader else { anyhow::bail!("the active controller is not known yet") };
        if self.conn.as_ref().is_none_or(|c| c.addr() != leader.addr) {
            let timeout = Duration::from_millis(self.config.request_timeout_ms);
            let client_id = format!("broker-{}-lifecycle", self.config.node_id);
            self.conn =
                Some(Connection::connect(&leader.addr, &client_id, timeout, &self.config.controller_security).await?);
        }
        Ok(self.conn.as_mut().expect("connected"))
    }

    async fn register(&mut self) -> anyhow::Result<i64> {
        let request = BrokerRegistrationRequest::default()
            .with_broker_id(self.config.node_id.into())
            .with_cluster_id(StrBytes::from_string(self.cluster_id.clone()))
            .with_incarnation_id(self.incarnation_id)
            .with_listeners(
                self.endpoints
                    .iter()
                    .map(|e| {
                        Listener::default()
                            .with_name(StrBytes::from_string(e.name.clone()))
                            .with_host(StrBytes::from_string(e.host.clone()))
                            .with_port(e.port)
                            .with_security_protocol(e.security_protocol)
                    })
                    .collect(),
            )
            .with_features(
                SUPPORTED_FEATURES
                    .iter()
                    .map(|(name, min, max)| {
                        Feature::default()
                            .with_name(StrBytes::from_static_str(name))
                            .with_min_supported_version(*min)
                            .with_max_supported_version(*max)
                    })
                    .collect(),
            )
            .with_rack(self.config.rack.clone().map(StrBytes::from_string))
            .with_log_dirs(self.log_dirs.clone())
            .with_previous_broker_epoch(self.epochs.previous);
        let conn = self.controller().await?;
        let response = conn.send(REGISTRATION_VERSION, &request, Duration::ZERO).await?;
        if response.error_code != 0 {
            if response.error_code == NOT_CONTROLLER {
                self.conn = None;
            }
            let why = match response.error_code {
                35 => {
                    " (UNSUPPORTED_VERSION: a finalized feature level is outside what this broker supports, see \
                       node::lifecycle::SUPPORTED_FEATURES)"
                }
                101 => " (DUPLICATE_BROKER_REGISTRATION: an earlier process with this node.id is still registered)",
                104 => " (INCONSISTENT_CLUSTER_ID)",
                _ => "",
            };
            anyhow::bail!("registration refused with error {}{why}", response.error_code);
        }
        Ok(response.broker_epoch)
    }

    async fn heartbeat(&mut self, epoch: i64, want_fence: bool, want_shut_down: bool) -> Result<Beat, HeartbeatError> {
        let image: Arc<MetadataImage> = self.metadata.image.borrow().clone();
        let request = BrokerHeartbeatRequest::default()
            .with_broker_id(self.config.node_id.into())
            .with_broker_epoch(epoch)
            .with_current_metadata_offset(image.offset)
            .with_want_fence(want_fence)
            .with_want_shut_down(want_shut_down);
        let conn = self.controller().await.map_err(HeartbeatError::Other)?;
        let response = conn.send(HEARTBEAT_VERSION, &request, Duration::ZERO).await.map_err(HeartbeatError::Other)?;
        match response.error_code {
            0 => Ok(Beat {
                is_caught_up: response.is_caught_up,
                is_fenced: response.is_fenced,
                should_shut_down: response.should_shut_down,
            }),
            STALE_BROKER_EPOCH | BROKER_ID_NOT_REGISTERED => {
                Err(HeartbeatError::Reregister(format!("heartbeat error {}", response.error_code)))
            }
            NOT_CONTROLLER => {
                self.conn = None;
                Err(HeartbeatError::Other(anyhow::anyhow!("not the controller")))
            }
            code => Err(HeartbeatError::Other(anyhow::anyhow!("heartbeat error {code}"))),
        }
    }
}

struct Beat {
    is_caught_up: bool,
    is_fenced: bool,
    should_shut_down: bool,
}

enum HeartbeatError {
    Reregister(String),
    Other(anyhow::Error),
}
