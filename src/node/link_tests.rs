//! The link to the controller against a fake controller: connections kept, the controller's
//! ApiVersions asked once per connection, a kept connection the controller closed replaced.

use std::sync::atomic::{AtomicUsize, Ordering};

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, RequestKind,
    ResponseKind,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::config::Properties;

#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    api_versions: AtomicUsize,
    create_topics: AtomicUsize,
}

/// Serves ApiVersions (CreateTopics v2-7 only) and CreateTopics; `close_after` requests on a
/// connection, closes it.
async fn fake_controller(counts: Arc<Counts>, close_after: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counts.connections.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(stream, counts.clone(), close_after));
        }
    });
    addr
}

async fn serve(mut stream: TcpStream, counts: Arc<Counts>, close_after: usize) {
    for _ in 0..close_after {
        let mut len = [0u8; 4];
        if stream.read_exact(&mut len).await.is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut frame).await.unwrap();
        let request = crate::protocol::decode_served_request(frame.into(), |_, _| true).unwrap();
        let body = match request.body {
            RequestKind::ApiVersions(_) => {
                counts.api_versions.fetch_add(1, Ordering::SeqCst);
                let served = ApiVersion::default().with_api_key(ApiKey::CreateTopics as i16);
                ResponseKind::ApiVersions(
                    ApiVersionsResponse::default().with_api_keys(vec![served.with_min_version(2).with_max_version(7)]),
                )
            }
            RequestKind::CreateTopics(_) => {
                counts.create_topics.fetch_add(1, Ordering::SeqCst);
                ResponseKind::CreateTopics(CreateTopicsResponse::default().with_throttle_time_ms(7))
            }
            other => panic!("unexpected {other:?}"),
        };
        let frame =
            crate::protocol::encode_response(request.api_key, request.version, request.header.correlation_id, &body)
                .unwrap();
        stream.write_all(&frame).await.unwrap();
    }
}

fn link(addr: &str) -> ControllerLink {
    let config = NodeConfig::from_properties(&Properties::new(), 1).unwrap();
    let (_, leader) = watch::channel(Some(Leader { id: 3000, epoch: 1, addr: addr.to_string() }));
    let (_, image) = watch::channel(Arc::new(MetadataImage::default()));
    ControllerLink::new(config, leader, image.clone(), image)
}

#[tokio::test]
async fn a_kept_connection_asks_api_versions_once() {
    let counts = Arc::new(Counts::default());
    let link = link(&fake_controller(counts.clone(), usize::MAX).await);
    for _ in 0..3 {
        let answer = link.forward_if_served(7, &CreateTopicsRequest::default()).await.unwrap();
        assert_eq!(answer.map(|r| r.throttle_time_ms), Some(7));
    }
    // Not served at this version, or not at all: no request sent.
    assert!(link.forward_if_served(1, &CreateTopicsRequest::default()).await.unwrap().is_none());
    assert!(link.forward_if_served(6, &DeleteTopicsRequest::default()).await.unwrap().is_none());
    assert_eq!(counts.connections.load(Ordering::SeqCst), 1);
    assert_eq!(counts.api_versions.load(Ordering::SeqCst), 1);
    assert_eq!(counts.create_topics.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_connection_the_controller_closed_is_replaced_and_asks_again() {
    let counts = Arc::new(Counts::default());
    // Each connection serves ApiVersions and one CreateTopics, then closes.
    let link = link(&fake_controller(counts.clone(), 2).await);
    for _ in 0..2 {
        let answer = link.forward_if_served(7, &CreateTopicsRequest::default()).await.unwrap();
        assert_eq!(answer.map(|r| r.throttle_time_ms), Some(7));
        // The close reaches this side before the next request.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(counts.connections.load(Ordering::SeqCst), 2);
    assert_eq!(counts.api_versions.load(Ordering::SeqCst), 2);
    assert_eq!(counts.create_topics.load(Ordering::SeqCst), 2);
}
