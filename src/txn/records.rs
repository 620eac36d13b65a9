//! The records of the internal `__transaction_state` topic, in Kafka's layout (kafka-protocol
//! ships no codec for these storage schemas). Key v0: `[i16 0][string transactional id]`.
//! Value v0 (null = tombstone): `[i64 producer id][i16 epoch][i32 timeout ms][i8 status]
//! [i32 topic count, then per topic [string topic][i32 n][i32 partition]*n][i64 last update ms]
//! [i64 start ms]`. Strings are i16-length-prefixed UTF-8.
//! Value v1 (flexible; what Kafka 4.x writes once `transaction.version` >= 1, and what Ketch
//! writes): the same fields, but the partitions are a compact nullable array (uvarint n+1,
//! 0 = null, written for Empty) of `{compact string topic, compact array of i32, uvarint 0
//! tags}`, followed after the start time by tagged fields: 0 PreviousProducerId (i64),
//! 1 NextProducerId (i64), 2 ClientTransactionVersion (i16), 3 NextProducerEpoch (i16).
//! Kafka writes only tag 2 (when non-zero); Ketch also writes 0 and 1 when set, so a retried
//! EndTxn after a producer-id rotation is still recognised after a restart. Both versions are
//! read.

use bytes::BufMut;

use crate::group::records::Reader;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub fn id(self) -> i8 {
        self as i8
    }
    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }
    /// The name Kafka's tools print.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    pub epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: Vec<(String, i32)>,
    pub last_update_ms: i64,
    pub start_ms: i64,
    /// Tag 0: the producer id before the last transition (-1 = none).
    pub prev_producer_id: i64,
    /// Tag 1: the producer id an overflowing epoch rotates to at completion (-1 = none).
    pub next_producer_id: i64,
    /// Tag 2: the transaction protocol version of the request that made this transition.
    pub client_tv: i16,
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn uvarint(r: &mut Reader) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = r.i8()? as u8;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn compact_string(r: &mut Reader) -> Option<String> {
    let len = uvarint(r)?.checked_sub(1)? as usize;
    if len > r.remaining() {
        return None;
    }
    let mut s = Vec::with_capacity(len);
    for _ in 0..len {
        s.push(r.i8()? as u8);
    }
    String::from_utf8(s).ok()
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_i16(0);
    put_str(&mut out, transactional_id);
    out
}

pub fn decode_key(bytes: &[u8]) -> Option<String> {
    let mut r = Reader(bytes);
    if r.i16()? != 0 {
        return None;
    }
    r.string()
}

impl TxnValue {
    fn topics(&self) -> Vec<(&str, Vec<i32>)> {
        let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
        for (topic, p) in &self.partitions {
            match topics.iter_mut().find(|(t, _)| t == topic) {
                Some((_, ps)) => ps.push(*p),
                None => topics.push((topic, vec![*p])),
            }
        }
        topics
    }

    /// Version 1, as Kafka 4.x writes it with `transaction.version` finalized at 1 or more.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(1);
        out.put_i64(self.producer_id);
        out.put_i16(self.epoch);
        out.put_i32(self.timeout_ms);
        out.put_i8(self.state.id());
        if self.state == TxnState::Empty && self.partitions.is_empty() {
            put_uvarint(&mut out, 0); // null, as Kafka writes it for Empty
        } else {
            let topics = self.topics();
            put_uvarint(&mut out, topics.len() as u64 + 1);
            for (topic, ps) in topics {
                put_uvarint(&mut out, topic.len() as u64 + 1);
                out.put_slice(topic.as_bytes());
                put_uvarint(&mut out, ps.len() as u64 + 1);
                for p in ps {
                    out.put_i32(p);
                }
                put_uvarint(&mut out, 0);
            }
        }
        out.put_i64(self.last_update_ms);
        out.put_i64(self.start_ms);
        let mut tags: Vec<(u64, Vec<u8>)> = Vec::new();
        if self.prev_producer_id != -1 {
            tags.push((0, self.prev_producer_id.to_be_bytes().to_vec()));
        }
        if self.next_producer_id != -1 {
            tags.push((1, self.next_producer_id.to_be_bytes().to_vec()));
        }
        if self.client_tv != 0 {
            tags.push((2, self.client_tv.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut out, tags.len() as u64);
        for (tag, value) in tags {
            put_uvarint(&mut out, tag);
            put_uvarint(&mut out, value.len() as u64);
            out.put_slice(&value);
        }
        out
    }

    /// The version 0 layout (written with `transaction.version` 0, as Kafka does, and by Ketch
    /// before transaction protocol 2).
    pub fn encode_v0(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(0);
        out.put_i64(self.producer_id);
        out.put_i16(self.epoch);
        out.put_i32(self.timeout_ms);
        out.put_i8(self.state.id());
        let topics = self.topics();
        out.put_i32(topics.len() as i32);
        for (topic, ps) in topics {
            put_str(&mut out, topic);
            out.put_i32(ps.len() as i32);
            for p in ps {
                out.put_i32(p);
            }
        }
        out.put_i64(self.last_update_ms);
        out.put_i64(self.start_ms);
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<TxnValue> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        if !(0..=1).contains(&version) {
            return None;
        }
        let producer_id = r.i64()?;
        let epoch = r.i16()?;
        let timeout_ms = r.i32()?;
        let state = TxnState::from_id(r.i8()?)?;
        let mut partitions = Vec::new();
        if version == 0 {
            let topics = r.i32()?;
            if topics < -1 || topics as usize > r.remaining() / 2 {
                return None;
            }
            for _ in 0..topics {
                let topic = r.string()?;
                let n = r.i32()?;
                if n < 0 || n as usize > r.remaining() / 4 {
                    return None;
                }
                for _ in 0..n {
                    partitions.push((topic.clone(), r.i32()?));
                }
            }
        } else {
            let topics = uvarint(&mut r)?;
            if topics as usize > r.remaining() + 1 {
                return None;
            }
            for _ in 1..topics {
                let topic = compact_string(&mut r)?;
                let n = uvarint(&mut r)?.checked_sub(1)? as usize;
                if n > r.remaining() / 4 {
                    return None;
                }
                for _ in 0..n {
                    partitions.push((topic.clone(), r.i32()?));
                }
                skip_tags(&mut r)?;
            }
        }
        let mut value = TxnValue {
            producer_id,
            epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms: r.i64()?,
            start_ms: r.i64()?,
            prev_producer_id: -1,
            next_producer_id: -1,
            client_tv: 0,
        };
        if version >= 1 {
            let count = uvarint(&mut r)?;
            for _ in 0..count {
                let tag = uvarint(&mut r)?;
                let size = uvarint(&mut r)? as usize;
                if size > r.remaining() {
                    return None;
                }
                let mut field = Reader(&r.0[..size]);
                match tag {
                    0 => value.prev_producer_id = field.i64()?,
                    1 => value.next_producer_id = field.i64()?,
                    2 => value.client_tv = field.i16()?,
                    _ => {}
                }
                r.0 = &r.0[size..];
            }
        }
        Some(value)
    }
}

/// Skips a tagged-field section.
fn skip_tags(r: &mut Reader) -> Option<()> {
    for _ in 0..uvarint(r)? {
        uvarint(r)?;
        let size = uvarint(r)? as usize;
        if size > r.remaining() {
            return None;
        }
        r.0 = &r.0[size..];
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(state: TxnState) -> TxnValue {
        TxnValue {
            producer_id: 7,
            epoch: 3,
            timeout_ms: 60_000,
            state,
            partitions: vec![("a".into(), 0), ("a".into(), 2), ("b".into(), 1)],
            last_update_ms: 5,
            start_ms: 4,
            prev_producer_id: -1,
            next_producer_id: -1,
            client_tv: 0,
        }
    }

    #[test]
    fn round_trip() {
        let v = value(TxnState::Ongoing);
        assert_eq!(TxnValue::decode(&v.encode()), Some(v.clone()));
        assert_eq!(TxnValue::decode(&v.encode_v0()), Some(v.clone()));
        let tagged = TxnValue { prev_producer_id: 6, next_producer_id: 9, client_tv: 2, ..v };
        assert_eq!(TxnValue::decode(&tagged.encode()), Some(tagged));
        assert_eq!(decode_key(&encode_key("tx")), Some("tx".to_string()));
        assert_eq!(TxnValue::decode(&[0, 0, 1]), None);
        assert_eq!(TxnValue::decode(&[0, 2, 0, 0, 0, 0, 0, 0, 0, 1]), None, "unknown version");
    }

    /// The bytes Kafka 4.1 writes (sizes checked against its DumpLogSegments output: an Ongoing
    /// value with one partition of topic `hang2` and ClientTransactionVersion 2 is 51 bytes, an
    /// Empty one without tags 35 bytes).
    #[test]
    fn version_1_layout_matches_kafka() {
        let ongoing = TxnValue { partitions: vec![("hang2".into(), 0)], client_tv: 2, ..value(TxnState::Ongoing) };
        let bytes = ongoing.encode();
        assert_eq!(bytes.len(), 51);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(&bytes[bytes.len() - 5..], &[1, 2, 2, 0, 2], "one tag: 2, two bytes, value 2");
        let empty = TxnValue { partitions: vec![], ..value(TxnState::Empty) };
        let bytes = empty.encode();
        assert_eq!(bytes.len(), 35);
        assert_eq!(bytes[17], 0, "Empty's partitions are null");
        assert_eq!(TxnValue::decode(&bytes), Some(empty));
    }
}
