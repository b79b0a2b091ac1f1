//! The fixed 61-byte header of a record batch (magic v2), at the byte offsets Kafka uses.

use crate::crc::crc32c;
use crate::error::{CodecError, CodecResult};

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
/// Size of the batch header; records start here.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// BaseOffset + Length: the part of the header not counted by Length.
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC_V2: i8 = 2;

pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;
pub const ATTR_DELETE_HORIZON: i16 = 0x40;

/// Upper bound on one batch; Kafka's own limit for a single message set is an int32.
pub const MAX_BATCH_SIZE: usize = i32::MAX as usize;

#[inline]
pub(crate) fn read_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
pub(crate) fn read_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
pub(crate) fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
#[inline]
pub(crate) fn read_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// Compression codec in bits 0-2 of the attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    pub fn from_attributes(attributes: i16, offset: usize) -> CodecResult<Self> {
        match attributes & ATTR_COMPRESSION_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(CodecError::invalid(
                "attributes.compression",
                offset + ATTRIBUTES_OFFSET,
                format!("unknown compression codec id {other}"),
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" | "uncompressed" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// The decoded fixed header of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Bytes after the Length field; the whole batch is `LOG_OVERHEAD + length` bytes.
    pub length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    /// Parse the header of the batch starting at `buf[0]`. `at` is the position of `buf[0]` in
    /// the caller's larger input, used only for error messages. Checks magic and lengths, not CRC.
    pub fn parse(buf: &[u8], at: usize) -> CodecResult<Self> {
        if buf.len() < LOG_OVERHEAD {
            return Err(CodecError::Truncated {
                field: "batch.length",
                offset: at,
                needed: LOG_OVERHEAD,
                available: buf.len(),
            });
        }
        let length = read_i32(buf, LENGTH_OFFSET);
        if (length as i64) < (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i64 {
            return Err(CodecError::invalid(
                "batch.length",
                at + LENGTH_OFFSET,
                format!(
                    "{length} is smaller than the minimum batch size {}",
                    RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
                ),
            ));
        }
        if buf.len() < RECORD_BATCH_OVERHEAD {
            return Err(CodecError::Truncated {
                field: "batch.header",
                offset: at,
                needed: RECORD_BATCH_OVERHEAD,
                available: buf.len(),
            });
        }
        let magic = buf[MAGIC_OFFSET] as i8;
        if magic != MAGIC_V2 {
            return Err(CodecError::invalid(
                "batch.magic",
                at + MAGIC_OFFSET,
                format!("unsupported magic {magic}, only magic 2 (record batch v2) is supported"),
            ));
        }
        let h = BatchHeader {
            base_offset: read_i64(buf, BASE_OFFSET_OFFSET),
            length,
            partition_leader_epoch: read_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic,
            crc: read_u32(buf, CRC_OFFSET),
            attributes: read_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: read_i32(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: read_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: read_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: read_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: read_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: read_i32(buf, BASE_SEQUENCE_OFFSET),
            records_count: read_i32(buf, RECORDS_COUNT_OFFSET),
        };
        if h.last_offset_delta < 0 {
            return Err(CodecError::invalid(
                "batch.last_offset_delta",
                at + LAST_OFFSET_DELTA_OFFSET,
                format!("negative last offset delta {}", h.last_offset_delta),
            ));
        }
        Ok(h)
    }

    /// Total size in bytes of this batch, header included.
    #[inline]
    pub fn size(&self) -> usize {
        LOG_OVERHEAD + self.length as usize
    }
    #[inline]
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    #[inline]
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn compression(&self, at: usize) -> CodecResult<Compression> {
        Compression::from_attributes(self.attributes, at)
    }
    #[inline]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    /// KIP-534: the log cleaner stored a delete horizon in BaseTimestamp.
    #[inline]
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }
}

/// Verify the CRC-32C of one whole batch (`batch.len() == header.size()`).
pub fn verify_crc(batch: &[u8], header: &BatchHeader, at: usize) -> CodecResult<()> {
    debug_assert_eq!(batch.len(), header.size());
    let computed = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    if computed != header.crc {
        return Err(CodecError::CrcMismatch {
            offset: at,
            stored: header.crc,
            computed,
        });
    }
    Ok(())
}

/// Parse and fully validate the header of the batch at the start of `buf`: magic, lengths,
/// CRC and `RecordsCount == LastOffsetDelta + 1` (the check Kafka's broker applies to
/// produce requests). Returns the header; the batch is `buf[..header.size()]`.
pub fn validate_batch(buf: &[u8], at: usize) -> CodecResult<BatchHeader> {
    let h = BatchHeader::parse(buf, at)?;
    let size = h.size();
    if buf.len() < size {
        return Err(CodecError::Truncated {
            field: "batch.records",
            offset: at,
            needed: size,
            available: buf.len(),
        });
    }
    verify_crc(&buf[..size], &h, at)?;
    check_counts(&h, at)?;
    Ok(h)
}

/// The checks of [`validate_batch`] after the CRC: `RecordsCount == LastOffsetDelta + 1 > 0` and
/// a known compression codec.
pub fn check_counts(h: &BatchHeader, at: usize) -> CodecResult<()> {
    if h.records_count <= 0 {
        return Err(CodecError::invalid(
            "batch.records_count",
            at + RECORDS_COUNT_OFFSET,
            format!("records count {} must be positive", h.records_count),
        ));
    }
    if h.records_count as i64 != h.last_offset_delta as i64 + 1 {
        return Err(CodecError::invalid(
            "batch.records_count",
            at + RECORDS_COUNT_OFFSET,
            format!(
                "records count {} != last offset delta {} + 1",
                h.records_count, h.last_offset_delta
            ),
        ));
    }
    h.compression(at)?;
    Ok(())
}

/// Validate a batch as stored in a log: like `validate_batch`, but accepting what log compaction
/// leaves (Kafka's `ensureValid` on a compacted log): fewer records than LastOffsetDelta + 1,
/// down to none (an empty batch kept for its producer state).
pub fn validate_stored_batch(buf: &[u8], at: usize) -> CodecResult<BatchHeader> {
    let h = BatchHeader::parse(buf, at)?;
    let size = h.size();
    if buf.len() < size {
        return Err(CodecError::Truncated { field: "batch.records", offset: at, needed: size, available: buf.len() });
    }
    verify_crc(&buf[..size], &h, at)?;
    if h.records_count < 0 || h.records_count as i64 > h.last_offset_delta as i64 + 1 {
        return Err(CodecError::invalid(
            "batch.records_count",
            at + RECORDS_COUNT_OFFSET,
            format!("records count {} outside [0, last offset delta {} + 1]", h.records_count, h.last_offset_delta),
        ));
    }
    h.compression(at)?;
    Ok(h)
}

/// Iterate the batches of a buffer holding whole batches back to back (a produce request's
/// records, a fetch response's records, a `.log` segment). Yields `(position, header)`;
/// stops at the first error. Headers only: no CRC check (use `validate_batch` for that).
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    failed: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        BatchIter { buf, pos: 0, failed: false }
    }
    /// Position just past the last batch yielded so far.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = CodecResult<(usize, BatchHeader)>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        match BatchHeader::parse(rest, self.pos) {
            Ok(h) if h.size() <= rest.len() => {
                let at = self.pos;
                self.pos += h.size();
                Some(Ok((at, h)))
            }
            Ok(h) => {
                self.failed = true;
                Some(Err(CodecError::Truncated {
                    field: "batch.records",
                    offset: self.pos,
                    needed: h.size(),
                    available: rest.len(),
                }))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

/// Rewrite the broker-owned fields of a batch in place. Both lie outside the CRC, so the
/// CRC stays valid (this is why Kafka placed them there).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Switch a batch to LogAppendTime: set the timestamp-type bit and MaxTimestamp, then
/// recompute the CRC (both fields are inside it).
pub fn set_log_append_time(batch: &mut [u8], timestamp_ms: i64) {
    let attrs = read_i16(batch, ATTRIBUTES_OFFSET) | ATTR_TIMESTAMP_TYPE;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&timestamp_ms.to_be_bytes());
    let crc = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Set the producer id, epoch and base sequence (idempotent/transactional producers assign
/// them when a batch is sent) and recompute the CRC (they are inside it).
pub fn set_producer_fields(batch: &mut [u8], producer_id: i64, producer_epoch: i16, base_sequence: i32) {
    batch[PRODUCER_ID_OFFSET..PRODUCER_ID_OFFSET + 8].copy_from_slice(&producer_id.to_be_bytes());
    batch[PRODUCER_EPOCH_OFFSET..PRODUCER_EPOCH_OFFSET + 2]
        .copy_from_slice(&producer_epoch.to_be_bytes());
    batch[BASE_SEQUENCE_OFFSET..BASE_SEQUENCE_OFFSET + 4].copy_from_slice(&base_sequence.to_be_bytes());
    let crc = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}
