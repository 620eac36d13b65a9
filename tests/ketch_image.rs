//! The scenario a user of the container image runs, against a native `ketch` process configured
//! the way the image configures it (`KETCH_LISTENERS` / `KETCH_ADVERTISED_LISTENERS` on a port
//! chosen beforehand) and, with `--features testcontainers`, against the image `ketch:dev` built by
//! `scripts/docker-image` (`KETCH_IMAGE` names another) through `ketch::testcontainers::Ketch`.
//! That test needs a Docker engine (scripts/test starts one) and fails without one.

mod common;

use std::net::TcpStream;
use std::time::Duration;

use common::{batch, call, produce};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Connects to `bootstrap`, checks the broker advertises exactly that address, auto-creates
/// topic "t" and produces two records to it.
fn scenario(bootstrap: &str) {
    let mut s = TcpStream::connect(bootstrap).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = MetadataRequest::default().with_allow_auto_topic_creation(true).with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("t")))),
    ]));
    let ResponseKind::Metadata(metadata) = call(&mut s, ApiKey::Metadata, 9, RequestKind::Metadata(request)) else {
        panic!("not a Metadata response")
    };
    let advertised: Vec<String> = metadata.brokers.iter().map(|b| format!("{}:{}", b.host.as_str(), b.port)).collect();
    assert_eq!(advertised, vec![bootstrap.to_string()], "clients must be sent back to the address they used");
    assert_eq!(metadata.topics.len(), 1);
    assert_eq!(produce(&mut s, batch("a")), (0, 0));
    assert_eq!(produce(&mut s, batch("b")), (0, 1));
}

#[test]
fn native_broker_configured_like_the_image() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listeners = format!("PLAINTEXT://127.0.0.1:{port}");
    // TestBroker's own `--override listeners=...:0` is replaced by the later override.
    let dir = tempfile::tempdir().unwrap();
    let broker = common::TestBroker::start_with_env(
        dir,
        &[&format!("listeners={listeners}")],
        &[("KETCH_ADVERTISED_LISTENERS", &listeners)],
    );
    assert_eq!(broker.port, port);
    scenario(&format!("127.0.0.1:{port}"));
}

/// The image `scripts/docker-image` builds (`KETCH_IMAGE` names another).
#[cfg(feature = "testcontainers")]
fn image_under_test() -> (String, String) {
    let image = std::env::var("KETCH_IMAGE").unwrap_or_else(|_| "ketch:dev".into());
    let (name, tag) = image.rsplit_once(':').unwrap_or((&image, "latest"));
    (name.to_string(), tag.to_string())
}

#[cfg(feature = "testcontainers")]
#[tokio::test(flavor = "multi_thread")]
async fn container_image_through_testcontainers() {
    let engine = docker_engine()
        .unwrap_or_else(|why| panic!("no Docker engine reachable ({why}); scripts/test starts one (`dockerd`)"));
    // testcontainers' client (bollard) speaks one API version and does not negotiate: an older
    // engine (Debian bookworm's docker.io answers 1.41) refuses it, so talk through a shim that
    // rewrites the version in each request path.
    if version_less(&engine.api_version, docker_api_shim::CLIENT_API_VERSION) {
        let addr = docker_api_shim::start(engine.clone()).await;
        // Before testcontainers' first call, which reads it once.
        std::env::set_var("DOCKER_HOST", format!("tcp://{addr}"));
    }
    let (name, tag) = image_under_test();
    let ketch = ketch::testcontainers::Ketch::default()
        .with_image(name.clone(), tag.clone())
        .run()
        .await
        .unwrap_or_else(|e| panic!("start {name}:{tag} (build it with scripts/docker-image): {e}"));
    let bootstrap = ketch.bootstrap_servers().to_string();
    tokio::task::spawn_blocking(move || scenario(&bootstrap)).await.unwrap();
}

/// Where testcontainers looks for an engine (`DOCKER_HOST`, else the default socket) and the
/// highest API version it answers.
#[cfg(feature = "testcontainers")]
#[derive(Clone, Debug)]
struct Engine {
    socket: String,
    api_version: String,
}

#[cfg(feature = "testcontainers")]
fn docker_engine() -> Result<Engine, String> {
    use std::io::{Read, Write};
    let host = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    let Some(path) = host.strip_prefix("unix://") else {
        return Ok(Engine { socket: host, api_version: docker_api_shim::CLIENT_API_VERSION.into() });
    };
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(|e| format!("{path}: {e}"))?;
    s.write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    let api_version = answer
        .split("\"ApiVersion\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .ok_or_else(|| format!("no ApiVersion in {answer:?}"))?
        .to_string();
    Ok(Engine { socket: path.to_string(), api_version })
}

/// `"1.41" < "1.52"`, numerically.
#[cfg(feature = "testcontainers")]
fn version_less(a: &str, b: &str) -> bool {
    let parse = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap_or(0)).collect() };
    parse(a) < parse(b)
}

#[cfg(feature = "testcontainers")]
mod docker_api_shim {
    //! A TCP proxy to the engine's Unix socket that rewrites `/v<client>/` to `/v<engine>/` in
    //! request lines. Same length, so bodies and Content-Length are untouched; responses pass as
    //! they are. Enough for what testcontainers asks (create, start, inspect, logs, stop, remove).

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The API version of the bollard that testcontainers uses (`bollard::API_DEFAULT_VERSION`).
    pub const CLIENT_API_VERSION: &str = "1.52";

    pub async fn start(engine: super::Engine) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let from = format!(" /v{CLIENT_API_VERSION}/").into_bytes();
        let to = format!(" /v{}/", engine.api_version).into_bytes();
        assert_eq!(from.len(), to.len(), "engine API version {} not of the form 1.NN", engine.api_version);
        tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else { return };
                let Ok(daemon) = tokio::net::UnixStream::connect(&engine.socket).await else { continue };
                let (from, to) = (from.clone(), to.clone());
                tokio::spawn(async move {
                    let (mut client_read, mut client_write) = client.into_split();
                    let (mut daemon_read, mut daemon_write) = daemon.into_split();
                    let upstream = async move {
                        // Bytes not yet sent because they could be the start of `from`.
                        let mut pending: Vec<u8> = Vec::new();
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = client_read.read(&mut buf).await?;
                            if n == 0 {
                                daemon_write.write_all(&pending).await?;
                                return daemon_write.shutdown().await;
                            }
                            pending.extend_from_slice(&buf[..n]);
                            let mut i = 0;
                            while let Some(at) = pending[i..].windows(from.len()).position(|w| w == from) {
                                pending[i + at..i + at + to.len()].copy_from_slice(&to);
                                i += at + to.len();
                            }
                            // Hold back only a tail that could begin `from` (a request ends
                            // in "\r\n" or a body, so usually nothing is held).
                            let keep = (1..from.len().min(pending.len() + 1))
                                .rev()
                                .find(|&k| pending.ends_with(&from[..k]))
                                .unwrap_or(0);
                            let send = pending.len() - keep;
                            daemon_write.write_all(&pending[..send]).await?;
                            pending.drain(..send);
                        }
                    };
                    let downstream = tokio::io::copy(&mut daemon_read, &mut client_write);
                    let _ = tokio::join!(upstream, downstream);
                });
            }
        });
        addr
    }
}
