//! A producer's open record batch: records are encoded into the batch buffer as they are sent,
//! so sending one record is one append and draining a batch is one header write (plus the
//! codec when compressed). The producer fields (id, epoch, base sequence) are only known when
//! the batch is drained; they are written by `finish`.

use crate::batch::header::*;
use crate::batch::records::{BatchWriter, EncodeOptions};
use crate::error::CodecResult;
use std::sync::{Mutex, MutexGuard};

/// Most of the capacity reserved up front (the buffer grows past it as records come). Reserving
/// the whole batch avoids copying it while it grows; untouched pages cost nothing.
const INITIAL_RESERVE: usize = 4 * 1024 * 1024;
/// Upper bound of one record's framing (length, attributes, timestamp delta, offset delta,
/// key length, value length, header count varints) used for the capacity check.
pub const RECORD_FRAMING_MAX: usize = 5 + 1 + 10 + 5 + 5 + 5 + 5;

/// Records bound for one partition, appended until the batch is full or sealed.
pub struct OpenBatch {
    writer: Option<BatchWriter>,
    /// Bytes of encoded records the batch may hold (a first record is always accepted).
    capacity: usize,
    count: usize,
    /// Each record's timestamp, for the records' metadata once acknowledged.
    timestamps: Vec<i64>,
    sealed: bool,
}

/// Why an append was refused (the caller opens a new batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendRefused {
    /// The record does not fit in the remaining capacity.
    Full,
    /// The batch was drained: it takes no more records.
    Sealed,
}

impl OpenBatch {
    pub fn new(compression: Compression, compression_level: Option<i32>, capacity: usize) -> Self {
        Self::with_buffer(compression, compression_level, capacity, Vec::new())
    }

    /// Like `new`, encoding into `buf` (a recycled buffer, see `BufferPool`; emptied first).
    pub fn with_buffer(
        compression: Compression,
        compression_level: Option<i32>,
        capacity: usize,
        buf: Vec<u8>,
    ) -> Self {
        let opts = EncodeOptions {
            compression,
            compression_level,
            ..Default::default()
        };
        OpenBatch {
            writer: Some(BatchWriter::with_buffer(opts, buf, capacity.min(INITIAL_RESERVE))),
            capacity,
            count: 0,
            timestamps: Vec::new(),
            sealed: false,
        }
    }

    /// Records appended so far.
    pub fn len(&self) -> usize {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }
    /// Bytes of (uncompressed) encoded records so far.
    pub fn records_size(&self) -> usize {
        self.writer.as_ref().map_or(0, |w| w.records_size())
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Timestamp of record `index`.
    pub fn timestamp(&self, index: usize) -> Option<i64> {
        self.timestamps.get(index).copied()
    }

    /// Append one record; returns its index in the batch. Refused when sealed or when the
    /// record would overflow the capacity of a non-empty batch. Errors (too large a field,
    /// non-UTF-8 header key) leave the batch unchanged.
    pub fn append<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(K, Option<V>)],
    ) -> CodecResult<Result<usize, AppendRefused>> {
        let writer = match (&mut self.writer, self.sealed) {
            (Some(w), false) => w,
            _ => return Ok(Err(AppendRefused::Sealed)),
        };
        if self.count > 0 {
            let mut size = RECORD_FRAMING_MAX
                + key.map_or(0, |k| k.len())
                + value.map_or(0, |v| v.len());
            for (k, v) in headers {
                size += 10 + k.as_ref().len() + v.as_ref().map_or(0, |v| v.as_ref().len());
            }
            if writer.records_size() + size > self.capacity {
                return Ok(Err(AppendRefused::Full));
            }
        }
        writer.append(timestamp, key, value, headers)?;
        self.timestamps.push(timestamp);
        self.count += 1;
        Ok(Ok(self.count - 1))
    }

    /// No more appends (the batch is being drained).
    pub fn seal(&mut self) {
        self.sealed = true;
    }

    /// Take the records out for encoding (seals the batch); `finish_records` completes them.
    /// None if already taken.
    pub fn take(&mut self) -> Option<BatchWriter> {
        self.sealed = true;
        self.writer.take()
    }
}

/// Write the whole batch with its producer fields (compressing when the batch was opened with
/// a codec). Runs without the batch: the caller may release locks first.
pub fn finish_records(
    writer: BatchWriter,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> CodecResult<Vec<u8>> {
    let mut out = writer.finish()?; // always a whole header and at least one record
    set_producer_fields(&mut out, producer_id, producer_epoch, base_sequence);
    Ok(out)
}

/// Free batch buffers kept for the next batches, bounded by count and bytes. A buffer of a
/// large batch comes from a fresh mmap whose every page the kernel faults in and zeroes; one
/// given back here keeps its mapped pages for the next batch. Thread-safe.
pub struct BufferPool {
    max_buffers: usize,
    max_bytes: usize,
    free: Mutex<FreeBuffers>,
}

struct FreeBuffers {
    buffers: Vec<Vec<u8>>,
    /// Sum of the capacities of `buffers`.
    bytes: usize,
}

impl BufferPool {
    pub const fn new(max_buffers: usize, max_bytes: usize) -> Self {
        BufferPool {
            max_buffers,
            max_bytes,
            free: Mutex::new(FreeBuffers {
                buffers: Vec::new(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FreeBuffers> {
        // The data stays consistent whatever a panicking holder did (pushes and pops only).
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An empty buffer: the most recently given back one (its pages most likely still
    /// cached), or a new one without allocation.
    pub fn take(&self) -> Vec<u8> {
        let mut free = self.lock();
        match free.buffers.pop() {
            Some(buf) => {
                free.bytes -= buf.capacity();
                buf
            }
            None => Vec::new(),
        }
    }

    /// Keep `buf` for a later `take` if the bounds allow, else free it.
    pub fn give(&self, mut buf: Vec<u8>) {
        let size = buf.capacity();
        if size == 0 {
            return;
        }
        buf.clear();
        let mut free = self.lock();
        if free.buffers.len() < self.max_buffers && free.bytes + size <= self.max_bytes {
            free.bytes += size;
            free.buffers.push(buf);
        }
    }

    /// Buffers held and the bytes they hold.
    pub fn held(&self) -> (usize, usize) {
        let free = self.lock();
        (free.buffers.len(), free.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::records::{decode_all, DecodeOptions};

    const NO_HEADERS: &[(&[u8], Option<&[u8]>)] = &[];

    #[test]
    fn appended_records_decode_with_offsets_timestamps_and_producer_fields() {
        let mut b = OpenBatch::new(Compression::None, None, 1 << 20);
        assert_eq!(b.append(1000, None, Some(b"a"), NO_HEADERS).unwrap(), Ok(0));
        assert_eq!(
            b.append(1005, Some(b"k"), Some(b"bb"), &[("h", Some(b"v"))]).unwrap(),
            Ok(1)
        );
        assert_eq!(b.timestamp(1), Some(1005));
        let out = finish_records(b.take().unwrap(), 7, 3, 42).unwrap();
        let batches = decode_all(&out, &DecodeOptions::default()).unwrap();
        assert_eq!(batches.len(), 1);
        let (h, recs) = &batches[0];
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (7, 3, 42));
        assert_eq!(h.max_timestamp, 1005);
        assert_eq!(recs[0].value.as_deref(), Some(&b"a"[..]));
        assert_eq!(recs[1].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(recs[1].offset, 1);
        assert_eq!(recs[1].timestamp, 1005);
        assert_eq!(recs[1].headers[0].0, b"h".to_vec());
    }

    #[test]
    fn full_batch_refuses_but_first_record_always_fits() {
        let mut b = OpenBatch::new(Compression::None, None, 100);
        let big = vec![1u8; 500];
        assert_eq!(b.append(1, None, Some(&big), NO_HEADERS).unwrap(), Ok(0));
        assert_eq!(
            b.append(1, None, Some(b"x"), NO_HEADERS).unwrap(),
            Err(AppendRefused::Full)
        );
        assert_eq!(b.len(), 1);
    }

    #[test]
    fn sealed_batch_refuses() {
        let mut b = OpenBatch::new(Compression::None, None, 1000);
        b.append(1, None, Some(b"x"), NO_HEADERS).unwrap().unwrap();
        b.seal();
        assert_eq!(
            b.append(1, None, Some(b"x"), NO_HEADERS).unwrap(),
            Err(AppendRefused::Sealed)
        );
        let w = b.take().unwrap();
        assert!(b.take().is_none());
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn bad_header_key_is_an_error_and_leaves_the_batch_unchanged() {
        let mut b = OpenBatch::new(Compression::None, None, 1000);
        let bad: &[(&[u8], Option<&[u8]>)] = &[(b"\xff", None)];
        assert!(b.append(1, None, Some(b"x"), bad).is_err());
        assert!(b.is_empty());
        assert_eq!(b.records_size(), 0);
    }

    #[test]
    fn compressed_batch_round_trips() {
        let mut b = OpenBatch::new(Compression::Zstd, None, 1 << 20);
        for i in 0..100 {
            b.append(i, None, Some(&[b'z'; 100][..]), NO_HEADERS).unwrap().unwrap();
        }
        let out = finish_records(b.take().unwrap(), 1, 0, 0).unwrap();
        assert!(out.len() < 100 * 100 / 2);
        let batches = decode_all(&out, &DecodeOptions::default()).unwrap();
        assert_eq!(batches[0].1.len(), 100);
        assert_eq!(batches[0].0.base_sequence, 0);
    }

    #[test]
    fn buffer_pool_hands_back_given_buffers_within_its_bounds() {
        let pool = BufferPool::new(2, 3000);
        assert_eq!(pool.take().capacity(), 0); // empty: a new vector, nothing allocated
        let a = Vec::<u8>::with_capacity(1000);
        let a_ptr = a.as_ptr();
        pool.give(a);
        pool.give(vec![7u8; 1500]);
        pool.give(Vec::with_capacity(10)); // past the count bound: freed
        assert_eq!(pool.held(), (2, 2500));
        let b = pool.take();
        assert_eq!((b.capacity(), b.len()), (1500, 0), "the latest given back, emptied");
        pool.give(Vec::with_capacity(2001)); // 1000 + 2001 > 3000 bytes: freed
        assert_eq!(pool.held(), (1, 1000));
        pool.give(Vec::with_capacity(3001)); // larger than the byte bound on its own
        assert_eq!(pool.held(), (1, 1000));
        let again = pool.take(); // kept alive while its pointer is compared
        assert_eq!(again.as_ptr(), a_ptr, "the same allocation comes back");
        assert_eq!(pool.held(), (0, 0));
    }

    #[test]
    fn batches_written_into_recycled_buffers_are_byte_identical() {
        let pool = BufferPool::new(4, 1 << 20);
        for round in 0..3 {
            let mut b = OpenBatch::with_buffer(Compression::None, None, 1 << 16, pool.take());
            let mut fresh = OpenBatch::new(Compression::None, None, 1 << 16);
            for i in 0..200u32 {
                let v = format!("r{round}-{i}").into_bytes();
                let _ = b.append(1000 + i as i64, None, Some(&v), NO_HEADERS).unwrap();
                let _ = fresh.append(1000 + i as i64, None, Some(&v), NO_HEADERS).unwrap();
            }
            let out = finish_records(b.take().unwrap(), 5, 1, round * 200).unwrap();
            let want = finish_records(fresh.take().unwrap(), 5, 1, round * 200).unwrap();
            assert_eq!(out, want);
            pool.give(out);
            assert_eq!(pool.held().0, 1);
        }
    }
}
