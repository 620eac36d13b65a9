//! A controller-only node's network side (`process.roles=controller`): binds its controller
//! listeners, reads request frames, and answers each through `handlers::controller_apis`, one
//! request at a time per connection (as Kafka's channel muting does); a held Fetch holds only
//! its own connection. A controller listener is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL as
//! `listener.security.protocol.map` says, configured as a broker's listeners are (`tls.rs`,
//! `security::sasl`); SCRAM logins are checked against the credentials in the controller's own
//! image. The principal (SASL's, else the client certificate's, else `User:ANONYMOUS` when no
//! certificate was sent; a certificate that names none closes the connection) is what the
//! controller authorizes. Each connection has an id; when one closes, the controller is told
//! (a broker whose heartbeats came on it is fenced unless it heartbeats again soon). New
//! connections pass Kafka's connection limits as a broker's do (`limits.rs`: `max.connections`,
//! per listener, `max.connections.per.ip` and its overrides, the creation rates).
//!
//! Invariants: as the broker's connections (`connection.rs`): a frame over
//! `socket.request.max.bytes` or one the guard refuses closes that connection only, and memory
//! grows with bytes received, never with a claimed length; a request at a version the
//! controller does not serve closes the connection (ApiVersions gets KIP-511's answer).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::connection::{read_frame, Spares, TLS_HANDSHAKE_TIMEOUT};
use super::request_queue::RequestQueue;
use super::tls::{self, TlsListener};
use crate::config::{security_protocol, BrokerConfig, SecurityProtocol};
use crate::controller::quorum::{ControllerSettings, QuorumController};
use crate::handlers::controller_apis::{self, ControllerListener};
use crate::metadata::log_dirs::LogDirs;
use crate::node::NodeConfig;
use crate::protocol::{self, ProtocolError};
use crate::raft::leader::LeaderEndpoint;
use crate::security::sasl::{self, Authenticator, ListenerSasl, Step};
use crate::security::scram_store::ScramStore;
use crate::security::token_store::TokenStore;

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
    if node.voters.len() > 1 || node.initial_voters.is_some() || node.observer {
        // One voter of several, or of a dynamic quorum (KIP-853: voters may be added, even to
        // one): the quorum elects the active controller (issue 15).
        let voter = voter_settings(config, node, cluster_id)?;
        let controller = Arc::new(QuorumController::open_voter(&metadata_dir, settings, voter)?);
        controller.read_acls_from_own_image();
        tokio::spawn(controller.clone().follow_leadership(metadata_dir));
        // KIP-919: registered with whichever controller is active, with this node's controller
        // listeners as configured.
        let listeners: Vec<(String, String, u16, i16)> = config
            .listeners
            .iter()
            .filter(|l| node.controller_listener_names.contains(&l.name))
            .map(|l| {
                let host = if l.host.is_empty() { "127.0.0.1".to_string() } else { l.host.clone() };
                (l.name.clone(), host, l.port, protocol_id(security_protocol(&config.properties, &l.name)))
            })
            .collect();
        let request = crate::controller::registration::request(
            node.node_id,
            uuid::Uuid::from_u128(rand::random::<u128>()),
            &listeners,
        );
        tokio::spawn(controller.clone().keep_registered(request, node.controller_security.clone()));
        return Ok(controller);
    }
    let controller =
        Arc::new(tokio::task::spawn_blocking(move || QuorumController::open(&metadata_dir, settings)).await??);
    controller.read_acls_from_own_image();
    Ok(controller)
}

/// Kafka's `SecurityProtocol` id.
fn protocol_id(protocol: SecurityProtocol) -> i16 {
    match protocol {
        SecurityProtocol::Plaintext => 0,
        SecurityProtocol::Ssl => 1,
        SecurityProtocol::SaslPlaintext => 2,
        SecurityProtocol::SaslSsl => 3,
    }
}

/// This voter's settings: the voters (`controller.quorum.voters`) reached on the first of
/// `controller.listener.names`, and Kafka's quorum timeouts.
fn voter_settings(
    config: &BrokerConfig,
    node: &NodeConfig,
    cluster_id: &str,
) -> anyhow::Result<crate::raft::voter::VoterSettings> {
    let listener = node.controller_listener_names.first().cloned().unwrap_or_else(|| "CONTROLLER".into());
    let endpoint = |host: &str, port: u16| crate::raft::voter_wire::Endpoint {
        listener: listener.clone(),
        host: host.to_string(),
        port,
    };
    let mut voters: std::collections::BTreeMap<i32, _> =
        node.voters.iter().map(|v| (v.id, endpoint(&v.host, v.port))).collect();
    if node.observer {
        // Its own endpoint (what it names itself by), and the bootstrap servers under Kafka's ids
        // for them (-2, -3, ...): the core's only way to the quorum until it learns the voters.
        let own = config.listeners.iter().find(|l| l.name == listener).ok_or_else(|| {
            anyhow::anyhow!("a controller needs a listener named in controller.listener.names ({listener})")
        })?;
        let own_host = if own.host.is_empty() { "127.0.0.1" } else { own.host.as_str() };
        voters.insert(node.node_id, endpoint(own_host, own.port));
        for (i, server) in node.bootstrap_servers.iter().enumerate() {
            let server = crate::node::parse_voter(&format!("{}@{server}", -2 - i as i32))
                .map_err(|_| anyhow::anyhow!("controller.quorum.bootstrap.servers: {server} is not host:port"))?;
            // (Not itself: bootstrap lists often name every controller.)
            if (server.host.as_str(), server.port) != (own_host, own.port) {
                voters.insert(server.id, endpoint(&server.host, server.port));
            }
        }
    }
    let ms = |key: &str, default: i64| crate::config::int_property(&config.properties, key, default, 0, i64::MAX);
    Ok(crate::raft::voter::VoterSettings {
        node_id: node.node_id,
        voters,
        cluster_id: cluster_id.to_string(),
        election_timeout_ms: ms("controller.quorum.election.timeout.ms", 1000)?.max(1),
        fetch_timeout_ms: node.fetch_timeout_ms as i64,
        election_backoff_max_ms: ms("controller.quorum.election.backoff.max.ms", 1000)?.max(1),
        request_timeout_ms: node.request_timeout_ms as i64,
        security: node.controller_security.clone(),
        snapshots: crate::raft::voter::SnapshotPolicy::from_config(config)?,
        directory_id: crate::metadata::directory_id_of(config.log_dir())?.unwrap_or_default(),
        initial_voters: node.initial_voters.clone(),
        writer_gate: Default::default(),
        observer: node.observer,
    })
}

/// Serves `controller` on the bound controller listeners (named as in `config.listeners`), and
/// runs its timers: lapsed broker sessions, periodic elections. Returns the tasks, for `stop`.
pub fn serve(
    controller: &Arc<QuorumController>,
    config: &BrokerConfig,
    bound: Vec<(String, TcpListener)>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let mut tasks = Vec::new();
    let weak = Arc::downgrade(controller);
    let scram = Arc::new(ScramStore::of_image(Box::new(move || weak.upgrade().map(|c| c.image()))));
    // Delegation token logins on the controller's own SASL listeners, from its image.
    let token_settings = controller.settings.tokens.clone();
    let weak = Arc::downgrade(controller);
    let tokens = TokenStore::of_image(token_settings.clone(), Box::new(move || weak.upgrade().map(|c| c.image())));
    scram.attach_tokens(Arc::new(tokens));
    // Kafka's ConnectionQuotas on the controller's listeners too (max.connections, per
    // listener, per IP and its overrides, the creation rates); no listener of a controller is
    // protected.
    let names: Vec<Arc<str>> = bound.iter().map(|(name, _)| Arc::from(name.as_str())).collect();
    let window = crate::quota::rate::Window::from_properties(&config.properties)?;
    let limits = super::limits::ConnectionLimits::new(&names, "", window);
    // The controller's own request queue (Kafka's controller has its own socket server): here
    // only its memory pool bounds anything, as a controller connection reads no frame ahead.
    let queue = super::request_queue::RequestQueue::new(super::request_queue::Bounds::of(config));
    for (name, listener) in bound {
        let addr = listener.local_addr()?;
        tracing::info!(listener = %name, %addr, "controller listening");
        let named = Arc::new(ControllerListener {
            name: name.clone(),
            protocol: crate::config::security_protocol(&config.properties, &name),
            endpoint: endpoint(config, &name, addr),
        });
        let secured = Arc::new(Secured::of(config, &name, scram.clone())?);
        let served = (config.socket_request_max_bytes, secured, queue.clone());
        let admission = (limits.clone(), Arc::new(config.properties.clone()));
        tasks.push(tokio::spawn(accept_loop(listener, named, controller.clone(), served, admission)));
    }
    tasks.push(tokio::spawn(expire_sessions(controller.clone())));
    if token_settings.enabled() {
        tasks.push(tokio::spawn(sweep_tokens(controller.clone(), token_settings.check_interval_ms as u64)));
    }
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

/// A controller listener's TLS and SASL, when its security protocol has them.
struct Secured {
    properties: crate::config::Properties,
    tls: Option<TlsListener>,
    sasl: Option<Arc<ListenerSasl>>,
    scram: Arc<ScramStore>,
}

impl Secured {
    fn of(config: &BrokerConfig, name: &str, scram: Arc<ScramStore>) -> anyhow::Result<Secured> {
        let props = &config.properties;
        let protocol = security_protocol(props, name);
        let tls = match protocol {
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => Some(tls::listener(props, name)?),
            SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
        };
        let sasl = match protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                Some(Arc::new(sasl::listener_config(props, name)?))
            }
            SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
        };
        Ok(Secured { properties: props.clone(), tls, sasl, scram })
    }
}

async fn accept_loop(
    listener: TcpListener,
    named: Arc<ControllerListener>,
    controller: Arc<QuorumController>,
    (max_frame, secured, queue): (usize, Arc<Secured>, Arc<RequestQueue>),
    (limits, properties): (Arc<super::limits::ConnectionLimits>, Arc<crate::config::Properties>),
) {
    let listener_name: Arc<str> = Arc::from(named.name.as_str());
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let settings_now = || limits.settings(&properties, &listener_name);
                let slot = match limits.admit(&listener_name, peer.ip(), settings_now, None).await {
                    super::limits::Admission::Accepted(slot) => slot,
                    super::limits::Admission::Refused { max } => {
                        tracing::info!(
                            "Rejected connection from {}, address already has the configured maximum of {max} connections.",
                            peer.ip().to_canonical()
                        );
                        continue;
                    }
                    super::limits::Admission::Throttled(_) => continue, // (no IP rate quota here)
                };
                let (named, controller, secured, queue) =
                    (named.clone(), controller.clone(), secured.clone(), queue.clone());
                let connection = NEXT_CONNECTION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tokio::spawn(async move {
                    let served = serve_connection(
                        stream,
                        &named,
                        &controller,
                        (max_frame, &secured, &queue),
                        (connection, peer),
                    );
                    if let Err(e) = crate::fatal::client_scope(served).await {
                        tracing::debug!(%peer, error = %e, "controller connection closed");
                    }
                    // However it ended (EOF, error): a broker that heartbeated on it may be gone.
                    controller.connection_closed(connection);
                    drop(slot);
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
    (max_frame, secured, queue): (usize, &Secured, &RequestQueue),
    connection: (u64, std::net::SocketAddr),
) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let sasl = secured.sasl.clone().map(Authenticator::new);
    let principal = tls::ANONYMOUS.to_string();
    let failed_delay = sasl::failed_authentication_delay(&secured.properties);
    let served = Served { named, controller, max_frame, queue, scram: &secured.scram, connection, failed_delay };
    match &secured.tls {
        None => {
            let (read, write) = stream.into_split();
            served.exchange(BufReader::new(read), write, sasl, principal).await
        }
        Some(tls) => {
            let (acceptor, mapper) = tls.current(&secured.properties).await;
            let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tokio::time::sleep(sasl::failed_authentication_delay(&secured.properties)).await;
                    anyhow::bail!("TLS handshake failed: {e}")
                }
                Err(_) => anyhow::bail!("TLS handshake not done within {TLS_HANDSHAKE_TIMEOUT:?}"),
            };
            // (On SASL_SSL the principal is SASL's.)
            let principal = match sasl.is_none() {
                true => match tls::principal(stream.get_ref().1.peer_certificates(), &mapper) {
                    Ok(principal) => principal,
                    Err(why) => {
                        let peer = connection.1;
                        tracing::warn!(%peer, listener = %named.name, %why, "closing SSL connection: no principal");
                        return Ok(());
                    }
                },
                false => principal,
            };
            let (read, write) = tokio::io::split(stream);
            served.exchange(BufReader::new(read), write, sasl, principal).await
        }
    }
}

/// One connection's request loop, over either stream.
struct Served<'a> {
    named: &'a ControllerListener,
    controller: &'a QuorumController,
    max_frame: usize,
    queue: &'a RequestQueue,
    scram: &'a ScramStore,
    connection: (u64, std::net::SocketAddr),
    /// `connection.failed.authentication.delay.ms`.
    failed_delay: std::time::Duration,
}

impl Served<'_> {
    /// Until the client closes: on a SASL listener every frame goes through the authenticator
    /// first (before authentication only its exchange is served, frames bounded by
    /// `sasl.server.max.receive.size`), then is answered as `principal`.
    async fn exchange(
        &self,
        mut reader: impl AsyncRead + Unpin,
        mut write: impl AsyncWrite + Unpin,
        mut sasl: Option<Authenticator>,
        mut principal: String,
    ) -> anyhow::Result<()> {
        let mut spares = Spares::default();
        let mut token_authenticated = false;
        loop {
            let limit = sasl.as_ref().map_or(self.max_frame, |a| a.max_frame(self.max_frame));
            // The frame's bytes stay leased from the pool until it is answered.
            let Some((frame, _lease)) = read_frame(&mut reader, || limit, self.queue, &mut spares).await? else {
                return Ok(());
            };
            if let Some(auth) = sasl.as_mut() {
                match auth.on_frame(&frame, self.scram, std::time::Instant::now()) {
                    Step::Pass => {}
                    Step::Reply { out, close } => {
                        if let Some(p) = auth.principal() {
                            principal = p.to_string();
                            token_authenticated = auth.token_authenticated();
                        }
                        if close {
                            tokio::time::sleep(self.failed_delay).await;
                        }
                        write.write_all(&out).await?;
                        write.flush().await?;
                        match close {
                            true => return Ok(()),
                            false => continue,
                        }
                    }
                    Step::Close(why) => anyhow::bail!("closing SASL connection: {why}"),
                }
            }
            let who = (principal.as_str(), token_authenticated);
            let out = answer(frame, self.named, self.controller, self.connection, who).await?;
            write.write_all(&out).await?;
            write.flush().await?;
        }
    }
}

/// The response frame for one request frame (an error closes the connection).
async fn answer(
    frame: Bytes,
    named: &ControllerListener,
    controller: &QuorumController,
    connection: (u64, std::net::SocketAddr),
    principal: (&str, bool),
) -> anyhow::Result<Bytes> {
    match protocol::decode_served_request(frame, controller_apis::is_served) {
        Ok(request) => {
            let (api_key, version, correlation_id) = (request.api_key, request.version, request.header.correlation_id);
            let body = controller_apis::handle(controller, named, request, connection, principal).await;
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

/// Removes expired delegation tokens every `delegation.token.expiry.check.interval.ms`.
async fn sweep_tokens(controller: Arc<QuorumController>, interval_ms: u64) {
    let mut ticks = tokio::time::interval(std::time::Duration::from_millis(interval_ms.max(1)));
    loop {
        ticks.tick().await;
        if !controller.is_active() {
            continue;
        }
        match crate::handlers::controller_tokens::sweep(&controller) {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, "expired delegation tokens removed"),
            Err(e) => tracing::error!(error = %e, "expired delegation tokens not removed"),
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
        // (Only the active controller of a quorum elects.)
        match decided {
            Err(e) if e.downcast_ref::<crate::controller::quorum::NotActive>().is_none() => {
                tracing::error!(error = %e, "periodic elections not written")
            }
            _ => {}
        }
    }
}
