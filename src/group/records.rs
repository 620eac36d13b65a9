//! The records of the internal `__consumer_offsets` topic, in Kafka's own layout so the topic
//! reads the same as Kafka's (e.g. with its OffsetsMessageFormatter).
//!
//! kafka-protocol ships no codecs for these storage schemas (they are not wire messages), so
//! they are written here with plain big-endian fields. Keys: `[i16 version]` then for versions
//! 0/1 an offset commit key `[string group][string topic][i32 partition]`, for version 2 a
//! group metadata key `[string group]`. Values (a null value is a tombstone): offset commit
//! value v3 `[i64 offset][i32 leader epoch][string metadata][i64 commit timestamp]` (v0-v2 are
//! read too); group metadata value v3 `[string protocol type][i32 generation][nullable string
//! protocol][nullable string leader][i64 state timestamp]` then an array of members
//! `[string id][nullable string instance id][string client id][string client host]
//! [i32 rebalance timeout][i32 session timeout][bytes subscription][bytes assignment]`.
//! Strings are i16-length-prefixed UTF-8 (-1 = null), bytes and arrays i32-length-prefixed.
//! Invariant: decoding never trusts a length beyond the bytes present.

use bytes::{BufMut, Bytes};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    Offset { group: String, topic: String, partition: i32 },
    Group { group: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            out.put_i16(s.len() as i16);
            out.put_slice(s.as_bytes());
        }
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.put_slice(b);
}

impl Key {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Key::Offset { group, topic, partition } => {
                out.put_i16(1);
                put_str(&mut out, Some(group));
                put_str(&mut out, Some(topic));
                out.put_i32(*partition);
            }
            Key::Group { group } => {
                out.put_i16(2);
                put_str(&mut out, Some(group));
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Key> {
        let mut r = Reader(bytes);
        match r.i16()? {
            0 | 1 => Some(Key::Offset { group: r.string()?, topic: r.string()?, partition: r.i32()? }),
            2 => Some(Key::Group { group: r.string()? }),
            _ => None,
        }
    }
}

impl OffsetValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(3);
        out.put_i64(self.offset);
        out.put_i32(self.leader_epoch);
        put_str(&mut out, Some(&self.metadata));
        out.put_i64(self.commit_timestamp);
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<OffsetValue> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        let offset = r.i64()?;
        let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
        let metadata = r.string()?;
        let commit_timestamp = r.i64()?;
        Some(OffsetValue { offset, leader_epoch, metadata, commit_timestamp })
    }
}

impl GroupValue {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(3);
        put_str(&mut out, Some(&self.protocol_type));
        out.put_i32(self.generation);
        put_str(&mut out, self.protocol.as_deref());
        put_str(&mut out, self.leader.as_deref());
        out.put_i64(self.state_timestamp);
        out.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_str(&mut out, Some(&m.member_id));
            put_str(&mut out, m.instance_id.as_deref());
            put_str(&mut out, Some(&m.client_id));
            put_str(&mut out, Some(&m.client_host));
            out.put_i32(m.rebalance_timeout_ms);
            out.put_i32(m.session_timeout_ms);
            put_bytes(&mut out, &m.subscription);
            put_bytes(&mut out, &m.assignment);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<GroupValue> {
        let mut r = Reader(bytes);
        let version = r.i16()?;
        let protocol_type = r.string()?;
        let generation = r.i32()?;
        let protocol = r.nullable_string()?;
        let leader = r.nullable_string()?;
        let state_timestamp = if version >= 2 { r.i64()? } else { -1 };
        let count = r.i32()?;
        if count < 0 || count as usize > r.0.len() {
            return None;
        }
        let mut members = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let member_id = r.string()?;
            let instance_id = if version >= 3 { r.nullable_string()? } else { None };
            let client_id = r.string()?;
            let client_host = r.string()?;
            let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
            let session_timeout_ms = r.i32()?;
            let subscription = r.bytes()?;
            let assignment = r.bytes()?;
            members.push(MemberValue {
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout_ms,
                session_timeout_ms,
                subscription,
                assignment,
            });
        }
        Some(GroupValue { protocol_type, generation, protocol, leader, state_timestamp, members })
    }
}

/// Reads big-endian fields, failing (None) instead of trusting any length past the end.
pub struct Reader<'a>(pub &'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    pub fn i8(&mut self) -> Option<i8> {
        Some(self.take(1)?[0] as i8)
    }
    pub fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    pub fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn nullable_string(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        Some(Some(String::from_utf8(self.take(len as usize)?.to_vec()).ok()?))
    }
    pub fn string(&mut self) -> Option<String> {
        self.nullable_string()?
    }
    fn bytes(&mut self) -> Option<Bytes> {
        let len = self.i32()?;
        if len < 0 {
            return Some(Bytes::new());
        }
        Some(Bytes::copy_from_slice(self.take(len as usize)?))
    }
    pub fn nullable_bytes(&mut self) -> Option<Option<Bytes>> {
        let len = self.i32()?;
        if len < 0 {
            return Some(None);
        }
        Some(Some(Bytes::copy_from_slice(self.take(len as usize)?)))
    }
    pub fn remaining(&self) -> usize {
        self.0.len()
    }
}

/// Topics named in a consumer-protocol subscription (`ConsumerProtocolSubscription`, all
/// versions start with `[i16 version][array of string topics]`); None if it is not one.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader(metadata);
    let _version = r.i16()?;
    let count = r.i32()?;
    if count < 0 || count as usize > r.remaining() / 2 {
        return None;
    }
    (0..count).map(|_| r.string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let key = Key::Offset { group: "g".into(), topic: "t".into(), partition: 3 };
        assert_eq!(Key::decode(&key.encode()), Some(key));
        let value = OffsetValue { offset: 42, leader_epoch: 0, metadata: "meta".into(), commit_timestamp: 7 };
        assert_eq!(OffsetValue::decode(&value.encode()), Some(value));
        let group = GroupValue {
            protocol_type: "consumer".into(),
            generation: 5,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            state_timestamp: 9,
            members: vec![MemberValue {
                member_id: "m1".into(),
                instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 1,
                session_timeout_ms: 2,
                subscription: Bytes::from_static(b"s"),
                assignment: Bytes::from_static(b"a"),
            }],
        };
        assert_eq!(GroupValue::decode(&group.encode()), Some(group));
        assert_eq!(Key::decode(&[0, 1, 0x7f, 0xff]), None);
    }
}
