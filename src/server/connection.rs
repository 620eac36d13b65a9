//! One client connection: read length-prefixed frames, handle them one at a time in arrival
//! order (as Kafka does, so pipelined produce requests append in order), write responses.
//!
//! Invariants: a frame larger than `socket.request.max.bytes`, or one that cannot be parsed,
//! closes this connection only; memory for a frame grows with the bytes actually received,
//! never with the length a client merely claims.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::broker::Broker;
use crate::handlers::{self, RequestContext};
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

pub async fn serve(
    socket: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    in_flight: Arc<AtomicUsize>,
) -> anyhow::Result<()> {
    // IPv4 clients of a dual-stack socket show up as ::ffff:a.b.c.d; advertise plain a.b.c.d.
    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let ctx = RequestContext { local_addr: canonical(socket.local_addr()?), peer_addr: canonical(peer) };
    let (mut reader, writer) = socket.into_split();
    let mut writer = BufWriter::new(writer);
    let max_frame = broker.config.socket_request_max_bytes;
    loop {
        let len = tokio::select! {
            len = reader.read_i32() => match len {
                Ok(len) => len,
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e.into()),
            },
            _ = stop.changed() => return Ok(()),
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
            let n = (&mut reader).take(want as u64).read_buf(&mut frame).await?;
            if n == 0 {
                anyhow::bail!("connection closed mid-frame");
            }
        }
        let frame = frame.freeze();
        let _in_flight = InFlight::start(&in_flight);
        let request = match protocol::decode_request(frame) {
            Ok(request) => request,
            Err(ProtocolError::UnsupportedVersion { api_key: ApiKey::ApiVersions, correlation_id, .. }) => {
                let body = ResponseKind::ApiVersions(handlers::unsupported_version_response());
                let out = protocol::encode_response(ApiKey::ApiVersions, 0, correlation_id, &body)?;
                writer.write_all(&out).await?;
                writer.flush().await?;
                continue;
            }
            Err(e) => {
                tracing::info!(%peer, error = %e, "closing connection on a bad request");
                return Ok(());
            }
        };
        let (api_key, version, correlation_id) = (request.api_key, request.version, request.header.correlation_id);
        let Some(response) = handlers::dispatch(&broker, &ctx, request).await else { continue };
        let out = protocol::encode_response(api_key, version, correlation_id, &response)?;
        writer.write_all(&out).await?;
        writer.flush().await?;
    }
}
