//! One client connection: read length-prefixed frames, handle them in arrival order, write the
//! responses in that same order, over plain TCP or TLS (SSL listeners: the handshake comes
//! first, `tls.rs` builds its configuration and names the client's principal). On SASL listeners
//! the frames go to the connection's `security::sasl::Authenticator` first: until the client is
//! authenticated only ApiVersions and the SASL exchange are served (frames up to
//! `sasl.server.max.receive.size`), then the principal it names is the connection's.
//!
//! Produce requests are appended at once, in order, but their responses may wait for an fsync
//! (acks=all): those waits run in the background so the next pipelined produce request is
//! appended meanwhile and shares the same group commit. Any other request first waits for every
//! earlier response, so it sees what those requests did, as with Kafka's one-request-at-a-time
//! channel muting.
//!
//! Fetch responses are written in parts (`protocol::fetch_frame`): encoded bytes with `write`,
//! stored batches straight from their segment file with `sendfile` on plain TCP; over TLS the
//! batches are read from the file in chunks of `TLS_FILE_CHUNK` bytes and encrypted (kTLS would
//! allow sendfile there too: not yet). The loop is generic over the two halves of the stream
//! (`FrameRead`, `FrameWrite`).
//!
//! Client quotas (`throttle.rs`): a request its client's byte-rate or request quota throttles
//! gets the throttle time in its response, and the connection takes no further frame until that time
//! has passed (Kafka's channel muting); responses already owed are still written meanwhile.
//!
//! Connection limits (`limits.rs`): the connection holds its [`Slot`] while open, marks it
//! active at every frame and response, closes when the limits evict it (`max.connections`
//! reached by the inter-broker listener) and when it has been idle for `connections.max.idle.ms`
//! with no response owed.
//!
//! Invariants: a frame larger than `socket.request.max.bytes`, or one that cannot be parsed,
//! closes this connection only; memory for a frame grows with the bytes actually received,
//! never with the length a client merely claims. A TLS handshake that fails (a plaintext client
//! on an SSL port, an untrusted certificate) or takes longer than `TLS_HANDSHAKE_TIMEOUT`
//! closes this connection only; so does a verified client certificate that names no principal
//! (`tls::principal`: logged at WARN, never served as `User:ANONYMOUS`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseKind};
use std::future::Future;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter, Interest};
use tokio::io::{ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::server::TlsStream;

use crate::broker::Broker;
use crate::handlers::{self, Reply, RequestContext, SecurityProtocol};
use crate::log::FileSlice;
use crate::metrics::Metrics;
use crate::protocol::fetch_frame::OutPart;
use crate::protocol::{self, ProtocolError};
use crate::security::sasl::{Authenticator, ListenerSasl, Step as SaslStep};

use super::limits::Slot;
use super::request_queue::{Lease, Place, RequestQueue};
use super::throttle;

/// Initial buffer for a frame body; it grows as bytes arrive.
const INITIAL_FRAME_BYTES: usize = 64 * 1024;

/// Buffers of earlier large frames a connection keeps for reuse (see `Spares`).
const SPARE_BUFFERS: usize = 3;

/// A connection idle this long releases its spare buffers.
const SPARE_IDLE: Duration = Duration::from_millis(200);

/// A TLS handshake not done by then closes the connection.
pub(super) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Stored batches sent over TLS are read from their segment file this many bytes at a time.
const TLS_FILE_CHUNK: usize = 64 * 1024;

/// The read half of a connection's stream.
pub trait FrameRead: AsyncRead + Unpin + Send + 'static {
    /// Waits until bytes can be read, consuming none (cancel-safe).
    fn readable(&mut self) -> impl Future<Output = std::io::Result<()>> + Send;
}

impl FrameRead for OwnedReadHalf {
    async fn readable(&mut self) -> std::io::Result<()> {
        OwnedReadHalf::readable(self).await
    }
}

/// TLS: decrypted bytes wait in the `BufReader` (large reads bypass it).
impl FrameRead for BufReader<ReadHalf<TlsStream<TcpStream>>> {
    async fn readable(&mut self) -> std::io::Result<()> {
        self.fill_buf().await.map(|_| ())
    }
}

/// The write half of a connection's stream: bytes, and file slices sent its own way.
pub trait FrameWrite: AsyncWrite + Unpin + Send + 'static {
    fn write_file<'a>(&'a mut self, slice: &'a FileSlice) -> impl Future<Output = anyhow::Result<()>> + Send + 'a;
}

impl FrameWrite for OwnedWriteHalf {
    async fn write_file(&mut self, slice: &FileSlice) -> anyhow::Result<()> {
        send_file(self.as_ref(), slice).await
    }
}

impl FrameWrite for WriteHalf<TlsStream<TcpStream>> {
    async fn write_file(&mut self, slice: &FileSlice) -> anyhow::Result<()> {
        let mut buf = vec![0u8; slice.len.min(TLS_FILE_CHUNK)];
        let mut done = 0;
        while done < slice.len {
            let n = (slice.len - done).min(buf.len());
            // From the page cache, like sendfile's own read.
            std::os::unix::fs::FileExt::read_exact_at(&*slice.file, &mut buf[..n], slice.position + done as u64)
                .context("segment file ended before the fetched slice")?;
            self.write_all(&buf[..n]).await?;
            done += n;
        }
        Ok(())
    }
}

/// Counts a request as in flight until dropped (shutdown waits for the count to reach zero).
struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    fn start(counter: &Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::AcqRel);
        InFlight(counter.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Most produce responses one connection may have waiting for their fsync at once (Java's
/// producer sends at most 5 requests in flight); beyond it the connection stops reading.
const MAX_PENDING_RESPONSES: usize = 8;

/// A response being completed in the background, written when its turn comes.
type Pending = tokio::task::JoinHandle<anyhow::Result<Option<Bytes>>>;

/// The listener a connection came in on: its name, security protocol, for SSL and SASL_SSL the
/// TLS acceptor, for SASL listeners their SASL configuration.
#[derive(Clone)]
pub struct Named {
    pub name: Arc<str>,
    pub protocol: SecurityProtocol,
    pub tls: Option<super::tls::TlsListener>,
    pub sasl: Option<Arc<ListenerSasl>>,
}

#[allow(clippy::too_many_arguments)]
pub async fn serve(
    socket: TcpStream,
    peer: SocketAddr,
    named: Named,
    broker: Arc<Broker>,
    stop: watch::Receiver<bool>,
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    slot: Slot,
    queue: Arc<RequestQueue>,
) -> anyhow::Result<()> {
    let _connection = metrics.connection_opened();
    // IPv4 clients of a dual-stack socket show up as ::ffff:a.b.c.d; advertise plain a.b.c.d.
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let mut ctx = RequestContext {
        listener: named.name,
        security_protocol: named.protocol,
        principal: super::tls::ANONYMOUS.to_string(),
        token_authenticated: false,
        local_addr: canonical(socket.local_addr()?),
        peer_addr: canonical(peer),
    };
    let sasl = named.sasl.map(Authenticator::new);
    match named.tls {
        None => {
            let (reader, writer) = socket.into_split();
            run(reader, writer, ctx, sasl, broker, stop, in_flight, metrics, slot, queue).await
        }
        Some(tls) => {
            let (acceptor, mapper) = tls.current(&broker.dynamic.effective().properties).await;
            let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tokio::time::sleep(crate::security::sasl::failed_authentication_delay(&broker.config.properties))
                        .await;
                    anyhow::bail!("TLS handshake failed: {e}")
                }
                Err(_) => anyhow::bail!("TLS handshake not done within {TLS_HANDSHAKE_TIMEOUT:?}"),
            };
            // (On SASL_SSL the principal is SASL's; the certificate does not name it.)
            if sasl.is_none() {
                match super::tls::principal(stream.get_ref().1.peer_certificates(), &mapper) {
                    Ok(principal) => ctx.principal = principal,
                    Err(why) => {
                        // Kafka: "Closing socket for <connection> because of error", no answer.
                        tracing::warn!(%peer, listener = %ctx.listener, %why, "closing SSL connection: no principal");
                        return Ok(());
                    }
                }
            }
            tracing::debug!(%peer, principal = %ctx.principal, "TLS connection");
            let (reader, writer) = tokio::io::split(stream);
            run(BufReader::new(reader), writer, ctx, sasl, broker, stop, in_flight, metrics, slot, queue).await
        }
    }
}

/// The request loop over one stream's halves. On a SASL listener `sasl` sees every frame first
/// (`security::sasl`): until the client is authenticated only its exchange is served.
#[allow(clippy::too_many_arguments)]
async fn run<R: FrameRead, W: FrameWrite>(
    reader: R,
    writer: W,
    mut ctx: RequestContext,
    mut sasl: Option<Authenticator>,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    slot: Slot,
    queue: Arc<RequestQueue>,
) -> anyhow::Result<()> {
    let peer = ctx.peer_addr;
    let idle = idle_limit(&broker.config.properties);
    let mut writer = BufWriter::new(writer);
    // Frames are read by their own task so that reading is never cancelled half-way; the
    // channel holds one frame, so a connection buffers at most one request ahead.
    let (frames_tx, mut frames) = mpsc::channel(1);
    let full_frame = broker.config.socket_request_max_bytes;
    // Before SASL authentication frames are bounded by sasl.server.max.receive.size.
    let max_frame = Arc::new(AtomicUsize::new(sasl.as_ref().map_or(full_frame, |a| a.max_frame(full_frame))));
    let reader_task =
        tokio::spawn(crate::fatal::client_scope(read_frames(reader, max_frame.clone(), queue, frames_tx)));
    let _stop_reader = AbortOnDrop(reader_task);
    let mut pending: VecDeque<Pending> = VecDeque::new();
    // Set while a client quota throttles this connection: no frame is taken until then (Kafka's
    // channel muting, `throttle.rs`); responses already owed are still written.
    let mut muted_until: Option<tokio::time::Instant> = None;
    // One timer for idleness, moved on only when it fires early (not at every request).
    let idle_timer = tokio::time::sleep(idle.unwrap_or(Duration::MAX / 4));
    tokio::pin!(idle_timer);
    let mut last_active = tokio::time::Instant::now();
    // Set for a turn that follows no activity: the first (the slot is fresh) and the idle
    // timer's early wake-ups.
    let mut quiet_turn = true;
    loop {
        // Every other turn of this loop follows some activity: a frame, a response, a mute's end.
        if !std::mem::take(&mut quiet_turn) {
            slot.touch();
            last_active = tokio::time::Instant::now();
        }
        let frame = tokio::select! {
            biased;
            done = async { pending.front_mut().expect("not empty").await }, if !pending.is_empty() => {
                pending.pop_front();
                write_completed(&mut writer, done, &metrics).await?;
                continue;
            }
            _ = tokio::time::sleep_until(muted_until.unwrap_or_else(tokio::time::Instant::now)), if muted_until.is_some() => {
                muted_until = None;
                continue;
            }
            frame = frames.recv(), if muted_until.is_none() => frame,
            _ = stop.changed() => return Ok(()),
            _ = slot.evicted() => {
                tracing::info!(%peer, "closing connection: max.connections reached by the inter-broker listener");
                return Ok(());
            }
            _ = &mut idle_timer, if idle.is_some() && pending.is_empty() => {
                let idle_until = last_active + idle.expect("checked");
                if idle_until > tokio::time::Instant::now() {
                    idle_timer.as_mut().reset(idle_until);
                    quiet_turn = true;
                    continue;
                }
                tracing::debug!(%peer, "closing connection: idle for connections.max.idle.ms");
                return Ok(());
            }
        };
        let (frame, received_at, lease, place) = match frame {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                drain(&mut writer, &mut pending, &metrics).await?;
                return Err(e);
            }
            None => return drain(&mut writer, &mut pending, &metrics).await,
        };
        // Taken up: its place in the request queue is free again (its bytes below).
        drop(place);
        metrics.received(4 + frame.len());
        if let Some(auth) = sasl.as_mut() {
            match auth.on_frame(&frame, &broker.scram, Instant::now()) {
                SaslStep::Pass => {}
                SaslStep::Reply { out, close } => {
                    drain(&mut writer, &mut pending, &metrics).await?;
                    // The limit first: the client's next frame may follow this reply at once.
                    max_frame.store(auth.max_frame(full_frame), Ordering::Release);
                    if close {
                        tokio::time::sleep(crate::security::sasl::failed_authentication_delay(
                            &broker.config.properties,
                        ))
                        .await;
                    }
                    if let Some(principal) = auth.principal() {
                        ctx.principal = principal.to_string();
                        ctx.token_authenticated = auth.token_authenticated();
                    }
                    write_out(&mut writer, &out, &metrics).await?;
                    if close {
                        tracing::info!(%peer, "closing connection: SASL authentication failed");
                        return Ok(());
                    }
                    continue;
                }
                SaslStep::Close(why) => {
                    metrics.request_rejected();
                    drain(&mut writer, &mut pending, &metrics).await?;
                    tracing::info!(%peer, %why, "closing SASL connection");
                    return Ok(());
                }
            }
        }
        let in_flight_guard = InFlight::start(&in_flight);
        let frame_bytes = 4 + frame.len();
        let mut request = match protocol::decode_request(frame) {
            Ok(request) => request,
            Err(ProtocolError::UnsupportedVersion { api_key: ApiKey::ApiVersions, correlation_id, .. }) => {
                let _timer = metrics.request(ApiKey::ApiVersions, received_at);
                drain(&mut writer, &mut pending, &metrics).await?;
                let body = ResponseKind::ApiVersions(handlers::unsupported_version_response());
                let out = protocol::encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)?;
                write_out(&mut writer, &out, &metrics).await?;
                continue;
            }
            Err(e) => {
                metrics.request_rejected();
                drain(&mut writer, &mut pending, &metrics).await?;
                tracing::info!(%peer, error = %e, "closing connection on a bad request");
                return Ok(());
            }
        };
        let (api_key, version, correlation_id) = (request.api_key, request.version, request.header.correlation_id);
        tracing::trace!(%peer, ?api_key, version, correlation_id, "request");
        // A produce request's bytes stay leased until it is appended (its records are read
        // from the frame); any other's are given back as it is taken up, as what it then
        // waits for (a long poll, a rebalance) is Kafka's purgatory, outside the queue.
        let lease = (api_key == ApiKey::Produce).then_some(lease);
        // Counts the request now and observes its latency when dropped: after the response is
        // written, or, for a produce completed in the background, when its response is ready.
        let timer = metrics.request(api_key, received_at);
        if api_key != ApiKey::Produce {
            // Every request but a produce sees the effects of the produce requests before it.
            drain(&mut writer, &mut pending, &metrics).await?;
        }
        let quota = throttle::before(&broker, &ctx, &request.header, &mut request.body, frame_bytes);
        let dispatched = handlers::dispatch(&broker, &ctx, &request.header, version, request.body);
        let (reply, busy) = match &quota.request_limit {
            Some(_) => throttle::Timed::new(dispatched).await,
            None => (dispatched.await, Duration::ZERO),
        };
        drop(lease);
        let request_ms = throttle::request_ms(&broker, quota.request_limit.as_ref(), busy);
        let mute = |ms: u64| (ms > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(ms));
        muted_until = mute(quota.produce_ms.max(request_ms));
        let produce_throttle_ms = throttle::clamp_ms(quota.produce_ms.max(request_ms));
        match reply {
            Reply::Produce(appended) => {
                // Appended now, in arrival order; the response waits for its fsync in the
                // background so the next pipelined request can share the same group commit.
                if pending.is_empty() && !appended.waits_for_flush() {
                    if let Some(mut response) = handlers::produce::complete(&broker, appended).await {
                        response.throttle_time_ms = response.throttle_time_ms.max(produce_throttle_ms);
                        let body = ResponseKind::Produce(response);
                        let out = protocol::encode_response(api_key, version, correlation_id, &body)?;
                        write_out(&mut writer, &out, &metrics).await?;
                    }
                    continue;
                }
                let b = broker.clone();
                pending.push_back(tokio::spawn(crate::fatal::client_scope(async move {
                    let _in_flight = in_flight_guard;
                    let _timer = timer;
                    let Some(mut response) = handlers::produce::complete(&b, appended).await else { return Ok(None) };
                    response.throttle_time_ms = response.throttle_time_ms.max(produce_throttle_ms);
                    let body = ResponseKind::Produce(response);
                    Ok(Some(Bytes::from(protocol::encode_response(api_key, version, correlation_id, &body)?)))
                })));
                while pending.len() >= MAX_PENDING_RESPONSES {
                    let done = pending.pop_front().expect("not empty").await;
                    write_completed(&mut writer, done, &metrics).await?;
                }
                continue;
            }
            Reply::Fetch(answer) => {
                let (parts, throttle_ms) =
                    throttle::fetch_parts(&broker, &request.header, version, answer, &quota, request_ms)?;
                write_parts(&mut writer, parts, &metrics).await?;
                muted_until = mute(throttle_ms);
            }
            Reply::Response(mut response) => {
                use crate::protocol::guard_schemas::{set_throttle_time_ms, throttle_time_ms};
                // A handler's own throttle (the controller mutation quota, a forwarded request's
                // answer) and the request quota's: the larger is answered and muted for.
                let handler_ms = throttle_time_ms(&response).map_or(0, |ms| ms.max(0) as u64);
                if request_ms > handler_ms {
                    set_throttle_time_ms(&mut response, throttle::clamp_ms(request_ms));
                }
                let out = protocol::encode_response(api_key, version, correlation_id, &response)?;
                write_out(&mut writer, &out, &metrics).await?;
                muted_until = mute(request_ms.max(handler_ms));
            }
            Reply::Nothing => {}
        }
        drop(in_flight_guard);
        drop(timer);
    }
}

/// `connections.max.idle.ms` (Kafka's default 10 minutes; negative: never): a connection that
/// reads no frame and writes no response for this long is closed, as Kafka's selector closes it.
fn idle_limit(properties: &crate::config::Properties) -> Option<Duration> {
    let ms = properties.get("connections.max.idle.ms").and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(600_000);
    u64::try_from(ms).ok().map(Duration::from_millis)
}

/// Writes one encoded response frame and counts its bytes.
async fn write_out(writer: &mut BufWriter<impl FrameWrite>, out: &[u8], metrics: &Metrics) -> anyhow::Result<()> {
    writer.write_all(out).await?;
    writer.flush().await?;
    metrics.sent(out.len());
    Ok(())
}

/// Writes a response frame made of parts: bytes through the buffer, file slices the stream's
/// own way (`FrameWrite::write_file`).
async fn write_parts(
    writer: &mut BufWriter<impl FrameWrite>,
    parts: Vec<OutPart>,
    metrics: &Metrics,
) -> anyhow::Result<()> {
    let mut total = 0;
    for part in parts {
        total += part.len();
        match part {
            OutPart::Bytes(bytes) => writer.write_all(&bytes).await?,
            OutPart::File(slice) => {
                writer.flush().await?;
                writer.get_mut().write_file(&slice).await?;
            }
        }
    }
    writer.flush().await?;
    metrics.sent(total);
    Ok(())
}

/// Sends a file slice to the socket with `sendfile` (no copy through user space). A file that
/// turns out shorter than the slice (it cannot, while the slice is below the high watermark)
/// ends the connection: the frame is already partly sent.
async fn send_file(socket: &TcpStream, slice: &FileSlice) -> anyhow::Result<()> {
    let mut offset = slice.position;
    let end = slice.position + slice.len as u64;
    while offset < end {
        socket.writable().await?;
        let want = (end - offset).min(1 << 30) as usize;
        let sent = socket.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(socket, &*slice.file, Some(&mut offset), want).map_err(std::io::Error::from)
        });
        match sent {
            Ok(0) => anyhow::bail!("segment file ended {} bytes before the fetched slice", end - offset),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Writes the response of a completed background request (if it has one).
async fn write_completed(
    writer: &mut BufWriter<impl FrameWrite>,
    done: Result<anyhow::Result<Option<Bytes>>, tokio::task::JoinError>,
    metrics: &Metrics,
) -> anyhow::Result<()> {
    match done?? {
        Some(out) => write_out(writer, &out, metrics).await,
        None => Ok(()),
    }
}

/// Writes every pending response, oldest first.
async fn drain(
    writer: &mut BufWriter<impl FrameWrite>,
    pending: &mut VecDeque<Pending>,
    metrics: &Metrics,
) -> anyhow::Result<()> {
    while let Some(next) = pending.pop_front() {
        write_completed(writer, next.await, metrics).await?;
    }
    Ok(())
}

/// A whole frame read ahead: its body, the moment it was whole (request latency counts from
/// there), its bytes in the request queue's pool and its place in that queue.
type Frame = (Bytes, Instant, Lease, Place);

/// Reads length-prefixed frames into `out` until EOF (channel closed) or an error (sent). Each
/// frame waits for its bytes in `queue`'s pool before its body is read and for a place in the
/// queue once whole (`request_queue`: both are Kafka's muting of a channel).
async fn read_frames(
    mut reader: impl FrameRead,
    max_frame: Arc<AtomicUsize>,
    queue: Arc<RequestQueue>,
    out: mpsc::Sender<anyhow::Result<Frame>>,
) {
    let mut spares = Spares::default();
    loop {
        if !spares.0.is_empty() && tokio::time::timeout(SPARE_IDLE, reader.readable()).await.is_err() {
            // `readable` is cancel-safe (it consumes nothing), unlike a read cut short.
            spares.0.clear();
        }
        let frame = read_frame(&mut reader, || max_frame.load(Ordering::Acquire), &queue, &mut spares).await;
        let last = !matches!(frame, Ok(Some(_)));
        let item = match frame {
            Ok(Some((frame, lease))) => {
                let whole_at = Instant::now();
                Ok((frame, whole_at, lease, queue.place().await))
            }
            Ok(None) => return,
            Err(e) => Err(e),
        };
        if out.send(item).await.is_err() || last {
            return;
        }
    }
}

/// Buffers that held earlier large frames. A frame body is read into a buffer that grows as its
/// bytes arrive (so a length prefix alone never makes the broker allocate), and every growth
/// copies what came so far: for a 5 MB produce request that is as much copying as receiving it.
/// Once every request read into a spare has been dropped, the next large frame is read straight
/// into it. Kept: at most `SPARE_BUFFERS`, each no bigger than twice a frame this connection
/// sent, all released after `SPARE_IDLE` without a request.
#[derive(Default)]
pub(crate) struct Spares(Vec<BytesMut>);

impl Spares {
    /// An empty buffer with room for `len` bytes whose earlier frames are all gone, if any.
    fn take_fitting(&mut self, len: usize) -> Option<BytesMut> {
        let i = self.0.iter_mut().position(|b| b.try_reclaim(len))?;
        Some(self.0.swap_remove(i))
    }

    fn keep(&mut self, rest: BytesMut) {
        if self.0.len() < SPARE_BUFFERS {
            self.0.push(rest);
        }
    }
}

/// One frame body and its bytes leased from `queue`'s pool (waited for once the length is
/// known, before the body is read); `None` at a clean end of stream between frames. `max_frame`
/// is asked once the length prefix has arrived, not before: a SASL connection's limit grows when
/// its authentication succeeds, which may be after this read began (the reader reads ahead).
pub(crate) async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    max_frame: impl Fn() -> usize,
    queue: &RequestQueue,
    spares: &mut Spares,
) -> anyhow::Result<Option<(Bytes, Lease)>> {
    let len = match reader.read_i32().await {
        Ok(len) => len,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let max_frame = max_frame();
    if len < 0 || len as usize > max_frame {
        anyhow::bail!("frame of {len} bytes is outside 0..={max_frame}");
    }
    let len = len as usize;
    let lease = queue.bytes(len).await;
    let large = len > INITIAL_FRAME_BYTES;
    let reused = if large { spares.take_fitting(len) } else { None };
    let mut frame = reused.unwrap_or_else(|| BytesMut::with_capacity(len.min(INITIAL_FRAME_BYTES)));
    while frame.len() < len {
        if frame.capacity() == frame.len() {
            frame.reserve((len - frame.len()).min(frame.len().max(INITIAL_FRAME_BYTES)));
        }
        let want = len - frame.len();
        let n = (&mut *reader).take(want as u64).read_buf(&mut frame).await?;
        if n == 0 {
            anyhow::bail!("connection closed mid-frame");
        }
    }
    let body = frame.split_to(len).freeze();
    if large {
        spares.keep(frame);
    }
    Ok(Some((body, lease)))
}

/// Aborts the frame reader when the connection ends, whichever way it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair over loopback: (client side, server read half).
    async fn pair() -> (TcpStream, OwnedReadHalf) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server.into_split().0)
    }

    fn frame(len: usize, fill: u8) -> Vec<u8> {
        let mut out = (len as i32).to_be_bytes().to_vec();
        out.resize(4 + len, fill);
        out
    }

    #[tokio::test]
    async fn large_frames_reuse_a_buffer_once_earlier_frames_are_dropped() {
        let (mut client, mut reader) = pair().await;
        let len = 300 * 1024;
        let mut spares = Spares::default();
        let unbounded = RequestQueue::unbounded();
        for fill in 1..=3u8 {
            client.write_all(&frame(len, fill)).await.unwrap();
        }
        let first = read_frame(&mut reader, || 1 << 20, &unbounded, &mut spares).await.unwrap().unwrap().0;
        let second = read_frame(&mut reader, || 1 << 20, &unbounded, &mut spares).await.unwrap().unwrap().0;
        assert_ne!(first.as_ptr(), second.as_ptr(), "a live frame's buffer is never reused");
        assert!(first.iter().all(|&b| b == 1) && second.iter().all(|&b| b == 2));
        assert_eq!(spares.0.len(), 2, "both buffers are kept");
        assert!(spares.take_fitting(len).is_none(), "no buffer is free while its frame lives");
        drop(first);
        let free = spares.take_fitting(len).expect("the first frame's buffer is free again");
        let free_at = free.as_ptr();
        assert!(free.capacity() >= len);
        spares.keep(free);
        let third = read_frame(&mut reader, || 1 << 20, &unbounded, &mut spares).await.unwrap().unwrap().0;
        assert_eq!(third.len(), len);
        assert!(third.iter().all(|&b| b == 3));
        assert_eq!(third.as_ptr(), free_at, "the third frame is read into the freed buffer");
        assert!(spares.0.len() <= SPARE_BUFFERS);
        drop(second);
    }

    #[tokio::test]
    async fn small_frames_keep_no_spares_and_a_short_frame_is_an_error() {
        let (mut client, mut reader) = pair().await;
        let mut spares = Spares::default();
        let unbounded = RequestQueue::unbounded();
        client.write_all(&frame(1000, 7)).await.unwrap();
        let small = read_frame(&mut reader, || 1 << 20, &unbounded, &mut spares).await.unwrap().unwrap().0;
        assert_eq!(small.len(), 1000);
        assert!(spares.0.is_empty());
        // A length prefix promising more than arrives: an error once the peer closes.
        client.write_all(&(200_000i32).to_be_bytes()).await.unwrap();
        client.write_all(&[0u8; 10]).await.unwrap();
        drop(client);
        assert!(read_frame(&mut reader, || 1 << 20, &unbounded, &mut spares).await.is_err());
    }

    /// A read that began under the pre-authentication limit takes the limit in force when the
    /// frame's length arrives (the SASL reader reads ahead of the authentication reply).
    #[tokio::test]
    async fn the_frame_limit_is_the_one_when_the_length_arrives() {
        let (mut client, mut reader) = pair().await;
        let limit = Arc::new(AtomicUsize::new(1024));
        let reading = {
            let limit = limit.clone();
            tokio::spawn(async move {
                let mut spares = Spares::default();
                read_frame(&mut reader, || limit.load(Ordering::Acquire), &RequestQueue::unbounded(), &mut spares)
                    .await
                    .map(|f| f.map(|(body, _)| body))
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        limit.store(1 << 20, Ordering::Release);
        client.write_all(&frame(600 * 1024, 9)).await.unwrap();
        let read = reading.await.unwrap().unwrap().unwrap();
        assert_eq!(read.len(), 600 * 1024);
    }
}
