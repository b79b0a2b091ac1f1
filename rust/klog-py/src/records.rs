//! Record batch codec bindings: encode, decode to Python objects, decode to columns, CRC-32C,
//! murmur2. Heavy work (CRC, decompression, record parsing, compression) runs with the GIL
//! released once the input is large enough for that to pay off.

use std::time::{SystemTime, UNIX_EPOCH};

use klog_core::batch::{
    open_batch, parse_control_key, BatchSlices, BatchView, BatchWriter, Compression, DecodeOptions,
    EncodeOptions, RECORD_BATCH_OVERHEAD, set_producer_fields as set_producer_fields_core,
};
use klog_core::columnar::{decode_columns as decode_columns_core, BinaryColumn, ColumnarOptions};
use klog_core::columnar_encode::{
    partitions_for_keys as partitions_for_keys_core, ColumnsEncodeOptions, ColumnsError,
    ColumnsInput, Encoder, HeadersInput,
};
use klog_core::compression::DEFAULT_MAX_DECOMPRESSED_SIZE;
use klog_core::error::CodecError;
use pyo3::exceptions::{PyAttributeError, PyKeyError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyMapping, PyString, PyTuple, PyType};

use crate::errors::{codec_err, CorruptRecordError};
use crate::gil::{run_detached_if, DETACH_THRESHOLD};
use crate::inputs::{ByteInput, ExportedBuffer, Keep};

/// CRC-32C (Castagnoli) of a bytes-like object.
#[pyfunction]
fn crc32c(py: Python<'_>, data: ByteInput<'_>) -> u32 {
    let data = data.as_slice();
    run_detached_if(py, data.len() >= DETACH_THRESHOLD, || klog_core::crc::crc32c(data))
}

/// Kafka's murmur2 of `key` (Java's signed int result).
#[pyfunction]
fn murmur2(data: ByteInput<'_>) -> i32 {
    klog_core::murmur2::murmur2(data.as_slice())
}

/// Bytes of a key, value or header: borrowed from a Python `bytes` (kept alive by the Bound),
/// or copied (bytearray, whose contents may change, memoryview, header keys' UTF-8).
enum Val<'py> {
    Bytes(Bound<'py, PyBytes>),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Val<'_> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        match self {
            Val::Bytes(b) => b.as_bytes(),
            Val::Owned(v) => v,
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `bytes`, `bytearray` or any object with the buffer protocol.
#[inline]
fn extract_bytes<'py>(
    obj: Bound<'py, PyAny>,
    what: &str,
    index: usize,
) -> PyResult<Option<Val<'py>>> {
    if obj.is_none() {
        return Ok(None);
    }
    let obj = match obj.cast_into::<PyBytes>() {
        Ok(b) => return Ok(Some(Val::Bytes(b))),
        Err(e) => e.into_inner(),
    };
    if let Ok(ba) = obj.cast::<PyByteArray>() {
        return Ok(Some(Val::Owned(ba.to_vec())));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "record {index}: {what} must be bytes or None, not str (encode it first)"
        )));
    }
    let not_bytes = || {
        PyTypeError::new_err(format!(
            "record {index}: {what} must be bytes-like or None, not {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    };
    // Only objects with the buffer protocol: memoryview() refuses ints (bytes(int) would
    // allocate that many zeros) and lists of ints.
    let builtins = obj.py().import("builtins")?;
    let view = builtins
        .getattr("memoryview")?
        .call1((&obj,))
        .map_err(|_| not_bytes())?;
    let b = obj
        .py()
        .get_type::<PyBytes>()
        .call1((view,))
        .map_err(|_| not_bytes())?;
    Ok(Some(Val::Bytes(
        b.cast_into::<PyBytes>().map_err(|_| not_bytes())?,
    )))
}

/// How a record exposes its fields.
enum Shape<'a, 'py> {
    Dict(&'a Bound<'py, PyDict>),
    Mapping,
    Object,
}

/// Read attribute/item `name` of a record given as a mapping or an object; missing = None.
fn field<'py>(
    item: &Bound<'py, PyAny>,
    shape: &Shape<'_, 'py>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = item.py();
    let r = match shape {
        // No KeyError is raised (and thrown away) for missing keys of plain dicts.
        Shape::Dict(d) => return d.get_item(name),
        Shape::Mapping => item.get_item(name),
        Shape::Object => item.getattr(name),
    };
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e)
            if e.is_instance_of::<PyKeyError>(py) || e.is_instance_of::<PyAttributeError>(py) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// One record's fields, borrowed from its Python objects where possible.
struct RecordFields<'py> {
    timestamp: i64,
    key: Option<Val<'py>>,
    value: Option<Val<'py>>,
    headers: Vec<(Val<'py>, Option<Val<'py>>)>,
}

/// `is_mapping` caches the (slow, ABC-based) Mapping check per record type: records of one
/// batch almost always share a type.
fn extract_record<'py>(
    item: &Bound<'py, PyAny>,
    index: usize,
    now: i64,
    is_mapping: &mut Option<(Bound<'py, PyType>, bool)>,
) -> PyResult<RecordFields<'py>> {
    let py = item.py();
    let shape = if let Ok(d) = item.cast::<PyDict>() {
        Shape::Dict(d)
    } else {
        let ty = item.get_type();
        let mapping = match is_mapping {
            Some((t, m)) if t.is(&ty) => *m,
            _ => {
                let m = item.is_instance_of::<PyMapping>();
                *is_mapping = Some((ty, m));
                m
            }
        };
        if mapping {
            Shape::Mapping
        } else {
            Shape::Object
        }
    };
    let key = match field(item, &shape, intern!(py, "key"))? {
        Some(k) => extract_bytes(k, "key", index)?,
        None => None,
    };
    let value = match field(item, &shape, intern!(py, "value"))? {
        Some(v) => extract_bytes(v, "value", index)?,
        None => None,
    };
    let timestamp = match field(item, &shape, intern!(py, "timestamp"))? {
        Some(t) if !t.is_none() => t.extract::<i64>().map_err(|_| {
            PyTypeError::new_err(format!(
                "record {index}: timestamp must be an int (milliseconds since the epoch)"
            ))
        })?,
        _ => now,
    };
    let mut headers = Vec::new();
    if let Some(hs) = field(item, &shape, intern!(py, "headers"))? {
        if !hs.is_none() {
            for (j, h) in hs.try_iter()?.enumerate() {
                let h = h?;
                let pair: (Bound<'py, PyAny>, Bound<'py, PyAny>) = h.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "record {index}: header {j} must be a (str, bytes | None) pair"
                    ))
                })?;
                let k = if let Ok(s) = pair.0.cast::<PyString>() {
                    Val::Owned(s.to_str()?.as_bytes().to_vec())
                } else if let Ok(b) = pair.0.cast::<PyBytes>() {
                    Val::Bytes(b.clone())
                } else {
                    return Err(PyTypeError::new_err(format!(
                        "record {index}: header {j} key must be a str"
                    )));
                };
                let v = extract_bytes(pair.1, "header value", index)?;
                headers.push((k, v));
            }
        }
    }
    Ok(RecordFields {
        timestamp,
        key,
        value,
        headers,
    })
}

fn parse_compression(name: &str) -> PyResult<Compression> {
    Compression::from_name(&name.to_ascii_lowercase()).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown compression {name:?}; use one of none, gzip, snappy, lz4, zstd"
        ))
    })
}

fn parse_timestamp_type(name: &str) -> PyResult<bool> {
    match name.to_ascii_lowercase().as_str() {
        "create" | "create_time" | "createtime" => Ok(false),
        "log_append" | "log_append_time" | "logappendtime" => Ok(true),
        _ => Err(PyValueError::new_err(format!(
            "unknown timestamp_type {name:?}; use \"create\" or \"log_append\""
        ))),
    }
}

/// The batch options from the keywords `encode_batch` and `encode_columns` share (the same
/// names, defaults and checks); not a control batch, timestamps from the records.
#[allow(clippy::too_many_arguments)]
fn batch_options(
    compression: &str, compression_level: Option<i32>, base_offset: i64, partition_leader_epoch: i32,
    producer_id: i64, producer_epoch: i16, base_sequence: i32, is_transactional: bool, timestamp_type: &str,
) -> PyResult<EncodeOptions> {
    Ok(EncodeOptions {
        compression: parse_compression(compression)?,
        compression_level,
        base_offset,
        partition_leader_epoch,
        producer_id,
        producer_epoch,
        base_sequence,
        is_transactional,
        is_control: false,
        log_append_time: parse_timestamp_type(timestamp_type)?,
        base_timestamp: None,
        max_timestamp: None,
    })
}

/// Encode records into one record batch (magic v2). See `klog.records.encode_batch`.
#[pyfunction]
#[pyo3(signature = (records, *, compression="none", compression_level=None, base_offset=0,
    partition_leader_epoch=-1, producer_id=-1, producer_epoch=-1, base_sequence=-1,
    is_transactional=false, is_control=false, timestamp_type="create", base_timestamp=None,
    max_timestamp=None))]
#[allow(clippy::too_many_arguments)]
fn encode_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    compression: &str,
    compression_level: Option<i32>,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    is_transactional: bool,
    is_control: bool,
    timestamp_type: &str,
    base_timestamp: Option<i64>,
    max_timestamp: Option<i64>,
) -> PyResult<Bound<'py, PyBytes>> {
    let opts = EncodeOptions {
        is_control,
        base_timestamp,
        max_timestamp,
        ..batch_options(compression, compression_level, base_offset, partition_leader_epoch, producer_id,
            producer_epoch, base_sequence, is_transactional, timestamp_type)?
    };
    let now = now_ms();
    let hint = records.len().unwrap_or(0);
    let mut writer = BatchWriter::with_capacity(opts, hint.saturating_mul(64).min(1 << 26));
    let mut is_mapping = None;
    for (i, item) in records.try_iter()?.enumerate() {
        let r = extract_record(&item?, i, now, &mut is_mapping)?;
        writer
            .append(
                r.timestamp,
                r.key.as_ref().map(|k| k.as_ref()),
                r.value.as_ref().map(|v| v.as_ref()),
                &r.headers,
            )
            .map_err(codec_err)?;
    }
    if writer.is_empty() {
        return Err(PyValueError::new_err(
            "encode_batch needs at least one record",
        ));
    }
    // Compression and the CRC run without the GIL.
    let detach = writer.records_size() >= DETACH_THRESHOLD || opts.compression != Compression::None;
    let out = run_detached_if(py, detach, || writer.finish()).map_err(codec_err)?;
    Ok(PyBytes::new(py, &out))
}

/// One decoded record.
#[pyclass(frozen, get_all, module = "klog._native._core")]
pub struct Record {
    /// Absolute offset (batch base offset + offset delta).
    offset: i64,
    /// Milliseconds since the epoch (MaxTimestamp of the batch for LogAppendTime batches).
    timestamp: i64,
    key: Option<Py<PyBytes>>,
    value: Option<Py<PyBytes>>,
    /// `[(key: str, value: bytes | None), ...]`
    headers: Py<PyList>,
}

fn opt_bytes_eq(a: &Option<Py<PyBytes>>, b: &Option<Py<PyBytes>>, py: Python<'_>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.bind(py).as_bytes() == b.bind(py).as_bytes(),
        _ => false,
    }
}

#[pymethods]
impl Record {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Record(offset={}, timestamp={}, key={}, value={}, headers={})",
            self.offset,
            self.timestamp,
            self.key.as_ref().map_or(Ok("None".into()), |k| k
                .bind(py)
                .repr()
                .map(|r| r.to_string()))?,
            self.value.as_ref().map_or(Ok("None".into()), |v| v
                .bind(py)
                .repr()
                .map(|r| r.to_string()))?,
            self.headers.bind(py).repr()?
        ))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = other.py();
        let Ok(o) = other.cast::<Record>() else {
            return Ok(false);
        };
        let o = o.get();
        Ok(self.offset == o.offset
            && self.timestamp == o.timestamp
            && opt_bytes_eq(&self.key, &o.key, py)
            && opt_bytes_eq(&self.value, &o.value, py)
            && self.headers.bind(py).eq(o.headers.bind(py))?)
    }
}

/// One decoded record batch: its header fields and its records.
#[pyclass(frozen, get_all, module = "klog._native._core")]
pub struct Batch {
    /// Byte position of the batch in the decoded buffer.
    position: usize,
    /// Size of the whole batch in bytes (12 + length).
    size: usize,
    base_offset: i64,
    length: i32,
    partition_leader_epoch: i32,
    magic: i8,
    crc: u32,
    attributes: i16,
    last_offset_delta: i32,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    records_count: i32,
    /// "none", "gzip", "snappy", "lz4" or "zstd".
    compression: &'static str,
    /// "create" or "log_append".
    timestamp_type: &'static str,
    is_transactional: bool,
    is_control: bool,
    /// For control batches: the control record type (0 abort, 1 commit); else None.
    control_type: Option<i16>,
    records: Py<PyList>,
}

#[pymethods]
impl Batch {
    /// Offset of the last record slot (base_offset + last_offset_delta).
    #[getter]
    fn last_offset(&self) -> i64 {
        self.base_offset.wrapping_add(self.last_offset_delta as i64)
    }
    /// Offset just after this batch.
    #[getter]
    fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }
    fn __len__(&self, py: Python<'_>) -> usize {
        self.records.bind(py).len()
    }
    fn __repr__(&self) -> String {
        format!(
            "Batch(base_offset={}, records_count={}, last_offset_delta={}, compression='{}', \
             is_transactional={}, is_control={}, producer_id={}, size={})",
            self.base_offset,
            self.records_count,
            self.last_offset_delta,
            self.compression,
            py_bool(self.is_transactional),
            py_bool(self.is_control),
            self.producer_id,
            self.size
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

fn decode_options(
    verify_crc: bool,
    allow_partial_trailing: bool,
    allow_compacted: bool,
    max_decompressed_size: usize,
) -> DecodeOptions {
    DecodeOptions {
        verify_crc,
        allow_partial_trailing,
        allow_compacted,
        max_decompressed_size,
    }
}

/// Split, validate and decompress every batch, and validate every record (no Python objects).
fn open_all<'a>(
    data: &'a [u8],
    opts: &DecodeOptions,
) -> Result<Vec<(BatchView<'a>, Option<i16>)>, CodecError> {
    let mut out = Vec::new();
    for item in BatchSlices::new(data, opts.allow_partial_trailing) {
        let (at, bytes) = item?;
        let b = open_batch(bytes, at, opts)?;
        let control = b.validate_records()?;
        out.push((b, control));
    }
    Ok(out)
}

fn header_tuple<'py>(py: Python<'py>, k: &[u8], v: Option<&[u8]>) -> PyResult<Bound<'py, PyTuple>> {
    // Keys were checked to be UTF-8 while validating.
    let key = PyString::new(py, std::str::from_utf8(k).unwrap_or(""));
    let value: Bound<'py, PyAny> = match v {
        Some(v) => PyBytes::new(py, v).into_any(),
        None => py.None().into_bound(py),
    };
    PyTuple::new(py, [key.into_any(), value])
}

/// Decode every batch in `data` into `Batch` objects with `Record` objects.
/// See `klog.records.decode_batches`.
#[pyfunction]
#[pyo3(signature = (data, *, verify_crc=true, allow_partial_trailing=false, allow_compacted=false,
    max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, include_records=true))]
fn decode_batches<'py>(
    py: Python<'py>,
    data: ByteInput<'py>,
    verify_crc: bool,
    allow_partial_trailing: bool,
    allow_compacted: bool,
    max_decompressed_size: usize,
    include_records: bool,
) -> PyResult<Bound<'py, PyList>> {
    let data = data.as_slice();
    let opts = decode_options(
        verify_crc,
        allow_partial_trailing,
        allow_compacted,
        max_decompressed_size,
    );
    let views = run_detached_if(py, data.len() >= DETACH_THRESHOLD, || open_all(data, &opts))
        .map_err(codec_err)?;
    let out = PyList::empty(py);
    for (b, control_type) in &views {
        let h = &b.header;
        let records = PyList::empty(py);
        if include_records {
            for r in b.records() {
                let r = r.map_err(codec_err)?;
                let headers = PyList::empty(py);
                for (k, v) in r.headers() {
                    headers.append(header_tuple(py, k, v)?)?;
                }
                let rec = Record {
                    offset: h.base_offset.wrapping_add(r.offset_delta as i64),
                    timestamp: b.record_timestamp(r.timestamp_delta),
                    key: r.key.map(|k| PyBytes::new(py, k).unbind()),
                    value: r.value.map(|v| PyBytes::new(py, v).unbind()),
                    headers: headers.unbind(),
                };
                records.append(Bound::new(py, rec)?)?;
            }
        }
        let batch = Batch {
            position: b.position,
            size: h.size(),
            base_offset: h.base_offset,
            length: h.length,
            partition_leader_epoch: h.partition_leader_epoch,
            magic: h.magic,
            crc: h.crc,
            attributes: h.attributes,
            last_offset_delta: h.last_offset_delta,
            base_timestamp: h.base_timestamp,
            max_timestamp: h.max_timestamp,
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            records_count: h.records_count,
            compression: b.compression.name(),
            timestamp_type: if h.is_log_append_time() {
                "log_append"
            } else {
                "create"
            },
            is_transactional: h.is_transactional(),
            is_control: h.is_control(),
            control_type: *control_type,
            records: records.unbind(),
        };
        out.append(Bound::new(py, batch)?)?;
    }
    Ok(out)
}

/// A buffer owned by Rust and exposed to Python without copying: NumPy reads it through
/// `__array_interface__` (`numpy.asarray(buf)`), pyarrow through
/// `pyarrow.foreign_buffer(buf.address, buf.nbytes, base=buf)`. Both keep `buf` alive.
#[pyclass(frozen, module = "klog._native._core")]
pub struct NativeBuffer {
    data: NativeData,
}

enum NativeData {
    U8(Vec<u8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl NativeBuffer {
    fn parts(&self) -> (*const u8, usize, usize, char) {
        match &self.data {
            NativeData::U8(v) => (v.as_ptr(), v.len(), 1, 'u'),
            NativeData::I16(v) => (v.as_ptr().cast(), v.len(), 2, 'i'),
            NativeData::I32(v) => (v.as_ptr().cast(), v.len(), 4, 'i'),
            NativeData::I64(v) => (v.as_ptr().cast(), v.len(), 8, 'i'),
        }
    }
}

#[pymethods]
impl NativeBuffer {
    /// Address of the first byte (valid while this object lives).
    #[getter]
    fn address(&self) -> usize {
        self.parts().0 as usize
    }
    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        let (_, n, size, _) = self.parts();
        n * size
    }
    /// NumPy type string of one element, e.g. "<i8".
    #[getter]
    fn typestr(&self) -> String {
        let (_, _, size, kind) = self.parts();
        let order = if size == 1 {
            '|'
        } else if cfg!(target_endian = "little") {
            '<'
        } else {
            '>'
        };
        format!("{order}{kind}{size}")
    }
    /// Number of elements.
    fn __len__(&self) -> usize {
        self.parts().1
    }
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (ptr, n, _, _) = self.parts();
        let d = PyDict::new(py);
        d.set_item("shape", (n,))?;
        d.set_item("typestr", self.typestr())?;
        d.set_item("data", (ptr as usize, true))?;
        d.set_item("version", 3)?;
        Ok(d)
    }
    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let (ptr, n, size, _) = self.parts();
        if n == 0 {
            return PyBytes::new(py, b"");
        }
        // SAFETY: ptr/len describe this object's own live, initialised Vec.
        PyBytes::new(py, unsafe { std::slice::from_raw_parts(ptr, n * size) })
    }
    fn __repr__(&self) -> String {
        format!(
            "NativeBuffer(typestr={:?}, len={})",
            self.typestr(),
            self.parts().1
        )
    }
}

fn nb<'py>(py: Python<'py>, data: NativeData) -> PyResult<Bound<'py, NativeBuffer>> {
    Bound::new(py, NativeBuffer { data })
}

fn put_binary(
    py: Python<'_>,
    d: &Bound<'_, PyDict>,
    prefix: &str,
    col: BinaryColumn,
) -> PyResult<()> {
    d.set_item(format!("{prefix}_null_count"), col.null_count)?;
    d.set_item(
        format!("{prefix}_offsets"),
        nb(py, NativeData::I32(col.offsets))?,
    )?;
    d.set_item(format!("{prefix}_data"), nb(py, NativeData::U8(col.data))?)?;
    d.set_item(
        format!("{prefix}_validity"),
        nb(py, NativeData::U8(col.validity))?,
    )?;
    Ok(())
}

/// Decode every batch in `data` into column buffers (Arrow layouts for keys, values and
/// headers). Returns a dict of `NativeBuffer`s and counts; `klog.records.decode_columns` and
/// `decode_to_arrow` wrap them without copying.
#[pyfunction]
#[pyo3(signature = (data, *, verify_crc=true, allow_partial_trailing=false, allow_compacted=false,
    max_decompressed_size=DEFAULT_MAX_DECOMPRESSED_SIZE, skip_control=true, min_offset=None))]
#[allow(clippy::too_many_arguments)]
fn decode_columns<'py>(
    py: Python<'py>,
    data: ByteInput<'py>,
    verify_crc: bool,
    allow_partial_trailing: bool,
    allow_compacted: bool,
    max_decompressed_size: usize,
    skip_control: bool,
    min_offset: Option<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let data = data.as_slice();
    let opts = ColumnarOptions {
        decode: decode_options(
            verify_crc,
            allow_partial_trailing,
            allow_compacted,
            max_decompressed_size,
        ),
        skip_control,
        min_offset: min_offset.unwrap_or(i64::MIN),
    };
    let c = run_detached_if(py, data.len() >= DETACH_THRESHOLD, || {
        decode_columns_core(data, &opts)
    })
    .map_err(codec_err)?;
    let d = PyDict::new(py);
    d.set_item("num_rows", c.offsets.len())?;
    d.set_item("num_headers", c.header_keys.len())?;
    d.set_item("offsets", nb(py, NativeData::I64(c.offsets))?)?;
    d.set_item("timestamps", nb(py, NativeData::I64(c.timestamps))?)?;
    put_binary(py, &d, "key", c.keys)?;
    put_binary(py, &d, "value", c.values)?;
    d.set_item(
        "header_list_offsets",
        nb(py, NativeData::I32(c.header_offsets))?,
    )?;
    put_binary(py, &d, "header_key", c.header_keys)?;
    put_binary(py, &d, "header_value", c.header_values)?;
    let n = c.batches.len();
    let mut base_offset = Vec::with_capacity(n);
    let mut last_offset_delta = Vec::with_capacity(n);
    let mut position = Vec::with_capacity(n);
    let mut first_row = Vec::with_capacity(n);
    let mut num_rows = Vec::with_capacity(n);
    let mut ple = Vec::with_capacity(n);
    let mut attributes = Vec::with_capacity(n);
    let mut base_ts = Vec::with_capacity(n);
    let mut max_ts = Vec::with_capacity(n);
    let mut pid = Vec::with_capacity(n);
    let mut pepoch = Vec::with_capacity(n);
    let mut bseq = Vec::with_capacity(n);
    let mut count = Vec::with_capacity(n);
    let mut control = Vec::with_capacity(n);
    for b in &c.batches {
        let h = &b.header;
        base_offset.push(h.base_offset);
        last_offset_delta.push(h.last_offset_delta);
        position.push(b.position as i64);
        first_row.push(b.first_row as i64);
        num_rows.push(b.rows as i64);
        ple.push(h.partition_leader_epoch);
        attributes.push(h.attributes);
        base_ts.push(h.base_timestamp);
        max_ts.push(h.max_timestamp);
        pid.push(h.producer_id);
        pepoch.push(h.producer_epoch);
        bseq.push(h.base_sequence);
        count.push(h.records_count);
        control.push(b.control_type.unwrap_or(-1));
    }
    d.set_item("num_batches", n)?;
    d.set_item("batch_base_offset", nb(py, NativeData::I64(base_offset))?)?;
    d.set_item(
        "batch_last_offset_delta",
        nb(py, NativeData::I32(last_offset_delta))?,
    )?;
    d.set_item("batch_position", nb(py, NativeData::I64(position))?)?;
    d.set_item("batch_first_row", nb(py, NativeData::I64(first_row))?)?;
    d.set_item("batch_num_rows", nb(py, NativeData::I64(num_rows))?)?;
    d.set_item(
        "batch_partition_leader_epoch",
        nb(py, NativeData::I32(ple))?,
    )?;
    d.set_item("batch_attributes", nb(py, NativeData::I16(attributes))?)?;
    d.set_item("batch_base_timestamp", nb(py, NativeData::I64(base_ts))?)?;
    d.set_item("batch_max_timestamp", nb(py, NativeData::I64(max_ts))?)?;
    d.set_item("batch_producer_id", nb(py, NativeData::I64(pid))?)?;
    d.set_item("batch_producer_epoch", nb(py, NativeData::I16(pepoch))?)?;
    d.set_item("batch_base_sequence", nb(py, NativeData::I32(bseq))?)?;
    d.set_item("batch_records_count", nb(py, NativeData::I32(count))?)?;
    d.set_item("batch_control_type", nb(py, NativeData::I16(control))?)?;
    Ok(d)
}

/// Parse a control record key into `(version, type)`.
#[pyfunction]
fn parse_control_record_key(key: ByteInput<'_>) -> PyResult<(i16, i16)> {
    parse_control_key(Some(key.as_slice()), RECORD_BATCH_OVERHEAD).map_err(codec_err)
}

fn columns_err(e: ColumnsError) -> PyErr {
    match e {
        ColumnsError::Input { .. } => PyValueError::new_err(e.to_string()),
        ColumnsError::Encode { .. } => CorruptRecordError::new_err(e.to_string()),
    }
}

/// Encode columns as record batches (magic v2). See `klog.records.encode_columns`.
#[pyfunction]
#[pyo3(signature = (values, keys=None, *, timestamps=None, headers=None, shared_headers=None,
    rows=None, compression="none", compression_level=None, max_batch_bytes=None,
    max_batch_records=None, base_offset=0, partition_leader_epoch=-1, producer_id=-1,
    producer_epoch=-1, base_sequence=-1, is_transactional=false, timestamp_type="create",
    mutable=false, reuse=None))]
#[allow(clippy::too_many_arguments)]
fn encode_columns<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    keys: Option<&Bound<'py, PyAny>>,
    timestamps: Option<&Bound<'py, PyAny>>,
    headers: Option<&Bound<'py, PyAny>>,
    shared_headers: Option<&Bound<'py, PyAny>>,
    rows: Option<&Bound<'py, PyAny>>,
    compression: &str,
    compression_level: Option<i32>,
    max_batch_bytes: Option<usize>,
    max_batch_records: Option<usize>,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    is_transactional: bool,
    timestamp_type: &str,
    mutable: bool,
    reuse: Option<&Bound<'py, PyList>>,
) -> PyResult<Bound<'py, PyList>> {
    if reuse.is_some() && !mutable {
        return Err(PyValueError::new_err("reuse takes bytearrays: pass mutable=True with it"));
    }
    let opts = ColumnsEncodeOptions {
        batch: batch_options(compression, compression_level, base_offset, partition_leader_epoch, producer_id,
            producer_epoch, base_sequence, is_transactional, timestamp_type)?,
        max_batch_bytes: max_batch_bytes.unwrap_or(usize::MAX),
        max_batch_records: match max_batch_records {
            Some(0) => return Err(PyValueError::new_err("max_batch_records must be at least 1")),
            Some(n) => n,
            None => i32::MAX as usize,
        },
    };
    // `keep` owns every buffer the views in `input` borrow; it is dropped after them, with
    // the GIL held.
    let mut keep = Keep::default();
    let encoded = {
        let values = keep.binary(values, "values")?;
        let keys = match keys.filter(|k| !k.is_none()) {
            Some(k) => Some(keep.binary(k, "keys")?),
            None => None,
        };
        let timestamps = keep.timestamps(timestamps, now_ms())?;
        let mut headers = keep.headers(headers)?;
        let shared = keep.shared_headers(shared_headers)?;
        if !shared.is_empty() {
            headers = match headers {
                HeadersInput::None => HeadersInput::Shared(shared),
                _ => {
                    return Err(PyValueError::new_err(
                        "pass headers (one list per row) or shared_headers (one list for every row), not both",
                    ))
                }
            };
        }
        let rows = keep.rows(rows)?;
        let input = ColumnsInput {
            values,
            keys,
            timestamps,
            headers,
            rows,
        };
        let enc = Encoder::new(&input, &opts).map_err(columns_err)?;
        let big = opts.batch.compression != Compression::None || enc.rows() >= 1024;
        let plans = run_detached_if(py, big, || enc.plan()).map_err(columns_err)?;
        let out = PyList::empty(py);
        if opts.batch.compression == Compression::None {
            // Uncompressed batches are written straight into their Python objects, allocated
            // at their exact planned size (no copy afterwards).
            let mut objects = Vec::with_capacity(plans.len());
            let mut buffers: Vec<&mut [u8]> = Vec::with_capacity(plans.len());
            for p in &plans {
                let reused = match reuse {
                    Some(free) => take_free_bytearray(free, p.uncompressed_size())?,
                    None => None,
                };
                let (obj, buf) = match reused {
                    Some(r) => r,
                    None => new_output(py, p.uncompressed_size(), mutable)?,
                };
                objects.push(obj);
                buffers.push(buf);
            }
            let write_all = |buffers: Vec<&mut [u8]>| -> Result<(), ColumnsError> {
                for (p, b) in plans.iter().zip(buffers) {
                    enc.write_batch(p, b)?;
                }
                Ok(())
            };
            run_detached_if(py, big, || write_all(buffers)).map_err(columns_err)?;
            for (obj, p) in objects.into_iter().zip(&plans) {
                out.append((obj, p.count()))?;
            }
        } else {
            let encoded = py
                .detach(|| {
                    let mut scratch = Vec::new();
                    plans
                        .iter()
                        .map(|p| enc.encode_batch(p, &mut scratch))
                        .collect::<Result<Vec<_>, _>>()
                })
                .map_err(columns_err)?;
            for (b, p) in encoded.iter().zip(&plans) {
                let obj = if mutable {
                    PyByteArray::new(py, b).into_any()
                } else {
                    PyBytes::new(py, b).into_any()
                };
                out.append((obj, p.count()))?;
            }
        }
        out
    };
    drop(keep);
    Ok(encoded)
}

/// A bytearray taken out of `free`, resized to `len` bytes, and its buffer; None when `free`
/// holds none that can be reused. Only a bytearray nothing else references is reused (the list's
/// reference and ours are its only ones: a memoryview or any other export also holds a
/// reference), so no reader ever sees it rewritten; others stay in `free`. Among those, the
/// shortest at least `len` long is taken (its allocation fits: resizing keeps it, so no fresh
/// pages), else the longest (it grows the least). Never zero-fills: the caller overwrites every
/// byte.
pub(crate) fn take_free_bytearray<'py>(
    free: &Bound<'py, PyList>,
    len: usize,
) -> PyResult<Option<(Bound<'py, PyAny>, &'static mut [u8])>> {
    let py = free.py();
    let mut best: Option<(usize, usize)> = None; // (index, length)
    for (i, item) in free.iter().enumerate() {
        // `item` and the list: the only references of a buffer nobody else holds.
        if !item.is_exact_instance_of::<PyByteArray>() || unsafe { pyo3::ffi::Py_REFCNT(item.as_ptr()) } != 2 {
            continue;
        }
        let n = item.len()?;
        let better = match best {
            None => true,
            Some((_, b)) => {
                if b >= len {
                    n >= len && n < b
                } else {
                    n > b
                }
            }
        };
        if better {
            best = Some((i, n));
        }
    }
    let Some((index, _)) = best else {
        return Ok(None);
    };
    let obj = free.get_item(index)?;
    free.del_item(index)?;
    if unsafe { pyo3::ffi::Py_REFCNT(obj.as_ptr()) } != 1 {
        return Ok(None); // cannot happen with the GIL held; never rewrite a buffer someone reads
    }
    // SAFETY: GIL held; `obj` is an exact bytearray that only we reference, so no export
    // (memoryview, buffer) exists and resizing it cannot pull memory from under a reader. The
    // buffer lives as long as `obj`, which the caller keeps while writing.
    unsafe {
        if pyo3::ffi::PyByteArray_Resize(obj.as_ptr(), len as pyo3::ffi::Py_ssize_t) != 0 {
            return Err(PyErr::fetch(py));
        }
        let data = pyo3::ffi::PyByteArray_AsString(obj.as_ptr());
        if data.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(Some((obj, std::slice::from_raw_parts_mut(data as *mut u8, len))))
    }
}

/// A new `bytes` (or `bytearray` when `mutable`) of `len` bytes and its buffer, to be filled
/// before anyone else sees the object.
fn new_output<'py>(
    py: Python<'py>,
    len: usize,
    mutable: bool,
) -> PyResult<(Bound<'py, PyAny>, &'static mut [u8])> {
    let n = len as pyo3::ffi::Py_ssize_t;
    // SAFETY: the C API allocates an object of `len` uninitialised bytes (a NULL source), which
    // we own (new reference) and fill completely before returning it to Python; the buffer
    // lives as long as the object, which the caller keeps in `objects` while writing.
    unsafe {
        let ptr = if mutable {
            pyo3::ffi::PyByteArray_FromStringAndSize(std::ptr::null(), n)
        } else {
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), n)
        };
        let obj = Bound::from_owned_ptr_or_err(py, ptr)?;
        let data = if mutable {
            pyo3::ffi::PyByteArray_AsString(obj.as_ptr())
        } else {
            pyo3::ffi::PyBytes_AsString(obj.as_ptr())
        };
        if data.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok((obj, std::slice::from_raw_parts_mut(data as *mut u8, len)))
    }
}

/// Partition of each key by Kafka's default partitioner (murmur2), `null_partition` for null
/// keys. See `klog.records.partitions_for_keys`.
#[pyfunction]
#[pyo3(signature = (keys, num_partitions, *, null_partition=-1), text_signature = "(keys, num_partitions, *, null_partition=-1)")]
fn partitions_for_keys<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    num_partitions: u32,
    null_partition: i32,
) -> PyResult<Bound<'py, NativeBuffer>> {
    if num_partitions == 0 || num_partitions > i32::MAX as u32 {
        return Err(PyValueError::new_err(format!(
            "num_partitions must be between 1 and {}, not {num_partitions}",
            i32::MAX
        )));
    }
    let mut keep = Keep::default();
    let parts = {
        let keys = keep.binary(keys, "keys")?;
        run_detached_if(py, keys.len() >= 4096, || {
            partitions_for_keys_core(&keys, num_partitions, null_partition)
        })
    };
    drop(keep);
    nb(py, NativeData::I32(parts))
}

/// A copy of `batch` with new producer id, epoch and base sequence and a recomputed CRC.
#[pyfunction]
fn with_producer_fields<'py>(
    py: Python<'py>,
    batch: ByteInput<'py>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> PyResult<Bound<'py, PyBytes>> {
    let src = batch.as_slice();
    klog_core::batch::BatchHeader::parse(src, 0).map_err(codec_err)?;
    PyBytes::new_with(py, src.len(), |out| {
        out.copy_from_slice(src);
        set_producer_fields_core(out, producer_id, producer_epoch, base_sequence);
        Ok(())
    })
}

/// Set the producer id, epoch and base sequence of the batch in `batch` (a bytearray or other
/// writable buffer holding one whole batch) in place, and recompute its CRC.
#[pyfunction]
fn set_producer_fields(
    batch: &Bound<'_, PyAny>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> PyResult<()> {
    let mut buf = ExportedBuffer::writable(batch, "batch")?;
    let data = buf.bytes_mut();
    klog_core::batch::BatchHeader::parse(data, 0).map_err(codec_err)?;
    set_producer_fields_core(data, producer_id, producer_epoch, base_sequence);
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(set_producer_fields, m)?)?;
    m.add_function(wrap_pyfunction!(encode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(partitions_for_keys, m)?)?;
    m.add_function(wrap_pyfunction!(with_producer_fields, m)?)?;
    m.add_function(wrap_pyfunction!(crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(decode_batches, m)?)?;
    m.add_function(wrap_pyfunction!(parse_control_record_key, m)?)?;
    m.add_class::<Record>()?;
    m.add_class::<Batch>()?;
    m.add_class::<NativeBuffer>()?;
    m.add_function(wrap_pyfunction!(decode_columns, m)?)?;
    m.add(
        "DEFAULT_MAX_DECOMPRESSED_SIZE",
        DEFAULT_MAX_DECOMPRESSED_SIZE,
    )?;
    Ok(())
}
