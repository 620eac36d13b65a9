//! Networking: the listeners that accept client connections, the per-connection request loop
//! (`connection.rs`), TLS for SSL and SASL_SSL listeners (`tls.rs`), SASL for SASL_PLAINTEXT and
//! SASL_SSL listeners (`security::sasl`), the connection limits every new connection passes
//! (`limits.rs`, Kafka's `ConnectionQuotas`), and shutdown on SIGTERM/SIGINT.
//!
//! Owns: binding every configured listener (IPv4 and IPv6, port 0 for an ephemeral port), each
//! with its name and security protocol (`listener.security.protocol.map`) and, for SSL, its
//! TLS configuration, for SASL its mechanisms and users (built before anything is bound: a bad
//! one fails the start); printing one
//! `ketch listening on <addr>` line per listener on stdout once ready, in `listeners` order
//! (the first line is the first listener's), and on a signal: stop
//! accepting, let in-flight requests finish (up to `SHUTDOWN_GRACE`), then close (fsync) every
//! log and write the clean-shutdown marker. Readiness (`crate::metrics`) turns ready once every
//! listener is bound, just before the listening lines are printed, and back to not ready when
//! the shutdown signal arrives.

mod combined;
mod connection;
pub mod controller;
mod limits;
pub mod principal_mapper;
pub mod request_queue;
mod throttle;
pub mod tls;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long shutdown waits for requests already being handled.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::config::security_protocol;
use crate::handlers::SecurityProtocol;
use crate::metrics::{Metrics, Readiness};
use crate::security::sasl;

/// Binds the listeners, serves until a shutdown signal, then closes the broker. `metrics`
/// counts the traffic and reports readiness (its HTTP endpoint, if on, is already serving).
pub async fn run(broker: Arc<Broker>, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    metrics.attach(broker.clone());
    // TLS configurations first: a wrong keystore fails the start before anything listens.
    // SASL configurations too (mechanisms, JAAS users).
    let mut tls_acceptors: Vec<Option<tls::TlsListener>> = Vec::new();
    let mut sasl_configs = Vec::new();
    for listener in &broker.config.listeners {
        let protocol = security_protocol(&broker.config.properties, &listener.name);
        let acceptor = match protocol {
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                Some(tls::listener(&broker.config.properties, &listener.name)?)
            }
            SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
        };
        let sasl = match protocol {
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
                Some(Arc::new(sasl::listener_config(&broker.config.properties, &listener.name)?))
            }
            _ => None,
        };
        if acceptor.is_some() {
            let name = listener.name.clone();
            broker.dynamic.add_change_check(Box::new(move |old, new| tls::validate_reconfiguration(old, new, &name)));
        }
        tls_acceptors.push(acceptor);
        sasl_configs.push(sasl);
    }
    let static_value = |k: &str| broker.config.properties.get(k).cloned().unwrap_or_default();
    crate::dynconf::defs::validate_connection_limits(static_value).map_err(|e| anyhow::anyhow!(e))?;
    broker.recover().await?;
    let mut listeners = Vec::new();
    for listener in &broker.config.listeners {
        let bound = if listener.host.is_empty() {
            // An empty host means every interface: a dual-stack IPv6 socket takes IPv4 clients
            // too; machines without IPv6 get an IPv4 socket.
            match TcpListener::bind(("::", listener.port)).await {
                Ok(v6) => v6,
                Err(_) => TcpListener::bind(("0.0.0.0", listener.port)).await?,
            }
        } else {
            TcpListener::bind((listener.host.as_str(), listener.port)).await?
        };
        listeners.push((listener.name.clone(), bound));
    }
    // Ready before the listening lines: whoever has seen one may rely on /ready saying 200.
    metrics.set_readiness(Readiness::Ready);
    let mut lines = String::new();
    for (name, bound) in &listeners {
        let addr = bound.local_addr()?;
        lines.push_str(&format!("ketch listening on {addr}\n"));
        tracing::info!(listener = %name, %addr, "listening");
    }
    if let Some(addr) = metrics.endpoint() {
        lines.push_str(&format!("ketch metrics on http://{addr}/metrics\n"));
    }
    // One write, and a closed stdout is no reason to die: a launcher may read the first line
    // and close its end (println! would panic on the broken pipe).
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        if let Err(e) = out.write_all(lines.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!(error = %e, "cannot write the listening lines to stdout");
        }
    }
    // A combined node of a cluster: its controller listeners go to its controller, which must
    // serve before its broker registers there.
    let mut controller_half = None;
    let metadata_dir = broker.topics.log_dirs().first().to_path_buf();
    let source = match broker.node.roles {
        crate::node::Roles::BrokerController => {
            let mut bound = Vec::new();
            let mut i = 0;
            while i < listeners.len() {
                if !broker.node.controller_listener_names.contains(&listeners[i].0) {
                    i += 1;
                    continue;
                }
                // (The controller half builds its listeners' TLS and SASL itself.)
                bound.push(listeners.remove(i));
                tls_acceptors.remove(i);
                sasl_configs.remove(i);
            }
            let (half, metadata) = combined::ControllerHalf::start(&broker, bound).await?;
            controller_half = Some(half);
            Some(crate::node::MetadataSource::Local(metadata))
        }
        crate::node::Roles::Broker => Some(crate::node::MetadataSource::Observe(&metadata_dir)),
        crate::node::Roles::Combined | crate::node::Roles::Controller => None,
    };
    let membership = match source {
        Some(source) => {
            let mut membership = start_membership(&broker, &listeners, source)?;
            let link = membership.controller_link(&broker.node);
            let _ = broker.controller.set(link.clone());
            let (ids, node_id, state) = (broker.producer_ids.clone(), broker.node.node_id, membership.state.clone());
            membership.spawn(move |stop| crate::node::producer_ids::run(ids, node_id, link, state, stop));
            // Requests are served once the controller unfenced this broker (it has caught up with
            // the metadata log): a fenced broker would answer Metadata without itself, and with
            // no broker at all while the whole cluster starts. Connections wait in the backlog.
            let mut state = membership.state.clone();
            let registered = state.wait_for(|s| matches!(s, crate::node::lifecycle::State::Running(_)));
            let caught_up = tokio::select! {
                _ = registered => true,
                _ = shutdown_signal() => false,
            };
            if !caught_up {
                membership.stop().await;
                if let Some(half) = controller_half {
                    half.stop().await?;
                }
                let closing = broker.clone();
                tokio::task::spawn_blocking(move || closing.close()).await?;
                return Ok(());
            }
            tracing::info!("caught up with the metadata log: serving requests");
            Some(membership)
        }
        None => None,
    };
    broker.start_background();
    let (stop_tx, stop_rx) = watch::channel(false);
    let in_flight = Arc::new(AtomicUsize::new(0));
    // One request queue for all the broker's listeners, as Kafka's data plane has one.
    let queue = request_queue::RequestQueue::new(request_queue::Bounds::of(&broker.config));
    let mut accept_tasks = Vec::new();
    let names: Vec<Arc<str>> = listeners.iter().map(|(name, _)| Arc::from(name.as_str())).collect();
    let limits = limits::ConnectionLimits::new(
        &names,
        &crate::config::inter_broker_listener(&broker.config.properties),
        broker.quotas.window(),
    );
    for ((((name, listener), tls), sasl), named) in
        listeners.into_iter().zip(tls_acceptors).zip(sasl_configs).zip(names)
    {
        let broker = broker.clone();
        let stop = stop_rx.clone();
        let protocol = security_protocol(&broker.config.properties, &name);
        let named = connection::Named { name: named, protocol, tls, sasl };
        let shared = Shared {
            stop,
            in_flight: in_flight.clone(),
            metrics: metrics.clone(),
            limits: limits.clone(),
            queue: queue.clone(),
        };
        accept_tasks.push(tokio::spawn(accept_loop(listener, named, broker, shared)));
    }
    shutdown_signal().await;
    metrics.set_readiness(Readiness::Stopping);
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    let _ = stop_tx.send(true);
    for task in accept_tasks {
        task.abort();
    }
    // Requests already being handled finish and get their responses (bounded wait: a long-poll
    // fetch may hold on for its max_wait_ms).
    let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
    while in_flight.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    if let Some(membership) = membership {
        membership.stop().await;
    }
    if let Some(half) = controller_half {
        half.stop().await?;
    }
    let closing = broker.clone();
    tokio::task::spawn_blocking(move || closing.close()).await?;
    tracing::info!("shutdown complete");
    Ok(())
}

/// A broker of a controller quorum (`process.roles=broker`): starts fetching the quorum's
/// metadata log and registering with the active controller, advertising each bound listener
/// except the controller listeners (at its `advertised.listeners` entry when there is one).
fn start_membership(
    broker: &Arc<Broker>,
    listeners: &[(String, TcpListener)],
    source: crate::node::MetadataSource,
) -> anyhow::Result<crate::node::Membership> {
    let node = &broker.node;
    let mut endpoints = Vec::new();
    for (name, bound) in listeners.iter().filter(|(name, _)| !node.controller_listener_names.contains(name)) {
        let addr = bound.local_addr()?;
        let advertised = broker.config.advertised_listeners.iter().find(|l| &l.name == name);
        let host = match advertised {
            Some(l) if !l.host.is_empty() => l.host.clone(),
            _ if addr.ip().is_unspecified() => "localhost".to_string(),
            _ => addr.ip().to_string(),
        };
        let port = advertised.map_or(addr.port(), |l| if l.port == 0 { addr.port() } else { l.port });
        let security_protocol = match security_protocol(&broker.config.properties, name) {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        };
        endpoints.push(crate::node::lifecycle::Endpoint { name: name.clone(), host, port, security_protocol });
    }
    let dirs = broker.topics.log_dirs();
    let ids = dirs.dirs().iter().map(|d| crate::metadata::parse_uuid(&d.id).unwrap_or(uuid::Uuid::nil())).collect();
    let fetcher = crate::replica::fetcher::FetcherSetup::from_properties(
        &broker.config.properties,
        node.node_id,
        Duration::from_millis(node.request_timeout_ms.max(30_000)),
    )?;
    let lag_ms = node.replica_lag_time_max_ms as i64;
    let setup = crate::replica::manager::ReplicaSetup {
        node_id: node.node_id,
        log_dir: dirs.first().to_path_buf(),
        health: dirs.dirs()[0].health.clone(),
        replica_lag_time_max_ms: lag_ms,
    };
    let manager = Arc::new(crate::replica::manager::ReplicaManager::new(setup, broker.appended_sender()));
    let _ = broker.replicas.set(manager.clone());
    broker.groups.set_cluster_mode(manager.clone());
    broker.txns.set_cluster_mode(manager.clone(), fetcher.security.clone());
    let weak = Arc::downgrade(broker);
    let apply = Box::new(move |image: &crate::metadata::image::MetadataImage| {
        if let Some(broker) = weak.upgrade() {
            let manager = broker.replicas.get().expect("set above");
            // Dynamic broker configs first: the topics' defaults come from them.
            let broker_set = |name: String| {
                image.configs.get(&(crate::metadata::image::BROKER_RESOURCE, name)).cloned().unwrap_or_default()
            };
            let adopted = broker.dynamic.adopt(&broker_set(String::new()), &broker_set(manager.node_id().to_string()));
            if let Some(effective) = adopted {
                broker.reconfigure(&effective);
            }
            broker.groups.adopt_configs(image);
            let changes = manager.apply(image, &broker.topics, &broker.topics.defaults(), crate::log::now_ms());
            for (partition, leads) in changes {
                if partition.topic == crate::group::OFFSETS_TOPIC {
                    match leads {
                        true => {
                            let load = broker.groups.elect(&partition);
                            let broker = broker.clone();
                            tokio::task::spawn_blocking(move || broker.groups.run_load(load));
                        }
                        false => broker.groups.resign(partition.index),
                    }
                } else if partition.topic == crate::txn::coordinator::TXN_TOPIC {
                    if !leads {
                        broker.txns.resign(partition.index);
                        continue;
                    }
                    let epoch = manager.get(&partition.topic, partition.index).map_or(0, |r| r.leader().1);
                    let load = broker.txns.elect(&partition, epoch);
                    let broker = broker.clone();
                    tokio::spawn(async move {
                        let loader = broker.clone();
                        let Ok(pending) = tokio::task::spawn_blocking(move || loader.txns.run_load(load)).await else {
                            return;
                        };
                        if !pending.is_empty() {
                            broker.txns.complete_loaded(&broker.txn_deps(), pending).await;
                        }
                    });
                }
            }
        }
    });
    let tick = Duration::from_millis((lag_ms / 2).clamp(100, 5_000) as u64);
    let replicas = crate::node::ReplicaHost { manager, apply, tick };
    let epochs = crate::node::lifecycle::Epochs {
        previous: broker.topics.previous_broker_epoch(),
        current: broker.topics.broker_epoch_cell(),
    };
    let registration = crate::node::Registration { log_dir_ids: ids, endpoints, epochs };
    crate::node::Membership::start(node, source, &broker.cluster_id, registration, fetcher, replicas)
}

/// What every accept loop shares.
struct Shared {
    stop: watch::Receiver<bool>,
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    limits: Arc<limits::ConnectionLimits>,
    queue: Arc<request_queue::RequestQueue>,
}

async fn accept_loop(listener: TcpListener, named: connection::Named, broker: Arc<Broker>, shared: Shared) {
    loop {
        match listener.accept().await {
            Ok((socket, peer)) => {
                // Kafka's ConnectionQuotas: this acceptor may wait here (creation rate, a free
                // slot), as Kafka's does; later connections wait in the listen backlog.
                let settings_now = || shared.limits.settings(&broker.dynamic.effective().properties, &named.name);
                let ip_rate = broker.quotas.ip_connection_rate(peer.ip().to_canonical());
                let slot = match shared.limits.admit(&named.name, peer.ip(), settings_now, ip_rate).await {
                    limits::Admission::Accepted(slot) => slot,
                    limits::Admission::Refused { max } => {
                        tracing::info!(
                            "Rejected connection from {}, address already has the configured maximum of {max} connections.",
                            peer.ip().to_canonical()
                        );
                        continue;
                    }
                    limits::Admission::Throttled(delay) => {
                        tracing::debug!(%peer, ?delay, "connection_creation_rate quota: closing the connection later");
                        tokio::spawn(async move {
                            tokio::time::sleep(delay).await;
                            drop(socket);
                        });
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                // Kafka's socket.send.buffer.bytes (100 KiB by default, as in Kafka): a bounded
                // send buffer keeps what a large fetch has in flight small; over loopback it read
                // 25% faster, for less CPU on both ends, than the OS's autotuned buffer.
                // socket.receive.buffer.bytes defaults to the OS's autotuning (see config.rs).
                if let Some(bytes) = broker.config.socket_send_buffer_bytes {
                    let _ = rustix::net::sockopt::set_socket_send_buffer_size(&socket, bytes);
                }
                if let Some(bytes) = broker.config.socket_receive_buffer_bytes {
                    let _ = rustix::net::sockopt::set_socket_recv_buffer_size(&socket, bytes);
                }
                let broker = broker.clone();
                let stop = shared.stop.clone();
                let in_flight = shared.in_flight.clone();
                let metrics = shared.metrics.clone();
                let named = named.clone();
                let queue = shared.queue.clone();
                tokio::spawn(crate::fatal::client_scope(async move {
                    if let Err(e) =
                        connection::serve(socket, peer, named, broker, stop, in_flight, metrics, slot, queue).await
                    {
                        tracing::debug!(%peer, error = %e, "connection closed");
                    }
                }));
            }
            Err(e) => {
                // Out of file descriptors and similar: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
