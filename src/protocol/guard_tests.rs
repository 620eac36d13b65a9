//! (a) every request the crate encodes passes, and the tables match the crate's decoders;
//! (b) huge counts and malformed encodings are refused; (c) mutated frames the guard accepts
//! decode within the allocation bound, measured with a counting allocator; (d) the same three
//! for response frames (`check_response`), as other brokers and controllers send them.
use super::super::guard_schemas::{
    default_request, default_response, request_schema, response_schema, REQUEST_KEYS, RESPONSE_KEYS,
};
use super::*;
use bytes::{Bytes, BytesMut};
use create_topics_request::{CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig};
use fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use produce_request::{PartitionProduceData, TopicProduceData};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Crate-encoded header + body.
fn frame(body: &RequestKind, api_key: i16, version: i16) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(api_key)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("ketch-test")));
    let mut buf = BytesMut::new();
    let key = ApiKey::try_from(api_key).unwrap();
    header.encode(&mut buf, key.request_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

/// Decode header + body with the crate from `Bytes`, as the broker does; also returns the
/// number of bytes left unread.
fn crate_decode(mut b: Bytes) -> anyhow::Result<(RequestKind, usize)> {
    let frame = b.clone();
    let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    RequestHeader::decode(&mut b, key.request_header_version(version))?;
    let body = RequestKind::decode(key, &mut b, version)?;
    Ok((body, b.len()))
}

fn versions(api_key: i16) -> std::ops::RangeInclusive<i16> {
    let s = request_schema(api_key).unwrap();
    s.min_version..=s.max_version
}

/// Crate-encoded response header (correlation id 7) + body, as a peer sends it.
fn response_frame(body: &ResponseKind, api_key: i16, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    let key = ApiKey::try_from(api_key).unwrap();
    ResponseHeader::default().with_correlation_id(7).encode(&mut buf, key.response_header_version(version)).unwrap();
    body.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

/// Decode a response frame with the crate from `Bytes`, as the node client does; also returns
/// the number of bytes left unread.
fn crate_decode_response(mut b: Bytes, api_key: i16, version: i16) -> anyhow::Result<(ResponseKind, usize)> {
    let key = ApiKey::try_from(api_key).unwrap();
    ResponseHeader::decode(&mut b, key.response_header_version(version))?;
    let body = ResponseKind::decode(key, &mut b, version)?;
    Ok((body, b.len()))
}

fn response_versions(api_key: i16) -> std::ops::RangeInclusive<i16> {
    let s = response_schema(api_key).unwrap();
    s.min_version..=s.max_version
}

/// Deterministic xorshift PRNG.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Writes random *valid* encodings straight from the schema tables (strings never null).
struct Gen {
    rng: Rng,
    max_count: u64,
    max_str: u64,
    unknown_tags: bool,
    budget: u64, // array elements left in this frame, so nested arrays do not multiply
}

fn gen(seed: u64, max_count: u64, max_str: u64, unknown_tags: bool) -> Gen {
    Gen { rng: Rng(seed), max_count, max_str, unknown_tags, budget: 0 }
}

fn uvarint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Gen {
    fn request(&mut self, api_key: i16, v: i16) -> Vec<u8> {
        self.budget = 4 * self.max_count;
        let mut out = [api_key.to_be_bytes(), v.to_be_bytes(), [0, 0], [0, 7]].concat();
        self.kind(&mut out, Kind::String, v, 0); // client_id
        if ApiKey::try_from(api_key).unwrap().request_header_version(v) >= 2 {
            out.push(0);
        }
        self.strukt(&mut out, request_schema(api_key).unwrap(), v, 0);
        out
    }
    /// A response frame: header (correlation id 7, tagged section at header v1), then the body.
    fn response(&mut self, api_key: i16, v: i16) -> Vec<u8> {
        self.budget = 4 * self.max_count;
        let mut out = vec![0, 0, 0, 7];
        if ApiKey::try_from(api_key).unwrap().response_header_version(v) >= 1 {
            out.push(0);
        }
        self.strukt(&mut out, response_schema(api_key).unwrap(), v, 0);
        out
    }
    fn strukt(&mut self, out: &mut Vec<u8>, s: &Schema, v: i16, depth: u32) {
        for f in s.fields.iter().filter(|f| f.applies(v)) {
            self.kind(out, f.kind, v, depth);
        }
        if v < s.flexible_min {
            return;
        }
        let mut fields: Vec<(u32, Vec<u8>)> = Vec::new();
        for (tag, t) in s.tagged.iter().filter(|t| t.1.applies(v)) {
            if self.rng.below(2) == 0 {
                let mut b = Vec::new();
                self.kind(&mut b, t.kind, v, depth + 1);
                fields.push((*tag, b));
            }
        }
        for i in 0..if self.unknown_tags { self.rng.below(3) } else { 0 } {
            let b = (0..self.rng.below(4)).map(|_| self.rng.next() as u8).collect();
            fields.push((1000 + i as u32, b));
        }
        uvarint(out, fields.len() as u32);
        for (tag, b) in fields {
            uvarint(out, tag);
            uvarint(out, b.len() as u32);
            out.extend_from_slice(&b);
        }
    }
    fn kind(&mut self, out: &mut Vec<u8>, k: Kind, v: i16, depth: u32) {
        match k {
            Kind::Fixed(n) => (0..n).for_each(|_| out.push(self.rng.next() as u8)),
            Kind::String | Kind::Bytes | Kind::CompactString | Kind::CompactBytes => {
                let n = self.rng.below(self.max_str + 1);
                match k {
                    Kind::String => out.extend_from_slice(&(n as i16).to_be_bytes()),
                    Kind::Bytes => out.extend_from_slice(&(n as i32).to_be_bytes()),
                    _ => uvarint(out, n as u32 + 1),
                }
                (0..n).for_each(|_| out.push(b'a' + self.rng.below(26) as u8));
            }
            Kind::Struct(s) => self.strukt(out, s, v, depth + 1),
            Kind::OptionStruct(_) if self.rng.below(2) == 0 => out.push(0xff),
            Kind::OptionStruct(s) => {
                out.push(1);
                self.strukt(out, s, v, depth + 1);
            }
            Kind::Array(e, _) | Kind::CompactArray(e, _) => {
                let cap = if depth == 0 { self.max_count } else { (self.max_count >> (2 * depth)).max(2) };
                let n = self.rng.below(cap + 1).min(self.budget);
                self.budget -= n;
                match k {
                    Kind::Array(..) => out.extend_from_slice(&(n as i32).to_be_bytes()),
                    _ => uvarint(out, n as u32 + 1),
                }
                (0..n).for_each(|_| self.kind(out, e.kind(), v, depth));
            }
        }
    }
}

// ---- (a) ---------------------------------------------------------------------------------

#[test]
fn default_request_of_every_api_and_version_is_accepted() {
    assert_eq!(REQUEST_KEYS.len(), ApiKey::iter().count());
    let mut overstated = Vec::new();
    for key in ApiKey::iter() {
        let (k, r) = (key as i16, key.valid_versions());
        let s = request_schema(k).unwrap();
        assert_eq!(s.min_version, r.min, "{key:?}");
        if s.max_version != r.max {
            overstated.push((k, r.max));
        }
        for v in versions(k) {
            assert_eq!(check_request(&frame(&default_request(k).unwrap(), k, v)), Ok(()), "api {k} v{v}");
        }
        for v in [r.min - 1, s.max_version + 1, i16::MAX, -1] {
            let mut f = frame(&default_request(k).unwrap(), k, s.max_version);
            f[2..4].copy_from_slice(&v.to_be_bytes());
            assert_eq!(check_request(&f), Err(GuardError::UnsupportedVersion { api_key: k, version: v }));
        }
    }
    // ApiKey::valid_versions claims one version more than these decoders accept.
    assert_eq!(overstated, vec![(8, 10), (9, 10), (22, 6)]);
    assert_eq!(check_request(&[0, 100, 0, 0, 0, 0, 0, 0]), Err(GuardError::UnknownApiKey(100)));
    assert_eq!(check_request(&[0, 3]), Err(GuardError::Truncated));
}

/// The generated tables describe exactly what the crate decodes: schema-driven random
/// encodings of every API and version decode with the crate consuming every byte, and the
/// crate's re-encodings (populated bodies) pass the guard too.
#[test]
fn schema_tables_match_the_crate() {
    let mut g = gen(0x9e3779b97f4a7c15, 3, 6, true);
    for &k in REQUEST_KEYS {
        for v in versions(k) {
            for i in 0..25 {
                let f = g.request(k, v);
                assert_eq!(check_request(&f), Ok(()), "generated api {k} v{v} #{i}");
                let (body, rest) =
                    crate_decode(Bytes::copy_from_slice(&f)).unwrap_or_else(|e| panic!("api {k} v{v}: {e:#}"));
                assert_eq!(rest, 0, "api {k} v{v}: crate left bytes unread");
                let f1 = frame(&body, k, v);
                assert_eq!(check_request(&f1), Ok(()), "re-encoded api {k} v{v} #{i}");
                assert_eq!(frame(&crate_decode(Bytes::copy_from_slice(&f1)).unwrap().0, k, v), f1);
            }
        }
    }
}

/// Hand-built requests of the main APIs, every version they encode at.
fn populated() -> Vec<(i16, RequestKind)> {
    let name = |s: &'static str| TopicName(StrBytes::from_static_str(s));
    let text = StrBytes::from_static_str;
    let meta = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(name("orders"))),
        metadata_request::MetadataRequestTopic::default().with_name(Some(name("payments"))),
    ]));
    let produce =
        ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![TopicProduceData::default(
        )
        .with_name(name("orders"))
        .with_partition_data(vec![
            PartitionProduceData::default().with_index(0).with_records(Some(Bytes::from(vec![1u8; 70]))),
            PartitionProduceData::default().with_index(1).with_records(None),
        ])]);
    let part = |p| FetchPartition::default().with_partition(p).with_fetch_offset(42);
    let fetch = FetchRequest::default().with_max_wait_ms(500).with_topics(vec![FetchTopic::default()
        .with_topic(name("orders"))
        .with_partitions(vec![part(0), part(1), part(2)])]);
    let list = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name("orders"))
        .with_partitions(vec![ListOffsetsPartition::default().with_timestamp(-1)])]);
    let config = CreatableTopicConfig::default().with_name(text("cleanup.policy")).with_value(Some(text("compact")));
    let assignment = CreatableReplicaAssignment::default().with_broker_ids(vec![BrokerId(1)]);
    let create = CreateTopicsRequest::default().with_timeout_ms(30_000).with_topics(vec![
        CreatableTopic::default().with_name(name("orders")).with_num_partitions(3).with_configs(vec![config]),
        CreatableTopic::default().with_name(name("audit")).with_assignments(vec![assignment]),
    ]);
    let delete = DeleteTopicsRequest::default()
        .with_topic_names(vec![name("orders"), name("audit")])
        .with_topics(vec![delete_topics_request::DeleteTopicState::default().with_name(Some(name("orders")))]);
    let api = ApiVersionsRequest::default()
        .with_client_software_name(text("librdkafka"))
        .with_client_software_version(text("2.6.1"));
    use RequestKind as R;
    vec![
        (3, R::Metadata(meta)),
        (0, R::Produce(produce)),
        (1, R::Fetch(fetch)),
        (2, R::ListOffsets(list)),
        (19, R::CreateTopics(create)),
        (20, R::DeleteTopics(delete)),
        (18, R::ApiVersions(api)),
    ]
}

/// `populated()` encoded at every version the crate can encode it at.
fn populated_frames() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (k, body) in populated() {
        for v in versions(k) {
            // Skipped where the crate refuses (e.g. topic names at Produce v13, ids only).
            if body.encode(&mut BytesMut::new(), v).is_ok() {
                out.push(frame(&body, k, v));
            }
        }
    }
    out
}

#[test]
fn populated_requests_are_accepted() {
    let frames = populated_frames();
    assert!(frames.len() > 60, "{}", frames.len());
    for f in frames {
        assert_eq!(check_request(&f), Ok(()), "api {} v{}", f[1], f[3]);
        assert!(f.len() > 30 || (f[1] == 18 && f[3] <= 2), "api {} v{} is not populated", f[1], f[3]);
    }
}

// ---- (b) ---------------------------------------------------------------------------------

/// Header (client id "ketch-test") for (api_key, version), then `body`.
fn raw(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut f = frame(&default_request(api_key).unwrap(), api_key, version);
    let mut b = BytesMut::new();
    default_request(api_key).unwrap().encode(&mut b, version).unwrap();
    f.truncate(f.len() - b.len());
    [&f[..], body].concat()
}

fn too_large(api_key: i16, version: i16, body: &[u8]) -> bool {
    matches!(check_request(&raw(api_key, version, body)), Err(GuardError::LengthTooLarge { .. }))
}

#[test]
fn huge_counts_are_refused() {
    // The CVE-2022-34917-style body from the brief, and a compact count of 0xffffffff.
    assert!(too_large(3, 4, &[0x7f, 0xff, 0xff, 0xff, 0x00]));
    assert!(too_large(3, 12, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0]));
    // Produce v3: null txn id, acks, timeout, one topic "t" whose partitions claim 2^31-1.
    let produce = [0xff, 0xff, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't'];
    assert!(too_large(0, 3, &[&produce[..], &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]].concat()));
    // ... one partition whose records claim 2^31-1 bytes.
    assert!(too_large(0, 3, &[&produce[..], &[0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3]].concat()));
    // Fetch v4: 17 fixed bytes, topic "t" with 2^28 partitions of 16 bytes each in 64 bytes.
    assert!(too_large(1, 4, &[&[0; 17][..], &[0, 0, 0, 1, 0, 1, b't', 0x10, 0, 0, 0], &[0; 64]].concat()));
    // CreateTopics v5 (flexible): topic "t", 1 partition, rf 1, no assignments, 2^31-1 configs.
    assert!(too_large(
        19,
        5,
        &[&[2, 2, b't', 0, 0, 0, 1, 0, 1, 1, 0x80, 0x80, 0x80, 0x80, 0x08][..], &[0; 16]].concat()
    ));
    // CreateTopics v2: an assignment's broker_ids claim 2^20 ints in 20 bytes.
    let topic = [0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0x10, 0, 0];
    assert!(too_large(19, 2, &[&topic[..], &[0; 20]].concat()));
    // A string length, a tagged-field count and a tagged-field size (ApiVersions v3 body:
    // two empty compact strings, then the tagged section).
    assert!(too_large(3, 4, &[0, 0, 0, 1, 0x7f, 0xff, 0]));
    assert!(too_large(18, 3, &[1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    assert!(too_large(18, 3, &[1, 1, 1, 5, 0xff, 0xff, 0x03, 0]));
}

#[test]
fn malformed_encodings_are_refused() {
    let mal = |k, v, body: &[u8]| matches!(check_request(&raw(k, v, body)), Err(GuardError::Malformed(_)));
    assert!(mal(18, 3, &[0x81, 0x80, 0x80, 0x80, 0x10, 1, 0])); // varint over 32 bits
    assert!(mal(3, 4, &[0xff, 0xff, 0xff, 0xfe, 0])); // array length -2
    assert!(mal(3, 4, &[0, 0, 0, 1, 0xff, 0xfe, 0])); // string length -2
                                                      // Fetch v12 (25 fixed bytes, empty topics, forgotten topics and rack id, tagged section):
                                                      // tag 0 (cluster_id) must fill its size exactly; tag 1 (replica_state) is v15+ only;
                                                      // unknown tags are skipped by size.
    let fetch = |tags: &[u8]| [&[0; 25][..], &[1, 1, 1], tags].concat();
    assert_eq!(check_request(&raw(1, 12, &fetch(&[0]))), Ok(()));
    assert_eq!(check_request(&raw(1, 12, &fetch(&[1, 0, 3, 3, b'c', b'1']))), Ok(()));
    assert!(mal(1, 12, &fetch(&[1, 0, 4, 3, b'c', b'1', 0])));
    assert!(mal(1, 12, &fetch(&[1, 1, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1])));
    assert_eq!(check_request(&raw(1, 12, &fetch(&[2, 5, 2, 9, 9, 6, 0]))), Ok(()));
}

#[test]
fn allocation_budget_refuses_element_dense_frames() {
    // Metadata v9: n topics with null names (2 bytes each, 72 bytes decoded), then the three
    // booleans and an empty tagged section.
    let metadata = |n: u32| {
        let mut b = Vec::new();
        uvarint(&mut b, n + 1);
        b.resize(b.len() + 2 * n as usize, 0);
        raw(3, 9, &[&b[..], &[1, 0, 0, 0]].concat())
    };
    let r = check_request(&metadata(200_000));
    assert!(matches!(r, Err(GuardError::AllocationBudget { .. })), "{r:?}");
    assert_eq!(check_request(&metadata(1000)), Ok(())); // fits in ALLOC_SLACK
}

// ---- (c) ---------------------------------------------------------------------------------

/// Counts this thread's live heap bytes while `ON` (other test threads are not counted).
struct Counting;
thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}
fn track(delta: isize) {
    let _ = ON.try_with(|on| {
        if on.get() {
            LIVE.set(LIVE.get() + delta);
            PEAK.set(PEAK.get().max(LIVE.get()));
        }
    });
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        track(l.size() as isize);
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        track(l.size() as isize);
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        track(-(l.size() as isize));
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        track(new as isize - l.size() as isize);
        System.realloc(p, l, new)
    }
}
#[global_allocator]
static ALLOC: Counting = Counting;

/// Tracks decode peaks against the guard's estimate and the bound `64 * len + 64 KiB`.
#[derive(Default)]
struct Peaks {
    ratio: (f64, String), // worst peak / len over frames of at least 4 KiB
    largest: (usize, String),
}

impl Peaks {
    fn decode(&mut self, f: &[u8], what: &str) {
        let estimate = estimate_request(f).unwrap();
        let what = format!("{what} api {} v{}", f[1], f[3]);
        self.measure(f, estimate, &what, |b| crate_decode(b).is_ok());
    }

    fn decode_response(&mut self, api_key: i16, version: i16, f: &[u8], what: &str) {
        let estimate = estimate_response(api_key, version, f).unwrap();
        let what = format!("{what} response api {api_key} v{version}");
        self.measure(f, estimate, &what, |b| crate_decode_response(b, api_key, version).is_ok());
    }

    /// Decodes `f` (from `Bytes`, as the broker and the node client do) with `decode`, counting.
    fn measure(&mut self, f: &[u8], estimate: u64, what: &str, decode: impl FnOnce(Bytes) -> bool) {
        let b = Bytes::copy_from_slice(f);
        LIVE.set(0);
        PEAK.set(0);
        ON.set(true);
        let ok = decode(b);
        ON.set(false);
        let peak = PEAK.get().max(0) as usize;
        let at = format!("{what}: peak {peak} B, frame {} B, estimate {estimate} B", f.len());
        // 1 KiB covers the shared `Bytes` header; a failed decode also builds an anyhow error
        // (with a backtrace when RUST_BACKTRACE is set): constant, not per byte.
        assert!(peak as u64 <= estimate + if ok { 1024 } else { 16 * 1024 }, "estimate too low: {at}");
        assert!(peak <= 64 * f.len() + 64 * 1024, "{at}");
        let r = peak as f64 / f.len() as f64;
        if f.len() >= 4096 && r > self.ratio.0 {
            self.ratio = (r, at.clone());
        }
        if peak > self.largest.0 {
            self.largest = (peak, at);
        }
    }

    fn report(&self, what: &str) {
        println!(
            "{what}: worst peak/len (frames >= 4 KiB) {:.1} [{}]; largest [{}]",
            self.ratio.0, self.ratio.1, self.largest.1
        );
    }
}

fn mutate(rng: &mut Rng, f: &[u8]) -> Vec<u8> {
    let mut m = f.to_vec();
    for _ in 0..1 + rng.below(3) {
        let i = 4 + rng.below(m.len() as u64 - 4) as usize; // keep api key and version
        match rng.below(6) {
            0 => m[i] ^= 1 << rng.below(8),
            1 => m[i] = rng.next() as u8,
            2 => m[i] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff][rng.below(6) as usize],
            3 => {
                let end = (i + 1 + rng.below(5) as usize).min(m.len());
                m[i..end].fill([0xff, 0x7f, 0x80][rng.below(3) as usize]);
            }
            4 => m.truncate(i.max(5)),
            _ => m.insert(i, rng.next() as u8),
        }
    }
    m
}

#[test]
fn mutated_frames_never_over_allocate() {
    // Defaults, crate re-encodings of random bodies, populated and element-dense frames.
    let (mut g, mut dense) = (gen(0x2545f4914f6cdd1d, 3, 6, true), gen(77, 40, 0, false));
    let mut frames = populated_frames();
    for &k in REQUEST_KEYS {
        for v in versions(k) {
            frames.push(frame(&default_request(k).unwrap(), k, v));
            for _ in 0..3 {
                frames.push(frame(&crate_decode(Bytes::from(g.request(k, v))).unwrap().0, k, v));
            }
            frames.push(dense.request(k, v));
        }
    }
    // `GUARD_SEED_CORPUS=dir` writes them out as a fuzzing seed corpus.
    if let Ok(dir) = std::env::var("GUARD_SEED_CORPUS") {
        std::fs::create_dir_all(&dir).unwrap();
        for (i, f) in frames.iter().enumerate() {
            std::fs::write(format!("{dir}/seed-{i:05}"), f).unwrap();
        }
    }
    let rounds = std::env::var("GUARD_MUTATION_ROUNDS").map_or(40, |s| s.parse().unwrap());
    let (mut rng, mut peaks, mut accepted) = (Rng(0xdeadbeefcafef00d), Peaks::default(), 0);
    for f in &frames {
        peaks.decode(f, "valid");
    }
    for _ in 0..rounds {
        for f in &frames {
            let m = mutate(&mut rng, f);
            if check_request(&m).is_ok() {
                accepted += 1;
                peaks.decode(&m, "mutant");
            }
        }
    }
    println!("mutation: {} mutants of {} frames, {accepted} accepted", rounds * frames.len(), frames.len());
    peaks.report("mutation");
    assert!(accepted > frames.len());
}

/// Element-dense valid frames (many minimal elements, unknown tags) probe the budget.
#[test]
fn budget_estimate_covers_real_allocation() {
    let (mut peaks, mut over) = (Peaks::default(), 0);
    for &k in REQUEST_KEYS {
        for v in versions(k) {
            for (count, tags) in [(3000, false), (300, true)] {
                let f = gen(k as u64 * 1000 + v as u64 + 1, count, 0, tags).request(k, v);
                match check_request(&f) {
                    Ok(()) => peaks.decode(&f, "dense"),
                    Err(GuardError::AllocationBudget { .. }) => over += 1,
                    Err(e) => panic!("api {k} v{v}: {e}"),
                }
            }
        }
    }
    println!("dense: {over} frames over budget");
    peaks.report("dense");
}

// ---- (d) responses -------------------------------------------------------------------------

#[test]
fn default_response_of_every_api_and_version_is_accepted() {
    assert_eq!(RESPONSE_KEYS, REQUEST_KEYS);
    let mut differ = Vec::new();
    for &k in RESPONSE_KEYS {
        let s = response_schema(k).unwrap();
        let r = ApiKey::try_from(k).unwrap().valid_versions();
        assert_eq!(s.min_version, r.min, "api {k}");
        if s.max_version != r.max || response_versions(k) != versions(k) {
            differ.push((k, s.max_version, versions(k).end().to_owned(), r.max));
        }
        for v in response_versions(k) {
            let f = response_frame(&default_response(k).unwrap(), k, v);
            assert_eq!(check_response(k, v, &f), Ok(()), "api {k} v{v}");
        }
        let f = response_frame(&default_response(k).unwrap(), k, s.max_version);
        for v in [s.min_version - 1, s.max_version + 1, i16::MAX, -1] {
            assert_eq!(check_response(k, v, &f), Err(GuardError::UnsupportedVersion { api_key: k, version: v }));
        }
    }
    // (api key, last response decoder version, last request decoder version, valid_versions.max):
    // the response decoders of these three go one version past their request decoders.
    assert_eq!(differ, vec![(8, 10, 9, 10), (9, 10, 9, 10), (22, 6, 5, 6)]);
    assert_eq!(check_response(100, 0, &[0, 0, 0, 7]), Err(GuardError::UnknownApiKey(100)));
    assert_eq!(check_response(-1, 0, &[0, 0, 0, 7]), Err(GuardError::UnknownApiKey(-1)));
    // The header alone: the correlation id (and, at header v1, the tagged section).
    assert_eq!(check_response(3, 0, &[0, 0, 7]), Err(GuardError::Truncated));
    assert_eq!(check_response(3, 9, &[0, 0, 0, 7]), Err(GuardError::Truncated));
    assert_eq!(check_response(18, 3, &[]), Err(GuardError::Truncated));
}

/// As `schema_tables_match_the_crate`, for responses: schema-driven random encodings of every
/// API and version decode with the crate consuming every byte, and re-encode to frames the guard
/// accepts and the crate decodes back to the same bytes.
#[test]
fn response_schema_tables_match_the_crate() {
    let mut g = gen(0x6a09e667f3bcc909, 3, 6, true);
    for &k in RESPONSE_KEYS {
        for v in response_versions(k) {
            for i in 0..25 {
                let f = g.response(k, v);
                assert_eq!(check_response(k, v, &f), Ok(()), "generated api {k} v{v} #{i}");
                let (body, rest) = crate_decode_response(Bytes::copy_from_slice(&f), k, v)
                    .unwrap_or_else(|e| panic!("api {k} v{v}: {e:#}"));
                assert_eq!(rest, 0, "api {k} v{v}: crate left bytes unread");
                let f1 = response_frame(&body, k, v);
                assert_eq!(check_response(k, v, &f1), Ok(()), "re-encoded api {k} v{v} #{i}");
                let again = crate_decode_response(Bytes::copy_from_slice(&f1), k, v).unwrap().0;
                assert_eq!(response_frame(&again, k, v), f1);
            }
        }
    }
}

/// Hand-built responses of the APIs nodes answer each other with, every version they encode at.
fn populated_responses() -> Vec<(i16, ResponseKind)> {
    use api_versions_response::ApiVersion;
    use create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
    use fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
    use list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    use metadata_response::{MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic};
    use produce_response::{PartitionProduceResponse, TopicProduceResponse};
    let name = |s: &'static str| TopicName(StrBytes::from_static_str(s));
    let text = StrBytes::from_static_str;
    let broker =
        |id| MetadataResponseBroker::default().with_node_id(BrokerId(id)).with_host(text("node-1")).with_port(9092);
    let partition = |p| {
        MetadataResponsePartition::default()
            .with_partition_index(p)
            .with_leader_id(BrokerId(1))
            .with_replica_nodes(vec![BrokerId(1), BrokerId(2), BrokerId(3)])
            .with_isr_nodes(vec![BrokerId(1), BrokerId(2)])
    };
    let meta = MetadataResponse::default()
        .with_brokers(vec![broker(1), broker(2), broker(3)])
        .with_controller_id(BrokerId(1))
        .with_topics(vec![MetadataResponseTopic::default()
            .with_name(Some(name("orders")))
            .with_partitions(vec![partition(0), partition(1)])]);
    let fetched = |p| {
        PartitionData::default()
            .with_partition_index(p)
            .with_high_watermark(100)
            .with_aborted_transactions(Some(vec![AbortedTransaction::default().with_first_offset(3)]))
            .with_records(Some(Bytes::from(vec![7u8; 70])))
    };
    // Topic names up to Fetch v12, topic ids from v13 (the crate refuses a name there; the id
    // stays nil: `uuid` is not a dependency of this crate).
    let fetch_topic = FetchableTopicResponse::default().with_partitions(vec![fetched(0), fetched(1)]);
    let fetch_by_name = FetchResponse::default().with_responses(vec![fetch_topic.clone().with_topic(name("orders"))]);
    let fetch_by_id = FetchResponse::default().with_responses(vec![fetch_topic]);
    let api = |k| ApiVersion::default().with_api_key(k).with_min_version(0).with_max_version(7);
    let versions = ApiVersionsResponse::default().with_api_keys(vec![api(0), api(1), api(3), api(18)]);
    let config = CreatableTopicConfigs::default().with_name(text("cleanup.policy")).with_value(Some(text("compact")));
    let created = CreateTopicsResponse::default().with_topics(vec![
        CreatableTopicResult::default().with_name(name("orders")).with_error_code(36),
        CreatableTopicResult::default().with_name(name("audit")).with_num_partitions(3),
    ]);
    let created_configs = CreateTopicsResponse::default()
        .with_topics(vec![CreatableTopicResult::default().with_name(name("orders")).with_configs(Some(vec![config]))]);
    let list = ListOffsetsResponse::default().with_topics(vec![ListOffsetsTopicResponse::default()
        .with_name(name("orders"))
        .with_partitions(vec![ListOffsetsPartitionResponse::default().with_partition_index(1).with_offset(42)])]);
    let produce = ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
        .with_name(name("orders"))
        .with_partition_responses(vec![PartitionProduceResponse::default().with_index(0).with_base_offset(42)])]);
    use ResponseKind as R;
    vec![
        (3, R::Metadata(meta)),
        (1, R::Fetch(fetch_by_name)),
        (1, R::Fetch(fetch_by_id)),
        (18, R::ApiVersions(versions)),
        (19, R::CreateTopics(created)),
        (19, R::CreateTopics(created_configs)),
        (2, R::ListOffsets(list)),
        (0, R::Produce(produce)),
    ]
}

/// `populated_responses()` encoded at every version the crate can encode each at:
/// (api key, version, frame).
fn populated_response_frames() -> Vec<(i16, i16, Vec<u8>)> {
    let mut out = Vec::new();
    for (k, body) in populated_responses() {
        for v in response_versions(k) {
            if body.encode(&mut BytesMut::new(), v).is_ok() {
                out.push((k, v, response_frame(&body, k, v)));
            }
        }
    }
    out
}

#[test]
fn populated_responses_are_accepted() {
    let frames = populated_response_frames();
    assert!(frames.len() > 70, "{}", frames.len());
    for (k, v, f) in frames {
        assert_eq!(check_response(k, v, &f), Ok(()), "api {k} v{v}");
        assert!(f.len() > 20, "api {k} v{v} is not populated");
    }
    // Every Fetch version has one encoding with records.
    let fetch: std::collections::BTreeSet<i16> =
        populated_response_frames().iter().filter(|f| f.0 == 1).map(|f| f.1).collect();
    assert_eq!(fetch.into_iter().collect::<Vec<_>>(), response_versions(1).collect::<Vec<_>>());
}

fn response_too_large(api_key: i16, version: i16, body: &[u8]) -> bool {
    let mut f = vec![0, 0, 0, 7];
    if ApiKey::try_from(api_key).unwrap().response_header_version(version) >= 1 {
        f.push(0);
    }
    f.extend_from_slice(body);
    matches!(check_response(api_key, version, &f), Err(GuardError::LengthTooLarge { .. }))
}

#[test]
fn hostile_responses_are_refused() {
    // Metadata v0: `brokers` claims 2^31-1 elements in 5 bytes (the crate asks for ~200 GB).
    assert!(response_too_large(3, 0, &[0x7f, 0xff, 0xff, 0xff, 0x00]));
    // Metadata v4 (throttle_time_ms first) and v12 (flexible: compact count 2^32-2).
    assert!(response_too_large(3, 4, &[0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0x00]));
    assert!(response_too_large(3, 12, &[0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0]));
    // Metadata v1: no brokers, controller id 1, one topic "t" (error code, name, is_internal)
    // with one partition (error code, index, leader) whose replica_nodes claim 2^30 ints.
    let topic = [0, 0, 0, 1, 0, 0, 0, 1, b't', 0, 0, 0, 0, 1];
    let partition = [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x40, 0, 0, 0];
    assert!(response_too_large(3, 1, &[&[0, 0, 0, 0, 0, 0, 0, 1][..], &topic, &partition, &[0; 16]].concat()));
    // Fetch v4: throttle_time_ms, then `responses` claims 2^31-1 topics.
    assert!(response_too_large(1, 4, &[0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0x00]));
    // Fetch v12 (flexible, header v1): throttle, error, session id, compact `responses`.
    assert!(response_too_large(1, 12, &[&[0; 10][..], &[0xff, 0xff, 0xff, 0xff, 0x0f, 0]].concat()));
    // Fetch v4: topic "t", one partition whose aborted transactions claim 2^28 (16 B each)...
    let part = [&[0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1][..], &[0; 4 + 2 + 8 + 8]].concat();
    assert!(response_too_large(1, 4, &[&[0; 4][..], &part, &[0x10, 0, 0, 0], &[0; 64]].concat()));
    // ... or whose records claim 2^31-1 bytes (records are zero-copy `Bytes`: only their length
    // needs checking).
    let records = [0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 1, 2, 3];
    assert!(response_too_large(1, 4, &[&[0; 4][..], &part, &records].concat()));
    let ok = [&[0; 4][..], &part, &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 3, 1, 2, 3]].concat();
    assert_eq!(check_response(1, 4, &[&[0, 0, 0, 7][..], &ok].concat()), Ok(()));
    // ApiVersions v3 (response header v0 whatever the version): error code, compact api_keys.
    assert!(response_too_large(18, 3, &[0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0]));
    // A tagged-field count and size in the response header v1 (CreateTopics v5).
    let header_tags = |tags: &[u8]| [&[0, 0, 0, 7][..], tags, &[0, 0, 0, 0, 1, 0]].concat();
    assert_eq!(check_response(19, 5, &header_tags(&[0])), Ok(()));
    assert_eq!(check_response(19, 5, &header_tags(&[1, 9, 2, 0xaa, 0xbb])), Ok(()));
    assert!(matches!(
        check_response(19, 5, &header_tags(&[0xff, 0xff, 0xff, 0xff, 0x0f])),
        Err(GuardError::LengthTooLarge { .. })
    ));
    assert!(matches!(
        check_response(19, 5, &header_tags(&[1, 9, 0xff, 0xff, 0x03])),
        Err(GuardError::LengthTooLarge { .. })
    ));
    // Malformed: an over-long varint, a negative array length.
    assert!(matches!(
        check_response(19, 5, &header_tags(&[0x81, 0x80, 0x80, 0x80, 0x10])),
        Err(GuardError::Malformed(_))
    ));
    assert!(matches!(check_response(3, 0, &[0, 0, 0, 7, 0xff, 0xff, 0xff, 0xfe]), Err(GuardError::Malformed(_))));
}

#[test]
fn response_allocation_budget_refuses_element_dense_frames() {
    // CreateTopics v5: the response header v1 with n unknown tagged fields of no bytes (2 bytes
    // each on the wire, a B-tree entry each decoded), then an empty body.
    let dense = |n: u32| {
        let mut f = vec![0, 0, 0, 7];
        uvarint(&mut f, n);
        (0..n).for_each(|i| f.extend_from_slice(&[(i % 100) as u8 + 20, 0]));
        f.extend_from_slice(&[0, 0, 0, 0, 1, 0]);
        f
    };
    let r = check_response(19, 5, &dense(200_000));
    assert!(matches!(r, Err(GuardError::AllocationBudget { .. })), "{r:?}");
    assert_eq!(check_response(19, 5, &dense(100)), Ok(()));
    // ListGroups v0: error code, then n groups of two empty strings (4 bytes each on the wire,
    // a `ListedGroup` of more than 4 * ALLOC_FACTOR bytes each decoded).
    assert!(std::mem::size_of::<list_groups_response::ListedGroup>() as u64 > 4 * ALLOC_FACTOR);
    let groups = |n: usize| [&[0, 0, 0, 7, 0, 0][..], &(n as i32).to_be_bytes(), &vec![0; 4 * n]].concat();
    let r = check_response(16, 0, &groups(200_000));
    assert!(matches!(r, Err(GuardError::AllocationBudget { .. })), "{r:?}");
    assert_eq!(check_response(16, 0, &groups(100)), Ok(()));
}

#[test]
fn mutated_responses_never_over_allocate() {
    let (mut g, mut dense) = (gen(0x3c6ef372fe94f82b, 3, 6, true), gen(78, 40, 0, false));
    let mut frames = populated_response_frames();
    for &k in RESPONSE_KEYS {
        for v in response_versions(k) {
            frames.push((k, v, response_frame(&default_response(k).unwrap(), k, v)));
            for _ in 0..3 {
                let body = crate_decode_response(Bytes::from(g.response(k, v)), k, v).unwrap().0;
                frames.push((k, v, response_frame(&body, k, v)));
            }
            frames.push((k, v, dense.response(k, v)));
        }
    }
    let rounds = std::env::var("GUARD_MUTATION_ROUNDS").map_or(40, |s| s.parse().unwrap());
    let (mut rng, mut peaks, mut accepted) = (Rng(0x510e527fade682d1), Peaks::default(), 0);
    for (k, v, f) in &frames {
        peaks.decode_response(*k, *v, f, "valid");
    }
    for _ in 0..rounds {
        for (k, v, f) in &frames {
            let m = mutate(&mut rng, f);
            if check_response(*k, *v, &m).is_ok() {
                accepted += 1;
                peaks.decode_response(*k, *v, &m, "mutant");
            }
        }
    }
    println!("response mutation: {} mutants of {} frames, {accepted} accepted", rounds * frames.len(), frames.len());
    peaks.report("response mutation");
    assert!(accepted > frames.len());
}

/// Element-dense valid response frames probe the budget.
#[test]
fn response_budget_estimate_covers_real_allocation() {
    let (mut peaks, mut over) = (Peaks::default(), 0);
    for &k in RESPONSE_KEYS {
        for v in response_versions(k) {
            for (count, tags) in [(3000, false), (300, true)] {
                let f = gen(k as u64 * 1000 + v as u64 + 7, count, 0, tags).response(k, v);
                match check_response(k, v, &f) {
                    Ok(()) => peaks.decode_response(k, v, &f, "dense"),
                    Err(GuardError::AllocationBudget { .. }) => over += 1,
                    Err(e) => panic!("api {k} v{v}: {e}"),
                }
            }
        }
    }
    println!("dense responses: {over} frames over budget");
    peaks.report("dense responses");
}
