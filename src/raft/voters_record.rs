//! KIP-853's control records in the metadata log: KRaftVersionRecord (control type 5) and
//! VotersRecord (type 6), as Kafka 4.1 writes them (each record's key: version 0 and the type;
//! its value: the message at version 0) into a control batch of the log, of a snapshot, and of
//! the bootstrap checkpoint (`00000000000000000000-0000000000.checkpoint`) that
//! `format --standalone / --initial-controllers` writes.
//!
//! Invariants: a batch decoded here is a whole v2 control batch; a VotersRecord decoded holds at
//! least one voter and no voter id twice (else it is refused as corrupt, never half-taken).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::voters_record::{Endpoint, KRaftVersionFeature, Voter};
use kafka_protocol::messages::{KRaftVersionRecord, VotersRecord};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;

use super::core_io::NodeId;
use crate::log::batch::Header;

/// Kafka's `ControlRecordType.KRAFT_VERSION`.
pub const KRAFT_VERSION: i16 = 5;
/// Kafka's `ControlRecordType.KRAFT_VOTERS`.
pub const KRAFT_VOTERS: i16 = 6;

/// A voter as a VotersRecord names it: id, directory id, listeners, supported kraft.version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoterInfo {
    pub id: NodeId,
    pub directory_id: uuid::Uuid,
    /// (listener name, host, port)
    pub endpoints: Vec<(String, String, u16)>,
}

/// The kraft.version range a Ketch voter supports (0: static voters, 1: KIP-853).
pub const SUPPORTED_KRAFT_VERSIONS: (i16, i16) = (0, 1);

fn to_wire(voter: &VoterInfo) -> Voter {
    let endpoints = voter
        .endpoints
        .iter()
        .map(|(name, host, port)| {
            Endpoint::default()
                .with_name(StrBytes::from_string(name.clone()))
                .with_host(StrBytes::from_string(host.clone()))
                .with_port(*port)
        })
        .collect();
    let feature = KRaftVersionFeature::default()
        .with_min_supported_version(SUPPORTED_KRAFT_VERSIONS.0)
        .with_max_supported_version(SUPPORTED_KRAFT_VERSIONS.1);
    Voter::default()
        .with_voter_id(voter.id.into())
        .with_voter_directory_id(voter.directory_id)
        .with_endpoints(endpoints)
        .with_k_raft_version_feature(feature)
}

/// The values of a KRaftVersionRecord (kraft.version `version`) and a VotersRecord of `voters`,
/// as (control type, value) pairs for one control batch.
pub fn control_records(kraft_version: i16, voters: &[VoterInfo]) -> Vec<(i16, Bytes)> {
    let version = KRaftVersionRecord::default().with_version(0).with_k_raft_version(kraft_version);
    let record = VotersRecord::default().with_version(0).with_voters(voters.iter().map(to_wire).collect());
    let mut a = BytesMut::new();
    version.encode(&mut a, 0).expect("a KRaftVersionRecord always encodes");
    let mut b = BytesMut::new();
    record.encode(&mut b, 0).expect("a VotersRecord always encodes");
    vec![(KRAFT_VERSION, a.freeze()), (KRAFT_VOTERS, b.freeze())]
}

/// A control batch (base offset 0) holding a KRaftVersionRecord and a VotersRecord.
pub fn voters_batch(kraft_version: i16, voters: &[VoterInfo], now_ms: i64) -> Vec<u8> {
    super::control_batch(&control_records(kraft_version, voters), now_ms)
}

/// A control batch holding only a VotersRecord (a change of voters, as Kafka's leader writes it).
pub fn voters_only_batch(voters: &[VoterInfo], now_ms: i64) -> Vec<u8> {
    let records = control_records(1, voters);
    super::control_batch(&records[1..], now_ms)
}

fn from_wire(voter: &Voter) -> VoterInfo {
    VoterInfo {
        id: voter.voter_id.0,
        directory_id: voter.voter_directory_id,
        endpoints: voter.endpoints.iter().map(|e| (e.name.to_string(), e.host.to_string(), e.port)).collect(),
    }
}

/// The voters of the VotersRecord in `batch` (one whole v2 batch), if it is a control batch
/// holding one; an error if such a record does not decode or names no voter or one twice.
pub fn decode_voters(batch: &[u8]) -> anyhow::Result<Option<Vec<VoterInfo>>> {
    if batch.len() < crate::log::batch::HEADER_BYTES || !Header::new(batch).is_control() {
        return Ok(None);
    }
    let mut input = Bytes::copy_from_slice(batch);
    let set = RecordBatchDecoder::decode(&mut input).map_err(|e| anyhow::anyhow!("control batch: {e:?}"))?;
    let mut found = None;
    for record in set.records {
        let kind = match record.key.as_deref() {
            Some([_, _, hi, lo, ..]) => i16::from_be_bytes([*hi, *lo]),
            _ => continue,
        };
        if kind != KRAFT_VOTERS {
            continue;
        }
        let mut value = record.value.unwrap_or_default();
        let message = VotersRecord::decode(&mut value, 0).map_err(|e| anyhow::anyhow!("VotersRecord: {e:?}"))?;
        let voters: Vec<VoterInfo> = message.voters.iter().map(from_wire).collect();
        let mut ids: Vec<NodeId> = voters.iter().map(|v| v.id).collect();
        ids.sort_unstable();
        ids.dedup();
        anyhow::ensure!(!voters.is_empty() && ids.len() == voters.len(), "a VotersRecord of voters {ids:?}");
        found = Some(voters);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_voters_batch_decodes_to_its_voters_and_other_batches_to_none() {
        let voters = vec![
            VoterInfo {
                id: 1,
                directory_id: uuid::Uuid::from_u128(7),
                endpoints: vec![("CONTROLLER".into(), "127.0.0.1".into(), 9093)],
            },
            VoterInfo { id: 2, directory_id: uuid::Uuid::from_u128(8), endpoints: vec![] },
        ];
        let batch = voters_batch(1, &voters, 5);
        assert_eq!(decode_voters(&batch).unwrap(), Some(voters));
        assert_eq!(decode_voters(&super::super::leader_change_batch_of(1, &[1], 5)).unwrap(), None);
        let twice = vec![VoterInfo { id: 1, directory_id: uuid::Uuid::nil(), endpoints: vec![] }; 2];
        assert!(decode_voters(&voters_batch(1, &twice, 5)).is_err());
    }
}
