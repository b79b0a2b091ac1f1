//! Partition log (storage engine) bindings: `LogConfig`, `PartitionLog`, `LogManager`,
//! read results as file ranges for `sendfile`, and a native `sendfile` helper.
//!
//! Every call that touches files releases the GIL. Warnings of the core (what recovery
//! dropped, which index was rebuilt) are forwarded to the `klog.storage` Python logger.

use std::cell::UnsafeCell;
use std::path::PathBuf;
use std::sync::Arc;

use klog_core::storage::cleaner::{self, CleanStats, CleanerConfig};
use klog_core::storage::{
    self as core, config::TimestampType, events, AppendInfo, FileRange, LogConfig as CoreConfig, StorageError as CoreError,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::CorruptRecordError;
use crate::validate::PyProducedBatch;

create_exception!(
    _core,
    StorageError,
    PyOSError,
    "A storage operation failed (I/O error such as a full disk, corrupt data on disk, closed log); the message names the file."
);
create_exception!(
    _core,
    CorruptLogError,
    StorageError,
    "Bytes of a segment file are damaged (failed CRC or header check outside recovery); the message names the file, byte position and offset. Nothing from there on is served."
);
create_exception!(
    _core,
    OffsetOutOfRange,
    PyValueError,
    "The offset is below the log start offset or above the log end offset."
);
create_exception!(
    _core,
    RecordTooLargeError,
    PyValueError,
    "A batch is larger than the topic's max.message.bytes."
);

fn err(e: CoreError) -> PyErr {
    let msg = e.to_string();
    match e {
        CoreError::Io { source, .. } => match source.raw_os_error() {
            Some(errno) => StorageError::new_err((errno, msg)),
            None => StorageError::new_err(msg),
        },
        CoreError::InvalidRecords(_) => CorruptRecordError::new_err(msg),
        CoreError::CorruptLog { .. } => CorruptLogError::new_err(msg),
        CoreError::Closed(_) => StorageError::new_err(msg),
        CoreError::OffsetOutOfRange { .. } | CoreError::DeleteBeyondHighWatermark { .. } => {
            OffsetOutOfRange::new_err(msg)
        }
        CoreError::RecordTooLarge { .. } => RecordTooLargeError::new_err(msg),
        CoreError::Config { .. } | CoreError::InvalidArgument(_) => PyValueError::new_err(msg),
    }
}

/// Forward queued core warnings to `logging.getLogger("klog.storage")`.
fn emit_warnings(py: Python<'_>) {
    let pending = events::take_warnings();
    if pending.is_empty() {
        return;
    }
    let logger = py
        .import("logging")
        .and_then(|m| m.getattr("getLogger"))
        .and_then(|f| f.call1(("klog.storage",)));
    for msg in pending {
        match &logger {
            Ok(l) => {
                let _ = l.call_method1("warning", (msg,));
            }
            Err(_) => eprintln!("klog.storage: {msg}"),
        }
    }
}

/// Run `f` without the GIL, then forward warnings and convert errors.
fn run<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, CoreError> + Send) -> PyResult<T> {
    let r = py.detach(f);
    emit_warnings(py);
    r.map_err(err)
}

/// Appends below this size run without releasing the GIL: for a small write the release and
/// re-acquire cost more than the work, and nothing under it waits for the GIL.
const DETACH_MIN_BYTES: usize = 64 * 1024;

/// Like `run`, but keeps the GIL for small inputs.
fn run_sized<T: Send>(py: Python<'_>, bytes: usize, f: impl FnOnce() -> Result<T, CoreError> + Send) -> PyResult<T> {
    if bytes >= DETACH_MIN_BYTES {
        return run(py, f);
    }
    let r = f();
    emit_warnings(py);
    r.map_err(err)
}

fn now_or(now_ms: Option<i64>) -> i64 {
    now_ms.unwrap_or_else(core::partition_log::now_ms)
}

/// Configuration of a partition log; Kafka topic-config names in snake_case.
#[pyclass(frozen, module = "klog._native", name = "LogConfig")]
#[derive(Clone)]
pub struct PyLogConfig {
    inner: CoreConfig,
}

#[pymethods]
impl PyLogConfig {
    #[new]
    #[pyo3(signature = (*, segment_bytes=1073741824, segment_ms=604800000, segment_index_bytes=10485760,
        index_interval_bytes=4096, retention_ms=604800000, retention_bytes=-1, flush_messages=None,
        flush_ms=None, message_timestamp_type="CreateTime", file_delete_delay_ms=60000, preallocate=false,
        max_message_bytes=1048588, cleanup_policy="delete", delete_retention_ms=86400000,
        min_cleanable_dirty_ratio=0.5, min_compaction_lag_ms=0, max_compaction_lag_ms=i64::MAX))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        segment_bytes: i64,
        segment_ms: i64,
        segment_index_bytes: i64,
        index_interval_bytes: i64,
        retention_ms: i64,
        retention_bytes: i64,
        flush_messages: Option<i64>,
        flush_ms: Option<i64>,
        message_timestamp_type: &str,
        file_delete_delay_ms: i64,
        preallocate: bool,
        max_message_bytes: i64,
        cleanup_policy: &str,
        delete_retention_ms: i64,
        min_cleanable_dirty_ratio: f64,
        min_compaction_lag_ms: i64,
        max_compaction_lag_ms: i64,
    ) -> PyResult<Self> {
        let (compact, delete) = CoreConfig::parse_cleanup_policy(cleanup_policy).map_err(err)?;
        let inner = CoreConfig {
            segment_bytes,
            segment_ms,
            segment_index_bytes,
            index_interval_bytes,
            retention_ms,
            retention_bytes,
            flush_messages,
            flush_ms,
            message_timestamp_type: TimestampType::parse(message_timestamp_type).map_err(err)?,
            file_delete_delay_ms,
            preallocate,
            max_message_bytes,
            compact,
            delete,
            delete_retention_ms,
            min_cleanable_dirty_ratio,
            min_compaction_lag_ms,
            max_compaction_lag_ms,
        };
        inner.validate().map_err(err)?;
        Ok(PyLogConfig { inner })
    }

    #[getter]
    fn segment_bytes(&self) -> i64 {
        self.inner.segment_bytes
    }
    #[getter]
    fn segment_ms(&self) -> i64 {
        self.inner.segment_ms
    }
    #[getter]
    fn segment_index_bytes(&self) -> i64 {
        self.inner.segment_index_bytes
    }
    #[getter]
    fn index_interval_bytes(&self) -> i64 {
        self.inner.index_interval_bytes
    }
    #[getter]
    fn retention_ms(&self) -> i64 {
        self.inner.retention_ms
    }
    #[getter]
    fn retention_bytes(&self) -> i64 {
        self.inner.retention_bytes
    }
    #[getter]
    fn flush_messages(&self) -> Option<i64> {
        self.inner.flush_messages
    }
    #[getter]
    fn flush_ms(&self) -> Option<i64> {
        self.inner.flush_ms
    }
    #[getter]
    fn message_timestamp_type(&self) -> &'static str {
        self.inner.message_timestamp_type.name()
    }
    #[getter]
    fn file_delete_delay_ms(&self) -> i64 {
        self.inner.file_delete_delay_ms
    }
    #[getter]
    fn preallocate(&self) -> bool {
        self.inner.preallocate
    }
    #[getter]
    fn max_message_bytes(&self) -> i64 {
        self.inner.max_message_bytes
    }
    /// Kafka's `cleanup.policy`: "delete", "compact" or "compact,delete".
    #[getter]
    fn cleanup_policy(&self) -> String {
        self.inner.cleanup_policy()
    }
    #[getter]
    fn delete_retention_ms(&self) -> i64 {
        self.inner.delete_retention_ms
    }
    #[getter]
    fn min_cleanable_dirty_ratio(&self) -> f64 {
        self.inner.min_cleanable_dirty_ratio
    }
    #[getter]
    fn min_compaction_lag_ms(&self) -> i64 {
        self.inner.min_compaction_lag_ms
    }
    #[getter]
    fn max_compaction_lag_ms(&self) -> i64 {
        self.inner.max_compaction_lag_ms
    }

    /// The settings as a dict of keyword arguments (`LogConfig(**c.to_dict())` round-trips).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let c = &self.inner;
        d.set_item("segment_bytes", c.segment_bytes)?;
        d.set_item("segment_ms", c.segment_ms)?;
        d.set_item("segment_index_bytes", c.segment_index_bytes)?;
        d.set_item("index_interval_bytes", c.index_interval_bytes)?;
        d.set_item("retention_ms", c.retention_ms)?;
        d.set_item("retention_bytes", c.retention_bytes)?;
        d.set_item("flush_messages", c.flush_messages)?;
        d.set_item("flush_ms", c.flush_ms)?;
        d.set_item("message_timestamp_type", c.message_timestamp_type.name())?;
        d.set_item("file_delete_delay_ms", c.file_delete_delay_ms)?;
        d.set_item("preallocate", c.preallocate)?;
        d.set_item("max_message_bytes", c.max_message_bytes)?;
        d.set_item("cleanup_policy", c.cleanup_policy())?;
        d.set_item("delete_retention_ms", c.delete_retention_ms)?;
        d.set_item("min_cleanable_dirty_ratio", c.min_cleanable_dirty_ratio)?;
        d.set_item("min_compaction_lag_ms", c.min_compaction_lag_ms)?;
        d.set_item("max_compaction_lag_ms", c.max_compaction_lag_ms)?;
        Ok(d)
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.inner == other.inner
    }

    fn __repr__(&self) -> String {
        let c = &self.inner;
        format!(
            "LogConfig(segment_bytes={}, segment_ms={}, segment_index_bytes={}, index_interval_bytes={}, \
             retention_ms={}, retention_bytes={}, flush_messages={}, flush_ms={}, message_timestamp_type={:?}, \
             file_delete_delay_ms={}, preallocate={}, max_message_bytes={}, cleanup_policy={:?}, \
             delete_retention_ms={}, min_cleanable_dirty_ratio={}, min_compaction_lag_ms={}, max_compaction_lag_ms={})",
            c.segment_bytes,
            c.segment_ms,
            c.segment_index_bytes,
            c.index_interval_bytes,
            c.retention_ms,
            c.retention_bytes,
            c.flush_messages.map_or("None".into(), |v| v.to_string()),
            c.flush_ms.map_or("None".into(), |v| v.to_string()),
            c.message_timestamp_type.name(),
            c.file_delete_delay_ms,
            if c.preallocate { "True" } else { "False" },
            c.max_message_bytes,
            c.cleanup_policy(),
            c.delete_retention_ms,
            c.min_cleanable_dirty_ratio,
            c.min_compaction_lag_ms,
            c.max_compaction_lag_ms,
        )
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &CleanStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("passes", s.passes)?;
    d.set_item("aborted", s.aborted)?;
    d.set_item("bytes_read", s.bytes_read)?;
    d.set_item("bytes_written", s.bytes_written)?;
    d.set_item("map_bytes_read", s.map_bytes_read)?;
    d.set_item("records_read", s.records_read)?;
    d.set_item("records_kept", s.records_kept)?;
    d.set_item("elapsed_secs", s.elapsed_secs)?;
    d.set_item("map_elapsed_secs", s.map_elapsed_secs)?;
    d.set_item("peak_map_bytes", s.peak_map_bytes)?;
    Ok(d)
}

#[allow(clippy::too_many_arguments)]
fn cleaner_config(
    threads: usize,
    dedupe_buffer_size: u64,
    dedupe_buffer_load_factor: f64,
    io_buffer_size: u64,
    backoff_ms: u64,
    producer_id_expiration_ms: i64,
    io_max_bytes_per_second: f64,
) -> PyResult<CleanerConfig> {
    let c = CleanerConfig {
        threads,
        dedupe_buffer_size,
        dedupe_buffer_load_factor,
        io_buffer_size,
        backoff_ms,
        producer_id_expiration_ms,
        io_max_bytes_per_second,
    };
    c.validate().map_err(err)?;
    Ok(c)
}

/// What an append did. Immutable as Python sees it; the object is recycled by the next append
/// of the same log when nothing else references it any more (see `ResultSlot`).
#[pyclass(frozen, module = "klog._native", name = "AppendResult")]
pub struct PyAppendResult {
    info: UnsafeCell<AppendInfo>,
}

// SAFETY: `info` is written only by `ResultSlot::fill`, with the GIL held and while the slot
// holds the only reference to the object (nobody can be reading it); reads happen with the GIL
// held. The extension is built for the GIL-enabled stable ABI (abi3), never free-threaded.
unsafe impl Sync for PyAppendResult {}

impl PyAppendResult {
    fn info(&self) -> &AppendInfo {
        // SAFETY: see the Sync impl: no write can be in progress while a reference exists.
        unsafe { &*self.info.get() }
    }
}

/// The last append result of a log, reused by the next append when its refcount shows that
/// the caller dropped it (as CPython's `zip`/`enumerate` reuse their result tuples): one
/// produce request then costs no object allocation. Accessed only with the GIL held.
struct ResultSlot(UnsafeCell<Option<Py<PyAppendResult>>>);

// SAFETY: only touched from #[pymethods] bodies with the GIL held (never inside `detach`), in
// the GIL-enabled build: access is serialized by the GIL.
unsafe impl Sync for ResultSlot {}

impl ResultSlot {
    fn new() -> Self {
        ResultSlot(UnsafeCell::new(None))
    }

    fn fill<'py>(&self, py: Python<'py>, info: AppendInfo) -> PyResult<Bound<'py, PyAppendResult>> {
        // SAFETY: GIL held (we have `py`) and no other reference into the slot is alive: this
        // function neither re-enters itself nor runs Python code while borrowing it.
        let slot = unsafe { &mut *self.0.get() };
        if let Some(obj) = slot.as_ref() {
            // SAFETY: a live object (held by the slot), GIL held.
            if unsafe { pyo3::ffi::Py_REFCNT(obj.as_ptr()) } == 1 {
                // Only the slot references it: nobody can observe the update.
                // SAFETY: see above; the object is not shared.
                unsafe { *obj.get().info.get() = info };
                return Ok(obj.bind(py).clone());
            }
        }
        let obj = untracked(Bound::new(py, PyAppendResult { info: UnsafeCell::new(info) })?)?;
        *slot = Some(obj.clone().unbind());
        Ok(obj)
    }
}

#[pymethods]
impl PyAppendResult {
    #[getter]
    fn base_offset(&self) -> i64 {
        self.info().base_offset
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.info().last_offset
    }
    #[getter]
    fn log_append_time(&self) -> i64 {
        self.info().log_append_time
    }
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.info().log_start_offset
    }
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.info().max_timestamp
    }
    #[getter]
    fn offset_of_max_timestamp(&self) -> i64 {
        self.info().offset_of_max_timestamp
    }
    #[getter]
    fn num_batches(&self) -> usize {
        self.info().num_batches
    }
    #[getter]
    fn num_bytes(&self) -> usize {
        self.info().bytes
    }
    fn __repr__(&self) -> String {
        let i = self.info();
        format!(
            "AppendResult(base_offset={}, last_offset={}, log_append_time={}, log_start_offset={}, max_timestamp={}, num_batches={})",
            i.base_offset, i.last_offset, i.log_append_time, i.log_start_offset, i.max_timestamp, i.num_batches
        )
    }
}

/// Stop the cycle collector from tracking an object that holds no Python references (it can
/// never be part of a cycle): one append result per produce must not drive GC passes.
pub(crate) fn untracked<T>(obj: Bound<'_, T>) -> PyResult<Bound<'_, T>> {
    // SAFETY: `obj` is a live object of a GC type created by PyO3; untracking is always
    // allowed and only skips it in collections.
    unsafe {
        if pyo3::ffi::PyObject_GC_IsTracked(obj.as_ptr()) != 0 {
            pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr() as *mut std::ffi::c_void);
        }
    }
    Ok(obj)
}

/// A byte range of an open segment file, for `os.sendfile`. The descriptor stays open as
/// long as this object lives.
#[pyclass(frozen, module = "klog._native", name = "FileSlice")]
pub struct PyFileSlice {
    range: FileRange,
}

impl PyFileSlice {
    pub(crate) fn range(&self) -> &FileRange {
        &self.range
    }
    /// A slice of `range` (the native Fetch path's records).
    pub(crate) fn of(range: FileRange) -> Self {
        PyFileSlice { range }
    }
}

#[pymethods]
impl PyFileSlice {
    #[getter]
    fn fd(&self) -> i64 {
        #[cfg(unix)]
        {
            use std::os::unix::io::AsRawFd;
            self.range.file.as_raw_fd() as i64
        }
        #[cfg(not(unix))]
        {
            -1
        }
    }
    #[getter]
    fn position(&self) -> u64 {
        self.range.position
    }
    #[getter]
    fn length(&self) -> u64 {
        self.range.length
    }
    #[getter]
    fn path(&self) -> String {
        self.range.path.to_string_lossy().into_owned()
    }
    /// Copy the range into a new bytes object.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        ranges_to_bytes(py, std::slice::from_ref(&self.range))
    }
    fn __repr__(&self) -> String {
        format!(
            "FileSlice(path={:?}, position={}, length={})",
            self.range.path.display().to_string(),
            self.range.position,
            self.range.length
        )
    }
}

/// Read the ranges back to back into `out` (exactly their total length).
fn read_ranges_into(ranges: &[FileRange], out: &mut [u8]) -> Result<(), CoreError> {
    let mut at = 0usize;
    for r in ranges {
        let dst = &mut out[at..at + r.length as usize];
        let n = core::fileio::pread_some(&r.file, dst, r.position).map_err(|e| CoreError::io("read", &r.path, e))?;
        if n < dst.len() {
            return Err(CoreError::corrupt(
                &r.path,
                r.position + n as u64,
                format!("segment ended after {n} of {} bytes (truncated since the read)", dst.len()),
            ));
        }
        at += r.length as usize;
    }
    Ok(())
}

/// The ranges as one new bytes object, read straight into it (one copy, page cache to bytes),
/// without the GIL.
pub(crate) fn ranges_to_bytes<'py>(py: Python<'py>, ranges: &[FileRange]) -> PyResult<Bound<'py, PyBytes>> {
    let total: u64 = ranges.iter().map(|r| r.length).sum();
    let mut failure: Option<CoreError> = None;
    let bytes = PyBytes::new_with(py, total as usize, |buf| {
        // The bytes object is not visible to any other thread until it is returned.
        if let Err(e) = py.detach(|| read_ranges_into(ranges, buf)) {
            failure = Some(e);
        }
        Ok(())
    })?;
    emit_warnings(py);
    match failure {
        Some(e) => Err(err(e)),
        None => Ok(bytes),
    }
}

/// The result of a read: whole batches as file ranges, plus the partition's offsets.
#[pyclass(frozen, module = "klog._native", name = "ReadResult")]
pub struct PyReadResult {
    ranges: Vec<FileRange>,
    high_watermark: i64,
    log_start_offset: i64,
    log_end_offset: i64,
}

#[pymethods]
impl PyReadResult {
    #[getter]
    fn slices(&self) -> Vec<PyFileSlice> {
        self.ranges.iter().map(|r| PyFileSlice { range: r.clone() }).collect()
    }
    #[getter]
    fn length(&self) -> u64 {
        self.ranges.iter().map(|r| r.length).sum()
    }
    #[getter]
    fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    #[getter]
    fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    /// Copy the batches into one bytes object (the path without sendfile).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        ranges_to_bytes(py, &self.ranges)
    }
    fn __len__(&self) -> usize {
        self.length() as usize
    }
    fn __repr__(&self) -> String {
        format!(
            "ReadResult(length={}, slices={}, high_watermark={}, log_start_offset={}, log_end_offset={})",
            self.length(),
            self.ranges.len(),
            self.high_watermark,
            self.log_start_offset,
            self.log_end_offset
        )
    }
}

/// `Py_buffer` as CPython lays it out (3.10 and later; in the stable ABI from 3.11).
#[repr(C)]
struct RawBuffer {
    buf: *mut std::ffi::c_void,
    obj: *mut pyo3::ffi::PyObject,
    len: pyo3::ffi::Py_ssize_t,
    itemsize: pyo3::ffi::Py_ssize_t,
    readonly: std::ffi::c_int,
    ndim: std::ffi::c_int,
    format: *mut std::ffi::c_char,
    shape: *mut pyo3::ffi::Py_ssize_t,
    strides: *mut pyo3::ffi::Py_ssize_t,
    suboffsets: *mut pyo3::ffi::Py_ssize_t,
    internal: *mut std::ffi::c_void,
}

// The buffer protocol joined the limited API in 3.11; CPython 3.10 exports the same functions
// with the same struct, so the abi3-py310 build declares them itself.
extern "C" {
    fn PyObject_GetBuffer(obj: *mut pyo3::ffi::PyObject, view: *mut RawBuffer, flags: std::ffi::c_int) -> std::ffi::c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}
/// `PyBUF_SIMPLE`: a contiguous byte buffer, no format or shape.
const PYBUF_SIMPLE: std::ffi::c_int = 0;

/// An exported buffer, released (with the GIL held) on drop.
struct ExportedBuffer {
    view: Box<RawBuffer>,
}

impl Drop for ExportedBuffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer; `Records` (which owns
        // this) lives in a #[pymethods] frame, so the GIL is held here.
        unsafe { PyBuffer_Release(&mut *self.view) };
    }
}

/// The bytes of a bytes-like argument, borrowed without a copy: `bytes` and `bytearray`
/// directly, anything else (memoryview slices of a request buffer, ...) through the buffer
/// protocol, which must give a C-contiguous buffer.
enum Records<'py> {
    Bytes(Bound<'py, PyBytes>),
    Buffer(ExportedBuffer, std::marker::PhantomData<&'py ()>),
}

impl<'py> Records<'py> {
    fn from(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(Records::Bytes(b.clone()));
        }
        // A bytearray goes through the buffer protocol: the export stops it from being resized
        // (BufferError) while the append reads it with the GIL released.
        // SAFETY: zeroed is a valid "empty" Py_buffer; GetBuffer fills it or fails.
        let mut view: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: obj is a live object; the GIL is held (we have a Bound).
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, PYBUF_SIMPLE) } != 0 {
            let cause = PyErr::take(obj.py());
            let e = pyo3::exceptions::PyTypeError::new_err("records must be a contiguous bytes-like object");
            if let Some(c) = cause {
                e.set_cause(obj.py(), Some(c));
            }
            return Err(e);
        }
        Ok(Records::Buffer(ExportedBuffer { view }, std::marker::PhantomData))
    }

    /// SAFETY (bytearray, buffers): the caller must not resize or write the object during the
    /// call; the slice is read while the GIL is released, as with any buffer consumer.
    fn slice(&self) -> &[u8] {
        match self {
            Records::Bytes(b) => b.as_bytes(),
            Records::Buffer(e, _) => {
                let v = &e.view;
                if v.buf.is_null() || v.len <= 0 {
                    return &[];
                }
                // SAFETY: the exporter guarantees `len` readable bytes at `buf` until release.
                unsafe { std::slice::from_raw_parts(v.buf as *const u8, v.len as usize) }
            }
        }
    }
}

/// One partition's log.
#[pyclass(frozen, module = "klog._native", name = "PartitionLog")]
pub struct PyPartitionLog {
    log: Arc<core::PartitionLog>,
    last_result: ResultSlot,
}

impl PyPartitionLog {
    /// The log itself, for the native Produce path's routes.
    pub(crate) fn shared_log(&self) -> Arc<core::PartitionLog> {
        Arc::clone(&self.log)
    }
}

#[pymethods]
impl PyPartitionLog {
    #[getter]
    fn topic(&self) -> &str {
        self.log.topic()
    }
    #[getter]
    fn partition(&self) -> i32 {
        self.log.partition()
    }
    #[getter]
    fn dir(&self) -> String {
        self.log.dir().to_string_lossy().into_owned()
    }
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }
    #[getter]
    fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }
    #[getter]
    fn high_watermark(&self) -> i64 {
        self.log.high_watermark()
    }
    #[setter]
    fn set_high_watermark(&self, value: i64) {
        self.log.set_high_watermark(value);
    }
    /// Raise the high watermark to `value` (clamped to the log), never lower it: the high watermark
    /// now. A one-replica log's two writers (the native front and the broker's mirror) each raise it to
    /// a log end read a moment before: a plain set by the one that read the older end moved it back.
    fn raise_high_watermark(&self, value: i64) -> i64 {
        self.log.raise_high_watermark(value)
    }
    /// The first offset of a transaction still open or whose marker the ISR lacks: the cleaner
    /// stops below it.
    #[getter]
    fn first_unstable_offset(&self) -> i64 {
        self.log.first_unstable_offset()
    }
    #[setter]
    fn set_first_unstable_offset(&self, value: i64) {
        self.log.set_first_unstable_offset(value);
    }
    /// The aborted transactions whose markers are in the log, (producer id, first offset, marker
    /// offset) oldest marker first, as the broker's transaction state lists them: the native Fetch
    /// path tells a read_committed consumer the ones its fetch overlaps.
    #[getter]
    fn aborted_transactions(&self) -> Vec<(i64, i64, i64)> {
        self.log.aborted_transactions().iter().map(|a| (a.producer_id, a.first_offset, a.marker_offset)).collect()
    }
    /// The partition's producer table (the broker's `ProducerStateManager` sets it when the log
    /// opens): the native Produce paths check and record idempotent producers' batches in it.
    #[setter]
    fn set_producers(&self, table: Option<PyRef<'_, crate::producer_state::PyProducerTable>>) {
        self.log.set_producers(table.map(|t| t.shared()));
    }
    #[getter]
    fn producers(&self) -> Option<crate::producer_state::PyProducerTable> {
        self.log.producers().map(crate::producer_state::PyProducerTable::from_shared)
    }
    /// One more aborted transaction, its marker after the others' (a marker just ended it).
    fn add_aborted_transaction(&self, producer_id: i64, first_offset: i64, marker_offset: i64) {
        self.log.add_aborted_transaction(core::AbortedTransaction { producer_id, first_offset, marker_offset });
    }
    #[setter]
    fn set_aborted_transactions(&self, aborted: Vec<(i64, i64, i64)>) {
        self.log.set_aborted_transactions(
            aborted
                .into_iter()
                .map(|(producer_id, first_offset, marker_offset)| core::AbortedTransaction { producer_id, first_offset, marker_offset })
                .collect(),
        );
    }
    /// The broker waits for this log's high watermark in Python (a long poll there): the native
    /// front, which moves the high watermark of logs with one replica itself, then wakes the broker
    /// at once rather than within its accounting interval.
    #[getter]
    fn high_watermark_waited(&self) -> bool {
        self.log.high_watermark_waited()
    }
    #[setter]
    fn set_high_watermark_waited(&self, waited: bool) {
        self.log.set_high_watermark_waited(waited);
    }
    #[getter]
    fn recovery_point(&self) -> i64 {
        self.log.recovery_point()
    }
    /// True once every call raises StorageError (log closed): closed, deleted, or closed by a full
    /// truncation that failed midway (until a restart).
    #[getter]
    fn closed(&self) -> bool {
        self.log.is_closed()
    }
    #[getter]
    fn config(&self) -> PyResult<PyLogConfig> {
        Ok(PyLogConfig { inner: (*self.log.config().map_err(err)?).clone() })
    }

    /// Append batches as the leader (offsets assigned here): `records`, or the batch of a
    /// Produce partition as `validate_produce_batch` accepted it (its header is not parsed again).
    #[pyo3(signature = (records, *, leader_epoch, now_ms=None))]
    fn append<'py>(
        &self,
        py: Python<'py>,
        records: &Bound<'_, PyAny>,
        leader_epoch: i32,
        now_ms: Option<i64>,
    ) -> PyResult<Bound<'py, PyAppendResult>> {
        let now = core::partition_log::LazyNow::new(now_ms);
        let log = &*self.log;
        let info = if let Ok(produced) = records.cast::<PyProducedBatch>() {
            let produced = produced.get();
            let batch = produced.batch;
            let records = Records::from(produced.records.bind(py))?;
            let data = records.slice();
            run_sized(py, data.len(), move || log.append_produced(data, &batch, leader_epoch, &now))?
        } else {
            let records = Records::from(records)?;
            let data = records.slice();
            run_sized(py, data.len(), move || log.append_at(data, leader_epoch, &now))?
        };
        self.last_result.fill(py, info)
    }

    /// Append batches keeping their offsets (replication).
    fn append_as_follower<'py>(&self, py: Python<'py>, records: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAppendResult>> {
        let records = Records::from(records)?;
        let data = records.slice();
        let log = &*self.log;
        let info = run_sized(py, data.len(), move || log.append_as_follower(data))?;
        self.last_result.fill(py, info)
    }

    #[pyo3(signature = (offset, max_bytes, *, max_offset=None, min_one_batch=true))]
    fn read(
        &self,
        py: Python<'_>,
        offset: i64,
        max_bytes: i64,
        max_offset: Option<i64>,
        min_one_batch: bool,
    ) -> PyResult<PyReadResult> {
        if max_bytes < 0 {
            return Err(PyValueError::new_err(format!("max_bytes must be >= 0, got {max_bytes}")));
        }
        let log = self.log.clone();
        let r = run(py, move || log.read(offset, max_bytes as u64, max_offset, min_one_batch))?;
        Ok(PyReadResult {
            ranges: r.range.into_iter().collect(),
            high_watermark: r.high_watermark,
            log_start_offset: r.log_start_offset,
            log_end_offset: r.log_end_offset,
        })
    }

    fn offset_for_timestamp(&self, py: Python<'_>, timestamp_ms: i64) -> PyResult<Option<(i64, i64)>> {
        let log = self.log.clone();
        run(py, move || log.offset_for_timestamp(timestamp_ms))
    }

    fn max_timestamp_offset(&self, py: Python<'_>) -> PyResult<(i64, i64)> {
        let log = self.log.clone();
        run(py, move || log.max_timestamp_offset())
    }

    fn delete_records_before(&self, py: Python<'_>, offset: i64) -> PyResult<i64> {
        let log = self.log.clone();
        run(py, move || log.delete_records_before(offset))
    }

    fn truncate_to(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.truncate_to(offset))
    }

    /// Empty the log and restart it at `offset`: log start, log end, recovery point and high
    /// watermark all `offset`, the epoch cache cleared (Kafka's truncateFullyAndStartAt).
    fn truncate_fully_and_start_at(&self, py: Python<'_>, offset: i64) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.truncate_fully_and_start_at(offset))
    }

    #[pyo3(signature = (now_ms=None))]
    fn apply_retention(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<usize> {
        let log = self.log.clone();
        let now = now_or(now_ms);
        run(py, move || log.apply_retention(now))
    }

    /// Remove this log's `*.deleted` files whose `file_delete_delay_ms` has passed.
    #[pyo3(signature = (now_ms=None))]
    fn delete_expired_files(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<usize> {
        let log = self.log.clone();
        let now = now_or(now_ms);
        run(py, move || log.delete_expired_files(now))
    }

    /// Paths of deleted segments' files still waiting for `file_delete_delay_ms`.
    fn pending_deleted_files(&self) -> Vec<String> {
        self.log.pending_deleted_files().iter().map(|p| p.to_string_lossy().into_owned()).collect()
    }

    fn roll(&self, py: Python<'_>) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.roll())
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.flush())
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.close())
    }

    fn update_config(&self, config: &PyLogConfig) -> PyResult<()> {
        self.log.update_config(config.inner.clone()).map_err(err)
    }

    /// Record the topic's id (Kafka's base64 form) in the log directory's `partition.metadata`
    /// unless it names it already (ValueError if it names another).
    fn assign_topic_id(&self, py: Python<'_>, topic_id: String) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.assign_topic_id(&topic_id))
    }

    /// The topic id (Kafka's base64 form) the log directory's `partition.metadata` names; None without
    /// the file (CorruptLogError when it cannot be read as one).
    fn recorded_topic_id(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let log = self.log.clone();
        run(py, move || log.recorded_topic_id())
    }

    fn leader_epoch_entries(&self) -> PyResult<Vec<(i32, i64)>> {
        self.log.leader_epoch_entries().map_err(err)
    }

    /// Record that leader epoch `epoch` starts at the log end (done once when the partition is created,
    /// so the first append writes no epoch checkpoint).
    fn assign_epoch_start(&self, py: Python<'_>, epoch: i32) -> PyResult<()> {
        let log = self.log.clone();
        run(py, move || log.assign_epoch_start(epoch))
    }

    /// One log cleaner pass now, whatever the dirty ratio (the broker's cleaner threads pick logs
    /// by it): cleans from `first_dirty_offset` (default: the log start) up to the first
    /// uncleanable offset with a key map of at most `dedupe_buffer_size` bytes. Returns (the new
    /// first dirty offset, counters), or None if the log changed meanwhile.
    #[pyo3(signature = (first_dirty_offset=None, *, now_ms=None, dedupe_buffer_size=134217728,
        dedupe_buffer_load_factor=0.9, io_buffer_size=524288, producer_id_expiration_ms=86400000))]
    #[allow(clippy::too_many_arguments)]
    fn clean<'py>(
        &self,
        py: Python<'py>,
        first_dirty_offset: Option<i64>,
        now_ms: Option<i64>,
        dedupe_buffer_size: u64,
        dedupe_buffer_load_factor: f64,
        io_buffer_size: u64,
        producer_id_expiration_ms: i64,
    ) -> PyResult<Option<(i64, Bound<'py, PyDict>)>> {
        let cfg = cleaner_config(1, dedupe_buffer_size, dedupe_buffer_load_factor, io_buffer_size, 0, producer_id_expiration_ms, f64::MAX)?;
        let log = self.log.clone();
        let now = now_or(now_ms);
        let r = run(py, move || {
            let view = log.cleaner_view()?;
            let plan = cleaner::plan(&log, &view, first_dirty_offset, now)?;
            let unlimited = cleaner::throttle::IoThrottle::unlimited();
            cleaner::clean_log(&log, &plan, &cfg, cfg.map_bytes_per_thread(), now, &unlimited, &std::sync::atomic::AtomicBool::new(false))
        })?;
        match r {
            Some((end, stats)) => Ok(Some((end, stats_dict(py, &stats)?))),
            None => Ok(None),
        }
    }

    /// Base offsets of the segments, oldest first.
    fn segment_base_offsets(&self) -> PyResult<Vec<i64>> {
        self.log.segment_bases().map_err(err)
    }

    /// Total bytes of the `.log` files.
    #[getter]
    fn size_in_bytes(&self, py: Python<'_>) -> PyResult<u64> {
        let log = self.log.clone();
        run(py, move || log.segment_stats().map(|(_, b)| b))
    }

    fn __repr__(&self) -> String {
        format!(
            "PartitionLog({}-{}, log_start_offset={}, log_end_offset={}, high_watermark={})",
            self.log.topic(),
            self.log.partition(),
            self.log.log_start_offset(),
            self.log.log_end_offset(),
            self.log.high_watermark()
        )
    }
}

/// All partition logs of a broker, across its log dirs.
#[pyclass(frozen, module = "klog._native", name = "LogManager")]
pub struct PyLogManager {
    mgr: Arc<core::LogManager>,
}

#[pymethods]
impl PyLogManager {
    /// `max_open_segment_files`: at most this many sealed segments keep their `.log` open (the
    /// least recently used idle ones are closed and reopened on demand); default 10,000, at most
    /// half the process's descriptor limit.
    #[new]
    /// `excluded_topics`: partition directories of these topics are not opened (they belong to
    /// another owner, e.g. the Raft layer's `__cluster_metadata-0`). `offline_dirs`: log dir ->
    /// why it is offline from the start (never read nor written); a log dir that cannot be made,
    /// listed or loaded starts offline too.
    #[pyo3(signature = (log_dirs, default_config, *, max_open_segment_files=None, excluded_topics=None, offline_dirs=None))]
    fn new(
        py: Python<'_>,
        log_dirs: Vec<PathBuf>,
        default_config: &PyLogConfig,
        max_open_segment_files: Option<i64>,
        excluded_topics: Option<Vec<String>>,
        offline_dirs: Option<std::collections::HashMap<PathBuf, String>>,
    ) -> PyResult<Self> {
        let excluded = excluded_topics.unwrap_or_default();
        let offline: Vec<(PathBuf, String)> = offline_dirs.unwrap_or_default().into_iter().collect();
        let cfg = default_config.inner.clone();
        let max = match max_open_segment_files {
            Some(n) if n < 1 => {
                return Err(PyValueError::new_err(format!("max_open_segment_files must be >= 1, got {n}")))
            }
            Some(n) => Some(n as usize),
            None => None,
        };
        let mgr = run(py, move || core::LogManager::open_with_offline(&log_dirs, cfg, max, &excluded, &offline))?;
        Ok(PyLogManager { mgr: Arc::new(mgr) })
    }

    /// (bound, currently open) descriptors of sealed segments.
    #[getter]
    fn open_segment_files(&self) -> (usize, usize) {
        self.mgr.open_segment_files()
    }

    #[getter]
    fn log_dirs(&self) -> Vec<String> {
        self.mgr.log_dirs().iter().map(|p| p.to_string_lossy().into_owned()).collect()
    }

    #[getter]
    fn default_config(&self) -> PyLogConfig {
        PyLogConfig { inner: self.mgr.default_config() }
    }

    fn get(&self, topic: &str, partition: i32) -> Option<PyPartitionLog> {
        self.mgr.get(topic, partition).map(|log| PyPartitionLog { log, last_result: ResultSlot::new() })
    }

    /// The partition's log, made (if it does not exist) in `log_dir` when given (one of the online
    /// log dirs), else in the online log dir holding the fewest partitions.
    #[pyo3(signature = (topic, partition, config=None, log_dir=None))]
    fn create(&self, py: Python<'_>, topic: String, partition: i32, config: Option<PyRef<'_, PyLogConfig>>, log_dir: Option<PathBuf>) -> PyResult<PyPartitionLog> {
        let mgr = self.mgr.clone();
        let cfg = config.map(|c| c.inner.clone());
        let log = run(py, move || mgr.create_in(&topic, partition, cfg, log_dir.as_deref()))?;
        Ok(PyPartitionLog { log, last_result: ResultSlot::new() })
    }

    /// Delete the partitions of the topic numbered `first_partition` and up (all by default);
    /// returns how many there were.
    #[pyo3(signature = (topic, *, first_partition=0))]
    fn delete_topic(&self, py: Python<'_>, topic: String, first_partition: i32) -> PyResult<usize> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.delete_partitions(&topic, first_partition))
    }

    /// Delete one partition's log (renamed now, its files removed after `file_delete_delay_ms`);
    /// returns whether it was there.
    fn delete_partition(&self, py: Python<'_>, topic: String, partition: i32) -> PyResult<bool> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.delete_partition(&topic, partition))
    }

    /// Stop serving one partition's log and rename its directory `<topic>-<p>.<id>-stray`, its files
    /// kept (a stray log, as Kafka's); the renamed directory, None when the log was not open.
    fn mark_stray(&self, py: Python<'_>, topic: String, partition: i32) -> PyResult<Option<String>> {
        let mgr = self.mgr.clone();
        let renamed = run(py, move || mgr.mark_stray(&topic, partition))?;
        Ok(renamed.map(|p| p.to_string_lossy().into_owned()))
    }

    /// One copy pass of at most about `max_bytes` of a move of the partition's log into `future`
    /// (a directory in another log dir), without the GIL: (bytes copied, the log's generation, the
    /// log end offset it copied up to, whether it copied everything it listed).
    fn copy_to_future(&self, py: Python<'_>, topic: String, partition: i32, future: PathBuf, max_bytes: u64) -> PyResult<(u64, u64, i64, bool)> {
        let mgr = self.mgr.clone();
        let pass = run(py, move || mgr.copy_to_future(&topic, partition, &future, max_bytes))?;
        Ok((pass.copied, pass.generation, pass.copied_end_offset, pass.complete))
    }

    /// Finish a move: the last bytes copied and the copy swapped in under the log's lock (appends
    /// wait), without the GIL; False if the log was truncated or cleaned since `generation`.
    fn swap_in_future(&self, py: Python<'_>, topic: String, partition: i32, future: PathBuf, generation: u64) -> PyResult<bool> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.swap_in_future(&topic, partition, &future, generation))
    }

    /// Offline log dirs (path, the error that took it offline).
    #[getter]
    fn offline_dirs(&self) -> Vec<(String, String)> {
        self.mgr.offline_dirs().into_iter().map(|(p, e)| (p.to_string_lossy().into_owned(), e)).collect()
    }

    /// The cordoned log dirs (`cordoned.log.dirs`, KIP-1066).
    #[getter]
    fn cordoned_dirs(&self) -> Vec<String> {
        self.mgr.cordoned_dirs().into_iter().map(|p| p.to_string_lossy().into_owned()).collect()
    }

    /// Cordon `log_dirs` (each one of `log_dirs`) and uncordon the others: a new log is made in a
    /// cordoned dir only when it is named, or when every online dir is cordoned.
    fn set_cordoned_dirs(&self, log_dirs: Vec<PathBuf>) -> PyResult<()> {
        self.mgr.set_cordoned_dirs(&log_dirs).map_err(err)
    }

    /// Take the log dir `log_dir` offline over `error`; True if it was online.
    fn mark_dir_offline(&self, py: Python<'_>, log_dir: PathBuf, error: &str) -> PyResult<bool> {
        let changed = self.mgr.mark_dir_offline(&log_dir, error).map_err(err)?;
        emit_warnings(py);
        Ok(changed)
    }

    fn partitions(&self) -> Vec<(String, i32)> {
        self.mgr.partitions()
    }

    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.checkpoint())
    }

    fn flush_all(&self, py: Python<'_>) -> PyResult<()> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.flush_all())
    }

    /// Flush logs whose `flush_ms` elapsed; call periodically. Returns how many flushed.
    #[pyo3(signature = (now_ms=None))]
    fn flush_due(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<usize> {
        let mgr = self.mgr.clone();
        let now = now_or(now_ms);
        run(py, move || mgr.flush_due(now))
    }

    #[pyo3(signature = (now_ms=None))]
    fn apply_retention(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<usize> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.apply_retention(now_ms))
    }

    /// Remove deleted segments' `*.deleted` files once their `file_delete_delay_ms` has passed;
    /// call periodically. Returns how many segments' files were removed.
    #[pyo3(signature = (now_ms=None))]
    fn delete_expired_files(&self, py: Python<'_>, now_ms: Option<i64>) -> PyResult<usize> {
        let mgr = self.mgr.clone();
        let now = now_or(now_ms);
        run(py, move || mgr.delete_expired_files(now))
    }

    /// Flush and close every log on `threads` threads, then write the checkpoints and the
    /// clean-shutdown marker.
    #[pyo3(signature = (threads=1))]
    fn close(&self, py: Python<'_>, threads: usize) -> PyResult<()> {
        let mgr = self.mgr.clone();
        run(py, move || mgr.close_with(threads))
    }

    /// Start the log cleaner: `threads` background threads (no GIL) compacting every log whose
    /// cleanup policy holds "compact". Kafka's `log.cleaner.*` settings.
    #[pyo3(signature = (*, threads=1, dedupe_buffer_size=134217728, dedupe_buffer_load_factor=0.9,
        io_buffer_size=524288, backoff_ms=15000, producer_id_expiration_ms=86400000,
        io_max_bytes_per_second=1.7976931348623157e308))]
    #[allow(clippy::too_many_arguments)]
    fn start_cleaner(
        &self,
        py: Python<'_>,
        threads: usize,
        dedupe_buffer_size: u64,
        dedupe_buffer_load_factor: f64,
        io_buffer_size: u64,
        backoff_ms: u64,
        producer_id_expiration_ms: i64,
        io_max_bytes_per_second: f64,
    ) -> PyResult<()> {
        let cfg = cleaner_config(
            threads,
            dedupe_buffer_size,
            dedupe_buffer_load_factor,
            io_buffer_size,
            backoff_ms,
            producer_id_expiration_ms,
            io_max_bytes_per_second,
        )?;
        let mgr = self.mgr.clone();
        run(py, move || mgr.start_cleaner(cfg))
    }

    /// Make the cleaner threads look for work now (instead of after their backoff).
    fn wake_cleaner(&self) {
        self.mgr.wake_cleaner();
    }

    /// The cleaner's counters summed over its passes, None if it was not started.
    fn cleaner_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        emit_warnings(py);
        match self.mgr.cleaner_stats() {
            Some(s) => Ok(Some(stats_dict(py, &s)?)),
            None => Ok(None),
        }
    }

    /// (topic, partition, first dirty offset) of every partition the cleaner has cleaned.
    fn cleaner_checkpoints(&self) -> Vec<(String, i32, i64)> {
        self.mgr.cleaner_checkpoints()
    }

    fn __len__(&self) -> usize {
        self.mgr.partitions().len()
    }
}

/// Send `count` bytes of `in_fd` from `offset` to `out_fd` without copying through user
/// space (Linux `sendfile`; elsewhere `pread` + `write`). Returns the bytes sent, which may
/// be fewer than asked (non-blocking socket); raises `BlockingIOError` if none could be.
#[pyfunction]
fn sendfile(py: Python<'_>, out_fd: i32, in_fd: i32, offset: i64, count: usize) -> PyResult<usize> {
    if offset < 0 {
        return Err(PyValueError::new_err(format!("offset must be >= 0, got {offset}")));
    }
    let r = py.detach(move || native_sendfile(out_fd, in_fd, offset, count));
    r.map_err(PyErr::from)
}

#[cfg(target_os = "linux")]
fn native_sendfile(out_fd: i32, in_fd: i32, offset: i64, count: usize) -> std::io::Result<usize> {
    let mut off: libc::off_t = offset as libc::off_t;
    loop {
        // SAFETY: plain syscall on caller-provided descriptors; `off` outlives the call.
        let n = unsafe { libc::sendfile(out_fd, in_fd, &mut off, count) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
fn native_sendfile(out_fd: i32, in_fd: i32, offset: i64, count: usize) -> std::io::Result<usize> {
    let mut buf = vec![0u8; count.min(1 << 20)];
    // SAFETY: plain syscalls on caller-provided descriptors into our own buffer.
    let n = unsafe { libc::pread(in_fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), offset as libc::off_t) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let w = unsafe { libc::write(out_fd, buf.as_ptr() as *const libc::c_void, n as usize) };
    if w < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(w as usize)
}

#[cfg(not(unix))]
fn native_sendfile(_out_fd: i32, _in_fd: i32, _offset: i64, _count: usize) -> std::io::Result<usize> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "sendfile is not supported on this platform"))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add("CorruptLogError", py.get_type::<CorruptLogError>())?;
    m.add("OffsetOutOfRange", py.get_type::<OffsetOutOfRange>())?;
    m.add("RecordTooLargeError", py.get_type::<RecordTooLargeError>())?;
    m.add_class::<PyLogConfig>()?;
    m.add_class::<PyAppendResult>()?;
    m.add_class::<PyFileSlice>()?;
    m.add_class::<PyReadResult>()?;
    m.add_class::<PyPartitionLog>()?;
    m.add_class::<PyLogManager>()?;
    m.add_function(wrap_pyfunction!(sendfile, m)?)?;
    Ok(())
}
