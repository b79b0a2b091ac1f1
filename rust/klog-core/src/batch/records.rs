//! Records inside a v2 batch: splitting a buffer into batches, opening (validating and
//! decompressing) one batch, parsing its records, and writing batches.
//!
//! Record layout (all varints zig-zag): length varint, attributes int8, timestampDelta varlong,
//! offsetDelta varint, keyLength varint (-1 = null) + key, valueLength varint (-1 = null) +
//! value, headerCount varint, then per header keyLength varint + key (UTF-8, never null),
//! valueLength varint (-1 = null) + value.

use std::borrow::Cow;

use super::header::*;
use crate::compression::{self, DEFAULT_MAX_DECOMPRESSED_SIZE};
use crate::crc::crc32c;
use crate::error::{CodecError, CodecResult};
use crate::varint::{
    read_varint, read_varlong, varint_size, varlong_size, write_varint, write_varlong,
};

/// Smallest possible record: a one-byte length and six one-byte fields (attributes,
/// timestamp delta, offset delta, key length, value length, header count).
pub const MIN_RECORD_SIZE: usize = 7;
/// Control record types (the int16 after the version in a control record's key).
pub const CONTROL_TYPE_ABORT: i16 = 0;
pub const CONTROL_TYPE_COMMIT: i16 = 1;
/// Size of a control record key: version int16 + type int16.
pub const CONTROL_KEY_SIZE: usize = 4;

/// How strictly to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Check each batch's CRC-32C.
    pub verify_crc: bool,
    /// A fetch response may end in a partial batch (the broker cut at max_bytes): when true it is
    /// ignored, as Kafka's consumers do; when false it is an error.
    pub allow_partial_trailing: bool,
    /// Accept batches rewritten by log compaction: fewer records than LastOffsetDelta + 1 (down
    /// to none) and gaps between offset deltas. When false, RecordsCount must equal
    /// LastOffsetDelta + 1 and offset deltas must be 0, 1, 2, ... as every producer writes them.
    pub allow_compacted: bool,
    /// Bound on one batch's decompressed records section.
    pub max_decompressed_size: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            verify_crc: true,
            allow_partial_trailing: false,
            allow_compacted: false,
            max_decompressed_size: DEFAULT_MAX_DECOMPRESSED_SIZE,
        }
    }
}

impl DecodeOptions {
    /// What a consumer reading a fetch response wants: partial trailing batch ignored,
    /// compacted batches accepted, CRC checked.
    pub fn fetch() -> Self {
        DecodeOptions {
            allow_partial_trailing: true,
            allow_compacted: true,
            ..Default::default()
        }
    }
}

/// Splits a buffer of back-to-back batches into one slice per batch, checking only the Length
/// field (like Java's `ByteBufferLogInputStream`); `open_batch` validates each slice.
pub struct BatchSlices<'a> {
    buf: &'a [u8],
    pos: usize,
    allow_partial_trailing: bool,
    done: bool,
}

impl<'a> BatchSlices<'a> {
    pub fn new(buf: &'a [u8], allow_partial_trailing: bool) -> Self {
        BatchSlices {
            buf,
            pos: 0,
            allow_partial_trailing,
            done: false,
        }
    }
    /// Position just past the last whole batch yielded.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchSlices<'a> {
    /// `(position of the batch in the buffer, the batch's bytes)`.
    type Item = CodecResult<(usize, &'a [u8])>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        let at = self.pos;
        let rest = &self.buf[at..];
        if rest.len() < LOG_OVERHEAD {
            self.done = true;
            if self.allow_partial_trailing {
                return None;
            }
            return Some(Err(CodecError::Truncated {
                field: "batch.length",
                offset: at,
                needed: LOG_OVERHEAD,
                available: rest.len(),
            }));
        }
        let length = read_i32(rest, LENGTH_OFFSET);
        let min = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
        if length < min {
            self.done = true;
            return Some(Err(CodecError::invalid(
                "batch.length",
                at + LENGTH_OFFSET,
                format!("{length} is smaller than the minimum batch size {min}"),
            )));
        }
        let size = LOG_OVERHEAD + length as usize;
        if rest.len() < size {
            self.done = true;
            if self.allow_partial_trailing {
                return None;
            }
            return Some(Err(CodecError::Truncated {
                field: "batch",
                offset: at,
                needed: size,
                available: rest.len(),
            }));
        }
        self.pos += size;
        Some(Ok((at, &rest[..size])))
    }
}

/// One validated batch whose records section is ready to parse (decompressed if needed).
#[derive(Debug, Clone)]
pub struct BatchView<'a> {
    /// Byte position of the batch in the caller's input.
    pub position: usize,
    pub header: BatchHeader,
    pub compression: Compression,
    /// The whole batch as it was in the input (compressed records and all).
    pub raw: &'a [u8],
    /// The records section, decompressed.
    pub records_data: Cow<'a, [u8]>,
    allow_compacted: bool,
}

impl<'a> BatchView<'a> {
    #[inline]
    pub fn is_control(&self) -> bool {
        self.header.is_control()
    }
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.header.is_transactional()
    }
    /// Timestamp of a record with the given delta: with LogAppendTime every record carries the
    /// batch's MaxTimestamp (as Java's `DefaultRecordBatch` reports it).
    #[inline]
    pub fn record_timestamp(&self, timestamp_delta: i64) -> i64 {
        if self.header.is_log_append_time() {
            self.header.max_timestamp
        } else {
            self.header.base_timestamp.wrapping_add(timestamp_delta)
        }
    }
    /// Iterate the records. Errors carry byte positions in the caller's input for uncompressed
    /// batches; for compressed ones they name the position inside the decompressed records.
    pub fn records(&self) -> RecordIter<'_> {
        RecordIter {
            data: &self.records_data,
            pos: 0,
            index: 0,
            count: self.header.records_count.max(0) as usize,
            last_offset_delta: self.header.last_offset_delta,
            prev_offset_delta: -1,
            strict_offsets: !self.allow_compacted,
            batch_at: self.position,
            compression: self.compression,
            finished: false,
        }
    }
    /// Parse and validate every record (and, for control batches, the control keys) without
    /// keeping anything. Returns the control type of a control batch.
    pub fn validate_records(&self) -> CodecResult<Option<i16>> {
        let mut control = None;
        for r in self.records() {
            let r = r?;
            if self.is_control() {
                let (_, t) = parse_control_key(r.key, self.position + RECORD_BATCH_OVERHEAD)?;
                control = Some(t);
            }
        }
        Ok(control)
    }
}

/// Validate one whole batch (`batch.len()` must equal its declared size, as `BatchSlices`
/// yields) and decompress its records. Checks magic, lengths, CRC (if asked), compression
/// codec, RecordsCount against LastOffsetDelta and against the bytes available.
pub fn open_batch<'a>(
    batch: &'a [u8],
    at: usize,
    opts: &DecodeOptions,
) -> CodecResult<BatchView<'a>> {
    let h = BatchHeader::parse(batch, at)?;
    if h.size() != batch.len() {
        return Err(CodecError::invalid(
            "batch.length",
            at + LENGTH_OFFSET,
            format!(
                "batch declares {} bytes but {} were given",
                h.size(),
                batch.len()
            ),
        ));
    }
    if opts.verify_crc {
        verify_crc(batch, &h, at)?;
    }
    let compression = h.compression(at)?;
    let lod = h.last_offset_delta as i64;
    if h.records_count < 0 {
        return Err(CodecError::invalid(
            "batch.records_count",
            at + RECORDS_COUNT_OFFSET,
            format!("negative records count {}", h.records_count),
        ));
    }
    if opts.allow_compacted {
        if h.records_count as i64 > lod + 1 {
            return Err(CodecError::invalid(
                "batch.records_count",
                at + RECORDS_COUNT_OFFSET,
                format!(
                    "records count {} > last offset delta {} + 1",
                    h.records_count, lod
                ),
            ));
        }
    } else if h.records_count as i64 != lod + 1 {
        return Err(CodecError::invalid(
            "batch.records_count",
            at + RECORDS_COUNT_OFFSET,
            format!(
                "records count {} != last offset delta {} + 1",
                h.records_count, lod
            ),
        ));
    }
    let section = &batch[RECORD_BATCH_OVERHEAD..];
    let records_data = if compression == Compression::None {
        Cow::Borrowed(section)
    } else {
        Cow::Owned(compression::decompress(
            compression,
            section,
            opts.max_decompressed_size,
            at,
        )?)
    };
    // A forged count must not make callers preallocate for records that cannot exist.
    let max_records = records_data.len() / MIN_RECORD_SIZE;
    if h.records_count as usize > max_records {
        return Err(CodecError::invalid(
            "batch.records_count",
            at + RECORDS_COUNT_OFFSET,
            format!(
                "{} records cannot fit in a records section of {} bytes",
                h.records_count,
                records_data.len()
            ),
        ));
    }
    Ok(BatchView {
        position: at,
        header: h,
        compression,
        raw: batch,
        records_data,
        allow_compacted: opts.allow_compacted,
    })
}

/// Parse a control record's key: version int16 (>= 0) and type int16 (0 abort, 1 commit;
/// other types are returned as-is, as Java maps them to UNKNOWN).
pub fn parse_control_key(key: Option<&[u8]>, at: usize) -> CodecResult<(i16, i16)> {
    match key {
        Some(k) if k.len() >= CONTROL_KEY_SIZE => {
            let version = i16::from_be_bytes([k[0], k[1]]);
            if version < 0 {
                return Err(CodecError::invalid(
                    "control_record.key.version",
                    at,
                    format!("negative control record version {version}"),
                ));
            }
            Ok((version, i16::from_be_bytes([k[2], k[3]])))
        }
        Some(k) => Err(CodecError::invalid(
            "control_record.key",
            at,
            format!(
                "control record key has {} bytes, needs {CONTROL_KEY_SIZE}",
                k.len()
            ),
        )),
        None => Err(CodecError::invalid(
            "control_record.key",
            at,
            "control record key is null",
        )),
    }
}

/// Key and value of an end-transaction marker (control record), as Java's
/// `EndTransactionMarker` writes them: key = version 0 + type, value = version 0 + coordinator
/// epoch.
pub fn end_txn_marker(control_type: i16, coordinator_epoch: i32) -> ([u8; 4], [u8; 6]) {
    let mut key = [0u8; 4];
    key[2..4].copy_from_slice(&control_type.to_be_bytes());
    let mut value = [0u8; 6];
    value[2..6].copy_from_slice(&coordinator_epoch.to_be_bytes());
    (key, value)
}

/// Receives the headers of a record as they are parsed.
pub trait HeaderSink {
    fn header(&mut self, key: &[u8], value: Option<&[u8]>);
}

/// Ignores headers (they are still validated).
pub struct SkipHeaders;
impl HeaderSink for SkipHeaders {
    #[inline(always)]
    fn header(&mut self, _key: &[u8], _value: Option<&[u8]>) {}
}

/// One record, borrowing from the (decompressed) records section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub header_count: usize,
    /// The headers' bytes (already validated).
    pub headers_raw: &'a [u8],
}

impl<'a> RecordView<'a> {
    /// The record's headers as `(key, value)`; keys are valid UTF-8 (checked while parsing).
    pub fn headers(&self) -> HeaderIter<'a> {
        HeaderIter {
            data: self.headers_raw,
            pos: 0,
            remaining: self.header_count,
        }
    }
}

/// Iterates headers already validated by `parse_record`.
pub struct HeaderIter<'a> {
    data: &'a [u8],
    pos: usize,
    remaining: usize,
}

impl<'a> Iterator for HeaderIter<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let key = read_len_prefixed(
            self.data,
            &mut self.pos,
            "record.header.key_length",
            "record.header.key",
            0,
        )
        .ok()
        .flatten()?;
        let value = read_len_prefixed(
            self.data,
            &mut self.pos,
            "record.header.value_length",
            "record.header.value",
            0,
        )
        .ok()?;
        Some((key, value))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

/// Read a varint length (-1 = null) and that many bytes.
#[inline(always)]
fn read_len_prefixed<'a>(
    body: &'a [u8],
    pos: &mut usize,
    len_field: &'static str,
    data_field: &'static str,
    base: usize,
) -> CodecResult<Option<&'a [u8]>> {
    let at = *pos;
    let len = read_varint(body, pos, len_field, base)?;
    if len < 0 {
        if len == -1 {
            return Ok(None);
        }
        return Err(CodecError::invalid(
            len_field,
            base + at,
            format!("negative length {len}"),
        ));
    }
    let len = len as usize;
    let avail = body.len() - *pos;
    if len > avail {
        return Err(CodecError::Truncated {
            field: data_field,
            offset: base + *pos,
            needed: len,
            available: avail,
        });
    }
    let s = &body[*pos..*pos + len];
    *pos += len;
    Ok(Some(s))
}

/// Parse one record at `data[*pos..]`, advancing `*pos` past it and passing each header to
/// `sink`. `base` is the position of `data[0]` in the caller's input (for errors). Checks that
/// the fields fill exactly the record's declared length.
#[inline(always)]
pub fn parse_record<'a, S: HeaderSink>(
    data: &'a [u8],
    pos: &mut usize,
    base: usize,
    sink: &mut S,
) -> CodecResult<RecordView<'a>> {
    let start = *pos;
    let length = read_varint(data, pos, "record.length", base)?;
    if length < 0 {
        return Err(CodecError::invalid(
            "record.length",
            base + start,
            format!("negative record length {length}"),
        ));
    }
    let body_start = *pos;
    let avail = data.len() - body_start;
    if length as usize > avail {
        return Err(CodecError::Truncated {
            field: "record",
            offset: base + start,
            needed: length as usize,
            available: avail,
        });
    }
    let end = body_start + length as usize;
    let body = &data[..end];
    if *pos >= end {
        return Err(CodecError::Truncated {
            field: "record.attributes",
            offset: base + *pos,
            needed: 1,
            available: 0,
        });
    }
    let attributes = body[*pos] as i8;
    *pos += 1;
    let timestamp_delta = read_varlong(body, pos, "record.timestamp_delta", base)?;
    let offset_delta = read_varint(body, pos, "record.offset_delta", base)?;
    let key = read_len_prefixed(body, pos, "record.key_length", "record.key", base)?;
    let value = read_len_prefixed(body, pos, "record.value_length", "record.value", base)?;
    let hc_at = *pos;
    let header_count = read_varint(body, pos, "record.headers_count", base)?;
    if header_count < 0 {
        return Err(CodecError::invalid(
            "record.headers_count",
            base + hc_at,
            format!("negative header count {header_count}"),
        ));
    }
    // Each header takes at least two bytes; refuse counts the record cannot hold.
    if header_count as usize > (end - *pos) / 2 {
        return Err(CodecError::invalid(
            "record.headers_count",
            base + hc_at,
            format!(
                "{header_count} headers cannot fit in the {} bytes left in the record",
                end - *pos
            ),
        ));
    }
    let headers_start = *pos;
    for _ in 0..header_count {
        let kat = *pos;
        let k = match read_len_prefixed(
            body,
            pos,
            "record.header.key_length",
            "record.header.key",
            base,
        )? {
            Some(k) => k,
            None => {
                return Err(CodecError::invalid(
                    "record.header.key_length",
                    base + kat,
                    "null header key",
                ));
            }
        };
        if std::str::from_utf8(k).is_err() {
            return Err(CodecError::invalid(
                "record.header.key",
                base + kat,
                "header key is not valid UTF-8",
            ));
        }
        let v = read_len_prefixed(
            body,
            pos,
            "record.header.value_length",
            "record.header.value",
            base,
        )?;
        sink.header(k, v);
    }
    if *pos != end {
        return Err(CodecError::invalid(
            "record.length",
            base + start,
            format!(
                "record declares {length} bytes but its fields take {}",
                *pos - body_start
            ),
        ));
    }
    Ok(RecordView {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        header_count: header_count as usize,
        headers_raw: &data[headers_start..end],
    })
}

/// Iterates the records of a `BatchView`, checking their count, offset deltas and that they
/// fill the records section exactly.
pub struct RecordIter<'b> {
    data: &'b [u8],
    pos: usize,
    index: usize,
    count: usize,
    last_offset_delta: i32,
    prev_offset_delta: i64,
    strict_offsets: bool,
    batch_at: usize,
    compression: Compression,
    finished: bool,
}

impl<'b> RecordIter<'b> {
    /// Parse the next record, passing its headers to `sink`. `Ok(None)` after the last one.
    #[inline(always)]
    pub fn next_with<S: HeaderSink>(
        &mut self,
        sink: &mut S,
    ) -> CodecResult<Option<RecordView<'b>>> {
        if self.index == self.count {
            if !self.finished {
                self.finished = true;
                if self.pos != self.data.len() {
                    return Err(self.locate(CodecError::invalid(
                        "batch.records",
                        self.pos,
                        format!(
                            "{} bytes left after the last of {} records",
                            self.data.len() - self.pos,
                            self.count
                        ),
                    )));
                }
            }
            return Ok(None);
        }
        let start = self.pos;
        let base = if self.compression == Compression::None {
            self.batch_at + RECORD_BATCH_OVERHEAD
        } else {
            0
        };
        let r = match parse_record(self.data, &mut self.pos, base, sink) {
            Ok(r) => r,
            Err(e) => {
                self.index = self.count;
                self.finished = true;
                return Err(if self.compression == Compression::None {
                    e
                } else {
                    self.locate(e)
                });
            }
        };
        let od = r.offset_delta as i64;
        let ok = if self.strict_offsets {
            od == self.index as i64
        } else {
            od > self.prev_offset_delta && od <= self.last_offset_delta as i64
        };
        if !ok {
            let expect = if self.strict_offsets {
                format!("expected {}", self.index)
            } else {
                format!(
                    "expected > {} and <= last offset delta {}",
                    self.prev_offset_delta, self.last_offset_delta
                )
            };
            self.index = self.count;
            self.finished = true;
            let e = CodecError::invalid(
                "record.offset_delta",
                base + start,
                format!("offset delta {od} out of sequence ({expect})"),
            );
            return Err(if self.compression == Compression::None {
                e
            } else {
                self.locate(e)
            });
        }
        self.prev_offset_delta = od;
        self.index += 1;
        Ok(Some(r))
    }

    /// Turn an error found at a position relative to this batch's records section into one
    /// that names the position in the caller's input.
    fn locate(&self, e: CodecError) -> CodecError {
        if self.compression == Compression::None {
            // Positions inside uncompressed records are already absolute except for the
            // trailing-bytes check, which is relative.
            return match e {
                CodecError::Invalid {
                    field: "batch.records",
                    offset,
                    reason,
                } => CodecError::Invalid {
                    field: "batch.records",
                    offset: self.batch_at + RECORD_BATCH_OVERHEAD + offset,
                    reason,
                },
                other => other,
            };
        }
        let (field, detail) = match &e {
            CodecError::Truncated { field, .. } | CodecError::Invalid { field, .. } => {
                (*field, e.to_string())
            }
            other => ("batch.records", other.to_string()),
        };
        CodecError::Invalid {
            field,
            offset: self.batch_at + RECORD_BATCH_OVERHEAD,
            reason: format!(
                "in the {}-decompressed records of the batch at byte {} (positions below are within them): {}",
                self.compression.name(),
                self.batch_at,
                detail
            ),
        }
    }
}

impl<'b> Iterator for RecordIter<'b> {
    type Item = CodecResult<RecordView<'b>>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_with(&mut SkipHeaders).transpose()
    }
}

/// Batch-level settings for `BatchWriter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    pub compression: Compression,
    /// Codec level (gzip 1-9, zstd 1-22); `None` = Kafka's default.
    pub compression_level: Option<i32>,
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub is_transactional: bool,
    pub is_control: bool,
    /// Set the LogAppendTime timestamp type.
    pub log_append_time: bool,
    /// Timestamp the record deltas are relative to; `None` = the first record's timestamp
    /// (as Java's producer does).
    pub base_timestamp: Option<i64>,
    /// MaxTimestamp to write; `None` = the largest record timestamp.
    pub max_timestamp: Option<i64>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            compression: Compression::None,
            compression_level: None,
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            is_transactional: false,
            is_control: false,
            log_append_time: false,
            base_timestamp: None,
            max_timestamp: None,
        }
    }
}

/// Size of one record as `BatchWriter::measure` found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSize {
    /// Bytes after the length varint.
    pub body: usize,
    pub header_count: i32,
}

impl RecordSize {
    /// Bytes the record takes in the batch, its length varint included.
    #[inline]
    pub fn total(&self) -> usize {
        varint_size(self.body as i32) + self.body
    }
}

/// Builds one batch record by record. Uncompressed records are written straight after a
/// reserved header, so finishing an uncompressed batch copies nothing.
pub struct BatchWriter {
    opts: EncodeOptions,
    buf: Vec<u8>,
    count: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
}

fn bytes_size(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_size(b.len() as i32) + b.len(),
    }
}

fn check_len(b: Option<&[u8]>, field: &'static str, at: usize) -> CodecResult<()> {
    if let Some(b) = b {
        if b.len() > i32::MAX as usize {
            return Err(CodecError::invalid(
                field,
                at,
                format!("{} bytes exceed the int32 limit", b.len()),
            ));
        }
    }
    Ok(())
}

#[inline]
fn write_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

impl BatchWriter {
    pub fn new(opts: EncodeOptions) -> Self {
        Self::with_capacity(opts, 0)
    }

    /// `capacity`: expected size of the records section, to allocate once.
    pub fn with_capacity(opts: EncodeOptions, capacity: usize) -> Self {
        Self::with_buffer(opts, Vec::new(), capacity)
    }

    /// Like `with_capacity`, writing into `buf` (emptied first, its allocation kept and grown to
    /// `capacity` if smaller): a recycled buffer whose pages are mapped already.
    pub fn with_buffer(opts: EncodeOptions, mut buf: Vec<u8>, capacity: usize) -> Self {
        buf.clear();
        buf.reserve(RECORD_BATCH_OVERHEAD + capacity);
        buf.resize(RECORD_BATCH_OVERHEAD, 0);
        BatchWriter {
            opts,
            buf,
            count: 0,
            base_timestamp: opts.base_timestamp,
            max_timestamp: i64::MIN,
        }
    }

    pub fn len(&self) -> usize {
        self.count as usize
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Bytes of (uncompressed) records written so far.
    pub fn records_size(&self) -> usize {
        self.buf.len() - RECORD_BATCH_OVERHEAD
    }

    /// Append a record with the next offset delta.
    pub fn append<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(K, Option<V>)],
    ) -> CodecResult<()> {
        let headers = headers
            .iter()
            .map(|(k, v)| (k.as_ref(), v.as_ref().map(|v| v.as_ref())));
        let size = self.measure(timestamp, key, value, headers.clone())?;
        self.append_measured(size, timestamp, key, value, headers);
        Ok(())
    }

    /// Check the record `append_measured` would write next and return its size (the length
    /// varint included); errors name what the format cannot hold. Headers are iterated once
    /// here and once more by `append_measured`.
    pub fn measure<'h, H>(
        &self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: H,
    ) -> CodecResult<RecordSize>
    where
        H: Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
    {
        let at = self.buf.len();
        if self.count == i32::MAX {
            return Err(CodecError::invalid(
                "batch.records_count",
                at,
                "too many records for one batch",
            ));
        }
        check_len(key, "record.key", at)?;
        check_len(value, "record.value", at)?;
        let base_ts = self.base_timestamp.unwrap_or(timestamp);
        let ts_delta = timestamp.wrapping_sub(base_ts);
        let mut body = 1
            + varlong_size(ts_delta)
            + varint_size(self.count)
            + bytes_size(key)
            + bytes_size(value);
        let mut header_count = 0usize;
        for (k, v) in headers {
            check_len(Some(k), "record.header.key", at)?;
            if std::str::from_utf8(k).is_err() {
                return Err(CodecError::invalid(
                    "record.header.key",
                    at,
                    "header key is not valid UTF-8",
                ));
            }
            check_len(v, "record.header.value", at)?;
            body += bytes_size(Some(k)) + bytes_size(v);
            header_count += 1;
        }
        if header_count > i32::MAX as usize {
            return Err(CodecError::invalid(
                "record.headers_count",
                at,
                "too many headers",
            ));
        }
        body += varint_size(header_count as i32);
        if body > i32::MAX as usize {
            return Err(CodecError::invalid(
                "record.length",
                at,
                format!("record of {body} bytes is too large"),
            ));
        }
        Ok(RecordSize {
            body,
            header_count: header_count as i32,
        })
    }

    /// Append a record `measure` accepted with the same arguments (nothing is re-checked).
    pub fn append_measured<'h, H>(
        &mut self,
        size: RecordSize,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: H,
    ) where
        H: Iterator<Item = (&'h [u8], Option<&'h [u8]>)>,
    {
        let base_ts = *self.base_timestamp.get_or_insert(timestamp);
        let ts_delta = timestamp.wrapping_sub(base_ts);
        self.buf.reserve(size.total());
        write_varint(&mut self.buf, size.body as i32);
        self.buf.push(0); // record attributes: unused by Kafka
        write_varlong(&mut self.buf, ts_delta);
        write_varint(&mut self.buf, self.count);
        write_bytes(&mut self.buf, key);
        write_bytes(&mut self.buf, value);
        write_varint(&mut self.buf, size.header_count);
        for (k, v) in headers {
            write_bytes(&mut self.buf, Some(k));
            write_bytes(&mut self.buf, v);
        }
        self.count += 1;
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    /// Write the header (compressing the records if asked) and return the whole batch.
    pub fn finish(self) -> CodecResult<Vec<u8>> {
        if self.count == 0 {
            return Err(CodecError::invalid(
                "batch.records_count",
                RECORDS_COUNT_OFFSET,
                "a batch needs at least one record",
            ));
        }
        let o = self.opts;
        let mut out = if o.compression == Compression::None {
            self.buf
        } else {
            let records = &self.buf[RECORD_BATCH_OVERHEAD..];
            let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len() / 2 + 64);
            out.resize(RECORD_BATCH_OVERHEAD, 0);
            compression::compress_into(o.compression, records, o.compression_level, &mut out)?;
            out
        };
        let max_ts = o.max_timestamp.unwrap_or(self.max_timestamp);
        write_batch_header(
            &mut out,
            &o,
            self.count,
            self.base_timestamp.unwrap_or(-1),
            max_ts,
        )?;
        Ok(out)
    }
}

/// Fill in the 61-byte header of `batch` (the whole batch: header space followed by its records
/// section, compressed or not) and its CRC. `count` records, timestamps as given.
pub fn write_batch_header(
    batch: &mut [u8],
    o: &EncodeOptions,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
) -> CodecResult<()> {
    if batch.len() < RECORD_BATCH_OVERHEAD {
        return Err(CodecError::invalid(
            "batch.length",
            LENGTH_OFFSET,
            format!("a batch needs at least {RECORD_BATCH_OVERHEAD} bytes"),
        ));
    }
    let length = batch.len() - LOG_OVERHEAD;
    if length > i32::MAX as usize {
        return Err(CodecError::invalid(
            "batch.length",
            LENGTH_OFFSET,
            format!("batch of {length} bytes is too large"),
        ));
    }
    let mut attributes = o.compression as i16;
    if o.log_append_time {
        attributes |= ATTR_TIMESTAMP_TYPE;
    }
    if o.is_transactional {
        attributes |= ATTR_TRANSACTIONAL;
    }
    if o.is_control {
        attributes |= ATTR_CONTROL;
    }
    let h = &mut batch[..RECORD_BATCH_OVERHEAD];
    h[BASE_OFFSET_OFFSET..][..8].copy_from_slice(&o.base_offset.to_be_bytes());
    h[LENGTH_OFFSET..][..4].copy_from_slice(&(length as i32).to_be_bytes());
    h[PARTITION_LEADER_EPOCH_OFFSET..][..4]
        .copy_from_slice(&o.partition_leader_epoch.to_be_bytes());
    h[MAGIC_OFFSET] = MAGIC_V2 as u8;
    h[ATTRIBUTES_OFFSET..][..2].copy_from_slice(&attributes.to_be_bytes());
    h[LAST_OFFSET_DELTA_OFFSET..][..4].copy_from_slice(&(count - 1).to_be_bytes());
    h[BASE_TIMESTAMP_OFFSET..][..8].copy_from_slice(&base_timestamp.to_be_bytes());
    h[MAX_TIMESTAMP_OFFSET..][..8].copy_from_slice(&max_timestamp.to_be_bytes());
    h[PRODUCER_ID_OFFSET..][..8].copy_from_slice(&o.producer_id.to_be_bytes());
    h[PRODUCER_EPOCH_OFFSET..][..2].copy_from_slice(&o.producer_epoch.to_be_bytes());
    h[BASE_SEQUENCE_OFFSET..][..4].copy_from_slice(&o.base_sequence.to_be_bytes());
    h[RECORDS_COUNT_OFFSET..][..4].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c(&batch[ATTRIBUTES_OFFSET..]);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

/// A record to encode, owning or borrowing its bytes through `B`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordIn<B> {
    pub timestamp: i64,
    pub key: Option<B>,
    pub value: Option<B>,
    pub headers: Vec<(B, Option<B>)>,
}

/// Encode `records` as one batch.
pub fn encode_batch<B: AsRef<[u8]>>(
    records: &[RecordIn<B>],
    opts: &EncodeOptions,
) -> CodecResult<Vec<u8>> {
    let estimate: usize = records
        .iter()
        .map(|r| {
            16 + r.key.as_ref().map_or(0, |k| k.as_ref().len())
                + r.value.as_ref().map_or(0, |v| v.as_ref().len())
                + r.headers
                    .iter()
                    .map(|(k, v)| 4 + k.as_ref().len() + v.as_ref().map_or(0, |v| v.as_ref().len()))
                    .sum::<usize>()
        })
        .sum();
    let mut w = BatchWriter::with_capacity(*opts, estimate);
    for r in records {
        w.append(
            r.timestamp,
            r.key.as_ref().map(|k| k.as_ref()),
            r.value.as_ref().map(|v| v.as_ref()),
            &r.headers,
        )?;
    }
    w.finish()
}

/// Decode every batch of `buf` into owned records (for tests and tools; the hot paths use
/// `BatchSlices` + `open_batch` + `RecordIter` directly).
pub fn decode_all(
    buf: &[u8],
    opts: &DecodeOptions,
) -> CodecResult<Vec<(BatchHeader, Vec<DecodedRecord>)>> {
    let mut out = Vec::new();
    for item in BatchSlices::new(buf, opts.allow_partial_trailing) {
        let (at, bytes) = item?;
        let b = open_batch(bytes, at, opts)?;
        b.validate_records()?;
        let mut recs = Vec::with_capacity(b.header.records_count as usize);
        for r in b.records() {
            let r = r?;
            recs.push(DecodedRecord {
                offset: b.header.base_offset.wrapping_add(r.offset_delta as i64),
                timestamp: b.record_timestamp(r.timestamp_delta),
                key: r.key.map(|k| k.to_vec()),
                value: r.value.map(|v| v.to_vec()),
                headers: r
                    .headers()
                    .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                    .collect(),
            });
        }
        out.push((b.header, recs));
    }
    Ok(out)
}

/// An owned decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}
