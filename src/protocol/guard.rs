//! Pre-decode guard for request frames and for the response frames other nodes send (brokers,
//! controllers: `node::client`, and a controller's answer inside an Envelope): the only defence
//! between the socket and kafka-protocol's decoders, which size `Vec`s from counts read off the
//! wire before checking that the buffer holds that many elements (a 5-byte Metadata v4 request
//! body `7f ff ff ff 00` asks for ~150 GB and aborts the process, and so does a Metadata v0
//! response body of the same 5 bytes; same bug class as Kafka's CVE-2022-34917). A peer is input
//! like a client: a hostile or broken one must not be able to abort this node.
//!
//! This module owns: walking a request frame (header + body) or a response frame (header + body
//! of the API and version the request was sent at) exactly as the crate's decoder would, using
//! the per-version layouts in `guard_schemas/` (generated from the crate's own request and
//! response decoders by `scripts/gen-guard-schemas`; never edit it by hand), without allocating.
//!
//! Invariants, for `check_request(frame) == Ok(())` and `check_response(key, version, frame) ==
//! Ok(())` alike:
//! * every array count, string / bytes length and tagged-field size in the frame was checked
//!   against the bytes remaining, and every element was walked, so the crate's decoder sees the
//!   same structure the walker saw (known tagged fields must fill their declared size exactly,
//!   varints are at most 5 bytes, tags the decoder rejects at this version are rejected here);
//! * decoding this frame with kafka-protocol from a `bytes::Bytes` (strings and bytes, such as a
//!   Fetch response's records, are then zero-copy slices) allocates O(frame.len()): the walker
//!   adds up what the decoder will allocate (`count * size_of::<Elem>()` per `Vec`, B-tree nodes
//!   for unknown tagged fields, the root struct) and refuses frames whose estimate exceeds
//!   `ALLOC_FACTOR * frame.len() + ALLOC_SLACK`;
//! * walking is O(frame.len()) time and never panics, whatever the input.
//!
//! Versions the crate cannot decode are `UnsupportedVersion` (the crate's `ApiKey::valid_versions`
//! overstates InitProducerId v6, OffsetCommit v10 and OffsetFetch v10 for requests: their request
//! decoders stop at 5/9/9; their response decoders do reach 6/10/10). A response's header version
//! is the API's (`ApiKey::response_header_version`: v0 for ApiVersions whatever its version,
//! KIP-511).
//! Trailing bytes after the body are allowed (the crate ignores them too).

use super::guard_schemas::{request_schema, response_schema, REQUEST_HEADER, RESPONSE_HEADER};
use kafka_protocol::messages::ApiKey;
use std::fmt;

/// Decoding an accepted frame allocates at most about `ALLOC_FACTOR * len + ALLOC_SLACK` bytes.
pub const ALLOC_FACTOR: u64 = 32;
/// Allocation allowance independent of the frame size (covers small, element-dense frames).
pub const ALLOC_SLACK: u64 = 64 * 1024;
/// Estimated heap cost of a `BTreeMap<i32, Bytes>` of unknown tagged fields: its first leaf node
/// (408 bytes), then each further entry (measured: 56-70 bytes with 20k tags in any order).
const BTREE_FIRST: u64 = 512;
const BTREE_EACH: u64 = 96;

/// Why a frame was refused before decoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardError {
    /// The frame ends inside a field.
    Truncated,
    /// A count or length read from the wire cannot fit in the bytes remaining.
    LengthTooLarge {
        field: &'static str,
        len: u64,
        remaining: usize,
    },
    /// Decoding would allocate more than the budget for a frame of this size.
    AllocationBudget {
        estimate: u64,
        limit: u64,
    },
    UnknownApiKey(i16),
    UnsupportedVersion {
        api_key: i16,
        version: i16,
    },
    /// Structurally invalid (negative length, over-long varint, misplaced tagged field, ...).
    Malformed(&'static str),
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardError::Truncated => write!(f, "frame truncated"),
            GuardError::LengthTooLarge { field, len, remaining } => {
                write!(f, "length {len} of `{field}` exceeds the {remaining} bytes remaining")
            }
            GuardError::AllocationBudget { estimate, limit } => {
                write!(f, "decoding would allocate ~{estimate} bytes (limit {limit})")
            }
            GuardError::UnknownApiKey(k) => write!(f, "unknown api key {k}"),
            GuardError::UnsupportedVersion { api_key, version } => {
                write!(f, "unsupported version {version} of api key {api_key}")
            }
            GuardError::Malformed(why) => write!(f, "malformed frame: {why}"),
        }
    }
}

impl std::error::Error for GuardError {}

// ---- Schema types (instances live in guard_schemas/) ----------------------------------------

/// Wire kind of one field, as the crate decodes it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// Int8/16/32/64, UInt16, Float64, Boolean, Uuid: this many bytes.
    Fixed(u8),
    String,
    CompactString,
    Bytes,
    CompactBytes,
    Struct(&'static Schema),
    OptionStruct(&'static Schema),
    /// Element kind and `size_of` the decoded element (for the allocation estimate).
    Array(Elem, usize),
    CompactArray(Elem, usize),
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Elem {
    Fixed(u8),
    String,
    CompactString,
    Struct(&'static Schema),
}

#[derive(Debug)]
pub(crate) struct Field {
    pub name: &'static str,
    pub min_version: i16,
    pub max_version: i16,
    pub kind: Kind,
}

#[derive(Debug)]
pub(crate) struct Schema {
    #[allow(dead_code)] // read by tests and Debug output
    pub name: &'static str,
    pub min_version: i16,
    pub max_version: i16,
    /// Versions `>= flexible_min` end with a tagged-field section (`i16::MAX`: never).
    pub flexible_min: i16,
    pub rust_size: usize,
    pub fields: &'static [Field],
    /// Tagged fields the decoder knows, by tag; a known tag outside its versions makes it bail.
    pub tagged: &'static [(u32, Field)],
}

impl Elem {
    fn kind(self) -> Kind {
        match self {
            Elem::Fixed(n) => Kind::Fixed(n),
            Elem::String => Kind::String,
            Elem::CompactString => Kind::CompactString,
            Elem::Struct(s) => Kind::Struct(s),
        }
    }
}

impl Field {
    fn applies(&self, v: i16) -> bool {
        self.min_version <= v && v <= self.max_version
    }
}

/// Check a request frame (the bytes after the 4-byte length prefix) before decoding it.
pub fn check_request(frame: &[u8]) -> Result<(), GuardError> {
    estimate_request(frame).map(|_| ())
}

/// `check_request`, returning the estimated bytes the crate's decoder will allocate.
pub(crate) fn estimate_request(frame: &[u8]) -> Result<u64, GuardError> {
    if frame.len() < 4 {
        return Err(GuardError::Truncated);
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let (schema, key) = match (request_schema(api_key), ApiKey::try_from(api_key)) {
        (Some(s), Ok(k)) => (s, k),
        _ => return Err(GuardError::UnknownApiKey(api_key)),
    };
    if version < schema.min_version || version > schema.max_version {
        return Err(GuardError::UnsupportedVersion { api_key, version });
    }
    walk_frame(frame, REQUEST_HEADER, key.request_header_version(version), schema, version)
}

/// Check a response frame (the bytes after the 4-byte length prefix) before decoding it: the
/// answer to a request of `api_key` sent at `version` (a response does not name its API or
/// version; the exchange it answers does).
pub fn check_response(api_key: i16, version: i16, frame: &[u8]) -> Result<(), GuardError> {
    estimate_response(api_key, version, frame).map(|_| ())
}

/// `check_response`, returning the estimated bytes the crate's decoder will allocate.
pub(crate) fn estimate_response(api_key: i16, version: i16, frame: &[u8]) -> Result<u64, GuardError> {
    let (schema, key) = match (response_schema(api_key), ApiKey::try_from(api_key)) {
        (Some(s), Ok(k)) => (s, k),
        _ => return Err(GuardError::UnknownApiKey(api_key)),
    };
    if version < schema.min_version || version > schema.max_version {
        return Err(GuardError::UnsupportedVersion { api_key, version });
    }
    walk_frame(frame, RESPONSE_HEADER, key.response_header_version(version), schema, version)
}

/// Walks `header` at `header_version` then `body` at `version`, within the allocation budget of
/// a frame of this size; the estimated allocation.
fn walk_frame(
    frame: &[u8],
    header: &'static Schema,
    header_version: i16,
    body: &'static Schema,
    version: i16,
) -> Result<u64, GuardError> {
    let limit = ALLOC_FACTOR * frame.len() as u64 + ALLOC_SLACK;
    let mut w = Walker { buf: frame, pos: 0, end: frame.len(), version: header_version, cost: 0, limit };
    w.charge(header.rust_size as u64)?;
    w.walk_struct(header)?;
    w.version = version;
    w.charge(body.rust_size as u64)?;
    w.walk_struct(body)?;
    Ok(w.cost)
}

struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    /// End of the current window (the frame, or a known tagged field's declared size).
    end: usize,
    version: i16,
    cost: u64,
    limit: u64,
}

impl Walker<'_> {
    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&[u8], GuardError> {
        if n > self.remaining() {
            return Err(GuardError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], GuardError> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }

    /// Unsigned varint of at most 5 bytes whose value fits in 32 bits (the crate reads at most
    /// 5 bytes and silently drops excess bits; such encodings are refused here).
    fn uvarint(&mut self) -> Result<u32, GuardError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = self.take(1)?[0];
            if i == 4 && b > 0x0f {
                return Err(GuardError::Malformed("varint longer than 32 bits"));
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        unreachable!("the fifth byte is at most 0x0f")
    }

    fn charge(&mut self, bytes: u64) -> Result<(), GuardError> {
        self.cost = self.cost.saturating_add(bytes);
        if self.cost > self.limit {
            return Err(GuardError::AllocationBudget { estimate: self.cost, limit: self.limit });
        }
        Ok(())
    }

    fn check_len(&self, field: &'static str, len: u64) -> Result<usize, GuardError> {
        if len > self.remaining() as u64 {
            return Err(GuardError::LengthTooLarge { field, len, remaining: self.remaining() });
        }
        Ok(len as usize)
    }

    fn walk_struct(&mut self, s: &'static Schema) -> Result<(), GuardError> {
        let v = self.version;
        if v < s.min_version || v > s.max_version {
            return Err(GuardError::Malformed("nested struct at a version it does not support"));
        }
        for f in s.fields.iter().filter(|f| f.applies(v)) {
            self.walk_kind(f.name, f.kind)?;
        }
        if v >= s.flexible_min {
            self.walk_tagged(s)?;
        }
        Ok(())
    }

    fn walk_tagged(&mut self, s: &'static Schema) -> Result<(), GuardError> {
        let n = self.uvarint()? as u64;
        // Each tagged field takes at least two bytes (tag and size).
        self.check_len("tagged fields", n.saturating_mul(2))?;
        let mut unknown = 0u64;
        for _ in 0..n {
            let tag = self.uvarint()?;
            let size = self.uvarint()?;
            let size = self.check_len("tagged field", u64::from(size))?;
            let mut known = s.tagged.iter().filter(|t| t.0 == tag).map(|t| &t.1).peekable();
            if known.peek().is_none() {
                // Unknown: the decoder keeps `size` bytes (zero-copy) in a BTreeMap.
                self.charge(if unknown == 0 { BTREE_FIRST } else { BTREE_EACH })?;
                unknown += 1;
                self.pos += size;
                continue;
            }
            let Some(t) = known.find(|t| t.applies(self.version)) else {
                return Err(GuardError::Malformed("tagged field not valid at this version"));
            };
            // The decoder reads a known field from the stream, ignoring `size`: insist they agree
            // so that it resumes where this walk does.
            let outer_end = self.end;
            self.end = self.pos + size;
            self.walk_kind(t.name, t.kind)?;
            if self.pos != self.end {
                return Err(GuardError::Malformed("tagged field size does not match its content"));
            }
            self.end = outer_end;
        }
        Ok(())
    }

    fn walk_kind(&mut self, name: &'static str, kind: Kind) -> Result<(), GuardError> {
        match kind {
            Kind::Fixed(n) => {
                self.take(n as usize)?;
            }
            Kind::String | Kind::Bytes | Kind::CompactString | Kind::CompactBytes => {
                if let Some(n) = self.length(kind)? {
                    let n = self.check_len(name, n)?;
                    self.take(n)?;
                }
            }
            Kind::Struct(s) => self.walk_struct(s)?,
            Kind::OptionStruct(s) => {
                if self.bytes::<1>()? == [1] {
                    self.walk_struct(s)?;
                }
            }
            Kind::Array(elem, size) | Kind::CompactArray(elem, size) => {
                if let Some(n) = self.length(kind)? {
                    self.walk_array(name, elem, size, n)?;
                }
            }
        }
        Ok(())
    }

    /// The length prefix of a string, bytes or array field; `None` for null.
    fn length(&mut self, kind: Kind) -> Result<Option<u64>, GuardError> {
        let n = match kind {
            Kind::String => i32::from(i16::from_be_bytes(self.bytes()?)),
            Kind::Bytes | Kind::Array(..) => i32::from_be_bytes(self.bytes()?),
            _ => return Ok(self.uvarint()?.checked_sub(1).map(u64::from)),
        };
        match n {
            -1 => Ok(None),
            n if n < -1 => Err(GuardError::Malformed("negative length")),
            n => Ok(Some(n as u64)),
        }
    }

    fn walk_array(&mut self, name: &'static str, elem: Elem, size: usize, n: u64) -> Result<(), GuardError> {
        // Refuse before walking: every element needs at least `min` bytes (and at least one).
        let min = elem_min_size(elem, self.version).max(1);
        self.check_len(name, n.saturating_mul(min))?;
        // The decoder calls `Vec::with_capacity(n)` before reading the first element.
        self.charge(n.saturating_mul(size as u64))?;
        for _ in 0..n {
            self.walk_kind(name, elem.kind())?;
        }
        Ok(())
    }
}

fn elem_min_size(elem: Elem, v: i16) -> u64 {
    match elem {
        Elem::Fixed(k) => k as u64,
        Elem::String => 2,
        Elem::CompactString => 1,
        Elem::Struct(s) => struct_min_size(s, v),
    }
}

/// Fewest bytes an encoding of `s` at version `v` can take (schemas are acyclic: the generator
/// checks it, so this recursion is bounded by the schema depth).
fn struct_min_size(s: &Schema, v: i16) -> u64 {
    let fields: u64 = s
        .fields
        .iter()
        .filter(|f| f.applies(v))
        .map(|f| match f.kind {
            Kind::Fixed(n) => n as u64,
            Kind::String => 2,
            Kind::Bytes | Kind::Array(..) => 4,
            Kind::CompactString | Kind::CompactBytes | Kind::CompactArray(..) | Kind::OptionStruct(_) => 1,
            Kind::Struct(inner) => struct_min_size(inner, v),
        })
        .sum();
    fields + u64::from(v >= s.flexible_min)
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
