//! One client connection: read length-prefixed frames, handle them in arrival order, write the
//! responses in that same order.
//!
//! Produce requests are appended at once, in order, but their responses may wait for an fsync
//! (acks=all): those waits run in the background so the next pipelined produce request is
//! appended meanwhile and shares the same group commit. Any other request first waits for every
//! earlier response, so it sees what those requests did, as with Kafka's one-request-at-a-time
//! channel muting.
//!
//! Fetch responses are written in parts (`protocol::fetch_frame`): encoded bytes with `write`,
//! stored batches straight from their segment file with `sendfile`.
//!
//! Invariants: a frame larger than `socket.request.max.bytes`, or one that cannot be parsed,
//! closes this connection only; memory for a frame grows with the bytes actually received,
//! never with the length a client merely claims.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::broker::Broker;
use crate::handlers::{self, RequestContext};
use crate::log::FileSlice;
use crate::metrics::Metrics;
use crate::protocol::fetch_frame::{self, OutPart};
use crate::protocol::{self, ProtocolError};

/// Initial buffer for a frame body; it grows as bytes arrive.
const INITIAL_FRAME_BYTES: usize = 64 * 1024;

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

pub async fn serve(
    socket: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    in_flight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
) -> anyhow::Result<()> {
    let _connection = metrics.connection_opened();
    // IPv4 clients of a dual-stack socket show up as ::ffff:a.b.c.d; advertise plain a.b.c.d.
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let ctx = RequestContext { local_addr: canonical(socket.local_addr()?), peer_addr: canonical(peer) };
    let (reader, writer) = socket.into_split();
    let mut writer = BufWriter::new(writer);
    // Frames are read by their own task so that reading is never cancelled half-way; the
    // channel holds one frame, so a connection buffers at most one request ahead.
    let (frames_tx, mut frames) = mpsc::channel(1);
    let max_frame = broker.config.socket_request_max_bytes;
    let reader_task = tokio::spawn(read_frames(reader, max_frame, frames_tx));
    let _stop_reader = AbortOnDrop(reader_task);
    let mut pending: VecDeque<Pending> = VecDeque::new();
    loop {
        let frame = tokio::select! {
            biased;
            done = async { pending.front_mut().expect("not empty").await }, if !pending.is_empty() => {
                pending.pop_front();
                write_completed(&mut writer, done, &metrics).await?;
                continue;
            }
            frame = frames.recv() => frame,
            _ = stop.changed() => return Ok(()),
        };
        let (frame, received_at) = match frame {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => {
                drain(&mut writer, &mut pending, &metrics).await?;
                return Err(e);
            }
            None => return drain(&mut writer, &mut pending, &metrics).await,
        };
        metrics.received(4 + frame.len());
        let in_flight_guard = InFlight::start(&in_flight);
        let request = match protocol::decode_request(frame) {
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
        // Counts the request now and observes its latency when dropped: after the response is
        // written, or, for a produce completed in the background, when its response is ready.
        let timer = metrics.request(api_key, received_at);
        if let RequestKind::Produce(req) = request.body {
            // Append now, in arrival order; the response waits for its fsync in the background
            // so the next pipelined request can share the same group commit.
            let appended = handlers::produce::append(&broker, req, version);
            if pending.is_empty() && !appended.waits_for_flush() {
                if let Some(response) = handlers::produce::complete(&broker, appended).await {
                    let out =
                        protocol::encode_response(api_key, version, correlation_id, &ResponseKind::Produce(response))?;
                    write_out(&mut writer, &out, &metrics).await?;
                }
                continue;
            }
            let b = broker.clone();
            pending.push_back(tokio::spawn(async move {
                let _in_flight = in_flight_guard;
                let _timer = timer;
                let Some(response) = handlers::produce::complete(&b, appended).await else { return Ok(None) };
                let body = ResponseKind::Produce(response);
                Ok(Some(Bytes::from(protocol::encode_response(api_key, version, correlation_id, &body)?)))
            }));
            while pending.len() >= MAX_PENDING_RESPONSES {
                let done = pending.pop_front().expect("not empty").await;
                write_completed(&mut writer, done, &metrics).await?;
            }
            continue;
        }
        // Every other request sees the effects of the produce requests before it.
        drain(&mut writer, &mut pending, &metrics).await?;
        if let RequestKind::Fetch(req) = request.body {
            let answer = handlers::fetch::handle(&broker, req, version).await;
            let parts = fetch_frame::encode_fetch_response(version, correlation_id, answer)?;
            write_parts(&mut writer, parts, &metrics).await?;
            continue;
        }
        let Some(response) = handlers::dispatch(&broker, &ctx, request).await else { continue };
        let out = protocol::encode_response(api_key, version, correlation_id, &response)?;
        write_out(&mut writer, &out, &metrics).await?;
        drop(in_flight_guard);
        drop(timer);
    }
}

/// Writes one encoded response frame and counts its bytes.
async fn write_out(writer: &mut BufWriter<OwnedWriteHalf>, out: &[u8], metrics: &Metrics) -> anyhow::Result<()> {
    writer.write_all(out).await?;
    writer.flush().await?;
    metrics.sent(out.len());
    Ok(())
}

/// Writes a response frame made of parts: bytes through the buffer, file slices with sendfile.
async fn write_parts(
    writer: &mut BufWriter<OwnedWriteHalf>,
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
                send_file(writer.get_ref().as_ref(), &slice).await?;
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
    writer: &mut BufWriter<OwnedWriteHalf>,
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
    writer: &mut BufWriter<OwnedWriteHalf>,
    pending: &mut VecDeque<Pending>,
    metrics: &Metrics,
) -> anyhow::Result<()> {
    while let Some(next) = pending.pop_front() {
        write_completed(writer, next.await, metrics).await?;
    }
    Ok(())
}

/// Reads length-prefixed frames into `out` until EOF (channel closed) or an error (sent). Each
/// frame carries the moment it was whole (request latency counts from there).
async fn read_frames(mut reader: OwnedReadHalf, max_frame: usize, out: mpsc::Sender<anyhow::Result<(Bytes, Instant)>>) {
    loop {
        let frame = read_frame(&mut reader, max_frame).await;
        let last = !matches!(frame, Ok(Some(_)));
        let item = match frame {
            Ok(Some(frame)) => Ok((frame, Instant::now())),
            Ok(None) => return,
            Err(e) => Err(e),
        };
        if out.send(item).await.is_err() || last {
            return;
        }
    }
}

/// One frame body; `None` at a clean end of stream between frames.
async fn read_frame(reader: &mut OwnedReadHalf, max_frame: usize) -> anyhow::Result<Option<Bytes>> {
    let len = match reader.read_i32().await {
        Ok(len) => len,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if len < 0 || len as usize > max_frame {
        anyhow::bail!("frame of {len} bytes is outside 0..={max_frame}");
    }
    let len = len as usize;
    let mut frame = BytesMut::with_capacity(len.min(INITIAL_FRAME_BYTES));
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
    Ok(Some(frame.freeze()))
}

/// Aborts the frame reader when the connection ends, whichever way it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
