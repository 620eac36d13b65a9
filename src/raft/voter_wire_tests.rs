//! Round trips of the core's messages through Kafka's encodings.

use kafka_protocol::protocol::{Decodable, Encodable};

use super::*;

fn through<T: Encodable + Decodable>(value: &T, version: i16) -> T {
    let mut buf = bytes::BytesMut::new();
    value.encode(&mut buf, version).expect("encodes");
    T::decode(&mut buf.freeze(), version).expect("decodes")
}

fn endpoint() -> Endpoint {
    Endpoint { listener: "CONTROLLER".into(), host: "127.0.0.1".into(), port: 9093 }
}

/// This voter's directory id.
const DIR: uuid::Uuid = uuid::Uuid::from_u128(0x5eed);

#[test]
fn a_pre_vote_goes_out_and_comes_back_as_the_same_message() {
    let message = Message::Vote { epoch: 7, pre_vote: true, last_epoch: 6, end_offset: 42 };
    let Some(Outgoing::Vote(request)) = request("c", 1, 2, &message, &endpoint(), 0, DIR) else { panic!("a vote") };
    let request = through(&request, VOTE_VERSION);
    assert_eq!(request.voter_id.0, 2);
    // On the wire a pre-vote is asked in the prospective's current epoch (KIP-996).
    assert_eq!(request.topics[0].partitions[0].replica_epoch, 6);
    assert_eq!(vote_in(&request, "c"), Ok((1, message)));
    assert_eq!(vote_in(&request, "other").unwrap_err(), ResponseError::InconsistentClusterId);
    // The voter answers in its own epoch (6); granted, it counts for the epoch asked.
    let answer = Message::VoteResponse { epoch: 7, pre_vote: true, granted: true, leader: None };
    let response = through(&vote_out(Some(&answer), 6, None), VOTE_VERSION);
    assert_eq!(response.topics[0].partitions[0].leader_epoch, 6);
    assert_eq!(vote_answer(&response, true, 7), Some(answer));
    // Refused, it tells its epoch and leader.
    let refused = Message::VoteResponse { epoch: 9, pre_vote: true, granted: false, leader: Some(3) };
    let response = through(&vote_out(Some(&refused), 9, None), VOTE_VERSION);
    assert_eq!(vote_answer(&response, true, 7), Some(refused));
}

#[test]
fn begin_and_end_quorum_epoch_name_the_leader() {
    let Some(Outgoing::Begin(begin)) = request("c", 3, 1, &Message::BeginQuorumEpoch { epoch: 4 }, &endpoint(), 0, DIR)
    else {
        panic!("a begin")
    };
    let begin = through(&begin, BEGIN_QUORUM_EPOCH_VERSION);
    assert_eq!(begin_in(&begin, "c"), Ok((3, Message::BeginQuorumEpoch { epoch: 4 })));
    assert_eq!(begin.leader_endpoints[0].port, 9093);
    let response = through(&begin_out(4, Some(3), None), BEGIN_QUORUM_EPOCH_VERSION);
    assert_eq!(begin_answer(&response), Some(Message::BeginQuorumEpochResponse { epoch: 4 }));
    let Some(Outgoing::End(end)) = request("c", 3, 1, &Message::EndQuorumEpoch { epoch: 4 }, &endpoint(), 0, DIR)
    else {
        panic!("an end")
    };
    let end = through(&end, END_QUORUM_EPOCH_VERSION);
    assert_eq!(end_in(&end, "c"), Ok((3, Message::EndQuorumEpoch { epoch: 4 })));
}

#[test]
fn a_fetch_answer_carries_whole_batches_as_entries() {
    let fetch = Message::Fetch { epoch: 5, fetch_offset: 0, last_fetched_epoch: 0, id: 9 };
    let Some(Outgoing::Fetch(request)) = request("c", 2, 1, &fetch, &endpoint(), 500, DIR) else { panic!("a fetch") };
    let request = through(&request, FETCH_VERSION);
    // (Kafka's leader of a dynamic quorum knows a voter by its id and directory id.)
    assert_eq!(request.topics[0].partitions[0].replica_directory_id, DIR);
    let (from, message, wait) = fetch_in(&request, "c").expect("a metadata fetch");
    assert_eq!((from, wait), (2, 500));
    assert_eq!(message, Message::Fetch { epoch: 5, fetch_offset: 0, last_fetched_epoch: 0, id: 0 });
    // Two batches: a leader change (1 record), then a second one.
    let mut records = crate::raft::MetadataLog::leader_change(1, &[1, 2, 3], 0);
    let mut second = crate::raft::MetadataLog::leader_change(1, &[1, 2, 3], 0);
    second[..8].copy_from_slice(&1i64.to_be_bytes());
    records.extend_from_slice(&second);
    let entries = vec![
        crate::raft::core::Entry { epoch: -1, value: Some(Batch { records: 1, id: 0, voters: None }) },
        crate::raft::core::Entry { epoch: -1, value: Some(Batch { records: 1, id: 0, voters: None }) },
    ];
    let answer = Message::FetchResponse {
        epoch: 5,
        leader: Some(1),
        result: FetchResult::Records { start: 0, entries: entries.clone(), high_watermark: Some(1) },
        id: 0,
    };
    let response = fetch_out(Ok(&answer), Bytes::from(records), 5, Some((1, &endpoint())));
    let response = through(&response, FETCH_VERSION);
    let (message, batches) = fetch_answer(&response, 0, 9).expect("an answer");
    assert_eq!(batches.len(), 2);
    let Message::FetchResponse { result: FetchResult::Records { start, entries: got, high_watermark }, id, .. } =
        message
    else {
        panic!("records: {message:?}")
    };
    assert_eq!((start, got, high_watermark, id), (0, entries, Some(1), 9));
    // Not the leader of the asked epoch: fenced (older), unknown (newer).
    let not_leader = Message::FetchResponse { epoch: 5, leader: Some(1), result: FetchResult::NotLeader, id: 0 };
    let fenced = fetch_out(Ok(&not_leader), Bytes::new(), 4, None);
    assert_eq!(fenced.responses[0].partitions[0].error_code, ResponseError::FencedLeaderEpoch.code());
    let unknown = fetch_out(Ok(&not_leader), Bytes::new(), 6, None);
    assert_eq!(unknown.responses[0].partitions[0].error_code, ResponseError::UnknownLeaderEpoch.code());
    let (message, _) = fetch_answer(&through(&fenced, FETCH_VERSION), 0, 9).expect("an answer");
    assert!(matches!(
        message,
        Message::FetchResponse { epoch: 5, leader: Some(1), result: FetchResult::NotLeader, .. }
    ));
}

/// A one-record control batch at `offset` in `epoch` (both outside the CRC).
fn batch_at(offset: i64, epoch: i32) -> Vec<u8> {
    let mut bytes = crate::raft::MetadataLog::leader_change(1, &[1, 2, 3], 0);
    bytes[..8].copy_from_slice(&offset.to_be_bytes());
    bytes[12..16].copy_from_slice(&epoch.to_be_bytes());
    bytes
}

fn kept(batches: &[Vec<u8>], leader_epoch: i32) -> Vec<(i32, u64)> {
    let (_, out) = split_batches(Bytes::from(batches.concat()), 0, leader_epoch);
    out.into_iter().map(|(epoch, count, _)| (epoch, count)).collect()
}

#[test]
fn a_fetched_batch_that_breaks_the_log_and_everything_after_it_are_left_out() {
    // What a correct leader sends: offsets following each other, epochs only going up.
    let good = [batch_at(0, 1), batch_at(1, 2), batch_at(2, 2)];
    assert_eq!(kept(&good, 2), vec![(1, 1), (2, 1), (2, 1)]);
    // A CRC that does not match.
    let mut corrupt = batch_at(1, 2);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(kept(&[batch_at(0, 1), corrupt, batch_at(2, 2)], 2), vec![(1, 1)]);
    // An epoch going back, an epoch past the leader's, a gap in the offsets.
    assert_eq!(kept(&[batch_at(0, 2), batch_at(1, 1)], 2), vec![(2, 1)]);
    assert_eq!(kept(&[batch_at(0, 2), batch_at(1, 3)], 2), vec![(2, 1)]);
    assert_eq!(kept(&[batch_at(0, 2), batch_at(5, 2)], 2), vec![(2, 1)]);
    // A batch length too small for a header is corruption, not a cut batch.
    let mut short = batch_at(1, 2);
    short[8..12].copy_from_slice(&(-7i32).to_be_bytes());
    assert_eq!(kept(&[batch_at(0, 2), short], 2), vec![(2, 1)]);
    // A trailing batch cut by the size limit is simply fetched again.
    let cut = batch_at(1, 2);
    let mut records = batch_at(0, 2);
    records.extend_from_slice(&cut[..cut.len() - 3]);
    let (_, out) = split_batches(Bytes::from(records), 0, 2);
    assert_eq!(out.len(), 1);
}
