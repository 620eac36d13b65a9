//! A Kafka-protocol client connection from this node to a controller (Kafka's
//! `NodeToControllerChannelManager` / `KafkaNetworkChannel`, reduced to one request at a time):
//! length-prefixed frames, request header v1/v2 with this node's client id, correlation ids
//! checked on the way back.
//! Invariants: a request gets its own response or an error (never another request's); every
//! wait is bounded by the connection's timeout; a response frame larger than
//! `MAX_RESPONSE_BYTES` closes the connection before it is read. The controllers are peers this
//! node was configured to trust (as in Kafka); their frames are still bounded.

use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Upper bound on one response frame (a metadata Fetch answers at most its max_bytes, 8 MiB).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

pub struct Connection {
    stream: TcpStream,
    addr: String,
    client_id: StrBytes,
    next_correlation_id: i32,
    timeout: Duration,
    /// When the last exchange ended (or the connection was made).
    last_used: std::time::Instant,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("addr", &self.addr).finish()
    }
}

impl Connection {
    /// Connects to `addr` (`host:port`) within `timeout`.
    pub async fn connect(addr: &str, client_id: &str, timeout: Duration) -> anyhow::Result<Connection> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow::anyhow!("connecting to {addr} timed out"))??;
        let _ = stream.set_nodelay(true);
        Ok(Connection {
            stream,
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            next_correlation_id: 0,
            timeout,
            last_used: std::time::Instant::now(),
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// How long since the last exchange (a broker closes connections idle for its
    /// `connections.max.idle.ms`, 10 minutes by default).
    pub fn idle_for(&self) -> Duration {
        self.last_used.elapsed()
    }

    /// Sends `request` at `version` and waits (at most the timeout plus `extra_wait`, e.g. a
    /// Fetch's max_wait_ms) for its response.
    pub async fn send<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        extra_wait: Duration,
    ) -> anyhow::Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::with_capacity(256);
        frame.extend_from_slice(&[0; 4]);
        header.encode(&mut frame, R::header_version(version))?;
        request.encode(&mut frame, version)?;
        let len = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        let deadline = self.timeout + extra_wait;
        let exchange = async {
            self.stream.write_all(&frame).await?;
            let mut len = [0u8; 4];
            self.stream.read_exact(&mut len).await?;
            let len = i32::from_be_bytes(len);
            anyhow::ensure!(
                len >= 4 && (len as usize) <= MAX_RESPONSE_BYTES,
                "response frame of {len} bytes from {}",
                self.addr
            );
            let mut body = BytesMut::zeroed(len as usize);
            self.stream.read_exact(&mut body).await?;
            Ok::<_, anyhow::Error>(body)
        };
        let mut body = tokio::time::timeout(deadline, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("no response from {} within {deadline:?}", self.addr))??;
        self.last_used = std::time::Instant::now();
        let header = ResponseHeader::decode(&mut body, R::Response::header_version(version))?;
        anyhow::ensure!(
            header.correlation_id == correlation_id,
            "response to correlation id {} from {}, expected {correlation_id}",
            header.correlation_id,
            self.addr
        );
        let response = R::Response::decode(&mut body, version)?;
        if body.has_remaining() {
            tracing::debug!(addr = %self.addr, left = body.remaining(), "bytes left after a response");
        }
        Ok(response)
    }
}
