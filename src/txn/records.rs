//! The records of the internal `__transaction_state` topic, in Kafka's layout (kafka-protocol
//! ships no codec for these storage schemas). Key v0: `[i16 0][string transactional id]`.
//! Value v0 (null = tombstone): `[i64 producer id][i16 epoch][i32 timeout ms][i8 status]
//! [i32 topic count, then per topic [string topic][i32 n][i32 partition]*n][i64 last update ms]
//! [i64 start ms]`. Strings are i16-length-prefixed UTF-8.

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
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(0);
        out.put_i64(self.producer_id);
        out.put_i16(self.epoch);
        out.put_i32(self.timeout_ms);
        out.put_i8(self.state.id());
        let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
        for (topic, p) in &self.partitions {
            match topics.iter_mut().find(|(t, _)| t == topic) {
                Some((_, ps)) => ps.push(*p),
                None => topics.push((topic, vec![*p])),
            }
        }
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
        let _version = r.i16()?;
        let producer_id = r.i64()?;
        let epoch = r.i16()?;
        let timeout_ms = r.i32()?;
        let state = TxnState::from_id(r.i8()?)?;
        let topics = r.i32()?;
        if topics < -1 || topics as usize > r.remaining() / 2 {
            return None;
        }
        let mut partitions = Vec::new();
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
        Some(TxnValue {
            producer_id,
            epoch,
            timeout_ms,
            state,
            partitions,
            last_update_ms: r.i64()?,
            start_ms: r.i64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let v = TxnValue {
            producer_id: 7,
            epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: vec![("a".into(), 0), ("a".into(), 2), ("b".into(), 1)],
            last_update_ms: 5,
            start_ms: 4,
        };
        assert_eq!(TxnValue::decode(&v.encode()), Some(v));
        assert_eq!(decode_key(&encode_key("tx")), Some("tx".to_string()));
        assert_eq!(TxnValue::decode(&[0, 0, 1]), None);
    }
}
