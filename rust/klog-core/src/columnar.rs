//! Columnar decoding: many batches in, one set of column buffers out, with no per-record
//! allocation. Keys, values and headers use Apache Arrow's layouts, so the buffers can be
//! wrapped (not copied) as `binary` and `list<struct<key: string, value: binary>>` arrays:
//!
//! * binary/string: `offsets` (int32, rows + 1 entries, starting at 0), `data`, and a
//!   validity bitmap (bit i set = row i not null, least significant bit first);
//! * list: `offsets` (int32, rows + 1) into a struct array whose children are the header keys
//!   (string, never null) and header values (binary, nullable).

use crate::batch::{
    open_batch, parse_control_key, BatchHeader, BatchSlices, Compression, DecodeOptions,
    HeaderSink, RECORD_BATCH_OVERHEAD,
};
use crate::error::{CodecError, CodecResult};

/// Arrow's int32 offsets cap one column's data at 2 GiB.
pub const MAX_COLUMN_DATA: usize = i32::MAX as usize;

/// An Arrow binary (or string) column under construction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BinaryColumn {
    /// `len() + 1` int32 offsets into `data`.
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    /// Validity bitmap, `ceil(len() / 8)` bytes.
    pub validity: Vec<u8>,
    pub null_count: usize,
}

impl BinaryColumn {
    pub fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        BinaryColumn {
            offsets,
            data: Vec::with_capacity(bytes),
            validity: Vec::with_capacity(rows.div_ceil(8)),
            null_count: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Append one value (`None` = null). Fails only if the column would pass 2 GiB of data.
    #[inline(always)]
    pub fn push(&mut self, v: Option<&[u8]>, field: &'static str) -> CodecResult<()> {
        let i = self.len();
        if i & 7 == 0 {
            self.validity.push(0);
        }
        match v {
            Some(v) => {
                if self.data.len() + v.len() > MAX_COLUMN_DATA {
                    return Err(CodecError::invalid(
                        field,
                        0,
                        "column data exceeds 2 GiB (Arrow int32 offsets); decode fewer batches per call",
                    ));
                }
                self.data.extend_from_slice(v);
                if let Some(last) = self.validity.last_mut() {
                    *last |= 1 << (i % 8);
                }
            }
            None => self.null_count += 1,
        }
        self.offsets.push(self.data.len() as i32);
        Ok(())
    }

    /// Drop rows past `rows` (used to undo a record that turned out to be skipped).
    fn truncate(&mut self, rows: usize) {
        if rows >= self.len() {
            return;
        }
        for i in rows..self.len() {
            if self.validity[i / 8] & (1 << (i % 8)) == 0 {
                self.null_count -= 1;
            }
        }
        self.offsets.truncate(rows + 1);
        self.data.truncate(self.offsets[rows] as usize);
        self.validity.truncate(rows.div_ceil(8));
        if rows & 7 != 0 {
            if let Some(last) = self.validity.last_mut() {
                *last &= (1u8 << (rows % 8)) - 1;
            }
        }
    }
}

/// Per-batch information, one entry per batch that produced rows (or was skipped, see
/// `BatchInfo::rows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub header: BatchHeader,
    pub position: usize,
    pub compression: Compression,
    /// Index of this batch's first row in the columns.
    pub first_row: usize,
    /// Rows this batch contributed (0 for skipped control batches).
    pub rows: usize,
    pub control_type: Option<i16>,
}

/// The decoded columns of all records of a buffer.
#[derive(Debug, Clone, Default)]
pub struct RecordColumns {
    pub offsets: Vec<i64>,
    pub timestamps: Vec<i64>,
    pub keys: BinaryColumn,
    pub values: BinaryColumn,
    /// `rows + 1` int32 offsets into the header columns.
    pub header_offsets: Vec<i32>,
    /// Header keys (UTF-8, never null).
    pub header_keys: BinaryColumn,
    pub header_values: BinaryColumn,
    pub batches: Vec<BatchInfo>,
}

impl RecordColumns {
    pub fn num_rows(&self) -> usize {
        self.offsets.len()
    }
}

/// What to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnarOptions {
    pub decode: DecodeOptions,
    /// Leave control batches' records out of the columns (consumers never see them). They are
    /// still validated and listed in `batches`.
    pub skip_control: bool,
    /// Leave out records with offsets below this (a fetch returns whole batches, so the first
    /// batch may start before the fetch offset).
    pub min_offset: i64,
}

impl Default for ColumnarOptions {
    fn default() -> Self {
        ColumnarOptions {
            decode: DecodeOptions::default(),
            skip_control: true,
            min_offset: i64::MIN,
        }
    }
}

struct HeaderColumns<'c> {
    keys: &'c mut BinaryColumn,
    values: &'c mut BinaryColumn,
    error: Option<CodecError>,
}

impl HeaderSink for HeaderColumns<'_> {
    #[inline(always)]
    fn header(&mut self, key: &[u8], value: Option<&[u8]>) {
        if self.error.is_none() {
            if let Err(e) = self.keys.push(Some(key), "record.header.key") {
                self.error = Some(e);
            } else if let Err(e) = self.values.push(value, "record.header.value") {
                self.error = Some(e);
            }
        }
    }
}

/// Decode every batch of `buf` into columns. Validation is the same as `open_batch` plus
/// every record's fields; the first problem is returned as an error.
pub fn decode_columns(buf: &[u8], opts: &ColumnarOptions) -> CodecResult<RecordColumns> {
    // Size the columns once from the batch headers (validated again when each batch is opened).
    let mut rows_hint = 0usize;
    let mut bytes_hint = 0usize;
    for (_, b) in BatchSlices::new(buf, true).flatten() {
        if b.len() >= RECORD_BATCH_OVERHEAD {
            let count = i32::from_be_bytes([b[57], b[58], b[59], b[60]]).max(0) as usize;
            let section = b.len() - RECORD_BATCH_OVERHEAD;
            rows_hint += count.min(section / crate::batch::MIN_RECORD_SIZE);
            bytes_hint += section;
        }
    }
    let mut c = RecordColumns {
        offsets: Vec::with_capacity(rows_hint),
        timestamps: Vec::with_capacity(rows_hint),
        keys: BinaryColumn::with_capacity(rows_hint, 0),
        values: BinaryColumn::with_capacity(rows_hint, bytes_hint),
        header_offsets: Vec::with_capacity(rows_hint + 1),
        header_keys: BinaryColumn::with_capacity(0, 0),
        header_values: BinaryColumn::with_capacity(0, 0),
        batches: Vec::new(),
    };
    c.header_offsets.push(0);

    for item in BatchSlices::new(buf, opts.decode.allow_partial_trailing) {
        let (at, bytes) = item?;
        let b = open_batch(bytes, at, &opts.decode)?;
        let first_row = c.offsets.len();
        let h = b.header;
        if b.is_control() && opts.skip_control {
            let control_type = b.validate_records()?;
            c.batches.push(BatchInfo {
                header: h,
                position: at,
                compression: b.compression,
                first_row,
                rows: 0,
                control_type,
            });
            continue;
        }
        // Skip whole batches that end before min_offset without building their rows.
        let skip_all = h.base_offset.wrapping_add(h.last_offset_delta as i64) < opts.min_offset;
        let mut control_type = None;
        let mut it = b.records();
        loop {
            let hk_rows = c.header_keys.len();
            let mut sink = HeaderColumns {
                keys: &mut c.header_keys,
                values: &mut c.header_values,
                error: None,
            };
            let r = match it.next_with(&mut sink)? {
                Some(r) => r,
                None => break,
            };
            if let Some(e) = sink.error {
                return Err(e);
            }
            if b.is_control() {
                let (_, t) = parse_control_key(r.key, at + RECORD_BATCH_OVERHEAD)?;
                control_type = Some(t);
            }
            let offset = h.base_offset.wrapping_add(r.offset_delta as i64);
            if skip_all || offset < opts.min_offset {
                c.header_keys.truncate(hk_rows);
                c.header_values.truncate(hk_rows);
                continue;
            }
            c.offsets.push(offset);
            c.timestamps.push(b.record_timestamp(r.timestamp_delta));
            c.keys.push(r.key, "record.key")?;
            c.values.push(r.value, "record.value")?;
            c.header_offsets.push(c.header_keys.len() as i32);
        }
        c.batches.push(BatchInfo {
            header: h,
            position: at,
            compression: b.compression,
            first_row,
            rows: c.offsets.len() - first_row,
            control_type,
        });
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode_batch, end_txn_marker, EncodeOptions, RecordIn};

    fn batch(base: i64, n: usize, codec: Compression) -> Vec<u8> {
        let recs: Vec<RecordIn<Vec<u8>>> = (0..n)
            .map(|i| RecordIn {
                timestamp: 1000 + i as i64,
                key: if i % 3 == 0 {
                    None
                } else {
                    Some(format!("k{i}").into_bytes())
                },
                value: if i % 5 == 4 {
                    None
                } else {
                    Some(vec![i as u8; i])
                },
                headers: (0..i % 3)
                    .map(|j| {
                        (
                            format!("h{j}").into_bytes(),
                            if j == 1 { None } else { Some(vec![j as u8]) },
                        )
                    })
                    .collect(),
            })
            .collect();
        encode_batch(
            &recs,
            &EncodeOptions {
                compression: codec,
                base_offset: base,
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn columns_hold_every_record_in_arrow_layout() {
        let buf = [
            batch(0, 10, Compression::None),
            batch(10, 7, Compression::Lz4),
        ]
        .concat();
        let c = decode_columns(&buf, &ColumnarOptions::default()).unwrap();
        assert_eq!(c.num_rows(), 17);
        assert_eq!(c.offsets, (0..17).collect::<Vec<i64>>());
        assert_eq!(c.batches.len(), 2);
        assert_eq!((c.batches[1].first_row, c.batches[1].rows), (10, 7));
        // Row 3 of the first batch: key "k3"? no: 3 % 3 == 0 -> null key.
        assert_eq!(c.keys.validity[0] & (1 << 3), 0);
        assert_eq!(c.keys.null_count, 4 + 3); // i in {0,3,6,9} and {0,3,6}
        assert_eq!(c.values.null_count, 2 + 1); // i in {4,9} and {4}
        let v = |i: usize| {
            &c.values.data[c.values.offsets[i] as usize..c.values.offsets[i + 1] as usize]
        };
        assert_eq!(v(12), &[2u8, 2][..]);
        assert_eq!(
            *c.header_offsets.last().unwrap() as usize,
            c.header_keys.len()
        );
        // Row 2 has headers h0 (value [0]) and h1 (null).
        let (s, e) = (c.header_offsets[2] as usize, c.header_offsets[3] as usize);
        assert_eq!(e - s, 2);
        let hk = &c.header_keys;
        assert_eq!(
            &hk.data[hk.offsets[s] as usize..hk.offsets[s + 1] as usize],
            b"h0"
        );
        assert_eq!(
            c.header_values.validity[(s + 1) / 8] & (1 << ((s + 1) % 8)),
            0
        );
    }

    #[test]
    fn min_offset_and_control_batches_are_left_out() {
        let (k, v) = end_txn_marker(0, 1);
        let ctrl = encode_batch(
            &[RecordIn::<&[u8]> {
                timestamp: 1,
                key: Some(&k),
                value: Some(&v),
                headers: vec![],
            }],
            &EncodeOptions {
                is_control: true,
                is_transactional: true,
                base_offset: 10,
                ..Default::default()
            },
        )
        .unwrap();
        let buf = [
            batch(0, 10, Compression::None),
            ctrl,
            batch(11, 5, Compression::Zstd),
        ]
        .concat();
        let opts = ColumnarOptions {
            min_offset: 4,
            ..Default::default()
        };
        let c = decode_columns(&buf, &opts).unwrap();
        assert_eq!(c.offsets, (4..10).chain(11..16).collect::<Vec<i64>>());
        assert_eq!(c.batches[1].control_type, Some(0));
        assert_eq!(c.batches[1].rows, 0);
        // Headers of skipped rows were rolled back: the counts still line up.
        assert_eq!(c.header_offsets.len(), c.num_rows() + 1);
        assert_eq!(
            *c.header_offsets.last().unwrap() as usize,
            c.header_keys.len()
        );
        assert_eq!(c.header_keys.len(), c.header_values.len());
        let with_control = decode_columns(
            &buf,
            &ColumnarOptions {
                skip_control: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(with_control.num_rows(), 16);
    }

    #[test]
    fn truncating_a_column_restores_its_bitmap_and_null_count() {
        let mut col = BinaryColumn::with_capacity(0, 0);
        for i in 0..20 {
            col.push(if i % 2 == 0 { None } else { Some(b"x") }, "t")
                .unwrap();
        }
        col.truncate(9);
        assert_eq!(col.len(), 9);
        assert_eq!(col.null_count, 5);
        assert_eq!(col.validity, vec![0b1010_1010, 0]);
        assert_eq!(col.data.len(), 4);
    }
}
