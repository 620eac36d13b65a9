//! A controller-only node's network side (`process.roles=controller`): binds its controller
//! listeners, reads request frames, and answers each through `handlers::controller_apis`, one
//! request at a time per connection (as Kafka's channel muting does); a held Fetch holds only
//! its own connection. Plaintext listeners only for now (SSL and SASL controller listeners come
//! with the security issue). Each connection has an id; when one closes, the controller is told
//! (a broker whose heartbeats came on it is fenced unless it heartbeats again soon).
//!
//! Invariants: as the broker's connections (`connection.rs`): a frame over
//! `socket.request.max.bytes` or one the guard refuses closes that connection only, and memory
//! grows with bytes received, never with a claimed length; a request at a version the
//! controller does not serve closes the connection (ApiVersions gets KIP-511's answer).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::connection::{read_frame, Spares};
use crate::config::BrokerConfig;
use crate::controller::quorum::{ControllerSettings, QuorumController};
use crate::handlers::controller_apis::{self, ControllerListener};
use crate::metadata::log_dirs::LogDirs;
use crate::node::NodeConfig;
use crate::protocol::{self, ProtocolError};
use crate::raft::leader::LeaderEndpoint;

/// Runs a controller-only node until SIGTERM / ctrl-c.
pub async fn run(config: BrokerConfig, node: NodeConfig) -> anyhow::Result<()> {
    let log_dirs = LogDirs::open(&config)?;
    let controller = open(&config, &node, log_dirs.cluster_id(), log_dirs.first()).await?;
    let mut bound = Vec::new();
    for listener in &config.listeners {
        let host = if listener.host.is_empty() { "0.0.0.0" } else { listener.host.as_str() };
        bound.push((listener.name.clone(), TcpListener::bind((host, listener.port)).await?));
    }
    let mut lines = String::new();
    for (_, listener) in &bound {
        lines.push_str(&format!("ketch listening on {}\n", listener.local_addr()?));
    }
    let tasks = serve(&controller, &config, bound)?;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
    }
    super::shutdown_signal().await;
    tracing::info!("controller shutting down");
    stop(controller, tasks).await
}

/// Opens (or starts, with the bootstrap records) the metadata log in `metadata_dir` as the
/// active controller of this node's cluster.
pub async fn open(
    config: &BrokerConfig,
    node: &NodeConfig,
    cluster_id: &str,
    metadata_dir: &std::path::Path,
) -> anyhow::Result<Arc<QuorumController>> {
    let settings = ControllerSettings::from_config(config, node.node_id, node.session_timeout_ms as i64, cluster_id);
    let metadata_dir = metadata_dir.to_path_buf();
    let controller =
        Arc::new(tokio::task::spawn_blocking(move || QuorumController::open(&metadata_dir, settings)).await??);
    controller.read_acls_from_own_image();
    Ok(controller)
}

/// Serves `controller` on the bound controller listeners (named as in `config.listeners`), and
/// runs its timers: lapsed broker sessions, periodic elections. Returns the tasks, for `stop`.
pub fn serve(
    controller: &Arc<QuorumController>,
    config: &BrokerConfig,
    bound: Vec<(String, TcpListener)>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let mut tasks = Vec::new();
    for (name, listener) in bound {
        let addr = listener.local_addr()?;
        tracing::info!(listener = %name, %addr, "controller listening");
        let named = Arc::new(ControllerListener { name: name.clone(), endpoint: endpoint(config, &name, addr) });
        tasks.push(tokio::spawn(accept_loop(listener, named, controller.clone(), config.socket_request_max_bytes)));
    }
    tasks.push(tokio::spawn(expire_sessions(controller.clone())));
    let rebalance =
        config.properties.get("auto.leader.rebalance.enable").is_none_or(|v| v.trim().eq_ignore_ascii_case("true"));
    let interval_s: u64 = config
        .properties
        .get("leader.imbalance.check.interval.seconds")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(300);
    tasks.push(tokio::spawn(periodic_elections(controller.clone(), rebalance, interval_s.max(1))));
    Ok(tasks)
}

/// Where the controller says it is on listener `name` bound at `addr`: its advertised entry, else
/// the bound address (loopback for a wildcard one).
pub fn endpoint(config: &BrokerConfig, name: &str, addr: std::net::SocketAddr) -> LeaderEndpoint {
    let advertised = config.advertised_listeners.iter().find(|l| l.name == name);
    let bound_host = match addr.ip().is_unspecified() {
        true => "127.0.0.1".to_string(),
        false => addr.ip().to_string(),
    };
    match advertised {
        Some(l) if !l.host.is_empty() => LeaderEndpoint { host: l.host.clone(), port: l.port },
        Some(l) => LeaderEndpoint { host: bound_host, port: if l.port == 0 { addr.port() } else { l.port } },
        None => LeaderEndpoint { host: bound_host, port: addr.port() },
    }
}

/// Stops serving and closes the metadata log.
pub async fn stop(controller: Arc<QuorumController>, tasks: Vec<tokio::task::JoinHandle<()>>) -> anyhow::Result<()> {
    for task in tasks {
        task.abort();
    }
    tokio::task::spawn_blocking(move || controller.close()).await?;
    Ok(())
}

async fn accept_loop(
    listener: TcpListener,
    named: Arc<ControllerListener>,
    controller: Arc<QuorumController>,
    max_frame: usize,
) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let (named, controller) = (named.clone(), controller.clone());
                let connection = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::spawn(async move {
                    if let Err(e) = serve_connection(stream, &named, &controller, max_frame, (connection, peer)).await {
                        tracing::debug!(%peer, error = %e, "controller connection closed");
                    }
                    // However it ended (EOF, error): a broker that heartbeated on it may be gone.
                    controller.connection_closed(connection);
                });
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept on the controller listener");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Ids of the accepted connections (for the brokers' sessions: which one carried heartbeats).
static NEXT_CONNECTION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

async fn serve_connection(
    stream: TcpStream,
    named: &ControllerListener,
    controller: &QuorumController,
    max_frame: usize,
    connection: (u64, std::net::SocketAddr),
) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut spares = Spares::default();
    while let Some(frame) = read_frame(&mut reader, || max_frame, &mut spares).await? {
        let out = answer(frame, named, controller, connection).await?;
        write.write_all(&out).await?;
    }
    Ok(())
}

/// The response frame for one request frame (an error closes the connection).
async fn answer(
    frame: Bytes,
    named: &ControllerListener,
    controller: &QuorumController,
    connection: (u64, std::net::SocketAddr),
) -> anyhow::Result<Bytes> {
    match protocol::decode_served_request(frame, controller_apis::is_served) {
        Ok(request) => {
            let (api_key, version, correlation_id) = (request.api_key, request.version, request.header.correlation_id);
            let body = controller_apis::handle(controller, named, request, connection).await;
            Ok(protocol::encode_response(api_key, version, correlation_id, &body)?.freeze())
        }
        Err(ProtocolError::UnsupportedVersion { api_key: ApiKey::ApiVersions, correlation_id, .. }) => {
            let body = ResponseKind::ApiVersions(controller_apis::unsupported_api_versions());
            Ok(protocol::encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)?.freeze())
        }
        Err(e) => anyhow::bail!("{e}"),
    }
}

/// How often lapsed broker sessions are looked for (Kafka checks on a timer too).
const SESSION_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// Fences brokers whose `broker.session.timeout.ms` lapsed without a heartbeat.
async fn expire_sessions(controller: Arc<QuorumController>) {
    let mut ticks = tokio::time::interval(SESSION_CHECK_INTERVAL);
    loop {
        ticks.tick().await;
        match controller.expire_sessions() {
            Ok(0) => {}
            Ok(n) => tracing::info!(fenced = n, "broker sessions lapsed: fenced"),
            Err(e) => tracing::error!(error = %e, "fencing lapsed brokers not written"),
        }
    }
}

/// Elections per change of the periodic tasks (Kafka's `maxElectionsPerImbalance`).
const MAX_ELECTIONS_PER_CHANGE: usize = 1_000;

/// Kafka's periodic elections: preferred leaders back (`auto.leader.rebalance.enable`, every
/// `leader.imbalance.check.interval.seconds`) and unclean elections where a topic allows them
/// (every 5 s, Kafka's `UNCLEAN_LEADER_ELECTION`).
async fn periodic_elections(controller: Arc<QuorumController>, rebalance: bool, interval_s: u64) {
    use crate::controller::topic_changes::{balance_leaders, elect_unclean_leaders};
    let mut preferred = tokio::time::interval(std::time::Duration::from_secs(interval_s));
    let mut unclean = tokio::time::interval(std::time::Duration::from_secs(5));
    preferred.tick().await;
    loop {
        let config = controller.settings.config;
        let decided = tokio::select! {
            _ = preferred.tick(), if rebalance => {
                controller.change(|d| balance_leaders(d.image, MAX_ELECTIONS_PER_CHANGE))
            }
            _ = unclean.tick() => {
                controller.change(|d| elect_unclean_leaders(d.image, &config, MAX_ELECTIONS_PER_CHANGE))
            }
        };
        if let Err(e) = decided {
            tracing::error!(error = %e, "periodic elections not written");
        }
    }
}
