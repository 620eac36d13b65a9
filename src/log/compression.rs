//! Batch compression codecs: bounded, streaming decompression for validation and index scans,
//! and whole-batch recompression when a topic's `compression.type` differs from the producer's.
//!
//! Owns: mapping the attribute codec id to a [`Codec`], a streaming reader per codec (gzip,
//! snappy in xerial framing or raw, LZ4 frame, zstd) whose working memory is bounded regardless
//! of what the compressed bytes claim, and [`recompress`] at the topic's
//! `compression.{gzip,lz4,zstd}.level` (KIP-390).
//! Invariants: decompression never allocates more than a small fixed buffer plus one codec
//! block (snappy blocks are capped at `MAX_SNAPPY_BLOCK_BYTES`, zstd windows at
//! 2^`ZSTD_WINDOW_LOG_MAX`); callers bound total output (see `batch::MAX_DECOMPRESSED_BYTES`).

use std::io::{self, BufRead, Read, Write};

use bytes::{BufMut, BytesMut};
use kafka_protocol::compression::Compressor;
use kafka_protocol::records::{Compression, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions};

use crate::config::{CompressionType, TopicConfig};
use crate::error::LogError;

/// Decompressed bytes a stream decoder produces per call (see `decompressing_reader`).
const DECODED_BUFFER_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

const MAX_SNAPPY_BLOCK_BYTES: usize = 4 << 20;
const ZSTD_WINDOW_LOG_MAX: u32 = 24;
const XERIAL_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

impl Codec {
    pub fn from_id(id: i16) -> Result<Codec, LogError> {
        Ok(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            other => return Err(LogError::UnsupportedCompression(other)),
        })
    }

    /// The codec a topic's `compression.type` demands, or `None` for `producer`.
    pub fn for_topic(config: CompressionType) -> Option<Codec> {
        match config {
            CompressionType::Producer => None,
            CompressionType::Uncompressed => Some(Codec::None),
            CompressionType::Gzip => Some(Codec::Gzip),
            CompressionType::Snappy => Some(Codec::Snappy),
            CompressionType::Lz4 => Some(Codec::Lz4),
            CompressionType::Zstd => Some(Codec::Zstd),
        }
    }

    pub(crate) fn to_protocol(self) -> Compression {
        match self {
            Codec::None => Compression::None,
            Codec::Gzip => Compression::Gzip,
            Codec::Snappy => Compression::Snappy,
            Codec::Lz4 => Compression::Lz4,
            Codec::Zstd => Compression::Zstd,
        }
    }
}

/// A reader yielding the decompressed record bytes of a batch body (the bytes after the header).
/// Buffered (`BufRead`), so the record walker can look at bytes where they are.
pub fn decompressing_reader<'a>(codec: Codec, body: &'a [u8]) -> Result<Box<dyn BufRead + 'a>, LogError> {
    // The record walker reads a varint at a time: stream decoders that would run their codec
    // for every such read sit behind a buffer, so each codec call yields up to 64 KiB.
    let buffered = |inner: Box<dyn Read + 'a>| -> Box<dyn BufRead + 'a> {
        Box::new(io::BufReader::with_capacity(DECODED_BUFFER_BYTES, inner))
    };
    Ok(match codec {
        Codec::None => Box::new(body),
        Codec::Gzip => buffered(Box::new(flate2::read::GzDecoder::new(body))),
        // liblz4's frame decoder (also what kafka-protocol compresses with), without its
        // checksums (see `lz4_frame`): lz4_flex's decoder zero-fills a whole maximum-size block
        // (4 MiB in frames from Go's pierrec/lz4 defaults) for every block, 7x the CPU.
        Codec::Lz4 => Box::new(
            crate::log::lz4_frame::Lz4FrameReader::new(body).map_err(|e| LogError::CorruptMessage(e.to_string()))?,
        ),
        Codec::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(body)
                .map_err(|e| LogError::CorruptMessage(format!("zstd: {e}")))?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(|e| LogError::CorruptMessage(format!("zstd: {e}")))?;
            buffered(Box::new(decoder))
        }
        Codec::Snappy => {
            if body.len() >= XERIAL_HEADER_BYTES && &body[..XERIAL_MAGIC.len()] == XERIAL_MAGIC {
                Box::new(XerialSnappyReader { rest: &body[XERIAL_HEADER_BYTES..], block: Vec::new(), at: 0 })
            } else {
                Box::new(io::Cursor::new(snappy_block(body)?))
            }
        }
    })
}

/// Decompresses one raw snappy block after checking its claimed length against the cap.
fn snappy_block(block: &[u8]) -> Result<Vec<u8>, LogError> {
    let len = snap::raw::decompress_len(block).map_err(|e| LogError::CorruptMessage(format!("snappy: {e}")))?;
    if len > MAX_SNAPPY_BLOCK_BYTES {
        return Err(LogError::CorruptMessage(format!("snappy block of {len} bytes exceeds the cap")));
    }
    snap::raw::Decoder::new().decompress_vec(block).map_err(|e| LogError::CorruptMessage(format!("snappy: {e}")))
}

/// snappy-java's stream format: 16-byte header, then blocks of `[u32 length][raw snappy]`.
struct XerialSnappyReader<'a> {
    rest: &'a [u8],
    block: Vec<u8>,
    at: usize,
}

impl BufRead for XerialSnappyReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.block.len() {
            if self.rest.is_empty() {
                return Ok(&[]);
            }
            if self.rest.len() < 4 {
                return Err(io::Error::other("truncated snappy block length"));
            }
            let len = u32::from_be_bytes(self.rest[..4].try_into().expect("4 bytes")) as usize;
            if len > self.rest.len() - 4 {
                return Err(io::Error::other("truncated snappy block"));
            }
            let (block, rest) = self.rest[4..].split_at(len);
            self.rest = rest;
            self.block = snappy_block(block).map_err(|e| io::Error::other(e.to_string()))?;
            self.at = 0;
        }
        Ok(&self.block[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.block.len());
    }
}

impl Read for XerialSnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        read_buffered(self, buf)
    }
}

/// `Read::read` for a reader whose bytes come from its own `BufRead` buffer.
pub(crate) fn read_buffered(reader: &mut impl BufRead, buf: &mut [u8]) -> io::Result<usize> {
    let available = reader.fill_buf()?;
    let n = buf.len().min(available.len());
    buf[..n].copy_from_slice(&available[..n]);
    reader.consume(n);
    Ok(n)
}

/// Re-encodes a validated batch with `codec`, keeping offsets deltas, timestamps, keys, values,
/// headers and producer fields, compressing at the topic's level for that codec. Only called
/// after `batch::validate_produce` accepted the batch, so the kafka-protocol decoder's pre-sized
/// allocations are bounded by the walked contents.
pub fn recompress(batch: &[u8], codec: Codec, config: &TopicConfig) -> Result<Vec<u8>, LogError> {
    let mut input = bytes::Bytes::copy_from_slice(batch);
    let set = RecordBatchDecoder::decode(&mut input)
        .map_err(|e| LogError::CorruptMessage(format!("cannot decode batch for recompression: {e}")))?;
    let mut out = BytesMut::with_capacity(batch.len());
    let options = RecordEncodeOptions { version: 2, compression: codec.to_protocol() };
    let compressor = |records: &mut BytesMut, out: &mut BytesMut, _: Compression| compress(records, out, codec, config);
    RecordBatchEncoder::encode_with_custom_compression(&mut out, set.records.iter(), &options, Some(compressor))
        .map_err(|e| LogError::CorruptMessage(format!("cannot re-encode batch: {e}")))?;
    Ok(out.to_vec())
}

/// Compresses a batch's encoded records for `codec`: gzip, LZ4 frames and zstd at the topic's
/// levels (gzip -1 is zlib's default, 6; the LZ4 level goes to liblz4, whose high-compression
/// levels stop at 12), snappy and none as kafka-protocol writes them.
fn compress(records: &[u8], out: &mut BytesMut, codec: Codec, config: &TopicConfig) -> anyhow::Result<()> {
    let copy_in = |tmp: &mut BytesMut| {
        tmp.extend_from_slice(records);
        Ok(())
    };
    match codec {
        Codec::None => kafka_protocol::compression::None::compress(out, copy_in),
        Codec::Snappy => kafka_protocol::compression::Snappy::compress(out, copy_in),
        Codec::Gzip => {
            let level =
                u32::try_from(config.gzip_level).map_or(flate2::Compression::default(), flate2::Compression::new);
            let mut encoder = flate2::write::GzEncoder::new(out.writer(), level);
            encoder.write_all(records)?;
            encoder.finish()?;
            Ok(())
        }
        Codec::Lz4 => {
            // Independent 64 KiB blocks, as Kafka's own LZ4 writer uses.
            let mut encoder = lz4::EncoderBuilder::new()
                .level(config.lz4_level.max(1) as u32)
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .build(out.writer())?;
            encoder.write_all(records)?;
            let (_, result) = encoder.finish();
            Ok(result?)
        }
        Codec::Zstd => Ok(zstd::stream::copy_encode(records, out.writer(), config.zstd_level)?),
    }
}
