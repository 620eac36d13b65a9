//! This node's client connection against a fake peer on 127.0.0.1:0: a response frame the
//! allocation guard refuses (a count asking for hundreds of GB in a few bytes) is an error on
//! that exchange, never an abort of the process, and the connection stays in step (the refused
//! frame was read whole).

use kafka_protocol::messages::{FetchRequest, MetadataRequest, MetadataResponse};
use tokio::net::TcpListener;

use super::*;

/// A peer that answers its first connection's requests, in order, with `bodies` (the bytes after
/// the response header v0, i.e. after the correlation id it echoes).
async fn fake_peer(bodies: Vec<Vec<u8>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        for body in bodies {
            let mut len = [0u8; 4];
            if stream.read_exact(&mut len).await.is_err() {
                return;
            }
            let mut request = vec![0u8; i32::from_be_bytes(len) as usize];
            stream.read_exact(&mut request).await.unwrap();
            // Request header: api key, version, then the correlation id.
            let mut frame = ((4 + body.len()) as i32).to_be_bytes().to_vec();
            frame.extend_from_slice(&request[4..8]);
            frame.extend_from_slice(&body);
            stream.write_all(&frame).await.unwrap();
        }
    });
    addr
}

#[tokio::test]
async fn a_response_the_guard_refuses_is_an_error_not_an_abort() {
    // Metadata v0: `brokers` claims 2^31-1 elements in 5 bytes (Vec::with_capacity of ~200 GB).
    let metadata = vec![0x7f, 0xff, 0xff, 0xff, 0x00];
    // Fetch v4: throttle_time_ms, then `responses` claims 2^31-1 topics.
    let fetch = vec![0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0x00];
    let mut good = BytesMut::new();
    MetadataResponse::default().encode(&mut good, 0).unwrap();
    let addr = fake_peer(vec![metadata, fetch, good.to_vec()]).await;
    let security = ClientSecurity::plaintext();
    let mut conn = Connection::connect(&addr, "client-test", Duration::from_secs(10), &security).await.unwrap();
    let ask = MetadataRequest::default().with_topics(Some(vec![]));
    let err = conn.send(0, &ask, Duration::ZERO).await.unwrap_err();
    assert!(format!("{err:#}").contains("refused before decoding"), "{err:#}");
    assert!(!transport_failed(&err), "a bad answer, not a transport failure: {err:#}");
    let err = conn.send(4, &FetchRequest::default(), Duration::ZERO).await.unwrap_err();
    assert!(format!("{err:#}").contains("refused before decoding"), "{err:#}");
    // Each refused frame was read whole: the next exchange gets its own answer.
    let answer = conn.send(0, &ask, Duration::ZERO).await.unwrap();
    assert!(answer.brokers.is_empty());
}
