//! The `__consumer_offsets` records of consumer groups, laid out as Kafka 4.1 writes them
//! (`group-coordinator/src/main/resources/common/message/ConsumerGroup*.json`), so the topic
//! reads the same as Kafka's.
//!
//! Keys (not flexible): `[i16 record type][string group id]` then `[string member id]` for
//! member records; types: 3 ConsumerGroupMetadata, 4 ConsumerGroupPartitionMetadata (read and
//! ignored: 4.1 no longer writes it, the metadata hash replaced it), 5
//! ConsumerGroupMemberMetadata, 6 ConsumerGroupTargetAssignmentMetadata, 7
//! ConsumerGroupTargetAssignmentMember, 8 ConsumerGroupCurrentMemberAssignment, 16
//! ConsumerGroupRegularExpression (read and ignored: regexes are resolved when used). Values
//! are version 0, flexible: `[i16 0]`, compact strings and arrays (uvarint length + 1), a
//! tagged-field section at the end of every struct.
//!
//! - ConsumerGroupMetadataValue: `[i32 epoch]`, tag 0 `[i64 metadata hash]`
//! - MemberMetadataValue: `[instance id?][rack id?][client id][client host][[]topic names]
//!   [regex?][i32 rebalance timeout][server assignor?]`, tag 0 a classic member's
//!   ClassicMemberMetadata: `[i32 session timeout][[]{name, compact bytes metadata}]`
//! - TargetAssignmentMetadataValue: `[i32 assignment epoch]`
//! - TargetAssignmentMemberValue: `[[]{uuid topic, []i32 partitions}]`
//! - CurrentMemberAssignmentValue: `[i32 epoch][i32 previous epoch][i8 state][[]assigned]
//!   [[]pending revocation]`
//!
//! A null value is a tombstone. Invariant: decoding never trusts a length past the bytes
//! present and never panics.

use bytes::BufMut;
use uuid::Uuid;

use super::state::{Assignment, ClassicMeta, Member, MemberState};
use crate::group::records::Reader;

pub const GROUP_METADATA: i16 = 3;
pub const PARTITION_METADATA: i16 = 4;
pub const MEMBER_METADATA: i16 = 5;
pub const TARGET_METADATA: i16 = 6;
pub const TARGET_MEMBER: i16 = 7;
pub const CURRENT_ASSIGNMENT: i16 = 8;
pub const REGULAR_EXPRESSION: i16 = 16;

/// An encoded (key, value) pair; `None` value = tombstone.
pub type Rec = (Vec<u8>, Option<Vec<u8>>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerKey {
    pub kind: i16,
    pub group: String,
    pub member: Option<String>,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.put_i16(s.len() as i16);
    out.put_slice(s.as_bytes());
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

fn put_cstr(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_uvarint(out, 0),
        Some(s) => {
            put_uvarint(out, s.len() as u32 + 1);
            out.put_slice(s.as_bytes());
        }
    }
}

fn put_assignment(out: &mut Vec<u8>, a: &Assignment) {
    put_uvarint(out, a.len() as u32 + 1);
    for (topic, parts) in a {
        out.put_slice(topic.as_bytes());
        put_uvarint(out, parts.len() as u32 + 1);
        for p in parts {
            out.put_i32(*p);
        }
        put_uvarint(out, 0);
    }
}

impl ConsumerKey {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_i16(self.kind);
        put_str(&mut out, &self.group);
        if let Some(m) = &self.member {
            put_str(&mut out, m);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<ConsumerKey> {
        let mut r = Reader(bytes);
        let kind = r.i16()?;
        let group = r.string()?;
        let member = match kind {
            GROUP_METADATA | PARTITION_METADATA | TARGET_METADATA => None,
            MEMBER_METADATA | TARGET_MEMBER | CURRENT_ASSIGNMENT | REGULAR_EXPRESSION => Some(r.string()?),
            _ => return None,
        };
        Some(ConsumerKey { kind, group, member })
    }
}

fn key(kind: i16, group: &str, member: Option<&str>) -> Vec<u8> {
    ConsumerKey { kind, group: group.to_string(), member: member.map(str::to_string) }.encode()
}

pub fn group_metadata(group: &str, epoch: i32, metadata_hash: i64) -> Rec {
    let mut v = Vec::new();
    v.put_i16(0);
    v.put_i32(epoch);
    if metadata_hash != 0 {
        put_uvarint(&mut v, 1);
        put_uvarint(&mut v, 0);
        put_uvarint(&mut v, 8);
        v.put_i64(metadata_hash);
    } else {
        put_uvarint(&mut v, 0);
    }
    (key(GROUP_METADATA, group, None), Some(v))
}

pub fn member_metadata(group: &str, m: &Member) -> Rec {
    let mut v = Vec::new();
    v.put_i16(0);
    put_cstr(&mut v, m.instance_id.as_deref());
    put_cstr(&mut v, m.rack_id.as_deref());
    put_cstr(&mut v, Some(&m.client_id));
    put_cstr(&mut v, Some(&m.client_host));
    put_uvarint(&mut v, m.subscribed_topic_names.len() as u32 + 1);
    for t in &m.subscribed_topic_names {
        put_cstr(&mut v, Some(t));
    }
    put_cstr(&mut v, m.subscribed_topic_regex.as_deref());
    v.put_i32(m.rebalance_timeout_ms);
    put_cstr(&mut v, m.server_assignor.as_deref());
    match &m.classic {
        None => put_uvarint(&mut v, 0),
        Some(c) => {
            let mut tag = Vec::new();
            tag.put_i32(c.session_timeout_ms);
            put_uvarint(&mut tag, c.protocols.len() as u32 + 1);
            for (name, metadata) in &c.protocols {
                put_cstr(&mut tag, Some(name));
                put_uvarint(&mut tag, metadata.len() as u32 + 1);
                tag.put_slice(metadata);
                put_uvarint(&mut tag, 0);
            }
            put_uvarint(&mut tag, 0);
            put_uvarint(&mut v, 1);
            put_uvarint(&mut v, 0);
            put_uvarint(&mut v, tag.len() as u32);
            v.put_slice(&tag);
        }
    }
    (key(MEMBER_METADATA, group, Some(&m.id)), Some(v))
}

pub fn target_metadata(group: &str, assignment_epoch: i32) -> Rec {
    let mut v = Vec::new();
    v.put_i16(0);
    v.put_i32(assignment_epoch);
    put_uvarint(&mut v, 0);
    (key(TARGET_METADATA, group, None), Some(v))
}

pub fn target_member(group: &str, member: &str, a: &Assignment) -> Rec {
    let mut v = Vec::new();
    v.put_i16(0);
    put_assignment(&mut v, a);
    put_uvarint(&mut v, 0);
    (key(TARGET_MEMBER, group, Some(member)), Some(v))
}

pub fn current_assignment(group: &str, m: &Member) -> Rec {
    let mut v = Vec::new();
    v.put_i16(0);
    v.put_i32(m.member_epoch);
    v.put_i32(m.previous_member_epoch);
    v.put_i8(m.state.value());
    put_assignment(&mut v, &m.assigned);
    put_assignment(&mut v, &m.pending_revocation);
    put_uvarint(&mut v, 0);
    (key(CURRENT_ASSIGNMENT, group, Some(&m.id)), Some(v))
}

/// Tombstones of a member's three records, in Kafka's order (current, target, metadata).
pub fn member_tombstones(group: &str, member: &str) -> Vec<Rec> {
    [CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA].iter().map(|k| (key(*k, group, Some(member)), None)).collect()
}

/// Tombstones of a whole group turning classic, in Kafka's order: every member's current
/// assignment, then target assignment, the target metadata, every member's metadata, then the
/// partition and group metadata.
pub fn downgrade_tombstones<'a>(group: &str, members: impl Iterator<Item = &'a str> + Clone) -> Vec<Rec> {
    let per_member = |kind: i16| members.clone().map(move |m| (key(kind, group, Some(m)), None));
    let mut out: Vec<Rec> = per_member(CURRENT_ASSIGNMENT).chain(per_member(TARGET_MEMBER)).collect();
    out.push((key(TARGET_METADATA, group, None), None));
    out.extend(per_member(MEMBER_METADATA));
    out.push((key(PARTITION_METADATA, group, None), None));
    out.push((key(GROUP_METADATA, group, None), None));
    out
}

/// Tombstones of the group-level records (after its members').
pub fn group_tombstones(group: &str) -> Vec<Rec> {
    [TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA].iter().map(|k| (key(*k, group, None), None)).collect()
}

/// A decoded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerValue {
    Group {
        epoch: i32,
        metadata_hash: i64,
    },
    Member(Box<Member>),
    TargetMetadata {
        assignment_epoch: i32,
    },
    TargetMember(Assignment),
    Current {
        epoch: i32,
        previous: i32,
        state: MemberState,
        assigned: Assignment,
        pending: Assignment,
    },
    /// A record Ketch reads but does not use.
    Ignored,
}

struct Flex<'a>(Reader<'a>);

impl Flex<'_> {
    fn uvarint(&mut self) -> Option<u32> {
        let mut v = 0u32;
        for i in 0..5 {
            let b = self.0.i8()? as u8;
            v |= u32::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
    fn cstr(&mut self) -> Option<Option<String>> {
        let n = self.uvarint()?;
        if n == 0 {
            return Some(None);
        }
        let len = n as usize - 1;
        if len > self.0.remaining() {
            return None;
        }
        let mut s = Vec::with_capacity(len);
        for _ in 0..len {
            s.push(self.0.i8()? as u8);
        }
        Some(Some(String::from_utf8(s).ok()?))
    }
    fn count(&mut self, min_size: usize) -> Option<usize> {
        let n = self.uvarint()?.checked_sub(1)? as usize;
        (n.saturating_mul(min_size) <= self.0.remaining()).then_some(n)
    }
    fn uuid(&mut self) -> Option<Uuid> {
        let hi = self.0.i64()? as u64;
        let lo = self.0.i64()? as u64;
        Some(Uuid::from_u64_pair(hi, lo))
    }
    /// Skips a tagged-field section; returns tag 0's bytes if present.
    fn tags(&mut self) -> Option<Option<Vec<u8>>> {
        let n = self.uvarint()?;
        let mut tag0 = None;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            if size > self.0.remaining() {
                return None;
            }
            let mut bytes = Vec::with_capacity(size);
            for _ in 0..size {
                bytes.push(self.0.i8()? as u8);
            }
            if tag == 0 {
                tag0 = Some(bytes);
            }
        }
        Some(tag0)
    }
    fn classic(&mut self) -> Option<ClassicMeta> {
        let session_timeout_ms = self.0.i32()?;
        let n = self.count(3)?;
        let mut protocols = Vec::with_capacity(n);
        for _ in 0..n {
            let name = self.cstr()?.unwrap_or_default();
            let len = self.uvarint()?.checked_sub(1)? as usize;
            if len > self.0.remaining() {
                return None;
            }
            let mut metadata = Vec::with_capacity(len);
            for _ in 0..len {
                metadata.push(self.0.i8()? as u8);
            }
            self.tags()?;
            protocols.push((name, bytes::Bytes::from(metadata)));
        }
        self.tags()?;
        Some(ClassicMeta { session_timeout_ms, protocols })
    }
    fn assignment(&mut self) -> Option<Assignment> {
        let n = self.count(18)?;
        let mut a = Assignment::new();
        for _ in 0..n {
            let topic = self.uuid()?;
            let parts = self.count(4)?;
            let set = a.entry(topic).or_default();
            for _ in 0..parts {
                set.insert(self.0.i32()?);
            }
            self.tags()?;
        }
        a.retain(|_, s| !s.is_empty());
        Some(a)
    }
}

impl ConsumerValue {
    pub fn decode(kind: i16, member: Option<&str>, bytes: &[u8]) -> Option<ConsumerValue> {
        let mut r = Flex(Reader(bytes));
        let _version = r.0.i16()?;
        Some(match kind {
            GROUP_METADATA => {
                let epoch = r.0.i32()?;
                let hash = r.tags()?.and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok()).map(i64::from_be_bytes);
                ConsumerValue::Group { epoch, metadata_hash: hash.unwrap_or(0) }
            }
            MEMBER_METADATA => {
                let mut m = Member::new(member?);
                m.instance_id = r.cstr()?;
                m.rack_id = r.cstr()?;
                m.client_id = r.cstr()?.unwrap_or_default();
                m.client_host = r.cstr()?.unwrap_or_default();
                let n = r.count(1)?;
                for _ in 0..n {
                    m.subscribed_topic_names.push(r.cstr()?.unwrap_or_default());
                }
                m.subscribed_topic_regex = r.cstr()?;
                m.rebalance_timeout_ms = r.0.i32()?;
                m.server_assignor = r.cstr()?;
                if let Some(tag) = r.tags()? {
                    m.classic = Some(Flex(Reader(&tag)).classic()?);
                }
                ConsumerValue::Member(Box::new(m))
            }
            TARGET_METADATA => ConsumerValue::TargetMetadata { assignment_epoch: r.0.i32()? },
            TARGET_MEMBER => ConsumerValue::TargetMember(r.assignment()?),
            CURRENT_ASSIGNMENT => ConsumerValue::Current {
                epoch: r.0.i32()?,
                previous: r.0.i32()?,
                state: MemberState::from_value(r.0.i8()?),
                assigned: r.assignment()?,
                pending: r.assignment()?,
            },
            _ => ConsumerValue::Ignored,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn split(rec: Rec) -> (ConsumerKey, ConsumerValue) {
        let k = ConsumerKey::decode(&rec.0).unwrap();
        let v = ConsumerValue::decode(k.kind, k.member.as_deref(), rec.1.as_deref().unwrap()).unwrap();
        (k, v)
    }

    #[test]
    fn round_trips() {
        let (k, v) = split(group_metadata("g", 7, -42));
        assert_eq!((k.kind, k.group.as_str(), k.member), (GROUP_METADATA, "g", None));
        assert_eq!(v, ConsumerValue::Group { epoch: 7, metadata_hash: -42 });
        let mut m = Member::new("m1");
        m.instance_id = Some("i".into());
        m.client_id = "c".into();
        m.client_host = "/127.0.0.1".into();
        m.subscribed_topic_names = vec!["a".into(), "b".into()];
        m.subscribed_topic_regex = Some("t.*".into());
        m.rebalance_timeout_ms = 300_000;
        m.server_assignor = Some("range".into());
        let (_, v) = split(member_metadata("g", &m));
        assert_eq!(v, ConsumerValue::Member(Box::new(m.clone())));
        // A classic member's metadata rides in tag 0.
        let mut classic = m.clone();
        classic.classic = Some(ClassicMeta {
            session_timeout_ms: 10_000,
            protocols: vec![
                ("range".into(), bytes::Bytes::from_static(b"\0\x01sub")),
                ("cooperative-sticky".into(), bytes::Bytes::new()),
            ],
        });
        let (_, v) = split(member_metadata("g", &classic));
        assert_eq!(v, ConsumerValue::Member(Box::new(classic)));
        let a = Assignment::from([(Uuid::from_u128(5), BTreeSet::from([0, 3]))]);
        assert_eq!(split(target_member("g", "m1", &a)).1, ConsumerValue::TargetMember(a.clone()));
        assert_eq!(split(target_metadata("g", 9)).1, ConsumerValue::TargetMetadata { assignment_epoch: 9 });
        m.member_epoch = 9;
        m.previous_member_epoch = 8;
        m.state = MemberState::UnrevokedPartitions;
        m.assigned = a.clone();
        m.pending_revocation = Assignment::from([(Uuid::from_u128(6), BTreeSet::from([1]))]);
        let (k, v) = split(current_assignment("g", &m));
        assert_eq!(k.member.as_deref(), Some("m1"));
        assert_eq!(
            v,
            ConsumerValue::Current {
                epoch: 9,
                previous: 8,
                state: MemberState::UnrevokedPartitions,
                assigned: a,
                pending: m.pending_revocation.clone()
            }
        );
    }

    #[test]
    fn layout_matches_kafka() {
        // ConsumerGroupMetadataKey: type 3, then the group id as an int16-prefixed string.
        assert_eq!(group_metadata("g", 1, 0).0, vec![0, 3, 0, 1, b'g']);
        // Value v0: epoch 1, empty tagged section.
        assert_eq!(group_metadata("g", 1, 0).1.unwrap(), vec![0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(member_tombstones("g", "m")[0].0, vec![0, 8, 0, 1, b'g', 0, 1, b'm']);
    }

    #[test]
    fn garbage_is_refused_without_panic() {
        assert_eq!(ConsumerKey::decode(&[0, 3, 0x7f, 0xff]), None);
        assert_eq!(ConsumerKey::decode(&[0, 2, 0, 1, b'g']), None, "classic keys are not ours");
        for kind in [GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT] {
            for bytes in [&[][..], &[0, 0, 0xff, 0xff, 0xff, 0xff, 0xff][..], &[0, 0, 0x80, 0x80][..]] {
                let _ = ConsumerValue::decode(kind, Some("m"), bytes);
            }
        }
        assert_eq!(ConsumerValue::decode(TARGET_MEMBER, Some("m"), &[0, 0, 0xff, 0xff, 0xff, 0x0f]), None);
    }
}
