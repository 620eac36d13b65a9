//! The generated KRaft metadata record codecs (src/metadata/records/) against records written by
//! real Apache Kafka 4.1: tests/fixtures/kafka-4.1-metadata-records.txt holds framed records read
//! from a Kafka 4.1 node's `__cluster_metadata` log by scripts/capture-kafka-metadata-records.
//! Every one must decode, mean what the capture did (topic names, ids, configs, ACLs, quotas...),
//! and re-encode byte for byte. Then hostile input: truncations, bit flips and huge declared
//! lengths return errors, never panic, and never allocate much more than the input holds
//! (measured with a counting allocator).
//!
//! `KETCH_METADATA_RECORDS=<file>` adds a second file in the same format (e.g. a whole live
//! segment captured with `scripts/capture-kafka-metadata-records --all -o <file>`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ketch::metadata::records::*;
use uuid::Uuid;

// ---- a per-thread counting allocator: largest single request and peak live bytes

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn on_alloc(size: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + size;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
        let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    });
}

fn on_dealloc(size: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(size)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        on_alloc(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        on_dealloc(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        on_dealloc(layout.size());
        on_alloc(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with (largest single allocation, peak live bytes above the
/// start) made on this thread meanwhile.
fn measure<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get), PEAK.with(Cell::get) - base)
}

// ---- the fixture

struct Captured {
    offset: i64,
    api_key: i16,
    version: i16,
    bytes: Vec<u8>,
}

fn parse_fixture(text: &str) -> Vec<Captured> {
    let hex = |s: &str| -> Vec<u8> {
        assert!(s.len().is_multiple_of(2), "odd hex length");
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "bad fixture line {l:?}");
            Captured {
                offset: f[0].parse().unwrap(),
                api_key: f[1].parse().unwrap(),
                version: f[2].parse().unwrap(),
                bytes: hex(f[3]),
            }
        })
        .collect()
}

fn fixture() -> Vec<Captured> {
    parse_fixture(include_str!("fixtures/kafka-4.1-metadata-records.txt"))
}

fn decode_all(records: &[Captured]) -> Vec<ApiMessageAndVersion> {
    records
        .iter()
        .map(|c| {
            let m = MetadataRecord::decode_framed(&c.bytes)
                .unwrap_or_else(|e| panic!("offset {} (api key {}): {e}", c.offset, c.api_key));
            assert_eq!((m.record.api_key(), m.version), (c.api_key, c.version), "offset {}", c.offset);
            m
        })
        .collect()
}

fn assert_round_trip(records: &[Captured]) {
    for (c, m) in records.iter().zip(decode_all(records)) {
        let again = m.encode().unwrap_or_else(|e| panic!("offset {}: {e}", c.offset));
        assert_eq!(again, c.bytes, "offset {} ({}) did not re-encode byte for byte: {m:?}", c.offset, m.record.name());
        // the message alone, through the record type's own codec
        let mut body = Vec::new();
        m.record.encode(m.version, &mut body).unwrap();
        assert!(c.bytes.ends_with(&body));
        assert_eq!(MetadataRecord::decode(c.api_key, c.version, &body).unwrap(), m.record);
    }
}

#[test]
fn kafka_records_decode_and_reencode_byte_for_byte() {
    let records = fixture();
    assert!(records.len() >= 30, "fixture too small: {}", records.len());
    assert_round_trip(&records);
    let mut types: Vec<&str> = decode_all(&records).iter().map(|m| m.record.name()).collect();
    types.sort();
    types.dedup();
    // what the capture makes Kafka write (see scripts/capture-kafka-metadata-records)
    for t in [
        "AccessControlEntryRecord",
        "BeginTransactionRecord",
        "BrokerRegistrationChangeRecord",
        "ClearElrRecord",
        "ClientQuotaRecord",
        "ConfigRecord",
        "EndTransactionRecord",
        "FeatureLevelRecord",
        "NoOpRecord",
        "PartitionChangeRecord",
        "PartitionRecord",
        "ProducerIdsRecord",
        "RegisterBrokerRecord",
        "RegisterControllerRecord",
        "RemoveAccessControlEntryRecord",
        "RemoveTopicRecord",
        "RemoveUserScramCredentialRecord",
        "TopicRecord",
        "UserScramCredentialRecord",
    ] {
        assert!(types.contains(&t), "{t} missing from the fixture: {types:?}");
    }
}

#[test]
fn extra_records_from_env_round_trip() {
    // e.g. a live capture by compat-tests or by hand; absent in plain `cargo test`
    if let Ok(path) = std::env::var("KETCH_METADATA_RECORDS") {
        let records = parse_fixture(&std::fs::read_to_string(&path).unwrap());
        assert!(!records.is_empty(), "{path}: no records");
        assert_round_trip(&records);
        eprintln!("{path}: {} records decoded and re-encoded byte for byte", records.len());
    }
}

/// The decoded fields mean what the capture did.
#[test]
fn kafka_records_mean_what_the_capture_did() {
    let all: Vec<MetadataRecord> = decode_all(&fixture()).into_iter().map(|m| m.record).collect();
    let topic_id = |name: &str| -> Uuid {
        all.iter()
            .find_map(|r| match r {
                MetadataRecord::Topic(t) if t.name == name => Some(t.topic_id),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no TopicRecord {name}"))
    };
    let (a, b) = (topic_id("meta-a"), topic_id("meta-b"));
    assert!(!a.is_nil() && a != b);

    let parts = |id: Uuid| -> Vec<&PartitionRecord> {
        all.iter()
            .filter_map(|r| match r {
                MetadataRecord::Partition(p) if p.topic_id == id => Some(p),
                _ => None,
            })
            .collect()
    };
    let pa = parts(a);
    assert_eq!(pa.iter().map(|p| p.partition_id).collect::<Vec<_>>(), vec![0, 1, 2]);
    for p in &pa {
        assert_eq!((p.replicas.as_slice(), p.isr.as_slice(), p.leader, p.leader_epoch), (&[1][..], &[1][..], 1, 0));
        assert_eq!(p.directories.len(), 1);
        assert!(!p.directories[0].is_nil());
    }
    assert_eq!(parts(b).iter().map(|p| p.partition_id).collect::<Vec<_>>(), vec![0, 1]); // grown to 2
    assert!(all.iter().any(|r| matches!(r, MetadataRecord::RemoveTopic(t) if t.topic_id == b)));

    let configs: Vec<(i8, &str, &str, Option<&str>)> = all
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::Config(c) => Some((c.resource_type, &*c.resource_name, &*c.name, c.value.as_deref())),
            _ => None,
        })
        .collect();
    for want in [
        (2, "meta-a", "cleanup.policy", Some("compact")),
        (2, "meta-a", "retention.ms", Some("123456")),
        (2, "meta-a", "retention.ms", None), // deleted: a null value
        (4, "1", "log.cleaner.backoff.ms", Some("20000")),
        (4, "", "log.retention.bytes", Some("1073741824")),
    ] {
        assert!(configs.contains(&want), "{want:?} not in {configs:?}");
    }
    assert!(all.iter().any(|r| matches!(r, MetadataRecord::ClearElr(c) if c.topic_name == "meta-a")));

    let acl = all
        .iter()
        .find_map(|r| match r {
            MetadataRecord::AccessControlEntry(e) if e.principal == "User:alice" => Some(e),
            _ => None,
        })
        .expect("alice's ACL");
    // TOPIC = 2, LITERAL = 3, READ = 3, ALLOW = 3 (Kafka's enum codes)
    assert_eq!((acl.resource_type, &*acl.resource_name, acl.pattern_type, &*acl.host), (2, "meta-a", 3, "*"));
    assert_eq!((acl.operation, acl.permission_type), (3, 3));
    let bob_acl = all
        .iter()
        .find_map(|r| match r {
            MetadataRecord::AccessControlEntry(e) if e.principal == "User:bob" => Some(e.id),
            _ => None,
        })
        .expect("bob's ACL");
    assert!(all.iter().any(|r| matches!(r, MetadataRecord::RemoveAccessControlEntry(e) if e.id == bob_acl)));

    let alice = all
        .iter()
        .find_map(|r| match r {
            MetadataRecord::UserScramCredential(c) if c.name == "alice" => Some(c),
            _ => None,
        })
        .expect("alice's SCRAM credential");
    assert_eq!((alice.mechanism, alice.iterations, alice.stored_key.len(), alice.server_key.len()), (1, 8192, 32, 32));
    assert!(!alice.salt.is_empty());
    assert!(all
        .iter()
        .any(|r| matches!(r, MetadataRecord::RemoveUserScramCredential(c) if c.name == "bob" && c.mechanism == 2)));

    let quotas: Vec<&ClientQuotaRecord> = all
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::ClientQuota(q) => Some(q),
            _ => None,
        })
        .collect();
    let q = |key: &str, remove: bool| quotas.iter().find(|q| q.key == key && q.remove == remove).copied();
    let set = q("producer_byte_rate", false).expect("client1's quota");
    assert_eq!(
        (set.value, &*set.entity[0].entity_type, set.entity[0].entity_name.as_deref()),
        (1024.0, "client-id", Some("client1"))
    );
    assert!(q("producer_byte_rate", true).is_some());
    let default_user = q("request_percentage", false).expect("default user's quota");
    assert_eq!(
        (default_user.value, &*default_user.entity[0].entity_type, &default_user.entity[0].entity_name),
        (12.5, "user", &None)
    );

    let features: Vec<(&str, i16)> = all
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::FeatureLevel(f) => Some((&*f.name, f.feature_level)),
            _ => None,
        })
        .collect();
    assert!(features.contains(&("transaction.version", 2)) && features.contains(&("transaction.version", 1)));
    assert!(features.iter().any(|&(n, l)| n == "metadata.version" && l > 0));

    let broker = all
        .iter()
        .find_map(|r| match r {
            MetadataRecord::RegisterBroker(b) => Some(b),
            _ => None,
        })
        .expect("broker registration");
    assert_eq!((broker.broker_id, broker.rack.as_deref(), broker.fenced), (1, None, true));
    assert_eq!(broker.end_points.len(), 1);
    assert_eq!((&*broker.end_points[0].name, &*broker.end_points[0].host), ("PLAINTEXT", "127.0.0.1"));
    assert!(broker.features.iter().any(|f| f.name == "metadata.version"));
    assert_eq!(broker.log_dirs.len(), 1); // version 3, tag 0
    assert!(all
        .iter()
        .any(|r| matches!(r, MetadataRecord::ProducerIds(p) if p.broker_id == 1 && p.next_producer_id > 0)));
    assert!(all
        .iter()
        .any(|r| matches!(r, MetadataRecord::BeginTransaction(t) if t.name.as_deref() == Some("Bootstrap records"))));
    // the shutdown: partition leadership moved away (leader -1), ELR tags set
    assert!(all.iter().any(|r| matches!(r, MetadataRecord::PartitionChange(c) if c.leader == -1 && c.topic_id == a)));
}

#[test]
fn every_record_type_round_trips_its_defaults_at_every_version() {
    assert_eq!(RECORD_TYPES.len(), 26);
    for &(api_key, name, lo, hi) in RECORD_TYPES {
        let record = MetadataRecord::default_of(api_key).unwrap();
        assert_eq!((record.name(), record.highest_version()), (name, hi));
        for version in lo..=hi {
            let bytes = record.encode_framed(version).unwrap();
            let m = MetadataRecord::decode_framed(&bytes).unwrap();
            assert_eq!((m.record, m.version), (record.clone(), version), "{name} v{version}");
        }
        assert!(matches!(record.encode_framed(hi + 1), Err(EncodeError::UnsupportedVersion { .. })));
        assert!(matches!(MetadataRecord::decode(api_key, hi + 1, &[0]), Err(DecodeError::UnsupportedVersion { .. })));
    }
}

#[test]
fn unknown_tags_are_kept_and_written_back_in_order() {
    // TopicRecord v0 with tags 7 and 3 added by a newer writer
    let mut t = TopicRecord { name: "x".into(), topic_id: Uuid::from_u128(5), ..Default::default() };
    t.unknown_tagged_fields =
        vec![RawTaggedField { tag: 7, data: vec![1, 2] }, RawTaggedField { tag: 3, data: vec![] }];
    let mut buf = Vec::new();
    t.encode(0, &mut buf).unwrap();
    assert!(buf.ends_with(&[2, 3, 0, 7, 2, 1, 2]), "{buf:?}");
    let back = TopicRecord::decode(0, &buf).unwrap();
    assert_eq!(back.unknown_tagged_fields.iter().map(|f| f.tag).collect::<Vec<_>>(), vec![3, 7]);
    // a known tag next to unknown ones (PartitionRecord's LeaderRecoveryState is tag 0)
    let p = PartitionRecord {
        leader_recovery_state: 1,
        unknown_tagged_fields: vec![RawTaggedField { tag: 9, data: vec![42] }],
        ..Default::default()
    };
    let mut buf = Vec::new();
    p.encode(2, &mut buf).unwrap();
    assert_eq!(PartitionRecord::decode(2, &buf).unwrap(), p);
    // at version 1, tags 1 and 2 (ELR) are unknown: kept raw, not decoded
    let elr = PartitionRecord { eligible_leader_replicas: Some(vec![1]), ..Default::default() };
    let mut v2 = Vec::new();
    elr.encode(2, &mut v2).unwrap();
    let as_v1 = PartitionRecord::decode(1, &v2).unwrap();
    assert_eq!((as_v1.eligible_leader_replicas, as_v1.unknown_tagged_fields.len()), (None, 1));
    let mut again = Vec::new();
    PartitionRecord::decode(1, &v2).unwrap().encode(1, &mut again).unwrap();
    assert_eq!(again, v2);
}

#[test]
fn encoder_refuses_what_kafka_refuses() {
    // a field absent at the version, at a non-default value
    let b = RegisterBrokerRecord { in_controlled_shutdown: true, ..Default::default() };
    let mut buf = vec![9];
    assert!(matches!(b.encode(0, &mut buf), Err(EncodeError::NonDefaultAtVersion { .. })));
    assert_eq!(buf, vec![9], "buffer left as it was");
    let c = PartitionChangeRecord { directories: Some(vec![Uuid::nil()]), ..Default::default() };
    assert!(matches!(c.encode(0, &mut Vec::new()), Err(EncodeError::NonDefaultAtVersion { .. })));
    // strings longer than Kafka's limit
    let t = TopicRecord { name: "x".repeat(0x8000), ..Default::default() };
    assert!(matches!(t.encode(0, &mut Vec::new()), Err(EncodeError::TooLong { .. })));
    // duplicate of a known tag
    let p = PartitionRecord {
        leader_recovery_state: 1,
        unknown_tagged_fields: vec![RawTaggedField { tag: 0, data: vec![0] }],
        ..Default::default()
    };
    assert!(matches!(p.encode(2, &mut Vec::new()), Err(EncodeError::DuplicateTag { .. })));
}

// ---- hostile input

/// A decode of `input` may fail but must not panic, and must allocate at most a small constant
/// factor of the input (plus a little slack for the error value and small vectors).
fn decode_bounded(input: &[u8]) -> Result<ApiMessageAndVersion, DecodeError> {
    let (out, largest, peak) = measure(|| MetadataRecord::decode_framed(input));
    let bound = 1024 + 32 * input.len();
    assert!(largest <= bound && peak <= bound, "input of {} bytes: largest {largest}, peak {peak}", input.len());
    out
}

#[test]
fn truncations_and_bit_flips_of_kafka_records_error_without_panics() {
    for c in fixture() {
        for n in 0..c.bytes.len() {
            assert!(decode_bounded(&c.bytes[..n]).is_err(), "offset {}: prefix of {n} bytes decoded", c.offset);
        }
        let mut trailing = c.bytes.clone();
        trailing.push(0);
        assert!(matches!(decode_bounded(&trailing), Err(DecodeError::TrailingBytes(1))));
        for i in 0..c.bytes.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut b = c.bytes.clone();
                b[i] ^= mask;
                let _ = decode_bounded(&b);
            }
        }
    }
}

#[test]
fn huge_declared_lengths_error_without_large_allocations() {
    let huge = [0xff, 0xff, 0xff, 0xff, 0x0f]; // unsigned varint 2^32 - 1
    let frame = |api_key: u8, version: u8, body: &[u8]| [&[1, api_key, version][..], body].concat();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        // TopicRecord.Name
        ("string", frame(2, 0, &huge)),
        ("string 0x7fff+", frame(2, 0, &[0x81, 0x80, 0x02])),
        // PartitionRecord.Replicas after partition id and topic id
        ("int32 array", frame(3, 0, &[[0u8; 20].as_slice(), &huge].concat())),
        ("int32 array, 4 bytes short", frame(3, 0, &[[0u8; 20].as_slice(), &[101], &[0u8; 396]].concat())),
        // RegisterBrokerRecord.EndPoints after id, incarnation id, epoch
        ("struct array", frame(0, 0, &[[0u8; 28].as_slice(), &huge].concat())),
        // UserScramCredentialRecord.Salt after name "" and mechanism
        ("bytes", frame(11, 0, &[[1u8, 0].as_slice(), &huge].concat())),
        // tagged fields: count, then size of one
        ("tag count", frame(20, 0, &huge)),
        ("tag size", frame(20, 0, &[[1u8, 0].as_slice(), &huge].concat())),
        ("varint", frame(20, 0, &[0xff; 6])),
        ("api key", [&[1u8][..], &huge].concat()),
        ("version", [&[1u8, 2][..], &huge].concat()),
        ("frame version 0", vec![0, 20, 0, 0]),
        ("frame version 2", vec![2, 20, 0, 0]),
        ("null name", frame(2, 0, &[0])),
    ];
    for (what, input) in cases {
        let r = decode_bounded(&input);
        assert!(r.is_err(), "{what}: decoded {r:?}");
    }
    // many small elements: capacity follows the input, not the declared count
    let mut ok = frame(3, 0, &[0u8; 20]);
    ok.push(0x81);
    ok.push(0x01); // 128 replicas
    ok.extend(std::iter::repeat_n(0u8, 128 * 4));
    ok.extend([1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // isr, removing, adding empty; leader, epochs
    ok.push(0); // tagged fields
    let m = decode_bounded(&ok).unwrap();
    assert!(matches!(m.record, MetadataRecord::Partition(p) if p.replicas.len() == 128));
}

#[test]
fn tag_order_and_size_are_checked() {
    // NoOpRecord with tags out of order, then a known tag whose value is longer than it uses
    assert!(matches!(
        MetadataRecord::decode_framed(&[1, 20, 0, 2, 5, 0, 3, 0]),
        Err(DecodeError::TagOrder { tag: 3, previous: 5, .. })
    ));
    // PartitionRecord v0 with LeaderRecoveryState (tag 0, int8) given 2 bytes
    let mut p = vec![1, 3, 0];
    p.extend([0u8; 20]);
    p.extend([1, 1, 1, 1]);
    p.extend([0u8; 12]);
    p.extend([1, 0, 2, 1, 0]);
    assert!(matches!(MetadataRecord::decode_framed(&p), Err(DecodeError::TagSize { tag: 0, size: 2, used: 1, .. })));
}
