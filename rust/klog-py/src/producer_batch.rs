//! `RecordAppender`: the producer's open batch for one partition. `Producer.send` appends a
//! record with one call (encoded into the batch buffer at once); the sender seals and finishes
//! the batch when it drains it.

use std::time::{SystemTime, UNIX_EPOCH};

use klog_core::batch::header::Compression;
use klog_core::producer_batch::{finish_records, BufferPool, OpenBatch, RECORD_FRAMING_MAX};
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyTuple, PyType};

use crate::errors::codec_err;
use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::records::take_free_bytearray;

/// Encoding buffers of finished batches, for the next appenders of any producer in the process. A
/// buffer never leaves Rust: `finish` copies the batch out, then gives its buffer back, so the next
/// batch writes into pages already mapped instead of a fresh mmap faulted in page by page. A few
/// suffice (a buffer comes back microseconds after its batch is drained); the byte bound caps what
/// an idle process keeps.
const SEND_POOL_MAX_BUFFERS: usize = 8;
const SEND_POOL_MAX_BYTES: usize = 16 << 20;
static SEND_BUFFERS: BufferPool = BufferPool::new(SEND_POOL_MAX_BUFFERS, SEND_POOL_MAX_BYTES);


fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn parse_compression(name: &str) -> PyResult<Compression> {
    Compression::from_name(&name.to_ascii_lowercase()).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown compression {name:?}; use one of none, gzip, snappy, lz4, zstd"
        ))
    })
}

/// An open record batch for one partition (see `klog.client.producer`).
///
/// Not shared between threads without the GIL: every method runs to completion holding it, so an
/// append and the sender's `seal` never interleave.
#[pyclass(module = "klog._native._core")]
pub struct RecordAppender {
    batch: OpenBatch,
    compressed: bool,
    /// What `append_future` builds: `future_type((outcome, index))`, a tuple subclass.
    future_type: Option<Py<PyType>>,
    outcome: Option<Py<PyAny>>,
}

#[pymethods]
impl RecordAppender {
    /// `capacity`: bytes of encoded records the batch may take (its first record is always
    /// accepted); `compression`: the codec `finish` applies.
    /// `future_type` and `outcome` (both or neither): `append_future` returns
    /// `future_type((outcome, index))`; `future_type` must be a subclass of tuple.
    #[new]
    #[pyo3(signature = (capacity, compression="none", compression_level=None, future_type=None,
        outcome=None))]
    fn new(
        capacity: usize,
        compression: &str,
        compression_level: Option<i32>,
        future_type: Option<Bound<'_, PyType>>,
        outcome: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        if let Some(t) = &future_type {
            if !t.is_subclass_of::<PyTuple>()? {
                return Err(PyValueError::new_err("future_type must be a subclass of tuple"));
            }
        }
        if future_type.is_some() != outcome.is_some() {
            return Err(PyValueError::new_err("give both future_type and outcome, or neither"));
        }
        let codec = parse_compression(compression)?;
        Ok(RecordAppender {
            batch: OpenBatch::with_buffer(codec, compression_level, capacity, SEND_BUFFERS.take()),
            compressed: codec != Compression::None,
            future_type: future_type.map(|t| t.unbind()),
            outcome,
        })
    }

    /// Append a keyless or keyed record timestamped now and return its future,
    /// `future_type((outcome, index))`; None if the batch is full or sealed.
    fn append_future<'py>(
        slf: &Bound<'py, Self>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        const NONE: &[(&[u8], Option<&[u8]>)] = &[];
        let py = slf.py();
        // The borrow ends before any Python object is allocated: an allocation may run the GC, and
        // its finalizers may let another thread (the sender) in, which must find the appender free.
        let (index, ty, outcome) = {
            let mut me = slf.borrow_mut();
            let (ty, outcome) = match (&me.future_type, &me.outcome) {
                (Some(t), Some(o)) => (t.clone_ref(py), o.clone_ref(py)),
                _ => return Err(PyValueError::new_err("this appender was made without future_type")),
            };
            match me.batch.append(now_ms(), key, value, NONE).map_err(codec_err)? {
                Ok(i) => (i, ty, outcome),
                Err(_) => return Ok(None),
            }
        };
        let index = index.into_pyobject(py)?.into_any().unbind();
        // What tuple.__new__(future_type, (outcome, index)) does, without the Python call: the
        // subtype's tp_alloc for two items, then the items.
        // SAFETY: GIL held; a fresh tuple-subtype object whose two items are set once each
        // (PyTuple_SetItem steals the references).
        unsafe {
            let tp = ty.as_ptr() as *mut pyo3::ffi::PyTypeObject;
            let alloc = pyo3::ffi::PyType_GetSlot(tp, pyo3::ffi::Py_tp_alloc);
            let obj = if alloc.is_null() {
                pyo3::ffi::PyType_GenericAlloc(tp, 2)
            } else {
                let alloc: pyo3::ffi::allocfunc = std::mem::transmute(alloc);
                alloc(tp, 2)
            };
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            pyo3::ffi::PyTuple_SetItem(obj, 0, outcome.into_ptr());
            pyo3::ffi::PyTuple_SetItem(obj, 1, index.into_ptr());
            Ok(Some(Bound::from_owned_ptr(py, obj)))
        }
    }

    /// Append a record; returns its index in the batch, or -1 if the batch is full or sealed.
    /// `timestamp` -1 means now. `headers`: a list of `(str, bytes | None)`.
    #[pyo3(signature = (key, value, timestamp=-1, headers=None))]
    fn append(
        slf: &Bound<'_, Self>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: i64,
        headers: Option<Vec<(String, Option<Vec<u8>>)>>,
    ) -> PyResult<i64> {
        let ts = if timestamp < 0 { now_ms() } else { timestamp };
        // Arguments are converted before the borrow: no Python code runs while it is held.
        let mut me = slf.borrow_mut();
        let r = match headers {
            None => {
                const NONE: &[(&[u8], Option<&[u8]>)] = &[];
                me.batch.append(ts, key, value, NONE)
            }
            Some(h) => {
                let h: Vec<(&[u8], Option<&[u8]>)> = h
                    .iter()
                    .map(|(k, v)| (k.as_bytes(), v.as_deref()))
                    .collect();
                me.batch.append(ts, key, value, &h)
            }
        }
        .map_err(codec_err)?;
        Ok(match r {
            Ok(i) => i as i64,
            Err(_) => -1,
        })
    }

    /// Refuse further appends (the sender drained the batch).
    fn seal(&mut self) {
        self.batch.seal();
    }

    /// The whole encoded batch with these producer fields (compressed if the batch has a
    /// codec). Seals the batch; can be called once. With `reuse` (a list of bytearrays) the batch
    /// is a bytearray, written over one of them that nothing else references when there is one
    /// (see `encode_columns`); bytes otherwise.
    #[pyo3(signature = (producer_id, producer_epoch, base_sequence, reuse=None))]
    fn finish<'py>(
        slf: &Bound<'py, Self>,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        reuse: Option<&Bound<'py, PyList>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let (writer, compressed) = {
            let mut me = slf.borrow_mut();
            let compressed = me.compressed;
            let writer = me
                .batch
                .take()
                .ok_or_else(|| PyValueError::new_err("the batch was already finished"))?;
            (writer, compressed)
        };
        // Only compression is worth releasing the GIL for: an uncompressed batch is finished in
        // microseconds, while a thread that gives the GIL up waits up to the switch interval (5 ms)
        // to get it back from a thread busy sending. The borrow is released first either way.
        let detach = compressed && writer.records_size() >= DETACH_THRESHOLD;
        let out = run_detached_if(py, detach, || {
            finish_records(writer, producer_id, producer_epoch, base_sequence)
        })
        .map_err(codec_err)?;
        let obj = match reuse {
            Some(free) => match take_free_bytearray(free, out.len())? {
                Some((obj, buf)) => {
                    buf.copy_from_slice(&out);
                    obj
                }
                None => PyByteArray::new(py, &out).into_any(),
            },
            None => PyBytes::new(py, &out).into_any(),
        };
        SEND_BUFFERS.give(out);
        Ok(obj)
    }

    /// Records appended.
    fn __len__(&self) -> usize {
        self.batch.len()
    }

    /// Timestamp of record `index` (what its metadata reports under CreateTime).
    fn __getitem__(&self, index: isize) -> PyResult<i64> {
        let n = self.batch.len() as isize;
        let i = if index < 0 { index + n } else { index };
        if i < 0 {
            return Err(PyIndexError::new_err("record index out of range"));
        }
        self.batch
            .timestamp(i as usize)
            .ok_or_else(|| PyIndexError::new_err("record index out of range"))
    }

    /// Bytes of the encoded (uncompressed) batch so far, header included.
    #[getter]
    fn size(&self) -> usize {
        61 + self.batch.records_size()
    }

    #[getter]
    fn capacity(&self) -> usize {
        self.batch.capacity()
    }

    #[getter]
    fn sealed(&self) -> bool {
        self.batch.is_sealed()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordAppender>()?;
    m.add("RECORD_FRAMING_MAX", RECORD_FRAMING_MAX)?;
    Ok(())
}
