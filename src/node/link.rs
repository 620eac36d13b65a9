//! This broker's link to the active controller (Kafka's `ForwardingManager` and
//! `NodeToControllerChannelManager`): clients' admin requests forwarded, in Kafka's Envelope
//! (`envelope.rs`) when the controller serves it, so the controller sees the client's principal,
//! address and client id; and the broker's own AlterPartition, AllocateProducerIds and
//! internal-topic creations, sent as this broker's.
//!
//! Connections are kept between requests (a few idle ones, one request at a time on each), so a
//! forward costs one round trip: the controller's ApiVersions is asked once per connection, on
//! its first forward that checks it, and kept with it.
//! Invariants: a connection goes back to the idle ones only after an exchange completed on it
//! (never with a response outstanding); a connection to a controller that is no longer the
//! active one is dropped, and its ApiVersions with it (a new connection asks again); a kept
//! connection found closed (an I/O error: the controller closed it while idle, or restarted) is
//! replaced by a new one and the request sent once more on it (as Kafka's channel retries after
//! a disconnect), never after a timeout (the controller may still be deciding it). An envelope
//! answered NOT_CONTROLLER, and a request no controller could be asked for (none known, or the
//! known one unreachable: a failover), is sent again once the controller changes, until the
//! request timeout.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::Request;
use tokio::sync::watch;

use super::envelope::{self, Origin};
use super::{client, NodeConfig};
use crate::metadata::image::MetadataImage;
use crate::raft::observer::Leader;

/// Idle connections kept at most; more concurrent forwards open more, closed after use.
const MAX_IDLE: usize = 4;
/// Between tries of a forward no controller took (Kafka's `retry.backoff.ms`).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

#[derive(Clone)]
pub struct ControllerLink {
    config: NodeConfig,
    leader: watch::Receiver<Option<Leader>>,
    image: watch::Receiver<Arc<MetadataImage>>,
    /// The last image this broker applied to its replicas and topics (after `image`).
    applied: watch::Receiver<Arc<MetadataImage>>,
    idle: Arc<Mutex<Vec<Kept>>>,
}

/// A client's requests forwarded on its behalf: `ControllerLink`'s methods, and
/// `forward_if_served` in an Envelope from `origin`.
pub struct Forwarder<'a> {
    link: &'a ControllerLink,
    origin: Origin,
    /// The longest `throttle_time_ms` the controller answered (`throttled`).
    throttle_ms: std::sync::atomic::AtomicI32,
}

impl std::ops::Deref for Forwarder<'_> {
    type Target = ControllerLink;
    fn deref(&self) -> &ControllerLink {
        self.link
    }
}

impl Forwarder<'_> {
    /// As `ControllerLink::forward_if_served`, in an Envelope from the client when the
    /// controller's ApiVersions lists Envelope v0 (Kafka's and Ketch's controllers do), else as
    /// this broker's request.
    pub async fn forward_if_served<R: Request>(
        &self,
        version: i16,
        request: &R,
    ) -> anyhow::Result<Option<R::Response>> {
        self.link.send(version, request, true, Some(&self.origin)).await
    }

    /// Notes a `throttle_time_ms` the controller answered.
    pub fn throttled(&self, ms: i32) {
        self.throttle_ms.fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The longest `throttle_time_ms` the controller answered this client's requests.
    pub fn throttle_ms(&self) -> i32 {
        self.throttle_ms.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The controller answered an envelope with an error of its own (not the inner request's).
#[derive(Debug)]
pub struct EnvelopeError(pub ResponseError);

impl std::fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the controller answered the envelope with {:?}", self.0)
    }
}

impl std::error::Error for EnvelopeError {}

/// No controller could be asked: none is known, or it could not be reached (the request never
/// left this broker). Sent again once the controller changes, as Kafka's channel re-queues a
/// request on a disconnect.
#[derive(Debug)]
struct Unreachable(String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// A connection to the controller and its ApiVersions table, once asked on it.
struct Kept {
    conn: client::Connection,
    versions: Option<Vec<ApiVersion>>,
}

impl ControllerLink {
    pub(super) fn new(
        config: NodeConfig,
        leader: watch::Receiver<Option<Leader>>,
        image: watch::Receiver<Arc<MetadataImage>>,
        applied: watch::Receiver<Arc<MetadataImage>>,
    ) -> ControllerLink {
        ControllerLink { config, leader, image, applied, idle: Arc::default() }
    }

    /// The metadata image replicated from the quorum, as of now.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Waits, at most `timeout`, until this broker has applied (to its replicas and topics) an
    /// image where `done` holds; whether it has.
    pub async fn wait_applied(&self, timeout: Duration, done: impl Fn(&MetadataImage) -> bool) -> bool {
        let mut applied = self.applied.clone();
        let reached = tokio::time::timeout(timeout, applied.wait_for(|image| done(image))).await;
        reached.is_ok_and(|r| r.is_ok())
    }

    /// This link, forwarding for the client `origin`.
    pub fn forwarder(&self, origin: Origin) -> Forwarder<'_> {
        Forwarder { link: self, origin, throttle_ms: Default::default() }
    }

    /// Sends `request` to the active controller and returns the answer.
    pub async fn forward<R: Request>(&self, version: i16, request: &R) -> anyhow::Result<R::Response> {
        let answer = self.send(version, request, false, None).await?;
        answer.ok_or_else(|| anyhow::anyhow!("no answer"))
    }

    /// A client's request forwarded (Kafka's `ForwardingManager`): as `forward`, but `None` when
    /// the controller's ApiVersions (asked once per connection) does not list the request at
    /// `version`.
    pub async fn forward_if_served<R: Request>(
        &self,
        version: i16,
        request: &R,
    ) -> anyhow::Result<Option<R::Response>> {
        self.send(version, request, true, None).await
    }

    /// `send_once`, again after a NOT_CONTROLLER envelope error once the controller changed (or
    /// a short wait), until the request timeout (Kafka's `NodeToControllerRequestThread`).
    async fn send<R: Request>(
        &self,
        version: i16,
        request: &R,
        check: bool,
        origin: Option<&Origin>,
    ) -> anyhow::Result<Option<R::Response>> {
        // Kafka's forwarding gives up after the broker's `request.timeout.ms` (30 s by default):
        // long enough for a controller failover.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(self.config.request_timeout_ms.max(30_000));
        loop {
            let mut leader = self.leader.clone();
            leader.borrow_and_update(); // `changed` below: a change after this send
            match self.send_once(version, request, check, origin).await {
                Err(e)
                    if matches!(e.downcast_ref(), Some(EnvelopeError(ResponseError::NotController)))
                        || e.downcast_ref::<Unreachable>().is_some() =>
                {
                    self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
                    // Woken at once by a new leader; else again after Kafka's `retry.backoff.ms`
                    // (a new leader answers NOT_CONTROLLER until its epoch's first batch commits).
                    let wait = RETRY_BACKOFF.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
                    if wait.is_zero() {
                        return Err(e);
                    }
                    let _ = tokio::time::timeout(wait, leader.changed()).await;
                }
                answer => return answer,
            }
        }
    }

    async fn send_once<R: Request>(
        &self,
        version: i16,
        request: &R,
        check: bool,
        origin: Option<&Origin>,
    ) -> anyhow::Result<Option<R::Response>> {
        let addr = self.leader_addr()?;
        if let Some(mut kept) = self.take_idle(&addr) {
            match exchange(&mut kept, version, request, check, origin).await {
                Ok(answer) => {
                    self.put_idle(kept);
                    return Ok(answer);
                }
                // Closed by the controller while idle (its idle timeout, a restart): once more on
                // a new connection.
                Err(e) if e.downcast_ref::<std::io::Error>().is_some() => {
                    tracing::debug!(error = %e, %addr, "a kept connection to the controller was closed");
                }
                Err(e) => return Err(e),
            }
        }
        let conn = self.connect(&addr).await.map_err(|e| Unreachable(format!("the controller at {addr}: {e}")))?;
        let mut kept = Kept { conn, versions: None };
        let answer = exchange(&mut kept, version, request, check, origin).await?;
        self.put_idle(kept);
        Ok(answer)
    }

    fn leader_addr(&self) -> anyhow::Result<String> {
        let leader = self.leader.borrow();
        let Some(leader) = leader.as_ref() else {
            return Err(Unreachable("the active controller is not known yet".into()).into());
        };
        Ok(leader.addr.clone())
    }

    /// An idle connection to `addr`; those to another address (a former controller) are dropped.
    fn take_idle(&self, addr: &str) -> Option<Kept> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|k| k.conn.addr() == addr);
        idle.pop()
    }

    fn put_idle(&self, kept: Kept) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(kept);
        }
    }

    async fn connect(&self, addr: &str) -> anyhow::Result<client::Connection> {
        let timeout = Duration::from_millis(self.config.request_timeout_ms.max(30_000));
        let client_id = format!("broker-{}-forwarding", self.config.node_id);
        client::Connection::connect(addr, &client_id, timeout, &self.config.controller_security).await
    }
}

/// One request on `kept`, after its ApiVersions (asked the first time) when `check`: `None` when
/// the controller does not serve the request at `version`. In an Envelope from `origin` when
/// there is one and the controller serves Envelope v0.
async fn exchange<R: Request>(
    kept: &mut Kept,
    version: i16,
    request: &R,
    check: bool,
    origin: Option<&Origin>,
) -> anyhow::Result<Option<R::Response>> {
    let mut enveloped = false;
    if check || origin.is_some() {
        let versions = match kept.versions.take() {
            Some(versions) => versions,
            None => {
                let answer = kept.conn.send(0, &ApiVersionsRequest::default(), Duration::ZERO).await?;
                anyhow::ensure!(answer.error_code == 0, "ApiVersions answered error {}", answer.error_code);
                answer.api_keys
            }
        };
        let serves = |key: i16, version: i16| {
            versions.iter().any(|k| k.api_key == key && (k.min_version..=k.max_version).contains(&version))
        };
        let served = serves(R::KEY, version);
        enveloped = origin.is_some() && serves(ApiKey::Envelope as i16, 0);
        kept.versions = Some(versions);
        if check && !served {
            return Ok(None);
        }
    }
    let origin = match origin {
        Some(origin) if enveloped => origin,
        _ => return kept.conn.send(version, request, Duration::ZERO).await.map(Some),
    };
    let answer = kept.conn.send(0, &envelope::wrap(origin, version, request)?, Duration::ZERO).await?;
    if answer.error_code != 0 {
        return Err(EnvelopeError(
            ResponseError::try_from_code(answer.error_code).unwrap_or(ResponseError::UnknownServerError),
        )
        .into());
    }
    let data = answer.response_data.ok_or_else(|| anyhow::anyhow!("an envelope answered without a response"))?;
    envelope::unwrap::<R>(origin, version, data).map(Some)
}

#[cfg(test)]
#[path = "link_tests.rs"]
mod tests;
