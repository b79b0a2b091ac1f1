//! Reading Python inputs in place, without per-record objects or copies where the input allows:
//!
//! * bytes-like arguments (bytes, bytearray, memoryview, NumPy arrays, mmap, ...) through the
//!   buffer protocol; the export is held until the call ends, which also stops a bytearray
//!   from being resized under us (CPython raises BufferError on resize while exported);
//! * Arrow arrays and chunked arrays (pyarrow, or anything else speaking the Arrow PyCapsule
//!   interface) through the Arrow C data interface, read from their buffers;
//! * NumPy `S<n>` and 2-D uint8 arrays as fixed-width rows;
//! * lists/tuples/object arrays item by item, in Rust.
//!
//! Everything borrowed is owned by a `Keep`, which must outlive the borrowed views: views are
//! created with an unbounded lifetime (`detach_lifetime`) and the callers drop them before the
//! `Keep`. Views are plain slices, so they can be read with the GIL released.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use klog_core::columnar_encode::{
    BinaryInput, Bitmap, ColumnsError, Header, HeadersInput, Offsets, TimestampsInput,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString, PyTuple};

/// `Py_buffer` as CPython lays it out (3.10 and later; in the stable ABI from 3.11).
#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

// The buffer protocol joined the limited API in 3.11; CPython 3.10 exports the same functions
// with the same struct, so the abi3-py310 build declares them itself.
extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}
/// A contiguous byte buffer, no format or shape.
const PYBUF_SIMPLE: c_int = 0;
/// C-contiguous, with format, shape and strides (`PyBUF_C_CONTIGUOUS | PyBUF_FORMAT`).
const PYBUF_C_CONTIGUOUS_FORMAT: c_int = 0x0038 | 0x0004;

/// An exported buffer, released on drop (the owner keeps the GIL held when dropping).
pub struct ExportedBuffer {
    view: Box<RawBuffer>,
}

impl Drop for ExportedBuffer {
    fn drop(&mut self) {
        // SAFETY: filled by a successful PyObject_GetBuffer; dropped with the GIL held (the
        // owners are !Send and live in #[pyfunction] frames).
        unsafe { PyBuffer_Release(&mut *self.view) };
    }
}

impl ExportedBuffer {
    fn get(obj: &Bound<'_, PyAny>, flags: c_int) -> PyResult<Self> {
        // SAFETY: zeroed is a valid empty Py_buffer; GetBuffer fills it or fails.
        let mut view: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: obj is live and the GIL is held (we have a Bound).
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *view, flags) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(ExportedBuffer { view })
    }

    pub fn bytes(&self) -> &[u8] {
        let v = &self.view;
        if v.buf.is_null() || v.len <= 0 {
            return &[];
        }
        // SAFETY: the exporter guarantees `len` readable bytes at `buf` until release.
        unsafe { std::slice::from_raw_parts(v.buf as *const u8, v.len as usize) }
    }

    /// A writable C-contiguous buffer of `obj` (bytearray, writable memoryview, NumPy array).
    pub fn writable(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<Self> {
        const PYBUF_WRITABLE: c_int = 0x0001;
        ExportedBuffer::get(obj, PYBUF_WRITABLE).map_err(|cause| {
            let e = PyTypeError::new_err(format!(
                "{argument} must be a writable C-contiguous buffer (bytearray, writable memoryview), not {}",
                type_name(obj)
            ));
            e.set_cause(obj.py(), Some(cause));
            e
        })
    }

    /// The bytes of a buffer exported with PYBUF_WRITABLE.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let v = &self.view;
        if v.buf.is_null() || v.len <= 0 || v.readonly != 0 {
            return &mut [];
        }
        // SAFETY: a writable export of `len` bytes, exclusively ours while the GIL is held.
        unsafe { std::slice::from_raw_parts_mut(v.buf as *mut u8, v.len as usize) }
    }

    fn format(&self) -> &str {
        if self.view.format.is_null() {
            return "B";
        }
        // SAFETY: a NUL-terminated format string owned by the exporter.
        unsafe { CStr::from_ptr(self.view.format) }
            .to_str()
            .unwrap_or("")
    }

    fn shape(&self) -> Vec<usize> {
        let v = &self.view;
        if v.shape.is_null() || v.ndim <= 0 {
            return vec![v.len.max(0) as usize];
        }
        // SAFETY: `ndim` entries at `shape` while exported.
        unsafe { std::slice::from_raw_parts(v.shape, v.ndim as usize) }
            .iter()
            .map(|&d| d.max(0) as usize)
            .collect()
    }
}

/// Give a borrow the lifetime of the `Keep` that owns its memory.
///
/// SAFETY: the caller guarantees the memory stays valid and unmodified-in-size while the
/// returned reference is used (it is owned by a `Keep` that outlives every view).
#[inline(always)]
unsafe fn detach_lifetime<'a, T: ?Sized>(r: &T) -> &'a T {
    &*(r as *const T)
}

// --- Arrow C data interface -------------------------------------------------------------

#[repr(C)]
struct FfiSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut FfiSchema,
    dictionary: *mut FfiSchema,
    release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct FfiArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut FfiArray,
    dictionary: *mut FfiArray,
    release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct FfiStream {
    get_schema: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut FfiStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut FfiStream)>,
    private_data: *mut c_void,
}

/// A schema or array moved out of its capsule (or a stream), released on drop.
struct OwnedSchema(Box<FfiSchema>);
struct OwnedArray(Box<FfiArray>);
struct OwnedStream(Box<FfiStream>);

impl Drop for OwnedSchema {
    fn drop(&mut self) {
        if let Some(r) = self.0.release {
            // SAFETY: a live exported schema; release marks it released.
            unsafe { r(&mut *self.0) };
        }
    }
}
impl Drop for OwnedArray {
    fn drop(&mut self) {
        if let Some(r) = self.0.release {
            // SAFETY: as above.
            unsafe { r(&mut *self.0) };
        }
    }
}
impl Drop for OwnedStream {
    fn drop(&mut self) {
        if let Some(r) = self.0.release {
            // SAFETY: as above.
            unsafe { r(&mut *self.0) };
        }
    }
}

/// Move the struct out of a PyCapsule named `name`, marking the capsule's copy released (the
/// Arrow PyCapsule protocol: the consumer takes ownership).
///
/// SAFETY: `T` must be the struct the capsule name stands for, with `release` at
/// `release_of`.
unsafe fn take_capsule<T>(
    capsule: &Bound<'_, PyAny>,
    name: &CStr,
    clear_release: impl FnOnce(*mut T),
) -> PyResult<Box<T>> {
    let p = ffi::PyCapsule_GetPointer(capsule.as_ptr(), name.as_ptr()) as *mut T;
    if p.is_null() {
        return Err(PyErr::fetch(capsule.py()));
    }
    let owned = Box::new(ptr::read(p));
    clear_release(p);
    Ok(owned)
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// Convert every item of a Python iterable with `row` (given the item's index, for its error
/// message). Anything not iterable gets a TypeError: "`expected()`, not <its type>".
fn collect_rows<'py, T>(
    obj: &Bound<'py, PyAny>,
    expected: impl FnOnce() -> String,
    mut row: impl FnMut(usize, Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Vec<T>> {
    let it = obj
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{}, not {}", expected(), type_name(obj))))?;
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in it.enumerate() {
        out.push(row(i, item?)?);
    }
    Ok(out)
}

fn input_err(e: ColumnsError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Owner of everything the views borrow. Drop it only after the views (and with the GIL).
#[derive(Default)]
pub struct Keep<'py> {
    buffers: Vec<ExportedBuffer>,
    schemas: Vec<OwnedSchema>,
    arrays: Vec<OwnedArray>,
    objects: Vec<Bound<'py, PyAny>>,
    owned: Vec<Vec<u8>>,
    owned_i64: Vec<Vec<i64>>,
    owned_i32: Vec<Vec<i32>>,
}

/// The Arrow schema format strings we read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArrowKind {
    Null,
    Binary,
    LargeBinary,
    FixedBinary(usize),
    Int64,
    Int32,
    /// A timestamp; the factor converts it to ms: (multiply, divide).
    Timestamp(i64, i64),
    List,
    LargeList,
    Struct,
    Other,
}

fn arrow_kind(format: &str) -> ArrowKind {
    match format {
        "n" => ArrowKind::Null,
        "z" | "u" => ArrowKind::Binary,
        "Z" | "U" => ArrowKind::LargeBinary,
        "l" => ArrowKind::Int64,
        "i" => ArrowKind::Int32,
        "+l" => ArrowKind::List,
        "+L" => ArrowKind::LargeList,
        "+s" => ArrowKind::Struct,
        f if f.starts_with("w:") => f[2..]
            .parse()
            .map(ArrowKind::FixedBinary)
            .unwrap_or(ArrowKind::Other),
        f if f.starts_with("tss:") => ArrowKind::Timestamp(1000, 1),
        f if f.starts_with("tsm:") => ArrowKind::Timestamp(1, 1),
        f if f.starts_with("tsu:") => ArrowKind::Timestamp(1, 1000),
        f if f.starts_with("tsn:") => ArrowKind::Timestamp(1, 1_000_000),
        _ => ArrowKind::Other,
    }
}

/// Borrowed views of one Arrow array node and its schema node.
#[derive(Clone, Copy)]
struct Node<'a> {
    schema: &'a FfiSchema,
    array: &'a FfiArray,
}

impl<'a> Node<'a> {
    fn format(&self) -> &'a str {
        if self.schema.format.is_null() {
            return "";
        }
        // SAFETY: NUL-terminated, owned by the schema.
        unsafe { CStr::from_ptr(self.schema.format) }
            .to_str()
            .unwrap_or("")
    }
    fn name(&self) -> &'a str {
        if self.schema.name.is_null() {
            return "";
        }
        // SAFETY: as above.
        unsafe { CStr::from_ptr(self.schema.name) }
            .to_str()
            .unwrap_or("")
    }
    fn len(&self) -> usize {
        self.array.length.max(0) as usize
    }
    fn offset(&self) -> usize {
        self.array.offset.max(0) as usize
    }
    fn child(&self, i: usize, argument: &'static str) -> PyResult<Node<'a>> {
        let n = self.array.n_children.min(self.schema.n_children).max(0) as usize;
        if i >= n || self.array.children.is_null() || self.schema.children.is_null() {
            return Err(PyTypeError::new_err(format!(
                "{argument}: Arrow {} array has no child {i}",
                self.format()
            )));
        }
        // SAFETY: `n_children` valid child pointers each, owned by the parent.
        unsafe {
            let s = *self.schema.children.add(i);
            let a = *self.array.children.add(i);
            if s.is_null() || a.is_null() {
                return Err(PyTypeError::new_err(format!(
                    "{argument}: Arrow child {i} is missing"
                )));
            }
            Ok(Node {
                schema: &*s,
                array: &*a,
            })
        }
    }
    /// Buffer `i` as `count` items of `T` (None for a null pointer).
    fn buffer<T>(
        &self,
        i: usize,
        count: usize,
        argument: &'static str,
    ) -> PyResult<Option<&'a [T]>> {
        if i >= self.array.n_buffers.max(0) as usize || self.array.buffers.is_null() {
            return Err(PyTypeError::new_err(format!(
                "{argument}: Arrow {} array has no buffer {i}",
                self.format()
            )));
        }
        // SAFETY: `n_buffers` pointers; a non-null buffer holds what the layout requires for
        // `offset + length` rows (the Arrow C data interface contract).
        unsafe {
            let p = *self.array.buffers.add(i);
            if p.is_null() {
                return Ok(None);
            }
            if (p as usize) % std::mem::align_of::<T>() != 0 {
                return Err(PyValueError::new_err(format!(
                    "{argument}: Arrow buffer {i} is not aligned"
                )));
            }
            Ok(Some(std::slice::from_raw_parts(p as *const T, count)))
        }
    }
    fn validity(&self, argument: &'static str) -> PyResult<Option<Bitmap<'a>>> {
        if self.array.null_count == 0 || self.len() == 0 {
            return Ok(None);
        }
        let bytes = (self.offset() + self.len()).div_ceil(8);
        match self.buffer::<u8>(0, bytes, argument)? {
            None => Ok(None),
            Some(bits) => Bitmap::new(bits, self.offset(), self.len(), argument)
                .map(Some)
                .map_err(input_err),
        }
    }
    fn offsets(&self, large: bool, argument: &'static str) -> PyResult<Offsets<'a>> {
        let (off, n) = (self.offset(), self.len());
        let missing = || PyValueError::new_err(format!("{argument}: Arrow offsets buffer is null"));
        Ok(if large {
            let o = self
                .buffer::<i64>(1, off + n + 1, argument)?
                .ok_or_else(missing)?;
            Offsets::I64(&o[off..])
        } else {
            let o = self
                .buffer::<i32>(1, off + n + 1, argument)?
                .ok_or_else(missing)?;
            Offsets::I32(&o[off..])
        })
    }
}

impl<'py> Keep<'py> {
    fn hold(&mut self, obj: &Bound<'py, PyAny>) {
        self.objects.push(obj.clone());
    }

    fn own(&mut self, v: Vec<u8>) -> &'static [u8] {
        self.owned.push(v);
        let last = self.owned.last().map(|v| v.as_slice()).unwrap_or(&[]);
        // SAFETY: a Vec's heap buffer does not move when the outer Vec grows.
        unsafe { detach_lifetime(last) }
    }

    /// Import `obj` through `__arrow_c_array__` or `__arrow_c_stream__`; returns the nodes (one
    /// per chunk) owned by this Keep, or None if `obj` speaks neither.
    fn arrow_nodes(
        &mut self,
        obj: &Bound<'py, PyAny>,
        argument: &'static str,
    ) -> PyResult<Option<Vec<Node<'static>>>> {
        let py = obj.py();
        if obj.hasattr(pyo3::intern!(py, "__arrow_c_array__"))? {
            let pair = obj.call_method0(pyo3::intern!(py, "__arrow_c_array__"))?;
            let pair = pair.cast::<PyTuple>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "{argument}: __arrow_c_array__ did not return a tuple"
                ))
            })?;
            if pair.len() != 2 {
                return Err(PyTypeError::new_err(format!(
                    "{argument}: __arrow_c_array__ did not return (schema, array)"
                )));
            }
            // SAFETY: capsule names identify the structs (Arrow PyCapsule interface).
            let schema = unsafe {
                take_capsule::<FfiSchema>(&pair.get_item(0)?, c"arrow_schema", |p| {
                    (*p).release = None
                })?
            };
            let schema = OwnedSchema(schema);
            let array = unsafe {
                take_capsule::<FfiArray>(&pair.get_item(1)?, c"arrow_array", |p| {
                    (*p).release = None
                })?
            };
            let array = OwnedArray(array);
            // SAFETY: boxed, owned by self until drop.
            let node = unsafe {
                Node {
                    schema: detach_lifetime(&*schema.0),
                    array: detach_lifetime(&*array.0),
                }
            };
            self.schemas.push(schema);
            self.arrays.push(array);
            return Ok(Some(vec![node]));
        }
        if obj.hasattr(pyo3::intern!(py, "__arrow_c_stream__"))? {
            let cap = obj.call_method0(pyo3::intern!(py, "__arrow_c_stream__"))?;
            // SAFETY: as above.
            let stream = unsafe {
                take_capsule::<FfiStream>(&cap, c"arrow_array_stream", |p| (*p).release = None)?
            };
            let mut stream = OwnedStream(stream);
            let stream_err = |s: &mut OwnedStream, what: &str| {
                let msg =
                    s.0.get_last_error
                        // SAFETY: a live stream; the message is NUL-terminated or null.
                        .map(|f| unsafe { f(&mut *s.0) })
                        .filter(|p| !p.is_null())
                        .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
                        .unwrap_or_default();
                PyValueError::new_err(format!("{argument}: Arrow stream {what} failed: {msg}"))
            };
            // SAFETY: zeroed = released (null release) schema/array, filled by the callbacks.
            let mut schema = OwnedSchema(Box::new(unsafe { std::mem::zeroed() }));
            let get_schema = stream
                .0
                .get_schema
                .ok_or_else(|| stream_err(&mut stream, "get_schema"))?;
            if unsafe { get_schema(&mut *stream.0, &mut *schema.0) } != 0 {
                return Err(stream_err(&mut stream, "get_schema"));
            }
            let get_next = stream
                .0
                .get_next
                .ok_or_else(|| stream_err(&mut stream, "get_next"))?;
            let schema_ref: &'static FfiSchema = unsafe { detach_lifetime(&*schema.0) };
            self.schemas.push(schema);
            let mut nodes = Vec::new();
            loop {
                let mut array = OwnedArray(Box::new(unsafe { std::mem::zeroed() }));
                if unsafe { get_next(&mut *stream.0, &mut *array.0) } != 0 {
                    return Err(stream_err(&mut stream, "get_next"));
                }
                if array.0.release.is_none() {
                    break; // end of stream
                }
                nodes.push(Node {
                    schema: schema_ref,
                    array: unsafe { detach_lifetime(&*array.0) },
                });
                self.arrays.push(array);
            }
            return Ok(Some(nodes));
        }
        Ok(None)
    }

    fn arrow_binary(
        &mut self,
        node: Node<'static>,
        argument: &'static str,
    ) -> PyResult<BinaryInput<'static>> {
        let n = node.len();
        let kind = arrow_kind(node.format());
        if !node.schema.dictionary.is_null() {
            return Err(PyTypeError::new_err(format!(
                "{argument}: dictionary-encoded Arrow arrays are not supported; decode them first (pyarrow: .dictionary_decode())"
            )));
        }
        match kind {
            ArrowKind::Null => Ok(BinaryInput::Rows(vec![None; n])),
            _ if n == 0 && matches!(kind, ArrowKind::Binary | ArrowKind::LargeBinary | ArrowKind::FixedBinary(_)) => {
                Ok(BinaryInput::Rows(Vec::new()))
            }
            ArrowKind::Binary | ArrowKind::LargeBinary => {
                let offsets = node.offsets(kind == ArrowKind::LargeBinary, argument)?;
                let end = match offsets {
                    Offsets::I32(o) => o.get(n).copied().unwrap_or(0) as i64,
                    Offsets::I64(o) => o.get(n).copied().unwrap_or(0),
                };
                if end < 0 {
                    return Err(PyValueError::new_err(format!("{argument}: negative Arrow offset {end}")));
                }
                let data = node.buffer::<u8>(2, end as usize, argument)?.unwrap_or(&[]);
                BinaryInput::variable(offsets, data, node.validity(argument)?, n, argument).map_err(input_err)
            }
            ArrowKind::FixedBinary(w) => {
                let total = w.saturating_mul(node.offset() + n);
                let data = node.buffer::<u8>(1, total, argument)?.unwrap_or(&[]);
                let data = data.get(w.saturating_mul(node.offset())..).unwrap_or(&[]);
                BinaryInput::fixed(data, w, node.validity(argument)?, n, argument).map_err(input_err)
            }
            _ => Err(PyTypeError::new_err(format!(
                "{argument}: Arrow arrays must be binary, large_binary, string, large_string or fixed_size_binary, not format {:?}",
                node.format()
            ))),
        }
    }

    /// A required column of byte strings (`values`, `keys`, header keys/values of per-row
    /// lists): Arrow arrays/chunked arrays, NumPy `S<n>` or 2-D uint8 arrays, or a sequence of
    /// `bytes | str | None` (str is UTF-8 encoded; bytearray/memoryview items are copied).
    pub fn binary(
        &mut self,
        obj: &Bound<'py, PyAny>,
        argument: &'static str,
    ) -> PyResult<BinaryInput<'static>> {
        if let Some(nodes) = self.arrow_nodes(obj, argument)? {
            let mut chunks = Vec::with_capacity(nodes.len());
            for node in nodes {
                chunks.push(self.arrow_binary(node, argument)?);
            }
            return Ok(if chunks.len() == 1 {
                chunks.pop().unwrap_or(BinaryInput::Rows(Vec::new()))
            } else {
                BinaryInput::chunked(chunks)
            });
        }
        if obj.is_instance_of::<PyBytes>()
            || obj.is_instance_of::<PyString>()
            || obj.is_instance_of::<PyByteArray>()
        {
            return Err(PyTypeError::new_err(format!(
                "{argument} must be a column (list, NumPy or Arrow array) of values, not a single {}",
                type_name(obj)
            )));
        }
        if !obj.is_instance_of::<PyList>() && !obj.is_instance_of::<PyTuple>() {
            if let Ok(buf) = ExportedBuffer::get(obj, PYBUF_C_CONTIGUOUS_FORMAT) {
                if let Some(col) = self.fixed_width_buffer(buf, argument)? {
                    return Ok(col);
                }
            } else {
                // Not a (C-contiguous) buffer: fall back to iterating.
                let _ = PyErr::take(obj.py());
            }
        }
        self.binary_rows(obj, argument).map(BinaryInput::Rows)
    }

    /// NumPy `S<n>` (1-D) or uint8 (2-D) rows; `None` for other formats (object, unicode:
    /// iterate those instead).
    fn fixed_width_buffer(
        &mut self,
        buf: ExportedBuffer,
        argument: &'static str,
    ) -> PyResult<Option<BinaryInput<'static>>> {
        let format = buf
            .format()
            .trim_start_matches(['@', '=', '<', '>', '!', '|'])
            .to_string();
        let shape = buf.shape();
        let itemsize = buf.view.itemsize.max(0) as usize;
        let numpy_bytes = format.ends_with('s') && shape.len() == 1;
        let width_rows = if numpy_bytes {
            Some((itemsize, shape[0]))
        } else if (format == "B" || format == "b" || format == "c") && shape.len() == 2 {
            Some((shape[1], shape[0]))
        } else if (format == "B" || format == "b") && shape.len() == 1 {
            return Err(PyTypeError::new_err(format!(
                "{argument}: a 1-D uint8 array is one value, not a column; use a 2-D (rows, width) array, an 'S<n>' array or a list"
            )));
        } else {
            None
        };
        let Some((width, rows)) = width_rows else {
            return Ok(None);
        };
        // SAFETY: the export is kept until the Keep drops.
        let data: &'static [u8] = unsafe { detach_lifetime(buf.bytes()) };
        self.buffers.push(buf);
        if numpy_bytes {
            return BinaryInput::numpy_bytes(data, width, rows, argument)
                .map(Some)
                .map_err(input_err);
        }
        BinaryInput::fixed(data, width, None, rows, argument)
            .map(Some)
            .map_err(input_err)
    }

    /// One item of a sequence column.
    fn item_bytes(
        &mut self,
        item: &Bound<'py, PyAny>,
        argument: &'static str,
        row: usize,
    ) -> PyResult<Option<&'static [u8]>> {
        self.item_bytes_in(item, argument, row, false)
    }

    /// `held`: the item is already kept alive by a held immutable container (a tuple).
    fn item_bytes_in(
        &mut self,
        item: &Bound<'py, PyAny>,
        argument: &'static str,
        row: usize,
        held: bool,
    ) -> PyResult<Option<&'static [u8]>> {
        if item.is_none() {
            return Ok(None);
        }
        if let Ok(b) = item.cast::<PyBytes>() {
            // SAFETY: bytes are immutable; the object is held by the Keep (or its tuple).
            let s = unsafe { detach_lifetime(b.as_bytes()) };
            if !held {
                self.hold(item);
            }
            return Ok(Some(s));
        }
        if let Ok(s) = item.cast::<PyString>() {
            return Ok(Some(match s.to_cow()? {
                // SAFETY: the UTF-8 form is cached in the (held, immutable) str object.
                std::borrow::Cow::Borrowed(b) => {
                    let b = unsafe { detach_lifetime(b.as_bytes()) };
                    if !held {
                        self.hold(item);
                    }
                    b
                }
                std::borrow::Cow::Owned(o) => self.own(o.into_bytes()),
            }));
        }
        // bytearray, memoryview, NumPy bytes scalars...: copied, their contents may change.
        match ExportedBuffer::get(item, PYBUF_SIMPLE) {
            Ok(buf) => Ok(Some(self.own(buf.bytes().to_vec()))),
            Err(_) => Err(PyTypeError::new_err(format!(
                "{argument}[{row}] must be bytes, str or None, not {}",
                type_name(item)
            ))),
        }
    }

    fn binary_rows(
        &mut self,
        obj: &Bound<'py, PyAny>,
        argument: &'static str,
    ) -> PyResult<Vec<Option<&'static [u8]>>> {
        // A list is snapshotted as a tuple (one C-level pass of increfs): its items then stay
        // alive, whatever happens to the list, while the tuple is held - no per-item hold.
        let tuple = if let Ok(list) = obj.cast::<PyList>() {
            Some(list.to_tuple())
        } else {
            obj.cast::<PyTuple>().ok().cloned()
        };
        if let Some(tuple) = tuple {
            self.hold(tuple.as_any());
            let mut out = Vec::with_capacity(tuple.len());
            for i in 0..tuple.len() {
                let item = tuple.get_borrowed_item(i)?;
                out.push(self.item_bytes_in(&item, argument, i, true)?);
            }
            return Ok(out);
        }
        collect_rows(
            obj,
            || format!("{argument} must be a list, NumPy array or Arrow array of bytes"),
            |i, item| self.item_bytes(&item, argument, i),
        )
    }

    /// `None` (now), an int (every record), or one int64 per row: NumPy int64, Arrow int64 or
    /// timestamp (any unit, converted to ms), or a sequence of `int | None` (None = now).
    pub fn timestamps(
        &mut self,
        obj: Option<&Bound<'py, PyAny>>,
        now: i64,
    ) -> PyResult<TimestampsInput<'static>> {
        const ARG: &str = "timestamps";
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(TimestampsInput::Constant(now));
        };
        if let Ok(t) = obj.extract::<i64>() {
            return Ok(TimestampsInput::Constant(t));
        }
        if let Some(nodes) = self.arrow_nodes(obj, ARG)? {
            let mut all: Vec<i64> = Vec::new();
            let mut validity: Vec<u8> = Vec::new();
            let mut any_null = false;
            let single = nodes.len() == 1;
            for node in nodes {
                let (mul, div) = match arrow_kind(node.format()) {
                    ArrowKind::Int64 => (1, 1),
                    ArrowKind::Timestamp(m, d) => (m, d),
                    _ => {
                        return Err(PyTypeError::new_err(format!(
                        "timestamps: Arrow arrays must be int64 (ms) or timestamp, not format {:?}",
                        node.format()
                    )))
                    }
                };
                let n = node.len();
                let vals: &[i64] = if n == 0 {
                    &[]
                } else {
                    let v = node
                        .buffer::<i64>(1, node.offset() + n, ARG)?
                        .ok_or_else(|| {
                            PyValueError::new_err("timestamps: Arrow data buffer is null")
                        })?;
                    &v[node.offset()..]
                };
                let bits = node.validity(ARG)?;
                if single && mul == 1 && div == 1 {
                    return Ok(TimestampsInput::Column {
                        values: vals,
                        validity: bits,
                        default: now,
                    });
                }
                for (i, &v) in vals.iter().enumerate() {
                    let ok = bits.map_or(true, |b| b.is_valid(i));
                    let row = all.len();
                    if row % 8 == 0 {
                        validity.push(0);
                    }
                    if ok {
                        if let Some(last) = validity.last_mut() {
                            *last |= 1 << (row % 8);
                        }
                    } else {
                        any_null = true;
                    }
                    all.push(v.saturating_mul(mul).div_euclid(div));
                }
            }
            let n = all.len();
            self.owned_i64.push(all);
            let values: &'static [i64] = unsafe {
                detach_lifetime(self.owned_i64.last().map(|v| v.as_slice()).unwrap_or(&[]))
            };
            let validity = if any_null {
                let bits = self.own(validity);
                Some(Bitmap::new(bits, 0, n, ARG).map_err(input_err)?)
            } else {
                None
            };
            return Ok(TimestampsInput::Column {
                values,
                validity,
                default: now,
            });
        }
        if !obj.is_instance_of::<PyList>() && !obj.is_instance_of::<PyTuple>() {
            if let Ok(buf) = ExportedBuffer::get(obj, PYBUF_C_CONTIGUOUS_FORMAT) {
                let format = buf
                    .format()
                    .trim_start_matches(['@', '=', '<', '|'])
                    .to_string();
                let shape = buf.shape();
                if !(matches!(format.as_str(), "q" | "l")
                    && buf.view.itemsize == 8
                    && shape.len() == 1)
                {
                    return Err(PyTypeError::new_err(format!(
                        "timestamps: arrays must be 1-D int64 (ms since the epoch), not format {format:?} with shape {shape:?}"
                    )));
                }
                let bytes = buf.bytes();
                let values: &'static [i64] = if (bytes.as_ptr() as usize) % 8 == 0 {
                    // SAFETY: aligned, `len / 8` int64s, export held by the Keep.
                    let s = unsafe {
                        std::slice::from_raw_parts(bytes.as_ptr() as *const i64, bytes.len() / 8)
                    };
                    let s = unsafe { detach_lifetime(s) };
                    self.buffers.push(buf);
                    s
                } else {
                    let v: Vec<i64> = bytes
                        .chunks_exact(8)
                        .map(|c| i64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
                        .collect();
                    self.owned_i64.push(v);
                    unsafe {
                        detach_lifetime(self.owned_i64.last().map(|v| v.as_slice()).unwrap_or(&[]))
                    }
                };
                return Ok(TimestampsInput::Column {
                    values,
                    validity: None,
                    default: now,
                });
            }
            let _ = PyErr::take(obj.py());
        }
        let values = collect_rows(
            obj,
            || "timestamps must be None, an int, or a column of ints (list, NumPy int64, Arrow int64/timestamp)".into(),
            |i, t| {
                if t.is_none() {
                    return Ok(now);
                }
                t.extract::<i64>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "timestamps[{i}] must be an int (ms since the epoch) or None, not {}",
                        type_name(&t)
                    ))
                })
            },
        )?;
        self.owned_i64.push(values);
        let values =
            unsafe { detach_lifetime(self.owned_i64.last().map(|v| v.as_slice()).unwrap_or(&[])) };
        Ok(TimestampsInput::Column {
            values,
            validity: None,
            default: now,
        })
    }

    /// One header list: `[(key: str | bytes, value: bytes | str | None), ...]` or a dict.
    fn header_list(
        &mut self,
        obj: &Bound<'py, PyAny>,
        argument: &'static str,
        row: Option<usize>,
    ) -> PyResult<Vec<Header<'static>>> {
        let at = |j: usize| match row {
            Some(r) => format!("{argument}[{r}][{j}]"),
            None => format!("{argument}[{j}]"),
        };
        let items = if let Ok(d) = obj.cast::<pyo3::types::PyDict>() {
            d.items().into_any()
        } else {
            obj.clone()
        };
        let expected = || {
            let label = match row {
                Some(r) => format!("{argument}[{r}]"),
                None => argument.to_string(),
            };
            format!("{label} must be a list of (str, bytes | None) pairs")
        };
        collect_rows(&items, expected, |j, h| {
            let pair: (Bound<'py, PyAny>, Bound<'py, PyAny>) = h.extract().map_err(|_| {
                PyTypeError::new_err(format!("{} must be a (str, bytes | None) pair", at(j)))
            })?;
            if pair.0.is_none() {
                return Err(PyTypeError::new_err(format!(
                    "{}: header key must be a str, not None",
                    at(j)
                )));
            }
            let k = self
                .item_bytes(&pair.0, argument, j)
                .map_err(|_| PyTypeError::new_err(format!("{}: header key must be a str", at(j))))?
                .unwrap_or(&[]);
            let v = self.item_bytes(&pair.1, argument, j).map_err(|_| {
                PyTypeError::new_err(format!(
                    "{}: header value must be bytes, str or None",
                    at(j)
                ))
            })?;
            Ok((k, v))
        })
    }

    /// Headers applied to every record.
    pub fn shared_headers(
        &mut self,
        obj: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Header<'static>>> {
        match obj.filter(|o| !o.is_none()) {
            None => Ok(Vec::new()),
            Some(o) => self.header_list(o, "shared_headers", None),
        }
    }

    /// Per-row headers: an Arrow `list<struct<key, value>>` (Spark's Kafka sink layout) or a
    /// sequence with one header list (or None) per row.
    pub fn headers(&mut self, obj: Option<&Bound<'py, PyAny>>) -> PyResult<HeadersInput<'static>> {
        const ARG: &str = "headers";
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(HeadersInput::None);
        };
        if let Some(nodes) = self.arrow_nodes(obj, ARG)? {
            if nodes.len() != 1 {
                // Chunked headers: flatten per row (rare; Spark hands one chunk per batch).
                let mut rows = Vec::new();
                for node in nodes {
                    let h = self.arrow_headers(node)?;
                    for i in 0..node.len() {
                        rows.push(arrow_row_headers(&h, i)?);
                    }
                }
                return Ok(HeadersInput::Rows(rows));
            }
            return self.arrow_headers(nodes[0]);
        }
        let rows = collect_rows(
            obj,
            || "headers must be one header list per row (list or Arrow list<struct<key, value>>)".into(),
            |i, r| if r.is_none() { Ok(Vec::new()) } else { self.header_list(&r, ARG, Some(i)) },
        )?;
        Ok(HeadersInput::Rows(rows))
    }

    fn arrow_headers(&mut self, node: Node<'static>) -> PyResult<HeadersInput<'static>> {
        const ARG: &str = "headers";
        let kind = arrow_kind(node.format());
        if !matches!(kind, ArrowKind::List | ArrowKind::LargeList) {
            return Err(PyTypeError::new_err(format!(
                "headers: Arrow arrays must be list<struct<key: string, value: binary>>, not format {:?}",
                node.format()
            )));
        }
        let n = node.len();
        let st = node.child(0, ARG)?;
        if arrow_kind(st.format()) != ArrowKind::Struct {
            return Err(PyTypeError::new_err(format!(
                "headers: list items must be struct<key, value>, not format {:?}",
                st.format()
            )));
        }
        let nchild = st.schema.n_children.max(0) as usize;
        let mut key_i = None;
        let mut value_i = None;
        for i in 0..nchild {
            match st.child(i, ARG)?.name() {
                "key" => key_i = Some(i),
                "value" => value_i = Some(i),
                _ => {}
            }
        }
        let (Some(ki), Some(vi)) = (key_i, value_i) else {
            return Err(PyTypeError::new_err(
                "headers: list items must be struct<key, value> with fields named key and value",
            ));
        };
        let keys = self.arrow_binary(st.child(ki, ARG)?, ARG)?;
        let values = self.arrow_binary(st.child(vi, ARG)?, ARG)?;
        let list_offsets = if n == 0 {
            Offsets::I32(&[0])
        } else {
            node.offsets(kind == ArrowKind::LargeList, ARG)?
        };
        HeadersInput::lists(
            list_offsets,
            node.validity(ARG)?,
            st.offset(),
            st.len(),
            st.validity(ARG)?,
            keys,
            values,
            n,
        )
        .map_err(input_err)
    }

    /// Row numbers to encode: NumPy int64/int32 arrays or a sequence of ints.
    pub fn rows(
        &mut self,
        obj: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<klog_core::columnar_encode::Rows<'static>> {
        use klog_core::columnar_encode::Rows;
        let Some(obj) = obj.filter(|o| !o.is_none()) else {
            return Ok(Rows::All);
        };
        if !obj.is_instance_of::<PyList>() && !obj.is_instance_of::<PyTuple>() {
            if let Ok(buf) = ExportedBuffer::get(obj, PYBUF_C_CONTIGUOUS_FORMAT) {
                let format = buf
                    .format()
                    .trim_start_matches(['@', '=', '<', '|'])
                    .to_string();
                let size = buf.view.itemsize;
                let bytes = buf.bytes();
                let p = bytes.as_ptr() as usize;
                let rows = match (format.as_str(), size) {
                    ("q" | "l", 8) if p % 8 == 0 => {
                        // SAFETY: aligned int64s, export held by the Keep.
                        Rows::I64(unsafe {
                            detach_lifetime(std::slice::from_raw_parts(
                                bytes.as_ptr() as *const i64,
                                bytes.len() / 8,
                            ))
                        })
                    }
                    ("i" | "l", 4) if p % 4 == 0 => {
                        // SAFETY: aligned int32s, export held by the Keep.
                        Rows::I32(unsafe {
                            detach_lifetime(std::slice::from_raw_parts(
                                bytes.as_ptr() as *const i32,
                                bytes.len() / 4,
                            ))
                        })
                    }
                    _ => {
                        return Err(PyTypeError::new_err(format!(
                            "rows: arrays must be aligned 1-D int64 or int32, not format {format:?}"
                        )))
                    }
                };
                self.buffers.push(buf);
                return Ok(rows);
            }
            let _ = PyErr::take(obj.py());
        }
        let v: Vec<i64> = obj.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "rows must be a sequence or NumPy array of ints, not {}",
                type_name(obj)
            ))
        })?;
        self.owned_i64.push(v);
        Ok(Rows::I64(unsafe {
            detach_lifetime(self.owned_i64.last().map(|v| v.as_slice()).unwrap_or(&[]))
        }))
    }

    #[allow(dead_code)]
    fn own_i32(&mut self, v: Vec<i32>) -> &'static [i32] {
        self.owned_i32.push(v);
        unsafe { detach_lifetime(self.owned_i32.last().map(|v| v.as_slice()).unwrap_or(&[])) }
    }
}

/// Row `i` of a single-chunk Arrow headers input as owned-by-Keep slices (the core's row
/// accessor checks null headers and keys).
fn arrow_row_headers(h: &HeadersInput<'static>, i: usize) -> PyResult<Vec<Header<'static>>> {
    Ok(h.row(i).map_err(input_err)?.collect())
}

/// A bytes-like argument read in place: `bytes` directly, anything else through the buffer
/// protocol (C-contiguous), holding the export for the duration of the call.
pub enum ByteInput<'py> {
    Bytes(Bound<'py, PyBytes>),
    Buffer(ExportedBuffer),
}

impl<'py> ByteInput<'py> {
    pub fn from_object(obj: &Bound<'py, PyAny>, argument: &str) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(ByteInput::Bytes(b.clone()));
        }
        if obj.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(format!(
                "{argument} must be a bytes-like object, not str"
            )));
        }
        ExportedBuffer::get(obj, PYBUF_SIMPLE).map(ByteInput::Buffer).map_err(|cause| {
            let e = PyTypeError::new_err(format!(
                "{argument} must be a C-contiguous bytes-like object (bytes, bytearray, memoryview, NumPy array, mmap), not {}",
                type_name(obj)
            ));
            e.set_cause(obj.py(), Some(cause));
            e
        })
    }

    pub fn as_slice(&self) -> &[u8] {
        match self {
            ByteInput::Bytes(b) => b.as_bytes(),
            ByteInput::Buffer(e) => e.bytes(),
        }
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for ByteInput<'py> {
    type Error = PyErr;
    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        ByteInput::from_object(&obj.to_owned(), "data")
    }
}
