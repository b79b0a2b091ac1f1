//! Columnar encoding: record batches built straight from column buffers (Arrow binary/string
//! layouts, fixed-width rows, or borrowed per-row slices), with no per-record object. The
//! output is byte-for-byte what `BatchWriter` writes for the same records (it is the writer
//! underneath), split into several batches when a size or count limit is reached.
//!
//! Inputs are validated once up front (offsets monotonic and inside the data, bitmaps long
//! enough, row selections in range), so reading a row afterwards cannot go out of bounds.

use std::fmt;

use crate::batch::{
    write_batch_header, Compression, EncodeOptions, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD,
};
use crate::compression;
use crate::error::CodecError;
use crate::varint::{varint_size, varlong_size, write_varint, zigzag_encode_i64};

/// What went wrong with an input column, naming the argument (and row) as the caller spelled
/// them, or an encoding error (a record the format cannot hold, a compression failure).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnsError {
    Input {
        argument: &'static str,
        row: Option<usize>,
        reason: String,
    },
    Encode {
        row: usize,
        error: CodecError,
    },
}

impl ColumnsError {
    pub fn input(argument: &'static str, row: Option<usize>, reason: impl Into<String>) -> Self {
        ColumnsError::Input {
            argument,
            row,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for ColumnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnsError::Input {
                argument,
                row: Some(row),
                reason,
            } => write!(f, "{argument}[{row}]: {reason}"),
            ColumnsError::Input {
                argument,
                row: None,
                reason,
            } => write!(f, "{argument}: {reason}"),
            ColumnsError::Encode { row, error } => write!(f, "record {row}: {error}"),
        }
    }
}

impl std::error::Error for ColumnsError {}

pub type ColumnsResult<T> = Result<T, ColumnsError>;

/// An Arrow validity bitmap: bit `offset + i` (least significant bit first) set = row `i` valid.
#[derive(Debug, Clone, Copy)]
pub struct Bitmap<'a> {
    bits: &'a [u8],
    offset: usize,
}

impl<'a> Bitmap<'a> {
    /// Check that `bits` covers `len` rows starting at bit `offset`.
    pub fn new(
        bits: &'a [u8],
        offset: usize,
        len: usize,
        argument: &'static str,
    ) -> ColumnsResult<Self> {
        let need = offset
            .checked_add(len)
            .map(|b| b.div_ceil(8))
            .ok_or_else(|| ColumnsError::input(argument, None, "validity bitmap overflows"))?;
        if bits.len() < need {
            return Err(ColumnsError::input(
                argument,
                None,
                format!(
                    "validity bitmap has {} bytes, {len} rows at offset {offset} need {need}",
                    bits.len()
                ),
            ));
        }
        Ok(Bitmap { bits, offset })
    }

    #[inline(always)]
    pub fn is_valid(&self, i: usize) -> bool {
        let b = self.offset + i;
        self.bits[b >> 3] & (1 << (b & 7)) != 0
    }
}

#[inline(always)]
fn valid(v: &Option<Bitmap<'_>>, i: usize) -> bool {
    match v {
        None => true,
        Some(b) => b.is_valid(i),
    }
}

/// Arrow offsets of either width.
#[derive(Debug, Clone, Copy)]
pub enum Offsets<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl Offsets<'_> {
    fn len(&self) -> usize {
        match self {
            Offsets::I32(o) => o.len(),
            Offsets::I64(o) => o.len(),
        }
    }
    #[inline(always)]
    fn get(&self, i: usize) -> usize {
        // Validated non-negative and monotonic by `check_offsets`.
        match self {
            Offsets::I32(o) => o[i] as usize,
            Offsets::I64(o) => o[i] as usize,
        }
    }
    fn raw(&self, i: usize) -> i64 {
        match self {
            Offsets::I32(o) => o[i] as i64,
            Offsets::I64(o) => o[i],
        }
    }
}

/// Check `offsets` holds `len + 1` non-negative, non-decreasing entries, the last within
/// `data_len` bytes.
fn check_offsets(
    offsets: &Offsets<'_>,
    len: usize,
    data_len: usize,
    argument: &'static str,
) -> ColumnsResult<()> {
    if offsets.len() < len + 1 {
        return Err(ColumnsError::input(
            argument,
            None,
            format!(
                "offsets buffer has {} entries, {len} rows need {}",
                offsets.len(),
                len + 1
            ),
        ));
    }
    let mut prev = offsets.raw(0);
    if prev < 0 {
        return Err(ColumnsError::input(
            argument,
            Some(0),
            format!("negative offset {prev}"),
        ));
    }
    for i in 1..=len {
        let o = offsets.raw(i);
        if o < prev {
            return Err(ColumnsError::input(
                argument,
                Some(i - 1),
                format!("offsets decrease ({prev} then {o})"),
            ));
        }
        prev = o;
    }
    if prev as u64 > data_len as u64 {
        return Err(ColumnsError::input(
            argument,
            Some(len.saturating_sub(1)),
            format!("offset {prev} is past the end of the {data_len}-byte data buffer"),
        ));
    }
    Ok(())
}

/// A column of nullable byte strings, borrowed from its owner.
#[derive(Debug, Clone)]
pub enum BinaryInput<'a> {
    /// Arrow binary/string (int32 offsets) or large binary/string (int64 offsets). `offsets`
    /// starts at the array's first row (the array offset already applied); `validity` is read
    /// at the array offset.
    Variable {
        offsets: Offsets<'a>,
        data: &'a [u8],
        validity: Option<Bitmap<'a>>,
        len: usize,
    },
    /// Rows of `width` bytes each (Arrow fixed-size binary, NumPy `S<n>`, 2-D uint8). With
    /// `strip_nul` trailing NUL bytes are not part of a value (NumPy's `S<n>` semantics: `b"ab"`
    /// in an `S4` array is stored `ab\0\0`).
    Fixed {
        data: &'a [u8],
        width: usize,
        validity: Option<Bitmap<'a>>,
        len: usize,
        strip_nul: bool,
    },
    /// One borrowed slice per row (Python lists of bytes).
    Rows(Vec<Option<&'a [u8]>>),
    /// Several columns one after the other (Arrow chunked arrays); `starts[i]` is the first
    /// row of chunk `i`, plus a final entry with the total.
    Chunked {
        chunks: Vec<BinaryInput<'a>>,
        starts: Vec<usize>,
    },
}

impl<'a> BinaryInput<'a> {
    pub fn variable(
        offsets: Offsets<'a>,
        data: &'a [u8],
        validity: Option<Bitmap<'a>>,
        len: usize,
        argument: &'static str,
    ) -> ColumnsResult<Self> {
        check_offsets(&offsets, len, data.len(), argument)?;
        Ok(BinaryInput::Variable {
            offsets,
            data,
            validity,
            len,
        })
    }

    pub fn fixed(
        data: &'a [u8],
        width: usize,
        validity: Option<Bitmap<'a>>,
        len: usize,
        argument: &'static str,
    ) -> ColumnsResult<Self> {
        let need = width.checked_mul(len).ok_or_else(|| {
            ColumnsError::input(argument, None, "fixed-width data size overflows")
        })?;
        if data.len() < need {
            return Err(ColumnsError::input(
                argument,
                None,
                format!(
                    "{len} rows of {width} bytes need {need} bytes, the data buffer has {}",
                    data.len()
                ),
            ));
        }
        Ok(BinaryInput::Fixed {
            data,
            width,
            validity,
            len,
            strip_nul: false,
        })
    }

    /// NumPy `S<n>` rows: fixed width, trailing NULs stripped.
    pub fn numpy_bytes(
        data: &'a [u8],
        width: usize,
        len: usize,
        argument: &'static str,
    ) -> ColumnsResult<Self> {
        match Self::fixed(data, width, None, len, argument)? {
            BinaryInput::Fixed {
                data, width, len, ..
            } => Ok(BinaryInput::Fixed {
                data,
                width,
                validity: None,
                len,
                strip_nul: true,
            }),
            other => Ok(other),
        }
    }

    pub fn chunked(chunks: Vec<BinaryInput<'a>>) -> Self {
        let chunks: Vec<BinaryInput<'a>> = chunks
            .into_iter()
            .flat_map(|c| match c {
                BinaryInput::Chunked { chunks, .. } => chunks,
                other => vec![other],
            })
            .collect();
        let mut starts = Vec::with_capacity(chunks.len() + 1);
        let mut total = 0;
        for c in &chunks {
            starts.push(total);
            total += c.len();
        }
        starts.push(total);
        BinaryInput::Chunked { chunks, starts }
    }

    pub fn len(&self) -> usize {
        match self {
            BinaryInput::Variable { len, .. } | BinaryInput::Fixed { len, .. } => *len,
            BinaryInput::Rows(r) => r.len(),
            BinaryInput::Chunked { starts, .. } => starts.last().copied().unwrap_or(0),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i` (`i < len()`), `None` for null.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        match self {
            BinaryInput::Chunked { chunks, starts } => {
                // The last start <= i (the final entry is the total, > i).
                let c = starts.partition_point(|&s| s <= i) - 1;
                chunks[c].get_flat(i - starts[c])
            }
            _ => self.get_flat(i),
        }
    }

    /// `get` for anything but `Chunked` (chunks are never nested: `chunked` flattens them),
    /// kept non-recursive so it inlines into the encode loops.
    #[inline(always)]
    fn get_flat(&self, i: usize) -> Option<&'a [u8]> {
        match self {
            BinaryInput::Variable {
                offsets,
                data,
                validity,
                ..
            } => {
                if !valid(validity, i) {
                    return None;
                }
                Some(&data[offsets.get(i)..offsets.get(i + 1)])
            }
            BinaryInput::Fixed {
                data,
                width,
                validity,
                strip_nul,
                ..
            } => {
                if !valid(validity, i) {
                    return None;
                }
                let v = &data[i * width..(i + 1) * width];
                if *strip_nul {
                    let end = v.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
                    return Some(&v[..end]);
                }
                Some(v)
            }
            BinaryInput::Rows(r) => r[i],
            BinaryInput::Chunked { .. } => None,
        }
    }
}

/// Per-record timestamps (milliseconds since the epoch).
#[derive(Debug, Clone)]
pub enum TimestampsInput<'a> {
    /// Every record gets this timestamp.
    Constant(i64),
    /// One per row; null rows (if `validity`) get `default`.
    Column {
        values: &'a [i64],
        validity: Option<Bitmap<'a>>,
        default: i64,
    },
}

impl TimestampsInput<'_> {
    #[inline(always)]
    fn get(&self, i: usize) -> i64 {
        match self {
            TimestampsInput::Constant(t) => *t,
            TimestampsInput::Column {
                values,
                validity,
                default,
            } => {
                if valid(validity, i) {
                    values[i]
                } else {
                    *default
                }
            }
        }
    }
    fn len(&self) -> Option<usize> {
        match self {
            TimestampsInput::Constant(_) => None,
            TimestampsInput::Column { values, .. } => Some(values.len()),
        }
    }
}

/// One header: key (UTF-8, checked when encoding) and nullable value.
pub type Header<'a> = (&'a [u8], Option<&'a [u8]>);

/// Per-record headers.
#[derive(Debug, Clone)]
pub enum HeadersInput<'a> {
    None,
    /// The same headers on every record.
    Shared(Vec<Header<'a>>),
    /// An Arrow `list<struct<key, value>>` column: row `i` has struct entries
    /// `list_offsets[i]..list_offsets[i + 1]`, read at `struct_offset +` that index in `keys`
    /// and `values` (which span the whole struct array). A null list is no headers.
    Lists {
        list_offsets: Offsets<'a>,
        list_validity: Option<Bitmap<'a>>,
        struct_offset: usize,
        struct_validity: Option<Bitmap<'a>>,
        keys: BinaryInput<'a>,
        values: BinaryInput<'a>,
        len: usize,
    },
    /// One list of borrowed headers per row.
    Rows(Vec<Vec<Header<'a>>>),
}

impl<'a> HeadersInput<'a> {
    /// An Arrow list-of-struct headers column; checks every list stays inside the struct array.
    #[allow(clippy::too_many_arguments)]
    pub fn lists(
        list_offsets: Offsets<'a>,
        list_validity: Option<Bitmap<'a>>,
        struct_offset: usize,
        struct_len: usize,
        struct_validity: Option<Bitmap<'a>>,
        keys: BinaryInput<'a>,
        values: BinaryInput<'a>,
        len: usize,
    ) -> ColumnsResult<Self> {
        check_offsets(&list_offsets, len, struct_len, "headers")?;
        let need = struct_offset + struct_len;
        if keys.len() < need || values.len() < need {
            return Err(ColumnsError::input(
                "headers",
                None,
                format!(
                    "struct children have {} keys and {} values, the struct array spans {need}",
                    keys.len(),
                    values.len()
                ),
            ));
        }
        Ok(HeadersInput::Lists {
            list_offsets,
            list_validity,
            struct_offset,
            struct_validity,
            keys,
            values,
            len,
        })
    }

    fn len(&self) -> Option<usize> {
        match self {
            HeadersInput::None | HeadersInput::Shared(_) => None,
            HeadersInput::Lists { len, .. } => Some(*len),
            HeadersInput::Rows(r) => Some(r.len()),
        }
    }

    /// The headers of row `i`; an error for a null header entry or key.
    #[inline(always)]
    pub fn row(&self, i: usize) -> ColumnsResult<RowHeaders<'_, 'a>> {
        Ok(match self {
            HeadersInput::None => RowHeaders::Slice([].iter()),
            HeadersInput::Shared(h) => RowHeaders::Slice(h.iter()),
            HeadersInput::Rows(r) => RowHeaders::Slice(r[i].iter()),
            HeadersInput::Lists {
                list_offsets,
                list_validity,
                struct_offset,
                struct_validity,
                keys,
                values,
                ..
            } => {
                if !valid(list_validity, i) {
                    return Ok(RowHeaders::Slice([].iter()));
                }
                let (a, b) = (list_offsets.get(i), list_offsets.get(i + 1));
                for j in a..b {
                    if !valid(struct_validity, j) {
                        return Err(ColumnsError::input(
                            "headers",
                            Some(i),
                            format!("header {} is null", j - a),
                        ));
                    }
                    if keys.get(struct_offset + j).is_none() {
                        return Err(ColumnsError::input(
                            "headers",
                            Some(i),
                            format!("header {} has a null key", j - a),
                        ));
                    }
                }
                RowHeaders::Arrow {
                    keys,
                    values,
                    at: struct_offset + a,
                    end: struct_offset + b,
                }
            }
        })
    }
}

/// Iterator over one row's headers.
#[derive(Clone)]
pub enum RowHeaders<'h, 'a> {
    Slice(std::slice::Iter<'h, Header<'a>>),
    Arrow {
        keys: &'h BinaryInput<'a>,
        values: &'h BinaryInput<'a>,
        at: usize,
        end: usize,
    },
}

impl<'a> Iterator for RowHeaders<'_, 'a> {
    type Item = Header<'a>;
    #[inline(always)]
    fn next(&mut self) -> Option<Header<'a>> {
        match self {
            RowHeaders::Slice(it) => it.next().copied(),
            RowHeaders::Arrow {
                keys,
                values,
                at,
                end,
            } => {
                if *at >= *end {
                    return None;
                }
                let j = *at;
                *at += 1;
                // Null keys were rejected by `HeadersInput::row`.
                Some((keys.get(j).unwrap_or(&[]), values.get(j)))
            }
        }
    }
}

/// Which rows to encode, in order.
#[derive(Debug, Clone, Copy)]
pub enum Rows<'a> {
    All,
    I64(&'a [i64]),
    I32(&'a [i32]),
}

/// Everything `encode_columns` reads.
#[derive(Debug, Clone)]
pub struct ColumnsInput<'a> {
    pub values: BinaryInput<'a>,
    pub keys: Option<BinaryInput<'a>>,
    pub timestamps: TimestampsInput<'a>,
    pub headers: HeadersInput<'a>,
    pub rows: Rows<'a>,
}

/// Batch-level settings and split limits.
#[derive(Debug, Clone, Copy)]
pub struct ColumnsEncodeOptions {
    /// Header fields of every batch. `base_sequence` is that of the first batch; each next
    /// batch continues after the previous one's records (wrapping as Kafka's sequences do).
    /// `base_timestamp`/`max_timestamp` are per batch from its records when `None`.
    pub batch: EncodeOptions,
    /// Start a new batch before a record would make the (uncompressed) batch larger than this;
    /// a batch always takes at least one record.
    pub max_batch_bytes: usize,
    /// Start a new batch after this many records.
    pub max_batch_records: usize,
}

impl Default for ColumnsEncodeOptions {
    fn default() -> Self {
        ColumnsEncodeOptions {
            batch: EncodeOptions::default(),
            max_batch_bytes: usize::MAX,
            max_batch_records: i32::MAX as usize,
        }
    }
}

/// Encoded batches and how many records each holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedBatches {
    pub batches: Vec<Vec<u8>>,
    pub record_counts: Vec<usize>,
}

/// Kafka's sequence arithmetic (Java `DefaultRecordBatch.incrementSequence`): wraps to 0 after
/// `i32::MAX`. A base sequence of -1 (no idempotence) stays -1.
pub fn increment_sequence(sequence: i32, increment: usize) -> i32 {
    if sequence < 0 {
        return sequence;
    }
    let inc = (increment % (i32::MAX as usize + 1)) as i64;
    ((sequence as i64 + inc) % (i32::MAX as i64 + 1)) as i32
}

impl ColumnsInput<'_> {
    /// Rows to encode, after checking that all columns agree in length and `rows` is in range.
    fn check(&self) -> ColumnsResult<usize> {
        let n = self.values.len();
        if let Some(k) = &self.keys {
            if k.len() != n {
                return Err(ColumnsError::input(
                    "keys",
                    None,
                    format!("has {} rows but values has {n}", k.len()),
                ));
            }
        }
        if let Some(t) = self.timestamps.len() {
            if t != n {
                return Err(ColumnsError::input(
                    "timestamps",
                    None,
                    format!("has {t} rows but values has {n}"),
                ));
            }
        }
        if let Some(h) = self.headers.len() {
            if h != n {
                return Err(ColumnsError::input(
                    "headers",
                    None,
                    format!("has {h} rows but values has {n}"),
                ));
            }
        }
        let bad = |j: usize, r: i64| {
            ColumnsError::input(
                "rows",
                Some(j),
                format!("row {r} is out of range for {n} values"),
            )
        };
        match self.rows {
            Rows::All => Ok(n),
            Rows::I64(r) => {
                for (j, &x) in r.iter().enumerate() {
                    if x < 0 || x as u64 >= n as u64 {
                        return Err(bad(j, x));
                    }
                }
                Ok(r.len())
            }
            Rows::I32(r) => {
                for (j, &x) in r.iter().enumerate() {
                    if x < 0 || x as u64 >= n as u64 {
                        return Err(bad(j, x as i64));
                    }
                }
                Ok(r.len())
            }
        }
    }

    #[inline(always)]
    fn row(&self, j: usize) -> usize {
        match self.rows {
            Rows::All => j,
            // Checked in range by `check`.
            Rows::I64(r) => r[j] as usize,
            Rows::I32(r) => r[j] as usize,
        }
    }
}

/// One batch as `Encoder::plan` laid it out: which selected rows it holds and its exact
/// uncompressed size, so it can be written straight into a buffer of that size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPlan {
    /// Positions in the row selection (not row numbers).
    pub rows: std::ops::Range<usize>,
    /// Bytes of the uncompressed records section.
    pub records_size: usize,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub base_sequence: i32,
}

impl BatchPlan {
    pub fn count(&self) -> usize {
        self.rows.len()
    }
    /// Size of the whole batch when written uncompressed.
    pub fn uncompressed_size(&self) -> usize {
        RECORD_BATCH_OVERHEAD + self.records_size
    }
}

/// Headers that are the same on every record, validated and encoded once.
struct FixedHeaders {
    /// Header count varint followed by the encoded headers.
    block: Vec<u8>,
}

#[inline(always)]
fn bytes_size(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => varint_size(b.len() as i32) + b.len(),
    }
}

fn check_value(b: Option<&[u8]>, field: &'static str, row: usize) -> ColumnsResult<()> {
    match b {
        Some(b) if b.len() > i32::MAX as usize => Err(ColumnsError::Encode {
            row,
            error: CodecError::invalid(
                field,
                0,
                format!("{} bytes exceed the int32 limit", b.len()),
            ),
        }),
        _ => Ok(()),
    }
}

fn check_header(k: &[u8], v: Option<&[u8]>, row: usize) -> ColumnsResult<()> {
    check_value(Some(k), "record.header.key", row)?;
    check_value(v, "record.header.value", row)?;
    if std::str::from_utf8(k).is_err() {
        return Err(ColumnsError::Encode {
            row,
            error: CodecError::invalid("record.header.key", 0, "header key is not valid UTF-8"),
        });
    }
    Ok(())
}

/// Writes into an exactly-sized buffer.
struct Cursor<'o> {
    out: &'o mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn varlong(&mut self, v: i64) {
        let mut u = zigzag_encode_i64(v);
        while u >= 0x80 {
            self.out[self.pos] = (u as u8) | 0x80;
            self.pos += 1;
            u >>= 7;
        }
        self.out[self.pos] = u as u8;
        self.pos += 1;
    }
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.out[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
    #[inline(always)]
    fn nullable(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.varlong(-1),
            Some(b) => {
                self.varlong(b.len() as i64);
                self.bytes(b);
            }
        }
    }
}

/// Encodes one `ColumnsInput` in two passes: `plan` measures every record (and rejects what
/// the format cannot hold), then `write_batch`/`encode_batch` write each planned batch into a
/// buffer of exactly its size. Output equals `BatchWriter`'s for the same records.
pub struct Encoder<'i, 'a> {
    input: &'i ColumnsInput<'a>,
    opts: ColumnsEncodeOptions,
    rows: usize,
    fixed_headers: Option<FixedHeaders>,
}

impl<'i, 'a> Encoder<'i, 'a> {
    /// Check the columns agree and validate shared headers once.
    pub fn new(input: &'i ColumnsInput<'a>, opts: &ColumnsEncodeOptions) -> ColumnsResult<Self> {
        let rows = input.check()?;
        let fixed_headers = match &input.headers {
            HeadersInput::None => Some(FixedHeaders { block: vec![0] }),
            HeadersInput::Shared(h) => {
                if h.len() > i32::MAX as usize {
                    return Err(ColumnsError::input(
                        "shared_headers",
                        None,
                        "too many headers",
                    ));
                }
                let first = if rows > 0 { input.row(0) } else { 0 };
                let mut block = Vec::new();
                write_varint(&mut block, h.len() as i32);
                for (k, v) in h {
                    check_header(k, *v, first)?;
                    write_bytes_into(&mut block, Some(k));
                    write_bytes_into(&mut block, *v);
                }
                Some(FixedHeaders { block })
            }
            _ => None,
        };
        Ok(Encoder {
            input,
            opts: *opts,
            rows,
            fixed_headers,
        })
    }

    /// Number of selected rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn options(&self) -> &ColumnsEncodeOptions {
        &self.opts
    }

    /// Size of the headers part of row `i` (count varint included), checking each header.
    #[inline(always)]
    fn headers_size(&self, i: usize) -> ColumnsResult<usize> {
        if let Some(f) = &self.fixed_headers {
            return Ok(f.block.len());
        }
        let mut size = 0;
        let mut count = 0usize;
        for (k, v) in self.input.headers.row(i)? {
            check_header(k, v, i)?;
            size += bytes_size(Some(k)) + bytes_size(v);
            count += 1;
        }
        if count > i32::MAX as usize {
            return Err(ColumnsError::input("headers", Some(i), "too many headers"));
        }
        Ok(size + varint_size(count as i32))
    }

    /// Record body size (after the length varint).
    #[inline(always)]
    fn body_size(
        ts_delta: i64,
        offset_delta: usize,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: usize,
    ) -> usize {
        1 + varlong_size(ts_delta)
            + varint_size(offset_delta as i32)
            + bytes_size(key)
            + bytes_size(value)
            + headers
    }

    /// Lay the selected rows out in batches, checking every record.
    pub fn plan(&self) -> ColumnsResult<Vec<BatchPlan>> {
        let input = self.input;
        let o = &self.opts;
        let max_records = o.max_batch_records.clamp(1, i32::MAX as usize);
        let mut plans = Vec::new();
        let mut start = 0usize;
        let mut size = 0usize;
        let mut base_ts = 0i64;
        let mut max_ts = i64::MIN;
        for j in 0..self.rows {
            let i = input.row(j);
            let ts = input.timestamps.get(i);
            let key = input.keys.as_ref().and_then(|k| k.get(i));
            let value = input.values.get(i);
            check_value(key, "record.key", i)?;
            check_value(value, "record.value", i)?;
            let headers = self.headers_size(i)?;
            let count = j - start;
            if count == 0 {
                base_ts = o.batch.base_timestamp.unwrap_or(ts);
            }
            let mut body = Self::body_size(ts.wrapping_sub(base_ts), count, key, value, headers);
            if count > 0
                && (count >= max_records
                    || RECORD_BATCH_OVERHEAD + size + 5 + body > o.max_batch_bytes
                        && RECORD_BATCH_OVERHEAD + size + varint_size(body as i32) + body
                            > o.max_batch_bytes)
            {
                plans.push(BatchPlan {
                    rows: start..j,
                    records_size: size,
                    base_timestamp: base_ts,
                    max_timestamp: o.batch.max_timestamp.unwrap_or(max_ts),
                    base_sequence: increment_sequence(o.batch.base_sequence, start),
                });
                start = j;
                size = 0;
                max_ts = i64::MIN;
                base_ts = o.batch.base_timestamp.unwrap_or(ts);
                body = Self::body_size(ts.wrapping_sub(base_ts), 0, key, value, headers);
            }
            if body > i32::MAX as usize {
                return Err(ColumnsError::Encode {
                    row: i,
                    error: CodecError::invalid(
                        "record.length",
                        0,
                        format!("record of {body} bytes is too large"),
                    ),
                });
            }
            size += varint_size(body as i32) + body;
            if RECORD_BATCH_OVERHEAD + size - LOG_OVERHEAD > i32::MAX as usize {
                return Err(ColumnsError::Encode {
                    row: i,
                    error: CodecError::invalid(
                        "batch.length",
                        0,
                        "batch exceeds 2 GiB; set max_batch_bytes",
                    ),
                });
            }
            max_ts = max_ts.max(ts);
        }
        if self.rows > start {
            plans.push(BatchPlan {
                rows: start..self.rows,
                records_size: size,
                base_timestamp: base_ts,
                max_timestamp: o.batch.max_timestamp.unwrap_or(max_ts),
                base_sequence: increment_sequence(o.batch.base_sequence, start),
            });
        }
        Ok(plans)
    }

    /// Write the records of `plan` into `out` (exactly `plan.records_size` bytes).
    fn write_records(&self, plan: &BatchPlan, out: &mut [u8]) -> ColumnsResult<()> {
        let input = self.input;
        let internal = |what: &str| ColumnsError::Encode {
            row: 0,
            error: CodecError::invalid("batch.records", 0, format!("internal error: {what}")),
        };
        if out.len() != plan.records_size {
            return Err(internal("buffer size differs from the plan"));
        }
        let mut c = Cursor { out, pos: 0 };
        for (od, j) in plan.rows.clone().enumerate() {
            let i = input.row(j);
            let ts = input.timestamps.get(i);
            let key = input.keys.as_ref().and_then(|k| k.get(i));
            let value = input.values.get(i);
            let headers = self.headers_size(i)?;
            let ts_delta = ts.wrapping_sub(plan.base_timestamp);
            let body = Self::body_size(ts_delta, od, key, value, headers);
            if c.pos + varint_size(body as i32) + body > c.out.len() {
                return Err(internal("records outgrow the planned size"));
            }
            c.varlong(body as i64);
            c.out[c.pos] = 0; // record attributes: unused by Kafka
            c.pos += 1;
            c.varlong(ts_delta);
            c.varlong(od as i64);
            c.nullable(key);
            c.nullable(value);
            match &self.fixed_headers {
                Some(f) => c.bytes(&f.block),
                None => {
                    let hs = input.headers.row(i)?;
                    c.varlong(hs.clone().count() as i64);
                    for (k, v) in hs {
                        c.nullable(Some(k));
                        c.nullable(v);
                    }
                }
            }
        }
        if c.pos != c.out.len() {
            return Err(internal("records fill less than the planned size"));
        }
        Ok(())
    }

    fn batch_options(&self, plan: &BatchPlan) -> EncodeOptions {
        EncodeOptions {
            base_sequence: plan.base_sequence,
            ..self.opts.batch
        }
    }

    /// Write an uncompressed batch into `out` (exactly `plan.uncompressed_size()` bytes).
    pub fn write_batch(&self, plan: &BatchPlan, out: &mut [u8]) -> ColumnsResult<()> {
        if self.opts.batch.compression != Compression::None {
            return Err(ColumnsError::input(
                "compression",
                None,
                "write_batch writes uncompressed batches; use encode_batch",
            ));
        }
        if out.len() < RECORD_BATCH_OVERHEAD {
            return Err(ColumnsError::input(
                "out",
                None,
                "buffer smaller than a batch header",
            ));
        }
        self.write_records(plan, &mut out[RECORD_BATCH_OVERHEAD..])?;
        write_batch_header(
            out,
            &self.batch_options(plan),
            plan.count() as i32,
            plan.base_timestamp,
            plan.max_timestamp,
        )
        .map_err(|error| ColumnsError::Encode {
            row: self.input.row(plan.rows.start),
            error,
        })
    }

    /// Encode (and compress, if asked) one planned batch into a new vector; `scratch` holds
    /// the uncompressed records and is reused across calls.
    pub fn encode_batch(&self, plan: &BatchPlan, scratch: &mut Vec<u8>) -> ColumnsResult<Vec<u8>> {
        let o = self.batch_options(plan);
        if o.compression == Compression::None {
            let mut out = vec![0u8; plan.uncompressed_size()];
            self.write_batch(plan, &mut out)?;
            return Ok(out);
        }
        // Zero-filled only when it grows: write_records overwrites every byte of its slice.
        if scratch.len() < plan.records_size {
            scratch.resize(plan.records_size, 0);
        }
        let records = &mut scratch[..plan.records_size];
        self.write_records(plan, records)?;
        let first = self.input.row(plan.rows.start);
        let enc = |error| ColumnsError::Encode { row: first, error };
        let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len() / 2 + 64);
        out.resize(RECORD_BATCH_OVERHEAD, 0);
        compression::compress_into(o.compression, records, o.compression_level, &mut out)
            .map_err(enc)?;
        write_batch_header(
            &mut out,
            &o,
            plan.count() as i32,
            plan.base_timestamp,
            plan.max_timestamp,
        )
        .map_err(enc)?;
        Ok(out)
    }
}

fn write_bytes_into(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Encode the selected rows as record batches (magic v2), splitting by
/// `max_batch_bytes`/`max_batch_records`. Returns no batches for no rows.
pub fn encode_columns(
    input: &ColumnsInput<'_>,
    opts: &ColumnsEncodeOptions,
) -> ColumnsResult<EncodedBatches> {
    let enc = Encoder::new(input, opts)?;
    let plans = enc.plan()?;
    let mut out = EncodedBatches::default();
    let mut scratch = Vec::new();
    for p in &plans {
        out.batches.push(enc.encode_batch(p, &mut scratch)?);
        out.record_counts.push(p.count());
    }
    Ok(out)
}

/// Partition of each key as Kafka's default partitioner picks it:
/// `(murmur2(key) & 0x7fffffff) % num_partitions`; null keys get `null_partition`.
pub fn partitions_for_keys(
    keys: &BinaryInput<'_>,
    num_partitions: u32,
    null_partition: i32,
) -> Vec<i32> {
    let n = num_partitions.max(1);
    (0..keys.len())
        .map(|i| match keys.get(i) {
            Some(k) => ((crate::murmur2::murmur2(k) as u32 & 0x7fff_ffff) % n) as i32,
            None => null_partition,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{decode_all, encode_batch, Compression, DecodeOptions, RecordIn};

    fn arrow_binary(rows: &[Option<&[u8]>]) -> (Vec<i32>, Vec<u8>, Vec<u8>) {
        let mut offsets = vec![0i32];
        let mut data = Vec::new();
        let mut validity = vec![0u8; rows.len().div_ceil(8)];
        for (i, r) in rows.iter().enumerate() {
            if let Some(r) = r {
                data.extend_from_slice(r);
                validity[i / 8] |= 1 << (i % 8);
            }
            offsets.push(data.len() as i32);
        }
        (offsets, data, validity)
    }

    fn records(
        keys: &[Option<&[u8]>],
        values: &[Option<&[u8]>],
        ts: &[i64],
        headers: &[Vec<(&[u8], Option<&[u8]>)>],
    ) -> Vec<RecordIn<Vec<u8>>> {
        (0..values.len())
            .map(|i| RecordIn {
                timestamp: ts[i],
                key: keys.get(i).copied().flatten().map(|k| k.to_vec()),
                value: values[i].map(|v| v.to_vec()),
                headers: headers
                    .get(i)
                    .map(|h| {
                        h.iter()
                            .map(|(k, v)| (k.to_vec(), v.map(|v| v.to_vec())))
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    }

    #[test]
    fn one_batch_from_arrow_columns_is_byte_identical_to_encode_batch() {
        let values: Vec<Option<&[u8]>> = vec![Some(b"a"), None, Some(b""), Some(b"dddd")];
        let keys: Vec<Option<&[u8]>> = vec![None, Some(b"k1"), Some(b"k2"), None];
        let ts = vec![1000i64, 999, 5000, 1001];
        let (vo, vd, vv) = arrow_binary(&values);
        let (ko, kd, kv) = arrow_binary(&keys);
        for compression in [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let input = ColumnsInput {
                values: BinaryInput::variable(
                    Offsets::I32(&vo),
                    &vd,
                    Some(Bitmap::new(&vv, 0, 4, "values").unwrap()),
                    4,
                    "values",
                )
                .unwrap(),
                keys: Some(
                    BinaryInput::variable(
                        Offsets::I32(&ko),
                        &kd,
                        Some(Bitmap::new(&kv, 0, 4, "keys").unwrap()),
                        4,
                        "keys",
                    )
                    .unwrap(),
                ),
                timestamps: TimestampsInput::Column {
                    values: &ts,
                    validity: None,
                    default: 0,
                },
                headers: HeadersInput::Shared(vec![(b"h", Some(b"v")), (b"n", None)]),
                rows: Rows::All,
            };
            let opts = ColumnsEncodeOptions {
                batch: EncodeOptions {
                    compression,
                    producer_id: 7,
                    producer_epoch: 2,
                    base_sequence: 10,
                    is_transactional: true,
                    ..Default::default()
                },
                ..Default::default()
            };
            let out = encode_columns(&input, &opts).unwrap();
            let h: Vec<(&[u8], Option<&[u8]>)> = vec![(b"h", Some(b"v")), (b"n", None)];
            let recs = records(&keys, &values, &ts, &[h.clone(), h.clone(), h.clone(), h]);
            let expect = encode_batch(&recs, &opts.batch).unwrap();
            assert_eq!(out.batches, vec![expect]);
            assert_eq!(out.record_counts, vec![4]);
        }
    }

    #[test]
    fn splits_by_bytes_and_count_with_continuing_sequences() {
        let data: Vec<u8> = (0..100u8).collect();
        let input = ColumnsInput {
            values: BinaryInput::fixed(&data, 10, None, 10, "values").unwrap(),
            keys: None,
            timestamps: TimestampsInput::Constant(42),
            headers: HeadersInput::None,
            rows: Rows::All,
        };
        // Each record: length(1) + attributes(1) + ts delta(1) + offset delta(1) + key(1) +
        // value length(1) + 10 + header count(1) = 17 bytes.
        let opts = ColumnsEncodeOptions {
            batch: EncodeOptions {
                producer_id: 1,
                producer_epoch: 0,
                base_sequence: i32::MAX - 3,
                ..Default::default()
            },
            max_batch_bytes: RECORD_BATCH_OVERHEAD + 3 * 17,
            ..Default::default()
        };
        let out = encode_columns(&input, &opts).unwrap();
        assert_eq!(out.record_counts, vec![3, 3, 3, 1]);
        let decoded: Vec<_> = out
            .batches
            .iter()
            .flat_map(|b| decode_all(b, &DecodeOptions::default()).unwrap())
            .collect();
        let seqs: Vec<i32> = decoded.iter().map(|(h, _)| h.base_sequence).collect();
        assert_eq!(seqs, vec![i32::MAX - 3, i32::MAX, 2, 5]);
        let values: Vec<Vec<u8>> = decoded
            .iter()
            .flat_map(|(_, r)| r.iter().map(|r| r.value.clone().unwrap()))
            .collect();
        assert_eq!(
            values,
            data.chunks(10).map(|c| c.to_vec()).collect::<Vec<_>>()
        );
        for b in &out.batches {
            assert!(b.len() <= opts.max_batch_bytes);
        }
        let by_count = encode_columns(
            &input,
            &ColumnsEncodeOptions {
                max_batch_records: 4,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(by_count.record_counts, vec![4, 4, 2]);
        // A record larger than the limit still gets a batch of its own.
        let tiny = encode_columns(
            &input,
            &ColumnsEncodeOptions {
                max_batch_bytes: 1,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(tiny.record_counts, vec![1; 10]);
    }

    #[test]
    fn each_split_batch_equals_encode_batch_of_its_records() {
        let values: Vec<Vec<u8>> = (0..50).map(|i| vec![i as u8; i % 7]).collect();
        let rows: Vec<Option<&[u8]>> = values.iter().map(|v| Some(v.as_slice())).collect();
        let ts: Vec<i64> = (0..50).map(|i| 1_000 + (i * 37 % 11)).collect();
        let input = ColumnsInput {
            values: BinaryInput::Rows(rows.clone()),
            keys: None,
            timestamps: TimestampsInput::Column {
                values: &ts,
                validity: None,
                default: 0,
            },
            headers: HeadersInput::None,
            rows: Rows::All,
        };
        let opts = ColumnsEncodeOptions {
            batch: EncodeOptions {
                compression: Compression::Lz4,
                ..Default::default()
            },
            max_batch_bytes: 200,
            ..Default::default()
        };
        let out = encode_columns(&input, &opts).unwrap();
        assert!(out.batches.len() > 2);
        let mut at = 0;
        for (b, &c) in out.batches.iter().zip(&out.record_counts) {
            let recs = records(&[], &rows[at..at + c], &ts[at..at + c], &[]);
            assert_eq!(b, &encode_batch(&recs, &opts.batch).unwrap());
            at += c;
        }
        assert_eq!(at, 50);
    }

    #[test]
    fn sliced_arrow_inputs_row_selection_and_chunks() {
        let all: Vec<Option<&[u8]>> = vec![Some(b"x"), Some(b"yy"), None, Some(b"zzz"), Some(b"w")];
        let (o, d, v) = arrow_binary(&all);
        // A slice of rows 1..5: offsets start at row 1, bitmap at bit 1.
        let sliced = BinaryInput::variable(
            Offsets::I32(&o[1..]),
            &d,
            Some(Bitmap::new(&v, 1, 4, "values").unwrap()),
            4,
            "values",
        )
        .unwrap();
        let got: Vec<_> = (0..4).map(|i| sliced.get(i)).collect();
        assert_eq!(got, all[1..].to_vec());
        // Nested chunks are flattened.
        let chunked = BinaryInput::chunked(vec![
            BinaryInput::chunked(vec![BinaryInput::Rows(all[..1].to_vec())]),
            BinaryInput::Rows(all[1..2].to_vec()),
            BinaryInput::Rows(vec![]),
            sliced.clone(),
        ]);
        assert!(matches!(&chunked, BinaryInput::Chunked { chunks, .. } if chunks.len() == 4));
        assert_eq!(chunked.len(), 6);
        let got: Vec<_> = (0..6).map(|i| chunked.get(i)).collect();
        let mut expect = all[..2].to_vec();
        expect.extend_from_slice(&all[1..]);
        assert_eq!(got, expect);
        let sel = [3i64, 0];
        let input = ColumnsInput {
            values: sliced,
            keys: None,
            timestamps: TimestampsInput::Constant(5),
            headers: HeadersInput::None,
            rows: Rows::I64(&sel),
        };
        let out = encode_columns(&input, &ColumnsEncodeOptions::default()).unwrap();
        let (_, recs) = &decode_all(&out.batches[0], &DecodeOptions::default()).unwrap()[0];
        let vals: Vec<_> = recs.iter().map(|r| r.value.clone()).collect();
        assert_eq!(vals, vec![Some(b"w".to_vec()), Some(b"yy".to_vec())]);
    }

    #[test]
    fn arrow_list_of_struct_headers() {
        // Struct array of 4 headers, the column uses struct entries from offset 1.
        let hk: Vec<Option<&[u8]>> = vec![Some(b"unused"), Some(b"a"), Some(b"b"), Some(b"c")];
        let hv: Vec<Option<&[u8]>> = vec![None, Some(b"1"), None, Some(b"3")];
        let (ko, kd, _) = arrow_binary(&hk);
        let (vo, vd, vv) = arrow_binary(&hv);
        let list_offsets = [0i32, 2, 2, 3];
        let list_valid = [0b101u8];
        let make = || {
            HeadersInput::lists(
                Offsets::I32(&list_offsets),
                Some(Bitmap::new(&list_valid, 0, 3, "headers").unwrap()),
                1,
                3,
                None,
                BinaryInput::variable(Offsets::I32(&ko), &kd, None, 4, "headers").unwrap(),
                BinaryInput::variable(
                    Offsets::I32(&vo),
                    &vd,
                    Some(Bitmap::new(&vv, 0, 4, "headers").unwrap()),
                    4,
                    "headers",
                )
                .unwrap(),
                3,
            )
            .unwrap()
        };
        let input = ColumnsInput {
            values: BinaryInput::Rows(vec![Some(b"v0"), Some(b"v1"), Some(b"v2")]),
            keys: None,
            timestamps: TimestampsInput::Constant(1),
            headers: make(),
            rows: Rows::All,
        };
        let out = encode_columns(&input, &ColumnsEncodeOptions::default()).unwrap();
        let (_, recs) = &decode_all(&out.batches[0], &DecodeOptions::default()).unwrap()[0];
        assert_eq!(
            recs[0].headers,
            vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), None)]
        );
        assert!(recs[1].headers.is_empty());
        assert_eq!(recs[2].headers, vec![(b"c".to_vec(), Some(b"3".to_vec()))]);
    }

    #[test]
    fn bad_inputs_are_errors_naming_argument_and_row() {
        let d = b"abcdef";
        let e = BinaryInput::variable(Offsets::I32(&[0, 3, 2]), d, None, 2, "values").unwrap_err();
        assert_eq!(e.to_string(), "values[1]: offsets decrease (3 then 2)");
        let e = BinaryInput::variable(Offsets::I32(&[0, 9]), d, None, 1, "keys").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("keys[0]: offset 9 is past the end"),
            "{e}"
        );
        let e = BinaryInput::variable(Offsets::I64(&[0]), d, None, 1, "keys").unwrap_err();
        assert!(e.to_string().contains("1 entries, 1 rows need 2"), "{e}");
        assert!(BinaryInput::fixed(d, 4, None, 2, "values").is_err());
        assert!(Bitmap::new(&[0], 4, 5, "values").is_err());
        let rows = [0i64, 2];
        let input = ColumnsInput {
            values: BinaryInput::Rows(vec![Some(b"a"), Some(b"b")]),
            keys: Some(BinaryInput::Rows(vec![None])),
            timestamps: TimestampsInput::Constant(0),
            headers: HeadersInput::None,
            rows: Rows::All,
        };
        let e = encode_columns(&input, &ColumnsEncodeOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), "keys: has 1 rows but values has 2");
        let input = ColumnsInput {
            keys: None,
            rows: Rows::I64(&rows),
            ..input
        };
        let e = encode_columns(&input, &ColumnsEncodeOptions::default()).unwrap_err();
        assert_eq!(e.to_string(), "rows[1]: row 2 is out of range for 2 values");
        let input = ColumnsInput {
            rows: Rows::All,
            headers: HeadersInput::Shared(vec![(b"\xff", None)]),
            ..input
        };
        let e = encode_columns(&input, &ColumnsEncodeOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("record 0: invalid record.header.key"),
            "{e}"
        );
    }

    #[test]
    fn numpy_bytes_rows_drop_trailing_nuls_only() {
        let data = b"ab\0\0\0c\0d\0\0\0\0";
        let col = BinaryInput::numpy_bytes(data, 4, 3, "values").unwrap();
        let got: Vec<_> = (0..3).map(|i| col.get(i)).collect();
        assert_eq!(
            got,
            vec![Some(&b"ab"[..]), Some(&b"\0c\0d"[..]), Some(&b""[..])]
        );
    }

    #[test]
    fn no_rows_gives_no_batches() {
        let input = ColumnsInput {
            values: BinaryInput::Rows(vec![]),
            keys: None,
            timestamps: TimestampsInput::Constant(0),
            headers: HeadersInput::None,
            rows: Rows::All,
        };
        let out = encode_columns(&input, &ColumnsEncodeOptions::default()).unwrap();
        assert!(out.batches.is_empty() && out.record_counts.is_empty());
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        assert_eq!(increment_sequence(-1, 5), -1);
        assert_eq!(increment_sequence(5, 5), 10);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    }

    #[test]
    fn partitions_match_the_java_partitioner() {
        let keys = BinaryInput::Rows(vec![Some(b"a"), None, Some(b"key-1")]);
        let p = partitions_for_keys(&keys, 10, -1);
        let java = |k: &[u8]| ((crate::murmur2::murmur2(k) & 0x7fff_ffff) % 10) as i32;
        assert_eq!(p, vec![java(b"a"), -1, java(b"key-1")]);
    }
}
