//! A Kafka-protocol client connection from this node to a controller (Kafka's
//! `NodeToControllerChannelManager` / `KafkaNetworkChannel`, reduced to one request at a time):
//! length-prefixed frames, request header v1/v2 with this node's client id, correlation ids
//! checked on the way back. Over TLS and with a SASL login when the listener asks for them
//! (`security::client`): the login (SaslHandshake v1, SaslAuthenticate v2: PLAIN, SCRAM,
//! OAUTHBEARER) right after connecting, and again before the session's lifetime (KIP-368,
//! `connections.max.reauth.ms` on the server) runs out.
//! Invariants: a request gets its own response or an error (never another request's); every
//! wait is bounded by the connection's timeout; a response frame larger than
//! `MAX_RESPONSE_BYTES` closes the connection before it is read, and a frame's buffer grows as
//! its bytes arrive (a peer announcing a large frame and sending little makes this node allocate
//! little). Peers are input too: their frames are bounded like clients', and a response frame
//! passes the allocation guard (`protocol::guard::check_response`) before it is decoded: one the
//! guard refuses is an error on that exchange, never an abort.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::security::client::{ClientSecurity, Login};
use crate::security::scram;

/// A connection's byte stream: TCP, or TLS over it.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Stream for T {}

/// Upper bound on one response frame (a metadata Fetch answers at most its max_bytes, 8 MiB).
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A frame body's buffer grows by at most this much ahead of the bytes that arrived.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Reads a frame body of `len` bytes, its buffer growing as the bytes arrive rather than sized
/// from the length alone.
async fn read_body(stream: &mut (impl AsyncRead + Unpin), len: usize) -> std::io::Result<BytesMut> {
    let mut body = BytesMut::with_capacity(len.min(READ_CHUNK_BYTES));
    while body.len() < len {
        let left = len - body.len();
        body.reserve(left.min(READ_CHUNK_BYTES));
        let read = (&mut *stream).take(left as u64).read_buf(&mut body).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(body)
}

pub struct Connection {
    stream: Box<dyn Stream>,
    addr: String,
    client_id: StrBytes,
    next_correlation_id: i32,
    timeout: Duration,
    /// When the last exchange ended (or the connection was made).
    last_used: Instant,
    /// The SASL login, when the listener is SASL, and when to log in again (KIP-368).
    login: Option<Login>,
    reauthenticate_at: Option<Instant>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("addr", &self.addr).finish()
    }
}

/// Whether a request failed in transport (refused, reset, closed: an I/O error), rather than by
/// timing out or with a bad answer (a slow peer is not taken for a gone one).
pub fn transport_failed(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| cause.downcast_ref::<std::io::Error>().is_some())
}

impl Connection {
    /// Connects to `addr` (`host:port`) within `timeout`, over TLS and logged in as `security`
    /// says.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        security: &Arc<ClientSecurity>,
    ) -> anyhow::Result<Connection> {
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| anyhow::anyhow!("connecting to {addr} timed out"))??;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match security.tls() {
            None => Box::new(tcp),
            Some(connector) => {
                let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|_| anyhow::anyhow!("{addr}: {host} is not a host name for TLS"))?;
                let tls = tokio::time::timeout(timeout, connector.connect(name, tcp))
                    .await
                    .map_err(|_| anyhow::anyhow!("TLS handshake with {addr} timed out"))?
                    .map_err(|e| anyhow::anyhow!("TLS handshake with {addr} (listener {}): {e}", security.listener))?;
                Box::new(tls)
            }
        };
        let mut conn = Connection {
            stream,
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            next_correlation_id: 0,
            timeout,
            last_used: Instant::now(),
            login: security.login.clone(),
            reauthenticate_at: None,
        };
        if conn.login.is_some() {
            conn.authenticate().await?;
        }
        Ok(conn)
    }

    /// The SASL exchange (also a KIP-368 re-authentication on an authenticated connection).
    async fn authenticate(&mut self) -> anyhow::Result<()> {
        let login = self.login.clone().expect("a SASL connection");
        let mechanism = login.mechanism();
        let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let answer = self.exchange(1, &handshake, Duration::ZERO).await?;
        anyhow::ensure!(
            answer.error_code == 0,
            "{}: SASL mechanism {mechanism} refused (error {}; the listener enables {:?})",
            self.addr,
            answer.error_code,
            answer.mechanisms.iter().map(|m| m.as_str()).collect::<Vec<_>>()
        );
        let lifetime_ms = match &login {
            Login::Plain { user, password } => self.token(format!("\0{user}\0{password}").into_bytes()).await?.1,
            Login::OAuthUnsecured { subject, lifetime_s } => {
                let message = Login::oauth_message(subject, *lifetime_s, crate::log::now_ms());
                self.token(message).await?.1
            }
            Login::Scram { mechanism, user, password } => {
                let first = scram::client::first(user, &scram::random_nonce());
                let (server_first, _) = self.token(first.clone().into_bytes()).await?;
                let server_first = String::from_utf8(server_first.to_vec())
                    .map_err(|_| anyhow::anyhow!("{}: SCRAM server-first message is not text", self.addr))?;
                scram::client::check_server_first(&first, &server_first)
                    .map_err(|why| anyhow::anyhow!("{}: SCRAM server-first message refused: {why}", self.addr))?;
                let (last, signature) = scram::client::last(*mechanism, password, &first, &server_first);
                let (server_last, lifetime_ms) = self.token(last.into_bytes()).await?;
                use base64::Engine;
                let expected = format!("v={}", base64::engine::general_purpose::STANDARD.encode(signature));
                anyhow::ensure!(
                    server_last.as_ref() == expected.as_bytes(),
                    "{}: the SCRAM server's signature does not match (not the server this password was set on)",
                    self.addr
                );
                lifetime_ms
            }
        };
        // Again at 85% of the session's lifetime (Kafka's clients pick 85-95%).
        self.reauthenticate_at =
            (lifetime_ms > 0).then(|| Instant::now() + Duration::from_millis(lifetime_ms as u64 * 85 / 100));
        Ok(())
    }

    /// One SaslAuthenticate round: the server's bytes and the session lifetime it gave.
    async fn token(&mut self, bytes: Vec<u8>) -> anyhow::Result<(Bytes, i64)> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let answer = self.exchange(2, &request, Duration::ZERO).await?;
        anyhow::ensure!(
            answer.error_code == 0,
            "{}: SASL authentication failed (error {}): {}",
            self.addr,
            answer.error_code,
            answer.error_message.as_deref().unwrap_or("")
        );
        Ok((answer.auth_bytes, answer.session_lifetime_ms))
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
    /// Fetch's max_wait_ms) for its response; logs in again first when the session is due to.
    pub async fn send<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        extra_wait: Duration,
    ) -> anyhow::Result<R::Response> {
        if self.reauthenticate_at.is_some_and(|at| Instant::now() >= at) {
            self.authenticate().await?;
        }
        self.exchange(version, request, extra_wait).await
    }

    async fn exchange<R: Request>(
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
            let body = read_body(&mut self.stream, len as usize).await?;
            Ok::<_, anyhow::Error>(body)
        };
        let body = tokio::time::timeout(deadline, exchange)
            .await
            .map_err(|_| anyhow::anyhow!("no response from {} within {deadline:?}", self.addr))??;
        self.last_used = Instant::now();
        // The peer's bytes: through the allocation guard before any decoder sees them (the
        // frame was read whole, so the connection stays in step after a refusal).
        crate::protocol::guard::check_response(R::KEY, version, &body).map_err(|e| {
            anyhow::anyhow!("response from {} (api {} v{version}) refused before decoding: {e}", self.addr, R::KEY)
        })?;
        // Decoded from `Bytes`, as the guard's estimate assumes (strings and records zero-copy).
        let mut body = body.freeze();
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

#[cfg(test)]
mod read_body_tests {
    use super::*;

    #[tokio::test]
    async fn a_body_is_read_whole_and_a_short_one_is_an_error_or_a_wait() {
        let (mut tx, mut rx) = tokio::io::duplex(1 << 20);
        let sent: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        tx.write_all(&sent).await.unwrap();
        let body = read_body(&mut rx, sent.len()).await.unwrap();
        assert_eq!(&body[..], &sent[..]);
        // A peer announcing 64 MiB and sending 10 bytes: the read ends with the connection.
        let (mut tx, mut rx) = tokio::io::duplex(1024);
        tx.write_all(&[7; 10]).await.unwrap();
        drop(tx);
        let err = read_body(&mut rx, MAX_RESPONSE_BYTES).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        let (mut tx, mut rx) = tokio::io::duplex(1024);
        tx.write_all(&[7; 10]).await.unwrap();
        let reading = tokio::spawn(async move { read_body(&mut rx, MAX_RESPONSE_BYTES).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!reading.is_finished(), "waits for the rest");
        reading.abort();
    }
}

#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
