//! The metrics HTTP endpoint (`ketch.metrics.listener`): a minimal HTTP/1.1 responder on a plain
//! tokio `TcpListener`, one request per connection.
//!
//! Owns: binding the endpoint (before recovery, so `/ready` answers 503 while the broker
//! recovers), and answering `GET /metrics` (Prometheus text format 0.0.4), `GET /ready` and its
//! alias `/health` (200 once the broker serves, 503 before and while stopping), `GET /live`
//! (200 whenever this listener runs); 404 for other paths, 405 for other methods, 400 for
//! malformed requests, 431 for oversized ones. `HEAD` is answered like `GET` without the body.
//! Invariants: a request head is read into one fixed buffer of `MAX_REQUEST_BYTES` (nothing
//! the client sends makes it allocate more), at most `MAX_CONNECTIONS` are served at once
//! (more are closed at once), reading the head has a deadline, no input panics; every response
//! carries `Content-Length` and `Connection: close`, and the connection is then closed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::{Metrics, Readiness};

/// The most bytes of a request head (request line plus headers) that are read.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// Connections served at the same time; more are closed without an answer.
const MAX_CONNECTIONS: usize = 16;
/// Deadline for the whole request head to arrive.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Deadline for writing a response.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Binds the endpoint (an empty host means every interface: dual-stack IPv6, else IPv4) and
/// records its address in `metrics`.
pub async fn bind(host: &str, port: u16, metrics: &Metrics) -> io::Result<TcpListener> {
    let listener = if host.is_empty() {
        match TcpListener::bind(("::", port)).await {
            Ok(v6) => v6,
            Err(_) => TcpListener::bind(("0.0.0.0", port)).await?,
        }
    } else {
        TcpListener::bind((host, port)).await?
    };
    metrics.set_endpoint(listener.local_addr()?);
    Ok(listener)
}

/// Serves the endpoint until the task is aborted or the runtime ends.
pub fn spawn(listener: TcpListener, metrics: Arc<Metrics>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let Ok(permit) = permits.clone().try_acquire_owned() else {
                        tracing::debug!(%peer, "metrics endpoint busy: connection closed");
                        continue;
                    };
                    let metrics = metrics.clone();
                    tokio::spawn(crate::fatal::client_scope(async move {
                        let _permit = permit;
                        if let Err(e) = serve(stream, &metrics).await {
                            tracing::debug!(%peer, error = %e, "metrics connection failed");
                        }
                    }));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    })
}

/// What reading a request head gave.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// The head ends at this many bytes into the buffer (the blank line included).
    Complete(usize),
    /// `MAX_REQUEST_BYTES` arrived without the blank line that ends a head.
    TooLarge,
    /// The client closed before finishing its head.
    Closed,
}

async fn serve(mut stream: TcpStream, metrics: &Arc<Metrics>) -> io::Result<()> {
    let mut buf = [0u8; MAX_REQUEST_BYTES];
    let head = match tokio::time::timeout(READ_TIMEOUT, read_head(&mut stream, &mut buf)).await {
        Ok(head) => head?,
        Err(_) => return Ok(()), // too slow: close without an answer
    };
    let response = match head {
        Head::Complete(n) => match parse_request(&buf[..n]) {
            Ok(request) => route(request, metrics).await,
            Err(response) => response,
        },
        Head::TooLarge => Response::text(431, "Request Header Fields Too Large", "request head too large\n"),
        Head::Closed => return Ok(()),
    };
    match tokio::time::timeout(WRITE_TIMEOUT, write_response(&mut stream, &response)).await {
        Ok(result) => result,
        Err(_) => Ok(()),
    }
}

async fn read_head(stream: &mut TcpStream, buf: &mut [u8; MAX_REQUEST_BYTES]) -> io::Result<Head> {
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Ok(Head::TooLarge);
        }
        let n = stream.read(&mut buf[len..]).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        // Only the new bytes (and the 3 before them) can complete the terminator.
        let from = len.saturating_sub(3);
        len += n;
        if let Some(end) = head_end(&buf[from..len]) {
            return Ok(Head::Complete(from + end));
        }
    }
}

/// The end (exclusive) of the first blank line (`\r\n\r\n` or `\n\n`) in `bytes`.
fn head_end(bytes: &[u8]) -> Option<usize> {
    for i in 0..bytes.len() {
        if bytes[i..].starts_with(b"\r\n\r\n") {
            return Some(i + 4);
        }
        if bytes[i..].starts_with(b"\n\n") {
            return Some(i + 2);
        }
    }
    None
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Head,
}

#[derive(Debug, PartialEq, Eq)]
struct Request<'a> {
    method: Method,
    /// The target without its query string.
    path: &'a str,
}

/// Parses the request line of a complete head; headers are read but not interpreted.
fn parse_request(head: &[u8]) -> Result<Request<'_>, Response> {
    let bad = || Response::text(400, "Bad Request", "bad request\n");
    let line_end = head.iter().position(|&b| b == b'\n').ok_or_else(bad)?;
    let line = &head[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = std::str::from_utf8(line).map_err(|_| bad())?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    if !version.starts_with("HTTP/1.") || target.is_empty() {
        return Err(bad());
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        _ => return Err(Response::text(405, "Method Not Allowed", "only GET and HEAD\n").allow("GET, HEAD")),
    };
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Ok(Request { method, path })
}

async fn route(request: Request<'_>, metrics: &Arc<Metrics>) -> Response {
    let mut response = match request.path {
        "/metrics" => {
            // Rendering locks partition logs and the group coordinator: keep it off the runtime.
            let m = metrics.clone();
            match tokio::task::spawn_blocking(move || m.render()).await {
                Ok(body) => Response { content_type: METRICS_CONTENT_TYPE, ..Response::text(200, "OK", "") }.body(body),
                Err(_) => Response::text(500, "Internal Server Error", "rendering metrics failed\n"),
            }
        }
        "/ready" | "/health" => match metrics.readiness() {
            Readiness::Ready => Response::text(200, "OK", "ready\n"),
            Readiness::Starting => Response::text(503, "Service Unavailable", "not ready: recovering\n"),
            Readiness::Stopping => Response::text(503, "Service Unavailable", "not ready: shutting down\n"),
        },
        "/live" => Response::text(200, "OK", "live\n"),
        _ => Response::text(404, "Not Found", "not found: try /metrics, /ready, /live\n"),
    };
    response.head_only = request.method == Method::Head;
    response
}

#[derive(Debug)]
struct Response {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    allow: Option<&'static str>,
    body: String,
    head_only: bool,
}

impl Response {
    fn text(status: u16, reason: &'static str, body: &str) -> Response {
        Response { status, reason, content_type: TEXT, allow: None, body: body.to_string(), head_only: false }
    }

    fn body(mut self, body: String) -> Response {
        self.body = body;
        self
    }

    fn allow(mut self, methods: &'static str) -> Response {
        self.allow = Some(methods);
        self
    }

    fn head(&self) -> String {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.status,
            self.reason,
            self.content_type,
            self.body.len()
        );
        if let Some(allow) = self.allow {
            head.push_str("Allow: ");
            head.push_str(allow);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        head
    }
}

async fn write_response(stream: &mut TcpStream, response: &Response) -> io::Result<()> {
    stream.write_all(response.head().as_bytes()).await?;
    if !response.head_only {
        stream.write_all(response.body.as_bytes()).await?;
    }
    stream.flush().await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_end_finds_either_terminator() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(head_end(b""), None);
    }

    #[test]
    fn request_line_parsing() {
        let ok = parse_request(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!(ok, Request { method: Method::Get, path: "/metrics" });
        assert_eq!(parse_request(b"HEAD /ready HTTP/1.0\n\n").unwrap().method, Method::Head);
        for bad in [
            &b"\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"GET /\xff\xfe HTTP/1.1\r\n\r\n",
            b"no newline at all",
        ] {
            assert_eq!(parse_request(bad).unwrap_err().status, 400, "{:?}", String::from_utf8_lossy(bad));
        }
        let post = parse_request(b"POST /metrics HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!((post.status, post.allow), (405, Some("GET, HEAD")));
    }

    #[test]
    fn response_head_has_length_and_close() {
        let r = Response::text(404, "Not Found", "nope\n");
        assert_eq!(
            r.head(),
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
        );
    }
}
