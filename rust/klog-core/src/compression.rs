//! Compression codecs for the records section of a batch (the 61-byte header is never
//! compressed). Formats match what Apache Kafka's Java client writes and reads:
//!
//! * gzip: RFC 1952 members (several concatenated members are read as one stream, as Java's
//!   `GZIPInputStream` does);
//! * snappy: Java writes xerial-framed snappy (`0x82 "SNAPPY" 0`, version and compatible
//!   version int32s, then `[int32 length, raw snappy block]...`), librdkafka writes raw snappy;
//!   both are read, xerial is written;
//! * lz4: the LZ4 frame format, independent 64 KiB blocks like Kafka's `Lz4BlockOutputStream`;
//! * zstd: a standard zstd frame (level 3, Kafka's default `compression.zstd.level`).
//!
//! Decompression is bounded: the caller passes the largest decompressed size it accepts, so a
//! tiny "compression bomb" cannot make us allocate gigabytes.

use std::io::{Read, Write};

use crate::batch::Compression;
use crate::error::{CodecError, CodecResult};

/// Default bound on the decompressed size of one batch's records section. Kafka's own limits
/// (`message.max.bytes`, 1 MiB by default) apply to compressed bytes; this caps the expansion.
pub const DEFAULT_MAX_DECOMPRESSED_SIZE: usize = 256 * 1024 * 1024;

/// Magic that opens a xerial-framed snappy stream (Java's `SnappyOutputStream`).
pub const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// Magic (8) + version int32 + compatible-version int32.
pub const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_VERSION: i32 = 1;
const XERIAL_COMPATIBLE_VERSION: i32 = 1;
/// Uncompressed bytes per xerial block; Java's `SnappyOutputStream` default block size.
pub const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// Kafka's default `compression.gzip.level` is zlib's default (6).
const GZIP_LEVEL: u32 = 6;
/// Kafka's default `compression.zstd.level`.
const ZSTD_LEVEL: i32 = 3;

fn comp_err(
    codec: Compression,
    op: &'static str,
    offset: usize,
    reason: impl std::fmt::Display,
) -> CodecError {
    CodecError::Compression {
        codec: codec.name(),
        op,
        offset,
        reason: reason.to_string(),
    }
}

/// Compress `data` with `codec`, appending to `out`. `level` overrides the codec's default level
/// (gzip 1-9, zstd 1-22; ignored by snappy and lz4).
pub fn compress_into(
    codec: Compression,
    data: &[u8],
    level: Option<i32>,
    out: &mut Vec<u8>,
) -> CodecResult<()> {
    match codec {
        Compression::None => out.extend_from_slice(data),
        Compression::Gzip => {
            let lvl = level.map(|l| l.clamp(0, 9) as u32).unwrap_or(GZIP_LEVEL);
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(lvl));
            enc.write_all(data)
                .map_err(|e| comp_err(codec, "compression", 0, e))?;
            enc.finish()
                .map_err(|e| comp_err(codec, "compression", 0, e))?;
        }
        Compression::Snappy => {
            xerial_compress(data, out).map_err(|e| comp_err(codec, "compression", 0, e))?
        }
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            enc.write_all(data)
                .map_err(|e| comp_err(codec, "compression", 0, e))?;
            enc.finish()
                .map_err(|e| comp_err(codec, "compression", 0, e))?;
        }
        Compression::Zstd => {
            let lvl = level.unwrap_or(ZSTD_LEVEL);
            let compressed = zstd::bulk::compress(data, lvl)
                .map_err(|e| comp_err(codec, "compression", 0, e))?;
            out.extend_from_slice(&compressed);
        }
    }
    Ok(())
}

/// Compress `data` with `codec` into a new buffer.
pub fn compress(codec: Compression, data: &[u8]) -> CodecResult<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    compress_into(codec, data, None, &mut out)?;
    Ok(out)
}

fn xerial_compress(data: &[u8], out: &mut Vec<u8>) -> Result<(), snap::Error> {
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
    out.extend_from_slice(&XERIAL_COMPATIBLE_VERSION.to_be_bytes());
    let mut enc = snap::raw::Encoder::new();
    for chunk in data.chunks(XERIAL_BLOCK_SIZE) {
        let len_at = out.len();
        out.extend_from_slice(&[0u8; 4]);
        let start = out.len();
        out.resize(start + snap::raw::max_compress_len(chunk.len()), 0);
        let n = enc.compress(chunk, &mut out[start..])?;
        out.truncate(start + n);
        out[len_at..len_at + 4].copy_from_slice(&(n as i32).to_be_bytes());
    }
    Ok(())
}

/// Decompress a records section. `at` is the byte position of the batch in the caller's input
/// (for error messages); `limit` is the largest decompressed size accepted.
pub fn decompress(
    codec: Compression,
    data: &[u8],
    limit: usize,
    at: usize,
) -> CodecResult<Vec<u8>> {
    match codec {
        Compression::None => Ok(data.to_vec()),
        Compression::Gzip => read_bounded(
            codec,
            flate2::read::MultiGzDecoder::new(data),
            limit,
            at,
            data.len() * 4,
        ),
        Compression::Snappy => {
            if is_xerial(data) {
                xerial_decompress(data, limit, at)
            } else {
                snappy_raw_decompress(data, limit, at, Vec::new())
            }
        }
        Compression::Lz4 => read_bounded(
            codec,
            lz4_flex::frame::FrameDecoder::new(data),
            limit,
            at,
            data.len() * 4,
        ),
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(data)
                .map_err(|e| comp_err(codec, "decompression", at, e))?;
            read_bounded(codec, dec, limit, at, data.len() * 4)
        }
    }
}

/// Whether a snappy records section is xerial-framed (Java) rather than one raw block (librdkafka).
pub fn is_xerial(data: &[u8]) -> bool {
    data.len() >= XERIAL_HEADER_LEN && data[..8] == XERIAL_MAGIC
}

/// The reason of every error that stops decompression at its output bound; callers tell it from
/// corruption with [`is_over_limit_reason`].
fn over_limit_reason(limit: usize) -> String {
    format!("decompressed records exceed the limit of {limit} bytes (max_decompressed_size)")
}

/// Whether an error's text says the output bound was reached (not that the input is corrupt).
pub fn is_over_limit_reason(reason: &str) -> bool {
    reason.contains("decompressed records exceed the limit of")
}

fn too_large(codec: Compression, at: usize, limit: usize) -> CodecError {
    comp_err(codec, "decompression", at, over_limit_reason(limit))
}

fn read_bounded<R: Read>(
    codec: Compression,
    reader: R,
    limit: usize,
    at: usize,
    hint: usize,
) -> CodecResult<Vec<u8>> {
    let mut out = Vec::with_capacity(hint.min(limit).min(64 * 1024 * 1024));
    // Read one byte past the limit to tell "exactly at the limit" from "over it".
    let mut bounded = reader.take(limit as u64 + 1);
    bounded
        .read_to_end(&mut out)
        .map_err(|e| comp_err(codec, "decompression", at, e))?;
    if out.len() > limit {
        return Err(too_large(codec, at, limit));
    }
    Ok(out)
}

fn snappy_raw_decompress(
    block: &[u8],
    limit: usize,
    at: usize,
    mut out: Vec<u8>,
) -> CodecResult<Vec<u8>> {
    let codec = Compression::Snappy;
    let n =
        snap::raw::decompress_len(block).map_err(|e| comp_err(codec, "decompression", at, e))?;
    if n > limit.saturating_sub(out.len()) {
        return Err(too_large(codec, at, limit));
    }
    let start = out.len();
    out.resize(start + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| comp_err(codec, "decompression", at, e))?;
    out.truncate(start + written);
    Ok(out)
}

fn xerial_decompress(data: &[u8], limit: usize, at: usize) -> CodecResult<Vec<u8>> {
    read_bounded(
        Compression::Snappy,
        XerialReader::new(data, limit),
        limit,
        at,
        data.len() * 2,
    )
}

/// Reads a xerial-framed snappy stream (Java's `SnappyOutputStream` format, `data` starting with
/// its 16-byte header) one block at a time: memory is one block, and a block whose stated size
/// would take the output past `limit` is refused before it is inflated.
pub struct XerialReader<'a> {
    data: &'a [u8],
    pos: usize,
    block: Vec<u8>,
    block_pos: usize,
    limit: usize,
    produced: usize,
    decoder: snap::raw::Decoder,
}

impl<'a> XerialReader<'a> {
    pub fn new(data: &'a [u8], limit: usize) -> Self {
        XerialReader {
            data,
            pos: XERIAL_HEADER_LEN.min(data.len()),
            block: Vec::new(),
            block_pos: 0,
            limit,
            produced: 0,
            decoder: snap::raw::Decoder::new(),
        }
    }

    fn next_block(&mut self) -> std::io::Result<bool> {
        use std::io::{Error, ErrorKind};
        let (data, pos) = (self.data, self.pos);
        if pos >= data.len() {
            return Ok(false);
        }
        if data.len() - pos < 4 {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!("xerial block length truncated at byte {pos} of the compressed records"),
            ));
        }
        let len = i32::from_be_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
        if len < 0 || len as usize > data.len() - pos - 4 {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!(
                    "xerial block length {len} at byte {pos} exceeds the {} remaining bytes",
                    data.len() - pos - 4
                ),
            ));
        }
        let block = &data[pos + 4..pos + 4 + len as usize];
        self.pos = pos + 4 + len as usize;
        let n = snap::raw::decompress_len(block).map_err(|e| Error::new(ErrorKind::InvalidData, e))?;
        if n > self.limit - self.produced {
            return Err(Error::other(over_limit_reason(self.limit)));
        }
        self.block.resize(n, 0);
        let written = self
            .decoder
            .decompress(block, &mut self.block)
            .map_err(|e| Error::new(ErrorKind::InvalidData, e))?;
        self.block.truncate(written);
        self.block_pos = 0;
        self.produced += written;
        Ok(true)
    }
}

impl Read for XerialReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.block_pos == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.block.len() - self.block_pos);
        out[..n].copy_from_slice(&self.block[self.block_pos..self.block_pos + n]);
        self.block_pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn every_codec_round_trips_small_empty_and_multi_block_inputs() {
        for codec in ALL {
            for n in [
                0usize,
                1,
                100,
                XERIAL_BLOCK_SIZE,
                3 * XERIAL_BLOCK_SIZE + 17,
                200_000,
            ] {
                let data = sample(n);
                let c = compress(codec, &data).unwrap();
                let d = decompress(codec, &c, DEFAULT_MAX_DECOMPRESSED_SIZE, 0).unwrap();
                assert_eq!(d, data, "{codec:?} n={n}");
            }
        }
    }

    #[test]
    fn snappy_writes_xerial_framing_like_java() {
        let data = sample(XERIAL_BLOCK_SIZE + 5);
        let c = compress(Compression::Snappy, &data).unwrap();
        assert_eq!(&c[..8], &XERIAL_MAGIC);
        assert_eq!(&c[8..16], &[0, 0, 0, 1, 0, 0, 0, 1]);
        // Two blocks: 32 KiB and 5 bytes.
        let first = i32::from_be_bytes(c[16..20].try_into().unwrap()) as usize;
        let block = &c[20..20 + first];
        assert_eq!(snap::raw::decompress_len(block).unwrap(), XERIAL_BLOCK_SIZE);
    }

    #[test]
    fn snappy_reads_raw_blocks_as_librdkafka_writes_them() {
        let data = sample(10_000);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20, 0).unwrap(),
            data
        );
    }

    #[test]
    fn decompression_beyond_the_limit_is_refused_for_every_codec() {
        let zeros = vec![0u8; 1 << 20];
        for codec in &ALL[1..] {
            let c = compress(*codec, &zeros).unwrap();
            let err = decompress(*codec, &c, 1000, 77).unwrap_err();
            assert_eq!(err.offset(), 77);
            assert!(
                err.to_string().contains("limit of 1000 bytes"),
                "{codec:?}: {err}"
            );
            // Exactly at the limit is fine.
            assert_eq!(decompress(*codec, &c, 1 << 20, 0).unwrap().len(), 1 << 20);
        }
    }

    #[test]
    fn a_xerial_block_claiming_more_than_the_limit_is_refused_before_it_is_inflated() {
        let mut data = compress(Compression::Snappy, &sample(100)).unwrap();
        data.truncate(XERIAL_HEADER_LEN);
        // One block of 5 bytes whose snappy header claims 2^31 - 1 decompressed bytes.
        data.extend_from_slice(&5i32.to_be_bytes());
        data.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
        let mut reader = XerialReader::new(&data, 1 << 20);
        let err = reader.read(&mut [0u8; 16]).unwrap_err();
        assert!(err.to_string().contains("limit of 1048576 bytes"), "{err}");
        assert!(reader.block.capacity() < 1 << 20, "nothing was allocated for the claim");
    }

    #[test]
    fn garbage_input_is_an_error_not_a_panic() {
        let junk: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for codec in &ALL[1..] {
            assert!(decompress(*codec, &junk, 1 << 20, 5).is_err(), "{codec:?}");
        }
        let mut xerial = compress(Compression::Snappy, &sample(1000)).unwrap();
        xerial.truncate(xerial.len() - 3);
        assert!(decompress(Compression::Snappy, &xerial, 1 << 20, 0).is_err());
    }
}
