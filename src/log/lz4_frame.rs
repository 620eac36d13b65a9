//! LZ4 frame decoding for batch validation: liblz4's frame decoder (through `lz4-sys`, the C
//! library the `lz4` crate and kafka-protocol use) run over a batch body held in memory, with
//! the frame's xxHash32 checksums not computed.
//!
//! Why not verify them: the batch's CRC-32C, checked before any decompression, already covers
//! every compressed byte, and Apache Kafka 4.1's own LZ4 reader does not verify the content
//! checksum either (it skips the trailer), so a frame it accepts is accepted here. Computing it
//! cost as much CPU as the decompression itself (broker-bound lz4 produce, perf). Block
//! checksums, which Kafka does check, are off in every client's LZ4 writer.
//!
//! Owns: one decompression context per reader (freed on drop) and a fixed 64 KiB output buffer.
//! Invariants: liblz4 is only ever given `src`/`out` pointers with their true lengths, so
//! malformed frames end in an error from liblz4, never in a read or write out of bounds; memory
//! is the output buffer plus liblz4's context (which holds at most one block, 4 MiB).

use std::ffi::CStr;
use std::io::{self, BufRead, Read};

use lz4_sys::{
    LZ4FDecompressOptions, LZ4FDecompressionContext, LZ4F_createDecompressionContext, LZ4F_decompress,
    LZ4F_freeDecompressionContext, LZ4F_getErrorName, LZ4F_isError, LZ4F_VERSION,
};

/// Decoded bytes per `LZ4F_decompress` call.
const OUT_BYTES: usize = 64 * 1024;

/// Reads the decompressed content of one LZ4 frame in `src`.
pub struct Lz4FrameReader<'a> {
    ctx: LZ4FDecompressionContext,
    src: &'a [u8],
    out: Vec<u8>,
    at: usize,
    /// The frame's end mark was decoded: nothing more comes.
    finished: bool,
}

impl<'a> Lz4FrameReader<'a> {
    pub fn new(src: &'a [u8]) -> io::Result<Lz4FrameReader<'a>> {
        let mut ctx = LZ4FDecompressionContext(std::ptr::null_mut());
        // SAFETY: `ctx` is a valid out-parameter; on success liblz4 stores a context we own.
        check(unsafe { LZ4F_createDecompressionContext(&mut ctx, LZ4F_VERSION) })?;
        Ok(Lz4FrameReader { ctx, src, out: Vec::with_capacity(OUT_BYTES), at: 0, finished: false })
    }
}

impl Drop for Lz4FrameReader<'_> {
    fn drop(&mut self) {
        // SAFETY: the context was created in `new` and is freed exactly once, here.
        unsafe { LZ4F_freeDecompressionContext(LZ4FDecompressionContext(self.ctx.0)) };
    }
}

impl BufRead for Lz4FrameReader<'_> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.at == self.out.len() && !self.finished {
            // `reserved[0]` is liblz4's `skipChecksums` (lz4frame.h since 1.9.4; lz4-sys names
            // the three fields after `stableDst` "reserved").
            let options = LZ4FDecompressOptions { stable_dst: 0, reserved: [1, 0, 0] };
            let mut out_len = self.out.capacity();
            let mut src_len = self.src.len();
            // SAFETY: liblz4 writes at most `out_len` bytes to `out`'s spare capacity (which has
            // room for `capacity()` bytes) and reads at most `src_len` bytes from `src`; both
            // lengths are updated to what it used.
            let hint = unsafe {
                LZ4F_decompress(
                    LZ4FDecompressionContext(self.ctx.0),
                    self.out.as_mut_ptr(),
                    &mut out_len,
                    self.src.as_ptr(),
                    &mut src_len,
                    &options,
                )
            };
            check(hint)?;
            assert!(out_len <= self.out.capacity() && src_len <= self.src.len(), "liblz4 stays in bounds");
            // SAFETY: liblz4 initialised the first `out_len` bytes.
            unsafe { self.out.set_len(out_len) };
            self.at = 0;
            self.src = &self.src[src_len..];
            if hint == 0 {
                self.finished = true;
            } else if out_len == 0 && src_len == 0 {
                return Err(io::Error::other("lz4: frame ends early"));
            }
        }
        Ok(&self.out[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.out.len());
    }
}

impl Read for Lz4FrameReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        crate::log::compression::read_buffered(self, buf)
    }
}

/// A liblz4 result code as an error, if it is one.
fn check(code: usize) -> io::Result<usize> {
    // SAFETY: both functions take any code; the name is a static C string.
    if unsafe { LZ4F_isError(code) } != 0 {
        let name = unsafe { CStr::from_ptr(LZ4F_getErrorName(code)) };
        return Err(io::Error::other(format!("lz4: {}", name.to_string_lossy())));
    }
    Ok(code)
}
