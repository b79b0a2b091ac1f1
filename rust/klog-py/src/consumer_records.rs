//! `decode_records`: the records of a fetched buffer as the consumer's per-record tuples
//! (`klog.client.types.ConsumerRecord`), built in one native pass over the decoded columns.

use klog_core::batch::header::ATTR_TIMESTAMP_TYPE;
use klog_core::batch::records::DecodeOptions;
use klog_core::columnar::{decode_columns, BinaryColumn, ColumnarOptions};
use klog_core::compression::DEFAULT_MAX_DECOMPRESSED_SIZE;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

use crate::errors::codec_err;
use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::inputs::ByteInput;

/// Items of a record tuple: topic, partition, offset, timestamp, key, value, headers,
/// timestamp type, leader epoch.
const RECORD_FIELDS: isize = 9;

fn binary<'py>(py: Python<'py>, col: &BinaryColumn, i: usize) -> Bound<'py, PyAny> {
    if col.validity.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0) {
        let (s, e) = (col.offsets[i] as usize, col.offsets[i + 1] as usize);
        PyBytes::new(py, &col.data[s..e]).into_any()
    } else {
        py.None().into_bound(py)
    }
}

/// Turns Python's cyclic GC off while a large list of fresh, acyclic objects is built (each
/// allocation would otherwise count towards collections that scan them all); restored on drop.
struct GcPause(bool);

impl GcPause {
    fn new() -> Self {
        // SAFETY: called with the GIL held.
        GcPause(unsafe { ffi::PyGC_Disable() } != 0)
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: dropped with the GIL held (it lives inside a function holding it).
            unsafe { ffi::PyGC_Enable() };
        }
    }
}

/// Decode the record batches of `data` (a fetch response's records) into a list of
/// `record_type((topic, partition, offset, timestamp, key, value, headers, timestamp_type,
/// leader_epoch))`; `record_type` must be a tuple subclass taking those nine fields. Control
/// records and records below `min_offset` are left out. Options as for `decode_columns`.
#[pyfunction]
#[pyo3(signature = (data, record_type, topic, partition, *, min_offset=None, verify_crc=true,
    allow_partial_trailing=true, allow_compacted=true,
    max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE))]
#[allow(clippy::too_many_arguments)]
fn decode_records<'py>(
    py: Python<'py>,
    data: ByteInput<'py>,
    record_type: &Bound<'py, PyType>,
    topic: &Bound<'py, PyString>,
    partition: i32,
    min_offset: Option<i64>,
    verify_crc: bool,
    allow_partial_trailing: bool,
    allow_compacted: bool,
    max_decompressed_size: usize,
) -> PyResult<Bound<'py, PyList>> {
    if !record_type.is_subclass_of::<PyTuple>()? {
        return Err(PyValueError::new_err("record_type must be a subclass of tuple"));
    }
    let buf = data.as_slice();
    let opts = ColumnarOptions {
        decode: DecodeOptions {
            verify_crc,
            allow_partial_trailing,
            allow_compacted,
            max_decompressed_size,
        },
        skip_control: true,
        min_offset: min_offset.unwrap_or(i64::MIN),
    };
    let c = run_detached_if(py, buf.len() >= DETACH_THRESHOLD, || decode_columns(buf, &opts))
        .map_err(codec_err)?;
    drop(data);
    let n = c.offsets.len();
    let partition = partition.into_pyobject(py)?.into_any();
    let tp = record_type.as_ptr() as *mut ffi::PyTypeObject;
    // SAFETY: reading a slot of a live type object with the GIL held.
    let alloc: ffi::allocfunc = unsafe {
        let slot = ffi::PyType_GetSlot(tp, ffi::Py_tp_alloc);
        if slot.is_null() {
            ffi::PyType_GenericAlloc
        } else {
            std::mem::transmute::<*mut std::ffi::c_void, ffi::allocfunc>(slot)
        }
    };
    let _gc = GcPause::new();
    let mut out: Vec<Bound<'py, PyAny>> = Vec::with_capacity(n);
    for b in &c.batches {
        if b.rows == 0 {
            continue;
        }
        let log_append = b.header.attributes & ATTR_TIMESTAMP_TYPE != 0;
        let ts_type = (log_append as i32).into_pyobject(py)?.into_any();
        let epoch = b.header.partition_leader_epoch.into_pyobject(py)?.into_any();
        for i in b.first_row..b.first_row + b.rows {
            let headers = PyList::empty(py);
            let (hs, he) = (c.header_offsets[i] as usize, c.header_offsets[i + 1] as usize);
            for h in hs..he {
                let (ks, ke) = (
                    c.header_keys.offsets[h] as usize,
                    c.header_keys.offsets[h + 1] as usize,
                );
                // Header keys were checked to be UTF-8 while decoding.
                let key = std::str::from_utf8(&c.header_keys.data[ks..ke])
                    .map_err(|e| PyValueError::new_err(format!("header key: {e}")))?;
                let pair = PyTuple::new(
                    py,
                    [
                        PyString::new(py, key).into_any(),
                        binary(py, &c.header_values, h),
                    ],
                )?;
                headers.append(pair)?;
            }
            let items: [Bound<'py, PyAny>; RECORD_FIELDS as usize] = [
                topic.clone().into_any(),
                partition.clone(),
                c.offsets[i].into_pyobject(py)?.into_any(),
                c.timestamps[i].into_pyobject(py)?.into_any(),
                binary(py, &c.keys, i),
                binary(py, &c.values, i),
                headers.into_any(),
                ts_type.clone(),
                epoch.clone(),
            ];
            // What tuple.__new__(record_type, items) does, without building an argument tuple.
            // SAFETY: GIL held; a fresh tuple-subtype object of RECORD_FIELDS items, each set
            // once (PyTuple_SetItem steals the reference).
            let record = unsafe {
                let obj = alloc(tp, RECORD_FIELDS);
                if obj.is_null() {
                    return Err(PyErr::fetch(py));
                }
                for (j, item) in items.into_iter().enumerate() {
                    ffi::PyTuple_SetItem(obj, j as isize, item.into_ptr());
                }
                Bound::from_owned_ptr(py, obj)
            };
            out.push(record);
        }
    }
    PyList::new(py, out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    Ok(())
}
